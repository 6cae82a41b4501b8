//! `sweep`: NetPIPE-style message-size sweeps. The client drives a list of
//! sizes (powers of two with +-p perturbations, or an explicit list) over
//! one data connection; for each size it tells the agent what to do with a
//! small header ([`wire`]) and times batches of exchanges: ping-pong
//! (latency = round trip / 2, bandwidth = size / (round trip / 2)) or
//! streaming (messages back to back, acknowledged per batch). Over TCP by
//! default, or UDP ping-pong for the sizes that fit a datagram. The number
//! of exchanges per size adapts so each size is timed for about
//! `point_seconds`, never fewer than seven ([`points::repetitions`]),
//! split over `passes` trips through the whole list (two by default, some
//! seconds apart); the best batch of all passes is the point's figure, with
//! the median and slowest batch as its spread, and a wide point runs again
//! while the sweep's budget lasts. Both
//! ends run on the shared stream runner; on one host, with no cores given,
//! they get a core each. Results travel as the client end's
//! [`result::SweepResult`].

pub mod args;
pub mod command;
mod engine;
pub mod points;
pub mod result;
pub mod text;
pub mod wire;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use socket2::Socket;

use super::runner::{StreamContext, StreamTask};
use super::transport::admission;
use super::transport::encryption::Encryption;
use super::transport::stream::{ConnectOptions, Held, Serving};
use super::transport::{Delivery, Proto};
use super::{
    Aborter, AgentNet, AgentSide, ClientNet, Direction, RunControl, Side, SideOptions, SideOutcome, SpecError,
    TestSpec, Workload, WorkloadError,
};
use super::{
    Better, ChartData, ChartKind, ChartViews, Figure, Figures, Metric, ResultKind, Stored, TextView, VerdictQuestions,
};
use crate::model::spec::{out_of_range, MAX_MESSAGE_BYTES};
use crate::model::{Flow, Role, SocketBuffers, TrialResult};
use crate::protocol::limits::OfferedRate;
use crate::units::{Rate, Size};
use result::SweepResult;
use std::io::{self, Write};

/// Largest UDP payload in one IPv4 datagram (65535 - 20 - 8); UDP sweeps
/// skip larger sizes.
pub const MAX_DATAGRAM_BYTES: u64 = 65_507;
/// Most sizes in one sweep.
pub const MAX_POINTS: usize = 10_000;
/// How long each size is timed by default, over all its passes.
pub const DEFAULT_POINT_SECONDS: f64 = 0.13;
/// Passes over the sizes by default: the second pass comes seconds after
/// the first, so a slow stretch of the host (seconds long on a shared
/// machine) rarely decides a point alone.
pub const DEFAULT_PASSES: u32 = 2;
/// Most passes.
pub const MAX_PASSES: u32 = 10;

/// Ping-pong or streaming.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Send a message, wait for it to come back (latency = round trip / 2).
    #[default]
    PingPong,
    /// Messages back to back in one direction, acknowledged per batch.
    Stream,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::PingPong => "ping_pong",
            Mode::Stream => "stream",
        }
    }
}

/// Parameters of the `sweep` workload (in `TestSpec::params`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SweepParams {
    pub min_bytes: u64,
    pub max_bytes: u64,
    /// Sizes this many bytes below and above each power of two are run too.
    pub perturbation_bytes: u64,
    /// An explicit list of sizes; when not empty, min/max/perturbation are unused.
    pub sizes_bytes: Vec<u64>,
    pub mode: Mode,
    /// What the measured messages travel over.
    pub transport: Proto,
    /// About how long each size is timed, over all its passes.
    pub point_seconds: f64,
    /// How many times the sweep goes through its sizes (`--passes`); a
    /// size's figure is its best batch over all of them. None: one pass
    /// (runs stored before passes existed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passes: Option<u32>,
    /// Line rate to compare the bandwidth with (`--link-speed`).
    pub link_speed_bits_per_second: Option<f64>,
    /// Over TLS or QUIC (`--transport tls`, `--transport quic`): the cipher
    /// suite and how the client trusts the agent; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<Encryption>,
}

impl Default for SweepParams {
    fn default() -> SweepParams {
        SweepParams {
            min_bytes: 1,
            max_bytes: 8 << 20,
            perturbation_bytes: 3,
            sizes_bytes: Vec::new(),
            mode: Mode::PingPong,
            transport: Proto::default(),
            point_seconds: DEFAULT_POINT_SECONDS,
            passes: Some(DEFAULT_PASSES),
            link_speed_bits_per_second: None,
            tls: None,
        }
    }
}

