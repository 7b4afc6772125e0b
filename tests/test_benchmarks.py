"""The benchmark scripts run, and their experimental kernels compute the recursion.

Each script runs in its own process, as a user runs it: a benchmark sets global JAX
options (precision, compile cache) that must not leak into the rest of the suite
(importing one sets nothing: the lowering check below imports `kernel_variants`).
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from conftest import HANG_GUARD_S

from meanfield.engine import kernels as fused

ROOT = Path(__file__).resolve().parents[1]


def _run(name, tmp_path, *args):
    script = ROOT / "benchmarks" / f"{name}.py"
    args = ["--out", str(tmp_path), "--min-reps", "1", "--max-reps", "1", *args]
    done = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / f"{name}.txt").read_text().strip()
    return json.loads((tmp_path / f"{name}.json").read_text())


def test_peers_compute_the_same_networks(tmp_path):
    payload = _run(
        "peers", tmp_path, "--preset", "quick", "--L", "8", "--M", "4", "--seeds", "2",
        "--inputs", "4", "--sde-steps", "16",
    )  # fmt: skip
    finite = [r for r in payload["rows"] if r["suite"] == "finite" and "median_s" in r]
    impls = {r["impl"] for r in finite}
    assert {"ours", "jax-scan-loop", "diffrax-euler"} <= impls
    assert {r["pass"] for r in finite} == {"forward", "forward+backward"}
    for r in finite:  # the same weights and inputs: outputs (and gradients) agree
        assert r["max_diff"] < 1e-6, r
        if r["impl"] != "ours":
            ratio = r["ratio"]
            assert 0 < ratio["q25"] <= ratio["median"] <= ratio["q75"], r
    sde = [r for r in payload["rows"] if r["suite"] == "sde"]
    assert {r["impl"] for r in sde} == {"ours", "diffrax-vbt-loop"}
    assert all(r["median_s"] > 0 for r in sde)
    assert payload["complete"] and payload["skipped_time_budget"] == []


def test_peers_time_budget_skips_and_lists_configurations(tmp_path):
    """A spent budget starts nothing more: every configuration and pass is listed as
    skipped, and the report is still written whole."""
    payload = _run(
        "peers", tmp_path, "--preset", "quick", "--L", "8,16", "--M", "4", "--seeds", "2",
        "--inputs", "4", "--sde-steps", "16", "--time-budget", "0",
    )  # fmt: skip
    assert payload["rows"] == [] and payload["complete"]
    skipped = {(r["suite"], r["L"], r["pass"]) for r in payload["skipped_time_budget"]}
    assert skipped == {
        ("finite", 8, "forward"),
        ("finite", 8, "forward+backward"),
        ("finite", 16, "forward"),
        ("finite", 16, "forward+backward"),
        ("sde", 16, "forward"),
    }
    assert "not started within the time budget: 5" in (tmp_path / "peers.txt").read_text()


def test_kernel_variants_agree_with_the_scan(tmp_path):
    payload = _run("kernel_variants", tmp_path, "--shape", "4,4,8,32", "--layers-per-step", "4")
    rows = [r for r in payload["rows"] if r["variant"] != "scan"]
    assert {r["variant"] for r in rows} == {"rows", "lanes", "lanes_exp", "dot"}
    assert {r["weight_loads"] for r in rows} == {"inline", "hoisted", "prefetch"}
    assert len(rows) == 12
    for r in rows:
        assert not r.get("note"), r
        assert r["max_diff"] < 1e-5, r  # float32; the recursion itself is O(1)


def test_kernel_variants_lower_to_triton_for_a_gpu(lower_for_cuda):
    """Every formulation and load placement of the sweep lowers for an H100 from this
    CPU machine (what the GPU run would otherwise find out first)."""
    from benchmarks import kernel_variants

    n, d, M, L = 64, 8, 16, 16
    h0 = jax.ShapeDtypeStruct((n, d), jnp.float32)
    w = jax.ShapeDtypeStruct((L, M, d), jnp.float32)
    for name, variant in kernel_variants.VARIANTS.items():
        for loads in fused.WEIGHT_LOADS:
            text = lower_for_cuda(
                lambda h, u, v, f=variant, ld=loads: f(h, u, v, 0.1, 16, 4, 4, ld, False),
                h0,
                w,
                w,
            )
            assert text.count("xla.gpu.triton") == 1, (name, loads)


def test_grid_benchmark_splits_the_study_and_times_the_natural_way(tmp_path, capsys):
    """`grid.py` on a tiny grid: the study's split and settings reach the JSON, and the
    natural part, timed on 3 of its 6 configurations, gives every other configuration
    the times of its nearest timed neighbour."""
    study = (
        "--L 4,8 --M 1,4 --L-for-M 16 --fit-M-max 4 --seeds 2 --order 12 "
        "--compile-workers 1 --unroll 2 --seed-batch-units 64"
    )
    script = ROOT / "benchmarks" / "grid.py"
    args = ["--out", str(tmp_path), "--preset", "quick", "--natural-seeds", "1"]
    args += ["--natural-configs", "3", "--warm-runs", "2", "--study-args", study]
    done = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=HANG_GUARD_S
    )
    assert done.returncode == 0, done.stderr[-2000:]
    r = json.loads((tmp_path / "grid.json").read_text())
    ours = r["ours"]
    assert ours["unroll"] == 2 and ours["units_per_batch"] == 64
    assert ours["depth_loop"] == "auto" and set(ours["depth_loop_by_program"].values()) <= {
        "scan",
        "pallas",
    }
    assert r["grid"]["points"] == 6 * 2  # (L, M) pairs x steps 0..1
    for key in ("compile_s", "reference_s", "finite_s", "euler_s", "euler_compile_s", "fit_s"):
        assert 0 < ours[key] < ours["wall_s"], key
    # its two depths in one program (on a CPU the Euler part's depths are padded into
    # shared programs, as the grid's: `merged_boxes`), compiled ahead
    assert ours["euler_programs"] == 1
    # the parts do not overlap in the main thread: with the wait for compiles they and
    # the rest ("other") make up the wall time
    assert ours["compile_wait_s"] >= 0 and ours["other_s"] >= 0
    # two more runs on the filled compilation cache: each part's median over them
    runs, warm = r["ours_warm_cache_runs"], r["ours_warm_cache"]
    assert len(runs) == 2 and r["ours_warm_cache_spread"]["runs"] == 2
    for key in ("wall_s", "compile_s", "finite_s", "reference_s"):
        values = [run[key] for run in runs]
        assert warm[key] == pytest.approx(sum(values) / 2), key
        assert r["ours_warm_cache_spread"][key]["max"] == max(values), key
    assert warm["programs"] == ours["programs"]
    assert "medians of 2 runs" in (tmp_path / "grid.txt").read_text()
    rows = r["natural"]["rows"]
    assert [(row["L"], row["M"]) for row in rows] == [
        (4, 1),
        (4, 4),
        (8, 1),
        (8, 4),
        (16, 1),
        (16, 4),
    ]
    timed = {(row["L"], row["M"]) for row in rows if row["timed"]}
    # by L*M: (4, 1) 4, (8, 1) 8, (4, 4) 16, (16, 1) 16, (8, 4) 32, (16, 4) 64; the
    # first, the last, and index round(2.5) = 2 between
    assert timed == {(4, 1), (4, 4), (16, 4)}
    assert r["natural"]["configs_skipped_budget"] == 0
    by = {(row["L"], row["M"]): row for row in rows}
    assert by[(8, 1)]["times_of"] == [4, 1] and by[(8, 4)]["times_of"] == [4, 4]
    assert by[(8, 1)]["per_seed_s"] == by[(4, 1)]["per_seed_s"]
    assert by[(16, 4)]["per_seed_s"] != by[(4, 1)]["per_seed_s"]
    assert r["natural"]["total_s"] == sum(row["total_s"] for row in rows)
    total = r["natural"]["total_s"]
    assert r["ratio_finite"] == pytest.approx(total / (ours["compile_s"] + ours["finite_s"]))
    finite_wall = ours["compile_wait_s"] + ours["finite_s"]
    assert r["ratio_finite_wall"] == pytest.approx(total / finite_wall)
    assert "3 of 6 configurations timed" in r["natural"]["extrapolated"]
    # refusals: the script's `main` in this process (it refuses while parsing its options,
    # before it sets any JAX option or runs a study; a process each cost 2 s of start-up)
    from benchmarks.grid import main as grid_main

    for option, value, message in [
        ("--natural-configs", "1", "--natural-configs: must be >= 2, got 1"),
        ("--warm-runs", "0", "--warm-runs: must be >= 1, got 0"),
    ]:
        capsys.readouterr()
        with pytest.raises(SystemExit) as bad:
            grid_main(["--out", str(tmp_path / "bad"), option, value])
        assert bad.value.code == 2 and message in capsys.readouterr().err, option
        assert not (tmp_path / "bad").exists()  # refused before any study ran


def test_grid_warm_summary_takes_medians_and_spreads():
    """Three runs with wall 1, 3, 2 s: median 2, quartiles 1.5 and 2.5 (numpy's linear
    interpolation); a time missing from a run is summarised over the others; the other
    fields are the first run's."""
    from benchmarks.grid import warm_summary

    runs = [
        {"wall_s": 1.0, "finite_s": None, "programs": 5},
        {"wall_s": 3.0, "finite_s": 4.0, "programs": 5},
        {"wall_s": 2.0, "finite_s": 6.0, "programs": 5},
    ]
    row, spread = warm_summary(runs)
    assert row["wall_s"] == 2.0 and row["finite_s"] == 5.0 and row["programs"] == 5
    assert spread["runs"] == 3
    assert spread["wall_s"] == {"min": 1.0, "q25": 1.5, "q75": 2.5, "max": 3.0}
    assert spread["finite_s"]["min"] == 4.0 and spread["finite_s"]["max"] == 6.0
    assert "fit_s" not in spread and runs[0]["wall_s"] == 1.0  # the runs are left alone
    with pytest.raises(ValueError, match="runs"):
        warm_summary([])


