"""The mean-ODE limit: closed forms, the adjoint against jax.grad, GD in L², coupling."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
from scipy import integrate

import meanfield as mf
from meanfield.coupling.mean_ode import (
    LimitOnGrid,
    coupled_errors,
    euler_errors,
    limit_copies,
    limit_on_grid,
)
from meanfield.limits.mean_ode import MeanODE, solve_mean_ode
from meanfield.limits.particles import (
    gauss_hermite_particles,
    hermite_rule,
    monte_carlo_particles,
    particle_gradients,
    particle_step,
)
from meanfield.runtime.compilation import CompileCounter
from meanfield.solvers import solve_dense


def test_hermite_rule_matches_numpy_and_moments():
    x, w = hermite_rule(20)
    xn, wn = np.polynomial.hermite_e.hermegauss(20)
    np.testing.assert_allclose(np.sort(x), xn, atol=1e-12)
    np.testing.assert_allclose(w, wn / wn.sum(), atol=1e-14)
    x, w = hermite_rule(300)  # beyond numpy's overflow
    for k, moment in ((2, 1.0), (4, 3.0), (6, 15.0)):
        assert abs(float(w @ x**k) - moment) < 1e-9 * moment
    # at the theory's default order, the tridiagonal eigensolver's nodes are the dense
    # Jacobi matrix's eigenvalues, and the rule integrates the Gaussian's moments
    order = 2048
    off = np.sqrt(np.arange(1, order, dtype=np.float64))
    dense = np.linalg.eigvalsh(np.diag(off, 1) + np.diag(off, -1))
    x, w = hermite_rule(order)
    assert x.shape == w.shape and len(x) > 1000  # weights below 1e-308 dropped: 1050 kept
    gap = np.abs(dense[None, :] - x[:, None])  # each kept node, in the dense spectrum
    assert len(set(gap.argmin(axis=1))) == len(x) and gap.min(axis=1).max() < 1e-11
    for k, moment in ((2, 1.0), (4, 3.0), (8, 105.0)):
        assert abs(float(w @ x**k) - moment) < 1e-10 * moment
    # 65536 (a one-coordinate law's default before the cap) asked numpy for 32 GiB
    with pytest.raises(ValueError, match="^order must be at most 4096"):
        hermite_rule(4097)


def test_gauss_hermite_particles_reproduce_the_law_moments():
    law = mf.TwoLayerNonCentredLaw(2, sigma_u=0.7, sigma_xi=0.4)
    P = gauss_hermite_particles(law, 6)
    assert P.count == 6**4
    uu = P.expect(lambda z: jnp.outer(z.u, z.u))
    vv = P.expect(lambda z: jnp.outer(z.v, z.v))
    uv = P.expect(lambda z: jnp.outer(z.u, z.v))
    np.testing.assert_allclose(np.asarray(uu), 0.49 * np.eye(2), atol=1e-13)
    np.testing.assert_allclose(np.asarray(vv), (0.49 + 0.16) * np.eye(2), atol=1e-13)
    np.testing.assert_allclose(np.asarray(uv), 0.49 * np.eye(2), atol=1e-13)
    with pytest.raises(ValueError, match="law"):
        gauss_hermite_particles(mf.SamplerLaw(lambda k: jnp.zeros(2)), 4)
    with pytest.raises(ValueError, match="order"):
        gauss_hermite_particles(law, 100)


def test_padded_particles_keep_the_limit_and_its_compiled_solve():
    """A coarse rule padded to a fine rule's size: the same expectations and the same
    limit (against the unpadded solve), and no new compilation (the fine rule's
    program is reused: one program for the reference and its check)."""
    model, law = _small_model(order=4)
    coarse = gauss_hermite_particles(law, 2)
    padded = coarse.padded(model.particles.count)
    assert padded.count == model.particles.count == 4**4
    second = lambda z: jnp.outer(z.u, z.v)
    np.testing.assert_allclose(padded.expect(second), coarse.expect(second), atol=1e-15)
    with_model = lambda P: MeanODE(model.block, P, model.xs, model.ys, model.learning_rate)
    solve_mean_ode(model, 1, rtol=1e-10, atol=1e-10)  # compiles the fine rule's program
    with CompileCounter() as counter:
        sol = solve_mean_ode(with_model(padded), 1, rtol=1e-10, atol=1e-10)
        jax.block_until_ready(sol.forward[-1])
    assert counter.compiles == 0
    exact = solve_mean_ode(with_model(coarse), 1, rtol=1e-10, atol=1e-10)
    # the sums differ in rounding only, but adaptive steps follow them: equal within the
    # solves' own tolerance (1e-10), not to rounding
    s = jnp.linspace(0, 1, 7)
    for k in (0, 1):
        np.testing.assert_allclose(sol.h(k, s), exact.h(k, s), rtol=1e-9)
        np.testing.assert_allclose(sol.b(k, s), exact.b(k, s), rtol=1e-9)
    assert coarse.padded(coarse.count) is coarse
    with pytest.raises(ValueError, match="count"):
        model.particles.padded(3)


def test_every_gd_step_solves_in_one_program(monkeypatch):
    """`solve_mean_ode` traces its per-step solve once for all GD steps (the earlier
    steps' solutions enter through stacked slots and a traced count), where one program
    per step (a history one longer each time) traced it steps + 1 times; the solutions
    are those of the per-step history (`MeanODE.evolve` with a tuple history)."""
    from meanfield.limits import mean_ode as meanode

    model, _ = _small_model(order=3)  # a particle count no other test compiles
    calls = []
    original = meanode.solve_dense
    monkeypatch.setattr(
        meanode, "solve_dense", lambda *a, **k: calls.append(1) or original(*a, **k)
    )
    meanode._solution_shapes.cache_clear()  # traced once per state shape and process
    sol = solve_mean_ode(model, 2, rtol=1e-10, atol=1e-10)
    # two solves (forward, backward) per trace: one trace of the shapes, one of the step
    assert len(calls) == 4
    solve_mean_ode(model, 2, rtol=1e-9, atol=1e-9)  # cached shapes, the same program
    assert len(calls) == 4
    # the stacked evolve (slot 0 step 0, slot 1 step 1, count 2) against the tuple
    # history evolve, at s = 0.4: the forward field of step 2
    slots = jax.tree.map(
        lambda a: jnp.stack([a, a]) if eqx.is_array(a) else a, (sol.forward[0], sol.backward[0])
    )
    slots = meanode._set_slot(slots, jnp.asarray(1), (sol.forward[1], sol.backward[1]))
    history = tuple(zip(sol.forward[:2], sol.backward[:2], strict=True))
    h = sol.h(2, 0.4)
    stacked = meanode._forward_field(0.4, h, (model, slots, jnp.asarray(2)))
    np.testing.assert_allclose(
        stacked, model.velocity(h, model.evolve(model.particles.z, 0.4, history)), rtol=1e-14
    )
    once = meanode._forward_field(0.4, h, (model, slots, jnp.asarray(1)))
    assert float(jnp.max(jnp.abs(once - stacked))) > 1e-3 * float(jnp.max(jnp.abs(stacked)))
    # every step against plain per-step solves (a tuple history; an off-by-one count,
    # which made step 1 equal step 0, passed the checks above)
    tol = dict(rtol=1e-10, atol=1e-10)

    def plain_step(hist):
        z_at = lambda s: model.evolve(model.particles.z, s, hist)
        f = solve_dense(lambda s, h, a: model.velocity(h, z_at(s)), model.xs, t0=0.0, t1=1.0, **tol)
        back = lambda s, bb, a: model.adjoint_velocity(f.evaluate(s), bb, z_at(s))
        b1 = model.terminal_adjoint(f.evaluate(1.0))
        return f, solve_dense(back, b1, t0=1.0, t1=0.0, **tol)

    # the two routes are the same solves up to round-off, which can flip an adaptive step's
    # acceptance (on jax 0.10.1 one does: 1.8e-11 relative): they agree to the solves' own
    # tolerance 1e-10, ten times it allowed; an off-by-one history is O(1) off
    history = ()
    for k in range(3):
        f, b = plain_step(history)
        history += ((f, b),)
        for s in (0.0, 0.4, 1.0):
            np.testing.assert_allclose(sol.h(k, s), f.evaluate(s), rtol=1e-9, atol=1e-10)
            np.testing.assert_allclose(sol.b(k, s), b.evaluate(s), rtol=1e-9, atol=1e-10)


def test_forward_matches_closed_form_radial_ode():
    """Non-centred tanh law: E[v tanh(uᵀh)] = σ_u² E[sech²(σ_u‖h‖ g)] h (Stein), so the
    limit is radial: h(s) = x r(s)/‖x‖ with r' = σ_u² E[sech²(σ_u r g)] r, solved here with
    scipy quadrature and scipy's ODE solver, independently of the library."""
    su = 0.8
    law = mf.TwoLayerNonCentredLaw(2, sigma_u=su, sigma_xi=0.0)  # v = u: 2 Gaussian coordinates
    P = gauss_hermite_particles(law, 64)
    xs = jnp.array([[1.0, 0.5], [-0.3, 0.2]])
    model = MeanODE(mf.TwoLayerBlock("tanh"), P, xs, jnp.zeros_like(xs), 0.0)
    sol = solve_mean_ode(model, 0, rtol=1e-12, atol=1e-12)
    assert sol.ok

    def speed(r):
        def f(g):
            e = math.exp(-2 * abs(su * r * g))  # sech²(t) = 4e^{-2|t|} / (1 + e^{-2|t|})²
            return math.exp(-g * g / 2) / math.sqrt(2 * math.pi) * 4 * e / (1 + e) ** 2

        return su**2 * integrate.quad(f, -np.inf, np.inf, epsabs=1e-14, epsrel=1e-13)[0] * r

    for i, x in enumerate(np.asarray(xs)):
        r0 = np.linalg.norm(x)
        ode = integrate.solve_ivp(
            lambda s, r: [speed(r[0])], (0, 1), [r0], rtol=1e-12, atol=1e-13, dense_output=True
        )
        for s in (0.3, 1.0):
            expected = x * ode.sol(s)[0] / r0
            np.testing.assert_allclose(np.asarray(sol.h(0, s)[i]), expected, atol=2e-9)


def _small_model(lr=0.3, order=10):
    law = mf.TwoLayerNonCentredLaw(2, sigma_u=1.0, sigma_xi=0.3)
    P = gauss_hermite_particles(law, order)
    xs = jnp.array([[0.8, 0.1], [-0.2, 0.9]])
    ys = jnp.array([[0.0, 1.0], [1.0, 0.0]])
    return MeanODE(mf.TwoLayerBlock("gelu"), P, xs, ys, lr), law


def _loss_through_forward(model, xs, z):
    """The limit loss at k = 0 computed by differentiating through the Diffrax forward solve."""
    m = eqx.tree_at(lambda mm: mm.particles.z, model, z)
    field = lambda s, h, args: m.velocity(h, m.particles.z)
    out = solve_dense(field, xs, t0=0.0, t1=1.0, rtol=1e-12, atol=1e-12)
    return m.loss_value(out.evaluate(1.0)) * xs.shape[0]  # sum of per-input losses


@pytest.fixture(scope="module")
def small_limit():
    """`_small_model()` (10⁴ quadrature particles) solved for k = 0 at 1e-12, and `jax.grad`
    of its loss through a Diffrax forward solve in the inputs and in the particles (one
    backward pass for both): the adjoint tests' references and the Monte-Carlo test's
    quadrature reference (one compiled solve and one differentiated solve, not three)."""
    model, law = _small_model()
    sol = solve_mean_ode(model, 0, rtol=1e-12, atol=1e-12)
    loss = lambda xs, z: _loss_through_forward(model, xs, z)
    grad_x, grad_z = jax.grad(loss, argnums=(0, 1))(model.xs, model.particles.z)
    return model, law, sol, grad_x, grad_z


def test_adjoint_matches_jax_grad_through_the_forward_solve(small_limit):
    model, _, sol, grad_x, _ = small_limit
    np.testing.assert_allclose(np.asarray(sol.b(0, 0.0)), np.asarray(grad_x), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("kind", ["2lp", "dict"])
def test_particle_step_against_a_hand_loop_over_particles_and_inputs(key, kind):
    """`particle_gradients` and `particle_step` on a stack of particles against a loop
    written here over the particles and the inputs, one `jax.vjp` of the unit each:
    `(1/n) Σ_i D_2φ(h_i, z_p)ᵀ b_i` and `z_p − η` times it; one unit as a stack of one."""
    d, N, n, lr = 3, 5, 4, 0.7
    if kind == "2lp":
        block = mf.TwoLayerBlock("gelu", inner_scale=0.6)
        law = mf.TwoLayerNonCentredLaw(d, sigma_u=0.9, sigma_xi=0.4)
    else:
        block = mf.FunctionBlock(lambda h, z: z["a"] * jnp.sin(z["w"] @ h + z["c"]))
        law = mf.SamplerLaw(
            lambda k: {
                "a": jr.normal(k, (d,)),
                "w": jr.normal(jr.fold_in(k, 1), (d,)),
                "c": jr.normal(jr.fold_in(k, 2), ()),
            }
        )
    z = jax.vmap(law.sample)(jr.split(key, N))
    hs = jr.normal(jr.fold_in(key, 1), (n, d))
    bs = jr.normal(jr.fold_in(key, 2), (n, d))
    grads = particle_gradients(block, z, hs, bs)
    stepped = particle_step(block, z, hs, bs, lr)
    for p in range(N):
        zp = jax.tree.map(lambda a, p=p: a[p], z)
        total = jax.tree.map(jnp.zeros_like, zp)
        for i in range(n):
            _, vjp = jax.vjp(lambda zz, i=i: block(hs[i], zz), zp)
            total = jax.tree.map(jnp.add, total, vjp(bs[i])[0])
        want = jax.tree.map(lambda t: t / n, total)
        got = jax.tree.map(lambda a, p=p: a[p], grads)
        for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-13, atol=1e-15)
        moved = jax.tree.map(lambda a, p=p: a[p], stepped)
        want = jax.tree.map(lambda a, g: a - lr * g, zp, want)
        for a, b in zip(jax.tree.leaves(moved), jax.tree.leaves(want), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-13, atol=1e-15)
        one = particle_step(block, jax.tree.map(lambda a: a[None], zp), hs, bs, lr)
        for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(moved), strict=True):
            np.testing.assert_allclose(np.asarray(a[0]), np.asarray(b), rtol=1e-13, atol=1e-15)
    assert float(jnp.max(jnp.abs(jax.tree.leaves(grads)[0]))) > 0  # not vacuous
    assert mf.particle_step is particle_step


