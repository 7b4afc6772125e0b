"""The house flows one way (issue 48): every import inside the package, lazy ones in
functions included, points to a module of the same layer or of a layer before it, in the
order data flows (`LAYERS`); within a layer, modules import each other without a cycle.
The walker is checked on a hand-made package that breaks each rule."""

import ast
import pathlib
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# the layers, first to last; a module belongs to the first prefix that names it
LAYERS = [
    (
        "base",
        [
            "meanfield._validation",
            "meanfield._mapping",
            "meanfield._eager",
            "meanfield._numpy_ops",
            "meanfield._version",
            "meanfield.special",
            "meanfield.solvers",
        ],
    ),
    ("runtime", ["meanfield.runtime"]),
    ("stats", ["meanfield.stats"]),
    ("io", ["meanfield.io"]),
    ("blocks", ["meanfield.blocks"]),
    ("laws", ["meanfield.laws"]),
    ("scaling", ["meanfield.scaling", "meanfield.parametrisation"]),
    ("engine", ["meanfield.engine"]),
    ("models", ["meanfield.models"]),
    ("training", ["meanfield.training"]),
    ("limits", ["meanfield.limits"]),
    ("coupling", ["meanfield.coupling"]),
    ("diagnostics", ["meanfield.diagnostics"]),
    ("theory", ["meanfield.theory"]),
    ("harness", ["meanfield.harness"]),
    ("studies", ["meanfield.studies"]),
    ("cli", ["meanfield.canary", "meanfield.cli", "meanfield.__main__"]),
]
FRONT = "meanfield"  # the top-level front re-exports from every layer; nothing imports it


