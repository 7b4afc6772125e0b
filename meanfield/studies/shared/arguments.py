"""The options several studies share, read without JAX (`studies/NAME/options.py`):
the Transformer's model and data (`coord-check`, `transfer`; checked by
`transformer_options.check_model_options`) and Chaintron's embedded models (`two-layer`,
`shapes`; read by `embedded_options.model_config`)."""

from ...harness.args import nonnegative_float, positive_float, positive_int
from .choices import TEXTS


def add_transformer_arguments(parser) -> None:
    """The Transformer's options, of the model, its optimiser and its data: `--batch`, `--context`,
    `--heads`, `--base-width`, `--base-depth`, `--init-std`, `--eps`, `--weight-decay`,
    `--text`, `--data`."""
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
    parser.add_argument(
        "--text", choices=TEXTS, help="the built-in text: stdlib, the standard library's "
        "source (default), or docs, the English help topics of Python's documentation",
    )  # fmt: skip
    parser.add_argument("--data", help="a UTF-8 text FILE (instead of a built-in --text)")


def add_embedded_arguments(parser, *, activation: str, lr: float, steps: int) -> None:
    """The options of Chaintron's models (`two-layer`, `shapes`): the activation, the
    data file, the scales, the learning rates and the steps."""
    parser.add_argument("--activation", default=activation, help=f"ρ (default: {activation})")
    parser.add_argument(
        "--data", help="FILE.npz with arrays x (n, d_in) and y (n, d_out) (default: built-in)"
    )
    parser.add_argument("--sigma-in", type=positive_float, default=1.0, help="σ_in (1)")
    parser.add_argument("--sigma-out", type=positive_float, default=1.0, help="σ_out (1)")
    parser.add_argument("--s-u", type=positive_float, default=1.0, help="u ~ N(0, s_u² D) (1)")
    parser.add_argument("--s-v", type=positive_float, default=1.0, help="v ~ N(0, s_v² D) (1)")
    parser.add_argument("--lr-u", type=positive_float, default=lr, help=f"η_u ({lr:g})")
    parser.add_argument("--lr-v", type=positive_float, default=lr, help=f"η_v ({lr:g})")
    parser.add_argument("--steps", type=positive_int, default=steps, help=f"GD steps K ({steps})")
