"""Chaintron's stochastic-approximation proposition (`meanfield.theory.stochastic_approximation`)
and `meanfield study stochastic-approximation`."""

import math

import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import meanfield as mf
from meanfield.studies import SelfCheckError, StudyInputError
from meanfield.studies.stochastic_approximation import study
from meanfield.theory import stochastic_approximation as sa


def test_the_scheme_is_a_plain_loop():
    """`euler_monte_carlo` (a scan) against the recursion written as a Python loop."""
    ex = sa.SteinExample.make(3, key=jr.key(0))
    u, v = ex.sample(jr.key(1), 5, 7)
    path = sa.euler_monte_carlo(sa.stein_f, ex.a0, (u, v), shift=jnp.array([0.1, 0.0, -0.2]))
    a = np.asarray(ex.a0)
    for ell in range(5):
        drift = np.mean([np.asarray(v[ell, j]) * math.tanh(float(np.dot(u[ell, j], a)))
                         for j in range(7)], axis=0)  # fmt: skip
        a = a + (drift + np.array([0.1, 0.0, -0.2])) / 5
        np.testing.assert_allclose(path[ell + 1], a, rtol=1e-13, atol=1e-14)


def test_the_mean_field_against_monte_carlo():
    """Stein's closed form `g(‖a‖²) B a` against the mean of f over 400 000 samples (within
    4 standard errors per coordinate)."""
    ex = sa.SteinExample.make(4, key=jr.key(2))
    a = jnp.array([0.3, -1.2, 0.5, 0.8])
    u, v = ex.sample(jr.key(3), 1, 400_000)
    values = np.asarray(v[0] * np.tanh(np.asarray(u[0] @ a))[:, None])
    se = values.std(axis=0) / math.sqrt(values.shape[0])
    assert np.all(np.abs(values.mean(axis=0) - np.asarray(ex.mean_field(a))) < 4 * se)


def test_the_scheme_converges_to_the_limit_and_its_epsilon_terms_are_exact():
    """The unperturbed error falls with L and M towards the solved limit (whose own error is
    far below it); each ε term moves what it says: â^0 by e, f by e, each v by e."""
    ex = sa.SteinExample.make(3, key=jr.key(4))
    errors = []
    for L, M in ((8, 8), (64, 256)):
        ref, ref_error = ex.limit(L)
        assert ref_error < 1e-7
        zs = ex.sample(jr.key(5), L, M)
        errors.append(float(jnp.max(jnp.linalg.norm(
            sa.euler_monte_carlo(sa.stein_f, ex.a0, zs) - ref, axis=-1))))  # fmt: skip
    assert errors[1] < errors[0] / 4
    w = jnp.array([1.0, 0.0, 0.0])
    zs = ex.sample(jr.key(6), 4, 3)
    base = sa.euler_monte_carlo(sa.stein_f, ex.a0, zs)
    init = sa.perturbed_scheme(sa.stein_f, ex.a0, zs, "initial", 0.2, w)
    np.testing.assert_allclose(init[0] - base[0], 0.2 * w, atol=1e-15)
    shifted = sa.perturbed_scheme(sa.stein_f, ex.a0, zs, "function", 0.2, w)
    direct = sa.euler_monte_carlo(lambda s, a, z: sa.stein_f(s, a, z) + 0.2 * w, ex.a0, zs)
    np.testing.assert_allclose(shifted, direct, atol=1e-14)
    with pytest.raises(ValueError, match="kind:"):
        sa.perturbed_scheme(sa.stein_f, ex.a0, zs, "weights", 0.2, w)


def test_the_flat_verdict_follows_the_data():
    """A slope whose interval lies inside ±FLAT is flat; a response that grows like L^0.5
    (the terms accumulating) is not."""
    fits = [
        {"quantity": "initial_0.1", "against": "L", "slope": 0.01, "ci95": [-0.01, 0.03]},
        {"quantity": "samples_0.1", "against": "L", "slope": 0.5, "ci95": [0.45, 0.55]},
        {"quantity": "function_0.1", "against": "M", "slope": 0.04, "ci95": [0.0, 0.08]},
        {"quantity": "function_0.1", "against": "L", "slope": -0.4, "ci95": [-0.5, -0.3]},
        {"quantity": "base_error", "against": "L", "slope": -1.0, "ci95": [-1.1, -0.9]},
    ]
    verdicts = [c["verdict"] for c in study.flat_checks(fits)]
    assert verdicts == ["flat", "grows", "undecided", "falls"]
    lines = study.headline(study.flat_checks(fits), [])
    assert any("'samples'" in line and "on 0 of 1 lines" in line and "grows" in line
               for line in lines)  # fmt: skip


