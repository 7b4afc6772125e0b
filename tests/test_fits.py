"""Error summaries and rate fits against closed forms, plain loops and coverage."""

import math

import numpy as np
import pytest

import meanfield as mf
from meanfield.stats.fits import _bootstrap_means, exploded_draws, fit_values, studentized_slope
from meanfield.stats.rate_law import _rate_sum_coefficients


def test_summarize_counts_explosions_and_never_averages_them():
    values = [1.0, 3.0, np.inf, np.nan, 2e6, 5.0]
    s = mf.summarize(values)
    assert s["count"] == 3 and s["exploded"] == 3
    assert s["mean"] == pytest.approx(3.0) and s["std"] == pytest.approx(2.0)
    assert s["values"] == [1.0, 3.0, None, None, 2e6, 5.0]
    empty = mf.summarize([np.inf, np.nan])
    assert empty["mean"] is None and empty["std"] is None and empty["exploded"] == 2
    # one usable value: a mean, but no sample std (it used to say 0.0, i.e. certain)
    one = mf.summarize([4.0, np.inf])
    assert one["mean"] == 4.0 and one["std"] is None and one["count"] == 1


def test_a_network_exploded_in_one_quantity_is_exploded_in_all():
    """Seed 2's loss blew up (8e8) while its error, 7e4, is still below the threshold:
    the error is counted as exploded, left out of the mean, and given to the fits as inf."""
    loss = np.array([1.2, 1.4, 8e8, 1.1])
    error = np.array([0.5, 0.3, 7e4, np.nan])
    mask = exploded_draws(loss, error)
    assert mask.tolist() == [False, False, True, True]
    s = mf.summarize(error, exploded=mask)
    assert s["count"] == 2 and s["exploded"] == 2 and s["exploded_draws"] == [2, 3]
    assert s["mean"] == pytest.approx(0.4) and s["std"] == pytest.approx(np.std([0.5, 0.3], ddof=1))
    assert s["values"] == [0.5, 0.3, 7e4, None]  # every draw kept as measured
    assert fit_values(s) == [0.5, 0.3, math.inf, math.inf]
    fit = mf.fit_loglog([8, 16], [fit_values(s), [0.2, 0.2]], quantity="q", against="L")
    assert fit["excluded"] == 2
    # without the mask, the error alone is below the threshold and would be averaged in
    alone = mf.summarize(error)
    assert alone["exploded_draws"] == [3]
    assert alone["mean"] == pytest.approx(np.mean([0.5, 0.3, 7e4]))
    with pytest.raises(ValueError, match="^exploded: 3 flags for 4 draws$"):
        mf.summarize(error, exploded=mask[:3])
    with pytest.raises(ValueError, match="^values: the arrays differ in length"):
        exploded_draws(loss, error[:2])
    with pytest.raises(ValueError, match="^summary: made with keep_values=False"):
        fit_values(mf.summarize(error, keep_values=False))


def test_loglog_slope_of_an_exact_power_law():
    x = [8, 16, 32, 64]
    samples = [[3.0 * xi**-0.7] * 5 for xi in x]
    fit = mf.fit_loglog(x, samples, quantity="q", against="L", theory=-1.0)
    assert fit["slope"] == pytest.approx(-0.7, abs=1e-12)
    assert fit["intercept"] == pytest.approx(math.log(3.0), abs=1e-12)
    assert fit["ci95"] == pytest.approx([-0.7, -0.7], abs=1e-12)  # no spread over seeds
    assert fit["ci95_fit"] == pytest.approx([-0.7, -0.7], abs=1e-9)  # no misfit
    # an exploded seed is counted, not averaged; a point with none usable drops out
    samples[0] = samples[0][:4] + [np.inf]
    samples.append([np.nan, 1e9])
    fit = mf.fit_loglog(x + [128], samples, quantity="q", against="L")
    assert fit["excluded"] == 3 and fit["n_points"] == 4
    assert fit["slope"] == pytest.approx(-0.7, abs=1e-12)
    few = mf.fit_loglog([8, 8], [[1.0], [2.0]], quantity="q", against="L")
    assert few["slope"] is None and "two distinct sizes" in few["reason"]


def test_loglog_bootstrap_interval_covers_the_true_slope():
    """Over 200 synthetic studies (16 seeds per point, multiplicative noise), the 95%
    bootstrap interval of the slope holds the true slope about 95% of the time (the
    percentile bootstrap of a mean runs a little short at 16 seeds)."""
    rng = np.random.default_rng(1)
    x = np.array([8, 16, 32, 64, 128])
    hits = 0
    for rep in range(200):
        samples = [2.0 * xi**-1.0 * rng.lognormal(0.0, 0.5, 16) for xi in x]
        ci = mf.fit_loglog(x, samples, quantity="q", against="L", seed=rep)["ci95"]
        hits += ci[0] <= -1.0 <= ci[1]
    assert 0.85 <= hits / 200 <= 0.99, hits


