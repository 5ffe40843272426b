//! The sans-IO parts of the per-relay sync machine: pure state that the actor (`actor/`, the
//! async driver) owns and drives with the time passed in. Nothing in this tree uses an async
//! runtime, a socket, a channel, a spawned task or a clock: `cargo xtask tidy` rejects any file
//! under `machine/` that does, so the rules here are tested as plain functions of their inputs.
//!
//! - [`relay`]: one relay's machine: every value below that the engine keeps about a relay,
//!   its session (with its generation) included, read through `poll_transmit`, `poll_job`,
//!   `poll_dial` and `poll_timeout` and told of its dials, connections and sessions, of the
//!   relay's messages and of its due timers.
//! - [`timers`]: the named timer tables of a relay and of a session.
//! - [`session_start`]: how a session starts (the 15-minute rule, the reconnect overlap), the
//!   daily reconciliation's window, and a session's opening budget.
//! - [`consolidation`]: when fragmented core live groups are rebuilt from scratch.
//! - [`admission`]: the one admission rule of a queued background start, REQ or NIP-77 round.
//! - [`closed_route`]: the refusal routing of a CLOSED, and which REQ a NOTICE answers.
//! - [`eose`]: an EOSE as the relay machine's input: the learned limits told, a page closed,
//!   its next pages queued and its truncated parts returned.
//! - [`refusals`]: a CLOSED, a NOTICE and a NEG-ERR for the query rate as the relay machine's
//!   inputs: classified, counted, parked for the AUTH, taught to the budget, or judged by
//!   health, with what each asks of other work returned as data.
//! - [`neg_batch`]: one batch reconciled by NIP-77, from its rounds through hydration to its
//!   end, and when a batch is still a first sync.
//! - [`history_pages`]: how historic REQs are admitted, packed up to a filter ceiling and
//!   queued as the first pages of their batch, and exact-ID fetches queued.
//! - [`live_history`]: a new live group that carries its batch's first historic page, and
//!   what ends that page early.
//! - [`req_queue`]: the rule that starts a session's queued live and historic REQs.
//! - [`neg_rounds`]: a batch's NIP-77 rounds queued in the session, dropped when they will
//!   not start, and the rule that starts them.
//! - [`nip77`]: whether a relay speaks NIP-77 (its document, one probe, a verdict kept), and
//!   the data that rule reads.
//! - [`hydration`]: the decision after one exact-ID pass over the IDs a diff advertised.
//! - [`refused`]: coverage a relay refused by policy, paused per atom, suspect or shape, and
//!   the historic batches that probe it once its pause ends.
//! - [`incomplete_batches`]: historic batches whose pages all arrived but which must not be
//!   confirmed (truncated by the relay, or with events the store failed to save), and the
//!   backoffs before their coverage is derived again.
//! - [`session`]: one connected session's state: its gates, live groups, transient
//!   subscriptions, queued starts, send order and unanswered REQs, timers and transmits, and
//!   the rules that end its subscriptions (an EOSE, the watchdog, a CLOSE sent, a retired
//!   group, a failed batch), each giving the ledger its slot back.
//! - [`session_auth`]: one session's NIP-42 state and the work parked for its AUTH.
//! - [`auth_outcome`]: the AUTH's outcome as the relay machine's input: parked work sent again
//!   after an accepted AUTH, refused by policy after a failed one, and a NIP-77 round's
//!   `auth-required:` refusal.
//! - [`unanswered`]: a connection's REQs the relay has not answered, and which one a refusal
//!   NOTICE answers.
//! - [`descendant_coverage`]: the direct members remembered, which of them each relay covers,
//!   what a failed batch for new members uncovers, and when the paced fallback sweeps.
//! - [`descendant_sweep`]: the descendant fallback's sweep, one group of members at a time.
//! - [`delivered`]: the event IDs a relay delivered during its first sync.
//! - [`catch_up`]: the paced catch-up of coverage no live connection holds, and its cursor.
//! - [`dials`]: a relay's dial attempts decided in a step, handed to the dial workers at its
//!   end.
//! - [`lanes`]: a relay's extra live connections (lever 4): what each holds, when one more
//!   is dialled, and what goes to the catch-up.
//! - [`lane_refusals`]: a CLOSED or a NOTICE on an extra connection as the relay machine's
//!   input: classified, counted, parked for that connection's AUTH, a refused group's
//!   coverage paused, or the connection closed.
//! - [`live_coverage`]: how live coverage is planned: refused coverage left out, planned
//!   next to the groups held or rebuilt from scratch, the consolidation check, a rebuild that
//!   waits, and auxiliary groups retired.
//! - [`live_plan`]: a live plan applied to a session: retired groups closed, new ones opened,
//!   atomically, or nothing changed.
//! - [`live_split`]: which live coverage the session holds, which overflows to the extra
//!   connections, and which goes to history or to the catch-up.
//! - [`jobs`]: the store reads and NIP-77 rounds a session decided, as data, and the history
//!   slots that bound the rounds running at once.
//! - [`job_reports`]: a job's report as the relay machine's input: a round's have-set read,
//!   and how much of a new batch's coverage the store holds.
//! - [`transmit`]: a session's REQs, CLOSEs and disconnect, queued as data in the order
//!   decided and performed by the actor once per step.
//!
//! # Driving a machine
//!
//! Without the default `runtime` feature, this module is all the crate compiles: a tool with
//! its own I/O drives a relay's machine with the time it passes in, and sends what it reads
//! out. The machine's fields are public for the driver to read; what changes them is its
//! `handle_*` methods, which keep the invariants between them (each live group and transient
//! holds a ledger permit, a session's key names its generation). Here a machine is dialled and
//! connected, given three filters of history, and asked what to send:
//!
//! ```
//! use std::time::Instant;
//!
//! use grasp_sync_engine::machine::history_pages::FilterCeiling;
//! use grasp_sync_engine::machine::nip77::NipListing;
//! use grasp_sync_engine::machine::relay::{Advertised, RelayMachine};
//! use grasp_sync_engine::machine::session::SessionState;
//! use grasp_sync_engine::machine::transmit::{Outbound, SessionKey};
//! use grasp_sync_filters::{PageHints, RelayPageSession};
//! use grasp_sync_health::{HealthConfig, RelayHealth};
//! use grasp_sync_model::{BatchId, RelayUrl};
//! use nostr::{Filter, Kind, SubscriptionId};
//!
//! let now = Instant::now();
//! let health = RelayHealth::new(HealthConfig::default(), false, 1, now)?;
//! // `()`: this driver queues no NIP-77 rounds and parks nothing for an AUTH.
//! let mut machine: RelayMachine<(), ()> = RelayMachine::new(health);
//! machine.handle_dial_queued(1);
//! assert_eq!(machine.poll_dial().map(|dial| dial.attempt), Some(1), "dial attempt 1");
//! machine.handle_dial_started(1, now);
//! // The driver dials and reads the relay's NIP-11 document, then:
//! assert!(machine.handle_dial_finished(1));
//! let advertised = Advertised {
//!     max_subscriptions: Some(20),
//!     max_filters: Some(2),
//!     nip77: NipListing::Unknown,
//! };
//! machine.handle_connected(now, advertised);
//! let key = SessionKey {
//!     relay: RelayUrl::parse("wss://relay.example.com")?,
//!     generation: 1,
//! };
//! let pages = RelayPageSession::new(PageHints::default());
//! machine.handle_session_started(SessionState::new(key, now, pages, false));
//!
//! let filters: Vec<Filter> = (0..3)
//!     .map(|n| Filter::new().kind(Kind::from(1617)).identifier(format!("repo-{n}")))
//!     .collect();
//! let mut next = 0;
//! let queued = machine
//!     .queue_history(now, BatchId(1), filters, FilterCeiling::Learned, || {
//!         next += 1;
//!         SubscriptionId::new(format!("hist-{next}"))
//!     })
//!     .expect("a session");
//! assert_eq!(queued.pages.len(), 2, "two filters per REQ, as the relay advertised");
//!
//! let drive = machine.drive_history(now);
//! assert_eq!(drive.started.len(), 1, "one background start per second");
//! assert!(matches!(machine.poll_transmit(), Some(Outbound::Req { .. })));
//! assert!(machine.poll_timeout().is_some(), "when the next page may start");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! What stays the actor's: what reads or changes the indices, the pending batches and the
//! store, or another relay (which coverage a relay's batches and live set ask for, derived from
//! the index; opening, registering, confirming and failing batches; recovery through the store;
//! participant discovery), and performing what a machine's answer asks of that work.
//! The actor's runtime of a relay holds its [`relay::RelayMachine`] beside the connection
//! handles and the bytes they moved.

pub mod admission;
pub mod auth_outcome;
pub mod catch_up;
pub mod closed_route;
pub mod consolidation;
pub mod delivered;
pub mod descendant_coverage;
pub mod descendant_sweep;
pub mod dials;
pub mod eose;
pub mod history_pages;
pub mod holdings_round;
pub mod hydration;
pub mod incomplete_batches;
pub mod job_reports;
pub mod jobs;
pub mod lane_refusals;
pub mod lanes;
pub mod live_coverage;
pub mod live_history;
pub mod live_plan;
pub mod live_split;
pub mod neg_batch;
pub mod neg_rounds;
pub mod nip77;
pub mod refusals;
pub mod refused;
pub mod relay;
pub mod req_queue;
pub mod session;
pub mod session_auth;
pub mod session_start;
mod slot_set;
pub mod timers;
pub mod transmit;
pub mod unanswered;
