"""The cases issue 75 quotes, each a row of the hostile corpus (`QUOTED_75` lists their
labels; `tests/test_hostile_corpus.py` checks every label is a row). Those the generated
rows already hold (`hostile_generated`: every option, user file, variable, figure and
constructor) are named by their generated label; the others are written here: the
multi-process cases (run as a small script that starts the processes and reports in one
line, exit 2 when every process refused as it should), edited coord-check figures, a
nested or FIFO results.json, the API's Transformer and text loaders, a signal during a
compile.
"""

import json
from pathlib import Path

from hostile_corpus import RAN, TINY, Row, _api

TLP = TINY["two-layer-phases"]
JOIN = "10"  # seconds a process waits for its peers in these rows (--join-timeout)

# the script of a multi-process row: PROCESSES lists (argv tail, env) per process; each
# must exit 2 with one line (naming NAMES, when given) within LIMIT seconds, and the
# folder must hold no point; the row then prints process 0's line and exits 2
_PROCESSES = """
import os, socket, subprocess, sys, time
s = socket.socket(); s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]; s.close()
procs = []
t0 = time.monotonic()
for tail, env in PROCESSES:
    tail = [a.replace('PORT', str(port)) for a in tail]
    cmd = [sys.executable, '-m', 'meanfield', *tail, '--out', 'CASE/out', '--no-progress']
    procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True, env={**os.environ, **env}))
bad = []
lines = []
for i, p in enumerate(procs):
    try:
        _, err = p.communicate(timeout=max(1, LIMIT - (time.monotonic() - t0)))
    except subprocess.TimeoutExpired:
        for q in procs:
            q.kill()
        print(f'process {i}: still running after {LIMIT} s', file=sys.stderr); sys.exit(1)
    got = [ln for ln in err.splitlines() if ln.strip() and 'cpu_aot' not in ln
           and not ln.startswith('warning:')]
    lines.append(got)
    if p.returncode != 2 or len(got) != 1 or (NAMES and NAMES not in got[0]):
        bad.append(f'process {i}: exit {p.returncode}, {len(got)} line(s): {got[-1:]}')
points = os.path.join('CASE', 'out', 'points')
if os.path.isdir(points) and os.listdir(points):
    bad.append('a point was written')
if bad:
    print('; '.join(bad), file=sys.stderr); sys.exit(1)
print(lines[0][0], file=sys.stderr); sys.exit(2)
"""


def _processes(procs: list, names: str = "", limit: float = 50.0) -> str:
    code = _PROCESSES.replace("CASE", "{case}")
    head = f"PROCESSES = {procs!r}\nNAMES = {names!r}\nLIMIT = {limit!r}\n"
    return "python:" + head + code


def _tlp(*more: str) -> list[str]:
    return ["study", "two-layer-phases", *TLP.split(), "--join-timeout", JOIN, *more]


_SLURM = {"SLURM_JOB_ID": "4242", "SLURM_NTASKS": "2", "SLURM_PROCID": "1",
          "SLURM_LOCALID": "0", "SLURM_STEP_NODELIST": "no-such-node-xyz",
          "SLURM_JOB_NODELIST": "no-such-node-xyz"}  # fmt: skip


def _coord_check_edit(edit):
    """A finished tiny coord-check (the plot templates) with its results edited."""

    def setup(case: Path):
        import shutil

        from hostile_corpus import _TEMPLATES

        shutil.copytree(_TEMPLATES / "studies" / "coord-check", case / "out", symlinks=True)
        path = case / "out" / "results.json"
        results = json.loads(path.read_text())
        edit(results)
        path.write_text(json.dumps(results))

    return setup


def _no_base_depth(results):
    del results["config"]["base_depth"]


def _sizes_disagree(results):
    for p in results["points"]:
        if "width" in p:
            p["width"] = 12345


