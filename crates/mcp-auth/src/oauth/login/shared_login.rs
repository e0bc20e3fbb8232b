//! A login's tokens through the fleet's shared store: the replicas use the fleet's latest
//! tokens, one of them refreshes at a time (under the store's lease, after a second look), and
//! the rotated refresh token goes to the store before the lease is released, so that no
//! replica ever sends a refresh token the fleet has spent.
//!
//! Which login a replica goes with, its token store's or the fleet's: the fleet's, unless the
//! replica's is a different and newer one (a new `mcp-agent auth login`). Ties and doubts go
//! to the fleet: a stored login whose access token is the fleet's, or whose refresh token the
//! fleet has spent (the entry remembers the latest spent ones by digest), is behind it. The
//! fleet's tokens are saved into the replica's token store, so that it stays current.
//!
//! A refresh token the authorization server refuses for good (`invalid_grant`) is recorded as
//! spent in the entry too, so that no other replica sends it again: the fleet needs a new
//! login. One that was sent without an answer (a timeout) is not: the next attempt sends it
//! again, as a replica alone would.
//!
//! When the store fails a fresh access token is still used; a refresh waits for the store
//! (an error now), unless [`SharedTokens::refresh_alone_on_error`] says to go ahead: two
//! replicas refreshing alone could both send one refresh token.
//!
//! [`SharedTokens::refresh_alone_on_error`]: crate::SharedTokens::refresh_alone_on_error

use std::sync::Arc;
use std::time::Duration;

use http::header::HeaderValue;
use tokio::time::Instant;

use super::super::failure::Failure;
use super::super::flight::Token;
use super::super::lock;
use super::super::share::{Acted, Flight, ShareHandle, SharedEntry};
use super::super::share_entry::{LoginEntry, SharedLogin, Validity};
use super::provider::{LoginTokens, Timing, login_header, no_refresh_token};
use super::store::StoredLogin;

/// How long the store keeps a login's entry beyond its access token: its refresh token lives
/// on. A fleet idle for longer starts again from its replicas' token stores, which hold the
/// tokens they last used.
const LOGIN_KEEP: Duration = Duration::from_secs(30 * 86_400);

/// The login a replica goes with.
struct Chosen {
    login: StoredLogin,
    /// The refresh tokens the fleet spent to reach the fleet's login (for its next entry).
    spent: Vec<String>,
    /// How fresh its access token is, when it is.
    timing: Option<Timing>,
    /// Its refresh token was refused for good when another replica sent it.
    refused: bool,
}

impl Chosen {
    /// The token to send, if the access token is fresh and not the one a server refused.
    fn ready(&self, rejected: Option<&HeaderValue>) -> Option<Token> {
        let timing = self.timing?;
        let (header, dpop) = login_header(&self.login).ok()?;
        (rejected != Some(&header)).then(|| timing.token(header, dpop))
    }
}

/// The login to go with, of this replica's stored one (`local`) and the fleet's (`shared`).
fn pick(
    local: Option<&StoredLogin>,
    shared: Option<SharedLogin>,
    expiry_skew: Duration,
) -> Option<Chosen> {
    let from_local = |login: &StoredLogin, spent: Vec<String>| Chosen {
        timing: Timing::of_stored(login, expiry_skew),
        login: login.clone(),
        spent,
        refused: false,
    };
    match (local, shared) {
        (None, None) => None,
        (Some(local), None) => Some(from_local(local, Vec::new())),
        (local, Some(shared)) => {
            let newer_here = local.filter(|local| {
                local.access_token != shared.login.access_token
                    && !local
                        .refresh_token
                        .as_ref()
                        .is_some_and(|r| shared.has_spent(r))
                    && local.obtained_at > shared.login.obtained_at
            });
            if let Some(local) = newer_here {
                return Some(from_local(local, shared.spent));
            }
            let refused = shared
                .login
                .refresh_token
                .as_ref()
                .is_some_and(|r| shared.has_spent(r));
            Some(Chosen {
                timing: Timing::fresh(shared.left.remaining, shared.left.lifetime, expiry_skew),
                login: shared.login,
                spent: shared.spent,
                refused,
            })
        }
    }
}

