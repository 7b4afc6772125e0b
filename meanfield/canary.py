"""The miscompile canary: every compiled hot path of the library, compiled (`jit`) against
the same function run op by op (`jax.disable_jit`), at sizes that cross the compilers'
tiling thresholds.

A compiler that reorders, fuses or tiles a computation changes its result by round-off
only; a result that differs by more is a miscompile. jaxlib 0.10.2's CPU backend, for one,
returns gradients of a broadcast-and-mean inner product wrong by ~100% at widths near
2000 and 4096 (right at 600, 1200 and 8192): the two-layer perceptron's errors against
its limit then grow with the width instead of falling like M^-1/2 (jax-ml/jax#39103).
Tests at small widths never see it, so the canary runs every probe at widths 2000, 4096,
4097 and 8192 (`SIZES`).

Run it with `meanfield canary` (a table, exit code 1 on a failure), from Python with
`run_canary()`, and in the test suite (`tests/test_canary.py`, at the optimisation level
users compile at). Each probe names the library function it exercises; the first probe is
the compiler's known-bad form itself, so the canary fails on a release that has that bug
even where the library no longer uses the form.
"""

import dataclasses
import math
import time
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

# widths at which XLA's CPU backend changes its tiling (the 0.10.2 miscompile: 2000, 4096)
SIZES = (2000, 4096, 4097, 8192)
QUICK_SIZES = (2000, 4097)
# the widest width a probe is built at (its arrays, width × 24 or width × 6 entries, stay
# small; a width of 10^9 made XLA abort in C++)
MAX_SIZE = 2**16
# the largest relative difference between compiled and op-by-op results that is round-off
TOLERANCE = {"float64": 1e-9, "float32": 1e-3}


@dataclasses.dataclass(frozen=True)
class Probe:
    """One hot path: `build(size, key) -> (fn, args)`; the canary compares
    `eqx.filter_jit(fn)(*args)` with `fn(*args)` under `jax.disable_jit()`.
    `exercises` names the library function(s) it runs."""

    name: str
    exercises: str
    build: Callable[[int, jax.Array], tuple[Callable, tuple]]


@dataclasses.dataclass(frozen=True)
class CanaryResult:
    """One probe at one size: the largest relative difference over the outputs' leaves
    (`‖jit − eager‖ / ‖eager‖`, NaN where one side is not finite and the other is),
    the tolerance, and whether it passed."""

    probe: str
    exercises: str
    size: int
    dtype: str
    difference: float
    tolerance: float
    seconds: float

    @property
    def ok(self) -> bool:
        return bool(self.difference <= self.tolerance)


def relative_difference(compiled, eager) -> float:
    """The largest `‖a − b‖ / ‖b‖` over the leaves of two pytrees of arrays (absolute where
    `‖b‖ = 0`); infinite where the non-finite entries differ.

    Relative to a leaf's own norm, which is its terms' scale for every probe's outputs:
    states, gradients, losses and parameters, and (the regimes probe) movements after two
    steps at a learning rate where they are 0.06–0.5 of what they are computed from, never
    a near-zero difference of larger terms (measured at widths 2000 and 4097: the largest
    leaf difference 4.3e-15 in float64, 1.1e-6 in float32, against bounds of 1e-9 and
    1e-3; issue 73). A probe whose output is such a difference returns its terms instead,
    as the studies' self-checks mark theirs (`meanfield.harness.self_check.of_terms`)."""
    worst = 0.0
    for a, b in zip(jax.tree.leaves(compiled), jax.tree.leaves(eager), strict=True):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            return math.inf
        fa, fb = np.isfinite(a), np.isfinite(b)
        if not np.array_equal(fa, fb) or not np.array_equal(a[~fa], b[~fb], equal_nan=True):
            return math.inf
        scale = float(np.linalg.norm(b[fb]))
        diff = float(np.linalg.norm(a[fa] - b[fb]))
        worst = max(worst, diff / scale if scale > 0 else diff)
    return worst


