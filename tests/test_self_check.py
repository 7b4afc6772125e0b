"""Every study checks itself: one grid point, drawn from the seed, is recomputed op by op
(`jax.disable_jit`) and compared with its compiled result; the agreement goes to
results.json, a disagreement stops the study in one line naming the point. And a folder's
points are reused on --resume only by the code (meanfield source, jax, jaxlib) that
computed them."""

import functools
import json
import math

import jax
import jax.numpy as jnp
import pytest
from jax import lax

import meanfield as mf
from meanfield.cli import main
from meanfield.harness import identity as identity_module
from meanfield.harness import runner as runner_module
from meanfield.harness import summary as summary_module
from meanfield.harness.runner import SelfCheckError, StudyRunner, compare_points
from meanfield.harness.self_check import SELF_CHECK_RTOL, of_terms, split_terms
from meanfield.models import perceptron as shallow
from meanfield.studies import StudyInputError

TINY_TWO_LAYER = dict(
    M=[64, 256], D=[4, 8], D_limit=[16, 64], s_v_sweep=[0.5, 2.0], sweep_M=[64], sweep_D=8,
    seeds=2, steps=1, n_sweep=[2, 4], input_draws=50, input_M=16, input_D=8, no_progress=True,
)  # fmt: skip
POINTS = 16  # 4 width, 2 dimension, 4 criteria, 2 diversity and 4 input points


@pytest.fixture(autouse=True)
def _with_the_self_check():
    """These tests are about the self-check: on here (the suite skips it elsewhere)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MEANFIELD_NO_SELF_CHECK", raising=False)
        yield


def test_no_self_check_skips_it_and_says_so(tmp_path, monkeypatch):
    """`--no-self-check` (or MEANFIELD_NO_SELF_CHECK=1): no point recomputed, and
    results.json and the printed summary say it was skipped."""
    argv = ["study", "two-layer", "--no-progress", "--M", "64,256", "--D", "4,8",
            "--D-limit", "16,64", "--s-v-sweep", "0.5,2", "--sweep-M", "64", "--sweep-D", "8",
            "--seeds", "2", "--steps", "1", "--n-sweep", "2,4", "--input-draws", "50",
            "--input-M", "16", "--input-D", "8"]  # fmt: skip
    assert main([*argv, "--out", str(tmp_path / "a"), "--no-self-check"]) == 0
    r = json.loads((tmp_path / "a" / "results.json").read_text())
    assert r["self_check"] == [] and "--no-self-check" in r["self_check_skipped"]
    assert "self-check: skipped" in summary_module.summary(r, tmp_path / "a")
    # the environment variable, read where a study starts its runner (runs with the check
    # on: every other test of this file)
    import argparse

    plain = argparse.Namespace()
    assert runner_module.self_check_wanted(plain)
    assert not runner_module.self_check_wanted(argparse.Namespace(no_self_check=True))
    monkeypatch.setenv("MEANFIELD_NO_SELF_CHECK", "1")
    assert not runner_module.self_check_wanted(plain)
    monkeypatch.setenv("MEANFIELD_NO_SELF_CHECK", "0")
    assert runner_module.self_check_wanted(plain)


def test_compare_points_relative_per_leaf_and_strict_elsewhere():
    a = {"x": [1.0, 2.0, None], "n": 3, "tag": "ok", "nested": {"y": [[1e-3, 2e-3]]}}
    assert compare_points(a, a) == (0.0, "the point")
    b = json.loads(json.dumps(a))
    b["nested"]["y"][0][1] = 2e-3 * (1 + 1e-9)
    diff, where = compare_points(a, b)
    assert 1e-10 < diff < 1e-8 and where == "nested.y"
    b["x"][2] = 4.0  # an explosion on one side only
    assert compare_points(a, b) == (math.inf, "x")
    assert compare_points(a, {**a, "tag": "no"})[0] == math.inf
    assert compare_points(a, {**a, "n": 4})[0] == pytest.approx(1 / 4)
    assert compare_points(a, {k: v for k, v in a.items() if k != "n"})[0] == math.inf
    assert compare_points({"x": [1.0, 2.0]}, {"x": [1.0]})[0] == math.inf
    assert compare_points({"v": [0.0, 0.0]}, {"v": [0.0, 0.0]})[0] == 0.0
    # an allowance for adaptive solves: differences up to atol do not count
    solved = {"err": [1e-10, 2e-2]}, {"err": [1.2e-10, 2e-2 + 1e-11]}
    assert compare_points(*solved)[0] > 1e-10
    assert compare_points(*solved, atol=1e-9)[0] == 0.0
    assert compare_points({"e": [1.0]}, {"e": [1.5]}, atol=0.1)[0] == pytest.approx(0.4 / 1.5)


def test_a_number_computed_from_larger_terms_is_bounded_by_their_round_off():
    """An error estimate of 2e-9 between two solves of size 1 that differs by 2.8e-5 of
    itself between the routes (6e-14: round-off of the terms, seen on an AVX2 CPU) is no
    alarm once marked with its terms' scale; a difference of 1e-5 of the terms still is."""
    rtol = SELF_CHECK_RTOL["float64"]
    stored = {"reference_error": 1.997e-9, "x": [1.0, 2.0]}
    roundoff = {"reference_error": 1.997e-9 * (1 + 2.8e-5), "x": [1.0, 2.0]}
    wrong = {"reference_error": 1.997e-9 + 1e-5, "x": [1.0, 2.0]}
    # unmarked, relative to itself: a false alarm (the bug this guards against)
    assert compare_points(stored, roundoff)[0] > rtol
    point, scales = split_terms({"reference_error": of_terms(1.997e-9, [0.3, -1.4]), "x": [1, 2]})
    assert point == {"reference_error": 1.997e-9, "x": [1, 2]}
    assert scales == {"reference_error": 1.4}
    diff, where = compare_points(stored, roundoff, scales=scales)
    assert diff == pytest.approx(1.997e-9 * 2.8e-5 / 1.4) and diff < 1e-12
    diff, where = compare_points(stored, wrong, scales=scales)
    assert diff > rtol and where == "reference_error"
    # a mark applies to everything under its path, nested in dicts and lists
    nested, scales = split_terms({"a": [{"e": of_terms({"v": [1e-9]}, 2.0)}], "b": of_terms(0, 0)})
    assert nested == {"a": [{"e": {"v": [1e-9]}}], "b": 0} and scales == {"a[0].e": 2.0}
    assert compare_points(nested, {"a": [{"e": {"v": [3e-9]}}], "b": 0}, scales=scales)[0] == (
        pytest.approx(1e-9)
    )
    assert compare_points(nested, {"a": [{"e": {"v": [1e-5]}}], "b": 0}, scales=scales)[0] > rtol
    # a mark never hides a non-finite value, a shape or a flag
    assert compare_points({"e": [1e-9]}, {"e": [None]}, scales={"e": 1.0})[0] == math.inf
    assert compare_points({"e": [1e-9]}, {"e": [1e-9, 0.0]}, scales={"e": 1.0})[0] == math.inf


