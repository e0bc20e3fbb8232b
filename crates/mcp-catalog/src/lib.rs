//! The lazy MCP tool catalog.
//!
//! Work in progress.

mod catalog;
mod config;
mod error;
pub mod eval;
mod names;
mod normalize;
pub mod search;
mod session;
mod suggest;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod validate;

pub use catalog::{
    CALL_TOOL, CallTarget, Catalog, CatalogTool, ResolvedTool, SEARCH_TOOL, SearchRequest,
    SearchResponse, ServerTools,
};
pub use config::{CatalogConfig, Exposure};
pub use error::CatalogError;
pub use names::{MAX_MODEL_NAME_LEN, SEPARATOR, external_name, model_name};
pub use normalize::normalize_result;
pub use session::{SessionError, ToolSession};
