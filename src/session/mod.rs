//! The client side of one test: connect to the agent, exchange hellos,
//! send the spec, open the data connections, start, run the local side,
//! and merge both sides' measurements into a [`TrialResult`].

use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::address::Family;
use crate::model::{Endpoint, MergeError, Party, RunResult, SideReport, TrialResult, SCHEMA};
use crate::probe::cpu::ProcStat;
use crate::probe::host::facts_toward;
use crate::protocol::auth::{self, KeyError, Psk};
use crate::protocol::channel::Channel;
use crate::protocol::{token_from_hex, Hello, Message, ProtocolError, MAX_AGENT_FRAME};
use crate::side_runner::{self, TrialError, TrialPlan};
use crate::workload::runner::{IntervalCallback, ProgressCallback};
use crate::workload::{self, ClientNet, SpecError, TestSpec, WorkloadError};

/// How long to wait for the agent to answer at each step before the test.
const REPLY_TIMEOUT: Duration = Duration::from_secs(15);

/// Where the agent is and how to reach it.
#[derive(Debug, Clone)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub family: Option<Family>,
    /// Local address for the control and data sockets (`-B`).
    pub bind: Option<IpAddr>,
    pub connect_timeout: Duration,
    /// How long to wait in the agent's queue when it is busy (0: fail at once).
    pub wait: Duration,
    /// Pre-shared key file for an agent that requires authentication.
    pub psk_file: Option<std::path::PathBuf>,
    /// Credentials for an iperf3 server that requires RSA authentication.
    pub iperf3_auth: Option<crate::iperf3::auth::Credentials>,
}

/// "Busy" in words: the time left when the agent could say, else how long
/// the other test has been running.
fn busy_words(addr: SocketAddr, seconds_left: f64, running_seconds: Option<f64>) -> String {
    match running_seconds {
        Some(running) => format!(
            "the agent at {addr} is busy with another test, running for {running:.0} s so far with no known end \
             (a byte count or a sweep); try again later, or wait in its queue with --wait"
        ),
        None => {
            format!(
                "the agent at {addr} is busy with another test for about {seconds_left:.0} s more; try again then, \
                 or pass --wait 60s to wait in its queue for a turn"
            )
        }
    }
}

