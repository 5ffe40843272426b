//! Shared fixtures: settings for a daemon on free loopback ports, waiting on a condition with
//! a deadline, a raw publisher that reads back `OK` messages, and a minimal HTTP GET.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use grasp_sync_bin::{RawConfig, Settings};
use nostr::{ClientMessage, Event, RelayMessage};
use nostr_sdk::pool::{RelayNotification, RelayOptions, RelayPool};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Settings for a test daemon: free ports, fast windows, loopback relays allowed.
pub(crate) fn test_settings(data_dir: &Path) -> Settings {
    let raw = RawConfig {
        listen: Some("127.0.0.1:0".to_owned()),
        metrics_listen: Some("127.0.0.1:0".to_owned()),
        data_dir: Some(data_dir.to_path_buf()),
        allow_private_relays: Some(true),
        batch_window: Some("200ms".to_owned()),
        backoff_base: Some("1s".to_owned()),
        backoff_cap: Some("5s".to_owned()),
        ..RawConfig::default()
    };
    Settings::resolve(raw).expect("test settings")
}

/// Polls `check` until it returns true or `deadline` passes; returns whether it became true.
pub(crate) async fn wait_until<F, Fut>(deadline: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let until = tokio::time::Instant::now() + deadline;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A WebSocket client of one relay that publishes events and reads back the `OK` answers.
pub(crate) struct Publisher {
    pool: RelayPool,
    relay: nostr_sdk::Relay,
}

impl Publisher {
    pub(crate) async fn connect(url: &str) -> Self {
        let url = nostr::RelayUrl::parse(url).expect("relay url");
        let pool = RelayPool::default();
        pool.add_relay(url.clone(), RelayOptions::new().reconnect(false))
            .await
            .expect("add relay");
        let relay = pool.relay(&url).await.expect("relay");
        relay
            .try_connect(Duration::from_secs(10))
            .await
            .expect("connect");
        Self { pool, relay }
    }

    /// Publishes `event`; the relay's (accepted, message).
    pub(crate) async fn publish(&self, event: &Event) -> (bool, String) {
        let mut notifications = self.relay.notifications();
        self.relay
            .send_msg(ClientMessage::event(event.clone()))
            .expect("send");
        let answer = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                if let Ok(RelayNotification::Message {
                    message:
                        RelayMessage::Ok {
                            event_id,
                            status,
                            message,
                        },
                }) = notifications.recv().await
                    && event_id == event.id
                {
                    return (status, message.into_owned());
                }
            }
        })
        .await;
        answer.expect("an OK within 10 s")
    }

    pub(crate) async fn close(self) {
        self.relay.disconnect();
        self.pool.shutdown().await;
    }
}

/// `GET path` on `addr`: (status code, body).
pub(crate) async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("status line");
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (code, body)
}
