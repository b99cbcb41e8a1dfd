"""Hostile stack configuration: every key with wrong types, out-of-bounds values and bad
encodings is refused before any resource exists, with a message naming the key; and
what only shows once rendered (the CloudFront Function's size, each Lambda
environment's size) is known, and checked, from the config alone."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi.runtime import rpc

from devkit.mock_program import ProgramRun, run_program
from stack_config.checks import LAMBDA_ENVIRONMENT_BYTES, ConfigError, build_stack_config, environment_budget
from stack_config.keys import ASCII_ONLY_KEYS, KEYS, PROJECT
from stack_config.loading import load_from_stack_file, read_stack_file, stack_file_path

PROD = read_stack_file(stack_file_path("prod"))


def problems_with(**changes: Any) -> str:
    values = {**PROD, **changes}
    with pytest.raises(ConfigError) as refused:
        build_stack_config(values.get, "hostile")
    return str(refused.value)


def accepted(**changes: Any) -> Any:
    values = {**PROD, **changes}
    return build_stack_config(values.get, "hostile")


# --- every key, by its declared type ----------------------------------------------------

WRONG_TYPES = {
    "string": [True, ["x"], {"a": 1}],
    "integer": ["abc", 1.5, True, [1], "1e3", "0x10", " ", "1 2"],  # "" means unset (the default)
    "array": ["not json", '{"a": 1}', {"a": 1}, [1], [True], 5],
    "boolean": ["yes", 1, "1", ["true"], {"a": True}],
    "object": ["not json", "[1]", [1], ["a"], 5, True],
}
OUT_OF_BOUNDS = {"integer": [-1, 10**12]}
# In the middle of the value: leading and trailing whitespace (\x85 and \u2028 are) is stripped.
BAD_ENCODINGS = ["line\nbreak", "nul\x00byte", "tab\there", "del\x7fete", "c1\x85c1", "x" * 5000]
NON_ASCII = ["caf\u00e9", "a\u2028b", "\U0001f600"]


def cases() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key in KEYS:
        bad: list[Any] = [*WRONG_TYPES[key.type], *OUT_OF_BOUNDS.get(key.type, [])]
        encodings = BAD_ENCODINGS + (NON_ASCII if key.name in ASCII_ONLY_KEYS else [])
        if key.type == "string":
            bad += encodings
        elif key.type == "array":
            bad += [[value] for value in encodings]
        out += [(key.name, value) for value in bad]
    return out


@pytest.mark.parametrize(("key", "value"), cases(), ids=lambda v: repr(v)[:30])
def test_every_key_refuses_wrong_types_bounds_and_encodings_naming_the_key(key: str, value: Any):
    assert f"{PROJECT}:{key}" in problems_with(**{key: value})


def test_integer_keys_have_bounds_both_ways():
    """Every integer key refuses -1 and 10^12 (the table above relies on it)."""
    for key in (k for k in KEYS if k.type == "integer"):
        for value in OUT_OF_BOUNDS["integer"]:
            changes: dict[str, Any] = {key.name: value}
            assert f"{PROJECT}:{key.name}" in problems_with(**changes), (key.name, value)


# --- probe client ------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "value"), [
    ("probeClientId", ""), ("probeClientId", "has space"), ("probeClientId", "x" * 1025),
    ("probeClientSecretName", ""), ("probeClientSecretName", "bad name!"), ("probeClientSecretName", "a#b"),
    ("probeClientSecretName", "x" * 513),
])
def test_probe_client_settings_every_probe_needs_are_checked(key: str, value: str):
    assert f"{PROJECT}:{key} = " in problems_with(**{key: value})


@pytest.mark.parametrize("client_id", ["mcp-edge-probe", "https://probe.example/client.json", "a"])
def test_probe_client_ids_of_either_kind_are_accepted(client_id: str):
    assert accepted(probeClientId=client_id).auth.probe_client_id == client_id


# --- mcpPath -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/.well-known/mcp", "/.well-known", "/.well-known/oauth-protected-resource/mcp",
                                  "/mcp/..", "/./mcp", "/a/../mcp", "/mcp/.", "mcp", "/mcp/", "//mcp"])
def test_mcp_paths_the_edge_would_not_check_or_that_are_not_normalized_are_refused(path: str):
    assert f"{PROJECT}:mcpPath = {path!r}" in problems_with(mcpPath=path)


@pytest.mark.parametrize("path", ["/mcp", "/v1/mcp", "/mcp.v2", "/.wellknown", "/well-known/mcp", "/..mcp"])
def test_normal_mcp_paths_are_accepted(path: str):
    assert accepted(mcpPath=path).mcp_path == path


# --- what is only known once rendered, checked from the config ----------------------------


def test_an_audience_that_makes_the_viewer_function_too_large_is_refused_naming_it():
    # The shipped function is about 4 KB: two values near the 4096-character bound overflow it.
    message = problems_with(authAudience="https://mcp.example/" + "a" * 3900, authIssuer="https://i.example/" + "i" * 3900)
    assert "authAudience" in message and "CloudFront Functions' 10240-byte limit" in message


def test_a_token_url_that_overflows_the_probes_lambda_environment_is_refused_naming_it():
    message = problems_with(authTokenUrl="https://issuer.example/" + "t" * 3800)
    assert "authTokenUrl" in message and "the probe function's environment" in message and f"over Lambda's {LAMBDA_ENVIRONMENT_BYTES}-byte limit" in message


def test_the_program_refuses_them_before_registering_any_resource():
    # load_from_pulumi is the program's first statement: a ConfigError from it means
    # nothing was registered (the defect: 86 resources, then a CloudFront API error).
    with pytest.raises(ConfigError, match="authAudience"):
        run_program("prod", config_overrides={"authAudience": "https://mcp.example/" + "a" * 3990})


def environment_sizes(run: ProgramRun) -> dict[str, list[int]]:
    sizes: dict[str, list[int]] = {"origin": [], "probe": [], "consumer": []}
    for function in run.of_type("aws:lambda/function:Function"):
        env = function.get("environment")
        while isinstance(env, dict) and env.get(rpc._special_sig_key) == rpc._special_secret_sig:
            env = env["value"]
        variables = (env or {}).get("variables") or {}
        while isinstance(variables, dict) and variables.get(rpc._special_sig_key) == rpc._special_secret_sig:
            variables = variables["value"]
        if not variables:
            continue  # the Lambda@Edge router has no environment
        kind = "origin" if "-origin-" in function.name else "consumer" if "consumer" in function.name else "probe"
        sizes[kind].append(sum(len(k.encode()) + len(str(v).encode()) for k, v in variables.items()))
    return sizes


LONG_VALUES = {
    "authIssuer": "https://issuer.example/" + "i" * 600,
    "authAudience": "https://mcp.acme.example/" + "a" * 500,
    "authJwksUrl": "https://issuer.example/" + "j" * 900,
    "authTokenUrl": "https://issuer.example/" + "t" * 700,
    "probeClientSecretName": "mcp-edge/" + "s" * 400,
}


@pytest.mark.parametrize("overrides", [{}, LONG_VALUES], ids=["prod", "long values"])
def test_the_environment_budget_is_an_upper_bound_of_what_the_program_renders(overrides: dict[str, Any]):
    run = run_program("prod", config_overrides=overrides)
    config = accepted(**overrides)
    budget = environment_budget(config)
    for kind, sizes in environment_sizes(run).items():
        assert sizes, f"no {kind} function found"
        assert max(sizes) <= budget[kind], (kind, sizes, budget[kind])


def test_prod_is_within_every_rendered_limit():
    assert load_from_stack_file("prod").auth.audience


@pytest.mark.parametrize("secret", ["", "x" * 4097, "tab\there", "caf\u00e9-secret"])
def test_a_probe_client_secret_outside_printable_ascii_is_refused_without_showing_it(secret: str):
    values = {k: v for k, v in PROD.items() if k != "probeClientSecretName"}
    if not secret:  # empty: no secret to create, the named one must exist
        config = build_stack_config(values.get, "hostile", probe_client_secret=secret)
        assert not config.auth.creates_probe_client_secret
        return
    with pytest.raises(ConfigError) as refused:
        build_stack_config(values.get, "hostile", probe_client_secret=secret)
    message = str(refused.value)
    assert f"{PROJECT}:probeClientSecret is {len(secret)} characters" in message and secret not in message


def test_a_probe_client_secret_gets_the_stacks_own_secret_name():
    values = {k: v for k, v in PROD.items() if k != "probeClientSecretName"}
    config = build_stack_config(values.get, "hostile", probe_client_secret="s" * 40)
    assert config.auth.creates_probe_client_secret
    assert config.auth.probe_client_secret_name == "acme-mcp-hostile-probe-client-secret"
