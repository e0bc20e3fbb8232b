//! The problem-collecting reader, for tables this crate keeps raw ([`Table`]: `[serve]`,
//! `[model]`) and any other JSON an application checks the way this crate does.
//!
//! Each function returns what it could read and pushes a problem for what it could not, at
//! the value's [`JsonPath`], to a [`Problems`] collector, and the caller goes on: one pass
//! finds every problem. Given to [`Config::load_with`](crate::Config::load_with) (or
//! [`parse_with`](crate::Config::parse_with)), a reader's problems join the loader's, so the
//! operator sees all of them at once. Messages name fields and words, never values that could
//! be secrets.
//!
//! ```
//! use mcp_config::read::{JsonPath, Problems, Table, as_str, whole_number};
//! use mcp_config::{Config, FileFormat, ProblemKind};
//!
//! /// The application's own `[serve]` settings.
//! fn read_serve(table: &Table, p: &mut Problems) -> (Option<String>, Option<u64>) {
//!     table.reject_unknown(&["http", "max_sessions"], p);
//!     let http = table.read("http", p, |v, at, p| as_str(v, at, p).map(str::to_owned));
//!     let max = table.read("max_sessions", p, |v, at, p| whole_number(v, at, 1, p));
//!     (http, max)
//! }
//!
//! let err = Config::parse_with(
//!     "[serve]\nmax_sessions = 0\ncolour = 1\n[[servers]]\nname = \"\"\ncommand = \"x\"\n",
//!     FileFormat::Toml,
//!     std::iter::empty::<(&str, &str)>(),
//!     |config: &Config, p: &mut Problems| read_serve(&config.serve, p),
//! )
//! .unwrap_err();
//! let paths: Vec<_> = err.problems().iter().map(|p| (p.kind, p.path.as_str())).collect();
//! assert!(paths.contains(&(ProblemKind::EmptyName, "servers[0].name")));
//! assert!(paths.contains(&(ProblemKind::InvalidValue, "serve.max_sessions")));
//! assert!(paths.contains(&(ProblemKind::UnknownField, "serve.colour")));
//! ```

pub use crate::parse::read::{
    MAX_TIMEOUT_SECS, as_bool, as_str, did_you_mean, expect_object, field, non_blank,
    parse_base_url, parse_http_url, parse_timeout, reject_unknown, shown, type_name, whole_number,
};
pub use crate::path::{JsonPath, Problems};
pub use crate::table::Table;
