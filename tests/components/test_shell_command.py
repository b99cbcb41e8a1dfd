"""A server's command is one POSIX simple command: the generated run.sh runs any line a shell
accepts as one (assignments before the program, quotes, escaped blanks, $PORT), exactly as
``sh -c`` runs it, with the program replacing the shell; anything else is refused naming
``server.command`` and what is wrong, never a traceback."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.origin import run_sh, server_source_problems
from components.shell_command import CommandError, parse
from components.validation import ComponentArgsError

PORT = "8411"
# Lambda's /bin/sh is bash (Amazon Linux 2023); this machine's is dash: run.sh runs under each here.
SHELLS = [sh for sh in ("/bin/sh", shutil.which("bash"), shutil.which("dash")) if sh]

# The program the commands start: prints its argv, its pid, its working folder and its environment.
SHOW = f"""#!{sys.executable} -I
import json, os, sys
print(json.dumps({{"argv": sys.argv[1:], "pid": os.getpid(), "cwd": os.getcwd(), "env": dict(os.environ)}}))
"""


@pytest.fixture
def package(tmp_path: Path) -> Path:
    root = tmp_path / "package"
    root.mkdir()
    for name in ("show", "my server"):
        (root / name).write_text(SHOW)
        (root / name).chmod(0o755)
    return root


def run_generated(package: Path, command: str, shell: str = "/bin/sh") -> dict:
    """The generated run.sh, run by ``shell`` as the adapter starts it: the program's report,
    and whether the program replaced the shell (exec: the same process)."""
    (package / "run.sh").write_bytes(run_sh(command, "provided.al2023"))
    env = {"PATH": "/usr/bin:/bin", "LAMBDA_TASK_ROOT": str(package), "AWS_LWA_PORT": PORT, "KEPT": "from-lambda"}
    proc = subprocess.Popen([shell, str(package / "run.sh")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd="/", text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    report = json.loads(out)
    report["replaced_the_shell"] = report.pop("pid") == proc.pid
    return report


def run_directly(package: Path, command: str, shell: str = "/bin/sh") -> dict:
    """The same line run by ``sh -c`` in the same folder with the same PORT: what a POSIX shell
    makes of it (the reference)."""
    env = {"PATH": "/usr/bin:/bin", "LAMBDA_TASK_ROOT": str(package), "AWS_LWA_PORT": PORT, "PORT": PORT,
           "KEPT": "from-lambda"}
    out = subprocess.run([shell, "-c", command], capture_output=True, text=True, env=env, cwd=package, check=True,
                         timeout=60).stdout
    report = json.loads(out)
    del report["pid"]
    return report


ODD_BUT_LEGAL = [
    # the report's own case: an assignment before the program ("exec: FASTMCP_PORT=8411: not found")
    ("FASTMCP_PORT=$PORT ./show server.py", ["server.py"], {"FASTMCP_PORT": PORT}),
    ("A='x y' B=\"$PORT-z\" C= ./show \"quoted arg\" 'single $PORT' escaped\\ space $PORT",
     ["quoted arg", "single $PORT", "escaped space", PORT], {"A": "x y", "B": f"{PORT}-z", "C": ""}),
    ("./show --port=${PORT} $(echo sub stituted) \"$(printf 'a  b')\" `echo back`",
     [f"--port={PORT}", "sub", "stituted", "a  b", "back"], {}),
    ("\"./my server\" a\\\"b \"c\\$d\" '' \"\" ./show=x", ['a"b', "c$d", "", "", "./show=x"], {}),
    ("X=1 2>&1 ./show '#not a comment' # a comment", ["#not a comment"], {"X": "1"}),
    ("P=${PORT:-none} Q=$((PORT + 1)) ./show ${UNSET:-dflt}", ["dflt"], {"P": PORT, "Q": str(int(PORT) + 1)}),
]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(("command", "argv", "env"), ODD_BUT_LEGAL)
def test_run_sh_runs_any_simple_command_as_sh_does_with_the_program_replacing_the_shell(
        package: Path, shell: str, command: str, argv: list[str], env: dict[str, str]):
    report = run_generated(package, command, shell)
    assert report["argv"] == argv
    assert {k: report["env"].get(k) for k in env} == env
    assert report["env"]["PORT"] == report["env"]["AWS_LWA_PORT"] == PORT and report["env"]["KEPT"] == "from-lambda"
    assert report["cwd"] == str(package)
    assert report["replaced_the_shell"], "run.sh must exec the program (the adapter signals it, not a shell)"
    direct = run_directly(package, command, shell)
    assert (report["argv"], report["cwd"]) == (direct["argv"], direct["cwd"])
    assert {k: report["env"].get(k) for k in env} == {k: direct["env"].get(k) for k in env}


_NAME = st.from_regex(r"\A[A-Z_][A-Z0-9_]{0,6}\Z").filter(lambda n: n not in ("PATH", "PWD", "PORT", "IFS", "_"))
_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=12)


@settings(max_examples=30, deadline=None)
@given(assignments=st.dictionaries(_NAME, _TEXT, max_size=3), args=st.lists(_TEXT, max_size=4))
def test_any_quoted_assignments_and_arguments_reach_the_program_as_written(tmp_path_factory, assignments, args):
    package = tmp_path_factory.mktemp("package")
    (package / "show").write_text(SHOW)
    (package / "show").chmod(0o755)
    command = " ".join([*(f"{k}={shlex.quote(v)}" for k, v in assignments.items()), "./show",
                        *map(shlex.quote, args)])
    report = run_generated(package, command)
    assert report["argv"] == args and report["replaced_the_shell"]
    assert {k: report["env"].get(k) for k in assignments} == assignments


@pytest.mark.parametrize(("command", "what"), [
    ("./server \"--name=a b", 'has an unclosed double quote (") opened at character 10'),
    ("./server 'it", "has an unclosed single quote (') opened at character 10"),
    ("./server $(date", "has an unclosed $(...) opened at character 10"),
    ("./server ${PORT", "has an unclosed ${...} opened at character 10"),
    ("./server `date", "has an unclosed backquote (`) opened at character 10"),
    ("./server \\", "ends with a backslash"),
    ("./server; rm -rf /", "has ';' at character 9: it must be one simple command"),
    ("./server && echo done", "has '&' at character 10"),
    ("./server | tee log", "has '|' at character 10"),
    ("(./server)", "has '(' at character 1"),
    ("if true", "starts with the shell word 'if'"),
    ("FASTMCP_PORT=$PORT", "names no program to start"),
    ("./server <<EOF", "has a here-document (<<)"),
    ("./server >", "has a redirection (>) at character 10 with no target"),
])
def test_a_command_that_is_not_one_simple_command_is_refused_saying_what_is_wrong(command: str, what: str):
    with pytest.raises(CommandError, match=re.escape(what)):
        parse(command)


@pytest.mark.parametrize("runtime", ["provided.al2023", "python3.13", "nodejs22.x", "java21"])
def test_an_unbalanced_quote_is_a_problem_of_server_command_for_every_runtime(tmp_path: Path, runtime: str):
    """The report's case: provided.al2023 read the program with shlex.split after the check and raised."""
    problems = server_source_problems(tmp_path, runtime, './server "--name=a b', None)
    assert ("command", 'has an unclosed double quote (") opened at character 10 (run.sh execs it as one POSIX '
                       "simple command, e.g. 'FASTMCP_PORT=$PORT python3 server.py')") in problems


