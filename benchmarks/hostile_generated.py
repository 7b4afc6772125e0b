"""The hostile corpus's rows generated from what the package itself declares (issue 75):
every option of every command (read from the argument parser), every user-file entry
point (the options that import a user's block, law or table, and those that read a data
or text file), every environment variable the package reads (found in its source), the
figures of every study (`meanfield plot` on a finished tiny run, edited where the
study's plot schema reads) and the public constructors and loaders of the API (each
example call with one argument made absurd).

A new study, option, variable or public name is covered the day it lands, or
`tests/test_hostile_corpus.py` fails: each row says what it covers (`Row.covers`), and
`coverage_gaps()` lists what the package declares that no row covers.

Expectations: a size, a count or a number that is 0, negative, fractional, NaN, inf or
astronomically large is refused (one line naming the option, exit 2, before any folder);
a flag given a value, an unknown name or an empty list likewise; a user's file that
raises, exits, loops or returns the wrong thing is refused in one line naming the option
(a loop: stopped by SIGINT in one line, nothing claimed that was not written).
"""

import argparse
import ast
import json
import math
import re
from pathlib import Path

from hostile_corpus import (
    BIG,
    RAN,
    REFUSED,
    REFUSED_OR_EXPLOSION,
    REFUSED_OR_RAN,
    TINY,
    Row,
    _api,
    _regression_files,
)

ROOT = Path(__file__).resolve().parents[1]

# options that are no size and take any positive value sensibly (a worker count, the
# scan's unroll): a large value is refused or runs
NOT_A_SIZE = {
    "--compile-workers", "--unroll", "--seed-batch-units", "--pad-units", "--fit-M-max",
    "--batch", "--pad-coordinates",
}  # fmt: skip

# the configuration each non-study command starts from (a wrongly accepted value then
# ends in seconds)
COMMAND_BASE = {
    "canary": "canary --sizes 8",
    "plot": "plot {case}/nothing",
    "info": "info",
}

# the options whose values name something else than a size: what a hostile user gives them
STRING_VALUES = ("nope",)


