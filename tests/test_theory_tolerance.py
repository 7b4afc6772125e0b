"""A fit excludes its theory only beyond the stated tolerance (issue 77, item 2): an
interval that misses the theory by less than `THEORY_TOLERANCE` is "near" and said so in
those words; only one that lies further than that from it is "OUTSIDE" and listed as an
exclusion. Each verdict is fed data that contradict the others."""

import numpy as np
import pytest

import meanfield as mf
from meanfield.harness.summary import summary
from meanfield.stats.fits import (
    THEORY_TOLERANCE,
    fit_verdict,
    judge_theory,
    theory_verdict,
    verdict_text,
)


@pytest.mark.parametrize(
    "ci, theory, verdict",
    [
        ([-0.52, -0.48], -0.5, "inside"),
        ([-0.50, -0.48], -0.5, "inside"),  # an edge holds it
        ([-0.49, -0.46], -0.5, "near"),  # misses by 0.01
        ([-0.56, -0.54], -0.5, "near"),  # misses by 0.04, from below
        ([-0.56, -0.555], -0.5, "outside"),  # misses by 0.055
        ([-0.44, -0.40], -0.5, "outside"),  # 0.06 away
        ([-0.70, -0.60], -0.5, "outside"),
        (None, -0.5, None),
        ([-0.5, -0.4], None, None),
    ],
)
def test_the_verdict_is_computed_from_the_interval_and_the_tolerance(ci, theory, verdict):
    assert theory_verdict(ci, theory) == verdict


def test_the_tolerance_is_a_parameter_and_stated():
    assert THEORY_TOLERANCE == 0.05
    assert theory_verdict([0.03, 0.08], 0.0) == "near"
    assert theory_verdict([0.03, 0.08], 0.0, tolerance=0.01) == "outside"
    assert theory_verdict([0.2, 0.3], 0.0, tolerance=0.25) == "near"
    assert verdict_text("near") == "within ±0.05, just outside the interval"
    assert verdict_text("outside", 0.1) == "OUTSIDE, beyond ±0.1"
    assert verdict_text(None) == "not judged"


def _fit(slope, theory, rng, sigma=0.02, draws=40):
    x = np.array([8.0, 16, 32, 64, 128, 256])
    samples = [xi**slope * rng.lognormal(0, sigma, draws) for xi in x]
    return mf.fit_loglog(x, samples, quantity="delta_h", against="M", theory=theory)


def test_a_resolved_small_departure_is_near_and_a_large_one_outside(tmp_path):
    """Slope −0.47 with draws so tight the interval misses −0.5 (the main job's q, say):
    near, printed as such and not listed as an exclusion; slope −0.30: OUTSIDE and listed;
    slope −0.50: inside. The stored verdicts and the printed words agree."""
    rng = np.random.default_rng(1)
    near = _fit(-0.47, -0.5, rng)
    outside = {**_fit(-0.30, -0.5, rng), "quantity": "delta_b"}
    inside = {**_fit(-0.50, -0.5, rng), "quantity": "delta_z"}
    assert near["theory_inside"] is False and near["ci95"][1] < -0.455
    assert near["theory_verdict"] == "near" and near["theory_tolerance"] == 0.05
    assert outside["theory_verdict"] == "outside" and inside["theory_verdict"] == "inside"
    text = summary({"study": "demo", "fits": [near, outside, inside]}, tmp_path)
    lines = {ln.split(":")[0].strip(): ln for ln in text.splitlines() if " vs M" in ln}
    assert "theory -0.5 (within ±0.05, just outside the interval)" in lines["delta_h vs M"]
    assert "theory -0.5 (OUTSIDE, beyond ±0.05)" in lines["delta_b vs M"]
    assert "theory -0.5 (inside)" in lines["delta_z vs M"]
    # an earlier step's fits: only the one beyond the tolerance is listed as excluding
    earlier = [{**f, "fixed": {"steps": 0}} for f in (near, outside)]
    last = [{**f, "fixed": {"steps": 1}} for f in (inside,)]
    text = summary({"study": "demo", "fits": [*earlier, *last]}, tmp_path)
    head, rest = text.split("excludes the theory (beyond its tolerance):")
    assert "1 other fit(s)" in head
    assert "delta_b vs M" in rest and "delta_h vs M" not in rest


