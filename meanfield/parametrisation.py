"""Parametrisations of a Transformer as data: how the initial sizes, the forward
multipliers and the optimiser's per-group learning rate, ε and weight decay scale with
width N and depth L (Mathematics §11, which states every rule beside its sources and
derives the SGD tables).

A `Parametrisation` is a table. Every rule but the attention scale is a base value (a
hyperparameter tuned on the base model) times `m_N^a · m_L^b`, with the size multipliers
`m_N = N / N_base`, `m_L = L / L_base`; the table holds the exponents `(a, b)`.

**At the base size** (`m_N = m_L = 1`) every such factor is 1: every table gives the
base initial sizes, learning rates, ε and weight decays, and branch and output
multipliers 1. The attention scale is not a factor of a base value but `d_head^{-p}`
itself, as in the reference code: `d_head^{-1/2}` under SP, `d_head^{-1}` under μP,
depth-μP and CompleteP. So at the base size the μP-family tables give one network (and,
with one optimiser, one training), and SP gives that network with its attention logits
`d_head^{1/2}` times larger (the same network only where `d_head = 1`).

The parameter **groups** are those of the reference implementation:

- `embedding`: token and position embeddings;
- `hidden_weights`: the matrices inside the residual branches (attention q, k, v, o;
  MLP in, out);
- `hidden_biases`, `hidden_norms`: the branches' biases and LayerNorm gains/shifts;
- `final_norm`: the LayerNorm before the unembedding;
- `unembedding`: the output matrix.

Besides the groups a table fixes the residual-branch multiplier `m_L^{-α}`, the output
(logit) multiplier `m_N^{c}` and the attention scale `1 / d_head^{p}`.

**The Adam tables** (AdamW, its decay coupled to the learning rate as in PyTorch's
`AdamW` and `optax.adamw`: a step shrinks a weight by `lr · weight decay`):

| rule | SP | μP | depth-μP (α=½) | CompleteP (α=1) |
|---|---|---|---|---|
| hidden init std | 1 | `m_N^{-1/2}` | `m_N^{-1/2}` | `m_N^{-1/2}` |
| embedding, unembedding init std | 1 | 1 | 1 | 1 |
| branch multiplier | 1 | 1 | `m_L^{-1/2}` | `m_L^{-1}` |
| output multiplier | 1 | `m_N^{-1}` | `m_N^{-1}` | `m_N^{-1}` |
| attention scale | `d_h^{-1/2}` | `d_h^{-1}` | `d_h^{-1}` | `d_h^{-1}` |
| hidden weights lr | 1 | `m_N^{-1}` | `m_N^{-1} m_L^{-1/2}` | `m_N^{-1}` |
| hidden biases, norms lr | 1 | 1 | `m_L^{-1/2}` | 1 |
| embedding, final norm, unembedding lr | 1 | 1 | 1 | 1 |
| hidden ε (weights, biases, norms) | 1 | `m_N^{-1}` | `m_N^{-1} m_L^{-1/2}` | `m_N^{-1} m_L^{-1}` |
| embedding, final norm, unembedding ε | 1 | 1 | 1 | 1 |
| hidden weights weight decay | 1 | `m_N` | `m_N` | `m_N` |
| embedding, unembedding weight decay | 1 | 1 | 1 | 1 |

(the depth learning-rate factor is `m_L^{α-1}`, the hidden ε's `m_L^{-α}`). Weight
decay applies to the embedding, hidden weights and unembedding only (`DECAYED`); the
biases and norms have none, whatever the base value. The hidden weight decay's `m_N`
makes `lr · weight decay` width-independent.

**Sources**, cited as [T1], [R], [M] here and in Mathematics §11:

- [T1] Dey et al. (2025), "Don't be lazy: CompleteP enables compute-efficient deep
  transformers", arXiv:2505.01618, Table 1 (columns SP, μP, α ∈ {0.5, 1}; the same table
  is `assets/parameterization_summary.png` on the reference branch).
- [R] its reference implementation, EleutherAI/nanoGPT-mup, branch `completep` (commit
  6f8bc3b, May 2025), `model.py`: `GPT.__init__` (initial standard deviations),
  `Block.__init__` (`residual_scaling`, the branch multiplier), `GPT.forward` (the
  output multiplier `mup_output_alpha / m_N`), `CausalSelfAttention.forward`
  (`attention_scale`: `1/d_head` under μP, else `1/sqrt(d_head)`),
  `GPT.configure_optimizers` (per-group `lr_scale` and `weight_decay`, in a μP branch
  and a depth branch; one `adam_eps` for all groups, times `m_N^{-1} m_L^{-α}` in the
  depth branch only).
- [M] microsoft/mup: `mup/optim.py` `MuAdam` / `MuAdamW` (matrix-like parameters: lr
  divided and weight decay multiplied by the width multiplier; vector-like ones and ε
  untouched) and `MuSGD`; `mup/layer.py` `MuReadout.forward` (`output_mult · x / m_N`);
  the attention scale `sqrt(attn_mult) / d_head` (`examples/Transformer/model.py`) and
  `8 / d` (the README).

Every rule of the four tables is [T1]'s. Where the sources disagree, [T1] is followed:

- *Hidden ε under μP*: [T1] (row "AdamW ε (residual blocks)", column μP) `ε_base m_N^{-1}`;
  [R]'s μP branch and [M]'s `MuAdam` leave ε unscaled. [T1]'s μP column is its α
  column at `m_L = 1` in every row, so μP and the depth tables differ only in the depth
  rules; [R]'s own two branches differ there in ε and weight decay too.
- *ε of the embedding, final norm and unembedding, depth tables*: [T1] scales ε in the
  residual blocks only, so these keep `ε_base` (as in [R]'s μP branch and in [M]); [R]'s
  depth branch multiplies the one optimiser-wide `adam_eps`, these groups' included, by
  `m_N^{-1} m_L^{-α}`.
- *Hidden weight decay under μP*: [T1] (row "Hidden WD (AdamW)", column μP)
  `λ_base m_N`, as [M]'s `MuAdamW` (`weight_decay *= width_mult`, its default
  `decoupled_wd=False`); [R]'s μP branch leaves it at `λ_base` (its depth branch has
  `weight_decay / width_lr_scaling = λ_base m_N`). With [T1] a μP-against-CompleteP
  comparison with weight decay differs in the depth rules only.
- *SP's output projections*: [R]'s SP draws `c_proj` at `σ/sqrt(2L)` (GPT-2's
  initialisation); [T1]'s SP column draws every hidden matrix at `σ_base`, as here.

[T1] does not give the attention scale: [R]'s `1/d_head` is followed. [M] has the
same exponent with other base values: `sqrt(attn_mult)/d_head` in its Transformer
example, and `8/d` in its README, `sqrt(d_base)/d_head` at `d_base = 64`, chosen there
so that μP's scale equals SP's at the base model. Following [R], SP and the μP family
differ at the base size in the attention scale (above).
[T1] does not give the decay of the embedding and unembedding (`λ_base` in [R] and
[M]) or of the biases and norms (none in [R]). The unembedding is tied to the embedding
in [R]; here it is a matrix of its own, under [T1]'s unembedding rows, [M]'s
`MuReadout`.

**SGD.** A table's `optimizer` is `"adam"` (the four above) or `"sgd"`; the four SGD
tables `standard-sgd`, `mup-sgd`, `depth-mup-sgd`, `completep-sgd` share their
initialisation and forward multipliers with the Adam tables and differ in the learning
rates, because SGD's step is the gradient's size, not the learning rate's
(Mathematics §11 derives them):

| SGD learning rate | SP | μP | depth-μP (α=½) | CompleteP (α=1) |
|---|---|---|---|---|
| embedding, final norm, unembedding | 1 | `m_N` | `m_N` | `m_N` |
| hidden weights | 1 | 1 | 1 | `m_L` |
| hidden biases, norms | 1 | `m_N` | `m_N` | `m_N m_L` |

In width these are μP's SGD rules: Tensor Programs V (Yang et al. 2022), Table 8, the
formulation with the output multiplier `1/fan_in` (input weights and biases at
`fan_out`, hidden matrices at 1, output weights at `fan_in`), as [M]'s `MuSGD` applies
them (vector-like parameters, the embedding, biases, norms and the unembedding, `lr ×
m_N`; square hidden matrices `× 1`). In depth, a branch's gradients carry its
multiplier `m_L^{-α}`, so one SGD step moves a branch's output by `lr · m_L^{-2α}` and
the L branches together by `lr · m_L^{1-2α}`: the hidden learning rates scale as
`m_L^{2α-1}`, constant for depth-μP (Yang et al. 2023, "Tensor Programs VI"; Bordelon
et al. 2023) and `m_L` for α = 1 (the mean-ODE scaling's `η ∝ L`, Mathematics §8). ε
does not apply; the weight decay, coupled to the learning rate
(`optax.add_decayed_weights` before `optax.sgd`), scales as the inverse of each decayed
group's learning rate, so that `lr · weight decay` is size-independent (in width
`MuSGD`'s rule, `weight_decay /= width_mult` for vector-like parameters; in depth the
library's own, by the same aim).

A user writes their own table with `Parametrisation(...)` or
`COMPLETEP.replace(alpha=0.75, ...)`; e.g. [R]'s ε for every group of a depth table is
`rules` with `"eps": (-1, -alpha)` for all six groups.
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
OPTIMIZERS = ("adam", "sgd")
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
    - `optimizer`: `"adam"` (AdamW; the default) or `"sgd"`: the optimiser the learning
      rate rules are for (`meanfield.training.transformer.optimizer` builds it).
    """

    name: str
    alpha: float = 0.0
    output: float = 0.0
    attention: float = 0.5
    rules: dict = dataclasses.field(default_factory=dict)
    source: str = ""
    optimizer: str = "adam"

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
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
            self.optimizer,
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
            "optimizer": self.optimizer,
        }


