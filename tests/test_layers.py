"""Imports only point down: shared (rollscope/) < store < collectors < queries < app, the simulator beside
queries (above collectors and store). Read from the source (AST), every import at any depth, so a function-level
import deep in a module counts as much as one at its top."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

# Each layer, with the layers it may import besides itself. The simulator drives the public path a user's job
# does (collectors, store), never the readers above it; the app's commands run the simulator.
MAY_IMPORT = {
    "shared": set(),
    "store": {"shared"},
    "collectors": {"shared", "store"},
    "simulator": {"shared", "store", "collectors"},
    "queries": {"shared", "store", "collectors"},
    "app": {"shared", "store", "collectors", "queries", "simulator"},
    # The package's face: `from rollscope import attach` re-exports the collectors' attach, lazily.
    "face": {"shared", "collectors"},
    # Benchmarks measure every layer, and share fixtures with the tests through a place both may import
    # (benchmarks/ or the simulator), never tests/.
    "benchmarks": {"shared", "store", "collectors", "simulator", "queries", "app"},
    "tests": {"shared", "store", "collectors", "simulator", "queries", "app", "face", "benchmarks"},
}
# Folders at the repository's top level and the installed package each one is (pyproject.toml's package-dir).
FOLDERS = {
    "rollscope": "rollscope",
    "store": "rollscope.store",
    "collectors": "rollscope.collectors",
    "simulator": "rollscope.simulator",
    "queries": "rollscope.queries",
    "app": "rollscope.app",
    "benchmarks": "benchmarks",
    "tests": "tests",
}
# Dotted module name (as imported) -> layer, longest prefix first.
PACKAGES = {
    "rollscope.integrations": "collectors",
    "rollscope.collectors": "collectors",
    "rollscope.store": "store",
    "rollscope.simulator": "simulator",
    "rollscope.queries": "queries",
    "rollscope.app": "app",
    "rollscope": "shared",
    "benchmarks": "benchmarks",
    "tests": "tests",
}


def module_name(path: Path) -> str:
    """The dotted name a file is imported as (collectors/integrations/ installs as rollscope.integrations)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    dotted = ".".join([FOLDERS[parts[0]], *parts[1:]]).removesuffix(".__init__")
    return dotted.replace("rollscope.collectors.integrations", "rollscope.integrations")


def layer_of_module(dotted: str) -> str | None:
    for prefix in sorted(PACKAGES, key=len, reverse=True):
        if dotted == prefix or dotted.startswith(prefix + "."):
            return PACKAGES[prefix]
    return None


def layer_of_file(path: Path) -> str:
    return "face" if path == ROOT / "rollscope" / "__init__.py" else layer_of_module(module_name(path))


def imported_modules(path: Path, text: str) -> list[tuple[int, str]]:
    """(line, dotted module) for every import in the file, relative ones resolved; `from rollscope import queries`
    names the subpackage, and importlib.import_module("...") with a literal counts too."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
        elif _is_import_module_call(node):
            found.append((node.lineno, node.args[0].value))
    return found


def _is_import_module_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute | ast.Name)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


def sources() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))


def upward_arrows(path: Path, text: str) -> list[str]:
    """One line per import that points up: the file and line, the module, and the two layers."""
    arrows = []
    here = layer_of_file(path)
    for line, dotted in imported_modules(path, text):
        there = layer_of_module(dotted)
        if there is not None and there != here and there not in MAY_IMPORT[here]:
            where = f"{path.relative_to(ROOT)}:{line}"
            arrows.append(f"{where} imports {dotted}: {here} may not import {there} (an arrow pointing up)")
    return arrows


def test_imports_only_point_down():
    arrows = [arrow for path in sources() for arrow in upward_arrows(path, path.read_text())]
    if arrows:
        pytest.fail("imports pointing up:\n" + "\n".join(arrows), pytrace=False)


def test_every_source_folder_has_a_layer():
    # A new top-level folder of code must be given its place here, or its imports go unchecked.
    folders = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert folders == set(FOLDERS)


@pytest.mark.parametrize(
    ("folder", "statement", "layers"),
    [
        ("simulator", "from rollscope.queries import funnel_stages", "simulator may not import queries"),
        ("store", "from rollscope.collectors import rows", "store may not import collectors"),
        ("store", "from ..collectors.rows import ROW_SCHEMA", "store may not import collectors"),
        ("rollscope", "from rollscope import store", "shared may not import store"),
        ("queries", "import rollscope.app.cli", "queries may not import app"),
        ("benchmarks", "from tests.conftest import ROOT", "benchmarks may not import tests"),
        ("collectors/integrations", "from ..queries import reader", "collectors may not import queries"),
        ("store", "importlib.import_module('rollscope.queries.reader')", "store may not import queries"),
    ],
)
def test_an_arrow_pointing_up_is_named_with_its_file_line_and_layers(folder, statement, layers):
    # The checker itself, on a module as if written where the arrow would be, inside a function.
    probe = ROOT / folder / "_layers_probe.py"
    arrows = upward_arrows(probe, f"def f():\n    import importlib\n    {statement.strip()}\n")
    assert len(arrows) == 1 and layers in arrows[0]
    assert arrows[0].startswith(f"{folder}/_layers_probe.py:3 imports ")
