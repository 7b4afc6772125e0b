"""Residual scalings α(L, M)."""

import abc
import math
from collections.abc import Callable

import equinox as eqx

from ._validation import as_number, check_callable, check_number


class AbstractScaling(eqx.Module):
    """A residual multiplier α as a function of depth L and width M."""

    @abc.abstractmethod
    def __call__(self, L: int, M: int) -> float:
        """α(L, M)."""


class MeanODEScaling(AbstractScaling):
    """α = 1/(LM): the mean-ODE regime (docs: Mathematics §3)."""

    def __call__(self, L, M):
        return 1.0 / (L * M)


class CriticalScaling(AbstractScaling):
    """α = 1/sqrt(LM): the critical scale at i.i.d. initialisation (docs: Mathematics §5.1)."""

    def __call__(self, L, M):
        return 1.0 / math.sqrt(L * M)


class DepthPowerScaling(AbstractScaling):
    """α = L^(-β) (docs: Mathematics §4)."""

    beta: float = eqx.field(static=True, converter=as_number)

    def __check_init__(self):
        check_number(self.beta, "beta")

    def __call__(self, L, M):
        return float(L) ** (-self.beta)


class ConstantScaling(AbstractScaling):
    """α constant, independent of L and M (docs: Mathematics §5.2)."""

    alpha: float = eqx.field(static=True, converter=as_number)

    def __check_init__(self):
        check_number(self.alpha, "alpha", positive=True)

    def __call__(self, L, M):
        return self.alpha


class FunctionScaling(AbstractScaling):
    """α = fn(L, M) for a user function."""

    fn: Callable = eqx.field(static=True)

    def __check_init__(self):
        check_callable(self.fn, "fn", "(L, M) -> alpha")

    def __call__(self, L, M):
        return self.fn(L, M)


def resolve_alpha(scaling: "AbstractScaling | float", L: int, M: int) -> float:
    """Evaluate a scaling (or take a number) and check that α is finite and positive."""
    alpha = scaling(L, M) if isinstance(scaling, AbstractScaling) else scaling
    try:
        alpha = float(alpha)
    except (TypeError, ValueError):
        raise ValueError(f"scaling must give a number, got {alpha!r}") from None
    if not (math.isfinite(alpha) and alpha > 0):
        raise ValueError(
            f"scaling gives alpha={alpha!r} at L={L}, M={M}; it must be finite and > 0"
        )
    return alpha
