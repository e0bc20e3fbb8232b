"""A small MCP server on the official Python SDK, used as a test peer by mcp-agent.

Built with the SDK's decorator server API (`MCPServer`, named `FastMCP` before mcp 2.0).

Usage:
    python server.py stdio
    python server.py http PORT      # streamable HTTP on http://127.0.0.1:PORT/mcp

Over HTTP it prints `listening on http://127.0.0.1:PORT/mcp` on stderr once the socket is
bound (PORT 0 picks a free port, and the line names it), so a test can wait for that line
instead of polling or sleeping.

Tools:
    echo(message)         -> "Echo: <message>"                      (text)
    add(a, b)             -> a + b                                   (structured: {"result": n})
    weather(city)         -> {"city", "temperature", "conditions"}  (structured, object schema)
    fail(message)         -> a tool error (isError: true) with the message

Resources and prompts:
    info://about          -> a text resource (text/plain)
    note://{name}         -> a resource template: "Note <name>"
    review(code, language="rust")  -> a prompt: one user message naming both
"""

from __future__ import annotations

import sys

from pydantic import BaseModel, Field

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError


class Weather(BaseModel):
    """Simulated weather for a city."""

    city: str
    temperature: float = Field(description="Temperature in celsius")
    conditions: str


_WEATHER = {
    "Paris": (18.5, "Cloudy"),
    "Seoul": (24.0, "Sunny"),
    "Oslo": (7.0, "Light rain"),
}

server = MCPServer(
    "py-peer",
    version="1.0.0",
    instructions="A test peer on the official Python MCP SDK.",
    log_level="WARNING",
)


@server.tool(description="Echoes back the input string")
def echo(message: str) -> str:
    return f"Echo: {message}"


@server.tool(description="Adds two integers")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Simulated weather for Paris, Seoul or Oslo")
def weather(city: str) -> Weather:
    if city not in _WEATHER:
        raise ToolError(f"unknown city: {city}")
    temperature, conditions = _WEATHER[city]
    return Weather(city=city, temperature=temperature, conditions=conditions)


@server.tool(description="Always fails with the given message")
def fail(message: str) -> str:
    raise ToolError(message)


@server.resource("info://about", name="about", description="What this peer is", mime_type="text/plain")
def about() -> str:
    return "py-peer: a test peer on the official Python MCP SDK"


@server.resource("note://{name}", description="A note by name", mime_type="text/plain")
def note(name: str) -> str:
    return f"Note {name}"


@server.prompt(description="Asks for a code review")
def review(code: str, language: str = "rust") -> str:
    return f"Review this {language} code: {code}"


def _serve_http(port: int) -> None:
    import socket

    import uvicorn

    # Bind before serving, so port 0 works and the announced URL is already connectable.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    bound = sock.getsockname()[1]
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    print(f"listening on http://127.0.0.1:{bound}/mcp", file=sys.stderr, flush=True)
    uvicorn.Server(config).run(sockets=[sock])


def main(argv: list[str]) -> int:
    if len(argv) >= 1 and argv[0] == "stdio":
        server.run("stdio")
        return 0
    if len(argv) == 2 and argv[0] == "http":
        _serve_http(int(argv[1]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
