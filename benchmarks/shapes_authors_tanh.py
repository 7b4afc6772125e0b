"""The authors' tanh setting of seed 002 (SPEC §6, their Julia code's conventions) with an
exact reference in place of their largest network, and how far that network was from the
limit.

    PYTHONPATH=. python3 benchmarks/shapes_authors_tanh.py --out DIR [--quick]

**Setting.** ρ = tanh, d_in = d_out = 5, n = 10 inputs, σ_in² = 1/d_in, σ_out² = d_out,
s_u = s_v = 1, depth L = 50 fixed. Their loss `Σ_i ‖f(x_i) − y_i‖² / (n d_in)` (no ½) with
η = 1 is ours, `(1/n) Σ_i ½‖f(x_i) − y_i‖²`, with `η_u = η_v = 2/d_in = 0.4` (GD in the
joint-limit convention `η · LMD · ∇` in both); their plotted k = 1..15 is after k − 1
updates, so K = 14 updates here (k = 0..14). Their inputs and targets are not given by the
source: x_i, y_i ~ N(0, I_5), drawn from `jr.key(0)`.

**What is computed.**

1. The reference: the joint limit L, M, D → ∞ (`deep_embedded.limit`, randomised
   quasi-Monte Carlo over ξ ∈ R^20, `--particles` points in 8 scramblings; its own error
   is the scramblings' spread), at the depths l/L. Cached in `DIR/reference.npz` (reused
   when the setting and `--particles` are the same).
2. Finite networks at L = 50, `--seeds` independent draws: the line of widths M at
   D = `--top`, and the line of dimensions D at M = `--top`. Each is compared after every
   update with (a) the reference and (b) "their limit": the largest network, (L, M, D) =
   (50, top, top), drawn independently at the same embedding (for the M line; the D line
   compares outputs only, since hidden states of different D do not compare).
   E_f is the RMS over output coordinates and inputs, E_h = max_l RMS over inputs of
   ‖ĥ^l − H(l/L)‖_D (SPEC §6).
3. How far their limit is from the true one: E_f and E_h of the (50, top, top) network
   against the reference, per k, mean ± standard error over the draws.
4. Log-log slopes of E_f and E_h at k = K against M and D, measured both ways
   (`fits.fit_loglog`, bootstrap intervals).

Results: `DIR/shapes_authors_tanh.json`, `.txt` and `.png`.
"""

import argparse
import functools
import hashlib
import json
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.random as jr  # noqa: E402
import numpy as np  # noqa: E402

from meanfield.coupling import deep_embedded as de_coupling
from meanfield.harness.args import int_list, positive_int  # noqa: E402
from meanfield.limits import deep_embedded as de_limits
from meanfield.models import deep_embedded as de  # noqa: E402
from meanfield.models.embedding import Embedding, norm_d  # noqa: E402
from meanfield.stats.fits import fit_loglog  # noqa: E402
from meanfield.training import deep_embedded as de_training

NAME = "shapes_authors_tanh"
D_IN = D_OUT = 5
N_INPUTS = 10
L = 50
STEPS = 14
ETA = 2.0 / D_IN
SETTING = dict(
    activation="tanh", steps=STEPS, eta_u=ETA, eta_v=ETA, s_u=1.0, s_v=1.0,
    sigma_in=(1.0 / D_IN) ** 0.5, sigma_out=float(D_OUT) ** 0.5,
)  # fmt: skip
PRESETS = {
    "default": dict(particles=2**18, seeds=16, M=[8, 16, 32, 64, 128, 256, 512], top=512),
    "quick": dict(particles=2**12, seeds=3, M=[8, 16, 32], top=32),
}


# the ODE tolerances of the reference and of its check: the ODE error (about 1e-8) is far
# below the quasi-Monte-Carlo error (about 1e-3), which decides the reference's accuracy
RTOL = (1e-8, 1e-6)
JUDGE = 10.0  # a network's error is judged when it is this many times the reference's own


