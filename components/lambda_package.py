"""Deterministic Lambda packages: same inputs, same bytes, so `pulumi up` shows no
spurious code diff.

A package is the contents of one or more source folders, optional generated files,
and the source's dependencies, installed one of three ways (``PackageSpec.install``):

- ``pip``: the wheels of a requirements file for Lambda's platform, with pip's platform
  options (no local compilation, so the build machine's OS does not leak in);
- ``npm``: ``npm ci --omit=dev --ignore-scripts`` in a copy of the source folder, pure
  JavaScript only (a native addon, built for the build machine, is refused by name);
- ``command``: a shell command run in a copy of the source folder (a build of its own);
  whatever the copy holds afterwards is the package.

The source folders are only read: installs run in temporary copies. A package holds its
folders' own files only (``folder_files``): a link inside a folder is packaged as what it
points to, a link out of it is refused by name. A built zip over Lambda's size limits
(``LAMBDA_LIMITS``) is refused, naming the limit, the size and the biggest folders. Zip entries are
sorted, dated 1980-01-01 and carry fixed permissions (0755 for the executables, and with
``keep_modes`` for the files the folder marks executable; 0644 for the rest).
Built packages are cached under ``.build/packages`` by the hash of every input,
so one program run builds each package once and later runs reuse it.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

# Where built artefacts are cached: .build/ at the repository's root (ignored by git).
BUILD_ROOT = Path(__file__).resolve().parent.parent / ".build"
BUILD_DIR = BUILD_ROOT / "packages"
# Bump when the way packages are built changes, so cached zips are rebuilt.
BUILDER_VERSION = "5"
# Lambda's task root: compiled code objects name their files there, as an import
# from /var/task would.
LAMBDA_TASK_ROOT = "/var/task"
_FIXED_DATE = (1980, 1, 1, 0, 0, 0)
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache", "node_modules"}
# pip's console scripts (their shebang names the build machine's interpreter): not shipped.
_SKIP_INSTALLED_DIRS = {"bin"}
INSTALLS = ("pip", "npm", "command")
# What a Node.js package must not hold: a native addon, compiled for the machine that built it.
NATIVE_ADDON_MARKERS = ("binding.gyp",)
NATIVE_ADDON_SUFFIX = ".node"
INSTALL_TIMEOUT_S = 900
_SKIP_SUFFIXES = (".pyc", ".pyo")

PIP_PLATFORMS = {
    "arm64": ("manylinux2014_aarch64", "manylinux_2_28_aarch64"),
    "x86_64": ("manylinux2014_x86_64", "manylinux_2_28_x86_64"),
}


class PackageBuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class PackageSpec:
    """What goes into one Lambda package."""

    name: str
    # Folders whose contents go to the zip root (or a prefix: (folder, "prefix/")).
    sources: tuple[Path | tuple[Path, str], ...] = ()
    requirements: Path | None = None
    architecture: str = "arm64"  # Lambda architecture the wheels are for
    python_version: str = "3.13"
    # Generated files: archive name -> bytes (rendered code, constants).
    extra_files: Mapping[str, bytes] = field(default_factory=dict)
    # Archive names that must be executable (e.g. run.sh for the Web Adapter).
    executables: tuple[str, ...] = ()
    # Archive names of source files left out (files a source folder holds for another
    # packaging, e.g. a Dockerfile, or modules only some deployments ship).
    exclude: tuple[str, ...] = ()
    # How the dependencies get in: "pip" (from ``requirements``, the default when it is set),
    # "npm" or "command" (``install_command``); "" for none.
    install: str = ""
    install_command: str = ""
    # Ship files the source folders mark executable (a prebuilt server binary) as 0755.
    keep_modes: bool = False
    # Ship bytecode: /var/task is read-only, so without .pyc files every cold start
    # compiles every module from source (measured: 3.7 s vs 1.5 s to import the MCP
    # server). Only possible when the build runs the target Python version.
    compile_bytecode: bool = True
    # Where links in the source folders may lead (default: each folder itself): this
    # project's function folders link modules they share from their parent folder.
    link_root: Path | None = None
    # The unzipped bytes of the layers the function runs with: Lambda's 250 MB counts them too.
    layer_bytes: int = 0


class PackageLinkError(PackageBuildError):
    """A package's folder holds what cannot be packaged as its own files: a symbolic link
    that leaves the folder, loops or points at nothing, or a file that is no regular file."""


# How many links one name may pass through (Linux's own limit, MAXSYMLINKS).
_MAX_LINK_HOPS = 40


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _link_target(link: Path, root: Path, arcname: str) -> tuple[Path | None, str]:
    """Where a link inside ``root`` leads, as (its real path, "") when every hop of it and its
    final target stay inside ``root``, else (None, the problem naming the link and its target)."""
    first = os.readlink(link)
    current = link
    for _ in range(_MAX_LINK_HOPS):
        if not current.is_symlink():
            break
        text = os.readlink(current)
        # A hop is read from the real folder the link sits in, as the kernel reads it.
        nxt = Path(os.path.normpath(Path(os.path.realpath(current.parent)) / text))
        if not _inside(nxt, root):
            via = "" if current == link else f" through the link {current.relative_to(root).as_posix()!r}"
            return None, (f"{arcname!r} is a link to {first!r}, which leads outside the folder{via} "
                          f"(to {nxt})")
        current = nxt
    else:
        return None, f"{arcname!r} is a link to {first!r}, which loops (more than {_MAX_LINK_HOPS} links)"
    real = Path(os.path.realpath(link))
    if not _inside(real, root):  # through a folder on the way that is a link out
        return None, f"{arcname!r} is a link to {first!r}, which leads outside the folder (to {real})"
    if not real.exists():
        return None, f"{arcname!r} is a link to {first!r}, which does not exist"
    return real, ""


def walk_folder(folder: Path, prefix: str = "", skip_dirs: set[str] = _SKIP_DIRS,
                link_root: Path | None = None) -> tuple[list[tuple[str, Path]], list[str]]:
    """A folder's files as (archive name, real path to read), sorted, and its problems.

    The folder is resolved once (a folder named through a link is its target), and nothing
    outside it is read: a link whose hops and target stay inside is packaged as what it
    points to (a file, or a folder's files under the link's name, recursively); a link
    leaving it (absolute, by '..', or through another link), looping, pointing at nothing
    or at a folder that holds it (a cycle), and what is no regular file (a FIFO would
    block the build), are problems naming the entry. Skipped names are skipped before they
    are looked at: a '.venv' link to a virtualenv elsewhere is not packaged, so not refused.
    The stack checks and the component's report the problems before any resource exists
    (``components.origin.server_source_problems``); ``folder_files`` raises them.
    ``link_root`` widens where links may lead, for this project's own packages (a function
    folder linking a module its siblings share); a server's folder never gets one.
    """
    root = folder.resolve()
    bound = link_root.resolve() if link_root is not None else root
    files: list[tuple[str, Path]] = []
    problems: list[str] = []

    def visit(real_dir: Path, rel: str, ancestors: tuple[Path, ...]) -> None:
        try:
            with os.scandir(real_dir) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            problems.append(f"{rel or '.'!r} cannot be read ({exc.strerror})")
            return
        for entry in entries:
            arcname = rel + entry.name
            path = Path(entry.path)
            is_dir = os.path.isdir(path)  # follows a link (False when it loops or dangles): skipped by its kind
            if is_dir and (entry.name in skip_dirs or entry.name.startswith(".")):
                continue
            if not is_dir and entry.name.endswith(_SKIP_SUFFIXES):
                continue
            real = path
            if entry.is_symlink():
                target, problem = _link_target(path, bound, arcname)
                if target is None:
                    problems.append(problem)
                    continue
                real = target
            if real.is_dir():
                if real in ancestors:
                    problems.append(f"{arcname!r} is a link to {os.readlink(path)!r}, a folder that holds it "
                                    "(a cycle)")
                    continue
                visit(real, arcname + "/", (*ancestors, real))
            elif real.is_file():
                files.append((prefix + arcname, real))
            elif os.path.lexists(real):  # (one removed while the folder is read is not there to ship)
                problems.append(f"{arcname!r} is neither a regular file nor a folder (a FIFO, socket or device)")

    visit(root, "", (root,))
    return files, problems


def folder_files(folder: Path, prefix: str = "", skip_dirs: set[str] = _SKIP_DIRS,
                 link_root: Path | None = None) -> list[tuple[str, Path]]:
    """A package folder's files as (archive name, real path to read); see ``walk_folder``.
    Raises ``PackageLinkError`` naming every link that leaves the folder (and its target)."""
    files, problems = walk_folder(folder, prefix, skip_dirs, link_root)
    if problems:
        raise PackageLinkError(f"{folder}: {'; '.join(problems)}. {LINK_RULE}")
    return files


# What a folder's package may hold, said with every refusal.
LINK_RULE = ("A package holds its folder's own files only: a link inside the folder is packaged as what it "
             "points to there; copy what lies outside into the folder, or name a folder that holds it")


def _collect(spec: PackageSpec) -> dict[str, bytes]:
    entries: dict[str, bytes] = {}
    for source in spec.sources:
        folder, prefix = source if isinstance(source, tuple) else (source, "")
        for arcname, path in folder_files(folder, prefix, link_root=spec.link_root):
            if arcname == "requirements.txt" and install_of(spec) == "pip":
                continue  # describes what pip installs, is not part of the package
            if arcname in spec.exclude:
                continue
            entries[arcname] = path.read_bytes()
    for arcname, data in spec.extra_files.items():
        entries[arcname] = data
    return entries


def install_of(spec: PackageSpec) -> str:
    """How the spec's dependencies get in: its ``install``, else pip when it names a requirements file."""
    if spec.install:
        if spec.install not in INSTALLS:
            raise PackageBuildError(f"package {spec.name}: install {spec.install!r} is not one of {', '.join(INSTALLS)}")
        return spec.install
    return "pip" if spec.requirements is not None else ""


