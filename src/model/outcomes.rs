//! Workload-specific result parts (UDP datagram counts, request/response
//! transactions, sweep points).

use serde::{Deserialize, Serialize};

use super::latency::LatencyStats;
use super::side::is_zero;

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

/// What one end of a UDP stream counted. Counts are after the warm-up:
/// every datagram carries a flag saying whether it was sent during it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpEnd {
    /// Payload bytes per datagram.
    pub datagram_bytes: u64,
    /// Datagrams sent (sender) or distinct datagrams received (receiver).
    pub datagrams: u64,
    /// Datagrams sent or received during the warm-up, not in `datagrams`.
    pub warmup_datagrams: u64,
    /// Datagrams per sendmmsg/recvmmsg call, on average.
    pub datagrams_per_syscall: f64,
    /// UDP GSO (sender) or GRO (receiver) was in use.
    pub segmentation_offload: bool,
    /// The asked rate; None for `-b max`. Sender only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_bits_per_second: Option<f64>,
    /// Sends the kernel refused (ENOBUFS, ECONNREFUSED), counted and skipped.
    #[serde(default)]
    pub send_errors: u64,
    /// What only the receiver knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<UdpReceived>,
}

/// The receiver's own counts of a UDP stream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpReceived {
    pub duplicate_datagrams: u64,
    /// Datagrams that arrived after one with a higher sequence number.
    pub out_of_order_datagrams: u64,
    /// Datagrams on the stream's socket that were not ours (bad magic,
    /// wrong stream, too short), counted and ignored.
    pub malformed_datagrams: u64,
    /// Datagrams refused while the stream registered (a stranger's
    /// address or a wrong token); after that the kernel filters strangers.
    pub refused_datagrams: u64,
    /// RFC 3550 interarrival jitter at the end of the stream.
    pub jitter_us: f64,
    /// Datagrams the receiving host dropped at this socket because its
    /// receive buffer was full (/proc/net/udp `drops`), warm-up included.
    pub socket_drops: u64,
}

/// Request/response counts of one end of a flow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RrEnd {
    /// Transactions completed (requester) or answered (responder) after the warm-up.
    pub transactions: u64,
    pub transactions_per_second: f64,
    /// Transactions during the warm-up, not in `transactions`.
    #[serde(default)]
    pub warmup_transactions: u64,
    /// UDP requests without a response within the timeout (requester only).
    #[serde(default)]
    pub lost_transactions: u64,
    /// Responses that came after their request was given up, or twice.
    #[serde(default)]
    pub late_responses: u64,
    /// TCP connections opened (`--crr`: one per transaction).
    #[serde(default)]
    pub connections: u64,
    /// Round-trip latency (requester only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyStats>,
}

/// A UDP stream (or a sum of them) seen from both ends: what the sender
/// pushed, what the receiver got, and what was lost where.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpResult {
    pub sent_datagrams: u64,
    pub received_datagrams: u64,
    /// Sent minus received, from the sender's own count (sent over the
    /// control connection), so a lost last datagram still counts.
    pub lost_datagrams: u64,
    pub loss_percent: f64,
    pub sender_bits_per_second: f64,
    pub receiver_bits_per_second: f64,
    pub out_of_order_datagrams: u64,
    pub duplicate_datagrams: u64,
    /// Foreign or malformed datagrams the receiver counted and ignored
    /// (refused while registering, or not ours on the stream's socket).
    pub malformed_datagrams: u64,
    /// Drops at the receiving socket (its buffer was full): lost in the
    /// receiving host, not on the wire. Warm-up included.
    pub receiver_socket_drops: u64,
    /// Largest jitter among the streams.
    pub jitter_us: f64,
    /// The receiver used GRO: the kernel then counts a dropped coalesced
    /// buffer (many datagrams) as one drop, so `receiver_socket_drops` is a
    /// lower bound.
    #[serde(default)]
    pub receiver_gro: bool,
}

/// Request/response totals over the flows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RrResult {
    pub transactions: u64,
    pub transactions_per_second: f64,
    pub lost_transactions: u64,
    /// All flows' latencies in one distribution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyStats>,
}
