// What cloudfront-js-2.0 gives a CloudFront Function that a plain JS engine lacks, for
// running the shipped function outside CloudFront (local edge, tests, benchmarks):
// - the `cloudfront` module, as __cf (the runner replaces exactly the function's
//   `import cf from 'cloudfront';` line with `var cf = __cf;`): cf.kvs() and the
//   KeyValueStore handle's get(key, {format}), exists(key) and meta(), served from a
//   snapshot the host sets with __cf.__store(snapshot) before an event;
// - Buffer (Node's API, as cloudfront-js-2.0 documents it) where the engine has none
//   (QuickJS): from(string, 'utf8' | 'base64url' | 'base64' | 'hex'),
//   from(array), toString(same encodings), decoding as leniently as Node does (bad
//   characters skipped, invalid UTF-8 replaced with U+FFFD).
// __cf.__associate(false) before the function loads: no store is associated, and
// cf.kvs() throws, as CloudFront's does. A snapshot is null (every read rejects) or
// {values: {key: string}, errors: {key: message}}; a key in neither is missing (get
// rejects, exists gives false); a key in errors rejects every read of it.
var __cf = (function () {
  var associated = true;
  var snapshot = null;
  function read(key) {
    if (snapshot === null) return Promise.reject(new Error('KeyValueStore unavailable'));
    if (snapshot.errors && Object.prototype.hasOwnProperty.call(snapshot.errors, key)) {
      return Promise.reject(new Error('KeyValueStore read failed: ' + snapshot.errors[key]));
    }
    if (!snapshot.values || !Object.prototype.hasOwnProperty.call(snapshot.values, key)) {
      return Promise.reject(new Error('Key not found: ' + key));
    }
    return Promise.resolve(snapshot.values[key]);
  }
  var handle = {
    get: function (key, options) {
      var format = (options && options.format) || 'string';
      // As cheap as the host allows: what the function costs is what is measured.
      if (format === 'string') return read(String(key));
      return read(String(key)).then(function (value) {
        if (format === 'json') return JSON.parse(value);
        if (format === 'bytes') return Buffer.from(value);
        if (format !== 'string') throw new Error('unknown format ' + format);
        return value;
      });
    },
    exists: function (key) {
      return read(String(key)).then(function () { return true; }, function (e) {
        if (/^Key not found/.test(e.message)) return false;
        throw e;
      });
    },
    meta: function () {
      var count = snapshot && snapshot.values ? Object.keys(snapshot.values).length : 0;
      return Promise.resolve({creationDateTime: '1970-01-01T00:00:00Z', lastUpdatedDateTime: '1970-01-01T00:00:00Z',
                              keyCount: count});
    }
  };
  return {
    kvs: function () {
      if (!associated) throw new Error('no KeyValueStore is associated with this function');
      return handle;
    },
    __associate: function (a) { associated = a; },
    __store: function (s) { snapshot = s; }
  };
})();

