//! One trial with both sides merged: streams with both ends, sums per
//! flow, CPU and counters of both ends, line-rate share and verdict.

use serde::{Deserialize, Serialize};

use super::counters::BothCounters;
use super::outcomes::{RrResult, UdpResult};
use super::side::{CpuReport, Flow, Host, Role, SideReport, StreamEnd};

/// Totals of one role across streams.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Total {
    pub bytes: u64,
    /// Longest elapsed time among the streams.
    pub seconds: f64,
    pub bits_per_second: f64,
}

/// One stream with both of its ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    pub stream_id: u32,
    pub flow: Flow,
    pub sender: StreamEnd,
    pub receiver: StreamEnd,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpResult>,
}

/// The sum over streams, overall and per flow direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sum {
    pub sender: Total,
    pub receiver: Total,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_to_agent: Option<FlowTotal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_to_client: Option<FlowTotal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rr: Option<RrResult>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowTotal {
    pub sender: Total,
    pub receiver: Total,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpResult>,
}

/// CPU on both ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BothCpu {
    pub client: CpuReport,
    pub agent: CpuReport,
}

/// One timed execution, both sides merged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialResult {
    pub trial: u32,
    pub streams: Vec<StreamResult>,
    pub sum: Sum,
    pub cpu: BothCpu,
    /// Counters on both ends over the trial.
    #[serde(default)]
    pub counters: BothCounters,
    /// The best throughput as a share of what the link can carry, when
    /// the link speed is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_rate: Option<LineRateShare>,
    /// Where the bottleneck was, in one line, from the measurements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Other tests the agent ran during part of this trial; 0 means the
    /// agent was not shared (see `nicbench serve --max-concurrent`).
    #[serde(default)]
    pub overlapped_tests: u32,
}

/// Errors when the two sides' reports cannot be merged.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MergeError {
    #[error("stream {0} is missing its {1:?} end in the reports")]
    MissingEnd(u32, Role),
    #[error("stream {0} was reported twice by the same role")]
    Duplicate(u32),
}

fn total<'a>(ends: impl Iterator<Item = &'a StreamEnd>) -> Total {
    let mut t = Total::default();
    for e in ends {
        t.bytes += e.bytes;
        t.seconds = t.seconds.max(e.seconds);
        t.bits_per_second += e.bits_per_second;
    }
    t
}

impl UdpResult {
    /// One stream: the sender's own count against the receiver's.
    fn of_stream(sender: &StreamEnd, receiver: &StreamEnd) -> Option<UdpResult> {
        let (sent, got) = (sender.udp.as_ref()?, receiver.udp.as_ref()?);
        let received = got.received.clone().unwrap_or_default();
        let mut r = UdpResult {
            sent_datagrams: sent.datagrams,
            received_datagrams: got.datagrams,
            sender_bits_per_second: sender.bits_per_second,
            receiver_bits_per_second: receiver.bits_per_second,
            out_of_order_datagrams: received.out_of_order_datagrams,
            duplicate_datagrams: received.duplicate_datagrams,
            malformed_datagrams: received.malformed_datagrams + received.refused_datagrams,
            receiver_socket_drops: received.socket_drops,
            jitter_us: received.jitter_us,
            receiver_gro: got.segmentation_offload,
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
            t.jitter_us = t.jitter_us.max(u.jitter_us);
            t.receiver_gro |= u.receiver_gro;
        }
        if let Some(t) = sum.as_mut() {
            t.set_loss();
        }
        sum
    }
}

impl RrResult {
    /// Totals of the requesters' ends; latencies merged into one histogram.
    fn sum<'a>(requesters: impl Iterator<Item = &'a StreamEnd>) -> Option<RrResult> {
        let mut sum: Option<RrResult> = None;
        let mut latencies = Vec::new();
        for rr in requesters.filter_map(|e| e.rr.as_ref()) {
            let t = sum.get_or_insert_with(RrResult::default);
            t.transactions += rr.transactions;
            t.transactions_per_second += rr.transactions_per_second;
            t.lost_transactions += rr.lost_transactions;
            latencies.extend(rr.latency.as_ref());
        }
        if let Some(t) = sum.as_mut() {
            t.latency = (!latencies.is_empty()).then(|| crate::model::latency::merge(&latencies));
        }
        sum
    }
}

