"""The artifact cache (issue 78): the main job's reference limit computed once per
configuration and code, read back by a run of the same configuration in another folder,
never by another configuration or after the user's block was edited; a damaged entry
is not used; the cache off, or a folder it cannot use, said in one line."""

import json

import numpy as np
import pytest

from meanfield.cli import main
from meanfield.harness import cache
from meanfield.harness.runner import StudyRunner
from meanfield.studies import StudyInputError
from meanfield.studies.shared.own_block import content_digest


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(cache.ENV_VAR, str(folder))
    return folder


def _artifact(out, config, calls, *, shared=True):
    runner = StudyRunner("toy", out, config, progress=False).open()
    try:
        return runner, runner.artifact(
            "ref", lambda: calls.append(1) or {"a": np.arange(5.0) * config["x"]}, shared=shared
        )
    finally:
        runner.close()


def test_a_second_folder_of_the_same_configuration_reads_the_artifact(tmp_path, cache_dir):
    calls = []
    _, first = _artifact(tmp_path / "a", {"x": 2.0}, calls)
    runner, second = _artifact(tmp_path / "b", {"x": 2.0}, calls)
    assert calls == [1] and runner.cached == ["ref"]  # computed once, read once
    np.testing.assert_array_equal(first["a"], second["a"])
    assert (tmp_path / "b" / "points" / "ref.npz").is_file()  # the folder has its own copy
    _, other = _artifact(tmp_path / "c", {"x": 3.0}, calls)  # another configuration
    assert calls == [1, 1] and other["a"][1] == 3.0
    _artifact(tmp_path / "d", {"x": 4.0}, calls, shared=False)  # not shared: not kept
    assert len(list(cache_dir.glob("*.npz"))) == 2


def test_a_damaged_entry_is_not_used_and_is_replaced(tmp_path, cache_dir, capsys):
    calls = []
    _artifact(tmp_path / "a", {"x": 2.0}, calls)
    (entry,) = cache_dir.glob("*.npz")
    entry.write_bytes(entry.read_bytes()[:-7] + b"garbage")
    runner, arrays = _artifact(tmp_path / "b", {"x": 2.0}, calls)
    assert calls == [1, 1] and runner.cached == [] and arrays["a"][1] == 2.0
    assert (
        "warning: ref: its copy in the artifact cache is not used (its checksum does not "
        "match" in capsys.readouterr().err
    )
    _, again = _artifact(tmp_path / "c", {"x": 2.0}, calls)  # replaced: read again
    assert calls == [1, 1] and again["a"][1] == 2.0


