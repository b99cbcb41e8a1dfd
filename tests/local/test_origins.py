"""How the local topology builds and starts an origin (local/origins.py): the stack's server
read by name, run.sh as the adapter starts it, a complete environment of the function's own,
and clear refusals for what this machine cannot run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.shell_command import CommandError, parse
from devkit.dependency_install import InstallFailedError
from local.origins import (
    DEFAULT_SERVER,
    OriginBuildError,
    ServerSpec,
    build_package_dir,
    env_argv,
    interpreter_for,
    python_interpreter,
    run_sh,
    server_spec,
    start_command,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_a_stack_without_a_server_runs_the_demo():
    assert server_spec(object()) == DEFAULT_SERVER
    assert server_spec({"server": None}) == DEFAULT_SERVER
    assert DEFAULT_SERVER.source == EXAMPLES / "demo" and DEFAULT_SERVER.runtime == "python3.13"


def test_the_stack_files_keys_are_read_with_the_source_relative_to_the_project():
    spec = server_spec({"server": {"source": "examples/typescript", "runtime": "nodejs22.x", "command": "node app.mjs",
                                   "path": "/mcp", "readinessPath": "/", "toolScopes": {"admin_x": ["admin"]}}})
    assert spec == ServerSpec(source=EXAMPLES / "typescript", runtime="nodejs22.x", command="node app.mjs",
                              readiness_path="/", tool_scopes={"admin_x": ("admin",)})


@pytest.mark.parametrize(("server", "named"), [
    ({"image": "servers/mine"}, "image"),
    ({"imageDigest": "sha256:" + "0" * 64}, "image"),
    ({"source": "examples/demo", "runtime": "python2.7", "command": "x"}, "server.runtime"),
    ({"source": "examples/demo", "runtime": "python3.13", "command": " "}, "server.command"),
])
def test_what_cannot_run_here_is_refused_naming_the_key(server: dict[str, str], named: str):
    with pytest.raises(OriginBuildError, match=named):
        server_spec({"server": server})


def test_java_and_custom_runtimes_need_their_image_locally():
    with pytest.raises(OriginBuildError, match="java21 needs its image"):
        interpreter_for(ServerSpec(source=EXAMPLES, runtime="java21", command="java -jar x.jar"))


def test_a_python_version_this_machine_lacks_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(OriginBuildError, match=r"no python3\.99"):
        python_interpreter("3.99")


@given(command=st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7e), min_size=1, max_size=40))
def test_run_sh_execs_the_command_in_the_task_root_on_the_adapters_port(command: str):
    try:
        parsed = parse(command)
    except CommandError:
        with pytest.raises(CommandError):  # refused by the stack checks first, with what is wrong
            run_sh(command)
        return
    script = run_sh(command).decode()
    # exec where the program starts, the command otherwise as written
    assert parsed.prefix + parsed.rest == command
    assert script.startswith("#!/bin/sh\n") and script.endswith(f"\n{parsed.prefix}exec {parsed.rest}\n")
    assert 'cd "${LAMBDA_TASK_ROOT:-$(dirname "$0")}"' in script
    assert 'export PORT="$AWS_LWA_PORT"' in script


def test_run_sh_gives_the_command_the_adapters_port_and_the_package_as_cwd(tmp_path: Path):
    (tmp_path / "run.sh").write_bytes(run_sh('echo "$PORT $(pwd)"'))
    (tmp_path / "run.sh").chmod(0o755)
    argv, env = start_command(DEFAULT_SERVER, tmp_path, 4321, {"AWS_LWA_READINESS_CHECK_PATH": "/healthz"},
                              build_dir=tmp_path / "build")
    done = subprocess.run(env_argv(argv, env), capture_output=True, text=True, check=True, cwd="/")
    assert done.stdout.strip() == f"4321 {tmp_path}"


def test_the_environment_is_the_functions_and_nothing_of_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("LEAKED_FROM_THE_TEST_RUN", "yes")
    (tmp_path / "run.sh").write_bytes(run_sh("env"))
    (tmp_path / "run.sh").chmod(0o755)
    argv, env = start_command(DEFAULT_SERVER, tmp_path, 4321, {"AWS_LWA_INVOKE_MODE": "response_stream"},
                              build_dir=tmp_path / "build")
    seen = dict(line.split("=", 1) for line in subprocess.run(
        env_argv(argv, env), capture_output=True, text=True, check=True).stdout.splitlines() if "=" in line)
    assert seen["AWS_LWA_INVOKE_MODE"] == "response_stream" and seen["AWS_LWA_PORT"] == "4321"
    assert seen["LAMBDA_TASK_ROOT"] == str(tmp_path)
    # The shipped run.sh puts the package (and nothing of this process) on a Python server's path.
    assert "LEAKED_FROM_THE_TEST_RUN" not in seen and seen.get("PYTHONPATH") == str(tmp_path)
    assert "VIRTUAL_ENV" not in seen


def test_python_on_the_origins_path_is_a_real_interpreter_of_the_runtimes_version(tmp_path: Path):
    (tmp_path / "run.sh").write_bytes(run_sh('python3 -c "import sys; print(sys.version_info[:2], sys.prefix == sys.base_prefix)"'))
    (tmp_path / "run.sh").chmod(0o755)
    argv, env = start_command(DEFAULT_SERVER, tmp_path, 1, {}, build_dir=tmp_path / "build")
    out = subprocess.run(env_argv(argv, env), capture_output=True, text=True, check=True).stdout.strip()
    assert out == f"{tuple(sys.version_info[:2])} True"  # no virtualenv: what the package lacks fails


def test_a_node_server_without_its_lock_file_is_refused_by_the_shared_builder(tmp_path: Path):
    source = tmp_path / "server"
    source.mkdir()
    (source / "package.json").write_text('{"name": "x", "version": "1.0.0"}')
    (source / "app.mjs").write_text("")
    with pytest.raises(OriginBuildError, match="without package-lock.json") as refused:
        build_package_dir(ServerSpec(source=source, runtime="nodejs22.x", command="node app.mjs"),
                          build_dir=tmp_path / "build")
    assert isinstance(refused.value.__cause__, InstallFailedError)
    assert not [p for p in (tmp_path / "build").glob("*server-*") if p.is_dir()]  # nothing half-built left


def test_the_local_package_follows_the_programs_link_rule(tmp_path: Path):
    """One rule, the program's (components.lambda_package.folder_files): a folder link inside
    is packaged as its files, a link out is refused naming it, before anything is built."""
    source = tmp_path / "server"
    (source / "real").mkdir(parents=True)
    (source / "real" / "util.py").write_text("X = 1\n")
    (source / "lib").symlink_to("real")
    server = ServerSpec(source=source, runtime="python3.13", command="python3 -c pass")
    package = build_package_dir(server, build_dir=tmp_path / "build")
    assert (package / "lib" / "util.py").read_text() == "X = 1\n" and not (package / "lib").is_symlink()
    (tmp_path / "credentials").write_text("SECRET-OUTSIDE")
    (source / "creds").symlink_to("../credentials")
    with pytest.raises(OriginBuildError, match="'creds' is a link to '../credentials', which leads outside the folder"):
        build_package_dir(server, build_dir=tmp_path / "build")
    assert not [p for p in (tmp_path / "build").rglob("creds")]


def test_a_command_that_is_not_one_simple_command_is_refused_naming_server_command(tmp_path: Path):
    with pytest.raises(OriginBuildError, match=r"server.command = './server \"x': has an unclosed double quote"):
        ServerSpec(source=tmp_path, runtime="python3.13", command='./server "x')
