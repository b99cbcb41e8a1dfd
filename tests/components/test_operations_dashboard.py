"""OperationsDashboard under Pulumi mocks (preview=False), in a fresh program holding only
it: the dashboard in the home region whose body (valid against CloudWatch's dashboard
body structure) names every origin region's function, the distribution, the probe
metrics and the per-tool metrics of the edge's EMF records; CloudFront's additional
metrics turned on; the alarms per region with their thresholds, to each region's topic.
Plus properties of the pure body builder."""

from __future__ import annotations

import json
import re
from typing import Any

import pulumi
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.operations_dashboard import (
    REGIONAL_EDGE_CACHE_REGIONS,
    OperationsDashboard,
    OperationsDashboardArgs,
    dashboard_body,
)
from components.validation import ComponentArgsError
from edge.gate import telemetry
from tests.harness import ProgramRun, run_program

DASHBOARD = "aws:cloudwatch/dashboard:Dashboard"
ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
SUBSCRIPTION = "aws:cloudfront/monitoringSubscription:MonitoringSubscription"
DISTRIBUTION_ID = "E2QWRUHAPOMQZL"
FUNCTIONS = {"us-east-1": "acme-mcp-prod-origin-us-east-1", "eu-west-1": "acme-mcp-prod-origin-eu-west-1"}
TOPICS = {r: f"arn:aws:sns:{r}:123456789012:acme-mcp-prod-alerts-{r}" for r in ("us-east-1", "eu-west-1",
                                                                                 "ap-southeast-1")}


def args(**overrides: Any) -> OperationsDashboardArgs:
    base: dict[str, Any] = {
        "server_id": "acme-mcp", "home_region": "eu-west-1", "origin_function_names": FUNCTIONS,
        "distribution_id": DISTRIBUTION_ID, "edge_function_name": "acme-mcp-prod-edge-gate",
        "alert_topic_arns": TOPICS, "probe_regions": ["eu-west-1", "ap-southeast-1"],
        "tools": ["search", "delete_all"], "edge_5xx_rate_percent": 2.5, "origin_throttles": 1,
        "spillover_invocations": 10, "origin_error_rate_percent": 7.5, "origin_min_invocations": 50,
    }
    base.update(overrides)
    return base  # type: ignore[return-value]


def dashboard_program(component_args: OperationsDashboardArgs) -> ProgramRun:
    def program() -> None:
        # Inputs that resolve at deployment, as the program's would.
        resolved = {**component_args, "distribution_id": pulumi.Output.from_input(component_args["distribution_id"]),
                    "origin_function_names": {r: pulumi.Output.from_input(f)
                                              for r, f in component_args["origin_function_names"].items()}}
        dashboard = OperationsDashboard("operations", resolved)  # type: ignore[arg-type]
        pulumi.export("dashboardName", dashboard.dashboard_name)
        pulumi.export("dashboardUrl", dashboard.dashboard_url)
        pulumi.export("alarmNames", dashboard.alarm_names)

    return run_program("prod", program=program)


@pytest.fixture(scope="module")
def run() -> ProgramRun:
    return dashboard_program(args())


def body_of(run: ProgramRun) -> dict[str, Any]:
    dashboard = run.one(DASHBOARD)
    document: dict[str, Any] = json.loads(dashboard["dashboardBody"])
    return document


# --- CloudWatch's dashboard body structure ------------------------------------------------

_ID = re.compile(r"[a-z][A-Za-z0-9_]*")
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d")


