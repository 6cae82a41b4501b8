//! The QUIC endpoints of a test: a runtime thread per end that drives
//! quinn, the UDP socket it sends through, the client's connect and the
//! agent's accept.
//!
//! Whom an endpoint talks to is decided here, before quinn: the socket
//! ([`PeerOnly`]) drops every datagram that does not come from the test's
//! peer and sends to no one else. An agent's QUIC port therefore answers
//! nobody but its client: no handshake, no version negotiation, no
//! stateless reset a forged source address could aim at a third party.
//! The connection is admitted like a TCP data connection: each stream
//! opens with the session token and the stream's id, and a connection
//! whose streams do not is closed.

use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, Runtime, TokioRuntime, UdpPoller, VarInt};
use socket2::{Domain, Protocol, Socket, Type};

use super::QuicEnd;
use crate::model::spec::SideOptions;
use crate::model::SocketBuffers;
use crate::protocol::TOKEN_LEN;
use crate::workload::base::{AgentNet, ClientNet, WorkloadError};
use crate::workload::transport::admission;
use crate::workload::transport::encryption::Encryption;
use crate::workload::transport::tls::session::{ClientSetup, ServerSetup};
use crate::workload::transport::tls::{self, TlsEnd};

/// The ALPN both ends name: a QUIC handshake must agree on one.
const ALPN: &[u8] = b"nicbench";

/// Application error codes of a connection's close.
pub const CLOSE_DONE: u32 = 0;
pub const CLOSE_ABORTED: u32 = 1;
pub const CLOSE_REFUSED: u32 = 2;

/// SO_SNDBUF and SO_RCVBUF asked for when `-w` gives none: 2 MiB, as
/// quinn's perf asks.
pub const DEFAULT_BUFFER_BYTES: u64 = 2 * 1024 * 1024;

/// Why an agent's endpoint gives no more connections: it was closed (the
/// test aborted).
pub const ENDPOINT_CLOSED: &str = "the QUIC endpoint closed";

/// How long the connection may go silent before quinn gives it up.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// A current-thread tokio runtime that drives one end's endpoint and
/// connection, and whose driving thread changes with the phase:
/// - while the connection is set up and the test waits for its start, an
///   idle thread of its own drives it (acknowledgements, retransmissions,
///   timers must go on while the control connection talks);
/// - when the streams run, [`Driver::hand_over`] stops that thread, and
///   whichever stream thread is in [`Driver::block_on`] drives it: quinn's
///   send, receive, packet protection and timers run there, and when that
///   thread's stream is done another waiting one takes over. With one
///   stream, its thread does all of QUIC's work, as in quinn's own `perf`
///   (one thread per end), and the CPU time is that thread's.
pub struct Driver {
    runtime: Arc<tokio::runtime::Runtime>,
    idle: std::sync::Mutex<Option<(tokio::sync::oneshot::Sender<()>, std::thread::JoinHandle<()>)>>,
}

impl Driver {
    fn start() -> Result<Driver, WorkloadError> {
        let runtime = Arc::new(
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| WorkloadError::Setup(format!("starting the QUIC runtime: {e}")))?,
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let driving = runtime.clone();
        let thread = std::thread::Builder::new()
            .name("quic-setup".into())
            .spawn(move || {
                driving.block_on(async {
                    let _ = stopped.await;
                })
            })
            .map_err(|e| WorkloadError::Setup(format!("starting the QUIC runtime's thread: {e}")))?;
        Ok(Driver {
            runtime,
            idle: std::sync::Mutex::new(Some((stop, thread))),
        })
    }

    /// Stops the idle thread: from now on the threads in
    /// [`Driver::block_on`] drive the runtime.
    pub fn hand_over(&self) {
        let idle = self.idle.lock().map(|mut i| i.take()).unwrap_or(None);
        if let Some((stop, thread)) = idle {
            let _ = stop.send(());
            let _ = thread.join();
        }
    }

