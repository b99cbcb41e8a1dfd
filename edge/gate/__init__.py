"""The security gate of the Lambda@Edge origin-request function, shipped as the
``edge_gate`` package beside the rendered geo-router (``edge.gate_package`` renders
and lists both). Modules, each importable on its own in the repository too:

- ``mcp_request``: pure parsers (standard library): the include-body field, the
  JSON-RPC calls in a body, ``Mcp-Method``/``Mcp-Name`` against the body, the bearer
  token, the scopes a request needs, the challenges;
- ``tokens``: the bearer token's verification (PyJWT + cryptography) against the
  issuer's key set, embedded at deploy time and refreshed on an unknown ``kid``, and a
  bounded memory of verified tokens until their ``exp``;
- ``signing``: SigV4 for the chosen origin's Function URL (awscrt);
- ``rate_counting``: what the web ACL's per-tool rate limits cannot count (a batch
  with a limited tool, a name past WAF's body inspection), refused (standard library);
- ``telemetry``: W3C trace context toward the origin and one CloudWatch EMF record
  per request (standard library), from what the gate parsed and verified;
- ``constants``: this stack's settings (a template line, rendered at deploy time);
- ``handler``: the Lambda@Edge handler: route, verify, authorize, sign.
"""
