"""The SnapStart hooks, as the Web Adapter calls them: a POST to the path its environment
names, without the invocation header, answered by the app the start command serves
(``app.app_from_environment``) before anything reaches the server's own routes."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from examples.demo.demo_server.app import app_from_environment
from examples.demo.demo_server.snapstart import (
    AFTER_RESTORE_PATH_ENV,
    BEFORE_CHECKPOINT_PATH_ENV,
    SnapshotHooks,
    SnapStartApp,
    hook_paths,
)
from tests.examples.demo.conftest import ENVIRONMENT, INITIALIZE, Caller, RunningOrigin, settings_for

# The paths the program gives the adapter's variables under SnapStart.
BEFORE, AFTER = "/_lwa/snapstart/before-checkpoint", "/_lwa/snapstart/after-restore"
HOOKS = {BEFORE_CHECKPOINT_PATH_ENV: BEFORE, AFTER_RESTORE_PATH_ENV: AFTER}


@pytest.fixture(scope="module")
def snapstart_origin() -> Iterator[RunningOrigin]:
    app = app_from_environment({**ENVIRONMENT, **HOOKS})
    assert isinstance(app, SnapStartApp)
    with RunningOrigin(app, settings_for()) as running:
        yield running


def hooks_of(origin: RunningOrigin) -> SnapshotHooks:
    app = origin.server.config.app
    assert isinstance(app, SnapStartApp)
    return app.hooks


def hook(origin: RunningOrigin, path: str, **headers: str) -> httpx.Response:
    return httpx.post(origin.base_url + path, headers=headers, timeout=10)


def test_without_the_hook_variables_the_app_is_served_as_it_is():
    assert not isinstance(app_from_environment(ENVIRONMENT), SnapStartApp)
    assert hook_paths({BEFORE_CHECKPOINT_PATH_ENV: "relative", AFTER_RESTORE_PATH_ENV: " "}) == {}


def test_both_hooks_answer_2xx_and_are_counted(snapstart_origin: RunningOrigin):
    hooks = hooks_of(snapstart_origin)
    before = (hooks.checkpoints, hooks.restores)
    assert hook(snapstart_origin, BEFORE).json() == {"phase": "before-checkpoint"}
    assert hook(snapstart_origin, AFTER).json() == {"phase": "after-restore"}
    assert (hooks.checkpoints, hooks.restores) == (before[0] + 1, before[1] + 1)


def test_restored_environments_draw_different_random_numbers(snapstart_origin: RunningOrigin):
    # Given two environments restored from one snapshot (the same generator state)
    state = random.getstate()
    hook(snapstart_origin, AFTER)
    first = random.random()
    random.setstate(state)
    hook(snapstart_origin, AFTER)
    # Then the restore reseeded the generator from the OS
    assert random.random() != first


def test_hook_paths_are_not_hooks_for_invocations_or_other_methods(snapstart_origin: RunningOrigin):
    hooks = hooks_of(snapstart_origin)
    restores = hooks.restores
    invoked = hook(snapstart_origin, AFTER, **{"x-amzn-request-context": "{}"})
    fetched = httpx.get(snapstart_origin.base_url + AFTER, timeout=10)
    assert invoked.status_code == 404 and fetched.status_code == 404  # the server's own answer to an unknown path
    assert hooks.restores == restores


def test_a_failing_hook_fails_the_phase_with_a_non_2xx_answer(snapstart_origin: RunningOrigin,
                                                              monkeypatch: pytest.MonkeyPatch):
    def broken() -> Any:
        raise RuntimeError("no")

    monkeypatch.setattr(hooks_of(snapstart_origin), "reseed", broken)
    answer = hook(snapstart_origin, AFTER)
    assert answer.status_code == 500 and answer.json() == {"phase": "after_restore", "error": "RuntimeError"}


def test_the_server_is_served_behind_the_hooks(snapstart_origin: RunningOrigin, caller: Caller):
    assert httpx.get(snapstart_origin.base_url + "/healthz", timeout=10).status_code == 200
    assert snapstart_origin.post(INITIALIZE, headers=snapstart_origin.headers(caller)).status_code == 200
