"""A study's grid points spread over this process's devices and over processes.

**Devices of one process.** `map_on_devices(fn, items)` runs whole grid points at once,
one per device (a thread per device, each with `on_devices([device])`: JAX's default
device and the devices `shard_seeds` uses are that one), and yields each result as it
finishes. Inside `on_devices(devices)`, `point_devices()` names the devices the running
point may use; `shard_seeds` spreads its seeds over them (default: every device).

**Processes.** `start_processes(...)` joins JAX's own multi-process runtime
(`jax.distributed.initialize`; the coordinator's address, the number of processes and
this one's index given, or read from a cluster's environment such as SLURM's) within
`join_seconds()` (`--join-timeout`, `MEANFIELD_JOIN_TIMEOUT`, default 60 s): a peer that
never comes, a coordinator nothing answers at, end the process with one line and exit
status 2, as a refused input. The processes then agree (`Processes.agree`: every one's
configuration and code against process 0's) or all refuse in one line. Each
process then computes its share of the grid points (`Processes.share`) and sends every
finished point to the others through the runtime's key-value store (`send`, `receive`):
every process ends with every point, and only process 0 writes the study's folder
(`harness.runner`). A process that stops answering (killed, its machine gone) makes the
others stop within `stale_seconds()` with one line (`Processes` watches every peer's
heartbeat); the points already written stay, and `--resume` continues from them.

**A follower's supervisor.** Process 0 hosts the runtime's coordination service: killed,
the others' runtime (C++) ends them at once by SIGABRT with a report of many lines, which
Python cannot catch. The command line therefore runs each process other than 0 as a child
of a small supervisor of its own (`cli.main`). The child has `MEANFIELD_SUPERVISED` set (an
internal variable), says each point it computed on stderr in a line the supervisor reads
(`COMPUTED_MARK`), and ends when the supervisor does (`watch_supervisor`). The supervisor
relays the child's stderr, about a second late; where the runtime's fatal report comes
(`FATAL_MARKERS`) it prints one line instead (the coordinator gone, what the child
computed, `--resume`) and exits with status 1.
"""

import contextlib
import contextvars
import json
import math
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any

import jax

from .memory import parse_number

TIMEOUT_VARIABLE = "MEANFIELD_PROCESS_TIMEOUT"
DEFAULT_STALE_SECONDS = 10.0
JOIN_VARIABLE = "MEANFIELD_JOIN_TIMEOUT"
DEFAULT_JOIN_SECONDS = 60.0
MAX_JOIN_SECONDS = 86400.0  # a day: beyond, the runtime's own (integer) timeout overflows
JOIN_EXIT = 2  # a process that cannot join: a setup to correct, as a refused input
SUPERVISED_VARIABLE = "MEANFIELD_SUPERVISED"  # set by a follower's supervisor on its child
COMPUTED_MARK = "meanfield supervisor: computed "  # + a count: a supervised child's line
# the runtime's report as it ends a process whose coordinator has gone (jaxlib 0.10.1)
FATAL_MARKERS = (
    "Terminating process because the JAX distributed service detected fatal errors",
    "Polled an error from coordination service",
)


def supervised() -> bool:
    """Whether a follower's supervisor runs this process (`SUPERVISED_VARIABLE` set)."""
    return bool(os.environ.get(SUPERVISED_VARIABLE))


def watch_supervisor() -> None:
    """In a supervised process whose stdin is its supervisor's pipe: end this process as
    if killed with it (SIGKILL) once the supervisor has gone (killed too: the pipe
    closes), so that the others see it stop (`stale_seconds()`), never an orphan going
    on. Stdin not a pipe (a terminal, a file, /dev/null): nothing is watched."""
    import signal
    import stat

    def watch():
        with contextlib.suppress(OSError):
            while os.read(0, 4096):
                pass
        os.kill(os.getpid(), signal.SIGKILL)

    with contextlib.suppress(OSError):
        if stat.S_ISFIFO(os.fstat(0).st_mode):
            threading.Thread(target=watch, name="meanfield-supervisor", daemon=True).start()


def stale_seconds() -> float:
    """How long a silent peer is waited for (`MEANFIELD_PROCESS_TIMEOUT`, default 10 s),
    read when a multi-process run needs it, not at import (a bad value must not break
    `meanfield info`). A value that is not a finite positive number is a one-line
    `ValueError` naming the variable."""
    text = os.environ.get(TIMEOUT_VARIABLE)
    if text is None:
        return DEFAULT_STALE_SECONDS
    value = parse_number(text)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{TIMEOUT_VARIABLE}: seconds, a finite number > 0, got {text!r}")
    return value


