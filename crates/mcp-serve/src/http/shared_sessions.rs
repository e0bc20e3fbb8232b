//! The shared sessions' layer, innermost (just above rmcp), and the replica's listener of
//! sessions ended elsewhere.
//!
//! For a request of a session this replica holds, the layer checks the session against the
//! store at most once per interval ([`Keeper::check`]): its record's time to live is extended,
//! or, found gone (ended on another replica, expired), the session is dropped here and rmcp
//! answers `404` as for any unknown id. Around rmcp it puts the request's [`Exchange`] in
//! scope (its principal, for the record of a session it opens) and answers a store failure
//! met meanwhile: `503` when closed (a session just opened is dropped again), through when
//! open. Failures are logged at most once per interval.
//!
//! The listener drops a session held here as soon as another replica announces its end
//! ([`SessionNotice`]). Notices missed (the store's connection was cut: it may have restarted
//! empty), or notices this listener fell behind (the one saying so may be among them; then
//! without the `503` below), make it, in a task of its own, first end in the store the
//! sessions this replica could not end there meanwhile, then check every session held against
//! it and write back the records of those it parked ([`WRITE_BACKS`] at a time), once a second
//! until all of it went through, so that a record the store lost is written again and a
//! session ended meanwhile is dropped.
//! From the notice until [`RECOVERY`] after that (at most [`RECOVERY_MAX`]), a session this
//! replica does not hold and finds no record of is answered `503` (`Retry-After: 1`) rather
//! than `404`: its holder may not have written it again yet.
//! Every interval it also ends in the store what it could not end there before, forgets the
//! sessions this replica no longer has (ended by their idle timeout) and the parked ones whose
//! records expired, and parks the sessions idle for `park_after` ([`Parking`]).

use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use agent_core::Principal;
use http::{HeaderValue, Method, Request, StatusCode, header};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tower_layer::Layer;
use tower_service::Service;

use super::answer::{Answer, Answering, holding, plain, take};
use super::limit_store::OnStoreError;
use super::park::Parking;
use super::parked_records::Due;
use super::session_keeper::{Checked, Exchange, Keeper};
use super::session_store::SessionNotice;
use super::shared_limit::FailureLog;

/// The answer when the store fails and `on_error` is closed.
const UNREACHABLE: &str = "Service Unavailable: the shared session store is unreachable";

/// The shortest interval between two looks for sessions to park.
const PARK_TICK_MIN: Duration = Duration::from_millis(25);

/// The interval of the parking tick when nothing is parked (the branch is disabled then).
const NO_PARKING_TICK: Duration = Duration::from_secs(3600);

/// The header naming a request's session.
const SESSION_ID: &str = "mcp-session-id";

/// How often the sessions held are checked again after notices were missed, until the store
/// answers.
const WRITE_BACK_EVERY: Duration = Duration::from_secs(1);

/// How long after this replica checked its own sessions again an unknown session is answered
/// `503` rather than `404` (every holder checks within [`WRITE_BACK_EVERY`] of the store's
/// return, then takes a moment per session it holds).
const RECOVERY: Duration = Duration::from_secs(5);

/// The longest an unknown session is answered `503` after notices were missed, however long
/// the checks take.
const RECOVERY_MAX: Duration = Duration::from_secs(30);

/// How many sessions held are checked against the store at once after notices were missed (and
/// how many parked sessions' records are written back at once).
const WRITE_BACKS: usize = 16;

/// The answer for a session without a record while the replicas write theirs again.
const RECOVERING: &str =
    "Service Unavailable: the shared session store is recovering its sessions; retry";

/// What the layer and the listener share.
#[derive(Debug)]
pub(crate) struct Sessions {
    keeper: Arc<Keeper>,
    manager: Arc<LocalSessionManager>,
    failures: FailureLog,
    /// Idle sessions parked, when asked for.
    parking: Option<Parking>,
    /// Since notices were missed, until [`RECOVERY`] after the sessions held were checked
    /// again: `None` outside such a time, else when it began and when the checks were done.
    recovery: Mutex<Option<(Instant, Option<Instant>)>>,
}

impl Sessions {
    pub(crate) fn new(
        keeper: Arc<Keeper>,
        manager: Arc<LocalSessionManager>,
        parking: Option<Parking>,
    ) -> Arc<Self> {
        Arc::new(Self {
            keeper,
            manager,
            failures: FailureLog::new("shared sessions"),
            parking,
            recovery: Mutex::default(),
        })
    }

    /// Parks the sessions due (see [`Parking`]): each is closed here, its record kept.
    async fn park_idle(&self) {
        let Some(parking) = &self.parking else {
            return;
        };
        for parked in parking.due(Instant::now(), self.keeper.ttl()) {
            self.keeper.park(&parked.id);
            self.drop_here(&parked.id).await;
            tracing::debug!(session = %parked.id, "idle session parked");
        }
    }

