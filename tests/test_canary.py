"""The miscompile canary (`meanfield.canary`, `meanfield canary`): every compiled hot path
against the same function run op by op, at widths that cross the compiler's tiling
thresholds, and at the optimisation level users compile at (the rest of the suite runs
XLA at -O0 for speed, conftest.py).

On jaxlib 0.10.2 the canary fails (its first probe is that release's miscompiled form;
`.ci/known-bad` installs 0.10.2 and checks that it does); here it must pass."""

import json
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from meanfield import canary
from meanfield.cli import main


def _users_environment() -> dict:
    """This process's environment without the suite's cheap-compile settings (-O0 or -O1,
    the older fusion emitters; conftest.py): the canary compiles as users' programs do."""
    from conftest import SUITE_ENVIRONMENT, SUITE_XLA_FLAGS

    env = {k: v for k, v in os.environ.items() if k not in SUITE_ENVIRONMENT}
    flags = [
        f for f in env.get("XLA_FLAGS", "").split() if not any(n in f for n in SUITE_XLA_FLAGS)
    ]
    env["XLA_FLAGS"] = " ".join(flags)
    return env


def test_the_canary_compiles_as_users_do(monkeypatch):
    """The suite's cheap-compile settings (conftest.py) are gone from the canary's
    environment, a user's own XLA flags kept: what it checks is what users' programs run."""
    from conftest import SUITE_ENVIRONMENT, SUITE_XLA_FLAGS

    suite = " ".join(f"--{n}={v}" for n, v in SUITE_XLA_FLAGS.items())
    monkeypatch.setenv("XLA_FLAGS", f"--xla_cpu_enable_fast_min_max=false {suite}")
    for k, v in SUITE_ENVIRONMENT.items():
        monkeypatch.setenv(k, v)
    users = _users_environment()
    assert users["XLA_FLAGS"] == "--xla_cpu_enable_fast_min_max=false"
    assert not any(k in users for k in SUITE_ENVIRONMENT)


def test_the_suite_compiles_at_o0_but_where_a_test_runs_long():
    assert jax.config.read("jax_disable_most_optimizations") == (
        os.environ.get("JAX_DISABLE_MOST_OPTIMIZATIONS") == "1"
    )


@pytest.mark.runs_long
def test_a_test_that_runs_long_compiles_at_o1():
    assert not jax.config.read("jax_disable_most_optimizations")


# the probes in four groups, each its own subprocess (about 25 s each on a quiet 2-core
# machine): the suite's workers share them, and no one subprocess runs long
PROBE_GROUPS = 4


