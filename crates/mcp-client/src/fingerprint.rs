//! A spec's identity ([`Fingerprint`]), by which the session pool keeps its sessions and the
//! client remembers what it learned of a server's lifecycle.

use std::hash::{DefaultHasher, Hash, Hasher};

use mcp_config::{ServerSpec, TransportSpec};

/// A spec's identity: a 128-bit hash of everything that makes up its sessions.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Fingerprint(u64, u64);

impl std::fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}{:016x}", self.0, self.1)
    }
}

impl Fingerprint {
    /// The fingerprint of `spec` as configured (before a run fills in its default timeouts).
    pub(crate) fn of(spec: &ServerSpec) -> Self {
        // The spec's own JSON shows every field but redacts secrets and a custom transport's
        // strings: both are added as they are.
        let mut material = serde_json::to_string(spec).unwrap_or_default();
        if let TransportSpec::Custom(custom) = &spec.transport {
            material.push('\0');
            material.push_str(&serde_json::Value::Object(custom.params.clone()).to_string());
        }
        for secret in spec.secret_values() {
            material.push('\0');
            material.push_str(secret.expose());
        }
        let half = |seed: u8| {
            let mut hasher = DefaultHasher::new();
            seed.hash(&mut hasher);
            material.hash(&mut hasher);
            hasher.finish()
        };
        Self(half(1), half(2))
    }
}
