"""The hostile-input corpus of issue 46: every study, `plot`, `--data`, `--block/--law`,
the folder cases and the Python API, each input as a user would give it.

`rows()` lists them; `benchmarks/hostile_inputs.py` runs and classifies them. A row is
`Row(label, group, argv, setup, expect)`:

- `group`: what it exercises, for the counts (a study's name, `plot`, `api`, ...);
- `argv`: the arguments after `python -m meanfield` (a string split on spaces, or a
  list), with `{case}` standing for the row's own scratch folder; `python:CODE` runs
  `python -c CODE` instead (the API rows);
- `setup(case)`: makes the files the row needs (a data file, a finished study, a link);
- `expect`: the outcomes that are clean for it: `refused` (one line, exit 2, nothing
  left behind), `ran` (exit 0) and/or `explosion` (exit 0, explosions reported).

Generated rows give every option of every study the values a hostile user tries
(zero, negative, fractional, NaN, inf, 10^9, 2^63, an empty or decreasing list, an
unknown name); hand-written rows hold each case the issue quotes.
"""

import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BIG = 10**9

# a configuration of each study that runs in seconds on a CPU: a generated value is
# put on top of it (argparse keeps the last), so an input that is wrongly accepted ends
# quickly instead of running a preset
TINY = {
    "mean-ode": "--L 4,8 --M 1,4 --L-for-M 16 --fit-M-max 4 --seeds 3 --order 12 --steps 1",
    "sde": "--L 4,8 --seeds 4 --d 2 --n-fine 64",
    "phases": "--L 4,8 --beta 0.25,1 --seeds 4 --d 4 --bootstrap 20",
    "response": "--depths 2,10 --inits 20 --alpha-star-inits 10 --width 50 --d-out 10 --alphas 0.3",
    "variance": "--L 2,4 --nets 8 --c-samples 2000 --gammas 0.5,1",
    "tangent-kernel": "--L 2,4 --gammas 0.5,1 --M 2 --nets 2 --d 2",
    "two-layer": "--M 64,256 --D 4,8 --D-limit 16,64 --s-v-sweep 0.5,2 --sweep-M 64 "
    "--sweep-D 8 --seeds 2 --steps 1 --n-sweep 2,4 --input-draws 50 --input-M 16 --input-D 8",
    "two-layer-phases": "--D 8,16 --s-v-sweep 0.5,2 --M 32 --seeds 2 --dt 0.5",
    "resnet-phases": "--D 8,16 --s-v-sweep 0.5,2 --L 2 --M 16 --seeds 2 --dt 0.5",
    "stochastic-approximation": "--L 4,8 --M 4,8 --sizes 0.1 --seeds 4 --d 2",
    "shapes": "--L 4,8 --M 4,16 --D 8 --seeds 3 --steps 1",
    "plain-vs-residual": "--L 4,8 --N 128 --seeds 3 --activations relu --train-L 2,3 "
    "--train-steps 5 --train-seeds 2",
    "trained-weights": "--L 32 --d 4 --betas 0.5,1 --steps 10 --seeds 2",
    "regimes": "--L 4,8,16 --gammas 0.5,1 --lambdas 0,1 --seeds 2 --transfer-L 4,8,16 "
    "--transfer-steps 5 --transfer-seeds 2",
    "approximation": "--budgets 32,64 --seeds 2 --steps 5 --targets square,parity --parity-n 3 "
    "--exercise-seeds 2 --exercise-steps 2",
    "coord-check": "--widths 8,16,32 --depth 1 --depths 1,2,4 --width 8 --steps 1 --seeds 2 "
    "--batch 2 --context 4 --heads 1 --base-width 8 --base-depth 1 --parametrisations mup",
    "transfer": "--depths 1,2,4 --width 8 --widths 8,16,32 --depth 1 --steps 2 --seeds 2 "
    "--lrs 0.001,0.01,0.1 --batch 2 --context 4 --heads 1 --base-width 8 --base-depth 1 "
    "--parametrisations mup --width-parametrisations mup",
}

REFUSED = frozenset({"refused"})
REFUSED_OR_EXPLOSION = frozenset({"refused", "explosion"})
REFUSED_OR_RAN = frozenset({"refused", "ran", "explosion"})
RAN = frozenset({"ran", "explosion"})


