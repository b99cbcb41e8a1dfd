"""The origin's warm-up before it reports ready (``warm_up``), from the shipped package:
what it sends goes through the whole app and is answered, none of it reaches the
logs or runs a tool, its token is accepted only while it runs, and a start without
the key set still warms the rest and serves."""

from __future__ import annotations

import importlib
import json
import re
import time
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from devkit.jwks import JwksServer, public_jwk
from tests.functions.mcp_server.conftest import Issuer, RunningOrigin, settings_for
from tests.functions.mcp_server.test_server import TOOLS_LIST, TOOLS_LIST_HEADERS

# MCP tool names (2025-11-25): 1 to 128 of these characters.
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")


@pytest.fixture(scope="module")
def warm_up(shipped: ModuleType) -> ModuleType:
    return importlib.import_module("mcp_server.warm_up")


@pytest.fixture(scope="module")
def auth(shipped: ModuleType) -> ModuleType:
    return importlib.import_module("mcp_server.auth")


def request_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if '"message":"request"' in line]


def test_the_origin_answers_every_warm_up_call_before_it_listens_and_logs_none_of_them(
        shipped: ModuleType, lambda_env: dict[str, str], issuer: Issuer, capsys: pytest.CaptureFixture[str]):
    settings = settings_for(shipped, lambda_env, AUTH_JWKS_URL=issuer.jwks_url)
    app = shipped.create_app(settings)
    capsys.readouterr()
    with RunningOrigin(app, settings) as fresh:
        # Given an origin that just reported ready: its warm-up went as planned
        assert app.state.warm_up_problems == []
        # and the logs hold no request line for it
        assert request_lines(capsys.readouterr().out) == []
        # When the first request from outside arrives, Then it is served and is the only request logged
        response = fresh.post(TOOLS_LIST, headers=fresh.headers(issuer.token(), **TOOLS_LIST_HEADERS))
        assert response.status_code == 200
        deadline = time.monotonic() + 10
        out = ""
        while not request_lines(out) and time.monotonic() < deadline:
            time.sleep(0.01)
            out += capsys.readouterr().out
        assert [line["mcp_method"] for line in request_lines(out)] == ["tools/list"]


def test_the_warm_up_covers_both_eras_both_transports_and_calls_no_tool(warm_up: ModuleType):
    calls = warm_up.WARM_UP_CALLS
    assert {c.label.split()[0] for c in calls} == {warm_up.MODERN, warm_up.HANDSHAKE}
    assert {c.message["method"] for c in calls} >= {"server/discover", "initialize", "tools/list", "tools/call"}
    # through the socket: an SSE stream, then the modern listing, what a fresh instance is most often asked first
    assert [c.label for c in warm_up.SOCKET_CALLS] == [f"{warm_up.MODERN} tools/call", f"{warm_up.MODERN} tools/list"]
    assert all(c in calls for c in warm_up.SOCKET_CALLS)
    called = [c.message["params"]["name"] for c in calls if c.message["method"] == "tools/call"]
    assert called and all(TOOL_NAME.fullmatch(name) is None for name in called)  # no server can have it
    # the 2026-07-28 call names its tool in Mcp-Name too, as the SDK requires
    assert all(c.headers["mcp-name"] == c.message["params"]["name"] for c in calls
               if c.message["method"] == "tools/call" and "mcp-method" in c.headers)