impl SweepParams {
    /// The sizes to run, and those asked for that do not fit the transport.
    pub fn sizes(&self) -> (Vec<u64>, Vec<u64>) {
        let all = if self.sizes_bytes.is_empty() {
            points::size_list(self.min_bytes, self.max_bytes, self.perturbation_bytes)
        } else {
            let mut list = self.sizes_bytes.clone();
            list.sort_unstable();
            list.dedup();
            list
        };
        match self.transport.delivery() {
            Delivery::Stream => (all, Vec::new()),
            Delivery::Datagram => all.into_iter().partition(|&s| s <= MAX_DATAGRAM_BYTES),
        }
    }

    /// The transport of the sweep's connection: the measured one when it
    /// is a stream; over datagrams, the default one (TCP) carries the
    /// sizes and the results.
    pub fn connection(&self) -> Proto {
        match self.transport.delivery() {
            Delivery::Stream => self.transport,
            Delivery::Datagram => Proto::default(),
        }
    }

    /// Whether the messages are sealed: over a transport with a TLS
    /// handshake (TLS, QUIC).
    pub fn encrypted(&self) -> bool {
        self.transport.tls_handshake()
    }

    /// The TLS options of a sweep over TLS or QUIC (their defaults where
    /// the spec left them out), None over any other transport.
    pub fn tls(&self) -> Option<Encryption> {
        self.encrypted().then(|| self.tls.clone().unwrap_or_default())
    }

    /// How many passes the sweep makes over its sizes.
    pub fn passes(&self) -> u32 {
        self.passes.unwrap_or(1)
    }

    /// The largest size that runs (buffers are this big).
    pub fn largest(&self) -> u64 {
        self.sizes().0.last().copied().unwrap_or(1)
    }

    fn validate(&self) -> Result<(), SpecError> {
        let max = MAX_MESSAGE_BYTES;
        let range = format!("1 B..={} MiB", max >> 20);
        if self.sizes_bytes.is_empty() {
            if !(1..=max).contains(&self.min_bytes) {
                return Err(out_of_range("--min", range, self.min_bytes));
            }
            if !(1..=max).contains(&self.max_bytes) {
                return Err(out_of_range("--max", range, self.max_bytes));
            }
            if self.min_bytes > self.max_bytes {
                return Err(SpecError::Invalid(format!(
                    "--min ({} B) is larger than --max ({} B); swap them",
                    self.min_bytes, self.max_bytes
                )));
            }
            if self.perturbation_bytes > max {
                return Err(out_of_range("--perturbation", "0..=64 MiB", self.perturbation_bytes));
            }
        } else if let Some(bad) = self.sizes_bytes.iter().find(|s| !(1..=max).contains(*s)) {
            return Err(out_of_range("--sizes", range, bad));
        }
        let (run, _) = self.sizes();
        if run.len() > MAX_POINTS {
            return Err(out_of_range(
                "--sizes",
                format!("at most {MAX_POINTS} sizes"),
                run.len(),
            ));
        }
        if run.is_empty() {
            return Err(SpecError::Invalid(format!(
                "no size fits a UDP datagram (at most {MAX_DATAGRAM_BYTES} B); lower --min or use TCP"
            )));
        }
        if !(0.001..=60.0).contains(&self.point_seconds) {
            return Err(out_of_range(
                "--point-time",
                "1 ms..=60 s",
                format!("{} s", self.point_seconds),
            ));
        }
        if !(1..=MAX_PASSES).contains(&self.passes()) {
            return Err(out_of_range("--passes", format!("1..={MAX_PASSES}"), self.passes()));
        }
        self.transport
            .available()
            .map_err(|why| SpecError::Invalid(format!("--transport {}: {why}", self.transport)))?;
        let asked = crate::workload::transport::Asked {
            chosen_by: "--transport",
            options: Vec::new(),
            tls: self.tls.as_ref(),
        };
        self.transport.refuse(&asked).map_err(SpecError::Invalid)?;
        if self.transport.is_datagram() && self.mode == Mode::Stream {
            return Err(SpecError::Invalid(
                "--mode stream runs over a connection (tcp, tls, quic, mptcp); over UDP the sweep is ping-pong \
                 (drop --udp or --mode stream)"
                    .into(),
            ));
        }
        if let Some(speed) = self.link_speed_bits_per_second {
            if !(speed.is_finite() && speed > 0.0) {
                return Err(out_of_range("--link-speed", "more than 0 bit/s", speed));
            }
        }
        Ok(())
    }
}

