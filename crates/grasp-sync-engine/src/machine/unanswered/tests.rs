//! Which unanswered REQ a refusal NOTICE answers.

use super::*;

fn id(n: u64) -> SubscriptionId {
    SubscriptionId::new(format!("s{n}"))
}

fn sent(reqs: &[(u64, usize)]) -> UnansweredReqs {
    let mut unanswered = UnansweredReqs::default();
    for (n, filters) in reqs {
        unanswered.sent(&id(*n), *filters);
    }
    unanswered
}

#[test]
fn an_answer_takes_its_req_and_every_earlier_one_off_the_list_once() {
    let mut unanswered = sent(&[(1, 3), (2, 1), (3, 2)]);
    // A refusal comes at once and in order: once s2 is answered, s1 can no longer be refused.
    assert_eq!(unanswered.answered(&id(2)), Some(1));
    assert_eq!(unanswered.len(), 1);
    assert_eq!(unanswered.answered(&id(1)), None);
    assert_eq!(unanswered.answered(&id(2)), None);
    assert_eq!(unanswered.answered(&id(3)), Some(2));
    assert_eq!(unanswered.len(), 0);
}

#[test]
fn at_most_the_latest_unanswered_reqs_are_remembered() {
    let reqs: Vec<(u64, usize)> = (0..(UNANSWERED_KEPT as u64 + 10)).map(|n| (n, 1)).collect();
    let mut unanswered = sent(&reqs);
    assert_eq!(unanswered.len(), UNANSWERED_KEPT);
    assert_eq!(
        unanswered.take_oldest(|_| true),
        Some(NoticeTarget::Held(id(10)))
    );
}

#[test]
fn a_req_sent_again_under_its_id_counts_from_its_last_send() {
    let mut unanswered = sent(&[(1, 1), (2, 1), (1, 2)]);
    assert_eq!(
        unanswered.take_oldest(|_| true),
        Some(NoticeTarget::Held(id(2)))
    );
    assert_eq!(unanswered.answered(&id(1)), Some(2));
}

#[test]
fn an_auth_notice_answers_the_oldest_req_even_one_closed_since() {
    // s1 was sent and closed by a rebuild before the relay's NOTICE arrived; s2 replaced it.
    let mut unanswered = sent(&[(1, 1), (2, 4)]);
    let held = |u: &SubscriptionId| *u == id(2);
    assert_eq!(
        unanswered.take_oldest(held),
        Some(NoticeTarget::Retired(id(1), 1))
    );
    // A second NOTICE answers s2, which the connection holds.
    assert_eq!(
        unanswered.take_oldest(held),
        Some(NoticeTarget::Held(id(2)))
    );
    assert_eq!(unanswered.take_oldest(held), None);
}

#[test]
fn a_limit_notice_answers_the_newest_req_held() {
    let mut unanswered = sent(&[(1, 1), (2, 1), (3, 1)]);
    let held = |u: &SubscriptionId| *u != id(3);
    assert_eq!(unanswered.take_newest_held(held), Some(id(2)));
    // s3, closed since, left the list on the way.
    assert_eq!(unanswered.len(), 1);
    assert_eq!(unanswered.take_newest_held(held), Some(id(1)));
    assert_eq!(unanswered.take_newest_held(held), None);
}

#[test]
fn a_filter_count_notice_answers_the_widest_req_held_the_newest_among_equals() {
    // s1 and s3 went out with three filters, s2 with one, s4 with three but is no longer held.
    let mut unanswered = sent(&[(1, 3), (2, 1), (3, 3), (4, 3)]);
    let held = |u: &SubscriptionId| *u != id(4);
    assert_eq!(unanswered.take_widest_held(held), Some(id(3)));
    assert_eq!(unanswered.take_widest_held(held), Some(id(1)));
    // A REQ of one filter is never refused for its count.
    assert_eq!(unanswered.take_widest_held(held), None);
    assert_eq!(unanswered.take_newest_held(held), Some(id(2)));
}
