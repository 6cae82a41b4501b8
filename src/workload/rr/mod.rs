//! `rr`: request/response, like netperf TCP_RR/UDP_RR/TCP_CRR and sockperf
//! ping-pong. The client is the requester (the sender end of each flow),
//! the agent the responder (the receiver end). Each flow keeps `burst`
//! transactions in flight; the requester times every round trip into an
//! HDR histogram. With `--crr` every transaction opens a new TCP connection
//! (token-authenticated like every data connection) and the agent keeps
//! accepting them for the whole test. Over UDP a request without answer
//! within the timeout counts as lost and is replaced, so a lost datagram
//! never stalls the test. The hot loops are in [`loops`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use socket2::Socket;

use super::transport::admission;
use super::transport::datagram::DatagramServing;
use super::transport::encryption::Encryption;
use super::transport::stream::{ConnectOptions, Held, Serving, Stream, Streams};
use super::transport::transaction::{Answering, Dialing, TransactionServing, Transactions};
use super::transport::{self, Asked, Delivery, Proto, Setting};
pub mod args;
pub mod command;
pub mod loops;
pub mod result;
pub mod text;

use super::runner::{run_streams, StreamBody, StreamContext, StreamTask, TaskEnd};
use super::wakeup::WakeupCost;
use super::{
    Aborter, AgentNet, AgentSide, ClientNet, Direction, RunControl, Side, SideOptions, SideOutcome, SpecError,
    TestSpec, Workload, WorkloadError,
};
use super::{
    Better, ChartData, ChartKind, ChartViews, Figure, Figures, Metric, ResultKind, RoundTrips, Stored, TextView,
    VerdictQuestions,
};
use crate::model::spec::{out_of_range, MAX_MESSAGE_BYTES};
use crate::model::{Flow, FlowTotal, Role, SocketBuffers, TrialResult};
use crate::probe::tcpinfo;
use crate::protocol::limits::OfferedRate;
use loops::{Exchange, FlowCounts};
use result::{RrEnd, RrResult};
use std::io::{self, Write};

/// Most transactions one flow keeps in flight.
pub const MAX_BURST: u32 = 1024;
/// Longest `--timeout` of a UDP transaction.
pub const MAX_TIMEOUT_SECONDS: f64 = 60.0;
/// Longest `--every` between paced transactions.
pub const MAX_INTERVAL_SECONDS: f64 = 60.0;
/// UDP requests and responses carry an 8-byte sequence number.
pub const MIN_UDP_MESSAGE: u64 = 8;

/// Parameters of the `rr` workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RrParams {
    /// What the transactions travel over.
    pub proto: Proto,
    pub request_bytes: u64,
    pub response_bytes: u64,
    /// A new TCP connection per transaction (netperf TCP_CRR).
    #[serde(default)]
    pub crr: bool,
    /// Transactions each flow keeps in flight.
    pub burst: u32,
    /// UDP: a request unanswered this long is lost.
    pub timeout_us: u64,
    /// SO_BUSY_POLL on the data sockets of both ends.
    #[serde(default)]
    pub busy_poll_us: Option<u32>,
    /// TCP_QUICKACK after every receive, on both ends.
    #[serde(default)]
    pub quickack: bool,
    /// TCP: wait for data by polling the socket without sleeping (each
    /// flow's thread keeps a core busy on both ends) instead of blocking.
    #[serde(default)]
    pub spin: bool,
    /// Paced: each flow starts a transaction this often (µs) instead of
    /// back to back (sockperf's `--mps`, netperf's `-w`). Absent when unpaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_us: Option<u64>,
    /// Over TLS or QUIC (`--proto tls`, `--proto quic`): the cipher suite
    /// and how the client trusts the agent; absent over other transports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Encryption>,
    /// Time each leg (`--one-way`): the responder stamps its real-time
    /// clock into each response (its first 8 bytes, after the sequence
    /// number over UDP). Absent when not asked, so older agents still
    /// read the spec.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub one_way: bool,
}

/// Hello feature of an agent whose rr responder stamps its real-time clock
/// into each response when the spec asks (`one_way`), so that the client
/// can time the request's and the response's legs (issue 70).
pub const FEATURE_ONE_WAY: &str = "rr_one_way";

/// Bytes of a response that carry the responder's stamp (`--one-way`).
pub const STAMP_BYTES: u64 = 8;

