"""SPEC §5.1 (Chizat, Prop. 2.1): E‖h^l − x‖² = ((1 + cα²M)^l − 1)‖x‖², c = (d/2)σ_u²σ_v²."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import meanfield as mf


@pytest.mark.runs_long
@pytest.mark.parametrize(
    "d, M, L, alpha, sigma_u, sigma_v",
    [
        (4, 8, 16, None, 0.5, 1.0),  # α = 1/sqrt(LM), the critical scale
        (3, 2, 10, 0.4, 1.0, 0.7),
        (6, 16, 32, None, 1 / np.sqrt(6), 1.5),
    ],
)
def test_variance_law_monte_carlo(d, M, L, alpha, sigma_u, sigma_v, key):
    alpha = 1 / np.sqrt(L * M) if alpha is None else alpha
    c = d / 2 * sigma_u**2 * sigma_v**2
    x = jnp.linspace(-1.0, 1.5, d)
    law = mf.TwoLayerGaussianLaw(d, sigma_u=sigma_u, sigma_v=sigma_v)

    def sq_dev(k):
        net = mf.ResNet.sample(mf.TwoLayerBlock("relu"), law, L=L, M=M, scaling=alpha, key=k)
        hs = net.states(x[None])[0]
        return jnp.sum((hs - x[None]) ** 2, axis=1)

    R = 8000
    dev = np.asarray(eqx.filter_jit(jax.vmap(sq_dev))(jr.split(key, R)))
    mean, se = dev.mean(axis=0), dev.std(axis=0, ddof=1) / np.sqrt(R)
    theory = ((1 + c * alpha**2 * M) ** np.arange(L + 1) - 1) * float(x @ x)
    for l in (1, L // 2, L):
        assert abs(mean[l] - theory[l]) < 4 * se[l], (l, mean[l], theory[l], se[l])


def test_backward_pass_first_step_and_identity(key):
    """The first backward step from b^L = e (a unit vector), for ReLU 2LP units:
    E‖b^{L-1} − b^L‖² = α² M E[1{uᵀh > 0} (eᵀv)² ‖u‖²] = c α² M exactly (c = (d/2)σ_u²σ_v²,
    whatever h^{L-1}); and with α = L^{-3/4}/sqrt(M) (M L α² → 0) the largest deviation
    along depth falls as L grows (seed 000 §3.1: the backward pass tends to the identity)."""
    from meanfield.theory.variance import sampled_backward_deviation

    d, M, sigma_u, sigma_v = 4, 3, 0.5, 1.2
    c = d / 2 * sigma_u**2 * sigma_v**2
    law = mf.TwoLayerGaussianLaw(d, sigma_u=sigma_u, sigma_v=sigma_v)
    x, e = jnp.linspace(-1.0, 1.5, d), jnp.zeros(d).at[1].set(1.0)
    block = mf.TwoLayerBlock("relu")
    L, alpha, R = 6, 0.3, 20000
    dev = np.asarray(sampled_backward_deviation(block, law, L=L, M=M, alpha=alpha, x=x,
                                                direction=e, key=key, nets=R))  # fmt: skip
    first = dev[:, L - 1]
    assert abs(first.mean() - c * alpha**2 * M) < 4 * first.std(ddof=1) / np.sqrt(R)
    sups = []
    for L in (8, 32, 128):
        a = L**-0.75 / np.sqrt(M)
        dev = np.asarray(sampled_backward_deviation(block, law, L=L, M=M, alpha=a, x=x,
                                                    direction=e, key=key, nets=500))  # fmt: skip
        sups.append(dev.max(axis=1).mean())
    assert sups[0] > 1.5 * sups[1] > 2.25 * sups[2], sups


def test_near_identity_is_computed_and_can_fail():
    """A backward deviation that grows with L at γ > 1/2 is not "near identity"; nor is a
    slope not measured, nor γ = 1/2 (where M L α² does not fall)."""
    from meanfield.studies.variance.study import near_identity

    assert near_identity(0.75, -0.5)
    assert not near_identity(0.75, 0.2)
    assert not near_identity(0.75, None)
    assert not near_identity(0.5, -0.5)
