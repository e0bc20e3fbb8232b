//! The crate's errors: [`AuthError`], and [`FetchError`], the error of the [`HttpFetch`]
//! seam.
//!
//! [`HttpFetch`]: crate::HttpFetch

use std::fmt;
use std::path::PathBuf;

use mcp_config::BoxError;

/// Why credentials could not be produced for a server.
///
/// `Display` is ``server `<name>`: `` followed by [`reason`](Self::reason), so the server is
/// named once; a message that names the server itself shows only the reason. Messages name,
/// where useful, a header or environment variable; they never contain a secret value.
///
/// Text a server chose (an OAuth `error_description`, an issuer, a URL from metadata, a
/// parser's complaint about a metadata document) and the text of a failed OAuth request are
/// kept as text, not as typed causes: each passed through a scrubber that replaces the client
/// secret, the spec's secrets and the credential's recent tokens by `[REDACTED]`, and is cut
/// to a bounded length. The typed cause of a failed request stays reachable through
/// [`AuthError::OAuthRequest`]'s `cause`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// `bearer_token_env` or `client_secret_env` names a variable that is unset (or not
    /// UTF-8) when the session opens.
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
    InvalidHeaderName {
        /// The server.
        server: String,
        /// The offending name (names are not secret).
        name: String,
    },
    /// A configured header value (or token) cannot be sent in an HTTP header.
    InvalidHeaderValue {
        /// The server.
        server: String,
        /// The header the value was meant for.
        name: String,
    },
    /// Two auth settings set the same header (e.g. `Authorization` in `headers` and a bearer token).
    DuplicateHeader {
        /// The server.
        server: String,
        /// The header.
        name: String,
    },
    /// The configuration asks for an auth method this build does not provide yet.
    Unsupported {
        /// The server.
        server: String,
        /// The auth method.
        method: &'static str,
    },
    /// The token endpoint answered with an OAuth error (RFC 6749 §5.2), e.g. `invalid_client`
    /// for a wrong client secret.
    TokenRejected {
        /// The server.
        server: String,
        /// The HTTP status of the answer.
        status: u16,
        /// The OAuth `error` code (`invalid_client`, `invalid_scope`, …), or `invalid_response`
        /// when the answer carried none.
        error: String,
        /// The OAuth `error_description`, if any (scrubbed, bounded).
        description: Option<String>,
    },
    /// OAuth discovery (RFC 9728 protected-resource metadata, RFC 8414 / OpenID
    /// authorization-server metadata) found no usable token endpoint, or refused the one it
    /// found.
    Discovery {
        /// The server.
        server: String,
        /// What was missing or wrong (URLs and field names only; scrubbed, bounded).
        message: String,
    },
    /// Authorization-server metadata names another issuer than the one it was fetched for
    /// (RFC 8414 §3.3): the metadata is refused.
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
    OAuthRequest {
        /// The server.
        server: String,
        /// Which request, with its URL (e.g. `token request to https://as.example/token`).
        what: String,
        /// The cause chain as one line, scrubbed: transports often show only an error's own
        /// message, so the cause is in it.
        detail: String,
        /// The cause ([`FetchError`], or a timeout), typed, for inspection. Not this
        /// error's `source()`: `detail` already shows it, and a chain would show it twice.
        cause: BoxError,
    },
    /// A token endpoint or metadata answer could not be used (not JSON, a field of the wrong
    /// type, no `access_token`, a token type other than `Bearer`, …).
    InvalidResponse {
        /// The server.
        server: String,
        /// Which answer, with its URL.
        what: String,
        /// What is wrong with it (never a token; scrubbed, bounded).
        message: String,
    },
    /// A login (authorization code with PKCE) was refused or could not go on: a redirect
    /// whose `state` or `iss` is wrong, an authorization server without PKCE S256, no way to
    /// get a client id, the user denying access, …
    Login {
        /// The server.
        server: String,
        /// What went wrong (no code, verifier or token; server text scrubbed, bounded).
        message: String,
    },
    /// The stored login cannot give a usable token (none stored, expired without a refresh
    /// token, a refresh token refused, the authorization server changed): the user has to
    /// log in again. The message names the command.
    LoginRequired {
        /// The server.
        server: String,
        /// Why, without the command.
        reason: String,
    },
    /// The token store failed or refused (a token file others can read, a login already in
    /// progress, an unreadable file). Shown as the store's error, which names the fix.
    TokenStore {
        /// The server.
        server: String,
        /// The store's error (not this error's `source()`: the message already shows it).
        error: StoreError,
    },
    /// The store of tokens shared by a fleet's replicas
    /// ([`SharedTokens`](crate::SharedTokens)) failed while a login's token had to be
    /// refreshed, and the store does not let a replica refresh alone (that could send a
    /// refresh token another replica sends too). Client-credentials tokens never fail for it:
    /// the replica fetches its own.
    TokenShare {
        /// The server.
        server: String,
        /// The store's error (not this error's `source()`: the message already shows it).
        error: ShareError,
    },
    /// The identity provider of enterprise-managed authorization refused the token exchange
    /// (RFC 8693), or answered with something other than an identity assertion grant.
    TokenExchange {
        /// The server.
        server: String,
        /// The identity provider's token endpoint.
        provider: String,
        /// The grant asked for (`urn:ietf:params:oauth:grant-type:token-exchange`).
        grant: &'static str,
        /// What went wrong: the OAuth `error` and `error_description`, or what is wrong with
        /// the answer (never a token; scrubbed, bounded).
        message: String,
    },
    /// A token file (`token_file`, `subject_token_file`) is missing, unreadable, empty or
    /// larger than its bound (64 KiB, `MAX_TOKEN_FILE_BYTES`).
    TokenFile {
        /// The server.
        server: String,
        /// The file.
        path: PathBuf,
        /// The setting that names it.
        setting: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// DPoP (RFC 9449) failed: a server that keeps asking for a new nonce after a retry with
    /// its nonce, an authorization server issuing a bearer token where `dpop = true` requires
    /// a DPoP-bound one, a stored DPoP key that cannot be read.
    Dpop {
        /// The server.
        server: String,
        /// What went wrong (no token or key; server text scrubbed, bounded).
        reason: String,
    },
    /// A provider failed to obtain credentials (a custom provider's failure, or an unusable
    /// `private_key_jwt` key).
    Provider {
        /// The server.
        server: String,
        /// What failed (never a secret value), without the cause: that is the `source()`.
        message: String,
        /// The cause, when there is one.
        #[source]
        source: Option<BoxError>,
    },
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "server `{}`: {}", self.server(), self.reason())
    }
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
            | Self::Login { server, .. }
            | Self::LoginRequired { server, .. }
            | Self::TokenStore { server, .. }
            | Self::TokenShare { server, .. }
            | Self::TokenExchange { server, .. }
            | Self::TokenFile { server, .. }
            | Self::Dpop { server, .. }
            | Self::Provider { server, .. } => server,
        }
    }

    /// What went wrong, without the server's name: the message minus its ``server `<name>`: ``
    /// prefix, for a message that names the server itself.
    ///
    /// ```
    /// use mcp_auth::{AuthError, BearerToken};
    /// use mcp_config::Secret;
    ///
    /// let err = BearerToken::new("docs", &Secret::from("")).unwrap_err();
    /// assert_eq!(err.to_string(), format!("server `docs`: {}", err.reason()));
    /// assert!(!err.reason().to_string().contains("docs"));
    /// ```
    pub fn reason(&self) -> impl fmt::Display + '_ {
        Reason(self)
    }

    /// The OAuth `error` code of a token endpoint's refusal (`invalid_client`, …).
    pub fn oauth_error(&self) -> Option<&str> {
        match self {
            Self::TokenRejected { error, .. } => Some(error),
            _ => None,
        }
    }

    /// True when the user has to log in (again) before this server can be used.
    pub fn is_login_required(&self) -> bool {
        matches!(self, Self::LoginRequired { .. })
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

/// An [`AuthError`]'s message without the server.
struct Reason<'a>(&'a AuthError);

