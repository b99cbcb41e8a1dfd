"""Loading the stack config, two ways, through the one validation in ``stack_config.checks``:

- inside the Pulumi program, from ``pulumi.Config`` (``load_from_pulumi``), with the
  secret keys as Pulumi secrets for the resources that need them;
- straight from ``Pulumi.<stack>.yaml`` (``load_from_stack_file``), for tests, the
  offline plan and the local run, with no Pulumi engine involved.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi.runtime.config
import yaml

from stack_config.checks import ConfigError, server_folder, stack_warnings, unknown_key_problems
from stack_config.keys import KEY_BY_NAME, PROJECT
from stack_config.model import StackConfig
from stack_config.servers import build_stack_config  # checks' own, with mcp-edge:servers' checks

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class StackSecrets:
    """The stack's secret keys as Pulumi secrets (encrypted in state), None when not set."""

    probe_client_secret: pulumi.Output[str] | None
    """probeClientSecret; None: probeClientSecretName exists already."""


class ProgramConfigError(ConfigError, pulumi.RunError):
    """A ConfigError inside the program: the language host prints a ``RunError`` as its
    message alone (anything else with a traceback), so ``pulumi up`` shows the list of
    problems and nothing else."""


def engine_config_keys() -> set[str]:
    """Every config key the engine handed the program (``project:key``): the language host
    passes the whole stack config in ``PULUMI_CONFIG`` and installs it with
    ``pulumi.runtime.set_all_config`` before the program runs (the automation API and the
    mocks install it the same way), whether or not the program reads the key."""
    return set(pulumi.runtime.config.CONFIG.get()) | set(pulumi.runtime.get_config_env())


def load_from_pulumi() -> tuple[StackConfig, StackSecrets]:
    """Inside the Pulumi program: read ``pulumi.Config`` once, validate, and warn about
    what is valid but risky (``pulumi.log.warn``). A key of this project's namespace that
    the program does not read is refused with the rest, before any resource exists."""
    cfg = pulumi.Config(PROJECT)

    def get(name: str) -> Any:
        key = KEY_BY_NAME[name]
        if key.secret:
            return None  # secrets stay Outputs; see StackSecrets below
        if key.type in ("array", "object"):
            return cfg.get_object(name)
        return cfg.get(name)

    # Secrets are read as plain values only to validate them; they reach resources
    # as Pulumi secrets (StackSecrets) so they stay encrypted in state.
    unknown = unknown_key_problems(sorted(engine_config_keys()))
    stack = pulumi.get_stack()
    try:
        config = build_stack_config(get, stack, probe_client_secret=cfg.get("probeClientSecret"),
                                    other_custom_domains=other_custom_domains(stack, PROJECT_ROOT))
    except ConfigError as exc:
        raise ProgramConfigError(unknown + exc.problems) from None
    if unknown:
        raise ProgramConfigError(unknown)
    for warning in stack_warnings(get, config):
        pulumi.log.warn(warning)
    secrets = StackSecrets(
        probe_client_secret=cfg.require_secret("probeClientSecret")
        if config.auth.creates_probe_client_secret else None,
    )
    return config, secrets


