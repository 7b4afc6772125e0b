"""The `--data` files of the studies (two-layer, shapes: `embedded_options.load_data`;
trained-weights: `meanfield.io.datasets.load_images`): every broken file refused by the
command line in one line naming --data, exit status 2, no output folder left, before any
array of a declared size is allocated; valid files still taken; and the data's content
(`data_sha256`) part of the configuration, so that `--resume` on other data of the same
shape is refused naming --data."""

import hashlib
import io
import json
import os
import pickle
import re
import struct
import tracemalloc
import zipfile

import numpy as np
import pytest

from meanfield.cli import main
from meanfield.studies.shared import embedded_options
from meanfield.studies.two_layer import study as two_layer

X = np.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0]])
Y = np.array([[1.0], [-0.5]])


def _refused(capsys, study, data, out, pattern, *extra):
    """Run `meanfield study STUDY --data DATA`: exit status 2, one line on stderr naming
    --data and matching `pattern`, no folder `out`."""
    capsys.readouterr()
    rc = main(["study", study, "--data", str(data), "--out", str(out), "--no-progress", *extra])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith(f"meanfield study {study}: error: --data: "), err
    assert re.search(pattern, lines[0]), lines[0]
    assert not out.exists()
    return lines[0]


def _npy_header(shape, descr="<f8") -> bytes:
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        head, {"descr": descr, "fortran_order": False, "shape": shape}
    )
    return head.getvalue()


# -- two-layer and shapes: an .npz with x (n, d_in), y (n, d_out) ----------------------


def _write(path, **arrays):
    np.savez(path, **arrays)
    return path


