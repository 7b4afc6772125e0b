"""Real text, offline, for character-level language modelling: two built-in texts that
install with Python itself, or a user's text file.

Nothing here downloads anything. Both built-in texts are read from the standard library
of the interpreter that runs it (`sysconfig.get_paths()["stdlib"]`), so they are on
every machine the package installs on:

- `"stdlib"` (the default): the Python **source** of the standard library's `.py`
  files (`stdlib_files`: without `site-packages`, `dist-packages` and `pydoc_data`,
  the help topics, which are the other text).
- `"docs"`: the English **prose** of Python's own documentation shipped with every
  CPython, the help topics of `pydoc_data/topics.py` (what `help("if")` shows): the
  strings of its `topics` dict (read as data with `ast`, never imported), cut into
  their sections at the section headings, each section once (`docs_sections`: the
  topics repeat one another, e.g. `compound` holds `if`, `while`, `for`, ...).

**Which text is taken** (`max_bytes` of it at most): the library's files, or the help
topics' sections, in the order of the SHA-256 of `"sample/" + name` (a file's path
relative to the library with `/` separators, or a section's name), until `max_bytes`
is reached, the last one cut. The text taken is thus a sample of the whole library,
deterministic for a given library and independent of the alphabet; a file's place in
the order depends on its path alone. The studies' 2 MB of a CPython 3.11 library: 116
of its 1790 files (104 training, 12 validation) from 22 of its 34 top-level packages
(and top-level modules), `test` about half of them as it is half of the library; the
alphabetical order took the 158 files `__future__.py` to `datetime.py` instead.

**The split**, by file (or section), so no file lends text to both sides: a file goes
to validation when the SHA-256 of its name (unsalted) falls in the lowest `validation`
fraction of hash values, which depends on that name alone (the same split whatever else
the library holds, and independent of the order of taking: another hash). A user's
UTF-8 file (`load_text(path)`): its last `validation` fraction, cut at a line break
where there is one, is the validation text.

**No validation window seen verbatim in training.** Files repeat text (license
headers, boilerplate, copied blocks, the topics' shared paragraphs), so a held-out
window can be text the model has trained on. Of the 64-byte validation windows, 2.9%
were in the former alphabetical 2 MB of the library (license headers, boilerplate),
14.7% are in its hash-ordered 2 MB as read (the code pages `encodings/cp865.py` and
`cp869.py` share most of their tables with the training ones), 85% in the help topics
split by topic, 0.56% once their repeated sections are kept once (CPython 3.11). Every
loader measures it
(`verbatim_windows`: each validation window at stride 1 looked up among all training
windows by a 64-bit rolling hash, every hit confirmed byte for byte) and removes it:
every validation **line** that a window found in training touches is dropped from the
validation text (training is kept whole), again until no `window`-byte validation
window occurs in training (`dedup=False` keeps the validation text as read). The
corpus records the fraction before (`overlap_read`) and after (`overlap`, 0), the
window, and the bytes and lines dropped: 46 kB of the library's 219 kB of validation
text at 2 MB (998 lines), 0.9 kB of the topics' 58 kB (22 lines). The guarantee is
for windows of `window` bytes or longer (a longer window holds one of `window` bytes);
shorter strings, such as `self.assertEqual(`, are of course shared.

**Conventions** (every loader returns a `TextCorpus`): the text is modelled as UTF-8
bytes, so the vocabulary is the 256 byte values whatever the language (`vocab_size`),
and `train`, `validation` are `uint8` arrays of byte ids. `batches(key, ...)` draws
windows of `context + 1` bytes at uniform positions from an explicit `jax.random`
key: inputs `x` and next-byte targets `y = x` shifted by one.

Every refusal is a one-line `ValueError` naming the argument; so is text whose index
would not fit in the memory available (`TEXT_BYTES_PER_BYTE`, against
`meanfield.runtime.memory.available_memory`: `MEANFIELD_MEMORY_LIMIT` where set), and
batches beyond it. A `max_bytes` beyond the text is no refusal: what there is is read.
"""

