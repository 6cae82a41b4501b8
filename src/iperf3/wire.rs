//! iperf3's wire format as plain code, without sockets: the cookie, the
//! one-byte states, the length-prefixed JSON of the parameter and results
//! exchanges, the UDP datagram header and the UDP connect handshake.
//!
//! Facts from esnet/iperf's source (3.12, the Debian version, checked
//! against its newest release): `COOKIE_SIZE` 37 (36 characters of
//! `[a-z2-7]` and a NUL, `make_cookie`), the states of `iperf_api.h`,
//! `JSON_write`/`JSON_read` (4-byte big-endian length, then unformatted
//! JSON), `send_parameters`/`get_parameters`, `send_results`/`get_results`,
//! `iperf_udp_send`/`iperf_udp_recv` (big-endian sec, usec and a 32- or
//! 64-bit packet count from 1), `UDP_CONNECT_MSG`/`UDP_CONNECT_REPLY`
//! (written in host order on little-endian hosts: the bytes "9876" and
//! "6789"), and stream ids 1, 3, 4, 5... (`iperf_add_stream`).
//!
//! Everything that reads peer input returns an error instead of
//! panicking, checks a length before allocating, and checks JSON types.

use std::io::{self, Read};

use serde_json::{Map, Value};

use crate::workload::transport::Proto;

/// Length of the cookie, NUL included.
pub const COOKIE_LEN: usize = 37;
/// The characters iperf3's `make_cookie` draws from.
const COOKIE_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
/// The largest parameter JSON iperf3 servers accept (`MAX_PARAMS_JSON_STRING`).
pub const MAX_PARAMS_JSON: u32 = 8 * 1024;
/// The largest results JSON we accept: 128 streams of ~200 bytes, plus a
/// server's own text output when the client asked for it.
pub const MAX_RESULTS_JSON: u32 = 1 << 20;
/// iperf3's default port.
pub const DEFAULT_PORT: u16 = 5201;
/// iperf3's stream limit (`MAX_STREAMS`).
pub const MAX_STREAMS: u32 = 128;
/// iperf3's longest test (`MAX_TIME`), seconds.
pub const MAX_TIME_SECONDS: u64 = 86_400;
/// The UDP connect datagram a client sends, as bytes on the wire.
pub const UDP_CONNECT_MSG: [u8; 4] = *b"9876";
/// The server's reply, as bytes on the wire.
pub const UDP_CONNECT_REPLY: [u8; 4] = *b"6789";
/// Replies of servers before 3.11: 987654321 in little-endian order.
pub const LEGACY_UDP_CONNECT_REPLY: [u8; 4] = 987_654_321u32.to_le_bytes();
/// The connect datagram of clients before 3.11: 123456789 in little-endian order.
pub const LEGACY_UDP_CONNECT_MSG: [u8; 4] = 123_456_789u32.to_le_bytes();

/// `i_errno` values a server sends after `SERVER_ERROR` that we use
/// (`iperf_api.h`); the client prints its own text for each.
pub mod errno {
    pub const DURATION: i32 = 5;
    pub const NUM_STREAMS: i32 = 6;
    pub const BLOCK_SIZE: i32 = 7;
    pub const BUF_SIZE: i32 = 8;
    pub const MSS: i32 = 10;
    pub const OMIT: i32 = 12;
    pub const UDP_BLOCK_SIZE: i32 = 20;
    /// IEUNIMP: "an option you are trying to set is not implemented yet".
    pub const UNIMPLEMENTED: i32 = 13;
    /// IENOSCTP: "no SCTP support available".
    pub const NO_SCTP: i32 = 18;
    /// IENEWTEST: "unable to create a new test", with the errno's text.
    pub const NEW_TEST: i32 = 100;
    /// IETOTALRATE: "total required bandwidth is larger than server limit".
    pub const TOTAL_RATE: i32 = 27;
    /// IELISTEN: "unable to start listener for connections".
    pub const LISTEN: i32 = 102;
    /// IEMESSAGE: "received an unknown control message".
    pub const MESSAGE: i32 = 110;
    /// IERECVPARAMS: "unable to receive parameters from client".
    pub const RECV_PARAMS: i32 = 114;
    /// IERECVRESULTS: "unable to receive results from client/server".
    pub const RECV_RESULTS: i32 = 117;
    /// IESTREAMACCEPT: "unable to accept stream connection".
    pub const STREAM_ACCEPT: i32 = 204;
    /// IESETCONGESTION: "unable to set TCP_CONGESTION".
    pub const SET_CONGESTION: i32 = 134;
    /// IEAUTHTEST: "test authorization failed".
    pub const AUTH_TEST: i32 = 142;
}

