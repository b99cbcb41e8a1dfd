"""EdgeLayer: one CloudFront distribution in front of every regional MCP origin.

- A viewer-request CloudFront Function (``edge/viewer_request.js``, rendered with the
  stack's issuer, audience, algorithms and allowed browser origins) turns away MCP
  requests from a browser origin not allowed (403) or without a well-formed, current
  bearer JWT (401) before any Lambda runs.
- An origin-request Lambda@Edge gate (``edge/gate/`` beside the rendered geo-router,
  packaged by ``edge.gate_package.edge_gate_package`` with its wheels: PyJWT,
  cryptography, awscrt) routes each request to the nearest deployed region, verifies
  the bearer token against the issuer's key set, checks per-tool scopes from the body
  (include-body), honours the region-pin header only for the probes' client, and signs the origin request with SigV4 using its own role, which
  may invoke exactly the stack's origin functions (their Function URLs are
  ``AWS_IAM``). It answers the RFC 9728 protected resource metadata itself, and
  forwards only the MCP path (POST, a CORS preflight from an allowed origin; GET only
  with ``get_stream``) and, for the probes' client, the server's readiness path: any
  other path 404, any other method 405, a query string 400 (``edge/gate/paths.py``).
- The edge's own answers carry ``x-mcp-edge-refusal`` (``functions.contract.REFUSAL_HEADER``);
  a response headers policy removes that header from origin responses, so no origin can
  make its answer look like the edge's refusal.
- The distribution: the default region's origin (HTTPS only, TLSv1.2, no custom
  header: the signature is what the origin trusts), caching disabled, compression
  off, all methods.

The gate is created by ``components/edge_function.edge_function``, which holds every
Lambda@Edge rule (us-east-1, x86_64, published version, both trusts, no environment,
replica logs, limits, ``skip_destroy`` and the clean-up after a destroy; the stack
output ``edgeRouterFunctionArn`` names the function, whose resource names keep
``router`` so that an update replaces nothing).

The issuer's key set is embedded empty (``{"keys": []}``): the program never downloads
it, so ``pulumi preview`` needs no network and the package's bytes do not change when
the issuer rotates keys; each replica downloads it from ``jwks_url`` on the first token
(an unknown ``kid``), bounded by the gate's cooldown and backoff (``edge/gate/tokens.py``).
A stack that wants it in the package passes ``jwks``.

Authorization: CloudFront refuses an origin request policy that lists
``Authorization`` (HTTP 400), and a cache policy with caching disabled cannot put
headers in the cache key. With caching disabled, a policy that forwards *all*
viewer headers does forward ``Authorization``; the only such header behaviour that
can add ``CloudFront-Viewer-Country`` is ``allViewerAndWhitelistCloudFront``. It
also forwards the viewer's ``Host``, which the router always replaces with the
chosen origin's Function URL host (Function URLs reject any other Host).
"""

import json
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_aws as aws

from components import naming, settings
from components.edge_function import edge_function, edge_package_spec
from components.jwt_rules import JwtRulesArgs, check_jwt_rules, jwt_algorithms, jwt_leeway_s
from components.lambda_package import build_package
from components.naming import physical_name
from components.origin import invoke_origins_policy
from components.type_tokens import component_options, component_type
from components.validation import ArgChecks, is_known, with_integers
from edge.gate_package import GATE_HANDLER, GATE_RUNTIME, GateSettings, edge_gate_package, gate_config
from edge.regions import EDGE_CONTROL_REGION
from edge.router import OriginTarget
from edge.viewer_function import RUNTIME as VIEWER_FUNCTION_RUNTIME
from edge.viewer_function import ViewerFunctionSettings, origin_problem, render_viewer_function
from functions.contract import REFUSAL_HEADER, REGION_HEALTH_KEY, REGION_HEALTH_VERSION

