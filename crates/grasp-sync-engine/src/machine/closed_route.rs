//! The refusal routing of a CLOSED (or of a NOTICE that stands in for one): what the refused
//! subscription was ([`Answered`]), the scope health judges the refusal in
//! ([`Answered::scope`]), the remedy tried before health acts ([`remedy_first`]), and what
//! becomes of the refused work once health has acted ([`consequence`]). Pure decisions: the
//! actor reads the facts from its session and performs what is decided.
//!
//! The rules, in the order a CLOSED meets them:
//! 1. A refusal of a subscription already retired pauses nothing; a filter-count refusal of it
//!    still teaches the ceiling when the count was within it ([`retired_teaches_ceiling`]).
//! 2. `auth-required:` is parked for the session's AUTH; `too many subscriptions` teaches the
//!    budget. Either, when it applies, is the whole remedy.
//! 3. Health decides the action; then a refused page fails its batch, a refused auxiliary group
//!    retires the auxiliary coverage, and a refused core group is repaired: rebuilt within a
//!    learned byte cap, or its filters tried one per REQ when several were refused by policy.
//! 4. A refused identity query or mailbox probe is asked again at once only when the refusal
//!    taught a new limit or paused the relay for its rate ([`discovery_retries_now`]).

use grasp_sync_health::{RefusalAction, RefusalCategory, RefusalScope};
use grasp_sync_model::BatchId;

#[cfg(test)]
mod tests;

/// What a CLOSED answered, read from the session before anything changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// A transient REQ of `batch` (a history page or a discovery query) with `filters`
    /// filters; `watchdog_closing` once the watchdog has sent its CLOSE.
    Transient {
        /// The batch the REQ serves.
        batch: BatchId,
        /// Filters of the REQ's current page.
        filters: usize,
        /// The watchdog already gave the REQ up.
        watchdog_closing: bool,
    },
    /// A live group of `filters` filters; `auxiliary` for descendant coverage.
    Live {
        /// Filters of the group.
        filters: usize,
        /// Descendant coverage, which falls back to paced history on a refusal.
        auxiliary: bool,
    },
    /// Nothing the session still holds.
    Retired,
}

impl Answered {
    /// The batch of a transient REQ, whose discovery scope the caller looks up.
    pub fn batch(self) -> Option<BatchId> {
        match self {
            Answered::Transient { batch, .. } => Some(batch),
            _ => None,
        }
    }

    /// The scope the refusal is judged in. `discovery` is the scope of an identity query or
    /// mailbox probe, which wins for a transient REQ even once its watchdog closes it; a page
    /// the watchdog gave up, like anything else the session no longer holds, is retired.
    pub fn scope(self, discovery: Option<RefusalScope>) -> RefusalScope {
        let held = match self {
            Answered::Transient {
                filters,
                watchdog_closing: false,
                ..
            }
            | Answered::Live { filters, .. } => RefusalScope::Coverage {
                filters: u32::try_from(filters).unwrap_or(u32::MAX),
            },
            Answered::Transient { .. } | Answered::Retired => RefusalScope::Retired,
        };
        match (self, discovery) {
            (Answered::Transient { .. }, Some(discovery)) => discovery,
            _ => held,
        }
    }
}

/// Rule 1: a filter-count refusal of a retired subscription teaches a new ceiling only when
/// the REQ's count (`sent_filters`, known while it was unanswered) was at least 2 and within
/// the current `ceiling`. Returns the count to learn from.
pub fn retired_teaches_ceiling(
    category: RefusalCategory,
    sent_filters: Option<usize>,
    ceiling: usize,
) -> Option<usize> {
    (category == RefusalCategory::TooManyFilters)
        .then_some(sent_filters)
        .flatten()
        .filter(|n| (2..=ceiling).contains(n))
}

/// A remedy tried before health acts on a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remedy {
    /// Sent again once, after the session's NIP-42 AUTH succeeds (when there is a key and the
    /// AUTH has not already failed or succeeded).
    ParkForAuth,
    /// The relay holds fewer subscriptions than believed: the learned budget, if lower, is
    /// the remedy, and coverage restarts under it without a pause.
    LearnBudget,
}