import ast
import dataclasses
import hashlib
import os
import sysconfig

import jax
import jax.numpy as jnp
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

VOCAB_SIZE = 256  # byte values
STDLIB = "stdlib"  # the standard library's Python source
DOCS = "docs"  # the help topics of Python's documentation: English prose
TEXTS = (STDLIB, DOCS)
TOPICS = "pydoc_data/topics.py"  # the help topics, relative to the library
# the text taken by default (module docstring): about 30 MB of source in a CPython 3.11
# library, of which this keeps 8 MB; its help topics hold 0.37 MB once deduplicated
DEFAULT_MAX_BYTES = 2**23
WINDOW = 64  # bytes: no validation window this long occurs verbatim in training
_SKIPPED = ("site-packages", "dist-packages")  # anywhere in the library
_HEADING = "*=-~^"  # the underlines of the help topics' section headings
# the memory the text takes once read, per byte: the byte, its window hash, the hashes
# sorted and their order (uint64 each), and the hashing's chunked temporaries
TEXT_BYTES_PER_BYTE = 40
# `batches`: the most ids one draw may take (XLA indexes arrays with 32-bit integers in
# places: `meanfield.harness.args.MAX_ELEMENTS`), and the memory per id drawn (its index,
# the gathered id and the two int32 slices x and y)
MAX_ELEMENTS = 2**31 - 1
BATCH_BYTES = 16
_BASE = np.uint64(0x100000001B3)  # the rolling hash's multiplier (odd: FNV-1's prime)
_INVERSE = np.uint64(pow(int(_BASE), -1, 2**64))  # its inverse mod 2**64


@dataclasses.dataclass(frozen=True)
class TextCorpus:
    """Training and validation text as byte ids (`uint8`), and where it came from:
    `source` ("stdlib", "docs" or the user's file's path), `files_train`,
    `files_validation` (the standard library's files, relative paths; the help topics'
    sections, `"topic: title"`; a user's file: its path in both).

    The validation text's verbatim overlap with the training text (module docstring):
    `window` (bytes), `overlap_read` (the fraction of its `window`-byte windows, at
    stride 1, that occur in the training text, as read), `overlap` (the same of the
    validation text kept: 0 unless `dedup=False`), and the validation bytes and lines
    dropped to reach it (`dropped_bytes`, `dropped_lines`)."""

    train: np.ndarray
    validation: np.ndarray
    source: str
    files_train: tuple[str, ...]
    files_validation: tuple[str, ...]
    vocab_size: int = VOCAB_SIZE
    window: int = WINDOW
    overlap_read: float = 0.0
    overlap: float = 0.0
    dropped_bytes: int = 0
    dropped_lines: int = 0

    def decode(self, ids) -> str:
        """The text of byte ids (bytes that do not form UTF-8 shown as U+FFFD)."""
        return bytes(np.asarray(ids, dtype=np.uint8)).decode("utf-8", errors="replace")


def _hash64(name: str, salt: str = "") -> int:
    digest = hashlib.sha256((salt + name).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def _in_validation(name: str, fraction: float) -> bool:
    """The side of a file (its relative path, `/` separators) or a section (its name)."""
    return _hash64(name) < fraction * 2**64


def sample_key(name: str) -> int:
    """A file's or section's place in the order of taking (module docstring): the first
    8 bytes of the SHA-256 of `"sample/" + name`, big-endian."""
    return _hash64(name, "sample/")


def _check_fraction(validation) -> float:
    if isinstance(validation, bool) or not isinstance(validation, int | float):
        raise ValueError(f"validation: must be a number in (0, 1), got {validation!r}")
    if not 0 < validation < 1:
        raise ValueError(f"validation: must be in (0, 1), got {validation!r}")
    return float(validation)


def _check_window(window) -> int:
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window: must be a positive integer, got {window!r}")
    return window


def stdlib_files(root: str | None = None) -> list[str]:
    """The `.py` files of the standard library at `root` (default: this interpreter's),
    relative paths with `/` separators in sorted order, without `site-packages`,
    `dist-packages` and the top-level `pydoc_data` (the help topics: the "docs" text)."""
    root = root or sysconfig.get_paths()["stdlib"]
    out = []
    for folder, dirs, files in os.walk(root):
        top = os.path.normpath(folder) == os.path.normpath(root)
        dirs[:] = sorted(
            d for d in dirs if d not in _SKIPPED and not (top and d == TOPICS.split("/")[0])
        )
        for name in files:
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(folder, name), root)
                out.append(rel.replace(os.sep, "/"))
    return sorted(out)


