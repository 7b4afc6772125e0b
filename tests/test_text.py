"""Text for character-level language modelling, offline (`meanfield.io.text`): the running
interpreter's standard library sampled in hash order and split by file, the help topics
of its documentation, a user's text file, the validation text rid of windows seen in
training, the batches, the loader's refusals, and the studies' `--text`. Each check reads
the files again here, independently of the loader."""

import hashlib
import json
import os
import re
import sysconfig

import jax
import numpy as np
import pytest

from meanfield.io import text as text_module
from meanfield.io.text import (
    VOCAB_SIZE,
    WINDOW,
    TextCorpus,
    batches,
    docs_sections,
    load_text,
    stdlib_files,
    verbatim_overlap,
    verbatim_windows,
)
from meanfield.studies.shared.transformer_options import TEXT_BYTES


def _key(name: str, salt: str = "") -> int:
    return int.from_bytes(hashlib.sha256((salt + name).encode("utf-8")).digest()[:8], "big")


def _validation_by_hash(rel: str, fraction: float) -> bool:
    return _key(rel) / 2**64 < fraction


def _read_sample(root: str, cap: int, fraction: float):
    """The library read again here: its `.py` files in the order of SHA-256("sample/" +
    path), UTF-8 ones, up to `cap` bytes, the last one cut; each side's bytes and files."""
    expected = {False: [b"", []], True: [b"", []]}
    total = 0
    for rel in sorted(stdlib_files(root), key=lambda r: _key(r, "sample/")):
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
    return expected


def test_the_standard_library_split_by_file():
    """The interpreter's own library read again here (`_read_sample`): every file on one
    side only, the side decided by its path's hash, and each side the concatenation of
    its files' bytes, as read (`dedup=False`); deduplicated, the same training text and
    the validation text less some of its lines."""
    root, cap, fraction = sysconfig.get_paths()["stdlib"], 2**19, 0.25
    corpus = load_text(validation=fraction, max_bytes=cap, dedup=False)
    assert corpus.source == "stdlib" and corpus.vocab_size == VOCAB_SIZE == 256
    expected = _read_sample(root, cap, fraction)
    assert corpus.train.dtype == corpus.validation.dtype == np.uint8
    assert bytes(corpus.train) == expected[False][0] and corpus.train.size > 0
    assert bytes(corpus.validation) == expected[True][0] and corpus.validation.size > 0
    assert list(corpus.files_train) == expected[False][1]
    assert list(corpus.files_validation) == expected[True][1]
    assert corpus.train.size + corpus.validation.size == cap
    assert corpus.dropped_bytes == 0 and corpus.overlap == corpus.overlap_read
    files = stdlib_files(root)
    assert not any("site-packages" in f or f.startswith("pydoc_data/") for f in files)
    n = len(corpus.files_train) + len(corpus.files_validation)
    assert 0.1 < len(corpus.files_validation) / n < 0.4, (len(corpus.files_validation), n)
    kept = load_text(validation=fraction, max_bytes=cap)
    assert bytes(kept.train) == bytes(corpus.train)
    assert kept.files_validation == corpus.files_validation
    lines = iter(bytes(corpus.validation).splitlines(keepends=True))
    assert all(line in lines for line in bytes(kept.validation).splitlines(keepends=True))
    assert corpus.validation.size - kept.validation.size == kept.dropped_bytes


