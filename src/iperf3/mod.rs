//! iperf3's protocol, both ways: `nicbench tcp|udp iperf3://HOST` runs a
//! test against an unmodified iperf3 3.x server ([`client`]), and
//! `nicbench serve --iperf3-port 5201` serves unmodified iperf3 clients
//! ([`server`]). An adapter, not a fork: the wire format is plain code
//! ([`wire`]), the data streams run on our stream runner with our TCP
//! loops and our own UDP loops for iperf3's datagram header ([`udp`]), and
//! a test yields our [`crate::model::RunResult`] with
//! [`crate::model::PeerProtocol`] saying who the peer was and what it
//! reported itself. With [`server_auth`] the agent requires iperf3's RSA
//! authentication of its clients. See docs/IPERF3.md.

pub mod auth;
pub mod client;
#[cfg(test)]
mod properties;
pub mod server;
pub mod server_auth;
pub mod streams;
pub mod udp;
pub mod wire;

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

pub use wire::{Cookie, State, WireError};

/// The URL scheme that selects iperf3 on the client: `iperf3://HOST[:PORT]`.
pub const SCHEME: &str = "iperf3://";

/// Splits `iperf3://HOST[:PORT]` into host and port; None when `target`
/// does not use the scheme.
pub fn parse_target(target: &str) -> Option<Result<(String, Option<u16>), String>> {
    let rest = target.strip_prefix(SCHEME)?;
    let rest = rest.trim_end_matches('/');
    if rest.is_empty() {
        return Some(Err(format!(
            "'{target}' names no host; write iperf3://HOST or iperf3://HOST:5201"
        )));
    }
    // [v6]:port, host:port, or a bare host (an IPv6 address without brackets has several colons).
    let split = if let Some(end) = rest.find(']') {
        let host = &rest[..=end];
        match &rest[end + 1..] {
            "" => Ok((host.to_string(), None)),
            p if p.starts_with(':') => p[1..]
                .parse::<u16>()
                .map(|port| (host.to_string(), Some(port)))
                .map_err(|_| p[1..].to_string()),
            _ => return Some(Err(format!("'{target}': expected ':PORT' after the address"))),
        }
    } else if rest.matches(':').count() == 1 {
        let (host, port) = rest.split_once(':').expect("one colon");
        port.parse::<u16>()
            .map(|p| (host.to_string(), Some(p)))
            .map_err(|_| port.to_string())
    } else {
        Ok((rest.to_string(), None))
    };
    Some(split.map_err(|port| format!("'{target}': '{port}' is not a port number (1..=65535)")))
}

