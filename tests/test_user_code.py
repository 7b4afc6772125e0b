"""A user's code in a study (issue 75): a parametrisation table from a file is checked when
it is loaded (its `table()` called once: finite numbers, every key present, a short name
safe in file names), refused in one line naming the option and the object, before any
folder; a user's file or table that runs long is named on stderr, and a study stopped
by Ctrl-C before its folder exists says that nothing was written."""

import signal
import subprocess
import sys
import threading
import time

import pytest
from conftest import HANG_GUARD_S

from meanfield.cli import main
from meanfield.harness.args import user_code
from meanfield.parametrisation import MUP, from_table, resnet_from_table
from meanfield.runtime.interrupt import Interrupted, message

TINY = ["--widths", "8,16,32", "--depth", "1", "--depths", "1,2,4", "--width", "8",
        "--steps", "1", "--seeds", "2", "--batch", "2", "--context", "4", "--heads", "1",
        "--base-width", "8", "--base-depth", "1", "--no-progress"]  # fmt: skip
TRANSFER = ["--depths", "1,2,4", "--width", "8", "--widths", "8,16,32", "--depth", "1",
            "--steps", "2", "--seeds", "2", "--lrs", "0.001,0.01,0.1", "--batch", "2",
            "--context", "4", "--heads", "1", "--base-width", "8", "--base-depth", "1",
            "--no-progress"]  # fmt: skip

TABLES = """
from meanfield.parametrisation import MUP, Parametrisation, ResNetParametrisation

class Edited(Parametrisation):
    def table(self):
        data = super().table()
        data.update(self.source and eval(self.source))
        return data

class Raises(Parametrisation):
    def table(self):
        raise RuntimeError("no table today")

class Gives(Parametrisation):
    def table(self):
        return eval(self.source)

class Exits(Parametrisation):
    def table(self):
        raise SystemExit(3)

NAN = Edited(name="nan", source="{'alpha': float('nan')}")
WORD = Edited(name="word", source="{'rules': {'embedding': {'lr': ['fast', 0]}}}")
RAISES = Raises(name="raises")
EMPTY = Gives(name="empty", source="{}")
A_LIST = Gives(name="list", source="[1, 2]")
EXITS = Exits(name="exits")
LONG = MUP.replace(name="x" * 300)
SLASH = MUP.replace(name="a/b")
HIDDEN = MUP.replace(name=".mup")
NAN_SET = MUP.replace(name="nan-set")
object.__setattr__(NAN_SET, "output", float("nan"))

class ResNetGives(ResNetParametrisation):
    def table(self):
        return {}

RESNET_EMPTY = ResNetGives("empty", 1.0, 1.0)
"""


def _refused(argv, out, capsys) -> str:
    """`meanfield ARGV`: exit 2, one line on stderr, no folder made."""
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert not out.exists(), sorted(p.name for p in out.rglob("*"))
    return err


@pytest.mark.parametrize(
    "name, words",
    [
        ("NAN", "alpha must be a finite number, got nan"),
        ("WORD", "rules['embedding']['lr'][0] must be a finite number, got 'fast'"),
        ("RAISES", ".table() failed: RuntimeError: no table today"),
        ("EMPTY", "missing 'name', 'alpha', 'output', 'attention', 'rules'"),
        ("A_LIST", "a parametrisation table must be a dict, got list"),
        ("EXITS", ".table() failed: it called exit(3)"),
        ("LONG", "(300 characters); a table's name is 1 to 64 letters"),
        ("SLASH", "names its table 'a/b'; a table's name is"),
        ("HIDDEN", "names its table '.mup'; a table's name is"),
        ("NAN_SET", "output must be a finite number, got nan"),
    ],
)
def test_a_bad_user_table_is_refused_in_one_line_before_any_folder(name, words, tmp_path, capsys):
    """Before: a traceback (NaN, a string, `{}`: `KeyError: 'name'`) with `config.json`
    and `points/` left behind, or for a 300-character name "--out: cannot write: File
    name too long" after the folder was made."""
    (tmp_path / "mine.py").write_text(TABLES)
    spec = f"{tmp_path / 'mine.py'}:{name}"
    out = tmp_path / "out"
    argv = ["study", "coord-check", *TINY, "--parametrisations", f"mup,{spec}", "--out", str(out)]
    err = _refused(argv, out, capsys)
    assert err.startswith(f"meanfield study coord-check: error: --parametrisations: {spec}"), err
    assert words in err, err


