"""The probe's Lambda entry point: environment, Secrets Manager (moto), token endpoint,
a Function URL and the edge's token check on loopback, the Lambda context's remaining
time, and the promise that importing it stays light."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from functions.probe import handler as probe_handler
from functions.probe.errors import ProbeConfigError, ProbeHttpError, ProbeInputError, ProbeTimeoutError
from functions.probe.probe import hard_deadline
from functions.probe.secrets_manager import Credentials
from stack_config.loading import PROJECT_ROOT
from tests.functions.probe.conftest import (
    CLIENT_ID,
    CLIENT_SECRET,
    Edge,
    FunctionUrl,
    Loopback,
    OAuthServer,
    sdk_server,
)
from tests.functions.results.conftest import MotoServer, moto_server  # noqa: F401  (fixture)

SECRET_NAME = "acme-mcp/probe-client-secret"
# What Lambda puts in the probe's environment: its role's credentials.
ROLE = Credentials("AKIDPROBEHANDLER", "probe-handler-secret-key", "probe-handler-session-token")


class Context:
    def __init__(self, remaining_ms: int = 30000):
        self.deadline = time.monotonic() + remaining_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return int((self.deadline - time.monotonic()) * 1000)


@pytest.fixture
def lambda_env(monkeypatch: pytest.MonkeyPatch, oauth: OAuthServer, moto_server: MotoServer) -> Iterator[None]:  # noqa: F811
    """The probe function's environment (as components/probe_fleet.py sets it, and Lambda), with moto."""
    env = {
        "AWS_REGION": "ap-southeast-1", "AWS_ACCESS_KEY_ID": ROLE.access_key,
        "AWS_SECRET_ACCESS_KEY": ROLE.secret_key, "AWS_SESSION_TOKEN": str(ROLE.token),
        # Limits far above a loopback round trip: these tests are about credentials and
        # secrets, and a loaded CI machine must not turn "healthy" into "degraded".
        "PROBE_DEADLINE_S": "20", "PROBE_DEGRADED_LATENCY_MS": "15000",
        "TOKEN_URL": oauth.token_url, "CLIENT_ID": CLIENT_ID, "CLIENT_SECRET_NAME": SECRET_NAME,
        "TOKEN_AUDIENCE": oauth.audience,
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server.url)
    monkeypatch.setattr(probe_handler, "_runtime", None)
    moto_server.client("secretsmanager", "ap-southeast-1").create_secret(Name=SECRET_NAME, SecretString=CLIENT_SECRET)
    yield


def sdk() -> Any:
    return sdk_server().streamable_http_app(stateless_http=True, json_response=True)


@pytest.fixture(scope="module")
def function_url() -> Iterator[tuple[FunctionUrl, Loopback]]:
    url = FunctionUrl(sdk(), region="eu-west-1", credentials=ROLE)
    with Loopback(url) as running:
        yield url, running


def origin_event(url: str) -> dict[str, Any]:
    return {"endpoint": url, "serverId": "acme-mcp", "target": "origin", "targetRegion": "eu-west-1",
            "pinRegion": None, "signed": True}


def test_handler_probes_a_function_url_signed_with_its_roles_credentials(lambda_env, function_url):
    url, running = function_url
    url.seen.clear()
    result = probe_handler.handler(origin_event(running.url()), Context())
    assert result["status"] == "healthy" and result["probeRegion"] == "ap-southeast-1"
    assert result["era"] == "modern" and result["toolCount"] == 3
    assert all(problem is None for _, _, problem in url.seen[:-1])  # the exchange: signed, accepted
    assert result["promise"] == {"check": "unsigned", "status": "pass", "httpStatus": 403, "detail": None}
    json.dumps(result)  # the destination record carries it as JSON
    # The second invocation (a warm environment) reuses the token.
    tokens = probe_handler.runtime().tokens
    assert tokens is not None
    probe_handler.handler(origin_event(running.url()), Context())
    assert tokens.fetches == 1


def test_the_signature_uses_the_credentials_lambda_holds_at_each_invocation(lambda_env, function_url, monkeypatch):
    url, running = function_url
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "a-key-the-url-does-not-know")
    with pytest.raises(ProbeHttpError, match="HTTP 403"):
        probe_handler.handler(origin_event(running.url()), Context())
    assert url.seen[-2][2] == "signature does not match"


def test_a_direct_target_without_credentials_is_a_config_error_naming_them(lambda_env, function_url, monkeypatch):
    _, running = function_url
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    with pytest.raises(ProbeConfigError, match="cannot sign the requests to origin@eu-west-1: no AWS credentials"):
        probe_handler.handler(origin_event(running.url()), Context())


def test_handler_checks_that_the_edge_refuses_a_forged_token(lambda_env, oauth: OAuthServer):
    edge = Edge(sdk(), oauth)
    event = {"endpoint": "", "serverId": "acme-mcp", "target": "edge", "targetRegion": "eu-west-1",
             "pinRegion": "eu-west-1", "signed": False}
    with Loopback(edge) as running:
        result = probe_handler.handler({**event, "endpoint": running.url()}, Context())
    assert result["status"] == "healthy"
    assert result["promise"] == {"check": "forged-token", "status": "pass", "httpStatus": 401, "detail": None}
    # The exchange, the handshake check's initialize (a stateless server issues no session, so
    # nothing more is asked), then the forged token, refused.
    assert [refused for _, refused in edge.seen] == [False, False, False, True]


def test_bad_event_raises_a_typed_error_for_the_failure_destination(lambda_env):
    with pytest.raises(ProbeInputError, match="missing required key"):
        probe_handler.handler({"endpoint": "https://x.example/mcp"}, Context())


def test_bad_environment_is_a_config_error_at_invocation_not_an_init_crash(lambda_env, monkeypatch, function_url):
    monkeypatch.setenv("PROBE_DEADLINE_S", "soon")
    with pytest.raises(ProbeConfigError, match="PROBE_DEADLINE_S='soon'"):
        probe_handler.handler(origin_event(function_url[1].url()), Context())


def test_deadline_shrinks_to_the_lambda_time_left(lambda_env, scripted):
    async def never(request: Any, body: Any) -> Any:
        import anyio

        await anyio.sleep(60)

    url = scripted(never).url()
    started = time.monotonic()
    # 3.5 s left in the invocation, 2 s kept back: a 1.5 s deadline, not the configured 20 s.
    # (Less when building the runtime took a while on a loaded machine; never more.)
    with pytest.raises(ProbeTimeoutError, match=r"within the (1\.[0-5]|0\.\d)\d* s deadline"):
        probe_handler.handler({**origin_event(url), "signed": False}, Context(remaining_ms=3500))
    assert time.monotonic() - started < 10  # stopped at the deadline, not after the server's 60 s


def test_hard_deadline_interrupts_code_that_ignores_timeouts():
    started = time.monotonic()
    with pytest.raises(ProbeTimeoutError, match="hard deadline of 0.3 s"), hard_deadline(0.3, "stuck call"):
        time.sleep(20)
    assert time.monotonic() - started < 5


def test_importing_the_probe_does_not_import_the_mcp_sdk_boto3_the_signer_or_cryptography():
    # botocore (signing) and cryptography (the forged token) load on first use only.
    code = (
        "import sys, functions.probe.handler\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('mcp', 'mcp_types', 'boto3', 'botocore', 'pydantic', 'cryptography', 'cffi'))\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)})
    assert out.stdout.strip() == "[]"