/// The `sweep` workload.
pub struct Sweep;

/// How sweep results read: the peak of the curve, and the table of sizes.
pub struct SweepResults;

/// The sweeps of a trial's streams of one direction (or all).
fn sweeps(trial: &TrialResult, flow: Option<Flow>) -> Vec<SweepResult> {
    trial
        .streams
        .iter()
        .filter(|s| flow.map_or(true, |f| s.flow == f))
        .filter_map(|s| s.sender.extras.get(result::KEY))
        .collect()
}

/// The sweep's peak bandwidth, as its first stream's sender records it.
const PEAK: Metric = Metric {
    name: "sweep_peak_bits_per_second",
    option: "peak",
    label: "sweep peak bandwidth",
    unit: "bit/s",
    pointer: "/streams/0/sender/sweep/summary/peak_bits_per_second",
    divisor: 1.0,
    better: Better::Higher,
};

/// The size at which the sweep reached half its peak bandwidth (n½).
const HALF_PEAK_SIZE: Metric = Metric {
    name: "sweep_half_peak_size_bytes",
    option: "half-peak-size",
    label: "sweep n\u{bd} (size at half the peak)",
    unit: "B",
    pointer: "/streams/0/sender/sweep/summary/half_peak_size_bytes",
    divisor: 1.0,
    better: Better::Lower,
};

/// The latency of the sweep's smallest message (1 B unless asked otherwise).
const SMALL_LATENCY: Metric = Metric {
    name: "sweep_small_message_latency_us",
    option: "small-latency",
    label: "sweep latency at the smallest size",
    unit: "us",
    pointer: "/streams/0/sender/sweep/summary/small_message_latency_us",
    divisor: 1.0,
    better: Better::Lower,
};

impl Figures for SweepResults {
    fn headline(&self) -> Metric {
        PEAK
    }

    /// Its peak, n½ and small-message latency: the average bit rate of a
    /// sweep mixes every size and says nothing.
    fn figures(&self) -> &'static [Metric] {
        const FIGURES: [Metric; 7] = [
            PEAK,
            HALF_PEAK_SIZE,
            SMALL_LATENCY,
            Metric::CLIENT_CPU,
            Metric::AGENT_CPU,
            Metric::HANDSHAKE,
            Metric::AGENT_HANDSHAKE,
        ];
        &FIGURES
    }

    /// Over TLS and QUIC, each end's handshake time in `sum.tls`.
    fn summarize(&self, trial: &mut TrialResult) {
        crate::workload::transport::summarize(trial);
    }

    /// The peak of the sizes a wire of the line rate could carry, read
    /// again from the points: a summary saved before 2026-12-06 counted
    /// sizes a shaper's bucket passed above it.
    fn figure_of_merit(&self, trial: &TrialResult) -> Figure {
        let peak = sweeps(trial, None)
            .iter()
            .map(|s| match s.points.is_empty() {
                true => s.summary.peak_bits_per_second,
                false => points::summarize(&s.points, s.link_speed_bits_per_second).peak_bits_per_second,
            })
            .fold(0.0, f64::max);
        Figure {
            metric: "sweep_peak_bits_per_second",
            unit: "bit/s",
            value: peak,
            qualifier: "peak",
        }
    }
}

impl Stored for SweepResults {
    fn stored_columns(&self) -> &'static [Metric] {
        &[PEAK]
    }

    fn case(&self, spec: &TestSpec) -> Vec<super::CasePart> {
        let p: SweepParams = spec.params().unwrap_or_default();
        let mut mode = match p.mode {
            Mode::PingPong => "sweep ping-pong".to_string(),
            Mode::Stream => "sweep stream".to_string(),
        };
        if !p.transport.is_tcp() {
            mode = format!("{mode} {}", p.transport.label());
        }
        if let Some(t) = p.tls() {
            mode = format!("{mode} {}", t.cipher);
        }
        let sizes = match p.sizes_bytes.as_slice() {
            [] => format!(
                "{} to {}",
                super::case::size(p.min_bytes),
                super::case::size(p.max_bytes)
            ),
            list => format!("{} sizes", list.len()),
        };
        let mut parts = vec![("workload", mode), ("sizes", sizes)];
        parts.extend(super::case::window(spec));
        parts
    }
}

