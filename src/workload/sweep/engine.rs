//! The sweep's data path: the client's driver, which runs every point and
//! times its batches (one clock read per batch, none per message), and the
//! agent's server, which follows the per-point headers. Both run as stream
//! bodies on the shared runner (`workload::runner::run_streams`), which
//! gives them their thread, pinning and CPU accounting. Neither prints;
//! progress leaves through the runner's progress callback.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use socket2::Socket;

use super::points::{self, batches, estimate, repetitions, Spread};
use super::result::{SweepPoint, SweepResult};
use super::wire::{AgentPlace, FrameHeader, Op, HEADER_LEN};
use super::{Mode, SweepParams};
use crate::probe::tcpinfo;
use crate::units::{bits_per_second, Rate};
use crate::workload::address_proof::ProvenAddresses;
use crate::workload::runner::{
    current_thread_cpus, pin_current_thread, release_current_thread, Affinity, Progress, StreamContext, TaskEnd,
    AFFINITY_KEY,
};
use crate::workload::transport::stream::{Held, Stream};
use crate::workload::transport::wire::{timed_out, Wire};
use crate::workload::transport::Delivery;

/// How long the client waits for a UDP echo before counting it lost.
pub const UDP_ECHO_TIMEOUT: Duration = Duration::from_secs(1);
/// How often a blocked agent looks at its stop flag.
const AGENT_POLL_MS: i32 = 200;
/// How long the client waits for the agent's end after the last header.
const END_WAIT: Duration = Duration::from_secs(2);

/// The client's sockets and its one message buffer, allocated once for the
/// whole sweep. Ping-pong receives the echo into the buffer it sent from,
/// as the agent does: each end touches one message's worth of memory, as
/// NetPIPE's ends do.
struct Link<'w> {
    /// The connection's kernel socket (none over QUIC), for its figures
    /// and, over UDP, the control messages' poll.
    socket: Option<&'w Socket>,
    /// The connection the sizes, the stream messages and the control
    /// messages go over: the socket, TLS over it, or a QUIC stream.
    wire: &'w mut dyn Wire,
    udp: Option<UdpSocket>,
    buffer: Vec<u8>,
    /// Bytes sent, probes and warm-up exchanges included.
    sent: u64,
    /// Ask the agent to run its end on a core apart from ours (the wire's
    /// `pin apart` flag): set when this end chose its core.
    pin_apart: bool,
    /// Where the agent runs its end of the next point (the wire's `place`).
    place: Option<AgentPlace>,
    /// The placements by turns, when the sweep takes them.
    turns: Option<LinkTurns>,
}

/// Where both ends of a sweep on one host run for a round, when the sweep
/// places them by turns: pass 1 (and 3, ...) pinned together on one core,
/// pass 2 (and 4, ...) where the scheduler puts them. A small message's
/// round trip is fastest on one core (no wake-up on another; 5 us against
/// 40-70 us on one VM), a large one's on two (the copies run side by
/// side), and the scheduler alone chose differently from run to run; each
/// point is the faster of its two placements, the host's best.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Together,
    Scheduler,
}

impl Place {
    /// The turns, in pass order.
    pub const BY_TURNS: [Place; 2] = [Place::Together, Place::Scheduler];

    /// Its name in the result (`points[].placement`).
    pub fn name(self) -> &'static str {
        match self {
            Place::Together => "together",
            Place::Scheduler => "scheduler",
        }
    }
}

/// The client's part of the placements by turns.
struct LinkTurns {
    /// The core both ends share when together.
    core: u32,
    /// The cores this thread may use, given back for the scheduler's turn.
    allowed: Vec<u32>,
    /// The turn the ends are in (an index of [`Place::BY_TURNS`]).
    current: Option<usize>,
    /// The first pin or release the kernel refused.
    error: Option<String>,
}

impl Link<'_> {
    /// Places both ends as turn `slot` of [`Place::BY_TURNS`] asks: this
    /// thread at once, the agent's end with the next header.
    fn take_turn(&mut self, slot: usize) {
        let Some(turns) = &mut self.turns else {
            return;
        };
        if turns.current == Some(slot) {
            return;
        }
        turns.current = Some(slot);
        let error = match Place::BY_TURNS[slot] {
            Place::Together => {
                self.place = Some(AgentPlace::Core(turns.core as u16));
                pin_current_thread(turns.core).error
            }
            Place::Scheduler => {
                self.place = Some(AgentPlace::Scheduler);
                release_current_thread(&turns.allowed).err()
            }
        };
        if let Some(e) = error {
            turns.error.get_or_insert(e);
        }
    }
}

/// What one point measured: the time of each timed batch, per exchange.
#[derive(Default)]
struct Timing {
    /// Seconds per exchange of every timed batch, in order.
    batch_each: Vec<f64>,
    /// Timed exchanges and their seconds, all batches together.
    exchanges: u64,
    timed_seconds: f64,
    /// Batches with a lost UDP echo are not timed.
    lost: u64,
    /// Wall time of the point, every round.
    seconds: f64,
    rounds: u32,
    /// The fastest batch of each pass it ran in: (pass, seconds per exchange).
    pass_best: Vec<(u32, f64)>,
}

impl Timing {
    fn spread(&self) -> Option<Spread> {
        Spread::of(&self.batch_each)
    }

    fn join(&mut self, other: Timing) {
        self.batch_each.extend(other.batch_each);
        self.exchanges += other.exchanges;
        self.timed_seconds += other.timed_seconds;
        self.lost += other.lost;
        self.seconds += other.seconds;
        self.rounds += other.rounds;
        self.pass_best.extend(other.pass_best);
    }

