"""A small declarative schema for JSON files, with one generic walker: `Int`, `Num`,
`Str`, `Bool`, `Maybe` (or null), `List`, `Record` (an object with the keys a reader
reads; `"key?"` when it may be left out), `Map` (any keys), `Tagged` (a record chosen by a
field), `Member` (a value looked up in a list elsewhere in the file), `Where` (a relation
between fields) and `When` (a schema chosen by the value); `Ref` names another value of the
file (a length, a bound). A mismatch raises `Refused(path, problem)`, which the caller
words as one line naming the JSON path (`meanfield.studies.schema`: what each study's
figures read from results.json).
"""

from __future__ import annotations

import abc
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any as _AnyType

# the language a study's schema.py is written in (`from ...harness.schema_language import *`)
__all__ = [
    "PREFIX",
    "SchemaRefusal",
    "shown_value",
    "shown_values",
    "sub_path",
    "entries_text",
    "Ref",
    "Spec",
    "Any",
    "Int",
    "Num",
    "Str",
    "Bool",
    "Scalar",
    "Maybe",
    "Array",
    "List",
    "Tuple",
    "Record",
    "Map",
    "Tagged",
    "Member",
    "Test",
    "Where",
    "When",
    "POS",
    "NAT",
    "NUM",
    "OPT_NUM",
    "PAIR",
    "STAT",
    "MEAN",
    "SIZE",
    "POSITIVE",
    "need",
    "first_found",
    "below_path",
    "fit_record",
    "FIT",
    "study",
]

PREFIX = "DIR: results.json"


class SchemaRefusal(Exception):
    """A value that does not fit its schema: where (`path`) and why (`problem`)."""

    def __init__(self, path: str, problem: str, *, kind: bool = False):
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = path, problem
        self.kind = kind  # the value is not of its kind at all (not a detail of it)


