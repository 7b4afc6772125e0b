"""Benchmark: every accelerator claim in one command, within 8 minutes of one H100/H200.

    PYTHONPATH=. python3 benchmarks/accelerator.py --out DIR [--only PART,...]
        [--budget-scale F] [--smoke]

A GPU is lent for minutes (one command at most 10), so each claim's benchmark runs at
the size that fits, in its own process with its own time limit; its JSON is read and one
table written, `DIR/accelerator.json` and `DIR/accelerator.md` (Markdown for
`RESULTS.md`: device, jax and jaxlib, commit, date), again after every part, so that a
run cut short keeps what it measured. A part that fails or runs out of time gets its
status ("failed: <its last line>", "timed out after N s"; what it wrote is still read)
and the run goes on. Each part writes to `DIR/PART/`, its log to `DIR/PART.log`.

Budgets (seconds; `--budget-scale F` multiplies them). A part may run for its own budget
plus whatever the parts before it left unused: the budgets of the parts after it are kept
for them, so the whole run stays within the sum.

    part          full  smoke  measured (full mode)
    device          15     60  jax.devices() in a subprocess: the device line
    depth_loop      45     60  depth loop at d 8, M 16, L 4096, batch 256: ours / chain bound
    peers           75     60  peers at the headline shape, 4 seeds: peer time / ours
    shapes_small    75     60  shapes_numpy --batched, {20,40,80}^3, 8 seeds: numpy / ours
    shapes_large    60     60  shapes_numpy --batched, L, M in {100,400}, D 100, 4 seeds
    transfer        90    150  transfer study, CompleteP depth line at paper width 64
    grid           120    150  mean-ODE paper grid, all 225 points, 8 of 64 seeds
    total          480    600

Why these sizes (goals and last GPU rows: `RESULTS.md`). `depth_loop` times the loop
`AutoLoop` takes (the fused kernels on a GPU). `peers` has 4 seeds, not the 16 of the
RESULTS rows (the peers loop over seeds in Python; torch's eager forward+backward alone
takes some 100 s at 16) and starts its forward+backward pass only within 30% of its
time. The large `shapes_numpy` grid is the 4 points of {100,400}^3 at D 100 (NumPy takes
48 s a pass over all 8, three passes). `transfer` is CompleteP's depth line at width 64
(depths 2..32, 15 rates x 6 seeds, 250 Adam steps; no self-check): its seconds, compiles
included; the study needs a width line too, here at depth 2, widths 2, 4, 64 (the 64
shares the depth line's program). `grid` has all 225 points with 8 of the 64 seeds (the
reference solves and compiles are the whole grid's, the finite networks an eighth): the
whole grid under 60 s is the goal, which a fraction taking longer already misses.

`--smoke` runs the same parts at tiny sizes on a CPU (the test suite runs it; about two
minutes on 2 cores); goals are not judged there. The parent process stays light (no JAX):
the device line comes from a subprocess.
"""

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAPER_POINTS, PAPER_SEEDS = 225, 64  # the mean-ODE paper grid, whole
DEVICE_BUDGET_S = {"full": 15.0, "smoke": 60.0}
KILL_GRACE_S = 10.0
DASH = "—"


@dataclass
class Part:
    """One claim: its process is `python3 PROGRAM... --out FOLDER ARGS...` in the
    repository root (`smoke_args` with `--smoke`; the argument `{early}` is 30% of the
    part's time limit); `extract(FOLDER)` reads what it wrote and returns `numbers`
    (finite), `result` (one line) and `met` (True, False, or None: not judged)."""

    name: str
    measured: str
    smoke_measured: str
    budget_s: float
    smoke_budget_s: float
    program: list[str]
    args: list[str]
    smoke_args: list[str]
    extract: Callable[[Path], dict]
    goal: str = DASH
    last_gpu: str = DASH
    env: dict = field(default_factory=dict)

    def command(self, folder: Path, smoke: bool, limit: float) -> list[str]:
        args = self.smoke_args if smoke else self.args
        args = [f"{0.3 * limit:.0f}" if a == "{early}" else a for a in args]
        return [sys.executable, *self.program, "--out", str(folder), *args]


