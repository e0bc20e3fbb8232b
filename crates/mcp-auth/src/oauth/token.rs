//! Token requests (RFC 6749: client credentials §4.4, authorization code §4.1.3 with the PKCE
//! verifier, refresh §6) and their answer.

use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use mcp_config::Secret;
use serde_json::Value;
use url::Url;

use super::failure::{Failure, shown};

/// How the client proves its identity at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ClientAuth {
    /// `Authorization: Basic` with the form-encoded id and secret (RFC 6749 §2.3.1).
    Basic,
    /// `client_id` and `client_secret` in the form body.
    Post,
    /// `client_id` and a signed JWT `client_assertion` in the form body (RFC 7523 §2.2).
    PrivateKeyJwt,
    /// `client_id` in the form body and no secret: a public client.
    None,
}

impl ClientAuth {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Basic => "client_secret_basic",
            Self::Post => "client_secret_post",
            Self::PrivateKeyJwt => "private_key_jwt",
            Self::None => "none",
        }
    }
}

/// The grant a token request uses.
#[derive(Clone, Copy)]
pub(crate) enum Grant<'a> {
    /// `client_credentials`.
    ClientCredentials,
    /// `authorization_code`, with the redirect URI of the authorization request and the PKCE
    /// verifier.
    AuthorizationCode {
        code: &'a Secret,
        redirect_uri: &'a str,
        verifier: &'a Secret,
    },
    /// `refresh_token`.
    Refresh { token: &'a Secret },
    /// The RFC 7523 JWT bearer grant with `assertion` (an identity assertion grant, a
    /// workload's token).
    JwtBearer { assertion: &'a Secret },
}

/// RFC 7523 §2.2's `client_assertion_type`.
const JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// RFC 7523 §2.1's `grant_type`.
pub(crate) const JWT_BEARER_GRANT: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// What goes into one token request.
pub(crate) struct TokenRequest<'a> {
    pub(crate) grant: Grant<'a>,
    pub(crate) client_id: &'a str,
    pub(crate) secret: &'a Secret,
    pub(crate) auth: ClientAuth,
    pub(crate) scope: Option<&'a str>,
    pub(crate) resource: Option<&'a str>,
    /// The signed client assertion, for [`ClientAuth::PrivateKeyJwt`].
    pub(crate) assertion: Option<&'a str>,
}

impl TokenRequest<'_> {
    /// The `POST` to `endpoint`.
    pub(crate) fn build(&self, endpoint: &Url) -> Result<http::Request<Bytes>, http::Error> {
        let mut form = form_urlencoded::Serializer::new(String::new());
        match self.grant {
            Grant::ClientCredentials => {
                form.append_pair("grant_type", "client_credentials");
            }
            Grant::AuthorizationCode {
                code,
                redirect_uri,
                verifier,
            } => {
                form.append_pair("grant_type", "authorization_code");
                form.append_pair("code", code.expose());
                form.append_pair("redirect_uri", redirect_uri);
                form.append_pair("code_verifier", verifier.expose());
            }
            Grant::Refresh { token } => {
                form.append_pair("grant_type", "refresh_token");
                form.append_pair("refresh_token", token.expose());
            }
            Grant::JwtBearer { assertion } => {
                form.append_pair("grant_type", JWT_BEARER_GRANT);
                form.append_pair("assertion", assertion.expose());
            }
        }
        if let Some(scope) = self.scope {
            form.append_pair("scope", scope);
        }
        if let Some(resource) = self.resource {
            form.append_pair("resource", resource);
        }
        let mut request = http::Request::post(endpoint.as_str())
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json");
        match self.auth {
            ClientAuth::Basic => {
                let pair = format!(
                    "{}:{}",
                    form_encode(self.client_id),
                    form_encode(self.secret.expose())
                );
                let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
                let mut value = HeaderValue::try_from(format!("Basic {encoded}"))?;
                value.set_sensitive(true);
                request = request.header(AUTHORIZATION, value);
            }
            ClientAuth::Post => {
                form.append_pair("client_id", self.client_id);
                form.append_pair("client_secret", self.secret.expose());
            }
            ClientAuth::PrivateKeyJwt => {
                form.append_pair("client_id", self.client_id);
                form.append_pair("client_assertion_type", JWT_BEARER);
                form.append_pair("client_assertion", self.assertion.unwrap_or_default());
            }
            ClientAuth::None if self.client_id.is_empty() => {}
            ClientAuth::None => {
                form.append_pair("client_id", self.client_id);
            }
        }
        request.body(Bytes::from(form.finish()))
    }
}

