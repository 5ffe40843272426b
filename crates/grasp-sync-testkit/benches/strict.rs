//! Benchmarks the strict relay's message proxy against the same relay without it: one REQ
//! round trip to EOSE on an empty result, and one REQ delivering 1,000 stored events.

use std::time::Duration;

use criterion::{Criterion, SamplingMode};
use futures::{SinkExt, StreamExt};
use grasp_sync_testkit::{
    Dialect, FilterLimit, FilterPredicate, PolicyRule, StrictLimits, SubscriptionLimit, TestRelay,
    TestRelayConfig,
};
use nostr::{EventBuilder, Keys, Timestamp};
use serde_json::json;
use tokio::net::TcpStream;
use tokio::runtime::Runtime;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

/// Events stored on each relay.
const EVENTS: usize = 1_000;

type Client = WebSocketStream<TcpStream>;

/// Limits that inspect every REQ without refusing any of the benchmark's.
fn limits() -> StrictLimits {
    StrictLimits {
        subscriptions: Some(SubscriptionLimit {
            max: 20,
            dialect: Dialect::Strfry,
            counts_negentropy: true,
            advertised: true,
        }),
        filters_per_req: Some(FilterLimit {
            max: 3,
            dialect: Dialect::Strfry,
            advertised: false,
        }),
        retained_req_bytes: Some(1024 * 1024),
        policies: vec![PolicyRule::new(
            FilterPredicate::Tag('q'),
            "blocked: no quotes",
        )],
        ..StrictLimits::default()
    }
}

async fn relay(config: TestRelayConfig) -> (TestRelay, Client) {
    let relay = TestRelay::start(config).await.expect("relay starts");
    let keys = Keys::generate();
    let events = (0..EVENTS).map(|i| {
        EventBuilder::text_note(format!("note {i}"))
            .custom_created_at(Timestamp::from_secs(1_700_000_000 + i as u64))
            .sign_with_keys(&keys)
            .expect("note signs")
    });
    relay.seed(events).await.expect("seeded");
    let url = relay.url();
    let tcp = TcpStream::connect(url.trim_start_matches("ws://"))
        .await
        .expect("tcp connect");
    tcp.set_nodelay(true).expect("TCP_NODELAY");
    let (client, _) = tokio_tungstenite::client_async(url.as_str(), tcp)
        .await
        .expect("websocket handshake");
    (relay, client)
}

/// Sends one REQ for `kind` and reads until its EOSE; returns the events received.
async fn fetch(client: &mut Client, kind: u16) -> usize {
    let req = json!(["REQ", "bench", { "kinds": [kind], "limit": EVENTS }]).to_string();
    client
        .send(Message::Text(req.into()))
        .await
        .expect("REQ sent");
    let mut events = 0;
    while let Some(Ok(message)) = client.next().await {
        if let Message::Text(text) = message {
            if text.as_str().starts_with("[\"EOSE\"") {
                break;
            }
            events += 1;
        }
    }
    let close = json!(["CLOSE", "bench"]).to_string();
    client
        .send(Message::Text(close.into()))
        .await
        .expect("CLOSE sent");
    events
}

fn proxy(c: &mut Criterion) {
    let runtime = Runtime::new().expect("tokio runtime");
    let (_direct_relay, mut direct) = runtime.block_on(relay(TestRelayConfig::default()));
    let (_strict_relay, mut strict) = runtime.block_on(relay(TestRelayConfig::strict(limits())));
    let mut group = c.benchmark_group("strict_proxy");
    group.sample_size(30);
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("eose_round_trip/direct", |b| {
        b.iter(|| runtime.block_on(fetch(&mut direct, 2)))
    });
    group.bench_function("eose_round_trip/strict", |b| {
        b.iter(|| runtime.block_on(fetch(&mut strict, 2)))
    });
    group.bench_function("1000_events/direct", |b| {
        b.iter(|| assert_eq!(runtime.block_on(fetch(&mut direct, 1)), EVENTS))
    });
    group.bench_function("1000_events/strict", |b| {
        b.iter(|| assert_eq!(runtime.block_on(fetch(&mut strict, 1)), EVENTS))
    });
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    proxy(&mut criterion);
    criterion.final_summary();
}
