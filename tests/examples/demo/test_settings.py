"""The origin's settings: what the program passes is accepted; bad input is refused
at start-up with every problem named."""

from __future__ import annotations

import pytest

from functions.mcp_server.settings import Settings, SettingsError
from tests.functions.mcp_server.conftest import function_environment
from tests.harness import ProgramRun

MINIMAL = {
    "AUTH_ISSUER": "https://auth.example/",
    "AUTH_AUDIENCE": "https://mcp.example/mcp",
    "AUTH_JWKS_URL": "https://auth.example/jwks.json",
    "ORIGIN_SECRET": "s" * 32,
}


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1", "ap-southeast-1", "ap-northeast-1"])
def test_the_programs_environment_is_valid_for_every_region(prod: ProgramRun, region: str):
    settings = Settings.from_env(function_environment(prod, region))
    assert settings.served_region == region
    assert settings.algorithms == ("RS256", "ES256")
    assert settings.leeway_s == 30
    assert settings.resource_url == "https://mcp.acme.example/mcp"
    assert f"*.lambda-url.{region}.on.aws" in settings.allowed_hosts


def test_defaults_are_safe_for_a_local_run():
    settings = Settings.from_env(MINIMAL)
    assert settings.allowed_hosts == ("127.0.0.1:*", "localhost:*", "[::1]:*")
    assert settings.mcp_path == "/mcp"
    assert settings.resource_url == "https://mcp.example/mcp"
    assert settings.served_region == "local"


def test_served_region_falls_back_to_lambdas_aws_region():
    assert Settings.from_env({**MINIMAL, "AWS_REGION": "eu-west-1"}).served_region == "eu-west-1"


def test_previous_origin_secret_is_also_accepted_during_rotation():
    settings = Settings.from_env({**MINIMAL, "ORIGIN_SECRET_PREVIOUS": "p" * 32})
    assert settings.origin_secrets == ("s" * 32, "p" * 32)


def test_origin_secret_is_not_in_the_repr():
    assert "s" * 32 not in repr(Settings.from_env(MINIMAL))


def test_every_problem_is_reported_at_once():
    with pytest.raises(SettingsError) as error:
        Settings.from_env({
            "AUTH_ISSUER": "http://auth.example/",
            "AUTH_AUDIENCE": "",
            "AUTH_ALGORITHMS": "RS256,HS256,none",
            "AUTH_LEEWAY_SECONDS": "900",
            "MCP_PATH": "mcp/",
            "ALLOWED_HOSTS": "ok.example,bad host",
            "LOG_LEVEL": "LOUD",
        })
    problems = "\n".join(error.value.problems)
    for expected in (
        "AUTH_AUDIENCE is required", "AUTH_JWKS_URL is required", "ORIGIN_SECRET is required",
        "AUTH_ISSUER = 'http://auth.example/': must be an https:// URL",
        "AUTH_ALGORITHMS contains 'HS256'", "AUTH_ALGORITHMS contains 'none'",
        "AUTH_LEEWAY_SECONDS = '900'", "MCP_PATH = 'mcp/'", "ALLOWED_HOSTS contains 'bad host'",
        "LOG_LEVEL = 'LOUD'",
    ):
        assert expected in problems


def test_plain_http_is_allowed_only_on_loopback():
    assert Settings.from_env({**MINIMAL, "AUTH_JWKS_URL": "http://127.0.0.1:9000/jwks"}).jwks_url.startswith("http:")
    with pytest.raises(SettingsError, match="AUTH_JWKS_URL"):
        Settings.from_env({**MINIMAL, "AUTH_JWKS_URL": "http://auth.example/jwks"})


def test_short_origin_secret_is_refused():
    with pytest.raises(SettingsError, match="too short"):
        Settings.from_env({**MINIMAL, "ORIGIN_SECRET": "short"})


def test_audience_that_is_not_a_url_needs_a_resource_url():
    with pytest.raises(SettingsError, match="RESOURCE_SERVER_URL is required"):
        Settings.from_env({**MINIMAL, "AUTH_AUDIENCE": "api://mcp"})
    settings = Settings.from_env({**MINIMAL, "AUTH_AUDIENCE": "api://mcp", "RESOURCE_SERVER_URL": "https://m.example/mcp"})
    assert settings.resource_url == "https://m.example/mcp"
