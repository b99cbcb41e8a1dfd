"""``mcp-edge:servers``: many MCP servers behind one edge, checked before any resource exists.

The key maps a name to a server. Each entry takes exactly what ``mcp-edge:server`` takes
(checked by ``stack_config.checks``' own server check, its problems named at the entry's key)
plus:

- ``regions``: the stack regions it runs in (a subset of ``mcp-edge:regions``, default all);
- sizing overrides of the stack's origin keys: ``memoryMb``, ``provisionedMin``,
  ``provisionedMax``, ``reservedConcurrency`` and ``coldStart``, each within the bounds of the
  stack key it overrides (``components/settings.py``).

A server's public MCP endpoint is ``/<name>/mcp``; the edge maps it onto the server's own
``path``. ``mcp-edge:server`` stays the one-server case (``hosted_servers``' N=1): its public
path is ``mcpPath``, as it always was. Setting both keys is refused.

This module is the model and its checks; the program does not deploy ``servers`` yet, so
``build_stack_config`` refuses a valid map as "not deployable yet" rather than ignore it
(docs/design/many-servers.md lists the remaining steps).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from components import settings
from components.origin import SNAPSTART_RUNTIMES, SNAPSTART_UNAVAILABLE_REGIONS
from components.server_names import server_tag, tag_collisions
from edge.firewall_rules import RATE_LIMIT_RANGE, TOOL_NAME, WELL_KNOWN_PREFIX, FirewallSettings
from edge.server_catalog import card_problems
from edge.viewer_function import PROTECTED_RESOURCE_METADATA
from edge.waf_capacity import ToolLimit, capacity_for
from stack_config import checks
from stack_config.checks import ConfigError, Getter
from stack_config.keys import PROJECT
from stack_config.model import OriginSizing, ServerConfig, StackConfig
from stack_config.suggest import did_you_mean

SERVERS_KEY = "servers"
LEGACY_KEY = "server"
# A server's name: its public path segment (/<name>/mcp) and a part of its resource names.
NAME_PATTERN = re.compile(r"[a-z][a-z0-9-]{0,29}")
NAME_RULE = "1-30 lower-case letters, digits or '-', starting with a letter (it is the path segment /<name>/mcp)"
# Each server's public MCP endpoint under its name.
PUBLIC_MCP_SUFFIX = "/mcp"
# First path segments the edge answers itself, which no server may take: /.well-known/ (the
# protected resource metadata, edge.viewer_function and the gate; the Server Cards catalog),
# and oauth (the authorization server's endpoints, authTokenUrl's default <issuer>/oauth/token
# and the dev authorization server's /oauth/authorize and /oauth/register, when the issuer
# shares the edge's domain).
RESERVED_NAMES = frozenset({WELL_KNOWN_PREFIX.strip("/"), "oauth"})
# The design's size (docs/design/many-servers.md): the KeyValueStore, the gate's constants and
# the web ACL are sized for this many servers.
MAX_SERVERS = 50
# An entry's own keys besides mcp-edge:server's, and the stack keys whose bounds they take.
ENTRY_KEYS = ("regions", "audience", "memoryMb", "provisionedMin", "provisionedMax", "reservedConcurrency",
              "coldStart")
SIZING_KEYS: dict[str, tuple[str, settings.Setting]] = {
    "memoryMb": ("memory_mb", settings.ORIGIN_MEMORY_MB),
    "provisionedMin": ("provisioned_min", settings.ORIGIN_PROVISIONED_MIN),
    "provisionedMax": ("provisioned_max", settings.ORIGIN_PROVISIONED_MAX),
    "reservedConcurrency": ("reserved_concurrency", settings.ORIGIN_RESERVED_CONCURRENCY),
}
# Stack keys that say something of the one server only, refused beside servers.
LEGACY_ONLY_KEYS = ("mcpPath",)
# With servers, wafToolLimits names each limit <server>/<tool> (checked here, not by checks).
TOOL_LIMITS_KEY = "wafToolLimits"
# An audience of the entry's own: what its tokens carry instead of its resource URL.
AUDIENCE_PATTERN = re.compile(r"[\x21-\x7e]{1,1024}")


@dataclass(frozen=True)
class ServerSizing:
    """An entry's overrides of the stack's origin sizing; None: the stack's value."""

    memory_mb: int | None = None
    provisioned_min: int | None = None
    provisioned_max: int | None = None
    reserved_concurrency: int | None = None
    cold_start: str | None = None

    def applied_to(self, origin: OriginSizing) -> OriginSizing:
        """The stack's (or a region's) sizing with this server's overrides."""
        changes = {f: getattr(self, f) for f in ("memory_mb", "provisioned_min", "provisioned_max",
                                                 "reserved_concurrency") if getattr(self, f) is not None}
        return replace(origin, **changes)


