"""What the Transformer studies (`coord-check`, `transfer`) share: the tables named on the
command line (built-in or a user's `Parametrisation`), the text they train on (a
built-in text, `--text stdlib` (the standard library's own source, the default) or
`--text docs` (the English help topics of Python's documentation), or `--data FILE`),
the model of a size, and the options of the model and its data, each refused in one
line naming it."""

import dataclasses
import functools
import hashlib
import math
import re
from collections.abc import Callable

import jax
import numpy as np

from ..._eager import traced_op_by_op
from ...io.text import DOCS, STDLIB, load_text
from ...models.transformer import Transformer
from ...parametrisation import PARAMETRISATIONS, Parametrisation, from_table
from ...runtime.errors import StudyInputError
from ...runtime.sharding import disable_jit_active

INIT_STD = 0.02  # the base std of the drawn matrices (GPT-2's and the reference's)
EPS = 1e-8  # Adam's base ε
SIZE_LIMIT = 2**16  # widths, depths, context: at most this
# the text read at most (`meanfield.io.text`: its validation part held out, rid of every
# 64-byte window seen in training): 2 MB of the standard library's source, a hash-ordered
# sample of its files; all of the help topics (0.37 MB)
TEXT_BYTES = 2**21
MODEL_OPTIONS = ("batch", "context", "heads", "base_width", "base_depth", "text")
# the built-in texts (`--text`), as `data_record` names them
TEXT_NAMES = {
    STDLIB: "the Python standard library's source (a hash-ordered sample of its files)",
    DOCS: "the help topics of Python's documentation (pydoc_data/topics.py)",
}


def check_model_options(cfg, args, widths, sizes) -> None:
    """Refuse sizes beyond `SIZE_LIMIT` (`sizes`: `(flag, value)`), heads that do not
    divide a width, a batch beyond 65536 or an absurd `--init-std`; set `cfg["init_std"]`
    and `cfg["data"]`."""
    sizes = [*sizes, ("--context", cfg["context"]), ("--base-width", cfg["base_width"]),
             ("--base-depth", cfg["base_depth"])]  # fmt: skip
    for flag, value in sizes:
        if value > SIZE_LIMIT:
            raise StudyInputError(f"{flag}: at most {SIZE_LIMIT}, got {value}")
    for w in widths:
        if w % cfg["heads"]:
            raise StudyInputError(f"--heads: {cfg['heads']} does not divide the width {w}")
    if cfg["batch"] > 2**16:
        raise StudyInputError(f"--batch: at most 65536, got {cfg['batch']}")
    init_std = args.init_std if args.init_std is not None else INIT_STD
    if init_std > 100:
        raise StudyInputError(f"--init-std: at most 100, got {init_std}")
    eps = args.eps if args.eps is not None else EPS
    weight_decay = args.weight_decay if args.weight_decay is not None else 0.0
    if eps > 1:
        raise StudyInputError(f"--eps: at most 1, got {eps}")
    if weight_decay > 100:
        raise StudyInputError(f"--weight-decay: at most 100, got {weight_decay}")
    cfg.update(init_std=init_std, data=args.data, eps=eps, weight_decay=weight_decay)


def tables(names, flag: str = "--parametrisations", builtins=None, kind: type = Parametrisation):
    """The tables named (built-in names of `builtins`, by default the Transformer's
    `PARAMETRISATIONS`, or MODULE:NAME / FILE.py:NAME of a user's table of type `kind`);
    a one-line refusal naming `flag`. A user's table comes back rebuilt from what its
    `table()` gives (`user_table`), checked; its own code is not called again."""
    from ...harness.args import load_object

    builtins = PARAMETRISATIONS if builtins is None else builtins
    out = []
    for name in names:
        if name in builtins:
            out.append(builtins[name])
            continue
        if ":" not in name:
            raise StudyInputError(
                f"{flag}: {name!r} is not one of {sorted(builtins)} nor MODULE:NAME"
            )
        table = load_object(name, flag)
        if not isinstance(table, kind):
            raise StudyInputError(
                f"{flag}: {name} is a {type(table).__name__}, not a {kind.__name__}"
            )
        out.append(user_table(table, name, flag))
    if len({t.name for t in out}) != len(out):
        raise StudyInputError(f"{flag}: the tables' names must differ")
    return out


# a table's name names the study's files (points/parametrisationNAME_...json): short, and
# of the characters a file name keeps as they are
TABLE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
SOURCE_LIMIT = 1000  # characters of a table's `source`