def test_a_summarys_statistics_carry_the_round_off_of_its_draws():
    """The standard deviation of nearly equal draws is a difference of them: its round-off
    is the draws', not its own; a count or an index is compared as it is."""
    values = [1.0 + 1e-9, 1.0 - 1e-9, 1.0 + 2e-9]
    from meanfield.stats.fits import summarize

    s = summarize(values)
    moved = json.loads(json.dumps(s))
    moved["std"] = s["std"] * (1 + 1e-4)  # 1e-13 absolute: the draws' round-off
    assert compare_points(s, moved)[0] < 1e-12
    moved["std"] = s["std"] + 1e-5  # beyond it
    assert compare_points(s, moved)[0] > SELF_CHECK_RTOL["float64"]
    moved = json.loads(json.dumps(s))
    moved["exploded_draws"] = [1]
    assert compare_points(s, moved)[0] == math.inf  # a list that differs in length
    moved["count"] = s["count"] - 1
    moved["exploded_draws"] = []
    assert compare_points(s, moved)[0] == pytest.approx(1 / 2)  # a count: its own scale


def _wrong_when_compiled(monkeypatch):
    """The two-layer network's pre-activations off by 1% when compiled, right op by op."""
    right = shallow.Perceptron.preactivations

    def preactivations(self, xs):
        p = right(self, xs)
        return p if jax.config.jax_disable_jit else 1.01 * p

    monkeypatch.setattr(shallow.Perceptron, "preactivations", preactivations)
    # part (a)'s programs are kept per shape (`_width_program`): programs traced before the
    # patch would not see it, and those traced with it must not outlive this test
    from meanfield.studies.two_layer import study as two_layer

    fresh = functools.cache(two_layer._width_program.__wrapped__)
    monkeypatch.setattr(two_layer, "_width_program", fresh)


