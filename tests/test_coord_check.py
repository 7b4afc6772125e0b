"""The coordinate check (issue 49): its measurements against a hand-made update, its
slopes and verdicts on draws of known exponent (and on contradicting ones), and its
predicted slopes read from the tables."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from meanfield.diagnostics.coord_check import (
    QUANTITIES,
    band_verdict,
    coordinates,
    predicted_slopes,
    slope_fits,
)
from meanfield.models.transformer import Transformer
from meanfield.parametrisation import COMPLETEP, DEPTH_MUP, MUP, STANDARD


def test_coordinates_of_a_hand_made_update():
    """Moving only W_o of layer 1 by c·I changes `update/o` at layer 1 to c·RMS(its
    input), leaves every other update 0, and the stream changes only from layer 1's
    attention branch on (by β c y there)."""
    model = Transformer(vocab=13, context=6, width=8, depth=3, heads=2, base_width=8,
                        init_std=0.3)  # fmt: skip
    p0 = model.init(jax.random.key(0))
    c = 0.25
    p1 = jax.tree.map(lambda a: a, p0)
    p1["attention"]["weights"]["o"] = p0["attention"]["weights"]["o"].at[1].add(c * jnp.eye(8))
    tokens = jax.random.randint(jax.random.key(1), (4, 6), 0, 13)
    out = coordinates(model, p0, p1, tokens)
    assert set(out) == set(QUANTITIES)
    _, states = jax.vmap(lambda t: model.residual(p1, t, capture=True))(tokens)
    y = states["inputs"]["attention"]["o"][:, 1]  # (B, T, N): layer 1's input of W_o
    np.testing.assert_allclose(
        out["update/o"][1], c * np.sqrt(np.mean(np.asarray(y) ** 2)), rtol=1e-12
    )
    np.testing.assert_allclose(np.asarray(out["update/o"])[[0, 2]], 0.0, atol=0)
    for q in ("update/q", "update/k", "update/v", "update/in", "update/out"):
        np.testing.assert_allclose(out[q], 0.0, atol=0)
    assert float(out["update/embedding"]) == 0.0 and float(out["update/unembedding"]) == 0.0
    np.testing.assert_allclose(out["change/attention"][0], 0.0, atol=0)
    expected = c * model.branch_multiplier * np.sqrt(np.mean(np.asarray(y) ** 2))
    np.testing.assert_allclose(out["change/attention"][1], expected, rtol=1e-12)
    assert out["change/mlp"][1] > 0 and out["change/logits"] > 0


def _draws(sizes, exponent, seeds, noise, key):
    rng = np.random.default_rng(key)
    return [np.exp(exponent * np.log(n) + noise * rng.standard_normal(seeds)) for n in sizes]


def test_slopes_and_verdicts_on_draws_of_known_exponent():
    sizes = [32, 64, 128, 256]
    draws = {
        "activation/attention": _draws(sizes, 0.0, 16, 0.02, 1),  # flat
        "activation/mlp": _draws(sizes, 0.5, 16, 0.02, 2),  # grows: contradicts flatness
        "update/q": _draws(sizes, 0.08, 4, 0.3, 3),  # noisy: undecided
    }
    predicted = {"activation/attention": 0.0, "activation/mlp": 0.0, "update/q": 0.0}
    fits = slope_fits(sizes, draws, against="width", predicted=predicted)
    assert fits["activation/attention"]["flat"] == "inside"
    assert fits["activation/mlp"]["flat"] == "outside"
    assert fits["activation/mlp"]["slope"] == pytest.approx(0.5, abs=0.02)
    assert fits["activation/mlp"]["as_predicted"] == "outside"
    assert fits["update/q"]["flat"] == "undecided"


def test_band_verdict():
    assert band_verdict([-0.05, 0.08], 0.0) == "inside"
    assert band_verdict([0.12, 0.5], 0.0) == "outside"
    assert band_verdict([-0.9, -0.2], 0.0) == "outside"
    assert band_verdict([0.05, 0.2], 0.0) == "undecided"
    assert band_verdict([0.45, 0.55], 0.5) == "inside"
    assert band_verdict(None, 0.0) == "undecided"
    assert band_verdict([float("nan"), 0.1], 0.0) == "undecided"


def test_predicted_slopes_from_the_tables():
    """μP is flat in width; SP grows (activations as N, updates as N); CompleteP and
    depth-μP keep the stream's change flat in depth, SP's grows as L; the depth slope of
    a hidden update is the learning rate's depth exponent."""
    mup = predicted_slopes(MUP, "width")
    assert all(v == 0.0 for v in mup.values())
    sp = predicted_slopes(STANDARD, "width")
    assert sp["activation/attention"] == 1.0 and sp["update/q"] == 1.0
    assert sp["update/embedding"] == 0.0
    for table in (COMPLETEP, DEPTH_MUP):
        assert predicted_slopes(table, "width") == mup
    cp, dm, spd = (predicted_slopes(t, "depth") for t in (COMPLETEP, DEPTH_MUP, STANDARD))
    assert cp["change/mlp"] == 0.0 and dm["change/mlp"] == 0.0 and spd["change/mlp"] == 1.0
    assert cp["update/q"] == 0.0 and dm["update/q"] == -0.5
    assert spd["activation/attention"] == 0.5 and cp["activation/attention"] == 0.0
    with pytest.raises(ValueError, match="against must be 'width' or 'depth'"):
        predicted_slopes(MUP, "heads")


# --- the study ------------------------------------------------------------------------------

TINY = dict(
    widths=[8, 16, 32], depth=1, depths=[1, 2, 4], width=8, steps=2, seeds=2, batch=2,
    context=4, heads=1, base_width=8, base_depth=1, no_progress=True,
)  # fmt: skip


