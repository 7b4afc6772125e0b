"""`meanfield study mean-ode` end to end at a tiny size, and its input errors."""

import itertools
import json
import math

import pytest

from meanfield.cli import main

TINY = [
    "--L",
    "4,8",
    "--M",
    "1,4",
    "--L-for-M",
    "16",
    "--fit-M-max",
    "4",
    "--seeds",
    "3",
    "--order",
    "12",
    "--no-progress",
    "--compile-workers",
    "1",
]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("mean_ode") / "run"
    with pytest.MonkeyPatch.context() as mp:  # with its self-check (`self_checked` below)
        mp.delenv("MEANFIELD_NO_SELF_CHECK", raising=False)
        assert main(["study", "mean-ode", *TINY, "--out", str(out)]) == 0
    return out


def test_results_json_has_the_schema(tiny_run, self_checked):
    r = json.loads((tiny_run / "results.json").read_text())
    self_checked(r)
    for key in ("study", "config", "points", "fits", "reference", "timing", "decomposition"):
        assert key in r
    assert r["study"] == "mean-ode"
    assert r["config"]["L"] == [4, 8] and r["config"]["seeds"] == 3
    # (L, M) grid plus the line at L_for_M, for steps 0 and 1
    pairs = {(p["L"], p["M"], p["steps"]) for p in r["points"]}
    assert pairs == {(L, M, k) for L in (4, 8, 16) for M in (1, 4) for k in (0, 1)}
    for p in r["points"]:
        for q in ("delta_h", "delta_b", "delta_z"):
            assert set(p[q]) >= {"mean", "std", "count", "exploded"}
            assert p[q]["count"] + p[q]["exploded"] == 3
        if p["steps"] == 0:
            assert p["delta_z"]["mean"] == 0.0  # coupled copies start equal
    for f in r["fits"]:
        if "slope" in f:
            assert {"quantity", "against", "fixed", "slope", "ci95", "theory"} <= set(f)
    assert any(f.get("against") == "L" and f["theory"] == -1.0 for f in r["fits"])
    assert any(f.get("against") == "M" and f["theory"] == -0.5 for f in r["fits"])
    assert any(f.get("model") == "a/L + b/sqrt(LM)" for f in r["fits"])
    # the headline: the whole law per error and step; the one-term slopes secondary
    finite = {(f["quantity"], f["fixed"]["steps"]) for f in r["rates"] if f["part"] == "finite"}
    assert finite == {
        ("delta_h", 0),
        ("delta_b", 0),
        ("delta_h", 1),
        ("delta_b", 1),
        ("delta_z", 1),
    }
    for f in r["rates"]:
        if f["part"] == "finite" and f.get("q") is not None:
            assert f["n_points"] == 6 and f["draws"] + f["excluded"] == 18
    assert all(f.get("secondary") for f in r["fits"] if f.get("against"))
    assert r["reference"]["error_estimate"] >= 0
    assert {"total_seconds", "device"} <= set(r["timing"])
    # one depth loop per program, recorded (`--depth-loop auto`: the scan on a CPU)
    programs = r["timing"]["depth_loop_by_program"]
    assert r["timing"]["depth_loop"] == "auto" and len(programs) == r["timing"]["programs"]
    assert set(programs.values()) <= {"scan", "pallas"}
    assert (tiny_run / "convergence.png").stat().st_size > 10_000


def test_resume_with_a_different_configuration_is_refused(tiny_run, capsys):
    code = main(["study", "mean-ode", *TINY, "--seeds", "4", "--out", str(tiny_run), "--resume"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--resume" in err and "seeds" in err and len(err.strip().splitlines()) == 1


def test_existing_study_needs_resume_or_overwrite(tiny_run, capsys):
    assert main(["study", "mean-ode", *TINY, "--out", str(tiny_run)]) == 2
    assert "--resume" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--L", "8,4"], "--L"),
        (["--L", ""], "--L"),
        (["--M", "0,4"], "--M"),
        (["--seeds", "-2"], "--seeds"),
        (["--activation", "swishy"], "--activation"),
        (["--preset", "huge"], "--preset"),
        (["--init", "uniform"], "--init"),
        (["--steps", "-1"], "--steps"),
        (["--lr", "nan"], "--lr"),
        (["--depth-loop", "fast"], "--depth-loop"),
    ],
)
def test_bad_input_exits_2_naming_the_argument(args, needle, tmp_path, capsys):
    out = tmp_path / "never"
    with pytest.raises(SystemExit) as exit_:
        code = main(["study", "mean-ode", "--out", str(out), *args])
        raise SystemExit(code)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1, err
    assert not out.exists()


