"""McpOrigin under Pulumi mocks: the real program (prod stack), every region, and the
component alone for every runtime family (python, node, java21, provided.al2023) and
both image paths.

Each property of a regional origin is asserted for every region of the prod stack,
with that region's sizing (Pulumi.prod.yaml overrides us-east-1 and ap-northeast-1).
"""

from __future__ import annotations

import json
import platform
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pulumi.runtime import rpc

from components.origin import (
    CORS_ALLOW_HEADERS,
    LWA_LAYER_ACCOUNT,
    READINESS_TIMEOUT_ENV,
    SNAPSTART_READINESS_TIMEOUT_S,
    McpOriginArgs,
    check_origin_args,
    lwa_layer_arn,
    url_host,
)
from components.validation import ComponentArgsError
from stack_config.loading import load_from_stack_file
from tests.harness import ACCOUNT_ID, ProgramRun, Resource, run_program

PROD = load_from_stack_file("prod")
REGIONS = PROD.regions
FUNCTION = "aws:lambda/function:Function"
# The demo server's folder (it moves to examples/demo): the one place these tests name it.
DEMO_SOURCE = "examples/demo"
DEMO_SERVER = {"source": DEMO_SOURCE, "runtime": "python3.13", "command": "python3 -m uvicorn app:app --port $PORT"}

# What Pulumi.prod.yaml asks for, region by region (base 1024 MB, 2..20, 200 reserved).
EXPECTED_SIZING = {
    "us-east-1": {"memory": 2048, "min": 4, "max": 40},
    "eu-west-1": {"memory": 1024, "min": 2, "max": 20},
    "ap-southeast-1": {"memory": 1024, "min": 2, "max": 20},
    "ap-northeast-1": {"memory": 1024, "min": 1, "max": 10},
}


def unsecret(value: Any) -> tuple[bool, Any]:
    """(is_secret, plain value) of a recorded input."""
    if isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig:
        return True, value["value"]
    return False, value


def origin_of(prod: ProgramRun, region: str) -> Resource:
    return prod.one("mcpedge:index:McpOrigin", name_contains=f"-origin-{region}")


def child(prod: ProgramRun, region: str, typ: str, name_contains: str | None = None) -> Resource:
    found = [
        r for r in prod.children_of(origin_of(prod, region), typ)
        if name_contains is None or name_contains in r.name
    ]
    assert len(found) == 1, f"{region}: expected one {typ} ({name_contains}), found {[r.name for r in found]}"
    return found[0]


def function_of(prod: ProgramRun, region: str) -> Resource:
    return child(prod, region, FUNCTION)


def environment_of(prod: ProgramRun, region: str) -> tuple[bool, dict[str, str]]:
    secret, env = unsecret(function_of(prod, region)["environment"])
    return secret, env["variables"]


def test_prod_sizing_table_matches_the_stack_file():
    for region, want in EXPECTED_SIZING.items():
        sizing = PROD.origin_for(region)
        assert (sizing.memory_mb, sizing.provisioned_min, sizing.provisioned_max) == (
            want["memory"], want["min"], want["max"]
        )
    assert set(EXPECTED_SIZING) == set(REGIONS)


@pytest.mark.parametrize("region", REGIONS)
def test_one_origin_component_per_region_with_every_child_in_that_region(prod: ProgramRun, region: str):
    origin = origin_of(prod, region)
    assert origin.name == f"acme-mcp-origin-{region}"
    for r in prod.descendants_of(origin):
        if r.type.startswith("aws:iam/"):
            continue  # IAM is global
        assert r.region == region, f"{r.type} {r.name} is in {r.region}, not {region}"


@pytest.mark.parametrize("region", REGIONS)
def test_function_runs_python313_arm64_under_the_web_adapter_with_region_sizing(prod: ProgramRun, region: str):
    fn = function_of(prod, region)
    sizing = EXPECTED_SIZING[region]
    assert fn["name"] == f"acme-mcp-prod-origin-{region}"
    assert fn["runtime"] == "python3.13"
    assert fn["architectures"] == ["arm64"]
    assert fn["handler"] == "run.sh"
    assert fn["memorySize"] == sizing["memory"]
    assert fn["timeout"] == 300
    assert fn["reservedConcurrentExecutions"] == 200
    assert fn["publish"] is True
    assert fn["layers"] == [f"arn:aws:lambda:{region}:{LWA_LAYER_ACCOUNT}:layer:LambdaAdapterLayerArm64:25"]
    assert fn["code"].path.endswith(".zip")
    secret, env = environment_of(prod, region)
    assert not secret
    # The Web Adapter's settings only: nothing of ours that a server would have to understand.
    assert env == {
        "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap",
        "AWS_LWA_INVOKE_MODE": "response_stream",
        "AWS_LWA_PORT": "8080",
        "AWS_LWA_READINESS_CHECK_PATH": "/mcp",
        "AWS_LWA_AUTHORIZATION_SOURCE": "x-mcp-edge-authorization",
    }


