"""Review tools that need no cloud credentials: the offline plan (``review.plan``) and
the contract checks against AWS's own API models (``review.contracts``). Both run the
real program under Pulumi mocks (``devkit.mock_program``) and read what it recorded."""
