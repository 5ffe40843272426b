//! The rules of participant discovery on an injected clock: identity pauses per source
//! (including authors added during a pause), per-author deadlines, retirement; mailbox pauses
//! reset only by success, the cursor moving past a failing probe, mailbox-only dials waiting
//! for the probe deadline, retirement on removal.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use grasp_sync_health::{DiscoveryKind, HealthConfig, PauseKind, RefusalAction, RelayHealth};
use grasp_sync_model::{BatchId, RelayUrl, RepoCoordinate};
use nostr::nips::nip65::RelayMetadata;
use nostr::{Event, EventBuilder, EventId, Keys, PublicKey, Timestamp};

use super::*;
use crate::error::RelayListError;

const MIN: u64 = 60;
/// Items per mailbox probe in these tests.
const ITEMS: usize = 16;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn health(now: Instant) -> RelayHealth {
    let config = HealthConfig {
        jitter_percent: 0,
        ..HealthConfig::default()
    };
    RelayHealth::new(config, false, 1, now).expect("health")
}

fn pause_length(action: RefusalAction, now: Instant) -> Duration {
    match action {
        RefusalAction::Paused { until, .. } => until - now,
        other => panic!("not a new pause: {other:?}"),
    }
}

fn url(n: u16) -> RelayUrl {
    RelayUrl::parse(&format!("wss://relay{n}.example")).expect("url")
}

fn repo(name: &str) -> RepoCoordinate {
    RepoCoordinate::new(Keys::generate().public_key(), name).expect("coordinate")
}

fn relay_list(keys: &Keys, relays: &[(RelayUrl, Option<RelayMetadata>)], at: u64) -> Event {
    let relays = relays
        .iter()
        .map(|(u, m)| (nostr::RelayUrl::parse(u.as_ref()).expect("url"), *m));
    EventBuilder::relay_list(relays)
        .custom_created_at(Timestamp::from_secs(at))
        .sign_with_keys(keys)
        .expect("sign")
}

fn lists() -> RelayLists {
    RelayLists::new(3, secs(6 * 3600), secs(3600))
}

/// One query names every due author at `now`.
fn ask(lists: &mut RelayLists, now: Instant) -> Vec<PublicKey> {
    let due = lists.due(now);
    lists.handle_asked(&due, now);
    due
}

// ---- identity discovery ----

#[test]
fn identity_source_pause_holds_back_authors_added_during_it() {
    let t0 = Instant::now();
    let mut source = health(t0);
    let mut lists = lists();
    let first = Keys::generate().public_key();
    lists.handle_authors([&first], t0);
    assert!(identity_source_admits(&source, true, true, t0));
    let asked = ask(&mut lists, t0);
    assert_eq!(asked, vec![first]);
    // The query fails: the source is paused for five minutes and the author is due again.
    let length = pause_length(source.handle_failure(PauseKind::Identity, t0), t0);
    assert_eq!(length, secs(5 * MIN));
    lists.handle_query_done(&asked, false, t0);
    // An author added during the pause is due, but the source admits no query until it ends.
    let second = Keys::generate().public_key();
    lists.handle_authors([&first, &second], t0 + secs(MIN));
    assert!(!identity_source_admits(&source, true, true, t0 + secs(MIN)));
    assert!(!identity_source_admits(
        &source,
        true,
        true,
        t0 + secs(5 * MIN - 1)
    ));
    let end = t0 + secs(5 * MIN);
    assert!(identity_source_admits(&source, true, true, end));
    assert_eq!(
        lists.due(end),
        vec![first, second]
            .into_iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
    );
}

#[test]
fn identity_source_pause_doubles_to_an_hour_and_only_success_resets_it() {
    let t0 = Instant::now();
    let mut source = health(t0);
    let mut at = t0;
    let mut lengths = Vec::new();
    for _ in 0..6 {
        let length = pause_length(source.handle_failure(PauseKind::Identity, at), at);
        lengths.push(length.as_secs());
        // Reconnecting does not reset the escalation.
        source.handle_connected(at + length);
        source.handle_disconnected(at + length);
        at += length;
    }
    assert_eq!(lengths, vec![300, 600, 1200, 2400, 3600, 3600]);
    source.handle_success(DiscoveryKind::Identity, at);
    assert_eq!(
        pause_length(source.handle_failure(PauseKind::Identity, at), at),
        secs(300)
    );
}