def commands():
    """(command, parser) of every command: `study NAME` for each study, then the others."""
    from meanfield.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    study = sub.choices["study"]
    names = next(a for a in study._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in names.choices.items():
        yield f"study {name}", p
    for name, p in sub.choices.items():
        if name != "study":
            yield name, p
    yield "meanfield", parser  # the options before the command (--compile-cache)


def options(p: argparse.ArgumentParser):
    """The options of a parser, help left out: (flag, action)."""
    for a in p._actions:
        if a.option_strings and not isinstance(a, argparse._HelpAction):
            yield a.option_strings[0], a


def _kind(action) -> str:
    return getattr(action.type, "__name__", None) or ""


def entry_kind(flag: str, action) -> str | None:
    """What a user's file given to this option is: a Python object (`block`, `law`,
    `table`), a `data` file, or `None` (no user file)."""
    text = action.help or ""
    dest = action.dest
    if dest.endswith("parametrisations"):
        return "table"
    if dest in ("block", "law"):
        return dest
    if "MODULE:NAME" in text or "FILE.py:NAME" in text:
        return "object"
    if dest == "data":
        return "data"
    return None


def _values(flag: str, action) -> list[tuple[str, frozenset]]:
    """The hostile values of an option and the outcomes that are clean for each."""
    kind = _kind(action)
    if action.nargs == 0:  # a flag: given a value
        return [("nope", REFUSED)]
    if action.choices is not None:
        return [("nope", REFUSED)]
    big = REFUSED_OR_RAN if flag in NOT_A_SIZE or kind == "seed_int" else REFUSED
    if kind in ("positive_int", "int", "nonnegative_int", "seed_int"):
        zero = REFUSED_OR_RAN if kind in ("nonnegative_int", "seed_int") else REFUSED
        return [("0", zero), ("2.5", REFUSED), (str(2**63), REFUSED), (str(BIG), big)]
    if kind in ("positive_float", "float", "nonnegative_float"):
        negative = REFUSED_OR_RAN if kind == "float" else REFUSED
        return [("nan", REFUSED), ("inf", REFUSED), ("1e300", REFUSED_OR_EXPLOSION),
                ("-1", negative)]  # fmt: skip
    if kind == "int_list":
        return [("", REFUSED), ("0,4", REFUSED), ("8,4", REFUSED), (f"4,{BIG}", REFUSED)]
    if kind == "float_list":
        return [("", REFUSED), ("nan,1", REFUSED), ("1,0.5", REFUSED),
                ("1e300,1e301", REFUSED_OR_EXPLOSION)]  # fmt: skip
    if flag in ("--out", "--compile-cache"):
        return [("{case}/afile", REFUSED), ("{case}/afile/below", REFUSED)]
    if flag == "--json":
        return [("{case}", REFUSED), ("{case}/missing/x.json", REFUSED)]
    if flag == "--coordinator":
        return [("nope", REFUSED), ("host:99999", REFUSED)]
    if entry_kind(flag, action) is not None:
        return [("nope", REFUSED), ("{case}/missing.py:X", REFUSED)]
    return [(v, REFUSED) for v in STRING_VALUES]


def common_options() -> set[str]:
    """The options every study has (`add_common_arguments`: --seed, --out, the processes'
    options, ...): all their values in one study (`COMMON_HOME`), one value in the others
    (the same code reads them)."""
    sets = [{f for f, _ in options(p)} for c, p in commands() if c.startswith("study ")]
    return set.intersection(*sets)


COMMON_HOME = "study tangent-kernel"


def _base(command: str, flag: str = "") -> list[str]:
    if command.startswith("study "):
        name = command.split()[1]
        # a user's block or law: the configuration that takes one (coord-check's ResNet)
        tiny = BLOCK_BASE[name] if flag in ("--block", "--law") else TINY[name]
        return ["study", name, *tiny.split()]
    if command == "meanfield":  # the options before the command: read by a study
        return ["study", "tangent-kernel", *TINY["tangent-kernel"].split()]
    return COMMAND_BASE[command].split()


def option_rows() -> list[Row]:
    """Every option of every command with each of its hostile values."""
    out = []
    common = common_options()
    for command, p in commands():
        for flag, action in options(p):
            if flag == "--allow-known-bad-jax" and command == "info":
                continue  # a flag of info that only relaxes a refusal: given a value below
            base = _base(command, flag)
            group = command.split()[-1] if command.startswith("study ") else command
            values = _values(flag, action)
            if flag in common and command.startswith("study ") and command != COMMON_HOME:
                values = values[:1]
            for value, expect in values:
                arg = f"{flag}={value}"
                argv = [arg, *base] if command == "meanfield" else [*base, arg]
                out.append(
                    Row(f"{command} {flag} {value!r}", group, argv, None, expect, names=flag,
                        covers=(f"option {command} {flag}",))
                )  # fmt: skip
    return out


# -- user files -----------------------------------------------------------------------

_COMMON_BODIES = {
    "raising at import": "raise RuntimeError('boom')\n",
    "a syntax error": "def (:\n",
    "exit(0) at import": "import sys\nsys.exit(0)\n",
    "os._exit-free KeyboardInterrupt at import": "raise KeyboardInterrupt\n",
    "the name missing": "Other = 1\n",
    "an int": "X = 3\n",
}
# a user's file whose code loops: stopped by SIGINT (`Row.interrupt`), one line
_LOOP = "import time\nwhile True:\n    time.sleep(0.01)\n"

_TABLE_BASE = "import meanfield.parametrisation as P\nmup = P.PARAMETRISATIONS['mup']\n"
_TABLE_BODIES = {
    "a NaN exponent": "X = mup.replace(name='mine', rules={'hidden': {'lr': (float('nan'), 0)}})\n",
    "a string exponent": "X = mup.replace(name='mine', rules={'hidden': {'lr': ('a', 0)}})\n",
    "table() raising": "class T(type(mup)):\n    def table(self):\n        raise ValueError('no')\n"
    "X = T(**{f: getattr(mup, f) for f in mup.__dataclass_fields__})\n"
    "object.__setattr__(X, 'name', 'mine')\n",
    "table() returning {}": "class T(type(mup)):\n    def table(self):\n        return {}\n"
    "X = T(**{f: getattr(mup, f) for f in mup.__dataclass_fields__})\n"
    "object.__setattr__(X, 'name', 'mine')\n",
    "a name of 300 characters": "X = mup.replace(name='n' * 300)\n",
    "a name with a slash": "X = mup.replace(name='a/b')\n",
}
_BLOCK_BODIES = {
    "a block raising when called": "import meanfield as mf\nclass X(mf.AbstractUnitBlock):\n"
    "    def __call__(self, h, z):\n        raise ValueError('no')\n",
    "a block returning a string": "import meanfield as mf\nclass X(mf.AbstractUnitBlock):\n"
    "    def __call__(self, h, z):\n        return 'h'\n",
}
_LAW_BODIES = {
    "a law raising when drawn": "import meanfield as mf\ndef _d(key):\n    raise ValueError('no')\n"
    "X = mf.SamplerLaw(_d)\n",
    "a law returning None": "import meanfield as mf\nX = mf.SamplerLaw(lambda key: None)\n",
}


def _bodies(kind: str) -> dict:
    own = {"table": _TABLE_BODIES, "block": _BLOCK_BODIES, "law": _LAW_BODIES}.get(kind, {})
    return {**_COMMON_BODIES, **own}


def _writer(body: str, name: str = "mine.py"):
    def setup(case: Path):
        from hostile_corpus import _BLOCK_BASE

        (case / name).write_text(body)
        (case / "partner.py").write_text(_BLOCK_BASE)

    return setup


def _text_files() -> dict:
    """label -> writer of a broken `--data` text file (the Transformer studies)."""

    def fifo(p):
        import os

        os.mkfifo(p)

    return {
        "an empty file": lambda p: p.write_bytes(b""),
        "200 bytes": lambda p: p.write_text("abc " * 50),
        "invalid UTF-8": lambda p: p.write_bytes(bytes(range(128, 256)) * 64),
        "NUL bytes": lambda p: p.write_bytes(b"\0" * 4096),
        "a directory": lambda p: p.mkdir(),
        "a FIFO": fifo,
    }


def _image_files() -> dict:
    from hostile_corpus import _image_files as images

    return images()


def data_kind(action) -> str:
    """Which files a study's `--data` reads, from its help: `text`, `images` or `arrays`;
    an option whose help says none of them is an error (a new kind of data file must get
    its hostile files)."""
    text = (action.help or "").lower()
    if "text file" in text:
        return "text"
    if "mnist" in text or "cifar" in text:
        return "images"
    if "x (n, d_in)" in text:
        return "arrays"
    raise ValueError(f"--data: no hostile files for a study whose --data reads {text!r}")


def entry_rows() -> list[Row]:
    """Every option that reads a user's file, per study: the file's classes of faults."""
    out = []
    for command, p in commands():
        if not command.startswith("study "):
            continue
        name = command.split()[1]
        flags = dict(options(p))
        for flag, action in flags.items():
            kind = entry_kind(flag, action)
            if kind is None:
                continue
            covers = (f"entry {command} {flag}",)
            base = ["study", name, *TINY[name].split()]
            if kind == "data":
                files = {"text": _text_files, "images": _image_files,
                         "arrays": _regression_files}[data_kind(action)]()  # fmt: skip
                accepted = {"float16 x"}
                if name in ("two-layer", "shapes"):  # their limits drop the Gram's null space
                    accepted.add("duplicated inputs")
                for label, make in files.items():
                    expect = RAN if label in accepted else REFUSED
                    if label == "200 bytes":  # enough for the tiny configuration's context
                        expect = REFUSED_OR_RAN
                    out.append(Row(f"{command} --data file: {label}", "--data",
                                   [*base, "--data", "{case}/data.bin"],
                                   lambda case, make=make: make(case / "data.bin"), expect,
                                   names="--data", covers=covers))  # fmt: skip
                continue
            if kind in ("block", "law"):
                if name not in BLOCK_BASE:
                    raise ValueError(f"{command} {flag}: no BLOCK_BASE for its user's block")
                base = ["study", name, *BLOCK_BASE[name].split()]
            for label, body in {**_bodies(kind), "looping at import": _LOOP}.items():
                argv = [*base, *_partner(flag, flags), f"{flag}={{case}}/mine.py:X"]
                looping = "looping" in label
                out.append(
                    Row(f"{command} {flag} file: {label}", "--block/--law", argv,
                        _writer(body), frozenset({"stopped"}) if looping else REFUSED,
                        names="mine.py" if looping else flag, covers=covers,
                        interrupt=8.0 if looping else None)
                )  # fmt: skip
    return out


# the tiny configuration of each study that takes a user's block, for the sine unit of
# d = 2 (`hostile_corpus._BLOCK_BASE`, the partner of a broken block or law): its law is
# no Gaussian, so mean-ode's reference is Monte Carlo (no --order); coord-check checks a
# ResNet of the units
BLOCK_BASE = {
    "mean-ode": "--L 4,8 --M 1,4 --L-for-M 16 --fit-M-max 4 --seeds 3 --steps 1 --particles 256",
    "variance": TINY["variance"] + " --d 2",
    "coord-check": "--widths 2,4,8 --depth 2 --depths 1,2,4 --width 2 --steps 1 --seeds 2 "
    "--inputs 4 --d 2 --parametrisations mean-ode",
}


def _partner(flag: str, flags: dict) -> list[str]:
    """The other half of a block/law pair (a block is refused without its law): the sine
    unit and its law of `hostile_corpus`'s user file, written by the row's setup."""
    if flag == "--block" and "--law" in flags:
        return ["--law={case}/partner.py:sine_law"]
    if flag == "--law" and "--block" in flags:
        return ["--block={case}/partner.py:SineUnit"]
    return []


# -- environment variables ------------------------------------------------------------

# what each variable the package reads holds: a new variable must be given its kind here
# (and so its rows), or the completeness test fails
VARIABLES = {
    "MEANFIELD_MEMORY_LIMIT": "number",
    "MEANFIELD_WORK_LIMIT": "number",
    "MEANFIELD_PROCESS_TIMEOUT": "process number",
    "MEANFIELD_JOIN_TIMEOUT": "process number",
    "MEANFIELD_COMPILE_CACHE": "folder",
    "MEANFIELD_ARTIFACT_CACHE": "folder",
    "MEANFIELD_FIGURES": "figures folder",
    "MEANFIELD_NO_SELF_CHECK": "switch",
    "MEANFIELD_ALLOW_KNOWN_BAD_JAX": "switch",
    "MEANFIELD_SUPERVISED": "switch",
    "MEANFIELD_RAW_STDERR": "switch",
}


def variables_read() -> set[str]:
    """Every `MEANFIELD_*` name that appears as a string in the package's source."""
    found = set()
    for path in (ROOT / "meanfield").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.update(re.findall(r"\bMEANFIELD_[A-Z0-9_]+\b", node.value))
    return found


def _env_command(name: str, value: str, argv: list[str]) -> str:
    return (
        f"python:import os,sys;os.environ[{name!r}]={value!r}\n"
        f"from meanfield.cli import main\nsys.exit(main({argv!r}))"
    )


def env_rows() -> list[Row]:
    tk = ["study", "tangent-kernel", *TINY["tangent-kernel"].split(), "--out", "{case}/out",
          "--no-progress"]  # fmt: skip
    two = [*tk, "--coordinator", "127.0.0.1:9", "--num-processes", "2", "--process-id", "0"]
    out = []
    for name in sorted(variables_read()):
        kind = VARIABLES.get(name)
        if kind is None:
            continue  # no rows: the completeness test names it
        covers = (f"variable {name}",)
        if kind in ("number", "process number"):
            argv = two if kind == "process number" else tk
            cases = [(v, REFUSED) for v in ("abc", "nan", "-1", "inf", "0", "1e999")]
        elif kind == "folder":
            argv = tk
            cases = [("{case}/afile", REFUSED_OR_RAN), ("{case}/afile/below", REFUSED_OR_RAN)]
        elif kind == "figures folder":  # read by the notebooks' `show` run as scripts
            code = (
                "python:import os,sys;os.environ[{n!r}]={v!r}\n"
                "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt\n"
                "from meanfield.io.plotting import show\nplt.plot([1, 2])\n"
                "try:\n    show('x')\nexcept ValueError as err:\n"
                "    print(err, file=sys.stderr); sys.exit(2)\n"
            )
            for v in ("{case}/afile", "{case}/afile/below"):
                out.append(Row(f"{name}={v}", "variable", code.format(n=name, v=v), None,
                               REFUSED, names=name, covers=covers))  # fmt: skip
            continue
        else:  # a switch: any value runs (unset, or on) or is refused naming it
            argv = tk
            cases = [(v, REFUSED_OR_RAN) for v in ("abc", "2")]
        for value, expect in cases:
            out.append(Row(f"{name}={value} ({kind})", "variable",
                           _env_command(name, value, argv), None, expect, names=name,
                           covers=covers))  # fmt: skip
    return out


# -- figures: every study's plot on its own finished tiny run ---------------------------


def plotted_studies() -> list[str]:
    from meanfield.studies import STUDIES

    return [n for n, m in STUDIES.items() if getattr(m, "plot", None) is not None]


def schema_paths(name: str, limit: int = 6) -> list[list]:
    """Key paths (lists of keys and indices) the study's plot schema reads, config and
    top-level fields first, at most `limit`, spread over the schema."""
    from meanfield.harness.schema_language import List, Record
    from meanfield.studies.schema import SCHEMAS

    paths: list[list] = []

    def walk(spec, path, depth):
        spec = _unwrapped(spec)
        if isinstance(spec, Record) and depth < 3:
            for key, optional, sub in spec.fields:
                if key == "study" and not path:
                    continue
                if not optional:
                    paths.append([*path, key])
                walk(sub, [*path, key], depth + 1)
        elif isinstance(spec, List) and depth < 3:
            walk(spec.item, [*path, 0], depth + 1)

    walk(SCHEMAS[name], [], 0)
    if len(paths) <= limit:
        return paths
    step = len(paths) / limit
    return [paths[int(i * step)] for i in range(limit)]


def _unwrapped(spec):
    from meanfield.harness.schema_language import When

    if isinstance(spec, When):  # the schema of a typical document
        spec = spec.choose({"study": "", "config": {}, "points": [None]})
    for attr in ("inner", "spec"):
        while hasattr(spec, attr) and not isinstance(getattr(spec, attr), (str, type(None))):
            inner = getattr(spec, attr)
            if not hasattr(inner, "check"):
                break
            spec = inner
    return spec


def _edit(case: Path, path: list, value, delete: bool) -> None:
    """`case/out/results.json` with the value at `path` deleted or replaced."""
    file = case / "out" / "results.json"
    results = json.loads(file.read_text())
    node = results
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    file.write_text(json.dumps(results))


def _present(doc, path: list) -> bool:
    """Whether `doc` has every key and index of `path` but the last's own value."""
    node = doc
    for key in path[:-1]:
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            return False
    return isinstance(node, (dict, list))


def plot_rows(templates: Path) -> list[Row]:
    """Every study that draws figures: its finished tiny run (`templates/NAME`), edited at
    the paths its schema reads: a key deleted, a value of the wrong kind, a negative
    number. Refused in one line with no figure redrawn, or drawn (a key the figures need
    not)."""
    import shutil

    out = []
    for name in plotted_studies():
        covers = (f"plot {name}",)
        template = templates / name / "results.json"
        finished = json.loads(template.read_text()) if template.exists() else None
        for path in schema_paths(name):
            if finished is not None and not _present(finished, path):
                continue  # a key of another configuration (phases' fBm heatmap): not there
            where = ".".join(str(k) for k in path)
            for label, value, delete in (("deleted", None, True), ("'four'", "four", False)):

                def setup(case, path=path, value=value, delete=delete, name=name):
                    src = templates / name
                    shutil.copytree(src, case / "out", symlinks=True)
                    _edit(case, path, value, delete)

                out.append(Row(f"plot {name}: {where} {label}", "plot", "plot {case}/out",
                               setup, REFUSED_OR_RAN, covers=covers))  # fmt: skip
    return out


def make_plot_templates(root: Path, jobs: int = 2) -> None:
    """A finished tiny run of every study that draws figures, in `root/NAME`."""
    import concurrent.futures
    import subprocess
    import sys

    def one(name):
        if (root / name / "results.json").exists():
            return
        subprocess.run(
            [sys.executable, "-m", "meanfield", "study", name, *TINY[name].split(),
             "--out", str(root / name), "--no-progress"],
            capture_output=True, timeout=900,
            env={**__import__("os").environ, "MEANFIELD_NO_SELF_CHECK": "1"},
        )  # fmt: skip

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, plotted_studies()))


