"""Checking the stack config: raw values in, one typed ``StackConfig`` out, or every problem at once.

Validation runs before any resource exists and reports every problem at once, each
naming the key, the bad value and what is allowed. That includes what only shows
once rendered but is known from the config alone: the CloudFront Function's size
(rendered with ``edge.viewer_function``'s own renderer) and each Lambda function's
environment against Lambda's 4 KB limit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import urlparse

from components import naming, settings
from components.image import IMAGE_DIGEST_PATTERN, LWA_IMAGE_TAGS
from components.origin import (
    DOCKERFILE,
    RUNTIMES,
    SNAPSTART_RUNTIMES,
    SNAPSTART_UNAVAILABLE_REGIONS,
    server_source_problems,
)
from components.settings import Setting
from edge.firewall_rules import FirewallSettings, setting_problems
from edge.protocol import (
    EDGE_READ_TIMEOUT_FOR_STREAMING_S,
    EDGE_READ_TIMEOUT_MAX_S,
    EDGE_READ_TIMEOUT_MIN_S,
    EDGE_READ_TIMEOUT_WITHOUT_QUOTA_INCREASE_S,
    ORIGIN_SSE_KEEPALIVE_S,
)
from edge.regions import AWS_REGIONS, EDGE_CONTROL_REGION
from edge.viewer_function import ViewerFunctionTooLargeError, origin_problem, render_viewer_function
from functions.contract import SCOPE_TOKEN_PATTERN
from stack_config.keys import ASCII_ONLY_KEYS, KEY_BY_NAME, KEYS, PROJECT, ConfigKey
from stack_config.model import (
    AlarmConfig,
    AuthConfig,
    AutoScaling,
    EdgeConfig,
    FailoverConfig,
    OriginSizing,
    ProbeConfig,
    ServerConfig,
    StackConfig,
)
from stack_config.suggest import closest, did_you_mean

# Where relative server folders are taken from.
PROJECT_ROOT = Path(__file__).resolve().parent.parent
# mcp-edge:server's sub-keys (camelCase, as a stack file writes them) -> ServerConfig's fields.
SERVER_KEYS = {"source": "source", "runtime": "runtime", "command": "command", "install": "install",
               "readinessPath": "readiness_path", "image": "image", "imageDigest": "image_digest", "path": "path",
               "toolScopes": "tool_scopes", "getStream": "get_stream"}
SERVER_KINDS = ("source", "image", "imageDigest")
FOLDER_KEYS = ("runtime", "command", "install", "readinessPath")
# An MCP tool name (the MCP specification's guidance: 1-128 of these characters).
TOOL_NAME_PATTERN = re.compile(r"[A-Za-z0-9_./-]{1,128}")
# Secrets Manager secret names: 1-512 of these characters.
SECRET_NAME_PATTERN = re.compile(r"[A-Za-z0-9/_+=.@-]{1,512}")
# An OAuth client id (an opaque id, or a client ID metadata document's https URL).
CLIENT_ID_PATTERN = re.compile(r"[\x21-\x7e]{1,1024}")
# An OAuth client secret (RFC 6749 VSCHAR, printable ASCII); the stack stores it in Secrets Manager.
CLIENT_SECRET_PATTERN = re.compile(r"[\x20-\x7e]{1,4096}")
# Keys that only configure provisioned concurrency, and the override keys that do.
PROVISIONED_KEYS = ("originProvisionedMin", "originProvisionedMax", "originUtilizationTarget",
                    "originScaleInCooldownSeconds", "originScaleOutCooldownSeconds")
PROVISIONED_OVERRIDE_KEYS = ("provisionedMin", "provisionedMax")
MAX_STRING_CHARS = 4096
# Lambda refuses a function whose environment (names and values) exceeds 4 KB.
LAMBDA_ENVIRONMENT_BYTES = 4096
# Each function's variables besides the config-sized ones in environment_budget
# (names, adapter settings, header names, the region, queue and topic ARNs): an upper
# bound, which tests/stack_config/test_checks_hostile.py checks against the rendered program.
ENVIRONMENT_FIXED_BYTES = 1024
ORIGIN_OVERRIDE_KEYS = {
    "memoryMb": "memory_mb",
    "timeoutSeconds": "timeout_s",
    "reservedConcurrency": "reserved_concurrency",
    "provisionedMin": "provisioned_min",
    "provisionedMax": "provisioned_max",
}



class ConfigError(ValueError):
    """Stack configuration that cannot be deployed; lists every problem found."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(
            "invalid stack configuration:\n" + "\n".join(f"  - {p}" for p in problems)
        )



# --- reading raw values -------------------------------------------------------------


def unknown_key_problems(full_keys: Iterable[str]) -> list[str]:
    """The keys of this project's namespace (``mcp-edge:...``) that it does not read, each
    named with the key it most likely means. A typo'd key would otherwise be ignored and
    its intended key left at its default; other namespaces (aws:, pulumi:) are not ours."""
    problems = []
    for full_key in full_keys:
        namespace, _, name = str(full_key).partition(":")
        if namespace != PROJECT or name in KEY_BY_NAME:
            continue
        match = closest(name, KEY_BY_NAME)
        problems.append(f"{full_key} is not a key of this project"
                        + (f"; did you mean {PROJECT}:{match}?" if match else f" (known: {', '.join(KEY_BY_NAME)})"))
    return problems


Getter = Callable[[str], Any]


def _problems_for_types(get: Getter, problems: list[str]) -> dict[str, Any]:
    """Read every key, apply defaults, coerce to its declared type; record problems."""
    values: dict[str, Any] = {}
    for key in KEYS:
        raw = get(key.name)
        if raw is None or (isinstance(raw, str) and raw == "" and key.type != "string"):
            if key.optional:
                values[key.name] = None
                continue
            if key.default is None:
                problems.append(f"{PROJECT}:{key.name} is required: {key.description}")
                continue
            raw = key.default
        try:
            values[key.name] = _coerce(key, raw)
        except (TypeError, ValueError) as exc:
            # A secret's value is never printed, however it was written.
            shown = " (its value not shown)" if key.secret else f" = {raw!r}"
            problems.append(f"{PROJECT}:{key.name}{shown}: {exc}")
    return values


