//! Grants whose assertion comes from elsewhere, on the client-credentials machinery (the same
//! discovery, cache, single flight and fleet store; only the token request differs):
//!
//! - **Enterprise-managed authorization** (SEP-990): the user's identity token is exchanged at
//!   the enterprise identity provider (RFC 8693) for an identity assertion grant
//!   (`urn:ietf:params:oauth:token-type:id-jag`) whose audience is the MCP server's
//!   authorization server; that grant is the assertion of the RFC 7523 JWT bearer grant there.
//! - **Workload identity**: the workload's own token (a projected service-account token) is
//!   the assertion, read again at each exchange since it rotates.
//!
//! Tokens read or received here are remembered like access tokens, so that no error or run
//! output shows them.

use std::io::Read as _;
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use mcp_config::{Secret, ServerSpec, TokenSource, TransportSpec};
use serde_json::Value;
use url::Url;

use super::cache::CredentialKey;
use super::failure::{Failure, shown};
use super::flight::Shared;
use super::provider::ClientCredentials;
use super::registry::AuthRegistry;
use super::token::ClientAuth;
use super::{Config, Endpoint};
use crate::AuthError;

/// The largest token file read (`token_file`, `subject_token_file`): 64 KiB. A projected
/// token is a few KiB; anything larger is refused, naming the file, before it is read whole.
pub const MAX_TOKEN_FILE_BYTES: usize = 64 * 1024;

/// RFC 8693's grant type.
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The identity assertion grant's token type (SEP-990).
const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
/// RFC 8693's token type of an OpenID Connect ID token.
const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";

/// Where a credential's JWT bearer assertion comes from.
pub(crate) enum Assertion {
    /// Exchanged at an identity provider for the user's identity token.
    Enterprise {
        idp_token_url: Url,
        subject_token: TokenSource,
        /// The client at the identity provider, and its secret.
        idp_client: Option<(String, Option<Secret>)>,
        /// The exchange's `audience`, when configured (else the discovered issuer).
        audience: Option<String>,
    },
    /// The workload's token itself.
    Workload { token: TokenSource },
}

impl Assertion {
    /// The setting a token source came from, for errors.
    fn settings(&self) -> (&TokenSource, &'static str, &'static str) {
        match self {
            Self::Enterprise { subject_token, .. } => {
                (subject_token, "subject_token_env", "subject_token_file")
            }
            Self::Workload { token } => (token, "token_env", "token_file"),
        }
    }
}

impl AuthRegistry {
    /// The auth hook of `spec`'s `enterprise` or `workload_identity` table: a JWT bearer
    /// grant at the MCP server's authorization server (discovered from its 401 like for
    /// client credentials), cached, renewed and shared like a client-credentials token.
    /// Client secrets are read now; the assertion at each exchange.
    pub fn federated(&self, spec: &ServerSpec) -> Result<ClientCredentials, AuthError> {
        let server = spec.name.clone();
        let TransportSpec::StreamableHttp(mcp_spec) = &spec.transport else {
            return Err(AuthError::Unsupported {
                server,
                method: "a federated grant over a transport other than HTTP",
            });
        };
        let resolve = |source: &Option<mcp_config::SecretSource>| {
            source
                .as_ref()
                .map(|s| crate::resolve_secret(&server, s, "client_secret"))
                .transpose()
        };
        let (assertion, client_id, secret, scope, resource, issuers, kind) =
            match (&spec.auth.enterprise, &spec.auth.workload_identity) {
                (Some(e), _) => {
                    let idp_secret = resolve(&e.idp_client_secret)?;
                    (
                        Assertion::Enterprise {
                            idp_token_url: e.idp_token_url.clone(),
                            subject_token: e.subject_token.clone(),
                            idp_client: e.idp_client_id.clone().map(|id| (id, idp_secret)),
                            audience: e.audience.clone(),
                        },
                        e.client_id.clone(),
                        resolve(&e.client_secret)?,
                        e.scope.clone(),
                        e.resource.clone(),
                        e.allowed_issuers.clone(),
                        format!("enterprise\n{}\n{:?}", e.idp_token_url, e.subject_token),
                    )
                }
                (None, Some(w)) => (
                    Assertion::Workload {
                        token: w.token.clone(),
                    },
                    w.client_id.clone().unwrap_or_default(),
                    None,
                    w.scope.clone(),
                    w.audience.clone(),
                    w.allowed_issuers.clone(),
                    format!("workload\n{:?}", w.token),
                ),
                (None, None) => {
                    return Err(AuthError::Unsupported {
                        server,
                        method: "a federated grant without `enterprise` or `workload_identity`",
                    });
                }
            };
        // A token in a variable must be there now (the variable is read again at each
        // exchange); a file may appear later.
        if let Assertion::Enterprise {
            subject_token: TokenSource::Env(variable),
            ..
        }
        | Assertion::Workload {
            token: TokenSource::Env(variable),
        } = &assertion
        {
            let (_, setting, _) = assertion.settings();
            let source = mcp_config::SecretSource::Env(variable.clone());
            crate::resolve_secret(&server, &source, setting)?;
        }
        // With a secret, the method the metadata offers; without, a public client.
        let method = secret.is_none().then_some(ClientAuth::None);
        let key = CredentialKey {
            endpoint: format!("{kind}\ndiscover:{}", mcp_spec.url),
            client_id: client_id.clone(),
            secret: secret.clone().unwrap_or_else(|| Secret::new("")),
            scope: scope.clone(),
            resource: resource.clone(),
            method: Some("jwt-bearer"),
            allowed_issuers: issuers.iter().map(Url::to_string).collect(),
            guarded: spec.ssrf_guarded(),
            dpop: mcp_config::DpopMode::Off,
        };
        let share_name = key.share_name();
        let deadline = spec
            .connect_timeout
            .unwrap_or(self.options().default_deadline);
        let shared = self.cache.entry(key, || {
            Arc::new(
                Shared::new(
                    Config {
                        server: server.clone(),
                        client_id,
                        secret: secret.unwrap_or_else(|| Secret::new("")),
                        key: None,
                        method,
                        scope,
                        resource,
                        token_url: None,
                        mcp_url: mcp_spec.url.clone(),
                        allowed_issuers: issuers,
                        guarded: spec.ssrf_guarded(),
                        assertion: Some(Arc::new(assertion)),
                        dpop: mcp_config::DpopMode::Off,
                    },
                    self.fetch_for(spec),
                    self.options().clone(),
                    deadline,
                )
                .with_share(self.share_handle(), share_name),
            )
        });
        Ok(ClientCredentials::new(
            server,
            shared,
            self.cache.clone(),
            spec.secret_values().into(),
        ))
    }
}

