"""Resource names for N servers: the one-server stack's names are exactly today's (read from the
committed plan), and every name of every server in every region is unique per stack and per
server and within AWS's limits, the longest stack x server x region included."""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from itertools import product

from hypothesis import given
from hypothesis import strategies as st

from components.server_names import (
    COMPONENT_NAME_LIMIT,
    IAM_ROLE,
    ServerNames,
    fitted,
    server_names,
    server_tag,
    tag_collisions,
)
from edge.regions import AWS_REGIONS
from functions.contract import REGION_HEALTH_KEY
from functions.results.health import MAX_ITEM_BYTES, HealthDoc, parse_doc
from stack_config.loading import PROJECT_ROOT, load_from_stack_file
from stack_config.servers import NAME_PATTERN

PLAN = PROJECT_ROOT / "plans" / "prod.txt"
LONGEST_SERVER_ID = "s" * 31  # settings.SERVER_ID: at most 31 characters
LONGEST_SERVER = "n" * 30  # stack_config.servers.NAME_PATTERN: at most 30
LONGEST_REGIONS = sorted(r for r in AWS_REGIONS if len(r) == max(map(len, AWS_REGIONS)))
LONGEST_STACK = "S" * 100  # what Pulumi accepts (and a digest-taking one: not plain lower case)
RESOURCE = re.compile(r"^  (aws:[\w/:]+) (\S+)$")
FIELD = re.compile(r"^      (\w+): (.*)$")


def plan_resources() -> dict[str, list[tuple[str, str, dict[str, str]]]]:
    """The committed plan's resources by component: (type, logical name, fields)."""
    out: dict[str, list[tuple[str, str, dict[str, str]]]] = defaultdict(list)
    component = ""
    for line in PLAN.read_text().splitlines():
        if line.startswith("### "):
            component = line.removeprefix("### ")
        elif m := RESOURCE.match(line):
            out[component].append((m.group(1), m.group(2), {}))
        elif (m := FIELD.match(line)) and component and out[component]:
            out[component][-1][2][m.group(1)] = m.group(2)
    return out


def named(resources: list[tuple[str, str, dict[str, str]]], typ: str) -> list[tuple[str, dict[str, str]]]:
    return [(logical, fields) for t, logical, fields in resources if t == typ]


def test_the_one_server_stacks_names_are_todays_in_the_committed_plan():
    config = load_from_stack_file("prod")
    resources = plan_resources()
    for region in config.regions:
        names = server_names(config.server_id, config.stack, None, region, mcp_path=config.mcp_path)
        mine = resources[f"mcpedge:index:McpOrigin {names.component}"]
        assert mine, f"no component {names.component} in {PLAN}"
        assert [logical for logical, _ in named(mine, "aws:iam/role:Role")] == [names.role]
        (function,) = named(mine, "aws:lambda/function:Function")
        assert function[1]["name"] == names.function
        (log_group,) = named(mine, "aws:cloudwatch/logGroup:LogGroup")
        assert log_group[1]["name"] == names.log_group
        assert sorted(f["name"] for _, f in named(mine, "aws:cloudwatch/metricAlarm:MetricAlarm")) == sorted(names.alarms)
        assert names.public_path == "/mcp" and names.metadata_path == "/.well-known/oauth-protected-resource/mcp"
    (edge,) = [r for c, r in resources.items() if c.startswith("mcpedge:index:EdgeLayer ")]
    (health,) = named(edge, "aws:cloudfront/keyvaluestoreKey:KeyvaluestoreKey")
    assert health[1]["key"] == server_names(config.server_id, "prod", None, "us-east-1").health_key


def within_limits(names: ServerNames) -> None:
    for what, (length, limit) in names.lengths().items():
        assert length <= limit, (what, length, limit, names)
    assert len(names.component) <= COMPONENT_NAME_LIMIT
    assert len(names.role) + 8 <= IAM_ROLE


def all_names(names: ServerNames) -> set[tuple[str, str]]:
    """The names AWS requires unique (per region: the region is in each), by kind."""
    return {("function", names.function), ("log_group", names.log_group), ("component", names.component),
            ("role", names.role), *(("alarm", a) for a in names.alarms)}


def test_the_longest_stack_server_and_region_fit_every_limit():
    for region in LONGEST_REGIONS:
        names = server_names(LONGEST_SERVER_ID, LONGEST_STACK, LONGEST_SERVER, region)
        within_limits(names)
        assert names.function.startswith(LONGEST_SERVER_ID + "-") and names.function.endswith(f"-origin-{region}")
        assert server_tag(LONGEST_STACK, LONGEST_SERVER) in names.function
        assert names.public_path == f"/{LONGEST_SERVER}/mcp"


