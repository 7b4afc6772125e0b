"""argparse value types shared by the studies: errors name the bad value in one line."""

import argparse
import math


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


SEED_LIMIT = 2**31


def seed_int(text: str) -> int:
    """A master seed: an integer in [0, 2^31) (what `jax.random.key` and numpy's
    generators both take)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed, got {text!r}") from None
    if not 0 <= value < SEED_LIMIT:
        raise argparse.ArgumentTypeError(f"expected a seed in [0, 2^31), got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _list(text: str, convert, what: str) -> list:
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of {what}, got {text!r}")
    try:
        values = [convert(p) for p in parts]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of {what}, got {text!r}"
        ) from None
    if any(b <= a for a, b in zip(values, values[1:], strict=False)):
        raise argparse.ArgumentTypeError(f"values must be strictly increasing, got {text!r}")
    return values


def int_list(text: str) -> list[int]:
    """`4,8,16`: positive integers, strictly increasing."""
    return _list(text, positive_int, "positive integers")


def float_list(text: str) -> list[float]:
    """`0.25,0.5,1`: finite numbers, strictly increasing."""

    def number(p):
        try:
            v = float(p)
        except ValueError:
            raise argparse.ArgumentTypeError(p) from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(p)
        return v

    return _list(text, number, "numbers")


def override(cfg: dict, args, names) -> dict:
    """`cfg` with the value of every option in `names` that was given (not None) put in."""
    for name in names:
        value = getattr(args, name, None)
        if value is not None:
            cfg[name] = value
    return cfg


def check_activation(name) -> None:
    """`--activation` must name a built-in activation (StudyInputError otherwise)."""
    from ..activations import ACTIVATIONS
    from .runner import StudyInputError

    if name not in ACTIVATIONS:
        raise StudyInputError(
            f"--activation: unknown {name!r}; use one of {', '.join(ACTIVATIONS)}"
        )


def load_object(spec: str, flag: str):
    """The object named by `spec`, `module:name` (importable, e.g. from PYTHONPATH) or
    `path/to/file.py:name`; a one-line `StudyInputError` naming `flag` otherwise."""
    import importlib
    import importlib.util
    import os
    import sys

    from .runner import StudyInputError

    where, sep, name = str(spec).rpartition(":")
    if not sep or not where or not name.isidentifier():
        raise StudyInputError(
            f"{flag}: {spec!r} is not MODULE:NAME or PATH.py:NAME (e.g. myblocks:SineUnit)"
        )
    if where.endswith(".py"):
        if not os.path.isfile(where):
            raise StudyInputError(f"{flag}: no such file {where!r}")
        module_name = f"meanfield_user_{abs(hash(os.path.abspath(where)))}"
        loader_spec = importlib.util.spec_from_file_location(module_name, where)
        if loader_spec is None or loader_spec.loader is None:
            raise StudyInputError(f"{flag}: cannot load {where!r} as Python")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module
        try:
            loader_spec.loader.exec_module(module)
        except USER_ERRORS as err:  # the user's file: any error, reported in one line
            sys.modules.pop(module_name, None)
            raise StudyInputError(
                f"{flag}: importing {where!r} failed: {user_error(err)}"
            ) from None
    else:
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as err:
            raise StudyInputError(
                f"{flag}: cannot import module {where!r} ({_first_line(err)}); is it on PYTHONPATH?"
            ) from None
        except USER_ERRORS as err:
            raise StudyInputError(
                f"{flag}: importing {where!r} failed: {user_error(err)}"
            ) from None
    if not hasattr(module, name):
        raise StudyInputError(f"{flag}: {where!r} has no {name!r}")
    return getattr(module, name)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


# what a user's block, law or file may raise and a study reports in one line naming its
# option: any error, and exit() (SystemExit), which would otherwise end the study silently
USER_ERRORS = (Exception, SystemExit)


def user_error(err: BaseException) -> str:
    """A user's error in a few words: "TypeError: the first line", or "it called
    exit(0)"."""
    if isinstance(err, SystemExit):
        return f"it called exit({err.code!r})" if err.code is not None else "it called exit()"
    return f"{type(err).__name__}: {_first_line(err)}"


def available_memory() -> int:
    """Bytes of memory this machine can give a study: `MEANFIELD_MEMORY_LIMIT` (bytes;
    a stated limit) if set, else the kernel's MemAvailable, else the physical memory; a
    limit that is not a positive finite number is refused in one line."""
    import math
    import os

    from .runner import StudyInputError

    limit = os.environ.get("MEANFIELD_MEMORY_LIMIT")
    if limit:
        try:
            value = float(limit)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise StudyInputError(
                f"MEANFIELD_MEMORY_LIMIT: {limit!r} is not a positive number of bytes "
                "(e.g. 8e9); unset it to use the machine's available memory"
            )
        return int(value)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2**34


def _gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:.3g} GB"


def check_memory(flags: str, nbytes: float, what: str) -> None:
    """Refuse (`StudyInputError`, one line naming `flags`) a configuration whose estimated
    memory `nbytes` for `what` exceeds `available_memory()`; called before anything is
    allocated or written."""
    from .runner import StudyInputError

    limit = available_memory()
    if not math.isfinite(nbytes) or nbytes > limit:
        raise StudyInputError(
            f"{flags}: {what} needs about {_gb(nbytes)} of memory, more than the "
            f"{_gb(limit)} available (MEANFIELD_MEMORY_LIMIT sets another limit)"
        )


def check_size(flags: str, value: float, limit: float, what: str) -> None:
    """Refuse (`StudyInputError`, one line naming `flags`) a size beyond a stated limit."""
    from .runner import StudyInputError

    if not value <= limit:
        raise StudyInputError(f"{flags}: {what} is {value:.4g}, beyond the limit of {limit:.4g}")
