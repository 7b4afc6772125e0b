"""Compilation: JAX's persistent compilation cache, and counting compiled programs.

A study compiles at most one program per (L, M) shape (fewer: cheap grid points run
padded inside a larger point's program); across runs the persistent cache turns
those compilations into disk reads. The command line enables it
(`meanfield --compile-cache DIR|off ...`, or the environment variable
`MEANFIELD_COMPILE_CACHE`); library users call `enable_compilation_cache()`.

Programs are stored in a subfolder of the cache folder named by `host_key()`: the
operating system, the machine, the jaxlib release and a digest of the CPU's model and
instruction-set features. JAX's own cache key names the jaxlib release and the backend
but not the host's CPU features, and XLA:CPU loads a program compiled for other features
with only a warning ("... could lead to execution errors such as SIGILL"): in a home
folder shared by a cluster's nodes, a node would otherwise run code compiled for a newer
CPU. jaxlib 0.10.1 logs that warning, spuriously, for programs read back on the very
machine that compiled them (its check counts LLVM's tuning preferences
`+prefer-no-gather`/`+prefer-no-scatter` as features: openxla/xla#44565); the programs
load and run all the same.
"""

import hashlib
import os
import platform
import subprocess
from pathlib import Path

import jax
import jax.monitoring

DEFAULT_CACHE_DIR = "~/.cache/meanfield/jax"
ENV_VAR = "MEANFIELD_COMPILE_CACHE"
_OFF = ("off", "none", "0", "false", "")

_BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
_CACHE_HITS = "/jax/compilation_cache/cache_hits"
_CACHE_MISSES = "/jax/compilation_cache/cache_misses"


def enable_compilation_cache(
    path: str | os.PathLike | None = None, *, min_compile_seconds: float = 0.0
) -> Path | None:
    """Turn on JAX's persistent compilation cache.

    **Arguments:**

    - `path`: the cache folder. `None`: the environment variable
      `MEANFIELD_COMPILE_CACHE` if set, else `~/.cache/meanfield/jax`. `"off"` (also
      `"none"`, `"0"`, `"false"` or empty, in any case; or the variable set to one of
      these) turns the cache off, as `disable_compilation_cache` does, even if an
      earlier call turned it on.
    - `min_compile_seconds`: programs that compiled faster than this are not stored
      (JAX's default is 1 s; 0 stores every program, which is what makes a second
      run of a study start at once).

    **Returns:** the folder the programs go to (`path / host_key()`), or `None` when
    disabled.
    """
    if path is None:
        path = os.environ.get(ENV_VAR, DEFAULT_CACHE_DIR)
    if str(path).strip().lower() in _OFF:
        disable_compilation_cache()
        return None
    folder = Path(path).expanduser() / host_key()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"compile cache folder {folder} cannot be created: {err}") from None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_seconds))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    _reset()
    return folder


def host_key(cpu: str | None = None) -> str:
    """The name of this host's subfolder of the compilation cache:
    `SYSTEM-MACHINE-jaxlibVERSION-DIGEST`, `DIGEST` the first 12 hex digits of the SHA-256
    of `cpu` (default: `cpu_description()`), so that hosts with other CPU features or
    another jaxlib never read each other's programs."""
    from .releases import installed

    cpu = cpu_description() if cpu is None else cpu
    digest = hashlib.sha256(cpu.encode()).hexdigest()[:12]
    system = platform.system().lower() or "unknown"
    machine = platform.machine().lower() or "unknown"
    return f"{system}-{machine}-jaxlib{installed()['jaxlib']}-{digest}"


def cpu_description() -> str:
    """The CPU's model and instruction-set features, as the operating system states them:
    on Linux the first processor's lines of `/proc/cpuinfo` that name them (`model name`,
    `flags` on x86; `CPU implementer`, `CPU part`, `Features` on ARM), the features
    sorted; on macOS `sysctl`'s brand string and feature lists; elsewhere (or where
    those cannot be read) `platform.processor()` and `platform.machine()`."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        text = ""
    fields = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        name, sep, value = line.partition(":")
        if sep:
            fields[name.strip().lower()] = value.strip()
    wanted = ("model name", "cpu implementer", "cpu architecture", "cpu part", "flags", "features")
    found = {
        k: " ".join(sorted(fields[k].split())) if k in ("flags", "features") else fields[k]
        for k in wanted
        if k in fields
    }
    if found:
        return "; ".join(f"{k}: {v}" for k, v in found.items())
    if platform.system() == "Darwin":
        keys = ["machdep.cpu.brand_string", "machdep.cpu.features", "machdep.cpu.leaf7_features"]
        keys += ["hw.optional.arm64"] if platform.machine() == "arm64" else []
        try:
            out = subprocess.run(
                ["sysctl", "-n", *keys], capture_output=True, text=True, timeout=10
            ).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        if out.strip():
            return " ".join(out.split())
    return f"{platform.processor()} {platform.machine()}".strip()


def disable_compilation_cache() -> None:
    """Turn the persistent compilation cache off again."""
    jax.config.update("jax_compilation_cache_dir", None)
    _reset()


def _reset() -> None:
    # JAX decides once per process whether the cache is used (at the first compilation);
    # resetting makes a folder set after some compilation take effect all the same
    try:
        from jax._src import compilation_cache
    except ImportError:  # pragma: no cover - private module moved
        return
    compilation_cache.reset_cache()


class CompileCounter:
    """Count XLA compilations inside a `with` block.

    `compiles` counts programs handed to the backend (each new shape or function),
    `compile_seconds` their time and `longest_seconds` the longest one's,
    `cache_hits` / `cache_misses` those found / not found in the persistent cache.
    A program already in the in-memory jit cache is not compiled again and counts 0.

    ```python
    with meanfield.CompileCounter() as counter:
        run_study()
    print(counter.compiles)
    ```
    """

    def __init__(self):
        self.compiles = 0
        self.cache_hits = 0
        self.cache_misses = 0
        self.compile_seconds = 0.0
        self.longest_seconds = 0.0

    def _duration(self, event: str, duration_secs: float, **kwargs) -> None:
        if event == _BACKEND_COMPILE:
            self.compiles += 1
            self.compile_seconds += duration_secs
            self.longest_seconds = max(self.longest_seconds, duration_secs)

    def _event(self, event: str, **kwargs) -> None:
        if event == _CACHE_HITS:
            self.cache_hits += 1
        elif event == _CACHE_MISSES:
            self.cache_misses += 1

    def __enter__(self) -> "CompileCounter":
        jax.monitoring.register_event_duration_secs_listener(self._duration)
        jax.monitoring.register_event_listener(self._event)
        return self

    def __exit__(self, *exc) -> None:
        jax.monitoring.unregister_event_duration_listener(self._duration)
        jax.monitoring.unregister_event_listener(self._event)
