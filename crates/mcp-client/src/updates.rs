//! `notifications/resources/updated`, bounded: each run that subscribed to a resource has an
//! inbox per session; a notification reaches only the inboxes that hold its URI, coalesced
//! per URI, and a flood cannot grow them or the run's event stream.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use agent_core::{Event, EventBus, EventKind, EventSink};
use tokio::sync::Notify;

/// The most resources one run may subscribe to on one server.
pub const MAX_SUBSCRIPTIONS: usize = 256;

/// The shortest time between two rounds of `resource_updated` events of one session: updates
/// arriving faster are coalesced per URI (the event's message counts them).
pub const UPDATE_EVENT_INTERVAL: Duration = Duration::from_millis(100);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The inboxes of one session: where its handler delivers `resources/updated`.
#[derive(Debug, Default)]
pub(crate) struct Updates {
    inboxes: Mutex<Vec<Weak<Inbox>>>,
}

impl Updates {
    /// A notification for `uri`: counted in every live inbox that subscribed to it; ignored
    /// when none did (a server cannot make a run hold what it did not ask for).
    pub(crate) fn note(&self, uri: &str) {
        let mut inboxes = lock(&self.inboxes);
        inboxes.retain(|inbox| inbox.strong_count() > 0);
        for inbox in inboxes.iter().filter_map(Weak::upgrade) {
            inbox.note(uri);
        }
    }

    /// A new inbox, registered until dropped.
    pub(crate) fn inbox(&self) -> Arc<Inbox> {
        let inbox = Arc::new(Inbox::default());
        lock(&self.inboxes).push(Arc::downgrade(&inbox));
        inbox
    }

    /// True when a live inbox other than `except` subscribed to `uri`.
    pub(crate) fn wanted_elsewhere(&self, uri: &str, except: &Arc<Inbox>) -> bool {
        lock(&self.inboxes)
            .iter()
            .filter_map(Weak::upgrade)
            .any(|inbox| !Arc::ptr_eq(&inbox, except) && inbox.holds(uri))
    }
}

/// One run's subscriptions on one session and the updates not yet told.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    state: Mutex<InboxState>,
    ready: Notify,
}

#[derive(Debug, Default)]
struct InboxState {
    subscribed: BTreeSet<String>,
    /// Notifications per URI since the last round (at most one entry per subscription).
    pending: BTreeMap<String, u64>,
}

impl Inbox {
    fn note(&self, uri: &str) {
        let mut state = lock(&self.state);
        if !state.subscribed.contains(uri) {
            return;
        }
        let count = state.pending.entry(uri.to_owned()).or_insert(0);
        *count = count.saturating_add(1);
        drop(state);
        self.ready.notify_one();
    }

    fn holds(&self, uri: &str) -> bool {
        lock(&self.state).subscribed.contains(uri)
    }

    /// Adds `uri`, unless held already or [`MAX_SUBSCRIPTIONS`] are held.
    pub(crate) fn add(&self, uri: &str) -> Added {
        let mut state = lock(&self.state);
        if state.subscribed.contains(uri) {
            return Added::Held;
        }
        if state.subscribed.len() >= MAX_SUBSCRIPTIONS {
            return Added::Full;
        }
        state.subscribed.insert(uri.to_owned());
        Added::New
    }

    /// Every URI held, now held no more (a task still holding the inbox until the runtime
    /// drops it sees an empty one).
    fn drain(&self) -> BTreeSet<String> {
        let mut state = lock(&self.state);
        state.pending.clear();
        std::mem::take(&mut state.subscribed)
    }

    /// Removes `uri` and its pending updates; `true` when it was held.
    pub(crate) fn remove(&self, uri: &str) -> bool {
        let mut state = lock(&self.state);
        state.pending.remove(uri);
        state.subscribed.remove(uri)
    }

    fn take(&self) -> BTreeMap<String, u64> {
        std::mem::take(&mut lock(&self.state).pending)
    }
}

/// What [`Inbox::add`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Added {
    /// The URI is held now and was not before: the server is to be told.
    New,
    /// The run held it already: nothing changes, nothing is sent.
    Held,
    /// [`MAX_SUBSCRIPTIONS`] are held.
    Full,
}

/// A task aborted when dropped.
#[derive(Debug)]
struct Task(tokio::task::JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A run's inboxes, by server key, each with the task that turns its updates into events.
#[derive(Debug, Default)]
pub(crate) struct RunUpdates {
    inboxes: Mutex<HashMap<String, (Arc<Inbox>, Task)>>,
}

impl RunUpdates {
    /// The run's inbox of `server` (whose session delivers to `updates`), made on first use
    /// with a task emitting its updates on `bus`.
    pub(crate) fn inbox(&self, server: &str, updates: &Updates, bus: Arc<EventBus>) -> Arc<Inbox> {
        let mut inboxes = lock(&self.inboxes);
        if let Some((inbox, _)) = inboxes.get(server) {
            return inbox.clone();
        }
        let inbox = updates.inbox();
        let task = Task(tokio::spawn(tell(server.to_owned(), inbox.clone(), bus)));
        inboxes.insert(server.to_owned(), (inbox.clone(), task));
        inbox
    }

    /// The run's inbox of `server`, if it has one.
    pub(crate) fn existing(&self, server: &str) -> Option<Arc<Inbox>> {
        lock(&self.inboxes)
            .get(server)
            .map(|(inbox, _)| inbox.clone())
    }

    /// Drops every inbox and stops its task. Returns, per server, the URIs the run held that
    /// no other live inbox of the same session holds: a session shared with other runs stays
    /// open, so its server is to be told of these (`resources/unsubscribe`).
    pub(crate) fn close(&self, sessions: &[(String, &Updates)]) -> Vec<(String, Vec<String>)> {
        let inboxes = std::mem::take(&mut *lock(&self.inboxes));
        let mut released = Vec::new();
        for (server, (inbox, task)) in inboxes {
            drop(task);
            let held = inbox.drain();
            let Some((_, updates)) = sessions.iter().find(|(name, _)| *name == server) else {
                continue;
            };
            let alone: Vec<String> = held
                .into_iter()
                .filter(|uri| !updates.wanted_elsewhere(uri, &inbox))
                .collect();
            if !alone.is_empty() {
                released.push((server, alone));
            }
        }
        released
    }
}

/// Emits one `resource_updated` event per URI and round, at most one round per
/// [`UPDATE_EVENT_INTERVAL`].
async fn tell(server: String, inbox: Arc<Inbox>, bus: Arc<EventBus>) {
    loop {
        inbox.ready.notified().await;
        // Only URIs the run subscribed to are held, each checked clean before it was sent.
        for (uri, count) in inbox.take() {
            let message = if count == 1 {
                "1 update".to_owned()
            } else {
                format!("{count} updates, coalesced")
            };
            bus.emit(
                Event::new(EventKind::ResourceUpdated)
                    .with_target(&server, &uri)
                    .with_message(message),
            );
        }
        tokio::time::sleep(UPDATE_EVENT_INTERVAL).await;
    }
}
