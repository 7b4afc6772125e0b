"""Redrawing a study's figures from its folder: in place, never through a link, with the
study's precision, every failure one line (`StudyInputError`)."""

import errno
import os
from pathlib import Path

from ..runtime.errors import StudyInputError
from .folder import probe_lock


def redraw(
    folder: Path, plot, results: dict, export: dict | None = None, seen: list | None = None
) -> list[Path]:
    """Draw the figures of the study folder `folder` by the study's `plot(folder,
    results)` from its `results.json` (`results`, already checked against the study's
    schema). **Returns:** the figures written. Refused in one line while a run holds the
    folder, where a figure is a symbolic link, where the folder cannot be written, or
    where the plot still cannot draw the values (`UNDRAWABLE`). `export`: the arguments
    of `io.plotting.figure_export` (formats, dpi, panel), where given; `seen`: a list
    that receives the titles of the panels drawn (`exported_panels`)."""
    probe_lock(folder)
    export = export or {}
    # the figures are written in place: never through a link, never half into a folder
    # that cannot take them
    for figure in sorted(
        p for f in {"png", *export.get("formats", ())} for p in folder.glob(f"*.{f}")
    ):
        if figure.is_symlink():
            raise StudyInputError(
                f"DIR: {figure} is a symbolic link; meanfield plot never writes a figure "
                "through a link: remove it"
            )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StudyInputError(
            f"DIR: cannot write the figures into {folder}: {os.strerror(errno.EACCES)}"
        )
    from ..io.plotting import exported_panels, figure_export, use_agg
    from .runner import study_precision  # (JAX: imported once the folder is accepted)

    use_agg()
    import matplotlib.pyplot as plt

    before = {p: p.stat().st_mtime_ns for p in folder.glob("*.png")}
    open_before = set(plt.get_fignums())
    drawn = False
    try:
        # the figures' few computations at the study's precision
        with study_precision(bool(results["config"].get("x64", False))), figure_export(**export):
            plot(folder, results)
            if seen is not None:
                seen.extend(exported_panels())
        drawn = True
    except StudyInputError:
        raise
    except OSError as err:  # a figure's file: a folder by that name, a full disk, ...
        what = err.strerror or (str(err).splitlines() or [type(err).__name__])[0]
        where = f" ({Path(err.filename).name})" if err.filename else ""
        raise StudyInputError(
            f"DIR: cannot write the figures into {folder}: {what}{where}"
        ) from None
    except UNDRAWABLE as err:  # the schema's safety net: one line, not a traceback
        first = (str(err).splitlines() or [""])[0]
        raise StudyInputError(
            f"DIR: results.json cannot be drawn: {type(err).__name__}: {first}"
        ) from None
    finally:
        if not drawn:  # the figures a failure left open
            for num in set(plt.get_fignums()) - open_before:
                plt.close(num)
    written = [p for p in folder.glob("*.png") if before.get(p) != p.stat().st_mtime_ns]
    for fmt in export.get("formats") or ():  # each PNG's other formats
        written += [p.with_suffix(f".{fmt}") for p in written if p.suffix == ".png"
                    and p.with_suffix(f".{fmt}").exists() and fmt != "png"]  # fmt: skip
    return sorted(set(written))


# what a plot raises on values of the right kinds it still cannot draw (caught by `redraw`)
UNDRAWABLE = (
    KeyError,
    TypeError,
    ValueError,
    IndexError,
    AttributeError,
    ZeroDivisionError,
    OverflowError,
    StopIteration,
)