def test_the_sample_spans_the_library():
    """At the studies' 2 MB the files taken are the first of the whole library's hash
    order (every file before the last taken is taken, unless not UTF-8), from many of
    its packages and from all of the alphabet, not its first 2 MB."""
    root = sysconfig.get_paths()["stdlib"]
    corpus = load_text(max_bytes=TEXT_BYTES)
    taken = [*corpus.files_train, *corpus.files_validation]
    keys = {f: _key(f, "sample/") for f in stdlib_files(root)}
    last = max(keys[f] for f in taken)
    before = [f for f, k in keys.items() if k <= last]
    assert set(taken) <= set(before) and len(before) - len(taken) <= 0.05 * len(before)
    for f in set(before) - set(taken):  # left out: not UTF-8
        with pytest.raises(UnicodeDecodeError):
            open(os.path.join(root, f), "rb").read().decode("utf-8")
    packages = {f.split("/")[0] for f in taken if "/" in f}
    assert len(packages) >= 12, packages
    assert {"test", "encodings"} <= packages, packages
    assert any(f.split("/")[0] >= "t" for f in taken)  # the alphabet's end too
    ordered = sorted(stdlib_files(root))
    assert set(taken) != set(ordered[: len(taken)])
    again = load_text(max_bytes=TEXT_BYTES)
    assert again.files_train == corpus.files_train and bytes(again.train) == bytes(corpus.train)


def _brute_force(train: bytes, validation: bytes, window: int) -> np.ndarray:
    seen = {train[i : i + window] for i in range(len(train) - window + 1)}
    n = max(len(validation) - window + 1, 0)
    return np.array([validation[i : i + window] in seen for i in range(n)], dtype=bool)


def test_the_verbatim_overlap_against_brute_force(monkeypatch):
    """Each validation window (stride 1) looked up among all training windows: as a set
    of byte strings does it, for several windows, texts with repeated pieces, windows
    longer than a text; and exact when every hash collides (the bytes decide)."""
    rng = np.random.default_rng(7)
    pieces = [bytes(rng.integers(97, 101, size=rng.integers(1, 30))) for _ in range(12)]
    train = b"".join(pieces[i] for i in rng.integers(0, 12, size=60))
    valid = b"".join(pieces[i] for i in rng.integers(0, 12, size=20)) + b"zzzz" * 5
    cases = [(train, valid, w) for w in (1, 3, 8, 20, 64)]
    cases += [(train, b"ab", 3), (b"ab", valid, 3), (b"", valid, 1), (train, b"", 1)]
    for t, v, w in cases:
        expected = _brute_force(t, v, w)
        got = verbatim_windows(np.frombuffer(t, np.uint8), np.frombuffer(v, np.uint8), w)
        np.testing.assert_array_equal(got, expected, err_msg=f"window {w}")
        corpus = TextCorpus(np.frombuffer(t, np.uint8), np.frombuffer(v, np.uint8), "x", (), ())
        share = expected.mean() if expected.size else 0.0
        assert verbatim_overlap(corpus, window=w) == pytest.approx(share)
    assert 0 < _brute_force(train, valid, 8).mean() < 1  # both kinds of window present
    monkeypatch.setattr(
        text_module, "_window_hashes",
        lambda ids, window: np.zeros(max(ids.size - window + 1, 0), dtype=np.uint64),
    )  # fmt: skip
    for w in (3, 8):
        got = verbatim_windows(np.frombuffer(train, np.uint8), np.frombuffer(valid, np.uint8), w)
        np.testing.assert_array_equal(got, _brute_force(train, valid, w))


@pytest.mark.parametrize("kind", ["stdlib", "docs"])
def test_no_validation_window_is_seen_in_training(kind):
    """The studies' texts: text was shared as read (boilerplate, code-page tables, the
    topics' common paragraphs), and none of the 64-byte validation windows kept occurs
    in the training text (looked up again here), the lines dropped whole."""
    read = load_text(text=kind, max_bytes=TEXT_BYTES, dedup=False)
    kept = load_text(text=kind, max_bytes=TEXT_BYTES)
    assert kept.window == WINDOW == 64 and kept.overlap == 0.0
    assert read.overlap_read == kept.overlap_read > 0 and kept.dropped_bytes > 0
    assert read.overlap_read == pytest.approx(verbatim_overlap(read))
    assert verbatim_overlap(kept) == 0.0
    assert kept.validation.size > 0.5 * read.validation.size
    if kind == "docs":  # small enough for the brute force
        assert not _brute_force(bytes(kept.train), bytes(kept.validation), 64).any()
    assert bytes(kept.train) == bytes(read.train)


