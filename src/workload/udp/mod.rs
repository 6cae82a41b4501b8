//! `udp`: UDP streams at an offered rate (or as fast as the sender can
//! go), one socket and one thread per stream, in either or both directions,
//! like iperf3 `-u` and netperf UDP_STREAM.
//!
//! The sender paces with a token bucket against the monotonic clock and
//! sends in batches (sendmmsg, optionally UDP GSO); every datagram carries
//! stream id, sequence number, send time and a warm-up flag
//! ([`super::transport::udp::wire`]). The receiver (recvmmsg, optionally GRO) counts
//! distinct, duplicate, late and foreign datagrams and the RFC 3550 jitter,
//! and reads its socket's drop counter. Receivers get no end-of-stream:
//! they stop once the stop flag is up and the socket has been quiet for
//! [`DRAIN`]. Loss is computed when the client merges both reports: the
//! sender's own count travels over the control connection, so a lost last
//! datagram never hides loss.

pub mod args;
pub mod result;
pub mod text;

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use socket2::Socket;

use super::runner::{run_streams, StreamBody, StreamContext, StreamTask, TaskEnd};
use super::transport;
use super::transport::udp::wire::{
    DatagramHeader, Jitter, Kind, Pacer, SeqTracker, FLAG_WARMUP, HEADER_LEN, MAX_DATAGRAM_BYTES,
};
use super::transport::udp::{monotonic_nanos, RecvBatch, SendBatch, MAX_GSO_SEGMENTS, MAX_OFFLOAD_BYTES};
use super::{
    Aborter, AgentNet, AgentSide, ChartViews, ClientNet, Figures, ResultKind, RunControl, Side, SideOutcome, SpecError,
    Stored, TestSpec, TextView, VerdictQuestions, Workload, WorkloadError,
};
use super::{Better, Metric};
use crate::model::spec::out_of_range;
use crate::model::{FlowTotal, Party, Role, TrialResult, Verdict};
use crate::probe::tcpinfo;
use crate::protocol::limits::OfferedRate;
use result::{UdpEnd, UdpReceived};
use std::io::{self, Write};

/// How long a receiver waits for stragglers once the test is over.
pub const DRAIN: Duration = Duration::from_millis(300);
/// A receiver stops at the latest this long after the stop flag.
const MAX_DRAIN: Duration = Duration::from_secs(3);
/// In a count run, the silence after which a receiver takes the datagrams
/// still missing as lost (longer at slow offers, see [`count_quiet`]).
const COUNT_QUIET: Duration = Duration::from_secs(2);
/// How often a blocked receive wakes up to look at the stop flag.
const POLL: Duration = Duration::from_millis(50);
/// The most a paced sender catches up at once after waking late: 4 ms of
/// its rate. A wake-up on a busy machine comes up to a scheduler slice late
/// (3-4 ms with two CPU hogs on 2 cores), which this covers so the average
/// holds; what it sends at once goes out at the NIC's speed, and a queue
/// on the path must hold it (a bottleneck of the offered rate needs 4 ms of
/// queue; the lab's tbf holds 16 ms beyond its bucket, switches a few ms).
/// It was 100 ms, whose catch-up overflowed a router's queue and read as
/// loss on the path (issue 66).
pub const PACER_CREDIT: Duration = Duration::from_millis(4);
/// Datagrams per sendmmsg/recvmmsg without offload.
const BATCH: usize = 64;
/// GSO buffers per sendmmsg, and GRO buffers per recvmmsg.
const GSO_BATCH: usize = 8;
const GRO_BATCH: usize = 16;
/// Receive buffer a UDP receiver asks for when the user set none: room for
/// several milliseconds of datagrams at loopback rates, so a receiving thread
/// that is briefly not scheduled does not turn into loss. The kernel caps it
/// at net.core.rmem_max; the result shows what was granted.
pub const DEFAULT_RECEIVE_BUFFER: usize = 4 << 20;
/// How long a receiver that has just drained a queue naps before taking
/// the next batch (see [`receive_stream`]).
const NAP: Duration = Duration::from_micros(50);

/// Parameters of the `udp` workload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UdpParams {
    /// Offered rate per stream; None sends as fast as the sender can.
    #[serde(default)]
    pub rate_bits_per_second: Option<u64>,
    /// UDP GSO (UDP_SEGMENT) on the sending sockets.
    #[serde(default)]
    pub gso: bool,
    /// UDP GRO on the receiving sockets.
    #[serde(default)]
    pub gro: bool,
}

/// The `udp` workload.
pub struct UdpStream;

/// Datagrams per direction in a count run (`-n`, `-k`): the byte count
/// over the datagram size, rounded up (as iperf3 sends ⌈n / -l⌉).
fn datagrams_per_direction(spec: &TestSpec) -> Option<u64> {
    Some(spec.bytes?.div_ceil(spec.message_bytes.max(1)))
}

