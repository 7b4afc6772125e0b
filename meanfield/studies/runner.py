"""The study runner shared by every `meanfield study ...`.

* **one writer per folder**: `open` takes an OS-level lock (`fcntl.flock` on
  `DIR/.meanfield-lock`, which holds the holder's pid) before it writes anything, and
  holds it until `finish` (or `close`, or the process's end: the kernel releases the
  lock of a killed process, so a stale lock never blocks a later `--resume`); a second
  run on the same folder is refused at once, naming the folder and the holder's pid;
* **ownership**: every file the study writes is recorded in `DIR/.meanfield-manifest.jsonl`
  (a header line naming the study, then one line per file, appended as they are
  written); `overwrite=True` removes exactly those files (the user's own files in the
  folder stay; only results, points and figures: `.json`, `.npz`, `.png`), and refuses a
  folder without such a manifest or holding a study of another kind (by its manifest
  or its `config.json`); a run with neither flag refuses a folder holding any
  `results.json`, `config.json` or points;
* **no links followed**: a symbolic link at the folder's top level or in `points/`
  (the lock file, a figure, `points/` itself) is refused before anything is written,
  so that no write or delete lands outside the folder;
* **validated points**: each finished grid point is written atomically to
  `DIR/points/NAME.json` (temporary file, fsync, rename) as soon as it completes, with
  the hash of the configuration, the point's coordinates, the master seed and a
  SHA-256 checksum of the whole record; shared arrays (`artifact`) get a checksummed
  side file `NAME.npz.json`;
* `resume=True` loads the points already on disk instead of recomputing them, and
  refuses a folder made with a different configuration, or one whose `config.json`
  is missing or unreadable beside existing points; a point file that does not match
  (truncated, garbled, edited, copied from another seed or configuration or point) is
  recomputed, with a warning on stderr, never used; `results.json` lists them under
  `timing.recomputed_points` and counts them in `timing.recomputed`;
* a progress bar (tqdm) shows the current point and an ETA;
* `finish` writes `DIR/results.json`, again atomically.

Points are computed from `(seed, point)` alone, never from the order in which
they run, so a resumed study gives the same `results.json` as an uninterrupted
one.
"""

import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import math
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ..fits import fixed_text, theory_inside


class StudyInputError(ValueError):
    """Bad input to a study: reported as one line, exit code 2."""


class _FolderInUse(StudyInputError):
    """Another run holds the output folder's lock."""


class SelfCheckError(RuntimeError):
    """A study's grid point recomputed op by op differs from its compiled result beyond
    round-off: the compiler computed it wrong. Reported as one line naming the point,
    exit code 3; no results.json is written."""


# the largest relative difference between a point computed compiled and op by op that is
# round-off (per leaf of the point, relative to that leaf's largest entry)
SELF_CHECK_RTOL = {"float64": 1e-6, "float32": 1e-2}
SELF_CHECK_ROUTE = "op by op (jax.disable_jit)"


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


LOCK_NAME = ".meanfield-lock"
MANIFEST_NAME = ".meanfield-manifest.jsonl"
POINT_FORMAT = 2
# files of an earlier runner (no manifest): what it is known to have written
_LEGACY_FILES = ("config.json", "results.json")
_LEGACY_POINT_SUFFIXES = (".json", ".npz")

# runners holding a folder's lock in this process (released by `release_all`)
_OPEN_RUNNERS: "weakref.WeakSet[StudyRunner]" = weakref.WeakSet()


def canonical_json(obj: Any) -> str:
    """The one text of a JSON value that checksums are taken of (sorted keys, no spaces)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _sealed(record: dict) -> dict:
    """`record` with its checksum (`sha256` of its canonical JSON) added."""
    return {**record, "sha256": sha256_text(canonical_json(record))}


def _seal_ok(record: Any) -> bool:
    if not isinstance(record, dict) or not isinstance(record.get("sha256"), str):
        return False
    body = {k: v for k, v in record.items() if k != "sha256"}
    try:
        return sha256_text(canonical_json(body)) == record["sha256"]
    except (TypeError, ValueError):
        return False


def release_all() -> None:
    """Release the folder locks of every runner of this process (the command line and
    `run_study` call it when a study returns or fails)."""
    for runner in list(_OPEN_RUNNERS):
        runner.close()


def _lock_holder(fd: int) -> str:
    """The pid written in a lock file by its holder ('unknown' if it has not yet)."""
    for _ in range(20):
        try:
            text = os.pread(fd, 64, 0).decode(errors="replace").strip()
        except OSError:
            text = ""
        if text:
            return text.split()[0]
        time.sleep(0.05)
    return "unknown"


def _link_refusal(path: Path) -> str:
    return (
        f"--out: {path} is a symbolic link; a study never writes or deletes through a link "
        "inside its folder: remove it or use another --out"
    )


# what a study writes, so what --overwrite may delete of the files its manifest lists
_REMOVABLE_SUFFIXES = (".json", ".npz", ".png")


def _removable(rel: str) -> bool:
    parts = Path(rel).parts
    top = len(parts) == 1
    in_points = len(parts) == 2 and parts[0] == "points"
    return (top or in_points) and rel.endswith(_REMOVABLE_SUFFIXES)


def probe_lock(out: str | Path) -> None:
    """Refuse at once (StudyInputError naming the holder's pid) a folder whose lock another
    run holds; create and change nothing. The command line calls it before validating
    the rest of the input, so that a second run is refused in well under a second of
    its own work; `StudyRunner.open` takes the lock itself."""
    path = Path(out) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # no lock file (or none readable, or a link): `open` decides
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            holder = _lock_holder(fd)
            raise StudyInputError(
                f"--out: {out} is in use by another meanfield run (pid {holder}); "
                "wait for it to end or use another --out"
            ) from None
    finally:
        os.close(fd)  # closing releases the probe's shared lock


def self_check_index(seed, study: str, call: int, costs: "int | Sequence[float]") -> int:
    """The grid point that the `call`-th self-check of a study recomputes: uniform among
    the points whose cost is at most the median cost (`costs`, one per point; an integer
    `n`: n points of equal cost), drawn from the study's seed and name (the same point
    for the same seed).

    The cost is what running a point op by op grows with: its depth (a layer costs about
    10⁴ times more op by op than compiled), while a compiler's tiling depends on the
    widths, dimensions and input counts, not on a loop's trip count; the cheaper half of
    a grid holds every width of it in the studies' grids."""
    import zlib

    costs = [1.0] * costs if isinstance(costs, int) else [float(c) for c in costs]
    median = float(np.median(costs))
    eligible = [i for i, c in enumerate(costs) if c <= median]
    seed = seed if isinstance(seed, int) and seed >= 0 else 0
    draw = np.random.default_rng([seed, zlib.crc32(study.encode()), call])
    return eligible[int(draw.integers(len(eligible)))]


