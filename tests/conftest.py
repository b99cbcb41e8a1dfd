"""Shared fixtures: one mock run of the program per stack per session (evaluation
is deterministic, so tests that only read the recorded resources can share it)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness import ProgramRun, ensure_event_loop, run_program


@pytest.fixture(scope="session")
def prod() -> ProgramRun:
    return run_program("prod")


@pytest.fixture(autouse=True)
def an_event_loop() -> None:
    """Every test starts with a current event loop on its thread: a ``pulumi.Output`` made
    outside the mock runtime needs one, and a test run before it in the same pytest-xdist
    worker (which one changes from run to run) may have left none (asyncio.run sets it to
    None on exit)."""
    ensure_event_loop()


E2E_SCOPE = "tests/e2e/"
# Modules that start topologies of their own (own_topology) run in the end-to-end unit too: two
# topologies at once on 2 cores slow each other, and own_topology stops the session's first.
E2E_SCOPES = (E2E_SCOPE, "tests/byo/")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under pytest-xdist with ``--dist loadscope`` (scripts/check runs ``-n 2 --dist loadscope``):
    every test module is a unit sent whole to one worker, as loadscope does, except that the
    end-to-end tests (``tests/e2e/`` and ``tests/byo/``) are one unit, run in order on one worker
    and sent out first. They share one local topology (tests/e2e/conftest.py), some stop parts
    of it or start their own, and together they take the longest (mostly waiting on real timeouts and probe intervals); the other modules are spread
    over both workers beside them."""
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class EndToEndFirst(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return E2E_SCOPE if nodeid.startswith(E2E_SCOPES) else super()._split_scope(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            if E2E_SCOPE in self.workqueue:
                self.workqueue.move_to_end(E2E_SCOPE, last=False)
            super()._assign_work_unit(node)

    return EndToEndFirst(config, log)