def _script(name: str) -> list[str]:
    return [str(ROOT / "benchmarks" / f"{name}.py")]


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"no {path.name} written") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"bad JSON in {path.name}: {err}") from None


def _secs(s: float | None) -> str:
    if s is None or not math.isfinite(s):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def _x(r: float) -> str:  # a ratio
    return f"{r:.3g}×"


# -- the parts ----------------------------------------------------------------------------


def depth_loop_extract(folder):
    rows = _load(folder / "depth_loop.json")["rows"]
    numbers, text, method = {}, [], None
    for which, key in (("forward", "fwd"), ("forward+backward", "fwd_bwd")):
        done = [r for r in rows if r["pass"] == which and "median_s" in r]
        ours = [r for r in done if r["method"] == r.get("auto_choice")]
        if not ours:
            continue
        r, method = ours[0], ours[0]["method"]
        chain = r["limits"].get("chain")
        if not chain:
            raise ValueError("no chain bound in depth_loop.json (the clock is unknown)")
        numbers.update({f"{key}_s": r["median_s"], f"{key}_chain_s": chain})
        numbers[f"{key}_over_chain"] = r["median_s"] / chain
        line = (
            f"{which} {_secs(r['median_s'])} = {_x(r['median_s'] / chain)} chain ({_secs(chain)})"
        )
        scan = [s for s in done if s["method"] == "scan"]
        if scan and method != "scan":
            numbers[f"{key}_scan_over_ours"] = scan[0]["median_s"] / r["median_s"]
            line += f", scan {_x(numbers[f'{key}_scan_over_ours'])} slower"
        text.append(line)
    if not numbers:
        raise ValueError("no timed row of our depth loop in depth_loop.json")
    fwd, both = numbers.get("fwd_over_chain"), numbers.get("fwd_bwd_over_chain")
    met = None if fwd is None or both is None else fwd <= 3 and both <= 10
    return {"numbers": numbers, "result": f"ours ({method}): " + "; ".join(text), "met": met}


def peers_extract(folder):
    payload = _load(folder / "peers.json")
    rows = [r for r in payload["rows"] if r.get("suite") == "finite"]
    numbers, text = {}, []
    for which, key in (("forward", "fwd"), ("forward+backward", "fwd_bwd")):
        mine = [r for r in rows if r["pass"] == which]
        ours = [r for r in mine if r["impl"] == "ours" and "median_s" in r]
        if not ours:
            continue
        numbers[f"{key}_ours_s"] = ours[0]["median_s"]
        parts = []
        for r in mine:
            if r["impl"] == "ours":
                continue
            if r.get("ratio"):
                numbers[f"{key}_{r['impl']}"] = r["ratio"]["median"]
                parts.append(f"{r['impl']} {_x(r['ratio']['median'])}")
            else:
                parts.append(f"{r['impl']} {r.get('note') or 'no time'}")
        text.append(f"{which}: ours {_secs(ours[0]['median_s'])}; " + ", ".join(parts))
    skipped = {r["pass"] for r in payload.get("skipped_time_budget", [])}
    text += [f"{p} not started (time budget)" for p in sorted(skipped)]
    if not numbers:
        raise ValueError("no timed configuration in peers.json")
    cfg = payload["settings"]["config"]
    head = f"M {cfg['M'][0]}, L {cfg['L'][0]}, {cfg['seeds']} seeds × {cfg['inputs']} inputs; "
    return {"numbers": numbers, "result": head + "; ".join(text), "met": None}


