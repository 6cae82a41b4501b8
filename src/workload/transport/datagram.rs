//! A datagram transport's endpoints as a workload gets them, the
//! counterpart of [`super::stream`] for transports that deliver datagrams.
//! The agent's end serves ([`super::Transport::serve_datagrams`]: one
//! socket per stream, bound before the test so its ports go to the client),
//! the client's end dials ([`super::Transport::dial_datagrams`]); either
//! ends with one [`Endpoint`] per stream, connected to its peer, which the
//! workload runs its loops over. Only the client holding the session token
//! claims an agent's endpoint: the transport's own handshake (UDP's
//! registration) admits it, and what else arrived is counted in
//! [`Endpoint::refused`].
//!
//! The workload names no transport: it asks the registry for the datagram
//! transport ([`super::datagrams`]) or takes the one the test chose, sets
//! its socket options ([`super::stream::ConnectOptions::configure`]) and
//! gets the sockets back ready.

use std::time::Instant;

use socket2::Socket;

use crate::workload::base::WorkloadError;

/// One stream's datagram socket, connected to the other end.
pub struct Endpoint {
    /// The stream it carries.
    pub id: u32,
    /// Bound, buffered and configured; connected to the peer, so the
    /// kernel drops every other sender's datagrams from then on.
    pub socket: Socket,
    /// Datagrams refused on the way (not the session's handshake, or not
    /// from an address that proved itself); 0 at the client.
    pub refused: u64,
}

/// The agent's datagram endpoints of a test, bound before it.
pub trait DatagramServing: Send {
    /// One port per stream, in the order of the ids it was bound for: the
    /// client's [`super::Transport::dial_datagrams`] takes them in the
    /// same order.
    fn ports(&self) -> Vec<u16>;
    /// Waits until every stream's client has claimed its endpoint (by
    /// `deadline`), connecting each to it.
    fn accept(self: Box<Self>, deadline: Instant) -> Result<Vec<Endpoint>, WorkloadError>;
}

/// What each end of a datagram stream counted, as the loops leave it in
/// the stream end's extras.
pub use super::udp::counts;
/// The loops a workload runs over its datagram endpoints (paced batches,
/// counts, jitter, drops, arrival stamps): the datagram transport's own,
/// so that a workload runs them without naming the transport.
pub use super::udp::loops;
/// The datagram header (its length is the smallest message) and the
/// largest datagram the loops send.
pub use super::udp::wire::{DatagramHeader, HEADER_LEN, MAX_DATAGRAM_BYTES};