@pytest.mark.parametrize("region", REGIONS)
def test_log_group_has_retention_and_is_the_functions_log_group(prod: ProgramRun, region: str):
    logs = child(prod, region, "aws:cloudwatch/logGroup:LogGroup")
    fn = function_of(prod, region)
    assert logs["name"] == f"/aws/lambda/acme-mcp-prod-origin-{region}"
    assert logs["retentionInDays"] == 90
    assert fn["loggingConfig"]["logGroup"] == logs["name"]
    assert any(dep.endswith(f"::{logs.name}") for dep in fn.options["dependencies"])
    policy = child(prod, region, "aws:iam/rolePolicy:RolePolicy")
    assert any(dep.endswith(f"::{policy.name}") for dep in fn.options["dependencies"])


@pytest.mark.parametrize("region", REGIONS)
def test_execution_role_is_least_privilege(prod: ProgramRun, region: str):
    role = child(prod, region, "aws:iam/role:Role")
    trust = json.loads(role["assumeRolePolicy"])
    assert trust["Statement"] == [
        {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ]
    assert not role.get("managedPolicyArns")
    assert not prod.descendants_of(origin_of(prod, region), "aws:iam/rolePolicyAttachment:RolePolicyAttachment")
    policy = json.loads(child(prod, region, "aws:iam/rolePolicy:RolePolicy")["policy"])
    logs = child(prod, region, "aws:cloudwatch/logGroup:LogGroup")
    assert policy["Statement"] == [
        {"Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": [f"{logs.outputs['arn']}:*"]},
        # Active tracing's segments (X-Ray has no resource-level permissions).
        {"Effect": "Allow", "Action": ["xray:PutTraceSegments", "xray:PutTelemetryRecords"], "Resource": ["*"]},
    ]
    assert function_of(prod, region)["role"] == role.outputs["arn"]


@pytest.mark.parametrize("region", REGIONS)
def test_origins_have_lambda_active_tracing(prod: ProgramRun, region: str):
    assert function_of(prod, region)["tracingConfig"] == {"mode": "Active"}


def test_origin_tracing_false_turns_tracing_and_its_permission_off():
    run = run_program("prod", config_overrides={"originTracing": False})
    for region in REGIONS:
        assert function_of(run, region)["tracingConfig"] == {"mode": "PassThrough"}
        policy = json.loads(child(run, region, "aws:iam/rolePolicy:RolePolicy")["policy"])
        assert [s["Action"] for s in policy["Statement"]] == [["logs:CreateLogStream", "logs:PutLogEvents"]]


def test_a_component_refuses_a_tracing_that_is_not_a_boolean():
    with pytest.raises(ComponentArgsError, match="tracing"):
        check_origin_args("o", minimal_origin_args(tracing="yes"))


@pytest.mark.parametrize("region", REGIONS)
def test_alias_live_points_at_the_published_version(prod: ProgramRun, region: str):
    alias = child(prod, region, "aws:lambda/alias:Alias")
    fn = function_of(prod, region)
    assert alias["name"] == "live"
    assert alias["functionName"] == fn["name"]
    assert alias["functionVersion"] == fn.outputs["version"] != "$LATEST"


@pytest.mark.parametrize("region", REGIONS)
def test_provisioned_concurrency_on_the_alias_left_to_auto_scaling(prod: ProgramRun, region: str):
    pc = child(prod, region, "aws:lambda/provisionedConcurrencyConfig:ProvisionedConcurrencyConfig")
    assert pc["functionName"] == f"acme-mcp-prod-origin-{region}"
    assert pc["qualifier"] == "live"
    assert pc["provisionedConcurrentExecutions"] == EXPECTED_SIZING[region]["min"]
    assert pc.options["ignoreChanges"] == ["provisionedConcurrentExecutions"]


@pytest.mark.parametrize("region", REGIONS)
def test_auto_scaling_target_and_policy_track_provisioned_utilization(prod: ProgramRun, region: str):
    target = child(prod, region, "aws:appautoscaling/target:Target")
    sizing = EXPECTED_SIZING[region]
    assert target["resourceId"] == f"function:acme-mcp-prod-origin-{region}:live"
    assert target["serviceNamespace"] == "lambda"
    assert target["scalableDimension"] == "lambda:function:ProvisionedConcurrency"
    assert (target["minCapacity"], target["maxCapacity"]) == (sizing["min"], sizing["max"])
    pc = child(prod, region, "aws:lambda/provisionedConcurrencyConfig:ProvisionedConcurrencyConfig")
    assert any(dep.endswith(f"::{pc.name}") for dep in target.options["dependencies"])

    policy = child(prod, region, "aws:appautoscaling/policy:Policy")
    assert policy["policyType"] == "TargetTrackingScaling"
    assert policy["resourceId"] == target["resourceId"]
    assert policy["scalableDimension"] == "lambda:function:ProvisionedConcurrency"
    assert policy["serviceNamespace"] == "lambda"
    tracking = policy["targetTrackingScalingPolicyConfiguration"]
    assert tracking["targetValue"] == 0.7
    assert tracking["predefinedMetricSpecification"] == {
        "predefinedMetricType": "LambdaProvisionedConcurrencyUtilization"
    }
    assert (tracking["scaleInCooldown"], tracking["scaleOutCooldown"]) == (300, 30)


@pytest.mark.parametrize("region", REGIONS)
def test_function_url_streams_from_the_alias_with_iam_auth_and_cors(prod: ProgramRun, region: str):
    url = child(prod, region, "aws:lambda/functionUrl:FunctionUrl")
    assert url["functionName"] == f"acme-mcp-prod-origin-{region}"
    assert url["qualifier"] == "live"
    assert url["invokeMode"] == "RESPONSE_STREAM"
    assert url["authorizationType"] == "AWS_IAM"
    cors = url["cors"]
    assert cors["allowOrigins"] == ["*"]
    assert set(cors["allowHeaders"]) == {
        "authorization", "content-type", "mcp-protocol-version", "mcp-session-id", "mcp-method", "mcp-name",
        "last-event-id",
    } == set(CORS_ALLOW_HEADERS)
    assert {"mcp-session-id", "www-authenticate"} <= set(cors["exposeHeaders"])
    assert cors["allowMethods"] == ["GET", "POST"]
    assert not cors.get("allowCredentials")


@pytest.mark.parametrize("region", REGIONS)
def test_function_url_has_no_resource_based_permission(prod: ProgramRun, region: str):
    # Callers get identity policies on their own roles (invoke_origins_policy); nobody anonymous.
    assert not prod.descendants_of(origin_of(prod, region), "aws:lambda/permission:Permission")
    assert not [p for p in prod.of_type("aws:lambda/permission:Permission") if p.inputs.get("principal") == "*"
                and "origin" in str(p.inputs.get("function"))]


def test_no_origin_secret_anywhere_in_the_graph(prod: ProgramRun):
    assert not prod.of_type("random:index/randomPassword:RandomPassword")
    assert not [r for r in prod.resources if r.type == "mcpedge:index:OriginSecret"]
    for secret in prod.of_type("aws:secretsmanager/secret:Secret"):
        assert "origin" not in json.dumps(secret.inputs).lower(), secret.name

    def named_values(value: Any, path: str = "") -> list[tuple[str, Any]]:
        if isinstance(value, dict):
            return [pair for k, v in value.items() for pair in named_values(v, f"{path}.{k}")]
        if isinstance(value, list):
            return [pair for v in value for pair in named_values(v, path)]
        return [(path, value)]

    for resource in prod.resources:
        for path, value in named_values(resource.inputs):
            # No origin secret's value, ARN or header anywhere (a probe's variable may be left empty).
            if "origin_secret" in path.lower() or "origin-secret" in str(value).lower():
                assert value in ("", None), f"{resource.type} {resource.name} {path} = {value!r}"
    for distribution in prod.of_type("aws:cloudfront/distribution:Distribution"):
        for origin in distribution["origins"]:
            assert not origin.get("customHeaders"), "no origin custom header"


def test_the_invoke_grant_allows_both_actions_on_exactly_the_named_functions_and_aliases():
    from components.origin import invoke_origins_policy

    fn = "arn:aws:lambda:eu-west-1:123456789012:function:acme-mcp-prod-origin-eu-west-1"
    url, invoke = json.loads(invoke_origins_policy([fn], [f"{fn}:live"]))["Statement"]
    assert (url["Sid"], invoke["Sid"]) == ("InvokeOriginFunctionUrls", "InvokeOriginFunctions")
    assert url["Action"] == ["lambda:InvokeFunctionUrl"] and invoke["Action"] == ["lambda:InvokeFunction"]
    assert url["Condition"] == {"StringEquals": {"lambda:FunctionUrlAuthType": "AWS_IAM"}}
    assert "Condition" not in invoke
    assert url["Resource"] == invoke["Resource"] == [fn, f"{fn}:live"]


@pytest.mark.parametrize(("functions", "aliases"), [
    ([], []),
    (["arn:aws:lambda:eu-west-1:123456789012:function:*"], []),
    (["arn:aws:lambda:eu-west-1:123456789012:function:o"], ["arn:aws:lambda:eu-west-1:123456789012:function:o:*"]),
    (["arn:aws:lambda:eu-west-1:123456789012:function:o-??????"], []),
])
def test_the_invoke_grant_refuses_wildcards_and_an_empty_list(functions, aliases):
    from components.origin import invoke_origins_policy

    with pytest.raises(ValueError, match="names origin functions and aliases only"):
        invoke_origins_policy(functions, aliases)


@given(st.lists(st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True), min_size=1, max_size=5, unique=True))
def test_the_invoke_grant_names_every_function_and_alias_given_and_nothing_else(names):
    from components.origin import invoke_origins_policy

    functions = [f"arn:aws:lambda:us-east-1:123456789012:function:{n}" for n in names]
    aliases = [f"{fn}:live" for fn in functions]
    for statement in json.loads(invoke_origins_policy(functions, aliases))["Statement"]:
        assert statement["Resource"] == sorted(functions + aliases)


