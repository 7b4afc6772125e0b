"""Your own block, end to end: the mean-ODE study for a user's block and law, its
reference control (batch means, refinement, design) and its refusals."""

import json
import math
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import jax.random as jr
import jax.scipy.linalg as jsl
import numpy as np
import pytest

import meanfield as mf
from meanfield.coupling import convergence as cv
from meanfield.coupling import design
from meanfield.coupling import reference as cref

ROOT = Path(__file__).resolve().parents[1]
USER = ROOT / "notebooks" / "user_blocks.py"
TINY_GRID = [
    "--design", "grid", "--L", "2,4", "--M", "1,2", "--L-for-M", "4", "--fit-M-max", "2",
    "--seeds", "2",
]  # fmt: skip


class Linear(mf.AbstractUnitBlock):
    """φ(h, z) = z h with a random matrix z: the mean ODE is ∂_s h = E[z] h."""

    def __call__(self, h, z):
        return z @ h


def test_batch_means_estimate_the_true_error_of_a_monte_carlo_reference():
    """For a limit in closed form (h(s) = exp(sA) x), the batch-means estimate of a
    Monte-Carlo reference's sup-norm error against its true error over 10 references
    (independent particle sets): equal on average (the true errors' standard error is
    about 15% of their mean here)."""
    A = jnp.array([[0.2, 0.8], [-0.8, 0.1]])
    law = mf.SamplerLaw(lambda k: A + jr.normal(k, (2, 2)))
    xs = jnp.array([[1.0, 0.0], [0.6, 0.8]])
    L = cref.CHECK_GRID
    s = jnp.arange(L + 1) / L
    exact = jax.vmap(lambda t: jax.vmap(lambda x: jsl.expm(t * A) @ x)(xs))(s)
    estimates, true = [], []
    for seed in range(10):
        p = mf.monte_carlo_particles(law, 2**11, key=jr.key(seed))
        ref = cref.solve_reference_replicas(
            Linear(), p, xs, xs, learning_rate=0.1, steps=0, rtol=1e-10, depths=[L],
            probes=law.sample(jr.key(99))[None],
        )  # fmt: skip
        estimates.append(cref.reference_errors(ref)["delta_h"])
        true.append(float(jnp.max(jnp.linalg.norm(ref[f"h_L{L}"][0] - exact, axis=-1))))
    ratio = np.mean(estimates) / np.mean(true)
    assert 0.7 < ratio < 1.4, (ratio, estimates, true)
    # and it shrinks as N^{-1/2}: 8x more particles, about sqrt(8) less error
    p = mf.monte_carlo_particles(law, 2**14, key=jr.key(0))
    big = cref.solve_reference_replicas(
        Linear(), p, xs, xs, learning_rate=0.1, steps=0, rtol=1e-10, depths=[L],
        probes=law.sample(jr.key(99))[None],
    )  # fmt: skip
    assert 1.5 < np.mean(estimates) / cref.reference_errors(big)["delta_h"] < 5.0


@pytest.mark.parametrize("rtol", [1e-10, 1e-6])
def test_the_tolerance_part_measures_a_loose_tolerance_and_batch_0_is_its_own_limit(rtol):
    """For a limit in closed form (the particles' own: h(s) = exp(s Σ_i w_i z_i) x), batch
    0's limit as returned (`batch0_h_L{L}`) lies within the solver's tolerance of its
    exact limit, and the tolerance part of the error estimate measures that distance (at
    rtol 1e-6 Dopri8 takes its fewest steps at rtol / 2 too, so the halved tolerance alone
    measured 0). The reference is the batches' mean, not batch 0."""
    law = mf.SamplerLaw(lambda k: jnp.array([[0.2, 0.8], [-0.8, 0.1]]) + jr.normal(k, (2, 2)))
    xs = jnp.array([[1.0, 0.0], [0.6, 0.8]])
    L, replicas = cref.CHECK_GRID, 8
    p = mf.monte_carlo_particles(law, 2**10, key=jr.key(3))
    ref = cref.solve_reference_replicas(
        Linear(), p, xs, xs, learning_rate=0.1, steps=0, rtol=rtol, depths=[L],
        probes=law.sample(jr.key(99))[None], replicas=replicas,
    )  # fmt: skip
    batch = cref.replica_batch(p, 0, replicas)
    assert batch.count == 2**10 // replicas
    mean = jnp.tensordot(batch.weights, batch.z, axes=1)  # Σ_i w_i z_i
    s = jnp.arange(L + 1) / L
    exact = jax.vmap(lambda t: jax.vmap(lambda x: jsl.expm(t * mean) @ x)(xs))(s)
    true = float(jnp.max(jnp.linalg.norm(ref[f"batch0_h_L{L}"][0] - exact, axis=-1)))
    measured = float(ref["err_tolerance"][0])
    assert 0 < true < 100 * rtol, true
    assert 0.3 < measured / true < 3, (measured, true)
    # the reference itself is the mean of the batches, some Monte-Carlo error away
    assert float(np.max(np.abs(ref[f"h_L{L}"] - ref[f"batch0_h_L{L}"]))) > 1e3 * true