#[test]
fn identity_source_needs_a_connected_idle_session() {
    let t0 = Instant::now();
    let source = health(t0);
    assert!(!identity_source_admits(&source, false, true, t0));
    assert!(!identity_source_admits(&source, true, false, t0));
}

#[test]
fn per_author_deadlines_follow_found_missing_and_failed_queries() {
    let t0 = Instant::now();
    let mut lists = lists();
    let found = Keys::generate();
    let missing = Keys::generate().public_key();
    let failed = Keys::generate().public_key();
    lists.handle_authors([&found.public_key(), &missing, &failed], t0);
    let asked = ask(&mut lists, t0);
    assert_eq!(asked.len(), 3, "new authors are due at once");
    assert!(lists.due(t0).is_empty(), "asked authors are not due again");
    let list = relay_list(&found, &[(url(1), None)], 100);
    assert_eq!(lists.handle_relay_list(&list, t0 + secs(1)), Ok(true));
    lists.handle_query_done(&[found.public_key(), missing], true, t0 + secs(1));
    lists.handle_query_done(&[failed], false, t0 + secs(1));
    // The failed author is due again at once; the missing one on the retry cadence; the found
    // one on the refresh cadence.
    assert_eq!(lists.due(t0 + secs(1)), vec![failed]);
    let retry = t0 + secs(3600);
    let due: BTreeSet<_> = lists.due(retry).into_iter().collect();
    assert!(due.contains(&missing) && !due.contains(&found.public_key()));
    let refresh = t0 + secs(1 + 6 * 3600);
    assert!(lists.due(refresh).contains(&found.public_key()));
}

#[test]
fn an_author_no_query_named_stays_due() {
    let t0 = Instant::now();
    let mut lists = lists();
    let asked = Keys::generate().public_key();
    let waiting = Keys::generate().public_key();
    lists.handle_authors([&asked, &waiting], t0);
    // Only one author's sources were free: the other is still due a minute later.
    lists.handle_asked(&[asked], t0);
    assert_eq!(lists.due(t0 + secs(MIN)), vec![waiting]);
    assert_eq!(lists.poll_timeout(), Some(t0));
}

#[test]
fn one_sources_failure_does_not_undo_anothers_answer() {
    let t0 = Instant::now();
    let mut lists = lists();
    let listed = Keys::generate();
    let unlisted = Keys::generate().public_key();
    let authors = [listed.public_key(), unlisted];
    lists.handle_authors(&authors, t0);
    // Two sources are asked for both authors.
    lists.handle_asked(&authors, t0);
    lists.handle_asked(&authors, t0);
    let list = relay_list(&listed, &[(url(1), None)], 100);
    assert_eq!(lists.handle_relay_list(&list, t0 + secs(1)), Ok(true));
    lists.handle_query_done(&authors, true, t0 + secs(1));
    lists.handle_query_done(&authors, false, t0 + secs(2));
    // The answered query stands: the list on its refresh cadence, the author without one on
    // the retry cadence.
    assert!(lists.due(t0 + secs(2)).is_empty());
    assert_eq!(lists.due(t0 + secs(3600)), vec![unlisted]);
    assert!(lists.get(&listed.public_key()).is_some());
}

#[test]
fn an_author_whose_queries_all_failed_is_due_at_once_and_a_lost_query_expires() {
    let t0 = Instant::now();
    let mut lists = lists();
    let author = Keys::generate().public_key();
    lists.handle_authors([&author], t0);
    lists.handle_asked(&[author], t0);
    lists.handle_asked(&[author], t0);
    lists.handle_query_done(&[author], false, t0 + secs(1));
    assert!(lists.due(t0 + secs(1)).is_empty(), "one query is still out");
    lists.handle_query_done(&[author], false, t0 + secs(2));
    assert_eq!(lists.due(t0 + secs(2)), vec![author]);
    // A query that never ends holds the author back for one retry interval.
    lists.handle_asked(&[author], t0 + secs(3));
    assert!(lists.due(t0 + secs(3602)).is_empty());
    assert_eq!(lists.due(t0 + secs(3603)), vec![author]);
}

