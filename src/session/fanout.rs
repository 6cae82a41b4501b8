//! One test against several agents at once with one local side: a
//! multicast group's sender and its receivers. Every agent is reached,
//! keyed, asked and readied in parallel; then the local side starts (the
//! sender goes first, so receivers join a group already flowing) and every
//! agent gets `start`; each agent's control connection is watched on its
//! own thread ([`side_runner::run_side`] with a side that only follows the
//! local one) while the local side runs on its own
//! ([`side_runner::run_alone`]). The result is one trial per agent, each
//! the local side's report merged with that agent's, as [`super::run`]
//! merges one: a receiver that fails or vanishes fails its own trial, not
//! the others'.
//!
//! Only workloads whose agents need nothing of the client's data sockets
//! before they are ready fan out (a group receiver binds and waits): the
//! local side is made once every agent has said `ready`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::connect::{check_feature, connect, handshake_keyed, unexpected};
use super::run::{check_agent_report, request, Acceptance, RunOptions};
use super::{SessionError, Target, REPLY_TIMEOUT};
use crate::model::{ClockOffset, Endpoint, Interruption, Party, SideReport, TrialResult};
use crate::probe::cpu::ProcStat;
use crate::protocol::auth::Psk;
use crate::protocol::channel::Channel;
use crate::protocol::{Message, ProtocolError, MAX_AGENT_FRAME};
use crate::side_runner::{self, TrialPlan};
use crate::workload::{self, Aborter, ClientNet, RunControl, Side, SideOutcome, TestSpec};

/// A fanned-out test that ran: the local side's report and each agent's trial.
pub struct FanoutRun {
    pub started_at: Duration,
    /// The control connection's local address toward the first agent.
    pub client_addr: SocketAddr,
    /// The agent that sent instead of this host (`--sender`), and its
    /// facts; None when this host sent.
    pub sender: Option<Endpoint>,
    pub local: SideReport,
    /// Set when the local side was cut short (Ctrl-C).
    pub interruption: Option<Interruption>,
    /// One per target, in the order given.
    pub agents: Vec<AgentTrial>,
}

/// One agent's part: who it is and its trial, or why it has none.
pub struct AgentTrial {
    /// The agent as `HOST:PORT`.
    pub label: String,
    pub agent: Endpoint,
    pub result: Result<TrialResult, SessionError>,
}

/// What ended a fanned-out test before it ran: the agent it came from
/// (or the local side), and the error.
#[derive(Debug, thiserror::Error)]
#[error("{agent}: {source}")]
pub struct FanoutError {
    pub agent: String,
    #[source]
    pub source: SessionError,
}

impl FanoutError {
    fn of(agent: &str, source: impl Into<SessionError>) -> FanoutError {
        FanoutError {
            agent: agent.to_string(),
            source: source.into(),
        }
    }
}

/// An agent that has accepted the test and is ready for `start`.
struct Prepared {
    label: String,
    channel: Channel,
    addr: SocketAddr,
    local: SocketAddr,
    accepted: Acceptance,
    clock: Option<super::clock::ClockExchanges>,
}

/// Reaches the agent at `target`, shakes hands, asks for the test and
/// waits until it is ready.
fn prepare(target: &Target, spec: &TestSpec) -> Result<Prepared, SessionError> {
    let workload = workload::find(&spec.workload)?;
    let psk = target.psk_file.as_deref().map(Psk::from_file).transpose()?;
    let stream = connect(target)?;
    let addr = stream.peer_addr().map_err(ProtocolError::Io)?;
    let local = stream.local_addr().map_err(ProtocolError::Io)?;
    let mut channel = Channel::new(stream, MAX_AGENT_FRAME);
    let hello = handshake_keyed(&mut channel, addr, psk.as_ref(), false)?;
    if !hello.workloads.contains(&spec.workload) {
        return Err(SessionError::AgentRefused(format!(
            "the agent at {addr} ({}) runs no {} tests; update it to this version of nicbench",
            hello.software_version, spec.workload
        )));
    }
    if let Some(needed) = workload.needs_feature(spec) {
        check_feature(&hello, addr, needed)?;
    }
    let mut clock = super::clock::ClockExchanges::offered(&hello);
    if let Some(clock) = &mut clock {
        clock.burst(&mut channel, addr)?;
    }
    let accepted = request(&mut channel, spec, target.wait, addr)?;
    match channel.recv(REPLY_TIMEOUT, "the agent to be ready")? {
        Message::Ready => {}
        other => return Err(unexpected("ready", other, addr)),
    }
    Ok(Prepared {
        label: target.label(),
        channel,
        addr,
        local,
        accepted,
        clock,
    })
}

/// The client's side beside each agent: it follows the local side and
/// ends with it (or when told to stop), measuring nothing itself.
struct Follower {
    done: Arc<AtomicBool>,
    aborted: Arc<AtomicBool>,
}