impl RrParams {
    /// The smallest response that carries what a transaction needs: the
    /// sequence number over UDP, and the stamp with `--one-way`.
    pub fn min_response_bytes(&self) -> u64 {
        match (self.proto.is_datagram(), self.one_way) {
            (true, true) => MIN_UDP_MESSAGE + STAMP_BYTES,
            (true, false) => MIN_UDP_MESSAGE,
            (false, true) => STAMP_BYTES,
            (false, false) => 1,
        }
    }

    /// The TLS options of a test over TLS or QUIC (its defaults where the
    /// spec left them out), None over any other transport.
    pub fn tls(&self) -> Option<Encryption> {
        self.encrypted().then(|| self.tls.clone().unwrap_or_default())
    }

    /// Whether the transactions are sealed: over a transport with a TLS
    /// handshake (TLS, QUIC).
    pub fn encrypted(&self) -> bool {
        self.proto.tls_handshake()
    }
}

impl Default for RrParams {
    fn default() -> Self {
        RrParams {
            proto: Proto::default(),
            request_bytes: 1,
            response_bytes: 1,
            crr: false,
            burst: 1,
            timeout_us: 50_000,
            busy_poll_us: None,
            quickack: false,
            spin: false,
            interval_us: None,
            tls: None,
            one_way: false,
        }
    }
}

/// The `rr` workload.
pub struct RequestResponse;

/// How request/response results read: transactions per second, latency.
pub struct RrResults;

const TRANSACTIONS: Metric = Metric {
    name: "transactions_per_second",
    option: "tps",
    label: "transactions per second",
    unit: "transactions/s",
    pointer: "/sum/rr/transactions_per_second",
    divisor: 1.0,
    better: Better::Higher,
};

/// A percentile of the transactions' round trips, in µs as recorded.
const fn latency_us(name: &'static str, option: &'static str, label: &'static str, pointer: &'static str) -> Metric {
    Metric {
        name,
        option,
        label,
        unit: "us",
        pointer,
        divisor: 1.0,
        better: Better::Lower,
    }
}

/// `--one-way`: each leg's median, the clocks' offset taken out.
const ONE_WAY: [Metric; 2] = [
    Metric {
        name: "one_way_request_p50_seconds",
        option: "one-way-request",
        label: "request's one-way delay, client to agent (median)",
        unit: "s",
        pointer: "/sum/rr/one_way_request/p50_seconds",
        divisor: 1.0,
        better: Better::Lower,
    },
    Metric {
        name: "one_way_response_p50_seconds",
        option: "one-way-response",
        label: "response's one-way delay, agent to client (median)",
        unit: "s",
        pointer: "/sum/rr/one_way_response/p50_seconds",
        divisor: 1.0,
        better: Better::Lower,
    },
];

/// rr's median and 99th percentile latency: stored columns.
const LATENCY: [Metric; 2] = [
    latency_us("p50_latency_us", "p50", "median latency", "/sum/rr/latency/p50_us"),
    latency_us(
        "p99_latency_us",
        "p99",
        "99th percentile latency",
        "/sum/rr/latency/p99_us",
    ),
];

impl Figures for RrResults {
    fn headline(&self) -> Metric {
        TRANSACTIONS
    }