def test_a_bad_table_is_refused_naming_the_option_of_its_line(tmp_path, capsys):
    """transfer: a table of the width line is refused naming --width-parametrisations."""
    (tmp_path / "mine.py").write_text(TABLES)
    spec = f"{tmp_path / 'mine.py'}:EMPTY"
    out = tmp_path / "out"
    argv = ["study", "transfer", *TRANSFER, "--parametrisations", "mup",
            "--width-parametrisations", spec, "--out", str(out)]  # fmt: skip
    err = _refused(argv, out, capsys)
    assert f"error: --width-parametrisations: {spec}: " in err and "missing 'name'" in err


def test_a_bad_resnet_table_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "mine.py").write_text(TABLES)
    spec = f"{tmp_path / 'mine.py'}:RESNET_EMPTY"
    out = tmp_path / "out"
    argv = ["study", "coord-check", "--model", "resnet", "--parametrisations", spec, "--widths",
            "2,4,8", "--depths", "2,4,8", "--no-progress", "--out", str(out)]  # fmt: skip
    err = _refused(argv, out, capsys)
    assert f"--parametrisations: {spec}: " in err and "missing 'name', 'depth', 'width'" in err


def test_a_file_raising_keyboard_interrupt_is_refused_in_one_line(tmp_path, capsys):
    """A KeyboardInterrupt the user's file raises itself (a real Ctrl-C inside the command
    line is `Interrupted`): refused like any other error of the file, not a traceback."""
    (tmp_path / "mine.py").write_text("raise KeyboardInterrupt\n")
    out = tmp_path / "out"
    spec = f"{tmp_path / 'mine.py'}:T"
    argv = ["study", "coord-check", *TINY, "--parametrisations", spec, "--out", str(out)]
    err = _refused(argv, out, capsys)
    assert err.endswith("failed: it raised KeyboardInterrupt") and "--parametrisations" in err


def test_a_table_is_rebuilt_from_its_data_and_its_own_code_runs_once(tmp_path):
    """The study keeps the library's table rebuilt from what `table()` gave: the user's
    code is not called again (a second call could differ, or loop)."""
    from meanfield.studies.shared.transformer_options import tables

    (tmp_path / "counted.py").write_text(
        "from meanfield.parametrisation import Parametrisation, MUP\n"
        "CALLS = []\n"
        "class Counted(Parametrisation):\n"
        "    def table(self):\n"
        "        CALLS.append(1)\n"
        "        return MUP.replace(name='counted').table()\n"
        "T = Counted(name='ignored')\n"
    )
    (table,) = tables([f"{tmp_path / 'counted.py'}:T"])
    assert type(table).__name__ == "Parametrisation" and table.name == "counted"
    assert table.table() == MUP.replace(name="counted").table()
    users = [m for n, m in list(sys.modules.items()) if n.startswith("meanfield_user_")]
    (module,) = [m for m in users if hasattr(m, "Counted")]
    assert module.CALLS == [1]


def test_from_table_says_what_is_missing_in_one_line():
    """The API: `from_table({})` raised `KeyError: 'rules'`."""
    for bad, words in (
        ({}, "a parametrisation table is missing 'name', 'alpha', 'output', 'attention', 'rules'"),
        ({**MUP.table(), "alhpa": 1}, "unknown key(s) 'alhpa'"),
        ({**MUP.table(), "rules": [1]}, "rules must be a dict of groups, got list"),
        ({**MUP.table(), "rules": {"embedding": {"lr": 3}}}, "must be a pair"),
        ({**MUP.table(), "source": 5}, "source must be a string, got int"),
        ([], "a parametrisation table must be a dict, got list"),
    ):
        with pytest.raises(ValueError) as err:
            from_table(bad)
        assert words in str(err.value) and len(str(err.value).splitlines()) == 1, err.value
    assert from_table(MUP.table()) == MUP
    with pytest.raises(ValueError, match="missing 'name', 'depth', 'width'"):
        resnet_from_table({})
    with pytest.raises(ValueError, match="unknown key"):
        resnet_from_table({"name": "x", "depth": 1.0, "width": 1.0, "alpha": 2})


