//! Transports: what a workload's messages travel over. A test is a
//! workload crossed with a transport (neper's shape): `rr` over TCP and
//! `rr` over UDP differ by the transport they were handed, not by code of
//! their own.
//!
//! A transport is one file (or folder) here and one line in
//! [`REGISTRY`]. It declares how it delivers ([`Delivery`]: an ordered
//! byte stream over a connection, or datagrams), the sockets it opens,
//! whether this host can use it, and the framing the line-rate model
//! charges its messages. The shared parts sit beside it:
//! - [`admission`]: the data connections of every connection transport (a
//!   listener that admits only the control peer presenting the session
//!   token, the client's connect that presents it);
//! - [`tcp`]: the hot loops of a kernel byte stream (copying, `sendfile`,
//!   `MSG_ZEROCOPY`, discarding receive), which every kernel stream
//!   transport runs;
//! - [`mptcp`]: Multipath TCP, a stream transport over several paths;
//! - [`tls`]: TLS 1.3 from rustls over TCP, records sealed in user space;
//! - [`quic`]: QUIC from quinn, every stream of a test on one connection
//!   over UDP;
//! - [`udp`]: datagram sockets, their registration handshake, GSO/GRO and
//!   batched system calls, and the datagram header ([`udp::wire`]);
//! - [`stream`]: a transport's connections as a workload gets them (the
//!   agent serves, the client dials; each stream ready, its handshake
//!   done), and the plain kernel stream every connection transport has;
//! - [`transaction`]: a new connection per transaction (`rr --crr`), each
//!   admitted and its handshake done by the transport;
//! - [`datagram`]: a datagram transport's endpoints as a workload gets
//!   them (one socket per stream, claimed by the token-holding client);
//! - [`wire`]: a connected stream of any transport as one `Read + Write`
//!   for the message loops (rr, sweep).
//!
//! Workloads branch on [`Delivery`], never on a transport's name, so a new
//! stream transport runs under every workload that runs over TCP.
//! Specs and JSON name a transport by [`Transport::name`] (`"tcp"`,
//! `"udp"`), the strings they always held; `"mptcp"` is new.

pub mod admission;
pub mod datagram;
pub mod encryption;
pub mod mptcp;
pub mod quic;
pub mod shorthand;
pub mod stream;
pub mod tcp;
pub mod tls;
pub mod transaction;
pub mod udp;
pub mod unix;
pub mod wire;

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::linerate::Stack;
use crate::model::spec::{out_of_range, SpecError};
use crate::model::{TrialResult, Verdict};
use crate::workload::base::{AgentNet, ClientNet, WorkloadError};
use datagram::{DatagramServing, Endpoint};
use stream::{ConnectOptions, Serving, Streams};
use transaction::{Dialing, Secured, TransactionServing, Transactions};

/// Per-socket settings a workload applies before connecting or listening.
pub type Configure<'a> = &'a dyn Fn(&Socket) -> Result<(), WorkloadError>;

/// How a transport carries a workload's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// An ordered, reliable byte stream over a connection: messages are
    /// cut and joined as the stream likes, nothing is lost.
    Stream,
    /// Datagrams: each message travels alone and may be lost, reordered
    /// or duplicated; at most [`udp::wire::MAX_DATAGRAM_BYTES`] each.
    Datagram,
}

/// What a transport is, in the words every part reads: a table each
/// transport fills once ([`Transport::about`]).
pub struct About {
    /// The name on the command line, in specs and in JSON: `tcp`.
    pub name: &'static str,
    /// How it reads in a case and in text: `TCP`.
    pub label: &'static str,
    /// A stream or datagrams.
    pub delivery: Delivery,
    /// The socket type and protocol of its data sockets (None: the address
    /// family's own).
    pub socket: (Type, Option<Protocol>),
    /// The headers the line-rate model charges each of its packets: over
    /// IPv4, then over IPv6.
    pub stack: [Stack; 2],
}