def test_grid_natural_part_spreads_its_timing_and_keeps_a_budget():
    """The natural configurations are timed so that any prefix covers the range, and a
    spent budget times only the smallest and the largest."""
    from benchmarks.grid import natural, spread_order

    # positions 1/2, 1/4, 3/4, 1/8, 5/8, 3/8, 7/8 of the range (base-2 radical inverses)
    assert spread_order(list(range(9))) == [0, 8, 4, 2, 6, 1, 5, 3, 7]
    for n in range(1, 40):
        order = spread_order(list(range(n)))
        assert sorted(order) == list(range(n)), n
        assert order[:2] == ([0, n - 1] if n > 1 else [0])
    results = {
        "config": {
            "activation": "tanh", "init": "non-centred", "d": 2, "inputs": 2,
            "sigma_u": 1.0, "sigma_v": 1.0, "sigma_xi": 0.0, "lr": 0.1, "seed": 0,
            "seeds": 4, "steps": 1, "L": [2, 4, 8], "M": [1, 2], "L_for_M": 16, "fit_M_max": 2,
        }
    }  # fmt: skip
    nat = natural(results, 1, None, budget=0.0)
    timed = {(r["L"], r["M"]) for r in nat["rows"] if r["timed"]}
    assert timed == {(2, 1), (16, 2)} and nat["configs_timed"] == 2
    assert nat["configs_skipped_budget"] == 8 - 2  # 3 x 2 grid and the M-line at L 16
    assert "not started within the time budget" in nat["extrapolated"]
    for r in nat["rows"]:
        assert r["total_s"] == r["compile_s"] + 4 * r["per_seed_s"] > 0


