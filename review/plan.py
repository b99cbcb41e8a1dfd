"""The offline plan: what a stack would create, as deterministic text for code review.

    .venv/bin/python -m review.plan --stack prod            # print the plan
    .venv/bin/python -m review.plan --stack prod --write    # refresh plans/prod.txt
    .venv/bin/python -m review.plan --stack prod --check    # exit 1 (with a diff) if stale

It runs the real program (``__main__.py``) under Pulumi mocks, so it needs no cloud
credentials and no Pulumi CLI, and renders:

- the components and their resources, grouped by region (IAM, CloudFront and other
  global services under ``global``), each with its key properties and resource options;
- the stack outputs;
- sha256 digests of the rendered edge code (the ``code`` of every CloudFront Function)
  and of every Lambda function package (the zip the program would upload).

Computed values (ARNs, ids, URLs) are the mocks' deterministic stand-ins. Secrets never
appear: a secret input is shown as ``[secret]`` with its key names and a digest of its
non-secret content (so a change to it still shows in the diff), and any string that
contains a secret value (a secret output of a resource, or a
secret config value) is redacted wherever it appears.
"""

from __future__ import annotations

import argparse
import difflib
import functools
import hashlib
import json
import re
import sys
import zipfile
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi

from devkit.mock_program import ProgramRun, Resource, run_program
from review.errors import add_debug_flag, run_reporting_errors
from review.resources import GLOBAL, ResourceTree, is_secret, placement, plain
from review.variants import VARIANTS
from stack_config.keys import KEYS, PROJECT
from stack_config.loading import PROJECT_ROOT, resolve_stack_file, stack_name_of

PLANS_DIR = PROJECT_ROOT / "plans"
SECRET = "[secret]"
# Strings this long (that are not JSON) are shown as a digest: code, certificates, blobs.
LONG_STRING = 200
# Scalar lists longer than this (rendered) go one item a line.
INLINE_LIST = 120
# Shorter strings are never treated as secret values (they would redact common words).
MIN_SECRET_LENGTH = 8

# Properties shown first, in this order, for the types a reviewer reads most; the
# rest of each resource's inputs follow alphabetically. Nothing is hidden by type, so
# a new input on any resource shows in the plan diff.
LEADING_PROPERTIES: dict[str, tuple[str, ...]] = {
    "aws:lambda/function:Function": (
        "name", "runtime", "architectures", "handler", "memorySize", "timeout",
        "reservedConcurrentExecutions", "publish", "layers", "environment", "role",
    ),
    "aws:lambda/alias:Alias": ("name", "functionName", "functionVersion"),
    "aws:lambda/functionUrl:FunctionUrl": ("functionName", "qualifier", "authorizationType", "invokeMode"),
    "aws:lambda/permission:Permission": ("function", "qualifier", "action", "principal"),
    "aws:lambda/eventSourceMapping:EventSourceMapping": (
        "eventSourceArn", "functionName", "batchSize", "maximumBatchingWindowInSeconds", "functionResponseTypes",
    ),
    "aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig": (
        "functionName", "qualifier", "maximumRetryAttempts", "maximumEventAgeInSeconds", "destinationConfig",
    ),
    "aws:cloudfront/distribution:Distribution": (
        "enabled", "aliases", "priceClass", "httpVersion", "isIpv6Enabled", "defaultCacheBehavior",
        "orderedCacheBehaviors", "origins", "viewerCertificate",
    ),
    "aws:cloudfront/function:Function": ("name", "runtime", "publish", "code"),
    "aws:sqs/queue:Queue": ("name", "visibilityTimeoutSeconds", "messageRetentionSeconds", "redrivePolicy"),
    "aws:cloudwatch/metricAlarm:MetricAlarm": (
        "name", "namespace", "metricName", "statistic", "comparisonOperator", "threshold", "period",
        "evaluationPeriods",
    ),
    "aws:iam/role:Role": ("name", "assumeRolePolicy"),
    "aws:appautoscaling/target:Target": ("resourceId", "scalableDimension", "minCapacity", "maxCapacity"),
    "aws:scheduler/schedule:Schedule": ("name", "scheduleExpression", "state", "flexibleTimeWindow", "target"),
    "aws:ecr/repository:Repository": ("name", "imageTagMutability", "imageScanningConfiguration"),
    "docker-build:index:Image": ("tags", "platforms", "push", "buildArgs", "context", "dockerfile"),
}
# Never useful in review: tags are bookkeeping, the region is the group heading, and the
# Lambda sourceCodeHash repeats the package digest shown with the code.
OMITTED_PROPERTIES = {"tags", "tagsAll", "region"}
OMITTED_BY_TYPE: dict[str, set[str]] = {"aws:lambda/function:Function": {"sourceCodeHash"}}
# Resource options a reviewer must see (what happens on delete, replace, drift).
SHOWN_OPTIONS = ("protect", "retainOnDelete", "deleteBeforeReplace", "ignoreChanges", "replaceOnChanges", "deletedWith")


