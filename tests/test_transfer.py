"""Learning-rate transfer of a Transformer (issue 49, item 4): the nonlinear fraction
against an independent linearisation, the drift verdict on curves of known drift (and on
contradicting ones), and the study end to end."""

import math

import jax
import numpy as np
import pytest

from meanfield.diagnostics.laziness import nonlinear_fractions
from meanfield.models.transformer import Transformer


def _model():
    return Transformer(vocab=11, context=5, width=8, depth=3, heads=2, expansion=2,
                       parametrisation="completep", base_width=4, init_std=0.4)  # fmt: skip


def test_a_change_of_the_output_biases_is_linear():
    """Moving only the branches' output biases moves each branch exactly as its
    linearisation: fraction 0."""
    model = _model()
    p0 = model.init(jax.random.key(0))
    p1 = jax.tree.map(lambda a: a, p0)
    p1["attention"]["biases"]["o"] = p0["attention"]["biases"]["o"] + 0.3
    p1["mlp"]["biases"]["out"] = p0["mlp"]["biases"]["out"] - 0.2
    tokens = jax.random.randint(jax.random.key(1), (3, 5), 0, 11)
    out = nonlinear_fractions(model, p0, p1, tokens)
    np.testing.assert_allclose(out["attention"], 0.0, atol=1e-12)
    np.testing.assert_allclose(out["mlp"], 0.0, atol=1e-12)


def test_fraction_against_a_finite_difference_linearisation():
    """Every layer's fraction against the same quantity with the linearisation taken by a
    central finite difference, the branch evaluated by its block at the input read from
    a second, independent forward pass."""
    model = _model()
    p0 = model.init(jax.random.key(2))
    leaves, tree = jax.tree.flatten(p0)
    keys = jax.random.split(jax.random.key(3), len(leaves))
    p1 = jax.tree.unflatten(
        tree, [w + 0.2 * jax.random.normal(k, w.shape) for w, k in zip(leaves, keys, strict=True)]
    )
    tokens = jax.random.randint(jax.random.key(4), (2, 5), 0, 11)
    got = nonlinear_fractions(model, p0, p1, tokens)
    attn, mlp = model.branches(5)
    eps = 1e-5
    for branch, block in (("attention", attn), ("mlp", mlp)):
        for layer in range(model.depth):
            t0 = jax.tree.map(lambda a, i=layer: a[i], p0[branch])
            t1 = jax.tree.map(lambda a, i=layer: a[i], p1[branch])
            moved, nonlinear = [], []
            for seq in tokens:
                _, states = model.residual(p1, seq, capture=True)
                if branch == "attention":
                    u = model.embed(p1, seq) if layer == 0 else states["x_mlp"][layer - 1]
                else:
                    u = states["x_attention"][layer]
                h = u.reshape(-1)
                d = block(h, t1) - block(h, t0)
                plus = jax.tree.map(lambda a, b: a + eps * (b - a), t0, t1)
                minus = jax.tree.map(lambda a, b: a - eps * (b - a), t0, t1)
                lin = (block(h, plus) - block(h, minus)) / (2 * eps)
                moved.append(d)
                nonlinear.append(d - lin)
            expected = np.sqrt(np.mean(np.square(nonlinear))) / np.sqrt(np.mean(np.square(moved)))
            assert float(got[branch][layer]) == pytest.approx(expected, rel=1e-6), (branch, layer)


