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
and say what was expected.
"""

import dataclasses
import gzip
import os
import pickle
import tarfile
from typing import IO, Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["ImageDataset", "load_digits", "load_images"]

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
    """

    x_train: np.ndarray = dataclasses.field(repr=False)
    y_train: np.ndarray = dataclasses.field(repr=False)
    x_test: np.ndarray = dataclasses.field(repr=False)
    y_test: np.ndarray = dataclasses.field(repr=False)
    image_shape: tuple[int, ...]
    n_classes: int
    name: str

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
    if y.min() < 0 or y.max() > np.iinfo(np.int32).max:
        raise ValueError(
            f"{where} must hold class labels >= 0, got values in [{y.min()}, {y.max()}]"
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
      plain containers, so a pickle that would run other code is refused.

    Nothing is downloaded. Pixels and labels follow the module conventions.

    **Arguments:**

    - `path`: a file or folder (str or `os.PathLike`).
    - `key`, `test_fraction`: the split of an `.npz` with only `x`, `y` (as in
      `load_digits`); unused otherwise.

    **Returns:** an `ImageDataset` named after `path`.

    **Raises:** `ValueError` (one line naming `path`) for a missing path, an unknown
    layout, a corrupt file, images or labels of the wrong shape, non-finite pixels or
    non-integer labels.
    """
    if not isinstance(path, str | os.PathLike):
        raise ValueError(f"path must be a file or folder name, got {type(path).__name__}")
    p = os.fspath(path)
    where = f"path {p!r}"
    if not os.path.exists(p):
        raise ValueError(f"path {p!r} does not exist; expected {_FORMATS}")
    try:
        if os.path.isfile(p):
            if p.endswith(".npz"):
                return _load_npz(p, where, key, test_fraction)
            if p.endswith((".tar.gz", ".tgz", ".tar")):
                return _load_cifar_tar(p, where)
            raise ValueError(f"{where} is a file of unknown format; expected {_FORMATS}")
        for sub in ("", "cifar-10-batches-py"):
            if os.path.isfile(os.path.join(p, sub, "data_batch_1")):
                return _load_cifar_dir(os.path.join(p, sub), where)
        for sub in ("", "raw", os.path.join("MNIST", "raw")):
            if _idx_file(os.path.join(p, sub), "train", "images") is not None:
                return _load_idx_dir(os.path.join(p, sub), where)
        raise ValueError(f"{where} is a folder without recognised data files; expected {_FORMATS}")
    except ValueError:
        raise
    except (OSError, EOFError, pickle.UnpicklingError, tarfile.TarError, KeyError) as err:
        # a truncated or corrupt file: one line, naming the path and the cause
        msg = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(
            f"{where} could not be read ({type(err).__name__}: {msg}); expected {_FORMATS}"
        ) from err


def _load_npz(p: str, where: str, key, test_fraction) -> ImageDataset:
    try:
        archive = np.load(p, allow_pickle=False)
    except Exception as err:
        raise ValueError(f"{where} is not a readable .npz archive ({type(err).__name__})") from err
    with archive as data:
        names = set(data.files)
        split = {"x_train", "y_train", "x_test", "y_test"}
        try:
            if split <= names:
                arrays = {k: data[k] for k in split}
            elif {"x", "y"} <= names:
                arrays = {"x": data["x"], "y": data["y"]}
            else:
                raise ValueError(
                    f"{where} holds arrays {sorted(names)}; expected x, y or x_train, y_train, "
                    "x_test, y_test"
                )
        except ValueError as err:
            if str(err).startswith(where):
                raise
            # object arrays need pickles, which are never loaded from an .npz
            raise ValueError(f"{where} holds an array that is not numeric ({err})") from err
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


def _read_idx(f: str, ndim: int, where: str) -> np.ndarray:
    opener = gzip.open if f.endswith(".gz") else open
    with opener(f, "rb") as fh:
        raw = fh.read()
    name = os.path.basename(f)
    if len(raw) < 4 + 4 * ndim or raw[:3] != b"\x00\x00\x08" or raw[3] != ndim:
        raise ValueError(
            f"{where}: {name} is not an idx file of unsigned bytes with {ndim} dimensions "
            "(bad header)"
        )
    dims = tuple(int(d) for d in np.frombuffer(raw[4 : 4 + 4 * ndim], dtype=">u4"))
    body = np.frombuffer(raw[4 + 4 * ndim :], dtype=np.uint8)
    if body.size != int(np.prod(dims)):
        raise ValueError(
            f"{where}: {name} holds {body.size} bytes of data, its header says {dims} "
            "(truncated or corrupt)"
        )
    return body.reshape(dims)


def _load_idx_dir(folder: str, where: str) -> ImageDataset:
    arrays = {}
    for split in ("train", "t10k"):
        for kind in ("images", "labels"):
            f = _idx_file(folder, split, kind)
            if f is None:
                stem, ndim = _IDX_NAMES[kind]
                raise ValueError(
                    f"{where}: the MNIST folder {folder!r} lacks {split}-{stem}-idx{ndim}-ubyte "
                    "(or .gz)"
                )
            arrays[split, kind] = _read_idx(f, _IDX_NAMES[kind][1], where)
    x_train = _pixels(arrays["train", "images"], f"{where}: train images")
    y_train = _labels(arrays["train", "labels"], x_train.shape[0], f"{where}: train labels")
    x_test = _pixels(arrays["t10k", "images"], f"{where}: t10k images")
    y_test = _labels(arrays["t10k", "labels"], x_test.shape[0], f"{where}: t10k labels")
    shape = arrays["train", "images"].shape[1:]
    return _dataset(x_train, y_train, x_test, y_test, shape, folder, where)


class _ArraysOnly(pickle.Unpickler):
    """Admits numpy arrays, dtypes and builtin containers; refuses every other global."""

    _ALLOWED = {
        ("_codecs", "encode"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refused to load {module}.{name} from a pickle")
        return super().find_class(module, name)


def _cifar_batch(fh: IO[bytes], name: str, where: str) -> tuple[np.ndarray, np.ndarray]:
    batch = _ArraysOnly(fh, encoding="bytes").load()
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
    for f in _CIFAR_FILES:
        full = os.path.join(folder, f)
        if not os.path.isfile(full):
            raise ValueError(f"{where}: the CIFAR-10 folder {folder!r} lacks {f}")
        with open(full, "rb") as fh:
            batches[f] = _cifar_batch(fh, f, where)
    return _cifar_dataset(batches, where, folder)


def _load_cifar_tar(p: str, where: str) -> ImageDataset:
    batches = {}
    with tarfile.open(p) as tar:
        members = {os.path.basename(m.name): m for m in tar.getmembers() if m.isfile()}
        for f in _CIFAR_FILES:
            if f not in members:
                raise ValueError(f"{where}: the archive lacks CIFAR-10's {f}; expected {_FORMATS}")
            fh = tar.extractfile(members[f])
            if fh is None:
                raise ValueError(f"{where}: the archive member {f} cannot be read")
            with fh:
                batches[f] = _cifar_batch(fh, f, where)
    return _cifar_dataset(batches, where, p)
