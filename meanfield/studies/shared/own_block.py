"""A user's own block and law for a study (`--block FILE.py:Name`, `--law`): loaded, made
in the study's precision, and tried on the data before anything runs (`check_block_law`:
one line naming the option for a block or law that does not fit), for the mean-ODE study
and the variance study alike.
"""

import dataclasses
import hashlib
import inspect
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from ...blocks.base import AbstractLayerBlock, AbstractUnitBlock, LayerUnits
from ...blocks.two_layer import TwoLayerBlock
from ...coupling.convergence import circle_data
from ...harness.args import USER_ERRORS, load_object, user_error
from ...harness.runner import study_precision
from ...laws.unit import (
    AbstractGaussianLaw,
    AbstractLaw,
    TwoLayerGaussianLaw,
    TwoLayerNonCentredLaw,
)
from ...runtime.errors import StudyInputError

# options that set the built-in 2LP block (refused with --block) or its law (with --law)
BUILT_IN_BLOCK = {"activation": "--activation"}


BUILT_IN_LAW = {
    "init": "--init",
    "sigma_u": "--sigma-u",
    "sigma_v": "--sigma-v",
    "sigma_xi": "--sigma-xi",
}


def describe_user_object(value) -> str:
    """How the configuration records a `--block` / `--law`: the spec as given, or the
    object's type and repr (the Python API)."""
    if isinstance(value, str):
        return value
    if inspect.isfunction(value) or inspect.ismethod(value):  # a law's factory: its own name
        return f"{value.__module__}.{value.__qualname__}"[:300]
    kind = value if isinstance(value, type) else type(value)
    text = f"{kind.__module__}.{kind.__qualname__}"
    if isinstance(value, eqx.Module):
        text += f" {value!r}"
    return text[:300]


def content_digest(obj, spec=None) -> str | None:
    """A SHA-256 of what a user's block or law computes: the source files of its classes
    and functions (and of `spec`'s file, for `FILE.py:NAME`), its pytree's structure and
    every leaf's value (arrays by their bytes, dtype and shape), a function's closure
    too. None where that is not known (source that cannot be read, a value known only by
    its address): such an object is never looked up by content (`harness.cache`)."""
    digest, files = hashlib.sha256(), set()
    if isinstance(spec, str) and spec.rpartition(":")[0].endswith(".py"):
        files.add(str(Path(spec.rpartition(":")[0]).resolve()))
    if not _feed(digest, obj, files, 0):
        return None
    try:
        for name in sorted(files):
            digest.update(Path(name).read_bytes())
    except OSError:
        return None
    return digest.hexdigest()


def record_user_code(cfg: dict, block, law, block_arg, law_arg) -> None:
    """A user's block and law in the configuration by their content (`block_sha256`,
    `law_sha256`; None where not known): a resume or the artifact cache after an edit of
    their file is another configuration."""
    if block_arg is not None:
        cfg["block_sha256"] = content_digest(block, block_arg)
    if law_arg is not None:
        cfg["law_sha256"] = content_digest(law, law_arg)


def known_by_content(cfg: dict) -> bool:
    """Whether the configuration names all a study's artifacts depend on: no user's code,
    or the user's block and law known by their content (`record_user_code`): then they
    may be kept in the artifact cache."""
    return None not in (cfg.get("block_sha256", ""), cfg.get("law_sha256", ""))


def _feed(digest, obj, files: set, depth: int) -> bool:
    """`obj`'s content into `digest` and its classes' and functions' source files into
    `files`; False where some part of it is not known by content."""
    if depth > 8:
        return False
    if isinstance(obj, jax.Array | np.ndarray | np.generic):
        array = np.asarray(obj)
        digest.update(f"{array.dtype}{array.shape}".encode() + array.tobytes())
        return True
    if obj is None or isinstance(obj, bool | int | float | complex | str | bytes):
        digest.update(repr(obj).encode())
        return True
    if inspect.isfunction(obj):
        files.add(_source_file(obj))
        digest.update(obj.__qualname__.encode())
        cells = [cell.cell_contents for cell in obj.__closure__ or ()]
        return None not in files and all(_feed(digest, c, files, depth + 1) for c in cells)
    if isinstance(obj, list | tuple | dict):
        items = sorted(obj.items(), key=repr) if isinstance(obj, dict) else enumerate(obj)
        digest.update(type(obj).__name__.encode())
        return all(_feed(digest, k, files, depth + 1) and _feed(digest, v, files, depth + 1)
                   for k, v in items)  # fmt: skip
    if not isinstance(obj, eqx.Module):
        return False
    files.update(_source_file(k) for k in type(obj).__mro__ if k.__module__ != "builtins")
    digest.update(type(obj).__qualname__.encode())
    fields = [(f.name, getattr(obj, f.name, None)) for f in dataclasses.fields(obj)]
    return None not in files and _feed(digest, fields, files, depth + 1)


def _source_file(kind) -> str | None:
    """The file a class or function is defined in, or None (made in C or at run time)."""
    try:
        return inspect.getsourcefile(kind)
    except TypeError:
        return None


def quadrature_applies(law) -> bool:
    """A Gaussian law whose default node budget gives at least 8 nodes per coordinate."""
    if not isinstance(law, AbstractGaussianLaw):
        return False
    return QUADRATURE_NODES ** (1.0 / law.gaussian_dim) >= 8