    /// Marks this round as pass `pass` of the sweep: its fastest batch is
    /// that pass's figure.
    fn into_pass(mut self, pass: u32) -> Timing {
        if let Some(best) = self.best() {
            self.pass_best.push((pass, best));
        }
        self
    }

    /// The fastest batch, seconds per exchange.
    fn best(&self) -> Option<f64> {
        self.batch_each.iter().copied().min_by(f64::total_cmp)
    }

    /// Mean time of one timed exchange.
    fn mean_each(&self) -> Option<f64> {
        (self.exchanges > 0).then(|| self.timed_seconds / self.exchanges as f64)
    }
}

impl Link<'_> {
    fn header(&mut self, header: &FrameHeader) -> io::Result<()> {
        self.wire.write_all(&header.encode())
    }

    /// Sends the end header and waits (a while) for the agent's end of
    /// the stream: over QUIC the connection is closed once this returns,
    /// and a close would drop a header still in quinn's buffers.
    fn end(&mut self) -> io::Result<()> {
        self.header(&FrameHeader::END)?;
        self.wire.close_write();
        self.wire.set_read_timeout(Some(END_WAIT));
        let mut rest = [0u8; 64];
        loop {
            match self.wire.read(&mut rest) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                // An agent that does not close its side: the header went.
                Err(e) if timed_out(&e) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// One exchange of `op`: a round trip, or (streaming) one message.
    fn exchange(&mut self, op: Op, size: usize) -> io::Result<bool> {
        match op {
            Op::TcpPingPong => {
                self.wire.write_all(&self.buffer[..size])?;
                self.wire.read_exact(&mut self.buffer[..size])?;
            }
            Op::TcpStream => self.wire.write_all(&self.buffer[..size])?,
            Op::UdpPingPong => {
                let udp = self.udp.as_ref().expect("UDP sweeps have a UDP socket");
                udp.send(&self.buffer[..size])?;
                match udp.recv(&mut self.buffer) {
                    Ok(n) if n == size => {}
                    Ok(_) => return Ok(false),
                    Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                        return Ok(false)
                    }
                    Err(e) => return Err(e),
                }
            }
            Op::End => {}
        }
        self.sent += size as u64;
        Ok(true)
    }

    /// `count` exchanges; for streaming, then the agent's acknowledgement.
    /// Returns how many exchanges lost their echo.
    fn batch(&mut self, op: Op, size: usize, count: u64) -> io::Result<u64> {
        let mut lost = 0;
        for _ in 0..count {
            if !self.exchange(op, size)? {
                lost += 1;
            }
        }
        if op == Op::TcpStream {
            let mut ack = [0u8; 1];
            self.wire.read_exact(&mut ack)?;
        }
        Ok(lost)
    }

    /// Runs one round of a point: header, one untimed warm-up exchange,
    /// `exchanges` timed ones in at most `batch_count` batches.
    fn point(&mut self, op: Op, size: u64, exchanges: u64, batch_count: u64) -> io::Result<Timing> {
        let (batch_count, per_batch) = batches(exchanges, batch_count);
        let header = FrameHeader {
            op,
            size,
            batches: batch_count as u32,
            warmup: 1,
            per_batch,
            pin_apart: self.pin_apart,
            place: self.place,
        };
        if op == Op::UdpPingPong {
            self.drain_udp();
        }
        let started = Instant::now();
        self.header(&header)?;
        let size = size as usize;
        let mut t = Timing {
            lost: self.batch(op, size, 1)?,
            rounds: 1,
            ..Timing::default()
        };
        for _ in 0..batch_count {
            let t0 = Instant::now();
            let batch_lost = self.batch(op, size, per_batch)?;
            let seconds = t0.elapsed().as_secs_f64();
            t.lost += batch_lost;
            if batch_lost == 0 {
                t.batch_each.push(seconds / per_batch as f64);
                t.exchanges += per_batch;
                t.timed_seconds += seconds;
            }
        }
        if op == Op::UdpPingPong {
            self.wire.write_all(&[0u8; 8])?;
            let mut echoed = [0u8; 8];
            self.wire.read_exact(&mut echoed)?;
        }
        t.seconds = started.elapsed().as_secs_f64();
        Ok(t)
    }

    /// Untimed exchanges of `size`, repeated with four times as many until
    /// they took `warm_up_seconds`; the mean time of one exchange of the last.
    fn probe(&mut self, op: Op, size: u64, warm_up_seconds: f64) -> io::Result<Option<f64>> {
        let mut count = points::MIN_EXCHANGES;
        loop {
            let t = self.point(op, size, count, points::BATCHES)?;
            if t.seconds >= warm_up_seconds || count >= points::MAX_EXCHANGES / 4 {
                return Ok(t.mean_each());
            }
            count *= 4;
        }
    }

    /// Drops late echoes of an earlier point.
    fn drain_udp(&mut self) {
        if let Some(udp) = &self.udp {
            let fd = udp.as_raw_fd();
            // SAFETY: the buffer outlives the call.
            while unsafe {
                libc::recv(
                    fd,
                    self.buffer.as_mut_ptr() as *mut libc::c_void,
                    self.buffer.len(),
                    libc::MSG_DONTWAIT,
                )
            } >= 0
            {}
        }
    }
}

