//! Benchmarks refusal classification and one relay-health event round (refusal, timeout, state).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_main};
use grasp_sync_health::{HealthConfig, RefusalScope, RelayHealth, classify};

const TEXTS: &[&str] = &[
    "rate-limited: too many queries",
    "ERROR: bad req: filter validation failed: invalid number of filters: 8",
    "rate-limited: active subscriptions exceed max size 262144 bytes",
    "Subscription rejected: Too many subscriptions: Number of subscriptions must be less than or equal to 10",
    "blocked: you are banned from posting here",
    "something no relay ever said",
];

fn classify_texts(c: &mut Criterion) {
    c.bench_function("classify_six_texts", |b| {
        b.iter(|| {
            for text in TEXTS {
                black_box(classify(black_box(text)));
            }
        });
    });
}

fn health_round(c: &mut Criterion) {
    let start = Instant::now();
    let refusal = classify("rate-limited: too many queries");
    c.bench_function("health_refusal_timeout_state", |b| {
        let mut health = RelayHealth::new(HealthConfig::default(), false, 1, start)
            .expect("default config is valid");
        health.handle_connect_started(start);
        health.handle_connected(start);
        let mut now = start;
        b.iter(|| {
            now += Duration::from_secs(70);
            health.handle_refusal(now, &refusal, RefusalScope::Notice);
            health.handle_timeout(now);
            black_box(health.state(now));
            black_box(health.poll_timeout());
        });
    });
}

mod group {
    //! The benchmark group; private so the generated function needs no docs.
    use criterion::criterion_group;

    criterion_group!(benches, super::classify_texts, super::health_round);
}

criterion_main!(group::benches);
