"""Persistent compilation cache and compile counting."""

import jax
import jax.numpy as jnp
import pytest

import meanfield as mf
from meanfield.cli import main
from meanfield.runtime import compilation
from meanfield.runtime.compilation import CompileCounter, disable_compilation_cache, host_key


def test_persistent_cache_round_trip(tmp_path, monkeypatch):
    """A program compiled once is read back from the cache folder after the in-memory
    caches are cleared: one miss, then one hit."""
    monkeypatch.delenv("MEANFIELD_COMPILE_CACHE", raising=False)
    folder = tmp_path / "cache"
    try:
        used = mf.enable_compilation_cache(folder)
        assert used == folder / host_key()
        f = lambda x: jnp.sin(x) * 3.25 + jnp.cos(x) ** 2  # a program no other test compiles
        x = jnp.arange(17.0)
        with CompileCounter() as first:
            expected = jax.jit(f)(x)
        assert first.compiles == 1 and first.cache_misses == 1 and first.cache_hits == 0
        assert any(used.iterdir())
        jax.clear_caches()
        with CompileCounter() as second:
            again = jax.jit(f)(x)
        assert second.cache_hits == 1 and second.cache_misses == 0
        assert jnp.array_equal(again, expected)
    finally:
        disable_compilation_cache()


def test_cache_switches(tmp_path, monkeypatch):
    monkeypatch.setenv("MEANFIELD_COMPILE_CACHE", "off")
    assert mf.enable_compilation_cache() is None
    assert mf.enable_compilation_cache("off") is None
    monkeypatch.setenv("MEANFIELD_COMPILE_CACHE", str(tmp_path / "env"))
    try:
        assert mf.enable_compilation_cache() == tmp_path / "env" / host_key()
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "env" / host_key())
        # "off" after an earlier "on" turns it off (it used to leave it on)
        assert mf.enable_compilation_cache("OFF") is None
        assert jax.config.jax_compilation_cache_dir is None
    finally:
        disable_compilation_cache()
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="cannot be created"):
        mf.enable_compilation_cache(blocker / "sub")


def test_the_cache_is_kept_per_host(tmp_path, monkeypatch):
    """Hosts with other CPU features (or another jaxlib) never read each other's programs:
    each writes to and reads from its own subfolder, named by the CPU's model and features
    (this machine's `/proc/cpuinfo`, or the system's own statement of them). A program
    compiled under one CPU description is compiled again, not read back, under another
    that lacks one feature; read back under the first again."""
    monkeypatch.delenv("MEANFIELD_COMPILE_CACHE", raising=False)
    here = compilation.cpu_description()
    assert here and here == compilation.cpu_description()
    older = here.replace("avx512f", "").replace("avx2", "") + " (an older CPU)"
    assert host_key(here) == host_key() != host_key(older)
    assert host_key(here).startswith(f"{__import__('platform').system().lower()}-")
    f = lambda x: jnp.cos(x) * 1.75 - jnp.sin(x) ** 3  # a program no other test compiles
    x = jnp.arange(19.0)
    counts = []
    try:
        for cpu in (here, older, here):
            monkeypatch.setattr(compilation, "cpu_description", lambda cpu=cpu: cpu)
            assert mf.enable_compilation_cache(tmp_path) == tmp_path / host_key(cpu)
            jax.clear_caches()
            with CompileCounter() as c:
                jax.jit(f)(x).block_until_ready()
            counts.append((c.cache_hits, c.cache_misses))
    finally:
        disable_compilation_cache()
    assert counts == [(0, 1), (0, 1), (1, 0)], counts
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({host_key(here), host_key(older)})


def test_cli_rejects_bad_cache_folder(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as exc:
        main(["--compile-cache", str(blocker / "x"), "study", "mean-ode", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "--compile-cache" in capsys.readouterr().err
    assert jax.config.jax_compilation_cache_dir is None


@pytest.mark.parametrize("n, max_batch, plan", [(10, 3, (3, 4)), (10, 4, (4, 3)), (7, 7, (7, 1))])
def test_map_batched_traces_the_function_once(n, max_batch, plan):
    """Equal batches: the mapped function is traced (so compiled) once, where `lax.map`
    with a remainder traces it twice; the values equal `vmap`'s."""
    from meanfield._mapping import batch_plan, map_batched

    assert batch_plan(n, max_batch) == plan
    traces = []

    def fn(x):
        traces.append(1)
        return {"square": x["a"] ** 2, "sum": jnp.sum(x["b"])}

    xs = {"a": jnp.arange(float(n)), "b": jnp.arange(3.0 * n).reshape(n, 3)}
    got = jax.jit(lambda xs: map_batched(fn, xs, max_batch))(xs)
    assert len(traces) == 1
    want = jax.vmap(fn)(xs)
    for key in want:
        assert got[key].shape == want[key].shape
        assert jnp.array_equal(got[key], want[key])
    traces.clear()
    jax.jit(lambda xs: jax.lax.map(fn, xs, batch_size=max_batch))(xs)
    assert len(traces) == (1 if n % max_batch == 0 else 2)  # what map_batched avoids
    with pytest.raises(ValueError, match="max_batch"):
        batch_plan(n, 0)
