//! The probes of a `loaded` test. The client sends a UDP probe every
//! interval on its own socket, stamped with its wall clock; the agent
//! answers it with its receive and send times, so that the round trip
//! (the client's monotonic clock) and both one-way delays (the two wall
//! clocks, offset estimated later) are known. A TCP request/response on its
//! own idle connection (one byte each way, TCP_NODELAY) is the draft's
//! "foreign" probe. The agent only answers: probes from anyone but the
//! client, or without the session token, are dropped.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use socket2::Socket;

use super::WorkloadError;
use crate::protocol::TOKEN_LEN;
use crate::workload::address_proof::ProvenAddresses;
use crate::workload::base::one_way::realtime_nanos;

/// What a probe starts with.
const MAGIC: &[u8; 4] = b"NBLP";
/// magic, token, sequence number, client send, agent receive, agent send.
pub const PROBE_BYTES: usize = 4 + TOKEN_LEN + 4 * 8;
/// How long the client waits for the answers to its last probes.
const DRAIN: Duration = Duration::from_millis(250);
/// How often a blocked probe thread looks whether the test is over.
const POLL: Duration = Duration::from_millis(50);

/// When probes are due and when to stop, shared by an end's probe and
/// sampling threads.
pub struct Clock {
    /// The side's start: every time recorded is from here.
    pub start: Instant,
    pub interval: Duration,
    /// The runner's stop flag (time up, stop from the peer).
    pub stop: Arc<AtomicBool>,
    /// Raised when the load streams have all ended.
    pub done: Arc<AtomicBool>,
}

impl Clock {
    pub fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed) && !self.done.load(Ordering::Relaxed)
    }

    /// Microseconds from the start to `at`.
    pub fn micros(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.start).as_micros() as u64
    }

    /// Sleeps until `next` or the end, and moves `next` one interval on
    /// (to now when it fell behind). False once the test is over.
    pub fn tick(&self, next: &mut Instant) -> bool {
        crate::workload::pace::wait_for_slot(next, self.interval, || self.running())
    }

    /// The first slot of a thread that ticks at `quarter` quarters of an
    /// interval after the UDP prober: the UDP probe at 0, the sampler of
    /// the local queues at 1, the TCP probe at 2, the router's sampler at
    /// 3. Ticking all at once, their wake-ups and the TCP probe's packets
    /// met the UDP probe on the same cores and the idle round trip read a
    /// few microseconds high and twice as scattered (docs/LOADED.md).
    pub fn first_slot(&self, quarter: u32) -> Instant {
        Instant::now() + self.interval * quarter / 4
    }
}

/// One UDP probe as the client saw it: sent at (µs from the start), its
/// round trip (µs; null when no answer came), and the raw one-way delays
/// up and down (µs: one wall clock's time minus the other's, the clocks'
/// offset included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpProbe(pub u64, pub Option<u64>, pub Option<i64>, pub Option<i64>);

/// One TCP request/response: sent at and round trip, µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpProbe(pub u64, pub u64);

/// What an end's probe threads recorded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Probes {
    pub udp: Vec<UdpProbe>,
    pub tcp: Vec<TcpProbe>,
    /// UDP probes answered later than one sent after them.
    pub reordered: u64,
    /// Agent: probes answered.
    pub answered: u64,
}

/// The probe sockets of one end: the client sends probes, the agent
/// answers them.
pub enum ProbeSockets {
    Client {
        tcp: Socket,
        udp: UdpSocket,
        token: [u8; TOKEN_LEN],
    },
    Agent {
        tcp: Socket,
        udp: UdpSocket,
        token: [u8; TOKEN_LEN],
        /// Whom probes are answered: the control connection's peer.
        proven: ProvenAddresses,
    },
}

impl ProbeSockets {
    pub fn tcp(&self) -> &Socket {
        match self {
            ProbeSockets::Client { tcp, .. } | ProbeSockets::Agent { tcp, .. } => tcp,
        }
    }
}

/// The agent's UDP probe socket, on the address the client came to.
pub fn bind_echo(ip: IpAddr) -> Result<UdpSocket, WorkloadError> {
    UdpSocket::bind(SocketAddr::new(ip, 0)).map_err(WorkloadError::io(format!("binding the UDP probe socket on {ip}")))
}

