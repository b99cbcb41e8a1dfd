"""AlertTopic: one encrypted topic per origin or probe region, in that region, with
the optional e-mail subscription; CloudWatch alarms and the stack's publishers can
use the topic's key."""

from __future__ import annotations

import json

from tests.harness import ACCOUNT_ID, ProgramRun, run_program


def test_every_origin_and_probe_region_has_an_encrypted_topic_in_that_region(prod: ProgramRun):
    topics = prod.of_type("aws:sns/topic:Topic")
    alert_topics = [t for t in topics if "alerts" in t.name]
    assert sorted(t.region for t in alert_topics) == sorted(prod.outputs["regions"])
    for topic in alert_topics:
        parent = prod.parent_of(topic)
        assert parent is not None and parent.type == "mcpedge:index:AlertTopic"
        key = prod.children_of(parent, "aws:kms/key:Key")[0]
        assert key.region == topic.region and key["enableKeyRotation"] is True
        assert topic["kmsMasterKeyId"] == key.outputs["arn"]
        assert topic["name"] == f"acme-mcp-prod-alerts-{topic.region}"


def test_cloudwatch_alarms_can_publish_to_the_encrypted_topic(prod: ProgramRun):
    """The AWS-managed alias/aws/sns key would silently drop alarm notifications."""
    for key in prod.of_type("aws:kms/key:Key"):
        statements = json.loads(key["policy"])["Statement"]
        cloudwatch = [s for s in statements if s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}]
        assert cloudwatch and set(cloudwatch[0]["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}
        assert cloudwatch[0]["Condition"] == {"StringEquals": {"aws:SourceAccount": ACCOUNT_ID}}
        assert any(s["Principal"] == {"AWS": f"arn:aws:iam::{ACCOUNT_ID}:root"} for s in statements)


def test_every_alarm_targets_a_topic_in_its_own_region(prod: ProgramRun):
    topics = prod.outputs["alertTopicArns"]
    alarms = prod.of_type("aws:cloudwatch/metricAlarm:MetricAlarm")
    assert alarms
    for alarm in alarms:
        assert alarm["alarmActions"] == [topics[alarm.region]], alarm.name


def test_the_results_consumer_may_use_its_regions_topic_key(prod: ProgramRun):
    keys = {k.region: k.outputs["arn"] for k in prod.of_type("aws:kms/key:Key")}
    for region in prod.outputs["regions"]:
        # IAM is global: the fleet's region is in the policy's name.
        policy = prod.named(f"acme-mcp-probes-{region}-consumer-policy")
        statements = json.loads(policy["policy"])["Statement"]
        kms = [s for s in statements if "kms:GenerateDataKey*" in s["Action"]]
        assert kms and kms[0]["Resource"] == [keys[region]]


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
