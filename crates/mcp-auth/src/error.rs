//! Errors of the auth hook.

/// A boxed error for cause chains.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why credentials could not be produced for a server.
///
/// Messages name the server and, where useful, a header or environment variable; they never
/// contain a secret value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// `bearer_token_env` or `client_secret_env` names a variable that is unset (or not
    /// UTF-8) when the session opens.
    #[error(
        "server `{server}`: environment variable `{variable}` ({setting}) is not set or not valid UTF-8"
    )]
    MissingEnv {
        /// The server.
        server: String,
        /// The environment variable.
        variable: String,
        /// The setting that names it (`bearer_token_env`, `client_secret_env`).
        setting: &'static str,
    },
    /// A token or client secret is empty or only whitespace (`bearer_token_env` /
    /// `client_secret_env` naming a variable set to `""`, or an empty inline value): it is
    /// refused rather than sent as an empty credential (`Authorization: Bearer `).
    #[error(
        "server `{server}`: {} is empty or only whitespace; an empty credential is never sent",
        match variable {
            Some(variable) => format!("environment variable `{variable}` ({setting})"),
            None => format!("`{setting}`"),
        }
    )]
    EmptySecret {
        /// The server.
        server: String,
        /// The setting that gives the value (`bearer_token_env`, `bearer_token`,
        /// `client_secret_env`, `client_secret`).
        setting: &'static str,
        /// The environment variable, when the value was read from one.
        variable: Option<String>,
    },
    /// A configured header name is not a valid HTTP header name.
    #[error("server `{server}`: `{name}` is not a valid HTTP header name")]
    InvalidHeaderName {
        /// The server.
        server: String,
        /// The offending name (names are not secret).
        name: String,
    },
    /// A configured header value (or token) cannot be sent in an HTTP header.
    #[error(
        "server `{server}`: the value of header `{name}` is not a valid HTTP header value (control characters or non-visible bytes)"
    )]
    InvalidHeaderValue {
        /// The server.
        server: String,
        /// The header the value was meant for.
        name: String,
    },
    /// Two auth settings set the same header (e.g. `Authorization` in `headers` and a bearer token).
    #[error("server `{server}`: header `{name}` is set twice by the auth configuration")]
    DuplicateHeader {
        /// The server.
        server: String,
        /// The header.
        name: String,
    },
    /// The configuration asks for an auth method this build does not provide yet.
    #[error("server `{server}`: {method} is not supported by this build")]
    Unsupported {
        /// The server.
        server: String,
        /// The auth method.
        method: &'static str,
    },
    /// The token endpoint answered with an OAuth error (RFC 6749 §5.2), e.g. `invalid_client`
    /// for a wrong client secret.
    #[error(
        "server `{server}`: the token endpoint refused the client credentials (HTTP {status}): {error}{}",
        description.as_deref().map(|d| format!(": {d}")).unwrap_or_default()
    )]
    TokenRejected {
        /// The server.
        server: String,
        /// The HTTP status of the answer.
        status: u16,
        /// The OAuth `error` code (`invalid_client`, `invalid_scope`, …), or `http_error` when the
        /// answer carried none.
        error: String,
        /// The OAuth `error_description`, if any (with any occurrence of the client secret
        /// removed).
        description: Option<String>,
    },
    /// OAuth discovery (RFC 9728 protected-resource metadata, RFC 8414 / OpenID
    /// authorization-server metadata) found no usable token endpoint.
    #[error("server `{server}`: OAuth discovery failed: {message}")]
    Discovery {
        /// The server.
        server: String,
        /// What was missing or wrong (URLs and field names only).
        message: String,
    },
    /// Authorization-server metadata names another issuer than the one it was fetched for
    /// (RFC 8414 §3.3): the metadata is refused.
    #[error(
        "server `{server}`: the authorization server metadata at {metadata_url} names issuer `{found}`, not `{expected}`; refused (RFC 8414 §3.3)"
    )]
    IssuerMismatch {
        /// The server.
        server: String,
        /// Where the metadata came from.
        metadata_url: String,
        /// The issuer the metadata was fetched for.
        expected: String,
        /// The issuer the metadata names.
        found: String,
    },
    /// A token endpoint or metadata request failed before an answer arrived (connect, TLS,
    /// I/O, an oversized body) or took too long.
    #[error("server `{server}`: {what} failed: {detail}")]
    OAuthRequest {
        /// The server.
        server: String,
        /// Which request, with its URL (e.g. `token request to https://as.example/token`).
        what: String,
        /// The cause chain as one line (transports often show only an error's own message).
        detail: String,
        /// The cause, for inspection. Not this error's `source()`: `detail` already shows
        /// it, and a chain would show it twice.
        cause: BoxError,
    },
    /// A token endpoint or metadata answer could not be used (not JSON, no `access_token`, a
    /// token type other than `Bearer`, …).
    #[error("server `{server}`: {what}: {message}")]
    InvalidResponse {
        /// The server.
        server: String,
        /// Which answer, with its URL.
        what: String,
        /// What is wrong with it (never a token).
        message: String,
    },
    /// A provider failed to obtain credentials (e.g. a token endpoint refused them).
    #[error("server `{server}`: {message}")]
    Provider {
        /// The server.
        server: String,
        /// What failed (never a secret value).
        message: String,
        /// The cause, when there is one.
        #[source]
        source: Option<BoxError>,
    },
}

impl AuthError {
    /// The server this error is about.
    pub fn server(&self) -> &str {
        match self {
            Self::MissingEnv { server, .. }
            | Self::EmptySecret { server, .. }
            | Self::InvalidHeaderName { server, .. }
            | Self::InvalidHeaderValue { server, .. }
            | Self::DuplicateHeader { server, .. }
            | Self::Unsupported { server, .. }
            | Self::TokenRejected { server, .. }
            | Self::Discovery { server, .. }
            | Self::IssuerMismatch { server, .. }
            | Self::OAuthRequest { server, .. }
            | Self::InvalidResponse { server, .. }
            | Self::Provider { server, .. } => server,
        }
    }

    /// The OAuth `error` code of a token endpoint's refusal (`invalid_client`, …).
    pub fn oauth_error(&self) -> Option<&str> {
        match self {
            Self::TokenRejected { error, .. } => Some(error),
            _ => None,
        }
    }

    /// True when the error comes from the configuration (and retrying cannot help).
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            Self::MissingEnv { .. }
                | Self::EmptySecret { .. }
                | Self::InvalidHeaderName { .. }
                | Self::InvalidHeaderValue { .. }
                | Self::DuplicateHeader { .. }
                | Self::Unsupported { .. }
        )
    }
}
