"""`meanfield.stats.depth_law.fit_paired_depth_law`: the exponent of Euler's error with its
next order, from paired draws (`meanfield study sde`'s headline)."""

import numpy as np
import pytest

from meanfield.stats.depth_law import fit_paired_depth_law, law_mean

L = np.array([8, 16, 32, 64, 128, 256], dtype=float)


def _law(p, c_over_a, a=0.7):
    return a * L**-p * (1 + c_over_a * L**-p)


@pytest.mark.parametrize("p, c", [(0.5, 0.8), (1.0, -0.4), (0.25, 2.0)])
def test_exact_law_values_give_the_exponent(p, c):
    """Draws that all equal the law (up to a common factor per draw, which the mean keeps
    proportional): p and c/a to 1e-6, the interval of (nearly) zero width at p."""
    rng = np.random.default_rng(0)
    draws = _law(p, c)[None] * rng.lognormal(0, 0.3, (40, 1))
    fit = fit_paired_depth_law(L, draws, quantity="x", theory=p, n_boot=50)
    assert abs(fit["p"] - p) < 1e-6 and abs(fit["c_over_a"] - c) < 1e-5
    assert abs(fit["p_ci95"][0] - p) < 1e-6 and abs(fit["p_ci95"][1] - p) < 1e-6
    np.testing.assert_allclose(law_mean(fit, L), draws.mean(axis=0), rtol=1e-8)


def test_a_one_term_slope_is_bent_where_the_law_is_not():
    """The next order bends a one-term log-log slope away from −p (−0.66 here); the law's
    p is 1/2 (paths that differ by a factor each: the means follow the law), and a law
    with another exponent is judged outside (the calibration: the coverage tests)."""
    rng = np.random.default_rng(1)
    draws = _law(0.5, 3.0)[None] * rng.lognormal(0, 0.5, (128, 1))
    one_term = np.polyfit(np.log(L), np.log(draws.mean(axis=0)), 1)[0]
    assert one_term < -0.6  # bent: steeper than −1/2
    fit = fit_paired_depth_law(L, draws, quantity="x", theory=0.5, n_boot=300)
    assert abs(fit["p"] - 0.5) < 1e-6 and abs(fit["c_over_a"] - 3.0) < 1e-5
    wrong = fit_paired_depth_law(L, draws, quantity="x", theory=1.0, n_boot=300)
    assert wrong["theory"]["p"]["inside_ci95"] is False


def test_an_exploded_draw_is_left_out_of_every_depth():
    rng = np.random.default_rng(2)
    draws = _law(1.0, 0.3)[None] * rng.lognormal(0, 0.1, (20, L.size))
    draws[3, 2], draws[7, 5] = np.nan, 1e9
    fit = fit_paired_depth_law(L, draws, quantity="x", theory=1.0, n_boot=50)
    assert fit["draws"] == 18 and fit["excluded"] == 2
    kept = np.delete(draws, [3, 7], axis=0)
    again = fit_paired_depth_law(L, kept, quantity="x", theory=1.0, n_boot=50)
    assert fit["p"] == again["p"]


def test_too_few_depths_or_draws_give_a_reason():
    few = fit_paired_depth_law(L[:3], np.ones((5, 3)), quantity="x", theory=1.0)
    assert "p" not in few and "need 4 depths" in few["reason"]
    with pytest.raises(ValueError, match="draws: need shape"):
        fit_paired_depth_law(L, np.ones((5, 3)), quantity="x", theory=1.0)


@pytest.mark.parametrize(
    "c, common, noise",
    [(-0.24, 0.3, 0.36), (3.0, 0.0, 0.05)],
    ids=["the sde quick preset's Brownian errors", "a strong next order"],
)
def test_the_paired_interval_is_calibrated(c, common, noise):
    """Coverage of p's 95% interval on simulated paired draws of the law a L^-1/2 (1 + c
    L^-1/2) at the sde quick preset's layout (6 depths, 128 paths): a log-normal factor per
    path shared by every depth (`common`) and independent log-normal noise per depth
    (`noise`). The first case is what `meanfield study sde` measured on its Brownian
    errors (path sd 0.31, per-depth sd 0.36, c/a −0.24); 100 replicates, coverage in
    [0.92, 0.98] (measured: 0.96 and 0.96)."""
    truth = _law(0.5, c)
    hits = 0
    for rep in range(100):
        rng = np.random.default_rng(1000 + rep)
        draws = (
            truth
            * rng.lognormal(0, common, (128, 1))
            * np.exp(noise * rng.standard_normal((128, L.size)))
        )
        fit = fit_paired_depth_law(L, draws, quantity="x", theory=0.5, n_boot=400, seed=rep)
        hits += fit["theory"]["p"]["inside_ci95"]
    assert 0.92 <= hits / 100 <= 0.98, hits / 100
