//! The host rule of [`TrackingBounds`](crate::TrackingBounds) for one author and one
//! repository: which hosts an author's repositories may name, and which of a repository's relays
//! it is a target on. The same rule as
//! [`derive_bounded_relay_targets`](crate::derive_bounded_relay_targets), applied to a part of
//! the index.

use crate::compact_set::CompactSet;
use crate::coordinate::RepoCoordinate;
use crate::relay_url::RelayUrl;
use crate::repo_index::RepoSyncNeeds;

/// An author's admitted hosts: the first `cap` distinct hosts its repositories name, in
/// coordinate order, then relay URL order (the own relay's host included). Most authors have
/// one or two, kept for as long as the author has repositories.
pub(super) fn admitted_hosts<'a>(
    repos: impl Iterator<Item = (&'a RepoCoordinate, &'a RepoSyncNeeds)>,
    cap: usize,
) -> CompactSet<String> {
    let mut hosts = CompactSet::new();
    for (_, needs) in repos {
        for relay in &needs.relays {
            if hosts.len() >= cap {
                return hosts;
            }
            if !hosts.contains(relay.host()) {
                hosts.insert(relay.host().to_owned());
            }
        }
    }
    hosts
}

/// The relays of `relays` a repository is a target on (not the own relay, host admitted), in
/// URL order, and how many the host cap left out.
pub(super) fn admitted_relays<'a>(
    relays: impl IntoIterator<Item = &'a RelayUrl>,
    own: Option<&RelayUrl>,
    hosts: Option<&CompactSet<String>>,
) -> (Vec<&'a RelayUrl>, usize) {
    let relays = relays.into_iter();
    let mut admitted = Vec::with_capacity(relays.size_hint().0);
    let mut dropped = 0;
    for relay in relays {
        if own.is_some_and(|own| own.same_endpoint(relay)) {
            continue;
        }
        if hosts.is_some_and(|hosts| hosts.contains(relay.host())) {
            admitted.push(relay);
        } else {
            dropped += 1;
        }
    }
    (admitted, dropped)
}
