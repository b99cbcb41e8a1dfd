"""The domain's MCP server catalog and each server's Server Card, rendered at deploy time.

MCP Server Cards (SEP-2127) are a draft on the Extensions Track, kept in
``modelcontextprotocol/experimental-ext-server-card``. This follows its ``docs/discovery.md``
at commit ``8924e08`` (2026-07-24), ``SERVER_CARDS_REVISION``:

- the domain's catalog is an AI Catalog, ``{"specVersion": "1.0", "entries": [...]}``, at
  ``/.well-known/ai-catalog.json`` (``application/ai-catalog+json``); each entry has an
  ``identifier`` (``urn:air:{publisher}:mcp:{name}``), the ``type``
  ``application/mcp-server-card+json`` and the card inline (``data``), so one fetch gives every
  server. The draft before commit ``1491bd2`` (2026-07-20) put the catalog at
  ``/.well-known/mcp/catalog.json``; the edge serves the same document there too;
- a card: ``$schema`` (the v1 schema URL), ``name`` (reverse DNS, one '/'), ``version``,
  ``description``, ``remotes`` (``streamable-http`` at the server's public URL); the card has
  no member for the protected resource metadata, so ``_meta`` carries its URL under the
  publisher's reverse-DNS prefix (prefixes with an ``mcp`` or ``modelcontextprotocol`` label
  followed by another are reserved to MCP);
- each card also at the reserved ``<streamable-http-url>/server-card``;
- every answer with ``Access-Control-Allow-Origin: *``, ``Cache-Control: public,
  max-age=3600`` and a strong ``ETag``.

Pure: the gate package will carry the rendered documents (docs/design/many-servers.md).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from edge.viewer_function import PROTECTED_RESOURCE_METADATA

SERVER_CARDS_REVISION = "modelcontextprotocol/experimental-ext-server-card@8924e08 (2026-07-24)"
AI_CATALOG_PATH = "/.well-known/ai-catalog.json"
LEGACY_CATALOG_PATH = "/.well-known/mcp/catalog.json"
SERVER_CARD_SUFFIX = "/server-card"
AI_CATALOG_TYPE = "application/ai-catalog+json"
SERVER_CARD_TYPE = "application/mcp-server-card+json"
CARD_SCHEMA = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
CATALOG_SPEC_VERSION = "1.0"
CARD_NAME = re.compile(r"[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+")
MAX_CARD_NAME = 200
# A _meta prefix MCP reserves: any labels, then mcp or modelcontextprotocol, then a label.
RESERVED_META_PREFIX = re.compile(r"(?:[A-Za-z0-9-]+\.)*(?:mcp|modelcontextprotocol)\.[A-Za-z0-9-]+", re.IGNORECASE)
HEADERS = {
    "access-control-allow-origin": "*",
    "access-control-allow-methods": "GET",
    "access-control-allow-headers": "Content-Type, If-None-Match",
    "access-control-expose-headers": "ETag",
    "cache-control": "public, max-age=3600",
}


@dataclass(frozen=True)
class CatalogServer:
    name: str
    """The server's name in the stack (``mcp-edge:servers``), its path segment."""
    public_path: str
    """``/<name>/mcp``."""
    version: str
    description: str


@dataclass(frozen=True)
class Document:
    """One answer the edge gives without an origin: its media type, body and headers."""

    content_type: str
    body: str

    @property
    def etag(self) -> str:
        return '"' + hashlib.sha256(self.body.encode("utf-8")).hexdigest()[:32] + '"'

    @property
    def headers(self) -> dict[str, str]:
        return {"content-type": self.content_type, "etag": self.etag, **HEADERS}


def publisher_prefix(domain: str) -> str:
    """The domain in reverse DNS (``mcp.acme.example`` -> ``example.acme.mcp``): the cards'
    namespace and their ``_meta`` prefix."""
    return ".".join(reversed(domain.lower().rstrip(".").split(".")))


def card_problems(domain: str, name: str) -> list[str]:
    """Why ``domain`` cannot carry the card of the server ``name`` (none when it can)."""
    prefix = publisher_prefix(domain)
    if RESERVED_META_PREFIX.fullmatch(prefix):
        return [f"the domain {domain!r} reversed is {prefix!r}, a _meta prefix MCP reserves (a label mcp or "
                "modelcontextprotocol followed by another): serve the catalog from another domain"]
    card_name = f"{prefix}/{name}"
    if not CARD_NAME.fullmatch(card_name) or not 3 <= len(card_name) <= MAX_CARD_NAME:
        return [f"server card name {card_name!r} is not reverse DNS, '/', and a name within {MAX_CARD_NAME} "
                "characters"]
    return []


def card(domain: str, server: CatalogServer) -> dict[str, Any]:
    """The server's Server Card."""
    problems = card_problems(domain, server.name)
    if problems:
        raise ValueError(problems[0])
    prefix = publisher_prefix(domain)
    name = f"{prefix}/{server.name}"
    base = f"https://{domain}"
    return {
        "$schema": CARD_SCHEMA,
        "name": name,
        "version": server.version,
        "description": server.description,
        "remotes": [{"type": "streamable-http", "url": base + server.public_path}],
        "_meta": {f"{prefix}/protected-resource-metadata": base + PROTECTED_RESOURCE_METADATA + server.public_path},
    }


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True)


def render_discovery(domain: str, servers: Sequence[CatalogServer]) -> dict[str, Document]:
    """Path -> the document the edge answers there: the catalog (at both paths) and each card."""
    cards = [(server, card(domain, server)) for server in servers]
    catalog = {"specVersion": CATALOG_SPEC_VERSION, "entries": [
        {"identifier": f"urn:air:{domain.lower()}:mcp:{server.name}", "type": SERVER_CARD_TYPE, "data": data}
        for server, data in cards]}
    body = _json(catalog)
    out = {AI_CATALOG_PATH: Document(AI_CATALOG_TYPE, body), LEGACY_CATALOG_PATH: Document(AI_CATALOG_TYPE, body)}
    for server, data in cards:
        out[server.public_path + SERVER_CARD_SUFFIX] = Document(SERVER_CARD_TYPE, _json(data))
    return out