def _seed_checking_a_width_point() -> int:
    """A seed whose self-check draws one of the 4 width points (the first 4 of 16)."""
    return next(
        s for s in range(100) if runner_module.self_check_index(s, "two-layer", 0, POINTS) < 4
    )


def test_the_point_checked_is_drawn_from_the_cheaper_half():
    """Uniform among the points at or below the median cost (depth), from the seed."""
    costs = [4, 64, 1024, 4096] * 3
    drawn = {runner_module.self_check_index(s, "variance", 0, costs) for s in range(200)}
    assert drawn == {i for i, c in enumerate(costs) if c <= 64}
    assert runner_module.self_check_index(7, "x", 0, costs) == runner_module.self_check_index(
        7, "x", 0, costs
    )
    assert {runner_module.self_check_index(s, "x", 0, 5) for s in range(200)} == set(range(5))
    assert runner_module.depth_cost({"L": 256, "M": 4}) == 256.0
    assert runner_module.depth_cost({"part": "width"}) == 1.0


def test_a_miscompiled_path_stops_the_study_naming_the_point(tmp_path, monkeypatch, capsys):
    """One line naming the point, exit code 3, no results.json, the finished points kept;
    then, unpatched, the same point checked and its agreement recorded."""
    _wrong_when_compiled(monkeypatch)
    out, seed = tmp_path / "s", _seed_checking_a_width_point()
    argv = ["study", "two-layer", "--out", str(out), "--no-progress", "--M", "64,256",
            "--D", "4,8", "--D-limit", "16,64", "--s-v-sweep", "0.5,2", "--sweep-M", "64",
            "--sweep-D", "8", "--seeds", "2", "--steps", "1", "--n-sweep", "2,4",
            "--input-draws", "50", "--input-M", "16", "--input-D", "8",
            "--seed", str(seed)]  # fmt: skip
    assert main(argv) == 3
    text = capsys.readouterr().err.strip()
    assert len(text.splitlines()) == 1
    assert text.startswith("meanfield study two-layer: error: self-check: grid point partwidth_D")
    assert "differs from its compiled result" in text and "jaxlib" in text
    assert not (out / "results.json").exists()
    assert len(list((out / "points").glob("*.json"))) == POINTS  # the finished points stay
    # unpatched, the same study checks the same point and records its agreement
    monkeypatch.undo()
    r = mf.run_study("two-layer", out=str(out), seed=seed, overwrite=True, **TINY_TWO_LAYER)
    (check,) = r["self_check"]
    assert check["agrees"] and check["point"] in text
    assert check["of"] == len(r["points"]) == POINTS
    assert check["index"] == runner_module.self_check_index(seed, "two-layer", 0, POINTS)
    assert check["difference"] <= check["tolerance"] == 1e-6
    assert check["route"] == "op by op (jax.disable_jit)"
    # its operations evaluated by NumPy (`meanfield._numpy_ops`), as the summary says
    routes = check["primitives"]
    assert routes["numpy"] > 100 and sum(routes["jax"].values()) < routes["numpy"]
    line = next(x for x in summary_module.summary(r, out).splitlines() if "self-check" in x)
    assert f"{routes['numpy']} operations by NumPy" in line


def test_a_custom_route_and_its_failure(tmp_path):
    """`check=` gives an independent route; `check=False` skips the check."""
    run = StudyRunner("demo", tmp_path / "d", {"seed": 3}, progress=False)
    specs = [{"i": i} for i in range(5)]
    points = run.run_points(specs, lambda s: {"y": [s["i"] ** 2, 0.5]}, check=False)
    assert run.self_checks == [] and len(points) == 5
    run.run_points(specs, lambda s: {"y": [s["i"] ** 2, 0.5]}, eager=False,
                   check=lambda s: {"y": [float(s["i"]) ** 2, 0.5]}, route="a loop")  # fmt: skip
    assert run.self_checks[-1]["agrees"] and run.self_checks[-1]["route"] == "a loop"
    with pytest.raises(SelfCheckError, match=r"grid point i\d recomputed a loop"):
        run.run_points(specs, lambda s: {"y": [s["i"] ** 2 + 1, 0.5]}, eager=False,
                       check=lambda s: {"y": [s["i"] ** 2, 0.5]}, route="a loop")  # fmt: skip
    run.close()