    /// Runs `future` to its end on this thread, driving the endpoint while
    /// no other thread does.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.hand_over();
    }
}

/// Who an endpoint may hear from and send to.
type Allowed = Arc<dyn Fn(IpAddr) -> bool + Send + Sync>;

/// A UDP socket that exists, for quinn, only towards the test's peer:
/// datagrams from other addresses are dropped (their length set to 0, so
/// quinn passes over them) and sends to other addresses never leave.
struct PeerOnly {
    inner: Arc<dyn AsyncUdpSocket>,
    allowed: Allowed,
}

impl fmt::Debug for PeerOnly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerOnly").field("inner", &self.inner).finish()
    }
}

impl AsyncUdpSocket for PeerOnly {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        match (self.allowed)(transmit.destination.ip()) {
            true => self.inner.try_send(transmit),
            // Dropped as a lossy network would: never sent.
            false => Ok(()),
        }
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let received = self.inner.poll_recv(cx, bufs, meta);
        if let Poll::Ready(Ok(n)) = received {
            for m in meta.iter_mut().take(n) {
                if !(self.allowed)(m.addr.ip()) {
                    m.len = 0;
                }
            }
        }
        received
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

/// One end's endpoint on its runtime, and what its socket offers.
pub struct Local {
    pub driver: Driver,
    pub endpoint: quinn::Endpoint,
    /// SO_SNDBUF/SO_RCVBUF of the UDP socket, as set (`-w`).
    pub buffers: SocketBuffers,
    /// Datagrams per send (UDP GSO) and per receive (GRO) the socket
    /// takes; 1 where the platform has none.
    pub gso_segments: u64,
    pub gro_segments: u64,
    congestion: String,
}

impl Local {
    /// Binds a UDP socket at `at`, sized by `side`'s buffers, and starts an
    /// endpoint on it that talks only to `allowed`.
    fn bind(
        at: SocketAddr,
        side: &SideOptions,
        allowed: Allowed,
        server: Option<quinn::ServerConfig>,
        congestion: &str,
    ) -> Result<Local, WorkloadError> {
        let socket = Socket::new(Domain::for_address(at), Type::DGRAM, Some(Protocol::UDP))
            .map_err(WorkloadError::io("opening the QUIC socket"))?;
        // Without -w, the buffers quinn's perf asks for (capped by the
        // kernel's rmem_max/wmem_max): a QUIC receiver at line rate
        // overruns the kernel's default 208 KiB between two reads.
        let side = SideOptions {
            send_buffer_bytes: side.send_buffer_bytes.or(Some(DEFAULT_BUFFER_BYTES)),
            receive_buffer_bytes: side.receive_buffer_bytes.or(Some(DEFAULT_BUFFER_BYTES)),
            ..side.clone()
        };
        admission::apply_buffers(&socket, &side)?;
        socket
            .bind(&at.into())
            .map_err(WorkloadError::io(format!("binding the QUIC socket to {at}")))?;
        let buffers = crate::probe::tcpinfo::socket_buffers(&socket);
        let driver = Driver::start()?;
        let _in_runtime = driver.runtime.enter();
        let inner = TokioRuntime
            .wrap_udp_socket(socket.into())
            .map_err(WorkloadError::io("handing the QUIC socket to the runtime"))?;
        let gso_segments = inner.max_transmit_segments() as u64;
        let gro_segments = inner.max_receive_segments() as u64;
        let socket = Arc::new(PeerOnly { inner, allowed });
        let endpoint = quinn::Endpoint::new_with_abstract_socket(
            quinn::EndpointConfig::default(),
            server,
            socket,
            Arc::new(TokioRuntime),
        )
        .map_err(WorkloadError::io("starting the QUIC endpoint"))?;
        Ok(Local {
            driver,
            endpoint,
            buffers,
            gso_segments,
            gro_segments,
            congestion: congestion.to_string(),
        })
    }

    /// The port the endpoint listens on.
    pub fn port(&self) -> u16 {
        self.endpoint.local_addr().map_or(0, |a| a.port())
    }

