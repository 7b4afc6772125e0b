"""Privacy is honest (issue 76): inside the package, a name with a leading underscore is
used only in the file that defines it. No file imports another module's `_name`, none
reaches `module._name` through a module it imported, and a module imported under another
name keeps its own name in the alias (`perceptron_limits`, not `shallow_limits` or `P`).
Tests may import private helpers to test them; the package may not. The checker is run
on a hand-made package that breaks each rule."""

import ast
import pathlib
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _module_names(package: pathlib.Path, name: str) -> set[str]:
    out = set()
    for path in package.rglob("*.py"):
        parts = (name,) + path.relative_to(package).with_suffix("").parts
        out.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _named(module: str, alias: str) -> bool:
    """An alias keeps the module's name, or its package's (`two_layer_phases` for
    `studies.two_layer_phases.study`)."""
    parts = module.split(".")
    return parts[-1] in alias or (len(parts) > 1 and parts[-2] in alias)


def violations(package: pathlib.Path, name: str = "meanfield") -> list[str]:
    """Every private import, private attribute of an imported module, and module alias
    that hides the module's name, in the package at `package` (named `name`)."""
    mods = _module_names(package, name)
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent)
        parts = (name,) + path.relative_to(package).with_suffix("").parts
        pkg = list(parts[:-1])  # the package a relative import starts from
        tree = ast.parse(path.read_text())
        aliases = set()  # names bound to one of the package's modules
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg[: len(pkg) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if source != name and not source.startswith(name + "."):
                    continue
                for a in node.names:
                    if _private(a.name):
                        found.append(f"{rel}:{node.lineno} imports {source}.{a.name}")
                    module = f"{source}.{a.name}"
                    if module in mods:
                        aliases.add(a.asname or a.name)
                        if a.asname and not _named(module, a.asname):
                            found.append(f"{rel}:{node.lineno} imports {module} as {a.asname}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in mods and a.asname:
                        aliases.add(a.asname)
                        if not _named(a.name, a.asname):
                            found.append(f"{rel}:{node.lineno} imports {a.name} as {a.asname}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and _private(node.attr)
            ):
                found.append(f"{rel}:{node.lineno} uses {node.value.id}.{node.attr}")
    return found


def test_no_file_of_the_package_uses_another_files_private_names():
    assert violations(ROOT / "meanfield") == []


def test_the_privacy_check_can_fail(tmp_path):
    pkg = tmp_path / "meanfield"
    (pkg / "stats").mkdir(parents=True)
    (pkg / "studies").mkdir()
    files = {
        "__init__.py": "",
        "stats/__init__.py": "",
        "stats/fits.py": "def _t975(n):\n    return 2.0\n\ndef t975(n):\n    return 2.0\n",
        "studies/__init__.py": "",
        "studies/good.py": """
            from ..stats import fits
            from ..stats import fits as fits_stats
            from ..stats.fits import t975

            def f():
                return fits.t975(3) + fits_stats.t975(3) + t975(3)
            """,
        "studies/bad.py": """
            import os
            from ..stats.fits import _t975
            from ..stats import fits as F
            import meanfield.stats.fits as s

            def f():
                os._exit(0)  # another library's private name: not this check's business
                return F._t975(3) + s.t975(3)
            """,
    }
    for rel, text in files.items():
        (pkg / rel).write_text(textwrap.dedent(text))
    found = violations(pkg)
    assert found == [
        "meanfield/studies/bad.py:3 imports meanfield.stats.fits._t975",
        "meanfield/studies/bad.py:4 imports meanfield.stats.fits as F",
        "meanfield/studies/bad.py:5 imports meanfield.stats.fits as s",
        "meanfield/studies/bad.py:9 uses F._t975",
    ]
