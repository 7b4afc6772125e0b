"""Real text, offline, for character-level language modelling: the running interpreter's
own standard library, or a user's text file.

Nothing here downloads anything. `load_text()` reads the Python source files of the
standard library of the interpreter that runs it (`sysconfig.get_paths()["stdlib"]`,
without `site-packages`): real text present on every machine with Python. Its files
are split **by file** into training and validation text, so no file lends text to both:
a file goes to validation when the SHA-256 of its path relative to the library falls
in the lowest `validation` fraction of hash values, which depends on that path alone
(the same split whatever else the library holds). `load_text(path)` reads a user's
UTF-8 text file instead; its last `validation` fraction (cut at a line break where there
is one) is the validation text.

**Conventions** (every loader returns a `TextCorpus`): the text is modelled as UTF-8
bytes, so the vocabulary is the 256 byte values whatever the language (`vocab_size`),
and `train`, `validation` are `uint8` arrays of byte ids. `batches(key, ...)` draws
windows of `context + 1` bytes at uniform positions from an explicit `jax.random`
key: inputs `x` and next-byte targets `y = x` shifted by one.

Every refusal is a one-line `ValueError` naming the argument.
"""

import dataclasses
import hashlib
import os
import sysconfig

import jax
import jax.numpy as jnp
import numpy as np

VOCAB_SIZE = 256  # byte values
STDLIB = "stdlib"
# the standard library's text taken by default (files in the order of their sorted paths
# until the total passes it; the validation files are kept apart by their hash, not by
# this order): about 30 MB of source in a CPython 3.11 library, of which this keeps 8 MB
DEFAULT_MAX_BYTES = 2**23


@dataclasses.dataclass(frozen=True)
class TextCorpus:
    """Training and validation text as byte ids (`uint8`), and where it came from:
    `source` ("stdlib" or the file's path), `files_train`, `files_validation` (the
    standard library's files, relative paths; a user's file: its path in both)."""

    train: np.ndarray
    validation: np.ndarray
    source: str
    files_train: tuple[str, ...]
    files_validation: tuple[str, ...]
    vocab_size: int = VOCAB_SIZE

    def decode(self, ids) -> str:
        """The text of byte ids (bytes that do not form UTF-8 shown as U+FFFD)."""
        return bytes(np.asarray(ids, dtype=np.uint8)).decode("utf-8", errors="replace")


def _in_validation(relative: str, fraction: float) -> bool:
    digest = hashlib.sha256(relative.replace(os.sep, "/").encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") < fraction * 2**64


def _check_fraction(validation) -> float:
    if isinstance(validation, bool) or not isinstance(validation, int | float):
        raise ValueError(f"validation: must be a number in (0, 1), got {validation!r}")
    if not 0 < validation < 1:
        raise ValueError(f"validation: must be in (0, 1), got {validation!r}")
    return float(validation)


def stdlib_files(root: str | None = None) -> list[str]:
    """The `.py` files of the standard library at `root` (default: this interpreter's),
    relative paths in sorted order, without `site-packages` and `dist-packages`."""
    root = root or sysconfig.get_paths()["stdlib"]
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in ("site-packages", "dist-packages"))
        for name in files:
            if name.endswith(".py"):
                out.append(os.path.relpath(os.path.join(folder, name), root))
    return sorted(out)


def load_text(
    path: str | os.PathLike | None = None,
    *,
    validation: float = 0.1,
    max_bytes: int = DEFAULT_MAX_BYTES,
    root: str | None = None,
) -> TextCorpus:
    """The standard library's source (`path` None; `root`: another library folder) or a
    user's UTF-8 text file, split into training and validation text (module docstring).

    `max_bytes`: at most this much text is read in all (the library's files in sorted
    order until it is reached; a user's file: its first `max_bytes` bytes)."""
    validation = _check_fraction(validation)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 2:
        raise ValueError(f"max_bytes: must be an integer >= 2, got {max_bytes!r}")
    if path is None:
        return _load_stdlib(validation, max_bytes, root)
    return _load_file(os.fspath(path), validation, max_bytes)


def _load_stdlib(validation: float, max_bytes: int, root: str | None) -> TextCorpus:
    where = root or sysconfig.get_paths()["stdlib"]
    if not os.path.isdir(where):
        raise ValueError(f"root: not a folder: {where}")
    files = stdlib_files(where)
    train: list[bytes] = []
    valid: list[bytes] = []
    names: tuple[list[str], list[str]] = ([], [])
    total = 0
    for rel in files:
        if total >= max_bytes:
            break
        try:
            with open(os.path.join(where, rel), "rb") as fh:
                data = fh.read(max_bytes - total)
            data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # an unreadable or non-UTF-8 file is left out
        total += len(data)
        part = _in_validation(rel, validation)
        (valid if part else train).append(data)
        names[part].append(rel)
    corpus = TextCorpus(
        np.frombuffer(b"".join(train), dtype=np.uint8).copy(),
        np.frombuffer(b"".join(valid), dtype=np.uint8).copy(),
        STDLIB,
        tuple(names[0]),
        tuple(names[1]),
    )
    if corpus.train.size < 2 or corpus.validation.size < 2:
        raise ValueError(
            f"root: the library at {where} gave {corpus.train.size} training and "
            f"{corpus.validation.size} validation bytes; need some of both (a larger "
            "max_bytes or validation fraction)"
        )
    return corpus


def _load_file(path: str, validation: float, max_bytes: int) -> TextCorpus:
    if not os.path.isfile(path):
        raise ValueError(f"path: no such file: {path}")
    with open(path, "rb") as fh:
        data = fh.read(max_bytes)
    if b"\x00" in data:
        raise ValueError(f"path: {path} holds NUL bytes: not a text file")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.start < len(data) - 3 or len(data) < max_bytes:  # not a cut character
            raise ValueError(
                f"path: {path} is not UTF-8 text (byte {err.start}); save it as UTF-8"
            ) from None
    cut = int(len(data) * (1 - validation))
    line = data.rfind(b"\n", 0, cut)
    if line > len(data) // 2:
        cut = line + 1  # at a line break
    corpus = TextCorpus(
        np.frombuffer(data[:cut], dtype=np.uint8).copy(),
        np.frombuffer(data[cut:], dtype=np.uint8).copy(),
        path,
        (path,),
        (path,),
    )
    if corpus.train.size < 2 or corpus.validation.size < 2:
        raise ValueError(
            f"path: {path} holds {len(data)} bytes: too short for training and validation text"
        )
    return corpus


def batches(key, ids, *, batch: int, context: int):
    """`batch` windows of `context + 1` consecutive byte ids from `ids` (a corpus's
    `train` or `validation`; convert it once with `jnp.asarray` where this is called in a
    loop), at positions drawn uniformly from `key`: inputs `x` and targets `y` (the next
    byte of each input), `int32` arrays of shape (batch, context). Jittable with `batch`
    and `context` static."""
    for name, value in (("batch", batch), ("context", context)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: must be a positive integer, got {value!r}")
    ids = jnp.asarray(ids)
    if ids.ndim != 1 or ids.shape[0] < context + 1:
        raise ValueError(
            f"context: {context} needs a text of at least {context + 1} bytes, got "
            f"{ids.shape[0] if ids.ndim == 1 else ids.shape}"
        )
    starts = jax.random.randint(key, (batch,), 0, ids.shape[0] - context)
    window = ids[starts[:, None] + jnp.arange(context + 1)[None, :]].astype(jnp.int32)
    return window[:, :-1], window[:, 1:]
