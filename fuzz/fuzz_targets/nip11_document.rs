//! NIP-11 documents (`grasp_sync_engine::RelayInfo::from_json`), two ways per input: the bytes
//! as a body (the seeds are real documents), and the bytes as the choices of a document
//! assembled from arbitrary JSON values in the places the reader looks.
//!
//! Asserts: reading never panics; only malformed JSON is an error; every believed limit is
//! between 1 and 2^31; a document reads the same after a JSON round trip; `supported_nips`
//! reads `Unknown` exactly when it is missing or not an array; a limit written as a plausible
//! number is read back as that number.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use grasp_sync_engine::{NipListing, RelayInfo};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};

#[derive(Debug, Arbitrary)]
struct BuiltDocument {
    limitation: Option<Vec<(LimitName, JsonValue)>>,
    supported_nips: Option<JsonValue>,
    extra: Vec<(String, JsonValue)>,
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum LimitName {
    MaxSubscriptions,
    MaxFilters,
    MaxLimit,
    DefaultLimit,
    MaxMessageLength,
}

impl LimitName {
    fn key(self) -> &'static str {
        match self {
            LimitName::MaxSubscriptions => "max_subscriptions",
            LimitName::MaxFilters => "max_filters",
            LimitName::MaxLimit => "max_limit",
            LimitName::DefaultLimit => "default_limit",
            LimitName::MaxMessageLength => "max_message_length",
        }
    }

    fn read(self, info: &RelayInfo) -> Option<u32> {
        match self {
            LimitName::MaxSubscriptions => info.max_subscriptions,
            LimitName::MaxFilters => info.max_filters,
            LimitName::MaxLimit => info.max_limit,
            LimitName::DefaultLimit => info.default_limit,
            LimitName::MaxMessageLength => info.max_message_length,
        }
    }
}

/// A JSON value of bounded depth.
#[derive(Debug)]
struct JsonValue(Value);

impl<'a> Arbitrary<'a> for JsonValue {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        json_value(u, 3).map(JsonValue)
    }
}

fn json_value(u: &mut Unstructured<'_>, depth: u32) -> arbitrary::Result<Value> {
    let choice = if depth == 0 {
        u.int_in_range(0..=6)?
    } else {
        u.int_in_range(0..=8)?
    };
    Ok(match choice {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => json!(u.arbitrary::<u64>()?),
        3 => json!(u.arbitrary::<i64>()?),
        4 => serde_json::Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number),
        5 => Value::String(u.arbitrary()?),
        6 => json!(u.int_in_range(0u32..=100)?.to_string()),
        7 => {
            let len = u.int_in_range(0..=6)?;
            let mut items = Vec::with_capacity(len);
            for _ in 0..len {
                items.push(json_value(u, depth - 1)?);
            }
            Value::Array(items)
        }
        _ => {
            let len = u.int_in_range(0..=4)?;
            let mut map = Map::new();
            for _ in 0..len {
                map.insert(u.arbitrary()?, json_value(u, depth - 1)?);
            }
            Value::Object(map)
        }
    })
}

fuzz_target!(|body: &[u8]| {
    let parsed = serde_json::from_slice::<Value>(body);
    let info = RelayInfo::from_json(body);
    assert_eq!(parsed.is_ok(), info.is_ok());
    if let (Ok(doc), Ok(info)) = (parsed, info) {
        check(&doc, &info);
    }
    if let Ok(built) = BuiltDocument::arbitrary_take_rest(Unstructured::new(body)) {
        let mut doc = Map::new();
        for (key, JsonValue(value)) in built.extra {
            doc.insert(key, value);
        }
        if let Some(limits) = built.limitation {
            let mut limitation = Map::new();
            for (name, JsonValue(value)) in limits {
                limitation.insert(name.key().to_owned(), value);
            }
            doc.insert("limitation".to_owned(), Value::Object(limitation));
        }
        if let Some(JsonValue(nips)) = built.supported_nips {
            doc.insert("supported_nips".to_owned(), nips);
        }
        let doc = Value::Object(doc);
        let body = serde_json::to_vec(&doc).expect("a value serialises");
        let info = RelayInfo::from_json(&body).expect("a serialised value is json");
        check(&doc, &info);
    }
});

fn check(doc: &Value, info: &RelayInfo) {
    const NAMES: [LimitName; 5] = [
        LimitName::MaxSubscriptions,
        LimitName::MaxFilters,
        LimitName::MaxLimit,
        LimitName::DefaultLimit,
        LimitName::MaxMessageLength,
    ];
    for name in NAMES {
        let read = name.read(info);
        if let Some(value) = read {
            assert!((1..=1 << 31).contains(&value));
        }
        let written = doc
            .get("limitation")
            .and_then(|l| l.get(name.key()))
            .and_then(Value::as_u64);
        if let Some(written) = written.filter(|w| (1..=1 << 31).contains(w)) {
            assert_eq!(read.map(u64::from), Some(written));
        }
    }
    let nips_array = doc.get("supported_nips").is_some_and(Value::is_array);
    assert_eq!(info.nip77 == NipListing::Unknown, !nips_array);

    let again = serde_json::to_vec(doc).expect("a value serialises");
    assert_eq!(RelayInfo::from_json(&again).as_ref(), Ok(info));
}
