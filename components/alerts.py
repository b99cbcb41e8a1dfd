"""AlertTopic: the SNS topic that alarms and probe alerts go to, one per region.

CloudWatch alarm actions must name an SNS topic in the alarm's own region, so each
region that has an origin or a probe fleet gets its own topic (with the optional
e-mail subscription), instead of one global topic.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws


@dataclass(frozen=True)
class AlertTopicArgs:
    region: str
    server_id: str
    email: str | None = None


class AlertTopic(pulumi.ComponentResource):
    arn: pulumi.Output[str]

    def __init__(self, name: str, args: AlertTopicArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("mcpedge:alerts:AlertTopic", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        topic = aws.sns.Topic(
            f"{name}-topic",
            region=args.region,
            name=f"{args.server_id}-alerts-{args.region}",
            # SSE with the AWS-managed key: alert text can name endpoints and errors.
            kms_master_key_id="alias/aws/sns",
            opts=child,
        )
        if args.email:
            aws.sns.TopicSubscription(
                f"{name}-email",
                region=args.region,
                topic=topic.arn,
                protocol="email",
                endpoint=args.email,
                opts=child,
            )
        self.region = args.region
        self.arn = topic.arn
        self.register_outputs({"arn": topic.arn})
