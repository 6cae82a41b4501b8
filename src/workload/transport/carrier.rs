//! A stream of any transport as a workload's end holds it: borrowed for
//! one loop ([`Connection`]) or owned for the whole test ([`Carrier`]);
//! either runs a message loop over it as a [`Wire`] and then puts in the
//! stream end what the transport recorded (the handshake, QUIC's figures).

use std::sync::Arc;

use socket2::Socket;

use super::quic::{self, endpoint::Connected, wire::QuicWire};
use super::tls::{self, session::Session, wire::TlsIo};
use super::wire::{Plain, Wire};
use crate::model::SocketBuffers;
use crate::workload::base::runner::{run_streams, StreamTask, TaskEnd};
use crate::workload::base::{Aborter, RunControl, SideOutcome};

/// A stream of one transport, ready for a message loop: what a workload's
/// end holds once its connection is set up.
pub enum Connection<'a> {
    /// A TCP or MPTCP socket.
    Plain(&'a Socket),
    /// A TCP socket and its TLS session, the handshake done (boxed: a
    /// rustls connection is over a kilobyte).
    Tls(&'a Socket, Box<Session>),
    /// A QUIC stream, both halves, of the end's connection.
    Quic(&'a Connected, quinn::SendStream, quinn::RecvStream),
}

impl Connection<'_> {
    /// Runs `body` over the connection as a [`Wire`] (and its kernel
    /// socket, where it has one), then puts what the transport recorded
    /// in the stream end: over TLS and QUIC the handshake, with this end's
    /// one-core cipher speed (`seals`: the speed of sealing, for the end
    /// whose direction carries the bulk; opening otherwise); over QUIC
    /// also the connection's figures.
    pub fn carry<T>(
        self,
        seals: bool,
        body: impl FnOnce(Option<&Socket>, &mut dyn Wire) -> (TaskEnd, T),
    ) -> (TaskEnd, T) {
        let (mut end, out, record) = match self {
            Connection::Plain(socket) => {
                let (end, out) = body(Some(socket), &mut Plain(socket));
                (end, out, None)
            }
            Connection::Tls(socket, session) => {
                let mut io = TlsIo::new(*session, socket);
                let (end, out) = body(Some(socket), &mut io);
                (end, out, Some(io.end))
            }
            Connection::Quic(connected, send, recv) => {
                let mut wire = QuicWire::new(&connected.local.driver, send, recv);
                let (mut end, out) = body(None, &mut wire);
                drop(wire);
                end.extras
                    .set(quic::KEY, &connected.local.figures(&connected.connection));
                (end, out, Some(connected.tls.clone()))
            }
        };
        if let Some(mut record) = record {
            record.cipher_one_core_bits_per_second = tls::one_core_speed(&record.cipher_suite, seals);
            end.extras.set(tls::KEY, &record);
        }
        (end, out)
    }
}

/// A stream an end owns for the whole test (the sweep's one connection):
/// what [`Connection`] borrows.
pub enum Carrier {
    Plain(Socket),
    /// Boxed: a rustls connection is over a kilobyte.
    Tls(Socket, Box<Session>),
    Quic(Arc<Connected>, quinn::SendStream, quinn::RecvStream),
}

impl Carrier {
    /// Runs `body` over the stream: see [`Connection::carry`].
    pub fn carry(self, seals: bool, body: impl FnOnce(Option<&Socket>, &mut dyn Wire) -> TaskEnd) -> TaskEnd {
        let run = |connection: Connection| connection.carry(seals, |socket, wire| (body(socket, wire), ())).0;
        match self {
            Carrier::Plain(socket) => run(Connection::Plain(&socket)),
            Carrier::Tls(socket, session) => run(Connection::Tls(&socket, session)),
            Carrier::Quic(connected, send, recv) => run(Connection::Quic(&connected, send, recv)),
        }
    }

    /// The kernel's socket of the stream (none over QUIC).
    pub fn socket(&self) -> Option<&Socket> {
        match self {
            Carrier::Plain(socket) | Carrier::Tls(socket, _) => Some(socket),
            Carrier::Quic(..) => None,
        }
    }

    /// The QUIC connection the stream is on.
    pub fn quic(&self) -> Option<Arc<Connected>> {
        match self {
            Carrier::Quic(connected, ..) => Some(connected.clone()),
            _ => None,
        }
    }

    /// The buffers the stream's socket has: the TCP socket's, or the
    /// QUIC endpoint's UDP socket's.
    pub fn buffers(&self) -> SocketBuffers {
        match self {
            Carrier::Plain(socket) | Carrier::Tls(socket, _) => crate::probe::tcpinfo::socket_buffers(socket),
            Carrier::Quic(connected, ..) => connected.local.buffers.clone(),
        }
    }

    /// Ends the stream from another thread: shuts the socket down, or
    /// closes the QUIC endpoint as aborted.
    pub fn aborter(&self) -> Aborter {
        match self {
            Carrier::Plain(socket) | Carrier::Tls(socket, _) => super::admission::aborter(&[socket]),
            Carrier::Quic(connected, ..) => {
                let endpoint = connected.local.endpoint.clone();
                Arc::new(move || endpoint.close(quinn::VarInt::from_u32(quic::endpoint::CLOSE_ABORTED), b"aborted"))
            }
        }
    }

    /// Runs `tasks` (the stream's body among them) as [`run_streams`]
    /// does; over QUIC the body's thread drives quinn meanwhile, and the
    /// connection is closed as done once they end.
    pub fn run_streams(quic: Option<Arc<Connected>>, tasks: Vec<StreamTask>, control: &RunControl) -> SideOutcome {
        if let Some(connected) = &quic {
            connected.local.driver.hand_over();
        }
        let outcome = run_streams(tasks, control);
        if let Some(connected) = &quic {
            connected.local.close(&connected.connection);
        }
        outcome
    }
}
