//! `nicbench serve`: the agent. It accepts control connections, runs its
//! side of each test with the same workload engines as the client, and
//! sends its measurement back. One test at a time by default; others are
//! answered `busy` with the time left. Every read has a deadline, every
//! refusal says why, and no client can make it panic or stop serving.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::logging;
use crate::model::Host;
use crate::probe::cpu::ProcStat;
use crate::probe::host::facts_toward;
use crate::protocol::channel::Channel;
use crate::protocol::{self, Hello, Message, ProtocolError, MAX_CLIENT_FRAME};
use crate::trial::{self, TrialPlan};
use crate::workload::{self, AgentNet, TestSpec};

/// How long a client may take to say hello and to ask for a test.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the client may take to open its data connections and start.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Operator settings of an agent.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub listen: SocketAddr,
    /// Serve one test, then exit.
    pub once: bool,
    /// Longest test accepted, in seconds (warm-up included).
    pub max_duration_seconds: f64,
    /// Most streams per direction accepted.
    pub max_streams: u32,
    /// Control connections handled at once; more are closed at once.
    pub max_connections: usize,
}

impl AgentConfig {
    pub fn new(listen: SocketAddr) -> AgentConfig {
        AgentConfig {
            listen,
            once: false,
            max_duration_seconds: 3600.0,
            max_streams: workload::spec::MAX_STREAMS,
            max_connections: 64,
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

/// State shared by the connection threads.
struct Shared {
    config: AgentConfig,
    /// End of the running test, if one runs.
    busy_until: Mutex<Option<Instant>>,
    connections: AtomicUsize,
    shutdown: Arc<AtomicBool>,
    tests_served: AtomicUsize,
}

/// A bound agent.
pub struct Agent {
    listener: TcpListener,
    shared: Arc<Shared>,
}

/// Releases the test slot when a test ends, however it ends.
struct Slot<'a>(&'a Shared);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if let Ok(mut busy) = self.0.busy_until.lock() {
            *busy = None;
        }
    }
}

