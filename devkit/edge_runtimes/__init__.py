"""The runtimes the shipped edge code runs in off AWS: the CloudFront Function (JavaScript)
in QuickJS in this process and the Lambda@Edge router (Python) imported from its rendered
source (``in_process``), and the CloudFront Function in njs and Node.js as separate
processes (``njs_node``), all with the same stand-ins for what ``cloudfront-js-2.0``
provides (``cloudfront_runtime.js``).

Why here, in the development package: the local edge (``local.cloudfront``), the tests of
the shipped code, the edge test cases and the benchmarks all run the edge code through
these, so they sit below every one of them. ``local`` already builds on ``devkit`` (its
plan runs the program under ``devkit.mock_program``); with the runtimes here, ``devkit``
imports nothing from ``local`` and the arrow between the two runs one way only
(``tests/test_layering.py`` holds it), without another top-level package.
"""
