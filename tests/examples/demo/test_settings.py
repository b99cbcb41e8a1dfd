"""The demo server's settings: every one optional, every problem reported at once by name."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from examples.demo.demo_server.settings import Env, Settings, SettingsError


def test_no_configuration_at_all_is_a_servable_server():
    settings = Settings.from_env({})
    assert (settings.mcp_path, settings.served_region, settings.allowed_origins) == ("/mcp", "local", ("*",))


def test_the_region_is_the_configured_one_else_lambdas_own():
    assert Settings.from_env({"AWS_REGION": "eu-west-1"}).served_region == "eu-west-1"
    assert Settings.from_env({"AWS_REGION": "eu-west-1", Env.SERVED_REGION: "us-east-1"}).served_region == "us-east-1"


def test_origins_are_a_comma_separated_list():
    assert Settings.from_env({Env.ALLOWED_ORIGINS: " https://a.example, ,https://b.example"}).allowed_origins == (
        "https://a.example", "https://b.example")


def test_every_problem_is_reported_naming_its_variable():
    with pytest.raises(SettingsError) as raised:
        Settings.from_env({Env.MCP_PATH: "mcp/", Env.LOG_LEVEL: "loud", Env.MAX_REQUEST_BODY_BYTES: "12"})
    assert len(raised.value.problems) == 3
    for name in (Env.MCP_PATH, Env.LOG_LEVEL, Env.MAX_REQUEST_BODY_BYTES):
        assert name in str(raised.value)


@given(path=st.text(max_size=12))
def test_an_mcp_path_is_accepted_only_when_absolute_without_a_trailing_slash(path: str):
    try:
        settings = Settings.from_env({Env.MCP_PATH: path})
    except SettingsError as exc:
        assert Env.MCP_PATH in str(exc)
        return
    assert settings.mcp_path.startswith("/") and not settings.mcp_path.endswith("/") and len(settings.mcp_path) > 1


def test_nothing_about_tokens_secrets_or_hosts_is_read():
    # The edge verifies tokens and Host, and signs the origin request: none of that is here.
    fields = set(Settings.__dataclass_fields__)
    assert not any(word in name for name in fields for word in ("secret", "issuer", "jwks", "audience", "host"))
