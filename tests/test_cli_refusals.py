"""The command line refuses, in one line with exit code 2 and no folder left behind:
abbreviated option names, options that do not apply to the chosen study or weights,
a held or foreign folder; and a failing write (disk full) is one line too."""

import os
import subprocess
import sys

import pytest
from conftest import HANG_GUARD_S

from meanfield.cli import build_parser, main


def run(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exit_:  # argparse's own errors
        return int(exit_.code or 0)


REFUSED = [
    # abbreviations: argparse would take `--see` for `--seeds`, `--over` for `--overwrite`
    ("mean-ode", ["--see", "3"], "--see"),
    ("variance", ["--over"], "--over"),
    ("phases", ["--weig", "fbm"], "--weig"),
    # options of another initial law, reference, weights or mode
    ("mean-ode", ["--sigma-v", "2"], "--sigma-v"),
    ("mean-ode", ["--init", "centred", "--sigma-xi", "0.5"], "--sigma-xi"),
    ("mean-ode", ["--particles", "64"], "--particles"),
    ("mean-ode", ["--reference", "monte-carlo", "--order", "8"], "--order"),
    ("phases", ["--no-heatmap"], "--no-heatmap"),
    ("phases", ["--weights", "fbm", "--no-heatmap", "--heatmap-hurst", "0.6,0.7"], "--no-heatmap"),
    ("response", ["--no-simulate", "--width", "10"], "--width"),
    ("response", ["--no-simulate", "--method", "full"], "--method"),
    ("response", ["--no-simulate", "--inits", "10"], "--inits"),
    ("sde", ["--rtol", "1e-8"], "--rtol"),
    # an option of another study
    ("variance", ["--weights", "fbm"], "--weights"),
]


@pytest.mark.parametrize("study, extra, flag", REFUSED, ids=[" ".join(a) for _, a, _ in REFUSED])
def test_refused_in_one_line_with_no_folder(tmp_path, capsys, study, extra, flag):
    out = tmp_path / "out"
    assert run(["study", study, *extra, "--out", str(out), "--no-progress"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and flag in err[0], err
    assert not out.exists()


def test_every_parser_refuses_abbreviations():
    parser = build_parser()
    seen = [parser]
    while seen:
        p = seen.pop()
        assert p.allow_abbrev is False, p.prog
        for action in p._actions:
            seen.extend(
                getattr(action, "choices", None)
                and isinstance(action.choices, dict)
                and list(action.choices.values())
                or []
            )


def test_a_foreign_study_is_not_overwritten(tmp_path, capsys):
    out = tmp_path / "out"
    tiny = ["--L", "2,4", "--gammas", "0.5,1", "--M", "2", "--nets", "2", "--d", "2"]
    assert run(["study", "tangent-kernel", *tiny, "--out", str(out), "--no-progress"]) == 0
    files = sorted(p for p in out.rglob("*"))
    capsys.readouterr()
    assert run(["study", "variance", "--overwrite", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'tangent-kernel' study" in err[0], err
    assert sorted(p for p in out.rglob("*")) == files


def test_no_traceback_from_a_subprocess(tmp_path):
    """As a user runs it: a refused option gives one line on stderr, exit 2."""
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "meanfield", "study", "phases", "--no-heatmap", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not out.exists()


def test_a_failed_write_is_one_line(tmp_path, capsys, monkeypatch):
    """A disk that fills up mid-run: one line naming --out, exit 2, no traceback."""
    import errno

    import meanfield.harness.runner as runner

    real = runner.write_json_atomic

    def full(path, obj):
        if path.name == "results.json":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, obj)

    monkeypatch.setattr(runner, "write_json_atomic", full)
    out = tmp_path / "out"
    tiny = ["--L", "2,4", "--gammas", "0.5,1", "--M", "2", "--nets", "2", "--d", "2"]
    assert run(["study", "tangent-kernel", *tiny, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left" in err[0] and "--out" in err[0], err


@pytest.mark.parametrize("value", ["abc", "nan", "-1", "0", "inf"])
def test_a_bad_process_timeout_is_refused_naming_it_and_breaks_nothing_else(
    tmp_path, value, monkeypatch, capsys
):
    """MEANFIELD_PROCESS_TIMEOUT is read where a multi-process run needs it (issue 75: it
    was parsed at import, and `abc` broke even `meanfield info`): `info` runs, a run on
    several processes is refused in one line naming the variable, before anything starts."""
    monkeypatch.setenv("MEANFIELD_PROCESS_TIMEOUT", value)
    proc = subprocess.run(
        [sys.executable, "-m", "meanfield", "info"], capture_output=True, text=True,
        timeout=HANG_GUARD_S, env={**os.environ, "MEANFIELD_PROCESS_TIMEOUT": value},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "o"
    code = main(["study", "variance", "--out", str(out), "--coordinator", "127.0.0.1:1",
                 "--num-processes", "2", "--process-id", "1"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "MEANFIELD_PROCESS_TIMEOUT" in err and repr(value) in err
    assert not out.exists()


def test_a_file_named_points_in_out_is_refused_before_anything_is_written(tmp_path, capsys):
    """Issue 75: a user's --out holding a plain file `points` was refused ("cannot create
    .../points: File exists") after the manifest was written into it."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "points").write_text("my notes")
    tiny = ["--L", "2,4", "--gammas", "0.5,1", "--M", "2", "--nets", "2", "--d", "2"]
    assert run(["study", "tangent-kernel", *tiny, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--out: {out / 'points'} is a file" in err, err
    assert sorted(p.name for p in out.iterdir()) == ["points"]
    assert (out / "points").read_text() == "my notes"
