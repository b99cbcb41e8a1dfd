"""mcp-edge:servers: every bad entry is refused before any resource exists, each problem naming
its key (mcp-edge:servers.<name>.<key>); a valid map reads back as written; mcp-edge:server is
the one-server case; and a valid map is refused as not deployable yet, never ignored."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from components.server_names import server_tag
from edge.waf_capacity import capacity_for
from stack_config.checks import ConfigError, _problems_for_types, build_stack_config
from stack_config.loading import PROJECT_ROOT, load_from_stack_file, read_stack_file, stack_file_path
from stack_config.servers import (
    MAX_SERVERS,
    NAME_PATTERN,
    NOT_DEPLOYABLE_YET,
    RESERVED_NAMES,
    entry_of,
    hosted_servers,
    normalized_name,
    servers_problems,
    tool_limit_problems,
)
from stack_config.servers import build_stack_config as build_with_servers

PROD = read_stack_file(stack_file_path("prod"))
# prod's keys without the one-server keys: what a stack of several servers writes.
BASE = {k: v for k, v in PROD.items() if k not in ("server", "mcpPath", "wafToolLimits")}
REGIONS = tuple(PROD["regions"])
DIGEST = "sha256:" + "ab" * 32


def typed(**changes: Any) -> tuple[dict[str, Any], Any]:
    values = {**BASE, **changes}
    return values, values.get


def check(servers: Any, **changes: Any) -> tuple[list[Any], list[str]]:
    """The pure checks: hosted servers and problems (the typed values as the stack checks make them)."""
    values, get = typed(servers=servers, **changes)
    found: list[str] = []
    v = _problems_for_types(get, found)
    assert not found, found
    return servers_problems(get, v, tuple(v["regions"]))


def problems(servers: Any, **changes: Any) -> list[str]:
    return check(servers, **changes)[1]


def one(found: list[str], *fragments: str) -> str:
    """The one problem holding every fragment."""
    hits = [p for p in found if all(f in p for f in fragments)]
    assert len(hits) == 1, (fragments, found)
    return hits[0]


# --- the loader ---------------------------------------------------------------------------------


def test_the_one_server_stack_is_the_n1_case_at_mcppath_in_every_region():
    config = load_from_stack_file("prod")
    (server,) = hosted_servers(config)
    assert server.name is None and server.key == "mcp-edge:server"
    assert server.public_path == config.mcp_path == server.origin_path == "/mcp"
    assert server.metadata_path == "/.well-known/oauth-protected-resource/mcp"
    assert server.regions == config.regions and server.config == config.server
    assert server.sizing.applied_to(config.origin_for("us-east-1")) == config.origin_for("us-east-1")


def test_a_valid_servers_map_is_refused_as_not_deployable_yet_not_ignored():
    values = {**BASE, "servers": {"github": {"imageDigest": DIGEST}}}
    with pytest.raises(ConfigError) as info:
        build_with_servers(values.get, "test")
    assert info.value.problems == [NOT_DEPLOYABLE_YET]
    assert "not deployable yet" in NOT_DEPLOYABLE_YET and "mcp-edge:servers" in NOT_DEPLOYABLE_YET


def test_the_loader_refuses_a_stack_file_with_servers(tmp_path):
    text = stack_file_path("prod").read_text().replace("mcp-edge:mcpPath: /mcp\n", "")
    text = text.replace("  mcp-edge:server:\n", "  mcp-edge:servers:\n    demo:\n", 1)
    text = text.replace("\n    countdown: 30\n", "\n    demo/countdown: 30\n")
    # The entry's sub-keys one level deeper, under the name.
    lines = text.splitlines()
    start = lines.index("    demo:") + 1
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("  mcp-edge:"))
    lines[start:end] = ["  " + line if line.strip() else line for line in lines[start:end]]
    path = tmp_path / "Pulumi.many.yaml"
    # A relative server folder is named from the stack file's folder: the demo's, absolutely.
    text = "\n".join(lines).replace("source: examples/demo", f"source: {PROJECT_ROOT / 'examples/demo'}")
    path.write_text(text + "\n")
    with pytest.raises(ConfigError) as info:
        load_from_stack_file(path)
    assert info.value.problems == [NOT_DEPLOYABLE_YET]


def test_servers_problems_come_with_the_stacks_other_problems_at_once():
    values = {**BASE, "servers": {"Git_Hub": {"imageDigest": DIGEST}}, "authIssuer": "http://insecure/"}
    with pytest.raises(ConfigError) as info:
        build_with_servers(values.get, "test")
    assert any("authIssuer" in p for p in info.value.problems)
    assert any("'Git_Hub'" in p and "did you mean 'git-hub'" in p for p in info.value.problems)


def test_a_stack_without_servers_builds_as_the_stack_checks_build_it():
    values = dict(PROD)
    assert build_with_servers(values.get, "test") == build_stack_config(values.get, "test")


def test_setting_both_keys_is_refused_saying_which_to_keep():
    values = {**PROD, "servers": {"github": {"imageDigest": DIGEST}}, "wafToolLimits": {"github/search": 30}}
    with pytest.raises(ConfigError) as info:
        build_with_servers(values.get, "test")
    both = one(info.value.problems, "mcp-edge:servers and mcp-edge:server are both set")
    assert "keep mcp-edge:server for one server" in both and "remove mcp-edge:server" in both
    one(info.value.problems, "mcp-edge:mcpPath applies to mcp-edge:server only")


# --- names --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(RESERVED_NAMES))
def test_reserved_names_are_refused_naming_the_key(name: str):
    assert "oauth" in RESERVED_NAMES and ".well-known" in RESERVED_NAMES
    found = one(problems({name: {"imageDigest": DIGEST}}), f"mcp-edge:servers.{name} is a reserved name")
    assert f"/{name}/" in found


def test_a_reserved_name_in_another_spelling_is_refused_too():
    one(problems({"OAuth": {"imageDigest": DIGEST}}), "mcp-edge:servers.OAuth is a reserved name")


def test_names_that_normalize_alike_are_one_server_written_twice():
    found = problems({"github": {"imageDigest": DIGEST}, "GitHub": {"imageDigest": DIGEST},
                      " github": {"imageDigest": DIGEST}, "data_api": {"imageDigest": DIGEST},
                      "data-api": {"imageDigest": DIGEST}})
    assert "3 times ('github', 'GitHub', ' github')" in one(found, "names one server 3 times")
    one(found, "names one server 2 times", "'data_api', 'data-api'")


def test_a_name_that_is_not_a_string_is_refused():
    one(problems({7: {"imageDigest": DIGEST}}), "mcp-edge:servers has the name 7")


@given(st.text(max_size=40).filter(lambda n: not NAME_PATTERN.fullmatch(n)))
def test_any_invalid_name_is_refused_naming_the_key(name: str):
    hosted, found = check({name: {"imageDigest": DIGEST}})
    assert not hosted
    assert found and all(p.startswith("mcp-edge:servers") for p in found)
    assert any(repr(name) in p or f"mcp-edge:servers.{name} " in p for p in found)


def test_the_server_map_is_bounded():
    found = problems({f"s{i}": {"imageDigest": DIGEST} for i in range(MAX_SERVERS + 1)})
    one(found, f"has {MAX_SERVERS + 1} servers: at most {MAX_SERVERS}")


@pytest.mark.parametrize("raw, expected", [
    ({}, "mcp-edge:servers is empty"),
    ({"github": "ghcr.io/x"}, "mcp-edge:servers.github = 'ghcr.io/x': must be a server"),
])
def test_an_empty_map_or_an_entry_that_is_not_a_server_is_refused(raw: Any, expected: str):
    one(problems(raw), expected)


# --- an entry -----------------------------------------------------------------------------------


def test_the_server_checks_problems_name_the_entry_key():
    found = problems({"docs": {"source": "examples/demo", "image": "examples/demo", "pathh": "/x",
                               "imageDigest": "latest"},
                      "data": {"imageDigest": DIGEST, "runtime": "python3.13", "path": "mcp/"}})
    assert all("mcp-edge:server." not in p and "mcp-edge:server " not in p for p in found), found
    one(found, "mcp-edge:servers.docs.pathh is not a key of servers.docs", "did you mean path?",
        "the entry's own: regions")
    one(found, "mcp-edge:servers.docs must give exactly one of source")
    one(found, "mcp-edge:servers.data.runtime is for a folder server (servers.data.source), not servers.data.imageDigest")
    one(found, "mcp-edge:servers.data.path = 'mcp/'")


def test_a_folder_servers_missing_keys_are_named_at_the_entry():
    found = problems({"demo": {"source": "examples/demo"}})
    one(found, "mcp-edge:servers.demo.runtime is required with servers.demo.source")
    one(found, "mcp-edge:servers.demo.command is required with servers.demo.source")


@pytest.mark.parametrize("regions, expected", [
    (["us-east-1", "eu-west-9"], "mcp-edge:servers.github.regions[1] = 'eu-west-9': not one of mcp-edge:regions"),
    (["eu-west-1", "eu-west-1"], "mcp-edge:servers.github.regions[1] = 'eu-west-1': lists the region twice"),
    (["us-west-2"], "mcp-edge:servers.github.regions[0] = 'us-west-2': not one of mcp-edge:regions"),
    ([], "mcp-edge:servers.github.regions = []: must be a non-empty list"),
    ([3], "mcp-edge:servers.github.regions[0] = 3"),
])
def test_a_region_that_is_not_a_stack_region_is_refused_naming_its_index(regions: Any, expected: str):
    one(problems({"github": {"imageDigest": DIGEST, "regions": regions}}), expected)


def test_a_misspelled_region_gets_the_stack_region_it_likely_means():
    assert "did you mean eu-west-1" in one(problems({"g": {"imageDigest": DIGEST, "regions": ["eu-wset-1"]}}),
                                           "regions[0]")


def test_regions_default_to_the_stacks_and_keep_the_entrys_order():
    hosted, found = check({"a": {"imageDigest": DIGEST}, "b": {"imageDigest": DIGEST,
                                                               "regions": ["eu-west-1", "us-east-1"]}})
    assert not found
    assert [s.regions for s in hosted] == [REGIONS, ("eu-west-1", "us-east-1")]
    assert [s.public_path for s in hosted] == ["/a/mcp", "/b/mcp"]
    assert hosted[1].metadata_path == "/.well-known/oauth-protected-resource/b/mcp"


@pytest.mark.parametrize("tool, why", [("/admin", "looks like a path"), ("github/search", "looks like a path"),
                                       ("..", "looks like a path"), (".", "looks like a path"),
                                       ("a\\b", "a tool name is 1-128 characters")])
def test_a_tool_scope_whose_tool_name_looks_like_a_path_is_refused(tool: str, why: str):
    found = problems({"github": {"imageDigest": DIGEST, "toolScopes": {tool: ["repo"], "search": ["repo"]}}})
    assert why in one(found, f"mcp-edge:servers.github.toolScopes names the tool {tool!r}")


def test_a_tool_name_with_dots_that_is_no_path_is_kept():
    hosted, found = check({"github": {"imageDigest": DIGEST, "toolScopes": {"repo.search": ["repo"]}}})
    assert not found and dict(hosted[0].config.tool_scopes) == {"repo.search": ("repo",)}


@pytest.mark.parametrize("entry, expected", [
    ({"memoryMb": 64}, "mcp-edge:servers.s.memoryMb = 64: must be between 128 and 10240"),
    ({"memoryMb": "lots"}, "mcp-edge:servers.s.memoryMb = 'lots': must be an integer"),
    ({"reservedConcurrency": 0}, "mcp-edge:servers.s.reservedConcurrency = 0: must be between 1 and 10000"),
    ({"provisionedMin": 30}, "mcp-edge:servers.s.provisionedMin = 30 exceeds mcp-edge:originProvisionedMax = 20"),
    ({"provisionedMin": 5, "provisionedMax": 3},
     "mcp-edge:servers.s.provisionedMin = 5 exceeds mcp-edge:servers.s.provisionedMax = 3"),
    ({"reservedConcurrency": 10}, "mcp-edge:originProvisionedMax = 20 exceeds mcp-edge:servers.s.reservedConcurrency = 10"),
    ({"provisionedMax": 300}, "mcp-edge:servers.s.provisionedMax = 300 exceeds mcp-edge:originReservedConcurrency = 200"),
    ({"coldStart": "warm"}, "mcp-edge:servers.s.coldStart = 'warm': must be one of provisioned, snapstart, none"),
    ({"coldStart": "none", "provisionedMax": 5}, "mcp-edge:servers.s.provisionedMax cannot be combined with coldStart 'none'"),
    ({"coldStart": "snapstart"}, "mcp-edge:servers.s.coldStart = 'snapstart' needs mcp-edge:lwaLayerVersion 30"),
])
def test_sizing_overrides_are_held_to_their_stack_keys_bounds(entry: dict[str, Any], expected: str):
    one(problems({"s": {"imageDigest": DIGEST, **entry}}), expected)


def test_sizing_overrides_apply_over_the_stacks_sizing():
    hosted, found = check({"s": {"imageDigest": DIGEST, "memoryMb": 512, "provisionedMax": 4}})
    assert not found
    config = load_from_stack_file("prod")
    sized = hosted[0].sizing.applied_to(config.origin_for("us-east-1"))
    assert (sized.memory_mb, sized.provisioned_min, sized.provisioned_max) == (512, 4, 4)
    assert sized.timeout_s == config.origin_for("us-east-1").timeout_s


def test_snapstart_for_a_runtime_without_it_is_refused_at_the_entry():
    found = problems({"js": {"source": "examples/typescript", "runtime": "nodejs22.x", "command": "node app.mjs",
                             "coldStart": "snapstart"}}, lwaLayerVersion=30, originProvisionedMin=None,
                     originProvisionedMax=None, originOverrides=None, originUtilizationTarget=None,
                     originScaleInCooldownSeconds=None, originScaleOutCooldownSeconds=None)
    (snapstart,) = [p for p in found if "snapstart" in p]
    assert snapstart.startswith("mcp-edge:servers.js.coldStart = 'snapstart' cannot be combined with "
                                "mcp-edge:servers.js.runtime = 'nodejs22.x'"), found


def test_the_stacks_snapstart_with_a_servers_runtime_without_it_names_the_stack_key():
    found = problems({"js": {"source": "examples/typescript", "runtime": "nodejs22.x", "command": "node app.mjs"}},
                     originColdStart="snapstart", lwaLayerVersion=30, originProvisionedMin=None,
                     originProvisionedMax=None, originOverrides=None, originUtilizationTarget=None,
                     originScaleInCooldownSeconds=None, originScaleOutCooldownSeconds=None)
    one(found, "mcp-edge:originColdStart = 'snapstart' cannot be combined with mcp-edge:servers.js.runtime")
    # ... and an entry that runs without it is not blamed for the stack's mode.
    assert not problems({"js": {"source": "examples/typescript", "runtime": "nodejs22.x", "command": "node app.mjs",
                                "coldStart": "none"}}, originColdStart="snapstart", lwaLayerVersion=30,
                        originProvisionedMin=None, originProvisionedMax=None, originOverrides=None,
                        originUtilizationTarget=None, originScaleInCooldownSeconds=None,
                        originScaleOutCooldownSeconds=None)


# --- round trip -----------------------------------------------------------------------------------

NAMES = st.from_regex(NAME_PATTERN, fullmatch=True).filter(lambda n: n not in RESERVED_NAMES)
TOOLS = st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,20}", fullmatch=True)
SCOPES = st.lists(st.from_regex(r"[a-z][a-z:._-]{0,12}", fullmatch=True), min_size=1, max_size=3, unique=True)
ENTRIES = st.fixed_dictionaries(
    {"imageDigest": st.from_regex(r"sha256:[0-9a-f]{64}", fullmatch=True),
     "regions": st.lists(st.sampled_from(REGIONS), min_size=1, unique=True)},
    optional={"path": st.sampled_from(["/mcp", "/v1/mcp", "/api"]),
              "audience": st.from_regex(r"[\x21-\x7e]{1,40}", fullmatch=True),
              "toolScopes": st.dictionaries(TOOLS, SCOPES, min_size=1, max_size=3),
              "memoryMb": st.integers(128, 10240),
              "provisionedMin": st.integers(0, 20),
              "coldStart": st.sampled_from(["provisioned", "none"])})


def _valid(entry: dict[str, Any]) -> dict[str, Any]:
    if entry.get("coldStart") == "none":
        entry.pop("provisionedMin", None)
    if entry.get("path") == "/mcp":
        entry.pop("path")  # the default: it reads back as unset
    return entry


@given(st.dictionaries(NAMES, ENTRIES.map(_valid), min_size=1, max_size=6)
       .filter(lambda m: len({normalized_name(n) for n in m}) == len(m)))
def test_any_valid_map_reads_back_as_written(servers: dict[str, dict[str, Any]]):
    hosted, found = check(servers)
    assert not found, found
    assert {s.name: entry_of(s) for s in hosted} == servers
    assert [s.public_path for s in hosted] == [f"/{name}/mcp" for name in servers]


def test_two_servers_whose_resource_name_tags_collide_are_refused_naming_both():
    seen: dict[str, str] = {}
    for i in range(200_000):
        name = f"s{i}"
        tag = server_tag("test", name)
        if tag in seen:
            break
        seen[tag] = name
    first, second = seen[tag], name
    values, get = typed(servers={first: {"imageDigest": DIGEST}, second: {"imageDigest": DIGEST}})
    found: list[str] = []
    v = _problems_for_types(get, found)
    _, found = servers_problems(get, v, REGIONS, "test")
    one(found, f"mcp-edge:servers.{first} and mcp-edge:servers.{second} get the same resource name tag")
    assert servers_problems(get, v, REGIONS, "other")[1] == []


# --- per-server tool limits and audiences ------------------------------------------------------


def build_problems(**changes: Any) -> list[str]:
    values = {**BASE, **changes}
    with pytest.raises(ConfigError) as info:
        build_with_servers(values.get, "test")
    return info.value.problems


TWO = {"github": {"imageDigest": DIGEST}, "docs": {"imageDigest": DIGEST}}


def test_two_servers_may_both_limit_a_tool_named_search():
    hosted, _ = check(TWO)
    hosted, limits, found = tool_limit_problems({"github/search": 30, "docs/search": "60"}, hosted)
    assert not found
    assert [dict(s.tool_limits) for s in hosted] == [{"search": 30}, {"search": 60}]
    assert [(t.key, t.path, t.tool, t.limit) for t in limits] == [
        ("mcp-edge:wafToolLimits.github/search", "/github/mcp", "search", 30),
        ("mcp-edge:wafToolLimits.docs/search", "/docs/mcp", "search", 60)]
    assert build_problems(servers=TWO, wafToolLimits={"github/search": 30, "docs/search": 60}) == [NOT_DEPLOYABLE_YET]


@pytest.mark.parametrize("limits, expected", [
    ({"countdown": 30}, "mcp-edge:wafToolLimits.countdown: with mcp-edge:servers a limit is named <server>/<tool>"),
    ({"gihtub/search": 30}, "names the server 'gihtub', which is not in mcp-edge:servers (github, docs); did you mean github"),
    ({"github/a b": 30}, "mcp-edge:wafToolLimits.github/a b names the tool 'a b'"),
    ({"github/x/y": 30}, "names the tool 'x/y'"),
    ({"github/search": 5}, "mcp-edge:wafToolLimits.github/search = 5: must be an integer from 10"),
    ({"github/search": True}, "mcp-edge:wafToolLimits.github/search = True: must be an integer"),
])
def test_a_bad_per_server_tool_limit_is_refused_naming_its_key(limits: dict[str, Any], expected: str):
    one(build_problems(servers=TWO, wafToolLimits=limits), expected)


def test_more_per_tool_limits_than_the_web_acl_holds_are_refused_with_the_figures():
    limits = {f"{server}/tool{i}": 30 for i in range(5) for server in TWO}
    found = build_problems(servers=TWO, wafToolLimits=limits)
    problem = one(found, "mcp-edge:wafToolLimits: 10 per-tool limits")
    stack_wide = len(capacity_for(load_from_stack_file("prod").firewall, []).stack_wide_rate_rules)  # type: ignore[arg-type]
    assert f"make {10 + stack_wide} rate-based rules: WAF allows 10 per web ACL" in problem
    assert NOT_DEPLOYABLE_YET not in found


def test_without_the_web_acl_no_capacity_is_asked_for():
    limits = {f"{server}/tool{i}": 30 for i in range(5) for server in TWO}
    assert build_problems(servers=TWO, wafToolLimits=limits, wafEnabled=False) == [NOT_DEPLOYABLE_YET]


def test_a_server_may_name_the_audience_its_tokens_carry():
    hosted, found = check({"github": {"imageDigest": DIGEST, "audience": "api://github"}, "docs": {"imageDigest": DIGEST}})
    assert not found
    assert hosted[0].audience_at("https://mcp.acme.example") == "api://github"
    assert hosted[1].audience_at("https://mcp.acme.example/") == "https://mcp.acme.example/docs/mcp"
    assert hosted[1].resource("https://mcp.acme.example") == "https://mcp.acme.example/docs/mcp"


@pytest.mark.parametrize("audience", ["", "a b", 7, "x" * 1025])
def test_a_bad_audience_is_refused_naming_the_key(audience: Any):
    one(problems({"github": {"imageDigest": DIGEST, "audience": audience}}), "mcp-edge:servers.github.audience = ")


BAD_VALUES = {
    "source": st.sampled_from(["", "examples/demo", "/abs", "../x", 3, "examples/typescript"]),
    "runtime": st.sampled_from(["python3.13", "cobol", "nodejs22.x", "java21"]),
    "command": st.sampled_from(["python3 x.py", "", "a\nb", "node app.mjs"]),
    "install": st.sampled_from(["pip install .", "", 5]),
    "readinessPath": st.sampled_from(["/ready", "ready", "/.well-known/x"]),
    "image": st.sampled_from(["examples/demo", "nope", "/abs"]),
    "imageDigest": st.sampled_from(["latest", DIGEST]),
    "path": st.sampled_from(["/mcp", "mcp/", "/a/../b", "/.well-known/x", "//x"]),
    "toolScopes": st.sampled_from([{"a": []}, "x", {"/p": ["s"]}, {"ok": ["bad scope"]}, {"ok": "s"}]),
    "pathh": st.just("/x"),
}


@given(st.fixed_dictionaries({}, optional=BAD_VALUES))
def test_every_problem_of_an_entry_is_named_at_the_entry_never_at_mcp_edge_server(entry: dict[str, Any]):
    for problem in problems({"x": entry}):
        assert problem.startswith(("mcp-edge:servers.x", "mcp-edge:originColdStart")), problem
        assert "mcp-edge:server." not in problem and "mcp-edge:server " not in problem, problem
        assert not re.search(r"(?<![\w.:])server\.[a-zA-Z]", problem), problem


def test_the_design_documents_stack_file_is_refused_only_as_not_deployable_yet():
    text = (PROJECT_ROOT / "docs" / "design" / "many-servers.md").read_text()
    block = text.split("## The stack file\n\n```yaml\n", 1)[1].split("```", 1)[0]
    config = yaml.safe_load(block)["config"]
    # prod's keys but its per-region overrides (regions the document's stack does not have)
    values = {**BASE, "originOverrides": None, **{k.removeprefix("mcp-edge:"): v for k, v in config.items()}}
    with pytest.raises(ConfigError) as info:
        build_with_servers(values.get, "test")
    assert info.value.problems == [NOT_DEPLOYABLE_YET]


@pytest.mark.parametrize("domain, expected", [
    (("d" * 60 + ".") * 3 + "example", "is not reverse DNS, '/', and a name within 200 characters"),
    ("tools.mcp.io", "a _meta prefix MCP reserves"),
])
def test_a_custom_domain_that_cannot_carry_the_server_cards_is_refused_naming_it(domain: str, expected: str):
    found = build_problems(servers={"n" * 30: {"imageDigest": DIGEST}}, customDomain=domain)
    assert f"mcp-edge:customDomain = {domain!r}: " in one(found, expected)
    assert NOT_DEPLOYABLE_YET not in found
