//! The datagram loops every workload over UDP runs: the sender paces with
//! a token bucket against the monotonic clock and sends in batches
//! (sendmmsg, optionally UDP GSO), every datagram stamped with stream id,
//! sequence number, send time and a warm-up flag ([`super::wire`]); the
//! receiver (recvmmsg, optionally GRO) counts distinct, duplicate, late and
//! foreign datagrams and the RFC 3550 jitter, and reads its socket's drop
//! counter. Receivers get no end-of-stream: they stop once the stop flag is
//! up and the socket has been quiet for [`DRAIN`]. What each end counted
//! is its [`UdpEnd`], in the stream end's extras under [`KEY`].

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use socket2::Socket;

use super::counts::{UdpEnd, UdpReceived, KEY};
use super::wire::{
    DatagramHeader, Iperf2Header, Jitter, Kind, Pacer, SeqTracker, FLAG_REALTIME, FLAG_WARMUP, IPERF2_PREFIX,
    MAX_DATAGRAM_BYTES,
};
use super::{
    enable_drop_counts, enable_gro, enable_gso, enable_receive_timestamps, realtime_nanos, RecvBatch, SendBatch,
    MAX_GSO_SEGMENTS, MAX_OFFLOAD_BYTES,
};
use crate::model::Role;
use crate::workload::base::one_way::TransitRecorder;
use crate::workload::base::runner::{StreamContext, TaskEnd};
use crate::workload::base::WorkloadError;

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

/// The header a stream's datagrams carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wire {
    /// nicbench's own ([`DatagramHeader`]).
    #[default]
    Nicbench,
    /// iperf 2's header in front of nicbench's, which starts at
    /// [`IPERF2_PREFIX`]: iperf 2 receivers (`iperf -s -u`) count the same
    /// datagrams, and the sender ends with iperf 2's closing datagrams.
    Iperf2InFront,
    /// iperf 2's header alone: a receiver of an iperf 2 sender's datagrams.
    /// It tells warm-up from measured by arrival time, and no one-way delay
    /// (the sender's clock is not the client's).
    Iperf2,
}

impl Wire {
    /// Where nicbench's header starts, if the datagrams carry one.
    fn nicbench_at(self) -> Option<usize> {
        match self {
            Wire::Nicbench => Some(0),
            Wire::Iperf2InFront => Some(IPERF2_PREFIX),
            Wire::Iperf2 => None,
        }
    }

    /// The smallest datagram that holds the header(s).
    pub fn min_datagram_bytes(self) -> usize {
        match self {
            Wire::Nicbench => super::wire::HEADER_LEN,
            Wire::Iperf2InFront => IPERF2_PREFIX + super::wire::HEADER_LEN,
            Wire::Iperf2 => Iperf2Header::LEN,
        }
    }
}

/// How many closing datagrams a sender with iperf 2's header sends, and
/// how far apart: iperf 2's receiver reports when the first arrives, and a
/// group's sender gets no acknowledgement to stop at.
const IPERF2_CLOSINGS: u32 = 10;
const IPERF2_CLOSING_GAP: Duration = Duration::from_millis(5);

/// What a stream loop counted, besides what the runner counts.
#[derive(Default)]
struct EndCounts {
    udp: UdpEnd,
    /// Receiver: when the last datagram arrived (its rate ends there).
    last_data_at: Option<Instant>,
    /// A receiver of an iperf 2 sender: when the first measured datagram
    /// arrived (its rate starts there, not at the join).
    first_data_at: Option<Instant>,
}

/// Readies a registered socket for its role: GSO on a sender that asked
/// for it; on a receiver GRO if asked, a large receive buffer unless the
/// user set one (`receive_buffer_set`), arrival stamps and drop counts.
pub fn prepare_end(
    socket: &Socket,
    role: Role,
    datagram_bytes: usize,
    (gso, gro): (bool, bool),
    receive_buffer_set: bool,
) -> Result<(), WorkloadError> {
    match role {
        Role::Sender if gso => enable_gso(socket, datagram_bytes)?,
        Role::Receiver if gro => enable_gro(socket)?,
        _ => {}
    }
    if role == Role::Receiver {
        if !receive_buffer_set {
            // Best effort: a smaller grant is reported, not an error.
            let _ = socket.set_recv_buffer_size(DEFAULT_RECEIVE_BUFFER);
        }
        enable_receive_timestamps(socket)?;
        enable_drop_counts(socket)?;
    }
    Ok(())
}

