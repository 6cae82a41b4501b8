//! The result types: what one side measures ([`SideReport`]), what a trial
//! yields once both sides are merged ([`TrialResult`]), and the run document
//! ([`RunResult`]) that `--json` prints. Field names carry their units.
//! The schema is described in `docs/SCHEMA.md`; bump [`SCHEMA`] on any
//! incompatible change.

use serde::{Deserialize, Serialize};

use crate::workload::TestSpec;

/// Identifies the JSON document format.
pub const SCHEMA: &str = "nicbench.run/1";

/// Which process a measurement was taken in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Host {
    Client,
    Agent,
}

impl Host {
    pub fn other(self) -> Host {
        match self {
            Host::Client => Host::Agent,
            Host::Agent => Host::Client,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Host::Client => "client",
            Host::Agent => "agent",
        }
    }
}

/// Which way a stream's data flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flow {
    ClientToAgent,
    AgentToClient,
}

impl Flow {
    pub fn sender(self) -> Host {
        match self {
            Flow::ClientToAgent => Host::Client,
            Flow::AgentToClient => Host::Agent,
        }
    }
    pub fn receiver(self) -> Host {
        self.sender().other()
    }
    pub fn arrow(self) -> &'static str {
        match self {
            Flow::ClientToAgent => "client->agent",
            Flow::AgentToClient => "agent->client",
        }
    }
}

/// The role of one end of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Sender,
    Receiver,
}

/// Facts about a host, recorded with every result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostFacts {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    pub logical_cpus: u32,
    pub nicbench_version: String,
}

/// One interval sample of one stream end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub start_seconds: f64,
    pub end_seconds: f64,
    pub bytes: u64,
    pub bits_per_second: f64,
    /// True while inside the `--omit` warm-up.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub omitted: bool,
}

/// Socket buffer sizes the kernel granted (getsockopt after setting;
/// Linux doubles the requested value for its bookkeeping).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SocketBuffers {
    pub send_buffer_bytes: u64,
    pub receive_buffer_bytes: u64,
}

/// TCP_INFO read at the end of a stream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpInfo {
    pub retransmits: u64,
    pub rtt_us: u32,
    pub rtt_var_us: u32,
    pub congestion_window_segments: u32,
    pub send_mss_bytes: u32,
    pub receive_mss_bytes: u32,
    pub path_mtu_bytes: u32,
    pub congestion_control: String,
}

/// One end (sender or receiver) of one stream, as measured by that end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamEnd {
    pub stream_id: u32,
    pub role: Role,
    /// Bytes counted after the warm-up (`--omit`).
    pub bytes: u64,
    /// Time from the end of the warm-up to this end's last byte.
    pub seconds: f64,
    pub bits_per_second: f64,
    /// Bytes moved during the warm-up, excluded from `bytes`.
    pub omitted_bytes: u64,
    pub socket: SocketBuffers,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<TcpInfo>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<Interval>,
    /// Set when the stream ended with an error instead of cleanly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The message-size sweep this end drove (`sweep` workload, client end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepResult>,
}

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

fn is_zero(n: &u64) -> bool {
    *n == 0
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

/// CPU time of the benchmark's own threads on one side (getrusage per thread).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessCpu {
    pub user_seconds: f64,
    pub system_seconds: f64,
}

/// Utilization of one core over the trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CoreUtilization {
    pub core: u32,
    pub utilization_percent: f64,
    pub user_percent: f64,
    pub system_percent: f64,
    pub softirq_percent: f64,
    pub irq_percent: f64,
}

/// CPU cost on one side over one trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuReport {
    /// Wall time over which /proc/stat was sampled.
    pub seconds: f64,
    pub logical_cpus: u32,
    /// Busy share of all cores together (100% = every core busy).
    pub utilization_percent: f64,
    pub user_percent: f64,
    pub nice_percent: f64,
    pub system_percent: f64,
    pub softirq_percent: f64,
    pub irq_percent: f64,
    pub iowait_percent: f64,
    pub steal_percent: f64,
    pub busiest_core: CoreUtilization,
    pub per_core: Vec<CoreUtilization>,
    /// The benchmark's own threads on this side.
    pub process: ProcessCpu,
    /// Bytes this side sent plus bytes it received.
    pub bytes_moved: u64,
    /// CPU time of all cores in microseconds per KB moved (KB = 1024
    /// bytes), netperf's service demand. None when nothing moved.
    pub service_demand_us_per_kb: Option<f64>,
}

/// What one side sends back at the end of a trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideReport {
    pub host: Host,
    pub streams: Vec<StreamEnd>,
    pub cpu: CpuReport,
}

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
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowTotal {
    pub sender: Total,
    pub receiver: Total,
}

/// CPU on both ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BothCpu {
    pub client: CpuReport,
    pub agent: CpuReport,
}

/// One timed execution, both sides merged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialResult {
    pub trial: u32,
    pub streams: Vec<StreamResult>,
    pub sum: Sum,
    pub cpu: BothCpu,
}

/// An endpoint of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Endpoint {
    pub address: String,
    pub facts: HostFacts,
}

/// The document `--json` prints: the reported trial's fields at the top
/// (`sum.receiver.bits_per_second`), every trial in `trials`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub schema: String,
    pub workload: String,
    pub started_at_unix_seconds: f64,
    pub client: Endpoint,
    pub agent: Endpoint,
    pub spec: TestSpec,
    #[serde(flatten)]
    pub result: TrialResult,
    pub trials: Vec<TrialResult>,
    /// How the trials were repeated and which one is reported; absent for
    /// a single trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetition: Option<RepetitionSummary>,
}

/// The repetition policy of a case and what its trials gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepetitionSummary {
    pub policy: crate::stats::Policy,
    /// The figure trials are compared by, e.g. `receiver_bits_per_second`.
    pub metric: String,
    /// Unit of the figures, e.g. `bit/s`.
    pub unit: String,
    /// Number of the reported trial (the one at the top of the document).
    pub picked_trial: u32,
    /// The reported figure: the picked trial's, or the mean for `mean` and
    /// `confidence`.
    pub reported_value: f64,
    /// The figure of every trial, in order.
    pub values: Vec<f64>,
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub mean: f64,
    pub stddev: f64,
    /// Confidence interval of the mean (two trials or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<crate::stats::MeanInterval>,
    /// For `--confidence`: whether the interval met the asked width.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width_met: Option<bool>,
    /// True when Ctrl-C ended the case before its policy was satisfied.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
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
                sender,
                receiver,
            });
        }
        let flow_total = |flow: Flow| {
            let of_flow = || streams.iter().filter(move |s| s.flow == flow);
            (of_flow().count() > 0).then(|| FlowTotal {
                sender: total(of_flow().map(|s| &s.sender)),
                receiver: total(of_flow().map(|s| &s.receiver)),
            })
        };
        let sum = Sum {
            sender: total(streams.iter().map(|s| &s.sender)),
            receiver: total(streams.iter().map(|s| &s.receiver)),
            client_to_agent: flow_total(Flow::ClientToAgent),
            agent_to_client: flow_total(Flow::AgentToClient),
        };
        Ok(TrialResult {
            trial,
            streams,
            sum,
            cpu: BothCpu {
                client: client.cpu,
                agent: agent.cpu,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        }
    }

    fn side(host: Host, streams: Vec<StreamEnd>) -> SideReport {
        SideReport {
            host,
            streams,
            cpu: CpuReport::default(),
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
