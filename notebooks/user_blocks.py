"""Residual blocks and laws that are not built in, written as a user would, for
`meanfield study mean-ode --block FILE:NAME --law FILE:NAME` (and its tests):

    meanfield study mean-ode --block notebooks/user_blocks.py:SineUnit \
        --law notebooks/user_blocks.py:sine_law

* `SineUnit` with `sine_law`: `φ(h, z) = a sin(wᵀh + c)` with a non-centred `a`, drawn by
  a sampler (a law the library cannot integrate by quadrature: Monte-Carlo reference);
* `TanhUnit` with `mixture_law`: `φ(h, (u, v)) = v tanh(uᵀh)` whose `(u, v)` follows a
  two-component Gaussian mixture;
* `PerceptronTanh` (a layer block, `V tanh(W h)` with an m×d matrix W) with
  `uniform_law`: W with uniform entries around a fixed matrix, V Gaussian around another
  (`centred_uniform_law`: V centred, so that the first forward pass of the limit is the
  identity);
* `cauchy_law`: `SineUnit` with a Cauchy-distributed `a` (no mean: no reference can be
  made accurate; the study says so).
"""

import jax.numpy as jnp
import jax.random as jr

import meanfield as mf

D = 2  # the study's default state dimension (`--d`)
WIDTH = 4  # hidden width m of PerceptronTanh


class SineUnit(mf.AbstractUnitBlock):
    """`φ(h, z) = a sin(wᵀh + c)`."""

    def __call__(self, h, z):
        return z["a"] * jnp.sin(z["w"] @ h + z["c"])


W_SINE = jnp.array([1.2, -0.8])  # the mean of w
A_SINE = jnp.array([1.0, 0.7])  # the mean of a: not centred


def _sine(key, noise):
    kw, ka, kc = jr.split(key, 3)
    return {
        "w": W_SINE + 0.4 * jr.normal(kw, (D,)),
        "a": A_SINE + 0.4 * noise(ka),
        "c": 0.5 + 0.3 * jr.normal(kc, ()),
    }


def sine_law():
    """w ~ N(w0, 0.16 I), a = a0 + 0.4 g (g standard normal), c ~ N(0.5, 0.09), with
    w0 = (1.2, −0.8), a0 = (1, 0.7): a sampler."""
    return mf.SamplerLaw(lambda key: _sine(key, lambda k: jr.normal(k, (D,))))


def cauchy_law():
    """As `sine_law` with a standard Cauchy g in a: heavy tails, no mean."""
    return mf.SamplerLaw(lambda key: _sine(key, lambda k: jr.cauchy(k, (D,))))


class TanhUnit(mf.AbstractUnitBlock):
    """`φ(h, (u, v)) = v tanh(uᵀh)` with `(u, v)` a dict."""

    def __call__(self, h, z):
        return z["v"] * jnp.tanh(z["u"] @ h)


def mixture_law():
    """A two-component Gaussian mixture of `(u, v)`: with probability 0.6,
    u ~ N((1, 0.5), 0.09 I) and v ~ N((0.8, −0.6), 0.09 I); with probability 0.4,
    u ~ N((−0.5, 1), 0.09 I) and v ~ N((−0.4, 0.9), 0.09 I)."""
    means_u = jnp.array([[1.0, 0.5], [-0.5, 1.0]])
    means_v = jnp.array([[0.8, -0.6], [-0.4, 0.9]])

    def draw(key):
        kc, ku, kv = jr.split(key, 3)
        c = jr.bernoulli(kc, 0.4).astype(jnp.int32)  # the component
        u = means_u[c] + 0.3 * jr.normal(ku, (D,))
        v = means_v[c] + 0.3 * jr.normal(kv, (D,))
        return {"u": u, "v": v}

    return mf.SamplerLaw(draw)


class PerceptronTanh(mf.AbstractLayerBlock):
    """`F(h, (V, W)) = V tanh(W h)` with V d×m and W m×d (a layer block)."""

    def __call__(self, h, theta):
        return theta["V"] @ jnp.tanh(theta["W"] @ h)


V0 = jnp.array([[0.6, -0.4, 0.3, 0.5], [0.4, 0.5, -0.6, 0.2]])  # the mean of V (d×m)
W0 = jnp.array([[1.0, 0.0], [0.0, 1.0], [0.7, -0.7], [0.7, 0.7]])  # the mean of W (m×d)


def uniform_law():
    """W = W0 + uniform entries on [−0.6, 0.6] (not Gaussian), V = V0 + N(0, 0.36) entries
    (V0, W0 fixed matrices: not centred)."""

    def draw(key):
        kw, kv = jr.split(key)
        W = W0 + jr.uniform(kw, (WIDTH, D), minval=-0.6, maxval=0.6)
        return {"V": V0 + 0.6 * jr.normal(kv, (D, WIDTH)), "W": W}

    return mf.SamplerLaw(draw)


def centred_uniform_law():
    """As `uniform_law` with V centred (V0 = 0): E F(h, θ) = 0, so the first forward pass
    of the limit is the identity (the study measures after a GD step, or says so)."""

    def draw(key):
        kw, kv = jr.split(key)
        W = W0 + jr.uniform(kw, (WIDTH, D), minval=-0.6, maxval=0.6)
        return {"V": 0.3 * jr.normal(kv, (D, WIDTH)), "W": W}

    return mf.SamplerLaw(draw)


__all__ = [
    "SineUnit",
    "TanhUnit",
    "PerceptronTanh",
    "sine_law",
    "cauchy_law",
    "mixture_law",
    "uniform_law",
    "centred_uniform_law",
]
