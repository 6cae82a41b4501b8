//! What one end of a UDP stream counted ([`UdpEnd`]), as the datagram
//! loops ([`super::loops`]) and iperf3's put it in a stream end's extras
//! under [`KEY`]; the workloads merge both ends' into their results.

use serde::{Deserialize, Serialize};

pub use crate::workload::base::one_way::Transit;

/// The key of the UDP part in stream ends, streams, flow totals and sums.
pub const KEY: &str = "udp";

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
    /// A paced sender: the most it sent back to back between two waits, in
    /// seconds of its rate (about 0.001 when it keeps pace; more when it
    /// woke late and caught up, up to the pacer's credit). Sender only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub largest_burst_seconds: Option<f64>,
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
    /// Of `socket_drops`, those before the first datagram sent after the
    /// warm-up was queued (SO_RXQ_OVFL): the warm-up's. Absent in runs
    /// before 2026-11-27 and from iperf3 peers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_socket_drops: Option<u64>,
    /// Count runs (`-n`, `-k`): datagrams after the last one that arrived,
    /// which the receiver knows were sent because it knows the count; a
    /// receiver of an iperf 2 sender: those its closing datagram told of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_at_end_datagrams: Option<u64>,
    /// A multicast receiver: seconds from its join to its first datagram
    /// (warm-up included); absent when nothing came within its wait, and
    /// from every other receiver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_datagram_after_seconds: Option<f64>,
    /// A receiver of a sender that is not nicbench (iperf 2): the datagrams
    /// that sender numbered from the first measured one this receiver got
    /// to its last (its closing datagram tells it) or, without a closing
    /// datagram, to the last that arrived. It stands for the sender's own
    /// count, which never reaches the client. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numbered_datagrams: Option<u64>,
    /// Each datagram's arrival on the receiver's clock minus its send
    /// time on the sender's, after the warm-up. Absent from senders before
    /// 2026-12-07 (their stamps were on a monotonic clock) and iperf3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transit: Option<Transit>,
}
