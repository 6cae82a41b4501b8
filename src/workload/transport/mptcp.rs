//! Multipath TCP (`IPPROTO_MPTCP`, Linux 5.6+): one byte stream the
//! kernel spreads over subflows on several paths. To the workloads it is a
//! byte stream like TCP: the same admission, the same hot loops, the same
//! socket calls. What is its own is the socket's protocol, the check that
//! this host (this network namespace) has it enabled, and the subflow
//! figures `probe::mptcp` reads from the kernel.

use socket2::{Protocol, Type};

use super::{About, ConnectionWatch, Delivery, Transport};
use crate::linerate::Stack;
use crate::probe::mptcp;

/// Multipath TCP.
pub struct Mptcp;

static ABOUT: About = About {
    name: "mptcp",
    label: "MPTCP",
    delivery: Delivery::Stream,
    socket: (Type::STREAM, Some(Protocol::MPTCP)),
    // TCP's headers with timestamps. The model leaves out the DSS option
    // MPTCP adds to data segments (up to 28 bytes), so an MPTCP share of
    // the line rate reads up to 2% high at MTU 1500.
    stack: [Stack::Tcp4Ts, Stack::Tcp6Ts],
};

impl Transport for Mptcp {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    /// Checked on Linux 6.x: a lone MPTCP listener with a 1 s SO_RCVTIMEO
    /// still waited in accept after 10 s.
    fn accept_heeds_timeout(&self) -> bool {
        false
    }

    /// Refused with what to enable: a kernel without CONFIG_MPTCP, or a
    /// network namespace with `net.mptcp.enabled=0`.
    fn available(&self) -> Result<(), String> {
        mptcp::availability().map_err(|e| e.to_string())
    }

    /// Each stream's subflows, where the connection's figures are shown.
    fn write_details(
        &self,
        trial: &crate::model::TrialResult,
        details: super::Details,
        out: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        if details >= super::Details::Connection {
            for stream in &trial.streams {
                write_subflows(stream, out)?;
            }
        }
        Ok(())
    }

    fn several_paths(&self, trial: &crate::model::TrialResult) -> Option<String> {
        several_paths(trial)
    }

    /// A subflow joins at the address the agent announced on another link
    /// (ADD_ADDR), at the data port: the listener must be there too.
    fn joins_other_addresses(&self) -> bool {
        true
    }

    /// The connection and each subflow as this end's kernel counts them
    /// ([`mptcp::MptcpConnection`]): read once the stream has ended, so the
    /// byte counts are the whole connection's, warm-up included. Each
    /// subflow gets this end's interface of it (name, MTU, speed, tbf rate).
    fn connection_figures(&self, socket: &socket2::Socket) -> Option<Result<serde_json::Value, String>> {
        Some(
            mptcp::connection(socket)
                .map(|mut c| {
                    for s in &mut c.subflows {
                        if !s.local.ip().is_unspecified() {
                            s.interface = Some(crate::probe::nic::link_end(s.local.ip().to_canonical()));
                        }
                    }
                    c
                })
                .map_err(|e| e.to_string())
                .and_then(|c| serde_json::to_value(c).map_err(|e| e.to_string())),
        )
    }

    /// TCP_INFO on an MPTCP socket answers for its first subflow alone; the
    /// connection's is its subflows' together ([`connection_tcp_info`]).
    fn connection_tcp_info(
        &self,
        figures: &serde_json::Value,
        socket: &crate::model::TcpInfo,
    ) -> Option<crate::model::TcpInfo> {
        let connection: mptcp::MptcpConnection = serde::Deserialize::deserialize(figures).ok()?;
        connection_tcp_info(&connection, socket)
    }

    /// When each subflow joins, polled while the stream runs.
    fn watch_connection(&self, socket: &socket2::Socket) -> Option<Box<dyn ConnectionWatch>> {
        let handle = socket
            .try_clone()
            .map_err(|e| log::warn!("cannot time the MPTCP subflows' joins: {e}"))
            .ok()?;
        mptcp::JoinWatch::start(handle).map(|w| Box::new(Joins(w)) as Box<dyn ConnectionWatch>)
    }

    /// The path manager of this host's namespace: its limits and endpoints
    /// decide which subflows a connection gets.
    fn host_facts(&self, facts: &mut crate::model::HostFacts) {
        facts.mptcp = Some(mptcp::path_manager());
    }
}

