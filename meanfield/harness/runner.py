"""The study runner shared by every `meanfield study ...`: `StudyRunner` computes a
study's grid points (or, on `--resume`, loads the valid ones), writes each as soon as it
is done, checks one point by an independent route (op by op: `SelfCheckError` when the
compiled program computed it wrong), and writes `results.json` with its timings;
`start_study` opens it with the common options.

The folder it writes into, its lock, manifest, seals and resume, are
`meanfield.harness.folder`; what computed the results, `meanfield.harness.identity`; the
headline printed at the end, `meanfield.harness.summary`.

Points are computed from `(seed, point)` alone, never from the order in which
they run, so a resumed study gives the same `results.json` as an uninterrupted
one.
"""

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Self

import jax
import numpy as np

from ..io.plotting import figure_export
from ..runtime import distribution
from ..runtime.compilation import CompileCounter
from . import cache
from .folder import StudyFolder, point_name, to_json, write_json_atomic
from .identity import device_description, versions
from .self_check import (
    SELF_CHECK_ROUTE,
    SELF_CHECK_RTOL,
    SelfCheckError,
    compare_points,
    depth_cost,
    recheck_point,
    self_check_index,
    split_terms,
)
from .summary import exploded_warning, summary

__all__ = [  # the self-check's names, kept importable from here
    "SELF_CHECK_ROUTE", "SELF_CHECK_RTOL", "SelfCheckError", "StudyRunner", "compare_points",
    "depth_cost", "self_check_index", "start_study",
]  # fmt: skip


