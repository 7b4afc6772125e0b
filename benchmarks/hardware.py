"""The three limits a benchmark is measured against, and where their figures come from.

* **Compute roofline** `FLOPs / peak FLOP/s`. Peak: the larger of the vendor's
  datasheet figure for the device (non-tensor-core FMA throughput, the units our
  kernels use) and a float matmul measured in this run (`precision=HIGHEST`, so no
  reduced-precision tensor-core path); on CPU only the measurement exists.
* **Memory roofline** `bytes / peak bytes/s`. Peak: the larger of the datasheet
  bandwidth and a measured `y = x + 1` over a large array (reads + writes counted).
* **Dependency chain** `chain length × FMA latency / clock`: the recursion is
  sequential in depth, and each layer (each input is independent, so only one
  input's path counts) needs a chain of dependent floating-point operations that no
  amount of parallel hardware can shorten: a tree reduction for `u·h` (1 multiply +
  ⌈log2 d⌉ adds), the activation (≥ 1 operation), the sum over units
  (1 multiply + ⌈log2 M⌉ adds) and the residual update (1 FMA). Each operation costs
  at least one FMA latency. This is a lower bound on any implementation (it ignores
  memory, communication between threads and transcendental latencies), so it is the
  shortest per-layer latency we can justify, not a typical one.

FMA latencies: NVIDIA FP32 4 cycles and FP64 8 cycles (measured on Volta by Jia et al.,
"Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking", 2018; Ampere and
Hopper microbenchmarks report the same FP32 figure); x86 FMA 4 cycles (Agner Fog's
instruction tables, Skylake and Zen 3). Clocks: the datasheet boost clock on GPUs
(highest clock → shortest latency → a valid lower bound), the CPU's reported clock
(`/proc/cpuinfo`) on CPU. Every figure can be overridden on the command line.
"""

import math
import re
import time

import jax
import jax.numpy as jnp

# (pattern for jax's device_kind, figures); first match wins. FLOP/s are dense
# non-tensor-core FMA rates (2 FLOPs per FMA); bandwidth is the HBM figure. The
# patterns name one card each: a variant not listed (H100 NVL, GH200, A100 40GB, ...)
# has other figures, and gets none (only the measured peaks) rather than a neighbour's.
DATASHEET = (
    (
        r"\bH100 PCIe\b",
        {
            "float32": 51e12,
            "float64": 26e12,
            "bandwidth": 2.0e12,
            "clock_hz": 1.755e9,
            "source": "NVIDIA H100 PCIe datasheet",
        },
    ),
    (
        r"\bH100 (80GB HBM3|SXM)",
        {
            "float32": 67e12,
            "float64": 34e12,
            "bandwidth": 3.35e12,
            "clock_hz": 1.98e9,
            "source": "NVIDIA H100 SXM5 datasheet",
        },
    ),
    (
        r"(?<!G)\bH200\b(?!.*NVL)",
        {
            "float32": 67e12,
            "float64": 34e12,
            "bandwidth": 4.8e12,
            "clock_hz": 1.98e9,
            "source": "NVIDIA H200 SXM datasheet",
        },
    ),
    (
        r"\bA100\b.*\b80GB\b(?!.*PCIe)",
        {
            "float32": 19.5e12,
            "float64": 9.7e12,
            "bandwidth": 2.039e12,
            "clock_hz": 1.41e9,
            "source": "NVIDIA A100 80GB SXM datasheet",
        },
    ),
)

FMA_LATENCY_CYCLES = {
    ("gpu", "float32"): 4,
    ("gpu", "float64"): 8,
    ("cpu", "float32"): 4,
    ("cpu", "float64"): 4,
}
# dependent operations an activation costs at least (relu: one max; identity: none)
ACTIVATION_OPS = {"identity": 0, "relu": 1}


def datasheet(device_kind: str) -> dict | None:
    """The datasheet figures of the card `device_kind` names, or None if not listed."""
    for pattern, figures in DATASHEET:
        if re.search(pattern, device_kind, flags=re.IGNORECASE):
            return figures
    return None


def _median_time(fn, *args, reps: int) -> float:
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def measure_flops(dtype, *, n: int | None = None, reps: int = 5) -> dict:
    """Achieved FLOP/s of an n×n matmul at full precision (2n³ FLOPs)."""
    if n is None:
        n = 4096 if jax.default_backend() != "cpu" else 1024
    a = jnp.ones((n, n), dtype) / n
    f = jax.jit(lambda a, b: jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST))
    t = _median_time(f, a, a, reps=reps)
    return {"flops": 2 * n**3 / t, "how": f"median of {reps} matmuls {n}x{n} {jnp.dtype(dtype)}"}


