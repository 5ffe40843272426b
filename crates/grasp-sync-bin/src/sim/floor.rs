//! The byte floor of live subscriptions per relay: for every tag family a relay's live
//! coverage needs (`#d`, `#a`, `#A`, `#e`, `#E`, `#q`), the serialized bytes of its values over
//! the 96 KiB REQ payload budget, rounded up, summed. No packing can hold that coverage in
//! fewer REQs, so it is the yardstick for the engine's live subscription count.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use grasp_sync_testkit::GeneratedNetwork;
use nostr::EventId;
use serde::Serialize;

/// Filter payload one REQ carries at most (the design's 96 KB working budget).
pub const REQ_PAYLOAD_BUDGET: usize = 96 * 1024;

/// Bytes a value costs in a serialized filter: its text, two quotes and a comma.
pub(super) fn value_cost(value: &str) -> usize {
    value.len() + 3
}

/// One tag family of one relay's target set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FamilyFloor {
    /// Distinct values.
    pub values: usize,
    /// Their serialized bytes.
    pub bytes: usize,
    /// `ceil(bytes / 96 KiB)`.
    pub floor: usize,
}

/// The byte floor of one relay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RelayFloor {
    /// Per tag family (`d`, `a`, `A`, `e`, `E`, `q`).
    pub families: BTreeMap<String, FamilyFloor>,
    /// Sum of the families' floors.
    pub floor: usize,
}

/// The floor of a family with these values.
pub(super) fn family_floor<'a>(values: impl IntoIterator<Item = &'a str>) -> FamilyFloor {
    let unique: BTreeSet<&str> = values.into_iter().collect();
    let bytes: usize = unique.iter().map(|v| value_cost(v)).sum();
    FamilyFloor {
        values: unique.len(),
        bytes,
        floor: bytes.div_ceil(REQ_PAYLOAD_BUDGET),
    }
}

/// The values one relay's live coverage must carry, by family.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetSet {
    /// `d` identifiers of accepted repositories (repository state).
    pub identifiers: BTreeSet<String>,
    /// Repository coordinates (`30617:<owner>:<d>`).
    pub coordinates: BTreeSet<String>,
    /// Root event IDs, hex.
    pub roots: BTreeSet<String>,
    /// IDs of direct thread members (events tagging a root), hex.
    pub members: BTreeSet<String>,
}

impl TargetSet {
    /// Its floor: `d` over identifiers; `a` and `A` over coordinates; `e` over roots and
    /// members; `E` over roots; `q` over coordinates, roots and members.
    pub fn floor(&self) -> RelayFloor {
        fn strs(set: &BTreeSet<String>) -> Vec<&str> {
            set.iter().map(String::as_str).collect()
        }
        let mut families = BTreeMap::new();
        families.insert("d".to_owned(), family_floor(strs(&self.identifiers)));
        families.insert("a".to_owned(), family_floor(strs(&self.coordinates)));
        families.insert("A".to_owned(), family_floor(strs(&self.coordinates)));
        let mut e = strs(&self.roots);
        e.extend(strs(&self.members));
        families.insert("e".to_owned(), family_floor(e.clone()));
        families.insert("E".to_owned(), family_floor(strs(&self.roots)));
        let mut q = e;
        q.extend(strs(&self.coordinates));
        families.insert("q".to_owned(), family_floor(q));
        let floor = families.values().map(|f| f.floor).sum();
        RelayFloor { families, floor }
    }
}

/// Each relay's target set: the accepted repositories listing it, their roots, and the
/// events (anywhere on the network) tagging one of those roots.
pub fn target_sets(network: &GeneratedNetwork) -> Vec<TargetSet> {
    let mut sets = vec![TargetSet::default(); network.relay_events.len()];
    let mut root_repo: HashMap<String, usize> = HashMap::new();
    for (i, repo) in network.repos.iter().enumerate() {
        if !repo.accepted() {
            continue;
        }
        for &r in &repo.relay_indices {
            let Some(set) = sets.get_mut(r) else { continue };
            set.identifiers.insert(repo.repo.identifier.clone());
            set.coordinates.insert(repo.repo.coordinate());
            set.roots.extend(repo.roots.iter().map(EventId::to_hex));
        }
        for root in &repo.roots {
            root_repo.insert(root.to_hex(), i);
        }
    }
    let mut seen: BTreeSet<EventId> = BTreeSet::new();
    for event in network.relay_events.iter().flatten() {
        if !seen.insert(event.id)
            || !network.expected.contains(&event.id)
            || network.expected_descendants.contains(&event.id)
        {
            continue;
        }
        let repo = event
            .tags
            .iter()
            .filter_map(|tag| tag.as_slice().get(1))
            .find_map(|value| root_repo.get(value.as_str()));
        let Some(&repo) = repo else { continue };
        if network.repos[repo].roots.contains(&event.id) {
            continue;
        }
        for &r in &network.repos[repo].relay_indices {
            if let Some(set) = sets.get_mut(r) {
                set.members.insert(event.id.to_hex());
            }
        }
    }
    sets
}

#[cfg(test)]
mod tests;