# ---- the arithmetic behind the reported numbers, at hand-computed values ----


def test_ratios_are_paired_by_round():
    """Rounds (2, 1), (4, 1), (6, 2): per-round ratios 2, 4, 3, median 3 (a ratio of the
    medians would say 4)."""
    from benchmarks.timing import ratio_summary

    r = ratio_summary([2.0, 4.0, 6.0], [1.0, 1.0, 2.0])
    assert r == {"median": 3.0, "q25": 2.5, "q75": 3.5, "min": 2.0, "max": 4.0}


def test_timing_summary_and_interleaving():
    from benchmarks.timing import Timing, interleaved, time_jax

    s = Timing(compile_s=0.5, warmup_s=9.0, times=[3.0, 1.0, 2.0, 10.0]).summary()
    assert (s["median_s"], s["q25_s"], s["q75_s"]) == (2.5, 1.75, 4.75)
    assert (s["min_s"], s["max_s"], s["rel_iqr"], s["reps"]) == (1.0, 10.0, 3.0 / 2.5, 4)
    order = []
    out = interleaved(
        {"a": lambda: order.append("a"), "b": lambda: order.append("b")},
        min_rounds=3,
        max_rounds=3,
    )
    assert order == ["a", "b"] * 4  # one warm-up each, then 3 rounds, a before b in each
    assert [len(t.times) for t in out.values()] == [3, 3]
    t = time_jax(jax.jit(lambda x: jnp.sin(x) @ x), jnp.ones((64, 64)), min_reps=2, max_reps=2)
    assert t.compile_s > 0 and len(t.times) == 2  # compiled ahead, not in the warm-up