@pytest.mark.parametrize("region", REGIONS)
def test_alarms_go_to_the_regions_alert_topic(prod: ProgramRun, region: str):
    alarms = {a["metricName"]: a for a in prod.children_of(origin_of(prod, region), "aws:cloudwatch/metricAlarm:MetricAlarm")}
    assert set(alarms) == {
        "ProvisionedConcurrencySpilloverInvocations", "ProvisionedConcurrencyUtilization", "Throttles", "Errors"
    }
    topic = f"arn:aws:sns:{region}:{ACCOUNT_ID}:acme-mcp-prod-alerts-{region}"
    fn = f"acme-mcp-prod-origin-{region}"
    on_alias = {"FunctionName": fn, "Resource": f"{fn}:live"}
    expected = {
        "ProvisionedConcurrencySpilloverInvocations": ("Sum", 0, on_alias),
        "ProvisionedConcurrencyUtilization": ("Maximum", 0.8, on_alias),
        "Throttles": ("Sum", 0, {"FunctionName": fn}),
        "Errors": ("Sum", 0, {"FunctionName": fn}),
    }
    for metric, (statistic, threshold, dimensions) in expected.items():
        alarm = alarms[metric]
        assert alarm["namespace"] == "AWS/Lambda"
        assert alarm["statistic"] == statistic
        assert alarm["threshold"] == threshold
        assert alarm["comparisonOperator"] == "GreaterThanThreshold"
        assert alarm["dimensions"] == dimensions
        assert alarm["alarmActions"] == [topic]
        assert alarm["okActions"] == [topic]