/// The 37-byte test cookie that opens the control connection and every
/// data stream.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cookie(pub [u8; COOKIE_LEN]);

impl std::fmt::Debug for Cookie {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cookie({})", String::from_utf8_lossy(&self.0[..COOKIE_LEN - 1]))
    }
}

impl Cookie {
    /// A fresh random cookie in iperf3's alphabet.
    pub fn random() -> Cookie {
        let mut bytes = [0u8; COOKIE_LEN];
        // The cookie only tells tests apart; on a getrandom failure the
        // clock still makes it unique enough.
        if getrandom::getrandom(&mut bytes).is_err() {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            for (i, b) in bytes.iter_mut().enumerate() {
                *b = (nanos >> ((i % 16) * 8)) as u8 ^ (i as u8).wrapping_mul(31);
            }
        }
        for b in bytes.iter_mut().take(COOKIE_LEN - 1) {
            *b = COOKIE_ALPHABET[(*b % 32) as usize];
        }
        bytes[COOKIE_LEN - 1] = 0;
        Cookie(bytes)
    }

    /// Checks bytes read from a peer: 36 printable ASCII characters and a
    /// NUL (iperf3 versions differ in the alphabet, never in that shape).
    pub fn parse(bytes: &[u8]) -> Result<Cookie, WireError> {
        let array: [u8; COOKIE_LEN] = bytes
            .try_into()
            .map_err(|_| WireError::BadCookie(format!("{} bytes instead of {COOKIE_LEN}", bytes.len())))?;
        if array[COOKIE_LEN - 1] != 0 {
            return Err(WireError::BadCookie("not terminated by a NUL byte".into()));
        }
        if let Some(b) = array[..COOKIE_LEN - 1].iter().find(|b| !(0x21..=0x7e).contains(*b)) {
            return Err(WireError::BadCookie(format!("byte 0x{b:02x} is not printable ASCII")));
        }
        Ok(Cookie(array))
    }
}

/// The one-byte signed states of the control connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    TestStart,
    TestRunning,
    TestEnd,
    ParamExchange,
    CreateStreams,
    ServerTerminate,
    ClientTerminate,
    ExchangeResults,
    DisplayResults,
    IperfStart,
    IperfDone,
    AccessDenied,
    ServerError,
}

impl State {
    pub fn byte(self) -> u8 {
        let value: i8 = match self {
            State::TestStart => 1,
            State::TestRunning => 2,
            State::TestEnd => 4,
            State::ParamExchange => 9,
            State::CreateStreams => 10,
            State::ServerTerminate => 11,
            State::ClientTerminate => 12,
            State::ExchangeResults => 13,
            State::DisplayResults => 14,
            State::IperfStart => 15,
            State::IperfDone => 16,
            State::AccessDenied => -1,
            State::ServerError => -2,
        };
        value as u8
    }

    pub fn from_byte(byte: u8) -> Result<State, WireError> {
        Ok(match byte as i8 {
            1 => State::TestStart,
            2 => State::TestRunning,
            4 => State::TestEnd,
            9 => State::ParamExchange,
            10 => State::CreateStreams,
            11 => State::ServerTerminate,
            12 => State::ClientTerminate,
            13 => State::ExchangeResults,
            14 => State::DisplayResults,
            15 => State::IperfStart,
            16 => State::IperfDone,
            -1 => State::AccessDenied,
            -2 => State::ServerError,
            other => return Err(WireError::UnknownState(other)),
        })
    }
}