def test_sizes_on_the_same_draws_are_one_measurement():
    """Issue 74: the sizes e = 0.01 and 0.1 of a term perturb the same draws; each line of
    the grid (against L, against M) counts once: "on 2 of 2 lines", not "at 4 of 4"; two
    sizes that disagree leave their line undecided."""
    fits = [
        {"quantity": f"initial_{e}", "against": a, "slope": 0.01, "ci95": [-0.01, 0.03]}
        for e in (0.01, 0.1) for a in ("L", "M")
    ]  # fmt: skip
    lines = study.headline(study.flat_checks(fits), [])
    line = next(line for line in lines if "'initial'" in line)
    assert "on 2 of 2 lines" in line and "its 2 sizes e perturb the same draws" in line
    fits[1] = {**fits[1], "slope": 0.3, "ci95": [0.2, 0.4]}  # e = 0.01 against M grows
    verdicts = {(v["kind"], v["against"]): v["verdict"]
                for v in study.line_verdicts(study.flat_checks(fits))}  # fmt: skip
    assert verdicts == {("initial", "L"): "flat", ("initial", "M"): "undecided"}


def _compiled_route_moved(monkeypatch, move):
    """The reference's error estimate moved by `move(error, fine)` on the compiled route
    only (the self-check recomputes its point op by op, `jax.disable_jit`)."""
    import jax

    right = sa.SteinExample.limit

    def limit(self, L):
        fine, error = right(self, L)
        return fine, error if jax.config.jax_disable_jit else move(error, fine)

    monkeypatch.setattr(sa.SteinExample, "limit", limit)


def test_small_study_end_to_end(tmp_path, self_checked, monkeypatch):
    """With its self-check: the reference's error estimate (2e-9, a difference of two solves
    of size 1) moved on the compiled route by 2.8e-5 of itself, the round-off an AVX2 CPU
    gave it (issue 73), is no alarm: it is bounded by its terms' round-off."""
    _compiled_route_moved(monkeypatch, lambda error, fine: error * (1 + 2.8e-5))
    r = mf.run_study(
        "stochastic-approximation", out=str(tmp_path / "sa"), L=[4, 16], M=[4, 16],
        sizes=[0.05], seeds=8, d=3, no_progress=True,
    )  # fmt: skip
    self_checked(r)
    (check,) = r["self_check"]
    assert check["scales"]["reference_error"] >= 1.0  # |a(s)|: a0 is a unit vector
    assert set(check["scales"]) == {
        "base_error",
        "reference_error",
        *study.response_names(r["config"]),
    }
    assert len(r["points"]) == 4 and len(r["flat"]) == 6
    assert {x["kind"] for x in r["limit_ratios"]} == {"initial", "function"}
    assert all(abs(x["ratio"] - 1) < 0.2 for x in r["limit_ratios"])
    assert r["reference"]["error_estimate"] < 1e-6
    assert (tmp_path / "sa" / "stochastic_approximation.png").exists()


def test_a_compiled_error_beyond_its_terms_round_off_stops_the_study(tmp_path, monkeypatch):
    """The same estimate moved by 1e-5 of its terms' scale on the compiled route: the study
    stops, naming the quantity, and writes no results.json."""
    _compiled_route_moved(monkeypatch, lambda error, fine: error + 1e-5 * float(jnp.max(fine)))
    monkeypatch.delenv("MEANFIELD_NO_SELF_CHECK", raising=False)
    out = tmp_path / "sa"
    with pytest.raises(SelfCheckError, match="reference_error: difference .* of its scale"):
        mf.run_study("stochastic-approximation", out=str(out), L=[4, 8], M=[4, 8],
                     sizes=[0.05], seeds=4, d=3, no_progress=True)  # fmt: skip
    assert not (out / "results.json").exists()


def test_bad_inputs_are_refused(tmp_path):
    cases = [
        ({"L": [4]}, "^--L: need at least 2 distinct values"),
        ({"sizes": [0.0]}, r"^--sizes: need distinct values in \(0, 1\]"),
        ({"seeds": 2}, "^--seeds: need at least 4"),
        ({"d": 100}, "^--d: at most 64"),
    ]
    for options, message in cases:
        with pytest.raises(StudyInputError, match=message):
            mf.run_study("stochastic-approximation", out=str(tmp_path / "s"), no_progress=True,
                         **options)  # fmt: skip


def test_the_monte_carlo_term_is_judged_against_both_of_the_seeds_forms():
    """Issue 74: the unperturbed error's slope against L tells the slide's sqrt(log(1/δ)/M)
    (flat in L) from the proof's sqrt(log(L/δ)/(LM)) (L^-1/2); contradicting data (flat in
    L) give the other verdict."""

    def fit(against, slope, ci):
        return {"quantity": "base_error", "against": against, "fixed": {"M": 256},
                "slope": slope, "ci95": ci}  # fmt: skip

    (v,) = study.monte_carlo_verdicts([fit("L", -0.5, [-0.6, -0.4])])
    assert v["forms"]["proof"]["inside_ci95"] and not v["forms"]["slide"]["inside_ci95"]
    (v,) = study.monte_carlo_verdicts([fit("L", 0.01, [-0.05, 0.07])])
    assert v["forms"]["slide"]["inside_ci95"] and not v["forms"]["proof"]["inside_ci95"]
    (line,) = study.monte_carlo_lines([v])
    assert "the slide's sqrt(log(1/δ)/M) (0) inside" in line and "(-0.5) OUTSIDE" in line