/// Turns batch times into a point. Ping-pong: latency = round trip / 2 and
/// bandwidth = size / (round trip / 2); streaming: time per message. The
/// point's figure is its fastest batch (NetPIPE's best of its trials); the
/// median and slowest batch give its spread.
fn point_of(size: u64, mode: Mode, t: &Timing) -> SweepPoint {
    let spread = t.spread().expect("a point with timed batches");
    let mean = t.timed_seconds / t.exchanges as f64;
    let one_way = |each: f64| one_way(mode, each);
    let bandwidth = |each: f64| bits_per_second(size, one_way(each));
    SweepPoint {
        size_bytes: size,
        exchanges: t.exchanges,
        batches: t.batch_each.len() as u32,
        seconds: t.seconds,
        best_latency_us: one_way(spread.min) * 1e6,
        mean_latency_us: one_way(mean) * 1e6,
        best_bits_per_second: bandwidth(spread.min),
        mean_bits_per_second: bandwidth(mean),
        lost: t.lost,
        median_latency_us: Some(one_way(spread.median) * 1e6),
        max_latency_us: Some(one_way(spread.max) * 1e6),
        spread_percent: Some(spread.percent()),
        rounds: Some(t.rounds),
        wide: spread.is_wide(),
        pass_latency_us: t.pass_best.iter().map(|&(_, each)| one_way(each) * 1e6).collect(),
        placement: None,
        together_latency_us: None,
        scheduler_latency_us: None,
    }
}

/// Seconds of one exchange as the point reports it: ping-pong, half the
/// round trip (NetPIPE's figure); streaming, the time per message.
fn one_way(mode: Mode, each: f64) -> f64 {
    match mode {
        Mode::PingPong => each / 2.0,
        Mode::Stream => each,
    }
}

/// A size's rounds in each placement of [`Place::BY_TURNS`]; the first
/// alone when the sweep does not take turns.
type Slots = [Option<Timing>; 2];

/// The slot whose fastest batch is the faster (the first on a tie).
fn faster(slots: &Slots) -> Option<usize> {
    let best = |i: usize| slots[i].as_ref().and_then(Timing::best);
    match (best(0), best(1)) {
        (Some(a), Some(b)) => Some(usize::from(b < a)),
        (Some(_), None) => Some(0),
        (None, Some(_)) => Some(1),
        (None, None) => None,
    }
}

/// A size's point: the batches of its faster placement; its wall time,
/// rounds and lost echoes in both; each pass's fastest batch in pass
/// order; and, when the sweep took turns, which placement was faster and
/// what each one's fastest batch read.
fn size_point(size: u64, mode: Mode, slots: &Slots, turns: bool) -> Option<SweepPoint> {
    let chosen = faster(slots)?;
    let mut p = point_of(size, mode, slots[chosen].as_ref()?);
    let ran: Vec<&Timing> = slots.iter().flatten().collect();
    p.seconds = ran.iter().map(|t| t.seconds).sum();
    p.rounds = Some(ran.iter().map(|t| t.rounds).sum());
    p.lost = ran.iter().map(|t| t.lost).sum();
    let mut passes: Vec<(u32, f64)> = ran.iter().flat_map(|t| t.pass_best.iter().copied()).collect();
    passes.sort_by_key(|&(pass, _)| pass);
    p.pass_latency_us = passes.iter().map(|&(_, each)| one_way(mode, each) * 1e6).collect();
    if turns {
        let best_us = |i: usize| {
            slots[i]
                .as_ref()
                .filter(|t| !t.batch_each.is_empty())
                .map(|t| point_of(size, mode, t).best_latency_us)
        };
        p.placement = Some(Place::BY_TURNS[chosen].name().into());
        p.together_latency_us = best_us(0);
        p.scheduler_latency_us = best_us(1);
    }
    Some(p)
}

/// Why the sweep must stop before the next round, if it must: what
/// stopped it, and what to do about it.
fn stop_reason(ctx: &StreamContext) -> Option<(&'static str, &'static str)> {
    // The deadline first: the runner raises the stop flag at the deadline
    // too, and then the time limit is the reason.
    if ctx.deadline.is_some_and(|d| Instant::now() >= d) {
        Some((
            "the time limit (-t) ended the sweep early",
            "; give a longer -t or a shorter --point-time",
        ))
    } else if ctx.stop.load(Ordering::Relaxed) {
        Some(("stopped before the end (Ctrl-C or the agent asked)", ""))
    } else {
        None
    }
}

/// The client's half of a sweep, run as the runner's one stream body.
pub(super) struct Driver {
    /// The sweep's connection, over the transport measured (TCP when the
    /// sizes go by UDP).
    pub stream: Box<dyn Stream>,
    pub points: Points,
}

impl Driver {
    /// Runs every point in order and reports the sweep. The client seals
    /// the messages it sends; the echoes are sealed by the agent.
    pub(super) fn run(self, ctx: &StreamContext) -> TaskEnd {
        let points = self.points;
        self.stream
            .carry(true, Box::new(|socket, wire| points.run(socket, wire, ctx)))
    }
}

/// What the driver runs once its connection is a [`Wire`].
pub(super) struct Points {
    pub udp: Option<UdpSocket>,
    pub params: SweepParams,
    /// Where the ends ran, when the sweep chose it.
    pub placement: Option<String>,
    /// The core both ends share on their turns together, when the sweep
    /// places them by turns ([`Place`]).
    pub turns: Option<u32>,
    /// What a wake-up on another core costs this host (ends on one host).
    pub wakeup: Option<crate::workload::wakeup::WakeupCost>,
}