def test_stack_exports_every_origins_url_host_and_alias(prod: ProgramRun):
    urls, hosts, aliases = (prod.outputs[k] for k in ("originUrls", "originHosts", "originAliasArns"))
    assert list(urls) == list(hosts) == list(aliases) == list(REGIONS)
    for region, url in urls.items():
        assert url == child(prod, region, "aws:lambda/functionUrl:FunctionUrl").outputs["functionUrl"]
        assert url.startswith("https://") and url.endswith(f".lambda-url.{region}.on.aws/")
        assert hosts[region] == url.removeprefix("https://").removesuffix("/")
        assert aliases[region] == child(prod, region, "aws:lambda/alias:Alias").outputs["arn"]
        assert aliases[region].endswith(f":function:acme-mcp-prod-origin-{region}:live")


def test_every_region_uploads_the_same_package(prod: ProgramRun):
    fns = [function_of(prod, region) for region in REGIONS]
    assert len({f["code"].path for f in fns}) == 1
    assert len({f["sourceCodeHash"] for f in fns}) == 1


def test_provisioned_concurrency_off_creates_no_scaling_and_no_provisioned_alarms():
    run = run_program("prod", config_overrides={"originOverrides": [], "originProvisionedMin": 0})
    assert not run.of_type("aws:lambda/provisionedConcurrencyConfig:ProvisionedConcurrencyConfig")
    assert not run.of_type("aws:appautoscaling/target:Target")
    assert not run.of_type("aws:appautoscaling/policy:Policy")
    for region in REGIONS:
        alarms = run.descendants_of(origin_of(run, region), "aws:cloudwatch/metricAlarm:MetricAlarm")
        assert {a["metricName"] for a in alarms} == {"Throttles", "Errors"}
    assert len(run.of_type("aws:lambda/functionUrl:FunctionUrl")) == len(REGIONS)


def test_reserved_concurrency_unset_reserves_none_and_provisioned_concurrency_may_still_scale_past_the_old_bound():
    # Given a new account's low quota: no reservation (the key unset), provisioned 2..300 on us-east-1
    run = run_program("prod", config_overrides={
        "originReservedConcurrency": None,
        "originOverrides": ["us-east-1:provisionedMin=2,provisionedMax=300"],
    })
    for region in REGIONS:
        fn = origin_of(run, region)
        (function,) = run.children_of(fn, "aws:lambda/function:Function")
        assert function.inputs.get("reservedConcurrentExecutions") in (None, -1)  # unset: the account pool
    (target,) = [t for t in run.of_type("aws:appautoscaling/target:Target") if t.region == "us-east-1"]
    assert target["maxCapacity"] == 300


