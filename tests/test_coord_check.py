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
from meanfield.parametrisation import (
    COMPLETEP,
    COMPLETEP_SGD,
    DEPTH_MUP,
    DEPTH_MUP_SGD,
    MUP,
    MUP_SGD,
    RESNET_PARAMETRISATIONS,
    STANDARD,
    STANDARD_SGD,
    ResNetParametrisation,
)


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


def test_predicted_slopes_of_the_sgd_tables():
    """SGD's steps carry the gradient's size: μP with SGD is flat in width but for the
    query and key (−½: their logits' backward signal is a sum of uncorrelated terms at
    initialisation); SP with SGD grows as N; in depth the hidden learning rate's
    `m_L^{2α−1}` keeps CompleteP flat and depth-μP's updates at `L^{-1/2}`."""
    mup = predicted_slopes(MUP_SGD, "width")
    assert {q for q, v in mup.items() if v != 0.0} == {"update/q", "update/k"}
    assert mup["update/q"] == mup["update/k"] == -0.5
    assert predicted_slopes(COMPLETEP_SGD, "width") == mup
    sp = predicted_slopes(STANDARD_SGD, "width")
    assert sp["update/out"] == 1.0 and sp["update/unembedding"] == 1.0
    assert sp["change/logits"] == 1.0 and sp["update/embedding"] == 0.0
    cp = predicted_slopes(COMPLETEP_SGD, "depth")
    assert all(v == 0.0 for v in cp.values())
    dm = predicted_slopes(DEPTH_MUP_SGD, "depth")
    assert dm["update/in"] == -0.5 and dm["change/mlp"] == 0.0
    # the Adam tables' q and k follow the other matrices
    assert predicted_slopes(MUP, "width")["update/q"] == 0.0


# --- a ResNet of unit blocks -----------------------------------------------------------------


def test_unit_coordinates_against_a_plain_loop():
    """Every coordinate of a ResNet of 2LP units against a loop over inputs, layers and
    units written out here (numpy, float64)."""
    from meanfield.blocks.two_layer import TwoLayerBlock, TwoLayerParams
    from meanfield.diagnostics import unit_coord_check as U

    L, M, d, n, scale = 3, 4, 2, 5, 0.3
    ks = jax.random.split(jax.random.key(1), 5)
    normal = [jax.random.normal(k, (L, M, d)) for k in ks[:4]]
    p0 = TwoLayerParams(u=normal[0], v=normal[1])
    p1 = TwoLayerParams(u=p0.u + 0.1 * normal[2], v=p0.v + 0.1 * normal[3])
    xs = jax.random.normal(ks[4], (n, d))
    block = TwoLayerBlock("tanh")
    h0 = U.network(block, p0, scale).states(xs)
    h1 = U.network(block, p1, scale).states(xs)
    got = U.coordinates(block, scale, p0, p1, h0, h1)

    def phi(h, p, l, j):
        return np.asarray(p.v[l, j]) * np.tanh(np.asarray(p.u[l, j]) @ h)

    def states(p):
        out = np.zeros((n, L + 1, d))
        for i in range(n):
            h = np.asarray(xs[i])
            out[i, 0] = h
            for l in range(L):
                h = h + scale * sum(phi(h, p, l, j) for j in range(M))
                out[i, l + 1] = h
        return out

    s0, s1 = states(p0), states(p1)
    np.testing.assert_allclose(h1, s1, rtol=1e-12)
    rms = lambda a: np.sqrt(np.mean(np.square(a)))  # noqa: E731
    for l in range(L):
        units_t = [phi(s1[i, l], p1, l, j) for i in range(n) for j in range(M)]
        moved = [phi(s1[i, l], p1, l, j) - phi(s1[i, l], p0, l, j) for i in range(n)
                 for j in range(M)]  # fmt: skip
        per_layer = [scale * sum(phi(s1[i, l], p1, l, j) - phi(s1[i, l], p0, l, j)
                                 for j in range(M)) for i in range(n)]  # fmt: skip
        expected = {
            "activation/state": rms(s1[:, l + 1]),
            "activation/unit": rms(units_t),
            "change/state": rms(s1[:, l + 1] - s0[:, l + 1]),
            "update/unit": rms(moved),
            "update/layer": rms(per_layer),
        }
        for q, v in expected.items():
            assert float(got[q][l]) == pytest.approx(v, rel=1e-12), (q, l)
    assert float(got["change/output"]) == pytest.approx(rms(s1[:, -1] - s0[:, -1]), rel=1e-12)


