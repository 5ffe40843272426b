//! Refused coverage: pausing by atom, suspects settled one filter at a time, one probe each.

use std::time::{Duration, Instant};

use nostr::{Alphabet, EventId, Filter, Kind, SingleLetterTag, Timestamp};

use grasp_sync_model::BatchId;

use super::{Admission, PROBE_RETRY, RefusedCoverage};

const DAY: Duration = Duration::from_secs(24 * 3600);

fn id(n: u8) -> EventId {
    EventId::from_byte_array([n; 32])
}

fn tagged(letter: Alphabet, ids: &[u8]) -> Filter {
    Filter::new().custom_tags(
        SingleLetterTag::lowercase(letter),
        ids.iter().map(|n| id(*n).to_hex()),
    )
}

fn quotes(ids: &[u8]) -> Filter {
    tagged(Alphabet::Q, ids)
}

fn replies(ids: &[u8]) -> Filter {
    tagged(Alphabet::E, ids)
}

#[test]
fn a_single_refused_filter_is_paused_and_the_rest_is_sent() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    assert!(refused.handle_refusal(&[quotes(&[1, 2])], now + DAY));
    let admitted = refused.admit(now, vec![quotes(&[1, 2]), replies(&[1, 2])]);
    assert_eq!(admitted, vec![Admission::Send(replies(&[1, 2]))]);
}

#[test]
fn a_paused_value_stays_paused_however_work_is_chunked() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    refused.handle_refusal(&[quotes(&[1, 2])], now + DAY);
    let admitted = refused.admit(now, vec![quotes(&[2, 3, 4])]);
    assert_eq!(admitted, vec![Admission::Alone(quotes(&[3, 4]))]);
}

#[test]
fn time_bounds_do_not_change_what_is_paused() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    let paged = quotes(&[1]).until(Timestamp::from_secs(500)).limit(100);
    refused.handle_refusal(&[paged], now + DAY);
    let later = quotes(&[1]).since(Timestamp::from_secs(900));
    assert!(refused.admit(now, vec![later]).is_empty());
}

#[test]
fn a_filter_without_a_value_list_is_one_atom() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    let announcements = Filter::new().kind(Kind::GitRepoAnnouncement);
    refused.handle_refusal(std::slice::from_ref(&announcements), now + DAY);
    assert!(refused.admit(now, vec![announcements]).is_empty());
    let other = Filter::new().kind(Kind::TextNote);
    assert_eq!(
        refused.admit(now, vec![other.clone()]),
        vec![Admission::Send(other)]
    );
}

#[test]
fn a_refused_multi_filter_request_makes_its_filters_suspects_sent_alone() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    assert!(!refused.handle_refusal(&[replies(&[1]), quotes(&[1])], now + DAY));
    let admitted = refused.admit(now, vec![replies(&[1]), quotes(&[1]), replies(&[9])]);
    assert_eq!(
        admitted,
        vec![
            Admission::Alone(replies(&[1])),
            Admission::Alone(quotes(&[1])),
            Admission::Send(replies(&[9])),
        ]
    );
    // Suspects stay out of live coverage until history settles them.
    assert_eq!(
        refused.live(vec![replies(&[1, 9]), quotes(&[1])]),
        vec![replies(&[9])]
    );
}

#[test]
fn a_suspect_refused_alone_is_paused_and_one_completed_alone_is_cleared() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    refused.handle_refusal(&[replies(&[1]), quotes(&[1])], now + DAY);
    assert!(refused.handle_success(&[replies(&[1])]));
    assert!(refused.handle_refusal(&[quotes(&[1])], now + DAY));
    assert_eq!(
        refused.admit(now, vec![replies(&[1]), quotes(&[1])]),
        vec![Admission::Send(replies(&[1]))]
    );
    assert_eq!(refused.live(vec![replies(&[1])]), vec![replies(&[1])]);
}