class PlanError(RuntimeError):
    pass


# --- secrets ------------------------------------------------------------------------


def _strings(value: Any) -> Iterable[str]:
    value = plain(value)
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def secret_values(run: ProgramRun) -> list[str]:
    """Every secret string the run knows: secret outputs of resources (e.g. a generated
    password) and secret config values. Longest first, so that a secret that
    contains another is redacted whole."""
    found: set[str] = set()
    for resource in run.resources:
        for key in resource.options.get("additionalSecretOutputs") or ():
            found.update(_strings(resource.outputs.get(key)))
    for key in KEYS:
        if key.secret:
            value = run.config.get(f"{PROJECT}:{key.name}")
            if value:
                found.add(value)
    return sorted((s for s in found if len(s) >= MIN_SECRET_LENGTH), key=lambda s: (-len(s), s))


class Redactor:
    def __init__(self, secrets: Sequence[str]):
        self.secrets = tuple(secrets)
        self.project_root = str(PROJECT_ROOT)

    def text(self, value: str) -> str:
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, SECRET)
        # Absolute paths differ between machines; the plan must not.
        return value.replace(self.project_root, ".")


# --- values -------------------------------------------------------------------------


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class PackageDigest:
    sha256: str
    size: int
    files: int


def package_digest(path: str | Path) -> PackageDigest:
    """Digest of a function package (a zip) or, for a folder archive, of its files."""
    full = Path(path)
    if not full.is_absolute():
        full = PROJECT_ROOT / full
    if full.is_file():
        stat = full.stat()
        return _file_digest(full, stat.st_size, stat.st_mtime_ns)
    if full.is_dir():
        return _folder_digest(full)
    raise PlanError(f"function package {path} does not exist (did the program build it?)")


@functools.lru_cache(maxsize=64)
def _file_digest(full: Path, size: int, mtime_ns: int) -> PackageDigest:
    # Every region uploads the same package: hash each file once (keyed by size and
    # mtime, so a rebuilt zip is hashed again).
    del size, mtime_ns
    data = full.read_bytes()
    try:
        with zipfile.ZipFile(full) as zf:
            files = sum(1 for info in zf.infolist() if not info.is_dir())
    except zipfile.BadZipFile:
        files = 1
    return PackageDigest(sha256_hex(data), len(data), files)


def _folder_digest(full: Path) -> PackageDigest:
    h = hashlib.sha256()
    count = size = 0
    for file in sorted(p for p in full.rglob("*") if p.is_file()):
        data = file.read_bytes()
        h.update(file.relative_to(full).as_posix().encode() + b"\0" + hashlib.sha256(data).digest())
        count, size = count + 1, size + len(data)
    return PackageDigest(h.hexdigest(), size, count)


def asset_digest(asset: Any) -> str:
    """A short, stable description of a Pulumi asset or archive input."""
    if isinstance(asset, (pulumi.FileArchive, pulumi.FileAsset)):
        digest = package_digest(asset.path)
        return f"package sha256:{digest.sha256[:16]} ({digest.size} bytes, {digest.files} files)"
    if isinstance(asset, pulumi.StringAsset):
        return f"text sha256:{sha256_hex(asset.text.encode())[:16]} ({len(asset.text)} chars)"
    if isinstance(asset, pulumi.AssetArchive):
        parts = {name: asset_digest(a) for name, a in sorted(asset.assets.items())}
        return f"archive sha256:{sha256_hex(json.dumps(parts, sort_keys=True).encode())[:16]} ({len(parts)} entries)"
    if isinstance(asset, (pulumi.RemoteAsset, pulumi.RemoteArchive)):
        return f"remote {asset.uri}"
    return type(asset).__name__


