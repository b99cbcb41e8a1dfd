"""EdgeLayer: one CloudFront distribution in front of every regional MCP origin.

- A viewer-request CloudFront Function (``edge/viewer_request.js``, rendered with the
  stack's issuer, audience and algorithms) turns away MCP requests without a
  well-formed, current bearer JWT before any Lambda runs.
- An origin-request Lambda@Edge geo-router (``edge/router_handler.py``, rendered
  with the country -> nearest deployed region table and the origins' Function URL
  hosts) sends each request to the nearest deployed region.
- The distribution: the default region's origin (HTTPS only, TLSv1.2, the origin
  secret as a custom header), caching disabled, compression off, all methods.

Lambda@Edge facts this follows: the function lives in us-east-1, runs x86_64, is
referenced by a published version (``qualified_arn``), has no environment, and its
role is trusted by both ``lambda.amazonaws.com`` and ``edgelambda.amazonaws.com``.
Its replicas log to ``/aws/lambda/us-east-1.<name>`` in the region that ran them.

Destroy: CloudFront deletes Lambda@Edge replicas hours after the distribution
stops using them, and AWS refuses to delete the function until then. The function
is therefore created with ``skip_destroy=True``: ``pulumi destroy`` (or a
replacement) drops it from the stack and leaves it in AWS. Clean-up, a few hours
later: ``aws lambda delete-function --region us-east-1 --function-name <name>``
(the stack output ``edgeRouterFunctionArn`` names it).

Authorization: CloudFront refuses an origin request policy that lists
``Authorization`` (HTTP 400), and a cache policy with caching disabled cannot put
headers in the cache key. With caching disabled, a policy that forwards *all*
viewer headers does forward ``Authorization``; the only such header behaviour that
can add ``CloudFront-Viewer-Country`` is ``allViewerAndWhitelistCloudFront``. It
also forwards the viewer's ``Host``, which the router always replaces with the
chosen origin's Function URL host (Function URLs reject any other Host).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.iam import allow_policy, trust_policy
from edge.router import (
    ROUTER_ARCHITECTURE,
    ROUTER_HANDLER,
    ROUTER_RUNTIME,
    OriginTarget,
    build_router_package,
    render_router,
)
from edge.viewer_function import RUNTIME as VIEWER_FUNCTION_RUNTIME
from edge.viewer_function import ViewerFunctionSettings, render_viewer_function
from mcpedge.config import StackConfig
from mcpedge.constants import ORIGIN_SECRET_HEADER
from mcpedge.regions import EDGE_CONTROL_REGION

CACHING_DISABLED_POLICY = "Managed-CachingDisabled"
ALL_METHODS = ["GET", "HEAD", "OPTIONS", "PUT", "POST", "PATCH", "DELETE"]
CACHED_METHODS = ["GET", "HEAD"]
# Added to the forwarded viewer headers (see the module docstring on Authorization).
CLOUDFRONT_HEADERS = ["CloudFront-Viewer-Country"]
ROUTER_TIMEOUT_S = 5  # origin-request allows 30; the router decides in microseconds
ROUTER_MEMORY_MB = 128
VIEWER_CERTIFICATE_MIN_TLS = "TLSv1.2_2021"


@dataclass(frozen=True)
class EdgeLayerArgs:
    config: StackConfig
    # Region -> Function URL host (no scheme, no slash) of that region's origin.
    origin_hosts: Mapping[str, pulumi.Input[str]]
    # Sent by CloudFront to every origin as ORIGIN_SECRET_HEADER.
    origin_secret: pulumi.Input[str]


def router_function_name(server_id: str) -> str:
    return f"{server_id}-edge-router"


def _replica_logs_policy(account_id: str, function_name: str) -> str:
    # Replicas create their log group in whichever region ran them, hence "*".
    return allow_policy([(
        ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
        [
            f"arn:aws:logs:*:{account_id}:log-group:/aws/lambda/{EDGE_CONTROL_REGION}.{function_name}",
            f"arn:aws:logs:*:{account_id}:log-group:/aws/lambda/{EDGE_CONTROL_REGION}.{function_name}:*",
            f"arn:aws:logs:{EDGE_CONTROL_REGION}:{account_id}:log-group:/aws/lambda/{function_name}",
            f"arn:aws:logs:{EDGE_CONTROL_REGION}:{account_id}:log-group:/aws/lambda/{function_name}:*",
        ],
    )])


class EdgeLayer(pulumi.ComponentResource):
    domain_name: pulumi.Output[str]
    public_host: pulumi.Output[str]
    mcp_url: pulumi.Output[str]
    distribution_id: pulumi.Output[str]
    router_function_arn: pulumi.Output[str]
    router_source: pulumi.Output[str]
    router_package_path: pulumi.Output[str]
    viewer_function_code: str

    def __init__(self, name: str, args: EdgeLayerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mcpedge:edge:EdgeLayer", name, None, opts)
        config = args.config
        missing = [r for r in config.regions if r not in args.origin_hosts]
        if missing:
            raise ValueError(f"EdgeLayer {name}: no origin host for region(s) {', '.join(missing)}")
        child = pulumi.ResourceOptions(parent=self)
        edge = config.edge

        # --- viewer-request: the JWT-shape check ------------------------------------
        self.viewer_function_code = render_viewer_function(ViewerFunctionSettings.from_config(config))
        viewer_function = aws.cloudfront.Function(
            f"{name}-viewer-auth",
            name=f"{config.server_id}-viewer-auth",
            runtime=VIEWER_FUNCTION_RUNTIME,
            comment=f"{config.server_id}: reject MCP requests without a well-formed, current bearer JWT",
            code=self.viewer_function_code,
            publish=True,  # only the LIVE stage can be associated
            opts=child,
        )

        # --- origin-request: the geo-router ----------------------------------------
        regions = list(config.regions)
        hosts = pulumi.Output.all(*(args.origin_hosts[r] for r in regions))
        self.router_source = hosts.apply(lambda values: render_router(
            {region: OriginTarget(host) for region, host in zip(regions, values, strict=True)},
            config.default_region,
            read_timeout_s=edge.origin_read_timeout_s,
            keepalive_timeout_s=edge.origin_keepalive_s,
        ))
        self.router_package_path = self.router_source.apply(lambda source: str(build_router_package(source)))

        fn_name = router_function_name(config.server_id)
        role = aws.iam.Role(
            f"{name}-router-role",
            assume_role_policy=trust_policy("lambda.amazonaws.com", "edgelambda.amazonaws.com"),
            description=f"Lambda@Edge geo-router {fn_name}: writes its replicas' logs, nothing else",
            opts=child,
        )
        account_id = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id
        aws.iam.RolePolicy(
            f"{name}-router-logs",
            role=role.id,
            policy=account_id.apply(lambda account: _replica_logs_policy(account, fn_name)),
            opts=child,
        )
        router = aws.lambda_.Function(
            f"{name}-router",
            region=EDGE_CONTROL_REGION,
            name=fn_name,
            description=f"{config.server_id}: route MCP requests to the nearest deployed region",
            role=role.arn,
            runtime=ROUTER_RUNTIME,
            architectures=[ROUTER_ARCHITECTURE],
            handler=ROUTER_HANDLER,
            code=self.router_package_path.apply(pulumi.FileArchive),
            memory_size=ROUTER_MEMORY_MB,
            timeout=ROUTER_TIMEOUT_S,
            publish=True,  # CloudFront takes a numbered version, never $LATEST
            # Replicas outlive the distribution by hours; see the module docstring.
            skip_destroy=True,
            opts=child,
        )

        # --- policies ----------------------------------------------------------------
        cache_policy_id = aws.cloudfront.get_cache_policy_output(
            name=CACHING_DISABLED_POLICY, opts=pulumi.InvokeOutputOptions(parent=self)
        ).id
        origin_request_policy = aws.cloudfront.OriginRequestPolicy(
            f"{name}-origin-request",
            name=f"{config.server_id}-mcp-origin-request",
            comment="MCP: every viewer header (Authorization included) plus CloudFront-Viewer-Country",
            headers_config=aws.cloudfront.OriginRequestPolicyHeadersConfigArgs(
                header_behavior="allViewerAndWhitelistCloudFront",
                headers=aws.cloudfront.OriginRequestPolicyHeadersConfigHeadersArgs(items=CLOUDFRONT_HEADERS),
            ),
            cookies_config=aws.cloudfront.OriginRequestPolicyCookiesConfigArgs(cookie_behavior="none"),
            query_strings_config=aws.cloudfront.OriginRequestPolicyQueryStringsConfigArgs(query_string_behavior="all"),
            opts=child,
        )

        # --- the distribution ----------------------------------------------------------
        origin_id = f"mcp-origin-{config.default_region}"
        if edge.custom_domain and edge.certificate_arn:
            certificate = aws.cloudfront.DistributionViewerCertificateArgs(
                acm_certificate_arn=edge.certificate_arn,
                ssl_support_method="sni-only",
                minimum_protocol_version=VIEWER_CERTIFICATE_MIN_TLS,
            )
        else:
            certificate = aws.cloudfront.DistributionViewerCertificateArgs(cloudfront_default_certificate=True)
        distribution = aws.cloudfront.Distribution(
            f"{name}-distribution",
            enabled=True,
            comment=f"{config.server_id} MCP edge ({config.stack})",
            aliases=[edge.custom_domain] if edge.custom_domain else None,
            origins=[aws.cloudfront.DistributionOriginArgs(
                origin_id=origin_id,
                domain_name=args.origin_hosts[config.default_region],
                custom_origin_config=aws.cloudfront.DistributionOriginCustomOriginConfigArgs(
                    http_port=80,
                    https_port=443,
                    origin_protocol_policy="https-only",
                    origin_ssl_protocols=["TLSv1.2"],
                    origin_read_timeout=edge.origin_read_timeout_s,
                    origin_keepalive_timeout=edge.origin_keepalive_s,
                ),
                custom_headers=[aws.cloudfront.DistributionOriginCustomHeaderArgs(
                    name=ORIGIN_SECRET_HEADER, value=args.origin_secret,
                )],
            )],
            default_cache_behavior=aws.cloudfront.DistributionDefaultCacheBehaviorArgs(
                target_origin_id=origin_id,
                allowed_methods=ALL_METHODS,
                cached_methods=CACHED_METHODS,
                viewer_protocol_policy="redirect-to-https",
                compress=False,  # never buffer or re-encode SSE streams
                cache_policy_id=cache_policy_id,
                origin_request_policy_id=origin_request_policy.id,
                function_associations=[aws.cloudfront.DistributionDefaultCacheBehaviorFunctionAssociationArgs(
                    event_type="viewer-request", function_arn=viewer_function.arn,
                )],
                lambda_function_associations=[
                    aws.cloudfront.DistributionDefaultCacheBehaviorLambdaFunctionAssociationArgs(
                        event_type="origin-request", lambda_arn=router.qualified_arn, include_body=False,
                    )
                ],
            ),
            http_version="http2and3",
            is_ipv6_enabled=True,
            price_class=edge.price_class,
            restrictions=aws.cloudfront.DistributionRestrictionsArgs(
                geo_restriction=aws.cloudfront.DistributionRestrictionsGeoRestrictionArgs(restriction_type="none"),
            ),
            viewer_certificate=certificate,
            opts=child,
        )

        self.domain_name = distribution.domain_name
        self.public_host = pulumi.Output.from_input(edge.custom_domain) if edge.custom_domain else distribution.domain_name
        self.mcp_url = pulumi.Output.concat("https://", self.public_host, config.mcp_path)
        self.distribution_id = distribution.id
        self.router_function_arn = router.qualified_arn
        self.register_outputs({
            "domainName": self.domain_name,
            "mcpUrl": self.mcp_url,
            "distributionId": self.distribution_id,
            "routerFunctionArn": self.router_function_arn,
        })
