"""The mean-ODE headline: the exponents of the whole law, fitted jointly over the grid
(`meanfield.stats.joint_law`), checked against an independent optimiser (SciPy's
Levenberg–Marquardt on the same residuals), known truths, contradicting data, and the
printed headline."""

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import least_squares

from meanfield.harness.summary import summary
from meanfield.stats.joint_law import fit_depth_law, fit_depth_width_law, law_value

# the main job's quick layout: L 8..128 x M 1..16384, and M 1..64 at L = 1024
GRID = [(L, M) for L in (8, 16, 32, 64, 128) for M in (1, 4, 16, 64, 16384)]
GRID += [(1024, M) for M in (1, 4, 16, 64)]


def _draws(rng, p=1.0, q=0.5, a=0.46, c=-1.2, b=1.1, n=10, cv=0.3):
    out = []
    for L, M in GRID:
        depth = a * L**-p * (1 + c * L**-p)
        value = math.hypot(depth, b * (L * M) ** -q)
        out.append(value * rng.gamma(1 / cv**2, cv**2, n))
    return out


def test_exact_law_values_give_the_exponents_back():
    """Draws equal to the law's value (no noise): p, q, a, b exactly the truth."""
    samples = []
    for L, M in GRID:
        v = math.hypot(0.46 * L**-0.9 * (1 - 1.2 * L**-0.9), 1.1 * (L * M) ** -0.45)
        samples.append([v] * 3)
    f = fit_depth_width_law(*zip(*GRID, strict=True), samples, quantity="q", c_over_a=-1.2)
    assert f["p"] == pytest.approx(0.9, abs=1e-6) and f["q"] == pytest.approx(0.45, abs=1e-6)
    assert f["a"] == pytest.approx(0.46, rel=1e-5) and f["b"] == pytest.approx(1.1, rel=1e-5)
    assert f["rel_rms"] < 1e-6


def test_the_fit_is_scipys_least_squares_on_the_same_residuals():
    """An independent optimiser on the same objective (log of each point's mean against the
    log of the law) finds the same optimum."""
    rng = np.random.default_rng(3)
    samples = _draws(rng)
    f = fit_depth_width_law(*zip(*GRID, strict=True), samples, quantity="q", c_over_a=-1.2)
    L, M = (np.array(v, float) for v in zip(*GRID, strict=True))
    y = np.log([np.mean(s) for s in samples])

    def resid(t):
        la, p, lb, q = t
        depth = la - p * np.log(L) + np.log(1 - 1.2 * L**-p)
        return np.logaddexp(2 * depth, 2 * (lb - q * np.log(L * M))) / 2 - y

    best = min(
        (least_squares(resid, [la, 1.0, lb, 0.5], method="lm") for la in (-2, 0) for lb in (-1, 1)),
        key=lambda r: r.cost,
    )
    assert f["p"] == pytest.approx(best.x[1], abs=1e-4)
    assert f["q"] == pytest.approx(best.x[3], abs=1e-4)
    assert f["rel_rms"] == pytest.approx(np.sqrt(np.mean(best.fun**2)), rel=1e-4)


def test_contradicting_exponents_are_reported_outside():
    """Data from p = 0.7, q = 0.3 (40 networks a point): the intervals exclude the
    theory's 1 and 1/2 and the record says so; data from the theory's exponents: inside."""
    rng = np.random.default_rng(0)
    wrong = fit_depth_width_law(*zip(*GRID, strict=True), _draws(rng, p=0.7, q=0.3, n=40),
                                quantity="q", c_over_a=-1.2)  # fmt: skip
    assert wrong["theory"]["p"]["inside_ci95"] is False
    assert wrong["theory"]["q"]["inside_ci95"] is False
    assert wrong["p_ci95"][0] < 0.7 < wrong["p_ci95"][1]
    right = fit_depth_width_law(*zip(*GRID, strict=True), _draws(rng, n=40), quantity="q",
                                c_over_a=-1.2)  # fmt: skip
    assert right["theory"]["p"]["inside_ci95"] and right["theory"]["q"]["inside_ci95"]


def test_exploded_draws_and_empty_points_are_counted_and_named():
    rng = np.random.default_rng(1)
    samples = _draws(rng)
    samples[0] = list(samples[0][:9]) + [float("inf")]
    samples[1] = [0.0] * 10
    f = fit_depth_width_law(*zip(*GRID, strict=True), samples, quantity="q", c_over_a=-1.2)
    assert f["excluded"] == 1
    assert f["dropped"] == [{"L": 8, "M": 4, "reason": "no positive finite draw"}]
    assert f["n_points"] == len(GRID) - 1 and f["draws"] == 10 * (len(GRID) - 1) - 1


