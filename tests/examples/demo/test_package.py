"""The demo's package as the local topology builds it (``local.origins``: the folder as it
is, its requirements installed beside it for this machine, the generated run.sh), started
as the Web Adapter starts it: run.sh with the function's environment and nothing of this
project's (no virtualenv, no PYTHONPATH). What the package lacks, fails here."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from local.origins import DEFAULT_SERVER, DEMO_COMMAND, build_package_dir, env_argv, run_sh, start_command
from local.supervisor import free_ports

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo"
REQUIREMENT = re.compile(r"^([A-Za-z0-9_.-]+)==([A-Za-z0-9_.+-]+)")


@pytest.fixture(scope="module")
def package_dir() -> Path:
    return build_package_dir(DEFAULT_SERVER)


def pinned() -> dict[str, str]:
    pins = {}
    for line in (DEMO / "requirements.txt").read_text().splitlines():
        if match := REQUIREMENT.match(line.strip()):
            pins[match[1].lower().replace("_", "-")] = match[2]
    return pins


def test_the_start_command_is_the_one_the_readme_names():
    assert DEFAULT_SERVER.source == DEMO and DEFAULT_SERVER.command == DEMO_COMMAND
    assert DEMO_COMMAND in (DEMO / "README.md").read_text()


def test_every_requirement_is_pinned_and_nothing_of_the_removed_auth_code_remains():
    lines = [line.split("#")[0].strip() for line in (DEMO / "requirements.txt").read_text().splitlines()]
    assert all(REQUIREMENT.fullmatch(line) for line in lines if line), "every requirement pinned with =="
    modules = {p.name for p in (DEMO / "demo_server").glob("*.py")}
    assert not modules & {"auth.py", "key_prefetch.py", "resource_server.py", "origin_secrets.py",
                          "secrets_manager.py", "hosts.py", "tls.py", "contract.py"}


def test_the_package_holds_the_folder_unchanged_its_dependencies_and_run_sh(package_dir: Path):
    for source in (DEMO / "demo_server").glob("*.py"):
        assert (package_dir / "demo_server" / source.name).read_bytes() == source.read_bytes()
    installed = {p.name.split("-")[0].lower().replace("_", "-"): p.name.removesuffix(".dist-info").split("-")[1]
                 for p in package_dir.glob("*.dist-info")}
    assert installed == pinned()
    assert (package_dir / "run.sh").read_bytes() == run_sh(DEMO_COMMAND)
    assert (package_dir / "run.sh").stat().st_mode & 0o111


@pytest.fixture(scope="module")
def started(package_dir: Path) -> Iterator[str]:
    (port,) = free_ports(1)
    argv, env = start_command(DEFAULT_SERVER, package_dir, port, {"AWS_REGION": "eu-west-1",
                                                                  "AWS_LWA_READINESS_CHECK_PATH": "/healthz"})
    assert "PYTHONPATH" not in env and ".venv" not in env["PATH"]
    process = subprocess.Popen(env_argv(argv, env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
            try:
                httpx.get(base + "/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "run.sh never answered its readiness path"
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_run_sh_starts_the_server_from_its_package_alone(started: str, package_dir: Path):
    ready = httpx.get(started + "/healthz", timeout=5)
    assert ready.json() == {"status": "ok", "region": "eu-west-1"}
    listed = httpx.post(started + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                        headers={"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25",
                                 "host": "abcdefghij0123456789klmnopqrstuv.lambda-url.eu-west-1.on.aws"}, timeout=10)
    assert listed.status_code == 200 and listed.headers["x-mcp-edge-served-region"] == "eu-west-1"
    assert {t["name"] for t in listed.json()["result"]["tools"]} == {"echo", "countdown", "served_by", "whoami"}
    # The interpreter ran the package's own modules, not this project's virtualenv.
    assert httpx.get(started + "/mcp", timeout=5).status_code == 405
