//! Why a request failed, in words: hyper-util's client error hides the cause in its source
//! chain behind `client error (Connect)`; this walks the chain (into `io::Error`s, whose
//! `source()` skips the error they wrap) and names what happened — the connection refused,
//! the host name not resolved, the TLS handshake failed and why, a timeout and of which
//! step — for one [`HttpError`] variant each.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::time::Duration;

use http::Uri;
use rustls::CertificateError;

use crate::error::{HttpError, seconds};
use crate::resolve::{Blocked, DnsFailure};

/// Where a request went: the host and port of its URI (never its user info).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl Target {
    pub(crate) fn of(uri: &Uri) -> Self {
        let https = uri.scheme_str() == Some("https");
        Self {
            host: uri.host().unwrap_or_default().to_owned(),
            port: uri.port_u16().unwrap_or(if https { 443 } else { 80 }),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// A failed request, classified; without the server (the OAuth fetcher has none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cause {
    /// The SSRF guard refused the address.
    Blocked(Blocked),
    /// Nothing accepted the connection.
    Refused(Target),
    /// The host name did not resolve.
    Dns { host: String, reason: String },
    /// The TLS handshake failed.
    Tls { host: String, reason: String },
    /// The TCP connection was not established in time.
    ConnectTimeout { target: Target, after: Duration },
    /// The connection failed otherwise.
    Connect { target: Target, reason: String },
    /// The request failed once connected (the connection closed or reset, a protocol error).
    Request { target: Target, reason: String },
}

impl Cause {
    /// Classifies `error`, a failed request to `uri`; `connect_timeout` is the configured TCP
    /// connect timeout.
    pub(crate) fn of(
        error: &hyper_util::client::legacy::Error,
        uri: &Uri,
        connect_timeout: Duration,
    ) -> Self {
        let target = Target::of(uri);
        let chain = chain(error);
        if let Some(blocked) = find::<Blocked>(&chain) {
            return Self::Blocked(blocked.clone());
        }
        if let Some(dns) = find::<DnsFailure>(&chain) {
            return Self::Dns {
                host: dns.host.clone(),
                reason: dns.reason(),
            };
        }
        if let Some(tls) = find::<rustls::Error>(&chain) {
            return Self::Tls {
                host: target.host,
                reason: describe_tls(tls),
            };
        }
        let io_kind = chain
            .iter()
            .find_map(|e| e.downcast_ref::<io::Error>())
            .map(io::Error::kind);
        let reason = innermost(&chain);
        match io_kind {
            Some(io::ErrorKind::ConnectionRefused) => Self::Refused(target),
            Some(io::ErrorKind::TimedOut) if error.is_connect() => Self::ConnectTimeout {
                target,
                after: connect_timeout,
            },
            _ if error.is_connect() => Self::Connect { target, reason },
            _ => Self::Request { target, reason },
        }
    }

    /// The error of server `server`.
    pub(crate) fn for_server(self, server: &str) -> HttpError {
        let server = server.to_owned();
        match self {
            Self::Blocked(blocked) => HttpError::BlockedAddress {
                server,
                host: blocked.host,
            },
            Self::Refused(target) => HttpError::ConnectionRefused {
                server,
                host: target.host,
                port: target.port,
            },
            Self::Dns { host, reason } => HttpError::Dns {
                server,
                host,
                reason,
            },
            Self::Tls { host, reason } => HttpError::TlsHandshake {
                server,
                host,
                reason,
            },
            Self::ConnectTimeout { target, after } => HttpError::ConnectTimeout {
                server,
                host: target.host,
                port: target.port,
                after,
            },
            Self::Connect { target, reason } => HttpError::Connect {
                server,
                host: target.host,
                port: target.port,
                reason,
            },
            Self::Request { target, reason } => HttpError::Request {
                server,
                host: target.host,
                reason,
            },
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Blocked(blocked) => blocked.fmt(f),
            Self::Refused(target) => write!(f, "the connection to {target} was refused"),
            Self::Dns { host, reason } => {
                write!(f, "the host name `{host}` could not be resolved: {reason}")
            }
            Self::Tls { host, reason } => {
                write!(f, "the TLS handshake with `{host}` failed: {reason}")
            }
            Self::ConnectTimeout { target, after } => write!(
                f,
                "the TCP connection to {target} was not established within {}",
                seconds(*after)
            ),
            Self::Connect { target, reason } => {
                write!(f, "could not connect to {target}: {reason}")
            }
            Self::Request { target, reason } => {
                write!(f, "the HTTP exchange with {target} failed: {reason}")
            }
        }
    }
}

impl StdError for Cause {}

/// `error` and its causes, outermost first. An `io::Error` wrapping another error is followed
/// into it (its own `source()` would skip a level).
fn chain<'a>(error: &'a (dyn StdError + 'static)) -> Vec<&'a (dyn StdError + 'static)> {
    let mut out = Vec::new();
    let mut next = Some(error);
    while let Some(error) = next {
        out.push(error);
        next = match error
            .downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
        {
            Some(inner) => Some(inner as &(dyn StdError + 'static)),
            None => error.source(),
        };
        if out.len() > 32 {
            break;
        }
    }
    out
}

fn find<'a, T: StdError + 'static>(chain: &[&'a (dyn StdError + 'static)]) -> Option<&'a T> {
    chain.iter().find_map(|e| e.downcast_ref::<T>())
}

/// Why `error` happened, in the words of its innermost cause (the outer ones are the HTTP
/// library's wrappers).
pub(crate) fn reason(error: &(dyn StdError + 'static)) -> String {
    innermost(&chain(error))
}

/// The innermost cause's message (the outer ones are hyper-util's wrappers).
fn innermost(chain: &[&(dyn StdError + 'static)]) -> String {
    chain
        .last()
        .map(|e| e.to_string())
        .unwrap_or_else(|| "unknown cause".to_owned())
}

/// Why rustls refused the handshake, in words.
pub(crate) fn describe_tls(error: &rustls::Error) -> String {
    use rustls::Error as E;
    match error {
        E::InvalidCertificate(certificate) => match certificate {
            CertificateError::UnknownIssuer => {
                "the server's certificate is not trusted (issued by an unknown authority; add its CA to the trusted root certificates)".to_owned()
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                "the server's certificate is not valid for this host name".to_owned()
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                "the server's certificate has expired".to_owned()
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "the server's certificate is not valid yet (check the clock)".to_owned()
            }
            CertificateError::Revoked => "the server's certificate has been revoked".to_owned(),
            CertificateError::BadEncoding => "the server's certificate is malformed".to_owned(),
            CertificateError::BadSignature => {
                "the server's certificate has an invalid signature".to_owned()
            }
            CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
                "the server's certificate is not meant for a TLS server".to_owned()
            }
            _ => "the server's certificate was refused".to_owned(),
        },
        E::AlertReceived(alert) => format!("the server ended the handshake (alert: {alert:?})"),
        E::InvalidMessage(_) | E::InappropriateMessage { .. } => {
            "the server did not answer with TLS (a plain-HTTP server on an https URL?)".to_owned()
        }
        E::PeerIncompatible(_) => {
            "the server supports no TLS version or cipher suite this client offers".to_owned()
        }
        E::NoApplicationProtocol => "the server supports neither HTTP/2 nor HTTP/1.1 over TLS".to_owned(),
        E::NoCertificatesPresented => "the server presented no certificate".to_owned(),
        E::PeerMisbehaved(_) => "the server broke the TLS protocol".to_owned(),
        E::DecryptError => "the TLS handshake could not be verified (decryption failed)".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_name_host_and_port_never_user_info() {
        for (uri, expected) in [
            ("https://user:pw@mcp.example.com/mcp", "mcp.example.com:443"),
            ("http://mcp.example.com/mcp", "mcp.example.com:80"),
            ("http://127.0.0.1:8080/mcp", "127.0.0.1:8080"),
            ("http://[::1]:9/", "[::1]:9"),
        ] {
            let uri: Uri = uri.parse().unwrap();
            assert_eq!(Target::of(&uri).to_string(), expected);
        }
    }

    #[test]
    fn io_errors_are_followed_into_what_they_wrap() {
        let tls = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        let wrapped = io::Error::other(io::Error::new(io::ErrorKind::InvalidData, tls));
        let chain = chain(&wrapped);
        assert_eq!(chain.len(), 3);
        assert!(find::<rustls::Error>(&chain).is_some());
    }

    #[test]
    fn tls_reasons_are_words() {
        let reason = describe_tls(&rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName,
        ));
        assert_eq!(
            reason,
            "the server's certificate is not valid for this host name"
        );
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(seconds(Duration::from_secs(30)), "30 s");
    }
}
