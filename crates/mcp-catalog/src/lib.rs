//! The lazy MCP tool catalog.
//!
//! Work in progress: the session seam ([`ToolSession`]) is stable; the catalog follows.

pub mod eval;
pub mod search;
mod session;

pub use session::{SessionError, ToolSession};