/// The datagrams stream `id` sends in a count run: its direction's count
/// shared out among the direction's streams, the first ones taking the
/// remainder (as `tcp -n` shares bytes). Both ends compute it from the
/// spec, so the receiver knows when it has everything.
pub fn datagram_quota(spec: &TestSpec, id: u32) -> Option<u64> {
    let total = datagrams_per_direction(spec)?;
    let flows = spec.flows();
    let sender = flows.iter().find(|(f, _)| *f == id)?.1.sender();
    let ids: Vec<u32> = flows
        .iter()
        .filter(|(_, f)| f.sender() == sender)
        .map(|(f, _)| *f)
        .collect();
    let (n, index) = (ids.len() as u64, ids.iter().position(|&f| f == id)? as u64);
    Some(total / n + u64::from(index < total % n))
}

/// Checks a UDP payload size (shared with `rr --proto udp`).
pub fn check_datagram_size(option: &'static str, bytes: u64, min: u64) -> Result<(), SpecError> {
    if bytes < min || bytes > MAX_DATAGRAM_BYTES {
        return Err(out_of_range(
            option,
            format!(
                "{min}..={MAX_DATAGRAM_BYTES} bytes ({MAX_DATAGRAM_BYTES} is the largest UDP payload over IPv4; \
                 {min} bytes carry nicbench's header)"
            ),
            format!("{bytes} bytes"),
        ));
    }
    Ok(())
}

/// How UDP results read.
pub struct UdpResults;

/// The share of datagrams lost, per direction and in sum.
const LOSS_PERCENT: Metric = Metric {
    name: "loss_percent",
    option: "loss",
    label: "UDP loss",
    unit: "%",
    pointer: "/sum/udp/loss_percent",
    divisor: 1.0,
    better: Better::Lower,
};

impl Figures for UdpResults {
    fn figures(&self) -> &'static [Metric] {
        const FIGURES: [Metric; 7] = [
            Metric::RECEIVER_RATE,
            Metric::SENDER_RATE,
            LOSS_PERCENT,
            Metric::CLIENT_CPU,
            Metric::AGENT_CPU,
            Metric::CLIENT_SERVICE_DEMAND,
            Metric::AGENT_SERVICE_DEMAND,
        ];
        &FIGURES
    }

    fn loss_ratio(&self, total: &FlowTotal, _trial: &TrialResult) -> Option<f64> {
        let percent = total.extras.raw().get(result::KEY)?.get("loss_percent")?.as_f64()?;
        percent.is_finite().then_some(percent / 100.0)
    }

    fn summarize(&self, trial: &mut TrialResult) {
        result::summarize(trial)
    }
}

impl Stored for UdpResults {
    fn stored_columns(&self) -> &'static [Metric] {
        &[LOSS_PERCENT]
    }

    fn case(&self, spec: &TestSpec) -> Vec<super::CasePart> {
        let p: UdpParams = spec.params().unwrap_or_default();
        let mode = match (p.gso, p.gro) {
            (false, false) => "UDP",
            (true, false) => "UDP GSO",
            (false, true) => "UDP GRO",
            (true, true) => "UDP GSO+GRO",
        };
        let mut parts = vec![("workload", mode.to_string())];
        parts.extend(super::case::stream_parts(spec, "datagrams"));
        if let Some(rate) = p.rate_bits_per_second {
            parts.push(("rate", format!("{} per stream", super::case::rate(rate as f64))));
        }
        parts
    }
}

impl VerdictQuestions for UdpResults {
    fn findings(&self, trial: &TrialResult) -> Vec<Verdict> {
        text::findings(trial)
    }

    fn sender_reached_offer(&self, trial: &TrialResult) -> Option<bool> {
        let udp: result::UdpResult = trial.sum.extras.get(result::KEY)?;
        Some(udp.percent_of_offer()? >= result::OFFER_REACHED_PERCENT)
    }

    fn datagrams_sent(&self, trial: &TrialResult) -> Option<u64> {
        let udp: result::UdpResult = trial.sum.extras.get(result::KEY)?;
        Some(udp.sent_datagrams)
    }
}

impl TextView for UdpResults {
    fn messages_text(&self, spec: &TestSpec) -> Option<String> {
        let size = crate::units::Size(spec.message_bytes);
        Some(match datagrams_per_direction(spec) {
            Some(n) => format!("{n} datagrams of {size} per direction"),
            None => format!("{size} datagrams"),
        })
    }

    fn default_buffers_note(&self) -> Option<String> {
        Some(format!(
            "send: kernel default; receive: {} asked, which Linux doubles, up to net.core.rmem_max",
            crate::units::Size(DEFAULT_RECEIVE_BUFFER as u64)
        ))
    }