impl Shared {
    /// The assertion of one JWT bearer grant at `endpoint`: the workload's token, or the
    /// identity assertion grant the identity provider issues for the user's identity token.
    pub(super) async fn assertion(
        &self,
        source: &Assertion,
        endpoint: &Endpoint,
        resource: Option<&str>,
        scope: Option<&str>,
    ) -> Result<Secret, Failure> {
        let (token, env_key, file_key) = source.settings();
        let token = read_token(token, env_key, file_key).await?;
        self.remember(std::slice::from_ref(&token));
        let Assertion::Enterprise {
            idp_token_url,
            idp_client,
            audience,
            ..
        } = source
        else {
            return Ok(token);
        };
        let audience = audience
            .clone()
            .or_else(|| endpoint.issuer.clone())
            .unwrap_or_else(|| endpoint.token_url.origin().ascii_serialization());
        let resource = resource.map_or_else(
            || super::canonical_resource(&self.config.mcp_url),
            str::to_owned,
        );
        let fail = |message: String| Failure::Exchange {
            provider: shown(idp_token_url),
            grant: TOKEN_EXCHANGE,
            message,
        };
        let request = {
            let mut form = form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", TOKEN_EXCHANGE)
                .append_pair("requested_token_type", ID_JAG)
                .append_pair("subject_token", token.expose())
                .append_pair("subject_token_type", ID_TOKEN)
                .append_pair("audience", &audience)
                .append_pair("resource", &resource);
            if let Some(scope) = scope {
                form.append_pair("scope", scope);
            }
            let mut request = http::Request::post(idp_token_url.as_str())
                .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                .header(ACCEPT, "application/json");
            match idp_client {
                Some((id, Some(secret))) => {
                    let pair = format!("{}:{}", form_encode(id), form_encode(secret.expose()));
                    let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
                    let mut value = HeaderValue::try_from(format!("Basic {encoded}"))
                        .map_err(|_| fail("the client id or secret cannot be sent".into()))?;
                    value.set_sensitive(true);
                    request = request.header(AUTHORIZATION, value);
                }
                Some((id, None)) => {
                    form.append_pair("client_id", id);
                }
                None => {}
            }
            request
                .body(Bytes::from(form.finish()))
                .map_err(|_| fail("the request cannot be built".into()))?
        };
        let what = format!("token exchange at {}", shown(idp_token_url));
        tracing::debug!(idp_token_url = %idp_token_url, %audience, "exchanging the identity token for an identity assertion grant");
        let response = self.token_exchange(&what, request, None).await?;
        let grant = parse_exchange(response.status().as_u16(), response.body()).map_err(fail)?;
        self.remember(std::slice::from_ref(&grant));
        Ok(grant)
    }
}

