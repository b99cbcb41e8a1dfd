import cf from 'cloudfront';
// MCP edge, viewer-request CloudFront Function (cloudfront-js-2.0), rendered by
// edge/viewer_function.py (C: this stack's constants). Rejects MCP requests whose bearer
// token is not a well-formed, current JWT for this stack (the origin verifies signatures);
// tells the router in C.header which deployed regions the KeyValueStore marks down.
// Never throws: CloudFront answers 5xx to a throwing function.
var C = __CONFIG__;
// No store associated: kvs stays undefined, and every read fails static.
var kvs;
try { kvs = cf.kvs(); } catch (e) {}

async function handler(event) {
  var req = event && event.request;
  try {
    delete req.headers[C.header];
    var out = check(req);
    if (out === req) {
      // A read that fails (no store, no key) lands in the catch: fail static. await
      // only as a statement of its own: njs crashes on await in an argument.
      var doc = await kvs.get(C.key);
      avoid(req.headers, doc);
    }
    return out;
  } catch (e) {
    // Only a failed read or a bug lands here: let the origin, which verifies every token, decide.
    return req;
  }
}

// Sets C.header to the deployed regions the health document lists, when some but not
// all are; an unreadable or malformed document sets nothing (fail static).
function avoid(h, doc) {
  var d = JSON.parse(doc);
  if (!d || d.v !== C.v || typeof d.at !== 'string' || !Array.isArray(d.avoid)) return;
  var out = [];
  for (var i = 0; i < d.avoid.length; i++) {
    var r = d.avoid[i];
    // Matched whole, not with $: njs's $ also matches before a final newline.
    if (typeof r !== 'string' || (/^[a-z]{2}(-[a-z]+)+-\d/.exec(r) || [])[0] !== r) return;
    if (C.regions.indexOf(r) >= 0 && out.indexOf(r) < 0) out.push(r);
  }
  if (out.length && out.length < C.regions.length) h[C.header] = {value: out.join(',')};
}

function check(req) {
  var path = decodePath(req.uri);
  if (path.indexOf('/.well-known/') === 0) return req;
  if (path !== C.path && path.indexOf(C.path + '/') !== 0) return req;
  var h = req.headers;
  // The transport spec's Origin check (a browser's request, preflight included), here
  // rather than in the origin-request function: it refuses before any Lambda@Edge
  // invocation, and it needs nothing but a header. No Origin: not a browser, passes.
  // 403 with a JSON-RPC error, as MCP servers answer an invalid Origin; no CORS headers:
  // the page that sent it is not one that may read the edge's answers.
  var own = h.origin && originOk(h.origin, h);
  if (h.origin && !own) return {
    statusCode: 403,
    statusDescription: 'Forbidden',
    headers: {'cache-control': {value: 'no-store'}, 'content-type': {value: 'application/json'},
      'x-mcp-edge-refusal': {value: 'origin-not-allowed'}},
    body: {encoding: 'text', data: '{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Origin not allowed"}}'}
  };
  // Same-origin needs no CORS answer, and the origin sees the Function URL's Host, so its
  // own same-origin check would take this page for a foreign one: the Origin stops here.
  if (own === 2) delete h.origin;
  // CORS preflight carries no token.
  if (req.method === 'OPTIONS') return req;
  var auth = h.authorization;
  if (!auth || typeof auth.value !== 'string') return reject(h, '', 'missing bearer token');
  // One pass over the value: the scheme and a JWT's three base64url segments, in one
  // spelling only: Bearer, one space, the token. WAF's per-token key folds case and
  // whitespace itself (it runs before this function); refusing the other spellings too
  // means no request under a respelled key ever reaches an origin.
  var m = /^Bearer ([\w-]+)\.([\w-]+)\.[\w-]+$/.exec(auth.value);
  if (!m && !/^bearer(?:[ \t]|$)/i.test(auth.value)) return reject(h, '', 'Authorization is not a Bearer token');
  var why = problem(auth, m);
  return why ? reject(h, 'invalid_token', why) : req;
}

