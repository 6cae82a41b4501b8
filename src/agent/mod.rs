//! `nicbench serve`: the agent. It accepts control connections, runs its
//! side of each test with the same workload engines as the client, and
//! sends its measurement back. One test at a time by default; others are
//! answered `busy` with the time left, or wait their turn in a bounded
//! queue when they ask to. Every read has a deadline, every refusal says
//! why and names the limit, and no client can make it panic or stop
//! serving.
//!
//! The parts: `serve` accepts control connections (the serve loop),
//! `control` reads one connection's hello, key proof and request and hands
//! it on: to `run` for a test (with `link_check` for its links), to
//! `host_settings` for the MTU and other host settings, to `peer` for a
//! peer test, to `watch` for `watch --peer`. Every way in passes one
//! admission path: a new connection passes the connection gate (`limits`:
//! per-address connections held and rate, shared with the metrics server),
//! then the key, then a test takes a slot of `admission` (data connections
//! open only for a test that holds one), whose slot rules free it at the
//! test's end plus a short grace whatever the client does.

mod admission;
mod clock;
mod control;
mod host_settings;
mod iperf3_port;
mod limits;
mod link_check;
pub mod peer;
mod run;
mod serve;
mod watch;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use self::admission::Admission;
use self::limits::{ConnectionGate, SlotTable};
pub use self::serve::{Agent, AgentHandle};
use crate::protocol::auth::Psk;
use crate::protocol::channel::{peer_state, Channel, PeerState};
use crate::protocol::limits::TestLimits;
use crate::protocol::{Message, ProtocolError};
use crate::workload;

/// Operator settings of an agent.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub listen: SocketAddr,
    /// Serve one test, then exit.
    pub once: bool,
    /// What one test may ask for.
    pub limits: TestLimits,
    /// Control connections handled at once; more are refused at once.
    pub max_connections: usize,
    /// Control connections accepted per client address per minute (0: no limit).
    pub max_connections_per_minute: u32,
    /// Connections one client address may hold open at once, control port
    /// and metrics together (0: no limit).
    pub max_connections_per_address: usize,
    /// IPv6 clients count as one address per network of this many bits.
    pub ipv6_prefix_per_address: u8,
    /// Tests run at once (`--max-concurrent`).
    pub max_concurrent: usize,
    /// Clients that may wait in line (`--max-queue`).
    pub max_queue: usize,
    /// Pre-shared key every client must prove it knows.
    pub psk: Option<Psk>,
    /// How long a client may take for its whole handshake, from its
    /// connection's accept to its request (hello, key proof, request); it
    /// is cut off then, however it paced its messages.
    pub handshake_timeout: Duration,
    /// Also serve iperf3 clients on this address (`--iperf3-port`).
    pub iperf3_listen: Option<SocketAddr>,
    /// How long an iperf3 client waits in line for its turn before it is
    /// told busy (`--iperf3-wait`).
    pub iperf3_wait: Duration,
    /// iperf3's RSA authentication on the iperf3 port
    /// (`--iperf3-rsa-private-key`, `--iperf3-authorized-users`); required
    /// there when `psk` is set, or the port refuses every client.
    pub iperf3_auth: Option<Arc<crate::iperf3::server_auth::ServerAuth>>,
    /// Authenticated clients may change host settings (the MTU of the
    /// interface toward them) between tests (`--allow-host-changes`).
    pub allow_host_changes: bool,
    /// An authenticated coordinator may ask this agent to run a test
    /// itself, as the client, toward another agent (`--allow-peer-tests`;
    /// `nicbench mesh`). See `agent::peer` for every condition.
    pub allow_peer_tests: bool,
    /// What `serve` was told for each workload (`files`: where received
    /// files go, `--scratch`, `--keep`, `--max-files-bytes`).
    pub settings: workload::Settings,
}

/// Called with every finished iperf3 test the agent served: the hook
/// where the results store saves it.
pub type Iperf3ResultSink = Arc<dyn Fn(&crate::model::RunResult) + Send + Sync>;

