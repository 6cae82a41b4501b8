//! Facts about a host and the interface a test used, recorded with every
//! result.

use serde::{Deserialize, Serialize};

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
    /// A CPU quota on this process's cgroup, when one is set and visible.
    /// Absent without a quota, and in runs before 2026-11-27.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_limit: Option<CpuLimit>,
    /// The MPTCP path manager of this host's network namespace (its
    /// `net.mptcp.*` sysctls, limits and endpoints): recorded for a test
    /// over MPTCP only, absent otherwise and in runs before 2026-11-28.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mptcp: Option<MptcpPathManager>,
    /// What bounds TLS on this host: each cipher's speed on one core, kernel
    /// TLS, and the certificate an agent presents. Recorded for a test over
    /// TLS only, absent otherwise and in runs before 2026-11-29.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsHostFacts>,
    /// Whether the kernel's clock is disciplined, and how far off it says it
    /// may be (adjtimex): what bounds a one-way figure besides the offset
    /// measured to the peer (docs/CLOCKS.md). Absent where adjtimex fails
    /// and in runs before 2026-12-06.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockSync>,
}

/// The kernel clock's discipline as adjtimex(2) reports it, and the time
/// daemons running on the host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClockSync {
    /// The kernel holds the clock synchronized: STA_UNSYNC clear and the
    /// clock state not TIME_ERROR. False on a host whose clock no daemon
    /// disciplines (the kernel then also says its error is unbounded).
    pub synchronized: bool,
    /// The kernel's estimated error of the clock (adjtimex `esterror`), us,
    /// as the daemon set it.
    pub estimated_error_us: i64,
    /// The kernel's maximum error (adjtimex `maxerror`), us; it grows by
    /// 500 us each second no daemon refreshes it, to 16 s.
    pub maximum_error_us: i64,
    /// Time daemons found running (process names: chronyd, ntpd, ntpsec,
    /// openntpd, systemd-timesyncd, ptp4l, phc2sys, timemaster); empty
    /// where none is, or /proc shows no other processes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub daemons: Vec<String>,
}

/// What bounds TLS on a host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TlsHostFacts {
    /// Each TLS 1.3 cipher's speed on one core of this CPU, in the record
    /// size TLS uses (16 KiB): the most one stream can encrypt or decrypt.
    pub cipher_speeds: Vec<CipherSpeed>,
    /// Whether the CPU has AES instructions (`aes` in /proc/cpuinfo's
    /// flags): without them AES-GCM runs in software, slower than ChaCha20.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_aes: Option<bool>,
    /// Kernel TLS (the record layer in the kernel): None where this kernel
    /// has it, else why not, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ktls_unavailable: Option<String>,
    /// The SHA-256 of the certificate this agent presents (hex), on the
    /// agent's facts only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_sha256: Option<String>,
    /// Where that certificate came from: `self-signed` (made by the agent
    /// at its first TLS test) or the file `serve --tls-cert` named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_source: Option<String>,
}

/// One cipher's speed on one core.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CipherSpeed {
    /// `aes128-gcm`, `aes256-gcm` or `chacha20-poly1305` (`--cipher`).
    pub cipher: String,
    /// Sealing (encrypting and tagging) 16 KiB records, bits per second.
    pub encrypt_bits_per_second: f64,
    /// Opening (checking and decrypting) them, bits per second.
    pub decrypt_bits_per_second: f64,
}

/// A cgroup CPU quota: how much of one core the host's processes may use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuLimit {
    /// The quota as a share of one core (3 for 3000 us per 100000 us).
    pub percent_of_one_core: f64,
    pub quota_us: u64,
    pub period_us: u64,
    /// The cgroup, as /proc/self/cgroup names it.
    pub cgroup: String,
    /// `lab` when a nicbench lab set it (`--cpu-limit`), else `cgroup`.
    pub set_by: String,
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
    /// How that tbf counts packets, and its bucket (rtnetlink parameters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qdisc_shaping: Option<QdiscShaping>,
    pub tx_queue_length: Option<u32>,
    pub pcie: Option<PcieLink>,
    pub numa_node: Option<u32>,
}

/// What a tbf root qdisc counts against its rate, from its parameters: the
/// packet as dequeued (Ethernet header, no FCS) plus `overhead_bytes`, at
/// least `mpu_bytes`, in ATM cells when `linklayer` is `atm`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QdiscShaping {
    pub overhead_bytes: u32,
    pub mpu_bytes: u32,
    /// `ethernet` or `atm`.
    pub linklayer: String,
    /// Size of the token bucket: what passes at once after an idle moment.
    pub burst_bytes: Option<u64>,
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

/// The path manager of this network namespace: its sysctls, and its limits
/// and endpoints as iproute2's `ip mptcp` shows them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MptcpPathManager {
    /// `net.mptcp.*` by name without the prefix (`enabled`, `pm_type`,
    /// `path_manager`, `scheduler`, `checksum_enabled`, ...): those this kernel has.
    pub sysctls: std::collections::BTreeMap<String, String>,
    /// None when `ip mptcp limits` could not be read (see `unread`).
    pub limits: Option<MptcpLimits>,
    /// None when `ip mptcp endpoint` could not be read (see `unread`).
    pub endpoints: Option<Vec<MptcpEndpoint>>,
    /// Why `limits` or `endpoints` is None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unread: Option<String>,
}

/// `ip mptcp limits`: how many extra subflows a connection may have, and how
/// many addresses announced by the peer it may accept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MptcpLimits {
    pub subflows: u32,
    pub add_addr_accepted: u32,
}

/// One `ip mptcp endpoint`: a local address the path manager announces
/// (`signal`) or opens subflows from (`subflow`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MptcpEndpoint {
    pub address: String,
    pub id: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    pub signal: bool,
    pub subflow: bool,
    pub backup: bool,
    pub fullmesh: bool,
    /// Other flags iproute2 named (`implicit`, `laminar`, `rawflags 0x..`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_flags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
}
