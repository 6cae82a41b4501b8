//! TCP, and the hot loops of every kernel byte stream: the sender
//! (copying `send(2)`, `sendfile(2)`, `MSG_ZEROCOPY`) and the receiver
//! (copying `recv(2)`, or `MSG_TRUNC` that discards) in `send.rs`, the
//! zero-copy completions in `zerocopy.rs`, and what those fast paths did
//! ([`TcpEnd`], kept in a stream end under [`KEY`]).

mod send;
pub mod zerocopy;

use serde::{Deserialize, Serialize};
use socket2::{Protocol, Socket, Type};

use super::{About, Delivery, Transport};
use crate::linerate::Stack;
use crate::probe::tcpinfo;
use crate::workload::base::WorkloadError;
pub(crate) use send::{pattern, receive_stream, send_stream, send_stream_held, RECEIVE_CHUNK};
pub use send::{ReceivePath, SendPath};
pub use zerocopy::MsgZeroCopy;

/// TCP.
pub struct Tcp;

static ABOUT: About = About {
    name: "tcp",
    label: "TCP",
    delivery: Delivery::Stream,
    socket: (Type::STREAM, Some(Protocol::TCP)),
    // Linux sends TCP with timestamps unless told not to.
    stack: [Stack::Tcp4Ts, Stack::Tcp6Ts],
};

impl Transport for Tcp {
    fn about(&self) -> &'static About {
        &ABOUT
    }
}

/// Key of the fast-path record of a stream end.
pub const KEY: &str = "tcp";

/// What the fast paths did on one end (present with `--zerocopy` on the
/// sender, `--discard` on the receiver): evidence, not the option echoed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpEnd {
    /// sendfile(2) calls that moved bytes (`-Z`, sender).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sendfile_calls: Option<u64>,
    /// What MSG_ZEROCOPY did (`--zerocopy=msg`, sender): sends, their
    /// completions, how many the kernel copied after all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msg_zerocopy: Option<MsgZeroCopy>,
    /// Whether the receive buffer was still never written at the end, i.e.
    /// the kernel discarded the data without copying it (`--discard`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive_buffer_untouched: Option<bool>,
    /// The pacing rate the sender's socket held (SO_MAX_PACING_RATE read
    /// back after setting it, `-b`), bits per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paced_bits_per_second: Option<u64>,
}

/// Paces a sender to `bits_per_second` (SO_MAX_PACING_RATE), the iperf3
/// peer tests' TCP senders included.
pub(crate) fn pace(socket: &Socket, bits_per_second: u64) -> Result<(), WorkloadError> {
    tcpinfo::set_max_pacing_rate(socket, bits_per_second).map_err(WorkloadError::io(format!(
        "pacing the sender to {} (SO_MAX_PACING_RATE, Linux 3.13+); run without -b",
        crate::units::Rate(bits_per_second as f64)
    )))
}
