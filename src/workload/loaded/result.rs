//! What a `loaded` test yields. Each end reports its part ([`LoadedEnd`]:
//! the client its probes, both ends their queue samples) on its first
//! stream end; [`summarize`] turns both into the figures of each phase
//! ([`LoadedResult`] at `sum.loaded`): throughput per direction once the
//! phase is stable, round-trip percentiles, the delay added to the idle
//! one, responsiveness (RPM), probe loss, the queues and the verdict
//! naming the one that explains the added delay ([`verdict`]). The
//! verdict's sentence is part of the result (the document keeps it), so it
//! is written here; how the results read, to the registry and as text, is
//! [`super::text`], which stands on this file.
//!
//! The verdict's rule: of the queues probes wait in (qdiscs, NIC queues,
//! a lab router's), the largest ones as time at their direction's
//! measured rate (as many as hold 90% of the added delay: a bidirectional
//! phase fills one each way) explain the added delay when they hold at
//! least half of it; when none does, the delay builds beyond this host's queues. A
//! sender's socket holds only its own stream's data, which probes do not
//! wait behind; when it holds more time than the added delay, the verdict
//! says so and points at `--notsent-lowat`.

use serde::{Deserialize, Serialize};

use super::probes::{Probes, TcpProbe, UdpProbe};
use super::queues::{PhaseCpu, QueueSample, Router, RouterSample, Samples};
use super::{LoadedParams, PhaseName, KEY};
use crate::model::{Flow, Party, StreamEnd, TrialResult};
use crate::units::Rate;

/// What one end measured besides its streams.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadedEnd {
    pub party: Party,
    /// The schedule, so that a document explains itself.
    pub idle_seconds: f64,
    pub phase_seconds: f64,
    pub phases: Vec<PhaseName>,
    pub probe_interval_seconds: f64,
    /// Client: every UDP probe (see [`UdpProbe`] for the columns).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub udp_probes: Vec<UdpProbe>,
    /// Client: every TCP request/response on the idle connection.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tcp_probes: Vec<TcpProbe>,
    #[serde(default)]
    pub reordered_probes: u64,
    /// Agent: probes it answered.
    #[serde(default)]
    pub answered_probes: u64,
    /// This end's queues every probe interval ([`QueueSample`]).
    #[serde(default)]
    pub queues: Vec<QueueSample>,
    /// The egress interface toward the peer whose queues were sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router: Option<Router>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub router_queues: Vec<RouterSample>,
    /// This host's CPU over each load phase (absent in documents of
    /// builds before it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phase_cpu: Vec<PhaseCpu>,
}

impl LoadedEnd {
    pub fn new(party: Party, params: &LoadedParams, samples: Samples, probes: Probes) -> LoadedEnd {
        LoadedEnd {
            party,
            idle_seconds: params.idle_seconds,
            phase_seconds: params.phase_seconds,
            phases: params.phases.clone(),
            probe_interval_seconds: params.probe_interval_seconds,
            udp_probes: probes.udp,
            tcp_probes: probes.tcp,
            reordered_probes: probes.reordered,
            answered_probes: probes.answered,
            queues: samples.queues,
            interface: samples.interface,
            router: samples.router_facts,
            router_queues: samples.router,
            phase_cpu: samples.phase_cpu,
        }
    }

    fn schedule(&self) -> LoadedParams {
        LoadedParams {
            phases: self.phases.clone(),
            idle_seconds: self.idle_seconds,
            phase_seconds: self.phase_seconds,
            probe_interval_seconds: self.probe_interval_seconds,
            ..LoadedParams::default()
        }
    }
}

/// The idle phase's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IdleFigures {
    pub rtt_p50_seconds: Option<f64>,
    pub rtt_p90_seconds: Option<f64>,
    pub rtt_p99_seconds: Option<f64>,
    pub rtt_max_seconds: Option<f64>,
    /// Trimmed mean of the TCP probes' round trips.
    pub foreign_rtt_seconds: Option<f64>,
    pub rpm: Option<f64>,
    pub probe_loss_percent: Option<f64>,
    /// The agent's wall clock minus the client's: the one-way delays stand
    /// on this estimate (docs/CLOCKS.md).
    pub clock_offset_seconds: Option<f64>,
    /// The true offset lies within `clock_offset_seconds` plus or minus
    /// this anywhere in the test, however the path's delay splits between
    /// its directions; so does each one-way delay. Absent in documents of
    /// builds before it, whose offset assumed a symmetric path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_bound_seconds: Option<f64>,
    /// Where the offset comes from: `control_connection` (the clock
    /// exchanges before and after the trial) or `idle_probes` (the idle
    /// phase's probes as exchanges), whichever bounds it more tightly;
    /// `one_clock` (0 exactly: both ends read one kernel's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_from: Option<String>,
}

