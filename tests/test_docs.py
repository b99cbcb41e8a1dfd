"""The documents stay true: the config reference is generated from the keys the
program reads, the README links the documents and names the check command, and the
README's layout table and the architecture's code map name every folder of the tree
(and nothing the tree lacks)."""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path

import pytest

from stack_config.loading import PROJECT_ROOT
from stack_config.reference import FAILOVER_GOAL_S, render, render_failover


def test_architecture_config_reference_matches_the_keys_the_program_reads():
    doc = (PROJECT_ROOT / "docs" / "architecture.md").read_text()
    assert render() in doc, "regenerate with: python -m stack_config.reference"


def test_architecture_failover_times_are_the_ones_the_defaults_give():
    doc = (PROJECT_ROOT / "docs" / "architecture.md").read_text()
    assert render_failover() in doc, "regenerate with: python -m stack_config.reference"


def test_on_the_defaults_the_documented_failover_meets_the_goal_and_the_readme_says_so():
    from components import settings
    from components.probe_rounds import failover_times

    times = failover_times(settings.PROBE_INTERVAL_S.default, settings.HEALTH_FAILURE_THRESHOLD.default,
                           settings.HEALTH_RECOVERY_THRESHOLD.default, settings.PROBE_DEADLINE_S.default)
    assert times.dead <= FAILOVER_GOAL_S
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert f"at most {times.dead} s" in readme and f"documented {times.dead} s" in readme
    assert f"within {times.recovery} s of" in readme


def test_ci_runs_the_readme_check_command():
    readme = (PROJECT_ROOT / "README.md").read_text()
    ci = (PROJECT_ROOT / ".ci" / "run").read_text()
    assert "scripts/check" in readme and "exec scripts/check" in ci


# Folders that are no part of the tree a newcomer reads: tools' caches, builds, dependencies.
NOT_THE_TREE = frozenset({"__pycache__", "node_modules", "venv"})
SOURCE_SUFFIXES = (".py", ".js", ".mjs", ".ts", ".sh")
# A backticked path in a table: repository-relative (with a slash) or a file name with a suffix.
PATH_TOKEN = re.compile(r"`([A-Za-z0-9_.][A-Za-z0-9_./-]*/|[A-Za-z0-9_./-]+\.(?:py|js|mjs|json|toml|txt|yaml|md|sh))`")


def folders_to_document(root: Path) -> set[str]:
    """Every top-level folder, and every folder below one that holds source files (``tests/``
    mirrors the tree, so its folders are not listed one by one)."""
    found = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in NOT_THE_TREE]
        relative = Path(folder).relative_to(root)
        if relative.parts and relative.parts[0] == "tests":
            dirs[:] = []
        if len(relative.parts) == 1 or (relative.parts and any(f.endswith(SOURCE_SUFFIXES) for f in files)):
            found.add(f"{relative.as_posix()}/")
    return found


def table_rows(document: str, heading: str) -> list[str]:
    """The rows of the first table under ``heading`` (a level-2 heading)."""
    section = document.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("|") and not line.startswith("|---")]


def listed_paths(rows: list[str]) -> list[tuple[str, list[str]]]:
    """(row, backticked paths in it) of every row."""
    return [(row, [m for m in PATH_TOKEN.findall(row) if "<" not in m]) for row in rows]


def in_the_tree(base: Path, name: str) -> list[Path]:
    """Files called ``name`` below ``base``, outside hidden and generated folders (``.build/``,
    ``.local/``, virtualenvs and node_modules exist only after a run, not in a fresh clone)."""
    found = []
    for folder, dirs, files in os.walk(base):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in NOT_THE_TREE]  # never walked into
        found += [Path(folder) / f for f in files + dirs if fnmatch.fnmatchcase(f, name)]
    return found


def missing_from_the_tree(rows: list[str], root: Path) -> list[str]:
    """Paths a row names that the tree lacks: a path with a slash from the root (or from a
    folder the row names, for ``edge_runtimes/`` in ``devkit/``'s row), a bare file name
    in a folder the row names (or at the root)."""
    missing = []
    for row, paths in listed_paths(rows):
        bases = [root] + [root / p.rstrip("/") for p in paths if (root / p).is_dir()]
        bases += [(root / p).parent for p in paths if "/" in p and (root / p).is_file()]
        for path in paths:
            if "/" in path.rstrip("/"):
                found = (root / path).exists() or any((base / path).exists() for base in bases[1:])
            else:
                found = any((base / path).exists() or any(in_the_tree(base, path)) for base in bases)
            if not found:
                missing.append(f"{path} (row: {row[:80]})")
    return missing


