"""EdgeLayer under mocks: the real program (``__main__.py``) for the prod stack and
for a second stack without a custom domain; every property of the distribution,
the CloudFront Function, the origin request policy and the Lambda@Edge router."""

from __future__ import annotations

import ast
import json
import zipfile
from typing import Any

import pytest

from components.edge import ROUTER_MEMORY_MB, router_function_name
from components.edge_function import REPLICA_LOG_REGIONS
from devkit.shipped import (
    ALT_OVERRIDES,
    DISTRIBUTION,
    VIEWER_FUNCTION,
    alt_program,
    function_url_hosts,
    router_resource,
    router_zip,
)
from edge.gate_package import GateSettings, edge_gate_package
from edge.router import OriginTarget
from edge.viewer_function import render_viewer_function
from functions.contract import REGION_HEALTH_KEY, REGION_HEALTH_VERSION
from stack_config.loading import load_from_stack_file
from tests.harness import ProgramRun, Resource, run_program

CONFIG = load_from_stack_file("prod")
ORIGIN_REQUEST_POLICY = "aws:cloudfront/originRequestPolicy:OriginRequestPolicy"
RESPONSE_HEADERS_POLICY = "aws:cloudfront/responseHeadersPolicy:ResponseHeadersPolicy"
HEALTH_STORE = "aws:cloudfront/keyValueStore:KeyValueStore"
HEALTH_KEY = "aws:cloudfront/keyvaluestoreKey:KeyvaluestoreKey"
CACHING_DISABLED_ID = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad"  # AWS's managed policy id
SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"  # Pulumi's marker for a secret value


def unsecret(value: Any) -> tuple[Any, bool]:
    if isinstance(value, dict) and SECRET_SIG_KEY in value:
        return value["value"], True
    return value, False


def gate_config_of(run: ProgramRun) -> dict[str, Any]:
    """The GATE_CONFIG literal rendered into the shipped package."""
    with zipfile.ZipFile(router_zip(run)) as zf:
        source = zf.read("edge_gate/constants.py").decode("utf-8")
    tree = ast.parse(source)
    (value,) = [n.value for n in tree.body if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "GATE_CONFIG"]
    assert value is not None
    return ast.literal_eval(value)  # type: ignore[no-any-return]


def gate_settings_of(run: ProgramRun) -> GateSettings:
    """What the stack should render the gate with (independently of components/edge.py)."""
    return GateSettings(
        server_id=CONFIG.server_id,
        issuer=CONFIG.auth.issuer, audiences=(CONFIG.auth.audience,), jwks_url=CONFIG.auth.jwks_url,
        resource=CONFIG.auth.audience if CONFIG.auth.audience.startswith("https://")
        else f"https://{CONFIG.edge.custom_domain}{CONFIG.mcp_path}",
        authorization_servers=(CONFIG.auth.issuer,), mcp_path=CONFIG.mcp_path,
        algorithms=tuple(CONFIG.auth.algorithms), leeway_s=CONFIG.auth.leeway_s,
        tool_scopes={tool: list(scopes) for tool, scopes in CONFIG.server.tool_scopes.items()},
        # every scope the challenge or a tool names
        scopes_supported=tuple(dict.fromkeys([*CONFIG.auth.scopes,
                                              *(s for needed in CONFIG.server.tool_scopes.values() for s in needed)])),
        probe_client_id=CONFIG.auth.probe_client_id,  # the only client whose token may pin a region
        # the tools the metrics name one by one: those the stack scopes or rate-limits
        metric_tools=tuple(sorted({*CONFIG.server.tool_scopes, *(CONFIG.firewall.tool_limits if CONFIG.firewall else {})})),
        # the tools WAF limits one by one and how much body it reads: what the gate refuses WAF cannot count
        rate_limited_tools=tuple(sorted(CONFIG.firewall.tool_limits if CONFIG.firewall else {})),
        waf_body_inspection_kb=CONFIG.firewall.body_inspection_kb if CONFIG.firewall else 16,
        # what the gate forwards besides POST to the MCP path: the readiness path (probes only), GET
        # (getStream), preflights from these origins
        readiness_path=CONFIG.server.readiness_path or "", get_stream=CONFIG.server.get_stream,
        allowed_origins=CONFIG.edge.allowed_origins,
    )