def _negative_mean(results):
    """The first point's first size (a mean over draws, drawn on a log axis) negative."""
    sizes = results["points"][0]["sizes"]
    first = sizes[sorted(sizes)[0]]
    first[0][-1] = -abs(first[0][-1]) - 1e-3


def _nested(case: Path):
    import shutil

    from hostile_corpus import _TEMPLATES

    shutil.copytree(_TEMPLATES / "tk", case / "out", symlinks=True)
    (case / "out" / "results.json").write_text("[" * 100000 + "]" * 100000)


def _fifo(case: Path):
    import os
    import shutil

    from hostile_corpus import _TEMPLATES

    shutil.copytree(_TEMPLATES / "tk", case / "out", symlinks=True)
    (case / "out" / "results.json").unlink()
    os.mkfifo(case / "out" / "results.json")


def _points_file(case: Path):
    out = case / "out"
    out.mkdir()
    (out / "points").write_text("the user's")
    (out / "mine.txt").write_text("the user's")


CC = TINY["coord-check"]
TR = TINY["transfer"]
# a transfer run whose compile lasts well past the signal (no cache)
TR_COMPILE = (
    "study transfer --depths 2,4,8 --width 64 --widths 64,128,256 --depth 4 --steps 20 "
    "--seeds 2 --lrs 0.001,0.01,0.1 --batch 8 --context 64 --heads 2 --base-width 64 "
    "--base-depth 2 --parametrisations mup --width-parametrisations mup"
)


def rows() -> list[Row]:
    two = ["--coordinator", "127.0.0.1:PORT", "--num-processes", "2"]
    out = [
        Row("processes: two seeds", "processes", _processes(
            [(_tlp(*two, "--process-id", "0", "--seed", "0"), {}),
             (_tlp(*two, "--process-id", "1", "--seed", "7"), {})], names="--seed")),
        Row("processes: a peer that never comes (process 0 alone)", "processes",
            _processes([(_tlp(*two, "--process-id", "0"), {})])),
        Row("processes: a peer that never comes (process 1 alone)", "processes",
            _processes([(_tlp(*two, "--process-id", "1"), {})])),
        Row("processes: coordinator 256.1.1.1:1234", "processes",
            _tlp("--coordinator", "256.1.1.1:1234", "--num-processes", "2", "--process-id",
                 "1")),
        Row("processes: SLURM naming no node", "processes",
            _processes([(_tlp("--distributed"), _SLURM)])),
        Row("coord-check --context 64 --data of 200 bytes", "--data",
            ["study", "coord-check", *CC.split(), "--context", "64", "--data",
             "{case}/t.txt"], lambda case: (case / "t.txt").write_text("abc " * 50)),
        Row("meanfield info with MEANFIELD_PROCESS_TIMEOUT=abc", "variable",
            "python:import os,sys;os.environ['MEANFIELD_PROCESS_TIMEOUT']='abc'\n"
            "from meanfield.cli import main\nsys.exit(main(['info']))", None, RAN),
        Row("canary --sizes 1000000000", "canary", "canary --sizes 1000000000"),
        Row("plot: a results.json nested 100000 deep", "plot", "plot {case}/out", _nested),
        Row("plot: a results.json that is a FIFO", "plot", "plot {case}/out", _fifo),
        Row("plot coord-check: config.base_depth missing", "plot", "plot {case}/out",
            _coord_check_edit(_no_base_depth)),
        Row("plot coord-check: point sizes not the config's", "plot", "plot {case}/out",
            _coord_check_edit(_sizes_disagree)),
        Row("plot coord-check: a negative mean on a log axis", "plot", "plot {case}/out",
            _coord_check_edit(_negative_mean)),
        Row("approximation --sawtooth-k 3 without sawtooth", "approximation",
            ["study", "approximation", *TINY["approximation"].split(), "--sawtooth-k", "3"]),
        Row("approximation --parity-n 5 without parity", "approximation",
            ["study", "approximation", *TINY["approximation"].replace("square,parity", "square")
             .replace("--parity-n 3", "").split(), "--parity-n", "5"]),
        Row("a user folder holding a file named points", "folder",
            ["study", "tangent-kernel", *TINY["tangent-kernel"].split(), "--out", "{case}/out"],
            _points_file),
        Row("SIGINT during a Transformer compile", "signals", ["--compile-cache", "off",
            *TR_COMPILE.split()], None, frozenset({"stopped"}), interrupt=6.0),
    ]  # fmt: skip
    api = {
        "api: Transformer(width=2**20).init": (
            "from meanfield.models.transformer import Transformer\n"
            "Transformer(vocab=256, context=8, width=2**20, depth=2, heads=1)"
            ".init(jax.random.key(0))"),
        "api: Transformer loss on ids >= vocab": (
            "from meanfield.models.transformer import Transformer\n"
            "m = Transformer(vocab=16, context=4, width=8, depth=1, heads=1)\n"
            "p = m.init(jax.random.key(0)); x = jnp.full((2, 4), 20)\nprint(m.loss(p, x, x))"),
        "api: Transformer loss on float ids": (
            "from meanfield.models.transformer import Transformer\n"
            "m = Transformer(vocab=16, context=4, width=8, depth=1, heads=1)\n"
            "p = m.init(jax.random.key(0)); x = jnp.full((2, 4), 1.5)\nprint(m.loss(p, x, x))"),
        "api: batches(batch=2**31)": (
            "from meanfield.io.text import batches\n"
            "batches(jax.random.key(0), jnp.arange(64, dtype=jnp.uint8), batch=2**31, "
            "context=4)"),
        "api: from_table({})": "from meanfield.parametrisation import from_table\nfrom_table({})",
        "api: load_text(path, max_bytes=10**15)": (
            "from meanfield.io.text import load_text\n"
            "load_text('{case}/afile', max_bytes=10**15)"),
        "api: load_text(123)": "from meanfield.io.text import load_text\nload_text(123)",
    }  # fmt: skip
    for label, code in api.items():
        text = _api(code).replace("except ValueError", "except (ValueError, TypeError)")
        out.append(Row(label, "api", text))
    return out


