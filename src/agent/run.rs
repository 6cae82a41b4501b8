//! The agent's side of one test: check the request against the workload,
//! this host's links and the operator's limits; take a test slot, now or
//! after waiting in line; open the data connections while watching the
//! control connection; then run this side and send its report.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::admission::{Pace, Poll, Ticket, SLOT_GRACE};
use super::link_check::check_links_here;
use super::{peer_gone, unexpected, Refusal, Shared};
use crate::metrics::{AgentMetrics, RefusalReason};
use crate::model::{Direction, Party};
use crate::probe::cpu::ProcStat;
use crate::protocol::channel::Channel;
use crate::protocol::{self, Message, MAX_WAIT_SECONDS, TOKEN_LEN};
use crate::side_runner::{self, TrialPlan};
use crate::workload::runner::IntervalCallback;
use crate::workload::{self, address_proof, AgentNet, TestSpec, Workload};

/// The least time a test's setup on the data ports gets, whatever
/// `--handshake-timeout` says: a short control handshake (2 s) must not
/// cut off a large test's setup on a loaded host (16 streams of 64 MiB
/// messages were, in bench/soak.sh). It was the setup's only timeout.
const SETUP_FLOOR: Duration = Duration::from_secs(10);

/// How long a test's whole setup on the data ports may take from its
/// acceptance: `--handshake-timeout`, at least [`SETUP_FLOOR`].
fn setup_time(shared: &Shared) -> Duration {
    shared.config.handshake_timeout.max(SETUP_FLOOR)
}

/// How long past its setup deadline the agent waits for the thread
/// accepting a test's data connections before it gives the slot back
/// anyway (every step there ends at the deadline by itself).
const SETUP_OVERRUN: Duration = Duration::from_secs(1);
/// How often a waiting client is told its place.
const QUEUE_UPDATE: Duration = Duration::from_secs(1);

