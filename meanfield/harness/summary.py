"""The headline a study prints when it finishes (`summary`): the verdicts, the fitted
rates with their intervals and what each fit left out, and where the results were
written; `headline_fits` picks the fits it shows; `exploded_warning`, the warning that
names the points whose draws exploded."""

import math
from pathlib import Path

from ..io.results import headline_fits
from ..stats.fits import (
    THEORY_TOLERANCE,
    exponent_verdict,
    fit_verdict,
    fixed_text,
    theory_verdict,
    verdict_text,
)


def _left_out(fit: dict) -> str:
    """What a printed fit left out: points (`dropped`), exploded draws (`excluded`) and
    discarded bootstrap replicates (`bootstrap_dropped`), where there are any."""
    parts = []
    dropped = fit.get("dropped") or []
    if dropped:
        xs = ", ".join(f"{d['x']:g}" for d in dropped)
        parts.append(f"{fit.get('against') or 'x'} = {xs} left out ({dropped[0]['reason']})")
    if fit.get("excluded"):
        parts.append(f"{fit['excluded']} exploded draw(s) left out")
    if fit.get("bootstrap_dropped"):
        parts.append(f"{fit['bootstrap_dropped']} bootstrap replicate(s) discarded")
    return f"; {'; '.join(parts)}" if parts else ""


def _fit_line(f: dict) -> str:
    """One printed fit: what against what, where, slope [interval], theory and what the
    interval says of it (inside; near, within the tolerance; OUTSIDE beyond it), what it
    left out."""
    ci = f.get("ci95") or f.get("ci95_fit")
    fixed = dict(f.get("fixed") or {})
    where = ", ".join(f"{k}={v}" for k, v in fixed.items() if k != "steps")
    if "steps" in fixed:  # which GD step the fit is at
        where += f"{', ' if where else ''}after {fixed['steps']} GD step(s)"
    text = f"{f.get('quantity')} vs {f.get('against')}" + (f" ({where})" if where else "")
    text += f": slope {f['slope']:.3f}"
    if ci:
        text += f" [{ci[0]:.3f}, {ci[1]:.3f}]"
        if not f.get("ci95") and f.get("ci95_fit"):
            text += " (the regression's interval: one draw per point)"
    if f.get("theory") is not None:
        text += f", theory {f['theory']:g}"
        verdict = fit_verdict(f) if "theory_inside" in f or "theory_verdict" in f else None
        if verdict is not None:
            words = verdict_text(verdict, f.get("theory_tolerance") or THEORY_TOLERANCE)
            note = f"; {f['theory_note']}" if f.get("theory_note") and verdict != "inside" else ""
            text += f" ({words}{note})"
    return text + _left_out(f)


def _exponent_text(law: dict, k: str) -> str:
    """`p = 0.983 [0.951, 1.013] (theory 1: inside)` for an exponent of a law fit; a
    missed theory within the tolerance is "near", beyond it "OUTSIDE"."""
    ci = law.get(f"{k}_ci95")
    text = f"{k} = {law[k]:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else " (no interval)")
    theory = (law.get("theory") or {}).get(k) or {}
    tol = theory.get("tolerance") or THEORY_TOLERANCE
    verdict = exponent_verdict(theory, ci)
    words = verdict_text(verdict, tol)
    if theory.get("value") is not None:
        text += f" (theory {theory['value']:g}: {words})"
    return text


def _law_line(law: dict) -> str:
    """One law fit: its quantity and exponents, or why it has none; what it left out."""
    names = [k for k in ("p", "q") if law.get(k) is not None]
    if not names:
        return f"{law['quantity']}: no fit ({law.get('reason', 'no usable points')})"
    text = f"{law['quantity']}: " + ", ".join(_exponent_text(law, k) for k in names)
    parts = []
    if law.get("excluded"):
        parts.append(f"{law['excluded']} exploded draw(s) left out")
    if law.get("below_reference"):
        parts.append(f"{len(law['below_reference'])} point(s) within 10x of the reference's "
                     "error left out")  # fmt: skip
    if law.get("dropped"):
        parts.append(f"{len(law['dropped'])} point(s) without a positive draw left out")
    if law.get("note"):
        parts.append(law["note"])
    return text + (f"; {'; '.join(parts)}" if parts else "")


