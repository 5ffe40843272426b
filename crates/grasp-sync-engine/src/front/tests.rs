//! The front over real loopback sockets, on paused tokio time: header-read timeouts,
//! connection caps, WebSocket upgrades and stopping.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::upgrade::Upgraded;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::{Front, FrontLimits, Site, header_has_token, is_websocket_upgrade, plain};

/// Answers `hello`, echoes WebSocket text.
#[derive(Debug, Clone, Default)]
struct Echo {
    accepted: Arc<AtomicUsize>,
}

impl Site for Echo {
    async fn respond(&self, _request: Request<Incoming>) -> Response<Full<Bytes>> {
        plain(StatusCode::OK, "hello\n")
    }

    fn serves_websockets(&self) -> bool {
        true
    }

    async fn websocket(&self, io: TokioIo<Upgraded>, _peer: SocketAddr) {
        let mut socket = WebSocketStream::from_raw_socket(io, Role::Server, None).await;
        while let Some(Ok(Message::Text(text))) = socket.next().await {
            if socket.send(Message::Text(text)).await.is_err() {
                return;
            }
        }
    }

    fn accepted(&self, _peer: SocketAddr) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
    }
}

async fn front(limits: FrontLimits) -> (Front, Echo) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let site = Echo::default();
    let front = Front::start(listener, limits, site.clone()).expect("front");
    (front, site)
}

/// Reads until the peer closes; what it sent.
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut bytes = Vec::new();
    // A reset counts as closed too.
    let _ = stream.read_to_end(&mut bytes).await;
    String::from_utf8_lossy(&bytes).into_owned()
}

#[tokio::test(start_paused = true)]
async fn an_idle_connection_and_a_half_sent_request_are_closed_at_the_header_timeout() {
    let limits = FrontLimits {
        header_read_timeout: Duration::from_secs(7),
        ..FrontLimits::default()
    };
    let (front, _site) = front(limits).await;
    let started = tokio::time::Instant::now();
    let mut idle = TcpStream::connect(front.addr()).await.expect("connect");
    let mut half = TcpStream::connect(front.addr()).await.expect("connect");
    half.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("write");
    read_to_close(&mut idle).await;
    read_to_close(&mut half).await;
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(7) && waited < Duration::from_secs(8),
        "closed after {waited:?}"
    );
    front.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_keep_alive_connection_between_requests_is_closed_at_the_header_timeout() {
    let limits = FrontLimits {
        header_read_timeout: Duration::from_secs(3),
        ..FrontLimits::default()
    };
    let (front, _site) = front(limits).await;
    let mut stream = TcpStream::connect(front.addr()).await.expect("connect");
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("write");
    let started = tokio::time::Instant::now();
    let answer = read_to_close(&mut stream).await;
    assert!(answer.contains("hello"), "{answer}");
    assert!(started.elapsed() >= Duration::from_secs(3));
    front.stop().await;
}

#[tokio::test(start_paused = true)]
async fn connections_over_the_caps_get_a_canned_refusal_and_places_come_back() {
    let limits = FrontLimits {
        max_connections: 3,
        max_connections_per_ip: 2,
        ..FrontLimits::default()
    };
    let (front, site) = front(limits).await;
    let first = TcpStream::connect(front.addr()).await.expect("connect");
    let _second = TcpStream::connect(front.addr()).await.expect("connect");
    let mut third = TcpStream::connect(front.addr()).await.expect("connect");
    let refused = read_to_close(&mut third).await;
    assert!(refused.starts_with("HTTP/1.1 429"), "{refused}");
    assert_eq!(site.accepted.load(Ordering::Relaxed), 3);

    // Closing one frees its place, once the front has seen the close: until then a new
    // connection is still turned away.
    drop(first);
    let answer = loop {
        let mut again = TcpStream::connect(front.addr()).await.expect("connect");
        again
            .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .expect("write");
        let answer = read_to_close(&mut again).await;
        if !answer.starts_with("HTTP/1.1 429") {
            break answer;
        }
        tokio::task::yield_now().await;
    };
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    front.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_total_cap_answers_503() {
    let limits = FrontLimits {
        max_connections: 1,
        ..FrontLimits::default()
    };
    let (front, _site) = front(limits).await;
    let _held = TcpStream::connect(front.addr()).await.expect("connect");
    let mut refused = TcpStream::connect(front.addr()).await.expect("connect");
    let answer = read_to_close(&mut refused).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    front.stop().await;
}

#[tokio::test]
async fn a_websocket_upgrade_reaches_the_site() {
    let (front, _site) = front(FrontLimits::default()).await;
    let url = format!("ws://{}", front.addr());
    let (mut socket, response) = tokio_tungstenite::connect_async(url)
        .await
        .expect("handshake");
    assert_eq!(response.status(), StatusCode::SWITCHING_PROTOCOLS);
    socket
        .send(Message::Text("ping".into()))
        .await
        .expect("send");
    let echoed = socket.next().await.expect("a message").expect("no error");
    assert_eq!(echoed, Message::Text("ping".into()));
    front.stop().await;
}

#[tokio::test(start_paused = true)]
async fn stopping_closes_open_connections() {
    let (front, site) = front(FrontLimits::default()).await;
    let mut stream = TcpStream::connect(front.addr()).await.expect("connect");
    while site.accepted.load(Ordering::Relaxed) == 0 {
        tokio::task::yield_now().await;
    }
    front.stop().await;
    read_to_close(&mut stream).await;
}

fn headers(pairs: &[(header::HeaderName, &'static str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(name.clone(), HeaderValue::from_static(value));
    }
    map
}

#[test]
fn header_tokens_match_case_insensitively_and_ignore_parameters() {
    let map = headers(&[
        (header::CONNECTION, "keep-alive, Upgrade"),
        (header::UPGRADE, "WebSocket"),
        (header::ACCEPT, "text/html, application/nostr+json; q=0.9"),
    ]);
    assert!(is_websocket_upgrade(&map));
    assert!(header_has_token(
        &map,
        header::ACCEPT,
        "application/nostr+json"
    ));
    assert!(!header_has_token(&map, header::ACCEPT, "application/json"));
    assert!(!is_websocket_upgrade(&headers(&[(
        header::CONNECTION,
        "keep-alive"
    )])));
}
