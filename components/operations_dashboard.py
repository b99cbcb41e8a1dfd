"""OperationsDashboard: the stack's CloudWatch dashboard and the alarms that matter to users.

One dashboard, in the stack's home region (the results table's), with one row per concern:

- the edge: CloudFront requests, 4xx/5xx error rates and origin latency (CloudFront's
  additional metrics, turned on here by a monitoring subscription on the distribution);
  CloudFront publishes them in us-east-1 with ``Region=Global``;
- each origin region: the origin function's invocations, errors, throttles, duration
  p50/p99, concurrent executions and provisioned-concurrency spillover (on the ``live``
  alias the Function URL serves);
- the probes: availability, latency and schema drift per target, from the results
  consumer's metrics in each probe region (a search over the fleet's dimensions, so a
  new target appears without a deploy);
- per tool: calls by the edge's decision (allowed, 403_scope: a record names a tool only
  once the gate verified the token and parsed the body strictly), from the edge
  function's EMF records (``edge/gate/telemetry.py``), summed over every region the edge
  function runs in (Lambda@Edge writes its records and metrics in the region that served
  the viewer).

The edge row's refusal panel counts the edge's 4xx by its ``Client`` dimension: the
probes' requests (verified as the probes' client, their forged-token checks included)
apart from everyone else's, so that the probes' own refusals do not read as users'.
CloudFront's 4xxErrorRate beside it cannot tell them apart.

Alarms, each to the alert topic of its own region (CloudWatch alarm actions name a topic in
the alarm's region): the edge's 5xx error rate (us-east-1, where CloudFront's metrics
are), and per origin region the origin's throttles and provisioned-concurrency spillover,
and "errors while the probes say healthy": a metric-math alarm over the origin function's
Errors/Invocations rate and the probe fleet's Availability of that region (both targets,
the edge pinned there and the Function URL), firing when real traffic fails above the
threshold while the probes still succeed, i.e. the probes miss what users hit. CloudWatch
alarms cannot read another region's metrics, so it exists for every origin region that
runs a probe fleet too (the default: probeRegions empty means every origin region).

``dashboard_body(...)`` is the pure builder (plain values in, the dashboard body document
out); the component resolves its inputs and hands them to it.
"""


import json
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_aws as aws

from components import settings
from components.alerts import topic_alarm
from components.naming import physical_name
from components.type_tokens import component_options, component_type
from components.validation import ArgChecks
from edge.gate import telemetry
from functions.contract import TARGET_EDGE, TARGET_ORIGIN

CLOUDFRONT_METRICS_REGION = "us-east-1"
EDGE_FUNCTION_HOME = "us-east-1"
# Regions with a CloudFront regional edge cache: where Lambda@Edge runs and writes its
# logs and metrics (the CloudFront developer guide's list of regional edge caches).
REGIONAL_EDGE_CACHE_REGIONS = ("us-east-1", "us-east-2", "us-west-1", "us-west-2", "ap-south-1", "ap-northeast-1",
                               "ap-northeast-2", "ap-southeast-1", "ap-southeast-2", "eu-central-1", "eu-west-1",
                               "eu-west-2", "sa-east-1")