@dataclass
class Row:
    label: str
    group: str
    argv: "str | list[str]"
    setup: "Callable[[Path], None] | None" = None
    expect: frozenset = REFUSED
    # the option a refusal must name (a generated row: the option made absurd), so that
    # an input refused for another reason (a base configuration the study refuses) fails
    names: "str | None" = None
    # what the row covers of what the package declares (`hostile_generated.declared`)
    covers: tuple = ()
    # seconds after which the row's process is sent SIGINT (a user's code that loops):
    # clean if it then stops in one line with exit 130, nothing claimed that was not written
    interrupt: "float | None" = None


# -- data files -----------------------------------------------------------------------


def _npz(path: Path, **arrays) -> None:
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _regression_files() -> dict:
    """label -> function writing the file at a path: broken `--data` for two-layer/shapes."""
    x = np.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0]])
    y = np.array([[1.0], [-1.0]])

    def truncated(p):
        _npz(p, x=x, y=y)
        p.write_bytes(p.read_bytes()[:60])

    def huge_header(p):  # an .npy member declaring (10^6, 10^6) float64 in a few bytes
        header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 1000000), }"
        header = header.ljust(117) + "\n"
        npy = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode()
        with zipfile.ZipFile(p, "w") as z:
            z.writestr("x.npy", npy + b"\0" * 16)
            z.writestr("y.npy", npy + b"\0" * 16)

    return {
        "empty file": lambda p: p.write_bytes(b""),
        "truncated npz": truncated,
        "text file": lambda p: p.write_text("x,y\n1,2\n"),
        "a .npy": lambda p: np.save(p.with_suffix(".npy"), x) or p.with_suffix(".npy").rename(p),
        "no y": lambda p: _npz(p, x=x),
        "zero rows": lambda p: _npz(p, x=np.zeros((0, 3)), y=np.zeros((0, 1))),
        "zero columns": lambda p: _npz(p, x=np.zeros((2, 0)), y=y),
        "all-zero x": lambda p: _npz(p, x=np.zeros((2, 3)), y=y),
        "duplicated inputs": lambda p: _npz(p, x=np.stack([x[0], x[0]]), y=y),
        "complex x": lambda p: _npz(p, x=x + 1j, y=y),
        "object x": lambda p: _npz(p, x=np.array([[1, "a", None]] * 2, dtype=object), y=y),
        "string x": lambda p: _npz(p, x=np.array([["a", "b", "c"]] * 2), y=y),
        "NaN x": lambda p: _npz(p, x=np.where(x == 0, np.nan, x), y=y),
        "inf y": lambda p: _npz(p, x=x, y=np.array([[np.inf], [1.0]])),
        "x of 1e300": lambda p: _npz(p, x=x * 1e300, y=y),
        "x of 1e-300": lambda p: _npz(p, x=x * 1e-300, y=y),
        "y of 1e300": lambda p: _npz(p, x=x, y=y * 1e300),
        "float16 x": lambda p: _npz(p, x=x.astype(np.float16), y=y),
        "d_in 20000": lambda p: _npz(p, x=np.eye(2, 20000), y=y),
        "500 inputs": lambda p: _npz(
            p, x=np.random.default_rng(0).normal(size=(500, 3)), y=np.ones((500, 1))
        ),
        "rows differ": lambda p: _npz(p, x=x, y=np.ones((3, 1))),
        "3-d x": lambda p: _npz(p, x=x[None], y=y),
        "declared (10^6, 10^6)": huge_header,
        "a directory": lambda p: p.mkdir(),
    }


