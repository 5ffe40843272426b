//! What a run that did not converge left out: the missing expected events, counted by kind,
//! by whether they are second-generation descendants, and by which shards own a relay that
//! holds them. The sim prints it under the report, so a failed run says where to look.

use std::collections::{BTreeMap, BTreeSet};

use grasp_sync_testkit::GeneratedNetwork;
use nostr::EventId;

/// One line per grouping, empty when nothing is missing. `owners[r]` is the shard that owns
/// relay `r` (all zeros for one daemon).
pub(super) fn describe_missing(
    generated: &GeneratedNetwork,
    missing: &BTreeSet<EventId>,
    owners: &[u16],
) -> Vec<String> {
    if missing.is_empty() {
        return Vec::new();
    }
    let mut kinds: BTreeMap<u16, usize> = BTreeMap::new();
    let mut shards_of: BTreeMap<EventId, BTreeSet<u16>> = BTreeMap::new();
    for (relay, events) in generated.relay_events.iter().enumerate() {
        for event in events.iter().filter(|e| missing.contains(&e.id)) {
            let shards = shards_of.entry(event.id).or_insert_with(|| {
                *kinds.entry(event.kind.as_u16()).or_default() += 1;
                BTreeSet::new()
            });
            shards.extend(owners.get(relay).copied());
        }
    }
    let mut holders: BTreeMap<Vec<u16>, usize> = BTreeMap::new();
    for shards in shards_of.values() {
        *holders.entry(shards.iter().copied().collect()).or_default() += 1;
    }
    let descendants = missing
        .iter()
        .filter(|id| generated.expected_descendants.contains(id))
        .count();
    let join = |pairs: Vec<String>| pairs.join(", ");
    vec![
        format!(
            "missing: {} expected events, {descendants} of them second-generation descendants",
            missing.len()
        ),
        format!(
            "  by kind: {}",
            join(kinds.iter().map(|(k, n)| format!("{k}: {n}")).collect())
        ),
        format!(
            "  by the shards owning a relay that holds them: {}",
            join(
                holders
                    .iter()
                    .map(|(shards, n)| format!("{shards:?}: {n}"))
                    .collect()
            )
        ),
    ]
}
