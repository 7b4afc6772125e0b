"""`meanfield study shapes` (the joint L, M, D limit): its rate law, optimal shapes, inputs."""

import json

import numpy as np
import pytest

import meanfield as mf
from meanfield.harness.self_check import split_terms
from meanfield.stats.rate_law import fit_rate_law, optimal_shape
from meanfield.studies import StudyInputError


def test_optimal_shapes_of_the_bound_and_the_conjecture():
    """SPEC §6: the bound is minimised by D ~ P^(1/3), ML ~ P^(2/3), L >= P^(1/6); the
    conjecture by L ~ P^(1/5), D ~ P^(2/5), M ~ P^(2/5)."""
    bound = optimal_shape(1.0, 0.5, 0.5, 0.5)
    assert bound["D"] == pytest.approx(1 / 3, abs=2e-3)
    assert bound["L"] + bound["M"] == pytest.approx(2 / 3, abs=2e-3)
    assert bound["L"] == pytest.approx(1 / 6, abs=2e-3)
    assert bound["error_exponent"] == pytest.approx(1 / 6, abs=2e-3)
    conj = optimal_shape(1.0, 1.0, 1.0, 0.5)
    for key, value in (("L", 0.2), ("M", 0.4), ("D", 0.4), ("error_exponent", 0.2)):
        assert conj[key] == pytest.approx(value, abs=2e-3)


def test_rate_law_recovers_known_exponents():
    """Synthetic errors `0.5/L + 0.3 D^0.8 (LM)^-0.7 + 0.4 D^-0.5` with 10% noise over a
    5 x 3 x 3 grid: the fitted exponents within 0.05 and inside their intervals."""
    rng = np.random.default_rng(0)
    L, M, D, samples = [], [], [], []
    for lv in (4, 8, 16, 32, 64):
        for mv in (4, 16, 64):
            for dv in (8, 32, 128):
                true = 0.5 / lv + 0.3 * dv**0.8 / (lv * mv) ** 0.7 + 0.4 * dv**-0.5
                L.append(lv)
                M.append(mv)
                D.append(dv)
                samples.append(true * (1 + 0.1 * rng.standard_normal(16)))
    law = fit_rate_law(L, M, D, samples, quantity="x", n_boot=60)
    for key, value in (("q", 0.8), ("r", 0.7), ("s", 0.5)):
        assert abs(law[key] - value) < 0.05, (key, law[key])
        lo, hi = law[f"{key}_ci95"]
        assert lo <= value <= hi, (key, lo, hi)
    assert abs(law["p"] - 1.0) < 0.15
    assert law["theories"]["conjecture"]["s"]["inside_ci95"]
    assert not law["theories"]["bound"]["r"]["inside_ci95"]


def test_rate_law_paired_resamples_a_draw_across_points():
    """Draw k of every point at one D shares a factor (its embedding): resampled jointly,
    the D exponent's interval holds that shared spread; resampling each point on its own
    averages it away over the points of a D and is too narrow. Unequal draw counts with
    `paired` are refused."""
    rng = np.random.default_rng(3)
    pts = [(lv, mv, dv) for lv in (4, 8, 16, 32, 64) for mv in (4, 16, 64) for dv in (8, 32, 128)]
    emb = {dv: rng.lognormal(0.0, 0.4, 12) for dv in (8, 32, 128)}
    samples = [
        (1 / lv + (dv / (lv * mv)) ** 0.5) * emb[dv] * (1 + 0.05 * rng.standard_normal(12))
        for lv, mv, dv in pts
    ]
    args = (*zip(*pts, strict=True), samples)
    paired = fit_rate_law(*args, quantity="x", law="LM", paired=True)
    alone = fit_rate_law(*args, quantity="x", law="LM")
    assert paired["q"] == alone["q"]  # the same fit, a different interval
    width = {k: f["q_ci95"][1] - f["q_ci95"][0] for k, f in (("p", paired), ("a", alone))}
    assert width["p"] > 2 * width["a"], width
    assert "jointly" in paired["interval"]
    with pytest.raises(ValueError, match="paired draws need one count"):
        fit_rate_law(*args[:3], [s[: 12 - (i % 2)] for i, s in enumerate(samples)],
                     quantity="x", law="LM", paired=True)  # fmt: skip


