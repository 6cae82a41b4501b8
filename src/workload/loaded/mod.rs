//! `loaded`: latency under load. An idle phase (probes only), then phases
//! of bulk TCP load — download (agent to client), upload, both at once —
//! with probes running through the whole test: UDP probes timestamped at
//! both ends, a TCP request/response on its own idle connection (the
//! responsiveness draft's "foreign" probe), and the load streams' own
//! smoothed RTT (its "self" probe). Both ends also sample where queued
//! bytes sit: the sending sockets (unsent, unacknowledged), the egress
//! qdisc's backlog and the NIC's byte queue limit, so that the added delay
//! can be set against the queues that explain it ([`result`]).
//!
//! The load streams are the `tcp` workload's: the same socket options
//! (`tcp_stream::configure`) and hot loops, the sender held while its
//! direction is not loaded. The spec is bidirectional with `-P` streams
//! each way; ids past the load streams' name the TCP probe connection.

pub mod args;
pub mod chart;
pub mod chart_cdf;
mod probes;
mod queues;
pub mod result;
mod text;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use socket2::Socket;

use super::runner::{run_streams, tcp_probe, StreamBody, StreamContext, StreamTask};
use super::tcp_stream::{self, TcpParams};
use super::transport::{self, admission, Proto};
use super::{
    Aborter, AgentNet, AgentSide, ClientNet, Direction, RunControl, Side, SideOptions, SideOutcome, SpecError,
    TestSpec, Workload, WorkloadError,
};
use crate::model::spec::out_of_range;
use crate::model::{Flow, Party, Role};
use crate::probe::tcpinfo;
use crate::protocol::limits::OfferedRate;
use probes::ProbeSockets;

/// The name of the workload and the key of its parts in JSON.
pub const KEY: &str = "loaded";

/// A load phase: which way the bulk streams send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum PhaseName {
    /// The agent sends to the client.
    Download,
    /// The client sends to the agent.
    Upload,
    /// Both at once.
    Bidirectional,
}

impl PhaseName {
    pub fn as_str(self) -> &'static str {
        match self {
            PhaseName::Download => "download",
            PhaseName::Upload => "upload",
            PhaseName::Bidirectional => "bidirectional",
        }
    }

    /// Whether streams of `flow` send in this phase.
    pub fn loads(self, flow: Flow) -> bool {
        match self {
            PhaseName::Download => flow == Flow::AgentToClient,
            PhaseName::Upload => flow == Flow::ClientToAgent,
            PhaseName::Bidirectional => true,
        }
    }
}

/// Shortest idle phase: the clocks' offset is estimated from its probes.
pub const MIN_IDLE_SECONDS: f64 = 0.2;
/// Shortest load phase.
pub const MIN_PHASE_SECONDS: f64 = 0.5;
/// Longest idle or load phase.
pub const MAX_PHASE_SECONDS: f64 = 3600.0;
/// Probe intervals allowed: 1 ms to 1 s.
pub const PROBE_INTERVAL_RANGE: std::ops::RangeInclusive<f64> = 0.001..=1.0;
/// Largest TCP_NOTSENT_LOWAT asked for.
pub const MAX_NOTSENT_LOWAT: u64 = 1 << 30;

/// Parameters of the `loaded` workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadedParams {
    /// The load phases in order, after the idle one.
    pub phases: Vec<PhaseName>,
    pub idle_seconds: f64,
    /// Length of each load phase.
    pub phase_seconds: f64,
    /// Time between probes of each kind.
    pub probe_interval_seconds: f64,
    /// The load streams' options, as the `tcp` workload's.
    #[serde(default)]
    pub tcp: TcpParams,
    /// TCP_NOTSENT_LOWAT on the load streams' sockets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notsent_lowat_bytes: Option<u64>,
}

impl Default for LoadedParams {
    fn default() -> Self {
        LoadedParams {
            phases: vec![PhaseName::Download, PhaseName::Upload, PhaseName::Bidirectional],
            idle_seconds: 3.0,
            phase_seconds: 10.0,
            probe_interval_seconds: 0.01,
            tcp: TcpParams::default(),
            notsent_lowat_bytes: None,
        }
    }
}

impl LoadedParams {
    /// The whole test: idle, then every load phase.
    pub fn total_seconds(&self) -> f64 {
        self.idle_seconds + self.phase_seconds * self.phases.len() as f64
    }

    /// Start and end of load phase `index`, in seconds from the start.
    pub fn window(&self, index: usize) -> (f64, f64) {
        let start = self.idle_seconds + self.phase_seconds * index as f64;
        (start, start + self.phase_seconds)
    }