CACHING_DISABLED_POLICY = "Managed-CachingDisabled"
ALL_METHODS = ["GET", "HEAD", "OPTIONS", "PUT", "POST", "PATCH", "DELETE"]
CACHED_METHODS = ["GET", "HEAD"]
# Added to the forwarded viewer headers (see the module docstring on Authorization).
CLOUDFRONT_HEADERS = ["CloudFront-Viewer-Country"]
ROUTER_EVENT = "origin-request"
ROUTER_PACKAGE = "edge-gate"
# origin-request allows 30 s; a request takes well under a millisecond, and a key-set
# download is bounded at 2 s (GateSettings.jwks_fetch_timeout_s).
ROUTER_TIMEOUT_S = 5
# Lambda gives CPU in proportion to memory (one vCPU at 1,769 MB). Measured with
# `python -m bench.edge_gate_bench` on one full core: cold import 240 ms, a request
# 0.36 ms. At 128 MB (~1/14 vCPU) that is ~3.3 s of cold start and ~5 ms a request;
# at 1,024 MB (~0.58 vCPU) ~0.4 s and ~0.6 ms. Below a vCPU the GB-seconds of a request
# stay the same whatever the memory, and billing rounds up to 1 ms, so 1,024 MB costs
# per request what 512 MB does (1 GB-ms) and halves its cold start.
ROUTER_MEMORY_MB = 1024
VIEWER_CERTIFICATE_MIN_TLS = "TLSv1.2_2021"


DEFAULT_PRICE_CLASS = settings.PRICE_CLASS.default
DEFAULT_READ_TIMEOUT_S = settings.EDGE_ORIGIN_READ_TIMEOUT_S.default
DEFAULT_KEEPALIVE_S = settings.EDGE_ORIGIN_KEEPALIVE_S.default
DEFAULT_LOG_RETENTION_DAYS = settings.LOG_RETENTION_DAYS.default
# The region-health document before any consumer has published one: nothing avoided,
# dated at the epoch so that every vote counts. The consumers own the value from then
# on (the key's resource ignores changes to it).
INITIAL_REGION_HEALTH = json.dumps({"v": REGION_HEALTH_VERSION, "avoid": [], "at": "1970-01-01T00:00:00.000Z"},
                                   separators=(",", ":"))


class EdgeLayerArgs(TypedDict):
    """Inputs of the edge in front of the regional origins."""

    server_id: str
    """Name of the MCP server: prefixes the names of the edge's resources."""
    origin_hosts: dict[str, pulumi.Input[str]]
    """Region -> host of that region's origin (a Function URL host: no scheme, no slash)."""
    default_region: str
    """Region for viewers whose country is unknown; one of origin_hosts."""
    origin_function_arns: dict[str, pulumi.Input[str]]
    """Region -> ARN of that region's origin function: the only functions the gate's role may invoke."""
    origin_alias_arns: NotRequired[dict[str, pulumi.Input[str]]]
    """Region -> ARN of the alias the origin's Function URL is on (allowed beside the function)."""
    auth: JwtRulesArgs
    """The token rules: the viewer-request function checks their shape, the gate verifies them."""
    jwks_url: str
    """The issuer's JWKS URL, from which the gate downloads the signing keys (https)."""
    jwks: NotRequired[dict[str, Any]]
    """A JWKS document to embed in the gate (default none: the first token downloads it)."""
    tool_scopes: NotRequired[dict[str, list[str]]]
    """Tool name -> the OAuth scopes a tools/call of it needs (checked at the edge from the body)."""
    resource_url: NotRequired[str]
    """The protected resource (RFC 9728 resource): default the audience when it is an https URL,
    else the custom domain's MCP URL."""
    authorization_servers: NotRequired[list[str]]
    """The authorization servers the resource metadata names (default the issuer)."""
    mcp_path: NotRequired[str]
    """Public path of the MCP endpoint (default /mcp): the only path the gate forwards, compared byte for byte."""
    origin_path: NotRequired[str]
    """The server's own MCP path on the origins (default mcp_path): the gate rewrites mcp_path into it before
    signing, so the public path and the server's path are independent."""
    readiness_path: NotRequired[str]
    """The server's readiness path, when not the MCP path: the gate forwards GET/HEAD of it for the probes'
    client (probe_client_id) only; anyone else gets 404. None by default."""
    get_stream: NotRequired[bool]
    """The server streams on GET (a standalone SSE stream): the gate forwards GET on the MCP path instead of
    answering 405. Each open stream holds an origin invocation until the origin function's timeout, billed.
    Default false."""
    scopes: NotRequired[list[str]]
    """OAuth scopes the edge's 401 challenge names (RFC 6750 scope), usually the scopes the origins advertise; none by default."""
    allowed_origins: NotRequired[list[str]]
    """Browser origins (scheme://host[:port], or null) whose requests to the MCP path pass; any other Origin
    gets 403 at the viewer-request function. Requests without Origin are not a browser's and pass. None by default."""
    probe_client_id: NotRequired[str]
    """OAuth client id of the probes: only a verified token of this client may pin a region (the region-pin
    header); anyone else's pin is dropped. Default none: nobody pins."""
    metric_tools: NotRequired[list[str]]
    """Tools the edge's per-tool metrics name one by one (the dashboard's tool panels); calls of any other
    tool count under Tool=other (their log records still name them), so no client can mint metrics. None by
    default."""
    rate_limited_tools: NotRequired[list[str]]
    """Tools the web ACL limits one by one (web_acl_arn's per-tool rules): the gate refuses their calls that WAF
    cannot count (in a batch, or named past the body inspection size). None by default."""
    waf_body_inspection_kb: NotRequired[int]
    """The web ACL's body inspection size in KB (16, 32, 48 or 64; default 16)."""
    custom_domain: NotRequired[str | None]
    """Custom domain of the distribution, e.g. mcp.example.com; needs certificate_arn."""
    certificate_arn: NotRequired[pulumi.Input[str] | None]
    """ACM certificate (us-east-1) for custom_domain."""
    price_class: NotRequired[str]
    """CloudFront price class: PriceClass_All (default), PriceClass_200 or PriceClass_100."""
    origin_read_timeout_seconds: NotRequired[int]
    """CloudFront origin response (read) timeout between packets, 1-120 seconds (default 60): CloudFront's
    range, above 60 only after an increase of the account's 'Response timeout per origin' quota."""
    origin_keepalive_seconds: NotRequired[int]
    """CloudFront origin keep-alive timeout, 1-60 seconds (default 5)."""
    log_retention_days: NotRequired[int]
    """Retention of the router's replica log groups in every region that may run replicas (default 30)."""
    web_acl_arn: NotRequired[pulumi.Input[str] | None]
    """ARN of the AWS WAF web ACL (scope CLOUDFRONT, us-east-1) the distribution runs every request through
    before its functions (an EdgeFirewall's web_acl_arn); none by default."""