impl TrialResult {
    /// Merges the two sides' reports: each stream's sender end comes from
    /// the host that sent it, its receiver end from the other.
    pub fn merge(
        trial: u32,
        flows: &[(u32, Flow)],
        client: SideReport,
        agent: SideReport,
    ) -> Result<TrialResult, MergeError> {
        let mut streams = Vec::with_capacity(flows.len());
        let mut pool: Vec<(Host, StreamEnd)> = client
            .streams
            .into_iter()
            .map(|e| (Host::Client, e))
            .chain(agent.streams.into_iter().map(|e| (Host::Agent, e)))
            .collect();
        for &(id, flow) in flows {
            let mut take = |host: Host, role: Role| -> Result<StreamEnd, MergeError> {
                let mut found = pool
                    .iter()
                    .enumerate()
                    .filter(|(_, (h, e))| *h == host && e.stream_id == id && e.role == role)
                    .map(|(i, _)| i);
                let index = found.next().ok_or(MergeError::MissingEnd(id, role))?;
                if found.next().is_some() {
                    return Err(MergeError::Duplicate(id));
                }
                Ok(pool.swap_remove(index).1)
            };
            let sender = take(flow.sender(), Role::Sender)?;
            let receiver = take(flow.receiver(), Role::Receiver)?;
            streams.push(StreamResult {
                stream_id: id,
                flow,
                udp: UdpResult::of_stream(&sender, &receiver),
                sender,
                receiver,
            });
        }
        let flow_total = |flow: Flow| {
            let of_flow = || streams.iter().filter(move |s| s.flow == flow);
            (of_flow().count() > 0).then(|| FlowTotal {
                sender: total(of_flow().map(|s| &s.sender)),
                receiver: total(of_flow().map(|s| &s.receiver)),
                udp: UdpResult::sum(of_flow().filter_map(|s| s.udp.as_ref())),
            })
        };
        let sum = Sum {
            sender: total(streams.iter().map(|s| &s.sender)),
            receiver: total(streams.iter().map(|s| &s.receiver)),
            client_to_agent: flow_total(Flow::ClientToAgent),
            agent_to_client: flow_total(Flow::AgentToClient),
            udp: UdpResult::sum(streams.iter().filter_map(|s| s.udp.as_ref())),
            rr: RrResult::sum(streams.iter().map(|s| &s.sender)),
        };
        Ok(TrialResult {
            trial,
            overlapped_tests: agent.overlapped_tests,
            streams,
            sum,
            cpu: BothCpu {
                client: client.cpu,
                agent: agent.cpu,
            },
            counters: BothCounters {
                client: client.counters,
                agent: agent.counters,
            },
            line_rate: None,
            verdict: None,
        })
    }
}

/// Measured throughput against the line-rate model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LineRateShare {
    pub link_bits_per_second: u64,
    /// `option` (--link-speed), `nic` (the slower end's link speed) or
    /// `qdisc` (a tbf shaper on an end's interface, slower than its link).
    pub link_speed_source: String,
    /// Ethernet frame and payload per frame the model assumed.
    pub frame_bytes: u64,
    pub payload_bytes: u64,
    /// The model's goodput: `sustained_goodput_bits_per_second` plus
    /// `burst_allowance_bits_per_second` when a shaper's bucket is counted.
    pub theoretical_goodput_bits_per_second: f64,
    /// Receiver throughput of the busier direction.
    pub measured_bits_per_second: f64,
    pub percent_of_theoretical_goodput: f64,
    /// What each packet costs against the link speed besides the IP packet:
    /// `ethernet_wire` (a PHY's speed: Ethernet header, FCS, preamble/SFD,
    /// interframe gap, 38 B), `qdisc` (a shaper's rate: what it counts, the
    /// Ethernet header, 14 B, plus its configured overhead) or `option`
    /// (`--link-overhead`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead_model: Option<String>,
    /// Bytes counted per full-size packet besides the IP packet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead_bytes_per_frame: Option<u64>,
    /// Bytes a full-size packet costs against the link speed in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted_bytes_per_frame: Option<u64>,
    /// Goodput at the link speed alone, without a shaper's initial burst.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sustained_goodput_bits_per_second: Option<f64>,
    /// The shaper's token bucket (tbf), which lets that much through above
    /// the rate at the start of a test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_bytes: Option<u64>,
    /// `included` (the bucket's bytes over the measured time are added to
    /// the theoretical goodput), `warmup_excluded` (`--omit` > 0: a shaper's
    /// bucket empties during the warm-up) or `unknown` (no warm-up, and the
    /// speed is not a shaper nicbench can read, e.g. `--link-speed`: a
    /// bottleneck elsewhere may let a burst through the model does not
    /// know). Absent for a NIC's speed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_handling: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_allowance_bits_per_second: Option<f64>,
    /// Why the measurement is above 100% of the model, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above_model: Option<String>,
}