/// One transport: its name and what the workloads need to know to run
/// over it.
pub trait Transport: Sync + 'static {
    /// Its names, delivery, sockets and framing.
    fn about(&self) -> &'static About;
    /// The name on the command line, in specs and in JSON: `tcp`.
    fn name(&self) -> &'static str {
        self.about().name
    }
    /// How it reads in a case and in text: `TCP`.
    fn label(&self) -> &'static str {
        self.about().label
    }
    /// A stream or datagrams.
    fn delivery(&self) -> Delivery {
        self.about().delivery
    }
    /// The socket type and protocol of its data sockets.
    fn socket(&self) -> (Type, Option<Protocol>) {
        self.about().socket
    }
    /// Whether this host can open its sockets; the error says what to
    /// enable. Checked by the client before a test and by the agent
    /// before it accepts one.
    fn available(&self) -> Result<(), String> {
        Ok(())
    }
    /// The headers the line-rate model charges each of its packets.
    fn stack(&self, ipv6: bool) -> Stack {
        self.about().stack[usize::from(ipv6)]
    }
    /// Whether the kernel carries its byte stream as it is, so the kernel
    /// stream loops (`send(2)`, `sendfile(2)`, `MSG_ZEROCOPY`, `MSG_TRUNC`)
    /// run on its sockets. False for a transport that seals records in
    /// user space (TLS): only workloads that hand it their bytes run over it.
    fn kernel_stream(&self) -> bool {
        true
    }
    /// Whether its connections open with a TLS 1.3 handshake (TLS, QUIC):
    /// the `--tls-*` options then apply, and each stream end's handshake
    /// is a `tls` part of its extras.
    fn tls_handshake(&self) -> bool {
        false
    }
    /// Whether a connection adds paths to the agent's other addresses
    /// (MPTCP's MP_JOIN): its data listener then takes every address of
    /// its family, not only the one the client came to.
    fn joins_other_addresses(&self) -> bool {
        false
    }
    /// What this transport measures of a connection of its own, read from
    /// one end's socket when the stream has ended and put in that stream
    /// end's extras under [`Transport::name`] (MPTCP: its subflows). None:
    /// nothing beyond TCP_INFO; an error is logged and leaves it out.
    fn connection_figures(&self, _socket: &socket2::Socket) -> Option<Result<serde_json::Value, String>> {
        None
    }
    /// The connection's TCP_INFO figures from its own `figures` (as
    /// [`Transport::connection_figures`] gave them), where the socket's
    /// TCP_INFO (`socket`) covers only part of it (MPTCP: the first
    /// subflow's). None: the socket's stands.
    fn connection_tcp_info(
        &self,
        _figures: &serde_json::Value,
        _socket: &crate::model::TcpInfo,
    ) -> Option<crate::model::TcpInfo> {
        None
    }
    /// Starts watching a connection while its stream runs, on a second
    /// handle of its socket (MPTCP: when each subflow joins); what it saw
    /// is folded into [`Transport::connection_figures`]'s at the end.
    /// None: nothing to watch.
    fn watch_connection(&self, _socket: &socket2::Socket) -> Option<Box<dyn ConnectionWatch>> {
        None
    }
    /// Adds to this host's facts what decides how its connections run
    /// (MPTCP: the path manager), for a test over it.
    fn host_facts(&self, _facts: &mut crate::model::HostFacts) {}
    /// Refuses what of `asked` it cannot do, saying why and what to drop.
    /// The default: TLS's options only over a TLS 1.3 handshake, and
    /// checked there ([`encryption::check`]).
    fn refuse(&self, asked: &Asked) -> Result<(), String> {
        check_tls_options(self, asked)
    }
    /// Whether a congestion controller of its own drives its connections
    /// (QUIC's, in quinn) instead of the kernel's: `-C` then names one of
    /// its own, which [`Transport::refuse`] checks.
    fn own_congestion_control(&self) -> bool {
        false
    }
    /// Puts its totals of `trial`, from its figures in the stream ends,
    /// into the trial's sum (TLS: the handshakes of TLS and QUIC alike, in
    /// `sum.tls`). A trial without its figures is left alone.
    fn summarize(&self, _trial: &mut TrialResult) {}
    /// Writes its lines under a result whose stream ends hold its figures,
    /// as many as the workload's text shows (`details`); nothing for a
    /// trial without them.
    fn write_details(&self, _trial: &TrialResult, _details: Details, _out: &mut dyn io::Write) -> io::Result<()> {
        Ok(())
    }
    /// The verdict's findings only it can give from its figures (TLS: the
    /// cipher took most of an end's CPU time).
    fn findings(&self, _trial: &TrialResult) -> Vec<Verdict> {
        Vec::new()
    }
    /// Why `trial` has no one link's line rate, where it spread a stream
    /// over several paths (MPTCP), in words for `Line rate: n/a (...)`.
    fn several_paths(&self, _trial: &TrialResult) -> Option<String> {
        None
    }
    /// The full-size packet of `trial` where it packs the bytes into
    /// datagrams of its own (QUIC): the IP packet and the payload it
    /// carries. None: the sockets tell it.
    fn full_packet(&self, _trial: &TrialResult, _ipv6: bool) -> Option<(u64, u64)> {
        None
    }
    /// Why a stream's buffers are what they are where nobody asked for a
    /// size and it has no TCP_INFO to show them (QUIC sizes its own UDP
    /// socket).
    fn default_buffers_note(&self) -> Option<String> {
        None
    }
    /// Whether its sockets take TCP's own options (`TCP_NODELAY`,
    /// `TCP_MAXSEG`, `TCP_CONGESTION`): workloads set them only then.
    fn tcp_options(&self) -> bool {
        true
    }
    /// Whether a blocking accept on its listener returns when the
    /// listener's SO_RCVTIMEO runs out. A listener whose accept waits on
    /// (MPTCP's, on Linux 6.x) is waited on in poll(2) instead, one more
    /// call per connection (`rr --crr` takes a connection per transaction).
    fn accept_heeds_timeout(&self) -> bool {
        true
    }
    /// Opens the agent's data listener on `ip`, the address the client
    /// came to (on every address of its family for a transport whose
    /// connections join at other addresses), at a port the kernel picks;
    /// `configure` runs before `listen` so accepted sockets inherit
    /// buffers and MSS. The token preamble
    /// ([`admission::accept_streams`]), not the address, admits a
    /// connection. A connection transport's own: the default is an IP
    /// socket of [`Transport::socket`].
    fn listen(&self, ip: IpAddr, backlog: i32, configure: Configure) -> Result<Socket, WorkloadError> {
        let ip = match (self.joins_other_addresses(), ip) {
            (false, ip) => ip,
            (true, IpAddr::V4(_)) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            (true, IpAddr::V6(_)) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let (kind, protocol) = self.socket();
        let socket = Socket::new(Domain::for_address(SocketAddr::new(ip, 0)), kind, protocol).map_err(
            WorkloadError::io(format!("creating the {} data listener", self.label())),
        )?;
        configure(&socket)?;
        socket
            .bind(&SocketAddr::new(ip, 0).into())
            .map_err(WorkloadError::io(format!("binding a data listener on {ip}")))?;
        socket
            .listen(backlog)
            .map_err(WorkloadError::io("listening for data connections"))?;
        Ok(socket)
    }
    /// Connects one data socket of stream `id` to the agent's listener at
    /// `port` (over the stream's link, where the test has links), with
    /// `configure` run before the connect; the caller then presents the
    /// session token ([`admission::connect_stream`]). The default is an IP
    /// socket of [`Transport::socket`].
    fn connect(&self, net: &ClientNet, port: u16, id: u32, configure: Configure) -> Result<Socket, WorkloadError> {
        let (bind, agent_ip) = net.route(id);
        let addr = SocketAddr::new(agent_ip, port);
        let (kind, protocol) = self.socket();
        // The errors' words are written only on an error: `rr --crr`
        // connects once per transaction.
        let socket = Socket::new(Domain::for_address(addr), kind, protocol)
            .map_err(|e| WorkloadError::io(format!("creating a {} data socket", self.label()))(e))?;
        if let Some(bind) = bind {
            socket
                .bind(&SocketAddr::new(bind, 0).into())
                .map_err(|e| WorkloadError::io(format!("binding the data socket to {bind}"))(e))?;
        }
        configure(&socket)?;
        socket
            .connect_timeout(&SockAddr::from(addr), Duration::from_secs(5))
            .map_err(|e| WorkloadError::io(format!("connecting data stream {id} to {addr}"))(e))?;
        Ok(socket)
    }
    /// The agent's end of a test of `streams` streams, bound on the
    /// address the client came to: its port goes to the client, and its
    /// accept hands the workload each stream ready, the handshake done.
    /// The default: a [`Transport::listen`] socket whose connections are
    /// the kernel's byte stream.
    fn serve(
        &self,
        net: &AgentNet,
        options: &ConnectOptions,
        streams: usize,
    ) -> Result<Box<dyn Serving>, WorkloadError> {
        Ok(Box::new(stream::PlainServing::bind(self, net, options, streams)?))
    }
    /// The client's streams `ids` to the agent's [`Transport::serve`] at
    /// `port`, each admitted and its handshake done. The default: a
    /// [`Transport::connect`] socket each.
    fn dial(
        &self,
        net: &ClientNet,
        port: u16,
        ids: &[u32],
        options: &ConnectOptions,
    ) -> Result<Streams, WorkloadError> {
        stream::dial_plain(self, net, port, ids, options)
    }
    /// The agent's datagram endpoints of a test, one per stream of `ids`,
    /// each bound on the address for its stream with `options`' buffers
    /// and socket options: their ports go to the client, and its accept
    /// hands each endpoint over once the token-holding client has claimed
    /// it. A datagram transport's own; a stream transport refuses.
    fn serve_datagrams(
        &self,
        _net: &AgentNet,
        _ids: &[u32],
        _options: &ConnectOptions,
    ) -> Result<Box<dyn DatagramServing>, WorkloadError> {
        Err(self.no_datagrams())
    }
    /// The client's datagram endpoints of streams `ids`, one per port the
    /// agent's [`Transport::serve_datagrams`] offered, each claimed there.
    fn dial_datagrams(
        &self,
        _net: &ClientNet,
        _ids: &[u32],
        _options: &ConnectOptions,
    ) -> Result<Vec<Endpoint>, WorkloadError> {
        Err(self.no_datagrams())
    }
    /// The agent's end of a test with a connection per transaction (`rr
    /// --crr`), bound before the test on the address the client came to
    /// with `options`' socket options: its port goes to the client, and
    /// its accept hands each stream its share of the connections that
    /// come. The default: the kernel byte stream's listener
    /// ([`transaction::serve_stream`]), with a TLS 1.3 handshake on each
    /// connection for a transport that has one ([`Transport::tls_handshake`]).
    fn serve_transactions(
        &self,
        net: &AgentNet,
        options: &ConnectOptions,
    ) -> Result<Box<dyn TransactionServing>, WorkloadError> {
        transaction::serve_stream(self.registered()?, net, options, Secured::of(self.tls_handshake()))
    }
    /// The client's streams `ids` of a test with a connection per
    /// transaction to the agent's [`Transport::serve_transactions`] at
    /// `port`. The default: a [`Transport::connect`] socket each time,
    /// and TLS's handshake on it where the transport has one.
    fn dial_transactions(
        &self,
        net: &ClientNet,
        port: u16,
        ids: &[u32],
        options: &ConnectOptions,
    ) -> Result<Transactions<Box<dyn Dialing>>, WorkloadError> {
        transaction::dial_stream(
            self.registered()?,
            net,
            port,
            ids,
            options,
            Secured::of(self.tls_handshake()),
        )
    }
    /// This transport as [`REGISTRY`] holds it, for what keeps it past a
    /// call; a datagram transport has no connections to keep.
    fn registered(&self) -> Result<Proto, WorkloadError> {
        if self.delivery() == Delivery::Datagram {
            return Err(WorkloadError::Setup(format!(
                "{} carries datagrams, not connections: a connection per transaction runs over a stream transport",
                self.label()
            )));
        }
        Proto::by_name(self.name()).map_err(WorkloadError::Setup)
    }
    /// The largest message one of its datagrams carries, and why (the
    /// largest UDP payload over IPv4); None for a byte stream.
    fn largest_message(&self) -> Option<(u64, &'static str)> {
        None
    }
    /// The error of a datagram endpoint asked of a stream transport.
    fn no_datagrams(&self) -> WorkloadError {
        WorkloadError::Setup(format!(
            "{} delivers a byte stream, not datagrams: a datagram workload runs over a datagram transport",
            self.label()
        ))
    }
}