impl Points {
    fn run(self, socket: Option<&Socket>, wire: &mut dyn Wire, ctx: &StreamContext) -> TaskEnd {
        let params = &self.params;
        let (sizes, too_big) = params.sizes();
        let largest = sizes.last().copied().unwrap_or(1) as usize;
        let mut link = Link {
            socket,
            wire,
            udp: self.udp,
            buffer: (0..largest.max(points::MIN_EXCHANGES as usize))
                .map(|i| (i % 251) as u8)
                .collect(),
            sent: 0,
            pin_apart: false,
            place: None,
            turns: self.turns.map(|core| LinkTurns {
                core,
                allowed: current_thread_cpus(),
                current: None,
                error: None,
            }),
        };
        let plan = Plan::of(params, link.turns.is_some());
        let mut sweep = Passes::new(sizes, too_big, params.passes(), link.turns.is_some());
        sweep.run(&mut link, &plan, params, ctx);
        if sweep.error.is_none() && !sweep.stopped {
            let budget = points::EXTRA_BUDGET_SHARE * params.point_seconds * sweep.sizes.len() as f64;
            if let Err(e) = extra_rounds(&mut link, &plan, &sweep.sizes, &mut sweep.timings, budget, ctx) {
                sweep.error = Some(e);
            }
            ctx.bytes.store(link.sent, Ordering::Relaxed);
        }
        let measured: Vec<SweepPoint> = sweep
            .sizes
            .iter()
            .zip(&sweep.timings)
            .filter_map(|(&size, slots)| size_point(size, params.mode, slots, sweep.turns))
            .collect();
        if sweep.error.is_none() {
            if let Err(e) = link.end() {
                sweep.error = Some(format!("ending the sweep: {e}"));
            }
        }
        let summary = points::summarize(&measured, params.link_speed_bits_per_second);
        let result = SweepResult {
            mode: params.mode.as_str().into(),
            transport: params.transport.name().into(),
            link_speed_bits_per_second: params.link_speed_bits_per_second,
            link_speed_source: params.link_speed_bits_per_second.map(|_| "option".into()),
            shaper_burst_bytes: None,
            shaper_name: None,
            skipped_sizes_bytes: sweep.skipped,
            note: sweep.note,
            points: measured,
            summary,
            placement: self.placement,
            cross_core_wakeup: self.wakeup,
            passes: Some(sweep.passes),
        };
        let mut end = TaskEnd {
            socket: link.socket.map(tcpinfo::socket_buffers),
            tcp_info: link.socket.and_then(tcpinfo::tcp_info),
            error: sweep.error,
            last_activity: sweep.last_activity,
            ..TaskEnd::default()
        };
        end.extras.set(super::result::KEY, &result);
        // A refused pin is on record, not ignored: the placements then
        // were not what the result names.
        if let Some(LinkTurns {
            core,
            error: Some(error),
            ..
        }) = link.turns
        {
            end.extras.set(
                AFFINITY_KEY,
                &Affinity {
                    asked_core: core,
                    cpus: current_thread_cpus(),
                    error: Some(error),
                },
            );
        }
        end
    }
}

/// The sweep's passes over its sizes as they go: what each size measured
/// so far, and what the result will say about the sizes that did not run.
struct Passes {
    sizes: Vec<u64>,
    passes: u32,
    /// Whether the passes take turns between the placements of
    /// [`Place::BY_TURNS`] (pass 1 the first, pass 2 the second, ...).
    turns: bool,
    /// Every size's rounds so far in each placement; the first is None
    /// until the first pass timed the size.
    timings: Vec<Slots>,
    /// Per placement, (size, seconds per exchange) of every size timed so
    /// far, in order: what the next size's exchange count is extrapolated
    /// from (a small message's round trip differs tenfold between them).
    history: [Vec<(u64, f64)>; 2],
    skipped: Vec<u64>,
    note: Option<String>,
    error: Option<String>,
    /// Set when the time limit or a stop ended the passes early.
    stopped: bool,
    last_activity: Option<Instant>,
    /// Rounds done, for the progress callback.
    done: u64,
}

impl Passes {
    /// Before the first pass; `too_big` are the sizes a UDP datagram cannot carry.
    fn new(sizes: Vec<u64>, too_big: Vec<u64>, passes: u32, turns: bool) -> Passes {
        Passes {
            timings: sizes.iter().map(|_| [None, None]).collect(),
            history: [Vec::new(), Vec::new()],
            turns,
            note: (!too_big.is_empty())
                .then(|| format!("sizes above {} B do not fit a UDP datagram", super::MAX_DATAGRAM_BYTES)),
            skipped: too_big,
            error: None,
            stopped: false,
            last_activity: None,
            done: 0,
            sizes,
            passes,
        }
    }

    /// Every pass over the sizes, in order, until the passes end, a stop
    /// or the time limit comes, or a round fails. A later pass runs only
    /// the sizes the first one timed.
    fn run(&mut self, link: &mut Link, plan: &Plan, params: &SweepParams, ctx: &StreamContext) {
        for pass in 0..self.passes {
            let slot = self.slot(pass);
            link.take_turn(slot);
            let mut reported = None;
            for i in 0..self.sizes.len() {
                if pass > 0 && self.timings[i][0].is_none() {
                    continue;
                }
                if let Some((what, advice)) = stop_reason(ctx) {
                    self.stop(pass, i, what, advice);
                    return;
                }
                let round = match self.round(link, plan, params, pass, i) {
                    Ok(t) => t.into_pass(pass),
                    Err(e) => {
                        self.error = Some(e);
                        return;
                    }
                };
                ctx.bytes.store(link.sent, Ordering::Relaxed);
                self.last_activity = Some(Instant::now());
                self.done += 1;
                if self.record(i, slot, round) {
                    self.report_progress(ctx, params.mode, pass, i, false);
                    reported = Some(i);
                }
            }
            if let Some(i) = reported {
                self.report_progress(ctx, params.mode, pass, i, true);
            }
        }
    }

