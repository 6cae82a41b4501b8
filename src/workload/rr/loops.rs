//! The hot loops of `rr`: requester and responder over a stream of any
//! stream transport, a claimed datagram endpoint, and with a new
//! connection per transaction (`--crr`: the transport's [`Dialing`] and
//! [`Answering`] open, admit and close each). Each owns its buffers and
//! counters; the requester reads the clock twice per transaction (that is
//! the measurement), the responder once (to tell warm-up from the test).

use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use socket2::Socket;

use super::result::RrEnd;
use crate::model::latency::LatencyRecorder;
use crate::workload::base::one_way::TransitRecorder;
use crate::workload::base::sockets::read_full;
use crate::workload::runner::{StreamContext, TaskEnd};
use crate::workload::transport::datagram::DatagramHeader;
use crate::workload::transport::stream::Stream;
use crate::workload::transport::transaction::{Answer, Answering, Dialing};
use crate::workload::transport::wire::{timed_out, Wire};
use crate::workload::transport::Configure;

/// How long a responder without end-of-stream waits for stragglers.
const DRAIN: Duration = Duration::from_millis(300);
/// How often blocked calls wake up to look at the stop flag.
const POLL: Duration = Duration::from_millis(50);
/// How long a requester waits for the answers in flight at the end.
const TAIL: Duration = Duration::from_secs(2);

/// The transaction a flow repeats.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub request: usize,
    pub response: usize,
    pub burst: usize,
    pub timeout: Duration,
    pub quickack: bool,
    /// Poll without sleeping while waiting for data.
    pub spin: bool,
    /// Paced: a transaction starts this often (`--every`, burst 1).
    pub interval: Option<Duration>,
    pub omit_at: Instant,
    /// Time each leg: the responder stamps its real-time clock into each
    /// response ([`STAMP_AT`] on a stream, after the sequence number in a
    /// datagram), and the requester reads its own at both ends.
    pub one_way: bool,
}

/// Where a stream response carries the responder's stamp; a datagram
/// response carries it after its 8-byte sequence number.
const STAMP_AT: usize = 0;
const DATAGRAM_STAMP_AT: usize = 8;

/// The real-time clock, ns: the clock both ends stamp legs with.
#[inline]
fn stamp_now() -> u64 {
    crate::workload::base::one_way::realtime_nanos()
}

/// Writes the responder's stamp into a response at `at`.
#[inline]
fn stamp(response: &mut [u8], at: usize) {
    response[at..at + 8].copy_from_slice(&stamp_now().to_be_bytes());
}

/// The responder's stamp in a response.
#[inline]
fn stamp_of(response: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(response[at..at + 8].try_into().unwrap())
}

/// What a loop leaves for its stream end.
#[derive(Debug, Default)]
pub struct FlowCounts {
    pub rr: RrEnd,
    /// When the last transaction completed (ends without end-of-stream).
    pub last_activity: Option<Instant>,
}

/// Counts of one flow end while it runs.
struct Counter<'a> {
    rr: RrEnd,
    bytes: u64,
    per_transaction: u64,
    omit_at: Instant,
    ctx: &'a StreamContext<'a>,
    latency: Option<LatencyRecorder>,
    /// The request's and the response's transits (`--one-way`, requester).
    legs: Option<(TransitRecorder, TransitRecorder)>,
    last: Option<Instant>,
}