def test_particle_gradient_is_the_depth_integral_of_the_adjoint(small_limit):
    """∂(Σ_i loss_i)/∂z_p = w_p ∫_0^1 Σ_i D_2φ(h_i(s), z_p)ᵀ b_i(s) ds for depth-constant z_p."""
    model, _, sol, _, grad_z = small_limit
    nodes, weights = np.polynomial.legendre.leggauss(40)
    s_all = jnp.asarray((nodes + 1) / 2)
    n = model.xs.shape[0]
    # particle_step with η = 1 gives z − (1/n) Σ_i D_2φᵀ b_i for every particle
    step = jax.vmap(
        lambda s: particle_step(model.block, model.particles.z, sol.h(0, s), sol.b(0, s), 1.0)
    )(s_all)
    integral = jax.tree.map(
        lambda zs, z0: n * jnp.tensordot(jnp.asarray(weights / 2), z0[None] - zs, axes=1),
        step,
        model.particles.z,
    )
    expected = jax.tree.map(lambda g: model.particles.weights[:, None] * g, integral)
    for a, b in zip(jax.tree.leaves(grad_z), jax.tree.leaves(expected), strict=True):
        scale = float(jnp.max(jnp.abs(b)))
        assert float(jnp.max(jnp.abs(a - b))) < 1e-7 * scale