def check_edge_args(name: str, args: EdgeLayerArgs) -> None:
    checks = ArgChecks("EdgeLayer", name)
    if not checks.required(args, "server_id", "origin_hosts", "default_region", "origin_function_arns", "auth",
                           "jwks_url"):
        checks.done()
    checks.name_prefix("server_id", args["server_id"])
    hosts = args["origin_hosts"]
    if checks.region_map("origin_hosts", hosts, "its origin's host"):
        if args["default_region"] not in hosts:
            checks.problem("default_region", args["default_region"],
                           f"must be one of the origin regions ({', '.join(hosts)})")
        for region, host in hosts.items():
            if isinstance(host, str):
                try:
                    OriginTarget(host)
                except ValueError as error:
                    checks.problem(f"origin_hosts[{region!r}]", host, str(error))
    if (checks.region_map("origin_function_arns", args["origin_function_arns"], "its origin function's ARN")
            and set(args["origin_function_arns"]) != set(hosts or {})):
            checks.problem("origin_function_arns", sorted(args["origin_function_arns"]),
                           f"must name the regions of origin_hosts ({', '.join(hosts or {})})")
    aliases = args.get("origin_alias_arns")
    if aliases is not None and set(aliases) - set(args["origin_function_arns"]):
        checks.problem("origin_alias_arns", sorted(aliases), "must name only regions of origin_function_arns")
    check_jwt_rules(checks, "auth", args["auth"])
    checks.https_url("jwks_url", args["jwks_url"])
    if not checks.problems:
        try:
            gate_config(gate_settings(args))
        except ValueError as error:
            checks.problems.append(str(error))
    checks.mcp_path("mcp_path", args.get("mcp_path") or settings.MCP_PATH.default)
    if args.get("origin_path"):
        checks.mcp_path("origin_path", args.get("origin_path"))
    if args.get("readiness_path"):
        checks.mcp_path("readiness_path", args.get("readiness_path"))
    if not isinstance(args.get("get_stream", False), bool):
        checks.problem("get_stream", args.get("get_stream"), "must be true or false")
    checks.scopes("scopes", args.get("scopes"))
    allowed_origins = args.get("allowed_origins") or []
    if not isinstance(allowed_origins, list):
        checks.problem("allowed_origins", allowed_origins, "must be a list of browser origins")
    else:
        for index, origin in enumerate(allowed_origins):
            if (problem := origin_problem(origin)) is not None:
                checks.problem(f"allowed_origins[{index}]", origin, problem)
    probe_client_id = args.get("probe_client_id", "")
    if not isinstance(probe_client_id, str) or not probe_client_id.isprintable():
        checks.problem("probe_client_id", probe_client_id, "must be a client id (printable text)")
    metric_tools = args.get("metric_tools") or []
    if not isinstance(metric_tools, list) or not all(isinstance(t, str) and t for t in metric_tools):
        checks.problem("metric_tools", metric_tools, "must be a list of tool names")
    domain, cert = args.get("custom_domain"), args.get("certificate_arn")
    if domain:
        checks.dns_name("custom_domain", domain)
    if bool(domain) != (cert is not None and cert != ""):
        checks.problems.append("custom_domain and certificate_arn go together: set both or neither")
    if cert and is_known(cert) and not str(cert).startswith(f"arn:aws:acm:{EDGE_CONTROL_REGION}:"):
        checks.problem("certificate_arn", cert, f"must be an ACM certificate ARN in {EDGE_CONTROL_REGION} "
                                                "(CloudFront only uses certificates there)")
    checks.one_of("price_class", args.get("price_class", DEFAULT_PRICE_CLASS), settings.PRICE_CLASS.choices)
    checks.within("origin_read_timeout_seconds", args.get("origin_read_timeout_seconds", DEFAULT_READ_TIMEOUT_S),
                  settings.EDGE_ORIGIN_READ_TIMEOUT_S)
    checks.one_of("log_retention_days", args.get("log_retention_days", DEFAULT_LOG_RETENTION_DAYS),
                  settings.LOG_RETENTION_DAYS.choices)
    checks.within("origin_keepalive_seconds", args.get("origin_keepalive_seconds", DEFAULT_KEEPALIVE_S),
                  settings.EDGE_ORIGIN_KEEPALIVE_S)
    web_acl = args.get("web_acl_arn")
    if web_acl and is_known(web_acl) and not str(web_acl).startswith(f"arn:aws:wafv2:{EDGE_CONTROL_REGION}:"):
        checks.problem("web_acl_arn", web_acl, f"must be a WAFv2 web ACL ARN in {EDGE_CONTROL_REGION} with scope "
                                               "CLOUDFRONT (CloudFront takes no other)")
    checks.done()