/// What went wrong reading iperf3's wire format.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("bad cookie: {0}")]
    BadCookie(String),
    #[error("unknown state byte {0}")]
    UnknownState(i8),
    #[error("a JSON message of {length} bytes, more than the {max} allowed")]
    TooLong { length: u32, max: u32 },
    #[error("a JSON message of 0 bytes")]
    Empty,
    #[error("invalid JSON: {0}")]
    Json(String),
    #[error("'{key}' {problem}")]
    Field { key: &'static str, problem: String },
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// One length-prefixed JSON message as bytes (`JSON_write`'s).
pub fn encode_json(value: &Value) -> Vec<u8> {
    let text = value.to_string();
    let mut frame = Vec::with_capacity(4 + text.len());
    frame.extend_from_slice(&(text.len() as u32).to_be_bytes());
    frame.extend_from_slice(text.as_bytes());
    frame
}

/// Reads one length-prefixed JSON object from `input`; see [`read_json_by`].
pub fn read_json(input: &mut impl Read, max: u32) -> Result<Map<String, Value>, WireError> {
    read_json_by(|buf| input.read_exact(buf).map_err(WireError::from), max)
}

/// Reads one length-prefixed JSON object with `read_exact` (which fills
/// the buffer it is handed, or fails), refusing a length above `max`
/// before allocating anything.
pub fn read_json_by(
    mut read_exact: impl FnMut(&mut [u8]) -> Result<(), WireError>,
    max: u32,
) -> Result<Map<String, Value>, WireError> {
    let mut prefix = [0u8; 4];
    read_exact(&mut prefix)?;
    let length = u32::from_be_bytes(prefix);
    if length > max {
        return Err(WireError::TooLong { length, max });
    }
    if length == 0 {
        return Err(WireError::Empty);
    }
    let mut body = vec![0u8; length as usize];
    read_exact(&mut body)?;
    decode_object(&body)
}

/// Parses a JSON object (cJSON ignores a trailing NUL; so do we).
pub fn decode_object(body: &[u8]) -> Result<Map<String, Value>, WireError> {
    let body = body.strip_suffix(&[0]).unwrap_or(body);
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(WireError::Json(format!(
            "expected an object, got {}",
            type_name(&other)
        ))),
        Err(e) => Err(WireError::Json(e.to_string())),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn field_error(key: &'static str, problem: impl Into<String>) -> WireError {
    WireError::Field {
        key,
        problem: problem.into(),
    }
}

/// A number field as a whole number in `0..=max`; cJSON prints whole
/// doubles without a fraction, so 1e3 and 1000.0 are accepted too.
fn whole(map: &Map<String, Value>, key: &'static str, max: u64) -> Result<Option<u64>, WireError> {
    let Some(value) = map.get(key) else { return Ok(None) };
    let n = value
        .as_f64()
        .ok_or_else(|| field_error(key, format!("must be a number, got {}", type_name(value))))?;
    if !(n.is_finite() && n >= 0.0 && n.fract() == 0.0 && n <= max as f64) {
        return Err(field_error(
            key,
            format!("must be a whole number in 0..={max}, got {n}"),
        ));
    }
    Ok(Some(n as u64))
}

/// A signed whole number (results use -1 for "none").
fn signed(map: &Map<String, Value>, key: &'static str) -> Result<Option<i64>, WireError> {
    let Some(value) = map.get(key) else { return Ok(None) };
    let n = value
        .as_f64()
        .ok_or_else(|| field_error(key, format!("must be a number, got {}", type_name(value))))?;
    if !(n.is_finite() && n.fract() == 0.0 && n.abs() <= 9.0e15) {
        return Err(field_error(key, format!("must be a whole number, got {n}")));
    }
    Ok(Some(n as i64))
}

/// A count where iperf3 may send -1 stored in an unsigned 64-bit field
/// (3.12 sends 18446744073709551615 for "no retransmit count"): such
/// values read as -1, unknown.
fn counter(map: &Map<String, Value>, key: &'static str) -> Result<Option<i64>, WireError> {
    match map.get(key).and_then(|v| v.as_f64()) {
        Some(n) if n.is_finite() && n >= 9.0e15 => Ok(Some(-1)),
        _ => signed(map, key),
    }
}

fn real(map: &Map<String, Value>, key: &'static str) -> Result<Option<f64>, WireError> {
    let Some(value) = map.get(key) else { return Ok(None) };
    match value.as_f64() {
        Some(n) if n.is_finite() => Ok(Some(n)),
        _ => Err(field_error(key, format!("must be a finite number, got {value}"))),
    }
}

fn text(map: &Map<String, Value>, key: &'static str, max_len: usize) -> Result<Option<String>, WireError> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::String(s)) if s.len() <= max_len => Ok(Some(s.clone())),
        Some(Value::String(s)) => Err(field_error(
            key,
            format!("is {} bytes long, at most {max_len}", s.len()),
        )),
        Some(other) => Err(field_error(key, format!("must be a string, got {}", type_name(other)))),
    }
}

/// iperf3 flags are set by their presence (`cJSON_AddTrueToObject`, or a
/// number for some); an explicit `false` or 0 reads as unset.
/// True when a parameter JSON asks for the server's output
/// (`--get-server-output`), read even from parameters that are refused.
pub fn asks_server_output(map: &Map<String, Value>) -> bool {
    flag(map, "get_server_output")
}

fn flag(map: &Map<String, Value>, key: &str) -> bool {
    match map.get(key) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(_) => true,
    }
}