class StudyRunner(StudyFolder):
    """Run the grid points of one study into an output folder (a `StudyFolder`).

    **Arguments:**

    - `study`: the study's name (stored in the results and the manifest).
    - `out`: the output folder.
    - `config`: every setting that determines the results (JSON-able); a resume
      with a different configuration is refused.
    - `resume`: load the finished (and valid) points of an earlier run instead of
      recomputing them.
    - `overwrite`: discard an earlier run of the same study in `out` (only the files
      it wrote; a study of another kind is refused).
    - `progress`: show a progress bar.

    Nothing is written before `open` (which `run_points`, `artifact` and `start_study`
    call); `open` takes the folder's lock and `finish` or `close` releases it.
    """

    share_artifacts = False  # `artifact` caches its arrays: set where a study's config
    # names everything they depend on (the user's code too)

    def __init__(self, *args, progress: bool = True, self_check: bool = True, **kwargs):
        super().__init__(*args, **kwargs)  # study, out, config, resume, overwrite
        self.progress = progress
        self.self_check = bool(self_check)
        self.self_checks: list[dict] = []
        self.self_check_seconds: list[float] = []
        self.placement: dict[str, dict] = {}
        self._exchanges = 0  # `run_points` calls so far: each exchanges its own points
        # the programs XLA compiles from here to `close`, in every thread (`timing.compiles`)
        self._compiles: CompileCounter | None = CompileCounter().__enter__()
        self._self_check_compiles = 0

    def run_points(
        self,
        specs: Sequence[dict],
        compute: Callable[[dict], dict],
        *,
        describe: Callable[[dict], str] | None = None,
        check: "Callable[[dict], dict] | bool" = True,
        eager: bool = True,
        numpy: bool = True,
        route: str | None = None,
        atol: float = 0.0,
        check_cost: Callable[[dict], float] = depth_cost,
        variant: Callable[[dict], dict] | None = None,
        precision: str | None = None,
        spread: str = "points",
        unit: str = "pt",
    ) -> list[dict]:
        """Compute (or, on resume, load) one result per grid point, in order, then check
        one of them by an independent route. The progress bar counts them in `unit`s (a
        grid point; a study whose points are chunks of seeds says "chunk").

        `compute(spec)` returns a JSON-able dict; it must depend only on the spec
        and the study configuration. Each result is written as soon as it is done,
        with the configuration's hash, the spec, the seed and a checksum; on resume a
        stored point is used only if all of them match.

        **The self-check.** One grid point, drawn from the study's seed among the cheaper
        half by `check_cost` (default: the depth; `self_check_index`), is computed again
        and compared with its result leaf by leaf
        (`compare_points`): by `compute` itself (`check=True`) or by `check(spec)` (a
        study whose `compute` calls programs compiled ahead of time gives the same
        computation uncompiled), run op by op (`eager`, the default: `jax.disable_jit()`,
        `meanfield._eager.op_by_op`; no fusion or tiling of the compiler touches it;
        each primitive evaluated by NumPy where `meanfield._numpy_ops` has a rule, the
        others compiled one by one: the record's `primitives` counts them; `numpy=False`:
        every primitive compiled one by one, XLA's own kernels, for a float32 point whose
        round-off the two kernels' differences would outgrow) or
        as it is (`eager=False`,
        an independent formulation; `route` then says which). The agreement goes to
        `results.json` (`self_check`); a difference beyond round-off (`SELF_CHECK_RTOL`)
        raises `SelfCheckError` naming the point. `variant(spec)`: where a point trains
        networks for many steps, round-off grows chaotically along the trajectory, so its
        compiled and op-by-op results differ by more than round-off without a miscompile;
        the check then computes `variant(spec)` (the same point with a few steps, say)
        both compiled and op by op and compares those (`route` says so). `precision`
        ("float32"): the points are computed in float32 whatever JAX's default (its
        round-off bound then applies).
        `atol`: an absolute allowance for the
        adaptive solves inside a point (a step accepted compiled and rejected op by op, as
        round-off can flip, moves its result by up to the solve's tolerance), at most 100
        times that tolerance. `check=False` skips it (a second call whose points the first
        one's check covers). A runner made with `self_check=False` (`--no-self-check`)
        checks nothing; its `results.json` says so (`self_check_skipped`).

        **Devices and processes** (`meanfield.runtime.distribution`). `spread="points"`
        (the default) runs whole points at once, one per device of this process;
        `"seeds"` runs one point at a time, its seeds over every device (a study whose
        `compute` calls `shard_seeds`). Under several processes (`--distributed`) each
        computes its share of the points and receives the others', so every process
        returns every point; only process 0 writes them (`writer`). Where each point ran
        goes to `results.json` (`timing.placement`: its process and devices, `mesh`).
        """
        if not self._opened:
            self.open()
        names = [point_name(s) for s in specs]
        if len(set(names)) != len(names):
            raise ValueError("grid points must be distinct")
        if spread not in ("points", "seeds"):
            raise ValueError(f"spread must be 'points' or 'seeds', got {spread!r}")
        procs = distribution.active()
        call = self._exchanges
        self._exchanges += 1
        results: list = [None] * len(specs)
        stored = self._stored_points(specs, names, procs, call)
        for i, name in enumerate(names):
            if name in stored:
                results[i] = stored[name]["point"]
                self.loaded.append(name)
                self.seconds[name] = stored[name]["seconds"]
                self.placement[name] = {**(stored[name]["placement"] or {}), "loaded": True}
        todo = [i for i, name in enumerate(names) if name not in stored]
        self._compute_points(
            specs, names, results, todo, compute, describe, procs, call, spread, unit
        )
        if check is not False and specs and self.self_check and self.writer:
            recompute = compute if check is True else check
            if route is None:
                if not eager:
                    raise ValueError("route: say how an eager=False self-check computes")
                route = SELF_CHECK_ROUTE
            costs = [check_cost(spec) for spec in specs]
            self._self_check(
                specs, names, results, recompute, route, eager=eager, atol=atol, costs=costs,
                variant=variant, precision=precision, numpy=numpy,
            )  # fmt: skip
        return results

    def _stored_points(self, specs, names, procs, call: int) -> dict[str, dict]:
        """The valid points already on disk (`--resume`), by name: process 0's folder
        decides, and under several processes sends them to the others (`run_points`)."""
        stored = {}
        if self.writer:
            for spec, name in zip(specs, names, strict=True):
                if self._valid_on_disk(name, spec):
                    record = self._checked[name][0]
                    stored[name] = {
                        "point": record["point"],
                        "seconds": float(record.get("seconds") or 0.0),
                        "placement": record.get("placement"),
                    }
                    self._own(self.points_dir / f"{name}.json")
        if procs is not None:  # process 0's folder decides what is finished
            if procs.index == 0:
                procs.send(f"{self.study}/{call}/loaded", stored)
            stored = procs.receive(f"{self.study}/{call}/loaded")
        return stored

    def _compute_points(
        self, specs, names, results: list, todo: list[int], compute, describe, procs,
        call: int, spread: str, unit: str,
    ) -> None:  # fmt: skip
        """Compute this process's share of the points `todo` into `results` (writing each
        as it is done), and receive the other processes' share, under the progress bar
        (`run_points`)."""
        from tqdm.auto import tqdm

        mine = procs.share(todo) if procs is not None else todo
        others = sorted(set(todo) - set(mine))
        devices = distribution.point_devices() or jax.local_devices()
        rank = procs.index if procs is not None else 0
        bar = tqdm(total=len(specs), desc=self.study, disable=not self.progress, unit=unit)
        bar.update(len(specs) - len(todo))

        def done(i: int, point: dict, seconds: float, placement: dict) -> None:
            name = names[i]
            results[i] = point
            if self.writer:
                self._write_point(name, specs[i], point, seconds, placement)
            self.computed.append(name)
            self.seconds[name] = seconds
            self.placement[name] = placement
            bar.update(1)

        def compute_one(i: int) -> dict:
            if threading.current_thread() is threading.main_thread():  # the point now
                bar.set_postfix_str(describe(specs[i]) if describe else names[i])
            point, _ = split_terms(compute(specs[i]))  # the scales: the self-check's
            return to_json({**specs[i], **point})

        def receive_ready(wait: bool) -> None:
            """The points other processes finished (all of them where `wait`)."""
            assert procs is not None
            for i in others:
                if results[i] is None:
                    key = f"{self.study}/{call}/p/{names[i]}"
                    got = procs.receive(key) if wait else procs.poll(key)
                    if got is not None:
                        done(i, got["point"], got["seconds"], got["placement"])

        with bar:
            if spread == "points":
                runs = distribution.map_on_devices(compute_one, mine, devices)
            else:  # one point at a time, its seeds over every device (`shard_seeds`)
                runs = ((k, *_timed(compute_one, i), len(devices)) for k, i in enumerate(mine))
            for k, point, seconds, mesh in runs:
                i = mine[k]
                placement = {"process": rank, "mesh": mesh}
                done(i, point, seconds, placement)
                if procs is not None:
                    record = {"point": point, "seconds": seconds, "placement": placement}
                    procs.send(f"{self.study}/{call}/p/{names[i]}", record)
                    procs.computed += 1
                    receive_ready(wait=False)
            if procs is not None:
                receive_ready(wait=True)

    def _self_check(self, specs, names, results, recompute, route: str, **kwargs) -> None:
        """Recompute one seeded-random point by `recompute` and compare (`run_points`;
        `self_check.recheck_point`)."""
        recheck_point(self, specs, names, results, recompute, route, **kwargs)

    @contextlib.contextmanager
    def stage_progress(self, label: str, total: int, unit: str):
        """Within: a bar of a long stage's `total` `unit`s; yields the function counting one."""
        from tqdm.auto import tqdm

        with tqdm(
            total=total, desc=f"{self.study}: {label}", unit=unit, disable=not self.progress
        ) as bar:
            yield lambda: bar.update(1)

    def say(self, text: str) -> None:
        """One line of progress (a long stage starting or ending), unless `progress` is off."""
        if self.progress:
            print(f"{self.study}: {text}", flush=True)

    def artifact(
        self,
        name: str,
        compute: Callable[[], dict],
        *,
        describe: str | None = None,
        shared: bool | None = None,
    ) -> dict:
        """A named dict of arrays computed once and cached in `DIR/points/NAME.npz`
        (with its checksum in `NAME.npz.json`).

        Use it for expensive shared pieces (a reference limit) so that a resumed
        study recomputes nothing already finished; a stored one that does not match
        is recomputed. With `shared` (default: the runner's `share_artifacts`), it is
        also kept in the artifact cache (`harness.cache`: by this configuration and
        code), and a run of the same configuration in another folder reads it from
        there. Its start and its time are said (`describe`, else the name): these stages
        run before the points' progress bar. In a multi-process run, process 0 computes
        (or reads) it and sends it to the others, which wait for it
        (`runtime.distribution`): every process asks for the same artifacts, and none is
        asked for inside another's `compute` (refused: only process 0 computes).
        """
        if not self._opened:
            self.open()
        if self._artifact_computing is not None:
            raise RuntimeError(
                f"artifact {name!r} asked for while {self._artifact_computing!r} is computed "
                "(in a multi-process run only process 0 computes it): ask for it before"
            )
        procs = distribution.active()
        if procs is None or procs.count < 2:
            return self._artifact(name, compute, describe, shared)
        self._artifacts_called[name] = calls = self._artifacts_called.get(name, 0) + 1
        key = f"{self.study}/artifact/{name}/{calls}"
        label = describe or name.replace("_", " ")
        if procs.index == 0:
            arrays = self._artifact(name, compute, describe, shared)
            procs.send(key, cache.encode_arrays(arrays))
            return arrays
        self.say(f"{label}: from process 0 ...")
        arrays = cache.decode_arrays(procs.receive(key))
        self.received.append(name)
        return arrays

    def _artifact(self, name: str, compute, describe, shared) -> dict:
        """`artifact` in this process: the folder's, the artifact cache's, or computed."""
        if self.resume:
            stored = self._load_artifact(name)
            if stored is not None:
                self.loaded.append(name)
                return stored
        label = describe or name.replace("_", " ")
        shared = self.share_artifacts if shared is None else shared
        folder = cache.cache_folder() if shared else None
        if folder is not None:
            cached, why = cache.load(folder, name, self.config_hash)
            if cached is not None:
                self.say(f"{label}: read from the artifact cache ({folder}), as an earlier "
                         "run of this configuration computed it")  # fmt: skip
                self._write_artifact(name, cached)
                self.cached.append(name)
                return cached
            if why != "absent":
                self._say(f"{label}: its copy in the artifact cache is not used ({why})")
        t0 = time.perf_counter()
        self.say(f"{label} ...")
        self._artifact_computing = name
        try:
            arrays: dict[str, Any] = {k: np.asarray(v) for k, v in compute().items()}
        finally:
            self._artifact_computing = None
        self.say(f"{label}: done in {time.perf_counter() - t0:.0f} s")
        self._write_artifact(name, arrays)
        if folder is not None:
            why = cache.store(folder, name, self.config_hash, arrays)
            if why:
                self._say(f"{label}: not kept in the artifact cache ({why})")
        self.computed.append(name)
        self.seconds[name] = time.perf_counter() - t0
        return arrays

    def warn(self, message: str) -> None:
        """Record a warning in the results and print it."""
        import sys

        self.warnings.append(message)
        print(f"warning: {message}", file=sys.stderr)

    def finish(
        self, results: dict, timing: dict | None = None, *, plot: Callable | None = None
    ) -> Path:
        """Write `DIR/results.json`; `results` holds `points`, `fits`, `reference`, ...

        `timing` (extra seconds to record) is merged into the `timing` entry with the
        total time, the device, the per-point seconds and the points recomputed because
        their files did not match (`recomputed`: how many, `recomputed_points`: which and
        why). `versions` records the package versions, the device and the float
        precision. `plot(out, results)`, if given, then draws the study's figures (in the
        house style, `figure_export`) from the written `results.json` itself (so
        `meanfield plot DIR` redraws the same figures). The files written since `open`
        (figures) are recorded in the manifest, the folder's lock is released, and a
        summary (where, and the headline fits) is printed."""
        if not self._opened:
            self.open()
        body = {"study": self.study, "config": self.config}
        body.update(results)
        body["warnings"] = list(body.get("warnings", [])) + self.warnings
        # every study's explosions reported: the draws its summaries left out, named,
        # where the study has not warned of them itself
        unsaid = exploded_warning(body.get("points"))
        if unsaid and not any("explod" in str(w) for w in body["warnings"]):
            self.warn(unsaid)
            body["warnings"].append(unsaid)
        body["versions"] = versions()
        body["self_check"] = list(self.self_checks)
        procs = distribution.active()
        if not self.self_check:
            body["self_check_skipped"] = "--no-self-check or MEANFIELD_NO_SELF_CHECK=1"
        body["timing"] = {
            "total_seconds": time.perf_counter() - self._t0,
            "device": device_description(),
            "points_seconds": dict(self.seconds),
            "computed": list(self.computed),
            "loaded": list(self.loaded),
            "from_artifact_cache": list(self.cached),
            "recomputed": len(self.recomputed),
            "recomputed_points": dict(self.recomputed),
            "self_check_seconds": list(self.self_check_seconds),
            # where each point ran: its process and the devices it used (`mesh`)
            "placement": {
                "processes": procs.count if procs is not None else 1,
                "devices_per_process": len(jax.local_devices()),
                "points": dict(self.placement),
            },
            # the programs XLA compiled in this run (persistent-cache hits not counted),
            # the self-check's op-by-op operations among them
            "compiles": {
                "programs": self._compiles.compiles if self._compiles else None,
                "seconds": self._compiles.compile_seconds if self._compiles else None,
                "longest_seconds": self._compiles.longest_seconds if self._compiles else None,
                "cache_hits": self._compiles.cache_hits if self._compiles else None,
                "self_check_programs": self._self_check_compiles,
            },
            **(timing or {}),
        }
        path = self.out / "results.json"
        self._own(path)
        write_json_atomic(path, body)
        if plot is not None:
            t0 = time.perf_counter()
            with figure_export():
                plot(self.out, json.loads(path.read_text()))
            body["timing"]["plot_seconds"] = time.perf_counter() - t0
            write_json_atomic(path, body)
        # the figures and other files the study wrote into the folder since `open`
        for rel, mtime in self._files().items():
            if Path(rel).name.startswith(".") and rel.endswith(".tmp"):
                continue
            if self._before.get(rel) != mtime:
                self._own(self.out / rel)
        printed = summary(body, self.out)  # kept for `StudyResults.headline()`, but where
        body["summary"] = printed.splitlines()[:-1]  # it wrote (the folder's own path)
        write_json_atomic(path, body)
        self.close()
        print(printed, flush=True)  # the result, with or without progress
        if procs is not None:
            procs.finished()
        return path

    def close(self) -> None:
        super().close()
        self._stop_counting()

    def _stop_counting(self) -> None:
        counter, self._compiles = getattr(self, "_compiles", None), None
        if counter is not None:
            counter.__exit__(None, None, None)


