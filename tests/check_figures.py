"""Redraw the figures of finished studies and check them as the tests do (issue 47): no
panel empty without a sentence saying why, every marker inside its panel, every finished
point of each folder's `results.json` drawn (`figure_check.py`, `figure_points.py`), and
the house rules (`figure_check.style_problems`, issue 77). For results the suite cannot
afford to compute, such as every quick preset's:

    python tests/check_figures.py DIR [DIR ...]    # each a study folder, or a folder of them

The figures are rewritten in place (`meanfield plot DIR` draws the same). Exit status 1
when a figure shows a problem, one line each."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str]) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.figure
    from figure_check import is_panel_crop, points_missing, problems, style_problems

    from meanfield.studies import replot

    folders = []
    for arg in argv:
        path = Path(arg)
        if (path / "results.json").is_file():
            folders.append(path)
        else:
            folders += sorted(p.parent for p in path.glob("*/results.json"))
    if not folders:
        print("check_figures: no study folder (one holding results.json) given")
        return 2
    found, saved = [], []
    save = matplotlib.figure.Figure.savefig

    def checked(fig, fname, *args, **kwargs):
        if is_panel_crop(fname):
            return save(fig, fname, *args, **kwargs)
        saved.append(fname)
        found.extend(f"{fname}: {p}" for p in problems(fig) + points_missing(fig, fname))
        result = save(fig, fname, *args, **kwargs)
        found.extend(f"{fname}: {p}" for p in style_problems(fig))
        return result

    matplotlib.figure.Figure.savefig = checked
    try:
        for folder in folders:
            replot(folder)
    finally:
        matplotlib.figure.Figure.savefig = save
    print(f"{len(saved)} figures of {len(folders)} studies; {len(found)} problem(s)")
    print("\n".join(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