/// A connection's TCP_INFO figures from its subflows': retransmissions,
/// bytes, congestion windows and rates summed; round trips as their mean
/// weighted by each subflow's bytes; the MSS the smallest. What has no
/// sum (busy and limited times, data segments) is left out: the subflows
/// have theirs. The rest (congestion control, path MTU, the peer's window,
/// which is the connection's) stays the socket's. None for a fallback,
/// whose one subflow the socket's TCP_INFO already is.
pub fn connection_tcp_info(
    connection: &mptcp::MptcpConnection,
    socket: &crate::model::TcpInfo,
) -> Option<crate::model::TcpInfo> {
    let subflows = &connection.subflows;
    if connection.fallback || subflows.is_empty() {
        return None;
    }
    let all = |f: fn(&mptcp::Subflow) -> Option<u64>| subflows.iter().map(f).sum::<Option<u64>>();
    let rates = |f: fn(&mptcp::Subflow) -> Option<f64>| subflows.iter().map(f).sum::<Option<f64>>();
    let weight = |s: &mptcp::Subflow| s.bytes_sent.or(s.bytes_received).unwrap_or(0) as f64;
    let weights: f64 = subflows.iter().map(weight).sum();
    let mean = |f: fn(&mptcp::Subflow) -> u32| -> u32 {
        match weights > 0.0 {
            true => (subflows.iter().map(|s| f(s) as f64 * weight(s)).sum::<f64>() / weights).round() as u32,
            false => (subflows.iter().map(|s| f(s) as f64).sum::<f64>() / subflows.len() as f64).round() as u32,
        }
    };
    Some(crate::model::TcpInfo {
        retransmits: subflows.iter().map(|s| u64::from(s.total_retrans)).sum(),
        bytes_retransmitted: all(|s| s.bytes_retrans),
        bytes_sent: all(|s| s.bytes_sent),
        data_segments_sent: None,
        rtt_us: mean(|s| s.rtt_us),
        rtt_var_us: mean(|s| s.rtt_var_us),
        congestion_window_segments: subflows.iter().map(|s| s.congestion_window_segments).sum(),
        send_mss_bytes: subflows
            .iter()
            .map(|s| s.send_mss_bytes)
            .min()
            .unwrap_or(socket.send_mss_bytes),
        busy_us: None,
        rwnd_limited_us: None,
        sndbuf_limited_us: None,
        pacing_rate_bits_per_second: rates(|s| s.pacing_rate_bits_per_second),
        delivery_rate_bits_per_second: rates(|s| s.delivery_rate_bits_per_second),
        ..socket.clone()
    })
}

/// The join times of a connection's subflows.
struct Joins(mptcp::JoinWatch);

impl ConnectionWatch for Joins {
    fn finish(self: Box<Self>, figures: &mut serde_json::Value) {
        let Ok(mut connection) = <mptcp::MptcpConnection as serde::Deserialize>::deserialize(&*figures) else {
            return;
        };
        self.0.finish(&mut connection);
        if let Ok(value) = serde_json::to_value(connection) {
            *figures = value;
        }
    }
}

/// The figures of an MPTCP stream end, in its extras under this key.
pub const KEY: &str = "mptcp";

/// One subflow of a stream, both ends' views joined by its addresses.
#[derive(Debug, Clone, PartialEq)]
pub struct SubflowShare {
    /// The sender's address and the receiver's, as the sender names them.
    pub from: std::net::SocketAddr,
    pub to: std::net::SocketAddr,
    /// The data it carried: the receiver's in-order bytes, else the
    /// sender's bytes sent less its retransmissions.
    pub bytes: u64,
    /// Its part of the bytes all the stream's subflows carried.
    pub share_percent: f64,
    /// Its part of the stream's receiver rate: `share_percent` of it.
    pub bits_per_second: f64,
    /// The sender's view: retransmissions, round trip, idle time.
    pub sender: Option<mptcp::Subflow>,
}

/// The MPTCP figures of each end of `stream` (None for an end without
/// them: not an MPTCP stream, or a kernel that did not answer).
pub fn ends(stream: &crate::model::StreamResult) -> (Option<mptcp::MptcpConnection>, Option<mptcp::MptcpConnection>) {
    (stream.sender.extras.get(KEY), stream.receiver.extras.get(KEY))
}

/// An address as both ends name it: an IPv4-mapped IPv6 address (a dual
/// stack listener's view) as plain IPv4.
fn canonical(a: std::net::SocketAddr) -> std::net::SocketAddr {
    std::net::SocketAddr::new(a.ip().to_canonical(), a.port())
}