def test_resume_refuses_points_of_other_code(tmp_path, monkeypatch):
    out = tmp_path / "s"
    run = StudyRunner("demo", out, {"seed": 0}, progress=False)
    run.run_points([{"i": 1}], lambda s: {"y": 1.0})
    run.finish({"points": []})
    identity = identity_module.code_identity()
    for change, words in (
        ({"jaxlib": "0.0.1"}, f"jaxlib {identity['jaxlib']} -> 0.0.1"),
        ({"source_sha256": "0" * 64}, "the meanfield source changed"),
    ):
        monkeypatch.setattr(identity_module, "code_identity", lambda c=change: {**identity, **c})
        with pytest.raises(StudyInputError, match="computed by other code") as err:
            StudyRunner("demo", out, {"seed": 0}, resume=True, progress=False).open()
        assert words in str(err.value) and len(str(err.value).splitlines()) == 1
        monkeypatch.undo()
    # the same code resumes and loads the point
    again = StudyRunner("demo", out, {"seed": 0}, resume=True, progress=False)
    again.run_points([{"i": 1}], lambda s: {"y": 2.0}, check=False)
    assert again.loaded == ["i1"]
    again.close()


def test_op_by_op_loops_equal_the_compiled_ones():
    """`op_by_op` runs lax.scan (forward, reverse, without xs, through jax.grad) and lax.map
    (in batches) as Python loops: the same values as compiled, and the real loops after."""
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    from meanfield._eager import op_by_op

    xs = jnp.linspace(0.1, 1.0, 7)

    def run(xs):
        def body(c, x):
            return c * jnp.cos(x) + x, (c, None)

        c1, (ys, _) = lax.scan(body, 1.0, xs)
        c2, zs = lax.scan(lambda c, _: (c + 1.0, c * c), 0.5, None, length=3, reverse=True)
        g = jax.grad(lambda a: lax.scan(lambda c, x: (c * x + a, c), a, xs)[0])(0.3)
        m = lax.map(lambda x: jnp.sin(x) * x, xs, batch_size=3)
        c0, none = lax.scan(body, 2.0, xs[:0])  # no step (a study with --steps 0)
        return c1, ys, c2, zs, g, m, c0, none[0]

    compiled = jax.jit(run)(xs)
    with op_by_op():
        eager = run(xs)
    for a, b in zip(compiled, eager, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-13, atol=0)
    from meanfield import _eager

    assert lax.scan is _eager._real_scan and lax.map is _eager._real_map


def test_a_variant_is_compared_compiled_against_op_by_op(tmp_path):
    """`variant`: the check runs the variant both ways (a long chaotic training's compiled and
    op-by-op results part by more than round-off): agreement when it is computed right,
    the study stopped when the variant's compiled path is wrong."""
    import jax.numpy as jnp

    def trained(spec, steps):
        def step(h, _):
            return 3.9 * h * (1 - h), None  # the logistic map: round-off doubles each step

        return {"h": float(jax.lax.scan(step, jnp.asarray(0.2 + 0.01 * spec["i"]), None,
                                        length=steps)[0])}  # fmt: skip

    specs = [{"i": i} for i in range(4)]
    run = StudyRunner("demo", tmp_path / "d", {"seed": 1}, progress=False)
    run.run_points(specs, lambda s: trained(s, 400), variant=lambda s: trained(s, 3),
                   route="3 steps both ways")  # fmt: skip
    assert run.self_checks[-1]["agrees"] and run.self_checks[-1]["route"] == "3 steps both ways"

    def wrong(spec):
        out = trained(spec, 3)
        return out if jax.config.jax_disable_jit else {"h": out["h"] * 1.001}

    with pytest.raises(SelfCheckError):
        run.run_points(specs, lambda s: trained(s, 400), variant=wrong, route="3 steps")
    run.close()


def test_points_computed_in_float32_get_float32_round_off(tmp_path):
    """`precision="float32"`: a study whose points are float32 under float64 JAX (the
    response study's simulations) is held to float32 round-off; a difference of 1e-4 is
    round-off there, a miscompile at float64's bound, and 0.1 is one at either."""
    specs = [{"i": i} for i in range(4)]
    run = StudyRunner("demo", tmp_path / "d", {"seed": 2}, progress=False)

    def off_by(rel):
        return lambda s: {"y": 1.0 + (0.0 if jax.config.jax_disable_jit else rel)}

    run.run_points(specs, off_by(1e-4), precision="float32")
    assert run.self_checks[-1]["agrees"] and run.self_checks[-1]["tolerance"] == 1e-2
    with pytest.raises(SelfCheckError):
        run.run_points(specs, off_by(1e-4))
    with pytest.raises(SelfCheckError):
        run.run_points(specs, off_by(0.1), precision="float32")
    run.close()


