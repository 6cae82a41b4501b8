//! Counter changes on each side over a trial: NIC, interrupts, TCP and
//! UDP protocol counters, cgroup throttling, thread scheduling.

use serde::{Deserialize, Serialize};

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
    /// Run time and CPU wait over the trial of the kernel thread that
    /// carried this side's receive work (threaded NAPI, as a CPU-limited lab
    /// host has it): where a slow host's packet work waits. Absent where
    /// that work runs in softirq (no thread to account it to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packet_work: Option<ThreadScheduling>,
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