/// A queue's mean backlog over a phase's figures, and what it is as time
/// at the rate of the traffic it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueFigure {
    /// Which queue, in words: `agent qdisc (eth0)`, `router r1 toward the client`.
    pub name: String,
    /// `client`, `agent` or `router`.
    pub at: String,
    /// `qdisc`, `bql`, `socket_unsent`, `socket_unacked`.
    pub kind: String,
    pub bytes: f64,
    pub seconds: Option<f64>,
    /// Whether probes wait in it (a socket's bytes delay only its own data).
    pub delays_probes: bool,
}

/// The figures of one load phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseFigures {
    pub name: PhaseName,
    pub start_seconds: f64,
    pub seconds: f64,
    /// When the load's throughput became stable, from the phase's start
    /// (null: never; the figures then cover the phase's second half).
    pub stable_after_seconds: Option<f64>,
    /// Receiver throughput, both directions summed, and each.
    pub receiver_bits_per_second: f64,
    pub download_bits_per_second: f64,
    pub upload_bits_per_second: f64,
    pub rtt_p50_seconds: Option<f64>,
    pub rtt_p90_seconds: Option<f64>,
    pub rtt_p99_seconds: Option<f64>,
    pub rtt_max_seconds: Option<f64>,
    pub added_p50_seconds: Option<f64>,
    pub added_p99_seconds: Option<f64>,
    /// One-way delays' medians (client to agent, agent to client), on the
    /// estimated clock offset.
    pub up_delay_p50_seconds: Option<f64>,
    pub down_delay_p50_seconds: Option<f64>,
    /// Each direction's one-way median minus its idle one: which way the
    /// added delay went. The clocks' offset cancels; what is left of its
    /// bound is the drift between the idle phase and this one, within
    /// the idle figures' `clock_offset_bound_seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_up_p50_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_down_p50_seconds: Option<f64>,
    pub foreign_rtt_seconds: Option<f64>,
    pub self_rtt_seconds: Option<f64>,
    pub rpm: Option<f64>,
    pub probe_loss_percent: Option<f64>,
    pub queues: Vec<QueueFigure>,
    /// Which queue explains the added delay, in one line.
    pub verdict: String,
    /// Both hosts' CPU over the phase (absent in documents of builds
    /// before it).
    #[serde(default, skip_serializing_if = "BothEnds::is_empty")]
    pub cpu: BothEnds,
}

/// A phase's CPU on each host: all cores over the whole phase (from
/// /proc/stat at its boundaries, not only once stable).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BothEnds {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<CpuShare>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<CpuShare>,
}

impl BothEnds {
    pub fn is_empty(&self) -> bool {
        self.client.is_none() && self.agent.is_none()
    }
}

/// One host's CPU over a phase, as the run's CPU lines give it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuShare {
    pub seconds: f64,
    pub utilization_percent: f64,
    pub user_percent: f64,
    pub system_percent: f64,
    pub softirq_percent: f64,
}

impl CpuShare {
    fn of(end: Option<&LoadedEnd>, phase: PhaseName) -> Option<CpuShare> {
        let c = end?.phase_cpu.iter().find(|c| c.phase == phase)?;
        Some(CpuShare {
            seconds: c.seconds,
            utilization_percent: c.utilization_percent,
            user_percent: c.user_percent,
            system_percent: c.system_percent,
            softirq_percent: c.softirq_percent,
        })
    }
}

/// `sum.loaded`: the idle phase, each load phase, and the worst of them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadedResult {
    pub idle: IdleFigures,
    pub phases: Vec<PhaseFigures>,
    /// The lowest responsiveness of the phases.
    pub rpm: Option<f64>,
    /// The largest added delay of the phases.
    pub added_p50_seconds: Option<f64>,
    pub added_p99_seconds: Option<f64>,
    /// UDP probes answered after one sent later, over the whole test.
    pub reordered_probes: u64,
}

/// How `loaded` results read: its result traits are in [`super::text`],
/// beside the text it writes.
pub struct LoadedResults;