def modules(package: pathlib.Path, name: str) -> dict[str, pathlib.Path]:
    out = {}
    for path in package.rglob("*.py"):
        parts = (name,) + path.relative_to(package).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(mods: dict[str, pathlib.Path]) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (anywhere in its source)."""
    edges = {}
    for mod, path in mods.items():
        pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg[: len(pkg) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                # `from pkg import mod` imports the module; `from pkg import name` the pkg
                targets = [
                    f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target
                    for a in node.names
                ]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != mod:
                    found.add(t)
        edges[mod] = found
    return edges


def layer_of(mod: str, layers) -> int | None:
    for i, (_name, prefixes) in enumerate(layers):
        if any(mod == p or mod.startswith(p + ".") for p in prefixes):
            return i
    return None


def violations(mods, layers, front) -> list[str]:
    edges = imports(mods)
    bad = []
    for mod in sorted(mods):
        if mod == front:
            continue
        here = layer_of(mod, layers)
        if here is None:
            bad.append(f"{mod}: in no layer")
            continue
        for t in sorted(edges[mod]):
            if t == front:
                bad.append(f"{mod} imports the top-level front")
                continue
            there = layer_of(t, layers)
            if there is not None and there > here:
                bad.append(f"{mod} ({layers[here][0]}) imports {t} ({layers[there][0]})")
    # no cycle among modules (a package's front counts as importing its modules)
    state: dict[str, int] = {}

    def visit(m, stack):
        state[m] = 1
        for t in sorted(edges[m]):
            if t == front or t not in edges:
                continue
            if state.get(t) == 1 and not (m.startswith(t + ".") or t.startswith(m + ".")):
                bad.append("cycle: " + " -> ".join(stack[stack.index(t) :] + [t]))
            elif t not in state:
                visit(t, stack + [t])
        state[m] = 2

    for m in sorted(edges):
        if m != front and m not in state:
            visit(m, [m])
    return bad


def package_modules():
    # meanfield/solvers is a link to the repository's solvers/ (installed as meanfield.solvers)
    return modules(ROOT / "meanfield", "meanfield") | modules(ROOT / "solvers", "meanfield.solvers")


def test_the_package_flows_one_way():
    mods = package_modules()
    assert len(mods) > 80 and "meanfield.models.resnet" in mods
    assert violations(mods, LAYERS, FRONT) == []


def test_every_layer_exists_and_is_a_folder_with_a_front():
    mods = package_modules()
    for name, prefixes in LAYERS:
        assert any(p in mods for p in prefixes), name
    for folder in (
        "blocks",
        "laws",
        "engine",
        "models",
        "training",
        "limits",
        "coupling",
        "diagnostics",
        "theory",
        "stats",
        "io",
        "runtime",
        "harness",
        "studies",
    ):
        assert (ROOT / "meanfield" / folder / "__init__.py").is_file(), folder


def test_no_file_above_600_lines_without_a_reason_at_its_top():
    long = []
    for path in (ROOT / "meanfield").rglob("*.py"):
        text = path.read_text()
        if text.count("\n") > 600 and "Why this file is long:" not in text[:4000]:
            long.append(f"{path.relative_to(ROOT)}: {text.count(chr(10))} lines")
    assert long == []


@pytest.fixture
def toy(tmp_path):
    def make(files: dict[str, str]):
        for rel, text in files.items():
            p = tmp_path / "toy" / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(textwrap.dedent(text))
        return modules(tmp_path / "toy", "toy")

    return make


TOY_LAYERS = [("low", ["toy.low"]), ("high", ["toy.high"])]


def test_the_walker_finds_a_backward_import_even_a_lazy_one(toy):
    mods = toy(
        {
            "__init__.py": "from .high import f\n",
            "low/__init__.py": "",
            "low/a.py": "def g():\n    from ..high.b import f\n    return f\n",
            "high/__init__.py": "",
            "high/b.py": "from ..low.a import g\n\ndef f():\n    return g\n",
        }
    )
    bad = violations(mods, TOY_LAYERS, "toy")
    assert bad[0] == "toy.low.a (low) imports toy.high.b (high)"
    assert bad[1:] == ["cycle: toy.high.b -> toy.low.a -> toy.high.b"]


def test_the_walker_finds_the_front_imported_a_cycle_and_a_stray_module(toy):
    mods = toy(
        {
            "__init__.py": "",
            "low/__init__.py": "",
            "low/a.py": "import toy.low.b\nfrom toy import version\n",
            "low/b.py": "from . import a\n",
            "stray.py": "",
        }
    )
    bad = violations(mods, TOY_LAYERS, "toy")
    assert "toy.low.a imports the top-level front" in bad
    assert "cycle: toy.low.a -> toy.low.b -> toy.low.a" in bad
    assert "toy.stray: in no layer" in bad


def test_the_walker_accepts_a_clean_package(toy):
    mods = toy(
        {
            "__init__.py": "from .high.b import f\n",
            "low/__init__.py": "from .a import g as g\n",
            "low/a.py": "def g():\n    return 1\n",
            "high/__init__.py": "",
            "high/b.py": "from ..low import g\nimport toy.low.a\n",
        }
    )
    assert violations(mods, TOY_LAYERS, "toy") == []


def test_a_front_never_hides_a_submodule_behind_a_name():
    """`meanfield.theory.response` is the module (its function `response` is re-exported by
    the top-level front only): `import meanfield.X.Y as m` reaches the module everywhere."""
    import importlib
    import pkgutil

    import meanfield

    hidden = []
    for info in pkgutil.walk_packages(meanfield.__path__, "meanfield."):
        if info.name.endswith("__main__"):
            continue
        parent, leaf = info.name.rsplit(".", 1)
        module = importlib.import_module(info.name)
        if getattr(importlib.import_module(parent), leaf, None) is not module:
            hidden.append(info.name)
    assert hidden == []


def test_every_package_opens_with_a_sentence_on_what_it_holds():
    """Each folder's `__init__.py` starts with its docstring (no pragma before it), whose
    first line says what the folder holds."""
    inits = sorted((ROOT / "meanfield").rglob("__init__.py")) + [ROOT / "solvers/__init__.py"]
    bad = []
    for path in inits:
        text = path.read_text()
        doc = ast.get_docstring(ast.parse(text)) or ""
        if not text.startswith('"""') or len(doc.split("\n")[0].split()) < 4:
            bad.append(str(path.relative_to(ROOT)))
    assert bad == []