def source_executables(spec: PackageSpec) -> tuple[str, ...]:
    """With ``keep_modes``: the archive names of the source files marked executable."""
    if not spec.keep_modes:
        return ()
    found = []
    for source in spec.sources:
        folder, prefix = source if isinstance(source, tuple) else (source, "")
        found += [arcname for arcname, path in folder_files(folder, prefix, link_root=spec.link_root)
                  if os.access(path, os.X_OK)]
    return tuple(sorted(found))


def source_entries(spec: PackageSpec) -> dict[str, bytes]:
    """The package's own files (sources and generated files), without the installed
    requirements and bytecode: what a container image of the same spec copies."""
    return _collect(spec)


def input_digest(spec: PackageSpec) -> str:
    """Hash of everything that determines the package's bytes."""
    h = hashlib.sha256()
    h.update(f"{BUILDER_VERSION}|{spec.architecture}|{spec.python_version}|".encode())
    for arcname, data in sorted(_collect(spec).items()):
        h.update(arcname.encode() + b"\0" + hashlib.sha256(data).digest())
    if spec.requirements is not None:
        h.update(b"requirements\0" + spec.requirements.read_bytes())
    h.update(",".join(sorted(spec.executables)).encode())
    h.update(",".join(sorted(source_executables(spec))).encode())
    h.update(f"|install={install_of(spec)}|{spec.install_command}".encode())
    h.update(f"|pyc={_compiles(spec)}".encode())
    return h.hexdigest()