def test_particle_recursion_converges_to_the_limit_at_order_one():
    """The finite recursion with the limit's own particles (Euler in depth, GD per
    particle) against the Diffrax limit, for k = 0, 1, 2: error slope −1 in L."""
    model, law = _small_model(order=8)
    sol = solve_mean_ode(model, 2, rtol=1e-11, atol=1e-11)
    probes = jax.vmap(law.sample)(jr.split(jr.key(0), 16))
    Ls = [16, 32, 64, 128]
    # the finest grid in one compiled call; each coarser one is every (128/L)-th of its
    # rows, at the same depths l/L (dyadic: exact), not a program per L
    fine = limit_on_grid(sol, Ls[-1])
    errs = []
    for L in Ls:
        sub = Ls[-1] // L
        e = euler_errors(
            model.block,
            model.particles,
            model.xs,
            model.ys,
            eqx.tree_at(lambda g: (g.h, g.b), fine, (fine.h[:, ::sub], fine.b[:, ::sub])),
            learning_rate=model.learning_rate,
            probes=probes,
        )
        errs.append([np.asarray(e.delta_h), np.asarray(e.delta_b), np.asarray(e.delta_z)])
    errs = np.array(errs)  # (L, quantity, step)
    for q in range(3):
        for k in range(3):
            if q == 2 and k == 0:
                assert np.all(errs[:, q, k] == 0)
                continue
            slope = np.polyfit(np.log(Ls), np.log(errs[:, q, k]), 1)[0]
            assert -1.1 < slope < -0.9, (q, k, slope, errs[:, q, k])


