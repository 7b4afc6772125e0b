"""The Transformer, its parametrisation tables and Adam per group (issue 49): the tables
against CompleteP's Table 1 written out here, the network against a
plain loop over layers, heads and tokens, its gradients against `jax.grad` of that loop,
one Adam step against Adam written out by hand."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from meanfield.blocks.transformer import CausalAttention, MLPBranch
from meanfield.models.resnet import ResNet
from meanfield.models.transformer import Transformer
from meanfield.parametrisation import (
    COMPLETEP,
    DEPTH_MUP,
    GROUPS,
    MUP,
    STANDARD,
    Parametrisation,
    from_table,
    get_parametrisation,
)
from meanfield.training.transformer import adam, group_hyperparameters, optimizer, sgd, train

# --- CompleteP's Table 1 (Dey et al. 2025), written out: width multiplier mN, depth
# multiplier mL, exponent alpha; the attention power from its reference code
# (EleutherAI/nanoGPT-mup, branch completep, model.py, CausalSelfAttention.forward).
# Every rule against each source, with the sources' disagreements:
# tests/test_parametrisation_sources.py ---------------------------------------------------


def reference_rules(name, mN, mL):
    """{group: (lr factor, eps factor, weight-decay factor, init-std factor)} and the
    forward factors (branch, output, attention power), as Table 1 gives them."""
    if name == "standard":
        groups = {g: (1.0, 1.0, 1.0, 1.0) for g in GROUPS}
        return groups, (1.0, 1.0, 0.5)
    if name == "mup":
        width_lr = 1 / mN
        eps = 1 / mN  # "AdamW ε (residual blocks)": the hidden groups only
        groups = {
            "embedding": (1.0, 1.0, 1.0, 1.0),
            "hidden_norms": (1.0, eps, 1.0, 1.0),
            "hidden_weights": (width_lr, eps, mN, 1 / math.sqrt(mN)),  # "Hidden WD" λ mN
            "hidden_biases": (1.0, eps, 1.0, 1.0),
            "final_norm": (1.0, 1.0, 1.0, 1.0),
            "unembedding": (1.0, 1.0, 1.0, 1.0),
        }
        return groups, (1.0, 1 / mN, 1.0)
    alpha = {"depth-mup": 0.5, "completep": 1.0}[name]
    depth_lr = mL ** (alpha - 1)
    width_lr = 1 / mN
    hidden_eps = (1 / mN) * mL ** (-alpha)
    groups = {
        "embedding": (1.0, 1.0, 1.0, 1.0),
        "hidden_norms": (depth_lr, hidden_eps, 1.0, 1.0),
        "hidden_weights": (width_lr * depth_lr, hidden_eps, mN, 1 / math.sqrt(mN)),
        "hidden_biases": (depth_lr, hidden_eps, 1.0, 1.0),
        "final_norm": (1.0, 1.0, 1.0, 1.0),
        "unembedding": (1.0, 1.0, 1.0, 1.0),
    }
    return groups, (mL ** (-alpha), 1 / mN, 1.0)


@pytest.mark.parametrize("name", ["standard", "mup", "depth-mup", "completep"])
def test_tables_give_the_reference_rules(name):
    N, L, N0, L0 = 256, 24, 32, 3  # mN = 8, mL = 8
    model = Transformer(vocab=7, context=4, width=N, depth=L, heads=4, parametrisation=name,
                        base_width=N0, base_depth=L0)  # fmt: skip
    groups, (branch, output, attention) = reference_rules(name, N / N0, L / L0)
    hyper = group_hyperparameters(model, lr=1.0, eps=1.0, weight_decay=1.0)
    for g in GROUPS:
        lr, eps, wd, std = groups[g]
        assert hyper[g]["lr"] == pytest.approx(lr, rel=1e-14), g
        assert hyper[g]["eps"] == pytest.approx(eps, rel=1e-14), g
        decayed = g in ("embedding", "hidden_weights", "unembedding")  # 2-D parameters
        assert hyper[g]["weight_decay"] == pytest.approx(wd if decayed else 0.0, rel=1e-14), g
        assert model.factor(g, "init_std") == pytest.approx(std, rel=1e-14), g
    assert model.branch_multiplier == pytest.approx(branch, rel=1e-14)
    assert model.logit_multiplier == pytest.approx(output, rel=1e-14)
    assert model.parametrisation.attention == attention


def reference_sgd_rules(name, mN, mL):
    """{group: (lr factor, weight-decay factor)} of the SGD tables, written out: μP's SGD
    rules in width (Tensor Programs V, Table 8, with the output multiplier 1/fan_in:
    vector-like parameters at fan_out = mN, hidden matrices at 1, the output matrix at
    fan_in = mN), the hidden learning rates times mL^(2α−1) in depth, weight decay the
    inverse of the learning rate on the decayed groups."""
    if name == "standard-sgd":
        return {g: (1.0, 1.0) for g in GROUPS}
    alpha = {"mup-sgd": None, "depth-mup-sgd": 0.5, "completep-sgd": 1.0}[name]
    depth = 1.0 if alpha is None else mL ** (2 * alpha - 1)
    return {
        "embedding": (mN, 1 / mN),
        "hidden_weights": (depth, 1 / depth),
        "hidden_biases": (mN * depth, 1.0),
        "hidden_norms": (mN * depth, 1.0),
        "final_norm": (mN, 1.0),
        "unembedding": (mN, 1 / mN),
    }


@pytest.mark.parametrize("name", ["standard-sgd", "mup-sgd", "depth-mup-sgd", "completep-sgd"])
def test_sgd_tables_give_the_stated_rules(name):
    """The SGD tables' learning rates and weight decays as stated, their initialisation
    and forward multipliers those of the Adam table they come from."""
    N, L, N0, L0 = 256, 24, 32, 3  # mN = 8, mL = 8
    model = Transformer(vocab=7, context=4, width=N, depth=L, heads=4, parametrisation=name,
                        base_width=N0, base_depth=L0)  # fmt: skip
    adam_table = get_parametrisation(name.removesuffix("-sgd"))
    twin = Transformer(vocab=7, context=4, width=N, depth=L, heads=4,
                       parametrisation=adam_table, base_width=N0, base_depth=L0)  # fmt: skip
    hyper = group_hyperparameters(model, lr=1.0, eps=1.0, weight_decay=1.0)
    for g, (lr, wd) in reference_sgd_rules(name, N / N0, L / L0).items():
        assert hyper[g]["lr"] == pytest.approx(lr, rel=1e-14), g
        decayed = g in ("embedding", "hidden_weights", "unembedding")
        assert hyper[g]["weight_decay"] == pytest.approx(wd if decayed else 0.0, rel=1e-14), g
        assert model.factor(g, "init_std") == twin.factor(g, "init_std"), g
    assert model.parametrisation.optimizer == "sgd" and adam_table.optimizer == "adam"
    assert model.branch_multiplier == twin.branch_multiplier
    assert model.logit_multiplier == twin.logit_multiplier
    assert model.parametrisation.attention == adam_table.attention
    assert from_table(model.parametrisation.table()) == model.parametrisation


def test_sgd_step_by_hand():
    """One step of the per-group SGD against SGD written out, `p − lr_g (g + wd_g p)`
    with each group's lr and wd; `optimizer` picks it from the table."""
    model = Transformer(vocab=9, context=4, width=16, depth=4, heads=2,
                        parametrisation="completep-sgd", base_width=4, base_depth=2)  # fmt: skip
    p = model.init(jax.random.key(5))
    x = jax.random.randint(jax.random.key(6), (1, 2, 4), 0, 9)
    y = jax.random.randint(jax.random.key(7), (1, 2, 4), 0, 9)
    lr, wd = 0.3, 0.1
    p1, _ = train(model, p, x, y, optimizer(model, lr=lr, weight_decay=wd))
    p1_direct, _ = train(model, p, x, y, sgd(model, lr=lr, weight_decay=wd))
    g = jax.grad(model.loss)(p, x[0], y[0])
    hyper = group_hyperparameters(model, lr=lr, weight_decay=wd)
    labels = model.labels(p)
    flat = (jax.tree.leaves(t) for t in (p, g, labels, p1, p1_direct))
    for w, gw, lab, w1, w1d in zip(*flat, strict=True):
        h = hyper[lab]
        expected = w - h["lr"] * (gw + h["weight_decay"] * w)
        np.testing.assert_allclose(w1, expected, rtol=1e-10, atol=1e-14)
        np.testing.assert_array_equal(w1, w1d)
    assert {h["lr"] for h in hyper.values()} != {lr}  # the rules do act (mN = 4, mL = 2)


