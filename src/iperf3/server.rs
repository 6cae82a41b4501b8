//! nicbench as an iperf3 server: one test of an unmodified iperf3 client
//! on `nicbench serve --iperf3-port`, after the agent has read the cookie
//! and admitted the client (`agent::iperf3_port`).
//!
//! The server side of iperf3's state machine (`iperf_server_api.c`):
//! PARAM_EXCHANGE and the parameters; CREATE_STREAMS and the streams
//! (TCP: connections to the same port that open with the test's cookie,
//! handed over by the agent; UDP: a connect datagram on the port, answered
//! once the next stream's socket is bound); TEST_START, TEST_RUNNING; the
//! client ends the test with TEST_END; EXCHANGE_RESULTS (the client's
//! first, then ours); DISPLAY_RESULTS; IPERF_DONE. Every read has a
//! deadline; every limit of the agent applies; a refusal goes back as
//! SERVER_ERROR with iperf3's error number, so the client prints its own
//! message for it.

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use socket2::{Domain, Protocol, Socket, Type};

use super::streams::{self, DataStream, StreamPlan};
use super::wire::{self, errno, Params, Results, MAX_PARAMS_JSON, MAX_RESULTS_JSON};
use super::{Control, State};
use crate::model::{
    Direction, Endpoint, Party, PeerProtocol, Role, RunResult, SideOptions, TestSpec, TrialResult, SCHEMA,
};
use crate::probe::cpu::ProcStat;
use crate::probe::host::facts_toward;
use crate::protocol::limits::TestLimits;
use crate::workload::bulk::{self, BulkSettings};
use crate::workload::transport::Proto;
use crate::workload::{self, Workload};

/// How long the client may take for each step after the test.
const RESULTS_TIMEOUT: Duration = Duration::from_secs(15);
/// How long our senders may finish the write under way after TEST_END
/// before it is cut (the client reads no more).
const SENDER_GRACE: Duration = Duration::from_millis(200);
/// iperf3's default block sizes (`DEFAULT_TCP_BLKSIZE`, `DEFAULT_UDP_BLKSIZE`).
const DEFAULT_TCP_LEN: u64 = 128 * 1024;
const DEFAULT_UDP_LEN: u64 = 1460;

/// What the agent settles before a test and hands to [`serve_test`].
pub struct ServerSettings<'a> {
    pub limits: &'a TestLimits,
    /// How long the client may take to send its parameters.
    /// The same deadline applies to opening its data streams.
    pub handshake_timeout: Duration,
    /// The port clients connect to (UDP streams use it too).
    pub port: u16,
    pub shutdown: &'a AtomicBool,
}

/// A data connection that opened with this test's cookie, numbered in
/// the order the agent accepted it.
pub type DataConnection = (u64, TcpStream);

/// Why a test ended without a result; the agent logs it.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("refused: {0}")]
    Refused(String),
    #[error("{step}: {source}")]
    Wire {
        step: &'static str,
        #[source]
        source: wire::WireError,
    },
    /// Refused after the parameters, with the iperf3 error number (and
    /// errno) the client is told in SERVER_ERROR.
    #[error("{why}")]
    Setup { i_errno: i32, errno: i32, why: String },
    #[error("{0}")]
    Failed(String),
}

impl ServeError {
    fn setup(i_errno: i32, why: impl Into<String>) -> ServeError {
        ServeError::Setup {
            i_errno,
            errno: 0,
            why: why.into(),
        }
    }
}

fn wire_err(step: &'static str) -> impl FnOnce(wire::WireError) -> ServeError {
    move |source| ServeError::Wire { step, source }
}

fn io_err(step: &'static str) -> impl FnOnce(std::io::Error) -> ServeError {
    move |e| ServeError::Wire {
        step,
        source: wire::WireError::Io(e),
    }
}

