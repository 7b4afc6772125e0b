"""What computed a study's results: the versions of meanfield and its numerical
dependencies, the device, the precision (`versions`), and the identity of the code
(`code_identity`: the version, a digest of the package's sources, the JAX releases) that
every point file's hash carries, so that `--resume` reuses points only of the same code."""

import functools
import hashlib
import os
from pathlib import Path


def device_description() -> str:
    import jax

    dev = jax.devices()[0]
    return f"{dev.platform}:{dev.device_kind} x{jax.device_count()}"


def versions() -> dict:
    """The versions a result was computed with: meanfield and its numerical dependencies,
    Python, the device kind, the float precision, and (`known_bad_release`) the listed
    defect of the installed JAX release when the study was run on it by override
    (`meanfield.runtime.releases`), else None."""
    import platform
    from importlib import metadata

    import jax

    from ..runtime.releases import describe, known_bad

    def version(pkg):
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return None

    packages = ("meanfield-resnets", "jax", "jaxlib", "diffrax", "equinox", "optax", "numpy")
    out = {pkg: version(pkg) for pkg in packages}
    out["meanfield"] = out.pop("meanfield-resnets") or _package_version()
    out["python"] = platform.python_version()
    out["device"] = device_description()
    out["float"] = "float64" if jax.config.read("jax_enable_x64") else "float32"
    bad = known_bad()
    out["known_bad_release"] = describe(bad) if bad is not None else None
    return out


@functools.cache
def source_digest() -> str:
    """SHA-256 of the meanfield package's Python sources (every `.py` file under the
    installed package, `meanfield.solvers` included, by relative path and content): a
    study's points are reused on `--resume` only by the code that computed them."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    files = []
    for folder, _dirs, names in os.walk(root, followlinks=True):
        files += [Path(folder) / n for n in names if n.endswith(".py")]
    for path in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def code_identity() -> dict:
    """What computed a study's points, beside its configuration: the meanfield version and
    source digest, and the jax and jaxlib releases (`config.json`, and the hash every point
    file carries)."""
    from ..runtime.releases import installed

    return {"meanfield": _package_version(), "source_sha256": source_digest(), **installed()}


def code_change(old, new: dict) -> str:
    """What differs between two `code_identity` records, in words."""
    if not isinstance(old, dict):
        return "a configuration without a record of its code"
    changes = [
        f"{k} {old.get(k)} -> {new[k]}"
        for k in ("meanfield", "jax", "jaxlib")
        if old.get(k) != new[k]
    ]
    if old.get("source_sha256") != new["source_sha256"]:
        changes.append("the meanfield source changed")
    return ", ".join(changes) or "unknown"


def _package_version() -> str:
    from .._version import __version__

    return __version__
