"""Tiny end-to-end runs of `meanfield study response|variance|tangent-kernel`."""

import json

import pytest

from meanfield.cli import main


def _run(name, out, *extra):
    assert main(["study", name, "--out", str(out), "--no-progress", *extra]) == 0
    return json.loads((out / "results.json").read_text())


def test_response_study(tmp_path, self_checked):
    r = _run(
        "response",
        tmp_path / "r",
        "--depths",
        "2,10",
        "--inits",
        "20",
        "--alpha-star-inits",
        "10",
        "--width",
        "50",
        "--d-out",
        "10",
        "--alphas",
        "0.3",
    )
    self_checked(r)
    for key in ("study", "config", "points", "fits", "reference", "timing", "alpha_star"):
        assert key in r
    assert [s["L"] for s in r["alpha_star"]] == [2, 10]
    for s in r["alpha_star"]:
        assert {"numeric", "formula", "asymptotic", "simulated"} <= set(s)
        assert {"value", "ci95"} <= set(s["simulated"])
    assert r["points"][0]["alpha"] == 0.3
    # the layer point against the library called with the study's documented key scheme
    # (`fold_in` of 1, then of round(1e6 α): int(1e4 α) put α values within 1e-4 on one draw)
    import jax.random as jr
    import numpy as np

    from meanfield.diagnostics.signal_propagation import simulate_response

    cfg = r["config"]
    key = jr.fold_in(jr.fold_in(jr.key(cfg["seed"]), 1), round(1e6 * 0.3))
    names = ("K0", "sigma_w2", "sigma_b2", "activation", "width", "d_out", "inits", "method")
    sim = simulate_response(0.3, L=10, key=key, **{k: cfg[k] for k in names})
    for q in ("chi", "chi_out"):  # float32 samples (documented), averaged in float64
        got = np.asarray(r["points"][0][q]["sim_mean"], float)
        want = np.asarray(getattr(sim, q), float).mean(axis=0)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    for fig in (
        "figure2_resnet_vs_ffnet",
        "figure4_optimal_scaling",
        "figure5_universality",
        "simulation_vs_theory",
        "response_figures_1b_3_4c_6",
        "response_correlations",
    ):
        assert (tmp_path / "r" / f"{fig}.png").stat().st_size > 10_000
    paper = r["paper_figures"]
    assert {"fig3", "fig6", "correlations", "signal", "alpha_star_over_K0",
            "linearised_response", "max_entropy"} <= set(paper)  # fmt: skip
    assert [row["K0"] for row in paper["alpha_star_over_K0"]] == [0.02, 0.05, 0.1, 0.2]
    f6 = paper["fig6"]  # the theory's tail exponent through the simulation's estimator
    ci = f6["simulation_fit"]["power_exponent_ci95"]
    same = f6["theory_power_exponent_same_estimator"]
    assert f6["theory_inside_ci95"] == (ci is not None and ci[0] <= same <= ci[1])
    # the interval resamples initialisations (a network's layers are one unit)
    interval = f6["simulation_fit"]["interval"]
    assert interval is None if ci is None else interval.startswith("percentile bootstrap over")
    # only layers whose simulated mean is 3 SE from zero are fitted (20 draws: few or none)
    eta = f6["eta"]
    for layer in f6["simulation_fit"]["layers"]:
        assert eta["sim_mean"][int(layer)] > 3 * eta["sim_se"][int(layer)]
    assert paper["correlations"]["resnet"]["tail_fit"]["better_fit"] == "power law"
    assert paper["correlations"]["ffnet"]["tail_fit"]["better_fit"] == "exponential"


