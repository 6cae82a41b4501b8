//! The control protocol between client and agent.
//!
//! One TCP control connection per test. Every frame is a 4-byte big-endian
//! length followed by that many bytes of JSON: one [`Message`], an internally
//! tagged enum (`{"type": "hello", ...}`). The length is checked against a
//! maximum *before* anything is allocated, so a hostile length never costs
//! memory. `framing` is pure code (bytes in, messages out) and `channel` puts
//! it on a socket with a deadline on every read.
//!
//! A test runs as:
//!
//! ```text
//! client                                   agent
//!   hello  ───────────────────────────────▶
//!          ◀─────────────────────────────── hello {auth_required}
//!   (with a pre-shared key only:)
//!          ◀─────────────────────────────── auth_challenge {nonce}
//!   auth_response {nonce, mac} ───────────▶
//!          ◀─────────────────────────────── auth_ok {mac} | error
//!   test_request {spec, wait_seconds} ────▶
//!          ◀─────────────────────────────── queued {position, seconds_left} (repeated while waiting)
//!          ◀─────────── accepted {token, data_ports} | busy | error
//!   (data connections, each opening with the token)
//!          ◀─────────────────────────────── ready
//!   start ────────────────────────────────▶
//!   (traffic; `stop` may be sent to end early)
//!          ◀─────────────────────────────── done {report}
//! ```
//!
//! `nicbench host --remote` sends `facts_request` instead of `test_request`
//! and gets `facts {facts}` back (the agent's host and the interface
//! toward the client).
//!
//! `nicbench watch --peer` sends `watch_start` instead of `test_request`
//! (to an agent whose hello offers the `watch` feature): the agent answers
//! `watch_started {agent, max_seconds}` and samples its CPU and the
//! interface toward the client until `watch_stop`, answered by
//! `done {report}`; or `busy`/`error` like a test request.
//!
//! See `docs/PROTOCOL.md` for the full description.

pub mod auth;
pub mod channel;
pub mod framing;
pub mod gate;
pub mod limits;
pub mod slots;

use serde::{Deserialize, Serialize};

use crate::model::HostSetting;
use crate::model::TestSpec;
use crate::model::{HostFacts, InterfaceAddress, RunResult, SideReport};

/// First bytes of every hello, so a stray connection (an HTTP client, an
/// iperf3 client on the wrong port) is recognised at once.
pub const MAGIC: &str = "nicbench";

/// Bumped on any incompatible change of a message; both ends refuse a peer
/// that speaks another version and name both versions in the error.
pub const PROTOCOL_VERSION: u32 = 1;

/// The agent's default control port (iperf3 owns 5201, netperf 12865).
pub const DEFAULT_PORT: u16 = 5310;

/// Largest frame the agent accepts from a client (a hello or a test request).
pub const MAX_CLIENT_FRAME: u32 = 64 * 1024;

/// Largest frame the client accepts from an agent (a `done` report with
/// interval samples of many streams).
pub const MAX_AGENT_FRAME: u32 = 16 * 1024 * 1024;

/// Length of the random session token that opens every data connection.
pub const TOKEN_LEN: usize = 16;

/// Longest wait in an agent's queue (`wait_seconds` of a test or peer
/// test request), whatever the client asks: the client asks for no more,
/// the agent grants no more.
pub const MAX_WAIT_SECONDS: f64 = 3600.0;

/// Where and from which addresses a client proves the link addresses of a
/// test (`workload::address_proof`): before any data flows, a TCP
/// connection from each address of `from` to `port` presents the token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AddressProof {
    pub port: u16,
    pub from: Vec<std::net::IpAddr>,
}

