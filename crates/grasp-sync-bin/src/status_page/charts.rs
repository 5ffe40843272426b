//! The page's [`Plot`]s, drawn from the history's samples followed by the sample of now:
//! events stored, starts and refusals per minute (steps between samples), and each relay's
//! lag (a line; the [`MAX_LAG_LINES`] relays with the most lag, the rest counted).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::history::Sample;

use super::plot::{Plot, Series};

/// Relays drawn on one lag plot.
pub(crate) const MAX_LAG_LINES: usize = 8;

/// The four plots over `samples` (oldest first, now last); `span` names the window in
/// captions and ids (`hour`, `day`).
pub(crate) fn plots(samples: &[&Sample], span: &str) -> Vec<Plot> {
    let rate = |id: &str, title: &str, pick: fn(&Sample) -> u64| Plot {
        id: format!("{id}-{span}"),
        title: format!("{title}, last {span}"),
        series: vec![Series {
            label: title.to_owned(),
            points: per_minute(samples, pick),
            step: true,
        }],
        omitted: 0,
    };
    let (lag, omitted) = lag_series(samples);
    vec![
        rate("events-stored", "Events stored per minute", |s| {
            s.events_stored
        }),
        rate("starts", "REQ starts per minute", |s| s.starts),
        rate("refusals", "Refusals per minute", |s| s.refusals),
        Plot {
            id: format!("lag-{span}"),
            title: format!("Lag per relay, last {span}"),
            series: lag,
            omitted,
        },
    ]
}

/// `(time, rate per minute)`: the first point at the first sample with rate 0, then each
/// sample with the rate since the one before (a counter that went down, after a restart of
/// the engine, counts from 0).
fn per_minute(samples: &[&Sample], pick: fn(&Sample) -> u64) -> Vec<(f64, f64)> {
    let mut points = Vec::with_capacity(samples.len());
    let mut previous: Option<&Sample> = None;
    for sample in samples {
        let at = sample.at.as_secs_f64();
        let value = match previous {
            None => 0.0,
            Some(before) => {
                let dt = at - before.at.as_secs_f64();
                if dt <= 0.0 {
                    continue;
                }
                let now = pick(sample);
                let then = pick(before);
                let delta = if now >= then { now - then } else { now };
                delta as f64 * 60.0 / dt
            }
        };
        points.push((at, value));
        previous = Some(sample);
    }
    points
}

fn lag_series(samples: &[&Sample]) -> (Vec<Series>, usize) {
    let relays: BTreeSet<&Arc<str>> = samples.iter().flat_map(|s| s.relays.keys()).collect();
    let mut ranked: Vec<(u64, &Arc<str>)> = relays
        .into_iter()
        .map(|url| {
            let peak = samples
                .iter()
                .filter_map(|s| s.relays.get(url))
                .map(|r| r.lag)
                .max()
                .unwrap_or(0);
            (peak, url)
        })
        .collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let omitted = ranked.len().saturating_sub(MAX_LAG_LINES);
    let series = ranked
        .into_iter()
        .take(MAX_LAG_LINES)
        .map(|(_, url)| Series {
            label: url.to_string(),
            points: samples
                .iter()
                .filter_map(|s| {
                    s.relays
                        .get(url)
                        .map(|r| (s.at.as_secs_f64(), r.lag as f64))
                })
                .collect(),
            step: false,
        })
        .collect();
    (series, omitted)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use crate::history::RelaySample;

    use super::*;

    fn sample(secs: u64, stored: u64, lags: &[(&str, u64)]) -> Sample {
        Sample {
            at: Duration::from_secs(secs),
            events_stored: stored,
            starts: 0,
            refusals: 0,
            relays: lags
                .iter()
                .map(|(url, lag)| {
                    (
                        Arc::from(*url),
                        RelaySample {
                            starts: 0,
                            lag: *lag,
                        },
                    )
                })
                .collect::<BTreeMap<_, _>>(),
        }
    }

    #[test]
    fn rates_are_per_minute_between_samples() {
        let samples = [
            sample(0, 0, &[]),
            sample(10, 5, &[]),
            sample(40, 5, &[]),
            sample(70, 2, &[]),
        ];
        let refs: Vec<&Sample> = samples.iter().collect();
        assert_eq!(
            per_minute(&refs, |s| s.events_stored),
            vec![(0.0, 0.0), (10.0, 30.0), (40.0, 0.0), (70.0, 4.0)]
        );
    }

    #[test]
    fn lag_draws_the_relays_with_most_lag_and_counts_the_rest() {
        let mut lags: Vec<(String, u64)> = (0..10).map(|i| (format!("ws://r{i}/"), i)).collect();
        lags.push(("ws://quiet/".into(), 0));
        let pairs: Vec<(&str, u64)> = lags.iter().map(|(u, l)| (u.as_str(), *l)).collect();
        let samples = [sample(0, 0, &pairs), sample(10, 0, &pairs)];
        let refs: Vec<&Sample> = samples.iter().collect();
        let (series, omitted) = lag_series(&refs);
        assert_eq!(series.len(), MAX_LAG_LINES);
        assert_eq!(omitted, 3);
        assert_eq!(series[0].label, "ws://r9/");
        assert_eq!(series[0].points, vec![(0.0, 9.0), (10.0, 9.0)]);
    }
}