def test_unit_predicted_slopes():
    """The first-order exponents of the ResNet tables, written out: a unit moves by
    η α, a layer by M α η α, the state by L of those."""
    from meanfield.diagnostics.unit_coord_check import predicted_slopes as unit_slopes

    expected = {  # (against, table): (state, unit update, layer update, change)
        ("width", "mean-ode"): (0, 0, 0, 0),
        ("depth", "mean-ode"): (0, 0, -1, 0),
        ("width", "depth-mup"): (0, 0, 0, 0),
        ("depth", "depth-mup"): (0, -0.5, -1, 0),
        ("width", "standard"): (0, 0, 0, 0),
        ("depth", "standard"): (0.5, 0, 0, 1),
        ("width", "critical"): (0, -0.5, 0, 0),
        ("depth", "critical"): (0, -0.5, -1, 0),
    }
    for (against, name), (state, unit, layer, change) in expected.items():
        got = unit_slopes(RESNET_PARAMETRISATIONS[name], against)
        assert got == {
            "activation/state": state, "activation/unit": 0.0, "change/state": change,
            "change/output": change, "update/unit": unit, "update/layer": layer,
        }, (against, name)  # fmt: skip
    mine = ResNetParametrisation("mine", depth=0.75, width=1.0, lr_depth=0.5, lr_width=1.0)
    got = unit_slopes(mine, "depth")
    assert got["update/unit"] == -0.25 and got["change/state"] == 0.0
    assert got["update/layer"] == -1.0 and got["activation/state"] == 0.0
    # a block not centred in its parameters adds its mean coherently: L^{1-γ} M^{1-μ}
    dm, crit = RESNET_PARAMETRISATIONS["depth-mup"], RESNET_PARAMETRISATIONS["critical"]
    assert unit_slopes(dm, "depth", centred=False)["activation/state"] == 0.5
    assert unit_slopes(crit, "width", centred=False)["activation/state"] == 0.5
    ode = RESNET_PARAMETRISATIONS["mean-ode"]
    assert unit_slopes(ode, "depth", centred=False)["activation/state"] == 0.0
    with pytest.raises(ValueError, match="against must be"):
        unit_slopes(mine, "heads")


def test_is_centred_tells_a_centred_block_from_one_that_is_not():
    """The 2LP with v ~ N(0, I) is centred (E_z φ = 0), and stays so with v shifted
    (tanh is odd and u symmetric); the sine unit of the user blocks, whose amplitude has
    mean (1, 0.7), is not; nor is the 2LP with both u and v shifted."""
    import sys
    from pathlib import Path

    from meanfield.blocks.two_layer import TwoLayerBlock
    from meanfield.diagnostics.unit_coord_check import is_centred
    from meanfield.laws.unit import SamplerLaw, TwoLayerGaussianLaw

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))
    import user_blocks

    xs = jax.random.normal(jax.random.key(1), (32, 2))
    tanh = TwoLayerBlock("tanh")
    centred = TwoLayerGaussianLaw(2, sigma_u=0.7)
    assert is_centred(tanh, centred, xs)
    assert not is_centred(user_blocks.SineUnit(), user_blocks.sine_law(), xs)

    def shifted(key, du):
        z = centred.sample(key)
        return type(z)(u=z.u + du, v=z.v + 0.5)

    assert is_centred(tanh, SamplerLaw(lambda k: shifted(k, 0.0)), xs)
    assert not is_centred(tanh, SamplerLaw(lambda k: shifted(k, 0.5)), xs)
    with pytest.raises(ValueError, match="depth must be a finite number"):
        ResNetParametrisation("bad", depth=float("nan"), width=1.0)


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
    short = tmp_path / "short.txt"  # 200 bytes of lines that do not repeat
    short.write_text("".join(f"{i:03d} {'abcdefghij'[i % 10] * 5}{i * 7919 % 1000:03d}\n"
                             for i in range(15))[:200])  # fmt: skip
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
        # issue 75: a text too short for --context was a ValueError after the folder was made
        (dict(data=str(short), context=64), "^--data, --context: a window of --context 64"),
        (dict(eps=2.0), "^--eps: at most 1"),
        (dict(weight_decay=1e3), "^--weight-decay: at most 100"),
    ):
        target = tmp_path / "refused"
        with pytest.raises(StudyInputError, match=match):
            run_study("coord-check", out=str(target), **{**TINY, **bad})
        assert not target.exists()