def _image_files() -> dict:
    """label -> function writing a broken image `--data` file for trained-weights."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 255, size=(60, 8, 8)).astype(np.uint8)
    y = np.arange(60) % 10

    def cifar_huge(p):
        import pickle

        class _Declared:  # a pickle declaring a (10^6, 3072) uint8 array in 300 bytes
            def __reduce__(self):
                return (np.ndarray, ((10**6, 3072), np.uint8))

        p.write_bytes(pickle.dumps({b"data": _Declared(), b"labels": [0]}))

    def truncated(p):
        _npz(p, x=x, y=y)
        p.write_bytes(p.read_bytes()[:100])

    return {
        "empty file": lambda p: p.write_bytes(b""),
        "truncated npz": truncated,
        "text file": lambda p: p.write_text("not images"),
        "no labels": lambda p: _npz(p, x=x),
        "zero images": lambda p: _npz(p, x=x[:0], y=y[:0]),
        "label 2^31-1": lambda p: _npz(p, x=x, y=np.where(y == 3, 2**31 - 1, y)),
        "negative label": lambda p: _npz(p, x=x, y=y - 1),
        "fractional labels": lambda p: _npz(p, x=x, y=y + 0.5),
        "complex pixels": lambda p: _npz(p, x=x + 1j, y=y),
        "NaN pixels": lambda p: _npz(p, x=np.where(x > 128, np.nan, x / 255), y=y),
        "all-zero pixels": lambda p: _npz(p, x=np.zeros_like(x), y=y),
        "one class": lambda p: _npz(p, x=x, y=np.zeros_like(y)),
        "labels and images differ": lambda p: _npz(p, x=x, y=y[:10]),
        "300-byte CIFAR pickle of (10^6, 3072)": cifar_huge,
    }


# inputs the loader takes, by design (`embedded_options.load_data`): float16 is converted to
# float64 exactly; duplicated inputs leave no Gram to invert (the limits drop its null
# directions)
ACCEPTED_DATA = {"duplicated inputs", "float16 x"}


def data_rows() -> list[Row]:
    out = []
    for study in ("two-layer", "shapes"):
        for label, make in _regression_files().items():
            out.append(
                Row(
                    f"{study} --data: {label}",
                    "--data",
                    f"study {study} {TINY[study]} --data {{case}}/data.npz",
                    lambda case, make=make: make(case / "data.npz"),
                    RAN if label in ACCEPTED_DATA else REFUSED,
                )
            )
    for label, make in _image_files().items():
        name = "data.pkl" if "pickle" in label else "data.npz"
        out.append(
            Row(
                f"trained-weights --data: {label}",
                "--data",
                f"study trained-weights {TINY['trained-weights']} --data {{case}}/{name}",
                lambda case, make=make, name=name: make(case / name),
            )
        )
    return out


# -- --block / --law files ------------------------------------------------------------

_BLOCK_BASE = """
import jax.numpy as jnp, jax.random as jr
import meanfield as mf

class SineUnit(mf.AbstractUnitBlock):
    def __call__(self, h, z):
        return z["a"] * jnp.sin(z["w"] @ h + z["c"])

def sine_law():
    def draw(key):
        kw, ka = jr.split(key)
        return {"w": jnp.array([1.2, -0.8]) + 0.4 * jr.normal(kw, (2,)),
                "a": jnp.array([1.0, 0.7]) + 0.4 * jr.normal(ka, (2,)), "c": jnp.asarray(0.5)}
    return mf.SamplerLaw(draw)
