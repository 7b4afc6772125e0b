"""A pre-LN residual Transformer on token sequences, parametrised by a table
(Mathematics §11):

    x^0 = (E[tokens] + P[positions]) · input multiplier,
    x^{l+½} = x^l + β · Attn_l(LN(x^l)),   x^{l+1} = x^{l+½} + β · MLP_l(LN(x^{l+½})),
    logits = LN(x^L) U · output multiplier,

with the branch multiplier `β = m_L^{-α}` and every initial size, multiplier and
optimiser rule read from a `meanfield.parametrisation.Parametrisation` at the size
multipliers `m_N = width / base_width`, `m_L = depth / base_depth`. The branches are
the layer blocks `CausalAttention` and `MLPBranch` (`meanfield.blocks.transformer`);
the L layers are stacked and scanned (one compiled program per shape), and a network
is a plain pytree, so seeds and learning rates vmap.

**Parameters** (`Transformer.init(key)`), a dict whose keys name the parametrisation's
groups (`Transformer.labels`):

- `embedding`: `{"tokens": (V, N), "positions": (T, N)}`;
- `attention`: `{"weights": {"q","k","v","o": (L, N, N)}, "biases": {...: (L, N)},
  "norm": {"gain", "shift": (L, N)}}` (biases and norms optional);
- `mlp`: `{"weights": {"in": (L, N, eN), "out": (L, eN, N)}, "biases", "norm"}`;
- `final_norm`: `{"gain", "shift": (N,)}`;
- `unembedding`: `(N, V)`.

Layer l's matrices are drawn from `fold_in(key, l)`, so networks of different depths
drawn from one key share their first layers.

**Sizes and token ids are checked where they enter.** The constructor refuses, in one
line naming the argument, sizes that are not positive integers and a network whose
parameters (`parameter_count`, at the default float's itemsize) would not fit in the
memory available (`meanfield.runtime.memory.available_memory`: `MEANFIELD_MEMORY_LIMIT`
where set), before anything is drawn. The forward entry points (`__call__`, `residual`,
`embed`, `loss`) and `meanfield.training.transformer.train` refuse token ids of a
non-integer dtype (from the dtype, so under `jit` too) and, where the ids are concrete
(an eager call, or the arrays handed to `train`), ids outside `[0, vocab)`. Ids traced
inside `jit`, `vmap` or `grad` cannot be read without a host round trip per step: they
are not range-checked there (JAX clamps an embedding index and the loss of a target
beyond the vocabulary is NaN), so check the data once before a compiled loop (`check_ids`).
"""

import dataclasses

import equinox as eqx
import jax
import jax.lax as lax
import jax.numpy as jnp
import numpy as np
import optax
from jax.core import Tracer
from jaxtyping import Array, Int, PyTree

from .._validation import as_number, check_number, check_positive_int
from ..blocks.transformer import CausalAttention, MLPBranch, layer_norm
from ..parametrisation import (
    GROUPS,
    QUANTITIES,
    Parametrisation,
    get_parametrisation,
    multipliers,
)

# the name of a skeleton's placeholder table (`Transformer.skeleton_and_numbers`)
SKELETON_TABLE = "numbers passed as data"
_HIDDEN = {"weights": "hidden_weights", "biases": "hidden_biases", "norm": "hidden_norms"}
# the sizes that set the parameter count, in the order a refusal names them
_SIZES = ("width", "depth", "vocab", "context", "expansion")


def check_ids(ids, name: str, vocab: int) -> None:
    """Refuse (ValueError, one line naming `name`) token ids of a non-integer dtype and,
    where `ids` is concrete (not traced), ids outside `[0, vocab)`. A concrete JAX array
    off the CPU is reduced on its device: two integers cross to the host."""
    dtype = getattr(ids, "dtype", None)
    if dtype is None:
        try:
            dtype = np.asarray(ids).dtype
        except (TypeError, ValueError):
            raise ValueError(f"{name}: token ids must be an integer array, got {ids!r}") from None
    if not jnp.issubdtype(dtype, jnp.integer):
        raise ValueError(
            f"{name}: token ids must have an integer dtype, got {dtype} (ids are not cast: "
            f"convert them with .astype(int) where they are whole numbers)"
        )
    if isinstance(ids, Tracer) or np.size(ids) == 0:
        return  # traced: its dtype only (the module docstring)
    if isinstance(ids, jax.Array) and not all(d.platform == "cpu" for d in ids.devices()):
        with jax.ensure_compile_time_eval():
            lo, hi = int(jnp.min(ids)), int(jnp.max(ids))
    else:
        a = np.asarray(ids)
        lo, hi = int(a.min()), int(a.max())
    if lo < 0 or hi >= vocab:
        bad = lo if lo < 0 else hi
        raise ValueError(
            f"{name}: token id {bad} is outside [0, vocab) = [0, {vocab}) (ids run from "
            f"{lo} to {hi})"
        )


