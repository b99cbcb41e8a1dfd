"""The local CloudFront distribution: the edge proxy (``proxy``) on its HTTP protocol
(``http_protocol``), the events CloudFront hands the edge code and what its results mean
(``events``), the distribution's KeyValueStore (``key_value_store``: the API moto lacks,
served to the functions that write it, and the file reader the edge's function reads it
through), its request limits (``request_limits``) and its client to the origins
(``origin_client``). The edge code itself runs in ``devkit.edge_runtimes.in_process``, the
runtimes the tests and benchmarks use too.
"""
