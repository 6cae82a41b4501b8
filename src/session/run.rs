//! One test against an agent: request it (waiting in the agent's queue
//! when allowed), open the data connections, start, run the local side,
//! check the agent's report and merge both sides into a [`RunResult`].

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::connect::{check_feature, check_links_supported, connect, handshake_keyed, unexpected};
use super::{SessionError, Target, REPLY_TIMEOUT};
use crate::model::{Endpoint, HostFacts, Party, PeerProtocol, Role, RunResult, SideReport, TrialResult, SCHEMA};
use crate::probe::cpu::ProcStat;
use crate::protocol::auth::Psk;
use crate::protocol::channel::Channel;
use crate::protocol::{
    token_from_hex, AddressProof, Message, ProtocolError, MAX_AGENT_FRAME, MAX_WAIT_SECONDS, TOKEN_LEN,
};
use crate::side_runner::{self, TrialOutcome, TrialPlan};
use crate::workload::runner::{IntervalCallback, ProgressCallback};
use crate::workload::{self, address_proof, ClientNet, SpecError, TestSpec};

/// Options of one client run that are not part of the spec.
pub struct RunOptions<'a> {
    /// Polled during the test: why to stop, once the user pressed Ctrl-C.
    pub interrupted: &'a (dyn Fn() -> Option<String> + Sync),
    pub on_interval: Option<IntervalCallback>,
    /// Called after each step of a workload with steps (sweep points).
    pub on_progress: Option<ProgressCallback>,
    /// Number of this trial within the case (1-based).
    pub trial: u32,
    /// What the command was told for each workload beyond the spec (where
    /// a `files` test writes what it receives).
    pub settings: workload::Settings,
}

/// What the agent answers when it accepts a test.
#[derive(Debug)]
pub(super) struct Acceptance {
    pub(super) token: [u8; TOKEN_LEN],
    pub(super) data_ports: Vec<u16>,
    pub(super) agent: HostFacts,
    pub(super) address_proof: Option<AddressProof>,
}

/// How long past `--wait` an agent may take to say `busy` (it checks its
/// queue every second).
const QUEUE_GRACE: Duration = Duration::from_secs(5);

/// How long one link address's proof may take (connect, and the answer).
const PROOF_TIMEOUT: Duration = Duration::from_secs(3);

/// Most data ports an agent may offer for one test.
const MAX_DATA_PORTS: usize = 4096;

/// Checks an `accepted` answer: a token in hex and a sane list of ports.
fn acceptance(
    token: &str,
    data_ports: Vec<u16>,
    agent: HostFacts,
    address_proof: Option<AddressProof>,
) -> Result<Acceptance, SessionError> {
    if data_ports.is_empty() || data_ports.len() > MAX_DATA_PORTS || data_ports.contains(&0) {
        return Err(SessionError::BadReport(format!(
            "{} data ports offered ({:?}...)",
            data_ports.len(),
            &data_ports[..data_ports.len().min(4)]
        )));
    }
    Ok(Acceptance {
        token: token_from_hex(token)?,
        data_ports,
        agent,
        address_proof,
    })
}

/// Proves each link address the agent asked for, from that address, before
/// any data flows (`workload::address_proof`). The agent may ask only for
/// client addresses of the test's own links, on a real port.
fn prove_link_addresses(
    proof: &AddressProof,
    spec: &TestSpec,
    token: &[u8; TOKEN_LEN],
    agent: SocketAddr,
) -> Result<(), SessionError> {
    if proof.port == 0 || proof.from.len() > spec.links.len() {
        return Err(SessionError::BadReport(format!(
            "it asks for {} address proofs on port {} for {} links",
            proof.from.len(),
            proof.port,
            spec.links.len()
        )));
    }
    for &from in &proof.from {
        let Some(link) = spec
            .links
            .iter()
            .find(|l| l.client.to_canonical() == from.to_canonical())
        else {
            return Err(SessionError::BadReport(format!(
                "it asks to prove {from}, which is no client address of this test's links"
            )));
        };
        let to = SocketAddr::new(link.agent, proof.port);
        log::debug!("proving the link address {from} to the agent at {to} (agent {agent})");
        address_proof::prove(from, to, token, PROOF_TIMEOUT)?;
    }
    Ok(())
}