def test_output_folder_that_is_a_file(tmp_path, capsys):
    target = tmp_path / "file.txt"
    target.write_text("not a folder")
    assert main(["study", "mean-ode", *TINY, "--out", str(target)]) == 2
    assert "--out" in capsys.readouterr().err
    assert target.read_text() == "not a folder"


def test_a_seed_whose_network_exploded_is_out_of_every_error_at_that_step():
    """As at L = 8, M = 1 of the quick preset: one network's loss blows up in its GD step
    while its Δ^h is still below the threshold; at that step it is out of every error's
    mean, and at step 0 (before the step) it counts as usual."""
    from meanfield.coupling.convergence import summarize_steps

    values = {  # (seeds, steps + 1)
        "delta_h": [[0.5, 0.2], [0.7, 6.8e4], [0.6, 0.4]],
        "delta_b": [[2.0, 0.6], [3.0, 2.3e10], [4.0, 1.0]],
        "delta_z": [[0.0, 1.0], [0.0, 14.0], [0.0, 2.0]],
        "loss": [[1.0, 1.3], [2.0, 7.6e8], [3.0, 1.1]],
    }
    before, after = summarize_steps(values, steps=1)
    for q, v in values.items():
        column = [row[0] for row in v]
        assert before[q]["count"] == 3 and before[q]["exploded"] == 0
        assert before[q]["mean"] == pytest.approx(sum(column) / 3)
        kept = [v[0][1], v[2][1]]
        assert after[q]["count"] == 2 and after[q]["exploded_draws"] == [1]
        assert after[q]["mean"] == pytest.approx(sum(kept) / 2)
        assert after[q]["values"][1] == v[1][1]  # the measured value is still recorded


def test_program_boxes_pad_only_cheap_points():
    from meanfield.coupling.design import program_boxes

    specs = [(L, M) for L in (8, 64) for M in (1, 16, 4096)]
    none = program_boxes(specs, seeds=10, pad_units=0)
    assert all(box == pair for pair, box in none.items())
    budget = 10 * 64 * 16
    boxes = program_boxes(specs, seeds=10, pad_units=budget)
    for (L, M), (Lb, Mb) in boxes.items():
        assert Lb == L and Mb >= M and 10 * L * (Mb - M) <= budget
    assert boxes[(64, 1)] == (64, 16) and boxes[(8, 1)] == (8, 16)  # cheap: padded
    assert boxes[(8, 16)] == (8, 16) and boxes[(64, 4096)] == (64, 4096)
    assert len(set(boxes.values())) == 4
    # everything at one depth fits a generous budget: one program per depth
    assert len(set(program_boxes(specs, seeds=10, pad_units=2**40).values())) == 2
    # deeper boxes too (the CPU default): the cheap points join the (64, 16) program
    deep = program_boxes(specs, seeds=10, pad_units=budget, pad_depth=True)
    for (L, M), (Lb, Mb) in deep.items():
        assert Lb >= L and Mb >= M and 10 * (Lb * Mb - L * M) <= budget
    assert {deep[(8, 1)], deep[(8, 16)], deep[(64, 1)]} == {(64, 16)}
    assert deep[(8, 4096)] == (8, 4096)  # 10 x 56 x 4096 padded units: too many
    assert len(set(deep.values())) == 3
    assert len(set(program_boxes(specs, seeds=10, pad_units=2**40, pad_depth=True).values())) == 1


def _grid_cost(boxes, seeds, compile_units):
    """The cost `merged_boxes` lowers, computed here from its answer: padded units plus
    `compile_units` per program."""
    padding = sum(seeds * (math.prod(box) - math.prod(p)) for p, box in boxes.items())
    return padding + compile_units * len(set(boxes.values()))


