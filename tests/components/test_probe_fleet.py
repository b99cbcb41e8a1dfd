"""ProbeFleet under Pulumi mocks: the whole probe wiring, for every probe region of the prod
stack (and for stacks that probe from fewer regions)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pulumi.runtime import rpc

from components.probe_rounds import interval_of, run_definition
from functions.probe.event import parse_event
from stack_config.loading import load_from_stack_file
from tests.harness import ProgramRun, Resource, run_program

CONFIG = load_from_stack_file("prod")
PROBE_REGIONS = list(CONFIG.probes.regions)
FUNCTION = "aws:lambda/function:Function"
SCHEDULE = "aws:scheduler/schedule:Schedule"
STATE_MACHINE = "aws:sfn/stateMachine:StateMachine"
QUEUE = "aws:sqs/queue:Queue"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


def unsecret(value: Any) -> Any:
    if isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig:
        return value["value"]
    return value


def fleet(run: ProgramRun, region: str) -> Resource:
    return run.named(f"acme-mcp-probes-{region}")


def in_fleet(run: ProgramRun, region: str, typ: str, name_contains: str = "") -> list[Resource]:
    return [r for r in run.descendants_of(fleet(run, region), typ) if name_contains in r.name]


def only(resources: list[Resource]) -> Resource:
    assert len(resources) == 1, [r.name for r in resources]
    return resources[0]


def queue(run: ProgramRun, region: str, kind: str) -> Resource:
    return only([q for q in in_fleet(run, region, QUEUE) if q["name"] == f"acme-mcp-prod-probe-{kind}-{region}"])


def probe_function(run: ProgramRun, region: str) -> Resource:
    return only(in_fleet(run, region, FUNCTION, "-probe-function"))


def consumer_function(run: ProgramRun, region: str) -> Resource:
    return only(in_fleet(run, region, FUNCTION, "-consumer-function"))


def role_statements(run: ProgramRun, role_arn: str) -> list[dict[str, Any]]:
    role = only([r for r in run.of_type("aws:iam/role:Role") if r["arn"] == role_arn])
    policies = [p for p in run.of_type(ROLE_POLICY) if p["role"] == role.id or p["role"] == role["name"]]
    return [s for p in policies for s in json.loads(p["policy"])["Statement"]]


def actions_on(statements: list[dict[str, Any]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for statement in statements:
        assert statement["Effect"] == "Allow"
        for action in statement["Action"]:
            out.setdefault(action, set()).update(statement["Resource"])
    return out


# --- every probe region -------------------------------------------------------------------


def test_one_fleet_per_probe_region_with_every_child_in_that_region(prod: ProgramRun):
    fleets = prod.of_type("mcpedge:index:ProbeFleet")
    assert sorted(f.name for f in fleets) == sorted(f"acme-mcp-probes-{r}" for r in PROBE_REGIONS)
    for region in PROBE_REGIONS:
        regional = [r for r in prod.descendants_of(fleet(prod, region)) if r.custom and not r.type.startswith("aws:iam/")]
        assert regional and {r.region for r in regional} == {region}


@pytest.mark.parametrize("region", PROBE_REGIONS)
def test_probe_function_is_light_python313_arm64_with_the_client_credentials_in_its_environment(prod, region):
    fn = probe_function(prod, region)
    assert fn["runtime"] == "python3.13" and fn["architectures"] == ["arm64"]
    assert fn["handler"] == "probe.handler.handler" and fn["name"] == "acme-mcp-prod-probe"
    assert fn["timeout"] == CONFIG.probes.timeout_s
    env = unsecret(fn["environment"])["variables"]
    assert env["PROBE_DEADLINE_S"] == str(CONFIG.probes.deadline_s)
    assert env["PROBE_DEGRADED_LATENCY_MS"] == str(CONFIG.probes.degraded_latency_ms)
    assert env["TOKEN_URL"] == CONFIG.auth.token_url and env["CLIENT_ID"] == CONFIG.auth.probe_client_id
    assert env["CLIENT_SECRET_NAME"] == CONFIG.auth.probe_client_secret_name
    # No origin secret: direct targets are signed with the role's own credentials.
    assert not [name for name in env if "ORIGIN_SECRET" in name]
    # Header names are the contract's (functions/contract.py): they do not travel as variables.
    assert not {"REGION_PIN_HEADER", "SERVED_REGION_HEADER", "EDGE_AUTHORIZATION_HEADER"} & set(env)
    assert unsecret(fn["environment"]) is fn["environment"]  # nothing secret left in it


def rounds_machine(run: ProgramRun, region: str) -> Resource:
    return only(in_fleet(run, region, STATE_MACHINE))


@pytest.mark.parametrize("region", PROBE_REGIONS)
def test_one_schedule_a_minute_starts_the_express_rounds_workflow(prod, region):
    schedule = only(in_fleet(prod, region, SCHEDULE))
    machine = rounds_machine(prod, region)
    assert schedule["flexibleTimeWindow"] == {"mode": "OFF"}
    assert schedule["scheduleExpression"] == "rate(1 minute)"
    assert schedule["state"] == "ENABLED"
    assert schedule["target"]["arn"] == machine["arn"]
    assert schedule["target"]["retryPolicy"]["maximumEventAgeInSeconds"] == 60
    assert machine["type"] == "EXPRESS" and machine["region"] == region
    logging = machine["loggingConfiguration"]
    assert logging["level"] == "ERROR"
    log_group = only(in_fleet(prod, region, "aws:cloudwatch/logGroup:LogGroup", "-rounds-logs"))
    assert logging["logDestination"] == f"{log_group['arn']}:*"
    assert log_group["name"].startswith("/aws/vendedlogs/states/")


@pytest.mark.parametrize("region", PROBE_REGIONS)
def test_every_round_invokes_the_probe_asynchronously_once_per_target(prod, region):
    machine = rounds_machine(prod, region)
    schedule = only(in_fleet(prod, region, SCHEDULE))
    raw = machine["definition"]
    for password in prod.of_type("random:index/randomPassword:RandomPassword"):
        assert password["result"] not in raw, "secret in plain text"
    invocations = run_definition(json.loads(raw), json.loads(schedule["target"]["input"]))
    probe = probe_function(prod, region)
    assert {i.function_arn for i in invocations} == {probe["arn"]}
    interval = CONFIG.probes.interval_s
    assert interval_of(json.loads(raw)) == interval
    assert sorted({i.at_s for i in invocations}) == list(range(0, 60, interval))
    rounds: dict[int, list[Any]] = {}
    for invocation in invocations:
        rounds.setdefault(invocation.at_s, []).append(parse_event(dict(invocation.payload)))
    origin_regions = CONFIG.regions
    for events_of_round in rounds.values():
        events = {(e.target, e.target_region): e for e in events_of_round}
        assert len(events_of_round) == len(events) == 2 * len(origin_regions)
        for origin_region in origin_regions:
            edge = events[("edge", origin_region)]
            # The distribution's own domain, which resolves from the first minute (prod's custom
            # domain resolves only once its DNS record points at the distribution).
            distribution = prod.one("aws:cloudfront/distribution:Distribution")
            assert edge.endpoint == f"https://{distribution['domainName']}{CONFIG.mcp_path}"
            assert edge.pin_region == origin_region
            assert CONFIG.edge.custom_domain and CONFIG.edge.custom_domain not in edge.endpoint
            assert prod.outputs["topology"]["edge"]["distributionMcpUrl"] == edge.endpoint
            assert not edge.signed
            origin = events[("origin", origin_region)]
            assert origin.endpoint == prod.outputs["originUrls"][origin_region].rstrip("/") + CONFIG.mcp_path
            assert origin.signed and origin.pin_region is None


@pytest.mark.parametrize("region", PROBE_REGIONS)
def test_the_rounds_role_may_invoke_the_probe_function_only(prod, region):
    machine = rounds_machine(prod, region)
    role = only([r for r in prod.of_type("aws:iam/role:Role") if r["arn"] == machine["roleArn"]])
    trust = json.loads(role["assumeRolePolicy"])["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "states.amazonaws.com"}]
    assert trust[0]["Condition"] == {"StringEquals": {"aws:SourceAccount": "123456789012"}}
    actions = actions_on(role_statements(prod, machine["roleArn"]))
    assert actions.pop("lambda:InvokeFunction") == {probe_function(prod, region)["arn"]}
    # What remains is Step Functions' log delivery, which AWS only grants on every resource.
    assert all(a.startswith("logs:") and resources == {"*"} for a, resources in actions.items())


@pytest.mark.parametrize("region", PROBE_REGIONS)
def test_scheduler_role_may_start_the_rounds_workflow_only(prod, region):
    role_arns = {s["target"]["roleArn"] for s in in_fleet(prod, region, SCHEDULE)}
    (role_arn,) = role_arns
    role = only([r for r in prod.of_type("aws:iam/role:Role") if r["arn"] == role_arn])
    trust = json.loads(role["assumeRolePolicy"])["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "scheduler.amazonaws.com"}]
    assert trust[0]["Condition"] == {"StringEquals": {"aws:SourceAccount": "123456789012"}}
    assert actions_on(role_statements(prod, role_arn)) == {"states:StartExecution": {rounds_machine(prod, region)["arn"]}}


@pytest.mark.parametrize("region", PROBE_REGIONS)
def test_async_invocations_have_no_retries_a_300s_age_and_both_destinations(prod, region):
    config = only(in_fleet(prod, region, "aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig"))
    assert config["functionName"] == probe_function(prod, region)["name"]
    assert config["maximumRetryAttempts"] == 0 and config["maximumEventAgeInSeconds"] == 300
    assert config["destinationConfig"] == {
        "onSuccess": {"destination": queue(prod, region, "results")["arn"]},
        "onFailure": {"destination": queue(prod, region, "dlq")["arn"]},
    }


@pytest.mark.parametrize("region", PROBE_REGIONS)
def test_probe_role_may_send_to_its_two_queues_read_its_client_secret_invoke_the_origins_and_nothing_else(prod, region):
    fn = probe_function(prod, region)
    access = actions_on(role_statements(prod, fn["role"]))
    assert access["sqs:SendMessage"] == {queue(prod, region, "results")["arn"], queue(prod, region, "dlq")["arn"]}
    # The client secret only: there is no origin secret.
    assert access["secretsmanager:GetSecretValue"] == {
        f"arn:aws:secretsmanager:{region}:123456789012:secret:{CONFIG.auth.probe_client_secret_name}-??????"}
    log_group = fn["loggingConfig"]["logGroup"]
    assert access["logs:CreateLogStream"] == access["logs:PutLogEvents"] == {
        f"arn:aws:logs:{region}:123456789012:log-group:{log_group}:*"}
    assert set(access) == {"sqs:SendMessage", "secretsmanager:GetSecretValue", "logs:CreateLogStream", "logs:PutLogEvents",
                           "lambda:InvokeFunctionUrl", "lambda:InvokeFunction", "kms:Decrypt"}


@pytest.mark.parametrize("region", PROBE_REGIONS)
def test_an_existing_client_secret_may_be_decrypted_with_its_kms_key_only_through_secrets_manager_for_that_secret(
        prod, region):
    # A secret encrypted with a customer managed key: Secrets Manager decrypts it with the caller's permission.
    fn = probe_function(prod, region)
    (statement,) = [s for s in role_statements(prod, fn["role"]) if "kms:Decrypt" in s["Action"]]
    assert statement["Action"] == ["kms:Decrypt"] and statement["Resource"] == [f"arn:aws:kms:{region}:*:key/*"]
    assert statement["Condition"] == {
        "StringEquals": {"kms:ViaService": f"secretsmanager.{region}.amazonaws.com"},
        "StringLike": {"kms:EncryptionContext:SecretARN":
                       f"arn:aws:secretsmanager:{region}:123456789012:secret:{CONFIG.auth.probe_client_secret_name}-??????"},
    }


def origin_arns(run: ProgramRun) -> set[str]:
    """Every origin function's ARN and its alias's, from the origins' own resources."""
    functions = [f for f in run.of_type(FUNCTION) if "-origin" in f.name and "probe" not in f.name]
    aliases = run.of_type("aws:lambda/alias:Alias")
    assert len(functions) == len(aliases) == len(CONFIG.regions)
    return {f["arn"] for f in functions} | {a["arn"] for a in aliases}


