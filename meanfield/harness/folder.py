"""The folder a study writes (`StudyFolder`), and its integrity.

* **one writer per folder**: `open` takes an OS-level lock (`fcntl.flock` on
  `DIR/.meanfield-lock`, which holds the holder's pid) before it writes anything, and
  holds it until `finish` (or `close`, which removes the file: a finished folder holds
  none; or the process's end: the kernel releases the lock of a killed process, so a
  stale lock file never blocks a later `--resume`); a second
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
* `finish` (`meanfield.harness.runner.StudyRunner`) writes `DIR/results.json`, again
  atomically.

Points are computed from `(seed, point)` alone, never from the order in which
they run, so a resumed study gives the same `results.json` as an uninterrupted
one.

Why this file is long: it is one class, the folder's integrity; its rules (lock,
manifest, ownership, links, configuration, seals, resume) refer to one another at every
step of `open` and are tested together (tests/test_folder_lock.py, test_overwrite.py,
test_point_validation.py).
"""

import contextlib
import errno
import fcntl
import hashlib
import json
import math
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from ..runtime.errors import StudyInputError
from . import identity


class _FolderInUse(StudyInputError):
    """Another run holds the output folder's lock."""


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
        points = out / "points"  # refused here, before the manifest or the lock is made
        if points.exists() and not points.is_symlink() and not points.is_dir():
            raise StudyInputError(f"--out: {points} is a file; a study keeps its points there")
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


LOCK_NAME = ".meanfield-lock"


MANIFEST_NAME = ".meanfield-manifest.jsonl"


POINT_FORMAT = 2


# files of an earlier runner (no manifest): what it is known to have written
_LEGACY_FILES = ("config.json", "results.json")


_LEGACY_POINT_SUFFIXES = (".json", ".npz")


# runners holding a folder's lock in this process (released by `release_all`)
_OPEN_RUNNERS: "weakref.WeakSet[StudyFolder]" = weakref.WeakSet()


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


def sealed_side_file(path: Path) -> Path:
    """The checksummed side file `NAME.npz.json` of an archive of arrays `NAME.npz`."""
    return path.with_name(path.name + ".json")