def test_rate_sum_recovers_planted_terms():
    L = np.array([8, 16, 32, 64, 8, 16, 32, 64])
    M = np.array([4, 4, 4, 4, 4096, 4096, 4096, 4096])
    exact = 0.4 / L + 3.0 / np.sqrt(L * M)
    fit = mf.fit_rate_sum(L, M, [[e] * 6 for e in exact], quantity="q")
    assert fit["a"] == pytest.approx(0.4, rel=1e-10) and fit["b"] == pytest.approx(3.0, rel=1e-10)
    assert fit["a_ci95"] == pytest.approx([0.4, 0.4], rel=1e-10)
    assert fit["rel_rms"] < 1e-12
    # a pure 1/sqrt(LM) error with noise: the unconstrained fit wants a < 0 for some
    # draws; the fit keeps a >= 0 and finds b
    rng = np.random.default_rng(2)
    noisy = [3.0 / np.sqrt(lm) * rng.lognormal(0, 0.3, 12) for lm in L * M]
    fit = mf.fit_rate_sum(L, M, noisy, quantity="q")
    assert fit["a"] >= 0 and fit["a_ci95"][0] == 0.0
    assert fit["b_ci95"][0] < 3.0 < fit["b_ci95"][1]
    few = mf.fit_rate_sum(L[:2], M[:2], [[1.0], [2.0]], quantity="q")
    assert few["a"] is None and "three" in few["reason"]


