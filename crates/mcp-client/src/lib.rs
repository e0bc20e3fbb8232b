//! Per-run MCP orchestration.
//!
//! For one agent run: resolve the run's servers, connect them in parallel through
//! [`Connectors`], initialise, list every tool, build the catalog, and hand back a runner that
//! closes every session when its scope ends.

mod error;
mod handler;
mod session;

pub use error::{ClientError, SessionError};
pub use session::{Connectors, ServerIdentity, Session};
