//! Running one side of one trial: sample the CPU, run the [`Side`] on its own
//! thread, and meanwhile watch the control connection — the peer may ask to
//! stop, report its side, fail, or vanish. Client and agent both use this,
//! so neither knows what kind of workload runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::model::{Interruption, LinkEnd, Party, SideReport};
use crate::probe::counters::CounterProbe;
use crate::probe::cpu::{busy_seconds, cpu_report, CpuSampler};
use crate::probe::sched::ThreadTracker;
use crate::protocol::channel::{Channel, PeerState};
use crate::protocol::{Message, ProtocolError};
use crate::workload::runner::{IntervalCallback, ProgressCallback, SideOutcome};
use crate::workload::{RunControl, Side, TestSpec};

/// Extra time past the expected end before a trial is declared hung (the
/// client's; the agent frees a test slot sooner, see `agent::admission`).
pub const GRACE: Duration = Duration::from_secs(30);

/// How a trial on one side ended badly.
#[derive(Debug, thiserror::Error)]
pub enum TrialError {
    #[error("the {peer} reported a failure: {message}")]
    PeerFailed { peer: &'static str, message: String },
    #[error("lost the {peer} mid-test: {source}")]
    PeerLost {
        peer: &'static str,
        #[source]
        source: ProtocolError,
    },
    #[error("the {peer} sent '{got}' during the test")]
    Unexpected { peer: &'static str, got: String },
    #[error("the test did not finish {0:.0} s after its expected end")]
    Hung(f64),
    /// The path between the ends loses every packet above a size: what the
    /// stall check found when the peer went quiet ([`TrialPlan::stall_check`]).
    #[error("{0}")]
    PathBlackHole(String),
    #[error("could not read CPU counters: {0}")]
    Cpu(std::io::Error),
    #[error("the test's own thread failed: {0} (a nicbench bug: please report it with the command line)")]
    SidePanicked(String),
}

/// The message a panicking thread left.
fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// What to run and how.
pub struct TrialPlan<'a> {
    pub host: Party,
    pub spec: &'a TestSpec,
    /// Latest end of the trial before it is aborted.
    pub hard_deadline: Option<HardDeadline>,
    /// Wait for the peer's `done` report (the client does).
    pub wait_for_peer_report: bool,
    /// Polled every 100 ms: why to stop now (Ctrl-C, SIGTERM), once that
    /// happened; the peer is told with the reason.
    pub interrupted: &'a (dyn Fn() -> Option<String> + Sync),
    pub on_interval: Option<IntervalCallback>,
    pub on_progress: Option<ProgressCallback>,
    /// Asked once when the peer's report is [`STALL_CHECK_AFTER`] late
    /// (the client's): what stalls the test, when it can tell (a path-MTU
    /// black hole), which fails the trial at once with
    /// [`TrialError::PathBlackHole`] rather than at the hard deadline.
    pub stall_check: Option<&'a dyn Fn() -> Option<String>>,
}

/// How long past a trial's expected end the client waits for the agent's
/// report before it asks what stalls the test: the report of a healthy
/// test comes within a second of the end (the agent's side ends, samples
/// its counters and sends it), also on a busy 2-core machine.
pub const STALL_CHECK_AFTER: Duration = Duration::from_secs(2);

/// The local report and, when asked for, the peer's.
pub struct TrialOutcome {
    pub local: SideReport,
    pub peer: Option<SideReport>,
    /// Set when this side or the peer cut the trial short.
    pub interruption: Option<Interruption>,
}

/// When a trial is aborted as hung: `at`, which is `grace` past its
/// expected end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HardDeadline {
    pub at: Instant,
    pub grace: Duration,
}