def test_a_fit_of_the_tolerance_it_was_given_is_judged_by_it():
    """A slope of −0.005 against a flat prediction, interval [−0.010, 0.000) — the
    coordinate check's case — is near (flat within ±0.05), never excluded; with the
    coordinate check's own tolerance (±0.1) likewise; with 0.001 it would be outside."""
    rng = np.random.default_rng(2)
    x = np.array([16.0, 32, 64, 128, 256])
    samples = [xi**-0.005 * rng.lognormal(0, 0.002, 20) for xi in x]
    fit = mf.fit_loglog(x, samples, quantity="activation/mlp", against="width", theory=0.0)
    assert fit["ci95"][1] < 0 and fit["theory_verdict"] == "near"
    assert judge_theory(dict(fit), tolerance=0.001)["theory_verdict"] == "outside"
    loose = mf.fit_loglog(x, samples, quantity="a", against="width", theory=0.0, tolerance=0.1)
    assert loose["theory_tolerance"] == 0.1 and loose["theory_verdict"] == "near"


def test_the_coordinate_check_never_calls_a_near_flat_slope_excluded():
    """`slope_fits` (the coordinate check) judges its theory with its band's tolerance: a
    slope −0.005 is near its flat prediction, and a slope 0.5 (N^0.5 under a flat claim)
    is outside, both with `as_predicted` saying the same."""
    from meanfield.diagnostics.coord_check import slope_fits

    rng = np.random.default_rng(3)
    sizes = [16, 32, 64, 128, 256]
    draws = {
        "activation/mlp": [(s**-0.005 * rng.lognormal(0, 0.002, 8)).tolist() for s in sizes],
        "activation/attention": [(s**0.5 * rng.lognormal(0, 0.05, 8)).tolist() for s in sizes],
    }
    predicted = {"activation/mlp": 0.0, "activation/attention": 0.0}
    fits = slope_fits(sizes, draws, against="width", predicted=predicted)
    assert fits["activation/mlp"]["theory_verdict"] == "near"
    assert fits["activation/mlp"]["as_predicted"] == "inside"
    assert fits["activation/attention"]["theory_verdict"] == "outside"
    assert fits["activation/attention"]["as_predicted"] == "outside"


def test_a_fit_stored_before_verdicts_is_judged_from_its_interval():
    """A results.json written before `theory_verdict` existed: its interval and theory give
    the verdict; with no interval, what `theory_inside` said."""
    old = {"slope": -0.47, "ci95": [-0.49, -0.46], "theory": -0.5, "theory_inside": False}
    assert fit_verdict(old) == "near"
    assert fit_verdict({**old, "ci95": [-0.3, -0.2]}) == "outside"
    assert fit_verdict({"theory": -0.5, "theory_inside": False}) == "outside"
    assert fit_verdict({"theory": -0.5}) is None


def test_a_laws_exponent_near_its_theory_is_said_near(tmp_path):
    """The joint law's exponents: q fitted on draws whose q is 0.47 (tight) is near 0.5 in
    the headline, p fitted where p is 0.7 is OUTSIDE; the other-steps list holds a law only
    for an exponent beyond the tolerance."""
    from meanfield.stats.joint_law import fit_depth_width_law

    rng = np.random.default_rng(0)
    grid = [(L, M) for L in (4, 8, 16, 32, 64) for M in (16, 64, 256, 1024)]
    draws = [
        [(L**-1.0 + (L * M) ** -0.47) * rng.lognormal(0, 0.01) for _ in range(30)] for L, M in grid
    ]
    law = fit_depth_width_law(*zip(*grid, strict=True), draws, quantity="delta_h")
    th = law["theory"]
    assert th["q"]["verdict"] in ("near", "inside")
    if th["q"]["verdict"] == "near":  # the interval resolved the 0.03
        assert th["q"]["inside_ci95"] is False
    law.update(part="finite", fixed={"steps": 1})
    text = summary({"study": "mean-ode", "rates": [law]}, tmp_path)
    assert "OUTSIDE" not in text
    assert f"(theory 0.5: {verdict_text(th['q']['verdict'])})" in text
    bad = [[(L**-0.7 + (L * M) ** -0.5) * rng.lognormal(0, 0.01) for _ in range(30)]
           for L, M in grid]  # fmt: skip
    law0 = fit_depth_width_law(*zip(*grid, strict=True), bad, quantity="delta_h")
    law0.update(part="finite", fixed={"steps": 0})
    assert law0["theory"]["p"]["verdict"] == "outside"
    text = summary({"study": "mean-ode", "rates": [law0, law]}, tmp_path)
    assert "(theory 1: OUTSIDE, beyond ±0.05)" in text
    assert "excludes the theory (beyond the tolerance)" in text
