"""devkit.mock_program.run_program imports the program's modules afresh for each run and
leaves the caller's modules as they were."""

from __future__ import annotations

import inspect
import sys

import pulumi

from components.alerts import AlertTopic, AlertTopicArgs
from components.provider import inferred_schema
from devkit.mock_program import run_program


def test_a_run_imports_the_program_afresh_and_gives_the_callers_modules_back():
    # Given the caller's own import of a component module
    before = sys.modules["components.alerts"]
    seen: list[object] = []

    def program() -> None:
        # When a program run imports it
        import components.alerts

        seen.append(components.alerts)
        topic = AlertTopic("t", AlertTopicArgs(server_id="acme-mcp", region="eu-west-1"))
        pulumi.export("arn", topic.arn)

    run = run_program(program=program)
    # Then the run had a fresh module, and the caller has its own back: its classes can
    # still be read from source (the component schema's descriptions come from there)
    assert seen and seen[0] is not before
    assert sys.modules["components.alerts"] is before
    assert inspect.getsource(AlertTopic).startswith("class AlertTopic(")
    assert run.outputs["arn"].startswith("arn:aws:sns:eu-west-1:")


def test_the_inferred_schema_keeps_its_descriptions_after_a_program_run():
    schema = inferred_schema()
    run_program(program=lambda: None)
    assert inferred_schema() == schema
    assert "description" in schema["resources"]["mcpedge:index:AlertTopic"]["inputProperties"]["serverId"]
