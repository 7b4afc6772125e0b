"""XLA's log lines that tell a user nothing are left out of the command line's stderr
(`meanfield.runtime.log_filter`), and nothing else is: every other byte comes through,
in order, a progress bar's pieces and the last line of a process that ends abruptly
included."""

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import HANG_GUARD_S

from meanfield.runtime.log_filter import SLOW_COMPILE_NOTE, StderrFilter

AOT = (
    b"E1207 04:03:27.020158   26428 cpu_aot_loader.cc:195] Loading XLA:CPU AOT result. "
    b"Target machine feature +prefer-no-gather is not  supported on the host machine. "
    b"Machine type used ... [+64bit,+adx] vs host machine features: [avx2]. This could "
    b"lead to execution errors such as SIGILL.\n"
)
ALARM = (
    b"E1207 04:05:00.000001   26428 slow_operation_alarm.cc:73] \n"
    b"********************************\n"
    b"[Compiling module jit_step] Very slow compile? If you want to file a bug, run with "
    b"envvar XLA_FLAGS=--xla_dump_to=/tmp/foo and attach the results.\n"
    b"********************************\n"
)
KEPT = (
    b"mean-ode: the reference limit ...\n"
    b"\rmean-ode:  33%|###   | 1/3 [00:07<00:15]"
    b"\rmean-ode: 100%|######| 3/3 [00:12<00:00]\n"
    b"warning: 1 exploded draw(s) of delta_h left out\n"
    b"E1207 04:05:00.000001   26428 other_file.cc:12] a real error stays\n"
    b"********************************\n"  # stars alone, outside an alarm: kept
)


def _through(data: bytes, chunk: int) -> bytes:
    judge = StderrFilter()
    out = b"".join(judge.feed(data[i : i + chunk]) for i in range(0, len(data), chunk))
    return out + judge.close()


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 16])
def test_the_noise_goes_and_everything_else_stays_in_order(chunk):
    data = AOT + KEPT[:60] + AOT + KEPT[60:] + ALARM + AOT + ALARM + b"last words"
    out = _through(data, chunk)
    assert out == KEPT[:60] + KEPT[60:] + SLOW_COMPILE_NOTE + b"last words"


def test_a_log_line_inside_a_progress_bars_piece_is_cut_from_it():
    bar = b"\rmean-ode:   0%|     | 0/3 [00:00<?, ?solve/s]"
    assert _through(bar + AOT + b"next\n", 5) == bar + b"next\n"
    assert _through(bar + ALARM + b"next\n", 5) == bar + b"\n" + SLOW_COMPILE_NOTE + b"next\n"


def test_an_alarm_without_its_banner_gives_the_next_line_back():
    alarm_line = ALARM.split(b"\n", 1)[0] + b"\n"
    out = _through(alarm_line + b"\nnot a banner\nmore\n", 3)
    assert out == SLOW_COMPILE_NOTE + b"not a banner\nmore\n"


def test_the_filter_can_fail():
    """Fed to a filter that keeps everything, the comparison above fails."""

    class Keeps(StderrFilter):
        def _judge(self, piece):
            return piece

    judge = Keeps()
    assert judge.feed(AOT + KEPT) + judge.close() != KEPT


def _filtered(code: str, **env) -> subprocess.CompletedProcess:
    head = "import os, sys\nfrom meanfield.runtime.log_filter import filter_stderr\n"
    head += 'print("ON", filter_stderr(), flush=True)\n'
    return subprocess.run(
        [sys.executable, "-c", head + textwrap.dedent(code)], capture_output=True,
        timeout=HANG_GUARD_S, env={**os.environ, **env},
    )  # fmt: skip


def test_descriptor_2_goes_through_the_filter_to_the_last_byte():
    """A process writing to descriptor 2 (as jaxlib does) and to `sys.stderr`, then
    ending with `os._exit` (as an interrupted study does): its noise is gone, its
    words all there, its exit status its own."""
    proc = _filtered(f"""
        os.write(2, {AOT!r})
        sys.stderr.write("kept line\\n"); sys.stderr.flush()
        os.write(2, {ALARM!r} + b"last words, no newline")
        os._exit(3)
    """)
    assert proc.returncode == 3 and proc.stdout.startswith(b"ON True")
    assert proc.stderr == b"kept line\n" + SLOW_COMPILE_NOTE + b"last words, no newline"


def test_the_raw_stream_on_request():
    proc = _filtered(f"os.write(2, {AOT!r})", MEANFIELD_RAW_STDERR="1")
    assert proc.stdout.startswith(b"ON False") and proc.stderr == AOT


def test_a_normal_exit_waits_for_the_filter_to_write_everything():
    """The last lines reach stderr before the process has ended (its exit waits for the
    filter), so nothing is printed after the shell's prompt comes back."""
    proc = _filtered("""
        import atexit
        from meanfield.runtime import log_filter
        sys.stderr.write("x" * 200000 + "\\nend\\n")
        atexit._run_exitfuncs()  # what a normal exit runs
        print("FILTER", log_filter.FILTER.poll(), flush=True)
    """)
    assert proc.returncode == 0 and b"FILTER 0" in proc.stdout
    assert proc.stderr.endswith(b"\nend\n") and len(proc.stderr) == 200005
