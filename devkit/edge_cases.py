"""One set of viewer-request events and KeyValueStore states for the shipped CloudFront
Function, and what the function must do with each, restated from the contract (not
from the JS): run in QuickJS and njs by the tests, timed by the benchmark, and sent to
CloudFront's own ``test-function`` by CI (``tests/edge/aws_test_function.py``).

Tokens look like real access tokens: an RS256-length signature (342 base64url
characters, a 2048-bit key) and ordinary claims, about 750 characters in all.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from devkit.edge_runtimes.in_process import KeyValueReader
from devkit.shipped import b64url, make_token, viewer_event
from edge.protocol import AVOID_REGIONS_HEADER
from functions.contract import REGION_HEALTH_KEY, REGION_HEALTH_VERSION
from stack_config.model import StackConfig

# What a 2048-bit RS256 signature is long, base64url-encoded.
RS256_SIGNATURE = b64url(bytes(range(256)))
REGION_CODE = re.compile(r"[a-z]{2}(-[a-z]+)+-\d")
AT = "2026-12-01T08:00:00.000Z"


def realistic_claims(config: StackConfig, now: int, **overrides: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "iss": config.auth.issuer, "aud": config.auth.audience, "sub": "client-7f3c2a91-4b6e-4d0a-9c1e-2f8b5d6a7e40",
        "client_id": "https://app.example.com/oauth/client-metadata.json", "scope": "mcp:tools mcp:resources",
        "exp": now + 3600, "iat": now, "nbf": now - 5, "jti": "b3f1c9e2-8a47-4d5b-a0e6-7c2d9f1e4b83",
    }
    claims.update(overrides)
    return {k: v for k, v in claims.items() if v is not ...}


def realistic_token(config: StackConfig, now: int | None = None, **overrides: Any) -> str:
    now = int(time.time()) if now is None else now
    header = {"alg": "RS256", "typ": "at+jwt", "kid": "2026-11-rotation-1"}
    return make_token(header, realistic_claims(config, now, **overrides), signature=RS256_SIGNATURE)


_B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def noncanonical(segment: str) -> str:
    """The same bytes in base64url with non-zero unused trailing bits (lenient decoders
    accept it; RFC 4648 section 3.5 lets a strict one refuse it, and ours does)."""
    data = base64url_bytes(segment)
    while len(data) % 3 == 0:  # a length with trailing bits
        data = data[:-1] + b" " + data[-1:]
    canonical = b64url(data)
    last = _B64URL.index(canonical[-1])
    return canonical[:-1] + _B64URL[last | 1]


def base64url_bytes(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def health(*avoid: str, v: Any = REGION_HEALTH_VERSION, at: Any = AT) -> str:
    return json.dumps({"v": v, "avoid": list(avoid), "at": at}, separators=(",", ":"))


@dataclass(frozen=True)
class Store:
    """A KeyValueStore state: ``associated=False`` gives no reader (in an engine loaded
    with a store associated, as the tests' is, every read then fails; one loaded without
    makes ``cf.kvs()`` throw); ``value`` None is a missing key; ``error`` makes every
    read of the key fail."""

    associated: bool = True
    value: str | None = None
    error: str | None = None

    def reader(self) -> KeyValueReader | None:
        if not self.associated:
            return None

        def get(key: str) -> str | None:
            if self.error is not None:
                raise RuntimeError(self.error)
            return self.value if key == REGION_HEALTH_KEY else None

        return get


def stores(regions: Sequence[str]) -> dict[str, Store]:
    """Named KeyValueStore states for a stack deploying ``regions`` (at least two)."""
    one, other = sorted(regions)[:2]
    return {
        "no store associated": Store(associated=False),
        "key missing": Store(),
        "store failing": Store(error="ServiceUnavailable"),
        "all healthy": Store(value=health()),
        "one region down": Store(value=health(one)),
        "two down, a duplicate and an undeployed region": Store(value=health(other, one, one, "eu-south-2")),
        "every region down": Store(value=health(*sorted(regions))),
        "not JSON": Store(value="{avoid: [" + one + "]"),
        "another version": Store(value=health(one, v=2)),
        "version as a string": Store(value=health(one, v="1")),
        "no timestamp": Store(value=json.dumps({"v": 1, "avoid": [one]})),
        "avoid not a list": Store(value=json.dumps({"v": 1, "avoid": one, "at": AT})),
        "a region that is not a string": Store(value=json.dumps({"v": 1, "avoid": [one, 7], "at": AT})),
        "a region that is not a region code": Store(value=health(one, "EU-WEST-1")),
        # njs's $ matches before a final newline: the pattern must not pass this entry.
        "a region code with a final newline": Store(value=health(one, other + "\n")),
        "a JSON array": Store(value=json.dumps([one])),
        "JSON null": Store(value="null"),
    }


def events(config: StackConfig, now: int | None = None) -> dict[str, dict[str, Any]]:
    """Named viewer-request events: passing ones (the MCP path with a good token, paths
    that pass without one) and rejected ones, some carrying a viewer's own avoid header."""
    now = int(time.time()) if now is None else now
    token = realistic_token(config, now)
    forged = {AVOID_REGIONS_HEADER: ",".join(config.regions)}
    return {
        "valid token": viewer_event(headers={"authorization": f"Bearer {token}"}),
        "valid token, the viewer's own avoid header": viewer_event(headers={"authorization": f"Bearer {token}", **forged}),
        "resource metadata (no token)": viewer_event(uri="/.well-known/oauth-protected-resource/mcp", method="GET"),
        "another path (no token)": viewer_event(uri="/healthz", method="GET", headers=forged),
        # From a page of the distribution's own origin: a stack allows no other by default (allowedOrigins).
        "CORS preflight": viewer_event(method="OPTIONS", headers={"origin": "https://d111111abcdef8.cloudfront.net"}),
        "no token (401)": viewer_event(headers=forged),
        "expired token (401)": viewer_event(headers={"authorization": f"Bearer {realistic_token(config, now - 7200)}"}),
        "token payload not UTF-8 (401)": viewer_event(headers={
            "authorization": "Bearer " + token.split(".")[0] + "." + b64url(b'{"iss":"\xff"}') + "." + RS256_SIGNATURE,
        }),
        "token with non-zero trailing bits (401)": viewer_event(headers={
            "authorization": "Bearer " + token.split(".")[0] + "." + noncanonical(token.split(".")[1]) + "." + RS256_SIGNATURE,
        }),
        "two segments (401)": viewer_event(headers={"authorization": "Bearer abc.def"}),
    }


