//! nicbench as an iperf3 client: `nicbench tcp|udp iperf3://HOST[:5201]`
//! runs one trial against an unmodified iperf3 3.x server.
//!
//! The client side of iperf3's state machine (`iperf_client_api.c`): send
//! the cookie; on PARAM_EXCHANGE send the parameters; on CREATE_STREAMS
//! open the streams (each TCP stream opens with the cookie, each UDP stream
//! with the connect datagram); on TEST_START/TEST_RUNNING run; the client
//! decides the end and sends TEST_END; on EXCHANGE_RESULTS send ours and
//! read the server's; on DISPLAY_RESULTS answer IPERF_DONE. Our probes
//! measure this side; the server's figures come from its results.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::auth::{Credentials, Padding};
use super::streams::{self, DataStream, StreamPlan};
use super::wire::{self, Params, Results, MAX_RESULTS_JSON};
use super::{describe_server_error, Control, Cookie, Iperf3Error, State};
use crate::model::{Endpoint, Flow, Party, PeerProtocol, Role, RunResult, TrialResult};
use crate::probe::cpu::ProcStat;
use crate::session::{self, RunOptions, SessionError, Target};
use crate::workload::bulk::{self, BulkSettings};
use crate::workload::transport::Delivery;
use crate::workload::{self, TestSpec};

/// How long to wait for the server at each step outside the test.
const REPLY_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the streams may take to end once the test is over.
const FINISH_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait between attempts when a busy server is retried (--wait).
const BUSY_RETRY: Duration = Duration::from_secs(1);

/// The test in iperf3's terms, and what stays local.
struct Asked {
    params: Params,
    plan: StreamPlan,
    settings: BulkSettings,
}

/// Checks that iperf3 can run `spec` and turns it into iperf3's parameters.
fn translate(spec: &TestSpec) -> Result<Asked, Iperf3Error> {
    let unsupported = |what: &str| Err(Iperf3Error::Unsupported(what.to_string()));
    let Some(transport) = workload::bulk_transport(&spec.workload) else {
        return Err(Iperf3Error::Unsupported(format!(
            "the '{}' workload has no iperf3 equivalent; iperf3 servers run tcp and udp",
            spec.workload
        )));
    };
    let settings = bulk::settings_of(spec).map_err(|e| Iperf3Error::Unsupported(e.to_string()))?;
    if let Some(other) = workload::transport_of(spec).filter(|&p| p != transport) {
        return Err(Iperf3Error::Unsupported(format!(
            "it runs over {}, and iperf3 runs plain TCP and UDP \
             (drop --transport/--mptcp, or use nicbench's own agent)",
            other.label()
        )));
    }
    if settings.zerocopy {
        return unsupported("-Z/--zerocopy is not available with iperf3 (use nicbench's own agent)");
    }
    if settings.discard && spec.direction != crate::model::Direction::Reverse {
        return unsupported(
            "--discard against an iperf3 server only with -R, where nicbench receives and discards: \
             iperf3 3.16+ servers discard when asked, but do not report whether they did \
             (use nicbench's own agent, which does)",
        );
    }
    if settings.gso || settings.gro {
        return unsupported("--gso/--gro are not available with iperf3's datagram format");
    }
    if transport.is_datagram() && spec.omit_seconds > 0.0 {
        return unsupported("-O/--omit with UDP: iperf3 counts omitted datagrams in its loss; use TCP or no -O");
    }
    let rate = settings.rate_bits_per_second;
    if spec.bytes.is_some() && spec.direction != crate::model::Direction::Forward {
        return unsupported("-n/--bytes with -R or --bidir: iperf3 then counts the server's bytes; use -t");
    }
    if spec.duration_seconds.fract() != 0.0 || spec.omit_seconds.fract() != 0.0 {
        return unsupported("-t and -O must be whole seconds for iperf3");
    }
    if spec.streams > wire::MAX_STREAMS {
        return unsupported("iperf3 servers accept at most 128 streams (-P)");
    }
    let window = spec.agent.send_buffer_bytes.or(spec.agent.receive_buffer_bytes);
    let params = Params {
        transport,
        omit_seconds: spec.omit_seconds as u64,
        time_seconds: spec.duration_seconds as u64,
        bytes: spec.bytes.unwrap_or(0),
        parallel: spec.streams,
        reverse: spec.direction == crate::model::Direction::Reverse,
        bidirectional: spec.direction == crate::model::Direction::Bidir,
        window,
        len: Some(spec.message_bytes),
        bandwidth: rate,
        mss: settings.mss.map(u64::from),
        nodelay: settings.nodelay,
        congestion: settings.congestion.clone(),
        // As iperf3 --skip-rx-copy sends it; with -R only our end receives.
        skip_rx_copy: settings.discard,
        client_version: Some(format!("nicbench {}", env!("CARGO_PKG_VERSION"))),
        ..Params::default()
    };
    let plan = StreamPlan {
        transport,
        message_bytes: spec.message_bytes as usize,
        rate,
        counters_64bit: false,
        bytes_total: spec.bytes,
        // With -R (the only direction it is allowed in): our receivers.
        discard: settings.discard,
    };
    Ok(Asked { params, plan, settings })
}

