"""The phases at initialisation (SPEC §4): bounds, estimator, draws and the study's helpers,
each against values written out here."""

import math
from types import SimpleNamespace

import jax.random as jr
import numpy as np
import pytest

from meanfield.diagnostics.phases import (
    GRADIENT_BOUNDS,
    critical_beta,
    forward_bounds,
    median_log_slope,
    zero_crossing,
)
from meanfield.io.plotting import cell_edges, size_ticks, use_agg
from meanfield.laws.depth import IIDGaussianLaw
from meanfield.studies.phases import study


def test_bounds_are_those_of_spec_section_4():
    lo, hi = forward_bounds(8, 0.5)  # sqrt(22/4) = 2.3452, sqrt(10/4) = 1.5811
    assert lo == pytest.approx(math.exp(0.375 - 2.345207879911715) - 1, rel=1e-14)
    assert hi == pytest.approx(math.exp(2.5811388300841898) + 1, rel=1e-14)
    assert GRADIENT_BOUNDS == pytest.approx((0.6487212707001282, 53.598150033144236), rel=1e-14)
    with pytest.raises(ValueError, match="delta"):
        forward_bounds(8, 1.0)


def test_stability_check_counts_squared_ratios():
    """The bounds are on ‖h_L − h_0‖²/‖h_0‖²: ratios 0.5, 1, 3, 10 square to 0.25, 1, 9, 100,
    of which 3 lie below the d = 8, δ = 1/2 upper bound 14.21 (all 4 ratios do)."""
    cfg = {"d": 8, "L": [4], "deltas": [0.5]}
    samples = {
        "forward": np.array([[[0.5, 1.0, 3.0, 10.0]]]),
        "gradient": np.array([[[1.0, 1.0, 2.0, 2.0]]]),
    }
    row = study.stability_check(cfg, samples, 0)["per_L"][0]
    assert row["forward_sq"][0]["fraction_inside"] == 0.75
    assert row["gradient_sq_mean"] == pytest.approx(2.5)  # (1 + 1 + 4 + 4) / 4
    assert row["gradient_inside_bounds"]


def test_stability_check_verdicts_fail_on_contradicting_data():
    """Ratios far outside the forward bounds and a gradient mean far above its bounds (by
    many standard errors): every verdict says no; at the bounds' centre, yes."""
    cfg = {"d": 8, "L": [4], "deltas": [0.5, 0.1]}
    samples = {
        "forward": np.full((1, 1, 64), 100.0),  # squared: 1e4, above both upper bounds
        "gradient": np.sqrt(np.linspace(900.0, 1100.0, 64))[None, None],  # mean 1000 > 53.6
    }
    row = study.stability_check(cfg, samples, 0)["per_L"][0]
    assert [f["holds"] for f in row["forward_sq"]] == [False, False]
    assert not row["gradient_inside_bounds"] and not row["gradient_consistent_with_bounds"]
    samples = {"forward": np.full((1, 1, 64), 1.0), "gradient": np.full((1, 1, 64), 2.0)}
    row = study.stability_check(cfg, samples, 0)["per_L"][0]
    assert [f["holds"] for f in row["forward_sq"]] == [True, True]
    assert row["gradient_inside_bounds"] and row["gradient_consistent_with_bounds"]


def test_identity_verdict_fails_on_contradicting_data():
    """The flow identity holds when every network's flow mean is within 4 of its standard
    errors of the backward ratio; one network 5 SE off breaks it; non-finite ones are left out,
    and with none left nothing is claimed."""
    ok = [[1.0, 1.0 + 3.9e-2, 1e-2], [2.0, 2.0 - 1e-3, 1e-2], [float("nan"), 1.0, 1e-2]]
    v = study.identity_verdict(ok)
    assert (
        v["holds"] and v["max_abs_z"] == pytest.approx(3.9) and len(v["backward_flow_mean_se"]) == 2
    )
    v = study.identity_verdict([*ok, [1.0, 1.05, 1e-2]])
    assert not v["holds"] and v["max_abs_z"] == pytest.approx(5.0)
    v = study.identity_verdict([[float("inf"), 1.0, 1e-2], [1.0, 1.0, 0.0]])
    assert not v["holds"] and v["max_abs_z"] is None


