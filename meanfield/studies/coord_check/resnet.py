"""The coordinate check of a user's own block (`meanfield study coord-check --block
FILE.py:NAME --law FILE.py:NAME`, or `--model resnet` for the built-in 2LP unit): ResNets
`h^l = h^{l-1} + α Σ_{j≤M} φ(h^{l-1}, z^{j,l})`, z ~ the law, under each
`meanfield.parametrisation.ResNetParametrisation` (`--parametrisations`: `mean-ode`,
`depth-mup`, `standard`, `critical`, or a user's table as `FILE.py:NAME`), trained
`--steps` full-batch gradient-descent steps at learning rate `--lr` times the table's
factor, on the teacher regression of `meanfield study regimes` (`--inputs` points in
dimension `--d`), at every width M of `--widths` (depth `--depth`) and every depth L of
`--depths` (width `--width`), `--seeds` draws each. The coordinates are those of
`meanfield.diagnostics.unit_coord_check`, measured at every step on the training
inputs; the fits, verdicts and figures are the Transformer's (`coord_check`).

**The initial function is subtracted**: each network is trained on the targets
shifted by its own initial deviation, `y + (h_0^L(x) − x)`, so that its first residual
is the teacher's `x − y` at every size. Otherwise the initial output's random part, of
size `(L M α²)^{1/2}`, enters the backward signal and makes every change depend on the
size at small sizes (measured: the mean-ODE state's change against M at L = 4 from
slope −0.36 to ...), a finite-size effect the first-order prediction does not
describe; μP's zero-initialised readout removes it the same way.

One compiled program per shape (L, M) serves every table: the residual scale and the
learning rate are data. float32 by default, as the Transformer's (`--x64` for float64).
"""

import contextlib
import functools

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax

from ...blocks.two_layer import TwoLayerBlock
from ...diagnostics import unit_coord_check
from ...diagnostics.regimes import EXPLOSION_FACTOR
from ...harness.args import USER_ERRORS, user_code, user_error
from ...harness.runner import study_precision
from ...harness.self_check import of_terms
from ...laws.unit import TwoLayerGaussianLaw
from ...models.resnet import ResNet
from ...parametrisation import RESNET_PARAMETRISATIONS, ResNetParametrisation
from ...runtime.errors import StudyInputError
from ...training.loop import gd_loop
from ...training.resnet import loss_and_gradients
from ..regimes.study import task
from ..shared import transformer_options
from ..shared.own_block import check_block_law, user_block, user_law
from ..shared.transformer_options import SIZE_LIMIT, listed

PRESETS = {
    "quick": {
        "parametrisations": ["mean-ode", "depth-mup", "standard", "critical"],
        "widths": [16, 32, 64, 128, 256],
        "depth": 8,
        "depths": [8, 16, 32, 64, 128],
        "width": 32,
        "steps": 4,
        "seeds": 8,
        "lr": 0.05,
        "d": 8,
        "inputs": 32,
    },
    "paper": {
        "parametrisations": ["mean-ode", "depth-mup", "standard", "critical"],
        "widths": [32, 64, 128, 256, 512, 1024],
        "depth": 16,
        "depths": [16, 32, 64, 128, 256, 512],
        "width": 64,
        "steps": 4,
        "seeds": 16,
        "lr": 0.05,
        "d": 16,
        "inputs": 128,
    },
}
OPTIONS = ("d", "inputs")  # the options of this model only (the Transformer's refused)


def tables(names, flag: str = "--parametrisations") -> list[ResNetParametrisation]:
    """The ResNet tables named (built-in names, or MODULE:NAME / FILE.py:NAME of a
    user's `ResNetParametrisation`); a one-line refusal naming `flag`."""
    return transformer_options.tables(
        names, flag, builtins=RESNET_PARAMETRISATIONS, kind=ResNetParametrisation
    )


