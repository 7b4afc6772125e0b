"""What each study's figures read from `results.json`, checked before `meanfield plot DIR`
draws them: an edited or damaged file is refused in one line naming the JSON path and the
problem (`StudyInputError`), never a traceback from deep inside matplotlib, and never a
figure drawn silently from a value of the wrong kind (`"L": "four"`, `"x64": "no"`).

One generic walker checks a value against a small declarative schema: `Int`, `Num`,
`Str`, `Bool`, `Maybe` (or null), `List`, `Record` (an object with the keys a plot reads;
`"key?"` when it may be left out), `Map` (any keys), `Tagged` (a record chosen by a field,
as the points' `"part"`), `Member` (a value the plot looks up in a list of the config),
`Where` (a relation between fields) and `When` (a schema chosen by the value). The
per-study tables (`SCHEMAS`) list what each study's `plot(out, results)` and the helpers
it calls read: a key the plot does not read is not checked (the files carry much more).

```python
validate(results)  # raises StudyInputError("DIR: results.json: points[3].L: ...")
```
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any as _AnyType

from .runner import StudyInputError

__all__ = ["SCHEMAS", "StudyInputError", "validate"]

PREFIX = "DIR: results.json"


class _Refused(Exception):
    """A value that does not fit its schema: where (`path`) and why (`problem`)."""

    def __init__(self, path: str, problem: str, *, kind: bool = False):
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = path, problem
        self.kind = kind  # the value is not of its kind at all (not a detail of it)


# ------------------------------------------------------------------ the walker's helpers


def _got(value) -> str:
    """A value as the message shows it: JSON's own spelling, shortened."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return f"a list of {_entries(len(value))}" if value else "an empty list"
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
    return key if not path and _NAME.match(key) else path + _sub(key)


def _sub(key: str) -> str:
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


def _entries(n: int) -> str:
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


# ------------------------------------------------------------------ the schema's kinds


class Spec:
    """One kind of value; `check` raises `_Refused` naming the path."""

    what = "a value"

    def check(self, value, path: str, root) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def refuse(self, value, path: str):
        raise _Refused(path, f"expected {self.what}, got {_got(value)}", kind=True)


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
    """A finite number (not a boolean, not NaN or ±Infinity); `positive`: above 0."""

    def __init__(self, *, positive: bool = False):
        self.positive = positive
        self.what = "a positive finite number" if positive else "a finite number"

    def check(self, value, path, root) -> None:
        if not _is_num(value) or (self.positive and value <= 0):
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
        except _Refused as err:
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
                raise _Refused(
                    path, f"expected a list of {_entries(n)}{why}, got {_entries(len(value))}"
                )
        n, why = _size(self.min_len, root)
        if len(value) < n:
            wanted = "a non-empty list" if n == 1 and not why else f"at least {_entries(n)}{why}"
            got = "an empty list" if not value else _entries(len(value))
            raise _Refused(path, f"expected {wanted}, got {got}")
        for i, v in enumerate(value):
            self.item.check(v, _index(path, i), root)


