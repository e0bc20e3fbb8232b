//! [`FileTokenStore`]: one file per login under the user's state directory, mode 0600,
//! written atomically; refused when others can read it; a lock file per server for logins.

use std::ffi::OsString;
use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use ring::digest::{SHA256, digest};
use serde::{Deserialize, Serialize};

use super::record::LoginRecord;
use super::store::{LoginKey, LoginLock, StoredLogin, TokenStore, unix_now};
use crate::StoreError;

/// A lock file older than this is left over from a login that died: it is taken over.
const STALE_LOCK_SECS: u64 = 15 * 60;

/// The largest login file read.
const MAX_FILE_BYTES: u64 = 256 * 1024;

/// Logins kept in files, one per login, in a directory only the user may read:
/// `$XDG_STATE_HOME/mcp-agent/oauth/`, else `~/.local/state/mcp-agent/oauth/`
/// ([`default_location`](Self::default_location)).
///
/// - Files are written with mode 0600 (the directory 0700) through a temporary file renamed
///   over the old one, so a reader never sees half a file.
/// - A file that group or others can read or write is refused, with the fix named
///   ([`StoreError::Permissions`]: `chmod 600 <path>`); nothing is read from it.
/// - [`lock_login`](TokenStore::lock_login) creates `<hash>.lock` exclusively: a second
///   login to the same server, in any process, gets [`StoreError::LoginInProgress`] naming
///   the holder and the file. A lock older than 15 minutes is taken over.
#[derive(Clone)]
pub struct FileTokenStore {
    dir: PathBuf,
}

impl fmt::Debug for FileTokenStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileTokenStore")
            .field("dir", &self.dir)
            .finish()
    }
}

/// A login as written to its file: a version, then the login's fields.
#[derive(Serialize, Deserialize)]
struct FileLogin {
    version: u32,
    #[serde(flatten)]
    login: LoginRecord,
}

impl FileTokenStore {
    /// A store in `dir` (created, mode 0700, when the first login is saved).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The store under the user's state directory: `$XDG_STATE_HOME/mcp-agent/oauth`, else
    /// `$HOME/.local/state/mcp-agent/oauth`.
    pub fn default_location() -> Result<Self, StoreError> {
        state_dir(std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME"))
            .map(|base| Self::new(base.join("mcp-agent").join("oauth")))
            .ok_or(StoreError::NoStateDir)
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of the login under `key`.
    pub fn path_of(&self, key: &LoginKey) -> PathBuf {
        let name = hex_digest(&[&key.issuer, &key.client_id, &key.resource]);
        self.dir.join(format!("login-{name}.json"))
    }

    /// The lock file of logins to the server at `server_url`.
    pub fn lock_path(&self, server_url: &str) -> PathBuf {
        self.dir
            .join(format!("login-{}.lock", hex_digest(&[server_url])))
    }

    fn ensure_dir(&self) -> Result<(), StoreError> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| io_error("create", &self.dir, &e))
    }

    fn read(&self, path: &Path) -> Result<Option<StoredLogin>, StoreError> {
        let meta = match fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error("read", path, &e)),
        };
        if !meta.file_type().is_file() {
            return Err(corrupt(path, "not a regular file"));
        }
        check_private(path, meta.permissions().mode())?;
        if meta.len() > MAX_FILE_BYTES {
            return Err(corrupt(path, "larger than a login can be"));
        }
        let text = fs::read(path).map_err(|e| io_error("read", path, &e))?;
        let file: FileLogin = serde_json::from_slice(&text)
            .map_err(|e| corrupt(path, &format!("{} at line {}", e.classify_name(), e.line())))?;
        if file.version != 1 {
            return Err(corrupt(path, "written by another version"));
        }
        Ok(Some(file.login.into()))
    }

    fn write(&self, login: &StoredLogin) -> Result<(), StoreError> {
        self.ensure_dir()?;
        let path = self.path_of(&login.key());
        let file = FileLogin {
            version: 1,
            login: LoginRecord::from(login),
        };
        let text = serde_json::to_vec_pretty(&file)
            .map_err(|_| StoreError::Other("a login could not be encoded".to_owned()))?;
        let tmp = self.dir.join(format!(
            ".{}.{}.tmp",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("login"),
            std::process::id()
        ));
        let _ = fs::remove_file(&tmp);
        let written = (|| {
            let mut out = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            out.write_all(&text)?;
            out.sync_all()?;
            fs::rename(&tmp, &path)
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(io_error("write", &path, &e));
        }
        Ok(())
    }
}

#[async_trait]
impl TokenStore for FileTokenStore {
    async fn load(&self, key: &LoginKey) -> Result<Option<StoredLogin>, StoreError> {
        self.read(&self.path_of(key))
    }

    async fn save(&self, login: &StoredLogin) -> Result<(), StoreError> {
        self.write(login)
    }