impl fmt::Display for Reason<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            AuthError::MissingEnv {
                variable, setting, ..
            } => write!(
                f,
                "environment variable `{variable}` ({setting}) is not set or not valid UTF-8"
            ),
            AuthError::EmptySecret {
                setting, variable, ..
            } => {
                match variable {
                    Some(variable) => write!(f, "environment variable `{variable}` ({setting})")?,
                    None => write!(f, "`{setting}`")?,
                }
                f.write_str(" is empty or only whitespace; an empty credential is never sent")
            }
            AuthError::InvalidHeaderName { name, .. } => {
                write!(f, "`{name}` is not a valid HTTP header name")
            }
            AuthError::InvalidHeaderValue { name, .. } => write!(
                f,
                "the value of header `{name}` is not a valid HTTP header value (control characters or non-visible bytes)"
            ),
            AuthError::DuplicateHeader { name, .. } => {
                write!(f, "header `{name}` is set twice by the auth configuration")
            }
            AuthError::Unsupported { method, .. } => {
                write!(f, "{method} is not supported by this build")
            }
            AuthError::TokenRejected {
                status,
                error,
                description,
                ..
            } => {
                write!(
                    f,
                    "the token endpoint refused the client credentials (HTTP {status}): {error}"
                )?;
                match description {
                    Some(description) => write!(f, ": {description}"),
                    None => Ok(()),
                }
            }
            AuthError::Discovery { message, .. } => {
                write!(f, "OAuth discovery failed: {message}")
            }
            AuthError::IssuerMismatch {
                metadata_url,
                expected,
                found,
                ..
            } => write!(
                f,
                "the authorization server metadata at {metadata_url} names issuer `{found}`, not `{expected}`; refused (RFC 8414 §3.3)"
            ),
            AuthError::OAuthRequest { what, detail, .. } => write!(f, "{what} failed: {detail}"),
            AuthError::InvalidResponse { what, message, .. } => write!(f, "{what}: {message}"),
            AuthError::Login { message, .. } => write!(f, "OAuth login failed: {message}"),
            AuthError::LoginRequired { reason, server } => write!(
                f,
                "{reason}; log in again with `mcp-agent auth login {server}`"
            ),
            AuthError::TokenStore { error, .. } => write!(f, "token store: {error}"),
            AuthError::TokenShare { error, .. } => write!(
                f,
                "{error}; a login's refresh waits for it, so that no refresh token is sent twice"
            ),
            AuthError::TokenExchange {
                provider,
                grant,
                message,
                ..
            } => write!(f, "the identity provider {provider} ({grant}): {message}"),
            AuthError::TokenFile {
                path,
                setting,
                problem,
                ..
            } => write!(f, "the token file {} ({setting}) {problem}", path.display()),
            AuthError::Dpop { reason, .. } => write!(f, "DPoP: {reason}"),
            AuthError::Provider { message, .. } => f.write_str(message),
        }
    }
}