def test_an_euler_coefficient_from_a_solved_limit_is_the_one_it_solves():
    """`euler_coefficient` given its particles' limit on the grids (`grids`, as the
    pilot reference's batch 0 gives it) equals the one that solves that limit itself."""
    law = mf.SamplerLaw(lambda k: 0.3 * jr.normal(k, (2, 2)))
    xs = jnp.array([[1.0, 0.0], [0.6, 0.8]])
    p = mf.monte_carlo_particles(law, 2**8, key=jr.key(0))
    kwargs = dict(learning_rate=0.1, steps=1, depths=[4, 8], probes=law.sample(jr.key(9))[None])
    own = design.euler_coefficient(Linear(), p, xs, xs, rtol=1e-10, **kwargs)
    sol = cref.solve_limit(Linear(), p, xs, xs, learning_rate=0.1, steps=1, tol=1e-10)
    given = design.euler_coefficient(Linear(), p, xs, xs, grids=cref.limit_grids(sol, [4, 8]),
                                     **kwargs)  # fmt: skip
    np.testing.assert_array_equal(given["L_delta_h"], own["L_delta_h"])
    assert np.all(own["L_delta_h"][:, 1] > 0)


def test_the_pilot_compiled_ahead_gives_the_pilot_bit_for_bit():
    """`pilot_errors` by the programs `compile_pilot` compiled in threads: the same numbers
    as by its own programs, and only the boxes it asks for (with `pad_depth`, one)."""
    from concurrent.futures import ThreadPoolExecutor

    law = mf.SamplerLaw(lambda k: 0.3 * jr.normal(k, (2, 2)))
    xs = jnp.array([[1.0, 0.0], [0.6, 0.8]])
    p = mf.monte_carlo_particles(law, 2**8, key=jr.key(0))
    points = [(2, 1), (2, 4), (4, 1), (4, 4)]
    sol = cref.solve_limit(Linear(), p, xs, xs, learning_rate=0.1, steps=1, tol=1e-10)
    ref = {f"{x}_L{L}": g[i] for L, g in cref.limit_grids(sol, [2, 4]).items()
           for i, x in enumerate("hb")}  # fmt: skip
    kwargs = dict(learning_rate=0.1, points=points, seeds=2)
    with ThreadPoolExecutor(2) as pool:
        ahead = design.compile_pilot(pool, Linear(), law, xs, xs, steps=1, **kwargs)
        compiled = design.pilot_errors(Linear(), law, xs, xs, ref, key=jr.key(5),
                                       compiled=ahead, **kwargs)  # fmt: skip
    assert sorted(ahead) == [(2, 4), (4, 4)]
    plain = design.pilot_errors(Linear(), law, xs, xs, ref, key=jr.key(5), **kwargs)
    for q in ("delta_h", "delta_b", "delta_z"):
        np.testing.assert_array_equal(compiled[q], plain[q])
    assert np.all(plain["delta_h"] > 0)
    # a CPU's pilot: one program, its depths padded too; the same numbers to rounding
    with ThreadPoolExecutor(2) as pool:
        ahead = design.compile_pilot(pool, Linear(), law, xs, xs, steps=1, pad_depth=True,
                                     **kwargs)  # fmt: skip
        padded = design.pilot_errors(Linear(), law, xs, xs, ref, key=jr.key(5), compiled=ahead,
                                     pad_depth=True, **kwargs)  # fmt: skip
    assert sorted(ahead) == [(4, 4)]
    for q in ("delta_h", "delta_b", "delta_z"):
        np.testing.assert_allclose(padded[q], plain[q], rtol=1e-12)


