"""A study stopped by SIGINT (Ctrl-C) or SIGTERM (a scheduler's kill) stops in one line.

`stop_on_signals` turns either signal into `Interrupted`, which the command line reports as
one line (what stopped it, how many finished points the folder keeps, how to continue) and
exit status 130 or 143 (128 + the signal's number, as shells report it). Finished points
are already on disk: each is written atomically when it finishes (`studies.runner`).

Python runs a signal handler only between bytecodes, so a long compiled loop (an XLA
program of minutes) would hold the signal until it returns. A watcher thread sees each
signal at once (`signal.set_wakeup_fd`); if the main thread has not reached its handler
within `grace` seconds it prints the same line and ends the process (`os._exit`): a point
cut short is never half-written (atomic writes), the folder's lock is the operating
system's and goes with the process.
"""

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM)
GRACE_SECONDS = 5.0


class Interrupted(BaseException):  # noqa: N818 (like KeyboardInterrupt, not an error)
    """Raised in the main thread when SIGINT or SIGTERM arrives during `stop_on_signals`."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def finished_points(out: str | os.PathLike | None) -> int:
    """How many finished grid points `out/points` holds (a point's file, not a reference's
    checksum file)."""
    if out is None:
        return 0
    folder = Path(out) / "points"
    try:
        names = [p.name for p in folder.iterdir()]
    except OSError:
        return 0
    return sum(n.endswith(".json") and not n.endswith(".npz.json") for n in names)


def message(where: str, signum: int, out: str | os.PathLike | None) -> str:
    """The one line a stopped study prints."""
    name = signal.Signals(signum).name
    n = finished_points(out)
    kept = f"{n} finished point(s) kept in {out}" if out is not None else "nothing written"
    return f"{where}: stopped by {name}; {kept}; run it again with --resume to continue"


@contextlib.contextmanager
def stop_on_signals(
    where: str, out: str | os.PathLike | None = None, *, grace: float = GRACE_SECONDS
) -> Iterator[None]:
    """While inside, SIGINT and SIGTERM raise `Interrupted` in the main thread; if it does
    not get there within `grace` seconds (a long compiled loop), the process prints
    `message(where, ...)` and exits at once with 128 + the signal's number. Outside the
    main thread (where Python cannot set handlers) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    answered = threading.Event()
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)

    def on_signal(signum, frame):
        signal.signal(signum, signal.SIG_IGN)  # a second Ctrl-C does not cut the cleanup
        raise Interrupted(signum)

    def watch():
        while True:
            try:
                data = os.read(read_fd, 1)
            except OSError:
                return
            if not data or data[0] == 0:  # closed, or our own stop byte
                return
            if data[0] not in SIGNALS:  # another signal a library handles in Python
                continue
            if answered.wait(grace):
                return
            sys.stderr.write(
                message(where, data[0], out) + f" (stopped at once: no answer in {grace:g} s)\n"
            )
            sys.stderr.flush()
            os._exit(128 + data[0])

    previous = {s: signal.signal(s, on_signal) for s in SIGNALS}
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    watcher = threading.Thread(target=watch, name="meanfield-signals", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        answered.set()  # the main thread is here: the watcher must not end the process
        signal.set_wakeup_fd(previous_fd)
        for s, handler in previous.items():
            signal.signal(s, handler)
        with contextlib.suppress(OSError):
            os.write(write_fd, b"\0")
        watcher.join(timeout=1.0)
        os.close(write_fd)
        os.close(read_fd)