    /// The connection's figures now, for a stream end that has ended.
    pub fn figures(&self, connection: &quinn::Connection) -> QuicEnd {
        let stats = connection.stats();
        QuicEnd {
            version: "QUICv1".into(),
            congestion: self.congestion.clone(),
            gso_segments: self.gso_segments,
            gro_segments: self.gro_segments,
            path_mtu_bytes: u64::from(stats.path.current_mtu),
            rtt_seconds: stats.path.rtt.as_secs_f64(),
            cwnd_bytes: stats.path.cwnd,
            sent_packets: stats.path.sent_packets,
            lost_packets: stats.path.lost_packets,
            lost_bytes: stats.path.lost_bytes,
            congestion_events: stats.path.congestion_events,
            udp_tx_datagrams: stats.udp_tx.datagrams,
            udp_tx_calls: stats.udp_tx.ios,
            udp_rx_datagrams: stats.udp_rx.datagrams,
            udp_rx_calls: stats.udp_rx.ios,
        }
    }

    /// Lets the connections that were closed reach the peer, for at most a
    /// second (`rr --crr`: a connection per transaction).
    pub fn settle(&self) {
        let endpoint = self.endpoint.clone();
        self.driver.block_on(async move {
            let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
        });
    }

    /// Closes `connection` as done and lets the close reach the peer, for
    /// at most a second.
    pub fn close(&self, connection: &quinn::Connection) {
        connection.close(VarInt::from_u32(CLOSE_DONE), b"done");
        let endpoint = self.endpoint.clone();
        self.driver.block_on(async move {
            let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
        });
    }
}

/// quinn's transport settings for a test: the congestion controller `-C`
/// named (quinn's CUBIC otherwise) and room for every stream.
fn transport_config(congestion: &str, streams: usize) -> Arc<quinn::TransportConfig> {
    use quinn::congestion::{BbrConfig, CubicConfig, NewRenoConfig};
    let mut config = quinn::TransportConfig::default();
    match congestion {
        "newreno" => config.congestion_controller_factory(Arc::new(NewRenoConfig::default())),
        "bbr" => config.congestion_controller_factory(Arc::new(BbrConfig::default())),
        _ => config.congestion_controller_factory(Arc::new(CubicConfig::default())),
    };
    let streams = VarInt::from_u32(u32::try_from(streams).unwrap_or(u32::MAX).max(1));
    config
        .max_concurrent_bidi_streams(streams)
        .max_concurrent_uni_streams(VarInt::from_u32(0))
        .max_idle_timeout(IDLE_TIMEOUT.try_into().ok());
    Arc::new(config)
}

/// The session token and a stream's id, as each stream opens with them.
fn preamble(token: &[u8; TOKEN_LEN], id: u32) -> [u8; TOKEN_LEN + 4] {
    let mut out = [0u8; TOKEN_LEN + 4];
    out[..TOKEN_LEN].copy_from_slice(token);
    out[TOKEN_LEN..].copy_from_slice(&id.to_be_bytes());
    out
}

/// A stream of the test: its id and both halves.
pub type Streams = Vec<(u32, quinn::SendStream, quinn::RecvStream)>;

/// A side's connection once every stream is open, and the handshake's record.
pub struct Connected {
    pub local: Local,
    pub connection: quinn::Connection,
    pub tls: TlsEnd,
}

/// The client's way to the agent's endpoint: its own endpoint, and what
/// every connection it opens offers (trust as `--tls-pin`, `--tls-ca` or
/// the agent's announcement says; the one cipher suite the spec names).
pub struct Dialer {
    pub local: Local,
    config: quinn::ClientConfig,
    agent: SocketAddr,
    name: String,
    token: [u8; TOKEN_LEN],
    trust: &'static str,
    cipher: &'static str,
}

impl Dialer {
    /// An endpoint that talks only to the agent at `port`, for connections
    /// of `streams` streams each.
    pub fn new(
        net: &ClientNet,
        port: u16,
        side: &SideOptions,
        tls: &Encryption,
        congestion: &str,
        streams: usize,
    ) -> Result<Dialer, WorkloadError> {
        let setup = ClientSetup::new(tls, net)?;
        let mut crypto = (*setup.config).clone();
        crypto.alpn_protocols = vec![ALPN.to_vec()];
        // Initial packets are always protected with AES-128-GCM (RFC 9001
        // 5.2), whichever suite the client offers for the rest.
        let initial = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
            .tls13()
            .and_then(|s| s.quic_suite())
            .ok_or_else(|| WorkloadError::Setup("rustls has no QUIC suite for AES-128-GCM".into()))?;
        let crypto = quinn::crypto::rustls::QuicClientConfig::with_initial(Arc::new(crypto), initial)
            .map_err(|e| WorkloadError::Setup(format!("QUIC's TLS configuration: {e}")))?;
        let mut config = quinn::ClientConfig::new(Arc::new(crypto));
        config.transport_config(transport_config(congestion, streams));

        let agent = SocketAddr::new(net.agent_ip, port);
        let bind = net.bind.unwrap_or(match agent {
            SocketAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            SocketAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        });
        let agent_ip = net.agent_ip;
        let local = Local::bind(
            SocketAddr::new(bind, 0),
            side,
            Arc::new(move |ip| ip == agent_ip),
            None,
            congestion,
        )?;
        Ok(Dialer {
            local,
            config,
            agent,
            name: setup.server_name(),
            token: net.token,
            trust: setup.trust_word(),
            cipher: tls.cipher.suite_name(),
        })
    }

