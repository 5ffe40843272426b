//! Refusal classification (`grasp_sync_health::classify`) on arbitrary relay text.
//!
//! Asserts: classification never panics; a stated filter count appears only on
//! `TooManyFilters` and a stated byte cap only on `RetainedBytesExceeded`, each within its
//! plausible range; ASCII case and surrounding whitespace do not change the result; only the
//! examined head of a long text counts, so doubling a text of 1024 bytes or more changes
//! nothing.
#![no_main]

use grasp_sync_health::{MAX_PLAUSIBLE_BYTE_CAP, MAX_PLAUSIBLE_FILTERS, RefusalCategory, classify};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let refusal = classify(text);
    if let Some(filters) = refusal.submitted_filters {
        assert_eq!(refusal.category, RefusalCategory::TooManyFilters);
        assert!((1..=MAX_PLAUSIBLE_FILTERS).contains(&filters));
    }
    if let Some(cap) = refusal.byte_cap {
        assert_eq!(refusal.category, RefusalCategory::RetainedBytesExceeded);
        assert!((1..=MAX_PLAUSIBLE_BYTE_CAP).contains(&cap));
    }
    assert!(RefusalCategory::ALL.contains(&refusal.category));
    assert!(!refusal.category.metric_label().is_empty());

    assert_eq!(classify(&text.to_ascii_uppercase()), refusal);
    assert_eq!(classify(&text.to_ascii_lowercase()), refusal);
    if text.len() < 1000 {
        assert_eq!(classify(&format!("  {text}\t\n")), refusal);
    }
    if text.len() >= 1024 {
        assert_eq!(classify(&format!("{text}{text}")), refusal);
    }
});
