"""The local plan comes from the program: same names, same code with only local constants changed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devkit.mock_program import ProgramRun
from edge.router import OriginTarget, render_router
from edge.viewer_function import render_viewer_function
from local.plan import LocalPlan, Options, PlanError, build_plan, probe_interval_of, unwrap_secrets
from stack_config.loading import load_from_stack_file


@pytest.fixture(scope="module")
def plan(prod: ProgramRun) -> LocalPlan:
    return build_plan(Options(edge_port=9000, base_port=9001, probe_interval_s=7), run=prod)


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


def test_the_router_is_rendered_with_local_targets_and_the_stacks_timeouts(plan: LocalPlan) -> None:
    config = load_from_stack_file("prod")
    targets = {r: OriginTarget("127.0.0.1", plan.ports.origins[r], "http") for r in config.regions}
    assert plan.edge.router_source == render_router(
        targets, config.default_region, read_timeout_s=config.edge.origin_read_timeout_s,
        keepalive_timeout_s=config.edge.origin_keepalive_s)
    assert plan.edge.router_handler == "geo_router.handler"


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
            assert endpoints[("origin", region)] == f"http://127.0.0.1:{plan.ports.origins[region]}/mcp"
        assert fn.on_success and fn.on_success.endswith(f"probe-results-{fn.region}")
        assert fn.on_failure and fn.on_failure.endswith(f"probe-dlq-{fn.region}")
        assert fn.max_retries == 0 and fn.max_event_age_s == 300
        assert fn.environment["TOKEN_URL"] == plan.issuer.token_url
        # The program's origin secret, mapped into the emulator's Secrets Manager under its name.
        name = fn.environment["ORIGIN_SECRET_ID"]
        assert name == "acme-mcp-prod-origin-secret" and "ORIGIN_SECRET" not in fn.environment
        assert json.loads(plan.secrets[fn.region][name]) == {"current": plan.origin_secret}


def test_consumers_are_fed_by_both_queues_with_item_failure_reporting(plan: LocalPlan) -> None:
    consumers = [f for f in plan.functions if f.handler == "results.handler.handler"]
    assert sorted(f.region for f in consumers) == sorted(plan.probe_regions)
    for fn in consumers:
        queues = sorted(s.queue_arn.rsplit(":", 1)[-1] for s in fn.event_sources)
        assert queues == [f"acme-mcp-prod-probe-dlq-{fn.region}", f"acme-mcp-prod-probe-results-{fn.region}"]
        assert all(s.report_batch_item_failures and s.batch_size == 10 for s in fn.event_sources)


def test_origins_keep_the_programs_environment_but_trust_the_local_issuer(plan: LocalPlan) -> None:
    for origin in plan.origins:
        env = origin.environment
        assert env["SERVED_REGION"] == origin.region
        assert env["AUTH_ISSUER"] == plan.issuer.issuer and env["AUTH_JWKS_URL"] == plan.issuer.jwks_url
        assert env["ORIGIN_SECRET"] == plan.origin_secret and "ORIGIN_SECRET_ID" not in env
        assert "127.0.0.1:*" in env["ALLOWED_HOSTS"].split(",")
        assert not any(k.startswith("AWS_LWA_") for k in env) and "AWS_LAMBDA_EXEC_WRAPPER" not in env
        assert origin.readiness_path == "/healthz"


def test_the_distributions_origin_secret_header_carries_the_local_secret(plan: LocalPlan) -> None:
    assert dict(plan.edge.default_origin.custom_headers) == {"x-mcp-edge-origin-secret": plan.origin_secret}
    assert plan.edge.policy.header_behavior == "allViewerAndWhitelistCloudFront"


def test_resources_keep_the_stacks_names(plan: LocalPlan) -> None:
    assert {t.name for t in plan.tables} == {"acme-mcp-prod-probe-results"}
    assert plan.tables[0].replica_regions == sorted(r for r in plan.probe_regions if r != plan.tables[0].region)
    assert {t.name for t in plan.topics} == {f"acme-mcp-prod-alerts-{r}" for r in plan.regions}


@pytest.mark.parametrize(("minutes", "seconds"), [(1, 60), (5, 300), (1440, 86400)])
def test_the_probe_interval_is_the_rate_the_program_exports(minutes: int, seconds: int) -> None:
    assert probe_interval_of({"probeRateMinutes": minutes}) == seconds


def test_without_an_interval_the_probes_run_at_the_stacks_rate(prod: ProgramRun) -> None:
    plan = build_plan(Options(edge_port=9000, base_port=9001), run=prod)
    schedules = [s for fn in plan.functions for s in fn.schedules]
    assert schedules and {s.interval_s for s in schedules} == {60.0 * prod.outputs["topology"]["probeRateMinutes"]}


@pytest.mark.parametrize("minutes", [None, 0, "1", True])
def test_a_topology_without_a_probe_rate_is_refused_clearly(minutes: object) -> None:
    with pytest.raises(PlanError, match="probeRateMinutes"):
        probe_interval_of({"probeRateMinutes": minutes})


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


def test_the_dev_issuer_grants_the_advertised_scopes_and_every_scope_a_tool_declares(plan: LocalPlan) -> None:
    from functions.mcp_server.tools import IDENTITY_SCOPE

    assert plan.issuer.default_scopes == ("mcp",)  # the prod stack names no authScopes
    assert plan.issuer.scopes == ("mcp", IDENTITY_SCOPE)
    assert plan.issuer.token_lifetime_s == 3600 and plan.issuer.consent is False
    for origin in plan.origins:
        assert origin.environment["AUTH_SCOPES_SUPPORTED"] == "mcp"
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