    /// A new connection, its handshake timed, and the streams `ids` opened
    /// on it, each with the token and its id.
    pub async fn dial(&self, ids: &[u32]) -> Result<(quinn::Connection, TlsEnd, Streams), String> {
        let agent = self.agent;
        let started = Instant::now();
        let connecting = self
            .local
            .endpoint
            .connect_with(self.config.clone(), agent, &self.name)
            .map_err(|e| format!("connecting to {agent}: {e}"))?;
        let connection = tokio::time::timeout(Duration::from_secs(10), connecting)
            .await
            .map_err(|_| format!("no QUIC handshake with {agent} within 10 s"))?
            .map_err(|e| match e {
                // The client's own refusal (a pin that does not match) in
                // its own words, without rustls' "unexpected error" prefix.
                quinn::ConnectionError::TransportError(t) if t.reason.contains("refused before any data") => format!(
                    "QUIC handshake with {agent}: {}",
                    t.reason.trim_start_matches("unexpected error: ")
                ),
                e => format!("QUIC handshake with {agent}: {e}"),
            })?;
        let seconds = started.elapsed().as_secs_f64();
        let mut streams = Vec::new();
        for &id in ids {
            let (mut send, recv) = connection
                .open_bi()
                .await
                .map_err(|e| format!("opening QUIC stream {id}: {e}"))?;
            send.write_all(&preamble(&self.token, id))
                .await
                .map_err(|e| format!("opening QUIC stream {id}: {e}"))?;
            streams.push((id, send, recv));
        }
        let certificate_sha256 = connection
            .peer_identity()
            .and_then(|i| i.downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>().ok())
            .and_then(|chain| chain.first().map(tls::cert::fingerprint))
            .unwrap_or_default();
        // The client offers this one suite; a handshake that succeeded chose it.
        let record = handshake_record(self.cipher, seconds, certificate_sha256, Some(self.trust));
        Ok((connection, record, streams))
    }