def minimal_origin_args(**changes: Any) -> McpOriginArgs:
    args = McpOriginArgs(region="eu-west-1", server_id="acme", server=DEMO_SERVER)  # type: ignore[typeddict-item]
    return McpOriginArgs(**{**args, **changes})  # type: ignore[typeddict-item]


def test_a_component_refuses_provisioned_above_a_set_reservation_but_not_without_one():
    sizing = {"reserved_concurrency": 10, "provisioned_min": 1, "provisioned_max": 20}
    with pytest.raises(ComponentArgsError, match="reserved_concurrency 10"):
        check_origin_args("o", minimal_origin_args(sizing=sizing))
    check_origin_args("o", minimal_origin_args(sizing={k: v for k, v in sizing.items() if k != "reserved_concurrency"}))


def test_a_component_refuses_reserved_concurrency_0_which_would_throttle_every_call():
    with pytest.raises(ComponentArgsError, match=r"sizing.reserved_concurrency = 0: must be an integer from 1 to "
                                                 r"10000 \(unset reserves none"):
        check_origin_args("o", minimal_origin_args(sizing={"reserved_concurrency": 0}))


def test_autoscaling_settings_come_from_config():
    run = run_program("prod", config_overrides={
        "originUtilizationTarget": "0.5", "originScaleInCooldownSeconds": 600, "originScaleOutCooldownSeconds": 10,
    })
    for policy in run.of_type("aws:appautoscaling/policy:Policy"):
        tracking = policy["targetTrackingScalingPolicyConfiguration"]
        assert (tracking["targetValue"], tracking["scaleInCooldown"], tracking["scaleOutCooldown"]) == (0.5, 600, 10)


def test_layer_version_comes_from_config():
    run = run_program("prod", config_overrides={"lwaLayerVersion": 27})
    for fn in run.of_type(FUNCTION):
        if fn.name.endswith("-origin-" + fn.region + "-function"):
            assert fn["layers"] == [lwa_layer_arn(fn.region, 27)]


def component_program() -> None:
    import pulumi

    from components.origin import McpOrigin, McpOriginArgs

    origin = McpOrigin("probe-origin", McpOriginArgs(
        region="ap-southeast-1", server_id="acme-mcp", server=DEMO_SERVER,  # type: ignore[typeddict-item]
        alert_topic_arn="arn:aws:sns:ap-southeast-1:123456789012:t"))
    pulumi.export("url", origin.url)
    pulumi.export("host", origin.host)
    pulumi.export("aliasArn", origin.alias_arn)
    pulumi.export("functionName", origin.function_name)
    pulumi.export("functionArn", origin.function_arn)
    pulumi.export("region", origin.region)


def test_component_exposes_url_host_alias_and_function_arns_function_name_and_region():
    run = run_program("prod", program=component_program)
    out = run.outputs
    url = run.one("aws:lambda/functionUrl:FunctionUrl").outputs["functionUrl"]
    assert out["url"] == url and url.endswith("/")
    assert out["host"] == url.removeprefix("https://").removesuffix("/")
    assert out["aliasArn"] == f"arn:aws:lambda:ap-southeast-1:{ACCOUNT_ID}:function:acme-mcp-prod-origin-ap-southeast-1:live"
    assert out["functionName"] == "acme-mcp-prod-origin-ap-southeast-1"
    assert out["functionArn"] == run.one(FUNCTION).outputs["arn"]
    assert out["aliasArn"].startswith(out["functionArn"] + ":")
    assert out["region"] == "ap-southeast-1"


@given(
    host=st.from_regex(r"[a-z0-9]{32}\.lambda-url\.[a-z]{2}-[a-z]+-[1-9]\.on\.aws", fullmatch=True),
    path=st.sampled_from(["/", "", "/mcp"]),
)
def test_url_host_is_the_host_of_any_function_url(host: str, path: str):
    assert url_host(f"https://{host}{path}") == host


def test_url_host_rejects_a_url_without_host():
    with pytest.raises(ValueError, match="no host"):
        url_host("not a url")


# --- cold-start modes ----------------------------------------------------------------------

PROVISIONED_TYPES = ("aws:lambda/provisionedConcurrencyConfig:ProvisionedConcurrencyConfig",
                     "aws:appautoscaling/target:Target", "aws:appautoscaling/policy:Policy")


@pytest.fixture(scope="module")
def snapstart_run() -> ProgramRun:
    from review.variants import VARIANTS

    return run_program("prod", config_overrides=VARIANTS["snapstart"])


def origin_functions(run: ProgramRun) -> list[Resource]:
    return [function_of(run, region) for region in REGIONS]


def zip_names(fn: Resource) -> set[str]:
    import zipfile

    with zipfile.ZipFile(fn["code"].path) as zf:
        return set(zf.namelist())


