//! Asking an agent for everything that is not a test of its own: its
//! facts and addresses, a host setting, a test it runs itself toward
//! another agent (`nicbench mesh`), and sampling its side while
//! `nicbench watch --peer` runs a command.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use super::connect::{check_links_supported, open, unexpected, Connected};
use super::{SessionError, Target, REPLY_TIMEOUT};
use crate::model::{HostFacts, HostSetting, InterfaceAddress, Party, RunResult, SideReport, SCHEMA};
use crate::protocol::channel::Channel;
use crate::protocol::{Hello, Message, ProtocolError, FEATURE_PEER_TESTS, FEATURE_WATCH, MAX_WAIT_SECONDS};
use crate::workload::{self, TestSpec};

/// Asks the agent at `from` to run `spec` itself, as the client, toward the
/// agent at `toward` (HOST:PORT as `from` should reach it): a third-party
/// test of `nicbench mesh`. The agent at `from` must allow peer tests and
/// this coordinator must know its key. Returns the run as `from` measured it
/// (client = `from`, agent = `toward`).
pub fn peer_test(from: &Target, toward: &str, spec: &TestSpec) -> Result<RunResult, SessionError> {
    workload::find(&spec.workload)?.validate(spec)?;
    let Connected {
        mut channel,
        addr,
        hello,
    } = open(from)?;
    if !hello.has_feature(FEATURE_PEER_TESTS) {
        return Err(SessionError::AgentRefused(format!(
            "the agent at {addr} does not run peer tests: start it with --allow-peer-tests and --psk-file \
             (nicbench {} or newer)",
            env!("CARGO_PKG_VERSION")
        )));
    }
    let wait_seconds = from.wait.as_secs_f64().min(MAX_WAIT_SECONDS);
    channel.send(&Message::PeerTestRequest {
        target: toward.to_string(),
        spec: spec.clone(),
        wait_seconds,
    })?;
    let deadline = Instant::now() + peer_test_patience(spec.expected_seconds(), wait_seconds);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match channel.recv(left.max(Duration::from_millis(1)), "the peer test's result")? {
            Message::PeerTestDone { run } => {
                check_peer_run(&run, spec)?;
                return Ok(*run);
            }
            Message::Queued { .. } if wait_seconds > 0.0 => {}
            other => return Err(unexpected("peer_test_done", other, addr)),
        }
    }
}

/// How long a coordinator waits for a peer test's result: the test itself,
/// both queues, both handshakes and the agent's own setup timeouts;
/// anything longer is an agent that hangs.
fn peer_test_patience(expected_seconds: f64, wait_seconds: f64) -> Duration {
    Duration::from_secs_f64(expected_seconds + 2.0 * wait_seconds) + 4 * REPLY_TIMEOUT
}

/// Checks that a peer test's run is a run of the asked workload with trials.
fn check_peer_run(run: &RunResult, spec: &TestSpec) -> Result<(), SessionError> {
    if run.schema != SCHEMA || run.workload != spec.workload || run.trials.is_empty() {
        return Err(SessionError::BadReport(format!(
            "the peer test's run is not a {} run of {SCHEMA} with trials",
            spec.workload
        )));
    }
    Ok(())
}

/// Asks the agent at `target` for the addresses of its interfaces (for
/// `--links`), authenticating when it asks.
pub fn agent_addresses(target: &Target) -> Result<Vec<InterfaceAddress>, SessionError> {
    let Connected {
        mut channel,
        addr,
        hello,
    } = open(target)?;
    check_links_supported(&hello, addr)?;
    channel.send(&Message::AddressesRequest)?;
    match channel.recv(REPLY_TIMEOUT, "the agent's addresses")? {
        Message::Addresses { addresses } => Ok(addresses),
        other => Err(unexpected("addresses", other, addr)),
    }
}

/// Sends `request` and reads the agent's facts in answer (`waiting_for`
/// names the step for a timeout).
fn ask_facts(
    channel: &mut Channel,
    addr: SocketAddr,
    request: &Message,
    waiting_for: &str,
) -> Result<HostFacts, SessionError> {
    channel.send(request)?;
    match channel.recv(REPLY_TIMEOUT, waiting_for)? {
        Message::Facts { facts } => Ok(facts),
        other => Err(unexpected("facts", other, addr)),
    }
}

/// Asks the agent at `target` for its host facts and the interface toward
/// this client (`nicbench host --remote`), authenticating when it asks.
pub fn remote_facts(target: &Target) -> Result<HostFacts, SessionError> {
    let mut agent = open(target)?;
    ask_facts(
        &mut agent.channel,
        agent.addr,
        &Message::FactsRequest,
        "the agent's facts",
    )
}

