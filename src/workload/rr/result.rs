//! What a request/response test yields: each flow end's transactions and
//! latency ([`RrEnd`]) and their totals with one merged latency
//! distribution ([`RrResult`]).

use serde::{Deserialize, Serialize};

use crate::model::latency::{self, LatencyStats};
use crate::model::{Role, TrialResult};
use crate::workload::wakeup::WakeupCost;

/// The key of the request/response part in stream ends and sums.
pub const KEY: &str = "rr";

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
    /// Most requests outstanding at once (requester; `--burst`), warm-up
    /// included. Absent when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_in_flight: u64,
    /// Polls that found no data while spinning (`--spin`), warm-up included.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spin_empty_polls: u64,
    /// The end busy-polled its socket (`--spin`): its thread is on a CPU
    /// the whole time by design. Absent when it blocked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spinning: bool,
    /// TCP_QUICKACK requests the kernel took (`--quickack`), warm-up included.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub quickacks: u64,
    /// Round-trip latency (requester only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyStats>,
    /// Both ends on one host and nobody chose cores (the first requester
    /// only): how the ends were placed, and what a wake-up on another core
    /// costs this host. A round trip with the ends on two cores pays two,
    /// so where the scheduler put them can move the latency several times
    /// over from one run to the next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_core_wakeup: Option<WakeupCost>,
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
    /// A shaper on the path (a lab router's or an end's tbf) that carried
    /// these round trips faster than a wire of its rate would have.
    /// Absent without a shaper, or when its bucket could not have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shaper_bucket: Option<ShaperBucket>,
    /// The first requester's `placement` and `cross_core_wakeup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_core_wakeup: Option<WakeupCost>,
}

/// How a shaper's token bucket shortened round trips: it refills while
/// its direction idles (in a ping-pong, half the time) and passes what it
/// holds at the hosts' speed, where a wire of its rate serializes every
/// message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShaperBucket {
    pub link_bits_per_second: f64,
    /// `lab` (a lab router's tbf) or `qdisc` (a tbf on an end).
    pub link_speed_source: String,
    /// Where it sits, when on neither end: `lab router demo-r eth1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shaper_name: Option<String>,
    /// The token bucket, when the shaper's is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_bytes: Option<u64>,
    /// What a wire of `link_bits_per_second` needs at least to carry one
    /// request and its response (headers and framing counted, ACKs not).
    pub wire_round_trip_us: f64,
    /// The median round trip was shorter than `wire_round_trip_us`: no
    /// wire of that rate could have carried it.
    pub faster_than_wire: bool,
}

/// Puts the totals of a merged trial in place: the requesters' ends
/// summed, their latencies merged into one histogram.
pub fn summarize(trial: &mut TrialResult) {
    let requesters = trial
        .streams
        .iter()
        .map(|s| &s.sender)
        .filter(|e| e.role == Role::Sender);
    let ends: Vec<RrEnd> = requesters.filter_map(|e| e.extras.get(KEY)).collect();
    if ends.is_empty() {
        return;
    }
    let latencies: Vec<&LatencyStats> = ends.iter().filter_map(|e| e.latency.as_ref()).collect();
    let total = RrResult {
        transactions: ends.iter().map(|e| e.transactions).sum(),
        transactions_per_second: ends.iter().map(|e| e.transactions_per_second).sum(),
        lost_transactions: ends.iter().map(|e| e.lost_transactions).sum(),
        latency: (!latencies.is_empty()).then(|| latency::merge(&latencies)),
        shaper_bucket: None,
        placement: ends.iter().find_map(|e| e.placement.clone()),
        cross_core_wakeup: ends.iter().find_map(|e| e.cross_core_wakeup.clone()),
    };
    trial.sum.extras.set(KEY, &total);
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
