//! The faults one seed injects, drawn from the seed: how often a connection drops or a dial
//! fails, how often a REQ is refused for no reason the engine can learn from, how often an
//! event is sent twice, how often a query's answer comes in another order, and how long
//! answers take. Every fault stops at `until`; the run then has to converge.

use std::time::Duration;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// One seed's faults.
#[derive(Debug, Clone)]
pub(crate) struct FaultPlan {
    /// Chance that a client message ends its connection instead of being answered.
    pub(crate) disconnect: f64,
    /// Chance that a dial fails.
    pub(crate) dial_failure: f64,
    /// Chance that a REQ is refused with a transient `error:` text.
    pub(crate) transient_refusal: f64,
    /// Chance that an EVENT frame is sent twice.
    pub(crate) duplicate: f64,
    /// Chance that a query's stored events are sent in a shuffled order.
    pub(crate) shuffle: f64,
    /// Longest delay before a relay's answer is delivered.
    pub(crate) max_delay: Duration,
    /// When faults stop, from the start of the run.
    pub(crate) until: Duration,
}

impl FaultPlan {
    /// No faults at all.
    pub(crate) fn none() -> Self {
        Self {
            disconnect: 0.0,
            dial_failure: 0.0,
            transient_refusal: 0.0,
            duplicate: 0.0,
            shuffle: 0.0,
            max_delay: Duration::ZERO,
            until: Duration::ZERO,
        }
    }

    /// The faults of one seed: about one seed in eight runs without faults.
    pub(crate) fn draw(rng: &mut ChaCha8Rng) -> Self {
        if rng.random_bool(0.125) {
            return Self::none();
        }
        Self {
            disconnect: rng.random_range(0.0..0.03),
            dial_failure: rng.random_range(0.0..0.3),
            transient_refusal: rng.random_range(0.0..0.05),
            duplicate: rng.random_range(0.0..0.1),
            shuffle: rng.random_range(0.0..0.5),
            max_delay: Duration::from_millis(rng.random_range(0..800)),
            until: Duration::from_secs(rng.random_range(30..600)),
        }
    }
}
