//! The peer program of a run when it is not a nicbench agent or client:
//! today an iperf3 server or client reached through `nicbench ... iperf3://`
//! or `nicbench serve --iperf3-port`. The figures of that peer's side in
//! the run (its stream ends, its CPU) are what it reported, mapped; its
//! raw report is kept here as it came.

use serde::{Deserialize, Serialize};

/// Who the other end was and what it reported itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PeerProtocol {
    /// `iperf3`.
    pub protocol: String,
    /// `server` (nicbench was the client) or `client` (nicbench was the agent).
    pub peer_role: String,
    /// The version the peer announced, when it did (iperf3 clients send
    /// `client_version`; iperf3 servers send none).
    pub peer_version: Option<String>,
    /// CPU use of the peer's process in percent of one core (iperf3's
    /// `cpu_util_total`, `cpu_util_user`, `cpu_util_system`); the peer
    /// measures no host-wide CPU, so the peer's host-wide CPU fields in
    /// `cpu` are zero with `logical_cpus` 0 (not measured).
    pub peer_cpu_util_total_percent: f64,
    pub peer_cpu_util_user_percent: f64,
    pub peer_cpu_util_system_percent: f64,
    /// The congestion control the peer used, when it said.
    pub peer_congestion_used: Option<String>,
    /// The peer's streams as it reported them (its ids, not ours).
    pub peer_streams: Vec<PeerStream>,
}

/// One stream as an iperf3 peer reported it in its results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PeerStream {
    /// The peer's stream id (1, 3, 4, ...) and ours for the same stream.
    pub peer_stream_id: i64,
    pub stream_id: u32,
    pub bytes: u64,
    /// TCP retransmits the sender counted; None when the peer had none to
    /// report (a receiver, or no TCP_INFO).
    pub retransmits: Option<u64>,
    /// UDP receiver: jitter in microseconds.
    pub jitter_us: Option<f64>,
    /// UDP receiver: datagrams missing from the sequence.
    pub lost_datagrams: Option<u64>,
    /// UDP: datagrams sent (sender) or highest sequence number seen (receiver).
    pub packets: Option<u64>,
    pub seconds: Option<f64>,
}