def _coerce(key: ConfigKey, raw: Any) -> Any:
    if key.type == "string":
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
            raise TypeError("must be a string")
        return _checked_text(key, str(raw).strip())
    if key.type == "integer":
        if isinstance(raw, bool):
            raise TypeError("must be an integer, not a boolean")
        if isinstance(raw, int):
            return raw
        if isinstance(raw, str) and re.fullmatch(r"-?\d+", raw.strip()):
            return int(raw)
        raise ValueError("must be an integer")
    if key.type == "boolean":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in ("true", "false"):
            return raw.lower() == "true"
        raise ValueError("must be true or false")
    if key.type == "object":
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ValueError(f"must be an object (not valid JSON: {exc.msg})") from None
        if not isinstance(raw, Mapping):
            raise ValueError("must be an object (a mapping of its sub-keys)")
        return dict(raw)
    if key.type == "array":
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ValueError(f"must be a list of strings (not valid JSON: {exc.msg})") from None
        if not isinstance(raw, (list, tuple)) or not all(isinstance(v, str) for v in raw):
            raise ValueError("must be a list of strings")
        return tuple(_checked_text(key, v.strip()) for v in raw)
    raise AssertionError(f"unknown config type {key.type}")


# The keys whose values are AWS regions: a problem with one lists the regions allowed.
REGION_KEYS = ("regions", "defaultRegion", "probeRegions", "resultsTableHomeRegion")


def _checked_text(key: ConfigKey, text: str) -> str:
    """Encoding rules every string value follows: no control characters (a newline in
    a header value or a name fails mid-deploy), bounded, ASCII where it must be."""
    try:
        return _encoding_checked(key, text)
    except ValueError as exc:
        if key.name in REGION_KEYS:
            raise ValueError(f"{exc} {_allowed_regions()}") from None
        raise


def _encoding_checked(key: ConfigKey, text: str) -> str:
    if len(text) > MAX_STRING_CHARS:
        raise ValueError(f"is {len(text)} characters long: at most {MAX_STRING_CHARS}")
    if any(ord(ch) < 32 or 127 <= ord(ch) < 160 for ch in text):
        raise ValueError("contains a control character (newline, tab, NUL...): not allowed")
    if key.name in ASCII_ONLY_KEYS and not text.isascii():
        raise ValueError("contains non-ASCII characters: it is used in URLs, names or headers (ASCII only)")
    return text


def _check_scopes(problems: list[str], scopes: tuple[str, ...]) -> None:
    """Advertised scopes: RFC 6749 scope tokens, each once, never offline_access (MCP: refresh
    tokens are not a resource requirement, so resources do not advertise it)."""
    for scope in scopes:
        if not isinstance(scope, str) or not re.fullmatch(SCOPE_TOKEN_PATTERN, scope):
            problems.append(f"{PROJECT}:authScopes contains {scope!r}: a scope is printable ASCII without "
                            "spaces, quotes or backslashes (RFC 6749 section 3.3)")
        elif scope == "offline_access":
            problems.append(f"{PROJECT}:authScopes contains 'offline_access': a resource does not advertise it "
                            "(clients ask the authorization server for refresh tokens themselves)")
    if len(set(scopes)) != len(scopes):
        problems.append(f"{PROJECT}:authScopes = {list(scopes)!r}: lists a scope more than once")


def _https_url(value: str) -> bool:
    parsed = urlparse(value)
    return parsed.scheme == "https" and bool(parsed.hostname)


def _in_range(problems: list[str], name: str, value: int, setting: Setting, unit: str | None = None) -> None:
    """``value`` within the setting's bounds (``unit`` instead of the setting's, where the key says more)."""
    if not setting.low <= value <= setting.high:  # type: ignore[operator]
        problems.append(f"{PROJECT}:{name} = {value}: must be between {setting.low} and {setting.high}"
                        f"{setting.unit if unit is None else unit}")


def _check_regions(problems: list[str], name: str, regions: tuple[str, ...], allow_empty: bool) -> None:
    if not regions and not allow_empty:
        problems.append(f"{PROJECT}:{name} is empty: list at least one AWS region, e.g. [us-east-1]")
    seen: set[str] = set()
    for region in regions:
        if region not in AWS_REGIONS:
            problems.append(f"{PROJECT}:{name} contains {region!r}, which is not an AWS region this project knows"
                            + _region_hint(region))
        if region in seen:
            problems.append(f"{PROJECT}:{name} lists {region!r} twice: each region at most once")
        seen.add(region)


# AWS's partitions other than the commercial one (botocore's data/partitions.json, checked
# by the tests): separate accounts, separate CloudFront (none in most), so a region of
# theirs is not a misspelling of a commercial one and gets no did-you-mean.
OTHER_PARTITIONS = (
    ("aws-cn", "AWS China", r"^cn\-\w+\-\d+$"),
    ("aws-us-gov", "AWS GovCloud (US)", r"^us\-gov\-\w+\-\d+$"),
    ("aws-iso", "AWS ISO (US)", r"^us\-iso\-\w+\-\d+$"),
    ("aws-iso-b", "AWS ISOB (US)", r"^us\-isob\-\w+\-\d+$"),
    ("aws-iso-e", "AWS ISOE (Europe)", r"^eu\-isoe\-\w+\-\d+$"),
    ("aws-iso-f", "AWS ISOF", r"^us\-isof\-\w+\-\d+$"),
    ("aws-eusc", "AWS European Sovereign Cloud", r"^eusc\-(de)\-\w+\-\d+$"),
)


def partition_of(region: str) -> tuple[str, str] | None:
    """(partition id, name) of a region in one of AWS's other partitions, else None.
    Matched case-insensitively: 'CN-North-1' is still China's."""
    folded = region.strip().lower()
    for partition, name, pattern in OTHER_PARTITIONS:
        if re.match(pattern, folded):
            return partition, name
    return None


def _allowed_regions() -> str:
    return f"(allowed: {', '.join(sorted(AWS_REGIONS))})"


def _region_hint(region: str) -> str:
    """What follows a problem about a name that is no AWS region this project knows: the
    partition it belongs to when it is another partition's (China, GovCloud, ...), else the
    commercial region it most likely means; and always every region allowed."""
    allowed = " " + _allowed_regions()
    partition = partition_of(region)
    if partition is not None:
        return (f": it is a region of {partition[1]} (partition {partition[0]}), and this project deploys to the "
                f"commercial partition (aws) only" + allowed)
    return did_you_mean(region, AWS_REGIONS) + allowed


def _override_items(entry: str) -> tuple[str, list[tuple[str, str, str | None]]]:
    """An originOverrides entry as written, not yet checked: its region and each of its
    items as (item, key, value), stripped, the value None where the item has no '='; no
    items when the entry has no ':' or nothing after it."""
    region, sep, rest = entry.partition(":")
    if not sep or not rest.strip():
        return region.strip(), []
    items: list[tuple[str, str, str | None]] = []
    for item in rest.split(","):
        key, eq, value = item.partition("=")
        items.append((item.strip(), key.strip(), value.strip() if eq else None))
    return region.strip(), items


