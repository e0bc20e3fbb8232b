//! `mcp-test-server`: the test kit's MCP servers over stdio. See `--help`.

use clap::Parser as _;
use mcp_test_kit::stdio::{StdioServerArgs, run};

#[tokio::main]
async fn main() {
    let args = StdioServerArgs::parse();
    let code = match run(args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mcp-test-server: {e}");
            1
        }
    };
    std::process::exit(code);
}