def test_depth_loop_counts_and_bounds():
    """The 2LP layer h ← h + α Σ_j v_j ρ(u_j·h) per input: forward 2dM (the M dot
    products) + M (ρ) + 2dM (Σ_j v_j ρ_j) + 2d (scale, add); the adjoint layer and the
    two weight gradients 8dM + 2M + 2d. d 2, M 3, L 5, n 7: 35·31 = 1085 and 35·58."""
    from benchmarks import hardware
    from benchmarks.depth_loop import byte_count, flop_count

    assert flop_count(2, 3, 5, 7, "forward") == 1085
    assert flop_count(2, 3, 5, 7, "forward+backward") == 1085 + 2030
    # u and v read once (2LMd), inputs read and outputs written (2nd); twice the weights
    # (read, gradients written) with the backward pass
    assert byte_count(2, 3, 5, 7, "forward", 4) == 4 * (60 + 28)
    assert byte_count(2, 3, 5, 7, "forward+backward", 8) == 8 * (120 + 28)
    # d 8, M 16: u·h 1 + 3, tanh 1, sum over units 1 + 4, update 1
    assert hardware.chain_ops_forward(8, 16, "tanh") == 11
    assert hardware.chain_ops_forward(8, 16, "identity") == 10
    assert hardware.chain_ops_backward(8, 16) == 11
    fig = {"flops": 1e12, "bandwidth": 1e12, "clock_hz": 1e9, "fma_cycles": 4}
    lim = hardware.limits(2e9, 1e9, 10, 100, fig)
    assert (lim["compute"], lim["memory"], lim["chain"]) == (2e-3, 1e-3, 4e-6)
    assert (lim["bound"], lim["bound_s"]) == ("compute", 2e-3)  # the largest applies


def test_datasheet_names_one_card_each():
    from benchmarks.hardware import datasheet

    assert datasheet("NVIDIA H100 80GB HBM3")["bandwidth"] == 3.35e12
    assert datasheet("NVIDIA H100 PCIe")["bandwidth"] == 2.0e12
    assert datasheet("NVIDIA H200")["bandwidth"] == 4.8e12
    for other in ("NVIDIA H100 NVL", "NVIDIA GH200 480GB", "NVIDIA A100-SXM4-40GB", "cpu"):
        assert datasheet(other) is None, other


