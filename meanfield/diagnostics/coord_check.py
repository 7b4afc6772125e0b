"""The coordinate check (Mathematics §11): the μP package's diagnostic, extended to depth.

A network is trained `steps` updates with its parametrisation's optimiser (Adam or
SGD); at every step t its coordinates are measured on a fixed evaluation batch, each
as an RMS over the batch's entries (`coordinates`):

- **activations**: the residual stream x^0 (`embedding`), x^{l+½} (`attention`) and
  x^{l+1} (`mlp`) of every layer l;
- **changes**: the same, minus their value at initialisation (`Δx`), and the change of
  the logits;
- **updates**: for every matrix W, `(W_t − W_0) u_t`, its update applied to its own
  input at step t (per layer for the branches' q, k, v, o, in, out; the unembedding's
  with its output multiplier; the embedding's as `ΔE[tokens] + ΔP`).

Across widths (or depths) a quantity's size is summarised by the mean over the layers,
and its slope against the size in log–log is fitted over the independent draws
(networks and their training batches: `meanfield.stats.fits.fit_loglog`, a studentized
bootstrap over draws). A parametrisation that is correct in a dimension keeps every
quantity flat (slope 0) in it; `predicted_slopes` reads from the table what its
optimiser's first steps give (below), so the verdict says both whether a quantity is flat and
whether it is as the table predicts.

**Predicted slopes** (a few steps, the rules `lr ∝ m_N^a m_L^b`, init std `∝ m_N^s`,
branch multiplier `m_L^{-α}`, output multiplier `m_N^c`). Adam's step has entries of
the size of the learning rate whatever the gradient's, and an update is aligned with
its input, so `ΔW u` sums N coherent entries: `∝ N^{1+a}` (the unembedding's
`N^{1+a+c}`; the embedding's, a lookup, `N^{a}`), `∝ L^{b}` in depth. SGD's step is
the learning rate times the gradient, whose entries carry the backward signal at the
stream, `∝ N^{c+s_u}` (s_u the unembedding's init exponent), and in a branch its
multiplier `L^{-α}`: `ΔW u ∝ N^{1+a+c+s_u} L^{b-α}`, the unembedding's `N^{1+a+2c}`,
the embedding's `N^{a+c+s_u}`; for the query and key, whose gradients pass through
the attention logits, `N^{1+a+c+s_u+½−p}` (p the attention scale's exponent): at
initialisation a logit's backward signal sums the d_head ∝ N products of the stream's
signal with the values, uncorrelated (`√N`, not N), and the other of q, k enters
times `d_head^{-p}` (measured under μP with SGD: −0.59 and −0.71 against −½).
Activations are flat in width when `s = −½`, else the branches grow as `N^{2s+1}`;
in depth the L branches of size β add as independent terms, `L^{max(0, ½−α)}`. The
stream's change sums L coherent layer changes of size `β ΔW u`: `L^{max(0, 1−α+b)}`
in depth under Adam (`L^{max(0, 1−2α+b)}` under SGD), and in width the larger of the
hidden and the embedding's update. The slopes are asymptotic: at small sizes a growing
quantity may grow more slowly (the embedding's part of the stream does not grow).
"""

import jax
import jax.numpy as jnp
import numpy as np

from ..blocks.transformer import layer_norm
from ..parametrisation import Parametrisation
from ..stats.fits import fit_loglog

TOLERANCE = 0.1  # a slope within this of its target is "flat" / "as predicted"
MATRICES = {"attention": ("q", "k", "v", "o"), "mlp": ("in", "out")}
ACTIVATIONS = ("activation/embedding", "activation/attention", "activation/mlp")
CHANGES = ("change/attention", "change/mlp", "change/logits")
UPDATES = tuple(f"update/{m}" for ms in MATRICES.values() for m in ms) + (
    "update/embedding",
    "update/unembedding",
)
QUANTITIES = ACTIVATIONS + CHANGES + UPDATES


def _rms(a, axis=None):
    return jnp.sqrt(jnp.mean(a**2, axis=axis))


def _run(model, params, tokens):
    def one(t):
        xL, states = model.residual(params, t, capture=True)
        return model.embed(params, t), states, model.readout(params, xL), xL

    return jax.vmap(one)(tokens)


def reference_states(model, params0: dict, tokens) -> tuple:
    """The initial network's states on `tokens`, for `coordinates(..., reference=)`
    (computed once, outside a training loop)."""
    return _run(model, params0, tokens)


