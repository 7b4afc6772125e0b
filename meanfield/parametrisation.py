"""Parametrisations of a Transformer as data: how the initial sizes, the forward
multipliers and Adam's per-group learning rate, ε and weight decay scale with width N
and depth L (Mathematics §10).

A `Parametrisation` is a table. Every rule is a base value (a hyperparameter tuned on
the base model) times `m_N^a · m_L^b`, with the size multipliers `m_N = N / N_base`,
`m_L = L / L_base`; the table holds the exponents `(a, b)`. At the base size every
table gives the base values, so one base model is shared by all tables and a base
hyperparameter tuned on it is what "transfers".

The parameter **groups** are those of the reference implementation:

- `embedding`: token and position embeddings;
- `hidden_weights`: the matrices inside the residual branches (attention q, k, v, o;
  MLP in, out);
- `hidden_biases`, `hidden_norms`: the branches' biases and LayerNorm gains/shifts;
- `final_norm`: the LayerNorm before the unembedding;
- `unembedding`: the output matrix.

Besides the groups a table fixes the residual-branch multiplier `m_L^{-α}`, the output
(logit) multiplier `m_N^{c}` and the attention scale `1 / d_head^{p}`.

**Sources.** The four built-in tables are those of Dey et al. (2025), "Don't be lazy:
CompleteP enables compute-efficient deep transformers", in the form of the public
reference implementation the paper names (EleutherAI/nanoGPT-mup, branch `completep`:
`GPT.__init__` for the initial standard deviations, `Block` for `m_L^{-α}`,
`GPT.forward` for the output multiplier `1/m_N`, `CausalSelfAttention` for the
`1/d_head` attention scale, and `configure_optimizers` for the per-group learning rate,
ε and weight decay, including the fix of January 2025 that gives hidden groups ε
`m_N^{-1} m_L^{-α}` and the embedding and unembedding `m_N^{-1}`):

| rule | SP | μP | depth-μP (α=½) | CompleteP (α=1) |
|---|---|---|---|---|
| hidden init std | 1 | `m_N^{-1/2}` | `m_N^{-1/2}` | `m_N^{-1/2}` |
| branch multiplier | 1 | 1 | `m_L^{-1/2}` | `m_L^{-1}` |
| output multiplier | 1 | `m_N^{-1}` | `m_N^{-1}` | `m_N^{-1}` |
| attention scale | `d_h^{-1/2}` | `d_h^{-1}` | `d_h^{-1}` | `d_h^{-1}` |
| hidden weights lr | 1 | `m_N^{-1}` | `m_N^{-1} m_L^{-1/2}` | `m_N^{-1}` |
| hidden biases, norms lr | 1 | 1 | `m_L^{-1/2}` | 1 |
| hidden ε | 1 | `m_N^{-1}` | `m_N^{-1} m_L^{-1/2}` | `m_N^{-1} m_L^{-1}` |
| embedding, unembedding, final norm ε | 1 | `m_N^{-1}` | `m_N^{-1}` | `m_N^{-1}` |
| hidden weights weight decay | 1 | 1 | `m_N` | `m_N` |

(the depth learning-rate factor is `m_L^{α-1}`; the weight decay, coupled to the
learning rate as in `optax.adamw`, is applied to the embedding, hidden weights and
unembedding only; its `m_N` keeps `lr · weight decay` width-independent where the
depth rules are on). The unembedding is tied to the embedding there, so it follows the
embedding's rules here. The standard parametrisation's GPT-2 initialisation of the
output projections, `σ/sqrt(2L)`, is not part of the table (it is not part of the
parametrisation being compared).

A user writes their own table with `Parametrisation(...)` or
`COMPLETEP.replace(alpha=0.75, ...)`.
"""

import dataclasses

from ._validation import check_number

GROUPS = (
    "embedding",
    "hidden_weights",
    "hidden_biases",
    "hidden_norms",
    "final_norm",
    "unembedding",
)
QUANTITIES = ("init_std", "lr", "eps", "weight_decay")
# the groups weight decay applies to (the others have none, whatever the base value)
DECAYED = ("embedding", "hidden_weights", "unembedding")
# the groups drawn at random (the others start at 0, norms' gains at 1)
DRAWN = ("embedding", "hidden_weights", "unembedding")