def test_response_paper_pieces():
    """The parts of Fischer et al. beyond the headline figures, against independent forms:
    the KL divergence of the maximum-entropy argument by quadrature against its closed form
    (minimum at σ² = 1/2, not the supplement's 1/4); erf's pair moment at equal arguments
    against the library's second moment; the ResNet correlation limit as a fixed point; the
    linearised response's gain form exact as α -> 0."""
    import math

    import numpy as np

    from meanfield.studies.response import paper as RP
    from meanfield.theory.gaussian import second_moment
    from meanfield.theory.response import output_response_curve

    cfg = {"K0": 0.05, "sigma_w2": 1.25, "sigma_b2": 0.05, "activation": "erf", "depths": [2, 10]}
    stars = [{"L": 2, "numeric": 1.0}, {"L": 10, "numeric": 0.33}]
    ent = RP.max_entropy(cfg, stars)
    assert ent["closed_form_max_difference"] < 1e-10
    assert abs(ent["argmin_sigma2"] - 0.5) < 0.01
    for K in (0.05, 1.0, 30.0):
        assert float(RP._erf_pair(K, K, K)) == pytest.approx(float(second_moment("erf", K)),
                                                             rel=1e-9)  # fmt: skip
    c = RP.resnet_correlation_limit(1.2, 0.2)
    assert (1.2 * 2 / math.pi * math.asin(c) + 0.2) / 1.4 == pytest.approx(c, abs=1e-12)
    assert 0 < c < 1
    # the residual recursion's diagonal is the library's kernel recursion
    cs = RP.correlation_theory(5, alpha=0.7, residual=True, K0=1.4, c0=1.0, sigma_w2=1.2,
                               sigma_b2=0.2)  # fmt: skip
    np.testing.assert_allclose(cs, 1.0, atol=1e-12)
    grid = np.geomspace(1e-3, 1.0, 50)
    theory = {"alpha_grid": grid}
    for L in cfg["depths"]:
        curve = output_response_curve(grid, L=L, K0=cfg["K0"], sigma_w2=cfg["sigma_w2"],
                                      sigma_b2=cfg["sigma_b2"])  # fmt: skip
        theory[f"chi_out_L{L}"] = np.asarray(curve)
    lin = RP.linearised(cfg, theory)
    for row in lin["per_L"]:
        assert row["gain_form"]["ratio_at_smallest_alpha"] == pytest.approx(1.0, abs=1e-4)
    # contradicting data: an "exact" response 10% off the gain form beyond α = 0.1, and one
    # 10% off everywhere; the range over which the form holds ends there, or is empty
    from meanfield.theory.gaussian import gain

    g = float(gain(cfg["activation"], cfg["K0"]))
    form = {
        L: cfg["sigma_w2"] * g * (1 + grid**2 * cfg["sigma_w2"] * g) ** L for L in cfg["depths"]
    }
    bent = {"alpha_grid": grid, **{f"chi_out_L{L}": form[L] * np.where(grid > 0.1, 1.1, 1.0)
                                   for L in cfg["depths"]}}  # fmt: skip
    for row in RP.linearised(cfg, bent)["per_L"]:
        assert row["gain_form"]["holds_within_5pct_up_to_alpha"] == grid[grid <= 0.1][-1]
    off = {"alpha_grid": grid, **{f"chi_out_L{L}": 1.1 * form[L] for L in cfg["depths"]}}
    for row in RP.linearised(cfg, off)["per_L"]:
        assert row["gain_form"]["holds_within_5pct_up_to_alpha"] is None
        assert row["gain_form"]["ratio_at_smallest_alpha"] == pytest.approx(1.1)