/// The test an iperf3 client asks for, as our spec; or iperf3's error
/// number and our reason when it is refused.
pub fn spec_of(params: &Params, limits: &TestLimits) -> Result<TestSpec, (i32, String)> {
    let udp = params.transport == Proto::UDP;
    let refuse = |n: i32, why: String| Err((n, why));
    if params.parallel == 0 || params.parallel > limits.max_streams.min(wire::MAX_STREAMS) {
        return refuse(
            errno::NUM_STREAMS,
            format!(
                "{} streams asked, at most {} (--max-streams)",
                params.parallel, limits.max_streams
            ),
        );
    }
    let bytes = match (params.bytes, params.blockcount) {
        (0, 0) => None,
        // A block is one write: a datagram of -l bytes over UDP.
        (0, blocks) => Some(
            blocks.saturating_mul(
                params
                    .len
                    .unwrap_or(if udp { DEFAULT_UDP_LEN } else { DEFAULT_TCP_LEN }),
            ),
        ),
        (n, _) => Some(n),
    };
    let duration = match (params.time_seconds, bytes) {
        (0, Some(_)) | (0, None) => limits.max_duration_seconds - params.omit_seconds as f64,
        (t, _) => t as f64,
    };
    if duration <= 0.0 || duration + params.omit_seconds as f64 > limits.max_duration_seconds {
        return refuse(
            errno::DURATION,
            format!(
                "a test of {} s asked, at most {:.0} s (--max-duration)",
                params.time_seconds + params.omit_seconds,
                limits.max_duration_seconds
            ),
        );
    }
    let len = params
        .len
        .unwrap_or(if udp { DEFAULT_UDP_LEN } else { DEFAULT_TCP_LEN });
    if len > limits.max_message_bytes {
        return refuse(
            if udp { errno::UDP_BLOCK_SIZE } else { errno::BLOCK_SIZE },
            format!(
                "blocks of {len} bytes asked, at most {} (--max-message)",
                limits.max_message_bytes
            ),
        );
    }
    if params.window.is_some_and(|w| w > limits.max_buffer_bytes) {
        return refuse(errno::BUF_SIZE, format!("a window of {:?} bytes asked", params.window));
    }
    let side = SideOptions {
        send_buffer_bytes: params.window,
        receive_buffer_bytes: params.window,
        cpus: vec![],
    };
    let w: &dyn Workload = workload::bulk_streams(if udp { Proto::UDP } else { Proto::TCP });
    let mut spec = TestSpec {
        workload: w.name().into(),
        duration_seconds: duration,
        bytes,
        omit_seconds: params.omit_seconds as f64,
        streams: params.parallel,
        direction: if params.bidirectional {
            Direction::Bidir
        } else if params.reverse {
            Direction::Reverse
        } else {
            Direction::Forward
        },
        message_bytes: len,
        interval_seconds: 1.0,
        client: side.clone(),
        agent: side,
        params: serde_json::Value::Null,
        links: Vec::new(),
    };
    let settings = if udp {
        BulkSettings {
            rate_bits_per_second: params.bandwidth,
            ..BulkSettings::default()
        }
    } else {
        BulkSettings {
            mss: params.mss.map(|m| m.min(u32::MAX as u64) as u32),
            nodelay: params.nodelay,
            congestion: params.congestion.clone(),
            discard: params.skip_rx_copy,
            rate_bits_per_second: params.bandwidth.filter(|&r| r > 0),
            ..BulkSettings::default()
        }
    };
    bulk::bulk_params(w.name())
        .and_then(|bulk| bulk.set(&mut spec, &settings))
        .map_err(|e| (errno::RECV_PARAMS, e.to_string()))?;
    if let Err(e) = w.validate(&spec) {
        let n = match &e {
            workload::SpecError::OutOfRange { option, .. } if option.contains("mss") => errno::MSS,
            workload::SpecError::OutOfRange { option, .. } if option.contains("length") => {
                if udp {
                    errno::UDP_BLOCK_SIZE
                } else {
                    errno::BLOCK_SIZE
                }
            }
            _ if params.congestion.is_some() && e.to_string().contains("congestion") => errno::SET_CONGESTION,
            _ => errno::RECV_PARAMS,
        };
        return Err((n, e.to_string()));
    }
    limits
        .check_offered(&spec, crate::protocol::limits::declared_rate(&spec))
        .map_err(|why| (errno::TOTAL_RATE, why))?;
    // iperf3 has no word for a memory limit: "unable to create a new
    // test: Cannot allocate memory" is what its client prints for this.
    limits
        .check_memory(&spec, crate::protocol::limits::message_buffers(&spec))
        .map_err(|why| (errno::NEW_TEST, why))?;
    Ok(spec)
}