/// The client's UDP probe socket, connected to the agent's.
pub fn connect_prober(bind: Option<IpAddr>, agent: SocketAddr) -> Result<UdpSocket, WorkloadError> {
    let local = bind.unwrap_or(match agent {
        SocketAddr::V4(_) => IpAddr::from([0u8; 4]),
        SocketAddr::V6(_) => IpAddr::from([0u16; 8]),
    });
    let socket =
        UdpSocket::bind(SocketAddr::new(local, 0)).map_err(WorkloadError::io("binding the UDP probe socket"))?;
    socket
        .connect(agent)
        .map_err(WorkloadError::io(format!("connecting the UDP probe socket to {agent}")))?;
    Ok(socket)
}

/// Runs an end's probes until the test is over.
pub fn run(sockets: ProbeSockets, clock: &Clock) -> Probes {
    std::thread::scope(|scope| match &sockets {
        ProbeSockets::Client { tcp, udp, token } => {
            let foreign = scope.spawn(|| tcp_prober(tcp, clock));
            let mut probes = udp_prober(udp, token, clock);
            probes.tcp = foreign.join().unwrap_or_default();
            probes
        }
        ProbeSockets::Agent {
            tcp,
            udp,
            token,
            proven,
        } => {
            let tcp_answered = scope.spawn(|| tcp_echo(tcp, clock));
            let answered = udp_echo(udp, token, proven, clock);
            Probes {
                answered: answered + tcp_answered.join().unwrap_or(0),
                ..Probes::default()
            }
        }
    })
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().unwrap_or_default())
}

const SEQ_AT: usize = 4 + TOKEN_LEN;
const CLIENT_SENT_AT: usize = SEQ_AT + 8;
const AGENT_RECEIVED_AT: usize = CLIENT_SENT_AT + 8;
const AGENT_SENT_AT: usize = AGENT_RECEIVED_AT + 8;

/// A probe of ours: our magic and the session's token.
fn is_probe(b: &[u8], token: &[u8; TOKEN_LEN]) -> bool {
    b.len() == PROBE_BYTES
        && &b[..4] == MAGIC
        && crate::workload::transport::admission::token_matches(&b[4..SEQ_AT], token)
}

/// Sends a probe every interval and matches the answers.
fn udp_prober(socket: &UdpSocket, token: &[u8; TOKEN_LEN], clock: &Clock) -> Probes {
    let mut probes = Probes::default();
    let mut sent_at: Vec<Instant> = Vec::new();
    let mut packet = [0u8; PROBE_BYTES];
    packet[..4].copy_from_slice(MAGIC);
    packet[4..SEQ_AT].copy_from_slice(token);
    let mut answer = [0u8; 2 * PROBE_BYTES];
    let mut highest: Option<u64> = None;
    let mut next = Instant::now();
    let mut drain_until = None;
    loop {
        let now = Instant::now();
        match drain_until {
            None if !clock.running() => drain_until = Some(now + DRAIN),
            Some(end) if now >= end => break,
            _ => {}
        }
        if drain_until.is_none() && now >= next {
            let seq = sent_at.len() as u64;
            packet[SEQ_AT..CLIENT_SENT_AT].copy_from_slice(&seq.to_be_bytes());
            packet[CLIENT_SENT_AT..AGENT_RECEIVED_AT].copy_from_slice(&realtime_nanos().to_be_bytes());
            if socket.send(&packet).is_ok() {
                sent_at.push(now);
                probes.udp.push(UdpProbe(clock.micros(now), None, None, None));
            }
            next += clock.interval;
            if next < now {
                next = now + clock.interval;
            }
            continue;
        }
        let wait = drain_until.unwrap_or(next).saturating_duration_since(now);
        let _ = socket.set_read_timeout(Some(wait.clamp(Duration::from_micros(100), POLL)));
        let Ok(n) = socket.recv(&mut answer) else {
            continue;
        };
        let (received, received_wall) = (Instant::now(), realtime_nanos() as i64);
        let b = &answer[..n];
        if !is_probe(b, token) {
            continue;
        }
        let seq = u64_at(b, SEQ_AT);
        let Some(probe) = probes.udp.get_mut(seq as usize) else {
            continue;
        };
        if probe.1.is_some() {
            continue;
        }
        let nanos = |at| u64_at(b, at) as i64;
        probe.1 = Some(received.saturating_duration_since(sent_at[seq as usize]).as_micros() as u64);
        // The agent's clock readings are its word (any 64 bits): the
        // differences wrap rather than overflow.
        probe.2 = Some(nanos(AGENT_RECEIVED_AT).wrapping_sub(nanos(CLIENT_SENT_AT)) / 1000);
        probe.3 = Some(received_wall.wrapping_sub(nanos(AGENT_SENT_AT)) / 1000);
        if highest.is_some_and(|h| seq < h) {
            probes.reordered += 1;
        }
        highest = highest.max(Some(seq));
    }
    probes
}