def shapes_extract(folder):
    payload = _load(folder / "shapes_numpy.json")
    rows, s = payload["rows"], payload["settings"]
    if not rows:
        raise ValueError("no grid point timed in shapes_numpy.json")
    grid = "×".join("{" + ",".join(map(str, s["grid"][k])) + "}" for k in ("L", "M", "D"))
    act = rows[0]["activation"]
    tot = payload["totals"][act]
    per_point = [r["ratio"]["median"] for r in rows if r["activation"] == act]
    numbers = {"points": len(per_point), "numpy_s": tot["numpy_s"],
               "numpy_over_per_point": tot["ratio_run"], "point_ratio_min": min(per_point),
               "point_ratio_max": max(per_point)}  # fmt: skip
    text = (
        f"per-point programs {_x(tot['ratio_run'])} "
        f"({_x(min(per_point))}–{_x(max(per_point))} per point)"
    )
    batched = [b for b in payload.get("batched", []) if b["activation"] == act]
    met = None
    if batched:
        b = batched[0]
        numbers.update(numpy_over_batched=b["numpy_over_batched"], batched_s=b["batched_s"],
                       batched_compile_s=b["batched_compile_s"],
                       per_point_over_batched=b["per_point_over_batched"]["median"])  # fmt: skip
        text = (
            f"numpy/batched {_x(b['numpy_over_batched'])} (numpy {_secs(tot['numpy_s'])}, "
            f"batched {_secs(b['batched_s'])}, compile {_secs(b['batched_compile_s'])}); " + text
        )
        met = b["numpy_over_batched"] >= 100
    head = f"{grid}, {s['seeds']} seeds, {len(per_point)} points: "
    return {"numbers": numbers, "result": head + text, "met": met}


def transfer_extract(folder):
    if not (folder / "results.json").exists():
        done = len(list((folder / "points").glob("linedepth*.json")))
        if not done:
            raise ValueError("no results.json and no finished point of the depth line")
        result = f"{done} point(s) of the depth line finished, no results.json"
        return {"numbers": {"depth_points_done": done}, "result": result, "met": None}
    r = _load(folder / "results.json")
    seconds, cfg = r["timing"]["points_seconds"], r["config"]
    depth = [v for k, v in seconds.items() if k.startswith("linedepth")]
    width = [v for k, v in seconds.items() if k.startswith("linewidth")]
    compiles = r["timing"].get("compiles") or {}
    numbers = {"depth_line_s": sum(depth), "depth_points": len(depth),
               "width_line_s": sum(width), "study_s": r["timing"]["total_seconds"],
               "compile_s": compiles.get("seconds", 0.0),
               "programs": compiles.get("programs", 0)}  # fmt: skip
    depths = cfg["depths"]
    result = (
        f"{','.join(cfg['parametrisations'])} depth line at width {cfg['width']} "
        f"(L {depths[0]}–{depths[-1]}, {len(cfg['lrs'])} rates × {cfg['seeds']} seeds, "
        f"{cfg['steps']} steps): {len(depth)} points in {_secs(sum(depth))}; the study "
        f"{_secs(numbers['study_s'])} with its width line ({_secs(sum(width))}), "
        f"compiles {_secs(numbers['compile_s'])} (programs {numbers['programs']})"
    )
    return {"numbers": numbers, "result": result, "met": None}


def grid_verdict(wall_s: float, preset: str, points: int, seeds: int) -> bool | None:
    """The goal is the whole paper grid under 60 s: a fraction of it that takes longer
    already misses it; one that takes less cannot tell (another preset: not judged)."""
    if preset != "paper":
        return None
    if points >= PAPER_POINTS and seeds >= PAPER_SEEDS:
        return wall_s < 60
    return False if wall_s >= 60 else None


def grid_extract(folder):
    payload = _load(folder / "grid.json")
    ours, g = payload["ours"], payload["grid"]
    keys = ("wall_s", "compile_s", "compile_wait_s", "reference_s", "finite_s", "fit_s")
    numbers = {k: ours[k] for k in keys if ours.get(k) is not None}
    numbers.update(points=g["points"], seeds=g["seeds"], programs=ours["programs"])
    share = ""
    if payload["preset"] == "paper":
        whole = g["seeds"] >= PAPER_SEEDS and g["points"] >= PAPER_POINTS
        share = " (the whole grid)" if whole else f" (of {PAPER_POINTS} points × {PAPER_SEEDS})"
    result = (
        f"preset {payload['preset']}, {g['points']} points × {g['seeds']} seeds{share}: "
        f"wall {_secs(ours['wall_s'])}; compile {_secs(ours['compile_s'])} summed over "
        f"threads (programs {ours['programs']}, waited {_secs(ours.get('compile_wait_s'))}), "
        f"reference {_secs(ours.get('reference_s'))}, finite {_secs(ours.get('finite_s'))}"
    )
    met = grid_verdict(ours["wall_s"], payload["preset"], g["points"], g["seeds"])
    return {"numbers": numbers, "result": result, "met": met}