def compare(fn: Callable, args: tuple) -> float:
    """`relative_difference` of `fn(*args)` compiled (at the optimisation level in force)
    and run op by op. The op-by-op reference compiles each primitive with XLA's
    optimisations off (`jax_disable_most_optimizations`): one operation has nothing to
    fuse or reorder, and the reference compiles 14% faster (a whole canary at widths 2000
    and 4097 on a 2-core CPU: 64 s → 55 s)."""
    compiled = jax.block_until_ready(eqx.filter_jit(fn)(*args))
    previous = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", True)
    try:
        with jax.disable_jit():
            eager = jax.block_until_ready(fn(*args))
    finally:
        jax.config.update("jax_disable_most_optimizations", previous)
    return relative_difference(compiled, eager)


# --------------------------------------------------------------------------- the probes


def _normal(key, *shape):
    return jr.normal(key, shape, jnp.result_type(float))


def _known_bad_form(size, key):
    """jaxlib 0.10.2's miscompile (jax-ml/jax#39103): the gradient of a loss built on
    `mean(a[:, None, :] * u[None], -1)`, n = 3 inputs, D = 24, width `size`."""
    k = jr.split(key, 4)
    u, e, v = _normal(k[0], size, 24), _normal(k[1], 3, 24), _normal(k[2], size, 24)
    ys = _normal(k[3], 3, 2)

    def loss(u):
        p = jnp.mean(e[:, None, :] * u[None, :, :], axis=-1)
        f = (jnp.tanh(p) @ v / size)[:, :2]
        return 0.5 * jnp.mean(jnp.sum((f - ys) ** 2, axis=-1))

    return jax.grad(loss), (u,)


def _perceptron(size, key, activation="gelu"):
    from .models.perceptron import Perceptron

    kn, kx, ky = jr.split(key, 3)
    net = Perceptron.sample(
        kn, M=size, D=24, d_in=4, d_out=2, activation=activation, s_u=0.8, s_v=1.3,
        sigma_in=1.1, sigma_out=0.9,
    )  # fmt: skip
    return net, _normal(kx, 3, 4), _normal(ky, 3, 2)


def _two_layer_train(size, key):
    from .training.perceptron import train

    net, xs, ys = _perceptron(size, key)
    return (lambda net: train(net, xs, ys, lr_u=0.7, lr_v=0.35, steps=2)[1:]), (net,)


def _two_layer_particles(size, key):
    from .limits.perceptron import particle_dynamics
    from .models.perceptron import reduce

    net, xs, ys = _perceptron(size, key)
    p0, a0 = reduce(net, xs)
    g_in, g_out = net.embedding.grams(xs)
    weights = jnp.full(size, 1.0 / size, p0.dtype)

    def fn(p0, a0):
        out = particle_dynamics(
            p0, a0, weights, g_in, g_out, ys, "gelu", lr_u=0.7, lr_v=0.35, steps=2
        )
        return out.outputs, out.hidden_coef, out.preactivations

    return fn, (p0, a0)


def _resnet(size, key, L=3, d=6, n=5):
    from .blocks.two_layer import TwoLayerBlock
    from .laws.unit import TwoLayerGaussianLaw
    from .models.resnet import ResNet
    from .scaling import MeanODEScaling

    kn, kx, ky = jr.split(key, 3)
    net = ResNet.sample(
        TwoLayerBlock("tanh"), TwoLayerGaussianLaw(d=d), L=L, M=size, scaling=MeanODEScaling(),
        key=kn,
    )  # fmt: skip
    return net, _normal(kx, n, d), _normal(ky, n, d)


def _resnet_forward(size, key):
    net, xs, _ = _resnet(size, key)
    return (lambda net, xs: net.states(xs)), (net, xs)


def _resnet_adjoint(size, key):
    from .training.resnet import loss_and_gradients

    net, xs, ys = _resnet(size, key)

    def fn(net):
        g = loss_and_gradients(net, xs, ys)
        return g.loss, g.grads.params, g.adjoint

    return fn, (net,)


def _resnet_gd(size, key):
    from .training.resnet import mean_ode_sgd, train

    net, xs, ys = _resnet(size, key)
    opt = mean_ode_sgd(0.5, L=3, M=size)

    def fn(net):
        r = train(net, xs, ys, optimizer=opt, steps=2)
        return r.losses, r.net.params

    return fn, (net,)