def user_table(table, spec: str, flag: str):
    """A user's table (`spec`, loaded) as the library's own: its `table()` called once
    (named on stderr if it runs long: `args.user_code`), the data rebuilt
    (`from_table`, `resnet_from_table`: finite numbers, every key present) and its name
    and source checked; a one-line `StudyInputError` naming `flag` and `spec`."""
    from ...harness.args import USER_FILE_ERRORS, user_code, user_error
    from ...parametrisation import resnet_from_table

    with user_code(flag, f"calling {spec}.table()"):
        try:
            data = table.table()
        except USER_FILE_ERRORS as err:
            raise StudyInputError(f"{flag}: {spec}.table() failed: {user_error(err)}") from None
    rebuild = from_table if isinstance(table, Parametrisation) else resnet_from_table
    try:
        rebuilt = rebuild(data)
    except (ValueError, TypeError) as err:
        first = (str(err).splitlines() or [type(err).__name__])[0]
        raise StudyInputError(f"{flag}: {spec}: table() gave no valid table: {first}") from None
    if not TABLE_NAME.match(rebuilt.name):
        n = len(rebuilt.name)
        shown = repr(rebuilt.name) if n <= 40 else f"{rebuilt.name[:39]!r}… ({n} characters)"
        raise StudyInputError(
            f"{flag}: {spec} names its table {shown}; a "
            "table's name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter "
            "or digit (it names the study's files)"
        )
    if len(rebuilt.source) > SOURCE_LIMIT:
        raise StudyInputError(
            f"{flag}: {spec}: its source is {len(rebuilt.source)} characters, at most "
            f"{SOURCE_LIMIT}"
        )
    return rebuilt


