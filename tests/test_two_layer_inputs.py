"""Part (e) of `meanfield study two-layer`: the log(n/δ) factor of the two-layer bound
(`meanfield.studies.shared.two_layer_inputs`)."""

import math

import jax.random as jr
import numpy as np

from meanfield.stats.fits import summarize
from meanfield.studies.shared import two_layer_inputs as part


def test_the_independent_quantile_against_monte_carlo():
    """The closed-form `1 − δ` quantile of the max of n |N(0, σ²)| against 200 000 draws
    (binomial standard error of the empirical level: 0.0007 at δ = 0.1)."""
    rng = np.random.default_rng(0)
    for n, delta in ((1, 0.5), (8, 0.1), (64, 0.02)):
        draws = np.max(np.abs(1.7 * rng.standard_normal((200_000, n))), axis=1)
        q = part.independent_quantile(1.7, n, delta)
        level = np.mean(draws <= q)
        se = math.sqrt(delta * (1 - delta) / draws.size)
        assert abs(level - (1 - delta)) < 4 * se, (n, delta, level)


def test_the_ratio_interval_covers_one_on_independent_errors():
    """Coverage on simulated data: 300 data sets of 200 draws of n = 8 independent Gaussian
    errors each; the 95% interval of the ratio holds 1 in 86–99% of them (the binomial
    spread of 300 trials at 95% is ±2.5%; a percentile bootstrap of a tail quantile
    undercovers by a few per cent)."""
    rng = np.random.default_rng(1)
    hits = 0
    for rep in range(300):
        errors = 0.3 * rng.standard_normal((200, 8))
        top, square = np.max(np.abs(errors), axis=1), np.mean(errors**2, axis=1)
        _, (lo, hi) = part.ratio_interval(top, square, 8, 0.1, n_boot=400, seed=rep)
        hits += lo <= 1.0 <= hi
    assert 0.86 <= hits / 300 <= 0.99, hits


def _point(family, n, errors):
    top, square = np.max(np.abs(errors), axis=1), np.mean(errors**2, axis=1)
    return {"part": "inputs", "family": family, "n": n, "max_error": summarize(top),
            "mean_square": summarize(square)}  # fmt: skip


def test_the_verdict_follows_the_data():
    """Independent errors: the factor is attained at (nearly) every δ; one error shared by
    all n inputs (the most correlated case): the quantile stays at one input's, the ratio
    falls below 1 and the verdict says so; a draw that is not finite is not judged."""
    rng = np.random.default_rng(2)
    cfg = {"seed": 0, "input_M": 100}
    independent = _point("orthogonal", 32, 0.2 * rng.standard_normal((400, 32)))
    shared = _point("arc", 32, np.repeat(0.2 * rng.standard_normal((400, 1)), 32, axis=1))
    rows = part.factor_rows(cfg, [independent, shared])
    summary = part.factor_summary(rows)
    assert summary["orthogonal"]["of"] == len(part.DELTAS)
    assert summary["orthogonal"]["attained"] >= len(part.DELTAS) - 1
    assert summary["arc"]["attained"] == 0
    assert summary["arc"]["ci95_at_largest_n"][1] < 0.5
    assert any("arc inputs" in line and "at 0 of 5" in line
               for line in part.factor_lines(summary))  # fmt: skip
    broken = _point("orthogonal", 4, 0.2 * rng.standard_normal((60, 4)))
    broken["max_error"]["values"][3] = None
    rows = part.factor_rows(cfg, [broken])
    assert all(r["attained"] is None and "not finite" in r["reason"] for r in rows)


def test_the_networks_errors_at_initialisation():
    """On the network: the arc's two inputs are the orthogonal pair, and for orthogonal
    inputs at M = D = 256 the max over 32 inputs follows the independent law (the ratio within
    5% of 1, its interval holding 1)."""
    np.testing.assert_allclose(part.inputs("arc", 2), np.eye(2), atol=1e-15)
    cfg = {"input_M": 256, "input_D": 256, "activation": "tanh", "s_u": 1.0, "s_v": 1.0,
           "sigma_in": 1.0, "sigma_out": 1.0, "seed": 0}  # fmt: skip
    keys = jr.split(jr.key(3), 400)
    top, square = (np.asarray(a) for a in part.draws(
        keys, part.inputs("orthogonal", 32), M=256, D=256, activation="tanh", s_u=1.0,
        s_v=1.0, sigma_in=1.0, sigma_out=1.0))  # fmt: skip
    assert np.all(top**2 >= square)
    ratio, (lo, hi) = part.ratio_interval(top, square, 32, 0.5)
    assert lo <= 1.0 <= hi and abs(ratio - 1) < 0.05
    p = part.point(keys[:50], "orthogonal", 4, cfg)
    assert p["max_error"]["count"] == 50
