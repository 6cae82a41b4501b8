//! UDP streams in iperf3's format: the connect handshake (a 4-byte
//! datagram from the client, a 4-byte reply from the server) and the
//! send and receive loops with iperf3's datagram header (send time and a
//! packet count from 1, [`super::wire::UdpHeader`]). Loss the way iperf3
//! counts it: the highest count seen minus the distinct datagrams received.
//!
//! Our own UDP workload has its own header; these loops exist because an
//! iperf3 peer reads and writes only its own. Pacing reuses our token
//! bucket, sequence accounting and jitter reuse `workload::transport::udp::wire`.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::Socket;

use super::wire::{UdpHeader, LEGACY_UDP_CONNECT_MSG, LEGACY_UDP_CONNECT_REPLY, UDP_CONNECT_MSG, UDP_CONNECT_REPLY};
use crate::probe::tcpinfo;
use crate::workload::address_proof::ProvenAddresses;
use crate::workload::runner::{StreamContext, TaskEnd};
use crate::workload::transport::udp::counts::{UdpEnd, UdpReceived, KEY};
use crate::workload::transport::udp::wire::{Jitter, Pacer, SeqTracker};
use crate::workload::transport::udp::{realtime_nanos, socket_drops};

/// How long a receiver waits for stragglers once the test is over.
const DRAIN: Duration = Duration::from_millis(300);
/// How often a blocked receive wakes up to look at the stop flag.
const POLL: Duration = Duration::from_millis(50);
/// Datagrams of data a client may see before the server's connect reply
/// (iperf3 allows a few in reverse mode, they may overtake the reply).
const MAX_EARLY_DATAGRAMS: usize = 64;

/// Client: sends the connect datagram on a connected socket and waits
/// for the server's reply.
pub fn client_handshake(socket: &Socket, timeout: Duration) -> std::io::Result<()> {
    let deadline = Instant::now() + timeout;
    socket.send(&UDP_CONNECT_MSG)?;
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4];
    for _ in 0..MAX_EARLY_DATAGRAMS {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        socket.set_read_timeout(Some(left))?;
        let n = match socket.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => break,
            Err(e) => return Err(e),
        };
        // SAFETY: recv initialised the first n bytes.
        let got: Vec<u8> = buf[..n.min(4)].iter().map(|b| unsafe { b.assume_init() }).collect();
        if got == UDP_CONNECT_REPLY || got == LEGACY_UDP_CONNECT_REPLY {
            socket.set_read_timeout(None)?;
            return Ok(());
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "the server did not answer the UDP connect datagram",
    ))
}

/// Server: the reply that tells the client its stream is accepted; sent
/// after the next stream's socket is bound, as iperf3 does, so the next
/// connect datagram always finds a socket.
pub fn server_reply(socket: &Socket) -> std::io::Result<()> {
    socket.send(&UDP_CONNECT_REPLY).map(|_| ())
}

/// Server: waits on `socket` (bound to the iperf3 port) for a client's
/// connect datagram from `peer_ip` and connects the socket to its sender;
/// returns the datagrams refused meanwhile (other addresses, or not a
/// connect datagram).
pub fn server_accept(socket: &Socket, peer_ip: std::net::IpAddr, deadline: Instant) -> std::io::Result<u64> {
    let mut refused = 0;
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 16];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client did not send its UDP connect datagram in time",
            ));
        }
        socket.set_read_timeout(Some(left))?;
        let (n, from) = match socket.recv_from(&mut buf) {
            Ok(r) => r,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(e) => return Err(e),
        };
        let Some(from) = from.as_socket() else { continue };
        // SAFETY: recv_from initialised the first n bytes.
        let got: Vec<u8> = buf[..n.min(16)].iter().map(|b| unsafe { b.assume_init() }).collect();
        // The one rule of where the agent sends (workload::address_proof):
        // only to the control connection's peer.
        if !ProvenAddresses::peer_only(peer_ip).admits(from.ip())
            || (got != UDP_CONNECT_MSG && got != LEGACY_UDP_CONNECT_MSG)
        {
            refused += 1;
            continue;
        }
        socket.connect(&from.into())?;
        socket.set_read_timeout(None)?;
        return Ok(refused);
    }
}

