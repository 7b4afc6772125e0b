"""What the Transformer studies (`coord-check`, `transfer`) share: the tables named on the
command line (built-in or a user's `Parametrisation`), the text they train on (the
standard library's own source, or `--data FILE`), the model of a size, and the options
of the model and its data, each refused in one line naming it."""

import hashlib
import math

import numpy as np

from ..io.text import load_text
from ..models.transformer import Transformer
from ..parametrisation import PARAMETRISATIONS, Parametrisation
from ..runtime.errors import StudyInputError
from .args import nonnegative_float, positive_float, positive_int

INIT_STD = 0.02  # the base std of the drawn matrices (GPT-2's and the reference's)
EPS = 1e-8  # Adam's base ε
SIZE_LIMIT = 2**16  # widths, depths, context: at most this
TEXT_BYTES = 2**21  # the standard library's text read (its validation part is held out)
MODEL_OPTIONS = ("batch", "context", "heads", "base_width", "base_depth")


def add_model_arguments(parser) -> None:
    """The options of the model, its optimiser and its data: `--batch`, `--context`,
    `--heads`, `--base-width`, `--base-depth`, `--init-std`, `--eps`, `--weight-decay`,
    `--data`."""
    parser.add_argument("--batch", type=positive_int, help="sequences per step")
    parser.add_argument("--context", type=positive_int, help="tokens per sequence")
    parser.add_argument("--heads", type=positive_int, help="attention heads")
    parser.add_argument("--base-width", type=positive_int, help="the base model's width")
    parser.add_argument("--base-depth", type=positive_int, help="the base model's depth")
    parser.add_argument(
        "--init-std", type=positive_float, help="base std of the drawn matrices (0.02)"
    )
    parser.add_argument("--eps", type=positive_float, help="Adam's base ε (1e-8)")
    parser.add_argument(
        "--weight-decay", type=nonnegative_float, help="the base weight decay (0), coupled to lr"
    )
    parser.add_argument("--data", help="a UTF-8 text FILE (default: the standard library)")


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
    a one-line refusal naming `flag`."""
    from .args import load_object

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
        out.append(table)
    if len({t.name for t in out}) != len(out):
        raise StudyInputError(f"{flag}: the tables' names must differ")
    return out


def table_names(text: str, flag: str) -> list[str]:
    """A comma list of tables, at least one."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise StudyInputError(f"{flag}: need at least one table")
    return names


def corpus(cfg):
    """The text: the standard library's, or the user's `--data` file; and sets
    `cfg["data_sha256"]`, the text's digest (a `--resume` on other text is refused, naming
    `--data`: the runner)."""
    try:
        if cfg["data"] is None:
            text = load_text(max_bytes=TEXT_BYTES)
        else:
            text = load_text(cfg["data"], max_bytes=TEXT_BYTES)
    except (ValueError, OSError) as err:
        raise StudyInputError(f"--data: {err}") from None
    digest = hashlib.sha256(text.train.tobytes() + b"\0" + text.validation.tobytes())
    cfg["data_sha256"] = digest.hexdigest()
    return text


def data_record(cfg, text) -> dict:
    """The `data` entry of a results file."""
    return {
        "source": cfg["data"] or "the Python standard library",
        "train_bytes": int(text.train.size),
        "validation_bytes": int(text.validation.size),
    }


def model(cfg, table: Parametrisation, N: int, L: int) -> Transformer:
    """The Transformer of width N and depth L of a study's configuration."""
    return Transformer(
        vocab=256, context=cfg["context"], width=N, depth=L, heads=cfg["heads"],
        parametrisation=table, base_width=cfg["base_width"], base_depth=cfg["base_depth"],
        init_std=cfg["init_std"],
    )  # fmt: skip


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
        route=f"op by op (jax.disable_jit), trained {self_check_steps} steps compiled and op by op",
        check_cost=lambda s: s["width"] ** 2 * s["depth"],
    )
    for spec, p in zip(specs, points, strict=True):
        p.update(spec)
    return points
