//! Tests of how relay texts read as answers to a NEG-OPEN: as the round's own NEG-ERR or
//! CLOSED, as a NOTICE during a round, and as a NOTICE during a session's probe.

use super::{NegentropyError, classify_refusal, notice_ends_round};

/// What a text means in one of the three places it can be read.
#[derive(Debug, Clone, Copy)]
enum Reads {
    /// The relay does not speak NIP-77.
    Unsupported,
    /// A query-rate refusal.
    RateLimited,
    /// A refusal until the client authenticates (only as the round's own answer).
    AuthRequired,
    /// Another refusal (only as the round's own answer).
    Refused,
    /// Nothing for the round (only as a NOTICE).
    Ignored,
}

impl Reads {
    fn error(self, text: &str) -> Option<NegentropyError> {
        match self {
            Reads::Unsupported => Some(NegentropyError::Unsupported),
            Reads::RateLimited => Some(NegentropyError::RateLimited(text.to_owned())),
            Reads::AuthRequired => Some(NegentropyError::AuthRequired(text.to_owned())),
            Reads::Refused => Some(NegentropyError::Refused(text.to_owned())),
            Reads::Ignored => None,
        }
    }
}

/// Checks `text` read as `[the round's NEG-ERR or CLOSED, a NOTICE during a round, a NOTICE
/// during a probe]`.
fn check(text: &str, expected: [Reads; 3]) {
    let [answer, notice, probe_notice] = expected;
    assert_eq!(
        Some(classify_refusal(text)),
        answer.error(text),
        "{text:?} as the round's answer"
    );
    assert_eq!(
        notice_ends_round(text, false),
        notice.error(text),
        "{text:?} as a notice"
    );
    assert_eq!(
        notice_ends_round(text, true),
        probe_notice.error(text),
        "{text:?} as a notice during a probe"
    );
}

use Reads::{Ignored, RateLimited, Refused, Unsupported};

#[test]
fn strfry_texts_say_unsupported_wherever_they_arrive() {
    // Before NIP-77, and nostr-sdk's own test: an unknown verb.
    check("ERROR: bad msg: unknown cmd", [Unsupported; 3]);
    check("unknown cmd", [Unsupported; 3]);
    // NIP-77 turned off in its config.
    check("ERROR: bad msg: negentropy disabled", [Unsupported; 3]);
    check("negentropy disabled", [Unsupported; 3]);
    // A `NEG-` verb it does not know.
    check("ERROR: negentropy error: unknown command", [Unsupported; 3]);
    // It expects the older four-element NEG-OPEN.
    check(
        "ERROR: negentropy error: negentropy query missing elements",
        [Unsupported; 3],
    );
}

#[test]
fn texts_that_do_not_name_the_verb_end_a_round_only_when_they_answer_it() {
    // nostr-rs-relay.
    check(
        "could not parse command",
        [Unsupported, Ignored, Unsupported],
    );
    // khatru with NIP-77 off.
    check(
        "failed to parse envelope: unknown envelope label",
        [Unsupported, Ignored, Unsupported],
    );
    // nostream.
    check(
        "Invalid message: \"value\" does not match any of the allowed types",
        [Unsupported, Ignored, Unsupported],
    );
    // rnostr.
    check("Unsupported message", [Unsupported, Ignored, Unsupported]);
    check("unknown message type", [Unsupported, Ignored, Unsupported]);
    check("not supported", [Unsupported, Ignored, Unsupported]);
}

#[test]
fn texts_naming_negentropy_end_any_round() {
    check("NEG-OPEN not supported", [Unsupported; 3]);
    check("error: negentropy unsupported", [Unsupported; 3]);
    check("bad msg: NEG-OPEN", [Unsupported; 3]);
    check("ERROR: bad msg: invalid message NEG-OPEN", [Unsupported; 3]);
    check("unknown message type: NEG-OPEN", [Unsupported; 3]);
}

#[test]
fn a_text_about_another_verb_is_not_about_negentropy() {
    check("COUNT not supported", [Refused, Ignored, Ignored]);
    check(
        "unsupported: AUTH required first",
        [Refused, Ignored, Ignored],
    );
}

#[test]
fn query_rate_refusals_end_a_round_wherever_they_arrive() {
    check("rate-limited: too many queries", [RateLimited; 3]);
    // A subscription-count limit behind a rate-limited prefix is not a query-rate refusal.
    check("rate-limited: too many REQs", [Refused, Ignored, Ignored]);
}

#[test]
fn other_texts_refuse_the_round_they_answer_and_leave_others_alone() {
    check(
        "ERROR: too many concurrent NEG requests",
        [Refused, Ignored, Ignored],
    );
    check(
        "ERROR: too many concurrent REQs",
        [Refused, Ignored, Ignored],
    );
    check("blocked: spam", [Refused, Ignored, Ignored]);
    check("", [Refused, Ignored, Ignored]);
}

#[test]
fn auth_required_refuses_the_round_it_answers_until_the_client_authenticates() {
    use Reads::AuthRequired;
    // strfry and khatru: NEG-ERR for a NEG-OPEN of filters served to authenticated clients.
    check(
        "auth-required: requested filter requires authentication",
        [AuthRequired, Ignored, Ignored],
    );
    check(
        "auth-required: this query requires you to be authenticated",
        [AuthRequired, Ignored, Ignored],
    );
}