def _scalar(value: Any, redact: Redactor, in_secret: bool = False) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        text = redact.text(value)
        if in_secret and looks_generated(text):
            return SECRET
        if text == "":
            return '""'
        if len(text) > LONG_STRING or "\n" in text:
            return f"sha256:{sha256_hex(text.encode())[:16]} ({len(text)} chars)"
        return text
    return asset_digest(value)


def _is_scalar(value: Any) -> bool:
    return not isinstance(value, (dict, list)) and not is_secret(value)


def _parse_json_document(value: str) -> Any | None:
    """A JSON object or array inside a string input (IAM policies, redrive policies)."""
    stripped = value.strip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        parsed = json.loads(stripped)
    except ValueError:
        return None
    return parsed if isinstance(parsed, (dict, list)) else None


def flatten(path: str, value: Any, redact: Redactor, in_secret: bool = False) -> list[tuple[str, str]]:
    """(property path, rendered value) lines for one input, nested values flattened.

    A secret input (Pulumi marks a whole input secret when any part of it comes from a
    secret, e.g. a list whose one item carries a secret value)
    is shown leaf by leaf, so that reviewers still see its settings, with three layers
    of redaction: known secret values (everywhere), values named like credentials, and
    strings that look like generated secrets.
    """
    if is_secret(value):
        return [(path, "(secret input: secret values redacted)")] + flatten(path, plain(value), redact, True)
    if isinstance(value, dict):
        if not value:
            return [(path, "{}")]
        credential = in_secret and _names_credential(value.get("name"))
        lines: list[tuple[str, str]] = []
        for key in sorted(value):
            if in_secret and (_names_credential(key) or (credential and key == "value")):
                lines.append((f"{path}.{key}", SECRET))
            else:
                lines.extend(flatten(f"{path}.{key}", value[key], redact, in_secret))
        return lines
    if isinstance(value, list):
        if all(_is_scalar(v) for v in value):
            items = [_scalar(v, redact, in_secret) for v in value]
            inline = "[" + ", ".join(items) + "]"
            if len(inline) <= INLINE_LIST:
                return [(path, inline)]
            # Long lists one item a line, so that one added item is one diff line.
            return [(f"{path}[{i}]", item) for i, item in enumerate(items)]
        lines = []
        for i, item in enumerate(value):
            lines.extend(flatten(f"{path}[{i}]", item, redact, in_secret))
        return lines
    if isinstance(value, str):
        document = _parse_json_document(value)
        if document is not None:
            return flatten(f"{path}(json)", document, redact, in_secret)
    return [(path, _scalar(value, redact, in_secret))]


_CREDENTIAL_WORDS = ("secret", "token", "password", "passphrase", "credential", "private")


def _names_credential(name: Any) -> bool:
    return isinstance(name, str) and any(word in name.lower() for word in _CREDENTIAL_WORDS)


def looks_generated(text: str) -> bool:
    """A string shaped like a generated secret: long, no separators a name or URL would
    have, and upper case, lower case and digits all present (hostnames and hex ids are
    lower case)."""
    return (
        len(text) >= 20
        and re.fullmatch(r"[A-Za-z0-9_+/=-]+", text) is not None
        and any(c.isupper() for c in text)
        and any(c.islower() for c in text)
        and any(c.isdigit() for c in text)
    )


# --- the document -------------------------------------------------------------------


def _property_order(resource: Resource) -> list[str]:
    leading = LEADING_PROPERTIES.get(resource.type, ())
    omitted = OMITTED_PROPERTIES | OMITTED_BY_TYPE.get(resource.type, set())
    present = [k for k in resource.inputs if k not in omitted and resource.inputs[k] is not None]
    return [k for k in leading if k in present] + sorted(k for k in present if k not in leading)