def test_the_docs_text_is_prose_from_the_help_topics():
    """The help topics (`pydoc_data.topics`, in every CPython) are found; the text is
    their strings, each section once, not the module's Python syntax; and it reads as
    English prose, unlike the library's source."""
    import pydoc_data.topics

    sections = docs_sections()
    topics = pydoc_data.topics.topics
    assert len(sections) > 50 and len({name for name, _ in sections}) == len(sections)
    assert all(name.split(": ")[0] in topics for name, _ in sections)
    docs = load_text(text="docs", max_bytes=TEXT_BYTES)
    assert docs.source == "docs" and docs.train.size > 2e5 and docs.validation.size > 1e4
    everything = "\n".join(topics.values())
    whole = docs.decode(docs.train) + docs.decode(docs.validation)
    assert "topics = {" not in whole and "Autogenerated" not in whole
    lines = whole.splitlines()  # the file's lines end in a quote, the strings' do not
    assert sum(ln.rstrip().endswith(("'", "\\n'")) for ln in lines) < 0.01 * len(lines)
    for name in docs.files_validation[:5]:
        section = dict(sections)[name]
        assert section.strip().split("\n")[0] in everything
    source = load_text(max_bytes=TEXT_BYTES)
    code = source.decode(source.train)

    def the_per_kb(s):
        return 1000 * s.lower().count(" the ") / len(s)

    def words(s):  # the share of its tokens that are lower-case words
        tokens = s.split()
        return sum(t.isalpha() and t.islower() for t in tokens) / len(tokens)

    def symbols(s):  # the share of its characters that are Python's punctuation
        return sum(c in "()[]=_:" for c in s) / len(s)

    assert the_per_kb(whole) > 5 > 3 * the_per_kb(code), (the_per_kb(whole), the_per_kb(code))
    assert words(whole) > 0.6 > 0.45 > words(code), (words(whole), words(code))
    assert symbols(whole) < 0.6 * symbols(code), (symbols(whole), symbols(code))
    statement = re.compile(r"^(def \w+\(.*\):|class \w+.*:|import [\w.]+)$")
    assert not any(statement.match(ln) for ln in whole.splitlines())
    assert any(statement.match(ln) for ln in code.splitlines())
    assert sum(c.isalpha() or c == " " for c in whole) / len(whole) > 0.8


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
    no_dict, broken = tmp_path / "no_dict", tmp_path / "broken"
    for folder, source in ((no_dict, "topics = ['a']\n"), (broken, "topics = {'a': \n")):
        (folder / "pydoc_data").mkdir(parents=True)
        (folder / "pydoc_data" / "topics.py").write_text(source)
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
        (lambda: load_text(text="novel"), "^text: must be one of stdlib, docs, got 'novel'"),
        (lambda: load_text(text, text="docs"), "^text: 'docs' is a built-in text, and path"),
        (lambda: load_text(text="docs", root=str(tmp_path)),
         "^text: 'docs' reads the help topics .* which this Python does not have"),
        (lambda: load_text(text="docs", root=str(no_dict)), "^text: .* holds no `topics` dict"),
        (lambda: load_text(text="docs", root=str(broken)), "^text: .* is not Python"),
        (lambda: load_text(text, window=0), "^window: must be a positive integer"),
        (lambda: load_text(text, dedup="yes"), "^dedup: must be True or False"),
        (lambda: load_text(text, window=4), "^path: every line of the validation text"),
        (lambda: verbatim_windows(b"abc", b"abc", window=1.5), "^window: must be a positive"),
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


class _Stop(Exception):
    pass


