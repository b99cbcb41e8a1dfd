"""The AWS services the local topology stands in for: moto's server, made safe for a
long-running topology (``moto_server``), the stack's queues, tables, topics and secret
created in it plus the global-table replicator (``resources``), and Lambda around the
program's handlers (``lambda_runtime``: the pieces with AWS-defined shapes;
``lambda_worker``: one function in one region, driven by schedules, destinations and
event source mappings). The CloudFront KeyValueStore, which moto lacks, is CloudFront's:
``local.cloudfront.key_value_store``.
"""