def _parse_overrides(
    problems: list[str], entries: tuple[str, ...], regions: tuple[str, ...], base: OriginSizing
) -> dict[str, tuple[OriginSizing, frozenset[str]]]:
    """Each overridden region's sizing (the stack's, with the entry's changes) and the keys
    its entry writes: a problem of a value the entry inherits is the stack key's, not the entry's."""
    overrides: dict[str, tuple[OriginSizing, frozenset[str]]] = {}
    for entry in entries:
        where = f"{PROJECT}:originOverrides entry {entry!r}"
        region, items = _override_items(entry)
        if not items:
            problems.append(f"{where}: must look like 'REGION:key=value[,key=value]'")
            continue
        if region not in regions:
            problems.append(f"{where}: region {region!r} is not in {PROJECT}:regions ({', '.join(regions)})"
                            + did_you_mean(region, regions))
            continue
        if region in overrides:
            problems.append(f"{where}: region {region!r} is overridden twice; use one entry per region")
            continue
        changes: dict[str, int] = {}
        written: set[str] = set()
        for item, k, v in items:
            if v is None or k not in ORIGIN_OVERRIDE_KEYS:
                problems.append(f"{where}: {item!r} is not key=value with key one of {', '.join(ORIGIN_OVERRIDE_KEYS)}"
                                + did_you_mean(k, ORIGIN_OVERRIDE_KEYS))
                continue
            if not re.fullmatch(r"\d+", v):
                problems.append(f"{where}: {k}={v!r} must be a non-negative integer")
                continue
            changes[ORIGIN_OVERRIDE_KEYS[k]] = int(v)
            written.add(k)
        overrides[region] = (replace(base, **changes), frozenset(written))
    return overrides


def _check_sizing(problems: list[str], sizing: OriginSizing, where: str = "",
                  written: frozenset[str] = frozenset(ORIGIN_OVERRIDE_KEYS)) -> None:
    """The stack's sizing (``where`` empty), or one region's override (``where`` the region,
    ``written`` the keys its entry sets). A problem is reported where a value was written:
    an override is blamed only for what its entry sets, and a value it inherits is named
    by its stack key (a bad originMemoryMb is reported once, at originMemoryMb)."""
    def name(key: str) -> str:
        return f"originOverrides[{where}].{key}" if where and key in written else f"origin{key[0].upper()}{key[1:]}"

    def own(*keys: str) -> bool:
        return not where or any(key in written for key in keys)

    for key, setting in (
        ("memoryMb", settings.ORIGIN_MEMORY_MB),
        ("timeoutSeconds", settings.ORIGIN_TIMEOUT_S),
        ("reservedConcurrency", settings.ORIGIN_RESERVED_CONCURRENCY),
    ):
        value = getattr(sizing, ORIGIN_OVERRIDE_KEYS[key])
        # An unset originReservedConcurrency is 0 here (no reservation); a written 0 is refused
        # (at the stack key in build_stack_config, at an override's item here).
        if key == "reservedConcurrency" and value == 0 and not (where and key in written):
            continue
        if key == "reservedConcurrency" and value == 0:
            problems.append(f"{PROJECT}:{name(key)} = 0: Lambda would throttle every call to the region's origin "
                            f"(reserved concurrency 0 stops a function); remove reservedConcurrency from the entry to "
                            f"keep the stack's reservation, or reserve at least 1")
            continue
        if own(key):
            _in_range(problems, name(key), value, setting)
    for key in PROVISIONED_OVERRIDE_KEYS:
        value = getattr(sizing, ORIGIN_OVERRIDE_KEYS[key])
        if value < 0 and own(key):
            problems.append(f"{PROJECT}:{name(key)} = {value}: must be 0 (off) or more")
    # The pairs are compared only when each value is allowed on its own (a bad one is said above).
    low, high = sizing.provisioned_min, sizing.provisioned_max
    if 0 <= high < low and own("provisionedMin", "provisionedMax"):
        if own("provisionedMin"):
            problems.append(f"{PROJECT}:{name('provisionedMin')} = {low}: must not exceed "
                            f"{name('provisionedMax')} = {high}")
        else:
            problems.append(f"{PROJECT}:{name('provisionedMax')} = {high}: must be at least "
                            f"{name('provisionedMin')} = {low}")
    reserved = sizing.reserved_concurrency
    if 0 < reserved < high and own("provisionedMax", "reservedConcurrency"):
        why = "(Lambda refuses provisioned concurrency above reserved concurrency)"
        if own("provisionedMax"):
            problems.append(f"{PROJECT}:{name('provisionedMax')} = {high}: must not exceed "
                            f"{name('reservedConcurrency')} = {reserved} {why}")
        else:
            problems.append(f"{PROJECT}:{name('reservedConcurrency')} = {reserved}: must be at least "
                            f"{name('provisionedMax')} = {high} {why}")


def _check_read_timeout(problems: list[str], read_timeout_s: int, origin: OriginSizing,
                        overrides: Mapping[str, OriginSizing]) -> None:
    """CloudFront's between-packets read timeout against the origins' function timeouts.

    A call may run as long as its function's timeout; it survives the edge only when
    the origin's SSE keep-alive (``ORIGIN_SSE_KEEPALIVE_S``, both eras) comes well
    within the read timeout. Without that, a silent call past the read timeout is a
    504 at the edge while the function keeps running and billing."""
    key = "edgeOriginReadTimeoutSeconds"
    if not EDGE_READ_TIMEOUT_MIN_S <= read_timeout_s <= EDGE_READ_TIMEOUT_MAX_S:
        problems.append(
            f"{PROJECT}:{key} = {read_timeout_s}: must be between {EDGE_READ_TIMEOUT_MIN_S} and "
            f"{EDGE_READ_TIMEOUT_MAX_S} seconds (CloudFront's origin response timeout; above "
            f"{EDGE_READ_TIMEOUT_WITHOUT_QUOTA_INCREASE_S} only after an increase of the account's 'Response timeout "
            "per origin' quota, which python -m review.preflight checks)"
        )
        return
    if read_timeout_s >= EDGE_READ_TIMEOUT_FOR_STREAMING_S:
        return
    longer = {"originTimeoutSeconds": origin.timeout_s} if origin.timeout_s > read_timeout_s else {}
    # ``overrides``: the regions whose entries set timeoutSeconds (an inherited one is said once above).
    longer |= {f"originOverrides[{r}].timeoutSeconds": s.timeout_s for r, s in overrides.items()
               if s.timeout_s > read_timeout_s and s.timeout_s != origin.timeout_s}
    for name, timeout_s in longer.items():
        problems.append(
            f"{PROJECT}:{name} = {timeout_s} exceeds {key} = {read_timeout_s}: a call that long survives the edge "
            f"only by streaming, and the origin's SSE keep-alive comes every {ORIGIN_SSE_KEEPALIVE_S} s; set {key} "
            f"to at least {EDGE_READ_TIMEOUT_FOR_STREAMING_S} or the timeout to at most {read_timeout_s}"
        )


