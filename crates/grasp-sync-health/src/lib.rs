//! Relay health, backoff, pauses and refusal classification (not yet implemented).