fn wire_error(step: &'static str) -> impl FnOnce(wire::WireError) -> Iperf3Error {
    Iperf3Error::wire(step)
}

fn io_error(step: &'static str) -> impl FnOnce(std::io::Error) -> Iperf3Error {
    move |e| Iperf3Error::Wire {
        step,
        source: wire::WireError::Io(e),
    }
}

/// Connects the control channel and waits for PARAM_EXCHANGE, retrying a
/// busy server until `target.wait` has passed.
fn open_control(target: &Target, cookie: &Cookie) -> Result<(Control, SocketAddr), SessionError> {
    let give_up = Instant::now() + target.wait;
    loop {
        let stream = session::connect(target).map_err(|e| match e {
            SessionError::Refused { addr, port } => Iperf3Error::Refused { addr, port }.into(),
            other => other,
        })?;
        let addr = stream.peer_addr().map_err(io_error("the control connection"))?;
        let mut control = Control::new(stream);
        std::io::Write::write_all(&mut control.stream(), &cookie.0).map_err(io_error("sending the cookie"))?;
        let state = control.read_state(REPLY_TIMEOUT).map_err(|e| Iperf3Error::NotIperf3 {
            addr,
            detail: e.to_string(),
        })?;
        match state {
            State::ParamExchange => return Ok((control, addr)),
            State::AccessDenied if Instant::now() + BUSY_RETRY < give_up => {
                log::warn!("the iperf3 server at {addr} is busy; trying again (--wait)");
                std::thread::sleep(BUSY_RETRY);
            }
            State::AccessDenied => return Err(Iperf3Error::Busy { addr }.into()),
            State::ServerError => return Err(server_error(&mut control, None).into()),
            other => {
                return Err(Iperf3Error::NotIperf3 {
                    addr,
                    detail: format!("its first state was {other:?}, not PARAM_EXCHANGE"),
                }
                .into())
            }
        }
    }
}

/// Reads the error numbers after SERVER_ERROR (3.12 sends one for an
/// authentication failure and two otherwise). `auth`: the credentials we
/// sent, if any, to tell "denied" from "required".
fn server_error(control: &mut Control, auth: Option<&Credentials>) -> Iperf3Error {
    let mut first = [0u8; 4];
    if control.read_exact(&mut first, REPLY_TIMEOUT).is_err() {
        return Iperf3Error::ServerError("the server reported an error and closed".into());
    }
    let i_errno = i32::from_be_bytes(first);
    let mut second = [0u8; 4];
    let errno = match control.read_exact(&mut second, Duration::from_secs(2)) {
        Ok(()) => i32::from_be_bytes(second),
        Err(_) => 0,
    };
    if i_errno == wire::errno::AUTH_TEST {
        if let Ok(addr) = control.stream().peer_addr() {
            return match auth {
                None => Iperf3Error::AuthRequired { addr },
                Some(c) => Iperf3Error::AuthDenied {
                    addr,
                    username: c.username().to_string(),
                    hint: match c.padding() {
                        Padding::Oaep => {
                            "; and the padding: a server older than 3.17 (Debian 12 has 3.12) reads only \
                             PKCS#1 v1.5, add --iperf3-use-pkcs1-padding for it"
                        }
                        Padding::Pkcs1v15 => {
                            "; and the padding: a server of 3.17 or later reads PKCS#1 v1.5 only when started \
                             with --use-pkcs1-padding, else drop --iperf3-use-pkcs1-padding (OAEP)"
                        }
                    },
                },
            };
        }
    }
    Iperf3Error::ServerError(describe_server_error(i_errno, errno))
}