impl<'a> Counter<'a> {
    fn new(exchange: &Exchange, ctx: &'a StreamContext<'a>, timed: bool) -> Counter<'a> {
        Counter {
            rr: RrEnd {
                spinning: exchange.spin,
                ..RrEnd::default()
            },
            bytes: 0,
            per_transaction: (exchange.request + exchange.response) as u64,
            omit_at: exchange.omit_at,
            ctx,
            latency: timed.then(LatencyRecorder::new),
            legs: (timed && exchange.one_way).then(Default::default),
            last: None,
        }
    }

    /// One completed transaction, started at `started` (requester) and done `now`.
    #[inline]
    fn done(&mut self, started: Option<Instant>, now: Instant) {
        if started.unwrap_or(now) >= self.omit_at {
            self.rr.transactions += 1;
            if let (Some(h), Some(t0)) = (self.latency.as_mut(), started) {
                h.record_nanos((now - t0).as_nanos() as u64);
            }
        } else {
            self.rr.warmup_transactions += 1;
        }
        self.bytes += self.per_transaction;
        self.ctx.bytes.store(self.bytes, Ordering::Relaxed);
        self.last = Some(now);
    }

    /// The legs of a transaction sent at `sent` and answered at
    /// `received` (the requester's real-time clock) that the responder
    /// stamped at `stamped` (its own); warm-up transactions are not timed.
    #[inline]
    fn legs(&mut self, started: Instant, (sent, stamped, received): (u64, u64, u64)) {
        if let (Some((request, response)), true) = (self.legs.as_mut(), started >= self.omit_at) {
            request.record(sent, stamped);
            response.record(stamped, received);
        }
    }

    fn finish(mut self, error: Option<String>, keep_time: bool) -> (TaskEnd, FlowCounts) {
        self.rr.latency = self.latency.as_ref().and_then(|h| h.stats());
        if let Some((request, response)) = &self.legs {
            self.rr.request_transit = request.summary();
            self.rr.response_transit = response.summary();
        }
        (
            TaskEnd {
                error,
                ..TaskEnd::default()
            },
            FlowCounts {
                rr: self.rr,
                last_activity: if keep_time { self.last } else { None },
            },
        )
    }
}

fn stopped(ctx: &StreamContext) -> bool {
    ctx.stop.load(Ordering::Relaxed)
}

/// Waits for a paced flow's next start (at once when unpaced); false when
/// the test stopped first.
fn paced(exchange: &Exchange, next: &mut Instant, ctx: &StreamContext) -> bool {
    match exchange.interval {
        Some(interval) => crate::workload::pace::wait_for_slot(next, interval, || !stopped(ctx)),
        None => true,
    }
}

/// Asks for an immediate ACK; true when the kernel took the option.
fn quickack(socket: &Socket) -> bool {
    let one: libc::c_int = 1;
    // SAFETY: a c_int option value of the right size.
    0 == unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_QUICKACK,
            &one as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    }
}