def test_verdicts_do_not_overlap_and_say_what_would_decide():
    """In order: within ±0.15 transfers (also when the interval excludes 0: a resolved
    drift smaller than the tolerance), then excluding 0 drifts, else undecided with the
    networks per size that would decide (the half-width falling as 1/sqrt(networks))."""
    from meanfield.stats.transfer import verdict

    assert verdict(0.01, [-0.1, 0.12], 8)["verdict"] == "transfers"
    small = verdict(0.07, [0.02, 0.12], 8)  # inside the band and excluding 0
    assert small["verdict"] == "transfers" and small["excludes_zero"] is True
    assert verdict(0.2, [0.05, 0.4], 8)["verdict"] == "drifts"
    assert verdict(-0.5, [-0.9, -0.2], 8)["verdict"] == "drifts"
    # holds 0, wider than the band: a drift of -0.05 needs the half-width under 0.10,
    # from 0.25 now: 8 (0.25 / 0.10)^2 = 50 networks per size
    wide = verdict(-0.05, [-0.3, 0.2], 8)
    assert wide["verdict"] == "undecided" and wide["networks_to_decide"] == 50
    # beyond the band but holding 0: more networks would show the drift (|drift| > h')
    beyond = verdict(0.2, [-0.04, 0.44], 8)
    assert beyond["verdict"] == "undecided"
    assert beyond["networks_to_decide"] == math.ceil(8 * (0.24 / 0.2) ** 2)
    # at the band's edge nothing finite decides; without an interval nothing is said
    assert verdict(0.149, [-0.2, 0.5], 8)["networks_to_decide"] is None
    assert verdict(None, None, 8) == {
        "verdict": "undecided",
        "band": 0.15,
        "excludes_zero": None,
        "networks_to_decide": None,
    }


def test_the_drift_interval_is_a_bootstrap_over_each_sizes_networks():
    """The interval from each size's bootstrap variance of log lr*, recomputed here with a
    plain loop over the same resampled networks (the same generator stream), and the
    vectorised lr* against `optimal_lr` row by row."""
    from scipy import stats

    from meanfield.stats import transfer as T

    rng = np.random.default_rng(3)
    lrs = [1e-3 * 2.0 ** (k / 2) for k in range(10)]
    sizes = [2, 4, 8, 16]
    curves = [np.log(np.asarray(p["final_loss"])) for p in _points(0.2, sizes, lrs, 6, rng)]
    got = T.drift_interval(lrs, curves, np.log(sizes), seed=5, replicates=300)
    draw = np.random.default_rng([5, 73])
    optima = np.empty((300, 4))
    for i, c in enumerate(curves):
        picks = draw.integers(0, 6, size=(300, 6))
        for r in range(300):
            optima[r, i] = T.optimal_lr(lrs, c[:, picks[r]].mean(axis=1)) or np.nan
    usable = np.all(np.isfinite(optima), axis=1)  # a replicate with lr* on an edge is left out
    logs = np.log(sizes)
    c = (logs - logs.mean()) / np.sum((logs - logs.mean()) ** 2)
    var = np.array([np.var(np.log(optima[usable, i]), ddof=1) * 6 / 5 for i in range(4)])
    se = math.sqrt(np.sum(c**2 * var))
    dof = np.sum(c**2 * var) ** 2 / np.sum((c**2 * var) ** 2 / 5)
    centre = np.polyfit(logs, np.log([T.optimal_lr(lrs, cv.mean(axis=1)) for cv in curves]), 1)[0]
    q = stats.t.ppf(0.975, dof)
    np.testing.assert_allclose(got["ci95"], [centre - q * se, centre + q * se], rtol=1e-10)
    assert got["se"] == pytest.approx(se, rel=1e-10) and got["dof"] == pytest.approx(dof)
    assert got["unresolved_share"] == pytest.approx(1 - usable.mean()) and usable.mean() > 0.9
    rows = np.log(np.abs(rng.normal(size=(20, 10)))) + (np.log(lrs) - np.log(0.004)) ** 2
    vector = T.optimal_lrs(lrs, rows)
    plain = [T.optimal_lr(lrs, r) for r in rows]  # (a row by itself, through the same code)
    for v, p, r in zip(vector, plain, rows, strict=True):
        j = int(np.argmin(r))
        if j in (0, 9):
            assert np.isnan(v) and p is None
        else:
            a, b, _ = np.polyfit(np.log(lrs[j - 1 : j + 2]), r[j - 1 : j + 2], 2)
            x = -b / (2 * a) if a > 0 else np.log(lrs[j])
            x = min(max(x, np.log(lrs[j - 1])), np.log(lrs[j + 1]))
            assert v == pytest.approx(np.exp(x), rel=1e-9) and p == pytest.approx(v, rel=1e-12)