def test_euler_errors_against_a_plain_layer_loop():
    """`euler_errors` against the recursion written out: the limit's particles in every
    layer (α = 1/L), b^l as the gradient of the loss in a perturbation of h^l, each
    layer's particles and probes stepped with h^{l-1} and b^l, the probes compared with
    the dense limit's `params` at s = l/L. (Its slope test cannot see an O(1/L) slip such
    as b^{l-1} for b^l: that left the slope at −1 and moved the numbers by 64%.)"""
    model, law = _small_model(order=3)
    block, P, xs, ys, lr = model.block, model.particles, model.xs, model.ys, 0.4
    L, K, n = 4, 1, xs.shape[0]
    sol = solve_mean_ode(MeanODE(block, P, xs, ys, lr), K, rtol=1e-11, atol=1e-11)
    grid = limit_on_grid(sol, L)
    probes = jax.vmap(law.sample)(jr.split(jr.key(5), 3))
    e = euler_errors(block, P, xs, ys, grid, learning_rate=lr, probes=probes)
    layer = lambda tree, l: jax.tree.map(lambda a: a[l], tree)

    def forward(zs, x, eps):  # zs: particles per layer, eps: a perturbation of each h^l
        hs = [x + eps[0]]
        for l in range(L):
            values = jax.vmap(lambda zp, h=hs[-1]: block(h, zp))(layer(zs, l))
            hs.append(hs[-1] + jnp.tensordot(P.weights, values, axes=1) / L + eps[l + 1])
        return hs

    # the loops below run compiled (one program each, not some hundred ops one by one)
    @jax.jit
    def states(zs):  # h^l, b^l (L + 1, n, d) and the loss
        H, B, losses = [], [], []
        for i in range(n):
            eps0 = jnp.zeros((L + 1, 2))
            loss = lambda eps, i=i: mf.squared_loss(ys[i], forward(zs, xs[i], eps)[-1])
            H.append(jnp.stack(forward(zs, xs[i], eps0)))
            B.append(jax.grad(loss)(eps0))
            losses.append(loss(eps0))
        return jnp.stack(H, axis=1), jnp.stack(B, axis=1), jnp.mean(jnp.stack(losses))

    @jax.jit
    def gd(tree, H, B):  # layer l + 1 steps with h^l and b^{l+1}
        steps = [particle_step(block, layer(tree, l), H[l], B[l + 1], lr) for l in range(L)]
        return jax.tree.map(lambda *a: jnp.stack(a), *steps)

    def norm(tree):
        return jnp.sqrt(sum(jnp.sum(a**2, axis=-1) for a in jax.tree.leaves(tree)))

    stacked = lambda tree: jax.tree.map(lambda a: jnp.broadcast_to(a, (L,) + a.shape), tree)
    zs, zp = stacked(P.z), stacked(probes)
    for k in range(K + 1):
        H, B, loss = (np.asarray(a) for a in states(zs))
        for got, want in (
            (e.delta_h[k], np.max(np.linalg.norm(H - grid.h[k], axis=-1))),
            (e.delta_b[k], np.max(np.linalg.norm(B - grid.b[k], axis=-1))),
            (e.loss[k], loss),
        ):
            np.testing.assert_allclose(float(got), want, rtol=1e-12)
        copies = [sol.params(layer(stacked(probes), l), k, (l + 1) / L) for l in range(L)]
        gaps = [jax.tree.map(jnp.subtract, c, layer(zp, l)) for l, c in enumerate(copies)]
        dz = max(float(jnp.max(norm(g))) for g in gaps)
        np.testing.assert_allclose(float(e.delta_z[k]), dz, rtol=1e-10, atol=1e-15)
        zs, zp = gd(zs, jnp.asarray(H), jnp.asarray(B)), gd(zp, jnp.asarray(H), jnp.asarray(B))


