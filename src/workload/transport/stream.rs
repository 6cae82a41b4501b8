//! A transport's connections as a workload gets them. The agent's end
//! serves ([`super::Transport::serve`], a [`Serving`] bound before the test
//! so its port goes to the client), the client's end dials
//! ([`super::Transport::dial`]); either ends with [`Streams`]: each stream
//! admitted, its handshake done and its certificate checked, as a
//! [`Stream`] the workload runs its loops over, and what the connection
//! holds while they run ([`Held`]). The workload names no transport: it
//! sets its socket options ([`ConnectOptions::configure`]) and hands the
//! spec's TLS options through.
//!
//! Here: the plain kernel stream (TCP, MPTCP, AF_UNIX) every connection
//! transport has by default. TLS and QUIC wrap or replace it in their own
//! folders.

use std::io;
use std::time::Instant;

use socket2::Socket;

use super::admission::{self, Configure, JoinListener};
use super::encryption::Encryption;
use super::tcp::{receive_stream, send_stream, ReceivePath, SendPath};
use super::wire::{Plain, Wire};
use super::Transport;
use crate::model::{SideOptions, SocketBuffers};
use crate::probe::tcpinfo;
use crate::workload::base::runner::{run_streams, StreamContext, StreamTask, TaskEnd};
use crate::workload::base::{Aborter, AgentNet, ClientNet, RunControl, SideOutcome, WorkloadError};

/// The loops every kernel byte stream runs (copying `send(2)`,
/// `sendfile(2)`, `MSG_ZEROCOPY`; copying or discarding receive), their
/// paths, the kernel's pacing, and what the fast paths did ([`TcpEnd`](loops::TcpEnd)
/// under [`KEY`](loops::KEY)): the kernel stream's own, so that a workload
/// runs them over any transport's plain socket without naming one.
pub mod loops {
    pub(crate) use super::super::tcp::{pace, receive_stream, send_stream_held};
    pub use super::super::tcp::{zerocopy, ReceivePath, SendPath, TcpEnd, KEY};
}

/// What a test asks of its transport's connections.
pub struct ConnectOptions<'a> {
    /// This end's buffers (a kernel socket's, or QUIC's UDP socket's).
    pub side: &'a SideOptions,
    /// The workload's options of a kernel socket, set before it connects
    /// or listens, and again once accepted (not all are inherited).
    pub configure: Configure<'a>,
    /// The spec's TLS options, for a transport that shakes hands with TLS
    /// 1.3 (their defaults where None); others leave them.
    pub tls: Option<&'a Encryption>,
    /// A congestion controller of the transport's own (QUIC's); None: its
    /// default. A kernel socket's is the workload's `configure`.
    pub congestion: Option<&'a str>,
}

impl<'a> ConnectOptions<'a> {
    /// This end's buffers and socket options, the spec's TLS options, and
    /// the transport's own congestion control.
    pub fn new(side: &'a SideOptions, configure: Configure<'a>, tls: Option<&'a Encryption>) -> Self {
        ConnectOptions {
            side,
            configure,
            tls,
            congestion: None,
        }
    }
}

/// The agent's end of a transport's connections, bound before the test.
pub trait Serving: Send {
    /// The port the client dials.
    fn port(&self) -> u16;
    /// Accepts a stream for each of `ids` by `deadline` (refusing anyone
    /// else), each with `configure` set again, its handshake done.
    fn accept(self: Box<Self>, ids: &[u32], configure: Configure, deadline: Instant) -> Result<Streams, WorkloadError>;
}

/// A message loop run over a stream (see [`Stream::carry`]): its kernel
/// socket where it has one, and the stream as a [`Wire`].
pub type Body<'a> = Box<dyn FnOnce(Option<&Socket>, &mut dyn Wire) -> TaskEnd + 'a>;

/// One stream of a transport, connected, admitted and its handshake done.
pub trait Stream: Send {
    /// Its kernel socket, for the workload's probes and options (none for
    /// a QUIC stream).
    fn socket(&self) -> Option<&Socket>;
    /// The buffers it runs with.
    fn buffers(&self) -> SocketBuffers;
    /// Ends the stream from another thread so blocked calls return.
    fn aborter(&self) -> Aborter;
    /// Whether the other end is on this host.
    fn peer_on_this_host(&self) -> bool;
    /// Runs a message loop (rr, the sweep) over the stream, then puts what
    /// the transport recorded in the stream end: the handshake, with this
    /// end's one-core cipher speed (of sealing when `seals`, this end
    /// sending the bulk; of opening otherwise), and QUIC's figures.
    fn carry(self: Box<Self>, seals: bool, body: Body) -> TaskEnd;
    /// Sends `message`-byte messages until stopped or `quota` bytes are
    /// sent, by `path` where the transport leaves the bytes to the kernel.
    fn send(self: Box<Self>, message: usize, quota: Option<u64>, path: SendPath, ctx: &StreamContext) -> TaskEnd;
    /// Receives until the sender ends, by `path` where the kernel keeps
    /// the bytes as sent.
    fn receive(self: Box<Self>, message: usize, path: ReceivePath, ctx: &StreamContext) -> TaskEnd;
}

/// One end's streams of a test, by id, and what their connection holds.
pub struct Streams {
    pub streams: Vec<(u32, Box<dyn Stream>)>,
    pub held: Held,
}

impl Streams {
    /// The one stream of a workload that runs one (`what` names it when
    /// it did not come).
    pub fn one(self, what: &str) -> Result<(Box<dyn Stream>, Held), WorkloadError> {
        let Streams { mut streams, held } = self;
        let (_, stream) = streams
            .pop()
            .ok_or_else(|| WorkloadError::Setup(format!("{what} did not arrive")))?;
        Ok((stream, held))
    }
}

