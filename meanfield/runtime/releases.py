"""JAX releases known to compute wrong results, and the refusal to run on them.

A compiler release that returns wrong numbers without an error is worse than one that
crashes: every figure made with it looks plausible. The releases listed in `KNOWN_BAD`
are excluded by the package's dependencies, and `meanfield info` and every study refuse
to start on them (one line: the release, why, and the fix) unless the user overrides
explicitly (`--allow-known-bad-jax`, or the environment variable
`MEANFIELD_ALLOW_KNOWN_BAD_JAX=1`), which `results.json` then records
(`versions.known_bad_release`). `import meanfield` warns on them.

A release that is not listed is not thereby trusted: `meanfield canary` compares every
compiled hot path with the same function run op by op at the widths where compilers
change their tiling, and every study recomputes one of its grid points op by op
(`results.json`: `self_check`).
"""

import dataclasses
import os
import warnings

OVERRIDE_ENV = "MEANFIELD_ALLOW_KNOWN_BAD_JAX"
OVERRIDE_FLAG = "--allow-known-bad-jax"


@dataclasses.dataclass(frozen=True)
class KnownBadRelease:
    """A release of `package` that computes wrong results: `why` (one sentence) and
    `reference` (where it is reported)."""

    package: str
    version: str
    why: str
    reference: str


KNOWN_BAD: tuple[KnownBadRelease, ...] = (
    KnownBadRelease(
        "jaxlib",
        "0.10.2",
        "its CPU compiler miscompiles jit(grad) of a broadcast-and-mean inner product "
        "(gradients wrong by ~100% at widths near 2000 and 4096)",
        "jax-ml/jax#39103",
    ),
    KnownBadRelease("jax", "0.10.2", "it is paired with jaxlib 0.10.2", "jax-ml/jax#39103"),
)


class KnownBadReleaseError(RuntimeError):
    """The installed JAX release is listed in `KNOWN_BAD` and no override was given."""


def installed() -> dict[str, str]:
    """The installed versions of jax and jaxlib (their distributions' metadata: read
    without importing JAX, at `import meanfield`)."""
    from importlib import metadata

    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "unknown"

    return {"jax": version("jax"), "jaxlib": version("jaxlib")}


def known_bad(versions: dict[str, str] | None = None) -> KnownBadRelease | None:
    """The first entry of `KNOWN_BAD` that the installed (or given) versions match."""
    versions = installed() if versions is None else versions
    for entry in KNOWN_BAD:
        if versions.get(entry.package) == entry.version:
            return entry
    return None


def override_from_env() -> bool:
    """Whether `MEANFIELD_ALLOW_KNOWN_BAD_JAX` asks to run on a known-bad release."""
    return os.environ.get(OVERRIDE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def describe(entry: KnownBadRelease) -> str:
    """`jaxlib 0.10.2: why (reference)`."""
    return f"{entry.package} {entry.version}: {entry.why} ({entry.reference})"


def refusal(entry: KnownBadRelease) -> str:
    """The one line a refused start prints: the release, why, and the fix."""
    return (
        f"{entry.package} {entry.version} is known to compute wrong results: {entry.why} "
        f"({entry.reference}); install another release: pip install 'jax!={entry.version}' "
        f"'jaxlib!={entry.version}' (or pass {OVERRIDE_FLAG}, which results.json records)"
    )


def check_release(*, allow: bool = False) -> KnownBadRelease | None:
    """Refuse a known-bad release (`KnownBadReleaseError`, one line) unless `allow` or the
    environment variable `MEANFIELD_ALLOW_KNOWN_BAD_JAX` says to run on it anyway.

    **Returns:** the matching `KnownBadRelease` when overridden, else None."""
    entry = known_bad()
    if entry is None:
        return None
    if allow or override_from_env():
        return entry
    raise KnownBadReleaseError(refusal(entry))


def warn_on_import() -> None:
    """A `UserWarning` when the installed release is known to be bad (`import meanfield`)."""
    try:
        entry = known_bad()
    except Exception:  # never let the check break an import
        return
    if entry is not None:
        warnings.warn(refusal(entry), UserWarning, stacklevel=3)