    fn write_summary(&self, trial: &TrialResult, out: &mut dyn Write) -> io::Result<()> {
        text::write_summary(trial, out)
    }
}

impl ChartViews for UdpResults {}

impl Workload for UdpStream {
    fn results(&self) -> &'static dyn ResultKind {
        &UdpResults
    }

    fn name(&self) -> &'static str {
        "udp"
    }

    fn offered_rate(&self, spec: &TestSpec) -> OfferedRate {
        // `-b max` (no rate) and parameters that do not parse send unpaced.
        match spec.params::<UdpParams>() {
            Ok(UdpParams {
                rate_bits_per_second: Some(rate),
                ..
            }) if rate > 0 => OfferedRate::PerStream(rate as f64),
            _ => OfferedRate::Unlimited,
        }
    }

    fn peer_tests(&self) -> bool {
        true
    }

    fn command_line(&self) -> &'static dyn super::args::CommandLine {
        static LINE: super::args::ArgsOf<args::UdpOptions> = super::args::ArgsOf::new(super::args::length_option);
        &LINE
    }

    fn validate(&self, spec: &TestSpec) -> Result<(), SpecError> {
        spec.validate_common()?;
        let params: UdpParams = spec.params()?;
        check_datagram_size("-l/--length", spec.message_bytes, HEADER_LEN as u64)?;
        if params.rate_bits_per_second == Some(0) {
            return Err(out_of_range("-b/--bitrate", "a rate above 0 (e.g. 100M) or 'max'", 0));
        }
        if let Some(datagrams) = datagrams_per_direction(spec) {
            if datagrams < u64::from(spec.streams) {
                return Err(out_of_range(
                    "-n/--bytes or -k/--blocks",
                    format!(
                        "at least one datagram for each of the {} streams ({} B with -l {})",
                        spec.streams,
                        u64::from(spec.streams) * spec.message_bytes,
                        spec.message_bytes
                    ),
                    format!("{datagrams} datagrams"),
                ));
            }
        }
        Ok(())
    }

    fn agent_side(&self, spec: &TestSpec, net: &AgentNet) -> Result<Box<dyn AgentSide>, WorkloadError> {
        let params: UdpParams = spec.params()?;
        let mut sockets = Vec::new();
        for (id, _) in spec.flows() {
            sockets.push((id, transport::udp::bind_udp(net.local_ip_for(id), &spec.agent)?));
        }
        Ok(Box::new(UdpAgent {
            sockets,
            spec: spec.clone(),
            params,
            net: net.clone(),
        }))
    }

    fn client_side(&self, spec: &TestSpec, net: &ClientNet) -> Result<Box<dyn Side>, WorkloadError> {
        let params: UdpParams = spec.params()?;
        let ids: Vec<u32> = spec.flows().iter().map(|(id, _)| *id).collect();
        let sockets = transport::udp::register_streams(net, &ids, &spec.client, &|_| Ok(()))?;
        let refused = vec![0; sockets.len()];
        UdpSide::new(Party::Client, spec, params, sockets, refused).map(|s| Box::new(s) as Box<dyn Side>)
    }
}

struct UdpAgent {
    sockets: Vec<(u32, Socket)>,
    spec: TestSpec,
    params: UdpParams,
    net: AgentNet,
}

impl AgentSide for UdpAgent {
    fn data_ports(&self) -> Vec<u16> {
        self.sockets
            .iter()
            .map(|(_, s)| super::transport::admission::local_port(s))
            .collect()
    }

    fn accept(self: Box<Self>, deadline: Instant) -> Result<Box<dyn Side>, WorkloadError> {
        let refused = transport::udp::await_registrations(&self.sockets, &self.net, deadline)?;
        UdpSide::new(Party::Agent, &self.spec, self.params, self.sockets, refused).map(|s| Box::new(s) as Box<dyn Side>)
    }
}

/// One stream end: its socket, role, and what registration refused.
struct UdpEndpoint {
    id: u32,
    role: Role,
    socket: Socket,
    refused: u64,
}

/// One end's streams, registered.
struct UdpSide {
    spec: TestSpec,
    params: UdpParams,
    ends: Vec<UdpEndpoint>,
}