impl VerdictQuestions for SweepResults {
    fn unseen_bytes(&self, trial: &TrialResult) -> u64 {
        // Ping-pong: every message comes back as its echo.
        trial
            .streams
            .iter()
            .filter(|s| {
                s.sender
                    .extras
                    .get::<result::SweepResult>(result::KEY)
                    .is_some_and(|r| r.mode == Mode::PingPong.as_str())
            })
            .map(|s| s.sender.bytes + s.sender.warmup_bytes)
            .sum()
    }

    fn line_rate_applies(&self) -> bool {
        // A sweep's average rate is no throughput; its peak has its own
        // share of the line rate in the summary.
        false
    }

    fn note_link(&self, trial: &mut TrialResult, _spec: &TestSpec, link: &crate::model::LinkUsed) {
        for stream in &mut trial.streams {
            for end in [&mut stream.sender, &mut stream.receiver] {
                let Some(mut sweep) = end.extras.get::<result::SweepResult>(result::KEY) else {
                    continue;
                };
                // --link-speed, when given, is the sweep's own already.
                if sweep.link_speed_bits_per_second.is_none() {
                    sweep.link_speed_bits_per_second = Some(link.bits_per_second);
                    sweep.link_speed_source = Some(link.source.into());
                    sweep.shaper_burst_bytes = link.burst_bytes;
                    sweep.shaper_name = link.shaper_name.clone();
                    sweep.summary = points::summarize(&sweep.points, sweep.link_speed_bits_per_second);
                    end.extras.set(result::KEY, &sweep);
                }
            }
        }
    }
}

impl TextView for SweepResults {
    fn sum_cells(&self, trial: &TrialResult, flow: Flow) -> Option<String> {
        let sweeps = sweeps(trial, Some(flow));
        let best = sweeps.iter().max_by(|a, b| {
            a.summary
                .peak_bits_per_second
                .total_cmp(&b.summary.peak_bits_per_second)
        })?;
        Some(format!(
            "peak {} at {}; {} sizes, smallest {} in {:.2} us",
            Rate(best.summary.peak_bits_per_second),
            Size(best.summary.peak_size_bytes),
            best.points.len(),
            Size(best.summary.small_message_size_bytes),
            best.summary.small_message_latency_us
        ))
    }

    /// The table of sizes; over TLS and QUIC the handshake, and QUIC's
    /// own figures of the connection.
    fn write_details(&self, trial: &TrialResult, out: &mut dyn Write) -> io::Result<()> {
        for sweep in sweeps(trial, None) {
            text::table(&sweep, out)?;
        }
        crate::workload::transport::write_details(trial, crate::workload::transport::Details::Connection, out)
    }
}

impl ChartViews for SweepResults {
    fn chart_kinds(&self) -> &'static [ChartKind] {
        &[ChartKind {
            name: "sweep",
            help: "Bandwidth and latency against message size (log x), one line per sweep run",
            data: ChartData::SizeCurve { key: result::KEY },
            none_found: "none is a sweep with points: add --workload sweep or change the filters",
        }]
    }
}