def test_each_reference_solve_is_counted_once_it_is_computed():
    """The progress of a reference (`progress()`, the runner's bar): one call per solve,
    `reference_solves` of them, each once its solve is done (its flags readable), and the
    same numbers as without it."""
    law = mf.SamplerLaw(lambda k: 0.3 * jr.normal(k, (2, 2)))
    xs = jnp.array([[1.0, 0.0], [0.6, 0.8]])
    kwargs = dict(learning_rate=0.1, steps=1, rtol=1e-8, depths=[4],
                  probes=law.sample(jr.key(9))[None])  # fmt: skip
    p = mf.monte_carlo_particles(law, 2**8, key=jr.key(0))
    seen = []
    counted = cref.solve_reference_replicas(Linear(), p, xs, xs, replicas=4,
                                            progress=lambda: seen.append(1), **kwargs)  # fmt: skip
    assert len(seen) == cref.reference_solves(None, 4) == 5
    plain = cref.solve_reference_replicas(Linear(), p, xs, xs, replicas=4, **kwargs)
    np.testing.assert_array_equal(counted["h_L4"], plain["h_L4"])
    seen.clear()
    check = mf.monte_carlo_particles(law, 2**6, key=jr.key(1))
    cref.solve_reference(Linear(), p, check, xs, xs, progress=lambda: seen.append(1), **kwargs)
    assert len(seen) == cref.reference_solves(check, 4) == 3


def test_refinement_stops_at_the_target_and_at_the_budget():
    """`refine_reference` against a solve whose error is exactly c/sqrt(N)."""
    calls = []

    def solve(N):
        calls.append(N)
        e = 1.0 / math.sqrt(N)
        return {"err_particles": np.array([e, 2 * e]), "err_tolerance": np.zeros(2), "err_z": 0}

    ref, history = cref.refine_reference(solve, 2**10, target=1e-3, most=2**24)
    assert history[-1]["error"] <= 1e-3 and calls[-1] == history[-1]["particles"]
    assert all(h["error"] > 1e-3 for h in history[:-1])  # it stopped at the first that met it
    assert calls[0] == 2**10 and all(b >= 4 * a for a, b in zip(calls, calls[1:], strict=False))
    calls.clear()
    ref, history = cref.refine_reference(solve, 2**10, target=1e-6, most=2**16)
    assert calls[-1] == 2**16 and history[-1]["error"] > 1e-6  # the budget stops it
    calls.clear()
    _, history = cref.refine_reference(solve, 2**20, target=1e-2, most=2**24)
    assert calls == [2**20] and len(history) == 1  # already within the target
    # the b part is judged where asked
    _, history = cref.refine_reference(solve, 2**10, target=1e-3, most=2**24, quantity="delta_b")
    assert history[-1]["error"] <= 1e-3 and history[-1]["particles"] >= 4 * 2**20 - 1
    assert cref.particles_for(1e-2, 2**10, 1e-3, 2**30) == 2**19  # (2 x 10)^2 x 2^10 -> 2^19
    assert cref.particles_for(1e-2, 2**10, 1e-3, 2**16) == 2**16  # the budget
    assert cref.particles_for(1e-4, 2**10, 1e-3, 2**16) == 2**10  # already within


