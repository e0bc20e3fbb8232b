"""An MCP server protected by OAuth2 bearer tokens, for the OAuth peer tests (fastmcp, pinned).

Usage:
    python oauth_mcp_server.py ISSUER

Verifies RS256 JWTs against ISSUER's JWKS (`ISSUER/jwks`), with `iss` = ISSUER and `aud` = this
server's MCP URL; answers 401 with `WWW-Authenticate: Bearer ... resource_metadata=...` and
serves RFC 9728 protected-resource metadata naming ISSUER. Binds 127.0.0.1 on a free port and
prints `listening on http://127.0.0.1:PORT/mcp` on stderr once the socket is bound.

Tools: echo(message) -> "Echo: <message>"; add(a, b) -> a + b.
"""

from __future__ import annotations

import socket
import sys

import uvicorn
from fastmcp import FastMCP
from fastmcp.server.auth import RemoteAuthProvider
from fastmcp.server.auth.providers.jwt import JWTVerifier


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    issuer = argv[0].rstrip("/")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"

    verifier = JWTVerifier(
        jwks_uri=f"{issuer}/jwks",
        issuer=issuer,
        audience=f"{base}/mcp",
        algorithm="RS256",
    )
    auth = RemoteAuthProvider(
        token_verifier=verifier,
        authorization_servers=[issuer],
        base_url=base,
    )
    server = FastMCP("oauth-peer", auth=auth)

    @server.tool(description="Echoes back the input string")
    def echo(message: str) -> str:
        return f"Echo: {message}"

    @server.tool(description="Adds two integers")
    def add(a: int, b: int) -> int:
        return a + b

    app = server.http_app(path="/mcp")
    config = uvicorn.Config(app, log_level="warning")
    print(f"listening on {base}/mcp", file=sys.stderr, flush=True)
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
