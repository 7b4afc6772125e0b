"""argparse value types shared by the studies: errors name the bad value in one line."""

import argparse
import contextlib
import math
import sys
import threading
from collections.abc import Callable

from ..runtime.memory import available_memory, env_limit


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if value >= INT_LIMIT:
        raise argparse.ArgumentTypeError(f"expected a positive integer below 2^62, got {text!r}")
    return value


# no size, count or chunk of any study comes near it; beyond it numpy and XLA overflow
INT_LIMIT = 2**62


def for_backend(table: dict):
    """The entry of `table` for JAX's default backend ("cpu", "gpu", ...), else its
    `"default"`: a study's setting that depends on the machine (batch sizes, padding)."""
    import jax

    return table.get(jax.default_backend(), table["default"])


# a grid point runs inside a larger point's compiled program (`coupling.design.program_boxes`)
# when the padding adds at most this many unit coordinates, seeds x (extra units x D): on a
# CPU, where a padded coordinate costs what a real one costs, less than a compile (`study
# shapes --preset quick` on a 2-core CPU: a point of 12 draws ran in 0.09 s in the box
# (16, 64, 128), 1.6 M coordinates, and in 0.38 s in (64, 64, 128), 6.3 M, while each
# program compiled in 2.4-8 s); on an accelerator, where small shapes leave it idle, far
# more (a guess, not yet measured)
PAD_COORDINATES = {"cpu": 2**22, "default": 2**28}


def add_pad_argument(parser, what: str) -> None:
    """`--pad-coordinates`: the padding budget of a study that batches small shapes."""
    parser.add_argument(
        "--pad-coordinates",
        type=nonnegative_int,
        help="run a grid point inside a larger point's compiled program when the padding "
        f"adds at most this many unit coordinates, seeds x (extra {what}) (default 2^22 on "
        "CPU, 2^28 on GPU/TPU; 0: one program per shape); the values agree up to rounding",
    )


def pad_budget(args) -> int:
    """`--pad-coordinates`, else the default for JAX's backend (`PAD_COORDINATES`)."""
    given = getattr(args, "pad_coordinates", None)
    return for_backend(PAD_COORDINATES) if given is None else given


def nonnegative_int(text: str) -> int:
    """An integer in [0, 2^62) (a number of steps, a padding): 0 allowed."""
    if text.strip() == "0":
        return 0
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected an integer >= 0 (below 2^62), got {text!r}"
        ) from None


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


def _finite_number(text: str, accept: Callable[[float], bool], what: str) -> float:
    """`text` as a finite float that `accept`s, else argparse's error: "expected WHAT"."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not (math.isfinite(value) and accept(value)):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_float(text: str) -> float:
    return _finite_number(text, lambda value: value > 0, "a positive number")


def nonnegative_float(text: str) -> float:
    return _finite_number(text, lambda value: value >= 0, "a number >= 0")


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


def preset_config(args, defaults: dict, presets: dict, names, **fixed) -> dict:
    """A study's configuration: its `defaults`, then its preset `presets[args.preset]`, then
    `fixed` (values taken from `args` as they are, such as `--weights`) with the preset's
    name, the seed and `x64`, then every option in `names` that was given (`override`)."""
    cfg = {
        **defaults,
        **presets[args.preset],
        **fixed,
        "preset": args.preset,
        "seed": args.seed,
        "x64": args.x64,
    }
    return override(cfg, args, names)


# the options of the studies of a ResNet of 2LP units at initialisation (`add_unit_arguments`)
UNIT_OPTIONS = ("L", "M", "gammas", "d", "activation")


def add_unit_arguments(parser, *, gammas: list, d: int, activation: str) -> None:
    """`--L`, `--M`, `--gammas` (α = L^-γ / sqrt(M)), `--d` and `--activation` (`UNIT_OPTIONS`)
    of the studies of a ResNet of 2LP units at initialisation, with the study's defaults."""
    parser.add_argument("--L", type=int_list, default=[4, 16, 64, 256], help="depths")
    parser.add_argument("--M", type=positive_int, default=4, help="units per layer (4)")
    shown = ",".join(f"{g:g}" for g in gammas)
    parser.add_argument(
        "--gammas",
        type=float_list,
        default=list(gammas),
        help=f"α = L^-γ / sqrt(M) for each γ ({shown})",
    )
    parser.add_argument("--d", type=positive_int, default=d, help=f"dimension ({d})")
    parser.add_argument(
        "--activation", default=activation, help=f"ρ of the 2LP unit ({activation})"
    )


