//! The agent's second port (`nicbench serve --iperf3-port 5201`): it
//! accepts unmodified iperf3 clients. Every connection first passes the
//! agent's per-address limits before a byte is read or a thread spent: a
//! connection from an address with no iperf3 test under way takes a place
//! at the agent's one gate, shared with the control port
//! (`--max-connections-per-address`, `--max-connections-per-minute`),
//! held until it turns out to be a data stream or, for a new client, until
//! its test ends; an address whose test is under way opens that test's
//! data streams, counted per minute. A new connection also takes a place
//! among the port's own fair slots (`protocol::slots`: `--max-connections`
//! places, a quarter per /24 or /56 before the cookie, an idle one closed
//! to make room for a less represented network), settled when its cookie
//! arrives. Then the cap on connections open at once; refused ones get
//! ACCESS_DENIED.
//! Then it opens with a 37-byte cookie, read with a deadline: a cookie of
//! a test under way makes it that test's data stream (handed over in
//! accept order); any other is a new client.
//!
//! A new client with iperf3's RSA authentication on (`--iperf3-rsa-private-key`
//! and `--iperf3-authorized-users`, required with `--psk-file`) sends its
//! parameters and has its credentials checked before it may wait for or
//! take a test slot; a failure is refused as iperf3 refuses it
//! (SERVER_ERROR, IEAUTHTEST: "test authorization failed"), logged with
//! the peer and counted as an authentication failure. Then the admission
//! queue: the client waits up to `--iperf3-wait` for its turn, then gets
//! ACCESS_DENIED, iperf3's "the server is busy", before
//! `iperf3::server::serve_test` runs its test.
//!
//! The finished test is handed to the agent's iperf3 result sink
//! ([`super::Agent::on_iperf3_result`]): the hook where the results
//! store saves it.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::admission::{Poll, Ticket};
use super::limits::{ConnectionRate, Pass, Slot};
use super::{stream_closed, wait_readable, Shared};
use crate::iperf3::server::{read_params, refuse_credentials, serve_test, DataConnection, ServerSettings};
use crate::iperf3::wire::{Params, COOKIE_LEN, MAX_STREAMS};
use crate::iperf3::{Control, Cookie, State};

/// How long a test is expected to take before its parameters are known
/// (iperf3's default -t), for queue estimates.
const EXPECTED: Duration = Duration::from_secs(20);
/// How often a waiting client's connection is checked.
const QUEUE_POLL: Duration = Duration::from_millis(500);

type Registry = Arc<Mutex<HashMap<Cookie, Sender<DataConnection>>>>;

/// Tests under way on this port, per client address: connections from
/// such an address are that test's data streams.
type UnderWay = Arc<Mutex<HashMap<std::net::IpAddr, usize>>>;

/// Marks a test from `ip` under way for as long as it lives.
struct TestUnderWay {
    under_way: UnderWay,
    ip: std::net::IpAddr,
}

impl TestUnderWay {
    fn new(under_way: &UnderWay, ip: std::net::IpAddr) -> TestUnderWay {
        let ip = ip.to_canonical();
        *under_way
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(ip)
            .or_insert(0) += 1;
        TestUnderWay {
            under_way: Arc::clone(under_way),
            ip,
        }
    }
}

