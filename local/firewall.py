"""The stack's AWS WAF web ACL, as the local edge applies it before the CloudFront Function.

``WebAclEmulator`` evaluates the rules the program renders (``edge.firewall_rules``),
read from the ``aws.wafv2.WebAcl`` inputs the program registers (camelCase wire names, as
the mock run records them) or from the rendered snake_case shapes: there is no second
copy of a limit here. Rules run in priority order; the first terminating action wins.

Emulated as WAF documents them:

- byte match statements on a single header, the URI path, the method, the query string
  and the JSON body (``included_paths`` with ``match_scope`` VALUE/KEY/ALL), with the
  NONE, LOWERCASE, COMPRESS_WHITE_SPACE and URL_DECODE text transformations (on
  match statements and on custom aggregation keys) and every positional constraint but
  CONTAINS_WORD; and/or/not statements;
- the JSON body: WAF sees the first ``default_size_inspection_limit`` bytes; over it,
  ``oversize_handling`` CONTINUE inspects them, MATCH and NO_MATCH decide outright; with no
  ``invalid_fallback_behavior`` the body is parsed up to the first failure (truncation,
  a duplicate key, a root that is not an object or array, a container nested deeper than
  ``JSON_NESTING_LIMIT``: AWS documents no depth, see ``edge/gate/rate_counting.py``) and
  what was parsed is matched;
- rate-based rules: every request that reaches the rule and matches its scope-down is
  counted under its aggregation key (the custom keys' values, or the client IP); a request
  missing a key is neither counted nor limited; once a key's count in the window is over
  the limit, the rule's action applies (blocked requests keep counting, as in WAF);
- actions: block (with the custom response: status, headers, the keyed body and its
  content type; without one WAF's plain 403), count (the request goes on), allow.

Where this differs from WAF:

- The count is an exact sliding window over the last ``evaluation_window_sec`` seconds,
  checked on every request. WAF estimates the rate (weighting recent requests more) and
  checks it periodically: it may let a burst through for a while before limiting (AWS:
  usually under 30 s, up to minutes) and keep limiting for a while after the rate falls.
  Locally a limit applies from the first request over it and lifts exactly when the
  window has slid past.
- Managed rule groups: AWS publishes their rules' names, what each inspects and examples,
  not their signatures. ``MANAGED_RULES`` emulates the rules whose documented behaviour
  matters for MCP requests (the size restrictions with AWS's documented sizes, the body
  and header signatures with their documented examples); ``NOT_EMULATED`` lists the rest.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, unquote_to_bytes

from edge.firewall_rules import JSON_NESTING_LIMIT

DEFAULT_BODY_INSPECTION_BYTES = 16 * 1024
"""What CloudFront forwards to WAF of a body when the association config says nothing."""
DEFAULT_BLOCK_STATUS = 403
CONTENT_TYPES = {"APPLICATION_JSON": "application/json", "TEXT_PLAIN": "text/plain", "TEXT_HTML": "text/html"}

NOT_EMULATED = (
    "AWSManagedRulesAmazonIpReputationList: its IP lists are AWS threat intelligence, not published; locally no "
    "address is on them.",
    "AWSManagedRulesKnownBadInputsRuleSet Host_localhost_HEADER: every request to the local edge has a loopback "
    "Host; the rule guards a public host against requests naming localhost.",
    "AWSManagedRulesCommonRuleSet UserAgent_BadBots_HEADER, RestrictedExtensions_*, GenericLFI_*, GenericRFI_*, "
    "CrossSiteScripting_* outside the body: their signatures are not published; the body ones count in this stack.",
    "WAF's rate estimation and its delay (see the module docstring): locally the window is exact.",
)


class UnsupportedStatementError(ValueError):
    """A rendered statement the local firewall cannot evaluate (it never guesses)."""


# --- rendered rules, in one spelling --------------------------------------------------------------

def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def snake_keys(value: Any) -> Any:
    """The rendered shapes with snake_case keys and integral floats as ints (the mock run
    records camelCase wire names and numbers as floats)."""
    if isinstance(value, Mapping):
        return {_snake(k): snake_keys(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [snake_keys(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# --- requests ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FirewallRequest:
    method: str
    path: str
    """The raw path, percent-encoding as sent, without the query string."""
    headers: Mapping[str, str]
    """Header name (any case) -> value; repeated headers joined with ', '."""
    body: bytes = b""
    client_ip: str = "127.0.0.1"
    query: str = ""

    def header(self, name: str) -> str | None:
        name = name.lower()
        for key, value in self.headers.items():
            if key.lower() == name:
                return value
        return None


@dataclass(frozen=True)
class FirewallVerdict:
    allowed: bool
    rule: str | None = None
    """The rule whose action decided (a block), if any."""
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    counted: tuple[str, ...] = ()
    """Rules (and managed rules, ``group:rule``) whose action was count."""


# --- JSON body ------------------------------------------------------------------------------------

class _ParseStoppedError(Exception):
    pass


_WS = " \t\r\n"
_NUMBER = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?")


class _JsonPrefix:
    """Parses as much of a JSON document as is valid, recording ``(pointer, key, value)`` for
    every scalar value and every object key it completes before the first failure. Iterative
    (any depth costs no stack), and it stops, as at any failure, where a container would nest
    deeper than ``JSON_NESTING_LIMIT``: what was parsed before is still matched."""

    def __init__(self, text: str):
        self.text, self.i = text, 0
        self.values: list[tuple[str, str]] = []
        self.keys: list[tuple[str, str]] = []

    def ws(self) -> None:
        while self.i < len(self.text) and self.text[self.i] in _WS:
            self.i += 1

    def peek(self) -> str:
        self.ws()
        if self.i >= len(self.text):
            raise _ParseStoppedError
        return self.text[self.i]

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise _ParseStoppedError
        self.i += 1

    def root(self) -> None:
        if self.peek() not in "{[":
            raise _ParseStoppedError
        self.value("")

    def scalar(self, pointer: str) -> None:
        if self.peek() == '"':
            self.values.append((pointer, self.string()))
            return
        for literal in ("true", "false", "null"):
            if self.text.startswith(literal, self.i):
                self.i += len(literal)
                self.values.append((pointer, literal))
                return
        m = _NUMBER.match(self.text, self.i)
        if not m or m.end() == len(self.text):  # a number cut off by the end may be longer
            raise _ParseStoppedError
        self.i = m.end()
        self.values.append((pointer, m.group()))

    def string(self) -> str:
        self.expect('"')
        out: list[str] = []
        while self.i < len(self.text):
            c = self.text[self.i]
            if c == '"':
                self.i += 1
                # \uD83D\uDE00 escapes are one character in two UTF-16 halves.
                return "".join(out).encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
            if c == "\\":
                esc = self.text[self.i + 1:self.i + 2]
                simple = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
                if esc in simple:
                    out.append(simple[esc])
                    self.i += 2
                elif esc == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", self.text[self.i + 2:self.i + 6]):
                    out.append(chr(int(self.text[self.i + 2:self.i + 6], 16)))
                    self.i += 6
                else:
                    raise _ParseStoppedError
            elif c < " ":
                raise _ParseStoppedError
            else:
                out.append(c)
                self.i += 1
        raise _ParseStoppedError

    def member(self, pointer: str, seen: set[str]) -> str:
        """An object member's key and colon; the pointer of its value."""
        key = self.string()
        if key in seen:
            raise _ParseStoppedError  # WAF stops at a duplicate key
        seen.add(key)
        child = f"{pointer}/{key.replace('~', '~0').replace('/', '~1')}"
        self.keys.append((child, key))
        self.expect(":")
        return child

    def value(self, pointer: str) -> None:
        # Open containers, innermost last: (closing character, pointer, keys seen, next index).
        stack: list[tuple[str, str, set[str], list[int]]] = []
        while True:
            c = self.peek()
            if c in "{[":
                if len(stack) >= JSON_NESTING_LIMIT:
                    raise _ParseStoppedError
                self.i += 1
                closing = "}" if c == "{" else "]"
                stack.append((closing, pointer, set(), [0]))
                if self.peek() != closing:
                    pointer = self.member(pointer, stack[-1][2]) if c == "{" else f"{pointer}/0"
                    continue
                self.i += 1
                stack.pop()
            else:
                self.scalar(pointer)
            # A value is complete: close what it completes, then go on to the next sibling.
            while True:
                if not stack:
                    return
                closing, parent, seen, index = stack[-1]
                c = self.peek()
                if c == ",":
                    self.i += 1
                    index[0] += 1
                    pointer = self.member(parent, seen) if closing == "}" else f"{parent}/{index[0]}"
                    break
                if c != closing:
                    raise _ParseStoppedError
                self.i += 1
                stack.pop()