    /// One transaction on a new connection (`rr --crr`): the handshake,
    /// stream `id` opened with the token, `request` sent and the stream
    /// finished, `response` filled, the connection closed. What the
    /// handshake settled on.
    pub async fn transact(&self, id: u32, request: &Bytes, response: &mut [u8]) -> Result<TlsEnd, String> {
        let (connection, record, mut streams) = self.dial(&[id]).await?;
        let (_, mut send, mut recv) = streams.pop().expect("one stream");
        let exchanged = async {
            send.write_chunk(request.clone())
                .await
                .map_err(|e| format!("sending the request: {e}"))?;
            let _ = send.finish();
            recv.read_exact(response)
                .await
                .map_err(|e| format!("reading the response: {e}"))
        };
        let result = exchanged.await;
        connection.close(VarInt::from_u32(CLOSE_DONE), b"done");
        result.map(|()| record)
    }
}

/// The client's connection, every stream of `ids` open on it.
pub fn connect(
    net: &ClientNet,
    port: u16,
    side: &SideOptions,
    tls: &Encryption,
    congestion: &str,
    ids: &[u32],
) -> Result<(Connected, Streams), WorkloadError> {
    let dialer = Dialer::new(net, port, side, tls, congestion, ids.len())?;
    let (connection, record, streams) = dialer
        .local
        .driver
        .block_on(dialer.dial(ids))
        .map_err(WorkloadError::Setup)?;
    Ok((
        Connected {
            local: dialer.local,
            connection,
            tls: record,
        },
        streams,
    ))
}

/// One end's record of the connection's TLS 1.3 handshake: quinn protects
/// the packets, so the record layer is `quinn`. quinn does not report the
/// negotiated suite: `cipher_suite` is the one the client offered.
fn handshake_record(cipher_suite: &str, seconds: f64, certificate_sha256: String, trust: Option<&str>) -> TlsEnd {
    TlsEnd {
        version: "TLSv1_3".into(),
        cipher_suite: cipher_suite.into(),
        handshake_seconds: seconds,
        record_layer: "quinn".into(),
        certificate_sha256,
        trust: trust.map(str::to_string),
        cipher_one_core_bits_per_second: None,
        handshakes: None,
    }
}

/// The agent's endpoint, bound before the test so its port goes to the
/// client.
pub struct Listening {
    local: Local,
    net: AgentNet,
}

impl Listening {
    /// An endpoint on the control connection's address that hears only
    /// the client (and the test's proven link addresses).
    pub fn bind(
        net: &AgentNet,
        side: &SideOptions,
        congestion: &str,
        streams: usize,
    ) -> Result<Listening, WorkloadError> {
        let setup = ServerSetup::new()?;
        let mut crypto = (*setup.config).clone();
        crypto.alpn_protocols = vec![ALPN.to_vec()];
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(crypto)
            .map_err(|e| WorkloadError::Setup(format!("QUIC's TLS configuration: {e}")))?;
        let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        server.transport_config(transport_config(congestion, streams));
        let allowed_net = net.clone();
        let local = Local::bind(
            SocketAddr::new(net.local_ip, 0),
            side,
            Arc::new(move |ip| allowed_net.peer_allowed(ip)),
            Some(server),
            congestion,
        )?;
        Ok(Listening {
            local,
            net: net.clone(),
        })
    }

    pub fn port(&self) -> u16 {
        self.local.port()
    }

    /// The endpoint (`rr --crr`: its flows drive it).
    pub fn local(&self) -> &Local {
        &self.local
    }