def resnet_options(cfg: dict, args) -> None:
    """Check the ResNet's sizes, its block and its law (one line naming the option) and
    record in `cfg` the tables, how the block and law were given and whether the block is
    centred."""
    for flag, value in (("--widths", max(cfg["widths"])), ("--depths", max(cfg["depths"])),
                        ("--width", cfg["width"]), ("--depth", cfg["depth"]),
                        ("--d", cfg["d"]), ("--inputs", cfg["inputs"])):  # fmt: skip
        if value > SIZE_LIMIT:
            raise StudyInputError(f"{flag}: at most {SIZE_LIMIT}, got {value}")
    cfg["tables"] = [t.table() for t in tables(cfg["parametrisations"])]
    cfg["block"] = getattr(args, "block", None)
    cfg["law"] = getattr(args, "law", None)
    _block_and_law.cache_clear()  # a file edited since an earlier study is read afresh
    given = [s for s in (cfg["block"], cfg["law"]) if s]
    # the user's code first called and traced here: named on stderr if it runs long
    watch = (user_code("--block/--law", f"trying {' and '.join(given)} on the data")
             if given else contextlib.nullcontext())  # fmt: skip
    with watch:
        block, law = block_and_law(cfg)
        with study_precision(cfg["x64"]):
            xs, _ = data(cfg, jr.key(cfg["seed"]))  # the study's own inputs
            check_block_law(block, law, xs)
            # the state's predicted slope depends on it (unit_coord_check.predicted_slopes)
            try:
                cfg["centred"] = unit_coord_check.is_centred(block, law, xs)
            except USER_ERRORS as err:  # vmapped over draws of the law, unlike the check
                raise StudyInputError(
                    f"--block/--law: φ(h, z) over a batch of draws of the law failed "
                    f"({user_error(err)})"
                ) from None


def block_line(cfg) -> str:
    """The headline's line on the block: which, and whether it is centred."""
    which = cfg["block"] or "the built-in 2LP v tanh(uᵀh)"
    law = cfg["law"] or "u ~ N(0, I/d), v ~ N(0, I)"
    centred = "centred" if cfg["centred"] else "not centred"
    return (
        f"block {which}, law {law}: {centred} in its parameters (Monte Carlo), which sets "
        "the state's predicted slope"
    )


def block_and_law(cfg):
    """The user's `--block` / `--law`, or the built-in 2LP `v tanh(uᵀh)` with
    u ~ N(0, I/d), v ~ N(0, I) (the regimes study's units); a user's file is loaded once
    per study (the configuration's check and the run share it)."""
    return _block_and_law(cfg["block"], cfg["law"], cfg["d"], bool(cfg["x64"]))


@functools.lru_cache(maxsize=8)
def _block_and_law(block_spec, law_spec, d: int, x64: bool):
    with study_precision(x64):
        block = TwoLayerBlock("tanh") if block_spec is None else user_block(block_spec)
        law = (
            TwoLayerGaussianLaw(d, sigma_u=d**-0.5, sigma_v=1.0)
            if law_spec is None
            else user_law(law_spec)
        )
    return block, law


def resnet_cost_parts(cfg) -> list:
    """Memory and work of the trainings (`args.Cost`): a point trains its seeds at once,
    keeping per step the states and every unit's feature twice, (n, L, M, d)."""
    from ...harness.args import PYTHON_STEP, Cost

    n, d, S, K = cfg["inputs"], cfg["d"], cfg["seeds"], cfg["steps"]
    itemsize = 8 if cfg["x64"] else 4
    sizes = [(m, cfg["depth"]) for m in cfg["widths"]] + [(cfg["width"], L) for L in cfg["depths"]]
    memory = work = elements = 0.0
    for M, L in sizes:
        per = n * L * M * d
        memory = max(memory, S * itemsize * 8 * per)
        elements = max(elements, S * per)
        work += len(cfg["parametrisations"]) * S * ((K + 1) * 40 * per + PYTHON_STEP / 20)
    return [
        Cost(
            "--widths/--depths/--width/--depth/--seeds/--inputs/--d/--steps",
            "the trainings",
            memory=memory,
            work=work,
            elements=elements,
            array="every unit's feature at every input, (seeds, inputs, L, M, d)",
            memory_flags="--widths/--depths/--width/--depth/--seeds/--inputs/--d",
        )
    ]


