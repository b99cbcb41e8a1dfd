"""Checking a component's args at construction, before any child resource exists.

Every component collects every problem with its plain (known) args and raises one
``ComponentArgsError`` naming the component, its resource name, each arg (as the
Python field path, e.g. ``sizing.memory_mb``), the bad value and what is allowed.
Values that are Outputs (they come from other resources) are only known at
deployment; they are not checked here.
"""

import re
import typing
from collections.abc import Collection, Mapping
from typing import Any, TypeVar
from urllib.parse import urlparse

import pulumi

from components import settings
from components.settings import Setting
from edge.regions import AWS_REGIONS
from functions.contract import SCOPE_TOKEN_PATTERN

_SCOPE_TOKEN = re.compile(SCOPE_TOKEN_PATTERN)


_Args = TypeVar("_Args", bound=Mapping[str, Any])


def with_integers(args: _Args, args_type: type) -> _Args:
    """``args`` with every integral number in an ``int`` field (nested args types too) as an int.

    Other languages send numbers as floats, and the SDK's provider (pulumi 3.272) hands
    them on as floats (2048.0) even for integer properties; rendered into names or
    environment variables they would read "2048.0".
    """
    out = dict(args)
    for key, value in args.items():
        hint = args_type.__annotations__.get(key)
        while typing.get_origin(hint) in (typing.NotRequired, typing.Required):
            hint = typing.get_args(hint)[0]
        if hint is int and isinstance(value, float) and value.is_integer():
            out[key] = int(value)
        elif isinstance(value, Mapping) and typing.is_typeddict(hint):
            out[key] = with_integers(value, hint)  # type: ignore[arg-type]
    return out  # type: ignore[return-value]


class ComponentArgsError(ValueError):
    """A component's args that cannot be deployed; lists every problem found."""

    def __init__(self, component: str, name: str, problems: list[str]):
        self.problems = problems
        super().__init__(f"{component} {name!r}: invalid args:\n" + "\n".join(f"  - {p}" for p in problems))


def is_known(value: Any) -> bool:
    """A plain value (not an Output or awaitable whose value comes at deployment)."""
    return not isinstance(value, pulumi.Output) and not hasattr(value, "__await__")


class ArgChecks:
    """Collects problems with one component's args; ``done()`` raises them all at once."""

    def __init__(self, component: str, name: str):
        self.component = component
        self.name = name
        self.problems: list[str] = []

    def problem(self, field: str, value: Any, allowed: str) -> None:
        self.problems.append(f"{field} = {value!r}: {allowed}")

    def required(self, args: Mapping[str, Any], *fields: str) -> bool:
        """The fields are present (and not None); False (with a problem each) if any is missing."""
        missing = [f for f in fields if args.get(f) is None]
        for field in missing:
            self.problems.append(f"{field} is required")
        return not missing

    def region(self, field: str, value: Any) -> None:
        if value not in AWS_REGIONS:
            self.problem(field, value, "must be an AWS region this package knows "
                                       f"(one of {', '.join(sorted(AWS_REGIONS))})")

    def regions(self, field: str, values: Any, *, allow_empty: bool = False) -> None:
        if not isinstance(values, (list, tuple)) or (not values and not allow_empty):
            self.problem(field, values, "must be a list of at least one AWS region")
            return
        for i, value in enumerate(values):
            self.region(f"{field}[{i}]", value)
        if len(set(values)) != len(values):
            self.problem(field, values, "lists a region twice: each region at most once")

    def region_map(self, field: str, mapping: Any, values: str) -> bool:
        """A non-empty mapping keyed by AWS regions (region -> ``values``); True if it is one."""
        if not isinstance(mapping, Mapping) or not mapping:
            self.problem(field, mapping, f"must map at least one region to {values}")
            return False
        for region in mapping:
            self.region(f"{field}[{region!r}]", region)
        return True

    def integer(self, field: str, value: Any, low: int, high: int, unit: str = "") -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.problem(field, value, f"must be an integer from {low} to {high}{unit}")

    def within(self, field: str, value: Any, setting: Setting, unit: str | None = None) -> None:
        """An integer within the setting's bounds (``unit`` instead of the setting's, where the arg says more)."""
        assert setting.low is not None and setting.high is not None
        self.integer(field, value, int(setting.low), int(setting.high), setting.unit if unit is None else unit)

    def number(self, field: str, value: Any, low: float, high: float, *, low_open: bool = False) -> None:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value <= high and (
            value > low if low_open else value >= low)
        if not ok:
            self.problem(field, value, f"must be a number in {'(' if low_open else '['}{low}, {high}]")

    def one_of(self, field: str, value: Any, allowed: Collection[Any]) -> None:
        if value not in allowed:
            self.problem(field, value, f"must be one of {', '.join(map(str, allowed))}")

    def all_of(self, field: str, values: Any, allowed: Collection[str]) -> None:
        if not isinstance(values, (list, tuple)) or not values:
            self.problem(field, values, f"must be a non-empty list of {', '.join(allowed)}")
            return
        for i, value in enumerate(values):
            self.one_of(f"{field}[{i}]", value, allowed)

    def https_url(self, field: str, value: Any) -> None:
        parsed = urlparse(value) if isinstance(value, str) else None
        if parsed is None or parsed.scheme != "https" or not parsed.hostname:
            self.problem(field, value, "must be an https:// URL")

    def scopes(self, field: str, values: Any) -> None:
        if values is None:
            return
        if not isinstance(values, (list, tuple)):
            self.problem(field, values, "must be a list of OAuth scopes")
            return
        for i, value in enumerate(values):
            if not isinstance(value, str) or not _SCOPE_TOKEN.fullmatch(value):
                self.problem(f"{field}[{i}]", value, "must be an RFC 6749 scope token (printable ASCII without "
                                                     "spaces, quotes or backslashes)")

    def text(self, field: str, value: Any) -> None:
        if not isinstance(value, str) or not value.strip():
            self.problem(field, value, "must be a non-empty string")

    def name_prefix(self, field: str, value: Any) -> None:
        if not settings.SERVER_ID.matches(value):
            self.problem(field, value, f"must be {settings.SERVER_ID.rule}")

    def mcp_path(self, field: str, value: Any) -> None:
        if not settings.MCP_PATH.matches(value) or "//" in value:
            self.problem(field, value, f"must be {settings.MCP_PATH.rule}")

    def dns_name(self, field: str, value: Any) -> None:
        if not settings.DNS_NAME.matches(value):
            self.problem(field, value, f"must be {settings.DNS_NAME.rule}")

    def done(self) -> None:
        if self.problems:
            raise ComponentArgsError(self.component, self.name, self.problems)