def test_the_warm_up_token_is_accepted_inside_the_block_only(auth: ModuleType, lambda_env: dict[str, str],
                                                            issuer: Issuer, shipped: ModuleType, warm_up: ModuleType):
    settings = settings_for(shipped, lambda_env, AUTH_JWKS_URL=issuer.jwks_url)
    verifier = auth.JwtVerifier(settings, auth.make_jwks_client(settings))
    token = "warm-up-token-for-the-test"
    with verifier.accepting(token, warm_up.warm_up_claims(settings, time.time())):
        inside = anyio.run(verifier.verify_token, token)
    after = anyio.run(verifier.verify_token, token)
    assert inside is not None and inside.subject == auth.WARM_UP_SUBJECT
    assert after is None


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_the_signature_check_exercise_is_refused_for_its_missing_signature(auth: ModuleType, lambda_env: dict[str, str],
                                                                          issuer: Issuer, shipped: ModuleType,
                                                                          alg: str, monkeypatch: pytest.MonkeyPatch):
    key = issuer.rsa_key if alg == "RS256" else issuer.ec_key
    with JwksServer([public_jwk(key, "only-1", alg)]) as jwks:
        settings = settings_for(shipped, lambda_env, AUTH_JWKS_URL=jwks.url, AUTH_ALGORITHMS=alg)
        client = auth.make_jwks_client(settings)
        verifier = auth.JwtVerifier(settings, client)
        assert verifier.exercise_signature_check() == "no key set in hand"
        client.get_jwk_set()
        validated = spy_on_claims_validation(monkeypatch)
        assert verifier.exercise_signature_check() == "bad signature"
        # and the claims' validation past a good signature ran too, with the origin's claims
        assert [(c["sub"], c["iss"], c["aud"]) for c in validated] == [
            (auth.WARM_UP_SUBJECT, settings.issuer, settings.audience)]
        other = "ES256" if alg == "RS256" else "RS256"
        only_other = auth.JwtVerifier(settings_for(shipped, lambda_env, AUTH_JWKS_URL=jwks.url,
                                                   AUTH_ALGORITHMS=other), client)
        assert only_other.exercise_signature_check() == "no signing key of an allowed algorithm"