def rate_lines(rates: list) -> list[str]:
    """The headline of a study with `rates`: at the last step (mean-ode), the finite
    networks' law (its exponents with intervals against the theory) and the Euler part's,
    each introduced once by its model and what it was fitted to; a depth law over paired
    draws (`part` "depth", sde) likewise."""
    rates = [r for r in rates if isinstance(r, dict) and "fixed" in r]
    if not rates:
        return []
    depth = [r for r in rates if r.get("part") == "depth"]
    if depth:
        law = next((r for r in depth if r.get("p") is not None), depth[0])
        how = law.get("interval", "no interval")
        lines = [f"rates, {law['model']} over {law.get('n_points')} depths, mean over "
                 f"{law.get('draws')} paired draws ({how}):"]  # fmt: skip
        return lines + [f"  {_law_line(r)}" for r in depth]
    last = max(r["fixed"]["steps"] for r in rates)
    lines = []
    for part, intro in (("finite", "rates"), ("euler", "Euler part")):
        laws = [r for r in rates if r.get("part") == part and r["fixed"]["steps"] == last]
        if not laws:
            continue
        law = next((r for r in laws if r.get("n_points")), laws[0])
        over = (f"over {law.get('n_points')} grid points, {law.get('draws')} networks, "
                f"{law.get('statistic')}" if part == "finite"
                else f"over {law.get('n_points')} depths")  # fmt: skip
        lines.append(f"{intro} after {last} GD step(s), {law['model']} jointly {over}:")
        lines += [f"  {_law_line(r)}" for r in laws]
    others = [
        r for r in rates if r["fixed"]["steps"] != last
        and any(t.get("verdict") == "outside" for t in (r.get("theory") or {}).values())
    ]  # fmt: skip
    if others:
        lines.append("exponents at other steps whose 95% interval excludes the theory "
                     "(beyond the tolerance):")  # fmt: skip
        lines += [f"  {_law_line(r)} (steps={r['fixed']['steps']}, {r['part']})" for r in others]
    return lines


def _secondary_line(f: dict) -> str:
    """A one-term slope along a line of the grid, with the joint law's own slope over the
    same points (what the other term makes of a one-term slope there)."""
    text = _fit_line({k: v for k, v in f.items()
                      if k not in ("theory_inside", "theory_verdict", "theory_note")})  # fmt: skip
    if f.get("law_slope") is not None:
        text += f"; the fitted law's own slope there {f['law_slope']:.3f}"
    return text


def _estimate_text(e: dict) -> str:
    ci = e.get("ci95")
    text = f"{e['estimate']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")
    if e.get("theory") is not None:
        text += f", theory {e['theory']:g}"
        if ci:
            text += f" ({verdict_text(theory_verdict(ci, e['theory']))})"
    return text


def _verdict_lines(results: dict) -> list[str]:
    """The headline numbers that are not slopes: a measured critical β (each way it is
    measured), the β = 1/2 bounds and the gradient-flow identity (phases)."""
    lines = []
    crit = results.get("critical_beta")
    if isinstance(crit, dict):
        if crit.get("estimate") is not None:
            lines.append(f"critical β from {crit.get('quantity', 'the forward ratio')}: "
                         f"{_estimate_text(crit)}")  # fmt: skip
        elif crit.get("reason"):
            lines.append(f"critical β: not measured ({crit['reason']})")
        for key in ("from_gradient", "from_max_over_depth"):
            e = crit.get(key)
            if isinstance(e, dict) and e.get("estimate") is not None:
                lines.append(f"critical β from {e.get('quantity', key)}: {_estimate_text(e)}")
    bounds = results.get("stability_bounds")
    if isinstance(bounds, dict) and bounds.get("per_L"):
        fwd = [c for row in bounds["per_L"] for c in row.get("forward_sq", [])]
        grad = [row.get("gradient_consistent_with_bounds") for row in bounds["per_L"]]
        lines.append(
            f"β = 1/2 bounds: the forward bound holds at {sum(bool(c['holds']) for c in fwd)} "
            f"of {len(fwd)} (L, δ); the gradient's mean is consistent with its bounds at "
            f"{sum(g is True for g in grad)} of {len(grad)} depths"
        )
    lines += [line for line in results.get("verdict_lines") or [] if isinstance(line, str)]
    identity = results.get("gradient_flow_identity")
    if isinstance(identity, dict) and "holds" in identity:
        verdict = {True: "holds", False: "FAILS", None: "not judged"}.get(identity["holds"])
        lines.append(f"gradient-flow identity: {verdict}")
    return lines