#[test]
fn newest_relay_list_wins_and_is_capped() {
    let t0 = Instant::now();
    let mut lists = lists();
    let keys = Keys::generate();
    lists.handle_authors([&keys.public_key()], t0);
    let newer = relay_list(
        &keys,
        &[
            (url(1), Some(RelayMetadata::Write)),
            (url(2), Some(RelayMetadata::Read)),
            (url(3), None),
            (url(4), None),
        ],
        200,
    );
    let older = relay_list(&keys, &[(url(9), None)], 100);
    assert_eq!(lists.handle_relay_list(&newer, t0), Ok(true));
    assert_eq!(lists.handle_relay_list(&older, t0), Ok(false));
    let list = lists.get(&keys.public_key()).expect("list");
    assert_eq!(list.write, vec![url(1), url(3)], "capped at three relays");
    assert_eq!(list.read, vec![url(2), url(3)]);
}

#[test]
fn relay_lists_of_strangers_and_other_kinds_are_typed_errors() {
    let t0 = Instant::now();
    let mut lists = lists();
    let stranger = Keys::generate();
    let list = relay_list(&stranger, &[(url(1), None)], 100);
    assert_eq!(
        lists.handle_relay_list(&list, t0),
        Err(RelayListError::NotAParticipant)
    );
    lists.handle_authors([&stranger.public_key()], t0);
    let note = EventBuilder::text_note("hi")
        .sign_with_keys(&stranger)
        .expect("note");
    assert_eq!(
        lists.handle_relay_list(&note, t0),
        Err(RelayListError::WrongKind(1))
    );
    assert!(lists.get(&stranger.public_key()).is_none());
}

#[test]
fn authors_who_stop_participating_are_forgotten() {
    let t0 = Instant::now();
    let mut lists = lists();
    let keys = Keys::generate();
    lists.handle_authors([&keys.public_key()], t0);
    let list = relay_list(&keys, &[(url(1), None)], 100);
    assert_eq!(lists.handle_relay_list(&list, t0), Ok(true));
    lists.handle_authors([], t0);
    assert!(lists.get(&keys.public_key()).is_none());
    assert_eq!(lists.poll_timeout(), None);
}

#[test]
fn sources_leaving_identity_scope_are_named_once() {
    let mut scope = IdentityScope::default();
    assert!(scope.handle_scope([url(1), url(2)].into()).is_empty());
    assert_eq!(scope.handle_scope([url(2)].into()), vec![url(1)]);
    assert!(scope.handle_scope([url(2)].into()).is_empty());
}

#[test]
fn index_relay_dial_waits_for_a_due_author_and_the_identity_pause() {
    let t0 = Instant::now();
    let mut source = health(t0);
    let mut lists = lists();
    let mailboxes = MailboxInventory::new(secs(15 * MIN), ITEMS);
    let author = Keys::generate().public_key();
    assert!(!discovery_dial_due(
        &url(1),
        &source,
        &mailboxes,
        &lists,
        true,
        t0
    ));
    lists.handle_authors([&author], t0);
    assert!(discovery_dial_due(
        &url(1),
        &source,
        &mailboxes,
        &lists,
        true,
        t0
    ));
    assert!(!discovery_dial_due(
        &url(1),
        &source,
        &mailboxes,
        &lists,
        false,
        t0
    ));
    source.handle_failure(PauseKind::Identity, t0);
    assert!(!discovery_dial_due(
        &url(1),
        &source,
        &mailboxes,
        &lists,
        true,
        t0 + secs(MIN)
    ));
    assert!(discovery_dial_due(
        &url(1),
        &source,
        &mailboxes,
        &lists,
        true,
        t0 + secs(5 * MIN)
    ));
}

// ---- mailbox probes ----

fn coverage(repos: &[RepoCoordinate], roots: &[EventId]) -> MailboxCoverage {
    MailboxCoverage {
        repos: repos.iter().cloned().collect(),
        roots: roots.iter().copied().collect(),
    }
}

fn inventory_of(relay: RelayUrl, coverage: MailboxCoverage) -> BTreeMap<RelayUrl, MailboxCoverage> {
    [(relay, coverage)].into_iter().collect()
}