def _points(drift, sizes, lrs, seeds, rng, line="depth", name="t", budget_drifts=()):
    x = np.log(lrs)

    def losses(d, L):
        centre = d * math.log(L) + math.log(0.01)
        logs = 0.3 * (x[:, None] - centre) ** 2 + 1.0 + rng.normal(0, 0.01, (len(lrs), seeds))
        return np.exp(logs)

    pts = []
    for L in sizes:
        loss = losses(drift, L)
        pts.append({
            "line": line, "parametrisation": name, "depth": L, "width": 32,
            "final_loss": loss.tolist(), "initial_loss": np.full_like(loss, 1e3).tolist(),
            "nonlinear_attention": np.full_like(loss, 0.5 * L**-0.5).tolist(),
            "nonlinear_mlp": (0.3 * np.exp(rng.normal(0, 0.02, loss.shape))).tolist(),
        })  # fmt: skip
        if budget_drifts:
            pts[-1]["budget_loss"] = [losses(d, L).tolist() for d in budget_drifts]
    return pts


def test_the_drift_after_each_budget_is_its_own():
    """Held-out losses after 25 and 50 steps whose lr* does not move and after 100 that
    drifts as L^-1/2: each budget's drift and verdict from its own losses, the last the
    line's own."""
    from meanfield.studies.transfer import study as S

    rng = np.random.default_rng(2)
    lrs = [1e-3 * 2.0 ** (k / 2) for k in range(-2, 14)]
    sizes = [2, 4, 8, 16]
    cfg = {"lrs": lrs, "parametrisations": ["t"], "width_parametrisations": [],
           "depths": sizes, "widths": [], "seed": 0, "steps": 100, "budgets": [25, 50]}  # fmt: skip
    (line,) = S._lines(cfg, _points(-0.5, sizes, lrs, 4, rng, budget_drifts=(0.0, 0.0)))
    got = [(b["steps"], round(b["drift_exponent"], 1), b["verdict"]) for b in line["budgets"]]
    assert got == [(25, 0.0, "transfers"), (50, 0.0, "transfers"), (100, -0.5, "drifts")]
    assert line["budgets"][-1]["drift_ci95"] == line["drift_ci95"]
    assert S._headline([line])[1].startswith("  the same drift after 25 steps -0.00 [")


@pytest.mark.parametrize("drift, expected", [(0.0, "transfers"), (-0.5, "drifts")])
def test_lines_on_curves_of_known_drift(drift, expected):
    """Curves whose minimum sits at lr* = 0.01 · L^drift: the drift recovered, its verdict
    computed from its interval (a contradicting drift gives the other verdict); the
    nonlinear fraction's slope recovered (−½ for one branch, 0 for the other)."""
    from meanfield.studies.transfer import study as S

    rng = np.random.default_rng(1)
    lrs = [1e-3 * 2.0 ** (k / 2) for k in range(-2, 14)]
    sizes = [2, 4, 8, 16]
    cfg = {"lrs": lrs, "parametrisations": ["t"], "width_parametrisations": [],
           "depths": sizes, "widths": [], "seed": 0}  # fmt: skip
    (line,) = S._lines(cfg, _points(drift, sizes, lrs, 4, rng))
    assert line["drift_exponent"] == pytest.approx(drift, abs=0.05)
    assert line["verdict"] == expected
    assert line["laziness"]["attention"]["slope"] == pytest.approx(-0.5, abs=1e-9)
    assert line["laziness"]["mlp"]["slope"] == pytest.approx(0.0, abs=0.05)
    head = S._headline([line])[0]
    assert f"({expected}: " in head and "nonlinear fraction against depth: attention -0.50" in head