def edge_component(run: ProgramRun) -> Resource:
    (component,) = [r for r in run.resources if r.type == "mcpedge:index:EdgeLayer"]
    return component


def distribution(run: ProgramRun) -> Resource:
    return run.one(DISTRIBUTION)


def behavior(run: ProgramRun) -> dict[str, Any]:
    return distribution(run).inputs["defaultCacheBehavior"]


def the_origin(run: ProgramRun) -> dict[str, Any]:
    origins, _ = unsecret(distribution(run).inputs["origins"])
    (origin,) = origins
    return origin


# --- structure ------------------------------------------------------------------------------


def test_every_edge_resource_is_a_child_of_the_edge_component(prod):
    component = edge_component(prod)
    assert component.name == f"{CONFIG.server_id}-edge"
    children = {r.type for r in prod.children_of(component)}
    assert children == {
        "aws:iam/role:Role", "aws:iam/rolePolicy:RolePolicy", "aws:lambda/function:Function", "aws:cloudwatch/logGroup:LogGroup",
        VIEWER_FUNCTION, ORIGIN_REQUEST_POLICY, RESPONSE_HEADERS_POLICY, DISTRIBUTION, HEALTH_STORE, HEALTH_KEY,
    }
    for child in prod.children_of(component):
        assert child.name.startswith(component.name + "-")


# --- Lambda@Edge router ----------------------------------------------------------------------


def test_the_router_is_a_published_x86_64_python_function_in_us_east_1(prod):
    router = router_resource(prod)
    assert router.region == "us-east-1" and router.inputs["region"] == "us-east-1"
    assert router.inputs["name"] == router_function_name(CONFIG.server_id, CONFIG.stack)
    assert router.inputs["architectures"] == ["x86_64"]
    assert router.inputs["runtime"] == "python3.13"
    assert router.inputs["handler"] == "edge_gate.handler.handler"
    assert router.inputs["publish"] is True
    assert router.inputs["timeout"] <= 30  # origin-request limit
    assert router.inputs["memorySize"] == ROUTER_MEMORY_MB == 1024  # sized for the cold import (components/edge.py)


def test_the_gate_package_is_the_rendered_gate_with_its_x86_64_wheels(prod):
    with zipfile.ZipFile(router_zip(prod)) as zf:
        names = set(zf.namelist())
        rendered = {n: zf.read(n).decode("utf-8") for n in names if n.endswith(".py")
                    and (n.startswith("edge_gate/") or n == "geo_router.py")}
    expected = edge_gate_package(
        {region: OriginTarget(host) for region, host in function_url_hosts(prod).items()}, CONFIG.default_region,
        gate=gate_settings_of(prod), read_timeout_s=CONFIG.edge.origin_read_timeout_s,
        keepalive_timeout_s=CONFIG.edge.origin_keepalive_s)
    assert rendered == expected.files
    for dependency in ("jwt/__init__.py", "cryptography/__init__.py", "awscrt/__init__.py", "cffi/__init__.py"):
        assert dependency in names, dependency
    # CPython 3.13 manylinux x86_64 builds: the compiled parts are for Lambda@Edge's platform.
    assert any(n.startswith("cryptography/hazmat/bindings/_rust.abi3.so") for n in names)
    assert "_awscrt.abi3.so" in names and "_cffi_backend.cpython-313-x86_64-linux-gnu.so" in names
    with zipfile.ZipFile(router_zip(prod)) as zf:
        tags = [line for n in names if n.endswith(".dist-info/WHEEL")
                for line in zf.read(n).decode().splitlines() if line.startswith("Tag:")]
    binary = [t for t in tags if not t.endswith("-any")]
    assert binary and all("x86_64" in t and "manylinux" in t for t in binary), binary


