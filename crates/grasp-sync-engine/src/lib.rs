//! Async orchestration of proactive sync over real relays (not yet implemented).