def test_default_mode_is_provisioned_with_no_snapstart_and_no_snapshot_hooks(prod: ProgramRun):
    assert len(prod.of_type(PROVISIONED_TYPES[0])) == len(REGIONS)
    for fn in origin_functions(prod):
        assert not fn.inputs.get("snapStart")
        _, env = environment_of(prod, fn.region)
        assert not [k for k in env if k.startswith("AWS_LWA_SNAPSTART_")]
        assert "run.sh" in zip_names(fn)


def test_snapstart_mode_snapshots_published_versions_with_no_provisioned_concurrency(snapstart_run: ProgramRun):
    for typ in PROVISIONED_TYPES:
        assert not snapstart_run.of_type(typ), typ
    for fn in origin_functions(snapstart_run):
        assert fn["snapStart"] == {"applyOn": "PublishedVersions"}
        assert fn["publish"] is True
        assert fn["layers"] == [lwa_layer_arn(fn.region, 30)]
        alarms = snapstart_run.descendants_of(origin_of(snapstart_run, fn.region), "aws:cloudwatch/metricAlarm:MetricAlarm")
        assert {a["metricName"] for a in alarms} == {"Throttles", "Errors"}
        # The alias live still points at the published version the Function URL serves.
        alias = child(snapstart_run, fn.region, "aws:lambda/alias:Alias")
        assert alias["functionVersion"] == fn.outputs["version"]


def test_under_snapstart_the_adapters_readiness_check_is_bounded_inside_the_restore_limit(
        snapstart_run: ProgramRun, prod: ProgramRun):
    # A restore re-runs the adapter's readiness check, and Lambda fails a Restore phase over 10 s.
    for region in REGIONS:
        _, env = environment_of(snapstart_run, region)
        assert 0 < int(env[READINESS_TIMEOUT_ENV]) == SNAPSTART_READINESS_TIMEOUT_S < 10
        _, provisioned_env = environment_of(prod, region)
        assert READINESS_TIMEOUT_ENV not in provisioned_env  # outside SnapStart, Lambda's init bounds it


def test_none_mode_is_on_demand_only():
    from review.variants import WITHOUT_PROVISIONED

    run = run_program("prod", config_overrides={**WITHOUT_PROVISIONED, "originColdStart": "none"})
    for typ in PROVISIONED_TYPES:
        assert not run.of_type(typ), typ
    for fn in origin_functions(run):
        assert not fn.inputs.get("snapStart")
        assert fn["layers"] == [lwa_layer_arn(fn.region, PROD.lwa_layer_version)]


def test_a_component_refuses_snapstart_with_provisioned_sizing_an_old_adapter_or_a_region_without_it():
    with pytest.raises(ComponentArgsError) as refused:
        check_origin_args("o", minimal_origin_args(
            cold_start="snapstart", lwa_layer_version=25, sizing={"provisioned_min": 2, "utilization_target": 0.5}))
    text = str(refused.value)
    assert "sizing.provisioned_min = 2" in text and "sizing.utilization_target = 0.5" in text
    assert "lwa_layer_version = 25: must be at least 30" in text
    with pytest.raises(ComponentArgsError, match="region = 'ap-southeast-6': has no Lambda SnapStart"):
        check_origin_args("o", minimal_origin_args(cold_start="snapstart", lwa_layer_version=30, region="ap-southeast-6"))
    with pytest.raises(ComponentArgsError, match="cold_start = 'warm': must be one of provisioned, snapstart, none"):
        check_origin_args("o", minimal_origin_args(cold_start="warm"))
    # The defaults' provisioned sizing does not count: only what is given.
    check_origin_args("o", minimal_origin_args(cold_start="snapstart", lwa_layer_version=30))
    check_origin_args("o", minimal_origin_args(cold_start="none", sizing={"provisioned_min": 0}))


# --- any server: each runtime family and the image paths, the component alone ------------------

TS_EXAMPLE = "examples/typescript"
FASTMCP_EXAMPLE = "examples/fastmcp"


def family_program(server: dict[str, Any], **args: Any) -> Any:
    def program() -> None:
        from components.origin import McpOrigin, McpOriginArgs

        McpOrigin("any-origin", McpOriginArgs(  # type: ignore[typeddict-item]
            region="eu-west-1", server_id="acme", server=server, **args))  # type: ignore[typeddict-item]
    return program


def java_server(folder: Any) -> str:
    import zipfile

    folder.mkdir()
    with zipfile.ZipFile(folder / "server.jar", "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nMain-Class: Server\n")
    return str(folder)


def provided_server(folder: Any) -> str:
    folder.mkdir()
    binary = folder / "server"
    binary.write_text("#!/bin/sh\nexec python3 -m http.server \"$PORT\" --bind 127.0.0.1\n")
    binary.chmod(0o755)
    (folder / "README.txt").write_text("a prebuilt server binary\n")
    return str(folder)


def only_function(run: ProgramRun) -> Resource:
    (fn,) = run.of_type(FUNCTION)
    return fn