impl UdpSide {
    fn new(
        host: Party,
        spec: &TestSpec,
        params: UdpParams,
        sockets: Vec<(u32, Socket)>,
        refused: Vec<u64>,
    ) -> Result<UdpSide, WorkloadError> {
        let flows = spec.flows();
        let mut ends = Vec::with_capacity(sockets.len());
        for ((id, socket), refused) in sockets.into_iter().zip(refused) {
            let Some((_, flow)) = flows.iter().find(|(f, _)| *f == id) else {
                continue;
            };
            let role = if flow.sender() == host {
                Role::Sender
            } else {
                Role::Receiver
            };
            match role {
                Role::Sender if params.gso => transport::udp::enable_gso(&socket, spec.message_bytes as usize)?,
                Role::Receiver if params.gro => transport::udp::enable_gro(&socket)?,
                _ => {}
            }
            if role == Role::Receiver {
                let side = match host {
                    Party::Client => &spec.client,
                    Party::Agent => &spec.agent,
                };
                if side.receive_buffer_bytes.is_none() {
                    // Best effort: a smaller grant is reported, not an error.
                    let _ = socket.set_recv_buffer_size(DEFAULT_RECEIVE_BUFFER);
                }
                transport::udp::enable_receive_timestamps(&socket)?;
                transport::udp::enable_drop_counts(&socket)?;
            }
            ends.push(UdpEndpoint {
                id,
                role,
                socket,
                refused,
            });
        }
        Ok(UdpSide {
            spec: spec.clone(),
            params,
            ends,
        })
    }
}

/// What a stream loop counted, besides what the runner counts.
#[derive(Default)]
struct EndCounts {
    udp: UdpEnd,
    /// Receiver: when the last datagram arrived (its rate ends there).
    last_data_at: Option<Instant>,
}

impl Side for UdpSide {
    fn aborter(&self) -> Aborter {
        super::transport::admission::aborter(&self.ends.iter().map(|e| &e.socket).collect::<Vec<_>>())
    }

    fn run(self: Box<Self>, control: &RunControl) -> SideOutcome {
        let dg = self.spec.message_bytes as usize;
        let (start, omit_at) = (control.start, control.start + control.omit);
        let mut tasks = Vec::new();
        for end in self.ends {
            let buffers = tcpinfo::socket_buffers(&end.socket);
            let (id, socket, refused) = (end.id, end.socket, end.refused);
            let params = self.params.clone();
            let quota = datagram_quota(&self.spec, id);
            let body: StreamBody = match end.role {
                Role::Sender => Box::new(move |ctx: &StreamContext| {
                    finish(send_stream(&socket, id, dg, &params, quota, (start, omit_at), ctx))
                }),
                Role::Receiver => Box::new(move |ctx: &StreamContext| {
                    let expect = quota.map(|datagrams| Expected {
                        datagrams,
                        quiet: count_quiet(dg, params.rate_bits_per_second),
                    });
                    finish(receive_stream(&socket, id, dg, params.gro, refused, expect, ctx))
                }),
            };
            tasks.push(StreamTask::new(id, end.role, buffers, body));
        }
        run_streams(tasks, control)
    }
}

/// Lets this thread's short sleeps end on time (the default slack is 50 us).
fn set_timer_slack(slack: Duration) {
    // SAFETY: PR_SET_TIMERSLACK takes a value and changes only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack.as_nanos() as libc::c_ulong, 0, 0, 0) };
}

/// The stream end with the UDP counts; a receiver's time runs to its last
/// datagram, not to the end of the drain wait.
fn finish((mut end, counts): (TaskEnd, EndCounts)) -> TaskEnd {
    end.extras.set(result::KEY, &counts.udp);
    end.last_activity = counts.last_data_at;
    end
}

/// Is this send error one to count and go on with?
fn transient(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOBUFS | libc::ECONNREFUSED | libc::EAGAIN | libc::EINTR)
    )
}

/// The pacer's credit at `rate` when a send takes `per_call` bytes:
/// [`PACER_CREDIT`] of the rate, or two sends' worth if more. A wake-up
/// that late is caught up, so the average holds; a longer stall is not
/// made up for.
fn pacer_credit_bytes(rate: u64, per_call: u64) -> u64 {
    let credit = (rate as f64 / 8.0 * PACER_CREDIT.as_secs_f64()) as u64;
    (per_call * 2).max(credit)
}