@pytest.mark.parametrize("region", PROBE_REGIONS)
def test_probe_role_may_call_exactly_the_stacks_origin_urls_with_aws_iam_auth_and_invoke_them(prod, region):
    statements = [s for s in role_statements(prod, probe_function(prod, region)["role"])
                  if any(a.startswith("lambda:") for a in s["Action"])]
    assert sorted(s["Action"][0] for s in statements) == ["lambda:InvokeFunction", "lambda:InvokeFunctionUrl"]
    url_calls = next(s for s in statements if s["Action"] == ["lambda:InvokeFunctionUrl"])
    invokes = next(s for s in statements if s["Action"] == ["lambda:InvokeFunction"])
    # Every origin region's function and its alias (the Function URL's qualifier), nothing else.
    assert set(url_calls["Resource"]) == set(invokes["Resource"]) == origin_arns(prod)
    assert all(":function:acme-mcp-prod-origin" in arn for arn in url_calls["Resource"])
    assert url_calls["Condition"] == {"StringEquals": {"lambda:FunctionUrlAuthType": "AWS_IAM"}}
    assert "Condition" not in invokes
    # The rounds start probing once the role may call the origins.
    policy = only([p for p in in_fleet(prod, region, ROLE_POLICY) if p.name.endswith("-probe-origins")])
    assert policy.urn in list(rounds_machine(prod, region).options["dependencies"])