/// Lets this thread's short sleeps end on time (the default slack is 50 us).
fn set_timer_slack(slack: Duration) {
    // SAFETY: PR_SET_TIMERSLACK takes a value and changes only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack.as_nanos() as libc::c_ulong, 0, 0, 0) };
}

/// The stream end with the UDP counts; a receiver's time runs to its last
/// datagram, not to the end of the drain wait.
fn finish((mut end, counts): (TaskEnd, EndCounts)) -> TaskEnd {
    end.extras.set(KEY, &counts.udp);
    end.last_activity = counts.last_data_at;
    end.first_activity = counts.first_data_at;
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

/// How one stream end sends.
#[derive(Debug, Clone, Copy)]
pub struct SendOptions {
    pub id: u32,
    pub datagram_bytes: usize,
    /// Offered rate; None sends as fast as the sender can.
    pub rate_bits_per_second: Option<u64>,
    /// UDP GSO, enabled on the socket by [`prepare_end`].
    pub gso: bool,
    /// In a count run, the datagrams this end sends.
    pub quota: Option<u64>,
    /// The side's start, which the pacer counts from (like the rate in the
    /// result), and the end of the warm-up.
    pub start: Instant,
    pub warmup_until: Instant,
    /// Nicbench's header, or iperf 2's in front of it.
    pub wire: Wire,
}

/// The sender's loop: pace, stamp, send a batch, count; in a count run,
/// until `quota` datagrams are out. The end's [`UdpEnd`] is in its extras
/// under [`KEY`].
pub fn send_stream(socket: &Socket, how: &SendOptions, ctx: &StreamContext) -> TaskEnd {
    finish(send_loop(socket, how, ctx))
}

fn send_loop(socket: &Socket, how: &SendOptions, ctx: &StreamContext) -> (TaskEnd, EndCounts) {
    let SendOptions {
        id,
        datagram_bytes: dg,
        rate_bits_per_second,
        gso,
        quota,
        start,
        warmup_until: omit_at,
        wire,
    } = *how;
    let fd = socket.as_raw_fd();
    let segments = if gso {
        (MAX_OFFLOAD_BYTES / dg).clamp(1, MAX_GSO_SEGMENTS)
    } else {
        1
    };
    let entries = if gso { GSO_BATCH } else { BATCH };
    let max_datagrams = entries * segments;
    let mut batch = SendBatch::new(entries, segments * dg);
    // Send about a millisecond's worth at a time when paced.
    let (mut pacer, per_call) = match rate_bits_per_second {
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
        segmentation_offload: gso,
        offered_bits_per_second: rate_bits_per_second.map(|r| r as f64),
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
        let used = stamp_batch(&mut batch, &mut lens, (id, seq, flags), n, (segments, dg), wire);
        let sent_entries = match batch.send(fd, &lens[..used]) {
            Ok(m) => m,
            Err(e) if transient(&e) => {
                udp.send_errors += 1;
                std::thread::yield_now();
                continue;
            }
            Err(e) => {
                let hint = if gso && matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EMSGSIZE)) {
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
    if wire == Wire::Iperf2InFront && error.is_none() {
        send_iperf2_closing(socket, (id, seq), &mut batch.buffers[0][..dg]);
    }
    udp.largest_burst_seconds = rate_bits_per_second.map(|rate| largest_burst.max(burst) as f64 * 8.0 / rate as f64);
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
            ..EndCounts::default()
        },
    )
}

/// iperf 2's closing datagrams after `sent` datagrams of stream `id`:
/// numbered -(sent + 1) and down, as iperf 2's client numbers them, with
/// nicbench's header of kind [`Kind::End`] behind (a receiver of ours takes
/// no count from them). Best effort: the test's counts are complete already.
fn send_iperf2_closing(socket: &Socket, (id, sent): (u32, u64), datagram: &mut [u8]) {
    for k in 0..IPERF2_CLOSINGS {
        let seq = -(sent.min(i64::MAX as u64 / 2) as i64) - 1 - i64::from(k);
        let stamp = realtime_nanos();
        Iperf2Header { seq, send_nanos: stamp }.write(datagram);
        DatagramHeader {
            kind: Kind::End,
            flags: FLAG_REALTIME,
            stream_id: id,
            seq: sent,
            send_nanos: stamp,
        }
        .write(&mut datagram[IPERF2_PREFIX..]);
        let _ = socket.send(datagram);
        std::thread::sleep(IPERF2_CLOSING_GAP);
    }
}

/// Writes the headers of `n` datagrams (sequence numbers from `seq`) into
/// the batch, `segments` per buffer of datagrams of `dg` bytes, and sets
/// the buffer lengths; returns how many buffers are in use.
fn stamp_batch(
    batch: &mut SendBatch,
    lens: &mut [usize],
    (id, seq, flags): (u32, u64, u8),
    n: usize,
    (segments, dg): (usize, usize),
    wire: Wire,
) -> usize {
    // The real-time clock, so that the receiver can time the transit.
    let (stamp, flags) = (realtime_nanos(), flags | FLAG_REALTIME);
    let ours = wire.nicbench_at().unwrap_or(0);
    for k in 0..n {
        let at = (k % segments) * dg;
        let buffer = &mut batch.buffers[k / segments][at..];
        if wire == Wire::Iperf2InFront {
            // iperf 2 numbers from 1.
            let seq = (seq + k as u64 + 1).min(i64::MAX as u64) as i64;
            Iperf2Header { seq, send_nanos: stamp }.write(buffer);
        }
        DatagramHeader::data(id, seq + k as u64, stamp, flags).write(&mut buffer[ours..]);
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
    wire: Wire,
    /// [`Wire::Iperf2`]: the end of the warm-up on the real-time clock
    /// (datagrams that arrive before it are the warm-up's), the lowest
    /// measured sequence number, and the last data datagram's number as
    /// the sender's closing datagrams tell it (from 0, like the tracker's).
    iperf2_warmup_until: u64,
    first_measured: Option<u64>,
    closing_last: Option<u64>,
    tracker: SeqTracker,
    jitter: Jitter,
    transit: TransitRecorder,
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
    fn new(id: u32, wire: Wire) -> Receiving {
        Receiving {
            id,
            wire,
            iperf2_warmup_until: 0,
            first_measured: None,
            closing_last: None,
            tracker: SeqTracker::default(),
            jitter: Jitter::default(),
            transit: TransitRecorder::default(),
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
                if self.wire == Wire::Iperf2 {
                    self.take_iperf2(chunk, arrival);
                    continue;
                }
                let ours = chunk.get(self.wire.nicbench_at().unwrap_or(0)..).unwrap_or_default();
                match DatagramHeader::read(ours) {
                    Some(h) if h.kind == Kind::Data && h.stream_id == self.id => {
                        let warmup = h.flags & FLAG_WARMUP != 0;
                        if !warmup && self.warmup_drops.is_none() {
                            self.warmup_drops = Some(u64::from(message.drops_before.unwrap_or(0)));
                        }
                        let duplicates = self.tracker.duplicates;
                        self.tracker.record(h.seq, warmup);
                        self.jitter.update(h.send_nanos, arrival);
                        // Timed: the datagrams `received` counts.
                        let counted = !warmup && self.tracker.duplicates == duplicates;
                        if counted && h.flags & FLAG_REALTIME != 0 {
                            self.transit.record(h.send_nanos, arrival);
                        }
                        self.bytes += chunk.len() as u64;
                        self.datagrams += 1;
                    }
                    // A repeated registration whose ack was lost; a sender's
                    // closing datagram (for iperf 2's receivers).
                    Some(h) if matches!(h.kind, Kind::Register | Kind::End) => {}
                    _ => self.malformed += 1,
                }
            }
            if self.wire == Wire::Iperf2 && self.first_measured.is_some() && self.warmup_drops.is_none() {
                self.warmup_drops = Some(u64::from(message.drops_before.unwrap_or(0)));
            }
        }
        self.datagrams > before
    }

    /// Accounts one datagram of an iperf 2 sender: data numbered from 1,
    /// closing datagrams negative. No one-way delay: iperf 2's clock is
    /// not the one the client estimated against.
    fn take_iperf2(&mut self, chunk: &[u8], arrival: u64) {
        match Iperf2Header::read(chunk) {
            Some(h) if h.seq > 0 => {
                let seq = h.seq as u64 - 1;
                let warmup = arrival < self.iperf2_warmup_until;
                if !warmup {
                    self.first_measured = Some(self.first_measured.map_or(seq, |f| f.min(seq)));
                }
                self.tracker.record(seq, warmup);
                self.jitter.update(h.send_nanos, arrival);
                self.bytes += chunk.len() as u64;
                self.datagrams += 1;
            }
            // The first closing datagram carries -(last + 1), the repeats
            // count down from there.
            Some(h) if h.seq < 0 => {
                if let Some(last) = h.seq.unsigned_abs().checked_sub(2) {
                    self.closing_last = Some(self.closing_last.map_or(last, |l| l.min(last)));
                }
            }
            _ => self.malformed += 1,
        }
    }

    /// An iperf 2 sender's count as this receiver can tell it: the numbers
    /// from the first measured datagram to the last the sender sent (its
    /// closing datagram says which) or, without that, to the last that
    /// arrived; and of those, the ones after the last arrival.
    fn iperf2_sender_count(&self) -> (u64, Option<u64>) {
        let next = self.tracker.next_seq();
        let numbered = self.first_measured.map_or(0, |first| {
            let last = self.closing_last.unwrap_or(next.saturating_sub(1));
            (last + 1).saturating_sub(first)
        });
        (numbered, self.closing_last.map(|last| (last + 1).saturating_sub(next)))
    }

    fn end(self, dg: usize, gro: bool, refused: u64, socket: &Socket) -> UdpEnd {
        let iperf2 = (self.wire == Wire::Iperf2).then(|| self.iperf2_sender_count());
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
                socket_drops: super::socket_drops(socket).unwrap_or(0),
                warmup_socket_drops: Some(self.warmup_drops.unwrap_or(0)),
                lost_at_end_datagrams: iperf2.and_then(|(_, tail)| tail),
                first_datagram_after_seconds: None,
                numbered_datagrams: iperf2.map(|(numbered, _)| numbered),
                transit: self.transit.summary(),
            }),
        }
    }
}