/// Every message of the control protocol.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// First message in both directions.
    Hello(Hello),
    /// Agent (with a pre-shared key): prove you know the key; `nonce` is hex.
    AuthChallenge { nonce: String },
    /// Client: its own fresh nonce and the HMAC over both nonces (hex).
    AuthResponse { nonce: String, mac: String },
    /// Agent: the key checked out; `mac` proves the agent knows it too.
    AuthOk { mac: String },
    /// Client asks for a test; it will wait up to `wait_seconds` in the
    /// agent's queue when the agent is busy (0: answer busy at once).
    TestRequest {
        spec: TestSpec,
        #[serde(default, skip_serializing_if = "is_zero")]
        wait_seconds: f64,
    },
    /// Agent: busy; the client waits in line at `position` (1 = next) and
    /// its turn should come in about `seconds_left`. Sent again every second.
    Queued { position: u32, seconds_left: f64 },
    /// Agent accepts: data connections must open with `token` (hex) and go to
    /// `data_ports` on the address the control connection reached.
    Accepted {
        token: String,
        data_ports: Vec<u16>,
        agent: HostFacts,
        /// Over links: the client addresses the agent will send nothing to
        /// until each has proved itself over TCP with the token, and the
        /// port to prove them on (absent when the peer is the only one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        address_proof: Option<AddressProof>,
    },
    /// Agent has every data connection; the client may start.
    Ready,
    /// Client: start the clock now.
    Start,
    /// Either side: end the test early (Ctrl-C on the client, SIGTERM on
    /// the agent); the agent still reports. `reason` says why, in words
    /// (absent from older peers; a peer that does not know it ignores it).
    Stop {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The agent's measurement of its side.
    Done { report: SideReport },
    /// Agent is running another test; it ends in about `seconds_left`. When
    /// that test has no known end (a byte count or a sweep without a pace
    /// yet), `running_seconds` says how long it has been running instead.
    Busy {
        seconds_left: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        running_seconds: Option<f64>,
    },
    /// Refusal or failure, in words meant for the user.
    Error { message: String },
    /// Client, instead of a test request: send your host facts.
    FactsRequest,
    /// Agent: its facts, with the interface toward the client; then it closes.
    Facts { facts: HostFacts },
    /// Client (authenticated), instead of a test request: set the MTU of
    /// the interface toward the client. The agent answers with `facts`
    /// read after the change, or an `error` (not allowed, not possible).
    SetMtu { mtu: u32 },
    /// Client (authenticated), instead of a test request: apply one host
    /// setting (offloads, rings, coalescing, root qdisc) to the interface
    /// toward the client. Answered like `set_mtu`: `facts` read after the
    /// change, or an `error` saying why not (not allowed, the driver refused).
    SetHost { setting: HostSetting },
    /// Client, before its test request (only to an agent whose hello
    /// offers the `links` feature): list your addresses, for `--links`.
    AddressesRequest,
    /// Agent: every address of every interface, with its prefix length;
    /// it then waits for the test request on the same connection.
    Addresses { addresses: Vec<InterfaceAddress> },
    /// Coordinator (authenticated, to an agent whose hello offers
    /// `peer_tests`), instead of a test request: run `spec` yourself as the
    /// client toward the agent at `target` (HOST:PORT), waiting up to
    /// `wait_seconds` in either agent's queue. Answered with `queued`
    /// while waiting, then `peer_test_done` or `error`/`busy`.
    PeerTestRequest {
        target: String,
        spec: TestSpec,
        #[serde(default, skip_serializing_if = "is_zero")]
        wait_seconds: f64,
    },
    /// Agent: the whole run of a peer test (both ends' reports merged, as
    /// `--json` prints it), measured by this agent as the client.
    PeerTestDone { run: Box<RunResult> },
    /// Client (to an agent offering the `watch` feature), instead of a test
    /// request: sample your CPU and the interface toward me from now on.
    WatchStart,
    /// Agent: sampling; it ends at `watch_stop`, when the connection
    /// closes, or after `max_seconds` (the agent's --max-duration), when
    /// the agent sends `error` instead of its report.
    WatchStarted { agent: HostFacts, max_seconds: f64 },
    /// Client: stop sampling and send your side (`done {report}`).
    WatchStop,
    /// Client (to an agent offering `clock`), before its test request and
    /// again after `done`: its CLOCK_REALTIME when it sent this, ns since
    /// the epoch. The agent answers each with `clock_reply`.
    ClockRequest { sent_ns: i64 },
    /// Agent: the client's reading back, and its own CLOCK_REALTIME when it
    /// read the request and when it sent this reply (ns since the epoch).
    ClockReply {
        client_sent_ns: i64,
        received_ns: i64,
        sent_ns: i64,
    },
}