impl Workload for Sweep {
    fn results(&self) -> &'static dyn ResultKind {
        &SweepResults
    }

    fn transport(&self, spec: &TestSpec) -> Option<Proto> {
        spec.params::<SweepParams>().ok().map(|p| p.connection())
    }

    fn name(&self) -> &'static str {
        "sweep"
    }

    fn offered_rate(&self, _spec: &TestSpec) -> OfferedRate {
        // Each size as fast as it goes.
        OfferedRate::Unlimited
    }

    fn command_line(&self) -> &'static dyn super::args::CommandLine {
        // A sweep runs every size itself: no message size to give.
        static LINE: super::args::ArgsOf<args::SweepOptions> = super::args::ArgsOf::new(|_| None);
        &LINE
    }

    /// A sweep's length follows from its sizes and how fast each one goes.
    fn known_duration_seconds(&self, _spec: &TestSpec) -> Option<f64> {
        None
    }

    /// Every size's point time, plus its probe; never past the limit.
    fn estimated_seconds(&self, spec: &TestSpec) -> f64 {
        let (sizes, point_seconds) = spec
            .params::<SweepParams>()
            .map(|p| (p.sizes().0.len() as f64, p.point_seconds))
            .unwrap_or((100.0, 0.1));
        (sizes * point_seconds * 1.3).min(spec.duration_seconds)
    }

    fn validate(&self, spec: &TestSpec) -> Result<(), SpecError> {
        spec.validate_common()?;
        if spec.streams != 1 || spec.direction != Direction::Forward {
            return Err(SpecError::Invalid(
                "a sweep runs over one connection driven by the client; -P/--parallel, -R/--reverse and \
                 --bidir do not apply"
                    .into(),
            ));
        }
        if spec.bytes.is_some() {
            return Err(SpecError::Invalid("-n/--bytes does not apply to a sweep".into()));
        }
        // Refused here too, not only by the client's options: a spec from
        // another client must not ask for what a sweep silently ignores.
        if spec.omit_seconds != 0.0 {
            return Err(SpecError::Invalid(format!(
                "-O/--omit (omit_seconds {}) does not apply to a sweep: every size starts with an untimed \
                 warm-up exchange",
                spec.omit_seconds
            )));
        }
        if spec.interval_seconds != 1.0 {
            return Err(SpecError::Invalid(format!(
                "-i/--interval (interval_seconds {}) does not apply to a sweep: it reports one line per size \
                 instead; leave it at 1 s",
                spec.interval_seconds
            )));
        }
        let params: SweepParams = spec.params()?;
        params.validate()?;
        if spec.message_bytes < params.largest() {
            return Err(SpecError::Invalid(format!(
                "the message size of the spec ({} B) is below the largest sweep size ({} B)",
                spec.message_bytes,
                params.largest()
            )));
        }
        Ok(())
    }

    fn supports_links(&self) -> bool {
        false
    }

    fn agent_side(&self, spec: &TestSpec, net: &AgentNet) -> Result<Box<dyn AgentSide>, WorkloadError> {
        let params: SweepParams = spec.params()?;
        TestSpec::validate_cpus(&spec.agent.cpus, "remote CPU affinity")?;
        let configure = configure(&spec.agent, params.connection());
        let options = ConnectOptions::new(&spec.agent, &configure, params.tls.as_ref());
        let serving = params.connection().serve(net, &options, 1)?;
        let udp = match params.transport.delivery() {
            Delivery::Stream => None,
            Delivery::Datagram => Some(UdpSocket::bind(SocketAddr::new(net.local_ip, 0)).map_err(
                WorkloadError::io(format!("binding the UDP data socket on {}", net.local_ip)),
            )?),
        };
        Ok(Box::new(SweepAgent {
            proto: params.connection(),
            serving,
            agent_options: spec.agent.clone(),
            nobody_pinned: spec.client.cpus.is_empty() && spec.agent.cpus.is_empty(),
            udp,
            net: net.clone(),
            max_size: params.largest(),
        }))
    }

    fn client_side(&self, spec: &TestSpec, net: &ClientNet) -> Result<Box<dyn Side>, WorkloadError> {
        let params: SweepParams = spec.params()?;
        TestSpec::validate_cpus(&spec.client.cpus, "local CPU affinity (-A)")?;
        let port = |i: usize| {
            net.data_ports
                .get(i)
                .copied()
                .ok_or_else(|| WorkloadError::Setup("the agent named too few data ports for the sweep".into()))
        };
        let configure = configure(&spec.client, params.connection());
        let options = ConnectOptions::new(&spec.client, &configure, params.tls.as_ref());
        let (stream, held) = params
            .connection()
            .dial(net, port(0)?, &[1], &options)?
            .one("the sweep's data connection")?;
        let udp = match params.transport.delivery() {
            Delivery::Stream => None,
            Delivery::Datagram => Some(connect_udp(net, port(1)?)?),
        };
        let socket = stream.buffers();
        let by_address = stream.peer_on_this_host();
        let one_host = by_address || net.same_kernel;
        let nobody_pinned = spec.client.cpus.is_empty() && spec.agent.cpus.is_empty();
        // Both ends on one host: where they run decides a small message's
        // round trip more than the stack does. Pinned apart every message
        // paid a wake-up on the other core (50 us each on one VM: 58 us at
        // 1 KiB against 8 us), the scheduler alone chose one core in one
        // run and two in the next, and one core is slower for large
        // messages (the two copies cannot run side by side). So the passes
        // take turns, together on one core and where the scheduler puts
        // them, and each point is its faster placement's: the host's best,
        // as NPtcp's and rr's best runs are. What a wake-up on another core
        // costs is measured once and reported beside the result
        // (workload/wakeup.rs).
        let cores = crate::workload::wakeup::first_two(&crate::workload::runner::current_thread_cpus());
        let turns = (one_host && nobody_pinned && params.passes() >= 2)
            .then_some(cores)
            .flatten()
            .map(|(core, _)| core);
        let host = if by_address {
            "host"
        } else {
            "kernel (network namespaces of one host)"
        };
        let pin_yourself = "pin them with -A and --remote-affinity: -A 0 --remote-affinity 1 apart, -A 0 \
                            --remote-affinity 0 together";
        let placement = (one_host && nobody_pinned).then(|| match turns {
            Some(core) => format!(
                "client and agent on one {host}, placed by turns: both on core {core} in odd passes, where the \
                 scheduler puts them in even passes; each point is its faster placement's ({pin_yourself})"
            ),
            None => format!(
                "client and agent on one {host}, placed by the scheduler as NPtcp's and rr's ends are ({}; \
                 {pin_yourself})",
                if cores.is_none() {
                    "this process may use one core"
                } else {
                    "one pass: --passes 2 or more also runs them together on one core and keeps the faster"
                }
            ),
        });
        let wakeup = if one_host {
            cores.and_then(crate::workload::wakeup::probe)
        } else {
            None
        };
        Ok(Box::new(SweepClient {
            driver: engine::Driver {
                stream,
                points: engine::Points {
                    udp,
                    params,
                    placement,
                    turns,
                    wakeup,
                },
            },
            held,
            socket,
        }))
    }
}

