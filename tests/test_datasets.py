"""meanfield.io.datasets: the bundled digits, user files in every supported format (tiny
synthetic arrays written to temporary files), and one-line refusals naming `path`."""

import gzip
import os
import pickle
import struct
import subprocess
import sys
import tarfile

import jax
import numpy as np
import pytest
from conftest import HANG_GUARD_S

from meanfield.io.datasets import load_digits, load_images

# -- scikit-learn's digits ------------------------------------------------------------


def test_digits_shapes_ranges_labels():
    data = load_digits(0)
    assert data.x_train.shape == (1438, 64) and data.x_test.shape == (359, 64)
    assert data.x_train.dtype == np.float32 and data.y_train.dtype == np.int32
    assert data.image_shape == (8, 8) and data.n_classes == 10 and data.n_features == 64
    x = np.concatenate([data.x_train, data.x_test])
    y = np.concatenate([data.y_train, data.y_test])
    assert x.min() == 0.0 and x.max() == 1.0
    assert set(np.unique(data.y_train)) == set(range(10))
    assert set(np.unique(data.y_test)) == set(range(10))
    # the split is a permutation: the same images, each once (rows are near-unique)
    from sklearn.datasets import load_digits as sk

    bunch = sk()
    order = np.lexsort(np.column_stack([x, y]).T)
    ref = np.column_stack([bunch.data / 16.0, bunch.target])
    ref_order = np.lexsort(ref.T)
    np.testing.assert_allclose(np.column_stack([x, y])[order], ref[ref_order], atol=1e-7)
    assert "1438 train / 359 test" in str(data)


def test_digits_split_determinism():
    a, b = load_digits(7), load_digits(jax.random.key(7))
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    c = load_digits(8)
    assert not np.array_equal(a.y_train, c.y_train)
    legacy = load_digits(jax.random.PRNGKey(7))  # a raw uint32 key
    assert legacy.x_train.shape == a.x_train.shape
    half = load_digits(7, test_fraction=0.5)
    assert len(half.y_test) == 898 and len(half.y_train) == 899


@pytest.mark.parametrize(
    "key, kwargs, match",
    [
        (-1, {}, r"^key: an integer seed must be >= 0"),
        (True, {}, r"^key must be a jax.random key"),
        ("0", {}, r"^key must be a jax.random key"),
        (0, {"test_fraction": 0.0}, r"^test_fraction must be a number in \(0, 1\)"),
        (0, {"test_fraction": 1e-6}, r"^test_fraction=1e-06 leaves an empty"),
    ],
)
def test_digits_refusals(key, kwargs, match):
    with pytest.raises(ValueError, match=match) as info:
        load_digits(key, **kwargs)
    assert "\n" not in str(info.value)