/// The sender's loop: pace, stamp, send a batch, count; in a count run,
/// until `quota` datagrams are out.
fn send_stream(
    socket: &Socket,
    id: u32,
    dg: usize,
    params: &UdpParams,
    quota: Option<u64>,
    (start, omit_at): (Instant, Instant),
    ctx: &StreamContext,
) -> (TaskEnd, EndCounts) {
    let fd = socket.as_raw_fd();
    let segments = if params.gso {
        (MAX_OFFLOAD_BYTES / dg).clamp(1, MAX_GSO_SEGMENTS)
    } else {
        1
    };
    let entries = if params.gso { GSO_BATCH } else { BATCH };
    let max_datagrams = entries * segments;
    let mut batch = SendBatch::new(entries, segments * dg);
    // Send about a millisecond's worth at a time when paced.
    let (mut pacer, per_call) = match params.rate_bits_per_second {
        Some(rate) => {
            let per_ms = (rate as f64 / 8.0 / 1000.0 / dg as f64).ceil() as usize;
            let per_call = per_ms.clamp(1, max_datagrams);
            (
                Some(Pacer::new(rate, pacer_credit_bytes(rate, (per_call * dg) as u64))),
                per_call,
            )
        }
        None => (None, max_datagrams),
    };
    let mut lens = vec![0usize; entries];
    let (mut seq, mut total, mut syscalls) = (0u64, 0u64, 0u64);
    // Bytes sent back to back since the pacer last waited, and the most.
    let (mut burst, mut largest_burst) = (0u64, 0u64);
    let mut udp = UdpEnd {
        datagram_bytes: dg as u64,
        segmentation_offload: params.gso,
        offered_bits_per_second: params.rate_bits_per_second.map(|r| r as f64),
        ..UdpEnd::default()
    };
    let mut error = None;
    // The pacer counts from the side's start, like the rate in the result.
    while !ctx.stop.load(Ordering::Relaxed) {
        let left = quota.map_or(usize::MAX, |q| q.saturating_sub(seq).min(usize::MAX as u64) as usize);
        if left == 0 {
            break;
        }
        let now = Instant::now();
        let mut n = max_datagrams.min(left);
        if let Some(p) = pacer.as_mut() {
            let allowed = (p.allowance(now - start) / dg as u64) as usize;
            if allowed < per_call.min(left) {
                // A wait ends the burst sent since the last one.
                largest_burst = largest_burst.max(burst);
                burst = 0;
                std::thread::sleep(p.wait_for(now - start, (per_call * dg) as u64).min(POLL));
                continue;
            }
            n = allowed.min(max_datagrams).min(left);
        }
        let flags = if now < omit_at { FLAG_WARMUP } else { 0 };
        let used = stamp_batch(&mut batch, &mut lens, (id, seq, flags), n, segments, dg);
        let sent_entries = match batch.send(fd, &lens[..used]) {
            Ok(m) => m,
            Err(e) if transient(&e) => {
                udp.send_errors += 1;
                std::thread::yield_now();
                continue;
            }
            Err(e) => {
                let hint = if params.gso && matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EMSGSIZE)) {
                    " (with --gso every datagram must fit the path MTU: -l at most MTU - 28 for IPv4, \
                     MTU - 48 for IPv6)"
                } else {
                    ""
                };
                error = Some(format!("send failed after {seq} datagrams: {e}{hint}"));
                break;
            }
        };
        syscalls += 1;
        let sent: usize = lens[..sent_entries].iter().map(|l| l / dg).sum();
        seq += sent as u64;
        if flags == FLAG_WARMUP {
            udp.warmup_datagrams += sent as u64;
        } else {
            udp.datagrams += sent as u64;
        }
        total += (sent * dg) as u64;
        ctx.bytes.store(total, Ordering::Relaxed);
        if let Some(p) = pacer.as_mut() {
            p.spend((sent * dg) as u64);
            burst += (sent * dg) as u64;
        }
    }
    udp.largest_burst_seconds = params
        .rate_bits_per_second
        .map(|rate| largest_burst.max(burst) as f64 * 8.0 / rate as f64);
    udp.datagrams_per_syscall = if syscalls > 0 {
        seq as f64 / syscalls as f64
    } else {
        0.0
    };
    (
        TaskEnd {
            error,
            ..TaskEnd::default()
        },
        EndCounts {
            udp,
            last_data_at: None,
        },
    )
}

/// Writes the headers of `n` datagrams (sequence numbers from `seq`) into
/// the batch, `segments` per buffer, and sets the buffer lengths; returns
/// how many buffers are in use.
fn stamp_batch(
    batch: &mut SendBatch,
    lens: &mut [usize],
    (id, seq, flags): (u32, u64, u8),
    n: usize,
    segments: usize,
    dg: usize,
) -> usize {
    let stamp = monotonic_nanos();
    for k in 0..n {
        let at = (k % segments) * dg;
        DatagramHeader::data(id, seq + k as u64, stamp, flags).write(&mut batch.buffers[k / segments][at..]);
    }
    let used = n.div_ceil(segments);
    for (e, len) in lens.iter_mut().enumerate().take(used) {
        *len = (n - e * segments).min(segments) * dg;
    }
    used
}

/// What a receiver has counted so far.
struct Receiving {
    id: u32,
    tracker: SeqTracker,
    jitter: Jitter,
    bytes: u64,
    datagrams: u64,
    malformed: u64,
    syscalls: u64,
    /// The socket's drops when the first datagram sent after the warm-up
    /// was queued: those of the warm-up.
    warmup_drops: Option<u64>,
}

impl Receiving {
    /// Nothing received yet on stream `id`.
    fn new(id: u32) -> Receiving {
        Receiving {
            id,
            tracker: SeqTracker::default(),
            jitter: Jitter::default(),
            bytes: 0,
            datagrams: 0,
            malformed: 0,
            syscalls: 0,
            warmup_drops: None,
        }
    }