impl Message {
    /// The `type` tag, for log lines and "unexpected message" errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::Hello(_) => "hello",
            Message::AuthChallenge { .. } => "auth_challenge",
            Message::AuthResponse { .. } => "auth_response",
            Message::AuthOk { .. } => "auth_ok",
            Message::TestRequest { .. } => "test_request",
            Message::Queued { .. } => "queued",
            Message::Accepted { .. } => "accepted",
            Message::Ready => "ready",
            Message::Start => "start",
            Message::Stop { .. } => "stop",
            Message::Done { .. } => "done",
            Message::Busy { .. } => "busy",
            Message::Error { .. } => "error",
            Message::FactsRequest => "facts_request",
            Message::Facts { .. } => "facts",
            Message::SetMtu { .. } => "set_mtu",
            Message::SetHost { .. } => "set_host",
            Message::AddressesRequest => "addresses_request",
            Message::Addresses { .. } => "addresses",
            Message::PeerTestRequest { .. } => "peer_test_request",
            Message::PeerTestDone { .. } => "peer_test_done",
            Message::WatchStart => "watch_start",
            Message::WatchStarted { .. } => "watch_started",
            Message::WatchStop => "watch_stop",
            Message::ClockRequest { .. } => "clock_request",
            Message::ClockReply { .. } => "clock_reply",
        }
    }
}

/// The hello both ends send first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub magic: String,
    pub protocol_version: u32,
    pub software_version: String,
    /// Workload names this end can run.
    pub workloads: Vec<String>,
    /// Agent: an `auth_challenge` follows; the client needs the key.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auth_required: bool,
    /// Optional protocol features this end supports, added without a
    /// version bump (an older peer sends none): `links` = the
    /// `addresses_request` message and test specs with `links`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
}

/// Feature of [`Hello::features`]: several links in one test (`--links`).
pub const FEATURE_LINKS: &str = "links";

/// Feature of [`Hello::features`]: this agent runs third-party tests for an
/// authenticated coordinator (`serve --allow-peer-tests`; `nicbench mesh`).
pub const FEATURE_PEER_TESTS: &str = "peer_tests";
/// Feature of [`Hello::features`]: `watch_start`/`watch_stop` (sampling
/// the agent's side around a command, `nicbench watch --peer`).
pub const FEATURE_WATCH: &str = "watch";
/// Feature of [`Hello::features`]: this agent accepts `set_mtu` and
/// `set_host` from a client that proves the key (`serve
/// --allow-host-changes --psk-file`); a plan's dry run checks it.
pub const FEATURE_HOST_CHANGES: &str = "host_changes";
/// Feature of [`Hello::features`]: after the key proof every frame either
/// way carries a MAC under the session key (`auth`, `channel`). An agent
/// with a key offers it and requires it; a keyed client refuses an agent
/// that asks for the key without it (an older release, or a relay that
/// rewrote its hello).
pub const FEATURE_SEALED_SESSION: &str = "sealed_session";
/// Feature of [`Hello::features`]: `clock_request`/`clock_reply` before the
/// test request and after `done`, so the client can bound the agent's clock
/// against its own (issue 70; docs/CLOCKS.md). At most
/// [`MAX_CLOCK_REQUESTS`] each time.
pub const FEATURE_CLOCK: &str = "clock";
/// Clock requests an agent answers before a test request, and again after
/// `done`: enough for the estimator, too few to keep a connection busy.
pub const MAX_CLOCK_REQUESTS: u32 = 32;

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

impl Hello {
    /// Our hello, offering the workloads this build can run (the caller
    /// names them: the protocol sits below the workloads).
    pub fn ours(workloads: impl IntoIterator<Item = impl Into<String>>) -> Hello {
        Hello {
            magic: MAGIC.to_string(),
            protocol_version: PROTOCOL_VERSION,
            software_version: env!("CARGO_PKG_VERSION").to_string(),
            workloads: workloads.into_iter().map(Into::into).collect(),
            auth_required: false,
            features: vec![FEATURE_LINKS.to_string()],
        }
    }