/// Checks a `queued` answer: a place in line (from 1) and a time to go
/// that a clock can hold.
fn check_queue_place(position: u32, seconds_left: f64) -> Result<(), SessionError> {
    if position == 0 || !(0.0..=1e7).contains(&seconds_left) {
        return Err(SessionError::BadReport(format!(
            "queue position {position}, {seconds_left} s left"
        )));
    }
    Ok(())
}

/// Sends the test request and waits for acceptance, in the agent's queue
/// when `wait` allows it.
pub(super) fn request(
    channel: &mut Channel,
    spec: &TestSpec,
    wait: Duration,
    addr: SocketAddr,
) -> Result<Acceptance, SessionError> {
    let wait_seconds = wait.as_secs_f64().min(MAX_WAIT_SECONDS);
    channel.send(&Message::TestRequest {
        spec: spec.clone(),
        wait_seconds,
    })?;
    let mut last_position = None;
    // The agent answers `busy` when the wait is over; one that keeps
    // saying `queued` past it (plus its reply time) is not believed.
    let give_up = Instant::now() + Duration::from_secs_f64(wait_seconds) + QUEUE_GRACE;
    loop {
        if Instant::now() >= give_up {
            return Err(SessionError::BadReport(format!(
                "it still kept this client in line after --wait {wait_seconds:.0} s and {} s more for its \
                 answer (last at position {}); an agent tells 'busy' when the wait is over",
                QUEUE_GRACE.as_secs(),
                last_position.map_or("?".to_string(), |p: u32| p.to_string())
            )));
        }
        match channel.recv(REPLY_TIMEOUT, "the agent to accept the test")? {
            Message::Accepted {
                token,
                data_ports,
                agent,
                address_proof,
            } => return acceptance(&token, data_ports, agent, address_proof),
            Message::Queued { position, seconds_left } if wait_seconds > 0.0 => {
                check_queue_place(position, seconds_left)?;
                if last_position != Some(position) {
                    log::warn!(
                        "the agent at {addr} is busy: waiting in line at position {position}, \
                         about {seconds_left:.0} s to go (--wait {wait_seconds:.0} s)"
                    );
                    last_position = Some(position);
                }
            }
            other => return Err(unexpected("accepted", other, addr)),
        }
    }
}

/// Checks that the agent's report covers only what was asked: its own
/// ends of the streams of `spec`, once each, with sane numbers.
pub(super) fn check_agent_report(report: &SideReport, spec: &TestSpec) -> Result<(), SessionError> {
    let bad = |what: String| Err(SessionError::BadReport(what));
    if report.host != Party::Agent {
        return bad(format!("it claims to come from the {}", report.host.as_str()));
    }
    let flows = spec.flows();
    let mut seen = std::collections::BTreeSet::new();
    for end in &report.streams {
        let id = end.stream_id;
        let Some((_, flow)) = flows.iter().find(|(f, _)| *f == id) else {
            return bad(format!("it reports stream id {id}, which the client did not ask for"));
        };
        let agent_role = if flow.sender() == Party::Agent {
            Role::Sender
        } else {
            Role::Receiver
        };
        if end.role != agent_role {
            return bad(format!(
                "it reports the {:?} end of stream {id}, which is not the agent's",
                end.role
            ));
        }
        if !seen.insert(id) {
            return bad(format!("it reports stream {id} twice"));
        }
    }
    crate::model::bounds::side_report(report).or_else(bad)
}

/// Runs one trial of `spec` against the agent at `target`.
pub fn run(target: &Target, spec: &TestSpec, options: RunOptions) -> Result<RunResult, SessionError> {
    let psk = target.psk_file.as_deref().map(Psk::from_file).transpose()?;
    run_with_psk(target, psk.as_ref(), false, spec, options)
}

