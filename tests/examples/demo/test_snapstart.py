"""The SnapStart origin's hooks, in process: the module the SnapStart package ships
(taken from the zip the program uploads for the snapstart variant), its app under
uvicorn on loopback, and the adapter's hook calls as the adapter makes them (a POST
to the path its environment names, without the invocation header).

Given an origin initialised before a snapshot, when the issuer withdraws the key it
signed with and the environment is restored: without the after-restore hook the
cached key set looks fresh (its timestamp is monotonic) and the withdrawn key still
verifies; after it, the key set is fetched again and only current keys verify.
"""

from __future__ import annotations

import importlib.util
import random
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from devkit.jwks import JwksServer, public_jwk
from functions.contract import SNAPSTART_HOOK_PATHS
from tests.functions.mcp_server.conftest import (
    INITIALIZE,
    Issuer,
    RunningOrigin,
    function_environment,
    origin_function,
    running_run_sh,
)
from tests.harness import ProgramRun, run_program

PACKAGE = "mcp_server_snapstart"  # the shipped mcp_server/, imported under a name of its own
BEFORE, AFTER = SNAPSTART_HOOK_PATHS.values()


@pytest.fixture(scope="module")
def snapstart_run() -> ProgramRun:
    from review.variants import VARIANTS

    return run_program("prod", config_overrides=VARIANTS["snapstart"])


@pytest.fixture(scope="module")
def snapstart_env(snapstart_run: ProgramRun) -> dict[str, str]:
    return function_environment(snapstart_run)


