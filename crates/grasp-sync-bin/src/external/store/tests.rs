//! Tests of the OK-reply mapping.

use grasp_sync_engine::{IngestOutcome, StoreError};

use super::super::link::OkReply;
use super::ExternalStore;

fn check(accepted: bool, message: &str, expected: IngestOutcome) {
    check_result(accepted, message, Ok(expected));
}

fn check_result(accepted: bool, message: &str, expected: Result<IngestOutcome, StoreError>) {
    let reply = OkReply {
        accepted,
        message: message.to_owned(),
    };
    assert_eq!(ExternalStore::outcome(&reply), expected, "{reply:?}");
}

#[test]
fn ok_true_is_saved_unless_the_reason_says_duplicate() {
    check(true, "", IngestOutcome::Saved);
    check(true, "stored", IngestOutcome::Saved);
    check(
        true,
        "duplicate: already have this event",
        IngestOutcome::Duplicate,
    );
}

#[test]
fn ok_false_is_rejected_with_the_relays_reason() {
    check(
        false,
        "blocked: announcement does not list this service",
        IngestOutcome::Rejected("blocked: announcement does not list this service".to_owned()),
    );
    check(
        false,
        "duplicate: but refused",
        IngestOutcome::Rejected("duplicate: but refused".to_owned()),
    );
}

#[test]
fn ok_false_that_says_nothing_about_the_event_is_a_failed_write() {
    for message in [
        "error: database error",
        "rate-limited: slow down",
        "auth-required: you must auth",
    ] {
        check_result(
            false,
            message,
            Err(StoreError::Backend(format!(
                "the own relay did not save the event: {message}"
            ))),
        );
    }
}