/// Runs one side of a trial to its end while serving the control connection.
pub fn run_side(
    side: Box<dyn Side>,
    mut plan: TrialPlan,
    channel: &mut Channel,
    sampler: &dyn CpuSampler,
) -> Result<TrialOutcome, TrialError> {
    let spec = plan.spec;
    let stop = Arc::new(AtomicBool::new(false));
    let abort = side.aborter();
    let mut probes = Probes::start(
        channel.stream().local_addr().ok().map(|a| a.ip()),
        Some(std::os::fd::AsRawFd::as_raw_fd(channel.stream())),
        spec,
        plan.host,
        sampler,
    )?;
    let control = run_control(spec, plan.host, Arc::clone(&stop), &mut plan);
    let start = control.start;
    let panicked = Arc::new(AtomicBool::new(false));
    let worker = spawn_side(side, control, Arc::clone(&panicked))?;
    let watched = watch_peer(&worker, &panicked, &plan, channel, &stop, &mut probes.threads);
    if let Some(failure) = watched.failure {
        stop.store(true, Ordering::Relaxed);
        abort();
        let _ = worker.join();
        return Err(failure);
    }
    let outcome = worker
        .join()
        .map_err(|payload| TrialError::SidePanicked(panic_message(payload)))?;
    let seconds = start.elapsed().as_secs_f64();
    let local = probes.finish(plan.host, outcome, seconds, sampler)?;
    Ok(TrialOutcome {
        local,
        peer: watched.peer_report,
        interruption: watched.stopped_by.map(|(by, reason)| Interruption {
            by,
            reason,
            elapsed_seconds: seconds,
            planned_seconds: spec.bytes.is_none().then(|| spec.expected_seconds()),
        }),
    })
}

/// Runs a side that has no peer of its own on a control connection (a
/// group's sender, whose receivers each have theirs): the same sampling
/// and the same control of the side as [`run_side`], stopped when
/// `plan.interrupted` says so or at its hard deadline. `local` is the
/// address its traffic leaves from.
pub fn run_alone(
    side: Box<dyn Side>,
    mut plan: TrialPlan,
    local: Option<std::net::IpAddr>,
    sampler: &dyn CpuSampler,
) -> Result<TrialOutcome, TrialError> {
    let spec = plan.spec;
    let stop = Arc::new(AtomicBool::new(false));
    let abort = side.aborter();
    let mut probes = Probes::start(local, None, spec, plan.host, sampler)?;
    let control = run_control(spec, plan.host, Arc::clone(&stop), &mut plan);
    let start = control.start;
    let panicked = Arc::new(AtomicBool::new(false));
    let worker = spawn_side(side, control, Arc::clone(&panicked))?;
    let mut stopped_by = None;
    while !worker.is_finished() {
        probes.threads.sample();
        if stopped_by.is_none() {
            if let Some(reason) = (plan.interrupted)() {
                stop.store(true, Ordering::Relaxed);
                stopped_by = Some((plan.host, reason));
            }
        }
        if let Some(deadline) = plan.hard_deadline.filter(|d| Instant::now() > d.at) {
            stop.store(true, Ordering::Relaxed);
            abort();
            let _ = worker.join();
            return Err(TrialError::Hung(deadline.grace.as_secs_f64()));
        }
        thread::sleep(Duration::from_millis(20));
    }
    let outcome = worker
        .join()
        .map_err(|payload| TrialError::SidePanicked(panic_message(payload)))?;
    let seconds = start.elapsed().as_secs_f64();
    let local = probes.finish(plan.host, outcome, seconds, sampler)?;
    Ok(TrialOutcome {
        local,
        peer: None,
        interruption: stopped_by.map(|(by, reason)| Interruption {
            by,
            reason,
            elapsed_seconds: seconds,
            planned_seconds: spec.bytes.is_none().then(|| spec.expected_seconds()),
        }),
    })
}