    /// Transactions and their latency, and CPU per transaction: an rr run
    /// moves a few bytes per round trip, so neither its bit rate nor its
    /// CPU per KB says anything.
    fn figures(&self) -> &'static [Metric] {
        const FIGURES: [Metric; 11] = [
            TRANSACTIONS,
            LATENCY[0],
            LATENCY[1],
            ONE_WAY[0],
            ONE_WAY[1],
            Metric::CLIENT_CPU,
            Metric::AGENT_CPU,
            Metric::CLIENT_CPU_PER_TRANSACTION,
            Metric::AGENT_CPU_PER_TRANSACTION,
            Metric::HANDSHAKE,
            Metric::AGENT_HANDSHAKE,
        ];
        &FIGURES
    }

    /// The median round trip, in seconds.
    fn mesh_figure(&self) -> Metric {
        Metric {
            name: "rtt_p50_seconds",
            option: "rtt",
            label: "median round trip",
            unit: "s",
            pointer: "/sum/rr/latency/p50_us",
            divisor: 1e6,
            better: Better::Lower,
        }
    }

    /// Transactions lost of those done and lost, in both directions.
    fn loss_ratio(&self, _total: &FlowTotal, trial: &TrialResult) -> Option<f64> {
        let total: RrResult = trial.sum.extras.get(result::KEY)?;
        let (lost, done) = (total.lost_transactions as f64, total.transactions as f64);
        (lost + done > 0.0).then(|| lost / (lost + done))
    }

    fn round_trips(&self, trial: &TrialResult) -> Option<RoundTrips> {
        let total: RrResult = trial.sum.extras.get(result::KEY)?;
        let l = total.latency?;
        Some(RoundTrips {
            p50_seconds: l.p50_us / 1e6,
            p90_seconds: l.p90_us / 1e6,
            p99_seconds: l.p99_us / 1e6,
        })
    }

    fn summarize(&self, trial: &mut TrialResult) {
        result::summarize(trial);
        crate::workload::transport::summarize(trial);
    }

    fn figure_of_merit(&self, trial: &TrialResult) -> Figure {
        let total: RrResult = trial.sum.extras.get(result::KEY).unwrap_or_default();
        Figure {
            metric: "transactions_per_second",
            unit: "transactions/s",
            value: total.transactions_per_second,
            qualifier: "",
        }
    }
}

impl Stored for RrResults {
    fn stored_columns(&self) -> &'static [Metric] {
        const COLUMNS: [Metric; 3] = [LATENCY[0], LATENCY[1], TRANSACTIONS];
        &COLUMNS
    }

    fn case(&self, spec: &TestSpec) -> Vec<super::CasePart> {
        let p: RrParams = spec.params().unwrap_or_default();
        let mut mode = format!("rr {}", p.proto.label());
        if p.crr {
            mode += " CRR";
        }
        if let Some(t) = p.tls() {
            mode += &format!(" {}", t.cipher);
        }
        if p.spin {
            mode += " spin";
        }
        if let Some(us) = p.interval_us {
            mode += &format!(
                " every {}",
                crate::workload::args::parse::duration_in_words(us as f64 / 1e6)
            );
        }
        // Request/response, as `-r 64,1024` writes them.
        let sizes = match (p.request_bytes, p.response_bytes) {
            (q, r) if q < 1 << 16 && r < 1 << 16 => format!("{q}/{r} B"),
            (q, r) => format!("{}/{}", super::case::size(q), super::case::size(r)),
        };
        let mut parts = vec![
            ("workload", mode),
            ("sizes", sizes),
            ("streams", super::case::streams(spec.streams)),
        ];
        if p.burst > 1 {
            parts.push(("burst", format!("burst {}", p.burst)));
        }
        if let Some(us) = p.busy_poll_us {
            parts.push(("busy_poll", format!("busy poll {us} us")));
        }
        if p.quickack {
            parts.push(("quickack", "quickack".into()));
        }
        parts.extend(super::case::window(spec));
        parts
    }
}

impl VerdictQuestions for RrResults {
    fn threads_spin(&self, trial: &TrialResult) -> bool {
        trial.streams.iter().any(|s| {
            [&s.sender, &s.receiver]
                .iter()
                .any(|end| end.extras.get::<result::RrEnd>(result::KEY).is_some_and(|r| r.spinning))
        })
    }

    fn line_rate_applies(&self) -> bool {
        false
    }

    /// Through a shaper (a lab router's tbf, or one on an end), whether
    /// its token bucket carried the round trips faster than a wire of its
    /// rate: a message the bucket holds crosses at the hosts' speed, and
    /// the bucket refills while its direction idles.
    fn note_link(&self, trial: &mut TrialResult, spec: &TestSpec, link: &crate::model::LinkUsed) {
        if !matches!(link.source, "lab" | "qdisc") || link.bits_per_second < 1.0 {
            return;
        }
        let (Ok(p), Some(mut total)) = (spec.params::<RrParams>(), trial.sum.extras.get::<RrResult>(result::KEY))
        else {
            return;
        };
        let Some(p50_us) = total.latency.as_ref().map(|l| l.p50_us) else {
            return;
        };
        use crate::linerate::message_counted_bytes;
        let stack = p.proto.stack(link.ipv6);
        let cost = |bytes| message_counted_bytes(link.framing, link.mtu_bytes, stack, bytes);
        let (request, response) = (cost(p.request_bytes), cost(p.response_bytes));
        let wire_round_trip_us = (request + response) as f64 * 8.0 / link.bits_per_second * 1e6;
        let faster_than_wire = p50_us < wire_round_trip_us;
        // A burst's worth of the larger message fits the bucket whole.
        let fits = link
            .burst_bytes
            .is_some_and(|b| request.max(response) * u64::from(p.burst.max(1)) <= b);
        total.shaper_bucket = (faster_than_wire || fits).then(|| result::ShaperBucket {
            link_bits_per_second: link.bits_per_second,
            link_speed_source: link.source.into(),
            shaper_name: link.shaper_name.clone(),
            burst_bytes: link.burst_bytes,
            wire_round_trip_us,
            faster_than_wire,
        });
        trial.sum.extras.set(result::KEY, &total);
    }
}

