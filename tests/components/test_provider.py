"""The component provider: the schema the SDK infers (and its snapshot), the type tokens
and their aliases, and every component constructed alone with minimal args in a fresh
program under mocks, both from Python and through the component provider with the
camelCase inputs a TypeScript, Go, C# or YAML program sends."""

import json
from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from components.alerts import AlertTopic, AlertTopicArgs
from components.edge import EdgeLayer, EdgeLayerArgs
from components.jwt_rules import JwtRulesArgs
from components.origin import McpOrigin, McpOriginArgs
from components.probe_fleet import ProbeFleet, ProbeFleetArgs
from components.probe_results import ProbeResults, ProbeResultsArgs
from components.probe_rounds import run_definition
from components.provider import COMPONENTS, SCHEMA_SNAPSHOT, component_provider, inferred_schema, main, schema_text
from components.type_tokens import PACKAGE, component_type
from components.validation import ComponentArgsError
from tests.harness import ACCOUNT_ID, ProgramRun, run_program

# The type tokens of the previous release: existing stacks hold URNs built from them.
PREVIOUS_TYPES = {
    "McpOrigin": "mcpedge:origin:McpOrigin",
    "EdgeLayer": "mcpedge:edge:EdgeLayer",
    "ProbeFleet": "mcpedge:probes:ProbeFleet",
    "ProbeResults": "mcpedge:probes:ProbeResults",
    "AlertTopic": "mcpedge:alerts:AlertTopic",
}
# Components that came after the type-token change: no previous type to alias.
NEW_COMPONENTS = {"EdgeFirewall", "OperationsDashboard"}
AUTH = JwtRulesArgs(issuer="https://auth.acme.example", audience="https://mcp.acme.example/mcp")
JWKS = "https://auth.acme.example/.well-known/jwks.json"
HOST = "abc.lambda-url.eu-west-1.on.aws"
ORIGIN_ARNS: dict[str, pulumi.Input[str]] = {"eu-west-1": "arn:aws:lambda:eu-west-1:123456789012:function:acme-prod-origin-eu-west-1"}
TOPIC = f"arn:aws:sns:eu-west-1:{ACCOUNT_ID}:t"
KEY = f"arn:aws:kms:eu-west-1:{ACCOUNT_ID}:key/k"
TABLE_ARN = f"arn:aws:dynamodb:eu-west-1:{ACCOUNT_ID}:table/t"
# The demo server's folder (it moves to examples/demo): a folder server with a requirements.txt.
SERVER = {"source": "examples/demo", "runtime": "python3.13", "command": "python3 -m uvicorn demo_server.app:app --port $PORT"}


def exporting(create: Callable[[], pulumi.ComponentResource], *outputs: str) -> Callable[[], None]:
    """A fresh program holding one component, exporting the named outputs."""

    def program() -> None:
        component = create()
        for name in outputs:
            pulumi.export(name, getattr(component, name))

    return program


def only_component(run: ProgramRun, class_name: str) -> None:
    components = [r for r in run.resources if not r.custom]
    assert [c.type for c in components] == [component_type(class_name)]
    children = [r for r in run.resources if r.custom]
    assert children and all(run.parent_of(r) is components[0] for r in children)


# --- the schema and the plugin ---------------------------------------------------------------


def test_the_inferred_schema_is_the_committed_snapshot():
    """Regenerate with `python -m components.provider --write-schema` after changing an args type or an output."""
    assert schema_text(inferred_schema()) == SCHEMA_SNAPSHOT.read_text(encoding="utf-8")


def test_the_schema_names_every_component_under_the_index_module_with_documented_inputs_and_outputs():
    schema = inferred_schema()
    assert schema["name"] == PACKAGE
    assert set(schema["resources"]) == {f"{PACKAGE}:index:{c.__name__}" for c in COMPONENTS}
    for token, resource in schema["resources"].items():
        assert resource["isComponent"] and resource["description"], token
        for kind in ("inputProperties", "properties"):
            undocumented = [n for n, p in resource[kind].items() if not p.get("description")]
            assert not undocumented, f"{token} {kind}: {undocumented}"
    for token, typ in schema["types"].items():
        assert token.startswith(f"{PACKAGE}:index:") and all(p.get("description") for p in typ["properties"].values())