/// Serves one `test_request` (already received) to the report.
pub(super) fn serve(
    channel: &mut Channel,
    peer: SocketAddr,
    local_ip: IpAddr,
    shared: &Shared,
    spec: TestSpec,
    wait_seconds: f64,
) -> Result<(), Refusal> {
    let workload = check_request(shared, &spec)?;
    let ticket = admit(channel, shared, &spec, wait_seconds)?;
    if shared.shutdown.load(Ordering::Relaxed) {
        AgentMetrics::global().refused(RefusalReason::ShuttingDown);
        return Err(Refusal::Tell("the agent is shutting down".into()));
    }
    let token = protocol::new_token();
    let net = data_net(&spec, local_ip, peer, token, shared);
    let pending = workload
        .agent_side(&spec, &net)
        .map_err(|e| Refusal::Tell(e.to_string()))?;
    let proofs = ProofsAwaited::for_links(&spec, &net)?;
    // One deadline for the whole setup, from the test's acceptance: the
    // address proofs, every data connection's preamble, TLS or QUIC
    // handshake, and the client's `start`.
    let setup_deadline = Instant::now() + setup_time(shared);
    channel.send(&Message::Accepted {
        token: protocol::token_to_hex(&token),
        data_ports: pending.data_ports(),
        agent: crate::workload::host_facts_for(&spec, local_ip),
        address_proof: proofs.as_ref().map(ProofsAwaited::announcement),
    })?;
    let side = accept_watching(pending, proofs, channel, &shared.stragglers, setup_deadline)?;
    channel.send(&Message::Ready)?;
    let left = setup_deadline.saturating_duration_since(Instant::now());
    match channel.recv(left.max(Duration::from_millis(1)), "start")? {
        Message::Start => {}
        other => return Err(unexpected("start", &other)),
    }
    log::info!(
        "{peer}: running {} test ({} streams)",
        spec.workload,
        spec.flows().len()
    );
    let start = Instant::now();
    let pace = pace_of(&spec);
    // The slot is freed at the test's time plus its grace whatever the
    // client does; this side is aborted at the same moment.
    ticket.started(
        workload.known_duration_seconds(&spec).map(Duration::from_secs_f64),
        pace.clone(),
    );
    let max_seconds = shared.config.limits.max_duration_seconds;
    let on_interval = pace
        .map(|pace| -> IntervalCallback { Box::new(move |tick| pace.add(tick.streams.iter().map(|s| s.bytes).sum())) });
    let plan = TrialPlan {
        host: Party::Agent,
        spec: &spec,
        hard_deadline: side_runner::hard_deadline_with(&spec, start, Some(max_seconds), SLOT_GRACE),
        wait_for_peer_report: false,
        interrupted: &|| {
            shared
                .shutdown
                .load(Ordering::Relaxed)
                .then(|| "the agent is shutting down: SIGTERM or SIGINT on its host".to_string())
        },
        on_interval,
        on_progress: None,
        stall_check: None,
    };
    // A client still there hears why its test ended here; one that is
    // gone cannot, and its end is logged quietly.
    let mut outcome = side_runner::run_side(side, plan, channel, &ProcStat).map_err(|e| match e {
        side_runner::TrialError::PeerLost { .. } => Refusal::Quiet(format!("test aborted: {e}")),
        other => Refusal::Aborted(other.to_string()),
    })?;
    let overlapped = ticket.overlapped();
    outcome.local.overlapped_tests = overlapped;
    // The slot is free before the client hears that the test is done: a
    // client that starts its next test at once (demo, a script) must not
    // be told "busy" by the test it has just finished.
    drop(ticket);
    shared.stats.tests_served.fetch_add(1, Ordering::Relaxed);
    AgentMetrics::global().test_served(&spec.workload);
    channel.send(&Message::Done { report: outcome.local })?;
    log::info!(
        "{peer}: test done in {:.1} s{}",
        start.elapsed().as_secs_f64(),
        match overlapped {
            0 => String::new(),
            n => format!(", overlapped by {n} other test(s)"),
        }
    );
    // The client's clock exchanges after the test (docs/CLOCKS.md).
    super::clock::serve_after(channel);
    Ok(())
}

/// Checks a test request before it waits for a slot: a workload this
/// build runs, a valid spec, CPUs and links of this host, and within the
/// operator's limits, the rate as the workload reads its own parameters.
/// Returns the workload.
fn check_request(shared: &Shared, spec: &TestSpec) -> Result<&'static dyn Workload, Refusal> {
    let workload = workload::find(&spec.workload).map_err(|e| Refusal::Tell(e.to_string()))?;
    workload
        .validate(spec)
        .and_then(|()| TestSpec::validate_cpus(&spec.agent.cpus, "--remote-affinity"))
        .and_then(|()| check_links_here(spec, workload))
        .inspect_err(|_| AgentMetrics::global().refused(RefusalReason::InvalidRequest))
        .map_err(|e| Refusal::Tell(e.to_string()))?;
    shared
        .config
        .limits
        .check_offered(spec, workload.offered_rate(spec))
        .and_then(|()| {
            shared
                .config
                .limits
                .check_memory(spec, workload.agent_memory_bytes(spec))
        })
        .inspect_err(|_| AgentMetrics::global().refused(RefusalReason::Limits))
        .map_err(Refusal::Tell)?;
    Ok(workload)
}

/// Where this side's data sockets listen and whom they admit.
fn data_net(spec: &TestSpec, local_ip: IpAddr, peer: SocketAddr, token: [u8; TOKEN_LEN], shared: &Shared) -> AgentNet {
    let routes = workload::routes_of(spec);
    AgentNet::new(
        data_listen_ip(!routes.is_empty(), local_ip),
        peer.ip(),
        token,
        shared.config.settings.clone(),
        routes,
    )
}

/// The link client addresses a test must prove before any data flows
/// (`workload::address_proof`), with the listener they prove themselves on.
struct ProofsAwaited {
    listener: socket2::Socket,
    needed: Vec<IpAddr>,
    net: AgentNet,
}

