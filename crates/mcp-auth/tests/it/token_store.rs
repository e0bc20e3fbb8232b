//! The file store: private files written atomically, files others can read refused with the
//! fix named, and one login per server at a time (a lock file) — also across processes.

use std::os::unix::fs::PermissionsExt as _;
use std::sync::Arc;

use mcp_auth::{AuthError, FileTokenStore, MemoryTokenStore, StoreError, TokenStore};
use mcp_config::OAuthLogin;
use serde_json::json;

use crate::fake::*;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn logins_are_written_private_and_read_back() {
    let dir = TempDir::new();
    let store = FileTokenStore::new(dir.path().join("state").join("oauth"));
    assert!(
        store.list().await.unwrap().is_empty(),
        "no directory yet: nothing stored"
    );
    let mut login = stored("access-abc-123456", Some("refresh-abc-123456"), Some(600));
    login.client_secret = Some("dyn-secret-123456".into());
    login.scope = Some("files:read".into());
    store.save(&login).await.unwrap();

    let path = store.path_of(&login.key());
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(store.dir()), 0o700);
    let leftovers: Vec<_> = std::fs::read_dir(store.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(leftovers.len(), 1, "no temporary file left: {leftovers:?}");

    assert_eq!(store.load(&login.key()).await.unwrap().unwrap(), login);
    assert_eq!(store.find(MCP_URL).await.unwrap(), [login.clone()]);
    assert!(
        store
            .find("https://other.example/mcp")
            .await
            .unwrap()
            .is_empty()
    );

    // Replaced whole, still private.
    let mut newer = login.clone();
    newer.access_token = "access-def-123456".into();
    store.save(&newer).await.unwrap();
    assert_eq!(store.list().await.unwrap(), [newer.clone()]);
    assert_eq!(mode(&path), 0o600);

    assert!(store.remove(&login.key()).await.unwrap());
    assert!(!store.remove(&login.key()).await.unwrap());
    assert!(store.load(&login.key()).await.unwrap().is_none());

    // A logout forgets every login of the server, and only those.
    let mut other_client = login.clone();
    other_client.client_id = "another".into();
    let mut other_server = login.clone();
    other_server.server_url = "https://other.example/mcp".into();
    other_server.resource = other_server.server_url.clone();
    for l in [&login, &other_client, &other_server] {
        store.save(l).await.unwrap();
    }
    assert_eq!(store.forget(MCP_URL).await.unwrap(), 2);
    assert_eq!(store.list().await.unwrap(), [other_server]);
}

#[tokio::test]
async fn a_token_file_others_can_read_is_refused_with_the_fix_named() {
    let dir = TempDir::new();
    let store = FileTokenStore::new(dir.path());
    let login = stored("access-abc-123456", None, Some(600));
    store.save(&login).await.unwrap();
    let path = store.path_of(&login.key());
    for bad in [0o644, 0o640, 0o604, 0o660] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(bad)).unwrap();
        let err = store.load(&login.key()).await.unwrap_err();
        assert!(matches!(err, StoreError::Permissions { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains(&format!("run `chmod 600 {}`", path.display())),
            "{text}"
        );
        assert!(text.contains(&format!("{bad:03o}")), "{text}");
        assert!(!text.contains("access-abc"), "{text}");
        assert!(store.list().await.is_err(), "listing refuses it too");
    }

    // Through the hook: the session's error names the server and the fix.
    let registry =
        mcp_auth::AuthRegistry::new(server(json!({}))).with_token_store(Arc::new(store.clone()));
    let hook = registry.login_tokens(&spec(OAuthLogin::default())).unwrap();
    use mcp_auth::AuthProvider as _;
    let err = hook.credentials().await.unwrap_err();
    assert!(matches!(err, AuthError::TokenStore { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with("server `srv`: token store: "),
        "{err}"
    );
    assert!(err.to_string().contains("chmod 600"), "{err}");

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(store.load(&login.key()).await.unwrap().is_some());
}

#[tokio::test]
async fn a_file_that_is_not_a_login_is_named_without_its_content() {
    let dir = TempDir::new();
    let store = FileTokenStore::new(dir.path());
    let login = stored("access-abc-123456", None, None);
    let path = store.path_of(&login.key());
    std::fs::write(&path, "{\"access_token\": \"leaked-value\"").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let err = store.load(&login.key()).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(!err.to_string().contains("leaked"), "{err}");
    assert!(err.to_string().contains("log in again"), "{err}");
}

#[tokio::test]
async fn two_logins_at_once_one_wins_and_the_other_reports_it() {
    let dir = TempDir::new();
    // Two stores on one directory: two processes.
    let first_store: Arc<dyn TokenStore> = Arc::new(FileTokenStore::new(dir.path()));
    let second_store: Arc<dyn TokenStore> = Arc::new(FileTokenStore::new(dir.path()));
    let fake = server(json!({}));
    let first = login_with(&fake, OAuthLogin::default(), first_store.clone())
        .start()
        .await
        .unwrap();
    let err = login_with(&fake, OAuthLogin::default(), second_store.clone())
        .start()
        .await
        .unwrap_err();
    let AuthError::TokenStore {
        error: StoreError::LoginInProgress { path, holder },
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    let lock = path.clone().unwrap();
    assert!(lock.exists());
    assert!(
        holder.contains(&format!("pid {}", std::process::id())),
        "{holder}"
    );
    assert!(
        err.to_string()
            .contains("another login for this server is in progress"),
        "{err}"
    );
    assert!(
        err.to_string().contains(&lock.display().to_string()),
        "{err}"
    );
    assert_eq!(mode(&lock), 0o600);

    // The winner finishes; the lock goes with it and the next login may start.
    let url = first.authorization_url().clone();
    first
        .finish(mcp_auth::Callback::parse(&redirect(
            &url,
            "c",
            Some(ISSUER),
        )))
        .await
        .unwrap();
    assert!(!lock.exists());
    let again = login_with(&fake, OAuthLogin::default(), second_store)
        .start()
        .await
        .unwrap();
    drop(again);
    assert!(!lock.exists(), "a login given up releases the lock");

    // A lock left by a login that died long ago is taken over.
    let store = FileTokenStore::new(dir.path());
    std::fs::write(&lock, "pid 1 since 1000\n").unwrap();
    let taken = store.lock_login(MCP_URL).unwrap();
    assert!(
        std::fs::read_to_string(&lock)
            .unwrap()
            .contains(&std::process::id().to_string())
    );
    drop(taken);

    // In memory, the same rule.
    let memory = MemoryTokenStore::new();
    let held = memory.lock_login(MCP_URL).unwrap();
    assert!(matches!(
        memory.lock_login(MCP_URL),
        Err(StoreError::LoginInProgress { path: None, .. })
    ));
    assert!(memory.lock_login("https://other.example/mcp").is_ok());
    drop(held);
    assert!(memory.lock_login(MCP_URL).is_ok());
}

#[tokio::test]
async fn a_new_login_replaces_one_under_another_issuer() {
    let store = memory();
    let mut old = stored("access-old-123456", None, Some(600));
    old.issuer = "https://old-auth.example".into();
    store.save(&old).await.unwrap();
    let fake = server(json!({}));
    let pending = login_with(&fake, OAuthLogin::default(), store.clone())
        .start()
        .await
        .unwrap();
    let url = pending.authorization_url().clone();
    let new = pending
        .finish(mcp_auth::Callback::parse(&redirect(
            &url,
            "c",
            Some(ISSUER),
        )))
        .await
        .unwrap();
    assert_eq!(store.list().await.unwrap(), [new]);
}
