//! Per-connection subscription ledger, pacing gates and live planner (not yet implemented).