def test_the_gate_embeds_no_key_set_so_preview_needs_no_network(prod):
    config = gate_config_of(prod)
    assert config["jwks"] == {"keys": []}
    assert config["jwks_url"] == CONFIG.auth.jwks_url
    assert config["issuer"] == CONFIG.auth.issuer and config["audiences"] == [CONFIG.auth.audience]


def test_the_gate_role_may_invoke_exactly_the_stacks_origins_and_only_through_aws_iam_urls(prod):
    component = edge_component(prod)
    (policy,) = [p for p in prod.children_of(component, "aws:iam/rolePolicy:RolePolicy")
                 if p.name.endswith("-router-invoke-origins")]
    router = router_resource(prod)
    role = next(r for r in prod.of_type("aws:iam/role:Role") if r.outputs["arn"] == router.inputs["role"])
    assert policy.inputs["role"] == role.id
    functions = {f.outputs["arn"] for f in prod.of_type("aws:lambda/function:Function") if "-origin-" in f.name}
    aliases = {a.outputs["arn"] for a in prod.of_type("aws:lambda/alias:Alias") if "-origin-" in a.name}
    assert len(functions) == len(CONFIG.regions) and len(aliases) == len(CONFIG.regions)
    statements = {s["Sid"]: s for s in json.loads(policy.inputs["policy"])["Statement"]}
    assert set(statements) == {"InvokeOriginFunctionUrls", "InvokeOriginFunctions"}
    url, invoke = statements["InvokeOriginFunctionUrls"], statements["InvokeOriginFunctions"]
    assert url["Action"] == ["lambda:InvokeFunctionUrl"] and invoke["Action"] == ["lambda:InvokeFunction"]
    assert url["Condition"] == {"StringEquals": {"lambda:FunctionUrlAuthType": "AWS_IAM"}}
    assert "Condition" not in invoke
    for statement in (url, invoke):
        assert statement["Effect"] == "Allow"
        assert set(statement["Resource"]) == functions | aliases
        assert not any("*" in arn for arn in statement["Resource"])
    assert policy.urn in router.options["dependencies"]


def test_the_router_has_none_of_what_lambda_at_edge_forbids(prod):
    inputs = router_resource(prod).inputs
    for forbidden in ("environment", "layers", "vpcConfig", "deadLetterConfig", "fileSystemConfigs"):
        assert forbidden not in inputs, forbidden


def test_the_router_survives_destroy_because_replicas_outlive_the_distribution(prod):
    assert router_resource(prod).inputs["skipDestroy"] is True


def test_the_distribution_references_the_routers_numbered_version(prod):
    router = router_resource(prod)
    (association,) = behavior(prod)["lambdaFunctionAssociations"]
    # The body: the gate reads a call's tool from it and hashes it for SigV4.
    assert association == {"eventType": "origin-request", "lambdaArn": router.outputs["qualifiedArn"], "includeBody": True}
    assert association["lambdaArn"].endswith(":1"), "a numbered version, never $LATEST or an alias"
    assert prod.outputs["edgeRouterFunctionArn"] == router.outputs["qualifiedArn"]


def test_the_router_role_is_trusted_by_lambda_and_edgelambda(prod):
    router = router_resource(prod)
    role = next(r for r in prod.of_type("aws:iam/role:Role") if r.outputs["arn"] == router.inputs["role"])
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Effect"] == "Allow" and statement["Action"] == "sts:AssumeRole"
    assert sorted(statement["Principal"]["Service"]) == ["edgelambda.amazonaws.com", "lambda.amazonaws.com"]


def test_the_routers_replica_log_groups_exist_with_the_stacks_retention_wherever_cloudfront_may_run_replicas(prod):
    # Left to Lambda@Edge, /aws/lambda/us-east-1.<name> is created on first use in each region and never expires.
    component = edge_component(prod)
    name = router_function_name(CONFIG.server_id, CONFIG.stack)
    groups = {g.region: g for g in prod.descendants_of(component, "aws:cloudwatch/logGroup:LogGroup")
              if g["name"] != f"/aws/lambda/{name}"}
    assert set(groups) == set(REPLICA_LOG_REGIONS) and len(REPLICA_LOG_REGIONS) >= 13
    for group in groups.values():
        assert group["name"] == f"/aws/lambda/us-east-1.{name}"
        assert group["retentionInDays"] == CONFIG.log_retention_days
    router = prod.one("aws:lambda/function:Function", name_contains="-edge-router")
    assert {g.urn for g in groups.values()} <= set(router.options["dependencies"])  # before any replica logs


