"""`--overwrite` removes exactly the files the study wrote (its manifest), keeps the
user's own, and refuses a folder holding a study of another kind."""

import json

import numpy as np
import pytest

from meanfield.studies.runner import MANIFEST_NAME, StudyInputError, StudyRunner


def _study(out, config=None, kind="toy", **kw):
    runner = StudyRunner(kind, out, config or {"seed": 0}, progress=False, **kw)
    points = runner.run_points([{"L": 4}, {"L": 8}], lambda s: {"value": s["L"] / 2})
    runner.artifact("reference", lambda: {"h": np.arange(3.0)})
    (out / "figure.png").write_bytes(b"study figure")  # as the studies' plots do
    runner.finish({"points": points})
    return runner


def _user_files(out):
    (out / "notes.json").write_text('{"mine": true}')
    (out / "plot.png").write_bytes(b"user png")
    np.savez(out / "data.npz", x=np.ones(2))
    (out / "sub").mkdir()
    (out / "sub" / "keep.json").write_text("{}")
    return {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_overwrite_keeps_the_users_files(tmp_path):
    out = tmp_path / "study"
    out.mkdir()
    mine = _user_files(out)  # there before the study
    _study(out)
    after_first = {p for p in out.rglob("*") if p.is_file()}
    assert {out / "results.json", out / "figure.png", out / "points" / "L4.json"} <= after_first
    manifest = (out / MANIFEST_NAME).read_text().splitlines()
    assert json.loads(manifest[0])["study"] == "toy"
    written = {json.loads(line)["file"] for line in manifest[1:]}
    assert "figure.png" in written and "points/reference.npz" in written
    assert not {"notes.json", "plot.png", "data.npz", "sub/keep.json"} & written
    # the user adds more files after the run: they stay too
    (out / "later.png").write_bytes(b"added later")
    mine[out / "later.png"] = b"added later"
    runner = StudyRunner("toy", out, {"seed": 1}, overwrite=True, progress=False).open()
    for path, data in mine.items():
        assert path.read_bytes() == data, path
    for gone in ("results.json", "figure.png", "points/L4.json", "points/reference.npz"):
        assert not (out / gone).exists(), gone
    assert json.loads((out / "config.json").read_text())["config"] == {"seed": 1}
    runner.close()


def test_overwrite_refuses_a_study_of_another_kind(tmp_path):
    out = tmp_path / "study"
    _study(out)
    files = sorted(p for p in out.rglob("*") if p.is_file())
    with pytest.raises(StudyInputError, match=r"^--overwrite: .* holds a 'toy' study, not 'other'"):
        StudyRunner("other", out, {"seed": 0}, overwrite=True, progress=False).open()
    assert sorted(p for p in out.rglob("*") if p.is_file()) == files


def test_overwrite_of_a_folder_without_manifest_removes_only_known_files(tmp_path):
    """A folder of an earlier runner (no manifest): its config, results and points go,
    everything else stays."""
    out = tmp_path / "study"
    _study(out)
    (out / MANIFEST_NAME).unlink()
    (out / "mine.png").write_bytes(b"user")
    StudyRunner("toy", out, {"seed": 0}, overwrite=True, progress=False).open().close()
    assert (out / "mine.png").read_bytes() == b"user"
    assert (out / "figure.png").exists()  # unknown without a manifest: kept
    assert not (out / "results.json").exists() and not (out / "points" / "L4.json").exists()


def test_overwrite_through_the_command_line_keeps_user_files(tmp_path):
    from meanfield.cli import main

    out = tmp_path / "study"
    out.mkdir()
    mine = _user_files(out)
    argv = ["study", "tangent-kernel", "--L", "2,4", "--gammas", "0.5,1", "--M", "2"]
    argv += ["--nets", "2", "--d", "2", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    first = json.loads((out / "results.json").read_text())
    assert main([*argv, "--overwrite"]) == 0
    for path, data in mine.items():
        assert path.read_bytes() == data, path
    again = json.loads((out / "results.json").read_text())
    first.pop("timing")
    again.pop("timing")
    assert first == again
