"""Stack config: the prod stack loads, and every invalid case is refused with a
message that names the key, the bad value and what is allowed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge.regions import AWS_REGIONS
from stack_config.checks import PROJECT_ROOT, ConfigError, build_stack_config
from stack_config.keys import KEYS
from stack_config.loading import load_from_stack_file, read_stack_file, stack_file_path

PROD = read_stack_file(stack_file_path("prod"))


def build(**changes: Any):
    values = {**PROD, **changes}
    return build_stack_config(lambda k: values.get(k), "test")


def problems_of(**changes: Any) -> str:
    with pytest.raises(ConfigError) as info:
        build(**changes)
    return str(info.value)


def test_prod_stack_loads_with_four_regions_and_overrides():
    config = load_from_stack_file("prod")
    assert config.regions == ("us-east-1", "eu-west-1", "ap-southeast-1", "ap-northeast-1")
    assert config.default_region == "us-east-1"
    assert config.origin_for("us-east-1").memory_mb == 2048
    assert config.origin_for("us-east-1").provisioned_max == 40
    assert config.origin_for("eu-west-1") == config.origin
    assert config.probes.regions == config.regions
    assert config.edge.custom_domain == "mcp.acme.example"
    assert config.autoscaling.utilization_target == 0.7


def test_config_is_immutable():
    config = load_from_stack_file("prod")
    with pytest.raises(AttributeError):
        config.regions = ("us-east-1",)  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.origin_overrides["eu-west-1"] = config.origin  # type: ignore[index]


def test_defaults_apply_when_only_required_keys_are_set():
    required = {"authIssuer": "https://issuer.example/", "authAudience": "aud", "authJwksUrl": "https://issuer.example/jwks"}
    config = build_stack_config(required.get, "minimal")
    assert config.regions == ("us-east-1",)
    assert config.origin.provisioned_min == 2 and config.origin.provisioned_max == 20
    assert config.autoscaling.scale_in_cooldown_s == 300 and config.autoscaling.scale_out_cooldown_s == 30
    assert config.edge.origin_read_timeout_s == 60
    assert config.probes.interval_s == 10
    assert config.auth.token_url == "https://issuer.example/oauth/token"


def test_missing_required_key_is_named():
    with pytest.raises(ConfigError) as info:
        build_stack_config({"authIssuer": "https://i.example/"}.get, "x")
    assert "mcp-edge:authAudience is required" in str(info.value)
    assert "mcp-edge:authJwksUrl is required" in str(info.value)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"regions": []}, "mcp-edge:regions is empty"),
        ({"regions": ["us-east-1", "mars-north-1"]}, "contains 'mars-north-1', which is not an AWS region"),
        ({"regions": ["us-east-1", "eu-west-1", "us-east-1"]}, "lists 'us-east-1' twice"),
        ({"defaultRegion": "eu-central-1"}, "defaultRegion = 'eu-central-1': must be one of regions"),
        ({"probeRegions": ["moon-1"]}, "probeRegions contains 'moon-1'"),
        ({"originProvisionedMin": 30, "originProvisionedMax": 20}, "originProvisionedMin = 30: must not exceed originProvisionedMax = 20"),
        ({"originProvisionedMax": 300, "originReservedConcurrency": 200}, "originProvisionedMax = 300: must not exceed originReservedConcurrency = 200"),
        ({"originUtilizationTarget": "0"}, "originUtilizationTarget = '0': must be a number in (0, 1]"),
        ({"originUtilizationTarget": "1.5"}, "originUtilizationTarget = '1.5': must be a number in (0, 1]"),
        ({"originUtilizationTarget": "high"}, "originUtilizationTarget = 'high': must be a number in (0, 1]"),
        ({"originTimeoutSeconds": 901}, "originTimeoutSeconds = 901: must be between 1 and 900"),
        ({"originTimeoutSeconds": 0}, "originTimeoutSeconds = 0: must be between 1 and 900"),
        ({"originMemoryMb": 64}, "originMemoryMb = 64: must be between 128 and 10240"),
        ({"probeTimeoutSeconds": 1000}, "probeTimeoutSeconds = 1000: must be between 5 and 900"),
        ({"consumerTimeoutSeconds": 0}, "consumerTimeoutSeconds = 0: must be between 1 and 900"),
        ({"probeDeadlineSeconds": 30, "probeTimeoutSeconds": 30}, "probeDeadlineSeconds = 30: must be at least 1 and below probeTimeoutSeconds = 30"),
        ({"edgeOriginReadTimeoutSeconds": 121}, "edgeOriginReadTimeoutSeconds = 121: must be between 1 and 120 seconds (CloudFront's origin response timeout; above 60 only after an increase of the account's 'Response timeout per origin' quota"),
        ({"edgeOriginReadTimeoutSeconds": 180}, "edgeOriginReadTimeoutSeconds = 180: must be between 1 and 120"),
        ({"edgeOriginReadTimeoutSeconds": 0}, "edgeOriginReadTimeoutSeconds = 0: must be between 1 and 120"),
        ({"edgeOriginReadTimeoutSeconds": 20}, "originTimeoutSeconds = 300 exceeds edgeOriginReadTimeoutSeconds = 20: a call that long survives the edge only by streaming, and the origin's SSE keep-alive comes every 15 s; set edgeOriginReadTimeoutSeconds to at least 30 or the timeout to at most 20"),
        ({"edgeOriginKeepaliveSeconds": 61}, "edgeOriginKeepaliveSeconds = 61: must be between 1 and 60"),
        ({"certificateArn": ""}, "customDomain = 'mcp.acme.example' needs mcp-edge:certificateArn"),
        ({"customDomain": "", }, "certificateArn is set but mcp-edge:customDomain is empty"),
        (
            {"certificateArn": "arn:aws:acm:eu-west-1:123456789012:certificate/4f9d2a61-8c3e-4b7a-9e51-2d6f0c8b7a13"},
            "is in eu-west-1: CloudFront only uses ACM certificates in us-east-1",
        ),
        ({"certificateArn": "not-an-arn"}, "certificateArn = 'not-an-arn': must be an ACM certificate ARN"),
        ({"authIssuer": "http://auth.acme.example/"}, "authIssuer = 'http://auth.acme.example/': must be an https:// URL"),
        ({"authJwksUrl": "auth.acme.example/jwks"}, "authJwksUrl = 'auth.acme.example/jwks': must be an https:// URL"),
        ({"authTokenUrl": "ftp://x"}, "authTokenUrl = 'ftp://x': must be an https:// URL"),
        ({"authAlgorithms": ["RS256", "none"]}, "authAlgorithms contains 'none'"),
        ({"authAlgorithms": ["HS256"]}, "authAlgorithms contains 'HS256'"),
        ({"authAlgorithms": []}, "authAlgorithms is empty"),
        ({"logRetentionDays": 10}, "logRetentionDays = 10: must be one of 1, 3, 5"),
        ({"edgePriceClass": "PriceClass_Cheap"}, "edgePriceClass = 'PriceClass_Cheap': must be one of PriceClass_All"),
        ({"probeIntervalSeconds": 45}, "probeIntervalSeconds = 45: must be one of 10, 12, 15, 20, 30, 60 seconds"),
        ({"serverId": "Acme MCP"}, "serverId = 'Acme MCP': must be 1-31 lower-case letters"),
        ({"mcpPath": "mcp/"}, "mcpPath = 'mcp/': must be an absolute path"),
        ({"alertEmail": "oncall"}, "alertEmail = 'oncall': must be an e-mail address"),
        ({"originMemoryMb": "lots"}, "originMemoryMb = 'lots': must be an integer"),
        ({"regions": "us-east-1"}, "regions = 'us-east-1': must be a list of strings"),
        ({"originOverrides": ["eu-central-1:memoryMb=2048"]}, "region 'eu-central-1' is not in mcp-edge:regions"),
        ({"originOverrides": ["eu-west-1:memory=2048"]}, "'memory=2048' is not key=value with key one of memoryMb"),
        ({"originOverrides": ["eu-west-1"]}, "must look like 'REGION:key=value[,key=value]'"),
        ({"originOverrides": ["eu-west-1:provisionedMax=500"]}, "originOverrides[eu-west-1].provisionedMax = 500: must not exceed"),
        ({"originOverrides": ["eu-west-1:memoryMb=1", "eu-west-1:memoryMb=2"]}, "overridden twice"),
    ],
)
def test_invalid_config_is_refused_with_a_message_naming_key_value_and_rule(changes, expected):
    assert expected in problems_of(**changes)


def test_an_origin_timeout_above_the_read_timeout_is_accepted_only_when_keep_alives_fit():
    # Given the prod stack's 300 s function timeout, when the edge's read timeout leaves
    # room for two SSE keep-alives, then the stack is accepted; with less, only origins
    # that cannot outlive the read timeout are.
    assert build(edgeOriginReadTimeoutSeconds=30).origin.timeout_s == 300
    short = build(edgeOriginReadTimeoutSeconds=20, originTimeoutSeconds=20)
    assert short.origin.timeout_s == short.edge.origin_read_timeout_s == 20
    message = problems_of(edgeOriginReadTimeoutSeconds=20, originTimeoutSeconds=20,
                          originOverrides=["us-east-1:timeoutSeconds=90", "eu-west-1:timeoutSeconds=15"])
    assert "originOverrides[us-east-1].timeoutSeconds = 90 exceeds edgeOriginReadTimeoutSeconds = 20" in message
    assert "eu-west-1" not in message and message.count(" exceeds ") == 1


def test_every_problem_is_reported_at_once():
    message = problems_of(regions=["us-east-1", "us-east-1"], originUtilizationTarget="2", edgePriceClass="x")
    assert "twice" in message and "originUtilizationTarget" in message and "edgePriceClass" in message


def test_unknown_key_in_stack_file_is_refused(tmp_path):
    path = tmp_path / "Pulumi.typo.yaml"
    path.write_text("config:\n  mcp-edge:region: us-east-1\n  aws:region: us-east-1\n")
    with pytest.raises(ConfigError, match="mcp-edge:region is not a key of this project"):
        read_stack_file(path)


def test_values_arrive_as_engine_strings_too():
    """pulumi.Config hands arrays over as JSON text and numbers as strings."""
    as_strings = {k: (v if isinstance(v, str) else json.dumps(v)) for k, v in PROD.items()}
    assert build_stack_config(as_strings.get, "prod") == load_from_stack_file("prod")


@given(st.lists(st.sampled_from(sorted(AWS_REGIONS)), min_size=1, max_size=8, unique=True))
def test_any_list_of_distinct_known_regions_is_accepted(regions):
    config = build(regions=regions, defaultRegion="", originOverrides=[], probeRegions=[])
    assert config.regions == tuple(regions)
    assert config.default_region == regions[0]
    assert config.probes.regions == tuple(regions)


@given(st.integers(0, 50), st.integers(0, 50), st.integers(0, 60))
def test_provisioned_bounds_are_accepted_exactly_when_ordered(low, high, reserved):
    # reserved 0 stands for the key unset: no reservation, so no upper bound from it (the preflight
    # checks the account's pool)
    changes = {"originProvisionedMin": low, "originProvisionedMax": high,
               "originReservedConcurrency": reserved or None, "originOverrides": []}
    if low <= high and (reserved == 0 or high <= reserved):
        assert build(**changes).origin.provisioned_max == high
    else:
        with pytest.raises(ConfigError):
            build(**changes)


def test_reserved_concurrency_0_is_refused_naming_the_key_and_saying_to_remove_it():
    # Lambda throttles every call of a function that reserves 0: it could never serve.
    problems = problems_of(originReservedConcurrency=0)
    assert "mcp-edge:originReservedConcurrency = 0: Lambda would throttle every call" in problems
    assert "remove the key to reserve none" in problems


def test_reserved_concurrency_unset_reserves_none():
    assert build(originReservedConcurrency=None).origin.reserved_concurrency == 0


def test_an_override_reserving_0_is_refused_naming_its_entry():
    problems = problems_of(originOverrides=["eu-west-1:reservedConcurrency=0"])
    assert "mcp-edge:originOverrides[eu-west-1].reservedConcurrency = 0: Lambda would throttle every call" in problems


def test_every_key_has_a_description_and_a_known_type():
    for key in KEYS:
        assert key.description and key.type in ("string", "integer", "boolean", "array", "object")


# --- failover (region health votes) ---------------------------------------------------


def test_failover_defaults_to_a_majority_of_the_probe_regions_after_two_failed_and_three_good_rounds():
    config = build()
    assert (config.failover.quorum, config.failover.failure_threshold, config.failover.recovery_threshold) == (0, 2, 3)
    assert config.failover.quorum_of(len(config.probes.regions)) == len(config.probes.regions) // 2 + 1
    assert config.failover.quorum_of(1) == 1


def test_failover_settings_are_taken_as_set():
    config = build(failoverQuorum=1, failoverFailureThreshold="4", failoverRecoveryThreshold=5)
    assert (config.failover.quorum_of(4), config.failover.failure_threshold, config.failover.recovery_threshold) == (1, 4, 5)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"failoverQuorum": 5}, "failoverQuorum = 5: must be between 0 (a majority) and the number of probe regions, 4"),
        ({"failoverQuorum": 2, "probeRegions": ["eu-west-1"]}, "failoverQuorum = 2: must be between 0 (a majority) and "
                                                              "the number of probe regions, 1 (eu-west-1)"),
        ({"failoverQuorum": -1}, "failoverQuorum = -1"),
        ({"failoverFailureThreshold": 0}, "failoverFailureThreshold = 0: must be between 1 and 60 probe rounds"),
        ({"failoverRecoveryThreshold": 61}, "failoverRecoveryThreshold = 61: must be between 1 and 60 probe rounds"),
        ({"failoverQuorum": "most"}, "failoverQuorum = 'most': must be an integer"),
    ],
)
def test_invalid_failover_settings_are_refused_naming_the_key(changes, expected):
    assert expected in problems_of(**changes)


# --- originColdStart -----------------------------------------------------------------------

# Prod without its provisioned-concurrency keys (what snapstart and none refuse).
WITHOUT_PROVISIONED = {
    "originProvisionedMin": None, "originProvisionedMax": None, "originUtilizationTarget": None,
    "originScaleInCooldownSeconds": None, "originScaleOutCooldownSeconds": None,
    "originOverrides": ["us-east-1:memoryMb=2048"],
}


def test_cold_start_defaults_to_provisioned_with_the_stacks_provisioned_sizing():
    config = build()
    assert config.cold_start == "provisioned"
    assert config.origin_for("us-east-1").provisioned_min == 4


@pytest.mark.parametrize("mode", ["snapstart", "none"])
def test_modes_without_provisioned_concurrency_size_every_origin_at_zero(mode: str):
    config = build(**WITHOUT_PROVISIONED, originColdStart=mode, lwaLayerVersion=30)
    assert config.cold_start == mode
    for region in config.regions:
        sizing = config.origin_for(region)
        assert (sizing.provisioned_min, sizing.provisioned_max) == (0, 0)
    assert config.origin_for("us-east-1").memory_mb == 2048


def test_snapstart_with_provisioned_concurrency_keys_names_both_keys():
    text = problems_of(originColdStart="snapstart", lwaLayerVersion=30)
    for key in ("originProvisionedMin = 2", "originProvisionedMax = 20", "originUtilizationTarget = '0.7'",
                "originScaleInCooldownSeconds = 300", "originScaleOutCooldownSeconds = 30"):
        assert f"mcp-edge:originColdStart = 'snapstart' cannot be combined with mcp-edge:{key}" in text
    assert "originOverrides entry 'us-east-1:memoryMb=2048,provisionedMin=4,provisionedMax=40' (provisionedMin)" in text
    assert "Lambda refuses SnapStart together with it" in text


def test_none_refuses_provisioned_keys_too_but_accepts_an_explicit_zero():
    assert "cannot be combined with mcp-edge:originProvisionedMin = 3" in problems_of(
        **{**WITHOUT_PROVISIONED, "originProvisionedMin": 3}, originColdStart="none")
    config = build(**{**WITHOUT_PROVISIONED, "originProvisionedMin": 0, "originProvisionedMax": 0}, originColdStart="none")
    assert config.origin.provisioned_min == 0


def test_snapstart_needs_the_adapter_release_that_relays_its_hooks():
    text = problems_of(**WITHOUT_PROVISIONED, originColdStart="snapstart", lwaLayerVersion=28)
    assert "mcp-edge:originColdStart = 'snapstart' needs mcp-edge:lwaLayerVersion 30 or later, not 28" in text


def test_snapstart_refuses_a_region_without_snapstart():
    text = problems_of(**{**WITHOUT_PROVISIONED, "originOverrides": []}, originColdStart="snapstart",
                       lwaLayerVersion=30, regions=["us-east-1", "ap-southeast-6"])
    assert "mcp-edge:regions containing 'ap-southeast-6': Lambda has no SnapStart there" in text


@given(st.text(min_size=1, max_size=20).filter(lambda s: s.strip() not in ("provisioned", "snapstart", "none")))
def test_an_unknown_cold_start_mode_is_refused_with_the_modes(mode: str):
    text = problems_of(originColdStart=mode)
    assert "originColdStart" in text


# --- server ---------------------------------------------------------------------------------

DIGEST = "sha256:" + "0f" * 32
FASTMCP = {"source": "examples/fastmcp", "runtime": "python3.13", "command": "python3 server.py"}


def test_the_server_defaults_to_the_demo_and_prod_names_it_explicitly():
    from stack_config.keys import DEMO_SERVER, DEMO_SERVER_SOURCE

    required = {"authIssuer": "https://issuer.example/", "authAudience": "aud", "authJwksUrl": "https://issuer.example/jwks"}
    default = build_stack_config(required.get, "minimal").server
    assert (default.source, default.runtime, default.path) == (DEMO_SERVER_SOURCE, "python3.13", "/mcp")
    assert default.command == DEMO_SERVER["command"]
    prod = load_from_stack_file("prod").server
    # prod names the demo explicitly, with the tool scopes its whoami needs.
    assert (prod.source, prod.runtime, prod.command, prod.path) == (default.source, default.runtime, default.command,
                                                                   default.path)
    assert dict(prod.tool_scopes) == {"whoami": ("mcp:identity",)} and not default.tool_scopes


def test_a_folder_server_with_tool_scopes_is_taken_as_set():
    server = build(server={**FASTMCP, "path": "/v1/mcp", "readinessPath": "/healthz",
                           "toolScopes": {"admin_runtime_info": ["mcp:admin"], "hash_rounds": "mcp:compute"}}).server
    assert (server.kind, server.source, server.runtime, server.command) == (
        "source", "examples/fastmcp", "python3.13", "python3 server.py")
    assert (server.path, server.readiness_path) == ("/v1/mcp", "/healthz")
    assert dict(server.tool_scopes) == {"admin_runtime_info": ("mcp:admin",), "hash_rounds": ("mcp:compute",)}


@pytest.mark.parametrize(("value", "expected"), [(True, True), ("true", True), (False, False), ("false", False)])
def test_get_stream_is_a_boolean_opt_in_off_by_default(value: Any, expected: bool):
    assert build(server={**FASTMCP, "getStream": value}).server.get_stream is expected
    assert build(server=FASTMCP).server.get_stream is False


def test_a_pushed_image_is_taken_by_digest():
    server = build(server={"imageDigest": DIGEST}).server
    assert (server.kind, server.image_digest, server.path) == ("imageDigest", DIGEST, "/mcp")


def test_the_server_arrives_as_engine_json_too():
    assert build(server=json.dumps(FASTMCP)).server == build(server=FASTMCP).server


@pytest.mark.parametrize(("server", "expected"), [
    ({**FASTMCP, "runtim": "python3.13"}, "mcp-edge:server.runtim is not a key of server; did you mean runtime?"),
    ({**FASTMCP, "runtime": "python3.9"}, "mcp-edge:server.runtime = 'python3.9': must be one of python3.13, "
                                          "python3.12, nodejs22.x, nodejs24.x, java21, provided.al2023"),
    ({**FASTMCP, "command": ""}, "mcp-edge:server.command = '': must be a non-empty string"),
    ({**FASTMCP, "command": "a\nb"}, "mcp-edge:server.command = 'a\\nb': must be one line"),
    ({"source": "examples/missing", "runtime": "python3.13", "command": "x"},
     "mcp-edge:server.source = 'examples/missing': " + str(PROJECT_ROOT / "examples/missing") + " does not exist "
     "(named from the stack file's folder, " + str(PROJECT_ROOT) + "); name an existing folder"),
    ({"source": "/no/such/server", "runtime": "python3.13", "command": "x"},
     "mcp-edge:server.source = '/no/such/server': /no/such/server does not exist; name an existing folder, relative "
     "to the stack file's folder or absolute"),
    ({"source": "README.md", "runtime": "python3.13", "command": "x"},
     "mcp-edge:server.source = 'README.md': " + str(PROJECT_ROOT / "README.md") + " is a file, not a folder"),
    ({"source": "examples/typescript", "runtime": "python3.13", "command": "x"},
     "mcp-edge:server.source = 'examples/typescript': must hold requirements.txt"),
    ({"source": "examples/fastmcp", "runtime": "nodejs22.x", "command": "node app.mjs"},
     "must hold package.json and package-lock.json"),
    ({"source": "examples/fastmcp", "runtime": "java21", "command": "java -jar a.jar"}, "must hold the built artefact"),
    ({"source": "examples/fastmcp"}, "mcp-edge:server.runtime is required with server.source"),
    ({**FASTMCP, "imageDigest": DIGEST}, "mcp-edge:server must give exactly one of source"),
    ({"path": "/mcp"}, "(given: none)"),
    ({"imageDigest": "latest"}, "mcp-edge:server.imageDigest = 'latest': must be an image digest"),
    ({"imageDigest": DIGEST, "command": "x"}, "mcp-edge:server.command is for a folder server"),
    ({"image": "examples/fastmcp"}, "mcp-edge:server.image = 'examples/fastmcp': must be a folder holding a Dockerfile"),
    ({**FASTMCP, "path": "mcp/"}, "mcp-edge:server.path = 'mcp/': must be an absolute path"),
    ({**FASTMCP, "readinessPath": "/.well-known/x"}, "mcp-edge:server.readinessPath = '/.well-known/x': must not be"),
    ({**FASTMCP, "getStream": "yes"}, "mcp-edge:server.getStream = 'yes': must be true or false"),
    ({**FASTMCP, "getStream": 1}, "mcp-edge:server.getStream = 1: must be true or false"),
    ({**FASTMCP, "toolScopes": ["a"]}, "mcp-edge:server.toolScopes = ['a']: must be a map of tool names"),
    ({**FASTMCP, "toolScopes": {"bad tool": ["s"]}}, "mcp-edge:server.toolScopes names the tool 'bad tool'"),
    ({**FASTMCP, "toolScopes": {"t": []}}, "mcp-edge:server.toolScopes.t = []: must be a non-empty list"),
    ({**FASTMCP, "toolScopes": {"t": ["a b"]}}, "mcp-edge:server.toolScopes.t contains 'a b'"),
    ("not json", "mcp-edge:server = 'not json': must be an object"),
])
def test_a_bad_server_is_refused_naming_its_key_path(server: Any, expected: str):
    assert expected in problems_of(server=server)


def test_snapstart_needs_a_runtime_that_has_it_or_an_image_with_a_recent_adapter():
    text = problems_of(**WITHOUT_PROVISIONED, originColdStart="snapstart", lwaLayerVersion=30,
                       server={"source": "examples/typescript", "runtime": "nodejs22.x", "command": "node app.mjs"})
    assert "mcp-edge:server.runtime = 'nodejs22.x': Lambda SnapStart supports python3.12, python3.13, java21" in text
    # Lambda SnapStart takes container images whose runtime client (the Web Adapter 1.1.0+) takes part.
    config = build(**WITHOUT_PROVISIONED, originColdStart="snapstart", lwaLayerVersion=30, server={"imageDigest": DIGEST})
    assert config.cold_start == "snapstart"
    assert "needs mcp-edge:lwaLayerVersion 30 or later, not 28" in problems_of(
        **WITHOUT_PROVISIONED, originColdStart="snapstart", lwaLayerVersion=28, server={"imageDigest": DIGEST})


def test_an_image_built_here_needs_an_adapter_release_with_a_known_image():
    assert "needs the Web Adapter image of mcp-edge:lwaLayerVersion = 29" in problems_of(
        server={"image": "tests/components/fixtures/image_server"}, lwaLayerVersion=29)


def test_an_adapter_older_than_the_authorization_source_is_refused():
    assert "mcp-edge:lwaLayerVersion = 22: must be between 23 and 1000" in problems_of(lwaLayerVersion=22)


PROVISIONED_VALUES = {"originProvisionedMin": 1, "originProvisionedMax": 5, "originUtilizationTarget": "0.5",
                      "originScaleInCooldownSeconds": 60, "originScaleOutCooldownSeconds": 10}


@given(keys=st.sets(st.sampled_from(sorted(PROVISIONED_VALUES)), min_size=1), mode=st.sampled_from(["snapstart", "none"]))
def test_every_provisioned_key_set_with_a_mode_without_it_is_named_with_the_mode(keys: set[str], mode: str):
    changes = {**WITHOUT_PROVISIONED, **{k: PROVISIONED_VALUES[k] for k in keys}}
    text = problems_of(**changes, originColdStart=mode, lwaLayerVersion=30)
    for key in PROVISIONED_VALUES:
        named = f"mcp-edge:originColdStart = {mode!r} cannot be combined with mcp-edge:{key} = " in text
        assert named == (key in keys), key


def test_the_operators_keys_default_and_refuse_a_bad_value_naming_the_key():
    config = build()
    assert config.origin_tracing is True
    assert (config.alarms.origin_error_rate_percent, config.alarms.origin_min_invocations) == (5, 20)
    changed = build(originTracing=False, alarmOriginErrorRatePercent=12, alarmOriginMinInvocations=100)
    assert changed.origin_tracing is False
    assert (changed.alarms.origin_error_rate_percent, changed.alarms.origin_min_invocations) == (12, 100)
    assert "mcp-edge:alarmOriginErrorRatePercent = 0: must be between 1 and 100" in problems_of(
        alarmOriginErrorRatePercent=0)
    assert "mcp-edge:alarmOriginMinInvocations = 0: must be between 1 and 1000000" in problems_of(
        alarmOriginMinInvocations=0)
    assert "mcp-edge:originTracing" in problems_of(originTracing="yes")


# --- regions of other partitions ----------------------------------------------------------------

ALLOWED_REGIONS = f"(allowed: {', '.join(sorted(AWS_REGIONS))})"


@pytest.mark.parametrize(("region", "partition"), [
    ("cn-north-1", "AWS China (partition aws-cn)"),
    ("cn-northwest-1", "AWS China (partition aws-cn)"),
    ("us-gov-west-1", "AWS GovCloud (US) (partition aws-us-gov)"),
    ("us-gov-east-1", "AWS GovCloud (US) (partition aws-us-gov)"),
    ("us-iso-east-1", "AWS ISO (US) (partition aws-iso)"),
    ("us-isob-east-1", "AWS ISOB (US) (partition aws-iso-b)"),
    ("eu-isoe-west-1", "AWS ISOE (Europe) (partition aws-iso-e)"),
    ("eusc-de-east-1", "AWS European Sovereign Cloud (partition aws-eusc)"),
])
def test_a_region_of_another_partition_is_named_as_such_with_no_lookalike_suggested(region, partition):
    message = problems_of(regions=["us-east-1", region], originOverrides=[])
    assert f"mcp-edge:regions contains {region!r}" in message
    assert f"it is a region of {partition}" in message and "commercial partition (aws) only" in message
    assert "did you mean" not in message  # not eu-north-1 for cn-north-1, nor us-west-1 for us-gov-west-1
    assert ALLOWED_REGIONS in message


def test_a_mistyped_region_keeps_its_suggestion_and_lists_the_allowed_regions():
    message = problems_of(probeRegions=["eu-wset-1"])
    assert "mcp-edge:probeRegions contains 'eu-wset-1'" in message
    assert "did you mean eu-west-1?" in message and ALLOWED_REGIONS in message


def test_the_other_partitions_are_botocores():
    """Every partition botocore knows besides aws is named, with botocore's own pattern."""
    import os

    import botocore

    from stack_config.checks import OTHER_PARTITIONS
    with open(os.path.join(os.path.dirname(botocore.__file__), "data", "partitions.json")) as f:
        partitions = {p["id"]: p["regionRegex"] for p in json.load(f)["partitions"]}
    assert {pid: pattern for pid, _, pattern in OTHER_PARTITIONS} == {k: v for k, v in partitions.items() if k != "aws"}