"""


def _user_file(body: str):
    def setup(case: Path):
        (case / "mine.py").write_text(_BLOCK_BASE + body)

    return setup


def block_rows() -> list[Row]:
    # the tiny configurations for a user's block (of d = 2, `_BLOCK_BASE`): its law is no
    # Gaussian, so the mean-ODE reference is Monte Carlo (no --order)
    ode = "study mean-ode --L 4,8 --M 1,4 --L-for-M 16 --fit-M-max 4 --seeds 3 --steps 1 "
    ode += "--particles 256"
    var = f"study variance {TINY['variance']} --d 2"
    mine = "--block {case}/mine.py:Block --law {case}/mine.py:Law"
    cases = [
        ("a block file calling sys.exit(0)", "import sys\nsys.exit(0)\n", REFUSED),
        ("a block file calling exit(3)", "exit(3)\n", REFUSED),
        ("a block file raising", "raise RuntimeError('boom')\n", REFUSED),
        ("a block file with a syntax error", "def (:\n", REFUSED),
        ("a name that is not in the file", "X = 1\n", REFUSED),
        ("a block that is an int", "Block = 3\nLaw = 4\n", REFUSED),
        ("a block calling exit() when called", "class Block(SineUnit):\n"
         "    def __call__(self, h, z):\n        raise SystemExit(0)\nLaw = sine_law\n",
         REFUSED),
        ("a law raising when drawn", "Block = SineUnit\ndef Law():\n"
         "    def draw(key):\n        raise ValueError('no')\n    return mf.SamplerLaw(draw)\n",
         REFUSED),
        ("a block returning int32", "class Block(SineUnit):\n    def __call__(self, h, z):\n"
         "        return jnp.zeros(2, jnp.int32)\nLaw = sine_law\n", REFUSED),
        ("a block of the wrong shape", "class Block(SineUnit):\n"
         "    def __call__(self, h, z):\n        return jnp.zeros(5)\nLaw = sine_law\n",
         REFUSED),
        ("a float16 law", "Block = SineUnit\ndef Law():\n    def draw(key):\n"
         "        return {'w': jnp.ones(2, jnp.float16), 'a': jnp.ones(2, jnp.float16), "
         "'c': jnp.asarray(0.5, jnp.float16)}\n    return mf.SamplerLaw(draw)\n", REFUSED),
        ("a block returning NaN", "class Block(SineUnit):\n    def __call__(self, h, z):\n"
         "        return h * jnp.nan\nLaw = sine_law\n", REFUSED_OR_EXPLOSION),
        ("a law returning a string", "Block = SineUnit\ndef Law():\n"
         "    return mf.SamplerLaw(lambda key: 'w')\n", REFUSED),
    ]  # fmt: skip
    out = []
    for label, body, expect in cases:
        names = "--law" if "law" in label else "--block"  # what the refusal must name
        for what, base in (("mean-ode", ode), ("variance", var)):
            out.append(
                Row(f"{what}: {label}", "--block/--law", f"{base} {mine}", _user_file(body),
                    expect, names=names)
            )  # fmt: skip
    sine = "--block {case}/mine.py:SineUnit"
    out += [
        Row("mean-ode --law builtins:exit", "--block/--law",
            f"{ode} {sine} --law builtins:exit", _user_file("")),
        Row("variance --law builtins:exit", "--block/--law",
            f"{var} {sine} --law builtins:exit", _user_file("")),
        Row("mean-ode --block without --law", "--block/--law", f"{ode} {sine}", _user_file("")),
        Row("mean-ode --block no.such:Thing", "--block/--law",
            f"{ode} --block no.such:Thing --law a:b"),
        Row("mean-ode --block 'nocolon'", "--block/--law", f"{ode} --block nocolon --law x:y"),
        Row("variance --block missing.py:X", "--block/--law",
            f"{var} --block {{case}}/missing.py:X --law {{case}}/missing.py:Y"),
        Row("mean-ode: the user's own block (a tiny run)", "--block/--law",
            f"{ode} {sine} --law {{case}}/mine.py:sine_law", _user_file(""), RAN),
        # NaN for the draws with w[0] > 1.6 (about one in six) past the input (|h| = 1,
        # where the block is tried): counted, said, not averaged
        Row("variance: a block NaN for some draws", "--block/--law", f"{var} {mine}",
            _user_file("class Block(SineUnit):\n    def __call__(self, h, z):\n"
                       "        out = SineUnit.__call__(self, h, z)\n"
                       "        bad = (z['w'][0] > 1.6) & (jnp.abs(h @ h - 1) > 1e-6)\n"
                       "        return jnp.where(bad, jnp.nan, out)\n"
                       "Law = sine_law\n"), frozenset({"explosion"})),
    ]  # fmt: skip
    return out


# -- folders --------------------------------------------------------------------------

TK = f"study tangent-kernel {TINY['tangent-kernel']}"


def _finished(case: Path) -> Path:
    """A finished tiny tangent-kernel study in `case/out`, copied from the one made once."""
    shutil.copytree(_TEMPLATES / "tk", case / "out", symlinks=True)
    return case / "out"


def _outside(case: Path) -> Path:
    target = case / "outside"
    target.mkdir(exist_ok=True)
    (target / "theirs.txt").write_text("theirs")
    return target


def _link(name: str, finished: bool):
    def setup(case: Path):
        out = _finished(case) if finished else case / "out"
        out.mkdir(exist_ok=True)
        (out / "points").mkdir(exist_ok=True)
        target = _outside(case)
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        path.symlink_to(target if name == "points" else target / "theirs.txt")

    return setup


def _lone(name: str, text: str):
    def setup(case: Path):
        out = case / "out"
        out.mkdir()
        (out / name).write_text(text)

    return setup


def _manifest_edited(case: Path):
    """A mean-ode folder's manifest header edited to say tangent-kernel."""
    out = _finished(case)
    manifest = out / ".meanfield-manifest.jsonl"
    lines = manifest.read_text().splitlines()
    config = json.loads((out / "config.json").read_text())
    config["study"] = "mean-ode"
    (out / "config.json").write_text(json.dumps(config))
    manifest.write_text("\n".join([lines[0], *lines[1:]]) + "\n")