def test_small_study_end_to_end(tmp_path, self_checked):
    """A small grid, identity: one record per (L, M, D, k); the exact linear limit with its
    error far below the errors; fits with intervals; the rate law and the shapes; figures."""
    r = mf.run_study(
        "shapes", out=str(tmp_path / "sh"), L=[4, 8, 16], M=[4, 16], D=[8, 32], seeds=3,
        steps=1, no_progress=True,
    )  # fmt: skip
    assert len(r["points"]) == 3 * 2 * 2 * 2
    self_checked(r)
    assert r["error_definitions"]["output_error"].startswith("RMS over the inputs")
    p = r["points"][0]
    assert {"L", "M", "D", "steps", "output_error", "hidden_error"} <= set(p)
    assert {"mean", "std", "n"} <= set(p["output_error"])
    assert r["limit"]["kind"] == "linear-exact"
    assert len(r["limit"]["outputs"]) == 2 and len(r["limit"]["outputs"][0]) == 2
    assert r["limit"]["error_estimate"] < 1e-6
    assert all(q["output_error"]["mean"] > 1e3 * r["limit"]["error_estimate"] for q in r["points"])
    fit = next(
        f for f in r["fits"] if f["quantity"] == "hidden_error_fixed_D" and f["against"] == "L"
    )
    assert fit["slope"] is not None and fit["ci95"] is not None
    assert set(r["rate_law"]) == {"output_error", "hidden_error"}
    assert r["optimal_shape"]["conjecture"]["L"] == pytest.approx(0.2, abs=2e-3)
    for name in ("shapes_rates", "shapes_grid"):
        assert (tmp_path / "sh" / f"{name}.png").exists()
    assert json.loads((tmp_path / "sh" / "results.json").read_text())["study"] == "shapes"


def test_bad_inputs_are_refused(tmp_path):
    np.savez(tmp_path / "noy.npz", x=np.ones((2, 1)))
    np.savez(tmp_path / "shape.npz", x=np.ones((2, 1)), y=np.ones((3, 1)))
    np.savez(tmp_path / "nan.npz", x=np.array([[1.0], [np.nan]]), y=np.ones((2, 1)))
    cases = [
        ({"data": str(tmp_path / "noy.npz")}, "--data: .* has no array 'y'"),
        ({"data": str(tmp_path / "shape.npz")}, "--data: ys: must have shape"),
        ({"data": str(tmp_path / "nan.npz")}, "--data: xs: contains NaN"),
        ({"L": [0, 4]}, "^--L: expected a comma-separated list of positive integers"),
        ({"M": [4, 4]}, "^--M: values must be strictly increasing"),
        ({"D": [-1]}, "^--D: expected a comma-separated list of positive integers"),
        ({"seeds": 1}, "--seeds: need at least 2"),
        ({"activation": "nope"}, "--activation: unknown"),
    ]
    for options, message in cases:
        with pytest.raises(StudyInputError, match=message):
            mf.run_study("shapes", out=str(tmp_path / "s"), no_progress=True, **options)


def test_verdict_needs_intervals_that_tell_the_theories_apart():
    """A theory is supported when the intervals of q and r hold its values and exclude the
    other theory's (q, r = 1/2 for the bound, 1 for the conjecture); an interval wider than
    their gap is named; intervals that hold both say "undecided", neither "neither"."""
    from meanfield.stats.fits import exponent_theory
    from meanfield.stats.rate_law import RATE_THEORIES
    from meanfield.studies.shapes.study import _verdict

    def law(q, r):
        theories = {name: {k: exponent_theory(th[k], q if k == "q" else r) for k in ("q", "r")}
                    for name, th in RATE_THEORIES.items()}  # fmt: skip
        return {"q": sum(q) / 2, "r": sum(r) / 2, "q_ci95": list(q), "r_ci95": list(r),
                "theories": theories, "LM_part_chosen": "LM"}  # fmt: skip

    assert _verdict(law((0.45, 0.55), (0.48, 0.52))) == ["bound"]
    assert _verdict(law((0.9, 1.1), (0.95, 1.05))) == ["conjecture"]
    neither = _verdict(law((0.1, 0.2), (0.45, 0.55)))[0]
    assert neither.startswith("neither: D^q (LM)^-r measured with q = 0.15 [0.10, 0.20] and r")
    assert "the bound has q = 0.5, r = 0.5 (q beyond ±0.05)" in neither
    assert "the conjecture has q = 1, r = 1 (q and r beyond ±0.05)" in neither
    # an interval that misses a theory's exponent by less than the tolerance does not
    # exclude it; by more, it does
    assert _verdict(law((0.54, 0.58), (0.48, 0.52))) == ["bound"]
    assert _verdict(law((0.56, 0.58), (0.48, 0.52)))[0].startswith("neither")
    # a law stored before verdicts were: its inside_ci95 alone
    old = law((0.45, 0.55), (0.48, 0.52))
    old["theories"] = {n: {k: {"inside_ci95": v["inside_ci95"]} for k, v in th.items()}
                       for n, th in old["theories"].items()}  # fmt: skip
    assert _verdict(old) == ["bound"]
    assert _verdict(law((-5.0, 5.0), (-5.0, 5.0)))[0].startswith("undecided")
    assert _verdict(law((2.0, 30.0), (1.5, 20.0)))[0].startswith("neither")
    # a wide interval on one exponent, the other exponent excluding one theory: the survivor,
    # with the unresolved exponent named (the quick tanh preset's output law: q in [-76, 211])
    only = _verdict(law((-76.0, 211.0), (0.45, 0.55)))
    assert len(only) == 1
    assert only[0].startswith("bound: conjecture excluded by the interval of r; q in")
    assert _verdict(law((0.45, 1.05), (0.9, 1.1)))[0].startswith("conjecture: bound excluded by")
    # the data need a second M term (LM3): only the bound has one, with r0 = 1/2
    bound = {**law((0.45, 0.55), (0.48, 0.52)), "LM_part_chosen": "LM3", "r0": 0.5}
    assert _verdict({**bound, "r0_ci95": [0.4, 0.6]}) == ["bound"]
    off = _verdict({**bound, "r0": 0.85, "r0_ci95": [0.8, 0.9]})[0]
    assert off.startswith("neither: the errors need a second M term (LM)^-r0, r0 = 0.85")
    conj = {**law((0.9, 1.1), (0.95, 1.05)), "LM_part_chosen": "LM3", "r0": 0.5,
            "r0_ci95": [0.4, 0.6]}  # fmt: skip
    assert _verdict(conj)[0].startswith("neither: the errors need a second M term")


