"""Real image data sets, offline: scikit-learn's digits and user-supplied MNIST / CIFAR-10.

Nothing here downloads anything. `load_digits` reads the 1797 handwritten digits
(8×8, 10 classes) that ship inside scikit-learn's wheel; `load_images(path)` reads
MNIST or CIFAR-10 from files the user already has, in their standard formats or as
`.npz`.

**Conventions** (every loader returns an `ImageDataset`):

- `x_*` is `float32` of shape `(n, features)`: every image flattened in row-major
  order of `image_shape`, channels last (`(32, 32, 3)` for CIFAR-10, whose python
  pickles store channels first and are transposed), scaled to [0, 1]. Integer pixels
  are divided by 255 (digits: by 16, their maximum); float pixels already in [0, 1]
  are kept, float pixels in [0, 255] with a maximum above 1 are divided by 255.
- `y_*` is `int32` of shape `(n,)`, labels `0 .. n_classes − 1`.
- A split that the files carry (MNIST's train/t10k, CIFAR-10's data_batch_1..5 /
  test_batch, an `.npz` with `x_train`, `y_train`, `x_test`, `y_test`) is kept. A data
  set without one (the digits, an `.npz` with `x`, `y`) is split by a random
  permutation drawn from an explicit `key` (a `jax.random` key or an integer seed):
  the same key gives the same split, and there is no global seed.

Every refusal is a one-line `ValueError`; those about files name the `path` argument
and say what was expected. A file's declared sizes (the .npy headers inside an .npz, the
idx headers, the shapes a CIFAR-10 pickle declares) are checked against the memory
available (`meanfield.runtime.memory.available_memory`, `MEANFIELD_MEMORY_LIMIT`) before
anything of that size is allocated or read.

Why this file is long: it is one concept, reading image data sets; the digits and each
of a user's formats (npz, idx, CIFAR pickles, folders of images, archives) share one
validation path (sizes against memory, dtypes, labels), which is tested as a whole.
"""

import dataclasses
import gzip
import hashlib
import math
import os
import pickle
import struct
import tarfile
import zipfile
import zlib
from typing import IO, Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["ImageDataset", "load_digits", "load_images"]

# the most classes a data set may have: labels are 0 .. MAX_CLASSES - 1 (a readout of
# MAX_CLASSES rows is allocated per network; a stray label 2^31 - 1 would ask for 2^31)
MAX_CLASSES = 2**16

_FORMATS = (
    "an .npz file (arrays x, y or x_train, y_train, x_test, y_test), a folder of MNIST idx "
    "files (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
    "t10k-labels-idx1-ubyte, optionally .gz), or CIFAR-10's python version (the "
    "cifar-10-batches-py folder, a folder holding it, or cifar-10-python.tar.gz)"
)


@dataclasses.dataclass(frozen=True)
class ImageDataset:
    """A labelled image data set with a train/test split (see the module conventions).

    - `x_train`, `x_test`: `float32`, `(n, features)`, in [0, 1].
    - `y_train`, `y_test`: `int32`, `(n,)`, in `0 .. n_classes − 1`.
    - `image_shape`: the shape of one image before flattening (channels last).
    - `n_classes`: the number of classes (1 + the largest label).
    - `name`: where the data came from (`"digits"`, or the path).
    - `sha256`: the SHA-256 of the files read (`data_sha256`; None for the digits).
    """

    x_train: np.ndarray = dataclasses.field(repr=False)
    y_train: np.ndarray = dataclasses.field(repr=False)
    x_test: np.ndarray = dataclasses.field(repr=False)
    y_test: np.ndarray = dataclasses.field(repr=False)
    image_shape: tuple[int, ...]
    n_classes: int
    name: str
    sha256: str | None = None

    @property
    def n_features(self) -> int:
        return int(self.x_train.shape[1])

    def __str__(self) -> str:
        return (
            f"{self.name}: {len(self.y_train)} train / {len(self.y_test)} test images of "
            f"shape {self.image_shape}, {self.n_classes} classes"
        )


