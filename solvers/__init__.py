"""solvers: the only part of the project that talks to Diffrax.

Models in `meanfield` describe vector fields; the functions here integrate them.
"""
