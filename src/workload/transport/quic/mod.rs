//! QUIC from quinn: one connection per test carrying every stream of it,
//! each a QUIC stream, over one UDP socket per end. The TLS 1.3 handshake
//! inside QUIC takes the same certificates, pins and cipher options as the
//! `tls` transport, so TCP, TLS and QUIC figures are cases of one harness.
//!
//! - [`endpoint`]: the runtime that drives quinn on each end, the UDP
//!   socket it sends through (only ever to the test's peer: datagrams from
//!   anyone else are dropped before quinn sees them, so the agent answers
//!   no one else, not even with a version negotiation or a reset), the
//!   client's connect and the agent's accept, which admits streams only
//!   with the session token;
//! - [`stream`]: the sender's and the receiver's loops;
//! - [`wire`]: a stream as the `Read + Write` the message loops (rr,
//!   sweep) take.
//!
//! A QUIC end records its handshake under `tls` (a [`super::tls::TlsEnd`]
//! whose record layer is `quinn`, so the cipher's bound and verdict apply
//! as they do to TLS) and the connection's own figures under `quic`
//! ([`QuicEnd`]): congestion controller, UDP GSO/GRO, path MTU, packets
//! sent and lost, datagrams per system call.

pub mod endpoint;
pub mod stream;
pub mod transaction;
pub mod wire;

use serde::{Deserialize, Serialize};
use socket2::{Protocol, Type};

use super::stream::{ConnectOptions, Serving, Streams};
use super::transaction::{Dialing, TransactionServing, Transactions};
use super::{About, Asked, Delivery, Setting, Transport};
use crate::linerate::Stack;
use crate::workload::base::{AgentNet, ClientNet, WorkloadError};

/// QUIC (RFC 9000) over UDP.
pub struct Quic;

static ABOUT: About = About {
    name: "quic",
    label: "QUIC",
    delivery: Delivery::Stream,
    socket: (Type::DGRAM, Some(Protocol::UDP)),
    // UDP's headers, for what is framed by message size (rr's round trip
    // on a shaper). A bulk trial's line rate takes quinn's full packets
    // instead, QUIC's own bytes and its packet size included
    // ([`full_packet`]).
    stack: [Stack::Udp4, Stack::Udp6],
};

impl Transport for Quic {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn kernel_stream(&self) -> bool {
        false
    }

    fn tls_handshake(&self) -> bool {
        true
    }

    /// A kernel socket's options (quinn's UDP socket has none of TCP's),
    /// kernel TLS, links, and a congestion controller quinn does not have;
    /// then TLS's options.
    fn refuse(&self, asked: &Asked) -> Result<(), String> {
        let chosen_by = asked.chosen_by;
        for &(option, setting) in &asked.options {
            let why = match setting {
                Setting::Mss => "QUIC sizes its own packets to the path MTU it discovers",
                Setting::NoDelay => "QUIC has no Nagle's algorithm",
                Setting::ZeroCopy => "quinn protects each packet in user space",
                Setting::Discard => "packets must be read to be opened and checked",
                Setting::Pacing => "quinn paces to its congestion window; nicbench cannot pace it yet",
                Setting::KernelTls => "kernel TLS seals TCP records; QUIC protects its packets in quinn",
                Setting::Spin => "quinn reads the UDP socket when its runtime is woken, not by polling",
                Setting::QuickAck => "QUIC acknowledges in quinn, not with TCP_QUICKACK",
                Setting::BusyPoll => "quinn's socket waits in its runtime, not in the kernel's busy poll",
                Setting::Congestion(cc) if CONGESTION_CONTROLLERS.contains(&cc) => continue,
                Setting::Congestion(cc) => {
                    return Err(format!(
                        "{option} '{cc}' with {chosen_by} quic: quinn has {} (the kernel's controllers drive TCP only)",
                        CONGESTION_CONTROLLERS.join(", ")
                    ))
                }
                Setting::Links => {
                    return Err(format!(
                        "{option} with {chosen_by} quic: QUIC carries all the streams on one connection over one \
                         UDP socket, so they cannot be spread over links; drop {option}, or use {chosen_by} tcp or tls"
                    ))
                }
            };
            return Err(format!("{option} with {chosen_by} quic: {why}; drop {option}"));
        }
        super::check_tls_options(self, asked)
    }

