//! Input-required results (SEP-2322) relayed to a 2026-07-28 client: what a session's tools
//! are given for one round ([`InputRound`]) and give back ([`Round`]), and the seal of the
//! `requestState` the client is handed ([`RelaySeal`]).
//!
//! The client never sees an upstream's state: it gets the gateway's, ChaCha20-Poly1305 over
//! the upstream's state and the time it was issued (a random key per endpoint, a random nonce
//! per state), bound as associated data to what the request was (`tools/call`, `prompts/get`
//! or `resources/read`), the name or URI the client used, the upstream server it went to, the
//! principal and the session. A state changed, foreign, expired ([`STATE_TTL`]), longer than
//! [`MAX_CLIENT_STATE_BYTES`] or presented for another tool is -32602, never forwarded.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom as _, SystemRandom};
use rmcp::ErrorData;
use rmcp::model::{ClientCapabilities, InputRequiredResult, InputResponses};

/// The longest `requestState` a client may echo, in bytes.
pub const MAX_CLIENT_STATE_BYTES: usize = 32 * 1024;
/// How long a `requestState` the gateway issued stays good.
pub const STATE_TTL: Duration = Duration::from_secs(3600);

/// What a tool call, prompt get or resource read is given for one round when its client
/// answers input requests itself (2026-07-28): the client's answers, the upstream's
/// `requestState` (unsealed), and what the client declared it can answer.
///
/// ```
/// let round = mcp_serve::InputRound::default().with_request_state("upstream state");
/// assert_eq!(round.request_state.as_deref(), Some("upstream state"));
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct InputRound {
    /// The client's answers, by the keys of the last input requests.
    pub input_responses: Option<InputResponses>,
    /// The upstream's state, as the upstream sent it.
    pub request_state: Option<String>,
    /// The request's `_meta` `io.modelcontextprotocol/clientCapabilities`.
    pub client_capabilities: Option<ClientCapabilities>,
}

impl InputRound {
    /// With the client's answers.
    #[must_use]
    pub fn with_input_responses(mut self, responses: InputResponses) -> Self {
        self.input_responses = Some(responses);
        self
    }

    /// With the upstream's state.
    #[must_use]
    pub fn with_request_state(mut self, state: impl Into<String>) -> Self {
        self.request_state = Some(state.into());
        self
    }

    /// With the client's declared capabilities.
    #[must_use]
    pub fn with_client_capabilities(mut self, capabilities: ClientCapabilities) -> Self {
        self.client_capabilities = Some(capabilities);
        self
    }
}

/// What one relayed round gave: the result, or the upstream's input-required result (its
/// `requestState` the upstream's own; the handler seals it before the client sees it).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Round<T> {
    /// The request completed.
    Complete(T),
    /// The upstream asks the client for input first.
    InputRequired(InputRequiredResult),
}

/// What a sealed state is bound to.
pub(crate) struct Binding<'a> {
    /// `tools/call`, `prompts/get` or `resources/read`.
    pub(crate) method: &'a str,
    /// The tool, prompt or URI as the client named it.
    pub(crate) name: &'a str,
    /// The upstream server it went to, when known.
    pub(crate) upstream: Option<&'a str>,
    /// The principal, as JSON (empty without one).
    pub(crate) principal: &'a str,
    /// The session's label (empty for a request without a session).
    pub(crate) session: &'a str,
}

impl Binding<'_> {
    fn bytes(&self) -> Vec<u8> {
        [
            "mcp-agent relay v1",
            self.method,
            self.name,
            self.upstream.unwrap_or(""),
            self.principal,
            self.session,
        ]
        .iter()
        .flat_map(|part| {
            (part.len() as u64)
                .to_be_bytes()
                .into_iter()
                .chain(part.bytes())
        })
        .collect()
    }
}

/// The key the endpoint seals the states it hands clients with.
pub(crate) struct RelaySeal {
    key: LessSafeKey,
    rng: SystemRandom,
}

impl std::fmt::Debug for RelaySeal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RelaySeal(..)")
    }
}

/// A sealed state's prefix (its format).
const PREFIX: &str = "g1.";