def _miscompile(monkeypatch, primitive, wrong):
    """A compiler that gets `primitive` wrong: the lowering XLA compiles (MLIR) replaced
    by `wrong` (no use of the primitive itself); NumPy's evaluation, the self-check's, is
    right. Programs already compiled are forgotten first (`jax.clear_caches`)."""
    from jax._src.interpreters import mlir

    jax.clear_caches()
    rule = mlir.lower_fun(wrong, multiple_results=False)
    monkeypatch.setitem(mlir._lowerings, primitive, mlir.LoweringRuleEntry(rule, True))
    monkeypatch.setenv("MEANFIELD_ARTIFACT_CACHE", "off")


# tanh 1% off (sinh/cosh), or the larger of two 1% off (a select): the studies' activations
WRONG_TANH = (lax.tanh_p, lambda x, **_: 1.01 * jnp.sinh(x) / jnp.cosh(x))
WRONG_MAX = (lax.max_p, lambda x, y, **_: 1.01 * jnp.where(x > y, x, y))


@pytest.mark.parametrize(
    ("argv", "route", "plant"),
    [
        (["sde", "--weights", "brownian", "--L", "4,8", "--seeds", "4", "--d", "2",
          "--n-fine", "64"], "its traced program, equation by equation", WRONG_TANH),
        (["variance", "--L", "2,4", "--nets", "8", "--c-samples", "2000", "--gammas", "0.5,1",
          "--activation", "tanh"],
         "op by op (jax.disable_jit)", WRONG_TANH),
        (["phases", "--L", "4,8", "--beta", "0.25,1", "--seeds", "4", "--d", "4", "--bootstrap",
          "20"], "its traced program, equation by equation", WRONG_MAX),
        (["trained-weights", "--L", "32", "--d", "8", "--betas", "0.5,1", "--inits", "iid",
          "--steps", "4", "--seeds", "2", "--activation", "tanh"], "its row's networks trained",
         WRONG_TANH),
    ],
    ids=["sde (its traced program)", "variance (op by op)", "phases (its traced program)",
         "trained-weights (its traced program, XLA's products)"],
)  # fmt: skip
def test_a_miscompiled_operation_stops_the_study(tmp_path, capsys, monkeypatch, argv, route,
                                                 plant):  # fmt: skip
    """A miscompile planted in XLA itself (tanh's or max's lowering 1% off: the studies'
    activations) stops the study at its self-check, by either route (op by op; a variant's traced
    program evaluated equation by equation), in one line naming the point; NumPy's
    evaluation does not share the compiler's error."""
    out = tmp_path / "s"
    _miscompile(monkeypatch, *plant)
    try:
        code = main(["--compile-cache", "off", "study", *argv, "--out", str(out), "--no-progress"])
    finally:
        monkeypatch.undo()
        jax.clear_caches()
    assert code == 3
    text = capsys.readouterr().err.strip()
    assert len(text.splitlines()) == 1 and "differs from its compiled result" in text
    assert route in text
    assert not (out / "results.json").exists()


def test_numpy_false_runs_xlas_operations_one_by_one(tmp_path):
    """`numpy=False`: every operation compiled on its own by XLA (the route a float32 point
    whose round-off NumPy's kernels would outgrow asks for): the record counts nothing and
    the summary says nothing of NumPy; by default the record counts NumPy's operations."""
    specs = [{"i": i} for i in range(3)]
    run = StudyRunner("demo", tmp_path / "d", {"seed": 1}, progress=False)

    def point(spec):
        return {"y": float(jnp.tanh(jnp.arange(4.0) * spec["i"]).sum())}

    run.run_points(specs, point, numpy=False)
    assert run.self_checks[-1]["agrees"] and "primitives" not in run.self_checks[-1]
    run.run_points(specs, point)
    assert run.self_checks[-1]["primitives"]["numpy"] >= 2
    line = summary_module._by_numpy(run.self_checks[-1]["primitives"])
    assert "operations by NumPy" in line and summary_module._by_numpy(None) == ""
    run.close()
