"""A server on the wrong port, or one that exits first, is named at once (issue 39): the
listening sockets of a child read from /proc, and a failed start that stops waiting."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from local.listening import listening_ports, ports_of
from local.origins import port_hint
from local.supervisor import ServiceFailedError, ServiceSpec, Supervisor, free_ports

TABLE = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0 100 0 0 10 0
   1: 0100007F:1F41 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 9999 1 0 100 0 0 10 0
   2: 0100007F:1F42 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 4243 1 0 20 4 30 10 -1
"""
# A server that listens on 8000-style fixed port (here a free one) whatever $PORT says, like
# FastMCP's quickstart; it never exits on its own.
WRONG_PORT_SERVER = ("import socket, sys, time\n"
                     "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                     "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n"
                     "print('Uvicorn running on http://127.0.0.1:' + sys.argv[1], flush=True)\n"
                     "time.sleep(600)\n")
linux_only = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads /proc/net/tcp (Linux)")


def test_only_listening_sockets_of_the_given_inodes_count() -> None:
    assert listening_ports(TABLE, {4242, 4243}) == {8000}  # 4243 is a connection, 9999 someone else's
    assert listening_ports(TABLE, set()) == set()
    assert listening_ports("header only\n   0: garbage\n", {1}) == set()


@linux_only
def test_a_socket_this_process_listens_on_is_found() -> None:
    with socket.socket() as listener, socket.socket(socket.AF_INET6) as v6:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        v6.bind(("::1", 0))
        v6.listen()
        ports = ports_of([os.getpid()])
        assert ports is not None and {listener.getsockname()[1], v6.getsockname()[1]} <= ports


def test_without_proc_the_ports_are_unknown(tmp_path: Path) -> None:
    assert ports_of([os.getpid()], proc=tmp_path) is None


@linux_only
def test_a_server_listening_elsewhere_than_its_port_is_named_with_both_ports_and_the_fix(tmp_path: Path) -> None:
    port, elsewhere = free_ports(2)
    sup = Supervisor(tmp_path / "logs")
    spec = ServiceSpec(name="origin-eu-west-1", argv=("-c", WRONG_PORT_SERVER, str(elsewhere)), port=port,
                       port_option="--base-port", ready_path="/mcp", ready_timeout_s=300,
                       port_hint=port_hint("python3 server.py"))
    with pytest.raises(ServiceFailedError) as info:
        sup.start_all([spec])
    message = str(info.value)
    # Named as on the wrong port, not after the 300 s readiness timeout.
    assert f"origin-eu-west-1: your server listens on {elsewhere}; start it on $PORT ({port} here" in message
    assert "FASTMCP_PORT=$PORT python3 server.py" in message and "process.env.PORT" in message
    assert f"Uvicorn running on http://127.0.0.1:{elsewhere}" in message  # its log's last lines
    assert not sup.services["origin-eu-west-1"].running


@linux_only
def test_a_server_that_opens_another_port_too_is_waited_for(tmp_path: Path) -> None:
    """A metrics port beside $PORT is not the wrong port."""
    port, metrics = free_ports(2)
    both = ("import socket, sys, time, http.server, threading\n"
            "m = socket.socket(); m.bind(('127.0.0.1', int(sys.argv[2]))); m.listen()\n"
            "http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), http.server.SimpleHTTPRequestHandler)"
            ".serve_forever()\n")
    with Supervisor(tmp_path / "logs") as sup:
        (service,) = sup.start_all([ServiceSpec(name="s", argv=("-c", both, str(port), str(metrics)), port=port,
                                                ready_path="/", port_hint="e.g. anything")])
        assert service.running


def test_a_server_that_exits_first_ends_the_start_without_waiting_for_the_others(tmp_path: Path) -> None:
    port_slow, port_bad = free_ports(2)
    sup = Supervisor(tmp_path / "logs")
    never_ready = ServiceSpec(name="origin-slow", argv=("-c", "import time; time.sleep(600)"), port=port_slow,
                              ready_path=None, ready_timeout_s=600)
    exits = ServiceSpec(name="origin-bad", argv=("-c", "import sys; print('line 1'); print('ImportError: fastmcp', "
                                                 "flush=True); sys.exit(3)"), port=port_bad, ready_path="/mcp",
                        port_hint=port_hint("python3 server.py"))
    with pytest.raises(ServiceFailedError) as info:
        sup.start_all([never_ready, exits])
    assert "origin-bad exited with code 3 before it was ready" in str(info.value)
    assert "ImportError: fastmcp" in str(info.value)
    assert not any(s.running for s in sup.services.values())


@pytest.mark.parametrize(("command", "expected"), [
    ("uvicorn app:app", "e.g. server.command: uvicorn app:app --port $PORT"),
    ("python3 -m uvicorn server:app --host 127.0.0.1", "python3 -m uvicorn server:app --host 127.0.0.1 --port $PORT"),
    ("python3 server.py", "FASTMCP_PORT=$PORT python3 server.py"),
    ("node index.js", "app.listen(process.env.PORT)"),
])
def test_the_hint_suits_the_command(command: str, expected: str) -> None:
    assert expected in port_hint(command)

