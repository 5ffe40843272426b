//! Coverage a relay refused by policy (`blocked:`, `restricted:`, an invalid filter): paused
//! on its own for the policy pause (24 h) while the rest of the relay's coverage goes on, then
//! retried once as a recovery probe.
//!
//! Coverage is tracked as *atoms*: one value of a filter's single value list (`ids` or one
//! `#x` tag) together with the rest of the filter (its *shape*, time bounds and limit removed),
//! so a paused atom stays paused however later work is chunked. A filter with no value list,
//! or with several, is one atom.
//!
//! A multi-filter REQ refused by policy does not say which filter was refused, so its filters
//! become *suspects*: later work sends each suspect filter in a REQ of its own. A suspect refused
//! alone is paused; one that completes alone is cleared. A policy often concerns a kind of
//! filter rather than its values (say, every `#q` filter): once a filter is refused alone, new
//! filters of its shape are sent alone too, and a second refusal of that shape pauses the whole
//! shape; a completed filter of the shape clears it. Pure state: time comes in as an argument.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use grasp_sync_model::BatchId;
use nostr::{EventId, Filter, SingleLetterTag};

#[cfg(test)]
mod tests;

/// The value list of a filter that its atoms take their values from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum ValueList {
    Ids,
    Tag(SingleLetterTag),
}

/// A filter's shape: the filter without time bounds, limit and the list its atoms' values
/// come from, and which list that is (`None`: the filter has no value list, or several, and
/// is one atom).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Shape {
    rest: Filter,
    list: Option<ValueList>,
}

/// One value of a shape's value list.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum AtomValue {
    Id(EventId),
    Tag(String),
}

impl AtomValue {
    fn into_id(self) -> Option<EventId> {
        match self {
            AtomValue::Id(id) => Some(id),
            AtomValue::Tag(_) => None,
        }
    }

    fn into_tag(self) -> Option<String> {
        match self {
            AtomValue::Tag(value) => Some(value),
            AtomValue::Id(_) => None,
        }
    }
}

/// One unit of coverage: a filter shape and, if the filter has one value list, one value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Atom {
    shape: Shape,
    value: Option<AtomValue>,
}

/// A filter split into its shape and its atoms.
struct Split {
    shape: Shape,
    /// The atoms, in value order (none when the filter's one value list is empty).
    atoms: Vec<Atom>,
}

fn split(filter: &Filter) -> Split {
    let mut rest = without_bounds(filter);
    let lists: Vec<ValueList> = rest
        .ids
        .iter()
        .map(|_| ValueList::Ids)
        .chain(rest.generic_tags.keys().map(|tag| ValueList::Tag(*tag)))
        .collect();
    let [list] = lists.as_slice() else {
        let shape = Shape { rest, list: None };
        let whole = Atom {
            shape: shape.clone(),
            value: None,
        };
        return Split {
            shape,
            atoms: vec![whole],
        };
    };
    let values: Vec<AtomValue> = match list {
        ValueList::Ids => rest
            .ids
            .take()
            .into_iter()
            .flatten()
            .map(AtomValue::Id)
            .collect(),
        ValueList::Tag(tag) => rest
            .generic_tags
            .remove(tag)
            .into_iter()
            .flatten()
            .map(AtomValue::Tag)
            .collect(),
    };
    let shape = Shape {
        rest,
        list: Some(*list),
    };
    let atoms = values
        .into_iter()
        .map(|value| Atom {
            shape: shape.clone(),
            value: Some(value),
        })
        .collect();
    Split { shape, atoms }
}

/// A refused filter paused until its probe is due.
#[derive(Debug, Clone)]
struct Paused {
    /// The filter without time bounds or limit.
    filter: Filter,
    until: Instant,
    /// The probe was handed out and has not completed.
    probing: bool,
}

/// What to do with one filter of new work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Send it as usual.
    Send(Filter),
    /// Send it in a REQ of its own: it may hold refused coverage.
    Alone(Filter),
}

