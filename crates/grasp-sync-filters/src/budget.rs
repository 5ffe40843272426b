//! Byte budgets for filter values: the exact JSON cost of a value and the per-filter budget.
//!
//! Budgets are counted in bytes of the real serialisation, never in values: a 64-character hex
//! ID costs 67 bytes (`"…",`), while an identifier or coordinate costs whatever its escaped JSON
//! string costs.

use crate::error::FilterError;

/// Default budget of one filter: 32 KB, measured on the whole filter as it sits in a REQ
/// (its JSON and its separating comma), so that three full filters fill one 96 KB REQ.
pub const DEFAULT_MAX_FILTER_BYTES: usize = 32 * 1024;

/// Room every chunk keeps free for a pagination cursor (`,"until":` and a 20-digit number), so
/// a next page built from a full filter still fits the same budget.
pub const CURSOR_RESERVE_BYTES: usize = 9 + 20;

/// The size budget of one filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FilterBudget {
    /// Largest size of one filter in a REQ: its JSON plus one separating comma.
    pub max_filter_bytes: usize,
}

impl Default for FilterBudget {
    fn default() -> Self {
        Self {
            max_filter_bytes: DEFAULT_MAX_FILTER_BYTES,
        }
    }
}

impl FilterBudget {
    /// A budget of `max_filter_bytes` per filter.
    pub fn new(max_filter_bytes: usize) -> Self {
        Self { max_filter_bytes }
    }

    /// Bytes left for the values of a filter whose other parts cost `fixed_bytes` (the
    /// filter's JSON with an empty array), after the separator and, for a filter without
    /// `until`, the cursor reserve.
    pub(crate) fn value_bytes(
        &self,
        fixed_bytes: usize,
        reserve_cursor: bool,
    ) -> Result<usize, FilterError> {
        let reserve = if reserve_cursor {
            CURSOR_RESERVE_BYTES
        } else {
            0
        };
        self.max_filter_bytes
            .checked_sub(fixed_bytes + 1 + reserve)
            .filter(|left| *left > 2)
            .ok_or(FilterError::InvalidLimits(
                "the filter budget leaves no room for values",
            ))
    }
}

/// Bytes of `s` as a JSON string, quotes included, escaped the way the wire serialiser does.
pub fn json_string_bytes(s: &str) -> usize {
    // Plain text costs one byte per byte. Count bytes needing an escape in small blocks, which
    // compiles to a vectorised pass, and only walk the text again if there are any.
    let escaped: usize = s
        .as_bytes()
        .chunks(128)
        .map(|block| {
            usize::from(
                block
                    .iter()
                    .map(|&b| u8::from(b < 0x20) | u8::from(b == b'"') | u8::from(b == b'\\'))
                    .fold(0u8, u8::wrapping_add),
            )
        })
        .sum();
    if escaped == 0 {
        return s.len() + 2;
    }
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// A value that becomes one JSON string in a filter.
pub(crate) trait WireValue {
    /// Bytes of the value as a JSON string, quotes included.
    fn wire_bytes(&self) -> usize;
    /// The string sent.
    fn to_wire(&self) -> String;
}

impl WireValue for String {
    fn wire_bytes(&self) -> usize {
        json_string_bytes(self)
    }

    fn to_wire(&self) -> String {
        self.clone()
    }
}

impl WireValue for nostr::EventId {
    fn wire_bytes(&self) -> usize {
        // 64 hex digits and two quotes.
        66
    }

    fn to_wire(&self) -> String {
        hex_id(self)
    }
}

/// Lowercase hex of an event ID, as it is sent.
pub(crate) fn hex_id(id: &nostr::EventId) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(64);
    for byte in id.as_bytes() {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

/// Bytes of a JSON array of strings, brackets and commas included.
pub(crate) fn json_array_bytes<'a>(values: impl ExactSizeIterator<Item = &'a String>) -> usize {
    let commas = values.len().saturating_sub(1);
    2 + commas + values.map(|v| json_string_bytes(v)).sum::<usize>()
}

/// Splits sorted, deduplicated values into consecutive chunks whose JSON arrays
/// (`["v1","v2",...]`) each stay within `array_budget` bytes and `max_values` values.
///
/// A value that alone cannot fit is a [`FilterError::ValueTooLarge`].
pub(crate) fn chunk_by_bytes<T: WireValue>(
    values: &[T],
    array_budget: usize,
    max_values: usize,
    tag: char,
) -> Result<Vec<&[T]>, FilterError> {
    let mut chunks = Vec::new();
    let mut start = 0;
    // An empty array costs `[]`; each value adds its string and, after the first, a comma.
    let mut used = 2;
    for (index, value) in values.iter().enumerate() {
        let cost = value.wire_bytes();
        if 2 + cost > array_budget {
            return Err(FilterError::ValueTooLarge {
                tag,
                bytes: cost,
                budget: array_budget - 2,
            });
        }
        let added = if index == start { cost } else { cost + 1 };
        if used + added > array_budget || index - start >= max_values {
            chunks.push(&values[start..index]);
            start = index;
            used = 2 + cost;
        } else {
            used += added;
        }
    }
    if start < values.len() {
        chunks.push(&values[start..]);
    }
    Ok(chunks)
}

#[cfg(test)]
mod tests;