def expected_avoid(value: str | None, regions: Sequence[str]) -> str | None:
    """The avoid header the contract asks for, given the stored document (None: none)."""
    if value is None:
        return None
    try:
        doc = json.loads(value, parse_constant=_no_constants)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    version, at, avoid = doc.get("v"), doc.get("at"), doc.get("avoid")
    if isinstance(version, bool) or not isinstance(version, (int, float)) or version != REGION_HEALTH_VERSION:
        return None
    if not isinstance(at, str) or not isinstance(avoid, list):
        return None
    if not all(isinstance(r, str) and REGION_CODE.fullmatch(r) for r in avoid):
        return None
    listed = [r for r in dict.fromkeys(avoid) if r in regions]
    return ",".join(listed) if 0 < len(listed) < len(set(regions)) else None


def expected_result(event: dict[str, Any], store: Store, regions: Sequence[str], passes: bool) -> dict[str, Any] | None:
    """The request the function must pass on (the viewer's avoid header replaced by the
    contract's), or None for a rejection (checked separately)."""
    if not passes:
        return None
    request = copy.deepcopy(event["request"])
    request["headers"].pop(AVOID_REGIONS_HEADER, None)
    origin, host = request["headers"].get("origin"), request["headers"].get("host")
    if origin and host and origin["value"].strip(" \t") == "https://" + host["value"].lower():
        del request["headers"]["origin"]  # same-origin: the edge keeps it from the origin
    avoid = expected_avoid(store.value if store.associated and store.error is None else None, regions)
    if avoid is not None:
        request["headers"][AVOID_REGIONS_HEADER] = {"value": avoid}
    return request