/// One relay's refused coverage. It outlives sessions, as a policy does.
#[derive(Debug, Default)]
pub struct RefusedCoverage {
    paused: Vec<Paused>,
    paused_atoms: BTreeMap<Atom, Instant>,
    suspect_atoms: BTreeMap<Atom, ()>,
    /// Shapes refused alone: how often, and until when the latest refusal pauses them.
    shapes: BTreeMap<Shape, (u32, Instant)>,
    /// The historic batches running a probe, with the filter each probes. Bounded by the
    /// paused filters: each is handed out once.
    probe_batches: BTreeMap<BatchId, Filter>,
}

/// Wait before a probe that could not run (its batch failed or never started) is due again.
pub const PROBE_RETRY: Duration = Duration::from_secs(5);

/// Refusals of one shape, each of a filter sent alone, after which the whole shape is paused.
pub const SHAPE_REFUSALS: u32 = 2;

impl RefusedCoverage {
    /// The relay refused a request carrying `filters` by policy; its coverage is paused until
    /// `until`. One filter is paused; several become suspects. Returns whether anything was
    /// paused.
    pub fn handle_refusal(&mut self, filters: &[Filter], until: Instant) -> bool {
        match filters {
            [] => false,
            [filter] => {
                let split = split(filter);
                if !split.atoms.is_empty() {
                    let entry = self.shapes.entry(split.shape).or_insert((0, until));
                    entry.0 += 1;
                    entry.1 = until;
                }
                for atom in split.atoms {
                    self.suspect_atoms.remove(&atom);
                    self.paused_atoms.insert(atom, until);
                }
                let filter = without_bounds(filter);
                match self.paused.iter_mut().find(|p| p.filter == filter) {
                    Some(known) => {
                        known.until = until;
                        known.probing = false;
                    }
                    None => self.paused.push(Paused {
                        filter,
                        until,
                        probing: false,
                    }),
                }
                true
            }
            several => {
                for filter in several {
                    for atom in split(filter).atoms {
                        if !self.paused_atoms.contains_key(&atom) {
                            self.suspect_atoms.insert(atom, ());
                        }
                    }
                }
                false
            }
        }
    }

    /// A request carrying `filters` completed: the suspects among them are innocent. Returns
    /// whether any suspect was cleared.
    pub fn handle_success(&mut self, filters: &[Filter]) -> bool {
        let mut cleared = false;
        let completed: Vec<Filter> = filters.iter().map(without_bounds).collect();
        self.paused
            .retain(|p| !(p.probing && completed.contains(&p.filter)));
        for filter in filters {
            let split = split(filter);
            if !split.atoms.is_empty() {
                cleared |= self.shapes.remove(&split.shape).is_some();
            }
            for atom in split.atoms {
                cleared |= self.suspect_atoms.remove(&atom).is_some();
            }
        }
        cleared
    }

    /// Whether nothing is paused or suspect.
    pub fn is_empty(&self) -> bool {
        self.paused_atoms.is_empty() && self.suspect_atoms.is_empty() && self.shapes.is_empty()
    }

    /// Whether any of `filters` touches refused coverage (paused or suspect values, or a
    /// shape refused before): such work goes by REQ, where a refusal names its filters.
    pub fn affects(&self, filters: &[Filter]) -> bool {
        !self.is_empty()
            && filters.iter().any(|filter| {
                let split = split(filter);
                self.shape_of(&split).is_some()
                    || split.atoms.iter().any(|atom| {
                        self.paused_atoms.contains_key(atom)
                            || self.suspect_atoms.contains_key(atom)
                    })
            })
    }

    /// New historic work at `now`: paused values are removed (a filter left with none is
    /// dropped), and filters holding a suspect value, or of a shape refused before, are to be
    /// sent alone. What is removed is remembered as paused coverage, so its probe fetches it
    /// once the pause ends even though the work it came with completes without it.
    pub fn admit(&mut self, now: Instant, filters: Vec<Filter>) -> Vec<Admission> {
        if self.is_empty() {
            return filters.into_iter().map(Admission::Send).collect();
        }
        let mut admitted = Vec::with_capacity(filters.len());
        for filter in filters {
            let (admission, removed) = self.admit_one(now, filter);
            if let Some((removed, until)) = removed {
                self.remember(removed, until);
            }
            admitted.extend(admission);
        }
        admitted
    }

