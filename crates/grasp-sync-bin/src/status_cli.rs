//! `grasp-sync status`: reads a running daemon's `/status` over HTTP and prints the status
//! page's summary and relay table as text, or the JSON itself with `--json`, for hosts
//! without a browser and for scripts.

use std::fmt::Write as _;
use std::io::Write;
use std::time::Duration;

use grasp_sync_engine::EngineStatus;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::status_view::{RelayRow, Sort, Summary, format_bytes, rows};

/// The endpoints' default address, as `metrics_listen` defaults to.
pub const DEFAULT_STATUS_URL: &str = "http://127.0.0.1:9477";
/// The whole request must be answered within this.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest `/status` document read (a daemon tracking its most relays stays far below).
const MAX_BODY: usize = 16 * 1024 * 1024;

/// Why the status could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StatusClientError {
    /// The URL is not `http://HOST:PORT[/PREFIX]`.
    #[error("invalid --url `{url}`: {reason}")]
    Url {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The daemon could not be reached or did not answer in time.
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The status URL.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The daemon answered with an error status.
    #[error("{url} answered {status}: {body}")]
    Status {
        /// The status URL.
        url: String,
        /// The HTTP status.
        status: StatusCode,
        /// The answer's text.
        body: String,
    },
    /// The answer is not an engine status.
    #[error("{url} did not answer an engine status: {reason}")]
    Document {
        /// The status URL.
        url: String,
        /// The decoding problem.
        reason: String,
    },
}

/// A daemon's endpoints address: host, port and path prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusUrl {
    authority: String,
    prefix: String,
}

impl StatusUrl {
    /// Reads `http://HOST[:PORT][/PREFIX]` (port 80 when none is given).
    pub fn parse(url: &str) -> Result<StatusUrl, StatusClientError> {
        let invalid = |reason| StatusClientError::Url {
            url: url.to_owned(),
            reason,
        };
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| invalid("only http:// is served by the endpoints"))?;
        let (authority, prefix) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if authority.is_empty() {
            return Err(invalid("no host"));
        }
        if authority.contains('@') || authority.contains(char::is_whitespace) {
            return Err(invalid("the host may hold no user or spaces"));
        }
        let port = match authority.strip_prefix('[') {
            Some(v6) => {
                let (_, after) = v6.split_once(']').ok_or_else(|| invalid("unclosed ["))?;
                after.strip_prefix(':')
            }
            None => authority.rsplit_once(':').map(|(_, port)| port),
        };
        let authority = match port {
            Some(port) => {
                port.parse::<u16>().map_err(|_| invalid("bad port"))?;
                authority.to_owned()
            }
            None => format!("{authority}:80"),
        };
        Ok(StatusUrl {
            authority,
            prefix: prefix.trim_end_matches('/').to_owned(),
        })
    }

    /// The URL of `/status`.
    pub fn status(&self) -> String {
        format!("http://{}{}/status", self.authority, self.prefix)
    }
}

