//! `tcp`: bulk TCP streams, one thread and one connection per stream, in
//! either or both directions, like netperf TCP_STREAM and iperf3.
//!
//! Options of its own (in `TestSpec::params`): MSS, TCP_NODELAY, congestion
//! control, zero-copy send (`-Z`: `sendfile` from a file in the page cache,
//! or `--zerocopy=msg`: `MSG_ZEROCOPY`), and discarding receive with
//! `MSG_TRUNC` (the kernel drops the data without copying it). The fast
//! paths are recorded in the spec of the result, and what they did in the
//! stream ends (`tcp`: [`TcpEnd`]). The hot loops are in `send.rs`.

pub mod args;

use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use socket2::Socket;

use super::bulk::{not_a_setting_of, BulkParams, BulkSettings};
use super::runner::{tcp_probe, StreamBody, StreamContext, StreamTask};
use super::transport::admission;
use super::transport::encryption::Encryption;
use super::transport::stream::loops::{pace, zerocopy, TcpEnd, KEY};
pub use super::transport::stream::loops::{ReceivePath, SendPath};
use super::transport::stream::{ConnectOptions, Held, Serving, Stream, Streams};
use super::transport::{self, Asked, ConnectionFigures, Details, Proto, Setting};
use super::{
    Aborter, AgentNet, AgentSide, ChartViews, ClientNet, Figures, RunControl, Side, SideOptions, SideOutcome,
    SpecError, Stored, TestSpec, TextView, VerdictQuestions, Workload, WorkloadError,
};
use crate::model::spec::out_of_range;
use crate::model::{Flow, Party, Role, TrialResult};
use crate::probe::tcpinfo;
use crate::protocol::limits::OfferedRate;

/// Parameters of the `tcp` workload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpParams {
    /// TCP_MAXSEG to request on both ends.
    #[serde(default)]
    pub mss: Option<u32>,
    /// TCP_NODELAY on both ends.
    #[serde(default)]
    pub nodelay: bool,
    /// TCP_CONGESTION on both ends (the sender's matters).
    #[serde(default)]
    pub congestion: Option<String>,
    /// Send without the user-to-kernel copy, by `zerocopy_method`.
    #[serde(default)]
    pub zerocopy: bool,
    /// How a zero-copy sender sends; absent (runs before it) = sendfile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zerocopy_method: Option<ZeroCopyMethod>,
    /// Receive with MSG_TRUNC: the kernel discards the data, no copy.
    #[serde(default)]
    pub discard: bool,
    /// Pace each stream's sender to this rate (SO_MAX_PACING_RATE, `-b`);
    /// None sends as fast as congestion control allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_bits_per_second: Option<u64>,
    /// What the streams run over: `tcp` (left out, so agents from before
    /// transports read the spec) or another stream transport, `mptcp`.
    #[serde(default, skip_serializing_if = "Proto::is_tcp")]
    pub transport: Proto,
    /// Over TLS: the cipher suite, kernel TLS, how the client trusts the
    /// agent; absent over other transports (and then TLS's defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Encryption>,
}

/// How `-Z` sends: `--zerocopy=sendfile` (the default) or `--zerocopy=msg`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ZeroCopyMethod {
    /// sendfile(2) from a file: the socket takes references to its pages.
    #[default]
    Sendfile,
    /// send(2) with MSG_ZEROCOPY: the kernel pins the sender's pages and
    /// reports on the socket's error queue when it is done with them.
    Msg,
}

impl TcpParams {
    /// The sender's path these parameters ask for.
    pub fn send_path(&self) -> SendPath {
        match (self.zerocopy, self.zerocopy_method.unwrap_or_default()) {
            (false, _) => SendPath::Copy,
            (true, ZeroCopyMethod::Sendfile) => SendPath::Sendfile,
            (true, ZeroCopyMethod::Msg) => SendPath::MsgZeroCopy,
        }
    }

    /// The TLS options of a test over TLS or QUIC (its defaults where the
    /// spec left them out), None over any other transport.
    pub fn tls(&self) -> Option<Encryption> {
        self.runs_tls().then(|| self.tls.clone().unwrap_or_default())
    }

    /// Whether the streams shake hands with TLS 1.3 (the transport's own
    /// handshake: TLS, QUIC).
    pub fn runs_tls(&self) -> bool {
        self.transport.tls_handshake()
    }

