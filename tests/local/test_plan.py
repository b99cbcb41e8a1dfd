"""The local plan comes from the program: same names, same code with only local constants changed."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.probe_rounds import INTERVALS, rounds_definition
from devkit.mock_program import ProgramRun
from devkit.shipped import router_resource, router_zip
from edge.router import OriginTarget, render_router
from edge.viewer_function import render_viewer_function
from functions.contract import REFUSAL_HEADER
from local.plan import (
    LocalPlan,
    Options,
    PlanError,
    build_plan,
    probe_rounds_of,
    shipped_gate_config,
    unwrap_secrets,
)
from stack_config.loading import load_from_stack_file


@pytest.fixture(scope="module")
def plan(prod: ProgramRun, tmp_path_factory: pytest.TempPathFactory) -> LocalPlan:
    return build_plan(Options(edge_port=9000, base_port=9001, probe_interval_s=7,
                              run_dir=tmp_path_factory.mktemp("plan")), run=prod)


def test_the_plan_round_trips_through_its_json_file(plan: LocalPlan) -> None:
    assert LocalPlan.from_json(plan.to_json()) == plan


@pytest.mark.parametrize("damage", [
    lambda doc: doc["edge"].update(retired_field="x"),  # written by another version
    lambda doc: doc.pop("ports"),
    lambda doc: doc["functions"][0].update(timeout_s=None, schedules="not a list"),
], ids=["unknown-field", "missing-field", "wrong-shape"])
def test_a_plan_file_this_version_cannot_read_is_named_with_what_to_do(plan: LocalPlan, tmp_path, damage) -> None:
    doc = json.loads(plan.to_json())
    damage(doc)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(PlanError, match=r"plan\.json is not a plan this version can read .*start it again"):
        LocalPlan.read(path)


def test_the_viewer_function_is_the_stacks_with_only_the_local_issuer_audience_and_host(plan: LocalPlan) -> None:
    config = load_from_stack_file("prod")
    expected = dataclasses.replace(config.viewer_function_settings(), issuer="http://127.0.0.1:9001/",
                                   audience="http://127.0.0.1:9000/mcp", public_host="127.0.0.1:9000",
                                   public_scheme="http")
    assert plan.edge.viewer_function_code == render_viewer_function(expected)


def test_the_edge_function_is_the_shipped_package_with_local_targets_and_issuer_only(
        plan: LocalPlan, prod: ProgramRun) -> None:
    config = load_from_stack_file("prod")
    assert plan.edge.router_handler == "edge_gate.handler.handler" and plan.edge.include_body is True
    folder = Path(plan.edge.function_package or "")
    with zipfile.ZipFile(router_zip(prod)) as zf:
        shipped = {n: zf.read(n) for n in zf.namelist() if not n.endswith("/")}
    local = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    rendered = {"geo_router.py", "edge_gate/constants.py"}
    # Every shipped byte but the two rendered files (and their shipped bytecode) is there unchanged.
    assert {n: d for n, d in shipped.items() if n not in rendered and "__pycache__/geo_router." not in n
            and "edge_gate/__pycache__/constants." not in n} == {n: d for n, d in local.items() if n not in rendered}
    targets = {r: OriginTarget("127.0.0.1", plan.ports.function_urls[r], "http") for r in config.regions}
    assert local["geo_router.py"].decode() == render_router(
        targets, config.default_region, read_timeout_s=config.edge.origin_read_timeout_s,
        keepalive_timeout_s=config.edge.origin_keepalive_s)
    shipped_config = shipped_gate_config(shipped["edge_gate/constants.py"].decode())
    local_config = shipped_gate_config(local["edge_gate/constants.py"].decode())
    changed = {k for k in shipped_config if shipped_config[k] != local_config[k]}
    assert changed <= {"issuer", "audiences", "jwks_url", "resource_metadata_url", "metadata_paths",
                       "resource_metadata"}
    assert local_config["issuer"] == plan.issuer.issuer and local_config["audiences"] == [plan.mcp_url]
    assert local_config["jwks_url"] == plan.issuer.jwks_url
    assert local_config["scoped_methods"] == shipped_config["scoped_methods"]


def test_a_program_whose_gate_is_not_the_renderers_is_refused(prod: ProgramRun, tmp_path: Path) -> None:
    function = router_resource(prod)
    original = function.inputs["code"]
    edited = tmp_path / "edited.zip"
    with zipfile.ZipFile(original.path) as source, zipfile.ZipFile(edited, "w") as target:
        for name in source.namelist():
            data = source.read(name)
            target.writestr(name, data + b"\n# edited by hand\n" if name == "edge_gate/handler.py" else data)
    function.inputs["code"] = type(original)(str(edited))
    try:
        with pytest.raises(PlanError, match="Lambda@Edge gate"):
            build_plan(Options(run_dir=tmp_path / "run"), run=prod)
    finally:
        function.inputs["code"] = original


def test_a_program_whose_edge_code_is_not_the_renderers_is_refused(prod: ProgramRun) -> None:
    function = prod.one("aws:cloudfront/function:Function")
    original = function.inputs["code"]
    function.inputs["code"] = original + "\n// edited by hand"
    try:
        with pytest.raises(PlanError, match="CloudFront Function code"):
            build_plan(Options(), run=prod)
    finally:
        function.inputs["code"] = original


def test_probe_schedules_keep_their_input_with_local_endpoints(plan: LocalPlan) -> None:
    probes = [f for f in plan.functions if f.handler == "probe.handler.handler"]
    assert sorted(f.region for f in probes) == sorted(plan.probe_regions)
    for fn in probes:
        assert len(fn.schedules) == 2 * len(plan.regions)
        assert all(s.interval_s == 7 for s in fn.schedules)
        endpoints = {(s.payload["target"], s.payload["targetRegion"]): s.payload["endpoint"] for s in fn.schedules}
        for region in plan.regions:
            assert endpoints[("edge", region)] == plan.mcp_url
            # The origin's local Function URL, as the program's Function URL on AWS.
            assert endpoints[("origin", region)] == f"http://127.0.0.1:{plan.ports.function_urls[region]}/mcp"
        assert fn.on_success and fn.on_success.endswith(f"probe-results-{fn.region}")
        assert fn.on_failure and fn.on_failure.endswith(f"probe-dlq-{fn.region}")
        assert fn.max_retries == 0 and fn.max_event_age_s == 300
        assert fn.environment["TOKEN_URL"] == plan.issuer.token_url
        # No origin secret: the probe signs its direct requests with its credentials.
        assert not [name for name in fn.environment if "ORIGIN_SECRET" in name]


def test_consumers_are_fed_by_both_queues_with_item_failure_reporting(plan: LocalPlan) -> None:
    consumers = [f for f in plan.functions if f.handler == "results.handler.handler"]
    assert sorted(f.region for f in consumers) == sorted(plan.probe_regions)
    for fn in consumers:
        queues = sorted(s.queue_arn.rsplit(":", 1)[-1] for s in fn.event_sources)
        assert queues == [f"acme-mcp-prod-probe-dlq-{fn.region}", f"acme-mcp-prod-probe-results-{fn.region}"]
        assert all(s.report_batch_item_failures and s.batch_size == 10 for s in fn.event_sources)


def test_origins_keep_the_programs_environment_and_the_adapters_settings(plan: LocalPlan, prod: ProgramRun) -> None:
    for origin in plan.origins:
        env = origin.environment
        fn = prod.one("aws:lambda/function:Function", region=origin.region, name_contains=f"-origin-{origin.region}")
        given = fn["environment"]["variables"]
        # What the function gets, the Web Adapter's settings included (plain variables locally) ...
        assert {k: v for k, v in given.items() if k.startswith("AWS_LWA_")} == {
            k: v for k, v in env.items() if k.startswith("AWS_LWA_")}
        assert env["AWS_REGION"] == origin.region
        # ... without what names AWS-only things: the adapter's exec wrapper, a Secrets Manager id
        assert "AWS_LAMBDA_EXEC_WRAPPER" not in env and "ORIGIN_SECRET_ID" not in env
        assert origin.readiness_path == given.get("AWS_LWA_READINESS_CHECK_PATH", "/")


def test_the_plan_names_the_server_every_origin_runs(plan: LocalPlan) -> None:
    from local.origins import DEFAULT_SERVER, server_spec

    # prod names the demo, with the scopes its whoami needs
    assert server_spec({"server": plan.server}) == dataclasses.replace(
        DEFAULT_SERVER, tool_scopes={"whoami": ("mcp:identity",)})
    assert LocalPlan.from_json(plan.to_json()).server == plan.server


def test_the_distributions_default_origin_is_its_regions_local_function_url_without_custom_headers(
        plan: LocalPlan) -> None:
    assert dict(plan.edge.default_origin.custom_headers) == {}
    assert plan.edge.default_origin.port == plan.ports.function_urls[plan.default_region]
    assert plan.edge.policy.header_behavior == "allViewerAndWhitelistCloudFront"


def test_the_local_edge_removes_from_origin_responses_what_the_programs_response_headers_policy_removes(
        plan: LocalPlan, prod: ProgramRun) -> None:
    (policy,) = prod.of_type("aws:cloudfront/responseHeadersPolicy:ResponseHeadersPolicy")
    removed = tuple(item["header"] for item in policy.inputs["removeHeadersConfig"]["items"])
    assert plan.edge.removed_response_headers == removed == (REFUSAL_HEADER,)


def test_resources_keep_the_stacks_names(plan: LocalPlan) -> None:
    assert {t.name for t in plan.tables} == {"acme-mcp-prod-probe-results"}
    assert plan.tables[0].replica_regions == sorted(r for r in plan.probe_regions if r != plan.tables[0].region)
    assert {t.name for t in plan.topics} == {f"acme-mcp-prod-alerts-{r}" for r in plan.regions}


@pytest.mark.parametrize("interval", INTERVALS)
def test_the_probe_interval_is_the_rounds_workflows(interval: int) -> None:
    events = [{"target": "edge", "targetRegion": "eu-west-1"}, {"target": "origin", "targetRegion": "eu-west-1"}]
    definition = json.dumps(rounds_definition("arn:aws:lambda:eu-west-1:1:function:p", events, interval))
    seconds, invocations = probe_rounds_of(definition)
    assert seconds == interval
    assert [i.payload for i in invocations] == events


def test_without_an_interval_the_probes_run_at_the_stacks_interval(prod: ProgramRun) -> None:
    plan = build_plan(Options(edge_port=9000, base_port=9001), run=prod)
    schedules = [s for fn in plan.functions for s in fn.schedules]
    assert schedules and {s.interval_s for s in schedules} == {float(prod.outputs["topology"]["probeIntervalSeconds"])}
    # every target of every probe region, once
    regions = prod.outputs["topology"]["regions"]
    assert len(schedules) == len(prod.outputs["topology"]["probeFleets"]) * 2 * len(regions)


@pytest.mark.parametrize("definition", ["not json", "{}", json.dumps({"StartAt": "A", "States": {"A": {
    "Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "End": True,
    "Parameters": {"FunctionName": "f", "InvocationType": "RequestResponse", "Payload": {}}}}})])
def test_a_rounds_workflow_that_cannot_run_is_refused_clearly(definition: str) -> None:
    with pytest.raises(PlanError, match="probe rounds workflow"):
        probe_rounds_of(definition)


_json = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
                     lambda inner: st.one_of(st.lists(inner, max_size=3),
                                             st.dictionaries(st.text(max_size=5), inner, max_size=3)), max_leaves=10)


@given(value=_json)
def test_unwrapping_secrets_gives_back_plain_values(value: object) -> None:
    wrapped = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": value}
    assert unwrap_secrets(wrapped) == unwrap_secrets(value)
    assert json.dumps(unwrap_secrets({"a": [wrapped]}), sort_keys=True) == json.dumps(
        {"a": [unwrap_secrets(value)]}, sort_keys=True)


# --- the plan reads the program's topology output, not the resources by type --------------------------


def test_resources_the_topology_does_not_name_are_not_emulated():
    """Another origin-like function (handler run.sh) and another queue in the same program are
    not part of the stack's topology: the plan leaves them out."""
    import runpy

    import pulumi_aws as aws

    from devkit.mock_program import run_program
    from stack_config.loading import PROJECT_ROOT

    def program() -> None:
        runpy.run_path(str(PROJECT_ROOT / "__main__.py"), run_name="__main__")
        aws.lambda_.Function("stray-origin", region="eu-west-1", name="stray", handler="run.sh", runtime="python3.13",
                             role="arn:aws:iam::123456789012:role/r")
        aws.sqs.Queue("stray-queue", region="eu-west-1", name="stray-queue")

    run = run_program("prod", program=program)
    plan = build_plan(Options(edge_port=9000, base_port=9001), run=run)
    assert "stray-queue" not in {q.name for q in plan.queues}
    assert "stray" not in {f.name for f in plan.functions}
    assert {o.region for o in plan.origins} == set(run.outputs["regions"])