def spy_on_claims_validation(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The payloads PyJWT checks the audience of from now on (``_validate_aud``: called only
    when the claims are validated, not for a parse that skips verification)."""
    import jwt.api_jwt

    validated: list[dict[str, Any]] = []
    real = jwt.api_jwt.PyJWT._validate_aud

    def spy(self: Any, payload: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        validated.append(dict(payload))
        return real(self, payload, *args, **kwargs)

    monkeypatch.setattr(jwt.api_jwt.PyJWT, "_validate_aud", spy)
    return validated


def test_a_claims_check_that_fails_in_the_exercise_is_reported(auth: ModuleType, lambda_env: dict[str, str],
                                                               issuer: Issuer, shipped: ModuleType,
                                                               monkeypatch: pytest.MonkeyPatch):
    import jwt

    settings = settings_for(shipped, lambda_env, AUTH_JWKS_URL=issuer.jwks_url)
    client = auth.make_jwks_client(settings)
    client.get_jwk_set()
    verifier = auth.JwtVerifier(settings, client)

    def refuse(token: str, key: Any, algorithms: Any) -> dict[str, Any]:
        if not isinstance(key, jwt.PyJWK):  # the exercise's own key (the key set's keys are PyJWKs)
            raise jwt.InvalidAudienceError("Audience doesn't match")
        raise jwt.InvalidSignatureError("Signature verification failed")

    monkeypatch.setattr(verifier, "_jwt_decode", refuse)
    assert verifier.exercise_signature_check() == "claims check: InvalidAudienceError: Audience doesn't match"


def test_a_start_without_the_key_set_warms_the_rest_and_still_serves(shipped: ModuleType, lambda_env: dict[str, str],
                                                                      issuer: Issuer):
    with JwksServer([]) as gone:
        url = gone.url  # a loopback port nobody listens on once the block ends
    settings = settings_for(shipped, lambda_env, AUTH_JWKS_URL=url, JWKS_TIMEOUT_SECONDS="1")
    app = shipped.create_app(settings)
    with RunningOrigin(app, settings) as fresh:
        assert app.state.warm_up_problems == ["signature check: no key set in hand"]
        assert httpx.get(fresh.base_url + "/healthz", timeout=10).status_code == 200


LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)
PATTERN = st.builds(
    lambda wildcard, labels, port: ("*." if wildcard else "") + ".".join(labels) + port,
    st.booleans(), st.lists(LABEL, min_size=1, max_size=4),
    st.sampled_from(["", ":*", ":443", ":8080"]),
)


@given(st.lists(PATTERN, min_size=1, max_size=4))
def test_the_warm_up_host_is_one_the_host_policy_allows(warm_up: ModuleType, patterns: list[str]):
    hosts = importlib.import_module("mcp_server.hosts")
    host = warm_up.example_host(tuple(patterns))
    assert host is not None and hosts.HostPolicy(patterns).allows(host)


class SeenRequests:
    """ASGI wrapper recording each HTTP request's method, path, client and headers."""

    def __init__(self, app: Any):
        self.app = app
        self.seen: list[tuple[str, str, Any, dict[str, str]]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode(): v.decode() for k, v in scope["headers"]}
            self.seen.append((scope["method"], scope["path"], tuple(scope["client"]), headers))
        await self.app(scope, receive, send)


def test_the_first_readiness_check_waits_for_posts_through_the_listening_socket_and_logs_none(
        shipped: ModuleType, lambda_env: dict[str, str], issuer: Issuer, warm_up: ModuleType,
        capsys: pytest.CaptureFixture[str]):
    settings = settings_for(shipped, lambda_env, AUTH_JWKS_URL=issuer.jwks_url)
    app = shipped.create_app(settings)
    seen = SeenRequests(app)
    verifier = app.state.readiness.verifier
    exercise = verifier.exercise_signature_check
    checks: list[str] = []

    def check_noted() -> str:
        checks.append(reason := exercise())
        seen.seen.append(("token check", "", ("", 0), {}))
        return reason

    with RunningOrigin(seen, settings) as fresh:
        capsys.readouterr()
        checks.clear()  # the lifespan's own, before it listened
        verifier.exercise_signature_check = check_noted
        # Given a fresh origin, When the Web Adapter's first readiness check arrives
        assert httpx.get(fresh.base_url + "/healthz", timeout=10).status_code == 200
        # Then while it waited, each socket call came in, over one other loopback connection
        posts = [s for s in seen.seen if s[0] == "POST"]
        # then the token check ran again, last, just before the answer
        assert [(m, p) for m, p, _, _ in seen.seen] == [("GET", "/healthz")] + [("POST", settings.mcp_path)] * len(
            posts) + [("token check", "")]
        assert checks == ["bad signature"]
        # the listing, what a first caller most often asks, is the last call
        assert posts[-1][3]["mcp-method"] == "tools/list"
        assert len(posts) == len(warm_up.SOCKET_CALLS)
        assert len({client for _, _, client, _ in posts}) == 1 and posts[0][2] != seen.seen[0][2]
        assert [h["mcp-method"] for *_, h in posts] == [c.headers["mcp-method"] for c in warm_up.SOCKET_CALLS]
        assert app.state.readiness.done and app.state.readiness.problems == []
        # and they were answered (a JSON answer and an SSE stream), with no request line of theirs logged
        out = capsys.readouterr().out
        assert [line["path"] for line in request_lines(out)] == ["/healthz"]
        # And their token is refused from now on; a second check does not send them again
        token = posts[0][3]["authorization"].removeprefix("Bearer ")
        refused = fresh.post(TOOLS_LIST, headers=fresh.headers(token, **TOOLS_LIST_HEADERS))
        assert refused.status_code == 401
        assert httpx.get(fresh.base_url + "/healthz", timeout=10).status_code == 200
        assert len([s for s in seen.seen if s[0] == "POST"]) == len(posts) + 1
        assert checks == ["bad signature"]


@pytest.mark.parametrize("server", [("testserver", 80), None, ("127.0.0.1",), ("::1", "80"), ("10.0.0.7", 8080)],
                         ids=["a name", "none", "no port", "a port string", "not loopback"])
def test_a_readiness_check_not_on_a_loopback_socket_is_answered_without_warming(
        shipped: ModuleType, lambda_env: dict[str, str], issuer: Issuer, warm_up: ModuleType, auth: ModuleType,
        server: Any):
    settings = settings_for(shipped, lambda_env, AUTH_JWKS_URL=issuer.jwks_url)
    readiness = warm_up.SocketWarmUp(settings, auth.JwtVerifier(settings, auth.make_jwks_client(settings)),
                                     FailingLogger())
    anyio.run(readiness.ready, server)
    assert readiness.done and readiness.problems == []


class FailingLogger:
    """Stands in for the Powertools logger: records warnings, fails on nothing."""

    def __init__(self) -> None:
        self.warnings: list[dict[str, Any]] = []

    def info(self, *args: Any, **kwargs: Any) -> None:
        pass

    def warning(self, message: str, *, extra: dict[str, Any]) -> None:
        self.warnings.append(extra)


@given(st.ip_addresses(), st.integers(min_value=1, max_value=65535))
def test_only_a_loopback_address_with_a_port_is_warmed_through(warm_up: ModuleType, address: Any, port: int):
    expected = (str(address), port) if address.is_loopback else None
    assert warm_up.loopback_address((str(address), port)) == expected
    assert warm_up.loopback_address([str(address), port]) == expected  # as some servers pass it


def test_a_socket_warm_up_that_cannot_connect_or_gets_no_answer_still_reports_ready(
        shipped: ModuleType, lambda_env: dict[str, str], issuer: Issuer, warm_up: ModuleType, auth: ModuleType):
    import socket

    settings = settings_for(shipped, lambda_env, AUTH_JWKS_URL=issuer.jwks_url)
    verifier = auth.JwtVerifier(settings, auth.make_jwks_client(settings))
    with socket.socket() as silent, socket.socket() as closed:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # accepts (the kernel's backlog) and never answers
        closed.bind(("127.0.0.1", 0))  # bound, not listening: the connection is refused
        for sock, reason in ((silent, "TimeoutError"), (closed, "OSError")):
            logger = FailingLogger()
            readiness = warm_up.SocketWarmUp(settings, verifier, logger, timeout_s=0.5)
            begun = time.monotonic()
            anyio.run(readiness.ready, sock.getsockname())
            assert readiness.done and time.monotonic() - begun < 5
            assert len(readiness.problems) == 1 and reason in readiness.problems[0]
            assert logger.warnings == [{"problem": readiness.problems[0]}]
            assert not readiness.sent({"headers": [(b"authorization", b"Bearer x")]})


def test_the_in_process_warm_up_sends_every_first_call_once_then_checks_the_token(
        shipped: ModuleType, lambda_env: dict[str, str], issuer: Issuer, warm_up: ModuleType,
        monkeypatch: pytest.MonkeyPatch):
    from contextlib import contextmanager

    settings = settings_for(shipped, lambda_env, AUTH_JWKS_URL=issuer.jwks_url)
    order: list[str] = []

    class NotedVerifier:
        @contextmanager
        def accepting(self, token: str, claims: dict[str, Any]) -> Any:
            yield

        def exercise_signature_check(self) -> str:
            order.append("token check")
            return "bad signature"

    async def noted_calls(calls: Any, post: Any, host: str, base: Any, label: str = "") -> list[str]:
        order.extend(call.label for call in calls)
        return []

    monkeypatch.setattr(warm_up, "send_calls", noted_calls)
    # When the lifespan's warm-up runs
    problems = anyio.run(warm_up.warm_up, None, settings, NotedVerifier(), FailingLogger())
    # Then every first call goes through once, then the token check, last
    assert problems == []
    assert order == [c.label for c in warm_up.WARM_UP_CALLS] + ["token check"]
