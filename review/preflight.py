"""Before `pulumi up`: does the stack's Lambda concurrency fit the account's quotas?

    .venv/bin/python -m review.preflight --stack prod

New accounts start with low Lambda concurrency quotas, and Lambda refuses a reserved
concurrency that leaves fewer than 100 unreserved executions in the region. For every
origin region of the stack this reads, with read-only credentials:

- ``lambda:GetAccountSettings``: the region's concurrency limit and what is unreserved;
- ``lambda:GetFunctionConcurrency`` on the stack's own origin function, whose current
  reservation (if it exists already) is freed by the update;
- ``servicequotas:GetServiceQuota`` for Lambda's *Concurrent executions* quota
  (``L-B99A9384``), the value an increase request raises;

and says which setting does not fit (``originReservedConcurrency``, or
``originProvisionedMax`` when nothing is reserved, per region after ``originOverrides``),
by how much, and what to change.

With ``wafEnabled`` (the default) it checks the web ACL against WAF's quotas in us-east-1,
where CloudFront's web ACLs live:

- ``wafv2:ListWebACLs`` (scope CLOUDFRONT): the account's web ACLs, against the quota
  ``servicequotas:ListServiceQuotas`` reports for WAF (the documented default, 100 per
  account, when Service Quotas lists none); the stack's own web ACL, if it exists, takes
  no new one;
- the web ACL's rate-based rules against WAF's fixed 10 per web ACL (from the rendered rules);
- ``wafv2:CheckCapacity`` on the stack's rendered rules: their WCUs against WAF's fixed
  5,000 per web ACL (and whether they pass 1,500, above which WAF bills every request more).

With ``customDomain`` set it looks for the domain on other CloudFront distributions, which
would make CloudFront refuse it (``CNAMEAlreadyExists``: an alternate domain name belongs to
one distribution, in any account):

- ``cloudfront:ListDistributions``: the account's distributions other than the stack's own
  (its comment names the server and the stack) that have the domain as an alias;
- ``cloudfront:ListConflictingAliases`` for the domain, through a distribution of the account
  that may ask about it (CloudFront requires one whose certificate covers the domain: the
  stack's own, or one using ``certificateArn``): the domain on distributions of other
  accounts. Before any such distribution exists it says that look-up was not possible.

With ``edgeOriginReadTimeoutSeconds`` above 60 it reads CloudFront's quotas
(``servicequotas:ListServiceQuotas``, service ``cloudfront``, us-east-1): CloudFront refuses a
response timeout above the account's "Response timeout per origin" (60 unless raised).

What it does not check: whether the stack's server is stateless and accepts the Function URL's
Host. Those are behaviours, and only running the server tells them (the probes and the local
twin do, with the fix named: ``functions/probe/advice.py``). Reading the server's source for
``stateless_http`` would be neither cheap nor reliable: the setting may come from an
environment variable (``FASTMCP_STATELESS_HTTP``), a settings object or another call
(``mcp.run``, ``http_app``, ``streamable_http_app``); the TypeScript SDK is stateless when
``sessionIdGenerator`` is left out; and a server may be any language, or an image.

Exit status: 0 everything fits, 1 a setting does not fit, 2 it could not check (no
credentials, or AWS refused a call): it then lists what it would have checked.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from components.edge_firewall import WAF_REGION, WEB_ACL_NAME
from components.naming import physical_name
from components.origin import function_name_for
from edge.firewall_rules import MAX_RATE_BASED_RULES, render_web_acl
from edge.protocol import EDGE_READ_TIMEOUT_WITHOUT_QUOTA_INCREASE_S
from edge.regions import EDGE_CONTROL_REGION
from edge.waf_capacity import BILLED_WCUS, MAX_WCUS  # per web ACL, fixed; above BILLED_WCUS billed more
from review.errors import EXIT_ERROR, add_debug_flag, run_reporting_errors
from stack_config.keys import PROJECT
from stack_config.loading import load_from_stack_file
from stack_config.model import StackConfig

# Lambda keeps this many executions unreserved in every region (PutFunctionConcurrency).
MIN_UNRESERVED = 100
LAMBDA_CONCURRENCY_QUOTA = "L-B99A9384"  # Service Quotas: AWS Lambda "Concurrent executions"
# WAF's quotas per account and web ACL (https://docs.aws.amazon.com/waf/latest/developerguide/limits.html).
DEFAULT_WEB_ACLS = 100  # per account and Region (us-east-1 for CloudFront), adjustable
# CloudFront's quotas are global, read in us-east-1; "Response timeout per origin" is 60 s by default.
CLOUDFRONT_QUOTA_REGION = EDGE_CONTROL_REGION
READ_ONLY_ACTIONS = ("lambda:GetAccountSettings", "lambda:GetFunctionConcurrency", "servicequotas:GetServiceQuota",
                     "wafv2:ListWebACLs", "wafv2:CheckCapacity", "servicequotas:ListServiceQuotas",
                     "cloudfront:ListDistributions", "cloudfront:ListConflictingAliases")

Clients = Callable[[str, str], Any]  # (service, region) -> a boto3 client


@dataclass(frozen=True)
class Finding:
    region: str
    fits: bool
    message: str


def _setting(config: StackConfig, region: str, field: str, key: str) -> str:
    """The key that sets ``field`` for ``region``: its override when that differs from the base."""
    overridden = getattr(config.origin_for(region), field) != getattr(config.origin, field)
    return f"{PROJECT}:originOverrides[{region}].{key}" if overridden else f"{PROJECT}:origin{key[0].upper()}{key[1:]}"


def would_check(config: StackConfig) -> list[str]:
    """What the preflight reads and compares, region by region (printed without credentials)."""
    lines = []
    for region in config.regions:
        sizing = config.origin_for(region)
        fn = function_name_for(config.server_id, region, config.stack)
        want = (f"reserved {sizing.reserved_concurrency} + {MIN_UNRESERVED} unreserved" if sizing.reserved_concurrency
                else f"provisioned up to {sizing.provisioned_max} + {MIN_UNRESERVED} unreserved (nothing reserved)")
        lines.append(f"{region}: GetAccountSettings, GetFunctionConcurrency({fn}), Service Quotas lambda "
                     f"{LAMBDA_CONCURRENCY_QUOTA}: needs {want} within the region's concurrency")
    if config.firewall is not None:
        rules = render_web_acl(config.firewall).rules
        lines.append(f"{WAF_REGION} (WAF, scope CLOUDFRONT): ListWebACLs and Service Quotas wafv2: needs room for the "
                     f"web ACL {web_acl_name(config)} (default quota {DEFAULT_WEB_ACLS} per account); CheckCapacity on "
                     f"its {len(rules)} rules: needs at most {MAX_WCUS} WCUs (billed more above {BILLED_WCUS})")
    if config.edge.custom_domain:
        lines.append(f"{CLOUDFRONT_QUOTA_REGION} (CloudFront): ListDistributions and ListConflictingAliases: needs "
                     f"{config.edge.custom_domain} ({PROJECT}:customDomain) on no other distribution")
    if config.edge.origin_read_timeout_s > EDGE_READ_TIMEOUT_WITHOUT_QUOTA_INCREASE_S:
        lines.append(f"{CLOUDFRONT_QUOTA_REGION} (CloudFront): Service Quotas cloudfront 'Response timeout per origin': "
                     f"needs at least {config.edge.origin_read_timeout_s} s ({PROJECT}:edgeOriginReadTimeoutSeconds)")
    return lines


def _current_reservation(client: Any, function_name: str) -> int:
    try:
        return int(client.get_function_concurrency(FunctionName=function_name).get("ReservedConcurrentExecutions") or 0)
    except client.exceptions.ResourceNotFoundException:
        return 0  # the function does not exist yet


def check_region(config: StackConfig, region: str, clients: Clients) -> Finding:
    sizing = config.origin_for(region)
    lam = clients("lambda", region)
    limits = lam.get_account_settings()["AccountLimit"]
    limit, unreserved = int(limits["ConcurrentExecutions"]), int(limits["UnreservedConcurrentExecutions"])
    own = _current_reservation(lam, function_name_for(config.server_id, region, config.stack))
    quota = clients("service-quotas", region).get_service_quota(
        ServiceCode="lambda", QuotaCode=LAMBDA_CONCURRENCY_QUOTA)["Quota"]["Value"]
    available = unreserved + own  # what the origin may take once its current reservation is freed
    room = available - MIN_UNRESERVED
    figures = (f"account limit {limit}, {unreserved} unreserved (+{own} the origin reserves today), "
               f"quota {LAMBDA_CONCURRENCY_QUOTA} = {int(quota)}")
    if sizing.reserved_concurrency:
        setting, wanted = _setting(config, region, "reserved_concurrency", "reservedConcurrency"), sizing.reserved_concurrency
        what = "reserves"
    else:
        setting, wanted = _setting(config, region, "provisioned_max", "provisionedMax"), sizing.provisioned_max
        what = "may provision (nothing reserved)"
    if wanted <= room:
        return Finding(region, True, f"{region}: fits: the origin {what} {wanted} of {room} available; {figures}")
    needed = limit + wanted - room
    quota_advice = (
        f"or wait: Service Quotas already grants {int(quota)} ({LAMBDA_CONCURRENCY_QUOTA}), which the account "
        "limit reaches once the increase is applied" if quota >= needed else
        f"or request Lambda 'Concurrent executions' ({LAMBDA_CONCURRENCY_QUOTA}) in {region} of at least {needed}")
    return Finding(region, False, (
        f"{region}: {setting} = {wanted} does not fit: the origin {what} {wanted}, but only {max(room, 0)} can be "
        f"taken while leaving {MIN_UNRESERVED} unreserved ({figures}). Lower it to {max(room, 0)}"
        + (", remove it (no reservation)" if sizing.reserved_concurrency else "") + f", {quota_advice}"))


def web_acl_name(config: StackConfig) -> str:
    return physical_name(config.server_id, "edge", limit=WEB_ACL_NAME, stack=config.stack)


def _web_acls(waf: Any) -> list[str]:
    names, marker = [], None
    while True:
        page = waf.list_web_acls(Scope="CLOUDFRONT", Limit=100, **({"NextMarker": marker} if marker else {}))
        names += [acl["Name"] for acl in page.get("WebACLs", [])]
        marker = page.get("NextMarker")
        if not marker or not page.get("WebACLs"):
            return names


def _web_acl_quota(quotas: Any) -> tuple[int, str]:
    """(quota, where it came from): Service Quotas' figure for CloudFront web ACLs, or the default."""
    pages = quotas.get_paginator("list_service_quotas").paginate(ServiceCode="wafv2")
    for quota in (q for page in pages for q in page.get("Quotas", [])):
        name = quota.get("QuotaName", "")
        if "web acl" in name.lower() and "cloudfront" in name.lower():
            return int(quota["Value"]), f"Service Quotas wafv2 {quota.get('QuotaCode')} ({name!r})"
    return DEFAULT_WEB_ACLS, "WAF's documented default (Service Quotas lists no CloudFront web ACL quota here)"