def test_a_fleet_given_arns_for_other_regions_than_its_origin_urls_is_refused_naming_both():
    from components.probe_fleet import ProbeFleetArgs, fleet_args
    from components.validation import ComponentArgsError

    args = ProbeFleetArgs(
        region="eu-west-1", server_id="acme", edge_mcp_url="https://mcp.acme.example/mcp",
        origin_urls={"eu-west-1": "https://a.lambda-url.eu-west-1.on.aws/"},
        origin_function_arns={"us-east-1": "arn:aws:lambda:us-east-1:123456789012:function:o"},
        origin_alias_arns={"eu-west-1": "arn:aws:lambda:eu-west-1:123456789012:function:o:live"},
        table_name="t", table_arn="arn:aws:dynamodb:eu-west-1:123456789012:table/t",
        alert_topic_arn="arn:aws:sns:eu-west-1:123456789012:t", alert_key_arn="arn:aws:kms:eu-west-1:123456789012:key/k",
        credentials={"token_url": "https://auth.acme.example/token", "client_id": "c", "client_secret_name": "s",
                     "audience": "https://mcp.acme.example/mcp"})
    with pytest.raises(ComponentArgsError, match=r"origin_function_arns = \['us-east-1'\]: must name the regions "
                                                 r"of origin_urls, \['eu-west-1'\]"):
        fleet_args("probes", args)