def test_own_block_study_end_to_end(tmp_path, self_checked):
    """The check of a user's own unit block and law (a non-centred sine unit) under a
    built-in and a user's ResNet table: every point, line and figure, one compiled
    program per shape for both tables; the options of the other model refused in one
    line naming them, before any folder."""
    from pathlib import Path

    from meanfield.studies import StudyInputError, run_study

    user = Path(__file__).resolve().parents[1] / "notebooks" / "user_blocks.py"
    tables = tmp_path / "resnet_tables.py"
    tables.write_text(
        "from meanfield.parametrisation import ResNetParametrisation\n"
        "MINE = ResNetParametrisation('three-quarters', depth=0.75, width=1, lr_depth=0.5, "
        "lr_width=1)\n"
    )
    small = dict(widths=[2, 4, 8], depth=2, depths=[1, 2, 4], width=2, steps=1, seeds=2,
                 inputs=4, d=2, no_progress=True)  # fmt: skip
    own = dict(block=f"{user}:SineUnit", law=f"{user}:sine_law")
    out = tmp_path / "own"
    res = run_study("coord-check", out=str(out), parametrisations=f"mean-ode,{tables}:MINE",
                    **own, **small)  # fmt: skip
    self_checked(res)
    assert res["config"]["model"] == "resnet" and res["config"]["block"].endswith(":SineUnit")
    assert len(res["points"]) == 2 * 5
    for p in res["points"]:
        assert set(p["sizes"]) == {"activation/state", "activation/unit", "change/state",
                                   "change/output", "update/unit", "update/layer"}  # fmt: skip
        assert all(len(r) == 2 for r in p["sizes"]["update/unit"])  # steps + 1
    mine = next(ln for ln in res["lines"] if ln["parametrisation"] == "three-quarters"
                and ln["against"] == "depth")  # fmt: skip
    assert mine["fits"]["update/unit"]["predicted"] == -0.25
    assert len(res["headline"]) == 5 and "SineUnit" in res["headline"][0]
    assert res["config"]["centred"] is False and "not centred" in res["headline"][0]
    # one program per shape and number of steps, whatever the table (its scale and
    # learning rate are data)
    from meanfield.studies.coord_check import resnet as R

    program = R.programs(res["config"])
    assert program(2, 4, 1) is program(2, 4, 1) and program(2, 4, 1) is not program(2, 4, 2)
    for name in ("coord_check_width.png", "coord_check_depth.png", "coord_check_steps.png"):
        assert (out / name).stat().st_size > 10_000
    for bad, match in (
        (dict(batch=2, **own), "^--batch: a Transformer's option"),
        (dict(weight_decay=0.1, **own), "^--weight-decay: a Transformer's option"),
        (dict(model="transformer", **own),
         "^--block/--law/--d/--inputs: a ResNet of unit blocks' option"),
        (dict(model="resnet", parametrisations="completep"),
         "^--parametrisations: 'completep' is not one of"),
        (dict(d=3, **own), "^--block: "),
        (dict(block=f"{user}:nothing"), "^--block: "),
    ):  # fmt: skip
        target = tmp_path / "refused"
        with pytest.raises(StudyInputError, match=match):
            run_study("coord-check", out=str(target), **{**small, **bad})
        assert not target.exists()


def test_lines_and_headline_on_contradicting_points():
    """The verdicts are computed from the numbers: points whose activations grow as
    N^0.5 under a table that claims flatness are reported outside the band and off, and
    flat ones inside."""
    from meanfield.studies.coord_check import study as S

    cfg = {"widths": [32, 64, 128, 256], "depth": 2, "depths": [2, 4, 8], "width": 32,
           "seed": 0}  # fmt: skip
    rng = np.random.default_rng(0)
    points = []
    for N, L in S._sizes(cfg):
        sizes = {}
        for q in S.coord_check_diagnostics.QUANTITIES:
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


def test_resnet_lines_on_contradicting_points():
    """The same verdicts for a ResNet of units: a state growing as L^0.5 under the
    mean-ODE table (which claims depth flat) is outside the band and off, a unit update
    shrinking as L^-0.5 under depth-μP is as predicted, and flat quantities inside."""
    from meanfield.studies.coord_check import study as S

    cfg = {"widths": [8, 16, 32], "depth": 4, "depths": [4, 8, 16, 32], "width": 8,
           "seed": 0}  # fmt: skip
    rng = np.random.default_rng(1)
    grow = {"mean-ode": ("activation/state", 0.5), "depth-mup": ("update/unit", -0.5)}
    points = []
    for name, (moving, slope) in grow.items():
        for M, L in S._sizes(cfg):
            sizes = {}
            for q in S.unit_coord_check.QUANTITIES:
                e = slope if q == moving else (-1.0 if q == "update/layer" else 0.0)
                vals = np.exp(e * np.log(L) + 0.01 * rng.standard_normal(8))
                sizes[q] = [[1.0, float(v)] for v in vals]
            points.append({"parametrisation": name, "width": M, "depth": L, "sizes": sizes})
    tables = {n: RESNET_PARAMETRISATIONS[n] for n in grow}
    lines = {(ln["parametrisation"], ln["against"]): ln
             for ln in S._lines(cfg, tables, points, S.unit_coord_check)}  # fmt: skip
    ode = lines[("mean-ode", "depth")]
    assert ode["claims_flat"] and ode["fits"]["activation/state"]["flat"] == "outside"
    assert ode["off"] == ["activation/state", "update/layer"]
    assert ode["fits"]["update/layer"]["as_predicted"] == "inside"
    dm = lines[("depth-mup", "depth")]
    assert dm["fits"]["update/unit"]["as_predicted"] == "inside"
    assert dm["fits"]["update/unit"]["flat"] == "outside"
    assert dm["fits"]["change/state"]["flat"] == "inside"
    head = S._headline([ode], S.unit_coord_check)[0]
    assert "state +0.50" in head and "3 of 4 activations and changes flat" in head