DASHBOARD_NAME_LIMIT = 255
ORIGIN_ALIAS = "live"
PROBE_NAMESPACE = "McpEdge/Probes"  # components/probe_fleet.py METRICS_NAMESPACE
PROBE_DIMENSIONS = ("ServerId", "ProbeRegion", "Target", "TargetRegion")
TOOL_DECISIONS = ("allowed", "403_scope")  # the decisions a record naming a tool can have
PERIOD_S = 300
WIDTH = 24  # CloudWatch's dashboard grid is 24 units wide
HEIGHT = 6
DEFAULT_EDGE_5XX_RATE_PERCENT = 5.0
DEFAULT_ORIGIN_THROTTLES = 0.0
DEFAULT_SPILLOVER_INVOCATIONS = 0.0
DEFAULT_ORIGIN_ERROR_RATE_PERCENT = settings.ALARM_ORIGIN_ERROR_RATE_PERCENT.default
DEFAULT_ORIGIN_MIN_INVOCATIONS = settings.ALARM_ORIGIN_MIN_INVOCATIONS.default
# The probes "say healthy" when at least this share of their rounds to the region succeeded
# (both targets) over the alarm's period: one failed round in ten is noise, not a verdict.
PROBE_HEALTHY_AVAILABILITY = 0.9
ERRORS_WHILE_GREEN_PERIOD_S = 300
ERRORS_WHILE_GREEN_PERIODS = 2  # ten minutes in a row: many probe rounds at any probeIntervalSeconds


class OperationsDashboardArgs(TypedDict):
    """Inputs of the stack's dashboard and alarms."""

    server_id: str
    """Name of the MCP server: names the dashboard and the alarms, and the ServerId dimension."""
    home_region: str
    """Region of the dashboard (the results table's)."""
    origin_function_names: Mapping[str, pulumi.Input[str]]
    """Origin region -> the origin function's name in that region."""
    distribution_id: pulumi.Input[str]
    """ID of the CloudFront distribution."""
    edge_function_name: pulumi.Input[str]
    """Name of the Lambda@Edge function (its replicas log as ``us-east-1.<name>``)."""
    alert_topic_arns: Mapping[str, pulumi.Input[str]]
    """Region -> alert topic ARN; every origin region and us-east-1 (the edge's alarm) need one."""
    probe_regions: Sequence[str]
    """Regions with a probe fleet (its results consumer emits the probe metrics there)."""
    tools: NotRequired[Sequence[str] | None]
    """Tool names with a per-tool panel (default: none; the decision panel covers every call)."""
    edge_regions: NotRequired[Sequence[str] | None]
    """Regions the edge function runs in (default: every regional edge cache region)."""
    probe_namespace: NotRequired[str | None]
    """CloudWatch namespace of the probe metrics (default ``McpEdge/Probes``)."""
    edge_5xx_rate_percent: NotRequired[float | None]
    """Alarm when the edge's 5xx error rate stays above this percentage for 3 of 5 minutes (default 5)."""
    origin_throttles: NotRequired[float | None]
    """Alarm when an origin's throttles per minute stay above this for 3 minutes (default 0)."""
    spillover_invocations: NotRequired[float | None]
    """Alarm when an origin's provisioned-concurrency spillover per minute stays above this for 3 minutes (default 0)."""
    origin_error_rate_percent: NotRequired[float | None]
    """Alarm when an origin region's invocation error rate stays above this percentage for 10 minutes while its probes succeed (default 5)."""
    origin_min_invocations: NotRequired[int | None]
    """Invocations in 5 minutes below which that alarm does not judge the error rate (default 20)."""


def dashboard_name_for(server_id: str, stack: str | None = None) -> str:
    return physical_name(server_id, "operations", limit=DASHBOARD_NAME_LIMIT, stack=stack)


def _metric_widget(title: str, region: str, metrics: list[list[Any]], *, stat: str = "Sum", y: int = 0, x: int = 0,
                   width: int = WIDTH // 2, view: str = "timeSeries", stacked: bool = False,
                   unit_label: str | None = None) -> dict[str, Any]:
    properties: dict[str, Any] = {"title": title, "region": region, "metrics": metrics, "view": view,
                                  "stacked": stacked, "stat": stat, "period": PERIOD_S}
    if unit_label is not None:
        properties["yAxis"] = {"left": {"label": unit_label, "min": 0}}
    return {"type": "metric", "x": x, "y": y, "width": width, "height": HEIGHT, "properties": properties}


def _text_widget(markdown: str, y: int) -> dict[str, Any]:
    return {"type": "text", "x": 0, "y": y, "width": WIDTH, "height": 1, "properties": {"markdown": markdown}}


