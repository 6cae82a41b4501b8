//! The client side of nicbench's control protocol. [`connect`] reaches an
//! agent and shakes hands (hellos, the key proof); [`run`] runs one test
//! against it: send the spec, open the data connections, start, run the
//! local side, and merge both sides' measurements into a [`RunResult`];
//! `admin` asks an agent for everything that is not a test of its own
//! (facts, addresses, host settings, a peer test, watching its side).
//!
//! [`RunResult`]: crate::model::RunResult

mod admin;
mod clock;
mod connect;
mod fanout;
mod run;

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

pub use self::admin::{
    agent_addresses, peer_test, probe_agent, remote_facts, set_remote_host, set_remote_mtu, watch_start, PeerWatch,
};
pub use self::connect::connect;
pub use self::fanout::{run_fanout, AgentTrial, FanoutError, FanoutRun};
pub use self::run::{one_trial_run, run, run_with_psk, trial_run_between, RunOptions};
use crate::address::Family;
use crate::model::MergeError;
use crate::protocol::auth::KeyError;
use crate::protocol::ProtocolError;
use crate::side_runner::TrialError;
use crate::workload::{SpecError, WorkloadError};

/// How long to wait for the agent to answer at each step before the test.
const REPLY_TIMEOUT: Duration = Duration::from_secs(15);

/// How long to wait for the agent's hello after connecting. An agent sends
/// it at once (before any queue or test), so a port that stays silent this
/// long is no nicbench agent: say so now, not after [`REPLY_TIMEOUT`].
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(2);

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
}

impl Target {
    /// The agent as `HOST:PORT` (`[V6]:PORT`): how errors name it.
    pub fn label(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        }
    }
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
        "{addr}: that port is not a nicbench agent ({detail}); \
         check the port (-p, HOST:PORT) or start 'nicbench serve' on that host"
    )]
    /// `detail` says what the port did instead: "it speaks something
    /// else: ...", or that it stayed silent past [`HELLO_TIMEOUT`].
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
    /// A test run over another protocol on top of the session (an iperf3
    /// server), failed in that protocol's words.
    #[error(transparent)]
    Peer(PeerFailure),
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
            SessionError::Peer(failure) => failure.exit_code,
            _ => 5,
        }
    }
}

/// The error of a protocol adapter that runs over the session (the iperf3
/// client), with the exit code it documents; the session knows no more of
/// it, so adapters sit above the session and never the other way.
#[derive(Debug)]
pub struct PeerFailure {
    error: Box<dyn std::error::Error + Send + Sync>,
    exit_code: i32,
}

impl PeerFailure {
    pub fn new(error: impl std::error::Error + Send + Sync + 'static, exit_code: i32) -> PeerFailure {
        PeerFailure {
            error: Box::new(error),
            exit_code,
        }
    }

    /// The adapter's own error, to downcast.
    pub fn error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.error.as_ref()
    }
}

impl std::fmt::Display for PeerFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

/// Transparent: the chain goes on with the adapter's error's own cause.
impl std::error::Error for PeerFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::net::TcpListener;
    use std::thread;

    use super::*;
    use crate::protocol::channel::Channel;
    use crate::protocol::{Hello, Message, MAX_CLIENT_FRAME};

    /// A target on loopback port `port`, with a short connect timeout.
    pub(in crate::session) fn loopback(port: u16) -> Target {
        Target {
            host: "127.0.0.1".into(),
            port,
            family: None,
            bind: None,
            connect_timeout: Duration::from_secs(5),
            wait: Duration::ZERO,
            psk_file: None,
        }
    }

    /// An agent in this process that plays `script` on the first control
    /// connection it accepts; join the handle to see its own checks.
    pub(in crate::session) fn fake_agent(
        script: impl FnOnce(&mut Channel) + Send + 'static,
    ) -> (Target, thread::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = loopback(listener.local_addr().unwrap().port());
        let agent = thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            script(&mut Channel::new(stream, MAX_CLIENT_FRAME));
        });
        (target, agent)
    }

    /// The agent's part of a handshake without a key: read the client's
    /// hello, answer with `hello`.
    pub(in crate::session) fn greet(channel: &mut Channel, hello: Hello) {
        match channel.recv(Duration::from_secs(10), "hello").unwrap() {
            Message::Hello(theirs) => theirs.check_peer("client").unwrap(),
            other => panic!("expected the client's hello, got {}", other.kind()),
        }
        channel.send(&Message::Hello(hello)).unwrap();
    }

    fn addr() -> SocketAddr {
        "192.0.2.1:5310".parse().unwrap()
    }

    #[test]
    fn wrong_key_and_missing_key_exit_with_4() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(SessionError::AuthRequired { addr }.exit_code(), 4);
        assert_eq!(SessionError::AuthFailed("x".into()).exit_code(), 4);
    }

    #[test]
    fn exit_codes_tell_invalid_from_unreachable_from_refused_from_failed() {
        let invalid = SessionError::Spec(SpecError::Invalid("-P 0".into()));
        assert_eq!(invalid.exit_code(), 2);
        let unreachable = SessionError::Resolve {
            host: "nowhere".into(),
            detail: "no such host".into(),
        };
        assert_eq!(unreachable.exit_code(), 3);
        let timeout = SessionError::ConnectTimeout {
            addr: addr(),
            seconds: 5.0,
        };
        assert_eq!(timeout.exit_code(), 3);
        let busy = SessionError::Busy {
            addr: addr(),
            seconds_left: 3.0,
            running_seconds: None,
        };
        assert_eq!(busy.exit_code(), 4);
        let old = SessionError::Protocol(ProtocolError::VersionMismatch {
            peer: "agent".into(),
            peer_version: 0,
            peer_software: "0.1.0".into(),
            ours: 1,
        });
        assert_eq!(old.exit_code(), 4);
        // Anything that went wrong once the test was under way.
        assert_eq!(SessionError::BadReport("x".into()).exit_code(), 5);
        let closed = SessionError::Protocol(ProtocolError::Closed("done".into()));
        assert_eq!(closed.exit_code(), 5);
    }

    #[test]
    fn an_adapters_failure_keeps_its_words_cause_and_exit_code() {
        #[derive(Debug, thiserror::Error)]
        #[error("the iperf3 server is busy")]
        struct Busy(#[source] std::io::Error);
        let e = SessionError::Peer(PeerFailure::new(Busy(std::io::ErrorKind::TimedOut.into()), 4));
        assert_eq!(e.to_string(), "the iperf3 server is busy");
        assert_eq!(e.exit_code(), 4);
        let cause = std::error::Error::source(&e).expect("the adapter's cause");
        assert!(cause.downcast_ref::<std::io::Error>().is_some(), "{cause}");
        let SessionError::Peer(failure) = e else { unreachable!() };
        assert!(failure.error().downcast_ref::<Busy>().is_some());
    }

    #[test]
    fn busy_says_the_time_left_or_how_long_the_other_test_has_run() {
        let timed = SessionError::Busy {
            addr: addr(),
            seconds_left: 42.4,
            running_seconds: None,
        }
        .to_string();
        assert!(timed.contains("for about 42 s more"), "{timed}");
        assert!(timed.contains("--wait 60s"), "{timed}");
        let endless = SessionError::Busy {
            addr: addr(),
            seconds_left: 0.0,
            running_seconds: Some(75.0),
        }
        .to_string();
        assert!(
            endless.contains("running for 75 s so far with no known end"),
            "{endless}"
        );
        assert!(!endless.contains("about 0 s"), "{endless}");
    }
}