impl Side for Follower {
    fn run(self: Box<Self>, control: &RunControl) -> SideOutcome {
        while !self.done.load(Ordering::Relaxed)
            && !self.aborted.load(Ordering::Relaxed)
            && !control.stop.load(Ordering::Relaxed)
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        SideOutcome::default()
    }

    fn aborter(&self) -> Aborter {
        let aborted = Arc::clone(&self.aborted);
        Arc::new(move || aborted.store(true, Ordering::Relaxed))
    }
}

/// Sets its flag when dropped: the local side is over, however it ended.
struct Finished(Arc<AtomicBool>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs one trial of `spec` with the local side against every agent of
/// `targets` at once (see the module's words).
pub fn run_fanout(
    targets: &[Target],
    sender: Option<&Target>,
    spec: &TestSpec,
    options: RunOptions,
) -> Result<FanoutRun, FanoutError> {
    let workload = workload::find(&spec.workload).map_err(|e| FanoutError::of("the test", e))?;
    workload.validate(spec).map_err(|e| FanoutError::of("the test", e))?;
    TestSpec::validate_cpus(&spec.client.cpus, "-A/--affinity").map_err(|e| FanoutError::of("the test", e))?;
    if targets.is_empty() {
        return Err(FanoutError::of(
            "the test",
            SessionError::Spec(crate::model::spec::SpecError::Invalid(
                "no agent to run it against".into(),
            )),
        ));
    }
    // The sending agent gets the test reversed: it sends, as an agent does on -R.
    let sender_spec = TestSpec {
        direction: crate::model::Direction::Reverse,
        ..spec.clone()
    };
    if sender.is_some() {
        workload
            .validate(&sender_spec)
            .map_err(|e| FanoutError::of("the test", e))?;
    }
    let asks: Vec<(&Target, &TestSpec)> = targets
        .iter()
        .map(|target| (target, spec))
        .chain(sender.map(|target| (target, &sender_spec)))
        .collect();
    let mut prepared = std::thread::scope(|scope| {
        let handles: Vec<_> = asks
            .iter()
            .map(|&(target, spec)| scope.spawn(move || prepare(target, spec)))
            .collect();
        handles
            .into_iter()
            .zip(&asks)
            .enumerate()
            .map(|(i, (handle, (target, _)))| {
                let label = match i < targets.len() {
                    true => target.label(),
                    false => format!("{} (the sender)", target.label()),
                };
                handle
                    .join()
                    .unwrap_or_else(|_| Err(SessionError::BadReport("the thread reaching it panicked".into())))
                    .map_err(|e| FanoutError::of(&label, e))
            })
            .collect::<Result<Vec<_>, _>>()
    })?;
    let mut sending = sender
        .is_some()
        .then(|| prepared.pop().expect("the sender was prepared"));
    let first = &prepared[0];
    let own_boot_id = crate::probe::host::boot_id();
    let net = ClientNet {
        agent_ip: first.addr.ip(),
        data_ports: first.accepted.data_ports.clone(),
        token: first.accepted.token,
        bind: targets[0].bind,
        routes: Default::default(),
        same_kernel: !own_boot_id.is_empty() && first.accepted.agent.boot_id == own_boot_id,
        settings: options.settings.clone(),
        agent_tls: None,
    };
    let local_ip = first.local.ip();
    let client_addr = first.local;
    let side = workload
        .client_side(spec, &net)
        .map_err(|e| FanoutError::of("this host (the local side)", e))?;
    let started_at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let start_ns = crate::probe::clock::realtime_ns();
    // A sending agent first: receivers join a group already flowing.
    if let Some(agent) = &mut sending {
        agent
            .channel
            .send(&Message::Start)
            .map_err(|e| FanoutError::of(&format!("{} (the sender)", agent.label), SessionError::from(e)))?;
    }
    let done = Arc::new(AtomicBool::new(false));
    let interrupted = options.interrupted;
    let (local, sent, followed) = std::thread::scope(|scope| {
        let finished = Finished(Arc::clone(&done));
        let (on_interval, on_progress) = (options.on_interval, options.on_progress);
        // The local side first: receivers join a group already flowing.
        let local = scope.spawn(move || {
            let _finished = finished;
            let plan = TrialPlan {
                on_interval,
                on_progress,
                ..client_plan(spec, false, interrupted)
            };
            side_runner::run_alone(side, plan, Some(local_ip), &ProcStat)
        });
        let sender_spec = &sender_spec;
        let sender = sending.as_mut().map(|agent| {
            let done = Arc::clone(&done);
            scope.spawn(move || follow(agent, sender_spec, done, interrupted))
        });
        let followers: Vec<_> = prepared
            .iter_mut()
            .map(|agent| {
                let done = Arc::clone(&done);
                scope.spawn(move || {
                    agent.channel.send(&Message::Start)?;
                    follow(agent, spec, done, interrupted)
                })
            })
            .collect();
        let local = local.join();
        let joined = |f: std::thread::ScopedJoinHandle<'_, Result<_, SessionError>>| {
            f.join()
                .unwrap_or_else(|_| Err(SessionError::BadReport("the thread following it panicked".into())))
        };
        let followed: Vec<_> = followers.into_iter().map(joined).collect();
        (local, sender.map(joined), followed)
    });
    let local = local
        .unwrap_or_else(|_| Err(side_runner::TrialError::SidePanicked("the local side's thread".into())))
        .map_err(|e| FanoutError::of("this host (the local side)", e))?;
    let end_ns = crate::probe::clock::realtime_ns();
    let offset_of = |agent: &mut Prepared| {
        agent.clock.as_mut().map(|clock| {
            clock.burst_after(&mut agent.channel, agent.addr);
            ClockOffset {
                one_clock: !own_boot_id.is_empty() && agent.accepted.agent.boot_id == own_boot_id,
                ..clock.recorded(start_ns + (end_ns - start_ns) / 2)
            }
        })
    };
    // What each receiver's trial takes as the sending end: the sending
    // agent's report (checked as the reversed test's) with its clock, or
    // this host's.
    let (sending_end, sender_offset, sender) = match (sending, sent) {
        (Some(mut agent), Some(outcome)) => {
            let offset = offset_of(&mut agent);
            let report = outcome
                .and_then(|outcome| {
                    let report = outcome
                        .peer
                        .ok_or_else(|| SessionError::BadReport("no report came".into()))?;
                    check_agent_report(&report, &sender_spec)?;
                    Ok(report)
                })
                .map_err(|e| FanoutError::of(&format!("{} (the sender)", agent.label), e))?;
            let endpoint = Endpoint {
                address: agent.addr.to_string(),
                facts: agent.accepted.agent,
            };
            (report, offset, Some(endpoint))
        }
        _ => (local.local.clone(), None, None),
    };
    let agents = prepared
        .into_iter()
        .zip(followed)
        .map(|(mut agent, outcome)| {
            let offset = offset_of(&mut agent).map(|offset| match &sender_offset {
                Some(sender) => offset.against(sender),
                None => offset,
            });
            let result = outcome.and_then(|outcome| {
                let report = outcome
                    .peer
                    .ok_or_else(|| SessionError::BadReport("no report came".into()))?;
                merge(
                    options.trial,
                    spec,
                    sending_end.clone(),
                    report,
                    offset,
                    outcome.interruption,
                )
            });
            AgentTrial {
                label: agent.label,
                agent: Endpoint {
                    address: agent.addr.to_string(),
                    facts: agent.accepted.agent,
                },
                result,
            }
        })
        .collect();
    Ok(FanoutRun {
        started_at,
        client_addr,
        sender,
        local: local.local,
        interruption: local.interruption,
        agents,
    })
}