def test_a_failed_fixed_d_solve_is_left_out_and_said(monkeypatch):
    """A draw whose fixed-D limit did not solve: its errors against that limit and its D
    gap are excluded from the point's means (counted), its errors against the joint limit
    are not, and the study's warning names the point."""
    import equinox as eqx
    import jax.numpy as jnp
    import numpy as np

    from meanfield.studies.shapes import study as shapes

    real = shapes._Study._limit

    def limit(self, gram):
        out = real(self, gram)
        if gram is None:
            return out
        ok = np.asarray(out.ok).copy()
        ok[0] = False  # the first draw's solve "failed"
        return eqx.tree_at(lambda m: m.ok, out, jnp.asarray(ok))

    monkeypatch.setattr(shapes._Study, "_limit", limit)
    # the grid of `test_small_study_end_to_end` (its point L=4 M=4 D=8 is the one taken
    # here): the limits' solves on the same depths, compiled once for both tests
    cfg = dict(activation="identity", sigma_in=1.0, sigma_out=1.0, s_u=1.0, s_v=1.0,
               lr_u=0.1, lr_v=0.1, steps=1, L=[4, 8, 16], M=[4, 16], D=[8, 32], seeds=3,
               seed=0)  # fmt: skip
    study = shapes._Study(cfg, jnp.asarray(shapes.DATA_X), jnp.asarray(shapes.DATA_Y))
    point, _ = split_terms(study.point({"L": 4, "M": 4, "D": 8}))  # as the runner stores it
    p = {"L": 4, "M": 4, "D": 8, **point}
    assert p["fixed_D_solves_ok"] is False and p["fixed_D_solves_failed"] == 1
    for name in shapes.FIXED_D_ERRORS:
        assert [s["count"] for s in p[name]] == [2, 2] and p[name][0]["exploded_draws"] == [0]
    assert [s["count"] for s in p["output_error"]] == [3, 3]
    warning = shapes._failed_solves([p])
    assert warning and "L=4 M=4 D=8 (1 draw(s))" in warning
    assert shapes._failed_solves([{**p, "fixed_D_solves_failed": 0}]) is None


def test_an_unresolved_l_term_is_replaced_and_said_a_resolved_one_kept():
    """p is used as fitted only where the L term is resolved (a share of 5% or more and an
    interval narrower than 2); otherwise p = 1 and the shape says why."""
    from meanfield.stats.rate_law import RATE_THEORIES
    from meanfield.studies.shapes.study import _optimal_shapes

    theories = {n: {k: {"inside_ci95": True} for k in "qr"} for n in RATE_THEORIES}
    base = {"p": 0.7, "q": 0.5, "r": 0.5, "s": 0.5, "p_ci95": [0.6, 0.8],
            "q_ci95": [0.45, 0.55], "r_ci95": [0.45, 0.55], "theories": theories,
            "LM_part_chosen": "LM"}  # fmt: skip
    kept = _optimal_shapes({"hidden_error": {**base, "L_term_max_share": 0.3}})["hidden_error"]
    assert "note" not in kept
    small = _optimal_shapes({"hidden_error": {**base, "L_term_max_share": 0.01}})["hidden_error"]
    assert small["note"].startswith("the L term is not resolved on this grid")
    wide = {**base, "L_term_max_share": 0.3, "p_ci95": [-1.0, 2.5]}
    assert "p = 1 (both theories) used" in _optimal_shapes({"h": wide})["h"]["note"]
    assert kept != small  # p = 0.7 and p = 1 give different shapes