def programs(cfg):
    """`program(L, M, steps)`: the compiled training of a point's seeds, one per shape
    and number of steps, shared by every table (scale and learning rate are data)."""
    block, law = block_and_law(cfg)
    cache: dict = {}

    def program(L: int, M: int, steps: int):
        if (L, M, steps) in cache:
            return cache[(L, M, steps)]

        def one(key, scale, lr, xs, ys):
            p0 = ResNet.sample(block, law, L=L, M=M, scaling=1.0, key=key).params
            h0 = unit_coord_check.network(block, p0, scale).states(xs)
            # the initial function subtracted (module docstring): targets shifted by the
            # initial deviation, so that the first residual is x − y at every size
            targets = ys + (h0[:, -1] - xs)

            def grad_fn(theta, k):
                g = loss_and_gradients(unit_coord_check.network(block, theta, scale), xs, targets)
                coords = unit_coord_check.coordinates(block, scale, p0, theta, h0, g.adjoint.h)
                return g.grads.params, (g.loss, coords)

            # steps + 1 passes: the aux of pass k is measured at θ_k, k = 0..steps
            _, (losses, coords) = gd_loop(grad_fn, p0, optax.sgd(lr), steps + 1, history=False)
            return losses, coords

        cache[(L, M, steps)] = jax.jit(jax.vmap(one, in_axes=(0, None, None, None, None)))
        return cache[(L, M, steps)]

    return program


def data(cfg, root):
    """The teacher regression's inputs and targets, one set for every size and draw
    (the draws are the networks)."""
    return task(jr.fold_in(root, 1), cfg["d"], cfg["inputs"])


def point(cfg, program, table: ResNetParametrisation, M: int, L: int, key, xy, steps=None):
    """One table at one size: every quantity's size (mean over layers) at every step
    for every draw, and the per-layer sizes after the last step."""
    steps = cfg["steps"] if steps is None else steps
    keys = jnp.stack([jr.fold_in(key, s) for s in range(cfg["seeds"])])
    lr = cfg["lr"] * table.lr_factor(L, M)
    losses, coords = program(L, M, steps)(keys, table.scale(L, M), lr, *xy)
    losses = np.asarray(losses, float)  # (seeds, steps + 1)
    finite = np.all(np.isfinite(losses), axis=1)
    grew = np.max(np.where(np.isfinite(losses), losses, 0.0), axis=1) > (
        EXPLOSION_FACTOR * np.abs(losses[:, 0])
    )
    exploded = ~finite | grew
    out = summarise(losses, coords, unit_coord_check.QUANTITIES, exploded, steps)
    # changes and updates are differences (`self_check.of_terms`), small against their
    # terms at large depth: of states (`activation/state`), of units' features
    # (`activation/unit`), and for a layer's update, of M features at scale α
    state, unit = (np.asarray(coords[q], float)[~exploded] for q in unit_coord_check.ACTIVATIONS)
    scales = {"change/state": state, "change/output": state, "update/unit": unit,
              "update/layer": table.scale(L, M) * M * unit}  # fmt: skip
    for part in ("sizes", "per_layer"):
        for q, scale in scales.items():
            if q in out[part]:
                out[part][q] = of_terms(out[part][q], scale)
    return out


def summarise(losses, coords, quantities, exploded, steps: int) -> dict:
    """A point's record: the losses, the count of exploded draws, every quantity's size
    (mean over layers) at every step for every draw and its per-layer sizes after the
    last step, an exploded draw's written as null (never averaged into a NaN)."""
    out = {"losses": listed(losses[:, :steps]), "exploded": int(exploded.sum())}
    sizes, per_layer = {}, {}
    for q in quantities:
        v = np.asarray(coords[q], float)  # (seeds, steps + 1[, L])
        mean = v.reshape(v.shape[0], v.shape[1], -1).mean(axis=2)
        mean[exploded] = np.nan
        sizes[q] = listed(mean)
        if v.ndim == 3:
            last = v[:, -1, :].copy()
            last[exploded] = np.nan
            per_layer[q] = listed(last)
    out["sizes"] = sizes
    out["per_layer"] = per_layer
    return out
