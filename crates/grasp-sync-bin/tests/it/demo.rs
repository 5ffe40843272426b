//! The demo at a reduced size: it converges and its summary passes.

use std::time::Duration;

use grasp_sync_bin::{DemoOptions, run_demo};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_syncs_exactly_the_expected_events() {
    let options = DemoOptions {
        seed: 5,
        repos: 3,
        relays: 2,
        timeout: Duration::from_secs(60),
    };
    let mut out = Vec::new();
    let summary = run_demo(&options, &mut out).await.expect("demo runs");
    let text = String::from_utf8_lossy(&out);
    assert!(summary.passed(), "{summary:?}\n{text}");
    assert!(summary.expected > 0, "{text}");
    assert!(text.contains("summary: PASS"), "{text}");
    assert!(
        text.contains(&format!(
            "expected events stored: {0}/{0}",
            summary.expected
        )),
        "{text}"
    );
}