class FollowerRunner(StudyRunner):
    """A `StudyRunner` for every process but process 0 of a multi-process run: it computes
    its share of the points and receives the others' (`run_points`), receives what every
    process needs from process 0 (`artifact`), and writes nothing: process 0 holds the
    folder."""

    writer = False

    def open(self) -> Self:
        self._opened = True
        return self

    def close(self) -> None:
        self._opened = False
        self._stop_counting()

    def _own(self, path: Path) -> None:
        pass

    def _write_artifact(self, name: str, arrays: dict) -> None:
        pass

    def _load_artifact(self, name: str) -> dict | None:
        return None  # process 0's folder may be on another machine: it sends what it read

    def finish(
        self, results: dict, timing: dict | None = None, *, plot: Callable | None = None
    ) -> Path:
        procs = distribution.active()
        assert procs is not None
        here = sum(
            p.get("process") == procs.index and not p.get("loaded") for p in self.placement.values()
        )
        received = f"; {', '.join(self.received)} from process 0" if self.received else ""
        print(
            f"{self.study}: process {procs.index} of {procs.count}: computed {here} of "
            f"{len(self.placement)} point(s) here{received}; process 0 writes {self.out}",
            flush=True,
        )
        procs.finished()
        return self.out / "results.json"


def _timed(fn, *args) -> tuple:
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