    /// `rr --crr` on the agent: the next connection from the client within
    /// `wait` (None when none came), its one stream admitted (the token,
    /// an id in `ids`), `request` read to its length, `response` sent, and
    /// the client's close awaited (a response is in flight until then).
    /// The handshake's record, or why the transaction failed.
    pub async fn transact(
        &self,
        ids: &[u32],
        cipher: &str,
        request: &mut [u8],
        response: &Bytes,
        wait: Duration,
    ) -> Option<Result<TlsEnd, String>> {
        let incoming = match tokio::time::timeout(wait, self.local.endpoint.accept()).await {
            Err(_) => return None,
            Ok(None) => return Some(Err(ENDPOINT_CLOSED.into())),
            Ok(Some(incoming)) => incoming,
        };
        let started = Instant::now();
        let served = async {
            let connection = incoming.await.map_err(|e| format!("a QUIC handshake failed: {e}"))?;
            let seconds = started.elapsed().as_secs_f64();
            let answered = async {
                let (_, mut send, mut recv) = admit(&connection, &self.net.token, ids, 1)
                    .await?
                    .pop()
                    .expect("one stream");
                recv.read_exact(request)
                    .await
                    .map_err(|e| format!("reading the request: {e}"))?;
                send.write_chunk(response.clone())
                    .await
                    .map_err(|e| format!("sending the response: {e}"))?;
                let _ = send.finish();
                Ok::<_, String>(())
            };
            match answered.await {
                Ok(()) => {
                    let _ = tokio::time::timeout(Duration::from_secs(2), connection.closed()).await;
                }
                Err(why) => {
                    connection.close(VarInt::from_u32(CLOSE_REFUSED), why.as_bytes());
                    return Err(why);
                }
            }
            let certificate = tls::cert::serving_now().map(|s| s.sha256.clone()).unwrap_or_default();
            Ok(handshake_record(cipher, seconds, certificate, None))
        };
        Some(served.await)
    }

    /// Accepts the client's connection by `deadline` and each stream in
    /// `ids` on it, each opening with the token and its id. A connection
    /// whose streams do not is closed and another awaited.
    pub fn accept(self, ids: &[u32], cipher: &str, deadline: Instant) -> Result<(Connected, Streams), WorkloadError> {
        let Listening { local, net } = self;
        let endpoint = local.endpoint.clone();
        let token = net.token;
        let accepted = local.driver.block_on(async move {
            let mut refused = 0u32;
            let wait = async {
                loop {
                    let Some(incoming) = endpoint.accept().await else {
                        return Err("the QUIC endpoint closed".to_string());
                    };
                    if !incoming.remote_address_validated() {
                        // A Retry before any handshake byte: it is smaller
                        // than the Initial it answers, so a forged Initial
                        // draws no more than it carried; the client's
                        // next Initial proves its address with the token.
                        if let Err(e) = incoming.retry() {
                            e.into_incoming().ignore();
                        }
                        continue;
                    }
                    let started = Instant::now();
                    // Only the client reaches this endpoint: its failed
                    // handshake (a certificate it refused) ends the test.
                    let connection = incoming
                        .await
                        .map_err(|e| format!("the client's QUIC handshake failed: {e}"))?;
                    let seconds = started.elapsed().as_secs_f64();
                    match admit(&connection, &token, ids, ids.len()).await {
                        Ok(streams) => return Ok((connection, seconds, streams)),
                        Err(why) => {
                            refused += 1;
                            log::warn!("refused a QUIC connection from {}: {why}", connection.remote_address());
                            connection.close(VarInt::from_u32(CLOSE_REFUSED), why.as_bytes());
                        }
                    }
                }
            };
            match tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), wait).await {
                Ok(r) => r,
                Err(_) => Err(format!(
                    "the client's QUIC connection did not arrive with its {} streams in time ({refused} refused)",
                    ids.len()
                )),
            }
        });
        let (connection, seconds, streams) = accepted.map_err(WorkloadError::Setup)?;
        // The client offers only the suite the spec names.
        let certificate = tls::cert::serving_now().map(|s| s.sha256.clone()).unwrap_or_default();
        let record = handshake_record(cipher, seconds, certificate, None);
        Ok((
            Connected {
                local,
                connection,
                tls: record,
            },
            streams,
        ))
    }
}