def json_prefix(body: bytes) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(values, keys) as ``(JSON pointer, text)`` pairs, parsed up to the first failure."""
    parser = _JsonPrefix(body.decode("utf-8", "replace"))
    with contextlib.suppress(_ParseStoppedError):
        parser.root()
    return parser.values, parser.keys


# --- statements ------------------------------------------------------------------------------------

# AWS WAF's text transformations: COMPRESS_WHITE_SPACE turns \f \t \n \r \v and the
# non-breaking space into spaces and runs of spaces into one (AWS WAF developer guide, "Text
# transformation options").
_WAF_WHITESPACE = " \f\t\n\r\v\xa0"
_SPACE_RUN = re.compile(f"[{_WAF_WHITESPACE}]+")


def _transform(value: str, transformations: Iterable[Mapping[str, Any]]) -> str:
    for t in sorted(transformations, key=lambda t: t.get("priority", 0)):
        kind = t.get("type")
        if kind == "NONE":
            continue
        if kind == "LOWERCASE":
            value = value.lower()
        elif kind == "COMPRESS_WHITE_SPACE":
            value = _SPACE_RUN.sub(" ", value)
        elif kind == "URL_DECODE":
            value = unquote(value)
        else:
            raise UnsupportedStatementError(f"text transformation {kind!r} is not emulated locally")
    return value


def _matches(value: str, constraint: str, search: str) -> bool:
    if constraint == "EXACTLY":
        return value == search
    if constraint == "STARTS_WITH":
        return value.startswith(search)
    if constraint == "ENDS_WITH":
        return value.endswith(search)
    if constraint == "CONTAINS":
        return search in value
    raise UnsupportedStatementError(f"positional constraint {constraint!r} is not emulated locally")


class _Context:
    def __init__(self, request: FirewallRequest, body_limit: int):
        self.request = request
        self.body_limit = body_limit
        self._json: tuple[list[tuple[str, str]], list[tuple[str, str]]] | None = None

    def json(self) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        if self._json is None:
            self._json = json_prefix(self.request.body[:self.body_limit])
        return self._json

    def candidates(self, field: Mapping[str, Any]) -> list[str] | bool:
        """The texts a field yields (none if absent), or a decided True/False (oversize MATCH/NO_MATCH)."""
        request = self.request
        if "single_header" in field:
            value = request.header(field["single_header"]["name"])
            return [] if value is None else [value]
        if "uri_path" in field:
            return [request.path]
        if "method" in field:
            return [request.method]
        if "query_string" in field:
            return [request.query]
        if "json_body" in field:
            spec = field["json_body"]
            if len(request.body) > self.body_limit and spec.get("oversize_handling", "CONTINUE") != "CONTINUE":
                return spec["oversize_handling"] == "MATCH"
            if spec.get("invalid_fallback_behavior"):
                raise UnsupportedStatementError("json_body invalid_fallback_behavior is not emulated locally")
            values, keys = self.json()
            pattern = spec.get("match_pattern", {})
            paths = pattern.get("included_paths")

            def wanted(pairs: list[tuple[str, str]]) -> list[str]:
                return [text for pointer, text in pairs if paths is None or pointer in paths]

            scope = spec.get("match_scope", "ALL")
            return (wanted(values) if scope in ("VALUE", "ALL") else []) + (wanted(keys) if scope in ("KEY", "ALL")
                                                                            else [])
        raise UnsupportedStatementError(f"field to match {sorted(field)} is not emulated locally")


def statement_matches(statement: Mapping[str, Any], ctx: _Context) -> bool:
    if "and_statement" in statement:
        return all(statement_matches(s, ctx) for s in statement["and_statement"]["statements"])
    if "or_statement" in statement:
        return any(statement_matches(s, ctx) for s in statement["or_statement"]["statements"])
    if "not_statement" in statement:
        return not statement_matches(statement["not_statement"]["statement"], ctx)
    if "byte_match_statement" in statement:
        spec = statement["byte_match_statement"]
        texts = ctx.candidates(spec["field_to_match"])
        if isinstance(texts, bool):
            return texts
        transformations = spec.get("text_transformations", [])
        return any(_matches(_transform(t, transformations), spec["positional_constraint"], spec["search_string"])
                   for t in texts)
    raise UnsupportedStatementError(f"statement {sorted(statement)} is not emulated locally")


# --- managed rule groups ----------------------------------------------------------------------------

def _header_bytes(request: FirewallRequest, name: str) -> int:
    value = request.header(name)
    return 0 if value is None else len(value.encode())


def _anywhere_but_body(request: FirewallRequest) -> str:
    return " ".join([unquote(request.path), unquote(request.query), *request.headers.values()]).lower()


_LOG4J = re.compile(r"\$\{\s*(jndi|env|sys|lower|upper|::-)", re.I)
_JAVA_DESERIALIZATION = re.compile(r"java\.lang\.runtime|rO0AB|aced0005", re.I)
_XSS = re.compile(r"<\s*script\b|javascript:|\bon(error|load)\s*=", re.I)
_LFI = re.compile(r"\.\./|\.\.\\")
_SSRF = re.compile(r"169\.254\.169\.254")


@dataclass(frozen=True)
class ManagedRule:
    group: str
    name: str
    matches: Callable[[FirewallRequest], bool]


MANAGED_RULES: tuple[ManagedRule, ...] = (
    # AWSManagedRulesCommonRuleSet, with the sizes AWS documents.
    ManagedRule("AWSManagedRulesCommonRuleSet", "NoUserAgent_HEADER", lambda r: not r.header("user-agent")),
    ManagedRule("AWSManagedRulesCommonRuleSet", "SizeRestrictions_QUERYSTRING",
                lambda r: len(unquote_to_bytes(r.query)) > 2048),
    ManagedRule("AWSManagedRulesCommonRuleSet", "SizeRestrictions_Cookie_HEADER",
                lambda r: _header_bytes(r, "cookie") > 10_240),
    ManagedRule("AWSManagedRulesCommonRuleSet", "SizeRestrictions_BODY", lambda r: len(r.body) > 8192),
    ManagedRule("AWSManagedRulesCommonRuleSet", "SizeRestrictions_URIPATH",
                lambda r: len(unquote_to_bytes(r.path)) > 1024),
    ManagedRule("AWSManagedRulesCommonRuleSet", "EC2MetaDataSSRF_BODY",
                lambda r: bool(_SSRF.search(r.body[:DEFAULT_BODY_INSPECTION_BYTES].decode("utf-8", "replace")))),
    ManagedRule("AWSManagedRulesCommonRuleSet", "EC2MetaDataSSRF_QUERYARGUMENTS", lambda r: bool(_SSRF.search(
        unquote(r.query)))),
    ManagedRule("AWSManagedRulesCommonRuleSet", "GenericLFI_BODY",
                lambda r: bool(_LFI.search(r.body[:DEFAULT_BODY_INSPECTION_BYTES].decode("utf-8", "replace")))),
    ManagedRule("AWSManagedRulesCommonRuleSet", "CrossSiteScripting_BODY",
                lambda r: bool(_XSS.search(r.body[:DEFAULT_BODY_INSPECTION_BYTES].decode("utf-8", "replace")))),
    # AWSManagedRulesKnownBadInputsRuleSet, with the examples AWS documents.
    ManagedRule("AWSManagedRulesKnownBadInputsRuleSet", "PROPFIND_METHOD", lambda r: r.method.upper() == "PROPFIND"),
    ManagedRule("AWSManagedRulesKnownBadInputsRuleSet", "ExploitablePaths_URIPATH",
                lambda r: bool(re.search(r"/(web-inf|meta-inf)(/|$)", unquote(r.path), re.I))),
    ManagedRule("AWSManagedRulesKnownBadInputsRuleSet", "Log4JRCE_HEADER",
                lambda r: any(_LOG4J.search(v) for v in r.headers.values())),
    ManagedRule("AWSManagedRulesKnownBadInputsRuleSet", "Log4JRCE_URIPATH", lambda r: bool(_LOG4J.search(
        unquote(r.path)))),
    ManagedRule("AWSManagedRulesKnownBadInputsRuleSet", "Log4JRCE_BODY",
                lambda r: bool(_LOG4J.search(r.body[:DEFAULT_BODY_INSPECTION_BYTES].decode("utf-8", "replace")))),
    ManagedRule("AWSManagedRulesKnownBadInputsRuleSet", "JavaDeserializationRCE_HEADER",
                lambda r: any(_JAVA_DESERIALIZATION.search(v) for v in r.headers.values())),
    ManagedRule("AWSManagedRulesKnownBadInputsRuleSet", "JavaDeserializationRCE_BODY",
                lambda r: bool(_JAVA_DESERIALIZATION.search(
                    r.body[:DEFAULT_BODY_INSPECTION_BYTES].decode("utf-8", "replace")))),
)


def managed_rules_of(group: str) -> list[ManagedRule]:
    return [r for r in MANAGED_RULES if r.group == group]


# --- the web ACL ------------------------------------------------------------------------------------

class RateCounter:
    """Requests per (rule, aggregation key) over a sliding window; thread-safe."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, tuple[str, ...]], deque[float]] = {}
        self._lock = threading.Lock()

    def add(self, rule: str, key: tuple[str, ...], now: float, window: float) -> int:
        """Counts one request at ``now`` and returns the key's count in ``(now - window, now]``."""
        with self._lock:
            times = self._seen.setdefault((rule, key), deque())
            times.append(now)
            while times and times[0] <= now - window:
                times.popleft()
            return len(times)

    def forget_before(self, cutoff: float) -> None:
        """Drops the keys with no request since ``cutoff`` (bounds memory)."""
        with self._lock:
            for k in [k for k, times in self._seen.items() if not times or times[-1] <= cutoff]:
                del self._seen[k]