/// The parameters a client sends after `PARAM_EXCHANGE` (the subset of
/// `send_parameters` this adapter acts on; the rest are listed in
/// `ignored` when received).
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub transport: Proto,
    pub omit_seconds: u64,
    pub time_seconds: u64,
    /// `-n`: bytes to send in all (0: by time).
    pub bytes: u64,
    /// `-k`: blocks to send in all (0: by time).
    pub blockcount: u64,
    pub parallel: u32,
    pub reverse: bool,
    pub bidirectional: bool,
    /// `-w`: socket buffer, bytes.
    pub window: Option<u64>,
    /// `-l`: block size, bytes.
    pub len: Option<u64>,
    /// `-b`: bits per second per stream (0: unlimited).
    pub bandwidth: Option<u64>,
    pub mss: Option<u64>,
    pub nodelay: bool,
    pub congestion: Option<String>,
    /// `--skip-rx-copy` (iperf3 3.16+): the receiver discards with MSG_TRUNC.
    pub skip_rx_copy: bool,
    pub get_server_output: bool,
    pub udp_counters_64bit: bool,
    pub client_version: Option<String>,
    /// RSA-encrypted credentials (`--username`), checked by
    /// [`super::server_auth`] when the agent requires them.
    pub authtoken: Option<String>,
    /// Keys we received but do not act on.
    pub ignored: Vec<String>,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            transport: Proto::TCP,
            omit_seconds: 0,
            time_seconds: 10,
            bytes: 0,
            blockcount: 0,
            parallel: 1,
            reverse: false,
            bidirectional: false,
            window: None,
            len: None,
            bandwidth: None,
            mss: None,
            nodelay: false,
            congestion: None,
            skip_rx_copy: false,
            get_server_output: false,
            udp_counters_64bit: false,
            client_version: None,
            authtoken: None,
            ignored: vec![],
        }
    }
}

/// The transports iperf3 names by a flag of their name (`"udp": true`),
/// the first flag set winning (iperf3 reads `tcp` then `udp`, so UDP's
/// wins); without one, a test is over TCP.
pub(crate) const TRANSPORTS: [Proto; 2] = [Proto::UDP, Proto::TCP];

/// Keys of `send_parameters` besides [`TRANSPORTS`]' flags that change
/// nothing we measure, or that we cannot honour and say so in `ignored`.
pub(crate) const KNOWN_KEYS: &[&str] = &[
    "sctp",
    "omit",
    "time",
    "num",
    "blockcount",
    "parallel",
    "reverse",
    "bidirectional",
    "window",
    "len",
    "bandwidth",
    "MSS",
    "nodelay",
    "congestion",
    "skip_rx_copy",
    "get_server_output",
    "udp_counters_64bit",
    "client_version",
    "authtoken",
];

/// Keys every client sends whatever the user asked, which are not worth a
/// line in the log: `pacing_timer` (the client's own timer granularity,
/// sent by 3.12 and 3.21 alike, unused by 3.21) and 3.21's GSO/GRO keys
/// while `--gsro` is off (`gso` and `gro` 0; the sizes then say nothing).
fn says_nothing(map: &Map<String, Value>, key: &str) -> bool {
    match key {
        "pacing_timer" => true,
        "gso" | "gso_dg_size" | "gso_bf_size" => !flag(map, "gso"),
        "gro" | "gro_bf_size" => !flag(map, "gro"),
        _ => false,
    }
}

/// Whether `key` is one [`Params::from_json`] reads.
pub(crate) fn known(key: &str) -> bool {
    KNOWN_KEYS.contains(&key) || TRANSPORTS.iter().any(|p| p.name() == key)
}

