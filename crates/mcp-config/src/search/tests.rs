use std::path::PathBuf;
use std::time::Duration;

use crate::{Config, ConfigError, EmbedderConfig, FileFormat};

fn parse(toml: &str) -> Result<Config, ConfigError> {
    Config::parse(toml, FileFormat::Toml, std::iter::empty::<(&str, &str)>())
}

fn error(toml: &str) -> String {
    parse(toml).expect_err("should be refused").to_string()
}

/// A folder under the target's temp dir, holding `files`.
fn model_dir(name: &str, files: &[&str]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcp-config-search-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for file in files {
        std::fs::write(dir.join(file), b"{}").unwrap();
    }
    dir
}

#[test]
fn without_the_table_search_is_lexical() {
    assert_eq!(parse("").unwrap().search, None);
}

#[test]
fn an_openai_embedder_with_every_key() {
    let config = parse(
        r#"
[search]
embedder = { openai = { base_url = "http://127.0.0.1:9/v1/", model = "e5", api_key_env = "K" } }
weight = 0.25
cache_dir = "/tmp/vectors"
timeout_ms = 250
"#,
    )
    .unwrap();
    let search = config.search.unwrap();
    assert_eq!(
        search.embedder,
        EmbedderConfig::OpenAi {
            base_url: "http://127.0.0.1:9/v1".into(),
            model: "e5".into(),
            api_key_env: Some("K".into()),
        }
    );
    assert_eq!(search.weight, Some(0.25));
    assert_eq!(search.cache_dir, Some(PathBuf::from("/tmp/vectors")));
    assert_eq!(search.timeout, Some(Duration::from_millis(250)));
}

#[test]
fn a_complete_local_folder_is_accepted() {
    let dir = model_dir(
        "ok",
        &["config.json", "model.safetensors", "tokenizer.json"],
    );
    let config = parse(&format!(
        "[search]\nembedder = {{ local = {:?} }}\n",
        dir.display().to_string()
    ))
    .unwrap();
    assert_eq!(
        config.search.unwrap().embedder,
        EmbedderConfig::Local { path: dir.clone() }
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_missing_model_folder_is_named() {
    let message = error("[search]\nembedder = { local = \"/nonexistent/minilm\" }\n");
    assert!(message.contains("search.embedder.local"), "{message}");
    assert!(
        message.contains("`/nonexistent/minilm` does not exist"),
        "{message}"
    );
}

#[test]
fn an_incomplete_model_folder_names_the_missing_file() {
    let dir = model_dir("half", &["config.json", "tokenizer.json"]);
    let message = error(&format!(
        "[search]\nembedder = {{ local = {:?} }}\n",
        dir.display().to_string()
    ));
    assert!(message.contains(&dir.display().to_string()), "{message}");
    assert!(
        message.contains("`model.safetensors` is missing"),
        "{message}"
    );
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn a_relative_model_path_is_relative_to_the_file() {
    let dir = model_dir(
        "rel",
        &["config.json", "model.safetensors", "tokenizer.json"],
    );
    let file = dir
        .parent()
        .unwrap()
        .join(format!("search-rel-{}.toml", std::process::id()));
    let name = dir.file_name().unwrap().to_str().unwrap();
    std::fs::write(
        &file,
        format!("[search]\nembedder = {{ local = {name:?} }}\n"),
    )
    .unwrap();
    let config = Config::from_file(&file).unwrap();
    assert_eq!(
        config.search.unwrap().embedder,
        EmbedderConfig::Local { path: dir.clone() }
    );
    std::fs::remove_file(file).ok();
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn unknown_keys_are_refused_by_name() {
    let message = error(
        r#"
[search]
embedder = { openai = { base_url = "http://x/v1", model = "m", api_key = "sk-1" } }
wieght = 0.5
"#,
    );
    assert!(message.contains("search.wieght"), "{message}");
    assert!(message.contains("`weight`"), "{message}");
    assert!(
        message.contains("search.embedder.openai.api_key"),
        "{message}"
    );
    assert!(!message.contains("sk-1"), "{message}");
    let message = error("[search]\nembedder = { remote = \"x\" }\n");
    assert!(message.contains("search.embedder.remote"), "{message}");
}

#[test]
fn bad_values_are_refused() {
    let message = error(
        r#"
[search]
embedder = { openai = { base_url = "ftp://x", model = " " } }
weight = 1.5
timeout_ms = 0
"#,
    );
    for needle in [
        "search.embedder.openai.base_url",
        "search.embedder.openai.model",
        "search.weight",
        "search.timeout_ms",
    ] {
        assert!(message.contains(needle), "{needle}: {message}");
    }
    let message = error("[search]\nweight = 0.5\n");
    assert!(message.contains("search.embedder"), "{message}");
    let message = error(
        "[search]\nembedder = { local = \"/x\", openai = { base_url = \"http://x\", model = \"m\" } }\n",
    );
    assert!(message.contains("not both"), "{message}");
    let message = error("[search]\nembedder = { openai = { model = \"m\" } }\n");
    assert!(message.contains("base_url"), "{message}");
}

#[test]
fn a_long_model_path_is_shown_with_its_folder_name() {
    let deep = format!("/nonexistent/{}/all-MiniLM-L6-v2", "models/".repeat(12));
    let message = error(&format!("[search]\nembedder = {{ local = {deep:?} }}\n"));
    assert!(message.contains(&format!("`{deep}`")), "{message}");
    let huge = format!("/nonexistent/{}/all-MiniLM-L6-v2", "x".repeat(2_000));
    let message = error(&format!("[search]\nembedder = {{ local = {huge:?} }}\n"));
    assert!(
        message.contains("…") && message.contains("/all-MiniLM-L6-v2`"),
        "{message}"
    );
    assert!(message.len() < 1_000, "{} bytes", message.len());
}

#[test]
fn an_endpoint_with_a_query_or_fragment_is_refused_when_loading() {
    for url in [
        "https://x.example/v1?api-version=2024",
        "https://x.example/v1#frag",
    ] {
        let message = error(&format!(
            "[search]\nembedder = {{ openai = {{ base_url = {url:?}, model = \"m\" }} }}\n"
        ));
        assert!(
            message.contains("search.embedder.openai.base_url")
                && message.contains("must not have a query or fragment"),
            "{url}: {message}"
        );
    }
}