def assert_valid_dashboard_body(body: dict[str, Any]) -> None:
    """The dashboard body structure (CloudWatch API reference, Dashboard Body Structure and
    Syntax): widgets with type, x/y/width/height on a 24-unit grid, properties; a metric
    widget's metrics are arrays of [namespace, name, dim, value, ..., {options}] or one
    expression object with an id, at most 500; a region on every metric widget."""
    assert set(body) <= {"widgets", "start", "end", "periodOverride", "variables"}
    assert body["widgets"]
    for widget in body["widgets"]:
        assert widget["type"] in ("metric", "text", "log", "alarm", "explorer")
        assert widget["x"] >= 0 and widget["x"] + widget["width"] <= 24 and 1 <= widget["width"] <= 24
        assert widget["y"] >= 0 and 1 <= widget["height"] <= 1000
        properties = widget["properties"]
        if widget["type"] == "text":
            assert isinstance(properties["markdown"], str)
            continue
        assert _REGION.fullmatch(properties["region"]), properties
        assert properties["view"] in ("timeSeries", "singleValue", "gauge", "bar", "pie")
        metrics = properties["metrics"]
        assert 1 <= len(metrics) <= 500
        ids: list[str] = []
        for entry in metrics:
            options = entry[-1] if isinstance(entry[-1], dict) else {}
            if "expression" in options:
                assert len(entry) == 1 and _ID.fullmatch(options["id"])
            else:
                plain = entry[:-1] if options else entry
                assert all(isinstance(v, str) and v for v in plain), entry
                assert len(plain) >= 2 and len(plain) % 2 == 0, entry  # namespace, name, then dimension pairs
                assert len(plain) <= 2 + 2 * 30
                if "region" in options:
                    assert _REGION.fullmatch(options["region"])
            if "id" in options:
                assert _ID.fullmatch(options["id"])
                ids.append(options["id"])
        assert len(ids) == len(set(ids)), ids
        for entry in metrics:
            expression = entry[0].get("expression", "") if isinstance(entry[0], dict) else ""
            for name in re.findall(r"SUM\(\[([^\]]*)\]\)", expression):
                assert set(name.split(",")) <= set(ids)


def metric_entries(body: dict[str, Any]) -> list[tuple[dict[str, Any], list[Any]]]:
    """Each metric (not expression) of the body, with its widget."""
    return [(w, m) for w in body["widgets"] if w["type"] == "metric" for m in w["properties"]["metrics"]
            if not isinstance(m[0], dict)]


def dims(entry: list[Any]) -> dict[str, str]:
    plain = entry[:-1] if isinstance(entry[-1], dict) else entry
    return dict(zip(plain[2::2], plain[3::2], strict=True))


# --- the component --------------------------------------------------------------------------


def test_the_dashboard_is_in_the_home_region_under_the_component_and_its_name_an_output(run):
    dashboard = run.one(DASHBOARD)
    assert dashboard.region == "eu-west-1"
    assert run.outputs["dashboardName"] == dashboard["dashboardName"] == "acme-mcp-prod-operations"
    assert run.outputs["dashboardUrl"].endswith("region=eu-west-1#dashboards/dashboard/acme-mcp-prod-operations")
    parent = run.parent_of(dashboard)
    assert parent is not None and parent.type == "mcpedge:index:OperationsDashboard"
    assert_valid_dashboard_body(body_of(run))


def test_the_body_references_every_origin_regions_function_in_that_region(run):
    entries = metric_entries(body_of(run))
    for region, function in FUNCTIONS.items():
        lambda_metrics = {m[1] for w, m in entries if m[0] == "AWS/Lambda" and dims(m).get("FunctionName") == function
                          and w["properties"]["region"] == region}
        assert {"Invocations", "Errors", "Throttles", "Duration", "ConcurrentExecutions",
                "ProvisionedConcurrencySpilloverInvocations"} <= lambda_metrics
        durations = [m[-1].get("stat") for _, m in entries if m[1] == "Duration" and dims(m)["FunctionName"] == function]
        assert sorted(durations) == ["p50", "p99"]
        spill = [m for _, m in entries if m[1] == "ProvisionedConcurrencySpilloverInvocations"
                 and dims(m)["FunctionName"] == function]
        assert dims(spill[0])["Resource"] == f"{function}:live"


def test_the_body_references_the_distribution_in_us_east_1(run):
    entries = metric_entries(body_of(run))
    cloudfront = {m[1] for w, m in entries if m[0] == "AWS/CloudFront" and w["properties"]["region"] == "us-east-1"
                  and dims(m) == {"DistributionId": DISTRIBUTION_ID, "Region": "Global"}}
    assert cloudfront == {"Requests", "4xxErrorRate", "5xxErrorRate", "OriginLatency"}