def test_the_studies_text_option(tmp_path, monkeypatch):
    """`--text stdlib|docs` (default stdlib) in the studies' configuration and `data`
    record, refused with `--data` and for a ResNet; a `--resume` on another text is
    refused like other data, on the same one it goes on."""
    from meanfield.studies import StudyInputError, run_study
    from meanfield.studies.coord_check import study as coord_check
    from meanfield.studies.shared.transformer_options import corpus, data_record
    from meanfield.studies.transfer import study as transfer

    cfg = {"data": None, "text": "docs"}
    record = data_record(cfg, corpus(cfg))
    assert cfg["text"] == record["text"] == "docs" and "help topics" in record["source"]
    assert record["verbatim_window"] == 64 and record["verbatim_overlap"] == 0.0
    assert record["verbatim_overlap_read"] > 0 and record["validation_bytes_dropped"] > 0
    assert record["train_parts"] > 100 and record["validation_bytes"] > 1e4
    cfg = {"data": None}
    record = data_record(cfg, corpus(cfg))
    assert cfg["text"] == record["text"] == "stdlib" and "standard library" in record["source"]
    assert 1.5e6 < record["train_bytes"] + record["validation_bytes"] <= TEXT_BYTES
    path = tmp_path / "book.txt"
    path.write_text("".join(f"line {i}: {i * i}\n" for i in range(300)))
    cfg = {"data": str(path)}
    record = data_record(cfg, corpus(cfg))
    assert cfg["text"] is None and record["source"] == str(path)
    with pytest.raises(StudyInputError, match="^--text: docs is a built-in text and --data"):
        corpus({"data": str(path), "text": "docs"})

    for module in (coord_check, transfer):  # each stopped once its folder is made
        real = module.start_study

        def stop(args, cfg, real=real):
            real(args, cfg)
            raise _Stop

        monkeypatch.setattr(module, "start_study", stop)
    tiny = dict(widths=[8, 16, 32], depth=1, depths=[1, 2, 4], width=8, steps=2, seeds=2,
                batch=2, context=4, heads=1, base_width=8, base_depth=1, no_progress=True,
                parametrisations="mup", text="docs")  # fmt: skip
    out = tmp_path / "cc"
    with pytest.raises(_Stop):
        run_study("coord-check", out=str(out), **tiny)
    config = json.loads((out / "config.json").read_text())["config"]
    assert config["text"] == "docs" and len(config["data_sha256"]) == 64
    with pytest.raises(_Stop):  # the same text: the configuration matches
        run_study("coord-check", out=str(out), resume=True, **tiny)
    with pytest.raises(StudyInputError, match="^--data: the data's content changed"):
        run_study("coord-check", out=str(out), resume=True, **{**tiny, "text": "stdlib"})
    del tiny["text"]
    with pytest.raises(_Stop):
        run_study("coord-check", out=str(tmp_path / "default"), **tiny)
    config = json.loads((tmp_path / "default" / "config.json").read_text())["config"]
    assert config["text"] == "stdlib"
    with pytest.raises(_Stop):
        run_study(
            "transfer",
            out=str(tmp_path / "tr"),
            lrs=[0.001, 0.01, 0.1],
            **{k: v for k, v in tiny.items() if k != "parametrisations"},
            text="docs",
        )
    config = json.loads((tmp_path / "tr" / "config.json").read_text())["config"]
    assert config["text"] == "docs"
    for options, match in (
        (dict(model="resnet", text="docs"), "^--text: a Transformer's option"),
        (dict(text="novel"), "--text"),
    ):
        with pytest.raises(StudyInputError, match=match) as err:
            run_study("coord-check", out=str(tmp_path / "refused"), **options)
        assert "\n" not in str(err.value)
    assert not (tmp_path / "refused").exists()


def test_a_path_of_another_type_or_a_huge_max_bytes_is_not_a_crash(tmp_path):
    """Issue 75: `load_text(123)` was a TypeError and `max_bytes=10**15` a MemoryError
    (the read allocated its size)."""
    f = tmp_path / "t.txt"
    f.write_text("".join(f"{hashlib.sha256(str(i).encode()).hexdigest()}\n" for i in range(50)))
    with pytest.raises(ValueError, match="^path: a file's path"):
        load_text(123)
    corpus = load_text(f, max_bytes=10**15)
    assert corpus.train.size + corpus.validation.size == f.stat().st_size  # all of it read