/// Why an [`HttpFetch`](crate::HttpFetch) exchange failed.
///
/// A second error type, because it belongs to another seam: the transport implementing
/// [`HttpFetch`](crate::HttpFetch) returns it, and knows no server (one token request may
/// serve several). The OAuth provider turns it into [`AuthError::OAuthRequest`], which names
/// the server and the request and keeps this error, typed, as its `cause`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// The request could not be sent or the response could not be read (connect, TLS, I/O).
    /// Shown as its cause, which should say what happened in words.
    #[error(transparent)]
    Request(BoxError),
    /// The response body is larger than the caller's limit.
    #[error("the response body exceeds the limit of {limit} bytes")]
    BodyTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
}

/// Why a [`TokenStore`](crate::TokenStore) could not load, save or lock a login.
///
/// A third error type, because it belongs to the store seam: a store returns it without
/// knowing the server. Messages name the file and the fix, never a token. No variant has a
/// `source()`: what the operating system said is part of the message.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A token file or directory other users can read: refused, nothing read from it.
    #[error(
        "{} can be read by other users (mode {mode:03o}); refused: run `chmod {fix:o} {}`",
        path.display(),
        path.display()
    )]
    Permissions {
        /// The file or directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
        /// The mode to set (`600` for a file, `700` for a directory).
        fix: u32,
    },
    /// Another login for the same server holds the lock.
    #[error(
        "another login for this server is in progress ({holder}); finish or cancel it first{}",
        path.as_ref().map(|p| format!(" (if none is running, remove {})", p.display())).unwrap_or_default()
    )]
    LoginInProgress {
        /// Who holds it (a process id and since when).
        holder: String,
        /// The lock file, for a file store.
        path: Option<PathBuf>,
    },
    /// Reading or writing failed.
    #[error("could not {action} {}: {detail}", path.display())]
    Io {
        /// `read`, `write`, `create`, …
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// What the operating system said.
        detail: String,
    },
    /// A stored file that is not a login this version can read.
    #[error("{} is not a stored login ({message}); remove it and log in again", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong (no value from the file).
        message: String,
    },
    /// No state directory: neither `XDG_STATE_HOME` nor `HOME` is set.
    #[error("no directory for the token store: set XDG_STATE_HOME or HOME")]
    NoStateDir,
    /// A custom store's failure.
    #[error("{0}")]
    Other(String),
}

/// Why a [`SharedTokens`](crate::SharedTokens) store (the tokens a fleet's replicas share)
/// could not answer.
///
/// Another seam's error: the store returns it without knowing the server. Its message names
/// the store (say `Redis at 10.0.0.5:6379`), never a key's content or a token.
///
/// ```
/// let e = mcp_auth::ShareError::new("Redis at 127.0.0.1:6379", "connection refused");
/// assert_eq!(
///     e.to_string(),
///     "the shared token store (Redis at 127.0.0.1:6379) failed: connection refused"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the shared token store ({store}) failed: {reason}")]
#[non_exhaustive]
pub struct ShareError {
    /// The store (`Redis at host:port`).
    pub store: String,
    /// What failed, in words, without a secret.
    pub reason: String,
}

impl ShareError {
    /// An error of `store` for `reason`.
    pub fn new(store: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            store: store.into(),
            reason: reason.into(),
        }
    }
}