@pytest.mark.parametrize("region", PROBE_REGIONS)
def test_queues_are_encrypted_kept_7_and_14_days_and_outlast_six_consumer_timeouts(prod, region):
    results, dlq, quarantine = (queue(prod, region, k) for k in ("results", "dlq", "quarantine"))
    assert results["messageRetentionSeconds"] == 7 * 86400
    assert dlq["messageRetentionSeconds"] == quarantine["messageRetentionSeconds"] == 14 * 86400
    for q in (results, dlq, quarantine):
        assert q["sqsManagedSseEnabled"] is True
    for q in (results, dlq):
        assert q["visibilityTimeoutSeconds"] >= 6 * CONFIG.probes.consumer_timeout_s
        redrive = json.loads(q["redrivePolicy"])
        assert redrive["deadLetterTargetArn"] == quarantine["arn"] and redrive["maxReceiveCount"] >= 3
    allow = only(in_fleet(prod, region, "aws:sqs/redriveAllowPolicy:RedriveAllowPolicy"))
    assert allow["queueUrl"] == quarantine["url"]
    assert sorted(json.loads(allow["redriveAllowPolicy"])["sourceQueueArns"]) == sorted([results["arn"], dlq["arn"]])


@pytest.mark.parametrize("region", PROBE_REGIONS)
def test_consumer_reads_both_queues_with_partial_batch_failures(prod, region):
    consumer = consumer_function(prod, region)
    assert consumer["runtime"] == "python3.13" and consumer["architectures"] == ["arm64"]
    assert consumer["handler"] == "results.handler.handler"
    assert consumer["timeout"] == CONFIG.probes.consumer_timeout_s
    mappings = in_fleet(prod, region, "aws:lambda/eventSourceMapping:EventSourceMapping")
    assert sorted(m["eventSourceArn"] for m in mappings) == sorted(
        [queue(prod, region, "results")["arn"], queue(prod, region, "dlq")["arn"]])
    for mapping in mappings:
        assert mapping["functionName"] == consumer["arn"]
        assert mapping["functionResponseTypes"] == ["ReportBatchItemFailures"]
        assert 0 < mapping["maximumBatchingWindowInSeconds"] <= 5
        assert mapping["scalingConfig"]["maximumConcurrency"] >= 2
        # Visibility must also cover the batching window the message may wait in.
        assert queue(prod, region, "results")["visibilityTimeoutSeconds"] >= (
            6 * consumer["timeout"] + mapping["maximumBatchingWindowInSeconds"])