    /// The placement (an index of [`Place::BY_TURNS`]) pass `pass` runs in.
    fn slot(&self, pass: u32) -> usize {
        if self.turns {
            pass as usize % Place::BY_TURNS.len()
        } else {
            0
        }
    }

    /// Ends the passes before size `i` of pass `pass`: says why, and (in
    /// the first pass) which sizes did not run.
    fn stop(&mut self, pass: u32, i: usize, what: &str, advice: &str) {
        let passes = self.passes;
        if pass == 0 {
            self.skipped.extend_from_slice(&self.sizes[i..]);
            self.note = Some(format!("{what}{advice}"));
        } else {
            self.note = Some(format!(
                "{what} in pass {} of {passes}: the sizes from {} B on ran {pass} pass{}{advice}",
                pass + 1,
                self.sizes[i],
                if pass == 1 { "" } else { "es" }
            ));
        }
        self.stopped = true;
    }

    /// One round of size `i`: its first, or one more for a later pass,
    /// as long as the sizes' rounds so far say it takes.
    fn round(
        &mut self,
        link: &mut Link,
        plan: &Plan,
        params: &SweepParams,
        pass: u32,
        i: usize,
    ) -> Result<Timing, String> {
        let (size, slot) = (self.sizes[i], self.slot(pass));
        match &self.timings[i][slot] {
            None => first_round(link, plan, size, params, &mut self.history[slot]),
            Some(t) => {
                let exchanges = repetitions(plan.round_seconds, t.mean_each());
                link.point(plan.op, size, exchanges, plan.batches)
                    .map_err(|e| format!("sweep point {size} B (pass {}) failed: {e}", pass + 1))
            }
        }
    }

    /// Adds a round in placement `slot` to size `i`'s timing; false when
    /// it was the size's first in that placement and timed nothing (every
    /// UDP echo lost): in the first placement that skips the size, in the
    /// second the size keeps the first's figures.
    fn record(&mut self, i: usize, slot: usize, round: Timing) -> bool {
        let size = self.sizes[i];
        match &mut self.timings[i][slot] {
            Some(t) => t.join(round),
            None if round.batch_each.is_empty() && slot > 0 => return false,
            None if round.batch_each.is_empty() => {
                // Every batch lost an echo: nothing to time, keep the count.
                self.skipped.push(size);
                self.note = Some(format!("UDP echoes were lost at every batch of {size} B"));
                self.done += u64::from(self.passes - 1);
                return false;
            }
            None => {
                self.history[slot].push((size, round.mean_each().expect("timed batches")));
                self.timings[i][slot] = Some(round);
            }
        }
        true
    }

    /// Hands size `i` as it stands after pass `pass` to the progress callback.
    /// `ends_pass`: the pass is over, `i` being the last size it timed.
    fn report_progress(&self, ctx: &StreamContext, mode: Mode, pass: u32, i: usize, ends_pass: bool) {
        let (size, passes) = (self.sizes[i], self.passes);
        let (Some(callback), Some(p)) = (ctx.progress, size_point(size, mode, &self.timings[i], self.turns)) else {
            return;
        };
        callback(&Progress {
            done: self.done,
            total: (self.sizes.len() * passes as usize) as u64,
            message: format!(
                "{}{size} B: {:.2} us, {}{}",
                if passes > 1 {
                    format!("pass {}/{passes}, ", pass + 1)
                } else {
                    String::new()
                },
                p.best_latency_us,
                Rate(p.best_bits_per_second),
                if p.wide { " (wide)" } else { "" }
            ),
            ends_pass,
        });
    }
}

/// How every round of the sweep runs.
struct Plan {
    op: Op,
    /// Timed seconds of one round (the point time over the passes).
    round_seconds: f64,
    /// Batches per round.
    batches: u64,
}

impl Plan {
    /// `turns`: the passes take turns between two placements, so each
    /// placement's figure has half of them (and their batches: at least
    /// three, NetPIPE's trials, as without turns).
    fn of(params: &SweepParams, turns: bool) -> Plan {
        let passes = params.passes();
        let per_placement = if turns { passes.div_ceil(2) } else { passes };
        Plan {
            op: match (params.transport.delivery(), params.mode) {
                (Delivery::Datagram, _) => Op::UdpPingPong,
                (Delivery::Stream, Mode::PingPong) => Op::TcpPingPong,
                (Delivery::Stream, Mode::Stream) => Op::TcpStream,
            },
            round_seconds: params.point_seconds / f64::from(passes),
            batches: points::batches_per_round(per_placement),
        }
    }
}

/// A size's first round: a probe when the exchange count cannot be
/// extrapolated from the sizes before it, then the round.
fn first_round(
    link: &mut Link,
    plan: &Plan,
    size: u64,
    params: &SweepParams,
    history: &mut Vec<(u64, f64)>,
) -> Result<Timing, String> {
    // A short untimed probe calibrates the first point and any point more
    // than twice the size of the last (an explicit list's jumps). The very
    // first one also warms the connection up for a quarter of a point's time.
    if points::needs_probe(history, size) {
        let warm_up = if history.is_empty() {
            params.point_seconds / 4.0
        } else {
            0.0
        };
        match link.probe(plan.op, size, warm_up) {
            Ok(Some(each)) => history.push((size, each)),
            Ok(None) => {}
            Err(e) => return Err(format!("sweep calibration at {size} B failed: {e}")),
        }
    }
    let exchanges = repetitions(plan.round_seconds, estimate(history, size));
    link.point(plan.op, size, exchanges, plan.batches)
        .map_err(|e| format!("sweep point {size} B failed: {e}"))
}