    /// The receiver's path these parameters ask for.
    pub fn receive_path(&self) -> ReceivePath {
        match self.discard {
            true => ReceivePath::Discard,
            false => ReceivePath::Copy,
        }
    }
}

/// Linux accepts TCP_MAXSEG from 88 bytes; above 65495 it is meaningless.
pub const MSS_RANGE: std::ops::RangeInclusive<u32> = 88..=65495;

/// The `tcp` workload.
pub struct TcpStream;

/// How `tcp` results read: bulk throughput, its own case, and a line on
/// what MSG_ZEROCOPY did.
pub struct TcpResults;

impl Figures for TcpResults {
    /// Bulk throughput's, and over TLS or QUIC each end's handshake time.
    fn figures(&self) -> &'static [crate::workload::Metric] {
        const FIGURES: [crate::workload::Metric; 8] = [
            crate::workload::Metric::RECEIVER_RATE,
            crate::workload::Metric::SENDER_RATE,
            crate::workload::Metric::CLIENT_CPU,
            crate::workload::Metric::AGENT_CPU,
            crate::workload::Metric::CLIENT_SERVICE_DEMAND,
            crate::workload::Metric::AGENT_SERVICE_DEMAND,
            crate::workload::Metric::HANDSHAKE,
            crate::workload::Metric::AGENT_HANDSHAKE,
        ];
        &FIGURES
    }

    fn summarize(&self, trial: &mut TrialResult) {
        transport::summarize(trial)
    }
}

impl Stored for TcpResults {
    fn case(&self, spec: &TestSpec) -> Vec<super::CasePart> {
        let p: TcpParams = spec.params().unwrap_or_default();
        // The transport's label: `TCP`, `MPTCP`, `TLS`, so that runs over
        // each are cases of their own.
        let mut parts = vec![("workload", p.transport.label().to_string())];
        parts.extend(super::case::stream_parts(spec, "writes"));
        if let Some(t) = p.tls() {
            parts.push(("cipher", t.cipher.to_string()));
        }
        match p.send_path() {
            SendPath::Copy => {}
            SendPath::Sendfile => parts.push(("zerocopy", "zero-copy".into())),
            SendPath::MsgZeroCopy => parts.push(("zerocopy", "MSG_ZEROCOPY".into())),
        }
        if p.discard {
            parts.push(("discard", "discarding receive".into()));
        }
        if let Some(cc) = p.congestion {
            parts.push(("congestion", format!("cc {cc}")));
        }
        if let Some(mss) = p.mss {
            parts.push(("mss", format!("MSS {mss}")));
        }
        if p.nodelay {
            parts.push(("nodelay", "nodelay".into()));
        }
        if let Some(rate) = p.rate_bits_per_second {
            parts.push(("rate", format!("paced {} per stream", super::case::rate(rate as f64))));
        }
        parts
    }
}

impl VerdictQuestions for TcpResults {
    /// Over TLS: the cipher, where it took most of an end's CPU time.
    fn findings(&self, trial: &TrialResult) -> Vec<crate::model::Verdict> {
        transport::findings(trial)
    }

    /// Over MPTCP, a stream's several paths.
    fn several_paths(&self, trial: &TrialResult) -> Option<String> {
        transport::several_paths(trial)
    }

    /// Over QUIC, quinn's packets at the size it settled on.
    fn full_packet(&self, trial: &TrialResult, ipv6: bool) -> Option<(u64, u64)> {
        transport::full_packet(trial, ipv6)
    }

    /// A paced sender (`-b`) that reached 90% of its pacing rate, summed
    /// over a direction's senders, reached its offer; unpaced: no offer.
    fn sender_reached_offer(&self, trial: &TrialResult) -> Option<bool> {
        let mut paced = false;
        let mut reached = true;
        for flow in [Flow::ClientToAgent, Flow::AgentToClient] {
            let senders: Vec<_> = trial
                .streams
                .iter()
                .filter(|s| s.flow == flow)
                .map(|s| &s.sender)
                .collect();
            let offered: Option<u64> = senders
                .iter()
                .map(|s| s.extras.get::<TcpEnd>(KEY).and_then(|t| t.paced_bits_per_second))
                .sum();
            let Some(offered) = offered.filter(|&o| o > 0 && !senders.is_empty()) else {
                continue;
            };
            paced = true;
            let rate: f64 = senders.iter().map(|s| s.bits_per_second).sum();
            reached &= rate * 100.0 / offered as f64 >= super::base::OFFER_REACHED_PERCENT;
        }
        paced.then_some(reached)
    }
}

