"""Keys and laws are taken as the command line takes them (issue 77, item 3): a law given
as a function of no arguments wherever a law is taken, the same draws as the law itself;
an integer (or anything else) where a key belongs refused in one line naming `key`, with
the call that makes it one; typed, raw and traced keys all taken."""

import jax
import jax.random as jr
import numpy as np
import pytest

import meanfield as mf

BLOCK = mf.TwoLayerBlock("tanh")
LAW = mf.TwoLayerGaussianLaw(d=2)


def law_factory():
    return mf.TwoLayerGaussianLaw(d=2)


def _sample(law, key):
    return mf.ResNet.sample(BLOCK, law, L=4, M=3, scaling=mf.MeanODEScaling(), key=key)


def test_a_law_given_as_a_function_draws_what_the_law_draws():
    key = jr.key(3)
    for a, b in zip(jax.tree.leaves(_sample(law_factory, key)), jax.tree.leaves(_sample(LAW, key)),
                    strict=True):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    by_function = mf.monte_carlo_particles(law_factory, 16, key=key)
    by_law = mf.monte_carlo_particles(LAW, 16, key=key)
    np.testing.assert_array_equal(np.asarray(by_function.z.u), np.asarray(by_law.z.u))
    assert mf.gauss_hermite_particles(law_factory, 3).count == 3**4


@pytest.mark.parametrize(
    ("law", "message"),
    [
        (lambda: 3, r"^law: <lambda>\(\) gives a int, not an AbstractLaw$"),
        (lambda x: LAW, r"^law: an AbstractLaw or a function of no arguments .* failed"),
        ("tanh", r"^law: an AbstractLaw or a function of no arguments returning one, got str$"),
        (mf.TwoLayerGaussianLaw, r"^law: .* calling TwoLayerGaussianLaw\(\) failed \(.*'d'"),
    ],
)
def test_what_is_not_a_law_is_refused_in_one_line(law, message):
    with pytest.raises(ValueError, match=message):
        _sample(law, jr.key(0))
    with pytest.raises(ValueError, match=message):
        mf.monte_carlo_particles(law, 4, key=jr.key(0))


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (0, r"^key: a JAX random key, got the integer 0: pass jax.random.key\(0\)$"),
        (7, r"^key: a JAX random key, got the integer 7: pass jax.random.key\(7\)$"),
        ("0", r"^key: a JAX random key \(jax.random.key\(0\)\), got str$"),
        (None, r"^key: a JAX random key \(jax.random.key\(0\)\), got NoneType$"),
        (np.zeros(2), r"^key: .* got ndarray of dtype float64$"),
        (True, r"^key: a JAX random key \(jax.random.key\(0\)\), got bool$"),
    ],
)
def test_what_is_not_a_key_is_refused_in_one_line(key, message):
    with pytest.raises(ValueError, match=message):
        _sample(LAW, key)
    with pytest.raises(ValueError, match=message):
        mf.monte_carlo_particles(LAW, 4, key=key)


def test_typed_raw_and_traced_keys_are_taken():
    typed = _sample(LAW, jr.key(5))
    raw = _sample(LAW, jr.PRNGKey(5))
    for a, b in zip(jax.tree.leaves(typed), jax.tree.leaves(raw), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    sums = jax.jit(jax.vmap(lambda k: jax.tree.leaves(_sample(LAW, k))[0].sum()))(
        jr.split(jr.key(0), 3)
    )
    assert sums.shape == (3,)
