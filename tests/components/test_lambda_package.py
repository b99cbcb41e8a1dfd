"""Deterministic packaging: same inputs give the same bytes; caches by input hash;
fixed dates and modes; build-machine litter never ships."""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.lambda_package import (
    LAMBDA_LIMITS,
    LambdaLimits,
    PackageBuildError,
    PackageLinkError,
    PackageSpec,
    PackageTooLargeError,
    build_package,
    folder_files,
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


# --- symbolic links: a package holds its folder's own files only --------------------------------


def linked_server(tmp_path: Path) -> tuple[Path, Path]:
    """A server folder and, beside it, a folder of secrets it must never ship."""
    outside = tmp_path / "home"
    (outside / "aws").mkdir(parents=True)
    (outside / "aws" / "credentials").write_text("aws_secret_access_key = SECRET-OUTSIDE\n")
    src = tmp_path / "server"
    (src / "real" / "lib").mkdir(parents=True)
    (src / "server.py").write_text("print('hi')\n")
    (src / "real" / "lib" / "util.py").write_text("X = 1\n")
    return src, outside


def no_zip_holds(build_dir: Path, secret: bytes) -> bool:
    for path in build_dir.glob("**/*.zip"):
        with zipfile.ZipFile(path) as zf:
            if any(secret in zf.read(n) for n in zf.namelist()):
                return False
    return True


@pytest.mark.parametrize(("make_links", "named"), [
    # the attack: a file link to a credentials file outside the folder, by '..' and absolute
    (lambda src, out: (src / "creds").symlink_to("../home/aws/credentials"),
     "'creds' is a link to '../home/aws/credentials', which leads outside the folder"),
    (lambda src, out: (src / "creds").symlink_to(out / "aws" / "credentials"),
     "'creds' is a link to '{out}/aws/credentials', which leads outside the folder"),
    # a folder link out of it
    (lambda src, out: (src / "real" / "aws").symlink_to("../../home/aws"),
     "'real/aws' is a link to '../../home/aws', which leads outside the folder"),
    # through another link: an inside link to a link that leaves
    (lambda src, out: ((src / "hop").symlink_to(out / "aws" / "credentials"), (src / "creds").symlink_to("hop")),
     "'creds' is a link to 'hop', which leads outside the folder through the link 'hop'"),
    # through a folder that is a link out, by a path that reads as inside
    (lambda src, out: ((src / "sub").symlink_to(out), (src / "creds").symlink_to("sub/aws/credentials")),
     "'creds' is a link to 'sub/aws/credentials', which leads outside the folder (to {out}/aws/credentials)"),
])
def test_a_link_leaving_the_folder_is_refused_naming_the_link_and_its_target(tmp_path, make_links, named):
    src, outside = linked_server(tmp_path)
    make_links(src, outside)
    spec = PackageSpec(name="linked", sources=(src,), compile_bytecode=False)
    with pytest.raises(PackageLinkError) as refused:
        build_package(spec, tmp_path / "out")
    assert named.format(out=outside) in str(refused.value)
    assert "holds its folder's own files only" in str(refused.value)
    assert no_zip_holds(tmp_path, b"SECRET-OUTSIDE")


@pytest.mark.parametrize(("make_link", "named"), [
    (lambda src: (src / "loop").symlink_to("."), "'loop' is a link to '.', a folder that holds it (a cycle)"),
    (lambda src: (src / "real" / "lib" / "up").symlink_to("../.."), "'real/lib/up' is a link to '../..', a folder "
                                                                     "that holds it (a cycle)"),
    (lambda src: (src / "gone").symlink_to("nowhere.py"), "'gone' is a link to 'nowhere.py', which does not exist"),
    (lambda src: ((src / "a").symlink_to("b"), (src / "b").symlink_to("a")), "'a' is a link to 'b', which loops"),
    (lambda src: os.mkfifo(src / "pipe"), "'pipe' is neither a regular file nor a folder"),
])
def test_cycles_dangling_links_and_special_files_are_refused_by_name(tmp_path, make_link, named):
    src, _ = linked_server(tmp_path)
    make_link(src)
    with pytest.raises(PackageLinkError, match=re.escape(named)):
        build_package(PackageSpec(name="linked", sources=(src,), compile_bytecode=False), tmp_path / "out")


def test_links_inside_the_folder_are_packaged_as_what_they_point_to(tmp_path):
    src, _ = linked_server(tmp_path)
    (src / "lib").symlink_to("real/lib")  # a folder link, dropped before
    (src / "main.py").symlink_to("server.py")
    (src / "deep").symlink_to(src / "real")  # absolute, but inside
    # a link whose name is never packaged is not looked at (a virtualenv elsewhere)
    (src / ".venv").symlink_to(tmp_path / "home")
    (src / "node_modules").symlink_to("/")
    with zipfile.ZipFile(build_package(PackageSpec(name="linked", sources=(src,), compile_bytecode=False),
                                       tmp_path / "out")) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    assert files == {"server.py": b"print('hi')\n", "main.py": b"print('hi')\n", "real/lib/util.py": b"X = 1\n",
                     "lib/util.py": b"X = 1\n", "deep/lib/util.py": b"X = 1\n"}


def test_the_source_folder_may_itself_be_a_link_and_is_resolved_once(tmp_path):
    src, _ = linked_server(tmp_path)
    named = tmp_path / "project" / "server-link"
    named.parent.mkdir()
    named.symlink_to(src)
    (src / "back").symlink_to("../server/server.py")  # back inside by the real folder's own name: inside
    with zipfile.ZipFile(build_package(PackageSpec(name="linked", sources=(named,), compile_bytecode=False),
                                       tmp_path / "out")) as zf:
        assert sorted(zf.namelist()) == ["back", "real/lib/util.py", "server.py"]
    # ... but not by the link's name: the package is the real folder's, and that path leaves it
    (src / "via-name").symlink_to("../project/server-link/server.py")
    with pytest.raises(PackageLinkError, match="'via-name' is a link to '../project/server-link/server.py', which "
                                               "leads outside the folder"):
        folder_files(named)


def test_a_linked_file_changes_the_digest_when_its_target_changes(tmp_path):
    src, _ = linked_server(tmp_path)
    (src / "lib").symlink_to("real/lib")
    spec = PackageSpec(name="linked", sources=(src,), compile_bytecode=False)
    before = input_digest(spec)
    (src / "real" / "lib" / "util.py").write_text("X = 2\n")
    assert input_digest(spec) != before


def test_an_install_command_that_links_outside_its_copy_is_refused(tmp_path):
    src, outside = linked_server(tmp_path)
    spec = PackageSpec(name="linked", sources=(src,), install="command", compile_bytecode=False,
                       install_command=f"ln -s {outside}/aws/credentials creds")
    with pytest.raises(PackageLinkError, match=f"'creds' is a link to '{outside}/aws/credentials'"):
        build_package(spec, tmp_path / "out")
    assert no_zip_holds(tmp_path, b"SECRET-OUTSIDE")


def test_a_link_root_lets_this_projects_function_folders_share_a_sibling_module(tmp_path):
    functions = tmp_path / "functions"
    (functions / "probe").mkdir(parents=True)
    (functions / "contract.py").write_text("SHARED = 1\n")
    (functions / "probe" / "contract.py").symlink_to("../contract.py")
    spec = PackageSpec(name="probe", sources=((functions / "probe", "probe/"),), compile_bytecode=False)
    with pytest.raises(PackageLinkError, match="'contract.py' is a link to '../contract.py'"):
        build_package(spec, tmp_path / "out")
    shared = PackageSpec(name="probe", sources=((functions / "probe", "probe/"),), compile_bytecode=False,
                         link_root=functions)
    with zipfile.ZipFile(build_package(shared, tmp_path / "out")) as zf:
        assert zf.read("probe/contract.py") == b"SHARED = 1\n"
    (tmp_path / "outside.py").write_text("")
    (functions / "probe" / "out.py").symlink_to("../../outside.py")  # past the link root: refused still
    with pytest.raises(PackageLinkError, match="'out.py' is a link to '../../outside.py'"):
        build_package(shared, tmp_path / "out")


# --- Lambda's size limits ------------------------------------------------------------------------

SMALL = LambdaLimits(unzipped=300_000, zipped=200_000)


def sized_server(tmp_path: Path, sizes: dict[str, int], random: bool) -> Path:
    """A folder of files of the given sizes: random bytes (incompressible) or a sparse file (zeros)."""
    src = tmp_path / "big"
    for arcname, size in sizes.items():
        path = src / arcname
        path.parent.mkdir(parents=True, exist_ok=True)
        if random:
            path.write_bytes(os.urandom(size))
        else:
            with path.open("wb") as f:
                f.truncate(size)
    return src


def test_a_package_over_lambdas_unzipped_limit_is_refused_naming_the_limit_the_size_and_the_biggest_folders(tmp_path):
    # sparse: compresses to almost nothing, so only the unzipped limit is passed
    sizes = {f"data/f{i}/blob": 40_000 + 1_000 * i for i in range(7)} | {"root.bin": 45_500}
    src = sized_server(tmp_path, sizes, random=False)
    spec = PackageSpec(name="big", sources=(src,), compile_bytecode=False)
    with pytest.raises(PackageTooLargeError) as refused:
        build_package(spec, tmp_path / "out", limits=SMALL)
    message = str(refused.value)
    total = sum(sizes.values())
    assert f"package big is {total:,} bytes unzipped, over Lambda's limit of 300,000 bytes (293.0 KB)" in message
    # the five biggest folders, biggest first: data/f6/ (46,000 bytes), the root's files (45,500), data/f5/ ...
    assert "biggest folders: data/f6/ 44.9 KB, ./ 44.4 KB, data/f5/ 43.9 KB, data/f4/ 43.0 KB, data/f3/ 42.0 KB." in message
    assert "zipped" not in message.split(". Leave out")[0].replace("unzipped", "")


def test_a_package_over_the_direct_upload_limit_is_refused_naming_the_zipped_size(tmp_path):
    sizes = {"model/weights.bin": 150_000, "model/vocab.bin": 60_000, "app.py": 1_000}  # random: incompressible
    src = sized_server(tmp_path, sizes, random=True)
    spec = PackageSpec(name="big", sources=(src,), compile_bytecode=False)
    with pytest.raises(PackageTooLargeError, match=r"package big is [\d,]+ bytes zipped, over Lambda's limit of "
                                                   r"200,000 bytes \(195\.3 KB\) for a zip uploaded directly") as refused:
        build_package(spec, tmp_path / "out", limits=SMALL)
    assert "biggest folders (zipped): model/ 205." in str(refused.value) and ", ./ " in str(refused.value)
    assert "unzipped" not in str(refused.value)
    # the same package under the real limits builds
    assert build_package(spec, tmp_path / "out").exists()


def test_the_layers_count_against_the_unzipped_limit(tmp_path):
    src = sized_server(tmp_path, {"app.bin": 200_000}, random=False)
    assert build_package(PackageSpec(name="big", sources=(src,), compile_bytecode=False), tmp_path / "out",
                         limits=SMALL).exists()
    with pytest.raises(PackageTooLargeError, match=r"is 350,000 bytes unzipped \(the package 200,000 and its layers "
                                                   r"150,000\), over Lambda's limit"):
        build_package(PackageSpec(name="big", sources=(src,), compile_bytecode=False, layer_bytes=150_000),
                      tmp_path / "out", limits=SMALL)  # the cached zip is checked again


def test_the_limits_are_lambdas_and_the_origin_counts_the_web_adapter_layer():
    from components.origin import LWA_LAYER_UNZIPPED_BYTES, server_package_spec

    # AccountLimit CodeSizeUnzipped and CodeSizeZipped, as GetAccountSettings reports them
    assert (LAMBDA_LIMITS.unzipped, LAMBDA_LIMITS.zipped) == (262_144_000, 52_428_800)
    spec = server_package_spec({"source": "examples/fastmcp", "runtime": "python3.13", "command": "python3 server.py"})
    assert spec.layer_bytes == LWA_LAYER_UNZIPPED_BYTES > 0
