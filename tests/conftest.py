"""Shared fixtures: one mock run of the program per stack per session (evaluation
is deterministic, so tests that only read the recorded resources can share it)."""

from __future__ import annotations

import pytest

from tests.harness import ProgramRun, run_program


@pytest.fixture(scope="session")
def prod() -> ProgramRun:
    return run_program("prod")