/// Reads the daemon's `/status` document: its JSON text.
pub async fn fetch_status_json(url: &StatusUrl) -> Result<String, StatusClientError> {
    let target = url.status();
    let unreachable = |reason: String| StatusClientError::Unreachable {
        url: target.clone(),
        reason,
    };
    let exchange = async {
        let stream = TcpStream::connect(&url.authority)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        tokio::spawn(connection);
        let request = Request::get(format!("{}/status", url.prefix))
            .header(hyper::header::HOST, &url.authority)
            .body(Empty::<Bytes>::new())
            .map_err(|e| unreachable(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let status = response.status();
        let body = http_body_util::Limited::new(response.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| unreachable(e.to_string()))?
            .to_bytes();
        let text = String::from_utf8_lossy(&body).into_owned();
        if !status.is_success() {
            return Err(StatusClientError::Status {
                url: target.clone(),
                status,
                body: text.trim().to_owned(),
            });
        }
        Ok(text)
    };
    tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .map_err(|_| unreachable(format!("no answer within {}s", REQUEST_TIMEOUT.as_secs())))?
}

/// Reads the daemon's status.
pub async fn fetch_status(url: &StatusUrl) -> Result<EngineStatus, StatusClientError> {
    let json = fetch_status_json(url).await?;
    serde_json::from_str(&json).map_err(|e| StatusClientError::Document {
        url: url.status(),
        reason: e.to_string(),
    })
}

/// Runs `grasp-sync status`: the summary and table, or the JSON with `json`, to `out`.
pub async fn run_status(url: &str, json: bool, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let url = StatusUrl::parse(url)?;
    if json {
        let text = fetch_status_json(&url).await?;
        // Checked, so a script never reads something else as a status.
        let _: EngineStatus =
            serde_json::from_str(&text).map_err(|e| StatusClientError::Document {
                url: url.status(),
                reason: e.to_string(),
            })?;
        writeln!(out, "{}", text.trim_end())?;
    } else {
        let status = fetch_status(&url).await?;
        out.write_all(render_text(&status).as_bytes())?;
    }
    out.flush()?;
    Ok(())
}

/// The summary and the relay table as plain text.
pub fn render_text(status: &EngineStatus) -> String {
    let summary = Summary::of(status, None);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "repositories {}  root events {}  relays {}  events stored {}",
        summary.repos, summary.root_events, summary.relays, summary.events_stored
    );
    let _ = writeln!(
        out,
        "syncing {}  connected {}  paused {}  dead {}  participants {}  relay lists {}  mailbox relays {}",
        summary.syncing,
        summary.connected,
        summary.paused,
        summary.dead,
        summary.participants,
        summary.relay_lists,
        summary.mailbox_relays
    );
    out.push('\n');
    let rows = rows(status, |_, _| None, Sort::default());
    let header = [
        "RELAY",
        "STATE",
        "HEALTH",
        "USED/B",
        "LIVE/TR",
        "STARTS",
        "REFUSALS",
        "RECEIVED",
        "SYNCED",
        "REJECTED",
        "SENT/RECEIVED",
        "LAG",
    ];
    let cells: Vec<[String; 12]> = rows.iter().map(cells_of).collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |out: &mut String, cells: [&str; 12]| {
        let mut text = String::new();
        for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
            let pad = width.saturating_sub(cell.chars().count());
            // Names left, numbers right.
            if i < 3 {
                text.push_str(cell);
                text.extend(std::iter::repeat_n(' ', pad));
            } else {
                text.extend(std::iter::repeat_n(' ', pad));
                text.push_str(cell);
            }
            text.push_str("  ");
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut out, header);
    for (row, cell) in rows.iter().zip(&cells) {
        line(&mut out, std::array::from_fn(|i| cell[i].as_str()));
        let mut notes: Vec<String> = Vec::new();
        if !row.refusals.is_empty() {
            let refusals: Vec<String> = row
                .refusals
                .iter()
                .map(|(category, n)| format!("{category} {n}"))
                .collect();
            notes.push(format!("refusals: {}", refusals.join(", ")));
        }
        if !row.learned.is_empty() {
            notes.push(format!("learned: {}", row.learned.join(", ")));
        }
        if let Some(error) = &row.last_error {
            let error: String = error
                .chars()
                .filter(|c| !c.is_control())
                .take(200)
                .collect();
            notes.push(format!("last error: {error}"));
        }
        for note in notes {
            let _ = writeln!(out, "    {note}");
        }
    }
    if rows.is_empty() {
        out.push_str("no relay tracked yet\n");
    }
    out
}

fn cells_of(row: &RelayRow) -> [String; 12] {
    let url: String = row.url.chars().filter(|c| !c.is_control()).collect();
    let url = if row.bootstrap {
        format!("{url} (bootstrap)")
    } else {
        url
    };
    [
        url,
        row.state.clone(),
        row.health.clone(),
        format!("{}/{}", row.used, row.budget),
        format!("{}/{}", row.live, row.transient),
        row.starts.to_string(),
        row.refusal_total().to_string(),
        row.received.to_string(),
        row.synced.to_string(),
        row.rejected.to_string(),
        format!(
            "{}/{}",
            format_bytes(row.bytes_sent),
            format_bytes(row.bytes_received)
        ),
        row.lag.to_string(),
    ]
}

#[cfg(test)]
mod tests;
