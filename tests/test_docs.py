"""The documents stay true: the config reference is generated from the keys the
program reads, and the README links the documents and names the check command."""

from __future__ import annotations

from stack_config.loading import PROJECT_ROOT
from stack_config.reference import render


def test_architecture_config_reference_matches_the_keys_the_program_reads():
    doc = (PROJECT_ROOT / "docs" / "architecture.md").read_text()
    assert render() in doc, "regenerate with: python -m stack_config.reference"


def test_ci_runs_the_readme_check_command():
    readme = (PROJECT_ROOT / "README.md").read_text()
    ci = (PROJECT_ROOT / ".ci" / "run").read_text()
    assert "scripts/check" in readme and "exec scripts/check" in ci