def check_firewall(config: StackConfig, clients: Clients) -> list[Finding]:
    """The stack's web ACL against WAF's quotas in us-east-1 (see the module docstring)."""
    from review.contracts.constraints import service_model
    from review.contracts.firewall import to_api

    assert config.firewall is not None
    where, name = f"{WAF_REGION} (WAF)", web_acl_name(config)
    waf = clients("wafv2", WAF_REGION)
    findings = []
    existing = _web_acls(waf)
    quota, source = _web_acl_quota(clients("service-quotas", WAF_REGION))
    if name in existing:
        findings.append(Finding(where, True, f"{where}: fits: the web ACL {name} exists already ({len(existing)} web "
                                             f"ACLs for CloudFront; quota {quota} from {source})"))
    elif len(existing) + 1 <= quota:
        findings.append(Finding(where, True, f"{where}: fits: with the web ACL {name} the account has "
                                             f"{len(existing) + 1} web ACLs for CloudFront of {quota} ({source})"))
    else:
        findings.append(Finding(where, False, (
            f"{where}: the web ACL {name} does not fit: the account has {len(existing)} web ACLs for CloudFront, the "
            f"quota is {quota} ({source}). Delete an unused one, request an increase of WAF's web ACLs for "
            f"CloudFront in {WAF_REGION}, or set {PROJECT}:wafEnabled to false")))
    rules = render_web_acl(config.firewall).rules
    rate_based = sum(1 for r in rules if "rate_based_statement" in r["statement"])
    if rate_based > MAX_RATE_BASED_RULES:
        findings.append(Finding(where, False, (
            f"{where}: the web ACL has {rate_based} rate-based rules, WAF allows {MAX_RATE_BASED_RULES}: list fewer "
            f"tools in {PROJECT}:wafToolLimits")))
    capacity = int(waf.check_capacity(Scope="CLOUDFRONT", Rules=to_api(service_model("wafv2").shape_for("Rules"),
                                                                         rules))["Capacity"])
    if capacity > MAX_WCUS:
        findings.append(Finding(where, False, (
            f"{where}: the web ACL's {len(rules)} rules need {capacity} WCUs, WAF allows {MAX_WCUS} per web ACL: "
            f"list fewer tools in {PROJECT}:wafToolLimits or set {PROJECT}:wafManagedRules to false")))
    else:
        billed = (f"; above {BILLED_WCUS}, WAF bills every request more" if capacity > BILLED_WCUS else
                  f" (within the {BILLED_WCUS} the base request price covers)")
        findings.append(Finding(where, True, f"{where}: fits: the web ACL's {len(rules)} rules need {capacity} of "
                                             f"{MAX_WCUS} WCUs{billed}"))
    return findings