def unnamed_folders(rows: list[str], root: Path) -> list[str]:
    """Folders of the tree that no row names: as the folder, or in a path below it (from the
    root, or from a folder its row names: ``edge_runtimes/`` in ``devkit/``'s row)."""
    named = set()
    for _, paths in listed_paths(rows):
        row_folders = [p for p in paths if p.endswith("/") and "/" in p]
        named |= {p for p in paths if "/" in p} | {f"{f}{p}" for f in row_folders for p in paths}
    return sorted(f for f in folders_to_document(root) if not any(n.startswith(f) for n in named))


LAYOUT_DOCUMENTS = {"README.md": "Layout", "docs/architecture.md": "Code map"}


@pytest.mark.parametrize(("document", "heading"), sorted(LAYOUT_DOCUMENTS.items()))
def test_the_layout_tables_name_every_folder_of_the_tree(document: str, heading: str) -> None:
    rows = table_rows((PROJECT_ROOT / document).read_text(encoding="utf-8"), heading)
    unnamed = unnamed_folders(rows, PROJECT_ROOT)
    assert not unnamed, f"{document}'s {heading!r} table names none of: {', '.join(unnamed)}"


@pytest.mark.parametrize(("document", "heading"), sorted(LAYOUT_DOCUMENTS.items()))
def test_the_layout_tables_name_nothing_the_tree_lacks(document: str, heading: str) -> None:
    rows = table_rows((PROJECT_ROOT / document).read_text(encoding="utf-8"), heading)
    assert missing_from_the_tree(rows, PROJECT_ROOT) == []


def test_a_folder_the_layout_table_leaves_out_is_found(tmp_path: Path) -> None:
    # Given a tree with a module folder that the table does not name
    for path in ("components/origin.py", "local/aws/moto_server.py", "local/oauth/issuer.py", "docs/a.md"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("", encoding="utf-8")
    rows = table_rows("# x\n## Layout\n| Path | What |\n|---|---|\n| `components/` | `origin.py` |\n"
                      "| `local/aws/` | `moto_server.py`, `gone.py` |\n| `local/` | the rest |\n", "Layout")
    # Then the folders it lacks and the file it names that the tree lacks are both found
    assert unnamed_folders(rows, tmp_path) == ["docs/", "local/oauth/"]
    assert [m.split(" ")[0] for m in missing_from_the_tree(rows, tmp_path)] == ["gone.py"]


def fenced_block(document: str, heading: str, language: str) -> str:
    """The first ``language`` fenced block under ``heading`` (a ``## `` heading) of a document."""
    section = document.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return section.split(f"```{language}\n", 1)[1].split("```", 1)[0]


def test_the_readmes_example_stack_is_a_whole_stack_file_the_checks_and_the_program_accept(tmp_path: Path) -> None:
    from stack_config.loading import load_from_stack_file
    from tests.harness import run_program

    block = fenced_block((PROJECT_ROOT / "README.md").read_text(), "Deploy your own MCP server", "yaml")
    # Saved as it stands; its source folder found whether read beside the stack file or in the project.
    (tmp_path / "examples").symlink_to(PROJECT_ROOT / "examples")
    stack_file = tmp_path / "Pulumi.readme.yaml"
    stack_file.write_text(block)
    config = load_from_stack_file(stack_file)  # ConfigError naming every missing or bad key
    assert (config.server.source, config.mcp_path, config.server.path) == ("examples/fastmcp", "/mcp", "/mcp")
    assert config.auth.issuer and config.auth.audience and config.auth.jwks_url
    run = run_program("readme", stack_file=stack_file)
    assert run.outputs["topology"]["mcpPath"] == "/mcp"


def test_a_stack_without_the_auth_keys_is_refused_naming_each(tmp_path: Path) -> None:
    from stack_config.checks import ConfigError
    from stack_config.loading import load_from_stack_file

    block = fenced_block((PROJECT_ROOT / "README.md").read_text(), "Deploy your own MCP server", "yaml")
    (tmp_path / "examples").symlink_to(PROJECT_ROOT / "examples")
    stack_file = tmp_path / "Pulumi.noauth.yaml"
    stack_file.write_text("\n".join(line for line in block.splitlines() if "mcp-edge:auth" not in line) + "\n")
    with pytest.raises(ConfigError) as raised:
        load_from_stack_file(stack_file)
    for key in ("authIssuer", "authAudience", "authJwksUrl"):
        assert f"mcp-edge:{key} is required" in str(raised.value)