/// A setting of a test, from an option, that a transport may not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting<'a> {
    /// TCP_MAXSEG.
    Mss,
    /// TCP_NODELAY.
    NoDelay,
    /// Sending without the user-to-kernel copy (sendfile, MSG_ZEROCOPY).
    ZeroCopy,
    /// Receiving with MSG_TRUNC: the kernel discards the data.
    Discard,
    /// The kernel's pacing of a socket (SO_MAX_PACING_RATE).
    Pacing,
    /// Records sealed in the kernel (kTLS).
    KernelTls,
    /// A congestion controller, by name.
    Congestion(&'a str),
    /// Streams spread over several links.
    Links,
    /// Polling the socket for data in a busy loop.
    Spin,
    /// TCP_QUICKACK.
    QuickAck,
    /// SO_BUSY_POLL.
    BusyPoll,
}

/// What a test asks of its transport beyond its streams
/// ([`Transport::refuse`]).
pub struct Asked<'a> {
    /// The option that chose the transport, as errors name it
    /// (`--transport`, `--proto`).
    pub chosen_by: &'a str,
    /// The options set, each with its name on the command line
    /// (`-M/--mss`), in the order they are checked.
    pub options: Vec<(&'a str, Setting<'a>)>,
    /// The spec's TLS options, as given.
    pub tls: Option<&'a encryption::Encryption>,
}