/// Like [`read_full`], but waits by polling with MSG_DONTWAIT instead of
/// sleeping, so no wake-up sits between the data's arrival and the read.
/// Once the test is stopping it falls back to the blocking read (and its
/// timeout), so a spinning thread never outlives the test.
/// `empty_polls` counts the polls that found no data.
fn read_full_spinning(
    socket: &Socket,
    buf: &mut [u8],
    ctx: &StreamContext,
    empty_polls: &mut u64,
) -> std::io::Result<bool> {
    let mut got = 0;
    let mut polls = 0u32;
    while got < buf.len() {
        match recv_now(socket, &mut buf[got..])? {
            Some(0) if got == 0 => return Ok(false),
            Some(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Some(n) => got += n,
            None => {
                polls = polls.wrapping_add(1);
                *empty_polls += 1;
                // Look at the stop flag now and then, not on every poll.
                if polls % 1024 == 0 && stopped(ctx) {
                    return match read_full(socket, &mut buf[got..])? {
                        true => Ok(true),
                        false if got == 0 => Ok(false),
                        false => Err(std::io::ErrorKind::UnexpectedEof.into()),
                    };
                }
                std::hint::spin_loop();
            }
        }
    }
    Ok(true)
}

/// One `recv` with MSG_DONTWAIT: Some(bytes) (0 is end of stream on TCP),
/// None when nothing is there yet or a signal interrupted the call.
fn recv_now(socket: &Socket, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
    // SAFETY: the buffer outlives the call and its length is passed with it.
    let n = unsafe {
        libc::recv(
            socket.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    };
    if n >= 0 {
        return Ok(Some(n as usize));
    }
    let e = std::io::Error::last_os_error();
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => Ok(None),
        _ => Err(e),
    }
}

/// Receives one datagram, waiting by polling with MSG_DONTWAIT (`--spin`)
/// until `until`; then WouldBlock, as a blocking receive's timeout would.
/// `empty_polls` counts the polls that found no datagram.
fn recv_spinning(socket: &Socket, buf: &mut [u8], until: Instant, empty_polls: &mut u64) -> std::io::Result<usize> {
    let mut polls = 0u32;
    loop {
        if let Some(n) = recv_now(socket, buf)? {
            return Ok(n);
        }
        polls = polls.wrapping_add(1);
        *empty_polls += 1;
        // Read the clock now and then, not on every poll.
        if polls % 256 == 0 && Instant::now() >= until {
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        std::hint::spin_loop();
    }
}

/// The requester (or the responder) of one flow over a stream of any
/// transport: a socket, a TLS session over it, or a QUIC stream. Over TLS
/// and QUIC the stream end records the handshake; the requester seals
/// the requests.
pub fn on_stream(
    stream: Box<dyn Stream>,
    requester: bool,
    exchange: &Exchange,
    ctx: &StreamContext,
) -> (TaskEnd, FlowCounts) {
    let mut counts = FlowCounts::default();
    let end = stream.carry(
        requester,
        Box::new(|socket, wire| {
            let (end, flow) = match requester {
                true => stream_requester(socket, wire, exchange, ctx),
                false => stream_responder(socket, wire, exchange, ctx),
            };
            counts = flow;
            end
        }),
    );
    (end, counts)
}

/// `socket`: the connection's, for `--spin` and `--quickack` (None over QUIC).
fn stream_requester(
    socket: Option<&Socket>,
    io: &mut dyn Wire,
    exchange: &Exchange,
    ctx: &StreamContext,
) -> (TaskEnd, FlowCounts) {
    let request: Vec<u8> = (0..exchange.request).map(|i| (i % 251) as u8).collect();
    let mut response = vec![0u8; exchange.response];
    let mut counter = Counter::new(exchange, ctx, true);
    // Each request's start, and its real-time send stamp with --one-way.
    let mut in_flight: VecDeque<(Instant, u64)> = VecDeque::with_capacity(exchange.burst);
    let mut next = Instant::now();
    let error = 'flow: loop {
        while in_flight.len() < exchange.burst && !stopped(ctx) {
            if !paced(exchange, &mut next, ctx) {
                break;
            }
            in_flight.push_back((Instant::now(), if exchange.one_way { stamp_now() } else { 0 }));
            if let Err(e) = io.write_all(&request) {
                break 'flow Some(format!("sending a request: {e}"));
            }
        }
        counter.rr.max_in_flight = counter.rr.max_in_flight.max(in_flight.len() as u64);
        let Some((started, sent)) = in_flight.pop_front() else {
            break None;
        };
        if stopped(ctx) {
            io.set_read_timeout(Some(TAIL));
        }
        let read = match socket.filter(|_| exchange.spin && !stopped(ctx)) {
            Some(socket) => read_full_spinning(socket, &mut response, ctx, &mut counter.rr.spin_empty_polls),
            None => read_full(&mut *io, &mut response),
        };
        match read {
            Ok(true) => {}
            Ok(false) => break Some("the responder closed the connection".to_string()),
            Err(e) if stopped(ctx) && timed_out(&e) => break None,
            Err(e) => break Some(format!("receiving a response: {e}")),
        }
        // The real-time clock first: the legs then lie within the round
        // trip (sent after its start, arrived before its end).
        let arrived = if exchange.one_way { stamp_now() } else { 0 };
        counter.done(Some(started), Instant::now());
        if exchange.one_way {
            counter.legs(started, (sent, stamp_of(&response, STAMP_AT), arrived));
        }
        if exchange.quickack && socket.is_some_and(quickack) {
            counter.rr.quickacks += 1;
        }
    };
    io.close_write();
    counter.finish(error, false)
}

fn stream_responder(
    socket: Option<&Socket>,
    io: &mut dyn Wire,
    exchange: &Exchange,
    ctx: &StreamContext,
) -> (TaskEnd, FlowCounts) {
    let mut request = vec![0u8; exchange.request];
    let mut response: Vec<u8> = (0..exchange.response).map(|i| (i % 251) as u8).collect();
    let mut counter = Counter::new(exchange, ctx, false);
    let error = loop {
        let read = match socket.filter(|_| exchange.spin) {
            Some(socket) => read_full_spinning(socket, &mut request, ctx, &mut counter.rr.spin_empty_polls),
            None => read_full(&mut *io, &mut request),
        };
        match read {
            Ok(true) => {}
            Ok(false) => break None,
            // The requester may reset the connection once it is done.
            Err(e) if stopped(ctx) || e.kind() == std::io::ErrorKind::ConnectionReset => break None,
            Err(e) => break Some(format!("receiving a request: {e}")),
        }
        if exchange.quickack && socket.is_some_and(quickack) {
            counter.rr.quickacks += 1;
        }
        if exchange.one_way {
            stamp(&mut response, STAMP_AT);
        }
        match io.write_all(&response) {
            Ok(()) => counter.done(None, Instant::now()),
            Err(_) if stopped(ctx) => break None,
            Err(e) => break Some(format!("sending a response: {e}")),
        }
    };
    counter.finish(error, false)
}

pub fn datagram_requester(socket: &Socket, exchange: &Exchange, ctx: &StreamContext) -> (TaskEnd, FlowCounts) {
    let mut request: Vec<u8> = (0..exchange.request).map(|i| (i % 251) as u8).collect();
    let mut response = vec![0u8; exchange.response.max(64)];
    let mut counter = Counter::new(exchange, ctx, true);
    let wait = (exchange.timeout / 4).clamp(Duration::from_millis(1), POLL);
    let _ = socket.set_read_timeout(Some(wait));
    // Each request's sequence number, start and real-time send stamp.
    let mut in_flight: Vec<(u64, Instant, u64)> = Vec::with_capacity(exchange.burst);
    let mut seq = 0u64;
    let mut tail_until: Option<Instant> = None;
    let mut next = Instant::now();
    let error = loop {
        while in_flight.len() < exchange.burst && !stopped(ctx) {
            if !paced(exchange, &mut next, ctx) {
                break;
            }
            seq += 1;
            request[..8].copy_from_slice(&seq.to_be_bytes());
            let now = Instant::now();
            let sent = if exchange.one_way { stamp_now() } else { 0 };
            match socket.send(&request) {
                Ok(_) => in_flight.push((seq, now, sent)),
                // A refused or dropped send is a lost transaction, not a failure.
                Err(_) => count_lost(&mut counter, now),
            }
        }
        counter.rr.max_in_flight = counter.rr.max_in_flight.max(in_flight.len() as u64);
        if stopped(ctx) {
            let until = *tail_until.get_or_insert(Instant::now() + exchange.timeout.min(TAIL));
            if in_flight.is_empty() || Instant::now() >= until {
                break None;
            }
        }
        let received = if exchange.spin {
            recv_spinning(
                socket,
                &mut response,
                Instant::now() + wait,
                &mut counter.rr.spin_empty_polls,
            )
        } else {
            socket.recv(as_uninit(&mut response))
        };
        match received {
            Ok(len) if len >= 8 => {
                // As on a stream: the real-time clock before the round trip's end.
                let arrived = if exchange.one_way { stamp_now() } else { 0 };
                let now = Instant::now();
                let got = u64::from_be_bytes(response[..8].try_into().unwrap());
                match in_flight.iter().position(|(s, _, _)| *s == got) {
                    Some(i) => {
                        let (_, started, sent) = in_flight.swap_remove(i);
                        counter.done(Some(started), now);
                        if exchange.one_way && len >= DATAGRAM_STAMP_AT + 8 {
                            counter.legs(started, (sent, stamp_of(&response, DATAGRAM_STAMP_AT), arrived));
                        }
                    }
                    None => counter.rr.late_responses += 1,
                }
            }
            Ok(_) => counter.rr.late_responses += 1,
            Err(e) if timed_out(&e) || e.raw_os_error() == Some(libc::ECONNREFUSED) => {}
            Err(e) => break Some(format!("receiving a response: {e}")),
        }
        let now = Instant::now();
        let timeout = exchange.timeout;
        let before = in_flight.len();
        let mut lost_started = Vec::new();
        in_flight.retain(|&(_, t, _)| {
            let keep = now - t < timeout;
            if !keep {
                lost_started.push(t);
            }
            keep
        });
        if in_flight.len() != before {
            for t in lost_started {
                count_lost(&mut counter, t);
            }
        }
    };
    // Requests still unanswered at the end were lost too.
    for (_, t, _) in in_flight {
        count_lost(&mut counter, t);
    }
    counter.finish(error, true)
}

fn count_lost(counter: &mut Counter, started: Instant) {
    if started >= counter.omit_at {
        counter.rr.lost_transactions += 1;
    }
}

/// Views an initialized buffer as the uninitialized slice socket2 reads into.
fn as_uninit(buf: &mut [u8]) -> &mut [std::mem::MaybeUninit<u8>] {
    // SAFETY: u8 and MaybeUninit<u8> have the same layout; we only write.
    unsafe { &mut *(buf as *mut [u8] as *mut [std::mem::MaybeUninit<u8>]) }
}

pub fn datagram_responder(socket: &Socket, exchange: &Exchange, ctx: &StreamContext) -> (TaskEnd, FlowCounts) {
    let mut request = vec![0u8; exchange.request.max(64)];
    let mut response: Vec<u8> = (0..exchange.response).map(|i| (i % 251) as u8).collect();
    let mut counter = Counter::new(exchange, ctx, false);
    let _ = socket.set_read_timeout(Some(POLL));
    let mut stop_seen: Option<Instant> = None;
    let error = loop {
        let received = if exchange.spin && !stopped(ctx) {
            recv_spinning(
                socket,
                &mut request,
                Instant::now() + POLL,
                &mut counter.rr.spin_empty_polls,
            )
        } else {
            socket.recv(as_uninit(&mut request))
        };
        match received {
            // Repeated registrations carry nicbench's header; requests do not.
            Ok(len) if len >= 8 && DatagramHeader::read(&request[..len]).is_none() => {
                response[..8].copy_from_slice(&request[..8]);
                if exchange.one_way {
                    stamp(&mut response, DATAGRAM_STAMP_AT);
                }
                match socket.send(&response) {
                    Ok(_) => counter.done(None, Instant::now()),
                    Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
                    Err(e) => break Some(format!("sending a response: {e}")),
                }
            }
            Ok(_) => {}
            Err(e) if timed_out(&e) || e.raw_os_error() == Some(libc::ECONNREFUSED) => {}
            Err(e) => break Some(format!("receiving a request: {e}")),
        }
        if stopped(ctx) && quiet(&mut stop_seen, counter.last) {
            break None;
        }
    };
    counter.finish(error, true)
}

/// True once the stop flag has been up and nothing happened for [`DRAIN`].
fn quiet(stop_seen: &mut Option<Instant>, last: Option<Instant>) -> bool {
    let now = Instant::now();
    let since = *stop_seen.get_or_insert(now);
    let from = last.map_or(since, |l| l.max(since));
    now - from >= DRAIN || now - since >= TAIL
}

/// `--crr` client: a new connection per transaction, opened, admitted,
/// its handshake done and closed with a reset by the transport
/// ([`Dialing`]); `configure` is set on each connection's socket.
pub fn crr_requester(
    mut dialing: Box<dyn Dialing>,
    configure: Configure,
    exchange: &Exchange,
    ctx: &StreamContext,
) -> (TaskEnd, FlowCounts) {
    let request: Vec<u8> = (0..exchange.request).map(|i| (i % 251) as u8).collect();
    let mut response = vec![0u8; exchange.response];
    let connection = dialing.connection();
    let mut counter = Counter::new(exchange, ctx, true);
    let mut error = None;
    let mut next = Instant::now();
    while !stopped(ctx) && paced(exchange, &mut next, ctx) {
        let started = Instant::now();
        match dialing.transact(configure, &request, &mut response) {
            Ok(()) => {
                counter.rr.connections += 1;
                counter.done(Some(started), Instant::now());
            }
            Err(e) => {
                error = Some(format!(
                    "transaction {} ({connection}): {e}",
                    counter.rr.connections + 1
                ));
                break;
            }
        }
    }
    let (mut end, counts) = counter.finish(error, false);
    dialing.finish(&mut end);
    (end, counts)
}

/// `--crr` agent: answer the connections that come ([`Answering`]: only
/// the client's, with the token), until the test is over and none came
/// for a while. A connection that fails its admission, its handshake or
/// its transaction is not counted.
pub fn crr_responder(
    mut answering: Box<dyn Answering>,
    exchange: &Exchange,
    ctx: &StreamContext,
) -> (TaskEnd, FlowCounts) {
    let mut request = vec![0u8; exchange.request];
    let response: Vec<u8> = (0..exchange.response).map(|i| (i % 251) as u8).collect();
    let mut counter = Counter::new(exchange, ctx, false);
    let mut stop_seen: Option<Instant> = None;
    loop {
        if stopped(ctx) && quiet(&mut stop_seen, counter.last) {
            break;
        }
        let mut quickacks = 0;
        let answer = answering.answer(&mut request, &response, &mut |socket| {
            if exchange.quickack && quickack(socket) {
                quickacks += 1;
            }
        });
        counter.rr.quickacks += quickacks;
        match answer {
            Answer::Nothing => {}
            Answer::Answered => {
                counter.rr.connections += 1;
                counter.done(None, Instant::now());
            }
            Answer::Closed => break,
        }
    }
    let (mut end, counts) = counter.finish(None, true);
    answering.finish(&mut end);
    (end, counts)
}
