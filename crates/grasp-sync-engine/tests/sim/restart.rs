//! [`Shape::Restart`](crate::run::Shape::Restart)'s second act: the events relays receive
//! while no engine runs. After the first engine has converged and run its daily
//! reconciliation, it stops; each relay of some repositories then stores new events that no
//! live subscription sees, and a second engine starts over the same store and the same kept
//! holdings, so it reconciles each relay over what it held (one NIP-77 round over `{}`) under
//! a new draw of faults.

use grasp_sync_testkit::GeneratedNetwork;
use grasp_sync_testkit::nip34::{self, RootKind, ThreadTag};
use nostr::{Event, Keys, Timestamp};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// One event stored while no engine ran.
pub(crate) struct LateEvent {
    /// The index of the relay that holds it.
    pub(crate) relay: usize,
    pub(crate) event: Event,
    /// Whether a correct sync stores it.
    pub(crate) expected: bool,
}

/// The late events of one seed, dated up to an hour before `now`, one in four of them from
/// the repositories' own time (a relay may receive an old event late):
/// - for each repository, a new root with a reply, stored on one of its relays (expected when
///   the repository is accepted): the new root is coverage the restarted engine only learns
///   from the round over `{}`, and its reply needs a round after that;
/// - for each accepted repository with roots, a reply to one of them, and a second-generation
///   reply to that reply's parent's first reply when there is one.
pub(crate) fn late_events(
    rng: &mut ChaCha8Rng,
    network: &GeneratedNetwork,
    now: Timestamp,
) -> Result<Vec<LateEvent>, String> {
    let keys = loop {
        if let Ok(secret) = nostr::SecretKey::from_slice(&rng.random::<[u8; 32]>()) {
            break Keys::new(secret);
        }
    };
    let events: std::collections::BTreeMap<_, _> = network
        .relay_events
        .iter()
        .flatten()
        .map(|e| (e.id, e))
        .collect();
    let mut late = Vec::new();
    for repo in &network.repos {
        let relay = repo.relay_indices[rng.random_range(0..repo.relay_indices.len())];
        let expected = repo.accepted();
        let announced = events
            .get(&repo.announcement)
            .map_or(Timestamp::from_secs(0), |e| e.created_at);
        let kind = RootKind::ALL[rng.random_range(0..RootKind::ALL.len())];
        let root = nip34::root(
            &keys,
            kind,
            std::slice::from_ref(&repo.repo),
            "a root stored while no engine ran",
            at(rng, now, announced),
        )
        .map_err(|e| format!("late root: {e}"))?;
        let reply = late_reply(rng, &keys, now, &root, "a reply to it")?;
        for event in [root, reply] {
            late.push(LateEvent {
                relay,
                event,
                expected,
            });
        }
        if !expected || repo.roots.is_empty() {
            continue;
        }
        let old_root = repo.roots[rng.random_range(0..repo.roots.len())];
        let Some(old_root) = events.get(&old_root) else {
            continue;
        };
        let mut replies = vec![late_reply(
            rng,
            &keys,
            now,
            old_root,
            "a late reply to an old root",
        )?];
        let root_hex = old_root.id.to_hex();
        let direct = events.values().find(|e| {
            network.expected.contains(&e.id)
                && !network.expected_descendants.contains(&e.id)
                && e.tags
                    .iter()
                    .any(|t| t.as_slice().get(1).is_some_and(|v| *v == root_hex))
        });
        if let Some(direct) = direct {
            replies.push(late_reply(
                rng,
                &keys,
                now,
                direct,
                "a late reply to a reply",
            )?);
        }
        for event in replies {
            late.push(LateEvent {
                relay,
                event,
                expected,
            });
        }
    }
    Ok(late)
}

/// A reply to `parent` by `keys`, tagging it in a way drawn from `rng`, dated by [`at`].
fn late_reply(
    rng: &mut ChaCha8Rng,
    keys: &Keys,
    now: Timestamp,
    parent: &Event,
    content: &str,
) -> Result<Event, String> {
    let how = ThreadTag::ALL[rng.random_range(0..ThreadTag::ALL.len())];
    nip34::reply(keys, parent, how, content, at(rng, now, parent.created_at))
        .map_err(|e| format!("late reply: {e}"))
}

/// A `created_at` after `floor` and not after `now`: within the hour before `now`, or one
/// time in four within the hour after `floor`.
fn at(rng: &mut ChaCha8Rng, now: Timestamp, floor: Timestamp) -> Timestamp {
    let at = if rng.random_bool(0.25) {
        floor.as_secs() + rng.random_range(1..3_600)
    } else {
        now.as_secs() - rng.random_range(1..3_600)
    };
    Timestamp::from_secs(at.max(floor.as_secs() + 1).min(now.as_secs()))
}
