//! Where an end's queued bytes sit, sampled every probe interval: the
//! sending sockets' unsent and unacknowledged bytes (TCP_INFO), the egress
//! interface's root qdisc backlog (rtnetlink), the NIC's byte queue limit
//! inflight (sysfs), and in a lab the router's qdiscs, read from a thread
//! that entered the router's network namespace. The same loop raises and
//! lowers the load senders' hold flags at the phase boundaries, and reads
//! the load streams' smoothed RTT (the draft's "self" probe).

use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use socket2::Socket;

use super::probes::Clock;
use super::{LoadedParams, PhaseName};
use crate::model::{Flow, Party};
use crate::probe::cpu::{cpu_report, CpuSampler, CpuSnapshot, ProcStat};
use crate::probe::netns::{self, ifindex_of};
use crate::probe::qdisc;

/// One sample of an end's queues: at (µs from the start), the mean
/// smoothed RTT of the sockets sending in this phase (µs; null while
/// none sends), their unsent bytes, their unacknowledged bytes (unacked
/// segments x MSS), the egress qdisc's backlog in bytes and packets, and
/// the NIC's BQL inflight bytes (null where there is none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueSample(
    pub u64,
    pub Option<u64>,
    pub u64,
    pub u64,
    pub Option<u64>,
    pub Option<u64>,
    pub Option<u64>,
);

/// One sample of a lab router's qdiscs: at (µs), the backlog in bytes of
/// the queue toward the client (download) and toward the agent (upload).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RouterSample(pub u64, pub Option<u64>, pub Option<u64>);

/// A router on the path whose queues can be read: its network namespace
/// and the interfaces whose egress queues hold the traffic toward the
/// client and toward the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Router {
    /// The lab it routes.
    pub name: String,
    pub netns: String,
    pub toward_client: String,
    pub toward_agent: String,
    /// The shaping rates of those links, when they are shaped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toward_client_bits_per_second: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toward_agent_bits_per_second: Option<u64>,
}

/// The router between this end and its peer, when this end is the client
/// of a test in a lab (`nicbench lab exec` says where its path is shaped).
/// The client alone reads it: one end sees both of its queues.
pub fn router_toward_peer(host: Party, peer: Option<IpAddr>) -> Option<Router> {
    if host != Party::Client {
        return None;
    }
    let path = crate::lab_env::path_from_here(peer?)?;
    Some(Router {
        name: path.lab,
        netns: path.router_netns,
        toward_client: path.toward_me.iface,
        toward_agent: path.toward_peer.iface,
        toward_client_bits_per_second: path.toward_me.rate_bits_per_second,
        toward_agent_bits_per_second: path.toward_peer.rate_bits_per_second,
    })
}

/// Everything an end's sampler recorded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    pub queues: Vec<QueueSample>,
    /// This host's CPU over each load phase, from /proc/stat read at the
    /// phase's boundaries.
    pub phase_cpu: Vec<PhaseCpu>,
    pub router: Vec<RouterSample>,
    pub interface: Option<String>,
    pub router_facts: Option<Router>,
}

/// What the sampler watches and steers.
pub struct Sampler {
    pub params: LoadedParams,
    /// This end's sending load sockets (clones), with their direction.
    pub watched: Vec<(Flow, Socket)>,
    /// The senders' hold flags, by direction.
    pub holds: Vec<(Flow, Arc<AtomicBool>)>,
    /// The egress interface toward the peer.
    pub interface: Option<String>,
    pub router: Option<Router>,
}

impl Sampler {
    /// Samples every interval until the test is over.
    pub fn run(self, clock: &Clock) -> Samples {
        std::thread::scope(|scope| {
            let router = self
                .router
                .as_ref()
                .map(|r| scope.spawn(move || sample_router(r, clock)));
            let (queues, phase_cpu) = self.sample_local(clock);
            Samples {
                queues,
                phase_cpu,
                router: router.and_then(|h| h.join().ok()).unwrap_or_default(),
                interface: self.interface.clone(),
                router_facts: self.router.clone(),
            }
        })
    }

    fn sample_local(&self, clock: &Clock) -> (Vec<QueueSample>, Vec<PhaseCpu>) {
        let mut egress = self.interface.as_deref().map(Egress::of);
        let mut samples = Vec::new();
        let mut cpu = PhaseBoundaries::default();
        let mut next = clock.first_slot(1);
        while clock.tick(&mut next) {
            let now = Instant::now();
            let phase = self
                .params
                .phase_at(now.saturating_duration_since(clock.start).as_secs_f64());
            cpu.at(phase, now);
            for (flow, hold) in &self.holds {
                hold.store(!phase.is_some_and(|p| p.loads(*flow)), Ordering::Relaxed);
            }
            let (mut rtt_sum, mut senders, mut notsent, mut unacked) = (0u64, 0u64, 0u64, 0u64);
            for (flow, socket) in &self.watched {
                let Some((info, _)) = crate::probe::tcpinfo::raw_tcp_info(socket) else {
                    continue;
                };
                notsent += u64::from(info.tcpi_notsent_bytes);
                unacked += u64::from(info.tcpi_unacked) * u64::from(info.tcpi_snd_mss);
                if phase.is_some_and(|p| p.loads(*flow)) {
                    rtt_sum += u64::from(info.tcpi_rtt);
                    senders += 1;
                }
            }
            let (backlog, bql) = egress.as_mut().map_or((None, None), |e| e.sample());
            samples.push(QueueSample(
                clock.micros(now),
                (senders > 0).then(|| rtt_sum / senders),
                notsent,
                unacked,
                backlog.map(|b| b.bytes),
                backlog.map(|b| b.packets),
                bql,
            ));
        }
        cpu.at(None, Instant::now());
        (samples, cpu.phases)
    }
}