@pytest.mark.parametrize("region", PROBE_REGIONS)
def test_consumer_writes_its_local_replica_and_alerts_its_regional_topic(prod, region):
    consumer = consumer_function(prod, region)
    env = consumer["environment"]["variables"]
    topic = prod.outputs["alertTopicArns"][region]
    assert env["TABLE_NAME"] == prod.outputs["resultsTable"] and env["ALERT_TOPIC_ARN"] == topic
    assert env["DEAD_LETTER_QUEUE_ARN"] == queue(prod, region, "dlq")["arn"]
    assert env["HISTORY_TTL_DAYS"] == str(CONFIG.probes.history_ttl_days)
    access = actions_on(role_statements(prod, consumer["role"]))
    replica = f"arn:aws:dynamodb:{region}:123456789012:table/{prod.outputs['resultsTable']}"
    assert replica in access["dynamodb:Query"]
    for action in ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"):
        assert replica in access[action]
    assert access["sns:Publish"] == {topic}
    assert access["sqs:DeleteMessage"] == {queue(prod, region, "results")["arn"], queue(prod, region, "dlq")["arn"]}


@pytest.mark.parametrize("region", PROBE_REGIONS)
def test_consumer_claims_its_alerts_in_the_tables_home_region_and_may_write_claims_there_only(prod, region):
    # Given every probe region's consumer and the one global table
    consumer = consumer_function(prod, region)
    table = prod.one("aws:dynamodb/table:Table")
    # Then each claims its alerts in the table's home region ...
    assert consumer["environment"]["variables"]["ALERT_CLAIM_REGION"] == table.region
    # ... and may write there only what claims need; everything else stays in its own replica
    access = actions_on(role_statements(prod, consumer["role"]))
    home = f"arn:aws:dynamodb:{table.region}:123456789012:table/{table['name']}"
    local = f"arn:aws:dynamodb:{region}:123456789012:table/{table['name']}"
    for action in ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"):
        assert access[action] == {home, local}
    assert access["dynamodb:ConditionCheckItem"] == {local}


@pytest.mark.parametrize("region", PROBE_REGIONS)
def test_consumer_may_query_every_probe_regions_copy_and_write_none_but_its_own_and_the_claims(prod, region):
    # Given the one global table with a copy in every probe region
    table = prod.one("aws:dynamodb/table:Table")
    copies = {f"arn:aws:dynamodb:{r}:123456789012:table/{table['name']}" for r in PROBE_REGIONS}
    # Then a consumer may query each copy (region health: the other probe regions' streaks where
    # their consumers write them) ...
    access = actions_on(role_statements(prod, consumer_function(prod, region)["role"]))
    assert access["dynamodb:Query"] == copies
    # ... and writes only its own region's copy, and the home region's for alert claims
    writable = {f"arn:aws:dynamodb:{r}:123456789012:table/{table['name']}" for r in (region, table.region)}
    assert access["dynamodb:PutItem"] == access["dynamodb:UpdateItem"] == writable


