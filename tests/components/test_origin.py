"""McpOrigin under Pulumi mocks: the real program (prod stack), every region.

Each property of a regional origin is asserted for every region of the prod stack,
with that region's sizing (Pulumi.prod.yaml overrides us-east-1 and ap-northeast-1).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pulumi.runtime import rpc

from components.origin import (
    CORS_ALLOW_HEADERS,
    LWA_LAYER_ACCOUNT,
    McpOriginArgs,
    allowed_hosts,
    check_origin_args,
    lwa_layer_arn,
    resource_server_url,
    url_host,
)
from components.validation import ComponentArgsError
from stack_config.loading import load_from_stack_file
from tests.harness import ACCOUNT_ID, ProgramRun, Resource, run_program

PROD = load_from_stack_file("prod")
REGIONS = PROD.regions
FUNCTION = "aws:lambda/function:Function"
SECRET_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:acme-prod-origin-secret-AbCdEf"

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
    _, env = environment_of(prod, region)
    assert env["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert env["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert env["AWS_LWA_READINESS_CHECK_PATH"] == "/healthz"
    assert env["AWS_LWA_PORT"] == "8080"


@pytest.mark.parametrize("region", REGIONS)
def test_function_environment_configures_the_app_for_its_region(prod: ProgramRun, region: str):
    _, env = environment_of(prod, region)
    assert env["SERVED_REGION"] == region
    assert env["MCP_PATH"] == "/mcp"
    assert env["MCP_SERVER_NAME"] == "acme-mcp"
    # Header names are the contract's (functions/contract.py): they do not travel as variables.
    assert not {"ORIGIN_SECRET_HEADER", "SERVED_REGION_HEADER"} & set(env)
    assert env["AUTH_ISSUER"] == "https://auth.acme.example/"
    assert env["AUTH_AUDIENCE"] == "https://mcp.acme.example/mcp"
    assert env["AUTH_JWKS_URL"] == "https://auth.acme.example/.well-known/jwks.json"
    assert env["AUTH_ALGORITHMS"] == "RS256,ES256"
    assert env["AUTH_LEEWAY_SECONDS"] == "30"
    assert env["RESOURCE_SERVER_URL"] == "https://mcp.acme.example/mcp"
    assert env["ALLOWED_HOSTS"].split(",") == [
        f"*.lambda-url.{region}.on.aws", "*.cloudfront.net", "mcp.acme.example"
    ]


@pytest.mark.parametrize("region", REGIONS)
def test_origin_reads_its_regions_origin_secret_from_secrets_manager(prod: ProgramRun, region: str):
    # Given the origin in a region, its environment names the secret there and its version, nothing secret
    secret, env = environment_of(prod, region)
    stored = prod.one("aws:secretsmanager/secret:Secret", name_contains=f"-origin-secret-{region}")
    assert env["ORIGIN_SECRET_ID"] == stored["arn"] and stored.region == region
    assert env["ORIGIN_SECRET_VERSION"] == prod.one(
        "aws:secretsmanager/secretVersion:SecretVersion", name_contains=f"-origin-secret-{region}-value")["versionId"]
    assert "ORIGIN_SECRET" not in env and "ORIGIN_SECRET_PREVIOUS" not in env
    assert not secret, "nothing secret is left in the environment"
    # and the value is never a stack output
    password = prod.one("random:index/randomPassword:RandomPassword").outputs["result"]
    assert password not in json.dumps(prod.outputs), "the origin secret must never be a stack output"


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
    assert policy["Statement"] == [{
        "Effect": "Allow",
        "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
        "Resource": [f"{logs.outputs['arn']}:*"],
    }, {
        "Effect": "Allow",
        "Action": ["secretsmanager:GetSecretValue"],
        "Resource": [prod.one("aws:secretsmanager/secret:Secret", name_contains=f"-origin-secret-{region}")["arn"]],
    }]
    assert function_of(prod, region)["role"] == role.outputs["arn"]


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
def test_function_url_streams_from_the_alias_with_cors(prod: ProgramRun, region: str):
    url = child(prod, region, "aws:lambda/functionUrl:FunctionUrl")
    assert url["functionName"] == f"acme-mcp-prod-origin-{region}"
    assert url["qualifier"] == "live"
    assert url["invokeMode"] == "RESPONSE_STREAM"
    assert url["authorizationType"] == "NONE"
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
def test_function_url_has_both_invoke_permissions_on_the_alias(prod: ProgramRun, region: str):
    perms = prod.children_of(origin_of(prod, region), "aws:lambda/permission:Permission")
    by_action = {p["action"]: p for p in perms}
    assert set(by_action) == {"lambda:InvokeFunctionUrl", "lambda:InvokeFunction"}
    url_perm, invoke_perm = by_action["lambda:InvokeFunctionUrl"], by_action["lambda:InvokeFunction"]
    for perm in perms:
        assert perm["function"] == f"acme-mcp-prod-origin-{region}"
        assert perm["qualifier"] == "live"
        assert perm["principal"] == "*"
    assert url_perm["functionUrlAuthType"] == "NONE"
    assert invoke_perm["invokedViaFunctionUrl"] is True
    assert "invokedViaFunctionUrl" not in url_perm.inputs
    assert "functionUrlAuthType" not in invoke_perm.inputs


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


def test_reserved_concurrency_0_reserves_none_and_provisioned_concurrency_may_still_scale_past_the_old_bound():
    # Given a new account's low quota: no reservation (0), provisioned 2..300 on us-east-1
    run = run_program("prod", config_overrides={
        "originReservedConcurrency": 0,
        "originOverrides": ["us-east-1:provisionedMin=2,provisionedMax=300"],
    })
    for region in REGIONS:
        fn = origin_of(run, region)
        (function,) = run.children_of(fn, "aws:lambda/function:Function")
        assert function.inputs.get("reservedConcurrentExecutions") in (None, -1)  # unset: the account pool
    (target,) = [t for t in run.of_type("aws:appautoscaling/target:Target") if t.region == "us-east-1"]
    assert target["maxCapacity"] == 300


def minimal_origin_args(**changes: Any) -> McpOriginArgs:
    args = McpOriginArgs(
        region="eu-west-1", server_id="acme", jwks_url="https://auth.acme.example/.well-known/jwks.json",
        auth={"issuer": "https://auth.acme.example", "audience": "https://mcp.acme.example/mcp"},
        origin_secret_arn=SECRET_ARN)
    return McpOriginArgs(**{**args, **changes})  # type: ignore[typeddict-item]


def test_a_component_refuses_provisioned_above_a_set_reservation_but_not_without_one():
    sizing = {"reserved_concurrency": 10, "provisioned_min": 1, "provisioned_max": 20}
    with pytest.raises(ComponentArgsError, match="reserved_concurrency 10"):
        check_origin_args("o", minimal_origin_args(sizing=sizing))
    check_origin_args("o", minimal_origin_args(sizing={**sizing, "reserved_concurrency": 0}))


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
        region="ap-southeast-1", server_id="acme-mcp", jwks_url="https://auth.acme.example/.well-known/jwks.json",
        auth={"issuer": "https://auth.acme.example", "audience": "https://mcp.acme.example/mcp"},
        origin_secret_arn=SECRET_ARN.replace("eu-west-1", "ap-southeast-1"),
        alert_topic_arn="arn:aws:sns:ap-southeast-1:123456789012:t"))
    pulumi.export("url", origin.url)
    pulumi.export("host", origin.host)
    pulumi.export("aliasArn", origin.alias_arn)
    pulumi.export("functionName", origin.function_name)
    pulumi.export("region", origin.region)


def test_component_exposes_url_host_alias_arn_function_name_and_region():
    run = run_program("prod", program=component_program)
    out = run.outputs
    url = run.one("aws:lambda/functionUrl:FunctionUrl").outputs["functionUrl"]
    assert out["url"] == url and url.endswith("/")
    assert out["host"] == url.removeprefix("https://").removesuffix("/")
    assert out["aliasArn"] == f"arn:aws:lambda:ap-southeast-1:{ACCOUNT_ID}:function:acme-mcp-prod-origin-ap-southeast-1:live"
    assert out["functionName"] == "acme-mcp-prod-origin-ap-southeast-1"
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


def test_resource_url_falls_back_to_custom_domain_when_audience_is_not_a_url():
    import dataclasses

    config = dataclasses.replace(PROD, auth=dataclasses.replace(PROD.auth, audience="api://acme-mcp"))
    assert resource_server_url(config.auth.audience, config.edge.custom_domain, config.mcp_path) == \
        "https://mcp.acme.example/mcp"
    bare = dataclasses.replace(config, edge=dataclasses.replace(PROD.edge, custom_domain=None))
    assert resource_server_url(bare.auth.audience, bare.edge.custom_domain, bare.mcp_path) == ""


def test_allowed_hosts_without_custom_domain():
    import dataclasses

    bare = dataclasses.replace(PROD, edge=dataclasses.replace(PROD.edge, custom_domain=None))
    assert allowed_hosts("eu-west-1", bare.edge.custom_domain) == ("*.lambda-url.eu-west-1.on.aws", "*.cloudfront.net")


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
        names = zip_names(fn)
        assert "mcp_server/snapstart.py" not in names and "mcp_server/Dockerfile" not in names


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


def test_snapstart_package_ships_the_hook_module_and_run_sh_starts_it(snapstart_run: ProgramRun):
    import zipfile

    from components.origin import SERVER_SOURCE, run_sh
    from functions.contract import SNAPSTART_HOOK_PATHS

    fn = function_of(snapstart_run, "eu-west-1")
    with zipfile.ZipFile(fn["code"].path) as zf:
        assert zf.read("mcp_server/snapstart.py") == (SERVER_SOURCE / "snapstart.py").read_bytes()
        assert zf.read("run.sh") == run_sh("mcp_server.snapstart:app")
        assert "exec python -m uvicorn mcp_server.snapstart:app" in zf.read("run.sh").decode()
    _, env = environment_of(snapstart_run, "eu-west-1")
    assert {k: env[k] for k in SNAPSTART_HOOK_PATHS} == SNAPSTART_HOOK_PATHS
    assert env["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"


def test_none_mode_is_on_demand_only():
    from review.variants import WITHOUT_PROVISIONED

    run = run_program("prod", config_overrides={**WITHOUT_PROVISIONED, "originColdStart": "none"})
    for typ in PROVISIONED_TYPES:
        assert not run.of_type(typ), typ
    for fn in origin_functions(run):
        assert not fn.inputs.get("snapStart")
        assert fn["layers"] == [lwa_layer_arn(fn.region, PROD.lwa_layer_version)]
        assert "mcp_server/snapstart.py" not in zip_names(fn)


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