/// The identity assertion grant in the identity provider's answer, or what is wrong with it
/// (the OAuth error of a refusal; never a token).
fn parse_exchange(status: u16, body: &[u8]) -> Result<Secret, String> {
    let json = serde_json::from_slice::<Value>(body)
        .ok()
        .filter(Value::is_object);
    let text = |key: &str| json.as_ref()?.get(key)?.as_str().map(shown);
    if !(200..300).contains(&status) {
        return Err(match (text("error"), text("error_description")) {
            (Some(error), Some(description)) => {
                format!("refused (HTTP {status}): {error}: {description}")
            }
            (Some(error), None) => format!("refused (HTTP {status}): {error}"),
            _ => format!("HTTP {status} without an OAuth error response"),
        });
    }
    let Some(json) = &json else {
        return Err("the answer is not a JSON object".into());
    };
    match json.get("issued_token_type").and_then(Value::as_str) {
        Some(ID_JAG) => {}
        Some(other) => {
            return Err(format!(
                "issued a token of type `{}`, not an identity assertion grant ({ID_JAG})",
                shown(other)
            ));
        }
        None => return Err(format!("the answer has no `issued_token_type` ({ID_JAG})")),
    }
    json.get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_graphic()))
        .map(Secret::new)
        .ok_or_else(|| "the answer has no usable `access_token`".into())
}

fn form_encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The token of `source`: its variable now, or its file read again (bounded, trimmed).
async fn read_token(
    source: &TokenSource,
    env_key: &'static str,
    file_key: &'static str,
) -> Result<Secret, Failure> {
    match source {
        TokenSource::Env(variable) => {
            let value = std::env::var(variable).unwrap_or_default();
            let value = value.trim();
            if value.is_empty() {
                return Err(Failure::invalid(
                    format!("the token in `{variable}` ({env_key})"),
                    "the variable is unset, empty or only whitespace",
                ));
            }
            Ok(Secret::new(value))
        }
        TokenSource::File(path) => {
            let owned = path.clone();
            let read = tokio::task::spawn_blocking(move || read_file(&owned)).await;
            let problem = match read {
                Ok(Ok(token)) => return Ok(token),
                Ok(Err(problem)) => problem,
                Err(_) => "could not be read (the reading task failed)".to_owned(),
            };
            Err(Failure::TokenFile {
                path: path.clone(),
                setting: file_key,
                problem,
            })
        }
        _ => Err(Failure::invalid(
            format!("the token ({env_key}, {file_key})"),
            "this token source is not supported",
        )),
    }
}

/// A token file's trimmed contents, at most [`MAX_TOKEN_FILE_BYTES`]; else what is wrong.
fn read_file(path: &Path) -> Result<Secret, String> {
    let file = std::fs::File::open(path).map_err(|e| io_problem(&e))?;
    let limit = MAX_TOKEN_FILE_BYTES as u64;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_problem(&e))?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "is larger than {MAX_TOKEN_FILE_BYTES} bytes (MAX_TOKEN_FILE_BYTES); refused"
        ));
    }
    let text = std::str::from_utf8(&bytes).map_err(|_| "is not UTF-8 text".to_owned())?;
    let token = text.trim();
    if token.is_empty() {
        return Err("is empty".to_owned());
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("holds characters a token never has (spaces, control characters)".into());
    }
    Ok(Secret::new(token))
}

fn io_problem(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::NotFound => "does not exist".to_owned(),
        std::io::ErrorKind::PermissionDenied => "cannot be read (permission denied)".to_owned(),
        _ => format!("cannot be read: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn exchange_answers() {
        let ok = format!(r#"{{"access_token":"h.c.s","issued_token_type":"{ID_JAG}"}}"#);
        assert_eq!(
            parse_exchange(200, ok.as_bytes()).unwrap().expose(),
            "h.c.s"
        );
        let cases = [
            (
                400,
                r#"{"error":"invalid_grant","error_description":"bad token"}"#,
                "refused (HTTP 400): invalid_grant: bad token",
            ),
            (502, "oops", "HTTP 502 without an OAuth error response"),
            (
                200,
                r#"{"access_token":"t","issued_token_type":"urn:ietf:params:oauth:token-type:access_token"}"#,
                "issued a token of type `urn:ietf:params:oauth:token-type:access_token`, not an identity assertion grant (urn:ietf:params:oauth:token-type:id-jag)",
            ),
            (200, "[]", "the answer is not a JSON object"),
        ];
        for (status, body, expected) in cases {
            assert_eq!(
                parse_exchange(status, body.as_bytes()).unwrap_err(),
                expected
            );
        }
    }

    #[test]
    fn token_files() {
        let dir = std::env::temp_dir().join(format!("mcp-auth-token-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, content: &[u8]| -> PathBuf {
            let path = dir.join(name);
            std::fs::write(&path, content).unwrap();
            path
        };
        assert_eq!(
            read_file(&file("ok", b" eyJ.a.b\n")).unwrap().expose(),
            "eyJ.a.b"
        );
        assert_eq!(read_file(&file("empty", b" \n")).unwrap_err(), "is empty");
        assert_eq!(
            read_file(&dir.join("absent")).unwrap_err(),
            "does not exist"
        );
        let big = vec![b'a'; MAX_TOKEN_FILE_BYTES + 1];
        assert!(
            read_file(&file("big", &big))
                .unwrap_err()
                .contains("larger than 65536")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