impl TextView for TcpResults {
    /// Shown where a stream has no TCP_INFO: over QUIC, whose UDP socket
    /// nicbench sizes itself.
    fn default_buffers_note(&self) -> Option<String> {
        transport::default_buffers_note()
    }

    /// The message size, and the pacing rate when `-b` set one.
    fn messages_text(&self, spec: &TestSpec) -> Option<String> {
        let rate = spec.params::<TcpParams>().ok()?.rate_bits_per_second?;
        Some(format!(
            "{} messages, paced {} per stream",
            crate::units::Size(spec.message_bytes),
            super::case::rate(rate as f64)
        ))
    }

    fn write_details(&self, trial: &TrialResult, out: &mut dyn Write) -> io::Result<()> {
        transport::write_details(trial, Details::Costs, out)?;
        for stream in &trial.streams {
            let Some(part) = stream.sender.extras.get::<TcpEnd>(KEY) else {
                continue;
            };
            if let Some(z) = part.msg_zerocopy {
                writeln!(
                    out,
                    "MSG_ZEROCOPY stream {}: {} sends, {} completions, {} copied by the kernel: {}",
                    stream.stream_id, z.sends, z.completions, z.copied, z.note
                )?;
            }
        }
        Ok(())
    }
}

impl ChartViews for TcpResults {}

/// The tcp workload's [`BulkSettings`]: all of them but GSO and GRO.
struct TcpBulk;

impl BulkParams for TcpBulk {
    fn settings(&self, spec: &TestSpec) -> Result<BulkSettings, SpecError> {
        let p: TcpParams = spec.params()?;
        Ok(BulkSettings {
            rate_bits_per_second: p.rate_bits_per_second,
            mss: p.mss,
            nodelay: p.nodelay,
            congestion: p.congestion,
            discard: p.discard,
            zerocopy: p.zerocopy,
            gso: false,
            gro: false,
        })
    }

    fn set(&self, spec: &mut TestSpec, settings: &BulkSettings) -> Result<(), SpecError> {
        if settings.gso || settings.gro {
            return Err(not_a_setting_of("tcp", "GSO/GRO"));
        }
        spec.set_params(&TcpParams {
            rate_bits_per_second: settings.rate_bits_per_second,
            mss: settings.mss,
            nodelay: settings.nodelay,
            congestion: settings.congestion.clone(),
            discard: settings.discard,
            zerocopy: settings.zerocopy,
            ..TcpParams::default()
        })
    }
}