fn configure(side: &SideOptions, proto: Proto) -> impl Fn(&Socket) -> Result<(), WorkloadError> + '_ {
    move |socket: &Socket| {
        admission::apply_buffers(socket, side)?;
        match proto.tcp_options() {
            true => socket
                .set_nodelay(true)
                .map_err(WorkloadError::io("setting TCP_NODELAY")),
            false => Ok(()),
        }
    }
}

fn connect_udp(net: &ClientNet, port: u16) -> Result<UdpSocket, WorkloadError> {
    let local = net.bind.unwrap_or(match net.agent_ip {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    });
    let socket = UdpSocket::bind(SocketAddr::new(local, 0)).map_err(WorkloadError::io("binding the UDP socket"))?;
    let agent = SocketAddr::new(net.agent_ip, port);
    socket
        .connect(agent)
        .map_err(WorkloadError::io(format!("connecting the UDP socket to {agent}")))?;
    socket
        .set_read_timeout(Some(engine::UDP_ECHO_TIMEOUT))
        .map_err(WorkloadError::io("setting the UDP receive timeout"))?;
    Ok(socket)
}

struct SweepAgent {
    /// The transport the data connection comes by.
    proto: Proto,
    serving: Box<dyn Serving>,
    agent_options: SideOptions,
    /// Neither end has cores chosen: on one host the sweep picks them.
    nobody_pinned: bool,
    udp: Option<UdpSocket>,
    net: AgentNet,
    max_size: u64,
}

impl AgentSide for SweepAgent {
    fn data_ports(&self) -> Vec<u16> {
        let mut ports = vec![self.serving.port()];
        if let Some(udp) = &self.udp {
            ports.push(udp.local_addr().map(|a| a.port()).unwrap_or(0));
        }
        ports
    }

    fn accept(self: Box<Self>, deadline: Instant) -> Result<Box<dyn Side>, WorkloadError> {
        // Options set on the listener are not all inherited: set again.
        let configure = configure(&self.agent_options, self.proto);
        let (stream, held) = self
            .serving
            .accept(&[1], &configure, deadline)?
            .one("the sweep's data connection")?;
        // The agent pins its end only when a client asks (`pin apart`,
        // sent by clients before issue 42); it no longer does on its own.
        let apart = self
            .nobody_pinned
            .then(|| crate::workload::wakeup::first_two(&crate::workload::runner::current_thread_cpus()))
            .flatten()
            .map(|c| c.1);
        Ok(Box::new(engine::AgentServer {
            stream,
            held: Some(held),
            echo: engine::Echo {
                udp: self.udp,
                proven: self.net.proven.clone(),
                max_size: self.max_size,
                may_place: self.nobody_pinned,
                core_if_asked: apart,
            },
        }))
    }
}