    fn own_congestion_control(&self) -> bool {
        true
    }

    /// The connection's figures of each end (version, path MTU, packets,
    /// losses, GSO/GRO), where the connection's figures are shown.
    fn write_details(
        &self,
        trial: &crate::model::TrialResult,
        details: super::Details,
        out: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        match details {
            super::Details::Handshakes => Ok(()),
            super::Details::Connection | super::Details::Costs => write_details(trial, out),
        }
    }

    fn full_packet(&self, trial: &crate::model::TrialResult, ipv6: bool) -> Option<(u64, u64)> {
        full_packet(trial, ipv6)
    }

    /// Its UDP socket's size, which nicbench sets itself.
    fn default_buffers_note(&self) -> Option<String> {
        Some(format!(
            "QUIC: {} asked each way, as quinn's perf asks, which Linux doubles, up to net.core.wmem_max/rmem_max",
            crate::units::Size(endpoint::DEFAULT_BUFFER_BYTES)
        ))
    }

    /// The ciphers' one-core speeds and the agent's certificate, as for
    /// TLS: QUIC protects its packets with the suite the handshake chose.
    fn host_facts(&self, facts: &mut crate::model::HostFacts) {
        super::tls::Tls.host_facts(facts)
    }

    fn serve(
        &self,
        net: &AgentNet,
        options: &ConnectOptions,
        streams: usize,
    ) -> Result<Box<dyn Serving>, WorkloadError> {
        Ok(Box::new(stream::QuicServing::bind(net, options, streams)?))
    }

    fn dial(
        &self,
        net: &ClientNet,
        port: u16,
        ids: &[u32],
        options: &ConnectOptions,
    ) -> Result<Streams, WorkloadError> {
        stream::dial(net, port, ids, options)
    }

    fn serve_transactions(
        &self,
        net: &AgentNet,
        options: &ConnectOptions,
    ) -> Result<Box<dyn TransactionServing>, WorkloadError> {
        Ok(Box::new(transaction::QuicAnswers::bind(net, options)?))
    }

    fn dial_transactions(
        &self,
        net: &ClientNet,
        port: u16,
        ids: &[u32],
        options: &ConnectOptions,
    ) -> Result<Transactions<Box<dyn Dialing>>, WorkloadError> {
        transaction::dial(net, port, ids, options)
    }
}

/// Key of a QUIC stream end's connection figures in its extras.
pub const KEY: &str = "quic";

/// The congestion controllers quinn has, as `-C` names them over QUIC.
pub const CONGESTION_CONTROLLERS: [&str; 3] = ["cubic", "newreno", "bbr"];

/// The congestion controller quinn runs when `-C` names none.
pub const DEFAULT_CONGESTION: &str = "cubic";

/// A QUIC stream end's view of its connection when the stream ended: the
/// connection's figures, the same connection for every stream of a side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QuicEnd {
    /// `QUICv1`.
    pub version: String,
    /// quinn's congestion controller: `cubic`, `newreno`, `bbr`.
    pub congestion: String,
    /// The most datagrams this end's socket sends in one system call (UDP
    /// GSO; 1 = none).
    pub gso_segments: u64,
    /// The most datagrams one receive may coalesce (UDP GRO; 1 = none).
    pub gro_segments: u64,
    /// The path MTU quinn settled on (UDP payload bytes of its packets).
    pub path_mtu_bytes: u64,
    /// Smoothed round-trip time, seconds.
    pub rtt_seconds: f64,
    /// Congestion window when the stream ended, bytes.
    pub cwnd_bytes: u64,
    /// Packets this end sent and lost, and congestion events.
    pub sent_packets: u64,
    pub lost_packets: u64,
    pub lost_bytes: u64,
    pub congestion_events: u64,
    /// UDP datagrams and system calls each way: datagrams per call is what
    /// GSO and GRO saved.
    pub udp_tx_datagrams: u64,
    pub udp_tx_calls: u64,
    pub udp_rx_datagrams: u64,
    pub udp_rx_calls: u64,
}