_REFERENCE = (
    "Dey et al. 2025 (CompleteP, arXiv:2505.01618), Table 1; attention scale 1/d_head from "
    "its reference code EleutherAI/nanoGPT-mup, branch completep, model.py "
    "(CausalSelfAttention.forward)"
)


def _table_keys(data, required: tuple, optional: tuple, what: str) -> None:
    """A table as plain data must be a dict with every key of `required` and no key
    outside `required` and `optional`: a one-line ValueError naming what is missing or
    unknown."""
    if not isinstance(data, dict):
        raise ValueError(f"{what} must be a dict, got {type(data).__name__}")
    missing = [k for k in required if k not in data]
    if missing:
        raise ValueError(f"{what} is missing {', '.join(map(repr, missing))}")
    unknown = [k for k in data if k not in required + optional]
    if unknown:
        raise ValueError(
            f"{what} has unknown key(s) {', '.join(repr(k) for k in unknown[:5])}; the "
            f"keys are {', '.join(required + optional)}"
        )


def from_table(data: dict) -> Parametrisation:
    """The table `Parametrisation.table()` wrote (a results file's configuration); a
    one-line ValueError naming a missing or unknown key or a bad value."""
    _table_keys(data, ("name", "alpha", "output", "attention", "rules"),
                ("source", "optimizer"), "a parametrisation table")  # fmt: skip
    if not isinstance(data["rules"], dict):
        raise ValueError(f"rules must be a dict of groups, got {type(data['rules']).__name__}")
    rules = {
        g: {q: tuple(p) if isinstance(p, list | tuple) else p for q, p in entries.items()}
        if isinstance(entries, dict) else entries
        for g, entries in data["rules"].items()
    }  # fmt: skip
    source = data.get("source", "")
    if not isinstance(source, str):
        raise ValueError(f"source must be a string, got {type(source).__name__}")
    return Parametrisation(
        name=data["name"], alpha=data["alpha"], output=data["output"],
        attention=data["attention"], rules=rules, source=source,
        optimizer=data.get("optimizer", "adam"),
    )  # fmt: skip