    fn recovery(&self) -> MutexGuard<'_, Option<(Instant, Option<Instant>)>> {
        self.recovery.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notices were missed: sessions may be missing from the store until the sessions held
    /// are checked again (a time already under way goes on from when it began).
    fn begin_recovery(&self) {
        let mut recovery = self.recovery();
        match recovery.as_mut() {
            Some((_, done)) => *done = None,
            None => *recovery = Some((Instant::now(), None)),
        }
    }

    /// Whether sessions may be missing from the store for now (see the module).
    fn recovering(&self) -> bool {
        let mut recovery = self.recovery();
        let Some((began, done)) = *recovery else {
            return false;
        };
        let over = began.elapsed() >= RECOVERY_MAX || done.is_some_and(|d| d.elapsed() >= RECOVERY);
        if over {
            *recovery = None;
        }
        !over
    }

    /// Ends in the store the sessions this replica could not end there, then checks every
    /// session held against it and writes back the records of those parked here (see the
    /// module): `false` when any of it failed, to be tried again.
    async fn write_back(self: Arc<Self>) -> bool {
        let mut done = self.keeper.end_unended().await;
        self.keeper.recheck_all();
        let check = |id: String| {
            let sessions = self.clone();
            async move {
                let checked = sessions.keeper.check(&id).await;
                if matches!(checked, Checked::Gone) {
                    if let Some(parking) = &sessions.parking {
                        parking.forget(&id);
                    }
                    sessions.drop_here(&id).await;
                }
                checked
            }
        };
        in_batches(self.keeper.shared_ids(), check, |checked| {
            match checked {
                Some(Checked::Live | Checked::Gone) => {}
                Some(Checked::Failed(error)) => {
                    self.failures
                        .note(&error, self.keeper.on_error(), Instant::now());
                    done = false;
                }
                None => done = false,
            }
            true
        })
        .await;
        // The sessions parked here, which no request will check; after a failure, the rest
        // wait for the next time rather than each wait for the store.
        let write = |(key, record, left): Due| {
            let sessions = self.clone();
            async move { sessions.keeper.write_back_parked(&key, &record, left).await }
        };
        in_batches(self.keeper.parked_due(Instant::now()), write, |written| {
            if let Some(Err(error)) = &written {
                self.failures
                    .note(error, self.keeper.on_error(), Instant::now());
            }
            let ok = matches!(written, Some(Ok(_)));
            done &= ok;
            ok
        })
        .await;
        if done && let Some((_, finished)) = self.recovery().as_mut() {
            *finished = Some(Instant::now());
        }
        done
    }

    /// Drops session `id` on this replica (its handler, and with it the tools opened for it).
    async fn drop_here(&self, id: &str) {
        let _ = self.manager.close_session(&id.into()).await;
    }

    /// The refusal of a request when the store failed with `error`, if closed.
    fn refusal(&self, error: &super::limit_store::StoreError) -> Option<Answer> {
        let on_error = self.keeper.on_error();
        self.failures.note(error, on_error, Instant::now());
        match on_error {
            OnStoreError::Open => None,
            OnStoreError::Closed => Some(unavailable(UNREACHABLE)),
        }
    }

    /// Answers `request` through `inner`, as the module says.
    async fn answer<S, B>(self: Arc<Self>, mut inner: S, request: Request<B>) -> Answer
    where
        S: Service<Request<B>, Response = Answer, Error = Infallible>,
    {
        let id = request
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(id) = &id
            && request.method() != Method::DELETE
        {
            match self.keeper.check(id).await {
                Checked::Live => {}
                Checked::Gone => self.drop_here(id).await,
                Checked::Failed(error) => {
                    if let Some(refused) = self.refusal(&error) {
                        return refused;
                    }
                }
            }
        }
        let deleting = request.method() == Method::DELETE;
        // Held until the answer is sent whole: the session is not parked meanwhile.
        let active = match (&self.parking, &id) {
            (Some(parking), Some(id)) if !deleting => Some(parking.enter(id).await),
            _ => None,
        };
        let exchange = Exchange::new(request.extensions().get::<Principal>().cloned());
        let answer = match exchange.clone().scope(inner.call(request)).await {
            Ok(answer) => answer,
            Err(never) => match never {},
        };
        if let Some(parking) = &self.parking {
            match &id {
                Some(id) if deleting => parking.forget(id),
                Some(_) => {}
                None => {
                    if let Some(opened) = answer.headers().get(SESSION_ID)
                        && let Ok(opened) = opened.to_str()
                    {
                        parking.opened(opened);
                    }
                }
            }
        }
        let answer = match active {
            Some(active) => holding(answer, active),
            None => answer,
        };
        if answer.status() == StatusCode::NOT_FOUND && exchange.missing() && self.recovering() {
            return unavailable(RECOVERING);
        }
        let Some(error) = exchange.failure() else {
            return answer;
        };
        let Some(refused) = self.refusal(&error) else {
            return answer;
        };
        // A session opened while its record could not be written is not kept.
        let opened = answer
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .filter(|_| id.is_none());
        if let Some(opened) = opened {
            self.drop_here(opened).await;
            self.keeper.release(opened);
        }
        refused
    }

