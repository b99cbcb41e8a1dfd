"""The status page's web ACL section: every rule of the plan's web ACL with the blocks the
edge logged for it, recent ones counted over the last 15 minutes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from devkit.mock_program import ProgramRun
from local.cloudfront.web_acl import BlockLog
from local.firewall_status import web_acl_blocks, web_acl_section
from local.plan import LocalPlan, Options, build_plan


@pytest.fixture(scope="module")
def plan(prod: ProgramRun, tmp_path_factory: pytest.TempPathFactory) -> LocalPlan:
    return build_plan(Options(edge_port=9000, base_port=9001, run_dir=tmp_path_factory.mktemp("run")), run=prod)


def test_every_rule_is_listed_in_priority_order_with_its_recent_and_total_blocks(plan: LocalPlan) -> None:
    now = [1_000_000.0]
    log = BlockLog(Path(plan.edge.web_acl_block_log or ""), clock=lambda: now[0])
    log.record("token-limit")
    now[0] += 20 * 60  # past the recent window
    log.record("token-limit")
    log.record("aws-common-rule-set:SizeRestrictions_QUERYSTRING")
    rows = {r["rule"]: r for r in web_acl_blocks(plan, now=now[0]) or []}
    assert list(rows)[:2] == ["aws-ip-reputation", "tool-limit-1-countdown"]
    assert (rows["token-limit"]["recent"], rows["token-limit"]["total"]) == (1, 2)
    assert (rows["aws-common-rule-set"]["recent"], rows["aws-common-rule-set"]["total"]) == (1, 1)
    assert rows["anonymous-ip-limit"] == {"rule": "anonymous-ip-limit", "total": 0, "recent": 0,
                                          "lastBlockedAt": None}
    section = web_acl_section(plan, now=now[0])
    assert "<code>token-limit</code></td><td class='bad'>1</td><td>2</td>" in section


def test_a_stack_without_a_web_acl_has_no_section(plan: LocalPlan) -> None:
    bare = dataclasses.replace(plan, edge=dataclasses.replace(plan.edge, web_acl=None))
    assert web_acl_blocks(bare) is None and web_acl_section(bare) == ""
