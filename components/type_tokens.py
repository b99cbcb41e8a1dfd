"""The component package's identity: its name, version and type tokens.

Other Pulumi programs (TypeScript, Go, C#, YAML, Python) use these components
through a source-based component package (``component_package/``); the SDK's
provider requires the type token ``<package>:index:<Class>``. The components had module-style tokens before
(``mcpedge:origin:McpOrigin``); a component's type is part of its URN and of every
child's URN, so each component carries an alias to its old token and an update of
an existing stack moves nothing.
"""

import pulumi

PACKAGE = "mcpedge"
VERSION = "0.1.0"


def component_type(class_name: str) -> str:
    """The type token the component provider requires: ``mcpedge:index:<Class>``."""
    return f"{PACKAGE}:index:{class_name}"


def component_options(opts: pulumi.ResourceOptions | None, *old_types: str) -> pulumi.ResourceOptions:
    """``opts`` plus an alias to each type token the component had before (the engine
    applies a parent's aliases to its children too)."""
    aliases: list[pulumi.Input[str | pulumi.Alias]] = [pulumi.Alias(type_=old) for old in old_types]
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=aliases))