/// Everything that can end a test on the client, each with what to do.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("cannot resolve '{host}': {detail}")]
    Resolve { host: String, detail: String },
    #[error(
        "connection refused by {addr}: no nicbench agent listens there; \
         start one with 'nicbench serve --port {port}' on that host, or pass the agent's --port"
    )]
    Refused { addr: SocketAddr, port: u16 },
    #[error("no answer from {addr} within {seconds:.0} s: the host is down, or a firewall drops the connection")]
    ConnectTimeout { addr: SocketAddr, seconds: f64 },
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{addr}: that port is not a nicbench agent (it speaks something else: {detail}); \
         check the port (-p, HOST:PORT) or start 'nicbench serve' on that host"
    )]
    NotAnAgent { addr: SocketAddr, detail: String },
    #[error("{}", busy_words(*addr, *seconds_left, *running_seconds))]
    Busy {
        addr: SocketAddr,
        seconds_left: f64,
        running_seconds: Option<f64>,
    },
    #[error("the agent refused the test: {0}")]
    AgentRefused(String),
    #[error("{0}")]
    Key(#[from] KeyError),
    #[error(
        "authentication required: the agent at {addr} needs a pre-shared key; \
         pass --psk-file FILE (or set NICBENCH_PSK_FILE) with the agent's key"
    )]
    AuthRequired { addr: SocketAddr },
    /// The agent's or our own words, starting with "authentication failed".
    #[error("{0}")]
    AuthFailed(String),
    #[error("the agent sent an invalid report: {0}")]
    BadReport(String),
    #[error("invalid test: {0}")]
    Spec(#[from] SpecError),
    #[error("talking to the agent: {0}")]
    Protocol(#[from] ProtocolError),
    #[error("setting up the data connections: {0}")]
    Workload(#[from] WorkloadError),
    #[error("{0}")]
    Trial(#[from] TrialError),
    #[error("the agent's report does not match the test: {0}")]
    Merge(#[from] MergeError),
    #[error(transparent)]
    Iperf3(#[from] crate::iperf3::Iperf3Error),
    #[error("the test ran, but stream {stream_id} ({role}) failed: {message}")]
    Stream {
        stream_id: u32,
        role: &'static str,
        message: String,
    },
}

impl SessionError {
    /// The process exit code for this error (documented in the README).
    pub fn exit_code(&self) -> i32 {
        match self {
            SessionError::Spec(_) | SessionError::Key(_) => 2,
            SessionError::Resolve { .. }
            | SessionError::Refused { .. }
            | SessionError::ConnectTimeout { .. }
            | SessionError::Connect { .. }
            | SessionError::NotAnAgent { .. } => 3,
            SessionError::Protocol(ProtocolError::VersionMismatch { .. })
            | SessionError::Busy { .. }
            | SessionError::AgentRefused(_)
            | SessionError::AuthRequired { .. }
            | SessionError::AuthFailed(_) => 4,
            SessionError::Iperf3(e) => e.exit_code(),
            _ => 5,
        }
    }
}

fn resolve(target: &Target) -> Result<Vec<SocketAddr>, SessionError> {
    let resolve_error = |detail: String| SessionError::Resolve {
        host: target.host.clone(),
        detail,
    };
    let host = target.host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = (host, target.port)
        .to_socket_addrs()
        .map_err(|e| resolve_error(e.to_string()))?
        .filter(|a| match target.family {
            Some(Family::V4) => a.is_ipv4(),
            Some(Family::V6) => a.is_ipv6(),
            None => true,
        })
        .collect();
    if addrs.is_empty() {
        return Err(resolve_error("no address of the requested family (-4/-6)".into()));
    }
    Ok(addrs)
}

/// Opens the control connection to the first address that answers.
pub fn connect(target: &Target) -> Result<TcpStream, SessionError> {
    let mut last = None;
    for addr in resolve(target)? {
        let attempt = (|| {
            let domain = if addr.is_ipv4() { Domain::IPV4 } else { Domain::IPV6 };
            let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
            if let Some(bind) = target.bind {
                socket.bind(&SocketAddr::new(bind, 0).into())?;
            }
            socket.connect_timeout(&SockAddr::from(addr), target.connect_timeout)?;
            Ok::<TcpStream, std::io::Error>(socket.into())
        })();
        match attempt {
            Ok(stream) => return Ok(stream),
            Err(e) => {
                last = Some(match e.kind() {
                    std::io::ErrorKind::ConnectionRefused => SessionError::Refused {
                        addr,
                        port: target.port,
                    },
                    std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => SessionError::ConnectTimeout {
                        addr,
                        seconds: target.connect_timeout.as_secs_f64(),
                    },
                    _ => SessionError::Connect { addr, source: e },
                })
            }
        }
    }
    Err(last.expect("resolve returns at least one address"))
}

/// Options of one client run that are not part of the spec.
pub struct RunOptions<'a> {
    /// Polled during the test: why to stop, once the user pressed Ctrl-C.
    pub interrupted: &'a (dyn Fn() -> Option<String> + Sync),
    pub on_interval: Option<IntervalCallback>,
    /// Called after each step of a workload with steps (sweep points).
    pub on_progress: Option<ProgressCallback>,
    /// Number of this trial within the case (1-based).
    pub trial: u32,
}

fn unexpected(expected: &str, got: Message, addr: SocketAddr) -> SessionError {
    match got {
        Message::Busy {
            seconds_left,
            running_seconds,
        } => SessionError::Busy {
            addr,
            seconds_left,
            running_seconds,
        },
        Message::Error { message } if message.contains("unknown field") => SessionError::AgentRefused(format!(
            "{message} (the agent runs an older nicbench build than this client, which added that \
             parameter: run the same build on both ends)"
        )),
        Message::Error { message } => SessionError::AgentRefused(message),
        other => SessionError::Protocol(ProtocolError::Unexpected {
            expected: expected.to_string(),
            got: other.kind().to_string(),
        }),
    }
}

/// Hellos both ways, then the key proof when the agent asks for it.
fn handshake(channel: &mut Channel, addr: SocketAddr, psk: Option<&Psk>) -> Result<Hello, SessionError> {
    handshake_keyed(channel, addr, psk, false)
}

/// The handshake; with `require_key`, an agent that does not ask for the
/// key is refused before anything else is sent: only an agent that proves
/// it knows our key may receive traffic we send for somebody else (a
/// peer test, a probe).
fn handshake_keyed(
    channel: &mut Channel,
    addr: SocketAddr,
    psk: Option<&Psk>,
    require_key: bool,
) -> Result<Hello, SessionError> {
    channel.send(&Message::Hello(Hello::ours(crate::workload::names())))?;
    let hello = channel.recv(REPLY_TIMEOUT, "the agent's hello").map_err(|e| match e {
        // Something listens there, but it does not speak our protocol.
        ProtocolError::Timeout { .. } | ProtocolError::FrameTooLarge { .. } | ProtocolError::Malformed(_) => {
            SessionError::NotAnAgent {
                addr,
                detail: foreign_answer(&e),
            }
        }
        other => other.into(),
    })?;
    let hello = match hello {
        Message::Hello(hello) => hello,
        other => return Err(unexpected("hello", other, addr)),
    };
    hello.check_peer("agent").map_err(|e| match e {
        ProtocolError::NotNicbench => SessionError::NotAnAgent {
            addr,
            detail: "its hello has the wrong magic".into(),
        },
        other => other.into(),
    })?;
    if require_key && !hello.auth_required {
        return Err(SessionError::AgentRefused(format!(
            "the agent at {addr} does not ask for a pre-shared key, so it cannot prove it belongs to this \
             mesh; peer tests go only to agents started with the same --psk-file"
        )));
    }
    match (hello.auth_required, psk) {
        (false, None) => {}
        (false, Some(_)) => {
            log::warn!("the agent at {addr} does not require authentication; the pre-shared key was not used");
        }
        (true, None) => return Err(SessionError::AuthRequired { addr }),
        (true, Some(psk)) => authenticate(channel, addr, psk)?,
    }
    Ok(hello)
}

/// What a service that is no nicbench agent answered, in words: the
/// first four bytes, read as our frame length, are often text ("HTTP").
fn foreign_answer(e: &ProtocolError) -> String {
    match e {
        ProtocolError::FrameTooLarge { length, .. } => {
            let bytes = length.to_be_bytes();
            if bytes.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
                format!("its answer starts with \"{}\"", String::from_utf8_lossy(&bytes))
            } else {
                format!("its answer is no nicbench hello: {e}")
            }
        }
        ProtocolError::Timeout { .. } => "it sent no nicbench hello".into(),
        other => format!("its answer is no nicbench hello: {other}"),
    }
}

/// The client's half of the challenge-response (see `protocol::auth`):
/// prove the key, then check the agent's proof that it knows it too.
fn authenticate(channel: &mut Channel, addr: SocketAddr, psk: &Psk) -> Result<(), SessionError> {
    let malformed = |what: &str| SessionError::Protocol(ProtocolError::Malformed(format!("{what} is not hex")));
    let agent_nonce = match channel.recv(REPLY_TIMEOUT, "the agent's auth_challenge")? {
        Message::AuthChallenge { nonce } => {
            auth::hex_decode(&nonce, auth::NONCE_LEN).ok_or_else(|| malformed("the challenge nonce"))?
        }
        other => return Err(unexpected("auth_challenge", other, addr)),
    };
    let client_nonce = auth::new_nonce();
    channel.send(&Message::AuthResponse {
        nonce: auth::hex_encode(&client_nonce),
        mac: auth::hex_encode(&psk.client_mac(&agent_nonce, &client_nonce)),
    })?;
    match channel.recv(REPLY_TIMEOUT, "the agent to check the key")? {
        Message::AuthOk { mac } => {
            let mac = auth::hex_decode(&mac, auth::MAC_LEN).ok_or_else(|| malformed("the agent's proof"))?;
            if psk.verify_agent(&client_nonce, &agent_nonce, &mac) {
                Ok(())
            } else {
                Err(SessionError::AuthFailed(format!(
                    "authentication failed: the agent at {addr} accepted us but could not prove it knows the same key; \
                     it may not be the agent you meant"
                )))
            }
        }
        Message::Error { message } => Err(SessionError::AuthFailed(message)),
        other => Err(unexpected("auth_ok", other, addr)),
    }
}

/// What the agent answers when it accepts a test.
struct Acceptance {
    token: [u8; crate::protocol::TOKEN_LEN],
    data_ports: Vec<u16>,
    agent: crate::model::HostFacts,
}

/// Sends the test request and waits for acceptance, in the agent's queue
/// when `wait` allows it.
fn request(
    channel: &mut Channel,
    spec: &TestSpec,
    wait: Duration,
    addr: SocketAddr,
) -> Result<Acceptance, SessionError> {
    let wait_seconds = wait.as_secs_f64().min(crate::agent::MAX_WAIT_SECONDS);
    channel.send(&Message::TestRequest {
        spec: spec.clone(),
        wait_seconds,
    })?;
    let mut last_position = None;
    loop {
        match channel.recv(REPLY_TIMEOUT, "the agent to accept the test")? {
            Message::Accepted {
                token,
                data_ports,
                agent,
            } => {
                if data_ports.is_empty() || data_ports.len() > 4096 || data_ports.contains(&0) {
                    return Err(SessionError::BadReport(format!(
                        "{} data ports offered ({:?}...)",
                        data_ports.len(),
                        &data_ports[..data_ports.len().min(4)]
                    )));
                }
                return Ok(Acceptance {
                    token: token_from_hex(&token)?,
                    data_ports,
                    agent,
                });
            }
            Message::Queued { position, seconds_left } if wait_seconds > 0.0 => {
                if position == 0 || !(0.0..=1e7).contains(&seconds_left) {
                    return Err(SessionError::BadReport(format!(
                        "queue position {position}, {seconds_left} s left"
                    )));
                }
                if last_position != Some(position) {
                    log::warn!(
                        "the agent at {addr} is busy: waiting in line at position {position}, \
                         about {seconds_left:.0} s to go (--wait {wait_seconds:.0} s)"
                    );
                    last_position = Some(position);
                }
            }
            other => return Err(unexpected("accepted", other, addr)),
        }
    }
}

/// Checks that the agent's report covers only what was asked: its own
/// ends of the streams of `spec`, once each, with sane numbers.
fn check_agent_report(report: &SideReport, spec: &TestSpec) -> Result<(), SessionError> {
    let bad = |what: String| Err(SessionError::BadReport(what));
    if report.host != Party::Agent {
        return bad(format!("it claims to come from the {}", report.host.as_str()));
    }
    let flows = spec.flows();
    let mut seen = std::collections::BTreeSet::new();
    for end in &report.streams {
        let id = end.stream_id;
        let Some((_, flow)) = flows.iter().find(|(f, _)| *f == id) else {
            return bad(format!("it reports stream id {id}, which the client did not ask for"));
        };
        let agent_role = if flow.sender() == Party::Agent {
            crate::model::Role::Sender
        } else {
            crate::model::Role::Receiver
        };
        if end.role != agent_role {
            return bad(format!(
                "it reports the {:?} end of stream {id}, which is not the agent's",
                end.role
            ));
        }
        if !seen.insert(id) {
            return bad(format!("it reports stream {id} twice"));
        }
        let numbers = [end.seconds, end.bits_per_second];
        if numbers.iter().any(|n| !n.is_finite() || *n < 0.0) {
            return bad(format!("stream {id} has a negative or non-finite time or rate"));
        }
    }
    let cpu = &report.cpu;
    if !(cpu.seconds.is_finite() && cpu.seconds >= 0.0 && cpu.utilization_percent.is_finite()) {
        return bad("its CPU report has a negative or non-finite time".into());
    }
    Ok(())
}

/// Runs one trial of `spec` against the agent at `target`.
pub fn run(target: &Target, spec: &TestSpec, options: RunOptions) -> Result<RunResult, SessionError> {
    let psk = target.psk_file.as_deref().map(Psk::from_file).transpose()?;
    run_keyed(target, psk.as_ref(), false, spec, options)
}

/// [`run`] with the key in hand (an agent running a peer test holds its
/// own); `require_key` refuses an agent that does not ask for it.
pub fn run_keyed(
    target: &Target,
    psk: Option<&Psk>,
    require_key: bool,
    spec: &TestSpec,
    options: RunOptions,
) -> Result<RunResult, SessionError> {
    let workload = workload::find(&spec.workload)?;
    workload.validate(spec)?;
    TestSpec::validate_cpus(&spec.client.cpus, "-A/--affinity")?;
    let started_at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let stream = connect(target)?;
    let agent_addr = stream.peer_addr().map_err(ProtocolError::Io)?;
    let client_addr = stream.local_addr().map_err(ProtocolError::Io)?;
    let mut channel = Channel::new(stream, MAX_AGENT_FRAME);

    let hello = handshake_keyed(&mut channel, agent_addr, psk, require_key)?;
    if !spec.links.is_empty() {
        if !workload.supports_links() {
            return Err(SpecError::Invalid(format!(
                "the {} workload does not run over several links; drop --links",
                spec.workload
            ))
            .into());
        }
        check_links_supported(&hello, agent_addr)?;
    }
    let accepted = request(&mut channel, spec, target.wait, agent_addr)?;
    let own_boot_id = crate::probe::host::boot_id();
    let net = ClientNet {
        agent_ip: agent_addr.ip(),
        data_ports: accepted.data_ports,
        token: accepted.token,
        bind: target.bind,
        routes: workload::routes_of(spec),
        same_kernel: !own_boot_id.is_empty() && accepted.agent.boot_id == own_boot_id,
    };
    let side = workload.client_side(spec, &net)?;
    match channel.recv(REPLY_TIMEOUT, "the agent to be ready")? {
        Message::Ready => {}
        other => return Err(unexpected("ready", other, agent_addr)),
    }
    channel.send(&Message::Start)?;
    let start = Instant::now();
    let plan = TrialPlan {
        host: Party::Client,
        spec,
        // A byte-count test has no expected end; never wait for ever.
        hard_deadline: side_runner::hard_deadline(spec, start, Some(crate::model::spec::MAX_DURATION_SECONDS)),
        wait_for_peer_report: true,
        interrupted: options.interrupted,
        on_interval: options.on_interval,
        on_progress: options.on_progress,
    };
    let outcome = side_runner::run_side(side, plan, &mut channel, &ProcStat)?;
    let agent_report = outcome.peer.expect("run_side waits for the peer's report");
    check_agent_report(&agent_report, spec)?;
    let (client_links, agent_links) = (outcome.local.links.clone(), agent_report.links.clone());
    let mut result = TrialResult::merge(options.trial, &spec.flows(), outcome.local, agent_report)?;
    workload::results_of(&spec.workload).summarize(&mut result);
    crate::links::summarize(&mut result, spec, &client_links, &agent_links);
    result.interruption = outcome.interruption;
    for s in &result.streams {
        for (end, role) in [(&s.sender, "sender"), (&s.receiver, "receiver")] {
            if let Some(message) = &end.error {
                return Err(SessionError::Stream {
                    stream_id: s.stream_id,
                    role,
                    message: message.clone(),
                });
            }
        }
    }
    let mut run = RunResult {
        schema: SCHEMA.to_string(),
        workload: spec.workload.clone(),
        started_at_unix_seconds: started_at.as_secs_f64(),
        client: Endpoint {
            address: client_addr.to_string(),
            facts: facts_toward(client_addr.ip()),
        },
        agent: Endpoint {
            address: agent_addr.to_string(),
            facts: accepted.agent,
        },
        spec: spec.clone(),
        trials: vec![result.clone()],
        interrupted: result.interruption.is_some(),
        result,
        repetition: None,
        peer_protocol: None,
    };
    crate::verdict::annotate(&mut run, None);
    Ok(run)
}

/// Refuses to ask an agent for links when its hello does not offer them.
fn check_links_supported(hello: &Hello, addr: SocketAddr) -> Result<(), SessionError> {
    if hello.has_feature(crate::protocol::FEATURE_LINKS) {
        return Ok(());
    }
    Err(SessionError::AgentRefused(format!(
        "the agent at {addr} (nicbench {}) does not know --links; run nicbench {} or newer there",
        hello.software_version,
        env!("CARGO_PKG_VERSION")
    )))
}

/// Asks the agent at `from` to run `spec` itself, as the client, toward the
/// agent at `toward` (HOST:PORT as `from` should reach it): a third-party
/// test of `nicbench mesh`. The agent at `from` must allow peer tests and
/// this coordinator must know its key. Returns the run as `from` measured it
/// (client = `from`, agent = `toward`).
pub fn peer_test(from: &Target, toward: &str, spec: &TestSpec) -> Result<RunResult, SessionError> {
    workload::find(&spec.workload)?.validate(spec)?;
    let psk = from.psk_file.as_deref().map(Psk::from_file).transpose()?;
    let stream = connect(from)?;
    let addr = stream.peer_addr().map_err(ProtocolError::Io)?;
    let mut channel = Channel::new(stream, MAX_AGENT_FRAME);
    let hello = handshake(&mut channel, addr, psk.as_ref())?;
    if !hello.has_feature(crate::protocol::FEATURE_PEER_TESTS) {
        return Err(SessionError::AgentRefused(format!(
            "the agent at {addr} does not run peer tests: start it with --allow-peer-tests and --psk-file \
             (nicbench {} or newer)",
            env!("CARGO_PKG_VERSION")
        )));
    }
    let wait_seconds = from.wait.as_secs_f64().min(crate::agent::MAX_WAIT_SECONDS);
    channel.send(&Message::PeerTestRequest {
        target: toward.to_string(),
        spec: spec.clone(),
        wait_seconds,
    })?;
    // The test itself, both queues, both handshakes and the agent's own
    // setup timeouts: anything longer is an agent that hangs.
    let patience = Duration::from_secs_f64(spec.expected_seconds() + 2.0 * wait_seconds) + 4 * REPLY_TIMEOUT;
    let deadline = Instant::now() + patience;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match channel.recv(left.max(Duration::from_millis(1)), "the peer test's result")? {
            Message::PeerTestDone { run } => {
                if run.schema != SCHEMA || run.workload != spec.workload || run.trials.is_empty() {
                    return Err(SessionError::BadReport(format!(
                        "the peer test's run is not a {} run of {SCHEMA} with trials",
                        spec.workload
                    )));
                }
                return Ok(*run);
            }
            Message::Queued { .. } if wait_seconds > 0.0 => {}
            other => return Err(unexpected("peer_test_done", other, addr)),
        }
    }
}

/// Asks the agent at `target` for the addresses of its interfaces (for
/// `--links`), authenticating when it asks.
pub fn agent_addresses(target: &Target) -> Result<Vec<crate::model::InterfaceAddress>, SessionError> {
    let psk = target.psk_file.as_deref().map(Psk::from_file).transpose()?;
    let stream = connect(target)?;
    let addr = stream.peer_addr().map_err(ProtocolError::Io)?;
    let mut channel = Channel::new(stream, MAX_AGENT_FRAME);
    let hello = handshake(&mut channel, addr, psk.as_ref())?;
    check_links_supported(&hello, addr)?;
    channel.send(&Message::AddressesRequest)?;
    match channel.recv(REPLY_TIMEOUT, "the agent's addresses")? {
        Message::Addresses { addresses } => Ok(addresses),
        other => Err(unexpected("addresses", other, addr)),
    }
}

/// Asks the agent at `target` for its host facts and the interface toward
/// this client (`nicbench host --remote`), authenticating when it asks.
pub fn remote_facts(target: &Target) -> Result<crate::model::HostFacts, SessionError> {
    let psk = target.psk_file.as_deref().map(Psk::from_file).transpose()?;
    let stream = connect(target)?;
    let addr = stream.peer_addr().map_err(ProtocolError::Io)?;
    let mut channel = Channel::new(stream, MAX_AGENT_FRAME);
    handshake(&mut channel, addr, psk.as_ref())?;
    channel.send(&Message::FactsRequest)?;
    match channel.recv(REPLY_TIMEOUT, "the agent's facts")? {
        Message::Facts { facts } => Ok(facts),
        other => Err(unexpected("facts", other, addr)),
    }
}

/// Checks that an agent answers, proves the key, and offers `feature`
/// (None: any); returns its hello and its host facts. Sends no test.
pub fn probe_agent(target: &Target, feature: Option<&str>) -> Result<(Hello, crate::model::HostFacts), SessionError> {
    let psk = target.psk_file.as_deref().map(Psk::from_file).transpose()?;
    let stream = connect(target)?;
    let addr = stream.peer_addr().map_err(ProtocolError::Io)?;
    let mut channel = Channel::new(stream, MAX_AGENT_FRAME);
    let hello = handshake(&mut channel, addr, psk.as_ref())?;
    if let Some(feature) = feature.filter(|f| !hello.has_feature(f)) {
        let how = match feature {
            crate::protocol::FEATURE_PEER_TESTS => {
                "start it with --allow-peer-tests and --psk-file (the same key as the coordinator's)"
            }
            _ => "run the same nicbench release there",
        };
        return Err(SessionError::AgentRefused(format!(
            "the agent at {addr} (nicbench {}) does not offer {feature}: {how}",
            hello.software_version
        )));
    }
    channel.send(&Message::FactsRequest)?;
    match channel.recv(REPLY_TIMEOUT, "the agent's facts")? {
        Message::Facts { facts } => Ok((hello, facts)),
        other => Err(unexpected("facts", other, addr)),
    }
}

/// Asks the agent at `target` to set the MTU of its interface toward this
/// client (it must allow host changes, and this client must know its key);
/// returns its facts read after the change.
pub fn set_remote_mtu(target: &Target, mtu: u32) -> Result<crate::model::HostFacts, SessionError> {
    let psk = target.psk_file.as_deref().map(Psk::from_file).transpose()?;
    let stream = connect(target)?;
    let addr = stream.peer_addr().map_err(ProtocolError::Io)?;
    let mut channel = Channel::new(stream, MAX_AGENT_FRAME);
    handshake(&mut channel, addr, psk.as_ref())?;
    channel.send(&Message::SetMtu { mtu })?;
    match channel.recv(REPLY_TIMEOUT, "the agent's facts after the MTU change")? {
        Message::Facts { facts } => Ok(facts),
        other => Err(unexpected("facts", other, addr)),
    }
}

/// Asks the agent at `target` to apply one host setting to its interface
/// toward this client (it must allow host changes, and this client must
/// know its key); returns its facts read after the change.
pub fn set_remote_host(
    target: &Target,
    setting: &crate::model::HostSetting,
) -> Result<crate::model::HostFacts, SessionError> {
    let psk = target.psk_file.as_deref().map(Psk::from_file).transpose()?;
    let stream = connect(target)?;
    let addr = stream.peer_addr().map_err(ProtocolError::Io)?;
    let mut channel = Channel::new(stream, MAX_AGENT_FRAME);
    handshake(&mut channel, addr, psk.as_ref())?;
    channel.send(&Message::SetHost {
        setting: setting.clone(),
    })?;
    match channel.recv(REPLY_TIMEOUT, "the agent's facts after the host setting")? {
        Message::Facts { facts } => Ok(facts),
        other => Err(unexpected("facts", other, addr)),
    }
}

/// An agent sampling its side while `nicbench watch --peer` runs a
/// command: its facts (with the interface toward us) and how long it
/// samples at most; [`PeerWatch::stop`] collects its report.
pub struct PeerWatch {
    channel: Channel,
    pub addr: SocketAddr,
    /// This host's address on the control connection (toward the agent).
    pub local_ip: IpAddr,
    pub agent: crate::model::HostFacts,
    pub max_seconds: f64,
}

/// Asks the agent at `target` to start sampling its CPU and the interface
/// toward this client (`watch_start`), authenticating when it asks.
pub fn watch_start(target: &Target) -> Result<PeerWatch, SessionError> {
    let psk = target.psk_file.as_deref().map(Psk::from_file).transpose()?;
    let stream = connect(target)?;
    let addr = stream.peer_addr().map_err(ProtocolError::Io)?;
    let local_ip = stream.local_addr().map_err(ProtocolError::Io)?.ip();
    let mut channel = Channel::new(stream, MAX_AGENT_FRAME);
    let hello = handshake(&mut channel, addr, psk.as_ref())?;
    if !hello.has_feature(crate::protocol::FEATURE_WATCH) {
        return Err(SessionError::AgentRefused(format!(
            "the agent at {addr} (nicbench {}) cannot sample its side for watch --peer; run nicbench {} or newer there",
            hello.software_version,
            env!("CARGO_PKG_VERSION")
        )));
    }
    channel.send(&Message::WatchStart)?;
    match channel.recv(REPLY_TIMEOUT, "the agent to start sampling")? {
        Message::WatchStarted { agent, max_seconds } => Ok(PeerWatch {
            channel,
            addr,
            local_ip,
            agent,
            max_seconds,
        }),
        other => Err(unexpected("watch_started", other, addr)),
    }
}

impl PeerWatch {
    /// Ends the agent's sampling and returns its side: CPU over the
    /// interval and the counters of its interface toward us.
    pub fn stop(mut self) -> Result<SideReport, SessionError> {
        // An agent that gave up (its --max-duration, a shutdown) has sent
        // an error and closed: the send may fail, the error is still read.
        let _ = self.channel.send(&Message::WatchStop);
        match self.channel.recv(REPLY_TIMEOUT, "the agent's side of the watch")? {
            Message::Done { report } if report.host == Party::Agent => Ok(report),
            Message::Done { .. } => Err(SessionError::BadReport("the report is not the agent's side".into())),
            other => Err(unexpected("done", other, self.addr)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::spec::tests::spec;
    use crate::model::{CpuReport, Role, StreamEnd};

    #[test]
    fn a_refusal_for_an_unknown_field_says_the_agent_is_older() {
        let addr: SocketAddr = "127.0.0.1:5201".parse().unwrap();
        let refused = |message: &str| {
            unexpected(
                "accepted",
                Message::Error {
                    message: message.into(),
                },
                addr,
            )
        };
        let old = refused("bad parameters for workload 'sweep': unknown field `passes`, expected one of `min_bytes`");
        let text = old.to_string();
        assert!(text.contains("unknown field `passes`"), "{text}");
        assert!(text.contains("run the same build on both ends"), "{text}");
        // Any other refusal is passed on in the agent's words alone.
        let busy = refused("the agent allows at most 4 streams").to_string();
        assert!(!busy.contains("older"), "{busy}");
    }

    fn end(id: u32, role: Role) -> StreamEnd {
        StreamEnd {
            stream_id: id,
            role,
            bytes: 1,
            seconds: 1.0,
            bits_per_second: 8.0,
            ..StreamEnd::default()
        }
    }

    fn report(streams: Vec<StreamEnd>) -> SideReport {
        SideReport {
            host: Party::Agent,
            streams,
            cpu: CpuReport::default(),
            counters: None,
            overlapped_tests: 0,
            links: Vec::new(),
        }
    }

    #[test]
    fn the_agents_report_may_hold_only_its_own_ends_of_asked_streams() {
        let s = spec("tcp");
        assert!(check_agent_report(&report(vec![end(1, Role::Receiver)]), &s).is_ok());
        let err = check_agent_report(&report(vec![end(7, Role::Receiver)]), &s).unwrap_err();
        assert!(err.to_string().contains("stream id 7"), "{err}");
        let err = check_agent_report(&report(vec![end(1, Role::Sender)]), &s).unwrap_err();
        assert!(err.to_string().contains("not the agent's"), "{err}");
        let twice = report(vec![end(1, Role::Receiver), end(1, Role::Receiver)]);
        assert!(check_agent_report(&twice, &s)
            .unwrap_err()
            .to_string()
            .contains("twice"));
        let mut negative = end(1, Role::Receiver);
        negative.seconds = -1.0;
        assert!(check_agent_report(&report(vec![negative]), &s).is_err());
        let mut client_side = report(vec![]);
        client_side.host = Party::Client;
        assert!(check_agent_report(&client_side, &s).is_err());
    }

    #[test]
    fn a_foreign_service_is_named_by_what_it_said() {
        let http = ProtocolError::FrameTooLarge {
            length: u32::from_be_bytes(*b"HTTP"),
            limit: 16 << 20,
        };
        assert_eq!(foreign_answer(&http), "its answer starts with \"HTTP\"");
        let addr: SocketAddr = "[::1]:80".parse().unwrap();
        let e = SessionError::NotAnAgent {
            addr,
            detail: foreign_answer(&http),
        };
        assert_eq!(e.exit_code(), 3);
        assert!(e
            .to_string()
            .contains("that port is not a nicbench agent (it speaks something else"));
    }

    #[test]
    fn wrong_key_and_missing_key_exit_with_4() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(SessionError::AuthRequired { addr }.exit_code(), 4);
        assert_eq!(SessionError::AuthFailed("x".into()).exit_code(), 4);
    }
}
