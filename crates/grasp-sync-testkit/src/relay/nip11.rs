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
        let mut limitation = Map::new();
        limitation.insert(
            "max_subscriptions".to_owned(),
            json!(config.max_subscriptions),
        );
        if let Some(max_filters) = config.max_filters {
            limitation.insert("max_filters".to_owned(), json!(max_filters));
        }
        if let Some(max_limit) = config.max_filter_limit {
            limitation.insert("max_limit".to_owned(), json!(max_limit));
        }
        limitation.insert(
            "default_limit".to_owned(),
            json!(config.default_filter_limit),
        );
        doc.insert("limitation".to_owned(), Value::Object(limitation));
    }
    Some(Value::Object(doc))
}

#[cfg(test)]
mod tests;