/// Answers the client's UDP probes with the agent's receive and send times.
fn udp_echo(socket: &UdpSocket, token: &[u8; TOKEN_LEN], proven: &ProvenAddresses, clock: &Clock) -> u64 {
    let _ = socket.set_read_timeout(Some(POLL));
    let mut buffer = [0u8; 2 * PROBE_BYTES];
    let mut answered = 0;
    while clock.running() {
        let Ok((n, from)) = socket.recv_from(&mut buffer) else {
            continue;
        };
        let received = realtime_nanos();
        if !proven.admits(from.ip()) || !is_probe(&buffer[..n], token) {
            continue;
        }
        buffer[AGENT_RECEIVED_AT..AGENT_SENT_AT].copy_from_slice(&received.to_be_bytes());
        buffer[AGENT_SENT_AT..PROBE_BYTES].copy_from_slice(&realtime_nanos().to_be_bytes());
        answered += u64::from(socket.send_to(&buffer[..PROBE_BYTES], from).is_ok());
    }
    answered
}

/// One byte each way on the idle connection, every interval (or as soon
/// as the last answer came, when it took longer).
fn tcp_prober(socket: &Socket, clock: &Clock) -> Vec<TcpProbe> {
    let _ = socket.set_read_timeout(Some(POLL));
    let mut records = Vec::new();
    let mut next = clock.first_slot(2);
    let (mut reader, mut writer): (&Socket, &Socket) = (socket, socket);
    'probes: while clock.tick(&mut next) {
        let sent = Instant::now();
        if writer.write_all(&[1]).is_err() {
            break;
        }
        let mut byte = [0u8; 1];
        loop {
            match reader.read(&mut byte) {
                Ok(1) => break,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if !clock.running() {
                        break 'probes;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                _ => break 'probes,
            }
        }
        let rtt = Instant::now().saturating_duration_since(sent).as_micros() as u64;
        records.push(TcpProbe(clock.micros(sent), rtt));
    }
    records
}

/// Answers every byte of the TCP probe connection with one.
fn tcp_echo(socket: &Socket, clock: &Clock) -> u64 {
    let _ = socket.set_read_timeout(Some(POLL));
    let (mut reader, mut writer): (&Socket, &Socket) = (socket, socket);
    let mut buffer = [0u8; 64];
    let mut answered = 0;
    while clock.running() {
        match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                if writer.write_all(&buffer[..n]).is_err() {
                    break;
                }
                answered += n as u64;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => break,
        }
    }
    answered
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock() -> Clock {
        Clock {
            start: Instant::now(),
            interval: Duration::from_millis(2),
            stop: Arc::new(AtomicBool::new(false)),
            done: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Probes on loopback are answered, in order, with both wall-clock
    /// stamps; a probe with another token is not answered.
    #[test]
    fn udp_probes_are_answered_only_with_the_token() {
        let token = [7u8; TOKEN_LEN];
        let echo = bind_echo(IpAddr::from([127, 0, 0, 1])).unwrap();
        let agent = echo.local_addr().unwrap();
        let prober = connect_prober(None, agent).unwrap();
        let clock = clock();
        let stranger = connect_prober(None, agent).unwrap();
        let mut foreign = [0u8; PROBE_BYTES];
        foreign[..4].copy_from_slice(MAGIC);
        stranger.send(&foreign).unwrap();
        let probes = std::thread::scope(|s| {
            let answering = s.spawn(|| {
                udp_echo(
                    &echo,
                    &token,
                    &ProvenAddresses::peer_only(IpAddr::from([127, 0, 0, 1])),
                    &clock,
                )
            });
            let probing = s.spawn(|| udp_prober(&prober, &token, &clock));
            std::thread::sleep(Duration::from_millis(60));
            clock.stop.store(true, Ordering::Relaxed);
            let probes = probing.join().unwrap();
            clock.done.store(true, Ordering::Relaxed);
            assert_eq!(answering.join().unwrap(), probes.udp.len() as u64);
            probes
        });
        assert!(probes.udp.len() >= 4, "{probes:?}");
        assert!(probes
            .udp
            .iter()
            .all(|p| p.1.is_some() && p.2.is_some() && p.3.is_some()));
        assert!(probes.udp.windows(2).all(|w| w[0].0 <= w[1].0));
        let mut buffer = [0u8; 64];
        stranger.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        assert!(stranger.recv(&mut buffer).is_err(), "the stranger got an answer");
    }
}
