//! One trial with both sides merged: streams with both ends, sums per
//! flow, CPU and counters of both ends, line-rate share and verdict.

use serde::{Deserialize, Serialize};

use super::counters::BothCounters;
use super::extras::Extras;
use super::side::{CpuReport, Flow, Party, Role, SideReport, StreamEnd};
use super::verdict::Verdict;

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
    /// The workload's view of the stream with both ends (`udp`).
    #[serde(flatten)]
    pub extras: Extras,
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
    /// The workload's totals over every stream (`udp`, `rr`).
    #[serde(flatten)]
    pub extras: Extras,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowTotal {
    pub sender: Total,
    pub receiver: Total,
    /// The workload's totals over this direction's streams (`udp`).
    #[serde(flatten)]
    pub extras: Extras,
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
    /// Present when the trial was cut short (Ctrl-C on the client, SIGTERM
    /// on the agent): its figures cover only the part that ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruption: Option<Interruption>,
    /// With `--links`: each link's figures, the aggregate and the scaling
    /// efficiency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<super::multilink::MultilinkSummary>,
    /// In a lab, what the router's shaper on the path did during the
    /// trial: its counters after the trial less those before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_shaper: Option<PathShaperCounters>,
    /// In a lab, the router's shaper on the way back to the busier
    /// direction's sender, when that egress is shaped: it carries the
    /// ACKs (and the other direction's data), and a slow one holds the
    /// sender back however fast the way there is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_shaper: Option<PathShaperCounters>,
    /// An MPTCP stream over several paths: each path's figures and link,
    /// and their summed goodput (its line rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<super::PathsSummary>,
    /// The agent's clock against the client's over this trial, from the
    /// clock exchanges before and after it (docs/CLOCKS.md); absent when
    /// the agent offers none (an older release, another tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset: Option<ClockOffset>,
}

/// The agent's CLOCK_REALTIME against the client's at the middle of a trial,
/// estimated from timestamped exchanges over the control connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClockOffset {
    /// Agent minus client, µs; absent when the exchanges fit no offset
    /// (`problem` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_minus_client_us: Option<f64>,
    /// The true offset lies within the figure plus or minus this, µs,
    /// however the path's delay splits between its directions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_us: Option<f64>,
    /// The agent's clock rate against the client's, ppm (positive: the
    /// agent's runs fast), when the exchanges narrowed it below the
    /// kernel's 500 ppm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_ppm: Option<f64>,
    /// The drift's bound, ppm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_bound_ppm: Option<f64>,
    /// Exchanges used, before and after the trial together.
    pub exchanges: u32,
    /// Exchanges refused as impossible (a clock went back during one).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused: u32,
    /// Why there is no figure, in words: a clock stepped while the
    /// exchanges ran, or none could be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// Both ends read one kernel's clock (their boot ids are equal: one
    /// host, or network namespaces of one, as in the lab): the offset is 0
    /// exactly, and one-way figures use that rather than the estimate,
    /// which is still recorded above. Absent when false and before
    /// 2026-12-07.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub one_clock: bool,
}

impl ClockOffset {
    /// This agent's clock against another agent's (`sender`), both
    /// measured against the client's: the one figure a receiver's one-way
    /// delay needs when an agent, not the client, sent. The offsets
    /// subtract, their bounds add; one clock only when both read the
    /// client's kernel.
    pub fn against(&self, sender: &ClockOffset) -> ClockOffset {
        let both = |a: Option<f64>, b: Option<f64>, f: fn(f64, f64) -> f64| a.zip(b).map(|(a, b)| f(a, b));
        let difference = both(self.agent_minus_client_us, sender.agent_minus_client_us, |a, b| a - b);
        let problem = match (&self.problem, &sender.problem) {
            (Some(own), _) => Some(own.clone()),
            (None, Some(theirs)) => Some(format!("the sending agent's clock: {theirs}")),
            (None, None) if difference.is_none() => Some("the sending agent's clock fits no offset".into()),
            (None, None) => None,
        };
        ClockOffset {
            agent_minus_client_us: difference,
            bound_us: both(self.bound_us, sender.bound_us, |a, b| a + b).filter(|_| difference.is_some()),
            drift_ppm: both(self.drift_ppm, sender.drift_ppm, |a, b| a - b),
            drift_bound_ppm: both(self.drift_bound_ppm, sender.drift_bound_ppm, |a, b| a + b),
            exchanges: self.exchanges + sender.exchanges,
            refused: self.refused + sender.refused,
            problem,
            one_clock: self.one_clock && sender.one_clock,
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A shaper between the ends (a lab router's tbf toward the receiver of the
/// busier direction) over one trial, warm-up included.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathShaperCounters {
    /// Where it sits: `lab router demo-r eth1`.
    pub name: String,
    /// Its rate, as configured.
    pub bits_per_second: u64,
    /// What it let through: frames as it counts them (with their Ethernet
    /// header), and their number.
    pub sent_bytes: u64,
    pub sent_packets: u64,
    /// Packets that arrived to a full queue and were thrown away: the
    /// traffic offered to the link was more than it carried.
    pub dropped_packets: u64,
    /// Times a packet waited for tokens: the link was holding traffic back.
    pub overlimits: u64,
    /// How long its queue holds at its rate (the lab's `--queue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_seconds: Option<f64>,
}

/// How a trial was cut short.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interruption {
    /// The process that stopped it (`client` or `agent`).
    pub by: Party,
    /// Why, in words, e.g. "SIGINT (Ctrl-C) on the client".
    pub reason: String,
    /// How long the trial really ran, warm-up included.
    pub elapsed_seconds: f64,
    /// How long it was to run, warm-up included; absent for a byte-count
    /// (`-n`) test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planned_seconds: Option<f64>,
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
        let mut pool: Vec<(Party, StreamEnd)> = client
            .streams
            .into_iter()
            .map(|e| (Party::Client, e))
            .chain(agent.streams.into_iter().map(|e| (Party::Agent, e)))
            .collect();
        for &(id, flow) in flows {
            let mut take = |host: Party, role: Role| -> Result<StreamEnd, MergeError> {
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
                sender,
                receiver,
                extras: Extras::default(),
            });
        }
        let flow_total = |flow: Flow| {
            let of_flow = || streams.iter().filter(move |s| s.flow == flow);
            (of_flow().count() > 0).then(|| FlowTotal {
                sender: total(of_flow().map(|s| &s.sender)),
                receiver: total(of_flow().map(|s| &s.receiver)),
                extras: Extras::default(),
            })
        };
        let sum = Sum {
            sender: total(streams.iter().map(|s| &s.sender)),
            receiver: total(streams.iter().map(|s| &s.receiver)),
            client_to_agent: flow_total(Flow::ClientToAgent),
            agent_to_client: flow_total(Flow::AgentToClient),
            extras: Extras::default(),
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
            interruption: None,
            links: None,
            path_shaper: None,
            return_shaper: None,
            paths: None,
            clock_offset: None,
        })
    }
}