# -- splitting ------------------------------------------------------------------------


def _as_key(key) -> Any:
    """A `jax.random` key from a key or a non-negative integer seed."""
    if isinstance(key, bool):
        raise ValueError(
            f"key must be a jax.random key or a non-negative integer seed, got {key!r}"
        )
    if isinstance(key, int | np.integer):
        if key < 0:
            raise ValueError(f"key: an integer seed must be >= 0, got {key}")
        return jax.random.key(int(key))
    dtype = getattr(key, "dtype", None)
    if dtype is not None and jnp.issubdtype(dtype, jax.dtypes.prng_key) and key.ndim == 0:
        return key
    if dtype == jnp.uint32 and getattr(key, "shape", None) == (2,):  # a raw PRNGKey
        return key
    raise ValueError(
        f"key must be a jax.random key or a non-negative integer seed, got {type(key).__name__}"
    )


def _split(x, y, key, test_fraction, name: str):
    ok = isinstance(test_fraction, int | float) and not isinstance(test_fraction, bool)
    if not (ok and 0.0 < test_fraction < 1.0):
        raise ValueError(f"test_fraction must be a number in (0, 1), got {test_fraction!r}")
    n = len(y)
    n_test = int(round(test_fraction * n))
    if not 1 <= n_test <= n - 1:
        raise ValueError(
            f"test_fraction={test_fraction} leaves an empty train or test set of the {n} "
            f"images of {name}"
        )
    perm = np.asarray(jax.random.permutation(_as_key(key), n))
    test, train = perm[:n_test], perm[n_test:]
    return x[train], y[train], x[test], y[test]


# -- validation -----------------------------------------------------------------------


def _pixels(x, where: str) -> np.ndarray:
    """`x` (n, ...) as float32 in [0, 1] (module conventions), or a one-line refusal."""
    x = np.asarray(x)
    if x.dtype == bool or not (
        np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)
    ):
        raise ValueError(f"{where} must hold real pixel values, got dtype {x.dtype}")
    if x.ndim < 2 or x.shape[0] == 0 or x.size == 0:
        raise ValueError(
            f"{where} must be a non-empty stack of images (n, ...), got shape {x.shape}"
        )
    if np.issubdtype(x.dtype, np.floating):
        if not np.all(np.isfinite(x)):
            raise ValueError(
                f"{where} must be finite, got {int(np.sum(~np.isfinite(x)))} NaN or infinite pixels"
            )
        lo, hi = float(x.min()), float(x.max())
        if lo < 0.0 or hi > 255.0:
            raise ValueError(
                f"{where} must hold pixels in [0, 1] or [0, 255], got values in [{lo:g}, {hi:g}]"
            )
        x = x / 255.0 if hi > 1.0 else x
    else:
        lo, hi = int(x.min()), int(x.max())
        if lo < 0 or hi > 255:
            raise ValueError(f"{where} must hold pixels in 0..255, got values in [{lo}, {hi}]")
        x = x / 255.0
    return np.ascontiguousarray(x.reshape(x.shape[0], -1), dtype=np.float32)


def _labels(y, n: int, where: str) -> np.ndarray:
    """`y` as int32 `(n,)` (a `(n, 1)` column too), integer-valued and >= 0."""
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"{where} must be {n} labels of shape ({n},), got shape {y.shape}")
    if np.issubdtype(y.dtype, np.floating):
        if not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
            raise ValueError(f"{where} must hold integer class labels, got non-integer values")
    elif y.dtype == bool or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"{where} must hold integer class labels, got dtype {y.dtype}")
    if y.size and (y.min() < 0 or y.max() >= MAX_CLASSES):
        raise ValueError(
            f"{where} must hold class labels >= 0 and below {MAX_CLASSES}, got values in "
            f"[{y.min()}, {y.max()}]"
        )
    return y.astype(np.int32)


