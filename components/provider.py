"""The component provider: every component of this package, for any Pulumi language.

``component_provider()`` is the SDK's ``ComponentProvider`` for the components; it
infers the package schema from their args' and outputs' type annotations (and
their docstrings) without a Pulumi CLI. The plugin folder ``component_package/``
serves ``COMPONENTS`` to the engine (``component_provider_host``), so
``pulumi package add <this repository>/component_package`` from a TypeScript, Go,
C#, YAML or Python program generates an SDK with these components.

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
from pulumi.provider.experimental.component import ComponentProvider

from components.alerts import AlertTopic
from components.edge import EdgeLayer
from components.edge_firewall import EdgeFirewall
from components.operations_dashboard import OperationsDashboard
from components.origin import McpOrigin
from components.probe_fleet import ProbeFleet
from components.probe_results import ProbeResults
from components.type_tokens import PACKAGE, VERSION

COMPONENTS: tuple[type[pulumi.ComponentResource], ...] = (AlertTopic, McpOrigin, EdgeLayer, ProbeResults, ProbeFleet,
                                                           EdgeFirewall, OperationsDashboard)
SCHEMA_SNAPSHOT = Path(__file__).with_name("schema.json")


def component_provider() -> ComponentProvider:
    return ComponentProvider(list(COMPONENTS), PACKAGE, None, VERSION)


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