/// An end's CPU over one load phase: all its cores, from /proc/stat read
/// at the phase's first and last sample (as the run's CPU lines, over the
/// phase alone).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PhaseCpu {
    pub phase: PhaseName,
    /// The wall time between the two readings.
    pub seconds: f64,
    pub utilization_percent: f64,
    pub user_percent: f64,
    pub system_percent: f64,
    pub softirq_percent: f64,
}

/// Reads /proc/stat where the phase changes and keeps each load phase's
/// CPU; a failed reading leaves that phase out.
#[derive(Default)]
struct PhaseBoundaries {
    /// The phase running since the last reading, and that reading.
    last: Option<(Option<PhaseName>, Instant, CpuSnapshot)>,
    phases: Vec<PhaseCpu>,
}

impl PhaseBoundaries {
    /// The sampler is in `phase` at `now`: reads the CPU when it changed.
    fn at(&mut self, phase: Option<PhaseName>, now: Instant) {
        if self.last.as_ref().is_some_and(|(p, _, _)| *p == phase) {
            return;
        }
        let snapshot = ProcStat.sample().ok();
        if let (Some((Some(ran), since, before)), Some(after)) = (self.last.take(), snapshot.as_ref()) {
            self.phases
                .push(phase_cpu(ran, before, after, now.duration_since(since).as_secs_f64()));
        }
        self.last = snapshot.map(|s| (phase, now, s));
    }
}

fn phase_cpu(phase: PhaseName, before: CpuSnapshot, after: &CpuSnapshot, seconds: f64) -> PhaseCpu {
    let report = cpu_report(
        &before,
        after,
        ProcStat.ticks_per_second(),
        seconds,
        Default::default(),
        0,
    );
    PhaseCpu {
        phase,
        seconds,
        utilization_percent: report.utilization_percent,
        user_percent: report.user_percent,
        system_percent: report.system_percent,
        softirq_percent: report.softirq_percent,
    }
}

/// The egress interface's queues: its root qdisc and its BQL files.
struct Egress {
    ifindex: Option<i32>,
    bql: Vec<PathBuf>,
}

impl Egress {
    fn of(name: &str) -> Egress {
        let queues = PathBuf::from("/sys/class/net").join(name).join("queues");
        let bql = std::fs::read_dir(queues)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().starts_with("tx-"))
                    .map(|e| e.path().join("byte_queue_limits/inflight"))
                    .filter(|p| p.exists())
                    .collect()
            })
            .unwrap_or_default();
        Egress {
            ifindex: ifindex_of(name),
            bql,
        }
    }

    /// The qdisc backlog and BQL inflight now; a source that fails once is
    /// not asked again.
    fn sample(&mut self) -> (Option<qdisc::Backlog>, Option<u64>) {
        let backlog = self.ifindex.and_then(qdisc::root_backlog);
        if backlog.is_none() {
            self.ifindex = None;
        }
        let inflight: Option<u64> = (!self.bql.is_empty())
            .then(|| {
                self.bql
                    .iter()
                    .map(|p| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok())
                    .sum()
            })
            .flatten();
        if inflight.is_none() {
            self.bql.clear();
        }
        (backlog, inflight)
    }
}

/// Enters the router's network namespace on this thread (it is the
/// sampler's own, ended with the test) and samples its two queues.
fn sample_router(router: &Router, clock: &Clock) -> Vec<RouterSample> {
    if let Err(e) = netns::enter(&router.netns) {
        log::warn!(
            "cannot read the queues of router {} (network namespace {}): {e}",
            router.name,
            router.netns
        );
        return Vec::new();
    }
    let (client, agent) = (ifindex_of(&router.toward_client), ifindex_of(&router.toward_agent));
    let mut samples = Vec::new();
    let mut next = clock.first_slot(3);
    while clock.tick(&mut next) {
        let now = Instant::now();
        let backlog = |i: Option<i32>| i.and_then(qdisc::root_backlog).map(|b| b.bytes);
        samples.push(RouterSample(clock.micros(now), backlog(client), backlog(agent)));
    }
    samples
}

/// Sets TCP_NOTSENT_LOWAT: the socket holds at most this many unsent
/// bytes before it stops accepting writes.
pub fn set_notsent_lowat(socket: &Socket, bytes: u32) -> std::io::Result<()> {
    // SAFETY: a valid int option and its size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            (&bytes as *const u32).cast(),
            std::mem::size_of::<u32>() as libc::socklen_t,
        )
    };
    match rc {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}
