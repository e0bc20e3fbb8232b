//! A login's serialised form, shared by the stores that keep one: the file store (a private
//! file) and the fleet's shared store (a sealed entry). Secrets are plain text here, so a
//! record is only ever written where it is protected, and never logged.

use mcp_config::Secret;
use serde::{Deserialize, Serialize};

use super::store::StoredLogin;

/// The fields of a [`StoredLogin`], secrets as text. Absent options are left out when
/// written and read as `None` (also from `null`).
#[derive(Serialize, Deserialize)]
pub(crate) struct LoginRecord {
    server: String,
    server_url: String,
    issuer: String,
    client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_secret: Option<String>,
    token_endpoint_auth_method: String,
    token_endpoint: String,
    resource: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    scope: Option<String>,
    access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    refresh_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<u64>,
    obtained_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dpop_key: Option<String>,
}

impl From<&StoredLogin> for LoginRecord {
    fn from(login: &StoredLogin) -> Self {
        Self {
            server: login.server.clone(),
            server_url: login.server_url.clone(),
            issuer: login.issuer.clone(),
            client_id: login.client_id.clone(),
            client_secret: login.client_secret.as_ref().map(|s| s.expose().to_owned()),
            token_endpoint_auth_method: login.token_endpoint_auth_method.clone(),
            token_endpoint: login.token_endpoint.clone(),
            resource: login.resource.clone(),
            scope: login.scope.clone(),
            access_token: login.access_token.expose().to_owned(),
            refresh_token: login.refresh_token.as_ref().map(|s| s.expose().to_owned()),
            expires_at: login.expires_at,
            obtained_at: login.obtained_at,
            dpop_key: login.dpop_key.as_ref().map(|s| s.expose().to_owned()),
        }
    }
}

impl From<LoginRecord> for StoredLogin {
    fn from(r: LoginRecord) -> Self {
        Self {
            server: r.server,
            server_url: r.server_url,
            issuer: r.issuer,
            client_id: r.client_id,
            client_secret: r.client_secret.map(Secret::new),
            token_endpoint_auth_method: r.token_endpoint_auth_method,
            token_endpoint: r.token_endpoint,
            resource: r.resource,
            scope: r.scope,
            access_token: Secret::new(r.access_token),
            refresh_token: r.refresh_token.map(Secret::new),
            expires_at: r.expires_at,
            obtained_at: r.obtained_at,
            dpop_key: r.dpop_key.map(Secret::new),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_carries_every_field_both_ways_and_reads_nulls_as_absent() {
        let mut login = StoredLogin::new(
            "files",
            "https://files.example/mcp",
            "https://as.example",
            "client",
            "https://as.example/token",
            "https://files.example/mcp",
            Secret::new("access-1"),
        );
        login.client_secret = Some(Secret::new("issued-secret"));
        login.scope = Some("files:read".into());
        login.refresh_token = Some(Secret::new("refresh-1"));
        login.expires_at = Some(1_900_000_000);
        login.dpop_key = Some(Secret::new("pkcs8-b64"));
        let text = serde_json::to_string(&LoginRecord::from(&login)).unwrap();
        let back: StoredLogin = serde_json::from_str::<LoginRecord>(&text).unwrap().into();
        assert_eq!(back.client_secret.unwrap().expose(), "issued-secret");
        assert_eq!(back.refresh_token.unwrap().expose(), "refresh-1");
        assert_eq!(back.access_token.expose(), login.access_token.expose());
        assert_eq!(back.scope, login.scope);
        assert_eq!(back.expires_at, login.expires_at);
        assert_eq!(back.obtained_at, login.obtained_at);
        assert_eq!(back.token_endpoint_auth_method, "none");
        assert_eq!(back.dpop_key.unwrap().expose(), "pkcs8-b64");

        // Written by a store that spelled absent fields as `null`: still read.
        let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
        value["scope"] = serde_json::Value::Null;
        value["refresh_token"] = serde_json::Value::Null;
        let back: StoredLogin = serde_json::from_value::<LoginRecord>(value).unwrap().into();
        assert!(back.scope.is_none() && back.refresh_token.is_none());
    }
}
