"""Deterministic packaging: same inputs give the same bytes; caches by input hash;
fixed dates and modes; build-machine litter never ships."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.lambda_package import (
    PackageBuildError,
    PackageSpec,
    build_package,
    input_digest,
    write_deterministic_zip,
    zip_sha256,
)


def make_source(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "pkg" / "__pycache__").mkdir(parents=True)
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pkg" / "handler.py").write_text("def handler(event, context):\n    return event\n")
    (src / "pkg" / "__pycache__" / "handler.cpython-313.pyc").write_bytes(b"junk")
    (src / "requirements.txt").write_text("")
    return src


def test_same_inputs_build_identical_bytes_in_separate_build_dirs(tmp_path):
    src = make_source(tmp_path)
    spec = PackageSpec(name="demo", sources=(src,), extra_files={"run.sh": b"#!/bin/sh\nexec true\n"}, executables=("run.sh",))
    first = build_package(spec, tmp_path / "a")
    second = build_package(spec, tmp_path / "b")
    assert zip_sha256(first) == zip_sha256(second)


def test_a_changed_source_changes_the_digest_and_the_zip(tmp_path):
    src = make_source(tmp_path)
    spec = PackageSpec(name="demo", sources=(src,))
    before_digest, before = input_digest(spec), build_package(spec, tmp_path / "out")
    (src / "pkg" / "handler.py").write_text("def handler(event, context):\n    return None\n")
    after = build_package(spec, tmp_path / "out")
    assert input_digest(spec) != before_digest and after != before


def test_cached_package_is_reused_not_rebuilt(tmp_path):
    src = make_source(tmp_path)
    spec = PackageSpec(name="demo", sources=(src,))
    path = build_package(spec, tmp_path / "out")
    mtime = path.stat().st_mtime_ns
    assert build_package(spec, tmp_path / "out") == path
    assert path.stat().st_mtime_ns == mtime


def test_entries_are_sorted_dated_1980_with_fixed_modes_and_no_local_bytecode(tmp_path):
    src = make_source(tmp_path)
    spec = PackageSpec(name="demo", sources=((src / "pkg", "pkg/"),), extra_files={"run.sh": b"#!/bin/sh\n"},
                       executables=("run.sh",), compile_bytecode=False)
    with zipfile.ZipFile(build_package(spec, tmp_path / "out")) as zf:
        infos = zf.infolist()
    names = [i.filename for i in infos]
    assert names == sorted(names) == ["pkg/__init__.py", "pkg/handler.py", "run.sh"]
    assert all(i.date_time == (1980, 1, 1, 0, 0, 0) for i in infos)
    modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in infos}
    assert modes == {"pkg/__init__.py": 0o644, "pkg/handler.py": 0o644, "run.sh": 0o755}


def test_declared_executable_missing_from_package_is_an_error(tmp_path):
    spec = PackageSpec(name="demo", sources=(make_source(tmp_path),), executables=("run.sh",))
    with pytest.raises(PackageBuildError, match=r"executables \['run.sh'\] are not in the package"):
        build_package(spec, tmp_path / "out")


def test_unresolvable_requirement_fails_with_the_pip_message(tmp_path):
    req = tmp_path / "requirements.txt"
    req.write_text("this-package-does-not-exist-mcp-edge==0.0.1\n")
    spec = PackageSpec(name="demo", sources=(make_source(tmp_path),), requirements=req)
    with pytest.raises(PackageBuildError, match="pip could not install"):
        build_package(spec, tmp_path / "out")


@settings(max_examples=25, deadline=None)
@given(st.dictionaries(st.text("abcdefgh/._", min_size=1, max_size=12).filter(lambda s: not s.endswith("/")),
                       st.binary(max_size=64), max_size=6))
def test_zip_bytes_depend_only_on_contents_not_insertion_order(tmp_path_factory, entries):
    out = tmp_path_factory.mktemp("z")
    write_deterministic_zip(entries, out / "a.zip")
    write_deterministic_zip(dict(reversed(list(entries.items()))), out / "b.zip")
    assert zip_sha256(out / "a.zip") == zip_sha256(out / "b.zip")
    with zipfile.ZipFile(out / "a.zip") as zf:
        assert {n: zf.read(n) for n in zf.namelist()} == entries


def test_shipped_bytecode_is_what_python_runs_and_is_reproducible(tmp_path):
    """Unchecked-hash .pyc files: Python loads them without re-reading the source,
    so a cold start on read-only /var/task compiles nothing."""
    import subprocess
    import sys

    src = make_source(tmp_path)
    spec = PackageSpec(name="demo", sources=((src / "pkg", "pkg/"),), python_version=f"{sys.version_info[0]}.{sys.version_info[1]}")
    first = build_package(spec, tmp_path / "a")
    assert zip_sha256(first) == zip_sha256(build_package(spec, tmp_path / "b"))
    extracted = tmp_path / "x"
    with zipfile.ZipFile(first) as zf:
        assert f"pkg/__pycache__/handler.{sys.implementation.cache_tag}.pyc" in zf.namelist()
        zf.extractall(extracted)
    # Edit the source after packaging: the shipped bytecode still answers.
    (extracted / "pkg" / "handler.py").write_text("def handler(event, context):\n    return 'edited'\n")
    out = subprocess.run(
        [sys.executable, "-c", "import pkg.handler as h; print(h.handler('shipped', None), h.__file__)"],
        cwd=extracted, capture_output=True, text=True, env={"PYTHONDONTWRITEBYTECODE": "1"}, check=True,
    ).stdout
    assert out.startswith("shipped ")


def test_no_bytecode_when_the_build_python_differs_from_the_target(tmp_path):
    spec = PackageSpec(name="demo", sources=((make_source(tmp_path) / "pkg", "pkg/"),), python_version="2.7")
    with zipfile.ZipFile(build_package(spec, tmp_path / "out")) as zf:
        assert not [n for n in zf.namelist() if n.endswith(".pyc")]


def test_bytecode_does_not_depend_on_what_the_building_process_did_before(tmp_path):
    """marshal's output depends on reference counts and interning in the compiling
    process: compiled in-process, a build after importing other modules (a pytest run,
    the Pulumi program) gave other bytes than a fresh build. Bytecode is compiled in a
    fresh interpreter, so the package is the same either way."""
    import os
    import shutil
    import subprocess
    import sys

    from stack_config.loading import PROJECT_ROOT

    src = tmp_path / "src"
    shutil.copytree(PROJECT_ROOT / "examples" / "demo" / "demo_server", src, ignore=shutil.ignore_patterns("__pycache__"))
    build = (
        "import sys; from pathlib import Path; from components.lambda_package import PackageSpec, build_package, zip_sha256;"
        f"print(zip_sha256(build_package(PackageSpec(name='s', sources=(Path({str(src)!r}),), "
        f"python_version='{sys.version_info[0]}.{sys.version_info[1]}'), Path(sys.argv[1]))))"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", warmup + build, str(tmp_path / f"out{i}")], capture_output=True, text=True,
            check=True, env={**os.environ, "PYTHONHASHSEED": str(i)}, cwd=PROJECT_ROOT,
        ).stdout.strip()
        for i, warmup in enumerate(("", "import mcp.server, jwt, starlette.applications;"))
    }
    assert len(digests) == 1