def _compiles(spec: PackageSpec) -> bool:
    return spec.compile_bytecode and f"{sys.version_info[0]}.{sys.version_info[1]}" == spec.python_version


# Compiles in a fresh interpreter with a fixed hash seed: marshal's output depends
# on set/frozenset ordering (string hashes) and on reference counts in the compiling
# process, so compiling inside a long-lived process (pytest, the Pulumi program)
# gave different bytes from run to run.
_COMPILE_SCRIPT = """
import importlib.util, sys
from importlib._bootstrap_external import _code_to_hash_pyc
src, out, root = sys.argv[1:4]
for arcname in open(src + "/.list", encoding="utf-8").read().splitlines():
    source = open(src + "/" + arcname, "rb").read()
    try:
        code = compile(source, root + "/" + arcname, "exec", dont_inherit=True, optimize=0)
    except (SyntaxError, ValueError):
        continue
    data = _code_to_hash_pyc(code, importlib.util.source_hash(source), checked=False)
    target = out + "/" + arcname + "c"
    import os; os.makedirs(os.path.dirname(target), exist_ok=True)
    open(target, "wb").write(bytes(data))
"""


def write_tree(entries: Mapping[str, bytes], root: Path, executables: tuple[str, ...] = ()) -> None:
    """The entries as files under ``root`` (the executables mode 0755, the rest 0644)."""
    for arcname, data in entries.items():
        path = root / arcname
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(0o755 if arcname in executables else 0o644)


