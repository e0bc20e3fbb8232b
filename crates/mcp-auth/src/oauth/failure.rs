//! What went wrong while obtaining a token, kept cloneable so every caller waiting on the same
//! attempt gets the same answer, and rendered as an [`AuthError`] naming the caller's server.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use mcp_config::Redactor;

use crate::AuthError;
use crate::FetchError;

/// A failed attempt, without the server name (the attempt may serve several servers).
#[derive(Debug, Clone)]
pub(crate) enum Failure {
    /// The token endpoint answered with an OAuth error.
    Rejected {
        status: u16,
        error: String,
        description: Option<String>,
    },
    /// Discovery found no usable token endpoint.
    Discovery(String),
    /// Authorization-server metadata names another issuer.
    IssuerMismatch {
        metadata_url: String,
        expected: String,
        found: String,
    },
    /// A request failed before an answer arrived, or took too long.
    Request {
        what: String,
        source: Arc<dyn StdError + Send + Sync>,
    },
    /// An answer could not be used.
    Invalid { what: String, message: String },
    /// A login's tokens are of no more use: the user has to log in again.
    LoginRequired(String),
    /// The token store failed.
    Store(crate::StoreError),
    /// The fleet's shared token store failed when a login's refresh needed it.
    Share(crate::ShareError),
    /// The identity provider refused a token exchange or answered it unusably.
    Exchange {
        provider: String,
        grant: &'static str,
        message: String,
    },
    /// A token file could not be used.
    TokenFile {
        path: std::path::PathBuf,
        setting: &'static str,
        problem: String,
    },
    /// DPoP failed (a nonce loop, a bearer token where DPoP is required, an unusable key).
    Dpop(String),
}

impl Failure {
    pub(crate) fn fetch(what: String, error: FetchError) -> Self {
        Self::Request {
            what,
            source: Arc::new(error),
        }
    }

    pub(crate) fn timeout(what: String, after: Duration) -> Self {
        Self::Request {
            what,
            source: Arc::new(TimedOut(after)),
        }
    }

    pub(crate) fn invalid(what: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            what: what.into(),
            message: message.into(),
        }
    }

    /// The error as seen by `server`, every text in it passed through `scrubber` (which
    /// knows the secrets and tokens of the caller: a server may echo them).
    pub(crate) fn to_error(&self, server: &str, scrubber: &Redactor) -> AuthError {
        let server = server.to_owned();
        let clean = |text: String| scrubber.scrub(&text).into_owned();
        match self.clone() {
            Self::Rejected {
                status,
                error,
                description,
            } => AuthError::TokenRejected {
                server,
                status,
                error: clean(error),
                description: description.map(clean),
            },
            Self::Discovery(message) => AuthError::Discovery {
                server,
                message: clean(message),
            },
            Self::IssuerMismatch {
                metadata_url,
                expected,
                found,
            } => AuthError::IssuerMismatch {
                server,
                metadata_url: clean(metadata_url),
                expected: clean(expected),
                found: clean(found),
            },
            Self::Request { what, source } => {
                let mut detail = source.to_string();
                let mut cause = source.source();
                while let Some(inner) = cause {
                    detail.push_str(": ");
                    detail.push_str(&inner.to_string());
                    cause = inner.source();
                }
                AuthError::OAuthRequest {
                    server,
                    what: clean(what),
                    detail: clean(detail),
                    cause: Box::new(Shared(source)),
                }
            }
            Self::Invalid { what, message } => AuthError::InvalidResponse {
                server,
                what: clean(what),
                message: clean(message),
            },
            Self::LoginRequired(reason) => AuthError::LoginRequired {
                server,
                reason: clean(reason),
            },
            Self::Exchange {
                provider,
                grant,
                message,
            } => AuthError::TokenExchange {
                server,
                provider: clean(provider),
                grant,
                message: clean(message),
            },
            Self::TokenFile {
                path,
                setting,
                problem,
            } => AuthError::TokenFile {
                server,
                path,
                setting,
                problem,
            },
            Self::Store(error) => AuthError::TokenStore { server, error },
            Self::Share(error) => AuthError::TokenShare { server, error },
            Self::Dpop(reason) => AuthError::Dpop {
                server,
                reason: clean(reason),
            },
        }
    }
}

/// Longest server-chosen text (an issuer, a URL, a resource) kept in an error.
const MAX_SHOWN: usize = 256;

/// Text a server chose (an issuer, a URL from its metadata), [`mcp_config::bounded_text`] for an error message.
pub(crate) fn shown(text: impl fmt::Display) -> String {
    mcp_config::bounded_text(&text.to_string(), MAX_SHOWN)
}

/// An exchange that did not finish in time.
#[derive(Debug)]
pub(crate) struct TimedOut(pub(crate) Duration);

impl fmt::Display for TimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no answer within {:.1} s", self.0.as_secs_f64())
    }
}

impl StdError for TimedOut {}

/// A shared cause, shown as itself.
#[derive(Debug)]
struct Shared(Arc<dyn StdError + Send + Sync>);

impl fmt::Display for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl StdError for Shared {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0.source()
    }
}
