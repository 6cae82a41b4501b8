//! The data streams of an iperf3 test, on our stream runner: TCP with the
//! `tcp` workload's send and receive loops, UDP with iperf3's datagram
//! header ([`super::udp`]). Client and server both build their side here,
//! run it on a thread while they serve the control connection, and turn
//! what it measured into our [`SideReport`] and into iperf3's results.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use socket2::Socket;

use super::udp::{self as iudp, ReceiveCounts, SendPlan};
use super::wire::{self, Results, StreamResults};
use crate::model::{CpuReport, Party, PeerStream, ProcessCpu, Role, SideReport, StreamEnd};
use crate::probe::cpu::{cpu_report, CpuSampler, CpuSnapshot};
use crate::workload::runner::{
    run_streams, tcp_probe, IntervalCallback, RunControl, SideOutcome, StreamContext, StreamTask,
};
use crate::workload::transport::udp::counts::{UdpEnd, UdpReceived, KEY as UDP_KEY};
use crate::workload::transport::{Delivery, Proto};

/// One connected data stream.
pub struct DataStream {
    /// Our stream id (as in `TestSpec::flows`).
    pub id: u32,
    /// iperf3's id for it (1, 3, 4, ...).
    pub peer_id: i64,
    /// Our end's role.
    pub role: Role,
    pub socket: Socket,
}

/// How the streams move data.
#[derive(Debug, Clone, Copy)]
pub struct StreamPlan {
    pub transport: Proto,
    pub message_bytes: usize,
    /// UDP bits per second per stream; None: as fast as possible.
    pub rate: Option<u64>,
    pub counters_64bit: bool,
    /// `-n`: bytes our senders send in all.
    pub bytes_total: Option<u64>,
    /// TCP receivers discard with MSG_TRUNC (the client's `--skip-rx-copy`).
    pub discard: bool,
}

/// A side running on its own thread, and the handles to steer it.
pub struct RunningSide {
    pub stop: Arc<AtomicBool>,
    /// Senders still sending; the client sends TEST_END when it reaches 0.
    pub senders_left: Arc<AtomicUsize>,
    pub senders: usize,
    receivers: Vec<Socket>,
    /// Our senders' sockets, to cut a write the peer no longer reads.
    sender_sockets: Vec<Socket>,
    /// Set when [`RunningSide::end_senders`] cut the senders' writes: the
    /// broken pipe that follows is our doing, not the stream's failure.
    senders_cut: Arc<AtomicBool>,
    all: Vec<Socket>,
    /// UDP receivers' highest packet counts, by our stream id.
    udp_counts: Vec<(u32, Arc<ReceiveCounts>)>,
    peer_ids: Vec<(u32, i64)>,
    thread: thread::JoinHandle<SideOutcome>,
    transport: Proto,
    before: CpuSnapshot,
    pub start: Instant,
}

