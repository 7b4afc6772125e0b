"""`lax.map` in equal batches: one compiled copy of the mapped function.

`lax.map(f, xs, batch_size=b)` compiles `f` twice when b does not divide the length n
(once vmapped over b for the full batches, once over the n mod b remainder), which
doubles the compile time of the small programs that studies are made of. Here the
batches are balanced (the fewest batches of at most `max_batch`, all of one size) and
the last one is filled with copies of the first elements, whose results are dropped.
"""

import jax
import jax.lax as lax
import jax.numpy as jnp


def batch_plan(n: int, max_batch: int) -> tuple[int, int]:
    """(batch size, batches) for `n` elements in batches of at most `max_batch`."""
    if n < 1 or max_batch < 1:
        raise ValueError(f"n and max_batch must be >= 1, got n={n}, max_batch={max_batch}")
    batches = -(-n // max_batch)
    return -(-n // batches), batches


def map_batched(fn, xs, max_batch: int):
    """`jax.vmap(fn)(xs)`, computed `max_batch` elements at a time at most (pytrees of
    arrays with a common leading axis in and out)."""
    n = jax.tree.leaves(xs)[0].shape[0]
    size, batches = batch_plan(n, max_batch)
    if batches == 1:
        return jax.vmap(fn)(xs)
    index = jnp.arange(size * batches) % n
    out = lax.map(fn, jax.tree.map(lambda x: x[index], xs), batch_size=size)
    return jax.tree.map(lambda o: o[:n], out)
