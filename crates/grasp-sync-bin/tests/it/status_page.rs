//! The status page of a daemon syncing the demo network: headless Chromium loads it, finds
//! every relay in the table with its state and a drawn line in every plot, and saves
//! screenshots at desktop and phone width under the target directory; and the page's figures
//! are those of `/status`, as are those `grasp-sync status` prints.
//!
//! Chromium is the distribution's package (`/usr/bin/chromium`, or `$CHROMIUM`); `.ci/run`
//! installs it when it is missing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use grasp_sync_bin::{Daemon, Settings};
use grasp_sync_engine::EngineStatus;
use grasp_sync_model::RelayUrl;
use grasp_sync_testkit::{NetworkSpec, TestNetwork, TestRelayConfig};

use crate::support::{http_get, test_settings, wait_until};

const SERVICE: &str = "wss://grasp.test";
const PLOTS: [&str; 4] = [
    "events-stored-hour",
    "starts-hour",
    "refusals-hour",
    "lag-hour",
];

/// A daemon syncing the demo's network.
pub(crate) struct SyncingDemo {
    network: TestNetwork,
    pub(crate) daemon: Daemon,
    _dir: tempfile::TempDir,
}

impl SyncingDemo {
    /// Starts the demo network and a daemon, and waits until the daemon tracks every relay
    /// of the network and stored its first events.
    pub(crate) async fn start(seed: u64) -> SyncingDemo {
        let spec = NetworkSpec::small(seed, SERVICE);
        let network = TestNetwork::start(&spec, &[TestRelayConfig::default()])
            .await
            .expect("network");
        let dir = tempfile::tempdir().expect("dir");
        let settings = Settings {
            service_url: Some(RelayUrl::parse(SERVICE).expect("service url")),
            bootstrap_relays: vec![RelayUrl::parse(&network.urls()[0]).expect("bootstrap")],
            ..test_settings(dir.path())
        };
        let daemon = Daemon::start(&settings).await.expect("daemon");
        let relays = network.urls().len();
        let syncing = wait_until(Duration::from_secs(60), || async {
            daemon.status().await.is_some_and(|status| {
                status.relays.len() == relays
                    && status.relays.values().map(|r| r.events_saved).sum::<u64>() > 0
            })
        })
        .await;
        assert!(syncing, "{:#?}", daemon.status().await);
        SyncingDemo {
            network,
            daemon,
            _dir: dir,
        }
    }

    fn page_url(&self) -> String {
        format!("http://{}/", self.daemon.metrics_addr())
    }

    async fn status(&self) -> EngineStatus {
        let (code, body) = http_get(self.daemon.metrics_addr(), "/status").await;
        assert_eq!(code, 200, "{body}");
        serde_json::from_str(&body).expect("status json")
    }

