"""A study's `results.json` as a typed object, for your own plots and analyses.

    r = meanfield.load_results("results/mean-ode")
    r.study, r.config["L"], r.fits[0]["slope"], r.fit("delta_h", "M"), r["decomposition"]

Every key of the file is kept: the common ones as attributes, the study's own under
`r.extra` and by item access (`r["critical_beta"]`).
"""

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["StudyResults", "load_results"]


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

    def fit(self, quantity: str, against: str | None = None, **fixed) -> dict | None:
        """The first fit of `quantity` (against `against`, with these fixed sizes), or None."""
        for f in self.fits:
            if f.get("quantity") != quantity or (against and f.get("against") != against):
                continue
            if all((f.get("fixed") or {}).get(k) == v for k, v in fixed.items()):
                return f
        return None

    def figures(self) -> list[Path]:
        """The figures in the folder."""
        return sorted(self.path.glob("*.png"))


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
