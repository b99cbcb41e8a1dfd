"""EdgeFirewall: the AWS WAF web ACL the CloudFront distribution names (``web_acl_id``).

A web ACL for CloudFront has scope ``CLOUDFRONT`` and lives in us-east-1 whatever the
stack's regions are. Its rules are ``edge.firewall_rules.render_web_acl``'s, passed on
unchanged (the local edge evaluates the same rendered rules). WAF logs every request to
a CloudWatch Logs group in us-east-1 whose name starts with ``aws-waf-logs-`` (WAF
refuses any other name), with the ``authorization`` header redacted: the logs must not
hold bearer tokens. Each rule has its own CloudWatch metric and sampled requests.
"""

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict, cast

import pulumi
import pulumi_aws as aws

from components.naming import physical_name
from components.settings import LOG_RETENTION_DAYS
from components.type_tokens import component_options, component_type
from components.validation import ArgChecks, with_integers
from edge.firewall_rules import FirewallSettings, render_web_acl, setting_problems

WAF_REGION = "us-east-1"
"""CloudFront's web ACLs and their log groups are in us-east-1."""
LOG_GROUP_PREFIX = "aws-waf-logs-"
WEB_ACL_NAME = 128
LOG_GROUP_NAME = 512
DEFAULT_LOG_RETENTION_DAYS = LOG_RETENTION_DAYS.default
_DEFAULTS = FirewallSettings()


class EdgeFirewallArgs(TypedDict):
    """Inputs of the edge's web ACL."""

    server_id: str
    """Name of the MCP server: names the web ACL and its log group."""
    mcp_path: str
    """The MCP endpoint's path (like /mcp): the per-token and per-tool limits apply to it and below."""
    token_limit: NotRequired[int]
    """Requests per bearer token per window on the MCP path, 10 to 2,000,000,000 (default 600)."""
    anonymous_ip_limit: NotRequired[int]
    """Requests per client IP per window without a bearer token or to /.well-known/ (default 120)."""
    ip_limit: NotRequired[int]
    """Requests per client IP per window, every request (forged tokens included); at least token_limit and
    anonymous_ip_limit (default 3000)."""
    tool_limits: NotRequired[dict[str, int]]
    """Tool name -> tools/call requests per bearer token per window (at most 7 tools; default none)."""
    window_seconds: NotRequired[int]
    """Evaluation window of every rate limit: 60, 120, 300 or 600 seconds (default 60)."""
    managed_rules: NotRequired[bool]
    """Add the AWS managed groups (IP reputation, known bad inputs, common rule set); default true."""
    body_inspection_kb: NotRequired[int]
    """KB of a request body CloudFront forwards to WAF: 16 (default, no extra fee), 32, 48 or 64."""
    log_retention_days: NotRequired[int]
    """Retention of the WAF log group, one of the values CloudWatch allows (default 30)."""


def firewall_settings(args: EdgeFirewallArgs) -> FirewallSettings:
    return FirewallSettings(
        mcp_path=args["mcp_path"],
        token_limit=args.get("token_limit", _DEFAULTS.token_limit),
        anonymous_ip_limit=args.get("anonymous_ip_limit", _DEFAULTS.anonymous_ip_limit),
        ip_limit=args.get("ip_limit", _DEFAULTS.ip_limit),
        tool_limits=dict(args.get("tool_limits") or {}),
        window_seconds=args.get("window_seconds", _DEFAULTS.window_seconds),
        managed_rules=args.get("managed_rules", _DEFAULTS.managed_rules),
        body_inspection_kb=args.get("body_inspection_kb", _DEFAULTS.body_inspection_kb),
    )


def check_edge_firewall_args(name: str, args: EdgeFirewallArgs) -> None:
    checks = ArgChecks("EdgeFirewall", name)
    if checks.required(args, "server_id", "mcp_path"):
        checks.name_prefix("server_id", args["server_id"])
        tool_limits = args.get("tool_limits")
        if tool_limits is not None and not isinstance(tool_limits, Mapping):
            checks.problem("tool_limits", tool_limits, "must map tool names to limits")
        else:
            checks.problems.extend(setting_problems(firewall_settings(args)))
        checks.one_of("log_retention_days", args.get("log_retention_days", DEFAULT_LOG_RETENTION_DAYS),
                      LOG_RETENTION_DAYS.choices)
    checks.done()


class EdgeFirewall(pulumi.ComponentResource):
    """The AWS WAF web ACL for the edge's CloudFront distribution (us-east-1, scope CLOUDFRONT):
    per-token, per-IP (anonymous and every request) and per-tool rate limits answered with a JSON-RPC 429, the AWS managed
    groups that cannot break MCP, and its logs in CloudWatch."""

    web_acl_arn: pulumi.Output[str]
    """ARN of the web ACL: what the distribution's web_acl_id takes."""
    web_acl_id: pulumi.Output[str]
    """ID of the web ACL."""
    log_group_name: pulumi.Output[str]
    """Name of the CloudWatch Logs group WAF logs to (in us-east-1)."""
    rule_metric_names: pulumi.Output[list[str]]
    """CloudWatch metric name of each rule, in priority order (dimension Rule, with WebACL)."""

    def __init__(self, name: str, args: EdgeFirewallArgs, opts: pulumi.ResourceOptions | None = None):
        args = with_integers(args, EdgeFirewallArgs)
        check_edge_firewall_args(name, args)  # before anything is registered
        super().__init__(component_type("EdgeFirewall"), name, None, component_options(opts))
        child = pulumi.ResourceOptions(parent=self)
        server_id = args["server_id"]
        rendered = render_web_acl(firewall_settings(args))
        acl_name = physical_name(server_id, "edge", limit=WEB_ACL_NAME)
        visibility: dict[str, Any] = {"cloudwatch_metrics_enabled": True, "metric_name": acl_name,
                                      "sampled_requests_enabled": True}
        web_acl = aws.wafv2.WebAcl(
            f"{name}-web-acl",
            region=WAF_REGION,
            name=acl_name,
            description=f"Rate limits and managed rules in front of the {server_id} MCP edge",
            scope="CLOUDFRONT",
            default_action=cast(Any, rendered.default_action),
            rules=cast(Any, rendered.rules),
            custom_response_bodies=cast(Any, rendered.custom_response_bodies),
            association_config=cast(Any, rendered.association_config),
            visibility_config=cast(Any, visibility),
            opts=child,
        )  # the rendered shapes are the *ArgsDict shapes, as plain dicts (shared with the local edge)
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            region=WAF_REGION,
            name=physical_name(server_id, "edge", limit=LOG_GROUP_NAME, prefix=LOG_GROUP_PREFIX),
            retention_in_days=args.get("log_retention_days", DEFAULT_LOG_RETENTION_DAYS),
            opts=child,
        )
        aws.wafv2.WebAclLoggingConfiguration(
            f"{name}-logging",
            region=WAF_REGION,
            resource_arn=web_acl.arn,
            log_destination_configs=[log_group.arn],
            # Bearer tokens stay out of the logs (the rate rules' key is this header).
            redacted_fields=[{"single_header": {"name": "authorization"}}],
            opts=child,
        )
        self.web_acl_arn = web_acl.arn
        self.web_acl_id = web_acl.id
        self.log_group_name = log_group.name
        self.rule_metric_names = pulumi.Output.from_input(rendered.metric_names)
        self.register_outputs({
            "web_acl_arn": self.web_acl_arn,
            "web_acl_id": self.web_acl_id,
            "log_group_name": self.log_group_name,
            "rule_metric_names": self.rule_metric_names,
        })