/// How a UDP sender sends.
#[derive(Debug, Clone, Copy)]
pub struct SendPlan {
    pub datagram_bytes: usize,
    /// Bits per second; None: as fast as possible.
    pub rate: Option<u64>,
    pub counters_64bit: bool,
    /// Bytes to send in all, for `-n`.
    pub quota: Option<u64>,
}

/// The UDP sender's loop: pace, stamp, send one datagram.
pub fn send(socket: Socket, plan: SendPlan, ctx: &StreamContext) -> TaskEnd {
    let fd = socket.as_raw_fd();
    let len = plan.datagram_bytes.max(UdpHeader::len(plan.counters_64bit));
    let mut buffer: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let mut pacer = plan.rate.map(|r| Pacer::new(r, (len as u64 * 8).max(r / 8 / 100)));
    let start = Instant::now();
    let (mut count, mut total, mut send_errors) = (0u64, 0u64, 0u64);
    let mut error = None;
    while !ctx.stop.load(Ordering::Relaxed) {
        if plan.quota.is_some_and(|q| total >= q) {
            break;
        }
        if let Some(p) = pacer.as_mut() {
            let elapsed = start.elapsed();
            if p.allowance(elapsed) < len as u64 {
                let wait = p.wait_for(elapsed, len as u64);
                std::thread::sleep(wait.min(Duration::from_millis(10)));
                continue;
            }
            p.spend(len as u64);
        }
        let now = realtime_nanos();
        UdpHeader {
            sec: (now / 1_000_000_000) as u32,
            usec: ((now % 1_000_000_000) / 1000) as u32,
            count: count + 1,
        }
        .write(&mut buffer, plan.counters_64bit);
        // SAFETY: the buffer outlives the call; the socket is open.
        let n = unsafe { libc::send(fd, buffer.as_ptr() as *const libc::c_void, len, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ENOBUFS | libc::ECONNREFUSED | libc::EAGAIN) => {
                    send_errors += 1;
                    continue;
                }
                _ => {
                    error = Some(format!("send failed after {count} datagrams: {e}"));
                    break;
                }
            }
        }
        count += 1;
        total += n as u64;
        ctx.bytes.store(total, Ordering::Relaxed);
    }
    let end = UdpEnd {
        datagram_bytes: len as u64,
        datagrams: count,
        datagrams_per_syscall: 1.0,
        offered_bits_per_second: plan.rate.map(|r| r as f64),
        send_errors,
        ..UdpEnd::default()
    };
    let mut task = TaskEnd {
        socket: Some(tcpinfo::socket_buffers(&socket)),
        error,
        ..TaskEnd::default()
    };
    task.extras.set(KEY, &end);
    task
}

/// What a receiver shares with whoever reports in iperf3's terms.
#[derive(Debug, Default)]
pub struct ReceiveCounts {
    /// Highest packet count seen (iperf3's `packets` of a receiver).
    pub highest: AtomicU64,
}