def summary(results: dict, out: Path, limit: int = 8) -> str:
    """What a finished study prints: its headline (the study's own lines, or every fit at
    the step its figure shows, each with its interval, the theory and whether the interval
    holds it), the other fits whose interval excludes their theory (at most `limit`, then
    how many more), the self-check, and last where it wrote."""
    lines = [f"{results['study']}: results"]
    lines += [f"  {line}" for line in _verdict_lines(results)]
    fits = results.get("fits") or []
    lines += [f"  {line}" for line in rate_lines(results.get("rates") or [])]
    shown = [] if results.get("headline") else headline_fits(fits)
    primary = [f for f in shown if not f.get("secondary")]
    secondary = [f for f in shown if f.get("secondary")]
    lines += [f"  {_fit_line(f)}" for f in primary]
    if secondary:
        paired = any(r.get("part") == "depth" for r in results.get("rates") or [])
        lines.append("  one-term slopes (secondary: the law's next order bends them where it "
                     "is not negligible):" if paired else
                     "  one-term slopes along lines of the grid (secondary: the other term of "
                     "the law bends them where it is not negligible):")  # fmt: skip
        lines += [f"    {_secondary_line(f)}" for f in secondary]
    for line in results.get("headline", []) or []:
        lines.append(f"  {line}")
    outside = [
        f for f in fits
        if isinstance(f, dict) and fit_verdict(f) == "outside" and f.get("slope") is not None
        and not f.get("secondary") and not any(f is g for g in shown)
    ]  # fmt: skip
    if outside:
        more = " (other steps and lines)" if shown else ""
        lines.append(f"  {len(outside)} {'other ' if shown else ''}fit(s){more} whose 95% "
                     "interval excludes the theory (beyond its tolerance):")  # fmt: skip
    for f in outside[:limit]:
        ci = f.get(f.get("theory_inside_interval") or "ci95") or [math.nan, math.nan]
        fixed = fixed_text(f)
        text = (
            f"    {f.get('quantity')} vs {f.get('against')}" + (f" ({fixed})" if fixed else "")
            + f": {f['slope']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}], theory {f['theory']:g}"
        )  # fmt: skip
        if f.get("theory_note"):
            text += f" ({f['theory_note']})"
        lines.append(text)
    if len(outside) > limit:
        lines.append(
            f"    ... and {len(outside) - limit} more (results.json: fits, theory_verdict)"
        )
    for check in results.get("self_check") or []:
        allowance = f"; solver allowance {check['atol']:g}" if check.get("atol") else ""
        lines.append(
            f"  self-check: grid point {check['point']} recomputed {check['route']}"
            f"{_by_numpy(check.get('primitives'))} agrees to {check['difference']:.1e} "
            f"(round-off bound {check['tolerance']:g}{allowance})"
        )
    if results.get("self_check_skipped"):
        lines.append(f"  self-check: skipped ({results['self_check_skipped']})")
    if results.get("warnings"):
        lines.append(f"  {len(results['warnings'])} warning(s) in results.json")
    figures = sorted(p.name for p in Path(out).glob("*.png"))
    wrote = f"  wrote {Path(out) / 'results.json'}"
    if figures:
        wrote += f" and {len(figures)} figure(s): {', '.join(figures)}"
    lines.append(wrote)
    return "\n".join(lines)


def exploded_warning(points, shown: int = 4) -> str | None:
    """One line naming the points whose summaries (`stats.fits.summarize`: `exploded` > 0)
    left draws out as exploded (non-finite or beyond `EXPLOSION_THRESHOLD`), each with
    its worst quantity's count; None where none did. Searches the points' records to any
    depth (lists and dicts)."""
    from ..stats.fits import EXPLOSION_THRESHOLD

    found = []

    def walk(value, path, hits):
        if isinstance(value, dict):
            if isinstance(value.get("exploded"), int) and "count" in value and "mean" in value:
                if value["exploded"] > 0:
                    hits.append((value["exploded"], value["exploded"] + value["count"], path))
                return
            for k, v in value.items():
                walk(v, f"{path}.{k}" if path else str(k), hits)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]", hits)

    for i, point in enumerate(points if isinstance(points, list) else []):
        hits = []
        walk(point, "", hits)
        if hits:
            n, of, where = max(hits)
            found.append(f"point {i}: {n} of {of} draws ({where})")
    if not found:
        return None
    more = f", and {len(found) - shown} more" if len(found) > shown else ""
    return (
        f"draws exploded (non-finite or beyond {EXPLOSION_THRESHOLD:g}; left out of the "
        f"means and fits) at {len(found)} point(s): {'; '.join(found[:shown])}{more}"
    )


def _by_numpy(primitives: dict | None) -> str:
    """ ", its operations by NumPy but 12 compiled one by one" (a self-check's record)."""
    if not primitives:
        return ""
    compiled = sum(primitives["jax"].values())
    if not compiled:
        return f", all {primitives['numpy']} operations by NumPy"
    return f", {primitives['numpy']} operations by NumPy and {compiled} by JAX one by one"