def test_the_identity_over_every_beta_claims_nothing_when_nothing_was_judged():
    """All networks non-finite or without spread at every β: not "holds" (all([]) is True)
    but None, printed "not judged"; one judged row failing makes the whole fail."""
    unjudged = study.identity_verdict([[float("inf"), 1.0, 1e-2], [1.0, 1.0, 0.0]])
    assert study.identity_summary([{"beta": b, **unjudged} for b in (0.25, 0.5)]) is None
    good = study.identity_verdict([[1.0, 1.0 + 1e-3, 1e-2]])
    bad = study.identity_verdict([[1.0, 1.05, 1e-2]])
    assert study.identity_summary([good, unjudged]) is True
    assert study.identity_summary([good, bad, unjudged]) is False


def test_rising_with_hurst_is_computed_and_can_fail():
    step = [0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0]  # a β grid of step 0.125
    assert study.rising_with_hurst([0.5, 0.5, 0.7, 0.9], step)
    assert study.rising_with_hurst([0.5, 0.4, 0.8], step)  # a dip within one grid step
    assert not study.rising_with_hurst([0.9, 0.7, 0.5], step)  # falling
    assert not study.rising_with_hurst([0.6, 0.6], step)  # flat
    assert not study.rising_with_hurst([0.5, None, 0.9], step)  # one not measured
    assert not study.rising_with_hurst([0.5, 0.2, 0.9], step)  # a fall beyond one step


def test_iid_forward_ratio_has_its_closed_form_mean():
    """E[‖h_L − h_0‖²/‖h_0‖²] = (1 + L^{-2β}/2)^L − 1 for V, W independent with N(0, 1/d)
    entries (the increments are orthogonal and E‖V ReLU(W h)‖² = ‖h‖²/2); W drawn from V's
    key would change it. 4000 draws, within 4 standard errors."""
    cfg = {**study.DEFAULTS, **study.PRESETS["quick"], "d": 4, "L": [8], "beta": [0.5, 1.0]}
    cfg.update(weights="iid", seed=3, hurst=None)
    run = study.chunk_program(cfg, IIDGaussianLaw(4))
    forward, _, forward_max = run(study.seed_keys(cfg, None, 0, 4000))
    assert np.all(np.asarray(forward_max) >= np.asarray(forward))
    r2 = np.asarray(forward)[:, 0, :] ** 2  # (draws, β)
    for i, beta in enumerate(cfg["beta"]):
        exact = (1 + 8 ** (-2 * beta) / 2) ** 8 - 1
        se = r2[:, i].std(ddof=1) / math.sqrt(len(r2))
        assert abs(r2[:, i].mean() - exact) < 4 * se, (beta, r2[:, i].mean(), exact, se)


def test_seed_keys_do_not_depend_on_chunks():
    cfg = {"seed": 5}
    whole = np.asarray(jr.key_data(study.seed_keys(cfg, None, 0, 16)))
    first, second = (np.asarray(jr.key_data(study.seed_keys(cfg, None, a, a + 8))) for a in (0, 8))
    np.testing.assert_array_equal(whole, np.concatenate([first, second]))
    assert len({tuple(k) for k in whole}) == 16


def test_theory_beta():
    assert study.theory_beta("iid", None) == 0.5
    assert study.theory_beta("smooth", None) == 1.0
    assert study.theory_beta("fbm", 0.3) == 0.5  # max(H, 1/2)
    assert study.theory_beta("fbm", 0.8) == 0.8


def test_zero_crossing_uses_the_running_minimum():
    """Slopes 0.3, 0.5, −0.1: the envelope 0.3, 0.3, −0.1 crosses at 0.5 + 0.1·0.3/0.4."""
    assert zero_crossing([0.4, 0.5, 0.6], [0.3, 0.5, -0.1]) == pytest.approx(0.575)
    assert zero_crossing([0.4, 0.5], [0.3, -math.inf]) == pytest.approx(0.45)  # no slope at 0.5


