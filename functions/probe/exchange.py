"""The MCP exchange a probe performs, on the wire.

1. The 2026-07-28 exchange: ``server/discover``, then ``tools/list`` (every page),
   each a self-contained POST with the per-request ``_meta`` envelope and the
   required ``MCP-Protocol-Version`` and ``Mcp-Method`` headers.
2. If the server gives no positive evidence that it speaks 2026-07-28 (the same
   rule as the official SDK's ``mode="auto"``: an HTTP 400/404/405 or any JSON-RPC
   error other than "unsupported version, modern versions only", or a discover
   result that lists no version we speak), the legacy handshake: ``initialize``,
   ``notifications/initialized``, ``tools/list`` with the negotiated
   ``MCP-Protocol-Version`` and the ``Mcp-Session-Id`` when one is given (and a
   best-effort ``DELETE`` of that session afterwards). A server that issued one is asked
   once more without it: one that refuses is stateful and will fail on Lambda, whose
   instances do not share sessions (``advice.py`` says why and what to set); a request
   refused for its session ("Missing session ID", "Session not found") fails with that advice.
   A server that speaks 2026-07-28 is asked the handshake too, now and then
   (``handshake_stateful``; ``probe.HandshakeChecks`` says when): its 2025 clients use it.

Everything else fails with a typed error: 401 is ``ProbeAuthError``, other non-2xx
statuses (5xx, 403, 429...) ``ProbeHttpError`` (naming the fix when it is an SDK's Host
check refusing the Function URL's Host, ``advice.host_check_advice``), anything that is not valid MCP
``ProbeProtocolError``. A 5xx is never treated as era evidence: a broken server is
reported as broken, not as legacy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .advice import host_check_advice, stateful_server_advice
from .errors import ProbeAuthError, ProbeHttpError, ProbeLimitError, ProbeProtocolError, ProbeTimeoutError
from .wire import JSON_TYPE, SSE_TYPE, Answer, McpHttp, rpc_error_text

MODERN_VERSION = "2026-07-28"
HANDSHAKE_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST_HANDSHAKE = HANDSHAKE_VERSIONS[0]
CLIENT_INFO = {"name": "mcp-edge-probe", "version": "1.0.0"}
UNSUPPORTED_PROTOCOL_VERSION = -32022
MAX_TOOL_PAGES = 50
# Tools kept across pages: many tiny tools cost far more memory than their bytes.
MAX_TOOLS = 4096
# Statuses that say "not this era" rather than "broken": the SDK's legacy transport
# answers an unknown MCP-Protocol-Version with 400, older servers 404/405 the method.
_ERA_FALLBACK_STATUSES = (400, 404, 405)
SESSION_HEADER = "mcp-session-id"
# What a server that keeps sessions answers to a request whose session it does not hold (the
# Python SDK 400 "Missing session ID" / 404 "Session not found", the TypeScript SDK 400/404).
_SESSION_REFUSAL_STATUSES = (400, 404)


@dataclass
class ExchangeResult:
    era: str  # "modern" | "legacy"
    protocol_version: str
    tools: list[dict[str, Any]]
    answers: list[Answer] = field(default_factory=list)
    fallback_reason: str | None = None
    # The server issued a session id and refuses requests without it (legacy era only):
    # stateful, which Lambda's many instances break (``advice.stateful_server_advice``).
    stateful: bool = False

    @property
    def tools_answer(self) -> Answer:
        """The first tools/list answer (the one whose status and content type are reported)."""
        return next(a for a in self.answers if a.method == "tools/list")


class _FallBackError(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _fail_on_status(answer: Answer) -> None:
    """Raise the typed error for a status that is not an MCP answer."""
    status = answer.status
    if status == 401:
        challenge = answer.headers.get("www-authenticate", "")
        raise ProbeAuthError(
            f"{answer.method}: HTTP 401 (the bearer token was refused)"
            + (f"; WWW-Authenticate: {challenge[:300]}" if challenge else ""),
            status=401,
        )
    if not 200 <= status < 300:
        advice = host_check_advice(status, f"{_detail(answer) or ''} {answer.body_excerpt}")
        raise ProbeHttpError(_status_text(answer, 300) + (f"; {advice}" if advice else ""), status=status)


def _detail(answer: Answer) -> Any:
    """What a refused answer says: its JSON-RPC error message, else the start of its body."""
    return answer.error.get("message") if answer.error else answer.body_excerpt


def _status_text(answer: Answer, limit: int) -> str:
    detail = _detail(answer)
    return f"{answer.method}: HTTP {answer.status}" + (f": {detail!r:.{limit}}" if detail else "")


def _result(answer: Answer) -> dict[str, Any]:
    """The JSON-RPC result of a request the probe cannot do without."""
    _fail_on_status(answer)
    if answer.status != 200 or answer.content_type not in (JSON_TYPE, SSE_TYPE):
        raise ProbeProtocolError(
            f"{answer.method}: expected HTTP 200 with {JSON_TYPE} or {SSE_TYPE}, got HTTP {answer.status} "
            f"with {answer.content_type or 'no content type'}: {answer.body_excerpt!r:.200}"
        )
    if answer.message is None:
        raise ProbeProtocolError(f"{answer.method}: HTTP 200 without a JSON-RPC response")
    if answer.error is not None:
        raise ProbeProtocolError(f"{answer.method}: {rpc_error_text(answer.error)}")
    result: dict[str, Any] = answer.message["result"]
    return result


def _session_refused(answer: Answer) -> bool:
    return answer.status in _SESSION_REFUSAL_STATUSES


def _fail_on_session_refusal(answer: Answer) -> None:
    """A request carrying the session id the server issued, refused for its session: the server
    keeps sessions per instance (on Lambda, the next request may meet another instance)."""
    if _session_refused(answer):
        raise ProbeHttpError(f"{_status_text(answer, 200)}; {stateful_server_advice()}", status=answer.status)


def modern_headers(method: str) -> dict[str, str]:
    return {"mcp-protocol-version": MODERN_VERSION, "mcp-method": method}


def modern_params(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
    }
    return {**(extra or {}), "_meta": meta}


def _discover(http: McpHttp, answers: list[Answer]) -> None:
    """server/discover; returns if the server speaks 2026-07-28, raises _FallBackError if not."""
    answer = http.request("server/discover", modern_params(), modern_headers("server/discover"))
    answers.append(answer)
    error = answer.error
    if error is not None and error.get("code") == UNSUPPORTED_PROTOCOL_VERSION:
        data = error.get("data")
        supported = data.get("supported") if isinstance(data, dict) else None
        if isinstance(supported, list) and not any(v in HANDSHAKE_VERSIONS for v in supported):
            # The one answer that is not a reason to try the handshake (the SDK's rule).
            raise ProbeProtocolError(
                f"server/discover: the server speaks only {supported}, neither {MODERN_VERSION} "
                f"nor the initialize handshake ({', '.join(HANDSHAKE_VERSIONS)})"
            )
    if answer.status in _ERA_FALLBACK_STATUSES:
        why = rpc_error_text(error) if error else (answer.body_excerpt[:120] or "no body")
        raise _FallBackError(f"server/discover answered HTTP {answer.status} ({why})")
    _fail_on_status(answer)
    if error is not None:
        raise _FallBackError(f"server/discover answered {rpc_error_text(error)}")
    result = _result(answer)
    versions = result.get("supportedVersions")
    if not isinstance(versions, list):
        raise ProbeProtocolError(f"server/discover: result has no supportedVersions list: {result!r:.200}")
    if MODERN_VERSION not in versions:
        raise _FallBackError(f"server/discover lists {versions}, not {MODERN_VERSION}")


def _list_tools(http: McpHttp, answers: list[Answer], params: dict[str, Any] | None, headers: dict[str, str]) -> list[dict[str, Any]]:
    """tools/list, every page (a cursor cycle or an endless list is a protocol error)."""
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_TOOL_PAGES):
        extra = {"cursor": cursor} if cursor is not None else {}
        request_params = modern_params(extra) if params is None else {**params, **extra}
        answer = http.request("tools/list", request_params, headers)
        answers.append(answer)
        result = _result(answer)
        page = result.get("tools")
        if not isinstance(page, list):
            raise ProbeProtocolError(f"tools/list: result has no tools list: {result!r:.200}")
        tools.extend(page)
        if len(tools) > MAX_TOOLS:
            raise ProbeLimitError(f"tools/list: more than {MAX_TOOLS} tools")
        cursor = result.get("nextCursor")
        if cursor is None:
            return tools
        if not isinstance(cursor, str) or cursor in seen:
            raise ProbeProtocolError(f"tools/list: invalid or repeated nextCursor {cursor!r}")
        seen.add(cursor)
    raise ProbeLimitError(f"tools/list: more than {MAX_TOOL_PAGES} pages")


def _legacy(http: McpHttp, answers: list[Answer]) -> tuple[str, list[dict[str, Any]], bool]:
    init = http.request(
        "initialize",
        {"protocolVersion": LATEST_HANDSHAKE, "capabilities": {}, "clientInfo": CLIENT_INFO},
    )
    answers.append(init)
    result = _result(init)
    version = result.get("protocolVersion")
    if version not in HANDSHAKE_VERSIONS:
        raise ProbeProtocolError(
            f"initialize: the server chose protocol version {version!r}, which this probe does not speak "
            f"({', '.join(HANDSHAKE_VERSIONS)})"
        )
    session: dict[str, str] = {}
    if session_id := init.headers.get(SESSION_HEADER):
        session[SESSION_HEADER] = session_id
    headers = {"mcp-protocol-version": version, **session}
    stateful = False
    try:
        initialized = http.notify("notifications/initialized", None, headers)
        answers.append(initialized)
        if session:
            _fail_on_session_refusal(initialized)
        _fail_on_status(initialized)
        try:
            tools = _list_tools(http, answers, {}, headers)
        except ProbeHttpError:
            if session:
                _fail_on_session_refusal(answers[-1])  # raises when the session was the refusal
            raise
        if session:
            stateful = _refuses_without_session(http, version)
    finally:
        if session:
            http.delete(headers, budget_s=2.0)  # end the session; the spec asks clients to
    return version, tools, stateful


def _refuses_without_session(http: McpHttp, version: str) -> bool:
    """Whether the server refuses a request without the session id it issued: a server that
    does will fail on Lambda as soon as a second instance answers, even if this exchange met
    one instance only. One tools/list, not counted among the exchange's answers (timings)."""
    try:
        answer = http.request("tools/list", {}, {"mcp-protocol-version": version})
    except (ProbeHttpError, ProbeProtocolError, ProbeTimeoutError):
        return False  # not an answer about sessions; the exchange itself succeeded
    return _session_refused(answer)


