"""A client on the official Python MCP SDK, run by mcp-serve's tests against served tools.

Usage:
    python client.py MODE stdio COMMAND [ARG...]
    python client.py MODE http URL [TOKEN]
    python client.py MODE listen URL [TOKEN]

MODE is the SDK's negotiation mode: `legacy` (the 2025-11-25 initialize handshake), `auto`
(probe `server/discover`, fall back to the handshake) or a modern revision such as
`2026-07-28` (adopted without a probe, stateless over HTTP).

It lists the tools, calls every tool named in the JSON object on stdin ({"tool": {args}}),
and prints one JSON object on stdout: the negotiated protocol version, the server's name,
the tool names, and per call its structured content, text and isError (or the protocol
error's message).

With `GW_ELICIT` set to a JSON object, the client declares elicitation and accepts every
request with that object as its content (else it declares none).

`listen` (2026-07-28) opens `subscriptions/listen` for tool-list changes over HTTP, prints
`subscribed <honored filter>` once acknowledged, then one `event <type>` line per change,
and `closed` when the server ends the subscription gracefully.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import os

import anyio

from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def run(client: Client, calls: dict[str, Any]) -> dict[str, Any]:
    listed = await client.list_tools()
    report: dict[str, Any] = {
        "protocol_version": client.protocol_version,
        "server": client.server_info.name if client.server_info else None,
        "tools": [tool.name for tool in listed.tools],
        "calls": {},
    }
    for name, arguments in calls.items():
        try:
            result = await client.call_tool(name, arguments)
        except Exception as error:  # a protocol error: reported, not raised
            report["calls"][name] = {"error": str(error)}
            continue
        report["calls"][name] = {
            "structured": result.structured_content,
            "text": "\n".join(part.text for part in result.content if part.type == "text"),
            "is_error": result.is_error,
        }
    return report


def elicitation() -> dict[str, Any]:
    """The client's elicitation callback, when `GW_ELICIT` gives the content to accept with."""
    content = os.environ.get("GW_ELICIT")
    if content is None:
        return {}

    async def accept(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content=json.loads(content))

    return {"elicitation_callback": accept}


async def main() -> None:
    mode, transport, *rest = sys.argv[1:]
    calls = json.loads(sys.stdin.read() or "{}")
    extra = elicitation()
    if transport == "stdio":
        params = StdioServerParameters(command=rest[0], args=rest[1:])
        async with Client(params, mode=mode, **extra) as client:
            report = await run(client, calls)
    elif transport == "http":
        url = rest[0]
        headers = {"Authorization": f"Bearer {rest[1]}"} if len(rest) > 1 else None
        async with create_mcp_http_client(headers=headers) as http:
            transport_ = streamable_http_client(url, http_client=http)
            async with Client(transport_, mode=mode, **extra) as client:
                report = await run(client, calls)
    elif transport == "listen":
        url = rest[0]
        headers = {"Authorization": f"Bearer {rest[1]}"} if len(rest) > 1 else None
        async with create_mcp_http_client(headers=headers) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                async with client.listen(tools_list_changed=True) as subscription:
                    honored = subscription.honored
                    shown = honored.model_dump(by_alias=True, exclude_none=True) if honored else None
                    print("subscribed", json.dumps(shown), flush=True)
                    async for event in subscription:
                        print("event", type(event).__name__, flush=True)
                print("closed", flush=True)
        return
    else:
        raise SystemExit(f"unknown transport {transport!r}")
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main)