def _partitions(items):
    """Every partition of `items` into groups (a plain recursion)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _partitions(rest):
        for i in range(len(part)):
            yield part[:i] + [[first, *part[i]]] + part[i + 1 :]
        yield [[first], *part]


def test_merged_boxes_price_the_whole_grid():
    """`merged_boxes` against an exhaustive search of every grouping of small grids, the
    per-point rule (`program_boxes`) and the quick preset's grid on a CPU."""
    import random

    from meanfield.coupling.design import merged_boxes, program_boxes

    # the quick preset's grid, on a CPU (depths padded, 2^22 units a compile)
    quick = [(L, M) for L in (8, 16, 32, 64, 128) for M in (1, 4, 16, 64, 16384)]
    quick += [(1024, M) for M in (1, 4, 16, 64)]
    boxes = merged_boxes(quick, 10, 2**22, pad_depth=True)
    assert sorted(set(boxes.values())) == [(16, 16384), (32, 16384), (64, 16384), (128, 64),
                                           (128, 16384), (1024, 64)]  # fmt: skip
    assert {boxes[(L, M)] for L in (8, 16, 32, 64, 128) for M in (1, 4, 16, 64)} == {(128, 64)}
    assert boxes[(8, 16384)] == (16, 16384)
    per_point = program_boxes(quick, 10, 2**22, pad_depth=True)
    assert _grid_cost(boxes, 10, 2**22) < _grid_cost(per_point, 10, 2**22)
    # no budget: every point its own; any budget: each point in a box that holds it, of
    # its own depth unless depths are padded, and no two boxes worth merging
    assert merged_boxes(quick, 10, 0) == {p: p for p in quick}
    for pad_depth in (False, True):
        for units in (2**18, 2**22, 2**26, 2**40):
            boxes = merged_boxes(quick, 10, units, pad_depth=pad_depth)
            for p, box in boxes.items():
                assert all(x <= y for x, y in zip(p, box, strict=True))
                assert pad_depth or box[0] == p[0]
            cost = _grid_cost(boxes, 10, units)
            for a, b in itertools.combinations(sorted(set(boxes.values())), 2):
                if not pad_depth and a[0] != b[0]:
                    continue
                merged = {p: (max(a[0], b[0]), max(a[1], b[1])) if box in (a, b) else box
                          for p, box in boxes.items()}  # fmt: skip
                assert _grid_cost(merged, 10, units) >= cost
    # against the best grouping of random small grids (exhaustive search): a greedy
    # merge, measured optimal in 197 of these 200 and within 15% in the others
    rng, optimal, worst = random.Random(0), 0, 1.0
    for _ in range(200):
        points = sorted({(rng.choice([2, 4, 8, 16, 64]), rng.choice([1, 4, 16, 256]))
                         for _ in range(6)})  # fmt: skip
        units, pad_depth = rng.choice([10, 100, 1000, 5000]), rng.random() < 0.5
        box = lambda group: (max(p[0] for p in group), max(p[1] for p in group))
        best = min(
            _grid_cost({p: box(group) for group in part for p in group}, 3, units)
            for part in _partitions(points)
            if pad_depth or all(len({p[0] for p in group}) == 1 for group in part)
        )
        found = _grid_cost(merged_boxes(points, 3, units, pad_depth=pad_depth), 3, units)
        assert found >= best
        optimal += found == best
        worst = max(worst, found / best)
    assert optimal >= 190 and worst < 1.2, (optimal, worst)
    with pytest.raises(ValueError, match="compile_units"):
        merged_boxes(quick, 10, -1)


