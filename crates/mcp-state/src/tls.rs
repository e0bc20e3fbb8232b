//! The client of the configured server. For `rediss://` with a `ca_file`, one that trusts the
//! certificate authorities of that PEM file and no other (the redis crate's rustls connector,
//! given them as its root store); otherwise the URL's own client, which for `rediss://` trusts
//! the built-in web roots (webpki-roots).

use std::io::Read;
use std::path::Path;

use redis::{IntoConnectionInfo, TlsCertificates};

use crate::error::StateError;

/// The most a CA file may hold: a bundle of a few hundred certificates.
pub(crate) const MAX_CA_FILE: u64 = 1024 * 1024;

/// The client of `url` (already checked to be `redis://` or `rediss://`; `tls` when the
/// latter), trusting `ca_file` when one is configured. The outer error is the CA file's
/// ([`StateError::CaFile`]); the inner one the client's own, for the caller to map without
/// the password.
pub(crate) fn client(
    url: &str,
    tls: bool,
    ca_file: Option<&Path>,
) -> Result<redis::RedisResult<redis::Client>, StateError> {
    let Some(path) = ca_file else {
        return Ok(redis::Client::open(url));
    };
    let unusable = |reason: String| StateError::CaFile {
        path: path.to_owned(),
        reason,
    };
    if !tls {
        return Err(unusable(
            "it applies to `rediss://` only, and the URL is `redis://` (no TLS)".into(),
        ));
    }
    let pem = read_bounded(path).map_err(unusable)?;
    let info = match url.into_connection_info() {
        Ok(info) => info,
        Err(e) => return Ok(Err(e)),
    };
    let certificates = TlsCertificates {
        client_tls: None,
        root_cert: Some(pem),
    };
    redis::Client::build_with_tls(info, certificates)
        .map(Ok)
        .map_err(|e| unusable(e.to_string()))
}

/// The bytes of the CA file at `path`: at most [`MAX_CA_FILE`], with a PEM certificate.
fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot be opened: {e}"))?;
    let mut pem = Vec::new();
    file.take(MAX_CA_FILE + 1)
        .read_to_end(&mut pem)
        .map_err(|e| format!("cannot be read: {e}"))?;
    if pem.len() as u64 > MAX_CA_FILE {
        return Err(format!("it holds more than {MAX_CA_FILE} bytes"));
    }
    let marker = b"-----BEGIN CERTIFICATE-----";
    if !pem.windows(marker.len()).any(|w| w == marker) {
        return Err("it holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)".into());
    }
    Ok(pem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_needs_tls_a_certificate_and_a_bounded_size() {
        let dir = std::env::temp_dir().join(format!("mcp-state-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = "rediss://:pw@127.0.0.1:6390/";

        let missing = dir.join("missing.pem");
        let e = client(url, true, Some(&missing)).unwrap_err();
        assert!(e.to_string().contains("missing.pem"), "{e}");
        assert!(e.to_string().contains("`ca_file`"), "{e}");

        let plain = client("redis://127.0.0.1:6390/", false, Some(&missing)).unwrap_err();
        assert!(plain.to_string().contains("`rediss://` only"), "{plain}");

        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate").unwrap();
        let e = client(url, true, Some(&empty)).unwrap_err();
        assert!(e.to_string().contains("no PEM certificate"), "{e}");

        let huge = dir.join("huge.pem");
        std::fs::write(&huge, vec![b'a'; MAX_CA_FILE as usize + 1]).unwrap();
        let e = client(url, true, Some(&huge)).unwrap_err();
        assert!(e.to_string().contains("more than"), "{e}");

        let broken = dir.join("broken.pem");
        std::fs::write(
            &broken,
            "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = client(url, true, Some(&broken)).unwrap_err();
        assert!(
            matches!(&e, StateError::CaFile { path, .. } if *path == broken),
            "{e:?}"
        );
        assert!(!e.to_string().contains("pw@"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