/// The link the line-rate model assumed, as a workload sees it
/// (`VerdictQuestions::note_link` of the workloads).
#[derive(Debug, Clone, PartialEq)]
pub struct LinkUsed {
    pub bits_per_second: f64,
    /// `option`, `nic`, `qdisc` (a shaper on an end) or `lab` (a lab router's).
    pub source: &'static str,
    /// A shaper's token bucket: what it lets through at the hosts' speed.
    pub burst_bytes: Option<u64>,
    /// Where a shaper beyond both ends sits.
    pub shaper_name: Option<String>,
    /// What each packet costs against `bits_per_second` besides itself.
    pub framing: crate::linerate::Framing,
    /// The smaller end's MTU, and whether the test ran over IPv6: with the
    /// framing, what a message of a given size costs on the link.
    pub mtu_bytes: u64,
    pub ipv6: bool,
}

/// Measured throughput against the line-rate model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LineRateShare {
    pub link_bits_per_second: u64,
    /// `option` (--link-speed), `nic` (the slower end's link speed),
    /// `qdisc` (a tbf shaper on an end's interface, slower than its link)
    /// or `lab` (the tbf of the lab's router, which `lab exec` names).
    pub link_speed_source: String,
    /// Where the shaper sits when it is on neither end (`lab`): `lab
    /// router demo-r eth1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shaper_name: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SocketBuffers;

    #[test]
    fn a_receivers_clock_against_a_sending_agents_subtracts_offsets_and_adds_bounds() {
        let offset = |us: Option<f64>, bound: f64, one_clock: bool| ClockOffset {
            agent_minus_client_us: us,
            bound_us: us.map(|_| bound),
            drift_ppm: Some(3.0),
            drift_bound_ppm: Some(1.0),
            exchanges: 16,
            one_clock,
            ..ClockOffset::default()
        };
        let receiver = offset(Some(250.0), 40.0, true);
        let between = receiver.against(&offset(Some(-100.0), 60.0, true));
        assert_eq!(between.agent_minus_client_us, Some(350.0));
        assert_eq!(between.bound_us, Some(100.0));
        assert_eq!((between.drift_ppm, between.drift_bound_ppm), (Some(0.0), Some(2.0)));
        assert_eq!(between.exchanges, 32);
        assert!(between.one_clock && between.problem.is_none());
        // The sender on another kernel: not one clock; the sender's clock
        // without an offset leaves none, and says whose clock it was.
        let apart = receiver.against(&ClockOffset {
            problem: Some("a clock stepped".into()),
            ..offset(None, 0.0, false)
        });
        assert!(!apart.one_clock);
        assert_eq!((apart.agent_minus_client_us, apart.bound_us), (None, None));
        assert_eq!(
            apart.problem.as_deref(),
            Some("the sending agent's clock: a clock stepped")
        );
    }

    fn end(id: u32, role: Role, bytes: u64) -> StreamEnd {
        StreamEnd {
            stream_id: id,
            role,
            bytes,
            seconds: 1.0,
            bits_per_second: bytes as f64 * 8.0,
            warmup_bytes: 0,
            socket: SocketBuffers::default(),
            tcp_info: None,
            intervals: vec![],
            error: None,
            extras: Default::default(),
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
    fn merge_pairs_sender_and_receiver_by_flow() {
        let flows = [(1, Flow::ClientToAgent), (2, Flow::AgentToClient)];
        let client = side(
            Party::Client,
            vec![end(1, Role::Sender, 100), end(2, Role::Receiver, 50)],
        );
        let agent = side(
            Party::Agent,
            vec![end(2, Role::Sender, 50), end(1, Role::Receiver, 100)],
        );
        let t = TrialResult::merge(1, &flows, client, agent).unwrap();
        assert_eq!(t.sum.sender.bytes, 150);
        assert_eq!(t.sum.receiver.bytes, 150);
        assert_eq!(t.sum.client_to_agent.as_ref().unwrap().receiver.bytes, 100);
        assert_eq!(t.sum.agent_to_client.as_ref().unwrap().sender.bytes, 50);
        assert_eq!(t.streams[1].sender.bytes, 50);
    }

    #[test]
    fn merge_reports_a_missing_end() {
        let flows = [(1, Flow::ClientToAgent)];
        let client = side(Party::Client, vec![end(1, Role::Sender, 100)]);
        let agent = side(Party::Agent, vec![]);
        assert_eq!(
            TrialResult::merge(1, &flows, client, agent).unwrap_err(),
            MergeError::MissingEnd(1, Role::Receiver)
        );
    }
}
