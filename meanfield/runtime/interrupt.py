"""A study stopped by SIGINT (Ctrl-C) or SIGTERM (a scheduler's kill) stops in one line.

`stop_on_signals` turns either signal into `Interrupted`, which the command line reports as
one line (what stopped it, how many finished points the folder keeps, how to continue) and
exit status 130 or 143 (128 + the signal's number, as shells report it). Finished points
are already on disk: each is written atomically when it finishes (`harness.runner`).

Python runs a signal handler only between bytecodes, so a long compiled loop (an XLA
program of minutes) would hold the signal until it returns. A watcher thread sees each
signal at once (`signal.set_wakeup_fd`); if the main thread has not reached its handler
within `grace` seconds it prints the same line and ends the process (`os._exit`): a point
cut short is never half-written (atomic writes), the folder's lock is the operating
system's and goes with the process.

A stop answered in time does not end the work it cut short: jaxlib compiles in a thread of
its own while the main thread waits, answering signals, so `Interrupted` is raised at once
but the XLA compile goes on (as do a computation dispatched, a compile pool's threads).
Python's shutdown then waited for it, a minute or more, and crashed after it (exit 139,
not 130: issue 75). The command line therefore ends its process at once once it has said
its line (`end_process`), without Python's shutdown.
"""

import contextlib
import gc
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

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
    if out is None or not Path(out).is_dir():  # stopped before the folder was made
        where_ = f" ({out} not created)" if out is not None else ""
        return f"{where}: stopped by {name}; nothing written{where_}"
    n = finished_points(out)
    kept = f"{n} finished point(s) kept in {out}" if n else f"no finished point yet in {out}"
    return f"{where}: stopped by {name}; {kept}; run it again with --resume to continue"


def end_process(code: int) -> NoReturn:
    """End this process at once with exit status `code`, stdout and stderr flushed, without
    Python's shutdown: that waits for the threads still working (an XLA compile a signal
    cut short goes on in jaxlib's thread; a compile pool's threads) and its garbage
    collection of JAX's objects crashed after an abandoned compile. For the command line
    (whose folder's points are written atomically and whose lock goes with the process),
    not for a library caller, whose process is its own."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _swallowing(frame) -> bool:
    """Whether an exception raised in `frame` would be printed and ignored rather than
    reach the study: some frame on the way out is a `__del__`, a garbage-collection
    callback or weak-reference code (whose callbacks run at collection)."""
    callbacks = {getattr(cb, "__code__", None) for cb in gc.callbacks}
    while frame is not None:
        code = frame.f_code
        if (
            code.co_name == "__del__"
            or code in callbacks
            or code.co_filename.endswith(("weakref.py", "_weakrefset.py"))
        ):
            return True
        frame = frame.f_back
    return False


def _watch(read_fd: int, answered: threading.Event, grace: float, where: str, out) -> None:
    """The watcher thread of `stop_on_signals`: on a signal's byte from the wake-up pipe,
    waits `grace` seconds for the main thread to answer, else says where it stopped and
    ends the process with 128 + the signal's number."""
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


@contextlib.contextmanager
def stop_on_signals(
    where: str,
    out: str | os.PathLike | None = None,
    *,
    grace: float = GRACE_SECONDS,
    at_once: "Callable[[int], object] | None" = None,
) -> Iterator[None]:
    """While inside, SIGINT and SIGTERM raise `Interrupted` in the main thread; if it does
    not get there within `grace` seconds (a long compiled loop), the process prints
    `message(where, ...)` and exits at once with 128 + the signal's number. Outside the
    main thread (where Python cannot set handlers) it does nothing. A signal that arrives
    inside a garbage-collection callback, a `__del__` or a weak reference's callback
    (where Python prints an exception and ignores it: it happened inside XLA's
    collection callback) is sent again 50 ms later; if the work ends first, `Interrupted`
    is raised on the way out.

    `at_once(signum)`, where given, is called by the handler first: it may end the process
    (the command line of one process: its line said, `end_process`), never unwinding the
    main thread out of a call that another thread still works for (an XLA compile the
    signal cut short, whose objects the unwinding freed: a segfault); where it returns,
    `Interrupted` is raised."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    answered = threading.Event()
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)

    received: list[int] = []

    def resend(signum):
        if not answered.is_set():
            os.kill(os.getpid(), signum)

    def on_signal(signum, frame):
        if _swallowing(frame):  # raised here it would be printed and ignored: again soon
            received.append(signum)
            threading.Timer(0.05, resend, (signum,)).start()
            return
        signal.signal(signum, signal.SIG_IGN)  # a second Ctrl-C does not cut the cleanup
        received.append(signum)
        if at_once is not None:
            at_once(signum)
        raise Interrupted(signum)

    previous = {s: signal.signal(s, on_signal) for s in SIGNALS}
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    watcher = threading.Thread(
        target=_watch,
        args=(read_fd, answered, grace, where, out),
        name="meanfield-signals",
        daemon=True,
    )
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
    if received:  # the work ended before a signal sent again (above) could be answered
        raise Interrupted(received[0])