MEM = {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".95"}
QUICK_REPS = ["--min-reps", "1", "--max-reps", "2", "--target-seconds", "0.05"]
SMOKE_SHAPES = ["--seeds", "2", "--steps", "2", "--batched", "--min-reps", "1", "--max-reps", "1"]
TRANSFER = ["--parametrisations", "completep", "--width-parametrisations", "completep",
            "--no-self-check", "--no-progress", "--overwrite"]  # fmt: skip
PARTS = [
    Part("depth_loop", "depth loop at d 8, M 16, L 4096, batch 256: ours / chain bound",
         "depth loop at d 8, M 1, L 64, batch 64", 45, 60, _script("depth_loop"),
         ["--shapes", "headline", "--methods", "scan,pallas", "--target-seconds", "0.5"],
         ["--shapes", "quick", "--M", "1", "--L", "64", "--batch", "64", "--methods",
          "scan,pallas", *QUICK_REPS], depth_loop_extract,
         goal="≤ 3× chain forward, ≤ 10× forward+backward",
         last_gpu="10.2× and 51× (H100, 2026-11-23)"),
    Part("peers", "peers at the headline shape, 4 seeds: peer time / ours",
         "peers at M 4, L 16, 2 seeds × 8 inputs", 75, 60, _script("peers"),
         ["--suites", "finite", "--preset", "full", "--L", "4096", "--M", "16", "--seeds", "4",
          "--inputs", "256", "--min-reps", "3", "--max-reps", "3", "--target-seconds", "0.5",
          "--time-budget", "{early}"],
         ["--suites", "finite", "--preset", "quick", "--L", "16", "--M", "4", "--seeds", "2",
          "--inputs", "8", *QUICK_REPS, "--time-budget", "{early}"], peers_extract,
         last_gpu="16 seeds: forward jax-scan-loop 94.5×, diffrax-euler 19.0×, torch-eager "
         "1056×; forward+backward 43.9×, 28.2×, 698× (H100, 2026-11-23)"),
    Part("shapes_small", "shapes_numpy --batched, {20,40,80}^3, 8 seeds: numpy / ours",
         "shapes_numpy --batched, L {2,4}, M 2, D 2", 75, 60, _script("shapes_numpy"),
         ["--L", "20,40,80", "--M", "20,40,80", "--D", "20,40,80", "--seeds", "8",
          "--batched", "--min-reps", "2", "--max-reps", "2"],
         ["--L", "2,4", "--M", "2", "--D", "2", *SMOKE_SHAPES], shapes_extract,
         goal="numpy/batched ≥ 100×",
         last_gpu="per-point 33.9× (H200), 14.3× (H100); batched not measured"),
    Part("shapes_large", "shapes_numpy --batched, L, M in {100,400}, D 100, 4 seeds",
         "shapes_numpy --batched, L 6, M 4, D {2,4}", 60, 60, _script("shapes_numpy"),
         ["--L", "100,400", "--M", "100,400", "--D", "100", "--seeds", "4", "--batched",
          "--min-reps", "1", "--max-reps", "1"],
         ["--L", "6", "--M", "4", "--D", "2,4", *SMOKE_SHAPES], shapes_extract,
         goal="numpy/batched ≥ 100×",
         last_gpu="{100,400}^3 per-point 154× (H200), 86.3× (H100); batched not measured"),
    Part("transfer", "transfer study, CompleteP depth line at paper width 64",
         "transfer study, depth line at width 4", 90, 150,
         ["-m", "meanfield", "--compile-cache", "off", "study", "transfer"],
         ["--preset", "paper", "--widths", "2,4,64", "--depth", "2", *TRANSFER],
         ["--depths", "1,2,3", "--width", "4", "--widths", "2,4,6", "--depth", "1", "--lrs",
          "1e-3,4e-3,1.6e-2", "--steps", "2", "--seeds", "2", "--batch", "1", "--context",
          "4", "--base-width", "4", "--base-depth", "1", *TRANSFER], transfer_extract,
         last_gpu="not measured on a GPU", env=MEM),
    Part("grid", "mean-ODE paper grid, all 225 points, 8 of 64 seeds",
         "mean-ODE quick preset, L {4,8} × M {1,4}, 2 seeds", 120, 150, _script("grid"),
         ["--preset", "paper", "--skip-natural", "--study-args", "--seeds 8"],
         ["--preset", "quick", "--skip-natural", "--study-args", "--L 4,8 --M 1,4 --L-for-M "
          "16 --fit-M-max 4 --seeds 2 --order 4 --compile-workers 1 --no-self-check"],
         grid_extract, goal="whole grid < 60 s", last_gpu="whole grid 171–242 s (H100)",
         env=MEM),
]  # fmt: skip


