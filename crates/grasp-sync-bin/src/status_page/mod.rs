//! The status page served at `/`: one server-rendered HTML document with its stylesheet
//! embedded, no script and nothing fetched from elsewhere. It shows the [`Summary`], the
//! plots of the last hour (and of the last day once the history reaches past the hour), and
//! the relay table, sorted by the `?sort=KEY&dir=asc|desc` query (the header links set it).
//! The page reloads itself every [`REFRESH_SECS`], keeping its query.
//!
//! Every figure also sits in a `data-*` attribute (`data-figure`/`data-value` in the summary,
//! one `data-*` per column on each `<tr data-relay>`, `data-values` on each plot), so tests
//! and scripts can read the page without parsing its layout.

mod charts;
mod html;
mod plot;

use std::fmt::Write;
use std::time::Duration;

use grasp_sync_engine::EngineStatus;

use crate::history::{Sample, StatusHistory};
use crate::status_view::{RelayRow, Sort, SortKey, Summary, format_bytes, format_uptime, rows};

use html::escape;

/// Seconds between the page's reloads.
pub(crate) const REFRESH_SECS: u32 = 10;
/// The window of the table's starts-per-minute column.
pub(crate) const STARTS_WINDOW: Duration = Duration::from_secs(600);
/// The shortest span a rate is taken over: the sample of now is drawn only this long after
/// the last one, so a rate over a sliver of time does not swing the plot.
const MIN_RATE_SPAN: Duration = Duration::from_secs(5);
/// The longest part of a relay's last error text shown.
const MAX_ERROR_CHARS: usize = 300;
/// The span of the hour view.
const HOUR: Duration = Duration::from_secs(3600);
const STYLE: &str = include_str!("style.css");

/// The sort order a `/` query asks for (the default for anything it does not name).
pub(crate) fn sort_from_query(query: Option<&str>) -> Sort {
    let mut sort = Sort::default();
    for pair in query.unwrap_or("").split('&') {
        match pair.split_once('=') {
            Some(("sort", name)) => {
                if let Some(key) = SortKey::parse(name) {
                    sort.key = key;
                }
            }
            Some(("dir", dir)) => sort.descending = dir == "desc",
            _ => {}
        }
    }
    sort
}