    /// Accounts the `n` messages of one `recvmmsg`; true if any was ours.
    /// Jitter uses each datagram's kernel arrival time where there is one
    /// and `now` (real-time clock, ns) otherwise.
    fn take(&mut self, batch: &RecvBatch, n: usize, now: u64) -> bool {
        let before = self.datagrams;
        self.syscalls += 1;
        for i in 0..n {
            let message = batch.message(i);
            let (len, arrival) = (message.len, message.arrival_nanos.unwrap_or(now));
            let segment = message.segment.unwrap_or(len).max(1);
            for chunk in batch.buffers[i][..len].chunks(segment) {
                match DatagramHeader::read(chunk) {
                    Some(h) if h.kind == Kind::Data && h.stream_id == self.id => {
                        let warmup = h.flags & FLAG_WARMUP != 0;
                        if !warmup && self.warmup_drops.is_none() {
                            self.warmup_drops = Some(u64::from(message.drops_before.unwrap_or(0)));
                        }
                        self.tracker.record(h.seq, warmup);
                        self.jitter.update(h.send_nanos, arrival);
                        self.bytes += chunk.len() as u64;
                        self.datagrams += 1;
                    }
                    // A repeated registration whose ack was lost.
                    Some(h) if h.kind == Kind::Register => {}
                    _ => self.malformed += 1,
                }
            }
        }
        self.datagrams > before
    }

    fn end(self, dg: usize, gro: bool, refused: u64, socket: &Socket) -> UdpEnd {
        UdpEnd {
            datagram_bytes: dg as u64,
            datagrams: self.tracker.received,
            warmup_datagrams: self.tracker.warmup,
            datagrams_per_syscall: if self.syscalls > 0 {
                self.datagrams as f64 / self.syscalls as f64
            } else {
                0.0
            },
            segmentation_offload: gro,
            offered_bits_per_second: None,
            send_errors: 0,
            largest_burst_seconds: None,
            received: Some(UdpReceived {
                duplicate_datagrams: self.tracker.duplicates,
                out_of_order_datagrams: self.tracker.out_of_order,
                malformed_datagrams: self.malformed,
                refused_datagrams: refused,
                jitter_us: self.jitter.micros(),
                socket_drops: transport::udp::socket_drops(socket).unwrap_or(0),
                warmup_socket_drops: Some(self.warmup_drops.unwrap_or(0)),
                lost_at_end_datagrams: None,
            }),
        }
    }
}

/// What a receiver of a count run (`-n`, `-k`) waits for.
#[derive(Debug, Clone, Copy)]
struct Expected {
    /// The datagrams its sender sends in all.
    datagrams: u64,
    /// How long a silence ends the stream when some never arrive.
    quiet: Duration,
}

/// Silence after which a count run's receiver stops waiting for datagrams
/// that were lost: [`COUNT_QUIET`], or ten datagrams' time at a slow offer.
fn count_quiet(dg: usize, rate: Option<u64>) -> Duration {
    let per_datagram = rate.map_or(0.0, |r| dg as f64 * 8.0 / r.max(1) as f64);
    COUNT_QUIET.max(Duration::from_secs_f64((per_datagram * 10.0).min(600.0)))
}

