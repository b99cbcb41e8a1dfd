"""The global MCP edge: one Pulumi program, every region of the stack.

Order of construction follows the data: the stack config is loaded and validated
first (before any resource exists), then per-region alert topics, the regional
MCP origins, the edge in front of them, and the probe fleets that watch both.
"""

import pulumi

from components.alerts import AlertTopic, AlertTopicArgs
from components.edge import EdgeLayer, EdgeLayerArgs, router_function_name
from components.edge_firewall import EdgeFirewall, EdgeFirewallArgs
from components.jwt_rules import JwtRulesArgs
from components.operations_dashboard import OperationsDashboard, OperationsDashboardArgs
from components.origin import McpOrigin, McpOriginArgs, OriginServerArgs, OriginSizingArgs
from components.probe_fleet import ProbeCredentialsArgs, ProbeFleet, ProbeFleetArgs, RegionHealthArgs
from components.probe_results import ProbeResults, ProbeResultsArgs
from stack_config.loading import load_from_pulumi

config, secrets = load_from_pulumi()

# --- the one place the stack config becomes component args -----------------------------

jwt_rules = JwtRulesArgs(
    issuer=config.auth.issuer,
    audience=config.auth.audience,
    algorithms=list(config.auth.algorithms),
    leeway_seconds=config.auth.leeway_s,
)


def origin_sizing(region: str) -> OriginSizingArgs:
    sizing = config.origin_for(region)
    args = OriginSizingArgs(
        memory_mb=sizing.memory_mb,
        timeout_seconds=sizing.timeout_s,
    )
    if sizing.reserved_concurrency:  # 0: originReservedConcurrency unset, nothing reserved
        args["reserved_concurrency"] = sizing.reserved_concurrency
    if config.cold_start == "provisioned":  # the other modes take no provisioned sizing
        args["provisioned_min"] = sizing.provisioned_min
        args["provisioned_max"] = sizing.provisioned_max
        args["utilization_target"] = config.autoscaling.utilization_target
        args["scale_in_cooldown_seconds"] = config.autoscaling.scale_in_cooldown_s
        args["scale_out_cooldown_seconds"] = config.autoscaling.scale_out_cooldown_s
    return args


def origin_server() -> OriginServerArgs:
    """mcp-edge:server as the origins take it (folders relative to the project root, the
    program's working directory, or absolute)."""
    server, args = config.server, OriginServerArgs(path=config.server.path)
    if server.source:
        args["source"], args["runtime"], args["command"] = server.source, server.runtime or "", server.command or ""
        if server.install:
            args["install"] = server.install
    elif server.image:
        args["image"] = server.image
    else:
        args["image_digest"] = server.image_digest or ""
    if server.readiness_path:
        args["readiness_path"] = server.readiness_path
    return args


alert_regions = list(dict.fromkeys([*config.regions, *config.probes.regions]))
alert_topics = {
    region: AlertTopic(
        f"{config.server_id}-alerts-{region}",
        AlertTopicArgs(region=region, server_id=config.server_id, email=config.probes.alert_email),
    )
    for region in alert_regions
}

# One MCP origin per configured region (the server on Lambda + a streaming Function URL
# on `live` that only IAM principals may call: the edge's role and the probes').
origins = {
    region: McpOrigin(
        f"{config.server_id}-origin-{region}",
        McpOriginArgs(
            region=region,
            server_id=config.server_id,
            server=origin_server(),
            alert_topic_arn=alert_topics[region].arn,
            sizing=origin_sizing(region),
            lwa_layer_version=config.lwa_layer_version,
            log_retention_days=config.log_retention_days,
            cold_start=config.cold_start,
            tracing=config.origin_tracing,
        ),
    )
    for region in config.regions
}

# The edge's AWS WAF web ACL (us-east-1, scope CLOUDFRONT): per-token, per-IP and per-tool
# rate limits and the managed rules that cannot break MCP, applied before any function of
# the distribution runs (wafEnabled false: none).
firewall = None
if config.firewall is not None:
    firewall = EdgeFirewall(
        f"{config.server_id}-edge-firewall",
        EdgeFirewallArgs(
            server_id=config.server_id,
            mcp_path=config.firewall.mcp_path,
            token_limit=config.firewall.token_limit,
            anonymous_ip_limit=config.firewall.anonymous_ip_limit,
            ip_limit=config.firewall.ip_limit,
            tool_limits=dict(config.firewall.tool_limits),
            window_seconds=config.firewall.window_seconds,
            managed_rules=config.firewall.managed_rules,
            body_inspection_kb=config.firewall.body_inspection_kb,
            log_retention_days=config.log_retention_days,
        ),
    )

# The tools the stack names (scoped or rate-limited): the edge's per-tool metrics and the
# dashboard's tool panels name these one by one, any other as "other".
named_tools = sorted({*config.server.tool_scopes, *(config.firewall.tool_limits if config.firewall is not None else {})})