def test_the_routers_own_log_group_exists_in_us_east_1_with_the_stacks_retention_before_the_function(prod):
    # An invocation of the function itself (not a replica) logs to /aws/lambda/<name> in us-east-1;
    # left to Lambda, that group is created on first use and never expires.
    component = edge_component(prod)
    name = router_function_name(CONFIG.server_id, CONFIG.stack)
    (group,) = [g for g in prod.descendants_of(component, "aws:cloudwatch/logGroup:LogGroup")
                if g["name"] == f"/aws/lambda/{name}"]
    assert group.region == "us-east-1" and group["retentionInDays"] == CONFIG.log_retention_days
    router = prod.one("aws:lambda/function:Function", name_contains="-edge-router")
    assert group.urn in router.options["dependencies"]


def test_the_router_may_write_its_replicas_logs_in_every_region(prod):
    component = edge_component(prod)
    (policy,) = [p for p in prod.children_of(component, "aws:iam/rolePolicy:RolePolicy") if p.name.endswith("-router-logs")]
    (statement,) = json.loads(policy.inputs["policy"])["Statement"]
    assert sorted(statement["Action"]) == ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"]
    name = router_function_name(CONFIG.server_id, CONFIG.stack)
    assert f"arn:aws:logs:*:123456789012:log-group:/aws/lambda/us-east-1.{name}:*" in statement["Resource"]
    assert all(name in resource for resource in statement["Resource"])


# --- CloudFront Function -----------------------------------------------------------------------


def test_the_viewer_function_is_published_on_runtime_2_with_the_rendered_code(prod):
    function = prod.one(VIEWER_FUNCTION)
    assert function.inputs["runtime"] == "cloudfront-js-2.0"
    assert function.inputs["publish"] is True
    assert function.inputs["code"] == render_viewer_function(CONFIG.viewer_function_settings())
    assert behavior(prod)["functionAssociations"] == [
        {"eventType": "viewer-request", "functionArn": function.outputs["arn"]}
    ]


# --- policies ------------------------------------------------------------------------------------


def test_caching_is_disabled_with_the_managed_policy(prod):
    assert behavior(prod)["cachePolicyId"] == CACHING_DISABLED_ID
    assert ("aws:cloudfront/getCachePolicy:getCachePolicy", {"name": "Managed-CachingDisabled"}) in prod.calls


def test_the_origin_request_policy_forwards_viewer_headers_and_the_viewer_country(prod):
    policy = prod.one(ORIGIN_REQUEST_POLICY)
    headers = policy.inputs["headersConfig"]
    # All viewer headers: with caching disabled this is how Authorization reaches the
    # origin (CloudFront refuses a policy that lists it), plus the country for the router.
    assert headers["headerBehavior"] == "allViewerAndWhitelistCloudFront"
    assert headers["headers"]["items"] == ["CloudFront-Viewer-Country"]
    listed = {h.lower() for h in headers["headers"]["items"]}
    assert not listed & {"authorization", "host"}, "CloudFront answers 400 to a policy listing Authorization"
    assert policy.inputs["cookiesConfig"] == {"cookieBehavior": "none"}
    # Every query string reaches the gate, which refuses any on the MCP path with a 400 naming it.
    assert policy.inputs["queryStringsConfig"] == {"queryStringBehavior": "all"}
    assert behavior(prod)["originRequestPolicyId"] == policy.id


def test_the_response_headers_policy_removes_the_refusal_mark_from_origin_responses_and_nothing_else(prod):
    from functions.contract import REFUSAL_HEADER

    policy = prod.one(RESPONSE_HEADERS_POLICY)
    assert policy.inputs["removeHeadersConfig"] == {"items": [{"header": REFUSAL_HEADER}]}
    assert not {"corsConfig", "customHeadersConfig", "securityHeadersConfig"} & set(policy.inputs)
    assert behavior(prod)["responseHeadersPolicyId"] == policy.id


