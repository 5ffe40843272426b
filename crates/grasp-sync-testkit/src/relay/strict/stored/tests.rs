//! Unit tests for `StoredPhases`: which REQs are rewritten, which relay EOSE is replaced,
//! dropped or passed, in order per subscription, and which live events repeat an answer.

use nostr::{ClientMessage, Filter, JsonUtil, Kind};

use super::{EoseAction, StoredPhases};
use crate::relay::strict::QueryQuirks;

const ANSWERS: QueryQuirks = QueryQuirks {
    oldest_first_without_limit: false,
    exclusive_until: true,
    per_req_cap: None,
    no_eose_for_live: false,
    skip_live_every: None,
};

const NO_LIVE_EOSE: QueryQuirks = QueryQuirks {
    oldest_first_without_limit: false,
    exclusive_until: false,
    per_req_cap: None,
    no_eose_for_live: true,
    skip_live_every: None,
};

/// Kind-1 filters, one per comma-separated limit (`-` for none).
fn filters(limits: &str) -> Vec<Filter> {
    limits
        .split(',')
        .map(|limit| {
            let filter = Filter::new().kind(Kind::TextNote);
            match limit {
                "-" => filter,
                n => filter.limit(n.parse().expect("a limit")),
            }
        })
        .collect()
}

/// Runs a script against fresh state. Each step is (input, expected):
/// `req ID LIMITS` expects `forward` or the rewritten filters' limits (`rewrite 0,0`);
/// `eose ID` expects `pass`, `drop` or `answer LIMITS`; `closed ID TEXT` and `close ID` and
/// `sent ID EVENT` expect `-`; `live ID EVENT` expects `repeat` or `new`.
fn check(quirks: QueryQuirks, script: &[(&str, &str)]) {
    let mut phases = StoredPhases::new(quirks);
    let limits = |filters: &[Filter]| {
        filters
            .iter()
            .map(|f| f.limit.map_or("-".to_owned(), |n| n.to_string()))
            .collect::<Vec<_>>()
            .join(",")
    };
    for (i, (input, expected)) in script.iter().enumerate() {
        let words: Vec<&str> = input.splitn(3, ' ').collect();
        let got = match words.as_slice() {
            ["req", id, list] => match phases.handle_req(id, &filters(list)) {
                None => "forward".to_owned(),
                Some(frame) => match ClientMessage::from_json(&frame) {
                    Ok(ClientMessage::Req {
                        subscription_id,
                        filters,
                    }) => {
                        assert_eq!(subscription_id.as_str(), *id, "step {i}");
                        let owned: Vec<Filter> =
                            filters.into_iter().map(|f| f.into_owned()).collect();
                        format!("rewrite {}", limits(&owned))
                    }
                    other => panic!("step {i}: not a REQ: {other:?}"),
                },
            },
            ["eose", id] => match phases.handle_eose(id) {
                EoseAction::Pass => "pass".to_owned(),
                EoseAction::Drop => "drop".to_owned(),
                EoseAction::Answer(filters) => format!("answer {}", limits(&filters)),
            },
            ["closed", id] => {
                phases.handle_closed(id, "");
                "-".to_owned()
            }
            ["closed", id, text] => {
                phases.handle_closed(id, text);
                "-".to_owned()
            }
            ["close", id] => {
                phases.handle_close(id);
                "-".to_owned()
            }
            ["sent", id, event] => {
                phases.answered(id, [(*event).to_owned()]);
                "-".to_owned()
            }
            ["live", id, event] => if phases.repeats(id, event) {
                "repeat"
            } else {
                "new"
            }
            .to_owned(),
            _ => panic!("step {i}: unknown input {input}"),
        };
        assert_eq!(got, *expected, "step {i}: {input}");
    }
}

#[test]
fn a_req_asking_for_stored_events_is_rewritten_and_its_eose_answered() {
    check(
        ANSWERS,
        &[
            ("req a -,5,0", "rewrite 0,0,0"),
            ("eose a", "answer -,5,0"),
            ("eose a", "pass"),
        ],
    );
}

#[test]
fn a_live_only_req_is_forwarded_and_its_eose_passes_unless_dropped() {
    check(ANSWERS, &[("req a 0,0", "forward"), ("eose a", "pass")]);
    check(
        NO_LIVE_EOSE,
        &[
            ("req a 0,0", "forward"),
            ("eose a", "drop"),
            ("req b 0,5", "forward"),
            ("eose b", "pass"),
        ],
    );
}

#[test]
fn without_answering_switches_a_stored_req_is_forwarded_unchanged() {
    check(NO_LIVE_EOSE, &[("req a -", "forward"), ("eose a", "pass")]);
}

#[test]
fn eoses_of_one_subscription_id_are_matched_to_its_reqs_in_order() {
    check(
        QueryQuirks {
            no_eose_for_live: true,
            ..ANSWERS
        },
        &[
            ("req a 3", "rewrite 0"),
            ("req a 0", "forward"),
            ("req b 4", "rewrite 0"),
            ("eose b", "answer 4"),
            ("eose a", "answer 3"),
            ("eose a", "drop"),
        ],
    );
}

#[test]
fn a_refusal_ends_a_pending_phase_and_an_empty_closed_does_not() {
    check(
        ANSWERS,
        &[
            ("req a 3", "rewrite 0"),
            ("req a 2", "rewrite 0"),
            ("closed a rate-limited: too many REQs", "-"),
            ("closed a", "-"),
            ("eose a", "answer 2"),
        ],
    );
}

#[test]
fn live_events_repeating_an_answer_are_known_until_the_subscription_ends() {
    check(
        ANSWERS,
        &[
            ("sent a e1", "-"),
            ("live a e1", "repeat"),
            ("live a e2", "new"),
            ("live b e1", "new"),
            ("close a", "-"),
            ("live a e1", "new"),
            ("sent b e3", "-"),
            ("closed b", "-"),
            ("live b e3", "new"),
        ],
    );
}

#[test]
fn every_third_live_event_is_skipped_and_no_stored_one() {
    let mut phases = StoredPhases::new(QueryQuirks {
        skip_live_every: Some(3),
        ..QueryQuirks::default()
    });
    let _ = phases.handle_req("s", &filters("-"));
    let stored: Vec<bool> = (0..5)
        .map(|i| phases.skips("s", &format!("stored-{i}")))
        .collect();
    assert_eq!(stored, vec![false; 5], "stored events before the EOSE pass");
    assert_eq!(phases.handle_eose("s"), EoseAction::Pass);
    let live: Vec<bool> = (0..6)
        .map(|i| phases.skips("s", &format!("live-{i}")))
        .collect();
    assert_eq!(live, vec![false, false, true, false, false, true]);
}

#[test]
fn a_live_event_matching_two_subscriptions_counts_once_and_is_skipped_for_both_or_neither() {
    let mut phases = StoredPhases::new(QueryQuirks {
        skip_live_every: Some(2),
        ..QueryQuirks::default()
    });
    for id in ["a", "b"] {
        let _ = phases.handle_req(id, &filters("-"));
        assert_eq!(phases.handle_eose(id), EoseAction::Pass);
    }
    // The first live event reaches both; the second neither; the third both.
    let seen: Vec<(bool, bool)> = (0..3)
        .map(|i| {
            let event = format!("live-{i}");
            (phases.skips("a", &event), phases.skips("b", &event))
        })
        .collect();
    assert_eq!(seen, vec![(false, false), (true, true), (false, false)]);
}