/// The QUIC line under a result: the client's view of its connection.
///
/// ```text
/// QUIC: cubic, path MTU 1452 B, GSO 64 / GRO 64 datagrams per call; client sent 912345 packets, lost 12 (0.00%), 3 congestion events; 21.3 datagrams per send call; rtt 0.08 ms
/// ```
/// quinn's bytes around a STREAM frame's data in a full packet of a bulk
/// stream (quinn-proto 0.11): the short header (1 byte and quinn's 8-byte
/// connection id), a 2-byte packet number (up to 32768 packets in
/// flight), the 16-byte AEAD tag, and the frame's type (1), stream id (1)
/// and offset (4 bytes from 16 KiB to 1 GiB into the stream); a frame
/// that fills its packet carries no length.
pub const PACKET_OVERHEAD_BYTES: u64 = 1 + 8 + 2 + 16 + 1 + 1 + 4;

/// The full-size packet of a QUIC trial for the line-rate model: quinn
/// fills UDP payloads of the path MTU it settled on (1452 B unless its
/// discovery went higher, whatever the link's MTU), not of the link's
/// MTU, and [`PACKET_OVERHEAD_BYTES`] of each are its own. The IP packet
/// and the stream data it carries; None when no end has QUIC's figures.
pub fn full_packet(trial: &crate::model::TrialResult, ipv6: bool) -> Option<(u64, u64)> {
    let mtu = trial
        .streams
        .iter()
        .flat_map(|s| [&s.sender, &s.receiver])
        .filter_map(|end| end.extras.get::<QuicEnd>(KEY))
        .map(|q| q.path_mtu_bytes)
        .max()?;
    let ip_and_udp = if ipv6 { 40 + 8 } else { 20 + 8 };
    (mtu > PACKET_OVERHEAD_BYTES).then(|| (mtu + ip_and_udp, mtu - PACKET_OVERHEAD_BYTES))
}

pub fn write_details(trial: &crate::model::TrialResult, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    use crate::model::Party;
    let mut ends: Vec<(Party, QuicEnd)> = Vec::new();
    for s in &trial.streams {
        for (end, party) in [(&s.sender, s.flow.sender()), (&s.receiver, s.flow.receiver())] {
            if let Some(q) = end.extras.get::<QuicEnd>(KEY) {
                ends.push((party, q));
            }
        }
    }
    for party in [Party::Client, Party::Agent] {
        // The stream that ended last saw the most of the connection.
        let Some(q) = ends
            .iter()
            .filter(|(p, _)| *p == party)
            .map(|(_, q)| q)
            .max_by_key(|q| q.sent_packets)
        else {
            continue;
        };
        let per_call = |d: u64, c: u64| if c > 0 { d as f64 / c as f64 } else { 0.0 };
        writeln!(
            out,
            "QUIC {}: {} {}, path MTU {} B, GSO {} / GRO {} datagrams per call; sent {} packets, lost {} ({:.2}%), \
             {} congestion events; {:.1} datagrams per send call, {:.1} per receive call; rtt {:.2} ms",
            party.as_str(),
            q.version,
            q.congestion,
            q.path_mtu_bytes,
            q.gso_segments,
            q.gro_segments,
            q.sent_packets,
            q.lost_packets,
            q.lost_packets as f64 * 100.0 / q.sent_packets.max(1) as f64,
            q.congestion_events,
            per_call(q.udp_tx_datagrams, q.udp_tx_calls),
            per_call(q.udp_rx_datagrams, q.udp_rx_calls),
            q.rtt_seconds * 1000.0
        )?;
    }
    Ok(())
}