    async fn remove(&self, key: &LoginKey) -> Result<bool, StoreError> {
        let path = self.path_of(key);
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_error("remove", &path, &e)),
        }
    }

    async fn list(&self) -> Result<Vec<StoredLogin>, StoreError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error("read", &self.dir, &e)),
        };
        let mut paths: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("login-") && n.ends_with(".json"))
            })
            .collect();
        paths.sort();
        let mut logins = Vec::new();
        for path in paths {
            logins.extend(self.read(&path)?);
        }
        Ok(logins)
    }

    fn lock_login(&self, server_url: &str) -> Result<LoginLock, StoreError> {
        self.ensure_dir()?;
        let path = self.lock_path(server_url);
        for _ in 0..2 {
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(mut file) => {
                    let _ = writeln!(file, "pid {} since {}", std::process::id(), unix_now());
                    let held = path.clone();
                    return Ok(LoginLock::new(move || {
                        let _ = fs::remove_file(&held);
                    }));
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    let holder = fs::read_to_string(&path).unwrap_or_default();
                    let since = holder
                        .split_whitespace()
                        .last()
                        .and_then(|t| t.parse::<u64>().ok());
                    if since.is_some_and(|t| unix_now().saturating_sub(t) > STALE_LOCK_SECS) {
                        let _ = fs::remove_file(&path);
                        continue;
                    }
                    let holder = match holder.trim() {
                        "" => "a login that just started".to_owned(),
                        text => mcp_config::bounded_text(text, 64),
                    };
                    return Err(StoreError::LoginInProgress {
                        holder,
                        path: Some(path),
                    });
                }
                Err(e) => return Err(io_error("create", &path, &e)),
            }
        }
        Err(StoreError::LoginInProgress {
            holder: "another process".to_owned(),
            path: Some(path),
        })
    }
}

/// The user's state directory: `XDG_STATE_HOME` when it is an absolute path (the XDG base
/// directory spec ignores a relative one), else `HOME/.local/state`.
fn state_dir(xdg: Option<OsString>, home: Option<OsString>) -> Option<PathBuf> {
    xdg.filter(|v| Path::new(v).is_absolute())
        .map(PathBuf::from)
        .or_else(|| {
            home.filter(|v| !v.is_empty())
                .map(|home| PathBuf::from(home).join(".local").join("state"))
        })
}

/// Refuses a file whose group or other permission bits are set.
fn check_private(path: &Path, mode: u32) -> Result<(), StoreError> {
    if mode & 0o077 != 0 {
        return Err(StoreError::Permissions {
            path: path.to_owned(),
            mode: mode & 0o777,
            fix: 0o600,
        });
    }
    Ok(())
}

fn io_error(action: &'static str, path: &Path, error: &std::io::Error) -> StoreError {
    StoreError::Io {
        action,
        path: path.to_owned(),
        detail: error.to_string(),
    }
}

fn corrupt(path: &Path, message: &str) -> StoreError {
    StoreError::Corrupt {
        path: path.to_owned(),
        message: message.to_owned(),
    }
}

/// The first 16 bytes of the SHA-256 of `parts` (joined by a newline), in hex.
fn hex_digest(parts: &[&str]) -> String {
    let hash = digest(&SHA256, parts.join("\n").as_bytes());
    data_encoding::HEXLOWER.encode(&hash.as_ref()[..16])
}

/// What kind of JSON problem, in words (no excerpt of the file: it holds tokens).
trait Classify {
    fn classify_name(&self) -> &'static str;
}

impl Classify for serde_json::Error {
    fn classify_name(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "unreadable",
            serde_json::error::Category::Syntax => "not JSON",
            serde_json::error::Category::Data => "missing or mistyped fields",
            serde_json::error::Category::Eof => "cut short",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_directory_follows_xdg_then_home() {
        let dir = |xdg: Option<&str>, home: Option<&str>| {
            state_dir(xdg.map(Into::into), home.map(Into::into))
        };
        assert_eq!(
            dir(Some("/x/state"), Some("/home/u")),
            Some("/x/state".into())
        );
        assert_eq!(
            dir(Some("relative"), Some("/home/u")),
            Some("/home/u/.local/state".into())
        );
        assert_eq!(
            dir(None, Some("/home/u")),
            Some("/home/u/.local/state".into())
        );
        assert_eq!(dir(Some(""), Some("")), None);
        assert_eq!(dir(None, None), None);
        let store = FileTokenStore::new("/s");
        let key = LoginKey {
            issuer: "https://as".into(),
            client_id: "c".into(),
            resource: "https://mcp/mcp".into(),
        };
        let path = store.path_of(&key);
        assert!(path.starts_with("/s"));
        assert_eq!(path.file_name().unwrap().len(), "login-.json".len() + 32);
        assert_ne!(store.lock_path("https://a"), store.lock_path("https://b"));
    }
}
