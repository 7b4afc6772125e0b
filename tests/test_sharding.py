"""Seeds over devices: the sharded map equals the single-device run.

Several devices on a CPU need `XLA_FLAGS=--xla_force_host_platform_device_count=4`
set before jax is imported, so those checks run in a subprocess. The subprocesses add
it to the suite's compile flags, which they inherit (conftest.py): replacing them compiled
the study programs with XLA's slower defaults (10.6 s against 14.8 s of CPU).
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import meanfield as mf
from meanfield.runtime.sharding import seed_mesh

ROOT = Path(__file__).resolve().parents[1]

# a guard against a hang, not a time limit (conftest.HANG_GUARD_S; this module is also
# imported by its own subprocesses, where conftest is not on the path)
HANG_GUARD = 1800


def _seed_fn(key, xs):
    """A study-like per-seed computation: sample a network, run it on the inputs."""
    block = mf.TwoLayerBlock("tanh")
    law = mf.TwoLayerNonCentredLaw(3, sigma_u=1.0, sigma_xi=0.5)
    net = mf.ResNet.sample(block, law, L=12, M=4, scaling=mf.MeanODEScaling(), key=key)
    return {"out": jax.vmap(net)(xs), "u": net.params.u[-1]}


def test_single_device_matches_loop(key):
    keys = jr.split(key, 5)
    xs = jr.normal(jr.fold_in(key, 1), (4, 3))
    got = mf.shard_seeds(_seed_fn, (0, None), batch_size=2)(keys, xs)
    one = jax.jit(_seed_fn)
    for s in range(5):
        ref = one(keys[s], xs)
        for name in ref:
            np.testing.assert_allclose(got[name][s], ref[name], rtol=1e-13, atol=1e-15)


def test_errors(key):
    keys = jr.split(key, 3)
    with pytest.raises(ValueError, match="share one leading seed axis"):
        mf.shard_seeds(lambda k, x: x)(keys, jnp.ones((4, 2)))
    with pytest.raises(ValueError, match="at least one argument must be mapped"):
        mf.shard_seeds(lambda x: x, None)(jnp.ones(3))
    with pytest.raises(ValueError, match="in_axes has 1 entries for 2 arguments"):
        mf.shard_seeds(lambda k, x: x, (0,))(keys, jnp.ones(3))
    with pytest.raises(ValueError, match="in_axes entries must be 0"):
        mf.shard_seeds(lambda x: x, 1)(jnp.ones((3, 2)))
    with pytest.raises(ValueError, match="at least one device"):
        seed_mesh([])
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match="^batch_size must be a positive integer"):
            mf.shard_seeds(lambda k: k, batch_size=bad)


SCRIPT = textwrap.dedent(
    """
    import json, os
    # added to the suite's compile flags (conftest.py), not in their place
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    ).strip()
    import jax, jax.numpy as jnp, jax.random as jr, numpy as np
    jax.config.update("jax_enable_x64", True)
    import meanfield as mf
    from meanfield.runtime.compilation import CompileCounter
    from tests.test_sharding import _seed_fn

    keys = jr.split(jr.key(0), 7)  # 7 seeds on 4 devices: padded to 8
    xs = jr.normal(jr.key(1), (4, 3))
    report = {"devices": jax.device_count()}
    one = mf.shard_seeds(_seed_fn, (0, None), devices=jax.devices()[:1])(keys, xs)
    for batch in (None, 1):
        four = mf.shard_seeds(_seed_fn, (0, None), batch_size=batch)
        with CompileCounter() as counter:
            got = four(keys, xs)
            again = four(jr.split(jr.key(5), 7), xs)  # same shape: no new program
        report[f"compiles_{batch}"] = counter.compiles
        report[f"identical_{batch}"] = all(
            bool(np.array_equal(np.asarray(got[k]), np.asarray(one[k]))) for k in one
        )
        report[f"shape_{batch}"] = list(np.asarray(got["out"]).shape)
        report[f"distinct_{batch}"] = not np.array_equal(
            np.asarray(again["out"]), np.asarray(got["out"])
        )
        sharding = four.jitted.lower(keys, xs).compile().input_shardings[0][0]
        report[f"mesh_{batch}"] = len(sharding.device_set)
    print("REPORT" + json.dumps(report))
    """
)


def _run_report(script: str) -> dict:
    """Run `script` in a fresh CPU process (its own device count); its REPORT line."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("REPORT"))
    return json.loads(line[len("REPORT") :])


def test_four_devices_identical_to_one():
    report = _run_report(SCRIPT)
    assert report["devices"] == 4
    for batch in ("None", "1"):
        assert report[f"mesh_{batch}"] == 4
        assert report[f"identical_{batch}"]
        assert report[f"shape_{batch}"] == [7, 4, 3]
        assert report[f"distinct_{batch}"]
        assert report[f"compiles_{batch}"] == 1


