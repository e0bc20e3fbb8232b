use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

fn headers(pairs: &[(&str, &str)]) -> BTreeMap<String, Secret> {
    pairs
        .iter()
        .map(|(n, v)| ((*n).to_owned(), Secret::from(*v)))
        .collect()
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(f)
}

/// Resolves `spec` for server `srv` and renders the outcome: the headers (name=value) or the
/// error's message.
fn check(spec: &AuthSpec, expected: &str) {
    let rendered = match from_spec("srv", spec) {
        Ok(provider) => {
            let creds = block_on(provider.credentials()).expect("credentials");
            creds
                .headers()
                .map(|(n, v)| format!("{n}={}", v.to_str().unwrap()))
                .collect::<Vec<_>>()
                .join("; ")
        }
        Err(e) => format!("error: {e}"),
    };
    assert_eq!(rendered, expected);
}

#[test]
fn from_spec_cases() {
    check(&AuthSpec::default(), "");

    let mut spec = AuthSpec::default();
    spec.headers = headers(&[("X-Api-Key", "k1"), ("X-Tenant", "acme")]);
    check(&spec, "x-api-key=k1; x-tenant=acme");

    let mut spec = AuthSpec::default();
    spec.bearer = Some(SecretSource::Inline(Secret::from("tok")));
    check(&spec, "authorization=Bearer tok");

    let mut spec = AuthSpec::default();
    spec.headers = headers(&[("X-Tenant", "acme")]);
    spec.bearer = Some(SecretSource::Inline(Secret::from("tok")));
    check(&spec, "x-tenant=acme; authorization=Bearer tok");

    let mut spec = AuthSpec::default();
    spec.headers = headers(&[("Authorization", "Basic abc")]);
    spec.bearer = Some(SecretSource::Inline(Secret::from("tok")));
    check(
        &spec,
        "error: server `srv`: header `authorization` is set twice by the auth configuration",
    );

    let mut spec = AuthSpec::default();
    spec.bearer = Some(SecretSource::Env("MCP_AUTH_TEST_SURELY_UNSET_VAR".into()));
    check(
        &spec,
        "error: server `srv`: environment variable `MCP_AUTH_TEST_SURELY_UNSET_VAR` (bearer_token_env) is not set or not valid UTF-8",
    );

    let mut spec = AuthSpec::default();
    spec.headers = headers(&[("bad header", "v")]);
    check(
        &spec,
        "error: server `srv`: `bad header` is not a valid HTTP header name",
    );

    let mut spec = AuthSpec::default();
    spec.headers = headers(&[("X-Key", "line\nbreak-secret")]);
    check(
        &spec,
        "error: server `srv`: the value of header `X-Key` is not a valid HTTP header value (control characters or non-visible bytes)",
    );
}

#[test]
fn bearer_token_env_reads_the_variable_when_built() {
    // PATH is set wherever tests run; no test mutates the environment.
    let path = std::env::var("PATH").expect("PATH is set");
    let provider = BearerToken::from_env("srv", "PATH").expect("PATH resolves");
    let creds = block_on(provider.credentials()).unwrap();
    assert_eq!(
        creds.get("Authorization").unwrap().to_str().unwrap(),
        format!("Bearer {path}")
    );
}

#[test]
fn secrets_never_show_in_debug_or_errors() {
    let secret = "s3cr3t-value";
    let mut spec = AuthSpec::default();
    spec.headers = headers(&[("Authorization", secret)]);
    spec.bearer = Some(SecretSource::Inline(Secret::from(secret)));
    let err = from_spec("srv", &spec).unwrap_err();
    assert!(!format!("{err:?} {err}").contains(secret));

    let mut spec = AuthSpec::default();
    spec.bearer = Some(SecretSource::Inline(Secret::from(secret)));
    let provider = from_spec("srv", &spec).unwrap();
    let creds = block_on(provider.credentials()).unwrap();
    let shown = format!("{provider:?} {creds:?}");
    assert!(!shown.contains(secret), "{shown}");
    assert!(shown.contains("authorization"), "{shown}");

    let bad = AuthError::InvalidHeaderValue {
        server: "srv".into(),
        name: "X-Key".into(),
    };
    assert!(!format!("{bad:?} {bad}").contains(secret));
}

#[derive(Debug, Default)]
struct Rotating {
    asked: AtomicUsize,
}

#[async_trait]
impl AuthProvider for Rotating {
    async fn credentials(&self) -> Result<Credentials, AuthError> {
        let n = self.asked.load(Ordering::SeqCst);
        Credentials::bearer("srv", &Secret::new(format!("t{n}")))
    }
    async fn on_unauthorized(
        &self,
        _rejected: &Credentials,
        _challenge: Option<&str>,
    ) -> Result<OnUnauthorized, AuthError> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Ok(OnUnauthorized::Retry)
    }
}

#[test]
fn chain_merges_in_order_and_retries_when_any_member_does() {
    let rotating = Arc::new(Rotating::default());
    let chain = Chain::new(vec![
        Arc::new(StaticHeaders::new("srv", &headers(&[("Authorization", "Basic x")])).unwrap())
            as Arc<dyn AuthProvider>,
        rotating.clone(),
    ]);
    block_on(async {
        let first = chain.credentials().await.unwrap();
        assert_eq!(first.get("authorization").unwrap(), "Bearer t0");
        assert_eq!(
            chain.on_unauthorized(&first, Some("Bearer")).await.unwrap(),
            OnUnauthorized::Retry
        );
        let second = chain.credentials().await.unwrap();
        assert_eq!(second.get("authorization").unwrap(), "Bearer t1");
        assert!(second.get("authorization").unwrap().is_sensitive());
    });

    let only_static = Chain::new(vec![Arc::new(NoAuth)]);
    assert_eq!(
        block_on(only_static.on_unauthorized(&Credentials::none(), None)).unwrap(),
        OnUnauthorized::Fail
    );
}

#[test]
fn empty_or_blank_tokens_are_refused_never_sent() {
    for blank in ["", "  \t "] {
        let mut spec = AuthSpec::default();
        spec.bearer = Some(SecretSource::Inline(Secret::from(blank)));
        check(
            &spec,
            "error: server `srv`: `bearer_token` is empty or only whitespace; an empty credential is never sent",
        );
    }
    // A variable set to the empty string: named, like an unset one.
    let err = non_empty(
        "srv",
        "bearer_token_env",
        Some("TOKEN_VAR"),
        Some(Secret::from(" ")),
    )
    .unwrap_err();
    assert!(matches!(err, AuthError::EmptySecret { .. }));
    assert!(err.is_config());
    assert_eq!(
        err.to_string(),
        "server `srv`: environment variable `TOKEN_VAR` (bearer_token_env) is empty or only whitespace; an empty credential is never sent"
    );
    assert_eq!(env_setting("client_secret"), "client_secret_env");
}