@pytest.fixture(scope="module")
def depth_loop_readme(tmp_path_factory):
    """The README's CPU command (every method: `pallas` is skipped on a CPU without
    `--pallas-interpret`), on the small shapes of the quick table at M 1, L 64, batch 64."""
    return _run(
        "depth_loop", tmp_path_factory.mktemp("depth_loop"), "--shapes", "quick", "--M", "1",
        "--L", "64", "--batch", "64",
    )  # fmt: skip


def test_depth_loop_runs_on_cpu(depth_loop_readme):
    """The README's CPU command, on two small shapes of the quick table: the scan and the
    unrolled scan (the fused kernels: the next test)."""
    rows = [r for r in depth_loop_readme["rows"] if r["method"] != "pallas"]
    assert {(r["method"], r["pass"]) for r in rows} == {
        (m, p) for m in ("scan", "unroll") for p in ("forward", "forward+backward")
    }
    for r in rows:
        assert r["median_s"] > 0 and r["compile_s"] > 0, r
        assert r["flops"] == flop_count_hand(8, 1, 64, 64, r["pass"]), r


def test_depth_loop_runs_the_fused_kernels_interpreted(tmp_path, depth_loop_readme):
    """`--methods pallas` maps to the fused kernels (`FusedLoop` with the tiling options),
    interpreted on a CPU with `--pallas-interpret` and skipped there without it; `auto`
    marks the loop that `AutoLoop` takes (the scan on a CPU)."""
    on_cpu = jax.default_backend() == "cpu"  # the suite also runs on a GPU machine
    args = ["--shapes", "quick", "--M", "1", "--L", "64", "--batch", "64"]
    args += ["--methods", "scan,pallas", "--block-batch", "16", "--layers-per-step", "4"]
    rows = _run("depth_loop", tmp_path, *args, "--pallas-interpret")["rows"]
    assert {(r["method"], r["pass"]) for r in rows} == {
        (m, p) for m in ("scan", "pallas") for p in ("forward", "forward+backward")
    }
    for r in rows:
        assert r["median_s"] > 0 and r["compile_s"] > 0, r
        if on_cpu:
            assert r["auto_choice"] == "scan", r
            assert r["note"] == ("auto" if r["method"] == "scan" else ""), r
    if on_cpu:  # without --pallas-interpret a CPU skips the kernels and says why
        rows = depth_loop_readme["rows"]  # the same shapes, every method, no tiling options
        pallas = [r for r in rows if r["method"] == "pallas"]
        assert len(pallas) == 2 and all("--pallas-interpret" in r["note"] for r in pallas)


def flop_count_hand(d, M, L, n, which):
    per_layer = 4 * d * M + M + 2 * d + (0 if which == "forward" else 8 * d * M + 2 * M + 2 * d)
    return n * L * per_layer


def test_the_compile_counting_wrapper(capsys):
    """`benchmarks/compiles.py`: the command's exit status passed through and one JSON line
    with its compilations: none for a refused input, some for a run that compiles."""
    from benchmarks import compiles

    assert compiles.main(["study", "shapes", "--seeds", "1", "--out", "unused"]) == 2
    refused = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert refused["exit"] == 2 and refused["compiles"] == 0
    assert compiles.main(["canary", "--probes", "compiler", "--sizes", "24"]) == 0
    ran = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert ran["exit"] == 0 and ran["compiles"] > 0 and ran["compile_seconds"] > 0


# ---- benchmarks/accelerator.py: every accelerator claim in one command ----