STUDY_SCRIPT = textwrap.dedent(
    """
    import json, os
    # added to the suite's compile flags (conftest.py), not in their place
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    ).strip()
    import jax, jax.numpy as jnp, jax.random as jr, numpy as np
    jax.config.update("jax_enable_x64", True)
    import meanfield as mf
    from meanfield.cli import build_parser
    from meanfield.coupling.design import seed_program
    from meanfield.studies.mean_ode import study as mean_ode
    from meanfield.studies.phases import study as phases
    from meanfield.studies.sde import study as sde
    from meanfield.studies.shared import own_block

    def cfg_of(module, *argv):
        return module.configure(build_parser().parse_args(["study", *argv]))

    meshes = {}

    def mesh_size(run, args):
        \"\"\"Devices the compiled program's seed input is split over.\"\"\"
        return len(run.jitted.lower(*args).compile().input_shardings[0][0].device_set)

    def programs(devices):
        \"\"\"Each study's seed program on `devices`, on 7 seeds (padded to 8 on 4).\"\"\"
        out = {}
        c = cfg_of(mean_ode, "mean-ode", "--steps", "1")
        law = own_block.make_law(c)
        xs, ys = own_block.make_data(c)
        L, M, n, d = 4, 3, xs.shape[0], xs.shape[1]
        ramp = jnp.linspace(0.0, 0.1, 2 * (L + 1) * n * d).reshape(2, L + 1, n, d)
        run = seed_program(
            mf.TwoLayerBlock(c["activation"]), law, xs, ys, c["lr"], L, M, 7, 2**20, devices=devices
        )
        args = (jr.split(jr.key(3), 7), ramp, -ramp, jnp.int32(L), jnp.int32(2))
        e = run(*args)
        meshes["mean_ode"] = mesh_size(run, args)
        out["mean_ode"] = [e.delta_h, e.delta_b, e.delta_z, e.loss]
        c = cfg_of(sde, "sde", "--weights", "brownian", "--L", "4,8", "--n-fine", "32")
        run = sde.chunk_program(c, sde.make_law(c), sde.make_input(c["d"]), devices)
        r = run(sde.seed_keys(c, 0, 7))
        meshes["sde"] = mesh_size(run, (sde.seed_keys(c, 0, 7),))
        out["sde"] = [r["final"], r["sup"], r["check_final"]]
        c = cfg_of(
            phases, "phases", "--weights", "iid", "--L", "4,8", "--beta", "0.5,1", "--d", "3"
        )
        run = phases.chunk_program(c, phases.make_law(c), devices)
        out["phases"] = list(run(phases.seed_keys(c, None, 0, 7)))
        meshes["phases"] = mesh_size(run, (phases.seed_keys(c, None, 0, 7),))
        return {k: [np.asarray(a) for a in v] for k, v in out.items()}

    one, four = programs(jax.devices()[:1]), programs(None)  # `meshes`: of the second
    report = {"devices": jax.device_count()}
    for name in one:
        report[name] = {
            "shapes": [list(a.shape) for a in four[name]],
            "identical": all(np.array_equal(a, b) for a, b in zip(one[name], four[name])),
            "rel_diff": max(
                float(np.max(np.abs(a - b) / np.abs(b))) for a, b in zip(one[name], four[name])
            ),
            "finite": all(bool(np.all(np.isfinite(a))) for a in four[name]),
            "distinct_seeds": bool(np.ptp(four[name][0][:, -1]) > 0),
            "mesh": meshes[name],
        }
    print("REPORT" + json.dumps(report))
    """
)


def test_study_programs_on_four_devices_identical_to_one():
    """The mean-ODE, SDE and phase studies' seed programs split seeds over all devices
    (7 seeds on 4 forced CPU devices, padded to 8) with the results of one device: bit
    for bit for the mean-ODE and SDE programs; the phase program's batched products
    round differently at 2 seeds per device than at 7 (measured: 2e-16 relative)."""
    report = _run_report(STUDY_SCRIPT)
    assert report["devices"] == 4
    for name in ("mean_ode", "sde", "phases"):
        r = report[name]
        assert all(shape[0] == 7 for shape in r["shapes"]), (name, r)
        # bit for bit where no reduction depends on the per-device batch; else rounding
        assert r["identical"] or r["rel_diff"] < 1e-14, (name, r)
        assert r["finite"] and r["distinct_seeds"], (name, r)
        assert r["mesh"] == 4, (name, r)
    assert report["mean_ode"]["identical"] and report["sde"]["identical"]


PROCESS_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    # added to the suite's compile flags (conftest.py), not in their place
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    ).strip()
    import jax
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=sys.argv[1], num_processes=2, process_id=int(sys.argv[2])
    )
    jax.config.update("jax_enable_x64", True)
    import jax.random as jr, numpy as np
    import meanfield as mf
    from tests.test_sharding import _seed_fn

    keys = jr.split(jr.key(0), 7)
    xs = jr.normal(jr.key(1), (4, 3))
    got = mf.shard_seeds(_seed_fn, (0, None))(keys, xs)
    one = jax.jit(_seed_fn)
    err = max(
        float(np.max(np.abs(np.asarray(got[k][s]) - np.asarray(one(keys[s], xs)[k]))))
        for s in range(7)
        for k in got
    )
    report = {"devices": jax.device_count(), "local": jax.local_device_count(), "err": err}
    print("REPORT" + json.dumps(report), flush=True)
    """
)


def test_two_processes_match_single_process():
    """Multi-host through jax.distributed: 2 processes × 2 CPU devices, gloo collectives."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    address = f"127.0.0.1:{port}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PROCESS_SCRIPT, address, str(i)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=HANG_GUARD))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
        line = next(x for x in out.splitlines() if x.startswith("REPORT"))
        report = json.loads(line[len("REPORT") :])
        assert report["devices"] == 4 and report["local"] == 2
        assert report["err"] <= 1e-13