def reference_errors(ref) -> dict:
    """The reference's own error on E_f and E_h at each step k: three standard errors of
    the replicates' mean, as E_f and E_h see them (the RMS over outputs and inputs of the
    outputs' standard errors; the largest over depth of the RMS over inputs of the hidden
    field's, mapped through G_∞ = diag(σ_in² I, σ_out² I))."""
    se_f = np.sqrt(np.mean(np.asarray(ref["outputs_se"]) ** 2, axis=(1, 2)))
    g = np.concatenate([np.full(D_IN, SETTING["sigma_in"] ** 2),
                        np.full(D_OUT, SETTING["sigma_out"] ** 2)])  # fmt: skip
    hid = np.sqrt(np.mean(np.sum(np.asarray(ref["hidden_se"]) ** 2 * g, axis=-1), axis=1))
    return {"output": (3 * se_f).tolist(), "hidden": (3 * hid.max(axis=-1)).tolist()}


def data():
    kx, ky = jr.split(jr.key(0))
    return jr.normal(kx, (N_INPUTS, D_IN)), jr.normal(ky, (N_INPUTS, D_OUT))


def reference(out: Path, particles: int, log):
    """The joint limit at the depths l/L, cached in `out/reference.npz`."""
    x, y = data()
    tag = hashlib.sha256(
        json.dumps([SETTING, particles, np.asarray(x).tolist(), L, RTOL]).encode()
    ).hexdigest()
    path = out / "reference.npz"
    if path.exists():
        cached = np.load(path)
        if str(cached["tag"]) == tag:
            log(f"reference: reusing {path}")
            return {k: cached[k] for k in cached.files}
    t0 = time.perf_counter()
    lim = de_limits.limit(
        x, y, ts=jnp.arange(L + 1) / L, method="qmc", particles=particles, key=jr.key(1),
        rtol=RTOL[0], rtol_check=RTOL[1], **SETTING,
    )  # fmt: skip
    jax.block_until_ready(lim.outputs)
    seconds = time.perf_counter() - t0
    ref = {
        "outputs": np.asarray(lim.outputs),
        "hidden_coef": np.asarray(lim.hidden_coef),
        "outputs_se": np.asarray(lim.outputs_se),
        "hidden_se": np.asarray(lim.hidden_se),
        "error_estimate": np.asarray(lim.error_estimate),
        "ok": np.asarray(lim.ok),
        "seconds": np.asarray(seconds),
        "tag": np.asarray(tag),
    }
    np.savez(path, **ref)
    log(f"reference: {seconds:.0f} s, own error {float(lim.error_estimate):.2e}, ok {bool(lim.ok)}")
    return ref


_PROGRAMS: dict = {}


def trained(M: int, D: int):
    """A jitted program: (units key, embedding) -> outputs (K+1, n, d_out) and hidden
    states (K+1, n, L+1, D) of a freshly drawn (L, M, D) network trained K steps."""
    if (M, D) not in _PROGRAMS:
        x, y = data()

        def run(key, emb):
            net = de.DeepEmbeddedResNet.sample(
                key, L=L, M=M, D=D, d_in=D_IN, d_out=D_OUT, activation="tanh"
            )
            net = eqx_replace_embedding(net, emb)
            return de_training.train(net, x, y, eta_u=ETA, eta_v=ETA, steps=STEPS)

        _PROGRAMS[(M, D)] = jax.jit(run)
    return _PROGRAMS[(M, D)]


def eqx_replace_embedding(net, emb):
    import equinox as eqx

    return eqx.tree_at(lambda n: n.embedding, net, emb)


def units_key(seed: int, M: int, D: int, tag: int):
    """The key of the units of draw `seed` at (M, D); tag 0 is their largest network."""
    return jr.fold_in(jr.fold_in(jr.fold_in(jr.key(3), seed), M * 4096 + D), tag)


def embedding(seed: int, D: int):
    return Embedding.sample(
        jr.fold_in(jr.fold_in(jr.key(2), seed), D), D, D_IN, D_OUT,
        SETTING["sigma_in"], SETTING["sigma_out"],
    )  # fmt: skip


