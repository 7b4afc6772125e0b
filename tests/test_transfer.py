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


def test_verdict():
    from meanfield.studies.transfer import verdict

    assert verdict([-0.1, 0.12]) == "transfers"
    assert verdict([0.05, 0.4]) == "drifts"
    assert verdict([-0.9, -0.2]) == "drifts"
    assert verdict([-0.3, 0.2]) == "undecided"
    assert verdict(None) == "undecided"


def _points(drift, sizes, lrs, seeds, rng, line="depth", name="t"):
    x = np.log(lrs)
    pts = []
    for L in sizes:
        centre = drift * math.log(L) + math.log(0.01)
        logs = 0.3 * (x[:, None] - centre) ** 2 + 1.0 + rng.normal(0, 0.01, (len(lrs), seeds))
        loss = np.exp(logs)
        pts.append({
            "line": line, "parametrisation": name, "depth": L, "width": 32,
            "final_loss": loss.tolist(), "initial_loss": np.full_like(loss, 1e3).tolist(),
            "nonlinear_attention": np.full_like(loss, 0.5 * L**-0.5).tolist(),
            "nonlinear_mlp": (0.3 * np.exp(rng.normal(0, 0.02, loss.shape))).tolist(),
        })  # fmt: skip
    return pts


@pytest.mark.parametrize("drift, expected", [(0.0, "transfers"), (-0.5, "drifts")])
def test_lines_on_curves_of_known_drift(drift, expected):
    """Curves whose minimum sits at lr* = 0.01 · L^drift: the drift recovered, its verdict
    computed from its interval (a contradicting drift gives the other verdict); the
    nonlinear fraction's slope recovered (−½ for one branch, 0 for the other)."""
    from meanfield.studies import transfer as S

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
    assert f"({expected})" in head and "nonlinear fraction against depth: attention -0.50" in head


def test_an_exploded_run_counts_at_its_initial_loss():
    from meanfield.studies.transfer import log_losses

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
    assert len(res["headline"]) == 3
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