def _response_timeout_quota(quotas: Any) -> tuple[int, str]:
    """(seconds, where it came from): the account's CloudFront "Response timeout per origin", or
    CloudFront's default when Service Quotas lists none for the account."""
    pages = quotas.get_paginator("list_service_quotas").paginate(ServiceCode="cloudfront")
    for quota in (q for page in pages for q in page.get("Quotas", [])):
        name = quota.get("QuotaName", "")
        if "response timeout" in name.lower():
            return int(quota["Value"]), f"Service Quotas cloudfront {quota.get('QuotaCode')} ({name!r})"
    return EDGE_READ_TIMEOUT_WITHOUT_QUOTA_INCREASE_S, (
        "CloudFront's default (Service Quotas lists no raised 'Response timeout per origin' for the account)")


def check_read_timeout(config: StackConfig, clients: Clients) -> list[Finding]:
    """edgeOriginReadTimeoutSeconds above 60 against the account's CloudFront quota; nothing
    to read at 60 or less (every account may use it)."""
    wanted = config.edge.origin_read_timeout_s
    if wanted <= EDGE_READ_TIMEOUT_WITHOUT_QUOTA_INCREASE_S:
        return []
    where, key = f"{CLOUDFRONT_QUOTA_REGION} (CloudFront)", f"{PROJECT}:edgeOriginReadTimeoutSeconds"
    quota, source = _response_timeout_quota(clients("service-quotas", CLOUDFRONT_QUOTA_REGION))
    if wanted <= quota:
        return [Finding(where, True, f"{where}: fits: {key} = {wanted} within the response timeout quota {quota} s "
                                     f"({source})")]
    return [Finding(where, False, (
        f"{where}: {key} = {wanted} does not fit: CloudFront refuses an origin response timeout above {quota} s "
        f"({source}). Lower it to at most {quota}, or request an increase of CloudFront's 'Response timeout per "
        f"origin' quota to at least {wanted} (Service Quotas, {CLOUDFRONT_QUOTA_REGION})"))]


