"""Run by tests/test_users_compiler.py in a subprocess with the users' compiler settings
(none of the suite's cheap-compile flags): one grid point of a Transformer study's quick
preset at its real shapes, and what XLA made of its programs. Prints one JSON line.

    python tests/users_compiler_point.py transfer|coord-check
"""

import json
import re
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from meanfield.cli import build_parser
from meanfield.parametrisation import from_table
from meanfield.runtime.compilation import CompileCounter
from meanfield.studies.coord_check import study as coord_check
from meanfield.studies.shared.transformer_options import corpus, model
from meanfield.studies.transfer import study as transfer

# YNNPACK, to which XLA's CPU backend hands dots, packs a dot's operand with two more
# dimensions and refuses tensors beyond rank 8
YNN_MAX_TENSOR_RANK = 8


def _rank(shape: str) -> int:
    inner = shape[shape.index("[") + 1 : -1]
    return len(inner.split(",")) if inner else 0


def dot_operand_ranks(hlo: str) -> list[int]:
    """The ranks of every dot's operands in an optimised HLO module's text."""
    shapes = {m[1]: m[2] for m in re.finditer(r"%([\w.\-]+) = ([a-z0-9]+\[[0-9,]*\])", hlo)}
    ranks = []
    for m in re.finditer(r"= [a-z0-9]+\[[0-9,]*\]\S* dot\(%([\w.\-]+), %([\w.\-]+)\)", hlo):
        ranks += [_rank(shapes[m[1]]), _rank(shapes[m[2]])]
    return ranks


def main(study: str) -> dict:
    module = transfer if study == "transfer" else coord_check
    args = build_parser().parse_args(["study", study, "--preset", "quick", "--out", "unused"])
    cfg = module.configure(args)
    text = corpus(cfg)
    tables = {t["name"]: from_table(t) for t in cfg["tables"]}
    if study == "transfer":
        N, L = cfg["width"], min(cfg["depths"])
    else:
        N, L = min(cfg["widths"]), cfg["depth"]
    table = tables["standard"]
    master = jax.random.fold_in(jax.random.key(0), N)
    with CompileCounter() as counter:
        t0 = time.perf_counter()
        point = module._point(cfg, table, N, L, master, text)
        seconds = time.perf_counter() - t0
    # the training program's optimised HLO, as XLA compiled it for this CPU
    skeleton, numbers = model(cfg, table, N, L).skeleton_and_numbers()
    programs = module._program(
        skeleton, cfg["steps"], cfg["batch"], cfg["context"], cfg["eps"], cfg["weight_decay"]
    )
    keys = jnp.stack([jax.random.fold_in(master, s) for s in range(cfg["seeds"])])
    ids = jnp.asarray(text.train), jnp.asarray(text.validation)
    drawn = programs.draws(numbers, keys, *ids)
    rate = jnp.asarray(cfg["lrs"]) if study == "transfer" else cfg["lr"]
    hlo = programs.train.lower(numbers, rate, *drawn).compile().as_text()
    losses = point["final_loss"] if study == "transfer" else point["losses"]
    finite = bool(np.all(np.isfinite(np.asarray(losses, dtype=float))))
    return {
        "study": study,
        "shape": {"N": N, "L": L},
        "seconds": seconds,
        "compiles": counter.compiles,
        "compile_seconds": counter.compile_seconds,
        "longest_compile_seconds": counter.longest_seconds,
        "dot_operand_rank": max(dot_operand_ranks(hlo)),
        "random_bits_in_training": "threefry" in hlo or "rng-bit-generator" in hlo,
        "finite": finite,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])), flush=True)