/// Checks that an agent answers, proves the key, and offers `feature`
/// (None: any); returns its hello and its host facts. Sends no test.
pub fn probe_agent(target: &Target, feature: Option<&str>) -> Result<(Hello, HostFacts), SessionError> {
    let Connected {
        mut channel,
        addr,
        hello,
    } = open(target)?;
    if let Some(feature) = feature.filter(|f| !hello.has_feature(f)) {
        let how = match feature {
            FEATURE_PEER_TESTS => "start it with --allow-peer-tests and --psk-file (the same key as the coordinator's)",
            _ => "run the same nicbench release there",
        };
        return Err(SessionError::AgentRefused(format!(
            "the agent at {addr} (nicbench {}) does not offer {feature}: {how}",
            hello.software_version
        )));
    }
    let facts = ask_facts(&mut channel, addr, &Message::FactsRequest, "the agent's facts")?;
    Ok((hello, facts))
}

/// Asks the agent at `target` to set the MTU of its interface toward this
/// client (it must allow host changes, and this client must know its key);
/// returns its facts read after the change.
pub fn set_remote_mtu(target: &Target, mtu: u32) -> Result<HostFacts, SessionError> {
    let mut agent = open(target)?;
    ask_facts(
        &mut agent.channel,
        agent.addr,
        &Message::SetMtu { mtu },
        "the agent's facts after the MTU change",
    )
}

/// Asks the agent at `target` to apply one host setting to its interface
/// toward this client (it must allow host changes, and this client must
/// know its key); returns its facts read after the change.
pub fn set_remote_host(target: &Target, setting: &HostSetting) -> Result<HostFacts, SessionError> {
    let mut agent = open(target)?;
    ask_facts(
        &mut agent.channel,
        agent.addr,
        &Message::SetHost {
            setting: setting.clone(),
        },
        "the agent's facts after the host setting",
    )
}

/// An agent sampling its side while `nicbench watch --peer` runs a
/// command: its facts (with the interface toward us) and how long it
/// samples at most; [`PeerWatch::stop`] collects its report.
pub struct PeerWatch {
    channel: Channel,
    pub addr: SocketAddr,
    /// This host's address on the control connection (toward the agent).
    pub local_ip: IpAddr,
    pub agent: HostFacts,
    pub max_seconds: f64,
}

/// Asks the agent at `target` to start sampling its CPU and the interface
/// toward this client (`watch_start`), authenticating when it asks.
pub fn watch_start(target: &Target) -> Result<PeerWatch, SessionError> {
    let Connected {
        mut channel,
        addr,
        hello,
    } = open(target)?;
    let local_ip = channel.stream().local_addr().map_err(ProtocolError::Io)?.ip();
    if !hello.has_feature(FEATURE_WATCH) {
        return Err(SessionError::AgentRefused(format!(
            "the agent at {addr} (nicbench {}) cannot sample its side for watch --peer; run nicbench {} or newer there",
            hello.software_version,
            env!("CARGO_PKG_VERSION")
        )));
    }
    channel.send(&Message::WatchStart)?;
    match channel.recv(REPLY_TIMEOUT, "the agent to start sampling")? {
        Message::WatchStarted { agent, max_seconds } => Ok(PeerWatch {
            channel,
            addr,
            local_ip,
            agent,
            max_seconds,
        }),
        other => Err(unexpected("watch_started", other, addr)),
    }
}

