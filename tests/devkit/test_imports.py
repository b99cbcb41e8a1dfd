"""Product code and development code stay apart: ``components/``, ``functions/`` and
``edge/`` never import the development package or the development trees (``tests``,
``bench``, ``local``, ``review``), neither ``bench/`` nor ``devkit/`` imports
``tests``, and ``devkit/`` never imports ``local/`` (the local topology builds on the
development package, never the other way round). Every import statement is read from the source (relative imports resolved
against the file's package), plus ``importlib.import_module`` / ``__import__`` calls
with a literal name, so a lazy import inside a function counts too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from stack_config.loading import PROJECT_ROOT

DEVELOPMENT = frozenset({"devkit", "tests", "bench", "local", "review"})
PRODUCT_TREES = ("components", "functions", "edge")


def module_of(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(source: str, module: str, is_package: bool = False) -> set[str]:
    """Every module name the source imports, absolute (relative ones resolved from ``module``)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            if name:
                found.add(name)
            found.update(f"{name}.{alias.name}" if name else alias.name for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id in {"__import__", "import_module"})
            )
        ):
            found.add(node.args[0].value)
    return found


def forbidden_imports(trees: tuple[str, ...], forbidden: frozenset[str], root: Path = PROJECT_ROOT) -> list[str]:
    """``file: module`` for every import, under ``trees``, of a top-level package in ``forbidden``."""
    problems = []
    for tree in trees:
        for path in sorted((root / tree).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            module = module_of(path, root)
            imports = imported_modules(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")
            problems += [
                f"{path.relative_to(root)}: {name}" for name in sorted(imports) if name.split(".")[0] in forbidden
            ]
    return problems


def test_product_code_never_imports_development_code() -> None:
    assert forbidden_imports(PRODUCT_TREES, DEVELOPMENT) == []


def test_benchmarks_and_the_development_package_never_import_tests() -> None:
    assert forbidden_imports(("bench", "devkit"), frozenset({"tests"})) == []


def test_the_development_package_never_imports_the_local_topology() -> None:
    assert forbidden_imports(("devkit",), frozenset({"local"})) == []


@pytest.mark.parametrize(
    "source",
    [
        "import devkit.mock_program\n",
        "from tests.harness import run_program\n",
        "def f():\n    from local.jwks import JwksServer\n",
        "import importlib\nimportlib.import_module('bench.edge_bench')\n",
        "__import__('review.plan')\n",
        "from ... import devkit\n",
    ],
)
def test_the_walk_finds_a_development_import_however_written(tmp_path: Path, source: str) -> None:
    # Given a product file under components/sub/ that imports development code
    (tmp_path / "components" / "sub").mkdir(parents=True)
    (tmp_path / "components" / "sub" / "mod.py").write_text(source, encoding="utf-8")
    # When the walk reads it, then the import is reported
    assert forbidden_imports(("components",), DEVELOPMENT, root=tmp_path) != []


def test_relative_imports_resolve_inside_their_package() -> None:
    assert imported_modules("from .contract import X\n", "functions.probe.event") >= {"functions.probe.contract"}
    assert imported_modules("from . import wire\n", "functions.probe", is_package=True) >= {"functions.probe.wire"}
    assert imported_modules("from .. import contract\n", "functions.probe.event") >= {"functions.contract"}