def test_euler_errors_padded_in_depth_equal_their_own_depth():
    """One program for several depths (`meanfield study mean-ode` on a CPU): the Euler part
    at depth L run inside a deeper grid (`depth=L` traced, the grid's rows beyond L
    repeating row L, `pad_grid`) equals its own unpadded program to round-off at every
    step, Δ^Z and the loss included; a depth beyond the grid is refused."""
    from meanfield.coupling.design import pad_grid

    model, law = _small_model(order=3)
    block, P, xs, ys, lr = model.block, model.particles, model.xs, model.ys, 0.4
    sol = solve_mean_ode(MeanODE(block, P, xs, ys, lr), 2, rtol=1e-11, atol=1e-11)
    probes = jax.vmap(law.sample)(jr.split(jr.key(5), 3))
    Lb = 8

    @jax.jit  # one program for every depth up to Lb
    def padded(grid, depth):
        return euler_errors(block, P, xs, ys, grid, learning_rate=lr, probes=probes, depth=depth)

    for L in (2, 5, 8):
        grid = limit_on_grid(sol, L)
        own = euler_errors(block, P, xs, ys, grid, learning_rate=lr, probes=probes)
        deep = eqx.tree_at(lambda g: (g.h, g.b), grid, (pad_grid(grid.h, Lb), pad_grid(grid.b, Lb)))
        got = padded(deep, jnp.int32(L))
        for q in ("delta_h", "delta_b", "delta_z", "loss"):
            want = np.asarray(getattr(own, q))
            assert np.all(want[1:] > 0) if q == "delta_z" else np.all(want > 0)
            np.testing.assert_allclose(np.asarray(getattr(got, q)), want, rtol=1e-12, err_msg=q)
    with pytest.raises(ValueError, match="depth"):
        euler_errors(block, P, xs, ys, limit_on_grid(sol, 4), learning_rate=lr, probes=probes,
                     depth=5)  # fmt: skip


def test_limit_copies_and_coupling_basics(key):
    # 4⁴ particles: the program of the padded-particles test's fine rule (nothing here
    # depends on the limit's accuracy, only on its fields)
    model, law = _small_model(order=4)
    L, M = 6, 5
    net = mf.ResNet.sample(model.block, law, L=L, M=M, scaling=mf.MeanODEScaling(), key=key)
    zeros = LimitOnGrid(h=jnp.zeros((2, L + 1, 2, 2)), b=jnp.zeros((2, L + 1, 2, 2)))
    copies = limit_copies(model.block, net.params, zeros, 0.5)  # b = 0: nothing moves
    for a, b in zip(jax.tree.leaves(copies), jax.tree.leaves(net.params), strict=True):
        np.testing.assert_array_equal(np.asarray(a[1]), np.asarray(b))
    sol = solve_mean_ode(model, 1)
    grid = limit_on_grid(sol, L)  # one compiled call: against scalar evaluations, op by op
    for k in range(2):
        for l in (0, 1, L // 2, L):
            np.testing.assert_allclose(grid.h[k, l], sol.h(k, l / L), rtol=1e-14, atol=1e-15)
            np.testing.assert_allclose(grid.b[k, l], sol.b(k, l / L), rtol=1e-14, atol=1e-15)
    history = ((sol.forward[0], sol.backward[0]),)
    z0 = jax.tree.map(lambda a: a[0], net.params)  # M units
    for a, b in zip(
        jax.tree.leaves(sol.params(z0, 1, 0.5)),  # compiled
        jax.tree.leaves(model.evolve(z0, 0.5, history)),
        strict=True,
    ):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-15)
    errs = coupled_errors(net, model.xs, model.ys, grid, learning_rate=0.3)
    assert float(errs.delta_z[0]) == 0.0
    # Δ^h at k = 0 against a plain loop over layers and units
    U, V = np.asarray(net.params.u), np.asarray(net.params.v)
    from scipy.special import erf

    gelu = lambda t: 0.5 * t * (1 + erf(t / math.sqrt(2)))
    worst = 0.0
    for i, x in enumerate(np.asarray(model.xs)):
        h = x.copy()
        for l in range(L + 1):
            ref = np.asarray(sol.h(0, l / L)[i])
            worst = max(worst, np.linalg.norm(h - ref))
            if l < L:
                h = h + sum(V[l, j] * gelu(U[l, j] @ h) for j in range(M)) / (L * M)
    assert abs(float(errs.delta_h[0]) - worst) < 1e-12