/// Opens every data stream in iperf3's order: the client's sending
/// streams first, then its receiving ones.
fn open_streams(
    spec: &TestSpec,
    asked: &Asked,
    server: SocketAddr,
    bind: Option<IpAddr>,
    cookie: &Cookie,
) -> Result<Vec<DataStream>, Iperf3Error> {
    let flows = spec.flows();
    let ids = streams::peer_ids(flows.len());
    let mut opened = Vec::with_capacity(flows.len());
    for ((id, flow), peer_id) in flows.into_iter().zip(ids) {
        let role = if flow.sender() == Party::Client {
            Role::Sender
        } else {
            Role::Receiver
        };
        let setup = |what: &str, e: std::io::Error| Iperf3Error::Streams(format!("stream {id}: {what}: {e}"));
        let domain = if server.is_ipv4() { Domain::IPV4 } else { Domain::IPV6 };
        let socket = match asked.plan.transport.delivery() {
            Delivery::Stream => {
                let (kind, protocol) = asked.plan.transport.socket();
                let s = Socket::new(domain, kind, protocol).map_err(|e| setup("socket", e))?;
                configure(&s, spec, &asked.settings, role).map_err(|e| Iperf3Error::Streams(e.to_string()))?;
                if let Some(ip) = bind {
                    s.bind(&SocketAddr::new(ip, 0).into()).map_err(|e| setup("bind", e))?;
                }
                s.connect_timeout(&SockAddr::from(server), REPLY_TIMEOUT)
                    .map_err(|e| setup("connect", e))?;
                std::io::Write::write_all(&mut &s, &cookie.0).map_err(|e| setup("sending the cookie", e))?;
                s
            }
            Delivery::Datagram => {
                let s = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP)).map_err(|e| setup("socket", e))?;
                crate::workload::transport::admission::apply_buffers(&s, &spec.client)
                    .map_err(|e| Iperf3Error::Streams(e.to_string()))?;
                if role == Role::Receiver && spec.client.receive_buffer_bytes.is_none() {
                    let _ = s.set_recv_buffer_size(crate::workload::transport::udp::loops::DEFAULT_RECEIVE_BUFFER);
                }
                let local = SocketAddr::new(
                    bind.unwrap_or(if server.is_ipv4() {
                        IpAddr::from([0u8; 4])
                    } else {
                        IpAddr::from([0u16; 8])
                    }),
                    0,
                );
                s.bind(&local.into()).map_err(|e| setup("bind", e))?;
                s.connect(&server.into()).map_err(|e| setup("connect", e))?;
                super::udp::client_handshake(&s, REPLY_TIMEOUT).map_err(|e| setup("UDP connect handshake", e))?;
                s
            }
        };
        opened.push(DataStream {
            id,
            peer_id,
            role,
            socket,
        });
    }
    Ok(opened)
}

/// Buffers, MSS, NODELAY and congestion control on a TCP data socket.
fn configure(socket: &Socket, spec: &TestSpec, tcp: &BulkSettings, _role: Role) -> Result<(), workload::WorkloadError> {
    crate::workload::transport::admission::apply_buffers(socket, &spec.client)?;
    if let Some(mss) = tcp.mss {
        socket
            .set_mss(mss)
            .map_err(workload::WorkloadError::io(format!("setting TCP_MAXSEG to {mss}")))?;
    }
    if tcp.nodelay {
        socket
            .set_nodelay(true)
            .map_err(workload::WorkloadError::io("setting TCP_NODELAY"))?;
    }
    if let Some(cc) = &tcp.congestion {
        socket
            .set_tcp_congestion(cc.as_bytes())
            .map_err(workload::WorkloadError::io(format!(
                "setting congestion control '{cc}'"
            )))?;
    }
    Ok(())
}

