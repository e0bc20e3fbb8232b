//! Any bytes, as TOML, JSON, a server spec or a run's metadata: loaded or refused, never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_config::{Config, FileFormat, RunSelection, ServerSpec, SpecOrigin};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let vars = [("HOME", "/root"), ("TOKEN", "t")];
    let _ = Config::parse(text, FileFormat::Toml, vars);
    let _ = Config::parse(text, FileFormat::Json, vars);
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
        let _ = Config::from_json(&value);
        let _ = ServerSpec::from_json(&value, SpecOrigin::Inline);
        if let serde_json::Value::Object(map) = &value {
            let _ = RunSelection::from_metadata(map);
        }
    }
});