/// TLS's options refused without a TLS 1.3 handshake and checked with one:
/// every transport's part of [`Transport::refuse`].
pub fn check_tls_options(transport: &(impl Transport + ?Sized), asked: &Asked) -> Result<(), String> {
    let encrypted: Vec<&str> = REGISTRY
        .iter()
        .filter(|t| t.tls_handshake())
        .map(|t| t.name())
        .collect();
    encryption::check(
        transport.tls_handshake(),
        &encrypted.join(" or "),
        transport.name(),
        asked.tls,
    )
}

/// How many of a transport's own lines a workload's text shows under a
/// result ([`Transport::write_details`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Details {
    /// What the handshakes settled on (rr: its transactions say the rest).
    Handshakes,
    /// Besides, the connection's own figures: MPTCP's subflows, QUIC's
    /// packets (a sweep, a files transfer).
    Connection,
    /// Besides, what the cipher cost each end (bulk streams).
    Costs,
}

/// Every transport's totals of `trial` into its sum
/// ([`Transport::summarize`]).
pub fn summarize(trial: &mut TrialResult) {
    for transport in &REGISTRY {
        transport.summarize(trial);
    }
}

/// Every transport's lines under `trial`, in [`REGISTRY`]'s order
/// ([`Transport::write_details`]).
pub fn write_details(trial: &TrialResult, details: Details, out: &mut dyn io::Write) -> io::Result<()> {
    for transport in &REGISTRY {
        transport.write_details(trial, details, out)?;
    }
    Ok(())
}

