"""`--overwrite` removes exactly the files the study wrote (its manifest), keeps the
user's own, and refuses a folder holding a study of another kind."""

import json

import numpy as np
import pytest

from meanfield.harness.folder import MANIFEST_NAME
from meanfield.harness.runner import StudyRunner
from meanfield.studies import StudyInputError


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


def _listing(out):
    return {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_overwrite_of_a_folder_without_manifest_removes_nothing(tmp_path):
    """A folder without a manifest (another tool's, or a manifest deleted): what it holds
    is not known to be the study's, so nothing goes and the refusal is one line."""
    out = tmp_path / "study"
    _study(out)
    (out / MANIFEST_NAME).unlink()
    (out / "mine.png").write_bytes(b"user")
    before = _listing(out)
    with pytest.raises(StudyInputError, match=r"^--overwrite: .* has no \.meanfield-manifest"):
        StudyRunner("toy", out, {"seed": 0}, overwrite=True, progress=False).open()
    assert _listing(out) == before


def test_overwrite_trusts_no_manifest_edited_to_name_this_study(tmp_path):
    """The manifest's header says `toy`, config.json says `other`: refused, nothing goes;
    a manifest naming no study, and files a manifest lists that a study never writes
    (a `.py`, a file in a subfolder, a path outside), are not removed either."""
    out = tmp_path / "study"
    _study(out, kind="other")
    lines = (out / MANIFEST_NAME).read_text().splitlines()
    (out / MANIFEST_NAME).write_text("\n".join([lines[0].replace('"other"', '"toy"'), *lines[1:]]))
    before = _listing(out)
    with pytest.raises(StudyInputError, match=r"^--overwrite: .* holds a 'other' study, not 'toy'"):
        StudyRunner("toy", out, {"seed": 0}, overwrite=True, progress=False).open()
    assert _listing(out) == before
    (out / MANIFEST_NAME).write_text("\n".join(lines[1:]) + "\n")  # no header
    before = _listing(out)
    with pytest.raises(StudyInputError, match=r"^--overwrite: the manifest of .* names no study"):
        StudyRunner("other", out, {"seed": 0}, overwrite=True, progress=False).open()
    assert _listing(out) == before
    # a manifest that lists the user's script, a file in a subfolder and one outside
    (out / "mine.py").write_text("print(1)")
    (out / "sub").mkdir()
    (out / "sub" / "keep.json").write_text("{}")
    (tmp_path / "outside.json").write_text("{}")
    extra = [json.dumps({"file": f}) for f in ("mine.py", "sub/keep.json", "../outside.json")]
    (out / MANIFEST_NAME).write_text("\n".join([*lines, *extra]) + "\n")
    StudyRunner("other", out, {"seed": 0}, overwrite=True, progress=False).open().close()
    assert (out / "mine.py").exists() and (out / "sub" / "keep.json").exists()
    assert (tmp_path / "outside.json").exists()
    assert not (out / "results.json").exists() and not (out / "figure.png").exists()


def test_a_run_with_no_flag_refuses_a_folder_with_a_lone_results_json(tmp_path):
    out = tmp_path / "study"
    out.mkdir()
    (out / "results.json").write_text('{"study": "someone else"}')
    with pytest.raises(StudyInputError, match=r"^--out: .* already holds a study"):
        StudyRunner("toy", out, {"seed": 0}, progress=False).open()
    assert _listing(out) == {out / "results.json": b'{"study": "someone else"}'}


@pytest.mark.parametrize("link", [".meanfield-lock", "points", "figure.png", "results.json",
                                  "points/L4.json"])  # fmt: skip
@pytest.mark.parametrize("flag", ["", "resume", "overwrite"])
def test_a_link_inside_the_folder_is_refused_and_nothing_outside_is_touched(tmp_path, link, flag):
    """A symbolic link where the study writes or deletes (the lock file, `points/`, a
    figure, results, a point): refused in one line before anything is written or
    removed, with or without --resume / --overwrite; the link's target untouched."""
    out = tmp_path / "study"
    if flag:
        _study(out)
    else:
        (out / "points").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / ("dir" if link == "points" else "file")
    if link == "points":
        target.mkdir()
        (target / "theirs.json").write_text("{}")
    else:
        target.write_bytes(b"theirs")
    path = out / link
    if path.is_dir():
        import shutil

        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    path.symlink_to(target)
    before, before_outside = _listing(out), _listing(outside)
    with pytest.raises(StudyInputError, match=r"^--out: .* is a symbolic link; .* never writes"):
        kw = {flag: True} if flag else {}
        StudyRunner("toy", out, {"seed": 0}, progress=False, **kw).open()
    assert _listing(outside) == before_outside
    assert _listing(out) == before and path.is_symlink()


def test_an_empty_out_is_refused(tmp_path, monkeypatch, capsys):
    from meanfield.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["study", "variance", "--out", "", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["meanfield study variance: error: --out: '' names no folder; give one "
                   "(e.g. results/variance)"]  # fmt: skip
    assert list(tmp_path.iterdir()) == []


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