def test_the_per_tool_panels_sum_the_edges_emf_metrics_over_every_edge_region(run):
    body = body_of(run)
    for tool in ("search", "delete_all"):
        [widget] = [w for w in body["widgets"] if w["properties"].get("title") == f"Tool {tool}"]
        metrics = widget["properties"]["metrics"]
        plain = [m for m in metrics if not isinstance(m[0], dict)]
        assert {(m[0], m[1]) for m in plain} == {(telemetry.NAMESPACE, telemetry.REQUESTS)}
        assert {m[-1]["region"] for m in plain} == set(REGIONAL_EDGE_CACHE_REGIONS)
        assert {dims(m)["Decision"] for m in plain} == {"allowed", "403_scope"}  # a tool is named once authorized
        assert all(dims(m) == {"ServerId": "acme-mcp", "Tool": tool, "Decision": dims(m)["Decision"]} for m in plain)
        # The dimension set the edge's records declare for a tool call.
        assert list(dims(plain[0])) in [["ServerId", "Tool", "Decision"]]
        labels = [m[0]["label"] for m in metrics if isinstance(m[0], dict)]
        assert labels == ["allowed", "403_scope"]


def test_the_edges_refusals_are_counted_with_the_probes_apart_by_the_records_client_dimension(run):
    [widget] = [w for w in body_of(run)["widgets"] if w["properties"].get("title", "").startswith("Edge refusals")]
    metrics = widget["properties"]["metrics"]
    plain = [m for m in metrics if not isinstance(m[0], dict)]
    # Every refusal decision of each Client value, in every edge region, by the dimension set the records declare
    assert {(dims(m)["Client"], dims(m)["Decision"], m[-1]["region"]) for m in plain} == {
        (client, decision, region) for client in ("other", "probe") for decision in telemetry.REFUSAL_DECISIONS
        for region in REGIONAL_EDGE_CACHE_REGIONS}
    assert {tuple(dims(m)) for m in plain} == {("ServerId", "Client", "Decision")}
    assert all(m[-1]["visible"] is False for m in plain)
    # Two lines: everyone but the probes, and the probes; each sums only its own client's metrics
    expressions = [m[0] for m in metrics if isinstance(m[0], dict)]
    assert [e["label"] for e in expressions] == ["refusals without the probes", "the probes' refusals"]
    for expression, client in zip(expressions, ("other", "probe"), strict=True):
        summed = set(expression["expression"].removeprefix("SUM([").removesuffix("])").split(","))
        assert summed == {m[-1]["id"] for m in plain if dims(m)["Client"] == client}


def test_the_probe_panels_search_the_fleets_metrics_in_each_probe_region(run):
    body = body_of(run)
    probe_widgets = [w for w in body["widgets"] if w["properties"].get("title", "").startswith("Probes from")]
    assert sorted(w["properties"]["region"] for w in probe_widgets) == ["ap-southeast-1", "eu-west-1"]
    for widget in probe_widgets:
        expressions = " ".join(m[0]["expression"] for m in widget["properties"]["metrics"])
        assert "{McpEdge/Probes,ServerId,ProbeRegion,Target,TargetRegion}" in expressions
        assert f'ProbeRegion="{widget["properties"]["region"]}"' in expressions
        for metric in ("Availability", "Latency", "SchemaDrift"):
            assert f'MetricName="{metric}"' in expressions


def test_the_body_changes_when_a_region_is_added():
    functions = {**FUNCTIONS, "ap-southeast-1": "acme-mcp-prod-origin-ap-southeast-1"}
    grown = dashboard_program(args(origin_function_names=functions))
    entries = metric_entries(body_of(grown))
    assert any(w["properties"]["region"] == "ap-southeast-1" and dims(m).get("FunctionName") == functions[
        "ap-southeast-1"] for w, m in entries)
    alarms = {a.region for a in grown.of_type(ALARM) if a.inputs.get("namespace") == "AWS/Lambda"}
    assert alarms == {"us-east-1", "eu-west-1", "ap-southeast-1"}
    # ap-southeast-1 runs a probe fleet: its origin gets the errors-while-probes-green alarm too.
    assert {a.region for a in errors_green_alarms(grown)} == {"eu-west-1", "ap-southeast-1"}