    pub(crate) async fn stop(mut self) {
        self.daemon.shutdown().await;
        self.network.stop().await.expect("stop network");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_shows_every_relay_and_a_line_in_every_plot() {
    let demo = SyncingDemo::start(7).await;

    // The plots draw a line once the history holds a second sample with every relay.
    let lines = wait_until(Duration::from_secs(30), || async {
        let (_, page) = http_get(demo.daemon.metrics_addr(), "/").await;
        PLOTS
            .iter()
            .all(|plot| figure_of(&page, plot).is_some_and(draws_lines))
    })
    .await;
    assert!(
        lines,
        "{}",
        http_get(demo.daemon.metrics_addr(), "/").await.1
    );

    let before = demo.status().await;
    let dom = chromium(&["--dump-dom".to_owned(), demo.page_url()]).await;
    let dom = String::from_utf8(dom).expect("utf-8 DOM");
    let after = demo.status().await;
    assert!(dom.contains("<title>grasp-sync status</title>"), "{dom}");
    assert_eq!(after.relays.len(), demo.network.urls().len(), "{after:#?}");
    assert_eq!(dom.matches("<tr data-relay=").count(), after.relays.len());
    for (url, relay) in &after.relays {
        let row = row_of(&dom, url).unwrap_or_else(|| panic!("no row for {url}:\n{dom}"));
        // The state may move on between the reads; it is one of them.
        let state = attribute(row, "data-state").expect("data-state");
        let earlier = before.relays.get(url).map(|r| r.connection.as_str());
        assert!(
            state == relay.connection || Some(state) == earlier,
            "{url}: {state}, /status said {earlier:?} then {}",
            relay.connection
        );
        assert!(
            row.contains(&format!(">{state}</span>")),
            "the state is shown: {row}"
        );
    }
    for plot in PLOTS {
        let figure = figure_of(&dom, plot).unwrap_or_else(|| panic!("no plot {plot}:\n{dom}"));
        let values: usize = attribute(figure, "data-values")
            .and_then(|n| n.parse().ok())
            .expect("data-values");
        assert!(values > 0, "{plot} has no values: {figure}");
        assert!(draws_lines(figure), "{plot} drew no line: {figure}");
    }

    // The header links sort the table, and the order survives the page's reload.
    let sorted = chromium(&[
        "--dump-dom".to_owned(),
        format!("{}?sort=received&dir=desc", demo.page_url()),
    ])
    .await;
    let sorted = String::from_utf8(sorted).expect("utf-8 DOM");
    let received: Vec<u64> = sorted
        .split("<tr data-relay=")
        .skip(1)
        .filter_map(|row| attribute(row, "data-received")?.parse().ok())
        .collect();
    assert_eq!(received.len(), after.relays.len(), "{sorted}");
    assert!(received.windows(2).all(|w| w[0] >= w[1]), "{received:?}");
    assert!(sorted.contains("Received ▼"), "the sorted column is marked");

    let dir = screenshot_dir();
    for (name, size) in [
        ("status-page-1920.png", "1920,1400"),
        ("status-page-phone.png", "390,2400"),
    ] {
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        chromium(&[
            format!("--screenshot={}", path.display()),
            format!("--window-size={size}"),
            "--hide-scrollbars".to_owned(),
            demo.page_url(),
        ])
        .await;
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        assert!(size > 10_000, "{} is {size} bytes", path.display());
    }
    demo.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_the_figures_of_status() {
    let demo = SyncingDemo::start(9).await;
    // Figures move while the daemon works: compare a page read between two equal statuses.
    let mut checked = false;
    for _ in 0..50 {
        let before = demo.status().await;
        let (code, page) = http_get(demo.daemon.metrics_addr(), "/").await;
        assert_eq!(code, 200, "{page}");
        let after = demo.status().await;
        if before != after {
            continue;
        }
        let status = after;
        let stored: u64 = status.relays.values().map(|r| r.events_saved).sum();
        for (figure, value) in [
            ("repos", status.repos_tracked as u64),
            ("root-events", status.root_events_tracked as u64),
            ("relays", status.relays.len() as u64),
            ("events-stored", stored),
        ] {
            assert_eq!(summary_figure(&page, figure), Some(value), "{figure}");
        }
        assert_eq!(page.matches("<tr data-relay=").count(), status.relays.len());
        for (url, relay) in &status.relays {
            let row = row_of(&page, url).unwrap_or_else(|| panic!("no row for {url}"));
            let number = |name: &str| attribute(row, name).and_then(|v| v.parse::<u64>().ok());
            assert_eq!(attribute(row, "data-health"), Some(relay.health.as_str()));
            assert_eq!(
                number("data-received"),
                Some(relay.events_received),
                "{row}"
            );
            assert_eq!(number("data-synced"), Some(relay.events_saved), "{row}");
            assert_eq!(number("data-bytes-sent"), Some(relay.bytes_sent), "{row}");
            assert_eq!(
                number("data-bytes-received"),
                Some(relay.bytes_received),
                "{row}"
            );
            assert_eq!(
                number("data-rejected"),
                Some(relay.events_rejected),
                "{row}"
            );
            assert_eq!(
                number("data-budget"),
                Some(relay.subscription_budget as u64)
            );
            let used = relay.live_subscriptions + relay.transient_subscriptions;
            assert_eq!(number("data-used"), Some(used as u64), "{row}");
            let starts = relay.req_starts_live + relay.req_starts_historic;
            assert_eq!(number("data-starts"), Some(starts), "{row}");
            let refusals: u64 = relay.refusals.values().sum();
            assert_eq!(number("data-refusals"), Some(refusals), "{row}");
            assert!(row.contains(&format!("<td class=\"num\">{}</td>", relay.events_saved)));
        }
        checked = true;
        break;
    }
    assert!(checked, "/status never held still between two reads");

    // `grasp-sync status` shows the same relays and summary in the terminal.
    let url = format!("http://{}", demo.daemon.metrics_addr());
    let status = demo.status().await;
    let text = grasp_sync_status(&["status", "--url", &url]).await;
    let stored: u64 = status.relays.values().map(|r| r.events_saved).sum();
    assert!(
        text.contains(&format!("repositories {}", status.repos_tracked))
            && text.contains(&format!("relays {}", status.relays.len())),
        "{text}"
    );
    assert!(text.contains(&format!("events stored {stored}")), "{text}");
    for (url, relay) in &status.relays {
        let line = text
            .lines()
            .find(|line| line.starts_with(url.as_str()))
            .unwrap_or_else(|| panic!("no line for {url}:\n{text}"));
        assert!(line.contains(&relay.health), "{line}");
    }
    let json = grasp_sync_status(&["status", "--url", &url, "--json"]).await;
    let read: EngineStatus = serde_json::from_str(&json).expect("--json prints the status");
    assert_eq!(
        read.relays.keys().collect::<Vec<_>>(),
        status.relays.keys().collect::<Vec<_>>()
    );
    demo.stop().await;
}

/// Runs the built binary with `args`; its standard output, once it exited 0.
async fn grasp_sync_status(args: &[&str]) -> String {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_grasp-sync"))
        .args(args)
        .output()
        .await
        .expect("run grasp-sync");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Runs headless Chromium with `args` on a fresh profile; its standard output.
async fn chromium(args: &[String]) -> Vec<u8> {
    let binary = std::env::var_os("CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    assert!(
        binary.exists(),
        "{} is missing: install the distribution's chromium package",
        binary.display()
    );
    let profile = tempfile::tempdir().expect("profile dir");
    let mut command = tokio::process::Command::new(&binary);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("chromium finished within a minute")
        .expect("chromium runs");
    assert!(
        output.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// Where screenshots go: beside the test binaries' scratch space, under the target directory.
fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("status-page");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

/// The `<tr>` start tag and cells of `url`'s row.
fn row_of<'a>(page: &'a str, url: &str) -> Option<&'a str> {
    let start = page.find(&format!("<tr data-relay=\"{url}\""))?;
    let rest = &page[start..];
    Some(&rest[..rest.find("</tr>")?])
}

/// The `<figure>` of plot `id`.
fn figure_of<'a>(page: &'a str, id: &str) -> Option<&'a str> {
    let start = page.find(&format!("data-plot=\"{id}\""))?;
    let rest = &page[start..];
    Some(&rest[..rest.find("</figure>")?])
}

/// Whether every polyline of `figure` has at least two points, and there is one.
fn draws_lines(figure: &str) -> bool {
    let mut lines = figure
        .split("<polyline")
        .skip(1)
        .map(|line| attribute(line, "points").map_or(0, |points| points.split(' ').count()))
        .peekable();
    lines.peek().is_some() && lines.all(|points| points >= 2)
}

/// The value of the first `name="..."` attribute in `html`.
fn attribute<'a>(html: &'a str, name: &str) -> Option<&'a str> {
    let marker = format!(" {name}=\"");
    let start = html.find(&marker)? + marker.len();
    let rest = &html[start..];
    Some(&rest[..rest.find('"')?])
}

fn summary_figure(page: &str, id: &str) -> Option<u64> {
    let marker = format!("data-figure=\"{id}\" data-value=\"");
    let start = page.find(&marker)? + marker.len();
    page[start..].split('"').next()?.parse().ok()
}
