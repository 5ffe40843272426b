//! The refusal routing rules: the scope a refusal is judged in, the retired subscription's
//! ceiling lesson, the remedies tried first, the consequence per kind of subscription and
//! action, the discovery retry, and which REQ a NOTICE answers.

use std::time::Instant;

use grasp_sync_health::{RefusalAction, RefusalCategory, RefusalScope};
use grasp_sync_model::BatchId;

use super::{
    Answered, Consequence, NoticeAnswers, Remedy, consequence, discovery_retries_now,
    notice_answers, remedy_first, retired_teaches_ceiling,
};

const PAGE: Answered = Answered::Transient {
    batch: BatchId(7),
    filters: 3,
    watchdog_closing: false,
};
const CORE: Answered = Answered::Live {
    filters: 4,
    auxiliary: false,
};

#[test]
fn held_work_is_judged_as_coverage_and_anything_given_up_as_retired() {
    assert_eq!(PAGE.scope(None), RefusalScope::Coverage { filters: 3 });
    assert_eq!(CORE.scope(None), RefusalScope::Coverage { filters: 4 });
    let given_up = Answered::Transient {
        batch: BatchId(7),
        filters: 3,
        watchdog_closing: true,
    };
    assert_eq!(given_up.scope(None), RefusalScope::Retired);
    assert_eq!(Answered::Retired.scope(None), RefusalScope::Retired);
}

#[test]
fn a_discovery_scope_wins_for_a_transient_req_only() {
    let given_up = Answered::Transient {
        batch: BatchId(1),
        filters: 1,
        watchdog_closing: true,
    };
    assert_eq!(
        given_up.scope(Some(RefusalScope::Identity)),
        RefusalScope::Identity
    );
    assert_eq!(
        PAGE.scope(Some(RefusalScope::Mailbox)),
        RefusalScope::Mailbox
    );
    assert_eq!(
        CORE.scope(Some(RefusalScope::Identity)),
        RefusalScope::Coverage { filters: 4 },
        "a live group is never a discovery query"
    );
    assert_eq!(PAGE.batch(), Some(BatchId(7)));
    assert_eq!(CORE.batch(), None);
}

#[test]
fn a_retired_subscription_teaches_only_a_filter_count_within_the_ceiling() {
    let too_many = RefusalCategory::TooManyFilters;
    assert_eq!(retired_teaches_ceiling(too_many, Some(5), 10), Some(5));
    assert_eq!(retired_teaches_ceiling(too_many, Some(10), 10), Some(10));
    assert_eq!(
        retired_teaches_ceiling(too_many, Some(11), 10),
        None,
        "above the ceiling: already known"
    );
    assert_eq!(
        retired_teaches_ceiling(too_many, Some(1), 10),
        None,
        "one filter cannot be too many"
    );
    assert_eq!(retired_teaches_ceiling(too_many, None, 10), None);
    assert_eq!(
        retired_teaches_ceiling(RefusalCategory::Blocked, Some(5), 10),
        None
    );
}

#[test]
fn auth_and_subscription_count_refusals_try_their_remedy_first() {
    assert_eq!(
        remedy_first(RefusalCategory::AuthRequired),
        Some(Remedy::ParkForAuth)
    );
    assert_eq!(
        remedy_first(RefusalCategory::TooManySubscriptions),
        Some(Remedy::LearnBudget)
    );
    for other in [
        RefusalCategory::Blocked,
        RefusalCategory::RateLimited,
        RefusalCategory::TooManyFilters,
        RefusalCategory::RetainedBytesExceeded,
        RefusalCategory::Unknown,
    ] {
        assert_eq!(remedy_first(other), None, "{other:?}");
    }
}

#[test]
fn a_refused_page_fails_its_batch_and_a_byte_cap_rebuilds_the_live_set_first() {
    let paused = RefusalAction::CoveragePaused {
        until: Instant::now(),
    };
    assert_eq!(
        consequence(PAGE, Some(&paused)),
        Consequence::FailBatch {
            batch: BatchId(7),
            rebuild_live: false
        }
    );
    assert_eq!(
        consequence(PAGE, Some(&RefusalAction::ByteCap { bytes: Some(4096) })),
        Consequence::FailBatch {
            batch: BatchId(7),
            rebuild_live: true
        }
    );
    assert_eq!(
        consequence(PAGE, None),
        Consequence::FailBatch {
            batch: BatchId(7),
            rebuild_live: false
        }
    );
}

#[test]
fn a_refused_auxiliary_group_retires_the_auxiliary_coverage_whatever_the_action() {
    let auxiliary = Answered::Live {
        filters: 3,
        auxiliary: true,
    };
    for action in [
        None,
        Some(RefusalAction::ByteCap { bytes: None }),
        Some(RefusalAction::CoveragePaused {
            until: Instant::now(),
        }),
    ] {
        assert_eq!(
            consequence(auxiliary, action.as_ref()),
            Consequence::RetireAuxiliary
        );
    }
}

#[test]
fn a_refused_core_group_is_rebuilt_under_a_byte_cap_else_repaired() {
    assert_eq!(
        consequence(CORE, Some(&RefusalAction::ByteCap { bytes: None })),
        Consequence::RebuildLive
    );
    assert_eq!(
        consequence(
            CORE,
            Some(&RefusalAction::Regroup {
                submitted_filters: Some(4)
            })
        ),
        Consequence::RepairLive {
            split_suspects: false
        }
    );
}

#[test]
fn only_several_filters_refused_by_policy_become_suspects_sent_one_per_req() {
    let paused = RefusalAction::CoveragePaused {
        until: Instant::now(),
    };
    assert_eq!(
        consequence(CORE, Some(&paused)),
        Consequence::RepairLive {
            split_suspects: true
        }
    );
    let single = Answered::Live {
        filters: 1,
        auxiliary: false,
    };
    assert_eq!(
        consequence(single, Some(&paused)),
        Consequence::RepairLive {
            split_suspects: false
        },
        "one refused filter is paused, not split"
    );
    assert_eq!(
        consequence(Answered::Retired, Some(&paused)),
        Consequence::Nothing
    );
}

#[test]
fn a_refused_discovery_query_is_asked_again_at_once_only_when_taught_or_rate_limited() {
    assert!(discovery_retries_now(true, RefusalCategory::TooManyFilters));
    assert!(discovery_retries_now(false, RefusalCategory::RateLimited));
    assert!(!discovery_retries_now(
        false,
        RefusalCategory::TooManyFilters
    ));
    assert!(!discovery_retries_now(false, RefusalCategory::Blocked));
}

#[test]
fn a_notice_answers_the_widest_req_for_a_filter_count_the_oldest_for_auth_and_the_newest_otherwise()
{
    assert_eq!(
        notice_answers(RefusalCategory::TooManyFilters),
        Some(NoticeAnswers::Widest)
    );
    assert_eq!(
        notice_answers(RefusalCategory::AuthRequired),
        Some(NoticeAnswers::Oldest)
    );
    for refuses_a_req in [
        RefusalCategory::TooManySubscriptions,
        RefusalCategory::InvalidFilter,
        RefusalCategory::RetainedBytesExceeded,
    ] {
        assert_eq!(
            notice_answers(refuses_a_req),
            Some(NoticeAnswers::Newest),
            "{refuses_a_req:?}"
        );
    }
    for not_a_req in [
        RefusalCategory::RateLimited,
        RefusalCategory::Blocked,
        RefusalCategory::Unknown,
    ] {
        assert_eq!(notice_answers(not_a_req), None, "{not_a_req:?}");
    }
}
