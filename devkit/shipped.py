"""What the program ships at the edge, taken from its own resource inputs under mocks:
the CloudFront Function's code and the Lambda@Edge gate's package (its router module
and the whole package folder, ``extract_package``), plus the helpers that execute them
(a real JS engine, a fresh import of the zipped module), and the CloudFront/Lambda@Edge
event shapes they receive."""

from __future__ import annotations

import base64
import functools
import json
import shutil
import zipfile
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from devkit.edge_runtimes.in_process import KeyValueReader, RouterFunction
from devkit.edge_runtimes.in_process import ViewerFunction as LocalViewerFunction
from devkit.mock_program import ProgramRun, Resource, run_program
from edge.router import ROUTER_HANDLER, ROUTER_MODULE

VIEWER_FUNCTION = "aws:cloudfront/function:Function"
LAMBDA_FUNCTION = "aws:lambda/function:Function"
DISTRIBUTION = "aws:cloudfront/distribution:Distribution"
FUNCTION_URL = "aws:lambda/functionUrl:FunctionUrl"
# An origin custom header a distribution may set (the program sets none).
CUSTOM_ORIGIN_HEADER = ("x-origin-custom", "origin-custom-value")

# A second stack: no custom domain, other timeouts and price class, and regions that
# include eu-north-1 (the region a fixed country table routes Nordic viewers to, deployed or not).
ALT_OVERRIDES: dict[str, Any] = {
    "regions": ["eu-west-1", "us-west-2", "eu-north-1", "ap-southeast-2"],
    "defaultRegion": "eu-west-1",
    "probeRegions": ["eu-west-1"],
    "originOverrides": [],
    "customDomain": "",
    "certificateArn": "",
    "edgeOriginReadTimeoutSeconds": 45,
    "edgeOriginKeepaliveSeconds": 10,
    "edgePriceClass": "PriceClass_100",
}


@functools.cache
def alt_program() -> ProgramRun:
    return run_program("prod", config_overrides=ALT_OVERRIDES)


def viewer_function_resource(run: ProgramRun) -> Resource:
    return run.one(VIEWER_FUNCTION)


def router_resource(run: ProgramRun) -> Resource:
    return run.one(LAMBDA_FUNCTION, name_contains="-edge-router")


def router_zip(run: ProgramRun) -> Path:
    return Path(router_resource(run).inputs["code"].path)


def load_router(zip_path: Path) -> ModuleType:
    """Import the zipped router as Lambda would: a fresh module from the zip's bytes."""
    with zipfile.ZipFile(zip_path) as zf:
        source = zf.read(f"{ROUTER_MODULE}.py").decode("utf-8")
    return RouterFunction(source, ROUTER_HANDLER).module


def extract_package(archive: Path, folder: Path, rendered: Mapping[str, str] | None = None) -> Path:
    """The package the program uploads, extracted into ``folder`` (made afresh) as Lambda
    extracts it into ``/var/task``; ``rendered`` (archive name -> text) replaces files, and
    the shipped bytecode of a replaced file is left out so that it cannot shadow the new source."""
    replaced = {name: text.encode("utf-8") for name, text in (rendered or {}).items()}
    if folder.exists():
        shutil.rmtree(folder)
    with zipfile.ZipFile(archive) as zf:
        names = [n for n in zf.namelist() if not n.endswith("/")]
        missing = [n for n in replaced if n not in names]
        if missing:
            raise ValueError(f"{archive} holds no {', '.join(missing)} to replace")
        for name in names:
            if "__pycache__/" in name and _compiled_source(name) in replaced:
                continue
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(replaced.get(name) or zf.read(name))
    return folder


def _compiled_source(pyc_name: str) -> str:
    """``a/__pycache__/b.cpython-313.pyc`` -> ``a/b.py``."""
    folder, _, filename = pyc_name.rpartition("__pycache__/")
    return folder + filename.split(".", 1)[0] + ".py"


def function_url_hosts(run: ProgramRun) -> dict[str, str]:
    """Region -> host of that region's origin Function URL, as the mocks computed it."""
    hosts = {}
    for url in run.of_type(FUNCTION_URL):
        hosts[url.region] = url.outputs["functionUrl"].removeprefix("https://").rstrip("/")
    return hosts


