"""OriginSecret: the origin secret in AWS Secrets Manager, one secret in each region that reads it.

CloudFront sends the origin secret to the origins as a custom header (CloudFront
cannot read Secrets Manager, so the distribution's origin config carries it); the
origins check it and the probes send it to the Function URLs directly. Neither holds
it in its Lambda environment, where anyone allowed ``lambda:GetFunctionConfiguration``
(read-only roles, the CI preview role) could read it and bypass the edge: each reading
region gets one secret holding ``{"current": ..., "previous": ...}`` (previous only
during a rotation), and the functions get its ARN and version id, and
``secretsmanager:GetSecretValue`` on that secret only. They read it once per execution
environment; a rotation writes a new secret version, whose id is in the functions'
environment, so every environment starts again with the new pair.

One secret per region rather than one replicated secret: a replica receives a new
value asynchronously, so a function restarted by a rotation could read the old pair
from a replica that had not caught up. Here each region's version exists before the
functions that name it are updated.
"""

import json
from typing import NotRequired, TypedDict

import pulumi
import pulumi_aws as aws

from components import naming
from components.naming import physical_name
from components.type_tokens import component_type
from components.validation import ArgChecks, is_known
from functions.contract import ORIGIN_SECRET_DOC_CURRENT, ORIGIN_SECRET_DOC_PREVIOUS

# GetSecretValue on one secret (its ARN ends in "-" and 6 random characters).
READ_ACTIONS = ("secretsmanager:GetSecretValue",)


def origin_secret_name(server_id: str, stack: str | None = None) -> str:
    """The same name in every region (names are per region); the stack in it keeps stacks apart."""
    return physical_name(server_id, "origin-secret", limit=naming.SECRETS_MANAGER_SECRET, stack=stack)


def secret_document(current: str, previous: str | None) -> str:
    """What the origins (functions/mcp_server/origin_secrets.py) and the probes read."""
    return json.dumps({ORIGIN_SECRET_DOC_CURRENT: current,
                       **({ORIGIN_SECRET_DOC_PREVIOUS: previous} if previous else {})})


class OriginSecretArgs(TypedDict):
    """Inputs of the origin secret."""

    server_id: str
    """Name of the MCP server: names the secret (with the stack)."""
    regions: list[str]
    """Every region that reads it: the origin regions and the probe regions."""
    secret: pulumi.Input[str]
    """The origin secret (a Pulumi secret)."""
    previous: NotRequired[pulumi.Input[str] | None]
    """During a rotation, the secret being rotated away from: origins accept both."""


class OriginSecret(pulumi.ComponentResource):
    """The origin secret in Secrets Manager, one secret (same name) in each region that reads it."""

    arns: pulumi.Output[dict[str, str]]
    """Region -> ARN of the secret there (what McpOrigin and ProbeFleet take as origin_secret_arn)."""
    versions: pulumi.Output[dict[str, str]]
    """Region -> id of the secret's current version there (changes with every rotation)."""
    name: pulumi.Output[str]
    """Name of the secret (the same in every region)."""

    def __init__(self, name: str, args: OriginSecretArgs, opts: pulumi.ResourceOptions | None = None):
        checks = ArgChecks("OriginSecret", name)  # before anything is registered
        if checks.required(args, "server_id", "regions", "secret"):
            checks.name_prefix("server_id", args["server_id"])
            checks.regions("regions", args["regions"])
            if is_known(args["secret"]) and not args["secret"]:
                checks.problem("secret", "", "must not be empty")
        checks.done()
        super().__init__(component_type("OriginSecret"), name, None, opts)
        secret_name = origin_secret_name(args["server_id"])
        document: pulumi.Output[str] = pulumi.Output.secret(
            pulumi.Output.all(args["secret"], args.get("previous")).apply(lambda v: secret_document(v[0], v[1])))
        arns: dict[str, pulumi.Output[str]] = {}
        versions: dict[str, pulumi.Output[str]] = {}
        for region in dict.fromkeys(args["regions"]):
            secret = aws.secretsmanager.Secret(
                f"{name}-{region}",
                region=region,
                name=secret_name,
                description=f"Origin secret of {args['server_id']}: the header CloudFront and the probes send to "
                            "the origins (current, and previous during a rotation)",
                # Deleted at once on destroy, so the same stack can be created again under the same name.
                recovery_window_in_days=0,
                opts=pulumi.ResourceOptions(parent=self),
            )
            version = aws.secretsmanager.SecretVersion(
                f"{name}-{region}-value",
                region=region,
                secret_id=secret.arn,
                secret_string=document,
                opts=pulumi.ResourceOptions(parent=self),
            )
            arns[region], versions[region] = secret.arn, version.version_id
        self.name = pulumi.Output.from_input(secret_name)
        self.arns = pulumi.Output.all(**arns)
        self.versions = pulumi.Output.all(**versions)
        self.register_outputs({"arns": self.arns, "versions": self.versions, "name": self.name})