/// [`run`] with the pre-shared key in hand rather than read from the
/// target's key file (an agent running a peer test holds its own);
/// `require_key` refuses an agent that does not ask for it.
pub fn run_with_psk(
    target: &Target,
    psk: Option<&Psk>,
    require_key: bool,
    spec: &TestSpec,
    options: RunOptions,
) -> Result<RunResult, SessionError> {
    let workload = workload::find(&spec.workload)?;
    workload.validate(spec)?;
    TestSpec::validate_cpus(&spec.client.cpus, "-A/--affinity")?;
    let started_at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let stream = connect(target)?;
    let agent_addr = stream.peer_addr().map_err(ProtocolError::Io)?;
    let client_addr = stream.local_addr().map_err(ProtocolError::Io)?;
    let stalls = StallCheck {
        here: client_addr.ip(),
        agent: agent_addr.ip(),
        label: target.host.clone(),
        agent_mtu: std::cell::Cell::new(None),
        asked: std::cell::Cell::new(false),
    };
    let ran = run_connected(target, psk, require_key, spec, options, stream, &stalls);
    match ran {
        Ok((result, agent)) => Ok(one_trial_run(spec, started_at, client_addr, agent, result, None)),
        // A test that stalled or lost its agent: a path that loses every
        // packet above a size is the likeliest cause, and one it can tell.
        Err(e) if stalls.worth_asking(&e) => match stalls.ask() {
            Some(why) => Err(side_runner::TrialError::PathBlackHole(format!("{why} (the test itself: {e})")).into()),
            None => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// What the client asks when a test stalls: whether the path to the agent
/// loses every packet above a size (a path-MTU black hole), once.
struct StallCheck {
    here: std::net::IpAddr,
    agent: std::net::IpAddr,
    /// The agent as the user named it.
    label: String,
    /// The agent's interface MTU, once its facts came.
    agent_mtu: std::cell::Cell<Option<u32>>,
    asked: std::cell::Cell<bool>,
}

impl StallCheck {
    /// Whether `error` is one a black hole makes: the agent went quiet or
    /// was lost, a step timed out, the test hung.
    fn worth_asking(&self, error: &SessionError) -> bool {
        use side_runner::TrialError;
        !self.asked.get()
            && matches!(
                error,
                SessionError::Protocol(ProtocolError::Timeout { .. } | ProtocolError::Closed(_) | ProtocolError::Io(_))
                    | SessionError::Trial(
                        TrialError::PeerLost { .. } | TrialError::Hung(_) | TrialError::PeerFailed { .. }
                    )
                    | SessionError::Workload(_)
            )
    }

    /// The black hole in words, when the path has one; None when packets
    /// of the smaller end's MTU pass, or the path cannot be judged (said
    /// in the log).
    fn ask(&self) -> Option<String> {
        self.asked.set(true);
        let own_mtu = crate::probe::nic::interface_with_address(self.here)
            .and_then(|interface| crate::probe::mtu::mtu_of(&interface).ok());
        let mtu = [own_mtu, self.agent_mtu.get()].into_iter().flatten().min()?;
        match crate::probe::path_mtu::black_hole_toward(self.agent, mtu) {
            Ok(Some(hole)) => Some(format!(
                "packets over {} B vanish between {} and {}: a path-MTU black hole (ICMP 'fragmentation \
                 needed' is not coming back); {}-byte packets are dropped {}: give every hop between them \
                 the same MTU, let ICMP 'fragmentation needed' (ICMPv6 'packet too big') through, or test at \
                 MTU {} or below",
                hole.largest,
                crate::probe::host::hostname(),
                self.label,
                hole.tried,
                hole.place(),
                hole.largest
            )),
            Ok(None) => None,
            Err(why) => {
                log::warn!(
                    "the test stalled; whether the path to {} loses large packets is not known: {why}",
                    self.label
                );
                None
            }
        }
    }
}

/// [`run_with_psk`] once connected: the trial's result and the agent.
fn run_connected(
    target: &Target,
    psk: Option<&Psk>,
    require_key: bool,
    spec: &TestSpec,
    options: RunOptions,
    stream: std::net::TcpStream,
    stalls: &StallCheck,
) -> Result<(TrialResult, Endpoint), SessionError> {
    let workload = workload::find(&spec.workload)?;
    let agent_addr = stream.peer_addr().map_err(ProtocolError::Io)?;
    let mut channel = Channel::new(stream, MAX_AGENT_FRAME);

    let hello = handshake_keyed(&mut channel, agent_addr, psk, require_key)?;
    if !spec.links.is_empty() {
        if !workload.supports_links() {
            return Err(SpecError::Invalid(format!(
                "the {} workload does not run over several links; drop --links",
                spec.workload
            ))
            .into());
        }
        check_links_supported(&hello, agent_addr)?;
    }
    if let Some(needed) = workload.needs_feature(spec) {
        check_feature(&hello, agent_addr, needed)?;
    }
    let mut clock = super::clock::ClockExchanges::offered(&hello);
    if let Some(clock) = &mut clock {
        clock.burst(&mut channel, agent_addr)?;
    }
    let accepted = request(&mut channel, spec, target.wait, agent_addr)?;
    stalls
        .agent_mtu
        .set(accepted.agent.interface.as_ref().and_then(|nic| nic.mtu_bytes));
    if let Some(proof) = &accepted.address_proof {
        prove_link_addresses(proof, spec, &accepted.token, agent_addr)?;
    }
    let own_boot_id = crate::probe::host::boot_id();
    let net = ClientNet {
        agent_ip: agent_addr.ip(),
        data_ports: accepted.data_ports,
        token: accepted.token,
        bind: target.bind,
        routes: workload::routes_of(spec),
        same_kernel: !own_boot_id.is_empty() && accepted.agent.boot_id == own_boot_id,
        settings: options.settings.clone(),
        agent_tls: accepted.agent.tls.clone(),
    };
    let net_same_kernel = net.same_kernel;
    let side = workload.client_side(spec, &net)?;
    match channel.recv(REPLY_TIMEOUT, "the agent to be ready")? {
        Message::Ready => {}
        other => return Err(unexpected("ready", other, agent_addr)),
    }
    channel.send(&Message::Start)?;
    let start = Instant::now();
    let start_ns = crate::probe::clock::realtime_ns();
    let stall_check = || stalls.ask();
    let plan = TrialPlan {
        host: Party::Client,
        spec,
        // A byte-count test has no expected end; never wait for ever.
        hard_deadline: side_runner::hard_deadline(spec, start, Some(crate::model::spec::MAX_DURATION_SECONDS)),
        wait_for_peer_report: true,
        interrupted: options.interrupted,
        on_interval: options.on_interval,
        on_progress: options.on_progress,
        stall_check: Some(&stall_check),
    };
    let outcome = side_runner::run_side(side, plan, &mut channel, &ProcStat)?;
    let end_ns = crate::probe::clock::realtime_ns();
    if let Some(clock) = &mut clock {
        clock.burst_after(&mut channel, agent_addr);
    }
    let clock_offset = clock.map(|clock| crate::model::ClockOffset {
        one_clock: net_same_kernel,
        ..clock.recorded(start_ns + (end_ns - start_ns) / 2)
    });
    let result = merge_sides(options.trial, spec, outcome, clock_offset)?;
    let agent = Endpoint {
        address: agent_addr.to_string(),
        facts: accepted.agent,
    };
    Ok((result, agent))
}

/// The run document of one trial this host ran from `client_addr`
/// against `agent`, `started_at` since the Unix epoch: this host's facts
/// toward the agent, the trial as the reported and only one, judged.
/// `peer_protocol` says who the agent was when it was not nicbench.
pub fn one_trial_run(
    spec: &TestSpec,
    started_at: Duration,
    client_addr: SocketAddr,
    agent: Endpoint,
    result: TrialResult,
    peer_protocol: Option<PeerProtocol>,
) -> RunResult {
    let client = Endpoint {
        address: client_addr.to_string(),
        facts: crate::workload::host_facts_for(spec, client_addr.ip()),
    };
    trial_run_between(spec, started_at, client, agent, result, peer_protocol)
}

/// The run of one trial between `client` (the end that stands where the
/// client does: this host, or the agent that sent a group test in its
/// place) and `agent`, judged.
pub fn trial_run_between(
    spec: &TestSpec,
    started_at: Duration,
    client: Endpoint,
    agent: Endpoint,
    result: TrialResult,
    peer_protocol: Option<PeerProtocol>,
) -> RunResult {
    let mut run = RunResult {
        schema: SCHEMA.to_string(),
        workload: spec.workload.clone(),
        started_at_unix_seconds: started_at.as_secs_f64(),
        client,
        agent,
        spec: spec.clone(),
        trials: vec![result.clone()],
        interrupted: result.interruption.is_some(),
        result,
        repetition: None,
        peer_protocol,
    };
    crate::verdict::annotate(&mut run, None);
    run
}

/// Both sides' reports of trial number `trial` as one result: the agent's
/// report checked against `spec`, the workload's and the links' totals,
/// and the first stream end that failed as the error.
fn merge_sides(
    trial: u32,
    spec: &TestSpec,
    outcome: TrialOutcome,
    clock_offset: Option<crate::model::ClockOffset>,
) -> Result<TrialResult, SessionError> {
    let agent_report = outcome.peer.expect("run_side waits for the peer's report");
    check_agent_report(&agent_report, spec)?;
    let (client_links, agent_links) = (outcome.local.links.clone(), agent_report.links.clone());
    let mut result = TrialResult::merge(trial, &spec.flows(), outcome.local, agent_report)?;
    // Before the workload's summary: loaded's one-way delays stand on it.
    result.clock_offset = clock_offset;
    workload::results_of(&spec.workload).summarize(&mut result);
    crate::multilink::summarize(&mut result, spec, &client_links, &agent_links);
    result.interruption = outcome.interruption;
    first_stream_error(&result)?;
    Ok(result)
}

/// The first stream end of `result` that reports an error, as the error.
fn first_stream_error(result: &TrialResult) -> Result<(), SessionError> {
    for s in &result.streams {
        for (end, role) in [(&s.sender, "sender"), (&s.receiver, "receiver")] {
            if let Some(message) = &end.error {
                return Err(SessionError::Stream {
                    stream_id: s.stream_id,
                    role,
                    message: message.clone(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::connect::open;
    use super::super::tests::{fake_agent, greet};
    use super::*;
    use crate::model::spec::tests::spec;
    use crate::model::{CpuReport, StreamEnd};
    use crate::protocol::{token_to_hex, Hello};

    fn end(id: u32, role: Role) -> StreamEnd {
        StreamEnd {
            stream_id: id,
            role,
            bytes: 1,
            seconds: 1.0,
            bits_per_second: 8.0,
            ..StreamEnd::default()
        }
    }

    fn report(streams: Vec<StreamEnd>) -> SideReport {
        SideReport {
            host: Party::Agent,
            streams,
            cpu: CpuReport::default(),
            counters: None,
            overlapped_tests: 0,
            links: Vec::new(),
        }
    }

    #[test]
    fn the_agents_report_may_hold_only_its_own_ends_of_asked_streams() {
        let s = spec("tcp");
        assert!(check_agent_report(&report(vec![end(1, Role::Receiver)]), &s).is_ok());
        let err = check_agent_report(&report(vec![end(7, Role::Receiver)]), &s).unwrap_err();
        assert!(err.to_string().contains("stream id 7"), "{err}");
        let err = check_agent_report(&report(vec![end(1, Role::Sender)]), &s).unwrap_err();
        assert!(err.to_string().contains("not the agent's"), "{err}");
        let twice = report(vec![end(1, Role::Receiver), end(1, Role::Receiver)]);
        assert!(check_agent_report(&twice, &s)
            .unwrap_err()
            .to_string()
            .contains("twice"));
        let mut negative = end(1, Role::Receiver);
        negative.seconds = -1.0;
        assert!(check_agent_report(&report(vec![negative]), &s).is_err());
        let mut client_side = report(vec![]);
        client_side.host = Party::Client;
        assert!(check_agent_report(&client_side, &s).is_err());
        let mut cpu = report(vec![]);
        cpu.cpu.seconds = f64::NAN;
        assert!(check_agent_report(&cpu, &s).is_err());
    }

    fn hex_token() -> String {
        token_to_hex(&[7; TOKEN_LEN])
    }

    #[test]
    fn an_acceptance_needs_ports_and_a_token() {
        let ok = acceptance(&hex_token(), vec![5311, 5312], HostFacts::default(), None).unwrap();
        assert_eq!((ok.token, ok.data_ports), ([7; TOKEN_LEN], vec![5311, 5312]));
        for ports in [vec![], vec![5311, 0], vec![5311; MAX_DATA_PORTS + 1]] {
            let e = acceptance(&hex_token(), ports.clone(), HostFacts::default(), None).unwrap_err();
            assert!(
                e.to_string().contains(&format!("{} data ports offered", ports.len())),
                "{e}"
            );
        }
        let e = acceptance("not hex", vec![5311], HostFacts::default(), None).unwrap_err();
        assert!(matches!(e, SessionError::Protocol(_)), "{e:?}");
    }

    #[test]
    fn a_place_in_line_starts_at_one_and_ends_in_time() {
        assert!(check_queue_place(1, 0.0).is_ok());
        assert!(check_queue_place(3, 1e7).is_ok());
        for (position, seconds_left) in [(0, 5.0), (1, -1.0), (1, f64::NAN), (1, f64::INFINITY), (1, 2e7)] {
            assert!(
                check_queue_place(position, seconds_left).is_err(),
                "{position} {seconds_left}"
            );
        }
    }

    #[test]
    fn a_stream_end_that_failed_fails_the_trial() {
        let s = spec("tcp");
        let mut failed = end(1, Role::Receiver);
        failed.error = Some("connection reset by peer".into());
        let mut client = report(vec![end(1, Role::Sender)]);
        client.host = Party::Client;
        let result = TrialResult::merge(1, &s.flows(), client, report(vec![failed])).unwrap();
        let e = first_stream_error(&result).unwrap_err();
        assert!(
            matches!(&e, SessionError::Stream { stream_id: 1, role: "receiver", message } if message.contains("reset")),
            "{e:?}"
        );
    }

    /// Plays an agent that answers a test request with `answers`.
    fn agent_answering(answers: Vec<Message>) -> (Target, std::thread::JoinHandle<()>) {
        fake_agent(move |channel| {
            greet(channel, Hello::ours(["tcp"]));
            match channel.recv(Duration::from_secs(10), "test_request").unwrap() {
                Message::TestRequest { spec, wait_seconds } => {
                    assert_eq!(spec.workload, "tcp");
                    assert_eq!(
                        wait_seconds, MAX_WAIT_SECONDS,
                        "the client asks for no more than the cap"
                    );
                }
                other => panic!("expected test_request, got {}", other.kind()),
            }
            for answer in answers {
                channel.send(&answer).unwrap();
            }
        })
    }

    #[test]
    fn the_wait_in_line_is_a_deadline_even_when_the_agent_keeps_saying_queued() {
        let (target, agent) = fake_agent(|channel| {
            greet(channel, Hello::ours(["tcp"]));
            let _ = channel.recv(Duration::from_secs(10), "test_request");
            // Queued for ever (until the client hangs up).
            while channel
                .send(&Message::Queued {
                    position: 1,
                    seconds_left: 1.0,
                })
                .is_ok()
            {
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let mut connected = open(&target).unwrap();
        let started = Instant::now();
        let e = request(
            &mut connected.channel,
            &spec("tcp"),
            Duration::from_millis(200),
            connected.addr,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("still kept this client in line after --wait 0 s"),
            "{e}"
        );
        assert!(started.elapsed() >= QUEUE_GRACE, "not before the wait and the grace");
        drop(connected);
        agent.join().unwrap();
    }

    #[test]
    fn a_queued_request_is_accepted_in_turn() {
        let accepted = Message::Accepted {
            token: hex_token(),
            data_ports: vec![6001],
            agent: HostFacts::default(),
            address_proof: None,
        };
        let queued = |position| Message::Queued {
            position,
            seconds_left: 1.0,
        };
        let (target, agent) = agent_answering(vec![queued(2), queued(1), accepted]);
        let mut connected = open(&target).unwrap();
        let wait = Duration::from_secs_f64(MAX_WAIT_SECONDS * 2.0);
        let acceptance = request(&mut connected.channel, &spec("tcp"), wait, connected.addr).unwrap();
        agent.join().unwrap();
        assert_eq!(acceptance.data_ports, vec![6001]);
    }

    #[test]
    fn a_bad_place_in_line_ends_the_request() {
        let (target, agent) = agent_answering(vec![Message::Queued {
            position: 0,
            seconds_left: 1.0,
        }]);
        let mut connected = open(&target).unwrap();
        let wait = Duration::from_secs_f64(MAX_WAIT_SECONDS);
        let e = request(&mut connected.channel, &spec("tcp"), wait, connected.addr).unwrap_err();
        agent.join().unwrap();
        assert!(matches!(e, SessionError::BadReport(_)), "{e:?}");
    }
}