def test_base_size_gives_base_values_in_every_table():
    from meanfield.parametrisation import PARAMETRISATIONS

    for table in PARAMETRISATIONS.values():
        model = Transformer(vocab=7, context=4, width=32, depth=3, parametrisation=table,
                            base_width=32, base_depth=3)  # fmt: skip
        hyper = group_hyperparameters(model, lr=0.1, eps=1e-8, weight_decay=0.5)
        assert all(h["lr"] == 0.1 and h["eps"] == 1e-8 for h in hyper.values())
        assert model.branch_multiplier == 1.0 and model.logit_multiplier == 1.0


def test_drawn_sizes_follow_the_table():
    """The drawn matrices' standard deviations (a Monte Carlo estimate over their
    entries) follow the init rule: σ everywhere under SP, σ/sqrt(mN) for the hidden
    matrices under μP."""
    for table, hidden in (("standard", 1.0), ("mup", 0.5)):
        model = Transformer(vocab=64, context=8, width=128, depth=2, parametrisation=table,
                            base_width=32, init_std=0.1)  # fmt: skip
        p = model.init(jax.random.key(3))
        for w, expected in (
            (p["attention"]["weights"]["q"], 0.1 * hidden),
            (p["mlp"]["weights"]["out"], 0.1 * hidden),
            (p["embedding"]["tokens"], 0.1),
            (p["unembedding"], 0.1),
        ):
            w = np.asarray(w).ravel()
            se = expected / math.sqrt(2 * w.size)  # standard error of a sample std
            assert abs(w.std() - expected) < 5 * se