def join_seconds(given: float | None = None) -> float:
    """How long a process waits to join the others: `given` (`--join-timeout`), else
    `MEANFIELD_JOIN_TIMEOUT`, else 60 s; read when a multi-process run starts, not at
    import. A value that is not a number in (0, 86400] is a one-line `ValueError` naming
    the option or the variable."""
    if given is None:
        text, name = os.environ.get(JOIN_VARIABLE), JOIN_VARIABLE
    else:
        text, name = f"{given:g}", "--join-timeout"
    if text is None:
        return DEFAULT_JOIN_SECONDS
    value = parse_number(text)
    if not (math.isfinite(value) and 0 < value <= MAX_JOIN_SECONDS):
        raise ValueError(
            f"{name}: seconds, a finite number > 0 and at most {MAX_JOIN_SECONDS:g}, got {text}"
            if given is not None
            else f"{name}: seconds, a finite number > 0 and at most {MAX_JOIN_SECONDS:g}, "
            f"got {text!r}"
        )
    return value


_BEAT_SECONDS = 0.5
_CHUNK = 1 << 20  # characters per key-value entry (the store's messages stay small)
_PREFIX = "meanfield"

_POINT_DEVICES: contextvars.ContextVar[tuple | None] = contextvars.ContextVar(
    "meanfield_point_devices", default=None
)


def point_devices() -> list | None:
    """The devices the running grid point may use (`on_devices`), or `None`: every
    device."""
    devices = _POINT_DEVICES.get()
    return None if devices is None else list(devices)


@contextlib.contextmanager
def on_devices(devices: Sequence) -> Iterator[None]:
    """Within: `point_devices()` is `devices`, and JAX puts new arrays and computations on
    `devices[0]`."""
    devices = tuple(devices)
    if not devices:
        raise ValueError("devices must hold at least one device")
    token = _POINT_DEVICES.set(devices)
    try:
        with jax.default_device(devices[0]):
            yield
    finally:
        _POINT_DEVICES.reset(token)


def map_on_devices(
    fn: Callable[[Any], Any], items: Sequence, devices: Sequence | None = None
) -> Iterator[tuple[int, Any, float, int]]:
    """`fn(item)` for every item, one item per device at a time (default devices:
    `point_devices()`, else this process's). Yields `(index, result, seconds, mesh)` as
    each finishes (`mesh`: the devices it ran on); with one device or one item, in order
    in this thread. The first error is raised at once, and the items not started are
    dropped (those running end in their threads)."""
    if devices is None:
        devices = point_devices() or jax.local_devices()
    devices = list(devices)
    if len(devices) <= 1 or len(items) <= 1:
        for i, item in enumerate(items):
            t0 = time.perf_counter()
            with on_devices(devices):
                out = fn(item)
            yield i, out, time.perf_counter() - t0, len(devices)
        return
    free: queue.SimpleQueue = queue.SimpleQueue()
    for d in devices:
        free.put(d)

    def one(item):
        device = free.get()
        try:
            t0 = time.perf_counter()
            with on_devices([device]):
                out = fn(item)
            return out, time.perf_counter() - t0
        finally:
            free.put(device)

    pool = ThreadPoolExecutor(len(devices), thread_name_prefix="meanfield-device")
    try:
        pending = {pool.submit(one, item): i for i, item in enumerate(items)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=pending.__getitem__):
                i = pending.pop(future)
                out, seconds = future.result()
                yield i, out, seconds, 1
    except BaseException:  # an error, Ctrl-C, or the caller stopped: nothing more starts
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


# --------------------------------------------------------------------------- processes


def cluster_detected() -> str | None:
    """The cluster environment JAX's runtime reads its settings from (`"SlurmCluster"`,
    `"OmpiCluster"`, ...), or `None`."""
    try:
        from jax._src.clusters import ClusterEnv
    except ImportError:  # pragma: no cover - private module moved
        return None
    for env in ClusterEnv._cluster_types:
        try:
            if env.is_env_present():
                return env.__name__
        except Exception:  # noqa: BLE001 - a detector that fails detects nothing
            continue
    return None