def distribution_comment(config: StackConfig) -> str:
    """The comment the stack's distribution carries (components/edge.py): how its own is told apart."""
    return f"{config.server_id} MCP edge ({config.stack})"


def _aliases(distribution: dict[str, Any]) -> list[str]:
    return [a.lower() for a in (distribution.get("Aliases") or {}).get("Items") or []]


def _masked_match(masked: str, distribution_id: str) -> bool:
    """ListConflictingAliases hides part of an id with ``*``: does ``distribution_id`` fit it?"""
    return len(masked) == len(distribution_id) and all(m in ("*", c) for m, c in zip(masked, distribution_id,
                                                                                      strict=True))


def _domain_taken(where: str, key: str, holder: str, remedy: str) -> Finding:
    return Finding(where, False, f"{where}: {key} does not fit: {holder} (CNAMEAlreadyExists). Give this stack a "
                                 f"domain of its own, or {remedy}")


def check_custom_domain(config: StackConfig, clients: Clients) -> list[Finding]:
    """customDomain on no other distribution, in this account or (when CloudFront lets the
    account ask) any other; see the module docstring."""
    domain = config.edge.custom_domain
    if not domain:
        return []
    where, key = f"{CLOUDFRONT_QUOTA_REGION} (CloudFront)", f"{PROJECT}:customDomain = {domain!r}"
    cloudfront = clients("cloudfront", CLOUDFRONT_QUOTA_REGION)
    distributions = [d for page in cloudfront.get_paginator("list_distributions").paginate()
                     for d in (page.get("DistributionList") or {}).get("Items") or []]
    own = [d for d in distributions if d.get("Comment") == distribution_comment(config)]
    holders = [d for d in distributions if d not in own and domain.lower() in _aliases(d)]
    if holders:
        named = ", ".join(f"{d['Id']} ({d.get('Comment') or 'no comment'})" for d in holders)
        return [_domain_taken(where, key, f"the account's distribution {named} has it as an alternate domain name, "
                              "and CloudFront gives one to a single distribution",
                              "remove the domain from that distribution, or leave customDomain and certificateArn unset")]
    asker = own or [d for d in distributions
                    if (d.get("ViewerCertificate") or {}).get("ACMCertificateArn") == config.edge.certificate_arn]
    if not asker:
        return [Finding(where, True, (
            f"{where}: fits in this account: no other of its {len(distributions)} distributions has {domain}; other "
            f"accounts not looked up (CloudFront's ListConflictingAliases needs a distribution of this account whose "
            f"certificate covers the domain, and none uses {PROJECT}:certificateArn yet): CloudFront refuses the "
            "domain at deploy if another account's distribution has it"))]
    ours = {d["Id"] for d in distributions}
    answer = cloudfront.list_conflicting_aliases(DistributionId=asker[0]["Id"], Alias=domain)
    conflicts = [c for c in (answer.get("ConflictingAliasesList") or {}).get("Items") or []
                 if str(c.get("Alias", "")).lower() == domain.lower()
                 and not any(_masked_match(str(c.get("DistributionId", "")), mine) for mine in ours)]
    if conflicts:
        named = ", ".join(f"{c.get('DistributionId')} of account {c.get('AccountId')}" for c in conflicts)
        return [_domain_taken(where, key, f"distribution {named} (ids partly hidden by CloudFront) has it as an "
                              "alternate domain name", "have that account remove it (or move it: CloudFront's "
                              "AssociateAlias, with a TXT record proving the domain is yours)")]
    return [Finding(where, True, f"{where}: fits: {domain} is on no other distribution (this account's "
                                 f"{len(distributions)}, and CloudFront's conflicting-alias look-up)")]


