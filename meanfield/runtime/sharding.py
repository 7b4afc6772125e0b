"""Seeds spread over all devices: one per-seed computation mapped over a seed axis.

A study computes the same thing for many seeds (and for every grid point of one shape).
`shard_seeds(fn)` turns `fn(seed_inputs...) -> outputs` into a function of arrays with a
leading seed axis that

* splits the seeds over the devices of a one-axis mesh (`jax.shard_map` with
  `NamedSharding`-style `PartitionSpec("seeds")`), padding the seed axis to a multiple
  of the device count by repeating the last seed (padded results are dropped);
* on each device runs its seeds in equal chunks of at most `batch_size` (`lax.map`,
  one compiled copy of `fn`; `None` runs all of them at once, i.e. `vmap`);
* returns the outputs with the seed axis in the original order.

Each seed's result depends only on its own inputs, so the answer is the one of a
single device, up to rounding where XLA orders a batched reduction differently for
another number of seeds per device (tested with 4 forced host devices on CPU, on the
mean-ODE, SDE and phase studies' programs too). With several processes
(`jax.distributed.initialize()` before anything else, see benchmarks/README.md) the
mesh spans the devices of every process and the outputs are gathered on each.
"""

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec

from .._mapping import map_batched

SEED_AXIS = "seeds"


def _shard_map(f, mesh, in_specs, out_specs):
    # replication checks off: shared (replicated) inputs may meet per-seed values in a
    # user's scan carry, which the varying-axes check would reject
    if hasattr(jax, "shard_map"):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    from jax.experimental.shard_map import shard_map  # jax < 0.7

    return shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_rep=False)


def default_devices() -> list:
    """The devices seeds spread over when none are named: the running grid point's
    (`distribution.on_devices`), else this process's in a study run by several processes
    (each computes its own points), else every device of every process."""
    from . import distribution

    named = distribution.point_devices()
    if named is not None:
        return named
    return jax.local_devices() if distribution.active() is not None else jax.devices()


def seed_mesh(devices: Sequence | None = None) -> Mesh:
    """A one-axis mesh named `"seeds"` over `devices` (default: `default_devices()`)."""
    devices = list(default_devices() if devices is None else devices)
    if not devices:
        raise ValueError("devices must hold at least one device")
    return Mesh(np.array(devices), (SEED_AXIS,))


def _axes(in_axes, args) -> tuple:
    axes = (in_axes,) * len(args) if not isinstance(in_axes, tuple | list) else tuple(in_axes)
    if len(axes) != len(args):
        raise ValueError(f"in_axes has {len(axes)} entries for {len(args)} arguments")
    if any(a not in (0, None) for a in axes):
        raise ValueError(f"in_axes entries must be 0 (per seed) or None (shared), got {in_axes}")
    if not any(a == 0 for a in axes):
        raise ValueError("at least one argument must be mapped over seeds (in_axes 0)")
    return axes


def _seed_count(args, axes) -> int:
    sizes = {
        jnp.shape(leaf)[0] if jnp.ndim(leaf) else None
        for a, ax in zip(args, axes, strict=True)
        if ax == 0
        for leaf in jax.tree.leaves(a)
    }
    if len(sizes) != 1 or None in sizes:
        raise ValueError(f"mapped arguments must share one leading seed axis, got sizes {sizes}")
    return int(sizes.pop() or 0)


def disable_jit_active() -> bool:
    """Whether `jax.disable_jit()` is in force (everything runs op by op)."""
    # a context-manager flag: read as an attribute (`config.read` refuses it)
    return bool(getattr(jax.config, "jax_disable_jit"))  # noqa: B009 (pyright: Config)


def shard_seeds(
    fn: Callable,
    in_axes: int | None | tuple = 0,
    *,
    batch_size: int | None = None,
    devices: Sequence | None = None,
) -> "SeedProgram":
    """Map `fn` over a leading seed axis, seeds split over devices.

    **Arguments:**

    - `fn`: the computation for one seed, `fn(*args) -> pytree of arrays`.
    - `in_axes`: like `jax.vmap`: `0` for arguments with a leading seed axis, `None`
      for arguments shared by every seed (one entry per argument, or one for all).
    - `batch_size`: seeds computed at once on a device, at most (`lax.map` in equal
      chunks); `None`: all of the device's seeds at once.
    - `devices`: the devices to use (default: `default_devices()`: the running grid
      point's, else every device of every process).

    **Returns:** a jitted function of the same arguments returning `fn`'s outputs
    stacked along a leading seed axis, in seed order (one compiled program per
    argument shape).
    """
    if batch_size is not None and (
        isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
    ):
        raise ValueError(f"batch_size must be a positive integer or None, got {batch_size!r}")
    mesh = seed_mesh(devices)
    count = mesh.devices.size

    def run(*args):
        axes = _axes(in_axes, args)
        seeds = _seed_count(args, axes)
        per_device = -(-seeds // count)
        index = jnp.minimum(jnp.arange(per_device * count), seeds - 1)  # repeat the last seed
        padded = tuple(
            jax.tree.map(lambda x: x[index], a) if ax == 0 else a
            for a, ax in zip(args, axes, strict=True)
        )

        def local(*local_args):
            mapped = tuple(a for a, ax in zip(local_args, axes, strict=True) if ax == 0)

            def one(per_seed):
                it = iter(per_seed)
                full = [next(it) if ax == 0 else a for a, ax in zip(local_args, axes, strict=True)]
                return fn(*full)

            return map_batched(one, mapped, batch_size or per_device)

        if disable_jit_active():
            # op by op (a study's self-check): every seed in this process, no mesh (the
            # same values up to rounding; shard_map has no op-by-op form of every
            # primitive, such as Diffrax's custom_vjp with symbolic zeros)
            out = local(*padded)
        else:
            specs = tuple(PartitionSpec(SEED_AXIS) if ax == 0 else PartitionSpec() for ax in axes)
            out = _shard_map(local, mesh, specs, PartitionSpec(SEED_AXIS))(*padded)
        return jax.tree.map(lambda o: o[:seeds], out)

    return SeedProgram(jax.jit(run))


class SeedProgram:
    """The function `shard_seeds` returns: call it with the arguments; `jitted` is the
    jitted function itself, for `.lower(...).compile()` ahead of time (then
    `gather_processes` its outputs)."""

    def __init__(self, jitted):
        self.jitted = jitted

    def __call__(self, *args):
        return gather_processes(self.jitted(*args))


def gather_processes(out):
    """`out` (a pytree of seed-sharded arrays) whole on every process; the identity with
    one process, and for arrays this process holds whole (a mesh of its own devices, as
    in a study run by several processes, each on its own points)."""
    leaves = jax.tree.leaves(out)
    if jax.process_count() > 1 and not all(
        getattr(x, "is_fully_addressable", True) for x in leaves
    ):
        from jax.experimental import multihost_utils

        out = multihost_utils.process_allgather(out, tiled=True)
    return out