impl Params {
    /// The JSON a client sends.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        // iperf3 names the transport by a flag of its name: `"tcp": true`.
        m.insert(self.transport.name().into(), Value::Bool(true));
        m.insert("omit".into(), self.omit_seconds.into());
        m.insert("time".into(), self.time_seconds.into());
        m.insert("num".into(), self.bytes.into());
        m.insert("blockcount".into(), self.blockcount.into());
        if let Some(mss) = self.mss {
            m.insert("MSS".into(), mss.into());
        }
        if self.nodelay {
            m.insert("nodelay".into(), Value::Bool(true));
        }
        m.insert("parallel".into(), self.parallel.into());
        if self.reverse {
            m.insert("reverse".into(), Value::Bool(true));
        }
        if self.bidirectional {
            m.insert("bidirectional".into(), Value::Bool(true));
        }
        if let Some(w) = self.window {
            m.insert("window".into(), w.into());
        }
        if let Some(l) = self.len {
            m.insert("len".into(), l.into());
        }
        if let Some(b) = self.bandwidth {
            m.insert("bandwidth".into(), b.into());
        }
        if let Some(c) = &self.congestion {
            m.insert("congestion".into(), c.clone().into());
        }
        if self.skip_rx_copy {
            m.insert("skip_rx_copy".into(), 1.into());
        }
        if self.get_server_output {
            m.insert("get_server_output".into(), 1.into());
        }
        if self.udp_counters_64bit {
            m.insert("udp_counters_64bit".into(), 1.into());
        }
        if let Some(t) = &self.authtoken {
            m.insert("authtoken".into(), t.clone().into());
        }
        if let Some(v) = &self.client_version {
            m.insert("client_version".into(), v.clone().into());
        }
        Value::Object(m)
    }

    /// Reads a client's parameters, checking every type and range.
    pub fn from_json(map: &Map<String, Value>) -> Result<Params, WireError> {
        if flag(map, "sctp") {
            return Err(field_error("sctp", "is not supported: only TCP and UDP tests"));
        }
        let transport = TRANSPORTS
            .into_iter()
            .find(|p| flag(map, p.name()))
            .unwrap_or(Proto::TCP);
        let gib = 1u64 << 30;
        let params = Params {
            transport,
            omit_seconds: whole(map, "omit", MAX_TIME_SECONDS)?.unwrap_or(0),
            time_seconds: whole(map, "time", MAX_TIME_SECONDS)?.unwrap_or(10),
            bytes: whole(map, "num", u64::MAX >> 12)?.unwrap_or(0),
            blockcount: whole(map, "blockcount", u64::MAX >> 12)?.unwrap_or(0),
            parallel: whole(map, "parallel", u32::MAX as u64)?.unwrap_or(1) as u32,
            reverse: flag(map, "reverse"),
            bidirectional: flag(map, "bidirectional"),
            window: whole(map, "window", 4 * gib)?.filter(|w| *w > 0),
            len: whole(map, "len", 4 * gib)?.filter(|l| *l > 0),
            bandwidth: whole(map, "bandwidth", u64::MAX >> 12)?.filter(|b| *b > 0),
            mss: whole(map, "MSS", u32::MAX as u64)?.filter(|m| *m > 0),
            nodelay: flag(map, "nodelay"),
            congestion: text(map, "congestion", 64)?,
            skip_rx_copy: flag(map, "skip_rx_copy"),
            get_server_output: flag(map, "get_server_output"),
            udp_counters_64bit: flag(map, "udp_counters_64bit"),
            client_version: text(map, "client_version", 64)?,
            authtoken: text(map, "authtoken", 4096)?,
            ignored: map
                .keys()
                .filter(|k| !known(k) && !says_nothing(map, k))
                .take(32)
                .cloned()
                .collect(),
        };
        Ok(params)
    }
}

/// One stream in a results exchange (`send_results`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamResults {
    pub id: i64,
    /// Sender: bytes sent after the omit period; receiver: bytes received.
    pub bytes: u64,
    /// TCP sender with retransmit counts; -1 otherwise.
    pub retransmits: i64,
    /// UDP receiver: RFC 1889 jitter in seconds.
    pub jitter_seconds: f64,
    /// UDP receiver: datagrams missing from the sequence.
    pub errors: i64,
    /// UDP sender: datagrams sent; receiver: highest sequence number seen.
    pub packets: i64,
    /// Of `errors` and `packets`, those of the omit period (`-O`): iperf3
    /// 3.16 on sends both, and its client shows "0/0" datagrams for a
    /// sender whose results lack them. None: not sent (iperf3 before 3.16).
    pub omitted: Option<Omitted>,
    pub start_time: Option<f64>,
    pub end_time: Option<f64>,
}

/// A stream's counts during the omit period (`omitted_errors`,
/// `omitted_packets`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Omitted {
    pub errors: i64,
    pub packets: i64,
}

/// One side's results (`send_results`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Results {
    /// CPU use of the iperf3 process in percent of one core's wall time.
    pub cpu_util_total: f64,
    pub cpu_util_user: f64,
    pub cpu_util_system: f64,
    /// 1 or 0 for a sender, -1 for a receiver-only side.
    pub sender_has_retransmits: i64,
    pub congestion_used: Option<String>,
    pub streams: Vec<StreamResults>,
    pub server_output_text: Option<String>,
    pub server_output_json: Option<Value>,
}