/// Each subflow of `stream` with its part of the data and of the rate;
/// empty when neither end has MPTCP figures.
pub fn shares(stream: &crate::model::StreamResult) -> Vec<SubflowShare> {
    let (sender, receiver) = ends(stream);
    let received = |from: std::net::SocketAddr, to: std::net::SocketAddr| {
        receiver.as_ref()?.subflows.iter().find_map(|s| {
            (canonical(s.remote) == from && canonical(s.local) == to)
                .then_some(s.bytes_received)
                .flatten()
        })
    };
    let mut shares: Vec<SubflowShare> = match (&sender, &receiver) {
        (Some(c), _) => c
            .subflows
            .iter()
            .map(|s| {
                let (from, to) = (canonical(s.local), canonical(s.remote));
                let sent = s.bytes_sent.unwrap_or(0).saturating_sub(s.bytes_retrans.unwrap_or(0));
                SubflowShare {
                    from,
                    to,
                    bytes: received(from, to).unwrap_or(sent),
                    share_percent: 0.0,
                    bits_per_second: 0.0,
                    sender: Some(s.clone()),
                }
            })
            .collect(),
        (None, Some(c)) => c
            .subflows
            .iter()
            .map(|s| SubflowShare {
                from: canonical(s.remote),
                to: canonical(s.local),
                bytes: s.bytes_received.unwrap_or(0),
                share_percent: 0.0,
                bits_per_second: 0.0,
                sender: None,
            })
            .collect(),
        (None, None) => Vec::new(),
    };
    let total: u64 = shares.iter().map(|s| s.bytes).sum();
    for s in &mut shares {
        s.share_percent = if total > 0 {
            s.bytes as f64 * 100.0 / total as f64
        } else {
            0.0
        };
        s.bits_per_second = stream.receiver.bits_per_second * s.share_percent / 100.0;
    }
    shares
}

/// The subflow lines of an MPTCP stream under the result:
///
/// ```text
/// MPTCP stream 1: 2 subflows (path manager: 1 extra, at most 2), MPTCP-level reinjections 0 B
///   10.0.1.1:41234 -> 10.0.1.2:5201: 50.2% of the data, 47.81 Mbit/s; retransmitted 0.1%, rtt 1.2 ms (min 0.9 ms)
///   10.0.2.1:40121 -> 10.0.2.2:5201: 49.8% of the data, 47.42 Mbit/s, joined 3 ms in; ...
/// ```
pub fn write_subflows(stream: &crate::model::StreamResult, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    use crate::units::{Bytes, Rate};
    let (sender, receiver) = ends(stream);
    let Some(connection) = sender.as_ref().or(receiver.as_ref()) else {
        return Ok(());
    };
    if connection.fallback {
        return writeln!(
            out,
            "MPTCP stream {}: fell back to plain TCP (the peer or a middlebox did not take MPTCP): one TCP connection",
            stream.stream_id
        );
    }
    let reinjected = sender
        .as_ref()
        .and_then(|c| c.bytes_retrans)
        .map_or(String::new(), |b| format!(", MPTCP-level reinjections {}", Bytes(b)));
    let shares = shares(stream);
    writeln!(
        out,
        "MPTCP stream {}: {} subflow{} (path manager: {} extra, at most {}){reinjected}",
        stream.stream_id,
        shares.len(),
        if shares.len() == 1 { "" } else { "s" },
        connection.extra_subflows,
        connection.extra_subflows_max
    )?;
    for s in &shares {
        let sender = s.sender.as_ref().map_or(String::new(), |f| {
            let retrans = match (f.bytes_sent, f.bytes_retrans) {
                (Some(sent), Some(again)) if sent > 0 => {
                    format!("retransmitted {:.1}%, ", again as f64 * 100.0 / sent as f64)
                }
                _ => format!("{} segments retransmitted, ", f.total_retrans),
            };
            let min = f.min_rtt_us.map_or(String::new(), |m| format!(" (min {m} us)"));
            format!(
                "; {retrans}rtt {} us{min}, last sent {} ms before the end",
                f.rtt_us, f.last_data_sent_ms
            )
        });
        let joined = s
            .sender
            .as_ref()
            .and_then(|f| f.joined_after_seconds)
            .or_else(|| joined_at_receiver(stream, s))
            .filter(|&t| t > 0.0)
            .map_or(String::new(), |t| format!(", joined {} in", Seconds(t)));
        writeln!(
            out,
            "  {} -> {}: {:.1}% of the data, {}{joined}{sender}",
            s.from,
            s.to,
            s.share_percent,
            Rate(s.bits_per_second)
        )?;
    }
    Ok(())
}

/// When the receiver first saw subflow `s` (its sender did not watch).
fn joined_at_receiver(stream: &crate::model::StreamResult, s: &SubflowShare) -> Option<f64> {
    let (_, receiver) = ends(stream);
    receiver?
        .subflows
        .iter()
        .find(|r| canonical(r.remote) == s.from && canonical(r.local) == s.to)?
        .joined_after_seconds
}

