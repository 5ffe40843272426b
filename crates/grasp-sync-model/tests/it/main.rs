//! Integration tests of the model through its public API: the whole flow from signed events to
//! actions, and the property tests of the diff, the index, the incremental relay targets and
//! relay URL normalisation.

mod flow;
mod incremental;
mod properties;
mod support;