impl Results {
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("cpu_util_total".into(), number(self.cpu_util_total));
        m.insert("cpu_util_user".into(), number(self.cpu_util_user));
        m.insert("cpu_util_system".into(), number(self.cpu_util_system));
        m.insert("sender_has_retransmits".into(), self.sender_has_retransmits.into());
        if let Some(c) = &self.congestion_used {
            m.insert("congestion_used".into(), c.clone().into());
        }
        if let Some(t) = &self.server_output_text {
            m.insert("server_output_text".into(), t.clone().into());
        }
        if let Some(j) = &self.server_output_json {
            m.insert("server_output_json".into(), j.clone());
        }
        let streams = self
            .streams
            .iter()
            .map(|s| {
                let mut o = Map::new();
                o.insert("id".into(), s.id.into());
                o.insert("bytes".into(), s.bytes.into());
                o.insert("retransmits".into(), s.retransmits.into());
                o.insert("jitter".into(), number(s.jitter_seconds));
                o.insert("errors".into(), s.errors.into());
                o.insert("packets".into(), s.packets.into());
                if let Some(omitted) = s.omitted {
                    o.insert("omitted_errors".into(), omitted.errors.into());
                    o.insert("omitted_packets".into(), omitted.packets.into());
                }
                o.insert("start_time".into(), number(s.start_time.unwrap_or(0.0)));
                o.insert("end_time".into(), number(s.end_time.unwrap_or(0.0)));
                Value::Object(o)
            })
            .collect();
        m.insert("streams".into(), Value::Array(streams));
        Value::Object(m)
    }

    /// Reads a peer's results with the checks `get_results` makes, and
    /// types and ranges besides.
    pub fn from_json(map: &Map<String, Value>) -> Result<Results, WireError> {
        let required = |key: &'static str| field_error(key, "is missing");
        let streams = match map.get("streams") {
            Some(Value::Array(a)) if a.len() <= 2 * MAX_STREAMS as usize => a,
            Some(Value::Array(a)) => return Err(field_error("streams", format!("holds {} entries", a.len()))),
            Some(other) => {
                return Err(field_error(
                    "streams",
                    format!("must be an array, got {}", type_name(other)),
                ))
            }
            None => return Err(required("streams")),
        };
        let mut parsed = Vec::with_capacity(streams.len());
        for s in streams {
            let Value::Object(o) = s else {
                return Err(field_error("streams", "holds an entry that is not an object"));
            };
            // Both or neither, as iperf3 itself requires.
            let omitted = match (signed(o, "omitted_errors")?, signed(o, "omitted_packets")?) {
                (Some(errors), Some(packets)) => Some(Omitted { errors, packets }),
                (None, None) => None,
                _ => {
                    return Err(field_error(
                        "streams",
                        "holds omitted_errors without omitted_packets, or the other way round",
                    ))
                }
            };
            parsed.push(StreamResults {
                omitted,
                id: signed(o, "id")?.ok_or_else(|| required("id"))?,
                bytes: whole(o, "bytes", u64::MAX >> 11)?.ok_or_else(|| required("bytes"))?,
                retransmits: counter(o, "retransmits")?.ok_or_else(|| required("retransmits"))?,
                jitter_seconds: real(o, "jitter")?.ok_or_else(|| required("jitter"))?,
                errors: signed(o, "errors")?.ok_or_else(|| required("errors"))?,
                packets: signed(o, "packets")?.ok_or_else(|| required("packets"))?,
                start_time: real(o, "start_time")?,
                end_time: real(o, "end_time")?,
            });
        }
        Ok(Results {
            cpu_util_total: real(map, "cpu_util_total")?.ok_or_else(|| required("cpu_util_total"))?,
            cpu_util_user: real(map, "cpu_util_user")?.ok_or_else(|| required("cpu_util_user"))?,
            cpu_util_system: real(map, "cpu_util_system")?.ok_or_else(|| required("cpu_util_system"))?,
            sender_has_retransmits: counter(map, "sender_has_retransmits")?
                .ok_or_else(|| required("sender_has_retransmits"))?,
            congestion_used: text(map, "congestion_used", 64)?,
            streams: parsed,
            server_output_text: text(map, "server_output_text", MAX_RESULTS_JSON as usize)?,
            server_output_json: map.get("server_output_json").cloned(),
        })
    }
}

fn number(x: f64) -> Value {
    serde_json::Number::from_f64(if x.is_finite() { x } else { 0.0 })
        .map(Value::Number)
        .unwrap_or(Value::from(0))
}

/// iperf3's id of the `index`-th stream a side creates or accepts (from
/// 0): 1, 3, 4, 5... (`iperf_add_stream` skips 2, kept for compatibility).
pub fn stream_id(index: usize) -> i64 {
    if index == 0 {
        1
    } else {
        index as i64 + 2
    }
}

/// The header iperf3 puts at the start of every UDP datagram: the send
/// time and a packet count from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    pub sec: u32,
    pub usec: u32,
    pub count: u64,
}

impl UdpHeader {
    /// Header length for 32-bit or 64-bit counters.
    pub fn len(counters_64bit: bool) -> usize {
        if counters_64bit {
            16
        } else {
            12
        }
    }

