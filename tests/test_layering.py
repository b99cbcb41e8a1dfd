"""Imports run one way: down the product's layers, and from development code to product
code, never back.

Product code, lowest layer first (a layer imports only itself and the layers below it):

- ``functions``: the contract and the helpers every function package links
  (``functions/*.py``). Each function package (``functions/<package>/``) ships alone as a
  Lambda package, so it imports only itself (relative imports: the shared files are linked
  into it) and the distributions its ``requirements.txt`` pins; no other code imports a
  package's internals (the program packages it by path).
- ``edge``: the edge code and its renderers. ``edge/gate`` is rendered into the Lambda@Edge
  package beside the rendered router, so it imports only its siblings (relatively), the
  router module and ``edge/gate_requirements.txt``'s distributions.
- ``components``, then ``stack_config``, then the program (``__main__.py``).
- ``component_package``, the component package's entry point, serves the components: it
  imports ``components`` and below, and nothing imports it.

Development code (``devkit``, ``local``, ``review``, ``bench``, ``tests``, ``examples``)
may import product code; product code never imports it. Among development code: the
development package (``devkit``) is below the local topology (``local``) and the review
tools (``review``), which are below the benchmarks (``bench``); only tests import
``tests``. Each example server (``examples/<name>/``) stands alone: it imports nothing of
this repository's outside its own folder.

Every ``import``/``from ... import`` counts, function-level and ``TYPE_CHECKING`` ones
included (relative ones resolved against the file's package), plus
``importlib.import_module`` / ``__import__`` calls with a literal name."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from edge.gate_package import EDGE_GATE_REQUIREMENTS, GATE_PACKAGE
from edge.router import ROUTER_MODULE
from stack_config.loading import PROJECT_ROOT

PROGRAM = "__main__"
PRODUCT_LAYERS = ("functions", "edge", "components", "stack_config", PROGRAM)
EDGE_GATE = "edge/gate"
COMPONENT_PACKAGE = "component_package"
DEVELOPMENT = ("devkit", "local", "review", "bench", "tests", "examples")
SKIPPED_DIRS = frozenset({".venv", ".build", ".git", "node_modules", "__pycache__"})


@dataclass(frozen=True)
class Import:
    """One import of this repository's code: where it stands, what it names, whose it is."""

    path: str
    line: int
    source_unit: str
    target_unit: str
    name: str
    relative: bool

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.source_unit} -> {self.target_unit} ({self.name})"


