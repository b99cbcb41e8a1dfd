"""An MCP server written the way the official Python SDK's docs write a low-level server
mounted in an existing Starlette app (with the app's own /healthz route): its defaults kept,
so it is stateful, checks Host (127.0.0.1/localhost only) and listens on port 8000. What a
user changes for Lambda comes from the environment (``server.py`` itself stays as written):
``MCP_STATELESS=1``, ``MCP_ALLOWED_HOSTS`` (``*``: no Host check) and ``PORT``."""

import contextlib
import os

import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route


async def list_tools(ctx, params) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool(
        name="add", description="Add two integers",
        input_schema={"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                      "required": ["a", "b"]})])


async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    total = int(arguments["a"]) + int(arguments["b"])
    return types.CallToolResult(content=[types.TextContent(type="text", text=str(total))])


server = Server("lowlevel-demo", on_list_tools=list_tools, on_call_tool=call_tool)


def security() -> TransportSecuritySettings | None:
    allowed = os.environ.get("MCP_ALLOWED_HOSTS")
    if allowed == "*":
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return None  # the SDK's default: 127.0.0.1/localhost only


mcp_app = server.streamable_http_app(stateless_http=os.environ.get("MCP_STATELESS") == "1",
                                     transport_security=security())


async def healthz(request: Request) -> PlainTextResponse:
    return PlainTextResponse("ok")


@contextlib.asynccontextmanager
async def lifespan(app: Starlette):
    async with server.session_manager.run():
        yield


app = Starlette(routes=[Route("/healthz", healthz), Mount("/", app=mcp_app)], lifespan=lifespan)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
