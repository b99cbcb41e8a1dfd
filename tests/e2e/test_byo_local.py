"""A user's own server, in a folder outside the project, through the whole local topology
(issue 39): a server that keeps sessions in memory fails here as on Lambda, with the advice;
one that listens on a port of its own is named with that port; after each fix it is served."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
import yaml

from functions.probe.advice import stateful_server_advice
from local.first_look import first_look, new_notices
from local.plan import token_for
from local.supervisor import ServiceFailedError, free_ports
from stack_config.loading import read_stack_file, stack_file_path
from tests.e2e.conftest import own_topology

pytestmark = pytest.mark.e2e

# A stdlib MCP server as a quickstart writes it: sessions in memory (STATEFUL=1) or none, on
# $PORT or on a port of its own (--port N).
SERVER = '''
import json, os, sys, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SESSIONS = set()
STATEFUL = os.environ.get("STATEFUL") == "1"
TOOLS = [{"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                                          "required": ["text"]}}]


class Handler(BaseHTTPRequestHandler):
    def answer(self, status, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.answer(405, {"error": "GET not served"})

    def do_POST(self):
        message = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        method, ident = message.get("method"), message.get("id")
        if method == "initialize":
            headers = ()
            if STATEFUL:
                session = uuid.uuid4().hex
                SESSIONS.add(session)
                headers = (("mcp-session-id", session),)
            return self.answer(200, {"jsonrpc": "2.0", "id": ident, "result": {
                "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "mine", "version": "1"}}}, headers)
        if STATEFUL:
            session = self.headers.get("mcp-session-id")
            if not session:
                return self.answer(400, {"jsonrpc": "2.0", "id": ident, "error": {"code": -32600,
                                                                                  "message": "Missing session ID"}})
            if session not in SESSIONS:
                return self.answer(404, {"jsonrpc": "2.0", "id": ident, "error": {"code": -32600,
                                                                                  "message": "Session not found"}})
        if ident is None:
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        if method == "tools/list":
            return self.answer(200, {"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
        self.answer(200, {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "no such method"}})


port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else int(os.environ["PORT"])
print(f"listening on 127.0.0.1:{port}", flush=True)
ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
'''


def byo_stack(folder: Path, command: str) -> Path:
    """A one-region stack file in ``folder`` (outside the project) whose server is ``folder/../server``."""
    server = folder.parent / "server"
    if not server.exists():
        server.mkdir()
        (server / "server.py").write_text(SERVER)
        (server / "requirements.txt").write_text("")
    config = {f"mcp-edge:{k}": v for k, v in read_stack_file(stack_file_path("prod")).items() if v is not None}
    for key in ("customDomain", "certificateArn", "originOverrides", "wafToolLimits", "probeRegions",
                "resultsTableHomeRegion", "defaultRegion"):
        config.pop(f"mcp-edge:{key}", None)
    config["mcp-edge:regions"] = ["eu-west-1"]
    config["mcp-edge:server"] = {"source": "../server", "runtime": "python3.13", "command": command}
    folder.mkdir(exist_ok=True)
    path = folder / "Pulumi.byo.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    return path


def test_a_stateful_server_fails_through_the_local_edge_with_the_advice_and_passes_once_stateless(
        tmp_path: Path) -> None:
    stateful = byo_stack(tmp_path / "stateful", "STATEFUL=1 python3 server.py")
    with own_topology(stateful, "byo", tmp_path / "run-stateful") as plan:
        token = token_for(plan)
        look = first_look(plan.mcp_url, token)
        assert look.stateful
        headers = {"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"}
        initialized = httpx.post(plan.mcp_url, headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        session = initialized.headers["mcp-session-id"]
        # Requests take the instances in turn, so some reach the instance that never saw the session
        # (the probes' own requests, interleaved, shift the turns: eight requests, not two).
        listed = [httpx.post(plan.mcp_url, headers={**headers, "mcp-session-id": session},
                             json={"jsonrpc": "2.0", "id": i, "method": "tools/list"}) for i in range(2, 10)]
        assert {r.status_code for r in listed} == {200, 404}
        assert any("Session not found" in r.text for r in listed)
        assert new_notices(Path(plan.run_dir) / "notices", set()) == [f"origin in eu-west-1: {stateful_server_advice()}"]
    stateless = byo_stack(tmp_path / "stateless", "python3 server.py")
    with own_topology(stateless, "byo", tmp_path / "run-stateless") as plan:
        look = first_look(plan.mcp_url, token_for(plan))
        assert not look.stateful and [t.name for t in look.tools or ()] == ["echo"]
        assert new_notices(Path(plan.run_dir) / "notices", set()) == []


def test_a_server_on_a_port_of_its_own_is_named_with_that_port(tmp_path: Path) -> None:
    (own_port,) = free_ports(1)
    stack = byo_stack(tmp_path / "wrong", f"python3 server.py --port {own_port}")
    with pytest.raises(ServiceFailedError) as info, own_topology(stack, "byo", tmp_path / "run"):
        pass
    message = str(info.value)
    assert f"your server listens on {own_port}; start it on $PORT" in message
    assert f"listening on 127.0.0.1:{own_port}" in message  # the last lines of its output
