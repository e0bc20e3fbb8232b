//! The federated `auth` tables: `enterprise` (enterprise-managed authorization, SEP-990) and
//! `workload_identity` (a workload's own signed token). Both end in the RFC 7523 JWT bearer
//! grant at the MCP server's authorization server; their credentials come from a variable or a
//! file, never from the configuration itself.

use std::path::PathBuf;

use serde::Serialize;
use url::Url;

use crate::{Secret, SecretSource};

/// Where a token handed to this client comes from: an environment variable, or a file read
/// again at each exchange (a projected token rotates).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TokenSource {
    /// The variable holding the token (read at each exchange).
    Env(String),
    /// The file holding the token (read at each exchange, bounded; surrounding whitespace
    /// trimmed).
    File(PathBuf),
}

impl TokenSource {
    /// The token, when it comes from a variable that is set now.
    pub(crate) fn resolve_env(&self) -> Option<Secret> {
        match self {
            Self::Env(var) => std::env::var(var).ok().map(Secret::from),
            Self::File(_) => None,
        }
    }
}

/// Enterprise-managed authorization (SEP-990): the `enterprise` table.
///
/// At each renewal the user's identity token (`subject_token_env` or `subject_token_file`) is
/// exchanged at the enterprise identity provider (`idp_token_url`, RFC 8693) for an identity
/// assertion grant (`urn:ietf:params:oauth:token-type:id-jag`), which the client then presents
/// to the MCP server's authorization server (discovered like for client credentials) in the
/// JWT bearer grant (RFC 7523), authenticated as `client_id` (with `client_secret_env`, when
/// set). The access token is cached and renewed like a client-credentials token.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct EnterpriseAuth {
    /// The identity provider's token endpoint (the token exchange goes there).
    pub idp_token_url: Url,
    /// The user's identity token (an OpenID Connect ID token).
    pub subject_token: TokenSource,
    /// The client id at the MCP server's authorization server.
    pub client_id: String,
    /// Its secret (`client_secret_env` only). `None`: a public client.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<SecretSource>,
    /// The client id at the identity provider. `None`: the exchange names no client.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idp_client_id: Option<String>,
    /// Its secret at the identity provider (`idp_client_secret_env` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idp_client_secret: Option<SecretSource>,
    /// The exchange's `audience`. `None`: the issuer of the MCP server's authorization server,
    /// as discovered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// The RFC 8707 resource, in both requests. `None`: the protected resource's identifier
    /// from its metadata, else the server's URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// The scope asked for, in both requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Authorization servers (issuer URLs) that discovery may use besides one on the MCP
    /// server's own host: the grant goes nowhere else.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_issuers: Vec<Url>,
}

/// Workload identity federation: the `workload_identity` table. The workload's own signed
/// token (a Kubernetes projected service-account token, a cloud identity token) is the
/// assertion of the JWT bearer grant (RFC 7523) at the MCP server's authorization server,
/// read again at each exchange. No secret of this client's is kept anywhere.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct WorkloadIdentity {
    /// Where the workload token is (`token_file` or `token_env`).
    pub token: TokenSource,
    /// The client id sent with the grant, when the authorization server wants one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The RFC 8707 resource (the access token's audience). `None`: the protected resource's
    /// identifier from its metadata, else the server's URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// The scope asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Authorization servers (issuer URLs) that discovery may use besides one on the MCP
    /// server's own host: the workload token goes nowhere else.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allowed_issuers: Vec<Url>,
}

impl EnterpriseAuth {
    /// The secrets this table names that can be read now: the client secrets' variables and a
    /// subject token's variable.
    pub(crate) fn secret_values(&self) -> impl Iterator<Item = Secret> + '_ {
        [&self.client_secret, &self.idp_client_secret]
            .into_iter()
            .filter_map(|s| s.as_ref().and_then(SecretSource::resolve))
            .chain(self.subject_token.resolve_env())
    }
}
