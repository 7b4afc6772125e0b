"""Path-driven limits (SPEC §4): Diffrax solves on the pre-sampled path against the scan,
against plain loops and against Diffrax's own interpolation; phases utilities."""

import math
import warnings

import diffrax
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

from meanfield.blocks.layers import PerceptronBlock, PerceptronParams
from meanfield.diagnostics.phases import (
    critical_beta,
    depth_ratios,
    perceptron_resnet,
    zero_crossing,
)
from meanfield.laws.depth import BrownianLaw, FractionalBrownianLaw, SmoothGPLaw
from meanfield.limits.neural_sde import NeuralODE, NeuralSDE
from meanfield.models.matrix import matrix_resnet
from meanfield.models.resnet import ResNet
from meanfield.solvers import GridPath, solve_controlled


def plain_loop(V, beta, x):
    """h_k = h_{k−1} + L^{-β} V_k tanh(h_{k−1}), a Python loop in numpy."""
    V, h = np.asarray(V), np.asarray(x, dtype=float)
    L = V.shape[0]
    out = [h]
    for k in range(L):
        h = h + L ** (-beta) * V[k] @ np.tanh(h)
        out.append(h)
    return np.stack(out)


def test_grid_path_matches_diffrax_linear_interpolation(key):
    values = jr.normal(key, (9, 2, 3))
    ts = jnp.linspace(0.0, 1.0, 9)
    ours, lib = GridPath(values), diffrax.LinearInterpolation(ts=ts, ys=values)
    for t in (0.0, 0.03, 0.125, 0.5, 0.77, 1.0):
        np.testing.assert_allclose(ours.evaluate(t), lib.evaluate(t), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(
        ours.evaluate(0.1, 0.9), lib.evaluate(0.9) - lib.evaluate(0.1), rtol=1e-12, atol=1e-14
    )


@pytest.mark.parametrize("law", [BrownianLaw(3, 256), FractionalBrownianLaw(3, 0.7, 256)])
def test_euler_solve_on_the_path_is_the_finite_network(law, key):
    """Diffrax Euler with L steps on the shared path == the ResNet scan == a plain loop."""
    path = law.path(key)
    x = jnp.array([0.3, -1.0, 0.8])
    for L in (4, 32, 256):
        sol = NeuralSDE("tanh").solve(path, x, steps=L, save=L, solver="euler")
        assert bool(sol.ok)
        W = law.weights_from_path(path, L)
        scan = matrix_resnet(W, law.hurst, "tanh").states(x[None])[0]
        np.testing.assert_allclose(np.asarray(sol.ys), np.asarray(scan), rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(np.asarray(scan), plain_loop(W, law.hurst, x), rtol=1e-11)


def test_brownian_strong_error_shrinks_like_sqrt_L(key):
    """Finite networks vs the fine Euler–Maruyama solve on the same paths: the strong error
    ratio between L = 16 and L = 256 is about sqrt(16) = 4 (between 2.5 and 6.5)."""
    law = BrownianLaw(2, 1024)
    x = jnp.array([0.5, -0.5])

    def errors(k):
        path = law.path(k)
        ref = NeuralSDE("tanh").solve(path, x, save=256).ys[-1]
        return jnp.stack(
            [
                jnp.linalg.norm(matrix_resnet(law.weights_from_path(path, L), 0.5)(x) - ref)
                for L in (16, 256)
            ]
        )

    e = jax.vmap(errors)(jr.split(key, 200)).mean(axis=0)
    assert 2.5 < float(e[0] / e[1]) < 6.5


def test_heun_on_a_smooth_control_converges_to_the_ode():
    """dy = dX g(y) with X(t) = tA + t²B is the ODE y' = (A + 2tB) g(y): Heun on the grid
    path (second order) vs Dopri8 on the ODE."""
    A = jnp.array([[0.0, 1.0], [-1.0, 0.2]])
    B = jnp.array([[0.3, -0.2], [0.5, 0.1]])
    ts = jnp.linspace(0.0, 1.0, 1025)
    X = ts[:, None, None] * A[None] + ts[:, None, None] ** 2 * B[None]
    g = lambda t, y, args: jnp.tanh(y)
    y0 = jnp.array([0.4, -0.3])
    exact = diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, y, a: (A + 2 * t * B) @ jnp.tanh(y)),
        diffrax.Dopri8(),
        0.0,
        1.0,
        0.01,
        y0,
        stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-12),
    ).ys[-1]
    errs = [
        float(
            jnp.linalg.norm(
                solve_controlled(g, X, y0, steps=n, save=1, solver="heun").ys[-1] - exact
            )
        )
        for n in (64, 128)
    ]
    assert errs[0] < 1e-3
    assert 3.0 < errs[0] / errs[1] < 5.0  # second order (the linear interpolation is exact
    # to O(h²) per step on a quadratic path)


def test_neural_ode_solve_matches_rk4_loop(key):
    law = SmoothGPLaw(2, length_scale=0.3)
    path = law.path(key)
    x = jnp.array([0.5, -0.2])
    ys, ok, _ = NeuralODE("tanh").solve(path, x, save=4)
    assert bool(ok)
    f = lambda t, h: np.asarray(path(t)) @ np.tanh(h)
    h, n = np.asarray(x), 400
    for i in range(n):
        t, dt = i / n, 1.0 / n
        k1 = f(t, h)
        k2 = f(t + dt / 2, h + dt / 2 * k1)
        k3 = f(t + dt / 2, h + dt / 2 * k2)
        k4 = f(t + dt, h + dt * k3)
        h = h + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    np.testing.assert_allclose(np.asarray(ys[-1]), h, rtol=1e-9, atol=1e-10)
    # and the smooth-weight network converges to it at rate 1/L
    e = [
        float(jnp.linalg.norm(matrix_resnet(law.weights(key, L), 1.0)(x) - ys[-1]))
        for L in (32, 64)
    ]
    # first order: halving 1/L halves the error (2); a half-order scheme would give
    # sqrt(2) = 1.41 and a non-convergent one 1, both outside the interval
    assert 1.6 < e[0] / e[1] < 2.5