impl RelaySeal {
    /// A random key of this process.
    pub(crate) fn random() -> Self {
        let rng = SystemRandom::new();
        let mut bytes = [0u8; 32];
        // No weaker key instead: a gateway without the system's random source does not start.
        rng.fill(&mut bytes).expect("the system's random source");
        let key = UnboundKey::new(&CHACHA20_POLY1305, &bytes).expect("a 32-byte key");
        Self {
            key: LessSafeKey::new(key),
            rng,
        }
    }

    /// `state` sealed for `binding`.
    pub(crate) fn seal(&self, binding: &Binding<'_>, state: &str) -> Result<String, ErrorData> {
        let failed = || ErrorData::internal_error("the requestState could not be sealed", None);
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).map_err(|_| failed())?;
        let issued = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let mut data = issued.to_be_bytes().to_vec();
        data.extend_from_slice(state.as_bytes());
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(binding.bytes()),
                &mut data,
            )
            .map_err(|_| failed())?;
        let mut sealed = nonce.to_vec();
        sealed.extend_from_slice(&data);
        Ok(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(sealed)))
    }

    /// The upstream's state in `sealed`, if this endpoint sealed it for `binding` within
    /// [`STATE_TTL`]; else -32602 naming the request.
    pub(crate) fn open(&self, binding: &Binding<'_>, sealed: &str) -> Result<String, ErrorData> {
        let refused = |why: &str| {
            ErrorData::invalid_params(
                format!(
                    "the requestState of this {} of `{}` {why}; start the request again without it",
                    binding.method,
                    binding
                        .name
                        .chars()
                        .take(128)
                        .collect::<String>()
                        .escape_debug()
                ),
                None,
            )
        };
        if sealed.len() > MAX_CLIENT_STATE_BYTES {
            return Err(refused(&format!(
                "is longer than {MAX_CLIENT_STATE_BYTES} bytes (the limit)"
            )));
        }
        let not_ours = || refused("is not one this gateway issued for it");
        let bytes = sealed
            .strip_prefix(PREFIX)
            .and_then(|b| URL_SAFE_NO_PAD.decode(b).ok())
            .ok_or_else(not_ours)?;
        if bytes.len() < NONCE_LEN {
            return Err(not_ours());
        }
        let (nonce, data) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| not_ours())?;
        let mut data = data.to_vec();
        let opened = self
            .key
            .open_in_place(nonce, Aad::from(binding.bytes()), &mut data)
            .map_err(|_| not_ours())?;
        if opened.len() < 8 {
            return Err(not_ours());
        }
        let (issued, state) = opened.split_at(8);
        let issued = u64::from_be_bytes(issued.try_into().map_err(|_| not_ours())?);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        if now.saturating_sub(issued) > STATE_TTL.as_secs() {
            return Err(refused("has expired"));
        }
        String::from_utf8(state.to_vec()).map_err(|_| not_ours())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding<'a>(name: &'a str, session: &'a str) -> Binding<'a> {
        Binding {
            method: "tools/call",
            name,
            upstream: Some("kit"),
            principal: "",
            session,
        }
    }

    #[test]
    fn a_state_opens_only_where_it_was_issued() {
        let seal = RelaySeal::random();
        let sealed = seal.seal(&binding("a", "s1"), "inner").unwrap();
        assert!(!sealed.contains("inner"));
        assert_eq!(seal.open(&binding("a", "s1"), &sealed).unwrap(), "inner");
        for (name, session) in [("b", "s1"), ("a", "s2")] {
            let e = seal.open(&binding(name, session), &sealed).unwrap_err();
            assert_eq!(e.code.0, -32602);
        }
        assert!(
            seal.open(&binding("a", "s1"), &format!("{sealed}-TAMPERED"))
                .is_err()
        );
        assert!(
            RelaySeal::random()
                .open(&binding("a", "s1"), &sealed)
                .is_err()
        );
        let long = "x".repeat(MAX_CLIENT_STATE_BYTES + 1);
        let e = seal.open(&binding("a", "s1"), &long).unwrap_err();
        assert!(e.message.contains("32768 bytes"), "{}", e.message);
    }
}