def test_the_longest_names_stay_distinct_across_servers_stacks_and_regions():
    # Servers and stacks that differ only past the point where their names are cut.
    servers = [LONGEST_SERVER, LONGEST_SERVER[:-1] + "m", "n" * 29]
    stacks = [LONGEST_STACK, LONGEST_STACK[:-1] + "T", "prod"]
    seen: dict[tuple[str, str], tuple[str, str, str]] = {}
    for stack, server, region in product(stacks, servers, LONGEST_REGIONS[:2]):
        names = server_names(LONGEST_SERVER_ID, stack, server, region)
        within_limits(names)
        for name in all_names(names) - {("component", names.component), ("role", names.role)}:
            assert name not in seen, (name, seen.get(name), (stack, server, region))
            seen[name] = (stack, server, region)


def test_a_server_of_one_stack_and_a_one_server_stack_named_after_it_do_not_share_names():
    # The migration case: stack prod-github (one server) beside stack prod with a server github.
    alone = server_names("acme-mcp", "prod-github", None, "eu-west-1")
    hosted = server_names("acme-mcp", "prod", "github", "eu-west-1")
    assert alone.function == "acme-mcp-prod-github-origin-eu-west-1"
    assert hosted.function == f"acme-mcp-prod-github-{server_tag('prod', 'github')}-origin-eu-west-1"
    assert not all_names(alone) & all_names(hosted) - {("component", hosted.component), ("role", hosted.role)}


def test_names_read_server_id_stack_server_and_purpose_when_they_fit():
    names = server_names("acme-mcp", "prod", "github", "eu-west-1")
    assert names.component == "acme-mcp-github-origin-eu-west-1"
    assert names.role == "acme-mcp-github-origin-eu-west-1-role"
    assert names.log_group == f"/aws/lambda/{names.function}"
    assert names.health_key == "region-health/github"
    assert names.metadata_path == "/.well-known/oauth-protected-resource/github/mcp"


SERVER_IDS = st.from_regex(r"[a-z0-9][a-z0-9-]{0,30}", fullmatch=True)
STACKS = st.from_regex(r"[A-Za-z0-9_.-]{1,100}", fullmatch=True)
SERVERS = st.from_regex(NAME_PATTERN, fullmatch=True)


@given(SERVER_IDS, STACKS, st.lists(SERVERS, min_size=1, max_size=8, unique=True), st.sampled_from(sorted(AWS_REGIONS)))
def test_every_stacks_servers_names_fit_and_are_distinct_within_the_stack(server_id, stack, servers, region):
    if tag_collisions(stack, servers):
        return  # refused before any name is used
    seen: set[tuple[str, str]] = set()
    for server in servers:
        names = server_names(server_id, stack, server, region)
        within_limits(names)
        mine = all_names(names)
        assert not seen & mine
        seen |= mine
        within_limits(server_names(server_id, stack, None, region))


def test_the_one_server_names_fit_the_longest_server_id_and_region_too():
    # The program's own "<serverId>-origin-<region>" gives a role name of 66 characters here.
    for region in LONGEST_REGIONS:
        names = server_names(LONGEST_SERVER_ID, LONGEST_STACK, None, region)
        within_limits(names)
        assert len(f"{LONGEST_SERVER_ID}-origin-{region}-role") + 8 > IAM_ROLE
        assert names.component.startswith(f"{LONGEST_SERVER_ID}-origin-")


def test_a_cut_name_keeps_a_digest_of_the_whole():
    assert fitted("short", 10) == "short"
    a, b = fitted("x" * 60 + "a", 51), fitted("x" * 60 + "b", 51)
    assert len(a) == len(b) == 51 and a != b


def test_tag_collisions_name_both_servers():
    # A collision of the 6-character tag within one stack, found by brute force (one in 2^24 per pair).
    found: dict[str, str] = {}
    pair = None
    for i in range(200_000):
        tag = server_tag("prod", f"s{i}")
        if tag in found:
            pair = (found[tag], f"s{i}")
            break
        found[tag] = f"s{i}"
    assert pair is not None
    assert tag_collisions("prod", ["a", *pair]) == [pair]
    assert tag_collisions("prod", ["a", pair[0]]) == []


def test_every_servers_health_document_fits_the_key_value_store_with_ten_regions_avoided():
    # KeyValueStore counts key and value against 1 KB; the document the consumers publish,
    # for the longest name and the ten longest region codes all avoided, at the widest time.
    regions = sorted(AWS_REGIONS, key=lambda r: (-len(r), r))[:10]
    value = HealthDoc(frozenset(regions), 0).encode(dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=dt.UTC))
    assert parse_doc(value).avoid == frozenset(regions)
    keys = {server_names("acme-mcp", "prod", f"{LONGEST_SERVER[:-2]}{i:02d}", "us-east-1").health_key
            for i in range(50)}
    assert len(keys) == 50
    for key in keys:
        assert len(key.encode()) + len(value.encode()) <= MAX_ITEM_BYTES
    assert server_names("acme-mcp", "prod", None, "us-east-1").health_key == REGION_HEALTH_KEY