@pytest.mark.parametrize("a,b,floor", [(0.12, 0.73, 8e-4), (0.34, 0.92, 2e-3), (0.6, 1.6, 4e-7)])
def test_design_puts_each_line_where_its_term_dominates_above_the_floor(a, b, floor):
    d = design.design_lines(a, b, floor, seeds=10, units=2**24, max_depth=256, max_width=2**16)
    assert d["ok_L"] and d["ok_M"], d["reasons"]
    E_min = 15 * floor
    L_hi, M_L = max(d["L"]), d["M_for_L"]
    # the L line: Euler term above the floor's margin, Monte-Carlo term 4x below it
    assert a / L_hi >= E_min * (1 - 1e-12)
    assert b / math.sqrt(L_hi * M_L) <= a / L_hi / 4 or M_L == 2**16
    assert 10 * L_hi * M_L <= 2**24
    # the M line: Monte-Carlo term above the margin and 3x the Euler term
    L_M, M_hi = d["L_for_M"], max(d["M"])
    assert b / math.sqrt(L_M * M_hi) >= E_min * (1 - 1e-12)
    assert b / math.sqrt(L_M * M_hi) >= 3 * a / L_M * (1 - 1e-12)
    assert len(d["L"]) >= 3 and len(d["M"]) >= 3
    # the target of the reference then lies 12x below the smallest predicted error
    target = cref.reference_target(a, b, d)
    assert target >= floor * 15 / 12 * (1 - 1e-12)


def test_design_says_why_it_cannot_place_a_line():
    d = design.design_lines(0.01, 1.0, 1e-2, seeds=10, units=2**24, max_depth=256, max_width=2**16)
    assert not d["ok_L"] and "fewer than three depths" in " ".join(d["reasons"])
    d = design.design_lines(1.0, 0.0, 1e-6, seeds=10, units=2**24, max_depth=256, max_width=2**16)
    assert not d["ok_M"] and "no Monte-Carlo term" in " ".join(d["reasons"])
    # a centred law at step 0: the line against L at M = 1 (only the Monte-Carlo term)
    d = design.design_lines(
        0.0, 1.0, 1e-4, seeds=10, units=2**24, max_depth=256, max_width=2**16, trivial=True
    )
    assert d["M_for_L"] == 1 and d["ok_L"]


