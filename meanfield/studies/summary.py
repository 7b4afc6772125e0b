"""The headline a study prints when it finishes (`summary`): the verdicts, the fitted
rates with their intervals and what each fit left out, and where the results were
written; `headline_fits` picks the fits it shows."""

import math
from pathlib import Path

from ..stats.fits import fixed_text, theory_inside


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
    """One printed fit: what against what, where, slope [interval], theory and whether the
    interval holds it, what it left out."""
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
        if f.get("theory_inside") is True:
            text += " (inside)"
        elif f.get("theory_inside") is False:
            text += " (OUTSIDE" + (f": {f['theory_note']}" if f.get("theory_note") else "") + ")"
    return text + _left_out(f)


def _estimate_text(e: dict) -> str:
    ci = e.get("ci95")
    text = f"{e['estimate']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")
    if e.get("theory") is not None:
        text += f", theory {e['theory']:g}"
        if ci:
            text += " (inside)" if theory_inside(ci, e["theory"]) else " (OUTSIDE)"
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


def headline_fits(fits: list) -> list[dict]:
    """The fits a study's figure shows: where fits carry a GD step, those at the last one
    (the figure's), every quantity; otherwise all of them."""
    fits = [f for f in fits if isinstance(f, dict) and f.get("slope") is not None]
    steps = [f["fixed"]["steps"] for f in fits if "steps" in (f.get("fixed") or {})]
    if not steps:
        return fits
    last = max(steps)
    return [f for f in fits if (f.get("fixed") or {}).get("steps", last) == last]


def summary(results: dict, out: Path, limit: int = 8) -> str:
    """What a finished study prints: its headline (the study's own lines, or every fit at
    the step its figure shows, each with its interval, the theory and whether the interval
    holds it), the other fits whose interval excludes their theory (at most `limit`, then
    how many more), the self-check, and last where it wrote."""
    lines = [f"{results['study']}: results"]
    lines += [f"  {line}" for line in _verdict_lines(results)]
    fits = results.get("fits") or []
    shown = [] if results.get("headline") else headline_fits(fits)
    lines += [f"  {_fit_line(f)}" for f in shown]
    for line in results.get("headline", []) or []:
        lines.append(f"  {line}")
    outside = [
        f for f in fits
        if isinstance(f, dict) and f.get("theory_inside") is False and f.get("slope") is not None
        and not any(f is g for g in shown)
    ]  # fmt: skip
    if outside:
        more = " (other steps and lines)" if shown else ""
        lines.append(f"  {len(outside)} {'other ' if shown else ''}fit(s){more} whose 95% "
                     "interval excludes the theory:")  # fmt: skip
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
        lines.append(f"    ... and {len(outside) - limit} more (results.json: fits, theory_inside)")
    for check in results.get("self_check") or []:
        allowance = f"; solver allowance {check['atol']:g}" if check.get("atol") else ""
        lines.append(
            f"  self-check: grid point {check['point']} recomputed {check['route']} agrees "
            f"to {check['difference']:.1e} (round-off bound {check['tolerance']:g}{allowance})"
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