/// The phase that added the most delay, and what its verdict says holds
/// it: `added_delay` (side `path` when a queue beyond the ends holds it,
/// `sender` when the load's own sockets do), else `no_added_delay`.
pub fn phase_conclusion(total: &LoadedResult) -> Option<crate::model::Verdict> {
    let worst = total
        .phases
        .iter()
        .filter(|p| p.added_p50_seconds.is_some())
        .max_by(|a, b| {
            a.added_p50_seconds
                .unwrap_or(0.0)
                .total_cmp(&b.added_p50_seconds.unwrap_or(0.0))
        })?;
    let added = worst.added_p50_seconds?;
    let kind = if added < NOTHING_ADDED_SECONDS {
        "no_added_delay"
    } else {
        "added_delay"
    };
    // Which queue the phase's verdict names first.
    let first_queue = worst
        .queues
        .iter()
        .filter(|q| q.delays_probes && q.seconds.unwrap_or(0.0) > 0.0)
        .max_by(|a, b| a.seconds.unwrap_or(0.0).total_cmp(&b.seconds.unwrap_or(0.0)));
    let side = match first_queue {
        Some(q) if q.kind == "socket_unsent" => "sender",
        _ => "path",
    };
    // Which way the delay went, when the clocks can tell.
    let direction = total
        .idle
        .clock_offset_bound_seconds
        .filter(|_| kind == "added_delay")
        .and_then(|bound| {
            let name = delayed_direction(worst, bound)?;
            Some(format!(
                "; one-way, the added delay is {name}'s (client->agent {}, agent->client {}, clocks +/- {})",
                ms(worst.added_up_p50_seconds),
                ms(worst.added_down_p50_seconds),
                ms(Some(bound))
            ))
        })
        .unwrap_or_default();
    let mut v = crate::model::Verdict::new(
        kind,
        format!(
            "under load ({} phase, the most): {}{direction}",
            worst.name.as_str(),
            worst.verdict
        ),
    );
    v.side = (kind == "added_delay").then(|| side.to_string());
    Some(v)
}

/// The direction that holds a phase's added delay, when its added one-way
/// delay beats the other's by more than the clocks' bound on each (the
/// offset cancels in each direction's difference; what is left is each
/// side's bound): `client->agent (upload)` or `agent->client (download)`.
pub fn delayed_direction(p: &PhaseFigures, bound: f64) -> Option<&'static str> {
    let (up, down) = (p.added_up_p50_seconds?, p.added_down_p50_seconds?);
    let (more, less, name) = match up >= down {
        true => (up, down, "client->agent (upload)"),
        false => (down, up, "agent->client (download)"),
    };
    (more - less > 2.0 * bound && more > 2.0 * bound).then_some(name)
}

/// Below this the load added no delay worth attributing.
pub const NOTHING_ADDED_SECONDS: f64 = 0.001;

/// Seconds as milliseconds, or `-`.
pub(super) fn ms(seconds: Option<f64>) -> String {
    match seconds {
        Some(s) => format!("{:.2} ms", s * 1e3),
        None => "-".into(),
    }
}

/// Bytes as people read a queue: B, KB, MB (powers of 1000).
pub fn bytes(b: f64) -> String {
    match b {
        b if b >= 1e6 => format!("{:.1} MB", b / 1e6),
        b if b >= 1e3 => format!("{:.0} KB", b / 1e3),
        b => format!("{b:.0} B"),
    }
}

/// Which queue explains a phase's added delay, in one line.
pub fn verdict(p: &PhaseFigures, congestion: Option<&str>) -> String {
    let Some(added) = p.added_p50_seconds else {
        return "no idle and loaded round trips to compare".into();
    };
    // The load's congestion control decides how deep the queues grow (bbr
    // keeps them short, cubic fills them): the verdict says which it was.
    let added_text = match congestion {
        Some(cc) => format!("{} with {cc}", ms(Some(added))),
        None => ms(Some(added)),
    };
    let socket = p
        .queues
        .iter()
        .filter(|q| q.kind == "socket_unsent" && q.seconds.is_some())
        .max_by(|a, b| a.seconds.partial_cmp(&b.seconds).unwrap_or(std::cmp::Ordering::Equal));
    let socket_note = socket
        .filter(|q| q.seconds.unwrap_or(0.0) > added.max(0.01))
        .map(|q| {
            format!(
                "; the load's own data waits longer in the senders' sockets: {} unsent, {} at the rate: set --notsent-lowat",
                bytes(q.bytes),
                ms(q.seconds)
            )
        })
        .unwrap_or_default();
    if added < NOTHING_ADDED_SECONDS {
        return format!("added {}: the load adds no delay to speak of{socket_note}", added_text);
    }
    let held = |q: &QueueFigure| {
        format!(
            "{} holds {}, {} at {}",
            q.name,
            bytes(q.bytes),
            ms(q.seconds),
            rate_of(q)
        )
    };
    let mut waits: Vec<&QueueFigure> = p
        .queues
        .iter()
        .filter(|q| q.delays_probes && q.seconds.unwrap_or(0.0) > 0.0)
        .collect();
    waits.sort_by(|a, b| b.seconds.partial_cmp(&a.seconds).unwrap_or(std::cmp::Ordering::Equal));
    // The largest queues, as many as it takes to hold 90% of the added
    // delay (a bidirectional phase fills a queue each way).
    let mut named = Vec::new();
    let mut held_seconds = 0.0;
    for q in &waits {
        if held_seconds >= 0.9 * added || q.seconds.unwrap_or(0.0) < 0.1 * added {
            break;
        }
        held_seconds += q.seconds.unwrap_or(0.0);
        named.push(held(q));
    }
    match waits.first() {
        Some(_) if held_seconds >= 0.5 * added => {
            format!("added {}: {}{socket_note}", added_text, named.join(", and "))
        }
        Some(q) => format!(
            "added {}: the path beyond this host: no local queue explains it (the largest, {}), \
             a router or switch buffer on the path does{socket_note}",
            added_text,
            held(q)
        ),
        None => format!(
            "added {}: the path beyond this host: no local queue explains it, a router or switch buffer on the path does{socket_note}",
            added_text
        ),
    }
}

