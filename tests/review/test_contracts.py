"""Contract checks against AWS's API models: every mapped input resolves in the botocore
model, holds on every stack variant, and ran on at least one value wherever the program
creates the resource; the checks reject bad values and broken edge and cross-resource
wiring (so a pass means something)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from devkit.mock_program import ProgramRun, Resource
from review import contracts as contracts_module
from review.contracts import (
    INPUT_CONTRACTS,
    RULES,
    ContractReport,
    Graph,
    InputContract,
    allows,
    check_input,
    check_run,
    parse_lambda_ref,
    run_rule,
)


@pytest.fixture(scope="session")
def reports(variant_runs: dict[str, ProgramRun]) -> dict[str, ContractReport]:
    return {name: check_run(run, name) for name, run in variant_runs.items()}


def _coverage(reports: dict[str, ContractReport], check_id: str) -> tuple[int, int, list[str]]:
    results = [report.result(check_id) for report in reports.values()]
    problems = [f"{name}: {p}" for name, r in zip(reports, results, strict=True) for p in r.problems]
    return sum(r.resources for r in results), sum(r.values for r in results), problems


@pytest.mark.parametrize("contract", INPUT_CONTRACTS, ids=lambda c: c.id)
def test_mapped_member_exists_in_the_aws_model_and_constrains_the_value(contract: InputContract):
    constraint = contract.constraint  # raises if the shape or member is not in the model
    assert constraint.constrains()
    if contract.api is not None:
        assert constraint.source.startswith(f"botocore {contract.api.service} ")


@pytest.mark.parametrize("contract", INPUT_CONTRACTS, ids=lambda c: c.id)
def test_program_input_satisfies_the_aws_contract(contract: InputContract, reports: dict[str, ContractReport]):
    resources, values, problems = _coverage(reports, contract.id)
    assert not problems, "\n".join(problems)
    if resources == 0:
        pytest.skip(f"not verified: the program creates no {contract.resource_type} in any variant (yet)")
    if values == 0:
        if contract.optional:
            pytest.skip(f"not verified: no {contract.resource_type} sets {contract.path} (AWS's default applies)")
        pytest.fail(f"{contract.resource_type} exists but no value of {contract.path} was checked")


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_program_satisfies_the_deploy_time_rule(rule, reports: dict[str, ContractReport]):
    resources, values, problems = _coverage(reports, rule.id)
    assert not problems, "\n".join(problems)
    if values == 0:
        pytest.skip(f"not verified: the program has nothing {rule.id} applies to in any variant (yet)")
    assert resources >= 1


def test_report_counts_checks_values_and_unrun_checks(reports: dict[str, ContractReport]):
    text = reports["prod"].format()
    assert "checks ran on" in text and "0 problems" in text
    assert "lambda/function.runtime" in text
    for report in reports.values():
        for result in report.results:
            assert result.status in ("ok", "not set", "no resource")


def test_variants_deploy_their_regions(variant_runs: dict[str, ProgramRun]):
    for run in variant_runs.values():
        regions = set(run.outputs["regions"])
        assert {f.region for f in run.of_type("aws:lambda/function:Function")} >= regions


# --- the checks catch what AWS would reject --------------------------------------------


def _problems(run: ProgramRun, check_id: str) -> list[str]:
    return check_run(run).result(check_id).problems


@pytest.fixture
def mutable_prod(prod: ProgramRun) -> ProgramRun:
    return copy.deepcopy(prod)


@pytest.mark.parametrize(
    ("typ", "key", "bad", "check_id", "message"),
    [
        ("aws:lambda/function:Function", "runtime", "python2.8", "lambda/function.runtime", "is not one of"),
        ("aws:lambda/function:Function", "memorySize", 64.0, "lambda/function.memorySize", "below the minimum 128"),
        ("aws:lambda/function:Function", "architectures", ["arm65"], "lambda/function.architectures", "is not one of"),
        ("aws:lambda/function:Function", "timeout", 12.5, "lambda/function.timeout", "must be an integer"),
        ("aws:lambda/functionUrl:FunctionUrl", "invokeMode", "STREAM", "lambda/functionUrl.invokeMode", "not one of"),
        ("aws:lambda/functionUrl:FunctionUrl", "authorizationType", "IAM", "lambda/functionUrl.authorizationType",
         "not one of"),
        ("aws:cloudwatch/metricAlarm:MetricAlarm", "comparisonOperator", "GreaterThan",
         "cloudwatch/metricAlarm.comparisonOperator", "not one of"),
        ("aws:cloudwatch/metricAlarm:MetricAlarm", "statistic", "p99", "cloudwatch/metricAlarm.statistic", "not one of"),
        ("aws:cloudwatch/metricAlarm:MetricAlarm", "period", 90.0, "cloudwatch/metricAlarm.period", "multiple of 60"),
        ("aws:cloudwatch/logGroup:LogGroup", "retentionInDays", 45.0, "cloudwatch/logGroup.retentionInDays",
         "is not one of"),
        ("aws:appautoscaling/target:Target", "scalableDimension", "lambda:function:Concurrency",
         "appautoscaling/target.scalableDimension", "not one of"),
        ("aws:lambda/provisionedConcurrencyConfig:ProvisionedConcurrencyConfig", "provisionedConcurrentExecutions",
         0.0, "lambda/provisionedConcurrencyConfig.provisionedConcurrentExecutions", "below the minimum 1"),
    ],
)
def test_bad_input_values_are_rejected(mutable_prod: ProgramRun, typ, key, bad, check_id, message):
    target = sorted(mutable_prod.of_type(typ), key=lambda r: r.name)[0]
    target.inputs[key] = bad
    problems = _problems(mutable_prod, check_id)
    assert len(problems) == 1 and target.name in problems[0] and message in problems[0], problems


@pytest.mark.parametrize(("timeout", "fits"), [(120.0, True), (121.0, False), (0.0, False)])
def test_the_origin_read_timeout_is_checked_against_cloudfronts_api_range(mutable_prod: ProgramRun, timeout, fits):
    (distribution,) = mutable_prod.of_type("aws:cloudfront/distribution:Distribution")
    distribution.inputs["origins"][0]["customOriginConfig"]["originReadTimeout"] = timeout
    problems = _problems(mutable_prod, "cloudfront/distribution.origins[].customOriginConfig.originReadTimeout")
    assert (problems == []) == fits, problems


def test_nested_policy_path_is_checked(mutable_prod: ProgramRun):
    policy = mutable_prod.of_type("aws:appautoscaling/policy:Policy")[0]
    config = policy.inputs["targetTrackingScalingPolicyConfiguration"]
    config["predefinedMetricSpecification"]["predefinedMetricType"] = "LambdaUtilization"
    check = "appautoscaling/policy.targetTrackingScalingPolicyConfiguration.predefinedMetricSpecification.predefinedMetricType"
    assert "LambdaUtilization" in _problems(mutable_prod, check)[0]


def test_unreserved_sentinel_is_not_checked_as_a_value(mutable_prod: ProgramRun):
    for fn in mutable_prod.of_type("aws:lambda/function:Function"):
        fn.inputs["reservedConcurrentExecutions"] = -1.0
    result = check_run(mutable_prod).result("lambda/function.reservedConcurrentExecutions")
    assert result.values == 0 and not result.problems


def test_a_function_reserving_zero_concurrency_is_rejected(mutable_prod: ProgramRun):
    function = next(f for f in mutable_prod.of_type("aws:lambda/function:Function")
                    if f.inputs.get("reservedConcurrentExecutions") not in (None, -1))
    function.inputs["reservedConcurrentExecutions"] = 0.0
    [problem] = _problems(mutable_prod, "lambda.reserved-not-zero")
    assert f"{function.name}: reservedConcurrentExecutions 0 throttles every invocation" in problem


def test_provisioned_above_reserved_is_rejected(mutable_prod: ProgramRun):
    config = mutable_prod.of_type("aws:lambda/provisionedConcurrencyConfig:ProvisionedConcurrencyConfig")[0]
    config.inputs["provisionedConcurrentExecutions"] = 500.0
    [problem] = _problems(mutable_prod, "lambda.provisioned-within-reserved")
    assert "provisioned 500 > reserved 200" in problem


def test_autoscaling_beyond_reserved_is_rejected(mutable_prod: ProgramRun):
    target = mutable_prod.of_type("aws:appautoscaling/target:Target")[0]
    target.inputs["maxCapacity"] = 201.0
    [problem] = _problems(mutable_prod, "lambda.autoscaling-within-reserved")
    assert "maxCapacity 201 > reserved concurrency 200" in problem


def test_an_iam_function_url_open_to_anyone_is_rejected(mutable_prod: ProgramRun):
    url = mutable_prod.of_type("aws:lambda/functionUrl:FunctionUrl")[0]
    assert url.inputs["authorizationType"] == "AWS_IAM"
    mutable_prod.resources.append(_resource("aws:lambda/permission:Permission", "open", {
        "action": "lambda:InvokeFunctionUrl", "function": url.inputs["functionName"], "qualifier": "live",
        "principal": "*", "functionUrlAuthType": "AWS_IAM", "region": url.region}))
    [problem] = _problems(mutable_prod, "lambda.function-url-permissions")
    assert "must not grant principal '*'" in problem


@pytest.mark.parametrize(("statements", "expected"), [
    ([{"Effect": "Allow", "Action": "lambda:InvokeFunctionUrl", "Resource": "{fn}:*",
       "Condition": {"StringEquals": {"lambda:FunctionUrlAuthType": "AWS_IAM"}}}], "but not lambda:InvokeFunction"),
    ([{"Effect": "Allow", "Action": ["lambda:InvokeFunctionUrl", "lambda:InvokeFunction"], "Resource": "{fn}:*"}],
     "without the condition lambda:FunctionUrlAuthType = AWS_IAM"),
])
def test_a_caller_role_of_an_iam_function_url_needs_both_grants_under_the_condition(
        mutable_prod: ProgramRun, statements: list[dict[str, Any]], expected: str):
    url = mutable_prod.of_type("aws:lambda/functionUrl:FunctionUrl")[0]
    fn = next(f for f in mutable_prod.of_type("aws:lambda/function:Function")
              if f.inputs.get("name") == url.inputs["functionName"] and f.region == url.region)
    document = json.dumps({"Statement": json.loads(json.dumps(statements).replace("{fn}", fn.outputs["arn"]))})
    mutable_prod.resources += [_role("caller", "lambda.amazonaws.com"),
                               _resource("aws:iam/rolePolicy:RolePolicy", "caller-policy",
                                         {"role": "caller", "policy": document})]
    [problem] = _problems(mutable_prod, "lambda.function-url-permissions")
    assert expected in problem and "caller" in problem


def test_a_caller_role_with_both_grants_under_the_condition_passes(mutable_prod: ProgramRun):
    from components.origin import invoke_origins_policy

    url = mutable_prod.of_type("aws:lambda/functionUrl:FunctionUrl")[0]
    fn = next(f for f in mutable_prod.of_type("aws:lambda/function:Function")
              if f.inputs.get("name") == url.inputs["functionName"] and f.region == url.region)
    alias = next(a for a in mutable_prod.of_type("aws:lambda/alias:Alias")
                 if a.inputs.get("functionName") in (fn.outputs["arn"], fn.outputs["name"]) and a.region == url.region)
    policy = invoke_origins_policy([fn.outputs["arn"]], [alias.outputs["arn"]])
    mutable_prod.resources += [_role("caller", "lambda.amazonaws.com"),
                               _resource("aws:iam/rolePolicy:RolePolicy", "caller-policy",
                                         {"role": "caller", "policy": policy})]
    assert _problems(mutable_prod, "lambda.function-url-permissions") == []


def test_alarm_action_in_another_region_is_rejected(mutable_prod: ProgramRun):
    alarm = next(a for a in mutable_prod.of_type("aws:cloudwatch/metricAlarm:MetricAlarm") if a.region != "us-east-1")
    alarm.inputs["alarmActions"] = ["arn:aws:sns:us-east-1:123456789012:elsewhere"]
    [problem] = _problems(mutable_prod, "cloudwatch.alarm-actions-same-region")
    assert alarm.name in problem


# --- synthetic graphs for the parts other components add --------------------------------

ACCOUNT = "123456789012"


def _resource(typ: str, name: str, inputs: dict[str, Any], outputs: dict[str, Any] | None = None) -> Resource:
    return Resource(type=typ, name=name, inputs=inputs, outputs={**inputs, **(outputs or {})}, id=name,
                    urn=f"urn:pulumi:prod::mcp-edge::{typ}::{name}")


def _run(*resources: Resource) -> ProgramRun:
    run = ProgramRun("prod", {})
    run.resources.extend(resources)
    return run


def _trust(*services: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": list(services)}, "Action": "sts:AssumeRole"}]})


def _role(name: str, *services: str) -> Resource:
    return _resource("aws:iam/role:Role", name, {"assumeRolePolicy": _trust(*services)},
                     {"arn": f"arn:aws:iam::{ACCOUNT}:role/{name}", "name": name})


def _policy(role: str, actions: list[str], resource: str) -> Resource:
    document = json.dumps({"Statement": [{"Effect": "Allow", "Action": actions, "Resource": resource}]})
    return _resource("aws:iam/rolePolicy:RolePolicy", f"{role}-policy", {"role": role, "policy": document})


def _function(name: str, region: str, role: str, **inputs: Any) -> Resource:
    arn = f"arn:aws:lambda:{region}:{ACCOUNT}:function:{name}"
    version = "1" if inputs.get("publish") else "$LATEST"
    return _resource("aws:lambda/function:Function", name,
                     {"name": name, "region": region, "role": f"arn:aws:iam::{ACCOUNT}:role/{role}", **inputs},
                     {"arn": arn, "qualifiedArn": f"{arn}:{version}"})


def _edge_graph(**function_inputs: Any) -> ProgramRun:
    inputs = {"publish": True, "runtime": "python3.13", "timeout": 10.0, "memorySize": 256.0, **function_inputs}
    region = inputs.pop("region", "us-east-1")
    router = _function("router", region, "router-role", **inputs)
    viewer = _resource("aws:cloudfront/function:Function", "viewer",
                       {"name": "viewer", "runtime": "cloudfront-js-2.0", "code": "function handler(e){return e.request}",
                        "publish": True}, {"arn": f"arn:aws:cloudfront::{ACCOUNT}:function/viewer"})
    distribution = _resource("aws:cloudfront/distribution:Distribution", "edge", {
        "aliases": ["mcp.example.com"],
        "viewerCertificate": {"acmCertificateArn": f"arn:aws:acm:us-east-1:{ACCOUNT}:certificate/x",
                              "sslSupportMethod": "sni-only"},
        "defaultCacheBehavior": {
            "allowedMethods": ["GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST", "DELETE"],
            "cachedMethods": ["GET", "HEAD"],
            "functionAssociations": [{"eventType": "viewer-request", "functionArn": viewer.outputs["arn"]}],
            "lambdaFunctionAssociations": [{"eventType": "origin-request", "lambdaArn": router.outputs["qualifiedArn"]}],
        },
    })
    return _run(_role("router-role", "lambda.amazonaws.com", "edgelambda.amazonaws.com"), router, viewer, distribution)


EDGE_RULES = [r for r in RULES if r.kind == "edge"]


@pytest.mark.parametrize("rule", EDGE_RULES, ids=lambda r: r.id)
def test_a_correct_edge_passes_every_edge_rule(rule):
    result = run_rule(rule, Graph(_edge_graph()))
    assert result.values == 1 and not result.problems, result.problems


@pytest.mark.parametrize(
    ("change", "rule_id", "message"),
    [
        ({"region": "eu-west-1"}, "edge.lambda-region", "must be in us-east-1"),
        ({"architectures": ["arm64"]}, "edge.lambda-architecture", "needs x86_64"),
        ({"publish": False}, "edge.lambda-numbered-version", "not a numbered version"),
        ({"environment": {"variables": {"A": "1"}}}, "edge.lambda-unsupported-features", "environment variables"),
        ({"layers": ["arn:aws:lambda:us-east-1:1:layer:x:1"]}, "edge.lambda-unsupported-features", "has layers"),
        ({"vpcConfig": {"subnetIds": ["subnet-1"]}}, "edge.lambda-unsupported-features", "VPC"),
        ({"ephemeralStorage": {"size": 1024.0}}, "edge.lambda-unsupported-features", "ephemeral storage"),
        ({"runtime": "java21"}, "edge.lambda-runtime", "not a Python 3 or Node.js"),
        ({"timeout": 31.0}, "edge.lambda-limits", "above 30 s"),
        ({"memorySize": 10241.0}, "edge.lambda-limits", "above 10240 MB"),
    ],
)
def test_lambda_at_edge_restrictions_are_enforced(change, rule_id, message):
    run = _edge_graph(**change)
    problems = _problems(run, rule_id)
    assert problems and any(message in p for p in problems), problems


def test_lambda_at_edge_without_explicit_region_is_rejected():
    run = _edge_graph()
    del run.of_type("aws:lambda/function:Function")[0].inputs["region"]
    assert "has no region=" in _problems(run, "edge.lambda-region")[0]


def test_lambda_at_edge_role_must_trust_edgelambda():
    run = _edge_graph()
    role = run.of_type("aws:iam/role:Role")[0]
    role.inputs["assumeRolePolicy"] = _trust("lambda.amazonaws.com")
    assert "does not trust edgelambda.amazonaws.com" in _problems(run, "edge.lambda-trust")[0]


def test_lambda_at_edge_referenced_by_alias_or_latest_is_rejected():
    for suffix in ("live", "$LATEST"):
        run = _edge_graph()
        association = run.of_type("aws:cloudfront/distribution:Distribution")[0].inputs["defaultCacheBehavior"][
            "lambdaFunctionAssociations"][0]
        association["lambdaArn"] = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:router:{suffix}"
        assert "not a numbered version" in _problems(run, "edge.lambda-numbered-version")[0]


def test_lambda_at_edge_with_provisioned_concurrency_is_rejected():
    run = _edge_graph()
    run.resources.append(_resource("aws:lambda/provisionedConcurrencyConfig:ProvisionedConcurrencyConfig", "pc",
                                   {"functionName": "router", "qualifier": "1", "region": "us-east-1",
                                    "provisionedConcurrentExecutions": 1.0}))
    assert "provisioned concurrency" in _problems(run, "edge.lambda-unsupported-features")[0]


def test_viewer_event_limits_apply_to_viewer_associations():
    run = _edge_graph()
    association = run.of_type("aws:cloudfront/distribution:Distribution")[0].inputs["defaultCacheBehavior"][
        "lambdaFunctionAssociations"][0]
    association["eventType"] = "viewer-request"
    problems = _problems(run, "edge.lambda-limits")
    assert any("above 5 s" in p for p in problems) and any("above 128 MB" in p for p in problems)


def test_association_with_a_function_the_program_does_not_create_is_not_verified():
    run = _edge_graph()
    association = run.of_type("aws:cloudfront/distribution:Distribution")[0].inputs["defaultCacheBehavior"][
        "lambdaFunctionAssociations"][0]
    association["lambdaArn"] = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:elsewhere:3"
    assert "cannot be verified" in _problems(run, "edge.lambda-region")[0]


def test_cloudfront_function_on_an_origin_event_or_oversized_is_rejected():
    run = _edge_graph()
    viewer = run.of_type("aws:cloudfront/function:Function")[0]
    viewer.inputs["code"] = "x" * 10241
    association = run.of_type("aws:cloudfront/distribution:Distribution")[0].inputs["defaultCacheBehavior"][
        "functionAssociations"][0]
    association["eventType"] = "origin-request"
    problems = _problems(run, "edge.cloudfront-function-association")
    assert any("viewer events" in p for p in problems) and any("10 KB" in p for p in problems)
    assert "above the limit of 10240" in _problems(run, "cloudfront/function.code")[0]


def test_allowed_methods_must_be_an_aws_set():
    run = _edge_graph()
    run.of_type("aws:cloudfront/distribution:Distribution")[0].inputs["defaultCacheBehavior"]["allowedMethods"] = [
        "GET", "POST"]
    problems = _problems(run, "cloudfront.allowed-methods")
    assert any("is not an AWS set" in p for p in problems)


def test_custom_domain_needs_a_us_east_1_certificate():
    run = _edge_graph()
    run.of_type("aws:cloudfront/distribution:Distribution")[0].inputs["viewerCertificate"]["acmCertificateArn"] = (
        f"arn:aws:acm:eu-west-1:{ACCOUNT}:certificate/x")
    assert "ACM certificate in us-east-1" in _problems(run, "cloudfront.custom-domain-certificate")[0]


def _queue(name: str, region: str, **inputs: Any) -> Resource:
    return _resource("aws:sqs/queue:Queue", name, {"name": name, "region": region, **inputs},
                     {"arn": f"arn:aws:sqs:{region}:{ACCOUNT}:{name}"})


def _consumer_graph(visibility: float, timeout: float, actions: list[str], **mapping: Any) -> ProgramRun:
    queue = _queue("results", "eu-west-1", visibilityTimeoutSeconds=visibility)
    consumer = _function("consumer", "eu-west-1", "consumer-role", timeout=timeout)
    esm = _resource("aws:lambda/eventSourceMapping:EventSourceMapping", "esm", {
        "region": "eu-west-1", "eventSourceArn": queue.outputs["arn"], "functionName": consumer.outputs["arn"],
        "functionResponseTypes": ["ReportBatchItemFailures"], "batchSize": 10.0, **mapping})
    return _run(queue, consumer, esm, _role("consumer-role", "lambda.amazonaws.com"),
                _policy("consumer-role", actions, queue.outputs["arn"]))


SQS_READ = ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"]


def test_queue_visibility_must_be_six_times_the_consumer_timeout():
    assert not _problems(_consumer_graph(180.0, 30.0, SQS_READ), "sqs.visibility-6x-consumer-timeout")
    [problem] = _problems(_consumer_graph(179.0, 30.0, SQS_READ), "sqs.visibility-6x-consumer-timeout")
    assert "visibility 179 s < 6 x consumer timeout 30 s = 180 s" in problem


def test_default_queue_visibility_counts_as_30_seconds():
    run = _consumer_graph(0.0, 10.0, SQS_READ)
    del run.of_type("aws:sqs/queue:Queue")[0].inputs["visibilityTimeoutSeconds"]
    assert "visibility 30 s < 6 x" in _problems(run, "sqs.visibility-6x-consumer-timeout")[0]


def test_consumer_role_must_read_its_queue():
    assert not _problems(_consumer_graph(180.0, 30.0, SQS_READ), "sqs.consumer-can-receive")
    [problem] = _problems(_consumer_graph(180.0, 30.0, ["sqs:ReceiveMessage", "sqs:GetQueueAttributes"]),
                          "sqs.consumer-can-receive")
    assert "does not allow sqs:DeleteMessage" in problem


def test_large_batches_need_a_batching_window():
    assert "maximumBatchingWindowInSeconds" in _problems(
        _consumer_graph(180.0, 30.0, SQS_READ, batchSize=100.0), "sqs.batching")[0]
    assert not _problems(
        _consumer_graph(180.0, 30.0, SQS_READ, batchSize=100.0, maximumBatchingWindowInSeconds=5.0), "sqs.batching")


def test_sqs_attribute_limits_are_the_documented_ones():
    run = _consumer_graph(50000.0, 30.0, SQS_READ)
    assert "above the maximum 43200" in _problems(run, "sqs/queue.visibilityTimeoutSeconds")[0]
    run.of_type("aws:sqs/queue:Queue")[0].inputs["redrivePolicy"] = json.dumps(
        {"deadLetterTargetArn": "arn:aws:sqs:eu-west-1:1:dlq", "maxReceiveCount": 0})
    assert "below the minimum 1" in _problems(run, "sqs/queue.redrivePolicy(json).maxReceiveCount")[0]


def _destination_graph(actions: list[str]) -> ProgramRun:
    success, failure = _queue("ok", "eu-west-1"), _queue("dlq", "eu-west-1")
    probe = _function("probe", "eu-west-1", "probe-role", timeout=30.0)
    config = _resource("aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig", "probe-async", {
        "region": "eu-west-1", "functionName": "probe", "maximumRetryAttempts": 0.0, "maximumEventAgeInSeconds": 60.0,
        "destinationConfig": {"onSuccess": {"destination": success.outputs["arn"]},
                              "onFailure": {"destination": failure.outputs["arn"]}}})
    policy = _policy("probe-role", actions, f"arn:aws:sqs:eu-west-1:{ACCOUNT}:*")
    return _run(success, failure, probe, config, _role("probe-role", "lambda.amazonaws.com"), policy)


def test_async_destinations_must_be_writable_by_the_function_role():
    assert not _problems(_destination_graph(["sqs:SendMessage"]), "lambda.async-destinations-writable")
    problems = _problems(_destination_graph(["sqs:ReceiveMessage"]), "lambda.async-destinations-writable")
    assert len(problems) == 2 and all("does not allow sqs:SendMessage" in p for p in problems)


def test_async_invoke_limits_come_from_the_model():
    run = _destination_graph(["sqs:SendMessage"])
    config = run.of_type("aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig")[0]
    config.inputs.update(maximumRetryAttempts=3.0, maximumEventAgeInSeconds=59.0)
    assert "above the maximum 2" in _problems(run, "lambda/functionEventInvokeConfig.maximumRetryAttempts")[0]
    assert "below the minimum 60" in _problems(run, "lambda/functionEventInvokeConfig.maximumEventAgeInSeconds")[0]


@pytest.mark.parametrize(
    ("expression", "ok"),
    [("rate(1 minute)", True), ("rate(5 minutes)", True), ("rate(1 minutes)", False), ("rate(2 minute)", False),
     ("rate(0 minutes)", False), ("cron(0/5 * * * ? *)", True), ("cron(* * * *)", False),
     ("at(2026-12-01T10:00:00)", True), ("every 5 minutes", False)],
)
def test_schedule_expressions_follow_eventbridge_scheduler_syntax(expression: str, ok: bool):
    contract = next(c for c in INPUT_CONTRACTS if c.id == "scheduler/schedule.scheduleExpression")
    run = _run(_resource("aws:scheduler/schedule:Schedule", "s", {"scheduleExpression": expression}))
    assert (not check_input(contract, run).problems) is ok


def test_schedule_role_must_trust_scheduler_and_invoke_the_target():
    target = _function("probe", "eu-west-1", "probe-role")
    schedule = _resource("aws:scheduler/schedule:Schedule", "s", {"region": "eu-west-1", "target": {
        "arn": target.outputs["arn"], "roleArn": f"arn:aws:iam::{ACCOUNT}:role/scheduler-role"}})
    good = _run(target, schedule, _role("scheduler-role", "scheduler.amazonaws.com"),
                _policy("scheduler-role", ["lambda:InvokeFunction"], target.outputs["arn"]))
    assert not _problems(good, "scheduler.target-invocable")
    bad = _run(target, schedule, _role("scheduler-role", "lambda.amazonaws.com"))
    problems = _problems(bad, "scheduler.target-invocable")
    assert any("does not trust scheduler" in p for p in problems) and any("InvokeFunction" in p for p in problems)


def test_a_schedule_starting_a_state_machine_needs_states_start_execution():
    machine_arn = f"arn:aws:states:eu-west-1:{ACCOUNT}:stateMachine:rounds"
    schedule = _resource("aws:scheduler/schedule:Schedule", "s", {"region": "eu-west-1", "target": {
        "arn": machine_arn, "roleArn": f"arn:aws:iam::{ACCOUNT}:role/scheduler-role"}})
    good = _run(schedule, _role("scheduler-role", "scheduler.amazonaws.com"),
                _policy("scheduler-role", ["states:StartExecution"], machine_arn))
    assert not _problems(good, "scheduler.target-invocable")
    bad = _run(schedule, _role("scheduler-role", "scheduler.amazonaws.com"),
               _policy("scheduler-role", ["lambda:InvokeFunction"], machine_arn))
    assert "does not allow states:StartExecution" in _problems(bad, "scheduler.target-invocable")[0]


def test_a_state_machines_role_must_invoke_every_function_its_definition_names():
    from components.probe_rounds import rounds_definition

    probe = _function("probe", "eu-west-1", "probe-role")
    definition = json.dumps(rounds_definition(probe.outputs["arn"], [{"target": "edge"}], 30))
    machine = _resource("aws:sfn/stateMachine:StateMachine", "m", {
        "region": "eu-west-1", "definition": definition, "roleArn": f"arn:aws:iam::{ACCOUNT}:role/rounds-role"})
    good = _run(probe, machine, _role("rounds-role", "states.amazonaws.com"),
                _policy("rounds-role", ["lambda:InvokeFunction"], probe.outputs["arn"]))
    assert not _problems(good, "states.workflow-invocable")
    other = _run(probe, machine, _role("rounds-role", "states.amazonaws.com"),
                 _policy("rounds-role", ["lambda:InvokeFunction"], probe.outputs["arn"] + "-other"))
    assert "does not allow lambda:InvokeFunction" in _problems(other, "states.workflow-invocable")[0]
    untrusted = _run(probe, machine, _role("rounds-role", "lambda.amazonaws.com"),
                     _policy("rounds-role", ["lambda:InvokeFunction"], probe.outputs["arn"]))
    assert "does not trust states.amazonaws.com" in _problems(untrusted, "states.workflow-invocable")[0]


def test_auto_named_physical_names_must_fit():
    run = _run(_resource("aws:iam/role:Role", "r", {}, {"name": "x" * 65}))
    assert "limit 64" in _problems(run, "names.physical-name-lengths")[0]


def test_iam_matching_honours_wildcards_and_explicit_deny():
    statements = [{"Effect": "Allow", "Action": "sqs:*", "Resource": "arn:aws:sqs:eu-west-1:1:*"}]
    assert allows(statements, "sqs:SendMessage", "arn:aws:sqs:eu-west-1:1:q")
    assert not allows(statements, "sqs:SendMessage", "arn:aws:sqs:us-east-1:1:q")
    deny = [*statements, {"Effect": "Deny", "Action": "sqs:SendMessage", "Resource": "*"}]
    assert not allows(deny, "sqs:SendMessage", "arn:aws:sqs:eu-west-1:1:q")


def test_lambda_references_parse_names_and_arns():
    assert parse_lambda_ref("fn", "eu-west-1") == ("eu-west-1", "fn", None)
    assert parse_lambda_ref("fn:live", "eu-west-1") == ("eu-west-1", "fn", "live")
    assert parse_lambda_ref(f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:fn:7", "eu-west-1") == ("us-east-1", "fn", "7")


def test_cli_reports_and_exits_zero_on_the_program(variant_runs: dict[str, ProgramRun], monkeypatch, capsys):
    by_overrides = {json.dumps(o, sort_keys=True): variant_runs[n] for n, o in contracts_module.VARIANTS.items()}
    monkeypatch.setattr(contracts_module, "run_program",
                        lambda stack, config_overrides, stack_file=None:
                        by_overrides[json.dumps(config_overrides, sort_keys=True)])
    assert contracts_module.main(["--all-variants"]) == 0
    out = capsys.readouterr().out
    assert out.count("Contract checks: stack prod, variant") == len(variant_runs)


def test_schedule_group_must_exist_in_the_schedules_region():
    schedule = _resource("aws:scheduler/schedule:Schedule", "s", {"region": "eu-west-1", "groupName": "probes"})
    group = _resource("aws:scheduler/scheduleGroup:ScheduleGroup", "g", {"region": "eu-west-1", "name": "probes"})
    assert not _problems(_run(schedule, group), "scheduler.group-exists")
    elsewhere = _resource("aws:scheduler/scheduleGroup:ScheduleGroup", "g", {"region": "us-east-1", "name": "probes"})
    assert "not created by this program in eu-west-1" in _problems(_run(schedule, elsewhere), "scheduler.group-exists")[0]


def test_global_table_replicas_need_other_regions_and_full_streams():
    def table(**inputs: Any) -> ProgramRun:
        return _run(_resource("aws:dynamodb/table:Table", "t", {
            "region": "us-east-1", "streamEnabled": True, "streamViewType": "NEW_AND_OLD_IMAGES", **inputs}))

    assert not _problems(table(replicas=[{"regionName": "eu-west-1"}]), "dynamodb.global-table-replicas")
    problems = _problems(table(replicas=[{"regionName": "us-east-1"}, {"regionName": "eu-west-1"},
                                         {"regionName": "eu-west-1"}], streamViewType="NEW_IMAGE"),
                         "dynamodb.global-table-replicas")
    assert len(problems) == 3


def test_snapstart_together_with_provisioned_concurrency_is_a_problem(mutable_prod: ProgramRun):
    # Given prod's provisioned origins, when one of them also asks for SnapStart
    fn = next(f for f in mutable_prod.of_type("aws:lambda/function:Function") if "-origin-us-east-1" in f.name)
    fn.inputs["snapStart"] = {"applyOn": "PublishedVersions"}
    fn.inputs["ephemeralStorage"] = {"size": 1024.0}
    problems = _problems(mutable_prod, "lambda.snapstart-alone")
    assert problems == [f"{fn.name}: SnapStart cannot be combined with provisioned concurrency",
                        f"{fn.name}: ephemeral storage 1024 MB: SnapStart allows at most 512 MB"]


def test_an_ecr_lifecycle_rule_aws_would_refuse_is_a_problem(variant_runs: dict[str, ProgramRun]):
    run = copy.deepcopy(variant_runs["image"])
    assert not _problems(run, "ecr.lifecycle-policy-rules")
    lifecycle = sorted(run.of_type("aws:ecr/lifecyclePolicy:LifecyclePolicy"), key=lambda r: r.name)[0]
    lifecycle.inputs["policy"] = json.dumps({"rules": [{"rulePriority": 1, "action": {"type": "expire"}, "selection": {
        "tagStatus": "untagged", "countType": "sinceImagePushed", "countNumber": 7}}]})
    assert _problems(run, "ecr.lifecycle-policy-rules") == [
        f"{lifecycle.name}: rules[0].selection.countUnit: sinceImagePushed counts days"]


def test_an_image_named_by_tag_or_from_another_region_is_a_problem(variant_runs: dict[str, ProgramRun]):
    run = copy.deepcopy(variant_runs["image"])
    assert not _problems(run, "lambda.image-by-digest-in-own-region")
    origins = sorted((f for f in run.of_type("aws:lambda/function:Function") if f.inputs.get("packageType") == "Image"),
                     key=lambda f: f.name)
    by_tag, elsewhere = origins[0], origins[1]
    by_tag.inputs["imageUri"] = by_tag.inputs["imageUri"].partition("@")[0] + ":latest"
    elsewhere.inputs["imageUri"] = by_tag.inputs["imageUri"].replace(by_tag.region, "eu-north-1", 1) \
        .partition(":latest")[0] + "@sha256:" + "0" * 64
    problems = _problems(run, "lambda.image-by-digest-in-own-region")
    assert len(problems) == 2
    assert any("is not named by digest" in p and by_tag.name in p for p in problems)
    assert any("Lambda pulls only from its own region" in p and elsewhere.name in p for p in problems)
