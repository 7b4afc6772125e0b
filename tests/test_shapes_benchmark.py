"""`benchmarks/shapes_numpy.py`: the NumPy research-code way and `meanfield.models.deep_embedded`
train the same networks over a grid of shapes (SPEC §6), to float64 rounding.

The script runs in its own process, as a user runs it (it sets global JAX options);
the check that the comparison can fail imports its NumPy peer (importing sets nothing).
No timing is asserted.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from conftest import HANG_GUARD_S

from benchmarks import shapes_numpy

ROOT = Path(__file__).resolve().parents[1]


def test_numpy_way_and_ours_train_the_same_networks(tmp_path):
    args = [
        "--out", str(tmp_path), "--L", "2,3", "--M", "2", "--D", "4", "--seeds", "2",
        "--steps", "3", "--activations", "identity,tanh", "--min-reps", "1", "--max-reps", "1",
        "--target-seconds", "0", "--unroll", "2", "--batched",
    ]  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "shapes_numpy.py"), *args],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "shapes_numpy.txt").read_text().strip()
    payload = json.loads((tmp_path / "shapes_numpy.json").read_text())
    assert payload["complete"] and payload["agree"]
    rows = payload["rows"]
    assert {(r["activation"], r["L"], r["D"]) for r in rows} == {
        (a, L, D) for a in ("identity", "tanh") for L in (2, 3) for D in (4,)
    }
    for r in rows:  # outputs after every step, and every hidden state, agree
        assert r["max_diff"] < 1e-8 and r["max_diff_hidden"] < 1e-8, r
        assert r["steps"] == 3 and r["seeds"] == 2
        assert set(r["variants"]) == {"unroll 2"} and r["variants"]["unroll 2"]["ours_s"] > 0
    totals = payload["totals"]
    assert set(totals) == {"identity", "tanh", "all"} and totals["all"]["points"] == 4
    assert totals["all"]["variants"]["unroll 2"]["ratio_run"] > 0
    assert payload["settings"]["default_unroll"] == 1  # the CPU's
    env = payload["environment"]
    assert env["x64"] and env["date"] and "git_commit" in env
    assert payload["settings"]["grid"] == {"L": [2, 3], "M": [2], "D": [4]}
    # --batched: each activation's grid as one program, padded into (3, 2, 4), checked
    # against NumPy at every point like the per-point programs
    batched = payload["batched"]
    assert [(b["activation"], b["box"], b["points"]) for b in batched] == [
        ("identity", [3, 2, 4], 2), ("tanh", [3, 2, 4], 2)
    ]  # fmt: skip
    for b in batched:
        assert b["max_diff"] < 1e-8 and b["max_diff_hidden"] < 1e-8, b


def test_a_wrong_backward_pass_is_caught(monkeypatch, key):
    """The agreement check is sharp: the right NumPy backward agrees to rounding, and one
    that drops ρ' (tanh) or the residual path of the adjoint disagrees by far more."""
    right = shapes_numpy.numpy_layer_backward
    diff_f, diff_h = shapes_numpy.compare_point(key, 3, 2, 4, 2, "tanh", 2)
    assert diff_f < 1e-12 and diff_h < 1e-12

    def no_rho_prime(g, h_prev, p, u_l, v_l, rho, drho, L, M, D):
        return right(g, h_prev, p, u_l, v_l, rho, np.ones_like, L, M, D)

    def no_residual(g, h_prev, p, u_l, v_l, rho, drho, L, M, D):
        grad_u, grad_v, g_prev = right(g, h_prev, p, u_l, v_l, rho, drho, L, M, D)
        return grad_u, grad_v, g_prev - g

    for wrong in (no_rho_prime, no_residual):
        monkeypatch.setattr(shapes_numpy, "numpy_layer_backward", wrong)
        diff_f, diff_h = shapes_numpy.compare_point(key, 3, 2, 4, 2, "tanh", 2)
        assert diff_f > 1e-6 and diff_h > 1e-6, wrong.__name__
