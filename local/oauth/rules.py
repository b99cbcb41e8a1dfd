"""The OAuth rules the development issuer applies, as plain functions (no I/O).

Each raises ``OAuthError`` with the RFC's error code and a description naming what
is wrong and what is accepted, so the issuer's endpoints only map them to responses:

- PKCE (RFC 7636), S256 only: ``plain`` is a downgrade OAuth 2.1 and MCP refuse;
- redirect URIs compared exactly (OAuth 2.1), except that a loopback ``http`` URI
  matches on any port (RFC 8252 section 7.3: native apps bind an ephemeral port);
- resource indicators (RFC 8707) compared in their canonical form;
- scopes (RFC 6749 section 3.3) checked against what the issuer serves;
- client metadata (RFC 7591 registration requests and client ID metadata documents),
  and which client ID URLs and addresses may be fetched for a metadata document.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

LOOPBACK_NAMES = ("localhost",)
# RFC 7636 section 4.1: 43-128 characters of [A-Z] / [a-z] / [0-9] / "-" / "." / "_" / "~".
_VERIFIER = re.compile(r"[A-Za-z0-9._~-]{43,128}")
# The S256 challenge is the unpadded base64url of a SHA-256 digest: exactly 43 characters.
_S256_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")
# RFC 6749 section 3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E )
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
# RFC 3986 section 4.3 absolute-URI (no fragment): scheme ":" hier-part [ "?" query ].
_UNRESERVED_SUB_DELIMS = r"A-Za-z0-9\-._~!$&'()*+,;="
_PCT = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_UNRESERVED_SUB_DELIMS}:@]|{_PCT})"
_AUTHORITY = (rf"(?:(?:[{_UNRESERVED_SUB_DELIMS}:]|{_PCT})*@)?"  # userinfo
              rf"(?:\[(?:[0-9A-Fa-f:.]+|v[0-9A-Fa-f]+\.[{_UNRESERVED_SUB_DELIMS}:]+)\]"  # IP-literal
              rf"|(?:[{_UNRESERVED_SUB_DELIMS}]|{_PCT})*)"  # IPv4address or reg-name
              r"(?::[0-9]*)?")
_ABSOLUTE_URI = re.compile(
    rf"[A-Za-z][A-Za-z0-9+.\-]*:"
    rf"(?://{_AUTHORITY}(?:/{_PCHAR}*)*|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?|{_PCHAR}+(?:/{_PCHAR}*)*|)"
    rf"(?:\?(?:{_PCHAR}|[/?])*)?")
TOKEN_AUTH_METHODS = ("none", "client_secret_basic", "client_secret_post")
PUBLIC_GRANTS = ("authorization_code", "refresh_token")
GRANT_TYPES = ("authorization_code", "refresh_token", "client_credentials")
OFFLINE_ACCESS = "offline_access"


class OAuthError(Exception):
    """An OAuth error response: HTTP status, RFC error code, human-readable description."""

    def __init__(self, status: int, error: str, description: str):
        super().__init__(description)
        self.status, self.error, self.description = status, error, description


def bad_request(error: str, description: str) -> OAuthError:
    return OAuthError(400, error, description)


# --- PKCE ---------------------------------------------------------------------------------


def s256(verifier: str) -> str:
    """The S256 code challenge of ``verifier``."""
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).rstrip(b"=").decode()


def check_challenge(challenge: str | None, method: str | None) -> str:
    """The code challenge of an authorization request, S256 only."""
    if not challenge:
        raise bad_request("invalid_request", "code_challenge is required (PKCE, RFC 7636, with code_challenge_method=S256)")
    if method != "S256":
        got = "absent (which means plain)" if method is None else repr(method)
        raise bad_request("invalid_request", f"code_challenge_method is {got}: only S256 is accepted")
    if not _S256_CHALLENGE.fullmatch(challenge):
        raise bad_request("invalid_request", "code_challenge must be the 43-character base64url SHA-256 of the verifier")
    return challenge


def check_verifier(challenge: str, verifier: str | None) -> None:
    """The token request's code_verifier must hash to the code's challenge."""
    if not verifier:
        raise bad_request("invalid_grant", "code_verifier is required: this code was issued with a PKCE challenge")
    if not _VERIFIER.fullmatch(verifier):
        raise bad_request("invalid_grant", "code_verifier must be 43-128 characters of A-Z a-z 0-9 - . _ ~")
    if not hmac.compare_digest(s256(verifier), challenge):
        raise bad_request("invalid_grant", "code_verifier does not match the code_challenge of the authorization request")


# --- redirect URIs --------------------------------------------------------------------------


def is_loopback_host(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_loopback_http(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme == "http" and is_loopback_host(parts.hostname)


def is_loopback_redirect(uri: str) -> bool:
    """A redirect URI on this machine's loopback interface (RFC 8252 section 7.3: 127.0.0.1,
    [::1] or localhost, any port): a web page elsewhere cannot receive what is sent there,
    so the issuer may approve without asking the developer."""
    if not is_absolute_uri(uri):
        return False
    parts = urlsplit(uri)
    return parts.scheme in ("http", "https") and is_loopback_host(parts.hostname) and "@" not in parts.netloc


def is_absolute_uri(uri: str) -> bool:
    """RFC 3986 absolute-URI: no fragment, no whitespace or control characters, IPv6 literals valid."""
    if not _ABSOLUTE_URI.fullmatch(uri):
        return False
    literal = re.search(r"^[^:]*://(?:[^@/?]*@)?\[([^\]]*)\]", uri)
    if literal and not literal.group(1).startswith("v"):
        try:
            ipaddress.IPv6Address(literal.group(1))
        except ValueError:
            return False
    return True


def check_redirect_uri_syntax(uri: str) -> None:
    """A redirect URI a client may register: https, http on loopback, or a private-use
    scheme (RFC 8252 section 7.1, reverse-DNS like ``com.example.app:/cb``); an RFC 3986
    absolute URI without fragment (RFC 6749 section 3.1.2)."""
    if "#" in uri:
        raise bad_request("invalid_redirect_uri", f"redirect URI {uri[:200]!r} has a fragment, which is not allowed")
    if not is_absolute_uri(uri):
        raise bad_request("invalid_redirect_uri", f"redirect URI {uri[:200]!r} is not an absolute URI (RFC 3986: "
                          "no spaces, control characters or characters outside the URI syntax unencoded)")
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        raise bad_request("invalid_redirect_uri", f"redirect URI {uri[:200]!r} is not a URI") from None
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and is_loopback_host(parts.hostname):
        return
    if "." in parts.scheme and parts.scheme not in ("http", "https") and re.fullmatch(r"[a-z][a-z0-9+.-]*", parts.scheme):
        return
    raise bad_request("invalid_redirect_uri", f"redirect URI {uri[:200]!r}: use https, http on a loopback host "
                      "(127.0.0.1, [::1], localhost) or a private-use scheme like com.example.app:/callback")


def redirect_uri_matches(registered: str, presented: str) -> bool:
    """Exact match, except a loopback http URI's port (RFC 8252 section 7.3)."""
    if registered == presented:
        return True
    if not (is_loopback_http(registered) and is_loopback_http(presented)):
        return False
    a, b = urlsplit(registered), urlsplit(presented)
    try:
        b.port  # noqa: B018
    except ValueError:
        return False
    return (a.hostname == b.hostname and a.path == b.path and a.query == b.query and a.username is None
            and b.username is None and not b.fragment)


