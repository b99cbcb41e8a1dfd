"""authScopes: the scopes the MCP server advertises, validated like every other key."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stack_config.checks import ConfigError, build_stack_config
from stack_config.loading import read_stack_file, stack_file_path

PROD = read_stack_file(stack_file_path("prod"))


def build(**changes: Any):  # type: ignore[no-untyped-def]
    values = {**PROD, **changes}
    return build_stack_config(lambda k: values.get(k), "test")


def test_no_scopes_are_advertised_unless_the_stack_names_them() -> None:
    assert build().auth.scopes == ()


@given(scopes=st.lists(st.from_regex(r"[a-z][a-z0-9:._-]{0,20}", fullmatch=True), max_size=5, unique=True)
       .filter(lambda s: "offline_access" not in s))
def test_any_distinct_scope_tokens_are_accepted(scopes: list[str]) -> None:
    assert build(authScopes=scopes).auth.scopes == tuple(scopes)


@pytest.mark.parametrize(("scopes", "expected"), [
    (["mcp read"], "authScopes contains 'mcp read'"),
    (['mcp"'], "RFC 6749"),
    (["offline_access"], "does not advertise it"),
    (["mcp", "mcp"], "more than once"),
])
def test_bad_scopes_are_refused_naming_the_key_and_value(scopes: list[str], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        build(authScopes=scopes)
    assert "mcp-edge:authScopes" in str(info.value) and expected in str(info.value)


def test_scopes_that_make_the_cloudfront_function_too_large_are_blamed_on_authscopes() -> None:
    scopes = [f"mcp:scope{i:03d}:" + "x" * 60 for i in range(150)]
    with pytest.raises(ConfigError) as info:
        build(authScopes=scopes)
    [problem] = [p for p in info.value.problems if "CloudFront Functions'" in p]
    assert problem.startswith("mcp-edge:authScopes/"), problem


# --- allowedOrigins: the browser origins the edge lets through --------------------------


def test_no_browser_origin_is_allowed_unless_the_stack_names_some() -> None:
    assert build().edge.allowed_origins == ()
    assert build().viewer_function_settings().allowed_origins == ()


def test_listed_origins_reach_the_viewer_function_settings() -> None:
    origins = ["https://app.example.com", "http://localhost:6274", "null"]
    config = build(allowedOrigins=origins)
    assert config.edge.allowed_origins == tuple(origins)
    assert config.viewer_function_settings().allowed_origins == tuple(origins)


@pytest.mark.parametrize(("origins", "expected"), [
    (["*"], "mcp-edge:allowedOrigins: '*' is not a browser origin"),
    (["https://app.example.com/"], "no path or trailing slash"),
    (["https://App.example.com"], "lower-case"),
    (["https://app.example.com:443"], "port 443 is the scheme's default"),
    (["https://a.example", "https://a.example"], "more than once"),
])
def test_bad_allowed_origins_are_refused_naming_the_key_and_value(origins: list[str], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        build(allowedOrigins=origins)
    assert expected in str(info.value)