impl Agent {
    pub fn bind(config: AgentConfig) -> Result<Agent, AgentError> {
        let listener = TcpListener::bind(config.listen).map_err(|source| AgentError::Bind {
            addr: config.listen,
            hint: match source.kind() {
                std::io::ErrorKind::AddrInUse => {
                    "; another agent or program already listens there: stop it or choose another --port"
                }
                std::io::ErrorKind::AddrNotAvailable => "; that address is not configured on this host",
                std::io::ErrorKind::PermissionDenied => "; ports below 1024 need root",
                _ => "",
            },
            source,
        })?;
        Ok(Agent {
            listener,
            shared: Arc::new(Shared {
                config,
                busy_until: Mutex::new(None),
                connections: AtomicUsize::new(0),
                shutdown: Arc::new(AtomicBool::new(false)),
                tests_served: AtomicUsize::new(0),
            }),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    /// A flag that ends `serve` when raised (checked every 200 ms).
    pub fn shutdown_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.shared.shutdown)
    }

    /// Serves until the shutdown flag is raised (or after one test with `once`).
    pub fn serve(self) {
        logging::info(&format!("agent listening on {}", self.local_addr()));
        let shared = self.shared;
        let mut workers: Vec<thread::JoinHandle<()>> = Vec::new();
        while !shared.shutdown.load(Ordering::Relaxed) {
            if !wait_readable(&self.listener, 200) {
                continue;
            }
            let (stream, peer) = match self.listener.accept() {
                Ok(pair) => pair,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    logging::warn(&format!("accept failed: {e}"));
                    thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            workers.retain(|w| !w.is_finished());
            if shared.connections.load(Ordering::Relaxed) >= shared.config.max_connections {
                logging::warn(&format!(
                    "{peer}: closed at once, already {} control connections open",
                    shared.config.max_connections
                ));
                continue;
            }
            shared.connections.fetch_add(1, Ordering::Relaxed);
            let conn_shared = Arc::clone(&shared);
            let spawned = thread::Builder::new().name(format!("control-{peer}")).spawn(move || {
                handle_connection(stream, peer, &conn_shared);
                conn_shared.connections.fetch_sub(1, Ordering::Relaxed);
            });
            match spawned {
                Ok(w) => workers.push(w),
                Err(e) => {
                    shared.connections.fetch_sub(1, Ordering::Relaxed);
                    logging::error(&format!("{peer}: could not start a thread: {e}"));
                }
            }
            if shared.config.once {
                for w in workers.drain(..) {
                    let _ = w.join();
                }
                if shared.tests_served.load(Ordering::Relaxed) > 0 {
                    break;
                }
            }
        }
        for w in workers {
            let _ = w.join();
        }
        logging::info("agent stopped");
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

fn handle_connection(stream: TcpStream, peer: SocketAddr, shared: &Shared) {
    let local_ip = match stream.local_addr() {
        Ok(a) => a.ip(),
        Err(_) => return,
    };
    let mut channel = Channel::new(stream, MAX_CLIENT_FRAME);
    match serve_test(&mut channel, peer, local_ip, shared) {
        Ok(()) => {}
        Err(Refusal::Quiet(reason)) => logging::info(&format!("{peer}: {reason}")),
        Err(Refusal::Tell(reason)) => {
            logging::warn(&format!("{peer}: {reason}"));
            let _ = channel.send(&Message::Error { message: reason });
        }
    }
}

/// How a connection ended early: told to the client, or not worth telling.
enum Refusal {
    Tell(String),
    Quiet(String),
}

impl From<ProtocolError> for Refusal {
    fn from(e: ProtocolError) -> Refusal {
        match e {
            ProtocolError::Closed(_) | ProtocolError::Io(_) => Refusal::Quiet(e.to_string()),
            other => Refusal::Tell(other.to_string()),
        }
    }
}

fn expect_hello(channel: &mut Channel) -> Result<(), Refusal> {
    match channel.recv(HANDSHAKE_TIMEOUT, "hello")? {
        Message::Hello(hello) => hello.check_peer("client").map_err(Refusal::from),
        other => Err(Refusal::Tell(format!("expected hello, got '{}'", other.kind()))),
    }
}

fn check_limits(spec: &TestSpec, config: &AgentConfig) -> Result<(), String> {
    if spec.expected_seconds() > config.max_duration_seconds {
        return Err(format!(
            "the test would last {:.0} s; this agent allows at most {:.0} s (its --max-duration)",
            spec.expected_seconds(),
            config.max_duration_seconds
        ));
    }
    if spec.streams > config.max_streams {
        return Err(format!(
            "{} streams asked; this agent allows at most {} (its --max-streams)",
            spec.streams, config.max_streams
        ));
    }
    Ok(())
}

fn serve_test(channel: &mut Channel, peer: SocketAddr, local_ip: IpAddr, shared: &Shared) -> Result<(), Refusal> {
    expect_hello(channel)?;
    channel.send(&Message::Hello(Hello::ours()))?;
    let spec = match channel.recv(HANDSHAKE_TIMEOUT, "test_request")? {
        Message::TestRequest { spec } => spec,
        Message::FactsRequest => {
            channel.send(&Message::Facts {
                facts: facts_toward(local_ip),
            })?;
            return Ok(());
        }
        other => return Err(Refusal::Tell(format!("expected test_request, got '{}'", other.kind()))),
    };
    let workload = workload::find(&spec.workload).map_err(|e| Refusal::Tell(e.to_string()))?;
    workload
        .validate(&spec)
        .and_then(|()| TestSpec::validate_cpus(&spec.agent.cpus, "--remote-affinity"))
        .map_err(|e| Refusal::Tell(e.to_string()))?;
    check_limits(&spec, &shared.config).map_err(Refusal::Tell)?;

    let _slot = {
        let mut busy = shared.busy_until.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(until) = *busy {
            let seconds_left = until.saturating_duration_since(Instant::now()).as_secs_f64();
            drop(busy);
            channel.send(&Message::Busy { seconds_left })?;
            return Err(Refusal::Quiet(format!(
                "busy, told to come back in {seconds_left:.1} s"
            )));
        }
        *busy = Some(Instant::now() + SETUP_TIMEOUT + Duration::from_secs_f64(spec.expected_seconds()));
        Slot(shared)
    };

    let token = protocol::new_token();
    let net = AgentNet {
        local_ip,
        peer_ip: peer.ip(),
        token,
    };
    let pending = workload
        .agent_side(&spec, &net)
        .map_err(|e| Refusal::Tell(e.to_string()))?;
    channel.send(&Message::Accepted {
        token: protocol::token_to_hex(&token),
        data_ports: pending.data_ports(),
        agent: facts_toward(local_ip),
    })?;
    let side = pending
        .accept(Instant::now() + SETUP_TIMEOUT)
        .map_err(|e| Refusal::Tell(e.to_string()))?;
    channel.send(&Message::Ready)?;
    match channel.recv(SETUP_TIMEOUT, "start")? {
        Message::Start => {}
        other => return Err(Refusal::Tell(format!("expected start, got '{}'", other.kind()))),
    }
    logging::info(&format!(
        "{peer}: running {} test ({} streams)",
        spec.workload,
        spec.flows().len()
    ));
    let start = Instant::now();
    let plan = TrialPlan {
        host: Host::Agent,
        spec: &spec,
        hard_deadline: trial::hard_deadline(&spec, start, Some(shared.config.max_duration_seconds)),
        wait_for_peer_report: false,
        interrupted: &|| shared.shutdown.load(Ordering::Relaxed),
        on_interval: None,
    };
    let outcome = trial::run_side(side, plan, channel, &ProcStat).map_err(|e| Refusal::Quiet(e.to_string()))?;
    shared.tests_served.fetch_add(1, Ordering::Relaxed);
    channel.send(&Message::Done { report: outcome.local })?;
    logging::info(&format!("{peer}: test done in {:.1} s", start.elapsed().as_secs_f64()));
    Ok(())
}
