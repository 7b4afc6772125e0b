"""A study's `results.json` as a typed object, for your own plots and analyses.

    r = meanfield.load_results("results/mean-ode")
    print("\n".join(r.headline()))        # what `meanfield study` printed
    r.fit("delta_h", "M")                   # the slope against M at the headline's step
    r.rate("delta_h")["q"]                  # the law's exponent of M, at that step
    r.fits_table().to_csv("fits.csv")       # every fit, one row each

Every key of the file is kept: the common ones as attributes, the study's own under
`r.extra` and by item access (`r["critical_beta"]`).
"""

import csv
import dataclasses
import json
import os
from io import StringIO
from pathlib import Path
from typing import Any

__all__ = ["StudyResults", "Table", "headline_fits", "load_results"]

_HEADLINE = "headline"  # `fit(step=...)`'s default: the step the headline shows


def _steps(entry: Any) -> int | None:
    fixed = entry.get("fixed") if isinstance(entry, dict) else None
    steps = fixed.get("steps") if isinstance(fixed, dict) else None
    return steps if isinstance(steps, int) else None


def headline_fits(fits: list) -> list[dict]:
    """The fits a study's figure shows: where fits carry a GD step, those at the last one
    (the figure's), every quantity; otherwise all of them."""
    fits = [f for f in fits if isinstance(f, dict) and f.get("slope") is not None]
    steps = [s for s in map(_steps, fits) if s is not None]
    if not steps:
        return fits
    last = max(steps)
    return [f for f in fits if (_steps(f) if _steps(f) is not None else last) == last]


@dataclasses.dataclass(frozen=True)
class Table:
    """Rows of named values (`rows`, each a dict over `columns`), as a CSV file
    (`to_csv(path)`, or the text where `path` is None) or a pandas DataFrame
    (`to_pandas()`, where pandas is installed)."""

    columns: list[str]
    rows: list[dict]

    def to_csv(self, path: str | os.PathLike | None = None) -> str:
        """The table as CSV (a header line, then one line per row; empty cells where a
        row has no value); written to `path` where given. **Returns:** the text."""
        buffer = StringIO()
        writer = csv.DictWriter(buffer, fieldnames=self.columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.rows)
        text = buffer.getvalue()
        if path is not None:
            Path(path).write_text(text)
        return text

    def to_pandas(self):
        """The table as a pandas DataFrame; a one-line `ImportError` without pandas."""
        try:
            import pandas  # pyright: ignore[reportMissingImports]
        except ImportError:
            raise ImportError(
                "to_pandas: pandas is not installed (pip install pandas); to_csv() needs nothing"
            ) from None
        return pandas.DataFrame(self.rows, columns=self.columns)

    def __len__(self) -> int:
        return len(self.rows)


def _flat(value: Any, prefix: str, out: dict) -> None:
    """`out` gets the scalar leaves of `value` under dotted names; an interval
    `[low, high]` as `NAME.low`, `NAME.high`; other lists are left out (results.json
    keeps them)."""
    if isinstance(value, dict):
        for k, v in value.items():
            _flat(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list):
        if len(value) == 2 and all(isinstance(v, int | float) for v in value):
            out[f"{prefix}.low"], out[f"{prefix}.high"] = value
    elif value is None or isinstance(value, str | bool | int | float):
        out[prefix] = value


def _table(entries: list[dict], first: tuple[str, ...]) -> Table:
    rows = []
    for entry in entries:
        row: dict = {}
        _flat(entry, "", row)
        rows.append(row)
    names = [c for c in first if any(c in r for r in rows)]
    for row in rows:
        names += [c for c in row if c not in names]
    return Table(columns=names, rows=rows)


