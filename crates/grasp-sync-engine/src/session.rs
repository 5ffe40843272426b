//! The tasks around one relay session: a reader that forwards inbound messages to the actor in
//! order (and events to the ingest pipeline), and a sender that performs REQ/CLOSE so the actor
//! never awaits the transport.
//!
//! Every message carries the session's generation; the actor ignores anything from a session it
//! has already retired.
//!
//! The reader reports an EOSE only once the store answered every event the session delivered
//! before it, and reports each event the store failed to save ([`SessionEvent::Unsaved`])
//! before that EOSE, so the actor never confirms a batch over a failed write. Relay lists
//! (kind 10002) are the exception: verified here and handed to the actor only, never to the
//! store.

use std::sync::Arc;

use nostr::{Event, EventId, SubscriptionId};
use tokio::sync::mpsc;

use crate::error::StoreError;
use crate::ingest::{Ingestor, SaveFailure, SessionSaves};
pub(crate) use crate::machine::transmit::{Outbound, SessionKey};
use crate::transport::{RelayInbound, RelaySession};

/// What a session tells the actor.
#[derive(Debug)]
pub(crate) enum SessionEvent {
    /// An event was delivered for a subscription (already handed to the ingest pipeline).
    Event {
        subscription_id: SubscriptionId,
        event: Arc<Event>,
    },
    /// The store failed to save an event delivered for a subscription (reported before that
    /// subscription's next EOSE).
    Unsaved {
        subscription_id: SubscriptionId,
        id: EventId,
        error: StoreError,
    },
    /// End of stored events; the store has answered every event delivered before it.
    Eose(SubscriptionId),
    /// The relay closed a subscription.
    Closed {
        subscription_id: SubscriptionId,
        message: String,
    },
    /// A NOTICE.
    Notice(String),
    /// A REQ or CLOSE could not be handed to the connection.
    SendFailed {
        subscription_id: SubscriptionId,
        error: String,
    },
    /// A CLOSE was handed to the connection (the watchdog releases a permit only after this).
    CloseSent(SubscriptionId),
    /// The relay sent a NIP-42 challenge the session is answering.
    AuthChallenge,
    /// The relay accepted the session's AUTH.
    Authenticated,
    /// The session's AUTH failed.
    AuthFailed,
    /// The session ended (disconnect, lost messages, or transport failure).
    Ended { reason: String },
}

impl SessionEvent {
    /// The subscription the relay answered, for an event, EOSE or CLOSED.
    pub(crate) fn subscription_id(&self) -> Option<&SubscriptionId> {
        match self {
            SessionEvent::Event {
                subscription_id, ..
            }
            | SessionEvent::Unsaved {
                subscription_id, ..
            }
            | SessionEvent::Closed {
                subscription_id, ..
            }
            | SessionEvent::Eose(subscription_id) => Some(subscription_id),
            SessionEvent::Notice(_)
            | SessionEvent::SendFailed { .. }
            | SessionEvent::CloseSent(_)
            | SessionEvent::AuthChallenge
            | SessionEvent::Authenticated
            | SessionEvent::AuthFailed
            | SessionEvent::Ended { .. } => None,
        }
    }
}

/// The actor's handle to a running session.
#[derive(Clone)]
pub(crate) struct SessionHandle {
    pub(crate) key: SessionKey,
    outbound: mpsc::UnboundedSender<Outbound>,
    session: Arc<dyn RelaySession>,
}

impl std::fmt::Debug for SessionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionHandle")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl SessionHandle {
    /// Hands a request to the sender task; `false` if the session is gone. The actor queues
    /// its requests in the session's [`Transmits`](crate::machine::transmit::Transmits) and
    /// performs them through this once per step.
    pub(crate) fn send(&self, request: Outbound) -> bool {
        self.outbound.send(request).is_ok()
    }

    /// Performs every request `transmits` holds, oldest first.
    pub(crate) fn perform(&self, transmits: &mut crate::machine::transmit::Transmits) {
        while let Some(request) = transmits.poll_transmit() {
            self.send(request);
        }
    }

    /// Text-frame bytes the session's connection has moved so far.
    pub(crate) fn wire_bytes(&self) -> crate::transport::WireBytes {
        self.session.wire_bytes()
    }

    /// The session, for background jobs that talk to the relay themselves (negentropy rounds).
    pub(crate) fn session(&self) -> Arc<dyn RelaySession> {
        Arc::clone(&self.session)
    }
}

