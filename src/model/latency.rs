//! Latency recording for request/response workloads: an HDR histogram in
//! nanoseconds (3 significant digits, 1 ns to 100 s), summarized into
//! [`LatencyStats`] with the full histogram, and merged across flows.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// A latency distribution in microseconds, from an HDR histogram
/// (3 significant digits), with the histogram itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyStats {
    pub samples: u64,
    pub mean_us: f64,
    pub stddev_us: f64,
    pub min_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p99_9_us: f64,
    pub max_us: f64,
    /// Every non-empty bucket: its highest value and its count.
    pub histogram: Vec<LatencyBucket>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyBucket {
    pub value_us: f64,
    pub count: u64,
}

/// Highest latency recorded; longer ones are clamped to it.
const MAX_NANOS: u64 = 100_000_000_000;

/// Records round-trip times of one flow (owned by its thread).
pub struct LatencyRecorder {
    histogram: Histogram<u64>,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        LatencyRecorder::new()
    }
}

impl LatencyRecorder {
    pub fn new() -> LatencyRecorder {
        LatencyRecorder {
            histogram: Histogram::new_with_bounds(1, MAX_NANOS, 3).expect("valid histogram bounds"),
        }
    }

    /// Records one round trip.
    #[inline]
    pub fn record_nanos(&mut self, nanos: u64) {
        self.histogram.saturating_record(nanos.clamp(1, MAX_NANOS));
    }

    pub fn len(&self) -> u64 {
        self.histogram.len()
    }

    pub fn is_empty(&self) -> bool {
        self.histogram.is_empty()
    }

    /// The summary with every non-empty bucket; None when nothing was recorded.
    pub fn stats(&self) -> Option<LatencyStats> {
        summarize(&self.histogram)
    }
}

fn us(nanos: f64) -> f64 {
    nanos / 1000.0
}

fn summarize(h: &Histogram<u64>) -> Option<LatencyStats> {
    if h.is_empty() {
        return None;
    }
    let histogram = h
        .iter_recorded()
        .map(|v| LatencyBucket {
            value_us: us(h.highest_equivalent(v.value_iterated_to()) as f64),
            count: v.count_at_value(),
        })
        .collect();
    Some(LatencyStats {
        samples: h.len(),
        mean_us: us(h.mean()),
        stddev_us: us(h.stdev()),
        min_us: us(h.min() as f64),
        p50_us: us(h.value_at_quantile(0.50) as f64),
        p90_us: us(h.value_at_quantile(0.90) as f64),
        p99_us: us(h.value_at_quantile(0.99) as f64),
        p99_9_us: us(h.value_at_quantile(0.999) as f64),
        max_us: us(h.max() as f64),
        histogram,
    })
}

/// One distribution from several (each rebuilt from its buckets, so the
/// result keeps the histograms' precision).
pub fn merge(parts: &[&LatencyStats]) -> LatencyStats {
    let mut h: Histogram<u64> = Histogram::new_with_bounds(1, MAX_NANOS, 3).expect("valid histogram bounds");
    let (mut min, mut max) = (f64::INFINITY, 0f64);
    for part in parts {
        for b in &part.histogram {
            let nanos = (b.value_us * 1000.0).round() as u64;
            let _ = h.record_n(nanos.clamp(1, MAX_NANOS), b.count);
        }
        min = min.min(part.min_us);
        max = max.max(part.max_us);
    }
    let mut stats = summarize(&h).unwrap_or_default();
    if parts.len() == 1 {
        return parts[0].clone();
    }
    // Exact extremes and mean from the parts rather than bucket values.
    if stats.samples > 0 {
        stats.min_us = min;
        stats.max_us = max;
        let n: u64 = parts.iter().map(|p| p.samples).sum();
        stats.mean_us = parts.iter().map(|p| p.mean_us * p.samples as f64).sum::<f64>() / n.max(1) as f64;
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_follow_the_recorded_values() {
        let mut r = LatencyRecorder::new();
        for us in 1..=1000u64 {
            r.record_nanos(us * 1000);
        }
        let s = r.stats().unwrap();
        assert_eq!(s.samples, 1000);
        assert!((s.p50_us - 500.0).abs() < 1.0, "{}", s.p50_us);
        assert!((s.p99_us - 990.0).abs() < 1.0, "{}", s.p99_us);
        assert!((s.min_us - 1.0).abs() < 0.01);
        assert!((s.max_us - 1000.0).abs() < 1.0);
        assert!((s.mean_us - 500.5).abs() < 1.0);
        assert_eq!(s.histogram.iter().map(|b| b.count).sum::<u64>(), 1000);
    }

    #[test]
    fn merging_keeps_counts_and_extremes() {
        let mut a = LatencyRecorder::new();
        let mut b = LatencyRecorder::new();
        for _ in 0..100 {
            a.record_nanos(10_000);
            b.record_nanos(30_000);
        }
        b.record_nanos(5_000_000);
        let m = merge(&[&a.stats().unwrap(), &b.stats().unwrap()]);
        assert_eq!(m.samples, 201);
        assert!((m.min_us - 10.0).abs() < 0.1);
        assert!((m.max_us - 5000.0).abs() < 5.0, "{}", m.max_us);
        assert!((m.p50_us - 10.0).abs() < 0.1 || (m.p50_us - 30.0).abs() < 0.1);
        assert!(m.p99_us >= 30.0);
    }

    #[test]
    fn nothing_recorded_is_none() {
        assert!(LatencyRecorder::new().stats().is_none());
    }
}