# --- the distribution ------------------------------------------------------------------------------


def test_the_origin_is_the_default_regions_function_url_over_https_only(prod):
    origin = the_origin(prod)
    assert origin["domainName"] == function_url_hosts(prod)[CONFIG.default_region]
    config = origin["customOriginConfig"]
    assert config["originProtocolPolicy"] == "https-only"
    assert config["originSslProtocols"] == ["TLSv1.2"]
    assert config["originReadTimeout"] == CONFIG.edge.origin_read_timeout_s == 60
    assert config["originKeepaliveTimeout"] == CONFIG.edge.origin_keepalive_s
    assert behavior(prod)["targetOriginId"] == origin["originId"]


def test_no_origin_secret_is_sent_to_the_origins(prod):
    # The origins are locked by IAM (SigV4 from the edge), not by a shared header.
    assert not the_origin(prod).get("customHeaders")
    assert not prod.of_type("random:index/randomPassword:RandomPassword")


def test_every_method_is_allowed_and_viewers_are_redirected_to_https_without_compression(prod):
    b = behavior(prod)
    assert sorted(b["allowedMethods"]) == sorted(["GET", "HEAD", "OPTIONS", "PUT", "POST", "PATCH", "DELETE"])
    assert b["cachedMethods"] == ["GET", "HEAD"]
    assert b["viewerProtocolPolicy"] == "redirect-to-https"
    assert b["compress"] is False


def test_the_distribution_speaks_http2_and_3_over_ipv6_in_the_configured_price_class(prod):
    d = distribution(prod).inputs
    assert d["enabled"] is True
    assert d["httpVersion"] == "http2and3"
    assert d["isIpv6Enabled"] is True
    assert d["priceClass"] == CONFIG.edge.price_class
    assert d["restrictions"] == {"geoRestriction": {"restrictionType": "none"}}


def test_the_custom_domain_is_an_alias_with_the_us_east_1_certificate(prod):
    d = distribution(prod).inputs
    assert d["aliases"] == ["mcp.acme.example"]
    assert d["viewerCertificate"] == {
        "acmCertificateArn": CONFIG.edge.certificate_arn,
        "sslSupportMethod": "sni-only",
        "minimumProtocolVersion": "TLSv1.2_2021",
    }


def test_outputs_name_the_distribution_and_the_public_mcp_url(prod):
    assert prod.outputs["edgeDomain"] == distribution(prod).outputs["domainName"]
    assert prod.outputs["edgeDomain"].endswith(".cloudfront.net")
    assert prod.outputs["mcpUrl"] == "https://mcp.acme.example/mcp"


# --- a stack without a custom domain, other edge settings --------------------------------------


def test_without_a_custom_domain_the_distribution_uses_its_own_name_and_certificate():
    alt = alt_program()
    d = distribution(alt)
    assert "aliases" not in d.inputs or not d.inputs["aliases"]
    assert d.inputs["viewerCertificate"] == {"cloudfrontDefaultCertificate": True}
    assert alt.outputs["mcpUrl"] == f"https://{d.outputs['domainName']}/mcp"
    # The function cannot know the distribution's name (a cycle): it reads Host.
    assert '"host":null' in alt.one(VIEWER_FUNCTION).inputs["code"]


def test_edge_settings_come_from_the_stack_config():
    alt = alt_program()
    assert distribution(alt).inputs["priceClass"] == ALT_OVERRIDES["edgePriceClass"]
    origin = the_origin(alt)
    assert origin["domainName"] == function_url_hosts(alt)["eu-west-1"]
    assert origin["customOriginConfig"]["originReadTimeout"] == ALT_OVERRIDES["edgeOriginReadTimeoutSeconds"] == 45
    assert origin["customOriginConfig"]["originKeepaliveTimeout"] == 10


