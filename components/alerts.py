"""AlertTopic: the SNS topic that alarms and probe alerts go to, one per region.

CloudWatch alarm actions must name an SNS topic in the alarm's own region, so each
region that has an origin or a probe fleet gets its own topic (with the optional
e-mail subscription), instead of one global topic.

The topic is encrypted with a customer-managed KMS key of its own: CloudWatch can
only publish alarm notifications to an encrypted topic whose key policy lets
``cloudwatch.amazonaws.com`` use the key, and the AWS-managed ``alias/aws/sns``
key's policy cannot be changed (alarms would fail silently). Publishers inside the
stack (the results consumer) get ``kms:GenerateDataKey*``/``kms:Decrypt`` on
``key_arn`` through their own role.
"""

import json
import re
from collections.abc import Mapping
from typing import NotRequired, TypedDict

import pulumi
import pulumi_aws as aws

from components import naming
from components.naming import physical_name
from components.type_tokens import component_options, component_type
from components.validation import ArgChecks

_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


class AlertTopicArgs(TypedDict):
    """Inputs of one region's alert topic."""

    region: str
    """AWS region of the topic (alarm actions must name a topic in the alarm's region)."""
    server_id: str
    """Name of the MCP server: names the topic and its key alias."""
    email: NotRequired[str | None]
    """E-mail address subscribed to the topic, if any."""


def check_alert_topic_args(name: str, args: AlertTopicArgs) -> None:
    checks = ArgChecks("AlertTopic", name)
    if checks.required(args, "region", "server_id"):
        checks.region("region", args["region"])
        checks.name_prefix("server_id", args["server_id"])
        email = args.get("email")
        if email and not _EMAIL.fullmatch(email):
            checks.problem("email", email, "must be an e-mail address")
    checks.done()


def alert_key_policy(account_id: str) -> str:
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [
            {
                # Keeps the key manageable by the account's IAM policies.
                "Sid": "AccountAdministers",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{account_id}:root"},
                "Action": "kms:*",
                "Resource": "*",
            },
            {
                "Sid": "CloudWatchAlarmsPublish",
                "Effect": "Allow",
                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
                "Resource": "*",
                "Condition": {"StringEquals": {"aws:SourceAccount": account_id}},
            },
        ],
    })


class AlertTopic(pulumi.ComponentResource):
    """One region's SNS topic for alarms and probe alerts, encrypted with its own KMS key that
    CloudWatch may use, with an optional e-mail subscription."""

    arn: pulumi.Output[str]
    """ARN of the topic."""
    key_arn: pulumi.Output[str]
    """ARN of the KMS key the topic is encrypted with (publishers need kms:GenerateDataKey* on it)."""
    region: pulumi.Output[str]
    """AWS region of the topic."""

    def __init__(self, name: str, args: AlertTopicArgs, opts: pulumi.ResourceOptions | None = None):
        check_alert_topic_args(name, args)  # before anything is registered
        super().__init__(component_type("AlertTopic"), name, None, component_options(opts, "mcpedge:alerts:AlertTopic"))
        region, server_id, email = args["region"], args["server_id"], args.get("email")
        child = pulumi.ResourceOptions(parent=self)
        account_id = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self)).account_id
        key = aws.kms.Key(
            f"{name}-key",
            region=region,
            description=f"Encrypts the {server_id} alert topic in {region}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            policy=account_id.apply(alert_key_policy),
            opts=child,
        )
        aws.kms.Alias(
            f"{name}-key-alias",
            region=region,
            name=physical_name(server_id, "alerts", limit=naming.KMS_ALIAS, prefix="alias/"),
            target_key_id=key.key_id,
            opts=child,
        )
        topic = aws.sns.Topic(
            f"{name}-topic",
            region=region,
            name=physical_name(server_id, f"alerts-{region}", limit=naming.SNS_TOPIC),
            kms_master_key_id=key.arn,
            opts=child,
        )
        if email:
            aws.sns.TopicSubscription(
                f"{name}-email",
                region=region,
                topic=topic.arn,
                protocol="email",
                endpoint=email,
                opts=child,
            )
        self.region = pulumi.Output.from_input(region)
        self.arn = topic.arn
        self.key_arn = key.arn
        self.register_outputs({"arn": topic.arn, "key_arn": key.arn})


def topic_alarm(
    resource_name: str,
    *,
    region: str,
    alarm_name: str,
    description: str,
    namespace: str,
    metric: str,
    statistic: str,
    dimensions: Mapping[str, pulumi.Input[str]],
    threshold: float,
    periods: int,
    topic_arn: pulumi.Input[str],
    opts: pulumi.ResourceOptions,
    period_s: int = 60,
) -> aws.cloudwatch.MetricAlarm:
    """An alarm when ``metric`` stays above ``threshold`` for ``periods`` periods in a
    row, notifying the region's alert topic when it fires and when it clears. No
    datapoint (no traffic) is not a problem."""
    return aws.cloudwatch.MetricAlarm(
        resource_name,
        region=region,
        name=alarm_name,
        alarm_description=description,
        namespace=namespace,
        metric_name=metric,
        statistic=statistic,
        dimensions=dimensions,
        period=period_s,
        evaluation_periods=periods,
        datapoints_to_alarm=periods,
        threshold=threshold,
        comparison_operator="GreaterThanThreshold",
        treat_missing_data="notBreaching",
        alarm_actions=[topic_arn],
        ok_actions=[topic_arn],
        opts=opts,
    )
