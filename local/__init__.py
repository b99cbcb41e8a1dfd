"""The whole stack on one machine, with no AWS account.

``python -m local up`` (``scripts/run-local``) brings up, on loopback, for the regions
of a stack file: a development OAuth issuer, one MCP origin per region (the real
origin app under uvicorn), an edge proxy running the same CloudFront Function and
Lambda@Edge router code the program deploys, a moto server holding the stack's
queues, tables and topics, the probe and results functions driven as Lambda would
drive them (schedule, destinations, event source mappings), and a status page.
Everything it needs (names, regions, rendered edge code, function environments,
schedules, wiring) is taken from the program itself, run under Pulumi mocks.

The orchestration sits here (``__main__``, ``plan``, ``topology``, ``supervisor``,
``launch``, ``status``, ``client``, ``files``); what it runs is in rooms, one per thing
stood in for: ``aws`` (moto, the stack's resources, Lambda), ``cloudfront`` (the edge,
its KeyValueStore) and ``oauth`` (the dev authorization server and client).
"""
