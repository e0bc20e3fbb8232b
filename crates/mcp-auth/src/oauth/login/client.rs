//! Which client a login uses: a pre-registered one (`client_id` in the configuration), a
//! client ID metadata document (SEP-991) when the server supports them, else one registered
//! on the spot (RFC 7591 dynamic client registration).

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use mcp_config::Secret;
use serde_json::{Value, json};
use url::Url;

use super::super::discovery::{Discovered, Discovery, exchange};
use super::super::failure::{Failure, shown};
use super::super::token::{ClientAuth, choose_auth};
use mcp_config::{OAuthLogin, TokenEndpointAuthMethod};

/// The name a registered client shows the user on the consent page.
pub(crate) const CLIENT_NAME: &str = "mcp-agent";

/// The client of one login.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    pub(crate) client_id: String,
    /// The secret, for `client_secret_basic` / `client_secret_post`.
    pub(crate) secret: Option<Secret>,
    pub(crate) auth: ClientAuth,
    /// Registered now: its secret (if any) is stored with the login.
    pub(crate) registered: bool,
}

/// How the client was chosen, for the log.
pub(crate) fn describe(client: &Client, settings: &OAuthLogin) -> &'static str {
    if client.registered {
        "registered dynamically (RFC 7591)"
    } else if settings.client_id.is_some() {
        "pre-registered"
    } else {
        "client ID metadata document"
    }
}

/// The client for a login to the authorization server `found`: pre-registered, else a
/// metadata document, else dynamic registration; else an error saying what to configure.
pub(crate) async fn choose(
    discovery: &Discovery<'_>,
    found: &Discovered,
    settings: &OAuthLogin,
    secret: Option<&Secret>,
    redirect_uri: &Url,
    scope: Option<&str>,
) -> Result<Client, Failure> {
    let metadata = &found.metadata;
    if let Some(client_id) = &settings.client_id {
        let auth = match (settings.token_endpoint_auth_method, secret) {
            (Some(TokenEndpointAuthMethod::ClientSecretBasic), _) => ClientAuth::Basic,
            (Some(TokenEndpointAuthMethod::ClientSecretPost), _) => ClientAuth::Post,
            (_, None) => ClientAuth::None,
            (_, Some(_)) => choose_auth(metadata.token_endpoint_auth_methods_supported.as_deref())
                .map_err(Failure::Discovery)?,
        };
        return Ok(Client {
            client_id: client_id.clone(),
            secret: secret.cloned(),
            auth,
            registered: false,
        });
    }
    let documents = metadata.client_id_metadata_document_supported == Some(true);
    if let (true, Some(url)) = (documents, &settings.client_metadata_url) {
        return Ok(Client {
            client_id: url.to_string(),
            secret: None,
            auth: ClientAuth::None,
            registered: false,
        });
    }
    if metadata.registration_endpoint.is_some() {
        return register(discovery, found, redirect_uri, scope).await;
    }
    let hint = if documents {
        "set `client_metadata_url` (the HTTPS URL of this client's metadata document) or `client_id`"
    } else {
        "set `client_id` (a client registered with it) in the server's `oauth` table"
    };
    Err(Failure::Discovery(format!(
        "the authorization server `{}` offers neither dynamic client registration nor {}client ID metadata documents; {hint}",
        shown(&found.issuer),
        if documents { "a usable " } else { "" }
    )))
}

/// The OpenID `application_type` of a client coming back to `redirect_uri` (SEP-837):
/// `native` for a loopback or private-scheme redirect (an application on the user's
/// machine), `web` otherwise.
fn application_type(redirect_uri: &Url) -> &'static str {
    let loopback = match redirect_uri.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    if loopback || !matches!(redirect_uri.scheme(), "http" | "https") {
        "native"
    } else {
        "web"
    }
}

/// RFC 7591: registers a public client for the authorization code grant with refresh tokens.
async fn register(
    discovery: &Discovery<'_>,
    found: &Discovered,
    redirect_uri: &Url,
    scope: Option<&str>,
) -> Result<Client, Failure> {
    let endpoint = discovery.endpoint(
        found.metadata.registration_endpoint.as_deref(),
        "registration_endpoint",
        &found.metadata_url,
    )?;
    let mut body = json!({
        "client_name": CLIENT_NAME,
        "redirect_uris": [redirect_uri.as_str()],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": application_type(redirect_uri),
    });
    if let Some(scope) = scope {
        body["scope"] = Value::from(scope);
    }
    let what = format!("client registration at {endpoint}");
    let request = http::Request::post(endpoint.as_str())
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json")
        .body(Bytes::from(body.to_string()))
        .map_err(|_| Failure::invalid(&what, "the URL cannot be requested"))?;
    tracing::debug!(registration_endpoint = %endpoint, "registering an OAuth client (RFC 7591)");
    let response = exchange(
        discovery.http,
        discovery.timeout,
        discovery.max_response_bytes,
        &what,
        request,
    )
    .await?;
    read_registration(&what, response.status().as_u16(), response.body())
}