def study_block_law(args, cfg):
    """The block (a unit block; a layer block wrapped as `LayerUnits`) and its law: the
    built-in 2LP and its law from the configuration, or the user's `--block` / `--law`
    (specs, or objects from the Python API), each tried on a draw and on the data: a bad
    one is a one-line StudyInputError naming the option."""
    block_arg, law_arg = getattr(args, "block", None), getattr(args, "law", None)
    with study_precision(cfg["x64"]):  # made and tried in the precision the study runs in
        block = TwoLayerBlock(cfg["activation"]) if block_arg is None else user_block(block_arg)
        law = make_law(cfg) if law_arg is None else user_law(law_arg)
        try:
            check_block_law(block, law, make_data(cfg)[0])
        except StudyInputError as err:
            if block_arg is not None or law_arg is not None:
                raise
            # the built-in block and law: the options that set them are at fault
            flags = "/".join(f for n, f in BUILT_IN_LAW.items() if n in cfg)
            raise StudyInputError(f"{flags}: {str(err).partition(': ')[2]}") from None
    return block, law


def user_block(value):
    """`--block` as a unit block (see `study_block_law`)."""
    obj = load_object(value, "--block") if isinstance(value, str) else value
    name = value if isinstance(value, str) else repr(value)
    if isinstance(obj, type):
        if not issubclass(obj, AbstractUnitBlock | AbstractLayerBlock):
            raise StudyInputError(
                f"--block: {name} is the class {obj.__name__}, not a subclass of "
                "AbstractUnitBlock or AbstractLayerBlock"
            )
        try:
            obj = obj()
        except USER_ERRORS as err:
            raise StudyInputError(
                f"--block: {obj.__name__}() failed ({user_error(err)}); "
                "name an instance instead of the class"
            ) from None
    if isinstance(obj, AbstractLayerBlock):
        return LayerUnits(obj)
    if isinstance(obj, AbstractUnitBlock):
        return obj
    raise StudyInputError(
        f"--block: {name} is a {type(obj).__name__}, not an AbstractUnitBlock or "
        "AbstractLayerBlock (class or instance)"
    )


def user_law(value):
    """`--law` as an `AbstractLaw` (an instance, or a function of no arguments or a class
    that gives one)."""
    obj = load_object(value, "--law") if isinstance(value, str) else value
    name = value if isinstance(value, str) else repr(value)
    if isinstance(obj, AbstractLaw):
        return obj
    if callable(obj):
        try:
            law = obj()
        except USER_ERRORS as err:
            raise StudyInputError(f"--law: calling {name}() failed ({user_error(err)})") from None
        if isinstance(law, AbstractLaw):
            return law
        raise StudyInputError(f"--law: {name}() gives a {type(law).__name__}, not an AbstractLaw")
    raise StudyInputError(
        f"--law: {name} is a {type(obj).__name__}, not an AbstractLaw or a function of no "
        "arguments returning one"
    )


def check_block_law(block, law, xs) -> None:
    """One draw of `law` must be a pytree of float arrays of at least the state's
    precision, and φ(x, z) a finite vector of the state's shape and dtype at every
    input."""
    try:
        z = law.sample(jr.key(0))
    except USER_ERRORS as err:
        raise StudyInputError(f"--law: sampling failed ({user_error(err)})") from None
    leaves = jax.tree.leaves(z)
    bad = [type(v).__name__ for v in leaves if not _float_array(v)]
    if not leaves or bad:
        what = ", ".join(sorted(set(bad))) or "no arrays"
        raise StudyInputError(f"--law: a draw must be a pytree of float arrays, got {what}")
    low = sorted({str(v.dtype) for v in leaves if v.dtype.itemsize < xs.dtype.itemsize})
    if low:  # float16 overflows at 65504 and stalls the reference solver
        raise StudyInputError(
            f"--law: a draw holds {', '.join(low)} arrays, below the study's precision "
            f"({xs.dtype}); draw in {xs.dtype}"
        )
    d = xs.shape[1]
    try:
        out = jax.vmap(lambda x: block(x, z))(xs)
    except USER_ERRORS as err:
        raise StudyInputError(
            f"--block: φ(h, z) failed on the data (d = {d}) and a draw of the law "
            f"({user_error(err)})"
        ) from None
    if out.shape != xs.shape:
        raise StudyInputError(
            f"--block: φ(h, z) has shape {tuple(out.shape[1:])}; it must be the state's "
            f"({d},) (set the dimension with --d)"
        )
    if out.dtype != xs.dtype:
        raise StudyInputError(
            f"--block: φ(h, z) returns {out.dtype}; it must return the state's dtype ({xs.dtype})"
        )
    if not bool(jnp.all(jnp.isfinite(out))):
        raise StudyInputError("--block: φ(h, z) is not finite at the data for a draw of the law")


def _float_array(v) -> bool:
    return hasattr(v, "dtype") and hasattr(v, "shape") and jnp.issubdtype(v.dtype, jnp.floating)


# default quadrature budget: order 256 for 2 Gaussian coordinates, 16 for 4
QUADRATURE_NODES = 2**16


def make_law(cfg):
    if cfg["init"] == "centred":
        return TwoLayerGaussianLaw(cfg["d"], sigma_u=cfg["sigma_u"], sigma_v=cfg["sigma_v"])
    return TwoLayerNonCentredLaw(cfg["d"], sigma_u=cfg["sigma_u"], sigma_xi=cfg["sigma_xi"])


def make_data(cfg):
    """The study's data set, `meanfield.coupling.convergence.circle_data`."""
    return circle_data(cfg["inputs"], cfg["d"])