def python_files(root: Path) -> Iterator[Path]:
    """Every Python file of the repository, links to files included (the function packages
    link the shared ones), virtualenvs, builds and node_modules left out."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(folder) / name


def module_of(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def unit_of(module: str, root: Path) -> str:
    """The layer or room a module belongs to: its top-level folder, or for the function
    packages, the edge gate and the examples, the folder one below it."""
    parts = module.split(".")
    if parts[0] in ("functions", "examples") and len(parts) > 1 and (root / parts[0] / parts[1]).is_dir():
        return f"{parts[0]}/{parts[1]}"
    if parts[:2] == ["edge", "gate"]:
        return EDGE_GATE
    return parts[0]


def allowed_units(unit: str, units: set[str]) -> set[str]:
    """What ``unit`` may import (of this repository's code)."""
    function_packages = {u for u in units if u.startswith("functions/")}
    examples = {u for u in units if u.startswith("examples")}
    if unit in function_packages or unit == EDGE_GATE or unit in examples:
        return {unit}
    if unit in PRODUCT_LAYERS:
        below = set(PRODUCT_LAYERS[: PRODUCT_LAYERS.index(unit) + 1])
        return below | ({EDGE_GATE} if "edge" in below else set())
    if unit == COMPONENT_PACKAGE:
        return {"functions", "edge", EDGE_GATE, "components", COMPONENT_PACKAGE}
    product = set(PRODUCT_LAYERS) | function_packages | {EDGE_GATE}
    development = {
        "devkit": {"devkit"},
        "local": {"devkit", "local"},
        "review": {"devkit", "review"},
        "bench": {"devkit", "local", "review", "bench"},
        "tests": set(DEVELOPMENT) | {COMPONENT_PACKAGE},
    }
    if unit in development:
        return product | development[unit] | (examples if unit != "devkit" else set())
    raise AssertionError(f"{unit!r} is in no layer: add it to tests/test_layering.py's rules")


def imports_in(source: str, module: str, is_package: bool) -> Iterator[tuple[int, str, bool]]:
    """(line, absolute module name, written relative) of every import in ``source``. For
    ``from a import b``, ``a.b`` is yielded too (``b`` may be a module)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, False
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            if name:
                yield node.lineno, name, bool(node.level)
            for alias in node.names:
                yield node.lineno, f"{name}.{alias.name}" if name else alias.name, bool(node.level)
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
            yield node.lineno, node.args[0].value, False


def top_level_names(root: Path) -> set[str]:
    """This repository's importable top-level names: folders holding Python code, root modules."""
    return {path.relative_to(root).parts[0].removesuffix(".py") for path in python_files(root)}


@cache
def file_imports(root: Path) -> tuple[tuple[Path, str, int, str, bool], ...]:
    """(file, its unit, line, absolute module name, written relative) of every import
    (read once per tree: parsing every file takes seconds)."""
    return tuple(
        (path, unit_of(module_of(path, root), root), line, name, relative)
        for path in python_files(root)
        for line, name, relative in imports_in(
            path.read_text(encoding="utf-8"), module_of(path, root), path.name == "__init__.py"
        )
    )


def upward_imports(root: Path = PROJECT_ROOT) -> list[Import]:
    """Every import of this repository's code that its importer's layer may not make."""
    ours = top_level_names(root)
    units = {unit_of(module_of(path, root), root) for path in python_files(root)}
    found: dict[tuple[str, int, str], Import] = {}
    for path, unit, line, name, relative in file_imports(root):
        if name.split(".")[0] not in ours and not relative:
            continue
        imp = Import(str(path.relative_to(root)), line, unit, unit_of(name, root), name, relative)
        shipped_alone = unit.startswith(("functions/", "examples")) or unit == EDGE_GATE
        # A package shipped alone names its own modules relatively: an absolute name is not in its archive.
        if imp.target_unit not in allowed_units(unit, units) or (shipped_alone and not relative):
            found.setdefault((imp.path, imp.line, imp.target_unit), imp)
    return list(found.values())


def requirement_names(requirements: Path) -> set[str]:
    names = set()
    for line in requirements.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line.split("#")[0])
        if match:
            names.add(canonical(match.group(1)))
    return names


