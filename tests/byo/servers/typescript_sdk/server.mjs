// An MCP server written the way the official TypeScript SDK (1.x) documents one, on an Express
// app at /api/mcp: its defaults kept, so it keeps sessions (sessionIdGenerator: randomUUID) and
// its app (createMcpExpressApp) answers 403 to any Host but localhost. What a user changes for
// Lambda comes from the environment (this file stays as written): MCP_STATELESS=1 (a new server
// and transport per request, sessionIdGenerator: undefined), MCP_ALLOWED_HOSTS='*' (no Host
// check) and PORT.
import { randomUUID } from 'node:crypto';
import express from 'express';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod/v4';

const stateless = process.env.MCP_STATELESS === '1';
const PORT = Number(process.env.PORT || 3000);

function getServer() {
  const server = new McpServer({ name: 'byo-typescript', version: '1.0.0' });
  server.registerTool('add', {
    title: 'Addition Tool',
    description: 'Add two numbers',
    inputSchema: { a: z.number(), b: z.number() },
  }, async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }));
  return server;
}

let app;
if (process.env.MCP_ALLOWED_HOSTS === '*') {
  app = express();
  app.use(express.json());
} else {
  app = createMcpExpressApp();
}

const transports = {};
app.post('/api/mcp', async (req, res) => {
  if (stateless) {
    const server = getServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => { transport.close(); server.close(); });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
    return;
  }
  const sessionId = req.headers['mcp-session-id'];
  let transport = sessionId ? transports[sessionId] : undefined;
  if (!transport && !sessionId && isInitializeRequest(req.body)) {
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => { transports[id] = transport; },
    });
    await getServer().connect(transport);
  }
  if (!transport) {
    res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null });
    return;
  }
  await transport.handleRequest(req, res, req.body);
});

app.listen(PORT, '127.0.0.1', (error) => {
  if (error) { console.error(error); process.exit(1); }
  console.log(`MCP server listening on http://127.0.0.1:${PORT}/api/mcp`);
});