def _probe_client_secret_name(problems: list[str], get: Getter, v: dict[str, Any], stack: str,
                              secret: str | None) -> str:
    """probeClientSecretName (a secret that exists already), or, with probeClientSecret
    set, the name of the secret the stack creates: the stack's own (components/naming.py),
    so two stacks of one account never write the same secret."""
    if not secret:
        return str(v["probeClientSecretName"])
    if not CLIENT_SECRET_PATTERN.fullmatch(secret):
        # Never the value itself: it is a secret.
        problems.append(f"{PROJECT}:probeClientSecret is {len(secret)} characters or has characters outside "
                        "printable ASCII: an OAuth client secret is 1-4096 printable ASCII characters")
    if get("probeClientSecretName") is not None:
        problems.append(
            f"{PROJECT}:probeClientSecretName = {v['probeClientSecretName']!r} and probeClientSecret are both set: "
            "probeClientSecretName names a secret that exists already, probeClientSecret makes the stack create its "
            "own; unset one of them")
    try:
        return naming.physical_name(v["serverId"], "probe-client-secret", limit=naming.SECRETS_MANAGER_SECRET,
                                    stack=stack)
    except ValueError:
        return str(v["probeClientSecretName"])  # a serverId too long to name anything, reported already


def environment_budget(config: StackConfig) -> dict[str, int]:
    """Upper bounds of each function's environment size (bytes of names and values):
    the config-sized variables (components/origin.py, components/probes.py) plus
    ENVIRONMENT_FIXED_BYTES for the rest."""
    auth, server = config.auth, config.server
    # The adapter's settings only, and the readiness path (components/origin.py).
    origin = len(server.readiness_path or server.path)
    probe = len(auth.token_url) + len(auth.probe_client_id) + len(auth.probe_client_secret_name) \
        + len(auth.audience)
    return {"origin": origin + ENVIRONMENT_FIXED_BYTES, "probe": probe + ENVIRONMENT_FIXED_BYTES,
            "consumer": ENVIRONMENT_FIXED_BYTES + len(config.server_id)}


def _check_rendered_sizes(problems: list[str], config: StackConfig) -> None:
    try:
        render_viewer_function(config.viewer_function_settings())
    except ViewerFunctionTooLargeError as exc:
        # The keys whose values the function embeds, the longest (the likeliest culprit) first.
        lengths = sorted({"authIssuer": len(config.auth.issuer), "authAudience": len(config.auth.audience),
                          "authScopes": len(" ".join(config.auth.scopes)),
                          "authAlgorithms": len(",".join(config.auth.algorithms)),
                          "customDomain": len(config.edge.custom_domain or ""),
                          "allowedOrigins": len(",".join(config.edge.allowed_origins)),
                          "mcpPath": len(config.mcp_path)}.items(), key=lambda kv: -kv[1])
        sizes = ", ".join(f"{k} {n}" for k, n in lengths)
        problems.append(f"{PROJECT}:{'/'.join(k for k, _ in lengths)}: {exc} (characters: {sizes})")
    for function, size in environment_budget(config).items():
        if size > LAMBDA_ENVIRONMENT_BYTES:
            problems.append(
                f"{PROJECT}:authIssuer/authAudience/authJwksUrl/authScopes/authTokenUrl/probeClientId/"
                f"probeClientSecretName/customDomain: the {function} function's environment would be up to {size} "
                f"bytes, over Lambda's {LAMBDA_ENVIRONMENT_BYTES}-byte limit (lengths: authIssuer "
                f"{len(config.auth.issuer)}, authAudience {len(config.auth.audience)}, authJwksUrl "
                f"{len(config.auth.jwks_url)}, authScopes {len(','.join(config.auth.scopes))}, authTokenUrl "
                f"{len(config.auth.token_url)})")


def shared_custom_domain_problems(domain: str, other_domains: Mapping[str, str]) -> list[str]:
    """``customDomain`` against the other stacks of the project (stack -> its customDomain):
    CloudFront gives an alternate domain name to one distribution only, so two stacks with
    one domain cannot both deploy (the second gets ``CNAMEAlreadyExists``)."""
    if not domain:
        return []
    return [f"{PROJECT}:customDomain = {domain!r} is also the customDomain of stack {other!r} "
            f"(Pulumi.{other}.yaml): "
            "CloudFront gives an alternate domain name to one distribution only (a second is refused with "
            "CNAMEAlreadyExists); give this stack a domain of its own (and certificateArn a certificate for it), or "
            "leave customDomain and certificateArn unset to use the distribution's own cloudfront.net name"
            for other, theirs in sorted(other_domains.items()) if theirs.strip().lower() == domain.lower()]