class StackFileError(ValueError):
    pass


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error in one line: where (1-based, as editors count) and what."""
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return where + what


def _stack_file_config(path: Path) -> dict[Any, Any]:
    """A stack file's ``config:`` mapping, as written (every namespace)."""
    try:
        doc = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise StackFileError(f"stack file {path} does not exist") from None
    except IsADirectoryError:
        raise StackFileError(f"stack file {path} is a directory") from None
    except UnicodeDecodeError as exc:
        raise StackFileError(f"stack file {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except yaml.YAMLError as exc:
        raise StackFileError(f"stack file {path} is not valid YAML: {_yaml_problem(exc)}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise StackFileError(f"stack file {path}: must be a mapping with a 'config' key, not {type(doc).__name__}")
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        raise StackFileError(f"stack file {path}: 'config' must be a mapping")
    return config


def _stack_file_values(path: Path) -> tuple[dict[str, Any], list[str]]:
    """The ``mcp-edge:*`` values of a stack file, keyed without the namespace, and the
    problems of keys this project does not read."""
    config = _stack_file_config(path)
    problems = unknown_key_problems(config)
    values: dict[str, Any] = {}
    for full_key, value in config.items():
        namespace, _, name = str(full_key).partition(":")
        if namespace != PROJECT or name not in KEY_BY_NAME:
            continue  # other namespaces (aws:, pulumi:) are not ours to check; unknown keys are problems
        if isinstance(value, dict) and "secure" in value:
            value = None  # encrypted: only the Pulumi engine can read it
        values[name] = value
    return values, problems


def other_custom_domains(stack: str, folder: Path) -> dict[str, str]:
    """The customDomain of every other stack file in ``folder`` (the project's
    ``Pulumi.<stack>.yaml``), by stack; a file that cannot be read is that stack's problem,
    said when it is loaded, and left out here."""
    out: dict[str, str] = {}
    for path in sorted(folder.glob("Pulumi.*.yaml")):
        other = stack_name_of(path)
        if other == stack:
            continue
        try:
            domain = _stack_file_config(path).get(f"{PROJECT}:customDomain")
        except StackFileError:
            continue
        if isinstance(domain, str) and domain.strip():
            out[other] = domain.strip()
    return out


def read_stack_file(path: Path) -> dict[str, Any]:
    """The ``mcp-edge:*`` values of a Pulumi.<stack>.yaml, keyed without the namespace;
    a key this project does not read is refused (ConfigError, with the key it most
    likely means)."""
    values, problems = _stack_file_values(path)
    if problems:
        raise ConfigError(problems)
    return values


def stack_file_path(stack: str, root: Path = PROJECT_ROOT) -> Path:
    return root / f"Pulumi.{stack}.yaml"


def resolve_stack_file(stack_or_path: str | Path) -> Path:
    """A stack name (``prod``) or a stack file's path, as the stack file's path."""
    path = Path(stack_or_path)
    return path if path.suffix else stack_file_path(str(stack_or_path))


def stack_name_of(path: Path) -> str:
    """The stack a stack file configures: ``Pulumi.<stack>.yaml``."""
    return path.name.removeprefix("Pulumi.").removesuffix(".yaml")


def load_from_stack_file(stack_or_path: str | Path) -> StackConfig:
    """Outside the engine (tests, offline plan, local run): read Pulumi.<stack>.yaml."""
    path = resolve_stack_file(stack_or_path)
    stack = stack_name_of(path)
    values, unknown = _stack_file_values(path)
    try:
        config = build_stack_config(values.get, stack, other_custom_domains=other_custom_domains(stack, path.parent),
                                    stack_folder=path.parent.resolve())
    except ConfigError as exc:
        raise ConfigError(unknown + exc.problems) from None
    if unknown:
        raise ConfigError(unknown)
    return config


def _with_server_folders(value: Any, stack_folder: Path) -> Any:
    """``mcp-edge:server`` (or one ``servers`` entry) with its folder as the program, which
    runs in the project root, must read it: a folder named from a stack file's folder
    outside the project becomes absolute (``checks.server_folder``); anything else as written."""
    if not isinstance(value, dict):
        return value
    out = dict(value)
    for key in ("source", "image"):
        if isinstance(out.get(key), str) and out[key].strip():
            found = server_folder([], f"server.{key}", out[key].strip(), stack_folder)
            if found is not None:
                out[key] = found[1]
    return out


def pulumi_config_map(stack_or_path: str | Path) -> dict[str, str]:
    """The stack file's ``mcp-edge:*`` keys as the engine hands config to a program:
    ``project:key`` -> string, keys the project does not read included (the program
    refuses them, as it does under the engine), encrypted values left out (only the
    engine can read them) unless the key is unknown. A server folder named from a stack
    file's folder outside the project is given absolutely (the program runs in the project root)."""
    out: dict[str, str] = {}
    path = resolve_stack_file(stack_or_path)
    for full_key, value in _stack_file_config(path).items():
        namespace, _, name = str(full_key).partition(":")
        if namespace != PROJECT:
            continue
        if isinstance(value, dict) and "secure" in value:
            if name in KEY_BY_NAME:
                continue
            value = "[secret]"
        if value is None:
            continue
        if name == "server":
            value = _with_server_folders(value, path.parent.resolve())
        elif name == "servers" and isinstance(value, dict):
            value = {k: _with_server_folders(v, path.parent.resolve()) for k, v in value.items()}
        out[str(full_key)] = value if isinstance(value, str) else json.dumps(value)
    return out
