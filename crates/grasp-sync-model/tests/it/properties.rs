//! Property tests: the diff never re-adds pending or confirmed work and loses none of the
//! target, the index does not depend on the order announcements arrive in, and relay URL
//! normalisation is idempotent.

use std::collections::BTreeMap;

use grasp_sync_model::{
    ConnectionStatus, PendingItems, PendingSyncIndex, RelaySyncIndex, RelaySyncNeeds, RelayUrl,
    RepoSyncIndex, RootEvent, RootKind, SyncLevel, SyncMethod, compute_actions,
    derive_relay_targets,
};
use nostr::{PublicKey, Timestamp};
use proptest::prelude::*;

use crate::support::{announcement, coord, id, relay};

const RELAYS: usize = 5;
const REPOS: usize = 6;
const ROOTS: u8 = 12;

fn level(full: bool) -> SyncLevel {
    if full {
        SyncLevel::Full
    } else {
        SyncLevel::StateOnly
    }
}

fn status(n: u8) -> ConnectionStatus {
    match n % 5 {
        0 => ConnectionStatus::Disconnected,
        1 => ConnectionStatus::Connecting,
        2 => ConnectionStatus::Syncing,
        3 => ConnectionStatus::Connected,
        _ => ConnectionStatus::ConnectedHistoricSyncFailures,
    }
}

fn items(repos: &[(usize, bool)], roots: &[u8]) -> PendingItems {
    let mut items = PendingItems::default();
    for (repo, full) in repos {
        items.add_repo(coord(*repo), level(*full));
    }
    items.root_events.extend(roots.iter().map(|byte| id(*byte)));
    items
}

type RepoSpec = (usize, Vec<usize>, bool, Vec<u8>);
type ItemsSpec = (usize, Vec<(usize, bool)>, Vec<u8>);

fn repo_specs() -> impl Strategy<Value = Vec<RepoSpec>> {
    prop::collection::vec(
        (
            0..REPOS,
            prop::collection::vec(0..RELAYS, 0..4),
            any::<bool>(),
            prop::collection::vec(0..ROOTS, 0..4),
        ),
        0..8,
    )
}

fn item_specs() -> impl Strategy<Value = Vec<ItemsSpec>> {
    prop::collection::vec(
        (
            0..RELAYS,
            prop::collection::vec((0..REPOS, any::<bool>()), 0..4),
            prop::collection::vec(0..ROOTS, 0..5),
        ),
        0..8,
    )
}

fn build_index(specs: &[RepoSpec]) -> RepoSyncIndex {
    let mut index = RepoSyncIndex::default();
    let mut held = Vec::new();
    for (n, (repo, relays, full, roots)) in specs.iter().enumerate() {
        let ann = announcement(
            coord(*repo),
            relays.iter().map(|r| relay(*r)).collect(),
            n as u64,
            n as u8,
        );
        if *full {
            index.handle_announcement(&ann);
        } else {
            held.push(grasp_sync_model::PurgatoryEntry {
                announcement: ann,
                status: grasp_sync_model::ExpiryStatus::Active,
            });
            index.reconcile_purgatory(&held);
        }
        for root in roots {
            index.handle_root_event(&root_event(*root, &[*repo]));
        }
    }
    index
}

fn root_event(byte: u8, repos: &[usize]) -> RootEvent {
    RootEvent {
        id: id(byte),
        kind: RootKind::Issue,
        author: PublicKey::from_byte_array([9; 32]),
        created_at: Timestamp::from_secs(1),
        repos: repos.iter().map(|repo| coord(*repo)).collect(),
        dropped_repos: 0,
    }
}

fn covered(
    set: Option<&RelaySyncNeeds>,
    repo: &grasp_sync_model::RepoCoordinate,
    wanted: SyncLevel,
) -> bool {
    set.is_some_and(|set| set.covers_repo(repo, wanted))
}

