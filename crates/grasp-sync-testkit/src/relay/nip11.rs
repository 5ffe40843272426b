//! The NIP-11 relay information document a test relay serves, built from its config.

use serde_json::{Map, Value, json};

use super::{Nip11Mode, TestRelayConfig};

/// NIPs every test relay supports (NIP-77 is added when advertised).
const SUPPORTED_NIPS: [u16; 3] = [1, 11, 34];

/// The JSON document for `config`, or `None` when the relay serves no document.
pub(crate) fn document(config: &TestRelayConfig) -> Option<Value> {
    if config.nip11 == Nip11Mode::NotServed {
        return None;
    }
    let mut nips: Vec<u16> = SUPPORTED_NIPS.to_vec();
    if config.advertise_negentropy {
        nips.push(77);
    }
    let mut doc = Map::new();
    doc.insert("name".to_owned(), json!(config.name));
    doc.insert(
        "description".to_owned(),
        json!("grasp-sync test relay on loopback"),
    );
    doc.insert("software".to_owned(), json!("grasp-sync-testkit"));
    doc.insert("version".to_owned(), json!(env!("CARGO_PKG_VERSION")));
    doc.insert("supported_nips".to_owned(), json!(nips));
    if config.nip11 == Nip11Mode::WithLimits {
        let strict = config.strict.as_ref();
        let max_subscriptions = match strict.and_then(|s| s.subscriptions) {
            Some(limit) => limit.advertised.then_some(limit.max),
            None => Some(config.max_subscriptions),
        };
        let max_filters = match strict.and_then(|s| s.filters_per_req) {
            Some(limit) => limit.advertised.then_some(limit.max),
            None => config.max_filters,
        };
        let max_limit = config
            .max_filter_limit
            .filter(|_| config.advertise_max_limit);
        let default_limit = config
            .advertise_default_limit
            .then_some(config.default_filter_limit);
        let mut limitation = Map::new();
        for (field, value) in [
            ("max_subscriptions", max_subscriptions),
            ("max_filters", max_filters),
            ("max_limit", max_limit),
            ("default_limit", default_limit),
        ] {
            if let Some(value) = value {
                limitation.insert(field.to_owned(), json!(value));
            }
        }
        doc.insert("limitation".to_owned(), Value::Object(limitation));
    }
    Some(Value::Object(doc))
}

#[cfg(test)]
mod tests;
