// An OAuth2 authorization server on 127.0.0.1 for the OAuth peer tests, on the pinned
// `oauth2-mock-server` (real RS256 keys, JWKS at /jwks, OpenID metadata).
//
// Usage: node oauth_as.mjs <oauth2-mock-server dist dir> <client id> <client secret> <token lifetime s>
//
// On top of the mock's defaults:
// - client credentials are checked (client_secret_basic or client_secret_post); anything else
//   gets `invalid_client`, as a real server would;
// - the token's `aud` is the RFC 8707 `resource` the client asked for, and its lifetime
//   (`exp` and `expires_in`) is the one given;
// - the metadata advertises both client-secret methods;
// - `GET /token-requests` answers how many token requests were made (`{"count": n}`).
// Prints `issuer http://127.0.0.1:PORT` on stderr once listening.

import { pathToFileURL } from "node:url";
import path from "node:path";

const [dist, clientId, clientSecret, lifetimeText] = process.argv.slice(2);
const lifetime = Number(lifetimeText);
const { OAuth2Server, Events } = await import(
  pathToFileURL(path.join(dist, "index.mjs")).href
);

const server = new OAuth2Server();
await server.issuer.keys.generate("RS256");
await server.start(0, "127.0.0.1");
const port = server.address().port;
server.issuer.url = `http://127.0.0.1:${port}`;

let requests = 0;

function clientOf(req) {
  const header = req.headers.authorization ?? "";
  if (header.startsWith("Basic ")) {
    const pair = Buffer.from(header.slice(6), "base64").toString("utf8");
    const at = pair.indexOf(":");
    const decode = (s) => decodeURIComponent(s.replace(/\+/g, " "));
    return { id: decode(pair.slice(0, at)), secret: decode(pair.slice(at + 1)) };
  }
  return { id: req.body?.client_id, secret: req.body?.client_secret };
}

server.service.on(Events.BeforeWellKnownOpenIdConfiguration, (response) => {
  response.body.token_endpoint_auth_methods_supported = [
    "client_secret_basic",
    "client_secret_post",
  ];
});

server.service.on(Events.BeforeTokenSigning, (token, req) => {
  const now = Math.floor(Date.now() / 1000);
  token.payload.exp = now + lifetime;
  if (req.body?.resource) {
    token.payload.aud = req.body.resource;
  }
  token.payload.client_id = clientOf(req).id;
});

server.service.addRoute("GET", "/token-requests", (_req, res) => {
  const body = JSON.stringify({ count: requests });
  res.writeHead(200, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
  });
  res.end(body);
});

server.service.on(Events.BeforeResponse, (response, req) => {
  requests += 1;
  const client = clientOf(req);
  if (client.id !== clientId || client.secret !== clientSecret) {
    response.statusCode = 401;
    response.body = {
      error: "invalid_client",
      error_description: "Invalid client credentials",
    };
    return;
  }
  response.body.expires_in = lifetime;
});

process.stderr.write(`issuer ${server.issuer.url}\n`);
