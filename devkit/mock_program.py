"""Run ``__main__.py`` for a stack file under Pulumi mocks, with ``preview=False``, and
record everything it registers: the test harness (``tests/harness.py``), the offline
plan and the local run (which takes the stack's names and the rendered edge code from
the program itself) all stand on it.

- Every resource (type, name, inputs, parent, provider, resource options) is recorded,
  components included.
- The mocks return realistic computed attributes (ARNs, qualified ARNs, versions,
  Function URLs, distribution domains, queue URLs...) so that every Output resolves.
- ``run_program`` returns only after the program's Outputs have all resolved inside a
  ``@pulumi.runtime.test`` function, so tests assert on plain data afterwards: an
  assertion can never sit in an ``apply`` that does not run.
- ``check_output`` is for tests that do want to assert inside an apply: it fails when
  the callback never ran, and lets a failing assertion fail the test.

Inputs and outputs use the provider's wire names (camelCase: ``qualifiedArn``,
``functionUrl``, ``invokeMode``), as the engine sees them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import runpy
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings as pulumi_settings

from stack_config.keys import PROJECT
from stack_config.loading import PROJECT_ROOT, pulumi_config_map

ACCOUNT_ID = "123456789012"
DEFAULT_REGION = "us-east-1"
_RUN_LOCK = threading.Lock()


@dataclass
class Resource:
    type: str
    name: str
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    id: str
    urn: str
    parent: str | None = None
    provider: str | None = None
    custom: bool = True
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def region(self) -> str:
        return self.inputs.get("region") or DEFAULT_REGION

    def __getitem__(self, key: str) -> Any:
        """An input, else a computed output, by wire name."""
        if key in self.inputs:
            return self.inputs[key]
        return self.outputs[key]

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default


def _digest(*parts: str, n: int = 12) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:n]


def _physical_name(args: pulumi_mocks.MockResourceArgs) -> str:
    # Pulumi auto-names append a random suffix; the mock uses a stable one.
    return args.inputs.get("name") or f"{args.name}-{_digest(args.typ, args.name, n=7)}"


def computed_attributes(args: pulumi_mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    """The id and computed outputs AWS would return for this resource."""
    typ, inputs = args.typ, args.inputs
    region = inputs.get("region") or DEFAULT_REGION
    name = _physical_name(args)
    service = typ.split(":")[1].split("/")[0]
    out: dict[str, Any] = {"name": name, "region": region}
    rid = name

    if typ == "aws:lambda/function:Function":
        arn = f"arn:aws:lambda:{region}:{ACCOUNT_ID}:function:{name}"
        version = "1" if inputs.get("publish") else "$LATEST"
        out.update(
            arn=arn,
            version=version,
            qualifiedArn=f"{arn}:{version}",
            invokeArn=f"arn:aws:apigateway:{region}:lambda:path/2015-03-31/functions/{arn}/invocations",
            qualifiedInvokeArn=f"arn:aws:apigateway:{region}:lambda:path/2015-03-31/functions/{arn}:{version}/invocations",
            sourceCodeHash=inputs.get("sourceCodeHash") or _digest(name, n=44),
            lastModified="2026-11-29T00:00:00.000+0000",
        )
    elif typ == "aws:lambda/alias:Alias":
        fn = str(inputs.get("functionName", name)).split(":function:")[-1]
        arn = f"arn:aws:lambda:{region}:{ACCOUNT_ID}:function:{fn}:{inputs.get('name')}"
        out.update(arn=arn, invokeArn=f"arn:aws:apigateway:{region}:lambda:path/2015-03-31/functions/{arn}/invocations")
        rid = arn
    elif typ == "aws:lambda/functionUrl:FunctionUrl":
        url_id = _digest(typ, args.name, region, n=32)
        fn = str(inputs.get("functionName")).split(":function:")[-1]
        out.update(
            urlId=url_id,
            functionUrl=f"https://{url_id}.lambda-url.{region}.on.aws/",
            functionArn=f"arn:aws:lambda:{region}:{ACCOUNT_ID}:function:{fn}",
        )
        rid = url_id
    elif typ == "aws:cloudfront/distribution:Distribution":
        did = "E" + _digest(args.name, n=13).upper()
        out.update(
            arn=f"arn:aws:cloudfront::{ACCOUNT_ID}:distribution/{did}",
            domainName=f"d{_digest('cf', args.name, n=13)}.cloudfront.net",
            hostedZoneId="Z2FDTNDATAQYW2",
            status="Deployed",
            etag="E" + _digest("etag", args.name, n=12).upper(),
            callerReference=_digest("ref", args.name),
        )
        rid = did
    elif typ == "aws:cloudfront/function:Function":
        etag = "E" + _digest(str(inputs.get("code", "")), n=12).upper()
        out.update(arn=f"arn:aws:cloudfront::{ACCOUNT_ID}:function/{name}", etag=etag, liveStageEtag=etag, status="UNASSOCIATED")
    elif typ == "aws:cloudfront/keyValueStore:KeyValueStore":
        store_id = f"{_digest('kvs', args.name, n=8)}-{_digest(args.name, n=4)}-4000-8000-{_digest(name, n=12)}"
        out.update(arn=f"arn:aws:cloudfront::{ACCOUNT_ID}:key-value-store/{store_id}",
                   etag="E" + _digest("etag", args.name, n=12).upper(), lastModifiedTime="2026-11-29T00:00:00Z")
        rid = name
    elif typ == "aws:cloudfront/keyvaluestoreKey:KeyvaluestoreKey":
        rid = f"{inputs.get('keyValueStoreArn')},{inputs.get('key')}"
        out.update(totalSizeInBytes=len(str(inputs.get("key", "")).encode()) + len(str(inputs.get("value", "")).encode()))
    elif typ in ("aws:cloudfront/originRequestPolicy:OriginRequestPolicy", "aws:cloudfront/cachePolicy:CachePolicy",
                 "aws:cloudfront/responseHeadersPolicy:ResponseHeadersPolicy"):
        rid = _digest(typ, args.name, n=8) + "-" + _digest(args.name, n=4) + "-4000-8000-" + _digest(name, n=12)
        out.update(etag="E" + _digest(rid, n=12).upper(), arn=f"arn:aws:cloudfront::{ACCOUNT_ID}:{typ.split(':')[-1]}/{rid}")
    elif typ == "aws:sqs/queue:Queue":
        out.update(
            arn=f"arn:aws:sqs:{region}:{ACCOUNT_ID}:{name}",
            url=f"https://sqs.{region}.amazonaws.com/{ACCOUNT_ID}/{name}",
        )
        rid = out["url"]
    elif typ == "aws:dynamodb/table:Table":
        out.update(
            arn=f"arn:aws:dynamodb:{region}:{ACCOUNT_ID}:table/{name}",
            streamArn=f"arn:aws:dynamodb:{region}:{ACCOUNT_ID}:table/{name}/stream/2026-11-29T00:00:00.000",
            streamLabel="2026-11-29T00:00:00.000",
        )
    elif typ == "aws:kms/key:Key":
        key_id = f"{_digest('kms', region, args.name, n=8)}-{_digest(args.name, n=4)}-4000-8000-{_digest(region, n=12)}"
        out.update(keyId=key_id, arn=f"arn:aws:kms:{region}:{ACCOUNT_ID}:key/{key_id}")
        rid = key_id
    elif typ == "aws:sns/topic:Topic":
        out.update(arn=f"arn:aws:sns:{region}:{ACCOUNT_ID}:{name}")
        rid = out["arn"]
    elif typ == "aws:iam/role:Role":
        out.update(arn=f"arn:aws:iam::{ACCOUNT_ID}:role/{name}", uniqueId="AROA" + _digest(name, n=16).upper())
    elif typ == "aws:iam/policy:Policy":
        out.update(arn=f"arn:aws:iam::{ACCOUNT_ID}:policy/{name}")
        rid = out["arn"]
    elif typ == "aws:cloudwatch/logGroup:LogGroup":
        out.update(arn=f"arn:aws:logs:{region}:{ACCOUNT_ID}:log-group:{name}")
    elif typ == "aws:cloudwatch/metricAlarm:MetricAlarm":
        out.update(arn=f"arn:aws:cloudwatch:{region}:{ACCOUNT_ID}:alarm:{name}")
    elif typ == "aws:lambda/eventSourceMapping:EventSourceMapping":
        rid = f"{_digest(args.name, n=8)}-{_digest('esm', args.name, n=4)}-4000-8000-{_digest(region, args.name, n=12)}"
        out.update(uuid=rid, arn=f"arn:aws:lambda:{region}:{ACCOUNT_ID}:event-source-mapping:{rid}", state="Enabled")
    elif typ == "aws:scheduler/schedule:Schedule":
        out.update(arn=f"arn:aws:scheduler:{region}:{ACCOUNT_ID}:schedule/{inputs.get('groupName', 'default')}/{name}")
    elif typ == "aws:sfn/stateMachine:StateMachine":
        out.update(arn=f"arn:aws:states:{region}:{ACCOUNT_ID}:stateMachine:{name}", status="ACTIVE")
        rid = out["arn"]
    elif typ == "aws:scheduler/scheduleGroup:ScheduleGroup":
        out.update(arn=f"arn:aws:scheduler:{region}:{ACCOUNT_ID}:schedule-group/{name}")
    elif typ == "aws:secretsmanager/secret:Secret":
        out.update(arn=f"arn:aws:secretsmanager:{region}:{ACCOUNT_ID}:secret:{name}-AbCdEf")
        rid = out["arn"]
    elif typ == "aws:secretsmanager/secretVersion:SecretVersion":
        # A new value is a new version (what a rotation changes in the functions' environment).
        out.update(versionId=_digest("version", json.dumps(inputs, sort_keys=True, default=str), n=32),
                   arn=str(inputs.get("secretId", "")))
        rid = f"{inputs.get('secretId')}|{out['versionId']}"
    elif typ == "aws:appautoscaling/target:Target":
        rid = str(inputs.get("resourceId", name))
        out.update(arn=f"arn:aws:application-autoscaling:{region}:{ACCOUNT_ID}:scalable-target/{_digest(rid, n=20)}")
    elif typ == "aws:appautoscaling/policy:Policy":
        out.update(arn=f"arn:aws:autoscaling:{region}:{ACCOUNT_ID}:scalingPolicy:{_digest(name)}:resource/lambda/{name}")
    elif typ == "aws:ecr/repository:Repository":
        out.update(arn=f"arn:aws:ecr:{region}:{ACCOUNT_ID}:repository/{name}", registryId=ACCOUNT_ID,
                   repositoryUrl=f"{ACCOUNT_ID}.dkr.ecr.{region}.amazonaws.com/{name}")
    elif typ == "docker-build:index:Image":
        # A push's digest: the same build inputs, the same digest.
        built = json.dumps({k: inputs.get(k) for k in ("context", "dockerfile", "buildArgs", "platforms")}, sort_keys=True)
        out = {"digest": "sha256:" + hashlib.sha256(built.encode()).hexdigest(), "ref": f"{name}@sha256:mock"}
        rid = out["digest"]
    elif typ == "aws:wafv2/webAcl:WebAcl":
        # A CloudFront web ACL's ARN says "global"; its id is a UUID.
        rid = f"{_digest('waf', args.name, n=8)}-{_digest(args.name, n=4)}-4000-8000-{_digest(name, n=12)}"
        scope = "global" if inputs.get("scope") == "CLOUDFRONT" else "regional"
        out.update(arn=f"arn:aws:wafv2:{region}:{ACCOUNT_ID}:{scope}/webacl/{name}/{rid}",
                   lockToken=f"{_digest('lock', args.name, n=8)}-{_digest(rid, n=4)}-4000-8000-{_digest(rid, n=12)}",
                   capacity=len(inputs.get("rules") or []) * 50)
    elif typ == "aws:wafv2/webAclLoggingConfiguration:WebAclLoggingConfiguration":
        rid = str(inputs.get("resourceArn", name))
        out = {"region": region}
    elif typ == "random:index/randomPassword:RandomPassword":
        out = {"result": "mock-" + _digest("secret", args.name, json.dumps(inputs.get("keepers", {}), sort_keys=True), n=40),
               "bcryptHash": "$2a$10$mock"}
        rid = "none"
    elif typ.startswith("aws:") and "arn" not in out:
        out["arn"] = f"arn:aws:{service}:{region}:{ACCOUNT_ID}:{typ.split(':')[-1].lower()}/{name}"
    return rid, out


def call_result(args: pulumi_mocks.MockCallArgs) -> dict[str, Any]:
    token, a = args.token, args.args
    if token == "aws:index/getCallerIdentity:getCallerIdentity":
        return {"accountId": ACCOUNT_ID, "arn": f"arn:aws:iam::{ACCOUNT_ID}:user/ci", "userId": "AIDAMOCK", "id": ACCOUNT_ID}
    if token == "aws:index/getRegion:getRegion":
        region = a.get("region") or a.get("name") or DEFAULT_REGION
        return {"name": region, "region": region, "id": region, "endpoint": f"ec2.{region}.amazonaws.com"}
    if token == "aws:index/getPartition:getPartition":
        return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}
    if token == "aws:cloudfront/getCachePolicy:getCachePolicy":
        known = {"Managed-CachingDisabled": "4135ea2d-6df8-44a3-9df3-4b5a84be39ad",
                 "Managed-CachingOptimized": "658327ea-f89d-4fab-a63d-7e88639e58f6"}
        return {"id": known.get(str(a.get("name")), _digest(str(a.get("name")), n=36)), "name": a.get("name")}
    if token == "aws:cloudfront/getOriginRequestPolicy:getOriginRequestPolicy":
        known = {"Managed-AllViewerExceptHostHeader": "b689b0a8-53d0-40ab-baf2-68738e2966ac"}
        return {"id": known.get(str(a.get("name")), _digest(str(a.get("name")), n=36)), "name": a.get("name")}
    if token == "aws:ecr/getAuthorizationToken:getAuthorizationToken":
        region = a.get("region") or DEFAULT_REGION
        return {"userName": "AWS", "password": "mock-ecr-password", "authorizationToken": "bW9jaw==",
                "proxyEndpoint": f"https://{ACCOUNT_ID}.dkr.ecr.{region}.amazonaws.com", "expiresAt": "2026-12-01T12:00:00Z",
                "id": region}
    if token == "aws:iam/getPolicyDocument:getPolicyDocument":
        return {"json": json.dumps({"Version": "2012-10-17", "Statement": a.get("statements", [])}), "id": "doc"}
    raise NotImplementedError(f"the mock harness has no answer for call {token}; add one in devkit/mock_program.py")


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self, program: ProgramRun):
        self.program = program

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str | None, dict]:
        rid, computed = computed_attributes(args)
        outputs = {**args.inputs, **computed}
        self.program._new_resource(args, rid, outputs)
        return rid, outputs

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict, list[tuple[str, str]]]:
        result = call_result(args)
        self.program.calls.append((args.token, dict(args.args)))
        return result, []  # a list: pulumi iterates the check failures


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """Adds what MockResourceArgs leaves out: parent URN and resource options."""

    def __init__(self, mocks: RecordingMocks, program: ProgramRun):
        super().__init__(mocks)
        self.program = program

    def RegisterResource(self, request):  # noqa: N802 (gRPC name)
        self.program._pending_options[(request.type, request.name)] = {
            "parent": request.parent or None,
            "retainOnDelete": request.retainOnDelete if request.HasField("retainOnDelete") else None,
            "deletedWith": request.deletedWith or None,
            "protect": request.protect if request.HasField("protect") else None,
            "ignoreChanges": list(request.ignoreChanges),
            "replaceOnChanges": list(request.replaceOnChanges),
            "additionalSecretOutputs": list(request.additionalSecretOutputs),
            "dependencies": list(request.dependencies),
            "deleteBeforeReplace": request.deleteBeforeReplace,
            # Alias specs as the engine receives them: {"type": ..., "name": ...} (set fields only), or {"urn": ...}.
            "aliases": [
                {k: v for k, v in (("type", a.spec.type), ("name", a.spec.name)) if v} if a.HasField("spec")
                else {"urn": a.urn}
                for a in request.aliases
            ],
        }
        return super().RegisterResource(request)


class ProgramRun:
    """Everything one run of the program registered, with query helpers."""

    def __init__(self, stack: str, config: dict[str, str]):
        self.stack = stack
        self.config = config
        self.resources: list[Resource] = []
        self.calls: list[tuple[str, dict]] = []
        self.outputs: dict[str, Any] = {}
        self._pending_options: dict[tuple[str, str], dict] = {}
        self._by_urn: dict[str, Resource] = {}

    def _new_resource(self, args: pulumi_mocks.MockResourceArgs, rid: str | None, outputs: dict) -> None:
        options = self._pending_options.pop((args.typ, args.name), {})
        parent = options.pop("parent", None)
        urn = f"urn:pulumi:{self.stack}::{PROJECT}::{args.typ}::{args.name}"
        self.resources.append(
            Resource(
                type=args.typ, name=args.name, inputs=dict(args.inputs), outputs=outputs, id=rid or "",
                urn=urn, parent=parent, provider=args.provider, custom=bool(args.custom), options=options,
            )
        )

    # --- queries ------------------------------------------------------------------
    def of_type(self, typ: str) -> list[Resource]:
        return [r for r in self.resources if r.type == typ]

    def one(self, typ: str, *, region: str | None = None, name_contains: str | None = None) -> Resource:
        found = [
            r for r in self.of_type(typ)
            if (region is None or r.region == region) and (name_contains is None or name_contains in r.name)
        ]
        if len(found) != 1:
            raise AssertionError(
                f"expected exactly one {typ} (region={region}, name~{name_contains}), found "
                f"{len(found)}: {[r.name for r in found]}"
            )
        return found[0]

    def in_region(self, region: str, typ: str | None = None) -> list[Resource]:
        return [r for r in self.resources if r.custom and r.region == region and (typ is None or r.type == typ)]

    def find(self, typ: str, key: str, value: Any) -> Resource:
        """The one resource of type ``typ`` whose ``key`` (``"id"``, an input or an output)
        is ``value``: a lookup by identity, e.g. an ARN a stack output names."""
        found = [r for r in self.of_type(typ) if (r.id if key == "id" else r.get(key)) == value]
        if len(found) != 1:
            raise AssertionError(f"expected one {typ} with {key} {value!r}, found {len(found)}")
        return found[0]

    def named(self, name: str) -> Resource:
        found = [r for r in self.resources if r.name == name]
        if len(found) != 1:
            raise AssertionError(f"expected one resource named {name}, found {len(found)}")
        return found[0]

    def children_of(self, parent: Resource, typ: str | None = None) -> list[Resource]:
        return [r for r in self.resources if r.parent == parent.urn and (typ is None or r.type == typ)]

    def descendants_of(self, parent: Resource, typ: str | None = None) -> list[Resource]:
        out: list[Resource] = []
        frontier = [parent]
        while frontier:
            node = frontier.pop()
            for child in self.children_of(node):
                out.append(child)
                frontier.append(child)
        return [r for r in out if typ is None or r.type == typ]

    def parent_of(self, resource: Resource) -> Resource | None:
        """The enclosing component (None at the top: the stack is not a recorded resource)."""
        return self._by_urn.get(resource.parent) if resource.parent else None



def ensure_event_loop() -> None:
    """Pulumi's mock runtime, and any ``pulumi.Output`` made outside it, run on the thread's
    current event loop. A test that used asyncio.run() or anyio.run() before leaves the
    thread with none (the runner sets it to None on exit), so provide a fresh one then."""
    try:
        with warnings.catch_warnings():  # "There is no current event loop": it makes one, as wanted
            warnings.simplefilter("ignore", DeprecationWarning)
            loop = asyncio.get_event_loop_policy().get_event_loop()
        usable = not loop.is_closed()
    except RuntimeError:
        usable = False
    if not usable:
        asyncio.set_event_loop(asyncio.new_event_loop())


def _fresh_runtime() -> None:
    ensure_event_loop()
    pulumi_settings.ROOT.set(None)
    pulumi.runtime.set_all_config({})


def _is_program_module(name: str) -> bool:
    return name.split(".")[0] in ("components", "edge") or name == "__main__mcp_edge__"


@contextlib.contextmanager
def _fresh_program_modules() -> Iterator[None]:
    """The program imports components/edge modules: the run imports them afresh (each run
    starts from the files on disk, like a fresh `pulumi up`), and afterwards the caller's
    modules are back in ``sys.modules``. Left deleted, a caller's classes had no module to
    be found in (``inspect.getsource`` failed on them, so the component schema inferred
    from them lost every description after any program run in the same process)."""
    saved = {name: module for name, module in sys.modules.items() if _is_program_module(name)}
    for name in saved:
        del sys.modules[name]
    try:
        yield
    finally:
        for name in [n for n in sys.modules if _is_program_module(n)]:
            del sys.modules[name]
        sys.modules.update(saved)


def run_program(
    stack: str = "prod",
    *,
    config_overrides: dict[str, Any] | None = None,
    stack_file: Path | None = None,
    program: Path | Callable[[], object] = PROJECT_ROOT / "__main__.py",
) -> ProgramRun:
    """Run the Pulumi program under mocks (preview=False) and return what it registered.

    ``program`` is a program file, or a function that declares resources (and may
    ``pulumi.export``): a fresh program holding only what it creates, the way a CDK
    test puts one construct in a fresh stack. Raises whatever the program raised
    (config errors, invalid component args, failing applies).
    """
    config = pulumi_config_map(stack_file or stack)
    for key, value in (config_overrides or {}).items():
        full = key if ":" in key else f"{PROJECT}:{key}"
        if value is None:
            config.pop(full, None)
        else:
            config[full] = value if isinstance(value, str) else json.dumps(value)

    with _RUN_LOCK, _fresh_program_modules():
        _fresh_runtime()
        run = ProgramRun(stack, config)
        mocks = RecordingMocks(run)
        monitor = RecordingMonitor(mocks, run)
        pulumi.runtime.set_all_config(config)
        pulumi.runtime.set_mocks(mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)

        @pulumi.runtime.test
        def evaluate() -> pulumi.Output:
            cwd = os.getcwd()
            os.chdir(PROJECT_ROOT)
            try:
                if callable(program):
                    program()
                else:
                    runpy.run_path(str(program), run_name="__main__")
            finally:
                os.chdir(cwd)
            root = pulumi_settings.get_root_resource()
            outputs = getattr(root, "outputs", {}) if root is not None else {}
            return pulumi.Output.from_input(outputs).apply(run.outputs.update)

        evaluate()
        # The URNs as the engine built them (the type part nests the parents' types),
        # which is what every child's ``parent`` holds.
        engine_urns = {_type_and_name(urn): urn for urn in monitor.resources}
        for resource in run.resources:
            resource.urn = engine_urns.get((resource.type, resource.name), resource.urn)
            run._by_urn[resource.urn] = resource
        return run


def _type_and_name(urn: str) -> tuple[str, str]:
    """``urn:pulumi:stack::project::parent$type::name`` -> (type, name); a name may hold ``::``."""
    parts = urn.split("::")
    return parts[2].split("$")[-1], "::".join(parts[3:])


def check_output(output: pulumi.Output, check: Callable[[Any], None]) -> None:
    """Resolve ``output`` in a ``@pulumi.runtime.test`` and run ``check`` on its value.

    Fails if ``check`` never ran (a vacuous test) and re-raises what ``check`` raised.
    """
    ran: list[bool] = []

    def wrapped(value: Any) -> None:
        check(value)
        ran.append(True)

    ensure_event_loop()

    @pulumi.runtime.test
    def resolve() -> pulumi.Output:
        return output.apply(wrapped)

    resolve()
    if not ran:
        raise AssertionError("check_output: the check never ran; the Output did not resolve (vacuous test)")