def test_the_gate_is_rendered_with_the_readiness_path_the_get_stream_opt_in_and_the_allowed_origins():
    from components.edge import EdgeLayerArgs, gate_settings
    from edge.gate_package import gate_config

    args = EdgeLayerArgs(
        server_id="acme-mcp", origin_hosts={"us-east-1": "a.lambda-url.us-east-1.on.aws"}, default_region="us-east-1",
        origin_function_arns={"us-east-1": "arn:aws:lambda:us-east-1:123456789012:function:acme-origin"},
        auth={"issuer": "https://auth.acme.example", "audience": "https://mcp.acme.example/mcp"},
        jwks_url="https://auth.acme.example/jwks.json", readiness_path="/healthz", get_stream=True,
        allowed_origins=["https://app.acme.example"])
    config = gate_config(gate_settings(args))
    assert config["routes"] == {"/mcp": {"kind": "mcp", "get_stream": True, "origin_path": "/mcp"},
                                "/healthz": {"kind": "readiness", "origin_path": "/healthz"}}
    assert config["allowed_origins"] == ["https://app.acme.example"]
    plain = gate_config(gate_settings(EdgeLayerArgs(**{k: v for k, v in args.items()  # type: ignore[typeddict-item]
                                                       if k not in ("readiness_path", "get_stream")})))
    assert plain["routes"] == {"/mcp": {"kind": "mcp", "get_stream": False, "origin_path": "/mcp"}}
    # The server's own path is the row's origin: the public path stays mcp_path.
    mapped = gate_config(gate_settings(EdgeLayerArgs(**{**args, "origin_path": "/api/mcp"})))  # type: ignore[typeddict-item]
    assert mapped["routes"]["/mcp"] == {"kind": "mcp", "get_stream": True, "origin_path": "/api/mcp"}
    assert mapped["resource_metadata"]["resource"] == "https://mcp.acme.example/mcp"


# --- bad input ---------------------------------------------------------------------------------------

def test_an_edge_whose_default_region_has_no_origin_is_refused():
    from components.edge import EdgeLayer, EdgeLayerArgs

    def program() -> None:
        EdgeLayer("edge", EdgeLayerArgs(
            server_id="acme-mcp", origin_hosts={"us-east-1": "a.lambda-url.us-east-1.on.aws"},
            default_region="eu-west-1",
            origin_function_arns={"us-east-1": "arn:aws:lambda:us-east-1:123456789012:function:acme-origin"},
            auth={"issuer": "https://auth.acme.example", "audience": "https://mcp.acme.example/mcp"},
            jwks_url="https://auth.acme.example/jwks.json"))

    with pytest.raises(ValueError, match=r"default_region = 'eu-west-1': must be one of the origin regions \(us-east-1\)"):
        run_program("prod", program=program)


# --- regional failover: the health store ----------------------------------------------------


def test_the_viewer_function_is_associated_with_the_stacks_one_health_store(prod):
    store = prod.one(HEALTH_STORE)
    assert store["name"] == f"{CONFIG.server_id}-prod-region-health"
    assert store["arn"].startswith("arn:aws:cloudfront::123456789012:key-value-store/")
    # CloudFront allows one store per function; the code reads it with cf.kvs().
    assert prod.one(VIEWER_FUNCTION)["keyValueStoreAssociations"] == [store["arn"]]
    assert prod.outputs["healthStoreArn"] == store["arn"]
    assert "cf.kvs()" in prod.one(VIEWER_FUNCTION)["code"]


def test_the_health_document_starts_empty_and_deployments_never_overwrite_a_published_one(prod):
    key = prod.one(HEALTH_KEY)
    assert key["keyValueStoreArn"] == prod.one(HEALTH_STORE)["arn"]
    assert key["key"] == REGION_HEALTH_KEY
    assert json.loads(key["value"]) == {"v": REGION_HEALTH_VERSION, "avoid": [], "at": "1970-01-01T00:00:00.000Z"}
    assert key.options["ignoreChanges"] == ["value"]
    # Key and value stay within the store's 1 KB item limit.
    assert key["totalSizeInBytes"] == len(REGION_HEALTH_KEY) + len(key["value"]) <= 1024
