"""Points on disk are checked before a resume uses them: a point file that is truncated,
garbled, edited, copied from another seed, configuration or point is recomputed (and
said so), never used; a missing config.json beside points is refused."""

import json
import shutil

import numpy as np
import pytest

from meanfield.harness.runner import StudyRunner
from meanfield.studies import StudyInputError

SPECS = [{"L": 4}, {"L": 8}, {"L": 16}]


def compute(spec):
    return {"value": spec["L"] * 0.5, "draws": [spec["L"], spec["L"] + 1.25]}


def _run(out, *, seed=0, resume=False):
    runner = StudyRunner("toy", out, {"seed": seed, "seeds": 2}, resume=resume, progress=False)
    points = runner.run_points(SPECS, compute)
    ref = runner.artifact("reference", lambda: {"h": np.linspace(0, 1, 5) + seed})
    runner.finish({"points": points, "reference": ref["h"].tolist()})
    return json.loads((out / "results.json").read_text())


def _without_timing(body):
    return {k: v for k, v in body.items() if k != "timing"}


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("clean") / "out")


def _truncate(path, other):
    path.write_bytes(path.read_bytes()[:40])


def _garble(path, other):
    path.write_bytes(b"\xff\xfe{not json at all")


def _scale(path, other):
    record = json.loads(path.read_text())
    record["point"]["value"] *= 1000
    path.write_text(json.dumps(record))


def _null(path, other):
    record = json.loads(path.read_text())
    record["point"]["draws"] = [None, None]
    path.write_text(json.dumps(record))


def _other_seed(path, other):
    shutil.copy(other / "points" / path.name, path)


def _other_point(path, other):
    shutil.copy(path.parent / "L4.json", path)


def _old_format(path, other):
    record = json.loads(path.read_text())
    path.write_text(json.dumps({"point": record["point"], "seconds": record["seconds"]}))


CORRUPTIONS = [_truncate, _garble, _scale, _null, _other_seed, _other_point, _old_format]


@pytest.mark.parametrize("corrupt", CORRUPTIONS, ids=[c.__name__[1:] for c in CORRUPTIONS])
def test_a_bad_point_is_recomputed_not_used(tmp_path, capsys, clean, corrupt):
    out, other = tmp_path / "out", tmp_path / "other"
    _run(other, seed=1)
    _run(out)
    corrupt(out / "points" / "L8.json", other)
    capsys.readouterr()
    body = _run(out, resume=True)
    err = capsys.readouterr().err
    assert "points/L8.json" in err and "recomputed" in err, err
    assert _without_timing(body) == _without_timing(clean)
    assert body["timing"]["recomputed"] == 1
    assert list(body["timing"]["recomputed_points"]) == ["L8"]
    assert body["timing"]["loaded"] == ["L4", "L16", "reference"]


def test_a_bad_reference_artifact_is_recomputed(tmp_path, clean, capsys):
    out = tmp_path / "out"
    _run(out)
    path = out / "points" / "reference.npz"
    np.savez(path, h=np.zeros(5))  # a valid archive, other values
    body = _run(out, resume=True)
    assert "points/reference.npz" in capsys.readouterr().err
    assert _without_timing(body) == _without_timing(clean)
    assert body["timing"]["recomputed_points"].keys() == {"reference"}


def test_point_files_carry_config_hash_spec_seed_and_checksum(tmp_path):
    out = tmp_path / "out"
    _run(out)
    record = json.loads((out / "points" / "L8.json").read_text())
    assert record["spec"] == {"L": 8} and record["seed"] == 0
    assert len(record["config_sha256"]) == 64 and len(record["sha256"]) == 64
    assert record["point"] == {"L": 8, **compute({"L": 8})}


def test_points_without_config_json_are_refused(tmp_path):
    out = tmp_path / "out"
    _run(out)
    (out / "config.json").unlink()
    with pytest.raises(StudyInputError, match=r"^--resume: .* no config.json"):
        StudyRunner("toy", out, {"seed": 5, "seeds": 2}, resume=True, progress=False).open()


def test_a_garbled_config_json_is_refused_in_one_line(tmp_path):
    out = tmp_path / "out"
    _run(out)
    (out / "config.json").write_text("{garbled")
    with pytest.raises(StudyInputError, match=r"^--resume: .*config.json is unreadable"):
        StudyRunner("toy", out, {"seed": 0, "seeds": 2}, resume=True, progress=False).open()


def test_a_clean_resume_recomputes_nothing(tmp_path, clean):
    out = tmp_path / "out"
    _run(out)
    body = _run(out, resume=True)
    assert body["timing"]["recomputed"] == 0 and body["timing"]["computed"] == []
    assert _without_timing(body) == _without_timing(clean)
    assert not list(out.rglob("*.tmp"))


def test_api_refuses_non_finite_inputs():
    """NaN/inf in concrete inputs of the ResNet entry points: one-line errors naming them."""
    import jax.numpy as jnp
    import jax.random as jr
    import pytest

    import meanfield
    from meanfield.blocks.two_layer import TwoLayerBlock
    from meanfield.laws.unit import TwoLayerGaussianLaw

    net = meanfield.ResNet.sample(
        TwoLayerBlock("tanh"), TwoLayerGaussianLaw(2), L=3, M=2, scaling=0.1, key=jr.key(0)
    )
    xs = jnp.ones((2, 2))
    net.states(xs)  # finite: accepted
    with pytest.raises(ValueError, match="xs must be finite: 1 of its 4"):
        net.states(xs.at[0, 1].set(jnp.nan))
    with pytest.raises(ValueError, match="final must be finite"):
        net.adjoint(xs, jnp.full((2, 2), jnp.inf))


def test_fit_loglog_reports_dropped_points():
    from meanfield.stats.fits import fit_loglog

    fit = fit_loglog(
        [4, 8, 16, 32],
        [[1.0, 1.1], [0.0, 0.0], [0.25, 0.26], [1e9, 2e9]],
        quantity="e",
        against="L",
        n_boot=20,
    )
    reasons = {d["x"]: d["reason"] for d in fit["dropped"]}
    assert reasons == {8.0: "mean error <= 0 (no logarithm)", 32.0: "every draw exploded"}
    assert fit["n_points"] == 2