def test_values_that_may_come_from_other_resources_are_inputs_and_names_are_plain():
    resources = inferred_schema()["resources"]
    origin = resources["mcpedge:index:McpOrigin"]["inputProperties"]
    assert "plain" not in origin["alertTopicArn"]
    assert origin["region"]["plain"] and origin["serverId"]["plain"]
    edge = resources["mcpedge:index:EdgeLayer"]["inputProperties"]
    assert edge["originHosts"]["plain"] and "plain" not in edge["originHosts"]["additionalProperties"]
    assert "plain" not in edge["certificateArn"]
    fleet = resources["mcpedge:index:ProbeFleet"]["inputProperties"]
    assert all("plain" not in fleet[k] for k in ("edgeMcpUrl", "tableName", "tableArn", "alertTopicArn", "alertKeyArn"))
    results = resources["mcpedge:index:ProbeResults"]["properties"]
    assert results["replicaArns"] == {**results["replicaArns"], "type": "object",
                                      "additionalProperties": {**results["replicaArns"]["additionalProperties"],
                                                               "type": "string"}}


def test_the_schema_command_prints_the_snapshot_and_refuses_no_action(capsys):
    main(["--schema"])
    assert capsys.readouterr().out == SCHEMA_SNAPSHOT.read_text(encoding="utf-8")
    with pytest.raises(SystemExit):
        main([])
    assert "one of the arguments --schema --write-schema is required" in capsys.readouterr().err


# --- type tokens and aliases ------------------------------------------------------------------


def test_every_component_in_the_program_has_an_alias_to_its_previous_type(prod: ProgramRun):
    components = [r for r in prod.resources if not r.custom]
    assert {r.type.rsplit(":", 1)[-1] for r in components} == set(PREVIOUS_TYPES) | NEW_COMPONENTS
    for component in components:
        class_name = component.type.rsplit(":", 1)[-1]
        if class_name in NEW_COMPONENTS:
            assert component.type == f"{PACKAGE}:index:{class_name}" and not component.options["aliases"]
            continue
        assert component.type == f"{PACKAGE}:index:{class_name}"
        # Type only: the engine keeps the name, and derives each child's old URN from its parent's alias.
        assert component.options["aliases"] == [{"type": PREVIOUS_TYPES[class_name]}], component.name


# --- each component alone, from Python ------------------------------------------------------------


def test_an_alert_topic_alone_with_minimal_args():
    run = run_program("prod", program=exporting(
        lambda: AlertTopic("alerts", AlertTopicArgs(region="eu-west-1", server_id="acme")), "arn", "key_arn", "region"))
    only_component(run, "AlertTopic")
    assert {r.type for r in run.resources if r.custom} == {"aws:kms/key:Key", "aws:kms/alias:Alias", "aws:sns/topic:Topic"}
    assert run.outputs == {"arn": f"arn:aws:sns:eu-west-1:{ACCOUNT_ID}:acme-prod-alerts-eu-west-1",
                           "key_arn": run.one("aws:kms/key:Key").outputs["arn"], "region": "eu-west-1"}


def test_an_origin_alone_with_minimal_args_takes_the_defaults_and_creates_no_alarms_without_a_topic():
    run = run_program("prod", program=exporting(lambda: McpOrigin("origin", McpOriginArgs(
        region="eu-west-1", server_id="acme", server=SERVER)),  # type: ignore[typeddict-item]
        "url", "host", "alias_arn", "function_name", "region"))
    only_component(run, "McpOrigin")
    fn = run.one("aws:lambda/function:Function")
    assert (fn["memorySize"], fn["timeout"]) == (1024, 120)
    assert fn.inputs.get("reservedConcurrentExecutions") in (None, -1)  # none reserved by default
    assert run.one("aws:lambda/provisionedConcurrencyConfig:ProvisionedConcurrencyConfig")[
        "provisionedConcurrentExecutions"] == 2
    assert not run.of_type("aws:cloudwatch/metricAlarm:MetricAlarm")
    env = fn["environment"]["value"]["variables"] if "value" in fn["environment"] else fn["environment"]["variables"]
    assert env["AWS_LWA_READINESS_CHECK_PATH"] == "/mcp" and env["AWS_LWA_AUTHORIZATION_SOURCE"] == "x-mcp-edge-authorization"
    url = run.one("aws:lambda/functionUrl:FunctionUrl").outputs["functionUrl"]
    assert run.outputs["url"] == url and run.outputs["region"] == "eu-west-1"
    assert run.outputs["function_name"] == "acme-prod-origin-eu-west-1"