/// Starts the streams now. `duration` is the sending time after `omit`
/// (None when the peer or a byte count ends the test).
pub fn start(
    streams: Vec<DataStream>,
    plan: StreamPlan,
    omit: Duration,
    duration: Option<Duration>,
    cpus: Vec<u32>,
    on_interval: Option<IntervalCallback>,
    sampler: &dyn CpuSampler,
) -> Result<RunningSide, std::io::Error> {
    let stop = Arc::new(AtomicBool::new(false));
    let senders = streams.iter().filter(|s| s.role == Role::Sender).count();
    let senders_left = Arc::new(AtomicUsize::new(senders));
    let mut receivers = Vec::new();
    let mut sender_sockets = Vec::new();
    let senders_cut = Arc::new(AtomicBool::new(false));
    let mut all = Vec::new();
    let mut udp_counts = Vec::new();
    let mut peer_ids = Vec::new();
    let mut tasks = Vec::new();
    let mut sender_index = 0u64;
    for s in streams {
        let buffers = crate::probe::tcpinfo::socket_buffers(&s.socket);
        if let Ok(c) = s.socket.try_clone() {
            if let Ok(c2) = c.try_clone() {
                match s.role {
                    Role::Receiver => receivers.push(c2),
                    Role::Sender => sender_sockets.push(c2),
                }
            }
            all.push(c);
        }
        peer_ids.push((s.id, s.peer_id));
        let socket = s.socket;
        let tcp_sender = s.role == Role::Sender && plan.transport == Proto::TCP;
        let probe = tcp_sender.then(|| tcp_probe(&socket)).flatten();
        // iperf3's -b on TCP paces each stream; the kernel's pacing does it here.
        if let (true, Some(rate)) = (tcp_sender, plan.rate.filter(|&r| r > 0)) {
            if let Err(e) = crate::workload::transport::tcp::pace(&socket, rate) {
                log::warn!("iperf3 stream {}: {e}; it sends unpaced", s.id);
            }
        }
        let body: crate::workload::runner::StreamBody = match (s.role, plan.transport.delivery()) {
            (Role::Sender, _) => {
                let transport = plan.transport;
                // The client ends a count test (-n, -k) once it sent or got
                // the count. A paced UDP sender goes on until then, as
                // iperf3's own server does: stopping at the count would
                // leave a client that lost datagrams waiting for them.
                let quota = plan
                    .bytes_total
                    .filter(|_| transport == Proto::TCP || plan.rate.is_none())
                    .map(|total| {
                        let n = senders as u64;
                        total / n + u64::from(sender_index < total % n)
                    });
                sender_index += 1;
                let left = Arc::clone(&senders_left);
                let cut = Arc::clone(&senders_cut);
                let message = plan.message_bytes;
                Box::new(move |ctx: &StreamContext| {
                    let mut end = match transport.delivery() {
                        Delivery::Stream => crate::workload::transport::tcp::send_stream(
                            socket,
                            message,
                            quota,
                            crate::workload::transport::tcp::SendPath::Copy,
                            ctx,
                        ),
                        Delivery::Datagram => iudp::send(
                            socket,
                            SendPlan {
                                datagram_bytes: message,
                                rate: plan.rate,
                                counters_64bit: plan.counters_64bit,
                                quota,
                            },
                            ctx,
                        ),
                    };
                    if cut.load(Ordering::Relaxed) {
                        end.error = None;
                    }
                    left.fetch_sub(1, Ordering::Relaxed);
                    end
                })
            }
            (Role::Receiver, Delivery::Stream) => {
                let message = plan.message_bytes;
                let path = if plan.discard {
                    crate::workload::transport::tcp::ReceivePath::Discard
                } else {
                    crate::workload::transport::tcp::ReceivePath::Copy
                };
                Box::new(move |ctx: &StreamContext| {
                    crate::workload::transport::tcp::receive_stream(socket, message, path, ctx)
                })
            }
            (Role::Receiver, Delivery::Datagram) => {
                let counts = Arc::new(ReceiveCounts::default());
                udp_counts.push((s.id, Arc::clone(&counts)));
                let message = plan.message_bytes;
                let wide = plan.counters_64bit;
                Box::new(move |ctx: &StreamContext| iudp::receive(socket, message, wide, counts, ctx))
            }
        };
        tasks.push(StreamTask::new(s.id, s.role, buffers, body).with_probe(probe));
    }
    let before = sampler.sample()?;
    let control = RunControl {
        stop: Arc::clone(&stop),
        start: Instant::now(),
        omit,
        duration,
        interval: Duration::from_secs(1),
        cpus,
        on_interval,
        on_progress: None,
    };
    let start = control.start;
    let thread = thread::Builder::new()
        .name("iperf3-side".into())
        .spawn(move || run_streams(tasks, &control))?;
    Ok(RunningSide {
        stop,
        senders_left,
        senders,
        receivers,
        sender_sockets,
        senders_cut,
        all,
        udp_counts,
        peer_ids,
        thread,
        transport: plan.transport,
        before,
        start,
    })
}

