//! [`AddressRefusals`]: which relays the address policy refused, counted by stage and reason
//! for `/status` and the metrics. Each relay counts once; at most [`MAX_REMEMBERED`] relays are
//! remembered (announcements are remote data), after which new refusals are still counted
//! but no longer told apart from repeats.

use std::collections::{BTreeMap, BTreeSet};

use grasp_sync_model::RelayUrl;

/// Refused relays remembered to count each once.
pub(crate) const MAX_REMEMBERED: usize = 4_096;

/// Refusal counts by stage and reason.
#[derive(Debug, Clone, Default)]
pub(crate) struct AddressRefusals {
    seen: BTreeSet<RelayUrl>,
    counts: BTreeMap<(&'static str, &'static str), u64>,
}

impl AddressRefusals {
    /// Records that `relay` was refused at `stage` for `reason`; true the first time (or once
    /// the memory is full).
    pub(crate) fn record(
        &mut self,
        stage: &'static str,
        reason: &'static str,
        relay: &RelayUrl,
    ) -> bool {
        if self.seen.contains(relay) {
            return false;
        }
        if self.seen.len() < MAX_REMEMBERED {
            self.seen.insert(relay.clone());
        }
        *self.counts.entry((stage, reason)).or_default() += 1;
        true
    }

    /// Counts by `stage:reason`.
    pub(crate) fn counts(&self) -> BTreeMap<String, u64> {
        self.counts
            .iter()
            .map(|((stage, reason), count)| (format!("{stage}:{reason}"), *count))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relay(n: usize) -> RelayUrl {
        RelayUrl::parse(&format!("ws://10.0.{}.{}", n / 256, n % 256)).expect("url")
    }

    #[test]
    fn each_relay_counts_once_and_memory_is_bounded() {
        let mut refusals = AddressRefusals::default();
        assert!(refusals.record("discovery", "internal", &relay(1)));
        assert!(!refusals.record("discovery", "internal", &relay(1)));
        assert!(refusals.record("dial", "internal", &relay(2)));
        assert_eq!(
            refusals.counts(),
            BTreeMap::from([
                ("dial:internal".to_owned(), 1),
                ("discovery:internal".to_owned(), 1)
            ])
        );
        for n in 0..(MAX_REMEMBERED * 2) {
            refusals.record("discovery", "internal", &relay(n));
        }
        assert_eq!(refusals.seen.len(), MAX_REMEMBERED);
    }
}