def _no_manifest(case: Path):
    out = _finished(case)
    (out / ".meanfield-manifest.jsonl").unlink()
    (out / "mine.txt").write_text("the user's")


def _with_env(name: str, value: str) -> str:
    argv = (TK + " --out {case}/out --no-progress").split()
    return (
        f"python:import os,sys;os.environ[{name!r}]={value!r}\n"
        f"from meanfield.cli import main\nsys.exit(main({argv!r}))"
    )


def folder_rows() -> list[Row]:
    rows = []
    for name in (".meanfield-lock", "points", "tangent_kernel.png", "results.json", "config.json"):
        for flag, finished in (("", False), (" --resume", True), (" --overwrite", True)):
            rows.append(
                Row(
                    f"a link {name} in --out{flag or ' (fresh folder)'}",
                    "folder",
                    f"{TK} --out {{case}}/out{flag}",
                    _link(name, finished),
                )
            )
    rows += [
        Row("--out ''", "folder", ["study", "tangent-kernel", *TINY["tangent-kernel"].split(),
                                   "--out", ""]),
        Row("--out is a file", "folder", f"{TK} --out {{case}}/afile"),
        Row("--out below a file", "folder", f"{TK} --out {{case}}/afile/below"),
        Row("--overwrite, no manifest", "folder", f"{TK} --out {{case}}/out --overwrite",
            _no_manifest),
        Row("--overwrite, a manifest header edited", "folder",
            f"{TK} --out {{case}}/out --overwrite", _manifest_edited),
        Row("no flag, a lone results.json", "folder", f"{TK} --out {{case}}/out",
            _lone("results.json", '{"study": "mine"}')),
        Row("no flag, a lone config.json", "folder", f"{TK} --out {{case}}/out",
            _lone("config.json", "{}")),
        Row("--resume, a garbled config.json", "folder", f"{TK} --out {{case}}/out --resume",
            _lone("config.json", "{garbled")),
        Row("--overwrite, another study's folder", "folder",
            f"study mean-ode {TINY['mean-ode']} --out {{case}}/out --overwrite", _finished),
        Row("--resume, another study's folder", "folder",
            f"study mean-ode {TINY['mean-ode']} --out {{case}}/out --resume", _finished),
        Row("no flag, a finished study", "folder", f"{TK} --out {{case}}/out", _finished),
        Row("--resume and --overwrite together", "folder",
            f"{TK} --out {{case}}/out --resume --overwrite"),
        Row("unicode --out (a tiny run)", "folder", f"{TK} --out {{case}}/résultats-✓",
            None, RAN),
        *(
            Row(f"MEANFIELD_MEMORY_LIMIT={v}", "folder", _with_env("MEANFIELD_MEMORY_LIMIT", v))
            for v in ("abc", "inf", "-1", "0")
        ),
    ]  # fmt: skip
    return rows


# -- meanfield plot on edited results -------------------------------------------------


def _edited(edit):
    def setup(case: Path):
        out = _finished(case)
        results = json.loads((out / "results.json").read_text())
        edit(results)
        (out / "results.json").write_text(json.dumps(results))

    return setup


def _set(path, value):
    def edit(results):
        node = results
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


def _delete(path):
    def edit(results):
        node = results
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return edit