/// The rate a queue's time was reckoned at.
fn rate_of(q: &QueueFigure) -> String {
    match q.seconds {
        Some(s) if s > 0.0 => Rate(q.bytes * 8.0 / s).to_string(),
        _ => "-".into(),
    }
}

/// The clocks' offset the one-way delays stand on (agent minus client, µs)
/// and its bound over the whole test.
struct OneWayOffset {
    micros: f64,
    bound_micros: f64,
    from: &'static str,
}

impl OneWayOffset {
    /// The tighter of two estimates: the control connection's exchanges
    /// before and after the trial (at its middle, the bound widened by the
    /// drift still possible over half the test), and the idle probes taken
    /// as exchanges (estimated at the test's end, the farthest any phase is
    /// from them). None without either.
    fn of(trial: &TrialResult, idle_probes: &[&UdpProbe], total_seconds: f64) -> Option<OneWayOffset> {
        let control = trial.clock_offset.as_ref().and_then(|c| {
            let (micros, bound_micros) = crate::probe::clock::offset_within(c, total_seconds)?;
            Some(OneWayOffset {
                micros,
                bound_micros,
                from: if c.one_clock { "one_clock" } else { "control_connection" },
            })
        });
        // A probe's own readings: sent at t1 (µs from the start), received
        // by the agent `up` later on its clock, answered at once, back
        // `down` after that: the interval [-down, up] holds the offset.
        let exchanges: Vec<crate::probe::clock::Exchange> = idle_probes
            .iter()
            .filter_map(|p| {
                let sent = p.0 as i64 * 1000;
                let (up, down) = (p.2? * 1000, p.3? * 1000);
                Some(crate::probe::clock::Exchange {
                    client_sent_ns: sent,
                    agent_received_ns: sent + up,
                    agent_sent_ns: sent + up,
                    client_received_ns: sent + up + down,
                })
            })
            .collect();
        let probes = crate::probe::clock::estimate(&exchanges, 1000.0, (total_seconds * 1e9) as i64)
            .ok()
            .map(|e| OneWayOffset {
                micros: e.offset_ns / 1e3,
                bound_micros: e.bound_ns / 1e3,
                from: "idle_probes",
            });
        [control, probes]
            .into_iter()
            .flatten()
            .min_by(|a, b| a.bound_micros.total_cmp(&b.bound_micros))
    }
}

/// An end's part, found on whichever of its stream ends carries it.
fn part_of(trial: &TrialResult, party: Party) -> Option<LoadedEnd> {
    trial
        .streams
        .iter()
        .flat_map(|s| [&s.sender, &s.receiver])
        .filter_map(|e| e.extras.get::<LoadedEnd>(KEY))
        .find(|p| p.party == party)
}

