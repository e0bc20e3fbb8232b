//! The connector registry: which connector opens which transport kind.

use std::sync::Arc;

use mcp_config::{ServerSpec, TransportKind};

use crate::{ConnectError, Connector};

/// The ways to reach servers: one [`Connector`] per transport kind, picked by each spec's
/// [`kind`](ServerSpec::kind).
///
/// A transport from outside this workspace registers its connector under its own kind
/// ([`TransportKind::Other`]) and is configured as `transport = "<kind>"` with its own
/// parameters ([`CustomSpec`](mcp_config::CustomSpec)); nothing else changes. A built-in kind
/// this build leaves out is registered as [`disabled`](Self::disabled), so a spec that needs
/// it is refused with the cargo feature that adds it.
///
/// ```
/// use async_trait::async_trait;
/// use mcp_config::{CustomSpec, ServerSpec, TransportKind, TransportSpec};
/// use mcp_connector::{ConnectError, Connection, Connector, Connectors};
///
/// struct Bus;
/// #[async_trait]
/// impl Connector for Bus {
///     fn kind(&self) -> TransportKind {
///         TransportKind::Other("message_bus".into())
///     }
///     async fn connect(&self, spec: &ServerSpec) -> Result<Connection, ConnectError> {
///         Err(ConnectError::Config { server: spec.name.clone(), message: "offline".into() })
///     }
/// }
///
/// let connectors = Connectors::new().with(Bus).disabled(TransportKind::Stdio, "stdio");
/// let bus = ServerSpec::new("bus", TransportSpec::Custom(CustomSpec::new("message_bus")));
/// assert!(connectors.for_spec(&bus).is_ok());
///
/// let other = ServerSpec::new("x", TransportSpec::Custom(CustomSpec::new("carrier_pigeon")));
/// let err = connectors.for_spec(&other).err().unwrap();
/// assert_eq!(
///     err.to_string(),
///     "server `x` uses the carrier_pigeon transport, for which no connector is registered (registered: message_bus)"
/// );
/// ```
#[derive(Clone, Default)]
pub struct Connectors {
    connectors: Vec<Arc<dyn Connector>>,
    disabled: Vec<(TransportKind, &'static str)>,
}

impl std::fmt::Debug for Connectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connectors")
            .field("kinds", &self.kinds())
            .field("disabled", &self.disabled)
            .finish()
    }
}

impl Connectors {
    /// No connectors: every spec is refused.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a connector; a later one for the same kind replaces an earlier one.
    #[must_use]
    pub fn with(mut self, connector: impl Connector + 'static) -> Self {
        let kind = connector.kind();
        self.connectors.retain(|c| c.kind() != kind);
        self.disabled.retain(|(k, _)| *k != kind);
        self.connectors.push(Arc::new(connector));
        self
    }

    /// Notes that `kind` is left out of this build and that the cargo `feature` adds it, so a
    /// spec of that kind is refused with [`ConnectError::Unsupported`] naming the feature.
    #[must_use]
    pub fn disabled(mut self, kind: TransportKind, feature: &'static str) -> Self {
        if !self.connectors.iter().any(|c| c.kind() == kind) {
            self.disabled.retain(|(k, _)| *k != kind);
            self.disabled.push((kind, feature));
        }
        self
    }

    /// The kinds a connector is registered for.
    pub fn kinds(&self) -> Vec<TransportKind> {
        self.connectors.iter().map(|c| c.kind()).collect()
    }

    /// The connector for `spec`'s transport.
    pub fn for_spec(&self, spec: &ServerSpec) -> Result<&dyn Connector, ConnectError> {
        let kind = spec.kind();
        if let Some(connector) = self.connectors.iter().find(|c| c.kind() == kind) {
            return Ok(&**connector);
        }
        if let Some((_, feature)) = self.disabled.iter().find(|(k, _)| *k == kind) {
            return Err(ConnectError::Unsupported {
                server: spec.name.clone(),
                kind,
                feature,
            });
        }
        Err(ConnectError::NoConnector {
            server: spec.name.clone(),
            kind,
            registered: self.kinds(),
        })
    }
}