impl AgentConfig {
    pub fn new(listen: SocketAddr) -> AgentConfig {
        AgentConfig {
            listen,
            once: false,
            limits: TestLimits::default(),
            max_connections: 64,
            max_connections_per_minute: 600,
            max_connections_per_address: crate::protocol::gate::DEFAULT_PER_ADDRESS,
            ipv6_prefix_per_address: crate::protocol::gate::DEFAULT_IPV6_PREFIX,
            max_concurrent: 1,
            max_queue: 16,
            psk: None,
            handshake_timeout: Duration::from_secs(10),
            iperf3_listen: None,
            iperf3_wait: Duration::from_secs(60),
            iperf3_auth: None,
            allow_host_changes: false,
            allow_peer_tests: false,
            settings: Default::default(),
        }
    }
}

/// Why an agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("cannot listen on {addr}: {source}{hint}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
        hint: &'static str,
    },
}

impl AgentError {
    /// True when the address family is missing on this host (IPv6 off),
    /// so another family may be tried.
    pub fn ipv6_unavailable(&self) -> bool {
        let AgentError::Bind { source, .. } = self;
        source.kind() == std::io::ErrorKind::AddrNotAvailable || source.raw_os_error() == Some(libc::EAFNOSUPPORT)
    }
}

/// Counters for the log line at the end.
#[derive(Default)]
struct Stats {
    tests_served: AtomicUsize,
    connections_refused: AtomicUsize,
    auth_failures: AtomicUsize,
    peer_tests_run: AtomicUsize,
    peer_tests_failed: AtomicUsize,
    peer_tests_refused: AtomicUsize,
}

/// State shared by the connection threads.
struct Shared {
    config: AgentConfig,
    admission: Admission,
    /// Every new connection passes it (control port, metrics).
    gate: Arc<ConnectionGate>,
    /// The control port's places (`--max-connections`), fair per network.
    control_slots: Arc<SlotTable>,
    /// The iperf3 port's places for connections before their cookie.
    iperf3_slots: Arc<SlotTable>,
    shutdown: Arc<AtomicBool>,
    stats: Stats,
    /// Threads still accepting data connections for a client that left
    /// (they end at their deadline): joined by `serve`, never detached.
    stragglers: Mutex<Vec<thread::JoinHandle<()>>>,
    /// Where finished iperf3-port tests go (the store), when set.
    iperf3_sink: Mutex<Option<Iperf3ResultSink>>,
}

impl Shared {
    fn new(config: AgentConfig) -> Shared {
        Shared {
            admission: Admission::new(config.max_concurrent, config.max_queue).longest_test(Duration::from_secs_f64(
                config.limits.max_duration_seconds.clamp(0.0, 1e9),
            )),
            gate: ConnectionGate::grouped(
                config.max_connections_per_minute,
                config.max_connections_per_address,
                config.ipv6_prefix_per_address,
            ),
            control_slots: SlotTable::new(
                "control port",
                "--max-connections",
                config.max_connections,
                0,
                config.ipv6_prefix_per_address,
            ),
            iperf3_slots: SlotTable::new(
                "iperf3 port",
                "--max-connections",
                config.max_connections,
                0,
                config.ipv6_prefix_per_address,
            ),
            config,
            shutdown: Arc::new(AtomicBool::new(false)),
            stats: Stats::default(),
            stragglers: Mutex::default(),
            iperf3_sink: Mutex::new(None),
        }
    }
}

/// How a connection ended early: told to the client, not worth telling,
/// answered `busy` (no problem, logged at info), or a test the agent cut
/// short itself (logged as "test aborted: ..." and told to a client that is
/// still there, so it reads why rather than a closed connection).
enum Refusal {
    Tell(String),
    Quiet(String),
    Busy(String),
    Aborted(String),
}