/// The figures of a merged trial; None without the client's part.
pub fn summarize(trial: &TrialResult) -> Option<LoadedResult> {
    let client = part_of(trial, Party::Client)?;
    let agent = part_of(trial, Party::Agent);
    let schedule = client.schedule();
    let total_seconds = schedule.total_seconds();
    // Probes sent in the last moments may be cut off by the end, not lost.
    let countable = total_seconds - 0.3;
    let udp = |from: f64, to: f64| -> Vec<&UdpProbe> {
        client
            .udp_probes
            .iter()
            .filter(|p| (from..to).contains(&(p.0 as f64 / 1e6)))
            .collect()
    };
    let idle_probes = udp(0.0, schedule.idle_seconds);
    let idle_rtts = sorted(idle_probes.iter().filter_map(|p| p.1));
    let offset = OneWayOffset::of(trial, &idle_probes, total_seconds);
    let offset_micros = offset.as_ref().map(|o| o.micros);
    // Each direction's raw one-way median (the clocks' offset in it) over
    // the idle phase: a phase's minus these is its added delay that way.
    let idle_up_raw = signed_median(idle_probes.iter().filter_map(|p| p.2));
    let idle_down_raw = signed_median(idle_probes.iter().filter_map(|p| p.3));
    let idle_foreign = trimmed_mean(
        client
            .tcp_probes
            .iter()
            .filter(|p| in_window(p.0, 0.0, schedule.idle_seconds))
            .map(|p| p.1),
    );
    let idle = IdleFigures {
        rtt_p50_seconds: percentile(&idle_rtts, 50.0),
        rtt_p90_seconds: percentile(&idle_rtts, 90.0),
        rtt_p99_seconds: percentile(&idle_rtts, 99.0),
        rtt_max_seconds: idle_rtts.last().map(|&m| m as f64 / 1e6),
        foreign_rtt_seconds: idle_foreign,
        rpm: idle_foreign.filter(|&s| s > 0.0).map(|s| 60.0 / s),
        probe_loss_percent: loss_percent(&idle_probes, countable),
        clock_offset_seconds: offset_micros.map(|o| o / 1e6),
        clock_offset_bound_seconds: offset.as_ref().map(|o| o.bound_micros / 1e6),
        clock_offset_from: offset.as_ref().map(|o| o.from.to_string()),
    };
    let load_congestion = congestion_used(trial);
    let mut phases = Vec::new();
    for (index, &name) in schedule.phases.iter().enumerate() {
        let (start, end) = schedule.window(index);
        let rates = Rates::of(trial, start, end);
        let stable_after = rates.stable_after(start, end);
        // The figures come from the steady part of the phase, or from its
        // second half when less than half of it was steady (a phase that
        // steadied at its very end left no probes to read).
        let from = start
            + stable_after
                .filter(|&s| s <= (end - start) / 2.0)
                .unwrap_or((end - start) / 2.0);
        let probes = udp(from, end);
        let rtts = sorted(probes.iter().filter_map(|p| p.1));
        let (download, upload) = rates.mean_between(from, end);
        // Medians of the raw one-way readings, then the offset: the median
        // of a shifted set is the shifted median, and a delay the offset's
        // error makes slightly negative keeps its sign.
        let up_raw = signed_median(probes.iter().filter_map(|p| p.2));
        let down_raw = signed_median(probes.iter().filter_map(|p| p.3));
        let foreign = trimmed_mean(
            client
                .tcp_probes
                .iter()
                .filter(|p| in_window(p.0, from, end))
                .map(|p| p.1),
        );
        let self_rtt = trimmed_mean(
            [Some(&client), agent.as_ref()]
                .into_iter()
                .flatten()
                .flat_map(|p| p.queues.iter())
                .filter(|q| in_window(q.0, from, end))
                .filter_map(|q| q.1),
        );
        let rpm = match (foreign, self_rtt) {
            (Some(f), Some(s)) if f + s > 0.0 => Some(60.0 / (0.5 * f + 0.5 * s)),
            (Some(f), None) if f > 0.0 => Some(60.0 / f),
            _ => None,
        };
        let p50 = percentile(&rtts, 50.0);
        let p99 = percentile(&rtts, 99.0);
        let mut figures = PhaseFigures {
            name,
            start_seconds: start,
            seconds: end - start,
            stable_after_seconds: stable_after,
            receiver_bits_per_second: download + upload,
            download_bits_per_second: download,
            upload_bits_per_second: upload,
            rtt_p50_seconds: p50,
            rtt_p90_seconds: percentile(&rtts, 90.0),
            rtt_p99_seconds: p99,
            rtt_max_seconds: rtts.last().map(|&m| m as f64 / 1e6),
            added_p50_seconds: p50.zip(idle.rtt_p50_seconds).map(|(l, i)| l - i),
            added_p99_seconds: p99.zip(idle.rtt_p99_seconds).map(|(l, i)| l - i),
            up_delay_p50_seconds: up_raw.zip(offset_micros).map(|(u, o)| u - o / 1e6),
            down_delay_p50_seconds: down_raw.zip(offset_micros).map(|(d, o)| d + o / 1e6),
            added_up_p50_seconds: up_raw.zip(idle_up_raw).map(|(l, i)| l - i),
            added_down_p50_seconds: down_raw.zip(idle_down_raw).map(|(l, i)| l - i),
            foreign_rtt_seconds: foreign,
            self_rtt_seconds: self_rtt,
            rpm,
            probe_loss_percent: loss_percent(&probes, countable),
            queues: queue_figures(&client, agent.as_ref(), from, end, download, upload),
            verdict: String::new(),
            cpu: BothEnds {
                client: CpuShare::of(Some(&client), name),
                agent: CpuShare::of(agent.as_ref(), name),
            },
        };
        figures.verdict = verdict(&figures, load_congestion.as_deref());
        phases.push(figures);
    }
    let worst = |f: fn(&PhaseFigures) -> Option<f64>| phases.iter().filter_map(f).reduce(f64::max);
    Some(LoadedResult {
        rpm: phases.iter().filter_map(|p| p.rpm).reduce(f64::min),
        added_p50_seconds: worst(|p| p.added_p50_seconds),
        added_p99_seconds: worst(|p| p.added_p99_seconds),
        reordered_probes: client.reordered_probes,
        idle,
        phases,
    })
}