    /// Writes the header at the start of `buf` (at least [`UdpHeader::len`] bytes).
    pub fn write(&self, buf: &mut [u8], counters_64bit: bool) {
        buf[0..4].copy_from_slice(&self.sec.to_be_bytes());
        buf[4..8].copy_from_slice(&self.usec.to_be_bytes());
        if counters_64bit {
            buf[8..16].copy_from_slice(&self.count.to_be_bytes());
        } else {
            buf[8..12].copy_from_slice(&(self.count as u32).to_be_bytes());
        }
    }

    /// Reads a header; None for a datagram too short to hold one.
    pub fn read(buf: &[u8], counters_64bit: bool) -> Option<UdpHeader> {
        let word = |i: usize| u32::from_be_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        if buf.len() < UdpHeader::len(counters_64bit) {
            return None;
        }
        let count = if counters_64bit {
            u64::from_be_bytes(buf[8..16].try_into().ok()?)
        } else {
            word(8) as u64
        };
        Some(UdpHeader {
            sec: word(0),
            usec: word(4),
            count,
        })
    }

    /// The send time in nanoseconds since the epoch.
    pub fn send_nanos(&self) -> u64 {
        self.sec as u64 * 1_000_000_000 + (self.usec as u64 % 1_000_000) * 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_36_characters_of_the_alphabet_and_a_nul() {
        let c = Cookie::random();
        assert_eq!(c.0[36], 0);
        assert!(c.0[..36].iter().all(|b| COOKIE_ALPHABET.contains(b)));
        assert_eq!(Cookie::parse(&c.0).unwrap(), c);
        assert_ne!(Cookie::random(), c);
    }

    #[test]
    fn bad_cookies_are_refused_with_the_reason() {
        let mut c = Cookie::random().0;
        c[36] = b'x';
        assert!(Cookie::parse(&c).unwrap_err().to_string().contains("NUL"));
        let mut c = Cookie::random().0;
        c[3] = 0xff;
        assert!(Cookie::parse(&c).unwrap_err().to_string().contains("0xff"));
        assert!(Cookie::parse(&[b'a'; 12]).is_err());
    }

    #[test]
    fn states_round_trip_and_match_iperf_api_h() {
        let table = [
            (State::TestStart, 1i8),
            (State::TestRunning, 2),
            (State::TestEnd, 4),
            (State::ParamExchange, 9),
            (State::CreateStreams, 10),
            (State::ServerTerminate, 11),
            (State::ClientTerminate, 12),
            (State::ExchangeResults, 13),
            (State::DisplayResults, 14),
            (State::IperfStart, 15),
            (State::IperfDone, 16),
            (State::AccessDenied, -1),
            (State::ServerError, -2),
        ];
        for (state, value) in table {
            assert_eq!(state.byte(), value as u8);
            assert_eq!(State::from_byte(value as u8).unwrap(), state);
        }
        assert!(State::from_byte(3).is_err());
        assert!(State::from_byte(0x80).is_err());
    }

    #[test]
    fn params_round_trip_through_the_framing() {
        let p = Params {
            transport: Proto::UDP,
            time_seconds: 3,
            parallel: 4,
            reverse: true,
            len: Some(1400),
            bandwidth: Some(100_000_000),
            window: Some(1 << 20),
            udp_counters_64bit: true,
            client_version: Some("nicbench".into()),
            ..Params::default()
        };
        let frame = encode_json(&p.to_json());
        assert_eq!(
            u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize,
            frame.len() - 4
        );
        let map = read_json(&mut &frame[..], MAX_PARAMS_JSON).unwrap();
        assert_eq!(Params::from_json(&map).unwrap(), p);
    }

    #[test]
    fn params_of_a_real_iperf3_3_12_client_parse() {
        // What `iperf3 -c ... -u -b 10M -P 2 -R -t 3 -O 1` sends (from --debug).
        let json = r#"{"udp":true,"omit":1,"time":3,"num":0,"blockcount":0,"parallel":2,"reverse":true,
            "len":1460,"bandwidth":10000000,"pacing_timer":1000,"client_version":"3.12"}"#;
        let p = Params::from_json(&decode_object(json.as_bytes()).unwrap()).unwrap();
        assert_eq!(p.transport, Proto::UDP);
        assert_eq!((p.omit_seconds, p.time_seconds, p.parallel), (1, 3, 2));
        assert!(p.reverse && !p.bidirectional);
        assert_eq!(p.bandwidth, Some(10_000_000));
        // Every client sends pacing_timer: nothing worth a log line.
        assert!(p.ignored.is_empty(), "{:?}", p.ignored);
    }

