"""The component provider: every component of this package, for any Pulumi language.

``component_provider()`` is the SDK's ``ComponentProvider`` for the components; it
infers the package schema from their args' and outputs' type annotations (and
their docstrings) without a Pulumi CLI. ``main()`` serves it to the engine
(``component_provider_host``): ``PulumiPlugin.yaml`` names ``components/__main__.py``
as the plugin's entry point, so ``pulumi package add <this repository>`` from a
TypeScript, Go, C#, YAML or Python program generates an SDK with these components.

``schema.json`` beside this file is the committed snapshot of the inferred schema
(``python -m components --write-schema`` refreshes it; a test fails while it is stale).
"""

import json
from pathlib import Path
from typing import Any

import pulumi
from pulumi.provider.experimental import component_provider_host
from pulumi.provider.experimental.component import ComponentProvider

from components.alerts import AlertTopic
from components.edge import EdgeLayer
from components.origin import McpOrigin
from components.probe_fleet import ProbeFleet
from components.probe_results import ProbeResults
from components.secrets import OriginSecret
from components.type_tokens import PACKAGE, VERSION

COMPONENTS: tuple[type[pulumi.ComponentResource], ...] = (AlertTopic, OriginSecret, McpOrigin, EdgeLayer, ProbeResults,
                                                           ProbeFleet)
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
    if argv[:1] == ["--write-schema"]:
        SCHEMA_SNAPSHOT.write_text(schema_text(inferred_schema()), encoding="utf-8")
        print(f"wrote {SCHEMA_SNAPSHOT}")
        return
    if argv[:1] == ["--schema"]:
        print(schema_text(inferred_schema()), end="")
        return
    # Started by the Pulumi engine (the plugin's directory, then the engine's address).
    component_provider_host(list(COMPONENTS), PACKAGE, version=VERSION)