impl ProofsAwaited {
    /// None when the test names no address but the control peer's.
    fn for_links(spec: &TestSpec, net: &AgentNet) -> Result<Option<ProofsAwaited>, Refusal> {
        let needed = address_proof::needed(&spec.links, net.peer_ip);
        if needed.is_empty() {
            return Ok(None);
        }
        let listener = address_proof::listen(&needed).map_err(|e| Refusal::Tell(e.to_string()))?;
        Ok(Some(ProofsAwaited {
            listener,
            needed,
            net: net.clone(),
        }))
    }

    fn announcement(&self) -> protocol::AddressProof {
        protocol::AddressProof {
            port: workload::transport::admission::local_port(&self.listener),
            from: self.needed.clone(),
        }
    }

    /// Waits for every proof and records the proven addresses in the
    /// test's net, which the workload's sockets share.
    fn receive(self, deadline: Instant) -> Result<(), workload::WorkloadError> {
        let proven = address_proof::await_proofs(&self.listener, &self.needed, &self.net.token, deadline)?;
        log::info!("link client addresses proved over TCP: {proven:?}");
        self.net.proven.record(proven)
    }
}

/// The address data sockets listen on: the one the control connection
/// reached; with links, TCP data connections may arrive on any link's
/// address, so all of its family (each stream is admitted only over its
/// own link).
fn data_listen_ip(links: bool, local_ip: IpAddr) -> IpAddr {
    match (links, local_ip) {
        (false, ip) => ip,
        (true, IpAddr::V4(_)) => IpAddr::from([0u8; 4]),
        (true, IpAddr::V6(_)) => IpAddr::from([0u16; 8]),
    }
}

/// A byte count ends the test, not a time: its pace tells the end, over
/// both directions when both send.
fn pace_of(spec: &TestSpec) -> Option<Arc<Pace>> {
    spec.bytes.map(|bytes| {
        let directions = if spec.direction == Direction::Bidir { 2 } else { 1 };
        Pace::new(bytes.saturating_mul(directions))
    })
}

/// How long a client may wait in line: what it asked, within 0 and
/// [`MAX_WAIT_SECONDS`]; nothing for a value that is no number of seconds.
pub(super) fn queue_wait(wait_seconds: f64) -> f64 {
    if wait_seconds.is_finite() {
        wait_seconds.clamp(0.0, MAX_WAIT_SECONDS)
    } else {
        0.0
    }
}

/// A test slot now, or after waiting in line up to `wait_seconds`.
pub(super) fn admit<'a>(
    channel: &mut Channel,
    shared: &'a Shared,
    spec: &TestSpec,
    wait_seconds: f64,
) -> Result<Ticket<'a>, Refusal> {
    let expected = Duration::from_secs_f64(spec.expected_seconds()) + setup_time(shared);
    let busy = match shared.admission.try_enter(expected) {
        Ok(ticket) => return Ok(ticket),
        Err(busy) => busy,
    };
    let wait = queue_wait(wait_seconds);
    if wait == 0.0 {
        AgentMetrics::global().refused(RefusalReason::Busy);
        channel.send(&Message::Busy {
            seconds_left: busy.seconds_left,
            running_seconds: busy.running_seconds,
        })?;
        return Err(Refusal::Busy(match busy.running_seconds {
            Some(running) => format!("busy, told the running test has run {running:.1} s with no known end"),
            None => format!("busy, told to come back in {:.1} s", busy.seconds_left),
        }));
    }
    let place = shared.admission.enqueue(expected).map_err(|full| {
        AgentMetrics::global().refused(RefusalReason::QueueFull);
        Refusal::Tell(format!(
            "the agent is busy and {} clients already wait in line (its --max-queue); try again in {:.0} s",
            full.max_queue, busy.seconds_left
        ))
    })?;
    log::info!(
        "queued at position {} (waits up to {wait:.0} s)",
        shared.admission.waiting()
    );
    let deadline = Instant::now() + Duration::from_secs_f64(wait);
    let mut patience = Duration::ZERO;
    loop {
        let (position, seconds_left) = match shared.admission.poll(&place, patience) {
            Poll::Granted(ticket) => return Ok(ticket),
            Poll::Waiting { position, seconds_left } => (position, seconds_left),
        };
        if shared.shutdown.load(Ordering::Relaxed) {
            AgentMetrics::global().refused(RefusalReason::ShuttingDown);
            return Err(Refusal::Tell("the agent is shutting down".into()));
        }
        if peer_gone(channel) {
            return Err(Refusal::Quiet(format!("left the queue at position {position}")));
        }
        if Instant::now() >= deadline {
            AgentMetrics::global().refused(RefusalReason::Busy);
            channel.send(&Message::Busy {
                seconds_left,
                running_seconds: None,
            })?;
            return Err(Refusal::Busy(format!(
                "waited {wait:.0} s in line (position {position}) and was told busy"
            )));
        }
        channel.send(&Message::Queued { position, seconds_left })?;
        patience = QUEUE_UPDATE.min(deadline.saturating_duration_since(Instant::now()));
    }
}