def test_a_program_without_the_topology_output_is_refused_by_name(prod: ProgramRun):
    import copy

    run = copy.copy(prod)
    run.outputs = {k: v for k, v in prod.outputs.items() if k != "topology"}
    with pytest.raises(PlanError, match="exports no topology output of version 1"):
        build_plan(Options(edge_port=9000, base_port=9001), run=run)


def test_the_dev_issuer_grants_the_advertised_scopes_and_every_scope_the_servers_tool_scopes_name(
        plan: LocalPlan) -> None:
    from local.origins import server_spec
    from local.plan import tool_scopes

    assert plan.issuer.default_scopes == ("mcp",)  # the prod stack names no authScopes
    assert plan.issuer.scopes == tuple(dict.fromkeys(("mcp", *tool_scopes(server_spec({"server": plan.server})))))
    assert plan.issuer.token_lifetime_s == 3600 and plan.issuer.consent is False
    assert LocalPlan.from_json(plan.to_json()).issuer == plan.issuer


# --- the web ACL --------------------------------------------------------------------------------


def test_the_local_edge_applies_the_web_acl_the_program_registers(plan: LocalPlan, prod: ProgramRun) -> None:
    from local.firewall import WebAclEmulator

    acl = prod.find("aws:wafv2/webAcl:WebAcl", "arn", prod.outputs["topology"]["edge"]["webAclArn"])
    assert plan.edge.web_acl is not None
    assert plan.edge.web_acl["rules"] == acl["rules"]  # the program's rules, not a second copy
    assert plan.edge.web_acl["customResponseBodies"] == acl["customResponseBodies"]
    assert plan.edge.web_acl_block_log == str(Path(plan.run_dir) / "web-acl-blocks.json")
    names = [r["name"] for r in WebAclEmulator.from_web_acl_inputs(plan.edge.web_acl).rules]
    assert names[:2] == ["aws-ip-reputation", "tool-limit-1-countdown"]


