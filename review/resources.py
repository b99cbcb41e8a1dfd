"""Reading what a mock run recorded, for the plan and the contract checks.

The mock monitor hands inputs over as the engine sees them: secret values wrapped in
Pulumi's secret envelope, numbers as floats, archives as asset objects. These helpers
turn that into plain values (``plain``), tell regional resources from global ones
(IAM and CloudFront take no ``region``), and walk the component tree from the parent
URNs without quadratic look-ups.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pulumi_aws
import yaml
from pulumi.runtime.rpc import is_rpc_secret, unwrap_rpc_secret

from devkit.mock_program import DEFAULT_REGION, ProgramRun, Resource
from stack_config.loading import PROJECT_ROOT, stack_file_path

GLOBAL = "global"


def is_secret(value: Any) -> bool:
    return is_rpc_secret(value)


def plain(value: Any) -> Any:
    """The value with every secret envelope removed and integral floats as ints."""
    value = unwrap_rpc_secret(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def get_path(inputs: dict[str, Any], path: str) -> list[tuple[str, Any]]:
    """Values at a dotted input path; ``a[].b`` descends into every item of list ``a``.

    Returns (concrete path, value) pairs, e.g. ``origins[2].customOriginConfig.x``.
    A missing key yields nothing (the input is unset: AWS's default applies).
    """
    found: list[tuple[str, Any]] = [("", plain(inputs))]
    for part in path.split("."):
        each = part.endswith("[]")
        key = part[:-2] if each else part
        step: list[tuple[str, Any]] = []
        for where, value in found:
            if not isinstance(value, dict) or value.get(key) is None:
                continue
            child = value[key]
            here = f"{where}.{key}" if where else key
            if each:
                if isinstance(child, list):
                    step.extend((f"{here}[{i}]", item) for i, item in enumerate(child))
            else:
                step.append((here, child))
        found = step
    return found


@functools.cache
def takes_region(resource_type: str) -> bool:
    """Whether the pulumi-aws resource has a ``region`` argument (pulumi-aws 7 gives one
    to every regional service; global services such as IAM and CloudFront have none)."""
    package, _, rest = resource_type.partition(":")
    if package != "aws":
        return False
    module, _, cls_name = rest.partition(":")
    module = module.split("/")[0]
    with warnings.catch_warnings():
        # Loading a pulumi-aws module warns about its deprecated resources: not ours.
        warnings.simplefilter("ignore", DeprecationWarning)
        namespace = pulumi_aws if module == "index" else getattr(pulumi_aws, module, None) or getattr(
            pulumi_aws, module + "_", None
        )
        cls = getattr(namespace, cls_name, None) if namespace is not None else None
    init = getattr(cls, "_internal_init", None)
    if init is None:
        return True  # unknown to this pulumi-aws: assume regional, as most AWS services are
    return "region" in inspect.signature(init).parameters


@functools.cache
def stack_default_region(stack: str, root: Path = PROJECT_ROOT) -> str:
    """``aws:region`` of the stack file: where a regional resource without ``region=`` goes."""
    try:
        doc = yaml.safe_load(stack_file_path(stack, root).read_text()) or {}
    except (OSError, yaml.YAMLError):
        return DEFAULT_REGION
    return str((doc.get("config") or {}).get("aws:region") or DEFAULT_REGION)


def placement(resource: Resource, stack: str) -> tuple[str, bool]:
    """(region or GLOBAL, whether the region came from the provider default)."""
    if not resource.custom:
        return GLOBAL, False
    if not takes_region(resource.type):
        return GLOBAL, False
    region = plain(resource.inputs.get("region"))
    if region:
        return str(region), False
    return stack_default_region(stack), True


class ResourceTree:
    """Component ancestry of every recorded resource, from the parent URNs."""

    def __init__(self, run: ProgramRun):
        self.run = run

    def parent(self, resource: Resource) -> Resource | None:
        return self.run.parent_of(resource)

    def components(self, resource: Resource) -> tuple[Resource, ...]:
        """Enclosing components, outermost first."""
        chain: list[Resource] = []
        node = self.parent(resource)
        while node is not None:
            chain.append(node)
            node = self.parent(node)
        return tuple(reversed(chain))

    def custom(self) -> Iterator[Resource]:
        return (r for r in self.run.resources if r.custom)


def output(resource: Resource, key: str) -> Any:
    """A computed attribute (as the mocks returned it), plain."""
    return plain(resource.outputs.get(key))


def snapstart_on(function: Any) -> bool:
    """A Lambda function resource whose published versions start from a SnapStart snapshot."""
    settings = plain(function.inputs.get("snapStart")) or {}
    return isinstance(settings, dict) and settings.get("applyOn") == "PublishedVersions"