def output_error(a, b):
    """E_f per k: the RMS over inputs and output coordinates."""
    return np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2, axis=(-2, -1)))


def hidden_error(a, b):
    """E_h per k: max over layers of the RMS over inputs of ‖·‖_D."""
    gap = norm_d(jnp.asarray(a) - jnp.asarray(b))  # (K+1, n, L+1)
    return np.asarray(jnp.max(jnp.sqrt(jnp.mean(gap**2, axis=1)), axis=-1))


def summary(values):
    v = np.asarray(values)  # (seeds, K+1)
    return {
        "mean": v.mean(0).tolist(),
        "se": (v.std(0, ddof=1) / np.sqrt(v.shape[0])).tolist(),
        "values_at_K": v[:, -1].tolist(),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--out", default=f"results/bench/{NAME}")
    parser.add_argument("--quick", action="store_true", help="a small run (minutes)")
    parser.add_argument("--particles", type=positive_int, help="QMC points of the reference")
    parser.add_argument("--seeds", type=positive_int, help="independent draws per point")
    parser.add_argument("--M", type=int_list, help="widths of the M line (and dims of the D line)")
    args = parser.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    cfg = dict(PRESETS["quick" if args.quick else "default"])
    for name in ("particles", "seeds", "M"):
        if getattr(args, name) is not None:
            cfg[name] = getattr(args, name)
    cfg["top"] = max(cfg["M"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []

    def log(text):
        print(text, flush=True)
        lines.append(text)

    t_start = time.perf_counter()
    ref = reference(out, cfg["particles"], log)
    x, y = data()
    ref_lim = de_limits.LinearLimit(
        jnp.asarray(ref["outputs"]), jnp.asarray(ref["hidden_coef"]),
        jnp.zeros_like(jnp.asarray(ref["hidden_coef"])), jnp.arange(L + 1) / L,
        jnp.asarray(ref["error_estimate"]), jnp.asarray(ref["ok"]), "qmc",
    )  # fmt: skip
    top, sizes = cfg["top"], cfg["M"]
    rows = {
        "M_line": {m: {"ref_f": [], "ref_h": [], "their_f": [], "their_h": []} for m in sizes},
        "D_line": {d: {"ref_f": [], "ref_h": [], "their_f": []} for d in sizes},
    }
    theirs_vs_ref = {"f": [], "h": []}
    t_net = time.perf_counter()

    def record(row, f, h, emb, big_f, big_h=None):
        """One network's errors against the reference and against their largest network
        (hidden states only where the dimensions match: the M line)."""
        e_f, e_h = de_coupling.errors(f, h, ref_lim, emb)
        row["ref_f"].append(np.asarray(e_f))
        row["ref_h"].append(np.asarray(e_h))
        row["their_f"].append(output_error(f, big_f))
        if big_h is not None:
            row["their_h"].append(hidden_error(h, big_h))

    for seed in range(cfg["seeds"]):
        units = functools.partial(units_key, seed)
        emb = embedding(seed, top)
        big_f, big_h = trained(top, top)(units(top, top, 0), emb)
        e_f, e_h = de_coupling.errors(big_f, big_h, ref_lim, emb)
        theirs_vs_ref["f"].append(np.asarray(e_f))
        theirs_vs_ref["h"].append(np.asarray(e_h))
        for m in sizes:  # the M line at D = top, same embedding as their limit
            f, h = trained(m, top)(units(m, top, 1), emb)
            record(rows["M_line"][m], f, h, emb, big_f, big_h)
        for d in sizes[:-1]:  # the D line at M = top, each D its own embedding
            emb_d = embedding(seed, d)
            f, h = trained(top, d)(units(top, d, 1), emb_d)
            record(rows["D_line"][d], f, h, emb_d, big_f)
        log(f"draw {seed + 1}/{cfg['seeds']} done ({time.perf_counter() - t_net:.0f} s)")
    # the D line's last point (M = D = top) is the M line's last network
    rows["D_line"][top] = {k: list(rows["M_line"][top][k]) for k in ("ref_f", "ref_h", "their_f")}
    networks_s = time.perf_counter() - t_net

    result = {
        "setting": {**SETTING, "L": L, "d_in": D_IN, "d_out": D_OUT, "n": N_INPUTS,
                    "data": "x, y ~ N(0, I) from jr.key(0)", **cfg},
        "reference": {
            "kind": "joint limit L, M, D -> infinity, randomised QMC (8 scramblings)",
            "outputs": ref["outputs"].tolist(),
            "error_estimate": float(ref["error_estimate"]),
            "ok": bool(ref["ok"]),
            "seconds": float(ref["seconds"]),
        },
        "their_limit_vs_reference": {
            "network": [L, top, top],
            "output_error": summary(theirs_vs_ref["f"]),
            "hidden_error": summary(theirs_vs_ref["h"]),
        },
        "lines": {},
        "fits": [],
        "seconds": {"networks": networks_s, "total": time.perf_counter() - t_start},
    }  # fmt: skip
    ref_err = reference_errors(ref)
    result["reference"]["error_by_step"] = ref_err
    result["reference"]["judge"] = (
        f"a mean error is judged against the limit when it is at least {JUDGE:g} times the "
        "reference's own error at that step (three standard errors of the replicates' mean, "
        "as E_f and E_h see them)"
    )
    for q, key in (("output_error", "output"), ("hidden_error", "hidden")):
        mean = np.asarray(result["their_limit_vs_reference"][q]["mean"])
        result["their_limit_vs_reference"][q]["judged"] = (
            mean >= JUDGE * np.asarray(ref_err[key])
        ).tolist()
    for line, against in (("M_line", "M"), ("D_line", "D")):
        recs = {}
        for size, r in rows[line].items():
            recs[str(size)] = {k: summary(v) for k, v in r.items()}
        result["lines"][line] = recs
        for key, name in (
            ("ref_f", "output error vs the limit"),
            ("ref_h", "hidden error vs the limit"),
            ("their_f", "output error vs their largest network"),
            ("their_h", "hidden error vs their largest network"),
        ):
            # their largest network is their limit: its own size is left out, as they would
            pts = [s for s in sizes if key in rows[line][s]]
            if key.startswith("their"):
                pts = [s for s in pts if s != top]
            for k in (1, STEPS):
                use, left = list(pts), []
                if key.startswith("ref"):  # only errors the reference can judge
                    floor = JUDGE * ref_err["output" if key.endswith("f") else "hidden"][k]
                    use = [s for s in pts if np.mean([v[k] for v in rows[line][s][key]]) >= floor]
                    left = [s for s in pts if s not in use]
                if not pts:
                    continue
                if len(use) < 3:
                    result["fits"].append({
                        "line": line, "quantity": name, "steps": k, "left_out": left,
                        "reason": f"only {len(use)} sizes"
                        + (" the reference can judge" if key.startswith("ref") else ""),
                    })  # fmt: skip
                    continue
                fit = fit_loglog(
                    use, [[v[k] for v in rows[line][s][key]] for s in use], quantity=name,
                    against=against, theory=-0.5 if against == "M" else None, seed=0,
                )  # fmt: skip
                versus = "limit" if key.startswith("ref") else "their largest network"
                fit.update(line=line, steps=k, left_out=left, reference=versus)
                result["fits"].append(fit)
    (out / f"{NAME}.json").write_text(json.dumps(result, indent=1))
    report(result, log)
    (out / f"{NAME}.txt").write_text("\n".join(lines) + "\n")
    figure(result, out / f"{NAME}.png")


def report(res, log):
    ref = res["reference"]
    log(f"reference error estimate {ref['error_estimate']:.2e} ({ref['seconds']:.0f} s)")
    theirs = res["their_limit_vs_reference"]
    for q in ("output_error", "hidden_error"):
        cells = " ".join(
            f"{m:.4f}±{s:.4f}" for m, s in zip(theirs[q]["mean"], theirs[q]["se"], strict=True)
        )
        log(f"their limit (50, top, top) vs the limit, {q} per k: {cells}")
    for key, e in (("output", "E_f"), ("hidden", "E_h")):
        cells = " ".join(f"{v:.1e}" for v in ref["error_by_step"][key])
        log(f"the reference's own error on {e} per k (3 SE): {cells}")
    for fit in res["fits"]:
        head = f"{fit['line']}, k = {fit['steps']}: {fit['quantity']}"
        if "slope" not in fit:
            log(f"{head}: not fitted ({fit['reason']}; left out {fit['left_out']})")
            continue
        ci = fit.get("ci95") or [float("nan")] * 2
        left = f"; left out {fit['left_out']}" if fit.get("left_out") else ""
        log(f"{head}: slope {fit['slope']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]{left}")


def figure(res, path):
    from meanfield.io.plotting import use_agg

    use_agg()
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    K = res["setting"]["steps"]
    for ax, (line, q) in zip(axes[:2], (("M_line", "f"), ("M_line", "h")), strict=True):
        recs = res["lines"][line]
        sizes = [int(s) for s in recs]
        for key, label, color in (
            (f"ref_{q}", "against the limit (ours)", "C0"),
            (f"their_{q}", "against their largest network", "C3"),
        ):
            pts = [s for s in sizes if key in recs[str(s)]]
            if key.startswith("their"):
                pts = [s for s in pts if s != max(sizes)]
            m = [recs[str(s)][key]["mean"][K] for s in pts]
            se = [recs[str(s)][key]["se"][K] for s in pts]
            ax.errorbar(pts, m, yerr=se, marker="o", color=color, label=label, capsize=2)
        ref_err = res["reference"]["error_by_step"]["output" if q == "f" else "hidden"][K]
        ax.axhline(ref_err, color="k", ls=":", lw=1, label=f"the limit's own error {ref_err:.1e}")
        ax.axhline(JUDGE * ref_err, color="k", ls="--", lw=0.8,
                   label=f"{JUDGE:g}x that: points below are not judged")  # fmt: skip
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="width M",
            ylabel=f"{'output' if q == 'f' else 'hidden'} error after {K} updates",
        )
        ax.set_title(f"L = 50, D = {max(sizes)}: {'E_f' if q == 'f' else 'E_h'} vs M", fontsize=9)
        ax.legend(fontsize=7)
    ax = axes[2]
    theirs = res["their_limit_vs_reference"]
    ks = np.arange(K + 1)
    for q, color in (("output_error", "C0"), ("hidden_error", "C1")):
        ax.errorbar(ks, theirs[q]["mean"], yerr=theirs[q]["se"], marker="o", color=color,
                    label=q.replace("_", " "), capsize=2)  # fmt: skip
    for key, color in (("output", "C0"), ("hidden", "C1")):
        # at k = 0 the limit is exact (its error is rounding): drawn from k = 1
        ax.plot(ks[1:], res["reference"]["error_by_step"][key][1:], color=color, ls=":",
                lw=1, label=f"the limit's own {key} error (k >= 1; exact at k = 0)")  # fmt: skip
        judged = np.asarray(theirs[f"{key}_error"]["judged"])
        mean = np.asarray(theirs[f"{key}_error"]["mean"])
        tag = f"not {JUDGE:g}x the limit's error" if key == "output" else None
        ax.plot(ks[~judged], mean[~judged], "x", color="k", ms=8, label=tag)
    top = res["setting"]["top"]
    ax.set(yscale="log", xlabel="GD updates k",
           ylabel="their 'limit' vs the true limit",
           title=f"their largest network (50, {top}, {top}) vs the joint limit")  # fmt: skip
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7)
    fig.suptitle("seed 002, the authors' tanh setting (d_in = d_out = 5, n = 10, L = 50): "
                 "mean ± SE over independent draws", fontsize=10)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