def check_unit_arguments(args) -> None:
    """The options of `add_unit_arguments` that argparse does not check: `--activation` a
    built-in one, every γ in (0, 3] (StudyInputError otherwise)."""
    from ..runtime.errors import StudyInputError

    check_activation(args.activation)
    if any(not 0 < g <= 3 for g in args.gammas):
        raise StudyInputError(f"--gammas: values must lie in (0, 3], got {args.gammas}")


def check_activation(name) -> None:
    """`--activation` must name a built-in activation (StudyInputError otherwise)."""
    from ..blocks.activations import ACTIVATIONS
    from ..runtime.errors import StudyInputError

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

    from ..runtime.errors import StudyInputError

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
            with user_code(flag, f"importing {where}"):
                loader_spec.loader.exec_module(module)
        except USER_FILE_ERRORS as err:  # the user's file: any error, reported in one line
            sys.modules.pop(module_name, None)
            raise StudyInputError(
                f"{flag}: importing {where!r} failed: {user_error(err)}"
            ) from None
    else:
        try:
            with user_code(flag, f"importing {where}"):
                module = importlib.import_module(where)
        except ModuleNotFoundError as err:
            raise StudyInputError(
                f"{flag}: cannot import module {where!r} ({_first_line(err)}); is it on PYTHONPATH?"
            ) from None
        except USER_FILE_ERRORS as err:
            raise StudyInputError(
                f"{flag}: importing {where!r} failed: {user_error(err)}"
            ) from None
    if not hasattr(module, name):
        raise StudyInputError(f"{flag}: {where!r} has no {name!r}")
    return getattr(module, name)


# a user's code (a file imported, a table or block first called) still running after this
# many seconds is named on stderr, in one line: a loop in it shows which file it is in (not
# sooner: a block's first trial compiles, seconds on a loaded machine, and a refusal after
# it must stay one line)
USER_CODE_NOTE_SECONDS = 10.0


# the user_code contexts open, innermost last: one line at most for them all, the innermost's
_USER_CODE: list = []


@contextlib.contextmanager
def user_code(flag: str, what: str, *, after: float | None = None):
    """Run a user's code (`what`, e.g. "importing mine.py") inside: if it has not
    returned within `after` seconds (default `USER_CODE_NOTE_SECONDS`), one line on
    stderr names it, `meanfield: --block: still importing mine.py after 2 s (Ctrl-C
    stops it)`; stopped inside by SIGINT or SIGTERM (`Interrupted`, inside the command
    line's `stop_on_signals`), it is named at once if it was not yet, before the stop's
    own line. Code that returns in time prints nothing (a refusal stays one line); of
    nested contexts (a file imported while a block is tried) only the innermost speaks,
    once."""
    from ..runtime.interrupt import Interrupted

    delay = USER_CODE_NOTE_SECONDS if after is None else after
    me = threading.Event() if not _USER_CODE else _USER_CODE[0]  # said: shared when nested

    def note(text: str) -> None:
        if not me.is_set() and _USER_CODE and _USER_CODE[-1] is token:
            me.set()
            sys.stderr.write(f"meanfield: {flag}: {text}\n")
            sys.stderr.flush()

    token = me if not _USER_CODE else object()
    timer = threading.Timer(delay, note, (f"still {what} after {delay:g} s (Ctrl-C stops it)",))
    timer.daemon = True
    _USER_CODE.append(token)
    _STOPPED.append(lambda: note(f"stopped while {what}"))
    timer.start()
    try:
        yield
    except Interrupted:
        timer.cancel()
        note(f"stopped while {what}")
        raise
    finally:
        timer.cancel()
        _USER_CODE.pop()
        _STOPPED.pop()


# the innermost open context's note, said when a signal stops the run inside it
_STOPPED: list = []


def name_stopped_user_code() -> None:
    """Where a signal ends the run from its handler (the command line of one process, which
    does not unwind), name the user's code it stopped, as `user_code` does on the way out."""
    if _STOPPED:
        _STOPPED[-1]()


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


# what a user's block, law or file may raise and a study reports in one line naming its
# option: any error, and exit() (SystemExit), which would otherwise end the study silently
USER_ERRORS = (Exception, SystemExit)
# what a user's file may raise while it is imported or its table is called: also
# KeyboardInterrupt raised by the file itself (a real Ctrl-C inside the command line is
# `runtime.interrupt.Interrupted`, which passes)
USER_FILE_ERRORS = (*USER_ERRORS, KeyboardInterrupt)