def test_study_end_to_end(tmp_path, self_checked):
    """A tiny check of two tables, one a user's file: every point, line and fit written,
    figures drawn and redrawn from results.json, the self-check agreeing; bad options
    refused in one line naming them, before any folder."""
    import json

    from meanfield.cli import main
    from meanfield.studies import StudyInputError, run_study

    user = tmp_path / "tables.py"
    user.write_text(
        "from meanfield.parametrisation import COMPLETEP\n"
        "MINE = COMPLETEP.replace(name='alpha-0.75', alpha=0.75)\n"
        "NOT_A_TABLE = 3\n"
    )
    out = tmp_path / "cc"
    res = run_study("coord-check", out=str(out), parametrisations=f"mup,{user}:MINE", **TINY)
    self_checked(res)
    assert len(res["points"]) == 2 * 5  # two tables, 3 + 3 sizes meeting at (8, 1)
    assert {(ln["parametrisation"], ln["against"]) for ln in res["lines"]} == {
        (t, a) for t in ("mup", "alpha-0.75") for a in ("width", "depth")
    }
    for p in res["points"]:
        for q, rows in p["sizes"].items():
            assert len(rows) == 2 and all(len(r) == 3 for r in rows), q  # seeds, steps + 1
    line = next(ln for ln in res["lines"] if ln["parametrisation"] == "mup")
    assert line["against"] == "width" and line["claims_flat"]
    assert res["config"]["tables"][1]["alpha"] == 0.75
    assert len(res["headline"]) == 4
    for name in ("coord_check_width.png", "coord_check_depth.png", "coord_check_steps.png"):
        assert (out / name).stat().st_size > 10_000
        (out / name).unlink()
    assert main(["plot", str(out)]) == 0
    assert (out / "coord_check_width.png").exists()
    assert json.loads((out / "results.json").read_text())["study"] == "coord-check"
    for bad, match in (
        (dict(widths=[8, 16]), "^--widths: a slope needs at least three sizes"),
        (dict(depths=[4, 2, 1]), "^--depths: values must be strictly increasing"),
        (dict(parametrisations="mu-p"), "^--parametrisations: 'mu-p' is not one of"),
        (
            dict(parametrisations=f"{user}:NOT_A_TABLE"),
            "^--parametrisations: .* is a int, not a Parametrisation",
        ),
        (dict(heads=3), "^--heads: 3 does not divide the width 8"),
        (dict(seeds=1), "^--seeds: "),
        (dict(data=str(tmp_path / "missing.txt")), "^--data: "),
    ):
        target = tmp_path / "refused"
        with pytest.raises(StudyInputError, match=match):
            run_study("coord-check", out=str(target), **{**TINY, **bad})
        assert not target.exists()


def test_lines_and_headline_on_contradicting_points():
    """The verdicts are computed from the numbers: points whose activations grow as
    N^0.5 under a table that claims flatness are reported outside the band and off, and
    flat ones inside."""
    from meanfield.studies import coord_check as S

    cfg = {"widths": [32, 64, 128, 256], "depth": 2, "depths": [2, 4, 8], "width": 32,
           "seed": 0}  # fmt: skip
    rng = np.random.default_rng(0)
    points = []
    for N, L in S._sizes(cfg):
        sizes = {}
        for q in S.C.QUANTITIES:
            grow = 0.5 if q == "activation/mlp" else 0.0
            vals = np.exp(grow * np.log(N) + 0.01 * rng.standard_normal(8))
            sizes[q] = [[1.0, float(v)] for v in vals]
        points.append({"parametrisation": "mup", "width": N, "depth": L, "sizes": sizes})
    lines = S._lines(cfg, {"mup": MUP}, points)
    width = next(ln for ln in lines if ln["against"] == "width")
    assert width["fits"]["activation/mlp"]["flat"] == "outside"
    assert width["fits"]["activation/attention"]["flat"] == "inside"
    assert width["off"] == ["activation/mlp"]
    assert width["largest_activation_deviation"] == pytest.approx(0.5, abs=0.02)
    head = S._headline(lines)[0]
    assert "mlp +0.50" in head and "5 of 6 activations and changes flat" in head
    assert "1 of 14 quantities 0.4 or more from flat (activation/mlp)" in head


def test_an_exploded_draw_is_reported_and_left_out(monkeypatch):
    """A draw whose loss is not finite is counted, its sizes written as null, and the
    point's other draws kept (never averaged into a NaN)."""
    from types import SimpleNamespace

    from meanfield.studies import coord_check as S

    steps, seeds, L = 2, 3, 2

    def fake_program(model, steps_, batch, context):
        def run(keys, lr, train, validation):
            losses = np.ones((seeds, steps + 1))
            losses[1, 1] = np.nan
            coords = {
                q: np.full((seeds, steps + 1, L), 2.0) if q.split("/")[1] in
                ("attention", "mlp", "q", "k", "v", "o", "in", "out")
                else np.full((seeds, steps + 1), 2.0)
                for q in S.C.QUANTITIES
            }  # fmt: skip
            return losses, coords

        return run

    monkeypatch.setattr(S, "_program", fake_program)
    cfg = {**S.PRESETS["quick"], "steps": steps, "seeds": seeds, "init_std": 0.02}
    text = SimpleNamespace(train=np.zeros(64, np.uint8), validation=np.zeros(64, np.uint8))
    out = S._point(cfg, MUP, 32, L, jax.random.key(0), text)
    assert out["exploded"] == 1
    assert out["sizes"]["activation/mlp"][1] == [None] * (steps + 1)
    assert out["sizes"]["activation/mlp"][0] == [2.0] * (steps + 1)
    assert out["per_layer"]["update/q"][1] == [None] * L