# -- the API ---------------------------------------------------------------------------

_SETUP = (
    "block = mf.TwoLayerBlock('tanh'); law = mf.TwoLayerGaussianLaw(d=2)\n"
    "key = jax.random.key(0)\nxs = jnp.array([[1.0, 0.0], [0.0, 1.0]])\n"
)
# an example call of each public constructor and loader: NAME -> (code, {argument:
# literal}); the call is `code.format(**arguments)` and each argument is then made absurd
# in turn. Names of the front that construct nothing (records a study returns, abstract
# bases, functions of arrays checked in tests/test_api_finite.py) are in NOT_CONSTRUCTED.
EXAMPLES = {
    "ConstantScaling": ("mf.ConstantScaling(alpha={alpha})", {"alpha": 0.5}),
    "DepthPowerScaling": ("mf.DepthPowerScaling(beta={beta})", {"beta": 0.5}),
    "BrownianLaw": ("mf.BrownianLaw(d={d}, n_fine={n_fine})", {"d": 2, "n_fine": 64}),
    "FractionalBrownianLaw": ("mf.FractionalBrownianLaw(d={d}, hurst={hurst}, n_fine={n_fine})",
                              {"d": 2, "hurst": 0.7, "n_fine": 64}),
    "IIDGaussianLaw": ("mf.IIDGaussianLaw(d={d}, std={std})", {"d": 2, "std": 1.0}),
    "SmoothGPLaw": ("mf.SmoothGPLaw(d={d}, length_scale={length_scale})",
                    {"d": 2, "length_scale": 0.2}),
    "DenseGaussianLaw": ("mf.DenseGaussianLaw(N={N}, sigma_w2={sigma_w2})",
                         {"N": 4, "sigma_w2": 1.0}),
    "MatrixGaussianLaw": ("mf.MatrixGaussianLaw(d={d}, std={std})", {"d": 2, "std": 1.0}),
    "PerceptronGaussianLaw": ("mf.PerceptronGaussianLaw(d={d}, m={m})", {"d": 2, "m": 3}),
    "TwoLayerGaussianLaw": ("mf.TwoLayerGaussianLaw(d={d}, sigma_u={sigma_u})",
                            {"d": 2, "sigma_u": 1.0}),
    "TwoLayerNonCentredLaw": ("mf.TwoLayerNonCentredLaw(d={d}, sigma_xi={sigma_xi})",
                              {"d": 2, "sigma_xi": 1.0}),
    "AttentionGaussianLaw": ("mf.AttentionGaussianLaw(dim={dim}, head_dim={head_dim})",
                             {"dim": 2, "head_dim": 2}),
    "AttentionHead": ("mf.AttentionHead(tokens={tokens})", {"tokens": 2}),
    "TwoLayerBlock": ("mf.TwoLayerBlock('tanh', inner_scale={inner_scale})",
                      {"inner_scale": 1.0}),
    "ScanLoop": ("mf.ScanLoop(unroll={unroll})", {"unroll": 1}),
    "ResNet": (_SETUP + "mf.ResNet.sample(block, law, L={L}, M={M}, scaling=0.1, key=key)",
               {"L": 4, "M": 3}),
    "gauss_hermite_particles": ("mf.gauss_hermite_particles(mf.TwoLayerGaussianLaw(2), "
                                "{order})", {"order": 3}),
    "monte_carlo_particles": ("mf.monte_carlo_particles(mf.TwoLayerGaussianLaw(2), {count}, "
                              "key=jax.random.key(0))", {"count": 16}),
    "mean_ode_sgd": ("mf.mean_ode_sgd({learning_rate}, L={L}, M={M})",
                     {"learning_rate": 0.1, "L": 4, "M": 2}),
    "MeanODE": (_SETUP + "P = mf.gauss_hermite_particles(law, 3)\n"
                "mf.MeanODE(block, P, xs, xs, learning_rate={learning_rate})",
                {"learning_rate": 0.1}),
    # (the learning rate is optax's: the optimizer is the user's)
    "train": (_SETUP + "import optax\nnet = mf.ResNet.sample(block, law, L=2, M=2, scaling=0.1, "
              "key=key)\nmf.train(net, xs, xs, optimizer=optax.sgd(0.1), steps={steps})",
              {"steps": 2}),
    "optimal_scaling": ("mf.optimal_scaling(L={L}, K0={K0}, sigma_w2={sigma_w2}, sigma_b2=0.0, "
                        "order={order}, grid={grid})",
                        {"L": 4, "K0": 1.0, "sigma_w2": 1.0, "order": 64, "grid": 16}),
    "response": ("mf.response(0.5, L={L}, K0={K0}, sigma_w2={sigma_w2}, sigma_b2=0.0, "
                 "order={order})", {"L": 4, "K0": 1.0, "sigma_w2": 1.0, "order": 64}),
    "simulate_response": ("mf.simulate_response(0.5, L={L}, K0=1.0, sigma_w2=1.0, sigma_b2=0.0, "
                          "width={width}, d_out={d_out}, inits={inits}, key=jax.random.key(0))",
                          {"L": 2, "width": 8, "d_out": 4, "inits": 4}),
    "run_study": ("mf.run_study('variance', out='{{case}}/out', nets={nets})", {"nets": 2}),
    "load_results": ("mf.load_results({path!r})", {"path": "{case}/afile"}),
    "summarize": ("mf.summarize([1.0, 2.0], threshold={threshold})", {"threshold": 1e6}),
    "Transformer": ("from meanfield.models.transformer import Transformer\n"
                    "Transformer(vocab={vocab}, context={context}, width={width}, depth={depth}, "
                    "heads={heads}).init(jax.random.key(0))",
                    {"vocab": 16, "context": 4, "width": 8, "depth": 1, "heads": 1}),
    "load_text": ("from meanfield.io.text import load_text\nload_text({path!r}, "
                  "max_bytes={max_bytes})", {"path": "{case}/text.txt", "max_bytes": 4096}),
    "batches": ("from meanfield.io.text import batches\n"
                "batches(jax.random.key(0), jnp.arange(64, dtype=jnp.uint8), batch={batch}, "
                "context={context})", {"batch": 2, "context": 4}),
    "from_table": ("from meanfield.parametrisation import from_table, PARAMETRISATIONS\n"
                   "t = PARAMETRISATIONS['mup'].table(); t['alpha'] = {alpha}\nfrom_table(t)",
                   {"alpha": 0.5}),
}  # fmt: skip