def user_error(err: BaseException) -> str:
    """A user's error in a few words: "TypeError: the first line", or "it called
    exit(0)"."""
    if isinstance(err, SystemExit):
        return f"it called exit({err.code!r})" if err.code is not None else "it called exit()"
    if isinstance(err, KeyboardInterrupt):
        return "it raised KeyboardInterrupt"
    return f"{type(err).__name__}: {_first_line(err)}"


def _gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:.3g} GB"


def check_memory(flags: str, nbytes: float, what: str) -> None:
    """Refuse (`StudyInputError`, one line naming `flags`) a configuration whose estimated
    memory `nbytes` for `what` exceeds `available_memory()`; called before anything is
    allocated or written."""
    from ..runtime.errors import StudyInputError

    limit = available_memory()
    if not math.isfinite(nbytes) or nbytes > limit:
        raise StudyInputError(
            f"{flags}: {what} needs about {_gb(nbytes)} of memory, more than the "
            f"{_gb(limit)} available (MEANFIELD_MEMORY_LIMIT sets another limit)"
        )


def check_size(flags: str, value: float, limit: float, what: str) -> None:
    """Refuse (`StudyInputError`, one line naming `flags`) a size beyond a stated limit."""
    from ..runtime.errors import StudyInputError

    if not value <= limit:
        raise StudyInputError(f"{flags}: {what} is {value:.4g}, beyond the limit of {limit:.4g}")


# the most elements one array may have: XLA indexes arrays and loops with 32-bit integers
# in places, and a larger extent overflowed before any memory check could see it
# ("overflow in static extent product", shapes such as f64[1,-294967292]); every
# study's largest array is checked against it before anything reaches XLA
MAX_ELEMENTS = 2**31 - 1


# the work estimates count floating-point operations (a Python-level step, such as one
# bootstrap replicate or one compiled call, as what it costs at this rate). WORK_RATE is
# the order of what this kind of machine does on the studies' small vectorised float64
# operations (2 CPU cores: measured 0.3e9 to 3e9 per second); a GPU does 10 to 100 times
# more. MAX_WORK is about 3 days at WORK_RATE (every preset, the paper ones included,
# lies below it, most by far); MEANFIELD_WORK_LIMIT (operations) states another limit
WORK_RATE = 1e9


MAX_WORK = 2e15


# what one Python-level step costs (a compiled call, a bootstrap replicate): ~1 ms
PYTHON_STEP = 1e6


def work_limit() -> float:
    """The most work (operations) a study may ask for: `MEANFIELD_WORK_LIMIT` if set (a
    positive number; anything else refused in one line), else `MAX_WORK`."""

    value = env_limit(
        "MEANFIELD_WORK_LIMIT",
        f"operations (e.g. 1e15); unset it for the default {MAX_WORK:.3g}",
    )
    return MAX_WORK if value is None else value


