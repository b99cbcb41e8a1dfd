"""The supervisor starts real children on loopback and stops them without leftovers."""

from __future__ import annotations

import os
import signal
import socket
import sys
import textwrap
import time
from pathlib import Path

import pytest

from local.supervisor import (
    PortInUseError,
    ServiceFailedError,
    ServiceSpec,
    Supervisor,
    check_ports,
    free_ports,
    group_alive,
    port_is_free,
)

# A child that forks a grandchild ignoring SIGTERM (a stubborn helper process), then
# serves HTTP: stopping it must take the grandchild down too.
STUBBORN_SERVER = textwrap.dedent(
    """
    import os, signal, sys, time, http.server
    port, pid_file = int(sys.argv[1]), sys.argv[2]
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(1)
    open(pid_file, "w").write(str(child))
    http.server.ThreadingHTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler).serve_forever()
    """
)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it holds no resources but is not "running".
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _http_server(name: str, port: int) -> ServiceSpec:
    return ServiceSpec(name=name, argv=("-m", "http.server", str(port), "--bind", "127.0.0.1"), port=port,
                       port_option="--base-port")


def test_children_are_ready_then_stop_frees_ports_and_leaves_no_process(tmp_path: Path) -> None:
    port_a, port_b = free_ports(2)
    pid_file = tmp_path / "grandchild.pid"
    script = tmp_path / "stubborn.py"
    script.write_text(STUBBORN_SERVER)
    with Supervisor(tmp_path / "logs") as sup:
        sup.start_all([
            _http_server("plain", port_a),
            ServiceSpec(name="stubborn", argv=(str(script), str(port_b), str(pid_file)), port=port_b,
                        port_option="--edge-port"),
        ])
        pids = sup.pids()
        grandchild = int(pid_file.read_text())
        assert all(_pid_alive(p) for p in [*pids, grandchild])
        assert not port_is_free(port_a) and not port_is_free(port_b)
        with socket.create_connection(("127.0.0.1", port_a), timeout=2):
            pass
        sup.stop_all(grace_s=1.0)  # the grandchild ignores SIGTERM: SIGKILL after the grace
    assert port_is_free(port_a) and port_is_free(port_b)
    assert not any(_pid_alive(p) for p in [*pids, grandchild])
    assert not any(group_alive(p) for p in pids)


def test_a_busy_port_is_named_with_its_service_and_option_before_anything_starts(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    holder = socket.socket()
    holder.bind(("127.0.0.1", port))
    holder.listen()
    try:
        sup = Supervisor(tmp_path / "logs")
        with pytest.raises(PortInUseError) as info:
            sup.start_all([_http_server("origin-eu-west-1", port)])
        message = str(info.value)
        assert f"port {port} (origin-eu-west-1) is already in use" in message
        assert "--base-port" in message
        assert sup.services == {}
    finally:
        holder.close()


def test_the_same_port_given_twice_is_reported() -> None:
    (port,) = free_ports(1)
    with pytest.raises(PortInUseError, match=f"port {port} \\(b, also given to a\\)"):
        check_ports([_http_server("a", port), _http_server("b", port)])


def test_a_child_that_dies_before_ready_reports_its_log_and_the_rest_are_stopped(tmp_path: Path) -> None:
    port_ok, port_bad = free_ports(2)
    sup = Supervisor(tmp_path / "logs")
    with pytest.raises(ServiceFailedError, match="exited with code 3") as info:
        sup.start_all([
            _http_server("fine", port_ok),
            ServiceSpec(name="broken", argv=("-c", "import sys; print('boom: bad config'); sys.exit(3)"),
                        port=port_bad, port_option="--base-port"),
        ])
    assert "boom: bad config" in str(info.value)
    assert not any(_pid_alive(p) for p in sup.pids())
    assert port_is_free(port_ok)


def test_an_unexpected_exit_is_reported_but_a_requested_stop_is_not(tmp_path: Path) -> None:
    port_a, port_b = free_ports(2)
    with Supervisor(tmp_path / "logs") as sup:
        sup.start_all([_http_server("a", port_a), _http_server("b", port_b)])
        sup.stop("a")
        os.kill(sup.services["b"].pid, signal.SIGKILL)
        sup.services["b"].process.wait(timeout=5)
        assert [s.spec.name for s in sup.exited()] == ["b"]


def test_children_die_with_a_killed_supervisor(tmp_path: Path) -> None:
    """kill -9 of the supervising process: the kernel's parent-death signal stops the children."""
    (port,) = free_ports(1)
    pid_file = tmp_path / "child.pid"
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from local.supervisor import ServiceSpec, Supervisor
        sup = Supervisor(Path({str(tmp_path / 'logs')!r}))
        sup.start_all([ServiceSpec(name="s", argv=("-m", "http.server", "{port}", "--bind", "127.0.0.1"),
                                   port={port})])
        Path({str(pid_file)!r}).write_text(str(sup.pids()[0]))
        time.sleep(60)
        """
    ))
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    parent = subprocess.Popen([sys.executable, str(driver)], env=env)
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(pid_file.read_text())
        assert _pid_alive(child)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while _pid_alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _pid_alive(child)
    assert port_is_free(port)


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = free_ports(8)
    assert len(set(ports)) == 8
    assert all(port_is_free(p) for p in ports)
