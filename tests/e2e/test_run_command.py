"""The README's run command as a user runs it: up, usable, Ctrl-C, nothing left behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from local.supervisor import port_is_free
from stack_config.loading import PROJECT_ROOT, load_from_stack_file
from tests.e2e.conftest import SessionTopology

pytestmark = pytest.mark.e2e
RUN_LOCAL = PROJECT_ROOT / "scripts" / "run-local"


@pytest.fixture(autouse=True)
def machine_to_ourselves(session_topology: SessionTopology) -> None:
    """Two topologies at once on a 2-core machine only slow each other down."""
    session_topology.stop()


def _port_block(size: int) -> int:
    """A base port with ``size`` free ports after it (the run command's layout)."""
    for base in range(20000 + (os.getpid() % 200) * 50, 60000, 97):
        if all(port_is_free(p) for p in range(base, base + size)):
            return base
    raise RuntimeError("no free block of ports")


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if text in cmdline and state != "Z":
                found.append(int(entry.name))
    return found


def test_run_local_comes_up_answers_and_ctrl_c_leaves_nothing_behind(tmp_path: Path) -> None:
    regions = len(load_from_stack_file("prod").regions)
    base = _port_block(10 + regions + 1)
    edge, ports = base + 10 + regions, [base, base + 1, base + 2, *range(base + 10, base + 10 + regions)]
    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        [str(RUN_LOCAL), "--edge-port", str(edge), "--base-port", str(base), "--probe-interval", "30",
         "--run-dir", str(run_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    output: list[str] = []
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 120
        for line in process.stdout:
            output.append(line)
            if "Ctrl-C stops everything" in line or time.monotonic() > deadline:
                break
        banner = "".join(output)
        assert f"http://127.0.0.1:{edge}/mcp" in banner and "scripts/run-local client" in banner, banner
        token = subprocess.run([str(RUN_LOCAL), "token", "--run-dir", str(run_dir)], capture_output=True, text=True,
                               timeout=60, check=True).stdout.strip()
        assert token.count(".") == 2
        demo = subprocess.run([str(RUN_LOCAL), "client", "--run-dir", str(run_dir), "--country", "SG"],
                              capture_output=True, text=True, timeout=60, check=True).stdout
        assert "progress 5/5" in demo and "counted down 5 steps" in demo, demo
        assert "(served by ap-southeast-1)" in demo, demo  # every call names the region that served it
        oauth = subprocess.run([str(RUN_LOCAL), "client", "--run-dir", str(run_dir), "--oauth", "--tool", "echo",
                                "--args", '{"text": "via OAuth"}'], capture_output=True, text=True, timeout=90,
                               check=True).stdout
        assert 'echo -> {"result": "via OAuth"}' in oauth, oauth  # no token given: the SDK authorized on its own
        assert _processes_mentioning(str(run_dir))  # the workers run
        # The issuer was up before any origin: no origin's warm-up missed its keys.
        for log in (run_dir / "logs").glob("origin-*.log"):
            assert "JWKS" not in log.read_text() and "warm-up incomplete" not in log.read_text(), log
        # scripts/run-local fail/restore: the running up replaces the origin, then restarts it itself.
        origin = base + 10 + load_from_stack_file("prod").regions.index("ap-southeast-1")
        failed = subprocess.run([str(RUN_LOCAL), "fail", "ap-southeast-1", "--mode", "error", "--run-dir",
                                 str(run_dir)], capture_output=True, text=True, timeout=60)
        assert failed.returncode == 0 and "answers every request 502" in failed.stdout, failed
        assert httpx.get(f"http://127.0.0.1:{origin}/mcp", timeout=10).status_code == 502
        restored = subprocess.run([str(RUN_LOCAL), "restore", "ap-southeast-1", "--run-dir", str(run_dir)],
                                  capture_output=True, text=True, timeout=150)
        assert restored.returncode == 0 and "answers again" in restored.stdout, restored
        assert httpx.get(f"http://127.0.0.1:{origin}/mcp", timeout=10).status_code != 502
    finally:
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the foreground group
        rest, _ = process.communicate(timeout=60)
    assert process.returncode == 0, rest
    assert "stopped" in rest
    console = "".join(output) + rest
    assert "ETag" not in console and "restored the origin of ap-southeast-1" in console, console
    assert all(port_is_free(p) for p in [edge, *ports]), "a port is still taken"
    assert _processes_mentioning(str(run_dir)) == []
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", edge), timeout=1)


def test_a_busy_port_is_a_clear_error_naming_the_option(tmp_path: Path) -> None:
    regions = len(load_from_stack_file("prod").regions)
    base = _port_block(10 + regions + 1)
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the block may be in TIME_WAIT from a test
    holder.bind(("127.0.0.1", base + 1))
    holder.listen()
    try:
        result = subprocess.run([str(RUN_LOCAL), "--edge-port", str(base + 10 + regions), "--base-port", str(base),
                                 "--run-dir", str(tmp_path / "run")], capture_output=True, text=True, timeout=120)
    finally:
        holder.close()
    assert result.returncode == 3, result.stderr
    assert f"port {base + 1} (aws-emulator) is already in use" in result.stderr
    assert "--base-port" in result.stderr