@dataclass(frozen=True)
class HostedServer:
    """One MCP server the edge fronts: the legacy ``mcp-edge:server`` (``name`` None) or an
    entry of ``mcp-edge:servers``."""

    name: str | None
    config: ServerConfig
    public_path: str
    """The path viewers call on the edge: ``/<name>/mcp``, or ``mcpPath`` for ``mcp-edge:server``."""
    regions: tuple[str, ...]
    sizing: ServerSizing = field(default_factory=ServerSizing)
    audience: str | None = None
    """The ``aud`` its tokens carry; None: its resource URL, ``https://<domain><public_path>``."""
    tool_limits: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    """Tool -> tools/call requests per token per WAF window (``wafToolLimits``' ``<name>/<tool>`` keys)."""

    @property
    def key(self) -> str:
        """The stack key its settings and problems are named by."""
        return f"{PROJECT}:{LEGACY_KEY}" if self.name is None else f"{PROJECT}:{SERVERS_KEY}.{self.name}"

    @property
    def origin_path(self) -> str:
        """Where the server itself serves MCP: the edge maps ``public_path`` onto it."""
        return self.config.path

    @property
    def metadata_path(self) -> str:
        """Its RFC 9728 protected resource metadata: the well-known path with ``public_path`` appended."""
        return PROTECTED_RESOURCE_METADATA + self.public_path

    def resource(self, origin: str) -> str:
        """Its protected resource identifier (RFC 8707/9728) on the edge at ``origin`` (https://host)."""
        return origin.rstrip("/") + self.public_path

    def audience_at(self, origin: str) -> str:
        """The ``aud`` the edge requires of its tokens: its own audience, else its resource."""
        return self.audience or self.resource(origin)


def public_path_of(name: str) -> str:
    return f"/{name}{PUBLIC_MCP_SUFFIX}"


def normalized_name(name: str) -> str:
    """What a name most likely means: lower case, separators as '-', trimmed. Two names that
    normalize alike are one server written twice."""
    return re.sub(r"[\s_.]+", "-", name.strip().lower()).strip("-")


def looks_like_path(tool: str) -> bool:
    """A tool name a viewer could confuse with a path (``/admin``, ``github/search``, ``..``):
    with many servers, ``<server>/<tool>`` names a server's tool (wafToolLimits), so a tool
    name holds no '/'."""
    return "/" in tool or "\\" in tool or set(tool) <= {"."}


# --- checking ---------------------------------------------------------------------------------


def _rekeyed(problem: str, name: str) -> str:
    """A problem ``checks`` names at ``mcp-edge:server`` (its check is written for that key),
    named at the entry instead: ``mcp-edge:server.runtime`` -> ``mcp-edge:servers.<name>.runtime``."""
    entry = f"{SERVERS_KEY}.{name}"
    problem = re.sub(rf"{PROJECT}:{LEGACY_KEY}(?=[ .:;]|$)", f"{PROJECT}:{entry}", problem)
    # Its sentences name sibling keys as server.<key> (``required with server.source``).
    problem = re.sub(rf"(?<=[ (]){LEGACY_KEY}(?=\.[a-zA-Z])", entry, problem)
    return re.sub(rf"(?<= of ){LEGACY_KEY}(?=[:;])", entry, problem)