impl TextView for RrResults {
    fn sum_cells(&self, trial: &TrialResult, flow: Flow) -> Option<String> {
        let ends: Vec<RrEnd> = trial
            .streams
            .iter()
            .filter(|s| s.flow == flow)
            .filter_map(|s| s.sender.extras.get(result::KEY))
            .collect();
        let transactions: u64 = ends.iter().map(|e| e.transactions).sum();
        let rate: f64 = ends.iter().map(|e| e.transactions_per_second).sum();
        Some(text::cells(transactions, rate))
    }

    fn messages_text(&self, spec: &TestSpec) -> Option<String> {
        spec.params::<RrParams>().ok().map(|p| text::messages(&p))
    }

    fn table_head(&self) -> Option<String> {
        Some(text::table_head())
    }

    fn stream_cells(&self, stream: &crate::model::StreamResult) -> Option<String> {
        let e: RrEnd = stream.sender.extras.get(result::KEY)?;
        Some(text::cells(e.transactions, e.transactions_per_second))
    }

    fn write_summary(&self, trial: &TrialResult, out: &mut dyn Write) -> io::Result<()> {
        text::write_summary(trial, out)
    }

    /// Over TLS: what the handshakes settled on and their mean time.
    fn write_details(&self, trial: &TrialResult, out: &mut dyn Write) -> io::Result<()> {
        transport::write_details(trial, transport::Details::Handshakes, out)
    }
}

impl ChartViews for RrResults {
    fn chart_kinds(&self) -> &'static [ChartKind] {
        &[ChartKind {
            name: "latency",
            help: "Latency percentile curve (p50..p99.99) of request/response runs",
            data: ChartData::LatencyHistogram {
                pointer: "/sum/rr/latency/histogram",
            },
            none_found:
                "none is a request/response run with a latency histogram: add --workload rr or change the filters",
        }]
    }
}

