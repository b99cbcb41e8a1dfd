"""Before `pulumi up`: does the stack's Lambda concurrency fit the account's quotas?

    .venv/bin/python -m review.preflight --stack prod

New accounts start with low Lambda concurrency quotas, and Lambda refuses a reserved
concurrency that leaves fewer than 100 unreserved executions in the region. For every
origin region of the stack this reads, with read-only credentials:

- ``lambda:GetAccountSettings``: the region's concurrency limit and what is unreserved;
- ``lambda:GetFunctionConcurrency`` on the stack's own origin function, whose current
  reservation (if it exists already) is freed by the update;
- ``servicequotas:GetServiceQuota`` for Lambda's *Concurrent executions* quota
  (``L-B99A9384``), the value an increase request raises;

and says which setting does not fit (``originReservedConcurrency``, or
``originProvisionedMax`` when nothing is reserved, per region after ``originOverrides``),
by how much, and what to change. Exit status: 0 everything fits, 1 a setting does not
fit, 2 it could not check (no credentials, or AWS refused a call): it then lists what
it would have checked.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from components.origin import function_name_for
from review.errors import EXIT_ERROR, add_debug_flag, run_reporting_errors
from stack_config.keys import PROJECT
from stack_config.loading import load_from_stack_file
from stack_config.model import StackConfig

# Lambda keeps this many executions unreserved in every region (PutFunctionConcurrency).
MIN_UNRESERVED = 100
LAMBDA_CONCURRENCY_QUOTA = "L-B99A9384"  # Service Quotas: AWS Lambda "Concurrent executions"
READ_ONLY_ACTIONS = ("lambda:GetAccountSettings", "lambda:GetFunctionConcurrency", "servicequotas:GetServiceQuota")

Clients = Callable[[str, str], Any]  # (service, region) -> a boto3 client


@dataclass(frozen=True)
class Finding:
    region: str
    fits: bool
    message: str


def _setting(config: StackConfig, region: str, field: str, key: str) -> str:
    """The key that sets ``field`` for ``region``: its override when that differs from the base."""
    overridden = getattr(config.origin_for(region), field) != getattr(config.origin, field)
    return f"{PROJECT}:originOverrides[{region}].{key}" if overridden else f"{PROJECT}:origin{key[0].upper()}{key[1:]}"


def would_check(config: StackConfig) -> list[str]:
    """What the preflight reads and compares, region by region (printed without credentials)."""
    lines = []
    for region in config.regions:
        sizing = config.origin_for(region)
        fn = function_name_for(config.server_id, region, config.stack)
        want = (f"reserved {sizing.reserved_concurrency} + {MIN_UNRESERVED} unreserved" if sizing.reserved_concurrency
                else f"provisioned up to {sizing.provisioned_max} + {MIN_UNRESERVED} unreserved (nothing reserved)")
        lines.append(f"{region}: GetAccountSettings, GetFunctionConcurrency({fn}), Service Quotas lambda "
                     f"{LAMBDA_CONCURRENCY_QUOTA}: needs {want} within the region's concurrency")
    return lines


def _current_reservation(client: Any, function_name: str) -> int:
    try:
        return int(client.get_function_concurrency(FunctionName=function_name).get("ReservedConcurrentExecutions") or 0)
    except client.exceptions.ResourceNotFoundException:
        return 0  # the function does not exist yet


def check_region(config: StackConfig, region: str, clients: Clients) -> Finding:
    sizing = config.origin_for(region)
    lam = clients("lambda", region)
    limits = lam.get_account_settings()["AccountLimit"]
    limit, unreserved = int(limits["ConcurrentExecutions"]), int(limits["UnreservedConcurrentExecutions"])
    own = _current_reservation(lam, function_name_for(config.server_id, region, config.stack))
    quota = clients("service-quotas", region).get_service_quota(
        ServiceCode="lambda", QuotaCode=LAMBDA_CONCURRENCY_QUOTA)["Quota"]["Value"]
    available = unreserved + own  # what the origin may take once its current reservation is freed
    room = available - MIN_UNRESERVED
    figures = (f"account limit {limit}, {unreserved} unreserved (+{own} the origin reserves today), "
               f"quota {LAMBDA_CONCURRENCY_QUOTA} = {int(quota)}")
    if sizing.reserved_concurrency:
        setting, wanted = _setting(config, region, "reserved_concurrency", "reservedConcurrency"), sizing.reserved_concurrency
        what = "reserves"
    else:
        setting, wanted = _setting(config, region, "provisioned_max", "provisionedMax"), sizing.provisioned_max
        what = "may provision (nothing reserved)"
    if wanted <= room:
        return Finding(region, True, f"{region}: fits: the origin {what} {wanted} of {room} available; {figures}")
    needed = limit + wanted - room
    quota_advice = (
        f"or wait: Service Quotas already grants {int(quota)} ({LAMBDA_CONCURRENCY_QUOTA}), which the account "
        "limit reaches once the increase is applied" if quota >= needed else
        f"or request Lambda 'Concurrent executions' ({LAMBDA_CONCURRENCY_QUOTA}) in {region} of at least {needed}")
    return Finding(region, False, (
        f"{region}: {setting} = {wanted} does not fit: the origin {what} {wanted}, but only {max(room, 0)} can be "
        f"taken while leaving {MIN_UNRESERVED} unreserved ({figures}). Lower it to {max(room, 0)}"
        + (", set it to 0 (no reservation)" if sizing.reserved_concurrency else "") + f", {quota_advice}"))


def has_credentials() -> bool:
    import boto3

    return boto3.Session().get_credentials() is not None


def default_clients(service: str, region: str) -> Any:
    import boto3

    return boto3.client(service, region_name=region)  # type: ignore[call-overload]


def run(config: StackConfig, clients: Clients, out: Callable[[str], None] = print) -> int:
    findings = [check_region(config, region, clients) for region in config.regions]
    for finding in findings:
        out(("ok    " if finding.fits else "FAIL  ") + finding.message)
    bad = [f for f in findings if not f.fits]
    out(f"{len(findings) - len(bad)} of {len(findings)} regions fit" + (": fix the settings above before pulumi up"
                                                                         if bad else ""))
    return 1 if bad else 0


def main(argv: Sequence[str] | None = None, *, clients: Clients | None = None,
         credentials: Callable[[], bool] = has_credentials, out: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(prog="python -m review.preflight", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", default="prod", help="stack name (Pulumi.<stack>.yaml) or a stack file's path")
    add_debug_flag(parser)
    args = parser.parse_args(argv)

    def work() -> int:
        config = load_from_stack_file(args.stack)
        if clients is None and not credentials():
            out(f"error: no AWS credentials: the preflight of stack {config.stack!r} needs read-only credentials "
                f"allowed {', '.join(READ_ONLY_ACTIONS)} (AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or a "
                "role). Nothing was checked. With credentials it would check:")
            for line in would_check(config):
                out(f"  {line}")
            return EXIT_ERROR
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return run(config, clients or default_clients, out)
        except (BotoCoreError, ClientError) as exc:
            out(f"error: AWS refused a preflight call ({exc}); it needs {', '.join(READ_ONLY_ACTIONS)}. "
                "Nothing was concluded.")
            return EXIT_ERROR

    return run_reporting_errors("review.preflight", work, debug=args.debug, out=out)


if __name__ == "__main__":
    raise SystemExit(main())