def _check_names(problems: list[str], raw: Mapping[Any, Any]) -> list[str]:
    """The valid, distinct names of the map, in its order; a problem for every other."""
    where = f"{PROJECT}:{SERVERS_KEY}"
    by_normal: dict[str, list[str]] = {}
    names: list[str] = []
    for key in raw:
        if not isinstance(key, str):
            problems.append(f"{where} has the name {key!r}: a server's name must be {NAME_RULE}")
            continue
        by_normal.setdefault(normalized_name(key), []).append(key)
    for normal, spellings in by_normal.items():
        if len(spellings) > 1:
            problems.append(f"{where} names one server {len(spellings)} times ({', '.join(map(repr, spellings))}): "
                            f"names are compared as written in lower case with '-' ({normal!r}); keep one entry")
            continue
        (key,) = spellings
        if normal in RESERVED_NAMES or key.strip() in RESERVED_NAMES:
            problems.append(f"{where}.{key} is a reserved name: the edge serves /{key.strip().lower()}/ itself (reserved: "
                            f"{', '.join(sorted(RESERVED_NAMES))}); name the server otherwise")
        elif not NAME_PATTERN.fullmatch(key):
            hint = f"; did you mean {normal!r}?" if NAME_PATTERN.fullmatch(normal) else ""
            problems.append(f"{where} has the name {key!r}: a server's name must be {NAME_RULE}{hint}")
        else:
            names.append(key)
    return names