def _user():
    import importlib.util

    spec = importlib.util.spec_from_file_location("user_blocks_for_tests", USER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_first_pass_detects_a_centred_law_and_heavy_tails():
    ub = _user()
    xs, _ = cv.circle_data(3, 2)
    layer = mf.blocks.LayerUnits(ub.PerceptronTanh())
    key = jr.key(6)
    centred = design.first_pass_mean(layer, ub.centred_uniform_law(), xs, key=key)
    assert centred["centred"] and not centred["heavy_tailed"]
    assert not design.first_pass_mean(layer, ub.uniform_law(), xs, key=key)["centred"]
    heavy = design.first_pass_mean(ub.SineUnit(), ub.cauchy_law(), xs, key=key)
    assert heavy["heavy_tailed"] and heavy["max_share"] > 0.05
    light = design.first_pass_mean(ub.SineUnit(), ub.sine_law(), xs, key=key)
    assert not light["heavy_tailed"] and light["max_share"] < 0.005


def _cli(*argv, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "meanfield", "study", "mean-ode", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
    )


def _cli_here(argv, capsys, monkeypatch):
    """`meanfield study mean-ode ARGV` run in this process (`meanfield.cli.main`, from the
    repository's root as `_cli`): its exit status and what it wrote to stderr. A Python
    warning raised on the way fails the test (in a process of its own it would be a
    second line on stderr)."""
    import warnings

    from meanfield.cli import main

    monkeypatch.chdir(ROOT)
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(SystemExit) as exit_:  # argparse's refusals exit; main returns
            raise SystemExit(main(["study", "mean-ode", *argv]))
    assert not caught, [str(w.message) for w in caught]
    return exit_.value.code, capsys.readouterr().err


def _bad_files(tmp_path):
    (tmp_path / "bad.py").write_text(
        "import jax.numpy as jnp, jax.random as jr\n"
        "import meanfield as mf\n"
        "class Wide(mf.AbstractUnitBlock):\n"
        "    def __call__(self, h, z):\n"
        "        return jnp.concatenate([h, z['a']])\n"
        "def strings():\n"
        "    return mf.SamplerLaw(lambda key: {'a': 1.5})\n"
        "def law():\n"
        "    return mf.SamplerLaw(lambda key: {'a': jr.normal(key, (1,))})\n"
        "boom = 1 / 0 if False else None\n"
        "class Quits(mf.AbstractUnitBlock):\n"
        "    def __call__(self, h, z):\n"
        "        raise SystemExit(0)\n"
    )
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(0)\n")
    return tmp_path / "bad.py"


@pytest.mark.parametrize(
    "argv,flag,text",
    [
        (["--block", "no_such_module:X", "--law", f"{USER}:sine_law"], "--block", "cannot import"),
        (["--block", f"{USER}:Nope", "--law", f"{USER}:sine_law"], "--block", "has no 'Nope'"),
        (
            ["--block", f"{USER}:sine_law", "--law", f"{USER}:sine_law"],
            "--block",
            "not an Abstract",
        ),
        (
            ["--block", f"{USER}:SineUnit", "--law", f"{USER}:SineUnit"],
            "--law",
            "not an AbstractLaw",
        ),
        (["--block", "nofile.py:SineUnit", "--law", f"{USER}:sine_law"], "--block", "no such file"),
        (["--block", "SineUnit", "--law", f"{USER}:sine_law"], "--block", "MODULE:NAME"),
        (["--block", f"{USER}:SineUnit"], "--law", "give the law"),
        (
            ["--block", f"{USER}:SineUnit", "--law", f"{USER}:sine_law", "--activation", "tanh"],
            "--activation",
            "built-in",
        ),
        (["--law", f"{USER}:sine_law", "--sigma-u", "2"], "--sigma-u", "built-in"),
        (["--block", "BAD:Wide", "--law", "BAD:law"], "--block", "has shape (3,)"),
        (["--block", f"{USER}:SineUnit", "--law", "BAD:strings"], "--law", "pytree of float"),
        # user code that calls exit() would end the study silently with status 0
        (["--block", "EXITS:X", "--law", f"{USER}:sine_law"], "--block", "it called exit(0)"),
        (["--block", f"{USER}:SineUnit", "--law", "builtins:exit"], "--law", "it called exit"),
        (["--block", "BAD:Quits", "--law", "BAD:law"], "--block", "it called exit(0)"),
        (
            [
                "--block",
                f"{USER}:SineUnit",
                "--law",
                f"{USER}:sine_law",
                "--reference",
                "quadrature",
            ],
            "--reference",
            "Gaussian law",
        ),
    ],
)
def test_bad_block_or_law_is_one_line_naming_the_option(
    tmp_path, argv, flag, text, capsys, monkeypatch
):
    """Refused before anything is written, in one line on stderr naming the option, exit
    status 2: through `meanfield.cli.main` in this process (a fresh Python process per case
    cost 2 s of start-up each), and the case whose law is `builtins.exit` (which also
    closes stdin) as its own `python -m meanfield` process, as users run it."""
    bad = str(_bad_files(tmp_path))
    argv = [a.replace("BAD", bad).replace("EXITS", str(tmp_path / "exits.py")) for a in argv]
    out = tmp_path / "out"
    argv = [*argv, "--out", str(out), "--no-progress"]
    if "builtins:exit" in argv:
        result = _cli(*argv)
        code, stderr = result.returncode, result.stderr
    else:
        code, stderr = _cli_here(argv, capsys, monkeypatch)
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"meanfield study mean-ode: error: {flag}:")
    assert text in lines[0], lines[0]
    assert not out.exists()  # refused before anything was written


def test_a_heavy_tailed_law_is_reported_not_fitted(tmp_path, capsys, monkeypatch):
    out = tmp_path / "cauchy"
    code, stderr = _cli_here(
        ["--block", f"{USER}:SineUnit", "--law", f"{USER}:cauchy_law", "--out", str(out),
         "--no-progress"], capsys, monkeypatch,
    )  # fmt: skip
    assert code == 0, stderr
    r = json.loads((out / "results.json").read_text())
    assert r["verdict"].startswith("not judged") and r["fits"] == [] and r["points"] == []
    assert r["first_pass"]["heavy_tailed"] and "heavy-tailed" in r["warnings"][0]


