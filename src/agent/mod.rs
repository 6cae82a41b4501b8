//! `nicbench serve`: the agent. It accepts control connections, runs its
//! side of each test with the same workload engines as the client, and
//! sends its measurement back. One test at a time by default; others are
//! answered `busy` with the time left, or wait their turn in a bounded
//! queue when they ask to. Every read has a deadline, every refusal says
//! why and names the limit, and no client can make it panic or stop
//! serving. `admission` holds the slots and the queue, `limits` the
//! operator's limits.

mod admission;
mod host_settings;
mod iperf3_port;
pub mod limits;
pub mod peer;
mod watch;

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use self::admission::{Admission, Pace, Poll, Ticket};
use self::limits::{ConnectionRate, TestLimits};
use crate::model::{Direction, Party};
use crate::probe::cpu::ProcStat;
use crate::probe::host::facts_toward;
use crate::protocol::auth::{self, Psk};
use crate::protocol::channel::Channel;
use crate::protocol::framing::encode;
use crate::protocol::{self, Hello, Message, ProtocolError, MAX_CLIENT_FRAME};
use crate::side_runner::{self, TrialPlan};
use crate::workload::runner::IntervalCallback;
use crate::workload::{self, AgentNet, TestSpec};

/// How long the client may take to open its data connections and start.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a waiting client is told its place.
const QUEUE_UPDATE: Duration = Duration::from_secs(1);
/// Longest wait in the queue, whatever the client asks.
pub const MAX_WAIT_SECONDS: f64 = 3600.0;

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
    /// Tests run at once (`--max-concurrent`).
    pub max_concurrent: usize,
    /// Clients that may wait in line (`--max-queue`).
    pub max_queue: usize,
    /// Pre-shared key every client must prove it knows.
    pub psk: Option<Psk>,
    /// How long a client may take for each message before the test
    /// (hello, key proof, test request); a silent client is cut off then.
    pub handshake_timeout: Duration,
    /// Also serve iperf3 clients on this address (`--iperf3-port`).
    pub iperf3_listen: Option<SocketAddr>,
    /// How long an iperf3 client waits in line for its turn before it is
    /// told busy (`--iperf3-wait`).
    pub iperf3_wait: Duration,
    /// Authenticated clients may change host settings (the MTU of the
    /// interface toward them) between tests (`--allow-host-changes`).
    pub allow_host_changes: bool,
    /// An authenticated coordinator may ask this agent to run a test
    /// itself, as the client, toward another agent (`--allow-peer-tests`;
    /// `nicbench mesh`). See `agent::peer` for every condition.
    pub allow_peer_tests: bool,
    /// Where received files go (`files` workload): `--scratch`, `--keep`,
    /// `--max-files-bytes`.
    pub storage: workload::files::scratch::Storage,
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
            max_concurrent: 1,
            max_queue: 16,
            psk: None,
            handshake_timeout: Duration::from_secs(10),
            iperf3_listen: None,
            iperf3_wait: Duration::from_secs(60),
            allow_host_changes: false,
            allow_peer_tests: false,
            storage: Default::default(),
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
    connections: AtomicUsize,
    shutdown: Arc<AtomicBool>,
    stats: Stats,
    /// Threads still accepting data connections for a client that left
    /// (they end at their deadline): joined by `serve`, never detached.
    stragglers: Mutex<Vec<thread::JoinHandle<()>>>,
    /// Where finished iperf3-port tests go (the store), when set.
    iperf3_sink: Mutex<Option<Iperf3ResultSink>>,
}

/// A bound agent.
pub struct Agent {
    listener: TcpListener,
    iperf3_listener: Option<TcpListener>,
    shared: Arc<Shared>,
}

impl Agent {
    pub fn bind(config: AgentConfig) -> Result<Agent, AgentError> {
        let listener = bind(config.listen)?;
        let iperf3_listener = config.iperf3_listen.map(bind).transpose()?;
        Ok(Agent {
            listener,
            iperf3_listener,
            shared: Arc::new(Shared {
                admission: Admission::new(config.max_concurrent, config.max_queue),
                config,
                connections: AtomicUsize::new(0),
                shutdown: Arc::new(AtomicBool::new(false)),
                stats: Stats::default(),
                stragglers: Mutex::default(),
                iperf3_sink: Mutex::new(None),
            }),
        })
    }