def choose_redirect_uri(registered: Sequence[str], presented: str | None) -> str:
    """The redirect URI of an authorization request; never redirects to an unregistered one."""
    if presented is None:
        if len(registered) == 1:
            return registered[0]
        raise bad_request("invalid_request", "redirect_uri is required: the client registered more than one")
    if any(redirect_uri_matches(r, presented) for r in registered):
        return presented
    raise bad_request("invalid_request", f"redirect_uri {presented[:200]!r} is not one the client registered "
                      f"({', '.join(r[:100] for r in registered) or 'none'}); loopback URIs match on any port")


# --- resource indicators (RFC 8707) -----------------------------------------------------------


def canonical_resource(uri: str) -> str:
    """Scheme and host lower-cased, a trailing slash dropped; refused when not an absolute URI
    without fragment (RFC 8707 section 2)."""
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError:
        raise bad_request("invalid_target", f"resource {uri[:200]!r} is not an absolute URI") from None
    if not parts.scheme or not parts.hostname or parts.fragment or "#" in uri:
        raise bad_request("invalid_target", f"resource {uri[:200]!r} must be an absolute URI without a fragment")
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    path = parts.path.rstrip("/")
    return f"{parts.scheme.lower()}://{netloc}{path}" + (f"?{parts.query}" if parts.query else "")