/// Reads a registration answer (RFC 7591 §3.2): `client_id`, and an optional
/// `client_secret` with the method the server chose for it.
pub(crate) fn read_registration(what: &str, status: u16, body: &[u8]) -> Result<Client, Failure> {
    let json = serde_json::from_slice::<Value>(body)
        .ok()
        .filter(Value::is_object);
    if !(200..300).contains(&status) {
        let detail = json
            .as_ref()
            .and_then(|j| j.get("error").and_then(Value::as_str))
            .map(|error| {
                let description = json
                    .as_ref()
                    .and_then(|j| j.get("error_description").and_then(Value::as_str))
                    .map(|d| format!(": {}", shown(d)))
                    .unwrap_or_default();
                format!("{}{description}", shown(error))
            })
            .unwrap_or_else(|| "no OAuth error in the answer".to_owned());
        return Err(Failure::invalid(
            what,
            format!("refused (HTTP {status}): {detail}"),
        ));
    }
    let json = json.ok_or_else(|| Failure::invalid(what, "the answer is not a JSON object"))?;
    let client_id = json
        .get("client_id")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| Failure::invalid(what, "the answer has no `client_id`"))?
        .to_owned();
    let secret = json
        .get("client_secret")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(Secret::new);
    let method = json
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str);
    let auth = match (method, &secret) {
        (Some("client_secret_post"), Some(_)) => ClientAuth::Post,
        (Some("client_secret_basic"), Some(_)) | (None, Some(_)) => ClientAuth::Basic,
        (Some("none") | None, None) => ClientAuth::None,
        (Some(other), _) => {
            return Err(Failure::invalid(
                what,
                format!(
                    "the server registered the client for token endpoint auth method `{}`{}, which this client cannot use",
                    shown(other),
                    if secret.is_none() {
                        " without a secret"
                    } else {
                        ""
                    }
                ),
            ));
        }
    };
    Ok(Client {
        client_id,
        secret,
        auth,
        registered: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(status: u16, body: Value) -> Result<(String, Option<String>, &'static str), String> {
        read_registration("client registration", status, body.to_string().as_bytes())
            .map(|c| {
                (
                    c.client_id,
                    c.secret.map(|s| s.expose().to_owned()),
                    c.auth.name(),
                )
            })
            .map_err(|f| f.to_error("srv", &Default::default()).to_string())
    }

    #[test]
    fn loopback_and_private_scheme_redirects_are_native_apps() {
        for (uri, kind) in [
            ("http://127.0.0.1:8765/callback", "native"),
            ("http://localhost:9/callback", "native"),
            ("http://[::1]:9/callback", "native"),
            ("com.example.app:/callback", "native"),
            ("https://app.example.com/callback", "web"),
        ] {
            assert_eq!(application_type(&Url::parse(uri).unwrap()), kind, "{uri}");
        }
    }

    #[test]
    fn registration_answers() {
        assert_eq!(
            read(
                201,
                json!({"client_id": "c1", "token_endpoint_auth_method": "none"})
            )
            .unwrap(),
            ("c1".into(), None, "none")
        );
        assert_eq!(
            read(201, json!({"client_id": "c1", "client_secret": "s1"})).unwrap(),
            ("c1".into(), Some("s1".into()), "client_secret_basic")
        );
        assert_eq!(
            read(
                200,
                json!({"client_id": "c1", "client_secret": "s1", "token_endpoint_auth_method": "client_secret_post"})
            )
            .unwrap(),
            ("c1".into(), Some("s1".into()), "client_secret_post")
        );
        let err = read(201, json!({"client_secret": "s1"})).unwrap_err();
        assert_eq!(
            err,
            "server `srv`: client registration: the answer has no `client_id`"
        );
        let err = read(
            400,
            json!({"error": "invalid_redirect_uri", "error_description": "loopback only"}),
        )
        .unwrap_err();
        assert_eq!(
            err,
            "server `srv`: client registration: refused (HTTP 400): invalid_redirect_uri: loopback only"
        );
        let err = read(
            201,
            json!({"client_id": "c1", "token_endpoint_auth_method": "private_key_jwt"}),
        )
        .unwrap_err();
        assert!(err.contains("`private_key_jwt` without a secret"), "{err}");
    }
}
