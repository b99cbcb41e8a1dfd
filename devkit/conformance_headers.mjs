// Loaded into the conformance suite's Node.js process (NODE_OPTIONS=--import <this file>):
// adds the headers named in MCP_CONFORMANCE_HEADERS (a JSON object) to every HTTP request the
// suite sends, because its server mode has no option for headers and an edge in front of a
// server wants a bearer token. The suite sends three ways: Node's fetch (its SDK client) and
// undici's own request (its DNS-rebinding scenario), which both honour undici's global
// dispatcher, so one dispatcher wrapping the default one covers them; and node:http's request
// (its header-validation scenarios, which choose the case of header names), wrapped here.
// A header the suite sets itself (Host, Origin, ...) is left as the suite set it.
import http from 'node:http';
import https from 'node:https';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { pathToFileURL } from 'node:url';

const extra = JSON.parse(process.env.MCP_CONFORMANCE_HEADERS ?? '{}');
const suiteDir = process.env.MCP_CONFORMANCE_SUITE_DIR;
if (!suiteDir) throw new Error('MCP_CONFORMANCE_SUITE_DIR must name the folder the suite is installed in');

// The suite's own undici: the same global-dispatcher symbol as Node's built-in fetch.
const require = createRequire(pathToFileURL(`${suiteDir}/package.json`));
const { Agent, setGlobalDispatcher } = require('undici');

function present(headers, name) {
    const lower = name.toLowerCase();
    if (headers == null) return false;
    if (Array.isArray(headers)) {
        // Flat [name, value, name, value, ...] or [[name, value], ...].
        if (headers.length > 0 && Array.isArray(headers[0])) return headers.some(([k]) => String(k).toLowerCase() === lower);
        return headers.some((item, i) => i % 2 === 0 && String(item).toLowerCase() === lower);
    }
    if (typeof headers[Symbol.iterator] === 'function' && typeof headers.entries === 'function') {
        for (const [k] of headers.entries()) if (String(k).toLowerCase() === lower) return true;
        return false;
    }
    return Object.keys(headers).some((k) => k.toLowerCase() === lower);
}

function withExtra(headers) {
    const missing = Object.entries(extra).filter(([name]) => !present(headers, name));
    if (missing.length === 0) return headers;
    if (headers == null) return Object.fromEntries(missing);
    if (Array.isArray(headers)) {
        if (headers.length > 0 && Array.isArray(headers[0])) return [...headers, ...missing];
        return [...headers, ...missing.flat()];
    }
    if (typeof headers.entries === 'function') return [...headers.entries(), ...missing];
    return { ...headers, ...Object.fromEntries(missing) };
}

setGlobalDispatcher(new Agent().compose((dispatch) => (options, handler) =>
    dispatch({ ...options, headers: withExtra(options.headers) }, handler)));

// node:http(s).request(url?, options?, callback?): the headers live in the options object.
function wrapRequest(module) {
    const original = module.request;
    const wrapped = function request(...args) {
        const at = args.findIndex((arg) => arg !== null && typeof arg === 'object' && !(arg instanceof URL));
        if (at === -1) {
            const options = { headers: withExtra(undefined) };
            const callbackAt = args.findIndex((arg) => typeof arg === 'function');
            if (callbackAt === -1) args.push(options); else args.splice(callbackAt, 0, options);
        } else {
            args[at] = { ...args[at], headers: withExtra(args[at].headers) };
        }
        return original.apply(this, args);
    };
    module.request = wrapped;
    module.get = function get(...args) {
        const req = wrapped.apply(this, args);
        req.end();
        return req;
    };
}
wrapRequest(http);
wrapRequest(https);
syncBuiltinESMExports();