def cluster_settings() -> dict | None:
    """The coordinator's address, the process count and this process's index that JAX's
    runtime reads from a cluster whose variables are cheap to read (SLURM, Open MPI), or
    `None` (no such cluster; the runtime reads the others itself)."""
    try:
        from jax._src.clusters import ClusterEnv
    except ImportError:  # pragma: no cover - private module moved
        return None
    for env in ClusterEnv._cluster_types:
        if env.__name__ not in ("SlurmCluster", "OmpiCluster"):
            continue
        try:
            if not env.is_env_present():
                continue
            port = os.environ.get("JAX_COORDINATOR_PORT")
            return {
                "cluster": env.__name__,
                "coordinator": env.get_coordinator_address(None, port),
                "num_processes": env.get_process_count(),
                "process_id": env.get_process_id(),
            }
        except Exception:  # noqa: BLE001 - variables the runtime will refuse itself
            return None
    return None


def check_host(address: str, seconds: float = 10.0) -> None:
    """A `ValueError` (the reason, one line) where the host of `address` ("HOST:PORT")
    does not resolve to an address (looked up in a thread, at most `seconds`; no
    connection is made)."""
    import socket

    host = address.rpartition(":")[0].strip("[]")
    found: list = []

    def look():
        try:
            found.append(socket.getaddrinfo(host, None))
        except (OSError, UnicodeError) as err:
            found.append(err)

    thread = threading.Thread(target=look, name="meanfield-resolve", daemon=True)
    thread.start()
    thread.join(seconds)
    if not found:
        raise ValueError(f"the host {host!r} did not resolve within {seconds:g} s")
    if isinstance(found[0], BaseException):
        err = found[0]
        why = err.args[1] if isinstance(err, OSError) and len(err.args) > 1 else _first(err)
        raise ValueError(f"the host {host!r} does not resolve to an address ({why})")


def start_processes(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    join_timeout: float | None = None,
    where: str = "meanfield",
) -> "Processes":
    """Join JAX's multi-process runtime (`jax.distributed.initialize`, before any other
    JAX computation) and return this process's `Processes`. Arguments left `None` come
    from the cluster's environment (SLURM, Open MPI, ...; `JAX_COORDINATOR_ADDRESS`).

    A process that has not joined within `join_seconds(join_timeout)` (60 s by default: a
    peer that never comes, a coordinator nothing answers at) prints one line, `where:
    error: --coordinator HOST:PORT: process I of N could not join within T s (why)`, and
    ends with exit status 2 (`JOIN_EXIT`); the runtime's own timeout, which ends the
    process with a report of many lines, is set 10 s later as a backstop."""
    seconds = join_seconds(join_timeout)
    cluster = cluster_settings() or {}
    address = coordinator or os.environ.get("JAX_COORDINATOR_ADDRESS") or cluster.get(
        "coordinator")  # fmt: skip
    n = num_processes if num_processes is not None else cluster.get("num_processes")
    i = process_id if process_id is not None else cluster.get("process_id")
    option = (
        f"--coordinator {coordinator}" if coordinator
        else f"--distributed (coordinator {address})" if not cluster
        else f"--distributed ({cluster['cluster']}: coordinator {address})"
    )  # fmt: skip
    joined = threading.Event()

    def watch():
        if joined.wait(seconds):
            return
        who = f"process {i if i is not None else '?'} of {n if n is not None else '?'}"
        why = _why_not_joined(address, i, n)
        print(f"{where}: error: {option}: {who} could not join within {seconds:g} s ({why})",
              file=sys.stderr, flush=True)  # fmt: skip
        sys.stdout.flush()
        os._exit(JOIN_EXIT)

    threading.Thread(target=watch, name="meanfield-join", daemon=True).start()
    try:
        jax.distributed.initialize(
            coordinator_address=coordinator, num_processes=num_processes,
            process_id=process_id, initialization_timeout=math.ceil(seconds) + 10,
            # the runtime's own checks are slower than ours (`stale_seconds`), so a dead
            # peer is reported by one line of ours, not by the runtime's abort
            heartbeat_timeout_seconds=max(100, int(10 * stale_seconds())),
        )  # fmt: skip
    finally:
        joined.set()
    return Processes()


def _why_not_joined(address: str | None, index: int | None, count: int | None) -> str:
    """Why a process is still waiting to join, as far as one look can tell."""
    import socket

    everyone = "each must be started with the same --coordinator and --num-processes"
    if index == 0:
        return f"not every other process came: {everyone}, and its own --process-id"
    if not address:
        return "no coordinator address"
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=2.0):
            pass
    except ConnectionRefusedError:
        return f"nothing listens at {address}: is process 0 running there?"
    except TimeoutError:
        return f"no answer from {address}"
    except OSError as err:
        return f"{address}: {err.strerror or _first(err)}"
    return f"process 0 answers at {address}, but not every process came: {everyone}"