    /// The load phase running `seconds` after the start (None while idle
    /// or after the end).
    pub fn phase_at(&self, seconds: f64) -> Option<PhaseName> {
        if seconds < self.idle_seconds {
            return None;
        }
        let index = ((seconds - self.idle_seconds) / self.phase_seconds).floor() as usize;
        self.phases.get(index).copied()
    }

    /// Checks the values, naming the option at fault.
    fn check(&self) -> Result<(), SpecError> {
        if self.phases.is_empty() {
            return Err(SpecError::Invalid("--phases: name at least one phase".into()));
        }
        for (i, p) in self.phases.iter().enumerate() {
            if self.phases[..i].contains(p) {
                return Err(SpecError::Invalid(format!("--phases: '{}' is named twice", p.as_str())));
            }
        }
        let range = |option: &'static str, value: f64, min: f64, max: f64| match value.is_finite()
            && (min..=max).contains(&value)
        {
            true => Ok(()),
            false => Err(out_of_range(
                option,
                format!("{min} s to {max} s"),
                format!("{value} s"),
            )),
        };
        range("--idle", self.idle_seconds, MIN_IDLE_SECONDS, MAX_PHASE_SECONDS)?;
        range("--phase-time", self.phase_seconds, MIN_PHASE_SECONDS, MAX_PHASE_SECONDS)?;
        range(
            "--probe-interval",
            self.probe_interval_seconds,
            *PROBE_INTERVAL_RANGE.start(),
            *PROBE_INTERVAL_RANGE.end(),
        )?;
        if self.probe_interval_seconds * 4.0 > self.idle_seconds.min(self.phase_seconds) {
            return Err(SpecError::Invalid(format!(
                "--probe-interval {} s leaves fewer than 4 probes in a phase of {} s: \
                 shorten the interval or lengthen the phases",
                self.probe_interval_seconds,
                self.idle_seconds.min(self.phase_seconds)
            )));
        }
        if let Some(lowat) = self.notsent_lowat_bytes {
            if lowat == 0 || lowat > MAX_NOTSENT_LOWAT {
                return Err(out_of_range("--notsent-lowat", "1 B..=1 GiB", lowat));
            }
        }
        Ok(())
    }
}

/// The `loaded` workload.
pub struct Loaded;

impl Workload for Loaded {
    fn name(&self) -> &'static str {
        KEY
    }

    fn results(&self) -> &'static dyn super::ResultKind {
        &result::LoadedResults
    }

    fn command_line(&self) -> &'static dyn super::args::CommandLine {
        static LINE: super::args::ArgsOf<args::LoadedOptions> = super::args::ArgsOf::new(super::args::length_option);
        &LINE
    }

    fn offered_rate(&self, _spec: &TestSpec) -> OfferedRate {
        // Bulk TCP: as fast as congestion control allows.
        OfferedRate::Unlimited
    }

    fn supports_links(&self) -> bool {
        false
    }

    fn peer_tests(&self) -> bool {
        true
    }

    fn validate(&self, spec: &TestSpec) -> Result<(), SpecError> {
        spec.validate_common()?;
        let params: LoadedParams = spec.params()?;
        params.check()?;
        if spec.direction != Direction::Bidir {
            return Err(SpecError::Invalid(
                "loaded chooses the directions by its phases: leave out -R/--bidir and use --phases".into(),
            ));
        }
        if spec.bytes.is_some() {
            return Err(SpecError::Invalid(
                "loaded runs for its phases' time: leave out -n/--bytes".into(),
            ));
        }
        if spec.omit_seconds != 0.0 {
            return Err(SpecError::Invalid(
                "loaded takes its figures once each phase is stable: leave out -O/--omit".into(),
            ));
        }
        if (spec.duration_seconds - params.total_seconds()).abs() > 1e-6 {
            return Err(SpecError::Invalid(format!(
                "loaded runs {} s (idle and phases) but the spec says {} s",
                params.total_seconds(),
                spec.duration_seconds
            )));
        }
        if !spec.links.is_empty() {
            return Err(SpecError::Invalid(
                "loaded runs over one path: leave out --links".into(),
            ));
        }
        // The load streams and the probe connection run over the default
        // transport: its listener and connections are what loaded opens.
        if params.tcp.transport != Proto::default() {
            return Err(SpecError::Invalid(format!(
                "loaded's load streams run over {}; their transport is not an option (got {})",
                Proto::default().name(),
                params.tcp.transport.name()
            )));
        }
        // The load streams' options, checked as the tcp workload checks them.
        let mut tcp = spec.clone();
        tcp.workload = "tcp".into();
        tcp.direction = Direction::Forward;
        tcp.set_params(&params.tcp)?;
        tcp_stream::TcpStream.validate(&tcp)
    }

    fn agent_side(&self, spec: &TestSpec, net: &AgentNet) -> Result<Box<dyn AgentSide>, WorkloadError> {
        let params: LoadedParams = spec.params()?;
        let listener = params.tcp.transport.listen(
            net.local_ip,
            (spec.flows().len() as i32 + 1).max(16),
            &load_configure(&spec.agent, &params),
        )?;
        let echo = probes::bind_echo(net.local_ip)?;
        Ok(Box::new(LoadedAgent {
            listener,
            echo,
            spec: spec.clone(),
            params,
            net: net.clone(),
        }))
    }

    fn client_side(&self, spec: &TestSpec, net: &ClientNet) -> Result<Box<dyn Side>, WorkloadError> {
        let params: LoadedParams = spec.params()?;
        let (&tcp_port, &udp_port) = match net.data_ports.as_slice() {
            [tcp, udp, ..] => (tcp, udp),
            _ => return Err(WorkloadError::Setup("the agent named fewer than two data ports".into())),
        };
        let mut sockets = Vec::new();
        {
            let configure = load_configure(&spec.client, &params);
            for (id, flow) in spec.flows() {
                sockets.push((
                    id,
                    flow,
                    admission::connect_stream(params.tcp.transport, net, tcp_port, id, &configure)?,
                ));
            }
        }
        let tcp_probe =
            admission::connect_stream(params.tcp.transport, net, tcp_port, probe_id(spec), &|s: &Socket| {
                s.set_nodelay(true)
                    .map_err(WorkloadError::io("setting TCP_NODELAY on the probe connection"))
            })?;
        let udp_probe = probes::connect_prober(net.bind, std::net::SocketAddr::new(net.agent_ip, udp_port))?;
        Ok(Box::new(LoadedSide {
            host: Party::Client,
            spec: spec.clone(),
            params,
            sockets,
            probe: ProbeSockets::Client {
                tcp: tcp_probe,
                udp: udp_probe,
                token: net.token,
            },
        }))
    }
}