def add_bytecode(entries: dict[str, bytes]) -> None:
    """Add unchecked-hash .pyc files (PEP 552) for every .py entry.

    Unchecked hash-based pycs hold no timestamp, so the bytes depend only on the
    source; Python loads them without re-reading the source (the package is
    immutable). Files that do not compile (vendored Python 2 snippets, templates)
    are shipped as source only.
    """
    sources = sorted(name for name in entries if name.endswith(".py"))
    tag = sys.implementation.cache_tag
    with tempfile.TemporaryDirectory(prefix="pyc-") as tmp:
        src, out = Path(tmp) / "src", Path(tmp) / "out"
        write_tree({arcname: entries[arcname] for arcname in sources}, src)
        (src / ".list").write_text("\n".join(sources), encoding="utf-8")
        env = {"PYTHONHASHSEED": "0", "PATH": os.environ.get("PATH", "")}
        result = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _COMPILE_SCRIPT, str(src), str(out), LAMBDA_TASK_ROOT],
            capture_output=True, text=True, env=env,
        )
        if result.returncode != 0:
            raise PackageBuildError(f"compiling bytecode failed:\n{result.stderr.strip()}")
        for arcname in sources:
            compiled = out / (arcname + "c")
            if compiled.exists():
                folder, _, filename = arcname.rpartition("/")
                entries[f"{folder + '/' if folder else ''}__pycache__/{filename[:-3]}.{tag}.pyc"] = compiled.read_bytes()


def _pip_install(spec: PackageSpec, target: Path) -> None:
    assert spec.requirements is not None
    cmd = [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
        "--no-compile", "--target", str(target),
        "--implementation", "cp",
        "--python-version", spec.python_version,
        "--only-binary=:all:",
        "--requirement", str(spec.requirements),
    ]
    for platform in PIP_PLATFORMS[spec.architecture]:
        cmd += ["--platform", platform]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise PackageBuildError(
            f"pip could not install {spec.requirements} for Lambda "
            f"({spec.architecture}, CPython {spec.python_version}):\n{result.stderr.strip()}"
        )


def _without_scripts(record: bytes) -> bytes:
    """A wheel's RECORD without the console scripts pip wrote to bin/ (not shipped):
    their shebang names the build machine's interpreter, so their hashes differed
    from one checkout to another."""
    lines = record.decode("utf-8").splitlines(keepends=True)
    return "".join(line for line in lines if not line.startswith(("bin/", "../"))).encode("utf-8")


def write_deterministic_zip(entries: Mapping[str, bytes], dest: Path, executables: tuple[str, ...] = ()) -> None:
    # A private temporary name: two processes building the same package at once
    # (parallel test runs) must not write into each other's file.
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for arcname in sorted(entries):
            info = zipfile.ZipInfo(arcname, date_time=_FIXED_DATE)
            mode = 0o755 if arcname in executables else 0o644
            info.external_attr = (0o100000 | mode) << 16
            info.create_system = 3  # unix, so the mode bits are honoured
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, entries[arcname], compresslevel=9)
    tmp.replace(dest)


@dataclass(frozen=True)
class LambdaLimits:
    """Lambda's size limits of a zip package, in bytes."""

    unzipped: int  # the function's package and its layers, extracted
    zipped: int  # the zip, uploaded directly (not through S3)


