"""Running: seeds over devices (`shard_seeds`), grid points over devices and processes
(`distribution`), the persistent compilation cache, the
JAX releases known to compute wrong results, the machine's memory, signals, and the
error a bad input raises.

Its names are imported at their first use (listed in `__init__.pyi`; `lazy_loader`): the
command line's refusals and `--help` read `errors` and `memory` without JAX.
"""

import lazy_loader as _lazy

__getattr__, __dir__, __all__ = _lazy.attach_stub(__name__, __file__)