/// Runs one admitted test on `control` (the cookie and the parameters
/// already read, see [`read_params`]) and returns it as our run document,
/// the client's side from its results.
pub fn serve_test(
    control: &mut Control,
    peer: SocketAddr,
    local_ip: IpAddr,
    settings: &ServerSettings,
    params: Params,
    data: &Receiver<DataConnection>,
) -> Result<RunResult, ServeError> {
    let started_at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let (params, spec) = settle_params(control, peer, settings, params)?;
    let flows = spec.flows();
    let sockets = create_streams(control, data, peer, local_ip, settings, &params, &spec)?;
    let data_streams = data_streams(&flows, sockets);
    let peer_streams = streams::peer_ends(&data_streams);
    let plan = StreamPlan {
        transport: params.transport,
        message_bytes: spec.message_bytes as usize,
        rate: params.bandwidth,
        counters_64bit: params.udp_counters_64bit,
        bytes_total: spec.bytes,
        // TCP receivers only; the spec records it as the tcp params' discard.
        discard: params.skip_rx_copy,
    };
    control
        .send_state(State::TestStart)
        .map_err(io_err("sending TEST_START"))?;
    let side = streams::start(
        data_streams,
        plan,
        Duration::from_secs_f64(spec.omit_seconds),
        None,
        vec![],
        None,
        &ProcStat,
    )
    .map_err(|e| ServeError::Failed(format!("starting the streams: {e}")))?;
    control
        .send_state(State::TestRunning)
        .map_err(io_err("sending TEST_RUNNING"))?;
    let hard_deadline = side.start + Duration::from_secs_f64(spec.expected_seconds()) + crate::side_runner::GRACE;
    let ended = await_test_end(control, settings.shutdown, hard_deadline);
    side.end_senders(SENDER_GRACE);
    drain_then_end(&side);
    let finished = side
        .finish(Party::Agent, Duration::from_secs(5), &ProcStat)
        .map_err(|e| ServeError::Failed(format!("collecting the streams: {e}")))?;
    ended?;
    control
        .send_state(State::ExchangeResults)
        .map_err(io_err("sending EXCHANGE_RESULTS"))?;
    let theirs = read_client_results(control)?;
    let mut ours = finished.to_results(params.transport);
    let local = finished.report;
    let fallback = local.streams.iter().map(|e| e.seconds).fold(0.0, f64::max);
    let built = streams::peer_report(
        Party::Client,
        &theirs,
        &peer_streams,
        params.transport,
        spec.message_bytes,
        fallback,
    )
    .map_err(ServeError::Failed)
    .and_then(|(client_report, raw)| {
        let result = TrialResult::merge(1, &flows, client_report, local)
            .map_err(|e| ServeError::Failed(format!("the client's results do not match the test: {e}")))?;
        let served = Served {
            started_at,
            peer,
            agent: SocketAddr::new(local_ip, settings.port),
            params: &params,
            spec: &spec,
            theirs: &theirs,
        };
        Ok(served.run(result, raw))
    });
    if params.get_server_output {
        ours.server_output_text = Some(server_output_text(&built));
    }
    control
        .send_json(&ours.to_json())
        .map_err(io_err("sending our results"))?;
    control
        .send_state(State::DisplayResults)
        .map_err(io_err("sending DISPLAY_RESULTS"))?;
    // IPERF_DONE, or the client simply closing, both end the test.
    let _ = control.read_state(RESULTS_TIMEOUT);
    built
}

/// PARAM_EXCHANGE: asks for the client's parameters and reads them
/// within `timeout`, answering SERVER_ERROR (IERECVPARAMS) when they
/// cannot be read. The agent calls it before the test's slot is taken
/// when it must check credentials first, else once the client is admitted.
pub fn read_params(control: &mut Control, timeout: Duration) -> Result<Params, ServeError> {
    control
        .send_state(State::ParamExchange)
        .map_err(io_err("sending PARAM_EXCHANGE"))?;
    let refused = |control: &mut Control, e: wire::WireError, wants_output: bool| {
        // SCTP has iperf3's own word; anything else we cannot read is
        // "unable to receive parameters from client".
        let i_errno = match e {
            wire::WireError::Field { key: "sctp", .. } => errno::NO_SCTP,
            _ => errno::RECV_PARAMS,
        };
        refuse(control, i_errno, &format!("the parameters: {e}"), wants_output);
        ServeError::Wire {
            step: "the parameters",
            source: e,
        }
    };
    match control.read_json(MAX_PARAMS_JSON, timeout) {
        Ok(map) => Params::from_json(&map).map_err(|e| refused(control, e, wire::asks_server_output(&map))),
        Err(e) => Err(refused(control, e, false)),
    }
}