proptest! {
    #[test]
    fn diff_never_readds_pending_or_confirmed_and_covers_the_target(
        repos in repo_specs(),
        pending_specs in item_specs(),
        confirmed_specs in item_specs(),
        statuses in prop::collection::vec(any::<u8>(), RELAYS),
    ) {
        let index = build_index(&repos);
        let targets = derive_relay_targets(&index, None);
        let mut naive: BTreeMap<RelayUrl, RelaySyncNeeds> = BTreeMap::new();
        for (coordinate, needs) in index.iter() {
            for url in &needs.relays {
                let target = naive.entry(url.clone()).or_default();
                target.add_repo(coordinate.clone(), needs.sync_level);
                if needs.sync_level == SyncLevel::Full {
                    target.root_events.extend(needs.root_events.iter().copied());
                }
            }
        }
        prop_assert_eq!(&targets, &naive, "targets are the plain inversion of the index");
        let mut pending = PendingSyncIndex::new();
        for (r, repos, roots) in &pending_specs {
            pending.open_batch(&relay(*r), items(repos, roots), SyncMethod::ReqEose);
        }
        let mut confirmed = RelaySyncIndex::new();
        for (n, status_byte) in statuses.iter().enumerate() {
            confirmed.register(&relay(n)).connection_status = status(*status_byte);
        }
        for (r, repos, roots) in &confirmed_specs {
            let state = confirmed.register(&relay(*r));
            for (repo, full) in repos {
                state.confirm_repo(coord(*repo), level(*full));
            }
            state.root_events.extend(roots.iter().map(|byte| id(*byte)));
        }

        let actions = compute_actions(&targets, &pending, &confirmed);
        let by_relay: BTreeMap<&RelayUrl, &RelaySyncNeeds> = actions.iter().map(|a| (&a.relay, &a.needs)).collect();
        prop_assert_eq!(by_relay.len(), actions.len(), "one action per relay");
        for action in &actions {
            let state = confirmed.get(&action.relay).unwrap();
            prop_assert!(state.connection_status.is_connected());
            prop_assert!(!action.needs.is_empty());
            let in_flight = pending.pending_items(&action.relay);
            for (repo, wanted) in &action.needs.repos {
                prop_assert!(!state.covers_repo(repo, *wanted), "confirmed {repo} re-added");
                prop_assert!(!in_flight.covers_repo(repo, *wanted), "pending {repo} re-added");
            }
            for root in &action.needs.root_events {
                prop_assert!(!state.root_events.contains(root) && !in_flight.root_events.contains(root));
            }
        }
        for (relay_url, target) in &targets {
            let Some(state) = confirmed.get(relay_url) else { continue };
            if !state.connection_status.is_connected() {
                prop_assert!(!by_relay.contains_key(relay_url), "disconnected relay got an action");
                continue;
            }
            let in_flight = pending.pending_items(relay_url);
            let output = by_relay.get(relay_url).copied();
            for (repo, wanted) in &target.repos {
                prop_assert!(
                    covered(output, repo, *wanted) || in_flight.covers_repo(repo, *wanted) || state.covers_repo(repo, *wanted),
                    "{repo} lost from {relay_url}"
                );
            }
            for root in &target.root_events {
                prop_assert!(
                    output.is_some_and(|o| o.root_events.contains(root))
                        || in_flight.root_events.contains(root)
                        || state.root_events.contains(root)
                );
            }
        }
    }

    #[test]
    fn announcements_in_any_order_yield_the_same_index(
        (events, shuffled) in prop::collection::vec((0..3usize, any::<u8>(), prop::option::of(0..ROOTS)), 0..16)
            .prop_map(|events| {
                // One version per (repository, id): an id determines its content.
                let mut seen = std::collections::BTreeSet::new();
                events.into_iter().filter(|(repo, byte, _)| seen.insert((*repo, *byte))).collect::<Vec<_>>()
            })
            .prop_flat_map(|events| (Just(events.clone()), Just(events).prop_shuffle())),
    ) {
        let apply = |events: &[(usize, u8, Option<u8>)]| {
            let mut index = RepoSyncIndex::default();
            for (repo, byte, root) in events {
                // created_at has few values so NIP-01 ties are common; relays follow from the id.
                let relays = (0..RELAYS).filter(|bit| byte & (1 << bit) != 0).map(relay).collect();
                index.handle_announcement(&announcement(coord(*repo), relays, u64::from(byte % 3), *byte));
                if let Some(root) = root {
                    index.handle_root_event(&root_event(*root, &[(repo + 1) % 3]));
                }
            }
            index
        };
        prop_assert_eq!(apply(&events), apply(&shuffled));
    }

    #[test]
    fn normalisation_is_idempotent_on_arbitrary_text(input in "\\PC{0,40}") {
        check_idempotent(&input)?;
    }

    #[test]
    fn normalisation_is_idempotent_and_merges_spellings(
        secure in any::<bool>(),
        host in "[a-zA-Z0-9-]{1,8}(\\.[a-zA-Z0-9]{1,4}){0,2}",
        port in prop::option::of(prop_oneof![Just(80u32), Just(443), 1u32..70_000]),
        path in "(/[a-zA-Z0-9._~%-]{0,4}){0,3}",
        query in prop::option::of("[a-zA-Z0-9=&]{0,6}"),
        fragment in prop::option::of("[a-z]{0,4}"),
    ) {
        let scheme = if secure { "wss" } else { "ws" };
        let spell = |scheme: &str, host: &str, port: Option<u32>| {
            let mut url = format!("{scheme}://{host}");
            if let Some(port) = port {
                url.push_str(&format!(":{port}"));
            }
            url.push_str(&path);
            if let Some(query) = &query {
                url.push_str(&format!("?{query}"));
            }
            if let Some(fragment) = &fragment {
                url.push_str(&format!("#{fragment}"));
            }
            url
        };
        let input = spell(scheme, &host, port);
        check_idempotent(&input)?;
        if let Ok(url) = RelayUrl::parse(&input) {
            let shouted = RelayUrl::parse(&spell(&scheme.to_uppercase(), &host.to_uppercase(), port));
            prop_assert_eq!(shouted, Ok(url.clone()));
            if port.is_none() {
                let default = if secure { 443 } else { 80 };
                prop_assert_eq!(RelayUrl::parse(&spell(scheme, &host, Some(default))), Ok(url.clone()));
            }
        }
    }
}

fn check_idempotent(input: &str) -> Result<(), TestCaseError> {
    if let Ok(url) = RelayUrl::parse(input) {
        let again = RelayUrl::parse(url.as_str());
        prop_assert_eq!(again.as_ref(), Ok(&url), "from {:?}", input);
        prop_assert_eq!(
            url.host(),
            again.as_ref().map(RelayUrl::host).unwrap_or_default()
        );
    }
    Ok(())
}
