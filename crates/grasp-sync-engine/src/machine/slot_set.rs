//! `SlotSet`: a set of small numbers as bits, for which of the direct members a relay covers.

/// A set of slots (`u32`), one bit each, in words up to the largest slot held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SlotSet {
    words: Vec<u64>,
    len: usize,
}

impl SlotSet {
    /// Adds `slot`; whether it was not there yet.
    pub(crate) fn insert(&mut self, slot: u32) -> bool {
        let (word, bit) = place(slot);
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        let added = self.words[word] & bit == 0;
        self.words[word] |= bit;
        self.len += usize::from(added);
        added
    }

    /// Removes `slot`; whether it was there.
    pub(crate) fn remove(&mut self, slot: u32) -> bool {
        let (word, bit) = place(slot);
        let Some(bits) = self.words.get_mut(word) else {
            return false;
        };
        let removed = *bits & bit != 0;
        *bits &= !bit;
        self.len -= usize::from(removed);
        removed
    }

    /// Whether `slot` is in the set.
    pub(crate) fn contains(&self, slot: u32) -> bool {
        let (word, bit) = place(slot);
        self.words.get(word).is_some_and(|bits| bits & bit != 0)
    }

    /// Whether the set holds no slot.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The word holding `slot`'s bit, and the bit.
fn place(slot: u32) -> (usize, u64) {
    ((slot / 64) as usize, 1 << (slot % 64))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::SlotSet;

    proptest! {
        /// Every answer matches a `BTreeSet` of the same slots after each step.
        #[test]
        fn slot_set_answers_as_a_btreeset(
            steps in prop::collection::vec((any::<bool>(), 0u32..300), 0..200),
        ) {
            let mut set = SlotSet::default();
            let mut model = BTreeSet::new();
            for (add, slot) in steps {
                if add {
                    prop_assert_eq!(set.insert(slot), model.insert(slot));
                } else {
                    prop_assert_eq!(set.remove(slot), model.remove(&slot));
                }
                prop_assert_eq!(set.is_empty(), model.is_empty());
                for probe in 0..300 {
                    prop_assert_eq!(set.contains(probe), model.contains(&probe));
                }
            }
        }
    }
}
