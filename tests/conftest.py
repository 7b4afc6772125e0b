"""Shared test configuration: float64, strict rank promotion, seeded keys."""

import os

import jax
import pytest

# tests write nothing outside their tmp folders: no persistent compilation cache from the
# CLI, no artifact cache (the tests of the cache name a folder of their own)
os.environ.setdefault("MEANFIELD_COMPILE_CACHE", "off")
os.environ.setdefault("MEANFIELD_ARTIFACT_CACHE", "off")
# The suite compiles thousands of small programs and is bound by compile time, so it asks
# XLA's CPU backend for its cheapest compiles, here and in the notebook and CLI
# subprocesses, which inherit them: LLVM at -O0 (`jax_disable_most_optimizations`), the
# tests marked `runs_long` (bound by running their programs) at -O1, and the fusions of
# XLA's older LLVM IR emitters. What each saves, and why a shared cache is not used:
# benchmarks/RESULTS.md, "Suite compile flags". Results may differ in the last bits, far
# inside every tolerance. The users' own settings are tested where it matters (the canary
# at large widths, tests/test_users_compiler.py); an XLA_FLAGS that sets either flag wins
# (`--xla_backend_optimization_level=3 --xla_cpu_use_fusion_emitters=true` runs the suite
# as users' programs compile).
SUITE_XLA_FLAGS = {
    "xla_backend_optimization_level": "1",
    "xla_cpu_use_fusion_emitters": "false",
}
SUITE_ENVIRONMENT = {"JAX_DISABLE_MOST_OPTIMIZATIONS": "1"}
_flags = os.environ.get("XLA_FLAGS", "")
if "xla_backend_optimization_level" not in _flags:
    for _name, _value in SUITE_ENVIRONMENT.items():
        os.environ.setdefault(_name, _value)
    # JAX read its environment when it was imported, above: this process too (read as
    # JAX reads a boolean variable)
    _true = ("y", "yes", "t", "true", "on", "1")
    _on = os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"].lower() in _true
    jax.config.update("jax_disable_most_optimizations", _on)
for _name, _value in SUITE_XLA_FLAGS.items():
    if _name not in _flags:
        _flags = f"{_flags} --{_name}={_value}".strip()
os.environ["XLA_FLAGS"] = _flags

# a study's self-check recomputes one grid point op by op (slow: minutes in all): the tests
# that use the `self_checked` fixture run it (one per study), the others skip it
os.environ.setdefault("MEANFIELD_NO_SELF_CHECK", "1")

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")


SEED = int(os.environ.get("MEANFIELD_TEST_SEED", "0"))

# A subprocess's timeout in a test guards against a hang; it never limits how long correct
# work may take. CI's 2 cores are shared by two workers, each compiling with XLA's own
# threads: a canary subprocess that takes 85 s on a quiet machine once ran past 900 s there
# (issue 73). So a guard is 30 minutes, or a test says why less is a hang.
HANG_GUARD_S = 1800


@pytest.fixture(autouse=True)
def _no_leaked_compile_cache():
    """A test that turns the persistent compilation cache on in this process (the CLI's
    `--compile-cache DIR` run in-process, a benchmark's options) leaves it off for the
    next: with it on, XLA's compile-and-serialize path crashed a worker twice (a
    segmentation fault in `backend_compile_and_load`, issue 48's CI runs)."""
    yield
    if jax.config.jax_compilation_cache_dir is not None:
        from meanfield.runtime.compilation import disable_compilation_cache

        disable_compilation_cache()


@pytest.fixture(autouse=True, scope="module")
def _memory_back_after_each_module():
    """A test module's compiled programs and figures are let go when it ends: without this
    an xdist worker, which keeps every program the suite has compiled in JAX's in-memory
    caches, grew to 5.7 GB in 9 minutes and 7.1 GB by the end (issue 48: two such workers
    share CI's machine, and one crashed in each of its last three runs). They are let go
    only once the worker holds more than `KEEP_COMPILED_BELOW` bytes: below it the next
    module reuses what this one compiled (eager operations included, which JAX compiles
    one primitive at a time and `clear_caches` forgets)."""
    yield
    import gc

    import matplotlib.pyplot as plt

    plt.close("all")
    if _resident_bytes() > KEEP_COMPILED_BELOW:
        jax.clear_caches()
        gc.collect()


KEEP_COMPILED_BELOW = int(float(os.environ.get("MEANFIELD_TEST_KEEP_COMPILED_GB", "2")) * 2**30)