def test_an_origin_deploys_the_server_folder_it_is_given_unchanged(tmp_path):
    """A user's own server, from a folder outside this repository, shipped as it is."""
    import shutil
    import zipfile

    own = tmp_path / "my_server"
    shutil.copytree("examples/fastmcp", own, ignore=shutil.ignore_patterns("__pycache__"))
    run = run_program("prod", program=exporting(lambda: McpOrigin("origin", McpOriginArgs(
        region="eu-west-1", server_id="acme",
        server={"source": str(own), "runtime": "python3.13", "command": "python3 server.py"})), "url"))
    with zipfile.ZipFile(run.one("aws:lambda/function:Function")["code"].path) as zf:
        assert zf.read("server.py") == (own / "server.py").read_bytes()

def test_an_edge_alone_with_minimal_args():
    run = run_program("prod", program=exporting(lambda: EdgeLayer("edge", EdgeLayerArgs(
        server_id="acme", origin_hosts={"eu-west-1": HOST}, default_region="eu-west-1", origin_function_arns=ORIGIN_ARNS,
        auth=AUTH, jwks_url=JWKS)), "domain_name", "public_host", "mcp_url", "distribution_id", "router_function_arn"))
    only_component(run, "EdgeLayer")
    distribution = run.one("aws:cloudfront/distribution:Distribution")
    assert distribution["priceClass"] == "PriceClass_All" and distribution["origins"][0]["domainName"] == HOST
    assert run.outputs["mcp_url"] == f"https://{distribution.outputs['domainName']}/mcp"
    assert run.outputs["router_function_arn"] == run.one("aws:lambda/function:Function").outputs["qualifiedArn"]


def test_a_results_table_alone_exposes_the_arn_of_every_copy():
    run = run_program("prod", program=exporting(lambda: ProbeResults("results", ProbeResultsArgs(
        server_id="acme", regions=["eu-west-1", "us-east-1"])), "name", "arn", "home_region", "replica_arns"))
    only_component(run, "ProbeResults")
    arn = f"arn:aws:dynamodb:eu-west-1:{ACCOUNT_ID}:table/acme-prod-probe-results"
    assert run.outputs == {"name": "acme-prod-probe-results", "arn": arn, "home_region": "eu-west-1",
                           "replica_arns": {"eu-west-1": arn, "us-east-1": arn.replace("eu-west-1", "us-east-1")}}


def fleet_args(**overrides: Any) -> ProbeFleetArgs:
    args = ProbeFleetArgs(
        region="eu-west-1", server_id="acme", edge_mcp_url="https://mcp.acme.example/mcp",
        origin_urls={"eu-west-1": f"https://{HOST}/"},
        origin_function_arns={"eu-west-1": f"arn:aws:lambda:eu-west-1:{ACCOUNT_ID}:function:acme-prod-origin"},
        origin_alias_arns={"eu-west-1": f"arn:aws:lambda:eu-west-1:{ACCOUNT_ID}:function:acme-prod-origin:live"},
        table_name="t", table_arn=TABLE_ARN,
        alert_topic_arn=TOPIC, alert_key_arn=KEY,
        credentials={"token_url": "https://auth.acme.example/oauth/token", "client_id": "probe",
                     "client_secret_name": "probe-secret", "audience": AUTH["audience"]})
    args.update(overrides)  # type: ignore[typeddict-item]
    return args


def test_a_probe_fleet_alone_with_minimal_args_probes_the_edge_and_the_origin_it_is_given():
    run = run_program("prod", program=exporting(lambda: ProbeFleet("probes", fleet_args()),
                                                "results_queue_url", "dead_letter_queue_url", "region"))
    only_component(run, "ProbeFleet")
    (schedule,) = run.of_type("aws:scheduler/schedule:Schedule")
    assert schedule["scheduleExpression"] == "rate(1 minute)"
    machine = run.one("aws:sfn/stateMachine:StateMachine")
    assert schedule["target"]["arn"] == machine["arn"]
    first_round = [i for i in run_definition(json.loads(machine["definition"])) if i.at_s == 0]
    assert sorted((i.payload["target"], i.payload["targetRegion"]) for i in first_round) == [
        ("edge", "eu-west-1"), ("origin", "eu-west-1")]
    assert run.outputs["results_queue_url"].endswith("/acme-prod-probe-results-eu-west-1")
    assert {r.region for r in run.resources if r.custom and not r.type.startswith("aws:iam/")} == {"eu-west-1"}


# --- bad args: one clear error, before anything is registered ------------------------------------------