# every case issue 75 quotes: a row above or a generated row (hostile_generated)
QUOTED_75 = [
    "processes: two seeds",
    "processes: a peer that never comes (process 0 alone)",
    "processes: a peer that never comes (process 1 alone)",
    "processes: coordinator 256.1.1.1:1234",
    "processes: SLURM naming no node",
    "study coord-check --parametrisations file: looping at import",
    "study mean-ode --block file: looping at import",
    "plot: a results.json that is a FIFO",
    "api: Transformer(width=2**20).init",
    "coord-check --context 64 --data of 200 bytes",
    "study coord-check --parametrisations file: a NaN exponent",
    "study coord-check --parametrisations file: a string exponent",
    "study coord-check --parametrisations file: table() raising",
    "study coord-check --parametrisations file: table() returning {}",
    "meanfield info with MEANFIELD_PROCESS_TIMEOUT=abc",
    "MEANFIELD_PROCESS_TIMEOUT=nan (process number)",
    "canary --sizes 1000000000",
    "canary --json '{case}'",
    "canary --json '{case}/missing/x.json'",
    "plot: a results.json nested 100000 deep",
    "api: from_table({})",
    "api: load_text(path, max_bytes=10**15)",
    "api: load_text(123)",
    "approximation --sawtooth-k 3 without sawtooth",
    "approximation --parity-n 5 without parity",
    "study two-layer-phases --data file: duplicated inputs",
    "plot coord-check: point sizes not the config's",
    "plot coord-check: a negative mean on a log axis",
    "api: Transformer loss on ids >= vocab",
    "api: Transformer loss on float ids",
    "api: batches(batch=2**31)",
    "study coord-check --parametrisations file: a name of 300 characters",
    "a user folder holding a file named points",
    "plot coord-check: config.base_depth missing",
    "SIGINT during a Transformer compile",
]
