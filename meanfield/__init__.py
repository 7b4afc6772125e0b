"""meanfield: deep residual networks and their large-depth limits in JAX.

The package is built in layers, in the order data flows through them; each imports only
from the ones before it (tests/test_import_graph.py), and each folder's front re-exports
its public names (`from meanfield.models import ResNet`):

    blocks (the user's φ) → laws (unit laws, `laws.depth`) → scaling (α(L, M)) →
    engine (the depth loop) → models (finite networks) → training → limits (mean ODE,
    neural SDE/ODE, embedded limits) → coupling (network ↔ limit, convergence numerics)
    → diagnostics (phases, signal propagation, regimes, regularity) → theory (closed
    forms) → studies (`meanfield study NAME`) → cli;

below them `stats` (fits and intervals), `io` (results, data sets, figures) and
`runtime` (devices, compilation cache, known-bad releases). This front re-exports the
names a user needs first, listed in `__init__.pyi` and each imported at its first use
(`lazy_loader`), so that `import meanfield` and the command line start without JAX;
docs/api.md lists every front, the CHANGELOG where each name moved.
"""

import lazy_loader as _lazy

from ._version import __version__ as __version__

__getattr__, __dir__, __all__ = _lazy.attach_stub(__name__, __file__)

# a JAX release known to compute wrong results: a warning here, a refusal in every study
from .runtime.releases import warn_on_import as _warn_on_import  # noqa: E402

_warn_on_import()
