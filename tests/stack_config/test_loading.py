"""Loading under the engine: ``pulumi up`` hands the program every config value of the
stack, and the program refuses a key of its namespace that it does not read, the way
reading the stack file does, before any resource exists."""

from __future__ import annotations

import json

import pulumi
import pytest

from devkit.mock_program import run_program
from stack_config.checks import ConfigError, unknown_key_problems
from stack_config.loading import ProgramConfigError, engine_config_keys, pulumi_config_map

TYPO = "mcp-edge:originMemoryMB is not a key of this project; did you mean mcp-edge:originMemoryMb?"


def test_a_typod_key_in_the_config_the_engine_sets_is_refused_with_a_did_you_mean():
    # run_program installs the config with pulumi.runtime.set_all_config, as the language
    # host does before it runs the program; aws:region is another namespace's and passes.
    with pytest.raises(ConfigError) as refused:
        run_program("prod", config_overrides={"originMemoryMB": 512, "aws:region": "eu-west-1"})
    assert refused.value.problems == [TYPO]


def test_a_typod_key_in_the_pulumi_config_environment_is_refused(monkeypatch: pytest.MonkeyPatch):
    # What the language host passes a Python program: the stack's whole config, as JSON
    # text in PULUMI_CONFIG (pulumi-language-python-exec hands it to set_all_config).
    engine_config = {**pulumi_config_map("prod"), "mcp-edge:originMemoryMB": "512", "aws:region": "us-east-1"}
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(engine_config))
    with pytest.raises(ConfigError) as refused:
        run_program("prod")
    assert refused.value.problems == [TYPO]


def test_a_typod_key_is_refused_with_the_other_problems_and_as_a_run_error():
    # The language host prints a pulumi.RunError as its message alone, anything else with
    # a traceback: the operator of `pulumi up` reads the list of problems only.
    with pytest.raises(ProgramConfigError) as refused:
        run_program("prod", config_overrides={"defaultRegoin": "eu-west-1", "edgePriceClass": "PriceClass_10"})
    assert isinstance(refused.value, pulumi.RunError)
    assert refused.value.problems == [
        "mcp-edge:defaultRegoin is not a key of this project; did you mean mcp-edge:defaultRegion?",
        "mcp-edge:edgePriceClass = 'PriceClass_10': must be one of PriceClass_All, PriceClass_200, PriceClass_100; "
        "did you mean PriceClass_100?",
    ]
    assert str(refused.value).startswith("invalid stack configuration:\n  - mcp-edge:defaultRegoin")


def test_the_engine_config_keys_are_those_installed_and_those_in_the_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"mcp-edge:fromEnvironment": "1"}))
    pulumi.runtime.set_all_config({"mcp-edge:installed": "1", "aws:region": "us-east-1"})
    try:
        assert engine_config_keys() == {"mcp-edge:fromEnvironment", "mcp-edge:installed", "aws:region"}
    finally:
        pulumi.runtime.set_all_config({})


def test_only_keys_of_this_projects_namespace_are_checked():
    assert unknown_key_problems(["aws:region", "pulumi:tags", "other-project:originMemoryMB", "mcp-edge:regions",
                                 "mcp-edge:originMemoryMb"]) == []
    assert unknown_key_problems(["mcp-edge:regoins"]) == [
        "mcp-edge:regoins is not a key of this project; did you mean mcp-edge:regions?"]


@pytest.mark.parametrize("written", [["hunter2-secret"], {"a": "hunter2-secret"}, "tab\there hunter2-secret"])
@pytest.mark.parametrize("key", ["probeClientSecret", "originSecret", "originSecretPrevious"])
def test_the_stack_file_loader_never_prints_a_plaintext_secrets_value(tmp_path, key: str, written: object):
    import yaml

    from stack_config.loading import PROJECT_ROOT, load_from_stack_file

    doc = yaml.safe_load((PROJECT_ROOT / "Pulumi.prod.yaml").read_text())
    doc["config"][f"mcp-edge:{key}"] = written
    path = tmp_path / "Pulumi.leak.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as refused:
        load_from_stack_file(path)
    message = "\n".join(refused.value.problems)
    assert f"mcp-edge:{key}" in message and "hunter2" not in message


# --- two stacks of the project and one custom domain ------------------------------------


def stack_files(folder, **domains: str | None):
    """prod's stack file as Pulumi.<stack>.yaml in ``folder`` for each stack, with its customDomain."""
    import yaml

    from stack_config.loading import stack_file_path

    for stack, domain in domains.items():
        doc = yaml.safe_load(stack_file_path("prod").read_text())
        doc["config"]["mcp-edge:customDomain"] = domain
        # A relative server folder is named from the stack file's folder: name prod's absolutely.
        server = doc["config"]["mcp-edge:server"]
        server["source"] = str(stack_file_path("prod").parent / server["source"])
        if domain is None:
            del doc["config"]["mcp-edge:customDomain"], doc["config"]["mcp-edge:certificateArn"]
        (folder / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc))


def test_a_custom_domain_another_stack_of_the_project_uses_is_refused_naming_the_key_and_the_stack(tmp_path):
    # CloudFront refuses a second distribution with the same alias (CNAMEAlreadyExists).
    from stack_config.loading import load_from_stack_file

    stack_files(tmp_path, prod="mcp.acme.example", staging="mcp.acme.example")
    with pytest.raises(ConfigError) as refused:
        load_from_stack_file(tmp_path / "Pulumi.staging.yaml")
    (problem,) = refused.value.problems
    assert problem.startswith("mcp-edge:customDomain = 'mcp.acme.example' is also the customDomain of stack 'prod' "
                              "(Pulumi.prod.yaml)")
    assert "CNAMEAlreadyExists" in problem


def test_stacks_with_domains_of_their_own_or_none_load(tmp_path):
    from stack_config.loading import load_from_stack_file

    stack_files(tmp_path, prod="mcp.acme.example", staging="mcp-staging.acme.example", dev=None)
    for stack in ("prod", "staging", "dev"):
        load_from_stack_file(tmp_path / f"Pulumi.{stack}.yaml")


def test_an_unreadable_other_stack_file_does_not_stop_this_one(tmp_path):
    from stack_config.loading import load_from_stack_file

    stack_files(tmp_path, prod="mcp.acme.example")
    (tmp_path / "Pulumi.broken.yaml").write_text("config: [")
    assert load_from_stack_file(tmp_path / "Pulumi.prod.yaml").edge.custom_domain == "mcp.acme.example"


def test_the_program_refuses_a_stack_sharing_the_committed_prod_stacks_custom_domain(tmp_path):
    # Under the engine the program reads the project's other stack files (Pulumi.prod.yaml here).
    stack_files(tmp_path, staging="mcp.acme.example")
    with pytest.raises(ProgramConfigError) as refused:
        run_program("staging", stack_file=tmp_path / "Pulumi.staging.yaml")
    assert any("is also the customDomain of stack 'prod'" in p for p in refused.value.problems)