def test_coupled_errors_after_gd_steps_against_a_plain_loop(key):
    """Δ^h, Δ^b, Δ^Z and the losses after k = 0, 1, 2 GD steps, each written out here from
    the SPEC's definitions: the forward pass as a loop over layers and units, the loss
    gradient from `jax.grad` of that loop, the step `Ẑ − η L M ∇𝓛` (the mean-ODE
    convention), b̂^l(x_i) as the gradient of input i's loss in an additive
    perturbation of h^l, and the limit copies updated by the limit rule with the grid's
    fields at s = l/L (row l of the grid). The grid is random: only the definitions are
    under test, not a limit solve."""
    block = mf.TwoLayerBlock("tanh")
    law = mf.TwoLayerNonCentredLaw(2, sigma_u=1.0, sigma_xi=0.5)
    L, M, n, d, steps, lr = 3, 2, 2, 2, 2, 0.7
    kn, kx, kh, kb = jr.split(key, 4)
    net = mf.ResNet.sample(block, law, L=L, M=M, scaling=mf.MeanODEScaling(), key=kn)
    xs, ys = jr.normal(kx, (2, n, d))
    grid = LimitOnGrid(
        h=jr.normal(kh, (steps + 1, L + 1, n, d)), b=jr.normal(kb, (steps + 1, L + 1, n, d))
    )
    errs = coupled_errors(net, xs, ys, grid, learning_rate=lr)

    phi = lambda h, u, v: v * jnp.tanh(u @ h)  # the 2LP unit, written out

    def run_from(units, l0, h):  # layers l0+1..L applied to h^{l0}
        for l in range(l0, L):
            h = h + sum(phi(h, units[0][l, j], units[1][l, j]) for j in range(M)) / (L * M)
        return h

    def states(units, x):  # h^0..h^L
        hs = [x]
        for l in range(L):
            hs.append(
                hs[l] + sum(phi(hs[l], units[0][l, j], units[1][l, j]) for j in range(M)) / (L * M)
            )
        return hs

    def per_input_loss(units, l, h_l, y):
        return 0.5 * jnp.sum((run_from(units, l, h_l) - y) ** 2)

    def loss(units):
        return sum(per_input_loss(units, 0, x, y) for x, y in zip(xs, ys, strict=True)) / n

    def limit_step(u, v, hs, bs):  # Z − η (1/n) Σ_i D_2φ(h_i, Z)ᵀ b_i
        g = jax.grad(lambda uv: sum(phi(h, *uv) @ b for h, b in zip(hs, bs, strict=True)))
        gu, gv = g((u, v))
        return u - lr * gu / n, v - lr * gv / n

    # the written-out definitions run compiled: one program to measure a step, one to
    # take it (op by op they were some seventy programs)
    @jax.jit
    def measured(units, copies, gh, gb):  # Δ^h, Δ^b, Δ^Z and the loss; gh, gb: grid rows k
        dh = db = dz = 0.0
        for i in range(n):
            hs = states(units, xs[i])
            for l in range(L + 1):
                b_l = jax.grad(per_input_loss, argnums=2)(units, l, hs[l], ys[i])
                dh = jnp.maximum(dh, jnp.linalg.norm(gh[l, i] - hs[l]))
                db = jnp.maximum(db, jnp.linalg.norm(gb[l, i] - b_l))
        for l in range(L):
            for j in range(M):
                gap = jnp.concatenate(
                    [copies[0][l, j] - units[0][l, j], copies[1][l, j] - units[1][l, j]]
                )
                dz = jnp.maximum(dz, jnp.linalg.norm(gap))
        return dh, db, dz, loss(units)

    @jax.jit
    def stepped(units, copies, gh, gb):  # the finite GD step and the copies' limit step
        grads = jax.grad(loss)(units)
        units = tuple(p - lr * L * M * g for p, g in zip(units, grads, strict=True))
        new = [
            [limit_step(copies[0][l, j], copies[1][l, j], gh[l + 1], gb[l + 1]) for j in range(M)]
            for l in range(L)
        ]
        copies = tuple(jnp.array([[c[p] for c in row] for row in new]) for p in range(2))
        return units, copies

    units = (net.params.u, net.params.v)
    copies = units
    for k in range(steps + 1):
        dh, db, dz, loss_k = (float(a) for a in measured(units, copies, grid.h[k], grid.b[k]))
        np.testing.assert_allclose(float(errs.delta_h[k]), dh, rtol=1e-10)
        np.testing.assert_allclose(float(errs.delta_b[k]), db, rtol=1e-10)
        np.testing.assert_allclose(float(errs.delta_z[k]), dz, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(float(errs.loss[k]), loss_k, rtol=1e-12)
        if k == steps:
            break
        units, copies = stepped(units, copies, grid.h[k], grid.b[k])
    assert float(errs.delta_z[steps]) > 1e-3  # the copies and the units did part


def test_monte_carlo_reference_error_shrinks_like_one_over_sqrt_n(key, small_limit):
    """Independent MC references at N and 16N: their distance to a quadrature reference
    drops by about 4 (checked loosely: by more than 2 on average over 6 repetitions).
    The reference: 10 nodes per coordinate at 1e-12, within 2.5e-13 of 12 nodes at 1e-10
    and 2e-14 of 16 at 1e-12; the distances measured are 0.018 and more."""
    model, law, sol, _, _ = small_limit
    exact = sol.h(0, 1.0)
    d_small, d_big = [], []
    for r in range(6):
        for count, out in ((256, d_small), (4096, d_big)):
            P = monte_carlo_particles(law, count, key=jr.fold_in(key, 100 * r + count))
            m = MeanODE(model.block, P, model.xs, model.ys, model.learning_rate)
            out.append(
                float(jnp.linalg.norm(solve_mean_ode(m, 0, rtol=1e-8, atol=1e-8).h(0, 1.0) - exact))
            )
    assert np.mean(d_small) > 2 * np.mean(d_big)


def test_bad_inputs():
    model, law = _small_model()
    with pytest.raises(ValueError, match="block"):
        MeanODE(mf.MatrixBlock(), model.particles, model.xs, model.ys, 0.1)
    with pytest.raises(ValueError, match="xs and ys"):
        MeanODE(model.block, model.particles, model.xs, model.ys[:1], 0.1)
    with pytest.raises(ValueError, match="learning_rate"):
        MeanODE(model.block, model.particles, model.xs, model.ys, -1.0)
    with pytest.raises(ValueError, match="steps"):
        solve_mean_ode(model, -1)
    with pytest.raises(ValueError, match="solver"):
        solve_dense(lambda t, y, a: y, jnp.ones(1), t0=0.0, t1=1.0, solver="euler-ish")
    with pytest.raises(ValueError, match="^learning_rate must be"):
        MeanODE(model.block, model.particles, model.xs, model.ys, True)
    assert MeanODE(model.block, model.particles, model.xs, model.ys, np.float32(0.5)).learning_rate
    with pytest.raises(ValueError, match="^rtol and atol must be finite"):
        solve_mean_ode(model, 0, rtol=float("inf"))
    with pytest.raises(ValueError, match="^L must be a positive integer"):
        limit_on_grid(solve_mean_ode(model, 0, rtol=1e-6, atol=1e-6), 0)


def test_coupled_errors_bad_inputs_name_the_argument(key):
    """Inputs that used to give numbers without a meaning (a grid for other data, a net
    outside the mean-ODE scaling, an impossible depth or width, a bad learning rate)."""
    from meanfield.coupling.mean_ode import draw_units

    law = mf.TwoLayerNonCentredLaw(2, sigma_u=1.0, sigma_xi=0.3)
    block = mf.TwoLayerBlock("tanh")
    L, M = 4, 3
    net = mf.ResNet(block, draw_units(law, key, L, M), 1.0 / (L * M))
    xs = jr.normal(key, (3, 2))
    ys = jnp.roll(xs, 1, axis=1)
    grid = LimitOnGrid(h=jnp.zeros((2, L + 1, 3, 2)), b=jnp.zeros((2, L + 1, 3, 2)))
    run = lambda **kw: coupled_errors(
        **{"net": net, "xs": xs, "ys": ys, "grid": grid, "learning_rate": 0.3, **kw}
    )
    other = LimitOnGrid(h=jnp.zeros((2, L + 1, 1, 2)), b=jnp.zeros((2, L + 1, 1, 2)))
    with pytest.raises(
        ValueError, match=r"^grid: h and b must have shape \(k \+ 1, L \+ 1, n, d\)"
    ):
        run(grid=other)
    with pytest.raises(ValueError, match="^net: the coupling is for the mean-ODE scaling"):
        run(net=mf.ResNet(block, net.params, 1.0 / math.sqrt(L * M)))
    for kw, needle in (
        ({"depth": 0}, "^depth must be in 1..4"),
        ({"depth": L + 3}, "^depth must be in 1..4"),
        ({"width": -1}, "^width must be in 1..3"),
        ({"learning_rate": -1.0}, "^learning_rate must be a finite number >= 0"),
        ({"learning_rate": float("nan")}, "^learning_rate must be a finite number"),
        ({"learning_rate": "0.1"}, "^learning_rate must be a finite number"),
    ):
        with pytest.raises(ValueError, match=needle):
            run(**kw)
    run(depth=jnp.int32(L), width=np.int64(M), learning_rate=np.float32(0.3))  # accepted
    run(net=mf.ResNet(block, net.params, np.float32(1.0 / (L * M))))  # 1/(LM) in float32


def _sum_of_squares(y, prediction):  # 2 × the default ½‖·‖²: another GD dynamics
    return jnp.sum((prediction - y) ** 2)


def test_limit_on_grid_carries_the_limit_learning_rate_and_loss(key):
    """A grid from `limit_on_grid` knows the η and loss the limit was trained with: the
    coupled errors train with that loss by default (the same numbers as passing it by
    hand, other numbers than the default ½‖·‖²), and refuse another η or loss, which
    would compare two different GD dynamics."""
    from meanfield.coupling.mean_ode import draw_units
    from meanfield.training.loop import squared_loss

    model, law = _small_model(order=4)
    model = MeanODE(model.block, model.particles, model.xs, model.ys, 0.3, _sum_of_squares)
    grid = limit_on_grid(solve_mean_ode(model, 1, rtol=1e-8, atol=1e-8), 4)
    assert (grid.learning_rate, grid.loss) == (0.3, _sum_of_squares)
    net = mf.ResNet(model.block, draw_units(law, key, 4, 3), 1.0 / 12)
    xs, ys = model.xs, model.ys
    bare = LimitOnGrid(h=grid.h, b=grid.b)  # built by hand: settings unknown, unchecked
    default = coupled_errors(net, xs, ys, grid, learning_rate=0.3)
    by_hand = coupled_errors(net, xs, ys, bare, learning_rate=0.3, loss=_sum_of_squares)
    half = coupled_errors(net, xs, ys, bare, learning_rate=0.3)
    for name in ("delta_h", "delta_b", "delta_z", "loss"):
        np.testing.assert_array_equal(
            np.asarray(getattr(default, name)), np.asarray(getattr(by_hand, name))
        )
    assert not np.allclose(np.asarray(default.delta_b), np.asarray(half.delta_b))
    with pytest.raises(ValueError, match=r"^learning_rate must be the limit's \(0\.3, "):
        coupled_errors(net, xs, ys, grid, learning_rate=0.5)
    with pytest.raises(ValueError, match="^loss must be the function the limit was solved "):
        coupled_errors(net, xs, ys, grid, learning_rate=0.3, loss=squared_loss)
    probes = jax.vmap(law.sample)(jr.split(key, 2))
    P = model.particles
    with pytest.raises(ValueError, match=r"^learning_rate must be the limit's \(0\.3, "):
        euler_errors(model.block, P, xs, ys, grid, learning_rate=0.5, probes=probes)
    e = euler_errors(model.block, P, xs, ys, grid, learning_rate=np.float32(0.3), probes=probes)
    e_hand = euler_errors(
        model.block, P, xs, ys, bare, learning_rate=0.3, probes=probes, loss=_sum_of_squares
    )
    np.testing.assert_allclose(np.asarray(e.delta_b), np.asarray(e_hand.delta_b), rtol=1e-6)


def test_draw_units_does_not_depend_on_the_array_shape(key):
    from meanfield.coupling.mean_ode import draw_units

    law = mf.TwoLayerNonCentredLaw(3, sigma_u=0.7, sigma_xi=0.4)
    small, big = draw_units(law, key, 5, 3), draw_units(law, key, 8, 16)
    for a, b in zip(jax.tree.leaves(small), jax.tree.leaves(big), strict=True):
        np.testing.assert_array_equal(np.asarray(b[:5, :3]), np.asarray(a))
    # and the law is right: u ~ N(0, σ_u² I) over many units
    u = np.asarray(draw_units(law, key, 64, 256).u).reshape(-1, 3)
    se = 0.49 * math.sqrt(2 / u.shape[0])
    assert np.all(np.abs(u.var(axis=0) - 0.49) < 5 * se)
    with pytest.raises(ValueError, match="law"):
        draw_units(object(), key, 2, 2)


@pytest.mark.parametrize(  # sigmoid(0) != 0: the masks are needed
    ("activation", "shapes"), [("gelu", ((5, 3), (8, 16))), ("sigmoid", ((5, 3), (1, 1)))]
)
def test_padded_coupled_errors_equal_the_unpadded_network(key, activation, shapes):
    """One program for every (depth, width) inside a box: same numbers as the exact shape."""
    from meanfield.coupling.mean_ode import draw_units

    law = mf.TwoLayerNonCentredLaw(2, sigma_u=1.25, sigma_xi=0.3)
    block = mf.TwoLayerBlock(activation)
    xs = jr.normal(jr.fold_in(key, 1), (3, 2))
    ys = jnp.roll(xs, 1, axis=1)
    Lb, Mb, steps = 8, 16, 2
    pb = draw_units(law, key, Lb, Mb)
    big = mf.ResNet(block, pb, 1.0 / (Lb * Mb))

    @jax.jit
    def padded(h, b, depth, width):
        grid = LimitOnGrid(h=h, b=b)
        return coupled_errors(big, xs, ys, grid, learning_rate=0.3, depth=depth, width=width)

    for L, M in shapes:
        h = jr.normal(jr.fold_in(key, 10 * L + M), (steps + 1, L + 1, 3, 2))
        b = jr.normal(jr.fold_in(key, 10 * L + M + 1), (steps + 1, L + 1, 3, 2))
        net = mf.ResNet(block, draw_units(law, key, L, M), 1.0 / (L * M))
        exact = coupled_errors(net, xs, ys, LimitOnGrid(h=h, b=b), learning_rate=0.3)
        pad = lambda a, L=L: jnp.pad(a, ((0, 0), (0, Lb - L), (0, 0), (0, 0)), mode="edge")
        out = padded(pad(h), pad(b), jnp.int32(L), jnp.int32(M))
        for name in ("delta_h", "delta_b", "delta_z", "loss"):
            np.testing.assert_allclose(
                np.asarray(getattr(out, name)), np.asarray(getattr(exact, name)), rtol=1e-12
            )
        assert float(exact.delta_z[-1]) > 0  # the comparison is not vacuous