def _dataset(x_train, y_train, x_test, y_test, image_shape, name: str, where: str) -> ImageDataset:
    if x_test.shape[1:] != x_train.shape[1:]:
        raise ValueError(
            f"{where}: train and test images differ in shape, {x_train.shape[1:]} and "
            f"{x_test.shape[1:]}"
        )
    return ImageDataset(
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        image_shape=tuple(int(s) for s in image_shape),
        n_classes=int(max(y_train.max(), y_test.max())) + 1,
        name=name,
    )


# -- scikit-learn's digits ------------------------------------------------------------


def load_digits(key, *, test_fraction: float = 0.2) -> ImageDataset:
    """scikit-learn's bundled handwritten digits: 1797 images 8×8, 10 classes, offline.

    Pixels (0..16) are divided by 16, so `x` is in [0, 1], shape `(n, 64)`; the split
    is a random permutation from `key` (`round(test_fraction · 1797)` test images; 359
    by default). scikit-learn is imported here, not at `import meanfield`.

    **Arguments:**

    - `key`: a `jax.random` key or a non-negative integer seed (the split).
    - `test_fraction`: the share of images held out, in (0, 1).

    **Returns:** an `ImageDataset` with `image_shape = (8, 8)`, `n_classes = 10`.
    """
    try:
        from sklearn.datasets import load_digits as _sklearn_digits
    except ImportError as err:
        raise ImportError(
            "load_digits needs scikit-learn (pip install scikit-learn): its wheel ships the digits"
        ) from err
    bunch: Any = _sklearn_digits()
    x = np.asarray(bunch.data, dtype=np.float32) / np.float32(16.0)
    y = np.asarray(bunch.target, dtype=np.int32)
    x_train, y_train, x_test, y_test = _split(x, y, key, test_fraction, "the digits")
    return _dataset(x_train, y_train, x_test, y_test, (8, 8), "digits", "digits")


# -- file checks (shared with the studies' --data loaders) ----------------------------


class DataFileError(ValueError):
    """What is wrong with a data file, as a clause that follows the file's name ("is empty
    (0 bytes)"): the caller names the file (`path '...'`, `--data: ...`)."""


def _cause(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0]}" if text else type(err).__name__