def _search(namespace: str, dimensions: Sequence[str], terms: Mapping[str, str], stat: str) -> str:
    schema = ",".join([namespace, *dimensions])
    filters = " ".join(f'{name}="{value}"' for name, value in terms.items())
    return f"SEARCH('{{{schema}}} {filters}', '{stat}', {PERIOD_S})"


REFUSAL_LABELS = {telemetry.OTHER: "refusals without the probes", telemetry.PROBE_CLIENT: "the probes' refusals"}


def refusals_by_client(server_id: str, edge_regions: Sequence[str]) -> list[list[Any]]:
    """The edge's 4xx (every refusal decision, every edge region) summed per ``Client``:
    everyone but the probes, and the probes."""
    metrics: list[list[Any]] = []
    for c_index, client in enumerate(REFUSAL_LABELS):
        ids = []
        for d_index, decision in enumerate(telemetry.REFUSAL_DECISIONS):
            for r_index, region in enumerate(edge_regions):
                ids.append(f"c{c_index}d{d_index}r{r_index}")
                metrics.append([telemetry.NAMESPACE, telemetry.REQUESTS, telemetry.SERVER_DIMENSION, server_id,
                                telemetry.CLIENT_DIMENSION, client, telemetry.DECISION_DIMENSION, decision,
                                {"region": region, "id": ids[-1], "visible": False}])
        metrics.append([{"expression": f"SUM([{','.join(ids)}])", "label": REFUSAL_LABELS[client],
                         "id": f"c{c_index}"}])
    return metrics


