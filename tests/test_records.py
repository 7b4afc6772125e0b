"""The docs' and RESULTS' numbers generated from records of study runs (issue 74, item 5):
`benchmarks/records.py` captures a study folder into `docs/records/NAME.json`, renders the
pages' marked blocks from the records, and checks that no page says more than its record."""

import json
import shutil
from pathlib import Path

import pytest

from benchmarks import records
from meanfield.cli import main as meanfield_main

ROOT = Path(__file__).resolve().parents[1]

TINY = ["--L", "4,8", "--M", "1,4", "--L-for-M", "16", "--fit-M-max", "4", "--seeds", "3",
        "--order", "12", "--steps", "1", "--no-progress", "--compile-workers", "1"]  # fmt: skip


def _marked_pages() -> list[Path]:
    return [p for p in records.pages(ROOT) if records.OPENING.search(p.read_text())]


def _copy_repo(tmp_path: Path) -> Path:
    """The records and every page with a marked block, under a fresh root."""
    root = tmp_path / "repo"
    shutil.copytree(ROOT / records.RECORDS, root / records.RECORDS)
    for page in _marked_pages():
        target = root / page.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(page, target)
    return root


def test_the_pages_agree_with_their_records(capsys):
    assert _marked_pages(), "no page has a record block"
    assert records.main(["check"]) == 0, capsys.readouterr().err


def test_a_number_edited_inside_a_block_fails_the_check(tmp_path, capsys):
    root = _copy_repo(tmp_path)
    page = root / "docs" / "studies" / "mean-ode.md"
    text = page.read_text()
    m = next(m for m in records.MARKER.finditer(text) if m["view"] == "rates")
    body = m["body"]
    # the first exponent's last digit, in the table
    digit = body.index(" [", body.index("| 0 |")) - 1
    edited = body[:digit] + ("1" if body[digit] != "1" else "2") + body[digit + 1 :]
    page.write_text(text[: m.start("body")] + edited + text[m.end("body") :])
    assert records.main(["--root", str(root), "check"]) == 1
    err = capsys.readouterr().err
    label = m["name"] + (f":{m['view']}" if m["view"] else "")
    assert f"docs/studies/mean-ode.md:{text.count(chr(10), 0, m.start()) + 1}:" in err
    assert f"record {label}" in err
    # render puts the record's number back
    assert records.main(["--root", str(root), "render"]) == 0
    assert page.read_text() == text


def test_a_marker_naming_a_missing_record_or_view_fails(tmp_path, capsys):
    root = _copy_repo(tmp_path)
    page = root / "docs" / "index.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    name = next(p.stem for p in (root / records.RECORDS).glob("*.json"))
    page.write_text(
        "# x\n\n<!-- record: no-such-record -->\n<!-- /record -->\n\n"
        f"<!-- record: {name}:no-such-view -->\n<!-- /record -->\n\n<!-- record: {name}\n"
    )
    assert records.main(["--root", str(root), "check"]) == 1
    err = capsys.readouterr().err
    assert "docs/index.md:3: record no-such-record: no docs/records/no-such-record.json" in err
    assert f"docs/index.md:6: record {name}: no view 'no-such-view'" in err
    assert "docs/index.md:9: a record marker without" in err
    # render writes nothing it cannot generate, and still reports it
    assert records.main(["--root", str(root), "render"]) == 1


def test_render_is_idempotent(tmp_path):
    root = _copy_repo(tmp_path)
    page = root / "docs" / "studies" / "mean-ode.md"
    name = next(records.MARKER.finditer(page.read_text()))["name"]
    # every view, from empty blocks
    page.write_text(
        "".join(f"<!-- record: {name}:{v} -->\n<!-- /record -->\n" for v in records.VIEWS)
    )
    assert records.main(["--root", str(root), "render"]) == 0
    once = {p: p.read_text() for p in records.pages(root)}
    assert records.main(["--root", str(root), "render"]) == 0
    assert {p: p.read_text() for p in records.pages(root)} == once
    assert records.main(["--root", str(root), "check"]) == 0
    text = page.read_text()
    assert "| error | steps | part |" in text and "| quantity | against |" in text
    assert "```text" in text and "```bash\nmeanfield study" in text


def test_every_record_is_small_and_the_views_read_it():
    files = sorted((ROOT / records.RECORDS).glob("*.json"))
    assert len(files) >= 2
    for path in files:
        assert path.stat().st_size < 32_000, path
        record = json.loads(path.read_text())
        assert record["record"] == path.stem
        for view in records.VIEWS.values():
            assert view(record)


@pytest.fixture(scope="module")
def tiny_record(tmp_path_factory):
    out = tmp_path_factory.mktemp("records") / "run"
    assert meanfield_main(["study", "mean-ode", *TINY, "--out", str(out)]) == 0
    root = tmp_path_factory.mktemp("root")
    assert records.main(["--root", str(root), "capture", str(out), "--name", "tiny"]) == 0
    return out, root


def test_capture_round_trips_a_real_run(tiny_record):
    out, root = tiny_record
    results = json.loads((out / "results.json").read_text())
    path = root / "docs" / "records" / "tiny.json"
    record = json.loads(path.read_text())
    assert record["study"] == "mean-ode"
    assert record["config"]["L"] == [4, 8] and record["config"]["seeds"] == 3
    assert record["provenance"]["jax"] == results["versions"]["jax"]
    assert record["provenance"]["device"] == results["versions"]["device"]
    # the fits' and rates' numbers, to the record's precision
    fits = [f for f in results["fits"] if f.get("slope") is not None]
    assert len(record["fits"]) == len(fits)
    for mine, theirs in zip(record["fits"], fits, strict=True):
        assert mine["quantity"] == theirs["quantity"] and mine["fixed"] == theirs["fixed"]
        assert mine["slope"] == pytest.approx(theirs["slope"], rel=1e-5)
    rates = [r for r in results["rates"] if "fixed" in r]
    assert [r["quantity"] for r in record["rates"]] == [r["quantity"] for r in rates]
    for mine, theirs in zip(record["rates"], rates, strict=True):
        for k in ("p", "q"):
            if theirs.get(k) is not None:
                assert mine[k] == pytest.approx(theirs[k], rel=1e-5)
    assert any(line.startswith("rates after 1 GD step(s)") for line in record["headline"])
    assert path.stat().st_size < 16_000 and "points" not in record  # no per-draw arrays
    # the command rebuilt from the configuration runs the same configuration
    assert record["command"].startswith("meanfield study mean-ode ")
    assert "--L=4,8" in record["command"] and "--seeds=3" in record["command"]
    # the same folder captured again gives the same file (stable), and the page renders it
    text = path.read_text()
    assert records.main(["--root", str(root), "capture", str(out), "--name", "tiny"]) == 0
    assert path.read_text() == text
    page = root / "docs" / "x.md"
    page.write_text("<!-- record: tiny:rates -->\n<!-- /record -->\n")
    assert records.main(["--root", str(root), "render"]) == 0
    law = next(r for r in record["rates"] if r.get("p") is not None)
    assert records._num(law["p"]) in page.read_text()
    assert records.main(["--root", str(root), "check"]) == 0