def budget_table(parts=PARTS) -> str:
    """The budgets as the module docstring states them (a test keeps the two equal)."""
    lines = [f"    {'part':<12} {'full':>5} {'smoke':>6}  measured (full mode)"]
    rows = [("device", DEVICE_BUDGET_S["full"], DEVICE_BUDGET_S["smoke"],
             "jax.devices() in a subprocess: the device line")]  # fmt: skip
    rows += [(p.name, p.budget_s, p.smoke_budget_s, p.measured) for p in parts]
    for name, full, smoke, what in rows:
        lines.append(f"    {name:<12} {full:>5.0f} {smoke:>6.0f}  {what}")
    total = [sum(r[i] for r in rows) for i in (1, 2)]
    lines.append(f"    {'total':<12} {total[0]:>5.0f} {total[1]:>6.0f}")
    return "\n".join(lines)


# -- running a part -----------------------------------------------------------------------


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the part's process group (the studies stop cleanly on it), then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=KILL_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue


def run_command(argv, log: Path, limit: float, env: dict) -> tuple[int | None, bool]:
    """Run `argv` in the repository root, output to `log`; (exit status, timed out)."""
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
        try:
            return proc.wait(timeout=max(limit, 0.1)), False
        except subprocess.TimeoutExpired:
            _stop(proc)
            return proc.returncode, True
        except BaseException:
            _stop(proc)
            raise


def _last_line(log: Path) -> str:
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines()]
    lines = [ln for ln in lines if ln and "cpu_aot" not in ln]
    return (lines[-1] if lines else "no output")[:200]


def _env(extra: dict) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    for key, value in extra.items():
        env.setdefault(key, value)
    return env


def run_part(part: Part, folder: Path, limit: float, smoke: bool) -> dict:
    """The part's row: its numbers (also from a run that failed or ran out of time, as
    far as its script wrote them) and its status."""
    argv, log = part.command(folder, smoke, limit), folder.with_name(f"{part.name}.log")
    row = {**_pending(part, smoke, "running"), "limit_s": limit, "command": argv}
    t0, started = time.perf_counter(), time.time() - 1
    code, timed_out = run_command(argv, log, limit, _env(part.env))
    row["wall_s"] = time.perf_counter() - t0
    try:  # what an earlier run left in the folder is not this run's result
        if not any(f.stat().st_mtime >= started for f in folder.rglob("*") if f.is_file()):
            raise ValueError(f"nothing written in {folder.name}/ by this run")
        got = part.extract(folder)
        bad_numbers = [k for k, v in got["numbers"].items() if not math.isfinite(v)]
        if bad_numbers:
            raise ValueError(f"numbers not finite: {bad_numbers}")
        problem = None
    except Exception as err:  # a part's bad output is its row's status, not the end
        got, problem = {"numbers": {}, "result": "-", "met": None}, str(err).splitlines()[0]
    row.update(numbers=got["numbers"], result=got["result"])
    row["met"] = "— (smoke)" if smoke else {True: "met", False: "not met", None: DASH}[got["met"]]
    if timed_out:
        row["status"] = f"timed out after {limit:.0f} s"
    elif code != 0:
        row["status"] = f"failed: {_last_line(log)}"
    elif problem:
        row["status"] = f"failed: {problem}"
    else:
        row["status"] = "ok"
    return row