def _check_regions(problems: list[str], where: str, value: Any, stack_regions: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        problems.append(f"{where} = {value!r}: must be a non-empty list of the stack's regions "
                        f"({', '.join(stack_regions)}); leave it out to run the server in all of them")
        return stack_regions
    seen: list[str] = []
    for index, region in enumerate(value):
        if not isinstance(region, str) or region.strip() not in stack_regions:
            problems.append(f"{where}[{index}] = {region!r}: not one of {PROJECT}:regions ({', '.join(stack_regions)})"
                            + (did_you_mean(region.strip(), stack_regions) if isinstance(region, str) else ""))
        elif region.strip() in seen:
            problems.append(f"{where}[{index}] = {region!r}: lists the region twice: each region at most once")
        else:
            seen.append(region.strip())
    return tuple(seen) or stack_regions


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def _check_sizing(problems: list[str], where: str, entry: Mapping[str, Any], v: Mapping[str, Any],
                  regions: tuple[str, ...], runtime: str | None) -> ServerSizing:
    """The entry's sizing overrides, each within its stack key's bounds, and their combinations
    with the stack's values they inherit (provisioned min <= max <= reserved; a cold-start mode
    without provisioned concurrency takes no provisioned key)."""
    out: dict[str, Any] = {}
    for key, (attr, setting) in SIZING_KEYS.items():
        if key not in entry:
            continue
        value = _integer(entry[key])
        if value is None:
            problems.append(f"{where}.{key} = {entry[key]!r}: must be an integer")
            continue
        checks._in_range(problems, f"{where.removeprefix(PROJECT + ':')}.{key}", value, setting)
        out[attr] = value
    mode = v.get("originColdStart", settings.COLD_START.default)
    if "coldStart" in entry:
        mode = entry["coldStart"]
        if mode not in settings.COLD_START.choices:
            problems.append(f"{where}.coldStart = {mode!r}: must be one of {', '.join(settings.COLD_START.choices)}"
                            + did_you_mean(str(mode), settings.COLD_START.choices))
        else:
            out["cold_start"] = mode
    sizing = ServerSizing(**out)
    if mode != "provisioned":
        for key in ("provisionedMin", "provisionedMax"):
            if key in entry and _integer(entry[key]) != 0:
                problems.append(f"{where}.{key} cannot be combined with coldStart {mode!r} (the entry's or "
                                f"{PROJECT}:originColdStart): {mode} runs without provisioned concurrency")
    if mode == "snapstart" and "coldStart" in entry:
        if runtime is not None and runtime not in SNAPSTART_RUNTIMES:
            problems.append(f"{where}.coldStart = 'snapstart' cannot be combined with {where}.runtime = {runtime!r}: "
                            f"Lambda SnapStart supports {', '.join(SNAPSTART_RUNTIMES)}")
        for region in regions:
            if region in SNAPSTART_UNAVAILABLE_REGIONS:
                problems.append(f"{where}.coldStart = 'snapstart' cannot be used in {region!r}: Lambda has no "
                                f"SnapStart there; give the entry regions without it, or use provisioned or none")
        if v.get("lwaLayerVersion", settings.LWA_LAYER_VERSION.default) < settings.SNAPSTART_MIN_LWA_LAYER_VERSION:
            problems.append(f"{where}.coldStart = 'snapstart' needs {PROJECT}:lwaLayerVersion "
                            f"{settings.SNAPSTART_MIN_LWA_LAYER_VERSION} or later")
    # The pairs, with what the entry inherits from the stack's keys (named as such).
    def value_of(key: str, stack_key: str) -> tuple[int, str]:
        attr = SIZING_KEYS[key][0]
        own = getattr(sizing, attr)
        return (own, f"{where}.{key}") if own is not None else (v.get(stack_key) or 0, f"{PROJECT}:{stack_key}")

    if mode == "provisioned":
        (low, low_key), (high, high_key) = (value_of("provisionedMin", "originProvisionedMin"),
                                            value_of("provisionedMax", "originProvisionedMax"))
        if high < low and (sizing.provisioned_min is not None or sizing.provisioned_max is not None):
            problems.append(f"{low_key} = {low} exceeds {high_key} = {high}: the minimum must not exceed the maximum")
        reserved, reserved_key = value_of("reservedConcurrency", "originReservedConcurrency")
        if 0 < reserved < high and (sizing.reserved_concurrency is not None or sizing.provisioned_max is not None):
            problems.append(f"{high_key} = {high} exceeds {reserved_key} = {reserved}: Lambda refuses provisioned "
                            "concurrency above reserved concurrency")
    return sizing


def _check_tool_names(problems: list[str], where: str, server: ServerConfig) -> None:
    for tool in server.tool_scopes:
        if looks_like_path(tool):
            problems.append(f"{where}.toolScopes names the tool {tool!r}, which looks like a path: with "
                            f"{PROJECT}:{SERVERS_KEY} a tool name holds no '/' or '\\' and is not only dots "
                            "(<server>/<tool> names one server's tool)")


def check_entry(problems: list[str], name: str, entry: Any, v: Mapping[str, Any],
                stack_regions: tuple[str, ...]) -> HostedServer:
    """One entry of the map: mcp-edge:server's sub-keys by its own check, then the entry's own."""
    where = f"{PROJECT}:{SERVERS_KEY}.{name}"
    if not isinstance(entry, Mapping):
        problems.append(f"{where} = {entry!r}: must be a server (an object with source, image or imageDigest, as "
                        f"{PROJECT}:{LEGACY_KEY} takes)")
        return HostedServer(name, ServerConfig(), public_path_of(name), stack_regions)
    server_part = {k: val for k, val in entry.items() if k not in ENTRY_KEYS}
    own = {k: val for k, val in entry.items() if k in ENTRY_KEYS}
    regions = _check_regions(problems, f"{where}.regions", own["regions"], stack_regions) \
        if "regions" in own else stack_regions
    found: list[str] = []
    # mcp-edge:server's check reads the stack's cold-start mode (and names originColdStart);
    # an entry with a mode of its own is checked against it in _check_sizing instead.
    stack_mode = settings.COLD_START.default if "coldStart" in own else v.get("originColdStart")
    server = checks._check_server(found, server_part, {**v, "originColdStart": stack_mode})
    for problem in found:
        rekeyed = _rekeyed(problem, name)
        if " is not a key of " in rekeyed:
            rekeyed += f"; and the entry's own: {', '.join(ENTRY_KEYS)}"
        problems.append(rekeyed)
    _check_tool_names(problems, where, server)
    sizing = _check_sizing(problems, where, own, v, regions, server.runtime)
    audience = own.get("audience")
    if audience is not None and (not isinstance(audience, str) or not AUDIENCE_PATTERN.fullmatch(audience)):
        problems.append(f"{where}.audience = {audience!r}: must be the aud its tokens carry, 1-1024 printable ASCII "
                        "characters without spaces; leave it out to require the server's resource URL "
                        f"(https://<domain>/{name}/mcp)")
        audience = None
    return HostedServer(name, server, public_path_of(name), regions, sizing, audience)


def servers_problems(get: Getter, v: Mapping[str, Any], stack_regions: tuple[str, ...], stack: str = ""
                     ) -> tuple[list[HostedServer], list[str]]:
    """``mcp-edge:servers`` (``get`` as ``checks.build_stack_config`` takes it, ``v`` its typed
    values) of stack ``stack``: the hosted servers in the map's order, and every problem.
    Unset: none of either."""
    raw = get(SERVERS_KEY)
    if raw is None or raw == "":
        return [], []
    problems: list[str] = []
    where = f"{PROJECT}:{SERVERS_KEY}"
    if get(LEGACY_KEY) is not None:
        problems.append(f"{where} and {PROJECT}:{LEGACY_KEY} are both set: keep {PROJECT}:{LEGACY_KEY} for one server "
                        f"(at {PROJECT}:mcpPath), or move it into {where} as one entry (at /<name>/mcp) and remove "
                        f"{PROJECT}:{LEGACY_KEY}")
    for key in LEGACY_ONLY_KEYS:
        if get(key) is not None:
            problems.append(f"{PROJECT}:{key} applies to {PROJECT}:{LEGACY_KEY} only: with {where} each server's public "
                            f"path is /<name>/mcp (its own path is {where}.<name>.path); remove {PROJECT}:{key}")
    value = v.get(SERVERS_KEY, raw)
    if not isinstance(value, Mapping):
        problems.append(f"{where} must map server names to servers, e.g. {{github: {{image: servers/github}}}}")
        return [], problems
    if not value:
        problems.append(f"{where} is empty: name at least one server, or remove the key to deploy {PROJECT}:{LEGACY_KEY}")
        return [], problems
    if len(value) > MAX_SERVERS:
        problems.append(f"{where} has {len(value)} servers: at most {MAX_SERVERS} (what the edge's KeyValueStore, gate "
                        "and web ACL are sized for)")
    names = _check_names(problems, value)
    hosted = [check_entry(problems, name, value[name], v, stack_regions) for name in names]
    for first, second in tag_collisions(stack, names):
        # One in 16 million for a pair: their resource names, cut to fit, could be one name.
        problems.append(f"{where}.{first} and {where}.{second} get the same resource name tag in stack {stack!r} "
                        f"({server_tag(stack, first)}, components/server_names.py): rename one of them")
    return hosted, problems


def tool_limit_problems(raw: Any, hosted: list[HostedServer]
                        ) -> tuple[list[HostedServer], list[ToolLimit], list[str]]:
    """``wafToolLimits`` beside ``servers``: each limit named ``<server>/<tool>`` (two servers
    may both limit ``search``), the server one of the map's; the servers with their limits, the
    limits as the web ACL's capacity takes them, and every problem."""
    where = f"{PROJECT}:{TOOL_LIMITS_KEY}"
    if raw is None or raw == "" or raw == {}:
        return hosted, [], []
    if not isinstance(raw, Mapping):
        return hosted, [], [f"{where} must map <server>/<tool> to a limit, e.g. {{github/search: 30}}"]
    by_name = {s.name: s for s in hosted if s.name is not None}
    low, high = RATE_LIMIT_RANGE
    problems: list[str] = []
    per_server: dict[str, dict[str, int]] = {}
    limits: list[ToolLimit] = []
    for key, value in raw.items():
        name, sep, tool = str(key).partition("/")
        if not isinstance(key, str) or not sep:
            problems.append(f"{where}.{key}: with {PROJECT}:{SERVERS_KEY} a limit is named <server>/<tool> "
                            f"(e.g. {next(iter(by_name), 'github')}/{key})")
            continue
        if name not in by_name:
            problems.append(f"{where}.{key} names the server {name!r}, which is not in {PROJECT}:{SERVERS_KEY} "
                            f"({', '.join(by_name) or 'none valid'})" + did_you_mean(name, list(by_name)))
            continue
        if not TOOL_NAME.fullmatch(tool):
            problems.append(f"{where}.{key} names the tool {tool!r}: a tool name is 1-128 letters, digits, '_', '-' "
                            "or '.'")
            continue
        limit = _integer(value)
        if limit is None or not low <= limit <= high:
            problems.append(f"{where}.{key} = {value!r}: must be an integer from {low} to {high} (tools/call "
                            "requests per token per evaluation window)")
            continue
        per_server.setdefault(name, {})[tool] = limit
        limits.append(ToolLimit(f"{where}.{key}", by_name[name].public_path, tool, limit))
    hosted = [replace(s, tool_limits=MappingProxyType(per_server.get(s.name or "", {}))) for s in hosted]
    return hosted, limits, problems


def capacity_problems(firewall: FirewallSettings | None, limits: list[ToolLimit]) -> list[str]:
    """The web ACL's quotas (rate-based rules, WCUs) against every server's per-tool limits;
    none when wafEnabled is off."""
    return [] if firewall is None else list(capacity_for(firewall, limits).problems)


def domain_problems(domain: str | None, hosted: list[HostedServer]) -> list[str]:
    """customDomain against the Server Cards the edge publishes for every server (without it,
    the distribution's own short name always fits)."""
    if not domain:
        return []
    found = {p for s in hosted if s.name is not None for p in card_problems(domain, s.name)}
    return [f"{PROJECT}:customDomain = {domain!r}: {p} (the edge's catalog, docs/design/many-servers.md)"
            for p in sorted(found)]


def hosted_servers(config: StackConfig) -> list[HostedServer]:
    """The servers a valid stack hosts. While ``servers`` is not deployable this is the N=1
    case: ``mcp-edge:server`` at ``mcpPath``, in every stack region, at the stack's sizing."""
    return [HostedServer(None, config.server, config.mcp_path, tuple(config.regions),
                         ServerSizing(cold_start=config.cold_start))]


def entry_of(server: HostedServer) -> dict[str, Any]:
    """The stack-file entry a hosted server reads back from (``servers_problems``' inverse):
    what a plan or the local edge shows, and what the round-trip test holds."""
    entry: dict[str, Any] = {}
    unset = ServerConfig()
    for key, attr in checks.SERVER_KEYS.items():
        value = getattr(server.config, attr)
        if value == getattr(unset, attr):
            continue  # a default reads back as unset
        entry[key] = {tool: list(scopes) for tool, scopes in value.items()} if key == "toolScopes" else value
    entry["regions"] = list(server.regions)
    if server.audience is not None:
        entry["audience"] = server.audience
    for key, (attr, _) in SIZING_KEYS.items():
        if getattr(server.sizing, attr) is not None:
            entry[key] = getattr(server.sizing, attr)
    if server.sizing.cold_start is not None:
        entry["coldStart"] = server.sizing.cold_start
    return entry


NOT_DEPLOYABLE_YET = (f"{PROJECT}:{SERVERS_KEY} is valid but not deployable yet: this version deploys "
                      f"{PROJECT}:{LEGACY_KEY} only (docs/design/many-servers.md lists what remains); deploy one "
                      f"server with {PROJECT}:{LEGACY_KEY} meanwhile")


def build_stack_config(get: Getter, stack: str, probe_client_secret: str | None = None,
                       other_custom_domains: Mapping[str, str] | None = None,
                       stack_folder: Path | None = None) -> StackConfig:
    """``checks.build_stack_config`` and ``mcp-edge:servers``' checks, every problem at once.
    With ``servers``, ``wafToolLimits`` is checked here (``<server>/<tool>`` keys) and with the
    web ACL's capacity. A valid ``servers`` map is refused too, as not deployable yet: never
    silently ignored."""
    problems: list[str] = []
    typed = checks._problems_for_types(get, problems)
    typed[checks.STACK_FOLDER] = stack_folder or checks.PROJECT_ROOT
    with_servers = get(SERVERS_KEY) not in (None, "")
    found: list[str] = []
    hosted: list[HostedServer] = []
    limits: list[ToolLimit] = []
    if not problems and with_servers:
        hosted, found = servers_problems(get, typed, tuple(typed.get("regions") or ()), stack)
        hosted, limits, limit_problems = tool_limit_problems(typed.get(TOOL_LIMITS_KEY), hosted)
        found += limit_problems
    # The stack checks know wafToolLimits as one server's (tool -> limit): with servers it is ours.
    stack_get = (lambda name: None if name == TOOL_LIMITS_KEY else get(name)) if with_servers else get
    try:
        config = checks.build_stack_config(stack_get, stack, probe_client_secret=probe_client_secret,
                                           other_custom_domains=other_custom_domains, stack_folder=stack_folder)
    except ConfigError as exc:
        raise ConfigError(exc.problems + found) from None
    if with_servers and not found:
        found = capacity_problems(config.firewall, limits) + domain_problems(config.edge.custom_domain, hosted)
        found = found or [NOT_DEPLOYABLE_YET]
    if found:
        raise ConfigError(found)
    return config
