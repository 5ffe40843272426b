//! [`MetricsRegistry`]: the opentelemetry meter the engine records on, exported to a
//! Prometheus registry and rendered as Prometheus text for `/metrics`.

use anyhow::Context;
use opentelemetry::metrics::{Meter, MeterProvider};
use opentelemetry_sdk::metrics::SdkMeterProvider;
use prometheus::{Encoder, TextEncoder};

/// Instrument scope of the daemon's meter.
const METER_NAME: &str = "grasp-sync";

/// A meter provider whose instruments are read by a Prometheus registry.
#[derive(Debug, Clone)]
pub struct MetricsRegistry {
    registry: prometheus::Registry,
    provider: SdkMeterProvider,
}

impl MetricsRegistry {
    /// A fresh registry. Instrument names are exported as recorded (the engine's counters
    /// already end in `_total`), without the `target_info` metric or scope labels.
    pub fn new() -> anyhow::Result<MetricsRegistry> {
        let registry = prometheus::Registry::new();
        let exporter = opentelemetry_prometheus::exporter()
            .with_registry(registry.clone())
            .without_counter_suffixes()
            .without_units()
            .without_target_info()
            .scope_info_enabled(false)
            .build()
            .context("building the prometheus exporter")?;
        let provider = SdkMeterProvider::builder().with_reader(exporter).build();
        Ok(MetricsRegistry { registry, provider })
    }

    /// The meter to hand to the engine.
    pub fn meter(&self) -> Meter {
        self.provider.meter(METER_NAME)
    }

    /// Every metric in the Prometheus text format.
    pub fn render(&self) -> anyhow::Result<String> {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .context("encoding metrics")?;
        String::from_utf8(out).context("metrics text is not utf-8")
    }

    /// Stops the meter provider.
    pub fn shutdown(&self) {
        if let Err(error) = self.provider.shutdown() {
            tracing::debug!(%error, "meter provider shutdown");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use grasp_sync_engine::{RelayReading, SyncMetrics};

    use super::MetricsRegistry;

    fn readings(relays: &[&str]) -> BTreeMap<String, RelayReading> {
        relays
            .iter()
            .map(|relay| {
                let reading = RelayReading {
                    connected: 3,
                    status: 1,
                    failures: 0,
                    connections: 2,
                    live_subscriptions: 21,
                    wire: grasp_sync_engine::WireBytes {
                        sent: 120,
                        received: 4_096,
                    },
                };
                ((*relay).to_owned(), reading)
            })
            .collect()
    }

    #[test]
    fn a_retired_relay_has_no_series_at_the_next_scrape() {
        let registry = MetricsRegistry::new().expect("registry");
        let metrics = SyncMetrics::new(&registry.meter());
        metrics.record_relays(readings(&["wss://a.example", "wss://b.example"]));
        let first = registry.render().expect("render");
        assert!(
            first.contains(r#"grasp_sync_relay_connected{relay="wss://b.example"} 3"#),
            "{first}"
        );
        assert!(
            first.contains(r#"grasp_sync_relay_failures{relay="wss://a.example"} 0"#),
            "{first}"
        );
        assert!(
            first.contains(r#"grasp_sync_relay_connections{relay="wss://a.example"} 2"#),
            "{first}"
        );
        assert!(
            first.contains(r#"grasp_sync_relay_live_subscriptions{relay="wss://a.example"} 21"#),
            "{first}"
        );
        assert!(
            first.contains(
                r#"grasp_sync_relay_bytes_total{direction="received",relay="wss://a.example"} 4096"#
            ),
            "{first}"
        );
        assert!(
            first.contains(
                r#"grasp_sync_relay_bytes_total{direction="sent",relay="wss://b.example"} 120"#
            ),
            "{first}"
        );
        metrics.record_relays(readings(&["wss://a.example"]));
        let second = registry.render().expect("render");
        assert!(second.contains(r#"relay="wss://a.example""#), "{second}");
        assert!(!second.contains("wss://b.example"), "{second}");
    }
}