def dashboard_body(*, server_id: str, home_region: str, distribution_id: str, edge_function_name: str,
                   origin_function_names: Mapping[str, str], probe_regions: Sequence[str], tools: Sequence[str] = (),
                   edge_regions: Sequence[str] = REGIONAL_EDGE_CACHE_REGIONS,
                   probe_namespace: str = PROBE_NAMESPACE) -> dict[str, Any]:
    """The CloudWatch dashboard body (``DashboardBody``'s document): rows for the edge,
    each origin region, the probes and the tools, every metric widget with its region."""
    widgets: list[dict[str, Any]] = []
    y = 0

    def row(title: str) -> None:
        nonlocal y
        widgets.append(_text_widget(f"## {title}", y))
        y += 1

    cf = ["AWS/CloudFront"]
    dist = ["DistributionId", distribution_id, "Region", "Global"]
    row(f"Edge: CloudFront distribution {distribution_id}")
    widgets.append(_metric_widget("Requests", CLOUDFRONT_METRICS_REGION, [[*cf, "Requests", *dist]], y=y))
    widgets.append(_metric_widget("Error rates (%)", CLOUDFRONT_METRICS_REGION,
                                  [[*cf, "4xxErrorRate", *dist], [*cf, "5xxErrorRate", *dist]],
                                  stat="Average", x=WIDTH // 2, y=y, unit_label="%"))
    y += HEIGHT
    widgets.append(_metric_widget("Origin latency (ms)", CLOUDFRONT_METRICS_REGION,
                                  [[*cf, "OriginLatency", *dist, {"stat": "p50"}],
                                   [*cf, "OriginLatency", *dist, {"stat": "p99"}]],
                                  stat="p50", y=y, unit_label="ms"))
    decisions: list[list[Any]] = []
    for d_index, decision in enumerate(telemetry.DECISIONS):
        ids = []
        for r_index, region in enumerate(edge_regions):
            ids.append(f"d{d_index}r{r_index}")
            decisions.append([telemetry.NAMESPACE, telemetry.REQUESTS, telemetry.SERVER_DIMENSION, server_id,
                              telemetry.DECISION_DIMENSION, decision,
                              {"region": region, "id": ids[-1], "visible": False}])
        decisions.append([{"expression": f"SUM([{','.join(ids)}])", "label": decision, "id": f"d{d_index}"}])
    widgets.append(_metric_widget(f"Edge decisions, all regions (us-east-1.{edge_function_name})", home_region,
                                  decisions, x=WIDTH // 2, y=y, stacked=True))
    y += HEIGHT
    widgets.append(_metric_widget("Edge refusals (4xx), the probes apart, all regions", home_region,
                                  refusals_by_client(server_id, edge_regions), y=y))
    y += HEIGHT

    for region in sorted(origin_function_names):
        function = origin_function_names[region]
        fn = ["AWS/Lambda"]
        by_fn = ["FunctionName", function]
        by_alias = ["FunctionName", function, "Resource", f"{function}:{ORIGIN_ALIAS}"]
        row(f"Origin {region}: {function}")
        third = WIDTH // 3
        widgets.append(_metric_widget("Invocations, errors, throttles", region,
                                      [[*fn, "Invocations", *by_fn], [*fn, "Errors", *by_fn],
                                       [*fn, "Throttles", *by_fn]], y=y, width=third))
        widgets.append(_metric_widget("Duration p50/p99 (ms)", region,
                                      [[*fn, "Duration", *by_fn, {"stat": "p50"}],
                                       [*fn, "Duration", *by_fn, {"stat": "p99"}]],
                                      stat="p50", x=third, y=y, width=third, unit_label="ms"))
        widgets.append(_metric_widget("Concurrency and spillover", region,
                                      [[*fn, "ConcurrentExecutions", *by_fn, {"stat": "Maximum"}],
                                       [*fn, "ProvisionedConcurrencySpilloverInvocations", *by_alias],
                                       [*fn, "ProvisionedConcurrencyUtilization", *by_alias, {"stat": "Maximum"}]],
                                      x=2 * third, y=y, width=third))
        y += HEIGHT

    if probe_regions:
        row(f"Probes ({probe_namespace})")
        width = max(WIDTH // len(probe_regions), 6)
        for i, region in enumerate(sorted(probe_regions)):
            x = (i * width) % WIDTH
            if i and x == 0:
                y += HEIGHT
            terms = {"ServerId": server_id, "ProbeRegion": region}
            probe_metrics: list[list[Any]] = [[{"expression": _search(probe_namespace, PROBE_DIMENSIONS,
                                               {**terms, "MetricName": "Availability"}, "Average"),
                         "id": "availability", "label": "availability"}],
                       [{"expression": _search(probe_namespace, PROBE_DIMENSIONS,
                                               {**terms, "MetricName": "SchemaDrift"}, "Sum"),
                         "id": "drift", "label": "schema drift"}],
                       [{"expression": _search(probe_namespace, PROBE_DIMENSIONS,
                                               {**terms, "MetricName": "Latency"}, "p90"),
                         "id": "latency", "label": "latency p90 (ms)", "yAxis": "right"}]]
            widgets.append(_metric_widget(f"Probes from {region}", region, probe_metrics, stat="Average", x=x, y=y,
                                          width=width))
        y += HEIGHT

    if tools:
        row("Tools: calls by the edge's decision, all edge regions")
        for t_index, tool in enumerate(tools):
            x = (t_index % 2) * (WIDTH // 2)
            if t_index and x == 0:
                y += HEIGHT
            tool_metrics: list[list[Any]] = []
            for d_index, decision in enumerate(TOOL_DECISIONS):
                ids = []
                for r_index, region in enumerate(edge_regions):
                    ids.append(f"t{d_index}r{r_index}")
                    tool_metrics.append([telemetry.NAMESPACE, telemetry.REQUESTS, telemetry.SERVER_DIMENSION, server_id,
                                    telemetry.TOOL_DIMENSION, tool, telemetry.DECISION_DIMENSION, decision,
                                    {"region": region, "id": ids[-1], "visible": False}])
                tool_metrics.append([{"expression": f"SUM([{','.join(ids)}])", "label": decision,
                                      "id": f"t{d_index}"}])
            widgets.append(_metric_widget(f"Tool {tool}", home_region, tool_metrics, x=x, y=y, stacked=True))
        y += HEIGHT
    return {"start": "-PT6H", "periodOverride": "inherit", "widgets": widgets}


def errors_while_probes_green_queries(*, server_id: str, region: str, function_name: pulumi.Input[str],
                           error_rate_percent: float, min_invocations: int,
                           probe_namespace: str = PROBE_NAMESPACE,
                           healthy_availability: float = PROBE_HEALTHY_AVAILABILITY) -> list[dict[str, Any]]:
    """The metric queries of the alarm on a region whose real traffic fails while its probes
    succeed, as PutMetricAlarm's ``Metrics`` (id, metric or expression, return data): the
    origin function's Errors and Invocations, the probe fleet of ``region``'s Availability of
    both targets in ``region``, and the expression that is 1 when, with enough traffic, the
    error rate is above ``error_rate_percent`` and both targets' availability is at least
    ``healthy_availability``."""

    def metric(query_id: str, namespace: str, name: str, stat: str, dimensions: Mapping[str, Any]) -> dict[str, Any]:
        return {"id": query_id, "return_data": False,
                "metric": {"namespace": namespace, "metric_name": name, "stat": stat,
                           "period": ERRORS_WHILE_GREEN_PERIOD_S, "dimensions": dict(dimensions)}}

    probe = {"ServerId": server_id, "ProbeRegion": region}
    condition = (f"invocations >= {min_invocations} AND 100 * errors / invocations > {error_rate_percent:g} "
                 f"AND edge_ok >= {healthy_availability:g} AND origin_ok >= {healthy_availability:g}")
    return [
        metric("errors", "AWS/Lambda", "Errors", "Sum", {"FunctionName": function_name}),
        metric("invocations", "AWS/Lambda", "Invocations", "Sum", {"FunctionName": function_name}),
        metric("edge_ok", probe_namespace, "Availability", "Average",
               {**probe, "Target": TARGET_EDGE, "TargetRegion": region}),
        metric("origin_ok", probe_namespace, "Availability", "Average",
               {**probe, "Target": TARGET_ORIGIN, "TargetRegion": region}),
        {"id": "errors_while_green", "return_data": True,
         "label": "errors above the threshold while the probes succeed",
         "expression": f"IF({condition}, 1, 0)"},
    ]


def _metric_query_args(query: Mapping[str, Any]) -> aws.cloudwatch.MetricAlarmMetricQueryArgs:
    metric = query.get("metric")
    return aws.cloudwatch.MetricAlarmMetricQueryArgs(
        id=query["id"], return_data=query["return_data"], label=query.get("label"),
        expression=query.get("expression"),
        metric=aws.cloudwatch.MetricAlarmMetricQueryMetricArgs(**metric) if metric else None)


def check_operations_dashboard_args(name: str, args: OperationsDashboardArgs) -> None:
    checks = ArgChecks("OperationsDashboard", name)
    if checks.required(args, "server_id", "home_region", "origin_function_names", "distribution_id",
                       "edge_function_name", "alert_topic_arns", "probe_regions"):
        checks.name_prefix("server_id", args["server_id"])
        checks.region("home_region", args["home_region"])
        if checks.region_map("origin_function_names", args["origin_function_names"], "the origin function's name"):
            topics = args["alert_topic_arns"]
            if checks.region_map("alert_topic_arns", topics, "an alert topic ARN"):
                for region in sorted({*args["origin_function_names"], CLOUDFRONT_METRICS_REGION} - set(topics)):
                    checks.problem("alert_topic_arns", sorted(topics),
                                   f"needs a topic in {region} (an alarm there notifies a topic in its own region)")
        checks.regions("probe_regions", list(args["probe_regions"]), allow_empty=True)
        edge_regions = args.get("edge_regions")
        if edge_regions is not None:
            checks.regions("edge_regions", list(edge_regions))
        for i, tool in enumerate(args.get("tools") or ()):
            if not isinstance(tool, str) or not tool or '"' in tool:
                checks.problem(f"tools[{i}]", tool, "must be a tool name (non-empty, no double quote)")
        checks.number("edge_5xx_rate_percent", args.get("edge_5xx_rate_percent", DEFAULT_EDGE_5XX_RATE_PERCENT)
                      or DEFAULT_EDGE_5XX_RATE_PERCENT, 0, 100, low_open=True)
        for field in ("origin_throttles", "spillover_invocations"):
            value = args.get(field)
            if value is not None:
                checks.number(field, value, 0, 1_000_000)
        rate = args.get("origin_error_rate_percent")
        if rate is not None:
            checks.number("origin_error_rate_percent", rate, 0, 100, low_open=True)
        least = args.get("origin_min_invocations")
        if least is not None:
            checks.within("origin_min_invocations", least, settings.ALARM_ORIGIN_MIN_INVOCATIONS)
    checks.done()


class OperationsDashboard(pulumi.ComponentResource):
    """The stack's CloudWatch dashboard (edge, origins, probes, tools), CloudFront's
    additional metrics for the distribution, and alarms on the edge's 5xx rate and each
    origin region's throttles and spillover."""

    dashboard_name: pulumi.Output[str]
    """Name of the dashboard (in the home region)."""
    dashboard_url: pulumi.Output[str]
    """The dashboard in the CloudWatch console."""
    alarm_names: pulumi.Output[list[str]]
    """Names of the alarms this component created."""

    def __init__(self, name: str, args: OperationsDashboardArgs, opts: pulumi.ResourceOptions | None = None):
        check_operations_dashboard_args(name, args)  # before anything is registered
        super().__init__(component_type("OperationsDashboard"), name, None, component_options(opts))
        child = pulumi.ResourceOptions(parent=self)
        server_id, home = args["server_id"], args["home_region"]
        topics = args["alert_topic_arns"]
        regions = sorted(args["origin_function_names"])
        aws.cloudfront.MonitoringSubscription(
            f"{name}-cloudfront-metrics",
            distribution_id=args["distribution_id"],
            monitoring_subscription=aws.cloudfront.MonitoringSubscriptionMonitoringSubscriptionArgs(
                realtime_metrics_subscription_config=aws.cloudfront.
                MonitoringSubscriptionMonitoringSubscriptionRealtimeMetricsSubscriptionConfigArgs(
                    realtime_metrics_subscription_status="Enabled"),
            ),
            opts=child,
        )
        names = [pulumi.Output.from_input(args["origin_function_names"][r]) for r in regions]
        body = pulumi.Output.all(args["distribution_id"], args["edge_function_name"], *names).apply(
            lambda values: json.dumps(dashboard_body(
                server_id=server_id, home_region=home, distribution_id=values[0], edge_function_name=values[1],
                origin_function_names=dict(zip(regions, values[2:], strict=True)),
                probe_regions=list(args["probe_regions"]), tools=list(args.get("tools") or ()),
                edge_regions=list(args.get("edge_regions") or REGIONAL_EDGE_CACHE_REGIONS),
                probe_namespace=args.get("probe_namespace") or PROBE_NAMESPACE,
            ), separators=(",", ":")))
        dashboard_name = dashboard_name_for(server_id)
        dashboard = aws.cloudwatch.Dashboard(f"{name}-dashboard", region=home, dashboard_name=dashboard_name,
                                             dashboard_body=body, opts=child)
        alarm_names = [physical_name(server_id, "edge-5xx", limit=255)]
        topic_alarm(
            f"{name}-edge-5xx", region=CLOUDFRONT_METRICS_REGION, alarm_name=alarm_names[0],
            description=f"{server_id}: the edge answers more than its 5xx threshold of requests with a server error",
            namespace="AWS/CloudFront", metric="5xxErrorRate", statistic="Average",
            dimensions={"DistributionId": args["distribution_id"], "Region": "Global"},
            threshold=args.get("edge_5xx_rate_percent") or DEFAULT_EDGE_5XX_RATE_PERCENT, periods=3,
            topic_arn=topics[CLOUDFRONT_METRICS_REGION], opts=child,
        )
        throttles = args.get("origin_throttles")
        spillover = args.get("spillover_invocations")
        error_rate = args.get("origin_error_rate_percent")
        min_invocations = args.get("origin_min_invocations")
        for region in regions:
            function = args["origin_function_names"][region]
            throttle_name = physical_name(server_id, f"origin-throttles-{region}", limit=255)
            topic_alarm(
                f"{name}-throttles-{region}", region=region, alarm_name=throttle_name,
                description=f"{server_id}: the origin in {region} throttles requests",
                namespace="AWS/Lambda", metric="Throttles", statistic="Sum", dimensions={"FunctionName": function},
                threshold=DEFAULT_ORIGIN_THROTTLES if throttles is None else throttles, periods=3,
                topic_arn=topics[region], opts=child,
            )
            spill_name = physical_name(server_id, f"origin-spillover-{region}", limit=255)
            topic_alarm(
                f"{name}-spillover-{region}", region=region, alarm_name=spill_name,
                description=f"{server_id}: the origin in {region} runs requests beyond its provisioned concurrency "
                            "(cold starts)",
                namespace="AWS/Lambda", metric="ProvisionedConcurrencySpilloverInvocations", statistic="Sum",
                dimensions={"FunctionName": function,
                            "Resource": pulumi.Output.from_input(function).apply(lambda f: f"{f}:{ORIGIN_ALIAS}")},
                threshold=DEFAULT_SPILLOVER_INVOCATIONS if spillover is None else spillover, periods=3,
                topic_arn=topics[region], opts=child,
            )
            alarm_names += [throttle_name, spill_name]
            if region in args["probe_regions"]:  # the probe metrics of an alarm must be in its region
                errors_green_name = physical_name(server_id, f"origin-errors-probes-green-{region}", limit=255)
                queries = errors_while_probes_green_queries(
                    server_id=server_id, region=region, function_name=function,
                    error_rate_percent=DEFAULT_ORIGIN_ERROR_RATE_PERCENT if error_rate is None else error_rate,
                    min_invocations=DEFAULT_ORIGIN_MIN_INVOCATIONS if min_invocations is None else min_invocations,
                    probe_namespace=args.get("probe_namespace") or PROBE_NAMESPACE)
                aws.cloudwatch.MetricAlarm(
                    f"{name}-errors-probes-green-{region}", region=region, name=errors_green_name,
                    alarm_description=f"{server_id}: real traffic to the origin in {region} fails above the error "
                                      "threshold while the probes to that region still succeed (the probes miss "
                                      "what users hit)",
                    metric_queries=[_metric_query_args(q) for q in queries],
                    evaluation_periods=ERRORS_WHILE_GREEN_PERIODS, datapoints_to_alarm=ERRORS_WHILE_GREEN_PERIODS,
                    threshold=0, comparison_operator="GreaterThanThreshold", treat_missing_data="notBreaching",
                    alarm_actions=[topics[region]], ok_actions=[topics[region]], opts=child)
                alarm_names.append(errors_green_name)
        self.dashboard_name = dashboard.dashboard_name
        self.dashboard_url = dashboard.dashboard_name.apply(
            lambda n: f"https://{home}.console.aws.amazon.com/cloudwatch/home?region={home}#dashboards/dashboard/{n}")
        self.alarm_names = pulumi.Output.from_input(alarm_names)
        self.register_outputs({"dashboard_name": self.dashboard_name, "dashboard_url": self.dashboard_url,
                               "alarm_names": self.alarm_names})
