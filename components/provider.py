"""The component provider: every component of this package, for any Pulumi language.

``component_provider()`` is the SDK's ``ComponentProvider`` for the components; it
infers the package schema from their args' and outputs' type annotations (and
their docstrings) without a Pulumi CLI. The plugin folder ``component_package/``
serves ``COMPONENTS`` to the engine (``component_provider_host``), so
``pulumi package add <this repository>/component_package`` from a TypeScript, Go,
C#, YAML or Python program generates an SDK with these components.

Construction through the provider (what another language sends) checks the raw inputs
against the schema first (``CheckedComponentProvider``): a key the schema does not declare
(``sizing.memoryMB``), a value of the wrong type (``sizing`` as a list, ``Infinity`` for a
number) or a missing required input is refused with one ``ComponentArgsError`` naming each
input's path and what it allows, before the component or any child is registered; the
components' own checks (ranges, patterns, cross-field rules) follow, as from Python.

``schema.json`` beside this file is the committed snapshot of the inferred schema
(``python -m components.provider --write-schema`` refreshes it, ``--schema`` prints
it; a test fails while it is stale).
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pulumi
from pulumi.provider import ConstructResult
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.provider.server import ComponentInitError

from components.alerts import AlertTopic
from components.edge import EdgeLayer
from components.edge_firewall import EdgeFirewall
from components.operations_dashboard import OperationsDashboard
from components.origin import McpOrigin
from components.probe_fleet import ProbeFleet
from components.probe_results import ProbeResults
from components.type_tokens import PACKAGE, VERSION
from components.validation import ComponentArgsError, schema_input_problems

COMPONENTS: tuple[type[pulumi.ComponentResource], ...] = (AlertTopic, McpOrigin, EdgeLayer, ProbeResults, ProbeFleet,
                                                           EdgeFirewall, OperationsDashboard)
SCHEMA_SNAPSHOT = Path(__file__).with_name("schema.json")


class CheckedComponentProvider(ComponentProvider):
    """The SDK's component provider, refusing inputs its schema does not allow before it maps
    them (the SDK drops undeclared keys and reads a non-object as absent)."""

    def construct(self, name: str, resource_type: str, inputs: Any,
                  options: pulumi.ResourceOptions | None = None) -> ConstructResult:
        schema = json.loads(self.schema or "{}")
        resource = schema.get("resources", {}).get(resource_type)
        if resource is not None:
            problems = schema_input_problems(inputs, resource.get("inputProperties", {}),
                                             resource.get("requiredInputs", ()), schema.get("types", {}))
            if problems:
                raise ComponentArgsError(resource_type.rsplit(":", 1)[-1], name, problems)
        try:
            return super().construct(name, resource_type, inputs, options)
        except ComponentInitError as error:
            # The component's own checks refused its args: the same error as the schema's.
            if isinstance(error.inner, ComponentArgsError):
                raise error.inner from None
            raise


def component_provider() -> ComponentProvider:
    return CheckedComponentProvider(list(COMPONENTS), PACKAGE, None, VERSION)


def inferred_schema() -> dict[str, Any]:
    """The package schema the SDK infers from the components (what consumers' SDKs are generated from)."""
    schema = component_provider().schema
    assert schema is not None, "the ComponentProvider inferred no schema"
    return json.loads(schema)


def schema_text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m components.provider",
                                     description="The component package's inferred schema.")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--schema", action="store_true", help="print the inferred schema")
    action.add_argument("--write-schema", action="store_true", help=f"refresh the snapshot {SCHEMA_SNAPSHOT.name}")
    args = parser.parse_args(argv)
    text = schema_text(inferred_schema())
    if args.write_schema:
        SCHEMA_SNAPSHOT.write_text(text, encoding="utf-8")
        print(f"wrote {SCHEMA_SNAPSHOT}")
    else:
        print(text, end="")


if __name__ == "__main__":
    main(sys.argv[1:])