def test_variance_and_tangent_kernel_studies(tmp_path, self_checked):
    """Schema, and every point against the library called directly with the studies'
    documented settings and key scheme (a study-level slip, such as α·√M for α/√M or a
    dropped input, changes these numbers)."""
    import math

    import jax
    import jax.numpy as jnp
    import jax.random as jr
    import numpy as np

    import meanfield as mf
    from meanfield.theory.tangent import relative_difference
    from meanfield.theory.variance import sampled_deviation, variance_law

    r = _run("variance", tmp_path / "v", "--L", "2,4", "--nets", "64", "--c-samples", "20000")
    self_checked(r)
    assert {p["regime"] for p in r["points"]} == {"explosion", "critical", "identity"}
    ref = r["reference"]
    assert abs(ref["c"] - ref["c_closed_form"]) < 5 * ref["c_se"] and ref["c_assumption_exact"]
    cfg = r["config"]
    d, M = cfg["d"], cfg["M"]
    block = mf.TwoLayerBlock("relu")
    law = mf.TwoLayerGaussianLaw(d, sigma_u=1 / math.sqrt(d), sigma_v=cfg["sigma_v"])
    x = jnp.ones(d) / math.sqrt(d)
    for p in r["points"]:
        L, g = p["L"], p["gamma"]
        alpha = L ** (-g) / math.sqrt(M)
        key = jr.fold_in(jr.fold_in(jr.fold_in(jr.key(cfg["seed"]), 2), L), round(1e6 * g))
        dev = np.asarray(
            sampled_deviation(block, law, L=L, M=M, alpha=alpha, x=x, key=key, nets=cfg["nets"])
        )[:, -1]
        np.testing.assert_allclose(p["mean"], dev.mean(), rtol=1e-10)
        np.testing.assert_allclose(
            p["theory"], variance_law(ref["c"], alpha, M, L, 1.0), rtol=1e-12
        )

    r = _run("tangent-kernel", tmp_path / "t", "--L", "2,4", "--nets", "2", "--gammas", "0.5,1")
    self_checked(r)
    assert len(r["points"]) == 4 and len(r["fits"]) == 2
    assert (tmp_path / "t" / "tangent_kernel.png").exists()
    cfg = r["config"]
    d, M = cfg["d"], cfg["M"]
    block = mf.TwoLayerBlock(cfg["activation"])
    law = mf.TwoLayerGaussianLaw(d, sigma_u=1 / math.sqrt(d), sigma_v=1.0)
    x, x2 = jnp.eye(d)[0], (jnp.eye(d)[0] + jnp.eye(d)[1]) / math.sqrt(2)
    for p in r["points"]:
        L, g = p["L"], p["gamma"]
        keys = jr.split(jr.fold_in(jr.fold_in(jr.key(cfg["seed"]), L), round(1e6 * g)), 2)
        alpha = L ** (-g) / math.sqrt(M)
        direct = jax.vmap(
            lambda k, L=L, alpha=alpha: relative_difference(
                mf.ResNet.sample(block, law, L=L, M=M, scaling=alpha, key=k), x, x2
            )
        )(keys)
        np.testing.assert_allclose(p["relative_difference"]["values"], direct, rtol=1e-10)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["response", "--depths", "10,2"], "--depths"),
        (["response", "--K0", "-1"], "--K0"),
        (["response", "--activation", "swishy"], "--activation"),
        (["response", "--alphas", "0.1,-0.2"], "--alphas"),
        (["variance", "--gammas", "0,0.5"], "--gammas"),
        (["tangent-kernel", "--L", "0"], "--L"),
    ],
)
def test_bad_input(args, needle, tmp_path, capsys):
    out = tmp_path / "never"
    try:
        code = main(["study", args[0], "--out", str(out), *args[1:]])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1, err
    assert not out.exists()


