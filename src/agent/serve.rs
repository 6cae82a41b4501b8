//! The serve loop: bind, accept control connections, refuse those over the
//! operator's limits before a thread is spent on them, hand the others to
//! a thread each, and at the end join every thread and log the counts.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::control::handle_connection;
use super::iperf3_port;
use super::limits::{ConnectionGate, GateRefusal, Pass, Slot};
use super::{wait_readable, AgentConfig, AgentError, Iperf3ResultSink, Shared};
use crate::protocol::framing::encode;
use crate::protocol::Message;
use crate::workload;

/// A bound agent.
pub struct Agent {
    listener: TcpListener,
    iperf3_listener: Option<TcpListener>,
    shared: Arc<Shared>,
}

impl Agent {
    pub fn bind(config: AgentConfig) -> Result<Agent, AgentError> {
        let listener = bind(config.listen)?;
        let iperf3_listener = config.iperf3_listen.map(bind).transpose()?;
        Ok(Agent {
            listener,
            iperf3_listener,
            shared: Arc::new(Shared::new(config)),
        })
    }

    /// The iperf3 port's address, when the agent serves iperf3 clients.
    pub fn iperf3_addr(&self) -> Option<SocketAddr> {
        self.iperf3_listener.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Sets the hook called with every finished iperf3 test (the results
    /// store saves it there).
    pub fn on_iperf3_result(&self, sink: Iperf3ResultSink) {
        *self.shared.iperf3_sink.lock().unwrap_or_else(|p| p.into_inner()) = Some(sink);
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    /// The gate every new connection passes (per-address rate and
    /// connections held), for the metrics server to share.
    pub fn connection_gate(&self) -> Arc<ConnectionGate> {
        Arc::clone(&self.shared.gate)
    }

    /// A flag that ends `serve` when raised (checked every 200 ms).
    pub fn shutdown_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.shared.shutdown)
    }

    /// Serves until the shutdown flag is raised (or after one test with `once`).
    /// A running test is told to stop and still reports before this returns.
    pub fn serve(self) {
        let shared = self.shared;
        let c = &shared.config;
        log::info!(
            "agent listening on {} (authentication {}, {} concurrent test(s), queue of {}, \
             {} connections at once, {} per network before the handshake, {} per address at once, \
             {} per address per minute)",
            self.listener.local_addr().map_or("?".into(), |a| a.to_string()),
            if c.psk.is_some() { "on" } else { "off" },
            c.max_concurrent,
            c.max_queue,
            c.max_connections,
            shared.control_slots.per_prefix(),
            c.max_connections_per_address,
            c.max_connections_per_minute
        );
        let mut workers: Vec<thread::JoinHandle<()>> = Vec::new();
        let iperf3 = self.iperf3_listener.map(|listener| {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name("iperf3-port".into())
                .spawn(move || iperf3_port::accept_loop(listener, shared))
                .expect("could not start the iperf3 port thread")
        });
        while !shared.shutdown.load(Ordering::Relaxed) {
            if !wait_readable(&self.listener, 200) {
                continue;
            }
            let (stream, peer) = match self.listener.accept() {
                Ok(pair) => pair,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    log::warn!("accept failed: {e}");
                    thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            let accepted = Instant::now();
            workers.retain(|w| !w.is_finished());
            join_finished(&shared.stragglers);
            let (pass, slot) = match admit_connection(&shared, &stream, peer, accepted) {
                Ok(places) => places,
                Err(reason) => {
                    shared.stats.connections_refused.fetch_add(1, Ordering::Relaxed);
                    log::warn!("{peer}: connection refused: {reason}");
                    refuse_at_once(stream, reason);
                    continue;
                }
            };
            crate::metrics::AgentMetrics::global().connection_accepted();
            let conn_shared = Arc::clone(&shared);
            let spawned = thread::Builder::new().name(format!("control-{peer}")).spawn(move || {
                handle_connection(stream, peer, accepted, &conn_shared, &slot);
                drop((slot, pass));
            });
            match spawned {
                Ok(w) => workers.push(w),
                Err(e) => log::error!("{peer}: could not start a thread: {e}"),
            }
            if shared.config.once {
                for w in workers.drain(..) {
                    let _ = w.join();
                }
                if shared.stats.tests_served.load(Ordering::Relaxed) > 0 {
                    break;
                }
            }
        }
        if shared.shutdown.load(Ordering::Relaxed) {
            log::info!(
                "shutting down: {} test(s) running, {} client(s) waiting",
                shared.admission.running(),
                shared.admission.waiting()
            );
        }
        for w in workers {
            let _ = w.join();
        }
        if let Some(t) = iperf3 {
            shared.shutdown.store(true, Ordering::Relaxed);
            let _ = t.join();
        }
        let stragglers = std::mem::take(&mut *shared.stragglers.lock().unwrap_or_else(|e| e.into_inner()));
        for s in stragglers {
            let _ = s.join();
        }
        log::info!(
            "agent stopped: {} test(s) served, {} connection(s) refused, {} failed authentication(s), \
             {} data connection(s) refused, peer tests: {} run, {} failed, {} refused",
            shared.stats.tests_served.load(Ordering::Relaxed),
            shared.stats.connections_refused.load(Ordering::Relaxed),
            shared.stats.auth_failures.load(Ordering::Relaxed),
            workload::transport::admission::refused_data_connections(),
            shared.stats.peer_tests_run.load(Ordering::Relaxed),
            shared.stats.peer_tests_failed.load(Ordering::Relaxed),
            shared.stats.peer_tests_refused.load(Ordering::Relaxed),
        );
    }

    /// Serves on a background thread; for `demo` and tests.
    pub fn spawn(self) -> AgentHandle {
        let addr = self.local_addr();
        let shutdown = self.shutdown_flag();
        let thread = thread::Builder::new()
            .name("agent".into())
            .spawn(move || self.serve())
            .expect("could not start the agent thread");
        AgentHandle {
            addr,
            shutdown,
            thread: Some(thread),
        }
    }
}

/// An agent serving on a background thread; stops when dropped.
pub struct AgentHandle {
    pub addr: SocketAddr,
    shutdown: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Drop for AgentHandle {
    fn drop(&mut self) {
        self.shutdown.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Listens on `addr`, with a hint when that fails.
fn bind(addr: SocketAddr) -> Result<TcpListener, AgentError> {
    TcpListener::bind(addr).map_err(|source| AgentError::Bind {
        addr,
        hint: match source.kind() {
            std::io::ErrorKind::AddrInUse => {
                "; another agent or program already listens there: stop it or choose another --port (or --iperf3-port)"
            }
            std::io::ErrorKind::AddrNotAvailable => "; that address is not configured on this host",
            std::io::ErrorKind::PermissionDenied => "; ports below 1024 need root",
            _ => "",
        },
        source,
    })
}

/// Admits a new control connection through the agent's gate (per-address
/// connections held and rate) and the control port's fair slots (a
/// quarter per network before the handshake, `--max-connections` in all,
/// an idle connection closed to make room for a less represented
/// network), before any thread is spent on it; or says why not.
fn admit_connection(
    shared: &Shared,
    stream: &TcpStream,
    peer: SocketAddr,
    now: Instant,
) -> Result<(Pass, Slot), String> {
    let metrics = crate::metrics::AgentMetrics::global();
    let pass = shared.gate.admit(peer.ip(), now).map_err(|refusal| {
        metrics.refused(match refusal {
            GateRefusal::Rate { .. } => crate::metrics::RefusalReason::RateLimit,
            GateRefusal::Open { .. } => crate::metrics::RefusalReason::ConnectionLimit,
        });
        refusal.to_string()
    })?;
    let closer = stream
        .try_clone()
        .map_err(|e| format!("the agent cannot hold another connection now ({e}); try again later"))?;
    let close = Box::new(move || {
        let _ = closer.shutdown(std::net::Shutdown::Both);
    });
    let (slot, dropped) = shared.control_slots.admit(peer.ip(), close).map_err(|refusal| {
        metrics.refused(crate::metrics::RefusalReason::ConnectionLimit);
        refusal.to_string()
    })?;
    if let Some(dropped) = dropped {
        log::warn!("{}: control connection closed: {}", dropped.address, dropped.why);
    }
    Ok((pass, slot))
}

/// Tells a refused peer why in one frame, without ever blocking the accept
/// loop, and closes the connection.
fn refuse_at_once(stream: TcpStream, reason: String) {
    use std::io::Write;
    if stream.set_nonblocking(true).is_ok() {
        let _ = (&stream).write(&encode(&Message::Error { message: reason }));
    }
}

/// Joins the threads of `list` that have ended.
pub(super) fn join_finished(list: &Mutex<Vec<thread::JoinHandle<()>>>) {
    let mut list = list.lock().unwrap_or_else(|e| e.into_inner());
    let (done, running): (Vec<_>, Vec<_>) = std::mem::take(&mut *list).into_iter().partition(|t| t.is_finished());
    *list = running;
    for t in done {
        let _ = t.join();
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{control_pair, shared};
    use super::*;
    use crate::protocol::channel::Channel;
    use crate::protocol::MAX_AGENT_FRAME;

    #[test]
    fn a_port_in_use_says_so() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let e = bind(taken.local_addr().unwrap()).unwrap_err();
        assert!(
            e.to_string().contains("another agent or program already listens there"),
            "{e}"
        );
    }

    /// A loopback connection for `admit_connection` to hold (its peer is
    /// whatever address the test names).
    fn stream() -> TcpStream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        TcpStream::connect(listener.local_addr().unwrap()).unwrap()
    }

    fn admit(shared: &Shared, peer: &str) -> Result<(Pass, Slot), String> {
        admit_connection(shared, &stream(), peer.parse().unwrap(), Instant::now())
    }

    #[test]
    fn connections_over_the_limit_are_refused_with_the_cap_they_hit() {
        let shared = shared(|c| {
            c.max_connections = 2;
            c.max_connections_per_minute = 0;
        });
        let _first = admit(&shared, "192.0.2.7:40000").unwrap();
        // A quarter of 2 places per network before the handshake: one.
        let words = admit(&shared, "192.0.2.8:40000").expect_err("a second silent one from the /24");
        assert!(
            words.contains("the network 192.0.2.0/24 already holds 1 connections"),
            "{words}"
        );
        let _second = admit(&shared, "198.51.100.7:40000").unwrap();
        let words = admit(&shared, "203.0.113.7:40000").expect_err("a third connection");
        assert!(
            words.contains("already has 2 connections open on its control port (its --max-connections)"),
            "{words}"
        );
    }

    #[test]
    fn a_client_over_its_rate_is_refused_with_the_time_to_wait() {
        let shared = shared(|c| c.max_connections_per_minute = 1);
        assert!(admit(&shared, "192.0.2.7:40000").is_ok());
        let words = admit(&shared, "192.0.2.7:40000").expect_err("a second connection in the minute");
        assert!(words.contains("too many connections from 192.0.2.7"), "{words}");
        assert!(words.contains("--max-connections-per-minute"), "{words}");
        assert!(admit(&shared, "192.0.2.8:40000").is_ok(), "the limit is per address");
    }

    #[test]
    fn one_address_cannot_hold_every_control_connection() {
        let shared = shared(|c| c.max_connections_per_address = 2);
        let held: Vec<_> = (0..2).map(|_| admit(&shared, "192.0.2.7:40000").unwrap()).collect();
        let words = admit(&shared, "192.0.2.7:40000").expect_err("a third connection from one address");
        assert!(words.contains("its --max-connections-per-address"), "{words}");
        assert!(admit(&shared, "192.0.2.8:40000").is_ok());
        drop(held);
        assert!(
            admit(&shared, "192.0.2.7:40000").is_ok(),
            "closed connections give their places back"
        );
    }

    #[test]
    fn a_refused_client_reads_why_in_one_frame() {
        let (agent, mut client) = control_pair();
        let stream = agent.try_clone().unwrap();
        drop(agent);
        refuse_at_once(stream, "too many".into());
        let said = client.recv(Duration::from_secs(10), "error").unwrap();
        assert_eq!(
            said,
            Message::Error {
                message: "too many".into()
            }
        );
    }

    #[test]
    fn a_spawned_agent_answers_and_stops_when_dropped() {
        let agent = Agent::bind(AgentConfig::new("127.0.0.1:0".parse().unwrap())).unwrap();
        assert_eq!(agent.iperf3_addr(), None);
        let handle = agent.spawn();
        let stream = TcpStream::connect(handle.addr).unwrap();
        let mut channel = Channel::new(stream, MAX_AGENT_FRAME);
        channel
            .send(&Message::Hello(crate::protocol::Hello::ours(["tcp"])))
            .unwrap();
        match channel.recv(Duration::from_secs(10), "hello").unwrap() {
            Message::Hello(hello) => assert!(!hello.auth_required),
            other => panic!("expected the agent's hello, got {}", other.kind()),
        }
        drop(channel);
        drop(handle);
    }
}
