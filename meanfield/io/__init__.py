"""Input and output: a study's results (`load_results`, `StudyResults`), data sets
(the bundled digits, a user's files; text for language modelling, `load_text`) and the
figures' helpers. Its names are imported at their first use (listed in `__init__.pyi`;
`lazy_loader`): `meanfield plot` reads a results.json before JAX is imported.
"""

import lazy_loader as _lazy

__getattr__, __dir__, __all__ = _lazy.attach_stub(__name__, __file__)
