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


# each notebook's full-size counterpart: the command line that runs it and its page
FULL_SIZE = {
    "mean_ode_convergence": (["meanfield study mean-ode"], "Mean ODE",
                             "../studies/mean-ode.md"),
    "custom_block": (["meanfield study mean-ode --block myblocks.py:SineUnit "
                      "--law myblocks.py:sine_law"], "Your own block", "../your-own-block.md"),
    "neural_sde_limits": (["meanfield study sde --weights brownian", "meanfield study phases"],
                          "Neural SDE / ODE limits", "../studies/sde.md"),
    "optimal_residual_scaling": (["meanfield study response"], "Response and optimal scaling",
                                 "../studies/response.md"),
    "two_layer": (["meanfield study two-layer"], "Two-layer perceptron",
                  "../studies/two-layer.md"),
    "shapes": (["meanfield study shapes"], "Shapes (L, M, D)", "../studies/shapes.md"),
    "plain_vs_residual": (["meanfield study plain-vs-residual"], "Plain vs residual",
                          "../studies/plain-vs-residual.md"),
    "training_regimes": (["meanfield study regimes"], "Training regimes",
                         "../studies/regimes.md"),
    "beyond_initialisation": (["meanfield study trained-weights"], "Trained weights",
                              "../studies/trained-weights.md"),
}  # fmt: skip


def size_note(name: str, size: str) -> list[str]:
    """The admonition on top of a page rendered at the test size: its figures are the
    weakest results, and where the full-size ones are."""
    if size != "test" or name not in FULL_SIZE:
        return []
    commands, label, page = FULL_SIZE[name]
    run = " and ".join(f"`{command}`" for command in commands)
    return [
        '!!! note "Figures at the test size"',
        "    This page was rendered at the notebook's smallest size (`test`: seconds on a",
        "    CPU, few sizes and draws), so its figures show the weakest results: short",
        "    ranges, noisy slopes, wide intervals. At full size the same measurement is",
        f"    {run} (quick preset: minutes on a laptop CPU; `--preset paper` on a GPU),",
        '    or this notebook with `SIZE = "cpu"` or `"gpu"`. Its page:',
        f"    [{label}]({page}).",
        "",
    ]


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
    page.write_text("\n".join([*size_note(name, size), note, ""] + lines).rstrip() + "\n")
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
