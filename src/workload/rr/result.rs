//! What a request/response test yields: each flow end's transactions and
//! latency ([`RrEnd`]) and their totals with one merged latency
//! distribution ([`RrResult`]).

use serde::{Deserialize, Serialize};

use crate::model::latency::{self, LatencyStats};
use crate::model::{Role, TrialResult};
use crate::workload::base::one_way::{OneWayDelay, Transit};
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
    /// `--one-way`, requester: each request's transit (the responder's
    /// stamp minus the requester's send time) and each response's (the
    /// requester's arrival time minus the stamp), on two clocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_transit: Option<Transit>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_transit: Option<Transit>,
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
    /// `--one-way`: the request's leg (client to agent) and the response's
    /// (agent to client), the clocks' offset taken out, each figure the
    /// worst of the flows'. Absent without a clock estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way_request: Option<OneWayDelay>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way_response: Option<OneWayDelay>,
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
    // The agent's clock minus the client's, over the test. The request's
    // receiver is the agent, the response's the client.
    let seconds = trial.streams.first().map_or(0.0, |s| s.sender.seconds);
    let agent_ahead = trial
        .clock_offset
        .as_ref()
        .and_then(|c| crate::probe::clock::offset_within(c, seconds));
    let legs = |transit: fn(&RrEnd) -> Option<&Transit>, sign: f64| {
        let (ahead, bound) = agent_ahead?;
        let each: Vec<OneWayDelay> = ends
            .iter()
            .map(|e| transit(e).map(|t| OneWayDelay::of(t, sign * ahead, bound)))
            .collect::<Option<_>>()?;
        OneWayDelay::worst(each.iter())
    };
    let total = RrResult {
        one_way_request: legs(|e| e.request_transit.as_ref(), 1.0),
        one_way_response: legs(|e| e.response_transit.as_ref(), -1.0),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ClockOffset, CpuReport, Flow, Party, SideReport, StreamEnd};

    fn side(host: Party, role: Role, rr: RrEnd) -> SideReport {
        let mut end = StreamEnd {
            stream_id: 1,
            role,
            seconds: 1.0,
            ..StreamEnd::default()
        };
        end.extras.set(KEY, &rr);
        SideReport {
            host,
            streams: vec![end],
            cpu: CpuReport::default(),
            counters: None,
            overlapped_tests: 0,
            links: Vec::new(),
        }
    }

    #[test]
    fn each_legs_offset_is_taken_out_with_its_own_sign() {
        // The agent's clock is 1 ms ahead; each leg takes 100 µs: the
        // request reads 1.1 ms on the two clocks, the response -0.9 ms.
        let transit = |ns: i64| Transit {
            datagrams: 3,
            min_ns: ns,
            p50_ns: ns,
            p90_ns: ns,
            p99_ns: ns,
            max_ns: ns,
        };
        let requester = RrEnd {
            transactions: 3,
            request_transit: Some(transit(1_100_000)),
            response_transit: Some(transit(-900_000)),
            ..RrEnd::default()
        };
        let responder = RrEnd {
            transactions: 3,
            ..RrEnd::default()
        };
        let mut t = TrialResult::merge(
            1,
            &[(1, Flow::ClientToAgent)],
            side(Party::Client, Role::Sender, requester),
            side(Party::Agent, Role::Receiver, responder),
        )
        .unwrap();
        summarize(&mut t);
        let without: RrResult = t.sum.extras.get(KEY).unwrap();
        assert_eq!((without.one_way_request, without.one_way_response), (None, None));
        t.clock_offset = Some(ClockOffset {
            agent_minus_client_us: Some(1_000.0),
            bound_us: Some(5.0),
            drift_bound_ppm: Some(4.0),
            exchanges: 16,
            ..ClockOffset::default()
        });
        summarize(&mut t);
        let rr: RrResult = t.sum.extras.get(KEY).unwrap();
        for leg in [rr.one_way_request.unwrap(), rr.one_way_response.unwrap()] {
            assert!((leg.p50_seconds - 100e-6).abs() < 1e-12, "{leg:?}");
            // 5 µs, and 4 ppm over half the test's 1 s.
            assert!((leg.clock_bound_seconds - 7e-6).abs() < 1e-12, "{leg:?}");
            assert_eq!(leg.samples, 3);
        }
    }
}
