//! Certificates for TLS tests, made when the test runs (rcgen): a certificate authority of the
//! test's own and a server certificate it issues for `127.0.0.1` and `localhost`, written as
//! PEM files into a temporary directory that is removed on drop.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};

/// A fresh certificate authority and the server certificate it signed, as files: `ca.pem`,
/// `server.pem` and `server.key` (PKCS#8). Two `TestCa`s never trust each other's server.
///
/// ```
/// let ca = mcp_test_kit::tls::TestCa::new();
/// let pem = std::fs::read_to_string(ca.ca_file()).unwrap();
/// assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"));
/// assert!(ca.cert_file().exists() && ca.key_file().exists());
/// ```
#[derive(Debug)]
pub struct TestCa {
    dir: tempfile::TempDir,
    ca_der: rustls::pki_types::CertificateDer<'static>,
}

impl TestCa {
    /// Generates the authority and the server certificate and writes the three files. Panics
    /// when the key cannot be generated or the files written (a test cannot go on).
    ///
    /// ```
    /// let ca = mcp_test_kit::tls::TestCa::new();
    /// assert_eq!(ca.ca_file().file_name().unwrap(), "ca.pem");
    /// ```
    pub fn new() -> Self {
        let ca_key = KeyPair::generate().expect("a CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        // A name of its own: a client trusting another test CA finds no issuer at all.
        static MADE: AtomicU64 = AtomicU64::new(0);
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        ca_params.distinguished_name.push(
            DnType::CommonName,
            format!("mcp-agent test CA {}-{n}", std::process::id()),
        );
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).expect("the CA");

        let server_key = KeyPair::generate().expect("a server key");
        let mut params = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
            .expect("server params");
        params
            .distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        let server = params.signed_by(&server_key, &ca).expect("the server cert");

        let dir = tempfile::tempdir().expect("a directory for the certificates");
        let write = |name: &str, text: String| {
            std::fs::write(dir.path().join(name), text)
                .unwrap_or_else(|e| panic!("writing {name}: {e}"))
        };
        write("ca.pem", ca.pem());
        write("server.pem", server.pem());
        write("server.key", server_key.serialize_pem());
        Self {
            ca_der: ca.der().clone(),
            dir,
        }
    }

    /// The authority's certificate (PEM): what a client trusts.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The server's certificate (PEM), for `127.0.0.1` and `localhost`.
    pub fn cert_file(&self) -> PathBuf {
        self.dir.path().join("server.pem")
    }

    /// The server's private key (PEM, PKCS#8).
    pub fn key_file(&self) -> PathBuf {
        self.dir.path().join("server.key")
    }

    /// The directory of the three files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A rustls client configuration (ring) that trusts this authority alone.
    ///
    /// ```
    /// let ca = mcp_test_kit::tls::TestCa::new();
    /// let config = ca.client_config();
    /// assert!(config.alpn_protocols.is_empty());
    /// ```
    pub fn client_config(&self) -> rustls::ClientConfig {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(self.ca_der.clone())
            .expect("the CA certificate is a trust anchor");
        rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("the ring provider's protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth()
    }
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}