def load_text(
    path: str | os.PathLike | None = None,
    *,
    text: str | None = None,
    validation: float = 0.1,
    max_bytes: int = DEFAULT_MAX_BYTES,
    root: str | None = None,
    window: int = WINDOW,
    dedup: bool = True,
) -> TextCorpus:
    """A built-in text, `text` (`"stdlib"`, the default, or `"docs"`; `root`: another
    library folder), or a user's UTF-8 text file `path`, split into training and
    validation text, the validation text rid of every `window`-byte window found in the
    training text unless `dedup` is False (module docstring).

    `max_bytes`: at most this much text is read in all (the library's files or the
    topics' sections in their hash order until it is reached; a user's file: its first
    `max_bytes` bytes)."""
    validation = _check_fraction(validation)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 2:
        raise ValueError(f"max_bytes: must be an integer >= 2, got {max_bytes!r}")
    window = _check_window(window)
    if not isinstance(dedup, bool):
        raise ValueError(f"dedup: must be True or False, got {dedup!r}")
    if text is not None and text not in TEXTS:
        raise ValueError(f"text: must be one of {', '.join(TEXTS)}, got {text!r}")
    if path is not None and not isinstance(path, str | os.PathLike):
        raise ValueError(f"path: a file's path (str or os.PathLike), got {path!r}")
    if path is not None:
        if text is not None:
            raise ValueError(
                f"text: {text!r} is a built-in text, and path {os.fspath(path)!r} a file: "
                "give one of them"
            )
        return _load_file(os.fspath(path), validation, max_bytes, window, dedup)
    where = root or sysconfig.get_paths()["stdlib"]
    if not os.path.isdir(where):
        raise ValueError(f"root: not a folder: {where}")
    if text == DOCS:
        parts = docs_sections(where)
        source = DOCS
    else:
        parts = [(rel, os.path.join(where, rel)) for rel in stdlib_files(where)]
        source = STDLIB
    sides: tuple[list[bytes], list[bytes]] = ([], [])
    names: tuple[list[str], list[str]] = ([], [])
    total = 0
    for name, content in sorted(parts, key=lambda p: sample_key(p[0])):
        if total >= max_bytes:
            break
        if source == DOCS:
            data = content.encode("utf-8")[: max_bytes - total]  # a section's text
        else:
            try:
                with open(content, "rb") as fh:  # a file's path; never more than it holds
                    size = os.fstat(fh.fileno()).st_size  # (read(n) allocates n)
                    data = fh.read(min(max_bytes - total, size + 1))
                data.decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue  # an unreadable or non-UTF-8 file is left out
        total += len(data)
        side = _in_validation(name, validation)
        sides[side].append(data)
        names[side].append(name)
    _check_text_memory(total, max_bytes, f"the {source} text of the library at {where}")
    train, valid = b"".join(sides[0]), b"".join(sides[1])
    if len(train) < 2 or len(valid) < 2:
        raise ValueError(
            f"root: the library at {where} gave {len(train)} training and {len(valid)} "
            f"validation bytes of its {source} text; need some of both (a larger max_bytes "
            "or validation fraction)"
        )
    corpus = _corpus(train, valid, source, names, window, dedup)
    if corpus.validation.size < 2:
        raise ValueError(
            f"root: every line of the validation text of the library at {where} holds a "
            f"{window}-byte window of its training text (window, dedup=False)"
        )
    return corpus