    /// Filters for live coverage: without paused or suspect values (suspects are
    /// settled by history first), and without shapes refused [`SHAPE_REFUSALS`] times until a
    /// filter of the shape completes.
    pub fn live(&self, filters: Vec<Filter>) -> Vec<Filter> {
        if self.is_empty() {
            return filters;
        }
        filters
            .into_iter()
            .filter_map(|filter| {
                let split = split(&filter);
                let paused_shape = self
                    .shape_of(&split)
                    .is_some_and(|(refusals, _)| *refusals >= SHAPE_REFUSALS);
                if paused_shape {
                    return None;
                }
                self.without(&filter, |atom| {
                    self.suspect_atoms.contains_key(atom) || self.paused_atoms.contains_key(atom)
                })
            })
            .collect()
    }

    /// One filter of historic work: what to send, and what was removed with the instant its
    /// pause ends.
    fn admit_one(
        &self,
        now: Instant,
        filter: Filter,
    ) -> (Option<Admission>, Option<(Filter, Instant)>) {
        let whole = split(&filter);
        let shape = self.shape_of(&whole);
        if self.shape_paused(&whole, now) {
            let until = shape.map_or(now, |(_, until)| *until);
            return (None, Some((filter, until)));
        }
        let paused = |atom: &Atom| self.atom_paused(atom, now);
        let removed = whole
            .atoms
            .iter()
            .filter_map(|atom| self.paused_atoms.get(atom).filter(|until| **until > now))
            .max()
            .and_then(|until| Some((self.only(&filter, paused)?, *until)));
        let Some(kept) = self.without(&filter, paused) else {
            return (None, removed);
        };
        // A pause that ended but whose probe has not run yet is as good as a suspect: only the
        // probe, alone, may send it. So is a filter of a shape refused before.
        let suspect = shape.is_some()
            || split(&kept).atoms.iter().any(|atom| {
                self.suspect_atoms.contains_key(atom) || self.paused_atoms.contains_key(atom)
            });
        let admission = if suspect {
            Admission::Alone(kept)
        } else {
            Admission::Send(kept)
        };
        (Some(admission), removed)
    }

    /// Remembers `filter` as paused coverage until `until`, unless it is already.
    fn remember(&mut self, filter: Filter, until: Instant) {
        let filter = without_bounds(&filter);
        if !self.paused.iter().any(|p| p.filter == filter) {
            self.paused.push(Paused {
                filter,
                until,
                probing: false,
            });
        }
    }

    /// `filter` with only the values whose atom `keep` selects; `None` if none is.
    fn only(&self, filter: &Filter, keep: impl Fn(&Atom) -> bool) -> Option<Filter> {
        self.without(filter, |atom| !keep(atom))
    }

    /// Whether a request carrying `filters`, admitted earlier, now holds coverage paused at
    /// `now` (a refusal came in while it waited): it must not be sent.
    pub fn blocks(&self, now: Instant, filters: &[Filter]) -> bool {
        !self.is_empty()
            && filters.iter().any(|filter| {
                let split = split(filter);
                self.shape_paused(&split, now)
                    || split.atoms.iter().any(|atom| self.atom_paused(atom, now))
            })
    }

    /// Whether `filter`'s coverage is paused at `now` (a policy refusal re-paused it).
    pub fn is_paused(&self, now: Instant, filter: &Filter) -> bool {
        split(filter)
            .atoms
            .iter()
            .any(|atom| self.atom_paused(atom, now))
    }

    /// Whether `atom`'s pause is running at `now`.
    fn atom_paused(&self, atom: &Atom, now: Instant) -> bool {
        self.paused_atoms
            .get(atom)
            .is_some_and(|until| *until > now)
    }

    /// The refusals of the split filter's shape and when the latest pause ends, if any.
    fn shape_of(&self, split: &Split) -> Option<&(u32, Instant)> {
        if split.atoms.is_empty() {
            return None;
        }
        self.shapes.get(&split.shape)
    }

    /// Whether the split filter's whole shape is paused at `now`.
    fn shape_paused(&self, split: &Split, now: Instant) -> bool {
        self.shape_of(split)
            .is_some_and(|(refusals, until)| *refusals >= SHAPE_REFUSALS && *until > now)
    }

