// MCP edge, viewer-request CloudFront Function (runtime cloudfront-js-2.0).
// Rendered by edge/viewer_function.py: C holds this stack's constants.
// Rejects MCP requests whose bearer token is not a well-formed, current JWT for this
// stack's issuer and audience. Signatures are verified at the origin, not here.
// Must never throw (CloudFront answers 5xx to a throwing function).
var C = __CONFIG__;
var TOKEN = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
var HOST = /^[A-Za-z0-9.-]+(:[0-9]{1,5})?$/;

function handler(event) {
  var request = event && event.request;
  try {
    return check(request);
  } catch (e) {
    // Only a bug lands here: let the origin, which verifies every token, decide.
    return request;
  }
}

function check(request) {
  var path = decodePath(request.uri);
  if (path.indexOf('/.well-known/') === 0) return request;
  if (path !== C.path && path.indexOf(C.path + '/') !== 0) return request;
  if (request.method === 'OPTIONS') return request;  // CORS preflight carries no token
  var headers = request.headers || {};
  var auth = headers.authorization;
  if (!auth || typeof auth.value !== 'string') return reject(headers, '', 'missing bearer token');
  var scheme = /^bearer(?: +|$)/i.exec(auth.value);
  if (!scheme) return reject(headers, '', 'Authorization is not a Bearer token');
  if (auth.multiValue && auth.multiValue.length > 1) return invalid(headers, 'more than one Authorization header');
  var token = auth.value.slice(scheme[0].length).replace(/ +$/, '');
  if (!TOKEN.test(token)) return invalid(headers, 'token is not a JWT (three base64url segments)');
  var parts = token.split('.');
  var jose = decodeJson(parts[0]);
  if (!jose) return invalid(headers, 'token header is not base64url-encoded JSON');
  if (typeof jose.alg !== 'string' || /^none$/i.test(jose.alg)) return invalid(headers, 'unsigned token');
  if (C.algs.indexOf(jose.alg) < 0) return invalid(headers, 'token algorithm not accepted');
  var claims = decodeJson(parts[1]);
  if (!claims) return invalid(headers, 'token payload is not base64url-encoded JSON');
  var now = Date.now() / 1000;
  if (!isNumber(claims.exp)) return invalid(headers, 'token has no expiry');
  if (claims.exp + C.leeway <= now) return invalid(headers, 'token expired');
  if (claims.nbf !== undefined && (!isNumber(claims.nbf) || claims.nbf - C.leeway > now)) {
    return invalid(headers, 'token not yet valid');
  }
  if (claims.iss !== C.iss) return invalid(headers, 'token issuer not accepted');
  var aud = claims.aud;
  if (!(aud === C.aud || (Array.isArray(aud) && aud.indexOf(C.aud) >= 0))) {
    return invalid(headers, 'token audience not accepted');
  }
  return request;
}

function isNumber(v) {
  return typeof v === 'number' && isFinite(v);
}

function decodePath(uri) {
  if (typeof uri !== 'string') return '';
  try {
    uri = decodeURIComponent(uri);
  } catch (e) {
    // Malformed escapes: compare the raw path.
  }
  return uri.replace(/\/{2,}/g, '/');
}

function invalid(headers, description) {
  return reject(headers, 'invalid_token', description);
}

// 401 with the RFC 9728 resource metadata URL, and RFC 6750's error when a token was sent.
function reject(headers, error, description) {
  var host = C.host;
  if (!host && headers.host && typeof headers.host.value === 'string') host = headers.host.value.toLowerCase();
  var params = [];
  if (host && HOST.test(host)) params.push('resource_metadata="' + C.scheme + '://' + host + C.metadata + '"');
  if (error) params.push('error="' + error + '"', 'error_description="' + description + '"');
  var out = {
    'www-authenticate': { value: params.length ? 'Bearer ' + params.join(', ') : 'Bearer' },
    'cache-control': { value: 'no-store' },
    'content-type': { value: 'application/json' }
  };
  if (headers.origin) {
    // Browser clients must be able to read the challenge to start OAuth discovery.
    out['access-control-allow-origin'] = { value: '*' };
    out['access-control-expose-headers'] = { value: 'www-authenticate' };
  }
  return {
    statusCode: 401,
    statusDescription: 'Unauthorized',
    headers: out,
    body: { encoding: 'text', data: JSON.stringify({ error: error || 'unauthorized', error_description: description }) }
  };
}

function decodeJson(segment) {
  var bytes = base64url(segment);
  var text = bytes && utf8(bytes);
  if (text === null || text === undefined) return null;
  var value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return null;
  }
  return value && typeof value === 'object' && !Array.isArray(value) ? value : null;
}

// base64url (RFC 4648 section 5, unpadded) to bytes; null when malformed.
function base64url(s) {
  if (s.length % 4 === 1) return null;
  var out = [];
  var buf = 0;
  var bits = 0;
  for (var i = 0; i < s.length; i++) {
    var c = s.charCodeAt(i);
    var v = c >= 65 && c <= 90 ? c - 65 : c >= 97 && c <= 122 ? c - 71 : c >= 48 && c <= 57 ? c + 4 : c === 45 ? 62 : c === 95 ? 63 : -1;
    if (v < 0) return null;
    buf = (buf << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push((buf >> bits) & 255);
      buf &= (1 << bits) - 1;
    }
  }
  return out;
}

// Strict UTF-8 (no overlongs, no surrogates) to a string; null when malformed.
function utf8(bytes) {
  var s = '';
  var i = 0;
  while (i < bytes.length) {
    var b = bytes[i++];
    if (b < 0x80) {
      s += String.fromCharCode(b);
      continue;
    }
    var need = b >= 0xc2 && b < 0xe0 ? 1 : b >= 0xe0 && b < 0xf0 ? 2 : b >= 0xf0 && b < 0xf5 ? 3 : 0;
    if (!need || i + need > bytes.length) return null;
    var cp = b & (0x3f >> need);
    for (var k = 0; k < need; k++) {
      var x = bytes[i++];
      if ((x & 0xc0) !== 0x80) return null;
      cp = (cp << 6) | (x & 0x3f);
    }
    if (cp < [0, 0x80, 0x800, 0x10000][need] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return null;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      s += String.fromCharCode(0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
    } else {
      s += String.fromCharCode(cp);
    }
  }
  return s;
}