/// Waits for the client's data connections, by `deadline`, while watching
/// the control connection, so a client that vanishes now frees its slot
/// at once instead of at the deadline. Every step of the accepting thread
/// ends by the deadline; should it not, the slot is given back shortly
/// after anyway and the thread joined when it ends.
fn accept_watching(
    pending: Box<dyn workload::AgentSide>,
    proofs: Option<ProofsAwaited>,
    channel: &Channel,
    stragglers: &Mutex<Vec<thread::JoinHandle<()>>>,
    deadline: Instant,
) -> Result<Box<dyn workload::Side>, Refusal> {
    let (tx, rx) = std::sync::mpsc::channel();
    let accepting = thread::Builder::new()
        .name("accept-data".into())
        .spawn(move || {
            // Proofs first: nothing is sent to a link address, and no
            // datagram from it registers, before it proved itself.
            let accepted = match proofs.map(|p| p.receive(deadline)) {
                Some(Err(e)) => Err(e),
                _ => pending.accept(deadline),
            };
            let _ = tx.send(accepted);
        })
        .map_err(|e| Refusal::Tell(format!("could not start a thread: {e}")))?;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(accepted) => {
                let _ = accepting.join();
                return accepted.map_err(|e| Refusal::Tell(e.to_string()));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) if peer_gone(channel) => {
                // The accept thread ends by itself at the deadline; the
                // agent joins it then, while this slot is free at once.
                stragglers.lock().unwrap_or_else(|e| e.into_inner()).push(accepting);
                return Err(Refusal::Quiet("left before opening its data connections".into()));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) if Instant::now() >= deadline + SETUP_OVERRUN => {
                stragglers.lock().unwrap_or_else(|e| e.into_inner()).push(accepting);
                return Err(Refusal::Tell(
                    "the data connections were not set up by the setup deadline (--handshake-timeout, at least 10 s)"
                        .into(),
                ));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                let _ = accepting.join();
                return Err(Refusal::Tell("accepting the data connections failed".into()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{control_pair, shared};
    use super::super::{Agent, AgentConfig};
    use super::*;
    use crate::model::spec::tests::spec;
    use crate::session::{self, RunOptions, Target};

    #[test]
    fn the_wait_in_line_is_what_was_asked_within_the_cap() {
        assert_eq!(queue_wait(30.0), 30.0);
        assert_eq!(queue_wait(-5.0), 0.0);
        assert_eq!(queue_wait(1e9), MAX_WAIT_SECONDS);
        assert_eq!(queue_wait(f64::NAN), 0.0);
        assert_eq!(queue_wait(f64::INFINITY), 0.0);
    }

    #[test]
    fn data_sockets_listen_on_every_address_of_the_family_only_with_links() {
        let v4: IpAddr = "10.0.0.2".parse().unwrap();
        let v6: IpAddr = "fd00::2".parse().unwrap();
        assert_eq!(data_listen_ip(false, v4), v4);
        assert_eq!(data_listen_ip(true, v4), "0.0.0.0".parse::<IpAddr>().unwrap());
        assert_eq!(data_listen_ip(true, v6), "::".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn only_a_byte_count_has_a_pace() {
        assert!(pace_of(&spec("tcp")).is_none());
        let mut counted = spec("tcp");
        counted.bytes = Some(1 << 20);
        assert!(pace_of(&counted).is_some());
    }

    fn refused_words(result: Result<&'static dyn Workload, Refusal>) -> String {
        match result {
            Err(Refusal::Tell(words)) => words,
            Err(_) => panic!("a refused request is told to the client"),
            Ok(w) => panic!("the {} request was accepted", w.name()),
        }
    }

    #[test]
    fn a_request_is_checked_before_it_waits() {
        let open = shared(|_| {});
        assert_eq!(check_request(&open, &spec("tcp")).ok().map(|w| w.name()), Some("tcp"));
        let words = refused_words(check_request(&open, &spec("carrier-pigeon")));
        assert!(words.contains("carrier-pigeon"), "{words}");
        let strict = shared(|c| c.limits.max_streams = 1);
        let mut many = spec("tcp");
        many.streams = 2;
        let words = refused_words(check_request(&strict, &many));
        assert!(words.contains("streams"), "{words}");
    }

    #[test]
    fn a_busy_agent_says_so_to_a_client_that_will_not_wait() {
        let (mut agent, mut client) = control_pair();
        let state = shared(|_| {});
        let _running = state.admission.try_enter(Duration::from_secs(30)).unwrap();
        let refused = match admit(&mut agent, &state, &spec("tcp"), 0.0) {
            Err(Refusal::Busy(words)) => words,
            _ => panic!("a second test was admitted"),
        };
        assert!(refused.contains("busy, told to come back in"), "{refused}");
        match client.recv(Duration::from_secs(10), "busy").unwrap() {
            Message::Busy {
                seconds_left,
                running_seconds: None,
            } => assert!(seconds_left > 0.0 && seconds_left <= 30.0, "{seconds_left}"),
            other => panic!("expected busy, got {}", other.kind()),
        }
    }

    #[test]
    fn a_full_queue_is_refused_in_words() {
        let (mut agent, _client) = control_pair();
        let state = shared(|c| c.max_queue = 0);
        let _running = state.admission.try_enter(Duration::from_secs(30)).unwrap();
        let refused = match admit(&mut agent, &state, &spec("tcp"), 60.0) {
            Err(Refusal::Tell(words)) => words,
            _ => panic!("a client joined a queue of length 0"),
        };
        assert!(refused.contains("0 clients already wait in line"), "{refused}");
    }

    #[test]
    fn a_loopback_test_runs_end_to_end() {
        let handle = Agent::bind(AgentConfig::new("127.0.0.1:0".parse().unwrap()))
            .unwrap()
            .spawn();
        let target = Target {
            host: "127.0.0.1".into(),
            port: handle.addr.port(),
            family: None,
            bind: None,
            connect_timeout: Duration::from_secs(5),
            wait: Duration::ZERO,
            psk_file: None,
        };
        let mut asked = spec("tcp");
        asked.bytes = Some(1 << 20);
        let run = session::run(
            &target,
            &asked,
            RunOptions {
                interrupted: &|| None,
                settings: Default::default(),
                on_interval: None,
                on_progress: None,
                trial: 1,
            },
        )
        .unwrap();
        assert_eq!(run.trials.len(), 1);
        let stream = &run.result.streams[0];
        assert_eq!(stream.receiver.bytes, 1 << 20, "the agent received every byte sent");
        assert_eq!(stream.sender.bytes, 1 << 20);
    }
}