/// The side's control of a trial of `spec` on `host`: its clock starts now.
fn run_control(spec: &TestSpec, host: Party, stop: Arc<AtomicBool>, plan: &mut TrialPlan) -> RunControl {
    RunControl {
        stop,
        start: Instant::now(),
        omit: Duration::from_secs_f64(spec.omit_seconds),
        duration: spec
            .bytes
            .is_none()
            .then(|| Duration::from_secs_f64(spec.duration_seconds)),
        interval: Duration::from_secs_f64(spec.interval_seconds),
        cpus: match host {
            Party::Client => spec.client.cpus.clone(),
            Party::Agent => spec.agent.cpus.clone(),
        },
        on_interval: plan.on_interval.take(),
        on_progress: plan.on_progress.take(),
    }
}

/// Starts the side on its own thread; `panicked` is set if it panics.
fn spawn_side(
    side: Box<dyn Side>,
    control: RunControl,
    panicked: Arc<AtomicBool>,
) -> Result<thread::JoinHandle<SideOutcome>, TrialError> {
    /// Sets its flag when dropped by a panic's unwinding.
    struct OnPanic(Arc<AtomicBool>);
    impl Drop for OnPanic {
        fn drop(&mut self) {
            if thread::panicking() {
                self.0.store(true, Ordering::Relaxed);
            }
        }
    }
    thread::Builder::new()
        .name("side".into())
        .spawn(move || {
            let _flag = OnPanic(panicked);
            side.run(&control)
        })
        .map_err(|e| TrialError::Cpu(std::io::Error::other(format!("could not start the side thread: {e}"))))
}

/// How the control connection went while the side ran.
#[derive(Default)]
struct Watched {
    peer_report: Option<SideReport>,
    /// Who stopped the trial early, and why.
    stopped_by: Option<(Party, String)>,
    failure: Option<TrialError>,
}

/// Serves the control connection until the side has finished (and, when
/// the plan asks, the peer has reported), or the trial fails: the peer
/// may ask to stop, report, fail, vanish, or the hard deadline may pass.
fn watch_peer(
    worker: &thread::JoinHandle<SideOutcome>,
    panicked: &AtomicBool,
    plan: &TrialPlan,
    channel: &mut Channel,
    stop: &AtomicBool,
    threads: &mut ThreadTracker,
) -> Watched {
    let peer = plan.host.other().as_str();
    let mut watched = Watched::default();
    let mut stop_sent = false;
    // When to ask what stalls the test, if its peer's report is late.
    let mut stall_check_at = plan
        .stall_check
        .and(plan.hard_deadline)
        .map(|d| d.at - d.grace + STALL_CHECK_AFTER);
    let fail = |mut watched: Watched, failure: TrialError| {
        watched.failure = Some(failure);
        watched
    };
    loop {
        threads.sample();
        // A side that panicked fails the trial at once (its join says
        // why): the peer's report, which the client would wait for, may
        // never come, since the peer waits for this side's data.
        if worker.is_finished() && panicked.load(Ordering::Relaxed) {
            return watched;
        }
        if worker.is_finished() && plan.wait_for_peer_report && watched.peer_report.is_some() {
            return watched;
        }
        if worker.is_finished() && !plan.wait_for_peer_report {
            // A receiving side ends when its data connections close: at
            // the end of the test, or because the peer vanished. Only a
            // peer still on the control connection ended the test; one
            // that has closed it lost the test. Unread messages first.
            match channel.peer_state() {
                PeerState::Quiet => return watched,
                PeerState::Unread => {}
                PeerState::Closed => {
                    let source = ProtocolError::Closed("the end of the test".into());
                    return fail(watched, TrialError::PeerLost { peer, source });
                }
            }
        }
        // A side that already finished is not cut short by a late signal.
        let reason = (!stop_sent && !worker.is_finished())
            .then(|| (plan.interrupted)())
            .flatten();
        if let Some(reason) = reason {
            stop.store(true, Ordering::Relaxed);
            stop_sent = true;
            watched.stopped_by.get_or_insert((plan.host, reason.clone()));
            if let Err(source) = channel.send(&Message::Stop { reason: Some(reason) }) {
                return fail(watched, TrialError::PeerLost { peer, source });
            }
        }
        if let Some(deadline) = plan.hard_deadline.filter(|d| Instant::now() > d.at) {
            return fail(watched, TrialError::Hung(deadline.grace.as_secs_f64()));
        }
        if watched.peer_report.is_none() && stall_check_at.is_some_and(|at| Instant::now() > at) {
            stall_check_at = None;
            if let Some(why) = plan.stall_check.and_then(|check| check()) {
                return fail(watched, TrialError::PathBlackHole(why));
            }
        }
        if watched.peer_report.is_some() {
            thread::sleep(Duration::from_millis(20));
            continue;
        }
        match channel.recv(Duration::from_millis(100), "the peer's report") {
            Ok(Message::Stop { reason }) => {
                stop.store(true, Ordering::Relaxed);
                if !worker.is_finished() {
                    let reason = reason.unwrap_or_else(|| format!("the {peer} asked to stop"));
                    watched.stopped_by.get_or_insert((plan.host.other(), reason));
                }
            }
            Ok(Message::Done { report }) if plan.wait_for_peer_report => watched.peer_report = Some(report),
            Ok(Message::Error { message }) => return fail(watched, TrialError::PeerFailed { peer, message }),
            Ok(other) => {
                let got = other.kind().to_string();
                return fail(watched, TrialError::Unexpected { peer, got });
            }
            Err(ProtocolError::Timeout { .. }) => {}
            Err(source) => return fail(watched, TrialError::PeerLost { peer, source }),
        }
    }
}

