"""Contract checks: every constrained input the program sets, checked against AWS's own
API models (the service models botocore ships), plus the rules AWS enforces only at
deploy time (Lambda@Edge) and the rules that span resources.

    .venv/bin/python -m review.contracts --stack prod [--variant one-region] [--all-variants]

Three kinds of checks, all run on a mock run of the real program:

- ``INPUT_CONTRACTS``: a pulumi-aws input (resource type + input path) mapped, by an
  explicit table, to the API member it becomes (service, shape, member). The enum,
  numeric range, length and pattern come from the botocore model; where the model has
  no constraint (CloudFront timeouts are bare integers, SQS attributes are strings),
  AWS's documented limit is encoded with its citation.
- ``RULES`` ``edge.*``: Lambda@Edge and CloudFront Function restrictions that the API
  accepts but CloudFront rejects when the function is associated (us-east-1, x86_64,
  numbered version, no environment/layers/VPC, trust principals, size and time limits).
- ``RULES`` of the other families: cross-resource rules (queue visibility >= 6x the
  consumer's timeout, provisioned <= reserved concurrency, Function URL permissions,
  destinations the role can write to, ...).

Every check reports how many resources and values it ran on, so that a check whose
resource the program does not create (yet) shows as "not run", never as verified.

Modules, by concern: ``constraints`` (constraint types, documented limits, resource
types, check results, the rule registry), ``inputs`` (the input contracts), ``iam``
(the resource graph and IAM policy evaluation), ``edge`` (Lambda@Edge and CloudFront
rules), ``cross`` (cross-resource rules), ``firewall`` (the WAF web ACL against the wafv2
model), ``cli`` (running the checks, the report, the
command line). Importing the package registers every rule, edge rules first.
"""

from collections.abc import Sequence

from devkit.mock_program import run_program

# isort: off
# The rules register as their modules load: edge rules first, as the report lists them.
from review.contracts import edge  # noqa: F401
from review.contracts import cross  # noqa: F401
from review.contracts import firewall  # noqa: F401
from review.contracts import cli
# isort: on
from review.contracts.cli import ContractReport, check_run, run_rule
from review.contracts.constraints import RULES, CheckResult, Constraint, Rule, merge, rule, shape_constraint
from review.contracts.iam import Graph, allows, parse_lambda_ref, trusted_services
from review.contracts.inputs import INPUT_CONTRACTS, InputContract, check_input
from review.variants import VARIANTS

__all__ = [
    "INPUT_CONTRACTS", "RULES", "VARIANTS", "CheckResult", "Constraint", "ContractReport", "Graph", "InputContract",
    "Rule", "allows", "check_input", "check_run", "main", "merge", "parse_lambda_ref", "rule", "run_program",
    "run_rule", "shape_constraint", "trusted_services",
]


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (``python -m review.contracts``); the program runs through this
    package's ``run_program``."""
    return cli.main(argv, run=run_program)