def build_stack_config(get: Getter, stack: str, probe_client_secret: str | None = None,
                       other_custom_domains: Mapping[str, str] | None = None,
                       stack_folder: Path | None = None) -> StackConfig:
    """Validate raw values (``get(key)`` returns None when unset) into a StackConfig.
    ``other_custom_domains``: the other stacks of the project and their customDomain, which
    this stack may not use too. ``stack_folder``: the stack file's folder, which a relative
    server folder is named from (default: the project root)."""
    problems: list[str] = []
    v = _problems_for_types(get, problems)
    if problems:
        raise ConfigError(problems)
    # The default server (the project's demo) is the project's folder, wherever the stack file is.
    v[STACK_FOLDER] = stack_folder if stack_folder and get("server") not in (None, "") else PROJECT_ROOT

    regions: tuple[str, ...] = v["regions"]
    _check_regions(problems, "regions", regions, allow_empty=False)
    default_region = v["defaultRegion"] or (regions[0] if regions else "")
    if regions and default_region not in regions:
        problems.append(
            f"{PROJECT}:defaultRegion = {default_region!r}: must be one of regions ({', '.join(regions)})"
            + did_you_mean(default_region, regions)
        )
    probe_regions: tuple[str, ...] = v["probeRegions"] or regions
    _check_regions(problems, "probeRegions", v["probeRegions"], allow_empty=True)
    table_home_region = v["resultsTableHomeRegion"] or (probe_regions[0] if probe_regions else "")
    if v["resultsTableHomeRegion"] and v["resultsTableHomeRegion"] not in AWS_REGIONS:
        problems.append(
            f"{PROJECT}:resultsTableHomeRegion = {v['resultsTableHomeRegion']!r}: must be an AWS region "
            "(one of the probe regions, or a region that keeps the table after its probes were removed)"
            + _region_hint(v["resultsTableHomeRegion"])
        )

    if not settings.SERVER_ID.matches(v["serverId"]):
        problems.append(f"{PROJECT}:serverId = {v['serverId']!r}: must be {settings.SERVER_ID.rule}")
    mcp_path = v["mcpPath"]
    if not settings.MCP_PATH.matches(mcp_path) or "//" in mcp_path:
        problems.append(f"{PROJECT}:mcpPath = {mcp_path!r}: must be {settings.MCP_PATH.rule}")
    elif any(segment in (".", "..") for segment in mcp_path.split("/")):
        problems.append(f"{PROJECT}:mcpPath = {mcp_path!r}: must be normalized (no '.' or '..' segments)")
    elif (mcp_path + "/").startswith("/.well-known/"):
        problems.append(
            f"{PROJECT}:mcpPath = {mcp_path!r}: must not be under /.well-known/ (the edge passes that tree "
            "without a token check, for OAuth metadata)")

    for key in ("authIssuer", "authJwksUrl"):
        if not _https_url(v[key]):
            problems.append(f"{PROJECT}:{key} = {v[key]!r}: must be an https:// URL")
    if not v["authAudience"]:
        problems.append(f"{PROJECT}:authAudience is empty: set the audience your tokens carry")
    token_url = v["authTokenUrl"] or (v["authIssuer"].rstrip("/") + "/oauth/token")
    if v["authTokenUrl"] and not _https_url(v["authTokenUrl"]):
        problems.append(f"{PROJECT}:authTokenUrl = {v['authTokenUrl']!r}: must be an https:// URL")
    if not CLIENT_ID_PATTERN.fullmatch(v["probeClientId"]):
        problems.append(
            f"{PROJECT}:probeClientId = {v['probeClientId']!r}: must be 1-1024 printable ASCII characters without "
            "spaces (the OAuth client id the probes authenticate as)")
    if not SECRET_NAME_PATTERN.fullmatch(v["probeClientSecretName"]):
        problems.append(
            f"{PROJECT}:probeClientSecretName = {v['probeClientSecretName']!r}: must be a Secrets Manager secret name, "
            "1-512 characters from A-Z a-z 0-9 / _ + = . @ -")
    algorithms: tuple[str, ...] = v["authAlgorithms"]
    if not algorithms:
        problems.append(f"{PROJECT}:authAlgorithms is empty: list at least one of {', '.join(settings.JWT_ALGORITHMS.choices)}")
    for alg in algorithms:
        if alg not in settings.JWT_ALGORITHMS.choices:
            problems.append(
                f"{PROJECT}:authAlgorithms contains {alg!r}: allowed are {', '.join(settings.JWT_ALGORITHMS.choices)} "
                "(never 'none', never HS* with a public key set)"
            )
    _in_range(problems, "authLeewaySeconds", v["authLeewaySeconds"], settings.JWT_LEEWAY_S)
    scopes: tuple[str, ...] = tuple(v["authScopes"])
    _check_scopes(problems, scopes)

    cold_start = _check_cold_start(problems, get, v, regions)
    server = _check_server(problems, v["server"], v)
    provisioned = cold_start == "provisioned"
    if v["originReservedConcurrency"] == 0:
        problems.append(
            f"{PROJECT}:originReservedConcurrency = 0: Lambda would throttle every call (reserved concurrency 0 stops "
            "a function, and no provisioned concurrency fits in it); remove the key to reserve none (the region's "
            "unreserved pool), or reserve at least 1")
    origin = OriginSizing(
        memory_mb=v["originMemoryMb"],
        timeout_s=v["originTimeoutSeconds"],
        reserved_concurrency=v["originReservedConcurrency"] or 0,  # 0: none reserved (the key is unset)
        provisioned_min=v["originProvisionedMin"] if provisioned else 0,
        provisioned_max=v["originProvisionedMax"] if provisioned else 0,
    )
    _check_sizing(problems, origin)
    written_overrides = _parse_overrides(problems, v["originOverrides"], regions, origin)
    for region, (sizing, written) in written_overrides.items():
        _check_sizing(problems, sizing, region, written)
    overrides = {region: sizing for region, (sizing, _) in written_overrides.items()}

    try:
        target = float(v["originUtilizationTarget"])
    except ValueError:
        target = float("nan")
    if not 0 < target <= 1:  # also rejects NaN
        problems.append(
            f"{PROJECT}:originUtilizationTarget = {v['originUtilizationTarget']!r}: must be a number in (0, 1], e.g. 0.7"
        )
    _in_range(problems, "originScaleInCooldownSeconds", v["originScaleInCooldownSeconds"], settings.ORIGIN_SCALE_IN_COOLDOWN_S)
    _in_range(problems, "originScaleOutCooldownSeconds", v["originScaleOutCooldownSeconds"], settings.ORIGIN_SCALE_OUT_COOLDOWN_S)
    _in_range(problems, "lwaLayerVersion", v["lwaLayerVersion"], settings.LWA_LAYER_VERSION)
    if v["logRetentionDays"] not in settings.LOG_RETENTION_DAYS.choices:
        problems.append(
            f"{PROJECT}:logRetentionDays = {v['logRetentionDays']}: must be one of "
            f"{', '.join(map(str, settings.LOG_RETENTION_DAYS.choices))} (CloudWatch Logs' allowed values)"
        )
    if v["edgePriceClass"] not in settings.PRICE_CLASS.choices:
        problems.append(f"{PROJECT}:edgePriceClass = {v['edgePriceClass']!r}: must be one of "
                        f"{', '.join(settings.PRICE_CLASS.choices)}" + did_you_mean(v["edgePriceClass"], settings.PRICE_CLASS.choices))
    _check_read_timeout(problems, v["edgeOriginReadTimeoutSeconds"], origin,
                        {region: sizing for region, (sizing, written) in written_overrides.items()
                         if "timeoutSeconds" in written})
    _in_range(problems, "edgeOriginKeepaliveSeconds", v["edgeOriginKeepaliveSeconds"], settings.EDGE_ORIGIN_KEEPALIVE_S)
    allowed_origins: tuple[str, ...] = tuple(v["allowedOrigins"])
    for origin_value in allowed_origins:
        if (problem := origin_problem(origin_value)) is not None:
            problems.append(f"{PROJECT}:allowedOrigins: {problem}")
    if len(set(allowed_origins)) != len(allowed_origins):
        problems.append(f"{PROJECT}:allowedOrigins = {list(allowed_origins)!r}: lists an origin more than once")
    domain, cert = v["customDomain"], v["certificateArn"]
    if domain and not settings.DNS_NAME.matches(domain):
        problems.append(f"{PROJECT}:customDomain = {domain!r}: must be {settings.DNS_NAME.rule}")
    problems.extend(shared_custom_domain_problems(domain, other_custom_domains or {}))
    if domain and not cert:
        problems.append(f"{PROJECT}:customDomain = {domain!r} needs {PROJECT}:certificateArn (an ACM certificate in us-east-1)")
    if cert and not domain:
        problems.append(f"{PROJECT}:certificateArn is set but {PROJECT}:customDomain is empty: set both or neither")
    if cert:
        m = re.fullmatch(r"arn:aws:acm:([a-z0-9-]+):\d{12}:certificate/[A-Za-z0-9-]+", cert)
        if not m:
            problems.append(f"{PROJECT}:certificateArn = {cert!r}: must be an ACM certificate ARN")
        elif m.group(1) != EDGE_CONTROL_REGION:
            problems.append(
                f"{PROJECT}:certificateArn = {cert!r} is in {m.group(1)}: CloudFront only uses ACM certificates "
                f"in {EDGE_CONTROL_REGION}"
            )

    firewall = _check_firewall(problems, v)

    if v["probeIntervalSeconds"] not in settings.PROBE_INTERVAL_S.choices:
        problems.append(
            f"{PROJECT}:probeIntervalSeconds = {v['probeIntervalSeconds']!r}: must be one of "
            f"{', '.join(map(str, settings.PROBE_INTERVAL_S.choices))} seconds (a divisor of the minute from 10 to 60)")
    _in_range(problems, "probeTimeoutSeconds", v["probeTimeoutSeconds"], settings.PROBE_TIMEOUT_S)
    if not 1 <= v["probeDeadlineSeconds"] < v["probeTimeoutSeconds"]:
        problems.append(
            f"{PROJECT}:probeDeadlineSeconds = {v['probeDeadlineSeconds']}: must be at least 1 and below "
            f"probeTimeoutSeconds = {v['probeTimeoutSeconds']} (so a probe fails cleanly instead of timing out)"
        )
    _in_range(problems, "probeDegradedLatencyMs", v["probeDegradedLatencyMs"], settings.PROBE_DEGRADED_LATENCY_MS)
    _in_range(problems, "probeHistoryTtlDays", v["probeHistoryTtlDays"], settings.PROBE_HISTORY_TTL_DAYS)
    _in_range(problems, "consumerTimeoutSeconds", v["consumerTimeoutSeconds"], settings.CONSUMER_TIMEOUT_S)
    _in_range(problems, "alarmOriginErrorRatePercent", v["alarmOriginErrorRatePercent"],
              settings.ALARM_ORIGIN_ERROR_RATE_PERCENT)
    _in_range(problems, "alarmOriginMinInvocations", v["alarmOriginMinInvocations"], settings.ALARM_ORIGIN_MIN_INVOCATIONS)
    email = v["alertEmail"]
    if email and not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", email):
        problems.append(f"{PROJECT}:alertEmail = {email!r}: must be an e-mail address")

    failover = _check_failover(problems, v, probe_regions)
    client_secret_name = _probe_client_secret_name(problems, get, v, stack, probe_client_secret)

    if problems:
        raise ConfigError(problems)

    config = StackConfig(
        project=PROJECT,
        stack=stack,
        regions=regions,
        default_region=default_region,
        server_id=v["serverId"],
        mcp_path=v["mcpPath"],
        auth=AuthConfig(
            issuer=v["authIssuer"],
            audience=v["authAudience"],
            jwks_url=v["authJwksUrl"],
            algorithms=algorithms,
            leeway_s=v["authLeewaySeconds"],
            token_url=token_url,
            probe_client_id=v["probeClientId"],
            probe_client_secret_name=client_secret_name,
            scopes=scopes,
            creates_probe_client_secret=bool(probe_client_secret),
        ),
        origin=origin,
        origin_overrides=MappingProxyType(overrides),
        autoscaling=AutoScaling(
            utilization_target=target,
            scale_in_cooldown_s=v["originScaleInCooldownSeconds"],
            scale_out_cooldown_s=v["originScaleOutCooldownSeconds"],
        ),
        lwa_layer_version=v["lwaLayerVersion"],
        log_retention_days=v["logRetentionDays"],
        edge=EdgeConfig(
            price_class=v["edgePriceClass"],
            origin_read_timeout_s=v["edgeOriginReadTimeoutSeconds"],
            origin_keepalive_s=v["edgeOriginKeepaliveSeconds"],
            custom_domain=domain or None,
            certificate_arn=cert or None,
            allowed_origins=allowed_origins,
        ),
        probes=ProbeConfig(
            regions=probe_regions,
            interval_s=v["probeIntervalSeconds"],
            timeout_s=v["probeTimeoutSeconds"],
            deadline_s=v["probeDeadlineSeconds"],
            degraded_latency_ms=v["probeDegradedLatencyMs"],
            history_ttl_days=v["probeHistoryTtlDays"],
            consumer_timeout_s=v["consumerTimeoutSeconds"],
            alert_email=email or None,
            table_home_region=table_home_region,
        ),
        server=server,
        failover=failover,
        cold_start=cold_start,
        origin_tracing=v["originTracing"],
        alarms=AlarmConfig(origin_error_rate_percent=v["alarmOriginErrorRatePercent"],
                           origin_min_invocations=v["alarmOriginMinInvocations"]),
        firewall=firewall,
    )
    _check_rendered_sizes(problems, config)
    if problems:
        raise ConfigError(problems)
    return config


