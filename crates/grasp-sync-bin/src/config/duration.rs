//! Durations in configuration values: a whole number followed by a unit (`250ms`, `5s`, `2m`,
//! `1h`), the form operators write in TOML files, environment variables and flags alike.

use std::time::Duration;

/// Parses `<number><unit>` with unit `ms`, `s`, `m` or `h`; whitespace around is ignored. A
/// number too large for its unit (more than `u64::MAX` seconds or milliseconds) is an error,
/// never a saturated value.
pub fn parse_duration(input: &str) -> Result<Duration, String> {
    let text = input.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("`{text}` has no unit (use ms, s, m or h, e.g. `5s`)"))?;
    let (digits, unit) = text.split_at(split);
    if digits.is_empty() {
        return Err(format!(
            "`{text}` does not start with a whole number (e.g. `5s`)"
        ));
    }
    let too_long = || format!("`{text}` is too long to represent");
    let value: u64 = digits.parse().map_err(|_| too_long())?;
    let seconds = |factor: u64| {
        value
            .checked_mul(factor)
            .map(Duration::from_secs)
            .ok_or_else(too_long)
    };
    match unit.trim() {
        "ms" => Ok(Duration::from_millis(value)),
        "s" => seconds(1),
        "m" => seconds(60),
        "h" => seconds(3600),
        other => Err(format!(
            "unknown unit `{other}` in `{text}` (use ms, s, m or h)"
        )),
    }
}

/// Formats a duration the way [`parse_duration`] reads it, in the largest exact unit.
pub fn format_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if !millis.is_multiple_of(1000) {
        return format!("{millis}ms");
    }
    let secs = duration.as_secs();
    if secs != 0 && secs.is_multiple_of(3600) {
        format!("{}h", secs / 3600)
    } else if secs != 0 && secs.is_multiple_of(60) {
        format!("{}m", secs / 60)
    } else {
        format!("{secs}s")
    }
}