def _pair(value, name: str) -> tuple[float, float]:
    try:
        a, b = value
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a pair (width exponent, depth exponent), got {value!r}"
        ) from None
    check_number(a, f"{name}[0]")
    check_number(b, f"{name}[1]")
    return float(a), float(b)


@dataclasses.dataclass(frozen=True, eq=False)
class Parametrisation:
    """A table of scaling rules (module docstring).

    **Arguments:**

    - `name`: a label.
    - `alpha`: the residual branch multiplier is `m_L^{-alpha}`.
    - `output`: the exponent `c` of the output (logit) multiplier `m_N^c`.
    - `attention`: the exponent `p` of the attention scale `d_head^{-p}`.
    - `rules`: `{group: {quantity: (a, b)}}` for the groups in `GROUPS` and the
      quantities in `QUANTITIES`: the factor `m_N^a m_L^b` of the base value. A missing
      entry is `(0, 0)`.
    - `source`: where the table comes from.
    """

    name: str
    alpha: float = 0.0
    output: float = 0.0
    attention: float = 0.5
    rules: dict = dataclasses.field(default_factory=dict)
    source: str = ""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        for field in ("alpha", "output", "attention"):
            check_number(getattr(self, field), field)
        if not isinstance(self.rules, dict):
            raise ValueError(f"rules must be a dict of groups, got {type(self.rules).__name__}")
        for group, entries in self.rules.items():
            if group not in GROUPS:
                raise ValueError(f"rules: unknown group {group!r}; the groups are {GROUPS}")
            if not isinstance(entries, dict):
                raise ValueError(f"rules[{group!r}] must be a dict of quantities")
            for quantity, pair in entries.items():
                if quantity not in QUANTITIES:
                    raise ValueError(
                        f"rules[{group!r}]: unknown quantity {quantity!r}; "
                        f"the quantities are {QUANTITIES}"
                    )
                _pair(pair, f"rules[{group!r}][{quantity!r}]")

    def _key(self) -> tuple:
        return (
            self.name,
            float(self.alpha),
            float(self.output),
            float(self.attention),
            tuple(self.exponents(g, q) for g in GROUPS for q in QUANTITIES),
        )

    def __eq__(self, other):
        return isinstance(other, Parametrisation) and self._key() == other._key()

    def __hash__(self):  # a static field of a model: hashable by its rules
        return hash(self._key())

    def exponents(self, group: str, quantity: str) -> tuple[float, float]:
        """`(a, b)`: the rule's factor is `m_N^a m_L^b`."""
        if group not in GROUPS:
            raise ValueError(f"group must be one of {GROUPS}, got {group!r}")
        if quantity not in QUANTITIES:
            raise ValueError(f"quantity must be one of {QUANTITIES}, got {quantity!r}")
        return _pair(self.rules.get(group, {}).get(quantity, (0, 0)), quantity)

    def factor(self, group: str, quantity: str, m_width: float, m_depth: float) -> float:
        """The factor `m_N^a m_L^b` of a base value, at size multipliers `m_width`,
        `m_depth`."""
        a, b = self.exponents(group, quantity)
        return float(m_width) ** a * float(m_depth) ** b

    def branch(self, m_depth: float) -> float:
        """The residual branch multiplier `m_L^{-alpha}`."""
        return float(m_depth) ** (-self.alpha)

    def output_multiplier(self, m_width: float) -> float:
        """The output (logit) multiplier `m_N^{output}`."""
        return float(m_width) ** self.output

    def attention_scale(self, d_head: int) -> float:
        """The attention logits' scale `d_head^{-attention}`."""
        return float(d_head) ** (-self.attention)

    def replace(self, **changes) -> "Parametrisation":
        """A copy with some fields changed (a user's variant of a table)."""
        return dataclasses.replace(self, **changes)

    def table(self) -> dict:
        """Every rule, as plain data (for a results file): `{"alpha", "output",
        "attention", "rules": {group: {quantity: [a, b]}}}`."""
        return {
            "name": self.name,
            "alpha": self.alpha,
            "output": self.output,
            "attention": self.attention,
            "rules": {g: {q: list(self.exponents(g, q)) for q in QUANTITIES} for g in GROUPS},
            "source": self.source,
        }