def check_resources(requested: Iterable[str], audience: str) -> str:
    """The audience, when every requested resource names it; ``invalid_target`` otherwise."""
    want = canonical_resource(audience)
    for resource in requested:
        if canonical_resource(resource) != want:
            raise bad_request("invalid_target", f"resource {resource[:200]!r} is not served by this issuer: "
                              f"tokens are for {audience!r} only")
    return audience


# --- scopes ------------------------------------------------------------------------------------


def parse_scope(raw: str | None) -> tuple[str, ...] | None:
    """The scope tokens of a ``scope`` parameter, in order, without duplicates; None when absent."""
    if raw is None:
        return None
    tokens = raw.split(" ")
    if not any(tokens) or not all(_SCOPE_TOKEN.fullmatch(t) for t in tokens if t):
        raise bad_request("invalid_scope", f"scope {raw[:200]!r} is not space-separated scope tokens (RFC 6749 3.3)")
    return tuple(dict.fromkeys(t for t in tokens if t))


def check_scope(requested: tuple[str, ...] | None, supported: Sequence[str], default: Sequence[str],
                allowed: Sequence[str] | None = None) -> tuple[str, ...]:
    """The scopes to grant: the requested ones when the issuer serves each (and, when the
    client or an earlier grant limits them, ``allowed`` holds each); ``default`` when absent.
    ``offline_access`` is accepted and not put in the token (it asks for a refresh token)."""
    if requested is None:
        return tuple(s for s in default if allowed is None or s in allowed)
    unknown = [s for s in requested if s not in supported and s != OFFLINE_ACCESS]
    if unknown:
        raise bad_request("invalid_scope", f"unknown scope(s) {' '.join(unknown)[:200]}: this issuer serves "
                          f"{' '.join(supported)}")
    granted = tuple(s for s in requested if s != OFFLINE_ACCESS)
    if allowed is not None:
        beyond = [s for s in granted if s not in allowed]
        if beyond:
            raise bad_request("invalid_scope", f"scope(s) {' '.join(beyond)[:200]} exceed what was granted or "
                              f"registered ({' '.join(allowed) or 'none'})")
    return granted


# --- client metadata ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientRecord:
    """What the issuer knows about a client, however it came to know it."""

    client_id: str
    redirect_uris: tuple[str, ...]
    grant_types: tuple[str, ...]
    auth_method: str  # none, client_secret_basic or client_secret_post
    secret: str | None = None
    name: str | None = None
    scope: tuple[str, ...] | None = None  # registered limit, if any
    source: str = "static"  # static, registered or metadata document

    @property
    def public(self) -> bool:
        return self.auth_method == "none"


def _string_list(doc: Mapping[str, Any], key: str, error: str, default: Sequence[str] | None = None) -> tuple[str, ...]:
    value = doc.get(key, default)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise bad_request(error, f"{key} must be a list of non-empty strings")
    return tuple(value)


def _has_lone_surrogate(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)


