//! An event bus: every event goes to the synchronous sinks and to any number of bounded async
//! subscribers, none of which can hold up the caller.

use std::sync::{Arc, OnceLock};

use futures::Stream;
use tokio::sync::broadcast;

use crate::EventRecvError;

use crate::{Event, EventSink};

/// How many events a subscriber may fall behind before it starts missing them, by default.
pub const DEFAULT_EVENT_CAPACITY: usize = 1024;

/// Delivers each event to its sinks (in order, synchronously) and to its subscribers.
///
/// Subscribers read through a bounded buffer: a slow one never blocks [`emit`](EventSink::emit);
/// when it falls more than the capacity behind, it misses the oldest events and its next
/// [`recv`](EventReceiver::recv) says how many ([`EventRecvError::Lagged`]).
///
/// ```
/// use std::sync::Arc;
/// use agent_core::{Event, EventBus, EventKind, EventSink, NoopEventSink};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let bus = EventBus::new(Arc::new(NoopEventSink));
/// let mut events = bus.subscribe();
/// bus.emit(Event::new(EventKind::ServerConnected).with_server("git"));
/// let event = events.recv().await.unwrap();
/// assert_eq!(event.server.as_deref(), Some("git"));
/// # });
/// ```
///
/// The subscribers' buffer is made by the first [`subscribe`](Self::subscribe): a bus nobody
/// subscribes to (most runs) costs its sinks only, not `capacity` event slots.
pub struct EventBus {
    sinks: Vec<Arc<dyn EventSink>>,
    /// The subject every event is stamped with (the run's principal), when known.
    principal: Option<String>,
    capacity: usize,
    sender: OnceLock<broadcast::Sender<Event>>,
}

impl std::fmt::Debug for EventBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBus")
            .field("sinks", &self.sinks.len())
            .field(
                "subscribers",
                &self
                    .sender
                    .get()
                    .map_or(0, broadcast::Sender::receiver_count),
            )
            .finish()
    }
}

impl EventBus {
    /// A bus delivering to `sink`, with room for [`DEFAULT_EVENT_CAPACITY`] events per
    /// subscriber.
    pub fn new(sink: Arc<dyn EventSink>) -> Self {
        Self::with_capacity(sink, DEFAULT_EVENT_CAPACITY)
    }

    /// A bus delivering to `sink`, with room for `capacity` (at least 1) events per subscriber.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let bus = agent_core::EventBus::with_capacity(Arc::new(agent_core::NoopEventSink), 16);
    /// # let _ = bus;
    /// ```
    pub fn with_capacity(sink: Arc<dyn EventSink>, capacity: usize) -> Self {
        Self {
            sinks: vec![sink],
            principal: None,
            capacity: capacity.max(1),
            sender: OnceLock::new(),
        }
    }

    /// Adds another synchronous sink, which receives every event after the earlier ones.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use agent_core::{EventBus, NoopEventSink};
    /// let bus = EventBus::new(Arc::new(NoopEventSink)).with_sink(Arc::new(NoopEventSink));
    /// # let _ = bus;
    /// ```
    #[must_use]
    pub fn with_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sinks.push(sink);
        self
    }

    /// Stamps every event without a principal with `subject` (the run's principal), so that
    /// sinks, subscribers and the history say whom each one was for.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use agent_core::{Event, EventBus, EventKind, EventSink, NoopEventSink};
    ///
    /// let bus = EventBus::new(Arc::new(NoopEventSink)).with_principal("alice");
    /// let mut events = bus.subscribe();
    /// bus.emit(Event::new(EventKind::ToolsChanged));
    /// assert_eq!(events.try_recv().unwrap().unwrap().principal.as_deref(), Some("alice"));
    /// ```
    #[must_use]
    pub fn with_principal(mut self, subject: impl Into<String>) -> Self {
        self.principal = Some(subject.into());
        self
    }

    /// A new subscriber, which receives every event emitted from now on.
    pub fn subscribe(&self) -> EventReceiver {
        let sender = self
            .sender
            .get_or_init(|| broadcast::channel(self.capacity).0);
        EventReceiver {
            receiver: sender.subscribe(),
        }
    }
}

impl EventBus {
    /// True when an event emitted now would reach someone: a sink that does not
    /// [discard](EventSink::discards) events, or a live subscriber. A producer whose events
    /// cost work to build (the events layer, once per call) asks first and builds none when
    /// nobody would read them.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use agent_core::{EventBus, NoopEventSink};
    ///
    /// let bus = EventBus::new(Arc::new(NoopEventSink));
    /// assert!(!bus.is_heard());
    /// let subscriber = bus.subscribe();
    /// assert!(bus.is_heard());
    /// drop(subscriber);
    /// assert!(!bus.is_heard());
    /// ```
    pub fn is_heard(&self) -> bool {
        self.sinks.iter().any(|sink| !sink.discards())
            || self
                .sender
                .get()
                .is_some_and(|sender| sender.receiver_count() > 0)
    }
}

impl EventSink for EventBus {
    fn discards(&self) -> bool {
        !self.is_heard()
    }

    fn emit(&self, mut event: Event) {
        if event.principal.is_none() {
            event.principal.clone_from(&self.principal);
        }
        // Each consumer but the last gets a copy; the last one (most often the only sink, when
        // nobody subscribed) takes the event itself.
        let subscribed = self
            .sender
            .get()
            .filter(|sender| sender.receiver_count() > 0);
        let Some((last, rest)) = self.sinks.split_last() else {
            return;
        };
        for sink in rest {
            sink.emit(event.clone());
        }
        match subscribed {
            Some(sender) => {
                last.emit(event.clone());
                // A subscriber that went away meanwhile is not an error.
                let _ = sender.send(event);
            }
            None => last.emit(event),
        }
    }
}