def test_median_slope_is_robust_and_handles_zero_and_overflow():
    Ls = [16, 64]
    # one huge draw at L = 16: the median is 1 at both depths, slope 0 (a mean would not be)
    assert median_log_slope(Ls, np.array([[1.0, 1.0, 1.0, 1e3], [1.0, 1.0, 1.0, 1.0]])) == 0.0
    # r = c L^{-1/2} exactly
    assert median_log_slope(Ls, np.array([[0.25] * 3, [0.125] * 3])) == pytest.approx(-0.5)
    # h_L = h_0 exactly for most draws (deep identity phase): −inf, not an explosion
    assert median_log_slope(Ls, np.array([[0.1, 0.1, 0.1], [0.0, 0.0, 0.1]])) == -math.inf
    assert median_log_slope(Ls, np.array([[0.1, 0.1, 0.1], [np.inf, np.inf, 0.1]])) == math.inf


def test_critical_beta_bootstrap_equals_a_plain_loop_over_replicates(monkeypatch):
    """The bootstrap, computed for every replicate at once and in chunks, is the loop over
    replicates with the scalar `median_log_slope` and `zero_crossing` and the same draws
    of resampled networks; exploded (inf, NaN) and underflowed (0) draws included."""
    from meanfield.diagnostics import phases

    rng = np.random.default_rng(7)
    betas, Ls, draws, n_boot = [0.2, 0.4, 0.6, 0.8, 1.0], [8, 16, 32, 64], 9, 300
    noise = np.exp(0.5 * rng.standard_normal((len(betas), len(Ls), draws)))
    samples = np.array([[L ** (1.05 - b) for L in Ls] for b in betas])[..., None] * noise
    samples[0, -1, :3] = np.inf  # a few exploded draws: some replicates' medians overflow
    samples[1, -1, 3] = np.nan
    samples[-1, -1, 4:8] = 0.0  # underflowed: some replicates' medians are 0 (crossing)
    monkeypatch.setattr(phases, "_BOOT_CHUNK_VALUES", 7 * samples.size)  # 43 chunks
    got = critical_beta(betas, Ls, samples, n_boot=n_boot, seed=3)

    clean = np.where(np.isnan(samples), np.inf, samples)
    idx_rng = np.random.default_rng(3)
    slopes, crossings = [], []
    for _ in range(n_boot):
        idx = idx_rng.integers(0, draws, draws)
        row = [median_log_slope(Ls, clean[i][:, idx]) for i in range(len(betas))]
        slopes.append(row)
        c = zero_crossing(betas, row)
        if c is not None:
            crossings.append(c)
    slopes = np.array(slopes)
    # the edge cases were hit: +inf and -inf slopes, replicates with and without a crossing
    assert (slopes == np.inf).any() and (slopes == -np.inf).any()
    assert 0 < len(crossings) < n_boot
    want = [median_log_slope(Ls, clean[i]) for i in range(len(betas))]
    assert got["slopes"] == pytest.approx(want, rel=1e-12)  # a matrix product, not dots
    assert got["bootstrap_failures"] == n_boot - len(crossings)
    lo, hi = np.percentile(crossings, [2.5, 97.5])
    assert got["ci95"] == pytest.approx([lo, hi], rel=1e-12, abs=1e-15)
    for i in range(len(betas)):
        method = "linear" if np.all(np.isfinite(slopes[:, i])) else "nearest"
        want = np.percentile(slopes[:, i], [2.5, 97.5], method=method)
        assert got["slopes_ci95"][i] == pytest.approx(want.tolist(), rel=1e-12, abs=1e-15)


def test_critical_beta_with_underflowed_identity():
    """The largest β leaves every draw at ratio 0: identity, not explosion; the estimate of
    a planted β_c = 0.6 does not move."""
    rng = np.random.default_rng(1)
    betas, Ls = [0.3, 0.5, 0.7, 4.0], [16, 32, 64]
    noise = np.exp(0.2 * rng.standard_normal((len(betas), len(Ls), 400)))
    samples = np.array([[L ** (0.6 - b) for L in Ls] for b in betas])[..., None] * noise
    ref = critical_beta(betas, Ls, samples, n_boot=50)
    samples[-1, 1:] = 0.0
    est = critical_beta(betas, Ls, samples, n_boot=50)
    assert est["phases"] == ["explosion", "explosion", "identity", "identity"]
    assert est["slopes"][-1] == -math.inf and est["estimate"] == ref["estimate"]
    # no crossing: the reason reads the envelope (β_c below the grid here)
    high = critical_beta(betas[2:], Ls, samples[2:], n_boot=10)
    assert high["estimate"] is None and "below" in high["reason"]
    # a slope that rises again after a negative one (noise): the running minimum never
    # crosses 0, and the envelope's first value, not every slope's sign, says "below"
    rises = np.array([[L**s for L in Ls] for s in (-0.1, 0.3)])[..., None] * noise[:2]
    late = critical_beta([1.0, 1.5], Ls, rises, n_boot=10)
    assert late["slopes"][0] < 0 < late["slopes"][1]
    assert late["estimate"] is None and "below" in late["reason"]
    # every β below the planted β_c: "above" it; a β at β_c itself is labelled stability
    low = critical_beta(betas[:2], Ls, samples[:2], n_boot=10)
    assert low["estimate"] is None and "above" in low["reason"]
    flat = np.array([[L ** (0.6 - b) for L in Ls] for b in (0.3, 0.6, 0.9)])[..., None]
    at = critical_beta([0.3, 0.6, 0.9], Ls, flat * noise[:3], n_boot=10)
    assert at["phases"] == ["explosion", "stability", "identity"]


