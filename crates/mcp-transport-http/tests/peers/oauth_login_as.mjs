// An OAuth2 authorization server on 127.0.0.1 for the login peer test, on the pinned
// `oauth2-mock-server` (real RS256 keys, JWKS at /jwks, OpenID metadata, PKCE checked).
//
// Usage: node oauth_login_as.mjs <oauth2-mock-server dist dir> <token lifetime s>
//
// On top of the mock's defaults:
// - RFC 7591 dynamic client registration at POST /register (public clients);
// - RFC 9207: the metadata advertises `iss` in authorization responses, and they carry it;
// - the token's `aud` is the RFC 8707 `resource` the client asked for, and its lifetime
//   (`exp` and `expires_in`) is the one given;
// - `POST /revoke-refresh-tokens` makes every later refresh answer `invalid_grant`;
// - `GET /counts` answers how many codes and refreshes were exchanged.
// Prints `issuer http://127.0.0.1:PORT` on stderr once listening.

import { pathToFileURL } from "node:url";
import path from "node:path";

const [dist, lifetimeText] = process.argv.slice(2);
const lifetime = Number(lifetimeText);
const { OAuth2Server, Events } = await import(
  pathToFileURL(path.join(dist, "index.mjs")).href
);

const server = new OAuth2Server();
await server.issuer.keys.generate("RS256");
await server.start(0, "127.0.0.1");
const port = server.address().port;
const issuer = `http://127.0.0.1:${port}`;
server.issuer.url = issuer;

const counts = { authorization_code: 0, refresh_token: 0, registrations: 0 };
let revoked = false;

function json(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}

server.service.on(Events.BeforeWellKnownOpenIdConfiguration, (response) => {
  response.body.registration_endpoint = `${issuer}/register`;
  response.body.authorization_response_iss_parameter_supported = true;
  response.body.token_endpoint_auth_methods_supported = ["none"];
  response.body.scopes_supported = ["openid", "offline_access"];
});

server.service.addRoute("POST", "/register", (req, res) => {
  counts.registrations += 1;
  const body = req.body ?? {};
  if (!Array.isArray(body.redirect_uris) || body.redirect_uris.length === 0) {
    json(res, 400, { error: "invalid_redirect_uri" });
    return;
  }
  json(res, 201, {
    client_id: `registered-${counts.registrations}`,
    client_id_issued_at: Math.floor(Date.now() / 1000),
    redirect_uris: body.redirect_uris,
    grant_types: body.grant_types,
    token_endpoint_auth_method: "none",
  });
});

server.service.on(Events.BeforeAuthorizeRedirect, (redirect) => {
  redirect.url.searchParams.set("iss", issuer);
});

server.service.on(Events.BeforeTokenSigning, (token, req) => {
  token.payload.exp = Math.floor(Date.now() / 1000) + lifetime;
  if (req.body?.resource) {
    token.payload.aud = req.body.resource;
  }
});

server.service.on(Events.BeforeResponse, (response, req) => {
  const grant = req.body?.grant_type;
  if (grant === "refresh_token" && revoked) {
    response.statusCode = 400;
    response.body = {
      error: "invalid_grant",
      error_description: "the refresh token was revoked",
    };
    return;
  }
  if (grant in counts) counts[grant] += 1;
  response.body.expires_in = lifetime;
});

server.service.addRoute("GET", "/counts", (_req, res) => json(res, 200, counts));

server.service.addRoute("POST", "/revoke-refresh-tokens", (_req, res) => {
  revoked = true;
  json(res, 200, {});
});

process.stderr.write(`issuer ${issuer}\n`);