struct SweepClient {
    driver: engine::Driver,
    held: Held,
    /// Buffer sizes at setup.
    socket: SocketBuffers,
}

impl Side for SweepClient {
    fn aborter(&self) -> Aborter {
        self.driver.stream.aborter()
    }

    fn run(self: Box<Self>, control: &RunControl) -> SideOutcome {
        let driver = self.driver;
        let task = StreamTask::new(
            1,
            Role::Sender,
            self.socket,
            Box::new(move |ctx: &StreamContext| driver.run(ctx)),
        );
        self.held.run(vec![task], control)
    }
}

impl Side for engine::AgentServer {
    fn aborter(&self) -> Aborter {
        self.stream.aborter()
    }

    fn run(mut self: Box<Self>, control: &RunControl) -> SideOutcome {
        let socket = self.stream.buffers();
        let held = self.held.take().expect("held until the sweep runs");
        let task = StreamTask::new(
            1,
            Role::Receiver,
            socket,
            Box::new(move |ctx: &StreamContext| self.serve(ctx)),
        );
        held.run(vec![task], control)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::spec::tests::spec;

    fn sweep_spec(params: SweepParams) -> TestSpec {
        let mut s = spec("sweep");
        s.message_bytes = params.largest();
        s.params = serde_json::to_value(params).unwrap();
        s
    }

    #[test]
    fn defaults_validate_and_udp_skips_large_sizes() {
        assert!(Sweep.validate(&sweep_spec(SweepParams::default())).is_ok());
        let udp = SweepParams {
            transport: Proto::UDP,
            max_bytes: 1 << 20,
            ..SweepParams::default()
        };
        let (run, skipped) = udp.sizes();
        assert!(run.iter().all(|&s| s <= MAX_DATAGRAM_BYTES));
        assert!(skipped.contains(&(1 << 20)) && skipped.contains(&65536));
        assert!(
            run.contains(&32771) && skipped.contains(&65533),
            "65533 B + 28 B of headers exceed 65535"
        );
    }

    #[test]
    fn bad_parameters_name_the_option() {
        let cases = [
            (
                SweepParams {
                    min_bytes: 0,
                    ..SweepParams::default()
                },
                "--min",
            ),
            (
                SweepParams {
                    min_bytes: 100,
                    max_bytes: 10,
                    ..SweepParams::default()
                },
                "--min",
            ),
            (
                SweepParams {
                    sizes_bytes: vec![10, 0],
                    ..SweepParams::default()
                },
                "--sizes",
            ),
            (
                SweepParams {
                    point_seconds: 0.0,
                    ..SweepParams::default()
                },
                "--point-time",
            ),
            (
                SweepParams {
                    mode: Mode::Stream,
                    transport: Proto::UDP,
                    ..SweepParams::default()
                },
                "--mode stream",
            ),
            (
                SweepParams {
                    transport: Proto::UDP,
                    sizes_bytes: vec![100_000],
                    ..SweepParams::default()
                },
                "UDP datagram",
            ),
        ];
        for (params, option) in cases {
            let err = params.validate().unwrap_err().to_string();
            assert!(err.contains(option), "{option}: {err}");
        }
        let mut s = sweep_spec(SweepParams::default());
        s.streams = 2;
        assert!(Sweep.validate(&s).unwrap_err().to_string().contains("-P/--parallel"));
    }

    #[test]
    fn the_agent_refuses_a_warm_up_or_an_interval_in_the_spec() {
        let mut s = sweep_spec(SweepParams::default());
        s.omit_seconds = 2.0;
        assert!(Sweep.validate(&s).unwrap_err().to_string().contains("-O/--omit"));
        let mut s = sweep_spec(SweepParams::default());
        s.interval_seconds = 0.1;
        assert!(Sweep.validate(&s).unwrap_err().to_string().contains("-i/--interval"));
    }

    #[test]
    fn explicit_lists_are_sorted_and_deduplicated() {
        let p = SweepParams {
            sizes_bytes: vec![1000, 10, 1000, 1],
            ..SweepParams::default()
        };
        assert_eq!(p.sizes().0, vec![1, 10, 1000]);
        assert_eq!(p.largest(), 1000);
    }
}