def _mean_ode_fields(size, key):
    from .blocks.two_layer import TwoLayerBlock
    from .laws.unit import TwoLayerGaussianLaw
    from .limits.mean_ode import MeanODE
    from .limits.particles import monte_carlo_particles

    d, n = 6, 5
    kp, kh, kb = jr.split(key, 3)
    particles = monte_carlo_particles(TwoLayerGaussianLaw(d=d), size, key=kp)
    h, b = _normal(kh, n, d), _normal(kb, n, d)
    model = MeanODE(TwoLayerBlock("tanh"), particles, h, h, learning_rate=0.5)

    def fn(z, h, b):
        return model.velocity(h, z), model.adjoint_velocity(h, b, z)

    return fn, (particles.z, h, b)


def _particle_step(size, key):
    from .blocks.two_layer import TwoLayerBlock
    from .laws.unit import TwoLayerGaussianLaw
    from .limits.particles import monte_carlo_particles, particle_step

    d, n = 6, 5
    kp, kh, kb = jr.split(key, 3)
    z = monte_carlo_particles(TwoLayerGaussianLaw(d=d), size, key=kp).z
    h, b = _normal(kh, n, d), _normal(kb, n, d)
    return (lambda z, h, b: particle_step(TwoLayerBlock("tanh"), z, h, b, 0.5)), (z, h, b)


def _deep_embedded(size, key, activation="tanh"):
    from .models.deep_embedded import DeepEmbeddedResNet

    kn, kx, ky = jr.split(key, 3)
    net = DeepEmbeddedResNet.sample(kn, L=3, M=size, D=24, d_in=4, d_out=2, activation=activation)
    return net, _normal(kx, 3, 4), _normal(ky, 3, 2)


def _deep_embedded_train(size, key):
    from .training.deep_embedded import train

    net, xs, ys = _deep_embedded(size, key)
    return (lambda net: train(net, xs, ys, eta_u=0.5, eta_v=0.5, steps=2)), (net,)


def _deep_embedded_wide(size, key):
    """The deep embedded network with the embedding dimension D = `size` (M = 16)."""
    from .models.deep_embedded import DeepEmbeddedResNet
    from .training.deep_embedded import train

    kn, kx, ky = jr.split(key, 3)
    net = DeepEmbeddedResNet.sample(kn, L=2, M=16, D=size, d_in=4, d_out=2, activation="tanh")
    xs, ys = _normal(kx, 3, 4), _normal(ky, 3, 2)
    return (lambda net: train(net, xs, ys, eta_u=0.5, eta_v=0.5, steps=1)), (net,)


def _deep_embedded_limit_field(size, key):
    """The vector field of the joint L, M, D limit's nonlinear solve, on `size` nodes."""
    from .blocks.activations import resolve_activation
    from .limits.deep_embedded import conditional_nodes, nonlinear_field

    n, p, steps = 3, 6, 2
    ke, kz, kg, kn = jr.split(key, 4)
    a = _normal(kg, p, p)
    gram = a @ a.T / p + jnp.eye(p)
    nodes = conditional_nodes(_normal(kn, size, 2 * p), jnp.full(size, 1.0 / size), gram, 1.0, 1.0)
    eta, zeta = _normal(ke, steps + 1, n, p), _normal(kz, steps + 1, n, p)
    ymat = jnp.broadcast_to(jnp.eye(p), (n, p, p))
    coef = jnp.asarray([0.5, 0.5, 1.0, 1.0])
    rho = resolve_activation("tanh")

    def fn(y, nodes):
        return nonlinear_field(0.3, y, (steps, gram, nodes, coef, rho))

    return fn, ((eta, zeta, ymat), nodes)


def _res1_train(size, key):
    from .laws.depth import IIDGaussianLaw
    from .models.res1 import Res1Classifier
    from .training.res1 import train_res1

    kn, kd, kt, kl, kk = jr.split(key, 5)
    model = Res1Classifier.sample(
        kn, IIDGaussianLaw(d=16), L=3, d_in=8, classes=3, beta=0.5, activation="relu"
    )
    x = _normal(kd, size, 8)
    y = jr.randint(kl, (size,), 0, 3)
    data = (x, y, x[:64], y[:64])

    def fn(model):
        r = train_res1(model, data, key=kk, steps=2, batch_size=size, lr=1e-2)
        return r.losses, r.model.A, r.model.V, r.model.B

    return fn, (model,)


def _plain_gradients(size, key):
    from .models.plain import LayeredNet

    kn, kx, kr = jr.split(key, 3)
    n = min(size, 2048)  # N x N weights: 2048 keeps the largest at 32 MiB
    net = LayeredNet.sample(kn, L=2, N=n, architecture="pre-activation", activation="tanh")
    x, r = _normal(kx, n), _normal(kr, n)
    return (lambda net, x, r: net.gradient_log_norms(x, r)), (net, x, r)