def test_import_meanfield_does_not_import_sklearn():
    code = (
        "import sys, meanfield, meanfield.io.datasets, meanfield.diagnostics.regularity; "
        "assert 'sklearn' not in sys.modules, 'sklearn imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=HANG_GUARD_S)


# -- synthetic user files -------------------------------------------------------------


def _images(rng, n, shape):
    return rng.integers(0, 256, size=(n, *shape), dtype=np.uint8)


def _labels(rng, n, classes=10):
    y = rng.integers(0, classes, size=n).astype(np.uint8)
    y[: min(n, classes)] = np.arange(min(n, classes))  # every class present when n allows
    return y


def _check(data, x_train, y_train, x_test, y_test, image_shape):
    assert data.image_shape == image_shape
    n_feat = int(np.prod(image_shape))
    assert data.x_train.shape == (len(y_train), n_feat) and data.x_train.dtype == np.float32
    np.testing.assert_allclose(data.x_train, x_train.reshape(len(y_train), -1) / 255.0, rtol=1e-6)
    np.testing.assert_allclose(data.x_test, x_test.reshape(len(y_test), -1) / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(data.y_train, np.asarray(y_train).ravel())
    np.testing.assert_array_equal(data.y_test, np.asarray(y_test).ravel())
    assert data.y_train.dtype == np.int32
    assert data.n_classes == int(max(np.max(y_train), np.max(y_test))) + 1


def test_npz_keras_split(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": _images(rng, 12, (28, 28)),
        "y_train": _labels(rng, 12),
        "x_test": _images(rng, 5, (28, 28)),
        "y_test": _labels(rng, 5),
    }
    np.savez(tmp_path / "mnist.npz", **arrays)
    data = load_images(tmp_path / "mnist.npz")  # a PathLike
    _check(data, arrays["x_train"], arrays["y_train"], arrays["x_test"], arrays["y_test"], (28, 28))


def test_npz_cifar_channels_last_column_labels(tmp_path):
    rng = np.random.default_rng(1)
    x_train, x_test = _images(rng, 6, (32, 32, 3)), _images(rng, 4, (32, 32, 3))
    y_train, y_test = _labels(rng, 6)[:, None], _labels(rng, 4)[:, None]  # keras: (n, 1)
    f = str(tmp_path / "cifar10.npz")
    np.savez_compressed(f, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
    _check(load_images(f), x_train, y_train, x_test, y_test, (32, 32, 3))


def test_npz_x_y_split_by_key(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.random((20, 4, 4)).astype(np.float32)  # floats in [0, 1]: kept as they are
    y = np.arange(20) % 3
    f = str(tmp_path / "xy.npz")
    np.savez(f, x=x, y=y)
    a = load_images(f, key=3, test_fraction=0.25)
    assert a.x_train.shape == (15, 16) and a.x_test.shape == (5, 16) and a.n_classes == 3
    b = load_images(f, key=jax.random.key(3), test_fraction=0.25)
    np.testing.assert_array_equal(a.x_test, b.x_test)
    # every image is in exactly one half, unchanged
    both = np.concatenate([a.x_train, a.x_test])
    assert sorted(map(tuple, both.tolist())) == sorted(map(tuple, x.reshape(20, -1).tolist()))
    # float pixels in [0, 255] are divided by 255
    np.savez(f, x=x * 255.0, y=y)
    c = load_images(f, key=3, test_fraction=0.25)
    np.testing.assert_allclose(c.x_test, a.x_test, rtol=1e-6)


def _write_idx(path, array, gz=False):
    header = bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    raw = header + array.astype(np.uint8).tobytes()
    if gz:
        with gzip.open(path, "wb") as fh:
            fh.write(raw)
    else:
        with open(path, "wb") as fh:
            fh.write(raw)


def _mnist_folder(folder, rng, gz=False, sep="-"):
    os.makedirs(folder, exist_ok=True)
    arrays = {
        "train": (_images(rng, 10, (28, 28)), _labels(rng, 10)),
        "t10k": (_images(rng, 4, (28, 28)), _labels(rng, 4)),
    }
    ext = ".gz" if gz else ""
    for split, (x, y) in arrays.items():
        _write_idx(os.path.join(folder, f"{split}-images{sep}idx3-ubyte{ext}"), x, gz)
        _write_idx(os.path.join(folder, f"{split}-labels{sep}idx1-ubyte{ext}"), y, gz)
    return arrays


@pytest.mark.parametrize("gz, sep, sub", [(False, "-", ""), (True, "-", "raw"), (False, ".", "")])
def test_mnist_idx_folder(tmp_path, gz, sep, sub):
    arrays = _mnist_folder(os.path.join(tmp_path, sub), np.random.default_rng(3), gz, sep)
    data = load_images(str(tmp_path))
    (xtr, ytr), (xte, yte) = arrays["train"], arrays["t10k"]
    _check(data, xtr, ytr, xte, yte, (28, 28))


def _cifar_batches(folder, rng, sizes=(3, 2, 2, 2, 2, 3)):
    os.makedirs(folder, exist_ok=True)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    out = {}
    for name, n in zip(names, sizes, strict=True):
        data = _images(rng, n, (3072,))
        labels = [int(v) for v in _labels(rng, n)]
        with open(os.path.join(folder, name), "wb") as fh:
            pickle.dump({b"batch_label": b"x", b"data": data, b"labels": labels}, fh, protocol=2)
        out[name] = (data, labels)
    return out


def _cifar_expected(batches):
    def stack(names):
        x = np.concatenate([batches[n][0] for n in names]).reshape(-1, 3, 32, 32)
        return x.transpose(0, 2, 3, 1), np.concatenate([batches[n][1] for n in names])

    xtr, ytr = stack([f"data_batch_{i}" for i in range(1, 6)])
    xte, yte = stack(["test_batch"])
    return xtr, ytr, xte, yte


@pytest.mark.parametrize("where", ["folder", "parent", "tar"])
def test_cifar_pickles(tmp_path, where):
    folder = os.path.join(tmp_path, "cifar-10-batches-py")
    batches = _cifar_batches(folder, np.random.default_rng(4))
    if where == "folder":
        path = folder
    elif where == "parent":
        path = str(tmp_path)
    else:
        path = os.path.join(tmp_path, "cifar-10-python.tar.gz")
        with tarfile.open(path, "w:gz") as tar:
            tar.add(folder, arcname="cifar-10-batches-py")
    data = load_images(path)
    xtr, ytr, xte, yte = _cifar_expected(batches)
    _check(data, xtr, ytr, xte, yte, (32, 32, 3))
    # channels last: the red plane of the pickle is feature 0, 3, 6, ... of the flat image
    red = batches["test_batch"][0][0, :1024] / 255.0
    np.testing.assert_allclose(data.x_test[0, 0::3], red, rtol=1e-6)


# -- refusals -------------------------------------------------------------------------


def _refused(path, match, **kwargs):
    with pytest.raises(ValueError, match=match) as info:
        load_images(path, **kwargs)
    msg = str(info.value)
    assert "\n" not in msg and "path" in msg, msg
    return msg


def test_missing_and_unknown_paths(tmp_path):
    msg = _refused(str(tmp_path / "nope.npz"), r"^path '.*nope.npz' does not exist; expected")
    assert "idx" in msg and "cifar-10-batches-py" in msg
    (tmp_path / "notes.txt").write_text("hello")
    _refused(str(tmp_path / "notes.txt"), r"is a file of unknown format")
    empty = tmp_path / "empty"
    empty.mkdir()
    _refused(str(empty), r"is a folder without recognised data files")
    with pytest.raises(ValueError, match=r"^path must be a file or folder name"):
        load_images(3)


def _npz(tmp_path, **arrays):
    f = str(tmp_path / "data.npz")
    np.savez(f, **arrays)
    return f


def test_npz_refusals(tmp_path):
    rng = np.random.default_rng(5)
    x, y = _images(rng, 8, (4, 4)), _labels(rng, 8)
    _refused(_npz(tmp_path, images=x, labels=y), r"holds arrays \['images', 'labels'\]; expected")
    _refused(_npz(tmp_path, x=x, y=y), r"^key: path .* has no train/test split")
    _refused(_npz(tmp_path, x=x[:, 0, 0], y=y), r": x must be a non-empty stack of images")
    _refused(
        _npz(tmp_path, x=x, y=y[:7]), r": y must be 8 labels of shape \(8,\), got shape \(7,\)"
    )
    _refused(_npz(tmp_path, x=x, y=y[:, None, None]), r": y must be 8 labels")
    nan = x / 255.0
    nan[3, 1, 1] = np.nan
    _refused(_npz(tmp_path, x=nan, y=y), r": x must be finite, got 1 NaN")
    _refused(_npz(tmp_path, x=x, y=y + 0.5), r": y must hold integer class labels")
    _refused(_npz(tmp_path, x=x, y=y.astype(str)), r": y must hold integer class labels")
    _refused(_npz(tmp_path, x=x, y=y.astype(np.int64) - 1), r": y must hold class labels >= 0")
    _refused(_npz(tmp_path, x=x * 300.0, y=y), r"pixels in \[0, 1\] or \[0, 255\]")
    _refused(_npz(tmp_path, x=x.astype(np.int16) - 1, y=y), r"pixels in 0..255")
    split = {"x_train": x, "y_train": y, "x_test": x[:2, :3], "y_test": y[:2]}
    _refused(_npz(tmp_path, **split), r"x_train and x_test images differ in shape")
    f = str(tmp_path / "objects.npz")
    np.savez(f, x=np.array([x, None], dtype=object), y=y)
    _refused(f, r"holds an array that is not numeric")
    (tmp_path / "broken.npz").write_bytes(b"not a zip archive")
    _refused(str(tmp_path / "broken.npz"), r"is not a readable .npz archive")


def test_idx_refusals(tmp_path):
    rng = np.random.default_rng(6)
    _mnist_folder(str(tmp_path), rng)
    os.remove(tmp_path / "t10k-labels-idx1-ubyte")
    _refused(str(tmp_path), r"lacks t10k-labels-idx1-ubyte")
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte", _labels(rng, 3))  # 3 labels, 4 images
    _refused(str(tmp_path), r"t10k labels must be 4 labels")
    raw = (tmp_path / "train-images-idx3-ubyte").read_bytes()
    (tmp_path / "train-images-idx3-ubyte").write_bytes(raw[:-10])
    _refused(str(tmp_path), r"train-images-idx3-ubyte holds 7830 bytes of data.*truncated")
    (tmp_path / "train-images-idx3-ubyte").write_bytes(b"\x00\x00\x0d\x03" + raw[4:])
    _refused(str(tmp_path), r"is not an idx file of unsigned bytes with 3 dimensions")
    (tmp_path / "train-images-idx3-ubyte").unlink()
    (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(b"not gzip")
    _refused(str(tmp_path), r"could not be read \(BadGzipFile")


class _Evil:
    def __reduce__(self):
        return (os.getcwd, ())


def test_cifar_refusals(tmp_path):
    folder = os.path.join(tmp_path, "cifar-10-batches-py")
    _cifar_batches(folder, np.random.default_rng(7))
    os.remove(os.path.join(folder, "test_batch"))
    _refused(folder, r"the CIFAR-10 folder .* lacks test_batch")
    with open(os.path.join(folder, "test_batch"), "wb") as fh:
        pickle.dump({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, fh, protocol=2)
    _refused(folder, r"test_batch has data of shape \(2, 100\), expected \(n, 3072\)")
    with open(os.path.join(folder, "test_batch"), "wb") as fh:
        pickle.dump({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0.5, 1]}, fh, protocol=2)
    _refused(folder, r"test_batch labels must hold integer class labels")
    with open(os.path.join(folder, "test_batch"), "wb") as fh:
        pickle.dump({b"data": _Evil(), b"labels": [0]}, fh, protocol=2)
    _refused(folder, r"could not be read \(UnpicklingError: refused to load posix.getcwd")
    with open(os.path.join(folder, "test_batch"), "wb") as fh:
        fh.write(b"\x80\x02}q")  # a truncated pickle
    _refused(folder, r"could not be read")
    with tarfile.open(os.path.join(tmp_path, "c.tar.gz"), "w:gz") as tar:
        tar.add(os.path.join(folder, "data_batch_1"), arcname="data_batch_1")
    _refused(os.path.join(tmp_path, "c.tar.gz"), r"the archive lacks CIFAR-10's data_batch_2")


def test_sha256_of_the_files_read(tmp_path):
    """`sha256`: of the file's bytes for an .npz or an archive; for a folder, of the
    `sha256sum` lines of the files read (sorted), so that other pixels of the same shape
    give another hash; None for the bundled digits."""
    import hashlib

    from meanfield.io.datasets import files_sha256

    rng = np.random.default_rng(8)
    f = _npz(tmp_path, x=_images(rng, 8, (4, 4)), y=_labels(rng, 8))
    assert load_images(f, key=0).sha256 == hashlib.sha256(open(f, "rb").read()).hexdigest()
    folder = str(tmp_path / "mnist")
    _mnist_folder(folder, rng)
    names = sorted(os.listdir(folder))
    lines = "".join(
        f"{hashlib.sha256(open(os.path.join(folder, n), 'rb').read()).hexdigest()}  {n}\n"
        for n in names
    )
    first = load_images(folder).sha256
    assert first == hashlib.sha256(lines.encode()).hexdigest()
    assert first == files_sha256(folder, [os.path.join(folder, n) for n in names])
    _mnist_folder(folder, np.random.default_rng(9))  # other pixels, the same shapes
    assert load_images(folder).sha256 != first
    assert load_digits(0).sha256 is None


def test_declared_sizes_refused_before_allocating(tmp_path, monkeypatch):
    """A CIFAR-10 pickle of a few hundred bytes declaring a (10^6, 3072) array, an .npz
    whose header declares one, an idx header declaring 60 million images: refused in one
    line against the memory available, with nothing of the declared size allocated."""
    import tracemalloc

    from numpy._core.multiarray import _reconstruct

    class Declared:
        def __reduce__(self):
            return (_reconstruct, (np.ndarray, (10**6, 3072), b"b"))

    monkeypatch.setenv("MEANFIELD_MEMORY_LIMIT", "1e9")
    folder = os.path.join(tmp_path, "cifar-10-batches-py")
    _cifar_batches(folder, np.random.default_rng(10))
    with open(os.path.join(folder, "data_batch_3"), "wb") as fh:
        pickle.dump({b"data": Declared(), b"labels": [0]}, fh, protocol=2)
    assert os.path.getsize(os.path.join(folder, "data_batch_3")) < 300
    tracemalloc.start()
    _refused(folder, r"data_batch_3 declares an array of shape \(1000000, 3072\) \(int8\), "
             r"which needs about 27\.6 GB of memory")  # fmt: skip
    idx = tmp_path / "idx"
    _mnist_folder(str(idx), np.random.default_rng(11))
    raw = (idx / "train-images-idx3-ubyte").read_bytes()
    (idx / "train-images-idx3-ubyte").write_bytes(raw[:4] + struct.pack(">I", 6 * 10**7) + raw[8:])
    _refused(str(idx), r"train-images-idx3-ubyte of shape \(60000000, 28, 28\) needs about")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MiB allocated before refusing"
    with pytest.raises(ValueError, match=r"^MEANFIELD_MEMORY_LIMIT: "):
        monkeypatch.setenv("MEANFIELD_MEMORY_LIMIT", "lots")
        load_images(folder)


def test_labels_beyond_the_class_limit(tmp_path):
    rng = np.random.default_rng(12)
    x = _images(rng, 8, (4, 4))
    for y, shown in ((np.full(8, 2**31 - 1), "2147483647"), (np.full(8, 2**16), "65536")):
        msg = _refused(_npz(tmp_path, x=x, y=y), r": y must hold class labels >= 0 and below 65536")
        assert f"[{shown}, {shown}]" in msg
    assert load_images(_npz(tmp_path, x=x, y=np.full(8, 2**16 - 1)), key=0).n_classes == 2**16