def test_user_table_and_refusals():
    mine = COMPLETEP.replace(name="alpha-3/4", alpha=0.75)
    for table in (STANDARD, MUP, DEPTH_MUP, COMPLETEP, mine):  # a results file's round trip
        assert from_table(table.table()) == table
    assert mine.branch(16.0) == pytest.approx(16.0**-0.75)
    assert get_parametrisation(mine) is mine
    assert mine != COMPLETEP and hash(mine) != hash(COMPLETEP)
    with pytest.raises(ValueError, match="rules: unknown group 'hidden'"):
        Parametrisation("x", rules={"hidden": {"lr": (1, 0)}})
    with pytest.raises(ValueError, match="unknown quantity 'momentum'"):
        Parametrisation("x", rules={"embedding": {"momentum": (1, 0)}})
    with pytest.raises(ValueError, match=r"rules\['embedding'\]\['lr'\] must be a pair"):
        Parametrisation("x", rules={"embedding": {"lr": 1.0}})
    with pytest.raises(ValueError, match="optimizer must be one of"):
        Parametrisation("x", optimizer="lion")
    assert mine.replace(optimizer="sgd") != mine  # the optimiser is part of the table
    with pytest.raises(ValueError, match="parametrisation must be one of"):
        Transformer(vocab=5, context=4, width=8, depth=2, parametrisation="mu-p")
    with pytest.raises(ValueError, match="heads: 3 does not divide width 8"):
        Transformer(vocab=5, context=4, width=8, depth=2, heads=3)
    with pytest.raises(ValueError, match="depth must be a positive integer"):
        Transformer(vocab=5, context=4, width=8, depth=0)
    model = Transformer(vocab=5, context=4, width=8, depth=2)
    with pytest.raises(ValueError, match="tokens: 5 tokens, more than context = 4"):
        model(model.init(jax.random.key(0)), jnp.zeros(5, int))


# --- the network against a plain loop ----------------------------------------------------