impl Workload for TcpStream {
    fn results(&self) -> &'static dyn super::ResultKind {
        &TcpResults
    }

    fn transport(&self, spec: &TestSpec) -> Option<super::transport::Proto> {
        spec.params::<TcpParams>().ok().map(|p| p.transport)
    }

    fn name(&self) -> &'static str {
        "tcp"
    }

    fn offered_rate(&self, spec: &TestSpec) -> OfferedRate {
        // Unpaced (or parameters that do not parse): as fast as congestion control allows.
        match spec.params::<TcpParams>() {
            Ok(TcpParams {
                rate_bits_per_second: Some(rate),
                ..
            }) if rate > 0 => OfferedRate::PerStream(rate as f64),
            _ => OfferedRate::Unlimited,
        }
    }

    fn peer_tests(&self) -> bool {
        true
    }

    fn bulk(&self) -> Option<&'static dyn BulkParams> {
        Some(&TcpBulk)
    }

    fn command_line(&self) -> &'static dyn super::args::CommandLine {
        static LINE: super::args::ArgsOf<args::TcpOptions> = super::args::ArgsOf::new(super::args::length_option);
        &LINE
    }

    fn validate(&self, spec: &TestSpec) -> Result<(), SpecError> {
        spec.validate_common()?;
        let params: TcpParams = spec.params()?;
        if let Some(mss) = params.mss {
            if !MSS_RANGE.contains(&mss) {
                return Err(out_of_range(
                    "-M/--mss",
                    format!("{}..={} bytes", MSS_RANGE.start(), MSS_RANGE.end()),
                    mss,
                ));
            }
        }
        if params.rate_bits_per_second == Some(0) {
            return Err(out_of_range("-b/--bitrate", "a pacing rate above 0 (e.g. 100M)", 0));
        }
        params
            .transport
            .check_stream_for(self.name())
            .map_err(SpecError::Invalid)?;
        if !params.transport.tcp_options() {
            let set = [
                (params.mss.is_some(), "-M/--mss"),
                (params.nodelay, "-N/--nodelay"),
                (params.congestion.is_some(), "-C/--congestion"),
                (params.rate_bits_per_second.is_some(), "-b/--bitrate (TCP's pacing)"),
            ];
            if let Some((_, option)) = set.iter().find(|(set, _)| *set) {
                return Err(SpecError::Invalid(format!(
                    "{option} with --transport {}: its sockets have no TCP options; drop it",
                    params.transport
                )));
            }
        }
        params
            .transport
            .refuse(&asked(spec, &params))
            .map_err(SpecError::Invalid)?;
        if params.zerocopy_method.is_some() && !params.zerocopy {
            return Err(SpecError::Invalid(
                "a zero-copy method without zero-copy send: set zerocopy too (-Z/--zerocopy=METHOD)".into(),
            ));
        }
        if let Some(cc) = params
            .congestion
            .as_ref()
            .filter(|_| !params.transport.own_congestion_control())
        {
            let available = tcpinfo::available_congestion_controls();
            if !available.is_empty() && !available.iter().any(|a| a == cc) {
                return Err(SpecError::Invalid(format!(
                    "congestion control '{cc}' is not available on {}; available: {} \
                     (others may load with 'modprobe tcp_{cc}')",
                    crate::probe::host::hostname(),
                    available.join(", ")
                )));
            }
        }
        Ok(())
    }

    fn agent_side(&self, spec: &TestSpec, net: &AgentNet) -> Result<Box<dyn AgentSide>, WorkloadError> {
        let params: TcpParams = spec.params()?;
        let serving = {
            let configure = configure(&spec.agent, &params);
            let options = connect_options(&spec.agent, &configure, &params);
            params.transport.serve(net, &options, spec.flows().len())?
        };
        Ok(Box::new(TcpAgent {
            serving,
            spec: spec.clone(),
            params,
        }))
    }

    fn client_side(&self, spec: &TestSpec, net: &ClientNet) -> Result<Box<dyn Side>, WorkloadError> {
        let params: TcpParams = spec.params()?;
        let port = *net
            .data_ports
            .first()
            .ok_or_else(|| WorkloadError::Setup("the agent named no data port".into()))?;
        let ids: Vec<u32> = spec.flows().iter().map(|(id, _)| *id).collect();
        let streams = {
            let configure = configure(&spec.client, &params);
            let options = connect_options(&spec.client, &configure, &params);
            params.transport.dial(net, port, &ids, &options)?
        };
        Ok(Box::new(TcpSide::new(Party::Client, spec, params, streams)?))
    }
}

/// The streams' connections as their transport makes them: the spec's
/// TLS options, and its congestion controller where the transport has its
/// own (QUIC; a kernel socket's is set by [`configure`]).
fn connect_options<'a>(
    side: &'a SideOptions,
    configure: &'a (dyn Fn(&Socket) -> Result<(), WorkloadError> + 'a),
    params: &'a TcpParams,
) -> ConnectOptions<'a> {
    ConnectOptions {
        side,
        configure,
        tls: params.tls.as_ref(),
        congestion: params.congestion.as_deref(),
    }
}

/// Socket options set before connect (client) or listen (agent); the
/// `loaded` workload's load streams take the same.
pub(crate) fn configure<'a>(
    side: &'a SideOptions,
    params: &'a TcpParams,
) -> impl Fn(&Socket) -> Result<(), WorkloadError> + 'a {
    move |socket: &Socket| {
        admission::apply_buffers(socket, side)?;
        if let Some(mss) = params.mss {
            socket
                .set_mss(mss)
                .map_err(WorkloadError::io(format!("setting TCP_MAXSEG to {mss}")))?;
        }
        if params.nodelay {
            socket
                .set_nodelay(true)
                .map_err(WorkloadError::io("setting TCP_NODELAY"))?;
        }
        if let Some(cc) = &params.congestion {
            socket
                .set_tcp_congestion(cc.as_bytes())
                .map_err(WorkloadError::io(format!("setting congestion control '{cc}'")))?;
        }
        Ok(())
    }
}

