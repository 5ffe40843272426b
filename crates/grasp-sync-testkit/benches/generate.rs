//! Benchmarks the network generator and `TestNetwork::start` at the gitnostr shape (8 relays,
//! 869 repositories, 3,632 roots).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, SamplingMode};
use grasp_sync_testkit::{NetworkSpec, TestNetwork, TestRelayConfig, generate};

fn gitnostr(c: &mut Criterion) {
    let spec = NetworkSpec::gitnostr(1, "ws://127.0.0.1:4000");
    let urls: Vec<String> = (0..spec.relays)
        .map(|i| format!("ws://127.0.0.1:{}", 5000 + i))
        .collect();
    let mut group = c.benchmark_group("gitnostr");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(Duration::from_secs(30));
    group.bench_function("generate", |b| {
        b.iter(|| generate(black_box(&spec), black_box(&urls)))
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    group.bench_function("start_and_seed_memory", |b| {
        b.iter(|| {
            runtime.block_on(async {
                TestNetwork::start(&spec, &[TestRelayConfig::default()])
                    .await
                    .expect("network starts")
            })
        })
    });
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    gitnostr(&mut criterion);
    criterion.final_summary();
}
