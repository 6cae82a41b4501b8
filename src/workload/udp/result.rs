//! What a UDP stream yields: each end's datagram counts ([`UdpEnd`]) and,
//! once both ends are merged, what the sender pushed against what the
//! receiver got ([`UdpResult`]), per stream, per direction and in sum.

use serde::{Deserialize, Serialize};

use crate::model::{Flow, StreamEnd, TrialResult};
use crate::workload::base::one_way::OneWayDelay;

pub use crate::workload::transport::datagram::counts::{UdpEnd, UdpReceived, KEY};

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
    /// The drops at the receiving socket after the warm-up: on the basis
    /// of `lost_datagrams`. Absent where the receiver could not tell
    /// (runs before 2026-11-27, iperf3 peers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_socket_drops_measured: Option<u64>,
    /// Largest jitter among the streams.
    pub jitter_us: f64,
    /// The receiver used GRO: the kernel then counts a dropped coalesced
    /// buffer (many datagrams) as one drop, so `receiver_socket_drops` is a
    /// lower bound.
    #[serde(default)]
    pub receiver_gro: bool,
    /// What the sender was asked to offer (`-b`, summed over the streams);
    /// absent for `-b max` and in runs before 2026-11-27.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_bits_per_second: Option<f64>,
    /// Count runs (`-n`, `-k`): of `lost_datagrams`, those after the last
    /// datagram that arrived (the tail, which a receiver that does not
    /// know the count cannot see). Absent in timed runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_at_end_datagrams: Option<u64>,
    /// The largest burst a paced sender sent back to back, in seconds of
    /// its rate (`largest_burst_seconds` of the senders, the largest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_largest_burst_seconds: Option<f64>,
    /// Each datagram's delay from the sender's stamp to its arrival, with
    /// the clocks' offset taken out and its bound beside (per stream; a
    /// direction's and the sum's take each figure's worst). Absent without
    /// a clock estimate (agents before 2026-12-07, iperf3 peers) or stamps
    /// on a real-time clock (senders before 2026-12-07).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way: Option<OneWayDelay>,
}

pub use crate::workload::base::OFFER_REACHED_PERCENT;

impl UdpResult {
    /// The sender's rate as a share of what it was asked to offer.
    pub fn percent_of_offer(&self) -> Option<f64> {
        self.offered_bits_per_second
            .filter(|&o| o > 0.0)
            .map(|o| self.sender_bits_per_second * 100.0 / o)
    }
}

impl UdpResult {
    /// One stream: the sender's own count against the receiver's.
    /// `receiver_ahead`: the receiver's clock minus the sender's and its
    /// bound, µs, when the trial has a clock estimate.
    fn of_stream(sender: &StreamEnd, receiver: &StreamEnd, receiver_ahead: Option<(f64, f64)>) -> Option<UdpResult> {
        let (sent, got): (UdpEnd, UdpEnd) = (sender.extras.get(KEY)?, receiver.extras.get(KEY)?);
        let received = got.received.clone().unwrap_or_default();
        let mut r = UdpResult {
            // A sender that is not ours: what it numbered, as the receiver saw.
            sent_datagrams: received.numbered_datagrams.unwrap_or(sent.datagrams),
            received_datagrams: got.datagrams,
            sender_bits_per_second: sender.bits_per_second,
            receiver_bits_per_second: receiver.bits_per_second,
            out_of_order_datagrams: received.out_of_order_datagrams,
            duplicate_datagrams: received.duplicate_datagrams,
            malformed_datagrams: received.malformed_datagrams.saturating_add(received.refused_datagrams),
            receiver_socket_drops: received.socket_drops,
            receiver_socket_drops_measured: received
                .warmup_socket_drops
                .map(|w| received.socket_drops.saturating_sub(w)),
            jitter_us: received.jitter_us,
            receiver_gro: got.segmentation_offload,
            offered_bits_per_second: sent.offered_bits_per_second,
            lost_at_end_datagrams: received.lost_at_end_datagrams,
            sender_largest_burst_seconds: sent.largest_burst_seconds,
            one_way: received
                .transit
                .as_ref()
                .zip(receiver_ahead)
                .map(|(transit, (ahead, bound))| OneWayDelay::of(transit, ahead, bound)),
            ..UdpResult::default()
        };
        r.set_loss();
        Some(r)
    }