/// The receiver's loop: drain batches, account each datagram, stop once
/// the test is over and the socket has gone quiet; in a count run, once
/// every datagram is in, or the socket was quiet for the count's wait.
///
/// A receiver that sleeps in the kernel whenever its queue is empty makes
/// the sender wake it for almost every datagram (about 2.4 datagrams per
/// receive at 300 k/s on loopback), and the sender pays for that wake-up.
/// So, like NAPI in the kernel, this one coalesces once datagrams queue up:
/// after a receive that found two or more and drained the queue, it naps
/// [`NAP`] and then takes what has queued meanwhile without waiting; a full
/// batch is followed by the next at once. A receive that finds one datagram
/// or none means the receiver keeps up, so it blocks until the next one, as
/// a plain receiver would: at low rates napping would only add wake-ups.
/// Jitter uses the kernel's arrival stamps (SO_TIMESTAMPNS), so napping does
/// not change it.
fn receive_stream(
    socket: &Socket,
    id: u32,
    dg: usize,
    gro: bool,
    refused: u64,
    expected: Option<Expected>,
    ctx: &StreamContext,
) -> (TaskEnd, EndCounts) {
    let fd = socket.as_raw_fd();
    let started = Instant::now();
    let _ = socket.set_read_timeout(Some(POLL));
    let mut batch = if gro {
        RecvBatch::new(GRO_BATCH, 65_536)
    } else {
        RecvBatch::new(BATCH, dg)
    };
    let mut counts = Receiving::new(id);
    let mut last_data_at: Option<Instant> = None;
    let mut stop_seen: Option<Instant> = None;
    let mut error = None;
    set_timer_slack(Duration::from_micros(1));
    // Did the last receive find a queue? Then take the next without waiting.
    let mut queued = false;
    loop {
        let received = if queued { batch.recv_queued(fd) } else { batch.recv(fd) };
        queued = matches!(received, Ok(n) if n >= 2);
        match received {
            Ok(n) => {
                if counts.take(&batch, n, transport::udp::realtime_nanos()) {
                    ctx.bytes.store(counts.bytes, Ordering::Relaxed);
                    last_data_at = Some(Instant::now());
                }
                // With GRO a buffer holds dozens of datagrams, so there is
                // no wake-up per datagram to save, and a nap only let the
                // socket overflow: 4.5-14% lost against 2.8-4.6% without,
                // at the same rate (--gso --gro on loopback, 4 rounds).
                if queued && n < batch.capacity() && !gro {
                    // Drained a queue: let the next batch gather instead of being woken per datagram.
                    std::thread::sleep(NAP);
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted
                ) || e.raw_os_error() == Some(libc::ECONNREFUSED) => {}
            Err(e) => {
                error = Some(format!("receive failed after {} datagrams: {e}", counts.datagrams));
                break;
            }
        }
        if let Some(expected) = expected {
            if counts.tracker.received + counts.tracker.warmup >= expected.datagrams {
                break;
            }
            // The rest were lost (the sender's count says how many).
            if last_data_at.unwrap_or(started).elapsed() >= expected.quiet {
                break;
            }
        }
        if ctx.stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            let since = *stop_seen.get_or_insert(now);
            let quiet_from = last_data_at.map_or(since, |l| l.max(since));
            if now - quiet_from >= DRAIN || now - since >= MAX_DRAIN {
                break;
            }
        }
    }
    let counts_next = counts.tracker.next_seq();
    let mut udp = counts.end(dg, gro, refused, socket);
    if let (Some(expected), Some(received)) = (expected, udp.received.as_mut()) {
        received.lost_at_end_datagrams = Some(expected.datagrams.saturating_sub(counts_next));
    }
    (
        TaskEnd {
            error,
            ..TaskEnd::default()
        },
        EndCounts { udp, last_data_at },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::spec::tests::spec;
    use crate::workload::SideOptions;

    /// Issue 66: a sender that woke 100 ms late sent 100 ms of its rate at
    /// once and overflowed a router's queue; now at most 4 ms of it.
    #[test]
    fn the_pacer_catches_up_at_most_a_few_milliseconds_after_a_stall() {
        let rate = 100_000_000; // 12.5 MB/s
        let (dg, per_call) = (1472u64, 9u64); // about a millisecond a send
        let mut pacer = Pacer::new(rate, pacer_credit_bytes(rate, per_call * dg));
        let after_stall = pacer.allowance(Duration::from_millis(100));
        assert_eq!(after_stall, 50_000, "4 ms of 12.5 MB/s");
        // At a rate so low that two sends are more, two sends.
        assert_eq!(pacer_credit_bytes(1_000_000, 2 * dg), 4 * dg);
    }

    #[test]
    fn the_receiver_counts_junk_from_its_peer_and_keeps_the_rest() {
        let ip = "127.0.0.1".parse().unwrap();
        let receiver = transport::udp::bind_udp(ip, &SideOptions::default()).unwrap();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sender
            .connect(receiver.local_addr().unwrap().as_socket().unwrap())
            .unwrap();
        let mut datagram = vec![0u8; 100];
        for seq in [0u64, 1, 3, 2, 2] {
            DatagramHeader::data(5, seq, 1000 + seq, 0).write(&mut datagram);
            sender.send(&datagram).unwrap();
        }
        DatagramHeader::data(6, 9, 0, 0).write(&mut datagram); // another stream's id
        sender.send(&datagram).unwrap();
        sender.send(b"short").unwrap();
        sender.send(&[0xffu8; 100]).unwrap();
        let _ = receiver.set_read_timeout(Some(Duration::from_secs(1)));
        let mut batch = RecvBatch::new(BATCH, 100);
        let mut counts = Receiving::new(5);
        let mut seen = 0;
        while seen < 8 {
            let n = batch.recv(receiver.as_raw_fd()).unwrap();
            counts.take(&batch, n, transport::udp::realtime_nanos());
            seen += n;
        }
        let end = counts.end(100, false, 0, &receiver);
        let received = end.received.unwrap();
        assert_eq!(end.datagrams, 4);
        assert_eq!(received.duplicate_datagrams, 1);
        assert_eq!(received.out_of_order_datagrams, 1);
        assert_eq!(received.malformed_datagrams, 3);
    }

    /// Regression (issue 43): "LOST 99.60% (11949 of 11997 datagrams)"
    /// stood beside "14970 dropped at the receiving socket": the drops
    /// counted the warm-up, the loss did not. The socket's drops when the
    /// first measured datagram was queued are the warm-up's.
    #[test]
    fn drops_during_the_warm_up_are_told_from_the_measured_ones() {
        let ip = "127.0.0.1".parse().unwrap();
        let receiver = transport::udp::bind_udp(ip, &SideOptions::default()).unwrap();
        receiver.set_recv_buffer_size(4096).unwrap();
        transport::udp::enable_drop_counts(&receiver).unwrap();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sender
            .connect(receiver.local_addr().unwrap().as_socket().unwrap())
            .unwrap();
        // The warm-up overflows the unread socket; loopback delivers (or
        // drops) each datagram inside send(2).
        let mut datagram = vec![0u8; 1000];
        let mut seq = 0u64;
        while transport::udp::socket_drops(&receiver).unwrap() < 20 {
            DatagramHeader::data(5, seq, 0, FLAG_WARMUP).write(&mut datagram);
            sender.send(&datagram).unwrap();
            seq += 1;
            assert!(seq < 100_000, "a 4 KiB socket never dropped");
        }
        let warmup_drops = transport::udp::socket_drops(&receiver).unwrap();
        let _ = receiver.set_read_timeout(Some(Duration::from_secs(1)));
        let mut batch = RecvBatch::new(BATCH, 1000);
        let mut counts = Receiving::new(5);
        // Drain the warm-up, then the measured part: two datagrams, none dropped.
        let queued = seq - warmup_drops;
        let mut seen = 0;
        while seen < queued {
            let n = batch.recv(receiver.as_raw_fd()).unwrap();
            counts.take(&batch, n, transport::udp::realtime_nanos());
            seen += n as u64;
        }
        assert_eq!(counts.warmup_drops, None, "no measured datagram yet");
        for _ in 0..2 {
            DatagramHeader::data(5, seq, 0, 0).write(&mut datagram);
            sender.send(&datagram).unwrap();
            seq += 1;
        }
        let mut seen = 0;
        while seen < 2 {
            let n = batch.recv(receiver.as_raw_fd()).unwrap();
            counts.take(&batch, n, transport::udp::realtime_nanos());
            seen += n;
        }
        let received = counts.end(1000, false, 0, &receiver).received.unwrap();
        assert_eq!(received.socket_drops, warmup_drops);
        assert_eq!(received.warmup_socket_drops, Some(warmup_drops));
    }

    #[test]
    fn sizes_rates_and_byte_counts_are_checked() {
        let mut s = spec("udp");
        s.message_bytes = 65_508;
        assert!(UdpStream.validate(&s).unwrap_err().to_string().contains("65507"));
        s.message_bytes = 1400;
        s.params = serde_json::json!({"rate_bits_per_second": 0});
        assert!(UdpStream.validate(&s).unwrap_err().to_string().contains("-b/--bitrate"));
        s.params = serde_json::Value::Null;
        // A count run: 1000 B is one datagram of 1400 B, enough for one stream.
        s.bytes = Some(1000);
        assert!(UdpStream.validate(&s).is_ok());
        s.streams = 2;
        let e = UdpStream.validate(&s).unwrap_err().to_string();
        assert!(
            e.contains("at least one datagram for each of the 2 streams (2800 B with -l 1400), got 1 datagrams"),
            "{e}"
        );
        s.bytes = None;
        assert!(UdpStream.validate(&s).is_ok());
    }

    #[test]
    fn a_count_is_shared_out_among_each_directions_streams() {
        let mut s = spec("udp");
        s.message_bytes = 1400;
        s.streams = 3;
        s.direction = crate::model::Direction::Bidir;
        assert_eq!(datagram_quota(&s, 1), None, "a timed run has no quota");
        // 10 datagrams and one byte: 11 datagrams per direction, 4 + 4 + 3.
        s.bytes = Some(14_001);
        let flows = s.flows();
        for sender in [Party::Client, Party::Agent] {
            let quotas: Vec<u64> = flows
                .iter()
                .filter(|(_, f)| f.sender() == sender)
                .map(|(id, _)| datagram_quota(&s, *id).unwrap())
                .collect();
            assert_eq!(quotas, [4, 4, 3], "{sender:?}");
        }
        assert_eq!(datagram_quota(&s, 99), None, "no such stream");
    }

    #[test]
    fn a_count_receiver_waits_longer_at_slow_offers() {
        assert_eq!(count_quiet(1400, None), COUNT_QUIET);
        assert_eq!(count_quiet(1400, Some(1_000_000_000)), COUNT_QUIET);
        // 1400 B at 1 kbit/s: 11.2 s a datagram, ten of them.
        assert_eq!(count_quiet(1400, Some(1000)), Duration::from_secs(112));
    }
}
