//! Client credentials through the fleet's shared store: before a token request, the token
//! another replica obtained; one request in the fleet at a time (see `share.rs`); the token
//! obtained stored for the others. When the store fails, or another replica holds the lease
//! for longer than half the attempt's bound, this replica requests its own: a
//! client-credentials request spends nothing, so an extra one is only a cost.

use std::sync::Arc;
use std::time::Duration;

use http::header::HeaderValue;
use mcp_config::Secret;
use tokio::time::Instant;

use super::failure::Failure;
use super::flight::{Shared, Token};
use super::share::{Acted, Flight, ShareHandle, SharedEntry};
use super::share_entry::{TokenEntry, Validity};
use super::{Endpoint, lock};
use crate::Challenge;

/// A token with less left than this is not shared (the store's expiry is in milliseconds,
/// and a reader would find it stale anyway).
const MIN_SHARED: Duration = Duration::from_secs(1);

impl Shared {
    /// The fleet's token for this credential, else one token request in the fleet.
    pub(super) async fn obtain_shared(
        &self,
        share: &Arc<ShareHandle>,
        name: &str,
        endpoint: &Endpoint,
        challenge: &Challenge,
    ) -> Result<Token, Failure> {
        let rejected = lock(&self.state).rejected.clone();
        let usable =
            |entry: Option<&SharedEntry>| self.shared_token(share, entry?, rejected.as_ref());
        let flight = share
            .single_flight(name, self.deadline / 2, self.deadline, usable, |_| async {
                let token = self.request_token(endpoint, challenge).await?;
                Ok(Acted {
                    put: entry_of(share, &token),
                    value: token,
                })
            })
            .await;
        match flight {
            Flight::Found(token) => Ok(token),
            Flight::Acted(outcome) => outcome,
            Flight::Alone(_) => self.request_token(endpoint, challenge).await,
        }
    }

    /// The token in `entry`, if it is fresh for this replica and not the one a server refused.
    fn shared_token(
        &self,
        share: &ShareHandle,
        entry: &SharedEntry,
        rejected: Option<&HeaderValue>,
    ) -> Option<Token> {
        let decoded = TokenEntry::decode(entry)?;
        let left = decoded.validity.left(share.now(), entry.ttl);
        if left.skewed {
            share.skewed();
        }
        let skew = self.options.expiry_skew.min(left.lifetime / 2);
        if left.remaining <= skew {
            return None;
        }
        let mut header = HeaderValue::try_from(format!("Bearer {}", decoded.access_token)).ok()?;
        header.set_sensitive(true);
        if rejected == Some(&header) {
            return None;
        }
        self.remember(&[Secret::new(decoded.access_token)]);
        let now = Instant::now();
        Some(Token {
            header,
            refresh_at: now + (left.remaining - skew),
            expires_at: now + left.remaining,
            lifetime: left.lifetime,
            dpop: None,
        })
    }
}

/// The entry of `token` and how long the store keeps it; `None` for a token about to expire.
fn entry_of(share: &ShareHandle, token: &Token) -> Option<(Vec<u8>, Duration)> {
    let remaining = token.expires_at.saturating_duration_since(Instant::now());
    if remaining < MIN_SHARED {
        return None;
    }
    let access_token = token.header.to_str().ok()?.strip_prefix("Bearer ")?;
    let validity = Validity::new(share.now(), remaining, token.lifetime, Duration::ZERO);
    Some((
        TokenEntry::new(access_token.to_owned(), validity).encode(),
        validity.store_ttl(remaining),
    ))
}