def coordinates(model, params0: dict, params: dict, tokens, *, reference=None) -> dict:
    """The coordinates of `params` (after training from `params0`) on the batch `tokens`
    (B, T) (module docstring): a dict of per-layer arrays (L,) for the branch
    quantities and scalars for the others. `reference`: `reference_states(model,
    params0, tokens)`, if already computed."""
    if reference is None:
        reference = reference_states(model, params0, tokens)
    _, s_0, logits_0, _ = reference
    x0_t, s_t, logits_t, xL_t = _run(model, params, tokens)
    layer_axes = (0, 2, 3)  # (B, L, T, N): RMS per layer
    out = {"activation/embedding": _rms(x0_t)}
    for site in ("attention", "mlp"):
        x_t, x_0 = s_t[f"x_{site}"], s_0[f"x_{site}"]
        out[f"activation/{site}"] = _rms(x_t, layer_axes)
        out[f"change/{site}"] = _rms(x_t - x_0, layer_axes)
    out["change/logits"] = _rms(logits_t - logits_0)
    for branch, names in MATRICES.items():
        for name in names:
            dW = params[branch]["weights"][name] - params0[branch]["weights"][name]  # (L, i, o)
            u = s_t["inputs"][branch][name]  # (B, L, T, i)
            out[f"update/{name}"] = _rms(jnp.einsum("blti,lio->blto", u, dW), layer_axes)
    emb, emb0 = params["embedding"], params0["embedding"]
    T = tokens.shape[1]
    d_emb = (emb["tokens"] - emb0["tokens"])[tokens] + (emb["positions"] - emb0["positions"])[
        None, :T
    ]
    out["update/embedding"] = _rms(d_emb * model.input_multiplier)
    norm = params.get("final_norm")
    u = layer_norm(xL_t, norm["gain"], norm["shift"]) if norm is not None else xL_t
    dU = params["unembedding"] - params0["unembedding"]
    out["update/unembedding"] = _rms((u * model.logit_multiplier) @ dU)
    return out


def predicted_slopes(table: Parametrisation, against: str) -> dict[str, float]:
    """The slope of every quantity against `width` or `depth` that the table predicts
    for its optimiser's first steps (module docstring)."""
    if against not in ("width", "depth"):
        raise ValueError(f"against must be 'width' or 'depth', got {against!r}")
    a_h, b_h = table.exponents("hidden_weights", "lr")
    s_h = table.exponents("hidden_weights", "init_std")[0]
    a_u, b_u = table.exponents("unembedding", "lr")
    a_e, b_e = table.exponents("embedding", "lr")
    alpha, c = table.alpha, table.output
    # the gradients' own exponents: none under Adam (its step is the learning rate's
    # size); under SGD the backward signal at the stream ∝ N^{c + s_u}, the branches'
    # gradients carry their multiplier L^{-α}, the unembedding's the output's N^c
    sgd = table.optimizer == "sgd"
    s_u = table.exponents("unembedding", "init_std")[0]
    g_stream, g_branch, g_out = (c + s_u, -alpha, c) if sgd else (0.0, 0.0, 0.0)
    out = {"activation/embedding": 0.0}
    if against == "width":
        grow = 0.0 if s_h == -0.5 else 2 * s_h + 1
        out["activation/attention"] = out["activation/mlp"] = grow
        hidden = 1 + a_h + g_stream
        for q in UPDATES:
            out[q] = hidden
        if sgd:  # the attention logits' backward signal at initialisation (docstring)
            out["update/q"] = out["update/k"] = hidden + 0.5 - table.attention
        out["update/embedding"] = a_e + g_stream
        out["update/unembedding"] = 1 + a_u + c + g_out
        stream = max(hidden, out["update/embedding"])
        out["change/attention"] = out["change/mlp"] = stream
        out["change/logits"] = max(out["update/unembedding"], stream)
    else:
        out["activation/attention"] = out["activation/mlp"] = max(0.0, 0.5 - alpha)
        change = max(0.0, 1 - alpha + b_h + g_branch)
        out["change/attention"] = out["change/mlp"] = out["change/logits"] = change
        for q in UPDATES:
            out[q] = b_h + g_branch
        out["update/embedding"] = b_e
        out["update/unembedding"] = b_u
    return {q: float(v) for q, v in out.items()}


def band_verdict(ci, target: float, tol: float = TOLERANCE) -> str:
    """`"inside"` when the interval `ci` lies within `target ± tol`, `"outside"` when it
    misses that band, `"undecided"` when it straddles an edge (or there is none)."""
    if ci is None or any(c is None or not np.isfinite(c) for c in ci):
        return "undecided"
    lo, hi = float(ci[0]), float(ci[1])
    if target - tol <= lo and hi <= target + tol:
        return "inside"
    if hi < target - tol or lo > target + tol:
        return "outside"
    return "undecided"


def slope_fits(
    sizes,
    draws: dict[str, list],
    *,
    against: str,
    predicted: dict[str, float],
    fixed: dict | None = None,
    seed: int = 0,
    tol: float = TOLERANCE,
    as_theory: bool = True,
) -> dict[str, dict]:
    """The slope of every quantity against the sizes: `draws[q][i]` is the values of
    quantity q over the independent draws at `sizes[i]`. Each fit (`fit_loglog`) gains
    `predicted`, `flat` (`band_verdict` of its interval against 0) and `as_predicted`
    (against the prediction). `as_theory`: the prediction is also the fit's `theory`
    (whose exclusion a study lists); without it the fit has no theory."""
    out = {}
    for q, samples in draws.items():
        fit = fit_loglog(
            list(sizes),
            [np.asarray(s, float).tolist() for s in samples],
            quantity=q,
            against=against,
            fixed=fixed,
            theory=predicted.get(q) if as_theory else None,
            seed=seed,
            tolerance=tol,  # excluding the theory means missing its band, as `as_predicted`
        )
        fit["predicted"] = predicted.get(q)
        fit["flat"] = band_verdict(fit.get("ci95"), 0.0, tol)
        fit["as_predicted"] = (
            band_verdict(fit.get("ci95"), predicted[q], tol) if q in predicted else "undecided"
        )
        out[q] = fit
    return out
