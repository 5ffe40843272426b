//! Running `git` on remote data: no terminal prompts, no system or global configuration, no
//! hooks, no credential helpers, no redirects, only the allowed transports, every URL after
//! `--`; the process is killed past [`GitLimits::timeout`] or once the repository it writes
//! grows past [`GitLimits::max_bytes`].

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::process::Command;

/// How often the size of a repository being fetched is measured.
const SIZE_CHECK_INTERVAL: Duration = Duration::from_millis(500);
/// Most bytes of git's error output kept for the log.
const STDERR_KEPT: usize = 2_048;

/// Bounds on one git run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GitLimits {
    /// The longest one fetch may take.
    pub timeout: Duration,
    /// The largest a repository may grow (its directory on disk).
    pub max_bytes: u64,
    /// Whether the `file` transport is allowed.
    pub allow_file: bool,
}

impl Default for GitLimits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(600),
            max_bytes: 2 << 30,
            allow_file: false,
        }
    }
}

/// Why a git run failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// `git` could not be started.
    #[error("git could not be started: {0}")]
    Spawn(std::io::Error),
    /// `git` exited with an error.
    #[error("git exited with {status}: {stderr}")]
    Failed {
        /// The exit status.
        status: std::process::ExitStatus,
        /// The end of its error output.
        stderr: String,
    },
    /// The run took longer than the timeout and was killed.
    #[error("git took longer than {0:?}")]
    Timeout(Duration),
    /// The repository grew past the size limit and the run was killed.
    #[error("the repository grew past {0} bytes")]
    TooLarge(u64),
    /// A file operation around the run failed.
    #[error("{0}")]
    Io(std::io::Error),
}

impl GitError {
    /// A short label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Spawn(_) | Self::Io(_) => "io",
            Self::Failed { .. } => "failed",
            Self::Timeout(_) => "timeout",
            Self::TooLarge(_) => "too_large",
        }
    }
}

/// Runs `git` with `args` (after the safety options), watching `watched` for size.
pub(crate) async fn run_git(
    args: Vec<OsString>,
    pinned: Option<&str>,
    limits: &GitLimits,
    watched: &Path,
) -> Result<(), GitError> {
    let mut command = Command::new("git");
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent")
        .env("LC_ALL", "C")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_ASKPASS", "/bin/false")
        .env("SSH_ASKPASS", "/bin/false")
        .env("GIT_PROTOCOL_FROM_USER", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for option in safety_options(limits.allow_file) {
        command.arg("-c").arg(option);
    }
    if let Some(pinned) = pinned {
        command
            .arg("-c")
            .arg(format!("http.curloptResolve={pinned}"));
    }
    command.args(args);
    let mut child = command.spawn().map_err(GitError::Spawn)?;
    let mut stderr = child.stderr.take();
    let read_stderr = async move {
        let mut kept = Vec::new();
        if let Some(stderr) = stderr.as_mut() {
            let mut buffer = [0u8; 1024];
            while let Ok(read) = stderr.read(&mut buffer).await {
                if read == 0 {
                    break;
                }
                kept.extend_from_slice(&buffer[..read]);
                if kept.len() > STDERR_KEPT {
                    let cut = kept.len() - STDERR_KEPT;
                    kept.drain(..cut);
                }
            }
        }
        String::from_utf8_lossy(&kept).trim().to_owned()
    };
    let watch = async {
        loop {
            tokio::time::sleep(SIZE_CHECK_INTERVAL).await;
            let path = watched.to_path_buf();
            let size = tokio::task::spawn_blocking(move || directory_size(&path))
                .await
                .unwrap_or(0);
            if size > limits.max_bytes {
                return;
            }
        }
    };
    let run = async {
        let (status, stderr) = tokio::join!(child.wait(), read_stderr);
        (status, stderr)
    };
    let outcome = tokio::select! {
        (status, stderr) = run => {
            let status = status.map_err(GitError::Io)?;
            if status.success() {
                Ok(())
            } else {
                Err(GitError::Failed { status, stderr })
            }
        }
        () = watch => Err(GitError::TooLarge(limits.max_bytes)),
        () = tokio::time::sleep(limits.timeout) => Err(GitError::Timeout(limits.timeout)),
    };
    // A run cut short is killed here (kill_on_drop); wait so no zombie is left.
    if outcome.is_err() {
        let _ = child.start_kill();
        let _ = child.wait().await;
        return outcome;
    }
    // A run faster than the size check is measured once it ended.
    let path = watched.to_path_buf();
    let size = tokio::task::spawn_blocking(move || directory_size(&path))
        .await
        .unwrap_or(0);
    if size > limits.max_bytes {
        return Err(GitError::TooLarge(limits.max_bytes));
    }
    outcome
}

/// The `-c` options every run gets.
fn safety_options(allow_file: bool) -> Vec<String> {
    let mut options = vec![
        "protocol.allow=never".to_owned(),
        "protocol.https.allow=always".to_owned(),
        "protocol.http.allow=always".to_owned(),
        "protocol.git.allow=always".to_owned(),
        "core.hooksPath=/dev/null".to_owned(),
        "credential.helper=".to_owned(),
        "http.followRedirects=false".to_owned(),
        "core.askPass=/bin/false".to_owned(),
        "fetch.recurseSubmodules=false".to_owned(),
        "transfer.fsckObjects=true".to_owned(),
        // No background gc or maintenance outliving the run (and holding its stderr open).
        "gc.auto=0".to_owned(),
        "maintenance.auto=false".to_owned(),
    ];
    if allow_file {
        options.push("protocol.file.allow=always".to_owned());
    }
    options
}

/// Bytes in the files under `path` (0 when it does not exist).
pub(crate) fn directory_size(path: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.metadata() {
                Ok(meta) if meta.is_dir() => stack.push(entry.path()),
                Ok(meta) => total += meta.len(),
                Err(_) => {}
            }
        }
    }
    total
}