# The edge: one CloudFront distribution, a viewer-request JWT-shape check and a
# Lambda@Edge (us-east-1) router to the nearest deployed origin, its constants
# rendered from the Function URLs above.
edge = EdgeLayer(
    f"{config.server_id}-edge",
    EdgeLayerArgs(
        server_id=config.server_id,
        origin_hosts={region: origin.host for region, origin in origins.items()},
        default_region=config.default_region,
        origin_function_arns={region: origin.function_arn for region, origin in origins.items()},
        origin_alias_arns={region: origin.alias_arn for region, origin in origins.items()},
        auth=jwt_rules,
        jwks_url=config.auth.jwks_url,
        tool_scopes={tool: list(scopes) for tool, scopes in config.server.tool_scopes.items()},
        mcp_path=config.mcp_path,
        # The server's own path, which the gate rewrites mcp_path into (they are independent).
        origin_path=config.server.path,
        # Forwarded by the gate for the probes' client only (when not the MCP path itself).
        readiness_path=config.server.readiness_path or "",
        get_stream=config.server.get_stream,
        scopes=list(config.auth.scopes),
        allowed_origins=list(config.edge.allowed_origins),
        # Only the probes' verified tokens may pin a region.
        probe_client_id=config.auth.probe_client_id,
        metric_tools=named_tools,
        # The gate refuses the calls of WAF-limited tools that the web ACL cannot count.
        rate_limited_tools=sorted(config.firewall.tool_limits) if config.firewall is not None else [],
        waf_body_inspection_kb=config.firewall.body_inspection_kb if config.firewall is not None else 16,
        custom_domain=config.edge.custom_domain,
        certificate_arn=config.edge.certificate_arn,
        price_class=config.edge.price_class,
        origin_read_timeout_seconds=config.edge.origin_read_timeout_s,
        origin_keepalive_seconds=config.edge.origin_keepalive_s,
        log_retention_days=config.log_retention_days,
        web_acl_arn=firewall.web_acl_arn if firewall else None,
    ),
)

# The probes: one results table (a global table in resultsTableHomeRegion with a
# replica in every other probe region) and, per probe region, a fleet that probes the edge pinned to every origin
# region and every Function URL directly, every probeIntervalSeconds.
probe_results = ProbeResults(
    f"{config.server_id}-probe-results",
    ProbeResultsArgs(server_id=config.server_id, regions=list(config.probes.regions),
                     home_region=config.probes.table_home_region),
)
probe_credentials = ProbeCredentialsArgs(
    token_url=config.auth.token_url,
    client_id=config.auth.probe_client_id,
    client_secret_name=config.auth.probe_client_secret_name,
    # Given (`pulumi config set --secret probeClientSecret ...`): each fleet creates the secret in its
    # region, under the stack's own name; not given: probeClientSecretName exists already.
    client_secret=secrets.probe_client_secret,
    audience=config.auth.audience,
)
probe_fleets = {
    region: ProbeFleet(
        f"{config.server_id}-probes-{region}",
        ProbeFleetArgs(
            region=region,
            server_id=config.server_id,
            # The distribution's own domain: it works from the first minute, while the
            # custom domain resolves only once its DNS record points at the distribution.
            edge_mcp_url=edge.distribution_mcp_url,
            origin_urls={r: origin.url for r, origin in origins.items()},
            origin_function_arns={r: origin.function_arn for r, origin in origins.items()},
            origin_alias_arns={r: origin.alias_arn for r, origin in origins.items()},
            table_name=probe_results.name,
            table_arn=probe_results.replica_arns[region],
            # Every fleet claims its alerts there: one outage pages once, not once per probe region.
            table_home_region=probe_results.home_region,
            alert_topic_arn=alert_topics[region].arn,
            alert_key_arn=alert_topics[region].key_arn,
            credentials=probe_credentials,
            # The Function URLs are probed directly, on the server's own path (the edge on mcpPath).
            mcp_path=config.server.path,
            interval_seconds=config.probes.interval_s,
            timeout_seconds=config.probes.timeout_s,
            deadline_seconds=config.probes.deadline_s,
            degraded_latency_ms=config.probes.degraded_latency_ms,
            history_ttl_days=config.probes.history_ttl_days,
            consumer_timeout_seconds=config.probes.consumer_timeout_s,
            log_retention_days=config.log_retention_days,
            # Regional failover: every fleet's consumer votes with what its probes see,
            # and the edge routes around a region a quorum of probe regions sees down.
            health=RegionHealthArgs(
                store_arn=edge.health_store_arn,
                probe_regions=list(config.probes.regions),
                quorum=config.failover.quorum,
                failure_threshold=config.failover.failure_threshold,
                recovery_threshold=config.failover.recovery_threshold,
            ),
        ),
    )
    for region in config.probes.regions
}
pulumi.export("regions", list(config.regions))
pulumi.export("defaultRegion", config.default_region)
pulumi.export("alertTopicArns", {region: topic.arn for region, topic in alert_topics.items()})
pulumi.export("originUrls", {region: origin.url for region, origin in origins.items()})
pulumi.export("originHosts", {region: origin.host for region, origin in origins.items()})
pulumi.export("originAliasArns", {region: origin.alias_arn for region, origin in origins.items()})
pulumi.export("originFunctionArns", {region: origin.function_arn for region, origin in origins.items()})
if config.server.kind != "source":  # where a pipeline pushes the image (server.imageDigest)
    pulumi.export("originImageRepositories", {region: origin.image_repository_url for region, origin in origins.items()})