#[test]
fn mailbox_probe_waits_for_its_pause_and_only_success_resets_the_escalation() {
    let t0 = Instant::now();
    let mut box_health = health(t0);
    let mut inventory = MailboxInventory::new(secs(MIN), ITEMS);
    let relay = url(1);
    inventory.handle_inventory(inventory_of(relay.clone(), coverage(&[repo("a")], &[])), t0);
    let unix = Timestamp::from_secs(1_000);
    assert!(inventory.poll_probe(&relay, t0, unix, None).is_some());
    inventory.handle_probe_started(&relay, BatchId(1));
    assert!(inventory.handle_batch_done(&relay, BatchId(1), false));
    let length = pause_length(box_health.handle_failure(PauseKind::Mailbox, t0), t0);
    assert_eq!(length, secs(5 * MIN));
    // The probe interval passed, the pause did not: no probe.
    let at = t0 + secs(2 * MIN);
    let pause = box_health.paused_until(PauseKind::Mailbox, at);
    assert!(inventory.poll_probe(&relay, at, unix, pause).is_none());
    let at = t0 + secs(5 * MIN);
    let pause = box_health.paused_until(PauseKind::Mailbox, at);
    assert!(inventory.poll_probe(&relay, at, unix, pause).is_some());
    inventory.handle_probe_started(&relay, BatchId(2));
    inventory.handle_batch_done(&relay, BatchId(2), false);
    // A reconnect keeps the escalation: the second failure pauses ten minutes.
    box_health.handle_connected(at);
    box_health.handle_disconnected(at);
    assert_eq!(
        pause_length(box_health.handle_failure(PauseKind::Mailbox, at), at),
        secs(10 * MIN)
    );
    let at = at + secs(10 * MIN);
    box_health.handle_success(DiscoveryKind::Mailbox, at);
    assert_eq!(
        pause_length(box_health.handle_failure(PauseKind::Mailbox, at), at),
        secs(5 * MIN)
    );
}

#[test]
fn the_cursor_moves_past_a_failing_probe_and_only_success_moves_since() {
    let t0 = Instant::now();
    let mut inventory = MailboxInventory::new(secs(MIN), ITEMS);
    let relay = url(1);
    let roots: Vec<EventId> = (0..2 * ITEMS)
        .map(|i| {
            let mut bytes = [0u8; 32];
            bytes[..8].copy_from_slice(&(i as u64).to_be_bytes());
            EventId::from_byte_array(bytes)
        })
        .collect();
    inventory.handle_inventory(inventory_of(relay.clone(), coverage(&[], &roots)), t0);
    let mut probe = |at: Instant, unix: u64, batch: u64, success: bool| {
        let chunk = inventory
            .poll_probe(&relay, at, Timestamp::from_secs(unix), None)
            .expect("probe due");
        inventory.handle_probe_started(&relay, BatchId(batch));
        assert!(inventory.handle_batch_done(&relay, BatchId(batch), success));
        chunk
    };
    let first = probe(t0, 1_000, 1, false);
    assert_eq!(first.roots.len(), ITEMS);
    assert_eq!(first.since, None, "never probed: full history");
    // The next probe takes the items after the failed ones.
    let second = probe(t0 + secs(MIN), 2_000, 2, true);
    assert_eq!(second.roots.len(), ITEMS);
    assert!(second.roots.iter().all(|r| !first.roots.contains(r)));
    // The failed items come round again, still from full history...
    let third = probe(t0 + secs(2 * MIN), 3_000, 3, true);
    assert_eq!(third.roots, first.roots);
    assert_eq!(third.since, None, "failed items keep their cursor");
    // ...and the succeeded ones from their probe's start, minus the overlap.
    let fourth = probe(t0 + secs(3 * MIN), 4_000, 4, true);
    assert_eq!(fourth.roots, second.roots);
    let expected = 2_000 - mailbox::PROBE_OVERLAP.as_secs();
    assert_eq!(fourth.since, Some(Timestamp::from_secs(expected)));
}

#[test]
fn one_probe_in_flight_and_the_next_one_interval_later() {
    let t0 = Instant::now();
    let mut inventory = MailboxInventory::new(secs(MIN), ITEMS);
    let relay = url(1);
    inventory.handle_inventory(inventory_of(relay.clone(), coverage(&[repo("a")], &[])), t0);
    let unix = Timestamp::from_secs(1_000);
    assert!(inventory.poll_probe(&relay, t0, unix, None).is_some());
    assert!(
        inventory
            .poll_probe(&relay, t0 + secs(2 * MIN), unix, None)
            .is_none(),
        "in flight"
    );
    inventory.handle_probe_lost(&relay);
    assert!(
        inventory
            .poll_probe(&relay, t0 + secs(MIN - 1), unix, None)
            .is_none()
    );
    assert!(
        inventory
            .poll_probe(&relay, t0 + secs(MIN), unix, None)
            .is_some()
    );
}