#[test]
fn an_ended_pause_yields_exactly_one_probe_without_time_bounds() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    let paged = quotes(&[1]).until(Timestamp::from_secs(500));
    refused.handle_refusal(&[paged], now + DAY);
    assert_eq!(refused.poll_timeout(), Some(now + DAY));
    assert!(
        refused
            .poll_probes(now + DAY - Duration::from_secs(1))
            .is_empty()
    );
    // Ended but not yet probed: only the probe may send it, and not live.
    assert!(refused.live(vec![quotes(&[1])]).is_empty());
    assert_eq!(refused.poll_probes(now + DAY), vec![quotes(&[1])]);
    assert_eq!(
        refused.paused_filters(),
        1,
        "a filter being probed is still known"
    );
    assert!(refused.poll_probes(now + DAY).is_empty());
    assert_eq!(refused.poll_timeout(), None);
    // After the pause the coverage is tried again alone, and kept out of live coverage until
    // the probe completes.
    assert_eq!(
        refused.admit(now + DAY, vec![quotes(&[1])]),
        vec![Admission::Alone(quotes(&[1]))]
    );
    assert!(refused.live(vec![quotes(&[1])]).is_empty());
    assert!(refused.handle_success(&[quotes(&[1])]));
    assert_eq!(refused.live(vec![quotes(&[1])]), vec![quotes(&[1])]);
    assert_eq!(refused.paused_filters(), 0);
}

#[test]
fn nothing_refused_admits_everything_unchanged() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    let filters = vec![quotes(&[1]), replies(&[2])];
    assert_eq!(
        refused.admit(now, filters.clone()),
        filters.into_iter().map(Admission::Send).collect::<Vec<_>>()
    );
}

#[test]
fn a_probe_refused_again_is_paused_again_without_a_second_entry() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    refused.handle_refusal(&[quotes(&[1])], now + DAY);
    assert_eq!(refused.poll_probes(now + DAY).len(), 1);
    refused.handle_refusal(&[quotes(&[1])], now + DAY + DAY);
    assert_eq!(refused.paused_filters(), 1);
    assert_eq!(refused.poll_timeout(), Some(now + DAY + DAY));
    assert!(refused.admit(now + DAY, vec![quotes(&[1])]).is_empty());
}

#[test]
fn a_shape_refused_alone_sends_new_filters_of_it_alone_and_twice_pauses_it() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    refused.handle_refusal(&[quotes(&[1])], now + DAY);
    assert_eq!(
        refused.admit(now, vec![quotes(&[2]), replies(&[2])]),
        vec![
            Admission::Alone(quotes(&[2])),
            Admission::Send(replies(&[2]))
        ]
    );
    assert_eq!(refused.live(vec![quotes(&[2])]), vec![quotes(&[2])]);
    refused.handle_refusal(&[quotes(&[2])], now + DAY);
    assert!(refused.admit(now, vec![quotes(&[3])]).is_empty());
    // A completed filter of the shape clears it.
    refused.handle_success(&[quotes(&[4])]);
    assert_eq!(
        refused.admit(now, vec![quotes(&[3])]),
        vec![Admission::Send(quotes(&[3]))]
    );
}

#[test]
fn coverage_removed_from_new_work_is_remembered_for_the_probe() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    refused.handle_refusal(&[quotes(&[1])], now + DAY);
    assert_eq!(refused.paused_filters(), 1);
    // New work holding the paused value and a new one: the paused value is removed and
    // remembered, so its probe fetches what this work completes without.
    refused.admit(now, vec![quotes(&[1, 2]).since(Timestamp::from_secs(10))]);
    assert_eq!(
        refused.paused_filters(),
        1,
        "the same paused filter is not remembered twice"
    );
    refused.handle_refusal(&[quotes(&[3])], now + DAY);
    assert!(
        refused.admit(now, vec![quotes(&[4])]).is_empty(),
        "the shape is paused"
    );
    assert_eq!(refused.paused_filters(), 3);
    let mut probes = refused.poll_probes(now + DAY);
    probes.sort();
    let mut expected = vec![quotes(&[1]), quotes(&[3]), quotes(&[4])];
    expected.sort();
    assert_eq!(probes, expected);
}

#[test]
fn only_work_touching_refused_coverage_is_affected() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    assert!(!refused.affects(&[quotes(&[1])]));
    refused.handle_refusal(&[quotes(&[1])], now + DAY);
    assert!(
        refused.affects(&[replies(&[2]), quotes(&[5])]),
        "a refused shape"
    );
    assert!(!refused.affects(&[replies(&[2])]));
}