# AWS Lambda quotas (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html,
# "Deployment package (.zip file archive) size": 50 MB zipped when uploaded through the Lambda
# API or SDKs, 250 MB unzipped "including layers and custom runtimes"); in bytes as
# GetAccountSettings reports them (AccountLimit CodeSizeZipped 52428800, CodeSizeUnzipped
# 262144000; Lambda's refusal reads "Function code combined with layers exceeds the maximum
# allowed size of 262144000 bytes"). The program uploads every zip directly with its function
# (pulumi.FileArchive as the function's code, no S3 object), so both apply.
LAMBDA_LIMITS = LambdaLimits(unzipped=250 * 1024 * 1024, zipped=50 * 1024 * 1024)
# How many of the biggest folders a size refusal names.
BIGGEST_FOLDERS = 5


class PackageTooLargeError(PackageBuildError):
    """A package over one of Lambda's size limits; says which, the size and the biggest folders."""


def _folder_of(arcname: str) -> str:
    """The folder an entry counts towards: two levels deep (node_modules/<package>/), else its
    top folder, else the package root ('./')."""
    parts = arcname.split("/")[:-1]
    return "/".join(parts[:2]) + "/" if parts else "./"


def biggest_folders(sizes: Mapping[str, int], top: int = BIGGEST_FOLDERS) -> list[tuple[str, int]]:
    """The ``top`` folders (``_folder_of``) holding the most bytes, biggest first (ties by name)."""
    totals: dict[str, int] = {}
    for arcname, size in sizes.items():
        totals[_folder_of(arcname)] = totals.get(_folder_of(arcname), 0) + size
    return sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:top]