def test_the_cache_off_or_unusable(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setenv(cache.ENV_VAR, "off")
    _artifact(tmp_path / "a", {"x": 2.0}, calls)
    _artifact(tmp_path / "b", {"x": 2.0}, calls)
    assert calls == [1, 1]
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv(cache.ENV_VAR, str(tmp_path / "afile" / "below"))
    with pytest.raises(StudyInputError, match=f"^{cache.ENV_VAR}: the artifact cache folder"):
        _artifact(tmp_path / "c", {"x": 2.0}, calls)
    # the main job refuses it before its folder is made
    argv = ["study", "mean-ode", "--out", str(tmp_path / "d"), *TINY]
    assert main(argv) == 2 and not (tmp_path / "d").exists()


USER_BLOCK = """
import jax.numpy as jnp
import jax.random as jr
import meanfield as mf

SCALE = {scale}


class Tanh(mf.AbstractUnitBlock):
    def __call__(self, h, z):
        return z["v"] * jnp.tanh(z["u"] @ h)


def law():
    return mf.SamplerLaw(lambda k: {{"u": SCALE * jr.normal(jr.fold_in(k, 0), (2, 2)),
                                    "v": jr.normal(jr.fold_in(k, 1), (2,))}})
"""

TINY = ["--design", "grid", "--L", "2,4", "--M", "1,2", "--L-for-M", "4", "--fit-M-max", "2",
        "--seeds", "2", "--steps", "1", "--reference", "monte-carlo", "--particles", "512",
        "--no-progress", "--no-self-check"]  # fmt: skip


def _study(out, block_file):
    argv = ["study", "mean-ode", "--block", f"{block_file}:Tanh", "--law", f"{block_file}:law",
            "--out", str(out), *TINY]  # fmt: skip
    assert main(argv) == 0
    return json.loads((out / "results.json").read_text())


def test_the_main_jobs_reference_is_read_back_by_content(tmp_path, cache_dir, capsys):
    """A user's block: the second run (another folder) reads the reference and gives the
    same numbers; an edit of the block's file is another configuration (the reference
    computed again, and a resume of the first folder refused naming --block)."""
    block = tmp_path / "blocks.py"
    block.write_text(USER_BLOCK.format(scale=0.5))
    first = _study(tmp_path / "a", block)
    second = _study(tmp_path / "b", block)
    assert "reference" in first["timing"]["computed"]
    assert second["timing"]["from_artifact_cache"] == ["reference"]
    assert "reference" not in second["timing"]["computed"]
    for key in ("config", "points", "fits", "reference"):
        assert first[key] == second[key], key
    block.write_text(USER_BLOCK.format(scale=0.6))
    third = _study(tmp_path / "c", block)
    assert third["timing"]["from_artifact_cache"] == []
    assert third["config"]["law_sha256"] != first["config"]["law_sha256"]
    assert third["config"]["block_sha256"] != first["config"]["block_sha256"]  # same file
    assert third["points"] != first["points"]
    argv = ["study", "mean-ode", "--block", f"{block}:Tanh", "--law", f"{block}:law",
            "--out", str(tmp_path / "a"), "--resume", *TINY]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("meanfield study mean-ode: error: --block/--law: the code of your ")
    assert len(err.splitlines()) == 1


def test_content_digests_follow_the_code_and_the_values(tmp_path):
    import meanfield as mf

    one, two = mf.TwoLayerBlock("gelu"), mf.TwoLayerBlock("tanh")
    assert content_digest(one) == content_digest(mf.TwoLayerBlock("gelu")) != content_digest(two)
    law = mf.TwoLayerNonCentredLaw(2, sigma_u=1.25, sigma_xi=0.0)
    other = mf.TwoLayerNonCentredLaw(2, sigma_u=1.26, sigma_xi=0.0)
    assert content_digest(law) != content_digest(other)
    # a function made where its source cannot be read is not known by content
    made = eval("lambda k: 1.0")  # noqa: S307
    assert content_digest(mf.SamplerLaw(made)) is None


VARIANCE = ["study", "variance", "--L", "2,4", "--gammas", "1", "--nets", "4", "--c-samples",
            "500", "--no-progress", "--no-self-check"]  # fmt: skip


def test_variances_constant_is_read_back_and_a_user_block_by_content(tmp_path, cache_dir):
    """`study variance`: the constant c computed once per configuration and code, read by
    a second run in another folder (same numbers); a user's block by its content: an
    edit of its file is another configuration."""

    def run(out, *extra):
        assert main([*VARIANCE, "--out", str(out), *extra]) == 0
        return json.loads((out / "results.json").read_text())

    first, second = run(tmp_path / "a"), run(tmp_path / "b")
    assert "c" in first["timing"]["computed"] and first["timing"]["from_artifact_cache"] == []
    assert second["timing"]["from_artifact_cache"] == ["c"]
    assert "c" not in second["timing"]["computed"]
    assert first["points"] == second["points"]
    block = tmp_path / "blocks.py"
    block.write_text(USER_BLOCK.format(scale=0.5))
    user = ["--block", f"{block}:Tanh", "--law", f"{block}:law", "--d", "2"]
    mine = run(tmp_path / "c", *user)
    assert "c" in mine["timing"]["computed"] and mine["config"]["block_sha256"]
    assert run(tmp_path / "d", *user)["timing"]["from_artifact_cache"] == ["c"]
    block.write_text(USER_BLOCK.format(scale=0.6))
    assert "c" in run(tmp_path / "e", *user)["timing"]["computed"]


def test_arrays_sent_to_other_processes_come_back_equal():
    arrays = {"h": np.arange(6.0).reshape(2, 3), "ok": np.array(True), "n": np.int32(7)}
    back = cache.decode_arrays(cache.encode_arrays(arrays))
    assert back.keys() == arrays.keys()
    for k, v in arrays.items():
        np.testing.assert_array_equal(back[k], v)
        assert back[k].dtype == np.asarray(v).dtype


def test_an_artifact_asked_for_inside_anothers_computation_is_refused(tmp_path):
    """Only process 0 computes an artifact in a multi-process run: one asked for inside
    another's `compute` would be asked for by process 0 alone (the others would wait for
    it forever), so it is refused everywhere, naming both."""
    runner = StudyRunner("toy", tmp_path / "a", {"x": 1.0}, progress=False).open()
    try:
        inner = lambda: runner.artifact("inner", lambda: {"a": np.ones(2)})  # noqa: E731
        with pytest.raises(RuntimeError, match="artifact 'inner' asked for while 'outer'"):
            runner.artifact("outer", lambda: {"b": inner()["a"]}, shared=False)
        assert runner.artifact("after", lambda: {"c": np.zeros(1)}, shared=False)["c"].size == 1
    finally:
        runner.close()
