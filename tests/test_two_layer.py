"""The two-layer perceptron of seed 002 (`meanfield.models.perceptron`) and `meanfield study
two-layer`."""

import json
import math

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import meanfield as mf
from meanfield.coupling import perceptron as shallow_coupling
from meanfield.harness.self_check import split_terms
from meanfield.limits import perceptron as shallow_limits
from meanfield.models import perceptron as shallow
from meanfield.models.embedding import Embedding, inner_d
from meanfield.studies import StudyInputError
from meanfield.studies.two_layer import study
from meanfield.training import perceptron as shallow_training

X = jnp.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0]])
Y = jnp.array([[1.0, 0.3], [-0.5, 0.2]])


def _net(key, M, D, **kw):
    return shallow.Perceptron.sample(key, M=M, D=D, d_in=3, d_out=Y.shape[1], **kw)


def test_train_takes_the_seeds_gd_steps():
    """`train` (jax.grad, η·D·M) against the seed's update written out by hand:
    Δv^j = −η_v (1/n) Σ_i ρ(P_i^j) W_out g_i,
    Δu^j = −η_u (1/n) Σ_i ρ'(P_i^j) ⟨v^j, W_out g_i⟩_D h^0_i."""
    net = _net(jr.key(1), 7, 5, s_v=0.8)
    thetas, _, _ = shallow_training.train(net, X, Y, lr_u=0.3, lr_v=0.6, steps=1)
    h0 = net.embedding.embed(X)
    u, v = np.array(net.u), np.array(net.v)
    g = np.array(net(X) - Y)
    w_out = np.array(net.embedding.w_out)
    du, dv = np.zeros_like(u), np.zeros_like(v)
    for j in range(7):
        for i in range(2):
            p = float(inner_d(net.u[j], h0[i]))
            b = w_out @ g[i]
            dv[j] -= 0.6 / 2 * math.tanh(p) * b
            du[j] -= 0.3 / 2 * (1 - math.tanh(p) ** 2) * float(np.mean(v[j] * b)) * np.array(h0[i])
    np.testing.assert_allclose(thetas["u"][1], u + du, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(thetas["v"][1], v + dv, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("activation", ["tanh", "identity", "relu"])
def test_the_network_is_its_reduced_particles(activation):
    """The network in R^D and the reduced particles (p, a) in R^{n + d_out} give the same
    outputs after every step, to rounding."""
    M = 33
    net = _net(jr.key(2), M, 12, activation=activation, s_u=1.3, sigma_out=0.7)
    _, f, _ = shallow_training.train(net, X, Y, lr_u=0.4, lr_v=0.7, steps=4)
    p0, a0 = shallow.reduce(net, X)
    g_in, g_out = net.embedding.grams(X)
    red = shallow_limits.particle_dynamics(
        p0, a0, jnp.full(M, 1 / M), g_in, g_out, Y, activation, lr_u=0.4, lr_v=0.7, steps=4
    )
    np.testing.assert_allclose(red.outputs, f, rtol=0, atol=1e-13)


def test_linear_limit_one_step_closed_form():
    """ρ = identity, D → ∞: f_0 = 0 and f_1(x) = (η_u s_v² + η_v s_u²) σ_in² σ_out²
    (1/n) Σ_i ⟨x, x_i⟩ y_i (SPEC §6)."""
    s_u, s_v, lr_u, lr_v, sig_in, sig_out = 1.3, 0.7, 0.2, 0.45, 0.9, 1.2
    g_in, g_out = shallow_limits.infinite_d_grams(X, 2, sig_in, sig_out)
    lim = shallow_limits.gaussian_limit(
        g_in, g_out, Y, activation="identity", s_u=s_u, s_v=s_v, lr_u=lr_u, lr_v=lr_v, steps=2
    )
    closed = (lr_u * s_v**2 + lr_v * s_u**2) * sig_in**2 * sig_out**2 * (X @ X.T) @ Y / 2
    np.testing.assert_allclose(lim.outputs[0], 0.0, atol=1e-14)
    np.testing.assert_allclose(lim.outputs[1], closed, rtol=0, atol=1e-10)
    assert lim.error_outputs < 1e-10


def test_fixed_d_limit_against_monte_carlo_particles():
    """Quadrature against 2^17 i.i.d. particles of the same law (same Grams), outputs and
    hidden coefficients after K = 3 steps, within 4 standard errors (16 batches)."""
    emb = Embedding.sample(jr.key(3), 16, 3, 2)
    g_in, g_out = emb.grams(X)
    kw = dict(lr_u=0.5, lr_v=0.5, steps=3)
    lim = shallow_limits.gaussian_limit(g_in, g_out, Y, order=20, **kw)
    batches = []
    for b in range(16):
        p0, a0, w = shallow_limits.monte_carlo_nodes(
            jr.key(100 + b), g_in, g_out, s_u=1.0, s_v=1.0, particles=2**13
        )
        # each batch is its own self-consistent particle system (a network of 2^13 units),
        # biased by O(1/N) ~ 1e-4, far below the batches' standard error (~1e-3)
        batches.append(shallow_limits.particle_dynamics(p0, a0, w, g_in, g_out, Y, "tanh", **kw))
    outs = np.stack([np.asarray(b.outputs[-1]) for b in batches])
    coefs = np.stack([np.asarray(b.hidden_coef[-1]) for b in batches])
    for mc, ref in ((outs, lim.outputs[-1]), (coefs, lim.hidden_coef[-1])):
        se = mc.std(axis=0, ddof=1) / math.sqrt(len(mc))
        gap = np.abs(mc.mean(axis=0) - np.asarray(ref))
        assert np.all(gap < 4 * se), (mc.mean(0), ref, se)
    assert lim.error_outputs < 1e-4


def test_hidden_field_reduction_against_brute_force_particles():
    """Stein / Gaussian conditioning: the limit's hidden field `W_out c_k` against a
    brute-force Monte Carlo in R^D: 2^15 particles (u, v) ∈ R^{2D} moved by the seed's
    full-dimensional updates, driven by the limit's outputs f_k, and ρ(P_k) v_k averaged."""
    D, N, K = 6, 2**15, 2
    emb = Embedding.sample(jr.key(4), D, 3, 2, sigma_out=0.8)
    g_in, g_out = emb.grams(X)
    lim = shallow_limits.gaussian_limit(g_in, g_out, Y, lr_u=0.5, lr_v=0.5, steps=K, order=20)
    ku, kv = jr.split(jr.key(5))
    u = math.sqrt(D) * jr.normal(ku, (N, D))
    v = math.sqrt(D) * jr.normal(kv, (N, D))
    h0 = emb.embed(X)  # (n, D)
    for k in range(K):
        g = lim.outputs[k] - Y  # (n, d_out)
        b = g @ emb.w_out.T  # (n, D): W_out g_i
        p = u @ h0.T / D  # (N, n)
        dv = -0.5 / 2 * jnp.tanh(p) @ b
        du = -0.5 / 2 * ((1 - jnp.tanh(p) ** 2) * (v @ b.T / D)) @ h0
        u, v = u + du, v + dv
    contrib = jnp.tanh(u @ h0.T / D)[:, :, None] * v[:, None, :]  # (N, n, D)
    mc = np.asarray(contrib.reshape(32, N // 32, 2, D).mean(axis=1))
    se = mc.std(axis=0, ddof=1) / math.sqrt(32)
    ref = np.asarray(lim.hidden_coef[K] @ emb.w_out.T)
    assert np.all(np.abs(mc.mean(axis=0) - ref) < 4.5 * se), (mc.mean(0), ref, se)


def test_skeleton_map_limit_is_the_large_d_limit_of_fixed_d_limits():
    """Fixed-D limits at the draws' Grams approach the D → ∞ limit at rate D^{-1/2}: the
    mean error over 8 draws falls by 4 ± 40% from D = 64 to 1024 and to 16384."""
    y = Y[:, :1]
    g_inf = shallow_limits.infinite_d_grams(X, 1)
    kw = dict(lr_u=0.5, lr_v=0.5, steps=2, order=24)
    inf = shallow_limits.gaussian_limit(*g_inf, y, **kw)
    means = []
    for D in (64, 1024, 16384):
        errs = []
        for i in range(8):
            emb = Embedding.sample(jr.fold_in(jr.key(6), 1000 * D + i), D, 3, 1)
            lim = shallow_limits.gaussian_limit(*emb.grams(X), y, **kw)
            errs.append(float(shallow_coupling.output_error(lim.outputs[2], inf.outputs[2])))
        means.append(np.mean(errs))
    ratios = np.array(means[:-1]) / np.array(means[1:])
    assert np.all((ratios > 2.4) & (ratios < 6.5)), (means, ratios)


def test_tangent_kernel_against_jacobians():
    """The dynamics' tangent kernel from the reduced particles against
    `D M (η_u J_u J_uᵀ + η_v J_v J_vᵀ)` from `jax.jacrev` of the network's outputs."""
    net = _net(jr.key(7), 9, 5, s_v=1.7)
    lr_u, lr_v = 0.3, 0.8
    g_in, g_out = net.embedding.grams(X)
    k = study.tangent_kernel(*shallow.reduce(net, X), g_in, g_out, "tanh", lr_u, lr_v)

    def outputs(u, v):
        return shallow.Perceptron(net.embedding, u, v, net.activation)(X)

    ju = jax.jacrev(outputs, argnums=0)(net.u, net.v).reshape(4, -1)
    jv = jax.jacrev(outputs, argnums=1)(net.u, net.v).reshape(4, -1)
    ref = 5 * 9 * (lr_u * ju @ ju.T + lr_v * jv @ jv.T)
    np.testing.assert_allclose(np.asarray(k).reshape(4, 4), ref, rtol=1e-12, atol=1e-13)


def test_critical_scale_of_a_scalar_output_is_one():
    """d_out = 1: V is a row of M Gaussians, ‖V‖_2 ≈ sqrt(M), so σ_v* ≈ 1 = min(√M, 1)."""
    crit = study.critical_scale(jr.key(8), widths=(128,), outputs=(1, 128), draws=8)
    by = {r["d_out"]: r for r in crit["rows"]}
    assert abs(by[1]["sigma_v_star"] - 1.0) < 0.06
    # d_out = M: ‖V‖_2 ≈ 2 sqrt(M), σ_v* ≈ sqrt(M)/2 = the heuristic 1/(2/sqrt(M))
    assert abs(by[128]["sigma_v_star"] / by[128]["heuristic"] - 1) < 0.06


def test_bad_inputs_are_refused(tmp_path):
    with pytest.raises(ValueError, match="M:"):
        _net(jr.key(0), 0, 4)
    with pytest.raises(ValueError, match="s_v:"):
        _net(jr.key(0), 4, 4, s_v=-1.0)
    with pytest.raises(ValueError, match="ys:"):
        shallow.check_data(X, Y[:1])
    with pytest.raises(ValueError, match="xs: contains NaN"):
        shallow.check_data(X.at[0, 0].set(jnp.nan), Y)
    with pytest.raises(ValueError, match="order:"):
        shallow_limits.gaussian_nodes(jnp.eye(2), jnp.eye(2), s_u=1.0, s_v=1.0, order=2000)
    np.savez(tmp_path / "nox.npz", y=np.ones((2, 1)))
    np.savez(tmp_path / "shape.npz", x=np.ones((2, 3)), y=np.ones((3, 1)))
    np.savez(tmp_path / "nan.npz", x=np.full((2, 3), np.nan), y=np.ones((2, 1)))
    (tmp_path / "junk.npz").write_text("not a zip")
    cases = [
        ({"data": str(tmp_path / "missing.npz")}, "--data: no such file"),
        ({"data": str(tmp_path / "nox.npz")}, "--data: .* has no array 'x'"),
        ({"data": str(tmp_path / "shape.npz")}, "--data: ys: must have shape"),
        ({"data": str(tmp_path / "nan.npz")}, "--data: xs: contains NaN"),
        ({"data": str(tmp_path / "junk.npz")}, "--data: cannot read"),
        ({"M": [64, 64]}, "^--M: values must be strictly increasing"),
        ({"D": [0, 8]}, "^--D: expected a comma-separated list of positive integers"),
        ({"D_limit": [1, 8]}, "--D, --D-limit: the Gram of 2 inputs is singular"),
        ({"seeds": 1}, "--seeds: need at least 2"),
        ({"activation": "nope"}, "--activation: unknown"),
    ]
    for options, message in cases:
        with pytest.raises(StudyInputError, match=message):
            mf.run_study("two-layer", out=str(tmp_path / "s"), no_progress=True, **options)


def test_small_study_end_to_end(tmp_path, self_checked):
    """A small grid: results.json with points per (D, M) and step, fits with intervals,
    the collapse, the criteria and critical-scale tables, and three figures."""
    r = mf.run_study(
        "two-layer", out=str(tmp_path / "tl"), M=[64, 256, 1024], D=[4, 16],
        D_limit=[16, 256], s_v_sweep=[0.5, 2.0, 8.0], sweep_M=[64], sweep_D=8, seeds=4,
        steps=1, n_sweep=[2, 16], input_draws=60, input_M=64, input_D=32, no_progress=True,
    )  # fmt: skip
    self_checked(r)
    widths = [p for p in r["points"] if p["part"] == "width"]
    assert len(widths) == 6 and len(widths[0]["output_error"]) == 2
    # part (a): one program per D, its widths padded into the widest (within the budget)
    assert r["timing"]["programs"] == 2 and set(r["timing"]["boxes"].values()) == {1024}
    assert all(p["output_error"][1]["mean"] >= 10 * p["reference_error"] for p in widths)
    fit = next(
        f for f in r["fits"] if f["quantity"] == "hidden_error" and f["against"] == "M"
        and f["fixed"] == {"D": 16, "steps": 1}
    )  # fmt: skip
    assert fit["slope"] is not None and fit["ci95"] and abs(fit["slope"] + 0.5) < 0.25
    assert r["collapse"]["hidden_error"]["collapses_against"] == "D/M"
    theory = {f["quantity"]: f["theory"] for f in r["fits"] if f["against"] == "s_v"}
    assert theory == {"feature_movement": -1.0, "kernel_change": -2.0}  # as the docstring
    assert r["error_definitions"]["output_error"].startswith("max over the inputs")
    assert r["critical_scale"]["rows"]
    rows = r["input_factor"]["rows"]
    assert {(row["family"], row["n"]) for row in rows} == {
        (f, n) for f in ("orthogonal", "arc") for n in (2, 16)
    }
    assert all(row["ci95"][0] <= row["ratio"] <= row["ci95"][1] for row in rows)
    assert set(r["input_factor"]["summary"]) == {"orthogonal", "arc"}
    assert any(line.startswith("log(n/δ) factor") for line in r["verdict_lines"])
    for name in (
        "two_layer_limits",
        "two_layer_criteria",
        "two_layer_critical_scale",
        "two_layer_inputs",
    ):
        assert (tmp_path / "tl" / f"{name}.png").exists()
    on_disk = json.loads((tmp_path / "tl" / "results.json").read_text())
    assert on_disk["limit"]["infinite_D"]["error_estimate"] < 1e-4


def test_the_collapse_verdict_follows_the_data():
    """Errors c M^{-1/2} with the same c at every D collapse against M; with c ∝ sqrt(D)
    against D/M; a D whose means exploded takes no part, and with fewer than two D nothing
    is claimed."""
    from meanfield.studies.two_layer.study import _collapse

    cfg = {"steps": 0, "D": [4, 64]}

    def points(c_of_D, bad=()):
        return [
            {"part": "width", "D": D, "M": M,
             **{q: [{"mean": None if D in bad else c_of_D(D) / math.sqrt(M)}]
                for q in ("output_error", "hidden_error")}}
            for D in cfg["D"] for M in (16, 64)
        ]  # fmt: skip

    same = _collapse(cfg, points(lambda D: 0.3))
    assert same["output_error"]["collapses_against"] == "M"
    grows = _collapse(cfg, points(lambda D: 0.3 * math.sqrt(D)))
    assert grows["hidden_error"]["collapses_against"] == "D/M"
    none = _collapse(cfg, points(lambda D: 0.3, bad=(64,)))
    assert (
        none["output_error"]["collapses_against"] is None
        and "fewer than two" in (none["output_error"]["reason"])
    )


def test_a_padded_perceptron_trains_as_its_own_width(key):
    """`train` with `width`: a network whose units fill the first rows of wider arrays
    (zero beyond) trains as the narrower network itself (`train` unpadded): the same
    outputs and hidden fields after every step, its padded rows still zero at the end,
    also for ρ(0) != 0 (sigmoid), where an unmasked padded unit would move."""
    k1, k2 = jr.split(key)
    own = _net(k1, 5, 8, activation="sigmoid", s_v=1.3)
    thetas, f, h = shallow_training.train(own, X, Y, lr_u=0.4, lr_v=0.3, steps=3)

    def padded(width):
        rows = ((0, 12 - 5), (0, 0))
        net = shallow.Perceptron(
            own.embedding, jnp.pad(own.u, rows), jnp.pad(own.v, rows), own.activation
        )
        return shallow_training.train(net, X, Y, lr_u=0.4, lr_v=0.3, steps=3, width=width)

    thetas_p, f_p, h_p = jax.jit(padded)(jnp.asarray(5))
    np.testing.assert_allclose(f_p, f, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(h_p, h, rtol=1e-12, atol=1e-14)
    for name in ("u", "v"):
        np.testing.assert_allclose(thetas_p[name][:, :5], thetas[name], rtol=1e-12, atol=1e-14)
        assert not np.any(thetas_p[name][:, 5:])
    moved = shallow_training.train(
        shallow.Perceptron(own.embedding, jnp.pad(own.u, ((0, 7), (0, 0))),
                           jnp.pad(own.v, ((0, 7), (0, 0))), own.activation),
        X, Y, lr_u=0.4, lr_v=0.3, steps=3,
    )[0]  # fmt: skip
    assert np.any(moved["v"][-1, 5:])  # without the mask the padded units do move


def test_part_a_padded_into_a_wider_program_gives_its_own_numbers():
    """Part (a) of the study in a wider point's program against its own: every error of
    every draw equal to round-off (the draws are the same: the first rows of a wider
    draw are the narrower one's)."""
    cfg = dict(activation="tanh", sigma_in=1.0, sigma_out=1.0, s_u=1.0, s_v=1.0,
               lr_u=0.5, lr_v=0.5, steps=1, seeds=2, seed=0, x64=True)  # fmt: skip
    s = study._Study(cfg, X, Y, boxes={(4, 64): (4, 1024)})
    spec = {"part": "width", "D": 4, "M": 64}
    (padded, _), (own, _) = split_terms(s.point(spec)), split_terms(s.point(spec, padded=False))
    assert padded["reference_error"] == own["reference_error"]
    for name in ("output_error", "hidden_error"):
        for a, b in zip(own[name], padded[name], strict=True):
            np.testing.assert_allclose(b["values"], a["values"], rtol=1e-10, err_msg=name)