/// How one stream end receives.
#[derive(Debug, Clone, Copy)]
pub struct ReceiveOptions {
    pub id: u32,
    pub datagram_bytes: usize,
    /// UDP GRO, enabled on the socket by [`prepare_end`].
    pub gro: bool,
    /// Datagrams refused while the stream registered.
    pub refused: u64,
    /// In a count run, what it waits for.
    pub expected: Option<Expected>,
    /// A multicast receiver's wait for its first datagram after it joined
    /// (the loop starts at the join): with nothing by then it stops, and
    /// the time to the first datagram is in its counts
    /// ([`UdpReceived::first_datagram_after_seconds`]).
    pub first_within: Option<Duration>,
    /// The datagrams' header. With [`Wire::Iperf2`] the receiver counts
    /// what arrives after `warmup_until` and takes the sender's count from
    /// its sequence numbers ([`UdpReceived::numbered_datagrams`]).
    pub wire: Wire,
    pub warmup_until: Option<Instant>,
}

/// What a receiver of a count run (`-n`, `-k`) waits for.
#[derive(Debug, Clone, Copy)]
pub struct Expected {
    /// The datagrams its sender sends in all.
    pub datagrams: u64,
    /// How long a silence ends the stream when some never arrive.
    pub quiet: Duration,
}

