//! One side's measurements: the roles of processes and stream ends, what
//! each stream end counted, and the CPU report a side sends back at the end
//! of a trial.

use serde::{Deserialize, Serialize};

use super::counters::SideCounters;
use super::extras::Extras;

/// Which party to a test (the client process or the agent) a measurement
/// was taken in; the machine it ran on is described by `HostFacts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Party {
    Client,
    Agent,
}

impl Party {
    pub fn other(self) -> Party {
        match self {
            Party::Client => Party::Agent,
            Party::Agent => Party::Client,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Party::Client => "client",
            Party::Agent => "agent",
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
    pub fn sender(self) -> Party {
        match self {
            Flow::ClientToAgent => Party::Client,
            Flow::AgentToClient => Party::Agent,
        }
    }
    pub fn receiver(self) -> Party {
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

/// One interval sample of one stream end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub start_seconds: f64,
    pub end_seconds: f64,
    pub bytes: u64,
    pub bits_per_second: f64,
    /// True while inside the `--omit` warm-up.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub omitted: bool,
    /// A TCP sender's segments retransmitted in this interval
    /// (`tcpi_total_retrans` at its end minus at its start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// A TCP sender's congestion window at the interval's end, in bytes
    /// (`tcpi_snd_cwnd` x `tcpi_snd_mss`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_window_bytes: Option<u64>,
    /// A TCP sender's smoothed round-trip time at the interval's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_us: Option<u32>,
}

/// A TCP sender's state over one interval, read from TCP_INFO at its end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntervalTcp {
    /// Segments retransmitted in the interval.
    pub retransmits: u64,
    pub congestion_window_bytes: u64,
    pub rtt_us: u32,
}

impl Interval {
    /// The interval with a TCP sender's state, when there is one.
    pub fn with_tcp(mut self, tcp: Option<IntervalTcp>) -> Interval {
        if let Some(t) = tcp {
            self.retransmits = Some(t.retransmits);
            self.congestion_window_bytes = Some(t.congestion_window_bytes);
            self.rtt_us = Some(t.rtt_us);
        }
        self
    }

    /// The TCP sender's state of the interval, when it was recorded.
    pub fn tcp(&self) -> Option<IntervalTcp> {
        Some(IntervalTcp {
            retransmits: self.retransmits?,
            congestion_window_bytes: self.congestion_window_bytes?,
            rtt_us: self.rtt_us?,
        })
    }
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
    /// Segments this socket retransmitted over its life (`tcpi_total_retrans`).
    pub retransmits: u64,
    /// Bytes it retransmitted (`tcpi_bytes_retrans`, Linux 4.19+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_retransmitted: Option<u64>,
    /// Bytes it sent, retransmissions included (`tcpi_bytes_sent`, Linux 4.19+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_sent: Option<u64>,
    /// Data segments it sent, retransmissions included (`tcpi_data_segs_out`, Linux 4.6+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_segments_sent: Option<u64>,
    pub rtt_us: u32,
    pub rtt_var_us: u32,
    pub congestion_window_segments: u32,
    /// The segment size it sends (`tcpi_snd_mss`): the smaller of what the
    /// path MTU allows and the MSS the peer announced, less TCP options.
    pub send_mss_bytes: u32,
    pub receive_mss_bytes: u32,
    pub path_mtu_bytes: u32,
    /// The MSS this end announced to its peer (`tcpi_advmss`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertised_mss_bytes: Option<u32>,
    /// Whether the connection carries TCP timestamps (12 B of options in
    /// every segment; `tcpi_options`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamps: Option<bool>,
    pub congestion_control: String,
    /// Time with data outstanding, in microseconds (`tcpi_busy_time`, Linux
    /// 4.10+; the kernel counts in jiffies, 1-10 ms): the two limited times
    /// below are parts of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_us: Option<u64>,
    /// Of the busy time, how long the peer's receive window held the sender
    /// back (`tcpi_rwnd_limited`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rwnd_limited_us: Option<u64>,
    /// Of the busy time, how long its own send buffer held it back
    /// (`tcpi_sndbuf_limited`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sndbuf_limited_us: Option<u64>,
    /// The kernel's pacing rate at the end (`tcpi_pacing_rate`, bytes/s, here
    /// bits/s): enforced only by an `fq` qdisc or by a congestion control
    /// that paces itself (bbr); absent when unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_rate_bits_per_second: Option<f64>,
    /// The delivery rate of the last acknowledged data (`tcpi_delivery_rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_rate_bits_per_second: Option<f64>,
    /// The receive window the peer last advertised, scaled (`tcpi_snd_wnd`,
    /// Linux 6.2+): with the round trip, the most the window lets through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_window_bytes: Option<u64>,
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
    #[serde(rename = "omitted_bytes")]
    pub warmup_bytes: u64,
    pub socket: SocketBuffers,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<TcpInfo>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<Interval>,
    /// Set when the stream ended with an error instead of cleanly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The workload's own counts of this end (`udp`, `rr`, `sweep`), each
    /// under its key, flat beside the fields above.
    #[serde(flatten)]
    pub extras: Extras,
}

pub(crate) fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
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
    /// nicbench's own stream threads (`process`) busy, in percent of one
    /// core over `seconds`: this end's own share even where both ends
    /// share one kernel (a lab). Absent in documents before 2026-11-27.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads_percent_of_core: Option<f64>,
    /// The stream threads' CPU time in microseconds per KB moved: this
    /// end's own service demand, softirq work outside its threads not
    /// counted. Absent when nothing moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads_service_demand_us_per_kb: Option<f64>,
    /// A lab host's own work in percent of one core over `seconds`: its
    /// stream threads (`process`) plus the napi threads that carry its
    /// packets (`counters.packet_work`), each timed exactly by the kernel,
    /// so other work on the same cores (a busy machine) does not count.
    /// Absent outside a lab whose hosts receive in napi threads, and in
    /// documents before 2026-12-06.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_work_percent_of_core: Option<f64>,
    /// The same CPU time in microseconds per KB moved: the lab host's own
    /// service demand. Absent as above, or when nothing moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_work_service_demand_us_per_kb: Option<f64>,
    /// Which cores the figures above cover: the whole machine, or the cores
    /// a lab host owns. Absent in documents before 2026-12-06 (the machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<CpuScope>,
}

/// Which cores a [`CpuReport`] covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuScope {
    pub kind: CpuScopeKind,
    /// The cores sampled, in order.
    pub cores: Vec<u32>,
    /// The lab host whose cores they are (`demo-a`), for `lab_host_cores`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab_host: Option<String>,
    /// Other lab hosts run on these cores too (a machine with fewer cores
    /// than the lab has hosts), so the figures are not this host's alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shared: bool,
}

