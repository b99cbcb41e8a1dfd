"""Stack configurations besides the committed stack files, as ``config_overrides`` for
``run_program``: the contract checks run on each, and the program benchmark scales the
region list. Every variant is a valid configuration of the prod stack file."""

from __future__ import annotations

from typing import Any

from edge.regions import AWS_REGIONS

# Regions spread over every continent, in the order the benchmark adds them; the
# first four are not prod's, so the variants differ from prod in every origin.
SPREAD_REGIONS = (
    "eu-central-1", "us-west-2", "ap-southeast-2", "sa-east-1",
    "us-east-1", "eu-west-1", "ap-northeast-1", "ap-south-1",
    "ca-central-1", "eu-north-1", "me-central-1", "af-south-1",
    "ap-southeast-1", "us-east-2", "eu-west-2", "ap-northeast-2", "mx-central-1",
)
assert len(SPREAD_REGIONS) == 17 and set(SPREAD_REGIONS) <= set(AWS_REGIONS)


def regions_overrides(count: int, **extra: Any) -> dict[str, Any]:
    """Overrides that deploy the first ``count`` spread regions (per-region overrides of
    the stack file are dropped: they may name regions outside the list)."""
    if not 1 <= count <= len(SPREAD_REGIONS):
        raise ValueError(f"count must be between 1 and {len(SPREAD_REGIONS)}, not {count}")
    regions = list(SPREAD_REGIONS[:count])
    return {"regions": regions, "defaultRegion": regions[0], "originOverrides": [], "probeRegions": [], **extra}


# The prod stack file without its provisioned-concurrency keys (originColdStart snapstart
# and none refuse them), us-east-1 keeping its memory override.
WITHOUT_PROVISIONED: dict[str, Any] = {
    "originProvisionedMin": None, "originProvisionedMax": None, "originUtilizationTarget": None,
    "originScaleInCooldownSeconds": None, "originScaleOutCooldownSeconds": None,
    "originOverrides": ["us-east-1:memoryMb=2048"],
}

# name -> overrides of the prod stack file
VARIANTS: dict[str, dict[str, Any]] = {
    "prod": {},
    # One origin outside us-east-1 (the edge still deploys there), no provisioned
    # concurrency, no custom domain, the probes' client secret created by the stack.
    "one-region": regions_overrides(1, originProvisionedMin=0, customDomain="", certificateArn="",
                                    probeClientSecret="variant-client-secret-" + "c" * 20, probeClientSecretName=None),
    "eight-regions": regions_overrides(8),
    # Lambda SnapStart instead of provisioned concurrency (the Web Adapter release that
    # relays the snapshot hooks).
    "snapstart": {**WITHOUT_PROVISIONED, "originColdStart": "snapstart", "lwaLayerVersion": 30},
    # A container image a pipeline pushed to every origin region's repository, by digest.
    "image": {"server": {"imageDigest": "sha256:" + "ab" * 32, "path": "/mcp"}},
}