/// The congestion control the load's senders used, as their kernels
/// reported it (TCP_INFO); the distinct names joined by "/" when the ends
/// differ, None when no sender said.
fn congestion_used(trial: &TrialResult) -> Option<String> {
    let mut names: Vec<&str> = trial
        .streams
        .iter()
        .filter_map(|s| s.sender.tcp_info.as_ref())
        .map(|info| info.congestion_control.as_str())
        .filter(|name| !name.is_empty())
        .collect();
    names.sort_unstable();
    names.dedup();
    (!names.is_empty()).then(|| names.join("/"))
}

fn in_window(micros: u64, from: f64, to: f64) -> bool {
    (from..to).contains(&(micros as f64 / 1e6))
}

fn sorted(values: impl Iterator<Item = u64>) -> Vec<u64> {
    let mut v: Vec<u64> = values.collect();
    v.sort_unstable();
    v
}

/// The nearest-rank median of signed µs values, in seconds.
fn signed_median(values: impl Iterator<Item = i64>) -> Option<f64> {
    let mut v: Vec<i64> = values.collect();
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let rank = ((v.len() as f64) / 2.0).ceil().max(1.0) as usize;
    Some(v[rank - 1] as f64 / 1e6)
}

/// Nearest-rank percentile of sorted µs values, in seconds.
pub fn percentile(sorted: &[u64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1] as f64 / 1e6)
}

/// The draft's trimmed mean: the mean of the values after the highest 5%
/// are left out, in seconds (values in µs).
pub fn trimmed_mean(values: impl Iterator<Item = u64>) -> Option<f64> {
    let v = sorted(values);
    let keep = ((v.len() as f64) * 0.95).ceil() as usize;
    let kept = &v[..keep.min(v.len())];
    (!kept.is_empty()).then(|| kept.iter().sum::<u64>() as f64 / kept.len() as f64 / 1e6)
}

/// Share of the probes sent before `countable` that got no answer.
fn loss_percent(probes: &[&UdpProbe], countable: f64) -> Option<f64> {
    let counted: Vec<_> = probes.iter().filter(|p| (p.0 as f64 / 1e6) < countable).collect();
    let lost = counted.iter().filter(|p| p.1.is_none()).count();
    (!counted.is_empty()).then(|| 100.0 * lost as f64 / counted.len() as f64)
}

/// The receivers' intervals of a phase, by direction: (start, end, bytes).
struct Rates {
    download: Vec<(f64, f64, u64)>,
    upload: Vec<(f64, f64, u64)>,
}

impl Rates {
    fn of(trial: &TrialResult, start: f64, end: f64) -> Rates {
        let direction = |flow: Flow| {
            let receivers: Vec<&StreamEnd> = trial
                .streams
                .iter()
                .filter(|s| s.flow == flow)
                .map(|s| &s.receiver)
                .collect();
            let mut buckets: std::collections::BTreeMap<i64, (f64, f64, u64)> = Default::default();
            for i in receivers.iter().flat_map(|e| e.intervals.iter()) {
                if i.start_seconds >= start - 1e-3 && i.end_seconds <= end + 1e-3 {
                    let b = buckets.entry((i.start_seconds * 1000.0).round() as i64).or_insert((
                        i.start_seconds,
                        i.end_seconds,
                        0,
                    ));
                    b.2 += i.bytes;
                }
            }
            buckets.into_values().collect::<Vec<_>>()
        };
        Rates {
            download: direction(Flow::AgentToClient),
            upload: direction(Flow::ClientToAgent),
        }
    }

    /// The draft's stability rule on the sum of both directions: the
    /// moving average over 4 intervals, stable once the last 4 moving
    /// averages lie within 5% (standard deviation) of their mean. The time
    /// from `start` to the end of that interval. The phase admits intervals
    /// ending up to a millisecond after `end` (the ends' clocks tick apart);
    /// such an interval ends, for the phase, at its end: stability is never
    /// later than the phase itself.
    fn stable_after(&self, start: f64, end: f64) -> Option<f64> {
        const WINDOW: usize = 4;
        const TOLERANCE: f64 = 0.05;
        let mut total: std::collections::BTreeMap<i64, (f64, f64, u64)> = Default::default();
        for &(s, e, b) in self.download.iter().chain(&self.upload) {
            total.entry((s * 1000.0).round() as i64).or_insert((s, e, 0)).2 += b;
        }
        let series: Vec<(f64, f64)> = total
            .into_values()
            .map(|(s, e, b)| (e, b as f64 * 8.0 / (e - s).max(1e-9)))
            .collect();
        let averages: Vec<(f64, f64)> = series
            .windows(WINDOW)
            .map(|w| (w[WINDOW - 1].0, w.iter().map(|x| x.1).sum::<f64>() / WINDOW as f64))
            .collect();
        averages.windows(WINDOW).find_map(|w| {
            let mean = w.iter().map(|x| x.1).sum::<f64>() / WINDOW as f64;
            let var = w.iter().map(|x| (x.1 - mean).powi(2)).sum::<f64>() / WINDOW as f64;
            (mean > 0.0 && var.sqrt() <= TOLERANCE * mean).then(|| w[WINDOW - 1].0.min(end) - start)
        })
    }