def resource_url_of(args: EdgeLayerArgs) -> str:
    """The protected resource's URL (RFC 9728 ``resource``)."""
    if args.get("resource_url"):
        return args["resource_url"]
    audience = args["auth"]["audience"]
    if audience.startswith("https://"):
        return audience
    if args.get("custom_domain"):
        return f"https://{args['custom_domain']}{args.get('mcp_path') or settings.MCP_PATH.default}"
    raise ValueError("EdgeLayer: resource_url is required when auth.audience is not an https URL and no "
                     "custom_domain is set (the resource metadata must name the public MCP URL)")


def gate_settings(args: EdgeLayerArgs) -> GateSettings:
    """What the gate is rendered with, from the component's args."""
    auth = args["auth"]
    scopes = tuple(args.get("scopes") or ())
    tool_scopes = {tool: tuple(needed) for tool, needed in (args.get("tool_scopes") or {}).items()}
    named = (*scopes, *(s for needed in tool_scopes.values() for s in needed))
    return GateSettings(
        server_id=args["server_id"],  # the ServerId dimension of the gate's per-request records
        issuer=auth["issuer"],
        audiences=(auth["audience"],),
        jwks_url=args["jwks_url"],
        jwks=args.get("jwks") or {"keys": []},
        resource=resource_url_of(args),
        authorization_servers=tuple(args.get("authorization_servers") or (auth["issuer"],)),
        mcp_path=args.get("mcp_path") or settings.MCP_PATH.default,
        origin_path=args.get("origin_path") or "",
        algorithms=jwt_algorithms(auth),
        leeway_s=jwt_leeway_s(auth),
        tool_scopes=tool_scopes,
        scopes_supported=tuple(dict.fromkeys(named)),
        probe_client_id=args.get("probe_client_id") or "",
        metric_tools=tuple(args.get("metric_tools") or ()),
        readiness_path=args.get("readiness_path") or "",
        get_stream=bool(args.get("get_stream", False)),
        allowed_origins=tuple(args.get("allowed_origins") or ()),
        rate_limited_tools=tuple(args.get("rate_limited_tools") or ()),
        waf_body_inspection_kb=args.get("waf_body_inspection_kb", 16),
    )