impl From<ProtocolError> for Refusal {
    fn from(e: ProtocolError) -> Refusal {
        crate::metrics::AgentMetrics::global().protocol_error(&e);
        match e {
            ProtocolError::Closed(_) | ProtocolError::Io(_) => Refusal::Quiet(e.to_string()),
            other => Refusal::Tell(other.to_string()),
        }
    }
}

/// The client sent `got` where `expected` belongs: refused in words.
fn unexpected(expected: &str, got: &Message) -> Refusal {
    crate::metrics::AgentMetrics::global().closed(crate::metrics::CloseReason::Protocol);
    Refusal::Tell(format!("expected {expected}, got '{}'", got.kind()))
}

// How the agent watches the other ends it waits on. These live here, below
// the parts, because `control` hands its connection to `run` and `peer`,
// `serve` starts the iperf3 port, and all of them watch: kept in one of
// those files, they would make the files import each other.

/// True when the peer has closed its end (a queued client that left).
fn peer_gone(channel: &Channel) -> bool {
    stream_closed(channel.stream())
}

/// True when the other end of `stream` has closed it (or it failed);
/// reads nothing.
fn stream_closed(stream: &TcpStream) -> bool {
    peer_state(stream) == PeerState::Closed
}

/// True when `listener` has a connection waiting (poll with a timeout).
fn wait_readable(listener: &TcpListener, timeout_ms: i32) -> bool {
    let mut fds = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut fds, 1, timeout_ms) > 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::MAX_AGENT_FRAME;

    /// An agent's shared state on loopback port 0, with `change` applied.
    pub(super) fn shared(change: impl FnOnce(&mut AgentConfig)) -> Shared {
        let mut config = AgentConfig::new("127.0.0.1:0".parse().unwrap());
        change(&mut config);
        Shared::new(config)
    }

    /// Both ends of a loopback control connection: (the agent's, the client's).
    pub(super) fn control_pair() -> (Channel, Channel) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (agent, _) = listener.accept().unwrap();
        (
            Channel::new(agent, crate::protocol::MAX_CLIENT_FRAME),
            Channel::new(client, MAX_AGENT_FRAME),
        )
    }

    /// A key for tests.
    pub(super) fn key() -> Psk {
        Psk::from_bytes(b"0123456789abcdef0123456789abcdef")
    }

    #[test]
    fn a_closed_connection_is_not_worth_telling_and_a_bad_frame_is() {
        assert!(matches!(
            Refusal::from(ProtocolError::Closed("start".into())),
            Refusal::Quiet(_)
        ));
        match Refusal::from(ProtocolError::Malformed("not JSON".into())) {
            Refusal::Tell(words) => assert!(words.contains("not JSON"), "{words}"),
            _ => panic!("a malformed frame is told to the client"),
        }
    }

    #[test]
    fn an_unexpected_message_is_refused_by_name() {
        match unexpected("start", &Message::Ready) {
            Refusal::Tell(words) => assert_eq!(words, "expected start, got 'ready'"),
            _ => panic!("an unexpected message is told to the client"),
        }
    }

    #[test]
    fn a_closed_peer_is_seen_without_reading() {
        let (agent, client) = control_pair();
        assert!(!peer_gone(&agent));
        drop(client);
        // Wait until the end of the stream is readable (the FIN arrived).
        let mut fds = libc::pollfd {
            fd: agent.stream().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        assert_eq!(unsafe { libc::poll(&mut fds, 1, 10_000) }, 1);
        assert!(peer_gone(&agent));
    }

    #[test]
    fn a_missing_address_family_may_be_tried_otherwise() {
        let bind = |source: std::io::Error| AgentError::Bind {
            addr: "[::1]:5310".parse().unwrap(),
            source,
            hint: "",
        };
        assert!(bind(std::io::ErrorKind::AddrNotAvailable.into()).ipv6_unavailable());
        assert!(bind(std::io::Error::from_raw_os_error(libc::EAFNOSUPPORT)).ipv6_unavailable());
        assert!(!bind(std::io::ErrorKind::AddrInUse.into()).ipv6_unavailable());
    }
}