/// Every transport's findings of `trial` ([`Transport::findings`]).
pub fn findings(trial: &TrialResult) -> Vec<Verdict> {
    REGISTRY
        .iter()
        .flat_map(|transport| transport.findings(trial))
        .collect()
}

/// Why `trial` has no one link's line rate, if a transport spread it over
/// several paths ([`Transport::several_paths`]).
pub fn several_paths(trial: &TrialResult) -> Option<String> {
    REGISTRY.iter().find_map(|transport| transport.several_paths(trial))
}

/// `trial`'s full-size packet, if a transport packed it itself
/// ([`Transport::full_packet`]).
pub fn full_packet(trial: &TrialResult, ipv6: bool) -> Option<(u64, u64)> {
    REGISTRY.iter().find_map(|transport| transport.full_packet(trial, ipv6))
}

/// Why the buffers of a stream without TCP_INFO are what they are
/// ([`Transport::default_buffers_note`]).
pub fn default_buffers_note() -> Option<String> {
    REGISTRY.iter().find_map(|transport| transport.default_buffers_note())
}

/// What a transport watched on a connection while its stream ran.
pub trait ConnectionWatch: Send {
    /// Stops watching and adds what was seen to the connection's figures
    /// (as [`Transport::connection_figures`] gave them).
    fn finish(self: Box<Self>, figures: &mut serde_json::Value);
}