    /// Listens to the store's notices until `stop`: see the module.
    pub(crate) fn listen(self: Arc<Self>, stop: CancellationToken) -> JoinHandle<()> {
        let mut notices = self.keeper.shared().store().notices();
        tokio::spawn(async move {
            let mut sweep = tokio::time::interval(self.keeper.every());
            // Parked within a quarter of `park_after` of becoming due.
            let mut park = tokio::time::interval(
                self.parking
                    .as_ref()
                    .map_or(NO_PARKING_TICK, |p| (p.after() / 4).max(PARK_TICK_MIN)),
            );
            park.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut retry = tokio::time::interval(WRITE_BACK_EVERY);
            retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // Write-backs due, the one under way (aborted when the listener stops), and whether
            // notices were missed since it began (then it is due again once it ends).
            let mut due = false;
            let mut writing = WriteBack(None);
            let mut missed_meanwhile = false;
            let mut hearing = true;
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    notice = notices.recv(), if hearing => match notice {
                        Ok(SessionNotice::Ended(key)) => {
                            if let Some(id) = self.keeper.forget(&key) {
                                if let Some(parking) = &self.parking {
                                    parking.forget(&id);
                                }
                                self.drop_here(&id).await;
                            }
                        }
                        // Fallen behind the notices, one among those lost may have said the
                        // store lost its records: the records are checked and written back as
                        // after hearing it, without answering `503` meanwhile (a lag is most
                        // often only many sessions ending at once).
                        notice @ (Ok(SessionNotice::Missed) | Err(RecvError::Lagged(_))) => {
                            self.keeper.recheck_all();
                            if matches!(notice, Ok(SessionNotice::Missed)) {
                                self.begin_recovery();
                            }
                            missed_meanwhile |= writing.0.is_some();
                            if !due {
                                due = true;
                                retry.reset_immediately();
                            }
                        }
                        // The store hears nothing more: each session is still checked once
                        // per interval.
                        Err(RecvError::Closed) => hearing = false,
                    },
                    _ = retry.tick(), if due && writing.0.is_none() => {
                        writing.0 = Some(tokio::spawn(self.clone().write_back()));
                    }
                    written = async { writing.0.as_mut().expect("under way").await }, if writing.0.is_some() => {
                        writing.0 = None;
                        due = !matches!(written, Ok(true)) || missed_meanwhile;
                        missed_meanwhile = false;
                    }
                    _ = park.tick(), if self.parking.is_some() => self.park_idle().await,
                    _ = sweep.tick() => {
                        // An end the store failed to take, tried again (not only after a cut).
                        self.keeper.end_unended().await;
                        self.keeper.forget_expired_parked(Instant::now());
                        for id in self.keeper.stale() {
                            if !self.manager.has_session(&id.as_str().into()).await.unwrap_or(true) {
                                self.keeper.release(&id);
                            }
                        }
                    }
                }
            }
        })
    }
}

/// The write-back under way, aborted when its listener stops.
struct WriteBack(Option<JoinHandle<bool>>);

impl Drop for WriteBack {
    fn drop(&mut self) {
        if let Some(writing) = &self.0 {
            writing.abort();
        }
    }
}

/// Runs `task` on each of `items`, [`WRITE_BACKS`] at a time, and hands each outcome to `seen`
/// (`None`: the task panicked); once `seen` returns `false`, no more start (those under way
/// end and are seen).
async fn in_batches<I, T, Fut>(
    items: I,
    task: impl Fn(I::Item) -> Fut,
    mut seen: impl FnMut(Option<T>) -> bool,
) where
    I: IntoIterator,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let mut items = items.into_iter();
    let mut running = tokio::task::JoinSet::new();
    let mut going = true;
    loop {
        while going
            && running.len() < WRITE_BACKS
            && let Some(item) = items.next()
        {
            running.spawn(task(item));
        }
        let Some(outcome) = running.join_next().await else {
            break;
        };
        going &= seen(outcome.ok());
    }
}

/// `503` saying `why`, to be tried again in a second.
fn unavailable(why: &'static str) -> Answer {
    let mut answer = plain(StatusCode::SERVICE_UNAVAILABLE, why);
    answer
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    answer
}

/// The layer of [`Sessions`].
#[derive(Debug, Clone)]
pub(crate) struct SessionsLayer(pub(crate) Arc<Sessions>);

impl<S> Layer<S> for SessionsLayer {
    type Service = SessionsService<S>;

    fn layer(&self, inner: S) -> SessionsService<S> {
        SessionsService {
            sessions: self.0.clone(),
            inner,
        }
    }
}

/// The service of a [`SessionsLayer`].
#[derive(Debug, Clone)]
pub(crate) struct SessionsService<S> {
    sessions: Arc<Sessions>,
    inner: S,
}

impl<S, B> Service<Request<B>> for SessionsService<S>
where
    S: Service<Request<B>, Response = Answer, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Answer;
    type Error = Infallible;
    type Future = Answering;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Answering {
        let inner = take(&mut self.inner);
        let sessions = self.sessions.clone();
        Box::pin(async move { Ok(sessions.answer(inner, request).await) })
    }
}