def test_user_code_is_named_when_it_runs_long_and_when_stopped(capsys):
    """Quick code says nothing; code running past `after` is named in one line (nested
    contexts: the innermost, once); a Ctrl-C inside names it at once."""
    with user_code("--block", "importing quick.py", after=5.0):
        pass
    assert capsys.readouterr().err == ""
    with user_code("--block", "trying slow.py on the data", after=0.05):
        with user_code("--block", "importing slow.py", after=0.05):
            time.sleep(0.5)
    assert capsys.readouterr().err == (
        "meanfield: --block: still importing slow.py after 0.05 s (Ctrl-C stops it)\n"
    )
    with pytest.raises(Interrupted):
        with user_code("--law", "importing law.py", after=5.0):
            raise Interrupted(signal.SIGINT)
    assert capsys.readouterr().err == "meanfield: --law: stopped while importing law.py\n"


def test_the_stop_message_says_nothing_was_written_without_a_folder(tmp_path):
    """Before: "0 finished point(s) kept in OUT; run it again with --resume" for a
    folder that did not exist."""
    where = "meanfield study coord-check"
    text = message(where, signal.SIGINT, tmp_path / "never")
    assert text == f"{where}: stopped by SIGINT; nothing written ({tmp_path / 'never'} not created)"
    (tmp_path / "made" / "points").mkdir(parents=True)
    assert "no finished point yet in" in message(where, signal.SIGINT, tmp_path / "made")
    (tmp_path / "made" / "points" / "a.json").write_text("{}")
    assert "1 finished point(s) kept in" in message(where, signal.SIGINT, tmp_path / "made")


@pytest.mark.parametrize("spec", ["loop.py:T", "calls.py:T"])
def test_a_user_file_that_loops_is_named_and_stops_cleanly(spec, tmp_path):
    """A table whose file (or whose `table()`) loops forever: stderr names it while it
    runs; Ctrl-C stops it with exit 130, saying nothing was written; no folder."""
    (tmp_path / "loop.py").write_text("while True:\n    pass\n")
    (tmp_path / "calls.py").write_text(
        "from meanfield.parametrisation import Parametrisation\n"
        "class Loops(Parametrisation):\n"
        "    def table(self):\n"
        "        while True:\n"
        "            pass\n"
        "T = Loops(name='loops')\n"
    )
    out = tmp_path / "out"
    user = f"{tmp_path / spec}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "meanfield", "study", "coord-check", *TINY,
         "--parametrisations", user, "--out", str(out)],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    lines: list[str] = []
    noted = threading.Event()

    def read():
        for line in proc.stderr:
            if "cpu_aot" not in line:
                lines.append(line.rstrip("\n"))
                if "still" in line:
                    noted.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert noted.wait(min(HANG_GUARD_S, 300)), lines  # named 10 s after its start
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(timeout=10)
    what = "importing" if spec.startswith("loop") else "calling"
    assert lines[0].startswith(f"meanfield: --parametrisations: still {what} {tmp_path}"), lines
    assert proc.returncode == 130, lines
    assert lines[-1] == (
        f"meanfield study coord-check: stopped by SIGINT; nothing written ({out} not created)"
    ), lines
    assert len(lines) == 2 and not out.exists(), lines


def test_a_stop_before_the_note_still_names_the_users_file(tmp_path):
    """SIGINT inside a user's file before its note is due (the command line ends the
    process from the signal's handler): the file is named, then the stop's line."""
    marker = tmp_path / "started"
    (tmp_path / "loop.py").write_text(
        f"import time\nopen({str(marker)!r}, 'w').close()\nwhile True:\n    time.sleep(0.01)\n"
    )
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "meanfield", "study", "coord-check", *TINY,
         "--parametrisations", f"{tmp_path / 'loop.py'}:T", "--out", str(out)],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + min(HANG_GUARD_S, 300)
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = [ln for ln in err.splitlines() if ln.strip() and "cpu_aot" not in ln]
    assert proc.returncode == 130, lines
    assert lines[0].startswith("meanfield: --parametrisations: stopped while importing "), lines
    assert lines[-1].startswith("meanfield study coord-check: stopped by SIGINT; nothing written")
    assert len(lines) == 2 and not out.exists(), lines
