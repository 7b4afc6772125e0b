"""A study's grid points spread over this process's devices and over processes.

**Devices of one process.** `map_on_devices(fn, items)` runs whole grid points at once,
one per device (a thread per device, each with `on_devices([device])`: JAX's default
device and the devices `shard_seeds` uses are that one), and yields each result as it
finishes. Inside `on_devices(devices)`, `point_devices()` names the devices the running
point may use; `shard_seeds` spreads its seeds over them (default: every device).

**Processes.** `start_processes(...)` joins JAX's own multi-process runtime
(`jax.distributed.initialize`; the coordinator's address, the number of processes and
this one's index given, or read from a cluster's environment such as SLURM's). Each
process then computes its share of the grid points (`Processes.share`) and sends every
finished point to the others through the runtime's key-value store (`send`, `receive`):
every process ends with every point, and only process 0 writes the study's folder
(`studies.runner`). A process that stops answering (killed, its machine gone) makes the
others stop within `stale_seconds()` with one line (`Processes` watches every peer's
heartbeat); the points already written stay, and `--resume` continues from them.
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

TIMEOUT_VARIABLE = "MEANFIELD_PROCESS_TIMEOUT"
DEFAULT_STALE_SECONDS = 10.0


def stale_seconds() -> float:
    """How long a silent peer is waited for (`MEANFIELD_PROCESS_TIMEOUT`, default 10 s),
    read when a multi-process run needs it, not at import (a bad value must not break
    `meanfield info`). A value that is not a finite positive number is a one-line
    `ValueError` naming the variable."""
    text = os.environ.get(TIMEOUT_VARIABLE)
    if text is None:
        return DEFAULT_STALE_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{TIMEOUT_VARIABLE}: seconds, a finite number > 0, got {text!r}")
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


def start_processes(
    coordinator: str | None = None, num_processes: int | None = None, process_id: int | None = None
) -> "Processes":
    """Join JAX's multi-process runtime (`jax.distributed.initialize`, before any other
    JAX computation) and return this process's `Processes`. Arguments left `None` come
    from the cluster's environment (SLURM, Open MPI, ...; `JAX_COORDINATOR_ADDRESS`)."""
    jax.distributed.initialize(
        coordinator_address=coordinator, num_processes=num_processes, process_id=process_id,
        # the runtime's own checks are slower than ours (`stale_seconds`), so a dead peer
        # is reported by one line of ours, not by the runtime's abort
        heartbeat_timeout_seconds=max(100, int(10 * stale_seconds())),
    )  # fmt: skip
    return Processes()


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
        self._done: set[int] = set()
        self._stop = threading.Event()
        self._watch = threading.Thread(target=self._beat, name="meanfield-heartbeat", daemon=True)
        self._watch.start()
        _ACTIVE = self

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

    def abort(self, line: str) -> None:
        """This process stops on an error (`line`, already printed): tell the others, which
        stop with one line of their own, and wait a little for them to go (the runtime ends
        a process whose coordinator, process 0, has gone, with a report of its own)."""
        self._stop.set()
        try:
            self.client.key_value_set(f"{_PREFIX}/abort", f"process {self.index}: {line}")
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
                    self._lost(f"{aborted.split(': ', 1)[0]} stopped on an error")
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