/// What a sending socket needs before the test: SO_ZEROCOPY for
/// `--zerocopy=msg`, so a kernel without it is refused before any traffic;
/// its pacing rate for `-b`.
fn prepare_sender(socket: &Socket, sends: bool, params: &TcpParams) -> Result<(), WorkloadError> {
    if sends && params.send_path() == SendPath::MsgZeroCopy {
        zerocopy::enable(socket.as_raw_fd())?;
    }
    if let (true, Some(rate)) = (sends, params.rate_bits_per_second) {
        pace(socket, rate)?;
    }
    Ok(())
}

/// What the test asks of its transport, in the order it is checked.
fn asked<'a>(spec: &'a TestSpec, params: &'a TcpParams) -> Asked<'a> {
    let set = [
        (params.mss.is_some(), "-M/--mss", Setting::Mss),
        (params.nodelay, "-N/--nodelay", Setting::NoDelay),
        (params.zerocopy, "-Z/--zerocopy", Setting::ZeroCopy),
        (params.discard, "--discard", Setting::Discard),
        (params.rate_bits_per_second.is_some(), "-b/--bitrate", Setting::Pacing),
        (
            params.tls.as_ref().is_some_and(|t| t.ktls),
            "--ktls",
            Setting::KernelTls,
        ),
    ];
    let mut options: Vec<(&str, Setting)> = set
        .into_iter()
        .filter(|(set, _, _)| *set)
        .map(|(_, option, setting)| (option, setting))
        .collect();
    if let Some(cc) = &params.congestion {
        options.push(("-C/--congestion", Setting::Congestion(cc)));
    }
    if !spec.links.is_empty() {
        options.push(("--links", Setting::Links));
    }
    Asked {
        chosen_by: "--transport",
        options,
        tls: params.tls.as_ref(),
    }
}

struct TcpAgent {
    serving: Box<dyn Serving>,
    spec: TestSpec,
    params: TcpParams,
}

impl AgentSide for TcpAgent {
    fn data_ports(&self) -> Vec<u16> {
        vec![self.serving.port()]
    }

    fn accept(self: Box<Self>, deadline: Instant) -> Result<Box<dyn Side>, WorkloadError> {
        let ids: Vec<u32> = self.spec.flows().iter().map(|(id, _)| *id).collect();
        // Buffers and MSS are inherited from the listener, but everything
        // is set again: NODELAY and congestion are per socket.
        let streams = self
            .serving
            .accept(&ids, &configure(&self.spec.agent, &self.params), deadline)?;
        Ok(Box::new(TcpSide::new(Party::Agent, &self.spec, self.params, streams)?))
    }
}

/// One end's streams, connected.
struct TcpSide {
    host: Party,
    spec: TestSpec,
    params: TcpParams,
    streams: Vec<(u32, Flow, Box<dyn Stream>)>,
    /// What the connection holds while they run (MPTCP's listener for its
    /// joins, QUIC's endpoint).
    held: Held,
}

impl TcpSide {
    /// The end's streams, each sender's socket prepared.
    fn new(host: Party, spec: &TestSpec, params: TcpParams, streams: Streams) -> Result<TcpSide, WorkloadError> {
        let flows = spec.flows();
        let Streams { streams, held } = streams;
        let streams: Vec<(u32, Flow, Box<dyn Stream>)> = streams
            .into_iter()
            .filter_map(|(id, s)| flows.iter().find(|(f, _)| *f == id).map(|(_, flow)| (id, *flow, s)))
            .collect();
        for (_, flow, stream) in &streams {
            if let Some(socket) = stream.socket() {
                prepare_sender(socket, flow.sender() == host, &params)?;
            }
        }
        Ok(TcpSide {
            host,
            spec: spec.clone(),
            params,
            streams,
            held,
        })
    }
}

impl Side for TcpSide {
    fn aborter(&self) -> Aborter {
        let all: Vec<Aborter> = self.streams.iter().map(|(_, _, s)| s.aborter()).collect();
        std::sync::Arc::new(move || all.iter().for_each(|abort| abort()))
    }