/// Rule 2: the remedy a refusal of `category` tries first, if any. When the remedy does not
/// apply (no key, no lower budget), health decides as for any other refusal.
pub fn remedy_first(category: RefusalCategory) -> Option<Remedy> {
    match category {
        RefusalCategory::AuthRequired => Some(Remedy::ParkForAuth),
        RefusalCategory::TooManySubscriptions => Some(Remedy::LearnBudget),
        _ => None,
    }
}

/// Rule 3: what becomes of the refused work once health has acted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consequence {
    /// The transient REQ is released and its batch fails, so its coverage catches up later;
    /// after a byte-cap refusal the live set is first rebuilt to fit the learned cap beside
    /// one transient REQ.
    FailBatch {
        /// The failed batch.
        batch: BatchId,
        /// Rebuild every persistent group within the learned cap first.
        rebuild_live: bool,
    },
    /// A descendant group: it and the rest of the auxiliary coverage retire, which falls back
    /// to paced history; healthy core coverage stays.
    RetireAuxiliary,
    /// A core group over a learned byte cap: it retires and every persistent group is rebuilt
    /// within the cap; what does not fit gets the paced catch-up.
    RebuildLive,
    /// A core group: it retires, auxiliary coverage retires so that restoration cannot lose
    /// core slots to it, and its coverage is re-derived once any pause ends.
    /// `split_suspects`: several filters were refused by policy, so each is also settled
    /// through history in a batch of its own.
    RepairLive {
        /// Send each refused filter through history, one per REQ and batch.
        split_suspects: bool,
    },
    /// Nothing the session holds was refused.
    Nothing,
}

/// Rule 3: the consequence of health's `action` for what the refusal `answered`.
pub fn consequence(answered: Answered, action: Option<&RefusalAction>) -> Consequence {
    let byte_cap = matches!(action, Some(RefusalAction::ByteCap { .. }));
    match answered {
        Answered::Transient { batch, .. } => Consequence::FailBatch {
            batch,
            rebuild_live: byte_cap,
        },
        Answered::Live {
            auxiliary: true, ..
        } => Consequence::RetireAuxiliary,
        Answered::Live { .. } if byte_cap => Consequence::RebuildLive,
        Answered::Live { filters, .. } => Consequence::RepairLive {
            split_suspects: filters >= 2
                && matches!(action, Some(RefusalAction::CoveragePaused { .. })),
        },
        Answered::Retired => Consequence::Nothing,
    }
}

/// Rule 4: a refused identity query or mailbox probe is asked again at once only when the
/// refusal `taught` a new limit (so a relay refusing the lowest ceiling again cannot make a
/// loop of it) or was a rate limit, under whose relay-wide pause it waits.
pub fn discovery_retries_now(taught: bool, category: RefusalCategory) -> bool {
    taught || category == RefusalCategory::RateLimited
}

/// Which unanswered REQ a NOTICE that names no subscription answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeAnswers {
    /// The unanswered REQ with the most filters: a filter-count refusal.
    Widest,
    /// The newest unanswered REQ.
    Newest,
    /// The oldest unanswered REQ, held or closed since: an `auth-required:` refusal, which a
    /// relay gives every REQ until the connection authenticates.
    Oldest,
}

/// Whether a NOTICE of `category` refuses a REQ (rather than a negentropy round, an event or
/// the connection), and which one it answers; it is then handled as that REQ's CLOSED.
pub fn notice_answers(category: RefusalCategory) -> Option<NoticeAnswers> {
    match category {
        RefusalCategory::TooManyFilters => Some(NoticeAnswers::Widest),
        RefusalCategory::AuthRequired => Some(NoticeAnswers::Oldest),
        RefusalCategory::TooManySubscriptions
        | RefusalCategory::InvalidFilter
        | RefusalCategory::RetainedBytesExceeded => Some(NoticeAnswers::Newest),
        _ => None,
    }
}
