//! Result normalisation never panics, whatever a server sends as a `tools/call` result.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rmcp::model::CallToolResult;

fuzz_target!(|data: &[u8]| {
    if let Ok(result) = serde_json::from_slice::<CallToolResult>(data) {
        match mcp_catalog::normalize_result("fuzz", "fuzz__tool", result) {
            Ok(output) => {
                let _ = output.to_model_text();
            }
            Err(error) => {
                let _ = error.to_string();
            }
        }
    }
});