def write_sealed_arrays(path: Path, arrays: dict, record: dict) -> None:
    """`arrays` to the archive `path` (through a temporary file and a rename), then its
    side file (`sealed_side_file`): `record`, the archive's SHA-256 and the format,
    sealed with their own checksum."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
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
    meta = {"format": POINT_FORMAT, **record, "file_sha256": digest}
    write_json_atomic(sealed_side_file(path), _sealed(meta))


def read_sealed_arrays(path: Path, expected: dict) -> tuple[dict | None, str]:
    """The arrays of the archive `path` written by `write_sealed_arrays`, with `""`; or
    None and the reason they are not to be used: a side file missing, unreadable or not
    sealed, a record entry other than `expected`'s (the reason names it), an archive
    whose checksum differs (edited or damaged) or that numpy cannot read."""
    try:
        with open(sealed_side_file(path)) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None, "its checksum file is missing or unreadable"
    if not _seal_ok(meta) or not isinstance(meta, dict):
        return None, "its checksum file does not match"
    for key, value in expected.items():
        if meta.get(key) != value:
            return None, f"its record's {key} differs"
    if meta.get("file_sha256") != _sha256_file(path):
        return None, "its checksum does not match (edited or damaged)"
    try:
        with np.load(path) as data:
            return {k: data[k] for k in data.files}, ""
    except Exception as err:  # a damaged archive, whatever numpy says of it
        return None, f"unreadable ({type(err).__name__})"


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


class StudyFolder:
    """One study's output folder: its lock, the manifest of the files it owns, the
    configuration it was made with, and its checksummed points (`StudyRunner` computes
    them). Nothing is written before `open`; `close` releases the lock.

    **Arguments:** `study` (the study's name), `out` (the folder), `config` (every
    setting that determines the results), `resume`, `overwrite` (as in `StudyRunner`).
    """

    def __init__(
        self,
        study: str,
        out: str | Path,
        config: dict,
        *,
        resume: bool = False,
        overwrite: bool = False,
    ):
        self.study = study
        self.out = Path(out)
        self.config = to_json(config)
        self.resume = resume
        self.overwrite = overwrite
        self.computed: list[str] = []
        self.loaded: list[str] = []
        self.cached: list[str] = []  # artifacts read from the artifact cache
        self.received: list[str] = []  # artifacts received from process 0 (a follower)
        self._artifacts_called: dict[str, int] = {}  # by name: the same in every process
        self._artifact_computing: str | None = None  # the artifact `compute` is making
        self.recomputed: dict[str, str] = {}
        self.seconds: dict[str, float] = {}
        self.warnings: list[str] = []
        self.code = identity.code_identity()
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
        if self.writer:
            check_output_dir(self.out)

    # this process writes the folder (of several processes, process 0 alone does)
    writer = True

    @property
    def points_dir(self) -> Path:
        return self.out / "points"

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
        """Release the folder's lock and remove its file, so that a finished folder holds
        only the study's own files (idempotent; `finish` calls it). A run that opened the
        file before it went takes the lock, finds the path gone or another file there and
        takes the lock again on a new file (`_lock`)."""
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            try:
                path = self.out / LOCK_NAME
                with contextlib.suppress(OSError):  # ours, still at the path: it goes
                    if os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                        path.unlink()
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        _OPEN_RUNNERS.discard(self)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> Self:
        return self.open() if not self._opened else self

    def __exit__(self, *exc) -> None:
        self.close()

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

    def open(self) -> Self:
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
        """With the lock held: check the folder's study against this one (`--resume`,
        `--overwrite`, or refuse), start the manifest, and write `config.json`."""
        config_path = self.out / "config.json"
        stored = {"study": self.study, "config": self.config, "code": self.code}
        manifest = self._read_manifest()
        if self._holds_study():
            kind = manifest[0] if manifest else None
            if self.resume:
                self._check_resume(kind, stored)
                owned = manifest[1] if manifest else self._legacy_files()
                self._start_manifest(owned)
            elif self.overwrite:
                owned = self._check_overwrite(kind, manifest)
                self._remove_owned([f for f in owned if _removable(f)])
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

    def _check_resume(self, kind: str | None, stored: dict) -> None:
        """Refuse to resume a folder of another study, configuration or code (`kind`: the
        study its manifest names; `stored`: this run's `config.json`)."""
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
                    f"{identity.code_change(old.get('code'), self.code)}); its points "
                    "are not reused: use --overwrite or another --out"
                )
        if old != stored:
            self._refuse_other_config(old)

    def _refuse_other_config(self, old: dict) -> None:
        """Refuse to resume a folder whose `config.json` (`old`) differs from this run's,
        naming the entries that differ (the `--data` file's content on its own)."""
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
        code = [k for k in ("block_sha256", "law_sha256") if k in diff]
        if code:  # a user's block or law (mean-ode, variance), known by its content
            flags = "/".join(f"--{k.partition('_')[0]}" for k in code)
            raise StudyInputError(
                f"{flags}: the code of your {' and '.join(k.partition('_')[0] for k in code)} "
                f"changed since {self.out} was started; resume with the same code, or use "
                "another --out or --overwrite"
            )
        raise StudyInputError(
            f"--resume: {self.out} holds a study with a different configuration "
            f"(differs in: {', '.join(diff)}); use another --out or --overwrite"
        )

    def _check_overwrite(
        self, kind: str | None, manifest: tuple[str | None, list[str]] | None
    ) -> list[str]:
        """The files the folder's manifest names; refuses to overwrite a folder without a
        manifest, or holding another study."""
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
        return manifest[1]

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

    def _load_artifact(self, name: str) -> dict | None:
        path = self.points_dir / f"{name}.npz"
        if not path.exists():
            return None
        expected = {"config_sha256": self.config_hash, "name": name}
        arrays, reason = read_sealed_arrays(path, expected)
        if arrays is None:
            if "config_sha256" in reason:
                reason = "written by another configuration (seed or options)"
            elif "name" in reason:  # another artifact's side file in its place
                reason = "its checksum does not match (edited or damaged)"
            self.recomputed[name] = reason
            self._say(f"points/{name}.npz: {reason}; it is recomputed, not used")
            return None
        self._own(path)
        self._own(sealed_side_file(path))
        return arrays

    def _write_point(
        self, name: str, spec: dict, point: dict, seconds: float, placement: dict | None = None
    ) -> None:
        """`points/NAME.json`: the point, sealed with the configuration's hash, written
        atomically (recorded in the manifest first: a run killed in between leaves no
        orphan); `placement`, where it ran (process and devices), beside it."""
        path = self.points_dir / f"{name}.json"
        record = _sealed(
            {
                "format": POINT_FORMAT,
                "study": self.study,
                "config_sha256": self.config_hash,
                "seed": self.config.get("seed"),
                "spec": to_json(spec),
                "point": point,
                "seconds": seconds,
                **({"placement": placement} if placement is not None else {}),
            }
        )
        self._own(path)
        write_json_atomic(path, record)
        self._checked.pop(name, None)

    def _write_artifact(self, name: str, arrays: dict) -> None:
        """`points/NAME.npz` and its checksummed side file `NAME.npz.json`."""
        path = self.points_dir / f"{name}.npz"
        self._own(path)
        self._own(sealed_side_file(path))
        write_sealed_arrays(path, arrays, {"name": name, "config_sha256": self.config_hash})
