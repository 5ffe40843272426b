//! [`DaemonProcess`]: the built `grasp-sync` binary running `run` on free loopback ports, for
//! tests that need the daemon as a process of its own (a second run on the same store, or a
//! daemon whose runtime nothing else shares). Its log is read all along, so a full pipe never
//! stalls it, and kept for failure messages. Dropped while running, it is killed.

// Each test binary uses a part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// A running `grasp-sync run`.
pub(crate) struct DaemonProcess {
    child: Child,
    /// The embedded relay's URL (`ws://127.0.0.1:PORT`).
    pub(crate) relay: String,
    /// The `/metrics` and `/status` address.
    pub(crate) metrics: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

impl DaemonProcess {
    /// Starts `grasp-sync run` on `data_dir` with `args` after the listen addresses (no
    /// `GRASP_SYNC_*` variable of the test's environment reaches it), and waits until it
    /// reports its relay and metrics addresses.
    pub(crate) fn start(data_dir: &Path, args: &[&str]) -> DaemonProcess {
        let mut command = Command::new(env!("CARGO_BIN_EXE_grasp-sync"));
        for (name, _) in std::env::vars() {
            if name.starts_with("GRASP_SYNC_") {
                command.env_remove(name);
            }
        }
        let mut child = command
            .args([
                "run",
                "--listen",
                "127.0.0.1:0",
                "--metrics-listen",
                "127.0.0.1:0",
            ])
            .args(args)
            .arg("--data-dir")
            .arg(data_dir)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn grasp-sync");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (addresses, found) = mpsc::channel();
        let kept = Arc::clone(&log);
        std::thread::spawn(move || {
            let mut relay = None;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("embedded relay serving") {
                    relay = word_after(&line, "relay=");
                }
                if line.contains("grasp-sync running") {
                    let metrics = word_after(&line, "metrics=http://")
                        .and_then(|w| w.trim_end_matches("/metrics").parse::<SocketAddr>().ok());
                    let _ = addresses.send((relay.clone(), metrics));
                }
                kept.lock().expect("log").push(line);
            }
        });
        let mut daemon = DaemonProcess {
            child,
            relay: String::new(),
            metrics: SocketAddr::from(([127, 0, 0, 1], 0)),
            log,
        };
        match found.recv_timeout(Duration::from_secs(60)) {
            Ok((Some(relay), Some(metrics))) => {
                daemon.relay = relay;
                daemon.metrics = metrics;
            }
            other => panic!(
                "the daemon did not report its addresses ({other:?}): {}",
                daemon.log()
            ),
        }
        daemon
    }

    /// The daemon's log so far.
    pub(crate) fn log(&self) -> String {
        self.log.lock().expect("log").join("\n")
    }

    /// The process ID.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the daemon with SIGTERM, as an operator would, and waits up to 30 s for it to
    /// exit.
    pub(crate) fn stop(mut self) {
        let signalled = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(signalled.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        while !matches!(self.child.try_wait(), Ok(Some(_))) {
            assert!(
                Instant::now() < deadline,
                "still running 30 s after SIGTERM: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The whitespace-delimited word following `key` in `line`.
fn word_after(line: &str, key: &str) -> Option<String> {
    let start = line.find(key)? + key.len();
    line[start..].split_whitespace().next().map(str::to_owned)
}
