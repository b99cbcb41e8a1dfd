"""The demo's warm-up before it reports ready (``warm_up``): what it sends goes through the
whole app and is answered, none of it reaches the logs or runs a tool, and the first
readiness check waits while the socket calls go through the listening socket."""

from __future__ import annotations

import json
import re
import socket
import time
from typing import Any, cast

import anyio
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from examples.demo.demo_server import warm_up
from examples.demo.demo_server.app import create_app
from tests.examples.demo.conftest import Caller, RunningOrigin, settings_for
from tests.examples.demo.test_server import TOOLS_LIST, TOOLS_LIST_HEADERS

# MCP tool names (2025-11-25): 1 to 128 of these characters.
TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")


def request_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if '"message":"request"' in line]


def test_the_origin_answers_every_warm_up_call_before_it_listens_and_logs_none_of_them(
        caller: Caller, capsys: pytest.CaptureFixture[str]):
    settings = settings_for()
    app = create_app(settings)
    capsys.readouterr()
    with RunningOrigin(app, settings) as fresh:
        # Given an origin that just reported ready: its warm-up went as planned
        assert app.state.warm_up_problems == []
        # and the logs hold no request line for it
        assert request_lines(capsys.readouterr().out) == []
        # When the first request from outside arrives, Then it is served and is the only request logged
        response = fresh.post(TOOLS_LIST, headers=fresh.headers(caller, **TOOLS_LIST_HEADERS))
        assert response.status_code == 200
        deadline = time.monotonic() + 10
        out = ""
        while not request_lines(out) and time.monotonic() < deadline:
            time.sleep(0.01)
            out += capsys.readouterr().out
        assert [line["mcp_method"] for line in request_lines(out)] == ["tools/list"]


def test_the_warm_up_covers_both_eras_both_transports_and_calls_no_tool():
    calls = warm_up.WARM_UP_CALLS
    assert {c.label.split()[0] for c in calls} == {warm_up.MODERN, warm_up.HANDSHAKE}
    assert {c.message["method"] for c in calls} >= {"server/discover", "initialize", "tools/list", "tools/call"}
    # through the socket: an SSE stream, then the modern listing, what a fresh instance is most often asked first
    assert [c.label for c in warm_up.SOCKET_CALLS] == [f"{warm_up.MODERN} tools/call", f"{warm_up.MODERN} tools/list"]
    assert all(c in calls for c in warm_up.SOCKET_CALLS)
    called = [c.message["params"]["name"] for c in calls if c.message["method"] == "tools/call"]
    assert called and all(TOOL_NAME.fullmatch(name) is None for name in called)  # no server can have it
    # the 2026-07-28 call names its tool in Mcp-Name too, as the SDK requires
    assert all(c.headers["mcp-name"] == c.message["params"]["name"] for c in calls
               if c.message["method"] == "tools/call" and "mcp-method" in c.headers)


class SeenRequests:
    """ASGI middleware noting every HTTP request (method, path, client, headers)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[tuple[str, str, tuple[Any, ...], dict[str, str]]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode(): v.decode() for k, v in scope["headers"]}
            self.seen.append((scope["method"], scope["path"], tuple(scope["client"]), headers))
        await self.app(scope, receive, send)


@pytest.mark.parametrize("path", ["/", "/healthz"])
def test_the_first_readiness_check_waits_for_posts_through_the_listening_socket_and_logs_none(
        capsys: pytest.CaptureFixture[str], path: str):
    settings = settings_for()
    app = create_app(settings)
    seen = SeenRequests(app)
    with RunningOrigin(seen, settings) as fresh:
        capsys.readouterr()
        # Given a fresh origin, When the Web Adapter's first readiness check arrives
        assert httpx.get(fresh.base_url + path, timeout=10).status_code == 200
        # Then while it waited, each socket call came in, over one other loopback connection
        posts = [s for s in seen.seen if s[0] == "POST"]
        assert [(m, p) for m, p, _, _ in seen.seen] == [("GET", path)] + [("POST", settings.mcp_path)] * len(posts)
        # the listing, what a first caller most often asks, is the last call
        assert posts[-1][3]["mcp-method"] == "tools/list"
        assert len(posts) == len(warm_up.SOCKET_CALLS)
        assert len({client for _, _, client, _ in posts}) == 1 and posts[0][2] != seen.seen[0][2]
        assert app.state.readiness.done and app.state.readiness.problems == []
        # and they were answered, with no request line of theirs logged (the server thread writes
        # a request's line after the client has its answer: wait, bounded, for the check's own)
        out, deadline = "", time.monotonic() + 10
        while not request_lines(out) and time.monotonic() < deadline:
            time.sleep(0.01)
            out += capsys.readouterr().out
        assert [line["path"] for line in request_lines(out)] == [path]
        # And a second check does not send them again
        assert httpx.get(fresh.base_url + path, timeout=10).status_code == 200
        assert len([s for s in seen.seen if s[0] == "POST"]) == len(posts)


class FailingLogger:
    """Stands in for the Powertools logger: records warnings, fails on nothing."""

    def __init__(self) -> None:
        self.warnings: list[dict[str, Any]] = []

    def info(self, *args: Any, **kwargs: Any) -> None:
        pass

    def warning(self, message: str, *, extra: dict[str, Any]) -> None:
        self.warnings.append(extra)


@pytest.mark.parametrize("server", [("testserver", 80), None, ("127.0.0.1",), ("::1", "80"), ("10.0.0.7", 8080)],
                         ids=["a name", "none", "no port", "a port string", "not loopback"])
def test_a_readiness_check_not_on_a_loopback_socket_is_answered_without_warming(server: Any):
    readiness = warm_up.SocketWarmUp(settings_for(), FailingLogger())
    anyio.run(readiness.ready, server)
    assert readiness.done and readiness.problems == []


@given(st.ip_addresses(), st.integers(min_value=1, max_value=65535))
def test_only_a_loopback_address_with_a_port_is_warmed_through(address: Any, port: int):
    expected = (str(address), port) if address.is_loopback else None
    assert warm_up.loopback_address((str(address), port)) == expected
    assert warm_up.loopback_address([str(address), port]) == expected  # as some servers pass it


def test_a_socket_warm_up_that_cannot_connect_or_gets_no_answer_still_reports_ready():
    with socket.socket() as silent, socket.socket() as closed:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # accepts (the kernel's backlog) and never answers
        closed.bind(("127.0.0.1", 0))  # bound, not listening: the connection is refused
        for sock, reason in ((silent, "TimeoutError"), (closed, "OSError")):
            logger = FailingLogger()
            readiness = warm_up.SocketWarmUp(settings_for(), logger, timeout_s=0.5)
            begun = time.monotonic()
            anyio.run(readiness.ready, sock.getsockname())
            assert readiness.done and time.monotonic() - begun < 5
            assert len(readiness.problems) == 1 and reason in readiness.problems[0]
            assert logger.warnings == [{"problem": readiness.problems[0]}]
            assert not readiness.sent({"headers": [(warm_up.WARM_UP_HEADER.encode(), b"x")]})


def test_the_in_process_warm_up_sends_every_first_call_once(monkeypatch: pytest.MonkeyPatch):
    order: list[str] = []

    async def noted_calls(calls: Any, post: Any, host: str, base: Any, label: str = "") -> list[str]:
        order.extend(call.label for call in calls)
        return []

    monkeypatch.setattr(warm_up, "send_calls", noted_calls)
    problems = anyio.run(warm_up.warm_up, cast(Any, None), settings_for(), FailingLogger())
    assert problems == []
    assert order == [c.label for c in warm_up.WARM_UP_CALLS]
