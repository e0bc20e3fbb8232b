//! The two discovery documents, typed: RFC 9728 protected-resource metadata and RFC 8414
//! authorization-server metadata (an OpenID Connect discovery document has the same fields).
//!
//! Only the fields this client reads are declared; every other field is ignored. A declared
//! field that is absent or `null` is `None`; one of another JSON type is an error naming the
//! field (and, through the caller, the server and the document).

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::failure::shown;

/// RFC 9728 §2 protected-resource metadata (the fields discovery uses).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ProtectedResource {
    /// `resource`: the protected resource's identifier (required by RFC 9728).
    #[serde(default, deserialize_with = "resource")]
    pub(crate) resource: Option<String>,
    /// `authorization_servers`: issuer identifiers of the authorization servers it accepts.
    #[serde(default, deserialize_with = "authorization_servers")]
    pub(crate) authorization_servers: Option<Vec<String>>,
    /// `scopes_supported`: the scopes a client may ask for to use the resource.
    #[serde(default, deserialize_with = "scopes_supported")]
    pub(crate) scopes_supported: Option<Vec<String>>,
}

/// RFC 8414 §2 authorization-server metadata (the fields discovery uses).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct AuthorizationServer {
    /// `issuer`: must be the issuer the document was fetched for (RFC 8414 §3.3).
    #[serde(default, deserialize_with = "issuer")]
    pub(crate) issuer: Option<String>,
    /// `token_endpoint`.
    #[serde(default, deserialize_with = "token_endpoint")]
    pub(crate) token_endpoint: Option<String>,
    /// `grant_types_supported`; absent means `authorization_code` and `implicit` by RFC 8414,
    /// but servers commonly omit it, so absent is not a refusal here.
    #[serde(default, deserialize_with = "grant_types_supported")]
    pub(crate) grant_types_supported: Option<Vec<String>>,
    /// `token_endpoint_auth_methods_supported`; absent means `client_secret_basic`.
    #[serde(default, deserialize_with = "token_endpoint_auth_methods_supported")]
    pub(crate) token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// `authorization_endpoint`: where the user's browser logs in.
    #[serde(default, deserialize_with = "authorization_endpoint")]
    pub(crate) authorization_endpoint: Option<String>,
    /// `registration_endpoint`: RFC 7591 dynamic client registration.
    #[serde(default, deserialize_with = "registration_endpoint")]
    pub(crate) registration_endpoint: Option<String>,
    /// `scopes_supported` of the authorization server (offers `offline_access`, …).
    #[serde(default, deserialize_with = "scopes_supported")]
    pub(crate) scopes_supported: Option<Vec<String>>,
    /// `code_challenge_methods_supported` (RFC 7636): must list `S256` for a login.
    #[serde(default, deserialize_with = "code_challenge_methods_supported")]
    pub(crate) code_challenge_methods_supported: Option<Vec<String>>,
    /// RFC 9207 `authorization_response_iss_parameter_supported`: the redirect carries `iss`.
    #[serde(
        default,
        deserialize_with = "authorization_response_iss_parameter_supported"
    )]
    pub(crate) authorization_response_iss_parameter_supported: Option<bool>,
    /// SEP-991 `client_id_metadata_document_supported`: a client id may be the URL of its
    /// metadata document.
    #[serde(default, deserialize_with = "client_id_metadata_document_supported")]
    pub(crate) client_id_metadata_document_supported: Option<bool>,
}

/// One `deserialize_with` function per field, each naming its field in a type error (serde
/// names the expected type, not the field).
macro_rules! named_fields {
    ($($function:ident: $ty:ty;)*) => {$(
        fn $function<'de, D: Deserializer<'de>>(deserializer: D) -> Result<$ty, D::Error> {
            <$ty>::deserialize(deserializer).map_err(|error| {
                D::Error::custom(format_args!(
                    "field `{}` has the wrong type ({})",
                    stringify!($function),
                    shown(&error)
                ))
            })
        }
    )*};
}

named_fields! {
    resource: Option<String>;
    authorization_servers: Option<Vec<String>>;
    issuer: Option<String>;
    token_endpoint: Option<String>;
    grant_types_supported: Option<Vec<String>>;
    token_endpoint_auth_methods_supported: Option<Vec<String>>;
    scopes_supported: Option<Vec<String>>;
    authorization_endpoint: Option<String>;
    registration_endpoint: Option<String>;
    code_challenge_methods_supported: Option<Vec<String>>;
    authorization_response_iss_parameter_supported: Option<bool>;
    client_id_metadata_document_supported: Option<bool>;
}

/// Reads a metadata document: a JSON object whose declared fields have their types. The
/// error says what is wrong, in words (no value longer than a short excerpt).
pub(crate) fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    let value = serde_json::from_slice::<Value>(body)
        .ok()
        .filter(Value::is_object)
        .ok_or_else(|| "the answer is not a JSON object".to_owned())?;
    T::deserialize(value).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read<T: DeserializeOwned>(doc: Value) -> Result<T, String> {
        parse(doc.to_string().as_bytes())
    }

    #[test]
    fn unknown_fields_are_ignored_and_absent_ones_are_none() {
        let doc: ProtectedResource = read(json!({
            "resource": "https://mcp.example/mcp",
            "authorization_servers": ["https://as.example"],
            "scopes_supported": ["read"],
            "bearer_methods_supported": 7,
        }))
        .unwrap();
        assert_eq!(doc.resource.as_deref(), Some("https://mcp.example/mcp"));
        assert_eq!(
            doc.authorization_servers.unwrap(),
            ["https://as.example".to_owned()]
        );

        let doc: AuthorizationServer =
            read(json!({"issuer": "https://as.example", "token_endpoint": null})).unwrap();
        assert_eq!(doc.issuer.as_deref(), Some("https://as.example"));
        assert!(doc.token_endpoint.is_none());
        assert!(doc.grant_types_supported.is_none());
        assert!(doc.token_endpoint_auth_methods_supported.is_none());
    }

    #[test]
    fn a_field_of_the_wrong_type_is_named() {
        let err = read::<ProtectedResource>(json!({"resource": 5})).unwrap_err();
        assert_eq!(
            err,
            "field `resource` has the wrong type (invalid type: integer `5`, expected a string)"
        );
        let err = read::<ProtectedResource>(json!({
            "resource": "https://mcp.example/mcp",
            "authorization_servers": "https://as.example",
        }))
        .unwrap_err();
        assert!(
            err.starts_with(
                "field `authorization_servers` has the wrong type (invalid type: string"
            ),
            "{err}"
        );
        let err = read::<AuthorizationServer>(json!({
            "issuer": "https://as.example",
            "token_endpoint_auth_methods_supported": ["client_secret_basic", 3],
        }))
        .unwrap_err();
        assert_eq!(
            err,
            "field `token_endpoint_auth_methods_supported` has the wrong type (invalid type: integer `3`, expected a string)"
        );
    }

    #[test]
    fn a_long_value_in_a_type_error_is_cut() {
        let err = read::<AuthorizationServer>(json!({"grant_types_supported": "x".repeat(5_000)}))
            .unwrap_err();
        assert!(err.len() < 400, "{} bytes", err.len());
        assert!(err.contains('…'), "{err}");
    }

    #[test]
    fn a_document_must_be_a_json_object() {
        for body in [&b"<html>"[..], b"[1, 2]", b"\"text\"", b""] {
            assert_eq!(
                parse::<AuthorizationServer>(body).unwrap_err(),
                "the answer is not a JSON object"
            );
        }
    }
}