    #[test]
    fn wrong_types_and_ranges_are_errors_not_panics() {
        for (json, key) in [
            (r#"{"tcp":true,"time":"10"}"#, "time"),
            (r#"{"tcp":true,"time":-1}"#, "time"),
            (r#"{"tcp":true,"time":1e300}"#, "time"),
            (r#"{"tcp":true,"parallel":2.5}"#, "parallel"),
            (r#"{"tcp":true,"congestion":7}"#, "congestion"),
            (r#"{"sctp":true}"#, "sctp"),
        ] {
            let err = Params::from_json(&decode_object(json.as_bytes()).unwrap()).unwrap_err();
            assert!(err.to_string().contains(key), "{json}: {err}");
        }
        assert!(decode_object(b"[1,2]").is_err());
        assert!(decode_object(b"{\"a\":").is_err());
        assert!(decode_object(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn a_length_above_the_limit_is_refused_before_reading_the_body() {
        // A length that would wrap a 32-bit size + 1 in C.
        let frame = u32::MAX.to_be_bytes();
        let err = read_json(&mut &frame[..], MAX_PARAMS_JSON).unwrap_err();
        assert!(matches!(err, WireError::TooLong { length: u32::MAX, .. }), "{err}");
        let err = read_json(&mut &[0u8, 0, 0, 0][..], MAX_PARAMS_JSON).unwrap_err();
        assert!(matches!(err, WireError::Empty));
        // Shorter than announced: an I/O error, never a partial parse.
        let mut short = 10u32.to_be_bytes().to_vec();
        short.extend_from_slice(b"{\"a\"");
        assert!(matches!(
            read_json(&mut &short[..], MAX_PARAMS_JSON),
            Err(WireError::Io(_))
        ));
    }

    #[test]
    fn results_round_trip_and_missing_keys_are_named() {
        let r = Results {
            cpu_util_total: 12.5,
            cpu_util_user: 2.5,
            cpu_util_system: 10.0,
            sender_has_retransmits: 1,
            congestion_used: Some("cubic".into()),
            streams: vec![StreamResults {
                id: 1,
                bytes: 123_456_789,
                retransmits: 3,
                jitter_seconds: 0.0,
                errors: 0,
                packets: 0,
                omitted: Some(Omitted { errors: 1, packets: 2 }),
                start_time: Some(0.0),
                end_time: Some(10.000_25),
            }],
            server_output_text: None,
            server_output_json: None,
        };
        let back = Results::from_json(r.to_json().as_object().unwrap()).unwrap();
        assert_eq!(back, r);
        // What a 3.12 receiver sends for "no retransmit count".
        let mut unsigned = r.to_json();
        unsigned["streams"][0]["retransmits"] = serde_json::json!(18446744073709551615u64);
        let back = Results::from_json(unsigned.as_object().unwrap()).unwrap();
        assert_eq!(back.streams[0].retransmits, -1);
        let mut missing = r.to_json();
        missing["streams"][0].as_object_mut().unwrap().remove("packets");
        let err = Results::from_json(missing.as_object().unwrap()).unwrap_err();
        assert!(err.to_string().contains("packets"), "{err}");
        let mut wrong = r.to_json();
        wrong["streams"] = Value::from("many");
        assert!(Results::from_json(wrong.as_object().unwrap()).is_err());
    }

    #[test]
    fn stream_ids_skip_two_like_iperf3() {
        let ids: Vec<i64> = (0..5).map(stream_id).collect();
        assert_eq!(ids, vec![1, 3, 4, 5, 6]);
    }

    #[test]
    fn udp_headers_in_both_counter_widths() {
        let h = UdpHeader {
            sec: 1_700_000_000,
            usec: 999_999,
            count: 5,
        };
        let mut buf = [0u8; 16];
        h.write(&mut buf, false);
        assert_eq!(&buf[8..12], &[0, 0, 0, 5]);
        assert_eq!(UdpHeader::read(&buf[..12], false), Some(h));
        let big = UdpHeader { count: 1 << 40, ..h };
        big.write(&mut buf, true);
        assert_eq!(UdpHeader::read(&buf, true), Some(big));
        assert_eq!(UdpHeader::read(&buf[..11], false), None);
        assert_eq!(h.send_nanos(), 1_700_000_000_999_999_000);
    }

    #[test]
    fn the_connect_values_are_the_bytes_a_little_endian_iperf3_writes() {
        // UDP_CONNECT_MSG 0x36373839 and UDP_CONNECT_REPLY 0x39383736,
        // written in host order by a little-endian iperf3.
        assert_eq!(UDP_CONNECT_MSG, 0x3637_3839u32.to_le_bytes());
        assert_eq!(UDP_CONNECT_REPLY, 0x3938_3736u32.to_le_bytes());
        assert_eq!(LEGACY_UDP_CONNECT_REPLY, [0xb1, 0x68, 0xde, 0x3a]);
    }
}