/// What a connection holds while its streams run: MPTCP's listener, for
/// the paths that join; QUIC's endpoint, which the stream threads drive.
pub trait Hold: Send {
    /// Before the streams run.
    fn start(&self) {}
    /// Once every stream has ended.
    fn finish(&self) {}
}

/// A connection's [`Hold`], until its streams have run.
pub struct Held(pub Box<dyn Hold>);

impl Held {
    /// Runs `tasks` (the streams' bodies) as [`run_streams`] does, with
    /// what the connection holds around them.
    pub fn run(self, tasks: Vec<StreamTask>, control: &RunControl) -> SideOutcome {
        self.0.start();
        let outcome = run_streams(tasks, control);
        self.0.finish();
        outcome
    }
}

impl Hold for JoinListener {}

/// A kernel stream socket: TCP, MPTCP, AF_UNIX.
pub struct PlainStream(pub Socket);

impl Stream for PlainStream {
    fn socket(&self) -> Option<&Socket> {
        Some(&self.0)
    }

    fn buffers(&self) -> SocketBuffers {
        tcpinfo::socket_buffers(&self.0)
    }

    fn aborter(&self) -> Aborter {
        admission::aborter(&[&self.0])
    }

    fn peer_on_this_host(&self) -> bool {
        same_host(&self.0)
    }

    fn carry(self: Box<Self>, _: bool, body: Body) -> TaskEnd {
        body(Some(&self.0), &mut Plain(&self.0))
    }

    fn send(self: Box<Self>, message: usize, quota: Option<u64>, path: SendPath, ctx: &StreamContext) -> TaskEnd {
        send_stream(self.0, message, quota, path, ctx)
    }

    fn receive(self: Box<Self>, message: usize, path: ReceivePath, ctx: &StreamContext) -> TaskEnd {
        receive_stream(self.0, message, path, ctx)
    }
}

/// Whether both ends of a kernel socket are on this host (loopback, or the
/// same address at both ends).
pub fn same_host(socket: &Socket) -> bool {
    let ip = |a: io::Result<socket2::SockAddr>| a.ok().and_then(|a| a.as_socket()).map(|a| a.ip());
    match (ip(socket.local_addr()), ip(socket.peer_addr())) {
        (Some(local), Some(peer)) => local == peer || (local.is_loopback() && peer.is_loopback()),
        _ => false,
    }
}

/// The agent's listener of a kernel stream transport.
pub struct PlainServing {
    listener: Socket,
    net: AgentNet,
    /// Kept while the streams run (MPTCP's joins).
    joins: bool,
}

impl PlainServing {
    /// `transport`'s listener ([`Transport::listen`]) for `streams` streams.
    pub fn bind<T: Transport + ?Sized>(
        transport: &T,
        net: &AgentNet,
        options: &ConnectOptions,
        streams: usize,
    ) -> Result<PlainServing, WorkloadError> {
        let listener = transport.listen(net.local_ip, (streams as i32).max(16), options.configure)?;
        Ok(PlainServing {
            listener,
            net: net.clone(),
            joins: transport.joins_other_addresses(),
        })
    }

    /// The sockets of `ids`, admitted and set up again, and the listener
    /// as long as the connection needs it.
    pub fn accept_sockets(
        self,
        ids: &[u32],
        configure: Configure,
        deadline: Instant,
    ) -> Result<(Vec<(u32, Socket)>, Held), WorkloadError> {
        let accepted = admission::accept_streams(&self.listener, &self.net, ids, deadline)?;
        for socket in accepted.values() {
            configure(socket)?;
        }
        let kept = JoinListener::keep_if(self.joins, self.listener);
        Ok((accepted.into_iter().collect(), Held(Box::new(kept))))
    }
}

impl Serving for PlainServing {
    fn port(&self) -> u16 {
        admission::local_port(&self.listener)
    }

    fn accept(self: Box<Self>, ids: &[u32], configure: Configure, deadline: Instant) -> Result<Streams, WorkloadError> {
        let (sockets, held) = self.accept_sockets(ids, configure, deadline)?;
        Ok(Streams {
            streams: sockets.into_iter().map(|(id, s)| (id, plain(s))).collect(),
            held,
        })
    }
}

fn plain(socket: Socket) -> Box<dyn Stream> {
    Box::new(PlainStream(socket))
}

/// The client's sockets of `ids` ([`Transport::connect`]), each having
/// presented the session token.
pub fn dial_sockets<T: Transport + ?Sized>(
    transport: &T,
    net: &ClientNet,
    port: u16,
    ids: &[u32],
    configure: Configure,
) -> Result<Vec<(u32, Socket)>, WorkloadError> {
    ids.iter()
        .map(|&id| {
            let socket = transport.connect(net, port, id, configure)?;
            admission::present_token(&socket, net, id)?;
            Ok((id, socket))
        })
        .collect()
}

/// The client's streams of a kernel stream transport.
pub fn dial_plain<T: Transport + ?Sized>(
    transport: &T,
    net: &ClientNet,
    port: u16,
    ids: &[u32],
    options: &ConnectOptions,
) -> Result<Streams, WorkloadError> {
    let sockets = dial_sockets(transport, net, port, ids, options.configure)?;
    Ok(Streams {
        streams: sockets.into_iter().map(|(id, s)| (id, plain(s))).collect(),
        held: Held(Box::new(JoinListener::none())),
    })
}