def test_tangent_kernel_figure_bars_stay_on_the_log_axis(tmp_path, monkeypatch):
    """Where the spread over networks exceeds the mean, mean − std is below zero: the bar is
    the draws' geometric spread, mean ×/÷ exp(σ), σ² = log(1 + std²/mean²), the same length
    either side on the log axis, ending at a positive value."""
    import math

    import matplotlib.pyplot as plt
    import numpy as np

    from meanfield.studies.tangent_kernel import study as tangent_kernel

    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: None)  # keep the figure to inspect
    means, stds = [0.2, 0.05, 0.01], [0.1, 0.08, None]  # the 2nd bar would go below zero
    points = [
        {"gamma": 1.0, "L": L, "MLalpha2": x, "relative_difference": {"mean": m, "std": s}}
        for L, x, m, s in zip([4, 16, 64], [1.0, 0.25, 0.0625], means, stds, strict=True)
    ]
    tangent_kernel._figure(tmp_path, {"gammas": [1.0]}, points)
    fig = plt.gcf()
    try:
        segments = [s for c in fig.axes[0].collections for s in c.get_segments() if len(s)]
        ends = {float(s[0, 0]): sorted(s[:, 1]) for s in segments}
        for x, m, s in ((1.0, 0.2, 0.1), (0.25, 0.05, 0.08)):
            factor = math.exp(math.sqrt(math.log1p((s / m) ** 2)))
            assert ends[x] == pytest.approx([m / factor, m * factor])
        assert 0 < ends[0.25][0] < 0.05
        # no std (fewer than two networks): a bar of length zero
        assert ends.get(0.0625, [0.01, 0.01]) == pytest.approx([0.01, 0.01])
        assert np.all(np.asarray(fig.axes[0].get_ylim()) > 0)
    finally:
        close(fig)
    assert (tmp_path / "tangent_kernel.png").exists()


def test_variance_study_checks_the_mean_and_the_maximal_bound():
    """Prop. 2.1's E[h^L] = x and Remark 2.2's maximal bound as the study judges them:
    a centred sample passes and a shifted one fails; a sup above the bound fails."""
    import numpy as np

    from meanfield.studies.variance.study import _maximal_bound, _mean_state

    rng = np.random.default_rng(0)
    centred = rng.normal(size=(4000, 4))
    assert _mean_state(centred)["holds"]
    assert not _mean_state(centred + 0.1)["holds"]  # 0.1 / (1/sqrt(4000)) = 6.3 SE
    sup = rng.exponential(0.2, size=4000)  # E = 0.2: Markov gives P(sup >= b^2) <= 0.2/b^2
    rows = _maximal_bound(sup, 0.2)
    assert [r["beta"] for r in rows] == [0.5, 1.0, 2.0]
    assert all(r["holds"] for r in rows)
    assert rows[1]["fraction"] == np.mean(sup >= 1.0)
    assert not _maximal_bound(sup, 0.02)[0]["holds"]  # bound 0.08 < P(sup >= 0.25) = 0.29


def test_variance_study_reports_an_overflowing_regime(tmp_path):
    """γ = 0.01 at L = 4096: the law (1 + cα²M)^L overflows a float and so do the networks;
    the study finishes, stores the law as null (inf), counts the overflowed networks
    instead of averaging them, and draws its figure (it raised OverflowError)."""
    import math

    from meanfield.theory.variance import variance_law

    assert variance_law(0.5, 1.0, 4, 4096, 1.0) == math.inf
    assert variance_law(0.5, 0.01, 4, 3, 1.0) == pytest.approx((1 + 0.5 * 4e-4) ** 3 - 1)
    r = _run("variance", tmp_path / "v", "--gammas", "0.01,0.5", "--L", "4,4096", "--nets", "8",
             "--c-samples", "2000")  # fmt: skip
    deep = next(p for p in r["points"] if p["L"] == 4096 and p["gamma"] == 0.01)
    assert deep["theory"] is None and deep["z"] is None
    assert deep["exploded"] == 8 and deep["mean"] is None
    assert all(p["exploded"] == 0 for p in r["points"] if p["gamma"] == 0.5)
    assert (tmp_path / "v" / "variance_law.png").exists()