fn form_encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A token the endpoint issued.
#[derive(Debug)]
pub(crate) struct Issued {
    /// `Bearer <token>` (or `DPoP <token>` for a DPoP-bound one), marked sensitive.
    pub(crate) header: HeaderValue,
    /// `token_type` is `DPoP`: the token is bound to the proof key (RFC 9449 §5).
    pub(crate) dpop_bound: bool,
    /// `expires_in`, if given.
    pub(crate) expires_in: Option<Duration>,
    /// The access token, and a `refresh_token` if the answer had one: values to scrub from
    /// what servers say later.
    pub(crate) secrets: Vec<Secret>,
    /// The access token.
    pub(crate) access_token: Secret,
    /// `refresh_token`, if given (client credentials never use it).
    pub(crate) refresh_token: Option<Secret>,
    /// `scope`, if given: the scope granted when it differs from the one asked for.
    pub(crate) scope: Option<String>,
}

/// Longest OAuth `error_description` kept in an error.
const MAX_DESCRIPTION: usize = 512;

/// Reads the token endpoint's answer. `what` names the request in errors; `secret` is removed
/// from any text kept from the answer. With `dpop` (the request carried a DPoP proof), token
/// type `DPoP` is accepted too.
pub(crate) fn parse_answer(
    what: &str,
    status: u16,
    body: &[u8],
    secret: &Secret,
    dpop: bool,
) -> Result<Issued, Failure> {
    let json = serde_json::from_slice::<Value>(body)
        .ok()
        .filter(Value::is_object);
    if !(200..300).contains(&status) {
        let Some(json) = json else {
            return Err(Failure::invalid(
                what,
                format!("HTTP {status} without an OAuth error response"),
            ));
        };
        let error = json
            .get("error")
            .and_then(Value::as_str)
            .filter(|e| is_error_code(e))
            .unwrap_or("invalid_response")
            .to_owned();
        let description = json
            .get("error_description")
            .and_then(Value::as_str)
            .map(|d| scrub(d, secret));
        return Err(Failure::Rejected {
            status,
            error,
            description,
        });
    }
    let Some(json) = json else {
        return Err(Failure::invalid(what, "the answer is not a JSON object"));
    };
    let token = json
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Failure::invalid(what, "the answer has no `access_token`"))?;
    let dpop_bound = match json.get("token_type").and_then(Value::as_str) {
        None => false,
        Some(kind) if kind.eq_ignore_ascii_case("bearer") => false,
        Some(kind) if dpop && kind.eq_ignore_ascii_case("dpop") => true,
        Some(kind) => {
            return Err(Failure::invalid(
                what,
                format!(
                    "token type `{}` is not supported (only Bearer)",
                    scrub(kind, secret)
                ),
            ));
        }
    };
    let expires_in = match json.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        Some(_) => None,
    }
    .filter(|s| s.is_finite())
    .map(|s| Duration::from_secs_f64(s.clamp(0.0, 10.0 * 365.0 * 86_400.0)));
    let scheme = if dpop_bound { "DPoP" } else { "Bearer" };
    let mut header = HeaderValue::try_from(format!("{scheme} {token}")).map_err(|_| {
        Failure::invalid(
            what,
            "the access token cannot be sent in an HTTP header (control characters or non-visible bytes)",
        )
    })?;
    header.set_sensitive(true);
    let access_token = Secret::new(token);
    let refresh_token = json
        .get("refresh_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(Secret::new);
    let mut secrets = vec![access_token.clone()];
    secrets.extend(refresh_token.clone());
    let scope = json
        .get("scope")
        .and_then(Value::as_str)
        .map(|s| mcp_config::bounded_text(s, MAX_DESCRIPTION));
    Ok(Issued {
        header,
        dpop_bound,
        expires_in,
        secrets,
        access_token,
        refresh_token,
        scope,
    })
}

/// `issued` under `mode`: with `dpop = true` a token that is not DPoP-bound is an error.
pub(crate) fn require_binding(
    mode: mcp_config::DpopMode,
    what: &str,
    issued: &Issued,
) -> Result<(), Failure> {
    if mode == mcp_config::DpopMode::Required && !issued.dpop_bound {
        return Err(Failure::Dpop(format!(
            "{what}: the authorization server issued a Bearer token, not a DPoP-bound one; \
             `dpop = true` requires DPoP (`dpop = \"preferred\"` accepts bearer tokens)"
        )));
    }
    Ok(())
}