def test_without_the_depth_term_only_q_is_fitted():
    """A centred initialisation before training: the law is b (LM)^-q alone."""
    rng = np.random.default_rng(2)
    samples = [1.1 * (L * M) ** -0.5 * rng.gamma(10, 0.1, 10) for L, M in GRID]
    f = fit_depth_width_law(*zip(*GRID, strict=True), samples, quantity="q", depth_term=False)
    assert "p" not in f and f["q_ci95"][0] < 0.5 < f["q_ci95"][1]
    assert law_value(f, [8], [1]) == pytest.approx(f["b"] * 8 ** -f["q"])


def test_the_euler_law_has_its_next_order():
    """`a L^-p + c L^-2p` with a, c known: p back to 1e-6; a one-term slope on the same
    values is bent (what the Euler part's printed slope of -0.94 was)."""
    L = [8, 16, 32, 64, 128]
    values = [0.5 / x - 0.6 / x**2 + 0.1 / x**3 for x in L]
    f = fit_depth_law(L, values, quantity="q")
    assert f["p"] == pytest.approx(1.0, abs=5e-3) and f["theory"]["p"]["inside_ci95"]
    slope = np.polyfit(np.log(L), np.log(values), 1)[0]
    assert slope > -0.95
    exact = fit_depth_law(L, [0.5 / x**0.8 - 0.6 / x**1.6 for x in L], quantity="q")
    assert exact["p"] == pytest.approx(0.8, abs=1e-6) and exact["c_over_a"] == pytest.approx(-1.2)
    assert exact["theory"]["p"]["inside_ci95"] is False
    assert "reason" in fit_depth_law([8, 16, 32], [0.1, 0.05, 0.02], quantity="q")


def test_the_headline_leads_with_the_exponents(tmp_path: Path):
    """The printed headline: the law's exponents with intervals first, an exponent outside
    its interval said so, the one-term slopes after them as secondary, never 'OUTSIDE'."""
    rng = np.random.default_rng(0)
    law = fit_depth_width_law(*zip(*GRID, strict=True), _draws(rng, p=0.7, q=0.5, n=40),
                              quantity="delta_h", c_over_a=-1.2)  # fmt: skip
    law.update(part="finite", fixed={"steps": 1})
    one_term = {"quantity": "delta_h", "against": "L", "fixed": {"M": 16384, "steps": 1},
                "slope": -0.93, "ci95": [-0.95, -0.91], "theory": -1.0, "theory_inside": False,
                "secondary": True, "law_slope": -0.91}  # fmt: skip
    text = summary({"study": "mean-ode", "rates": [law], "fits": [one_term]}, tmp_path)
    lines = text.splitlines()
    assert lines[1].startswith("  rates after 1 GD step(s)")
    assert "delta_h: p = 0.6" in lines[2] and "(theory 1: OUTSIDE, beyond ±0.05)" in lines[2]
    assert "(theory 0.5: inside)" in lines[2]
    assert "OUTSIDE" not in "\n".join(lines[3:])
    assert "secondary" in text and "the fitted law's own slope there -0.910" in text


def test_the_fits_compiled_ahead_are_the_fits_programs():
    """`compile_fits` compiles the very programs the fits then run: the same fits at
    sizes seen nowhere else compile three programs fewer after it (the depth law, the
    joint law with and without its depth term) than at other fresh sizes without it.
    The rest (a log of the new shape, ...) compiles in both; what compiles once at any
    size is compiled before."""
    from meanfield.runtime.compilation import CompileCounter
    from meanfield.stats.joint_law import compile_fits

    rng = np.random.default_rng(3)
    draws = _draws(rng)

    def fits(points: int, depths: int) -> None:
        L, M = zip(*GRID[:points], strict=True)
        fit_depth_width_law(L, M, draws[:points], quantity="q", c_over_a=-1.2)
        fit_depth_width_law(L, M, draws[:points], quantity="q", depth_term=False)
        Ls = [2**k for k in range(2, 2 + depths)]
        fit_depth_law(Ls, [0.5 / x - 0.3 / x**2 for x in Ls], quantity="e")

    fits(19, 5)  # what compiles once whatever the sizes (the bootstrap's, ...)
    with CompileCounter() as cold:
        fits(21, 6)
    with CompileCounter() as ahead:
        compile_fits(23, 7, (True, False))
    with CompileCounter() as warm:
        fits(23, 7)
    assert ahead.compiles >= 3
    assert cold.compiles - warm.compiles == 3, (cold.compiles, warm.compiles)