def handshake_stateful(http: McpHttp) -> bool:
    """Whether the server, asked the legacy handshake, issues a session id and then refuses a
    request without it. For a server that answered 2026-07-28 (which has no sessions): its
    2025 clients still use the handshake, and a stateful one fails them on Lambda. Anything
    else it answers (an error, no session id) is no evidence of state: False."""
    try:
        init = http.request(
            "initialize", {"protocolVersion": LATEST_HANDSHAKE, "capabilities": {}, "clientInfo": CLIENT_INFO})
    except (ProbeHttpError, ProbeProtocolError, ProbeTimeoutError):
        return False  # the exchange itself succeeded: this extra question must not fail the probe
    session_id = init.headers.get(SESSION_HEADER)
    if init.status != 200 or not session_id:
        return False
    version = ((init.message or {}).get("result") or {}).get("protocolVersion")
    version = version if version in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE
    try:
        return _refuses_without_session(http, version)
    finally:
        http.delete({"mcp-protocol-version": version, SESSION_HEADER: session_id}, budget_s=2.0)


def run_exchange(http: McpHttp) -> ExchangeResult:
    """Speak MCP with the endpoint; return the tools and how they were obtained."""
    answers: list[Answer] = []
    try:
        _discover(http, answers)
    except _FallBackError as fallback:
        version, tools, stateful = _legacy(http, answers)
        return ExchangeResult("legacy", version, tools, answers, fallback_reason=fallback.reason, stateful=stateful)
    tools = _list_tools(http, answers, None, modern_headers("tools/list"))
    return ExchangeResult("modern", MODERN_VERSION, tools, answers)