def router_function_name(server_id: str, stack: str | None = None) -> str:
    return physical_name(server_id, "edge-router", limit=naming.LAMBDA_FUNCTION, stack=stack)


def viewer_function_name(server_id: str, stack: str | None = None) -> str:
    return physical_name(server_id, "viewer-auth", limit=naming.CLOUDFRONT_FUNCTION, stack=stack)


class EdgeLayer(pulumi.ComponentResource):
    """One CloudFront distribution in front of every regional origin: a viewer-request CloudFront
    Function that rejects malformed bearer tokens, and a us-east-1 Lambda@Edge gate that sends
    each viewer to the nearest deployed region, verifies the token and the tool's scopes, and
    signs the origin request (the origins' Function URLs are AWS_IAM)."""

    domain_name: pulumi.Output[str]
    """The distribution's domain name (point a custom domain's DNS record here)."""
    public_host: pulumi.Output[str]
    """The host clients use: the custom domain, else the distribution's domain name."""
    mcp_url: pulumi.Output[str]
    """The public MCP URL (https://<public host><mcp path>)."""
    distribution_mcp_url: pulumi.Output[str]
    """The MCP URL on the distribution's own domain (https://<id>.cloudfront.net<mcp path>): it
    resolves from the moment the distribution exists, before any DNS record points the custom
    domain here, so probes target it."""
    distribution_id: pulumi.Output[str]
    """Id of the CloudFront distribution."""
    router_function_arn: pulumi.Output[str]
    """Qualified ARN (published version) of the Lambda@Edge gate (router and guard); it outlives a
    destroy (skip_destroy)."""
    router_role_arn: pulumi.Output[str]
    """ARN of the gate's role: the principal the origins' Function URLs let in."""
    health_store_arn: pulumi.Output[str]
    """ARN of the CloudFront KeyValueStore holding the region-health document the viewer-request
    function reads (the probes' results consumers write it: give them this ARN)."""
    viewer_function_arn: pulumi.Output[str]
    """ARN of the viewer-request CloudFront Function."""
    origin_request_policy_id: pulumi.Output[str]
    """Id of the origin request policy (every viewer header plus CloudFront-Viewer-Country)."""
    response_headers_policy_id: pulumi.Output[str]
    """Id of the response headers policy (removes the refusal mark from origin responses)."""

    def __init__(self, name: str, args: EdgeLayerArgs, opts: pulumi.ResourceOptions | None = None):
        args = with_integers(args, EdgeLayerArgs)
        check_edge_args(name, args)  # before anything is registered
        super().__init__(component_type("EdgeLayer"), name, None, component_options(opts, "mcpedge:edge:EdgeLayer"))
        server_id, origin_hosts, default_region = args["server_id"], args["origin_hosts"], args["default_region"]
        auth = args["auth"]
        mcp_path = args.get("mcp_path") or settings.MCP_PATH.default
        custom_domain = args.get("custom_domain") or None
        certificate_arn = args.get("certificate_arn")
        read_timeout_s = args.get("origin_read_timeout_seconds", DEFAULT_READ_TIMEOUT_S)
        keepalive_s = args.get("origin_keepalive_seconds", DEFAULT_KEEPALIVE_S)
        child = pulumi.ResourceOptions(parent=self)

        # --- region health: what the probes publish and the viewer function reads ---
        health_store = aws.cloudfront.KeyValueStore(
            f"{name}-health",
            name=physical_name(server_id, "region-health", limit=naming.KEY_VALUE_STORE),
            comment=f"{server_id}: regions the edge routes around (written by the probe results consumers)",
            opts=child,
        )
        aws.cloudfront.KeyvaluestoreKey(
            f"{name}-health-document",
            key_value_store_arn=health_store.arn,
            key=REGION_HEALTH_KEY,
            value=INITIAL_REGION_HEALTH,
            # The consumers publish every change; a deployment must not undo one.
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["value"]),
        )

        # --- viewer-request: the JWT-shape check ------------------------------------
        viewer_function_code = render_viewer_function(ViewerFunctionSettings(
            mcp_path=mcp_path,
            issuer=auth["issuer"],
            audience=auth["audience"],
            algorithms=jwt_algorithms(auth),
            leeway_s=jwt_leeway_s(auth),
            regions=tuple(origin_hosts),
            public_host=custom_domain,
            scopes=tuple(args.get("scopes") or ()),
            allowed_origins=tuple(args.get("allowed_origins") or ()),
        ))
        viewer_function = aws.cloudfront.Function(
            f"{name}-viewer-auth",
            name=viewer_function_name(server_id),
            runtime=VIEWER_FUNCTION_RUNTIME,
            comment=f"{server_id}: reject MCP requests without a well-formed, current bearer JWT",
            code=viewer_function_code,
            # One store per function; the code reads it through cf.kvs().
            key_value_store_associations=[health_store.arn],
            publish=True,  # only the LIVE stage can be associated
            opts=child,
        )

        # --- origin-request: the gate (route, verify, authorize, sign) --------------
        regions = list(origin_hosts)
        gate = gate_settings(args)
        hosts = pulumi.Output.all(*(origin_hosts[r] for r in regions))

        def package(values: list[str]) -> pulumi.FileArchive:
            rendered = edge_gate_package(
                {region: OriginTarget(host) for region, host in zip(regions, values, strict=True)},
                default_region, gate=gate, read_timeout_s=read_timeout_s, keepalive_timeout_s=keepalive_s)
            spec = edge_package_spec(ROUTER_PACKAGE, rendered.files, requirements=rendered.requirements)
            return pulumi.FileArchive(str(build_package(spec)))

        function_arns, alias_arns = args["origin_function_arns"], args.get("origin_alias_arns") or {}
        # The gate's role: invoke the origins' Function URLs (AWS_IAM) and the functions; nothing else.
        invoke_policy = pulumi.Output.all(
            pulumi.Output.all(*(function_arns[r] for r in regions)),
            pulumi.Output.all(*(alias_arns[r] for r in regions if r in alias_arns)),
        ).apply(lambda arns: invoke_origins_policy(arns[0], arns[1]))
        router = edge_function(
            f"{name}-router",
            function_name=router_function_name(server_id),
            purpose="gate",
            description=f"{server_id}: route MCP requests to the nearest region, verify the token, sign for the origin",
            runtime=GATE_RUNTIME,
            handler=GATE_HANDLER,
            code=hosts.apply(package),
            event_type=ROUTER_EVENT,
            memory_mb=ROUTER_MEMORY_MB,
            timeout_s=ROUTER_TIMEOUT_S,
            parent=self,
            log_retention_days=args.get("log_retention_days", DEFAULT_LOG_RETENTION_DAYS),
            role_policies={"invoke-origins": invoke_policy},
        )

        # --- policies ----------------------------------------------------------------
        cache_policy_id = aws.cloudfront.get_cache_policy_output(
            name=CACHING_DISABLED_POLICY, opts=pulumi.InvokeOutputOptions(parent=self)
        ).id
        origin_request_policy = aws.cloudfront.OriginRequestPolicy(
            f"{name}-origin-request",
            name=physical_name(server_id, "mcp-origin-request", limit=naming.ORIGIN_REQUEST_POLICY),
            # The gate reads Authorization, Mcp-Method/Mcp-Name and the router's pin/avoid headers.
            comment="MCP: every viewer header (Authorization included) plus CloudFront-Viewer-Country",
            headers_config=aws.cloudfront.OriginRequestPolicyHeadersConfigArgs(
                header_behavior="allViewerAndWhitelistCloudFront",
                headers=aws.cloudfront.OriginRequestPolicyHeadersConfigHeadersArgs(items=CLOUDFRONT_HEADERS),
            ),
            cookies_config=aws.cloudfront.OriginRequestPolicyCookiesConfigArgs(cookie_behavior="none"),
            # "all", not "none": the gate must see a viewer's query string to refuse it with a 400
            # that names it (MCP sends none); "none" would drop it silently and forward the rest.
            query_strings_config=aws.cloudfront.OriginRequestPolicyQueryStringsConfigArgs(query_string_behavior="all"),
            opts=child,
        )
        # The refusal mark is the edge's alone: removed from whatever an origin answers. AWS's
        # guide ("Add or remove HTTP headers in CloudFront responses with a policy") says a
        # policy "can remove headers that it received from the origin" and modifies "the
        # responses that it serves from the cache and the ones that it forwards from the
        # origin"; it does not name responses a function generates, which carry the mark.
        # The local edge emulates exactly that (local/cloudfront/proxy.py).
        response_headers_policy = aws.cloudfront.ResponseHeadersPolicy(
            f"{name}-response-headers",
            name=physical_name(server_id, "mcp-response-headers", limit=naming.RESPONSE_HEADERS_POLICY),
            comment="MCP: no origin response may carry the edge's refusal mark",
            remove_headers_config=aws.cloudfront.ResponseHeadersPolicyRemoveHeadersConfigArgs(items=[
                aws.cloudfront.ResponseHeadersPolicyRemoveHeadersConfigItemArgs(header=REFUSAL_HEADER),
            ]),
            opts=child,
        )

        # --- the distribution ----------------------------------------------------------
        origin_id = f"mcp-origin-{default_region}"
        if custom_domain and certificate_arn:
            certificate = aws.cloudfront.DistributionViewerCertificateArgs(
                acm_certificate_arn=certificate_arn,
                ssl_support_method="sni-only",
                minimum_protocol_version=VIEWER_CERTIFICATE_MIN_TLS,
            )
        else:
            certificate = aws.cloudfront.DistributionViewerCertificateArgs(cloudfront_default_certificate=True)
        distribution = aws.cloudfront.Distribution(
            f"{name}-distribution",
            enabled=True,
            comment=f"{server_id} MCP edge ({pulumi.get_stack()})",
            aliases=[custom_domain] if custom_domain else None,
            origins=[aws.cloudfront.DistributionOriginArgs(
                origin_id=origin_id,
                domain_name=origin_hosts[default_region],
                custom_origin_config=aws.cloudfront.DistributionOriginCustomOriginConfigArgs(
                    http_port=80,
                    https_port=443,
                    origin_protocol_policy="https-only",
                    origin_ssl_protocols=["TLSv1.2"],
                    origin_read_timeout=read_timeout_s,
                    origin_keepalive_timeout=keepalive_s,
                ),
            )],
            default_cache_behavior=aws.cloudfront.DistributionDefaultCacheBehaviorArgs(
                target_origin_id=origin_id,
                allowed_methods=ALL_METHODS,
                cached_methods=CACHED_METHODS,
                viewer_protocol_policy="redirect-to-https",
                compress=False,  # never buffer or re-encode SSE streams
                cache_policy_id=cache_policy_id,
                origin_request_policy_id=origin_request_policy.id,
                response_headers_policy_id=response_headers_policy.id,
                function_associations=[aws.cloudfront.DistributionDefaultCacheBehaviorFunctionAssociationArgs(
                    event_type="viewer-request", function_arn=viewer_function.arn,
                )],
                lambda_function_associations=[
                    aws.cloudfront.DistributionDefaultCacheBehaviorLambdaFunctionAssociationArgs(
                        event_type="origin-request", lambda_arn=router.qualified_arn,
                        # The gate checks a call's scopes from its JSON-RPC body and hashes the
                        # body for SigV4 (Function URLs refuse unsigned payloads).
                        include_body=True,
                    )
                ],
            ),
            http_version="http2and3",
            is_ipv6_enabled=True,
            price_class=args.get("price_class", DEFAULT_PRICE_CLASS),
            restrictions=aws.cloudfront.DistributionRestrictionsArgs(
                geo_restriction=aws.cloudfront.DistributionRestrictionsGeoRestrictionArgs(restriction_type="none"),
            ),
            viewer_certificate=certificate,
            web_acl_id=args.get("web_acl_arn"),  # CloudFront takes a WAFv2 web ACL by its ARN
            opts=child,
        )

        self.domain_name = distribution.domain_name
        self.public_host = pulumi.Output.from_input(custom_domain) if custom_domain else distribution.domain_name
        self.mcp_url = pulumi.Output.concat("https://", self.public_host, mcp_path)
        self.distribution_mcp_url = pulumi.Output.concat("https://", distribution.domain_name, mcp_path)
        self.distribution_id = distribution.id
        self.router_function_arn = router.qualified_arn
        self.router_role_arn = router.role
        self.health_store_arn = health_store.arn
        self.viewer_function_arn = viewer_function.arn
        self.origin_request_policy_id = origin_request_policy.id
        self.response_headers_policy_id = response_headers_policy.id
        self.register_outputs({
            "healthStoreArn": self.health_store_arn,
            "domainName": self.domain_name,
            "mcpUrl": self.mcp_url,
            "distributionMcpUrl": self.distribution_mcp_url,
            "distributionId": self.distribution_id,
            "routerFunctionArn": self.router_function_arn,
        })