def docs_sections(root: str | None = None) -> list[tuple[str, str]]:
    """The help topics of Python's documentation in the library at `root` (default:
    this interpreter's), `pydoc_data/topics.py`, as `(name, text)` sections in the
    order of their topics' names: each topic cut before every section heading (a line
    underlined by a line of one of `*=-~^` as long as it), a section named
    `"topic: title"` and kept only the first time its title and text occur (the topics
    repeat one another's sections). The file is read as data: its `topics = {...}`
    dict's strings, through `ast`; nothing of it is run."""
    where = root or sysconfig.get_paths()["stdlib"]
    path = os.path.join(where, *TOPICS.split("/"))
    refusal = (
        f"text: {DOCS!r} reads the help topics of Python's documentation, {path}, "
        "which {}; use text='stdlib'"
    )
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read())
    except OSError:
        raise ValueError(refusal.format("this Python does not have")) from None
    except (SyntaxError, ValueError):
        raise ValueError(refusal.format("is not Python this interpreter reads")) from None
    topics = None
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "topics" for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            try:
                topics = ast.literal_eval(node.value)
            except ValueError:
                topics = None
    if not isinstance(topics, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in topics.items()
    ):
        raise ValueError(refusal.format("holds no `topics` dict of strings"))
    out, seen = [], set()
    for topic in sorted(topics):
        for title, section in _sections(topics[topic]):
            key = title + "\n" + section.split("\n", 2)[-1].strip()  # not the underline
            if key in seen:
                continue
            seen.add(key)
            out.append((f"{topic}: {title}", section))
    return out


def _sections(text: str) -> list[tuple[str, str]]:
    """A topic's text cut before each heading: (title, its text), every text ending in a
    line break."""
    lines = text.rstrip("\n").split("\n")
    starts = [
        i
        for i in range(len(lines) - 1)
        if lines[i].strip()
        and len(lines[i + 1]) == len(lines[i]) >= 3
        and len(set(lines[i + 1])) == 1
        and lines[i + 1][0] in _HEADING
    ]
    if not starts or starts[0] != 0:
        starts = [0, *starts]
    bounds = [*starts, len(lines)]
    return [
        (lines[a].strip(), "\n".join(lines[a:b]).rstrip("\n") + "\n\n")
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]


_CHUNK = 2**20  # windows hashed at a time


def _window_hashes(ids: np.ndarray, window: int) -> np.ndarray:
    """The polynomial hash `sum_k ids[i + k] B**k` (mod 2**64) of every `window`-byte
    window of `ids` (stride 1), from prefix sums, `_CHUNK` windows at a time."""
    n = ids.size - window + 1
    h = np.zeros(max(n, 0), dtype=np.uint64)
    if n <= 0:
        return h
    span = min(n, _CHUNK) + window
    powers = np.ones(span, dtype=np.uint64)
    np.cumprod(np.full(span - 1, _BASE, dtype=np.uint64), out=powers[1:])  # wraps
    inverse = np.ones(span, dtype=np.uint64)
    np.cumprod(np.full(span - 1, _INVERSE, dtype=np.uint64), out=inverse[1:])
    for a in range(0, n, _CHUNK):
        m = min(_CHUNK, n - a)
        x = ids[a : a + m + window - 1].astype(np.uint64)
        sums = np.zeros(x.size + 1, dtype=np.uint64)
        np.cumsum(x * powers[: x.size], out=sums[1:])
        h[a : a + m] = (sums[window : window + m] - sums[:m]) * inverse[:m]
    return h