/// A stream end's share of its transport's own figures (MPTCP's
/// subflows): a second handle on the connection's socket and the
/// transport's watch, taken before the stream's body owns the socket, read
/// into the end once the body has ended. Plain TCP takes nothing.
pub struct ConnectionFigures {
    transport: Proto,
    socket: Option<socket2::Socket>,
    watch: Option<Box<dyn ConnectionWatch>>,
}

impl ConnectionFigures {
    /// Starts watching `socket`'s connection, if its transport has figures
    /// of its own.
    pub fn start(transport: Proto, socket: &socket2::Socket) -> ConnectionFigures {
        let socket = (!transport.is_tcp()).then(|| socket.try_clone().ok()).flatten();
        let watch = socket.as_ref().and_then(|s| transport.watch_connection(s));
        ConnectionFigures {
            transport,
            socket,
            watch,
        }
    }

    /// Puts the connection's figures in `end`'s extras under the
    /// transport's name, with what the watch saw, and the connection's
    /// TCP_INFO figures where the socket's covered only part of it.
    pub fn add_to(self, end: &mut crate::workload::base::runner::TaskEnd) {
        let ConnectionFigures {
            transport,
            socket,
            watch,
        } = self;
        let Some(socket) = socket else { return };
        match transport.connection_figures(&socket) {
            Some(Ok(mut figures)) => {
                if let Some(watch) = watch {
                    watch.finish(&mut figures);
                }
                if let Some(info) = end
                    .tcp_info
                    .as_ref()
                    .and_then(|info| transport.connection_tcp_info(&figures, info))
                {
                    end.tcp_info = Some(info);
                }
                end.extras.set(transport.name(), &figures)
            }
            Some(Err(e)) => log::warn!("cannot read the {} connection's own figures: {e}", transport.label()),
            None => {}
        }
    }
}