/// Waits for a state, turning the server's refusals into errors.
fn expect(control: &mut Control, want: State, step: &'static str, timeout: Duration) -> Result<(), Iperf3Error> {
    expect_as(control, want, step, timeout, None)
}

/// [`expect`], knowing which credentials were sent.
fn expect_as(
    control: &mut Control,
    want: State,
    step: &'static str,
    timeout: Duration,
    auth: Option<&Credentials>,
) -> Result<(), Iperf3Error> {
    match control.read_state(timeout).map_err(wire_error(step))? {
        s if s == want => Ok(()),
        State::ServerError => Err(server_error(control, auth)),
        State::AccessDenied => Err(Iperf3Error::ServerError("access denied".into())),
        State::ServerTerminate => Err(Iperf3Error::ServerTerminated),
        got => Err(Iperf3Error::UnexpectedState { expected: step, got }),
    }
}

/// Runs one trial of `spec` against the iperf3 server at `target`, with
/// `auth` for a server that requires RSA authentication.
pub fn run(
    target: &Target,
    auth: Option<&Credentials>,
    spec: &TestSpec,
    options: RunOptions,
) -> Result<RunResult, SessionError> {
    let asked = translate(spec)?;
    let w = workload::find(&spec.workload)?;
    w.validate(spec)?;
    let started_at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let cookie = Cookie::random();
    let (mut control, server) = open_control(target, &cookie)?;
    let client_addr = control
        .stream()
        .local_addr()
        .map_err(io_error("the control connection"))?;
    let mut params = asked.params.clone();
    if let Some(credentials) = auth {
        params.authtoken = Some(credentials.token_now().map_err(Iperf3Error::from)?);
    }
    control
        .send_json(&params.to_json())
        .map_err(io_error("sending the parameters"))?;
    expect_as(
        &mut control,
        State::CreateStreams,
        "CREATE_STREAMS",
        REPLY_TIMEOUT,
        auth,
    )?;
    let data = open_streams(spec, &asked, server, target.bind, &cookie)?;
    let peer_streams = streams::peer_ends(&data);
    expect(&mut control, State::TestStart, "TEST_START", REPLY_TIMEOUT)?;
    expect(&mut control, State::TestRunning, "TEST_RUNNING", REPLY_TIMEOUT)?;

    let omit = Duration::from_secs_f64(spec.omit_seconds);
    let duration = spec
        .bytes
        .is_none()
        .then(|| Duration::from_secs_f64(spec.duration_seconds));
    let side = streams::start(
        data,
        asked.plan,
        omit,
        duration,
        spec.client.cpus.clone(),
        options.on_interval,
        &ProcStat,
    )
    .map_err(|e| Iperf3Error::Streams(e.to_string()))?;
    let stopped = await_streams_done(&mut control, &side, omit, duration, options.interrupted)?;
    let side_seconds = side.start.elapsed().as_secs_f64();
    side.stop_senders();
    control
        .send_state(State::TestEnd)
        .map_err(io_error("sending TEST_END"))?;
    expect(&mut control, State::ExchangeResults, "EXCHANGE_RESULTS", REPLY_TIMEOUT)?;
    let finished = side
        .finish(Party::Client, FINISH_TIMEOUT, &ProcStat)
        .map_err(Iperf3Error::Cpu)?;
    control
        .send_json(&finished.to_results(asked.plan.transport).to_json())
        .map_err(io_error("sending our results"))?;
    let theirs = control
        .read_json(MAX_RESULTS_JSON, REPLY_TIMEOUT)
        .and_then(|m| Results::from_json(&m))
        .map_err(wire_error("the server's results"))?;
    expect(&mut control, State::DisplayResults, "DISPLAY_RESULTS", REPLY_TIMEOUT)?;
    let _ = control.send_state(State::IperfDone);

    let local = finished.report;
    let fallback = local.streams.iter().map(|e| e.seconds).fold(0.0, f64::max);
    let (agent_report, raw) = streams::peer_report(
        Party::Agent,
        &theirs,
        &peer_streams,
        asked.plan.transport,
        spec.message_bytes,
        fallback,
    )
    .map_err(Iperf3Error::BadResults)?;
    first_stream_error(&local)?;
    let flows: Vec<(u32, Flow)> = spec.flows();
    let mut result = TrialResult::merge(options.trial, &flows, local, agent_report)
        .map_err(|e| Iperf3Error::BadResults(e.to_string()))?;
    workload::results_of(&spec.workload).summarize(&mut result);
    result.interruption = stopped.map(|reason| crate::model::trial::Interruption {
        by: Party::Client,
        reason,
        elapsed_seconds: side_seconds,
        planned_seconds: spec.bytes.is_none().then(|| spec.expected_seconds()),
    });
    let agent = Endpoint {
        address: server.to_string(),
        facts: Default::default(),
    };
    let protocol = server_protocol(&theirs, raw);
    Ok(session::one_trial_run(
        spec,
        started_at,
        client_addr,
        agent,
        result,
        Some(protocol),
    ))
}