def test_rate_sum_coefficients_batched_equal_a_plain_loop():
    """The bootstrap's batched solve against one `np.linalg.lstsq` per draw, with the
    non-negative fallback written out, on draws of which some need the fallback."""
    L = np.array([8.0, 16.0, 32.0, 64.0, 8.0, 64.0])
    M = np.array([1.0, 1.0, 1.0, 1.0, 256.0, 256.0])
    rng = np.random.default_rng(3)
    truth = 0.5 / L + 1.0 / np.sqrt(L * M)
    means = truth * rng.lognormal(0.0, 0.6, (300, L.size))

    def loop(m):
        A = np.stack([1.0 / L, 1.0 / np.sqrt(L * M)], axis=1) / m[:, None]
        t = np.ones_like(m)
        coef = np.linalg.lstsq(A, t, rcond=None)[0]
        if coef.min() >= 0:
            return coef, False
        best = None
        for j in (0, 1):
            c = np.zeros(2)
            c[j] = max(A[:, j] @ t / (A[:, j] @ A[:, j]), 0.0)
            r = np.sum((A @ c - t) ** 2)
            if best is None or r < best[0]:
                best = (r, c)
        return best[1], True

    want = [loop(m) for m in means]
    fallbacks = sum(f for _, f in want)
    assert 10 <= fallbacks <= 290  # both branches are exercised
    got = _rate_sum_coefficients(L, M, means)
    np.testing.assert_allclose(got, np.array([c for c, _ in want]), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(_rate_sum_coefficients(L, M, means[0]), want[0][0], rtol=1e-9)


def test_bootstrap_means_resample_each_point_with_replacement():
    goods = [np.array([1.0, 2.0, 3.0]), np.array([10.0, 20.0])]
    boots = _bootstrap_means(goods, 4000, seed=0)
    assert boots.shape == (4000, 2)
    # every draw is the mean of a resample: a multiple of 1/3 (resp. 1/2) in range
    np.testing.assert_allclose(np.round(boots[:, 0] * 3) / 3, boots[:, 0], atol=1e-12)
    assert boots[:, 0].min() >= 1.0 and boots[:, 0].max() <= 3.0
    # the bootstrap variance of a mean is the plug-in variance / n
    assert boots[:, 0].var() == pytest.approx(np.var(goods[0]) / 3, rel=0.1)
    assert boots[:, 1].var() == pytest.approx(np.var(goods[1]) / 2, rel=0.1)
    np.testing.assert_array_equal(_bootstrap_means(goods, 10, 5), _bootstrap_means(goods, 10, 5))


def test_zero_errors_count_in_the_means_and_bad_sizes_are_named():
    """A seed whose error is exactly 0 is part of its point's mean (not dropped, which
    would bias the mean up): points of [4e, 0, 0, 0] have mean e, an exact power law;
    bootstrap draws that resample a point to all zeros are left out and counted."""
    x = [8, 16, 32, 64]
    samples = [[4 * 3.0 * xi**-0.7, 0.0, 0.0, 0.0] for xi in x]
    fit = mf.fit_loglog(x, samples, quantity="q", against="L")
    assert fit["slope"] == pytest.approx(-0.7, abs=1e-12)
    assert fit["intercept"] == pytest.approx(math.log(3.0), abs=1e-12)
    # P(a draw keeps every point) = (1 - (3/4)^4)^4 ≈ 0.22 of 2000 draws
    kept = 2000 - fit["bootstrap_dropped"]
    assert abs(kept - 2000 * (1 - 0.75**4) ** 4) < 5 * math.sqrt(2000 * 0.22 * 0.78)
    assert fit["ci95"][0] < -0.7 < fit["ci95"][1]
    L = np.array([8, 16, 32, 64, 8, 16])
    M = np.array([4, 4, 4, 4, 4096, 4096])
    exact = 0.4 / L + 3.0 / np.sqrt(L * M)
    joint = mf.fit_rate_sum(L, M, [[2 * e, 0.0] for e in exact], quantity="q")
    assert joint["a"] == pytest.approx(0.4, rel=1e-10) and joint["b"] == pytest.approx(
        3.0, rel=1e-10
    )
    with pytest.raises(ValueError, match="^x must be a 1-D sequence of finite sizes > 0"):
        mf.fit_loglog([0, 8], [[1.0], [2.0]], quantity="q", against="L")
    with pytest.raises(ValueError, match="^n_boot must be a positive integer"):
        mf.fit_loglog(x, samples, quantity="q", against="L", n_boot=0)
    with pytest.raises(ValueError, match="^L must be a 1-D sequence"):
        mf.fit_rate_sum([0, 8, 16], [1, 1, 1], [[1.0]] * 3, quantity="q")


def test_delta_quantiles_tell_the_log_form_from_the_gaussian_one():
    """Exponential tails (1 − δ quantile a + log(1/δ)) follow the bound's log(1/δ) form with
    slope 1/(a + log 2) after the median normalisation; half-normal tails follow
    sqrt(log(1/δ)) better. Exploded draws are left out."""
    import math

    import numpy as np

    from meanfield.coupling.convergence import delta_quantiles

    rng = np.random.default_rng(0)

    def points(draw, n_points=8, n=200):
        out = []
        for j in range(n_points):
            scale = 2.0**j  # the points pool after the median normalisation
            v = scale * draw(n)
            values = [float(x) for x in v] + [1e12]
            out.append({"L": 4, "M": 2**j, "steps": 1,
                        "delta_h": {"values": values, "exploded_draws": [n]}})  # fmt: skip
        return out

    a = 1.5
    res = delta_quantiles(points(lambda n: a + rng.exponential(size=n)), 1, seed=1)
    assert res["pooled_draws"] == 1600 and res["deltas"][-1] == 0.01
    log, sq = res["fits"]["log"], res["fits"]["sqrt_log"]
    lo, hi = log["slope_ci95"]
    assert lo <= 1 / (a + math.log(2)) <= hi
    assert log["residual_rms"] < sq["residual_rms"]
    res = delta_quantiles(points(lambda n: np.abs(rng.normal(size=n))), 1, seed=1)
    assert res["fits"]["sqrt_log"]["residual_rms"] < res["fits"]["log"]["residual_rms"]


def test_the_printed_fit_says_what_it_left_out(tmp_path):
    """A point whose every draw exploded, an exploded draw elsewhere: the fit leaves them
    out and its printed line says so; a fit that left nothing out says nothing of it."""
    from meanfield.harness.summary import summary

    rng = np.random.default_rng(1)
    x = np.array([8.0, 16, 32, 64])
    samples = [xi**-1.0 * rng.lognormal(0, 0.2, 6) for xi in x]
    clean = mf.fit_loglog(x, samples, quantity="delta_h", against="L", theory=-1.0)
    samples[3] = np.full(6, np.nan)
    samples[0][2] = np.inf
    fit = mf.fit_loglog(x, samples, quantity="delta_h", against="L", theory=-1.0)
    assert fit["sizes"] == [8.0, 16.0, 32.0] and fit["excluded"] == 7
    text = summary({"study": "demo", "fits": [fit]}, tmp_path)
    assert "L = 64 left out (every draw exploded)" in text
    assert "7 exploded draw(s) left out" in text
    assert "left out" not in summary({"study": "demo", "fits": [clean]}, tmp_path)
    # the warning names where the exploded draws were
    from meanfield.stats.fits import excluded_warning

    assert fit["excluded_at"] == [{"x": 8.0, "draws": 1}, {"x": 64.0, "draws": 6}]
    fit["fixed"] = {"M": 4}
    assert excluded_warning(fit) == (
        "7 exploded draw(s) of delta_h left out of its fit against L (M=4): 1 at L=8, 6 at L=64"
    )
    # the joint fit has no `against`: it names its model, not "against None"
    joint = {"quantity": "delta_h", "model": "a/L + b/sqrt(LM)", "excluded": 1,
             "fixed": {"steps": 1}}  # fmt: skip
    assert excluded_warning(joint) == (
        "1 exploded draw(s) of delta_h left out of its joint fit a/L + b/sqrt(LM) (steps=1)"
    )


def test_a_fit_whose_interval_excludes_its_theory_says_so(tmp_path):
    """theory_inside is computed from the interval: False for data of slope −0.7 judged
    against −1, True against its own estimate; the printed summary names the first with its reason,
    never the second; without an interval over draws the regression's is used."""
    from meanfield.harness.summary import summary
    from meanfield.stats.fits import judge_theory

    rng = np.random.default_rng(0)
    x = np.array([8.0, 16, 32, 64, 128])
    samples = [xi**-0.7 * rng.lognormal(0, 0.2, 10) for xi in x]
    off = mf.fit_loglog(x, samples, quantity="delta_h", against="L", theory=-1.0)
    estimate = round(off["slope"], 3)  # a theory equal to the estimate lies inside
    on = mf.fit_loglog(x, samples, quantity="delta_h", against="L", theory=estimate)
    assert off["ci95"][1] < -0.5 and off["theory_inside"] is False and on["theory_inside"]
    assert off["theory_inside_interval"] == "ci95"
    off["theory_note"] = "pre-asymptotic: a test"
    text = summary({"study": "demo", "fits": [off, on]}, tmp_path)
    assert "theory -1 (OUTSIDE, beyond ±0.05; pre-asymptotic: a test)" in text
    assert f"theory {estimate:g} (inside)" in text
    # at GD steps: the headline is the last step's (the figure's); an earlier step's fit
    # whose interval excludes its theory is listed below it, by name
    first = {**off, "fixed": {"M": 8, "steps": 0}}
    last = {**on, "fixed": {"M": 8, "steps": 1}}
    text = summary({"study": "demo", "fits": [first, last]}, tmp_path)
    head, rest = text.split("whose 95% interval excludes the theory (beyond its tolerance):")
    assert "after 1 GD step(s)" in head and "after 0 GD step(s)" not in head
    assert "1 other fit(s)" in head and "(M=8, steps=0): " in rest and "pre-asymptotic" in rest
    many = [{**off, "fixed": {"M": m, "steps": 0}} for m in range(11)]
    text = summary({"study": "demo", "fits": [*many, last]}, tmp_path, limit=8)
    assert "11 other fit(s)" in text and "... and 3 more" in text
    deterministic = judge_theory({**on, "ci95": None, "ci95_fit": [-0.9, -0.8]})
    assert deterministic["theory_inside"] is False
    assert deterministic["theory_inside_interval"] == "ci95_fit"
    assert judge_theory({**on, "theory": None})["theory_inside"] is None


def test_the_summary_states_verdicts_from_their_numbers(tmp_path):
    """Critical β, the β = 1/2 bounds and the flow identity, printed from the numbers:
    an estimate whose interval lies beyond the tolerance from the theory says OUTSIDE, one
    that misses it within the tolerance says near, a failed identity FAILS, bounds count
    what held."""
    from meanfield.harness.summary import summary

    crit = {"estimate": 0.64, "ci95": [0.60, 0.68], "theory": 0.75, "quantity": "forward ratio",
            "from_gradient": {"estimate": 0.74, "ci95": [0.70, 0.78], "theory": 0.75,
                              "quantity": "gradient ratio"}}  # fmt: skip
    bounds = {"per_L": [
        {"L": 16, "forward_sq": [{"holds": True}, {"holds": False}],
         "gradient_consistent_with_bounds": True},
        {"L": 32, "forward_sq": [{"holds": True}, {"holds": True}],
         "gradient_consistent_with_bounds": False},
    ]}  # fmt: skip
    results = {"study": "demo", "critical_beta": crit, "stability_bounds": bounds,
               "gradient_flow_identity": {"holds": False}}  # fmt: skip
    text = summary(results, tmp_path)
    assert "forward ratio: 0.640 [0.600, 0.680], theory 0.75 (OUTSIDE, beyond ±0.05)" in text
    assert "gradient ratio: 0.740 [0.700, 0.780], theory 0.75 (inside)" in text
    assert "holds at 3 of 4 (L, δ)" in text and "at 1 of 2 depths" in text
    assert "gradient-flow identity: FAILS" in text
    results["gradient_flow_identity"]["holds"] = True
    crit["ci95"] = [0.60, 0.71]  # misses 0.75 by 0.04: within the tolerance
    text = summary(results, tmp_path)
    assert "[0.600, 0.710], theory 0.75 (within ±0.05, just outside the interval)" in text
    crit["ci95"] = [0.69, 0.76]
    text = summary(results, tmp_path)
    assert "OUTSIDE" not in text and "just outside" not in text and "identity: holds" in text
    assert text.splitlines()[-1].startswith(f"  wrote {tmp_path / 'results.json'}")


def test_one_draw_per_point_discards_no_bootstrap_and_says_whose_interval(tmp_path):
    """The Euler part has one draw per depth: no bootstrap over draws is possible, so none
    is "discarded"; the printed interval is named as the regression's."""
    from meanfield.harness.summary import summary

    rng = np.random.default_rng(3)
    x = np.array([8.0, 16, 32, 64, 128])
    fit = mf.fit_loglog(x, [[xi**-1.0 * rng.lognormal(0, 0.05)] for xi in x],
                        quantity="delta_h_euler", against="L", theory=-1.0)  # fmt: skip
    assert fit["bootstrap_dropped"] == 0 and fit.get("ci95") is None and fit["ci95_fit"]
    text = summary({"study": "demo", "fits": [fit]}, tmp_path)
    assert "discarded" not in text and "the regression's interval: one draw per point" in text


def test_the_pre_asymptotic_note_is_withheld_when_the_other_term_is_small():
    """An OUTSIDE fit is excused as pre-asymptotic only where the joint fit gives the other
    term more than 5% of the error on its line; a small share keeps it unexcused, and a fit
    that holds its theory never gets a note."""
    from meanfield.coupling.convergence import _other_term_notes

    line = [{"L": L, "M": 4096} for L in (8, 16, 32, 64)]
    col = [{"L": 1024, "M": M} for M in (1, 4, 16, 64)]

    def fits(inside=False):
        return ({"slope": -0.9, "theory_inside": inside}, {"slope": -0.4, "theory_inside": inside})

    L_fit, M_fit = fits()
    _other_term_notes(L_fit, M_fit, {"a": 1.0, "b": 1e-4}, line, col)
    assert L_fit["other_term_share"] < 0.05 and "theory_note" not in L_fit  # not excused
    assert M_fit["other_term_share"] > 0.05 and M_fit["theory_note"].startswith("pre-asymptotic")
    L_fit, M_fit = fits()
    _other_term_notes(L_fit, M_fit, {"a": 1.0, "b": 10.0}, line, col)
    assert L_fit["theory_note"].startswith("pre-asymptotic: the 1/sqrt(LM) term")
    L_fit, M_fit = fits(inside=True)
    _other_term_notes(L_fit, M_fit, {"a": 1.0, "b": 10.0}, line, col)
    assert "theory_note" not in L_fit and "theory_note" not in M_fit


@pytest.mark.parametrize("paired", [False, True])
def test_a_resample_of_one_repeated_value_is_dropped_whatever_its_rounding(paired):
    """A bootstrap resample that repeats one value has no spread: it is dropped, counted
    in `dropped`, and never gives a studentized draw of ~1e16 (the mean of three 0.1's is
    not 0.1 in floating point, so the variance's rounding left ~1e-33 and such draws in;
    rounding then decided the interval). Counted independently here by a plain loop over
    the same random draws."""
    goods = [np.array([0.1, 0.1, 0.7]), np.array([0.3, 0.3, 0.9])]
    w = np.array([-1.0, 1.0]) / np.log(2.0)
    n_boot, seed = 4000, 3
    _, _, t, dropped = studentized_slope(goods, w, paired=paired, n_boot=n_boot, seed=seed)
    rng = np.random.default_rng(seed)
    if paired:  # draw k of both points resampled together
        idx = rng.integers(0, 3, size=(n_boot, 3))
        rows = np.stack(goods, axis=1)[idx]
        constant = np.array([all((r == rep[0]).all() for r in rep) for rep in rows])
    else:  # each point on its own: no spread only where both repeat one value
        constant = np.ones(n_boot, bool)
        for g in goods:
            r = g[rng.integers(0, g.size, size=(n_boot, g.size))]
            constant &= np.array([len(set(row)) == 1 for row in r])
    assert constant.sum() > 100  # the case is exercised
    assert dropped == constant.sum()
    assert t.size == n_boot - dropped and np.abs(t).max() < 1e3