/// Refuses a test after the parameters with iperf3's error number
/// `i_errno`. SERVER_ERROR carries only the number, which the client
/// prints as iperf3's own text ("unable to receive parameters from
/// client"); so a client that asked for the server's output
/// (`--get-server-output`) gets our reason as that output first: the
/// results exchange comes at once, without streams, and SERVER_TERMINATE
/// ends the test, after which the client prints "Server output:" with the
/// reason and fails with "the server has terminated".
fn refuse(control: &mut Control, i_errno: i32, why: &str, wants_output: bool) {
    // The errno word completes the text of the codes iperf3 prints with
    // strerror: "unable to create a new test: Cannot allocate memory".
    let errno = match i_errno {
        errno::NEW_TEST => libc::ENOMEM,
        errno::UNIMPLEMENTED => libc::EOPNOTSUPP,
        _ => 0,
    };
    if !wants_output {
        let _ = control.send_server_error(i_errno, errno);
        return;
    }
    let told = control
        .send_state(State::ExchangeResults)
        .map_err(wire::WireError::Io)
        .and_then(|_| control.read_json(MAX_RESULTS_JSON, RESULTS_TIMEOUT))
        .and_then(|_| {
            let ours = Results {
                sender_has_retransmits: -1,
                server_output_text: Some(format!("nicbench agent: the test was refused: {why}\n")),
                ..Results::default()
            };
            control.send_json(&ours.to_json()).map_err(wire::WireError::Io)
        });
    match told {
        Ok(()) => {
            let _ = control.send_state(State::ServerTerminate);
        }
        Err(_) => {
            let _ = control.send_server_error(i_errno, errno);
        }
    }
}

/// Refuses a client whose credentials failed as iperf3's server does
/// (`iperf_exchange_parameters`): SERVER_ERROR, IEAUTHTEST and errno 0;
/// the caller closes the connection.
pub fn refuse_credentials(control: &Control) {
    // Both words, as iperf3 3.21's client reads them: with the errno word
    // missing it printed "errno: Unknown error 142" from a stale buffer.
    let mut frame = vec![State::ServerError.byte()];
    frame.extend_from_slice(&errno::AUTH_TEST.to_be_bytes());
    frame.extend_from_slice(&0i32.to_be_bytes());
    let _ = std::io::Write::write_all(&mut control.stream(), &frame);
}

/// Settles the parameters into our spec, answering SERVER_ERROR with
/// iperf3's error number when they are refused.
fn settle_params(
    control: &mut Control,
    peer: SocketAddr,
    settings: &ServerSettings,
    params: Params,
) -> Result<(Params, TestSpec), ServeError> {
    if !params.ignored.is_empty() {
        log::info!("{peer}: iperf3 options not acted on: {}", params.ignored.join(", "));
    }
    match spec_of(&params, settings.limits) {
        Ok(spec) => Ok((params, spec)),
        Err((n, why)) => {
            refuse(control, n, &why, params.get_server_output);
            Err(ServeError::Refused(why))
        }
    }
}

/// CREATE_STREAMS: binds the first UDP stream's socket (before asking for
/// the streams) or takes the TCP connections the agent hands over; one
/// socket per flow, in the order of the flows.
fn create_streams(
    control: &mut Control,
    data: &Receiver<DataConnection>,
    peer: SocketAddr,
    local_ip: IpAddr,
    settings: &ServerSettings,
    params: &Params,
    spec: &TestSpec,
) -> Result<Vec<Socket>, ServeError> {
    let udp = params.transport == Proto::UDP;
    let count = spec.flows().len();
    let first_udp = if udp {
        match bind_udp(local_ip, settings.port, spec) {
            Ok(s) => Some(s),
            Err(e) => {
                let _ = control.send_server_error(errno::LISTEN, e.raw_os_error().unwrap_or(0));
                return Err(ServeError::Failed(format!("binding UDP port {}: {e}", settings.port)));
            }
        }
    } else {
        None
    };
    control
        .send_state(State::CreateStreams)
        .map_err(io_err("sending CREATE_STREAMS"))?;
    let deadline = Instant::now() + settings.handshake_timeout;
    let accepted = if let Some(first) = first_udp {
        accept_udp(first, peer.ip(), local_ip, settings.port, spec, count, deadline)
    } else {
        accept_tcp(control, data, peer.ip(), count, spec, deadline)
    };
    accepted.inspect_err(|e| {
        if let ServeError::Setup { i_errno, errno, .. } = e {
            let _ = control.send_server_error(*i_errno, *errno);
        }
    })
}