class Tuple(Spec):
    """A list of exactly `len(items)` values, each of its own kind."""

    def __init__(self, *items: Spec):
        self.items = items
        self.what = f"a list of {_entries(len(items))}"

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
                raise _Refused(_key(path, key), f"missing (expected {spec.what})")
            spec.check(value[key], _key(path, key), root)
        if self.closed:
            known = [k for k, _, _ in self.fields]
            for key in value:
                if key not in known:
                    raise _Refused(
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
            raise _Refused(where, f"missing (expected {self.choices.what})")
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
            raise _Refused(path, f"{_got(value)} is not one of {self.of} {_got_all(among)}")


def _got_all(values) -> str:
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
            raise _Refused((path + below).lstrip("."), problem)


class When(Spec):
    """The schema `choose(value)` (a plot that draws nothing for some values)."""

    what = "an object"

    def __init__(self, choose: Callable[[_AnyType], Spec]):
        self.choose = choose

    def check(self, value, path, root) -> None:
        self.choose(value).check(value, path, root)


# ------------------------------------------------------------------ shared pieces

POS = Int(min=1)
NAT = Int(min=0)
NUM = Num()
OPT_NUM = Maybe(Num())
PAIR = Tuple(Num(), Num())  # an interval [lo, hi]
STAT = Record({"mean": OPT_NUM, "std": OPT_NUM})  # `summarize()`: mean and std over draws


def _need(record: dict, key: str, spec: Spec, because: str) -> tuple[str, str] | None:
    """A test's answer where `record[key]` is missing or not a `spec` (`because`: why the
    plot needs it there)."""
    below = _sub(key)
    if key not in record:
        return below, f"missing (expected {spec.what}: {because})"
    try:
        spec.check(record[key], "", None)
    except _Refused:
        return below, f"expected {spec.what} ({because}), got {_got(record[key])}"
    return None


def _first(*found: tuple[str, str] | None) -> tuple[str, str] | None:
    return next((f for f in found if f is not None), None)


def _below(prefix: str, found: tuple[str, str] | None) -> tuple[str, str] | None:
    return None if found is None else (prefix + found[0], found[1])


def _fit_holds(fit, root):
    """`loglog_series`: a slope draws its line from the intercept; a theory flagged as
    outside the interval is named."""
    return _first(
        _need(fit, "intercept", NUM, "the fit has a slope") if fit.get("slope") is not None
        else None,
        _need(fit, "theory", NUM, "theory_inside is false") if fit.get("theory_inside") is False
        else None,
    )  # fmt: skip


def fit_record(theory: Spec = OPT_NUM, *, found: bool = False, **more: Spec) -> Spec:
    """A log-log fit (`meanfield.fits.fit_loglog`) as `plotting.loglog_series` reads it;
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


# ------------------------------------------------------------------ mean-ode

_MEAN_ODE_GRID = {"L": List(POS, min_len=1), "M": List(POS, min_len=1), "L_for_M": POS,
                  "fit_M_max": NUM}  # fmt: skip


def _mean_ode_config(cfg, root):
    if "block" in cfg or "law" in cfg:
        return None
    # the built-in 2LP: its activation and init are named in the title
    return _first(*(_need(cfg, k, Any(), "no block or law named") for k in ("activation", "init")))


def _mean_ode_fits(fits, root):
    """A fit against L of an error names the width M of its line and its theory slope."""
    for i, f in enumerate(fits):
        if f.get("against") == "L" and f.get("quantity") in ("delta_h", "delta_b", "delta_z"):
            found = _first(
                _below(".fixed", _need(f.get("fixed") or {}, "M", POS, "the line's width")),
                _need(f, "theory", OPT_NUM, "the line's theory slope"),
            )
            if found:
                return f"[{i}]" + found[0], found[1]
    return None


_MEAN_ODE = study(
    {**_MEAN_ODE_GRID, "steps": NAT, "d": Any(), "inputs": Any(), "seeds": Any()},
    {
        "points": List(Record({"L": POS, "M": POS, "steps": NAT, "delta_h": STAT,
                               "delta_b": STAT, "delta_z": STAT})),
        "grid?": Maybe(Record(_MEAN_ODE_GRID)),
        "decomposition": List(Record({"L": POS, "steps": NAT, "delta_h_euler": OPT_NUM,
                                      "delta_b_euler": OPT_NUM, "delta_z_euler": OPT_NUM})),
        "fits": Where(List(fit_record(found=True)), _mean_ode_fits),
        "figure_floors?": Maybe(Map(OPT_NUM)),
    },
    _mean_ode_config,
)  # fmt: skip

# a study that judged nothing (a heavy-tailed law) has no points and draws no figure
_MEAN_ODE_NOTHING = study({}, {"points": List(Any())})
MEAN_ODE = When(lambda r: _MEAN_ODE_NOTHING if r.get("points") == [] else _MEAN_ODE)

# ------------------------------------------------------------------ sde


def _sde_config(cfg, root):
    # the title of fBm weights names H, of smooth weights ℓ
    key = {"fbm": "hurst", "smooth": "length_scale"}.get(cfg["weights"])
    return None if key is None else _need(cfg, key, Any(), f"the title of {cfg['weights']} weights")


SDE = study(
    {"weights": Str(("brownian", "fbm", "smooth")), "d": Any(), "activation": Any(),
     "seeds": Any()},
    {
        "points": List(Record({"L": POS, "error_final": STAT, "error_sup": STAT})),
        "fits": Where(List(FIT, min_len=1), lambda fits, root: _below(
            "[0]", _need(fits[0], "theory", NUM, "the title's theory slope"))),
        "reference": Record({"error_estimate?": OPT_NUM}),
    },
    _sde_config,
)  # fmt: skip

# ------------------------------------------------------------------ phases

_BETAS = Ref("config.beta", length=True)
_RATIO = Record({"values": List(OPT_NUM)})
_ESTIMATE_FIELDS = {
    "estimate?": OPT_NUM,
    "ci95?": Maybe(PAIR),
    "theory?": OPT_NUM,
    "slopes?": Maybe(List(OPT_NUM, length=_BETAS)),
    "phases?": Maybe(List(Str(), length=_BETAS)),
}


def _ratio_values(point, root):
    """A point's draws fill at most `config.seeds` places."""
    seeds = root["config"]["seeds"]
    for q in ("forward", "gradient", "forward_max"):
        if q in point and len(point[q]["values"]) > seeds:
            return f".{q}.values", (
                f"expected at most {_entries(seeds)} (config.seeds), "
                f"got {_entries(len(point[q]['values']))}"
            )
    return None


def _phases_config(cfg, root):
    if root.get("stability_bounds") is not None and 0.5 not in cfg["beta"]:
        return ".beta", "expected 0.5 among the β (stability_bounds are drawn at β = 1/2)"
    return None


_HURSTS = Ref("heatmap.hurst", length=True)
_STABILITY = Record(
    {
        "per_L": List(Record({
            "L": POS,
            "forward_sq": List(Record({"delta": NUM, "lower": NUM, "upper": NUM,
                                       "fraction_inside": OPT_NUM})),
            "gradient_sq_mean": OPT_NUM,
            "gradient_sq_se?": OPT_NUM,
        }), min_len=1),
        "gradient_bounds": List(NUM),
    }
)  # fmt: skip

PHASES = study(
    {"beta": List(NUM, min_len=1), "L": List(POS, min_len=1), "seeds": POS,
     "weights": Str(("iid", "rademacher", "smooth", "fbm")), "d": Any(), "seed": NAT,
     "hurst?": OPT_NUM, "length_scale": Num(positive=True), "slope_tol?": OPT_NUM,
     "loss?": Str(("squared", "readout"))},
    {
        "points": List(Where(Record({"L": Member(POS, "config.L"),
                                     "beta": Member(NUM, "config.beta"),
                                     "forward?": _RATIO, "gradient?": _RATIO,
                                     "forward_max?": _RATIO}), _ratio_values)),
        "critical_beta": Record({**_ESTIMATE_FIELDS,
                                 "from_gradient?": Maybe(Record(_ESTIMATE_FIELDS)),
                                 "from_max_over_depth?": Maybe(Record(_ESTIMATE_FIELDS))}),
        "heatmap?": Maybe(Record({
            "hurst": List(NUM, min_len=1),
            "slope_forward": List(List(OPT_NUM, length=_BETAS), length=_HURSTS),
            "critical_beta": List(Record({"estimate": OPT_NUM, "ci95": Maybe(PAIR)}),
                                  length=_HURSTS),
            "critical_beta_gradient?": Maybe(List(Record({"estimate?": OPT_NUM,
                                                          "ci95?": Maybe(PAIR)}))),
        })),
        "stability_bounds?": Maybe(_STABILITY),
    },
    _phases_config,
)  # fmt: skip

# ------------------------------------------------------------------ response

_SIM = {"sim_mean": Array(), "sim_se": Array(), "theory": Array()}
_LAYERS = Record({**_SIM, "z": Array()})
_OUTPUT = Record({"sim_mean": OPT_NUM, "sim_se": OPT_NUM, "theory": OPT_NUM})
_CORRELATION = Record(
    {**_SIM, "limit": NUM, "long_theory_layers": Array(), "long_theory_distance": Array(),
     "tail_fit": Record({"better_fit": Str(), "power_exponent?": OPT_NUM,
                         "exponential_length?": OPT_NUM}),
     "predicted_power_exponent?": NUM}
)  # fmt: skip


def _response_curves(curves, root):
    """The theory curves the figures draw: one per depth, Figures 2 and 5's."""
    from ..theory.response import FIG5_SIGMA_B2, FIG5_SIGMA_W2

    keys = [f"chi_out_L{L}" for L in root["config"]["depths"]]
    keys += [f"fig2_{n}_{q}" for n in ("resnet", "ffnet") for q in ("C", "eta")]
    keys += [f"fig5_w{s}" for s in FIG5_SIGMA_W2]
    keys += [f"fig5_b{s}{star}" for s in FIG5_SIGMA_B2 for star in ("", "_star")]
    keys += ["alpha_grid", "formula_L", "formula_curve", "K0_grid", "alpha_star_K0",
             "formula_K0", "fig4c_alpha", "fig4c_surface"]  # fmt: skip
    missing = next((k for k in keys if k not in curves), None)
    return None if missing is None else (_sub(missing), "missing (a theory curve drawn)")


def _response_stars(stars, root):
    """A simulated α* is drawn with the simulation of its depth."""
    simulated = {s["L"] for s in root.get("alpha_star_simulations", [])}
    for i, s in enumerate(stars):
        if s.get("simulated") is not None and s["L"] not in simulated:
            return f"[{i}].simulated", (
                f"no entry of alpha_star_simulations has L = {s['L']} (its simulation)"
            )
    return None


RESPONSE = study(
    {"depths": List(POS, min_len=1), "width": Any(), "K0": NUM, "sigma_w2": NUM,
     "sigma_b2": NUM},
    {
        "theory_curves": Where(Map(Array()), _response_curves),
        "figure2_simulation": Record({
            "resnet?": Record({"C": Record({"sim_mean": Array(), "sim_se": Array()}),
                               "eta": Record({"sim_mean": Array(), "sim_se?": Array()})}),
            "ffnet?": Record({"C": Record({"sim_mean": Array(), "sim_se": Array()}),
                              "eta": Record({"sim_mean": Array(), "sim_se?": Array()})}),
        }),
        "alpha_star_simulations?": List(Record({"L": POS, "alphas": List(Num(positive=True)),
                                                "chi_out_mean": Array(),
                                                "chi_out_se": Array()})),
        "alpha_star": Where(List(Record({"L": POS, "asymptotic": OPT_NUM, "numeric": OPT_NUM,
                                         "simulated?": Maybe(Record({"value": NUM,
                                                                     "ci95": PAIR}))})),
                            _response_stars),
        "points": List(Record({"alpha": NUM, "C": _LAYERS, "chi": _LAYERS,
                               "K": Record(_SIM), "eta": Record(_SIM),
                               "chi_out": _OUTPUT, "K_out": _OUTPUT})),
        "paper_figures": Record({
            "fig3?": Maybe(Record({"per_alpha": List(Record({"alpha": NUM, "K": Record(_SIM),
                                                             "chi": Record(_SIM)}), length=3),
                                   "sigma_w2": Any(), "sigma_b2": Any(), "K0": Any()})),
            "fig6?": Maybe(Record({
                "eta": Record(_SIM), "L": Any(), "tail_from": Any(),
                "simulation_fit": Record({"layers": List(Num(), min_len=1),
                                          "power_exponent": OPT_NUM,
                                          "power_exponent_ci95": Maybe(PAIR),
                                          "better_fit": Any()}),
                "theory_power_exponent_same_estimator?": OPT_NUM,
            })),
            "signal?": Maybe(Record({
                "bins": Tuple(NUM, NUM, POS), "L": Any(),
                "per_alpha": List(Record({"K_L": Num(positive=True), "factor": NUM,
                                          "fraction_outside_dynamic_range": NUM,
                                          "histogram": Array()}), length=3),
            })),
            "alpha_star_over_K0?": List(Record({"value": NUM, "K0": NUM, "ci95": PAIR})),
            "linearised_response?": Maybe(Record({"gain_at_K0": NUM})),
            "correlations?": Maybe(Record({"resnet": _CORRELATION, "ffnet": _CORRELATION,
                                           "c0": Any(), "sigma_w2": Any(), "sigma_b2": Any(),
                                           "K0": Any()})),
            "max_entropy?": Maybe(Record({
                "sigma2": List(NUM, min_len=1), "kl": List(NUM, length=Ref(
                    "paper_figures.max_entropy.sigma2", length=True)),
                "argmin_sigma2": NUM, "paper_condition": NUM,
                "K_L_at_alpha_star": List(Record({"K_L": NUM})),
            })),
        }),
    },
)  # fmt: skip

# ------------------------------------------------------------------ variance

VARIANCE = study(
    {"gammas": List(NUM), "M": POS, "activation": Any(), "block": Any()},
    {
        "points": List(Record({
            "L": POS, "gamma": NUM, "mean": OPT_NUM, "se": OPT_NUM, "theory": OPT_NUM,
            "regime": Any(), "exploded?": NAT, "MLalpha2": Num(positive=True),
            "backward": Record({"sup": Record({"mean": OPT_NUM, "se": OPT_NUM}),
                                "end": Record({"mean": OPT_NUM})}),
        }), min_len=1),  # no point: nothing on the log axes
        "reference": Record({"c": OPT_NUM}),
    },
)  # fmt: skip

# ------------------------------------------------------------------ tangent-kernel

TANGENT_KERNEL = study(
    {"gammas": List(NUM), "L": List(POS, min_len=1)},
    {
        "points": List(Record({"L": Member(POS, "config.L"), "gamma": Member(NUM, "config.gammas"),
                               "MLalpha2": Num(positive=True),
                               "relative_difference": STAT})),
        # a fit against L names its theory slope in the legend
        "fits?": Maybe(List(fit_record(theory=NUM))),
    },
)  # fmt: skip

# ------------------------------------------------------------------ two-layer


def _two_layer_fits(fits, root):
    """A criterion's fitted line is drawn over its sizes, its interval in the legend."""
    for i, f in enumerate(fits):
        if f["against"] == "s_v" and f.get("slope") is not None:
            found = _first(_need(f, "ci95", PAIR, "the fit has a slope"),
                           _need(f, "sizes", List(Num(positive=True), min_len=1),
                                 "the fit has a slope"))  # fmt: skip
            if found:
                return f"[{i}]" + found[0], found[1]
    return None


_STEPS = List(Record({"mean": OPT_NUM, "std": OPT_NUM}), min_len=Ref("config.steps", plus=1))

TWO_LAYER = study(
    {"steps": NAT, "D": List(POS), "M": List(POS), "D_limit": List(POS), "sweep_M": List(POS),
     "s_v_sweep": List(NUM), "activation": Any(), "s_u": Any(), "s_v": Any(), "lr_u": Any(),
     "lr_v": Any(), "seeds": Any(), "sweep_D": Any()},
    {
        "points": List(Tagged("part", {
            "width": Record({"D": POS, "M": POS, "output_error": _STEPS,
                             "hidden_error": _STEPS}),
            "dimension": Record({"D": POS, "output_error": _STEPS, "hidden_error": _STEPS,
                                 "reference_error": OPT_NUM}),
            "criteria": Record({"M": POS, "s_v": Member(NUM, "config.s_v_sweep"),
                                "rule": Str(("balanced", "unscaled")),
                                "loss": List(Record({"mean": OPT_NUM}), min_len=2),
                                "first_step_decrease": STAT, "feature_movement": STAT,
                                "kernel_change": STAT}),
            "diversity": Record({"D": POS, "scaled": STAT, "unscaled": STAT}),
        }), min_len=1),  # no point: nothing on the log axes
        "fits": Where(List(fit_record(sizes=List(Num(positive=True)))), _two_layer_fits),
        "critical_scale": Record({"rows": List(Record({
            "min_sqrt": Num(positive=True), "sigma_v_star": OPT_NUM, "d_out": POS,
            "heuristic": OPT_NUM}), min_len=1)}),
    },
)  # fmt: skip
# (`fit_record(sizes=...)` makes sizes required; two-layer's fits all have them)

# ------------------------------------------------------------------ shapes

_SHAPE = Record({"L": NUM, "M": NUM, "D": NUM})
_SIX = ("output_error", "hidden_error", "output_error_fixed_D", "hidden_error_fixed_D",
        "output_D_gap", "hidden_D_gap")  # fmt: skip

SHAPES = study(
    {"steps": NAT, "L": List(POS, min_len=1), "M": List(POS, min_len=1),
     "D": List(POS, min_len=1), "activation": Any(), "seeds": Any()},
    {
        "points": List(Record({"L": POS, "M": Member(POS, "config.M"),
                               "D": Member(POS, "config.D"), "steps": NAT,
                               **{q: STAT for q in _SIX}})),
        "fits": List(fit_record(
            term_share=NUM, dominant=Bool(),
            # the fixed sizes select the points of a line: the points' own keys
            fixed=Record({"L?": POS, "M?": POS, "D?": POS, "steps?": NAT}, closed=True))),
        "rate_law": Any(),
        "optimal_shape": Record({"bound": _SHAPE, "conjecture": _SHAPE,
                                 "output_error?": Record({"L?": NUM, "M?": NUM, "D?": NUM}),
                                 "hidden_error?": Record({"L?": NUM, "M?": NUM, "D?": NUM})}),
    },
)  # fmt: skip

# ------------------------------------------------------------------ plain-vs-residual


def _configurations(root) -> int:
    from .plain_vs_residual import configurations

    return len(configurations(root["config"]["activations"]))


class _Configs(Ref):
    """As many as the gradient part's configurations of `config.activations`."""

    def __init__(self):
        super().__init__("config.activations")

    def resolve(self, root) -> int:
        return _configurations(root)

    def text(self) -> str:
        return "one per configuration of config.activations"


def _one_gradient_point(points, root):
    if not any(p["part"] == "gradients" for p in points):
        return "", 'expected at least one point of part "gradients" (the figures\' depths)'
    return None


def _rate_holds(rate, root):
    if rate["rate"] is None:
        return None
    why = "the rate is measured"
    return _first(_need(rate, "rate_ci", PAIR, why),
                  _need(rate, "predicted_width_N", NUM, why),
                  _need(rate, "predicted", NUM, why))  # fmt: skip


_LAYER_STATS = Record({"mean": List(OPT_NUM, min_len=1)})
PLAIN_VS_RESIDUAL = study(
    {"activations": List(Str(("sigmoid", "tanh", "relu", "leaky_relu")), min_len=1),
     "L": List(POS), "N": Any(), "seeds": Any(), "train_steps": POS, "lr": Any(),
     "train_N": Any(), "train_seeds": Any()},
    {
        "points": Where(List(Tagged("part", {
            "gradients": Record({"L": POS, "cells": List(Record({
                "log_ratio": List(OPT_NUM), "log_grad?": _LAYER_STATS,
                "act_mean?": _LAYER_STATS, "act_std?": _LAYER_STATS,
                "active?": _LAYER_STATS}), length=_Configs())}),
            "train": Record({}),
        })), _one_gradient_point),
        "gradient_rates": List(Where(Record({
            "architecture": Str(("plain", "post-activation", "pre-activation")),
            "init": Str(("normal", "xavier", "he")), "alpha": Str(("1", "1/sqrt(L)")),
            "rate": OPT_NUM, "depths": List(POS),
            "predicted_log_ratio": List(OPT_NUM)}), _rate_holds),
            length=_Configs()),
        "degradation": List(Record({
            "architecture": Str(), "L": POS, "train_loss": OPT_NUM, "train_loss_std": OPT_NUM,
            "test_accuracy": OPT_NUM, "test_accuracy_std": OPT_NUM,
            "loss_curve": List(OPT_NUM)})),
    },
)  # fmt: skip

# ------------------------------------------------------------------ trained-weights

_REGULARITY = Maybe(Where(Record({"hurst?": OPT_NUM, "interval?": Maybe(PAIR)}),
                          lambda r, root: None if r.get("hurst") is None else _need(
                              r, "interval", PAIR, "the index is drawn with it")))  # fmt: skip


def _cell_row(cell, root):
    """A cell is drawn in the row of its initialisation (and Hurst index, for fBm)."""
    cfg = root["config"]
    init, hurst = cell["init"], cell["hurst"]
    if init not in cfg["inits"]:
        return ".init", f"{_got(init)} is not one of config.inits {_got_all(cfg['inits'])}"
    if init == "fbm" and hurst not in cfg["hursts"]:
        return ".hurst", f"{_got(hurst)} is not one of config.hursts {_got_all(cfg['hursts'])}"
    if init != "fbm" and hurst is not None:
        return ".hurst", f"expected null (only fbm cells have a Hurst index), got {_got(hurst)}"
    return None


_PATH = List(OPT_NUM, length=Ref("config.L"))
TRAINED_WEIGHTS = study(
    {"L": POS, "betas": List(NUM, min_len=1), "hursts": List(NUM),
     "inits": List(Str(("iid", "fbm", "smooth"))), "d": Any(), "data_description": Str(),
     "steps": Any(), "optimizer": Any(), "seeds": Any()},
    {
        "cells": List(Where(Record({
            "init": Str(("iid", "fbm", "smooth")), "hurst": OPT_NUM,
            "beta": Member(NUM, "config.betas"), "exploded": NAT,
            "test_accuracy": Record({"mean": OPT_NUM}),
            "example_path?": Record({"before": _PATH, "after": _PATH}),
            **{f"regularity{kind}_{when}?": _REGULARITY
               for kind in ("", "_cumulative") for when in ("before", "after")},
            "regularity_update?": _REGULARITY,
        }), _cell_row)),
    },
)  # fmt: skip

# ------------------------------------------------------------------ regimes


def _transfer_holds(rec, root):
    n = len(rec["L"])
    for key in ("loss_curves", "optimal_lr"):
        if len(rec[key]) != n:
            return f".{key}", f"expected {_entries(n)} (as many as its L), got {len(rec[key])}"
    return None


_LRS = Ref("config.transfer_lrs", length=True)
REGIMES = study(
    {"gammas": List(NUM, min_len=1), "lambdas": List(NUM, min_len=1), "L": List(POS, min_len=1),
     "seeds": Any(), "steps": Any(), "transfer_lrs": List(Num(positive=True)),
     "transfer_steps": Any()},
    {
        "points": List(Tagged("part", {
            "diagram": Record({"L": POS, "cells": List(Record({
                "gamma": NUM, "lambda": NUM,
                **{q: List(OPT_NUM) for q in ("forward_deviation", "predictor_movement",
                                              "local_change", "global_change",
                                              "parameter_movement", "loss_ratio")}}))}),
            "transfer": Record({}),
        })),
        "cells": List(Record({"gamma": NUM, "lambda": NUM, "ambiguous": Bool(),
                              "distance_to_boundary": NUM, "regime": Maybe(Str()),
                              "predicted_regime": Maybe(Str())})),
        "transfer": List(Where(Record({
            "parametrization": Str(), "gamma": NUM, "lambda": NUM, "L": List(POS),
            "loss_curves": List(List(NUM, length=_LRS)), "optimal_lr": List(OPT_NUM),
            "drift_exponent": OPT_NUM, "drift_ci95?": Maybe(PAIR),
            "unresolved_L?": Maybe(List(Any()))}), _transfer_holds)),
    },
)  # fmt: skip

# ------------------------------------------------------------------ the tables

SCHEMAS: dict[str, Spec] = {
    "mean-ode": MEAN_ODE,
    "sde": SDE,
    "phases": PHASES,
    "response": RESPONSE,
    "variance": VARIANCE,
    "tangent-kernel": TANGENT_KERNEL,
    "two-layer": TWO_LAYER,
    "shapes": SHAPES,
    "plain-vs-residual": PLAIN_VS_RESIDUAL,
    "trained-weights": TRAINED_WEIGHTS,
    "regimes": REGIMES,
}

_COMMON = Record({"study": Str(), "config": Record({"x64?": Bool()})})


def check(results) -> None:
    """Raise `_Refused` (path, problem) where `results` does not fit its study's schema."""
    if not isinstance(results, dict):
        raise _Refused("", f"expected an object, got {_got(results)}")
    if "study" not in results:
        raise _Refused("study", "missing (expected a string naming a study)")
    study_name = results["study"]
    if not isinstance(study_name, str):
        raise _Refused("study", f"expected a string naming a study, got {_got(study_name)}")
    SCHEMAS.get(study_name, _COMMON).check(results, "", results)


def validate(results) -> None:
    """Check a study's `results.json` (parsed) against what its plot reads: a one-line
    `StudyInputError` naming the JSON path and the problem, e.g.
    `DIR: results.json: points[3].L: expected a positive integer, got "four"`."""
    try:
        check(results)
    except _Refused as err:
        where = f"{err.path}: " if err.path else ""
        raise StudyInputError(f"{PREFIX}: {where}{err.problem}") from None
