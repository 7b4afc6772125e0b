"""Render the notebooks of `notebooks/` (jupytext percent files) into `docs/notebooks/NAME.md`
with their outputs: each is executed cell by cell at the size `MEANFIELD_NOTEBOOK_SIZE`
(default `test`, seconds to a minute each), its printed output captured and every figure it
draws saved next to the page. The pages are committed (the docs build does not execute
notebooks).

    MPLBACKEND=Agg PYTHONPATH=. python3 docs/render_notebooks.py [NAME ...]
"""

import contextlib
import io
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "notebooks"


def cells(text: str):
    """(kind, source) for each `# %%` cell; markdown cells lose their leading '# '."""
    parts = re.split(r"^# %%(.*)$", text, flags=re.M)
    for header, body in zip(parts[1::2], parts[2::2], strict=True):
        if "[markdown]" in header:
            lines = [re.sub(r"^# ?", "", line) for line in body.strip("\n").splitlines()]
            yield "markdown", "\n".join(lines)
        else:
            yield "code", body.strip("\n")


def render(path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from meanfield.io import plotting

    name = path.stem
    for old in OUT.glob(f"{name}_*.png"):
        old.unlink()
    namespace = {"__name__": "__main__", "__file__": str(path)}
    lines = []
    figure_count = 0
    t0 = time.perf_counter()
    for kind, source in cells(path.read_text()):
        if kind == "markdown":
            lines += [source, ""]
            continue
        if not source.strip():
            continue
        lines += ["```python", source, "```", ""]
        buffer = io.StringIO()
        plt.show = lambda *a, **k: None  # figures are saved below, not shown
        plotting.show = lambda *a, **k: None  # (nor saved where a script run keeps them)
        with contextlib.redirect_stdout(buffer):
            exec(compile(source, str(path), "exec"), namespace)
        printed = buffer.getvalue().rstrip()
        if printed:
            lines += ["```text", printed, "```", ""]
        for number in plt.get_fignums():
            figure_count += 1
            image = f"{name}_{figure_count}.png"
            plt.figure(number).savefig(OUT / image, dpi=80, bbox_inches="tight")  # as `show`
            lines += [f"![figure {figure_count}]({image})", ""]
        plt.close("all")
    size = os.environ.get("MEANFIELD_NOTEBOOK_SIZE", "test")
    note = (f"*Rendered from `notebooks/{path.name}` at `MEANFIELD_NOTEBOOK_SIZE={size}` "
            f"({time.perf_counter() - t0:.0f} s on a 2-core CPU): a small run; set it to "
            "`cpu` or `gpu` for the full one.*")  # fmt: skip
    page = OUT / f"{name}.md"
    page.write_text("\n".join([note, ""] + lines).rstrip() + "\n")
    return page


def main(names):
    os.environ.setdefault("MEANFIELD_NOTEBOOK_SIZE", "test")
    os.environ.setdefault("MEANFIELD_COMPILE_CACHE", "off")
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "notebooks"))
    paths = sorted((ROOT / "notebooks").glob("*.py"))
    paths = [p for p in paths if p.stem != "user_blocks" and (not names or p.stem in names)]
    for p in paths:
        cwd = os.getcwd()
        os.chdir(OUT)  # files a notebook writes stay out of the repository's root
        try:
            print("rendered", render(p), flush=True)
        finally:
            os.chdir(cwd)


if __name__ == "__main__":
    main(sys.argv[1:])