def plain_logits(model: Transformer, p, tokens):
    """The Transformer written out: Python loops over layers, heads and query tokens."""
    T, N, H = tokens.shape[0], model.width, model.heads
    dh = N // H
    beta = model.branch_multiplier

    def ln(v, branch):
        if "norm" not in branch:  # a model without norms (Chizat's)
            return v
        m = sum(v[i] for i in range(N)) / N
        var = sum((v[i] - m) ** 2 for i in range(N)) / N
        return (v - m) / jnp.sqrt(var + 1e-5) * branch["norm"]["gain"] + branch["norm"]["shift"]

    def bias(branch, name):
        return branch["biases"][name] if "biases" in branch else 0.0

    x = [
        (p["embedding"]["tokens"][tokens[t]] + p["embedding"]["positions"][t])
        * model.input_multiplier
        for t in range(T)
    ]
    for layer in range(model.depth):
        a = jax.tree.map(lambda z, i=layer: z[i], p["attention"])
        u = [ln(x[t], a) for t in range(T)]
        q = [u[t] @ a["weights"]["q"] + bias(a, "q") for t in range(T)]
        k = [u[t] @ a["weights"]["k"] + bias(a, "k") for t in range(T)]
        v = [u[t] @ a["weights"]["v"] + bias(a, "v") for t in range(T)]
        new = []
        for t in range(T):
            heads = []
            for h in range(H):
                sl = slice(h * dh, (h + 1) * dh)
                scores = (
                    jnp.stack([q[t][sl] @ k[s][sl] for s in range(t + 1)])
                    / dh**model.parametrisation.attention
                )
                w = jnp.exp(scores - scores.max())
                w = w / w.sum()
                heads.append(sum(w[s] * v[s][sl] for s in range(t + 1)))
            y = jnp.concatenate(heads)
            new.append(x[t] + beta * (y @ a["weights"]["o"] + bias(a, "o")))
        x = new
        m = jax.tree.map(lambda z, i=layer: z[i], p["mlp"])
        new = []
        for t in range(T):
            u = ln(x[t], m)
            pre = u @ m["weights"]["in"] + bias(m, "in")
            act = 0.5 * pre * (1 + jax.scipy.special.erf(pre / math.sqrt(2)))
            new.append(x[t] + beta * (act @ m["weights"]["out"] + bias(m, "out")))
        x = new
    final = {"norm": p["final_norm"]} if "final_norm" in p else {}
    return jnp.stack(
        [ln(x[t], final) * model.logit_multiplier @ p["unembedding"] for t in range(T)]
    )


def _perturbed(model, key):
    """A draw with every parameter moved off its initial value (norms, biases too)."""
    p = model.init(key)
    leaves, tree = jax.tree.flatten(p)
    keys = jax.random.split(jax.random.fold_in(key, 9), len(leaves))
    return jax.tree.unflatten(
        tree, [w + 0.3 * jax.random.normal(k, w.shape) for w, k in zip(leaves, keys, strict=True)]
    )


@pytest.mark.parametrize("name", ["standard", "completep"])
def test_logits_and_gradients_against_a_plain_loop(name):
    model = Transformer(vocab=11, context=5, width=8, depth=3, heads=2, expansion=2,
                        parametrisation=name, base_width=4, base_depth=1, init_std=0.5)  # fmt: skip
    p = _perturbed(model, jax.random.key(1))
    tokens = jnp.array([3, 1, 4, 1, 5])
    _against_the_plain_loop(model, p, tokens)