    /// Mean rate of each direction over the intervals from `from` to a
    /// little before `to` (the whole phase when none is in between). The
    /// ends count from their own starts, a few ms apart: an interval at the
    /// phase's very end may hold the next phase's first bytes.
    fn mean_between(&self, from: f64, to: f64) -> (f64, f64) {
        const EDGE_SECONDS: f64 = 0.2;
        let mean = |v: &[(f64, f64, u64)]| {
            let late: Vec<_> = v
                .iter()
                .filter(|i| i.0 >= from - 1e-3 && i.1 <= to - EDGE_SECONDS)
                .collect();
            let pick: Vec<&(f64, f64, u64)> = if late.is_empty() { v.iter().collect() } else { late };
            let seconds: f64 = pick.iter().map(|i| i.1 - i.0).sum();
            let bytes: u64 = pick.iter().map(|i| i.2).sum();
            if seconds > 0.0 {
                bytes as f64 * 8.0 / seconds
            } else {
                0.0
            }
        };
        (mean(&self.download), mean(&self.upload))
    }
}

/// Each queue's mean over the figures' window, as bytes and as time at the
/// rate of the direction it holds.
fn queue_figures(
    client: &LoadedEnd,
    agent: Option<&LoadedEnd>,
    from: f64,
    to: f64,
    download: f64,
    upload: f64,
) -> Vec<QueueFigure> {
    let mut figures = Vec::new();
    let time = |bytes: f64, rate: f64| (rate > 0.0).then(|| bytes * 8.0 / rate);
    for (end, rate) in [(Some(client), upload), (agent, download)] {
        let Some(end) = end else { continue };
        let at = match end.party {
            Party::Client => "client",
            Party::Agent => "agent",
        };
        let window: Vec<&QueueSample> = end.queues.iter().filter(|q| in_window(q.0, from, to)).collect();
        let mean = |f: fn(&QueueSample) -> Option<u64>| {
            let v: Vec<u64> = window.iter().filter_map(|q| f(q)).collect();
            (!v.is_empty()).then(|| v.iter().sum::<u64>() as f64 / v.len() as f64)
        };
        let interface = end.interface.as_deref().unwrap_or("?");
        let mut push = |kind: &str, name: String, bytes: Option<f64>, delays_probes: bool| {
            if let Some(bytes) = bytes {
                figures.push(QueueFigure {
                    name,
                    at: at.into(),
                    kind: kind.into(),
                    bytes,
                    seconds: time(bytes, rate),
                    delays_probes,
                });
            }
        };
        push(
            "socket_unsent",
            format!("{at}'s sockets, unsent"),
            mean(|q| Some(q.2)),
            false,
        );
        push(
            "socket_unacked",
            format!("{at}'s sockets, in flight"),
            mean(|q| Some(q.3)),
            false,
        );
        push("qdisc", format!("{at} qdisc ({interface})"), mean(|q| q.4), true);
        push("bql", format!("{at} NIC queue ({interface}, BQL)"), mean(|q| q.6), true);
    }
    if let Some(router) = &client.router {
        let window: Vec<&RouterSample> = client
            .router_queues
            .iter()
            .filter(|q| in_window(q.0, from, to))
            .collect();
        for (toward, rate, pick) in [
            (
                "client",
                download,
                (|q: &RouterSample| q.1) as fn(&RouterSample) -> Option<u64>,
            ),
            ("agent", upload, |q: &RouterSample| q.2),
        ] {
            let v: Vec<u64> = window.iter().filter_map(|q| pick(q)).collect();
            if v.is_empty() {
                continue;
            }
            let bytes = v.iter().sum::<u64>() as f64 / v.len() as f64;
            figures.push(QueueFigure {
                name: format!(
                    "the router's queue toward the {toward} ({})",
                    [&router.toward_client, &router.toward_agent][usize::from(toward == "agent")]
                ),
                at: "router".into(),
                kind: "qdisc".into(),
                bytes,
                seconds: time(bytes, rate),
                delays_probes: true,
            });
        }
    }
    figures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_and_trimmed_means_drop_the_top_five_percent() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50e-6));
        assert_eq!(percentile(&v, 99.0), Some(99e-6));
        assert_eq!(percentile(&[], 50.0), None);
        // 1..=100 without 96..=100: mean 48.
        assert_eq!(trimmed_mean(v.into_iter()), Some(48e-6));
    }

    fn rates(values: &[u64]) -> Rates {
        Rates {
            download: values
                .iter()
                .enumerate()
                .map(|(i, &b)| (10.0 + i as f64 * 0.25, 10.25 + i as f64 * 0.25, b))
                .collect(),
            upload: Vec::new(),
        }
    }

    /// A ramp then a plateau is stable once four moving averages of the
    /// plateau agree; a rate that keeps swinging never is.
    #[test]
    fn stability_waits_for_the_moving_average_to_settle() {
        let ramp = rates(&[10, 40, 80, 100, 100, 100, 100, 100, 100, 100, 100, 100]);
        let stable = ramp.stable_after(10.0, 13.0).unwrap();
        assert!((stable - 2.25).abs() < 1e-9, "{stable}");
        let swinging = rates(&[10, 100, 10, 100, 300, 10, 100, 500, 10, 100, 10, 900]);
        assert_eq!(swinging.stable_after(10.0, 13.0), None);
        let (download, upload) = ramp.mean_between(11.0, 13.25);
        assert_eq!((download, upload), (100.0 * 8.0 / 0.25, 0.0));
    }

    /// A phase that steadies only in its last interval, which ended a tenth
    /// of a millisecond after the phase (as CI saw): stable at the phase's
    /// length, never after it.
    #[test]
    fn stability_in_the_last_interval_is_never_later_than_the_phase() {
        let mut late = rates(&[100, 100, 100, 100, 100, 100, 100]);
        let last = late.download.last_mut().unwrap();
        last.1 += 1e-4;
        let end = 10.0 + 7.0 * 0.25;
        assert_eq!(late.stable_after(10.0, end), Some(end - 10.0));
    }

    /// Idle probes on a path 300 µs up and 100 µs down, the agent's clock
    /// 1000 µs ahead: each probe's interval is [900, 1300] µs.
    fn asymmetric_probes() -> Vec<UdpProbe> {
        (0..50u64)
            .map(|i| UdpProbe(i * 20_000, Some(400), Some(300 + 1000), Some(100 - 1000)))
            .collect()
    }

    #[test]
    fn idle_probes_bound_the_offset_whatever_the_asymmetry() {
        let probes = asymmetric_probes();
        let idle: Vec<&UdpProbe> = probes.iter().collect();
        let offset = OneWayOffset::of(&TrialResult::default(), &idle, 10.0).unwrap();
        assert_eq!(offset.from, "idle_probes");
        // The middle of [900, 1300] (a symmetric guess would say 1100 and
        // stop there); the bound holds the truth, 1000 µs.
        assert!(
            (offset.micros - 1000.0).abs() <= offset.bound_micros,
            "{}",
            offset.micros
        );
        assert!(offset.bound_micros >= 200.0, "{}", offset.bound_micros);
    }

    #[test]
    fn the_tighter_estimate_wins_and_the_control_ones_bound_grows_with_the_test() {
        let probes = asymmetric_probes();
        let idle: Vec<&UdpProbe> = probes.iter().collect();
        let mut trial = TrialResult {
            clock_offset: Some(crate::model::ClockOffset {
                agent_minus_client_us: Some(1001.0),
                bound_us: Some(5.0),
                drift_ppm: Some(0.0),
                drift_bound_ppm: Some(2.0),
                exchanges: 16,
                ..Default::default()
            }),
            ..Default::default()
        };
        let offset = OneWayOffset::of(&trial, &idle, 10.0).unwrap();
        assert_eq!(offset.from, "control_connection");
        assert_eq!(offset.micros, 1001.0);
        // 5 µs at the middle, plus 2 ppm over the 5 s to either end.
        assert_eq!(offset.bound_micros, 15.0);
        // A wide control estimate without a measured drift (5 ms, and the
        // kernel's 500 ppm over 5 s: 7.5 ms) loses to the probes' (200 µs,
        // and 500 ppm over the 9 s from them to the test's end: 4.7 ms).
        let control = trial.clock_offset.as_mut().unwrap();
        (control.bound_us, control.drift_bound_ppm) = (Some(5000.0), None);
        let probes = OneWayOffset::of(&trial, &idle, 10.0).unwrap();
        assert_eq!(probes.from, "idle_probes");
        assert!(probes.bound_micros < 7500.0, "{}", probes.bound_micros);
        // Neither: no footing for one-way figures.
        assert!(OneWayOffset::of(&TrialResult::default(), &[], 10.0).is_none());
    }

    #[test]
    fn a_signed_median_keeps_negative_readings() {
        assert_eq!(signed_median([-900i64, -1000, -800].into_iter()), Some(-900e-6));
        assert_eq!(signed_median([3i64, 1, 2, 4].into_iter()), Some(2e-6));
        assert_eq!(signed_median(std::iter::empty()), None);
    }
}
