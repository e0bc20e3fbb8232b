//! The `mcp-agent` command-line tool.

fn main() {}
