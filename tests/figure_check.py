"""What a saved figure must show (issue 47): no panel empty without a sentence saying why,
and every data point (a marker) inside its panel's limits. `conftest.py` runs it on every
figure the package saves during the tests, at each test's own grid."""

import numpy as np


def _has_data(ax) -> bool:
    for line in ax.get_lines():
        x, y = (np.asarray(v, dtype=float) for v in line.get_data())
        if x.size and np.isfinite(x).any() and np.isfinite(y).any():
            return True
    if ax.images or ax.patches and any(p.get_visible() for p in ax.patches):
        return True
    for c in ax.collections:
        offsets = np.asarray(c.get_offsets())
        if offsets.size or (hasattr(c, "get_paths") and c.get_paths()):
            return True
    return False


def _says_why(ax) -> bool:
    return any(t.get_text().strip() for t in ax.texts)


def problems(fig) -> list[str]:
    """What is wrong with `fig`, one line each (empty when nothing is)."""
    out = []
    for i, ax in enumerate(fig.axes):
        if ax.get_label() == "<colorbar>" or not ax.get_visible() or not ax.axison:
            continue
        name = f"panel {i} ({ax.get_title()[:50]!r})"
        if not _has_data(ax):
            if not _says_why(ax):
                out.append(f"{name}: empty, with no sentence saying why")
            continue
        (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
        for line in ax.get_lines():
            if line.get_marker() in (None, "None", "", " ") or not line.get_visible():
                continue
            x, y = (np.asarray(v, dtype=float) for v in line.get_data())
            ok = np.isfinite(x) & np.isfinite(y)
            if ax.get_xscale() == "log":
                ok &= x > 0
            if ax.get_yscale() == "log":
                ok &= y > 0
            x, y = x[ok], y[ok]
            tol_x, tol_y = 1e-9 * max(abs(x0), abs(x1), 1), 1e-9 * max(abs(y0), abs(y1), 1)
            outside = (x < x0 - tol_x) | (x > x1 + tol_x) | (y < y0 - tol_y) | (y > y1 + tol_y)
            if outside.any():
                j = int(np.argmax(outside))
                out.append(
                    f"{name}: the point ({x[j]:g}, {y[j]:g}) of {line.get_label()!r} lies "
                    f"outside the panel's limits x {x0:g}..{x1:g}, y {y0:g}..{y1:g}"
                )
    return out
