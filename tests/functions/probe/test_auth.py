"""The probe's token source against a real token endpoint on loopback, and its client
secret from Secrets Manager (moto's server on loopback)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from functions.probe.auth import (
    REFRESH_MARGIN_S,
    UNKNOWN_LIFETIME_S,
    TokenSource,
    parse_secret_value,
    secrets_manager_reader,
)
from functions.probe.errors import ProbeAuthError, ProbeConfigError
from functions.probe.forge import forge
from functions.probe.wire import Deadline, new_probe_client
from tests.functions.probe.conftest import CLIENT_SECRET, Loopback, OAuthServer, modern, probe, token_source
from tests.functions.results.conftest import MotoServer, moto_server  # noqa: F401  (fixture)


class Clock:
    def __init__(self, now: float = 1_800_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fresh_oauth(oauth: OAuthServer) -> Iterator[OAuthServer]:
    """The session's OAuth server with its knobs reset after the test."""
    yield oauth
    oauth.client_secret, oauth.lifetime_s, oauth.fail_with = CLIENT_SECRET, 300, None


def test_token_is_cached_until_shortly_before_it_expires(fresh_oauth):
    clock = Clock()
    tokens = token_source(fresh_oauth, clock=clock)
    first = tokens.token(Deadline(5))
    clock.now += 200
    assert tokens.token(Deadline(5)) == first and tokens.fetches == 1
    clock.now += 50  # 250 s into a 300 s token: within the refresh margin
    tokens.token(Deadline(5))
    assert tokens.fetches == 2


def test_token_request_is_client_credentials_with_audience_and_resource(fresh_oauth):
    issued_before = len(fresh_oauth.issued)
    token_source(fresh_oauth).token(Deadline(5))
    form = fresh_oauth.issued[issued_before]["form"]
    assert form == {"grant_type": "client_credentials", "audience": fresh_oauth.audience,
                    "resource": fresh_oauth.audience}


def test_rotated_client_secret_is_read_again_once(fresh_oauth):
    secrets = iter(["the-old-secret", "rotated-secret"])
    reads: list[str] = []

    def read() -> str:
        reads.append(value := next(secrets))
        return value

    fresh_oauth.client_secret = "the-old-secret"
    tokens = token_source(fresh_oauth, read_secret=read)
    tokens.token(Deadline(5))
    tokens.invalidate()
    fresh_oauth.client_secret = "rotated-secret"
    tokens.token(Deadline(5))
    assert reads == ["the-old-secret", "rotated-secret"]


def test_wrong_client_secret_is_an_auth_error_naming_the_endpoint(fresh_oauth):
    tokens = token_source(fresh_oauth, read_secret=lambda: "wrong")
    with pytest.raises(ProbeAuthError, match="answered HTTP 401: invalid_client") as err:
        tokens.token(Deadline(5))
    assert fresh_oauth.token_url in str(err.value)


def test_token_endpoint_outage_is_an_auth_error(fresh_oauth):
    fresh_oauth.fail_with = 503
    with pytest.raises(ProbeAuthError, match="HTTP 503"):
        token_source(fresh_oauth).token(Deadline(5))


def test_target_refusing_a_cached_token_gets_one_retry_with_a_fresh_token(fresh_oauth, scripted):
    tokens = token_source(fresh_oauth)
    refused = {tokens.token(Deadline(5))}  # the token the server will refuse (e.g. a rotated signing key)

    async def picky(request: Request, body: dict) -> Response:
        if request.headers.get("authorization", "").removeprefix("Bearer ") in refused:
            return JSONResponse({"error": "invalid_token"}, status_code=401)
        return await modern(request, body)

    result = probe(scripted(picky).url(), tokens=tokens)
    assert result["status"] == "healthy" and tokens.fetches == 2


