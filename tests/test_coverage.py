"""The library's 95% intervals cover a known truth 92–98% of the time, on data simulated
with the studies' own correlation structure at the quick presets' sizes (400 replicates:
a binomial standard error of 0.011). The full table, with every noise law, is
`benchmarks/coverage.py` (benchmarks/RESULTS.md)."""

import math

import pytest

from benchmarks import coverage

WINDOW = (0.92, 0.98)


def window(replicates: int) -> tuple[float, float]:
    """0.95 ± 3 binomial standard errors: [0.917, 0.983] at 400 replicates (the acceptance
    window), wider for the costly kinds run at fewer replicates here."""
    half = 3 * math.sqrt(0.95 * 0.05 / replicates)
    return 0.95 - half, 0.95 + half


@pytest.mark.parametrize(
    "kind, case, replicates",
    [
        ("loglog", "10 draws, exponential", 400),  # the headline slope, heaviest-tailed law
        ("loglog", "10 draws, half-normal", 400),
        ("loglog-paired", "16 draws, chi(3)", 400),
        ("coord-check", "4 draws, log-normal(0.3)", 400),
        ("regularity", "2 networks, H = 0.7", 400),
        ("rate-sum", "10 draws, log-normal(0.5)", 400),
        ("plain-rate", "4 depths × 16 draws, Gaussian", 400),
        ("fig6-tail", "1000 initialisations, tilt 0.6", 200),
        ("lr-drift", "4 networks per depth", 400),
        # the transfer study's own layouts (issue 73): its quick preset's depth and width
        # lines, lr* at a random phase between the rates, skewed and symmetric curves
        ("transfer-drift", "quick depth line, drift 0.3, skew 1", 400),
        ("transfer-drift", "quick width line, drift 0, skew 0", 400),
        # the main job's headline exponents p, q at its quick layout (issue 74)
        ("mean-ode-law", "29 points × 10 networks, gamma", 400),
        ("mean-ode-law", "29 points × 10 networks, Monte-Carlo term alone", 400),
        ("alpha-star", "300 initialisations", 200),
        ("critical-beta", "64 draws, shared noise 0.5 (100 bootstrap draws)", 150),
    ],
)
def test_interval_is_calibrated(kind, case, replicates):
    replicate = dict(coverage.cases()[kind])[case]
    lo, hi = window(replicates)
    for row in coverage.coverage(replicate, replicates):
        assert lo <= row["coverage"] <= hi, (kind, case, row)


def test_rate_law_exponents_are_calibrated():
    """The shapes study's rate law on its quick grid: the D and LM exponents q, r (the L
    exponent p is not resolved at this grid's L term, which the study says and replaces)."""
    replicate = dict(coverage.cases()["rate-law"])[
        "12 draws × 31 points, L term as the study's (a = 0.3)"
    ]
    lo, hi = window(200)
    q, r, _ = coverage.coverage(replicate, 200)
    assert lo <= q["coverage"] <= hi, q
    assert lo <= r["coverage"] <= hi, r


@pytest.mark.parametrize("law", ["log-normal(0.5)", "half-normal"])
def test_the_delta_quantile_interval_is_calibrated(law):
    """The δ-quantile slope's interval (pooled bootstrap, renormalised) on the law where it
    covered least (log-normal) and the one where resampling each point's own draws covered
    most (half-normal: 0.998)."""
    replicate = dict(coverage.cases()["delta-quantile"])[f"17 points × 10 draws, {law}"]
    lo, hi = window(200)
    (row,) = coverage.coverage(replicate, 200)
    assert lo <= row["coverage"] <= hi, row


def test_the_check_fails_the_old_figure6_interval():
    """Figure 6's tail exponent bootstrapped layer by layer (what the study did) takes the
    correlated layers of one network for independent ones: under a strong per-network
    tilt it covers below the window."""
    replicate = dict(coverage.cases()["fig6-tail"])[
        "1000 initialisations, tilt 0.6, each layer on its own (the old interval)"
    ]
    (row,) = coverage.coverage(replicate, 200)
    assert row["coverage"] < window(200)[0], row


def test_the_check_fails_an_interval_that_undercovers():
    """The same check on the regularity interval that resamples entries of one network as
    independent paths (what the study did): it covers far below 92%."""
    import math

    import numpy as np

    from meanfield.diagnostics.regularity import estimate_hurst

    def entries_as_paths(rng, r):
        L, d, networks, hurst, shared = 64, 4, 2, 0.7, 0.8
        chol = coverage._fbm_cholesky(L, hurst)
        common = np.repeat(chol @ rng.normal(size=(L, networks)), d * d, axis=1)
        own = chol @ rng.normal(size=(L, networks * d * d))
        paths = (math.sqrt(shared) * common + math.sqrt(1 - shared) * own).reshape(
            L, networks, d, d
        )
        return [(estimate_hurst(paths, axis=0, seed=r).interval, hurst)]

    (row,) = coverage.coverage(entries_as_paths, 200)
    assert row["coverage"] < WINDOW[0]