impl Workload for RequestResponse {
    fn results(&self) -> &'static dyn ResultKind {
        &RrResults
    }

    fn transport(&self, spec: &TestSpec) -> Option<super::transport::Proto> {
        spec.params::<RrParams>().ok().map(|p| p.proto)
    }

    fn needs_feature(&self, spec: &TestSpec) -> Option<(&'static str, &'static str)> {
        let p: RrParams = spec.params().ok()?;
        p.one_way.then_some((FEATURE_ONE_WAY, "--one-way"))
    }

    fn agent_features(&self) -> &'static [&'static str] {
        &[FEATURE_ONE_WAY]
    }

    fn name(&self) -> &'static str {
        "rr"
    }

    fn offered_rate(&self, _spec: &TestSpec) -> OfferedRate {
        // Transactions back to back, in bursts: no rate of its own.
        OfferedRate::Unlimited
    }

    fn agent_memory_bytes(&self, spec: &TestSpec) -> u64 {
        // Each responding flow holds a request and a response buffer.
        let per_flow = spec
            .params::<RrParams>()
            .map_or(spec.message_bytes.saturating_mul(2), |p| {
                p.request_bytes.saturating_add(p.response_bytes)
            });
        (spec.flows().len() as u64).saturating_mul(per_flow)
    }

    fn peer_tests(&self) -> bool {
        true
    }

    fn command_line(&self) -> &'static dyn super::args::CommandLine {
        static LINE: super::args::ArgsOf<args::RrOptions> = super::args::ArgsOf::new(args::message_option);
        &LINE
    }

    fn validate(&self, spec: &TestSpec) -> Result<(), SpecError> {
        spec.validate_common()?;
        let p: RrParams = spec.params()?;
        if spec.direction != Direction::Forward {
            return Err(SpecError::Invalid(
                "rr measures round trips started by the client; --reverse and --bidir do not apply".into(),
            ));
        }
        if spec.bytes.is_some() {
            return Err(SpecError::Invalid(
                "rr runs for a time (-t); -n is not supported".into(),
            ));
        }
        for (option, size) in [
            ("-r/--sizes (request)", p.request_bytes),
            ("-r/--sizes (response)", p.response_bytes),
        ] {
            match p.proto.delivery() {
                Delivery::Datagram => p.proto.check_message_size(option, size, MIN_UDP_MESSAGE)?,
                Delivery::Stream if size == 0 || size > MAX_MESSAGE_BYTES => {
                    return Err(out_of_range(
                        option,
                        format!("1 B..={} MiB", MAX_MESSAGE_BYTES >> 20),
                        size,
                    ))
                }
                Delivery::Stream => {}
            }
        }
        p.proto
            .available()
            .map_err(|why| SpecError::Invalid(format!("--proto {}: {why}", p.proto)))?;
        let set = [
            (p.spin, "--spin", Setting::Spin),
            (p.quickack, "--quickack", Setting::QuickAck),
            (p.busy_poll_us.is_some(), "--busy-poll", Setting::BusyPoll),
        ];
        let asked = Asked {
            chosen_by: "--proto",
            options: set
                .into_iter()
                .filter(|s| s.0)
                .map(|(_, option, setting)| (option, setting))
                .collect(),
            tls: p.tls.as_ref(),
        };
        p.proto.refuse(&asked).map_err(SpecError::Invalid)?;
        if p.crr && p.proto.is_datagram() {
            return Err(SpecError::Invalid(format!(
                "--crr opens a connection per transaction; it cannot be combined with --proto {}",
                p.proto
            )));
        }
        if p.burst == 0 || p.burst > MAX_BURST {
            return Err(out_of_range("--burst", format!("1..={MAX_BURST}"), p.burst));
        }
        if p.crr && p.spin {
            return Err(SpecError::Invalid(
                "--spin polls an open connection for data; --crr spends its time opening connections, \
                 so the two do not combine (drop --spin)"
                    .into(),
            ));
        }
        if p.crr && p.burst > 1 {
            return Err(SpecError::Invalid(
                "--burst keeps several transactions in flight on one connection; --crr has one per connection".into(),
            ));
        }
        if p.one_way && p.crr {
            return Err(SpecError::Invalid(
                "--one-way times the legs of transactions on an open connection; --crr is not built for it \
                 (drop one of them)"
                    .into(),
            ));
        }
        if p.response_bytes < p.min_response_bytes() {
            let min = p.min_response_bytes();
            return Err(SpecError::Invalid(format!(
                "--one-way: each response carries the agent's {STAMP_BYTES}-byte clock stamp{}, so it needs at least \
                 {min} bytes (got {}); give -r {},{min} or more",
                if p.proto.is_datagram() {
                    " after the 8-byte sequence number"
                } else {
                    ""
                },
                p.response_bytes,
                p.request_bytes
            )));
        }
        if p.timeout_us == 0 || p.timeout_us > 60_000_000 {
            return Err(out_of_range(
                "--timeout",
                "more than 0 s and at most 60 s",
                format!("{} us", p.timeout_us),
            ));
        }
        if let Some(us) = p.interval_us {
            if us == 0 || us > MAX_INTERVAL_SECONDS as u64 * 1_000_000 {
                return Err(out_of_range(
                    "--every",
                    format!("more than 0 s and at most {MAX_INTERVAL_SECONDS} s"),
                    format!("{us} us"),
                ));
            }
            if p.burst > 1 {
                return Err(SpecError::Invalid(
                    "--every starts one transaction at a time, every interval; --burst keeps several in \
                     flight at once: use one or the other"
                        .into(),
                ));
            }
        }
        if p.quickack && p.proto.is_datagram() {
            return Err(SpecError::Invalid(format!(
                "--quickack is a TCP option; it does not apply to --proto {}",
                p.proto
            )));
        }
        Ok(())
    }

    fn agent_side(&self, spec: &TestSpec, net: &AgentNet) -> Result<Box<dyn AgentSide>, WorkloadError> {
        let params: RrParams = spec.params()?;
        let mut agent = RrAgent {
            serving: None,
            datagrams: None,
            transactions: None,
            spec: spec.clone(),
            params: params.clone(),
        };
        if params.proto.delivery() == Delivery::Stream && !params.crr {
            let configure = configure(&spec.agent, &params);
            let options = ConnectOptions::new(&spec.agent, &configure, params.tls.as_ref());
            agent.serving = Some(params.proto.serve(net, &options, spec.flows().len())?);
            return Ok(Box::new(agent));
        }
        if params.proto.delivery() == Delivery::Datagram {
            let configure = configure(&spec.agent, &params);
            let options = ConnectOptions::new(&spec.agent, &configure, None);
            let ids: Vec<u32> = spec.flows().iter().map(|(id, _)| *id).collect();
            agent.datagrams = Some(params.proto.serve_datagrams(net, &ids, &options)?);
            return Ok(Box::new(agent));
        }
        // --crr: a connection per transaction.
        let configure = configure(&spec.agent, &params);
        let options = ConnectOptions::new(&spec.agent, &configure, params.tls.as_ref());
        agent.transactions = Some(params.proto.serve_transactions(net, &options)?);
        Ok(Box::new(agent))
    }

    fn client_side(&self, spec: &TestSpec, net: &ClientNet) -> Result<Box<dyn Side>, WorkloadError> {
        let params: RrParams = spec.params()?;
        let ids: Vec<u32> = spec.flows().iter().map(|(id, _)| *id).collect();
        let mut held = None;
        let mut crr = None;
        let ends = {
            let configure = configure(&spec.client, &params);
            match (params.proto.delivery(), params.crr) {
                (Delivery::Datagram, _) => {
                    let options = ConnectOptions::new(&spec.client, &configure, None);
                    params
                        .proto
                        .dial_datagrams(net, &ids, &options)?
                        .into_iter()
                        .map(|end| (end.id, FlowSocket::Socket(end.socket)))
                        .collect()
                }
                (Delivery::Stream, false) => {
                    let options = ConnectOptions::new(&spec.client, &configure, params.tls.as_ref());
                    let Streams { streams, held: kept } = params.proto.dial(net, first_port(net)?, &ids, &options)?;
                    held = Some(kept);
                    streams.into_iter().map(|(id, s)| (id, FlowSocket::Stream(s))).collect()
                }
                (Delivery::Stream, true) => {
                    let options = ConnectOptions::new(&spec.client, &configure, params.tls.as_ref());
                    let transactions = params.proto.dial_transactions(net, first_port(net)?, &ids, &options)?;
                    let (ends, shared) = Crr::take(transactions);
                    held = Some(shared.0);
                    crr = Some(shared.1);
                    ends.into_iter().map(|(id, d)| (id, FlowSocket::Dialing(d))).collect()
                }
            }
        };
        // Both ends on one host, nobody choosing cores: the scheduler
        // places them, one core or two, and a round trip on two pays two
        // wake-ups (23-280 us each on one VM; rr's p50 read 13 us in one
        // run and 82-85 us in the next). Say so, with what a wake-up costs.
        let nobody_pinned = spec.client.cpus.is_empty() && spec.agent.cpus.is_empty();
        let one_host = (net.same_kernel && nobody_pinned).then(|| {
            let cores = super::wakeup::first_two(&super::runner::current_thread_cpus());
            (
                "client and agent on one host (or one kernel), placed by the scheduler: on one core a round trip \
                 waits for no wake-up on another, on two it pays two (pin them with -A and --remote-affinity: -A 0 \
                 --remote-affinity 0 together, -A 0 --remote-affinity 1 apart)"
                    .to_string(),
                cores.and_then(crate::workload::wakeup::probe),
            )
        });
        Ok(Box::new(RrSide {
            role: Role::Sender,
            spec: spec.clone(),
            params,
            ends,
            one_host,
            crr,
            held,
        }))
    }
}