def test_accelerator_smoke_runs_every_part(tmp_path):
    """`accelerator.py --smoke` on this machine: every part ran its script, its JSON was
    read into finite numbers, and both files hold one row per part."""
    from benchmarks.accelerator import PARTS

    script = ROOT / "benchmarks" / "accelerator.py"
    done = subprocess.run(
        [sys.executable, str(script), "--smoke", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    payload = json.loads((tmp_path / "accelerator.json").read_text())
    assert payload["complete"] and payload["mode"] == "smoke"
    assert payload["device"]["backend"] == jax.default_backend()
    assert [r["part"] for r in payload["rows"]] == [p.name for p in PARTS]
    expected = {  # the number each claim is about, read from its script's JSON
        "depth_loop": {"fwd_over_chain", "fwd_bwd_over_chain"},
        "peers": {"fwd_jax-scan-loop", "fwd_bwd_diffrax-euler"},
        "shapes_small": {"numpy_over_batched", "numpy_over_per_point"},
        "shapes_large": {"numpy_over_batched", "numpy_over_per_point"},
        "transfer": {"depth_line_s", "study_s"},
        "grid": {"wall_s", "reference_s", "finite_s"},
    }
    for r in payload["rows"]:
        assert r["status"] == "ok" and r["met"] == "— (smoke)", r
        assert expected[r["part"]] <= set(r["numbers"]), r
        assert all(math.isfinite(v) and v > 0 for v in r["numbers"].values()), r
        assert 0 < r["wall_s"] <= r["limit_s"], r
    assert payload["rows"][-1]["numbers"]["wall_s"] <= payload["rows"][-1]["wall_s"]
    md = (tmp_path / "accelerator.md").read_text().splitlines()
    body = [ln for ln in md if ln.startswith("| ") and not ln.startswith("| part |")]
    assert [ln.split(" | ")[0] for ln in body] == [f"| {p.name}" for p in PARTS]
    assert all(ln.endswith(" | ok |") for ln in body), body
    assert any("jaxlib" in ln for ln in md)


def _fake_extract(folder):
    from benchmarks.accelerator import _load

    x = _load(folder / "fake.json")["x"]
    return {"numbers": {"x": x}, "result": f"x = {x}", "met": x >= 1}


def test_accelerator_records_failed_and_timed_out_parts_and_goes_on(tmp_path):
    """Fake parts (a `python -c` each, no benchmark): one that sleeps past its 1 s, one
    that exits with an error, one that writes bad JSON, one that fails beside an earlier
    run's JSON; each gets its status (and no numbers but its own run's), the parts after
    them still run, the table is rewritten after every part (a later part reads it), and
    a part left out by `only` is listed as skipped."""
    from benchmarks import accelerator as acc

    write = (
        "os.makedirs(sys.argv[2]); json.dump({{'x': {x}}}, open(sys.argv[2] + '/fake.json', 'w'))"
    )
    md = "open(os.path.join(os.path.dirname(sys.argv[2]), 'accelerator.md')).read()"
    codes = {
        "slow": (1, "import time; time.sleep(60)"),
        "good": (20, "import json, os, sys; " + write.format(x=2.0)),
        "fails": (20, "import sys; print('working'); sys.exit('boom: the part failed')"),
        "bad_json": (20, "import os, sys; os.makedirs(sys.argv[2]); "
                     "open(sys.argv[2] + '/fake.json', 'w').write('{not json')"),
        "reads_table": (20, f"import json, os, sys; md = {md}; "
                        "assert 'timed out after 1 s' in md and 'failed: boom' in md, md; "
                        + write.format(x=0.5)),
        "stale": (20, "import sys; sys.exit('crashed before writing')"),
        "left_out": (20, "import sys; sys.exit('not to be run')"),
    }  # fmt: skip
    (tmp_path / "stale").mkdir()  # an earlier run's result, not this run's
    (tmp_path / "stale" / "fake.json").write_text('{"x": 3.0}')
    os.utime(tmp_path / "stale" / "fake.json", (1e9, 1e9))
    parts = [
        acc.Part(name, f"fake {name}", f"fake {name}", budget, budget, ["-c", code], [], [],
                 _fake_extract, goal="x ≥ 1")
        for name, (budget, code) in codes.items()
    ]  # fmt: skip
    only = set(codes) - {"left_out"}
    payload = acc.run(parts, tmp_path, only=only, probe=False, say=lambda line: None)
    rows = {r["part"]: r for r in payload["rows"]}
    assert list(rows) == list(codes) and payload["complete"]
    assert rows["slow"]["status"] == "timed out after 1 s" and rows["slow"]["numbers"] == {}
    assert rows["good"]["status"] == "ok" and rows["good"]["numbers"] == {"x": 2.0}
    assert rows["good"]["met"] == "met" and rows["reads_table"]["met"] == "not met"
    assert rows["fails"]["status"] == "failed: boom: the part failed"
    assert rows["bad_json"]["status"].startswith("failed: bad JSON in fake.json"), rows
    assert rows["reads_table"]["status"] == "ok", (tmp_path / "reads_table.log").read_text()
    assert rows["stale"]["status"] == "failed: crashed before writing"
    assert rows["stale"]["numbers"] == {} and rows["stale"]["met"] == "—"
    assert rows["left_out"]["status"] == "skipped: not in --only"
    assert not (tmp_path / "left_out.log").exists()
    table = (tmp_path / "accelerator.md").read_text()
    lines = [ln for ln in table.splitlines() if ln.startswith("| ") and "| part |" not in ln]
    assert len(lines) == len(codes)
    for row, line in zip(rows.values(), lines, strict=True):
        assert line.startswith(f"| {row['part']} |") and line.endswith(f" | {row['status']} |")
    assert json.loads((tmp_path / "accelerator.json").read_text())["rows"] == payload["rows"]


def test_accelerator_budgets_and_the_grid_goal():
    """The budgets in the docstring are the parts' (and `--help`'s), the full run's sum at
    most 8 minutes; a fraction of the paper grid over 60 s misses the goal, one under it
    cannot tell."""
    from benchmarks import accelerator as acc

    assert acc.budget_table() in acc.__doc__
    full = acc.DEVICE_BUDGET_S["full"] + sum(p.budget_s for p in acc.PARTS)
    smoke = acc.DEVICE_BUDGET_S["smoke"] + sum(p.smoke_budget_s for p in acc.PARTS)
    total_line = acc.budget_table().splitlines()[-1].split()
    assert full <= 480 and total_line == ["total", f"{full:.0f}", f"{smoke:.0f}"]
    assert acc.grid_verdict(50.0, "paper", 225, 64) is True
    assert acc.grid_verdict(70.0, "paper", 225, 64) is False
    assert acc.grid_verdict(70.0, "paper", 225, 8) is False
    assert acc.grid_verdict(50.0, "paper", 225, 8) is None
    assert acc.grid_verdict(50.0, "quick", 12, 2) is None


def test_accelerator_goals_follow_the_numbers(tmp_path):
    """The depth loop's goal (≤ 3× the chain bound forward, ≤ 10× forward+backward) and
    the batched NumPy goal (≥ 100×) are judged from the numbers each script wrote: met,
    missed by either pass, or not judged where a pass is missing."""
    from benchmarks import accelerator as acc

    def depth(fwd, both):
        times = (("forward", fwd), ("forward+backward", both))
        rows = [{"pass": p, "method": "scan", "auto_choice": "scan", "median_s": t,
                 "limits": {"chain": 1.0}} for p, t in times if t is not None]  # fmt: skip
        (tmp_path / "depth_loop.json").write_text(json.dumps({"rows": rows}))
        return acc.depth_loop_extract(tmp_path)["met"]

    assert depth(2.9, 9.0) is True
    assert depth(3.1, 9.0) is False and depth(2.0, 11.0) is False
    assert depth(2.0, None) is None

    def shapes(ratio):
        payload = {
            "rows": [{"activation": "identity", "ratio": {"median": 5.0}}],
            "settings": {"grid": {"L": [2], "M": [2], "D": [2]}, "seeds": 2},
            "totals": {"identity": {"numpy_s": 1.0, "ratio_run": 5.0}},
            "batched": [{"activation": "identity", "numpy_over_batched": ratio, "batched_s": 0.01,
                         "batched_compile_s": 1.0, "per_point_over_batched": {"median": 2.0}}],
        }  # fmt: skip
        (tmp_path / "shapes_numpy.json").write_text(json.dumps(payload))
        return acc.shapes_extract(tmp_path)["met"]

    assert shapes(150.0) is True and shapes(99.0) is False