def depth_cost(spec: dict) -> float:
    """The default self-check cost of a grid point: its depth `L` (1 without one)."""
    value = spec.get("L", 1)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 1.0


def _numeric(value) -> bool:
    if isinstance(value, bool):
        return False
    if value is None or isinstance(value, int | float):
        return True
    return isinstance(value, list) and all(_numeric(v) for v in value)


def _flat(value) -> list:
    return [x for v in value for x in _flat(v)] if isinstance(value, list) else [value]


def compare_points(
    stored: Any, fresh: Any, where: str = "", *, atol: float = 0.0
) -> tuple[float, str]:
    """The largest relative difference between two JSON values of a point, and where.

    Numbers (and nested lists of numbers and None) compare as arrays: the largest absolute
    difference, less `atol` (an allowance for adaptive solves inside the point, whose step
    choices round-off can flip), over the array's largest entry (absolute where that is
    0); a None (a non-finite value) on one side only, a shape, key, string or flag that
    differs, is an infinite difference. **Returns:** `(difference, path)`, e.g.
    `(3e-16, "delta_h[2]")`."""
    label = where or "the point"
    if _numeric(stored) and _numeric(fresh):
        a, b = _flat(stored), _flat(fresh)
        if (isinstance(stored, list), len(a)) != (isinstance(fresh, list), len(b)):
            return math.inf, label
        if any((x is None) != (y is None) for x, y in zip(a, b, strict=True)):
            return math.inf, label
        pairs = [(float(x), float(y)) for x, y in zip(a, b, strict=True) if x is not None]
        if not pairs:
            return 0.0, label
        scale = max(abs(y) for _, y in pairs)
        diff = max(0.0, max(abs(x - y) for x, y in pairs) - atol)
        return (diff / scale if scale > 0 else diff), label
    if isinstance(stored, dict) and isinstance(fresh, dict):
        if set(stored) != set(fresh):
            return math.inf, f"{label} (keys {sorted(set(stored) ^ set(fresh))})"
        worst = (0.0, label)
        for key in stored:
            found = compare_points(
                stored[key], fresh[key], f"{where}.{key}" if where else key, atol=atol
            )
            worst = max(worst, found, key=lambda t: t[0])
        return worst
    if isinstance(stored, list) and isinstance(fresh, list):
        if len(stored) != len(fresh):
            return math.inf, label
        worst = (0.0, label)
        for k, (x, y) in enumerate(zip(stored, fresh, strict=True)):
            found = compare_points(x, y, f"{where}[{k}]", atol=atol)
            worst = max(worst, found, key=lambda t: t[0])
        return worst
    return (0.0, label) if stored == fresh else (math.inf, label)