/// `--crr`: what every flow of a side shares.
struct Crr {
    /// The buffers the transport set for all its connections (QUIC's
    /// socket); the kernel's defaults otherwise.
    buffers: SocketBuffers,
    /// Ends the flows' waits (closes the listener or the endpoint).
    aborter: Option<Aborter>,
}

impl Crr {
    /// A side's ends, and what they share, from the transport's.
    fn take<E>(transactions: Transactions<E>) -> (Vec<(u32, E)>, (Held, Crr)) {
        let Transactions {
            ends,
            held,
            buffers,
            aborter,
        } = transactions;
        (ends, (held, Crr { buffers, aborter }))
    }
}

fn first_port(net: &ClientNet) -> Result<u16, WorkloadError> {
    net.data_ports
        .first()
        .copied()
        .ok_or_else(|| WorkloadError::Setup("the agent named no data port".into()))
}

/// Options set on every data socket of an end (and on the agent's listener).
pub(super) fn configure<'a>(
    side: &'a SideOptions,
    params: &'a RrParams,
) -> impl Fn(&Socket) -> Result<(), WorkloadError> + 'a {
    move |socket: &Socket| {
        admission::apply_buffers(socket, side)?;
        if let Some(us) = params.busy_poll_us {
            admission::set_busy_poll(socket, us)?;
        }
        if params.proto.delivery() == Delivery::Stream && params.proto.tcp_options() {
            // Several requests in flight must not wait for Nagle.
            socket
                .set_nodelay(true)
                .map_err(WorkloadError::io("setting TCP_NODELAY"))?;
        }
        Ok(())
    }
}