/// A time as the subflow lines give it: milliseconds under a second.
struct Seconds(f64);

impl std::fmt::Display for Seconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            t if t < 1.0 => write!(f, "{:.0} ms", t * 1000.0),
            t => write!(f, "{t:.2} s"),
        }
    }
}

/// Why a trial whose streams Multipath TCP spread over several paths has
/// no one link's line rate, in words for `Line rate: n/a (...)`; None for
/// one path.
pub fn several_paths(trial: &crate::model::TrialResult) -> Option<String> {
    let paths = paths(trial);
    (paths > 1).then(|| {
        format!(
            "Multipath TCP carried a stream over {paths} paths and not every path's link rate is known \
             (a virtual link's speed is nominal): shape the links (lab --rate) to weigh each path \
             against its own"
        )
    })
}

/// The most paths one MPTCP stream of `trial` used: its subflows' distinct
/// local addresses at either end (1 for plain TCP or one path).
pub fn paths(trial: &crate::model::TrialResult) -> usize {
    trial
        .streams
        .iter()
        .flat_map(|stream| {
            let (sender, receiver) = ends(stream);
            [sender, receiver].into_iter().flatten().map(|c| {
                let ips: std::collections::BTreeSet<std::net::IpAddr> =
                    c.subflows.iter().map(|s| canonical(s.local).ip()).collect();
                ips.len()
            })
        })
        .max()
        .unwrap_or(1)
        .max(1)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn subflow(local: &str, sent: u64, again: u64, retrans: u32, rtt: u32, cwnd: u32) -> serde_json::Value {
        json!({
            "local": local, "remote": "10.0.0.2:5201", "state": "ESTABLISHED",
            "bytes_sent": sent, "bytes_retrans": again, "total_retrans": retrans,
            "rtt_us": rtt, "rtt_var_us": rtt / 4, "congestion_window_segments": cwnd,
            "send_mss_bytes": 1448, "pacing_rate_bits_per_second": 100e6,
            "delivery_rate_bits_per_second": 90e6, "busy_us": 5_000_000,
            "last_data_sent_ms": 0, "last_data_received_ms": 0
        })
    }

    fn connection(fallback: bool) -> mptcp::MptcpConnection {
        serde_json::from_value(json!({
            "fallback": fallback, "remote_key_received": true, "token": 7,
            "subflows": [
                subflow("10.0.1.1:40000", 3_000_000, 30_000, 21, 1000, 10),
                subflow("10.0.2.1:40001", 1_000_000, 0, 0, 5000, 30),
            ],
            "extra_subflows": 1, "extra_subflows_max": 2, "add_addr_signal": 0,
            "add_addr_signal_max": 0, "add_addr_accepted": 1, "add_addr_accepted_max": 2
        }))
        .unwrap()
    }

    /// The socket's TCP_INFO is the first subflow's: the connection's sums
    /// the subflows' counts and weighs their round trips by bytes.
    #[test]
    fn the_connections_tcp_info_is_all_its_subflows() {
        let socket = crate::model::TcpInfo {
            retransmits: 21,
            bytes_sent: Some(3_000_000),
            bytes_retransmitted: Some(30_000),
            data_segments_sent: Some(2100),
            rtt_us: 1000,
            send_mss_bytes: 1448,
            congestion_control: "cubic".into(),
            busy_us: Some(5_000_000),
            rwnd_limited_us: Some(0),
            sndbuf_limited_us: Some(100),
            peer_window_bytes: Some(1 << 20),
            ..Default::default()
        };
        let info = connection_tcp_info(&connection(false), &socket).unwrap();
        assert_eq!(info.retransmits, 21);
        assert_eq!(
            (info.bytes_sent, info.bytes_retransmitted),
            (Some(4_000_000), Some(30_000))
        );
        assert_eq!(info.rtt_us, 2000, "(3 x 1000 + 1 x 5000) / 4");
        assert_eq!(info.congestion_window_segments, 40);
        assert_eq!(info.pacing_rate_bits_per_second, Some(200e6));
        assert_eq!(info.delivery_rate_bits_per_second, Some(180e6));
        assert_eq!(
            (info.busy_us, info.sndbuf_limited_us, info.data_segments_sent),
            (None, None, None)
        );
        assert_eq!(
            (info.congestion_control.as_str(), info.peer_window_bytes),
            ("cubic", Some(1 << 20))
        );
        // A fallback's one subflow is the socket's own TCP_INFO.
        assert_eq!(connection_tcp_info(&connection(true), &socket), None);
    }
}
