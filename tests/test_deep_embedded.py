"""The deep ResNet on an embedding and its exact linear limit (SPEC §6), against independent
computations: a closed form, a plain-NumPy GD loop, and finite networks whose units match
the Gaussian's second moments exactly (for linear ρ such a network *is* an Euler scheme in
depth for the limit, so it converges at rate 1/L, and Richardson extrapolation removes that
term), plus random networks at growing size."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest

from meanfield.coupling.deep_embedded import errors
from meanfield.limits.deep_embedded import basis_gram, limit, linear_limit
from meanfield.models.deep_embedded import DeepEmbeddedResNet
from meanfield.models.embedding import Embedding
from meanfield.training.deep_embedded import train

LR = dict(eta_u=0.15, eta_v=0.1)
SCALES = dict(s_u=1.3, s_v=0.7)


def test_one_step_closed_form(key):
    k1, k2 = jr.split(key)
    xs, ys = jr.normal(k1, (3, 4)), jr.normal(k2, (3, 2))
    si, so = 0.9, 1.1
    lim = linear_limit(xs, ys, steps=3, sigma_in=si, sigma_out=so, **LR, **SCALES)
    c = (0.15 * 0.7**2 + 0.1 * 1.3**2) * si**2 * so**2
    f1 = c * (xs @ xs.T) @ ys / 3
    assert bool(lim.ok) and float(lim.error_estimate) < 1e-6
    np.testing.assert_allclose(lim.outputs[0], 0.0, atol=1e-12)
    np.testing.assert_allclose(lim.outputs[1], f1, atol=1e-8)
    # the fields at k = 0: h ≡ W_in x, b ≡ W_out (0 - y)
    np.testing.assert_allclose(
        lim.hidden_coef[0, :, :, :4], jnp.broadcast_to(xs[:, None], (3, 33, 4))
    )
    np.testing.assert_allclose(
        lim.backward_coef[0, :, :, 4:], -jnp.broadcast_to(ys[:, None], (3, 33, 2)), atol=1e-12
    )
    # training moves the outputs towards the targets
    loss = 0.5 * jnp.sum((lim.outputs - ys[None]) ** 2, axis=(1, 2))
    assert float(loss[-1]) < float(loss[0])


def test_train_is_the_seed_update_rule(key):
    """`train` (jax.grad, η·LMD) against the seed's explicit GD step in NumPy, with tanh:
    b^L = W_out (f − y), b^{l−1} = b^l + (1/(LM)) Σ_j u_j ρ'(P_j) ⟨v_j, b^l⟩_D,
    u ← u − (η_u/n) Σ_i ρ'(P_i) ⟨v, b_i^l⟩_D h_i^{l−1}, v ← v − (η_v/n) Σ_i ρ(P_i) b_i^l."""
    L, M, D, n, steps = 3, 2, 5, 2, 3
    k1, k2, k3 = jr.split(key, 3)
    net = DeepEmbeddedResNet.sample(k1, L=L, M=M, D=D, d_in=2, d_out=3, activation="tanh", **SCALES)
    xs, ys = np.asarray(jr.normal(k2, (n, 2))), np.asarray(jr.normal(k3, (n, 3)))
    outputs, hidden = train(net, xs, ys, steps=steps, **LR)
    w_in, w_out = np.asarray(net.embedding.w_in), np.asarray(net.embedding.w_out)
    u, v = np.array(net.u), np.array(net.v)
    for k in range(steps + 1):
        hs = [xs @ w_in.T]
        for layer in range(L):
            p = hs[-1] @ u[layer].T / D
            hs.append(hs[-1] + np.tanh(p) @ v[layer] / (L * M))
        f = hs[-1] @ w_out / D
        np.testing.assert_allclose(outputs[k], f, rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(hidden[k], np.stack(hs, axis=1), rtol=1e-11, atol=1e-12)
        b = (f - ys) @ w_out.T
        du, dv = np.zeros_like(u), np.zeros_like(v)
        for layer in reversed(range(L)):
            h = hs[layer]
            p = h @ u[layer].T / D  # (n, M)
            q = b @ v[layer].T / D  # (n, M): ⟨v_j, b_i⟩_D
            dp = 1 - np.tanh(p) ** 2
            du[layer] = -LR["eta_u"] / n * (dp * q).T @ h
            dv[layer] = -LR["eta_v"] / n * np.tanh(p).T @ b
            b = b + (dp * q) @ u[layer] / (L * M)
        u, v = u + du, v + dv


@functools.partial(jax.jit, static_argnums=(1, 2))  # one program per L (op by op: a dozen)
def matched_units(key, L, D, s_u, s_v):
    """M = 4D units per layer whose empirical mean is 0 and covariance exactly
    diag(s_u² D I, s_v² D I) (the points ±sqrt(2D) e_i of R^{2D}, randomly rotated)."""
    base = jnp.sqrt(2.0 * D) * jnp.concatenate([jnp.eye(2 * D), -jnp.eye(2 * D)])

    def layer(k):
        q, _ = jnp.linalg.qr(jr.normal(k, (2 * D, 2 * D)))
        z = base @ q.T
        return z[:, :D] * s_u * D**0.5, z[:, D:] * s_v * D**0.5

    return jax.vmap(layer)(jr.split(key, L))


@pytest.mark.parametrize("embedding", ["orthogonal", "gaussian"])
def test_limit_is_the_depth_limit_of_moment_matched_networks(key, embedding):
    """For ρ = id the mean over a layer's units of `v_k u_kᵀ` depends only on their second
    moments, so a network whose units match them is an Euler scheme (step 1/L) for the
    limit: error ∝ 1/L, and `2 f̂(2L) − f̂(L)` is O(1/L²) from the limit. With an embedding
    whose columns are exactly orthogonal (Gram = diag(σ_in², σ_out²)) that limit is the
    joint limit itself; with a Gaussian draw, the fixed-D limit at `basis_gram`."""
    D, d_in, d_out, steps, si, so = 8, 3, 2, 4, 0.9, 1.2
    k_x, k_y, k_e, k_u = jr.split(key, 4)
    xs, ys = jr.normal(k_x, (2, d_in)), jr.normal(k_y, (2, d_out))
    if embedding == "orthogonal":
        q, _ = jnp.linalg.qr(jr.normal(k_e, (D, d_in + d_out)))
        emb = Embedding(D**0.5 * si * q[:, :d_in], D**0.5 * so * q[:, d_in:])
        gram = None
    else:
        emb = Embedding.sample(k_e, D, d_in, d_out, si, so)
        gram = basis_gram(emb)
    lim = linear_limit(
        xs,
        ys,
        steps=steps,
        sigma_in=si,
        sigma_out=so,
        gram=gram,
        ts=jnp.arange(129) / 128,
        **LR,
        **SCALES,
    )
    assert float(lim.error_estimate) < 1e-5
    runs = {}
    for L in (32, 64, 128):
        u, v = matched_units(k_u, L, D, **SCALES)
        net = DeepEmbeddedResNet(emb, u, v, lambda p: p)
        f, h = train(net, xs, ys, steps=steps, **LR)
        on_grid = eqx.tree_at(
            lambda m: (m.hidden_coef, m.backward_coef, m.ts),
            lim,
            (
                lim.hidden_coef[:, :, :: 128 // L],
                lim.backward_coef[:, :, :: 128 // L],
                lim.ts[:: 128 // L],
            ),
        )
        runs[L] = f, h, errors(f, h, on_grid, emb)
    e_f = np.array([runs[L][2][0][2:] for L in (32, 64, 128)])  # k = 0, 1 are exact
    e_h = np.array([runs[L][2][1][2:] for L in (32, 64, 128)])
    assert np.all(e_f[-1] > 1e-5)  # the 1/L term is visible ...
    for e in (e_f, e_h):  # ... and halves with each doubling of L
        ratios = e[:-1] / e[1:]
        assert np.all((ratios[-1] > 1.8) & (ratios[-1] < 2.2) & (ratios[0] > 1.5)), ratios
    rich_f = 2 * runs[128][0] - runs[64][0]
    rich_h = 2 * runs[128][1] - runs[64][1][:, :, jnp.arange(129) // 2]
    assert float(jnp.max(jnp.abs(rich_f - lim.outputs))) < 0.05 * e_f[-1].max()
    rich_eh = jnp.sqrt(jnp.mean((rich_h - lim.hidden(emb))[:, :, ::2] ** 2, axis=-1))
    assert float(jnp.max(rich_eh)) < 0.05 * e_h[-1].max()


def test_random_networks_converge_to_the_joint_limit(key):
    """Gaussian units and embedding at L = M = D = N growing: the output error against the
    joint limit (at each network's own draw) falls; the limit is vmappable over Grams."""
    steps, seeds = 5, 6
    xs, ys = jnp.array([[0.3, -0.8, 1.2]]), jnp.array([[-1.0, 0.2, 0.5]])
    lim = linear_limit(xs, ys, steps=steps, ts=jnp.arange(65) / 64)
    mean_ef, mean_eh = [], []
    for N in (8, 16, 32, 64):
        grid = eqx.tree_at(
            lambda m: (m.hidden_coef, m.backward_coef, m.ts),
            lim,
            (
                lim.hidden_coef[:, :, :: 64 // N],
                lim.backward_coef[:, :, :: 64 // N],
                lim.ts[:: 64 // N],
            ),
        )

        @jax.jit
        @jax.vmap
        def run(k, N=N, grid=grid):
            net = DeepEmbeddedResNet.sample(k, L=N, M=N, D=N, d_in=3, d_out=3)
            f, h = train(net, xs, ys, eta_u=0.1, eta_v=0.1, steps=steps)
            return errors(f, h, grid, net.embedding)

        e_f, e_h = run(jr.split(jr.fold_in(key, N), seeds))
        mean_ef.append(float(jnp.mean(jnp.sum(e_f[:, 1:], axis=1))))
        mean_eh.append(float(jnp.mean(e_h[:, 1:])))
    assert all(a > b for a, b in zip(mean_ef, mean_ef[1:], strict=False)), mean_ef
    assert mean_ef[-1] < 0.4 * mean_ef[0] and mean_eh[-1] < 0.6 * mean_eh[0], (mean_ef, mean_eh)
    # vmap over embedding draws: the fixed-D limits, each differing from the joint one
    # (the vmapped solve compiled as one program: vmapped op by op it took twice as long)
    embs = jax.vmap(lambda k: Embedding.sample(k, 64, 3, 3))(jr.split(key, 2))
    fixed = jax.jit(jax.vmap(lambda g: linear_limit(xs, ys, steps=1, gram=g).outputs))(
        jax.vmap(basis_gram)(embs)
    )
    gap = jnp.abs(fixed - lim.outputs[None, :2])
    assert bool(jnp.all(jnp.max(gap, axis=(1, 2, 3)) > 1e-3)) and bool(jnp.all(gap < 1.5))


def test_nice_errors():
    xs, ys = jnp.ones((2, 3)), jnp.ones((2, 1))
    with pytest.raises(ValueError, match="steps"):
        linear_limit(xs, ys, steps=-1)
    with pytest.raises(ValueError, match="xs, ys"):
        linear_limit(xs, jnp.ones((3, 1)), steps=1)
    with pytest.raises(ValueError, match="gram"):
        linear_limit(xs, ys, steps=1, gram=jnp.eye(3))
    with pytest.raises(ValueError, match="ts"):
        linear_limit(xs, ys, steps=1, ts=jnp.ones((2, 2)))
    with pytest.raises(ValueError, match="method"):
        limit(xs, ys, steps=1, method="euler")
    with pytest.raises(ValueError, match="method='linear'"):
        limit(xs, ys, activation="tanh", steps=1, method="linear")
    with pytest.raises(ValueError, match="activation"):
        limit(xs, ys, activation="cube", steps=1)
    with pytest.raises(ValueError, match="order"):
        limit(xs, ys, activation="tanh", steps=1, method="quadrature", order=20)
    with pytest.raises(ValueError, match="particles"):
        limit(xs, ys, activation="tanh", steps=1, method="monte-carlo", particles=8)
    with pytest.raises(ValueError, match="L: must be a positive integer"):
        DeepEmbeddedResNet.sample(jr.key(0), L=0, M=2, D=4, d_in=3, d_out=1)
    with pytest.raises(ValueError, match="s_v"):
        DeepEmbeddedResNet.sample(jr.key(0), L=2, M=2, D=4, d_in=3, d_out=1, s_v=0.0)
    net = DeepEmbeddedResNet.sample(jr.key(0), L=2, M=2, D=4, d_in=3, d_out=1)
    with pytest.raises(ValueError, match="steps"):
        train(net, xs, ys, eta_u=0.1, eta_v=0.1, steps=1.5)  # type: ignore[arg-type]
    f, h = train(net, xs, ys, eta_u=0.1, eta_v=0.1, steps=1)
    with pytest.raises(ValueError, match="depths"):
        errors(f, h, linear_limit(xs, ys, steps=1), net.embedding)
    with pytest.raises(ValueError, match="unroll"):
        train(net, xs, ys, eta_u=0.1, eta_v=0.1, steps=1, unroll=0)


def test_unroll_changes_nothing_but_speed(key):
    """Layers per loop step (a remainder too: L = 5 at 2 and 3 per step) give the outputs
    and hidden states of one layer per step, to rounding; and `steps=0` is the forward pass
    alone, equal to `hidden` and `__call__`."""
    kn, kx, ky = jr.split(key, 3)
    net = DeepEmbeddedResNet.sample(kn, L=5, M=3, D=6, d_in=2, d_out=2, activation="tanh")
    xs, ys = jr.normal(kx, (3, 2)), jr.normal(ky, (3, 2))
    f1, h1 = train(net, xs, ys, steps=3, unroll=1, **LR)
    for unroll in (2, 3, 8):
        f, h = train(net, xs, ys, steps=3, unroll=unroll, **LR)
        np.testing.assert_allclose(f, f1, rtol=0, atol=1e-13)
        np.testing.assert_allclose(h, h1, rtol=0, atol=1e-13)
    f0, h0 = train(net, xs, ys, steps=0, **LR)
    assert f0.shape == (1, 3, 2) and h0.shape == (1, 3, 6, 6)
    np.testing.assert_allclose(f0[0], net(xs), rtol=0, atol=1e-14)
    np.testing.assert_allclose(h0[0], net.hidden(xs, unroll=4), rtol=0, atol=1e-14)
    np.testing.assert_allclose(f1[0], f0[0], rtol=0, atol=1e-14)


# ---------------------------------------------------------------- the limit for any ρ

TANH = dict(eta_u=0.5, eta_v=0.5)
X1, Y1 = jnp.array([[0.8], [-1.3]]), jnp.array([[1.0], [0.5]])
SIZES = (16, 64, 256)


def test_general_path_with_identity_is_the_linear_limit(key):
    """The quadrature code path (nonlinear Gaussian expectations, per-input propagators)
    at ρ = id, where a 3-node rule is exact, against the closed-form linear solve."""
    k1, k2, k3 = jr.split(key, 3)
    xs, ys = jr.normal(k1, (2, 2)), jr.normal(k2, (2, 1))
    gram = basis_gram(Embedding.sample(k3, 6, 2, 1, 0.9, 1.2))
    kw = dict(steps=3, gram=gram, ts=jnp.linspace(0, 1, 5), **LR, **SCALES)
    exact = linear_limit(xs, ys, rtol=1e-12, **kw)
    auto = limit(xs, ys, **kw)
    assert auto.kind == "linear-exact"
    np.testing.assert_allclose(auto.outputs, linear_limit(xs, ys, **kw).outputs, rtol=0, atol=0)
    quad = limit(xs, ys, method="quadrature", order=3, rtol=1e-12, rtol_check=1e-10, **kw)
    assert quad.kind == "quadrature" and bool(quad.ok) and float(quad.error_estimate) < 1e-6
    assert float(jnp.max(jnp.abs(exact.outputs[1:] - exact.outputs[:1]))) > 0.05
    for a, b in (
        (quad.outputs, exact.outputs),
        (quad.hidden_coef, exact.hidden_coef),
        (quad.backward_coef, exact.backward_coef),
    ):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-8)


@pytest.fixture(scope="module")
def tanh_case():
    """A fixed D = 6 embedding draw and its fixed-D tanh limit on the finest grid (shared
    by the tests below: one quadrature solve)."""
    emb = Embedding.sample(jr.key(3), 6, 1, 1)
    lim = limit(
        X1, Y1, activation="tanh", steps=2, gram=basis_gram(emb),
        ts=jnp.arange(SIZES[-1] + 1) / SIZES[-1], **TANH,
    )  # fmt: skip
    return emb, lim


def on_grid(lim, L):
    sub = (lim.ts.shape[0] - 1) // L
    return eqx.tree_at(
        lambda m: (m.hidden_coef, m.backward_coef, m.ts),
        lim,
        (lim.hidden_coef[:, :, ::sub], lim.backward_coef[:, :, ::sub], lim.ts[::sub]),
    )


def network_errors(emb, lim, L, key, seeds=16):
    """RMS over `seeds` tanh networks at L = M with embedding `emb` of `errors(...)`."""

    @jax.jit
    @jax.vmap
    def run(k):
        net = DeepEmbeddedResNet.sample(k, L=L, M=L, D=emb.D, d_in=1, d_out=1, activation="tanh")
        net = eqx.tree_at(lambda m: m.embedding, net, emb)
        f, h = train(net, X1, Y1, steps=2, **TANH)
        return errors(f, h, on_grid(lim, L), emb)

    e_f, e_h = run(jr.split(key, seeds))
    return np.sqrt(np.mean(np.asarray(e_f) ** 2, 0)), np.sqrt(np.mean(np.asarray(e_h) ** 2, 0))


def test_tanh_networks_converge_to_the_fixed_d_limit(key, tanh_case):
    """Finite tanh networks sharing one D = 6 embedding draw, at L = M = 16, 64, 256
    (16 seeds each): the errors against the fixed-D quadrature limit fall like
    1/L + sqrt(D/(LM)) = O(1/L) (log-log slope −1 in L)."""
    emb, lim = tanh_case
    assert lim.kind == "quadrature" and bool(lim.ok) and float(lim.error_estimate) < 1e-4
    assert float(jnp.max(jnp.abs(lim.outputs[2] - lim.outputs[0]))) > 0.01  # it trains
    e_f, e_h = zip(*(network_errors(emb, lim, L, jr.fold_in(key, L)) for L in SIZES), strict=True)
    e_f, e_h = np.array(e_f), np.array(e_h)  # (sizes, K + 1)
    slope_f = np.diff(np.log(e_f), axis=0) / np.log(4)
    slope_h = np.diff(np.log(e_h), axis=0) / np.log(4)
    print("E_f", e_f, "slopes", slope_f, "E_h", e_h, "slopes", slope_h)
    assert np.all(e_f[-1] < 0.15 * e_f[0]) and np.all(e_h[-1] < 0.15 * e_h[0]), (e_f, e_h)
    assert np.all(e_f[-1] > 10 * float(lim.error_estimate))  # the limit is far finer
    assert np.all((slope_f[-1] < -0.6) & (slope_h[-1] < -0.6)), (slope_f, slope_h)


@pytest.mark.parametrize("method", ["monte-carlo", "qmc"])
def test_quadrature_against_monte_carlo(tanh_case, method):
    """The same fixed-D tanh limit by Monte Carlo (2^14 sign-symmetric draws of ξ, batch-means
    error bar) and by randomised quasi-Monte Carlo (8 scramblings of 2^9 Sobol points in
    quadruples, the spread of the replicates): within the stated error bars of both, and
    the bar is informative. With "qmc" also: the QMC points are made on the host by a
    callback, and `limit` compiles under `jax.jit` with a traced key and gives these (the
    eager) numbers."""
    emb, quad = tanh_case
    kw = dict(activation="tanh", steps=2, gram=basis_gram(emb), ts=quad.ts[::64],
              method=method, particles=2**14, **TANH)  # fmt: skip
    mc = limit(X1, Y1, key=jr.key(7), **kw)
    assert mc.kind == method and bool(mc.ok)
    bar = float(mc.error_estimate) + float(quad.error_estimate)
    gap_f = float(jnp.max(jnp.abs(mc.outputs - quad.outputs)))
    gap_h = float(jnp.max(jnp.abs(mc.hidden_coef - quad.hidden_coef[:, :, ::64])))
    print("MC error bar", float(mc.error_estimate), "gaps", gap_f, gap_h)
    assert gap_f < bar and gap_h < bar, (gap_f, gap_h, bar)
    assert float(mc.error_estimate) < 0.01
    # entry by entry, the standard errors explain the gaps: standardised, their RMS is
    # about 1 (a standard error off by a factor of 3 either way fails); exact entries
    # (k = 0, no sampling) have none
    for got, want, se in (
        (mc.outputs, quad.outputs, mc.outputs_se),
        (mc.hidden_coef, quad.hidden_coef[:, :, ::64], mc.hidden_se),
    ):
        assert se is not None and se.shape == got.shape
        sampled = np.asarray(se) > 1e-12
        z = np.asarray(got - want)[sampled] / np.asarray(se)[sampled]
        rms = float(np.sqrt(np.mean(z**2)))
        print("standardised gaps: RMS", rms, "of", z.size)
        assert 1 / 3 < rms < 3, rms
    # the bar is informative: far below what training moves
    moved = float(jnp.max(jnp.abs(mc.hidden_coef[2] - mc.hidden_coef[0])))
    assert bar < 0.1 * moved, (bar, moved)
    # qmc under `jax.jit` (a test of its own before, at 2^9 points and k = 1: one more
    # eager solve): the same numbers as the eager solve
    if method == "qmc":
        jitted = jax.jit(lambda key: limit(X1, Y1, key=key, **kw).outputs)(jr.key(7))
        np.testing.assert_allclose(
            np.asarray(jitted), np.asarray(mc.outputs), rtol=1e-10, err_msg="qmc under jax.jit"
        )


def test_joint_limit_tanh(key):
    """The joint limit (gram=None, G_∞ = diag(σ_in², σ_out²)) vmapped with the fixed-D
    limits at two draws with D = 10^5, whose Grams are within O(D^{-1/2}) of G_∞: the
    limits are too, and the vmapped G_∞ row is the gram=None solve. Then finite tanh
    networks on an embedding with exactly orthogonal columns (its Gram *is* G_∞) at
    L = M = 64, D = 4 match the joint limit to the size's error (test above)."""
    si, so, D_big = 0.9, 1.2, 10**5
    kw = dict(activation="tanh", steps=2, sigma_in=si, sigma_out=so, ts=jnp.arange(65) / 64)
    joint = limit(X1, Y1, order=12, **kw, **TANH)
    embs = jax.vmap(lambda k: Embedding.sample(k, D_big, 1, 1, si, so))(jr.split(key, 2))
    grams = jnp.concatenate([jnp.diag(jnp.array([si**2, so**2]))[None], jax.vmap(basis_gram)(embs)])
    many = jax.vmap(lambda g: limit(X1, Y1, order=12, gram=g, **kw, **TANH).outputs)(grams)
    np.testing.assert_allclose(many[0], joint.outputs, rtol=0, atol=1e-12)
    gap = np.max(np.abs(np.asarray(many[1:] - joint.outputs[None])), axis=(2, 3))  # (2, K+1)
    print("joint: outputs", joint.outputs.ravel(), "gaps at D = 1e5", gap)
    assert np.all(gap[:, 1:] > 1e-6) and np.all(gap < 5 * D_big**-0.5), gap
    # networks on an orthogonal embedding (Gram exactly G_∞)
    D, L = 4, 64
    q, _ = jnp.linalg.qr(jr.normal(key, (D, 2)))
    emb = Embedding(D**0.5 * si * q[:, :1], D**0.5 * so * q[:, 1:])
    e_f, e_h = network_errors(emb, joint, L, key, seeds=8)
    print("joint: network errors at L = M = 64", e_f, e_h)
    change = float(jnp.max(jnp.abs(joint.outputs[2] - joint.outputs[0])))
    assert np.all(e_f[1:] < 0.1 * change) and np.all(e_h < 0.05), (e_f, e_h, change)


def test_reduced_field_is_the_brute_force_expectation_in_r2d(key):
    """The reduction of the unit's expectation over (u_0, v_0) ∈ R^{2D} to one over
    ξ = (Eᵀu_0/D, Eᵀv_0/D) ∈ R^{2p} (module docstring, item 6: Gaussian conditioning, the
    part of (u_0, v_0) outside span E averaging out): the vector field of solve k = 2 at a
    given history (η_0..η_2, ζ_0, ζ_1), by Gauss–Hermite over ξ, against a brute-force
    Monte Carlo over 2^19 units drawn in R^D (D = 3, the unit recursion run in R^D, the
    fields E[v_a ρ(⟨u_a, h_a⟩_D)] and −E[u_a ρ'(P_a) ⟨v_a, b_a⟩_D] averaged there and read
    in the basis E), within 4.5 standard errors per entry."""
    from meanfield.limits.deep_embedded import conditional_nodes, gauss_hermite, nonlinear_field

    D, n, K, s_u, s_v, lr = 3, 2, 2, 1.3, 0.8, (0.6, 0.4)
    ks = jr.split(key, 5)
    emb = Embedding.sample(ks[0], D, 1, 1, 0.9, 1.2)
    gram = basis_gram(emb)
    e = jnp.concatenate([emb.w_in, emb.w_out], axis=1)  # (D, p)
    eta = jr.normal(ks[1], (K + 1, n, 2))
    zeta = jr.normal(ks[2], (K + 1, n, 2)).at[K].set(0.0)
    coef = jnp.asarray([*lr, s_u**2, s_v**2])
    z, w = gauss_hermite((28,) * 4)  # converged to ~1e-4 here (order 20: 3e-3 off)
    nodes = conditional_nodes(z, w, gram, s_u, s_v)
    eye = jnp.broadcast_to(jnp.eye(2), (n, 2, 2))
    deta, dzeta, dy = nonlinear_field(0.3, (eta, zeta, eye), (K, gram, nodes, coef, jnp.tanh))

    # brute force in R^D, compiled as one program (op by op, each product over the 2^19
    # units was a program of its own)
    N = 2**19

    @jax.jit
    def brute(ku, kv, h, b, pinv):  # h, b (K+1, n, D); the coefficients' means and SEs
        u = s_u * D**0.5 * jr.normal(ku, (N, D))
        v = s_v * D**0.5 * jr.normal(kv, (N, D))
        fwd, bwd, prop = [], [], None
        for a in range(K + 1):
            pre, q = u @ h[a].T / D, v @ b[a].T / D  # (N, n)
            act, dact = jnp.tanh(pre), 1 - jnp.tanh(pre) ** 2
            fwd.append(v[:, None, :] * act[:, :, None])  # (N, n, D): v_a ρ(P_a)
            bwd.append(-u[:, None, :] * (dact * q)[:, :, None])
            if a == K:  # the map ζ -> −E[u ρ'(P) ⟨v, Eζ⟩_D] of each input, in R^D
                prop = -jnp.einsum("Nd,Ni,Nq->Niqd", u, dact, v @ e / D)
            u, v = u - lr[0] / n * (dact * q) @ h[a], v - lr[1] / n * act @ b[a]

        def stats(samples):
            coefs = jnp.einsum("pd,N...d->N...p", pinv, samples)
            return jnp.mean(coefs, 0), jnp.std(coefs, 0) / N**0.5

        return [stats(f) for f in fwd], [stats(g) for g in bwd[:K]], stats(prop)

    # coefficients of the brute-force fields in the basis E (least squares: they lie in span E)
    pinv = jnp.linalg.pinv(e)  # (p, D)
    fwd, bwd, prop = brute(ks[3], ks[4], eta @ e.T, zeta @ e.T, pinv)

    def check(mean_se, reduced):
        mean, se = mean_se
        z_score = jnp.abs(mean - reduced) / se
        assert float(jnp.max(z_score)) < 4.5, (mean, reduced, se)
        return mean

    for a in range(K + 1):
        check(fwd[a], deta[a])
    for a in range(K):
        check(bwd[a], dzeta[a])
    check(prop, jnp.swapaxes(dy, -1, -2))  # dy[i] = −R̃_k: column q is its action on e_q
    # the reduced field is not trivially small: the test can fail
    assert float(jnp.max(jnp.abs(deta[K]))) > 0.05 and float(jnp.max(jnp.abs(dzeta[1]))) > 0.05


def test_padded_units_do_not_depend_on_the_box(key):
    """`padded_units`: the (L, M, D) network drawn in a larger box has the units it has in
    its own box (the same normals; their scaling compiled may round differently, by at most
    an ulp), zeros elsewhere, also with L, M, D traced; its entries have
    variance s² D (a Monte-Carlo check against 4 standard errors)."""
    from meanfield.models.deep_embedded import padded_units

    L, M, D = 3, 5, 7
    own = padded_units(key, L=L, M=M, D=D, box=(L, M, D), **SCALES)
    drawn = jax.jit(
        lambda size: padded_units(key, L=size[0], M=size[1], D=size[2], box=(6, 8, 16), **SCALES)
    )(jnp.asarray([L, M, D]))
    for a, b in zip(own, drawn, strict=True):
        assert b.shape == (6, 8, 16)
        np.testing.assert_allclose(b[:L, :M, :D], a, rtol=5e-16, atol=0)
        assert not np.any(b[L:]) and not np.any(b[:, M:]) and not np.any(b[:, :, D:])
    big = padded_units(key, L=40, M=50, D=30, box=(40, 50, 30), **SCALES)
    for values, s in zip(big, (SCALES["s_u"], SCALES["s_v"]), strict=True):
        z = np.asarray(values).ravel() ** 2 / (s**2 * 30)  # mean 1, variance 2
        assert abs(z.mean() - 1) < 4 * np.sqrt(2 / z.size), z.mean()


@pytest.mark.parametrize(
    ("activation", "size", "box", "embedding_rates"),
    [
        ("sigmoid", (4, 3, 8), (7, 5, 12), (0.0, 0.0)),  # ρ(0) != 0: the masking matters
        ("tanh", (4, 3, 8), (4, 6, 8), (0.2, 0.3)),  # a trainable embedding, width only
        ("identity", (16, 16, 32), (64, 64, 128), (0.0, 0.0)),  # the quick preset's box
    ],
)
def test_a_padded_network_trains_as_its_own_shape(key, activation, size, box, embedding_rates):
    """`train` with `size`: a network padded into a larger box (units by `padded_units`,
    zero embedding rows beyond D, compiled with the sizes traced) gives its own shape's
    outputs and hidden states (`train` unpadded, itself checked against the seed's update
    rule above), rows beyond L repeating h^L, coordinates beyond D zero, and its padded
    entries stay zero through training."""
    from meanfield.blocks.activations import resolve_activation
    from meanfield.models.deep_embedded import padded_units
    from meanfield.training.deep_embedded import train_with_final

    L, M, D = size
    Lb, Mb, Db = box
    k1, k2, k3, k4 = jr.split(key, 4)
    emb = Embedding.sample(k1, D, 2, 3, 0.9, 1.1)
    xs, ys = jr.normal(k2, (3, 2)), jr.normal(k3, (3, 3))
    rho = resolve_activation(activation)
    rates = dict(eta_in=embedding_rates[0], eta_out=embedding_rates[1], steps=3, **LR)
    own = DeepEmbeddedResNet(emb, *padded_units(k4, L=L, M=M, D=D, box=size, **SCALES), rho)
    f, h, last = train_with_final(own, xs, ys, **rates)

    def padded(sizes):
        u, v = padded_units(k4, L=sizes[0], M=sizes[1], D=sizes[2], box=box, **SCALES)
        rows = ((0, Db - D), (0, 0))
        big = Embedding(jnp.pad(emb.w_in, rows), jnp.pad(emb.w_out, rows))
        net = DeepEmbeddedResNet(big, u, v, rho)
        return train_with_final(net, xs, ys, size=tuple(sizes), **rates)

    fp, hp, lastp = jax.jit(padded)(jnp.asarray(size))
    np.testing.assert_allclose(fp, f, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(hp[:, :, : L + 1, :D], h, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(hp[:, :, L + 1 :], np.repeat(hp[:, :, L : L + 1], Lb - L, 2))
    assert not np.any(hp[..., D:])
    for a, b in ((last.u, lastp.u), (last.v, lastp.v)):
        np.testing.assert_allclose(b[:L, :M, :D], a, rtol=1e-12, atol=1e-14)
        assert not np.any(b[L:]) and not np.any(b[:, M:]) and not np.any(b[:, :, D:])
    for a, b in ((last.embedding.w_in, lastp.embedding.w_in),
                 (last.embedding.w_out, lastp.embedding.w_out)):  # fmt: skip
        np.testing.assert_allclose(b[:D], a, rtol=1e-12, atol=1e-14)
        assert not np.any(b[D:])