struct RrAgent {
    /// A stream transport's streams, one per flow.
    serving: Option<Box<dyn Serving>>,
    /// A datagram transport's endpoints, one per flow.
    datagrams: Option<Box<dyn DatagramServing>>,
    /// `--crr`: the transport's end that answers a connection per
    /// transaction.
    transactions: Option<Box<dyn TransactionServing>>,
    spec: TestSpec,
    params: RrParams,
}

impl AgentSide for RrAgent {
    fn data_ports(&self) -> Vec<u16> {
        if let Some(serving) = &self.serving {
            return vec![serving.port()];
        }
        if let Some(datagrams) = &self.datagrams {
            return datagrams.ports();
        }
        self.transactions.iter().map(|t| t.port()).collect()
    }

    fn accept(self: Box<Self>, deadline: Instant) -> Result<Box<dyn Side>, WorkloadError> {
        let ids: Vec<u32> = self.spec.flows().iter().map(|(id, _)| *id).collect();
        if let Some(serving) = self.serving {
            let Streams { streams, held } =
                serving.accept(&ids, &configure(&self.spec.agent, &self.params), deadline)?;
            let ends = streams.into_iter().map(|(id, s)| (id, FlowSocket::Stream(s))).collect();
            return Ok(RrSide::agent(self.spec, self.params, ends, None, Some(held)));
        }
        if let Some(datagrams) = self.datagrams {
            let ends = datagrams
                .accept(deadline)?
                .into_iter()
                .map(|end| (end.id, FlowSocket::Socket(end.socket)))
                .collect();
            return Ok(RrSide::agent(self.spec, self.params, ends, None, None));
        }
        // --crr: connections come during the test, and every responder
        // thread answers those that come to it.
        let transactions = self
            .transactions
            .ok_or_else(|| WorkloadError::Setup("the --crr listener was not opened".into()))?
            .accept(&ids)?;
        let (ends, (held, crr)) = Crr::take(transactions);
        let ends = ends.into_iter().map(|(id, a)| (id, FlowSocket::Answering(a))).collect();
        Ok(RrSide::agent(self.spec, self.params, ends, Some(crr), Some(held)))
    }
}

/// What a flow's thread works with.
pub(super) enum FlowSocket {
    /// A registered UDP socket.
    Socket(Socket),
    /// A stream of the flow's transport, its handshake done.
    Stream(Box<dyn Stream>),
    /// Client with `--crr`: a new connection per transaction.
    Dialing(Box<dyn Dialing>),
    /// Agent with `--crr`: its share of the connections that come.
    Answering(Box<dyn Answering>),
}

/// One end's flows.
struct RrSide {
    role: Role,
    spec: TestSpec,
    params: RrParams,
    ends: Vec<(u32, FlowSocket)>,
    /// Both ends on one host and nobody chose cores: how they were placed
    /// and what that costs (the first requester's end carries it).
    one_host: Option<(String, Option<WakeupCost>)>,
    /// `--crr`: what the flows share.
    crr: Option<Crr>,
    /// What a stream transport's connection holds while the flows run
    /// (MPTCP's listener for its joins, QUIC's endpoint).
    held: Option<Held>,
}

