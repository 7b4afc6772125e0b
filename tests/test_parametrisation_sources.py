"""The built-in Transformer tables against their sources, rule by rule (issue 73).

Each source is written out below as data, from the source itself:

- [T1] Dey et al. 2025, "Don't be lazy: CompleteP enables compute-efficient deep
  transformers", arXiv:2505.01618, Table 1 (also `assets/parameterization_summary.png`
  on EleutherAI/nanoGPT-mup, branch completep);
- [R] that reference code, EleutherAI/nanoGPT-mup, branch completep (commit 6f8bc3b),
  `model.py`: `GPT.__init__`, `Block.__init__`, `GPT.forward`,
  `CausalSelfAttention.forward`, `GPT.configure_optimizers`;
- [M] microsoft/mup: `mup/optim.py` (`MuAdam`/`MuAdamW` with its default
  `decoupled_wd=False`, `MuSGD`), `mup/layer.py` (`MuReadout`), the attention scale of
  `examples/Transformer/model.py`; width only.

A rule is the exponent pair `(a, b)` of its factor `m_N^a m_L^b`; None where the source
does not give the rule. Every rule of every built-in table must equal [T1]'s wherever
[T1] gives it, and differ from [R] and [M] exactly where `meanfield.parametrisation`'s
docstring says the sources disagree (`DOCUMENTED`).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from meanfield.models.transformer import Transformer
from meanfield.parametrisation import (
    COMPLETEP,
    DECAYED,
    DEPTH_MUP,
    GROUPS,
    MUP,
    PARAMETRISATIONS,
    STANDARD,
    Parametrisation,
)
from meanfield.training.transformer import group_hyperparameters, optimizer

HIDDEN = ("hidden_weights", "hidden_biases", "hidden_norms")  # [T1]'s "residual blocks"
OUTER = ("embedding", "final_norm", "unembedding")
ADAM = {"standard": 0.0, "mup": None, "depth-mup": 0.5, "completep": 1.0}  # name: α


def library(table: Parametrisation) -> dict:
    """Every rule of a table: `(quantity, group)` exponent pairs, whether a group is
    decayed, and the forward rules (branch `m_L^{-α}` as `(0, -α)`, output `(c, 0)`,
    attention power p of `d_head^{-p}`)."""
    out: dict = {}
    for g in GROUPS:
        for q in ("lr", "eps", "weight_decay"):
            out[q, g] = table.exponents(g, q)
        out["decayed", g] = g in DECAYED
    for g in ("embedding", "hidden_weights", "unembedding"):  # the drawn groups
        out["init_std", g] = table.exponents(g, "init_std")
    out["branch"] = (0.0, -table.alpha)
    out["output"] = (table.output, 0.0)
    out["attention"] = table.attention
    return {k: (tuple(float(x) for x in v) if isinstance(v, tuple) else v) for k, v in out.items()}


# --- [T1], Table 1: columns SP, μP, α ∈ {0.5, 1} ------------------------------------------


def table_1(name: str) -> dict:
    alpha = ADAM[name]
    sp, mup = name == "standard", name == "mup"
    depth_lr = 0.0 if sp or mup else alpha - 1  # "η_base m_L^{α−1}"
    out: dict = {}
    # "Embed Init. Var. σ²_base", "Embed LR η_base"
    out["init_std", "embedding"] = (0.0, 0.0)
    out["lr", "embedding"] = (0.0, 0.0)
    # "Pre-LN LR": η_base (SP, μP), η_base m_L^{α−1} (α)
    out["lr", "hidden_norms"] = (0.0, depth_lr)
    # "Hidden Init. Var.": σ²_base (SP), σ²_base m_N^{-1} (μP, α): std m_N^{-1/2}
    out["init_std", "hidden_weights"] = (0.0 if sp else -0.5, 0.0)
    # "Hidden LR (AdamW)": η_base (SP), η_base m_N^{-1} (μP), η_base m_N^{-1} m_L^{α−1} (α)
    out["lr", "hidden_weights"] = (0.0 if sp else -1.0, depth_lr)
    # "Hidden Bias LR (AdamW)": η_base (SP, μP), η_base m_L^{α−1} (α)
    out["lr", "hidden_biases"] = (0.0, depth_lr)
    # "Hidden WD (AdamW)": λ_base (SP), λ_base m_N (μP, α)
    out["weight_decay", "hidden_weights"] = (0.0 if sp else 1.0, 0.0)
    # "MHA/MLP Residual": X + m_L^{-α} F(LN(X)) (α); no multiplier (SP, μP)
    out["branch"] = (0.0, 0.0 if sp or mup else -alpha)
    # "Final-LN LR η_base"
    out["lr", "final_norm"] = (0.0, 0.0)
    # "Unembed Init. Var. σ²_base", "Unembed LR η_base", "Unembed Fwd. X W^T m_N^{-1}"
    out["init_std", "unembedding"] = (0.0, 0.0)
    out["lr", "unembedding"] = (0.0, 0.0)
    out["output"] = (0.0 if sp else -1.0, 0.0)
    # "AdamW ε (residual blocks)": ε_base (SP), ε_base m_N^{-1} (μP),
    # ε_base m_N^{-1} m_L^{-α} (α); the row is for the residual blocks only, the other
    # groups keep ε_base
    hidden_eps = (0.0, 0.0) if sp else (-1.0, 0.0 if mup else -alpha)
    for g in HIDDEN:
        out["eps", g] = hidden_eps
    for g in OUTER:
        out["eps", g] = (0.0, 0.0)
    # not in Table 1: the attention scale, the decay of the embedding, unembedding,
    # biases and norms, which groups are decayed
    out["attention"] = None
    for g in GROUPS:
        out.setdefault(("weight_decay", g), None)
        out["decayed", g] = None
    return out


# --- [R], EleutherAI/nanoGPT-mup@completep, model.py ---------------------------------------


def reference_code(name: str) -> dict:
    alpha = ADAM[name]
    sp, mup = name == "standard", name == "mup"
    out: dict = {}
    # GPT.__init__: `_init_weights` draws every Linear and Embedding at init_std; with
    # mup_enabled, c_attn, c_fc, c_proj at init_std / sqrt(mup_width_multiplier); without,
    # c_proj (the attention's o, the MLP's out) at init_std / sqrt(2 n_layer) (GPT-2's,
    # not a factor m_N^a m_L^b of a base value: "gpt2")
    out["init_std", "embedding"] = (0.0, 0.0)
    out["init_std", "unembedding"] = (0.0, 0.0)  # lm_head, tied to wte
    out["init_std", "hidden_weights"] = "gpt2" if sp else (-0.5, 0.0)
    # Block.__init__: residual_scaling = 1 / depth_multiplier**depth_alpha_exp, if
    # depth_alpha_enabled
    out["branch"] = (0.0, 0.0 if sp or mup else -alpha)
    # GPT.forward: x *= mup_output_alpha / mup_width_multiplier before lm_head
    out["output"] = (0.0 if sp else -1.0, 0.0)
    # CausalSelfAttention.forward: attention_scale = 1/k.size(-1) with mup_enabled, else
    # 1/sqrt(k.size(-1))
    out["attention"] = 0.5 if sp else 1.0
    # GPT.configure_optimizers. SP: one learning rate and ε; decay on the parameters of
    # dim >= 2 (wte = lm_head, wpe, the hidden matrices), none on biases and LayerNorms
    if sp:
        for g in GROUPS:
            out["lr", g] = out["eps", g] = (0.0, 0.0)
            decayed = g in ("embedding", "hidden_weights", "unembedding")
            out["weight_decay", g] = (0.0, 0.0) if decayed else None
            out["decayed", g] = decayed
        return out
    # mup_enabled: groups emb (wte = lm_head, wpe), hidden_ln, hidden_weight, hidden_bias,
    # final_ln with 'lr_scale' and 'weight_decay'; depth_lr_scaling =
    # depth_multiplier**(depth_alpha_exp − 1), width_lr_scaling = 1/mup_width_multiplier
    depth_lr = 0.0 if mup else alpha - 1
    lr = {
        "embedding": (0.0, 0.0),
        "hidden_norms": (0.0, depth_lr),
        "hidden_weights": (-1.0, depth_lr),
        "hidden_biases": (0.0, depth_lr),
        "final_norm": (0.0, 0.0),
        "unembedding": (0.0, 0.0),  # tied: the emb group's
    }
    # 'weight_decay': weight_decay on emb; on hidden_weight weight_decay (μP branch) or
    # weight_decay / width_lr_scaling (depth branch); 0.0 on the others
    wd = (0.0, 0.0) if mup else (1.0, 0.0)
    for g in GROUPS:
        out["lr", g] = lr[g]
        decayed = g in ("embedding", "hidden_weights", "unembedding")
        out["decayed", g] = decayed
        out["weight_decay", g] = (wd if g == "hidden_weights" else (0.0, 0.0)) if decayed else None
        # one adam_eps for the optimiser: unscaled in the μP branch; in the depth branch
        # adam_eps *= (1/mup_width_multiplier) * depth_multiplier**(−depth_alpha_exp)
        out["eps", g] = (0.0, 0.0) if mup else (-1.0, -alpha)
    return out


# --- [M], microsoft/mup: MuAdamW (μP, width) ----------------------------------------------


def mup_package() -> dict:
    out: dict = {}
    # set_base_shapes + the standard fan-in init: matrix-like (hidden) weights' std ∝
    # fan_in^{-1/2}; MuReadout and embeddings (one infinite dimension) at constant std
    out["init_std", "hidden_weights"] = (-0.5, None)
    out["init_std", "embedding"] = out["init_std", "unembedding"] = (0.0, None)
    # MuReadout.forward: output_mult * x / width_mult()
    out["output"] = (-1.0, None)
    # examples/Transformer/model.py: scaling = head_dim**-1 * sqrt(attn_mult)
    out["attention"] = 1.0
    for g in GROUPS:
        matrix = g == "hidden_weights"  # infshape.ninf() == 2
        # MuAdam: matrix-like lr /= width_mult and weight_decay *= width_mult
        # (decoupled_wd=False); vector-like untouched; eps is never touched
        out["lr", g] = (-1.0 if matrix else 0.0, None)
        out["weight_decay", g] = (1.0 if matrix else 0.0, None)
        out["eps", g] = (0.0, None)
    return out


# --- where the library chooses between sources that disagree (its module docstring) ------

DOCUMENTED = {
    # [R]: SP draws c_proj at σ/sqrt(2L); [T1]'s SP column: σ_base
    ("R", "standard", ("init_std", "hidden_weights")),
    # [R]'s μP branch: ε unscaled; [T1]: hidden ε m_N^{-1}
    *(("R", "mup", ("eps", g)) for g in HIDDEN),
    # [R]'s μP branch: hidden weight decay unscaled; [T1] and MuAdamW: × m_N
    ("R", "mup", ("weight_decay", "hidden_weights")),
    # [R]'s depth branch: one ε, m_N^{-1} m_L^{-α}, for every group; [T1]: residual blocks
    *(("R", n, ("eps", g)) for n in ("depth-mup", "completep") for g in OUTER),
    # MuAdam leaves ε unscaled; [T1]: hidden ε m_N^{-1}
    *(("M", "mup", ("eps", g)) for g in HIDDEN),
}


def _agrees(mine, theirs) -> bool:
    """A source's rule against the library's; a None exponent (the source's silence on
    depth) matches anything."""
    if isinstance(theirs, tuple) and isinstance(mine, tuple):
        return all(t is None or m == t for m, t in zip(mine, theirs, strict=True))
    return mine == theirs


def disagreements(tables: dict) -> set:
    """`(source, table, rule)` for every rule a source gives that the table differs from."""
    out = set()
    for name, table in tables.items():
        rules = library(table)
        sources = {"T1": table_1(name), "R": reference_code(name)}
        if name == "mup":
            sources["M"] = mup_package()
        for source, theirs in sources.items():
            for key, value in theirs.items():
                if value is not None and not _agrees(rules[key], value):
                    out.add((source, name, key))
    return out


ADAM_TABLES = {"standard": STANDARD, "mup": MUP, "depth-mup": DEPTH_MUP, "completep": COMPLETEP}


def test_every_rule_is_table_1s_and_differs_from_the_others_where_documented():
    found = disagreements(ADAM_TABLES)
    assert not {d for d in found if d[0] == "T1"}, sorted(d for d in found if d[0] == "T1")
    assert found == DOCUMENTED, (sorted(found - DOCUMENTED), sorted(DOCUMENTED - found))


def test_table_1_covers_every_rule_but_the_documented_ones():
    """What [T1] leaves open is what the docstring says it leaves open: the attention
    scale and the decay of the groups other than the hidden weights."""
    silent = {k for k, v in table_1("completep").items() if v is None}
    assert silent == {
        "attention",
        *(("decayed", g) for g in GROUPS),
        *(("weight_decay", g) for g in GROUPS if g != "hidden_weights"),
    }


def _unscaled_decay(table):
    return {**table.rules["hidden_weights"], "weight_decay": (0, 0)}


@pytest.mark.parametrize(
    "mutation",
    [
        # the old ε rules: embedding, final norm, unembedding at m_N^{-1}
        lambda t: t.replace(rules={**t.rules, "embedding": {"eps": (-1, 0)}}),
        # the old μP hidden weight decay, unscaled
        lambda t: t.replace(rules={**t.rules, "hidden_weights": _unscaled_decay(t)}),
        # SP's attention scale
        lambda t: t.replace(attention=0.5),
    ],
)
def test_the_comparison_catches_a_changed_rule(mutation):
    """The check above fails on a table with one rule changed (here μP's)."""
    tables = {**ADAM_TABLES, "mup": mutation(MUP)}
    assert disagreements(tables) != DOCUMENTED


def test_the_network_and_optimiser_use_table_1_at_a_size():
    """Not only the exponents: the Transformer's numbers and its optimiser's per-group
    hyperparameters at (m_N, m_L) = (8, 4) are Table 1's, and so is the attention scale
    the network applies ([R]'s, Table 1 having none)."""
    mN, mL = 8.0, 4.0
    for name, table in ADAM_TABLES.items():
        model = Transformer(vocab=7, context=4, width=128, depth=8, heads=4,
                            parametrisation=table, base_width=16, base_depth=2)  # fmt: skip
        t1 = table_1(name)
        hyper = group_hyperparameters(model, lr=1.0, eps=1.0, weight_decay=1.0)
        for g in GROUPS:
            for q in ("lr", "eps"):
                a, b = t1[q, g]
                assert hyper[g][q] == pytest.approx(mN**a * mL**b, rel=1e-14), (name, g, q)
        a, _ = t1["weight_decay", "hidden_weights"]
        assert hyper["hidden_weights"]["weight_decay"] == pytest.approx(mN**a, rel=1e-14)
        _, numbers = model.skeleton_and_numbers()
        d_head = 128 // 4
        assert float(numbers["attention_scale"]) == pytest.approx(
            d_head ** -reference_code(name)["attention"], rel=1e-12
        )
        assert model.branch_multiplier == pytest.approx(mL ** t1["branch"][1], rel=1e-14)
        assert model.logit_multiplier == pytest.approx(mN ** t1["output"][0], rel=1e-14)


# --- the SGD tables against Tensor Programs V's Table 8 as microsoft/mup's MuSGD applies it


def test_sgd_tables_in_width_are_musgd():
    """In width (m_L = 1), `MuSGD`: vector-like parameters (the embedding, biases, norms,
    the unembedding, a `MuReadout`) `lr × width_mult` and decay `÷ width_mult`; the square
    hidden matrices `lr ÷ fanin_fanout_mult_ratio` = 1. (ε: none.)"""
    mN = 8.0
    for name in ("mup-sgd", "depth-mup-sgd", "completep-sgd"):
        model = Transformer(vocab=7, context=4, width=128, depth=2, heads=4,
                            parametrisation=name, base_width=16, base_depth=2)  # fmt: skip
        hyper = group_hyperparameters(model, lr=1.0, weight_decay=1.0)
        for g in GROUPS:
            vector = g != "hidden_weights"
            assert hyper[g]["lr"] == pytest.approx(mN if vector else 1.0, rel=1e-14), (name, g)
            if g in DECAYED:
                wd = 1 / mN if vector else 1.0
                assert hyper[g]["weight_decay"] == pytest.approx(wd, rel=1e-14), (name, g)
    standard = Transformer(vocab=7, context=4, width=128, depth=8, heads=4,
                           parametrisation="standard-sgd", base_width=16, base_depth=2)  # fmt: skip
    hyper = group_hyperparameters(standard, lr=1.0, weight_decay=1.0)
    assert all(h["lr"] == 1.0 for h in hyper.values())


def test_sgd_tables_in_depth_follow_the_branch_multiplier():
    """In depth, the hidden groups' SGD learning rate `m_L^{2α−1}` (Mathematics §11) and
    the decay its inverse; the outer groups none."""
    mL = 4.0
    for name, alpha in (("mup-sgd", None), ("depth-mup-sgd", 0.5), ("completep-sgd", 1.0)):
        model = Transformer(vocab=7, context=4, width=16, depth=8, heads=4,
                            parametrisation=name, base_width=16, base_depth=2)  # fmt: skip
        hyper = group_hyperparameters(model, lr=1.0, weight_decay=1.0)
        depth = 1.0 if alpha is None else mL ** (2 * alpha - 1)
        for g in GROUPS:
            assert hyper[g]["lr"] == pytest.approx(depth if g in HIDDEN else 1.0, rel=1e-14)
        assert hyper["hidden_weights"]["weight_decay"] == pytest.approx(1 / depth, rel=1e-14)


# --- weight decay as the optimiser applies it ---------------------------------------------


def _decay_factors(table, width, *, lr=0.1, weight_decay=0.3):
    """One step of the table's optimiser with a zero gradient: AdamW's update is then
    `−lr_g · wd_g · θ` alone, so `1 − θ₁/θ₀` is the decay per step, `lr_g · wd_g`."""
    model = Transformer(vocab=7, context=4, width=width, depth=2, heads=2, parametrisation=table,
                        base_width=8, base_depth=2, init_std=0.5)  # fmt: skip
    p = model.init(jax.random.key(0))
    opt = optimizer(model, lr=lr, eps=1e-8, weight_decay=weight_decay)
    zero = jax.tree.map(jnp.zeros_like, p)
    update, _ = opt.update(zero, opt.init(p), p)
    p1 = optax.apply_updates(p, update)
    factor = {
        "hidden_weights": p1["attention"]["weights"]["q"] / p["attention"]["weights"]["q"],
        "mlp_out": p1["mlp"]["weights"]["out"] / p["mlp"]["weights"]["out"],
        "embedding": p1["embedding"]["tokens"] / p["embedding"]["tokens"],
        "unembedding": p1["unembedding"] / p["unembedding"],
        "hidden_norms": p1["attention"]["norm"]["gain"] / p["attention"]["norm"]["gain"],
        "final_norm": p1["final_norm"]["gain"] / p["final_norm"]["gain"],
    }
    for name, f in factor.items():  # one factor per array
        np.testing.assert_allclose(f, f.ravel()[0], rtol=1e-12, err_msg=name)
    return {name: 1.0 - float(f.ravel()[0]) for name, f in factor.items()}


def test_mup_adam_decays_hidden_weights_by_weight_decay_times_m_n():
    """μP's AdamW shrinks a hidden matrix by `lr_hidden · wd · m_N = lr · wd` per step
    ([T1] "Hidden WD λ_base m_N", `MuAdamW`), whatever the width; the embedding and
    unembedding by `lr · wd`; the norms not at all."""
    lr, wd = 0.1, 0.3
    for width in (8, 16, 64):
        mN = width / 8
        decay = _decay_factors(MUP, width, lr=lr, weight_decay=wd)
        hidden_lr = lr / mN
        for name in ("hidden_weights", "mlp_out"):
            assert decay[name] == pytest.approx(lr * wd, rel=1e-6), (width, name)
            assert decay[name] / hidden_lr == pytest.approx(wd * mN, rel=1e-6), (width, name)
        assert decay["embedding"] == pytest.approx(lr * wd, rel=1e-6)
        assert decay["unembedding"] == pytest.approx(lr * wd, rel=1e-6)
        assert decay["hidden_norms"] == 0.0 and decay["final_norm"] == 0.0


def test_mup_and_the_depth_tables_decay_alike_at_the_base_depth():
    """At m_L = 1 μP, depth-μP and CompleteP have the same per-group hyperparameters
    ([T1]'s μP column is its α column there), so a comparison of them with weight decay
    differs in the depth rules only."""
    for width in (8, 32):
        decays = [_decay_factors(t, width) for t in (MUP, DEPTH_MUP, COMPLETEP)]
        assert decays[0] == decays[1] == decays[2]
        sizes = dict(vocab=7, context=4, width=width, depth=3, base_width=8, base_depth=3)
        models = [Transformer(parametrisation=t, **sizes) for t in (MUP, DEPTH_MUP, COMPLETEP)]
        hypers = [group_hyperparameters(m, lr=0.1, eps=1e-8, weight_decay=0.3) for m in models]
        assert hypers[0] == hypers[1] == hypers[2]


# --- the base-size statement --------------------------------------------------------------

MU_FAMILY = ("mup", "depth-mup", "completep", "mup-sgd", "depth-mup-sgd", "completep-sgd")


def _base_logits(name, heads):
    model = Transformer(vocab=11, context=5, width=16, depth=3, heads=heads, parametrisation=name,
                        base_width=16, base_depth=3, init_std=0.5)  # fmt: skip
    p = model.init(jax.random.key(4))
    return model, np.asarray(model(p, jnp.array([3, 1, 4, 1, 5])))


def test_at_the_base_size_every_factor_is_one():
    for table in PARAMETRISATIONS.values():
        model, _ = _base_logits(table, 4)
        hyper = group_hyperparameters(model, lr=0.1, eps=1e-8, weight_decay=0.5)
        for g, h in hyper.items():
            assert h["lr"] == 0.1 and h["eps"] == 1e-8, (table.name, g)
            assert h["weight_decay"] == (0.5 if g in DECAYED else 0.0), (table.name, g)
            assert model.factor(g, "init_std") == 1.0
        assert model.branch_multiplier == 1.0 and model.logit_multiplier == 1.0


def test_at_the_base_size_the_mup_family_is_one_network_and_sp_differs_in_attention():
    """The module docstring's statement: at m_N = m_L = 1 the μP-family tables give the
    same logits from the same key; SP's attention scale d_head^{-1/2} against their
    d_head^{-1} makes SP's differ, except where d_head = 1."""
    _, ref = _base_logits("mup", heads=4)  # d_head = 4
    for name in MU_FAMILY:
        np.testing.assert_array_equal(_base_logits(name, 4)[1], ref, err_msg=name)
    sp = _base_logits("standard", 4)[1]
    np.testing.assert_array_equal(_base_logits("standard-sgd", 4)[1], sp)
    assert np.max(np.abs(sp - ref)) > 1e-3 * np.max(np.abs(ref))
    # where d_head = 1 the two scales coincide: every table one network
    _, one = _base_logits("standard", 16)
    for name in MU_FAMILY:
        np.testing.assert_array_equal(_base_logits(name, 16)[1], one, err_msg=name)
    assert math.isclose(STANDARD.attention_scale(1), MUP.attention_scale(1))