def test_the_built_in_block_through_the_harness_gives_the_built_in_numbers(tmp_path, self_checked):
    """The 2LP and its law given as a user's block and law (`--block`, `--law` through
    the Python API) give the built-in study's numbers on the same grid and seed."""
    built_in = mf.run_study(
        "mean-ode", out=str(tmp_path / "a"), L=[2, 4], M=[1, 2], L_for_M=4, fit_M_max=2,
        seeds=2, order=8, no_progress=True, activation="gelu", init="non-centred",
    )  # fmt: skip
    user = mf.mean_ode_study(
        mf.TwoLayerBlock("gelu"), mf.TwoLayerNonCentredLaw(2, sigma_u=1.25, sigma_xi=0.0),
        out=str(tmp_path / "b"), design="grid", L=[2, 4], M=[1, 2], L_for_M=4, fit_M_max=2,
        seeds=2, order=8, no_progress=True,
    )  # fmt: skip
    assert user["reference"]["method"] == "gauss-hermite"
    self_checked(user)
    for p, q in zip(built_in["points"], user["points"], strict=True):
        for name in ("delta_h", "delta_b", "delta_z", "loss"):
            assert p[name]["values"] == q[name]["values"], name
    assert built_in["fits"] == user["fits"]
    with pytest.raises(ValueError, match="^colour: not an option"):
        mf.mean_ode_study(Linear(), mf.SamplerLaw(lambda k: jnp.eye(2)), out=str(tmp_path / "c"),
                          colour="red")  # fmt: skip


class Ridge(mf.AbstractUnitBlock):
    """φ(h, z) = a tanh(wᵀh + c): a strong drift and small fluctuations (b/a small)."""

    def __call__(self, h, z):
        return z["a"] * jnp.tanh(z["w"] @ h + z["c"])


def ridge_law():
    def draw(key):
        kw, ka = jr.split(key)
        return {
            "w": jnp.array([1.5, -1.0]) + 0.2 * jr.normal(kw, (2,)),
            "a": jnp.array([1.2, 0.9]) + 0.2 * jr.normal(ka, (2,)),
            "c": jnp.asarray(0.3),
        }

    return mf.SamplerLaw(draw)


def test_the_euler_part_on_batch_0_is_judged_against_its_own_limit(tmp_path, monkeypatch):
    """A Monte-Carlo reference too large for the Euler part at every layer: the Euler part
    runs batch 0 of its particles, against batch 0's limit solved with the reference, which
    equals that subset's limit solved on its own (to the solver's tolerance) and is not the
    reference itself; the reference is solved at `MONTE_CARLO_RTOL`, its tolerance part
    measured and far below its Monte-Carlo part."""
    from meanfield.limits.mean_ode import MeanODE, solve_mean_ode
    from meanfield.studies.mean_ode import study as mean_ode
    from meanfield.studies.mean_ode.reference import MONTE_CARLO_RTOL, monte_carlo

    monkeypatch.setattr(mean_ode, "EULER_UNITS", 2**12)  # 2^12 particles x 4 layers > it
    out = tmp_path / "euler"
    r = mf.mean_ode_study(
        Ridge(), ridge_law, out=str(out), design="grid", reference="monte-carlo",
        particles=2**12, L=[2, 4], M=[1, 2], L_for_M=4, fit_M_max=2, seeds=2, no_progress=True,
    )  # fmt: skip
    assert r["config"]["rtol"] == MONTE_CARLO_RTOL == r["reference"]["rtol"]
    parts = r["reference"]["error_parts"]
    assert 0 < max(parts["tolerance_h_b"]) < 1e-2 * min(parts["monte_carlo_h_b"]), parts
    assert r["decomposition_particles"] == 2**12 // 8
    ref = np.load(out / "points" / "reference.npz")
    cfg = {**r["config"], "seed": r["config"]["seed"]}
    batch = cref.replica_batch(monte_carlo(cfg, ridge_law(), 2**12), 0, 8)
    xs, ys = cv.circle_data(cfg["inputs"], cfg["d"])
    model = MeanODE(Ridge(), batch, xs, ys, cfg["lr"])
    own = cref.limit_grids(solve_mean_ode(model, cfg["steps"], rtol=1e-10, atol=1e-10), [2, 4])
    tol = max(parts["tolerance_h_b"])
    for L in (2, 4):
        assert float(np.max(np.abs(ref[f"euler_h_L{L}"] - own[L][0]))) < 10 * tol
        assert float(np.max(np.abs(ref[f"euler_h_L{L}"] - ref[f"h_L{L}"]))) > 100 * tol


