//! Tests of the OK-reply mapping.

use nostr_database::{RejectedReason, SaveEventStatus};

use super::super::link::OkReply;
use super::RelayDatabase;

fn check(accepted: bool, message: &str, expected: Result<SaveEventStatus, String>) {
    let reply = OkReply {
        accepted,
        message: message.to_owned(),
    };
    let got = RelayDatabase::save_status(&reply).map_err(|error| error.to_string());
    assert_eq!(got, expected, "{reply:?}");
}

#[test]
fn ok_true_is_a_successful_save_whatever_the_reason() {
    for message in ["", "stored", "duplicate: already have this event"] {
        check(true, message, Ok(SaveEventStatus::Success));
    }
}

#[test]
fn ok_false_is_a_refusal_of_the_event() {
    for message in [
        "blocked: announcement does not list this service",
        "duplicate: but refused",
        "invalid: bad tags",
    ] {
        check(
            false,
            message,
            Ok(SaveEventStatus::Rejected(RejectedReason::Other)),
        );
    }
}

#[test]
fn ok_false_that_says_nothing_about_the_event_is_a_failed_save() {
    for message in [
        "error: database error",
        "rate-limited: slow down",
        "auth-required: you must auth",
    ] {
        check(
            false,
            message,
            Err(format!("the own relay did not save the event: {message}")),
        );
    }
}