@pytest.mark.parametrize(("create", "messages"), [
    (lambda: AlertTopic("a", AlertTopicArgs(region="mars-1", server_id="acme", email="nope")),
     ["AlertTopic 'a'", "region = 'mars-1': must be an AWS region", "email = 'nope': must be an e-mail address"]),
    (lambda: McpOrigin("o", McpOriginArgs(region="eu-west-1", server_id="acme", server=SERVER,  # type: ignore[typeddict-item]
                                          sizing={"provisioned_max": 500, "reserved_concurrency": 100},
                                          log_retention_days=2, lwa_layer_version=22)),
     ["McpOrigin 'o'", "provisioned_max 500 <= reserved_concurrency 100 does not hold",
      "log_retention_days = 2: must be one of", "lwa_layer_version = 22"]),
    (lambda: McpOrigin("o", McpOriginArgs(region="eu-west-1", server_id="acme", server={
        "source": "/nonexistent/server", "runtime": "python3.13", "command": "python3 server.py", "path": "mcp"})),
     ["server.source = '/nonexistent/server': must be an existing folder", "server.path = 'mcp'"]),
    (lambda: EdgeLayer("e", EdgeLayerArgs(server_id="acme", origin_hosts={"eu-west-1": HOST}, default_region="eu-west-1",
                                          origin_function_arns=ORIGIN_ARNS, jwks_url=JWKS,
                                          auth=JwtRulesArgs(**AUTH, algorithms=["HS256"]),
                                          custom_domain="mcp.acme.example", price_class="cheap", scopes=["mcp tools"])),
     ["EdgeLayer 'e'", "auth.algorithms[0] = 'HS256'", "custom_domain and certificate_arn go together",
      "price_class = 'cheap'", "scopes[0] = 'mcp tools': must be an RFC 6749 scope token"]),
    (lambda: ProbeResults("r", ProbeResultsArgs(server_id="Acme", regions=[])),
     ["ProbeResults 'r'", "server_id = 'Acme'", "regions = []: must be a list of at least one AWS region"]),
    (lambda: ProbeFleet("f", fleet_args(deadline_seconds=30, interval_seconds=7, origin_urls={})),
     ["ProbeFleet 'f'", "deadline_seconds = 30: must be an integer from 1 to 29", "interval_seconds = 7: must be one of 10, 12, 15, 20, 30, 60",
      "origin_urls = {}: must map at least one region to its origin's Function URL"]),
    (lambda: ProbeFleet("f", {"region": "eu-west-1"}),  # type: ignore[typeddict-item]
     ["server_id is required", "credentials is required"]),
])
def test_bad_args_are_refused_with_every_problem_named_before_any_resource(create, messages):
    errors: list[ComponentArgsError] = []

    def program() -> None:
        try:
            create()
        except ComponentArgsError as error:
            errors.append(error)

    run = run_program("prod", program=program)
    assert len(errors) == 1 and not run.resources
    for message in messages:
        assert message in str(errors[0])


# --- each component through the component provider (what other languages call) ---------------------------


