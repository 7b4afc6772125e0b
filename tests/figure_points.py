"""What each study's figures must show (issue 47): every finished point of `results.json`,
read here from the results independently of the plotting code. `SPECS[study](stem,
results)` lists the `(what, panel, x, y)` a figure named `stem` (its file name without
`.png`) must draw (tests/figure_check.py `not_drawn`), or returns None for a figure the
study does not declare. `conftest.py` checks every figure a study saves during the tests,
at each test's own grid."""


def mean(stat):
    """A recorded statistic's mean (None when its draws exploded or it is missing)."""
    if isinstance(stat, dict):
        return stat.get("mean")
    return stat


def mean_ode(stem, results):
    cfg = {**results["config"], **(results.get("grid") or {})}
    k = cfg["steps"]
    if stem == "convergence":
        shown = k
    elif stem.startswith("convergence_step"):
        shown = int(stem.removeprefix("convergence_step"))
    else:
        return None
    out = []
    titles = {"delta_h": r"$\Delta^h$", "delta_b": r"$\Delta^b$", "delta_z": r"$\Delta^Z$"}
    for p in results["points"]:
        if p["steps"] != shown:
            continue
        for q, title in titles.items():
            if q == "delta_z" and shown == 0:
                continue
            value = mean(p[q])
            if value is not None and value <= 0:
                continue  # zero error (a one-unit network at M = 1, k = 0) has no log
            what = f"{q} at L={p['L']}, M={p['M']}, k={shown}"
            if p["L"] in cfg["L"]:
                out.append((what, f"{title} against L", p["L"], value))
            if p["L"] == cfg["L_for_M"]:
                out.append((what, f"{title} against M", p["M"], value))
    return out


def toy(stem, results):
    """The toy study of docs/adding-a-study.md (tests/toy_study.py): each n's mean error."""
    if stem != "toy":
        return None
    return [(f"error at n={p['n']}", "error of a mean", p["n"], mean(p["error"]))
            for p in results["points"]]  # fmt: skip


SPECS = {"mean-ode": mean_ode, "toy": toy}


def _gather() -> None:
    """The other studies' specs, one file per group of studies (`figure_points_*.py`)."""
    import importlib
    from pathlib import Path

    for path in sorted(Path(__file__).parent.glob("figure_points_*.py")):
        SPECS.update(importlib.import_module(path.stem).SPECS)


_gather()