def test_the_response_verdicts_follow_the_data():
    """Simulation against theory is flagged only where noise cannot explain the z-scores;
    α*(K⁰) is judged through the simulation's own estimator, not the exact argmax."""
    from meanfield.studies.response.study import simulation_agreement, theory_inside_same_estimator

    def pts(*zs):
        return [{"alpha": 0.1, "C": {"z": list(z)}, "chi": {"z": [0.1] * len(z)}} for z in zs]

    assert not simulation_agreement(pts([0.1] * 30))["flagged"]
    assert simulation_agreement(pts([3.5, 3.5, 3.5] + [0.1] * 27))["flagged"]
    assert simulation_agreement(pts([5.0] + [0.1] * 29))["flagged"]
    assert not simulation_agreement(pts([3.5] + [0.1] * 29))["flagged"]  # one at 3.5: noise
    row = {"ci95": [0.2, 0.3], "theory": 0.25, "theory_same_estimator": 0.35}
    assert theory_inside_same_estimator(row) is False  # the estimator's value decides
    assert theory_inside_same_estimator({**row, "theory_same_estimator": 0.25}) is True
    assert theory_inside_same_estimator({**row, "ci95": None}) is False


def test_figure6_judges_its_theory_by_the_interval():
    """Figure 6's verdict is `fits.theory_inside` on the simulated interval and the theory
    through the same estimator: outside, unknown (None) and no interval are not inside."""
    from meanfield.stats.fits import theory_inside

    assert theory_inside([0.9, 1.1], 1.0) is True
    assert theory_inside([0.9, 1.1], 1.5) is False
    assert not theory_inside([0.9, 1.1], None) and not theory_inside(None, 1.0)


def test_the_tail_shape_verdict_follows_the_data():
    """A power-law tail is called a power law, an exponential one exponential."""
    import numpy as np

    from meanfield.studies.response.paper import _power_and_exponential

    layers = np.arange(10, 200, 5, dtype=float)
    rng = np.random.default_rng(0)
    power = 2.0 * layers**-0.4
    expo = np.exp(-layers / 30.0)
    p = _power_and_exponential(layers, power, 1e-3 * power, 0, rng)
    e = _power_and_exponential(layers, expo, 1e-3 * expo, 0, rng)
    assert p["better_fit"] == "power law" and p["power_exponent"] == pytest.approx(0.4)
    assert e["better_fit"] == "exponential" and e["exponential_length"] == pytest.approx(30.0)


def test_the_tail_exponents_bootstrap_equals_a_loop_of_least_squares_fits():
    """The power-law exponent's bootstrap, computed for every replicate at once, is the loop
    of weighted least-squares fits (`numpy.linalg.lstsq`) over the same resampled
    initialisations (replicates with a mean ≤ 0 dropped) and over the same parametric
    draws of log η."""
    import numpy as np

    from meanfield.studies.response.paper import _power_and_exponential

    layers = np.arange(4, 16, dtype=float)
    rng = np.random.default_rng(5)
    draws = layers**-0.7 * (1.0 + 0.5 * rng.standard_normal((25, layers.size)))
    draws[0, -1] = -0.65  # one initialisation that makes a few replicates' means negative
    m, se = draws.mean(0), draws.std(0, ddof=1) / 5.0
    ok = (m > 3 * se) & (m > 0)
    x, y, w = np.log(layers[ok]), np.log(m[ok]), m[ok] / se[ok]

    def exponent(yy):
        A = np.stack([x, np.ones_like(x)], 1) * w[:, None]
        return -np.linalg.lstsq(A, yy * w, rcond=None)[0][0]

    for with_draws in (True, False):
        got = _power_and_exponential(
            layers, m, se, 400, np.random.default_rng(2), draws if with_draws else None
        )
        loop_rng, boots, dropped = np.random.default_rng(2), [], 0
        for _ in range(400):
            if with_draws:
                mb = draws[loop_rng.integers(0, 25, 25)][:, ok].mean(0)
                if not np.all(mb > 0):
                    dropped += 1
                    continue
                boots.append(exponent(np.log(mb)))
            else:
                boots.append(exponent(y + se[ok] / m[ok] * loop_rng.standard_normal(y.size)))
        assert got["bootstrap_dropped"] == dropped and (dropped > 0) == with_draws
        want = np.percentile(boots, [2.5, 97.5]).tolist()
        assert got["power_exponent_ci95"] == pytest.approx(want, rel=1e-10)
        assert got["power_exponent"] == pytest.approx(exponent(y), rel=1e-12)
    none = _power_and_exponential(layers, m, se, 0, np.random.default_rng(2), draws)
    assert none["power_exponent_ci95"] is None and none["bootstrap_dropped"] == 0