@given(st.one_of(
    st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=20),
    st.from_regex(r"\A(cn|us-gov|us-iso|us-isob|us-isof|eu-isoe|eusc-de|us|eu|ap)-[a-z]{2,10}-[0-9]\Z"),
).filter(lambda r: r not in AWS_REGIONS))
def test_any_region_not_allowed_is_refused_naming_the_key_and_listing_the_allowed_ones(region):
    message = problems_of(regions=["us-east-1", region], originOverrides=[])
    # One problem line names the key and the value (stripped, or in the list as given when its
    # characters are refused) and lists the allowed regions.
    assert any(line.startswith("  - mcp-edge:regions ") and (repr(region.strip()) in line or repr(region) in line)
               and line.endswith(ALLOWED_REGIONS) for line in message.splitlines()), message


def test_results_table_home_region_of_another_partition_is_named_as_such():
    message = problems_of(resultsTableHomeRegion="us-gov-west-1")
    assert "mcp-edge:resultsTableHomeRegion = 'us-gov-west-1'" in message
    assert "AWS GovCloud (US) (partition aws-us-gov)" in message and ALLOWED_REGIONS in message
    assert "did you mean" not in message


def test_a_server_folder_with_a_link_out_is_refused_by_the_stack_checks(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """Before any resource exists: the stack checks walk the folder as the package build does."""
    monkeypatch.setattr("stack_config.checks.PROJECT_ROOT", tmp_path)
    source = tmp_path / "srv"
    (source / "data").mkdir(parents=True)
    (source / "requirements.txt").write_text("")
    (tmp_path / "secret").mkdir()
    (source / "data" / "keys").symlink_to(tmp_path / "secret")
    (source / "loop").symlink_to(".")
    message = problems_of(server={"source": "srv", "runtime": "python3.13", "command": "python3 server.py"})
    assert (f"mcp-edge:server.source = 'srv': holds what cannot be packaged: 'data/keys' is a link to "
            f"'{tmp_path}/secret', which leads outside the folder") in message
    assert "'loop' is a link to '.', a folder that holds it (a cycle)" in message