def render_resource(resource: Resource, stack: str, redact: Redactor, indent: str) -> list[str]:
    lines = [f"{indent}{resource.type} {resource.name}"]
    _, defaulted = placement(resource, stack)
    if defaulted:
        lines.append(f"{indent}    region: (provider default; no region= on this resource)")
    for key in _property_order(resource):
        for path, text in flatten(key, resource.inputs[key], redact):
            lines.append(f"{indent}    {path}: {text}")
    for option in SHOWN_OPTIONS:
        value = resource.options.get(option)
        if value:
            shown = "[" + ", ".join(sorted(value)) + "]" if isinstance(value, list) else _scalar(value, redact)
            lines.append(f"{indent}    (option) {option}: {shown}")
    if resource.provider and "::default" not in resource.provider:
        lines.append(f"{indent}    (option) provider: {redact.text(resource.provider.split('::')[-2])}")
    return lines


def _component_label(chain: tuple[Resource, ...]) -> str:
    if not chain:
        return "(stack)"
    return " / ".join(f"{c.type} {c.name}" for c in chain)


def _region_order(region: str) -> tuple[int, str]:
    return (0 if region == GLOBAL else 1, region)


def code_digests(run: ProgramRun, redact: Redactor) -> list[str]:
    lines = ["## Edge code (CloudFront Functions)", ""]
    functions = sorted(run.of_type("aws:cloudfront/function:Function"), key=lambda r: r.name)
    if not functions:
        lines.append("(none)")
    for fn in functions:
        code = plain(fn.inputs.get("code"))
        if isinstance(code, str):
            data = code.encode()
            lines.append(
                f"{fn.name}: sha256 {sha256_hex(data)} ({len(data)} bytes, runtime {_scalar(plain(fn.inputs.get('runtime')), redact)})"
            )
        else:
            lines.append(f"{fn.name}: code is {type(code).__name__}, not inline source")
    lines += ["", "## Function packages (Lambda)", ""]
    lambdas = sorted(run.of_type("aws:lambda/function:Function"), key=lambda r: (r.name, r.region))
    if not lambdas:
        lines.append("(none)")
    for fn in lambdas:
        code = fn.inputs.get("code")
        if isinstance(code, (pulumi.FileArchive, pulumi.FileAsset)):
            digest = package_digest(code.path)
            lines.append(f"{fn.name}: sha256 {digest.sha256} ({digest.size} bytes, {digest.files} files)")
        elif code is not None:
            lines.append(f"{fn.name}: {asset_digest(code)}")
        else:
            image = plain(fn.inputs.get("imageUri")) or plain(fn.inputs.get("s3Key"))
            lines.append(f"{fn.name}: no local package ({redact.text(str(image))})")
    return lines


