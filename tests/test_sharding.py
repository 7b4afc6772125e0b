"""Seeds over devices: the sharded map equals the single-device run.

Several devices on a CPU need `XLA_FLAGS=--xla_force_host_platform_device_count=4`
set before jax is imported, so those checks run in a subprocess.
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

ROOT = Path(__file__).resolve().parents[1]


def _seed_fn(key, xs):
    """A study-like per-seed computation: sample a network, run it on the inputs."""
    block = mf.TwoLayerBlock("tanh")
    law = mf.TwoLayerNonCentredLaw(3, sigma_u=1.0, sigma_xi=0.5)
    net = mf.ResNet.sample(block, law, L=12, M=4, scaling=mf.MeanODEScaling(), key=key)
    return {"out": mf.forward_batch(net, xs), "u": net.params.u[-1]}


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
        mf.seed_mesh([])


SCRIPT = textwrap.dedent(
    """
    import json, os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import jax, jax.numpy as jnp, jax.random as jr, numpy as np
    jax.config.update("jax_enable_x64", True)
    import meanfield as mf
    from tests.test_sharding import _seed_fn

    keys = jr.split(jr.key(0), 7)  # 7 seeds on 4 devices: padded to 8
    xs = jr.normal(jr.key(1), (4, 3))
    report = {"devices": jax.device_count()}
    one = mf.shard_seeds(_seed_fn, (0, None), devices=jax.devices()[:1])(keys, xs)
    for batch in (None, 1):
        four = mf.shard_seeds(_seed_fn, (0, None), batch_size=batch)
        with mf.CompileCounter() as counter:
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


def test_four_devices_identical_to_one():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("REPORT"))
    report = json.loads(line[len("REPORT") :])
    assert report["devices"] == 4
    for batch in ("None", "1"):
        assert report[f"mesh_{batch}"] == 4
        assert report[f"identical_{batch}"]
        assert report[f"shape_{batch}"] == [7, 4, 3]
        assert report[f"distinct_{batch}"]
        assert report[f"compiles_{batch}"] == 1


PROCESS_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
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
            outs.append(p.communicate(timeout=240))
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
