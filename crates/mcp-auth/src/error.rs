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
    /// `bearer_token_env` names a variable that is unset (or not UTF-8) when the session opens.
    #[error(
        "server `{server}`: environment variable `{variable}` (bearer_token_env) is not set or not valid UTF-8"
    )]
    MissingEnv {
        /// The server.
        server: String,
        /// The environment variable.
        variable: String,
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
            | Self::InvalidHeaderName { server, .. }
            | Self::InvalidHeaderValue { server, .. }
            | Self::DuplicateHeader { server, .. }
            | Self::Unsupported { server, .. }
            | Self::Provider { server, .. } => server,
        }
    }

    /// True when the error comes from the configuration (and retrying cannot help).
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            Self::MissingEnv { .. }
                | Self::InvalidHeaderName { .. }
                | Self::InvalidHeaderValue { .. }
                | Self::DuplicateHeader { .. }
                | Self::Unsupported { .. }
        )
    }
}