def test_without_waf_the_local_edge_has_no_web_acl() -> None:
    from devkit.mock_program import run_program

    off = build_plan(Options(edge_port=9000, base_port=9001), run=run_program("prod", config_overrides={
        "wafEnabled": False}))
    assert off.edge.web_acl is None


def test_each_origin_runs_two_instances_behind_the_host_of_the_programs_function_url(
        plan: LocalPlan, prod: ProgramRun) -> None:
    from local.plan import topology_of

    described = topology_of(prod)["origins"]
    ports = [p for o in plan.origins for p in o.ports]
    assert len(ports) == len(set(ports)) == 2 * len(plan.origins)
    assert not set(ports) & {plan.ports.edge, plan.ports.issuer, *plan.ports.function_urls.values()}
    for origin in plan.origins:
        assert origin.host == described[origin.region]["url"].split("/")[2]
        assert origin.host.endswith(f".lambda-url.{origin.region}.on.aws")


def test_one_instance_is_a_choice_and_none_is_refused(prod: ProgramRun) -> None:
    one = build_plan(Options(edge_port=9000, base_port=9001, origin_instances=1), run=prod)
    assert all(o.ports == [o.port] for o in one.origins)
    with pytest.raises(PlanError, match="origin instances = 0: at least 1"):
        build_plan(Options(edge_port=9000, base_port=9001, origin_instances=0), run=prod)