SMALL = {
    "max_depth": 32, "max_width": 2**12, "units": 2**16, "pilot_seeds": 2,
    "pilot_particles": 2**12, "particles_max": 2**17,
}  # fmt: skip


def test_auto_design_on_a_small_budget(tmp_path, monkeypatch):
    """The whole automatic path on a budget that runs in seconds: pilot reference, Euler
    coefficient, pilot grid, design, refined Monte-Carlo reference, the grid and its fits;
    every fitted Δ^h lies 10x above the reference's own error, the slopes near theory."""
    from meanfield.studies.mean_ode import design as mean_ode_design

    monkeypatch.setitem(mean_ode_design.AUTO, "quick", SMALL)
    monkeypatch.setattr(mean_ode_design, "PILOT_POINTS", [(2, 1), (2, 16), (8, 1), (8, 16)])
    drawn = _record_drawn(monkeypatch)  # what the study's own figures draw
    r = mf.mean_ode_study(Ridge(), ridge_law, out=str(tmp_path / "auto"), seeds=4, no_progress=True)
    design = r["design"]
    assert r["config"]["design"] == "auto" and r["reference"]["method"] == "monte-carlo"
    # the Euler coefficient from the pilot reference's batch 0 (its limit solved there)
    assert design["euler_coefficient"]["particles"] == SMALL["pilot_particles"] // 8
    assert design["pilot_fit"]["a_from"] == "Euler part" and design["pilot_fit"]["b"] > 0
    assert design["lines"]["ok_L"] and design["lines"]["ok_M"], design["lines"]["reasons"]
    refinement = r["reference"]["refinement"]
    assert refinement[0]["particles"] <= r["reference"]["particles"] <= SMALL["particles_max"]
    floor = r["reference"]["error_estimate"]
    assert refinement[-1]["error_estimate"] == floor
    by = {(p["L"], p["M"], p["steps"]): p for p in r["points"]}
    for f in r["fits"]:
        if f["quantity"] != "delta_h" or f.get("against") not in ("L", "M"):
            continue
        k = f["fixed"]["steps"]
        for size in f["sizes"]:
            L, M = (size, f["fixed"]["M"]) if f["against"] == "L" else (f["fixed"]["L"], size)
            assert by[(int(L), int(M), k)]["delta_h"]["mean"] >= 10 * floor
        theory = -1.0 if f["against"] == "L" else -0.5
        assert f["slope"] is not None and abs(f["slope"] - theory) < 0.25, f
    assert (tmp_path / "auto" / "convergence.png").exists()
    # the figure is drawn on the grid that ran (the design's lines), not the preset's
    lines = design["lines"]
    assert r["grid"]["L"] == lines["L"] and r["grid"]["L_for_M"] == lines["L_for_M"]
    assert r["config"]["L"] != r["grid"]["L"]  # the preset's depths were not run
    assert r["config"]["law"].endswith("ridge_law")  # a function's name, not its type
    assert drawn, "the study drew no series"
    _every_point_drawn(drawn, r)


def _record_drawn(monkeypatch) -> list:
    """The (x, y) of every series the mean-ODE figures draw from here on (a list that
    fills as they are drawn: the study's own figures, `mean_ode.plot`)."""
    from meanfield.studies.mean_ode import plot as mean_ode_plot

    drawn = []

    def record(ax, xs, ys, *args, **kwargs):
        drawn.extend(zip(xs, ys, strict=True))
        return real(ax, xs, ys, *args, **kwargs)

    real = mean_ode_plot.loglog_series
    monkeypatch.setattr(mean_ode_plot, "loglog_series", record)
    return drawn


def _every_point_drawn(drawn, r):
    """Every finished point at the figure's step on the grid's lines is drawn: (L, Δ^h) in
    the top row, (M, Δ^h) at L_for_M in the bottom row."""
    grid, k = r["grid"], r["config"]["steps"]
    for p in r["points"]:
        if p["steps"] != k:
            continue
        if p["L"] in grid["L"] or p["L"] == grid["L_for_M"]:
            x = p["L"] if p["L"] in grid["L"] else p["M"]
            assert (x, p["delta_h"]["mean"]) in drawn, (p["L"], p["M"])