@pytest.mark.parametrize(
    "betas, Ls, shape, needle",
    [
        ([0.8, 0.5], [16, 32], (2, 2, 5), "^betas must"),
        ([0.5, 0.8], [16, 16], (2, 2, 5), "^Ls must"),
        ([0.5, 0.8], [16, 32], (2, 5), "^samples must"),
    ],
)
def test_critical_beta_refuses_bad_input(betas, Ls, shape, needle):
    with pytest.raises(ValueError, match=needle):
        critical_beta(betas, Ls, np.ones(shape), n_boot=5)


def test_heatmap_cells_hold_their_grid_values():
    """Uneven grid: every value inside its own cell, the cells meeting halfway between
    neighbours (an evenly spaced extent drew β = 1 at 1.12 on the quick preset's grid)."""
    values = np.array([0.25, 0.5, 0.55, 1.0])
    edges = cell_edges(values)
    np.testing.assert_allclose(edges, [0.125, 0.375, 0.525, 0.775, 1.225])
    assert np.all((edges[:-1] < values) & (values < edges[1:]))
    np.testing.assert_allclose(cell_edges(np.array([0.7])), [0.65, 0.75])


def test_depth_axis_is_labelled_at_the_grid_depths_only():
    """The quick preset's depths 16..512 on a log axis: matplotlib labelled its minor
    ticks too (2×10^1, 3×10^1, 4×10^1, 6×10^1, ...), running into each other; the axis now
    carries the grid's depths and no minor labels."""
    use_agg()
    import matplotlib.pyplot as plt

    Ls = [16, 32, 64, 128, 256, 512]
    fig, ax = plt.subplots()
    ax.plot(Ls, np.ones(len(Ls)))
    ax.set_xscale("log")
    size_ticks(ax, Ls)
    fig.canvas.draw()
    assert list(ax.get_xticks()) == Ls
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(L) for L in Ls]
    assert all(not t.get_text() for t in ax.get_xticklabels(minor=True))
    size_ticks(ax, range(1, 20), axis="y")  # 19 sizes: every third labelled
    assert list(ax.get_yticks()) == list(range(1, 20, 3))
    size_ticks(ax, [1024, 1048576, 0.5])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.5", "1024", "1048576"]
    size_ticks(ax, [1 / 64, 1 / 16, 0.25])  # three significant digits, not 0.015625
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.0156", "0.0625", "0.25"]
    plt.close(fig)
    with pytest.raises(ValueError, match="^axis: 'x' or 'y', not 'z'$"):
        size_ticks(ax, Ls, axis="z")


def test_length_scale_is_checked_before_the_study_starts():
    base = dict(
        preset="quick", seed=0, x64=True, hurst=None, beta=None, L=None, seeds=None, d=None,
        heatmap_hurst=None, slope_tol=None, batch=None, bootstrap=None, no_heatmap=False,
        loss="squared",
    )  # fmt: skip
    with pytest.raises(study.StudyInputError, match="^--length-scale: length_scale"):
        study.configure(SimpleNamespace(**base, weights="smooth", length_scale=1e-5))
    with pytest.raises(study.StudyInputError, match="^--length-scale: only used"):
        study.configure(SimpleNamespace(**base, weights="iid", length_scale=0.1))
    assert study.configure(SimpleNamespace(**base, weights="smooth", length_scale=0.2))