def test_padded_box_program_equals_the_point_own(key):
    """The study's glue for a padded box: the point's limit grid padded by `pad_grid`,
    its own depth and width, in a deeper and wider program, give its own program's
    numbers (to rounding; `coupled_errors` holds the padding's arithmetic)."""
    import jax.numpy as jnp
    import jax.random as jr
    import numpy as np

    import meanfield as mf
    from meanfield.coupling.design import pad_grid, seed_program

    law = mf.TwoLayerNonCentredLaw(2, sigma_u=1.25, sigma_xi=0.3)
    block = mf.TwoLayerBlock("gelu")
    xs = jr.normal(jr.fold_in(key, 1), (3, 2))
    ys = jnp.roll(xs, 1, axis=1)
    L, M, Lb, Mb, seeds, steps = 3, 2, 6, 5, 3, 2
    h = jr.normal(jr.fold_in(key, 2), (steps + 1, L + 1, 3, 2))
    b = jr.normal(jr.fold_in(key, 3), (steps + 1, L + 1, 3, 2))
    keys = jr.split(jr.fold_in(key, 4), seeds)
    own = seed_program(block, law, xs, ys, 0.3, L, M, seeds, 2**20)
    box = seed_program(block, law, xs, ys, 0.3, Lb, Mb, seeds, 2**20)
    exact = own(keys, h, b, jnp.int32(L), jnp.int32(M))
    padded = box(keys, pad_grid(h, Lb), pad_grid(b, Lb), jnp.int32(L), jnp.int32(M))
    # and with the loops over layers unrolled (`--unroll`), 4 layers per step
    unroll = mf.ScanLoop(unroll=4)
    unrolled = seed_program(block, law, xs, ys, 0.3, Lb, Mb, seeds, 2**20, loop=unroll)
    both = unrolled(keys, pad_grid(h, Lb), pad_grid(b, Lb), jnp.int32(L), jnp.int32(M))
    # and trained through the fused kernels (`--depth-loop pallas`; interpret mode here)
    kernels = seed_program(block, law, xs, ys, 0.3, Lb, Mb, seeds, 2**20, loop=mf.FusedLoop())
    fused = kernels(keys, pad_grid(h, Lb), pad_grid(b, Lb), jnp.int32(L), jnp.int32(M))
    for name in ("delta_h", "delta_b", "delta_z", "loss"):
        np.testing.assert_allclose(getattr(padded, name), getattr(exact, name), rtol=1e-12)
        np.testing.assert_allclose(getattr(both, name), getattr(exact, name), rtol=1e-12)
        np.testing.assert_allclose(getattr(fused, name), getattr(exact, name), rtol=1e-12)
    assert float(np.min(exact.delta_z[:, -1])) > 0  # the comparison is not vacuous
    # the padded rows repeat the limit at s = 1 (what `coupled_errors` asks of them)
    np.testing.assert_array_equal(pad_grid(h, Lb)[:, : L + 1], h)
    np.testing.assert_array_equal(pad_grid(h, Lb)[:, L + 1 :], jnp.repeat(h[:, L:], Lb - L, 1))


def test_depth_loop_per_program(monkeypatch):
    """`--depth-loop`: the scan on a CPU unless the kernels are asked for; the kernels only
    where a program's layer fits a kernel tile (M·d), the scan elsewhere; on a GPU
    (`auto`), only where the kernels also compile there."""
    import jax

    import meanfield as mf
    from meanfield.studies.mean_ode.study import depth_loop, loop_name

    law = mf.TwoLayerNonCentredLaw(2, sigma_u=1.25)
    block = mf.TwoLayerBlock("gelu")
    on_cpu = jax.default_backend() == "cpu"  # the suite also runs on a GPU machine

    def name(requested, L, M):
        return loop_name(depth_loop(requested), block, law, L, M, 3)

    assert name("auto", 64, 16) == ("scan" if on_cpu else "pallas")
    assert name("scan", 64, 16) == "scan"
    assert name("pallas", 64, 1024) == "pallas"  # 1024 x 2 fits a tile
    assert name("pallas", 64, 1025) == "scan"  # 2048 x 2 does not
    assert depth_loop("scan", 4) == mf.ScanLoop(4)
    with pytest.raises(ValueError, match="depth loop must be one of"):
        depth_loop("fast")
    # `auto` on an accelerator follows the compile probe, which sees the program's shapes
    seen = []

    def probe(self, block, params, n):
        seen.append((params.u.shape, n))
        M = params.u.shape[1]
        return M <= 64, "ok" if M <= 64 else "does not compile"

    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.setattr(mf.FusedLoop, "supports", probe)
    assert name("auto", 16384, 64) == "pallas"
    assert name("auto", 16384, 256) == "scan"
    assert name("scan", 16384, 64) == "scan"
    assert seen == [((16384, 64, 2), 3), ((16384, 256, 2), 3)]


