"""The domain catalog and Server Cards (SEP-2127 at the revision the module names): every server's
name, endpoint and protected-resource metadata URL, at both catalog paths and each card's reserved
location, with the draft's caching and CORS headers."""

from __future__ import annotations

import json

import pytest

from edge.server_catalog import (
    AI_CATALOG_PATH,
    AI_CATALOG_TYPE,
    CARD_NAME,
    CARD_SCHEMA,
    LEGACY_CATALOG_PATH,
    SERVER_CARD_TYPE,
    SERVER_CARDS_REVISION,
    CatalogServer,
    card,
    publisher_prefix,
    render_discovery,
)

DOMAIN = "mcp.acme.example"
SERVERS = [CatalogServer("github", "/github/mcp", "1.2.0", "GitHub tools"),
           CatalogServer("docs", "/docs/mcp", "0.3.1", "Docs search")]


def test_the_catalog_lists_every_servers_name_endpoint_and_metadata_url():
    docs = render_discovery(DOMAIN, SERVERS)
    catalog = json.loads(docs[AI_CATALOG_PATH].body)
    assert catalog["specVersion"] == "1.0"
    entries = catalog["entries"]
    assert [e["identifier"] for e in entries] == ["urn:air:mcp.acme.example:mcp:github", "urn:air:mcp.acme.example:mcp:docs"]
    assert {e["type"] for e in entries} == {SERVER_CARD_TYPE}
    github = entries[0]["data"]
    assert github["$schema"] == CARD_SCHEMA and github["name"] == "example.acme.mcp/github"
    assert github["remotes"] == [{"type": "streamable-http", "url": "https://mcp.acme.example/github/mcp"}]
    assert github["_meta"] == {"example.acme.mcp/protected-resource-metadata":
                               "https://mcp.acme.example/.well-known/oauth-protected-resource/github/mcp"}
    assert (github["version"], github["description"]) == ("1.2.0", "GitHub tools")


def test_the_catalog_is_served_at_the_drafts_path_and_the_earlier_one_and_each_card_at_its_url():
    docs = render_discovery(DOMAIN, SERVERS)
    assert set(docs) == {AI_CATALOG_PATH, LEGACY_CATALOG_PATH, "/github/mcp/server-card", "/docs/mcp/server-card"}
    assert docs[AI_CATALOG_PATH] == docs[LEGACY_CATALOG_PATH]
    assert docs[AI_CATALOG_PATH].content_type == AI_CATALOG_TYPE
    assert json.loads(docs["/docs/mcp/server-card"].body) == json.loads(docs[AI_CATALOG_PATH].body)["entries"][1]["data"]
    assert docs["/docs/mcp/server-card"].content_type == SERVER_CARD_TYPE
    assert "8924e08" in SERVER_CARDS_REVISION


def test_every_answer_carries_the_drafts_cors_and_caching_headers_and_a_strong_etag():
    docs = render_discovery(DOMAIN, SERVERS)
    headers = docs[AI_CATALOG_PATH].headers
    assert headers["access-control-allow-origin"] == "*" and headers["cache-control"] == "public, max-age=3600"
    assert headers["access-control-expose-headers"] == "ETag"
    assert headers["etag"].startswith('"') and not headers["etag"].startswith('W/')
    changed = render_discovery(DOMAIN, [SERVERS[0]])
    assert changed[AI_CATALOG_PATH].etag != docs[AI_CATALOG_PATH].etag
    assert changed["/github/mcp/server-card"].etag == docs["/github/mcp/server-card"].etag


@pytest.mark.parametrize("domain", ["x.mcp.io", "tools.modelcontextprotocol.org"])
def test_a_domain_whose_reverse_is_a_meta_prefix_mcp_reserves_is_refused(domain: str):
    with pytest.raises(ValueError, match="a _meta prefix MCP reserves"):
        card(domain, SERVERS[0])


def test_a_domain_ending_in_mcp_reversed_is_not_reserved():
    assert publisher_prefix("mcp.acme.example") == "example.acme.mcp"
    assert card("mcp.acme.example", SERVERS[0])["name"] == "example.acme.mcp/github"


def test_fifty_servers_with_the_longest_names_fit_a_card_name_each_and_stay_small():
    domain = ("d" * 60 + ".") * 3 + "example"  # 190 characters
    servers = [CatalogServer(f"{'n' * 28}{i:02d}", f"/{'n' * 28}{i:02d}/mcp", "1.0.0", "x" * 100) for i in range(50)]
    with pytest.raises(ValueError, match="within 200 characters"):
        render_discovery(domain, servers)
    docs = render_discovery("mcp.acme.example", servers)
    assert all(CARD_NAME.fullmatch(json.loads(d.body)["name"]) for p, d in docs.items() if p.endswith("/server-card"))
    # What the gate carries for 50 servers (about 94 KB): every card twice (catalog and card), the catalog twice.
    assert sum(len(d.body) for d in docs.values()) < 100_000