def render_plan(run: ProgramRun) -> str:
    """The plan of one mock run, as text. Same program and stack file, same text."""
    redact = Redactor(secret_values(run))
    tree = ResourceTree(run)
    stack = run.stack

    # region -> component label -> resources
    groups: dict[str, dict[str, list[Resource]]] = defaultdict(lambda: defaultdict(list))
    component_regions: dict[str, set[str]] = defaultdict(set)
    component_counts: dict[str, int] = defaultdict(int)
    for resource in tree.custom():
        region, _ = placement(resource, stack)
        label = _component_label(tree.components(resource))
        groups[region][label].append(resource)
        component_regions[label].add(region)
        component_counts[label] += 1
    for component in (r for r in run.resources if not r.custom):
        label = _component_label((*tree.components(component), component))
        component_regions.setdefault(label, set())
        component_counts.setdefault(label, 0)

    custom = [r for r in run.resources if r.custom]
    lines = [
        f"# Offline plan: stack {stack} of {PROJECT}",
        "#",
        "# The program (__main__.py) run under Pulumi mocks with this stack's file: no cloud",
        "# credentials, no Pulumi engine. ARNs, ids and URLs are the mocks' stand-ins; secrets",
        "# show as [secret]. Regenerate after changing the program or the stack file:",
        f"#   .venv/bin/python -m review.plan --stack {stack} --write",
        "",
        "## Summary",
        "",
        f"resources: {len(custom)} in {len(groups)} region groups; components: {len(run.resources) - len(custom)}",
    ]
    by_type: dict[str, int] = defaultdict(int)
    for resource in custom:
        by_type[resource.type] += 1
    lines += [f"  {count:4d}  {typ}" for typ, count in sorted(by_type.items())]
    lines += ["", "## Components", ""]
    for label in sorted(component_counts):
        regions = ", ".join(sorted(component_regions[label], key=_region_order)) or "no resources"
        lines.append(f"{label}: {component_counts[label]} resources ({regions})")
    aliases = sorted({(r.type, alias["type"]) for r in run.resources if not r.custom
                      for alias in r.options.get("aliases") or () if "type" in alias})
    if aliases:
        lines += ["", "Type aliases (a component's earlier type: an existing stack keeps its URNs and its children's):"]
        lines += [f"  {new} <- {old}" for new, old in aliases]

    for region in sorted(groups, key=_region_order):
        heading = "global (IAM, CloudFront and other services without a region)" if region == GLOBAL else region
        lines += ["", f"## Region {heading}"]
        for label in sorted(groups[region]):
            lines += ["", f"### {label}"]
            for resource in sorted(groups[region][label], key=lambda r: (r.type, r.name)):
                lines += render_resource(resource, stack, redact, "  ")

    lines += ["", "## Stack outputs", ""]
    for key in sorted(run.outputs):
        for path, text in flatten(key, run.outputs[key], redact):
            lines.append(f"{path}: {text}")
    lines += [""] + code_digests(run, redact)
    return "\n".join(lines) + "\n"


# --- the command --------------------------------------------------------------------


def plan_path(stack: str, plans_dir: Path = PLANS_DIR) -> Path:
    return plans_dir / f"{stack}.txt"


def refresh_command(stack: str) -> str:
    return f".venv/bin/python -m review.plan --stack {stack} --write"


def committed_diff(committed: str, current: str, label: str) -> str:
    """Unified diff from a committed file's text to the program's; empty when equal."""
    return "".join(
        difflib.unified_diff(
            committed.splitlines(keepends=True),
            current.splitlines(keepends=True),
            fromfile=f"{label} (committed)",
            tofile=f"{label} (program)",
        )
    )


def plan_diff(committed: str, current: str, stack: str) -> str:
    """Unified diff from the committed plan to the program's; empty when equal."""
    return committed_diff(committed, current, f"plans/{stack}.txt")


def write_or_check(path: Path, text: str, *, write: bool, label: str, refresh: str) -> int:
    """``--write``: write the committed file; ``--check``: exit status 1 with a diff when it is stale."""
    if write:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}", file=sys.stderr)
        return 0
    committed = path.read_text() if path.exists() else ""
    diff = committed_diff(committed, text, label)
    if diff:
        sys.stdout.write(diff)
        print(f"\n{path} is stale; refresh it with: {refresh}", file=sys.stderr)
        return 1
    print(f"{path} is up to date", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m review.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", default="prod",
                        help="stack name (reads Pulumi.<stack>.yaml) or a stack file's path (default: prod)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write plans/<stack>.txt")
    mode.add_argument("--check", action="store_true", help="exit 1 with a diff if plans/<stack>.txt is stale")
    parser.add_argument("--plans-dir", type=Path, default=PLANS_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="prod",
                        help="print the plan of a variant of the stack (review/variants.py; not written)")
    add_debug_flag(parser)
    args = parser.parse_args(argv)
    if args.variant != "prod" and (args.write or args.check):
        parser.error("--variant prints only: plans/<stack>.txt is the stack file's own plan")

    def work() -> int:
        path = resolve_stack_file(args.stack)
        stack = stack_name_of(path)
        text = render_plan(run_program(stack, stack_file=path, config_overrides=VARIANTS[args.variant]))
        if args.write or args.check:
            return write_or_check(plan_path(stack, args.plans_dir), text, write=args.write,
                                  label=f"plans/{stack}.txt", refresh=refresh_command(stack))
        sys.stdout.write(text)
        return 0

    return run_reporting_errors("review.plan", work, debug=args.debug)


if __name__ == "__main__":
    sys.exit(main())
