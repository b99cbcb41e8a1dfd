"""The global MCP edge: one Pulumi program, every region of the stack.

Order of construction follows the data: the stack config is loaded and validated
first (before any resource exists), then per-region alert topics, the regional
MCP origins, the edge in front of them, and the probe fleets that watch both.
"""

import pulumi
import pulumi_random as random

from components.alerts import AlertTopic, AlertTopicArgs
from components.edge import EdgeLayer, EdgeLayerArgs
from components.origin import McpOrigin, McpOriginArgs
from components.probes import ProbeFleet, ProbeFleetArgs, ProbeResults, ProbeResultsArgs
from mcpedge.config import PROJECT, load_from_pulumi

config = load_from_pulumi()

# The origin secret: CloudFront sends it to the origins as a custom header, and
# the origins refuse requests without it. Configured (`pulumi config set --secret
# originSecret ...`) or generated, one generated secret per rotation name. Rotating
# without downtime is two updates: (1) new originSecretRotation with
# originSecretPreviousRotation = the old one (origins accept both while CloudFront
# propagates the new header), (2) clear originSecretPreviousRotation.
def generated_origin_secret(rotation: str) -> pulumi.Output[str]:
    return pulumi.Output.secret(
        random.RandomPassword(
            f"{config.server_id}-origin-secret-{rotation}",
            length=48,
            special=False,
            keepers={"rotation": rotation},
        ).result
    )


origin_secret_previous: pulumi.Output[str] | None = None
if config.origin_secret:
    origin_secret = pulumi.Config(PROJECT).require_secret("originSecret")
    origin_secret_previous = pulumi.Config(PROJECT).get_secret("originSecretPrevious")
else:
    origin_secret = generated_origin_secret(config.origin_secret_rotation)
    if config.origin_secret_previous_rotation:
        origin_secret_previous = generated_origin_secret(config.origin_secret_previous_rotation)

alert_regions = list(dict.fromkeys([*config.regions, *config.probes.regions]))
alert_topics = {
    region: AlertTopic(
        f"{config.server_id}-alerts-{region}",
        AlertTopicArgs(region=region, server_id=config.server_id, email=config.probes.alert_email),
    )
    for region in alert_regions
}

# One MCP origin per configured region (Lambda + streaming Function URL on `live`).
origins = {
    region: McpOrigin(
        f"{config.server_id}-origin-{region}",
        McpOriginArgs(
            config=config,
            region=region,
            origin_secret=origin_secret,
            origin_secret_previous=origin_secret_previous,
            alert_topic_arn=alert_topics[region].arn,
        ),
    )
    for region in config.regions
}

# The edge: one CloudFront distribution, a viewer-request JWT-shape check and a
# Lambda@Edge (us-east-1) router to the nearest deployed origin, its constants
# rendered from the Function URLs above.
edge = EdgeLayer(
    f"{config.server_id}-edge",
    EdgeLayerArgs(
        config=config,
        origin_hosts={region: origin.host for region, origin in origins.items()},
        origin_secret=origin_secret,
    ),
)

# The probes: one results table (a global table with a replica in every probe
# region) and, per probe region, a fleet that probes the edge pinned to every origin
# region and every Function URL directly, every probeRateMinutes.
probe_results = ProbeResults(f"{config.server_id}-probe-results", ProbeResultsArgs(config=config))
probe_fleets = {
    region: ProbeFleet(
        f"{config.server_id}-probes-{region}",
        ProbeFleetArgs(
            config=config,
            region=region,
            edge_mcp_url=edge.mcp_url,
            origin_urls={r: origin.url for r, origin in origins.items()},
            origin_secret=origin_secret,
            table_name=probe_results.name,
            table_arn=probe_results.arn_in(region),
            alert_topic_arn=alert_topics[region].arn,
            alert_key_arn=alert_topics[region].key_arn,
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
pulumi.export("edgeDomain", edge.domain_name)
pulumi.export("mcpUrl", edge.mcp_url)
pulumi.export("edgeRouterFunctionArn", edge.router_function_arn)
pulumi.export("probeQueues", {region: fleet.results_queue_url for region, fleet in probe_fleets.items()})
pulumi.export("probeDeadLetterQueues", {region: fleet.dead_letter_queue_url for region, fleet in probe_fleets.items()})
pulumi.export("resultsTable", probe_results.name)
