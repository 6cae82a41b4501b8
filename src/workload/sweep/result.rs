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
    /// The spread of the point's batches (per exchange, like the latency):
    /// the fastest is `best_latency_us`, then the median and the slowest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_latency_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_latency_us: Option<f64>,
    /// (max - min) / median of the batches, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_percent: Option<f64>,
    /// How many times the point ran (header, warm-up exchange, batches):
    /// once per pass, and a wide point again while the sweep's budget lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<u32>,
    /// Set when the spread stayed above `points::WIDE_SPREAD_PERCENT`: the
    /// point's figure is not to be trusted on its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wide: bool,
    /// The fastest batch of each pass over the sizes, in pass order (same
    /// unit as `best_latency_us`, whose value is the lowest of these or of
    /// an extra round). Empty in runs stored before passes existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pass_latency_us: Vec<f64>,
    /// Both ends on one host, nobody chose cores, two passes or more: the
    /// passes took turns between two placements (`together` on one core,
    /// and where the `scheduler` put them), and this point's batches are
    /// those of the faster, named here; each placement's fastest batch is
    /// beside it (same unit as `best_latency_us`; absent when that
    /// placement timed nothing). Absent in runs before 2026-11-28's second
    /// part and when the sweep did not take turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub together_latency_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_latency_us: Option<f64>,
}

/// What a sweep found, from its best figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepSummary {
    /// The smallest size, and the small-message latency: the median of
    /// the best latencies of the smallest sizes (up to
    /// [`super::points::SMALL_SIZES`] of them within 8 times the
    /// smallest, to `small_message_largest_size_bytes`), not one noisy
    /// point (runs before 2026-11-28: the smallest size's alone).
    pub small_message_size_bytes: u64,
    pub small_message_latency_us: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub small_message_largest_size_bytes: Option<u64>,
    pub peak_bits_per_second: f64,
    pub peak_size_bytes: u64,
    /// Smallest size reaching half of the peak (n-1/2).
    pub half_peak_size_bytes: u64,
    /// Smallest size reaching 90% of the peak.
    pub ninety_percent_peak_size_bytes: u64,
    /// Peak as a share of `--link-speed`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_line_rate_percent: Option<f64>,
    /// Places where the curve falls and every size of the larger group
    /// shows it (a step that repeats is the path's, not noise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<SweepStep>,
}

/// A fall of the best bandwidth between two neighbouring groups of sizes
/// (a power of two and its perturbations), seen by every size of the
/// larger group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepStep {
    /// The group before the step: its size with the lowest bandwidth.
    pub from_size_bytes: u64,
    pub from_bits_per_second: f64,
    /// The group after it: its smallest and largest size, and its best
    /// bandwidth.
    pub to_min_size_bytes: u64,
    pub to_max_size_bytes: u64,
    pub to_bits_per_second: f64,
    /// How far the bandwidth fell, in percent of `from_bits_per_second`.
    pub fall_percent: f64,
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
    /// Where the link speed came from: `option` (--link-speed), `nic`
    /// (the slower end's NIC), `qdisc` (a shaper on an end), `lab` (a lab
    /// router's shaper on the path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_speed_source: Option<String>,
    /// That shaper's token bucket, when a shaper is the line rate: a
    /// message that fits passes at the hosts' speed, above the line rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shaper_burst_bytes: Option<u64>,
    /// Where that shaper sits, when beyond both ends (`lab router ... eth1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shaper_name: Option<String>,
    /// Sizes asked for that were not run (time limit, Ctrl-C, datagram limit).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped_sizes_bytes: Vec<u64>,
    /// Why sizes were skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub points: Vec<SweepPoint>,
    pub summary: SweepSummary,
    /// Where the two ends ran when the sweep chose it (both ends on one
    /// host, no -A/--remote-affinity): one core each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    /// Both ends on one host: what a wake-up on another core costs it
    /// (a 1 KiB ping-pong between two threads on one core and on two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_core_wakeup: Option<crate::workload::wakeup::WakeupCost>,
    /// Passes made over the sizes (absent in runs stored before passes
    /// existed: one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub passes: Option<u32>,
}

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}