/// The stream id of the TCP probe connection: the first past the load streams.
fn probe_id(spec: &TestSpec) -> u32 {
    spec.flows().iter().map(|(id, _)| *id).max().unwrap_or(0) + 1
}

/// The tcp workload's socket options, and TCP_NOTSENT_LOWAT.
fn load_configure<'a>(
    side: &'a SideOptions,
    params: &'a LoadedParams,
) -> impl Fn(&Socket) -> Result<(), WorkloadError> + 'a {
    let tcp = tcp_stream::configure(side, &params.tcp);
    move |socket: &Socket| {
        tcp(socket)?;
        if let Some(lowat) = params.notsent_lowat_bytes {
            queues::set_notsent_lowat(socket, lowat as u32)
                .map_err(WorkloadError::io(format!("setting TCP_NOTSENT_LOWAT to {lowat}")))?;
        }
        Ok(())
    }
}

struct LoadedAgent {
    listener: Socket,
    echo: std::net::UdpSocket,
    spec: TestSpec,
    params: LoadedParams,
    net: AgentNet,
}

impl AgentSide for LoadedAgent {
    fn data_ports(&self) -> Vec<u16> {
        let udp = self.echo.local_addr().map(|a| a.port()).unwrap_or(0);
        vec![admission::local_port(&self.listener), udp]
    }

    fn accept(self: Box<Self>, deadline: Instant) -> Result<Box<dyn Side>, WorkloadError> {
        let probe = probe_id(&self.spec);
        let flows = self.spec.flows();
        let ids: Vec<u32> = flows.iter().map(|(id, _)| *id).chain([probe]).collect();
        let mut accepted = admission::accept_streams(&self.listener, &self.net, &ids, deadline)?;
        let tcp_probe = accepted
            .remove(&probe)
            .ok_or_else(|| WorkloadError::Setup("the probe connection did not arrive".into()))?;
        tcp_probe
            .set_nodelay(true)
            .map_err(WorkloadError::io("setting TCP_NODELAY on the probe connection"))?;
        let configure = load_configure(&self.spec.agent, &self.params);
        let mut sockets = Vec::new();
        for (id, flow) in flows {
            if let Some(socket) = accepted.remove(&id) {
                // Options are per socket: set them again, as tcp does.
                configure(&socket)?;
                sockets.push((id, flow, socket));
            }
        }
        Ok(Box::new(LoadedSide {
            host: Party::Agent,
            spec: self.spec.clone(),
            params: self.params.clone(),
            sockets,
            probe: ProbeSockets::Agent {
                tcp: tcp_probe,
                udp: self.echo,
                token: self.net.token,
                proven: self.net.proven.clone(),
            },
        }))
    }
}