def active() -> "Processes | None":
    """This process's `Processes` once `start_processes` ran (more than one process)."""
    return _ACTIVE


_ACTIVE: "Processes | None" = None


class PeerLost(RuntimeError):
    """Another process of the run stopped answering."""


class Processes:
    """This process's view of a multi-process run: its index and the count, its share of
    a list, and the key-value exchange with the others, with a watch on their heartbeats
    (every `_BEAT_SECONDS`; a peer silent for `stale_seconds()` ends this process with one
    line, `on_lost`)."""

    def __init__(self, *, on_lost: Callable[[str], None] | None = None):
        global _ACTIVE
        from jax._src import distributed

        client = distributed.global_state.client
        if client is None:
            raise RuntimeError("jax.distributed is not initialised")
        self.client = client
        self.index = jax.process_index()
        self.count = jax.process_count()
        self.on_lost = on_lost or _exit_with
        self.where = "meanfield"
        self._computed = 0
        self._done: set[int] = set()
        self._stop = threading.Event()
        self._watch = threading.Thread(target=self._beat, name="meanfield-heartbeat", daemon=True)
        self._watch.start()
        _ACTIVE = self

    @property
    def computed(self) -> int:
        """The points this process computed and sent (`StudyRunner`); a supervised
        process says each new count on stderr (`COMPUTED_MARK`), for its supervisor."""
        return self._computed

    @computed.setter
    def computed(self, count: int) -> None:
        self._computed = count
        if supervised():
            print(f"{COMPUTED_MARK}{count}", file=sys.stderr, flush=True)

    # the exchange
    def share(self, items: Sequence) -> list:
        """This process's items: every `count`-th, from its index."""
        return list(items)[self.index :: self.count]

    def send(self, key: str, obj: Any) -> None:
        """Publish `obj` (JSON-able) under `key` for every process."""
        text = json.dumps(obj)
        chunks = [text[i : i + _CHUNK] for i in range(0, len(text), _CHUNK)] or [""]
        for i, chunk in enumerate(chunks):
            self._call(self.client.key_value_set, f"{_PREFIX}/{key}/{i}", chunk)
        self._call(self.client.key_value_set, f"{_PREFIX}/{key}", str(len(chunks)))

    def poll(self, key: str) -> Any:
        """The object published under `key`, or `None` if it is not there yet."""
        count = self._try(f"{_PREFIX}/{key}")
        if count is None:
            return None
        parts = [self._try(f"{_PREFIX}/{key}/{i}") for i in range(int(count))]
        return json.loads("".join(p or "" for p in parts))

    def receive(self, key: str) -> Any:
        """The object published under `key`, waiting for it (while every peer answers)."""
        while (got := self.poll(key)) is None:
            time.sleep(0.02)
        return got

    def agree(self, record: dict[str, tuple[str, str]]) -> str | None:
        """Whether every process runs what process 0 runs: `record` maps a name (an option
        such as `--seed`, "the study", "jax") to its value's hash and its value as shown.
        Each process publishes its record; process 0 compares every other with its own and
        publishes the verdict, which every process returns: `None` where they agree, else
        one line naming what differs (every process then refuses with it)."""
        self.send(f"agree/{self.index}", record)
        if self.index == 0:
            differ: dict[str, list[str]] = {}
            for peer in range(1, self.count):
                theirs = self.receive(f"agree/{peer}")
                for name in [*record, *(k for k in theirs if k not in record)]:
                    mine, other = record.get(name), theirs.get(name)
                    if (mine or [None])[0] != (other or [None])[0]:
                        differ.setdefault(name, []).append(
                            f"{_shown(other)} on process {peer}, {_shown(mine)} on process 0"
                        )
            verdict = ""
            if differ:
                each = "; ".join(f"{k} {', '.join(v)}" for k, v in differ.items())
                verdict = (
                    f"{', '.join(differ)}: the {self.count} processes were not given the same "
                    f"run ({each}); start every process with the same options, data and "
                    "code; nothing was computed"
                )
            self.send("agree/verdict", verdict)
        else:
            verdict = self.receive("agree/verdict")
        return verdict or None

    def _refused(self) -> bool:
        """Whether process 0 found the processes not agreeing (`agree`): each refuses."""
        return bool(json.loads(self.client_try(f"{_PREFIX}/agree/verdict/0") or '""'))

    def abort(self, line: str) -> None:
        """This process stops on an error (`line`, already printed): tell the others, which
        stop with one line of their own. Process 0, whose runtime serves the others (their
        runtime ends them with a report of its own once it has gone), waits a little for
        them to go first; the others go at once."""
        self._stop.set()
        try:
            self.client.key_value_set(f"{_PREFIX}/abort", f"process {self.index}: {line}")
            self.client.key_value_set(f"{_PREFIX}/gone/{self.index}", "1")
            if self.index != 0:
                return
            deadline = time.monotonic() + 3 * _BEAT_SECONDS + 2
            for peer in range(self.count):
                while peer != self.index and time.monotonic() < deadline:
                    if self.client_try(f"{_PREFIX}/gone/{peer}") is not None:
                        break
                    if self.client_try(f"{_PREFIX}/done/{peer}") is not None:
                        break
                    time.sleep(0.05)
        except Exception:  # noqa: BLE001 - the coordinator gone already: nothing to tell
            pass

    def finished(self) -> None:
        """Say this process is done; then wait (still answering) until every process is."""
        self._call(self.client.key_value_set, f"{_PREFIX}/done/{self.index}", "1")
        for peer in range(self.count):
            while self._try(f"{_PREFIX}/done/{peer}") is None:
                time.sleep(0.05)
        self._stop.set()

    # the watch
    def _try(self, key: str) -> str | None:
        return self._call(self.client_try, key)

    def _call(self, method, *args):
        """`method(*args)` on the key-value store; the coordinator gone: `_lost`."""
        try:
            return method(*args)
        except Exception as err:  # noqa: BLE001
            self._lost(f"the coordinator (process 0) stopped answering ({_first(err)})")
            raise PeerLost(str(err)) from None

    def _beat(self) -> None:
        seen: dict[int, tuple[str | None, float]] = {}
        stale = stale_seconds()
        key = f"{_PREFIX}/alive/{self.index}"
        while not self._stop.is_set():
            try:
                self.client.key_value_increment(key, 1)
                aborted = self.client_try(f"{_PREFIX}/abort")
                if aborted is not None:
                    if not self._refused():  # else this process refuses too (`agree`)
                        who, _, why = aborted.partition(": ")
                        self._lost(f"{who} stopped ({why or 'an error'})")
                    return
                now = time.monotonic()
                for peer in range(self.count):
                    if peer == self.index or peer in self._done:
                        continue
                    if self.client_try(f"{_PREFIX}/done/{peer}") is not None:
                        self._done.add(peer)
                        continue
                    beat = self.client_try(f"{_PREFIX}/alive/{peer}")
                    last = seen.get(peer)
                    if last is None or beat != last[0]:
                        seen[peer] = (beat, now)
                    elif now - last[1] > stale:
                        self._lost(
                            f"process {peer} of {self.count} stopped answering (no heartbeat "
                            f"for {stale:g} s)"
                        )
                        return
            except Exception as err:  # noqa: BLE001 - the coordinator gone
                if self._stop.is_set():
                    return
                self._lost(f"the coordinator (process 0) stopped answering ({_first(err)})")
                return
            self._stop.wait(_BEAT_SECONDS)

    def client_try(self, key: str) -> str | None:
        try:
            return self.client.key_value_try_get(key)
        except Exception as err:
            if "NOT_FOUND" in str(err) or "not found" in str(err).lower():
                return None
            raise

    def _lost(self, why: str) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        try:  # so that process 0, if it is the one stopping, waits no longer for this one
            self.client.key_value_set(f"{_PREFIX}/gone/{self.index}", "1")
        except Exception:  # noqa: BLE001 - the coordinator gone
            pass
        self.on_lost(
            f"{self.where}: process {self.index} of {self.count} stops: {why}; the finished "
            "points stay in process 0's folder: run the same commands with --resume"
        )


def follower_stopped(where: str, signal_name: str, out) -> str | None:
    """The one line a process other than process 0 prints when a signal stops it (what
    it computed, and that process 0 holds the folder); `None` for process 0 or one
    process (`runtime.interrupt.message` says what the folder keeps)."""
    procs = _ACTIVE
    if procs is None or procs.index == 0:
        return None
    return (
        f"{where}: process {procs.index} of {procs.count} stopped by {signal_name}; it "
        f"computed {procs.computed} point(s), sent to process 0, which holds the folder "
        f"{out}: run the same commands with --resume to continue"
    )


def _shown(entry) -> str:
    return "nothing" if entry is None else str(entry[1])


def _first(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:160] if text else type(err).__name__


def _exit_with(line: str) -> None:
    """Print `line` (with where the finished points are, `Processes.where` says) and end
    this process at once: its folder's points are written atomically and its lock is the
    operating system's."""
    print(line, file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(1)