impl LoginTokens {
    /// The fleet's token for this login, else one refresh in the fleet.
    pub(super) async fn attempt_shared(
        &self,
        share: &Arc<ShareHandle>,
        name: &str,
        rejected: Option<HeaderValue>,
    ) -> Result<Token, Failure> {
        let local = self.load_stored().await?;
        let shared = &self.state.shared;
        let skew = shared.options.expiry_skew;
        let wait = shared.deadline / 2;
        let read = |entry: Option<&SharedEntry>| {
            let login = LoginEntry::decode(entry?, share.now())?;
            if login.left.skewed {
                share.skewed();
            }
            Some(login)
        };
        let usable = |entry: Option<&SharedEntry>| {
            let chosen = pick(local.as_ref(), read(entry), skew)?;
            let token = chosen.ready(rejected.as_ref())?;
            Some((chosen, token))
        };
        let (mine, refused, read_ref) = (local.as_ref(), rejected.as_ref(), &read);
        let act = move |entry: Option<SharedEntry>| async move {
            let chosen = pick(mine, read_ref(entry.as_ref()), skew).ok_or_else(|| {
                Failure::LoginRequired(format!("no stored OAuth login for {}", self.state.mcp_url))
            })?;
            if let Some(token) = chosen.ready(refused) {
                return Ok(Acted {
                    value: (chosen, token),
                    put: None,
                });
            }
            let refresh_token = chosen
                .login
                .refresh_token
                .clone()
                .ok_or_else(|| no_refresh_token(refused.is_some()))?;
            if chosen.refused {
                return Err(Failure::LoginRequired(
                    "the authorization server refused the login's refresh token (sent by another replica)"
                        .to_owned(),
                ));
            }
            let (token, renewed) = match self.refresh(&chosen.login, &refresh_token).await {
                Ok(refreshed) => refreshed,
                Err(failure @ Failure::LoginRequired(_)) => {
                    // Refused for good: remembered as spent, so that no replica sends it again.
                    let validity =
                        Validity::new(share.now(), Duration::ZERO, Duration::ZERO, LOGIN_KEEP);
                    let entry =
                        LoginEntry::new(&chosen.login, chosen.spent, &refresh_token, validity);
                    let ttl = validity.store_ttl(Duration::ZERO);
                    if let Err(error) = share.tokens.put(name, &entry.encode(), ttl).await {
                        share.failed(&error);
                    }
                    return Err(failure);
                }
                Err(failure) => return Err(failure),
            };
            let remaining = token.expires_at.saturating_duration_since(Instant::now());
            let validity = Validity::new(share.now(), remaining, token.lifetime, LOGIN_KEEP);
            let entry = LoginEntry::new(&renewed, chosen.spent, &refresh_token, validity);
            let put = Some((entry.encode(), validity.store_ttl(remaining)));
            let chosen = Chosen {
                login: renewed,
                spent: Vec::new(),
                timing: None,
                refused: false,
            };
            Ok(Acted {
                value: (chosen, token),
                put,
            })
        };
        match share
            .single_flight(name, wait, shared.deadline, usable, act)
            .await
        {
            Flight::Found((chosen, token)) | Flight::Acted(Ok((chosen, token))) => {
                self.adopt(chosen.login, local.as_ref()).await;
                Ok(token)
            }
            Flight::Acted(Err(failure)) => Err(failure),
            Flight::Alone(error) => {
                // A fresh token of this replica's own needs nobody.
                if let Some(chosen) = pick(local.as_ref(), None, skew)
                    && let Some(token) = chosen.ready(rejected.as_ref())
                {
                    self.adopt(chosen.login, local.as_ref()).await;
                    return Ok(token);
                }
                match error {
                    Some(_) if share.tokens.refresh_alone_on_error() => {
                        self.attempt_alone(rejected).await
                    }
                    Some(error) => Err(Failure::Share(error)),
                    None => Err(Failure::timeout(
                        "waiting for another replica's refresh of the OAuth login".to_owned(),
                        wait,
                    )),
                }
            }
        }
    }

    /// Uses `login` from now on: its secrets scrubbed, saved into the token store when it is
    /// not what the store holds (`local`), the login in use.
    async fn adopt(&self, login: StoredLogin, local: Option<&StoredLogin>) {
        self.remember_login(&login);
        if local != Some(&login)
            && let Err(error) = self.state.store.save(&login).await
        {
            // The fleet's store has it; this replica's token store lags behind.
            tracing::warn!(server = %self.server, %error, "could not save the fleet's OAuth login into the token store");
        }
        *lock(&self.state.current) = Some(login);
    }
}