def test_gradient_panel_shows_the_gradient_phases():
    """The gradient panel of `phases.png` labels each β with the gradient ratio's phase
    (it showed the forward ratio's)."""
    from meanfield.studies.phases.plot import phase_labels

    critical = {
        "phases": ["explosion", "identity"],
        "from_gradient": {"phases": ["stability", "explosion"]},
    }
    assert phase_labels([0.25, 1.0], critical, "forward") == [
        "β=0.25 (explosion)",
        "β=1 (identity)",
    ]
    assert phase_labels([0.25, 1.0], critical, "gradient") == [
        "β=0.25 (stability)",
        "β=1 (explosion)",
    ]


def test_readout_loss_gradient_does_not_depend_on_the_residual_weights():
    """`loss="readout"`: p_L = B whatever the residual weights (the theorem's convention);
    `loss="squared"`: p_L = h_L − y moves with them. p_0 against jax.grad of ⟨B, h_L⟩."""
    import jax
    import jax.numpy as jnp

    from meanfield.diagnostics.phases import depth_ratios, perceptron_resnet

    with jax.enable_x64(True):
        law = IIDGaussianLaw(d=5)
        x, B = jr.normal(jr.key(1), (5,)), jr.normal(jr.key(2), (5,))
        p_L = {}
        for i in range(2):
            V, W = law.weights(jr.key(10 + i), 8), law.weights(jr.key(20 + i), 8)
            net = perceptron_resnet(V, W, 8**-0.5)
            for loss, final in (("readout", B[None]), ("squared", lambda h: h - B[None])):
                p_L[loss, i] = net.adjoint(x[None], final).b[0, -1]
            p0 = net.adjoint(x[None], B[None]).b[0, 0]
            expected = jax.grad(lambda x_, net=net: jnp.dot(B, net(x_)))(x)
            np.testing.assert_allclose(p0, expected, atol=1e-12)
            r = depth_ratios(net, x, B, "readout")
            assert float(r.gradient) == pytest.approx(
                float(jnp.linalg.norm(p0 - B) / jnp.linalg.norm(B)), rel=1e-12
            )
        np.testing.assert_array_equal(p_L["readout", 0], B)
        np.testing.assert_array_equal(p_L["readout", 1], B)
        assert not np.allclose(p_L["squared", 0], p_L["squared", 1])
        with pytest.raises(ValueError, match="loss="):
            depth_ratios(net, x, B, "hinge")


def test_rademacher_law_is_symmetric_with_the_gaussian_variance():
    import jax

    from meanfield.laws.depth import IIDRademacherLaw

    with jax.enable_x64(True):
        w = np.asarray(IIDRademacherLaw(d=16).weights(jr.key(0), 64))
    assert w.shape == (64, 16, 16)
    np.testing.assert_allclose(np.abs(w), 0.25, rtol=0, atol=1e-15)  # ±1/sqrt(d)
    assert abs(w.mean()) < 4 * 0.25 / math.sqrt(w.size)  # symmetric: mean 0 within 4 SE
    w2 = np.asarray(IIDRademacherLaw(d=16).weights(jr.key(0), 32))
    assert not np.array_equal(w2, w[:32])  # uncoupled across depths, like the Gaussian law


def test_negative_beta_is_refused(tmp_path):
    """β < 0 is refused in one line (β = 0, the original ResNet, runs: test_sde_studies)."""
    from meanfield.studies import run_study

    with pytest.raises(study.StudyInputError, match="--beta: values must be >= 0"):
        run_study("phases", out=str(tmp_path / "b"), beta=[-0.5, 0.5])