def assert_zip_origin(run: ProgramRun, runtime: str, command: str) -> set[str]:
    import zipfile

    fn = only_function(run)
    assert (fn["runtime"], fn["handler"], fn["architectures"]) == (runtime, "run.sh", ["arm64"])
    assert fn["layers"] == [f"arn:aws:lambda:eu-west-1:{LWA_LAYER_ACCOUNT}:layer:LambdaAdapterLayerArm64:25"]
    _, env = unsecret(fn["environment"])
    assert env["variables"]["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert env["variables"]["AWS_LWA_AUTHORIZATION_SOURCE"] == "x-mcp-edge-authorization"
    assert run.one("aws:lambda/functionUrl:FunctionUrl")["authorizationType"] == "AWS_IAM"
    with zipfile.ZipFile(fn["code"].path) as zf:
        info = zf.getinfo("run.sh")
        assert (info.external_attr >> 16) & 0o777 == 0o755
        script = zf.read("run.sh").decode()
        assert script.splitlines()[-1] == f"exec {command}"
        assert 'export PORT="$AWS_LWA_PORT"' in script
        return set(zf.namelist())


def test_a_node_server_ships_its_folder_unchanged_with_npm_ci_omit_dev_modules():
    from pathlib import Path

    run = run_program("prod", program=family_program(
        {"source": TS_EXAMPLE, "runtime": "nodejs22.x", "command": "node app.mjs"}))
    names = assert_zip_origin(run, "nodejs22.x", "node app.mjs")
    assert {"app.mjs", "package.json", "package-lock.json"} <= names
    assert any(n.startswith("node_modules/@modelcontextprotocol/sdk/") for n in names)
    assert not (Path(TS_EXAMPLE) / "run.sh").exists(), "the user's folder is never written to"


def test_a_java_server_ships_its_prebuilt_jar(tmp_path: Any):
    source = java_server(tmp_path / "java")
    run = run_program("prod", program=family_program(
        {"source": source, "runtime": "java21", "command": "java -jar server.jar"}))
    assert assert_zip_origin(run, "java21", "java -jar server.jar") == {"run.sh", "server.jar"}


def test_a_provided_server_keeps_its_binary_executable(tmp_path: Any):
    import zipfile

    source = provided_server(tmp_path / "bin")
    run = run_program("prod", program=family_program(
        {"source": source, "runtime": "provided.al2023", "command": "./server"}))
    assert assert_zip_origin(run, "provided.al2023", "./server") == {"run.sh", "server", "README.txt"}
    with zipfile.ZipFile(only_function(run)["code"].path) as zf:
        assert (zf.getinfo("server").external_attr >> 16) & 0o777 == 0o755
        assert (zf.getinfo("README.txt").external_attr >> 16) & 0o777 == 0o644


def test_an_install_command_runs_in_a_copy_and_its_output_ships(tmp_path: Any):
    source = tmp_path / "built"
    source.mkdir()
    (source / "Main.java").write_text("class Main {}\n")
    run = run_program("prod", program=family_program(
        {"source": str(source), "runtime": "java21", "command": "java -jar out/app.jar",
         "install": "mkdir -p out && printf jar > out/app.jar"}))
    assert assert_zip_origin(run, "java21", "java -jar out/app.jar") == {"run.sh", "Main.java", "out/app.jar"}
    assert sorted(p.name for p in source.iterdir()) == ["Main.java"]


@pytest.mark.parametrize("kind", ["image", "image_digest"])
def test_an_image_origin_has_no_layers_and_runs_by_digest(kind: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")  # a host that builds arm64 natively
    server = {"image": "tests/components/fixtures/image_server"} if kind == "image" else \
        {"image_digest": "sha256:" + "ab" * 32}
    run = run_program("prod", program=family_program(server))
    fn = only_function(run)
    assert fn["packageType"] == "Image" and not fn.inputs.get("layers") and not fn.inputs.get("handler")
    repository = run.one("aws:ecr/repository:Repository").outputs["repositoryUrl"]
    if kind == "image_digest":
        assert fn["imageUri"] == f"{repository}@sha256:" + "ab" * 32
        assert not run.of_type("docker-build:index:Image")
    else:
        image = run.one("docker-build:index:Image")
        assert fn["imageUri"] == f"{repository}@{image.outputs['digest']}"
        assert image["platforms"] == ["linux/arm64"]
    _, env = unsecret(fn["environment"])
    assert "AWS_LAMBDA_EXEC_WRAPPER" not in env["variables"]
    assert env["variables"]["PORT"] == env["variables"]["AWS_LWA_PORT"] == "8080"
    assert run.one("aws:lambda/functionUrl:FunctionUrl")["authorizationType"] == "AWS_IAM"


def test_the_component_refuses_bad_servers_naming_each_field(tmp_path: Any):
    with pytest.raises(ComponentArgsError) as refused:
        check_origin_args("o", minimal_origin_args(server={"source": str(tmp_path / "nowhere"), "runtime": "ruby3.3",
                                                           "command": ""}))
    text = str(refused.value)
    assert "server.command = '': must not be empty" in text and "server.runtime = 'ruby3.3': must be one of" in text
    with pytest.raises(ComponentArgsError, match="exactly one of source"):
        check_origin_args("o", minimal_origin_args(server={"image_digest": "sha256:" + "a" * 64, "source": "x"}))
    with pytest.raises(ComponentArgsError, match=r"server.source = .*must hold package.json and package-lock.json"):
        check_origin_args("o", minimal_origin_args(server={"source": str(tmp_path), "runtime": "nodejs24.x",
                                                           "command": "node app.mjs"}))
    with pytest.raises(ComponentArgsError, match="needs a runtime Lambda SnapStart supports"):
        check_origin_args("o", minimal_origin_args(
            cold_start="snapstart", lwa_layer_version=30,
            server={"source": TS_EXAMPLE, "runtime": "nodejs22.x", "command": "node app.mjs"}))
    with pytest.raises(ComponentArgsError, match="a pushed image must carry that release of the adapter"):
        check_origin_args("o", minimal_origin_args(cold_start="snapstart", lwa_layer_version=28,
                                                   server={"image_digest": "sha256:" + "a" * 64}))
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")
    (tmp_path / "requirements.txt").write_text("")
    with pytest.raises(ComponentArgsError, match="holds a run.sh"):
        check_origin_args("o", minimal_origin_args(server={"source": str(tmp_path), "runtime": "python3.13",
                                                           "command": "python3 server.py"}))


def test_native_addons_are_found_by_package():
    import tempfile
    from pathlib import Path

    from components.lambda_package import native_addons

    with tempfile.TemporaryDirectory() as tmp:
        modules = Path(tmp)
        (modules / "pure" / "lib").mkdir(parents=True)
        (modules / "pure" / "lib" / "index.js").write_text("")
        (modules / "@scope" / "fast" / "build").mkdir(parents=True)
        (modules / "@scope" / "fast" / "build" / "addon.node").write_bytes(b"\x7fELF")
        (modules / "gyp").mkdir()
        (modules / "gyp" / "binding.gyp").write_text("{}")
        assert native_addons(modules) == ["@scope/fast", "gyp"]


def test_the_shipped_run_sh_starts_the_fastmcp_example_on_port(tmp_path: Any):
    """run.sh and the server's own files, from the package the program uploads, answer MCP on
    $PORT (the package's wheels are Lambda's aarch64 ones: dependencies come from the example's
    own virtualenv on this machine instead)."""
    import os
    import socket
    import subprocess
    import time
    import urllib.request
    import zipfile
    from pathlib import Path

    from devkit.example_envs import ExampleEnvUnavailableError, python_env

    try:
        venv_bin = python_env("fastmcp")
    except ExampleEnvUnavailableError as exc:
        pytest.skip(str(exc))
    run = run_program("prod", program=family_program(
        {"source": FASTMCP_EXAMPLE, "runtime": "python3.13", "command": "python3 server.py"}))
    own = {p.name for p in Path(FASTMCP_EXAMPLE).iterdir() if p.is_file()} | {"run.sh"}
    with zipfile.ZipFile(only_function(run)["code"].path) as zf:
        for name in own & set(zf.namelist()):
            zf.extract(name, tmp_path)
    (tmp_path / "run.sh").chmod(0o755)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "AWS_LWA_PORT": str(port), "PATH": f"{venv_bin}:{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    server = subprocess.Popen([str(tmp_path / "run.sh")], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode()
        deadline = time.monotonic() + 60
        while True:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", data=body, method="POST", headers={
                "content-type": "application/json", "accept": "application/json, text/event-stream"})
            try:
                with urllib.request.urlopen(request, timeout=5) as response:
                    text = response.read().decode()
                    break
            except OSError:
                assert server.poll() is None, server.stdout.read().decode() if server.stdout else ""
                assert time.monotonic() < deadline, "the server never answered on $PORT"
                time.sleep(0.3)
        assert '"serverInfo"' in text and '"result"' in text
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_the_component_refuses_a_server_folder_with_a_link_out_naming_it(tmp_path: Any):
    from pathlib import Path

    source = Path(tmp_path) / "server"
    source.mkdir()
    (source / "requirements.txt").write_text("")
    (Path(tmp_path) / "credentials").write_text("SECRET")
    (source / "creds").symlink_to("../credentials")
    with pytest.raises(ComponentArgsError, match=r"server.source = .*holds what cannot be packaged: 'creds' is a "
                                                 r"link to '../credentials', which leads outside the folder"):
        check_origin_args("o", minimal_origin_args(server={"source": str(source), "runtime": "python3.13",
                                                           "command": "python3 server.py"}))