def test_an_exploded_draw_is_reported_and_left_out(monkeypatch):
    """A draw whose loss is not finite is counted, its sizes written as null, and the
    point's other draws kept (never averaged into a NaN)."""
    from types import SimpleNamespace

    from meanfield.studies.coord_check import study as S

    steps, seeds, L = 2, 3, 2

    def fake_program(skeleton, steps_, batch, context, eps, weight_decay):
        def run(numbers, keys, lr, train, validation):
            losses = np.ones((seeds, steps + 1))
            losses[1, 1] = np.nan
            coords = {
                q: np.full((seeds, steps + 1, L), 2.0) if q.split("/")[1] in
                ("attention", "mlp", "q", "k", "v", "o", "in", "out")
                else np.full((seeds, steps + 1), 2.0)
                for q in S.coord_check_diagnostics.QUANTITIES
            }  # fmt: skip
            return losses, coords

        return run

    monkeypatch.setattr(S, "_program", fake_program)
    cfg = {**S.PRESETS["quick"], "steps": steps, "seeds": seeds, "init_std": 0.02,
           "eps": 1e-8, "weight_decay": 0.0}  # fmt: skip
    text = SimpleNamespace(train=np.zeros(64, np.uint8), validation=np.zeros(64, np.uint8))
    out = S._point(cfg, MUP, 32, L, jax.random.key(0), text)
    assert out["exploded"] == 1
    assert out["sizes"]["activation/mlp"][1] == [None] * (steps + 1)
    assert out["sizes"]["activation/mlp"][0] == [2.0] * (steps + 1)
    assert out["per_layer"]["update/q"][1] == [None] * L


def test_an_exploded_resnet_draw_is_reported_and_left_out():
    """A ResNet draw whose loss grows a million-fold (or is not finite) is counted and
    written as null; the other draws are kept."""
    from meanfield.harness.self_check import split_terms
    from meanfield.studies.coord_check import resnet as R

    steps, seeds, L = 2, 3, 4

    def program(L_, M_, steps_):
        def run(keys, scale, lr, xs, ys):
            losses = np.ones((seeds, steps + 1))
            losses[0, 2] = 1e7  # grew a million-fold
            losses[2, 1] = np.inf
            coords = {q: np.full((seeds, steps + 1) + ((L,) if q != "change/output" else ()),
                                 3.0) for q in R.unit_coord_check.QUANTITIES}  # fmt: skip
            return losses, coords

        return run

    cfg = {**R.PRESETS["quick"], "steps": steps, "seeds": seeds}
    out, _ = split_terms(R.point(cfg, program, R.RESNET_PARAMETRISATIONS["mean-ode"], 8, L,
                                 jax.random.key(0), (None, None)))  # fmt: skip
    assert out["exploded"] == 2
    assert out["sizes"]["activation/state"][0] == [None] * (steps + 1)
    assert out["sizes"]["activation/state"][1] == [3.0] * (steps + 1)
    assert out["per_layer"]["update/unit"][2] == [None] * L


def test_each_panel_states_what_the_table_predicts_for_what_it_plots():
    """Issue 77: a panel titled "(claims flat)" showed the per-layer updates whose
    prediction is −1. The title now says what the table predicts for the panel's own
    quantities: flat only where it predicts 0 for every one of them."""
    from meanfield.studies.coord_check.plot import _panel_claim

    predicted = {"activation/mlp": 0.0, "activation/attention": -0.0, "update/mlp": -1.0,
                 "update/qkv": -1.0, "change/mlp": 0.5, "change/logits": 0.0}  # fmt: skip
    line = {"fits": {q: {"predicted": v} for q, v in predicted.items()}}
    assert _panel_claim(line, ["activation/mlp", "activation/attention"]) == "predicted flat"
    assert _panel_claim(line, ["update/mlp", "update/qkv"]) == "predicted slope -1"
    assert _panel_claim(line, ["change/mlp", "change/logits"]) == "predicted slopes 0, 0.5"
    assert _panel_claim({"fits": {}}, ["x"]) == "no prediction"