/// The `count` streams of an admitted connection: each of an id in `ids`,
/// none twice, each opening with the token, within 5 s of the handshake.
async fn admit(
    connection: &quinn::Connection,
    token: &[u8; TOKEN_LEN],
    ids: &[u32],
    count: usize,
) -> Result<Streams, String> {
    let opening = async {
        let mut streams: Streams = Vec::new();
        while streams.len() < count {
            let (send, mut recv) = connection
                .accept_bi()
                .await
                .map_err(|e| format!("after {} of {count} streams: {e}", streams.len()))?;
            let mut head = [0u8; TOKEN_LEN + 4];
            recv.read_exact(&mut head)
                .await
                .map_err(|e| format!("a stream without its preamble: {e}"))?;
            let (given, id) = head.split_at(TOKEN_LEN);
            let id = u32::from_be_bytes(id.try_into().expect("4 bytes"));
            if !admission::token_matches(given, token) {
                return Err("a stream without the session token".into());
            }
            if !ids.contains(&id) || streams.iter().any(|(s, _, _)| *s == id) {
                return Err(format!("stream id {id} is not one of the test's or came twice"));
            }
            streams.push((id, send, recv));
        }
        Ok(streams)
    };
    tokio::time::timeout(Duration::from_secs(5), opening)
        .await
        .unwrap_or_else(|_| Err("its streams did not open within 5 s".into()))
}

/// Whether a connection error is the peer's close after its streams were
/// done: the end of the test, not a failure.
pub(crate) fn closed_when_done(e: &quinn::ConnectionError) -> bool {
    matches!(e, quinn::ConnectionError::ApplicationClosed(c) if c.error_code == VarInt::from_u32(CLOSE_DONE))
        || matches!(e, quinn::ConnectionError::LocallyClosed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, UdpSocket};

    /// A QUIC long header with a version nobody speaks (0x?a?a?a?a is
    /// reserved to force version negotiation, RFC 9000 15), padded to an
    /// Initial's 1200 bytes: a QUIC server answers it with a version
    /// negotiation packet, to whatever source address it bears.
    fn forcing_version_negotiation() -> Vec<u8> {
        let mut packet = vec![0xc0, 0x1a, 0x2a, 0x3a, 0x4a, 8];
        packet.extend([7u8; 8]);
        packet.push(8);
        packet.extend([9u8; 8]);
        packet.resize(1200, 0);
        packet
    }

    fn answer_to(from: Ipv4Addr, port: u16) -> Option<Vec<u8>> {
        let socket = UdpSocket::bind((from, 0)).unwrap();
        socket.set_read_timeout(Some(Duration::from_millis(700))).unwrap();
        socket
            .send_to(&forcing_version_negotiation(), (Ipv4Addr::LOCALHOST, port))
            .unwrap();
        let mut buf = [0u8; 2048];
        socket.recv_from(&mut buf).ok().map(|(n, _)| buf[..n].to_vec())
    }

    /// Hardening round three, item A, for QUIC: an endpoint that may talk
    /// only to its peer (here 127.0.0.2) sends nothing to any other
    /// source, not even the version negotiation any QUIC server sends to
    /// whoever asks; the same datagram from the peer is answered, so the
    /// silence is the filter's.
    #[test]
    fn an_endpoint_answers_nobody_but_its_peer() {
        let setup = ServerSetup::new().unwrap();
        let mut crypto = (*setup.config).clone();
        crypto.alpn_protocols = vec![ALPN.to_vec()];
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(crypto).unwrap();
        let server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        let peer = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
        let local = Local::bind(
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            &SideOptions::default(),
            Arc::new(move |ip| ip == peer),
            Some(server),
            super::super::DEFAULT_CONGESTION,
        )
        .unwrap();
        let port = local.port();
        assert!(
            answer_to(Ipv4Addr::LOCALHOST, port).is_none(),
            "a stranger got an answer"
        );
        let answer = answer_to(Ipv4Addr::new(127, 0, 0, 2), port).expect("the peer's probe is answered");
        // Version negotiation: long header, version 0.
        assert_eq!(answer[0] & 0x80, 0x80, "{answer:?}");
        assert_eq!(&answer[1..5], &[0, 0, 0, 0], "{answer:?}");
        // And a stranger's probe after the peer's still gets nothing.
        assert!(
            answer_to(Ipv4Addr::LOCALHOST, port).is_none(),
            "a stranger got an answer"
        );
    }
}