def _mb(size: int) -> str:
    for unit, scale in (("MB", 1024 * 1024), ("KB", 1024)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


def size_problems(name: str, unzipped: Mapping[str, int], zipped: Mapping[str, int], zip_bytes: int,
                  layer_bytes: int, limits: LambdaLimits) -> list[str]:
    """What of Lambda's size limits a package is over: each names the limit, the size and the
    biggest folders (by the measure the limit counts)."""
    problems = []
    total = sum(unzipped.values()) + layer_bytes
    if total > limits.unzipped:
        layers = f" (the package {sum(unzipped.values()):,} and its layers {layer_bytes:,})" if layer_bytes else ""
        problems.append(
            f"package {name} is {total:,} bytes unzipped{layers}, over Lambda's limit of {limits.unzipped:,} bytes "
            f"({_mb(limits.unzipped)}) for a function's package and layers unzipped; biggest folders: "
            + ", ".join(f"{folder} {_mb(size)}" for folder, size in biggest_folders(unzipped)))
    if zip_bytes > limits.zipped:
        problems.append(
            f"package {name} is {zip_bytes:,} bytes zipped, over Lambda's limit of {limits.zipped:,} bytes "
            f"({_mb(limits.zipped)}) for a zip uploaded directly (as this program uploads it); biggest folders "
            "(zipped): " + ", ".join(f"{folder} {_mb(size)}" for folder, size in biggest_folders(zipped)))
    return problems


def check_size(spec: PackageSpec, path: Path, limits: LambdaLimits = LAMBDA_LIMITS) -> None:
    """Refuse a built zip over Lambda's limits (``size_problems``), with what to do about it."""
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
    problems = size_problems(spec.name, {i.filename: i.file_size for i in infos},
                             {i.filename: i.compress_size for i in infos}, path.stat().st_size,
                             spec.layer_bytes, limits)
    if problems:
        raise PackageTooLargeError("; ".join(problems) + ". Leave out what the server does not need at run time "
                                   "(an install command can trim its copy), or run it as an image (up to 10 GB)")


def build_package(spec: PackageSpec, build_dir: Path = BUILD_DIR, limits: LambdaLimits = LAMBDA_LIMITS) -> Path:
    """Build (or reuse) the package's zip; returns its path. Refused (``PackageTooLargeError``)
    when it is over one of Lambda's ``limits``, checked on a reused zip too (the limits and the
    layers are not part of its digest)."""
    digest = input_digest(spec)
    dest = build_dir / f"{spec.name}-{digest[:16]}.zip"
    if not dest.exists():
        _build(spec, dest)
    check_size(spec, dest, limits)
    return dest


def _build(spec: PackageSpec, dest: Path) -> None:
    build_dir = dest.parent
    build_dir.mkdir(parents=True, exist_ok=True)
    entries = _collect(spec)
    executables = set(spec.executables) | set(source_executables(spec))
    install = install_of(spec)
    if install == "pip":
        with tempfile.TemporaryDirectory(prefix=f"{spec.name}-") as tmp:
            target = Path(tmp) / "site"
            _pip_install(spec, target)
            for arcname, path in folder_files(target, "", _SKIP_DIRS | _SKIP_INSTALLED_DIRS):
                data = path.read_bytes()
                if arcname.endswith(".dist-info/RECORD"):
                    data = _without_scripts(data)
                entries.setdefault(arcname, data)
    elif install in ("npm", "command"):
        with tempfile.TemporaryDirectory(prefix=f"{spec.name}-") as tmp:
            work = Path(tmp) / "work"
            write_tree(entries, work, tuple(executables))
            if install == "npm":
                _npm_install(spec, work)
            else:
                _run_install_command(spec, work)
            # Whatever the copy holds now is the package (the installed node_modules, a build's output).
            skip = {"__pycache__", ".pytest_cache", ".mypy_cache"}
            entries = {}
            for arcname, path in folder_files(work, "", skip):
                entries[arcname] = path.read_bytes()
                if os.access(path, os.X_OK):
                    executables.add(arcname)
    if _compiles(spec):
        add_bytecode(entries)
    missing = [e for e in spec.executables if e not in entries]
    if missing:
        raise PackageBuildError(f"package {spec.name}: executables {missing} are not in the package")
    write_deterministic_zip(entries, dest, tuple(sorted(executables & set(entries))))


def _run(spec: PackageSpec, cmd: list[str], cwd: Path, what: str) -> None:
    try:
        result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    except FileNotFoundError:
        raise PackageBuildError(f"package {spec.name}: {what} needs {cmd[0]!r} on PATH") from None
    except subprocess.TimeoutExpired:
        raise PackageBuildError(f"package {spec.name}: {what} ran over {INSTALL_TIMEOUT_S} s") from None
    if result.returncode != 0:
        output = (result.stderr.strip() or result.stdout.strip())[-4000:]
        raise PackageBuildError(f"package {spec.name}: {what} failed (exit {result.returncode}):\n{output}")


def _npm_install(spec: PackageSpec, work: Path) -> None:
    """``npm ci --omit=dev`` from the copy's lock file; install scripts off (pure JavaScript:
    a script would build for this machine, not for Lambda's), then no native addon allowed."""
    _run(spec, ["npm", "ci", "--omit=dev", "--ignore-scripts", "--no-audit", "--no-fund"], work,
         "npm ci --omit=dev")
    addons = native_addons(work / "node_modules")
    if addons:
        raise PackageBuildError(
            f"package {spec.name}: npm installed native addons ({', '.join(addons)}), built for this machine and not "
            "for Lambda's arm64 Linux: use pure JavaScript packages, or an image (server.image) that builds them for "
            "arm64, or an install command of your own (server.install) that does")


def native_addons(node_modules: Path) -> list[str]:
    """The packages under ``node_modules`` holding a native addon (``binding.gyp`` or a ``.node`` file)."""
    found: set[str] = set()
    if not node_modules.is_dir():
        return []
    for root, _dirs, files in os.walk(node_modules):
        if any(f in NATIVE_ADDON_MARKERS or f.endswith(NATIVE_ADDON_SUFFIX) for f in files):
            parts = Path(root).relative_to(node_modules).parts
            # node_modules/<name> or node_modules/@scope/<name>, at any depth: the innermost package.
            idx = max((i for i, p in enumerate(parts) if p == "node_modules"), default=-1) + 1
            name = parts[idx:idx + 2] if idx < len(parts) and parts[idx].startswith("@") else parts[idx:idx + 1]
            found.add("/".join(name) or ".")
    return sorted(found)


def _run_install_command(spec: PackageSpec, work: Path) -> None:
    _run(spec, ["sh", "-c", spec.install_command], work, f"install command {spec.install_command!r}")


def zip_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@functools.cache
def source_code_hash(path: Path) -> str:
    """What Lambda reports as CodeSha256 (base64 of the zip's SHA-256): the same value
    means no code update. Cached: a package's path names its input digest, and every
    region's function uses the same zip."""
    return base64.b64encode(bytes.fromhex(zip_sha256(path))).decode()
