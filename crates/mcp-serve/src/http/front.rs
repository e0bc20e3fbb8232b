//! What every HTTP request passes before rmcp sees it: a stack of tower layers, one check each,
//! with rmcp's `StreamableHttpService` innermost. Outermost first (a [`Check`](super::check::Check) is made a layer
//! by [`CheckLayer`]), under [`MeteredLayer`], which counts every answer by method and status
//! ([`NameMethod`], below the body's reading, names a message's JSON-RPC method for it):
//!
//! 0. not a check: a request relayed by a trusted proxy is counted as its client's, named by
//!    `X-Forwarded-For` (`forwarded.rs`; with trusted proxies);
//! 1. [`Limiter`]: the client's request budget → `429` (with a rate limit set);
//! 2. [`Routes`]: the endpoint's path passes, the protected-resource metadata is answered, any
//!    other path is `404`;
//! 3. [`Origins`]: a browser origin not allowed → `403`;
//! 4. [`Authentication`]: the bearer token or JWT → `401`, an address failing it too often → `429`
//!    (with auth on);
//! 5. [`SharedLimit`]: the subject's (else the address's) fleet-wide budget → `429`, its
//!    store failing → `503` when closed (with a shared rate limit);
//! 6. [`BodyLayer`]: a POST's body read whole, within its size (`413`) and time (`408`);
//! 7. [`MessageCheck`]: a refusal below it, whose body is no JSON-RPC message, is answered with
//!    the JSON-RPC error saying so instead;
//! 8. [`SessionCap`]: an `initialize` beyond the bound on sessions → `503` (with one);
//! 9. [`ParamHeaderCheck`]: `Mcp-Param-*` headers disagreeing with a call → `400`;
//! 10. [`Ids`]: a request under an id in flight in its session → `400`;
//! 11. [`InFlight`]: a POST counts as in flight until answered (drain);
//! 12. [`SessionEnd`]: a session ended by `DELETE` is answered `204`;
//! 13. [`SessionsLayer`]: a session held is checked against the shared store (ended
//!     elsewhere → dropped, then `404`), a store failure → `503` when closed (with shared
//!     sessions);
//! 14. [`OneBodyLayer`]: not a check: an event stream whose first message is its answer is
//!     sent as that answer, one JSON body.
//!
//! Each refusal is answered where it is found and reaches nothing below, so a hostile request
//! never reaches a session or the dispatcher; the order is that of the checks, so when several
//! apply the same refusal wins.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tower::ServiceBuilder;
use tower::util::{BoxCloneSyncService, MapRequestLayer};
use url::Url;

use super::answer::Answer;
use super::auth::BearerAuth;
use super::authenticate::Authentication;
use super::body::{BodyLayer, Whole};
use super::check::CheckLayer;
use super::ended::SessionEnd;
use super::forwarded::TrustedProxies;
use super::ids::Ids;
use super::limit::{Limiter, RateLimit};
use super::limit_store::SharedRateLimit;
use super::message_check::MessageCheck;
use super::metered::{MeteredLayer, NameMethod};
use super::one_body::OneBodyLayer;
use super::origin::Origins;
use super::route::Routes;
use super::sessions::SessionCap;
use super::shared_limit::SharedLimit;
use super::shared_sessions::{Sessions, SessionsLayer};
use crate::drain::InFlight;
use crate::handler::Session;
use crate::param_headers::ParamHeaderCheck;

/// The rmcp service behind the checks.
pub(crate) type Mcp = StreamableHttpService<Session, LocalSessionManager>;

/// The checks of one endpoint stacked over its rmcp service: what a connection serves.
pub(crate) type Front = BoxCloneSyncService<Request<Incoming>, Answer, Infallible>;

/// The checks below the body's reading, over the rmcp service.
type Message = BoxCloneSyncService<Request<Whole>, Answer, Infallible>;

/// The settings of one endpoint's checks.
pub(crate) struct Checks {
    /// The path, the metadata's and what it names.
    pub(crate) routes: Routes,
    /// Where the metadata is served, named in challenges.
    pub(crate) metadata_url: Url,
    /// Browser origins allowed, normalized.
    pub(crate) allowed_origins: Vec<String>,
    pub(crate) rate_limit: Option<RateLimit>,
    /// `rate_limit` counted in a store the fleet shares too.
    pub(crate) shared_rate_limit: Option<SharedRateLimit>,
    /// Requests failing authentication, per client address (only with auth).
    pub(crate) auth_failure_limit: Option<RateLimit>,
    /// The proxies whose `X-Forwarded-For` names the client.
    pub(crate) trusted_proxies: TrustedProxies,
    pub(crate) max_body: usize,
    /// How long a request's body may take to arrive, whole.
    pub(crate) body_timeout: Duration,
    /// Initialised sessions not yet ended, and their bound.
    pub(crate) live: Arc<AtomicUsize>,
    pub(crate) max_sessions: Option<usize>,
    /// The check of `Mcp-Param-*` headers against a call's arguments, with the tools it knows.
    pub(crate) params: ParamHeaderCheck,
    /// POST exchanges whose answer is not yet sent whole.
    pub(crate) in_flight: InFlight,
    /// The sessions kept in a store the fleet shares.
    pub(crate) sessions: Option<Arc<Sessions>>,
}

impl Checks {
    /// The layers, in the order of the module's list, over `mcp`.
    ///
    /// Two boxed stacks meeting at the body's reading: the checks of a request's head over
    /// those of its whole message. One stack of all the layers (each optional one an `Either`
    /// holding the rest twice) took the compiler over a minute to type-check; the box costs an
    /// allocation or two per request.
    pub(crate) fn stack(self, mcp: Mcp) -> Front {
        let auth: Option<BearerAuth> = self.routes.auth.clone();
        let auth = auth.map(|auth| {
            Authentication::layer(
                auth,
                self.routes.resource.clone(),
                self.metadata_url,
                self.auth_failure_limit,
            )
        });
        let sessions = self.max_sessions.map(|max| {
            CheckLayer::new(SessionCap {
                live: self.live,
                max,
            })
        });
        let shared_limit = self
            .shared_rate_limit
            .zip(self.rate_limit)
            .map(|(shared, limit)| SharedLimit::layer(shared, limit));
        let rate_limit = self
            .rate_limit
            .map(|limit| CheckLayer::new(Limiter::new(limit)));
        let forwarded = (!self.trusted_proxies.is_empty()).then(|| {
            let proxies = Arc::new(self.trusted_proxies);
            MapRequestLayer::new(move |request| proxies.rewrite(request))
        });
        let message: Message = BoxCloneSyncService::new(
            ServiceBuilder::new()
                .layer(CheckLayer::new(NameMethod))
                .layer(CheckLayer::new(MessageCheck))
                .option_layer(sessions)
                .layer(CheckLayer::new(self.params))
                .layer(CheckLayer::new(Ids::default()))
                .layer(CheckLayer::new(self.in_flight))
                .layer(CheckLayer::new(SessionEnd))
                .option_layer(self.sessions.map(SessionsLayer))
                .layer(OneBodyLayer)
                .service(mcp),
        );
        BoxCloneSyncService::new(
            ServiceBuilder::new()
                .layer(MeteredLayer)
                .option_layer(forwarded)
                .option_layer(rate_limit)
                .layer(CheckLayer::new(self.routes))
                .layer(CheckLayer::new(Origins(self.allowed_origins)))
                .option_layer(auth)
                .option_layer(shared_limit)
                .layer(BodyLayer {
                    max: self.max_body,
                    timeout: self.body_timeout,
                })
                .service(message),
        )
    }
}