def sha256_file(path) -> str:
    """The SHA-256 (hex) of a file's bytes, read in pieces of 1 MiB."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def files_sha256(root, files) -> str:
    """The SHA-256 of a data set of several files (a folder): of the lines
    `"<sha256 of the file>  <its path relative to root>\n"` in sorted order of the paths
    (what `sha256sum FILE... | sha256sum` prints in `root`, the files named in sorted
    order). A data set of one file has `sha256_file` of it."""
    rel = sorted(os.path.relpath(os.fspath(f), os.fspath(root)) for f in files)
    lines = "".join(f"{sha256_file(os.path.join(root, r))}  {r}\n" for r in rel)
    return hashlib.sha256(lines.encode()).hexdigest()


_NPY_MAGIC = b"\x93NUMPY"
# what a truncated or corrupt zip member raises when it is read
_CORRUPT = (
    zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, KeyError, struct.error,
    NotImplementedError,
)  # fmt: skip


def _not_a_zip(p: str) -> str | None:
    """A clause saying what the file `p` is where it is no zip archive (an .npz is one):
    empty, a single .npy array, something else; None for a zip archive."""
    if os.path.getsize(p) == 0:
        return "is empty (0 bytes)"
    with open(p, "rb") as f:
        head = f.read(8)
    if head.startswith(_NPY_MAGIC):
        return (
            "is a single .npy array, not an .npz archive of named arrays (numpy.savez writes one)"
        )
    if not head.startswith(b"PK"):
        return f"is not a zip archive, as an .npz is (it begins {head!r})"
    return None


def _npy_header(fh: IO[bytes], member: str) -> tuple[tuple[int, ...], np.dtype] | None:
    """The declared shape and dtype of the .npy stream `fh` (its header only); None for a
    member that is no .npy array."""
    if fh.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
        return None
    version = tuple(fh.read(2))
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
    else:
        raise DataFileError(
            f"holds {member!r} in .npy format version {'.'.join(map(str, version))}, which is "
            "not read here (1.0 and 2.0 are)"
        )
    # a sub-array dtype adds its axes to the array's (as numpy.load does)
    return tuple(int(n) for n in shape) + tuple(dtype.shape), dtype.base


def npz_headers(path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """The arrays of the .npz archive `path`: name -> (declared shape, dtype), read from
    the .npy header of each zip member and nothing else, so that sizes and dtypes can be
    checked before any array is allocated (members that are no .npy arrays are left out).

    **Raises:** `DataFileError`, a clause ("is empty (0 bytes)", "is a single .npy array,
    not an .npz archive ...", "is not a zip archive ...", "is truncated or corrupt (...)")
    for the caller to put after the file's name."""
    p = os.fspath(path)
    problem = _not_a_zip(p)
    if problem:
        raise DataFileError(problem)
    out = {}
    try:
        with zipfile.ZipFile(p) as zf:
            for info in zf.infolist():
                member = info.filename
                with zf.open(info) as fh:
                    header = _npy_header(fh, member)
                if header is not None:
                    out[member[:-4] if member.endswith(".npy") else member] = header
    except DataFileError:
        raise
    except _CORRUPT as err:
        raise DataFileError(f"is truncated or corrupt ({_cause(err)})") from None
    return out


def npz_array(path, name: str) -> np.ndarray:
    """The array `name` of the .npz archive `path`, never unpickled (check its header with
    `npz_headers` first). **Raises:** `DataFileError` for a truncated or corrupt member."""
    try:
        with zipfile.ZipFile(os.fspath(path)) as zf:
            member = f"{name}.npy" if f"{name}.npy" in zf.namelist() else name
            with zf.open(member) as fh:
                return np.lib.format.read_array(fh, allow_pickle=False)
    except _CORRUPT as err:
        raise DataFileError(f"is truncated or corrupt ({_cause(err)})") from None


class _TooBig(ValueError):
    """A declared size beyond the memory available (one line naming the path)."""


class _Memory:
    """The memory one load may take (`meanfield.runtime.memory.available_memory`), spent
    as the files' declared sizes are met, before anything of that size is allocated."""

    def __init__(self, where: str):
        from ..runtime.memory import available_memory

        self.where, self.limit, self.spent = where, available_memory(), 0

    def take(self, nbytes: int, what: str) -> None:
        self.spent += nbytes
        if self.spent > self.limit:
            raise _TooBig(
                f"{self.where}: {what} needs about {self.spent / 1e9:.3g} GB of memory with "
                f"its float32 copies (and the data read before it), more than the "
                f"{self.limit / 1e9:.3g} GB available (MEANFIELD_MEMORY_LIMIT sets another limit)"
            )


def _array_bytes(count: int, itemsize: int, *, images: bool) -> int:
    """The memory an array of `count` elements takes once loaded: its own bytes and its
    float32 copies (two for images: the scaled pixels and the stacked split), or its
    int32 copy (labels)."""
    return count * (itemsize + (8 if images else 4))


# -- user files -----------------------------------------------------------------------


def load_images(path, *, key=None, test_fraction: float = 0.2) -> ImageDataset:
    """MNIST or CIFAR-10 (or any labelled images) from files the user already has.

    `path` is one of:

    - an `.npz` file with arrays `x_train`, `y_train`, `x_test`, `y_test` (as keras'
      `mnist.npz` and a saved `cifar10.load_data()` have; the split is kept) or `x`, `y`
      (split by `key`, which is then required). `x` is `(n, ...)` images, channels last
      as given; `y` is `(n,)` or `(n, 1)` integer labels.
    - a folder of MNIST idx files: `train-images-idx3-ubyte`, `train-labels-idx1-ubyte`,
      `t10k-images-idx3-ubyte`, `t10k-labels-idx1-ubyte` (each optionally `.gz`; a `.`
      instead of the `-` before `idx` also works), in the folder itself or in `raw/` or
      `MNIST/raw/` below it (torchvision's layout). Fashion-MNIST has the same format.
    - CIFAR-10's python version: the `cifar-10-batches-py` folder (`data_batch_1..5`,
      `test_batch`), a folder that holds it, or the `cifar-10-python.tar.gz` archive (read
      in place). The pickles are read with an unpickler that admits only numpy arrays and
      plain containers, so a pickle that would run other code is refused, and so is an
      array it declares beyond the memory available, before it is allocated.

    Nothing is downloaded. Pixels and labels follow the module conventions; labels are
    `0 .. MAX_CLASSES − 1` (65535). The sizes the files declare (.npy headers, idx
    headers, the pickles' arrays) are checked against the memory available
    (`MEANFIELD_MEMORY_LIMIT` sets it) before the data are read.

    **Arguments:**

    - `path`: a file or folder (str or `os.PathLike`).
    - `key`, `test_fraction`: the split of an `.npz` with only `x`, `y` (as in
      `load_digits`); unused otherwise.

    **Returns:** an `ImageDataset` named after `path`, with the SHA-256 of the files read
    (`sha256`: of the file's bytes for an `.npz` or an archive, `files_sha256` of the files
    read for a folder).

    **Raises:** `ValueError` (one line naming `path`) for a missing path, an unknown
    layout, an empty, truncated or corrupt file, a size beyond the memory available,
    images or labels of the wrong shape or dtype, non-finite pixels, non-integer labels
    or labels out of range.
    """
    if not isinstance(path, str | os.PathLike):
        raise ValueError(f"path must be a file or folder name, got {type(path).__name__}")
    p = os.fspath(path)
    where = f"path {p!r}"
    if not os.path.exists(p):
        raise ValueError(f"path {p!r} does not exist; expected {_FORMATS}")
    try:
        if os.path.isfile(p):
            if os.path.getsize(p) == 0:
                raise ValueError(f"{where} is empty (0 bytes); expected {_FORMATS}")
            if p.endswith(".npz"):
                data = _load_npz(p, where, key, test_fraction)
            elif p.endswith((".tar.gz", ".tgz", ".tar")):
                data = _load_cifar_tar(p, where)
            else:
                with open(p, "rb") as f:
                    npy = f.read(len(_NPY_MAGIC)) == _NPY_MAGIC
                what = "a single .npy array" if npy else "a file of unknown format"
                raise ValueError(f"{where} is {what}; expected {_FORMATS}")
            return dataclasses.replace(data, sha256=sha256_file(p))
        data, files = _load_folder(p, where)
        return dataclasses.replace(data, sha256=files_sha256(p, files))
    except ValueError:
        raise
    except (OSError, EOFError, pickle.UnpicklingError, tarfile.TarError, KeyError) as err:
        # a truncated or corrupt file: one line, naming the path and the cause
        raise ValueError(f"{where} could not be read ({_cause(err)}); expected {_FORMATS}") from err


def _load_folder(p: str, where: str) -> tuple[ImageDataset, list[str]]:
    """The data set of the folder `p` and the files it was read from."""
    for sub in ("", "cifar-10-batches-py"):
        folder = os.path.join(p, sub)
        if os.path.isfile(os.path.join(folder, "data_batch_1")):
            data = _load_cifar_dir(folder, where)
            return data, [os.path.join(folder, f) for f in _CIFAR_FILES]
    for sub in ("", "raw", os.path.join("MNIST", "raw")):
        folder = os.path.join(p, sub)
        if _idx_file(folder, "train", "images") is not None:
            return _load_idx_dir(folder, where)
    raise ValueError(f"{where} is a folder without recognised data files; expected {_FORMATS}")


def _load_npz(p: str, where: str, key, test_fraction) -> ImageDataset:
    try:
        headers = npz_headers(p)
    except DataFileError as err:
        raise ValueError(f"{where} is not a readable .npz archive: it {err}") from None
    names = set(headers)
    split = ("x_train", "y_train", "x_test", "y_test")
    if set(split) <= names:
        wanted = split
    elif {"x", "y"} <= names:
        wanted = ("x", "y")
    else:
        raise ValueError(
            f"{where} holds arrays {sorted(names)}; expected x, y or x_train, y_train, "
            "x_test, y_test"
        )
    # the declared dtypes and sizes, before any array is read
    memory = _Memory(where)
    for name in wanted:
        shape, dtype = headers[name]
        if dtype.hasobject:  # object arrays need pickles, which are never loaded from an .npz
            raise ValueError(
                f"{where} holds an array that is not numeric ({name}: dtype object, Python "
                "objects that only a pickle could load)"
            )
        memory.take(
            _array_bytes(math.prod(shape), dtype.itemsize, images=name.startswith("x")),
            f"{name} of shape {shape} ({dtype})",
        )
    try:
        arrays = {name: npz_array(p, name) for name in wanted}
    except DataFileError as err:
        raise ValueError(f"{where} is not a readable .npz archive: it {err}") from None
    if "x" in arrays:
        x = _pixels(arrays["x"], f"{where}: x")
        y = _labels(arrays["y"], x.shape[0], f"{where}: y")
        if key is None:
            raise ValueError(
                f"key: {where} has no train/test split (arrays x, y); pass key (a jax.random "
                "key or an integer seed) to split it"
            )
        x_train, y_train, x_test, y_test = _split(x, y, key, test_fraction, where)
        shape = arrays["x"].shape[1:]
    else:
        x_train = _pixels(arrays["x_train"], f"{where}: x_train")
        y_train = _labels(arrays["y_train"], x_train.shape[0], f"{where}: y_train")
        x_test = _pixels(arrays["x_test"], f"{where}: x_test")
        y_test = _labels(arrays["y_test"], x_test.shape[0], f"{where}: y_test")
        shape = arrays["x_train"].shape[1:]
        if arrays["x_test"].shape[1:] != shape:
            raise ValueError(
                f"{where}: x_train and x_test images differ in shape, {shape} and "
                f"{arrays['x_test'].shape[1:]}"
            )
    return _dataset(x_train, y_train, x_test, y_test, shape, p, where)


# MNIST idx: big-endian magic (0, 0, type 0x08 = ubyte, ndim), then ndim uint32 sizes
_IDX_NAMES = {"images": ("images", 3), "labels": ("labels", 1)}


def _idx_file(folder: str, split: str, kind: str) -> str | None:
    stem, ndim = _IDX_NAMES[kind]
    for sep in ("-", "."):
        for ext in ("", ".gz"):
            f = os.path.join(folder, f"{split}-{stem}{sep}idx{ndim}-ubyte{ext}")
            if os.path.isfile(f):
                return f
    return None


def _read_idx(f: str, ndim: int, where: str, memory: _Memory) -> np.ndarray:
    """The array of an idx file: its header first, the size it declares checked against
    `memory`, then exactly that many bytes (more or fewer are refused)."""
    opener = gzip.open if f.endswith(".gz") else open
    name = os.path.basename(f)
    with opener(f, "rb") as fh:
        head = fh.read(4 + 4 * ndim)
        if len(head) < 4 + 4 * ndim or head[:3] != b"\x00\x00\x08" or head[3] != ndim:
            raise ValueError(
                f"{where}: {name} is not an idx file of unsigned bytes with {ndim} dimensions "
                "(bad header)"
            )
        dims = tuple(int(d) for d in np.frombuffer(head[4:], dtype=">u4"))
        count = math.prod(dims)
        memory.take(_array_bytes(count, 1, images=ndim > 1), f"{name} of shape {dims}")
        raw = fh.read(count)
        extra = fh.read(1)
    if len(raw) < count:
        raise ValueError(
            f"{where}: {name} holds {len(raw)} bytes of data, its header says {dims} "
            "(truncated or corrupt)"
        )
    if extra:
        raise ValueError(
            f"{where}: {name} holds more than the {count} bytes of data its header says "
            f"{dims} (corrupt)"
        )
    return np.frombuffer(raw, dtype=np.uint8).reshape(dims)


def _load_idx_dir(folder: str, where: str) -> tuple[ImageDataset, list[str]]:
    arrays, files = {}, []
    memory = _Memory(where)
    for split in ("train", "t10k"):
        for kind in ("images", "labels"):
            f = _idx_file(folder, split, kind)
            if f is None:
                stem, ndim = _IDX_NAMES[kind]
                raise ValueError(
                    f"{where}: the MNIST folder {folder!r} lacks {split}-{stem}-idx{ndim}-ubyte "
                    "(or .gz)"
                )
            if os.path.getsize(f) == 0:
                raise ValueError(f"{where}: {os.path.basename(f)} is empty (0 bytes)")
            arrays[split, kind] = _read_idx(f, _IDX_NAMES[kind][1], where, memory)
            files.append(f)
    x_train = _pixels(arrays["train", "images"], f"{where}: train images")
    y_train = _labels(arrays["train", "labels"], x_train.shape[0], f"{where}: train labels")
    x_test = _pixels(arrays["t10k", "images"], f"{where}: t10k images")
    y_test = _labels(arrays["t10k", "labels"], x_test.shape[0], f"{where}: t10k labels")
    shape = arrays["train", "images"].shape[1:]
    return _dataset(x_train, y_train, x_test, y_test, shape, folder, where), files


class _Capped:
    """A pickle's stream that ends where its file does (`size` bytes): a length the pickle
    declares beyond its remaining bytes is refused before anything of that length is
    allocated or read."""

    def __init__(self, fh: IO[bytes], size: int):
        self._fh, self.size, self.left = fh, size, size

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = self.left
        if n > self.left and not (n == 1 and self.left == 0):  # an opcode at the end: EOF
            raise pickle.UnpicklingError(
                f"it declares {n} bytes where {self.left} remain (truncated or corrupt)"
            )
        data = self._fh.read(min(n, self.left))
        self.left -= len(data)
        return data

    def readline(self) -> bytes:
        line = self._fh.readline(self.left)
        self.left -= len(line)
        return line


class _NDArray:
    """`numpy.ndarray` as a pickle names it: only `_reconstruct` takes it (calling it, as a
    pickle could to allocate an array of any shape, fails)."""


_NDARRAY = _NDArray()


def _load_bytearray8(self: Any) -> None:
    """BYTEARRAY8 (protocol 5), its length checked against the pickle's bytes before the
    bytearray is allocated."""
    (n,) = struct.unpack("<Q", self.read(8))
    if n > self._stream.size:
        raise pickle.UnpicklingError(
            f"it declares a bytearray of {n} bytes in a pickle of {self._stream.size}"
        )
    buf = bytearray(n)
    self.readinto(buf)
    self.append(buf)


class _ArraysOnly(pickle._Unpickler):
    """Admits numpy arrays, dtypes and builtin containers; refuses every other global, and
    an array whose declared size is beyond the memory available, before it is allocated.
    The pure-Python unpickler, reading from `_Capped`: no length a pickle declares is
    allocated before its bytes are there."""

    _ALLOWED = {
        ("_codecs", "encode"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
    }
    dispatch = dict(pickle._Unpickler.dispatch)
    dispatch[pickle.BYTEARRAY8[0]] = _load_bytearray8

    def __init__(self, fh: IO[bytes], size: int, memory: _Memory, name: str):
        self._stream = _Capped(fh, size)
        super().__init__(self._stream, encoding="bytes")
        self._memory, self._name = memory, name

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refused to load {module}.{name} from a pickle")
        if name == "ndarray":
            return _NDARRAY
        if name == "_reconstruct":
            return self._reconstruct
        return super().find_class(module, name)

    def _reconstruct(self, subtype, shape, dtype) -> np.ndarray:
        """numpy's `_reconstruct(ndarray, shape, dtype)`, which allocates an array of
        `shape` (a pickle of an array passes (0,) and sets the data after), refused
        beyond the memory available."""
        if subtype is not _NDARRAY:
            raise pickle.UnpicklingError("refused to reconstruct a type other than numpy.ndarray")
        dtype = np.dtype(dtype)
        if dtype.hasobject:
            raise pickle.UnpicklingError("refused an array of Python objects")
        shape = tuple(int(n) for n in (shape if isinstance(shape, tuple | list) else (shape,)))
        if any(n < 0 for n in shape):
            raise pickle.UnpicklingError(f"an array of negative shape {shape}")
        count = math.prod(shape)
        self._memory.take(
            _array_bytes(count * math.prod(dtype.shape), dtype.base.itemsize, images=True),
            f"{self._name} declares an array of shape {shape} ({dtype}), which",
        )
        return np.ndarray(shape, dtype)


def _cifar_batch(
    fh: IO[bytes], size: int, name: str, where: str, memory: _Memory
) -> tuple[np.ndarray, np.ndarray]:
    if size == 0:
        raise ValueError(f"{where}: {name} is empty (0 bytes)")
    # the batch's own bytes bound its arrays' (the pickle carries their data)
    memory.take(_array_bytes(size, 1, images=True), f"{name} ({size} bytes)")
    try:
        batch = _ArraysOnly(fh, size, memory, name).load()
    except (_TooBig, pickle.UnpicklingError, OSError, EOFError):
        raise
    except Exception as err:  # a corrupt pickle: whatever the unpickler met, in one line
        raise pickle.UnpicklingError(f"{name}: {_cause(err)}") from None
    if not isinstance(batch, dict):
        raise ValueError(f"{where}: {name} is not a CIFAR-10 batch (a pickled dict)")
    batch = {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}
    if "data" not in batch or "labels" not in batch:
        raise ValueError(f"{where}: {name} lacks the CIFAR-10 keys 'data' and 'labels'")
    data = np.asarray(batch["data"])
    if data.ndim != 2 or data.shape[1] != 3072:
        raise ValueError(
            f"{where}: {name} has data of shape {data.shape}, expected (n, 3072) "
            "(32×32 images, 3 channels first)"
        )
    images = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)  # channels last
    return images, np.asarray(batch["labels"])


_CIFAR_FILES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]


