//! The lazy MCP tool catalog: what the model sees of the tools of a run's MCP servers.
//!
//! A [`Catalog`] holds the tools of every server of one run under model-safe `server__tool`
//! names, shows the model a small lazy surface — `mcp_search_tools` and `mcp_call_tool` plus
//! native tools, and [`ReadOutput`] (`mcp_read_output`) for the governed layer to serve —
//! instead of every schema, ranks tools with a fielded BM25 index
//! ([`search`]), validates arguments against each tool's JSON Schema before forwarding them
//! unchanged, and turns MCP results into typed [`agent_core::ToolOutput`]s and
//! [`agent_core::ToolError`]s.
//!
//! # Architecture invariant
//!
//! The catalog knows nothing about transports: its call path goes through the small
//! [`ToolSession`] trait, which the orchestration implements over rmcp client sessions and
//! tests implement with in-memory fakes ([`testing`]). `cargo tree -p mcp-catalog` holds no
//! transport crate, no hyper and no tokio `process` (tidy test `tidy_catalog_knows_no_transport`).
//! From rmcp it uses the model types only (`Tool`, `CallToolResult`, `ContentBlock`).
//!
//! # Entry points
//!
//! - [`Catalog::new`] / [`Catalog::with_native_tools`], then [`Catalog::add_server`] with a
//!   [`ServerTools`] per server (key, identity, session, listed tools);
//!   [`Catalog::replace_tools`] after `notifications/tools/list_changed` (re-indexes that server
//!   only); [`Catalog::remove_server`].
//! - [`agent_core::ToolCatalog::tools`] — what the model sees: tools the identity rules
//!   ([`CatalogConfig::identity_rules`], the `[policy]` `allow` / `deny`) refuse are never
//!   shown, searched or promoted ([`CatalogTool::is_hidden`]).
//! - [`agent_core::CallResolver`] — the catalog runs calls only as the wrapped side of a
//!   [`agent_core::Governed`] layer: `resolve` tells the layer the real tool behind a call
//!   (`mcp_call_tool` included: action ref `server__tool`, server key and identity, remote
//!   name, inner arguments, hints), and the layer runs it with `dispatch_resolved` once
//!   identity rules, policy and approval agreed. [`Catalog::resolve`] shows the same as a
//!   [`CallTarget`].
//! - [`Catalog::search`] — the search itself, for a CLI (`tools search`) or a UI: tools, and
//!   the resources, templates, prompts and skills set with [`Catalog::set_features`], each
//!   result saying its [`FeatureKind`].
//! - `mcp_read` ([`READ_TOOL`]) — shown when a server offers something to read: a resource
//!   (server + URI), a prompt (server + name + arguments) or a skill file, through the
//!   session's [`ToolSession::read`], governed like any call (the `[policy]` `resource` /
//!   `prompt` rules decide it).
//!
//! ```
//! use std::sync::Arc;
//! use agent_core::{CallResolver, GovernedLayer, ToolCall, ToolDispatcher};
//! use mcp_catalog::{Catalog, CatalogConfig};
//! use mcp_catalog::testing::FakeServer;
//! use serde_json::json;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let catalog = Catalog::new(CatalogConfig::default());
//! catalog.add_server(Arc::new(FakeServer::everything()).into_server("demo")).unwrap();
//!
//! let args = json!({"tool_name": "demo__echo", "arguments": {"text": "hi"}});
//! let call = ToolCall::new("1", "mcp_call_tool", args.as_object().unwrap().clone());
//! // The layer learns the real tool first…
//! let (resolved, _) = CallResolver::resolve(&catalog, &mut call.clone()).unwrap();
//! assert_eq!(resolved.action_ref, "demo__echo");
//! // …then, once rules, policy and approval agree, runs the call.
//! let governed = GovernedLayer::new().layer(catalog);
//! let out = governed.dispatch(call).await.unwrap();
//! assert_eq!(out.structured, Some(json!({"text": "hi"})));
//! # });
//! ```
//!
//! # Search quality and speed
//!
//! ```text
//! cargo xtask search-eval --dataset datasets/bfcl [--json] [--subset even|odd]
//! cargo xtask bench
//! ```
//!
//! `search-eval` ranks the whole catalog for every query of a dataset (format in
//! `datasets/README.md`) and prints hit@1/5/10, recall@1/5/10, MRR and p50/p99 query
//! latency (release build). The test `tests/it/dataset.rs` checks the bfcl targets (hit@5 ≥ 0.88,
//! MRR ≥ 0.77) whenever the dataset is present. `bench` measures query latency on 1k and 10k
//! synthetic tools, index build time and index memory.
//!
//! # Feature flags
//!
//! - `testing` (off by default): the [`testing`] module, in-memory fake servers for tests of
//!   crates built on the catalog.
//!
//! # Fuzzing
//!
//! Result normalisation has a cargo-fuzz target in `crates/mcp-catalog/fuzz` (its own workspace,
//! so ordinary builds and CI never need nightly):
//!
//! ```text
//! cd crates/mcp-catalog/fuzz && cargo +nightly fuzz run normalize -- -max_total_time=60
//! ```
//!
//! A deterministic random-input test of the same property runs with the unit tests.

mod catalog;
mod config;
mod error;
pub mod eval;
mod features;
mod names;
mod normalize;
pub mod sanitize;
pub mod search;
mod session;
mod suggest;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod validate;

pub use catalog::{
    CALL_TOOL, CallTarget, Catalog, CatalogTool, Found, READ_OUTPUT_TOOL, READ_TOOL, ReadOutput,
    ResolvedRead, ResolvedTool, SEARCH_TOOL, SearchRequest, SearchResponse, ServerTools,
};
pub use config::{CatalogConfig, Exposure, ToolLimits};
pub use error::{CatalogError, SessionError, SkipReason, SkippedTool};
pub use features::{
    Feature, FeatureArgument, FeatureKind, FeatureLimits, ServerFeatures, SkillEntry,
};
pub use names::{MAX_MODEL_NAME_LEN, SEPARATOR, external_name, model_name};
pub use normalize::normalize_result;
pub use session::{ReadRequest, ReadResult, ToolSession};