/// After the passes: extra rounds where the batches have not settled, as
/// [`points::next_extra_round`] chooses, until none is left to run or the
/// budget (seconds) is used; each round's batches join the point's. A
/// round runs in the point's faster placement, whose batches are its figure.
fn extra_rounds(
    link: &mut Link,
    plan: &Plan,
    sizes: &[u64],
    timings: &mut [Slots],
    budget: f64,
    ctx: &StreamContext,
) -> Result<(), String> {
    let mut spent = vec![0.0f64; sizes.len()];
    let mut left = budget;
    loop {
        if stop_reason(ctx).is_some() {
            return Ok(());
        }
        let timed: Vec<(usize, usize, &Timing)> = timings
            .iter()
            .enumerate()
            .filter_map(|(i, slots)| {
                let slot = faster(slots)?;
                slots[slot].as_ref().map(|t| (i, slot, t))
            })
            .collect();
        let candidates: Vec<points::ExtraCandidate> = timed
            .iter()
            .map(|&(i, _, t)| points::ExtraCandidate {
                batch_each: t.batch_each.clone(),
                best_bits_per_second: t.spread().map_or(0.0, |s| bits_per_second(sizes[i], s.min)),
                round_seconds: t.seconds / f64::from(t.rounds.max(1)),
                spent_seconds: spent[i],
            })
            .collect();
        let Some(chosen) = points::next_extra_round(&candidates, budget, left) else {
            return Ok(());
        };
        let (i, slot) = (timed[chosen].0, timed[chosen].1);
        link.take_turn(slot);
        let (size, t) = (sizes[i], timings[i][slot].as_mut().expect("a timed point"));
        let exchanges = repetitions(plan.round_seconds, t.mean_each());
        let more = link
            .point(plan.op, size, exchanges, plan.batches)
            .map_err(|e| format!("sweep point {size} B (extra round) failed: {e}"))?;
        spent[i] += more.seconds;
        left -= more.seconds;
        t.join(more);
    }
}

/// The agent: follows the client's headers until `end`.
pub(super) struct AgentServer {
    /// The sweep's connection (see [`Driver::stream`]).
    pub stream: Box<dyn Stream>,
    pub echo: Echo,
    /// What the connection holds while the sweep runs (MPTCP's listener
    /// for its joins, QUIC's endpoint), until it runs.
    pub held: Option<Held>,
}

/// Runs the agent's end where the client placed it. The thread is not
/// pinned for the run (the result says where each point ran), so only a
/// refusal is kept in `affinity`: the placement was then not the one named.
fn take_place(place: AgentPlace, allowed: &[u32], affinity: &mut Option<Affinity>) {
    let refused = match place {
        AgentPlace::Core(core) => {
            let pinned = pin_current_thread(u32::from(core));
            pinned.error.is_some().then_some(pinned)
        }
        AgentPlace::Scheduler => release_current_thread(allowed).err().map(|error| {
            log::warn!("{error}");
            Affinity {
                asked_core: allowed.first().copied().unwrap_or(0),
                cpus: current_thread_cpus(),
                error: Some(error),
            }
        }),
    };
    if refused.is_some() && affinity.is_none() {
        *affinity = refused;
    }
}

