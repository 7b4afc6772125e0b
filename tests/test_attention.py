"""Attention heads as units (`meanfield.blocks.attention`): the head against a NumPy computation,
the law's centring (E[φ] = 0, so Chizat's Proposition 2.1 applies), a residual network of
heads, and `study variance --block` end to end with its refusals."""

import math

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

import meanfield as mf
from meanfield.blocks.attention import AttentionHead
from meanfield.laws.attention import AttentionGaussianLaw
from meanfield.studies import StudyInputError, run_study


def test_head_is_softmax_attention(key):
    T, d, dh = 3, 4, 2
    law = AttentionGaussianLaw(dim=d, head_dim=dh)
    z = law.sample(key)
    h = np.asarray(jr.normal(jr.key(1), (T * d,)))
    H = h.reshape(T, d)
    q, k, v, o = (np.asarray(a) for a in (z.q, z.k, z.v, z.o))
    s = (H @ q) @ (H @ k).T / math.sqrt(dh)
    A = np.exp(s - s.max(1, keepdims=True))
    A /= A.sum(1, keepdims=True)
    np.testing.assert_allclose(AttentionHead(tokens=T)(h, z), (A @ H @ v @ o).ravel(), rtol=1e-12)
    with pytest.raises(ValueError, match="^h: length"):
        AttentionHead(tokens=5)(h, z)


def test_law_is_centred_and_networks_run(key):
    """E[φ(h, Z)] = 0 (o centred): a Monte-Carlo mean within 4 standard errors; a ResNet of
    heads runs forward and backward (finite)."""
    law = AttentionGaussianLaw(dim=2, head_dim=3)
    block = AttentionHead(tokens=2)
    h = jnp.array([0.5, -1.0, 1.5, 0.3])
    phi = jax.vmap(lambda k: block(h, law.sample(k)))(jr.split(key, 20000))
    mean, se = np.asarray(phi.mean(0)), np.asarray(phi.std(0) / math.sqrt(20000))
    assert np.all(np.abs(mean) < 4 * se) and np.all(se > 0)
    net = mf.ResNet.sample(block, law, L=8, M=3, scaling=mf.MeanODEScaling(), key=key)
    adj = net.adjoint(h[None], h[None])
    assert np.all(np.isfinite(np.asarray(adj.h))) and np.all(np.isfinite(np.asarray(adj.b)))


def test_variance_study_with_attention_heads(tmp_path, self_checked):
    res = run_study(
        "variance", out=str(tmp_path / "v"), block="meanfield.blocks.attention:AttentionHead",
        law="meanfield.laws.attention:AttentionGaussianLaw", d=4, nets=200, c_samples=2000,
        L=[4, 16], no_progress=True,
    )  # fmt: skip
    assert res["config"]["block"] == "meanfield.blocks.attention:AttentionHead"
    self_checked(res)
    assert res["reference"]["c_assumption_exact"] is False and res["reference"]["c"] > 0
    assert all(p["mean_state"]["holds"] for p in res["points"])
    for bad, match in (
        (dict(block="meanfield.blocks.attention:AttentionHead"), "^--law: "),
        (dict(block="meanfield.blocks.attention:AttentionHead",
              law="meanfield.laws.attention:AttentionGaussianLaw", d=3), "^--block: "),
        (dict(block="meanfield.blocks.attention:AttentionHead",
              law="meanfield.laws.attention:AttentionGaussianLaw", activation="tanh", d=4),
         "^--activation"),
    ):  # fmt: skip
        with pytest.raises(StudyInputError, match=match):
            run_study("variance", out=str(tmp_path / "bad"), **bad)