/// One end, connected: its load streams and its probes.
struct LoadedSide {
    host: Party,
    spec: TestSpec,
    params: LoadedParams,
    sockets: Vec<(u32, Flow, Socket)>,
    probe: ProbeSockets,
}

impl Side for LoadedSide {
    fn aborter(&self) -> Aborter {
        let all: Vec<&Socket> = self
            .sockets
            .iter()
            .map(|(_, _, s)| s)
            .chain([self.probe.tcp()])
            .collect();
        admission::aborter(&all)
    }

    fn run(self: Box<Self>, control: &RunControl) -> SideOutcome {
        let LoadedSide {
            host,
            spec,
            params,
            sockets,
            probe,
        } = *self;
        let message = spec.message_bytes as usize;
        // A sender's direction is held until a phase loads it.
        let upload_hold = Arc::new(AtomicBool::new(true));
        let download_hold = Arc::new(AtomicBool::new(true));
        let address = |a: std::io::Result<socket2::SockAddr>| a.ok().and_then(|a| a.as_socket()).map(|a| a.ip());
        let local = sockets.first().and_then(|(_, _, s)| address(s.local_addr()));
        let peer = sockets.first().and_then(|(_, _, s)| address(s.peer_addr()));
        let mut watched = Vec::new();
        let mut tasks = Vec::new();
        for (id, flow, socket) in sockets {
            let buffers = tcpinfo::socket_buffers(&socket);
            let probe = (flow.sender() == host).then(|| tcp_probe(&socket)).flatten();
            let (role, body): (Role, StreamBody) = if flow.sender() == host {
                if let Ok(clone) = socket.try_clone() {
                    watched.push((flow, clone));
                }
                let hold = match flow {
                    Flow::ClientToAgent => Arc::clone(&upload_hold),
                    Flow::AgentToClient => Arc::clone(&download_hold),
                };
                let path = params.tcp.send_path();
                (
                    Role::Sender,
                    Box::new(move |ctx: &StreamContext| {
                        transport::stream::loops::send_stream_held(socket, message, None, path, Some(&hold), ctx)
                    }),
                )
            } else {
                let path = params.tcp.receive_path();
                (
                    Role::Receiver,
                    Box::new(move |ctx: &StreamContext| {
                        transport::stream::loops::receive_stream(socket, message, path, ctx)
                    }),
                )
            };
            tasks.push(StreamTask::new(id, role, buffers, body).with_probe(probe));
        }
        let done = Arc::new(AtomicBool::new(false));
        let clock = probes::Clock {
            start: control.start,
            interval: std::time::Duration::from_secs_f64(params.probe_interval_seconds),
            stop: Arc::clone(&control.stop),
            done: Arc::clone(&done),
        };
        let sampler = queues::Sampler {
            params: params.clone(),
            watched,
            holds: vec![(Flow::ClientToAgent, upload_hold), (Flow::AgentToClient, download_hold)],
            interface: local.and_then(crate::probe::nic::interface_with_address),
            router: queues::router_toward_peer(host, peer),
        };
        let (mut outcome, part) = std::thread::scope(|scope| {
            let sampling = scope.spawn(|| sampler.run(&clock));
            let probing = scope.spawn(|| probes::run(probe, &clock));
            let outcome = run_streams(tasks, control);
            done.store(true, Ordering::Relaxed);
            let samples = sampling.join().unwrap_or_default();
            let probes = probing.join().unwrap_or_default();
            (outcome, result::LoadedEnd::new(host, &params, samples, probes))
        });
        // The end's part rides on its first stream end (the lowest id).
        if let Some(first) = outcome.streams.iter_mut().min_by_key(|e| e.stream_id) {
            first.extras.set(KEY, &part);
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::spec::tests::spec;

    /// A spec as a client would send it: the default phases and their time.
    fn loaded_spec(params: &LoadedParams) -> TestSpec {
        let mut s = spec(Loaded.name());
        s.direction = Direction::Bidir;
        s.duration_seconds = params.total_seconds();
        s.set_params(params).unwrap();
        s
    }

    /// The load streams and the probe connection are opened over the load
    /// params' transport: one other than the default (which loaded's
    /// command line never sets, but a client's spec may name) is refused
    /// before the agent listens on it.
    #[test]
    fn the_load_streams_transport_is_the_default_or_the_spec_is_refused() {
        let good = LoadedParams::default();
        Loaded.validate(&loaded_spec(&good)).unwrap();
        for other in transport::REGISTRY.iter().filter(|p| **p != Proto::default()) {
            let mut params = LoadedParams::default();
            params.tcp.transport = *other;
            let other = other.name();
            let e = Loaded.validate(&loaded_spec(&params)).unwrap_err().to_string();
            assert!(
                e.contains("their transport is not an option") && e.contains(other),
                "{other}: {e}"
            );
        }
    }
}