# (constructor, argument, value) a user may mean: run or refused
# (a limit of 2^63 bytes reads the text there is)
MEANT = {("train", "steps", 0), ("summarize", "threshold", math.inf),
         ("load_text", "max_bytes", 2**63)}  # fmt: skip
# what an example reads, written before the row runs (not by the row: the corpus sees
# every file the row's own process writes)
SETUPS = {
    # a text without repeated 64-byte windows, so that a valid call runs
    "load_text": lambda case: (case / "text.txt").write_text(
        " ".join(f"w{(i * 7919) % 10007}" for i in range(600))
    ),
}

NOT_CONSTRUCTED = {
    # abstract bases: subclassed by the user, never constructed
    "AbstractDepthLoop", "AbstractGaussianLaw", "AbstractLaw", "AbstractLayerBlock",
    "AbstractScaling", "AbstractUnitBlock",
    # records the library returns (built by its own functions)
    "Adjoint", "CoupledErrors", "Gradients", "LimitOnGrid", "MeanODESolution", "Particles",
    "StudyResults", "TrainResult", "TwoLayerParams",
    # no size or number to make absurd: a callable or a name (tests/test_bad_input.py)
    "CriticalScaling", "MeanODEScaling", "FunctionBlock", "FunctionScaling", "SamplerLaw",
    "DenseBlock", "MatrixBlock", "PerceptronBlock", "NeuralODE", "NeuralSDE", "AutoLoop",
    "FusedLoop",
    # functions of arrays and networks: NaN and inf refused, tests/test_api_finite.py
    "coupled_errors", "euler_errors", "depth_ratios", "loss_and_gradients", "limit_on_grid",
    "matrix_resnet", "perceptron_resnet", "particle_step", "squared_loss", "solve_mean_ode",
    "gd_loop", "shard_seeds", "fit_loglog", "fit_rate_sum", "critical_beta",
    "enable_compilation_cache", "mean_ode_study",
}  # fmt: skip