def measure_bandwidth(dtype, *, nbytes: int | None = None, reps: int = 7) -> dict:
    """Achieved bytes/s of `x ← x + 1` in place (buffer donated; each element read once
    and written once). Without donation every call would also pay for fresh pages."""
    if nbytes is None:
        nbytes = 2**30 if jax.default_backend() != "cpu" else 2**27
    n = nbytes // jnp.dtype(dtype).itemsize
    f = jax.jit(lambda x: x + 1, donate_argnums=0)
    x = jax.block_until_ready(f(jnp.zeros((n,), dtype)))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        x = jax.block_until_ready(f(x))
        times.append(time.perf_counter() - t0)
    t = sorted(times)[len(times) // 2]
    return {
        "bandwidth": 2 * nbytes / t,
        "how": f"median of {reps} in-place x+1 over {nbytes >> 20} MiB",
    }


def cpu_clock_hz() -> float | None:
    try:
        with open("/proc/cpuinfo") as f:
            mhz = [float(line.split(":")[1]) for line in f if line.startswith("cpu MHz")]
        return max(mhz) * 1e6 if mhz else None
    except (OSError, ValueError):
        return None


def peaks(
    dtype,
    *,
    flops: float | None = None,
    bandwidth: float | None = None,
    clock_hz: float | None = None,
    fma_cycles: float | None = None,
    measure: bool = True,
) -> dict:
    """The peak figures used for the limits, each with how it was obtained.

    Explicit arguments win; otherwise max(datasheet, measured) for the rooflines,
    the datasheet (GPU) or /proc/cpuinfo (CPU) clock, and the FMA latency table.
    """
    dtype = jnp.dtype(dtype).name
    backend = "cpu" if jax.default_backend() == "cpu" else "gpu"
    kind = jax.devices()[0].device_kind
    sheet = datasheet(kind) if backend == "gpu" else None
    out = {"device_kind": kind, "dtype": dtype, "datasheet": sheet}
    measured = {}
    if measure:
        measured.update(measure_flops(dtype))
        measured["flops_how"] = measured.pop("how")
        measured.update(measure_bandwidth(dtype))
        measured["bandwidth_how"] = measured.pop("how")
    out["measured"] = measured

    def pick(name, explicit, sheet_value):
        if explicit is not None:
            return explicit, "command line"
        options = [
            (v, s) for v, s in ((sheet_value, "datasheet"), (measured.get(name), "measured"))
        ]
        options = [(v, s) for v, s in options if v is not None]
        if not options:
            return None, "unknown"
        return max(options)

    out["flops"], out["flops_source"] = pick("flops", flops, sheet and sheet.get(dtype))
    out["bandwidth"], out["bandwidth_source"] = pick(
        "bandwidth", bandwidth, sheet and sheet.get("bandwidth")
    )
    if clock_hz is not None:
        out["clock_hz"], out["clock_source"] = clock_hz, "command line"
    elif sheet:
        out["clock_hz"], out["clock_source"] = sheet["clock_hz"], f"{sheet['source']} boost clock"
    elif backend == "cpu":
        out["clock_hz"], out["clock_source"] = cpu_clock_hz(), "/proc/cpuinfo (cpu MHz)"
    else:
        out["clock_hz"], out["clock_source"] = None, "unknown (pass --clock-ghz)"
    if fma_cycles is not None:
        out["fma_cycles"], out["fma_source"] = fma_cycles, "command line"
    else:
        out["fma_cycles"] = FMA_LATENCY_CYCLES.get((backend, dtype))
        out["fma_source"] = "module docstring of benchmarks/hardware.py"
    return out


def chain_ops_forward(d: int, M: int, activation: str) -> int:
    """Dependent operations of one 2LP layer on one input's path (see module docstring)."""
    act = ACTIVATION_OPS.get(activation, 1)
    return (1 + math.ceil(math.log2(d))) + act + (1 + math.ceil(math.log2(M))) + 1


def chain_ops_backward(d: int, M: int) -> int:
    """Dependent operations of one layer of the adjoint recursion (B) on b's path:
    `v·b` (1 + ⌈log2 d⌉), times ρ'(s) (1; s is known from the forward pass),
    `Σ_j u_j q_j` (1 + ⌈log2 M⌉), the update (1 FMA)."""
    return (1 + math.ceil(math.log2(d))) + 1 + (1 + math.ceil(math.log2(M))) + 1


def limits(flops: float, nbytes: float, chain_ops: int, L: int, figures: dict) -> dict:
    """The three limits in seconds, and the largest (the applicable one)."""
    out = {}
    if figures.get("flops"):
        out["compute"] = flops / figures["flops"]
    if figures.get("bandwidth"):
        out["memory"] = nbytes / figures["bandwidth"]
    if figures.get("clock_hz") and figures.get("fma_cycles"):
        out["chain"] = L * chain_ops * figures["fma_cycles"] / figures["clock_hz"]
    if out:
        name = max(out, key=out.get)
        out["bound"], out["bound_s"] = name, out[name]
    return out