def _depth_table(name: str, alpha: float) -> Parametrisation:
    """μP in width with [T1]'s depth rules for branch multiplier `m_L^{-alpha}` (module
    docstring): learning rates of the hidden groups `× m_L^{alpha-1}`, ε of the hidden
    groups (the residual blocks) `m_N^{-1} m_L^{-alpha}`, hidden weight decay `× m_N`."""
    lr_depth = alpha - 1.0
    hidden_eps = (-1.0, -alpha)
    return Parametrisation(
        name=name,
        alpha=alpha,
        output=-1.0,
        attention=1.0,
        rules={
            "hidden_weights": {
                "init_std": (-0.5, 0),
                "lr": (-1, lr_depth),
                "eps": hidden_eps,
                "weight_decay": (1, 0),
            },
            "hidden_biases": {"lr": (0, lr_depth), "eps": hidden_eps},
            "hidden_norms": {"lr": (0, lr_depth), "eps": hidden_eps},
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
        "hidden_weights": {
            "init_std": (-0.5, 0),
            "lr": (-1, 0),
            "eps": (-1, 0),
            "weight_decay": (1, 0),
        },
        "hidden_biases": {"eps": (-1, 0)},
        "hidden_norms": {"eps": (-1, 0)},
    },
    source=_REFERENCE,
)
DEPTH_MUP = _depth_table("depth-mup", 0.5)
COMPLETEP = _depth_table("completep", 1.0)

_SGD_SOURCE = (
    "SGD learning rates: width from Tensor Programs V (Yang et al. 2022), Table 8, as "
    "microsoft/mup's MuSGD applies it; depth 2α − 1 from the branch multiplier (Tensor "
    "Programs VI; Bordelon et al. 2023 at α = ½); initialisation and multipliers as the "
    "Adam table"
)