@pytest.mark.parametrize("region", PROBE_REGIONS)
def test_dead_letter_depth_alarms_to_the_regional_topic(prod, region):
    alarms = in_fleet(prod, region, "aws:cloudwatch/metricAlarm:MetricAlarm")
    dlq = only([a for a in alarms if a["dimensions"] == {"QueueName": queue(prod, region, "dlq")["name"]}])
    assert (dlq["namespace"], dlq["metricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert dlq["threshold"] == 0 and dlq["comparisonOperator"] == "GreaterThanThreshold"
    topic = prod.outputs["alertTopicArns"][region]
    for alarm in alarms:
        assert alarm["alarmActions"] == [topic]
    quarantine = only([a for a in alarms if a["dimensions"] == {"QueueName": queue(prod, region, "quarantine")["name"]}])
    assert quarantine["evaluationPeriods"] == 1


def test_exports_name_every_regions_results_queue_and_the_table(prod: ProgramRun):
    assert prod.outputs["probeQueues"] == {r: queue(prod, r, "results")["url"] for r in PROBE_REGIONS}
    assert prod.outputs["probeDeadLetterQueues"] == {r: queue(prod, r, "dlq")["url"] for r in PROBE_REGIONS}


def test_every_region_uploads_the_same_packages_and_the_probe_package_is_light(prod: ProgramRun):
    import zipfile

    probe_paths = {probe_function(prod, r)["code"].path for r in PROBE_REGIONS}
    consumer_paths = {consumer_function(prod, r)["code"].path for r in PROBE_REGIONS}
    assert len(probe_paths) == len(consumer_paths) == 1
    probe_names = zipfile.ZipFile(probe_paths.pop()).namelist()
    assert "probe/handler.py" in probe_names and "httpx/__init__.py" in probe_names and "rfc8785/__init__.py" in probe_names
    assert not [n for n in probe_names if n.startswith(("mcp/", "boto3/", "pydantic/"))]
    consumer_names = zipfile.ZipFile(consumer_paths.pop()).namelist()
    assert "results/handler.py" in consumer_names and "aws_lambda_powertools/__init__.py" in consumer_names


# --- other stacks -----------------------------------------------------------------------------


def test_probes_from_a_subset_of_regions_still_probe_every_origin():
    run = run_program("prod", config_overrides={"probeRegions": ["eu-west-1"]})
    assert [f.name for f in run.of_type("mcpedge:index:ProbeFleet")] == ["acme-mcp-probes-eu-west-1"]
    definition = json.loads(rounds_machine(run, "eu-west-1")["definition"])
    first_round = [i for i in run_definition(definition) if i.at_s == 0]
    assert len(first_round) == 2 * len(CONFIG.regions)
    table = run.one("aws:dynamodb/table:Table")  # stays in prod's home region, replicated to the probe region
    assert table.region == "us-east-1" and [r["regionName"] for r in table["replicas"]] == ["eu-west-1"]
    assert set(run.outputs["probeQueues"]) == {"eu-west-1"}
    alone = run_program("prod", config_overrides={"probeRegions": ["eu-west-1"], "resultsTableHomeRegion": None})
    table = alone.one("aws:dynamodb/table:Table")
    assert table.region == "eu-west-1" and not table.get("replicas")


def test_probe_interval_and_timeouts_follow_the_config():
    run = run_program("prod", config_overrides={"probeIntervalSeconds": 15, "consumerTimeoutSeconds": 60,
                                                "probeTimeoutSeconds": 45, "probeDeadlineSeconds": 40})
    region = PROBE_REGIONS[0]
    definition = json.loads(rounds_machine(run, region)["definition"])
    assert interval_of(definition) == 15
    assert sorted({i.at_s for i in run_definition(definition)}) == [0, 15, 30, 45]
    assert queue(run, region, "results")["visibilityTimeoutSeconds"] >= 360
    assert probe_function(run, region)["timeout"] == 45
    assert unsecret(probe_function(run, region)["environment"])["variables"]["PROBE_DEADLINE_S"] == "40"
    assert consumer_function(run, region)["environment"]["variables"]["PROBE_INTERVAL_S"] == "15"


# --- regional failover: the consumer publishes region health ---------------------------------

@pytest.mark.parametrize("region", PROBE_REGIONS)
def test_consumer_publishes_region_health_to_the_edges_store_with_the_stacks_thresholds(prod, region):
    env = consumer_function(prod, region)["environment"]["variables"]
    store = prod.one("aws:cloudfront/keyValueStore:KeyValueStore")
    assert env["HEALTH_STORE_ARN"] == store["arn"] == prod.outputs["healthStoreArn"]
    assert env["HEALTH_STORE_ARN"].startswith("arn:aws:cloudfront::123456789012:key-value-store/")
    assert env["HEALTH_PROBE_REGIONS"].split(",") == PROBE_REGIONS
    assert env["HEALTH_ORIGIN_REGIONS"].split(",") == sorted(CONFIG.regions)  # only they are published
    assert env["HEALTH_QUORUM"] == str(CONFIG.failover.quorum)
    assert env["HEALTH_FAILURE_THRESHOLD"] == str(CONFIG.failover.failure_threshold)
    assert env["HEALTH_RECOVERY_THRESHOLD"] == str(CONFIG.failover.recovery_threshold)
    # What the packaged consumer reads at init accepts exactly this environment.
    assert "HEALTH_STORE_ENDPOINT_URL" not in env  # local runs only


@pytest.mark.parametrize("region", PROBE_REGIONS)
def test_consumer_may_read_and_write_that_one_store_and_nothing_else_of_cloudfront(prod, region):
    store = prod.one("aws:cloudfront/keyValueStore:KeyValueStore")["arn"]
    access = actions_on(role_statements(prod, consumer_function(prod, region)["role"]))
    cloudfront = {action: resources for action, resources in access.items() if action.startswith("cloudfront")}
    assert cloudfront == {
        "cloudfront-keyvaluestore:DescribeKeyValueStore": {store},
        "cloudfront-keyvaluestore:GetKey": {store},
        "cloudfront-keyvaluestore:PutKey": {store},
    }
    # The probe function itself stays stateless: no store access at all.
    probe_access = actions_on(role_statements(prod, probe_function(prod, region)["role"]))
    assert not [a for a in probe_access if a.startswith("cloudfront")]


def test_failover_thresholds_come_from_the_stack_config():
    run = run_program("prod", config_overrides={"failoverQuorum": 1, "failoverFailureThreshold": 4,
                                                "failoverRecoveryThreshold": 6})
    for region in PROBE_REGIONS:
        env = consumer_function(run, region)["environment"]["variables"]
        assert (env["HEALTH_QUORUM"], env["HEALTH_FAILURE_THRESHOLD"], env["HEALTH_RECOVERY_THRESHOLD"]) == ("1", "4", "6")


# --- the probes' client secret ---------------------------------------------------------------

CLIENT_SECRET_VALUE = "client-secret-" + "z" * 30


def created_client_secrets(run: ProgramRun) -> list[Resource]:
    return [s for s in run.of_type("aws:secretsmanager/secret:Secret") if "-client-secret" in s.name]


def test_without_a_client_secret_value_the_named_secret_is_expected_to_exist(prod: ProgramRun):
    assert created_client_secrets(prod) == []
    assert created_client_secrets(run_program("prod", config_overrides={"probeClientSecret": ""})) == []  # empty: unset


def test_a_configured_client_secret_is_created_by_the_stack_in_every_probe_region_and_read_there_only():
    # Given the client secret in the stack config (a Pulumi secret), no existing secret named
    run = run_program("prod", config_overrides={"probeClientSecret": CLIENT_SECRET_VALUE, "probeClientSecretName": None})
    created = created_client_secrets(run)
    # Then every probe region gets one, under the stack's own name, holding the value as a secret
    assert sorted(s.region for s in created) == sorted(PROBE_REGIONS)
    assert {s["name"] for s in created} == {"acme-mcp-prod-probe-client-secret"}
    for region in PROBE_REGIONS:
        secret = only([s for s in created if s.region == region])
        version = only([v for v in run.of_type("aws:secretsmanager/secretVersion:SecretVersion")
                        if v["secretId"] == secret["arn"]])
        assert version.region == region
        assert rpc._special_secret_sig in json.dumps(version.inputs["secretString"])  # secret in the state
        assert unsecret(version.inputs["secretString"]) == CLIENT_SECRET_VALUE
        # and the probe reads that one (no manual step before the first `pulumi up`)
        fn = probe_function(run, region)
        assert fn["environment"]["variables"]["CLIENT_SECRET_NAME"] == secret["name"]
        access = actions_on(role_statements(run, fn["role"]))
        assert access["secretsmanager:GetSecretValue"] == {secret["arn"]}
        assert "kms:Decrypt" not in access, "a created secret uses AWS's key: no KMS grant"
        assert version.urn in fn.options["dependencies"], "the value exists before the first probe"
    assert CLIENT_SECRET_VALUE not in json.dumps(run.outputs)


def test_a_client_secret_and_an_existing_secrets_name_together_are_refused_naming_both():
    from stack_config.checks import ConfigError

    with pytest.raises(ConfigError, match="probeClientSecretName = 'acme-mcp/probe-client-secret' and "
                                          "probeClientSecret are both set"):
        run_program("prod", config_overrides={"probeClientSecret": CLIENT_SECRET_VALUE})