class StudyRunner:
    """Run the grid points of one study into an output folder.

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

    def __init__(
        self,
        study: str,
        out: str | Path,
        config: dict,
        *,
        resume: bool = False,
        overwrite: bool = False,
        progress: bool = True,
        self_check: bool = True,
    ):
        self.study = study
        self.out = Path(out)
        self.config = to_json(config)
        self.resume = resume
        self.overwrite = overwrite
        self.progress = progress
        self.self_check = bool(self_check)
        self.computed: list[str] = []
        self.loaded: list[str] = []
        self.recomputed: dict[str, str] = {}
        self.seconds: dict[str, float] = {}
        self.warnings: list[str] = []
        self.self_checks: list[dict] = []
        self.self_check_seconds: list[float] = []
        self.code = code_identity()
        self.config_hash = sha256_text(
            canonical_json({"study": study, "config": self.config, "code": self.code})
        )
        self._t0 = time.perf_counter()
        self._opened = False
        self._lock_fd: int | None = None
        self._lock_created = False
        self._owned: set[str] = set()
        self._before: dict[str, int] = {}
        self._checked: dict[str, tuple[Any, str]] = {}
        check_output_dir(self.out)

    @property
    def points_dir(self) -> Path:
        return self.out / "points"

    # -- the lock -------------------------------------------------------------------

    def _lock(self) -> None:
        """Take the folder's lock or refuse (StudyInputError naming the holder's pid)."""
        path = self.out / LOCK_NAME
        while True:
            existed = path.exists()
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            except OSError as err:
                if err.errno == errno.ELOOP:
                    raise StudyInputError(_link_refusal(path)) from None
                raise StudyInputError(
                    f"--out: cannot create the lock file in {self.out}: {err.strerror}"
                ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                holder = _lock_holder(fd)
                os.close(fd)
                if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise _FolderInUse(
                        f"--out: {self.out} is in use by another meanfield run (pid {holder}); "
                        "wait for it to end or use another --out"
                    ) from None
                raise StudyInputError(f"--out: cannot lock {self.out}: {err.strerror}") from None
            # a run refused after taking the lock (its configuration, say) removes a lock
            # file it made: ours must still be the file at the path, else the lock is on a
            # removed file and is taken again
            try:
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        self._lock_created = not existed
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd
        _OPEN_RUNNERS.add(self)

    def close(self) -> None:
        """Release the folder's lock (idempotent; `finish` calls it)."""
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        _OPEN_RUNNERS.discard(self)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> "StudyRunner":
        return self.open() if not self._opened else self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the manifest ---------------------------------------------------------------

    @property
    def manifest_path(self) -> Path:
        return self.out / MANIFEST_NAME

    def _read_manifest(self) -> tuple[str | None, list[str]] | None:
        """(study, files) of the manifest in the folder, None where there is none."""
        if not self.manifest_path.exists():
            return None
        study, files = None, []
        with open(self.manifest_path, errors="replace") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                except ValueError:  # a line cut short by a killed run
                    continue
                if not isinstance(entry, dict):
                    continue
                if "study" in entry and study is None:
                    study = str(entry["study"])
                if isinstance(entry.get("file"), str):
                    files.append(entry["file"])
        return study, files

    def _start_manifest(self, keep: list[str]) -> None:
        """A fresh manifest naming this study and the files in `keep` (relative paths)."""
        lines = [canonical_json({"meanfield_manifest": 1, "study": self.study})]
        self._owned = set()
        for rel in dict.fromkeys(keep):
            if (self.out / rel).is_file():
                lines.append(canonical_json({"file": rel}))
                self._owned.add(rel)
        fd, tmp = tempfile.mkstemp(dir=self.out, prefix=f"{MANIFEST_NAME}.", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            os.fsync(f.fileno())
        _readable(tmp)
        os.replace(tmp, self.manifest_path)

    def _own(self, path: Path) -> None:
        """Record `path` (inside the folder) as written by this study."""
        rel = path.relative_to(self.out).as_posix()
        if rel in self._owned:
            return
        with open(self.manifest_path, "a") as f:
            f.write(canonical_json({"file": rel}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self._owned.add(rel)

    def _files(self) -> dict[str, int]:
        """Every file in the folder (relative path -> mtime in ns), but the lock and
        manifest."""
        found = {}
        for root, _dirs, names in os.walk(self.out):
            for name in names:
                path = Path(root) / name
                rel = path.relative_to(self.out).as_posix()
                if rel in (LOCK_NAME, MANIFEST_NAME):
                    continue
                try:
                    found[rel] = path.stat().st_mtime_ns
                except OSError:
                    continue
        return found

    def _inside(self, rel: str) -> Path | None:
        """The path of a manifest entry, None unless it lies inside the folder."""
        path = (self.out / rel).resolve()
        root = self.out.resolve()
        if path == root or root not in path.parents:
            return None
        if path.name in (LOCK_NAME, MANIFEST_NAME):
            return None
        return path

    def _remove_owned(self, files: list[str]) -> None:
        """Delete the study's files `files`, its leftover temporary files and its
        folder `points/` where that is then empty; nothing else."""
        for rel in files:
            path = self._inside(rel)
            if path is not None and (path.is_file() or path.is_symlink()):
                path.unlink()
        if self.points_dir.is_dir():
            for tmp in self.points_dir.glob(".*.tmp"):
                tmp.unlink()
            try:
                self.points_dir.rmdir()
            except OSError:  # the user's own files in it stay
                pass
        for written in ("results.json", "config.json", MANIFEST_NAME):  # atomic writes cut short
            for tmp in self.out.glob(f".{written.lstrip('.')}.*.tmp"):
                if tmp.is_file():
                    tmp.unlink()

    # -- open -----------------------------------------------------------------------

    def _holds_study(self) -> bool:
        return (
            self.manifest_path.exists()
            or (self.out / "config.json").exists()
            or (self.out / "results.json").exists()
            or (self.points_dir.is_dir() and any(self.points_dir.iterdir()))
        )

    def _stored_config(self) -> dict | None:
        path = self.out / "config.json"
        if not path.exists():
            return None
        try:
            with open(path) as f:
                old = json.load(f)
        except (OSError, ValueError) as err:
            raise StudyInputError(
                f"--resume: {path} is unreadable ({type(err).__name__}); the points beside it "
                "cannot be checked: use --overwrite or another --out"
            ) from None
        if not isinstance(old, dict):
            raise StudyInputError(
                f"--resume: {path} is not a study configuration; use --overwrite or another --out"
            )
        return old

    def open(self) -> "StudyRunner":
        """Create the folder, take its lock, and check (or write) `config.json`.

        Call after validating input: every refusal here is a `StudyInputError`, and a
        folder this call created is removed again when it refuses."""
        if self._opened:
            return self
        created = None  # the outermost folder this call creates
        probe = self.out
        while not probe.exists() and not probe.is_symlink():
            created = probe
            probe = probe.parent
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except OSError as err:  # a dangling link, a vanished mount, /proc, ...
            where = f" ({err.filename})" if err.filename else ""
            raise StudyInputError(
                f"--out: cannot create {self.out}: {err.strerror}{where}"
            ) from None
        try:
            self._refuse_links()
            self._lock()
        except _FolderInUse:
            # another run holds the folder: it is that run's, even where this call made it
            # (two runs started at once on a fresh --out both see it missing): nothing goes
            raise
        except BaseException:
            # no lock file could be made or taken: a folder made by this call goes again
            if created is not None and self._only_lock(created):
                shutil.rmtree(created, ignore_errors=True)
            raise
        try:
            self._open_locked()
        except BaseException:
            if created is not None:
                shutil.rmtree(created, ignore_errors=True)
            elif self._lock_created:  # refused: the folder as it was, without our lock file
                (self.out / LOCK_NAME).unlink(missing_ok=True)
            self.close()
            raise
        self._opened = True
        return self

    def _refuse_links(self) -> None:
        """Refuse a folder holding a symbolic link where the study writes or deletes (its
        top level, `points/`): a write or delete through it would land outside."""
        for folder in (self.out, self.points_dir):
            if folder == self.points_dir and self.points_dir.is_symlink():
                raise StudyInputError(_link_refusal(self.points_dir))
            if not folder.is_dir():
                continue
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.is_symlink():
                        raise StudyInputError(_link_refusal(folder / entry.name))

    def _only_lock(self, top: Path) -> bool:
        for _root, _dirs, names in os.walk(top):
            if any(n != LOCK_NAME for n in names):
                return False
        return True

    def _open_locked(self) -> None:
        config_path = self.out / "config.json"
        stored = {"study": self.study, "config": self.config, "code": self.code}
        manifest = self._read_manifest()
        if self._holds_study():
            kind = manifest[0] if manifest else None
            if self.resume:
                old = self._stored_config()
                if old is None:
                    raise StudyInputError(
                        f"--resume: {self.out} has points but no config.json, so they cannot "
                        "be checked against this configuration; use --overwrite or another --out"
                    )
                kind = kind or old.get("study")
                if kind is not None and kind != self.study:
                    raise StudyInputError(
                        f"--resume: {self.out} holds a {kind!r} study, not {self.study!r}; "
                        "use another --out"
                    )
                if old.get("study") == self.study and old.get("config") == self.config:
                    if old.get("code") != self.code:
                        raise StudyInputError(
                            f"--resume: {self.out} was computed by other code ("
                            f"{_code_change(old.get('code'), self.code)}); its points are not "
                            "reused: use --overwrite or another --out"
                        )
                if old != stored:
                    diff = sorted(
                        k
                        for k in set(old.get("config", {})) | set(self.config)
                        if old.get("config", {}).get(k) != self.config.get(k)
                    ) or ["study"]
                    if "data_sha256" in diff:  # the --data file's bytes (two-layer, shapes, ...)
                        then, now = (
                            f"{h[:12]}..." if isinstance(h, str) else "none (built-in data)"
                            for h in (old.get("config", {}).get("data_sha256"),
                                      self.config.get("data_sha256"))
                        )  # fmt: skip
                        raise StudyInputError(
                            f"--data: the data's content changed since {self.out} was started "
                            f"(sha256 {then} then, {now} now); resume with the same data, "
                            "or use another --out or --overwrite"
                        )
                    raise StudyInputError(
                        f"--resume: {self.out} holds a study with a different configuration "
                        f"(differs in: {', '.join(diff)}); use another --out or --overwrite"
                    )
                owned = manifest[1] if manifest else self._legacy_files()
                self._start_manifest(owned)
            elif self.overwrite:
                if manifest is None:
                    raise StudyInputError(
                        f"--overwrite: {self.out} has no {MANIFEST_NAME} naming the files a "
                        "meanfield study wrote there, so nothing in it is removed: empty it "
                        "yourself or use another --out"
                    )
                try:
                    old = self._stored_config()
                except StudyInputError:
                    old = None
                other = old.get("study") if old else None
                if kind is None:
                    raise StudyInputError(
                        f"--overwrite: the manifest of {self.out} names no study, so nothing "
                        "in it is removed: empty it yourself or use another --out"
                    )
                if kind != self.study or (other is not None and other != kind):
                    held = other if other not in (None, self.study) else kind
                    raise StudyInputError(
                        f"--overwrite: {self.out} holds a {held!r} study, not {self.study!r}; "
                        "it is not removed: use another --out"
                    )
                self._remove_owned([f for f in manifest[1] if _removable(f)])
                self._start_manifest([])
            else:
                raise StudyInputError(
                    f"--out: {self.out} already holds a study; pass --resume to continue it "
                    "or --overwrite to start again"
                )
        else:
            self._start_manifest([])
        self._before = self._files()
        try:
            self.points_dir.mkdir(exist_ok=True)
        except OSError as err:
            raise StudyInputError(
                f"--out: cannot create {self.points_dir}: {err.strerror}"
            ) from None
        if not config_path.exists():
            write_json_atomic(config_path, stored)
        self._own(config_path)

    def _legacy_files(self) -> list[str]:
        """What a runner without a manifest is known to have written here."""
        files = [f for f in _LEGACY_FILES if (self.out / f).is_file()]
        if self.points_dir.is_dir():
            files += [
                f"points/{p.name}"
                for p in sorted(self.points_dir.iterdir())
                if p.is_file() and p.suffix in _LEGACY_POINT_SUFFIXES
            ]
        return files

    # -- points ---------------------------------------------------------------------

    def _check_point(self, name: str, spec: dict) -> tuple[Any, str]:
        """(the stored record, "") for a valid point file of `spec`, else (None, why)."""
        if name in self._checked:
            return self._checked[name]
        path = self.points_dir / f"{name}.json"
        record, reason = None, ""
        try:
            with open(path) as f:
                record = json.load(f)
        except (OSError, ValueError) as err:  # UnicodeDecodeError is a ValueError
            reason = f"unreadable ({type(err).__name__})"
        if not reason:
            if not isinstance(record, dict) or record.get("format") != POINT_FORMAT:
                reason = "not a point file of this version"
            elif not _seal_ok(record):
                reason = "its checksum does not match (edited or damaged)"
            elif record.get("config_sha256") != self.config_hash:
                reason = "written by another configuration (seed or options)"
            elif record.get("spec") != to_json(spec):
                reason = f"it holds the point {record.get('spec')!r}"
            elif not isinstance(record.get("point"), dict):
                reason = "it holds no point"
        result = (None, reason) if reason else (record, "")
        self._checked[name] = result
        return result

    def _valid_on_disk(self, name: str, spec: dict) -> bool:
        if not self.resume or not (self.points_dir / f"{name}.json").exists():
            return False
        record, reason = self._check_point(name, spec)
        if record is None and name not in self.recomputed:
            self.recomputed[name] = reason
            self._say(f"points/{name}.json: {reason}; it is recomputed, not used")
        return record is not None

    def _say(self, message: str) -> None:
        """A warning on stderr that is not part of the results (they equal a clean run's)."""
        import sys

        print(f"warning: {message}", file=sys.stderr)

    def pending(self, specs: Sequence[dict]) -> list[dict]:
        """The specs whose results are not on disk yet, or not valid there (all of them
        unless resuming)."""
        if not self.resume:
            return list(specs)
        return [s for s in specs if not self._valid_on_disk(point_name(s), s)]

    def run_points(
        self,
        specs: Sequence[dict],
        compute: Callable[[dict], dict],
        *,
        describe: Callable[[dict], str] | None = None,
        check: "Callable[[dict], dict] | bool" = True,
        eager: bool = True,
        route: str | None = None,
        atol: float = 0.0,
        check_cost: Callable[[dict], float] = depth_cost,
        variant: Callable[[dict], dict] | None = None,
        precision: str | None = None,
    ) -> list[dict]:
        """Compute (or, on resume, load) one result per grid point, in order, then check
        one of them by an independent route.

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
        `meanfield._eager.op_by_op`; no fusion or tiling of the compiler touches it) or
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
                if self._valid_on_disk(name, spec):
                    stored = self._checked[name][0]
                    self.loaded.append(name)
                    self.seconds[name] = float(stored.get("seconds") or 0.0)
                    self._own(path)
                    results.append(stored["point"])
                    bar.update(1)
                    continue
                bar.set_postfix_str(describe(spec) if describe else name)
                t0 = time.perf_counter()
                point = to_json({**spec, **compute(spec)})
                seconds = time.perf_counter() - t0
                record = _sealed(
                    {
                        "format": POINT_FORMAT,
                        "study": self.study,
                        "config_sha256": self.config_hash,
                        "seed": self.config.get("seed"),
                        "spec": to_json(spec),
                        "point": point,
                        "seconds": seconds,
                    }
                )
                self._own(path)  # recorded first: a run killed in between leaves no orphan
                write_json_atomic(path, record)
                self._checked.pop(name, None)
                self.computed.append(name)
                self.seconds[name] = seconds
                results.append(point)
                bar.update(1)
        if check is not False and specs and self.self_check:
            recompute = compute if check is True else check
            if route is None:
                if not eager:
                    raise ValueError("route: say how an eager=False self-check computes")
                route = SELF_CHECK_ROUTE
            costs = [check_cost(spec) for spec in specs]
            self._self_check(
                specs, names, results, recompute, route, eager=eager, atol=atol, costs=costs,
                variant=variant, precision=precision,
            )  # fmt: skip
        return results

    def _self_check(
        self, specs, names, results, recompute, route: str, *, eager: bool, atol: float, costs,
        variant=None, precision=None,
    ) -> None:  # fmt: skip
        """Recompute one seeded-random point by `recompute` and compare (`run_points`)."""
        i = self_check_index(self.config.get("seed"), self.study, len(self.self_checks), costs)
        spec, name = specs[i], names[i]
        if precision is None:
            precision = "float64" if jax.config.read("jax_enable_x64") else "float32"
        rtol = SELF_CHECK_RTOL[precision]
        if self.progress:
            print(f"self-check: recomputing grid point {name} {route}", flush=True)
        t0 = time.perf_counter()
        from .._eager import op_by_op

        reference = results[i]
        if variant is not None:  # the variant compiled, against the same op by op
            reference = to_json({**spec, **variant(spec)})
            recompute = variant
        if eager:
            with op_by_op():
                fresh = to_json({**spec, **recompute(spec)})
        else:
            fresh = to_json({**spec, **recompute(spec)})
        difference, where = compare_points(reference, fresh, atol=atol)
        record = {
            "point": name,
            "index": i,
            "of": len(specs),
            "route": route,
            "difference": difference,
            "where": where,
            "tolerance": rtol,
            "atol": atol,
            "agrees": bool(difference <= rtol),
        }
        self.self_checks.append(record)
        # its time goes with the timings (`timing.self_check_seconds`): the record itself is
        # the same on every run of the same points
        self.self_check_seconds.append(time.perf_counter() - t0)
        if not record["agrees"]:
            from ..releases import installed

            v = installed()
            raise SelfCheckError(
                f"self-check: grid point {name} recomputed {route} differs from its compiled "
                f"result ({where}: relative difference {difference:.3g} > {rtol:g}): the "
                f"compiler (jax {v['jax']}, jaxlib {v['jaxlib']}) computed it wrong, so no "
                "results.json is written; try another jax release (`meanfield canary` names "
                "the paths it gets wrong)"
            )

    def _load_artifact(self, name: str) -> dict | None:
        path = self.points_dir / f"{name}.npz"
        meta_path = self.points_dir / f"{name}.npz.json"
        if not path.exists():
            return None
        reason = ""
        try:
            with open(meta_path) as f:
                meta = json.load(f)
        except (OSError, ValueError):
            meta, reason = None, "its checksum file is missing or unreadable"
        if not reason:
            if not _seal_ok(meta) or not isinstance(meta, dict):
                reason = "its checksum file does not match"
            elif meta.get("config_sha256") != self.config_hash:
                reason = "written by another configuration (seed or options)"
            elif meta.get("name") != name or meta.get("file_sha256") != _sha256_file(path):
                reason = "its checksum does not match (edited or damaged)"
        arrays = None
        if not reason:
            try:
                with np.load(path) as data:
                    arrays = {k: data[k] for k in data.files}
            except Exception as err:  # a damaged archive, whatever numpy says of it
                reason = f"unreadable ({type(err).__name__})"
        if reason:
            self.recomputed[name] = reason
            self._say(f"points/{name}.npz: {reason}; it is recomputed, not used")
            return None
        self._own(path)
        self._own(meta_path)
        return arrays

    def say(self, text: str) -> None:
        """One line of progress (a long stage starting or ending), unless `progress` is off."""
        if self.progress:
            print(f"{self.study}: {text}", flush=True)

    def artifact(
        self, name: str, compute: Callable[[], dict], *, describe: str | None = None
    ) -> dict:
        """A named dict of arrays computed once and cached in `DIR/points/NAME.npz`
        (with its checksum in `NAME.npz.json`).

        Use it for expensive shared pieces (a reference limit) so that a resumed
        study recomputes nothing already finished; a stored one that does not match
        is recomputed. Its start and its time are said (`describe`, else the name): these
        stages run before the points' progress bar.
        """
        if not self._opened:
            self.open()
        path = self.points_dir / f"{name}.npz"
        meta_path = self.points_dir / f"{name}.npz.json"
        if self.resume:
            stored = self._load_artifact(name)
            if stored is not None:
                self.loaded.append(name)
                return stored
        t0 = time.perf_counter()
        label = describe or name.replace("_", " ")
        self.say(f"{label} ...")
        arrays: dict[str, Any] = {k: np.asarray(v) for k, v in compute().items()}
        self.say(f"{label}: done in {time.perf_counter() - t0:.0f} s")
        self._own(path)
        self._own(meta_path)
        fd, tmp = tempfile.mkstemp(dir=self.points_dir, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)
                f.flush()
                os.fsync(f.fileno())
            _readable(tmp)
            digest = _sha256_file(Path(tmp))
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        write_json_atomic(
            meta_path,
            _sealed(
                {
                    "format": POINT_FORMAT,
                    "name": name,
                    "config_sha256": self.config_hash,
                    "file_sha256": digest,
                }
            ),
        )
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
        total time, the device, the per-point seconds and the points recomputed
        because their files did not match (`recomputed`: how many,
        `recomputed_points`: which and why). `versions` records the package versions, the
        device and the float precision. `plot(out, results)`, if given, then draws the
        study's figures from the written `results.json` itself (so `meanfield plot DIR`
        redraws the same figures). The files written since `open` (figures) are recorded
        in the manifest, the folder's lock is released, and a summary (where, and the
        headline fits) is printed.
        """
        if not self._opened:
            self.open()
        body = {"study": self.study, "config": self.config}
        body.update(results)
        body["warnings"] = list(body.get("warnings", [])) + self.warnings
        body["versions"] = versions()
        body["self_check"] = list(self.self_checks)
        if not self.self_check:
            body["self_check_skipped"] = "--no-self-check or MEANFIELD_NO_SELF_CHECK=1"
        body["timing"] = {
            "total_seconds": time.perf_counter() - self._t0,
            "device": device_description(),
            "points_seconds": dict(self.seconds),
            "computed": list(self.computed),
            "loaded": list(self.loaded),
            "recomputed": len(self.recomputed),
            "recomputed_points": dict(self.recomputed),
            "self_check_seconds": list(self.self_check_seconds),
            **(timing or {}),
        }
        path = self.out / "results.json"
        self._own(path)
        write_json_atomic(path, body)
        if plot is not None:
            t0 = time.perf_counter()
            plot(self.out, json.loads(path.read_text()))
            body["timing"]["plot_seconds"] = time.perf_counter() - t0
            write_json_atomic(path, body)
        # the figures and other files the study wrote into the folder since `open`
        for rel, mtime in self._files().items():
            if Path(rel).name.startswith(".") and rel.endswith(".tmp"):
                continue
            if self._before.get(rel) != mtime:
                self._own(self.out / rel)
        self.close()
        print(summary(body, self.out), flush=True)  # the result, with or without progress
        return path


def versions() -> dict:
    """The versions a result was computed with: meanfield and its numerical dependencies,
    Python, the device kind, the float precision, and (`known_bad_release`) the listed
    defect of the installed JAX release when the study was run on it by override
    (`meanfield.releases`), else None."""
    import platform
    from importlib import metadata

    import jax

    from ..releases import describe, known_bad

    def version(pkg):
        try:
            return metadata.version(pkg)
        except metadata.PackageNotFoundError:
            return None

    packages = ("meanfield-resnets", "jax", "jaxlib", "diffrax", "equinox", "optax", "numpy")
    out = {pkg: version(pkg) for pkg in packages}
    out["meanfield"] = out.pop("meanfield-resnets") or _package_version()
    out["python"] = platform.python_version()
    out["device"] = device_description()
    out["float"] = "float64" if jax.config.read("jax_enable_x64") else "float32"
    bad = known_bad()
    out["known_bad_release"] = describe(bad) if bad is not None else None
    return out


@functools.cache
def source_digest() -> str:
    """SHA-256 of the meanfield package's Python sources (every `.py` file under the
    installed package, `meanfield.solvers` included, by relative path and content): a
    study's points are reused on `--resume` only by the code that computed them."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    files = []
    for folder, _dirs, names in os.walk(root, followlinks=True):
        files += [Path(folder) / n for n in names if n.endswith(".py")]
    for path in sorted(files, key=lambda p: p.relative_to(root).as_posix()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def code_identity() -> dict:
    """What computed a study's points, beside its configuration: the meanfield version and
    source digest, and the jax and jaxlib releases (`config.json`, and the hash every point
    file carries)."""
    from ..releases import installed

    return {"meanfield": _package_version(), "source_sha256": source_digest(), **installed()}


def _code_change(old, new: dict) -> str:
    """What differs between two `code_identity` records, in words."""
    if not isinstance(old, dict):
        return "a configuration without a record of its code"
    changes = [
        f"{k} {old.get(k)} -> {new[k]}"
        for k in ("meanfield", "jax", "jaxlib")
        if old.get(k) != new[k]
    ]
    if old.get("source_sha256") != new["source_sha256"]:
        changes.append("the meanfield source changed")
    return ", ".join(changes) or "unknown"


def _package_version() -> str:
    from .. import __version__

    return __version__


def _left_out(fit: dict) -> str:
    """What a printed fit left out: points (`dropped`), exploded draws (`excluded`) and
    discarded bootstrap replicates (`bootstrap_dropped`), where there are any."""
    parts = []
    dropped = fit.get("dropped") or []
    if dropped:
        xs = ", ".join(f"{d['x']:g}" for d in dropped)
        parts.append(f"{fit.get('against') or 'x'} = {xs} left out ({dropped[0]['reason']})")
    if fit.get("excluded"):
        parts.append(f"{fit['excluded']} exploded draw(s) left out")
    if fit.get("bootstrap_dropped"):
        parts.append(f"{fit['bootstrap_dropped']} bootstrap replicate(s) discarded")
    return f"; {'; '.join(parts)}" if parts else ""


def _fit_line(f: dict) -> str:
    """One printed fit: what against what, where, slope [interval], theory and whether the
    interval holds it, what it left out."""
    ci = f.get("ci95") or f.get("ci95_fit")
    fixed = dict(f.get("fixed") or {})
    where = ", ".join(f"{k}={v}" for k, v in fixed.items() if k != "steps")
    if "steps" in fixed:  # which GD step the fit is at
        where += f"{', ' if where else ''}after {fixed['steps']} GD step(s)"
    text = f"{f.get('quantity')} vs {f.get('against')}" + (f" ({where})" if where else "")
    text += f": slope {f['slope']:.3f}"
    if ci:
        text += f" [{ci[0]:.3f}, {ci[1]:.3f}]"
        if not f.get("ci95") and f.get("ci95_fit"):
            text += " (the regression's interval: one draw per point)"
    if f.get("theory") is not None:
        text += f", theory {f['theory']:g}"
        if f.get("theory_inside") is True:
            text += " (inside)"
        elif f.get("theory_inside") is False:
            text += " (OUTSIDE" + (f": {f['theory_note']}" if f.get("theory_note") else "") + ")"
    return text + _left_out(f)


def _estimate_text(e: dict) -> str:
    ci = e.get("ci95")
    text = f"{e['estimate']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")
    if e.get("theory") is not None:
        text += f", theory {e['theory']:g}"
        if ci:
            text += " (inside)" if theory_inside(ci, e["theory"]) else " (OUTSIDE)"
    return text


def _verdict_lines(results: dict) -> list[str]:
    """The headline numbers that are not slopes: a measured critical β (each way it is
    measured), the β = 1/2 bounds and the gradient-flow identity (phases)."""
    lines = []
    crit = results.get("critical_beta")
    if isinstance(crit, dict):
        if crit.get("estimate") is not None:
            lines.append(f"critical β from {crit.get('quantity', 'the forward ratio')}: "
                         f"{_estimate_text(crit)}")  # fmt: skip
        elif crit.get("reason"):
            lines.append(f"critical β: not measured ({crit['reason']})")
        for key in ("from_gradient", "from_max_over_depth"):
            e = crit.get(key)
            if isinstance(e, dict) and e.get("estimate") is not None:
                lines.append(f"critical β from {e.get('quantity', key)}: {_estimate_text(e)}")
    bounds = results.get("stability_bounds")
    if isinstance(bounds, dict) and bounds.get("per_L"):
        fwd = [c for row in bounds["per_L"] for c in row.get("forward_sq", [])]
        grad = [row.get("gradient_consistent_with_bounds") for row in bounds["per_L"]]
        lines.append(
            f"β = 1/2 bounds: the forward bound holds at {sum(bool(c['holds']) for c in fwd)} "
            f"of {len(fwd)} (L, δ); the gradient's mean is consistent with its bounds at "
            f"{sum(g is True for g in grad)} of {len(grad)} depths"
        )
    identity = results.get("gradient_flow_identity")
    if isinstance(identity, dict) and "holds" in identity:
        verdict = {True: "holds", False: "FAILS", None: "not judged"}.get(identity["holds"])
        lines.append(f"gradient-flow identity: {verdict}")
    return lines


def headline_fits(fits: list) -> list[dict]:
    """The fits a study's figure shows: where fits carry a GD step, those at the last one
    (the figure's), every quantity; otherwise all of them."""
    fits = [f for f in fits if isinstance(f, dict) and f.get("slope") is not None]
    steps = [f["fixed"]["steps"] for f in fits if "steps" in (f.get("fixed") or {})]
    if not steps:
        return fits
    last = max(steps)
    return [f for f in fits if (f.get("fixed") or {}).get("steps", last) == last]


def summary(results: dict, out: Path, limit: int = 8) -> str:
    """What a finished study prints: its headline (the study's own lines, or every fit at
    the step its figure shows, each with its interval, the theory and whether the interval
    holds it), the other fits whose interval excludes their theory (at most `limit`, then
    how many more), the self-check, and last where it wrote."""
    lines = [f"{results['study']}: results"]
    lines += [f"  {line}" for line in _verdict_lines(results)]
    fits = results.get("fits") or []
    shown = [] if results.get("headline") else headline_fits(fits)
    lines += [f"  {_fit_line(f)}" for f in shown]
    for line in results.get("headline", []) or []:
        lines.append(f"  {line}")
    outside = [
        f for f in fits
        if isinstance(f, dict) and f.get("theory_inside") is False and f.get("slope") is not None
        and not any(f is g for g in shown)
    ]  # fmt: skip
    if outside:
        more = " (other steps and lines)" if shown else ""
        lines.append(f"  {len(outside)} {'other ' if shown else ''}fit(s){more} whose 95% "
                     "interval excludes the theory:")  # fmt: skip
    for f in outside[:limit]:
        ci = f.get(f.get("theory_inside_interval") or "ci95") or [math.nan, math.nan]
        fixed = fixed_text(f)
        text = (
            f"    {f.get('quantity')} vs {f.get('against')}" + (f" ({fixed})" if fixed else "")
            + f": {f['slope']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}], theory {f['theory']:g}"
        )  # fmt: skip
        if f.get("theory_note"):
            text += f" ({f['theory_note']})"
        lines.append(text)
    if len(outside) > limit:
        lines.append(f"    ... and {len(outside) - limit} more (results.json: fits, theory_inside)")
    for check in results.get("self_check") or []:
        allowance = f"; solver allowance {check['atol']:g}" if check.get("atol") else ""
        lines.append(
            f"  self-check: grid point {check['point']} recomputed {check['route']} agrees "
            f"to {check['difference']:.1e} (round-off bound {check['tolerance']:g}{allowance})"
        )
    if results.get("self_check_skipped"):
        lines.append(f"  self-check: skipped ({results['self_check_skipped']})")
    if results.get("warnings"):
        lines.append(f"  {len(results['warnings'])} warning(s) in results.json")
    figures = sorted(p.name for p in Path(out).glob("*.png"))
    wrote = f"  wrote {Path(out) / 'results.json'}"
    if figures:
        wrote += f" and {len(figures)} figure(s): {', '.join(figures)}"
    lines.append(wrote)
    return "\n".join(lines)


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
    return StudyRunner(
        args.study,
        args.out,
        cfg,
        resume=args.resume,
        overwrite=args.overwrite,
        progress=not args.no_progress,
        self_check=self_check_wanted(args),
    ).open()


def self_check_wanted(args) -> bool:
    """False where `--no-self-check` was given or `MEANFIELD_NO_SELF_CHECK=1` is set."""
    if getattr(args, "no_self_check", False):
        return False
    return os.environ.get("MEANFIELD_NO_SELF_CHECK", "") not in ("1", "true", "yes")