/// The UDP receiver's loop: until the stop flag is up and the socket has
/// been quiet for [`DRAIN`].
pub fn receive(
    socket: Socket,
    datagram_bytes: usize,
    counters_64bit: bool,
    counts: Arc<ReceiveCounts>,
    ctx: &StreamContext,
) -> TaskEnd {
    let fd = socket.as_raw_fd();
    let mut buffer = vec![0u8; datagram_bytes.max(64) + 64];
    let _ = socket.set_read_timeout(Some(POLL));
    let mut tracker = SeqTracker::default();
    let mut jitter = Jitter::default();
    let (mut total, mut highest, mut malformed) = (0u64, 0u64, 0u64);
    let mut last_activity = None;
    let mut stop_seen: Option<Instant> = None;
    let mut error = None;
    loop {
        // SAFETY: the buffer outlives the call.
        let n = unsafe { libc::recv(fd, buffer.as_mut_ptr() as *mut libc::c_void, buffer.len(), 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN | libc::EINTR | libc::ECONNREFUSED) => {}
                _ => {
                    error = Some(format!("receive failed after {total} bytes: {e}"));
                    break;
                }
            }
        } else {
            let arrival = Instant::now();
            let n = n as usize;
            match UdpHeader::read(&buffer[..n], counters_64bit) {
                Some(h) if h.count > 0 => {
                    tracker.record(h.count - 1, false);
                    highest = highest.max(h.count);
                    jitter.update(h.send_nanos(), realtime_nanos());
                    total += n as u64;
                    ctx.bytes.store(total, Ordering::Relaxed);
                    last_activity = Some(arrival);
                }
                _ => malformed += 1,
            }
        }
        if ctx.stop.load(Ordering::Relaxed) {
            let since = *stop_seen.get_or_insert_with(Instant::now);
            let quiet = last_activity.map_or(true, |t| t.elapsed() >= DRAIN);
            if quiet || since.elapsed() >= DRAIN * 10 {
                break;
            }
        }
    }
    counts.highest.store(highest, Ordering::Relaxed);
    let end = UdpEnd {
        datagram_bytes: datagram_bytes as u64,
        datagrams: tracker.received,
        datagrams_per_syscall: 1.0,
        received: Some(UdpReceived {
            duplicate_datagrams: tracker.duplicates,
            out_of_order_datagrams: tracker.out_of_order,
            malformed_datagrams: malformed,
            refused_datagrams: 0,
            jitter_us: jitter.micros(),
            socket_drops: socket_drops(&socket).unwrap_or(0),
            // iperf3's warm-up (-O) counts in its loss: no split here.
            warmup_socket_drops: None,
            // The iperf3 client ends the test, not a count this end knows.
            lost_at_end_datagrams: None,
            first_datagram_after_seconds: None,
            numbered_datagrams: None,
            // No clock estimate with an iperf3 client to take the offset out.
            transit: None,
        }),
        ..UdpEnd::default()
    };
    let mut task = TaskEnd {
        socket: Some(tcpinfo::socket_buffers(&socket)),
        error,
        last_activity,
        ..TaskEnd::default()
    };
    task.extras.set(KEY, &end);
    task
}

#[cfg(test)]
mod tests {
    use super::*;
    use socket2::{Domain, Protocol, Type};
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    use std::sync::atomic::AtomicBool;

    fn udp() -> Socket {
        let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).unwrap();
        s.bind(&SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0).into())
            .unwrap();
        s
    }

    #[test]
    fn handshake_then_datagrams_counted_like_iperf3() {
        let server = udp();
        let server_addr = server.local_addr().unwrap();
        let client = udp();
        client.connect(&server_addr).unwrap();
        let client_thread = std::thread::spawn(move || {
            client_handshake(&client, Duration::from_secs(5)).unwrap();
            client
        });
        let refused = server_accept(
            &server,
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            Instant::now() + Duration::from_secs(5),
        )
        .unwrap();
        server_reply(&server).unwrap();
        assert_eq!(refused, 0);
        let client = client_thread.join().unwrap();
        let bytes = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        let ctx = StreamContext {
            bytes: &bytes,
            stop: &stop,
            deadline: None,
            progress: None,
        };
        let plan = SendPlan {
            datagram_bytes: 100,
            rate: None,
            counters_64bit: false,
            quota: Some(100 * 50),
        };
        let sent = send(client, plan, &ctx);
        assert!(sent.error.is_none());
        let sent: UdpEnd = sent.extras.get(KEY).unwrap();
        assert_eq!(sent.datagrams, 50);
        let counts = Arc::new(ReceiveCounts::default());
        let rbytes = AtomicU64::new(0);
        let stop = AtomicBool::new(true);
        let ctx = StreamContext {
            bytes: &rbytes,
            stop: &stop,
            deadline: None,
            progress: None,
        };
        let got = receive(server, 100, false, Arc::clone(&counts), &ctx);
        let got: UdpEnd = got.extras.get(KEY).unwrap();
        assert_eq!(got.datagrams, 50);
        assert_eq!(counts.highest.load(Ordering::Relaxed), 50);
        assert_eq!(rbytes.load(Ordering::Relaxed), 5000);
    }
}