def test_cloudfronts_additional_metrics_are_enabled_on_the_distribution(run):
    subscription = run.one(SUBSCRIPTION)
    assert subscription["distributionId"] == DISTRIBUTION_ID
    assert subscription["monitoringSubscription"] == {
        "realtimeMetricsSubscriptionConfig": {"realtimeMetricsSubscriptionStatus": "Enabled"}}


def test_alarms_per_region_with_their_thresholds_to_that_regions_topic(run):
    alarms = run.of_type(ALARM)
    by_metric: dict[str, dict[str, Any]] = {}
    for alarm in alarms:
        assert alarm["alarmActions"] == [TOPICS[alarm.region]] == alarm["okActions"]
        if alarm.inputs.get("metricName"):
            by_metric.setdefault(alarm["metricName"], {})[alarm.region] = alarm
    edge = by_metric["5xxErrorRate"]["us-east-1"]
    assert (edge["namespace"], edge["threshold"], edge["statistic"]) == ("AWS/CloudFront", 2.5, "Average")
    assert edge["dimensions"] == {"DistributionId": DISTRIBUTION_ID, "Region": "Global"}
    assert set(by_metric["Throttles"]) == set(by_metric["ProvisionedConcurrencySpilloverInvocations"]) == set(FUNCTIONS)
    for region, function in FUNCTIONS.items():
        throttles = by_metric["Throttles"][region]
        assert throttles["threshold"] == 1 and throttles["dimensions"] == {"FunctionName": function}
        spill = by_metric["ProvisionedConcurrencySpilloverInvocations"][region]
        assert spill["threshold"] == 10
        assert spill["dimensions"] == {"FunctionName": function, "Resource": f"{function}:live"}
    assert sorted(run.outputs["alarmNames"]) == sorted(a["name"] for a in alarms)


def test_default_thresholds_apply_when_unset():
    run = dashboard_program(args(edge_5xx_rate_percent=None, origin_throttles=None, spillover_invocations=None))
    thresholds = {(a["metricName"], a.region): a["threshold"] for a in run.of_type(ALARM) if a.inputs.get("metricName")}
    assert thresholds[("5xxErrorRate", "us-east-1")] == 5.0
    assert thresholds[("Throttles", "eu-west-1")] == 0


def test_the_errors_while_probes_green_alarm_takes_its_defaults_when_unset():
    run = dashboard_program(args(origin_error_rate_percent=None, origin_min_invocations=None))
    [alarm] = errors_green_alarms(run)
    assert expression_of(alarm) == ("IF(invocations >= 20 AND 100 * errors / invocations > 5 AND edge_ok >= 0.9 "
                                    "AND origin_ok >= 0.9, 1, 0)")


def errors_green_alarms(run: ProgramRun) -> list[Any]:
    return [a for a in run.of_type(ALARM) if a.inputs.get("metricQueries")]


def expression_of(alarm: Any) -> str:
    [expression] = [q for q in alarm["metricQueries"] if q.get("expression")]
    assert expression["returnData"] is True
    return str(expression["expression"])


def test_errors_while_probes_green_alarm_reads_the_origins_and_the_probes_metrics_of_its_region(run):
    # Origin regions us-east-1 and eu-west-1; probe regions eu-west-1 and ap-southeast-1: an alarm
    # reads metrics of its own region only, so only eu-west-1 has both.
    [alarm] = errors_green_alarms(run)
    region, function = "eu-west-1", FUNCTIONS["eu-west-1"]
    assert alarm.region == region
    assert alarm["name"] == "acme-mcp-prod-origin-errors-probes-green-eu-west-1"
    assert alarm["alarmActions"] == [TOPICS[region]] == alarm["okActions"]
    assert (alarm["threshold"], alarm["comparisonOperator"], alarm["evaluationPeriods"]) == (0, "GreaterThanThreshold", 2)
    assert alarm["treatMissingData"] == "notBreaching"
    assert not alarm.inputs.get("metricName") and not alarm.inputs.get("namespace")
    metrics = {q["id"]: q["metric"] for q in alarm["metricQueries"] if q.get("metric")}
    assert all(q["returnData"] is False for q in alarm["metricQueries"] if q.get("metric"))
    assert {i: (m["namespace"], m["metricName"], m["stat"], m["dimensions"]) for i, m in metrics.items()} == {
        "errors": ("AWS/Lambda", "Errors", "Sum", {"FunctionName": function}),
        "invocations": ("AWS/Lambda", "Invocations", "Sum", {"FunctionName": function}),
        # The dimensions the results consumer's EMF records declare (functions/results/handler.py).
        "edge_ok": ("McpEdge/Probes", "Availability", "Average",
                    {"ServerId": "acme-mcp", "ProbeRegion": region, "Target": "edge", "TargetRegion": region}),
        "origin_ok": ("McpEdge/Probes", "Availability", "Average",
                      {"ServerId": "acme-mcp", "ProbeRegion": region, "Target": "origin", "TargetRegion": region}),
    }
    assert {m["period"] for m in metrics.values()} == {300}
    # Thresholds from the args: 7.5 % of at least 50 invocations, while both targets succeed.
    assert expression_of(alarm) == ("IF(invocations >= 50 AND 100 * errors / invocations > 7.5 AND edge_ok >= 0.9 "
                                    "AND origin_ok >= 0.9, 1, 0)")
    assert alarm["name"] in run.outputs["alarmNames"]