impl RunningSide {
    /// Stops the senders (they finish the write under way).
    pub fn stop_senders(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Ends the senders when the peer has ended the test (TEST_END): they
    /// may finish the write under way for up to `grace`; a write still
    /// blocked then waits on a peer that no longer reads (an iperf3 client
    /// stops reading its `--bidir` or `-R` streams once it sends TEST_END),
    /// so it is cut, as iperf3's own server stops sending at once.
    pub fn end_senders(&self, grace: Duration) {
        self.stop_senders();
        let until = Instant::now() + grace;
        while self.senders_left.load(Ordering::Relaxed) > 0 && Instant::now() < until {
            thread::sleep(Duration::from_millis(2));
        }
        if self.senders_left.load(Ordering::Relaxed) > 0 {
            self.senders_cut.store(true, Ordering::Relaxed);
            for s in &self.sender_sockets {
                let _ = s.shutdown(std::net::Shutdown::Write);
            }
        }
    }

    /// Ends the receivers' reads: TCP receivers see end-of-stream at once,
    /// UDP receivers stop after their drain.
    pub fn end_receivers(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if self.transport == Proto::TCP {
            for s in &self.receivers {
                let _ = s.shutdown(std::net::Shutdown::Read);
            }
        }
    }

    /// True when no TCP receiver has unread bytes queued (FIONREAD).
    pub fn receivers_drained(&self) -> bool {
        use std::os::fd::AsRawFd;
        self.transport != Proto::TCP
            || self.receivers.iter().all(|s| {
                let mut queued: libc::c_int = 0;
                // SAFETY: FIONREAD writes one int.
                let rc = unsafe { libc::ioctl(s.as_raw_fd(), libc::FIONREAD, &mut queued) };
                rc != 0 || queued == 0
            })
    }

    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Waits for every stream up to `timeout`, then closes the sockets so
    /// that blocked calls return, and collects what the side measured.
    pub fn finish(self, host: Party, timeout: Duration, sampler: &dyn CpuSampler) -> Result<Finished, std::io::Error> {
        let deadline = Instant::now() + timeout;
        while !self.thread.is_finished() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(5));
        }
        if !self.thread.is_finished() {
            for s in &self.all {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
        let outcome = self
            .thread
            .join()
            .map_err(|_| std::io::Error::other("a stream thread panicked (a nicbench bug: please report it)"))?;
        let seconds = self.start.elapsed().as_secs_f64();
        let after = sampler.sample()?;
        let bytes_moved = outcome.streams.iter().map(|s| s.bytes + s.warmup_bytes).sum();
        let cpu = cpu_report(
            &self.before,
            &after,
            sampler.ticks_per_second(),
            seconds,
            outcome.process.clone(),
            bytes_moved,
        );
        let highest = self
            .udp_counts
            .iter()
            .map(|(id, c)| (*id, c.highest.load(Ordering::Relaxed)))
            .collect();
        Ok(Finished {
            report: SideReport {
                host,
                streams: outcome.streams,
                cpu,
                counters: None,
                overlapped_tests: 0,
                links: Vec::new(),
            },
            peer_ids: self.peer_ids,
            udp_highest: highest,
        })
    }
}

/// What a side measured, with what iperf3's results need besides.
pub struct Finished {
    pub report: SideReport,
    peer_ids: Vec<(u32, i64)>,
    udp_highest: Vec<(u32, u64)>,
}

impl Finished {
    /// Our measurements as iperf3's results (`send_results`). CPU is the
    /// stream threads' CPU time over the test's wall time, in percent of
    /// one core, as iperf3 reports its own process.
    pub fn to_results(&self, transport: Proto) -> Results {
        let cpu = &self.report.cpu;
        let seconds = cpu.seconds.max(1e-9);
        let user = cpu.process.user_seconds / seconds * 100.0;
        let system = cpu.process.system_seconds / seconds * 100.0;
        let sends = self.report.streams.iter().any(|e| e.role == Role::Sender);
        let tcp = transport == Proto::TCP;
        let streams = self
            .report
            .streams
            .iter()
            .map(|end| {
                let peer_id = self
                    .peer_ids
                    .iter()
                    .find(|(id, _)| *id == end.stream_id)
                    .map_or(0, |(_, p)| *p);
                let udp: Option<UdpEnd> = end.extras.get(UDP_KEY);
                let received = udp.as_ref().and_then(|u| u.received.clone()).unwrap_or_default();
                let highest = self
                    .udp_highest
                    .iter()
                    .find(|(id, _)| *id == end.stream_id)
                    .map_or(0, |(_, h)| *h);
                // The omit period's datagrams (all of one size), from the
                // bytes the runner counted before the warm-up snapshot.
                let omitted_packets = udp
                    .as_ref()
                    .filter(|u| u.datagram_bytes > 0)
                    .map_or(0, |u| end.warmup_bytes / u.datagram_bytes) as i64;
                let (retransmits, jitter, errors, packets) = match (end.role, tcp) {
                    (Role::Sender, true) => (end.tcp_info.as_ref().map_or(-1, |t| t.retransmits as i64), 0.0, 0, 0),
                    (Role::Receiver, true) => (-1, 0.0, 0, 0),
                    (Role::Sender, false) => (-1, 0.0, 0, udp.as_ref().map_or(0, |u| u.datagrams) as i64),
                    (Role::Receiver, false) => {
                        let distinct = udp.as_ref().map_or(0, |u| u.datagrams);
                        // iperf3's cnt_error: gaps in the sequence, less late arrivals.
                        let lost = highest.saturating_sub(distinct);
                        (-1, received.jitter_us / 1e6, lost as i64, highest as i64)
                    }
                };
                StreamResults {
                    id: peer_id,
                    bytes: end.bytes,
                    retransmits,
                    jitter_seconds: jitter,
                    errors,
                    packets,
                    // Errors in the omit period are not told apart: none.
                    omitted: Some(wire::Omitted {
                        errors: 0,
                        packets: omitted_packets,
                    }),
                    start_time: Some(0.0),
                    end_time: Some(end.seconds),
                }
            })
            .collect();
        Results {
            cpu_util_total: user + system,
            cpu_util_user: user,
            cpu_util_system: system,
            sender_has_retransmits: if !sends { -1 } else { i64::from(tcp) },
            congestion_used: self
                .report
                .streams
                .iter()
                .find_map(|e| e.tcp_info.as_ref().map(|t| t.congestion_control.clone()))
                .filter(|c| !c.is_empty()),
            streams,
            server_output_text: None,
            server_output_json: None,
        }
    }
}

/// The peer's side as our [`SideReport`], from its iperf3 results: each
/// of our streams `(our id, iperf3 id, the peer's role)` gets the peer's
/// bytes and time; UDP receivers their counts and jitter. What iperf3 does
/// not report (host-wide CPU, TCP_INFO, buffers) stays empty: `cpu` holds
/// only the process CPU time and `logical_cpus` 0.
pub fn peer_report(
    host: Party,
    results: &Results,
    streams: &[(u32, i64, Role)],
    transport: Proto,
    datagram_bytes: u64,
    fallback_seconds: f64,
) -> Result<(SideReport, Vec<PeerStream>), String> {
    let mut ends = Vec::new();
    let mut raw = Vec::new();
    for &(id, peer_id, role) in streams {
        let r = results
            .streams
            .iter()
            .find(|s| s.id == peer_id)
            .ok_or_else(|| format!("no results for stream id {peer_id}"))?;
        if results.streams.iter().filter(|s| s.id == peer_id).count() > 1 {
            return Err(format!("stream id {peer_id} is reported twice"));
        }
        let seconds = match (r.start_time, r.end_time) {
            (Some(s), Some(e)) if e > s && (e - s).is_finite() => e - s,
            _ => fallback_seconds,
        };
        if !(0.0..=1e7).contains(&seconds) {
            return Err(format!("stream id {peer_id} lasted {seconds} s"));
        }
        let mut end = StreamEnd {
            stream_id: id,
            role,
            bytes: r.bytes,
            seconds,
            bits_per_second: if seconds > 0.0 {
                r.bytes as f64 * 8.0 / seconds
            } else {
                0.0
            },
            ..StreamEnd::default()
        };
        let udp = transport == Proto::UDP;
        if udp {
            let packets = r.packets.max(0) as u64;
            let errors = r.errors.max(0) as u64;
            let u = match role {
                Role::Sender => UdpEnd {
                    datagram_bytes,
                    datagrams: packets,
                    ..UdpEnd::default()
                },
                Role::Receiver => UdpEnd {
                    datagram_bytes,
                    datagrams: packets.saturating_sub(errors),
                    received: Some(UdpReceived {
                        jitter_us: r.jitter_seconds * 1e6,
                        ..UdpReceived::default()
                    }),
                    ..UdpEnd::default()
                },
            };
            end.extras.set(UDP_KEY, &u);
        }
        raw.push(PeerStream {
            peer_stream_id: peer_id,
            stream_id: id,
            bytes: r.bytes,
            retransmits: (role == Role::Sender && !udp && r.retransmits >= 0).then_some(r.retransmits as u64),
            jitter_us: (udp && role == Role::Receiver).then_some(r.jitter_seconds * 1e6),
            lost_datagrams: (udp && role == Role::Receiver).then_some(r.errors.max(0) as u64),
            packets: udp.then_some(r.packets.max(0) as u64),
            seconds: Some(seconds),
        });
        ends.push(end);
    }
    let seconds = ends.iter().map(|e| e.seconds).fold(0.0, f64::max);
    let process = ProcessCpu {
        user_seconds: results.cpu_util_user.max(0.0) / 100.0 * seconds,
        system_seconds: results.cpu_util_system.max(0.0) / 100.0 * seconds,
    };
    let cpu = CpuReport {
        seconds,
        process,
        bytes_moved: ends.iter().map(|e| e.bytes).sum(),
        ..CpuReport::default()
    };
    Ok((
        SideReport {
            host,
            streams: ends,
            cpu,
            counters: None,
            overlapped_tests: 0,
            links: Vec::new(),
        },
        raw,
    ))
}

/// iperf3's ids for our flows in order: the peer numbers streams as they
/// are created (client) or accepted (server), senders of the client first.
/// The peer's end of each of our streams: our id, iperf3's id, its role
/// (the opposite of ours), as [`peer_report`] takes them.
pub fn peer_ends(data_streams: &[DataStream]) -> Vec<(u32, i64, Role)> {
    data_streams
        .iter()
        .map(|d| {
            let peer_role = if d.role == Role::Sender {
                Role::Receiver
            } else {
                Role::Sender
            };
            (d.id, d.peer_id, peer_role)
        })
        .collect()
}

pub fn peer_ids(count: usize) -> Vec<i64> {
    (0..count).map(wire::stream_id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::cpu::ProcStat;
    use std::net::{TcpListener, TcpStream};

    /// Regression: `iperf3 -c AGENT --bidir` ended 5 s late because the
    /// agent's sender sat in a write its client no longer read, until the
    /// side's finish timeout closed the socket.
    #[test]
    fn ending_the_senders_cuts_a_write_the_peer_no_longer_reads() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (ours, _) = listener.accept().unwrap();
        let side = start(
            vec![DataStream {
                id: 0,
                peer_id: 1,
                role: Role::Sender,
                socket: Socket::from(ours),
            }],
            StreamPlan {
                transport: Proto::TCP,
                message_bytes: 128 * 1024,
                rate: None,
                counters_64bit: false,
                bytes_total: None,
                discard: false,
            },
            Duration::ZERO,
            None,
            vec![],
            None,
            &ProcStat,
        )
        .unwrap();
        // The peer never reads: wait until the send buffers are full and the
        // sender is blocked in its write.
        let mut queued = 0;
        loop {
            thread::sleep(Duration::from_millis(20));
            let sent = tcp_unsent(&side.sender_sockets[0]);
            if sent > 0 && sent == queued {
                break;
            }
            queued = sent;
        }
        side.end_senders(Duration::from_millis(10));
        let deadline = Instant::now() + Duration::from_secs(30);
        while side.senders_left.load(Ordering::Relaxed) > 0 {
            assert!(Instant::now() < deadline, "the sender is still blocked in its write");
            thread::sleep(Duration::from_millis(5));
        }
        let finished = side.finish(Party::Agent, Duration::ZERO, &ProcStat).unwrap();
        let end = &finished.report.streams[0];
        assert!(end.error.is_none(), "{:?}", end.error);
        assert!(end.bytes > 0);
        drop(peer);
    }

    /// Regression: a 3.21 client's `-u -R` sender line read "0/0": our
    /// results lacked `omitted_packets`/`omitted_errors`, so it took every
    /// packet the agent sent for the omit period's.
    #[test]
    fn udp_results_carry_the_omit_periods_counts() {
        let mut end = StreamEnd {
            stream_id: 0,
            role: Role::Sender,
            bytes: 1400 * 900,
            warmup_bytes: 1400 * 100,
            seconds: 1.0,
            ..StreamEnd::default()
        };
        end.extras.set(
            UDP_KEY,
            &UdpEnd {
                datagram_bytes: 1400,
                datagrams: 1000,
                ..UdpEnd::default()
            },
        );
        let finished = Finished {
            report: SideReport {
                host: Party::Agent,
                streams: vec![end],
                cpu: CpuReport::default(),
                counters: None,
                overlapped_tests: 0,
                links: Vec::new(),
            },
            peer_ids: vec![(0, 1)],
            udp_highest: vec![],
        };
        let json = finished.to_results(Proto::UDP).to_json();
        let stream = &json["streams"][0];
        assert_eq!(stream["packets"], 1000, "{json}");
        assert_eq!(stream["omitted_packets"], 100, "{json}");
        assert_eq!(stream["omitted_errors"], 0, "{json}");
    }

    /// Bytes queued on a socket and not yet acknowledged (SIOCOUTQ).
    fn tcp_unsent(socket: &Socket) -> i32 {
        use std::os::fd::AsRawFd;
        let mut queued: libc::c_int = 0;
        // SAFETY: SIOCOUTQ (TIOCOUTQ) writes one int.
        unsafe { libc::ioctl(socket.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
        queued
    }
}
