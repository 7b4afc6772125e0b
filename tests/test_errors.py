"""Every bad input raises a one-line ValueError naming the argument, at construction."""

import jax.numpy as jnp
import jax.random as jr
import numpy as np
import optax
import pytest

import meanfield as mf

KEY = jr.key(0)
BLOCK = mf.TwoLayerBlock("relu")
LAW = mf.TwoLayerGaussianLaw(3)


def _net():
    return mf.ResNet.sample(BLOCK, LAW, L=4, M=2, scaling=mf.MeanODEScaling(), key=KEY)


CASES = [
    ("L", lambda: mf.ResNet.sample(BLOCK, LAW, L=0, M=2, scaling=0.1, key=KEY)),
    ("L", lambda: mf.ResNet.sample(BLOCK, LAW, L=2.5, M=2, scaling=0.1, key=KEY)),
    ("M", lambda: mf.ResNet.sample(BLOCK, LAW, L=3, M=0, scaling=0.1, key=KEY)),
    ("M", lambda: mf.ResNet.sample(BLOCK, LAW, L=3, scaling=0.1, key=KEY)),
    (
        "M",
        lambda: mf.ResNet.sample(
            mf.MatrixBlock(), mf.MatrixGaussianLaw(3), L=3, M=4, scaling=0.1, key=KEY
        ),
    ),
    ("alpha", lambda: mf.ResNet.sample(BLOCK, LAW, L=3, M=2, scaling=float("nan"), key=KEY)),
    ("alpha", lambda: mf.ResNet.sample(BLOCK, LAW, L=3, M=2, scaling=-1.0, key=KEY)),
    (
        "alpha",
        lambda: mf.ResNet.sample(
            BLOCK, LAW, L=3, M=2, scaling=mf.FunctionScaling(lambda L, M: 0.0), key=KEY
        ),
    ),
    ("alpha", lambda: mf.ResNet(BLOCK, _net().params, float("inf"))),
    ("alpha", lambda: mf.ConstantScaling(0.0)),
    ("beta", lambda: mf.DepthPowerScaling(float("nan"))),
    ("activation", lambda: mf.TwoLayerBlock("swish-ish")),
    ("activation", lambda: mf.MatrixBlock(activation="nope")),
    ("activation", lambda: mf.DenseBlock(activation=3)),
    ("d", lambda: mf.TwoLayerGaussianLaw(0)),
    ("sigma_u", lambda: mf.TwoLayerGaussianLaw(3, sigma_u=-1.0)),
    ("sigma_xi", lambda: mf.TwoLayerNonCentredLaw(3, sigma_xi=float("inf"))),
    ("N", lambda: mf.DenseGaussianLaw(0)),
    ("inner_scale", lambda: mf.TwoLayerBlock("relu", inner_scale=0.0)),
    ("params", lambda: mf.ResNet(BLOCK, {"u": jnp.ones((3, 2, 4)), "v": jnp.ones((4, 2, 4))}, 0.1)),
    ("params", lambda: mf.ResNet(BLOCK, {"u": jnp.ones(3)}, 0.1)),
    ("params", lambda: mf.ResNet(BLOCK, {}, 0.1)),
    ("block", lambda: mf.ResNet(lambda h, z: h, _net().params, 0.1)),
    ("law", lambda: mf.ResNet.sample(BLOCK, lambda k: 0, L=2, M=2, scaling=0.1, key=KEY)),
    ("embedding", lambda: mf.ResNet(BLOCK, _net().params, 0.1, embedding=jnp.ones(3))),
    (
        "readout",
        lambda: mf.ResNet(
            BLOCK, _net().params, 0.1, embedding=jnp.ones((3, 2)), readout=jnp.ones((4, 2))
        ),
    ),
    ("x", lambda: _net()(jnp.ones((2, 3)))),
    ("x", lambda: _net()(jnp.ones(5))),
    ("final", lambda: _net().adjoint(jnp.ones((1, 3)), jnp.ones((1, 4)))),
    ("final", lambda: _net().adjoint(jnp.ones((2, 3)), lambda hL: hL[:1])),
    ("xs", lambda: _net().states(jnp.ones(3))),
    ("loop", lambda: mf.ResNet(BLOCK, _net().params, 0.1, loop="scan")),
    ("loop", lambda: mf.ResNet(BLOCK, _net().params, 0.1, loop=mf.ScanLoop)),
    (
        "loop",
        lambda: mf.ResNet.sample(
            mf.MatrixBlock(),
            mf.MatrixGaussianLaw(3),
            L=3,
            scaling=0.1,
            key=KEY,
            loop=mf.FusedLoop(),
        )(jnp.ones(3)),
    ),
    ("unroll", lambda: mf.ScanLoop(unroll=0)),
    ("unroll", lambda: mf.ScanLoop(unroll=1.5)),
    ("block_batch", lambda: mf.FusedLoop(block_batch=6)),
    ("layers_per_step", lambda: mf.FusedLoop(layers_per_step=0)),
    ("weight_loads", lambda: mf.FusedLoop(weight_loads="later")),
    ("xs", lambda: mf.loss_and_gradients(_net(), jnp.ones(3), jnp.ones((1, 3)))),
    ("ys", lambda: mf.loss_and_gradients(_net(), jnp.ones((2, 3)), jnp.ones(3))),
    ("xs and ys", lambda: mf.loss_and_gradients(_net(), jnp.ones((2, 3)), jnp.ones((3, 3)))),
    ("ys", lambda: mf.loss_and_gradients(_net(), jnp.ones((2, 3)), jnp.ones((2, 4)))),
    (
        "steps",
        lambda: mf.train(
            _net(), jnp.ones((2, 3)), jnp.ones((2, 3)), optimizer=optax.sgd(0.1), steps=-1
        ),
    ),
    (
        "optimizer",
        lambda: mf.train(_net(), jnp.ones((2, 3)), jnp.ones((2, 3)), optimizer=0.1, steps=1),
    ),
    ("steps", lambda: mf.gd_loop(lambda t, k: (t, None), jnp.ones(2), optax.sgd(0.1), 1.0)),
    ("optimizer", lambda: mf.gd_loop(lambda t, k: (t, None), jnp.ones(2), optax.sgd, 1)),
]


@pytest.mark.parametrize("name, make", CASES, ids=[f"{i}-{c[0]}" for i, c in enumerate(CASES)])
def test_bad_input_names_the_argument(name, make):
    with pytest.raises(ValueError) as err:
        make()
    message = str(err.value)
    assert name in message, message
    assert "\n" not in message


def test_numpy_scalars_are_accepted_as_static_numbers():
    law = mf.TwoLayerGaussianLaw(np.int64(3), sigma_u=np.float64(0.5))
    assert type(law.d) is int and type(law.sigma_u) is float
    net = mf.ResNet.sample(BLOCK, law, L=np.int64(3).item(), M=2, scaling=np.float32(0.25), key=KEY)
    assert net.alpha == 0.25