def _duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "forever"
    for unit, size in (("years", 365 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def check_elements(flags: str, count: float, what: str) -> None:
    """Refuse (`StudyInputError`, one line naming `flags`) an array of more than
    `MAX_ELEMENTS` elements, before it reaches XLA."""
    from ..runtime.errors import StudyInputError

    if not count <= MAX_ELEMENTS:
        raise StudyInputError(
            f"{flags}: {what} would have about {count:.3g} elements, beyond the "
            f"{MAX_ELEMENTS} (2^31 - 1) one array may have"
        )


def check_work(
    flags: str, operations: float, what: str, *, limit: float | None = None, why: str = ""
) -> None:
    """Refuse (`StudyInputError`, one line naming `flags`) a configuration whose estimated
    work exceeds `limit` (default `work_limit()`, which MEANFIELD_WORK_LIMIT sets; a
    study's own limit on a part says `why` instead), with the estimate and the time it
    implies."""
    from ..runtime.errors import StudyInputError

    stated = limit is None
    limit = work_limit() if limit is None else limit
    if not operations <= limit:
        note = "MEANFIELD_WORK_LIMIT sets another limit" if stated else why
        raise StudyInputError(
            f"{flags}: {what} is about {operations:.3g} operations (~"
            f"{_duration(operations / WORK_RATE)} at {WORK_RATE:.0e} per second), beyond the "
            f"limit of {limit:.3g} ({note})"
        )


class Cost:
    """The estimated cost of one part of a study: the options that set it (`flags`, as
    "--M/--D/--seeds"), what it is, the memory it needs at its peak (bytes; the parts run
    one after another), its work (operations) and its largest array (`elements`, described
    by `array`). `memory_flags` and `array_flags` name the options of the memory and of
    the largest array where they are fewer than `flags` (default: `flags`), and
    `memory_what` what the memory is of (default: `what`)."""

    def __init__(
        self,
        flags: str,
        what: str,
        *,
        memory=0.0,
        work=0.0,
        elements=0.0,
        array: str | None = None,
        memory_flags: str | None = None,
        array_flags: str | None = None,
        memory_what: str | None = None,
    ):
        self.flags, self.what = flags, what
        self.memory, self.work, self.elements = float(memory), float(work), float(elements)
        self.array = array or f"an array of {what}"
        self.memory_flags = memory_flags or flags
        self.array_flags = array_flags or self.memory_flags
        self.memory_what = memory_what or what

    def __repr__(self) -> str:
        return (
            f"Cost({self.flags!r}, {self.what!r}, memory={self.memory:.3g}, "
            f"work={self.work:.3g}, elements={self.elements:.3g})"
        )


class Limit:
    """A limit of the study's own on one of its sizes, beside the machine's (`Cost`):
    `value` (of `what`, set by the options `flags`) must not exceed `limit`. With
    `operations`, `value` is work in operations and the refusal gives its time and says
    `why` the study has this limit (`check_work`); otherwise it is a count
    (`check_size`)."""

    def __init__(
        self,
        flags: str,
        what: str,
        value: float,
        limit: float,
        *,
        operations: bool = False,
        why: str = "",
    ):
        self.flags, self.what, self.value, self.limit = flags, what, float(value), float(limit)
        self.operations, self.why = operations, why

    def check(self) -> None:
        """Refuse (`StudyInputError`, one line naming `flags`) a value beyond the limit."""
        if self.operations:
            check_work(self.flags, self.value, self.what, limit=self.limit, why=self.why)
        else:
            check_size(self.flags, self.value, self.limit, self.what)

    def __repr__(self) -> str:
        return f"Limit({self.flags!r}, {self.what!r}, {self.value:.3g} <= {self.limit:.3g})"


def _largest(value: float) -> float:
    """A sort key, largest first, NaN (an estimate that overflowed) before all."""
    return -math.inf if value != value else -value


def _flags(costs) -> str:
    names: list[str] = []
    for c in costs:
        for name in c.flags.split("/"):
            if name and name not in names:
                names.append(name)
    return "/".join(names)


def check_costs(costs) -> None:
    """Refuse, before anything is allocated, compiled or written, a study whose parts
    (`Cost`s) need more memory than is available (the largest part: they run one after
    another), hold an array beyond `MAX_ELEMENTS`, or need more work in all than
    `work_limit()`, or that exceeds a limit of its own (`Limit`, checked after the
    machine's): one line naming the options of the part(s) at fault, with the estimate;
    the largest part first."""
    costs = list(costs)
    limits = [c for c in costs if isinstance(c, Limit)]
    costs = [c for c in costs if not isinstance(c, Limit)]
    for c in sorted(costs, key=lambda c: _largest(c.memory)):
        check_memory(c.memory_flags, c.memory, c.memory_what)
    for c in sorted(costs, key=lambda c: _largest(c.elements)):
        check_elements(c.array_flags, c.elements, c.array)
    total = math.fsum(c.work for c in costs)
    if total <= work_limit():
        for limit in limits:
            limit.check()
        return
    # name the parts that make most of it (at least half the total), the largest first
    named, part = [], 0.0
    for c in sorted(costs, key=lambda c: _largest(c.work)):
        named.append(c)
        part += c.work
        if not part < total / 2:
            break
    working = [c for c in costs if c.work != 0]
    if len(working) == 1:  # one part does the work (the others only hold memory)
        what = f"the work of {working[0].what}"
    else:
        what = "the study's work (mostly " + ", ".join(c.what for c in named) + ")"
    check_work(_flags(named), total, what)


def check_scale(flag: str, value: float, limit: float, why: str) -> None:
    """Refuse (`StudyInputError`, one line naming `flag`) a scale or rate beyond `limit`."""
    from ..runtime.errors import StudyInputError

    if not (math.isfinite(value) and abs(value) <= limit):
        raise StudyInputError(f"{flag}: at most {limit:g} ({why}), got {value:g}")