def _cifar_dataset(batches: dict, where: str, name: str) -> ImageDataset:
    parts = [_cifar_parts(batches[f], f, where) for f in _CIFAR_FILES]
    x_train = np.concatenate([x for x, _ in parts[:5]])
    y_train = np.concatenate([y for _, y in parts[:5]])
    x_test, y_test = parts[5]
    return _dataset(x_train, y_train, x_test, y_test, (32, 32, 3), name, where)


def _cifar_parts(batch: tuple[np.ndarray, np.ndarray], f: str, where: str):
    images, labels = batch
    x = _pixels(images, f"{where}: {f} data")
    return x, _labels(labels, x.shape[0], f"{where}: {f} labels")


def _load_cifar_dir(folder: str, where: str) -> ImageDataset:
    batches = {}
    memory = _Memory(where)
    for f in _CIFAR_FILES:
        full = os.path.join(folder, f)
        if not os.path.isfile(full):
            raise ValueError(f"{where}: the CIFAR-10 folder {folder!r} lacks {f}")
        with open(full, "rb") as fh:
            batches[f] = _cifar_batch(fh, os.path.getsize(full), f, where, memory)
    return _cifar_dataset(batches, where, folder)


def _load_cifar_tar(p: str, where: str) -> ImageDataset:
    batches = {}
    memory = _Memory(where)
    with tarfile.open(p) as tar:
        members = {os.path.basename(m.name): m for m in tar.getmembers() if m.isfile()}
        for f in _CIFAR_FILES:
            if f not in members:
                raise ValueError(f"{where}: the archive lacks CIFAR-10's {f}; expected {_FORMATS}")
            fh = tar.extractfile(members[f])
            if fh is None:
                raise ValueError(f"{where}: the archive member {f} cannot be read")
            with fh:
                batches[f] = _cifar_batch(fh, members[f].size, f, where, memory)
    return _cifar_dataset(batches, where, p)
