"""The documentation: the site builds with `mkdocs build --strict`, its API reference
covers every public name, and the package's docstrings cite papers and the docs, not the
project's unshipped specification ("SPEC §n") or its source files ("seed NNN")."""

import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
from conftest import HANG_GUARD_S

import meanfield

ROOT = Path(__file__).resolve().parent.parent


def test_no_unshipped_references_in_the_package():
    bad = []
    shipped = [*(ROOT / "meanfield").rglob("*.py"), *(ROOT / "solvers").rglob("*.py"),
               *(ROOT / "notebooks").glob("*.py"), *(ROOT / "docs").rglob("*.md"),
               ROOT / "README.md"]  # fmt: skip
    for path in shipped:
        if path.is_symlink():
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"SPEC|\bseeds? 00\d", line):
                bad.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not bad, "\n".join(bad[:20])


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("mkdocs")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S,
        env={"NO_MKDOCS_2_WARNING": "1", **__import__("os").environ},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def test_site_builds_with_every_page(site):
    for page in ("index.html", "mathematics/index.html", "api/index.html",
                 "api/models/index.html", "studies/shapes/index.html",
                 "notebooks/shapes/index.html"):  # fmt: skip
        assert (site / page).exists(), page


# the API reference's pages: the top-level names on api.md, one page per layer below it
API_LAYERS = ("blocks", "laws", "scaling", "engine", "models", "training", "limits",
              "coupling", "diagnostics", "theory", "stats", "io", "runtime", "studies",
              "harness", "canary", "solvers")  # fmt: skip


def test_api_reference_covers_every_public_name(site):
    """Every top-level name has its entry in the API reference (read over all its pages),
    and every layer of the package its own page, which documents that layer."""
    pages = [site / "api" / "index.html", *(site / "api" / n / "index.html" for n in API_LAYERS)]
    assert all(page.exists() for page in pages), [str(p) for p in pages if not p.exists()]
    ids = set().union(*(re.findall(r'id="([^"]+)"', page.read_text()) for page in pages))
    for layer, page in zip(API_LAYERS, pages[1:], strict=True):
        assert f'id="meanfield.{layer}' in page.read_text(), layer
    names = [
        n for n in dir(meanfield)
        if not n.startswith("_") and not isinstance(getattr(meanfield, n), types.ModuleType)
    ]  # fmt: skip
    missing = [n for n in names if f"meanfield.{n}" not in ids]
    assert not missing, missing


def test_readme_has_no_commit_hashes_or_timings():
    """The README is for users: numbers with their provenance (commit, machine, date) live in
    benchmarks/RESULTS.md, not here."""
    text = (ROOT / "README.md").read_text()
    hashes = re.findall(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b", text)
    timings = re.findall(r"\b\d+(?:\.\d+)? ?(?:s|sec|seconds|min|minutes|h|hours)\b", text)
    assert not hashes and not timings, (hashes, timings)


def _quick_start(text: str) -> str:
    start = text.index("## Quick start\n")
    end = text.index("\n## ", start + 1) if "\n## " in text[start + 1 :] else len(text)
    return "".join(re.findall(r"```.*?```", text[start:end], flags=re.S))


def test_docs_home_and_readme_give_the_same_quick_start():
    readme = _quick_start((ROOT / "README.md").read_text())
    home = _quick_start((ROOT / "docs" / "index.md").read_text())
    assert readme and readme == home


def test_quick_start_snippet_uses_what_it_builds(tmp_path, monkeypatch, capsys):
    """The Python quick start runs as written up to the results it loads (those need the
    study of the line above), and prints the network it builds."""
    (block,) = re.findall(
        r"```python\n(.*?)```", _quick_start((ROOT / "README.md").read_text()), flags=re.S
    )
    code = block.split("r = mf.load_results")[0]
    exec(compile(code, "quick start", "exec"), {})
    assert "[" in capsys.readouterr().out


def test_site_holds_pages_not_the_renderer(site):
    assert not (site / "render_notebooks.py").exists()
    ignored = (ROOT / ".gitignore").read_text().split()
    assert "site/" in ignored


# The widest code line a reader sees whole at a 1280 px wide window: Material's content
# column there shows 82 monospace characters of a code block (measured on a screenshot of
# a ruler block, headless Chromium at 1280 px); 80 leaves room for the copy button.
CODE_COLUMNS = 80


def test_code_blocks_fit_the_page_at_1280_px():
    """No line of a command or program in the docs is cut at a 1280 px window: every
    fenced block but the `text` ones (a program's output as it prints it, scrolled) holds
    lines of at most CODE_COLUMNS characters, the 82 monospace characters a code block shows
    at 1280 px less room for the copy button. The notebook pages are rendered from
    notebooks/*.py and left out."""
    long = []
    for path in sorted((ROOT / "docs").rglob("*.md")):
        if "notebooks" in path.relative_to(ROOT / "docs").parts:
            continue
        text = path.read_text()
        for block in re.finditer(r"^( *)```(\w*)[^\n]*\n(.*?)^\1```", text, flags=re.S | re.M):
            if block[2] == "text":
                continue
            first = text.count("\n", 0, block.start(3)) + 1
            for number, line in enumerate(block[3].splitlines(), first):
                if len(line) - len(block[1]) > CODE_COLUMNS:
                    long.append(f"{path.relative_to(ROOT)}:{number}: {len(line)}: {line}")
    assert not long, "\n".join(long)


def test_mathematics_is_rendered_not_code(site):
    """The mathematics page's formulas are MathML written at build time (no script, no
    CDN): no display equation left as a code block, no LaTeX left as text."""
    html = (site / "mathematics" / "index.html").read_text()
    assert html.count("<math ") >= 150
    assert not re.search(r"<script[^>]+src=\"https?:|mathjax|katex", html, flags=re.I)
    text = re.sub(r"<(code|pre|math)\b.*?</\1>", "", html, flags=re.S)
    text = re.sub(r"<script\b.*?</script>", "", text, flags=re.S)
    raw = re.findall(r"\\(?:frac|sqrt|mathrm|mathbb)|\$|\^\{|_\{", re.sub(r"<[^>]+>", "", text))
    assert not raw, raw[:10]
    pre = re.findall(r"<pre\b.*?</pre>", html, flags=re.S)
    assert not [p for p in pre if re.search(r"\^\{|_\{|Σ", p)], "an equation left as code"
