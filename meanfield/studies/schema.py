"""What each study's figures read from `results.json`, checked before `meanfield plot DIR`
draws them: an edited or damaged file is refused in one line naming the JSON path and the
problem (`StudyInputError`), never a traceback from deep inside matplotlib, and never a
figure drawn silently from a value of the wrong kind (`"L": "four"`, `"x64": "no"`).

Each study's table is its `SCHEMA` (`meanfield/studies/NAME/schema.py`, in the schema
language of `meanfield.harness.schema_language`): what its `plot(out, results)` and the
helpers it calls read; a key the plot does not read is not checked (the files carry much
more). `SCHEMAS` looks them up by study name.

```python
validate(results)  # raises StudyInputError("DIR: results.json: points[3].L: ...")
```
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ..harness.schema_language import PREFIX, Bool, Record, SchemaRefusal, Spec, Str, shown_value
from ..runtime.errors import StudyInputError
from . import MODULES, STUDIES

__all__ = ["SCHEMAS", "StudyInputError", "validate"]


class _Schemas(Mapping):
    """Study name -> its `SCHEMA` (the study's module imported on first use)."""

    def __getitem__(self, name: str) -> Spec:
        if name not in STUDIES:
            raise KeyError(name)
        return STUDIES[name].SCHEMA

    def __iter__(self) -> Iterator[str]:
        return iter(MODULES)

    def __len__(self) -> int:
        return len(MODULES)


SCHEMAS: Mapping[str, Spec] = _Schemas()

_COMMON = Record({"study": Str(), "config": Record({"x64?": Bool()})})


def check(results) -> None:
    """Raise `SchemaRefusal` (path, problem) where `results` does not fit its study's schema."""
    if not isinstance(results, dict):
        raise SchemaRefusal("", f"expected an object, got {shown_value(results)}")
    if "study" not in results:
        raise SchemaRefusal("study", "missing (expected a string naming a study)")
    study_name = results["study"]
    if not isinstance(study_name, str):
        raise SchemaRefusal(
            "study", f"expected a string naming a study, got {shown_value(study_name)}"
        )
    SCHEMAS.get(study_name, _COMMON).check(results, "", results)


def validate(results) -> None:
    """Check a study's `results.json` (parsed) against what its plot reads: a one-line
    `StudyInputError` naming the JSON path and the problem, e.g.
    `DIR: results.json: points[3].L: expected a positive integer, got "four"`."""
    try:
        check(results)
    except SchemaRefusal as err:
        where = f"{err.path}: " if err.path else ""
        raise StudyInputError(f"{PREFIX}: {where}{err.problem}") from None