def test_the_stack_checks_and_the_component_name_server_command(tmp_path: Path):
    from components.origin import check_origin_args
    from tests.components.test_origin import minimal_origin_args
    from tests.stack_config.test_checks import problems_of

    assert ("mcp-edge:server.command = './server \"x': has an unclosed double quote" in
            problems_of(server={"source": "examples/fastmcp", "runtime": "provided.al2023", "command": './server "x'}))
    with pytest.raises(ComponentArgsError, match=r"server.command = .*has an unclosed single quote"):
        check_origin_args("o", minimal_origin_args(server={"source": str(tmp_path), "runtime": "provided.al2023",
                                                           "command": "./server 'x"}))


def test_a_provided_servers_program_is_found_after_its_assignments(tmp_path: Path):
    (tmp_path / "server").write_text("#!/bin/sh\n")
    (tmp_path / "server").chmod(0o755)
    assert server_source_problems(tmp_path, "provided.al2023", "RUST_LOG=info ./server --port $PORT", None) == []
    assert server_source_problems(tmp_path, "provided.al2023", "\"./ser\"ver", None) == []
    assert server_source_problems(tmp_path, "provided.al2023", "$HOME/server", None) == []  # known when it runs
    assert server_source_problems(tmp_path, "provided.al2023", "RUST_LOG=info ./missing", None) == [
        ("source", "must hold the built executable the command starts already: there is no build step without an "
                   "install command (missing: the executable './missing' (marked executable)); or give an install "
                   "command")]
    os.chmod(tmp_path / "server", 0o644)
    assert server_source_problems(tmp_path, "provided.al2023", "./server", None)[0][0] == "source"