/// The sockets as our data streams: our ids, iperf3's ids, and our end's
/// role in each flow.
fn data_streams(flows: &[(u32, crate::model::Flow)], sockets: Vec<Socket>) -> Vec<DataStream> {
    let ids = streams::peer_ids(flows.len());
    let mut data_streams = Vec::with_capacity(sockets.len());
    for (((id, flow), peer_id), socket) in flows.iter().zip(&ids).zip(sockets) {
        data_streams.push(DataStream {
            id: *id,
            peer_id: *peer_id,
            role: if flow.sender() == Party::Agent {
                Role::Sender
            } else {
                Role::Receiver
            },
            socket,
        });
    }
    data_streams
}

/// TEST_RUNNING until the client sends TEST_END; a test past its time or
/// an agent stopping ends with SERVER_TERMINATE, an unexpected state with
/// SERVER_ERROR.
fn await_test_end(control: &mut Control, shutdown: &AtomicBool, hard_deadline: Instant) -> Result<(), ServeError> {
    loop {
        if shutdown.load(Ordering::Relaxed) || Instant::now() > hard_deadline {
            let _ = control.send_state(State::ServerTerminate);
            return Err(ServeError::Failed(
                "the test outlived its time (or the agent is stopping); ended with SERVER_TERMINATE".into(),
            ));
        }
        match control.poll_state(Duration::from_millis(50)) {
            Ok(None) => {}
            Ok(Some(State::TestEnd)) => return Ok(()),
            Ok(Some(State::ClientTerminate | State::IperfDone)) => {
                return Err(ServeError::Failed("the client ended the test early".into()))
            }
            Ok(Some(other)) => {
                let _ = control.send_server_error(errno::MESSAGE, 0);
                return Err(ServeError::Failed(format!(
                    "state {other:?} during the test; answered SERVER_ERROR"
                )));
            }
            Err(e @ wire::WireError::UnknownState(_)) => {
                let _ = control.send_server_error(errno::MESSAGE, 0);
                return Err(wire_err("the control connection during the test")(e));
            }
            Err(e) => return Err(wire_err("the control connection during the test")(e)),
        }
    }
}

/// EXCHANGE_RESULTS: the client's results (SERVER_ERROR when they do not
/// parse; a broken connection is not answered).
fn read_client_results(control: &mut Control) -> Result<Results, ServeError> {
    match control
        .read_json(MAX_RESULTS_JSON, RESULTS_TIMEOUT)
        .and_then(|m| Results::from_json(&m))
    {
        Ok(results) => Ok(results),
        Err(e) => {
            if !matches!(e, wire::WireError::Io(_)) {
                let _ = control.send_server_error(errno::RECV_RESULTS, 0);
            }
            Err(wire_err("the client's results")(e))
        }
    }
}

/// What a served test is recorded with besides its merged trial.
struct Served<'a> {
    started_at: Duration,
    peer: SocketAddr,
    /// Our address and port as the client reached it.
    agent: SocketAddr,
    params: &'a Params,
    spec: &'a TestSpec,
    theirs: &'a Results,
}