@pytest.fixture(scope="module")
def shipped_snapstart(snapstart_run: ProgramRun, tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """``mcp_server/snapstart.py`` of the SnapStart zip, with the package it ships in."""
    root = tmp_path_factory.mktemp("snapstart") / PACKAGE
    with zipfile.ZipFile(Path(origin_function(snapstart_run)["code"].path)) as zf:
        for name in zf.namelist():
            if name.startswith("mcp_server/") and "/__pycache__/" not in name:
                target = root / name.removeprefix("mcp_server/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(name))
    spec = importlib.util.spec_from_file_location(PACKAGE, root / "__init__.py", submodule_search_locations=[str(root)])
    assert spec and spec.loader
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"{PACKAGE}.snapstart")


class Snapshot:
    """A SnapStart origin on loopback and its issuer, whose keys a test may withdraw."""

    def __init__(self, module: ModuleType, env: dict[str, str], issuer: Issuer):
        self.module = module
        self.issuer = issuer
        self.keys = JwksServer([public_jwk(issuer.rsa_key, "rsa-1", "RS256")])
        settings_module = importlib.import_module(f"{PACKAGE}.settings")
        self.settings = settings_module.Settings.from_env({**env, "AUTH_JWKS_URL": self.keys.url})
        self.app = module.create_snapstart_app(self.settings, env)
        self.origin = RunningOrigin(self.app, self.settings)

    def hook(self, path: str, **headers: str) -> httpx.Response:
        # What the adapter sends: a POST to the app's port, no invocation context.
        return httpx.post(self.origin.base_url + path, headers=headers, timeout=10)

    def initialize(self, token: str) -> httpx.Response:
        return self.origin.post(INITIALIZE, headers=self.origin.headers(token))

    def withdraw_and_rotate(self) -> rsa.RSAPrivateKey:
        new_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.keys.document["keys"] = [public_jwk(new_key, "rsa-2", "RS256")]
        return new_key

    def restored(self) -> dict:
        response = self.hook(AFTER)
        assert response.status_code == 200
        return response.json()


@pytest.fixture
def snapshot(shipped_snapstart: ModuleType, snapstart_env: dict[str, str], issuer: Issuer) -> Iterator[Snapshot]:
    made = Snapshot(shipped_snapstart, snapstart_env, issuer)
    with made.keys, made.origin:
        yield made


def signed(issuer: Issuer, key: rsa.RSAPrivateKey, kid: str) -> str:
    import jwt

    return jwt.encode(issuer.claims(), key, algorithm="RS256", headers={"kid": kid})


def test_the_program_names_the_hook_paths_the_shipped_app_serves(shipped_snapstart: ModuleType,
                                                                snapstart_env: dict[str, str]):
    assert shipped_snapstart.hook_paths(snapstart_env) == {BEFORE: "before_checkpoint", AFTER: "after_restore"}
    assert shipped_snapstart.hook_paths({}) == {}


def test_without_the_restore_hook_a_withdrawn_key_still_verifies(snapshot: Snapshot):
    # The control case: what the hook exists for.
    old_token = snapshot.issuer.token(kid="rsa-1")
    assert snapshot.initialize(old_token).status_code == 200
    snapshot.withdraw_and_rotate()
    assert snapshot.initialize(snapshot.issuer.token(kid="rsa-1", sub="after")).status_code == 200


def test_after_restore_the_key_set_is_fetched_again_and_a_withdrawn_key_no_longer_verifies(snapshot: Snapshot):
    # Given an origin initialised (the key set in hand) before the snapshot
    assert snapshot.hook(BEFORE).status_code == 200
    assert snapshot.initialize(snapshot.issuer.token(kid="rsa-1")).status_code == 200
    fetches = len(snapshot.keys.fetches)
    # When the issuer rotates its key while the snapshot waits, and the environment is restored
    new_key = snapshot.withdraw_and_rotate()
    assert snapshot.restored() == {"phase": "after-restore", "key_set": "fetched"}
    # Then the key set was fetched again before the hook answered (before any traffic),
    # and no request fetches it once more
    assert len(snapshot.keys.fetches) == fetches + 1
    # (a token of its own: the app remembers tokens it verified, and at init none were)
    assert snapshot.initialize(snapshot.issuer.token(kid="rsa-1", sub="after")).status_code == 401
    assert snapshot.initialize(signed(snapshot.issuer, new_key, "rsa-2")).status_code == 200
    assert (snapshot.app.hooks.checkpoints, snapshot.app.hooks.restores) == (1, 1)
    assert len(snapshot.keys.fetches) == fetches + 1


def test_an_unreachable_issuer_after_restore_does_not_fail_the_restore(snapshot: Snapshot):
    snapshot.keys.close()  # the issuer is gone while the environment is restored
    assert snapshot.restored() == {"phase": "after-restore", "key_set": "unavailable"}
    # Tokens then get 503 (the key set, not the token, failed): retry, do not re-authorize
    assert snapshot.initialize(snapshot.issuer.token(kid="rsa-1", sub="unreachable")).status_code == 503


def test_an_early_download_from_before_the_snapshot_is_never_taken_after_restore(
        snapshot: Snapshot, shipped_snapstart: ModuleType):
    prefetch: Any = importlib.import_module(f"{PACKAGE}.key_prefetch")
    jwks = snapshot.app.hooks.jwks
    stale = prefetch.EarlyDownload(snapshot.keys.url, {"User-Agent": "stale"}, 5.0)
    prefetch._started, jwks._early = stale, stale  # not taken when the snapshot was made
    snapshot.restored()
    assert prefetch._started is None and jwks._early is None


def test_after_restore_the_fetch_backoff_and_unknown_kid_cooldown_start_over(snapshot: Snapshot):
    jwks = snapshot.app.hooks.jwks
    # A failure just before the snapshot: backing off (monotonic) when it was taken
    jwks.failures, jwks._retry_at = 3, time.monotonic() + 3600
    jwks._last_successful_fetch = time.monotonic()
    snapshot.restored()
    assert jwks.failures == 0 and jwks._retry_at == 0.0
    assert jwks.jwk_set_cache.get() is not None  # the fetch after restore ran despite the old backoff


def test_restored_environments_draw_different_random_numbers(snapshot: Snapshot):
    random.seed(7)
    snapshotted = random.getstate()
    draws = []
    for _ in range(2):  # two environments restored from one snapshot
        random.setstate(snapshotted)
        snapshot.restored()
        draws.append(random.random())
    random.setstate(snapshotted)
    assert len({*draws, random.random()}) == 3


def test_hook_paths_are_not_hooks_for_invocations_or_other_methods(snapshot: Snapshot):
    restores = snapshot.app.hooks.restores
    # An invocation the adapter forwards carries its request context: the gate answers it.
    forwarded = snapshot.hook(AFTER, **{"x-amzn-request-context": '{"requestId": "r-1"}'})
    assert forwarded.status_code == 403
    with_secret = snapshot.hook(AFTER, **{"x-amzn-request-context": "{}"},
                                **snapshot.origin.headers())
    assert with_secret.status_code == 404
    assert httpx.get(snapshot.origin.base_url + AFTER, timeout=10).status_code == 403
    assert snapshot.app.hooks.restores == restores


def test_a_failing_hook_fails_the_phase_with_a_non_2xx_answer(snapshot: Snapshot):
    def broken() -> None:
        raise OSError("no entropy")

    snapshot.app.hooks.reseed = broken
    response = snapshot.hook(AFTER)
    assert response.status_code == 500
    assert response.json() == {"phase": "after_restore", "error": "OSError"}


def test_the_readiness_path_still_answers_under_snapstart(snapshot: Snapshot):
    response = httpx.get(snapshot.origin.base_url + "/healthz", timeout=10)
    assert response.status_code == 200



@pytest.mark.e2e
def test_the_snapstart_run_sh_serves_the_hooks_as_the_adapter_calls_them(
        snapstart_run: ProgramRun, snapstart_env: dict[str, str], issuer: Issuer, tmp_path: Path):
    # Given the SnapStart zip's run.sh started as the adapter starts it, with the function's environment
    with zipfile.ZipFile(Path(origin_function(snapstart_run)["code"].path)) as package, \
            running_run_sh(package, {**snapstart_env, "AUTH_JWKS_URL": issuer.jwks_url}, tmp_path) as (base, ready):
        assert ready.status_code == 200
        fetches = len(issuer.fetches)
        # When the adapter relays the snapshot's two events
        before = httpx.post(base + snapstart_env["AWS_LWA_SNAPSTART_BEFORE_CHECKPOINT_PATH"], timeout=10)
        after = httpx.post(base + snapstart_env["AWS_LWA_SNAPSTART_AFTER_RESTORE_PATH"], timeout=10)
        # Then both phases succeed and the key set was fetched again before the restore's answer
        assert (before.status_code, after.status_code) == (200, 200)
        assert after.json() == {"phase": "after-restore", "key_set": "fetched"}
        assert len(issuer.fetches) == fetches + 1
        # And the origin lock still holds everything else
        assert httpx.post(f"{base}/mcp", json={}, headers={"host": "x.lambda-url.us-east-1.on.aws"}).status_code == 403