/// Is `fd` readable within `timeout_ms`?
fn readable(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<bool> {
    // SAFETY: the slice holds valid pollfd entries.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(n > 0)
}

impl AgentServer {
    /// Follows the client's headers until `end`, as the runner's one
    /// stream body on the agent.
    pub(super) fn serve(self, ctx: &StreamContext) -> TaskEnd {
        let echo = self.echo;
        // The agent seals the echoes.
        self.stream.carry(
            false,
            Box::new(|socket, wire| {
                let mut affinity = None;
                let mut buffer = vec![0u8; echo.max_size as usize];
                let mut received = 0u64;
                let error = echo
                    .follow(socket, wire, &mut buffer, &mut received, &mut affinity, ctx)
                    .err()
                    .map(|e| e.to_string());
                ctx.bytes.store(received, Ordering::Relaxed);
                let mut end = TaskEnd {
                    socket: socket.map(tcpinfo::socket_buffers),
                    tcp_info: socket.and_then(tcpinfo::tcp_info),
                    error,
                    ..TaskEnd::default()
                };
                if let Some(affinity) = &affinity {
                    end.extras.set(AFFINITY_KEY, affinity);
                }
                end
            }),
        )
    }
}

/// What the agent runs once its connection is a [`Wire`]: it follows the
/// client's headers until `end`.
pub(super) struct Echo {
    pub udp: Option<UdpSocket>,
    /// Whom UDP points are answered: the control connection's peer.
    pub proven: ProvenAddresses,
    /// The largest size a header may ask for (the buffer's).
    pub max_size: u64,
    /// Nobody chose cores: the client may place this end (the `place` flag).
    pub may_place: bool,
    /// The core this end takes if the client's first header asks for it
    /// (`pin apart`: the client found both ends on one kernel, which the
    /// addresses did not show); None when cores were given.
    pub core_if_asked: Option<u32>,
}

impl Echo {
    /// The next header, looking at the stop flag every [`AGENT_POLL_MS`]
    /// while none comes. A read that times out loses nothing, so the
    /// wait works alike over a socket, TLS (rustls keeps a partial
    /// record) and a QUIC stream.
    fn next_header(&self, wire: &mut dyn Wire, ctx: &StreamContext) -> io::Result<FrameHeader> {
        let mut bytes = [0u8; HEADER_LEN];
        let mid_sweep = || io::Error::other("the client closed the sweep connection mid-sweep");
        wire.set_read_timeout(Some(Duration::from_millis(AGENT_POLL_MS as u64)));
        loop {
            match wire.read(&mut bytes[..1]) {
                Ok(0) => return Err(mid_sweep()),
                Ok(_) => break,
                Err(e) if timed_out(&e) => {
                    if ctx.stop.load(Ordering::Relaxed) {
                        return Err(io::Error::other("stopped while waiting for the next sweep point"));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        wire.set_read_timeout(None);
        wire.read_exact(&mut bytes[1..]).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => mid_sweep(),
            _ => e,
        })?;
        FrameHeader::decode(&bytes, self.max_size).map_err(io::Error::other)
    }

    fn follow(
        &self,
        socket: Option<&Socket>,
        wire: &mut dyn Wire,
        buffer: &mut [u8],
        received: &mut u64,
        affinity: &mut Option<crate::workload::runner::Affinity>,
        ctx: &StreamContext,
    ) -> io::Result<()> {
        let allowed = current_thread_cpus();
        let mut placed = None;
        loop {
            ctx.bytes.store(*received, Ordering::Relaxed);
            let h = self.next_header(wire, ctx)?;
            if h.pin_apart && affinity.is_none() {
                *affinity = self.core_if_asked.map(pin_current_thread);
            }
            if let Some(place) = h.place.filter(|p| self.may_place && placed != Some(*p)) {
                placed = Some(place);
                take_place(place, &allowed, affinity);
            }
            let size = h.size as usize;
            // Decoding refused a point whose counts do not fit 64 bits.
            let exchanges = h
                .exchanges()
                .ok_or_else(|| io::Error::other("sweep point count overflows"))?;
            match h.op {
                Op::End => {
                    // The client waits for this end before it closes.
                    wire.close_write();
                    return Ok(());
                }
                Op::TcpPingPong => {
                    for _ in 0..exchanges {
                        wire.read_exact(&mut buffer[..size])?;
                        wire.write_all(&buffer[..size])?;
                        *received += h.size;
                    }
                }
                Op::TcpStream => {
                    let batches = std::iter::once(u64::from(h.warmup)).chain((0..h.batches).map(|_| h.per_batch));
                    for count in batches {
                        let mut left = count.saturating_mul(h.size);
                        while left > 0 {
                            let want = left.min(buffer.len() as u64) as usize;
                            let n = wire.read(&mut buffer[..want])?;
                            if n == 0 {
                                return Err(io::Error::other("the client closed the sweep connection mid-point"));
                            }
                            left -= n as u64;
                            *received += n as u64;
                        }
                        wire.write_all(&[1u8])?;
                    }
                }
                Op::UdpPingPong => {
                    let control = socket.ok_or_else(|| {
                        io::Error::other("a UDP point arrived but this sweep's connection has no TCP socket")
                    })?;
                    self.echo_datagrams(control, wire, buffer, received)?
                }
            }
        }
    }

    /// Echoes datagrams from the control peer until the end mark on TCP.
    fn echo_datagrams(
        &self,
        control: &Socket,
        wire: &mut dyn Wire,
        buffer: &mut [u8],
        received: &mut u64,
    ) -> io::Result<()> {
        let udp = self
            .udp
            .as_ref()
            .ok_or_else(|| io::Error::other("a UDP point arrived but this test has no UDP socket"))?;
        let mut fds = [
            libc::pollfd {
                fd: udp.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: control.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let mut echoed = 0u64;
        loop {
            if !readable(&mut fds, AGENT_POLL_MS)? {
                continue;
            }
            if fds[0].revents & libc::POLLIN != 0 {
                let (n, from): (usize, SocketAddr) = udp.recv_from(buffer)?;
                // Only ever answer an address that proved itself (the
                // control connection's peer).
                if self.proven.admits(from.ip()) {
                    udp.send_to(&buffer[..n], from)?;
                    echoed += 1;
                    *received += n as u64;
                }
                continue;
            }
            if fds[1].revents != 0 {
                let mut mark = [0u8; 8];
                wire.read_exact(&mut mark)?;
                wire.write_all(&echoed.to_be_bytes())?;
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::sync::atomic::AtomicU64;

    use super::*;

    fn timing(batch_each: &[f64], pass: u32) -> Timing {
        Timing {
            batch_each: batch_each.to_vec(),
            exchanges: 10 * batch_each.len() as u64,
            timed_seconds: 10.0 * batch_each.iter().sum::<f64>(),
            seconds: 0.1,
            rounds: 1,
            ..Timing::default()
        }
        .into_pass(pass)
    }

    #[test]
    fn a_point_by_turns_is_its_faster_placements_with_both_figures_and_every_pass() {
        // Together (pass 1) 10-14 us a round trip, the scheduler's (pass 2) 40-60.
        let slots: Slots = [
            Some(timing(&[12e-6, 10e-6, 14e-6], 0)),
            Some(timing(&[40e-6, 60e-6, 50e-6], 1)),
        ];
        let p = size_point(64, Mode::PingPong, &slots, true).unwrap();
        assert_eq!(p.placement.as_deref(), Some("together"));
        assert!(
            (p.best_latency_us - 5.0).abs() < 1e-9,
            "half the fastest round trip: {p:?}"
        );
        assert!((p.together_latency_us.unwrap() - 5.0).abs() < 1e-9);
        assert!((p.scheduler_latency_us.unwrap() - 20.0).abs() < 1e-9);
        // The spread is the faster placement's own, not both mixed.
        assert!((p.max_latency_us.unwrap() - 7.0).abs() < 1e-9, "{p:?}");
        assert_eq!(p.batches, 3);
        assert_eq!((p.rounds, p.seconds), (Some(2), 0.2));
        let passes: Vec<f64> = p.pass_latency_us.iter().map(|us| (us * 1e3).round() / 1e3).collect();
        assert_eq!(passes, vec![5.0, 20.0]);
        // The scheduler faster: named, and its batches are the point's.
        let slots: Slots = [
            Some(timing(&[90e-6, 80e-6, 85e-6], 0)),
            Some(timing(&[40e-6, 60e-6, 50e-6], 1)),
        ];
        let p = size_point(64, Mode::PingPong, &slots, true).unwrap();
        assert_eq!(p.placement.as_deref(), Some("scheduler"));
        assert!((p.best_latency_us - 20.0).abs() < 1e-9);
        // A placement that timed nothing leaves the other's figures.
        let p = size_point(64, Mode::PingPong, &[Some(timing(&[12e-6], 0)), None], true).unwrap();
        assert_eq!(
            (p.placement.as_deref(), p.scheduler_latency_us),
            (Some("together"), None)
        );
        // Without turns: no placement fields.
        let p = size_point(64, Mode::PingPong, &[Some(timing(&[12e-6], 0)), None], false).unwrap();
        assert_eq!((p.placement, p.together_latency_us), (None, None));
        assert!(size_point(64, Mode::PingPong, &[None, None], true).is_none());
    }

    /// A wire that reads `input` and keeps what is written.
    struct Scripted {
        input: std::io::Cursor<Vec<u8>>,
        written: Vec<u8>,
    }

    impl Read for Scripted {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for Scripted {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.written.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Wire for Scripted {
        fn close_write(&mut self) {}
        fn set_read_timeout(&mut self, _: Option<Duration>) {}
    }

    /// Issue 67: the agent followed a header of 2^52 x 4096 B (which
    /// wrapped to 0 B) with a one-byte acknowledgement per batch, reading
    /// nothing. Now it answers such a header with nothing and an error.
    #[test]
    fn the_agent_sends_nothing_for_a_header_whose_counts_overflow() {
        let follow = |header: FrameHeader, more: &[u8]| {
            let mut input = header.encode().to_vec();
            input.extend_from_slice(more);
            let mut wire = Scripted {
                input: std::io::Cursor::new(input),
                written: Vec::new(),
            };
            let echo = Echo {
                udp: None,
                proven: ProvenAddresses::peer_only("127.0.0.1".parse().unwrap()),
                max_size: 8192,
                may_place: false,
                core_if_asked: None,
            };
            let (bytes, stop) = (AtomicU64::new(0), std::sync::atomic::AtomicBool::new(false));
            let ctx = StreamContext {
                bytes: &bytes,
                stop: &stop,
                deadline: None,
                progress: None,
            };
            let mut buffer = vec![0u8; 8192];
            let (mut received, mut affinity) = (0, None);
            let ended = echo.follow(None, &mut wire, &mut buffer, &mut received, &mut affinity, &ctx);
            (ended.map_err(|e| e.to_string()), wire.written, received)
        };
        let wraps = FrameHeader {
            op: Op::TcpStream,
            size: 4096,
            batches: u32::MAX,
            warmup: 0,
            per_batch: 1 << 52,
            pin_apart: false,
            place: None,
        };
        let (ended, written, received) = follow(wraps, &[]);
        assert!(
            ended
                .as_ref()
                .unwrap_err()
                .contains("more bytes than a 64-bit count holds"),
            "{ended:?}"
        );
        assert_eq!((written.len(), received), (0, 0), "nothing acknowledged");
        // A point that fits: one acknowledgement per batch, after its bytes.
        let fits = FrameHeader {
            size: 4,
            batches: 2,
            warmup: 1,
            per_batch: 3,
            ..wraps
        };
        let mut data = vec![7u8; 4 * (1 + 2 * 3)];
        data.extend_from_slice(&FrameHeader::END.encode());
        let (ended, written, received) = follow(fits, &data);
        assert_eq!(ended, Ok(()));
        assert_eq!((written, received), (vec![1u8; 3], 28));
    }

    #[test]
    fn the_agent_takes_the_place_asked_and_keeps_only_a_refusal() {
        // In a thread of its own: the test's thread keeps its cores.
        std::thread::spawn(|| {
            let allowed = current_thread_cpus();
            let mut affinity = None;
            take_place(AgentPlace::Core(allowed[0] as u16), &allowed, &mut affinity);
            assert_eq!(current_thread_cpus(), vec![allowed[0]]);
            assert_eq!(affinity, None, "a pin that took is not recorded");
            take_place(AgentPlace::Scheduler, &allowed, &mut affinity);
            assert_eq!(
                current_thread_cpus(),
                allowed,
                "the scheduler's turn gives every core back"
            );
            // A core this machine does not have: refused, on record, the
            // thread keeps running where it may.
            take_place(AgentPlace::Core(1023), &allowed, &mut affinity);
            let refused = affinity.expect("the refusal is kept");
            assert_eq!(refused.asked_core, 1023);
            assert!(refused.error.unwrap().contains("core 1023"));
            assert_eq!(current_thread_cpus(), allowed);
        })
        .join()
        .unwrap();
    }
}