def plot_rows() -> list[Row]:
    plot = "plot {case}/out"
    edits = {
        "study is a list": _set(["study"], ["tangent-kernel"]),
        "study unknown": _set(["study"], "nope"),
        "study missing": _delete(["study"]),
        "config missing": _delete(["config"]),
        "points missing": _delete(["points"]),
        "points a string": _set(["points"], "many"),
        "a point a string": _set(["points", 0], "p"),
        "a point's L = 'four'": _set(["points", 0, "L"], "four"),
        "a point's L = -4": _set(["points", 0, "L"], -4),
        "x64 = 'no'": _set(["config", "x64"], "no"),
        "config L = 'four'": _set(["config", "L"], "four"),
        "a point without L": _delete(["points", 0, "L"]),
        "fits a number": _set(["fits"], 3),
        "results a list": lambda r: (r.clear(), None)[1],
    }
    rows = [Row(f"plot: {label}", "plot", plot, _edited(edit)) for label, edit in edits.items()]

    def results_list(case):
        out = _finished(case)
        (out / "results.json").write_text("[1, 2]")

    def garbled(case):
        out = _finished(case)
        (out / "results.json").write_text('{"study": "tangent')

    def read_only(case):
        out = _finished(case)
        (out / "tangent_kernel.png").unlink()
        (out / "tangent_kernel.png").mkdir()

    rows += [
        Row("plot: results.json a list", "plot", plot, results_list),
        Row("plot: results.json garbled", "plot", plot, garbled),
        Row("plot: a figure path that is a folder", "plot", plot, read_only),
        Row("plot: a figure that is a link", "plot", plot, _link("tangent_kernel.png", True)),
        Row("plot: no folder", "plot", "plot {case}/nothing"),
        Row("plot: a finished study", "plot", plot, _finished, RAN),
    ]
    return rows


# -- the Python API -------------------------------------------------------------------


def _api(code: str) -> str:
    body = "\n".join(f"    {line}" for line in code.strip().splitlines())
    return (
        "python:import sys\nimport jax, jax.numpy as jnp, numpy as np\nimport meanfield as mf\n"
        f"try:\n{body}\nexcept ValueError as err:\n"
        "    print(err, file=sys.stderr); sys.exit(2)\n"
    )


def api_rows() -> list[Row]:
    cases = {
        "run_study L=[8, 4]": "mf.run_study('variance', out='{case}/out', L=[8, 4])",
        "run_study lr0=nan": "mf.run_study('regimes', out='{case}/out', lr0=float('nan'))",
        "run_study seed=-1": "mf.run_study('two-layer', out='{case}/out', seed=-1)",
        "run_study s_u=nan": "mf.run_study('two-layer', out='{case}/out', s_u=float('nan'))",
        "run_study seeds=2.5": "mf.run_study('variance', out='{case}/out', nets=2.5)",
        "run_study x64='no'": "mf.run_study('variance', out='{case}/out', x64='no')",
        "run_study out=''": "mf.run_study('variance', out='')",
        "run_study unknown option": "mf.run_study('variance', out='{case}/out', sedes=3)",
        "run_study unknown study": "mf.run_study('nope', out='{case}/out')",
        "mean_ode_study steps=-1": (
            "mf.mean_ode_study(mf.TwoLayerBlock('tanh'), mf.TwoLayerGaussianLaw(d=2), "
            "out='{case}/out', steps=-1)"
        ),
    }
    net = (
        "block = mf.TwoLayerBlock('tanh'); law = mf.TwoLayerGaussianLaw(d=2)\n"
        "key = jax.random.key(0)\n"
        "def sample(**kw):\n"
        "    return mf.ResNet.sample(block, law, L=4, M=3, scaling=mf.MeanODEScaling(), "
        "key=key, **kw)\n"
    )
    nan2 = "jnp.array([[jnp.nan, 0.0], [0.0, 1.0]])"
    inf2 = "jnp.array([[jnp.inf, 0.0], [0.0, 1.0]])"
    xs = "jnp.array([[1.0, 0.0], [0.0, 1.0]])"
    cases.update({
        "ResNet.sample, a NaN embedding": net + f"sample(embedding={nan2})",
        "ResNet.sample, an inf readout": net + f"sample(readout={inf2})",
        "ResNet.sample, L=0": net + "mf.ResNet.sample(block, law, L=0, M=3, "
        "scaling=mf.MeanODEScaling(), key=key)",
        "ResNet.sample, M=2.5": net + "mf.ResNet.sample(block, law, L=4, M=2.5, "
        "scaling=mf.MeanODEScaling(), key=key)",
        "ResNet from NaN params": net + "n = sample(); p = jax.tree.map(lambda a: a * jnp.nan, "
        "n.params)\nmf.ResNet(block, p, 0.5)",
        "ResNet alpha=nan": net + "n = sample(); mf.ResNet(block, n.params, float('nan'))",
        "ResNet called on a NaN input": net + "sample()(jnp.array([jnp.nan, 1.0]))",
        "train, inf targets": net + "import optax\n"
        f"mf.train(sample(), {xs}, {inf2}, optimizer=optax.sgd(0.1), steps=2)",
        "train, NaN inputs": net + "import optax\n"
        f"mf.train(sample(), {nan2}, {xs}, optimizer=optax.sgd(0.1), steps=2)",
        "train, steps=-1": net + "import optax\n"
        f"mf.train(sample(), {xs}, {xs}, optimizer=optax.sgd(0.1), steps=-1)",
        "MeanODE, NaN inputs": net + "P = mf.gauss_hermite_particles(law, 3)\n"
        f"mf.MeanODE(block, P, {nan2}, {xs}, learning_rate=0.1)",
        "MeanODE, learning_rate=inf": net + "P = mf.gauss_hermite_particles(law, 3)\n"
        f"mf.MeanODE(block, P, {xs}, {xs}, learning_rate=float('inf'))",
    })  # fmt: skip
    rows = [Row(f"api: {k}", "api", _api(v)) for k, v in cases.items()]
    return rows


