"""What the local edge does differently from CloudFront, and why: printed by
``scripts/run-local explain`` (``local.plan.LOCAL_DIFFERENCES``). Each line is a fact of
``local/cloudfront/proxy.py`` or ``devkit/edge_runtimes/in_process.py``; keep them true."""

from __future__ import annotations

EDGE_DIFFERENCES = (
    "Edge TLS and HTTP: the local edge speaks plain HTTP/1.1 on 127.0.0.1 (uvicorn); the distribution redirects "
    "http to https and serves TLS with customDomain's ACM certificate (SNI, viewer policy TLSv1.2_2021) or, "
    "without one, CloudFront's *.cloudfront.net certificate, over HTTP/1.1, HTTP/2 and HTTP/3, on IPv4 and IPv6.",
    "Edge host names: the local edge answers only Host 127.0.0.1 and localhost (any port, any case) and answers 403 "
    "to any other Host, before WAF or a function, as CloudFront does for a name that is neither the distribution's "
    "domain name (d....cloudfront.net) nor one of its aliases (customDomain). A DNS-rebinding page (its own name "
    "resolved to 127.0.0.1) is refused there; the origins never see the viewer's Host (the router sets the Function "
    "URL's).",
    "Edge JS engine: the viewer-request CloudFront Function (the shipped code, with the local issuer, audience and "
    "http URL rendered in) runs in QuickJS (quickjs-ng) in the edge's process, with stand-ins for Buffer and the "
    "cloudfront module (cf.kvs() reads the local KeyValueStore file), each event bounded at 1 s; CloudFront runs "
    "cloudfront-js-2.0 in its own engine with a compute-utilization limit (about 1 ms). The tests also run the "
    "shipped code in njs and node --jitless, which must agree with QuickJS.",
    "Edge Lambda@Edge runtime: the origin-request function (the shipped package, extracted) is imported into the "
    "local edge's own Python process and called for each request in turn; Lambda@Edge runs python3.13 on x86_64 "
    "in a process of its own per execution environment, in the regional edge cache's region, with the function's "
    "1,024 MB, a 5 s timeout and cold starts. Locally there is no timeout, memory limit or cold start, AWS_REGION "
    "is not the replica's, the role's credentials are the emulator's fake ones, and a library the package ships "
    "that the edge's process imported already from elsewhere is refused rather than used. Its log lines (the EMF "
    "records) go to the local edge's output, not to CloudWatch Logs in the replica's region.",
    "Edge header values: the local edge reads every viewer header value without the spaces and tabs around it "
    "(RFC 9112 5: they are not part of the value), before WAF, the functions and the origin see it; HTTP/2 and "
    "HTTP/3 viewers cannot send such a value to CloudFront at all (RFC 9113 8.2.1), and what CloudFront does with "
    "one from an HTTP/1.1 viewer is not documented (not measured here).",
    "Edge Origin check: the same as CloudFront's, since it is in the shipped viewer function: on the MCP path an "
    "Origin that is neither in allowedOrigins nor the edge's own (http://127.0.0.1:<port> locally) gets 403; "
    "requests without Origin pass.",
)