/// A registered transport, as specs hold it: compared, printed and
/// (de)serialized by its name.
#[derive(Clone, Copy)]
pub struct Proto(&'static dyn Transport);

/// Every transport, in the order help lists them.
pub static REGISTRY: [Proto; 6] = [
    Proto::TCP,
    Proto::UDP,
    Proto::MPTCP,
    Proto::TLS,
    Proto::QUIC,
    Proto(&unix::Unix),
];

impl Proto {
    pub const TCP: Proto = Proto(&tcp::Tcp);
    pub const UDP: Proto = Proto(&udp::Udp);
    pub const MPTCP: Proto = Proto(&mptcp::Mptcp);
    pub const TLS: Proto = Proto(&tls::Tls);
    pub const QUIC: Proto = Proto(&quic::Quic);

    /// The transport named `name`, or what names there are.
    pub fn by_name(name: &str) -> Result<Proto, String> {
        REGISTRY.iter().find(|p| p.name() == name).copied().ok_or_else(|| {
            let names: Vec<&str> = REGISTRY.iter().map(|p| p.name()).collect();
            format!("unknown transport '{name}' (known: {})", names.join(", "))
        })
    }

    /// Whether this is plain TCP (a spec leaves its transport out then).
    pub fn is_tcp(&self) -> bool {
        *self == Proto::TCP
    }

    /// Whether messages travel as datagrams.
    pub fn is_datagram(self) -> bool {
        self.delivery() == Delivery::Datagram
    }

    /// Whether this transport can carry `workload`'s byte streams on this
    /// host: a stream transport that [`Transport::available`] allows. The
    /// error names the option and what to use instead.
    pub fn check_stream_for(self, workload: &str) -> Result<(), String> {
        if self.is_datagram() {
            return Err(format!(
                "--transport {self}: {workload} runs byte streams; for {} datagrams use the '{self}' workload",
                self.label()
            ));
        }
        self.available().map_err(|why| format!("--transport {self}: {why}"))
    }

    /// Checks a message size against what one of this transport's
    /// datagrams carries: at least `min` bytes (the workload's header), at
    /// most [`Transport::largest_message`]. A byte stream takes any size
    /// from `min`.
    pub fn check_message_size(self, option: &'static str, bytes: u64, min: u64) -> Result<(), SpecError> {
        let (largest, why) = self.largest_message().unwrap_or((u64::MAX, ""));
        if bytes < min || bytes > largest {
            let range = match largest {
                u64::MAX => format!("at least {min} bytes ({min} bytes carry nicbench's header)"),
                _ => format!("{min}..={largest} bytes ({largest} is {why}; {min} bytes carry nicbench's header)"),
            };
            return Err(out_of_range(option, range, format!("{bytes} bytes")));
        }
        Ok(())
    }

    /// Whether a workload that runs the kernel's stream loops on its
    /// sockets (rr, the sweep, files) can run over this transport; the
    /// error names the option and where it runs.
    pub fn check_kernel_stream(self, option: &str, workload: &str) -> Result<(), String> {
        match self.kernel_stream() {
            true => Ok(()),
            false => Err(format!(
                "{option} {self}: {workload} runs the kernel's stream loops on its sockets, which {} \
                 seals in user space; {} streams run under `nicbench tcp --transport {self}`",
                self.label(),
                self.label()
            )),
        }
    }
}

/// The registry's datagram transport, for a workload that runs over
/// datagrams and offers no choice of transport (`udp`): it asks for
/// datagrams, not for UDP by name.
pub fn datagrams() -> Proto {
    REGISTRY.iter().copied().find(|p| p.is_datagram()).unwrap_or(Proto::UDP)
}

impl Default for Proto {
    fn default() -> Proto {
        Proto::TCP
    }
}

impl std::ops::Deref for Proto {
    type Target = dyn Transport;
    fn deref(&self) -> &(dyn Transport + 'static) {
        self.0
    }
}

impl PartialEq for Proto {
    fn eq(&self, other: &Proto) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Proto {}

impl fmt::Debug for Proto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Proto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for Proto {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Proto {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Proto, D::Error> {
        let name = String::deserialize(deserializer)?;
        Proto::by_name(&name).map_err(serde::de::Error::custom)
    }
}

/// `--proto NAME` on the command line lists the registered transports.
impl clap::ValueEnum for Proto {
    fn value_variants<'a>() -> &'a [Proto] {
        &REGISTRY
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip_through_json() {
        for (i, p) in REGISTRY.iter().enumerate() {
            assert!(REGISTRY[..i].iter().all(|q| q.name() != p.name()), "{p} twice");
            let json = serde_json::to_string(p).unwrap();
            assert_eq!(json, format!("\"{}\"", p.name()));
            assert_eq!(serde_json::from_str::<Proto>(&json).unwrap(), *p);
            assert_eq!(Proto::by_name(p.name()).unwrap(), *p);
        }
    }

    #[test]
    fn an_unknown_name_lists_the_known_ones() {
        let err = serde_json::from_str::<Proto>("\"sctp\"").unwrap_err().to_string();
        assert!(err.contains("unknown transport 'sctp' (known: tcp, udp"), "{err}");
    }

    #[test]
    fn the_framing_follows_the_delivery() {
        assert_eq!(Proto::TCP.stack(false), Stack::Tcp4Ts);
        assert_eq!(Proto::UDP.stack(true), Stack::Udp6);
        assert!(Proto::UDP.is_datagram() && !Proto::TCP.is_datagram() && !Proto::MPTCP.is_datagram());
    }
}