def _against_the_plain_loop(model, p, tokens):
    """Logits (1e-11) and the gradients of the next-token loss (1e-9) of `model` at `p`
    against the plain loop and `jax.grad` of it."""
    np.testing.assert_allclose(
        model(p, tokens), plain_logits(model, p, tokens), rtol=1e-11, atol=1e-12
    )
    n = tokens.shape[0] - 1
    x, y = tokens[None, :n], tokens[None, 1:]

    def plain_loss(q):
        logits = plain_logits(model, q, x[0])
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(n), y[0]])

    g_model = jax.grad(model.loss)(p, x, y)
    g_plain = jax.grad(plain_loss)(p)
    for a, b in zip(jax.tree.leaves(g_model), jax.tree.leaves(g_plain), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_a_skeleton_with_traced_numbers_is_the_network_and_compiles_once_per_optimiser():
    """`skeleton_and_numbers`: the skeleton holding its table's numbers as traced data
    draws, computes (against the plain loop) and steps its optimiser as the network does,
    for every built-in table at a size off the base; one jitted program serves every
    table of one optimiser."""
    tokens = jnp.array([3, 1, 4, 1, 5])
    x, y = tokens[None, :4], tokens[None, 1:]

    def run(net, key):
        p = net.init(key)
        opt = optimizer(net, lr=0.03, eps=1e-6, weight_decay=0.1)
        g = jax.grad(net.loss)(p, x, y)
        update, _ = opt.update(g, opt.init(p), p)
        return p, net(p, tokens), update

    shared = jax.jit(lambda numbers, key, skeleton: run(skeleton.with_numbers(numbers), key),
                     static_argnums=2)  # fmt: skip
    skeletons = set()
    names = ["standard", "mup", "depth-mup", "completep", "mup-sgd", "completep-sgd"]
    for name in names:
        net = Transformer(vocab=11, context=5, width=8, depth=3, heads=2, expansion=2,
                          parametrisation=name, base_width=4, base_depth=1, init_std=0.5,
                          input_multiplier=0.5, output_multiplier=2.0)  # fmt: skip
        skeleton, numbers = net.skeleton_and_numbers()
        skeletons.add(skeleton)
        key = jax.random.key(7)
        p, logits, update = shared(numbers, key, skeleton)
        p_net, _, update_net = run(net, key)
        for a, b in zip(jax.tree.leaves(p), jax.tree.leaves(p_net), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(logits, plain_logits(net, p_net, tokens), rtol=1e-11, atol=1e-12)
        # (against the largest update: the key biases' gradients are 0 up to round-off, the
        # softmax not seeing a shift of every key by one vector)
        scale = max(float(jnp.max(jnp.abs(b))) for b in jax.tree.leaves(update_net))
        for a, b in zip(jax.tree.leaves(update), jax.tree.leaves(update_net), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9 * scale)
    assert len(skeletons) == 2 and shared._cache_size() == 2  # one per optimiser
    with pytest.raises(ValueError, match="parametrisation"):
        Transformer(vocab=11, context=5, width=8, depth=3, parametrisation="nope")


def test_chizats_model_without_norms_or_biases_against_the_plain_loop():
    """One head, no norms, no biases (Chizat's alternating attention and 2LP blocks), with
    input and output multipliers: logits and gradients against the plain loop."""
    model = Transformer(
        vocab=7, context=4, width=6, depth=2, heads=1, expansion=3, parametrisation="depth-mup",
        base_width=3, base_depth=1, init_std=0.6, input_multiplier=1.7, output_multiplier=0.4,
        norm=False, bias=False,
    )  # fmt: skip
    p = _perturbed(model, jax.random.key(8))
    assert set(p) == {"embedding", "attention", "mlp", "unembedding"}
    assert set(p["attention"]) == {"weights"}
    _against_the_plain_loop(model, p, jnp.array([2, 6, 0, 3]))


def test_branches_run_on_the_engine():
    """A stack of attention branches (a layer block) is a ResNet the engine runs: the
    same state as the Transformer's attention-only recursion written out."""
    T, N, L = 3, 4, 2
    block = CausalAttention(tokens=T, heads=2)
    model = Transformer(vocab=5, context=T, width=N, depth=L, heads=2)
    p = _perturbed(model, jax.random.key(2))
    net = ResNet(block, p["attention"], 0.5)
    h0 = jax.random.normal(jax.random.key(4), (T * N,))
    h = h0
    for layer in range(L):
        h = h + 0.5 * block(h, jax.tree.map(lambda z, i=layer: z[i], p["attention"]))
    np.testing.assert_allclose(net(h0), h, rtol=1e-12)
    mlp = MLPBranch(tokens=T)
    out, inputs = mlp.branch(h0, jax.tree.map(lambda z: z[0], p["mlp"]))
    assert out.shape == (T * N,) and set(inputs) == {"in", "out"}


def test_adam_step_by_hand():
    """One step of the per-group AdamW against Adam written out: the first step is
    `-lr (g / (|g| + eps) + wd p)` per entry, with each group's lr, eps and wd."""
    model = Transformer(vocab=9, context=4, width=16, depth=4, heads=2, parametrisation="completep",
                        base_width=4, base_depth=2)  # fmt: skip
    p = model.init(jax.random.key(5))
    x = jax.random.randint(jax.random.key(6), (1, 2, 4), 0, 9)
    y = jax.random.randint(jax.random.key(7), (1, 2, 4), 0, 9)
    lr, eps, wd = 0.01, 1e-3, 0.1
    p1, losses = train(model, p, x, y, adam(model, lr=lr, eps=eps, weight_decay=wd))
    g = jax.grad(model.loss)(p, x[0], y[0])
    hyper = group_hyperparameters(model, lr=lr, eps=eps, weight_decay=wd)
    labels = model.labels(p)
    flat_p, flat_g, flat_l, flat_1 = (jax.tree.leaves(t) for t in (p, g, labels, p1))
    for w, gw, lab, w1 in zip(flat_p, flat_g, flat_l, flat_1, strict=True):
        h = hyper[lab]
        expected = w - h["lr"] * (gw / (jnp.abs(gw) + h["eps"]) + h["weight_decay"] * w)
        np.testing.assert_allclose(w1, expected, rtol=1e-10, atol=1e-14)
    assert losses.shape == (1,)
    assert float(losses[0]) == pytest.approx(float(model.loss(p, x[0], y[0])), rel=1e-12)