#[test]
fn mailbox_only_dial_waits_for_the_probe_deadline_and_the_pause() {
    let t0 = Instant::now();
    let mut box_health = health(t0);
    let lists = lists();
    let mut inventory = MailboxInventory::new(secs(15 * MIN), ITEMS);
    let relay = url(1);
    inventory.handle_inventory(inventory_of(relay.clone(), coverage(&[repo("a")], &[])), t0);
    assert!(discovery_dial_due(
        &relay,
        &box_health,
        &inventory,
        &lists,
        false,
        t0
    ));
    inventory.poll_probe(&relay, t0, Timestamp::from_secs(1), None);
    inventory.handle_probe_started(&relay, BatchId(1));
    // The session drops with the probe in flight: the probe is lost, the deadline stays.
    inventory.handle_probe_lost(&relay);
    box_health.handle_failure(PauseKind::Mailbox, t0);
    for at in [t0 + secs(1), t0 + secs(5 * MIN), t0 + secs(15 * MIN - 1)] {
        assert!(!discovery_dial_due(
            &relay,
            &box_health,
            &inventory,
            &lists,
            false,
            at
        ));
    }
    assert!(discovery_dial_due(
        &relay,
        &box_health,
        &inventory,
        &lists,
        false,
        t0 + secs(15 * MIN)
    ));
}

#[test]
fn removing_a_mailbox_relay_retires_its_state() {
    let t0 = Instant::now();
    let mut box_health = health(t0);
    let mut inventory = MailboxInventory::new(secs(15 * MIN), ITEMS);
    let relay = url(1);
    let cover = coverage(&[repo("a")], &[]);
    inventory.handle_inventory(inventory_of(relay.clone(), cover.clone()), t0);
    inventory.poll_probe(&relay, t0, Timestamp::from_secs(1_000), None);
    inventory.handle_probe_started(&relay, BatchId(1));
    inventory.handle_batch_done(&relay, BatchId(1), true);
    box_health.handle_failure(PauseKind::Mailbox, t0 + secs(1));
    let removed = inventory.handle_inventory(BTreeMap::new(), t0 + secs(2));
    assert_eq!(removed, vec![relay.clone()]);
    assert!(!inventory.contains(&relay));
    box_health.handle_discovery_retired(DiscoveryKind::Mailbox);
    // Back in the inventory: due at once, from full history, with no pause.
    let at = t0 + secs(3);
    inventory.handle_inventory(inventory_of(relay.clone(), cover), at);
    let pause = box_health.paused_until(PauseKind::Mailbox, at);
    assert_eq!(pause, None);
    let probe = inventory
        .poll_probe(&relay, at, Timestamp::from_secs(2_000), pause)
        .expect("due at once");
    assert_eq!(probe.since, None);
}

// ---- participants ----

#[test]
fn participants_are_bounded_and_maintainers_take_precedence() {
    let mut participants = Participants::new(2);
    let r = repo("a");
    let a = Keys::generate().public_key();
    let b = Keys::generate().public_key();
    let m = Keys::generate().public_key();
    assert!(participants.handle_root_author(a, &r));
    assert!(participants.handle_root_author(b, &r));
    assert!(!participants.handle_root_author(Keys::generate().public_key(), &r));
    assert_eq!(participants.len(), 2);
    assert!(participants.handle_maintainer(m, &r));
    assert_eq!(participants.len(), 2);
    assert!(participants.get(&m).is_some_and(|p| p.maintainer));
    assert_eq!(participants.dropped(), 2);
    // Once every place is a maintainer's, further maintainers are turned away.
    let m2 = Keys::generate().public_key();
    participants.handle_maintainer(m2, &r);
    let survivors: Vec<_> = participants.iter().map(|(k, _)| *k).collect();
    assert!(survivors.contains(&m));
}