@dataclass
class WebAclEmulator:
    """Evaluates a rendered web ACL (``rules``, ``custom_response_bodies``,
    ``association_config``, ``default_action``) against requests, with its own rate counts."""

    rules: list[dict[str, Any]]
    custom_response_bodies: list[dict[str, Any]] = field(default_factory=list)
    association_config: dict[str, Any] | None = None
    default_action: dict[str, Any] = field(default_factory=lambda: {"allow": {}})
    clock: Callable[[], float] = time.monotonic
    counter: RateCounter = field(default_factory=RateCounter)

    @classmethod
    def from_web_acl_inputs(cls, inputs: Mapping[str, Any], clock: Callable[[], float] = time.monotonic
                            ) -> WebAclEmulator:
        """From an ``aws.wafv2.WebAcl``'s inputs, in either spelling (wire camelCase or snake_case)."""
        acl = snake_keys(inputs)
        return cls(
            rules=list(acl.get("rules") or []),
            custom_response_bodies=list(acl.get("custom_response_bodies") or []),
            association_config=acl.get("association_config"),
            default_action=acl.get("default_action") or {"allow": {}},
            clock=clock,
        )

    def __post_init__(self) -> None:
        self.rules = sorted(snake_keys(self.rules), key=lambda r: r["priority"])
        self.custom_response_bodies = snake_keys(self.custom_response_bodies)
        self.association_config = snake_keys(self.association_config)
        self.default_action = snake_keys(self.default_action)
        self._last_sweep = float("-inf")
        self._longest_window = max((r["statement"]["rate_based_statement"].get("evaluation_window_sec", 300)
                                    for r in self.rules if "rate_based_statement" in r["statement"]), default=300)

    @property
    def body_inspection_bytes(self) -> int:
        for body in (self.association_config or {}).get("request_bodies") or []:
            limit = (body.get("cloudfront") or {}).get("default_size_inspection_limit")
            if limit:
                return int(limit.removeprefix("KB_")) * 1024
        return DEFAULT_BODY_INSPECTION_BYTES

    def _response(self, rule: str, block: Mapping[str, Any], counted: list[str]) -> FirewallVerdict:
        custom = block.get("custom_response")
        if not custom:
            return FirewallVerdict(False, rule, DEFAULT_BLOCK_STATUS, (("content-type", "text/plain"),), b"Forbidden",
                                   tuple(counted))
        headers = [(h["name"], h["value"]) for h in custom.get("response_headers") or []]
        body = b""
        key = custom.get("custom_response_body_key")
        if key:
            entry = next((b for b in self.custom_response_bodies if b["key"] == key), None)
            if entry is None:
                raise UnsupportedStatementError(f"rule {rule!r} names the custom response body {key!r}, which the web "
                                           "ACL does not define")
            body = entry["content"].encode()
            headers.append(("content-type", CONTENT_TYPES[entry["content_type"]]))
        return FirewallVerdict(False, rule, custom["response_code"], tuple(headers), body, tuple(counted))

    def _rate_key(self, spec: Mapping[str, Any], request: FirewallRequest) -> tuple[str, ...] | None:
        kind = spec.get("aggregate_key_type", "IP")
        if kind == "IP":
            return (request.client_ip,)
        if kind == "CONSTANT":
            return ()
        if kind != "CUSTOM_KEYS":
            raise UnsupportedStatementError(f"aggregate key type {kind!r} is not emulated locally")
        key: list[str] = []
        for custom in spec.get("custom_keys") or []:
            if "header" in custom:
                value = request.header(custom["header"]["name"])
                if value is None:
                    return None  # WAF neither counts nor limits a request missing a key
                key.append(_transform(value, custom["header"].get("text_transformations", [])))
            elif "ip" in custom:
                key.append(request.client_ip)
            else:
                raise UnsupportedStatementError(f"custom key {sorted(custom)} is not emulated locally")
        return tuple(key)

    def evaluate(self, request: FirewallRequest) -> FirewallVerdict:
        now = self.clock()
        ctx = _Context(request, self.body_inspection_bytes)
        counted: list[str] = []
        for rule in self.rules:
            name, statement = rule["name"], rule["statement"]
            action = rule.get("action") or {}
            if "managed_rule_group_statement" in statement:
                group = statement["managed_rule_group_statement"]
                overrides = {o["name"]: o["action_to_use"] for o in group.get("rule_action_overrides") or []}
                group_counts = "count" in (rule.get("override_action") or {})
                for managed in managed_rules_of(group["name"]):
                    if not managed.matches(request):
                        continue
                    use = overrides.get(managed.name, {"block": {}})
                    if "count" in use or group_counts:
                        counted.append(f"{group['name']}:{managed.name}")
                    elif "block" in use:
                        return self._response(f"{name}:{managed.name}", use["block"], counted)
                    elif "allow" in use:
                        return FirewallVerdict(True, name, counted=tuple(counted))
                continue
            if "rate_based_statement" in statement:
                spec = statement["rate_based_statement"]
                scope = spec.get("scope_down_statement")
                if scope is not None and not statement_matches(scope, ctx):
                    continue
                key = self._rate_key(spec, request)
                if key is None:
                    continue
                window = spec.get("evaluation_window_sec", 300)
                if self.counter.add(name, key, now, window) <= spec["limit"]:
                    continue
            elif not statement_matches(statement, ctx):
                continue
            if "count" in action:
                counted.append(name)
            elif "block" in action:
                return self._response(name, action["block"], counted)
            elif "allow" in action:
                return FirewallVerdict(True, name, counted=tuple(counted))
        if now - self._last_sweep > 10:  # keys idle for a whole window hold no count
            self.counter.forget_before(now - self._longest_window)
            self._last_sweep = now
        if "block" in self.default_action:
            return self._response("default", self.default_action["block"], counted)
        return FirewallVerdict(True, None, counted=tuple(counted))