/// RFC 6749 §5.2: `error` is one or more of %x20-21 / %x23-5B / %x5D-7E; short codes only.
fn is_error_code(code: &str) -> bool {
    !code.is_empty()
        && code.len() <= 64
        && code
            .bytes()
            .all(|b| matches!(b, 0x20..=0x21 | 0x23..=0x5B | 0x5D..=0x7E))
}

/// `text` cut to a bounded length, without the client secret and without control characters.
fn scrub(text: &str, secret: &Secret) -> String {
    let mut text = text.to_owned();
    if !secret.expose().is_empty() {
        text = text.replace(secret.expose(), mcp_config::REDACTED);
    }
    mcp_config::bounded_text(&text, MAX_DESCRIPTION)
}

/// The client authentication to use when none is configured: `client_secret_basic` if the
/// metadata lists it (or lists nothing: it is RFC 8414's default), else `client_secret_post`
/// if listed. A server that lists neither cannot take the secret: an error naming what it
/// supports (at most a few of its entries, shortened).
pub(crate) fn choose_auth(supported: Option<&[String]>) -> Result<ClientAuth, String> {
    let Some(supported) = supported else {
        return Ok(ClientAuth::Basic);
    };
    let listed = |name: &str| supported.iter().any(|m| m == name);
    if listed(ClientAuth::Basic.name()) {
        return Ok(ClientAuth::Basic);
    }
    if listed(ClientAuth::Post.name()) {
        return Ok(ClientAuth::Post);
    }
    const SHOWN: usize = 8;
    let mut names: Vec<String> = supported
        .iter()
        .take(SHOWN)
        .map(|m| format!("`{}`", shown(m)))
        .collect();
    if supported.len() > SHOWN {
        names.push(format!("and {} more", supported.len() - SHOWN));
    }
    let names = if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    };
    Err(format!(
        "the token endpoint supports neither client_secret_basic nor client_secret_post \
         (token_endpoint_auth_methods_supported: {names}); set `token_endpoint_auth_method` \
         to one it supports (private_key_jwt takes the PEM private key where the secret goes)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> Secret {
        Secret::from("s3cr3t+/ :x")
    }

    fn request(auth: ClientAuth) -> http::Request<Bytes> {
        let secret = secret();
        TokenRequest {
            grant: Grant::ClientCredentials,
            client_id: "client one",
            secret: &secret,
            auth,
            scope: Some("read write"),
            resource: Some("https://mcp.example/mcp"),
            assertion: Some("h.c.s"),
        }
        .build(&"https://as.example/token".parse().unwrap())
        .unwrap()
    }

    #[test]
    fn basic_puts_form_encoded_credentials_in_the_header() {
        let r = request(ClientAuth::Basic);
        assert_eq!(r.method(), http::Method::POST);
        assert_eq!(r.uri(), "https://as.example/token");
        let auth = r.headers()[AUTHORIZATION].to_str().unwrap();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.strip_prefix("Basic ").unwrap())
            .unwrap();
        assert_eq!(
            String::from_utf8(decoded).unwrap(),
            "client+one:s3cr3t%2B%2F+%3Ax"
        );
        assert!(r.headers()[AUTHORIZATION].is_sensitive());
        assert_eq!(
            std::str::from_utf8(r.body()).unwrap(),
            "grant_type=client_credentials&scope=read+write&resource=https%3A%2F%2Fmcp.example%2Fmcp"
        );
        assert_eq!(
            r.headers()[CONTENT_TYPE],
            "application/x-www-form-urlencoded"
        );
    }

    #[test]
    fn post_puts_credentials_in_the_body() {
        let r = request(ClientAuth::Post);
        assert!(r.headers().get(AUTHORIZATION).is_none());
        let pairs: Vec<(String, String)> = form_urlencoded::parse(r.body())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        assert!(pairs.contains(&("client_id".into(), "client one".into())));
        assert!(pairs.contains(&("client_secret".into(), "s3cr3t+/ :x".into())));
        assert!(pairs.contains(&("grant_type".into(), "client_credentials".into())));
    }

    #[test]
    fn private_key_jwt_sends_the_assertion_and_no_secret() {
        let r = request(ClientAuth::PrivateKeyJwt);
        assert!(r.headers().get(AUTHORIZATION).is_none());
        let body = std::str::from_utf8(r.body()).unwrap();
        assert!(!body.contains("s3cr3t"), "{body}");
        let pairs: Vec<(String, String)> = form_urlencoded::parse(r.body())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        assert!(pairs.contains(&("client_assertion".into(), "h.c.s".into())));
        assert!(pairs.contains(&("client_assertion_type".into(), JWT_BEARER.into())));
        assert!(pairs.contains(&("client_id".into(), "client one".into())));
    }

    fn answer(status: u16, body: &str) -> String {
        match parse_answer("token request", status, body.as_bytes(), &secret(), false) {
            Ok(issued) => format!(
                "ok {} {:?}",
                issued.header.to_str().unwrap(),
                issued.expires_in.map(|d| d.as_secs())
            ),
            Err(Failure::Rejected {
                status,
                error,
                description,
            }) => format!("rejected {status} {error} {description:?}"),
            Err(other) => format!("{}", other.to_error("srv", &Default::default())),
        }
    }

    #[test]
    fn an_issued_answer_names_both_tokens_as_secrets() {
        let body =
            r#"{"access_token":"issued-access-3f9a1c","refresh_token":"issued-refresh-77d0e2"}"#;
        let issued = parse_answer("token request", 200, body.as_bytes(), &secret(), false).unwrap();
        let shown: Vec<&str> = issued.secrets.iter().map(Secret::expose).collect();
        assert_eq!(shown, ["issued-access-3f9a1c", "issued-refresh-77d0e2"]);
    }

    #[test]
    fn a_dpop_token_type_is_taken_only_after_a_proof() {
        let body = br#"{"access_token":"a1","token_type":"DPoP"}"#;
        let issued = parse_answer("token request", 200, body, &secret(), true).unwrap();
        assert!(issued.dpop_bound);
        assert_eq!(issued.header, "DPoP a1");
        let bearer = br#"{"access_token":"a1","token_type":"Bearer"}"#;
        let issued = parse_answer("token request", 200, bearer, &secret(), true).unwrap();
        assert!(!issued.dpop_bound);
        assert!(parse_answer("token request", 200, body, &secret(), false).is_err());
    }

    /// With `dpop = true`, a bearer token is refused: the server does not bind tokens.
    #[test]
    fn a_required_binding_refuses_a_bearer_token() {
        let bearer = br#"{"access_token":"a1","token_type":"Bearer"}"#;
        let issued = parse_answer("token request", 200, bearer, &secret(), true).unwrap();
        let failure =
            require_binding(mcp_config::DpopMode::Required, "token request", &issued).unwrap_err();
        let text = failure.to_error("srv", &Default::default()).to_string();
        assert!(
            text.starts_with("server `srv`: DPoP: token request"),
            "{text}"
        );
        assert!(text.contains("Bearer"), "{text}");
        require_binding(mcp_config::DpopMode::Preferred, "token request", &issued).unwrap();
    }

    #[test]
    fn answers() {
        let cases = [
            (
                200,
                r#"{"access_token":"a1","token_type":"Bearer","expires_in":3600}"#,
                "ok Bearer a1 Some(3600)",
            ),
            (
                200,
                r#"{"access_token":"a1","token_type":"bearer","expires_in":"60"}"#,
                "ok Bearer a1 Some(60)",
            ),
            (200, r#"{"access_token":"a1"}"#, "ok Bearer a1 None"),
            (
                200,
                r#"{"access_token":"a1","expires_in":-5}"#,
                "ok Bearer a1 Some(0)",
            ),
            (
                200,
                r#"{"token_type":"Bearer"}"#,
                "server `srv`: token request: the answer has no `access_token`",
            ),
            (
                200,
                r#"{"access_token":"a1","token_type":"DPoP"}"#,
                "server `srv`: token request: token type `DPoP` is not supported (only Bearer)",
            ),
            (
                200,
                "<html>",
                "server `srv`: token request: the answer is not a JSON object",
            ),
            (
                401,
                r#"{"error":"invalid_client","error_description":"bad secret s3cr3t+/ :x"}"#,
                r#"rejected 401 invalid_client Some("bad secret [REDACTED]")"#,
            ),
            (
                400,
                r#"{"error":"invalid_scope"}"#,
                "rejected 400 invalid_scope None",
            ),
            (
                400,
                r#"{"error":"bad\"code"}"#,
                "rejected 400 invalid_response None",
            ),
            (
                502,
                "gateway",
                "server `srv`: token request: HTTP 502 without an OAuth error response",
            ),
            (
                200,
                r#"{"access_token":"a\nb"}"#,
                "server `srv`: token request: the access token cannot be sent in an HTTP header (control characters or non-visible bytes)",
            ),
        ];
        for (status, body, expected) in cases {
            assert_eq!(answer(status, body), expected, "{status} {body}");
        }
    }
}
