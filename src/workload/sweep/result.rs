//! What a sweep yields: every message size's figures and the summary.

use serde::{Deserialize, Serialize};

/// The key of the sweep in the stream end that drove it.
pub const KEY: &str = "sweep";

/// One message size of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    pub size_bytes: u64,
    /// Timed exchanges (ping-pong round trips, or messages when streaming).
    pub exchanges: u64,
    /// Timed batches the exchanges were split into; `best` is the best batch.
    pub batches: u32,
    /// Wall time of the point.
    pub seconds: f64,
    /// Ping-pong: half the round trip; streaming: time per message.
    pub best_latency_us: f64,
    pub mean_latency_us: f64,
    pub best_bits_per_second: f64,
    pub mean_bits_per_second: f64,
    /// UDP ping-pong exchanges whose echo never came (excluded from the timing).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lost: u64,
}

/// What a sweep found, from its best figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepSummary {
    /// Best latency of the smallest size.
    pub small_message_size_bytes: u64,
    pub small_message_latency_us: f64,
    pub peak_bits_per_second: f64,
    pub peak_size_bytes: u64,
    /// Smallest size reaching half of the peak (n-1/2).
    pub half_peak_size_bytes: u64,
    /// Smallest size reaching 90% of the peak.
    pub ninety_percent_peak_size_bytes: u64,
    /// Peak as a share of `--link-speed`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_line_rate_percent: Option<f64>,
}

/// A whole sweep: how it ran, every point, and the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    /// `ping_pong` or `stream`.
    pub mode: String,
    /// `tcp` or `udp`.
    pub transport: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_speed_bits_per_second: Option<f64>,
    /// Sizes asked for that were not run (time limit, Ctrl-C, datagram limit).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_sizes_bytes: Vec<u64>,
    /// Why sizes were skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub points: Vec<SweepPoint>,
    pub summary: SweepSummary,
}

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}
