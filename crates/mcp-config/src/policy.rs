//! The `[policy]` table: which servers' tools may run, which calls need approval, and how much
//! of a result the model sees.

use agent_core::{ApprovalRules, IdentityRules, OutputLimits};
use serde::Serialize;

/// The operator's `[policy]`: identity rules (`allow`, `deny`), approval rules (`approve`,
/// `approve_destructive`, `approve_open_world`) and the output bounds (`max_output_bytes`,
/// `max_spill_bytes`).
///
/// Rules are `{ server, tool }` globs matched against the server's initialize identity
/// (`serverInfo.name`, which may contain `/`) and the tool's name on that server — never the
/// configuration key. `tool` defaults to `*`. Deny wins over allow; with an `allow` list set,
/// a tool that no allow rule matches is neither shown nor run.
///
/// ```
/// use mcp_config::{Config, FileFormat};
///
/// let config = Config::parse(
///     r#"
/// [policy]
/// allow = [{ server = "mcp-servers/everything", tool = "*" }]
/// deny = [{ server = "*", tool = "delete_*" }]
/// approve = [{ server = "github*", tool = "create_*" }]
/// approve_destructive = true
/// max_output_bytes = 32768
/// max_spill_bytes = 67108864
/// "#,
///     FileFormat::Toml,
///     std::iter::empty::<(&str, &str)>(),
/// )?;
/// let policy = &config.policy;
/// assert!(policy.identity.allows(Some("mcp-servers/everything"), "echo").is_ok());
/// assert!(policy.identity.allows(Some("mcp-servers/everything"), "delete_all").is_err());
/// assert!(policy.approval.approve_destructive);
/// assert_eq!(policy.output_limits().max_output_bytes, 32768);
/// assert_eq!(policy.output_limits().max_spill_bytes, 64 << 20);
/// # Ok::<(), mcp_config::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PolicyConfig {
    /// `allow` and `deny`.
    #[serde(flatten)]
    pub identity: IdentityRules,
    /// `approve`, `approve_destructive` and `approve_open_world`.
    #[serde(flatten)]
    pub approval: ApprovalRules,
    /// The most bytes of one result the model sees; the default
    /// ([`agent_core::DEFAULT_MAX_OUTPUT_BYTES`], 64 KiB) when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_bytes: Option<usize>,
    /// The most bytes of cut outputs spilled to disk, per run and for the whole process (a
    /// gateway's sessions share it); the default ([`agent_core::DEFAULT_MAX_SPILL_BYTES`],
    /// 256 MiB) when `None`. 0 spills nothing: outputs beyond the memory budget are not kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_spill_bytes: Option<u64>,
}

impl PolicyConfig {
    /// The output limits this policy asks for (the defaults, with `max_output_bytes` and
    /// `max_spill_bytes` when set).
    ///
    /// ```
    /// let policy = mcp_config::PolicyConfig::default()
    ///     .with_max_output_bytes(Some(4096))
    ///     .with_max_spill_bytes(Some(1 << 20));
    /// assert_eq!(policy.output_limits().max_output_bytes, 4096);
    /// assert_eq!(policy.output_limits().max_spill_bytes, 1 << 20);
    /// ```
    pub fn output_limits(&self) -> OutputLimits {
        let mut limits = OutputLimits::default();
        if let Some(bytes) = self.max_output_bytes {
            limits = limits.with_max_output_bytes(bytes);
        }
        if let Some(bytes) = self.max_spill_bytes {
            limits = limits.with_max_spill_bytes(bytes);
        }
        limits
    }

    /// Sets the identity rules.
    #[must_use]
    pub fn with_identity(mut self, identity: IdentityRules) -> Self {
        self.identity = identity;
        self
    }

    /// Sets the approval rules.
    #[must_use]
    pub fn with_approval(mut self, approval: ApprovalRules) -> Self {
        self.approval = approval;
        self
    }

    /// Sets the output bound.
    #[must_use]
    pub fn with_max_output_bytes(mut self, bytes: Option<usize>) -> Self {
        self.max_output_bytes = bytes;
        self
    }

    /// Sets the bound on spilled outputs.
    #[must_use]
    pub fn with_max_spill_bytes(mut self, bytes: Option<u64>) -> Self {
        self.max_spill_bytes = bytes;
        self
    }
}