/// What this side samples around the run: CPU, its interface's and links'
/// counters, and the scheduling of its threads.
struct Probes {
    counter_probe: CounterProbe,
    counters_before: crate::probe::counters::CounterSnapshot,
    links: LinkProbes,
    threads: ThreadTracker,
    /// The napi threads that carry this side's packet work, when threaded:
    /// in a lab, all those its host's receive work runs in; elsewhere, the
    /// one receiving for the control connection.
    packet_work: Option<crate::probe::sched::KernelThreads>,
    /// `packet_work` is all of a lab host's: its own work can be told.
    host_work: bool,
    /// When the packet work began to be followed.
    since: std::time::Instant,
    cpu_before: crate::probe::cpu::CpuSnapshot,
}

impl Probes {
    /// Starts sampling for a side whose traffic leaves by the interface
    /// holding `local`; `control` is the control connection, whose
    /// receiving napi thread is the test's outside a lab.
    fn start(
        local: Option<std::net::IpAddr>,
        control: Option<std::os::fd::RawFd>,
        spec: &TestSpec,
        host: Party,
        sampler: &dyn CpuSampler,
    ) -> Result<Probes, TrialError> {
        let counter_probe = CounterProbe::for_local_address(local);
        let counters_before = counter_probe.snapshot();
        let links = LinkProbes::new(spec, host);
        let threads = ThreadTracker::start();
        // The control connection arrives over the test's link: the NAPI
        // that delivers it delivers the test's packets too.
        let lab_threads = crate::lab_env::packet_work_threads().unwrap_or_default();
        let host_work = !lab_threads.is_empty();
        let packet_work = match (host_work, control) {
            (true, _) => crate::probe::sched::KernelThreads::of(&lab_threads),
            (false, Some(fd)) => crate::probe::sched::KernelThreads::receiving_for(fd),
            (false, None) => None,
        };
        let cpu_before = sampler.sample().map_err(TrialError::Cpu)?;
        Ok(Probes {
            counter_probe,
            counters_before,
            links,
            threads,
            packet_work,
            host_work,
            since: std::time::Instant::now(),
            cpu_before,
        })
    }