    /// The probes handed out will not complete (their session or their batches ended): they
    /// are due again at once.
    pub fn handle_probes_lost(&mut self) {
        self.probe_batches.clear();
        for paused in &mut self.paused {
            paused.probing = false;
        }
    }

    /// The probe of `filter` will not complete: it is due again, not before `not_before`.
    pub fn handle_probe_lost(&mut self, filter: &Filter, not_before: Instant) {
        let filter = without_bounds(filter);
        for paused in self.paused.iter_mut().filter(|p| p.filter == filter) {
            paused.probing = false;
            paused.until = paused.until.max(not_before);
        }
    }

    /// The probe of `filter`, handed out by [`Self::poll_probes`], runs as historic `batch`.
    pub fn handle_probe_opened(&mut self, batch: BatchId, filter: Filter) {
        self.probe_batches.insert(batch, filter);
    }

    /// The probe of `filter` could not open a batch at `now`: it is due again after
    /// [`PROBE_RETRY`].
    pub fn handle_probe_unopened(&mut self, filter: &Filter, now: Instant) {
        self.handle_probe_lost(filter, now + PROBE_RETRY);
    }

    /// Whether historic `batch` is a probe: only a probe may send paused coverage.
    pub fn is_probe(&self, batch: BatchId) -> bool {
        self.probe_batches.contains_key(&batch)
    }

    /// Historic `batch` ended at `now`, confirmed or not. A probe that failed for any reason
    /// but a new policy refusal (which paused its filter again) is due again after
    /// [`PROBE_RETRY`]; one that completed waits for [`Self::handle_success`] of its filter.
    pub fn handle_batch_done(&mut self, batch: BatchId, success: bool, now: Instant) {
        if let Some(filter) = self.probe_batches.remove(&batch)
            && !success
            && !self.is_paused(now, &filter)
        {
            self.handle_probe_unopened(&filter, now);
        }
    }

    /// `filter` without the values whose atom `drop` selects; `None` if nothing is left.
    fn without(&self, filter: &Filter, drop: impl Fn(&Atom) -> bool) -> Option<Filter> {
        let split = split(filter);
        if !split.atoms.iter().any(&drop) {
            return Some(filter.clone());
        }
        let kept: Vec<AtomValue> = split
            .atoms
            .into_iter()
            .filter(|atom| !drop(atom))
            .filter_map(|atom| atom.value)
            .collect();
        if kept.is_empty() {
            return None;
        }
        let mut filter = filter.clone();
        match split.shape.list? {
            ValueList::Ids => {
                filter.ids = Some(kept.into_iter().filter_map(AtomValue::into_id).collect());
            }
            ValueList::Tag(tag) => {
                let values = kept.into_iter().filter_map(AtomValue::into_tag).collect();
                filter.generic_tags.insert(tag, values);
            }
        }
        Some(filter)
    }

    /// Refused filters whose pause has ended by `now`: each is handed out once, to be tried
    /// again alone as the recovery probe. Their coverage becomes suspect: kept out of the live
    /// set until the probe completes, and paused again if the probe is refused.
    pub fn poll_probes(&mut self, now: Instant) -> Vec<Filter> {
        let mut due = Vec::new();
        for paused in &mut self.paused {
            if !paused.probing && paused.until <= now {
                paused.probing = true;
                due.push(paused.filter.clone());
            }
        }
        self.paused_atoms.retain(|_, until| *until > now);
        for filter in &due {
            for atom in split(filter).atoms {
                if !self.paused_atoms.contains_key(&atom) {
                    self.suspect_atoms.insert(atom, ());
                }
            }
        }
        due
    }

    /// When the next probe is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.paused
            .iter()
            .filter(|p| !p.probing)
            .map(|p| p.until)
            .min()
    }

    /// How many refused filters are paused or being probed.
    pub fn paused_filters(&self) -> usize {
        self.paused.len()
    }
}

/// `filter` without `since`, `until` and `limit`: all of history, every match (a live filter
/// carries `limit: 0`).
pub fn without_bounds(filter: &Filter) -> Filter {
    let mut filter = filter.clone();
    filter.since = None;
    filter.until = None;
    filter.limit = None;
    filter
}
