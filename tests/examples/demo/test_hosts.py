"""The Host policy: Function URL hosts of the origin's own region, the distribution
and the custom domain; nothing that merely contains or ends like them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from functions.mcp_server.hosts import HostPattern, HostPolicy, PolicyAllowList, origin_allowed

LAMBDA = HostPolicy(["*.lambda-url.us-east-1.on.aws", "*.cloudfront.net", "mcp.acme.example"])
LOCAL = HostPolicy(["127.0.0.1:*", "localhost:*", "[::1]:*"])
label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)
regions = st.sampled_from(["us-east-1", "eu-west-1", "ap-southeast-1", "ap-northeast-1", "us-east-2"])


@given(url_id=st.from_regex(r"[a-z0-9]{32}", fullmatch=True))
def test_any_function_url_host_of_the_region_is_allowed(url_id: str):
    assert LAMBDA.allows(f"{url_id}.lambda-url.us-east-1.on.aws")
    assert LAMBDA.allows(f"{url_id}.LAMBDA-URL.us-east-1.on.aws")  # hosts are case-insensitive


@given(url_id=st.from_regex(r"[a-z0-9]{32}", fullmatch=True), region=regions)
def test_other_regions_function_urls_are_refused(url_id: str, region: str):
    assert LAMBDA.allows(f"{url_id}.lambda-url.{region}.on.aws") == (region == "us-east-1")


@given(prefix=label, evil=label)
def test_suffix_lookalikes_are_refused(prefix: str, evil: str):
    assert not LAMBDA.allows(f"{prefix}.lambda-url.us-east-1.on.aws.{evil}.example")
    assert not LAMBDA.allows(f"{prefix}lambda-url.us-east-1.on.aws")
    assert not LAMBDA.allows(f"{prefix}.mcp.acme.example")
    assert not LAMBDA.allows(f"{prefix}-cloudfront.net")


def test_bare_domains_ports_and_empty_hosts_are_refused():
    for host in ("lambda-url.us-east-1.on.aws", "cloudfront.net", "x.cloudfront.net:443", "mcp.acme.example:8443",
                 "", None, ".cloudfront.net", "a..cloudfront.net", "-a.cloudfront.net", "a_b.cloudfront.net"):
        assert not LAMBDA.allows(host), host
    assert LAMBDA.allows("mcp.acme.example")
    assert LAMBDA.allows("d111111abcdef8.cloudfront.net")


@given(port=st.integers(min_value=1, max_value=65535))
def test_loopback_patterns_allow_any_port_but_not_bare_or_other_hosts(port: int):
    assert LOCAL.allows(f"127.0.0.1:{port}")
    assert LOCAL.allows(f"localhost:{port}")
    assert LOCAL.allows(f"[::1]:{port}")
    assert not LOCAL.allows(f"127.0.0.2:{port}")
    assert not LOCAL.allows(f"localhost.evil.example:{port}")


def test_explicit_port_patterns():
    pattern = HostPattern.parse("api.example:8443")
    assert pattern.matches("api.example:8443")
    assert not pattern.matches("api.example")
    assert not pattern.matches("api.example:443")


def test_sdk_allow_list_uses_the_policy_for_membership():
    allowed = PolicyAllowList(LAMBDA.raw, LAMBDA.allows)
    assert "abc.lambda-url.us-east-1.on.aws" in allowed
    assert "evil.example" not in allowed
    assert 42 not in allowed
    assert list(allowed) == list(LAMBDA.raw)


def test_origin_header_policy():
    assert origin_allowed(("*",), "https://anything.example")
    assert origin_allowed(("https://app.example",), None)
    assert origin_allowed(("https://app.example",), "https://app.example")
    assert not origin_allowed(("https://app.example",), "https://evil.example")