def test_fused_training_program_lowers_for_a_gpu(key, lower_for_cuda):
    """The study's padded seed program with `--depth-loop pallas` (vmapped seeds, GD
    steps, weighted padding units, float64) lowers for an H100 from this CPU machine,
    with the forward and backward kernels as Triton calls inside the steps loop."""
    import jax
    import jax.numpy as jnp
    import jax.random as jr

    import meanfield as mf
    from meanfield.coupling.mean_ode import LimitOnGrid, coupled_errors, draw_units

    law = mf.TwoLayerNonCentredLaw(2, sigma_u=1.25, sigma_xi=0.3)
    block = mf.TwoLayerBlock("gelu")
    xs = jr.normal(jr.fold_in(key, 1), (3, 2))
    Lb, Mb, steps = 12, 6, 2
    grid = jr.normal(jr.fold_in(key, 2), (2, steps + 1, Lb + 1, 3, 2))
    gpu = mf.FusedLoop(interpret=False)

    def program(keys, h, b, depth, width):
        def one(k):
            net = mf.ResNet(block, draw_units(law, k, Lb, Mb), 1.0 / (Lb * Mb), loop=gpu)
            return coupled_errors(
                net,
                xs,
                jnp.roll(xs, 1, axis=1),
                LimitOnGrid(h=h, b=b),
                learning_rate=0.3,
                depth=depth,
                width=width,
            )

        return jax.vmap(one)(keys)

    keys = jr.split(jr.fold_in(key, 3), 4)
    text = lower_for_cuda(program, keys, grid[0], grid[1], jnp.int32(7), jnp.int32(5))
    assert text.count("xla.gpu.triton") == 2
    assert "f64" in text


