"""The Transformer studies as users compile them (issue 73): one grid point of each quick
preset at its real shapes, in a subprocess without the suite's cheap-compile settings
(conftest.py), at the CPU's own instruction set and at AVX2 (the project's AMD EPYC
machines have no AVX-512).

On jaxlib 0.10.1 the transfer study's first point crashed there (`INTERNAL: YNNPACK
operation failed`, "rank 9 of tensor `output` exceeds YNN_MAX_TENSOR_RANK 8"): XLA hands
its dots to YNNPACK, which packs an operand with two more dimensions, and nested vmaps
made rank-7 attention products. The suite's tiny shapes at -O1 never reached that path.
Its programs also compiled for minutes on a loaded machine, most of it LLVM optimising
the random draws' unrolled Threefry hash: the draws now run in a program of their own."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HANG_GUARD_S
from test_canary import _users_environment

SCRIPT = Path(__file__).with_name("users_compiler_point.py")
YNN_MAX_TENSOR_RANK = 8  # YNNPACK's limit; a packed dot operand has 2 dimensions more


@pytest.mark.parametrize("isa", ["native", "AVX2"])
@pytest.mark.parametrize("study", ["transfer", "coord-check"])
def test_a_quick_preset_point_runs_at_the_users_compiler_settings(study, isa):
    env = _users_environment()
    if isa != "native":
        env["XLA_FLAGS"] = f"{env['XLA_FLAGS']} --xla_cpu_max_isa={isa}".strip()
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), study], capture_output=True, text=True, env=env,
        timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Very slow compile" not in proc.stderr, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["finite"], r
    assert r["dot_operand_rank"] + 2 <= YNN_MAX_TENSOR_RANK, r
    # the draws (Threefry, slow for LLVM to optimise) are not in the training program
    assert not r["random_bits_in_training"], r
    print(json.dumps(r))  # the point's time and its longest compile, with -s