/// The page for `status` taken `uptime` after the daemon started, over `history`.
pub(crate) fn render(
    status: &EngineStatus,
    history: &StatusHistory,
    uptime: Duration,
    sort: Sort,
) -> String {
    let now = Sample::of(status, uptime);
    let since = uptime.saturating_sub(STARTS_WINDOW);
    let starts_per_minute = |url: &str, _: &grasp_sync_engine::RelayStatus| {
        // The oldest sample in the window that knew the relay.
        let (at, then) = history
            .hour()
            .filter(|s| s.at >= since)
            .find_map(|s| s.relays.get(url).map(|r| (s.at, r.starts)))?;
        let current = now.relays.get(url)?;
        let dt = now.at.checked_sub(at)?.as_secs_f64();
        (dt >= MIN_RATE_SPAN.as_secs_f64())
            .then(|| current.starts.saturating_sub(then) as f64 * 60.0 / dt)
    };
    let rows = rows(status, starts_per_minute, sort);
    let summary = Summary::of(status, Some(uptime));

    let mut out = String::with_capacity(32 * 1024);
    let _ = write!(
        out,
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><meta http-equiv="refresh" content="{REFRESH_SECS}"><title>grasp-sync status</title><style>{STYLE}</style></head><body>"#
    );
    let _ = write!(
        out,
        r#"<header><h1>grasp-sync</h1><p class="meta">up {} · refreshes every {REFRESH_SECS} s · <a href="/status">JSON</a> · <a href="/metrics">metrics</a></p></header><main>"#,
        format_uptime(uptime)
    );
    render_summary(&mut out, &summary);
    out.push_str(r#"<section class="plots" id="hour"><h2>Last hour</h2><div class="grid">"#);
    let mut hour: Vec<&Sample> = history
        .hour()
        .filter(|s| s.at < now.at && now.at - s.at <= HOUR)
        .collect();
    push_now(&mut hour, &now);
    for plot in charts::plots(&hour, "hour") {
        out.push_str(&plot.render(now.at.as_secs_f64()));
    }
    out.push_str("</div></section>");
    let mut day: Vec<&Sample> = history.day().filter(|s| s.at < now.at).collect();
    let reaches_past_hour = match (day.first(), hour.first()) {
        (Some(d), Some(h)) => d.at < h.at,
        _ => false,
    };
    if reaches_past_hour {
        push_now(&mut day, &now);
        out.push_str(r#"<section class="plots" id="day"><h2>Last day</h2><div class="grid">"#);
        for plot in charts::plots(&day, "day") {
            out.push_str(&plot.render(now.at.as_secs_f64()));
        }
        out.push_str("</div></section>");
    }
    render_table(&mut out, &rows, sort);
    let _ = write!(
        out,
        r#"<p class="meta note">Lag: a relay's historic batches in flight plus its starts waiting for a slot. Starts/min over the last {} minutes. The day view appears once the daemon has run for more than an hour.</p></main></body></html>"#,
        STARTS_WINDOW.as_secs() / 60
    );
    out
}

/// Appends the sample of now when the last one is at least [`MIN_RATE_SPAN`] old.
fn push_now<'a>(samples: &mut Vec<&'a Sample>, now: &'a Sample) {
    let fresh = samples
        .last()
        .is_none_or(|last| now.at >= last.at + MIN_RATE_SPAN);
    if fresh {
        samples.push(now);
    }
}

fn render_summary(out: &mut String, summary: &Summary) {
    let figures: [(&str, &str, u64, &str); 10] = [
        ("repos", "repositories", summary.repos as u64, ""),
        ("root-events", "root events", summary.root_events as u64, ""),
        ("relays", "relays tracked", summary.relays as u64, ""),
        ("events-stored", "events stored", summary.events_stored, ""),
        ("syncing", "syncing", summary.syncing as u64, "syncing"),
        ("connected", "connected", summary.connected as u64, "ok"),
        ("paused", "paused", summary.paused as u64, "warn"),
        ("dead", "dead", summary.dead as u64, "bad"),
        (
            "participants",
            "participants",
            summary.participants as u64,
            "",
        ),
        (
            "mailbox-relays",
            "mailbox relays",
            summary.mailbox_relays as u64,
            "",
        ),
    ];
    out.push_str(r#"<section class="summary">"#);
    for (id, label, value, tone) in figures {
        let tone = if value > 0 { tone } else { "" };
        let _ = write!(
            out,
            r#"<div class="card {tone}" data-figure="{id}" data-value="{value}"><span class="value">{value}</span><span class="label">{label}</span></div>"#
        );
    }
    out.push_str("</section>");
}

/// Column headers: (key, text, numeric).
const HEADERS: [(Option<SortKey>, &str, bool); 13] = [
    (Some(SortKey::Relay), "Relay", false),
    (Some(SortKey::State), "State", false),
    (Some(SortKey::Health), "Health", false),
    (Some(SortKey::Budget), "Budget used / B", true),
    (None, "Live / transient", true),
    (Some(SortKey::Starts), "Starts/min (total)", true),
    (Some(SortKey::Refusals), "Refusals", false),
    (None, "Learned limits, quirks", false),
    (Some(SortKey::Received), "Received", true),
    (Some(SortKey::Synced), "Synced", true),
    (Some(SortKey::Rejected), "Rejected", true),
    (Some(SortKey::Bytes), "Bytes sent / received", true),
    (Some(SortKey::Lag), "Lag", true),
];

fn render_table(out: &mut String, rows: &[RelayRow], sort: Sort) {
    out.push_str(
        r#"<section><h2>Relays</h2><div class="table-wrap"><table id="relays"><thead><tr>"#,
    );
    for (key, text, numeric) in HEADERS {
        let class = if numeric { r#" class="num""# } else { "" };
        match key {
            Some(key) => {
                let current = key == sort.key;
                let dir = if current && !sort.descending {
                    "desc"
                } else {
                    "asc"
                };
                let arrow = match (current, sort.descending) {
                    (true, false) => " ▲",
                    (true, true) => " ▼",
                    _ => "",
                };
                let _ = write!(
                    out,
                    r#"<th{class}><a href="?sort={}&amp;dir={dir}">{text}{arrow}</a></th>"#,
                    key.name()
                );
            }
            None => {
                let _ = write!(out, "<th{class}>{text}</th>");
            }
        }
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        render_row(out, row);
    }
    if rows.is_empty() {
        out.push_str(r#"<tr><td colspan="13" class="empty">no relay tracked yet</td></tr>"#);
    }
    out.push_str("</tbody></table></div></section>");
}

fn render_row(out: &mut String, row: &RelayRow) {
    let url = escape(&row.url);
    let _ = write!(
        out,
        r#"<tr data-relay="{url}" data-state="{}" data-health="{}" data-used="{}" data-budget="{}" data-live="{}" data-transient="{}" data-starts="{}" data-refusals="{}" data-received="{}" data-synced="{}" data-rejected="{}" data-bytes-sent="{}" data-bytes-received="{}" data-lag="{}">"#,
        escape(&row.state),
        escape(&row.health),
        row.used,
        row.budget,
        row.live,
        row.transient,
        row.starts,
        row.refusal_total(),
        row.received,
        row.synced,
        row.rejected,
        row.bytes_sent,
        row.bytes_received,
        row.lag
    );
    let bootstrap = if row.bootstrap {
        r#" <span class="tag">bootstrap</span>"#
    } else {
        ""
    };
    let error = row
        .last_error
        .as_deref()
        .map(|e| {
            let shown: String = e.chars().take(MAX_ERROR_CHARS).collect();
            format!(
                r#"<div class="error" title="{0}">{0}</div>"#,
                escape(&shown)
            )
        })
        .unwrap_or_default();
    let _ = write!(
        out,
        r#"<td class="url">{url}{bootstrap}{error}</td><td><span class="pill state-{0}">{0}</span></td><td><span class="pill health-{1}">{1}</span></td>"#,
        escape(&row.state),
        escape(&row.health)
    );
    let share = (row.budget_share() * 100.0).clamp(0.0, 100.0);
    let _ = write!(
        out,
        r#"<td class="num"><div class="budget"><span>{} / {}</span><span class="bar"><span style="width:{share:.0}%"></span></span></div></td><td class="num">{} / {}</td>"#,
        row.used, row.budget, row.live, row.transient
    );
    let rate = row
        .starts_per_minute
        .map(|r| format!("{r:.1}"))
        .unwrap_or_else(|| "–".to_owned());
    let _ = write!(
        out,
        r#"<td class="num">{rate} <small>({})</small></td>"#,
        row.starts
    );
    out.push_str("<td>");
    if row.refusals.is_empty() {
        out.push_str(r#"<span class="dim">none</span>"#);
    }
    for (category, n) in &row.refusals {
        let _ = write!(
            out,
            r#"<span class="tag warn">{} {n}</span> "#,
            escape(category)
        );
    }
    out.push_str("</td><td>");
    if row.learned.is_empty() {
        out.push_str(r#"<span class="dim">–</span>"#);
    }
    for item in &row.learned {
        let _ = write!(out, r#"<span class="tag">{}</span> "#, escape(item));
    }
    let _ = write!(
        out,
        r#"</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{} / {}</td><td class="num">{}</td></tr>"#,
        row.received,
        row.synced,
        row.rejected,
        format_bytes(row.bytes_sent),
        format_bytes(row.bytes_received),
        row.lag
    );
}

#[cfg(test)]
mod tests;
