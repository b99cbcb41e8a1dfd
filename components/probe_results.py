"""ProbeResults: the probe results table, one DynamoDB global table for every probe region.

The table is created in its home region (``home_region``, by default the first probe
region) with a replica in every other probe region: each region's results consumer
(``ProbeFleet``) writes to its own region, and every region can read every outcome.
Streams (NEW_AND_OLD_IMAGES) are on because global tables replicate through them.
"""

from collections.abc import Sequence
from typing import NotRequired, TypedDict

import pulumi
import pulumi_aws as aws

from components import naming
from components.naming import physical_name
from components.type_tokens import component_options, component_type
from components.validation import ArgChecks
from functions.contract import TABLE_HASH_KEY, TABLE_RANGE_KEY, TABLE_TTL_ATTRIBUTE


def results_table_name(server_id: str, stack: str | None = None) -> str:
    return physical_name(server_id, "probe-results", limit=naming.DYNAMODB_TABLE, stack=stack)


class ProbeResultsArgs(TypedDict):
    """Inputs of the probe results table."""

    server_id: str
    """Name of the MCP server: names the table."""
    regions: list[str]
    """The probe regions: the table has a copy in each (a replica in each but its home region)."""
    home_region: NotRequired[str]
    """Region the table is created in (default: the first of regions). Keep it fixed: reordering or
    removing probe regions then changes replicas in place, while a new home replaces the table."""


def replica_regions(home_region: str, regions: Sequence[str]) -> list[str]:
    """The regions of the table's replicas: every probe region but the home, sorted, so that
    reordering the probe regions changes nothing and adding or removing one changes replicas only."""
    return sorted(set(regions) - {home_region})


def replica_arns(home_arn: str, home_region: str, regions: Sequence[str]) -> dict[str, str]:
    """Region -> ARN of the table's copy there (same name, that region in the ARN)."""
    return {region: home_arn.replace(f":{home_region}:", f":{region}:", 1) for region in regions}


class ProbeResults(pulumi.ComponentResource):
    """The probe results table: a DynamoDB global table in its home region (by default the first
    probe region), replicated to the others, so each region's consumer writes locally and every
    region reads every outcome."""

    name: pulumi.Output[str]
    """Name of the table (the same in every region)."""
    arn: pulumi.Output[str]
    """ARN of the table in its home region."""
    home_region: pulumi.Output[str]
    """The region the table was created in (home_region, by default the first probe region)."""
    replica_arns: pulumi.Output[dict[str, str]]
    """Region -> ARN of the table's copy in that region (home region included)."""

    def __init__(self, name: str, args: ProbeResultsArgs, opts: pulumi.ResourceOptions | None = None):
        checks = ArgChecks("ProbeResults", name)  # before anything is registered
        if checks.required(args, "server_id", "regions"):
            checks.name_prefix("server_id", args["server_id"])
            checks.regions("regions", args["regions"])
            if args.get("home_region"):
                checks.region("home_region", args.get("home_region"))
        checks.done()
        super().__init__(component_type("ProbeResults"), name, None, component_options(opts, "mcpedge:probes:ProbeResults"))
        regions = list(args["regions"])
        home_region = args.get("home_region") or regions[0]
        table = aws.dynamodb.Table(
            f"{name}-table",
            region=home_region,
            name=results_table_name(args["server_id"]),
            billing_mode="PAY_PER_REQUEST",
            hash_key=TABLE_HASH_KEY,
            range_key=TABLE_RANGE_KEY,
            attributes=[
                aws.dynamodb.TableAttributeArgs(name=TABLE_HASH_KEY, type="S"),
                aws.dynamodb.TableAttributeArgs(name=TABLE_RANGE_KEY, type="S"),
            ],
            ttl=aws.dynamodb.TableTtlArgs(attribute_name=TABLE_TTL_ATTRIBUTE, enabled=True),
            # Global tables replicate through the stream; on even with one region, so
            # adding a probe region later only adds a replica.
            stream_enabled=True,
            stream_view_type="NEW_AND_OLD_IMAGES",
            point_in_time_recovery=aws.dynamodb.TablePointInTimeRecoveryArgs(enabled=True),
            # Changing replicas is an in-place update of the table (UpdateTable ReplicaUpdates).
            replicas=[aws.dynamodb.TableReplicaArgs(region_name=r, point_in_time_recovery=True)
                      for r in replica_regions(home_region, regions)],
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.name = table.name
        self.arn = table.arn
        self.home_region = pulumi.Output.from_input(home_region)
        self.replica_arns = table.arn.apply(lambda arn: replica_arns(arn, home_region, [home_region, *regions]))
        self.register_outputs({"name": table.name, "arn": table.arn, "homeRegion": self.home_region,
                               "replicaArns": self.replica_arns})