class _TrainingWindows:
    """The training text's `window`-byte windows, sorted by their hashes, to look up."""

    def __init__(self, train: np.ndarray, window: int):
        self.train, self.window = train, window
        hashes = _window_hashes(train, window)
        self.order = np.argsort(hashes)
        self.hashes = hashes[self.order]

    def find(self, validation: np.ndarray) -> np.ndarray:
        """Per validation window (stride 1): does it occur in the training text."""
        window, th, order = self.window, self.hashes, self.order
        n = validation.size - window + 1
        found = np.zeros(max(n, 0), dtype=bool)
        if n <= 0 or th.size == 0:
            return found
        vh = _window_hashes(validation, window)
        pos = np.empty(n, dtype=np.intp)
        needles = np.argsort(vh)  # sorted needles: a far faster search
        pos[needles] = np.minimum(np.searchsorted(th, vh[needles]), th.size - 1)
        hits = np.flatnonzero(th[pos] == vh)
        tw, vw = sliding_window_view(self.train, window), sliding_window_view(validation, window)
        for chunk in np.array_split(hits, max(1, hits.size // 2**16)):
            same = np.all(vw[chunk] == tw[order[pos[chunk]]], axis=1)
            found[chunk[same]] = True
            for i in chunk[~same]:  # a collision: the other windows of that hash
                right = np.searchsorted(th, vh[i], side="right")
                found[i] = any(np.array_equal(vw[i], tw[order[j]]) for j in range(pos[i], right))
        return found


def _bytes(ids) -> np.ndarray:
    return np.ascontiguousarray(ids, dtype=np.uint8).ravel()


def verbatim_windows(train, validation, window: int = WINDOW) -> np.ndarray:
    """Per start position `i` of the validation text (stride 1), whether its window
    `validation[i:i + window]` occurs verbatim anywhere in the training text: a bool
    array of `max(len(validation) - window + 1, 0)` entries. Exact: the training
    windows' rolling hashes (mod 2**64) are sorted and each validation window's hash
    looked up, and every hit is confirmed by comparing the bytes (no window missed, no
    hash collision counted). Memory ~ 16 bytes per training byte; ~1 s for 8 MB."""
    window = _check_window(window)
    return _TrainingWindows(_bytes(train), window).find(_bytes(validation))


def verbatim_overlap(corpus: TextCorpus, window: int = WINDOW) -> float:
    """The fraction of the corpus's validation windows of `window` bytes (every start,
    stride 1) that occur verbatim in its training text (`verbatim_windows`); 0 where
    the validation text is shorter than `window`."""
    found = verbatim_windows(corpus.train, corpus.validation, window)
    return float(found.mean()) if found.size else 0.0


def _drop_verbatim(train: _TrainingWindows, valid: np.ndarray, window: int):
    """The validation text without every line touched by a `window`-byte window found in
    the training text, repeated until none is (joining lines can make a new one): the
    text kept, and the bytes and lines dropped."""
    dropped_bytes = dropped_lines = 0
    while True:
        found = train.find(valid)
        if not found.any():
            return valid, dropped_bytes, dropped_lines
        starts = np.flatnonzero(found)
        edges = np.bincount(starts, minlength=valid.size + 1)
        edges -= np.bincount(starts + window, minlength=valid.size + 1)
        covered = np.cumsum(edges)[:-1] > 0
        line = np.concatenate([[0], np.cumsum(valid[:-1] == ord("\n"))])  # a '\n' ends its line
        touched = np.zeros(int(line[-1]) + 1, dtype=bool)
        touched[line[covered]] = True
        keep = ~touched[line]
        dropped_bytes += int(valid.size - keep.sum())
        dropped_lines += int(touched.sum())
        valid = valid[keep]


def _corpus(train: bytes, valid: bytes, source: str, names, window: int, dedup: bool):
    t = np.frombuffer(train, dtype=np.uint8).copy()
    v = np.frombuffer(valid, dtype=np.uint8).copy()
    index = _TrainingWindows(t, window)
    found = index.find(v)
    read = float(found.mean()) if found.size else 0.0
    dropped = (0, 0)
    if dedup and found.any():
        v, *dropped = _drop_verbatim(index, v, window)
    kept = index.find(v)
    return TextCorpus(
        t, v, source, tuple(names[0]), tuple(names[1]), window=window, overlap_read=read,
        overlap=float(kept.mean()) if kept.size else 0.0, dropped_bytes=dropped[0],
        dropped_lines=dropped[1],
    )  # fmt: skip


def _check_text_memory(nbytes: int, max_bytes: int, what: str) -> None:
    """Refuse (one line naming max_bytes) text whose windows' index would not fit in the
    memory available (`TEXT_BYTES_PER_BYTE`; `MEANFIELD_MEMORY_LIMIT`)."""
    from ..runtime.memory import available_memory

    need, limit = nbytes * TEXT_BYTES_PER_BYTE, available_memory()
    if need > limit:
        raise ValueError(
            f"max_bytes: {nbytes} bytes of {what} (max_bytes={max_bytes}) need about "
            f"{need / 1e9:.3g} GB of memory to index their windows, more than the "
            f"{limit / 1e9:.3g} GB available (a smaller max_bytes; MEANFIELD_MEMORY_LIMIT "
            "sets another limit)"
        )


def _load_file(path: str, validation: float, max_bytes: int, window: int, dedup: bool):
    if not os.path.isfile(path):
        raise ValueError(f"path: no such file: {path}")
    _check_text_memory(min(max_bytes, os.path.getsize(path)), max_bytes, path)
    with open(path, "rb") as fh:  # never more than the file holds (read(n) allocates n)
        data = fh.read(min(max_bytes, os.path.getsize(path) + 1))
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
    if cut < 2 or len(data) - cut < 2:
        raise ValueError(
            f"path: {path} holds {len(data)} bytes: too short for training and validation text"
        )
    corpus = _corpus(data[:cut], data[cut:], path, ([path], [path]), window, dedup)
    if corpus.validation.size < 2:
        raise ValueError(
            f"path: every line of the validation text of {path} (its last "
            f"{len(data) - cut} bytes) holds a {window}-byte window of its training text: "
            "nothing is left to validate on (a file of less repeated text, or dedup=False)"
        )
    return corpus


def batches(key, ids, *, batch: int, context: int):
    """`batch` windows of `context + 1` consecutive byte ids from `ids` (a corpus's
    `train` or `validation`; convert it once with `jnp.asarray` where this is called in a
    loop), at positions drawn uniformly from `key`: inputs `x` and targets `y` (the next
    byte of each input), `int32` arrays of shape (batch, context). Jittable with `batch`
    and `context` static. Refused in one line: `batch`, `context` that are not positive
    integers, whose windows exceed `MAX_ELEMENTS` or the memory available
    (`BATCH_BYTES` per id; `MEANFIELD_MEMORY_LIMIT`), a `context` of at least the
    text's length, and `ids` of a non-integer dtype."""
    for name, value in (("batch", batch), ("context", context)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: must be a positive integer, got {value!r}")
    elements = batch * (context + 1)
    if elements > MAX_ELEMENTS:
        raise ValueError(
            f"batch, context: {batch} windows of {context + 1} ids are {elements:.3g} "
            f"elements, more than the {MAX_ELEMENTS} one array may hold (XLA's 32-bit indices)"
        )
    from ..runtime.memory import available_memory

    limit = available_memory()
    if elements * BATCH_BYTES > limit:
        raise ValueError(
            f"batch, context: {batch} windows of {context + 1} ids need about "
            f"{elements * BATCH_BYTES / 1e9:.3g} GB of memory, more than the {limit / 1e9:.3g} "
            "GB available (MEANFIELD_MEMORY_LIMIT sets another limit)"
        )
    dtype = getattr(ids, "dtype", None)
    if dtype is None:
        dtype = np.asarray(ids).dtype
    if not jnp.issubdtype(dtype, jnp.integer):
        raise ValueError(
            f"ids: must be integer byte ids (a corpus's train or validation), got dtype {dtype}"
        )
    ids = jnp.asarray(ids)
    if ids.ndim != 1 or ids.shape[0] < context + 1:
        raise ValueError(
            f"context: {context} needs a text of at least {context + 1} bytes, got "
            f"{ids.shape[0] if ids.ndim == 1 else ids.shape}"
        )
    starts = jax.random.randint(key, (batch,), 0, ids.shape[0] - context)
    window = ids[starts[:, None] + jnp.arange(context + 1)[None, :]].astype(jnp.int32)
    return window[:, :-1], window[:, 1:]