#[test]
fn a_shape_refused_once_keeps_its_other_values_live() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    refused.handle_refusal(&[quotes(&[1])], now + DAY);
    assert_eq!(refused.live(vec![quotes(&[1, 2])]), vec![quotes(&[2])]);
    refused.handle_refusal(&[quotes(&[2])], now + DAY);
    assert!(refused.live(vec![quotes(&[3])]).is_empty());
}

#[test]
fn a_lost_probe_is_due_again() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    refused.handle_refusal(&[quotes(&[1])], now + DAY);
    assert_eq!(refused.poll_probes(now + DAY).len(), 1);
    assert_eq!(refused.poll_timeout(), None);
    let retry = now + DAY + Duration::from_secs(1);
    refused.handle_probe_lost(&quotes(&[1]), retry);
    assert!(
        refused.poll_probes(now + DAY).is_empty(),
        "not before the retry"
    );
    assert_eq!(refused.poll_probes(retry), vec![quotes(&[1])]);
    refused.handle_probes_lost();
    assert_eq!(refused.poll_timeout(), Some(retry));
}

#[test]
fn work_admitted_before_a_refusal_is_blocked_after_it() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    assert!(!refused.blocks(now, &[quotes(&[1])]));
    refused.handle_refusal(&[quotes(&[1])], now + DAY);
    assert!(refused.blocks(now, &[replies(&[2]), quotes(&[1, 5])]));
    assert!(
        !refused.blocks(now, &[quotes(&[5])]),
        "one refusal pauses values, not the shape"
    );
    assert!(
        !refused.blocks(now + DAY, &[quotes(&[1])]),
        "the pause ended"
    );
}

#[test]
fn a_failed_probe_batch_is_due_again_unless_a_new_refusal_paused_its_filter() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    refused.handle_refusal(&[quotes(&[1])], now + DAY);
    refused.handle_refusal(&[quotes(&[2])], now + DAY);
    assert_eq!(refused.poll_probes(now + DAY).len(), 2);
    refused.handle_probe_opened(BatchId(1), quotes(&[1]));
    refused.handle_probe_opened(BatchId(2), quotes(&[2]));
    assert!(refused.is_probe(BatchId(1)) && !refused.is_probe(BatchId(3)));
    let later = now + DAY + Duration::from_secs(1);
    // The second probe is refused again: its filter is paused for another day.
    refused.handle_refusal(&[quotes(&[2])], later + DAY);
    refused.handle_batch_done(BatchId(1), false, later);
    refused.handle_batch_done(BatchId(2), false, later);
    assert!(!refused.is_probe(BatchId(1)) && !refused.is_probe(BatchId(2)));
    assert_eq!(refused.poll_timeout(), Some(later + PROBE_RETRY));
    assert_eq!(refused.poll_probes(later + PROBE_RETRY), vec![quotes(&[1])]);
}

#[test]
fn a_completed_probe_batch_is_not_due_again() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    refused.handle_refusal(&[quotes(&[1])], now + DAY);
    assert_eq!(refused.poll_probes(now + DAY).len(), 1);
    refused.handle_probe_opened(BatchId(1), quotes(&[1]));
    refused.handle_batch_done(BatchId(1), true, now + DAY);
    assert!(!refused.is_probe(BatchId(1)));
    assert_eq!(
        refused.poll_timeout(),
        None,
        "it waits for its filter's success"
    );
}

#[test]
fn an_unopened_probe_waits_the_retry_and_lost_probes_are_due_at_once() {
    let now = Instant::now();
    let mut refused = RefusedCoverage::default();
    refused.handle_refusal(&[quotes(&[1])], now + DAY);
    refused.handle_refusal(&[quotes(&[2])], now + DAY);
    assert_eq!(refused.poll_probes(now + DAY).len(), 2);
    refused.handle_probe_unopened(&quotes(&[1]), now + DAY);
    refused.handle_probe_opened(BatchId(2), quotes(&[2]));
    assert_eq!(refused.poll_timeout(), Some(now + DAY + PROBE_RETRY));
    refused.handle_probes_lost();
    assert!(!refused.is_probe(BatchId(2)));
    assert_eq!(refused.poll_timeout(), Some(now + DAY));
}
