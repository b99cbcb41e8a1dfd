"""Checking a component's args at construction, before any child resource exists.

Every component collects every problem with its plain (known) args and raises one
``ComponentArgsError`` naming the component, its resource name, each arg (as the
Python field path, e.g. ``sizing.memory_mb``), the bad value and what is allowed.
Values that are Outputs (they come from other resources) are only known at
deployment; they are not checked here.
"""

import math
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


# --- the construct path: raw inputs from another language, against the package schema ---------

_SHOWN_CHARS = 60


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."


def _json_kind(spec: Mapping[str, Any], types: Mapping[str, Any]) -> str:
    """What a schema property allows, in words, for a problem's "must be"."""
    ref = spec.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/types/"):
        return f"an object with {', '.join(sorted(types[ref.removeprefix('#/types/')]['properties']))}"
    kind = spec.get("type")
    return {"string": "a string", "integer": "a whole number", "number": "a finite number", "boolean": "true or false",
            "array": "a list", "object": "a map of names to values"}.get(str(kind), "a value")


def schema_input_problems(inputs: Any, properties: Mapping[str, Any], required: Collection[str],
                          types: Mapping[str, Any], path: str = "") -> list[str]:
    """Every problem of ``inputs`` (an object's raw values, camelCase as another language sends
    them) against the package schema's ``properties``: keys the schema does not declare, required
    ones missing, and values of the wrong type, each named by its input path (``sizing.memoryMb``,
    ``originHosts['eu-west-1']``). Values still unknown (Outputs of other resources) pass."""
    where = path or "the inputs"
    if not isinstance(inputs, Mapping):
        return [f"{where} = {_shown(inputs)}: must be an object"]
    problems: list[str] = []
    for key in inputs:
        if key not in properties:
            hint = _closest_name(str(key), properties)
            problems.append(f"{path + '.' if path else ''}{key} is not an input{' of ' + path if path else ''}"
                            + (f"; did you mean {hint}?" if hint else "")
                            + f" (inputs: {', '.join(sorted(properties))})")
    for name, spec in properties.items():
        value = inputs.get(name)
        full = f"{path}.{name}" if path else name
        if value is None:
            if name in required:
                problems.append(f"{full} is required")
            continue
        problems += _value_problems(value, spec, full, types)
    return problems


def _value_problems(value: Any, spec: Mapping[str, Any], path: str, types: Mapping[str, Any]) -> list[str]:
    if not is_known(value):
        return []
    ref = spec.get("$ref")
    if isinstance(ref, str):
        if not ref.startswith("#/types/"):
            return []  # pulumi.json#/Any and the like: any value
        type_def = types[ref.removeprefix("#/types/")]
        if not isinstance(value, Mapping):
            return [f"{path} = {_shown(value)}: must be {_json_kind(spec, types)}"]
        return schema_input_problems(value, type_def.get("properties", {}), type_def.get("required", ()), types, path)
    kind = spec.get("type")
    wrong = [f"{path} = {_shown(value)}: must be {_json_kind(spec, types)}"]
    if kind == "string":
        return [] if isinstance(value, str) else wrong
    if kind == "boolean":
        return [] if isinstance(value, bool) else wrong
    if kind in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return wrong
        if isinstance(value, float) and (not math.isfinite(value) or (kind == "integer" and not value.is_integer())):
            return wrong
        return []
    if kind == "array":
        if not isinstance(value, (list, tuple)):
            return wrong
        return [p for i, item in enumerate(value) for p in _item_problems(item, spec.get("items", {}), f"{path}[{i}]",
                                                                           types)]
    if kind == "object":
        if not isinstance(value, Mapping):
            return wrong
        entry = spec.get("additionalProperties", {})
        problems = []
        for key, item in value.items():
            if not isinstance(key, str):
                problems.append(f"{path} has the key {_shown(key)}: keys must be strings")
                continue
            problems += _item_problems(item, entry, f"{path}[{key!r}]", types)
        return problems
    return []


def _item_problems(item: Any, spec: Mapping[str, Any], path: str, types: Mapping[str, Any]) -> list[str]:
    if item is None:
        return [f"{path} = None: must be {_json_kind(spec, types)}"]
    return _value_problems(item, spec, path, types)


def _closest_name(name: str, names: Collection[str]) -> str | None:
    import difflib

    lowered = {n.lower(): n for n in names}
    if name.lower() in lowered:
        return lowered[name.lower()]
    prefixed = [n for n in names if n.lower().startswith(name.lower()) or name.lower().startswith(n.lower())]
    if len(prefixed) == 1:
        return prefixed[0]
    match = difflib.get_close_matches(name, list(names), n=1, cutoff=0.75)
    return match[0] if match else None