    /// This side's report: its streams with what was sampled over the
    /// `seconds` the side ran.
    fn finish(
        self,
        host: Party,
        outcome: SideOutcome,
        seconds: f64,
        sampler: &dyn CpuSampler,
    ) -> Result<SideReport, TrialError> {
        let after = sampler.sample().map_err(TrialError::Cpu)?;
        let mut counters = self
            .counter_probe
            .delta(&self.counters_before, &self.counter_probe.snapshot());
        counters.scheduling = self.threads.report();
        counters.packet_work = self.packet_work.as_ref().and_then(|t| t.report());
        let bytes_moved = outcome.streams.iter().map(|s| s.bytes + s.warmup_bytes).sum();
        let before = &self.cpu_before;
        let mut cpu = cpu_report(
            before,
            &after,
            sampler.ticks_per_second(),
            seconds,
            outcome.process,
            bytes_moved,
        );
        // A lab host's own work: its test threads and the napi threads
        // that carry its packets, each timed exactly by the kernel.
        if let Some(work) = counters.packet_work.as_ref().filter(|_| self.host_work) {
            cpu.add_host_work(work.run_seconds, self.since.elapsed().as_secs_f64());
        }
        // Request/response sides count transactions (warm-up included, like bytes_moved).
        if outcome.transactions > 0 {
            let busy_us = busy_seconds(before, &after, sampler.ticks_per_second()) * 1e6;
            cpu.service_demand_us_per_transaction = Some(busy_us / outcome.transactions as f64);
        }
        Ok(SideReport {
            host,
            streams: outcome.streams,
            cpu,
            counters: Some(counters),
            overlapped_tests: 0,
            links: self.links.finish(),
        })
    }
}

/// This side's end of every link of a spec, and its interface's counters
/// from the start of the trial.
struct LinkProbes(Vec<(LinkEnd, CounterProbe, crate::probe::counters::CounterSnapshot)>);

impl LinkProbes {
    fn new(spec: &TestSpec, host: Party) -> LinkProbes {
        LinkProbes(
            spec.links
                .iter()
                .map(|link| {
                    let address = match host {
                        Party::Client => link.client,
                        Party::Agent => link.agent,
                    };
                    let end = crate::probe::nic::link_end(address);
                    let probe = CounterProbe {
                        interface: end.interface.clone(),
                        ..CounterProbe::default()
                    };
                    let before = probe.snapshot();
                    (end, probe, before)
                })
                .collect(),
        )
    }

    fn finish(self) -> Vec<LinkEnd> {
        self.0
            .into_iter()
            .map(|(mut end, probe, before)| {
                end.nic = probe.delta(&before, &probe.snapshot()).nic;
                end
            })
            .collect()
    }
}

/// When a trial of `spec` must have ended, with [`GRACE`]; for a
/// byte-count test, `max_seconds` bounds it.
pub fn hard_deadline(spec: &TestSpec, start: Instant, max_seconds: Option<f64>) -> Option<HardDeadline> {
    hard_deadline_with(spec, start, max_seconds, GRACE)
}

/// [`hard_deadline`] with a grace of the caller's (the agent's is its test
/// slot's).
pub fn hard_deadline_with(
    spec: &TestSpec,
    start: Instant,
    max_seconds: Option<f64>,
    grace: Duration,
) -> Option<HardDeadline> {
    let expected = if spec.bytes.is_some() {
        max_seconds?
    } else {
        spec.expected_seconds()
    };
    Some(HardDeadline {
        at: start + Duration::from_secs_f64(expected) + grace,
        grace,
    })
}

#[cfg(test)]
mod tests {
    use std::net::{TcpListener, TcpStream};

    use super::*;
    use crate::model::spec::tests::spec;
    use crate::probe::cpu::ProcStat;
    use crate::protocol::channel::PeerState;
    use crate::workload::Aborter;

    /// A side that ends at once, as a receiving side does when its data
    /// connections close.
    struct EndsAtOnce;

