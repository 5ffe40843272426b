//! The whole flow through the public API: signed events → index → targets → batches →
//! confirmation → an empty diff, then a reconnect after the retention window.

use grasp_sync_model::{
    AnnouncementLimits, ConnectionStatus, Nip34Event, PaginationState, PendingSyncIndex,
    RelaySyncIndex, RelayUrl, RepoSyncIndex, SyncLevel, SyncMethod, compute_actions,
    derive_relay_targets,
};
use nostr::{Event, EventBuilder, Filter, Keys, Kind, SubscriptionId, Tag, Timestamp};

fn event(keys: &Keys, kind: u16, tags: &[&[&str]], created_at: u64) -> Event {
    let tags: Vec<Tag> = tags
        .iter()
        .map(|values| Tag::parse(values.iter().copied()).expect("tag parses"))
        .collect();
    EventBuilder::new(Kind::Custom(kind), "")
        .tags(tags)
        .custom_created_at(Timestamp::from_secs(created_at))
        .sign_with_keys(keys)
        .expect("event signs")
}

#[test]
fn events_become_actions_and_confirmed_items_are_not_asked_again() {
    let owner = Keys::generate();
    let coordinate = format!("30617:{}:grasp", owner.public_key().to_hex());
    let limits = AnnouncementLimits::default();
    let events = [
        event(&Keys::generate(), 1617, &[&["a", &coordinate]], 90),
        event(
            &owner,
            30617,
            &[
                &["d", "grasp"],
                &["relays", "wss://a.example", "wss://own.example/"],
            ],
            100,
        ),
        event(&Keys::generate(), 1621, &[&["a", &coordinate]], 110),
    ];
    let mut repos = RepoSyncIndex::new(limits);
    for event in &events {
        match Nip34Event::parse_with_limits(event, &limits).unwrap() {
            Nip34Event::Announcement(announcement) => repos.handle_announcement(&announcement),
            Nip34Event::Root(root) => repos.handle_root_event(&root),
            Nip34Event::State(_) => unreachable!("no state event in this flow"),
        };
    }
    let own = RelayUrl::parse("wss://own.example").unwrap();
    let a = RelayUrl::parse("wss://a.example").unwrap();
    let targets = derive_relay_targets(&repos, Some(&own));
    assert_eq!(targets.keys().collect::<Vec<_>>(), [&a]);
    assert_eq!(
        targets[&a].root_events.len(),
        2,
        "the patch seen before the announcement counts"
    );

    let mut confirmed = RelaySyncIndex::new();
    let mut pending = PendingSyncIndex::new();
    confirmed
        .register(&a)
        .mark_syncing(Timestamp::from_secs(200));
    let actions = compute_actions(&targets, &pending, &confirmed);
    assert_eq!(actions.len(), 1);

    let batch = pending.open_batch(&a, actions[0].needs.clone(), SyncMethod::ReqEose);
    let sub = SubscriptionId::new("historic-1");
    pending
        .register_subscription(
            &a,
            batch,
            sub.clone(),
            PaginationState::new([Filter::new().kind(Kind::Custom(1621))]),
        )
        .unwrap();
    assert!(
        compute_actions(&targets, &pending, &confirmed).is_empty(),
        "pending items are not asked again"
    );
    let resolved = pending.resolve_subscription(&a, &sub).unwrap();
    assert!(resolved.batch_complete);
    let outcome = pending
        .confirm_batch(&a, batch, &mut confirmed, Timestamp::from_secs(210))
        .unwrap();
    assert!(outcome.relay_idle && !outcome.failed);
    assert!(
        compute_actions(&targets, &pending, &confirmed).is_empty(),
        "confirmed items are not asked again"
    );

    let state = confirmed.get_mut(&a).unwrap();
    state.complete_historic_sync(Timestamp::from_secs(216));
    assert_eq!(state.connection_status, ConnectionStatus::Connected);
    assert_eq!(state.repos.values().collect::<Vec<_>>(), [&SyncLevel::Full]);

    // Disconnected for more than 15 minutes: state is cleared and everything is asked again.
    state.mark_disconnected(Timestamp::from_secs(300));
    pending.clear_relay(&a);
    assert!(!state.should_clear_state(Timestamp::from_secs(1_200)));
    assert!(state.should_clear_state(Timestamp::from_secs(1_201)));
    state.clear_sync_state();
    state.mark_syncing(Timestamp::from_secs(1_201));
    assert_eq!(compute_actions(&targets, &pending, &confirmed), actions);
}