@pytest.mark.parametrize("group", range(PROBE_GROUPS))
def test_every_hot_path_agrees_with_op_by_op_at_large_widths(tmp_path, group):
    """Every probe at widths 2000 and 4097 (and the compiler's known-bad form at all of
    2000, 4096, 4097, 8192), in float64, compiled at the users' optimisation level."""
    from conftest import HANG_GUARD_S

    names = [p.name for p in canary.PROBES[group::PROBE_GROUPS]]
    out = tmp_path / "canary.json"
    proc = subprocess.run(
        [sys.executable, "-m", "meanfield", "canary", "--sizes", "2000,4097", "--json", str(out),
         "--probes", ",".join(names)],
        capture_output=True, text=True, timeout=HANG_GUARD_S, env=_users_environment(),
    )  # fmt: skip
    assert out.exists(), proc.stdout + proc.stderr
    rows = json.loads(out.read_text())["results"]
    failed = [f"{r['probe']} at {r['size']}: {r['difference']}" for r in rows if not r["ok"]]
    assert not failed, "\n".join(failed)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(names) <= {r["probe"] for r in rows}  # (a name may match another probe too)
    assert all(r["difference"] <= r["tolerance"] for r in rows)
    if group == 0:  # the compiler's known-bad form at the widths it was wrong at
        proc = subprocess.run(
            [sys.executable, "-m", "meanfield", "canary", "--probes", "compiler",
             "--sizes", "4096,8192"],
            capture_output=True, text=True, timeout=HANG_GUARD_S, env=_users_environment(),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        # its total said first, then each comparison counted with the time left
        total = int(re.search(r"canary: (\d+) comparisons", proc.stdout).group(1))
        counted = re.findall(r"\[ *(\d+)/(\d+)\] ok .*about (\d+) s left", proc.stdout)
        assert [(int(k), int(n)) for k, n, _ in counted] == [
            (k, total) for k in range(1, total + 1)
        ]
        assert counted[-1][2] == "0"


def test_the_probe_groups_cover_every_probe():
    groups = [canary.PROBES[g::PROBE_GROUPS] for g in range(PROBE_GROUPS)]
    assert sorted(p.name for g in groups for p in g) == sorted(p.name for p in canary.PROBES)


def test_float32_paths_agree_too():
    """The float32 study (trained-weights) trains res-1 networks: its probe in float32."""
    with jax.enable_x64(False):
        probes = [p for p in canary.PROBES if p.name.startswith(("res-1", "compiler"))]
        results = canary.run_canary((2000,), probes=probes)
    assert all(r.dtype == "float32" and r.ok for r in results), results


def _miscompiled(size, key):
    """A probe whose compiled result is wrong: it adds 1e-3 when traced (under jit)."""
    x = jax.random.normal(key, (size,))

    def fn(x):
        wrong = isinstance(x, jax.core.Tracer)
        return jnp.sin(x) + (1e-3 if wrong else 0.0)

    return fn, (x,)


def test_the_canary_can_fail(capsys, monkeypatch):
    """A path compiled wrong by 1e-3 fails its comparison, the command exits 1 naming it,
    and its JSON says so; the same path right passes."""
    bad = canary.Probe("a miscompiled path", "a test", _miscompiled)
    (result,) = canary.run_canary((4097,), probes=[bad])
    assert not result.ok and result.difference > 1e-4
    monkeypatch.setattr(canary, "PROBES", (bad,))
    assert main(["canary", "--sizes", "17"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "a miscompiled path" in out.splitlines()[-1]
    assert main(["canary", "--probes", "nothing-matches"]) == 2


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--sizes", "1000000000"], "--sizes"),
        (["--sizes", "0"], "--sizes"),
        (["--json", "."], "--json"),
        (["--json", "missing-folder/x.json"], "--json"),
    ],
)
def test_options_are_refused_before_the_run(argv, flag, capsys, monkeypatch, tmp_path):
    """Issue 75: a width XLA cannot allocate aborted in C++, and an unwritable --json failed
    after the whole run: both are refused in one line before anything runs."""
    monkeypatch.chdir(tmp_path)
    ran = []
    monkeypatch.setattr(canary, "run_canary", lambda *a, **k: ran.append(1) or [])
    try:
        code = main(["canary", *argv])
    except SystemExit as exit_:  # argparse's own (a width that is not a positive integer)
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert flag in err.splitlines()[-1] and "Traceback" not in err and not ran


def test_relative_difference_sees_round_off_nan_and_shape():
    a = np.linspace(1.0, 2.0, 5)
    assert canary.relative_difference(a, a * (1 + 1e-15)) < 1e-14
    assert canary.relative_difference([a], [a + 1e-3]) > 1e-4
    nan = a.copy()
    nan[2] = np.nan
    assert canary.relative_difference(nan, nan) == 0.0  # the same non-finite entries
    assert canary.relative_difference(nan, a) == np.inf  # a NaN on one side only
    assert canary.relative_difference(a[:4], a) == np.inf
    assert canary.relative_difference(np.zeros(3), np.zeros(3)) == 0.0


@pytest.mark.parametrize("size", [2000, 4097])
def test_the_known_bad_form_agrees_here(size):
    """In this process (XLA -O0): the form jaxlib 0.10.2 miscompiles, computed right."""
    fn, args = canary._known_bad_form(size, jax.random.key(size))
    assert canary.compare(fn, args) < canary.TOLERANCE["float64"]


@pytest.mark.parametrize("level", [False, True])
def test_compare_leaves_the_optimisation_level_as_it_found_it(level):
    """The op-by-op half compiles its primitives with optimisations off; the compiled half
    (this probe's and the next one's) at the level in force, which `compare` restores."""
    seen = []

    def fn(x):
        seen.append(jax.config.read("jax_disable_most_optimizations"))
        return jnp.sin(x) * 2.0

    before = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", level)
    try:
        assert canary.compare(fn, (jnp.linspace(0.0, 1.0, 17),)) < 1e-12
        assert jax.config.read("jax_disable_most_optimizations") is level
    finally:
        jax.config.update("jax_disable_most_optimizations", before)
    assert seen == [level, True]  # traced for the compiled half, then run op by op