def _check_cold_start(problems: list[str], get: Getter, v: dict[str, Any], regions: tuple[str, ...]) -> str:
    """originColdStart against what it cannot be combined with, naming both keys."""
    mode = v["originColdStart"]
    key = f"{PROJECT}:originColdStart = {mode!r}"
    if mode not in settings.COLD_START.choices:
        problems.append(f"{key}: must be one of {', '.join(settings.COLD_START.choices)}"
                        + did_you_mean(mode, settings.COLD_START.choices))
        return mode
    if mode == "provisioned":
        return mode
    for name in PROVISIONED_KEYS:
        raw = get(name)
        if raw is not None and raw != "" and not (name in ("originProvisionedMin", "originProvisionedMax")
                                                   and v.get(name) == 0):
            problems.append(
                f"{key} cannot be combined with {PROJECT}:{name} = {raw!r}: {mode} runs without provisioned "
                "concurrency (Lambda refuses SnapStart together with it); remove the key, or set originColdStart to "
                "provisioned")
    for entry in v["originOverrides"]:
        for _, name, value in _override_items(entry)[1]:
            if name in PROVISIONED_OVERRIDE_KEYS and value != "0":
                problems.append(
                    f"{key} cannot be combined with {PROJECT}:originOverrides entry {entry!r} ({name}): "
                    f"{mode} runs without provisioned concurrency; remove {name} from the entry")
    if mode != "snapstart":
        return mode
    if v["lwaLayerVersion"] < settings.SNAPSTART_MIN_LWA_LAYER_VERSION:
        problems.append(
            f"{key} needs {PROJECT}:lwaLayerVersion {settings.SNAPSTART_MIN_LWA_LAYER_VERSION} or later, not "
            f"{v['lwaLayerVersion']}: the Web Adapter relays SnapStart's before-checkpoint and after-restore hooks to "
            "the app from release 1.1.0 (layer version 30)")
    for region in regions:
        if region in SNAPSTART_UNAVAILABLE_REGIONS:
            problems.append(f"{key} cannot be used with {PROJECT}:regions containing {region!r}: Lambda has no "
                            "SnapStart there; use provisioned or none")
    return mode