def table_names(text: str, flag: str) -> list[str]:
    """A comma list of tables, at least one."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise StudyInputError(f"{flag}: need at least one table")
    return names


def corpus(cfg):
    """The text: the built-in text `cfg["text"]` (`--text`: "stdlib", the default, or
    "docs") or the user's `--data` file (refused with `--text`: one text or the other),
    read afresh (a file edited since an earlier study is read again); sets `cfg["text"]`
    (None for a file) and `cfg["data_sha256"]`, the digest of the text read (a `--resume`
    on other text is refused, naming `--data`: the runner). A study's `configure` calls
    it; its `run` takes the same text from `study_text`."""
    chosen = cfg.get("text")
    if cfg["data"] is not None and chosen is not None:
        raise StudyInputError(
            f"--text: {chosen} is a built-in text and --data {cfg['data']} a file: give one"
        )
    _read_text.cache_clear()
    text = _read_text(cfg["data"], None if cfg["data"] is not None else chosen or STDLIB)
    cfg["text"] = None if cfg["data"] is not None else chosen or STDLIB
    shortest = min(text.train.size, text.validation.size)
    context = cfg.get("context") or 1
    if shortest < context + 1:  # refused here, before the folder is made (issue 75)
        which = "--text" if cfg["data"] is None else "--data"
        raise StudyInputError(
            f"{which}, --context: a window of --context {context} needs "
            f"{context + 1} bytes of training and of validation text; the text has "
            f"{text.train.size} and {text.validation.size}"
        )
    digest = hashlib.sha256(text.train.tobytes() + b"\0" + text.validation.tobytes())
    cfg["data_sha256"] = digest.hexdigest()
    return text


def study_text(cfg):
    """The text of a configuration that `corpus` made (its `data` and `text`): the one
    `corpus` read, read once per study (the configuration's check and the run share it)."""
    return _read_text(cfg["data"], cfg["text"])


@functools.lru_cache(maxsize=1)
def _read_text(data: str | None, builtin: str | None):
    """The `--data` file, or else the built-in text `builtin`; a one-line refusal."""
    try:
        if data is None:
            return load_text(text=builtin, max_bytes=TEXT_BYTES)
        return load_text(data, max_bytes=TEXT_BYTES)
    except (ValueError, OSError) as err:
        raise StudyInputError(f"{'--text' if data is None else '--data'}: {err}") from None


def data_record(cfg, text) -> dict:
    """The `data` entry of a results file: the text (`text`: "stdlib", "docs", or None
    for a `--data` file, named by `source`), its sizes, the files (or the help topics'
    sections) on each side, and the validation text's verbatim overlap with the
    training text (`meanfield.io.text`): the fraction of its `verbatim_window`-byte
    windows found in training as read and as kept, and the validation bytes dropped."""
    return {
        "source": cfg["data"] or TEXT_NAMES[text.source],
        "text": cfg.get("text"),
        "train_bytes": int(text.train.size),
        "validation_bytes": int(text.validation.size),
        "train_parts": len(text.files_train),
        "validation_parts": len(text.files_validation),
        "verbatim_window": int(text.window),
        "verbatim_overlap_read": float(text.overlap_read),
        "verbatim_overlap": float(text.overlap),
        "validation_bytes_dropped": int(text.dropped_bytes),
    }


def model(cfg, table: Parametrisation, N: int, L: int) -> Transformer:
    """The Transformer of width N and depth L of a study's configuration."""
    return Transformer(
        vocab=256, context=cfg["context"], width=N, depth=L, heads=cfg["heads"],
        parametrisation=table, base_width=cfg["base_width"], base_depth=cfg["base_depth"],
        init_std=cfg["init_std"],
    )  # fmt: skip


def training_cost(
    cfg, sizes, *, nets: int, runs: int, passes: int, rows: int, state_rows: int,
    score_tokens: int, measured: int, flags: str, memory_flags: str, array: str,
) -> list:  # fmt: skip
    """The estimated memory, work and largest array (`harness.args.Cost`) of training
    the Transformers of every (width, depth) in `sizes`, `nets` at once, `runs` times:
    Adam keeps four copies of the P parameters; a pass costs ~6 P flops a token of its
    `rows` sequences plus the attention's scores, and keeps the per-layer states of
    `state_rows` sequences (4N activations, the MLP's 12N, `score_tokens` scores a
    token); the largest array is the parameters or the states of `measured` sequences."""
    from ...harness.args import PYTHON_STEP, Cost

    V, T = 256, cfg["context"]
    itemsize = 8 if cfg["x64"] else 4
    memory = work = elements = 0.0
    for N, L in sizes:
        P = L * 12 * N * N + 2 * V * N + T * N
        states = state_rows * L * T * (16 * N + score_tokens)
        memory = max(memory, nets * itemsize * (6 * P + 4 * states))
        elements = max(elements, nets * measured * L * T * 4 * N, nets * P)
        per_step = 6 * P * rows * T + 4 * L * T * T * N * rows
        work += runs * nets * (passes * per_step + PYTHON_STEP / 20)
    return [
        Cost(flags, "the trainings", memory=memory, work=work, elements=elements,
             array=array, memory_flags=memory_flags)
    ]  # fmt: skip


def draws_program(fn):
    """`jax.jit(fn)` for a function that only draws random numbers (a network's initial
    parameters, its batches' positions), compiled on a CPU at XLA's lowest backend
    optimisation level.

    JAX's Threefry hash is an unrolled integer loop that LLVM optimises slowly: inside a
    Transformer study's program its kernels took 12.8 of the 18.2 s that LLVM spent on
    the whole program at the default level (jaxlib 0.10.1, this 2-core CPU; issue 73).
    Drawn in a program of their own, vmapped over the networks only, they compile in a
    fraction of a second and run in milliseconds whatever the level; the training
    program, compiled at the users' level, no longer holds them. The integer hash is
    exact at any level."""
    if jax.default_backend() != "cpu":
        return jax.jit(fn)
    return jax.jit(fn, compiler_options={"xla_backend_optimization_level": 0})


@dataclasses.dataclass(frozen=True)
class DrawnAndTrained:
    """A Transformer study's two compiled programs for one shape: `draws(numbers, keys,
    train_ids, eval_ids)`, each network's draws (`draws_program`), and `train(numbers,
    rate, *draws)`; called, the one after the other."""

    draws: Callable
    train: Callable

    def __call__(self, numbers, keys, rate, train_ids, eval_ids):
        if disable_jit_active():  # the self-check: the programs' own operations, one by one
            # (not the Python of equinox's modules and optax again: 2.5 ms an operation)
            drawn = traced_op_by_op(self.draws, numbers, keys, train_ids, eval_ids)
            return traced_op_by_op(self.train, numbers, rate, *drawn)
        return self.train(numbers, rate, *self.draws(numbers, keys, train_ids, eval_ids))


def listed(a) -> list:
    """A 2-D array as JSON rows, a value that is not finite as None."""
    return [
        [None if not math.isfinite(x) else float(x) for x in row] for row in np.asarray(a).tolist()
    ]


def run_sized_points(
    runner, specs, point, self_check_steps: int, width_symbol: str = "N"
) -> list[dict]:
    """`runner.run_points` over points named by table, width and depth; the self-check
    trains its point `self_check_steps` steps compiled and op by op (`point(spec, steps)`);
    the cheaper half for it by N² L. Each point gains its spec."""
    points = runner.run_points(
        specs,
        point,
        describe=lambda s: f"{s['parametrisation']} {width_symbol}={s['width']} L={s['depth']}",
        variant=lambda s: point(s, self_check_steps),
        route=f"op by op (its traced programs, equation by equation), trained "
        f"{self_check_steps} steps compiled and op by op",
        check_cost=lambda s: s["width"] ** 2 * s["depth"],
    )
    for spec, p in zip(specs, points, strict=True):
        p.update(spec)
    return points