# -- the run ------------------------------------------------------------------------------

PROBE = (
    "import json, platform, sys, jax, jaxlib\n"
    "d = jax.devices()\n"
    "json.dump({'backend': jax.default_backend(), 'device_kind': d[0].device_kind,\n"
    "    'device_count': len(d), 'jax': jax.__version__, 'jaxlib': jaxlib.__version__,\n"
    "    'python': platform.python_version()}, open(sys.argv[1], 'w'))\n"
)


def probe_device(out: Path, limit: float) -> dict:
    argv = [sys.executable, "-c", PROBE, str(out / "device.json")]
    _, timed_out = run_command(argv, out / "device.log", limit, _env({}))
    try:
        return _load(out / "device.json")
    except ValueError:
        why = f"timed out after {limit:.0f} s" if timed_out else _last_line(out / "device.log")
        return {"device_kind": f"unknown (device probe: {why})"}


def _git(*args) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def environment() -> dict:
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    names = [ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")]
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "git_commit": _git("rev-parse", "--short", "HEAD"),
        "uncommitted_changes": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "cpu": names[0] if names else platform.machine(), "cpu_count": os.cpu_count(),
        "argv": sys.argv,
    }  # fmt: skip


def markdown(payload: dict) -> str:
    env, dev = payload["environment"], payload["device"]
    commit = env.get("git_commit") or "unknown"
    if env.get("uncommitted_changes"):
        commit += " with uncommitted changes"
    count = dev.get("device_count")
    head = [
        f"### Accelerator claims in one command (`benchmarks/accelerator.py`), {env['date'][:10]}",
        "",
        f"Device: {dev.get('device_kind')} ({dev.get('backend', '?')}, {count or '?'} "
        f"device{'s' if count != 1 else ''}; host {env['cpu']}, {env['cpu_count']} cores), "
        f"jax {dev.get('jax', '?')}, jaxlib {dev.get('jaxlib', '?')}, Python "
        f"{dev.get('python', '?')}, commit {commit}, {env['date']}. Mode {payload['mode']}, "
        f"budgets × {payload['budget_scale']:g} ({payload['budget_total_s']:.0f} s in all); "
        f"{'the run took' if payload['complete'] else 'running, so far'} "
        f"{payload['seconds']:.0f} s.",
        "",
        "| part | measured | result | goal | met | last GPU row (RESULTS) | wall | status |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in payload["rows"]:
        wall = f"{r['wall_s']:.0f} s" if r.get("wall_s") is not None else "-"
        cells = [r["part"], r["measured"], r.get("result", "-"), r["goal"], r.get("met", "-"),
                 r["last_gpu"], wall, r["status"]]  # fmt: skip
        head.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    said = f"Command: `{payload['command']}`; e" if payload["command"] else "E"
    head += ["", said + "ach part's (its output in `OUT/PART`):", ""]
    for r in payload["rows"]:
        if r.get("command"):
            argv = ["python3" if a == sys.executable else a for a in r["command"]]
            argv = [a.replace(payload["out"], "OUT").replace(f"{ROOT}/", "") for a in argv]
            head.append(f"- `{r['part']}`: `{shlex.join(argv)}`")
    return "\n".join(head) + "\n"


def write(out: Path, payload: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, body in (("accelerator.json", json.dumps(payload, indent=1)),
                       ("accelerator.md", markdown(payload))):  # fmt: skip
        aside = out / f".{name}.partial"
        aside.write_text(body if body.endswith("\n") else body + "\n")
        os.replace(aside, out / name)


def _pending(part: Part, smoke: bool, status: str) -> dict:
    return {"part": part.name, "measured": part.smoke_measured if smoke else part.measured,
            "goal": part.goal, "last_gpu": part.last_gpu, "status": status}  # fmt: skip


def run(parts, out, *, smoke=False, scale=1.0, only=None, probe=True, command="", say=print):
    """Run the parts in order (those in `only`, if given) and write the table after each.
    A part's limit: the time left of the sum of the budgets, less the budgets of the parts
    after it."""
    out = Path(out).resolve()
    mode = "smoke" if smoke else "full"
    chosen = [p for p in parts if only is None or p.name in only]
    budget = {p.name: scale * (p.smoke_budget_s if smoke else p.budget_s) for p in chosen}
    device_s = scale * DEVICE_BUDGET_S[mode] if probe else 0.0
    total = device_s + sum(budget.values())
    payload = {
        "benchmark": "accelerator", "mode": mode, "budget_scale": scale,
        "budget_total_s": total, "environment": environment(),
        "device": {"device_kind": "not probed"}, "out": str(out),
        "command": command,
        "rows": [_pending(p, smoke, "pending" if p.name in budget else "skipped: not in --only")
                 for p in parts],
        "complete": False, "seconds": 0.0,
    }  # fmt: skip
    t0 = time.perf_counter()
    write(out, payload)
    if probe:
        payload["device"] = probe_device(out, total - sum(budget.values()))
        say(f"accelerator: device {payload['device'].get('device_kind')}")
    for i, part in enumerate(parts):
        if part.name not in budget:
            continue
        later = sum(budget[p.name] for p in parts[i + 1 :] if p.name in budget)
        limit = total - (time.perf_counter() - t0) - later
        if limit < 0.5:
            row = _pending(part, smoke, f"skipped: {limit:.0f} s left of its budget")
        else:
            payload["rows"][i]["status"] = f"running (limit {limit:.0f} s)"
            write(out, payload)
            try:
                row = run_part(part, out / part.name, limit, smoke)
            except BaseException:  # interrupted: the table says so before the run ends
                payload["rows"][i]["status"] = "interrupted"
                payload["seconds"] = time.perf_counter() - t0
                write(out, payload)
                raise
        payload["rows"][i] = row
        payload["seconds"] = time.perf_counter() - t0
        write(out, payload)
        say(f"accelerator: {part.name} {row['status']} in {row.get('wall_s', 0):.0f} s: "
            f"{row.get('result', '-')}")  # fmt: skip
    payload["complete"] = True
    payload["seconds"] = time.perf_counter() - t0
    write(out, payload)
    return payload


def _terminated(signum, frame):
    raise SystemExit(128 + signum)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="budgets in seconds:\n" + budget_table(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--out", default="results/bench/accelerator", help="output folder (default: %(default)s)"
    )
    parser.add_argument("--only", help="comma-separated parts: " + ",".join(p.name for p in PARTS))
    parser.add_argument("--budget-scale", type=float, default=1.0, help="multiply every budget")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for a CPU (the tests)")
    args = parser.parse_args(argv)
    only = None
    if args.only is not None:
        only = {p.strip() for p in args.only.split(",") if p.strip()}
        unknown = sorted(only - {p.name for p in PARTS})
        if unknown or not only:
            parser.error(f"--only: unknown parts {unknown}; use {[p.name for p in PARTS]}")
    if not (math.isfinite(args.budget_scale) and args.budget_scale > 0):
        parser.error(f"--budget-scale: a positive number, got {args.budget_scale}")
    signal.signal(signal.SIGTERM, _terminated)
    command = shlex.join(["python3", "benchmarks/accelerator.py", *(argv or sys.argv[1:])])
    payload = run(PARTS, args.out, smoke=args.smoke, scale=args.budget_scale, only=only,
                  command=command)  # fmt: skip
    print()
    print(markdown(payload))
    print(f"wrote {Path(args.out) / 'accelerator.json'} and {Path(args.out) / 'accelerator.md'}")


if __name__ == "__main__":
    main()
