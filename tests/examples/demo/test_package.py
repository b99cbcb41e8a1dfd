"""The origin's Lambda package, as the program uploads it: handler, run.sh, wheels for
Lambda's platform (manylinux aarch64, CPython 3.13), determinism and size budget.

Size budget (stated in the README): the zip at most 20 MiB, unpacked at most 60 MiB
(with bytecode: the package ships .pyc files so cold starts skip compilation)
(Lambda's own limits are 50 MB zipped for direct upload and 250 MB unpacked with
layers; the Web Adapter layer is about 1 MB). The budget keeps cold starts short
and catches a dependency that drags in something heavy.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from components.lambda_package import build_package, zip_sha256
from components.origin import NOT_IN_ZIP, SERVER_PACKAGE, SERVER_SOURCE
from functions.contract import ORIGIN_SECRET_HEADER, SERVED_REGION_HEADER
from local.plan import secret_name_of
from tests.functions.mcp_server.conftest import (
    RUN_LOG,
    Issuer,
    program_environment,
    running_run_sh,
    stored_origin_secret,
)
from tests.functions.results.conftest import MotoServer, moto_server  # noqa: F401  (fixture)
from tests.harness import ProgramRun

ZIP_BUDGET_BYTES = 20 * 1024 * 1024
UNPACKED_BUDGET_BYTES = 60 * 1024 * 1024
ELF_MACHINE_AARCH64 = 183
WHEEL_TAG = re.compile(r"(py3-none-any|py2\.py3-none-any|cp3\d+-abi3-manylinux\w*_aarch64|cp313-cp313-manylinux\w*_aarch64)")


@pytest.fixture(scope="module")
def package(shipped_zip: Path) -> Iterator[zipfile.ZipFile]:
    with zipfile.ZipFile(shipped_zip) as zf:
        yield zf


def test_run_sh_is_the_executable_entry_point_starting_uvicorn(package: zipfile.ZipFile):
    info = package.getinfo("run.sh")
    assert (info.external_attr >> 16) & 0o777 == 0o755
    script = package.read("run.sh").decode()
    assert script.startswith("#!/bin/sh\n")
    assert "exec python -m uvicorn mcp_server.app:app" in script
    assert '--port "${AWS_LWA_PORT:-8080}"' in script
    assert "--host 127.0.0.1" in script
    assert "mcp_server/app.py" in package.namelist()


def test_package_holds_the_server_source_unchanged(package: zipfile.ZipFile):
    # Except the image's recipe and the SnapStart module (only the SnapStart package has it).
    source = {
        p.relative_to(SERVER_SOURCE).as_posix(): p.read_bytes()
        for p in SERVER_SOURCE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.relative_to(SERVER_SOURCE).as_posix() not in NOT_IN_ZIP
    }
    shipped = {
        n.removeprefix("mcp_server/"): package.read(n)
        for n in package.namelist()
        if n.startswith("mcp_server/") and "/__pycache__/" not in n
    }
    assert shipped == source


def test_native_code_is_for_lambda_arm64_and_cpython_313(package: zipfile.ZipFile):
    shared_objects = [n for n in package.namelist() if n.endswith(".so") or ".so." in n]
    assert shared_objects, "expected native extensions (pydantic-core, cryptography)"
    for name in shared_objects:
        header = package.read(name)[:20]
        assert header[:4] == b"\x7fELF", name
        assert int.from_bytes(header[18:20], "little") == ELF_MACHINE_AARCH64, f"{name} is not aarch64"
        assert "x86_64" not in name
        assert re.search(r"cpython-313-aarch64-linux-gnu|abi3", name), name


def test_every_wheel_is_tagged_for_the_lambda_platform(package: zipfile.ZipFile):
    wheels = [n for n in package.namelist() if n.endswith(".dist-info/WHEEL")]
    assert len(wheels) >= 25
    for name in wheels:
        tags = re.findall(r"^Tag: (.+)$", package.read(name).decode(), re.MULTILINE)
        assert tags and any(WHEEL_TAG.fullmatch(tag) for tag in tags), f"{name}: {tags}"


def test_every_pinned_requirement_ships_at_its_pinned_version(package: zipfile.ZipFile):
    pins: dict[str, str] = {}
    for line in (SERVER_SOURCE / "requirements.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            pin = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==(\S+)", line)
            assert pin, f"requirements.txt line {line!r} is not name==version"
            pins[pin.group(1)] = pin.group(2)
    shipped = {
        m.group(1).lower().replace("_", "-"): m.group(2)
        for n in package.namelist()
        if (m := re.fullmatch(r"([A-Za-z0-9_.]+)-([^-/]+)\.dist-info/METADATA", n))
    }
    for name, version in pins.items():
        assert shipped.get(name.lower().replace("_", "-")) == version, name


def test_nothing_from_the_build_machine_ships(package: zipfile.ZipFile):
    names = package.namelist()
    # Bytecode ships only as the package's own: CPython 3.13, unchecked-hash (PEP 552
    # flags 0b01: no timestamp, never re-validated), one per shipped source file.
    pycs = [n for n in names if n.endswith((".pyc", ".pyo"))]
    assert pycs and all(n.endswith(".cpython-313.pyc") and "/__pycache__/" in "/" + n for n in pycs)
    for name in pycs:
        folder, _, filename = name.rpartition("__pycache__/")
        assert folder + filename.removesuffix(".cpython-313.pyc") + ".py" in names, name
        assert int.from_bytes(package.read(name)[4:8], "little") == 0b01, f"{name} is not an unchecked-hash pyc"
    # The runtime has boto3; the origin needs no AWS SDK at all.
    assert not [n for n in names if n.startswith(("boto3/", "botocore/"))]
    assert all(info.date_time == (1980, 1, 1, 0, 0, 0) for info in package.infolist())


def test_package_fits_the_size_budget(shipped_zip: Path, package: zipfile.ZipFile):
    assert shipped_zip.stat().st_size <= ZIP_BUDGET_BYTES
    assert sum(info.file_size for info in package.infolist()) <= UNPACKED_BUDGET_BYTES


@pytest.mark.slow
def test_same_inputs_build_the_same_bytes(shipped_zip: Path, tmp_path: Path):
    # A build from nothing (an empty build folder: pip, bytecode and zip all done again)
    # against the zip the program uploads, which another build (the program run's, or an
    # earlier process's with the same inputs) made: one fresh build is enough to compare.
    fresh = build_package(SERVER_PACKAGE, tmp_path / "fresh")
    assert fresh != shipped_zip and fresh.parent == tmp_path / "fresh"
    assert zip_sha256(fresh) == zip_sha256(shipped_zip)


@pytest.mark.e2e
def test_run_sh_starts_the_app_and_the_readiness_path_answers(
    package: zipfile.ZipFile, prod: ProgramRun, issuer: Issuer, tmp_path: Path, moto_server: MotoServer,  # noqa: F811
):
    """What the Web Adapter does: exec run.sh, poll the readiness path, forward. The app
    reads the origin secret the program stores from Secrets Manager (moto) at start-up."""
    lambda_env = program_environment(prod)
    document = stored_origin_secret(prod, lambda_env["ORIGIN_SECRET_ID"])
    name = secret_name_of(lambda_env["ORIGIN_SECRET_ID"])  # moto makes its own ARN suffix: by name
    moto_server.client("secretsmanager", "us-east-1").create_secret(Name=name, SecretString=document)
    current = json.loads(document)["current"]
    env = {**lambda_env, **moto_server.env("us-east-1"), "ORIGIN_SECRET_ID": name, "AUTH_JWKS_URL": issuer.jwks_url}
    with running_run_sh(package, env, tmp_path) as (base, ready):
        assert ready.status_code == 200
        assert ready.headers[SERVED_REGION_HEADER] == "us-east-1"
        refused = httpx.post(f"{base}/mcp", json={}, headers={"host": "x.lambda-url.us-east-1.on.aws"})
        assert refused.status_code == 403  # the origin lock is on
        opened = httpx.post(f"{base}/mcp", json={}, headers={
            "host": "x.lambda-url.us-east-1.on.aws", ORIGIN_SECRET_HEADER: current})
        assert opened.status_code == 401  # past the lock with the stored secret: now the token is missing
    # Start-up ran with the garbage collector paused, and froze what it built before
    # reporting ready (start_up_gc): the "origin ready" line counts the objects start-up made.
    lines = [json.loads(line) for line in (tmp_path / RUN_LOG).read_text().splitlines() if line.startswith("{")]
    ready_line = next(line for line in lines if line.get("message") == "origin ready")
    assert ready_line["gc_frozen"] > 50_000
