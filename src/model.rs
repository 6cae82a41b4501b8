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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    #[default]
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
    /// `PRETTY_NAME` of /etc/os-release.
    #[serde(default)]
    pub os: String,
    /// /proc/sys/kernel/random/boot_id: equal on both ends when they share
    /// one kernel (network namespaces of one machine).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub boot_id: String,
    /// Physical cores (distinct core ids per package in /proc/cpuinfo).
    #[serde(default)]
    pub cpu_cores: Option<u32>,
    /// Current frequency of the first CPU (/proc/cpuinfo `cpu MHz`).
    #[serde(default)]
    pub cpu_mhz: Option<f64>,
    /// Highest frequency cpufreq allows (cpuinfo_max_freq), when exposed.
    #[serde(default)]
    pub cpu_max_mhz: Option<f64>,
    /// MemTotal of /proc/meminfo.
    #[serde(default)]
    pub memory_bytes: Option<u64>,
    /// NUMA nodes of the host (/sys/devices/system/node).
    #[serde(default)]
    pub numa_nodes: Option<u32>,
    /// The interface toward the peer: the one holding the local address
    /// of the control connection.
    #[serde(default)]
    pub interface: Option<NicFacts>,
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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Datagram counts of a UDP stream end (the `udp` workload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpEnd>,
    /// Transactions and latency of a request/response flow (the `rr` workload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rr: Option<RrEnd>,
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

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
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
    /// CPU time of all cores in microseconds per transaction, for
    /// request/response workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_demand_us_per_transaction: Option<f64>,
}

/// What one side sends back at the end of a trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideReport {
    pub host: Host,
    pub streams: Vec<StreamEnd>,
    pub cpu: CpuReport,
    /// NIC, interrupt and protocol counters over the trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<SideCounters>,
    /// Agent: other tests that ran on it during part of this one
    /// (`nicbench serve --max-concurrent`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub overlapped_tests: u32,
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
            t.latency = (!latencies.is_empty()).then(|| crate::workload::latency::merge(&latencies));
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

/// Facts about the network interface a test used. Virtual and loopback
/// devices leave unset what they do not have (`null` in JSON, "n/a" in text).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NicFacts {
    pub name: String,
    /// The local address that selected this interface.
    #[serde(default)]
    pub address: Option<String>,
    /// `loopback`, `virtual` (no device behind it: veth, bridge, ...) or `device`.
    pub kind: String,
    pub driver: Option<String>,
    pub driver_version: Option<String>,
    pub firmware_version: Option<String>,
    pub bus_info: Option<String>,
    pub link_speed_bits_per_second: Option<u64>,
    /// `full` or `half`.
    pub duplex: Option<String>,
    pub autonegotiation: Option<bool>,
    /// sysfs operstate: `up`, `down`, `unknown`, ...
    pub operstate: Option<String>,
    pub mtu_bytes: Option<u32>,
    pub offloads: Option<Offloads>,
    pub rings: Option<Rings>,
    pub coalescing: Option<Coalescing>,
    pub queues: Option<Queues>,
    /// Root qdisc attached to the interface (rtnetlink), e.g. `fq_codel`.
    pub qdisc: Option<String>,
    /// Shaping rate of the root qdisc when it is tbf.
    #[serde(default)]
    pub qdisc_rate_bits_per_second: Option<u64>,
    pub tx_queue_length: Option<u32>,
    pub pcie: Option<PcieLink>,
    pub numa_node: Option<u32>,
}

/// Offload features as the kernel reports them active (ETHTOOL_GFEATURES).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Offloads {
    pub tso: Option<bool>,
    pub gso: Option<bool>,
    pub gro: Option<bool>,
    pub lro: Option<bool>,
    pub rx_checksum: Option<bool>,
    /// Any of the tx checksum features (IPv4, IPv6, generic).
    pub tx_checksum: Option<bool>,
    pub scatter_gather: Option<bool>,
}