@pytest.mark.parametrize(("class_name", "inputs", "expected_state"), [
    ("AlertTopic", {"region": "eu-west-1", "serverId": "acme"}, {"region": "eu-west-1"}),
    ("ProbeResults", {"serverId": "acme", "regions": ["eu-west-1"]},
     {"name": "acme-prod-probe-results", "homeRegion": "eu-west-1"}),
    ("EdgeLayer", {"serverId": "acme", "originHosts": {"eu-west-1": HOST}, "defaultRegion": "eu-west-1",
                   "originFunctionArns": ORIGIN_ARNS, "jwksUrl": JWKS, "auth": {**AUTH, "leewaySeconds": 10},
                   "originReadTimeoutSeconds": 30.0},
     {}),
    ("McpOrigin", {"region": "eu-west-1", "serverId": "acme", "server": SERVER,
                   "sizing": {"memoryMb": 2048.0, "provisionedMin": 0.0}},
     {"functionName": "acme-prod-origin-eu-west-1", "region": "eu-west-1"}),
    ("ProbeFleet", {"region": "eu-west-1", "serverId": "acme", "edgeMcpUrl": "https://mcp.acme.example/mcp",
                    "originUrls": {"eu-west-1": f"https://{HOST}/"},
                    "originFunctionArns": {"eu-west-1": f"arn:aws:lambda:eu-west-1:{ACCOUNT_ID}:function:acme-prod-origin"},
                    "originAliasArns": {"eu-west-1": f"arn:aws:lambda:eu-west-1:{ACCOUNT_ID}:function:acme-prod-origin:live"},
                    "tableName": "t",
                    "tableArn": TABLE_ARN, "alertTopicArn": TOPIC, "alertKeyArn": KEY,
                    "credentials": {"tokenUrl": "https://auth.acme.example/oauth/token", "clientId": "probe",
                                    "clientSecretName": "probe-secret", "audience": AUTH["audience"]}},
     {"region": "eu-west-1"}),
])
def test_the_provider_constructs_each_component_from_camel_case_inputs(class_name, inputs, expected_state):
    provider = component_provider()

    def program() -> None:
        result = provider.construct("it", f"{PACKAGE}:index:{class_name}", inputs, None)
        pulumi.export("state", result.state)

    run = run_program("prod", program=program)
    only_component(run, class_name)
    state = run.outputs["state"]
    schema_outputs = inferred_schema()["resources"][f"{PACKAGE}:index:{class_name}"]["properties"]
    assert set(state) == set(schema_outputs)
    assert {k: state[k] for k in expected_state} == expected_state
    if class_name == "EdgeLayer":
        distribution = run.one("aws:cloudfront/distribution:Distribution")
        assert distribution["origins"][0]["customOriginConfig"]["originReadTimeout"] == 30
        assert '"leeway":10' in run.one("aws:cloudfront/function:Function")["code"]
    if class_name == "McpOrigin":
        assert run.one("aws:lambda/function:Function")["memorySize"] == 2048
        assert not run.of_type("aws:lambda/provisionedConcurrencyConfig:ProvisionedConcurrencyConfig")


@pytest.mark.parametrize(("create", "message"), [
    (lambda: EdgeLayer("e", EdgeLayerArgs(server_id="acme", origin_hosts={"eu-west-1": f"https://{HOST}/"},
                                          default_region="eu-west-1", origin_function_arns=ORIGIN_ARNS,
                                          auth=AUTH, jwks_url=JWKS)),
     f"origin_hosts['eu-west-1'] = 'https://{HOST}/': origin domain name 'https://{HOST}/' is not a host name"),
    (lambda: ProbeFleet("f", fleet_args(origin_urls={"eu-west-1": HOST}, edge_mcp_url="mcp.acme.example/mcp")),
     f"origin_urls['eu-west-1'] = '{HOST}': must be an https:// URL"),
    (lambda: ProbeFleet("f", fleet_args(edge_mcp_url="mcp.acme.example/mcp")),
     "edge_mcp_url = 'mcp.acme.example/mcp': must be an https:// URL"),
])
def test_plain_hosts_and_urls_are_checked_at_construction(create, message):
    with pytest.raises(ComponentArgsError) as error:
        run_program("prod", program=create)
    assert message in str(error.value)


def test_hosts_and_urls_from_other_resources_are_not_checked_until_they_are_known():
    """An Output cannot be checked at construction: the component accepts it."""
    run = run_program("prod", program=exporting(lambda: EdgeLayer("edge", EdgeLayerArgs(
        server_id="acme", origin_hosts={"eu-west-1": pulumi.Output.from_input(HOST)}, default_region="eu-west-1",
        origin_function_arns=ORIGIN_ARNS, auth=AUTH, jwks_url=JWKS)), "mcp_url"))
    assert run.outputs["mcp_url"].endswith("/mcp")


@pytest.mark.parametrize(("extra", "check"), [
    ({"coldStart": "snapstart", "lwaLayerVersion": 30.0},
     lambda fn: fn["snapStart"] == {"applyOn": "PublishedVersions"} and fn.inputs.get("packageType") is None),
    ({"server": {"imageDigest": "sha256:" + "c" * 64}, "coldStart": "none"},
     lambda fn: fn["packageType"] == "Image" and fn["imageUri"].endswith("@sha256:" + "c" * 64)),
])
def test_the_provider_takes_the_cold_start_and_the_server_from_camel_case_inputs(extra, check):
    provider = component_provider()
    inputs = {"region": "eu-west-1", "serverId": "acme", "server": SERVER, **extra}

    def program() -> None:
        result = provider.construct("it", f"{PACKAGE}:index:McpOrigin", inputs, None)
        pulumi.export("state", result.state)

    run = run_program("prod", program=program)
    assert check(run.one("aws:lambda/function:Function"))
    assert not run.of_type("aws:lambda/provisionedConcurrencyConfig:ProvisionedConcurrencyConfig")
