"""Records of study runs, and the docs' numbers generated from them (issue 74).

    python -m benchmarks.records capture DIR [--name NAME]
    python -m benchmarks.records render
    python -m benchmarks.records check

`capture` reads a study's `DIR/results.json` and writes `docs/records/NAME.json` (NAME by
default the study and its preset, `mean-ode-quick`): a small, stable record of the run
(its command, configuration, code and machine, headline lines, fitted slopes, and a mean
ODE's law exponents), without the per-draw arrays.

`render` rewrites every block of `docs/*.md`, `docs/studies/*.md` and
`benchmarks/RESULTS.md` between the markers (each at the start of its line)

    <!-- record: NAME[:VIEW] -->
    <!-- /record -->

with text generated from `docs/records/NAME.json` (VIEW: `headline`, the default; `rates`;
`fits`; `command`; `provenance`). `check` exits 1, one line per block, when a block
differs from what `render` would write or names a record or view that does not exist:
a page never says more than its record (`tests/test_records.py` runs it in CI).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORDS = Path("docs") / "records"
PAGES = ("docs/*.md", "docs/studies/*.md", "benchmarks/RESULTS.md")
MARKER = re.compile(
    r"^<!-- record: (?P<name>[A-Za-z0-9_.-]+)(?::(?P<view>[A-Za-z0-9_-]+))? -->"
    r"(?P<body>.*?)^<!-- /record -->",
    re.DOTALL | re.MULTILINE,
)
OPENING = re.compile(r"^<!-- record: ", re.MULTILINE)  # markers open a line
SIGNIFICANT = 9  # digits kept of every number (enough that pages round as the study did)
FIT_KEYS = ("quantity", "against", "fixed", "slope", "ci95", "theory", "theory_inside")
# where a fit has them (ci95_fit: no ci95)
FIT_EXTRA = ("ci95_fit", "secondary", "law_slope", "theory_verdict", "theory_tolerance")
RATE_KEYS = ("quantity", "part", "fixed", "model", "p", "p_ci95", "q", "q_ci95", "n_points")


# --- capture ---------------------------------------------------------------------------


def _round(value):
    """Every float to `SIGNIFICANT` digits (a stable, small record); the rest as it is."""
    if isinstance(value, float):
        if not math.isfinite(value) or value == 0.0:
            return None if not math.isfinite(value) else 0.0
        return float(f"{value:.{SIGNIFICANT}g}")
    if isinstance(value, dict):
        return {str(k): _round(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_round(v) for v in value]
    return value


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def study_command(study: str, config: dict) -> str | None:
    """`meanfield study STUDY --flag=value ...` rebuilt from a run's configuration: every
    configuration entry that is an option of the study's command line (results.json
    does not store the command itself)."""
    from meanfield.harness.options import add_common_arguments
    from meanfield.studies import STUDIES

    if study not in STUDIES:
        return None
    parser = argparse.ArgumentParser(prog=f"meanfield study {study}")
    add_common_arguments(parser, STUDIES[study], study)
    STUDIES[study].add_arguments(parser)
    by_dest = {a.dest: a for a in parser._actions if a.option_strings}
    words = [f"meanfield study {study}"]
    for key, value in config.items():
        action = by_dest.get(key)
        if action is None or value is None or key == "out":
            continue
        flag = action.option_strings[0]
        if isinstance(action, argparse.BooleanOptionalAction):
            words.append(flag if value else f"--no-{flag[2:]}")
        elif action.nargs == 0:
            if value != action.default:
                words.append(flag)
        elif isinstance(value, (list, tuple)):
            words.append(f"{flag}={','.join(str(v) for v in value)}")
        elif isinstance(value, (int, float, str)):
            words.append(f"{flag}={value}")
    return " ".join(words)


def _headline(results: dict, out: Path) -> list[str]:
    """The lines the study printed when it finished (`meanfield.harness.summary`), less its
    title and the line naming the folder it wrote."""
    from meanfield.harness.summary import summary

    lines = summary(results, out).splitlines()[1:]
    return [line[2:] if line.startswith("  ") else line for line in lines
            if not line.lstrip().startswith("wrote ")]  # fmt: skip


def make_record(folder: Path, name: str | None = None) -> tuple[str, dict]:
    """The record of the study run in `folder` (its `results.json`), and its name."""
    results = json.loads((folder / "results.json").read_text())
    config = results.get("config") or {}
    study = results["study"]
    preset = config.get("preset")
    label: str = name or (f"{study}-{preset}" if preset else str(study))
    code = {}
    config_file = folder / "config.json"
    if config_file.exists():
        code = json.loads(config_file.read_text()).get("code") or {}
    versions = results.get("versions") or {}
    timing = results.get("timing") or {}
    written = datetime.datetime.fromtimestamp(
        (folder / "results.json").stat().st_mtime, tz=datetime.UTC
    )
    changes = _git("status", "--porcelain", "--", "meanfield")
    provenance = {
        "commit": _git("rev-parse", "--short=7", "HEAD"),
        "uncommitted_changes": bool(changes) if changes is not None else None,
        "source_sha256": code.get("source_sha256"),
        "date": written.strftime("%Y-%m-%d"),
        "meanfield": versions.get("meanfield") or code.get("meanfield"),
        "jax": versions.get("jax") or code.get("jax"),
        "jaxlib": versions.get("jaxlib") or code.get("jaxlib"),
        "python": versions.get("python"),
        "device": versions.get("device") or timing.get("device"),
        "float": versions.get("float"),
        "seconds": timing.get("total_seconds"),
    }
    fits = [
        {k: f.get(k) for k in FIT_KEYS}
        | {
            k: f[k]
            for k in FIT_EXTRA
            if f.get(k) is not None and not (k == "ci95_fit" and f.get("ci95"))
        }
        for f in results.get("fits") or []
        if isinstance(f, dict) and f.get("slope") is not None
    ]
    rates = []
    for r in results.get("rates") or []:
        if not isinstance(r, dict) or "fixed" not in r:
            continue
        law = {k: r.get(k) for k in RATE_KEYS}
        law["theory"] = {
            k: {
                "value": t.get("value"),
                "inside": t.get("inside_ci95"),
                "verdict": t.get("verdict"),
            }
            for k, t in (r.get("theory") or {}).items()
            if isinstance(t, dict)
        }
        if r.get("reason"):
            law["reason"] = r["reason"]
        rates.append(law)
    record = {
        "record": label,
        "study": study,
        "command": study_command(study, config),
        "command_note": "rebuilt from the configuration (results.json stores no command)",
        "config": config,
        "provenance": provenance,
        "headline": _headline(results, folder),
        "warnings": list(results.get("warnings") or []),
        "fits": fits,
        "rates": rates,
    }
    rounded: dict = _round(record)  # type: ignore[assignment]
    return label, rounded


def dump(record: dict) -> str:
    """The record as JSON, one fit or rate a line (small, and a diff reads line by line)."""
    head = {k: v for k, v in record.items() if k not in ("fits", "rates")}
    text = json.dumps(head, indent=1, ensure_ascii=False)[:-2]
    for key in ("fits", "rates"):
        rows = [json.dumps(x, ensure_ascii=False) for x in record.get(key) or []]
        text += f',\n "{key}": [' + (("\n  " + ",\n  ".join(rows) + "\n ") if rows else "")
        text += "]"
    return text + "\n}\n"


def capture(folder: Path, name: str | None, root: Path) -> Path:
    name, record = make_record(folder, name)
    path = root / RECORDS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump(record))
    return path


# --- views -----------------------------------------------------------------------------


def _num(x, digits: int = 3) -> str:
    """A number as the pages print it, with a true minus sign."""
    if x is None:
        return "—"
    return f"{x:.{digits}f}".replace("-", "−")


def _interval(x, ci) -> str:
    return _num(x) + (f" [{_num(ci[0])}, {_num(ci[1])}]" if ci else " (no interval)")


def _verdict(verdict: str | None, tolerance: float | None = None) -> str:
    """A verdict as a table cell: inside; within the tolerance (missed, but by less than
    it); **outside** (beyond it); not judged."""
    from meanfield.stats.fits import THEORY_TOLERANCE

    near = f"within ±{tolerance or THEORY_TOLERANCE:g}"
    return {"inside": "inside", "near": near, "outside": "**outside**"}.get(
        verdict or "", "not judged"
    )


def _where(fixed: dict | None) -> str:
    return ", ".join(f"{k} = {v:g}" if isinstance(v, (int, float)) else f"{k} = {v}"
                     for k, v in (fixed or {}).items()) or "—"  # fmt: skip


def view_headline(record: dict) -> str:
    return "```text\n" + "\n".join(record.get("headline") or ["(no headline)"]) + "\n```"


def view_command(record: dict) -> str:
    return f"```bash\n{record.get('command') or 'meanfield study ' + record['study']}\n```"


def view_provenance(record: dict) -> str:
    p = record.get("provenance") or {}
    seconds = f", {p['seconds']:.0f} s" if p.get("seconds") is not None else ""
    return (
        f"{record['study']}, preset {record.get('config', {}).get('preset', '—')}: "
        f"{p.get('device')}, {p.get('float')}, jax {p.get('jax')}, meanfield "
        f"{p.get('meanfield')}{seconds}; {p.get('date')}."
    )


def view_rates(record: dict) -> str:
    """The law exponents, one row per error, part and step."""
    from meanfield.stats.fits import exponent_verdict

    rows = [
        "| error | steps | part | p [95%] | p's theory | q [95%] | q's theory |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in record.get("rates") or []:
        theory = r.get("theory") or {}
        cells = []
        for k in ("p", "q"):
            if r.get(k) is None:
                cells += ["—", "—"]
                continue
            t = theory.get(k) or {}
            value = "—" if t.get("value") is None else f"{t['value']:g}"
            verdict = exponent_verdict(t, r.get(f"{k}_ci95"))
            cells += [_interval(r[k], r.get(f"{k}_ci95")), f"{value}: {_verdict(verdict)}"]
        steps = (r.get("fixed") or {}).get("steps", "—")
        rows.append(
            f"| {r.get('quantity')} | {steps} | {r.get('part')} | " + " | ".join(cells) + " |"
        )
    return "\n".join(rows)


def view_fits(record: dict) -> str:
    """Every fitted slope: where, slope [95%], theory, verdict (and, beside a one-term
    slope of a joint law, the law's own slope over the same points)."""
    from meanfield.stats.fits import fit_verdict

    fits = record.get("fits") or []
    law = any(f.get("law_slope") is not None for f in fits)
    head = "| quantity | against | at | slope [95%] | theory | verdict |" + (
        " law's slope |" if law else ""
    )
    rows = [head, "|---" * head.count(" | ") + "|---|"]
    for f in fits:
        theory = "—" if f.get("theory") is None else _num(f["theory"], 2)
        verdict = _verdict(fit_verdict(f), f.get("theory_tolerance")) + (
            " (secondary)" if f.get("secondary") else ""
        )
        row = (
            f"| {f.get('quantity')} | {f.get('against')} | {_where(f.get('fixed'))} | "
            f"{_interval(f['slope'], f.get('ci95') or f.get('ci95_fit'))} | {theory} | {verdict} |"
        )
        if not f.get("ci95") and f.get("ci95_fit"):
            row = row.replace("] |", "] (regression's) |", 1)
        rows.append(row + (f" {_num(f.get('law_slope'))} |" if law else ""))
    return "\n".join(rows)


VIEWS: dict[str, Callable[[dict], str]] = {
    "headline": view_headline,
    "rates": view_rates,
    "fits": view_fits,
    "command": view_command,
    "provenance": view_provenance,
}


# --- render and check ------------------------------------------------------------------


class RecordError(Exception):
    """A marker names a record or view that does not exist."""


def block(root: Path, name: str, view: str | None) -> str:
    """The text `render` writes between a block's markers."""
    path = root / RECORDS / f"{name}.json"
    if not path.exists():
        raise RecordError(f"record {name}: no {RECORDS / (name + '.json')}")
    view = view or "headline"
    if view not in VIEWS:
        raise RecordError(f"record {name}: no view {view!r} (one of {', '.join(VIEWS)})")
    record = json.loads(path.read_text())
    p = record.get("provenance") or {}
    commit = p.get("commit") or "unknown commit"
    if p.get("uncommitted_changes"):
        commit += " with uncommitted changes"
    note = (
        f"<!-- generated by `python -m benchmarks.records render` from "
        f"{RECORDS.as_posix()}/{name}.json ({commit}, {p.get('date')}); do not edit -->"
    )
    return f"\n{note}\n\n{VIEWS[view](record)}\n\n"


def pages(root: Path) -> list[Path]:
    return sorted({p for pattern in PAGES for p in root.glob(pattern) if p.is_file()})


def render_text(text: str, root: Path) -> tuple[str, list[tuple[int, str, str]]]:
    """The page with every block rendered, and its problems: (line, record, message)."""
    problems: list[tuple[int, str, str]] = []

    def one(m: re.Match) -> str:
        line = text.count("\n", 0, m.start()) + 1
        label = m["name"] + (f":{m['view']}" if m["view"] else "")
        try:
            body = block(root, m["name"], m["view"])
        except RecordError as e:
            problems.append((line, label, str(e)))
            return m.group(0)
        if body != m["body"]:
            problems.append((line, label, f"record {label}: the block differs from its record"))
        return m.group(0)[: m.start("body") - m.start()] + body + "<!-- /record -->"

    rendered = MARKER.sub(one, text)
    closed = {m.start() for m in MARKER.finditer(text)}
    for m in OPENING.finditer(text):
        if m.start() not in closed:
            line = text.count("\n", 0, m.start()) + 1
            problems.append((line, "?", "a record marker without its <!-- /record --> or name"))
    return rendered, problems


def render(root: Path, *, write: bool) -> list[str]:
    """Render (`write`) or check every page; the problems, one line each."""
    out = []
    for page in pages(root):
        text = page.read_text()
        rendered, problems = render_text(text, root)
        rel = page.relative_to(root).as_posix()
        for line, _label, message in problems:
            stale = "differs" in message
            if not (write and stale):
                out.append(f"{rel}:{line}: {message}")
        if write and rendered != text:
            page.write_text(rendered)
            print(f"rendered {rel}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.records", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument(
        "--root", type=Path, default=ROOT, help="the repository (default: this one)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture", help="write docs/records/NAME.json from DIR/results.json")
    cap.add_argument("dir", type=Path, metavar="DIR")
    cap.add_argument("--name", help="the record's name (default: STUDY-PRESET)")
    sub.add_parser("render", help="rewrite every marked block from its record")
    sub.add_parser("check", help="exit 1 if a marked block differs from its record")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if args.command == "capture":
        path = capture(args.dir, args.name, root)
        print(f"wrote {path} ({path.stat().st_size} bytes)")
        return 0
    problems = render(root, write=args.command == "render")
    for line in problems:
        print(line, file=sys.stderr)
    if problems and args.command == "check":
        print("run `python -m benchmarks.records render` after `capture`", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
