"""The Pulumi mock harness for tests: see ``devkit/mock_program.py``."""

from devkit.mock_program import (
    ACCOUNT_ID,
    ProgramRun,
    Resource,
    check_output,
    computed_attributes,
    ensure_event_loop,
    run_program,
)

__all__ = ["ACCOUNT_ID", "ProgramRun", "Resource", "check_output", "computed_attributes", "ensure_event_loop", "run_program"]