    impl Side for EndsAtOnce {
        fn run(self: Box<Self>, _: &RunControl) -> SideOutcome {
            SideOutcome::default()
        }
        fn aborter(&self) -> Aborter {
            Arc::new(|| {})
        }
    }

    /// The agent's and the client's ends of a control connection.
    fn control_pair() -> (Channel, Channel) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let agent = listener.accept().unwrap().0;
        (Channel::new(agent, 1 << 20), Channel::new(client, 1 << 20))
    }

    fn agent_plan(spec: &TestSpec) -> TrialPlan<'_> {
        TrialPlan {
            host: Party::Agent,
            spec,
            hard_deadline: None,
            wait_for_peer_report: false,
            interrupted: &|| None,
            on_interval: None,
            stall_check: None,
            on_progress: None,
        }
    }

    #[test]
    fn a_side_ended_by_a_vanished_client_is_lost_not_done() {
        let spec = spec("tcp");
        // Which the agent saw first, the side's end or the closed control
        // connection, decided the result before: every try is a chance
        // for the side's end to win.
        for attempt in 0..50 {
            let (mut agent, client) = control_pair();
            drop(client);
            let closed = Instant::now() + Duration::from_secs(10);
            while agent.peer_state() != PeerState::Closed && Instant::now() < closed {
                thread::yield_now();
            }
            match run_side(Box::new(EndsAtOnce), agent_plan(&spec), &mut agent, &ProcStat) {
                Err(TrialError::PeerLost { peer: "client", .. }) => {}
                Err(e) => panic!("try {attempt}: expected the client lost, got: {e}"),
                Ok(_) => panic!("try {attempt}: a test whose client vanished was done"),
            }
        }
    }

    #[test]
    fn a_side_that_ends_with_its_client_still_there_is_done() {
        let spec = spec("tcp");
        let (mut agent, mut client) = control_pair();
        // A message still unread (read before or after the side ended:
        // either is a normal end) is read before the end is judged.
        client.send(&Message::Stop { reason: None }).unwrap();
        let outcome = run_side(Box::new(EndsAtOnce), agent_plan(&spec), &mut agent, &ProcStat);
        assert!(outcome.is_ok(), "a test whose client is still there was not done");
        assert_eq!(agent.peer_state(), PeerState::Quiet);
    }

    /// A side whose thread panics.
    struct Panics;

    impl Side for Panics {
        fn run(self: Box<Self>, _: &RunControl) -> SideOutcome {
            panic!("attempt to multiply with overflow")
        }
        fn aborter(&self) -> Aborter {
            Arc::new(|| {})
        }
    }

    #[test]
    fn a_client_whose_side_panics_fails_without_waiting_for_the_agents_report() {
        let spec = spec("tcp");
        // The agent says nothing and stays: before, the client waited for
        // its report forever (a byte-count test has no hard deadline).
        let (_agent, mut client) = control_pair();
        let plan = TrialPlan {
            host: Party::Client,
            wait_for_peer_report: true,
            ..agent_plan(&spec)
        };
        match run_side(Box::new(Panics), plan, &mut client, &ProcStat) {
            Err(TrialError::SidePanicked(why)) => assert!(why.contains("multiply with overflow"), "{why}"),
            Err(e) => panic!("expected the side's panic, got: {e}"),
            Ok(_) => panic!("a side that panicked was done"),
        }
    }

    #[test]
    fn a_panic_in_the_side_thread_surfaces_with_its_message() {
        let worker = thread::spawn(|| -> u32 { panic!("stream 3 lost its socket") });
        let err = worker
            .join()
            .map_err(|payload| TrialError::SidePanicked(panic_message(payload)))
            .unwrap_err();
        assert!(err.to_string().contains("stream 3 lost its socket"), "{err}");
        let formatted = thread::spawn(|| -> u32 { panic!("trial {} of {}", 2, 3) })
            .join()
            .unwrap_err();
        assert_eq!(panic_message(formatted), "trial 2 of 3");
    }
}