def _absurd(value) -> list:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [0, 2.5, 2**63]
    if isinstance(value, float):
        return [math.nan, math.inf, -1.0]
    if isinstance(value, str):
        return ["{case}", "{case}/missing", 123]
    return []


def api_rows() -> list[Row]:
    out = []
    for name, (code, args) in EXAMPLES.items():
        covers = (f"api {name}",)
        for arg, value in args.items():
            for bad in _absurd(value):
                text = bad if isinstance(bad, str) and bad.startswith("'") else bad
                if isinstance(bad, float) and not math.isfinite(bad):
                    text = f"float('{bad}')"
                call = code.format(**{**args, arg: text})
                # a negative number may be meant (a growing scaling, a negative exponent);
                # so may no steps of training and an infinite threshold (none)
                meant = (isinstance(bad, float) and bad == -1.0) or (name, arg, bad) in MEANT
                expect = REFUSED_OR_RAN if meant else REFUSED
                out.append(Row(f"api: {name} {arg}={bad!r}", "api", _api_call(call),
                               SETUPS.get(name), expect, names=arg, covers=covers))  # fmt: skip
    return out


def _api_call(code: str) -> str:
    """`_api` that also takes a TypeError as a refusal (a size given as text)."""
    return _api(code).replace("except ValueError as err:", "except (ValueError, TypeError) as err:")


# -- what the package declares and no row covers ----------------------------------------


def declared() -> set[str]:
    """Everything the corpus must cover, named as rows' `covers` name it."""
    import inspect

    import meanfield as mf

    out = set()
    for command, p in commands():
        for flag, action in options(p):
            if not (flag == "--allow-known-bad-jax" and command == "info"):
                out.add(f"option {command} {flag}")
            if command.startswith("study ") and entry_kind(flag, action) is not None:
                out.add(f"entry {command} {flag}")
    out |= {f"variable {v}" for v in variables_read()}
    out |= {f"plot {n}" for n in plotted_studies()}
    kinds = (inspect.isclass, inspect.isfunction)
    public = {n for n in dir(mf) if not n.startswith("_") and any(k(getattr(mf, n)) for k in kinds)}
    out |= {f"api {n}" for n in public - NOT_CONSTRUCTED}
    out |= {f"api {n}" for n in ("Transformer", "load_text", "batches", "from_table")}
    return out


def coverage_gaps(rows) -> list[str]:
    covered = {c for r in rows for c in r.covers}
    return sorted(declared() - covered)