/// Descriptor ring sizes (ETHTOOL_GRINGPARAM), in descriptors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Rings {
    pub rx_descriptors: u32,
    pub rx_max_descriptors: u32,
    pub tx_descriptors: u32,
    pub tx_max_descriptors: u32,
}

/// Interrupt coalescing (ETHTOOL_GCOALESCE).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Coalescing {
    pub rx_usecs: u32,
    pub rx_max_frames: u32,
    pub tx_usecs: u32,
    pub tx_max_frames: u32,
    pub adaptive_rx: bool,
    pub adaptive_tx: bool,
}

/// Queues (ETHTOOL_GCHANNELS, or the queues/ directory of sysfs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Queues {
    pub rx: u32,
    pub tx: u32,
    pub combined: Option<u32>,
    pub max_combined: Option<u32>,
    /// `ethtool` or `sysfs`.
    pub source: String,
}

/// PCIe link of the device, current and the most it supports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PcieLink {
    pub current_gigatransfers_per_second: Option<f64>,
    pub current_width_lanes: Option<u32>,
    pub max_gigatransfers_per_second: Option<f64>,
    pub max_width_lanes: Option<u32>,
}

/// Counter changes on one side over one trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SideCounters {
    /// Interface the NIC counters and interrupts belong to.
    pub interface: Option<String>,
    /// Time between the two readings.
    pub seconds: f64,
    pub nic: Option<NicCounters>,
    pub interrupts: Option<InterruptCounters>,
    /// System-wide (per network namespace) TCP counters of /proc/net/snmp.
    pub tcp: Option<TcpCounters>,
    /// System-wide (per network namespace) UDP counters of /proc/net/snmp.
    pub udp: Option<UdpCounters>,
    /// CPU throttling of this process's cgroup (cpu controller).
    pub cgroup_cpu: Option<CgroupCpu>,
    /// Run time and CPU wait of the threads this side started for the trial.
    #[serde(default)]
    pub scheduling: Option<ThreadScheduling>,
}

/// Scheduling of a side's trial threads (/proc/self/task/*/schedstat).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadScheduling {
    pub threads: u32,
    /// Time on a CPU.
    pub run_seconds: f64,
    /// Time ready to run but waiting for a CPU (run delay).
    pub wait_seconds: f64,
    /// wait / (run + wait).
    pub wait_percent: Option<f64>,
}

/// sysfs statistics/ of the interface, as changes over the trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NicCounters {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_missed_errors: u64,
    pub rx_fifo_errors: u64,
}

/// Interrupts of the interface's queues (/proc/interrupts).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InterruptCounters {
    pub irqs: Vec<u32>,
    pub interrupts: u64,
    pub interrupts_per_second: f64,
    /// Packets (rx + tx) per interrupt; None without interrupts.
    pub packets_per_interrupt: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpCounters {
    pub out_segments: u64,
    pub retransmitted_segments: u64,
    pub retransmitted_percent: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpCounters {
    pub in_datagrams: u64,
    pub in_errors: u64,
    pub receive_buffer_errors: u64,
    pub send_buffer_errors: u64,
    /// RcvbufErrors / (InDatagrams + InErrors).
    pub receive_buffer_errors_percent: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CgroupCpu {
    pub cgroup: String,
    pub periods: u64,
    pub throttled_periods: u64,
    pub throttled_seconds: f64,
    pub throttled_percent_of_periods: Option<f64>,
    /// cpu.cfs_quota_us and cpu.cfs_period_us; None quota = unlimited.
    pub quota_us: Option<u64>,
    pub period_us: Option<u64>,
}

/// Counters of both ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BothCounters {
    pub client: Option<SideCounters>,
    pub agent: Option<SideCounters>,
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
    pub theoretical_goodput_bits_per_second: f64,
    /// Receiver throughput of the busier direction.
    pub measured_bits_per_second: f64,
    pub percent_of_theoretical_goodput: f64,
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