def test_solve_controlled_bad_input():
    path = jnp.zeros((9, 2, 2))
    g = lambda t, y, a: y
    with pytest.raises(ValueError, match="steps=3 must divide"):
        solve_controlled(g, path, jnp.ones(2), steps=3, save=1)
    with pytest.raises(ValueError, match="save=3 must divide"):
        solve_controlled(g, path, jnp.ones(2), steps=8, save=3)
    with pytest.raises(ValueError, match="solver='rk9'"):
        solve_controlled(g, path, jnp.ones(2), steps=8, save=1, solver="rk9")
    with pytest.raises(ValueError, match=r"^path must have shape \(n \+ 1, d, d\)"):
        solve_controlled(g, jnp.zeros((9, 2)), jnp.ones(2), steps=8, save=1)
    with pytest.raises(ValueError, match="^y0 must have shape"):
        solve_controlled(g, path, jnp.ones(3), steps=8, save=1)
    with pytest.raises(ValueError, match="^save must be a positive integer"):
        NeuralODE().solve(SmoothGPLaw(2, length_scale=0.3).path(jr.key(0)), jnp.ones(2), save=0)


def test_perceptron_resnet_and_ratios_match_jax_grad(key):
    kv, kw, kx, ky = jr.split(key, 4)
    L, d = 16, 5
    V = jr.normal(kv, (L, d, d)) / math.sqrt(d)
    W = jr.normal(kw, (L, d, d)) / math.sqrt(d)
    x, y = jr.normal(kx, (d,)), jr.normal(ky, (d,))
    alpha = L**-0.5
    ours = perceptron_resnet(V, W, alpha)
    ref = ResNet(PerceptronBlock("relu"), PerceptronParams(V=V, W=W), alpha)
    np.testing.assert_allclose(ours.states(x[None])[0], ref.states(x[None])[0], rtol=1e-12)
    r = depth_ratios(ours, x, y)
    hL = ref(x)
    p0 = jax.grad(lambda h0: 0.5 * jnp.sum((ref(h0) - y) ** 2))(x)
    pL = hL - y
    np.testing.assert_allclose(r.forward, jnp.linalg.norm(hL - x) / jnp.linalg.norm(x), rtol=1e-12)
    np.testing.assert_allclose(
        r.gradient, jnp.linalg.norm(p0 - pL) / jnp.linalg.norm(pL), rtol=1e-10
    )


def test_critical_beta_recovers_a_planted_crossing():
    """Synthetic ratios r = L^{0.6 − β} × log-normal noise: β_c = 0.6 inside the CI."""
    rng = np.random.default_rng(0)
    betas = [0.3, 0.45, 0.55, 0.65, 0.8, 1.0]
    Ls = [16, 32, 64, 128]
    noise = np.exp(0.3 * rng.standard_normal((len(betas), len(Ls), 1000)))
    samples = np.array([[L ** (0.6 - b) for L in Ls] for b in betas])[..., None] * noise
    est = critical_beta(betas, Ls, samples, theory=0.6, n_boot=200)
    assert abs(est["estimate"] - 0.6) < 0.03  # the slope noise is about 0.005 per β
    lo, hi = est["ci95"]
    assert lo <= 0.6 <= hi
    assert est["phases"][0] == "explosion" and est["phases"][-1] == "identity"
    # an explosion (all draws infinite) below β_c is handled, not a NaN
    samples[0] = np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no inf − inf inside the percentiles
        exploded = critical_beta(betas, Ls, samples, n_boot=50)
    assert abs(exploded["estimate"] - 0.6) < 0.03
    assert exploded["slopes_ci95"][0] == [math.inf, math.inf]
    assert zero_crossing([0.1, 0.2], [-1.0, -2.0]) is None


def test_strong_errors_are_the_networks_distances_to_euler_maruyama_on_the_fine_grid():
    """`coupling.neural_sde.strong_errors` on a Brownian path against a second route: the
    limit's Euler–Maruyama on the fine grid is the network of depth n_fine on that path,
    so each depth's final and sup errors are the distances between two networks built
    here (`matrix_resnet`). Small sizes: the fast tier's test of the module."""
    from meanfield.coupling.neural_sde import strong_errors
    from meanfield.limits.neural_sde import limit_beta
    from meanfield.models.matrix import matrix_resnet

    law, key, x, depths = BrownianLaw(2, 32), jax.random.key(3), jnp.array([0.5, -1.0]), [4, 16]
    out = strong_errors(law, x, depths, key=key)
    path, beta = law.path(key), limit_beta(law)

    def states(L):
        return np.asarray(
            matrix_resnet(law.weights_from_path(path, L), beta, "tanh").states(x[None])[0]
        )

    fine = states(law.n_fine)
    for i, L in enumerate(depths):
        err = np.linalg.norm(states(L) - fine[:: law.n_fine // L], axis=-1)
        np.testing.assert_allclose(float(out["final"][i]), err[-1], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(float(out["sup"][i]), err.max(), rtol=1e-9, atol=1e-12)
        assert err[-1] > 1e-6  # a real error, not a vacuous zero
    assert float(out["check_final"]) > 1e-6 and bool(out["ok"])
