//! The client side of one test: connect to the agent, exchange hellos,
//! send the spec, open the data connections, start, run the local side,
//! and merge both sides' measurements into a [`TrialResult`].

use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::model::{Endpoint, Host, MergeError, RunResult, TrialResult, SCHEMA};
use crate::probe::cpu::ProcStat;
use crate::probe::host::facts_toward;
use crate::protocol::channel::Channel;
use crate::protocol::{token_from_hex, Hello, Message, ProtocolError, MAX_AGENT_FRAME};
use crate::trial::{self, TrialError, TrialPlan};
use crate::workload::runner::IntervalCallback;
use crate::workload::{self, ClientNet, SpecError, TestSpec, WorkloadError};

/// How long to wait for the agent to answer at each step before the test.
const REPLY_TIMEOUT: Duration = Duration::from_secs(15);

/// Address family to use when a name resolves to both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

/// Where the agent is and how to reach it.
#[derive(Debug, Clone)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub family: Option<Family>,
    /// Local address for the control and data sockets (`-B`).
    pub bind: Option<IpAddr>,
    pub connect_timeout: Duration,
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
    #[error("{addr} accepted the connection but did not answer as a nicbench agent ({detail}); is another service on that port?")]
    NotAnAgent { addr: SocketAddr, detail: String },
    #[error("the agent at {addr} is busy with another test for about {seconds_left:.0} s more; try again then")]
    Busy { addr: SocketAddr, seconds_left: f64 },
    #[error("the agent refused the test: {0}")]
    AgentRefused(String),
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
            SessionError::Spec(_) => 2,
            SessionError::Resolve { .. }
            | SessionError::Refused { .. }
            | SessionError::ConnectTimeout { .. }
            | SessionError::Connect { .. } => 3,
            SessionError::Busy { .. } | SessionError::AgentRefused(_) | SessionError::NotAnAgent { .. } => 4,
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
    /// Polled during the test; true once the user pressed Ctrl-C.
    pub interrupted: &'a (dyn Fn() -> bool + Sync),
    pub on_interval: Option<IntervalCallback>,
    /// Number of this trial within the case (1-based).
    pub trial: u32,
}

fn unexpected(expected: &str, got: Message, addr: SocketAddr) -> SessionError {
    match got {
        Message::Busy { seconds_left } => SessionError::Busy { addr, seconds_left },
        Message::Error { message } => SessionError::AgentRefused(message),
        other => SessionError::Protocol(ProtocolError::Unexpected {
            expected: expected.to_string(),
            got: other.kind().to_string(),
        }),
    }
}

/// Runs one trial of `spec` against the agent at `target`.
pub fn run(target: &Target, spec: &TestSpec, options: RunOptions) -> Result<RunResult, SessionError> {
    let workload = workload::find(&spec.workload)?;
    workload.validate(spec)?;
    TestSpec::validate_cpus(&spec.client.cpus, "-A/--affinity")?;
    let started_at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let stream = connect(target)?;
    let agent_addr = stream.peer_addr().map_err(ProtocolError::Io)?;
    let client_addr = stream.local_addr().map_err(ProtocolError::Io)?;
    let mut channel = Channel::new(stream, MAX_AGENT_FRAME);

    channel.send(&Message::Hello(Hello::ours()))?;
    let hello = channel.recv(REPLY_TIMEOUT, "the agent's hello").map_err(|e| match e {
        // Something listens there, but it does not speak our protocol.
        ProtocolError::Timeout { .. } | ProtocolError::FrameTooLarge { .. } | ProtocolError::Malformed(_) => {
            SessionError::NotAnAgent {
                addr: agent_addr,
                detail: e.to_string(),
            }
        }
        other => other.into(),
    })?;
    match hello {
        Message::Hello(hello) => hello.check_peer("agent")?,
        other => return Err(unexpected("hello", other, agent_addr)),
    }
    channel.send(&Message::TestRequest { spec: spec.clone() })?;
    let (token, data_ports, agent_facts) = match channel.recv(REPLY_TIMEOUT, "the agent to accept the test")? {
        Message::Accepted {
            token,
            data_ports,
            agent,
        } => (token_from_hex(&token)?, data_ports, agent),
        other => return Err(unexpected("accepted", other, agent_addr)),
    };
    let net = ClientNet {
        agent_ip: agent_addr.ip(),
        data_ports,
        token,
        bind: target.bind,
    };
    let side = workload.client_side(spec, &net)?;
    match channel.recv(REPLY_TIMEOUT, "the agent to be ready")? {
        Message::Ready => {}
        other => return Err(unexpected("ready", other, agent_addr)),
    }
    channel.send(&Message::Start)?;
    let start = Instant::now();
    let plan = TrialPlan {
        host: Host::Client,
        spec,
        hard_deadline: trial::hard_deadline(spec, start, None),
        wait_for_peer_report: true,
        interrupted: options.interrupted,
        on_interval: options.on_interval,
    };
    let outcome = trial::run_side(side, plan, &mut channel, &ProcStat)?;
    let agent_report = outcome.peer.expect("run_side waits for the peer's report");
    let result = TrialResult::merge(options.trial, &spec.flows(), outcome.local, agent_report)?;
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
            facts: agent_facts,
        },
        spec: spec.clone(),
        trials: vec![result.clone()],
        result,
    };
    crate::verdict::annotate(&mut run, None);
    Ok(run)
}