    /// True when the peer offers `feature`.
    pub fn has_feature(&self, feature: &str) -> bool {
        self.features.iter().any(|f| f == feature)
    }

    /// Checks a peer's hello; `peer` is "agent" or "client" for the message.
    pub fn check_peer(&self, peer: &str) -> Result<(), ProtocolError> {
        if self.magic != MAGIC {
            return Err(ProtocolError::NotNicbench);
        }
        if self.protocol_version != PROTOCOL_VERSION {
            return Err(ProtocolError::VersionMismatch {
                peer: peer.to_string(),
                peer_version: self.protocol_version,
                peer_software: self.software_version.clone(),
                ours: PROTOCOL_VERSION,
            });
        }
        Ok(())
    }
}

/// What can go wrong on the control connection.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("frame of {length} bytes exceeds the limit of {limit} bytes")]
    FrameTooLarge { length: u32, limit: u32 },
    #[error("malformed message: {0}")]
    Malformed(String),
    #[error("the peer is not a nicbench endpoint (wrong magic in hello)")]
    NotNicbench,
    #[error(
        "protocol version mismatch: the {peer} speaks version {peer_version} (nicbench {peer_software}), \
         this program speaks version {ours}; run the same nicbench release on both ends"
    )]
    VersionMismatch {
        peer: String,
        peer_version: u32,
        peer_software: String,
        ours: u32,
    },
    #[error("timed out after {seconds:.1} s waiting for {waiting_for}")]
    Timeout { seconds: f64, waiting_for: String },
    #[error("the connection closed while waiting for {0}")]
    Closed(String),
    #[error("expected {expected}, got '{got}'")]
    Unexpected { expected: String, got: String },
    /// A sealed frame whose tag does not verify: see `channel`.
    #[error(
        "control frame {sequence} from the {from} failed its MAC check: something between the two ends \
         changed, injected, replayed, dropped or reordered a frame; the connection is closed (if this \
         repeats, look for a relay or proxy on the path)"
    )]
    Forged { from: &'static str, sequence: u64 },
    #[error("control connection: {0}")]
    Io(#[from] std::io::Error),
}

/// A fresh random session token.
pub fn new_token() -> [u8; TOKEN_LEN] {
    let mut token = [0u8; TOKEN_LEN];
    // getrandom only fails when the OS has no entropy source at all.
    getrandom::getrandom(&mut token).expect("the OS random number generator is unavailable");
    token
}

pub fn token_to_hex(token: &[u8; TOKEN_LEN]) -> String {
    auth::hex_encode(token)
}

pub fn token_from_hex(hex: &str) -> Result<[u8; TOKEN_LEN], ProtocolError> {
    let bad = || ProtocolError::Malformed(format!("session token '{hex}' is not {TOKEN_LEN} hex bytes"));
    let bytes = auth::hex_decode(hex, TOKEN_LEN).ok_or_else(bad)?;
    bytes.try_into().map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_of_another_version_names_both_versions() {
        let mut hello = Hello::ours(["tcp"]);
        hello.protocol_version = 7;
        let err = hello.check_peer("agent").unwrap_err().to_string();
        assert!(err.contains("version 7"), "{err}");
        assert!(err.contains(&format!("version {PROTOCOL_VERSION}")), "{err}");
    }

    #[test]
    fn wrong_magic_is_refused() {
        let mut hello = Hello::ours(["tcp"]);
        hello.magic = "iperf3".into();
        assert!(matches!(hello.check_peer("client"), Err(ProtocolError::NotNicbench)));
    }

    #[test]
    fn tokens_round_trip_through_hex() {
        let token = new_token();
        assert_eq!(token_from_hex(&token_to_hex(&token)).unwrap(), token);
        assert!(token_from_hex("zz").is_err());
        assert!(token_from_hex(&"é".repeat(16)).is_err());
    }
}