    fn run(self: Box<Self>, control: &RunControl) -> SideOutcome {
        let message = self.spec.message_bytes as usize;
        let senders = self.streams.iter().filter(|(_, f, _)| f.sender() == self.host).count() as u64;
        let mut tasks = Vec::new();
        let mut sender_index = 0u64;
        let transport = self.params.transport;
        for (id, flow, stream) in self.streams {
            let buffers = stream.buffers();
            let figures = stream.socket().map(|s| ConnectionFigures::start(transport, s));
            let socket = stream.socket();
            let probe = (flow.sender() == self.host)
                .then(|| socket.and_then(tcp_probe))
                .flatten();
            let (role, body): (Role, StreamBody) = if flow.sender() == self.host {
                // The pacing rate the socket holds, read back, is the offer.
                let paced = self
                    .params
                    .rate_bits_per_second
                    .and_then(|_| socket.and_then(tcpinfo::max_pacing_rate));
                // A byte count is shared out among the streams of this side.
                let quota = self
                    .spec
                    .bytes
                    .map(|total| total / senders + u64::from(sender_index < total % senders));
                sender_index += 1;
                let path = self.params.send_path();
                (
                    Role::Sender,
                    Box::new(move |ctx: &StreamContext| {
                        let mut end = stream.send(message, quota, path, ctx);
                        if paced.is_some() {
                            let mut part: TcpEnd = end.extras.get(KEY).unwrap_or_default();
                            part.paced_bits_per_second = paced;
                            end.extras.set(KEY, &part);
                        }
                        if let Some(figures) = figures {
                            figures.add_to(&mut end);
                        }
                        end
                    }),
                )
            } else {
                let path = self.params.receive_path();
                (
                    Role::Receiver,
                    Box::new(move |ctx: &StreamContext| {
                        let mut end = stream.receive(message, path, ctx);
                        if let Some(figures) = figures {
                            figures.add_to(&mut end);
                        }
                        end
                    }),
                )
            };
            tasks.push(StreamTask::new(id, role, buffers, body).with_probe(probe));
        }
        self.held.run(tasks, control)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_zero_copy_method_round_trips_and_older_specs_read_as_sendfile() {
        for method in [ZeroCopyMethod::Sendfile, ZeroCopyMethod::Msg] {
            let params = TcpParams {
                zerocopy: true,
                zerocopy_method: Some(method),
                ..TcpParams::default()
            };
            let mut spec = crate::model::spec::tests::spec("tcp");
            spec.set_params(&params).unwrap();
            assert_eq!(spec.params::<TcpParams>().unwrap(), params);
        }
        let older: TcpParams = serde_json::from_str(r#"{"zerocopy": true, "discard": true}"#).unwrap();
        assert_eq!(older.send_path(), SendPath::Sendfile);
        assert_eq!(older.receive_path(), ReceivePath::Discard);
        let msg: TcpParams = serde_json::from_str(r#"{"zerocopy": true, "zerocopy_method": "msg"}"#).unwrap();
        assert_eq!(msg.send_path(), SendPath::MsgZeroCopy);
        assert!(serde_json::from_str::<TcpParams>(r#"{"zerocopy": true, "zerocopy_method": "foo"}"#).is_err());
    }

    #[test]
    fn a_method_without_zero_copy_is_refused() {
        let mut spec = crate::model::spec::tests::spec("tcp");
        spec.set_params(&TcpParams {
            zerocopy_method: Some(ZeroCopyMethod::Msg),
            ..TcpParams::default()
        })
        .unwrap();
        let err = TcpStream.validate(&spec).unwrap_err().to_string();
        assert!(err.contains("without zero-copy send"), "{err}");
    }

    #[test]
    fn a_quic_spec_over_links_is_refused_as_the_agent_gets_it() {
        let mut spec = crate::model::spec::tests::spec("tcp");
        spec.set_params(&TcpParams {
            transport: Proto::QUIC,
            ..TcpParams::default()
        })
        .unwrap();
        assert!(TcpStream.validate(&spec).is_ok());
        let loopback = std::net::IpAddr::from([127, 0, 0, 1]);
        spec.links = vec![crate::model::multilink::LinkPair {
            client: loopback,
            agent: loopback,
        }];
        let err = TcpStream.validate(&spec).unwrap_err().to_string();
        assert!(err.contains("drop --links"), "{err}");
    }
}