@dataclasses.dataclass(frozen=True)
class StudyResults:
    """The contents of one study folder's `results.json`.

    - `study`: the study's name (`meanfield study NAME`); `config`: its configuration;
      `points`, `fits`, `reference`, `timing`, `warnings`: as written;
    - `versions`: the package versions, device and float precision it ran with;
    - `extra`: every other key (the study's own results); `path`: the folder.
    """

    study: str
    config: dict
    points: list
    fits: list
    reference: Any
    timing: dict
    warnings: list
    versions: dict | None
    extra: dict
    path: Path

    def __getitem__(self, key: str) -> Any:
        """Any top-level key of `results.json`."""
        if key in self.extra:
            return self.extra[key]
        if key in _COMMON:
            return getattr(self, key)
        raise KeyError(key)

    def keys(self) -> list[str]:
        return list(_COMMON) + list(self.extra)

    @property
    def step(self) -> int | None:
        """The GD step the headline shows (the figure's, and what `meanfield study`
        printed): the last step a fit or a rate carries; None for a study without steps."""
        steps = [s for s in map(_steps, [*self.fits, *self.rates]) if s is not None]
        return max(steps) if steps else None

    @property
    def rates(self) -> list:
        """The fits of a rate law (`results.json`'s `rates`: the mean ODE's
        `a L^-p + b (LM)^-q` and its Euler part), or an empty list."""
        rates = self.extra.get("rates")
        return rates if isinstance(rates, list) else []

    def fit(
        self, quantity: str, against: str | None = None, *, step: Any = _HEADLINE, **fixed
    ) -> dict | None:
        """The first fit of `quantity` (against `against`, with these fixed sizes) at the
        GD step `step` (default: the headline's, `self.step`, as the command line prints
        it; None: at any step), or None. **Returns:** a copy with the step it is at as
        `fit["step"]` (None for a study without steps)."""
        return _find(self.fits, quantity, against, self._step(step, fixed), fixed)

    def rate(self, quantity: str, *, step: Any = _HEADLINE) -> dict | None:
        """The rate-law fit of `quantity` (`rates`: its exponents `p`, `q` with `p_ci95`,
        `q_ci95` and their theory) at the GD step `step` (default: the headline's), or
        None; with `fit["step"]` as `fit`'s."""
        return _find(self.rates, quantity, None, self._step(step, {}), {})

    def _step(self, step: Any, fixed: dict) -> int | None:
        if "steps" in fixed:  # given as a fixed size, as results.json names it
            return None
        return self.step if step == _HEADLINE else step

    def headline(self) -> list[str]:
        """The lines `meanfield study` printed at the end (the rates, the fits at the
        headline's step with their intervals and theory, the self-check), but the last
        (where it wrote), as stored in `results.json` (`summary`); a one-line `ValueError`
        for a file written before they were stored."""
        lines = self.extra.get("summary")
        if not isinstance(lines, list):
            raise ValueError(
                f"headline: {self.path / 'results.json'} was written before the printed "
                "summary was stored in it; run the study again (or read r.fits)"
            )
        return list(lines)

    def points_table(self) -> Table:
        """Every grid point, one row each: its spec and its numbers' scalar leaves under
        dotted names (`delta_h.mean`), an interval as `.low`/`.high`; per-draw lists are
        left out (in `points`)."""
        return _table([p for p in self.points if isinstance(p, dict)], ())

    def fits_table(self) -> Table:
        """Every fit (`fits`) and rate law (`rates`), one row each: quantity, against,
        step, slope, its interval (`ci95.low`, `ci95.high`), theory, whether the interval
        holds it, then the rest under dotted names."""
        rows = [{"table": "fits", **f} for f in self.fits if isinstance(f, dict)]
        rows += [{"table": "rates", **f} for f in self.rates if isinstance(f, dict)]
        for row in rows:
            row.setdefault("step", _steps(row))
        first = ("table", "quantity", "against", "step", "model", "slope", "ci95",
                 "theory", "theory_inside", "p", "q")  # fmt: skip
        return _table(rows, tuple(c for c in first if c != "ci95") + ("ci95.low", "ci95.high"))

    def figures(self) -> list[Path]:
        """The figures in the folder."""
        return sorted(self.path.glob("*.png"))


def _find(entries: list, quantity: str, against, step, fixed: dict) -> dict | None:
    for f in entries:
        if not isinstance(f, dict) or f.get("quantity") != quantity:
            continue
        if against and f.get("against") != against:
            continue
        if step is not None and _steps(f) not in (step, None):
            continue
        if all((f.get("fixed") or {}).get(k) == v for k, v in fixed.items()):
            return {**f, "step": _steps(f)}
    return None


_COMMON: tuple[str, ...] = (
    "study", "config", "points", "fits", "reference", "timing", "warnings", "versions",
)  # fmt: skip


def read_results_json(path, *, name: str = "path", error: type[Exception] = ValueError):
    """`(file, data)`: `DIR/results.json` (or the file itself) parsed, with a one-line
    `error` naming the argument `name` when it is missing, unreadable or not a study's
    results (a dict with `study` and `config`)."""
    if not isinstance(path, str | os.PathLike):
        raise error(f"{name}: a folder or file path, got {type(path).__name__} {path!r}")
    p = Path(path)
    file = p / "results.json" if p.is_dir() else p
    if file.exists() and not file.is_file():  # a FIFO or a device: reading it may block
        raise error(f"{name}: {file} is not a regular file")
    try:
        data = json.loads(file.read_text())
    except FileNotFoundError:
        raise error(f"{name}: no results.json at {p}") from None
    except RecursionError:
        raise error(f"{name}: {file} is nested too deeply to be a study's results") from None
    except (OSError, ValueError) as err:
        raise error(f"{name}: {file} is unreadable ({type(err).__name__})") from None
    if not isinstance(data, dict) or "study" not in data or "config" not in data:
        raise error(f"{name}: {file} is not a meanfield study's results.json")
    return file, data


def load_results(path) -> StudyResults:
    """Read `DIR/results.json` (or the file itself) into a `StudyResults`; a one-line
    `ValueError` naming `path` when it is missing or is not a study's results."""
    file, data = read_results_json(path)
    return StudyResults(
        study=data["study"],
        config=data["config"],
        points=data.get("points", []),
        fits=data.get("fits", []),
        reference=data.get("reference"),
        timing=data.get("timing", {}),
        warnings=data.get("warnings", []),
        versions=data.get("versions"),
        extra={k: v for k, v in data.items() if k not in _COMMON},
        path=file.parent,
    )
