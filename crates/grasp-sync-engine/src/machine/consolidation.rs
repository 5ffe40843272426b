//! The live consolidation rule: core live groups, opened one batch at a time as the index
//! grows, fragment; once they exceed the baseline (the groups the complete live set needs when
//! packed from scratch) by more than the margin, the live set is rebuilt. A check is queued when
//! the groups pass the margin and runs once no batch is pending, when the baseline covers
//! everything the relay syncs. Pure state: the actor supplies the counts and performs the
//! rebuild.

#[cfg(test)]
mod tests;

/// One relay's queued consolidation check; a new session starts with none.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Consolidation {
    queued: bool,
}

impl Consolidation {
    /// The session's core live groups are now `core`: a check is queued once they pass
    /// `margin` (the baseline is at least one group, so nothing at or under the margin can
    /// exceed it).
    pub fn handle_live_changed(&mut self, core: usize, margin: usize) {
        if core > margin {
            self.queued = true;
        }
    }

    /// A new session: what the last one queued is gone with its groups.
    pub fn handle_session_started(&mut self) {
        self.queued = false;
    }

    /// Takes the queued check if it may run now: once the relay has no pending batch.
    pub fn take_due(&mut self, batches_pending: bool) -> bool {
        let due = self.queued && !batches_pending;
        if due {
            self.queued = false;
        }
        due
    }
}

/// Whether `core` live groups are fragmented against a `baseline` packed from scratch: more
/// than `margin` groups above it.
pub fn is_fragmented(core: usize, baseline: usize, margin: usize) -> bool {
    core > baseline.saturating_add(margin)
}