def _two_layer_files(tmp):
    """name -> (file, the message's pattern)."""
    ok = _write(tmp / "ok.npz", x=X, y=Y)
    raw = ok.read_bytes()
    (tmp / "empty.npz").write_bytes(b"")
    (tmp / "truncated.npz").write_bytes(raw[: len(raw) // 2])
    np.save(tmp / "single.npy", X)
    (tmp / "text.npz").write_text("x,y\n1,2\n")
    with zipfile.ZipFile(tmp / "declared.npz", "w") as zf:  # headers only: 8 TB declared
        zf.writestr("x.npy", _npy_header((10**6, 10**6)))
        zf.writestr("y.npy", _npy_header((10**6, 1)))
    cannot = r"--data: cannot read '.*' as \.npz: it "
    return {
        "empty": (tmp / "empty.npz", cannot + r"is empty \(0 bytes\)$"),
        "truncated": (tmp / "truncated.npz", cannot + r"is truncated or corrupt \(BadZipFile"),
        "npy": (tmp / "single.npy", cannot + r"is a single \.npy array, not an \.npz archive"),
        "text": (tmp / "text.npz", cannot + r"is not a zip archive, as an \.npz is"),
        "no rows": (
            _write(tmp / "rows.npz", x=np.zeros((0, 3)), y=np.zeros((0, 1))),
            r"x has no rows \(shape \(0, 3\)\); need at least one input$",
        ),
        "no columns": (
            _write(tmp / "cols.npz", x=np.zeros((2, 0)), y=Y),
            r"x has no columns \(shape \(2, 0\)\); need d_in >= 1$",
        ),
        "no outputs": (
            _write(tmp / "outs.npz", x=X, y=np.zeros((2, 0))),
            r"y has no columns \(shape \(2, 0\)\); need d_out >= 1$",
        ),
        "y not 2-d": (
            _write(tmp / "y1.npz", x=X, y=Y[:, 0]),
            r"ys: must have shape \(n, d_out\) with n = 2, got \(2,\)$",
        ),
        "all-zero x": (
            _write(tmp / "zero.npz", x=np.zeros((2, 3)), y=Y),
            r"x is all zeros: the inputs span nothing",
        ),
        "vanishing x": (
            _write(tmp / "tiny.npz", x=X * 1e-200, y=Y),
            r"x's largest \|value\| is 1e-200, below 1e-12",
        ),
        "complex x": (
            _write(tmp / "cx.npz", x=X + 1j, y=Y),
            r"x is complex \(complex128\); need real numbers \(the imaginary part would be",
        ),
        "complex y": (_write(tmp / "cy.npz", x=X, y=Y + 0j), r"y is complex \(complex128\)"),
        "object": (
            _write(tmp / "obj.npz", x=np.array([[1.0, "a"]], dtype=object), y=np.ones((1, 1))),
            r"x is an array of Python objects \(dtype object\)",
        ),
        "strings": (
            _write(tmp / "str.npz", x=X.astype(str), y=Y),
            r"x has dtype '<U\d+', not numbers",
        ),
        "booleans": (_write(tmp / "bool.npz", x=X > 0.5, y=Y), r"x holds booleans"),
        "NaN": (
            _write(tmp / "nan.npz", x=np.where(X > 0.7, np.nan, X), y=Y),
            r"xs: contains NaN or inf \(2 of its 6 entries; the first at index \(0, 0\): nan\)$",
        ),
        "inf in y": (
            _write(tmp / "inf.npz", x=X, y=np.array([[np.inf], [1.0]])),
            r"ys: contains NaN or inf \(1 of its 2 entries",
        ),
        "1e300": (
            _write(tmp / "big.npz", x=X * 1e300, y=Y),
            r"x holds 1e\+300 at row 0, column 0 \(3 of its 6 entries beyond "
            r"\|value\| <= 1e\+12\).*overflows",
        ),
        "huge integers": (
            _write(tmp / "int.npz", x=np.array([[2**62, 0, 0], [1, 1, 0]]), y=Y),
            r"x holds 4\.612e\+18 at row 0, column 0",
        ),
        "y 1e300": (_write(tmp / "ybig.npz", x=X, y=Y * 1e300), r"y holds 1e\+300 at row 0"),
        "500 inputs": (
            _write(tmp / "n500.npz", x=np.tile(X, (250, 1)), y=np.tile(Y, (250, 1))),
            r"x has 500 inputs \(rows\), more than the 100 that two-layer takes",
        ),
        "d_in 20000": (
            _write(tmp / "wide.npz", x=np.eye(2, 20000), y=Y),
            r"x has 20000 columns \(d_in\), more than the 5000 that two-layer takes",
        ),
        "declared 8 TB": (
            tmp / "declared.npz",
            r"x has 1000000 inputs \(rows\), more than the 100",
        ),
        "rank + d_out > 4": (
            _write(tmp / "rank.npz", x=np.eye(4), y=np.ones((4, 1))),
            r"x spans 4 dimension\(s\) and y has 1 column\(s\): the two-layer limit is a "
            r"Gaussian integral over rank\(x\) \+ d_out = 5 dimensions, more than the 4",
        ),
    }


def test_two_layer_refuses_every_broken_file_in_one_line(tmp_path, capsys):
    files = _two_layer_files(tmp_path)
    for name, (path, pattern) in files.items():
        tracemalloc.start()
        try:
            _refused(capsys, "two-layer", path, tmp_path / "out", pattern)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 64 * 2**20, f"{name}: {peak / 2**20:.0f} MiB allocated"  # no 8 TB read


def test_shapes_refuses_broken_files_and_its_own_sizes(tmp_path, capsys):
    """shapes reads --data through the same loader (the same refusals, one sampled here
    per kind) with its own limits: 200 inputs, d_in + d_out <= 32, no quadrature rank."""
    files = _two_layer_files(tmp_path)
    for name in ("empty", "npy", "complex x", "all-zero x", "1e300", "declared 8 TB"):
        path, pattern = files[name]
        pattern = pattern.replace("more than the 100", "more than the 200")
        _refused(capsys, "shapes", path, tmp_path / "out", pattern)
    wide = _write(tmp_path / "p40.npz", x=np.ones((2, 39)), y=Y)
    _refused(
        capsys, "shapes", wide, tmp_path / "out",
        r"x, y have d_in \+ d_out = 39 \+ 1 = 40 columns, more than the 32 that shapes takes",
    )  # fmt: skip
    many = _write(tmp_path / "n201.npz", x=np.ones((201, 1)), y=np.ones((201, 1)))
    _refused(
        capsys, "shapes", many, tmp_path / "out", r"x has 201 inputs \(rows\), more than the 200"
    )
    # the rank limit is two-layer's quadrature's: shapes takes 4 independent inputs
    x, y = embedded_options.load_data(str(files["rank + d_out > 4"][0]), study="shapes")
    assert x.shape == (4, 4) and y.shape == (4, 1)


def test_valid_files_are_taken(tmp_path):
    """A valid file (float64, float32, float16 and integers, all converted to float64
    exactly) and duplicated inputs (no computation inverts their Gram: the limits drop
    its null directions) are taken; the built-in data are unchanged."""
    for dtype in (np.float64, np.float32, np.float16, np.int64):
        f = _write(tmp_path / "v.npz", x=(X * 4).astype(dtype), y=Y)
        x, y = embedded_options.load_data(str(f))
        assert x.dtype == np.float64 and y.dtype == np.float64
        np.testing.assert_array_equal(x, (X * 4).astype(dtype).astype(np.float64))
    dup = _write(tmp_path / "dup.npz", x=X[[0, 1, 0]], y=np.array([[1.0], [0.5], [1.0]]))
    for study in ("two-layer", "shapes"):
        x, _ = embedded_options.load_data(str(dup), study=study)
        assert x.shape == (3, 3)
    x, y = embedded_options.load_data(None)
    assert x.tolist() == embedded_options.DATA_X and y.tolist() == embedded_options.DATA_Y


class _Stop(Exception):
    pass


def test_two_layer_resume_on_other_data_is_refused_naming_data(tmp_path, capsys, monkeypatch):
    """The file's sha256 is in the configuration (beside x and y): a --resume after the
    file was replaced by other values of the same shape is refused naming --data; with
    the same file it goes on."""

    def stop(*args, **kwargs):  # the study stops once its folder is made
        raise _Stop

    monkeypatch.setattr(two_layer, "_Study", stop)
    data, out = tmp_path / "d.npz", tmp_path / "tl"
    _write(data, x=X, y=Y)
    options = ["study", "two-layer", "--data", str(data), "--out", str(out), "--no-progress",
               "--M", "64,256", "--D", "4,16", "--D-limit", "16,256", "--s-v-sweep", "0.5,2",
               "--sweep-M", "64", "--sweep-D", "8", "--seeds", "2", "--steps", "1"]  # fmt: skip
    with pytest.raises(_Stop):
        main(options)
    config = json.loads((out / "config.json").read_text())["config"]
    assert config["data_sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
    with pytest.raises(_Stop):  # the same data: the configuration matches
        main([*options, "--resume"])
    _write(data, x=X[::-1].copy(), y=Y)  # other inputs, the same shape
    capsys.readouterr()
    assert main([*options, "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert re.match(
        r"meanfield study two-layer: error: --data: the data's content changed since .* was "
        r"started \(sha256 [0-9a-f]{12}\.\.\. then, [0-9a-f]{12}\.\.\. now\)",
        err,
    ), err


# -- trained-weights: image files ------------------------------------------------------


def _images(n, rng):
    return rng.integers(0, 256, size=(n, 4, 4), dtype=np.uint8)


class _Declared:
    """Pickles as numpy's `_reconstruct(ndarray, shape, 'b')`: an array of `shape`
    allocated by the unpickler from a pickle of a few hundred bytes."""

    def __init__(self, shape):
        self.shape = shape

    def __reduce__(self):
        from numpy._core.multiarray import _reconstruct

        return (_reconstruct, (np.ndarray, self.shape, b"b"))


def _cifar_folder(folder, rng, data_batch_1=None):
    folder.mkdir(parents=True, exist_ok=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rng.integers(0, 256, (3, 3072), dtype=np.uint8), b"labels": [0, 1, 2]}
        if name == "data_batch_1" and data_batch_1 is not None:
            batch = data_batch_1
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
    return folder


def _image_files(tmp, rng):
    x, y = _images(12, rng), np.arange(12) % 3
    ok = _write(tmp / "ok.npz", x=x, y=y)
    raw = ok.read_bytes()
    (tmp / "empty.npz").write_bytes(b"")
    (tmp / "truncated.npz").write_bytes(raw[: len(raw) // 2])
    np.save(tmp / "single.npy", x)
    (tmp / "notes.txt").write_text("hello")
    (tmp / "text.npz").write_text("hello")
    with zipfile.ZipFile(tmp / "declared.npz", "w") as zf:  # 3 GB of pixels declared
        zf.writestr("x.npy", _npy_header((10**6, 3072), "|u1"))
        zf.writestr("y.npy", _npy_header((10**6,), "|u1"))
    bomb = _cifar_folder(tmp / "bomb", rng, {b"data": _Declared((10**6, 3072)), b"labels": [0]})
    assert (bomb / "data_batch_1").stat().st_size < 300
    idx = tmp / "idx"
    idx.mkdir()
    header = bytes([0, 0, 8, 3]) + struct.pack(">3I", 10**6, 3072, 1)
    for split in ("train", "t10k"):
        (idx / f"{split}-images-idx3-ubyte").write_bytes(header + b"\0" * 64)
        labels = bytes([0, 0, 8, 1]) + struct.pack(">I", 1) + b"\0"
        (idx / f"{split}-labels-idx1-ubyte").write_bytes(labels)
    path = r"--data: path '.*' "
    memory = r"needs about 2\d\.\d GB of memory .* more than the 1 GB available"
    return {
        "empty": (tmp / "empty.npz", path + r"is empty \(0 bytes\); expected"),
        "truncated": (
            tmp / "truncated.npz",
            path + r"is not a readable \.npz archive: it is truncated or corrupt \(BadZipFile",
        ),
        "npy": (tmp / "single.npy", path + r"is a single \.npy array; expected"),
        "npy as .npz": (
            _write_npy_as_npz(tmp, x),
            path + r"is not a readable \.npz archive: it is a single \.npy array",
        ),
        "text": (tmp / "notes.txt", path + r"is a file of unknown format"),
        "text as .npz": (
            tmp / "text.npz",
            path + r"is not a readable \.npz archive: it is not a zip",
        ),
        "no images": (
            _write(tmp / "rows.npz", x=x[:0], y=y[:0]),
            r": x must be a non-empty stack of images \(n, \.\.\.\), got shape \(0, 4, 4\)",
        ),
        "complex": (
            _write(tmp / "cx.npz", x=x + 0j, y=y),
            r": x must hold real pixel values, got dtype complex128",
        ),
        "object": (
            _write(tmp / "obj.npz", x=np.array([x, None], dtype=object), y=y),
            r"holds an array that is not numeric \(x: dtype object",
        ),
        "NaN": (
            _write(
                tmp / "nan.npz", x=np.where(np.arange(16).reshape(4, 4) == 5, np.nan, x / 255), y=y
            ),
            r": x must be finite, got 12 NaN or infinite pixels",
        ),
        "1e300": (_write(tmp / "big.npz", x=x * 1e300, y=y), r"pixels in \[0, 1\] or \[0, 255\]"),
        "label 2^31-1": (
            _write(tmp / "l31.npz", x=x, y=np.full(12, 2**31 - 1)),
            r": y must hold class labels >= 0 and below 65536, got values in "
            r"\[2147483647, 2147483647\]",
        ),
        "negative label": (
            _write(tmp / "lneg.npz", x=x, y=y - 1),
            r": y must hold class labels >= 0 and below 65536, got values in \[-1, 1\]",
        ),
        "non-integer label": (
            _write(tmp / "lhalf.npz", x=x, y=y + 0.5),
            r": y must hold integer class labels, got non-integer values",
        ),
        "declared 3 GB npz": (
            tmp / "declared.npz",
            r": x of shape \(1000000, 3072\) \(uint8\) " + memory,
        ),
        "declared 3 GB pickle": (
            bomb,
            r": data_batch_1 declares an array of shape \(1000000, 3072\) \(int8\), which "
            + memory,
        ),
        "declared 3 GB idx": (
            idx,
            r": train-images-idx3-ubyte of shape \(1000000, 3072, 1\) " + memory,
        ),
    }


def _write_npy_as_npz(tmp, x):
    np.save(tmp / "arr.npy", x)
    os.replace(tmp / "arr.npy", tmp / "arr.npz")
    return tmp / "arr.npz"


def test_trained_weights_refuses_every_broken_file_in_one_line(tmp_path, capsys, monkeypatch):
    import resource

    monkeypatch.setenv("MEANFIELD_MEMORY_LIMIT", "1e9")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for path, pattern in _image_files(tmp_path, np.random.default_rng(0)).values():
        _refused(capsys, "trained-weights", path, tmp_path / "out", pattern)
    # nothing of the declared gigabytes was allocated (ru_maxrss: kilobytes on Linux)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 500_000


# the smallest run: tanh, so that every entry of V moves and the update's regularity is
# measured (relu at d = 4 leaves some constant)
TINY = ["--L", "32", "--d", "4", "--betas", "0.5,1", "--inits", "iid", "--steps", "3",
        "--activation", "tanh", "--batch-size", "8", "--seeds", "2", "--no-self-check",
        "--no-progress"]  # fmt: skip


def test_trained_weights_resume_on_other_data_is_refused_naming_data(tmp_path, capsys):
    """A tiny run on an .npz finishes (a valid file is taken), its config holds the file's
    sha256; the file replaced by other pixels of the same shape, --resume is refused in one
    line naming --data (not finished with points of both data sets)."""
    rng = np.random.default_rng(1)
    data, out = tmp_path / "images.npz", tmp_path / "tw"
    x, y = _images(24, rng), np.arange(24) % 3
    _write(data, x=x, y=y)
    original = data.read_bytes()
    options = ["study", "trained-weights", "--data", str(data), "--out", str(out), *TINY]
    assert main(options) == 0
    config = json.loads((out / "config.json").read_text())["config"]
    assert config["data_sha256"] == hashlib.sha256(original).hexdigest()
    assert json.loads((out / "results.json").read_text())["study"] == "trained-weights"
    _write(data, x=255 - x, y=y)  # other pixels, the same shape and labels
    capsys.readouterr()
    assert main([*options, "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert re.match(
        r"meanfield study trained-weights: error: --data: the data's content changed since "
        r".* was started \(sha256 [0-9a-f]{12}\.\.\. then, [0-9a-f]{12}\.\.\. now\); resume "
        r"with the same data",
        err,
    ), err
    points = sorted(p.name for p in (out / "points").iterdir())
    assert points and all(p.endswith(".json") for p in points)  # the finished points kept