    fn set_loss(&mut self) {
        self.lost_datagrams = self.sent_datagrams.saturating_sub(self.received_datagrams);
        self.loss_percent = if self.sent_datagrams > 0 {
            self.lost_datagrams as f64 * 100.0 / self.sent_datagrams as f64
        } else {
            0.0
        };
    }

    /// The sum of several streams; jitter is the largest.
    fn sum<'a>(streams: impl Iterator<Item = &'a UdpResult>) -> Option<UdpResult> {
        let mut sum: Option<UdpResult> = None;
        let mut first = true;
        for u in streams {
            let t = sum.get_or_insert_with(UdpResult::default);
            t.sent_datagrams += u.sent_datagrams;
            t.received_datagrams += u.received_datagrams;
            t.sender_bits_per_second += u.sender_bits_per_second;
            t.receiver_bits_per_second += u.receiver_bits_per_second;
            t.out_of_order_datagrams += u.out_of_order_datagrams;
            t.duplicate_datagrams += u.duplicate_datagrams;
            t.malformed_datagrams += u.malformed_datagrams;
            t.receiver_socket_drops += u.receiver_socket_drops;
            // Measured drops in sum only when every stream told them apart.
            t.receiver_socket_drops_measured = match (
                first,
                t.receiver_socket_drops_measured,
                u.receiver_socket_drops_measured,
            ) {
                (true, _, drops) => drops,
                (false, Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
            t.jitter_us = t.jitter_us.max(u.jitter_us);
            // One-way in sum only when every stream timed it.
            t.one_way = match (first, t.one_way.take(), &u.one_way) {
                (true, _, delay) => delay.clone(),
                (false, Some(a), Some(b)) => OneWayDelay::worst([a, b.clone()].iter()),
                _ => None,
            };
            t.receiver_gro |= u.receiver_gro;
            t.sender_largest_burst_seconds = [t.sender_largest_burst_seconds, u.sender_largest_burst_seconds]
                .into_iter()
                .flatten()
                .reduce(f64::max);
            // The tail in sum only when every stream knew its count.
            t.lost_at_end_datagrams = match (first, t.lost_at_end_datagrams, u.lost_at_end_datagrams) {
                (true, _, tail) => tail,
                (false, Some(a), Some(b)) => Some(a + b),
                _ => None,
            };
            // Offered in sum only when every stream had an offer.
            t.offered_bits_per_second = match (first, t.offered_bits_per_second, u.offered_bits_per_second) {
                (true, _, offer) => offer,
                (false, Some(sum), Some(offer)) => Some(sum + offer),
                _ => None,
            };
            first = false;
        }
        if let Some(t) = sum.as_mut() {
            t.set_loss();
        }
        sum
    }
}

/// Puts the UDP view of a merged trial in place: each stream's sender
/// against its receiver, each direction's total, and the sum.
pub fn summarize(trial: &mut TrialResult) {
    let clock = trial.clock_offset.clone();
    let mut per_stream = Vec::new();
    for s in &mut trial.streams {
        // The agent's clock minus the client's, over the stream's time.
        let agent_ahead = clock
            .as_ref()
            .and_then(|c| crate::probe::clock::offset_within(c, s.receiver.seconds));
        let receiver_ahead = agent_ahead.map(|(ahead, bound)| match s.flow {
            Flow::ClientToAgent => (ahead, bound),
            Flow::AgentToClient => (-ahead, bound),
        });
        if let Some(u) = UdpResult::of_stream(&s.sender, &s.receiver, receiver_ahead) {
            s.extras.set(KEY, &u);
            per_stream.push((s.flow, u));
        }
    }
    let flows = [
        (Flow::ClientToAgent, &mut trial.sum.client_to_agent),
        (Flow::AgentToClient, &mut trial.sum.agent_to_client),
    ];
    for (flow, total) in flows {
        let of_flow = per_stream.iter().filter(|(f, _)| *f == flow).map(|(_, u)| u);
        if let (Some(total), Some(u)) = (total.as_mut(), UdpResult::sum(of_flow)) {
            total.extras.set(KEY, &u);
        }
    }
    if let Some(u) = UdpResult::sum(per_stream.iter().map(|(_, u)| u)) {
        trial.sum.extras.set(KEY, &u);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CpuReport, Party, Role, SideReport};

    fn end(id: u32, role: Role, bytes: u64) -> StreamEnd {
        StreamEnd {
            stream_id: id,
            role,
            bytes,
            seconds: 1.0,
            bits_per_second: bytes as f64 * 8.0,
            ..StreamEnd::default()
        }
    }

    fn side(host: Party, streams: Vec<StreamEnd>) -> SideReport {
        SideReport {
            host,
            streams,
            cpu: CpuReport::default(),
            counters: None,
            overlapped_tests: 0,
            links: Vec::new(),
        }
    }

    #[test]
    fn udp_loss_comes_from_the_senders_own_count() {
        let flows = [(1, Flow::ClientToAgent)];
        let mut sender = end(1, Role::Sender, 100_000);
        sender.extras.set(
            KEY,
            &UdpEnd {
                datagrams: 100,
                ..UdpEnd::default()
            },
        );
        let mut receiver = end(1, Role::Receiver, 90_000);
        // The last ten datagrams never arrived: the receiver cannot know them.
        receiver.extras.set(
            KEY,
            &UdpEnd {
                datagrams: 90,
                received: Some(UdpReceived {
                    socket_drops: 4,
                    ..UdpReceived::default()
                }),
                ..UdpEnd::default()
            },
        );
        let mut t = TrialResult::merge(
            1,
            &flows,
            side(Party::Client, vec![sender]),
            side(Party::Agent, vec![receiver]),
        )
        .unwrap();
        summarize(&mut t);
        let u: UdpResult = t.sum.extras.get(KEY).unwrap();
        assert_eq!(
            (u.sent_datagrams, u.received_datagrams, u.lost_datagrams),
            (100, 90, 10)
        );
        assert!((u.loss_percent - 10.0).abs() < 1e-9);
        assert_eq!(u.receiver_socket_drops, 4);
        let forward: UdpResult = t.sum.client_to_agent.unwrap().extras.get(KEY).unwrap();
        assert_eq!(forward.lost_datagrams, 10);
        assert!(!t.sum.extras.contains("rr"));
        // No clock estimate: no one-way delay.
        assert_eq!(u.one_way, None);
    }

    #[test]
    fn one_way_delays_take_the_agents_clock_out_in_each_direction() {
        use crate::model::ClockOffset;
        use crate::workload::base::one_way::Transit;
        // The agent's clock is 1 ms ahead of the client's (known to 10 µs,
        // drift bound 2 ppm); each direction's datagrams take 100 µs.
        let flows = [(1, Flow::ClientToAgent), (2, Flow::AgentToClient)];
        let transit = |ns: i64| Transit {
            datagrams: 5,
            min_ns: ns,
            p50_ns: ns,
            p90_ns: ns,
            p99_ns: ns,
            max_ns: ns,
        };
        let stream = |id: u32, role: Role, transit_ns: Option<i64>| {
            let mut e = end(id, role, 7_000);
            let udp = UdpEnd {
                datagrams: 5,
                received: transit_ns.map(|ns| UdpReceived {
                    transit: Some(transit(ns)),
                    ..UdpReceived::default()
                }),
                ..UdpEnd::default()
            };
            e.extras.set(KEY, &udp);
            e
        };
        let client = side(
            Party::Client,
            vec![
                stream(1, Role::Sender, None),
                stream(2, Role::Receiver, Some(100_000 - 1_000_000)),
            ],
        );
        let agent = side(
            Party::Agent,
            vec![
                stream(1, Role::Receiver, Some(100_000 + 1_000_000)),
                stream(2, Role::Sender, None),
            ],
        );
        let mut t = TrialResult::merge(1, &flows, client, agent).unwrap();
        t.clock_offset = Some(ClockOffset {
            agent_minus_client_us: Some(1_000.0),
            bound_us: Some(10.0),
            drift_bound_ppm: Some(2.0),
            exchanges: 16,
            ..ClockOffset::default()
        });
        summarize(&mut t);
        for flow in [&t.sum.client_to_agent, &t.sum.agent_to_client] {
            let u: UdpResult = flow.as_ref().unwrap().extras.get(KEY).unwrap();
            let d = u.one_way.unwrap();
            assert!((d.p50_seconds - 100e-6).abs() < 1e-12, "{d:?}");
            // 10 µs, and 2 ppm over half the stream's 1 s.
            assert!((d.clock_bound_seconds - 11e-6).abs() < 1e-12, "{d:?}");
        }
    }
}