/// What a CPU report's cores are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuScopeKind {
    /// Every core of the machine (the kernel's whole /proc/stat).
    Machine,
    /// Only the cores a lab host owns (its cpuset, where its packet work is
    /// steered): the host's own CPU, not the machine's.
    LabHostCores,
}

impl CpuScope {
    /// "lab host demo-a's core 1" / "the machine's 2 cores".
    pub fn describe(&self) -> String {
        let cores = self.cores.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let noun = if self.cores.len() == 1 { "core" } else { "cores" };
        match self.kind {
            CpuScopeKind::Machine => format!("the machine's {} {noun}", self.cores.len()),
            CpuScopeKind::LabHostCores => format!(
                "lab host {}'s {noun} {cores}{}",
                self.lab_host.as_deref().unwrap_or("?"),
                if self.shared {
                    ", shared with other lab hosts"
                } else {
                    ""
                }
            ),
        }
    }
}

/// What one side sends back at the end of a trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideReport {
    pub host: Party,
    pub streams: Vec<StreamEnd>,
    pub cpu: CpuReport,
    /// NIC, interrupt and protocol counters over the trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<SideCounters>,
    /// Agent: other tests that ran on it during part of this one
    /// (`nicbench serve --max-concurrent`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub overlapped_tests: u32,
    /// With `--links`: this side's end of each link, in the spec's order,
    /// with its interface's counters over the trial.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<super::multilink::LinkEnd>,
}