_REFERENCE = (
    "Dey et al. 2025 (CompleteP), Table 1, as implemented in its reference code "
    "EleutherAI/nanoGPT-mup, branch completep (model.py)"
)


def from_table(data: dict) -> Parametrisation:
    """The table `Parametrisation.table()` wrote (a results file's configuration)."""
    rules = {
        g: {q: tuple(pair) for q, pair in entries.items()} for g, entries in data["rules"].items()
    }
    return Parametrisation(
        name=data["name"], alpha=data["alpha"], output=data["output"],
        attention=data["attention"], rules=rules, source=data.get("source", ""),
    )  # fmt: skip


def _depth_table(name: str, alpha: float) -> Parametrisation:
    """μP in width with the depth rules of the reference implementation for branch
    multiplier `m_L^{-alpha}`: learning rates of the hidden groups `× m_L^{alpha-1}`,
    hidden ε `× m_L^{-alpha}`, hidden weight decay `× m_N`."""
    lr_depth = alpha - 1.0
    hidden_eps = (-1.0, -alpha)
    return Parametrisation(
        name=name,
        alpha=alpha,
        output=-1.0,
        attention=1.0,
        rules={
            "embedding": {"eps": (-1, 0)},
            "hidden_weights": {
                "init_std": (-0.5, 0),
                "lr": (-1, lr_depth),
                "eps": hidden_eps,
                "weight_decay": (1, 0),
            },
            "hidden_biases": {"lr": (0, lr_depth), "eps": hidden_eps},
            "hidden_norms": {"lr": (0, lr_depth), "eps": hidden_eps},
            "final_norm": {"eps": (-1, 0)},
            "unembedding": {"eps": (-1, 0)},
        },
        source=_REFERENCE,
    )


STANDARD = Parametrisation(name="standard", alpha=0.0, output=0.0, attention=0.5, source=_REFERENCE)
MUP = Parametrisation(
    name="mup",
    alpha=0.0,
    output=-1.0,
    attention=1.0,
    rules={
        "embedding": {"eps": (-1, 0)},
        "hidden_weights": {"init_std": (-0.5, 0), "lr": (-1, 0), "eps": (-1, 0)},
        "hidden_biases": {"eps": (-1, 0)},
        "hidden_norms": {"eps": (-1, 0)},
        "final_norm": {"eps": (-1, 0)},
        "unembedding": {"eps": (-1, 0)},
    },
    source=_REFERENCE,
)
DEPTH_MUP = _depth_table("depth-mup", 0.5)
COMPLETEP = _depth_table("completep", 1.0)

PARAMETRISATIONS = {p.name: p for p in (STANDARD, MUP, DEPTH_MUP, COMPLETEP)}


def get_parametrisation(name) -> Parametrisation:
    """A built-in table by name (`standard`, `mup`, `depth-mup`, `completep`), or a
    `Parametrisation` itself."""
    if isinstance(name, Parametrisation):
        return name
    if name not in PARAMETRISATIONS:
        raise ValueError(
            f"parametrisation must be one of {sorted(PARAMETRISATIONS)} or a "
            f"Parametrisation, got {name!r}"
        )
    return PARAMETRISATIONS[name]


def multipliers(width: int, depth: int, base_width: int, base_depth: int) -> tuple[float, float]:
    """`(m_N, m_L) = (width / base_width, depth / base_depth)`, checked."""
    for value, label in (
        (width, "width"),
        (depth, "depth"),
        (base_width, "base_width"),
        (base_depth, "base_depth"),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be an integer >= 1, got {value!r}")
    return width / base_width, depth / base_depth