if (typeof Buffer === 'undefined') {
  (function (global) {
    var ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
    var STANDARD = ALPHABET + '+/';
    var URLSAFE = ALPHABET + '-_';
    var VALUE = {};
    for (var i = 0; i < 64; i++) {
      VALUE[STANDARD[i]] = i;
      VALUE[URLSAFE[i]] = i;
    }

    function utf8Encode(s) {
      var out = [];
      for (var i = 0; i < s.length; i++) {
        var c = s.charCodeAt(i);
        if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
          var d = s.charCodeAt(i + 1);
          if (d >= 0xdc00 && d <= 0xdfff) {
            c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
            i++;
          }
        }
        if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;  // a lone surrogate, as Node encodes it
        if (c < 0x80) out.push(c);
        else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
        else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
        else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
      }
      return out;
    }

    // Where the engine has them natively (QuickJS: Uint8Array.fromBase64, toBase64, btoa, atob),
    // the codecs take the engine's own path for the input it handles exactly as the loops
    // below do (tests/devkit/edge_runtimes/test_cloudfront_runtime.py compares both): interpreted, those
    // loops cost more than all the function's other work (a token's payload from base64url:
    // 155 us, natively 14 us), which CloudFront's native Buffer never costs.
    var NATIVE_BASE64 = typeof Uint8Array.fromBase64 === 'function' &&
      typeof Uint8Array.prototype.toBase64 === 'function' && typeof btoa === 'function' && typeof atob === 'function';
    var NON_ASCII = /[^\x00-\x7f]/;
    var ASCII_RUN_LIMIT = 4096;  // arguments to one Math.max call

    function utf8Bytes(s) {
      // ASCII is its own UTF-8, and btoa takes it as it is.
      if (NATIVE_BASE64 && !NON_ASCII.test(s)) return Uint8Array.fromBase64(btoa(s));
      return utf8Encode(s);
    }

    function base64Text(b, url) {
      if (NATIVE_BASE64) return Uint8Array.prototype.toBase64.call(b, url ? {alphabet: 'base64url', omitPadding: true} : {});
      return base64Encode(b, url ? URLSAFE : STANDARD, !url);
    }

    function base64Bytes(s, url) {
      // What the native decoder takes (one alphabet, whitespace, padding only at the end,
      // no lone trailing character) it decodes as the loop does; it throws on the rest.
      if (NATIVE_BASE64) {
        try {
          return Uint8Array.fromBase64(s, {alphabet: url ? 'base64url' : 'base64', lastChunkHandling: 'loose'});
        } catch (e) {}
      }
      return base64Decode(s);
    }

    function utf8Text(b) {
      // ASCII is its own UTF-8; atob of the bytes' base64 is their text, natively.
      if (NATIVE_BASE64 && b.length <= ASCII_RUN_LIMIT && Math.max.apply(null, b) < 0x80) {
        return atob(Uint8Array.prototype.toBase64.call(b));
      }
      return utf8Decode(b);
    }

    // WHATWG UTF-8 decoding: each maximal invalid subpart becomes one U+FFFD.
    function utf8Decode(b) {
      var s = '';
      var i = 0;
      while (i < b.length) {
        var c = b[i];
        if (c < 0x80) {
          s += String.fromCharCode(c);
          i++;
          continue;
        }
        var need = 0;
        var lo = 0x80;
        var hi = 0xbf;
        var cp = 0;
        if (c >= 0xc2 && c <= 0xdf) { need = 1; cp = c & 0x1f; }
        else if (c >= 0xe0 && c <= 0xef) { need = 2; cp = c & 0xf; if (c === 0xe0) lo = 0xa0; if (c === 0xed) hi = 0x9f; }
        else if (c >= 0xf0 && c <= 0xf4) { need = 3; cp = c & 7; if (c === 0xf0) lo = 0x90; if (c === 0xf4) hi = 0x8f; }
        var j = i + 1;
        var k = 0;
        for (; k < need && j < b.length && b[j] >= lo && b[j] <= hi; k++, j++) {
          cp = (cp << 6) | (b[j] & 0x3f);
          lo = 0x80;
          hi = 0xbf;
        }
        if (!need || k < need) {
          s += '\ufffd';
        } else {
          s += String.fromCodePoint(cp);
        }
        i = j;
      }
      return s;
    }

    function base64Decode(s) {
      var out = [];
      var buf = 0;
      var bits = 0;
      for (var i = 0; i < s.length; i++) {
        var ch = s[i];
        if (ch === '=') break;
        var v = VALUE[ch];
        if (v === undefined) continue;
        buf = ((buf << 6) | v) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
          bits -= 8;
          out.push((buf >> bits) & 255);
        }
      }
      return out;
    }

    function base64Encode(b, alphabet, pad) {
      var s = '';
      for (var i = 0; i < b.length; i += 3) {
        var n = (b[i] << 16) | ((b[i + 1] || 0) << 8) | (b[i + 2] || 0);
        s += alphabet[(n >> 18) & 63] + alphabet[(n >> 12) & 63];
        s += i + 1 < b.length ? alphabet[(n >> 6) & 63] : (pad ? '=' : '');
        s += i + 2 < b.length ? alphabet[n & 63] : (pad ? '=' : '');
      }
      return s;
    }

    // ES5 only (njs, which has its own Buffer, must still parse this file).
    function Buffer() {
      throw new TypeError('use Buffer.from()');
    }
    Buffer.prototype = Object.create(Uint8Array.prototype);

    function make(bytes) {
      var b = new Uint8Array(bytes);
      Object.setPrototypeOf(b, Buffer.prototype);
      return b;
    }

    Buffer.from = function (value, encoding) {
      if (typeof value !== 'string') return make(Array.prototype.slice.call(value));
      var e = (encoding || 'utf8').toLowerCase();
      if (e === 'utf8' || e === 'utf-8') return make(utf8Bytes(value));
      if (e === 'base64' || e === 'base64url') return make(base64Bytes(value, e === 'base64url'));
      if (e === 'hex') {
        var out = [];
        for (var i = 0; i + 1 < value.length; i += 2) {
          var byte = parseInt(value.substr(i, 2), 16);
          if (isNaN(byte)) break;
          out.push(byte);
        }
        return make(out);
      }
      throw new TypeError('Unknown encoding: ' + encoding);
    };

    Buffer.prototype.toString = function (encoding) {
      var e = (encoding || 'utf8').toLowerCase();
      if (e === 'utf8' || e === 'utf-8') return utf8Text(this);
      if (e === 'base64') return base64Text(this, false);
      if (e === 'base64url') return base64Text(this, true);
      if (e === 'hex') {
        var s = '';
        for (var i = 0; i < this.length; i++) s += (this[i] < 16 ? '0' : '') + this[i].toString(16);
        return s;
      }
      throw new TypeError('Unknown encoding: ' + encoding);
    };
    global.Buffer = Buffer;
  })(globalThis);
}