def test_study_points_equal_a_direct_computation(tiny_run):
    """The study's wiring against the library called directly: the limit solved here,
    read at s = l/L (`limit_on_grid`), and each seed's network drawn from its key (the
    study's documented key scheme: `fold_in` of 2, L, M, then one key per seed) and
    coupled with `coupled_errors` at the study's learning rate. Every seed's Δ^h, Δ^b,
    Δ^Z at every step must equal the study's, which pads points into shared programs."""
    import jax
    import jax.numpy as jnp
    import jax.random as jr
    import numpy as np

    import meanfield as mf
    from meanfield.coupling.mean_ode import LimitOnGrid, coupled_errors, draw_units, euler_errors
    from meanfield.limits.mean_ode import MeanODE, solve_mean_ode
    from meanfield.limits.particles import gauss_hermite_particles

    r = json.loads((tiny_run / "results.json").read_text())
    cfg = r["config"]
    assert cfg["init"] == "non-centred" and cfg["reference"] == "quadrature"
    law = mf.TwoLayerNonCentredLaw(cfg["d"], sigma_u=cfg["sigma_u"], sigma_xi=cfg["sigma_xi"])
    block = mf.TwoLayerBlock(cfg["activation"])
    n, d = cfg["inputs"], cfg["d"]  # the data of `make_data`, written out
    theta = np.pi * (np.arange(n) + 0.5) / n
    xs = jnp.asarray(np.sqrt(2 / d) * np.cos(theta[:, None] - np.pi * np.arange(d) / d))
    ys = jnp.roll(xs, -1, axis=1)
    model = MeanODE(block, gauss_hermite_particles(law, cfg["order"]), xs, ys, cfg["lr"])
    sol = solve_mean_ode(model, cfg["steps"], rtol=cfg["rtol"], atol=cfg["rtol"])
    for L, M in ((8, 4), (16, 1)):
        grid = mf.limit_on_grid(sol, L)
        point = {p["steps"]: p for p in r["points"] if (p["L"], p["M"]) == (L, M)}
        key = jr.fold_in(jr.fold_in(jr.fold_in(jr.key(cfg["seed"]), 2), L), M)

        @jax.jit  # one seed's network and its errors: compiled once for the seeds of (L, M)
        def seed_errors(k, L=L, M=M, grid=grid):
            net = mf.ResNet(block, draw_units(law, k, L, M), 1.0 / (L * M))
            return coupled_errors(
                net, xs, ys, LimitOnGrid(h=grid.h, b=grid.b), learning_rate=cfg["lr"]
            )

        for s, k in enumerate(jr.split(key, cfg["seeds"])):
            errs = seed_errors(k)
            for step in range(cfg["steps"] + 1):
                for q, got in (("delta_h", errs.delta_h), ("delta_b", errs.delta_b),
                               ("delta_z", errs.delta_z)):  # fmt: skip
                    want = point[step][q]["values"][s]
                    np.testing.assert_allclose(float(got[step]), want, rtol=1e-8, atol=1e-13)
    # the decomposition's Euler part (compiled ahead by the study): the nodes of the
    # reference's check rule (order q // 2) against their own limit, with the probe units
    # of its key scheme (`fold_in` of 5)
    probes = jax.vmap(law.sample)(jr.split(jr.fold_in(jr.key(cfg["seed"]), 5), cfg["probes"]))
    coarse = gauss_hermite_particles(law, max(cfg["order"] // 2, 2))
    assert r["decomposition_particles"] == coarse.count < model.particles.count
    coarse_model = MeanODE(block, coarse, xs, ys, cfg["lr"])
    coarse_sol = solve_mean_ode(coarse_model, cfg["steps"], rtol=cfg["rtol"], atol=cfg["rtol"])
    err_quadrature = max(r["reference"]["error_parts"]["quadrature_h_b"])
    for L in cfg["L"]:
        e = euler_errors(
            block, coarse, xs, ys, mf.limit_on_grid(coarse_sol, L), learning_rate=cfg["lr"],
            probes=probes,
        )  # fmt: skip
        # ... and the finer rule's own Euler part, which it equals to the quadrature's
        # error (at order 12 against 6: within a fifth of it)
        fine = euler_errors(
            block, model.particles, xs, ys, mf.limit_on_grid(sol, L), learning_rate=cfg["lr"],
            probes=probes,
        )  # fmt: skip
        rows = {row["steps"]: row for row in r["decomposition"] if row["L"] == L}
        for step in range(cfg["steps"] + 1):
            for q, got in (("delta_h", e.delta_h), ("delta_b", e.delta_b), ("delta_z", e.delta_z)):
                want = rows[step][f"{q}_euler"]
                np.testing.assert_allclose(float(got[step]), want, rtol=1e-8, atol=1e-13)
            for q in ("delta_h", "delta_b"):
                finer = float(getattr(fine, q)[step])
                assert abs(rows[step][f"{q}_euler"] - finer) <= err_quadrature, (L, step, q)


def test_order_advice_is_one_that_can_be_taken():
    """A law whose Gaussian coordinates leave no rule of >= 3 nodes within the node
    budget is pointed to the Monte-Carlo reference (it was told 'use at most 2', which
    the next check refuses); otherwise to the largest order that fits."""
    from meanfield.studies import StudyInputError
    from meanfield.studies.mean_ode.reference import quadrature_order
    from meanfield.studies.shared.own_block import make_law

    wide = make_law({"init": "centred", "d": 8, "sigma_u": 1.0, "sigma_v": 1.0})
    assert wide.gaussian_dim == 16
    with pytest.raises(StudyInputError, match="^--order: .*use --reference monte-carlo$"):
        quadrature_order(wide, 3)
    narrow = make_law({"init": "centred", "d": 2, "sigma_u": 1.0, "sigma_v": 1.0})
    with pytest.raises(StudyInputError, match="use at most 45$"):  # floor(2^22 ** (1/4))
        quadrature_order(narrow, 46)
    assert quadrature_order(narrow, 45) == 45


def test_figure_check_reports_a_point_the_figure_leaves_out(
    tiny_run, tmp_path, monkeypatch, figure_problems
):
    """Issue 47's check that every finished point is drawn (tests/figure_points.py), on this
    study's figures with one point left out of every series: reported, at both steps."""
    import shutil

    from check_figures import main as check_figures

    from meanfield.studies import replot
    from meanfield.studies.mean_ode import plot as mean_ode_plot

    out = tmp_path / "copy"
    shutil.copytree(tiny_run, out)
    # the command for finished folders: the copy's figures redrawn and checked as the
    # tests check them (`figure_check`'s `problems` and `points_missing`, as `replot` below
    # is checked into `figure_problems`): the study's own figures draw every point
    assert check_figures([str(tmp_path)]) == 0
    assert figure_problems == []
    series = mean_ode_plot.loglog_series

    def drop_last(ax, x, mean, *args, **kwargs):
        return series(ax, list(x)[:-1], list(mean)[:-1], *args[:0], **kwargs)

    monkeypatch.setattr(mean_ode_plot, "loglog_series", drop_last)
    replot(out)
    assert any("convergence.png" in p and "not drawn" in p for p in figure_problems)
    assert any("convergence_step0.png" in p and "not drawn" in p for p in figure_problems)
    assert check_figures([str(out)]) == 1