class Transformer(eqx.Module):
    """The network's shape and parametrisation (module docstring); its parameters are
    a separate pytree.

    **Arguments:**

    - `vocab`: V; `context`: the longest sequence T; `width`: N; `depth`: L (pairs of
      attention and MLP branches); `heads` (dividing N); `expansion`: the MLP's hidden
      width is `expansion · N`.
    - `parametrisation`: a `Parametrisation` or a built-in name (`standard`, `mup`,
      `depth-mup`, `completep`).
    - `base_width`, `base_depth`: the base model's size (default 1 and 1: then
      `β = L^{-α}` and the rules are powers of N and L themselves).
    - `init_std`: the base standard deviation σ of the drawn matrices (0.02, as GPT-2).
    - `input_multiplier`, `output_multiplier`: base forward multipliers (1).
    - `norm`, `bias`: LayerNorms and biases in the branches (default on); without them,
      one head and `expansion` free, it is Chizat's alternating model.
    - `numbers`: None (the default) reads every number the table sets from
      `parametrisation`; `skeleton_and_numbers` and `with_numbers` pass them as data
      instead, so that one compiled program serves every table of one optimiser.
    """

    vocab: int = eqx.field(static=True, converter=as_number)
    context: int = eqx.field(static=True, converter=as_number)
    width: int = eqx.field(static=True, converter=as_number)
    depth: int = eqx.field(static=True, converter=as_number)
    heads: int = eqx.field(static=True, converter=as_number, default=1)
    expansion: int = eqx.field(static=True, converter=as_number, default=4)
    parametrisation: Parametrisation = eqx.field(
        static=True, converter=get_parametrisation, default="standard"
    )
    base_width: int = eqx.field(static=True, converter=as_number, default=1)
    base_depth: int = eqx.field(static=True, converter=as_number, default=1)
    init_std: float = eqx.field(static=True, converter=as_number, default=0.02)
    input_multiplier: float = eqx.field(static=True, converter=as_number, default=1.0)
    output_multiplier: float = eqx.field(static=True, converter=as_number, default=1.0)
    norm: bool = eqx.field(static=True, default=True)
    bias: bool = eqx.field(static=True, default=True)
    numbers: dict | None = None

    def __check_init__(self):
        for name in ("vocab", "context", "width", "depth", "heads", "expansion"):
            check_positive_int(getattr(self, name), name)
        if self.width % self.heads:
            raise ValueError(f"heads: {self.heads} does not divide width {self.width}")
        multipliers(self.width, self.depth, self.base_width, self.base_depth)
        for name in ("init_std", "input_multiplier", "output_multiplier"):
            check_number(getattr(self, name), name)
        if not self.init_std > 0:
            raise ValueError(f"init_std must be > 0, got {self.init_std!r}")
        for name in ("norm", "bias"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        self._check_memory()

    def _check_memory(self) -> None:
        """Refuse a network whose parameters would not fit in the memory available,
        naming the size that sets most of them."""
        from ..runtime.memory import available_memory

        itemsize = jnp.dtype(jnp.result_type(float)).itemsize
        count = self.parameter_count()
        nbytes = count * itemsize
        limit = available_memory()
        if nbytes <= limit:
            return
        # the size that, set to 1, leaves the fewest parameters (the first of equals)
        name = min(_SIZES, key=lambda n: self.parameter_count(**{n: 1}))
        shape = ", ".join(f"{n}={getattr(self, n)}" for n in _SIZES)
        raise ValueError(
            f"{name}: a Transformer of {shape} has {count:.3g} parameters, "
            f"{nbytes / 1e9:.3g} GB at {itemsize} bytes each, more than the "
            f"{limit / 1e9:.3g} GB of memory available (MEANFIELD_MEMORY_LIMIT sets "
            "another limit)"
        )

    def parameter_count(self, **sizes: int) -> int:
        """The number of parameters `init` draws (the module docstring's shapes), at this
        network's sizes or at others given by name (`width`, `depth`, `vocab`, `context`,
        `expansion`)."""
        s = {name: getattr(self, name) for name in _SIZES} | sizes
        N, L, V, T = s["width"], s["depth"], s["vocab"], s["context"]
        E = s["expansion"] * N
        count = V * N + T * N + L * (4 * N * N + 2 * N * E) + N * V
        if self.bias:
            count += L * (4 * N + E + N)
        if self.norm:
            count += 2 * L * N * 2 + 2 * N
        return count

    # -- sizes ---------------------------------------------------------------------------
    @property
    def m_width(self) -> float:
        return self.width / self.base_width

    @property
    def m_depth(self) -> float:
        return self.depth / self.base_depth

    def factor(self, group: str, quantity: str) -> float:
        """The table's factor `m_N^a m_L^b` of `quantity` for `group` at this size."""
        if self.numbers is not None:
            return self.numbers["factor"][group][quantity]
        return self.parametrisation.factor(group, quantity, self.m_width, self.m_depth)

    @property
    def branch_multiplier(self) -> float:
        """β = m_L^{-α}."""
        if self.numbers is not None:
            return self.numbers["branch"]
        return self.parametrisation.branch(self.m_depth)

    @property
    def logit_multiplier(self) -> float:
        """The base output multiplier times the table's `m_N^c`."""
        if self.numbers is not None:
            return self.output_multiplier * self.numbers["output"]
        return self.output_multiplier * self.parametrisation.output_multiplier(self.m_width)

    def branches(self, tokens: int) -> tuple[CausalAttention, MLPBranch]:
        """The two layer blocks for sequences of `tokens` tokens."""
        scale = None if self.numbers is None else self.numbers["attention_scale"]
        return (
            CausalAttention(
                tokens=tokens, heads=self.heads, scale_power=self.parametrisation.attention,
                scale=scale,
            ),
            MLPBranch(tokens=tokens),
        )  # fmt: skip

    # -- the table as data -----------------------------------------------------------------
    def skeleton_and_numbers(self) -> tuple["Transformer", dict]:
        """`(skeleton, numbers)`: `skeleton.with_numbers(numbers)` computes exactly as this
        network does, and `skeleton` is the same for every table of one optimiser at this
        shape. A program that takes `numbers` as an argument (traced) is therefore compiled
        once per shape, not once per table (the transfer and coordinate-check studies).

        `numbers` holds, as scalar arrays, every number the table sets at this size:
        `{"factor": {group: {quantity: m_N^a m_L^b}}, "branch": β, "output": m_N^c,
        "attention_scale": d_h^{-p}}`. The skeleton's own table is a placeholder
        (`SKELETON_TABLE`, the identity rules) that it never reads while it holds numbers.
        A network that already holds numbers gives them back with its skeleton.
        """
        if self.numbers is not None:
            return dataclasses.replace(self, numbers=None), self.numbers
        table = self.parametrisation
        numbers = {
            "factor": {g: {q: jnp.asarray(self.factor(g, q)) for q in QUANTITIES} for g in GROUPS},
            "branch": jnp.asarray(self.branch_multiplier),
            "output": jnp.asarray(table.output_multiplier(self.m_width)),
            "attention_scale": jnp.asarray(table.attention_scale(self.width // self.heads)),
        }
        skeleton = dataclasses.replace(
            self, parametrisation=Parametrisation(SKELETON_TABLE, optimizer=table.optimizer)
        )
        return skeleton, numbers

    def with_numbers(self, numbers: dict) -> "Transformer":
        """This network reading the table's numbers from `numbers` (`skeleton_and_numbers`),
        which may be traced."""
        return dataclasses.replace(self, numbers=numbers)

    # -- parameters ----------------------------------------------------------------------
    def init(self, key: Array) -> dict:
        """A draw of the parameters (module docstring) from `key`."""
        N, E, L, V, T = (
            self.width,
            self.expansion * self.width,
            self.depth,
            self.vocab,
            self.context,
        )
        k_emb, k_pos, k_layers, k_out = jax.random.split(key, 4)
        s_emb = self.init_std * self.factor("embedding", "init_std")
        s_hid = self.init_std * self.factor("hidden_weights", "init_std")
        s_out = self.init_std * self.factor("unembedding", "init_std")
        dtype = jnp.result_type(float)

        def layer(index):
            ks = jax.random.split(jax.random.fold_in(k_layers, index), 6)
            shapes = {"q": (N, N), "k": (N, N), "v": (N, N), "o": (N, N)}
            attn = {
                n: s_hid * jax.random.normal(k, s, dtype)
                for (n, s), k in zip(shapes.items(), ks[:4], strict=True)
            }
            mlp = {
                "in": s_hid * jax.random.normal(ks[4], (N, E), dtype),
                "out": s_hid * jax.random.normal(ks[5], (E, N), dtype),
            }
            return attn, mlp

        attn_w, mlp_w = jax.vmap(layer)(jnp.arange(L))

        def extras(weights, bias_sizes):
            out = {"weights": weights}
            if self.bias:
                out["biases"] = {n: jnp.zeros((L, s), dtype) for n, s in bias_sizes.items()}
            if self.norm:
                out["norm"] = {"gain": jnp.ones((L, N), dtype), "shift": jnp.zeros((L, N), dtype)}
            return out

        params = {
            "embedding": {
                "tokens": s_emb * jax.random.normal(k_emb, (V, N), dtype),
                "positions": s_emb * jax.random.normal(k_pos, (T, N), dtype),
            },
            "attention": extras(attn_w, {"q": N, "k": N, "v": N, "o": N}),
            "mlp": extras(mlp_w, {"in": E, "out": N}),
            "unembedding": s_out * jax.random.normal(k_out, (N, V), dtype),
        }
        if self.norm:
            params["final_norm"] = {"gain": jnp.ones((N,), dtype), "shift": jnp.zeros((N,), dtype)}
        return params

    @staticmethod
    def labels(params: PyTree) -> PyTree:
        """The parametrisation group of every leaf of `params` (for `optax.multi_transform`)."""

        def label(path, _leaf):
            top = path[0].key
            if top in ("attention", "mlp"):
                return _HIDDEN[path[1].key]
            return top

        return jax.tree_util.tree_map_with_path(label, params)

    # -- forward -------------------------------------------------------------------------
    def embed(self, params: dict, tokens: Int[Array, " T"]) -> Array:
        """x^0, shape (T, N). Token ids are checked (the module docstring)."""
        check_ids(tokens, "tokens", self.vocab)
        T = tokens.shape[0]
        if T > self.context:
            raise ValueError(f"tokens: {T} tokens, more than context = {self.context}")
        emb = params["embedding"]
        return (emb["tokens"][tokens] + emb["positions"][:T]) * self.input_multiplier

    def residual(self, params: dict, tokens: Int[Array, " T"], *, capture: bool = False):
        """The residual stream of one sequence. **Returns** `(x^L, states)`: `x^L` of
        shape (T, N); `states` None, or with `capture` a dict of per-layer arrays:
        `x_attention`, `x_mlp` (x^{l+½}, x^{l+1}: (L, T, N)), `inputs` (the input of every
        matrix, `{"attention": {...}, "mlp": {...}}`, each (L, T, ·))."""
        T = tokens.shape[0]
        attn, mlp = self.branches(T)
        beta = self.branch_multiplier

        def body(h, theta):
            ta, tm = theta
            fa, ia = attn.branch(h, ta)
            h1 = h + beta * fa
            fm, im = mlp.branch(h1, tm)
            h2 = h1 + beta * fm
            out = None
            if capture:
                out = {
                    "x_attention": h1.reshape(T, -1),
                    "x_mlp": h2.reshape(T, -1),
                    "inputs": {"attention": ia, "mlp": im},
                }
            return h2, out

        x0 = self.embed(params, tokens)
        hL, states = lax.scan(body, x0.reshape(-1), (params["attention"], params["mlp"]))
        return hL.reshape(T, -1), states

    def readout(self, params: dict, xL: Array) -> Array:
        """Logits from the last residual stream `x^L` (T, N): (T, V)."""
        norm = params.get("final_norm")
        u = layer_norm(xL, norm["gain"], norm["shift"]) if norm is not None else xL
        return (u * self.logit_multiplier) @ params["unembedding"]

    def __call__(self, params: dict, tokens: Int[Array, " T"]) -> Array:
        """The logits of one sequence, shape (T, V); ids checked (the module docstring)."""
        return self.readout(params, self.residual(params, tokens)[0])

    def loss(self, params: dict, x: Int[Array, "B T"], y: Int[Array, "B T"]) -> Array:
        """Mean next-token cross-entropy over a batch of sequences `x` and targets `y`:
        integer token ids, in `[0, vocab)` where concrete (the module docstring)."""
        check_ids(x, "x", self.vocab)
        check_ids(y, "y", self.vocab)
        logits = jax.vmap(lambda t: self(params, t))(x)
        return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y))