def _resident_bytes() -> int:
    """This process's resident memory in bytes (Linux's /proc; elsewhere 'always large', so
    that the caches are let go after every module as before)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 1 << 62


@pytest.fixture(autouse=True)
def _runs_long(request):
    """A test marked `runs_long` compiles at -O1 (XLA_FLAGS), not -O0: its time is in
    running its programs, not in compiling them."""
    if request.node.get_closest_marker("runs_long") is None or not jax.config.read(
        "jax_disable_most_optimizations"
    ):
        yield
        return
    jax.config.update("jax_disable_most_optimizations", False)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", True)


@pytest.fixture
def seed() -> int:
    return SEED


@pytest.fixture
def key(request):
    """A `jax.random` key; its seed is shown in the failure report (set MEANFIELD_TEST_SEED)."""
    request.node.user_properties.append(("seed", SEED))
    return jax.random.key(SEED)


@pytest.fixture
def self_checked():
    """`self_checked(results)`: assert that a study's results.json records a self-check
    (a grid point recomputed op by op) that agrees (meanfield.harness.runner). The test
    that asks for it runs its studies with the self-check (the suite skips it elsewhere)."""

    def check(results: dict) -> None:
        checks = results.get("self_check")
        assert checks, "no self-check recorded"
        for c in checks:
            assert c["agrees"] and c["difference"] <= c["tolerance"], c

    with pytest.MonkeyPatch.context() as mp:  # its own: a test's monkeypatch.undo() keeps it
        mp.delenv("MEANFIELD_NO_SELF_CHECK", raising=False)
        yield check


def pytest_report_header(config):
    return f"meanfield test seed: {SEED} (set MEANFIELD_TEST_SEED to change)"


@pytest.fixture
def lower_for_cuda():
    """`lower(fn, *args)`: the StableHLO text of `jax.jit(fn)` lowered for an NVIDIA H100
    from this machine (`jax.export`, no GPU needed). Pallas kernels are lowered to Triton
    on the way, so a kernel Triton cannot express fails here rather than first on a GPU;
    Triton's own compile to PTX happens only on a GPU."""
    from jax import export

    device = jax.sharding.AbstractDevice(
        device_kind="NVIDIA H100 80GB HBM3", num_cores=132, platform="gpu"
    )
    mesh = jax.sharding.AbstractMesh((1,), ("gpu",), abstract_device=device)
    checks = [export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")]

    def lower(fn, *args):
        with jax.sharding.use_abstract_mesh(mesh):
            exported = export.export(jax.jit(fn), platforms=["cuda"], disabled_checks=checks)
            return exported(*args).mlir_module()

    return lower


_FIGURE_PROBLEMS: list[str] = []


def pytest_configure(config):
    """Every figure the package saves in this process is checked as it is saved (also those
    of module- and session-scoped fixtures, which run before a test's own fixtures); the
    test during whose setup, call or teardown it was saved reports what is wrong."""
    import sys

    config.addinivalue_line(
        "markers", "runs_long: its time is in running programs, not compiling them (-O1)"
    )
    config.addinivalue_line(
        "markers", "slow: not in the fast tier (`pytest -m 'not slow'`; tests/tiers.py)"
    )
    import matplotlib.figure
    from figure_check import is_panel_crop, points_missing, problems, style_problems

    save = matplotlib.figure.Figure.savefig

    def checked(fig, fname, *args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        # a panel written alone (`--panel`) is a crop of a figure checked as it was saved
        mine = caller.startswith("meanfield") and not is_panel_crop(fname)
        if mine:
            _FIGURE_PROBLEMS.extend(f"{fname}: {p}" for p in problems(fig))
            _FIGURE_PROBLEMS.extend(f"{fname}: {p}" for p in points_missing(fig, fname))
        saved = save(fig, fname, *args, **kwargs)
        if mine and str(fname).endswith(".png"):  # the house rules, on what was drawn
            _FIGURE_PROBLEMS.extend(f"{fname}: {p}" for p in style_problems(fig))
        return saved

    matplotlib.figure.Figure.savefig = checked


@pytest.fixture(autouse=True)
def figures_show_what_ran():
    """Every figure the package saves during a test, at that test's own grid (quick presets,
    tiny and non-default grids, own blocks): no panel empty without a sentence saying why,
    every data point inside its panel, and every finished point of the study's
    `results.json` drawn (tests/figure_check.py, tests/figure_points.py; issue 47)."""
    yield
    found = list(_FIGURE_PROBLEMS)
    _FIGURE_PROBLEMS.clear()
    assert not found, (
        "a figure does not show what ran (a test that spoils a figure on purpose asks for "
        "the `figure_problems` fixture):\n" + "\n".join(found)
    )


@pytest.fixture
def figure_problems():
    """The problems found in the figures saved so far in this test (a list, emptied first),
    for a test that spoils a figure on purpose and asserts them itself; they are not
    reported again when the test ends."""
    _FIGURE_PROBLEMS.clear()
    yield _FIGURE_PROBLEMS
    _FIGURE_PROBLEMS.clear()


def pytest_collection_modifyitems(config, items):
    """The tests listed in tests/slow_tests.txt are marked `slow` (tests/tiers.py)."""
    from tiers import function_id, slow_tests

    slow = slow_tests()
    for item in items:
        if function_id(item.nodeid) in slow:
            item.add_marker(pytest.mark.slow)


def pytest_sessionfinish(session, exitstatus):
    """With MEANFIELD_TIER_MODULES=FILE, the package's files of which this process called
    a function are added to FILE, one a line (`benchmarks/fast_tier.py` checks that the
    fast tier touches every module; importing a module does not count)."""
    path = os.environ.get("MEANFIELD_TIER_MODULES")
    if path:
        with open(path, "a") as f:
            f.write("".join(f"{name}\n" for name in sorted(_CALLED)))


_CALLED: set[str] = set()


def _record_calls() -> None:
    """Where MEANFIELD_TIER_MODULES is set, every file of the package whose functions run
    is noted (a profile hook: slower, so only there)."""
    import sys
    import threading

    seen: set = set()

    def hook(frame, event, arg):
        if event == "call":
            code = frame.f_code
            if code not in seen:
                seen.add(code)
                if code.co_name != "<module>" and "/meanfield/" in code.co_filename:
                    _CALLED.add(code.co_filename)

    sys.setprofile(hook)
    threading.setprofile(hook)


if os.environ.get("MEANFIELD_TIER_MODULES"):
    _record_calls()