def _check_path(problems: list[str], key: str, value: str) -> None:
    """A path like mcpPath: absolute, normalized, outside /.well-known/."""
    where = f"{PROJECT}:{key} = {value!r}"
    if not settings.MCP_PATH.matches(value) or "//" in value:
        problems.append(f"{where}: must be {settings.MCP_PATH.rule}")
    elif any(segment in (".", "..") for segment in value.split("/")):
        problems.append(f"{where}: must be normalized (no '.' or '..' segments)")
    elif (value + "/").startswith("/.well-known/"):
        problems.append(f"{where}: must not be under /.well-known/ (the edge serves OAuth metadata there)")


# The folder of the stack file being checked (typed values carry it; not a config key): a
# server's folder is named relative to it. Inside the program, the project root.
STACK_FOLDER = "(stack folder)"


def server_folder(problems: list[str], key: str, value: str, stack_folder: Path) -> tuple[Path, str] | None:
    """A server's folder (``server.source``/``server.image``): absolute, or relative to the
    stack file's folder, inside the project or not (a server lives in its own repository).
    A relative folder that is not beside the stack file is looked for from the project root
    (as the project's own stack files, in the root, always name theirs, and as a copy of one
    of them elsewhere still does: ``examples/demo``). Returns the folder and the value the
    program takes: as written when the project root resolves it the same way (the program
    runs there), else the absolute path; None, with the problem, when it is no folder."""
    where = f"{PROJECT}:{key} = {value!r}"
    path = Path(value).expanduser()
    folder = path if path.is_absolute() else stack_folder / path
    root = PROJECT_ROOT.resolve()
    if not folder.is_dir() and not path.is_absolute() and (root / path).is_dir():
        folder = root / path
    if not folder.is_dir():
        state = "is a file, not a folder" if folder.exists() else "does not exist"
        elsewhere = "" if stack_folder.resolve() == root else f"; nor is it a folder of the project, {root}"
        base = "" if path.is_absolute() else f" (named from the stack file's folder, {stack_folder}{elsewhere})"
        problems.append(f"{where}: {folder} {state}{base}; name an existing folder, relative to the stack file's "
                        "folder or absolute")
        return None
    same = not path.is_absolute() and (PROJECT_ROOT / path).resolve() == folder.resolve()
    return folder, value if same else str(folder.resolve())


def _check_server(problems: list[str], raw: Mapping[str, Any], v: dict[str, Any]) -> ServerConfig:
    """mcp-edge:server: its sub-keys, each problem named by its key path (mcp-edge:server.runtime)."""
    fields: dict[str, Any] = {}
    for key, value in raw.items():
        where = f"{PROJECT}:server.{key}"
        if key not in SERVER_KEYS:
            problems.append(f"{where} is not a key of server{did_you_mean(str(key), SERVER_KEYS)}: the keys are "
                            f"{', '.join(SERVER_KEYS)}")
        elif key == "toolScopes":
            fields["tool_scopes"] = _check_tool_scopes(problems, value)
        elif key == "getStream":
            # `pulumi config set --path` writes a string unless told --type bool.
            flag = {"true": True, "false": False}.get(value, value) if isinstance(value, str) else value
            if isinstance(flag, bool):
                fields["get_stream"] = flag
            else:
                problems.append(f"{where} = {value!r}: must be true or false")
        elif not isinstance(value, str) or not value.strip():
            problems.append(f"{where} = {value!r}: must be a non-empty string")
        elif any(ord(c) < 0x20 or ord(c) == 0x7f for c in value):
            problems.append(f"{where} = {value!r}: must be one line without control characters")
        else:
            fields[SERVER_KEYS[key]] = value.strip()
    given = [k for k in SERVER_KINDS if k in raw]
    if len(given) != 1:
        problems.append(f"{PROJECT}:server must give exactly one of source (a folder of code, with runtime and command), "
                        f"image (a folder with a Dockerfile) or imageDigest (given: {', '.join(given) or 'none'})")
    config = ServerConfig(**fields)
    _check_path(problems, "server.path", config.path)
    if config.readiness_path is not None:
        _check_path(problems, "server.readinessPath", config.readiness_path)
    kind = given[0] if len(given) == 1 else None
    if kind == "source" and config.source:
        for key in ("runtime", "command"):
            if key not in raw:
                problems.append(f"{PROJECT}:server.{key} is required with server.source: "
                                + ("one of " + ", ".join(RUNTIMES) if key == "runtime" else
                                   "the command that starts the server on $PORT, e.g. 'python3 server.py'"))
        found = server_folder(problems, "server.source", config.source, v.get(STACK_FOLDER) or PROJECT_ROOT)
        folder = found[0] if found else None
        if found:
            config = replace(config, source=found[1])
        if folder is not None and config.runtime and config.command is not None:
            for field, allowed in server_source_problems(folder, config.runtime, config.command, config.install):
                key = next(k for k, f in SERVER_KEYS.items() if f == field)
                problems.append(f"{PROJECT}:server.{key} = {getattr(config, field)!r}: {allowed}")
        if v["originColdStart"] == "snapstart" and config.runtime in RUNTIMES and config.runtime not in SNAPSTART_RUNTIMES:
            problems.append(f"{PROJECT}:originColdStart = 'snapstart' cannot be combined with {PROJECT}:server.runtime = "
                            f"{config.runtime!r}: Lambda SnapStart supports {', '.join(SNAPSTART_RUNTIMES)}; use "
                            "provisioned or none")
    elif kind in ("image", "imageDigest"):
        for key in FOLDER_KEYS:
            if key in raw and key != "readinessPath":
                problems.append(f"{PROJECT}:server.{key} is for a folder server (server.source), not server.{kind}: "
                                "an image starts its server itself")
        # SnapStart with an image: allowed (components/origin.py, SNAPSTART_RUNTIMES), the
        # adapter release it needs is checked with originColdStart.
        if kind == "image" and config.image:
            found = server_folder(problems, "server.image", config.image, v.get(STACK_FOLDER) or PROJECT_ROOT)
            folder = found[0] if found else None
            if found:
                config = replace(config, image=found[1])
            if folder is not None and not (folder / DOCKERFILE).is_file():
                problems.append(f"{PROJECT}:server.image = {config.image!r}: must be a folder holding a Dockerfile "
                                "(built for linux/arm64, with the Web Adapter in /opt/extensions)")
            if v["lwaLayerVersion"] not in LWA_IMAGE_TAGS:
                problems.append(f"{PROJECT}:server.image needs the Web Adapter image of {PROJECT}:lwaLayerVersion = "
                                f"{v['lwaLayerVersion']}, which this project does not know: use one of "
                                f"{', '.join(map(str, LWA_IMAGE_TAGS))}")
        if kind == "imageDigest" and config.image_digest and not re.fullmatch(IMAGE_DIGEST_PATTERN, config.image_digest):
            problems.append(f"{PROJECT}:server.imageDigest = {config.image_digest!r}: must be an image digest, sha256: "
                            "and 64 lower-case hex digits (what docker push or ECR reports)")
    return config