# One loaded function per code text, for the whole process: the suite loads each once.
_ENGINES: dict[str, LocalViewerFunction] = {}


class ViewerFunction:
    """The CloudFront Function's code in QuickJS, run as the local edge runs it
    (``devkit.edge_runtimes.in_process.ViewerFunction``: the runtime's Buffer and ``cloudfront`` module
    stand-ins, the import line bound to the latter, every other byte as shipped).

    A KeyValueStore is associated; ``handler(event, kvs=...)`` reads it through ``kvs``
    (a ``devkit.edge_runtimes.in_process.KeyValueReader``; None, the default: every read fails).
    """

    def __init__(self, code: str):
        self.code = code
        if code not in _ENGINES:
            _ENGINES[code] = LocalViewerFunction(code, kvs_associated=True)
        self._function = _ENGINES[code]

    def handler(self, event: dict[str, Any], kvs: KeyValueReader | None = None) -> dict[str, Any]:
        """The handler's (awaited) result; raises EdgeFunctionError if it throws."""
        return self._function.run(event, kvs)  # type: ignore[no-any-return]

    def check(self, request: dict[str, Any]) -> dict[str, Any]:
        """The token check without the handler's safety net: raises if the code throws."""
        return self._function.call("check", request)  # type: ignore[no-any-return]

    def close(self) -> None:
        """Engines live as long as the process (see ``_ENGINES``)."""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def make_token(header: Any, claims: Any, signature: str = "c2lnbmF0dXJl") -> str:
    def encode(part: Any) -> str:
        raw = part if isinstance(part, bytes) else json.dumps(part).encode("utf-8")
        return b64url(raw)

    return f"{encode(header)}.{encode(claims)}.{signature}"


def viewer_event(
    uri: str = "/mcp",
    method: str = "POST",
    headers: dict[str, str] | None = None,
    *,
    host: str = "d111111abcdef8.cloudfront.net",
) -> dict[str, Any]:
    """A CloudFront Functions viewer-request event (lower-case header names)."""
    all_headers = {"host": host, **(headers or {})}
    return {
        "version": "1.0",
        "context": {
            "distributionDomainName": "d111111abcdef8.cloudfront.net",
            "distributionId": "EDFDVBD6EXAMPLE",
            "eventType": "viewer-request",
            "requestId": "4TyzHTaYWb1GX1qTfsHhEqV6HUDd_BzoBZnwfnvQc_1oF26ClkoUSEQ==",
        },
        "viewer": {"ip": "198.51.100.11"},
        "request": {
            "method": method,
            "uri": uri,
            "querystring": {},
            "headers": {name: {"value": value} for name, value in all_headers.items()},
            "cookies": {},
        },
    }


def origin_request_event(
    headers: dict[str, str] | None = None,
    *,
    origin_host: str = "default.lambda-url.us-east-1.on.aws",
    custom_header: tuple[str, str] = CUSTOM_ORIGIN_HEADER,
) -> dict[str, Any]:
    """A Lambda@Edge origin-request event for a custom origin, as CloudFront sends it (with
    one origin custom header, which a function must leave as it is)."""
    cf_headers = {
        name.lower(): [{"key": name, "value": value}]
        for name, value in {"Host": origin_host, **(headers or {})}.items()
    }
    return {
        "Records": [{
            "cf": {
                "config": {
                    "distributionDomainName": "d111111abcdef8.cloudfront.net",
                    "distributionId": "EDFDVBD6EXAMPLE",
                    "eventType": "origin-request",
                    "requestId": "4TyzHTaYWb1GX1qTfsHhEqV6HUDd_BzoBZnwfnvQc_1oF26ClkoUSEQ==",
                },
                "request": {
                    "clientIp": "203.0.113.178",
                    "method": "POST",
                    "uri": "/mcp",
                    "querystring": "",
                    "headers": cf_headers,
                    "origin": {
                        "custom": {
                            "customHeaders": {
                                custom_header[0]: [{"key": custom_header[0], "value": custom_header[1]}],
                            },
                            "domainName": origin_host,
                            "keepaliveTimeout": 5,
                            "path": "",
                            "port": 443,
                            "protocol": "https",
                            "readTimeout": 30,
                            "sslProtocols": ["TLSv1.2"],
                        },
                    },
                },
            },
        }],
    }