def shown_value(value) -> str:
    """A value as the message shows it: JSON's own spelling, shortened."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return f"a list of {entries_text(len(value))}" if value else "an empty list"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _key(path: str, key: str) -> str:
    """The JSON path of `key` inside the object at `path`: `points[3].L`, or
    `theory_curves["fig5_w1.0"]` for a key that is not a plain name."""
    return key if not path and _NAME.match(key) else path + sub_path(key)


def sub_path(key: str) -> str:
    """The step from an object to its `key` in a JSON path: `.L`, or `["fig5_w1.0"]`."""
    return f".{key}" if _NAME.match(key) else f"[{json.dumps(key, ensure_ascii=False)}]"


def _index(path: str, i: int) -> str:
    return f"{path}[{i}]"


def _at(root, path: str):
    """The value at a dotted path of plain names (`config.beta`) in the document."""
    value = root
    for part in path.split("."):
        value = value[part]
    return value


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    if isinstance(v, bool):
        return False
    return isinstance(v, int) or (isinstance(v, float) and math.isfinite(v))


def entries_text(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


class Ref:
    """A size taken from the document (validated before it is used): the integer at
    `path` plus `plus`, or with `length=True` the length of the list at `path`."""

    def __init__(self, path: str, *, plus: int = 0, length: bool = False):
        self.path, self.plus, self.length = path, plus, length

    def resolve(self, root) -> int:
        value = _at(root, self.path)
        return (len(value) if self.length else value) + self.plus

    def text(self) -> str:
        base = f"as many as {self.path}" if self.length else self.path
        return base + (f" + {self.plus}" if self.plus else "")


def _size(n: int | Ref, root) -> tuple[int, str]:
    return (n.resolve(root), f" ({n.text()})") if isinstance(n, Ref) else (n, "")


class Spec(abc.ABC):
    """One kind of value; `check` raises `SchemaRefusal` naming the path."""

    what = "a value"

    @abc.abstractmethod
    def check(self, value, path: str, root) -> None:
        """Refuse `value` (at `path` in the document `root`) unless it is of this kind."""

    def refuse(self, value, path: str):
        raise SchemaRefusal(path, f"expected {self.what}, got {shown_value(value)}", kind=True)


class Any(Spec):
    """Any value (the key must be there: the plot reads it)."""

    what = "a value"

    def check(self, value, path, root) -> None:
        return None


class Int(Spec):
    """An integer (not a boolean), at least `min` when given."""

    def __init__(self, min: int | None = None):
        self.min = min
        self.what = {1: "a positive integer", 0: "a non-negative integer", None: "an integer"}.get(
            min, f"an integer ≥ {min}"
        )

    def check(self, value, path, root) -> None:
        if not _is_int(value) or (self.min is not None and value < self.min):
            self.refuse(value, path)


class Num(Spec):
    """A finite number (not a boolean, not NaN or ±Infinity); `positive`: above 0;
    `non_negative`: 0 or above (a size, an RMS: what a log axis shows where above 0)."""

    def __init__(self, *, positive: bool = False, non_negative: bool = False):
        self.positive, self.non_negative = positive, non_negative
        self.what = (
            "a positive finite number" if positive
            else "a finite number ≥ 0" if non_negative else "a finite number"
        )  # fmt: skip

    def check(self, value, path, root) -> None:
        if not _is_num(value) or (self.positive and value <= 0):
            self.refuse(value, path)
        if self.non_negative and value < 0:
            self.refuse(value, path)


class Str(Spec):
    """A string, one of `choices` when given."""

    def __init__(self, choices=None):
        self.choices = tuple(choices) if choices is not None else None
        self.what = (
            "a string"
            if self.choices is None
            else "one of " + ", ".join(json.dumps(c) for c in self.choices)
        )

    def check(self, value, path, root) -> None:
        if not isinstance(value, str) or (self.choices is not None and value not in self.choices):
            self.refuse(value, path)


class Bool(Spec):
    """`true` or `false`."""

    what = "true or false"

    def check(self, value, path, root) -> None:
        if not isinstance(value, bool):
            self.refuse(value, path)


class Scalar(Spec):
    """A number, string, boolean or null (a value a plot compares and uses as a key)."""

    what = "a number, a string, true, false or null"

    def check(self, value, path, root) -> None:
        if isinstance(value, dict | list) or (
            isinstance(value, float) and not math.isfinite(value)
        ):
            self.refuse(value, path)


class Maybe(Spec):
    """`inner` or null."""

    def __init__(self, inner: Spec):
        self.inner = inner
        self.what = f"{inner.what} or null"

    def check(self, value, path, root) -> None:
        if value is None:
            return
        try:
            self.inner.check(value, path, root)
        except SchemaRefusal as err:
            if err.kind and err.path == path:  # not of its kind: say that null would do
                self.refuse(value, path)
            raise


class Array(Spec):
    """A number, null, or a (nested) list of them: what `np.asarray(v, dtype=float)`
    reads (null as NaN)."""

    what = "a number or a list of numbers"

    def check(self, value, path, root) -> None:
        if value is None or _is_num(value):
            return
        if not isinstance(value, list):
            self.refuse(value, path)
        for i, v in enumerate(value):
            self.check(v, _index(path, i), root)


class List(Spec):
    """A list of `item`s: at least `min_len` of them, exactly `length` when given (an
    integer, or a `Ref` to the document)."""

    def __init__(self, item: Spec, *, min_len: int | Ref = 0, length: int | Ref | None = None):
        self.item, self.min_len, self.length = item, min_len, length
        self.what = "a non-empty list" if min_len == 1 and length is None else "a list"

    def check(self, value, path, root) -> None:
        if not isinstance(value, list):
            self.refuse(value, path)
        if self.length is not None:
            n, why = _size(self.length, root)
            if len(value) != n:
                raise SchemaRefusal(
                    path,
                    f"expected a list of {entries_text(n)}{why}, got {entries_text(len(value))}",
                )
        n, why = _size(self.min_len, root)
        if len(value) < n:
            wanted = (
                "a non-empty list" if n == 1 and not why else f"at least {entries_text(n)}{why}"
            )
            got = "an empty list" if not value else entries_text(len(value))
            raise SchemaRefusal(path, f"expected {wanted}, got {got}")
        for i, v in enumerate(value):
            self.item.check(v, _index(path, i), root)


class Tuple(Spec):
    """A list of exactly `len(items)` values, each of its own kind."""

    def __init__(self, *items: Spec):
        self.items = items
        self.what = f"a list of {entries_text(len(items))}"

    def check(self, value, path, root) -> None:
        if not isinstance(value, list) or len(value) != len(self.items):
            self.refuse(value, path)
        for i, (spec, v) in enumerate(zip(self.items, value, strict=True)):
            spec.check(v, _index(path, i), root)


class Record(Spec):
    """An object with the keys `fields` (`"key?"`: may be left out; present, it is
    checked); other keys are not looked at, unless `closed` (a record whose keys the plot
    uses as names of the points' keys)."""

    what = "an object"

    def __init__(self, fields: Mapping[str, Spec], *, closed: bool = False):
        self.fields = [(k.rstrip("?"), k.endswith("?"), s) for k, s in fields.items()]
        self.closed = closed

    def check(self, value, path, root) -> None:
        if not isinstance(value, dict):
            self.refuse(value, path)
        for key, optional, spec in self.fields:
            if key not in value:
                if optional:
                    continue
                raise SchemaRefusal(_key(path, key), f"missing (expected {spec.what})")
            spec.check(value[key], _key(path, key), root)
        if self.closed:
            known = [k for k, _, _ in self.fields]
            for key in value:
                if key not in known:
                    raise SchemaRefusal(
                        _key(path, key), f"not expected here (the keys: {', '.join(known)})"
                    )


class Map(Spec):
    """An object with any keys, each value a `value`."""

    what = "an object"

    def __init__(self, value: Spec):
        self.value = value

    def check(self, value, path, root) -> None:
        if not isinstance(value, dict):
            self.refuse(value, path)
        for k, v in value.items():
            self.value.check(v, _key(path, k), root)


class Tagged(Spec):
    """An object whose field `tag` names which record it is (the points' `"part"`)."""

    what = "an object"

    def __init__(self, tag: str, variants: dict[str, Spec]):
        self.tag, self.variants = tag, variants
        self.choices = Str(list(variants))

    def check(self, value, path, root) -> None:
        if not isinstance(value, dict):
            self.refuse(value, path)
        where = _key(path, self.tag)
        if self.tag not in value:
            raise SchemaRefusal(where, f"missing (expected {self.choices.what})")
        self.choices.check(value[self.tag], where, root)
        self.variants[value[self.tag]].check(value, path, root)


class Member(Spec):
    """An `inner` that is one of the list at `of` (a path in the document, validated
    first): the plot finds its place there (`config.beta.index(point["beta"])`)."""

    def __init__(self, inner: Spec, of: str):
        self.inner, self.of = inner, of
        self.what = f"{inner.what} among {of}"

    def check(self, value, path, root) -> None:
        self.inner.check(value, path, root)
        among = _at(root, self.of)
        if value not in among:
            raise SchemaRefusal(
                path, f"{shown_value(value)} is not one of {self.of} {shown_values(among)}"
            )


def shown_values(values) -> str:
    text = json.dumps(values, ensure_ascii=False)
    return text if len(text) <= 60 else text[:59] + "…"


# a relation the plot relies on: None when it holds, else (the path below the value, why)
Test = Callable[[_AnyType, _AnyType], "tuple[str, str] | None"]


class Where(Spec):
    """`inner`, and then `test(value, root)`: a relation between fields."""

    def __init__(self, inner: Spec, test: Test):
        self.inner, self.test = inner, test
        self.what = inner.what

    def check(self, value, path, root) -> None:
        self.inner.check(value, path, root)
        found = self.test(value, root)
        if found is not None:
            below, problem = found
            raise SchemaRefusal((path + below).lstrip("."), problem)


class When(Spec):
    """The schema `choose(value)` (a plot that draws nothing for some values)."""

    what = "an object"

    def __init__(self, choose: Callable[[_AnyType], Spec]):
        self.choose = choose

    def check(self, value, path, root) -> None:
        self.choose(value).check(value, path, root)


POS = Int(min=1)


NAT = Int(min=0)


NUM = Num()


OPT_NUM = Maybe(Num())


PAIR = Tuple(Num(), Num())  # an interval [lo, hi]


STAT = Record({"mean": OPT_NUM, "std": OPT_NUM})  # `summarize()`: mean and std over draws


MEAN = Record({"mean": OPT_NUM})  # a summary whose mean is drawn


# a size: an RMS or a fraction, drawn on a log axis where above 0; null for an exploded draw
SIZE = Maybe(Num(non_negative=True))


POSITIVE = Num(positive=True)


def need(record: dict, key: str, spec: Spec, because: str) -> tuple[str, str] | None:
    """A test's answer where `record[key]` is missing or not a `spec` (`because`: why the
    plot needs it there)."""
    below = sub_path(key)
    if key not in record:
        return below, f"missing (expected {spec.what}: {because})"
    try:
        spec.check(record[key], "", None)
    except SchemaRefusal:
        return below, f"expected {spec.what} ({because}), got {shown_value(record[key])}"
    return None


def first_found(*found: tuple[str, str] | None) -> tuple[str, str] | None:
    return next((f for f in found if f is not None), None)


def below_path(prefix: str, found: tuple[str, str] | None) -> tuple[str, str] | None:
    return None if found is None else (prefix + found[0], found[1])


def _fit_holds(fit, root):
    """`loglog_series`: a slope draws its line from the intercept; a theory flagged as
    outside the interval is named."""
    return first_found(
        need(fit, "intercept", NUM, "the fit has a slope") if fit.get("slope") is not None
        else None,
        need(fit, "theory", NUM, "theory_inside is false") if fit.get("theory_inside") is False
        else None,
        need(fit, "theory", NUM, "theory_verdict is set")
        if fit.get("theory_verdict") in ("near", "outside") else None,
    )  # fmt: skip


def fit_record(theory: Spec = OPT_NUM, *, found: bool = False, **more: Spec) -> Spec:
    """A log-log fit (`meanfield.stats.fits.fit_loglog`) as `plotting.loglog_series` reads it;
    `found`: a list the plot searches by `quantity` and `against` (`.get`), where other
    records (a joint fit) may lack them."""
    opt = "?" if found else ""
    return Where(
        Record(
            {
                "quantity" + opt: Str(),
                "against" + opt: Str(),
                "theory" + opt: theory,
                "fixed?": Map(Scalar()),
                "slope?": OPT_NUM,
                "intercept?": OPT_NUM,
                "ci95?": Maybe(PAIR),
                "theory_inside?": Maybe(Bool()),
                "theory_verdict?": Maybe(Str()),
                "theory_tolerance?": OPT_NUM,
                **more,
            }
        ),
        _fit_holds,
    )


FIT = fit_record()


def study(config: Mapping[str, Spec], fields: Mapping[str, Spec], config_test: Test | None = None):
    """A study's results.json: `study`, `config` (with `x64`, which sets the figures'
    precision) and the keys its plot reads, checked in this order (config first: the
    other keys' sizes refer to it)."""
    cfg: Spec = Record({"x64?": Bool(), **config})
    if config_test is not None:
        cfg = Where(cfg, config_test)
    return Record({"study": Str(), "config": cfg, **fields})
