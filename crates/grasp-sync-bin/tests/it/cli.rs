//! The built binary's command line: help, and configuration errors that name the key and exit
//! non-zero before anything starts.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn grasp_sync(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_grasp-sync"));
    command.args(args);
    for (name, _) in std::env::vars() {
        if name.starts_with("GRASP_SYNC_") {
            command.env_remove(name);
        }
    }
    command.envs(env.iter().copied());
    command.output().expect("run grasp-sync")
}

/// Runs the binary, expects a configuration failure, returns its stderr.
fn config_error(args: &[&str], env: &[(&str, &str)]) -> String {
    let output = grasp_sync(args, env);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one clear line: {stderr}");
    stderr
}

fn config_file(text: &str) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), text).expect("write config");
    file
}

#[test]
fn help_lists_the_commands_and_every_run_flag_with_its_variable() {
    let top = grasp_sync(&["--help"], &[]);
    assert!(top.status.success());
    let top = String::from_utf8_lossy(&top.stdout);
    assert!(top.contains("run") && top.contains("demo"), "{top}");

    let run = grasp_sync(&["run", "--help"], &[]);
    assert!(run.status.success());
    let run = String::from_utf8_lossy(&run.stdout);
    for flag in [
        "--config",
        "--listen",
        "--data-dir",
        "--service-url",
        "--own-relay",
        "--bootstrap-relay",
        "--allow-relay",
        "--deny-relay",
        "--allow-private-relays",
        "--batch-window",
        "--backoff-base",
        "--backoff-cap",
        "--metrics-listen",
        "GRASP_SYNC_LISTEN",
        "GRASP_SYNC_BOOTSTRAP_RELAYS",
    ] {
        assert!(run.contains(flag), "{flag} missing from:\n{run}");
    }
}

#[test]
fn a_bad_value_in_the_file_names_its_key() {
    let file = config_file("listen = \"not-an-address\"\n");
    let path = file.path().to_str().expect("path");
    let stderr = config_error(&["run", "--config", path], &[]);
    assert!(stderr.contains("`listen`"), "{stderr}");
}

#[test]
fn an_unknown_key_in_the_file_is_refused_by_name() {
    let file = config_file("listen = \"127.0.0.1:7777\"\nbootstrap = [\"wss://x.example\"]\n");
    let path = file.path().to_str().expect("path");
    let stderr = config_error(&["run", "--config", path], &[]);
    assert!(stderr.contains("unknown field `bootstrap`"), "{stderr}");
}

#[test]
fn a_bad_relay_url_names_its_key_from_flag_or_environment() {
    let stderr = config_error(
        &["run", "--bootstrap-relay", "https://relay.example.org"],
        &[],
    );
    assert!(stderr.contains("`bootstrap_relays`"), "{stderr}");
    let stderr = config_error(&["run"], &[("GRASP_SYNC_OWN_RELAY", "relay.example.org")]);
    assert!(stderr.contains("`own_relay`"), "{stderr}");
}

#[test]
fn a_bad_auth_key_names_its_source_and_never_its_text() {
    let secret = "nsec1thisisnotakeybutmustnotbeprintedanyway";
    let stderr = config_error(&["run"], &[("GRASP_SYNC_AUTH_KEY", secret)]);
    assert!(stderr.contains("`GRASP_SYNC_AUTH_KEY`"), "{stderr}");
    assert!(!stderr.contains(secret), "the key leaked: {stderr}");
    let file = config_file(secret);
    let path = file.path().to_str().expect("path");
    let stderr = config_error(&["run", "--auth-key-file", path], &[]);
    assert!(stderr.contains("`auth_key_file`"), "{stderr}");
    assert!(!stderr.contains(secret), "the key leaked: {stderr}");
    let stderr = config_error(&["run"], &[("GRASP_SYNC_AUTH_KEY_FILE", path)]);
    assert!(stderr.contains("`auth_key_file`"), "{stderr}");
    // No flag carries the key itself.
    let output = grasp_sync(&["run", "--auth-key", secret], &[]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--auth-key"), "{stderr}");
}

#[test]
fn flags_override_the_environment_and_the_file() {
    let file = config_file("backoff_base = \"5s\"\nbackoff_cap = \"1m\"\n");
    let path = file.path().to_str().expect("path");
    // The file alone is valid; the variable breaks it; the flag overrides the variable and
    // breaks a different rule, so the reported key shows which layer won.
    let stderr = config_error(
        &["run", "--config", path],
        &[("GRASP_SYNC_BACKOFF_CAP", "1x")],
    );
    assert!(stderr.contains("`backoff_cap`"), "{stderr}");
    let stderr = config_error(
        &["run", "--config", path, "--backoff-cap", "1s"],
        &[("GRASP_SYNC_BACKOFF_CAP", "1x")],
    );
    assert!(
        stderr.contains("`backoff_cap`") && stderr.contains("shorter than backoff_base"),
        "{stderr}"
    );
}

#[test]
fn an_unrepresentable_duration_is_a_config_error_not_a_panic() {
    let dir = tempfile::tempdir().expect("dir");
    let data_dir = dir.path().to_str().expect("path");
    let stderr = config_error(
        &[
            "run",
            "--batch-window",
            "18446744073709551615s",
            "--data-dir",
            data_dir,
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
        ],
        &[],
    );
    assert!(
        stderr.contains("`batch_window`") && stderr.contains("out of range"),
        "{stderr}"
    );
    let stderr = config_error(
        &["run", "--data-dir", data_dir],
        &[("GRASP_SYNC_RELAY_MAX_CONNECTIONS", "2000000")],
    );
    assert!(stderr.contains("`relay.max_connections`"), "{stderr}");
}

#[test]
fn a_missing_config_file_is_reported() {
    let stderr = config_error(&["run", "--config", "/nonexistent/grasp-sync.toml"], &[]);
    assert!(
        stderr.contains("cannot read configuration file"),
        "{stderr}"
    );
}

#[test]
fn sigterm_stops_the_daemon_with_exit_code_zero_within_ten_seconds() {
    let dir = tempfile::tempdir().expect("dir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_grasp-sync"))
        .args([
            "run",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let started = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|line| line.contains("grasp-sync running"));
    assert!(started, "the daemon never reported running");
    let signalled = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(signalled.success());
    let asked = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if asked.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("still running 10 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(status.success(), "{status:?}; {rest:?}");
    assert!(rest.iter().any(|line| line.contains("stopped")), "{rest:?}");
}

#[test]
fn status_of_an_unreachable_daemon_fails_with_one_clear_line() {
    // A port nothing listens on any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("free port")
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let output = grasp_sync(&["status", "--url", &url], &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot reach {url}/status")),
        "{stderr}"
    );
    let output = grasp_sync(&["status", "--url", "https://example.test"], &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("invalid --url"), "{stderr}");
}

#[test]
fn a_bad_shard_names_its_key_from_flag_or_environment() {
    let stderr = config_error(&["run", "--shard", "4/4"], &[]);
    assert!(stderr.contains("`shard`"), "{stderr}");
    assert!(stderr.contains("numbered from 0 to 3"), "{stderr}");
    // Several shards without an external own relay would each keep a store of their own.
    let stderr = config_error(&["run"], &[("GRASP_SYNC_SHARD", "1/2")]);
    assert!(stderr.contains("`shard`"), "{stderr}");
    assert!(stderr.contains("own_relay"), "{stderr}");
}
