"""The GitHub Actions workflow parses, runs exactly the README's check command on every
push, and previews with the official Pulumi action (commenting on the pull request)
only where the credentials it documents are present."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from stack_config.loading import PROJECT_ROOT

WORKFLOW = PROJECT_ROOT / ".github" / "workflows" / "ci.yml"


def readme_check_command(readme: Path = PROJECT_ROOT / "README.md") -> str:
    """The one command the README gives for running every check: the line of a shell
    code block that runs scripts/check."""
    # Fences are paired line by line (a closing fence is a bare ```), so a yaml block
    # earlier in the README cannot shift the pairing.
    blocks = [
        body
        for lang, body in re.findall(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", readme.read_text(), flags=re.S | re.M)
        if lang in ("", "sh", "bash", "shell", "console")
    ]
    commands = [
        # Without a trailing shell comment (`scripts/check   # what it does`).
        re.sub(r"\s+#.*$", "", line).strip().removeprefix("$ ")
        for block in blocks
        for line in block.splitlines()
        if re.match(r"^\s*(\$ )?(\./)?scripts/check\b", line)
    ]
    assert commands, "the README shows no scripts/check command in a code block"
    return commands[0]


@pytest.fixture(scope="module")
def workflow() -> dict[Any, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def triggers(workflow: dict[Any, Any]) -> dict[str, Any]:
    # YAML 1.1 reads the key `on` as the boolean True.
    return workflow.get("on") or workflow.get(True) or {}


def steps_using(job: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if str(s.get("uses", "")).split("@")[0] == action]


def test_check_job_runs_the_readmes_command_on_every_push(workflow):
    assert "push" in triggers(workflow) and "pull_request" in triggers(workflow)
    job = workflow["jobs"]["check"]
    assert job["runs-on"] == "ubuntu-latest"
    assert "if" not in job, "the check job must run on every push"
    [python] = steps_using(job, "actions/setup-python")
    assert str(python["with"]["python-version"]) == "3.13"
    runs = [s["run"].strip() for s in job["steps"] if "run" in s]
    assert runs == [readme_check_command()]


def test_ci_runner_script_runs_the_same_command():
    script = (PROJECT_ROOT / ".ci" / "run").read_text()
    assert re.search(rf"^\s*(exec\s+)?{re.escape(readme_check_command())}\s*$", script, flags=re.M)


def test_preview_job_uses_the_official_pulumi_action_on_pull_requests(workflow):
    job = workflow["jobs"]["preview"]
    assert "pull_request" in job["if"]
    [preview] = steps_using(job, "pulumi/actions")
    assert re.fullmatch(r"v\d+", preview["uses"].split("@")[1])
    assert preview["with"]["command"] == "preview"
    assert preview["with"]["comment-on-pr"] is True
    assert preview["with"]["stack-name"] == "${{ matrix.stack }}"
    assert preview["env"]["PULUMI_ACCESS_TOKEN"] == "${{ secrets.PULUMI_ACCESS_TOKEN }}"
    assert job["permissions"]["pull-requests"] == "write"


def test_preview_gets_aws_credentials_from_secrets_by_oidc_or_keys(workflow):
    job = workflow["jobs"]["preview"]
    aws = steps_using(job, "aws-actions/configure-aws-credentials")
    assert {"role-to-assume", "aws-access-key-id"} <= {key for step in aws for key in step["with"]}
    assert all("${{ secrets." in str(v) for step in aws for k, v in step["with"].items() if k != "aws-region"
               and k != "role-session-name")
    assert job["permissions"]["id-token"] == "write"
    # Documented for users: which secrets the preview needs.
    header = WORKFLOW.read_text().split("name: CI", 1)[0]
    for secret in ("PULUMI_ACCESS_TOKEN", "AWS_ROLE_TO_ASSUME", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert secret in header


def test_preview_is_skipped_with_a_notice_without_credentials(workflow):
    job = workflow["jobs"]["preview"]
    [notice] = [s for s in job["steps"] if "::notice::" in s.get("run", "")]
    assert "HAS_PULUMI_TOKEN" in notice["if"]
    [preview] = steps_using(job, "pulumi/actions")
    assert "HAS_PULUMI_TOKEN == 'true'" in preview["if"]


def test_readme_command_extraction_reads_code_blocks_only(tmp_path: Path):
    readme = tmp_path / "README.md"
    readme.write_text("Run `scripts/check -x` inline.\n\n```sh\n$ scripts/check\n```\n")
    assert readme_check_command(readme) == "scripts/check"


def test_edge_function_job_runs_cloudfronts_test_function_with_a_stated_bound(workflow):
    job = workflow["jobs"]["edge-function"]
    assert "if" not in job, "the job decides per step, so it can say why it skipped"
    [run] = [s["run"] for s in job["steps"] if "tests.edge.aws_test_function" in s.get("run", "")]
    assert "--max-compute-utilization" in run and "$MAX_COMPUTE_UTILIZATION" in run
    assert 0 < float(job["env"]["MAX_COMPUTE_UTILIZATION"]) <= 100
    aws = steps_using(job, "aws-actions/configure-aws-credentials")
    assert {"role-to-assume", "aws-access-key-id"} <= {key for step in aws for key in step["with"]}
    assert job["permissions"]["id-token"] == "write"
    header = WORKFLOW.read_text().split("name: CI", 1)[0]
    assert "edge-function" in header and "DEVELOPMENT" in header and "test-function" in header


def test_edge_function_job_is_skipped_with_a_notice_without_credentials(workflow):
    job = workflow["jobs"]["edge-function"]
    [notice] = [s for s in job["steps"] if "::notice::" in s.get("run", "")]
    assert "HAS_AWS_ROLE != 'true' && env.HAS_AWS_KEYS != 'true'" in notice["if"]
    for step in job["steps"]:
        if step is not notice:
            assert "HAS_AWS_" in step.get("if", ""), step


def test_check_job_has_the_node_the_typescript_client_needs(workflow):
    [node] = steps_using(workflow["jobs"]["check"], "actions/setup-node")
    assert str(node["with"]["node-version"]) == "20"
    # npm's cache is keyed on every lock file the suite installs from: the TypeScript
    # client's and the TypeScript example server's.
    locks = str(node["with"]["cache-dependency-path"]).split()
    assert "tests/ts_client/package-lock.json" in locks
    for lock in locks:
        assert (PROJECT_ROOT / lock).is_file(), lock