/// While the test runs: watches the control connection (the server may
/// end or refuse the test), stops the senders when the user stops the
/// test, and returns once the senders are done (or, with none, the time
/// is up); why the user stopped it, if they did.
fn await_streams_done(
    control: &mut Control,
    side: &streams::RunningSide,
    omit: Duration,
    duration: Option<Duration>,
    interrupted: &(dyn Fn() -> Option<String> + Sync),
) -> Result<Option<String>, SessionError> {
    let deadline = duration.map(|d| side.start + omit + d);
    // Why the user stopped the test early, if they did (Ctrl-C, SIGTERM).
    let mut stopped: Option<String> = None;
    let hard_deadline = side.start
        + omit
        + duration.unwrap_or(Duration::from_secs_f64(crate::model::spec::MAX_DURATION_SECONDS))
        + crate::side_runner::GRACE;
    loop {
        match control.poll_state(Duration::from_millis(20)) {
            Ok(None) => {}
            Ok(Some(State::ServerTerminate)) => return Err(Iperf3Error::ServerTerminated.into()),
            Ok(Some(State::ServerError)) => return Err(server_error(control, None).into()),
            Ok(Some(got)) => {
                return Err(Iperf3Error::UnexpectedState {
                    expected: "nothing while the test runs",
                    got,
                }
                .into())
            }
            Err(e) => return Err(Iperf3Error::wire("the control connection during the test")(e).into()),
        }
        if stopped.is_none() {
            stopped = interrupted();
        }
        let interrupted = stopped.is_some();
        if interrupted {
            side.stop_senders();
        }
        let now = Instant::now();
        let done = if side.senders > 0 {
            side.senders_left.load(std::sync::atomic::Ordering::Relaxed) == 0
        } else {
            interrupted || deadline.is_some_and(|d| now >= d)
        };
        if done {
            return Ok(stopped);
        }
        if now > hard_deadline {
            return Err(SessionError::Trial(crate::side_runner::TrialError::Hung(
                crate::side_runner::GRACE.as_secs_f64(),
            )));
        }
    }
}

/// A stream of ours that failed fails the trial, with its message.
fn first_stream_error(local: &crate::model::SideReport) -> Result<(), SessionError> {
    for end in &local.streams {
        if let Some(message) = &end.error {
            return Err(Iperf3Error::Stream {
                stream_id: end.stream_id,
                role: if end.role == Role::Sender { "sender" } else { "receiver" },
                message: message.clone(),
            }
            .into());
        }
    }
    Ok(())
}

/// The server's own view of the test, kept beside our run.
fn server_protocol(theirs: &Results, raw: Vec<crate::model::PeerStream>) -> PeerProtocol {
    PeerProtocol {
        protocol: "iperf3".into(),
        peer_role: "server".into(),
        // iperf3 servers do not announce their version.
        peer_version: None,
        peer_cpu_util_total_percent: theirs.cpu_util_total,
        peer_cpu_util_user_percent: theirs.cpu_util_user,
        peer_cpu_util_system_percent: theirs.cpu_util_system,
        peer_congestion_used: theirs.congestion_used.clone(),
        peer_streams: raw,
    }
}