pulumi.export("edgeDomain", edge.domain_name)
pulumi.export("mcpUrl", edge.mcp_url)
pulumi.export("edgeRouterFunctionArn", edge.router_function_arn)
pulumi.export("healthStoreArn", edge.health_store_arn)
if firewall is not None:
    pulumi.export("webAclArn", firewall.web_acl_arn)
    pulumi.export("webAclLogGroup", firewall.log_group_name)
pulumi.export("probeQueues", {region: fleet.results_queue_url for region, fleet in probe_fleets.items()})
pulumi.export("probeDeadLetterQueues", {region: fleet.dead_letter_queue_url for region, fleet in probe_fleets.items()})
pulumi.export("resultsTable", probe_results.name)

# The operators' view on AWS: one dashboard (in the results table's home region) over the edge,
# every origin region, the probes and the gate's per-tool records, and alarms on what hurts users.
# CloudFront's metrics and the edge's alarm live in us-east-1, so it needs an alert topic there.
if "us-east-1" in alert_topics:
    operations = OperationsDashboard(
        f"{config.server_id}-operations",
        OperationsDashboardArgs(
            server_id=config.server_id,
            home_region=config.probes.table_home_region,
            origin_function_names={region: origin.function_name for region, origin in origins.items()},
            distribution_id=edge.distribution_id,
            edge_function_name=router_function_name(config.server_id),
            alert_topic_arns={region: topic.arn for region, topic in alert_topics.items()},
            probe_regions=list(config.probes.regions),
            tools=named_tools,
            origin_error_rate_percent=config.alarms.origin_error_rate_percent,
            origin_min_invocations=config.alarms.origin_min_invocations,
        ),
    )
    pulumi.export("dashboardName", operations.dashboard_name)
    pulumi.export("dashboardUrl", operations.dashboard_url)
else:
    pulumi.log.warn("no operations dashboard: it needs an alert topic in us-east-1 (CloudFront's metrics and the "
                    "edge's alarm are there); add us-east-1 to regions or probeRegions")

# A description of the topology, by the identity of each part (no secrets): what the
# local topology (local/plan.py) reads to find the stack's edge, origins, fleets, table
# and topics among the resources, instead of guessing by type or handler.
pulumi.export("topology", {
    "version": 1,
    "serverId": config.server_id,
    "mcpPath": config.mcp_path,
    # The server's own MCP path on the origins, which the edge maps mcpPath onto.
    "serverPath": config.server.path,
    "regions": list(config.regions),
    "defaultRegion": config.default_region,
    "probeRegions": list(config.probes.regions),
    # Seconds between probe rounds, as a number: what each fleet's rounds workflow does, for the
    # docs' failover figures; the cost estimate and the local run read the workflow itself.
    "probeIntervalSeconds": config.probes.interval_s,
    "edge": {
        "mcpUrl": edge.mcp_url,
        "distributionMcpUrl": edge.distribution_mcp_url,
        "distributionId": edge.distribution_id,
        "viewerFunctionArn": edge.viewer_function_arn,
        "routerFunctionArn": edge.router_function_arn,
        "originRequestPolicyId": edge.origin_request_policy_id,
        "healthStoreArn": edge.health_store_arn,
        # The web ACL in front of the distribution (None: wafEnabled is false).
        "webAclArn": firewall.web_acl_arn if firewall else None,
    },
    "origins": {
        region: {"functionArn": origin.function_arn, "url": origin.url, "host": origin.host}
        for region, origin in origins.items()
    },
    "probeFleets": {
        region: {
            "probeFunctionArn": fleet.probe_function_arn,
            "consumerFunctionArn": fleet.consumer_function_arn,
            "queueArns": [fleet.quarantine_queue_arn, fleet.results_queue_arn, fleet.dead_letter_queue_arn],
            "scheduleArns": fleet.schedule_arns,
            "eventSourceMappingArns": fleet.event_source_mapping_arns,
        }
        for region, fleet in probe_fleets.items()
    },
    "resultsTableArn": probe_results.arn,
    "alertTopicArns": {region: topic.arn for region, topic in alert_topics.items()},
})