impl RrSide {
    /// The agent's end: its flows answer, and placement is the client's to report.
    fn agent(
        spec: TestSpec,
        params: RrParams,
        ends: Vec<(u32, FlowSocket)>,
        crr: Option<Crr>,
        held: Option<Held>,
    ) -> Box<dyn Side> {
        Box::new(RrSide {
            role: Role::Receiver,
            spec,
            params,
            ends,
            one_host: None,
            crr,
            held,
        })
    }
}

impl Side for RrSide {
    fn aborter(&self) -> Aborter {
        let sockets: Vec<&Socket> = self
            .ends
            .iter()
            .filter_map(|(_, e)| match e {
                FlowSocket::Socket(s) => Some(s),
                _ => None,
            })
            .collect();
        let mut all = vec![admission::aborter(&sockets)];
        all.extend(self.crr.as_ref().and_then(|crr| crr.aborter.clone()));
        all.extend(self.ends.iter().filter_map(|(_, e)| match e {
            FlowSocket::Stream(s) => Some(s.aborter()),
            _ => None,
        }));
        Arc::new(move || all.iter().for_each(|abort| abort()))
    }

    fn run(self: Box<Self>, control: &RunControl) -> SideOutcome {
        let exchange = Exchange {
            request: self.params.request_bytes as usize,
            response: self.params.response_bytes as usize,
            burst: self.params.burst as usize,
            timeout: Duration::from_micros(self.params.timeout_us),
            quickack: self.params.quickack,
            spin: self.params.spin,
            interval: self.params.interval_us.map(Duration::from_micros),
            omit_at: control.start + control.omit,
            one_way: self.params.one_way,
        };
        let mut tasks = Vec::new();
        let one_host = self.one_host;
        for (id, end) in self.ends {
            let buffers = match (&end, &self.crr) {
                (FlowSocket::Socket(s), _) => tcpinfo::socket_buffers(s),
                (FlowSocket::Stream(s), _) => s.buffers(),
                (_, Some(crr)) => crr.buffers.clone(),
                _ => SocketBuffers::default(),
            };
            let (exchange, role) = (exchange.clone(), self.role);
            let side = self.spec.client.clone();
            let params = self.params.clone();
            let body: StreamBody = Box::new(move |ctx: &StreamContext| {
                let (mut end, counts) = match (role, end) {
                    (Role::Sender, FlowSocket::Dialing(dialing)) => {
                        loops::crr_requester(dialing, &configure(&side, &params), &exchange, ctx)
                    }
                    (Role::Sender, FlowSocket::Socket(s)) => loops::datagram_requester(&s, &exchange, ctx),
                    (Role::Receiver, FlowSocket::Socket(s)) => loops::datagram_responder(&s, &exchange, ctx),
                    (role, FlowSocket::Stream(stream)) => {
                        loops::on_stream(stream, role == Role::Sender, &exchange, ctx)
                    }
                    (Role::Receiver, FlowSocket::Answering(answering)) => {
                        loops::crr_responder(answering, &exchange, ctx)
                    }
                    _ => (
                        TaskEnd {
                            error: Some("internal: endpoint does not fit the role".into()),
                            ..TaskEnd::default()
                        },
                        FlowCounts::default(),
                    ),
                };
                end.extras.set(result::KEY, &counts.rr);
                end.last_activity = counts.last_activity;
                end
            });
            tasks.push(StreamTask::new(id, self.role, buffers, body));
        }
        let mut outcome = match self.held {
            Some(held) => held.run(tasks, control),
            None => run_streams(tasks, control),
        };
        let mut one_host = one_host;
        for end in &mut outcome.streams {
            if let Some(mut rr) = end.extras.get::<RrEnd>(result::KEY) {
                if let Some((placement, wakeup)) = one_host.take() {
                    rr.placement = Some(placement);
                    rr.cross_core_wakeup = wakeup;
                }
                rr.transactions_per_second = if end.seconds > 0.0 {
                    rr.transactions as f64 / end.seconds
                } else {
                    0.0
                };
                outcome.transactions += rr.transactions + rr.warmup_transactions;
                end.extras.set(result::KEY, &rr);
            }
        }
        outcome
    }
}