    /// The iperf3 port's address, when the agent serves iperf3 clients.
    pub fn iperf3_addr(&self) -> Option<SocketAddr> {
        self.iperf3_listener.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Sets the hook called with every finished iperf3 test (the results
    /// store saves it there).
    pub fn on_iperf3_result(&self, sink: Iperf3ResultSink) {
        *self.shared.iperf3_sink.lock().unwrap_or_else(|p| p.into_inner()) = Some(sink);
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    /// A flag that ends `serve` when raised (checked every 200 ms).
    pub fn shutdown_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.shared.shutdown)
    }

    /// Serves until the shutdown flag is raised (or after one test with `once`).
    /// A running test is told to stop and still reports before this returns.
    pub fn serve(self) {
        let shared = self.shared;
        let c = &shared.config;
        log::info!(
            "agent listening on {} (authentication {}, {} concurrent test(s), queue of {}, \
             {} connections at once, {} per address per minute)",
            self.listener.local_addr().map_or("?".into(), |a| a.to_string()),
            if c.psk.is_some() { "on" } else { "off" },
            c.max_concurrent,
            c.max_queue,
            c.max_connections,
            c.max_connections_per_minute
        );
        let mut rate = ConnectionRate::new(c.max_connections_per_minute);
        let mut workers: Vec<thread::JoinHandle<()>> = Vec::new();
        let iperf3 = self.iperf3_listener.map(|listener| {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name("iperf3-port".into())
                .spawn(move || iperf3_port::accept_loop(listener, shared))
                .expect("could not start the iperf3 port thread")
        });
        while !shared.shutdown.load(Ordering::Relaxed) {
            if !wait_readable(&self.listener, 200) {
                continue;
            }
            let (stream, peer) = match self.listener.accept() {
                Ok(pair) => pair,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    log::warn!("accept failed: {e}");
                    thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            workers.retain(|w| !w.is_finished());
            join_finished(&shared.stragglers);
            if let Some(reason) = admit_connection(&shared, &mut rate, peer) {
                shared.stats.connections_refused.fetch_add(1, Ordering::Relaxed);
                log::warn!("{peer}: connection refused: {reason}");
                refuse_at_once(stream, reason);
                continue;
            }
            shared.connections.fetch_add(1, Ordering::Relaxed);
            crate::metrics::AgentMetrics::global().connection_accepted();
            let conn_shared = Arc::clone(&shared);
            let spawned = thread::Builder::new().name(format!("control-{peer}")).spawn(move || {
                handle_connection(stream, peer, &conn_shared);
                conn_shared.connections.fetch_sub(1, Ordering::Relaxed);
            });
            match spawned {
                Ok(w) => workers.push(w),
                Err(e) => {
                    shared.connections.fetch_sub(1, Ordering::Relaxed);
                    log::error!("{peer}: could not start a thread: {e}");
                }
            }
            if shared.config.once {
                for w in workers.drain(..) {
                    let _ = w.join();
                }
                if shared.stats.tests_served.load(Ordering::Relaxed) > 0 {
                    break;
                }
            }
        }
        if shared.shutdown.load(Ordering::Relaxed) {
            log::info!(
                "shutting down: {} test(s) running, {} client(s) waiting",
                shared.admission.running(),
                shared.admission.waiting()
            );
        }
        for w in workers {
            let _ = w.join();
        }
        if let Some(t) = iperf3 {
            shared.shutdown.store(true, Ordering::Relaxed);
            let _ = t.join();
        }
        let stragglers = std::mem::take(&mut *shared.stragglers.lock().unwrap_or_else(|e| e.into_inner()));
        for s in stragglers {
            let _ = s.join();
        }
        log::info!(
            "agent stopped: {} test(s) served, {} connection(s) refused, {} failed authentication(s), \
             {} data connection(s) refused, peer tests: {} run, {} failed, {} refused",
            shared.stats.tests_served.load(Ordering::Relaxed),
            shared.stats.connections_refused.load(Ordering::Relaxed),
            shared.stats.auth_failures.load(Ordering::Relaxed),
            workload::data::refused_data_connections(),
            shared.stats.peer_tests_run.load(Ordering::Relaxed),
            shared.stats.peer_tests_failed.load(Ordering::Relaxed),
            shared.stats.peer_tests_refused.load(Ordering::Relaxed),
        );
    }

    /// Serves on a background thread; for `demo` and tests.
    pub fn spawn(self) -> AgentHandle {
        let addr = self.local_addr();
        let shutdown = self.shutdown_flag();
        let thread = thread::Builder::new()
            .name("agent".into())
            .spawn(move || self.serve())
            .expect("could not start the agent thread");
        AgentHandle {
            addr,
            shutdown,
            thread: Some(thread),
        }
    }
}

/// An agent serving on a background thread; stops when dropped.
pub struct AgentHandle {
    pub addr: SocketAddr,
    shutdown: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Drop for AgentHandle {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Listens on `addr`, with a hint when that fails.
fn bind(addr: SocketAddr) -> Result<TcpListener, AgentError> {
    TcpListener::bind(addr).map_err(|source| AgentError::Bind {
        addr,
        hint: match source.kind() {
            std::io::ErrorKind::AddrInUse => {
                "; another agent or program already listens there: stop it or choose another --port (or --iperf3-port)"
            }
            std::io::ErrorKind::AddrNotAvailable => "; that address is not configured on this host",
            std::io::ErrorKind::PermissionDenied => "; ports below 1024 need root",
            _ => "",
        },
        source,
    })
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

/// Why a new control connection is refused before any thread is spent on
/// it, or None to serve it.
fn admit_connection(shared: &Shared, rate: &mut ConnectionRate, peer: SocketAddr) -> Option<String> {
    if let Err(wait) = rate.admit(peer.ip(), Instant::now()) {
        crate::metrics::AgentMetrics::global().refused(crate::metrics::RefusalReason::RateLimit);
        return Some(format!(
            "too many connections from {}: this agent allows {} per minute per address \
             (its --max-connections-per-minute); try again in {wait:.0} s",
            peer.ip(),
            rate.per_minute()
        ));
    }
    let limit = shared.config.max_connections;
    if shared.connections.load(Ordering::Relaxed) >= limit {
        crate::metrics::AgentMetrics::global().refused(crate::metrics::RefusalReason::ConnectionLimit);
        return Some(format!(
            "this agent already has {limit} control connections open (its --max-connections); try again later"
        ));
    }
    None
}

/// Tells a refused peer why in one frame, without ever blocking the accept
/// loop, and closes the connection.
fn refuse_at_once(stream: TcpStream, reason: String) {
    use std::io::Write;
    if stream.set_nonblocking(true).is_ok() {
        let _ = (&stream).write(&encode(&Message::Error { message: reason }));
    }
}

fn handle_connection(stream: TcpStream, peer: SocketAddr, shared: &Shared) {
    let local_ip = match stream.local_addr() {
        Ok(a) => a.ip(),
        Err(_) => return,
    };
    log::debug!("{peer}: control connection opened");
    let mut channel = Channel::new(stream, MAX_CLIENT_FRAME);
    match serve_test(&mut channel, peer, local_ip, shared) {
        Ok(()) => {}
        Err(Refusal::Quiet(reason)) => log::warn!("{peer}: closed: {reason}"),
        Err(Refusal::Busy(reason)) => log::info!("{peer}: {reason}"),
        Err(Refusal::Tell(reason)) => {
            log::warn!("{peer}: refused: {reason}");
            let _ = channel.send(&Message::Error { message: reason });
        }
    }
    log::debug!("{peer}: control connection closed");
}

/// How a connection ended early: told to the client, not worth telling,
/// or answered `busy` (no problem, logged at info).
enum Refusal {
    Tell(String),
    Quiet(String),
    Busy(String),
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

fn unexpected(expected: &str, got: &Message) -> Refusal {
    crate::metrics::AgentMetrics::global().closed(crate::metrics::CloseReason::Protocol);
    Refusal::Tell(format!("expected {expected}, got '{}'", got.kind()))
}

fn expect_hello(channel: &mut Channel, timeout: Duration) -> Result<(), Refusal> {
    match channel.recv(timeout, "hello")? {
        Message::Hello(hello) => hello.check_peer("client").map_err(Refusal::from),
        other => Err(unexpected("hello", &other)),
    }
}

/// The agent's half of the challenge-response (see `protocol::auth`).
/// A client's request to set the MTU of the interface toward it: only
/// with `--allow-host-changes`, only for a client that proved the key, and
/// never while a test runs. Returns the interface's name.
fn change_mtu(shared: &Shared, local_ip: IpAddr, mtu: u32) -> Result<String, String> {
    if !shared.config.allow_host_changes {
        return Err(
            "this agent does not change host settings: start it with --allow-host-changes \
                    (and --psk-file) to let an authenticated client set its MTU"
                .into(),
        );
    }
    if shared.config.psk.is_none() {
        return Err("this agent changes host settings only for authenticated clients: start it with --psk-file".into());
    }
    if !(68..=65535).contains(&mtu) {
        return Err(format!("MTU {mtu} is outside 68 to 65535"));
    }
    let interface = crate::probe::nic::interface_with_address(local_ip)
        .ok_or_else(|| format!("no interface holds {local_ip}, the address the client reached"))?;
    if shared.admission.running() > 0 {
        return Err(
            "a test is running on this agent; its MTU is changed only between tests (try again, or use --wait)".into(),
        );
    }
    match crate::probe::mtu::set_mtu(&interface, mtu) {
        Ok(now) if now == mtu => Ok(interface),
        Ok(now) => Err(format!("set MTU {mtu} on {interface}, but it reads back as {now}")),
        Err(e) => Err(format!("cannot set the MTU of {interface} to {mtu}: {e}")),
    }
}

fn authenticate(channel: &mut Channel, psk: &Psk, shared: &Shared) -> Result<(), Refusal> {
    let agent_nonce = auth::new_nonce();
    channel.send(&Message::AuthChallenge {
        nonce: auth::hex_encode(&agent_nonce),
    })?;
    let (client_nonce, mac) = match channel.recv(shared.config.handshake_timeout, "auth_response")? {
        Message::AuthResponse { nonce, mac } => (nonce, mac),
        other => {
            shared.stats.auth_failures.fetch_add(1, Ordering::Relaxed);
            crate::metrics::AgentMetrics::global().refused(crate::metrics::RefusalReason::Auth);
            return Err(Refusal::Tell(format!(
                "authentication required: this agent needs its pre-shared key \
                 (client: --psk-file or NICBENCH_PSK_FILE); got '{}' instead of auth_response",
                other.kind()
            )));
        }
    };
    let decoded = (
        auth::hex_decode(&client_nonce, auth::NONCE_LEN),
        auth::hex_decode(&mac, auth::MAC_LEN),
    );
    let (Some(client_nonce), Some(mac)) = decoded else {
        shared.stats.auth_failures.fetch_add(1, Ordering::Relaxed);
        crate::metrics::AgentMetrics::global().refused(crate::metrics::RefusalReason::Auth);
        return Err(Refusal::Tell(
            "malformed auth_response: nonce and mac must be hex".into(),
        ));
    };
    if !psk.verify_client(&agent_nonce, &client_nonce, &mac) {
        shared.stats.auth_failures.fetch_add(1, Ordering::Relaxed);
        crate::metrics::AgentMetrics::global().refused(crate::metrics::RefusalReason::Auth);
        return Err(Refusal::Tell(
            "authentication failed: the client's pre-shared key differs from this agent's".into(),
        ));
    }
    channel.send(&Message::AuthOk {
        mac: auth::hex_encode(&psk.agent_mac(&client_nonce, &agent_nonce)),
    })?;
    Ok(())
}

/// True when the peer has closed its end (a queued client that left).
fn peer_gone(channel: &Channel) -> bool {
    stream_closed(channel.stream())
}

/// True when the other end of `stream` has closed it (or it failed);
/// reads nothing.
fn stream_closed(stream: &TcpStream) -> bool {
    let mut byte = 0u8;
    // SAFETY: a valid socket and a one-byte buffer; MSG_PEEK consumes nothing.
    let n = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n == 0 || (n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::WouldBlock)
}

/// A test slot now, or after waiting in line up to `wait_seconds`.
fn admit<'a>(
    channel: &mut Channel,
    shared: &'a Shared,
    spec: &TestSpec,
    wait_seconds: f64,
) -> Result<Ticket<'a>, Refusal> {
    let expected = Duration::from_secs_f64(spec.expected_seconds()) + SETUP_TIMEOUT;
    let busy = match shared.admission.try_enter(expected) {
        Ok(ticket) => return Ok(ticket),
        Err(busy) => busy,
    };
    let wait = if wait_seconds.is_finite() {
        wait_seconds.clamp(0.0, MAX_WAIT_SECONDS)
    } else {
        0.0
    };
    if wait == 0.0 {
        crate::metrics::AgentMetrics::global().refused(crate::metrics::RefusalReason::Busy);
        channel.send(&Message::Busy {
            seconds_left: busy.seconds_left,
            running_seconds: busy.running_seconds,
        })?;
        return Err(Refusal::Busy(match busy.running_seconds {
            Some(running) => format!("busy, told the running test has run {running:.1} s with no known end"),
            None => format!("busy, told to come back in {:.1} s", busy.seconds_left),
        }));
    }
    let place = shared.admission.enqueue(expected).map_err(|full| {
        crate::metrics::AgentMetrics::global().refused(crate::metrics::RefusalReason::QueueFull);
        Refusal::Tell(format!(
            "the agent is busy and {} clients already wait in line (its --max-queue); try again in {:.0} s",
            full.max_queue, busy.seconds_left
        ))
    })?;
    log::info!(
        "queued at position {} (waits up to {wait:.0} s)",
        shared.admission.waiting()
    );
    let deadline = Instant::now() + Duration::from_secs_f64(wait);
    let mut patience = Duration::ZERO;
    loop {
        let (position, seconds_left) = match shared.admission.poll(&place, patience) {
            Poll::Granted(ticket) => return Ok(ticket),
            Poll::Waiting { position, seconds_left } => (position, seconds_left),
        };
        if shared.shutdown.load(Ordering::Relaxed) {
            crate::metrics::AgentMetrics::global().refused(crate::metrics::RefusalReason::ShuttingDown);
            return Err(Refusal::Tell("the agent is shutting down".into()));
        }
        if peer_gone(channel) {
            return Err(Refusal::Quiet(format!("left the queue at position {position}")));
        }
        if Instant::now() >= deadline {
            crate::metrics::AgentMetrics::global().refused(crate::metrics::RefusalReason::Busy);
            channel.send(&Message::Busy {
                seconds_left,
                running_seconds: None,
            })?;
            return Err(Refusal::Busy(format!(
                "waited {wait:.0} s in line (position {position}) and was told busy"
            )));
        }
        channel.send(&Message::Queued { position, seconds_left })?;
        patience = QUEUE_UPDATE.min(deadline.saturating_duration_since(Instant::now()));
    }
}

/// Checks that the workload can run over links and that every agent
/// address of the spec's links is an address of this host.
fn check_links_here(spec: &TestSpec, workload: &dyn workload::Workload) -> Result<(), workload::SpecError> {
    if spec.links.is_empty() {
        return Ok(());
    }
    if !workload.supports_links() {
        return Err(workload::SpecError::Invalid(format!(
            "the {} workload does not run over several links (--links)",
            spec.workload
        )));
    }
    let here = crate::probe::nic::interface_addresses();
    for link in &spec.links {
        if !here.iter().any(|(_, a)| a.to_canonical() == link.agent.to_canonical()) {
            return Err(workload::SpecError::Invalid(format!(
                "--links: {} is not an address of the agent's host {}; ask it with `nicbench host --remote` \
                 or use --links auto",
                link.agent,
                crate::probe::host::hostname()
            )));
        }
    }
    Ok(())
}

/// Waits for the client's data connections while watching the control
/// connection, so a client that vanishes now frees its slot at once
/// instead of at the setup deadline.
fn accept_watching(
    pending: Box<dyn workload::AgentSide>,
    channel: &Channel,
    stragglers: &Mutex<Vec<thread::JoinHandle<()>>>,
) -> Result<Box<dyn workload::Side>, Refusal> {
    let (tx, rx) = std::sync::mpsc::channel();
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let accepting = thread::Builder::new()
        .name("accept-data".into())
        .spawn(move || {
            let _ = tx.send(pending.accept(deadline));
        })
        .map_err(|e| Refusal::Tell(format!("could not start a thread: {e}")))?;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(accepted) => {
                let _ = accepting.join();
                return accepted.map_err(|e| Refusal::Tell(e.to_string()));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) if peer_gone(channel) => {
                // The accept thread ends by itself at the deadline; the
                // agent joins it then, while this slot is free at once.
                stragglers.lock().unwrap_or_else(|e| e.into_inner()).push(accepting);
                return Err(Refusal::Quiet("left before opening its data connections".into()));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                let _ = accepting.join();
                return Err(Refusal::Tell("accepting the data connections failed".into()));
            }
        }
    }
}

/// Joins the threads of `list` that have ended.
fn join_finished(list: &Mutex<Vec<thread::JoinHandle<()>>>) {
    let mut list = list.lock().unwrap_or_else(|e| e.into_inner());
    let (done, running): (Vec<_>, Vec<_>) = std::mem::take(&mut *list).into_iter().partition(|t| t.is_finished());
    *list = running;
    for t in done {
        let _ = t.join();
    }
}

fn serve_test(channel: &mut Channel, peer: SocketAddr, local_ip: IpAddr, shared: &Shared) -> Result<(), Refusal> {
    expect_hello(channel, shared.config.handshake_timeout)?;
    let mut hello = Hello::ours(crate::workload::names());
    hello.auth_required = shared.config.psk.is_some();
    if shared.config.allow_peer_tests && shared.config.psk.is_some() {
        hello.features.push(protocol::FEATURE_PEER_TESTS.to_string());
    }
    hello.features.push(protocol::FEATURE_WATCH.to_string());
    channel.send(&Message::Hello(hello))?;
    if let Some(psk) = &shared.config.psk {
        authenticate(channel, psk, shared)?;
    }
    let mut addresses_sent = false;
    let (spec, wait_seconds) = loop {
        match channel.recv(shared.config.handshake_timeout, "test_request")? {
            Message::TestRequest { spec, wait_seconds } => break (spec, wait_seconds),
            Message::FactsRequest => {
                channel.send(&Message::Facts {
                    facts: facts_toward(local_ip),
                })?;
                return Ok(());
            }
            // Once per connection, so a client cannot keep a control
            // connection busy with requests.
            Message::SetMtu { mtu } => {
                let interface = change_mtu(shared, local_ip, mtu).map_err(Refusal::Tell)?;
                log::info!("{peer}: MTU of {interface} set to {mtu}");
                channel.send(&Message::Facts {
                    facts: facts_toward(local_ip),
                })?;
                return Ok(());
            }
            Message::PeerTestRequest {
                target,
                spec,
                wait_seconds,
            } => return peer::serve(channel, peer, shared, target, spec, wait_seconds),
            // Once per connection too, as set_mtu.
            Message::SetHost { setting } => return host_settings::serve(channel, peer, local_ip, shared, &setting),
            Message::AddressesRequest if !addresses_sent => {
                addresses_sent = true;
                channel.send(&Message::Addresses {
                    addresses: crate::probe::nic::interface_addresses_with_prefix(),
                })?;
            }
            // `nicbench watch --peer`: sample this side until watch_stop.
            Message::WatchStart => return watch::serve(channel, peer, local_ip, shared),
            other => return Err(unexpected("test_request", &other)),
        }
    };
    let workload = workload::find(&spec.workload).map_err(|e| Refusal::Tell(e.to_string()))?;
    workload
        .validate(&spec)
        .and_then(|()| TestSpec::validate_cpus(&spec.agent.cpus, "--remote-affinity"))
        .and_then(|()| check_links_here(&spec, workload))
        .inspect_err(|_| crate::metrics::AgentMetrics::global().refused(crate::metrics::RefusalReason::InvalidRequest))
        .map_err(|e| Refusal::Tell(e.to_string()))?;
    shared
        .config
        .limits
        .check(&spec)
        .inspect_err(|_| crate::metrics::AgentMetrics::global().refused(crate::metrics::RefusalReason::Limits))
        .map_err(Refusal::Tell)?;
    let ticket = admit(channel, shared, &spec, wait_seconds)?;
    if shared.shutdown.load(Ordering::Relaxed) {
        crate::metrics::AgentMetrics::global().refused(crate::metrics::RefusalReason::ShuttingDown);
        return Err(Refusal::Tell("the agent is shutting down".into()));
    }

    let token = protocol::new_token();
    let routes = workload::routes_of(&spec);
    let net = AgentNet {
        // With links, TCP data connections may arrive on any link's address:
        // listen on all, and admit each stream only over its own link.
        local_ip: match (routes.is_empty(), local_ip) {
            (true, ip) => ip,
            (false, IpAddr::V4(_)) => IpAddr::from([0u8; 4]),
            (false, IpAddr::V6(_)) => IpAddr::from([0u16; 8]),
        },
        peer_ip: peer.ip(),
        token,
        storage: shared.config.storage.clone(),
        routes,
    };
    let pending = workload
        .agent_side(&spec, &net)
        .map_err(|e| Refusal::Tell(e.to_string()))?;
    channel.send(&Message::Accepted {
        token: protocol::token_to_hex(&token),
        data_ports: pending.data_ports(),
        agent: facts_toward(local_ip),
    })?;
    let side = accept_watching(pending, channel, &shared.stragglers)?;
    channel.send(&Message::Ready)?;
    match channel.recv(SETUP_TIMEOUT, "start")? {
        Message::Start => {}
        other => return Err(unexpected("start", &other)),
    }
    log::info!(
        "{peer}: running {} test ({} streams)",
        spec.workload,
        spec.flows().len()
    );
    let start = Instant::now();
    // A byte count ends the test, not a time: its pace tells the end.
    let pace = spec.bytes.map(|bytes| {
        let directions = if spec.direction == Direction::Bidir { 2 } else { 1 };
        Pace::new(bytes.saturating_mul(directions))
    });
    ticket.started(
        workload.known_duration_seconds(&spec).map(Duration::from_secs_f64),
        pace.clone(),
    );
    let on_interval = pace.map(|pace| -> IntervalCallback {
        Box::new(move |tick| pace.add(tick.streams.iter().map(|&(_, _, bytes)| bytes).sum()))
    });
    let plan = TrialPlan {
        host: Party::Agent,
        spec: &spec,
        hard_deadline: side_runner::hard_deadline(&spec, start, Some(shared.config.limits.max_duration_seconds)),
        wait_for_peer_report: false,
        interrupted: &|| {
            shared
                .shutdown
                .load(Ordering::Relaxed)
                .then(|| "the agent is shutting down: SIGTERM or SIGINT on its host".to_string())
        },
        on_interval,
        on_progress: None,
    };
    let mut outcome = side_runner::run_side(side, plan, channel, &ProcStat)
        .map_err(|e| Refusal::Quiet(format!("test aborted: {e}")))?;
    let overlapped = ticket.overlapped();
    outcome.local.overlapped_tests = overlapped;
    // The slot is free before the client hears that the test is done: a
    // client that starts its next test at once (demo, a script) must not
    // be told "busy" by the test it has just finished.
    drop(ticket);
    shared.stats.tests_served.fetch_add(1, Ordering::Relaxed);
    crate::metrics::AgentMetrics::global().test_served(&spec.workload);
    channel.send(&Message::Done { report: outcome.local })?;
    log::info!(
        "{peer}: test done in {:.1} s{}",
        start.elapsed().as_secs_f64(),
        match overlapped {
            0 => String::new(),
            n => format!(", overlapped by {n} other test(s)"),
        }
    );
    Ok(())
}
