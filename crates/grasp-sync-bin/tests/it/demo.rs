//! The demo at a reduced size: it converges, shows its progress line, and its summary passes.

use std::time::Duration;

use grasp_sync_bin::{DemoOptions, run_demo};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_syncs_exactly_the_expected_events() {
    let options = DemoOptions {
        seed: 5,
        repos: 3,
        relays: 2,
        timeout: Duration::from_secs(60),
        progress: true,
    };
    let mut out = Vec::new();
    let summary = run_demo(&options, &mut out).await.expect("demo runs");
    let text = String::from_utf8_lossy(&out);
    assert!(summary.passed(), "{summary:?}\n{text}");
    assert!(summary.expected > 0, "{text}");
    assert!(text.contains("summary: PASS"), "{text}");
    // The progress line was rewritten in place and ended before the summary.
    assert!(text.contains("\r\x1b[2K["), "{text:?}");
    assert!(
        text.contains(&format!("] {0}/{0} events stored, ", summary.expected)),
        "{text:?}"
    );
    assert!(text.contains(" relays done\nsummary: PASS"), "{text:?}");
    assert!(
        text.contains(&format!(
            "expected events stored: {0}/{0}",
            summary.expected
        )),
        "{text}"
    );
}
