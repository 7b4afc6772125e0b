"""The study runner shared by every `meanfield study ...`.

* each finished grid point is written atomically to `DIR/points/NAME.json`
  (temporary file, fsync, rename) as soon as it completes;
* `resume=True` loads the points already on disk instead of recomputing them,
  and refuses a folder made with a different configuration;
* a progress bar (tqdm) shows the current point and an ETA;
* `finish` writes `DIR/results.json`, again atomically.

Points are computed from `(seed, point)` alone, never from the order in which
they run, so a resumed study gives the same `results.json` as an uninterrupted
one.
"""

import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np


class StudyInputError(ValueError):
    """Bad input to a study: reported as one line, exit code 2."""


def to_json(obj: Any) -> Any:
    """Convert numpy / JAX scalars and arrays (and tuples) into plain JSON values.

    Non-finite floats become `None` (JSON has no NaN); explosions are counted
    separately, never hidden in a NaN.
    """
    if isinstance(obj, dict):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_json(v) for v in obj]
    if hasattr(obj, "__array__") and not isinstance(obj, str | bytes):
        arr = np.asarray(obj)
        return to_json(arr.tolist()) if arr.ndim else to_json(arr.item())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, bool | int | str) or obj is None:
        return obj
    if isinstance(obj, np.generic):
        return to_json(obj.item())
    raise TypeError(f"cannot store {type(obj).__name__} in JSON")