/// Everything that ends an iperf3 test, each with what to do.
#[derive(Debug, thiserror::Error)]
pub enum Iperf3Error {
    #[error(
        "connection refused by {addr}: no iperf3 server listens there; start one with 'iperf3 -s -p {port}' \
         on that host, or give the right port (iperf3://HOST:PORT)"
    )]
    Refused { addr: std::net::SocketAddr, port: u16 },
    #[error("the iperf3 server at {addr} is busy running a test (it answered ACCESS_DENIED); try again later, or pass --wait 60s to keep trying")]
    Busy { addr: std::net::SocketAddr },
    #[error(
        "the iperf3 server at {addr} requires authentication: pass --iperf3-username USER and \
         --iperf3-rsa-public-key FILE (the server's public key), with the password in IPERF3_PASSWORD"
    )]
    AuthRequired { addr: std::net::SocketAddr },
    #[error(
        "the iperf3 server at {addr} denied user '{username}' (test authorization failed): check the user \
         name and IPERF3_PASSWORD against the server's --authorized-users-path, and that this host's clock \
         is within the server's --time-skew-threshold (10 s by default){hint}"
    )]
    AuthDenied {
        addr: std::net::SocketAddr,
        username: String,
        hint: &'static str,
    },
    #[error("iperf3 authentication: {0}")]
    Credentials(#[from] auth::AuthError),
    #[error("the iperf3 server refused the test: {0}")]
    ServerError(String),
    #[error("the iperf3 server ended the test (SERVER_TERMINATE)")]
    ServerTerminated,
    #[error("{addr} does not speak iperf3: {detail}")]
    NotIperf3 { addr: std::net::SocketAddr, detail: String },
    #[error("this test cannot run against iperf3: {0}")]
    Unsupported(String),
    #[error("talking to the iperf3 peer ({step})")]
    Wire {
        step: &'static str,
        #[source]
        source: WireError,
    },
    #[error("the iperf3 peer sent state {got:?} while we waited for {expected}")]
    UnexpectedState { expected: &'static str, got: State },
    #[error("the iperf3 peer sent results that do not match the test: {0}")]
    BadResults(String),
    #[error("setting up the data streams: {0}")]
    Streams(String),
    #[error("the test ran, but stream {stream_id} ({role}) failed: {message}")]
    Stream {
        stream_id: u32,
        role: &'static str,
        message: String,
    },
    #[error("could not read CPU counters: {0}")]
    Cpu(io::Error),
}

impl Iperf3Error {
    /// The process exit code (README): 2 invalid options, 3 unreachable,
    /// 4 refused, 5 failed while running.
    pub fn exit_code(&self) -> i32 {
        match self {
            Iperf3Error::Unsupported(_) | Iperf3Error::Credentials(_) => 2,
            Iperf3Error::Refused { .. } => 3,
            Iperf3Error::Busy { .. }
            | Iperf3Error::AuthRequired { .. }
            | Iperf3Error::AuthDenied { .. }
            | Iperf3Error::ServerError(_)
            | Iperf3Error::NotIperf3 { .. } => 4,
            _ => 5,
        }
    }

    fn wire(step: &'static str) -> impl FnOnce(WireError) -> Iperf3Error {
        move |source| Iperf3Error::Wire { step, source }
    }
}

/// An iperf3 failure as the session reports it: in iperf3's words, with
/// iperf3's exit code.
impl From<Iperf3Error> for crate::session::SessionError {
    fn from(e: Iperf3Error) -> crate::session::SessionError {
        let exit_code = e.exit_code();
        crate::session::SessionError::Peer(crate::session::PeerFailure::new(e, exit_code))
    }
}

/// The control connection with a deadline on every read.
pub struct Control {
    stream: TcpStream,
}

impl Control {
    pub fn new(stream: TcpStream) -> Control {
        let _ = stream.set_nodelay(true);
        Control { stream }
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Reads exactly `buf.len()` bytes before `timeout` has passed.
    pub fn read_exact(&mut self, buf: &mut [u8], timeout: Duration) -> Result<(), WireError> {
        let deadline = Instant::now() + timeout;
        let mut done = 0;
        while done < buf.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(timed_out(timeout));
            }
            self.stream.set_read_timeout(Some(left))?;
            match self.stream.read(&mut buf[done..]) {
                Ok(0) => {
                    return Err(WireError::Io(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the peer closed the connection",
                    )))
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    return Err(timed_out(timeout))
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Reads one state byte; None when nothing came within `timeout`.
    pub fn poll_state(&mut self, timeout: Duration) -> Result<Option<State>, WireError> {
        let mut byte = [0u8];
        match self.read_exact(&mut byte, timeout) {
            Ok(()) => State::from_byte(byte[0]).map(Some),
            Err(WireError::Io(e)) if e.kind() == io::ErrorKind::TimedOut => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads one state byte before `timeout`.
    pub fn read_state(&mut self, timeout: Duration) -> Result<State, WireError> {
        self.poll_state(timeout)?.ok_or_else(|| timed_out(timeout))
    }

    /// What the peer has done on the connection, without waiting: sent a
    /// byte (left unread), closed it, or nothing yet.
    pub fn activity(&self) -> io::Result<Activity> {
        let mut byte = [0u8];
        self.stream.set_nonblocking(true)?;
        let peeked = self.stream.peek(&mut byte);
        self.stream.set_nonblocking(false)?;
        match peeked {
            Ok(0) => Ok(Activity::Closed),
            Ok(_) => Ok(Activity::Sent),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Activity::Quiet),
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Ok(Activity::Closed),
            Err(e) => Err(e),
        }
    }

    pub fn send_state(&mut self, state: State) -> io::Result<()> {
        self.stream.write_all(&[state.byte()])
    }

    /// Reads one length-prefixed JSON object of at most `max` bytes before `timeout`.
    pub fn read_json(&mut self, max: u32, timeout: Duration) -> Result<Map<String, Value>, WireError> {
        wire::read_json_by(|buf| self.read_exact(buf, timeout), max)
    }

    pub fn send_json(&mut self, value: &Value) -> io::Result<()> {
        self.stream.write_all(&wire::encode_json(value))
    }

    /// `SERVER_ERROR`, then iperf3's error number and an errno.
    pub fn send_server_error(&mut self, i_errno: i32, errno: i32) -> io::Result<()> {
        let mut frame = vec![State::ServerError.byte()];
        frame.extend_from_slice(&i_errno.to_be_bytes());
        frame.extend_from_slice(&errno.to_be_bytes());
        self.stream.write_all(&frame)
    }
}

/// See [`Control::activity`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    Quiet,
    Sent,
    Closed,
}

fn timed_out(timeout: Duration) -> WireError {
    WireError::Io(io::Error::new(
        io::ErrorKind::TimedOut,
        format!("no answer within {:.0} s", timeout.as_secs_f64()),
    ))
}

/// iperf3's text for the error numbers a server may send (`iperf_error.c`),
/// for the ones a user can act on; others are shown by number.
pub fn describe_server_error(i_errno: i32, errno: i32) -> String {
    let text = match i_errno {
        wire::errno::DURATION => "test duration too long (the server's limit)".to_string(),
        wire::errno::NUM_STREAMS => "too many parallel streams for the server".to_string(),
        wire::errno::BLOCK_SIZE => "block size (-l) too large for the server".to_string(),
        wire::errno::BUF_SIZE => "socket buffer size (-w) too large for the server".to_string(),
        wire::errno::MSS => "MSS too large for the server".to_string(),
        wire::errno::UDP_BLOCK_SIZE => "UDP block size (-l) invalid for the server".to_string(),
        wire::errno::LISTEN => "the server could not listen for the data streams".to_string(),
        wire::errno::SET_CONGESTION => "the server could not set the congestion control (-C)".to_string(),
        wire::errno::AUTH_TEST => "test authorization failed (wrong or missing credentials)".to_string(),
        n => format!("iperf3 error number {n}"),
    };
    if errno != 0 {
        format!("{text} ({})", io::Error::from_raw_os_error(errno))
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_targets() {
        assert_eq!(parse_target("host"), None);
        assert_eq!(parse_target("iperf3://h").unwrap().unwrap(), ("h".into(), None));
        assert_eq!(
            parse_target("iperf3://h:5202").unwrap().unwrap(),
            ("h".into(), Some(5202))
        );
        assert_eq!(
            parse_target("iperf3://[::1]:9").unwrap().unwrap(),
            ("[::1]".into(), Some(9))
        );
        assert_eq!(parse_target("iperf3://[::1]").unwrap().unwrap(), ("[::1]".into(), None));
        assert_eq!(parse_target("iperf3://::1").unwrap().unwrap(), ("::1".into(), None));
        assert!(parse_target("iperf3://").unwrap().is_err());
        assert!(parse_target("iperf3://h:x").unwrap().unwrap_err().contains("'x'"));
        assert!(parse_target("iperf3://h:70000").unwrap().is_err());
    }

    #[test]
    fn server_errors_read_like_iperf3_says_them() {
        assert!(describe_server_error(5, 0).contains("duration"));
        assert!(describe_server_error(142, 0).contains("authorization"));
        assert!(describe_server_error(102, 98).contains("in use"));
        assert!(describe_server_error(999, 0).contains("999"));
    }
}