/// Starts the reader and sender tasks of a freshly connected session.
///
/// The outbound queue is unbounded in type but bounded in practice: the actor only queues what
/// the subscription ledger admitted, plus CLOSEs for those.
pub(crate) fn spawn_session(
    key: SessionKey,
    session: Arc<dyn RelaySession>,
    inbound: mpsc::Receiver<RelayInbound>,
    ingestor: Ingestor,
    actor: mpsc::Sender<(SessionKey, SessionEvent)>,
) -> SessionHandle {
    let (outbound_tx, outbound_rx) = mpsc::unbounded_channel();
    tokio::spawn(run_sender(
        key.clone(),
        Arc::clone(&session),
        outbound_rx,
        actor.clone(),
    ));
    tokio::spawn(run_reader(key.clone(), inbound, ingestor, actor));
    SessionHandle {
        key,
        outbound: outbound_tx,
        session,
    }
}

async fn run_sender(
    key: SessionKey,
    session: Arc<dyn RelaySession>,
    mut requests: mpsc::UnboundedReceiver<Outbound>,
    actor: mpsc::Sender<(SessionKey, SessionEvent)>,
) {
    while let Some(request) = requests.recv().await {
        let report = match request {
            Outbound::Req {
                subscription_id,
                filters,
            } => match session.subscribe(subscription_id.clone(), filters).await {
                Ok(()) => None,
                Err(error) => Some(SessionEvent::SendFailed {
                    subscription_id,
                    error: error.to_string(),
                }),
            },
            Outbound::Close(subscription_id) => {
                match session.close(subscription_id.clone()).await {
                    Ok(()) => Some(SessionEvent::CloseSent(subscription_id)),
                    Err(error) => Some(SessionEvent::SendFailed {
                        subscription_id,
                        error: error.to_string(),
                    }),
                }
            }
            Outbound::Disconnect => {
                session.disconnect().await;
                return;
            }
        };
        if let Some(report) = report
            && actor.send((key.clone(), report)).await.is_err()
        {
            break;
        }
    }
    session.disconnect().await;
}

async fn run_reader(
    key: SessionKey,
    mut inbound: mpsc::Receiver<RelayInbound>,
    ingestor: Ingestor,
    actor: mpsc::Sender<(SessionKey, SessionEvent)>,
) {
    let (saves, mut failures) = SessionSaves::new(ingestor.in_flight());
    let mut ended = None;
    loop {
        let message = tokio::select! {
            biased;
            Some(failure) = failures.recv() => {
                if actor.send((key.clone(), unsaved(failure))).await.is_err() {
                    return;
                }
                continue;
            }
            message = inbound.recv() => match message {
                Some(message) => message,
                None => break,
            },
        };
        let event = match message {
            RelayInbound::Event {
                subscription_id,
                event,
            } => {
                let event = Arc::new(*event);
                if event.kind == nostr::Kind::RelayList {
                    // A participant's relay list is kept by the actor in memory, never offered
                    // to the store; it is verified here since the store will not see it.
                    if event.verify().is_err() {
                        tracing::debug!(id = %event.id, relay = %key.relay, "relay list with a bad signature dropped");
                        continue;
                    }
                } else {
                    let watch = saves.watch(subscription_id.clone()).await;
                    ingestor
                        .submit(key.relay.clone(), Event::clone(&event), watch)
                        .await;
                }
                SessionEvent::Event {
                    subscription_id,
                    event,
                }
            }
            RelayInbound::Eose(id) => {
                // The store answers first: a failed save must reach the actor before the
                // EOSE that would complete its batch.
                saves.settled().await;
                while let Ok(failure) = failures.try_recv() {
                    if actor.send((key.clone(), unsaved(failure))).await.is_err() {
                        return;
                    }
                }
                SessionEvent::Eose(id)
            }
            RelayInbound::Closed {
                subscription_id,
                message,
            } => SessionEvent::Closed {
                subscription_id,
                message,
            },
            RelayInbound::Notice(text) => SessionEvent::Notice(text),
            RelayInbound::Ok { .. } => continue,
            RelayInbound::AuthChallenge => SessionEvent::AuthChallenge,
            RelayInbound::Authenticated => SessionEvent::Authenticated,
            RelayInbound::AuthFailed => SessionEvent::AuthFailed,
            RelayInbound::Lagged(lost) => {
                ended = Some(format!("{lost} messages lost between transport and engine"));
                break;
            }
            RelayInbound::Disconnected => {
                ended = Some("disconnected".to_owned());
                break;
            }
        };
        if actor.send((key.clone(), event)).await.is_err() {
            return;
        }
    }
    let reason = ended.unwrap_or_else(|| "transport ended".to_owned());
    // The actor may already be gone at shutdown; nothing is left to tell.
    let _ = actor.send((key, SessionEvent::Ended { reason })).await;
}

fn unsaved(failure: SaveFailure) -> SessionEvent {
    SessionEvent::Unsaved {
        subscription_id: failure.subscription_id,
        id: failure.id,
        error: failure.error,
    }
}