impl Expected {
    /// `datagrams` of `datagram_bytes` at the offered rate (None: unpaced).
    pub fn new(datagrams: u64, datagram_bytes: usize, rate_bits_per_second: Option<u64>) -> Expected {
        Expected {
            datagrams,
            quiet: count_quiet(datagram_bytes, rate_bits_per_second),
        }
    }
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
pub fn receive_stream(socket: &Socket, how: &ReceiveOptions, ctx: &StreamContext) -> TaskEnd {
    finish(receive_loop(socket, how, ctx))
}

fn receive_loop(socket: &Socket, how: &ReceiveOptions, ctx: &StreamContext) -> (TaskEnd, EndCounts) {
    let ReceiveOptions {
        id,
        datagram_bytes: dg,
        gro,
        refused,
        expected,
        first_within,
        wire,
        warmup_until,
    } = *how;
    let fd = socket.as_raw_fd();
    let started = Instant::now();
    let (mut first_at, mut first_measured_at): (Option<Instant>, Option<Instant>) = (None, None);
    let _ = socket.set_read_timeout(Some(POLL));
    let mut batch = if gro {
        RecvBatch::new(GRO_BATCH, 65_536)
    } else if wire == Wire::Iperf2 {
        // Another program's sender: its datagrams may be of any size.
        RecvBatch::new(BATCH, MAX_DATAGRAM_BYTES as usize)
    } else {
        RecvBatch::new(BATCH, dg)
    };
    let mut counts = Receiving::new(id, wire);
    if let Some(until) = warmup_until {
        // The same instant on the real-time clock (the arrival stamps').
        let (now, realtime) = (Instant::now(), super::realtime_nanos());
        counts.iperf2_warmup_until = match until.checked_duration_since(now) {
            Some(ahead) => realtime.saturating_add(ahead.as_nanos() as u64),
            None => realtime.saturating_sub(now.duration_since(until).as_nanos() as u64),
        };
    }
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
                if counts.take(&batch, n, super::realtime_nanos()) {
                    ctx.bytes.store(counts.bytes, Ordering::Relaxed);
                    let now = Instant::now();
                    last_data_at = Some(now);
                    first_at.get_or_insert(now);
                    if wire == Wire::Iperf2 && counts.first_measured.is_some() {
                        first_measured_at.get_or_insert(now);
                    }
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
        if first_within.is_some_and(|wait| first_at.is_none() && started.elapsed() >= wait) {
            break;
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
    if let (Some(_), Some(received)) = (first_within, udp.received.as_mut()) {
        received.first_datagram_after_seconds = first_at.map(|at| (at - started).as_secs_f64());
    }
    (
        TaskEnd {
            error,
            ..TaskEnd::default()
        },
        EndCounts {
            udp,
            last_data_at,
            first_data_at: first_measured_at,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::spec::SideOptions;
    use crate::workload::transport::udp;

    /// Receives until `count` datagrams are in and accounts them.
    fn take_datagrams(batch: &mut RecvBatch, receiver: &Socket, counts: &mut Receiving, count: usize) {
        let mut seen = 0;
        while seen < count {
            let n = batch.recv(receiver.as_raw_fd()).unwrap();
            counts.take(batch, n, udp::realtime_nanos());
            seen += n;
        }
    }

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
        let receiver = udp::bind_udp(ip, &SideOptions::default()).unwrap();
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
        let mut counts = Receiving::new(5, Wire::Nicbench);
        take_datagrams(&mut batch, &receiver, &mut counts, 8);
        let end = counts.end(100, false, 0, &receiver);
        let received = end.received.unwrap();
        assert_eq!(end.datagrams, 4);
        assert_eq!(received.duplicate_datagrams, 1);
        assert_eq!(received.out_of_order_datagrams, 1);
        assert_eq!(received.malformed_datagrams, 3);
    }

    /// An iperf 2 sender's datagrams: numbered from 1, a gap, a late one,
    /// a repeat, then its closing datagrams (which say two more were sent
    /// after the last arrival); and nicbench's own header behind iperf 2's
    /// is read past it, while the closing datagram we send is no count.
    #[test]
    fn the_receiver_reads_iperf_2_s_numbering_and_its_closing_datagram() {
        use crate::workload::transport::udp::wire::{Iperf2Header, IPERF2_PREFIX};
        let ip = "127.0.0.1".parse().unwrap();
        let receiver = udp::bind_udp(ip, &SideOptions::default()).unwrap();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sender
            .connect(receiver.local_addr().unwrap().as_socket().unwrap())
            .unwrap();
        let mut datagram = vec![0u8; 200];
        // Numbers 5..=9 without 7, then 7 late, 9 again; closing -12, -13:
        // 10 and 11 were sent and never came.
        for seq in [5i64, 6, 8, 7, 9, 9, -12, -13] {
            Iperf2Header { seq, send_nanos: 1000 }.write(&mut datagram);
            sender.send(&datagram).unwrap();
        }
        sender.send(b"short").unwrap();
        let _ = receiver.set_read_timeout(Some(Duration::from_secs(1)));
        let mut batch = RecvBatch::new(BATCH, 200);
        let mut counts = Receiving::new(5, Wire::Iperf2);
        take_datagrams(&mut batch, &receiver, &mut counts, 9);
        let end = counts.end(200, false, 0, &receiver);
        let received = end.received.unwrap();
        assert_eq!(end.datagrams, 5, "5, 6, 7, 8, 9");
        assert_eq!((received.duplicate_datagrams, received.out_of_order_datagrams), (1, 1));
        assert_eq!(received.malformed_datagrams, 1);
        assert_eq!(received.numbered_datagrams, Some(7), "5 to 11");
        assert_eq!(received.lost_at_end_datagrams, Some(2), "10 and 11");
        assert!(
            received.transit.is_none(),
            "no one-way delay against another program's clock"
        );

        // iperf 2's header in front of ours: ours is read at its offset.
        let mut counts = Receiving::new(5, Wire::Iperf2InFront);
        for seq in [0u64, 1] {
            Iperf2Header {
                seq: seq as i64 + 1,
                send_nanos: 1000,
            }
            .write(&mut datagram);
            DatagramHeader::data(5, seq, 1000, 0).write(&mut datagram[IPERF2_PREFIX..]);
            sender.send(&datagram).unwrap();
        }
        // The sender's own closing datagrams, as it sends them at the end.
        let closing = Socket::from(sender.try_clone().unwrap());
        send_iperf2_closing(&closing, (5, 2), &mut [0u8; 200]);
        take_datagrams(&mut batch, &receiver, &mut counts, 2 + IPERF2_CLOSINGS as usize);
        let end = counts.end(200, false, 0, &receiver);
        assert_eq!(end.datagrams, 2);
        assert_eq!(
            end.received.unwrap().malformed_datagrams,
            0,
            "the closing datagrams are no count"
        );
        // What iperf 2 reads of them: -3 first (2 sent), then down.
        let mut iperf2 = Receiving::new(0, Wire::Iperf2);
        send_iperf2_closing(&closing, (5, 2), &mut [0u8; 200]);
        take_datagrams(&mut batch, &receiver, &mut iperf2, IPERF2_CLOSINGS as usize);
        assert_eq!(
            iperf2.closing_last,
            Some(1),
            "numbers 1 and 2 (0 and 1 from 0) were sent"
        );
        assert_eq!(iperf2.malformed, 0);
    }

    /// Regression (issue 43): "LOST 99.60% (11949 of 11997 datagrams)"
    /// stood beside "14970 dropped at the receiving socket": the drops
    /// counted the warm-up, the loss did not. The socket's drops when the
    /// first measured datagram was queued are the warm-up's.
    #[test]
    fn drops_during_the_warm_up_are_told_from_the_measured_ones() {
        let ip = "127.0.0.1".parse().unwrap();
        let receiver = udp::bind_udp(ip, &SideOptions::default()).unwrap();
        receiver.set_recv_buffer_size(4096).unwrap();
        udp::enable_drop_counts(&receiver).unwrap();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sender
            .connect(receiver.local_addr().unwrap().as_socket().unwrap())
            .unwrap();
        // The warm-up overflows the unread socket; loopback delivers (or
        // drops) each datagram inside send(2).
        let mut datagram = vec![0u8; 1000];
        let mut seq = 0u64;
        while udp::socket_drops(&receiver).unwrap() < 20 {
            DatagramHeader::data(5, seq, 0, FLAG_WARMUP).write(&mut datagram);
            sender.send(&datagram).unwrap();
            seq += 1;
            assert!(seq < 100_000, "a 4 KiB socket never dropped");
        }
        let warmup_drops = udp::socket_drops(&receiver).unwrap();
        let _ = receiver.set_read_timeout(Some(Duration::from_secs(1)));
        let mut batch = RecvBatch::new(BATCH, 1000);
        let mut counts = Receiving::new(5, Wire::Nicbench);
        // Drain the warm-up, then the measured part: two datagrams, none dropped.
        let queued = seq - warmup_drops;
        take_datagrams(&mut batch, &receiver, &mut counts, queued as usize);
        assert_eq!(counts.warmup_drops, None, "no measured datagram yet");
        for _ in 0..2 {
            DatagramHeader::data(5, seq, 0, 0).write(&mut datagram);
            sender.send(&datagram).unwrap();
            seq += 1;
        }
        take_datagrams(&mut batch, &receiver, &mut counts, 2);
        let received = counts.end(1000, false, 0, &receiver).received.unwrap();
        assert_eq!(received.socket_drops, warmup_drops);
        assert_eq!(received.warmup_socket_drops, Some(warmup_drops));
    }

    #[test]
    fn a_count_receiver_waits_longer_at_slow_offers() {
        assert_eq!(count_quiet(1400, None), COUNT_QUIET);
        assert_eq!(count_quiet(1400, Some(1_000_000_000)), COUNT_QUIET);
        // 1400 B at 1 kbit/s: 11.2 s a datagram, ten of them.
        assert_eq!(count_quiet(1400, Some(1000)), Duration::from_secs(112));
    }
}
