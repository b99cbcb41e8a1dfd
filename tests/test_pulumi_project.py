"""Pulumi.yaml declares exactly the keys the program reads (its config block is rendered
from stack_config/keys.py), in the form the Pulumi CLI accepts (types
string/integer/boolean/array, arrays with `items`, no other attributes; an object key
untyped, with no default, which the program applies), and every stack file sets only
declared keys."""

from __future__ import annotations

from pathlib import Path

import yaml

from stack_config.keys import KEYS, OBJECT, PROJECT
from stack_config.loading import PROJECT_ROOT, load_from_stack_file
from stack_config.project_file import render

PROJECT_FILE_TEXT = (PROJECT_ROOT / "Pulumi.yaml").read_text()
PROJECT_FILE = yaml.safe_load(PROJECT_FILE_TEXT)
ALLOWED_ATTRIBUTES = {"type", "description", "default", "secret", "items"}


def test_project_is_a_python_program_with_a_virtualenv():
    assert PROJECT_FILE["name"] == PROJECT
    assert PROJECT_FILE["runtime"]["name"] == "python"
    assert PROJECT_FILE["runtime"]["options"]["virtualenv"] == ".venv"


def test_project_declares_every_key_the_program_reads_with_same_type_and_default():
    declared = PROJECT_FILE["config"]
    assert set(declared) == {k.name for k in KEYS}
    for key in KEYS:
        entry = declared[key.name]
        if key.type == OBJECT:  # declared untyped: the CLI types no object
            assert entry == {"description": key.description}, key.name
            continue
        assert entry["type"] == key.type, key.name
        assert entry["description"] == key.description, key.name
        if key.default is None:
            assert "default" not in entry, f"{key.name} is required: no default"
        else:
            assert entry["default"] == key.default, key.name
        assert entry.get("secret", False) == key.secret, key.name


def test_declarations_use_only_what_the_pulumi_cli_accepts():
    for name, entry in PROJECT_FILE["config"].items():
        assert set(entry) <= ALLOWED_ATTRIBUTES, name
        if "type" not in entry:  # an object key: the CLI checks no type and applies no default
            assert set(entry) == {"description"}, name
            continue
        assert entry["type"] in ("string", "integer", "boolean", "array"), name
        if entry["type"] == "array":
            assert entry["items"] == {"type": "string"}, name
        if "default" in entry:
            expected = {"string": str, "integer": int, "boolean": bool, "array": list}[entry["type"]]
            assert isinstance(entry["default"], expected), name


def test_every_stack_file_loads():
    stacks = sorted(Path(PROJECT_ROOT).glob("Pulumi.*.yaml"))
    assert stacks, "no stack files"
    for path in stacks:
        config = load_from_stack_file(path)
        assert config.stack == path.name.split(".")[1]


def test_object_keys_are_named_in_the_config_block_since_pulumi_types_none():
    objects = [k.name for k in KEYS if k.type == OBJECT]
    assert objects, "no object key: drop this test and the comment"
    comment = next(line for line in PROJECT_FILE_TEXT.splitlines() if "types no object key" in line)
    assert all(name in comment for name in objects)


def test_the_config_block_is_rendered_from_the_key_table():
    assert render(PROJECT_FILE_TEXT) == PROJECT_FILE_TEXT, "stale: run python -m stack_config.project_file --write"