@pytest.mark.parametrize("loss", ["squared", "readout"])
def test_gradient_flow_identity(loss):
    """‖p_0‖²/‖p_L‖² from the backward recursion equals E_z[((p_L/‖p_L‖)ᵀ q_L(z))²], the
    forward flow of a perturbation z of h_0 (Marion et al.), within 4 Monte-Carlo SE
    (4000 z per network, three networks at β = 1/2)."""
    import jax.random as jr

    from meanfield.diagnostics.phases import gradient_flow_identity, perceptron_resnet

    d, L = 6, 32
    law = IIDGaussianLaw(d)
    for seed in range(3):
        kv, kw, kx, ky, kz = jr.split(jr.key(seed), 5)
        net = perceptron_resnet(law.weights(kv, L), law.weights(kw, L), L**-0.5)
        x, y = jr.normal(kx, (d,)), jr.normal(ky, (d,))
        r = gradient_flow_identity(net, x, y, key=kz, draws=4000, loss=loss)
        assert abs(float(r.flow_mean) - float(r.backward)) < 4 * float(r.flow_se), r
        assert float(r.backward) != pytest.approx(1.0, abs=0.05)  # not trivially 1


def test_critical_beta_note_says_what_was_measured():
    """The note of critical_beta.png follows the numbers: none where the theory lies in
    the interval; where it does not, the depths and the measured slope at the theory's β
    (whatever its sign), and no claim of where the crossing moves."""
    from meanfield.studies.phases.plot import theory_note

    betas = [0.5, 0.75, 1.0]
    cfg = {"L": [16, 32, 64]}
    inside = {"ci95": [0.7, 0.8], "theory": 0.75, "slopes": [0.5, -0.1, -0.3]}
    assert theory_note(cfg, betas, inside) is None
    for slope in (-0.1, 0.2):
        outside = {"ci95": [0.6, 0.7], "theory": 0.75, "slopes": [0.5, slope, -0.3]}
        note = theory_note(cfg, betas, outside)
        assert note is not None and "L = 16..64" in note
        assert f"forward slope is {slope:+.3f}" in note and "moves" not in note
    off_grid = {"ci95": [0.6, 0.7], "theory": 0.8, "slopes": [0.5, -0.1, -0.3]}
    assert "slope is" not in theory_note(cfg, betas, off_grid)
    assert theory_note(cfg, betas, {"ci95": None, "theory": 0.75, "slopes": [0, 0, 0]}) is None


def test_phases_png_says_where_a_line_has_no_median():
    """A β whose median ratio overflowed at some depths (more than half its draws infinite)
    is named in the panel's title with those depths; a median over draws of which only a
    minority overflowed is drawn, and not named."""
    from meanfield.studies.phases.plot import missing_medians

    draws = np.ones((2, 3, 5))  # (β, L, draws)
    assert missing_medians([0.0, 0.5], [16, 256, 4096], draws) == []
    draws[0, 2, :3] = np.inf  # β = 0 at L = 4096: 3 of 5 draws overflowed
    draws[1, 1, :2] = np.inf  # β = 0.5 at L = 256: 2 of 5, the median is finite
    assert missing_medians([0.0, 0.5], [16, 256, 4096], draws) == ["β=0: none at L = 4096"]
    draws[0, 1, :] = np.nan
    assert missing_medians([0.0, 0.5], [16, 256, 4096], draws) == ["β=0: none at L = 256, 4096"]


def test_beta_zero_is_fitted_as_exponential_growth():
    """Issue 74: at β = 0 the ratio grows as e^{rL}; a log-log slope (the study printed
    15.8) is the wrong law. Ratios exp(0.3 L) times noise: r = 0.3 inside its interval and
    the linear-in-L line fits better; ratios L^1.5: the log-log line fits better."""
    from meanfield.diagnostics.phases import exponential_growth

    rng = np.random.default_rng(0)
    Ls = [4, 8, 16, 32, 64]
    noise = rng.lognormal(0.0, 0.3, (len(Ls), 64))
    exp_growth = np.exp(0.3 * np.asarray(Ls, float))[:, None] * noise
    g = exponential_growth(Ls, exp_growth, n_boot=400)
    assert g["exponential"] and g["ci95"][0] < 0.3 < g["ci95"][1]
    assert abs(g["rate"] - 0.3) < 0.01 and g["loglog_slope"] > 5
    power = np.asarray(Ls, float)[:, None] ** 1.5 * noise
    assert exponential_growth(Ls, power, n_boot=100)["exponential"] is False
    overflow = exp_growth.copy()
    overflow[-1, :40] = np.inf
    assert exponential_growth(Ls, overflow)["rate"] is None
    line = study._growth_line("forward", g)
    assert line.startswith("β = 0 (no scaling), forward ratio: log median ≈ c + r L with r = 0.29")
    assert "(exponential: residual" in line