def _readable(path) -> None:
    """mkstemp creates files 0600; give results the usual mode (0666 less the umask)."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write JSON to `path` through a temporary file in the same folder and a rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(to_json(obj), f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        _readable(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def check_output_dir(out: Path) -> None:
    """Refuse an output folder that is a file or cannot be written; create nothing."""
    out = Path(out)
    if out.exists():
        if not out.is_dir():
            raise StudyInputError(f"--out: {out} exists and is not a folder")
        if not os.access(out, os.W_OK | os.X_OK):
            raise StudyInputError(f"--out: folder {out} is not writable")
        return
    parent = out.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise StudyInputError(f"--out: {parent} is a file, so {out} cannot be created")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StudyInputError(f"--out: cannot create {out}: {parent} is not writable")


def point_name(spec: dict) -> str:
    """A file-name-safe label of a grid point, e.g. `L64_M16_steps1`."""
    parts = []
    for key, value in spec.items():
        text = str(value)
        if isinstance(value, float):  # short where that is exact, else every digit
            text = f"{value:g}" if float(f"{value:g}") == value else repr(value)
        parts.append(f"{key}{text}")
    name = "_".join(parts)
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in name)


def device_description() -> str:
    import jax

    dev = jax.devices()[0]
    return f"{dev.platform}:{dev.device_kind} x{jax.device_count()}"


class StudyRunner:
    """Run the grid points of one study into an output folder.

    **Arguments:**

    - `study`: the study's name (stored in the results).
    - `out`: the output folder.
    - `config`: every setting that determines the results (JSON-able); a resume
      with a different configuration is refused.
    - `resume`: load the finished points of an earlier run instead of recomputing.
    - `overwrite`: discard an earlier run in `out`.
    - `progress`: show a progress bar.
    """

    def __init__(
        self,
        study: str,
        out: str | Path,
        config: dict,
        *,
        resume: bool = False,
        overwrite: bool = False,
        progress: bool = True,
    ):
        self.study = study
        self.out = Path(out)
        self.config = to_json(config)
        self.resume = resume
        self.overwrite = overwrite
        self.progress = progress
        self.computed: list[str] = []
        self.loaded: list[str] = []
        self.seconds: dict[str, float] = {}
        self.warnings: list[str] = []
        self._t0 = time.perf_counter()
        self._opened = False
        check_output_dir(self.out)

    @property
    def points_dir(self) -> Path:
        return self.out / "points"

    def open(self) -> "StudyRunner":
        """Create the folder and check (or write) `config.json`. Call after validating input."""
        config_path = self.out / "config.json"
        stored = {"study": self.study, "config": self.config}
        if config_path.exists():
            with open(config_path) as f:
                old = json.load(f)
            if self.resume:
                if old != stored:
                    diff = sorted(
                        k
                        for k in set(old.get("config", {})) | set(self.config)
                        if old.get("config", {}).get(k) != self.config.get(k)
                    ) or ["study"]
                    raise StudyInputError(
                        f"--resume: {self.out} holds a study with a different configuration "
                        f"(differs in: {', '.join(diff)}); use another --out or --overwrite"
                    )
            elif self.overwrite:
                shutil.rmtree(self.points_dir, ignore_errors=True)
                for f in self.out.glob("*"):
                    if f.is_file() and (f.suffix in (".json", ".png", ".npz")):
                        f.unlink()
            else:
                raise StudyInputError(
                    f"--out: {self.out} already holds a study; pass --resume to continue it "
                    "or --overwrite to start again"
                )
        try:
            self.points_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:  # a dangling link, a vanished mount, /proc, ...
            where = f" ({err.filename})" if err.filename else ""
            raise StudyInputError(
                f"--out: cannot create {self.out}: {err.strerror}{where}"
            ) from None
        if not config_path.exists():
            write_json_atomic(config_path, stored)
        self._opened = True
        return self

    def pending(self, specs: Sequence[dict]) -> list[dict]:
        """The specs whose results are not on disk yet (all of them unless resuming)."""
        if not self.resume:
            return list(specs)
        return [s for s in specs if not (self.points_dir / f"{point_name(s)}.json").exists()]

    def run_points(
        self,
        specs: Sequence[dict],
        compute: Callable[[dict], dict],
        *,
        describe: Callable[[dict], str] | None = None,
    ) -> list[dict]:
        """Compute (or, on resume, load) one result per grid point, in order.

        `compute(spec)` returns a JSON-able dict; it must depend only on the spec
        and the study configuration. Each result is written as soon as it is done.
        """
        if not self._opened:
            self.open()
        from tqdm.auto import tqdm

        names = [point_name(s) for s in specs]
        if len(set(names)) != len(names):
            raise ValueError("grid points must be distinct")
        results = []
        bar = tqdm(total=len(specs), desc=self.study, disable=not self.progress, unit="pt")
        with bar:
            for spec, name in zip(specs, names, strict=True):
                path = self.points_dir / f"{name}.json"
                if self.resume and path.exists():
                    with open(path) as f:
                        stored = json.load(f)
                    self.loaded.append(name)
                    self.seconds[name] = stored["seconds"]
                    results.append(stored["point"])
                    bar.update(1)
                    continue
                bar.set_postfix_str(describe(spec) if describe else name)
                t0 = time.perf_counter()
                point = to_json({**spec, **compute(spec)})
                seconds = time.perf_counter() - t0
                write_json_atomic(path, {"point": point, "seconds": seconds})
                self.computed.append(name)
                self.seconds[name] = seconds
                results.append(point)
                bar.update(1)
        return results

    def artifact(self, name: str, compute: Callable[[], dict]) -> dict:
        """A named dict of arrays computed once and cached in `DIR/points/NAME.npz`.

        Use it for expensive shared pieces (a reference limit) so that a resumed
        study recomputes nothing already finished.
        """
        if not self._opened:
            self.open()
        path = self.points_dir / f"{name}.npz"
        if self.resume and path.exists():
            with np.load(path) as data:
                self.loaded.append(name)
                return {k: data[k] for k in data.files}
        t0 = time.perf_counter()
        arrays: dict[str, Any] = {k: np.asarray(v) for k, v in compute().items()}
        fd, tmp = tempfile.mkstemp(dir=self.points_dir, prefix=f".{name}.", suffix=".npz")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        _readable(tmp)
        os.replace(tmp, path)
        self.computed.append(name)
        self.seconds[name] = time.perf_counter() - t0
        return arrays

    def warn(self, message: str) -> None:
        """Record a warning in the results and print it."""
        import sys

        self.warnings.append(message)
        print(f"warning: {message}", file=sys.stderr)

    def finish(self, results: dict, timing: dict | None = None) -> Path:
        """Write `DIR/results.json`; `results` holds `points`, `fits`, `reference`, ...

        `timing` (extra seconds to record) is merged into the `timing` entry with the
        total time, the device and the per-point seconds.
        """
        body = {"study": self.study, "config": self.config}
        body.update(results)
        body["warnings"] = list(body.get("warnings", [])) + self.warnings
        body["timing"] = {
            "total_seconds": time.perf_counter() - self._t0,
            "device": device_description(),
            "points_seconds": dict(self.seconds),
            "computed": list(self.computed),
            "loaded": list(self.loaded),
            **(timing or {}),
        }
        path = self.out / "results.json"
        write_json_atomic(path, body)
        return path


def start_study(args, cfg: dict) -> StudyRunner:
    """The common start of every study's `run`: the float64 switch from `cfg["x64"]`, then
    the runner over `args.out` with the common options, opened."""
    jax.config.update("jax_enable_x64", bool(cfg["x64"]))
    return StudyRunner(
        args.study,
        args.out,
        cfg,
        resume=args.resume,
        overwrite=args.overwrite,
        progress=not args.no_progress,
    ).open()
