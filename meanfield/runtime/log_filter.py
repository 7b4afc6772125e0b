"""XLA's log lines that tell a user nothing, left out of the command line's stderr.

jaxlib writes its C++ logs straight to file descriptor 2, past Python. Two kinds reach a
user of `meanfield study` for no reason of theirs:

- jaxlib 0.10.1's spurious "Loading XLA:CPU AOT result. Target machine feature
  +prefer-no-gather is not supported on the host machine ... SIGILL" (two ~4 kB lines
  for every program read back from the compilation cache on the machine that compiled
  it: openxla/xla#44565; `runtime.compilation` keeps programs per CPU, so the case the
  warning is for never arises);
- XLA's "Very slow compile? If you want to file a bug ..." banner (a program compiling
  for more than a few seconds, which the studies' large programs do by design): said
  once instead, in our words (`SLOW_COMPILE_NOTE`).

`filter_stderr()` (the command line, `meanfield study` and `meanfield canary`) points
descriptor 2 at a pipe read by a small process of its own (this file run as a script,
the standard library only), which writes every other byte on, as it comes (a progress
bar's updates too). Being another process, it drains the pipe whatever becomes of this
one (a crash's report, the last line before `os._exit`), and it ends when the pipe
closes. `MEANFIELD_RAW_STDERR=1` turns it off. A library user's own process is never
touched.
"""

import atexit
import os
import re
import subprocess
import sys

RAW_VARIABLE = "MEANFIELD_RAW_STDERR"
SLOW_COMPILE_NOTE = (
    b"note: XLA is compiling a large program (this can take a minute on a CPU); its "
    b'"Very slow compile?" notices are left out\n'
)

# an absl log line's prefix: severity, date, time, thread, file:line]
_ABSL = rb"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ "
_AOT = re.compile(_ABSL + rb"cpu_aot_loader\.cc:\d+\] Loading XLA:CPU AOT result\. Target "
                  rb"machine feature \+prefer-no-(?:gather|scatter) is not")  # fmt: skip
_ALARM = re.compile(_ABSL + rb"slow_operation_alarm\.cc:\d+\]")
_STARS = re.compile(rb"^\*{8,}\s*$")


class StderrFilter:
    """The filter itself, on bytes as they come (`feed`; `close` at the end): pieces of
    text ending in a newline or a carriage return are judged whole. An AOT line is
    dropped. A slow-operation alarm is dropped from its log line through its banner
    (blank lines, a line of stars, its message, a line of stars), the first one said as
    `SLOW_COMPILE_NOTE`; a line that is not the banner's ends the alarm and is kept."""

    BODY_LINES = 4  # at most this many message lines between the stars

    def __init__(self) -> None:
        self.rest = b""
        self.state = "out"  # "out", "head" (before the stars), "body" (between them)
        self.body = 0
        self.noted = False

    def feed(self, data: bytes) -> bytes:
        pieces = re.split(rb"(?<=[\r\n])", self.rest + data)
        self.rest = pieces.pop()
        return b"".join(self._judge(p) for p in pieces if p)

    def close(self) -> bytes:
        rest, self.rest = self.rest, b""
        return self._judge(rest) if rest else b""

    def _judge(self, piece: bytes) -> bytes:
        if self.state == "head":
            if not piece.strip():
                return b""
            if _STARS.match(piece):
                self.state, self.body = "body", 0
                return b""
            self.state = "out"  # not a banner after all
        elif self.state == "body":
            if _STARS.match(piece):
                self.state = "out"
                return b""
            self.body += 1
            if self.body <= self.BODY_LINES:
                return b""
            self.state = "out"
        # (a log line may start within a progress bar's piece, which has no line end)
        aot = _AOT.search(piece)
        if aot:
            return piece[: aot.start()]
        alarm = _ALARM.search(piece)
        if alarm:
            self.state = "head"
            before = piece[: alarm.start()]
            if not self.noted:
                self.noted = True
                return before + (b"\n" if before.strip() else b"") + SLOW_COMPILE_NOTE
            return before
        return piece


def filter_stderr() -> bool:
    """Route this process's descriptor 2 through the filter process. **Returns:** whether
    it did (not under `MEANFIELD_RAW_STDERR=1`, nor where descriptor 2 is closed)."""
    if os.environ.get(RAW_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on"):
        return False
    try:
        os.fstat(2)
    except OSError:
        return False
    sys.stderr.flush()
    child = subprocess.Popen(
        [sys.executable, "-S", "-u", os.path.abspath(__file__)],
        stdin=subprocess.PIPE, stdout=2, stderr=2, close_fds=True,
    )  # fmt: skip
    assert child.stdin is not None
    os.dup2(child.stdin.fileno(), 2)
    child.stdin.close()  # (descriptor 2 holds the pipe now)
    global FILTER
    FILTER = child
    atexit.register(_drain, child)
    return True


FILTER: subprocess.Popen | None = None  # the filter process, once started


def _drain(child: subprocess.Popen) -> None:
    """At a normal exit: close this process's end of the pipe and let the filter write
    what it holds before the shell's prompt comes back (at most 2 s: a child process that
    inherited descriptor 2 may hold the pipe open longer)."""
    try:
        sys.stderr.flush()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
        child.wait(timeout=2.0)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        pass


def _run() -> None:
    """The filter process: stdin to stdout, filtered, until stdin closes."""
    out, judge = sys.stdout.buffer, StderrFilter()
    while True:
        try:
            data = os.read(0, 1 << 16)
        except InterruptedError:
            continue
        except KeyboardInterrupt:  # (Ctrl-C reaches the whole group: drain on)
            continue
        if not data:
            break
        text = judge.feed(data)
        if text:
            out.write(text)
            out.flush()
    out.write(judge.close())
    out.flush()


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run it serves handles Ctrl-C
    _run()