def canonical(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


@cache
def distributions_of() -> Mapping[str, list[str]]:
    return importlib.metadata.packages_distributions()


def undeclared_imports(root: Path, requirements_of: Mapping[str, Path], own: Mapping[str, set[str]]) -> list[str]:
    """``file:line: unit -> name`` for every third-party import of a unit shipped alone whose
    distribution its requirements file does not pin (``own``: names its archive holds)."""
    ours = top_level_names(root)  # the layering test names those
    found = set()
    for path, unit, line, name, relative in file_imports(root):
        top = name.split(".")[0]
        if unit not in requirements_of or relative or top in sys.stdlib_module_names | ours | own.get(unit, set()):
            continue
        distributions = {canonical(d) for d in distributions_of().get(top, [])}
        if not distributions & requirement_names(requirements_of[unit]):
            found.add(f"{path.relative_to(root)}:{line}: {unit} -> {name} (distribution "
                      f"{sorted(distributions) or 'unknown'}, not in {requirements_of[unit].relative_to(root)})")
    return sorted(found)


def shipped_requirements(root: Path = PROJECT_ROOT) -> dict[str, Path]:
    found = {f"functions/{p.parent.name}": p for p in sorted((root / "functions").glob("*/requirements.txt"))}
    found[EDGE_GATE] = EDGE_GATE_REQUIREMENTS
    return found


def test_no_import_runs_back_up_the_layers() -> None:
    offending = upward_imports()
    assert not offending, "imports against the layering (file:line: from -> to):\n" + "\n".join(map(str, offending))


def test_every_function_package_and_the_edge_gate_import_only_what_their_requirements_pin() -> None:
    # The gate's archive holds the rendered router module and its own package beside it.
    # The probe signs its direct requests with botocore, which Lambda's Python runtime ships
    # (imported on first use only); it is the one library a function takes from the runtime.
    own = {EDGE_GATE: {ROUTER_MODULE, GATE_PACKAGE}, "functions/probe": {"botocore"}}
    assert undeclared_imports(PROJECT_ROOT, shipped_requirements(), own) == []


def test_every_unit_of_the_tree_has_a_rule() -> None:
    units = {unit_of(module_of(path, PROJECT_ROOT), PROJECT_ROOT) for path in python_files(PROJECT_ROOT)}
    for unit in units:
        allowed_units(unit, units)
    assert set(PRODUCT_LAYERS) | {EDGE_GATE, COMPONENT_PACKAGE} <= units


@pytest.mark.parametrize(
    ("path", "source", "arrow"),
    [
        ("functions/contract.py", "from edge.regions import REGIONS\n", "functions -> edge"),
        ("edge/router.py", "def f():\n    from components.naming import name\n", "edge -> components"),
        ("components/origin.py", "from stack_config.model import StackConfig\n", "components -> stack_config"),
        ("stack_config/model.py", "import __main__\n", "stack_config -> __main__"),
        ("components/sub/mod.py", "from ... import devkit\n", "components -> devkit"),
        ("components/origin.py", "from functions.probe.handler import handler\n", "components -> functions/probe"),
        ("edge/router.py", "import importlib\nimportlib.import_module('tests.harness')\n", "edge -> tests"),
        ("__main__.py", "__import__('review.plan')\n", "__main__ -> review"),
        ("component_package/__main__.py", "from stack_config import loading\n", "component_package -> stack_config"),
        ("functions/probe/handler.py", "from functions.contract import ProbeEnv\n", "functions/probe -> functions"),
        ("functions/probe/handler.py", "from ..results import store\n", "functions/probe -> functions/results"),
        ("edge/gate/handler.py", "from edge.router import render_router\n", "edge/gate -> edge"),
        ("edge/gate/handler.py", "from edge.gate import tokens\n", "edge/gate -> edge/gate"),
        ("devkit/shipped.py", "from local.plan import Plan\n", "devkit -> local"),
        ("bench/edge_bench.py", "from tests.harness import run_program\n", "bench -> tests"),
        ("examples/fastmcp/server.py", "from functions.contract import OriginEnv\n", "examples/fastmcp -> functions"),
    ],
)
def test_a_planted_upward_import_is_named_with_its_file_line_and_arrow(
    tmp_path: Path, path: str, source: str, arrow: str
) -> None:
    # Given a tree with one file per unit, and one of them importing against the layering
    for unit_file in ("functions/contract.py", "functions/probe/handler.py", "functions/results/store.py",
                      "edge/router.py", "edge/gate/handler.py", "components/origin.py", "stack_config/model.py",
                      "__main__.py", "component_package/__main__.py", "devkit/shipped.py", "local/plan.py",
                      "review/plan.py", "bench/edge_bench.py", "tests/harness.py", "examples/fastmcp/server.py"):
        (tmp_path / unit_file).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / unit_file).write_text("", encoding="utf-8")
    (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / path).write_text(source, encoding="utf-8")
    # When the layering is read, then that import is named by file, line and arrow
    found = [str(imp) for imp in upward_imports(tmp_path)]
    line = source.count("\n", 0, source.rindex("import")) + 1
    assert any(entry.startswith(f"{path}:{line}: {arrow} ") for entry in found), found


@pytest.mark.parametrize(
    ("path", "source"),
    [
        ("functions/probe/handler.py", "from .contract import ProbeEnv\nfrom . import wire\n"),
        ("edge/gate/handler.py", "from . import tokens\nfrom .constants import GATE_CONFIG\n"),
        ("components/origin.py", "import functions\nfrom functions.contract import OriginEnv\nfrom edge.gate import x\n"),
        ("stack_config/model.py", "from components import settings\nfrom edge import regions\n"),
        ("local/plan.py", "from devkit.shipped import x\nfrom functions.results.store import y\n"),
        ("tests/harness.py", "from component_package.__main__ import main\nfrom bench import edge_bench\n"),
    ],
)
def test_an_import_down_the_layers_or_within_a_package_is_not_named(tmp_path: Path, path: str, source: str) -> None:
    (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / path).write_text(source, encoding="utf-8")
    assert upward_imports(tmp_path) == []


def test_a_function_package_importing_a_distribution_it_does_not_pin_is_named(tmp_path: Path) -> None:
    # Given a function package that pins httpx and imports httpx, json and pytest
    package = tmp_path / "functions" / "probe"
    package.mkdir(parents=True)
    (package / "requirements.txt").write_text("httpx==0.28.1  # direct\n", encoding="utf-8")
    (package / "handler.py").write_text("import json\nimport httpx\n\ndef f():\n    import pytest\n", encoding="utf-8")
    # When its imports are checked against its requirements, then only pytest is named
    found = undeclared_imports(tmp_path, shipped_requirements(tmp_path), {})
    assert [entry.split(" (")[0] for entry in found] == ["functions/probe/handler.py:5: functions/probe -> pytest"]