impl Drop for TestUnderWay {
    fn drop(&mut self) {
        let mut map = self.under_way.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

/// Accepts on the iperf3 port until the agent shuts down.
pub(super) fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let registry: Registry = Arc::default();
    let under_way: UnderWay = Arc::default();
    let mut rate = ConnectionRate::grouped(
        shared.config.max_connections_per_minute,
        shared.config.ipv6_prefix_per_address,
    );
    // `nicbench serve` refuses to start this way; an agent built otherwise
    // still never serves keyless iperf3 clients when it has a key.
    let locked = shared.config.psk.is_some() && shared.config.iperf3_auth.is_none();
    if locked {
        log::error!(
            "iperf3 port: the agent has a pre-shared key but no iperf3 authentication \
             (--iperf3-rsa-private-key, --iperf3-authorized-users): every iperf3 client is refused"
        );
    }
    let in_flight = Arc::new(AtomicUsize::new(0));
    // Room for every data stream of a full test besides the control connections.
    let max_in_flight = shared.config.max_connections + 2 * MAX_STREAMS as usize + 1;
    let mut sequence = 0u64;
    let mut workers: Vec<thread::JoinHandle<()>> = Vec::new();
    while !shared.shutdown.load(Ordering::Relaxed) {
        if !wait_readable(&listener, 200) {
            continue;
        }
        let (stream, peer) = match listener.accept() {
            Ok(pair) => pair,
            Err(e) => {
                log::warn!("iperf3 port: accept failed: {e}");
                thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        sequence += 1;
        workers.retain(|w| !w.is_finished());
        let testing = under_way
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&peer.ip().to_canonical());
        let pass = match testing {
            true => None,
            false => match admit_new(&shared, &stream, peer) {
                Ok(places) => Some(places),
                Err(refusal) => {
                    shared.stats.connections_refused.fetch_add(1, Ordering::Relaxed);
                    log::warn!("{peer}: iperf3 connection refused: {refusal}");
                    deny(&stream);
                    continue;
                }
            },
        };
        let counted = if testing {
            rate.admit(peer.ip(), Instant::now())
        } else {
            Ok(())
        };
        if let Err(wait) = counted {
            shared.stats.connections_refused.fetch_add(1, Ordering::Relaxed);
            crate::metrics::AgentMetrics::global().refused(crate::metrics::RefusalReason::RateLimit);
            log::warn!(
                "{peer}: iperf3 connection refused: too many connections from its address \
                 (--max-connections-per-minute {}); allowed again in {wait:.0} s",
                rate.per_minute()
            );
            deny(&stream);
            continue;
        }
        if locked {
            shared.stats.auth_failures.fetch_add(1, Ordering::Relaxed);
            crate::metrics::AgentMetrics::global().refused(crate::metrics::RefusalReason::Auth);
            log::warn!("{peer}: iperf3 connection refused: no iperf3 authentication configured beside the key");
            deny(&stream);
            continue;
        }
        if in_flight.load(Ordering::Relaxed) >= max_in_flight {
            shared.stats.connections_refused.fetch_add(1, Ordering::Relaxed);
            crate::metrics::AgentMetrics::global().refused(crate::metrics::RefusalReason::ConnectionLimit);
            log::warn!("{peer}: iperf3 connection refused: {max_in_flight} already open");
            deny(&stream);
            continue;
        }
        in_flight.fetch_add(1, Ordering::Relaxed);
        let (shared, registry, in_flight) = (Arc::clone(&shared), Arc::clone(&registry), Arc::clone(&in_flight));
        let under_way = Arc::clone(&under_way);
        let seq = sequence;
        let spawned = thread::Builder::new().name(format!("iperf3-{peer}")).spawn(move || {
            handle(stream, peer, seq, pass, &shared, &registry, &under_way);
            in_flight.fetch_sub(1, Ordering::Relaxed);
        });
        match spawned {
            Ok(w) => workers.push(w),
            Err(e) => log::error!("{peer}: could not start a thread: {e}"),
        }
    }
    for w in workers {
        let _ = w.join();
    }
}

/// A place for a connection from an address with no test under way: at
/// the agent's gate (per address, per minute, shared with the control
/// port) and in this port's fair slots until it shows its cookie (a
/// quarter per network, `--max-connections` in all, an idle one closed to
/// make room for a less represented network); or why not.
fn admit_new(shared: &Shared, stream: &TcpStream, peer: SocketAddr) -> Result<(Pass, Slot), String> {
    let metrics = crate::metrics::AgentMetrics::global();
    let pass = shared.gate.admit(peer.ip(), Instant::now()).map_err(|refusal| {
        metrics.refused(match refusal {
            super::limits::GateRefusal::Rate { .. } => crate::metrics::RefusalReason::RateLimit,
            super::limits::GateRefusal::Open { .. } => crate::metrics::RefusalReason::ConnectionLimit,
        });
        refusal.to_string()
    })?;
    let closer = stream
        .try_clone()
        .map_err(|e| format!("the agent cannot hold another connection now ({e})"))?;
    let close = Box::new(move || {
        let _ = closer.shutdown(std::net::Shutdown::Both);
    });
    let (slot, dropped) = shared.iperf3_slots.admit(peer.ip(), close).map_err(|refusal| {
        metrics.refused(crate::metrics::RefusalReason::ConnectionLimit);
        refusal.to_string()
    })?;
    if let Some(dropped) = dropped {
        log::warn!("{}: iperf3 connection closed: {}", dropped.address, dropped.why);
    }
    Ok((pass, slot))
}

/// ACCESS_DENIED without ever blocking, then close.
fn deny(stream: &TcpStream) {
    use std::io::Write;
    if stream.set_nonblocking(true).is_ok() {
        let _ = (&*stream).write(&[State::AccessDenied.byte()]);
    }
}

/// One connection to the port, holding its place at the gate and in the
/// port's slots (`pass`, None for a data stream of a test under way) until
/// it is known to be a data stream or, for a new client, until its test
/// ends; its slot settles when its cookie arrives.
fn handle(
    stream: TcpStream,
    peer: SocketAddr,
    seq: u64,
    pass: Option<(Pass, Slot)>,
    shared: &Shared,
    registry: &Registry,
    under_way: &UnderWay,
) {
    let local_ip = match stream.local_addr() {
        Ok(a) => a.ip(),
        Err(_) => return,
    };
    let mut control = Control::new(stream);
    let mut bytes = [0u8; COOKIE_LEN];
    if let Err(e) = control.read_exact(&mut bytes, shared.config.handshake_timeout) {
        log::info!("{peer}: iperf3 port: no cookie ({e}); closed");
        return;
    }
    let cookie = match Cookie::parse(&bytes) {
        Ok(c) => c,
        Err(e) => {
            log::warn!("{peer}: iperf3 port: {e}; closed");
            deny(control.stream());
            return;
        }
    };
    let data_for = registry.lock().unwrap_or_else(|p| p.into_inner()).get(&cookie).cloned();
    if let Some((_, slot)) = &pass {
        slot.settle();
    }
    if let Some(test) = data_for {
        drop(pass);
        if let Ok(stream) = control.stream().try_clone() {
            let _ = test.send((seq, stream));
        }
        return;
    }
    // With authentication, the credentials come before the queue and the slot.
    let checked = match &shared.config.iperf3_auth {
        Some(_) => match authenticated(&mut control, peer, shared) {
            Some(params) => Some(params),
            None => return,
        },
        None => None,
    };
    let Some(ticket) = admit(&control, peer, shared) else {
        return;
    };
    let params = match checked {
        Some(params) => params,
        None => match read_params(&mut control, shared.config.handshake_timeout) {
            Ok(params) => params,
            Err(e) => {
                log::warn!("{peer}: iperf3 test ended without a result: {e}");
                return;
            }
        },
    };
    let (tx, rx) = mpsc::channel();
    let _under_way = TestUnderWay::new(under_way, peer.ip());
    registry.lock().unwrap_or_else(|p| p.into_inner()).insert(cookie, tx);
    let settings = ServerSettings {
        limits: &shared.config.limits,
        handshake_timeout: shared.config.handshake_timeout,
        port: control.stream().local_addr().map_or(0, |a| a.port()),
        shutdown: &shared.shutdown,
    };
    log::info!("{peer}: iperf3 client admitted");
    let outcome = serve_test(&mut control, peer, local_ip, &settings, params, &rx);
    registry.lock().unwrap_or_else(|p| p.into_inner()).remove(&cookie);
    drop(ticket);
    match outcome {
        Ok(run) => {
            shared.stats.tests_served.fetch_add(1, Ordering::Relaxed);
            crate::metrics::AgentMetrics::global().test_served(&run.workload);
            log::info!(
                "{peer}: iperf3 {} test done: {:.1} Mbit/s received",
                run.workload,
                run.result.sum.receiver.bits_per_second / 1e6
            );
            let sink = shared.iperf3_sink.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some(sink) = sink {
                sink(&run);
            }
        }
        Err(e) => log::warn!("{peer}: iperf3 test ended without a result: {e}"),
    }
}

/// The client's parameters when its credentials pass iperf3's RSA
/// authentication; None when it was refused (told IEAUTHTEST, logged
/// with the reason, counted) or sent no readable parameters.
fn authenticated(control: &mut Control, peer: SocketAddr, shared: &Shared) -> Option<Params> {
    let auth = shared.config.iperf3_auth.as_ref()?;
    let params = match read_params(control, shared.config.handshake_timeout) {
        Ok(params) => params,
        Err(e) => {
            log::warn!("{peer}: iperf3 client refused before authentication: {e}");
            return None;
        }
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    match auth.check(params.authtoken.as_deref(), params.client_version.as_deref(), now) {
        Ok(user) => {
            log::info!("{peer}: iperf3 client authenticated as '{}'", user.escape_debug());
            Some(params)
        }
        Err(denied) => {
            shared.stats.auth_failures.fetch_add(1, Ordering::Relaxed);
            crate::metrics::AgentMetrics::global().refused(crate::metrics::RefusalReason::Auth);
            log::warn!("{peer}: iperf3 client refused: test authorization failed: {denied}");
            refuse_credentials(control);
            None
        }
    }
}

/// A test slot now, or after waiting in line up to `--iperf3-wait`; None
/// (the client told ACCESS_DENIED, or gone) otherwise.
fn admit<'a>(control: &Control, peer: SocketAddr, shared: &'a Shared) -> Option<Ticket<'a>> {
    let busy = match shared.admission.try_enter(EXPECTED) {
        Ok(ticket) => return Some(ticket),
        Err(busy) => busy,
    };
    let wait = shared.config.iperf3_wait;
    let refuse = |why: String| {
        log::info!("{peer}: iperf3 client told busy: {why}");
        deny(control.stream());
        None
    };
    if wait.is_zero() {
        return refuse(format!(
            "a test runs for about {:.0} s more (--iperf3-wait 0)",
            busy.seconds_left
        ));
    }
    let place = match shared.admission.enqueue(EXPECTED) {
        Ok(p) => p,
        Err(full) => return refuse(format!("{} clients already wait (--max-queue)", full.max_queue)),
    };
    let deadline = Instant::now() + wait;
    loop {
        match shared.admission.poll(&place, QUEUE_POLL) {
            Poll::Granted(ticket) => return Some(ticket),
            Poll::Waiting { position, .. } => {
                if shared.shutdown.load(Ordering::Relaxed) {
                    return refuse("the agent is shutting down".into());
                }
                if stream_closed(control.stream()) {
                    log::info!("{peer}: iperf3 client left the queue at position {position}");
                    return None;
                }
                if Instant::now() >= deadline {
                    return refuse(format!("waited {:.0} s in line (--iperf3-wait)", wait.as_secs_f64()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::super::tests::{key, shared};
    use super::*;

    /// Every connection to the port, from its accept loop.
    fn answer_of(shared: &Arc<Shared>) -> Option<u8> {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let loop_shared = Arc::clone(shared);
        let accepting = thread::spawn(move || accept_loop(listener, loop_shared));
        let mut client = TcpStream::connect(addr).unwrap();
        client.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut byte = [0u8];
        let answer = match client.read(&mut byte) {
            Ok(1) => Some(byte[0]),
            _ => None,
        };
        shared.shutdown.store(true, Ordering::Relaxed);
        accepting.join().unwrap();
        answer
    }

    #[test]
    fn a_keyed_agent_without_iperf3_authentication_serves_no_iperf3_client() {
        let keyed = Arc::new(shared(|c| c.psk = Some(key())));
        assert_eq!(answer_of(&keyed), Some(State::AccessDenied.byte()), "refused at once");
        assert_eq!(keyed.stats.auth_failures.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn the_per_minute_limit_counts_connections_before_their_cookie() {
        // Limit 0 is "no limit"; 1 lets the first in, which then waits for its cookie.
        let limited = Arc::new(shared(|c| {
            c.max_connections_per_minute = 1;
            c.handshake_timeout = Duration::from_millis(300);
        }));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let loop_shared = Arc::clone(&limited);
        let accepting = thread::spawn(move || accept_loop(listener, loop_shared));
        let _silent = TcpStream::connect(addr).unwrap();
        let mut over = TcpStream::connect(addr).unwrap();
        over.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut byte = [0u8];
        assert_eq!(over.read(&mut byte).unwrap(), 1, "an answer, not a close");
        assert_eq!(byte[0], State::AccessDenied.byte());
        assert_eq!(limited.stats.connections_refused.load(Ordering::Relaxed), 1);
        limited.shutdown.store(true, Ordering::Relaxed);
        accepting.join().unwrap();
    }

    /// A TCP connection to `addr` from the loopback address `from`.
    fn connect_from(from: &str, addr: SocketAddr) -> TcpStream {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket.bind(&SocketAddr::new(from.parse().unwrap(), 0).into()).unwrap();
        socket.connect(&addr.into()).unwrap();
        socket.into()
    }

    #[test]
    fn silent_iperf3_sockets_from_one_address_take_its_share_of_the_gate_and_no_more() {
        let gate_of_8 = Arc::new(shared(|c| {
            c.max_connections_per_address = 8;
            c.handshake_timeout = Duration::from_secs(30);
        }));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let loop_shared = Arc::clone(&gate_of_8);
        let accepting = thread::spawn(move || accept_loop(listener, loop_shared));
        let noisy: std::net::IpAddr = "127.0.0.2".parse().unwrap();
        let honest: std::net::IpAddr = "127.0.0.3".parse().unwrap();
        let silent: Vec<TcpStream> = (0..8).map(|_| connect_from("127.0.0.2", addr)).collect();
        let mut ninth = connect_from("127.0.0.2", addr);
        ninth.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut byte = [0u8];
        assert_eq!(ninth.read(&mut byte).unwrap(), 1, "an answer, not a close");
        assert_eq!(byte[0], State::AccessDenied.byte());
        assert_eq!(
            gate_of_8.gate.open_from(noisy),
            8,
            "the eight silent sockets hold their places"
        );
        assert!(
            gate_of_8.gate.admit(noisy, Instant::now()).is_err(),
            "the same budget as the control port: it is spent"
        );
        let honest_client = connect_from("127.0.0.3", addr);
        let deadline = Instant::now() + Duration::from_secs(20);
        while gate_of_8.gate.open_from(honest) == 0 {
            assert!(Instant::now() < deadline, "another address is admitted");
            thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(gate_of_8.stats.connections_refused.load(Ordering::Relaxed), 1);
        // Closed sockets end their handlers at once (no cookie: EOF).
        drop((silent, honest_client, ninth));
        gate_of_8.shutdown.store(true, Ordering::Relaxed);
        accepting.join().unwrap();
    }
}
