// Loaded into the conformance suite's Node.js process (NODE_OPTIONS=--import <this file>):
// adds the headers named in MCP_CONFORMANCE_HEADERS (a JSON object) to every HTTP request the
// suite sends, because its server mode has no option for headers and an edge in front of a
// server wants a bearer token. The suite sends through undici (Node's fetch, which its SDK
// client uses, and undici's own request, which its DNS-rebinding scenario uses); both honour
// undici's global dispatcher, so one dispatcher wrapping the default one covers every request.
// A header the suite sets itself (Host, Origin, ...) is left as the suite set it.
import { createRequire } from 'node:module';
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