/// Follows one agent's side of the test (its `start` sent) until its
/// report comes, while the local side runs.
fn follow(
    agent: &mut Prepared,
    spec: &TestSpec,
    done: Arc<AtomicBool>,
    interrupted: &(dyn Fn() -> Option<String> + Sync),
) -> Result<side_runner::TrialOutcome, SessionError> {
    let plan = client_plan(spec, true, interrupted);
    let follower = Follower {
        done,
        aborted: Arc::new(AtomicBool::new(false)),
    };
    side_runner::run_side(Box::new(follower), plan, &mut agent.channel, &ProcStat).map_err(SessionError::from)
}

/// The client's plan of a trial of `spec` starting now, hung at the
/// hard deadline; the local side's (`wait_for_peer_report` false) or one
/// agent's follower's.
fn client_plan<'a>(
    spec: &'a TestSpec,
    wait_for_peer_report: bool,
    interrupted: &'a (dyn Fn() -> Option<String> + Sync),
) -> TrialPlan<'a> {
    TrialPlan {
        host: Party::Client,
        spec,
        hard_deadline: side_runner::hard_deadline(spec, Instant::now(), Some(crate::model::spec::MAX_DURATION_SECONDS)),
        wait_for_peer_report,
        interrupted,
        on_interval: None,
        on_progress: None,
        stall_check: None,
    }
}

/// The local side's report and one agent's as that agent's trial.
fn merge(
    trial: u32,
    spec: &TestSpec,
    local: SideReport,
    report: SideReport,
    clock_offset: Option<ClockOffset>,
    interruption: Option<Interruption>,
) -> Result<TrialResult, SessionError> {
    check_agent_report(&report, spec)?;
    let mut result = TrialResult::merge(trial, &spec.flows(), local, report)?;
    result.clock_offset = clock_offset;
    workload::results_of(&spec.workload).summarize(&mut result);
    result.interruption = interruption;
    Ok(result)
}