def test_the_laziness_fit_names_what_it_leaves_out():
    """Issue 74: networks whose nonlinear fraction is missing (None) or <= 0 are left out of
    the log-log fit and named per depth; the depth whose lr* chose the rate is recorded."""
    from meanfield.studies.transfer import study as S

    rng = np.random.default_rng(3)
    lrs = [1e-3 * 2.0 ** (k / 2) for k in range(-2, 14)]
    sizes = [2, 4, 8, 16]
    cfg = {"lrs": lrs, "parametrisations": ["t"], "width_parametrisations": [],
           "depths": sizes, "widths": [], "seed": 0}  # fmt: skip
    pts = _points(0.0, sizes, lrs, 4, rng)
    j = S._nearest(lrs, 0.01)
    for p in pts:
        if p["depth"] == 4:  # two networks without a fraction at the laziness rate
            p["nonlinear_mlp"][j][0] = None
            p["nonlinear_mlp"][j][1] = 0.0
    (line,) = S._lines(cfg, pts)
    lazy = line["laziness"]
    assert lazy["lr_from_L"] == 2 and lazy["lr"] == lrs[j]
    assert lazy["mlp"]["left_out"] == [{"L": 4, "networks": 2, "why": "fraction missing or <= 0"}]
    assert lazy["attention"]["left_out"] == []


def test_an_exploded_run_counts_at_its_initial_loss():
    from meanfield.studies.transfer.study import log_losses

    p = {"final_loss": [[1.0, None], [5.0, 0.5]], "initial_loss": [[2.0, 2.0], [2.0, 2.0]]}
    np.testing.assert_allclose(log_losses(p), np.log([[1.0, 2.0], [2.0, 0.5]]))


TINY = dict(
    depths=[1, 2, 4], width=8, widths=[8, 16, 32], depth=1, steps=3, seeds=2,
    lrs=[0.001, 0.01, 0.1], batch=2, context=4, heads=1, base_width=8, base_depth=1,
    parametrisations="mup,completep", width_parametrisations="mup", no_progress=True,
)  # fmt: skip


def test_study_end_to_end(tmp_path, self_checked):
    import json

    from meanfield.cli import main
    from meanfield.studies import StudyInputError, run_study

    out = tmp_path / "tr"
    res = run_study("transfer", out=str(out), **TINY)
    self_checked(res)
    assert len(res["points"]) == 2 * 3 + 3
    assert [(ln["line"], ln["parametrisation"]) for ln in res["lines"]] == [
        ("depth", "mup"),
        ("depth", "completep"),
        ("width", "mup"),
    ]
    for p in res["points"]:
        assert np.shape(p["final_loss"]) == (3, 2) and np.shape(p["nonlinear_mlp"]) == (3, 2)
    for ln in res["lines"]:
        assert ln["verdict"] in ("transfers", "drifts", "undecided")
        assert len(ln["optimal_lr"]) == 3
    tables = [h for h in res["headline"] if not h.startswith("  ")]  # and a budgets line each
    assert len(tables) == 3 and len(res["headline"]) == 6
    for name in ("transfer_depth.png", "transfer_width.png", "laziness.png"):
        assert (out / name).stat().st_size > 10_000
        (out / name).unlink()
    assert main(["plot", str(out)]) == 0
    assert (out / "laziness.png").exists()
    assert json.loads((out / "results.json").read_text())["study"] == "transfer"
    for bad, match in (
        (dict(depths=[1, 2]), "^--depths: a drift needs at least three sizes"),
        (dict(lrs=[0.01, 0.1]), "^--lrs: an optimum needs at least three rates"),
        (dict(lrs=[0.1, 1, 100]), "^--lrs: at most 10"),
        (dict(width_parametrisations="nope"), "^--width-parametrisations: 'nope' is not one of"),
        (dict(seeds=1), "^--seeds: "),
    ):
        target = tmp_path / "refused"
        with pytest.raises(StudyInputError, match=match):
            run_study("transfer", out=str(target), **{**TINY, **bad})
        assert not target.exists()