/// One subscriber of an [`EventBus`].
#[derive(Debug)]
pub struct EventReceiver {
    receiver: broadcast::Receiver<Event>,
}

impl EventReceiver {
    /// The next event, waiting for it.
    pub async fn recv(&mut self) -> Result<Event, EventRecvError> {
        self.receiver.recv().await.map_err(|e| match e {
            broadcast::error::RecvError::Lagged(missed) => EventRecvError::Lagged { missed },
            broadcast::error::RecvError::Closed => EventRecvError::Closed,
        })
    }

    /// The next event if one is waiting, `Ok(None)` if none is.
    pub fn try_recv(&mut self) -> Result<Option<Event>, EventRecvError> {
        match self.receiver.try_recv() {
            Ok(event) => Ok(Some(event)),
            Err(broadcast::error::TryRecvError::Empty) => Ok(None),
            Err(broadcast::error::TryRecvError::Lagged(missed)) => {
                Err(EventRecvError::Lagged { missed })
            }
            Err(broadcast::error::TryRecvError::Closed) => Err(EventRecvError::Closed),
        }
    }

    /// The events as a stream: `Err(Lagged)` items where events were missed; it ends when the
    /// bus is gone.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use agent_core::{Event, EventBus, EventKind, EventSink, NoopEventSink};
    /// use futures::StreamExt;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let bus = EventBus::new(Arc::new(NoopEventSink));
    /// let stream = bus.subscribe().into_stream();
    /// bus.emit(Event::new(EventKind::ToolsChanged));
    /// drop(bus);
    /// let events: Vec<_> = stream.collect().await;
    /// assert_eq!(events.len(), 1);
    /// # });
    /// ```
    pub fn into_stream(self) -> impl Stream<Item = Result<Event, EventRecvError>> + Send {
        futures::stream::unfold(self, |mut receiver| async move {
            match receiver.recv().await {
                Err(EventRecvError::Closed) => None,
                item => Some((item, receiver)),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::EventKind;

    #[derive(Default)]
    struct Collect(Mutex<Vec<Event>>);
    impl EventSink for Collect {
        fn emit(&self, event: Event) {
            self.0.lock().unwrap().push(event);
        }
    }

    fn numbered(n: usize) -> Event {
        Event::new(EventKind::ToolCallStarted).with_call_id(&n.to_string())
    }

    #[test]
    fn a_bus_is_heard_through_any_sink_that_keeps_events_or_a_subscriber() {
        let quiet = EventBus::new(Arc::new(crate::NoopEventSink));
        assert!(!quiet.is_heard());
        assert!(
            quiet.discards(),
            "a bus nobody hears discards what it is given"
        );
        let kept =
            EventBus::new(Arc::new(crate::NoopEventSink)).with_sink(Arc::new(Collect::default()));
        assert!(kept.is_heard());
        // A bus feeding another bus is heard exactly when that one is.
        let outer = EventBus::new(Arc::new(quiet));
        assert!(!outer.is_heard());
        let outer = EventBus::new(Arc::new(kept));
        assert!(outer.is_heard());
    }

    #[test]
    fn a_slow_subscriber_never_blocks_and_is_told_it_lagged() {
        let sink = Arc::new(Collect::default());
        let bus = EventBus::with_capacity(sink.clone(), 4);
        let mut slow = bus.subscribe();
        // Far more than the capacity, on this thread: would hang if emit waited for readers.
        for n in 0..100 {
            bus.emit(numbered(n));
        }
        assert_eq!(
            sink.0.lock().unwrap().len(),
            100,
            "the sink sees everything"
        );
        assert_eq!(slow.try_recv(), Err(EventRecvError::Lagged { missed: 96 }));
        let rest: Vec<String> = std::iter::from_fn(|| slow.try_recv().unwrap())
            .map(|e| e.call_id.unwrap())
            .collect();
        assert_eq!(rest, ["96", "97", "98", "99"]);
    }

    #[tokio::test]
    async fn subscribers_see_events_in_emission_order_and_the_end() {
        let bus = EventBus::new(Arc::new(crate::NoopEventSink));
        let mut a = bus.subscribe();
        for n in 0..3 {
            bus.emit(numbered(n));
        }
        drop(bus);
        for n in 0..3 {
            assert_eq!(a.recv().await.unwrap().call_id, Some(n.to_string()));
        }
        assert_eq!(a.recv().await, Err(EventRecvError::Closed));
    }

    #[test]
    fn every_sink_and_subscriber_gets_each_event_with_or_without_subscribers() {
        let (first, second) = (Arc::new(Collect::default()), Arc::new(Collect::default()));
        let bus = EventBus::new(first.clone())
            .with_sink(second.clone())
            .with_principal("alice");
        bus.emit(numbered(0));
        let mut subscriber = bus.subscribe();
        bus.emit(numbered(1));
        let got = subscriber.try_recv().unwrap().unwrap();
        assert_eq!(got.call_id.as_deref(), Some("1"));
        drop(subscriber);
        bus.emit(numbered(2));
        for sink in [&first, &second] {
            let seen = sink.0.lock().unwrap();
            let ids: Vec<_> = seen.iter().map(|e| e.call_id.clone().unwrap()).collect();
            assert_eq!(ids, ["0", "1", "2"]);
            assert!(seen.iter().all(|e| e.principal.as_deref() == Some("alice")));
        }
    }
}