def test_variance_under_chaintrons_scaling_swept_in_sigma_v(tmp_path, capsys):
    """`--sigma-vs`: α = 1/(LM), σ_v swept (Chaintron's slides, the 2LP ResNet on an
    embedding). Each point's mean deviation against the ReLU closed form computed here,
    `(1 + σ_v²/(2 L² M))^L − 1` (c = (d/2) σ_u² σ_v² = σ_v²/2), within 4 standard errors;
    where σ_v²/(LM) ≤ 1/16 the deviation is Θ(σ_v²/(LM)): `Δ² LM/σ_v²` within 8% of c = 1/2;
    the slope against L is −1 where no point explodes; the figure is `embedding_law.png`."""
    M, Ls, sweep = 4, [4, 16], [0.5, 2.0, 16.0]
    r = _run(
        "variance", tmp_path / "v", "--sigma-vs", ",".join(map(str, sweep)), "--L",
        ",".join(map(str, Ls)), "--M", str(M), "--nets", "3000", "--c-samples", "20000",
    )  # fmt: skip
    assert r["config"]["sigma_vs"] == sweep and r["config"]["gammas"] == []
    assert len(r["points"]) == len(Ls) * len(sweep)
    for p in r["points"]:
        L, s = p["L"], p["sigma_v"]
        law = (1 + s**2 / (2 * L**2 * M)) ** L - 1
        assert abs(p["mean"] - law) < 4 * p["se"], p
        assert p["alpha"] == 1 / (L * M)
        assert p["regime"] == ("explosion" if s**2 > L * M else "Θ(σ_v²/(LM))")
        if s**2 / (L * M) <= 1 / 16:
            assert abs(p["mean"] * L * M / s**2 - 0.5) < 0.04, p
    fits = {f["fixed"]["sigma_v"]: f for f in r["fits"]}
    assert set(fits) == {0.5, 2.0}  # σ_v = 16 explodes at L = 4 and 16: no line
    assert all(abs(f["slope"] + 1) < 0.1 and f["theory"] == -1 for f in fits.values())
    assert (tmp_path / "v" / "embedding_law.png").exists()
    assert not (tmp_path / "v" / "variance_law.png").exists()
    # `plot` redraws it from results.json, and refuses an edited one in one line
    assert main(["plot", str(tmp_path / "v")]) == 0
    del r["points"][1]["sigma_v2_over_LM"]
    (tmp_path / "v" / "results.json").write_text(json.dumps(r))
    capsys.readouterr()
    assert main(["plot", str(tmp_path / "v")]) == 2
    assert "points[1].sigma_v2_over_LM" in capsys.readouterr().err
    for argv, flag in (
        (["--sigma-vs", "1,2", "--block", "meanfield.blocks.attention:AttentionHead",
          "--law", "meanfield.blocks.attention:AttentionLaw"], "--sigma-vs"),
        (["--sigma-vs", "1,2", "--sigma-v", "2"], "--sigma-v"),
        (["--sigma-vs", "1,1"], "--sigma-vs"),
        (["--sigma-vs", "0,1"], "--sigma-vs"),
    ):  # fmt: skip
        out = tmp_path / flag.strip("-")
        try:  # refused by the parser (SystemExit) or by the study (status 2)
            code = main(["study", "variance", "--out", str(out), "--no-progress", *argv])
        except SystemExit as stop:
            code = stop.code
        assert code == 2 and not out.exists(), argv
        assert flag in capsys.readouterr().err
