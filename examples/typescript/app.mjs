// An MCP server written with the official TypeScript SDK (@modelcontextprotocol/sdk),
// as a user would write it, deployable unchanged.
//
//   PORT=8080 node app.mjs
//
// Streamable HTTP, stateless (a new server and transport for every request, no session id),
// at /mcp on 127.0.0.1:$PORT (the Lambda Web Adapter forwards to that port).
import { createHash } from 'node:crypto';
import os from 'node:os';

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import express from 'express';
import * as z from 'zod/v4';

const PORT = Number(process.env.PORT ?? 8080);
const MCP_PATH = '/mcp';
const STARTED_AT = performance.now();

// Host values this server answers (DNS-rebinding protection): a Lambda Function URL's host,
// <url-id>.lambda-url.<region>.on.aws (the id is only known once the function exists, hence a
// pattern), and loopback for local runs and the adapter's readiness check.
const FUNCTION_URL_HOST = /^[a-z0-9]+\.lambda-url\.[a-z0-9-]+\.on\.aws$/;
const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

function hostAllowed(hostHeader) {
    let url;
    try {
        url = new URL(`http://${hostHeader}`);
    } catch {
        return false;
    }
    return LOOPBACK_HOSTS.has(url.hostname) || FUNCTION_URL_HOST.test(url.hostname);
}

function jsonRpcError(res, status, message) {
    res.status(status).json({ jsonrpc: '2.0', error: { code: -32000, message }, id: null });
}

// A request from a browser carries Origin; this server has no browser clients of its own, so
// it serves only same-origin ones (what an allow-list of trusted origins would widen).
function originAllowed(origin, hostHeader) {
    if (origin === undefined) return true;
    try {
        return new URL(origin).host === hostHeader;
    } catch {
        return false;
    }
}

function buildServer() {
    const server = new McpServer({ name: 'text-tools', version: '1.0.0' });

    server.registerTool('text_stats', {
        description: 'Count the characters, words and lines of a text, and name its most frequent words.',
        inputSchema: { text: z.string(), top: z.number().int().min(0).default(3) },
        outputSchema: {
            characters: z.number().int().describe('Unicode code points in the text'),
            words: z.number().int(),
            lines: z.number().int(),
            top_words: z.array(z.object({ word: z.string(), count: z.number().int() }))
                .describe('The most frequent words, most frequent first'),
        },
    }, async ({ text, top }) => {
        const words = text.toLowerCase().match(/[\p{L}\p{N}_']+/gu) ?? [];
        const counts = new Map();
        for (const word of words) counts.set(word, (counts.get(word) ?? 0) + 1);
        const stats = {
            characters: [...text].length,
            words: words.length,
            lines: text === '' ? 0 : text.replace(/(\r\n|\r|\n)$/, '').split(/\r\n|\r|\n/).length,
            // Map keeps first-seen order and sort is stable: ties stay in order of appearance.
            top_words: [...counts].sort((a, b) => b[1] - a[1]).slice(0, top).map(([word, count]) => ({ word, count })),
        };
        return { content: [{ type: 'text', text: JSON.stringify(stats) }], structuredContent: stats };
    });

    server.registerTool('hash_rounds', {
        description: 'SHA-256 the text, then the digest again, `rounds` times in all; reports progress as it goes.',
        inputSchema: { text: z.string(), rounds: z.number().int().min(1).max(100_000).default(1000) },
    }, async ({ text, rounds }, extra) => {
        const progressToken = extra._meta?.progressToken;
        const step = Math.max(Math.floor(rounds / 4), 1);
        let digest = Buffer.from(text, 'utf8');
        for (let done = 1; done <= rounds; done++) {
            digest = createHash('sha256').update(digest).digest();
            if (progressToken !== undefined && (done % step === 0 || done === rounds)) {
                await extra.sendNotification({
                    method: 'notifications/progress',
                    params: { progressToken, progress: done, total: rounds, message: `${done} of ${rounds} rounds` },
                });
            }
        }
        return { content: [{ type: 'text', text: digest.toString('hex') }] };
    });

    server.registerTool('admin_runtime_info', {
        description: 'What this server runs on (for operators): versions, region, process uptime.',
        inputSchema: {},
    }, async () => {
        const info = {
            node: process.versions.node,
            machine: os.machine(),
            region: process.env.AWS_REGION ?? 'local',
            uptime_s: Math.round(performance.now() - STARTED_AT) / 1000,
        };
        return { content: [{ type: 'text', text: JSON.stringify(info) }] };
    });

    return server;
}

const app = express();
app.use((req, res, next) => {
    if (!hostAllowed(req.headers.host ?? '')) return jsonRpcError(res, 421, 'Misdirected Request: Host not served');
    if (!originAllowed(req.headers.origin, req.headers.host)) return jsonRpcError(res, 403, 'Forbidden Origin');
    next();
});
// Lambda@Edge forwards bodies up to 1 MB to the origin; express.json's default is 100 kB.
app.use(express.json({ limit: '1mb' }));

app.post(MCP_PATH, async (req, res) => {
    const server = buildServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
        transport.close();
        server.close();
    });
    try {
        await server.connect(transport);
        await transport.handleRequest(req, res, req.body);
    } catch (error) {
        console.error('error handling MCP request:', error);
        if (!res.headersSent) {
            res.status(500).json({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal server error' }, id: null });
        }
    }
});

// Stateless: no standalone SSE stream to open (GET) and no session to end (DELETE). An open
// GET stream would also hold a Lambda invocation until its timeout.
app.all(MCP_PATH, (req, res) => {
    res.set('Allow', 'POST');
    jsonRpcError(res, 405, 'Method not allowed.');
});

app.listen(PORT, '127.0.0.1', (error) => {
    if (error) {
        console.error('failed to start:', error);
        process.exit(1);
    }
    console.log(`MCP server listening on http://127.0.0.1:${PORT}${MCP_PATH}`);
});
