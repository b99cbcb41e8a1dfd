"""AlertTopic: one encrypted topic per origin or probe region, in that region, with
the optional e-mail subscription."""

from __future__ import annotations

from tests.harness import ProgramRun, run_program


def test_every_origin_and_probe_region_has_an_encrypted_topic_in_that_region(prod: ProgramRun):
    topics = prod.of_type("aws:sns/topic:Topic")
    alert_topics = [t for t in topics if "alerts" in t.name]
    assert sorted(t.region for t in alert_topics) == sorted(prod.outputs["regions"])
    for topic in alert_topics:
        assert topic["kmsMasterKeyId"] == "alias/aws/sns"
        assert topic["name"] == f"acme-mcp-alerts-{topic.region}"
        parent = prod.parent_of(topic)
        assert parent is not None and parent.type == "mcpedge:alerts:AlertTopic"


def test_email_subscription_follows_alert_email(prod: ProgramRun):
    subs = prod.of_type("aws:sns/topicSubscription:TopicSubscription")
    email_subs = [s for s in subs if s["protocol"] == "email"]
    assert sorted(s.region for s in email_subs) == sorted(prod.outputs["regions"])
    assert {s["endpoint"] for s in email_subs} == {"oncall@acme.example"}
    topic_arns = set(prod.outputs["alertTopicArns"].values())
    assert {s["topic"] for s in email_subs} == topic_arns


def test_no_subscription_without_alert_email():
    run = run_program("prod", config_overrides={"alertEmail": None})
    assert not [s for s in run.of_type("aws:sns/topicSubscription:TopicSubscription") if s["protocol"] == "email"]


def test_probe_only_regions_get_a_topic_too():
    run = run_program("prod", config_overrides={"regions": ["eu-west-1"], "originOverrides": [], "defaultRegion": "",
                                                "probeRegions": ["eu-west-1", "sa-east-1"]})
    assert set(run.outputs["alertTopicArns"]) == {"eu-west-1", "sa-east-1"}