def lone_surrogate_at(value: Any, where: str = "the document") -> str | None:
    """Where a JSON value holds a string with a lone UTF-16 surrogate (``"\\ud800"`` parses to
    one, and it cannot be encoded again): a path like ``redirect_uris[0]``, or None."""
    if isinstance(value, str):
        return where if _has_lone_surrogate(value) else None
    items: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if _has_lone_surrogate(key):
                return f"a key of {where}"
            items.append((key if where == "the document" else f"{where}.{key}", item))
    elif isinstance(value, list):
        items = [(f"{where}[{index}]", item) for index, item in enumerate(value)]
    for path, item in items:
        found = lone_surrogate_at(item, path)
        if found:
            return found.encode("ascii", "backslashreplace").decode()
    return None


def client_from_metadata(doc: Any, *, client_id: str, source: str, supported_scopes: Sequence[str],
                         secret: str | None = None, default_auth_method: str = "client_secret_basic",
                         allowed_auth_methods: Sequence[str] = TOKEN_AUTH_METHODS) -> ClientRecord:
    """A client from RFC 7591 metadata (a registration request or a client ID metadata
    document). Errors are ``invalid_client_metadata`` / ``invalid_redirect_uri``."""
    if not isinstance(doc, dict):
        raise bad_request("invalid_client_metadata", "client metadata must be a JSON object")
    where = lone_surrogate_at(doc)
    if where:
        raise bad_request("invalid_client_metadata", f"client metadata {where} holds a lone UTF-16 surrogate: "
                          "strings must be Unicode text (RFC 8259 section 8.2)")
    grant_types = _string_list(doc, "grant_types", "invalid_client_metadata", ["authorization_code"])
    unknown = [g for g in grant_types if g not in GRANT_TYPES]
    if unknown:
        raise bad_request("invalid_client_metadata", f"grant_types {unknown}: this issuer serves {list(GRANT_TYPES)}")
    response_types = _string_list(doc, "response_types", "invalid_client_metadata", ["code"])
    if any(r != "code" for r in response_types):
        raise bad_request("invalid_client_metadata", f"response_types {list(response_types)}: only code is served")
    method = doc.get("token_endpoint_auth_method", default_auth_method)
    if method not in allowed_auth_methods:
        raise bad_request("invalid_client_metadata", f"token_endpoint_auth_method {method!r}: this issuer accepts "
                          f"{', '.join(allowed_auth_methods)} here")
    if method == "none" and "client_credentials" in grant_types:
        raise bad_request("invalid_client_metadata", "client_credentials needs a confidential client "
                          "(token_endpoint_auth_method client_secret_basic or client_secret_post)")
    redirect_uris = _string_list(doc, "redirect_uris", "invalid_redirect_uri")
    if "authorization_code" in grant_types and not redirect_uris:
        raise bad_request("invalid_redirect_uri", "redirect_uris is required for the authorization_code grant")
    for uri in redirect_uris:
        check_redirect_uri_syntax(uri)
    name = doc.get("client_name")
    if name is not None and not isinstance(name, str):
        raise bad_request("invalid_client_metadata", "client_name must be a string")
    scope = None
    if doc.get("scope") is not None:
        if not isinstance(doc["scope"], str):
            raise bad_request("invalid_client_metadata", "scope must be a space-separated string")
        try:
            scope = check_scope(parse_scope(doc["scope"]), supported_scopes, ())
        except OAuthError as exc:
            raise bad_request("invalid_client_metadata", exc.description) from None
    return ClientRecord(client_id=client_id, redirect_uris=redirect_uris, grant_types=grant_types, auth_method=method,
                        secret=secret if method != "none" else None, name=name, scope=scope, source=source)


def looks_like_url(client_id: str) -> bool:
    """A client id a client means as a client ID metadata document's URL."""
    return client_id[:8].lower() == "https://" or client_id[:7].lower() == "http://"


