"""Text for character-level language modelling, offline (`meanfield.io.text`): the running
interpreter's standard library split by file, a user's text file, the batches, and the
loader's refusals. Each check reads the files again here, independently of the loader."""

import hashlib
import os
import sysconfig

import jax
import numpy as np
import pytest

from meanfield.io.text import VOCAB_SIZE, batches, load_text, stdlib_files


def _validation_by_hash(rel: str, fraction: float) -> bool:
    digest = hashlib.sha256(rel.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def test_the_standard_library_split_by_file():
    """The interpreter's own library read again here (sorted `.py` paths, UTF-8 files, up
    to `max_bytes`, the last file cut): every file on one side only, the side decided by
    its path's hash, and each side the concatenation of its files' bytes."""
    root, cap, fraction = sysconfig.get_paths()["stdlib"], 2**19, 0.25
    corpus = load_text(validation=fraction, max_bytes=cap)
    assert corpus.source == "stdlib" and corpus.vocab_size == VOCAB_SIZE == 256
    expected = {False: [b"", []], True: [b"", []]}
    total = 0
    for rel in stdlib_files(root):
        if total >= cap:
            break
        with open(os.path.join(root, rel), "rb") as fh:
            chunk = fh.read(cap - total)
        try:
            chunk.decode("utf-8")
        except UnicodeDecodeError:
            continue
        total += len(chunk)
        side = expected[_validation_by_hash(rel, fraction)]
        side[0] += chunk
        side[1].append(rel)
    assert corpus.train.dtype == corpus.validation.dtype == np.uint8
    assert bytes(corpus.train) == expected[False][0] and corpus.train.size > 0
    assert bytes(corpus.validation) == expected[True][0] and corpus.validation.size > 0
    assert list(corpus.files_train) == expected[False][1]
    assert list(corpus.files_validation) == expected[True][1]
    assert corpus.train.size + corpus.validation.size == cap
    assert not any("site-packages" in f for f in stdlib_files(root))
    n = len(corpus.files_train) + len(corpus.files_validation)
    assert 0.1 < len(corpus.files_validation) / n < 0.4, (len(corpus.files_validation), n)


def test_a_files_side_does_not_depend_on_the_other_files(tmp_path):
    """A file goes to the same side whatever else the library holds."""
    for i in range(40):
        (tmp_path / f"m{i:02d}.py").write_text(f"x = {i}\n" * 50)
    first = load_text(root=str(tmp_path), validation=0.3)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "extra.py").write_text("y = 1\n" * 50)
    (tmp_path / "site-packages").mkdir()
    (tmp_path / "site-packages" / "other.py").write_text("z = 1\n")
    second = load_text(root=str(tmp_path), validation=0.3)
    assert set(first.files_validation) <= set(second.files_validation)
    assert set(first.files_train) <= set(second.files_train)
    assert "site-packages/other.py" not in second.files_train + second.files_validation
    assert len(second.files_train) + len(second.files_validation) == 41


def test_a_users_file_split_at_a_line_break(tmp_path):
    text = "".join(f"line {i}: é ∂ {i * i}\n" for i in range(200))
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    corpus = load_text(path, validation=0.2)
    data = text.encode("utf-8")
    assert bytes(corpus.train) + bytes(corpus.validation) == data
    assert bytes(corpus.train).endswith(b"\n")
    assert 0.15 < corpus.validation.size / len(data) < 0.25
    assert corpus.decode(corpus.validation).startswith("line ")


def test_batches_are_windows_of_the_text_and_their_next_bytes(tmp_path):
    corpus = load_text(validation=0.1, max_bytes=2**16)
    key = jax.random.key(3)
    x, y = batches(key, corpus.train, batch=5, context=12)
    assert x.shape == y.shape == (5, 12) and str(x.dtype) == "int32"
    x, y = np.asarray(x), np.asarray(y)
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
    text = bytes(corpus.train)
    for row_x, row_y in zip(x, y, strict=True):
        window = bytes(row_x.astype(np.uint8)) + bytes(row_y[-1:].astype(np.uint8))
        assert window in text
    again, _ = batches(key, corpus.train, batch=5, context=12)
    other, _ = batches(jax.random.key(4), corpus.train, batch=5, context=12)
    assert np.array_equal(np.asarray(again), x) and not np.array_equal(np.asarray(other), x)


def test_the_loaders_refusals(tmp_path):
    """One line, naming the argument."""
    text = tmp_path / "t.txt"
    text.write_text("hello world\n" * 10)
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"abc\x00def" * 10)
    latin = tmp_path / "l.txt"
    latin.write_bytes("caf\xe9 au lait\n".encode("latin-1") * 10)
    short = tmp_path / "s.txt"
    short.write_text("ab")
    cases = [
        (lambda: load_text(tmp_path / "missing.txt"), "^path: no such file"),
        (lambda: load_text(tmp_path), "^path: no such file"),
        (lambda: load_text(binary), "^path: .* holds NUL bytes"),
        (lambda: load_text(latin), "^path: .* is not UTF-8 text"),
        (lambda: load_text(short), "^path: .* too short"),
        (lambda: load_text(text, validation=0), r"^validation: must be in \(0, 1\)"),
        (lambda: load_text(text, validation=1.5), r"^validation: must be in \(0, 1\)"),
        (lambda: load_text(text, validation=True), "^validation: must be a number"),
        (lambda: load_text(text, validation="0.1"), "^validation: must be a number"),
        (lambda: load_text(text, max_bytes=1), "^max_bytes: must be an integer >= 2"),
        (lambda: load_text(root=str(text)), "^root: not a folder"),
        (lambda: load_text(root=str(tmp_path / "none")), "^root: not a folder"),
        (lambda: batches(jax.random.key(0), np.arange(10), batch=2, context=10),
         "^context: 10 needs a text of at least 11 bytes"),
        (lambda: batches(jax.random.key(0), np.arange(10), batch=0, context=3),
         "^batch: must be a positive integer"),
        (lambda: batches(jax.random.key(0), np.arange(10), batch=2, context=2.5),
         "^context: must be a positive integer"),
    ]  # fmt: skip
    for call, match in cases:
        with pytest.raises(ValueError, match=match) as err:
            call()
        assert "\n" not in str(err.value), str(err.value)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="^root: the library at .* gave 0 training"):
        load_text(root=str(empty))
