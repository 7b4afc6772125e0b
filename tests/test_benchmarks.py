"""The benchmark scripts run, and their experimental kernels compute the recursion.

Each script runs in its own process, as a user runs it: a benchmark sets global JAX
options (precision, compile cache) that must not leak into the rest of the suite
(importing one sets nothing: the lowering check below imports `kernel_variants`).
"""

import json
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp

from meanfield import fused_two_layer as fused

ROOT = Path(__file__).resolve().parents[1]


def _run(name, tmp_path, *args):
    script = ROOT / "benchmarks" / f"{name}.py"
    args = ["--out", str(tmp_path), "--min-reps", "1", "--max-reps", "1", *args]
    done = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=600
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


def test_grid_benchmark_splits_the_study_and_times_the_natural_way(tmp_path):
    """`grid.py` on a tiny grid: the study's split and settings reach the JSON, and the
    natural part, timed on 3 of its 6 configurations, gives every other configuration
    the times of its nearest timed neighbour."""
    study = (
        "--L 4,8 --M 1,4 --L-for-M 16 --fit-M-max 4 --seeds 2 --order 12 "
        "--compile-workers 1 --unroll 2 --seed-batch-units 64"
    )
    script = ROOT / "benchmarks" / "grid.py"
    args = ["--out", str(tmp_path), "--preset", "quick", "--natural-seeds", "1"]
    args += ["--natural-configs", "3", "--study-args", study]
    done = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=600
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
    for key in ("compile_s", "reference_s", "finite_s", "euler_s", "fit_s"):
        assert 0 < ours[key] < ours["wall_s"], key
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
    assert r["ratio_finite"] > 0
    assert "3 of 6 configurations timed" in r["natural"]["extrapolated"]
    bad = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path / "bad"), "--natural-configs", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "--natural-configs: must be >= 2" in bad.stderr
    assert not (tmp_path / "bad").exists()  # refused before any study ran


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
