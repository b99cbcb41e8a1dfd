"""The probe's Lambda entry point: environment, Secrets Manager (moto), token endpoint
and origin on loopback, the Lambda context's remaining time, and the promise that
importing it stays light."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from functions.probe import handler as probe_handler
from functions.probe.errors import ProbeAuthError, ProbeConfigError, ProbeInputError, ProbeTimeoutError
from functions.probe.probe import hard_deadline
from stack_config.loading import PROJECT_ROOT
from tests.functions.probe.conftest import (
    CLIENT_ID,
    CLIENT_SECRET,
    ORIGIN_SECRET,
    Loopback,
    OAuthServer,
    origin_settings,
)
from tests.functions.results.conftest import MotoServer, moto_server  # noqa: F401  (fixture)

SECRET_NAME = "acme-mcp/probe-client-secret"
ORIGIN_SECRET_NAME = "acme-mcp-prod-origin-secret"


class Context:
    def __init__(self, remaining_ms: int = 30000):
        self.deadline = time.monotonic() + remaining_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return int((self.deadline - time.monotonic()) * 1000)


@pytest.fixture
def lambda_env(monkeypatch: pytest.MonkeyPatch, oauth: OAuthServer, moto_server: MotoServer) -> Iterator[None]:  # noqa: F811
    """The probe function's environment (as components/probe_fleet.py sets it), with moto."""
    env = {
        "AWS_REGION": "ap-southeast-1", "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
        # Limits far above a loopback round trip: these tests are about credentials and
        # secrets, and a loaded CI machine must not turn "healthy" into "degraded".
        "PROBE_DEADLINE_S": "20", "PROBE_DEGRADED_LATENCY_MS": "15000",
        "TOKEN_URL": oauth.token_url, "CLIENT_ID": CLIENT_ID, "CLIENT_SECRET_NAME": SECRET_NAME,
        "TOKEN_AUDIENCE": oauth.audience, "ORIGIN_SECRET_ID": ORIGIN_SECRET_NAME, "ORIGIN_SECRET_VERSION": "v1",
        "ORIGIN_SECRET_HEADER": "x-mcp-edge-origin-secret", "REGION_PIN_HEADER": "x-mcp-edge-region",
        "SERVED_REGION_HEADER": "x-mcp-edge-served-region",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server.url)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.setattr(probe_handler, "_runtime", None)
    sm = moto_server.client("secretsmanager", "ap-southeast-1")
    sm.create_secret(Name=SECRET_NAME, SecretString=CLIENT_SECRET)
    # As components/secrets.py stores it (mid-rotation: the probe sends the current one).
    sm.create_secret(Name=ORIGIN_SECRET_NAME,
                     SecretString=json.dumps({"current": ORIGIN_SECRET, "previous": "old-" + ORIGIN_SECRET}))
    yield


@pytest.fixture(scope="module")
def origin(oauth: OAuthServer) -> Iterator[Loopback]:
    from examples.demo.demo_server.app import create_app

    with Loopback(create_app(origin_settings(oauth))) as running:
        yield running


def origin_event(url: str) -> dict[str, Any]:
    return {"endpoint": url, "serverId": "acme-mcp", "target": "origin", "targetRegion": "eu-west-1",
            "pinRegion": None, "needsOriginSecret": True}


def test_handler_probes_with_token_from_secrets_manager_and_origin_secret(lambda_env, origin):
    result = probe_handler.handler(origin_event(origin.url()), Context())
    assert result["status"] == "healthy" and result["probeRegion"] == "ap-southeast-1"
    assert result["servedRegion"] == "eu-west-1" and result["era"] == "modern"
    json.dumps(result)  # the destination record carries it as JSON
    # The second invocation (a warm environment) reuses the token and the secret.
    tokens = probe_handler.runtime().tokens
    assert tokens is not None
    probe_handler.handler(origin_event(origin.url()), Context())
    assert tokens.fetches == 1


def test_the_origin_secret_is_read_once_per_environment_from_secrets_manager_not_the_environment(lambda_env, origin):
    # Given the probe's environment naming the origin secret, not holding it
    assert "ORIGIN_SECRET" not in os.environ
    # When it probes an origin, it sends the stored current value (the origin accepts it)
    assert probe_handler.handler(origin_event(origin.url()), Context())["status"] == "healthy"
    assert probe_handler.runtime().settings.origin_secret == ORIGIN_SECRET
    # And a warm environment does not read it again (a rotation restarts environments instead)
    boto3.client("secretsmanager", region_name="ap-southeast-1").put_secret_value(
        SecretId=ORIGIN_SECRET_NAME, SecretString=json.dumps({"current": "x" * 40}))
    assert probe_handler.handler(origin_event(origin.url()), Context())["status"] == "healthy"


def test_an_unreadable_origin_secret_is_a_typed_error_naming_it(lambda_env, monkeypatch):
    monkeypatch.setenv("ORIGIN_SECRET_ID", "no-such-secret")
    with pytest.raises(ProbeAuthError, match="origin secret 'no-such-secret'.*ResourceNotFound"):
        probe_handler.runtime()
    boto3.client("secretsmanager", region_name="ap-southeast-1").create_secret(Name="not-json", SecretString="plain")
    monkeypatch.setenv("ORIGIN_SECRET_ID", "not-json")
    with pytest.raises(ProbeAuthError, match="origin secret 'not-json' is not a JSON object with a 'current' string"):
        probe_handler.runtime()


def test_bad_event_raises_a_typed_error_for_the_failure_destination(lambda_env):
    with pytest.raises(ProbeInputError, match="missing required key"):
        probe_handler.handler({"endpoint": "https://x.example/mcp"}, Context())


def test_bad_environment_is_a_config_error_at_invocation_not_an_init_crash(lambda_env, monkeypatch, origin):
    monkeypatch.setenv("PROBE_DEADLINE_S", "soon")
    with pytest.raises(ProbeConfigError, match="PROBE_DEADLINE_S='soon'"):
        probe_handler.handler(origin_event(origin.url()), Context())


def test_deadline_shrinks_to_the_lambda_time_left(lambda_env, scripted):
    async def never(request: Any, body: Any) -> Any:
        import anyio

        await anyio.sleep(60)

    url = scripted(never).url()
    started = time.monotonic()
    # 3.5 s left in the invocation, 2 s kept back: a 1.5 s deadline, not the configured 20 s.
    # (Less when building the runtime took a while on a loaded machine; never more.)
    with pytest.raises(ProbeTimeoutError, match=r"within the (1\.[0-5]|0\.\d)\d* s deadline"):
        probe_handler.handler({**origin_event(url), "needsOriginSecret": False}, Context(remaining_ms=3500))
    assert time.monotonic() - started < 10  # stopped at the deadline, not after the server's 60 s


def test_hard_deadline_interrupts_code_that_ignores_timeouts():
    started = time.monotonic()
    with pytest.raises(ProbeTimeoutError, match="hard deadline of 0.3 s"), hard_deadline(0.3, "stuck call"):
        time.sleep(20)
    assert time.monotonic() - started < 5


def test_importing_the_probe_does_not_import_the_mcp_sdk_or_boto3():
    code = (
        "import sys, functions.probe.handler\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types', 'boto3', 'botocore', 'pydantic'))\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    assert out.stdout.strip() == "[]"