def _check_tool_scopes(problems: list[str], value: Any) -> Mapping[str, tuple[str, ...]]:
    where = f"{PROJECT}:server.toolScopes"
    if not isinstance(value, Mapping):
        problems.append(f"{where} = {value!r}: must be a map of tool names to lists of OAuth scopes, e.g. "
                        "{admin_runtime_info: [mcp:admin]}")
        return MappingProxyType({})
    out: dict[str, tuple[str, ...]] = {}
    for tool, scopes in value.items():
        if not isinstance(tool, str) or not TOOL_NAME_PATTERN.fullmatch(tool):
            problems.append(f"{where} names the tool {tool!r}: a tool name is 1-128 characters from A-Z a-z 0-9 _ - . /")
            continue
        if isinstance(scopes, str):
            scopes = [scopes]
        if not isinstance(scopes, (list, tuple)) or not scopes:
            problems.append(f"{where}.{tool} = {scopes!r}: must be a non-empty list of OAuth scopes")
            continue
        bad = [s for s in scopes if not isinstance(s, str) or not re.fullmatch(SCOPE_TOKEN_PATTERN, s)]
        if bad:
            problems.append(f"{where}.{tool} contains {bad[0]!r}: a scope is printable ASCII without spaces, quotes "
                            "or backslashes (RFC 6749 section 3.3)")
            continue
        out[tool] = tuple(dict.fromkeys(scopes))
    return MappingProxyType(out)


# The firewall's settings and the stack keys that set them (setting_problems names the keys).
FIREWALL_KEYS = {
    "token_limit": "wafTokenLimit",
    "anonymous_ip_limit": "wafAnonymousIpLimit",
    "ip_limit": "wafIpLimit",
    "tool_limits": "wafToolLimits",
    "window_seconds": "wafWindowSeconds",
    "managed_rules": "wafManagedRules",
    "body_inspection_kb": "wafBodyInspectionKb",
}


def _check_firewall(problems: list[str], v: dict[str, Any]) -> FirewallSettings | None:
    """The web ACL's settings (edge.firewall_rules' own checks, naming the keys), checked
    whether or not wafEnabled is on; None when it is off."""
    if any(name not in v for name in ("wafEnabled", *FIREWALL_KEYS.values())):
        return None  # a key of the wrong type, reported already
    # mcpPath is checked (and named) above; the rules get a valid one either way.
    mcp_path = v["mcpPath"] if settings.MCP_PATH.matches(v["mcpPath"]) and "//" not in v["mcpPath"] \
        else settings.MCP_PATH.default
    tools = {tool: int(limit) if isinstance(limit, str) and re.fullmatch(r"\d+", limit) else limit
             for tool, limit in v["wafToolLimits"].items()}  # `pulumi config set --path` writes strings
    firewall = FirewallSettings(
        mcp_path=mcp_path,
        token_limit=v["wafTokenLimit"],
        anonymous_ip_limit=v["wafAnonymousIpLimit"],
        ip_limit=v["wafIpLimit"],
        tool_limits=MappingProxyType(tools),
        window_seconds=v["wafWindowSeconds"],
        managed_rules=v["wafManagedRules"],
        body_inspection_kb=v["wafBodyInspectionKb"],
    )
    problems.extend(setting_problems(firewall, {f: f"{PROJECT}:{k}" for f, k in FIREWALL_KEYS.items()}))
    return firewall if v["wafEnabled"] else None


def _check_failover(problems: list[str], v: dict[str, Any], probe_regions: tuple[str, ...]) -> FailoverConfig:
    n = len(probe_regions)
    if not 0 <= v["failoverQuorum"] <= n:
        problems.append(
            f"{PROJECT}:failoverQuorum = {v['failoverQuorum']}: must be between 0 (a majority) and the number of "
            f"probe regions, {n} ({', '.join(probe_regions)})"
        )
    _in_range(problems, "failoverFailureThreshold", v["failoverFailureThreshold"], settings.HEALTH_FAILURE_THRESHOLD)
    _in_range(problems, "failoverRecoveryThreshold", v["failoverRecoveryThreshold"], settings.HEALTH_RECOVERY_THRESHOLD)
    return FailoverConfig(v["failoverQuorum"], v["failoverFailureThreshold"], v["failoverRecoveryThreshold"])


def stack_warnings(get: Getter, config: StackConfig) -> list[str]:
    """What is valid but risky in a stack, for the program to warn about."""
    warnings = []
    if len(config.probes.regions) > 1 and not get("resultsTableHomeRegion"):
        home = config.probes.table_home_region
        warnings.append(
            f"{PROJECT}:resultsTableHomeRegion is not set, so the results table lives in the first probe region "
            f"({home}): set it to {home} so that reordering or trimming probeRegions never replaces the table "
            "(and its history)")
    return warnings