def check_metadata_document_url(client_id: str) -> None:
    """A client id may name a client ID metadata document (draft-ietf-oauth-client-id-metadata-document,
    section 3) when it is an https URL (for local development also http on a loopback host) with a
    path and without userinfo, fragment or dot segments; ``invalid_client`` naming the rule otherwise."""
    def refuse(why: str) -> OAuthError:
        return bad_request("invalid_client", f"client_id {client_id[:200]!r} cannot name a client ID metadata "
                           f"document: {why}")

    if not is_absolute_uri(client_id) or "#" in client_id:
        raise refuse("it is not an absolute URI without fragment (RFC 3986)")
    try:
        parts = urlsplit(client_id)
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        raise refuse("its port is not a number from 0 to 65535") from None
    if parts.scheme != "https" and not is_loopback_http(client_id):
        raise refuse("use https (http is accepted on a loopback host only: 127.0.0.1, [::1], localhost)")
    if "@" in parts.netloc:
        raise refuse("it has a user name or password, which would be sent to the document's host")
    if not parts.hostname:
        raise refuse("it has no host")
    if parts.path in ("", "/"):
        raise refuse("it has no path")
    segments = [unquote(segment) for segment in parts.path.split("/")]
    if "." in segments or ".." in segments:
        raise refuse("it has a '.' or '..' path segment")


def is_metadata_document_url(client_id: str) -> bool:
    """A client id that names a client ID metadata document (see ``check_metadata_document_url``)."""
    try:
        check_metadata_document_url(client_id)
    except OAuthError:
        return False
    return True


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, 6to4, Teredo, NAT64), if any."""
    if address.ipv4_mapped:
        return address.ipv4_mapped
    if address.sixtofour:
        return address.sixtofour
    if address.teredo:
        return address.teredo[1]
    if address in ipaddress.IPv6Network("64:ff9b::/96"):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def is_fetchable_address(address: str) -> bool:
    """Whether the issuer may connect to ``address`` for a metadata document: a global unicast
    address, or loopback (the one relaxation, for local development). Unspecified (0.0.0.0, ::),
    private, shared (100.64/10), link-local (169.254/16, fe80::/10), multicast, reserved and
    documentation ranges are refused (the draft's SSRF considerations)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return is_fetchable_address(str(embedded))
    if ip.is_loopback:
        return True
    return (ip.is_global and not ip.is_multicast and not ip.is_reserved and not ip.is_link_local
            and not ip.is_unspecified and not ip.is_private)


def metadata_document_client(doc: Any, url: str, supported_scopes: Sequence[str]) -> ClientRecord:
    """The client a fetched client ID metadata document describes (draft-ietf-oauth-client-id-metadata-document):
    its ``client_id`` must be the document's URL exactly; it is a public client."""
    if not isinstance(doc, dict):
        raise bad_request("invalid_client", f"the client metadata document at {url[:200]} is not a JSON object")
    if doc.get("client_id") != url:
        raise bad_request("invalid_client", f"the client metadata document at {url[:200]} names client_id "
                          f"{str(doc.get('client_id'))[:200]!r}: it must be the document's URL exactly")
    if not isinstance(doc.get("client_name"), str) or not doc["client_name"]:
        raise bad_request("invalid_client", f"the client metadata document at {url[:200]} has no client_name")
    if not doc.get("redirect_uris"):
        raise bad_request("invalid_client", f"the client metadata document at {url[:200]} has no redirect_uris")
    try:
        return client_from_metadata(doc, client_id=url, source="metadata document", supported_scopes=supported_scopes,
                                    default_auth_method="none", allowed_auth_methods=("none",))
    except OAuthError as exc:
        raise bad_request("invalid_client", f"the client metadata document at {url[:200]}: {exc.description}") from None


def cache_seconds(cache_control: str | None, default_s: int, max_s: int) -> int:
    """How long to keep a fetched document: ``max-age`` (capped), 0 for no-store/no-cache."""
    if not cache_control:
        return default_s
    directives = [d.strip().lower() for d in cache_control.split(",")]
    if "no-store" in directives or "no-cache" in directives:
        return 0
    for d in directives:
        match = re.fullmatch(r"max-age=(\d{1,9})", d)
        if match:
            return min(int(match.group(1)), max_s)
    return default_s