@pytest.mark.parametrize(("overrides", "field"), [
    ({"alert_topic_arns": {"eu-west-1": TOPICS["eu-west-1"]}}, "needs a topic in us-east-1"),
    ({"home_region": "mars-1"}, "home_region"),
    ({"origin_function_names": {}}, "origin_function_names"),
    ({"tools": [""]}, "tools[0]"),
    ({"edge_5xx_rate_percent": 150}, "edge_5xx_rate_percent"),
    ({"origin_error_rate_percent": 0}, "origin_error_rate_percent"),
    ({"origin_min_invocations": 0}, "origin_min_invocations"),
    ({"probe_regions": ["eu-west-1", "eu-west-1"]}, "probe_regions"),
])
def test_bad_args_are_refused_naming_the_field(overrides, field):
    with pytest.raises(ComponentArgsError, match=re.escape(field)):
        dashboard_program(args(**overrides))


# --- the pure builder -----------------------------------------------------------------------

regions = st.lists(st.sampled_from(REGIONAL_EDGE_CACHE_REGIONS), min_size=1, max_size=6, unique=True)
tool_names = st.lists(st.text(st.characters(categories=["L", "N"], include_characters="_-"), min_size=1,
                              max_size=30), max_size=8, unique=True)


@settings(max_examples=40, deadline=None)
@given(regions, regions, tool_names)
def test_every_body_is_valid_and_names_each_origin_probe_region_and_tool(origin_regions, probe_regions, tools):
    functions = {r: f"fn-{r}" for r in origin_regions}
    body = dashboard_body(server_id="s", home_region="eu-west-1", distribution_id="E1", edge_function_name="gate",
                          origin_function_names=functions, probe_regions=probe_regions, tools=tools)
    assert_valid_dashboard_body(body)
    entries = metric_entries(body)
    assert {dims(m).get("FunctionName") for _, m in entries if m[0] == "AWS/Lambda"} == set(functions.values())
    probe = {w["properties"]["region"] for w in body["widgets"] if w["properties"].get("title", "").startswith("Probes")}
    assert probe == set(probe_regions)
    assert {dims(m).get("Tool") for _, m in entries if "Tool" in dims(m)} == set(tools)
    widgets = [w for w in body["widgets"]]
    cells = [(x, y) for w in widgets for x in range(w["x"], w["x"] + w["width"])
             for y in range(w["y"], w["y"] + w["height"])]
    assert len(cells) == len(set(cells)), "widgets overlap"


def test_the_stacks_alarm_keys_reach_every_probed_origin_regions_alarm():
    from stack_config.loading import load_from_stack_file

    prod = load_from_stack_file("prod")
    run = run_program("prod", config_overrides={"alarmOriginErrorRatePercent": 12, "alarmOriginMinInvocations": 100})
    probed = set(prod.regions) & set(prod.probes.regions)
    alarms = errors_green_alarms(run)
    assert probed and {a.region for a in alarms} == probed
    for alarm in alarms:
        assert expression_of(alarm).startswith("IF(invocations >= 100 AND 100 * errors / invocations > 12 AND")