impl Served<'_> {
    /// The run document of the test: the trial summarized and judged, the
    /// client's own view kept as the peer protocol's.
    fn run(&self, mut result: TrialResult, raw: Vec<crate::model::PeerStream>) -> RunResult {
        workload::results_of(&self.spec.workload).summarize(&mut result);
        let theirs = self.theirs;
        let mut run = RunResult {
            schema: SCHEMA.to_string(),
            workload: self.spec.workload.clone(),
            started_at_unix_seconds: self.started_at.as_secs_f64(),
            client: Endpoint {
                address: self.peer.to_string(),
                facts: Default::default(),
            },
            agent: Endpoint {
                address: self.agent.to_string(),
                facts: facts_toward(self.agent.ip()),
            },
            spec: self.spec.clone(),
            trials: vec![result.clone()],
            result,
            repetition: None,
            interrupted: false,
            peer_protocol: Some(PeerProtocol {
                protocol: "iperf3".into(),
                peer_role: "client".into(),
                peer_version: self.params.client_version.clone(),
                peer_cpu_util_total_percent: theirs.cpu_util_total,
                peer_cpu_util_user_percent: theirs.cpu_util_user,
                peer_cpu_util_system_percent: theirs.cpu_util_system,
                peer_congestion_used: theirs.congestion_used.clone(),
                peer_streams: raw,
            }),
        };
        crate::verdict::annotate(&mut run, None);
        run
    }
}

/// The text iperf3's `--get-server-output` shows: our text report, or why
/// there is none.
fn server_output_text(built: &Result<RunResult, ServeError>) -> String {
    match built {
        Ok(run) => {
            let mut text = Vec::new();
            let _ = crate::report::Reporter::render(&crate::report::text::Text, run, &mut text);
            String::from_utf8_lossy(&text).into_owned()
        }
        Err(e) => format!("nicbench could not read the client's results: {e}\n"),
    }
}

/// After TEST_END the client has stopped sending: let TCP receivers read
/// what is still queued (up to a second), then end their reads.
fn drain_then_end(side: &streams::RunningSide) {
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until && !side.receivers_drained() {
        std::thread::sleep(Duration::from_millis(2));
    }
    side.end_receivers();
}

/// A UDP socket on the iperf3 port that can share it with the next one.
fn bind_udp(ip: IpAddr, port: u16, spec: &TestSpec) -> std::io::Result<Socket> {
    let domain = if ip.is_ipv4() { Domain::IPV4 } else { Domain::IPV6 };
    let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_reuse_address(true)?;
    if let Some(b) = spec.agent.send_buffer_bytes {
        let _ = socket.set_send_buffer_size(b as usize);
    }
    let receive = spec
        .agent
        .receive_buffer_bytes
        .map_or(crate::workload::transport::udp::loops::DEFAULT_RECEIVE_BUFFER, |b| {
            b as usize
        });
    let _ = socket.set_recv_buffer_size(receive);
    socket.bind(&SocketAddr::new(ip, port).into())?;
    Ok(socket)
}

/// Accepts `count` UDP streams the way iperf3 does: a connect datagram
/// on the port, the socket connected to its sender, the next socket bound,
/// then the reply.
fn accept_udp(
    first: Socket,
    peer_ip: IpAddr,
    local_ip: IpAddr,
    port: u16,
    spec: &TestSpec,
    count: usize,
    deadline: Instant,
) -> Result<Vec<Socket>, ServeError> {
    let mut sockets = Vec::with_capacity(count);
    let mut next = Some(first);
    for i in 0..count {
        let socket = next.take().expect("a socket is bound for every stream");
        super::udp::server_accept(&socket, peer_ip, deadline).map_err(|e| ServeError::Setup {
            i_errno: errno::STREAM_ACCEPT,
            errno: e.raw_os_error().unwrap_or(0),
            why: format!("UDP stream {} of {count}: {e}", i + 1),
        })?;
        if i + 1 < count {
            next = Some(
                bind_udp(local_ip, port, spec)
                    .map_err(|e| ServeError::Failed(format!("binding UDP port {port} again: {e}")))?,
            );
        }
        super::udp::server_reply(&socket).map_err(|e| ServeError::Failed(format!("UDP connect reply: {e}")))?;
        sockets.push(socket);
    }
    Ok(sockets)
}

/// How often the control connection is looked at while streams open.
const SETUP_POLL: Duration = Duration::from_millis(100);