impl PeerWatch {
    /// Ends the agent's sampling and returns its side: CPU over the
    /// interval and the counters of its interface toward us.
    pub fn stop(mut self) -> Result<SideReport, SessionError> {
        // An agent that gave up (its --max-duration, a shutdown) has sent
        // an error and closed: the send may fail, the error is still read.
        let _ = self.channel.send(&Message::WatchStop);
        match self.channel.recv(REPLY_TIMEOUT, "the agent's side of the watch")? {
            Message::Done { report } if report.host == Party::Agent => Ok(report),
            Message::Done { .. } => Err(SessionError::BadReport("the report is not the agent's side".into())),
            other => Err(unexpected("done", other, self.addr)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{fake_agent, greet};
    use super::*;
    use crate::model::spec::tests::spec;
    use crate::model::CpuReport;

    #[test]
    fn a_peer_test_waits_for_the_test_both_queues_and_four_replies() {
        assert_eq!(
            peer_test_patience(10.0, 0.0),
            Duration::from_secs(10) + 4 * REPLY_TIMEOUT
        );
        assert_eq!(
            peer_test_patience(10.0, 5.0),
            Duration::from_secs(20) + 4 * REPLY_TIMEOUT
        );
        assert_eq!(
            peer_test_patience(0.5, 0.25),
            Duration::from_secs(1) + 4 * REPLY_TIMEOUT
        );
    }

    fn run_of(workload: &str, trials: usize) -> RunResult {
        RunResult {
            schema: SCHEMA.to_string(),
            workload: workload.into(),
            started_at_unix_seconds: 0.0,
            client: Default::default(),
            agent: Default::default(),
            spec: spec(workload),
            result: Default::default(),
            trials: vec![Default::default(); trials],
            interrupted: false,
            repetition: None,
            peer_protocol: None,
        }
    }

    #[test]
    fn a_peer_test_must_return_a_run_of_the_asked_workload() {
        let asked = spec("tcp");
        assert!(check_peer_run(&run_of("tcp", 1), &asked).is_ok());
        for wrong in [run_of("udp", 1), run_of("tcp", 0)] {
            let e = check_peer_run(&wrong, &asked).unwrap_err();
            assert!(e.to_string().contains("is not a tcp run of nicbench.run/1"), "{e}");
        }
        let mut old = run_of("tcp", 1);
        old.schema = "nicbench.run/0".into();
        assert!(check_peer_run(&old, &asked).is_err());
    }

    #[test]
    fn an_agent_refusing_a_host_change_is_quoted() {
        let words = "this agent does not change host settings: start it with --allow-host-changes";
        let (target, agent) = fake_agent(move |channel| {
            greet(channel, Hello::ours(["tcp"]));
            let asked = channel.recv(REPLY_TIMEOUT, "set_mtu").unwrap();
            assert_eq!(asked, Message::SetMtu { mtu: 9000 });
            channel.send(&Message::Error { message: words.into() }).unwrap();
        });
        let e = set_remote_mtu(&target, 9000).unwrap_err();
        agent.join().unwrap();
        assert!(matches!(&e, SessionError::AgentRefused(said) if said == words), "{e:?}");
    }

    #[test]
    fn facts_come_back_for_a_facts_request() {
        let (target, agent) = fake_agent(|channel| {
            greet(channel, Hello::ours(["tcp"]));
            assert_eq!(
                channel.recv(REPLY_TIMEOUT, "facts_request").unwrap(),
                Message::FactsRequest
            );
            let facts = HostFacts {
                hostname: "far".into(),
                ..HostFacts::default()
            };
            channel.send(&Message::Facts { facts }).unwrap();
        });
        let facts = remote_facts(&target).unwrap();
        agent.join().unwrap();
        assert_eq!(facts.hostname, "far");
    }

    #[test]
    fn probing_for_a_missing_feature_says_how_to_get_it() {
        let (target, agent) = fake_agent(|channel| greet(channel, Hello::ours(["tcp"])));
        let e = probe_agent(&target, Some(FEATURE_PEER_TESTS)).unwrap_err();
        agent.join().unwrap();
        assert!(e.to_string().contains("start it with --allow-peer-tests"), "{e}");
    }

    #[test]
    fn watching_needs_an_agent_that_can_sample() {
        let (target, agent) = fake_agent(|channel| greet(channel, Hello::ours(["tcp"])));
        let e = watch_start(&target).err().expect("an agent without the watch feature");
        agent.join().unwrap();
        assert!(e.to_string().contains("cannot sample its side for watch --peer"), "{e}");
    }

    #[test]
    fn a_watch_returns_only_the_agents_side() {
        let (target, agent) = fake_agent(|channel| {
            let mut hello = Hello::ours(["tcp"]);
            hello.features.push(FEATURE_WATCH.into());
            greet(channel, hello);
            assert_eq!(channel.recv(REPLY_TIMEOUT, "watch_start").unwrap(), Message::WatchStart);
            channel
                .send(&Message::WatchStarted {
                    agent: HostFacts::default(),
                    max_seconds: 60.0,
                })
                .unwrap();
            assert_eq!(channel.recv(REPLY_TIMEOUT, "watch_stop").unwrap(), Message::WatchStop);
            let report = SideReport {
                host: Party::Client,
                streams: Vec::new(),
                cpu: CpuReport::default(),
                counters: None,
                overlapped_tests: 0,
                links: Vec::new(),
            };
            channel.send(&Message::Done { report }).unwrap();
        });
        let watch = watch_start(&target).unwrap();
        assert_eq!(watch.max_seconds, 60.0);
        assert_eq!(watch.local_ip, "127.0.0.1".parse::<IpAddr>().unwrap());
        let e = watch.stop().unwrap_err();
        agent.join().unwrap();
        assert!(e.to_string().contains("not the agent's side"), "{e}");
    }
}
