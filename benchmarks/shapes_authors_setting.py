"""The authors' public linear setting of seed 002 (SPEC §6) at (L, M, D) = (70, 70, 70):
the output and hidden errors E_f, E_h (SPEC §6: RMS over output coordinates) after
k = 0..5 GD steps, mean ± standard error over 32 independent draws, against the joint limit
and against the fixed-D limit of each draw (both exact, `meanfield.limits.deep_embedded`).

    PYTHONPATH=. python3 benchmarks/shapes_authors_setting.py
"""

import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from meanfield.coupling import deep_embedded as de_coupling
from meanfield.limits import deep_embedded as de_limits
from meanfield.models import deep_embedded as de
from meanfield.training import deep_embedded as de_training

L = M = D = 70
SEEDS, K, ETA = 32, 5, 0.1
X = [[0.3, -0.8, 1.2]]  # one input in R^3, d_out = 3, s_u = s_v = σ_in = σ_out = 1
Y = [[-1.0, 0.2, 0.5]]


def main():
    jax.config.update("jax_enable_x64", True)
    x, y = jnp.array(X), jnp.array(Y)
    ts = jnp.arange(L + 1) / L
    kw = dict(steps=K, eta_u=ETA, eta_v=ETA, ts=ts)
    joint = de_limits.linear_limit(x, y, **kw)

    def one(key):
        net = de.DeepEmbeddedResNet.sample(key, L=L, M=M, D=D, d_in=3, d_out=3)
        out, hid = de_training.train(net, x, y, eta_u=ETA, eta_v=ETA, steps=K)
        fixed = de_limits.linear_limit(x, y, gram=de_limits.basis_gram(net.embedding), **kw)
        return (
            *de_coupling.errors(out, hid, joint, net.embedding),
            *de_coupling.errors(out, hid, fixed, net.embedding),
        )

    res = [np.asarray(a) for a in jax.lax.map(jax.jit(one), jr.split(jr.key(0), SEEDS))]
    print(f"joint limit: error estimate {float(joint.error_estimate):.1e}")
    print("f_k(x):", np.round(np.asarray(joint.outputs[:, 0]), 4).tolist())
    names = ("E_f vs joint", "E_h vs joint", "E_f vs fixed-D", "E_h vs fixed-D")
    for name, a in zip(names, res, strict=True):
        cells = [
            f"k={k}: {a[:, k].mean():.4f}±{a[:, k].std(ddof=1) / np.sqrt(SEEDS):.4f}"
            for k in range(K + 1)
        ]
        print(name, " ".join(cells))


if __name__ == "__main__":
    main()
