//! [`RelayHealth`]: one relay's connection health, failure backoff, stability period, pauses and
//! recovery probe, as a sans-IO state machine driven by explicit instants.

use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::action::{Decision, decide};
use crate::pause::EscalatingPause;
use crate::{
    BackoffPolicy, DiscoveryKind, HealthConfig, HealthError, HealthSnapshot, HealthState,
    PauseKind, RecoveryProbe, Refusal, RefusalAction, RefusalCounts, RefusalScope,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Idle,
    Connecting,
    Connected {
        /// End of the stability period, while it is still running.
        stable_at: Option<Instant>,
        since: Instant,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProbeState {
    /// No episode, or an episode still paused.
    Idle,
    /// Every sync pause of the episode has expired; the probe waits for a connection.
    Due,
    /// The probe was handed out and has not yet succeeded.
    Sent,
}

/// One relay's health, backoff and pauses. Feed it events with `handle_*`, ask it with
/// `can_dial`, `is_paused` and `state`, and arm one timer at [`RelayHealth::poll_timeout`],
/// calling [`RelayHealth::handle_timeout`] when it fires.
#[derive(Debug, Clone)]
pub struct RelayHealth {
    config: HealthConfig,
    connect: BackoffPolicy,
    is_bootstrap: bool,
    rng: ChaCha8Rng,
    transport: Transport,
    failures: u32,
    failing_since: Option<Instant>,
    dead: bool,
    dial_at: Instant,
    dial_armed: bool,
    rate: EscalatingPause,
    policy: EscalatingPause,
    request: EscalatingPause,
    mailbox: EscalatingPause,
    identity: EscalatingPause,
    probe: ProbeState,
    episode: RecoveryProbe,
    refusals: RefusalCounts,
}

impl RelayHealth {
    /// A relay first seen at `now`, dialable at once. `seed` drives backoff jitter.
    ///
    /// # Errors
    /// [`HealthError`] if `config` fails [`HealthConfig::validate`].
    pub fn new(
        config: HealthConfig,
        is_bootstrap: bool,
        seed: u64,
        now: Instant,
    ) -> Result<Self, HealthError> {
        config.validate()?;
        let rate = BackoffPolicy::new(config.rate_limit_cooldown, config.rate_limit_max)?;
        let policy = BackoffPolicy::new(config.policy_pause, config.policy_pause)?;
        let request = BackoffPolicy::new(config.request_pause_base, config.request_pause_max)?;
        let discovery =
            BackoffPolicy::new(config.discovery_pause_base, config.discovery_pause_max)?;
        Ok(Self {
            connect: config.connect_policy()?,
            config,
            is_bootstrap,
            rng: ChaCha8Rng::seed_from_u64(seed),
            transport: Transport::Idle,
            failures: 0,
            failing_since: None,
            dead: false,
            dial_at: now,
            dial_armed: false,
            rate: EscalatingPause::new(rate),
            policy: EscalatingPause::new(policy),
            request: EscalatingPause::new(request),
            mailbox: EscalatingPause::new(discovery),
            identity: EscalatingPause::new(discovery),
            probe: ProbeState::Idle,
            episode: RecoveryProbe::default(),
            refusals: RefusalCounts::default(),
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &HealthConfig {
        &self.config
    }

    /// Whether this is a bootstrap relay.
    pub fn is_bootstrap(&self) -> bool {
        self.is_bootstrap
    }

    /// Whether cleanup may retire this relay when no work references it: never for a
    /// bootstrap relay.
    pub fn may_retire(&self) -> bool {
        !self.is_bootstrap
    }

    /// A dial attempt started at `now` (a worker slot was free).
    pub fn handle_connect_started(&mut self, now: Instant) {
        self.settle(now);
        self.transport = Transport::Connecting;
        self.dial_armed = false;
    }

    /// The dial attempt failed at `now`: the failure streak grows and the next dial waits
    /// `base × 2^(failures−1)` (capped, jittered), or 24 h once the relay is dead.
    pub fn handle_connect_failed(&mut self, now: Instant) {
        self.settle(now);
        self.record_failure(now);
    }

    /// The WebSocket handshake succeeded at `now`. Every connection must survive the stability
    /// period before the failure streak clears; pauses are not cleared.
    pub fn handle_connected(&mut self, now: Instant) {
        self.settle(now);
        let stable_at = now.checked_add(self.config.stability_period);
        self.transport = Transport::Connected {
            stable_at: stable_at.or(Some(now)),
            since: now,
        };
        self.dial_armed = false;
    }

    /// We closed the connection at `now` because it had nothing to do (a relay used only for
    /// participant discovery, between two probes): no failure is recorded, the failure streak
    /// stays as it was, and the next dial may follow at once (subject to active pauses).
    pub fn handle_closed_idle(&mut self, now: Instant) {
        self.settle(now);
        if matches!(self.transport, Transport::Idle) {
            return;
        }
        if self.probe == ProbeState::Sent {
            self.probe = ProbeState::Due;
        }
        self.transport = Transport::Idle;
        self.dial_at = now;
        self.dial_armed = false;
    }

    /// The connection ended at `now`. Ending inside the stability period continues the failure
    /// streak; ending after it allows an immediate redial (subject to active pauses).
    pub fn handle_disconnected(&mut self, now: Instant) {
        self.settle(now);
        let short_lived = match self.transport {
            Transport::Connected { stable_at, .. } => stable_at.is_some(),
            Transport::Connecting => true,
            Transport::Idle => return,
        };
        if self.probe == ProbeState::Sent {
            self.probe = ProbeState::Due;
        }
        if short_lived {
            self.record_failure(now);
        } else {
            self.transport = Transport::Idle;
            self.dial_at = now;
            self.dial_armed = false;
        }
    }

    /// A relay refusal at `now`, classified with [`crate::classify`], from `scope`.
    pub fn handle_refusal(
        &mut self,
        now: Instant,
        refusal: &Refusal,
        scope: RefusalScope,
    ) -> RefusalAction {
        self.settle(now);
        self.refusals.record(refusal.category);
        match decide(refusal, scope) {
            Decision::Pause(kind) => self.pause(kind, now),
            Decision::PauseCoverage => RefusalAction::CoveragePaused {
                until: now.checked_add(self.config.policy_pause).unwrap_or(now),
            },
            Decision::Regroup => RefusalAction::Regroup {
                submitted_filters: refusal.submitted_filters,
            },
            Decision::ByteCap => RefusalAction::ByteCap {
                bytes: refusal.byte_cap,
            },
            Decision::Ignore => RefusalAction::Ignored,
        }
    }

    /// A failure of `kind` at `now` without refusal text: a request watchdog expiry or
    /// unexpected CLOSED before EOSE ([`PauseKind::Request`]), or a failed mailbox fetch or
    /// identity query.
    pub fn handle_failure(&mut self, kind: PauseKind, now: Instant) -> RefusalAction {
        self.settle(now);
        self.pause(kind, now)
    }

    /// A mailbox fetch or identity query succeeded at `now`: the next failure of that kind
    /// starts at the base delay again. Reconnects never do this.
    pub fn handle_success(&mut self, kind: DiscoveryKind, now: Instant) {
        self.settle(now);
        self.pause_mut(kind.into()).reset_escalation();
    }

    /// The relay left the scope of mailbox probes or identity discovery (`kind`): its pause and
    /// escalation of that kind are forgotten, as if it had never failed.
    pub fn handle_discovery_retired(&mut self, kind: DiscoveryKind) {
        self.pause_mut(kind.into()).retire();
    }

    /// The recovery probe succeeded at `now`: the episode is over.
    pub fn handle_probe_succeeded(&mut self, now: Instant) {
        self.settle(now);
        if self.probe != ProbeState::Idle {
            self.probe = ProbeState::Idle;
            self.episode = RecoveryProbe::default();
        }
    }

    /// Observes every deadline that has passed by `now`. Call it when the timer from
    /// [`RelayHealth::poll_timeout`] fires; every `handle_*` call does it first as well.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.settle(now);
    }

    /// The single recovery probe for the current pause episode, once: only when connected and
    /// after every rate, policy and request pause has expired.
    pub fn poll_probe(&mut self, now: Instant) -> Option<RecoveryProbe> {
        self.settle(now);
        let connected = matches!(self.transport, Transport::Connected { .. });
        if connected && self.probe == ProbeState::Due {
            self.probe = ProbeState::Sent;
            return Some(self.episode);
        }
        None
    }

    /// Whether a dial may start at `now`: not connected or connecting, transport backoff
    /// over, and every rate, policy and request pause expired.
    pub fn can_dial(&self, now: Instant) -> bool {
        self.next_dial_at().is_some_and(|at| at <= now)
    }

    /// The earliest instant a dial may start (possibly past), or `None` while connecting or
    /// connected. It waits for every active sync pause as well as the transport backoff.
    pub fn next_dial_at(&self) -> Option<Instant> {
        if self.transport != Transport::Idle {
            return None;
        }
        let pauses = [&self.rate, &self.policy, &self.request];
        Some(
            pauses
                .iter()
                .filter_map(|pause| pause.last_until())
                .fold(self.dial_at, Instant::max),
        )
    }

    /// Whether a pause of `kind` is active at `now`.
    pub fn is_paused(&self, kind: PauseKind, now: Instant) -> bool {
        self.pause_ref(kind).is_active(now)
    }

    /// When the pause of `kind` ends, if it is active at `now`.
    pub fn paused_until(&self, kind: PauseKind, now: Instant) -> Option<Instant> {
        self.pause_ref(kind).active_until(now)
    }

    /// When every active rate, policy and request pause has expired, if any is active at `now`.
    pub fn sync_paused_until(&self, now: Instant) -> Option<Instant> {
        PauseKind::SYNC
            .iter()
            .filter_map(|kind| self.paused_until(*kind, now))
            .max()
    }

    /// The earliest deadline still to be observed: transport backoff, stability period or a
    /// pause end. Arm one timer for it and call [`RelayHealth::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        let dial = if self.dial_armed && self.transport == Transport::Idle {
            self.next_dial_at()
        } else {
            None
        };
        let stable = match self.transport {
            Transport::Connected { stable_at, .. } => stable_at,
            _ => None,
        };
        PauseKind::ALL
            .iter()
            .filter_map(|kind| self.pause_ref(*kind).armed_deadline())
            .chain(dial)
            .chain(stable)
            .min()
    }

    /// The current consecutive-failure count.
    pub fn consecutive_failures(&self) -> u32 {
        self.failures
    }

    /// The health state at `now`.
    pub fn state(&self, now: Instant) -> HealthState {
        let connected = matches!(self.transport, Transport::Connected { .. });
        if self.dead && !connected {
            return HealthState::Dead;
        }
        if self.sync_paused_until(now).is_some() {
            return HealthState::RateLimited;
        }
        if connected && self.probe_pending() {
            return HealthState::Probing;
        }
        match self.transport {
            Transport::Connected { stable_at, .. } => {
                let stabilising = stable_at.is_some_and(|at| at > now);
                if stabilising && self.failures > 0 {
                    HealthState::Degraded
                } else {
                    HealthState::Healthy
                }
            }
            Transport::Idle | Transport::Connecting if self.failures > 0 => HealthState::Degraded,
            Transport::Idle | Transport::Connecting => HealthState::Disconnected,
        }
    }

    /// Metric values at `now`.
    pub fn snapshot(&self, now: Instant) -> HealthSnapshot {
        let state = self.state(now);
        HealthSnapshot {
            state,
            status: state.metric_value(),
            consecutive_failures: self.failures,
            is_bootstrap: self.is_bootstrap,
            next_dial_at: self.next_dial_at(),
            dial_backoff_until: (self.transport == Transport::Idle).then_some(self.dial_at),
            pauses: PauseKind::ALL
                .iter()
                .filter_map(|kind| self.paused_until(*kind, now).map(|until| (*kind, until)))
                .collect(),
            refusals: self.refusals.clone(),
        }
    }

    fn probe_pending(&self) -> bool {
        self.probe != ProbeState::Idle || self.episode_open()
    }

    fn episode_open(&self) -> bool {
        self.episode != RecoveryProbe::default()
    }

    fn record_failure(&mut self, now: Instant) {
        self.transport = Transport::Idle;
        self.failures = self.failures.saturating_add(1);
        let since = *self.failing_since.get_or_insert(now);
        if now.saturating_duration_since(since) >= self.config.dead_after {
            self.dead = true;
        }
        let delay = if self.dead {
            self.config.dead_retry_interval
        } else {
            self.connect.jittered(
                self.failures,
                self.config.jitter_percent,
                &mut self.rng,
                now,
            )
        };
        self.dial_at = now.checked_add(delay).unwrap_or(now);
        self.dial_armed = true;
    }

    fn pause(&mut self, kind: PauseKind, now: Instant) -> RefusalAction {
        let (until, started) = self.pause_mut(kind).trigger(now);
        if kind.is_sync() {
            match kind {
                PauseKind::RateLimit => self.episode.rate_limit = true,
                PauseKind::Policy => self.episode.policy = true,
                _ => self.episode.request = true,
            }
            self.probe = ProbeState::Idle;
        }
        if started {
            RefusalAction::Paused { kind, until }
        } else {
            RefusalAction::AlreadyPaused { kind, until }
        }
    }

    /// Applies everything that became true by `now`: expired pauses, a completed stability
    /// period, and the five-minute recovery reset of the rate and request escalations.
    fn settle(&mut self, now: Instant) {
        for kind in PauseKind::ALL {
            self.pause_mut(kind).expire(now);
        }
        if self.dial_armed && self.dial_at <= now {
            self.dial_armed = false;
        }
        if let Transport::Connected {
            stable_at: Some(at),
            since,
        } = self.transport
            && at <= now
        {
            self.transport = Transport::Connected {
                stable_at: None,
                since,
            };
            self.failures = 0;
            self.failing_since = None;
            self.dead = false;
        }
        let sync_paused = self.sync_paused_until(now).is_some();
        if self.probe == ProbeState::Idle && self.episode_open() && !sync_paused {
            self.probe = ProbeState::Due;
        }
        if let Transport::Connected { since, .. } = self.transport
            && !sync_paused
        {
            let clear_from = [&self.rate, &self.policy, &self.request]
                .iter()
                .filter_map(|pause| pause.last_until())
                .fold(since, Instant::max);
            let window = self.config.recovery_window;
            for pause in [&mut self.rate, &mut self.request] {
                let start = pause
                    .last_refusal()
                    .map_or(clear_from, |r| r.max(clear_from));
                if pause.streak() > 0 && now.saturating_duration_since(start) >= window {
                    pause.reset_escalation();
                }
            }
        }
    }

    fn pause_ref(&self, kind: PauseKind) -> &EscalatingPause {
        match kind {
            PauseKind::RateLimit => &self.rate,
            PauseKind::Policy => &self.policy,
            PauseKind::Request => &self.request,
            PauseKind::Mailbox => &self.mailbox,
            PauseKind::Identity => &self.identity,
        }
    }

    fn pause_mut(&mut self, kind: PauseKind) -> &mut EscalatingPause {
        match kind {
            PauseKind::RateLimit => &mut self.rate,
            PauseKind::Policy => &mut self.policy,
            PauseKind::Request => &mut self.request,
            PauseKind::Mailbox => &mut self.mailbox,
            PauseKind::Identity => &mut self.identity,
        }
    }
}

#[cfg(test)]
mod tests;