def test_a_point_padded_into_a_larger_program_gives_its_own_numbers():
    """`point` in a larger point's program (the study's batching of small shapes) against
    the same point in its own program: every error of every draw equal to round-off.
    The boxes: with no budget every point its own; with a budget, a smaller point goes
    into the box that holds it with the least padding, within the budget (a plain count)."""
    import jax.numpy as jnp

    from meanfield.coupling.design import program_boxes
    from meanfield.studies.shapes import study as shapes

    # the grid of `test_small_study_end_to_end` (the limits' solves compiled once for both;
    # the padding itself is checked with nonlinear ρ in `test_deep_embedded`)
    cfg = dict(activation="identity", sigma_in=1.0, sigma_out=1.0, s_u=1.0, s_v=1.0,
               lr_u=0.1, lr_v=0.1, steps=1, L=[4, 8, 16], M=[4, 16], D=[8, 32], seeds=3,
               seed=0)  # fmt: skip
    study = shapes._Study(cfg, jnp.asarray(shapes.DATA_X), jnp.asarray(shapes.DATA_Y))
    spec = {"L": 4, "M": 4, "D": 8}
    study.boxes = {(4, 4, 8): (16, 16, 32)}
    (padded, _), (own, _) = split_terms(study.point(spec)), split_terms(study.point(spec, False))
    assert padded.keys() == own.keys()
    for name, steps in own.items():
        if not isinstance(steps, list):
            assert padded[name] == own[name], name
            continue
        for a, b in zip(steps, padded[name], strict=True):
            np.testing.assert_allclose(b["values"], a["values"], rtol=1e-10, err_msg=name)

    points = [(L, M, D) for L in (4, 8) for M in (4, 16) for D in (8, 32)]
    assert program_boxes(points, 3, 0, pad_depth=True) == {p: p for p in points}
    budget = 3 * (8 * 16 * 32 - 8 * 16 * 8)  # (8, 16, 8) fits in (8, 16, 32), not smaller
    boxes = program_boxes(points, 3, budget, pad_depth=True)
    for p, box in boxes.items():
        holders = [b for b in points if all(x <= y for x, y in zip(p, b, strict=True))]
        cost = lambda b, p=p: 3 * (np.prod(b) - np.prod(p))
        assert cost(box) <= budget and all(x <= y for x, y in zip(p, box, strict=True))
        assert box in holders
    assert boxes[(8, 16, 8)] == (8, 16, 32) and boxes[(4, 4, 8)] != (8, 16, 32)
    assert program_boxes(points, 3, budget, pad_depth=False)[(4, 16, 8)][0] == 4


def test_a_resumed_study_self_checks_its_fixed_d_limits_recomputed_op_by_op(tmp_path, self_checked):
    """`--resume` after a finished run: the fixed-D limits are no longer cached, so the
    self-check solves them again op by op. Their error estimate (a difference of two solves
    of O(1) coefficients: 3e-12 here, 7e-9 at the quick preset) then moves by round-off of
    the coefficients, 1e-3 of itself; it is compared relative to the coefficients
    (`self_check.of_terms`; without that mark this fails). About 30 s on 2 CPU cores, most
    of it the op-by-op solves."""
    small = dict(L=[4], M=[4], D=[8], seeds=2, steps=1, no_progress=True)
    out = str(tmp_path / "sh")
    first = mf.run_study("shapes", out=out, no_self_check=True, **small)
    again = mf.run_study("shapes", out=out, resume=True, **small)
    assert again["points"] == first["points"]  # loaded, not recomputed
    self_checked(again)
    assert again["self_check"][0]["scales"]["reference_error_fixed_D"] > 0.1


def test_explosions_are_warned_and_marked_in_the_figures(tmp_path):
    """Issue 74: a point where 11 of 12 networks exploded (its mean is the one survivor's)
    is named in a warning with its count, and ringed and labelled in the figure's panel;
    a point without explosions is not."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from meanfield.io.plotting import mark_exploded
    from meanfield.stats.fits import summarize
    from meanfield.studies.shapes.study import _explosions

    def point(L, values):
        s = summarize(values)
        return {"L": L, "M": 4, "D": 128, "steps": 2, "output_error": s, "hidden_error": s}

    calm = point(8, [0.1] * 12)
    wild = point(4, [236.0] + [float("inf")] * 11)
    assert _explosions([calm]) is None
    warning = _explosions([calm, wild])
    assert warning is not None and "(L, M, D) = (4, 4, 128): 11 of 12 after 2 step(s)" in warning
    fig, ax = plt.subplots()
    mark_exploded(ax, [calm, wild], "hidden_error", lambda p: p["L"])
    texts = [t.get_text() for t in ax.texts]
    assert texts == ["11/12 exploded"]
    assert "exploded" in [line.get_label() for line in ax.get_lines()]
    plt.close(fig)
