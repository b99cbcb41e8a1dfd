"""One mock run per stack variant per session (evaluation is deterministic, and the
checks only read what the run recorded)."""

from __future__ import annotations

import pytest

from review.variants import VARIANTS
from tests.harness import ProgramRun, run_program


@pytest.fixture(scope="session")
def variant_runs(prod: ProgramRun) -> dict[str, ProgramRun]:
    return {
        name: prod if not overrides else run_program("prod", config_overrides=overrides)
        for name, overrides in VARIANTS.items()
    }


@pytest.fixture(scope="session")
def one_region(variant_runs: dict[str, ProgramRun]) -> ProgramRun:
    return variant_runs["one-region"]
