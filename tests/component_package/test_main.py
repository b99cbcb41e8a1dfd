"""The component package's plugin folder, started as the Pulumi engine starts it.

The engine reads the folder's PulumiPlugin.yaml (``runtime``, ``packages``,
``requiredPulumiVersion``, ``template``; nothing else) and asks the Python language
host to run the plugin. The host (sdk/python/cmd/pulumi-language-python, ``RunPlugin``)
runs ``<virtualenv python> <plugin folder> [--logtostderr] [-v=N] <engine address>``
in the engine's working directory; the plugin prints its port on its first stdout
line, and ``pulumi package add`` then asks it for its schema over gRPC.
"""

import ast
import json
import os
import selectors
import subprocess
import sys
from concurrent import futures
from pathlib import Path

import grpc
import pytest
import yaml
from google.protobuf import empty_pb2
from pulumi.runtime.proto import engine_pb2_grpc, provider_pb2, provider_pb2_grpc

from components.provider import SCHEMA_SNAPSHOT, schema_text
from components.type_tokens import VERSION
from stack_config.loading import PROJECT_ROOT

PLUGIN = PROJECT_ROOT / "component_package"
# What the engine's PluginProject reads from PulumiPlugin.yaml.
MANIFEST_KEYS = {"runtime", "packages", "requiredPulumiVersion", "template"}


def manifest() -> dict:
    return yaml.safe_load((PLUGIN / "PulumiPlugin.yaml").read_text(encoding="utf-8"))


def test_the_manifest_holds_only_what_the_engine_reads_python_with_pip_in_a_virtualenv_of_its_own():
    plugin = manifest()
    assert set(plugin) <= MANIFEST_KEYS, sorted(set(plugin) - MANIFEST_KEYS)
    runtime = plugin["runtime"]
    assert runtime["name"] == "python" and runtime["options"]["toolchain"] == "pip"
    # the host resolves the virtualenv from the plugin folder: one of its own, not the program's
    venv = (PLUGIN / runtime["options"]["virtualenv"]).resolve()
    assert venv.parent == PLUGIN
    assert (PLUGIN / "__main__.py").is_file()
    # the repository root is the stack program, not a plugin: no manifest there
    assert not (PROJECT_ROOT / "PulumiPlugin.yaml").exists()


def requirement_lines(path: Path) -> list[str]:
    """Requirement lines, with ``-r`` files followed as pip follows them (from the including file's folder)."""
    lines: list[str] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            lines += requirement_lines(path.parent / line.removeprefix("-r ").strip())
        elif line:
            lines.append(line)
    return lines


def test_the_plugins_virtualenv_gets_every_pin_of_the_program():
    plugin = set(requirement_lines(PLUGIN / "requirements.txt"))
    program = set(requirement_lines(PROJECT_ROOT / "requirements.txt"))
    assert program and program <= plugin


def test_the_plugin_needs_only_what_its_requirements_install():
    """Every module the plugin imports, followed through this repository's own modules, is the
    standard library, this repository, or a distribution its requirements pin."""
    pinned = {"pulumi": "pulumi", "pulumi_aws": "pulumi-aws", "pulumi_random": "pulumi-random", "yaml": "PyYAML",
              "pulumi_docker_build": "pulumi-docker-build"}
    requirements = requirement_lines(PLUGIN / "requirements.txt")
    assert all(any(line.startswith(f"{dist}==") for line in requirements) for dist in pinned.values())
    ours = {"components", "edge", "functions", "stack_config", "component_package"}
    seen: set[str] = set()
    third_party: set[str] = set()
    frontier = ["component_package.__main__"]
    while frontier:
        module = frontier.pop()
        if module in seen:
            continue
        seen.add(module)
        path = PROJECT_ROOT / Path(*module.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        tree = ast.parse(path.read_text(), filename=str(path))
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
                names = [base] + [f"{base}.{alias.name}" for alias in node.names]
            for name in names:
                top = name.split(".")[0]
                if top in ours:
                    candidate = PROJECT_ROOT / Path(*name.split("."))
                    if candidate.with_suffix(".py").is_file() or (candidate / "__init__.py").is_file():
                        frontier.append(name)
                elif top and top not in sys.stdlib_module_names:
                    third_party.add(top)
    assert "components.provider" in seen and "components.origin" in seen and "edge.router" in seen
    assert not any(m.startswith("stack_config") for m in seen), "the component package never reads the stack config"
    assert {"pulumi", "pulumi_aws"} <= third_party <= set(pinned), sorted(third_party - set(pinned))


def first_line(stream, timeout_s: float) -> str:
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            raise TimeoutError(f"the plugin printed no port within {timeout_s} s")
    return stream.readline()


@pytest.mark.parametrize("log_flags", [[], ["--logtostderr", "-v=9"]], ids=["plain", "with-log-flags"])
def test_the_plugin_started_as_the_language_host_starts_it_serves_the_snapshot_schema(tmp_path, log_flags):
    # Given an engine to point the plugin at (loopback; the schema needs no call back to it)
    engine = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    engine_pb2_grpc.add_EngineServicer_to_server(engine_pb2_grpc.EngineServicer(), engine)
    engine_port = engine.add_insecure_port("127.0.0.1:0")
    engine.start()
    # When the plugin folder is run by path from another directory, with the engine's address
    # last, and without this repository on PYTHONPATH (the engine's environment does not have it)
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    plugin = subprocess.Popen([sys.executable, str(PLUGIN), *log_flags, f"127.0.0.1:{engine_port}"],
                              cwd=tmp_path, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        assert plugin.stdout is not None
        line = first_line(plugin.stdout, 120)
        if not line.strip().isdigit():
            plugin.kill()
            _, errors = plugin.communicate(timeout=30)
            pytest.fail(f"the plugin printed {line!r} instead of its port; stderr:\n{errors}")
        port = int(line)
        # Then it answers the engine's first calls: its schema (the committed snapshot) and its version
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = provider_pb2_grpc.ResourceProviderStub(channel)
            schema = stub.GetSchema(provider_pb2.GetSchemaRequest(version=0), timeout=60).schema
            info = stub.GetPluginInfo(empty_pb2.Empty(), timeout=60)
        assert schema_text(json.loads(schema)) == SCHEMA_SNAPSHOT.read_text(encoding="utf-8")
        assert info.version == VERSION
    finally:
        plugin.kill()
        plugin.wait(timeout=30)
        engine.stop(grace=None)

