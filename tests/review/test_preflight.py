"""review.preflight against botocore's Stubber: the real clients and request validation, AWS's
answers stubbed per region."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from components.origin import function_name_for
from review.preflight import LAMBDA_CONCURRENCY_QUOTA, main
from stack_config.loading import load_from_stack_file, stack_file_path

PROD = load_from_stack_file("prod")  # reserves 200 in every region; us-east-1 provisions up to 40
DOMAIN = PROD.edge.custom_domain or ""  # prod sets one
CERTIFICATE = PROD.edge.certificate_arn or ""


class Account:
    """Stubbed Lambda and Service Quotas clients per region: (limit, unreserved, own reservation)."""

    def __init__(self, regions: dict[str, tuple[int, int, int | None]], quota: float | None = None,
                 web_acls: list[str] | None = None, web_acl_quota: float | None = None, capacity: int = 1000,
                 distributions: list[dict[str, Any]] | None = None,
                 conflicts: tuple[str, list[dict[str, str]]] | None = None):
        self.stubbers: list[Stubber] = []
        self.clients: dict[tuple[str, str], Any] = {}
        self.capacity_requests: list[dict[str, Any]] = []
        for region, (limit, unreserved, own) in regions.items():
            lam = boto3.client("lambda", region_name=region, aws_access_key_id="x", aws_secret_access_key="y")
            quotas = boto3.client("service-quotas", region_name=region, aws_access_key_id="x",
                                  aws_secret_access_key="y")
            lam_stub, quota_stub = Stubber(lam), Stubber(quotas)
            lam_stub.add_response("get_account_settings", {"AccountLimit": {
                "ConcurrentExecutions": limit, "UnreservedConcurrentExecutions": unreserved}})
            fn = function_name_for(PROD.server_id, region, PROD.stack)
            if own is None:
                lam_stub.add_client_error("get_function_concurrency", "ResourceNotFoundException", http_status_code=404,
                                          expected_params={"FunctionName": fn})
            else:
                lam_stub.add_response("get_function_concurrency", {"ReservedConcurrentExecutions": own},
                                      {"FunctionName": fn})
            quota_stub.add_response("get_service_quota", {"Quota": {"QuotaCode": LAMBDA_CONCURRENCY_QUOTA,
                                                                    "Value": quota or float(limit)}},
                                    {"ServiceCode": "lambda", "QuotaCode": LAMBDA_CONCURRENCY_QUOTA})
            stubs = [lam_stub, quota_stub]
            if region == "us-east-1":  # WAF for CloudFront: its web ACLs and their quota live there
                waf = boto3.client("wafv2", region_name=region, aws_access_key_id="x", aws_secret_access_key="y")
                waf_stub = Stubber(waf)
                waf_stub.add_response("list_web_acls", {"WebACLs": [
                    {"Name": n, "Id": f"{i:08d}-0000-4000-8000-000000000000", "ARN": f"arn:aws:wafv2:us-east-1:"
                     f"123456789012:global/webacl/{n}/{i}", "LockToken": "t"} for i, n in enumerate(web_acls or [])]},
                    {"Scope": "CLOUDFRONT", "Limit": 100})
                waf_stub.add_response("check_capacity", {"Capacity": capacity})
                quota_stub.add_response("list_service_quotas", {"Quotas": [] if web_acl_quota is None else [
                    {"QuotaName": "Maximum web ACLs per account in WAF for CloudFront", "QuotaCode": "L-WEBACLCF",
                     "Value": web_acl_quota}]}, {"ServiceCode": "wafv2"})
                waf.meta.events.register("provide-client-params.wafv2.CheckCapacity",
                                         lambda params, **_: self.capacity_requests.append(params))
                stubs.append(waf_stub)
                self.clients[("wafv2", region)] = waf
                # CloudFront (global, asked in us-east-1): the account's distributions and, when one
                # may ask (conflicts: the asking distribution's id), the conflicting-alias look-up.
                cloudfront = boto3.client("cloudfront", region_name=region, aws_access_key_id="x",
                                          aws_secret_access_key="y")
                cloudfront_stub = Stubber(cloudfront)
                items = distributions or []
                cloudfront_stub.add_response("list_distributions", {"DistributionList": {
                    "Marker": "", "MaxItems": 100, "IsTruncated": False, "Quantity": len(items), "Items": items}}, {})
                if conflicts is not None:
                    asker, found = conflicts
                    cloudfront_stub.add_response(
                        "list_conflicting_aliases",
                        {"ConflictingAliasesList": {"MaxItems": 100, "Quantity": len(found), "Items": found}},
                        {"DistributionId": asker, "Alias": DOMAIN})
                stubs.append(cloudfront_stub)
                self.clients[("cloudfront", region)] = cloudfront
            for stub in stubs:
                stub.activate()
                self.stubbers.append(stub)
            self.clients[("lambda", region)] = lam
            self.clients[("service-quotas", region)] = quotas

    def __call__(self, service: str, region: str) -> Any:
        return self.clients[(service, region)]

    def all_called(self) -> None:
        for stub in self.stubbers:
            stub.assert_no_pending_responses()


def preflight(account: Account, *argv: str) -> tuple[int, list[str]]:
    lines: list[str] = []
    status = main(["--stack", "prod", *argv], clients=account, out=lines.append)
    return status, lines


def test_a_stack_that_fits_every_region_passes_after_reading_every_regions_settings_and_quota():
    account = Account({r: (1000, 1000, None) for r in PROD.regions})
    status, lines = preflight(account)
    assert status == 0 and lines[-1] == f"{len(PROD.regions)} of {len(PROD.regions)} regions fit"
    account.all_called()


def test_a_new_accounts_low_quota_names_the_setting_that_does_not_fit_and_what_would():
    # Given eu-west-1 at a new account's 200 concurrent executions (nothing reserved yet)
    account = Account({r: (200 if r == "eu-west-1" else 1000, 200 if r == "eu-west-1" else 1000, None)
                       for r in PROD.regions})
    status, lines = preflight(account)
    assert status == 1
    (failure,) = [line for line in lines if line.startswith("FAIL")]
    assert "eu-west-1: mcp-edge:originReservedConcurrency = 200 does not fit" in failure
    assert "Lower it to 100" in failure and "remove it (no reservation)" in failure
    assert f"({LAMBDA_CONCURRENCY_QUOTA}) in eu-west-1 of at least 300" in failure


def test_an_increase_granted_but_not_yet_applied_says_to_wait():
    account = Account({r: (200, 200, None) for r in PROD.regions}, quota=1000.0)
    status, lines = preflight(account)
    assert status == 1
    assert all("Service Quotas already grants 1000" in line for line in lines if line.startswith("FAIL"))


def test_the_origins_own_reservation_today_counts_as_available():
    # 1000 limit, 900 reserved of which 200 by the origin itself: 300 unreserved + 200 = 500, room 400
    account = Account({r: (1000, 300, 200) for r in PROD.regions})
    status, _ = preflight(account)
    assert status == 0


def test_without_a_reservation_the_provisioned_maximum_must_fit_the_unreserved_pool(tmp_path):
    stack = tmp_path / "Pulumi.prod.yaml"
    text = stack_file_path("prod").read_text()
    stack.write_text(text.replace("  mcp-edge:originReservedConcurrency: 200\n", ""))
    account = Account({r: (130, 130, None) for r in PROD.regions})  # room 30: us-east-1 provisions up to 40
    lines: list[str] = []
    assert main(["--stack", str(stack)], clients=account, out=lines.append) == 1
    (failure,) = [line for line in lines if line.startswith("FAIL")]
    assert "us-east-1: mcp-edge:originOverrides[us-east-1].provisionedMax = 40 does not fit" in failure
    assert "remove it" not in failure


def stack_with(tmp_path, **keys: object):
    """The prod stack file with these keys set (or replaced), in tmp_path."""
    import yaml

    doc = yaml.safe_load(stack_file_path("prod").read_text())
    doc["config"].update({f"mcp-edge:{k}": v for k, v in keys.items()})
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def cloudfront_quotas(account: Account, quotas: list[dict[str, Any]]) -> None:
    """CloudFront's quotas as Service Quotas lists them (read in us-east-1, after WAF's)."""
    stub = next(s for s in account.stubbers if s.client is account.clients[("service-quotas", "us-east-1")])
    stub.add_response("list_service_quotas", {"Quotas": quotas}, {"ServiceCode": "cloudfront"})


RESPONSE_TIMEOUT_QUOTA = {"QuotaName": "Response timeout per origin", "QuotaCode": "L-RESPTIME", "ServiceCode": "cloudfront"}


def test_a_read_timeout_of_60_or_less_reads_no_cloudfront_quota():
    account = Account({r: (1000, 1000, None) for r in PROD.regions})
    status, lines = preflight(account)
    assert status == 0 and not any("Response timeout" in line for line in lines)
    account.all_called()  # and nothing more was asked of the stubs


def test_a_read_timeout_above_60_fails_until_the_accounts_response_timeout_quota_allows_it(tmp_path):
    stack = stack_with(tmp_path, edgeOriginReadTimeoutSeconds=120)
    account = Account({r: (1000, 1000, None) for r in PROD.regions})
    cloudfront_quotas(account, [])  # never raised: CloudFront's default, 60
    lines: list[str] = []
    assert main(["--stack", str(stack)], clients=account, out=lines.append) == 1
    (failure,) = [line for line in lines if line.startswith("FAIL")]
    assert "mcp-edge:edgeOriginReadTimeoutSeconds = 120 does not fit" in failure
    assert "above 60 s" in failure and "'Response timeout per origin' quota to at least 120" in failure
    assert lines[-1].endswith("the edge (CloudFront) does not: fix the settings above before pulumi up")
    account.all_called()


def test_a_read_timeout_within_a_raised_response_timeout_quota_fits(tmp_path):
    stack = stack_with(tmp_path, edgeOriginReadTimeoutSeconds=90)
    account = Account({r: (1000, 1000, None) for r in PROD.regions})
    cloudfront_quotas(account, [{**RESPONSE_TIMEOUT_QUOTA, "Value": 120.0}])
    lines: list[str] = []
    assert main(["--stack", str(stack)], clients=account, out=lines.append) == 0
    assert any(line.startswith("ok    us-east-1 (CloudFront): fits: mcp-edge:edgeOriginReadTimeoutSeconds = 90")
               for line in lines)


def distribution(distribution_id: str, comment: str, aliases: list[str], certificate: str | None = None) -> dict[str, Any]:
    """A distribution as ListDistributions summarizes it (every member its model requires)."""
    from datetime import UTC, datetime

    return {
        "Id": distribution_id, "ARN": f"arn:aws:cloudfront::123456789012:distribution/{distribution_id}",
        "Status": "Deployed", "LastModifiedTime": datetime(2026, 1, 1, tzinfo=UTC),
        "DomainName": f"{distribution_id.lower()}.cloudfront.net", "Aliases": {"Quantity": len(aliases), "Items": aliases},
        "Origins": {"Quantity": 1, "Items": [{"Id": "o", "DomainName": "o.example"}]},
        "DefaultCacheBehavior": {"TargetOriginId": "o", "ViewerProtocolPolicy": "https-only"},
        "CacheBehaviors": {"Quantity": 0}, "CustomErrorResponses": {"Quantity": 0}, "Comment": comment,
        "PriceClass": "PriceClass_All", "Enabled": True,
        "ViewerCertificate": {"ACMCertificateArn": certificate} if certificate else {"CloudFrontDefaultCertificate": True},
        "Restrictions": {"GeoRestriction": {"RestrictionType": "none", "Quantity": 0}}, "WebACLId": "",
        "HttpVersion": "http2and3", "IsIPV6Enabled": True, "Staging": False,
    }


def test_the_comment_preflight_knows_the_stacks_distribution_by_is_the_programs(prod):
    from review.preflight import distribution_comment

    (dist,) = prod.of_type("aws:cloudfront/distribution:Distribution")
    assert dist["comment"] == distribution_comment(PROD)


def test_a_custom_domain_another_distribution_of_the_account_has_does_not_fit():
    # Given a staging stack's distribution that already has prod's domain
    other = distribution("E2STAGING00001", "acme-mcp MCP edge (staging)", [DOMAIN])
    account = Account({r: (1000, 1000, None) for r in PROD.regions}, distributions=[other])
    status, lines = preflight(account)
    assert status == 1
    (failure,) = [line for line in lines if line.startswith("FAIL")]
    assert f"mcp-edge:customDomain = '{DOMAIN}' does not fit" in failure
    assert "E2STAGING00001 (acme-mcp MCP edge (staging))" in failure and "CNAMEAlreadyExists" in failure
    assert lines[-1].endswith("the edge (CloudFront) does not: fix the settings above before pulumi up")
    account.all_called()


def test_the_stacks_own_distribution_holding_its_domain_fits_and_asks_cloudfront_about_other_accounts():
    own = distribution("E1PROD0000001", "acme-mcp MCP edge (prod)", [DOMAIN], CERTIFICATE)
    # CloudFront lists the stack's own distribution (id partly hidden) among the conflicts
    found = [{"Alias": DOMAIN, "DistributionId": "E1PROD*******", "AccountId": "1234******12"}]
    account = Account({r: (1000, 1000, None) for r in PROD.regions}, distributions=[own],
                      conflicts=("E1PROD0000001", found))
    status, lines = preflight(account)
    assert status == 0
    assert any("(CloudFront): fits:" in line and "conflicting-alias look-up" in line for line in lines)
    account.all_called()


def test_a_custom_domain_another_accounts_distribution_has_does_not_fit():
    # Given a distribution of this account using the stack's certificate, which may ask CloudFront
    sibling = distribution("E3OTHER000001", "another edge", ["other.acme.example"], CERTIFICATE)
    found = [{"Alias": DOMAIN, "DistributionId": "EXYZAB*******", "AccountId": "9999******99"}]
    account = Account({r: (1000, 1000, None) for r in PROD.regions}, distributions=[sibling],
                      conflicts=("E3OTHER000001", found))
    status, lines = preflight(account)
    assert status == 1
    (failure,) = [line for line in lines if line.startswith("FAIL")]
    assert "distribution EXYZAB******* of account 9999******99" in failure and "CNAMEAlreadyExists" in failure
    account.all_called()


def test_before_any_distribution_may_ask_cloudfront_the_preflight_says_other_accounts_were_not_looked_up():
    account = Account({r: (1000, 1000, None) for r in PROD.regions})
    status, lines = preflight(account)
    assert status == 0
    (line,) = [line for line in lines if "(CloudFront)" in line]
    assert "other accounts not looked up" in line
    account.all_called()


def test_without_credentials_it_says_what_it_would_check_and_exits_non_zero():
    lines: list[str] = []
    status = main(["--stack", "prod"], credentials=lambda: False, out=lines.append)
    assert status == 2
    assert lines[0].startswith("error: no AWS credentials") and "lambda:GetAccountSettings" in lines[0]
    assert "Nothing was checked" in lines[0]
    checked = lines[1:1 + len(PROD.regions)]  # then the web ACL (see the WAF tests) and the custom domain
    assert len(lines) == 1 + len(PROD.regions) + 2
    assert "ListDistributions and ListConflictingAliases" in lines[-1] and DOMAIN in lines[-1]
    for region, line in zip(PROD.regions, checked, strict=True):
        assert line.strip().startswith(f"{region}: GetAccountSettings")
        assert function_name_for(PROD.server_id, region, PROD.stack) in line


def test_an_aws_refusal_is_reported_not_raised():
    lam = boto3.client("lambda", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(lam)
    stub.add_client_error("get_account_settings", "AccessDeniedException", http_status_code=403)
    stub.activate()
    lines: list[str] = []
    assert main(["--stack", "prod"], clients=lambda service, region: lam, out=lines.append) == 2
    assert "AccessDeniedException" in lines[-1] and "Nothing was concluded" in lines[-1]


@pytest.mark.parametrize("stack", ["nonexistent"])
def test_a_missing_stack_file_is_a_clear_error(stack):
    lines: list[str] = []
    assert main(["--stack", stack], credentials=lambda: True, out=lines.append) == 2
    assert "does not exist" in lines[0]


# --- WAF (the web ACL in front of the distribution) ------------------------------------------

FITS: dict[str, tuple[int, int, int | None]] = {r: (1000, 1000, None) for r in PROD.regions}


def test_the_web_acl_fits_and_its_capacity_is_asked_for_the_stacks_own_rules():
    from edge.firewall_rules import render_web_acl

    account = Account(FITS, web_acls=["other"], capacity=1203)
    status, lines = preflight(account)
    assert status == 0, lines
    assert any("us-east-1 (WAF): fits: with the web ACL acme-mcp-prod-edge the account has 2 web ACLs for "
               "CloudFront of 100 (WAF's documented default" in line for line in lines), lines
    assert any("rules need 1203 of 5000 WCUs (within the 1500" in line for line in lines), lines
    (request,) = account.capacity_requests
    assert request["Scope"] == "CLOUDFRONT"
    assert PROD.firewall is not None
    assert [r["Name"] for r in request["Rules"]] == [r["name"] for r in render_web_acl(PROD.firewall).rules]
    account.all_called()


def test_an_account_at_its_web_acl_quota_is_told_what_to_do_unless_the_stacks_acl_exists():
    full = Account(FITS, web_acls=[f"acl-{i}" for i in range(5)], web_acl_quota=5.0)
    status, lines = preflight(full)
    assert status == 1 and lines[-1].endswith("the web ACL does not: fix the settings above before pulumi up")
    (failure,) = [line for line in lines if line.startswith("FAIL")]
    assert "has 5 web ACLs for CloudFront, the quota is 5 (Service Quotas wafv2 L-WEBACLCF" in failure
    assert "mcp-edge:wafEnabled" in failure
    updating = Account(FITS, web_acls=[*(f"acl-{i}" for i in range(4)), "acme-mcp-prod-edge"], web_acl_quota=5.0)
    assert preflight(updating)[0] == 0


def test_rules_over_wafs_5000_wcus_name_the_keys_to_change():
    status, lines = preflight(Account(FITS, capacity=5200))
    (failure,) = [line for line in lines if line.startswith("FAIL")]
    assert status == 1 and "need 5200 WCUs, WAF allows 5000" in failure and "mcp-edge:wafToolLimits" in failure


def test_without_credentials_it_says_it_would_check_the_web_acl():
    lines: list[str] = []
    assert main(["--stack", "prod"], credentials=lambda: False, out=lines.append) == 2
    assert any("wafv2:CheckCapacity" in line for line in lines)
    assert any(line.strip().startswith("us-east-1 (WAF, scope CLOUDFRONT): ListWebACLs") and "5000 WCUs" in line
               for line in lines), lines