/// Takes `count` TCP data connections from the agent, in the order it
/// accepted them (the order the client opened them), from the client's
/// address only, before `deadline`. A client that closes its control
/// connection meanwhile ends the wait at once; one that sends a state
/// there (a real client sends none now) is answered with SERVER_ERROR.
fn accept_tcp(
    control: &mut Control,
    data: &Receiver<DataConnection>,
    peer_ip: IpAddr,
    count: usize,
    spec: &TestSpec,
    deadline: Instant,
) -> Result<Vec<Socket>, ServeError> {
    let mut got: Vec<DataConnection> = Vec::with_capacity(count);
    while got.len() < count {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ServeError::Setup {
                i_errno: errno::STREAM_ACCEPT,
                errno: libc::ETIMEDOUT,
                why: format!(
                    "the client opened {} of its {count} data streams before the deadline (--handshake-timeout)",
                    got.len()
                ),
            });
        }
        match data.recv_timeout(left.min(SETUP_POLL)) {
            Ok((seq, stream)) => {
                if stream.peer_addr().map(|a| a.ip()).ok() != Some(peer_ip) {
                    continue;
                }
                got.push((seq, stream));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => match control.activity() {
                Ok(super::Activity::Quiet) => {}
                Ok(super::Activity::Closed) | Err(_) => {
                    return Err(ServeError::Failed(
                        "the client closed its control connection while opening its streams".into(),
                    ))
                }
                Ok(super::Activity::Sent) => {
                    let what = match control.read_state(SETUP_POLL) {
                        Ok(state) => format!("state {state:?}"),
                        Err(e) => e.to_string(),
                    };
                    return Err(ServeError::setup(
                        errno::MESSAGE,
                        format!("{what} on the control connection while the streams should open"),
                    ));
                }
            },
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(ServeError::Failed("the agent stopped handing over data streams".into()))
            }
        }
    }
    got.sort_by_key(|(seq, _)| *seq);
    let tcp = bulk::settings_of(spec).unwrap_or_default();
    let mut sockets = Vec::with_capacity(count);
    for (_, stream) in got {
        let socket = Socket::from(stream);
        crate::workload::transport::admission::apply_buffers(&socket, &spec.agent)
            .map_err(|e| ServeError::Failed(e.to_string()))?;
        if tcp.nodelay {
            let _ = socket.set_nodelay(true);
        }
        if let Some(mss) = tcp.mss {
            let _ = socket.set_mss(mss);
        }
        if let Some(cc) = &tcp.congestion {
            // iperf3 only warns when the server lacks the algorithm.
            if let Err(e) = socket.set_tcp_congestion(cc.as_bytes()) {
                log::warn!("congestion control '{cc}' not set: {e}");
            }
        }
        let _ = socket.set_read_timeout(None);
        sockets.push(socket);
    }
    Ok(sockets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(json: &str) -> Params {
        Params::from_json(&wire::decode_object(json.as_bytes()).unwrap()).unwrap()
    }

    #[test]
    fn an_iperf3_request_becomes_our_spec() {
        let limits = TestLimits::default();
        let spec = spec_of(
            &params(r#"{"tcp":true,"omit":1,"time":3,"parallel":4,"bidirectional":true,"len":131072,"window":262144}"#),
            &limits,
        )
        .unwrap();
        assert_eq!(spec.workload, "tcp");
        assert_eq!(spec.direction, Direction::Bidir);
        assert_eq!((spec.duration_seconds, spec.omit_seconds, spec.streams), (3.0, 1.0, 4));
        assert_eq!(spec.agent.receive_buffer_bytes, Some(262_144));
        let spec = spec_of(
            &params(r#"{"udp":true,"time":2,"parallel":1,"bandwidth":1000000}"#),
            &limits,
        )
        .unwrap();
        assert_eq!(spec.workload, "udp");
        assert_eq!(spec.message_bytes, DEFAULT_UDP_LEN);
        let spec = spec_of(&params(r#"{"tcp":true,"time":0,"num":1000000,"parallel":1}"#), &limits).unwrap();
        assert_eq!(spec.bytes, Some(1_000_000));
        // UDP counts (issue 42; refused before): a block is one datagram
        // of -l, UDP's default -l when the client sent none.
        let spec = spec_of(&params(r#"{"udp":true,"time":0,"num":5000000,"parallel":2}"#), &limits).unwrap();
        assert_eq!((spec.workload.as_str(), spec.bytes), ("udp", Some(5_000_000)));
        let spec = spec_of(
            &params(r#"{"udp":true,"time":0,"blockcount":1000,"len":1400}"#),
            &limits,
        )
        .unwrap();
        assert_eq!(spec.bytes, Some(1_400_000));
        let spec = spec_of(&params(r#"{"udp":true,"time":0,"blockcount":10}"#), &limits).unwrap();
        assert_eq!(spec.bytes, Some(10 * DEFAULT_UDP_LEN));
    }

    /// What every client sends whatever the user asked is not logged as
    /// an option not acted on; a GSO/GRO request is.
    #[test]
    fn keys_every_client_sends_are_not_listed_as_ignored() {
        let plain = params(
            r#"{"udp":true,"pacing_timer":1000,"gso":0,"gso_dg_size":0,"gso_bf_size":65507,"gro":0,"gro_bf_size":65507}"#,
        );
        assert!(plain.ignored.is_empty(), "{:?}", plain.ignored);
        let gsro = params(
            r#"{"udp":true,"gso":1,"gso_dg_size":1400,"gso_bf_size":64400,"gro":1,"gro_bf_size":65507,"TOS":8}"#,
        );
        assert_eq!(
            gsro.ignored,
            ["gso", "gso_dg_size", "gso_bf_size", "gro", "gro_bf_size", "TOS"]
        );
    }

    /// iperf3 3.16+ sends `"skip_rx_copy": 1` for `--skip-rx-copy`: our
    /// receivers then discard (MSG_TRUNC), recorded as the tcp spec's
    /// `discard`; the key is known, not listed as ignored.
    #[test]
    fn skip_rx_copy_becomes_a_discarding_receive() {
        let limits = TestLimits::default();
        let asked = params(r#"{"tcp":true,"time":2,"parallel":1,"skip_rx_copy":1}"#);
        assert!(asked.skip_rx_copy && asked.ignored.is_empty(), "{asked:?}");
        let tcp = bulk::settings_of(&spec_of(&asked, &limits).unwrap()).unwrap();
        assert!(tcp.discard);
        let plain = bulk::settings_of(&spec_of(&params(r#"{"tcp":true,"time":2,"parallel":1}"#), &limits).unwrap());
        assert!(!plain.unwrap().discard);
        assert!(!params(r#"{"tcp":true,"skip_rx_copy":0}"#).skip_rx_copy);
    }

    #[test]
    fn limits_refuse_with_iperf3_error_numbers() {
        let limits = TestLimits {
            max_duration_seconds: 60.0,
            max_streams: 4,
            max_message_bytes: 1 << 20,
            max_buffer_bytes: 1 << 20,
            max_rate_bits_per_second: None,
            max_test_memory_bytes: crate::protocol::limits::DEFAULT_MAX_TEST_MEMORY,
        };
        let refused = |json: &str| spec_of(&params(json), &limits).unwrap_err();
        assert_eq!(refused(r#"{"tcp":true,"time":61}"#).0, errno::DURATION);
        assert_eq!(refused(r#"{"tcp":true,"time":10,"omit":55}"#).0, errno::DURATION);
        assert_eq!(refused(r#"{"tcp":true,"parallel":5}"#).0, errno::NUM_STREAMS);
        assert_eq!(refused(r#"{"tcp":true,"parallel":0}"#).0, errno::NUM_STREAMS);
        assert_eq!(refused(r#"{"tcp":true,"len":2000000}"#).0, errno::BLOCK_SIZE);
        assert_eq!(refused(r#"{"udp":true,"len":2000000}"#).0, errno::UDP_BLOCK_SIZE);
        assert_eq!(refused(r#"{"tcp":true,"window":4000000}"#).0, errno::BUF_SIZE);
        assert!(refused(r#"{"tcp":true,"parallel":5}"#).1.contains("--max-streams"));
        // Memory has no word of its own in iperf3: "unable to create a new
        // test" (with ENOMEM), not "total required bandwidth".
        let small = TestLimits {
            max_test_memory_bytes: 1 << 20,
            ..limits
        };
        let (n, why) = spec_of(&params(r#"{"tcp":true,"parallel":4,"len":1000000}"#), &small).unwrap_err();
        assert_eq!(n, errno::NEW_TEST, "{why}");
        assert!(why.contains("--max-test-memory"), "{why}");
    }
}
