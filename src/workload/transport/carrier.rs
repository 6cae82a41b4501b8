//! A stream of any transport borrowed for one message loop
//! ([`Connection`]): it runs the loop over the stream as a [`Wire`] and
//! then puts in the stream end what the transport recorded (the
//! handshake, QUIC's figures). Each [`super::stream::Stream`] carries its
//! loops through it.

use socket2::Socket;

use super::quic::{self, endpoint::Connected, wire::QuicWire};
use super::tls::{self, session::Session, wire::TlsIo};
use super::wire::{Plain, Wire};
use crate::workload::base::runner::TaskEnd;

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