def rows(templates: Path) -> list[Row]:
    global _TEMPLATES
    _TEMPLATES = templates
    import hostile_generated as G
    import hostile_issue75

    return [
        *earlier_rows(),
        *G.option_rows(),
        *G.entry_rows(),
        *G.env_rows(),
        *G.plot_rows(templates / "studies"),
        *G.api_rows(),
        *data_rows(),
        *block_rows(),
        *folder_rows(),
        *plot_rows(),
        *api_rows(),
        *hostile_issue75.rows(),
    ]


_TEMPLATES = Path("/nonexistent")


def make_templates(root: Path) -> Path:
    """A finished tiny tangent-kernel study (copied by the rows that need one), and one of
    every study that draws figures (`root/studies/NAME`, the generated plot rows); kept
    from an earlier call where they are there."""
    root.mkdir(parents=True, exist_ok=True)
    if not (root / "tk" / "results.json").exists():
        subprocess.run(
            [sys.executable, "-m", "meanfield", *TK.split(), "--out", str(root / "tk"),
             "--no-progress"],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
    import hostile_generated

    hostile_generated.make_plot_templates(root / "studies")
    return root


def earlier_rows() -> list[Row]:
    """Issue 34's rows: the four hangs it found, huge grids on the presets, NaN, absurd
    scales, empty lists, options that do not apply."""
    ode = TINY["mean-ode"]
    cases = [
        ("mean-ode --lr 1000", "study mean-ode --lr 1000", REFUSED),
        ("mean-ode --sigma-xi 1e300", "study mean-ode --sigma-xi 1e300", REFUSED),
        ("phases smooth --length-scale 1e-9",
         "study phases --weights smooth --length-scale 1e-9", REFUSED),
        ("response --depths 2,1000000", "study response --depths 2,1000000", REFUSED),
        ("mean-ode huge width", f"study mean-ode --L 4,8 --M 1,{BIG}", REFUSED),
        ("mean-ode huge seeds", f"study mean-ode --seeds {BIG}", REFUSED),
        ("mean-ode huge steps", f"study mean-ode --steps {BIG}", REFUSED),
        ("sde huge --n-fine", f"study sde --n-fine {2**34}", REFUSED),
        ("phases huge depth", f"study phases --L 16,{2**30}", REFUSED),
        ("phases huge d", "study phases --d 100000", REFUSED),
        ("response huge width", f"study response --width {BIG}", REFUSED),
        ("variance huge depth", f"study variance --L 4,{BIG}", REFUSED),
        ("tangent-kernel huge d", f"study tangent-kernel --d {BIG}", REFUSED),
        ("sde fbm --hurst nan", "study sde --weights fbm --hurst nan", REFUSED),
        ("mean-ode --sigma-u 1e300", "study mean-ode --sigma-u 1e300", REFUSED),
        ("sde smooth --length-scale 1e-12",
         "study sde --weights smooth --length-scale 1e-12", REFUSED),
        ("mean-ode --lr 2 (tiny grid)", f"study mean-ode {ode} --lr 2", REFUSED_OR_RAN),
        ("mean-ode --lr 10", "study mean-ode --lr 10", REFUSED),
        ("mean-ode --see 3 (abbreviation)", "study mean-ode --see 3", REFUSED),
        ("mean-ode --sigma-v 2 (non-centred)", "study mean-ode --sigma-v 2", REFUSED),
        ("mean-ode --particles 64 (quadrature)", "study mean-ode --particles 64", REFUSED),
        ("phases --no-heatmap (iid)", "study phases --no-heatmap", REFUSED),
        ("response --no-simulate --width 10", "study response --no-simulate --width 10",
         REFUSED),
        ("sde brownian --rtol 1e-8", "study sde --rtol 1e-8", REFUSED),
        ("regimes --transfer-L with --no-transfer",
         f"study regimes {TINY['regimes']} --no-transfer", REFUSED),
        ("trained-weights --hursts without fbm",
         f"study trained-weights {TINY['trained-weights']} --inits iid --hursts 0.7", REFUSED),
        ("--seed 2^31", f"study variance --seed {2**31}", REFUSED),
        ("--seed -1", "study variance --seed=-1", REFUSED),
        ("two-layer --data missing.npz", "study two-layer --data /nonexistent.npz", REFUSED),
]  # fmt: skip
    return [Row(label, argv.split()[1], argv, None, expect) for label, argv, expect in cases]


# -- the cases issue 46 quotes, each a row above (`tests/test_hostile_corpus.py` checks
# that every label is in the corpus). Not rows, and tested where named: SIGINT/SIGTERM
# (tests/test_interrupt.py), `--data` replaced before `--resume` (tests/test_data_files.py,
# "the data's content changed"), a read-only folder for `plot`
# (tests/test_plot_validation.py), shapes relu at L, M = 2..4096 (passes its checks,
# tests/test_cost_refusal.py; it runs 17 minutes, beyond a row's time)
QUOTED = [
    "study two-layer --steps '1000000000'", "study two-layer --D-limit '4,1000000000'",
    "study two-layer --sweep-M '4,1000000000'", "study two-layer --sweep-D '1000000000'",
    "study regimes --M '1000000000'", "study regimes --steps '1000000000'",
    "study regimes --transfer-steps '1000000000'",
    "study regimes --transfer-seeds '1000000000'",
    "study plain-vs-residual --train-L '4,1000000000'",
    "study plain-vs-residual --train-N '1000000000'", "study shapes --seeds '1000000000'",
    "study shapes --steps '1000000000'", "study variance --c-samples '1000000000'",
    "study mean-ode --particles '1000000000'", "study sde --seeds '1000000000'",
    "study phases --bootstrap '1000000000'", "study two-layer --seeds '1000000000'",
    "study plain-vs-residual --seeds '1000000000'",
    "study plain-vs-residual --train-steps '1000000000'",
    "study plain-vs-residual --train-seeds '1000000000'",
    "study trained-weights --steps '1000000000'", "mean-ode: a float16 law",
    "variance: a float16 law", "two-layer --data: d_in 20000", "two-layer --data: 500 inputs",
    "two-layer --data: duplicated inputs", "study two-layer --sigma-in '1e300'",
    "study two-layer --lr-u '1e300'", "two-layer --data: x of 1e300",
    "two-layer --data: empty file", "two-layer --data: truncated npz",
    "two-layer --data: a .npy", "two-layer --data: zero rows", "two-layer --data: zero columns",
    "two-layer --data: all-zero x",
    "trained-weights --data: 300-byte CIFAR pickle of (10^6, 3072)",
    "trained-weights --data: label 2^31-1", "two-layer --data: complex x",
    "plot: study is a list", "plot: study missing", "plot: a point's L = 'four'",
    "plot: config L = 'four'", "plot: x64 = 'no'",
    "a link tangent_kernel.png in --out (fresh folder)", "a link points in --out --overwrite",
    "a link .meanfield-lock in --out (fresh folder)", "--overwrite, no manifest",
    "--overwrite, a manifest header edited", "no flag, a lone results.json", "--out ''",
    "variance: a block NaN for some draws", "mean-ode: a block file calling sys.exit(0)",
    "mean-ode --law builtins:exit", "mean-ode: a block returning int32",
    "regimes --transfer-L with --no-transfer", "trained-weights --hursts without fbm",
    "MEANFIELD_MEMORY_LIMIT=abc", "MEANFIELD_MEMORY_LIMIT=inf",
    "api: ResNet.sample, a NaN embedding", "api: ResNet.sample, an inf readout",
    "api: ResNet from NaN params", "api: train, inf targets", "api: MeanODE, NaN inputs",
    "api: run_study L=[8, 4]", "api: run_study lr0=nan", "api: run_study seed=-1",
    "api: run_study s_u=nan",
]  # fmt: skip