// What is wrong with a bearer token ('' when nothing is); m: its segments, if a JWT.
function problem(auth, m) {
  if (auth.multiValue && auth.multiValue.length > 1) return 'more than one Authorization header';
  if (!m && !/^Bearer [^ \t]+$/.test(auth.value)) return 'Authorization must be exactly Bearer, one space, the token';
  if (!m) return 'token is not a JWT (three base64url segments)';
  var jose = decode(m[1]);
  if (!jose) return 'token header is not base64url-encoded JSON';
  if (typeof jose.alg !== 'string' || /^none$/i.test(jose.alg)) return 'unsigned token';
  if (C.algs.indexOf(jose.alg) < 0) return 'token algorithm not accepted';
  var cl = decode(m[2]);
  if (!cl) return 'token payload is not base64url-encoded JSON';
  var now = Date.now() / 1000;
  if (!isNumber(cl.exp)) return 'token has no expiry';
  if (cl.exp + C.leeway <= now) return 'token expired';
  if (cl.nbf !== undefined && (!isNumber(cl.nbf) || cl.nbf - C.leeway > now)) return 'token not yet valid';
  if (cl.iss !== C.iss) return 'token issuer not accepted';
  var aud = cl.aud;
  if (!(aud === C.aud || (Array.isArray(aud) && aud.indexOf(C.aud) >= 0))) return 'token audience not accepted';
  return '';
}

// One Origin header whose value, without the whitespace around it (RFC 9110 5.5), is
// one of C.origins exactly ('null' only when listed): 1, or this request's own origin: 2
// (CloudFront serves only the distribution's names, so only a page of this edge can send
// that); else 0.
function originOk(o, h) {
  if (o.multiValue && o.multiValue.length > 1 || typeof o.value !== 'string') return false;
  var v = o.value.replace(/^[ \t]+|[ \t]+$/g, '');
  if (C.origins.indexOf(v) >= 0) return 1;
  return h.host && v === C.scheme + '://' + String(h.host.value).toLowerCase() ? 2 : 0;
}

function isNumber(v) {
  return typeof v === 'number' && isFinite(v);
}

function decodePath(uri) {
  if (typeof uri !== 'string') return '';
  // Malformed escapes: compare the raw path.
  if (uri.indexOf('%') >= 0) try { uri = decodeURIComponent(uri); } catch (e) {}
  return uri.indexOf('//') < 0 ? uri : uri.replace(/\/{2,}/g, '/');
}

// A JSON object from one unpadded base64url segment, or null. Buffer's decoders are
// lenient, so the text must encode back to the very same segment: that rejects a wrong
// alphabet or length, non-zero trailing bits and invalid UTF-8 (decoded as U+FFFD).
function decode(s) {
  try {
    var t = Buffer.from(s, 'base64url').toString();
    if (Buffer.from(t).toString('base64url') !== s) return null;
    var v = JSON.parse(t);
    return v && typeof v === 'object' && !Array.isArray(v) ? v : null;
  } catch (e) {
    return null;
  }
}

// 401 with the scopes to ask for (when the stack names some), the RFC 9728 resource
// metadata URL, and RFC 6750's error when a token was sent.
function reject(h, error, desc) {
  var host = C.host;
  if (!host && h.host && typeof h.host.value === 'string') host = h.host.value.toLowerCase();
  var ps = C.scope ? [C.scope] : [];
  if (host && /^[A-Za-z\d.-]+(:\d{1,5})?$/.test(host)) {
    ps.push('resource_metadata="' + C.scheme + '://' + host + C.metadata + '"');
  }
  if (error) ps.push('error="' + error + '"', 'error_description="' + desc + '"');
  var out = {
    'www-authenticate': {value: ps.length ? 'Bearer ' + ps.join(', ') : 'Bearer'},
    'cache-control': {value: 'no-store'},
    'content-type': {value: 'application/json'},
    // The edge's refusal mark (functions/contract.py REFUSAL_HEADER).
    'x-mcp-edge-refusal': {value: error ? 'invalid-token' : 'no-token'}
  };
  if (h.origin) {
    // Browser clients must be able to read the challenge to start OAuth discovery.
    out['access-control-allow-origin'] = {value: '*'};
    out['access-control-expose-headers'] = {value: 'www-authenticate'};
  }
  return {
    statusCode: 401,
    statusDescription: 'Unauthorized',
    headers: out,
    body: { encoding: 'text', data: JSON.stringify({error: error || 'unauthorized', error_description: desc}) }
  };
}