/// The bottleneck verdict: a kind for programs, a line for people.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// `cpu_bound`, `cpu_starved`, `cgroup_throttled`, `link_bound`,
    /// `model_exceeded`, `udp_loss`, `path_loss`, `socket_buffer_drops`, `nic_drops`,
    /// `retransmitting` or `none`.
    pub kind: String,
    pub summary: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{SocketBuffers, UdpEnd, UdpReceived};

    fn end(id: u32, role: Role, bytes: u64) -> StreamEnd {
        StreamEnd {
            stream_id: id,
            role,
            bytes,
            seconds: 1.0,
            bits_per_second: bytes as f64 * 8.0,
            omitted_bytes: 0,
            socket: SocketBuffers::default(),
            tcp_info: None,
            intervals: vec![],
            error: None,
            sweep: None,
            udp: None,
            rr: None,
        }
    }

    fn side(host: Host, streams: Vec<StreamEnd>) -> SideReport {
        SideReport {
            host,
            streams,
            cpu: CpuReport::default(),
            counters: None,
            overlapped_tests: 0,
        }
    }

    #[test]
    fn merge_pairs_sender_and_receiver_by_flow() {
        let flows = [(1, Flow::ClientToAgent), (2, Flow::AgentToClient)];
        let client = side(
            Host::Client,
            vec![end(1, Role::Sender, 100), end(2, Role::Receiver, 50)],
        );
        let agent = side(Host::Agent, vec![end(2, Role::Sender, 50), end(1, Role::Receiver, 100)]);
        let t = TrialResult::merge(1, &flows, client, agent).unwrap();
        assert_eq!(t.sum.sender.bytes, 150);
        assert_eq!(t.sum.receiver.bytes, 150);
        assert_eq!(t.sum.client_to_agent.as_ref().unwrap().receiver.bytes, 100);
        assert_eq!(t.sum.agent_to_client.as_ref().unwrap().sender.bytes, 50);
        assert_eq!(t.streams[1].sender.bytes, 50);
    }

    #[test]
    fn udp_loss_comes_from_the_senders_own_count() {
        let flows = [(1, Flow::ClientToAgent)];
        let mut sender = end(1, Role::Sender, 100_000);
        sender.udp = Some(UdpEnd {
            datagrams: 100,
            ..UdpEnd::default()
        });
        let mut receiver = end(1, Role::Receiver, 90_000);
        // The last ten datagrams never arrived: the receiver cannot know them.
        receiver.udp = Some(UdpEnd {
            datagrams: 90,
            received: Some(UdpReceived {
                socket_drops: 4,
                ..UdpReceived::default()
            }),
            ..UdpEnd::default()
        });
        let t = TrialResult::merge(
            1,
            &flows,
            side(Host::Client, vec![sender]),
            side(Host::Agent, vec![receiver]),
        )
        .unwrap();
        let u = t.sum.udp.unwrap();
        assert_eq!(
            (u.sent_datagrams, u.received_datagrams, u.lost_datagrams),
            (100, 90, 10)
        );
        assert!((u.loss_percent - 10.0).abs() < 1e-9);
        assert_eq!(u.receiver_socket_drops, 4);
        assert_eq!(t.sum.client_to_agent.unwrap().udp.unwrap().lost_datagrams, 10);
        assert!(t.sum.rr.is_none());
    }

    #[test]
    fn merge_reports_a_missing_end() {
        let flows = [(1, Flow::ClientToAgent)];
        let client = side(Host::Client, vec![end(1, Role::Sender, 100)]);
        let agent = side(Host::Agent, vec![]);
        assert_eq!(
            TrialResult::merge(1, &flows, client, agent).unwrap_err(),
            MergeError::MissingEnd(1, Role::Receiver)
        );
    }
}
