//! [`MetricsRegistry`]: the opentelemetry meter the engine records on, exported to a
//! Prometheus registry and rendered as Prometheus text for `/metrics`.

use anyhow::Context;
use grasp_sync_engine::metrics::{MAX_LABEL_SETS, PER_RELAY_INSTRUMENTS};
use opentelemetry::metrics::{Meter, MeterProvider};
use opentelemetry_sdk::metrics::{Instrument, SdkMeterProvider, Stream};
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
        let provider = SdkMeterProvider::builder()
            .with_reader(exporter)
            .with_view(label_sets_sized)
            .build();
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

/// The view that sizes each instrument's table of label sets. The SDK makes room for 2,001 label
/// sets per instrument up front (about 230 KiB each); instruments labelled by class, category,
/// stage or reason get room for [`MAX_LABEL_SETS`]. The per-relay instruments keep the SDK's
/// limit, as many relays as that.
fn label_sets_sized(instrument: &Instrument) -> Option<Stream> {
    if PER_RELAY_INSTRUMENTS.contains(&instrument.name()) {
        return None;
    }
    Stream::builder()
        .with_cardinality_limit(MAX_LABEL_SETS)
        .build()
        .ok()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use grasp_sync_engine::metrics::MAX_LABEL_SETS;
    use grasp_sync_engine::{RelayReading, SyncMetrics};

    use super::MetricsRegistry;

    /// The series the overflow of an instrument's label sets is recorded under.
    const OVERFLOW: &str = r#"otel_metric_overflow="true""#;

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

    #[test]
    fn per_relay_series_are_not_capped_like_the_labelled_ones() {
        let registry = MetricsRegistry::new().expect("registry");
        let metrics = SyncMetrics::new(&registry.meter());
        let relays: Vec<String> = (0..2 * MAX_LABEL_SETS)
            .map(|n| format!("wss://relay{n}.example"))
            .collect();
        let relays: Vec<&str> = relays.iter().map(String::as_str).collect();
        metrics.record_relays(readings(&relays));
        let text = registry.render().expect("render");
        let status_series = text
            .lines()
            .filter(|line| line.starts_with("grasp_sync_relay_status{"))
            .count();
        assert_eq!(status_series, relays.len(), "{text}");
        assert!(!text.contains(OVERFLOW), "{text}");
    }

    #[test]
    fn a_labelled_instrument_keeps_at_most_its_label_sets() {
        let registry = MetricsRegistry::new().expect("registry");
        let metrics = SyncMetrics::new(&registry.meter());
        for n in 0..MAX_LABEL_SETS + 5 {
            metrics.record_refusal(Box::leak(format!("category{n}").into_boxed_str()));
        }
        let text = registry.render().expect("render");
        let refusal_series: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("grasp_sync_refusals_total{"))
            .collect();
        // The label sets past the limit are counted together, under the overflow label.
        assert_eq!(refusal_series.len(), MAX_LABEL_SETS + 1, "{text}");
        let overflow = format!("grasp_sync_refusals_total{{{OVERFLOW}}} 5");
        assert!(refusal_series.contains(&overflow.as_str()), "{text}");
    }
}
