// The official MCP TypeScript SDK client (@modelcontextprotocol/client), starting with no
// token and no client registration, against an MCP URL protected by the dev issuer.
//
//   node oauth_client.mjs '<JSON options>'
//     url                 the MCP endpoint (the local edge)
//     clientMetadataUrl   use it as client id (client ID metadata document); else register dynamically
//     headers             extra headers on every request (e.g. cloudfront-viewer-country)
//     call                {name, arguments}: the tool called once connected (and again after waitForExpirySeconds)
//     waitForExpirySeconds  after the first call, wait this long, then call again (the token expired: refresh)
//     stepUp              {name, arguments}: a tool whose scopes the first token lacks (403 insufficient_scope,
//                         authorized again with them, called again)
//
// The authorization endpoint of the dev issuer approves at once and answers with the
// redirect carrying the code: redirectToAuthorization requests it without following the
// redirect and hands its query (code, state, iss) to transport.finishAuth, as a browser
// landing on the loopback redirect URI would. Prints one JSON object with what happened.
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';

const options = JSON.parse(process.argv[2] ?? '{}');
const REDIRECT_URL = 'http://127.0.0.1/callback';
const report = { authorizations: [], tokenRequests: [], calls: {}, errors: [] };

const extraHeaders = options.headers ?? {};
// Every request, the SDK's own discovery and token requests included, carries the extra headers.
const fetchWithHeaders = async (input, init = {}) => {
    const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
    for (const [name, value] of Object.entries(extraHeaders)) headers.set(name, value);
    const url = input instanceof Request ? input.url : String(input);
    const body = init.body instanceof URLSearchParams ? init.body.toString() : init.body;
    if (typeof body === 'string' && body.includes('grant_type=')) {
        report.tokenRequests.push(new URLSearchParams(body).get('grant_type'));
    }
    return fetch(input, { ...init, headers });
};

class HeadlessProvider {
    constructor(clientMetadataUrl) {
        this.clientMetadataUrl = clientMetadataUrl;
        this._tokens = undefined;
        this._client = undefined;
        this._verifier = undefined;
        this.callback = undefined;
        this.savedTokens = [];
    }
    get redirectUrl() { return REDIRECT_URL; }
    get clientMetadata() {
        return {
            client_name: 'mcp-edge TypeScript SDK e2e client',
            redirect_uris: [REDIRECT_URL],
            grant_types: ['authorization_code', 'refresh_token'],
            response_types: ['code'],
            token_endpoint_auth_method: 'none',
        };
    }
    clientInformation() { return this._client; }
    saveClientInformation(info) { this._client = info; }
    tokens() { return this._tokens; }
    saveTokens(tokens) { this._tokens = tokens; this.savedTokens.push(tokens); }
    saveDiscoveryState(state) { this._discovery = state; }
    discoveryState() { return this._discovery; }
    saveCodeVerifier(verifier) { this._verifier = verifier; }
    codeVerifier() {
        if (!this._verifier) throw new Error('no code verifier saved');
        return this._verifier;
    }
    async redirectToAuthorization(authorizationUrl) {
        report.authorizations.push(authorizationUrl.toString());
        const response = await fetchWithHeaders(authorizationUrl, { redirect: 'manual' });
        const location = response.headers.get('location');
        if (!location) throw new Error(`authorization endpoint answered ${response.status}: ${await response.text()}`);
        const params = new URL(location).searchParams;
        if (params.get('error')) throw new Error(`authorization refused: ${params.get('error')}: ${params.get('error_description')}`);
        this.callback = params;
    }
}

const provider = new HeadlessProvider(options.clientMetadataUrl);
const transportOptions = { authProvider: provider, fetch: fetchWithHeaders };
let transport;

// Run `step`; when it needs an authorization (the first one, or a scope step-up), complete it
// from the redirect the provider captured and run it again.
async function authorized(step) {
    for (let attempt = 0; attempt < 3; attempt++) {
        try {
            return await step();
        } catch (error) {
            if (!(error instanceof UnauthorizedError) || !provider.callback) throw error;
            const callback = provider.callback;
            provider.callback = undefined;
            await transport.finishAuth(callback);  // checks state and iss (RFC 9207), redeems the code
        }
    }
    throw new Error('not authorized after 3 attempts');
}

async function connect() {
    return authorized(async () => {
        const client = new Client({ name: 'mcp-edge-ts-e2e', version: '1.0.0' });
        transport = new StreamableHTTPClientTransport(new URL(options.url), transportOptions);
        await client.connect(transport);
        return client;
    });
}

function outcome(result) {
    return { isError: result.isError ?? false, structuredContent: result.structuredContent ?? null,
             text: result.content?.map(c => c.text).join('') };
}

const call = (client, tool) => client.callTool({ name: tool.name, arguments: tool.arguments ?? {} });

try {
    const client = await connect();
    report.serverVersion = client.getServerVersion();
    report.tools = (await client.listTools()).tools.map(t => t.name).sort();
    if (options.call) report.calls.first = outcome(await call(client, options.call));
    report.clientId = provider.clientInformation()?.client_id;
    if (options.waitForExpirySeconds && options.call) {
        await new Promise(resolve => setTimeout(resolve, options.waitForExpirySeconds * 1000));
        report.calls.after_expiry = outcome(await call(client, options.call));
    }
    if (options.stepUp) {
        report.calls.step_up = outcome(await authorized(() => call(client, options.stepUp)));
    }
    report.tokens = provider.savedTokens.map(t => ({ access: t.access_token.slice(-16), refresh: t.refresh_token?.slice(-16), scope: t.scope }));
    await client.close();
} catch (error) {
    report.errors.push(`${error?.name}: ${error?.message}`);
}
console.log(JSON.stringify(report));
process.exit(report.errors.length ? 1 : 0);