def has_credentials() -> bool:
    import boto3

    return boto3.Session().get_credentials() is not None


def default_clients(service: str, region: str) -> Any:
    import boto3

    return boto3.client(service, region_name=region)  # type: ignore[call-overload]


def run(config: StackConfig, clients: Clients, out: Callable[[str], None] = print) -> int:
    findings = [check_region(config, region, clients) for region in config.regions]
    firewall = check_firewall(config, clients) if config.firewall is not None else []
    edge = check_custom_domain(config, clients) + check_read_timeout(config, clients)
    for finding in findings + firewall + edge:
        out(("ok    " if finding.fits else "FAIL  ") + finding.message)
    bad = [f for f in findings if not f.fits]
    waf_bad = any(not f.fits for f in firewall)
    edge_bad = any(not f.fits for f in edge)
    out(f"{len(findings) - len(bad)} of {len(findings)} regions fit" + ("; the web ACL does not" if waf_bad else "")
        + ("; the edge (CloudFront) does not" if edge_bad else "")
        + (": fix the settings above before pulumi up" if bad or waf_bad or edge_bad else ""))
    return 1 if bad or waf_bad or edge_bad else 0


def main(argv: Sequence[str] | None = None, *, clients: Clients | None = None,
         credentials: Callable[[], bool] = has_credentials, out: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(prog="python -m review.preflight", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", default="prod", help="stack name (Pulumi.<stack>.yaml) or a stack file's path")
    add_debug_flag(parser)
    args = parser.parse_args(argv)

    def work() -> int:
        config = load_from_stack_file(args.stack)
        if clients is None and not credentials():
            out(f"error: no AWS credentials: the preflight of stack {config.stack!r} needs read-only credentials "
                f"allowed {', '.join(READ_ONLY_ACTIONS)} (AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or a "
                "role). Nothing was checked. With credentials it would check:")
            for line in would_check(config):
                out(f"  {line}")
            return EXIT_ERROR
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return run(config, clients or default_clients, out)
        except (BotoCoreError, ClientError) as exc:
            out(f"error: AWS refused a preflight call ({exc}); it needs {', '.join(READ_ONLY_ACTIONS)}. "
                "Nothing was concluded.")
            return EXIT_ERROR

    return run_reporting_errors("review.preflight", work, debug=args.debug, out=out)


if __name__ == "__main__":
    raise SystemExit(main())