def _sgd_table(adam: Parametrisation) -> Parametrisation:
    """The SGD version of a built-in Adam table (module docstring): its initialisation
    and forward multipliers, SGD's learning rates, no ε, weight decay the inverse of
    the learning rate on the decayed groups."""
    width = 1.0 if adam.output != 0 else 0.0  # μP in width: vector-like groups at m_N
    depth = 2 * adam.alpha - 1 if adam.alpha != 0 else 0.0
    lr = {
        "embedding": (width, 0.0),
        "hidden_weights": (0.0, depth),
        "hidden_biases": (width, depth),
        "hidden_norms": (width, depth),
        "final_norm": (width, 0.0),
        "unembedding": (width, 0.0),
    }
    rules: dict = {g: {"lr": lr[g]} for g in GROUPS}
    for g in DECAYED:
        rules[g]["weight_decay"] = (-lr[g][0], -lr[g][1])
    init = adam.exponents("hidden_weights", "init_std")
    rules["hidden_weights"]["init_std"] = init
    return adam.replace(name=f"{adam.name}-sgd", rules=rules, source=_SGD_SOURCE, optimizer="sgd")


STANDARD_SGD = _sgd_table(STANDARD)
MUP_SGD = _sgd_table(MUP)
DEPTH_MUP_SGD = _sgd_table(DEPTH_MUP)
COMPLETEP_SGD = _sgd_table(COMPLETEP)

PARAMETRISATIONS = {
    p.name: p
    for p in (
        STANDARD,
        MUP,
        DEPTH_MUP,
        COMPLETEP,
        STANDARD_SGD,
        MUP_SGD,
        DEPTH_MUP_SGD,
        COMPLETEP_SGD,
    )
}


def get_parametrisation(name) -> Parametrisation:
    """A built-in table by name (`standard`, `mup`, `depth-mup`, `completep`, and their
    SGD versions `standard-sgd`, ...), or a `Parametrisation` itself."""
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


# ------------------------------------------------------------------ ResNets of unit blocks


@dataclasses.dataclass(frozen=True)
class ResNetParametrisation:
    """How a ResNet of unit blocks `h^l = h^{l-1} + α Σ_{j≤M} φ(h^{l-1}, z^{j,l})` scales
    with its depth L and width M (units per layer), trained by plain gradient descent:
    the residual scale `α = L^{-depth} M^{-width}` and the learning rate
    `lr · L^{lr_depth} M^{lr_width}` (lr the base value).

    The built-in tables (`RESNET_PARAMETRISATIONS`) are those of `meanfield study
    regimes` (Mathematics §8), with the same names, and the critical scale:

    | table | α | learning rate | |
    |---|---|---|---|
    | `mean-ode` | `1/(LM)` | `lr · L M` | the mean-ODE scaling (CompleteP's α = 1) |
    | `depth-mup` | `1/(sqrt(L) M)` | `lr · M` | depth-μP's SGD rule |
    | `standard` | `1/M` | `lr · M` | no depth rule |
    | `critical` | `1/sqrt(LM)` | `lr` | the critical scale (Mathematics §5.1): lazy in M |
    """

    name: str
    depth: float
    width: float
    lr_depth: float = 0.0
    lr_width: float = 0.0
    source: str = ""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        for field in ("depth", "width", "lr_depth", "lr_width"):
            check_number(getattr(self, field), field)

    def scale(self, L: int, M: int) -> float:
        """The residual scale `α = L^{-depth} M^{-width}`."""
        return float(L) ** (-self.depth) * float(M) ** (-self.width)

    def lr_factor(self, L: int, M: int) -> float:
        """The learning rate's factor `L^{lr_depth} M^{lr_width}`."""
        return float(L) ** self.lr_depth * float(M) ** self.lr_width

    def table(self) -> dict:
        """The table as plain data (for a results file)."""
        return {"kind": "resnet", **dataclasses.asdict(self)}


def resnet_from_table(data: dict) -> ResNetParametrisation:
    """The table `ResNetParametrisation.table()` wrote; a one-line ValueError naming a
    missing or unknown key or a bad value."""
    _table_keys(data, ("name", "depth", "width"), ("lr_depth", "lr_width", "source", "kind"),
                "a ResNet parametrisation table")  # fmt: skip
    if data.get("kind", "resnet") != "resnet":
        raise ValueError(f"kind must be 'resnet', got {data['kind']!r}")
    if not isinstance(data.get("source", ""), str):
        raise ValueError(f"source must be a string, got {type(data['source']).__name__}")
    return ResNetParametrisation(**{k: v for k, v in data.items() if k != "kind"})


_REGIMES = "the scalings of Mathematics §8 (meanfield study regimes)"
RESNET_PARAMETRISATIONS = {
    p.name: p
    for p in (
        ResNetParametrisation("mean-ode", 1.0, 1.0, 1.0, 1.0, _REGIMES),
        ResNetParametrisation("depth-mup", 0.5, 1.0, 0.0, 1.0, _REGIMES),
        ResNetParametrisation("standard", 0.0, 1.0, 0.0, 1.0, _REGIMES),
        ResNetParametrisation("critical", 0.5, 0.5, 0.0, 0.0, "Mathematics §5.1"),
    )
}