def test_target_refusing_a_fresh_token_is_an_auth_error_without_retry(fresh_oauth, scripted):
    async def refuses_all(request: Request, body: dict) -> Response:
        return JSONResponse({"error": "invalid_token"}, status_code=401)

    tokens = token_source(fresh_oauth)
    server = scripted(refuses_all)
    with pytest.raises(ProbeAuthError, match="HTTP 401"):
        probe(server.url(), tokens=tokens, forged_token=None)  # no promise check: only the exchange's requests
    assert tokens.fetches == 1 and server.script.methods() == ["server/discover"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("plain-secret", "plain-secret"), ('{"client_secret": "from-json"}', "from-json"), ("  padded \n", "padded")],
)
def test_secret_value_is_plain_or_json(raw, expected):
    assert parse_secret_value("name", raw) == expected


@pytest.mark.parametrize("raw", ["", None, '{"other": 1}', "{broken"])
def test_unusable_secret_value_is_an_auth_error(raw):
    with pytest.raises(ProbeAuthError, match="probe client secret 'name'"):
        parse_secret_value("name", raw)


DEEP = 100_000  # far past what the JSON parser's recursion goes


@pytest.mark.parametrize("raw", ['{"a":' * DEEP + "1" + "}" * DEEP,
                                 '{"client_secret":' + "[" * DEEP + "]" * DEEP + "}"],
                         ids=["nested objects", "a client_secret nested in arrays"])
def test_a_secret_value_nested_too_deep_is_an_auth_error(raw):
    with pytest.raises(ProbeAuthError, match="probe client secret 'name' looks like JSON but does not parse"):
        parse_secret_value("name", raw)


def assert_cached_for_the_unknown_lifetime_only(tokens: TokenSource, clock: Clock) -> None:
    first = tokens.token(Deadline(5))
    clock.now += UNKNOWN_LIFETIME_S - REFRESH_MARGIN_S / 2 - 1
    assert tokens.token(Deadline(5)) == first and tokens.fetches == 1
    clock.now += UNKNOWN_LIFETIME_S
    tokens.token(Deadline(5))
    assert tokens.fetches == 2


def test_a_token_lifetime_too_large_for_a_float_is_cached_for_the_unknown_lifetime_only(fresh_oauth):
    # expires_in and the JWT's exp both 10**400: no OverflowError, no token pinned forever.
    fresh_oauth.lifetime_s = 10**400
    clock = Clock()
    assert_cached_for_the_unknown_lifetime_only(token_source(fresh_oauth, clock=clock), clock)


@pytest.mark.parametrize("expires_in", ["1e999", "Infinity", "-Infinity", "NaN"])
def test_a_token_lifetime_that_is_not_finite_is_cached_for_the_unknown_lifetime_only(expires_in: str):
    async def token(request: Request) -> Response:
        body = '{"access_token": "not.a.jwt", "token_type": "Bearer", "expires_in": ' + expires_in + "}"
        return Response(body.encode(), media_type="application/json")

    with Loopback(Starlette(routes=[Route("/oauth/token", token, methods=["POST"])])) as running:
        clock = Clock()
        tokens = TokenSource(token_url=running.url("/oauth/token"), client_id="c", read_client_secret=lambda: "s",
                             audience=None, http=new_probe_client(), clock=clock)
        assert_cached_for_the_unknown_lifetime_only(tokens, clock)


def test_a_token_whose_header_is_nested_too_deep_cannot_be_forged():
    deep = base64.urlsafe_b64encode(("[" * DEEP + "]" * DEEP).encode()).decode().rstrip("=")
    with pytest.raises(ProbeConfigError, match="not JWTs"):
        forge(f"{deep}.{deep}.c2ln")


def test_secret_is_read_from_secrets_manager(moto_server: MotoServer):  # noqa: F811
    env = moto_server.env("eu-west-1")
    moto_server.client("secretsmanager", "eu-west-1").create_secret(
        Name="acme-mcp/probe-client-secret", SecretString=json.dumps({"client_secret": "abc"}))
    assert secrets_manager_reader("acme-mcp/probe-client-secret", env)() == "abc"
    with pytest.raises(ProbeAuthError, match="the probe client secret 'no/such/secret'.*ResourceNotFoundException"):
        secrets_manager_reader("no/such/secret", env)()