#[test]
fn participants_of_untracked_repositories_are_dropped() {
    let mut participants = Participants::new(10);
    let kept = repo("kept");
    let gone = repo("gone");
    let a = Keys::generate().public_key();
    let b = Keys::generate().public_key();
    participants.handle_root_author(a, &kept);
    participants.handle_root_author(b, &gone);
    let root = EventId::all_zeros();
    participants.handle_reply_author(b, root);
    participants.retain(&[kept.clone()].into(), &std::collections::HashSet::new());
    assert!(participants.get(&a).is_some());
    assert!(participants.get(&b).is_none());
}

#[test]
fn items_new_to_a_mailbox_are_probed_at_once_and_the_rest_after_the_interval() {
    let t0 = Instant::now();
    let mut inventory = MailboxInventory::new(secs(15 * MIN), ITEMS);
    let relay = url(1);
    let old = repo("old");
    inventory.handle_inventory(
        inventory_of(relay.clone(), coverage(std::slice::from_ref(&old), &[])),
        t0,
    );
    let first = inventory
        .poll_probe(&relay, t0, Timestamp::from_secs(1_000), None)
        .expect("new relay: due at once");
    assert_eq!(first.repos, vec![old.clone()]);
    inventory.handle_probe_started(&relay, BatchId(1));
    assert!(inventory.handle_batch_done(&relay, BatchId(1), true));
    // A root found a minute later is probed at once, alone and from full history.
    let at = t0 + secs(MIN);
    let root = EventId::from_byte_array([7; 32]);
    inventory.handle_inventory(
        inventory_of(relay.clone(), coverage(std::slice::from_ref(&old), &[root])),
        at,
    );
    let second = inventory
        .poll_probe(&relay, at, Timestamp::from_secs(1_060), None)
        .expect("an item never probed is due at once");
    assert_eq!((second.repos.len(), second.roots.clone()), (0, vec![root]));
    assert_eq!(second.since, None);
    inventory.handle_probe_started(&relay, BatchId(2));
    assert!(inventory.handle_batch_done(&relay, BatchId(2), true));
    // Everything covered: the next probe waits one interval after the first one.
    assert!(!inventory.dial_due(&relay, t0 + secs(15 * MIN - 1), None));
    let third = inventory
        .poll_probe(
            &relay,
            t0 + secs(15 * MIN),
            Timestamp::from_secs(2_000),
            None,
        )
        .expect("the interval passed");
    assert_eq!((third.repos, third.roots), (vec![old], vec![root]));
    assert_eq!(
        third.since,
        Some(Timestamp::from_secs(
            1_000 - mailbox::PROBE_OVERLAP.as_secs()
        ))
    );
    // A mailbox pause holds new items back too.
    let later = t0 + secs(16 * MIN);
    let newer = EventId::from_byte_array([8; 32]);
    inventory.handle_probe_lost(&relay);
    inventory.handle_inventory(
        inventory_of(relay.clone(), coverage(&[], &[root, newer])),
        later,
    );
    assert!(!inventory.dial_due(&relay, later, Some(later + secs(1))));
    assert!(inventory.dial_due(&relay, later, None));
}

#[test]
fn new_items_arriving_all_the_time_do_not_hold_back_the_periodic_probe() {
    let t0 = Instant::now();
    let mut inventory = MailboxInventory::new(secs(15 * MIN), ITEMS);
    let relay = url(1);
    let old = repo("old");
    let mut roots = Vec::new();
    let mut periodic = 0;
    for minute in 0..=30u64 {
        let at = t0 + secs(minute * MIN);
        let n = u8::try_from(minute).expect("small") + 1;
        roots.push(EventId::from_byte_array([n; 32]));
        inventory.handle_inventory(
            inventory_of(relay.clone(), coverage(std::slice::from_ref(&old), &roots)),
            at,
        );
        let probe = inventory
            .poll_probe(&relay, at, Timestamp::from_secs(1_000 + minute * MIN), None)
            .expect("a new item every minute: a probe every minute");
        inventory.handle_probe_started(&relay, BatchId(minute));
        assert!(inventory.handle_batch_done(&relay, BatchId(minute), true));
        if probe.repos.contains(&old) && minute > 0 {
            periodic += 1;
            assert!(probe.since.is_some(), "minute {minute}: {probe:?}");
        }
    }
    // Minutes 15 and 30: the covered repository is asked again on its interval.
    assert_eq!(periodic, 2);
}