def _plain_train(size, key):
    from .models.plain import Classifier
    from .training.plain import train_classifier

    kn, kx, kl = jr.split(key, 3)
    model = Classifier.sample(kn, d_in=8, classes=3, L=2, N=32, architecture="plain")
    x = _normal(kx, size, 8)
    y = jr.randint(kl, (size,), 0, 3)
    data = (x, y, x[:64], y[:64])

    def fn(model):
        trained, losses, acc = train_classifier(model, data, steps=2, lr=1e-2)
        return losses, trained.A, trained.C

    return fn, (model,)


def _regimes(size, key):
    import optax

    from .diagnostics.regimes import regime_diagnostics

    net, xs, ys = _resnet(size, key)

    def fn(net):
        r = regime_diagnostics(net, xs, ys, optimizer=optax.sgd(0.5 * size), steps=2)
        return (r.losses, r.predictor_movement, r.parameter_movement, r.local_change,
                r.global_change)  # fmt: skip

    return fn, (net,)


def _matrix_resnet(size, key):
    from .models.matrix import matrix_resnet

    kw, kx = jr.split(key)
    d = min(size, 2048)
    weights = _normal(kw, 3, d, d) / math.sqrt(d)
    xs = _normal(kx, 4, d)

    def fn(weights, xs):
        net = matrix_resnet(weights, 0.5)
        return net.states(xs)

    return fn, (weights, xs)


PROBES: tuple[Probe, ...] = (
    Probe(
        "compiler: gradient of a broadcast-and-mean inner product",
        "jax itself (the form of jax-ml/jax#39103)",
        _known_bad_form,
    ),  # fmt: skip
    Probe("two-layer perceptron: GD", "shallow.train", _two_layer_train),
    Probe("two-layer limit: particle GD", "shallow.particle_dynamics", _two_layer_particles),
    Probe("ResNet: forward", "ResNet.states", _resnet_forward),
    Probe("ResNet: adjoint and gradients", "loss_and_gradients", _resnet_adjoint),
    Probe("ResNet: GD", "training.train", _resnet_gd),
    Probe("mean ODE: vector fields", "MeanODE.velocity, adjoint_velocity", _mean_ode_fields),
    Probe("mean ODE: particle GD step", "particle_step", _particle_step),
    Probe("deep embedded ResNet: GD (width)", "deep_embedded.train", _deep_embedded_train),
    Probe("deep embedded ResNet: GD (dimension D)", "deep_embedded.train", _deep_embedded_wide),
    Probe(
        "deep embedded limit: vector field",
        "deep_embedded.nonlinear_field",
        _deep_embedded_limit_field,
    ),  # fmt: skip
    Probe("res-1 classifier: Adam", "res1.train_res1", _res1_train),
    Probe("plain/residual: gradient norms", "LayeredNet.gradient_log_norms", _plain_gradients),
    Probe("plain classifier: Adam", "plain.train_classifier", _plain_train),
    Probe("regimes: diagnostics", "regimes.regime_diagnostics", _regimes),
    Probe("matrix ResNet (sde, phases): forward", "neural_sde.matrix_resnet", _matrix_resnet),
)


def run_canary(
    sizes: Sequence[int] = SIZES,
    *,
    probes: Sequence[Probe] | None = None,
    key: jax.Array | None = None,
    report: Callable[[CanaryResult], None] | None = None,
) -> list[CanaryResult]:
    """Run every probe (default `PROBES`) at every size, at the current float precision.

    **Returns:** one `CanaryResult` per probe and size; `report(result)` is called as each
    finishes (the command line prints them)."""
    key = jr.key(0) if key is None else key
    dtype = str(jnp.result_type(float))
    results = []
    for i, probe in enumerate(PROBES if probes is None else probes):
        for size in sizes:
            t0 = time.perf_counter()
            fn, args = probe.build(int(size), jr.fold_in(key, i))
            diff = compare(fn, args)
            result = CanaryResult(
                probe.name, probe.exercises, int(size), dtype, diff, TOLERANCE[dtype],
                time.perf_counter() - t0,
            )  # fmt: skip
            results.append(result)
            if report is not None:
                report(result)
    return results