@contextlib.contextmanager
def study_precision(x64: bool):
    """Within: JAX in a study's precision (`jax_enable_x64` = `x64`), restored after: a
    user's block and law tried before the study starts, in the dtypes it runs in, and the
    figures' few computations redrawn from results.json."""
    before = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", bool(x64))
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)


def start_study(args, cfg: dict) -> StudyRunner:
    """The common start of every study's `run`: the float64 switch from `cfg["x64"]`, then
    the runner over `args.out` with the common options, opened."""
    jax.config.update("jax_enable_x64", bool(cfg["x64"]))
    procs = distribution.active()
    if procs is not None:  # several processes run one configuration, or all refuse
        refused = procs.agree(agreement(args, cfg))
        if refused:
            from ..runtime.errors import StudyInputError

            raise StudyInputError(refused)
    runner = StudyRunner if procs is None or procs.index == 0 else FollowerRunner
    return runner(
        args.study,
        args.out,
        cfg,
        resume=args.resume,
        overwrite=args.overwrite,
        progress=not args.no_progress,
        self_check=self_check_wanted(args),
    ).open()


def agreement(args, cfg: dict) -> dict[str, tuple[str, str]]:
    """What the processes of one run must share (`Processes.agree`): the study, each
    entry of its configuration (config.json's; named by its option, `--seed`, where it has
    one) and the code's identity (`identity.code_identity`), each as (hash, shown)."""
    from .folder import canonical_json, sha256_text
    from .identity import code_identity

    def entry(value) -> tuple[str, str]:
        text = canonical_json(to_json(value))
        shown = value if isinstance(value, str) else text
        return sha256_text(text), shown if len(shown) <= 40 else shown[:37] + "..."

    record = {"the study": entry(args.study)}
    for key, value in cfg.items():
        name = f"--{key.replace('_', '-')}" if hasattr(args, key) else f"config {key!r}"
        record[name] = entry(value)
    code = code_identity()
    for key in ("meanfield", "jax", "jaxlib"):
        record[key] = entry(code.get(key))
    source = str(code.get("source_sha256"))
    record["the meanfield source"] = (source, f"sha256 {source[:12]}")
    return record


def self_check_wanted(args) -> bool:
    """False where `--no-self-check` was given or `MEANFIELD_NO_SELF_CHECK=1` is set."""
    if getattr(args, "no_self_check", False):
        return False
    return os.environ.get("MEANFIELD_NO_SELF_CHECK", "") not in ("1", "true", "yes")
