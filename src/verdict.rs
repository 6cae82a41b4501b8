//! The bottleneck verdict: one plain line, derived from what a trial
//! measured, that says where the limit was — and no more than the numbers
//! support. Rules are checked in order and the first that holds speaks:
//!
//! 1. a side's cgroup CPU quota throttled it in most periods;
//! 2. throughput reached 90% of the theoretical goodput of the link (above
//!    110% the assumed link speed is wrong, and the verdict says so);
//! 3. UDP datagrams were lost: in the receiving socket's buffer (its own
//!    drop counter), or before it (the path: a link, router or NIC);
//!    then, for a UDP test only, the receiver's UDP RcvbufErrors of the
//!    whole host;
//! 4. the receiving NIC dropped packets;
//! 5. TCP retransmitted 1% of its bytes or more: the test's own sockets
//!    (TCP_INFO), else the sending namespace's RetransSegs/OutSegs;
//! 6. a side's trial threads waited for a CPU most of the time they were
//!    ready to run (schedstat run delay: a cgroup quota, or other work);
//! 7. a side's stream threads or one of its cores were busy 95% of the time;
//! 8. the test's TCP senders were held back by the receiver's window, or by
//!    their own send buffer, half the time they had data in flight or more.
//!
//! Otherwise: "no bottleneck stands out". [`annotate`] also fills in the
//! percent of theoretical goodput, so it runs on every result.
//!
//! **Evidence belongs to the test.** The test's own sockets (TCP_INFO, the
//! UDP sockets' drop counters), its threads' CPU and scheduling, its cgroup
//! and its byte counts are its own. Host-wide counters are shared with
//! whatever else runs: the interface's drops, the namespace's UDP
//! RcvbufErrors and TCP RetransSegs/OutSegs, and the busiest core. Rules 3
//! (host UDP), 4, 5 (namespace) and 7 (core) use them only when the
//! interface carried no more than the test's own bytes during the test
//! ([`attribution`]); otherwise they are context, and the counters line
//! says "other traffic on this interface during the test: host counters
//! not attributed". The host's UDP counters also need no more datagrams
//! to have arrived than the test sent (they count every interface), and
//! a busy core needs to be mostly softirq or half the test's own threads
//! (a core that someone else's process keeps busy is not the test's).

use crate::linerate::{self, Framing, Stack};
use crate::model::{
    CpuReport, LineRateShare, NicFacts, Party, RunResult, SideCounters, StreamResult, TcpInfo, TrialResult, Verdict,
};
use crate::units::{Bytes, Rate, Size};
use crate::workload::VerdictQuestions;

mod multipath;
mod reason;
pub use reason::{Class, Finding};

/// Share of the theoretical goodput from which a result is link-bound.
pub const LINK_BOUND_PERCENT: f64 = 90.0;
/// Above this share of the theoretical goodput the assumed link speed is
/// wrong. Between 100% and this the result is still link-bound, and the
/// verdict says why it reads above the model (`LineRateShare::above_model`).
pub const MODEL_EXCEEDED_PERCENT: f64 = 110.0;
/// Up to this share of the model, a figure above 100% is put down to the
/// precision of the measured time (as measured against tbf in the lab:
/// 100.01% at most, issue 11).
pub const WITHIN_PRECISION_PERCENT: f64 = 100.2;
/// Busy share of a core (or of the stream threads) that counts as CPU-bound.
pub const CPU_BOUND_PERCENT: f64 = 95.0;
/// Share of their ready time that threads waited for a CPU, and share of
/// the trial the waiting must cover, to count as CPU-bound.
pub const WAIT_PERCENT: f64 = Verdict::WAIT_PERCENT;
pub const WAIT_SHARE_OF_TRIAL_PERCENT: f64 = Verdict::WAIT_SHARE_OF_TRIAL_PERCENT;
/// Share of throttled cgroup periods that counts as CPU-bound.
pub const THROTTLED_PERCENT: f64 = Verdict::THROTTLED_PERCENT;
/// Share of the time with data in flight that TCP senders spent held back
/// by the receive window or their send buffer, to count as limited by it.
pub const WINDOW_LIMITED_PERCENT: f64 = 50.0;
/// Share of the window's ceiling (the advertised window over the round
/// trip) a direction must reach to be held by the window, when the kernel
/// saw the window hold it back at least [`WINDOW_SEEN_PERCENT`] of the time.
pub const WINDOW_CEILING_PERCENT: f64 = 75.0;
pub const WINDOW_SEEN_PERCENT: f64 = 10.0;
/// Drop and retransmission shares worth a verdict.
pub const LOSS_PERCENT: f64 = Verdict::LOSS_PERCENT;
/// Share of their ready time that threads waited for a CPU from which
/// the waiting is strong evidence (between [`WAIT_PERCENT`] and this, weak).
pub const STRONG_WAIT_PERCENT: f64 = 75.0;

/// Fills in `line_rate` and `verdict` of every trial of `run`; the link
/// speed is `link_speed` when given, else the slowest of both ends' NIC
/// link speeds and tbf shaping rates.
pub fn annotate(run: &mut RunResult, link_speed: Option<u64>) {
    annotate_link(run, link_speed, None)
}

/// The link the line-rate model assumes: its speed, where the speed came
/// from, what each packet costs against it, and a shaper's bucket.
#[derive(Debug, Clone, PartialEq)]
struct Link {
    bits_per_second: u64,
    source: &'static str,
    framing: Framing,
    burst_bytes: Option<u64>,
    /// Where a shaper beyond both ends sits (`source` "lab").
    shaper_name: Option<String>,
}

/// A tbf shaper on the path beyond both ends that the client was told of:
/// a lab router's egress toward the busier direction's receiver.
#[derive(Debug, Clone, PartialEq)]
pub struct PathShaper {
    /// Where it sits, in words: `lab router demo-r eth1`.
    pub name: String,
    pub bits_per_second: u64,
    /// Its token bucket.
    pub burst_bytes: Option<u64>,
}

/// The shaper of an interface, as the line-rate model counts it.
fn shaper_link(nic: &NicFacts) -> Option<Link> {
    let shaping = nic.qdisc_shaping.clone().unwrap_or_default();
    Some(Link {
        bits_per_second: nic.qdisc_rate_bits_per_second?,
        source: "qdisc",
        framing: Framing::Qdisc {
            overhead_bytes: u64::from(shaping.overhead_bytes),
            mpu_bytes: u64::from(shaping.mpu_bytes),
            atm: shaping.linklayer == "atm",
        },
        burst_bytes: shaping.burst_bytes,
        shaper_name: None,
    })
}

/// As [`annotate`], with `link_overhead` (bytes per IP packet, from
/// `--link-overhead`) replacing the overhead the speed's source implies.
pub fn annotate_link(run: &mut RunResult, link_speed: Option<u64>, link_overhead: Option<u64>) {
    annotate_path(run, link_speed, link_overhead, None, &|_| None)
}

/// As [`annotate_link`], with a shaper on the path (a lab router's tbf)
/// competing with the ends' NIC speeds and shapers when no `link_speed`
/// is given: the slowest is the line rate. `toward` names the shaper on
/// the way to one address, for a stream over several paths (MPTCP), each
/// path through its own.
pub fn annotate_path(
    run: &mut RunResult,
    link_speed: Option<u64>,
    link_overhead: Option<u64>,
    shaper: Option<&PathShaper>,
    toward: &dyn Fn(std::net::IpAddr) -> Option<PathShaper>,
) {
    // A tbf counts the frames it dequeues: the Ethernet header, no more.
    let on_path = shaper.map(|s| Link {
        bits_per_second: s.bits_per_second,
        source: "lab",
        framing: Framing::Qdisc {
            overhead_bytes: 0,
            mpu_bytes: 0,
            atm: false,
        },
        burst_bytes: s.burst_bytes,
        shaper_name: Some(s.name.clone()),
    });
    let link = link_speed
        .map(|s| Link {
            bits_per_second: s,
            source: "option",
            framing: Framing::EthernetWire,
            burst_bytes: None,
            shaper_name: None,
        })
        .or_else(|| {
            [&run.client.facts.interface, &run.agent.facts.interface]
                .iter()
                .filter_map(|nic| {
                    let nic = nic.as_ref()?;
                    // A virtual link's nominal speed (veth: 10 Gbit/s) is no line rate.
                    let phy = (!crate::probe::nic::speed_is_nominal(nic))
                        .then_some(nic.link_speed_bits_per_second)
                        .flatten()
                        .map(|s| Link {
                            bits_per_second: s,
                            source: "nic",
                            framing: Framing::EthernetWire,
                            burst_bytes: None,
                            shaper_name: None,
                        });
                    [phy, shaper_link(nic)]
                        .into_iter()
                        .flatten()
                        .min_by_key(|l| l.bits_per_second)
                })
                .chain(on_path)
                .min_by_key(|l| l.bits_per_second)
        })
        .map(|mut l| {
            if let Some(overhead_bytes) = link_overhead {
                l.framing = Framing::Fixed { overhead_bytes };
            }
            l
        });
    let mtu = [&run.client.facts.interface, &run.agent.facts.interface]
        .iter()
        .filter_map(|nic| nic.as_ref()?.mtu_bytes)
        .min()
        .unwrap_or(1500);
    let ipv6 = run
        .agent
        .address
        .parse::<std::net::SocketAddr>()
        .is_ok_and(|a| a.is_ipv6() && !a.ip().to_string().starts_with("::ffff:"));
    let shared = run.shared_host();
    let (message_bytes, omit_seconds) = (run.spec.message_bytes, run.spec.omit_seconds);
    let kind = crate::workload::results_of(&run.workload);
    let judge_trial = |trial: &mut TrialResult| {
        if let Some(mut links) = trial.links.take() {
            // Several links: the line rate is each link's, and the verdict
            // says what limited the aggregate.
            trial.line_rate = None;
            if let Some(speed) = link_speed {
                crate::multilink::set_link_speed(&mut links, speed);
            }
            let generic = judge(trial, kind, shared);
            let v = crate::multilink::judge(trial, &links, &generic);
            links.verdict = Some(v.clone());
            trial.links = Some(links);
            trial.verdict = Some(v);
            return;
        }
        // A stream over several paths (MPTCP): one link's rate is no line
        // rate for it; its paths' links are weighed one by one.
        if kind.several_paths(trial).is_some() {
            trial.line_rate = None;
            let paths = multipath::summary(trial, toward);
            let generic = judge(trial, kind, shared);
            trial.verdict = Some(multipath::judge(trial, &paths, &generic));
            trial.paths = Some(paths);
            return;
        }
        trial.line_rate = link
            .as_ref()
            .and_then(|link| line_rate_share(trial, kind, link, mtu, ipv6, message_bytes, omit_seconds));
        if let Some(link) = &link {
            let used = crate::model::LinkUsed {
                bits_per_second: link.bits_per_second as f64,
                source: link.source,
                burst_bytes: link.burst_bytes,
                shaper_name: link.shaper_name.clone(),
                framing: link.framing,
                mtu_bytes: u64::from(mtu),
                ipv6,
            };
            kind.note_link(trial, &run.spec, &used);
        }
        let generic = judge(trial, kind, shared);
        // An MPTCP stream on one path because a subflow never came: that
        // is the answer, whatever the one path did.
        trial.verdict = Some(multipath::missing(trial, &generic).unwrap_or(generic));
    };
    judge_trial(&mut run.result);
    for trial in &mut run.trials {
        judge_trial(trial);
    }
}

fn line_rate_share(
    trial: &TrialResult,
    kind: &dyn VerdictQuestions,
    link: &Link,
    mtu: u32,
    ipv6: bool,
    message_bytes: u64,
    omit_seconds: f64,
) -> Option<LineRateShare> {
    // Transactions and sweeps are not bulk throughput: their average bit
    // rate against the line rate would mislead (a sweep has its own peak
    // share in its summary).
    if !kind.line_rate_applies() {
        return None;
    }
    let busier = [
        (&trial.sum.client_to_agent, Party::Agent),
        (&trial.sum.agent_to_client, Party::Client),
    ]
    .into_iter()
    .filter_map(|(f, receiver)| f.as_ref().map(|f| (&f.receiver, receiver)))
    .max_by(|a, b| a.0.bits_per_second.total_cmp(&b.0.bits_per_second));
    // The busier direction's senders size its packets: a bidirectional
    // test's two directions may have negotiated different segments.
    let tcp = trial
        .streams
        .iter()
        .filter(|s| busier.map_or(true, |(_, receiver)| s.flow.receiver() == receiver))
        .find_map(|s| s.sender.tcp_info.as_ref().filter(|i| i.send_mss_bytes > 0));
    // Full-size packets: the transport's own (QUIC's), the segments TCP
    // really sent (its MSS as negotiated, within the path MTU), or UDP
    // datagrams of the message size.
    let (ip_packet, payload) = match (kind.full_packet(trial, ipv6), tcp) {
        (Some(packet), _) => packet,
        (None, Some(info)) if info.path_mtu_bytes > info.send_mss_bytes => tcp_packet(info, ipv6),
        (None, Some(_)) => return None,
        (None, None) => {
            let stack = if ipv6 { Stack::Udp6 } else { Stack::Udp4 };
            let room = u64::from(mtu).saturating_sub(stack.header_bytes()).max(1);
            let payload = message_bytes.clamp(1, room);
            (payload + stack.header_bytes(), payload)
        }
    };
    let model = linerate::goodput(link.bits_per_second as f64, ip_packet, payload, link.framing)?;
    let measured = busier.map_or(0.0, |(t, _)| t.bits_per_second);
    let seconds = busier.map_or(0.0, |(t, _)| t.seconds);
    // A token bucket starts full: over a test that starts with it, the
    // shaper passes its rate plus the bucket once.
    // Under a saturating load the bucket empties during a warm-up, whichever
    // shaper it belongs to.
    let burst_handling = match link.burst_bytes {
        _ if omit_seconds > 0.0 => "warmup_excluded",
        Some(_) if seconds > 0.0 => "included",
        _ => "unknown",
    };
    let burst_allowance = (burst_handling == "included").then(|| {
        let bytes = link.burst_bytes.unwrap_or(0) as f64;
        bytes * 8.0 * payload as f64 / model.counted_bytes as f64 / seconds
    });
    let theory = model.goodput_bits_per_second + burst_allowance.unwrap_or(0.0);
    let percent = measured * 100.0 / theory;
    let mut share = LineRateShare {
        link_bits_per_second: link.bits_per_second,
        link_speed_source: link.source.to_string(),
        shaper_name: link.shaper_name.clone(),
        frame_bytes: ip_packet + linerate::ETHERNET_HEADER_BYTES + linerate::FCS_BYTES,
        payload_bytes: payload,
        theoretical_goodput_bits_per_second: theory,
        measured_bits_per_second: measured,
        percent_of_theoretical_goodput: percent,
        overhead_model: Some(link.framing.name().into()),
        overhead_bytes_per_frame: Some(model.counted_bytes - ip_packet),
        counted_bytes_per_frame: Some(model.counted_bytes),
        sustained_goodput_bits_per_second: Some(model.goodput_bits_per_second),
        burst_bytes: link.burst_bytes,
        burst_handling: (link.source != "nic").then(|| burst_handling.into()),
        burst_allowance_bits_per_second: burst_allowance,
        above_model: None,
    };
    share.above_model = above_model(&share);
    Some(share)
}

/// The IP packet of a TCP sender's full segments and the payload it
/// carries: the segment it really sends (`tcpi_snd_mss`: the path MTU's,
/// or less when the peer announced a smaller MSS, as a receiver with a
/// small buffer does: 2048 B at MTU 9000 with a 4 KiB one) with its IP and
/// TCP headers, never above the path MTU. The TCP header carries 12 B of
/// timestamps when the connection says so, and when it does not say
/// (documents older than the field): Linux's default; an MSS the path MTU
/// sets then comes out at the path MTU either way.
pub fn tcp_packet(info: &TcpInfo, ipv6: bool) -> (u64, u64) {
    let ip = if ipv6 {
        linerate::IPV6_HEADER_BYTES
    } else {
        linerate::IPV4_HEADER_BYTES
    };
    let tcp = match info.timestamps {
        Some(false) => linerate::TCP_HEADER_BYTES,
        _ => linerate::TCP_TIMESTAMPS_HEADER_BYTES,
    };
    let mss = u64::from(info.send_mss_bytes);
    ((mss + ip + tcp).min(u64::from(info.path_mtu_bytes)), mss)
}

/// Why a measurement reads above 100% of the model, in words.
fn above_model(share: &LineRateShare) -> Option<String> {
    if share.percent_of_theoretical_goodput <= 100.0 {
        return None;
    }
    let wire_by_option =
        share.link_speed_source == "option" && share.overhead_model.as_deref() == Some("ethernet_wire");
    if share.percent_of_theoretical_goodput <= WITHIN_PRECISION_PERCENT && !wire_by_option {
        return Some(format!(
            "by {:.2}%, within the precision of the measured time (the end of the warm-up and the last byte \
             are taken from sampled clocks, not exact)",
            share.percent_of_theoretical_goodput - 100.0
        ));
    }
    let mut why = match share.link_speed_source.as_str() {
        "option" if wire_by_option => {
            "the link is faster than --link-speed, or counts fewer bytes per packet than a physical Ethernet wire \
             (a shaper such as tbf counts 14 B, not 38 B: give --link-overhead 14)"
                .to_string()
        }
        "option" => {
            "the link is faster than --link-speed, or counts fewer bytes per packet than --link-overhead".into()
        }
        "nic" => "the NIC's reported speed is not what limits this path".into(),
        _ => "the shaper let more through than its rate and bucket allow over the measured time".into(),
    };
    match share.burst_handling.as_deref() {
        Some("unknown") => why.push_str(
            "; a shaper on the path may have let its initial burst through, which the model cannot know \
             (exclude it with -O/--omit)",
        ),
        Some("included") => why.push_str("; or the measured time is shorter than the time the bytes took"),
        _ => {}
    }
    Some(why)
}

/// What a host did in the trial: "sender", "receiver", or its process
/// name when it did both.
fn role_name(trial: &TrialResult, host: Party) -> &'static str {
    let sends = trial.streams.iter().any(|s| s.flow.sender() == host);
    let receives = trial.streams.iter().any(|s| s.flow.receiver() == host);
    match (sends, receives) {
        (true, false) => "sender",
        (false, true) => "receiver",
        _ => host.as_str(),
    }
}

fn counters(trial: &TrialResult, host: Party) -> Option<&SideCounters> {
    match host {
        Party::Client => trial.counters.client.as_ref(),
        Party::Agent => trial.counters.agent.as_ref(),
    }
}

fn cpu(trial: &TrialResult, host: Party) -> &CpuReport {
    match host {
        Party::Client => &trial.cpu.client,
        Party::Agent => &trial.cpu.agent,
    }
}

const PARTIES: [Party; 2] = [Party::Client, Party::Agent];

/// The verdict of one trial; `shared` when both ends ran on one host.
/// Every rule gives its findings; [`reason::conclude`] orders them by
/// what explains what and names the cause.
pub fn judge(trial: &TrialResult, kind: &dyn VerdictQuestions, shared: bool) -> Verdict {
    let all = findings(trial, kind, shared);
    // A paced test whose sender reached its offer and lost nothing was
    // limited by nothing: what held is shown, none of it named the cause.
    let lost = all
        .iter()
        .any(|f| matches!(f.class, Class::Drops { .. } | Class::PathLoss));
    if kind.sender_reached_offer(trial) == Some(true) && !lost {
        return reason::delivered(all);
    }
    let mut verdict = reason::conclude(all, kind.own_verdict_before_the_link());
    if kind.threads_spin(trial) && verdict.kind == "none" {
        verdict.summary.push_str(
            " (the ends spin by design, --spin: their threads are on a CPU the whole time, \
             which is the polling, not a limit)",
        );
    }
    verdict
}

/// Every finding of the rules that hold for `trial`, in the rules' order.
pub fn findings(trial: &TrialResult, kind: &dyn VerdictQuestions, shared: bool) -> Vec<Finding> {
    let mut all: Vec<Finding> = Vec::new();
    all.extend(throttled(trial));
    all.extend(starved(trial, kind, shared));
    all.extend(cpu_bound(trial, kind, shared));
    // An end short of CPU makes the rate, and the bursts it lets through
    // when it runs can still fill a router's queue: below 90% of the line
    // rate the shaper's drops then do not make the link the limit.
    let an_end_short_of_cpu = all.iter().any(|f| f.class == Class::Cpu && f.strong);
    all.extend(link_bound(trial, an_end_short_of_cpu));
    all.extend(return_path_bound(trial, an_end_short_of_cpu));
    let (work, own): (Vec<Verdict>, Vec<Verdict>) = kind
        .findings(trial)
        .into_iter()
        .partition(|v| Verdict::CPU_WORK_KINDS.contains(&v.kind.as_str()));
    name_the_cpu_work(trial, &mut all, work);
    all.extend(own.into_iter().map(|v| workload_finding(trial, v)));
    for f in all.iter_mut().filter(|f| matches!(f.class, Class::OfferShort { .. })) {
        f.one_kernel = shared;
    }
    // The workload's own loss figures are the test's: the host's speak
    // only when the workload has none.
    if !all
        .iter()
        .any(|f| matches!(f.class, Class::Drops { .. } | Class::PathLoss))
    {
        all.extend(socket_buffer_drops(trial, kind, shared));
    }
    all.extend(nic_drops(trial, kind, shared));
    all.extend(retransmitting(trial, kind, shared));
    all.extend(window_limited(trial));
    all.extend(below_link(trial));
    // A sender that reached its offered rate was not held back by its CPU:
    // its waiting threads (a busy machine) are weak evidence of nothing it did.
    if kind.sender_reached_offer(trial) == Some(true) {
        let sender = party_of(trial, "sender");
        for f in all
            .iter_mut()
            .filter(|f| f.class == Class::Cpu && f.party.is_some() && f.party == sender)
        {
            f.strong = false;
            f.summary.push_str(" (it still reached its offered rate)");
            f.consequence = f.summary.clone();
        }
    }
    all
}

/// A workload's findings of the work that took most of an end's CPU (the
/// cipher) name that end's CPU finding, where there is one: its kind, and
/// its words first. An end that was not short of CPU gets none: the work,
/// however costly, did not limit it.
fn name_the_cpu_work(trial: &TrialResult, all: &mut [Finding], work: Vec<Verdict>) {
    for v in work {
        let party = match v.side.as_deref() {
            Some(role @ ("sender" | "receiver")) => party_of(trial, role),
            _ => None,
        };
        if let Some(f) = all
            .iter_mut()
            .find(|f| f.class == Class::Cpu && f.party.is_some() && f.party == party)
        {
            f.kind = v.kind.clone();
            f.summary = format!("{}; {}", v.summary, f.summary);
            f.consequence = f.summary.clone();
        }
    }
}

/// The party that played `role` ("sender", "receiver") in the trial, when one did.
fn party_of(trial: &TrialResult, role: &str) -> Option<Party> {
    PARTIES.into_iter().find(|&h| role_name(trial, h) == role)
}

/// A workload's own finding (UDP loss, a files transfer's limit) placed in
/// the explanation order by its kind and side.
fn workload_finding(trial: &TrialResult, v: Verdict) -> Finding {
    let receiver = party_of(trial, "receiver");
    let sender = party_of(trial, "sender");
    let (class, party) = match v.kind.as_str() {
        "socket_buffer_drops" | "udp_loss" if receiver.is_some() => (
            Class::Drops {
                receiver: receiver.unwrap_or(Party::Agent),
            },
            receiver,
        ),
        "path_loss" => (Class::PathLoss, None),
        // Lost on the path, but of the sender's making: its catch-up bursts.
        "pacer_burst_loss" => (Class::PathLoss, sender),
        "offered_rate_not_reached" if sender.is_some() => (
            Class::OfferShort {
                sender: sender.unwrap_or(Party::Client),
            },
            sender,
        ),
        _ => (
            Class::Workload,
            match v.side.as_deref() {
                Some("receiver") => receiver,
                Some("sender") => sender,
                _ => None,
            },
        ),
    };
    let side = v
        .side
        .clone()
        .or_else(|| party.map(|p| role_name(trial, p).to_string()));
    // A workload's "nothing stands out" names no limit: weak evidence that
    // speaks first only when no strong cause does (files onto a starved
    // receiver whose own accounting found no share large enough).
    let names_a_limit = !v.kind.ends_with("_none");
    Finding::new(&v.kind, class, party, side.as_deref(), v.summary).strong_if(names_a_limit)
}

/// The measured rate below the line rate: never a finding on its own, a
/// consequence of a cause that explains it.
fn below_link(trial: &TrialResult) -> Option<Finding> {
    let share = trial.line_rate.as_ref()?;
    (share.percent_of_theoretical_goodput < LINK_BOUND_PERCENT).then(|| {
        Finding::new(
            "below_line_rate",
            Class::BelowLink,
            None,
            Some("path"),
            format!(
                "{:.0}% of line rate ({} of {})",
                share.percent_of_theoretical_goodput,
                Rate(share.measured_bits_per_second),
                Rate(share.theoretical_goodput_bits_per_second)
            ),
        )
    })
}

fn throttled(trial: &TrialResult) -> Vec<Finding> {
    PARTIES
        .iter()
        .filter_map(|&host| {
            let cg = counters(trial, host)?.cgroup_cpu.as_ref()?;
            let share = cg.throttled_percent_of_periods?;
            (share >= THROTTLED_PERCENT && cg.periods >= 10).then(|| {
                let quota = match (cg.quota_us, cg.period_us) {
                    (Some(q), Some(p)) => format!(" (quota {q} us per {p} us)"),
                    _ => String::new(),
                };
                let side = role_name(trial, host);
                Finding::new(
                    "cgroup_throttled",
                    Class::Cpu,
                    Some(host),
                    Some(side),
                    format!(
                        "{side} CPU-starved: its cgroup {} throttled it in {share:.0}% of CPU periods{quota}",
                        cg.cgroup
                    ),
                )
            })
        })
        .collect()
}

fn starved(trial: &TrialResult, kind: &dyn VerdictQuestions, shared: bool) -> Vec<Finding> {
    // Both ends busy-polling (rr --spin) on one machine take each other's
    // cores: their waits are the spinning's, by design, not a limit (seen
    // on loopback, 2 cores: "receiver CPU-starved ... 51%").
    if shared && kind.threads_spin(trial) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for host in PARTIES {
        let Some(c) = counters(trial, host) else {
            continue;
        };
        // The test's own threads, and the kernel thread that received for
        // it (a CPU-limited lab host's packet work waits there, while its
        // threads sleep for want of data or acknowledgements).
        let (napi, napi_were) = match c.packet_work.as_ref().is_some_and(|w| w.threads > 1) {
            true => ("its receive work (napi threads) waited", "they were"),
            false => ("its receive work (a napi thread) waited", "it was"),
        };
        let measured = [
            (c.scheduling.as_ref(), "its threads waited", "they were"),
            (c.packet_work.as_ref(), napi, napi_were),
        ];
        for (s, what, were) in measured {
            let Some(s) = s else { continue };
            let Some(share) = s.wait_percent else { continue };
            let long_enough = s.wait_seconds * 100.0 >= WAIT_SHARE_OF_TRIAL_PERCENT * c.seconds;
            if share < WAIT_PERCENT || !long_enough {
                continue;
            }
            let side = role_name(trial, host);
            out.push(
                Finding::new(
                    "cpu_starved",
                    Class::Cpu,
                    Some(host),
                    Some(side),
                    format!(
                        "{side} CPU-starved: {what} for a CPU {share:.0}% of the time {were} ready to run \
                         (ran {:.2} s, waited {:.2} s)",
                        s.run_seconds, s.wait_seconds
                    ),
                )
                .strong_if(share >= STRONG_WAIT_PERCENT)
                .ran_percent_of_ready(100.0 - share),
            );
        }
    }
    out
}

fn link_bound(trial: &TrialResult, an_end_short_of_cpu: bool) -> Option<Finding> {
    let share = trial.line_rate.as_ref()?;
    if share.percent_of_theoretical_goodput > MODEL_EXCEEDED_PERCENT {
        return Some(Finding::new(
            "model_exceeded",
            Class::ModelExceeded,
            None,
            Some("path"),
            format!(
                "faster than the line-rate model allows: {:.1}% of the theoretical goodput of a {} link; \
                 the link is faster than assumed (check --link-speed)",
                share.percent_of_theoretical_goodput,
                Rate(share.link_bits_per_second as f64)
            ),
        ));
    }
    if share.percent_of_theoretical_goodput < LINK_BOUND_PERCENT {
        return (!an_end_short_of_cpu)
            .then(|| held_by_the_shaper(trial, share))
            .flatten();
    }
    Some({
        let above = share
            .above_model
            .as_ref()
            .map(|why| format!("; above the model: {why}"))
            .unwrap_or_default();
        Finding::new(
            "link_bound",
            Class::Link,
            None,
            Some("path"),
            format!(
                "link-bound: {:.1}% of line rate ({} of {} theoretical goodput on a {} link){above}",
                share.percent_of_theoretical_goodput,
                Rate(share.measured_bits_per_second),
                Rate(share.theoretical_goodput_bits_per_second),
                Rate(share.link_bits_per_second as f64)
            ),
        )
    })
}

/// Below [`LINK_BOUND_PERCENT`], the path's shaper is still the limit when
/// it was read over the trial and its queue overflowed: more was offered to
/// the link than it carried. A tbf that dequeues late (its host's CPU busy
/// with other work) loses the tokens its bucket cannot hold and passes less
/// than its rate; the link held the traffic back all the same. A link that
/// carried less than half its rate is not called the limit on its drops,
/// nor one beside an end short of CPU (the caller's judgment).
fn held_by_the_shaper(trial: &TrialResult, share: &LineRateShare) -> Option<Finding> {
    let shaper = trial.path_shaper.as_ref()?;
    let is_the_line_rate =
        share.link_speed_source == "lab" && share.shaper_name.as_deref() == Some(shaper.name.as_str());
    if !is_the_line_rate || shaper.dropped_packets == 0 || share.percent_of_theoretical_goodput < LINK_HELD_PERCENT {
        return None;
    }
    Some(Finding::new(
        "link_bound",
        Class::Link,
        None,
        Some("path"),
        format!(
            "link-bound: {} dropped {} packets at its full queue and held packets back {} times, \
             more was offered than it carried; it delivered {:.1}% of line rate ({} of {} theoretical \
             goodput on a {} link): a shaper that dequeues late, its host's CPU busy, passes less than its rate",
            shaper.name,
            shaper.dropped_packets,
            shaper.overlimits,
            share.percent_of_theoretical_goodput,
            Rate(share.measured_bits_per_second),
            Rate(share.theoretical_goodput_bits_per_second),
            Rate(share.link_bits_per_second as f64)
        ),
    ))
}

/// Share of the time data flowed that the shaper on the way back to the
/// sender must have been busy for it to hold the sender back; from
/// [`LINK_HELD_PERCENT`] when it also dropped at its full queue.
pub const RETURN_BUSY_PERCENT: f64 = 90.0;

/// The way back to the sender, when a shaper there was read over the trial
/// (a lab router's tbf toward the sender) and it was full: busy most of
/// the time data flowed, or dropping at its full queue. TCP sends no
/// faster than its ACKs come back, so a slow return path holds the sender
/// however fast the way there is (`--rate 1:a=1mbit` held a 21 Gbit/s
/// path to 1 Gbit/s). A direction already at its own line rate is that
/// link's; an end short of CPU makes the rate itself, and its bursts can
/// still fill the queue, so drops alone do not speak beside it.
fn return_path_bound(trial: &TrialResult, an_end_short_of_cpu: bool) -> Option<Finding> {
    let back = trial.return_shaper.as_ref().filter(|b| b.bits_per_second > 0)?;
    if trial
        .line_rate
        .as_ref()
        .is_some_and(|l| l.percent_of_theoretical_goodput >= LINK_BOUND_PERCENT)
    {
        return None;
    }
    let busier = [&trial.sum.client_to_agent, &trial.sum.agent_to_client]
        .into_iter()
        .flatten()
        .max_by(|a, b| a.receiver.bits_per_second.total_cmp(&b.receiver.bits_per_second))?;
    let received = &busier.receiver;
    // The time data flowed: the measured time, and the warm-up's share of
    // the bytes at the same rate before it.
    let warmup: u64 = trial.streams.iter().map(|s| s.receiver.warmup_bytes).sum();
    let data_seconds = match received.bytes {
        0 => return None,
        bytes => received.seconds * (bytes + warmup) as f64 / bytes as f64,
    };
    if data_seconds <= 0.0 {
        return None;
    }
    let busy_seconds = back.sent_bytes as f64 * 8.0 / back.bits_per_second as f64;
    let busy = busy_seconds * 100.0 / data_seconds;
    let full =
        busy >= RETURN_BUSY_PERCENT || (back.dropped_packets > 0 && busy >= LINK_HELD_PERCENT && !an_end_short_of_cpu);
    if !full || back.sent_packets == 0 {
        return None;
    }
    let per_packet = back.sent_bytes / back.sent_packets;
    let acknowledged = (received.bytes + warmup) / back.sent_packets;
    let queue = back
        .queue_seconds
        .map(|q| format!(", queue {:.0} ms", q * 1000.0))
        .unwrap_or_default();
    // The counters run from before the trial to after it: a queue that
    // drains after the data stopped reads above the time data flowed.
    let busy_words = match busy {
        b if b >= 100.0 => "all of the time data flowed".to_string(),
        b => format!("{b:.0}% of the time data flowed"),
    };
    let drops = match back.dropped_packets {
        0 => String::new(),
        n => format!(", dropped {n} at its full queue"),
    };
    Some(Finding::new(
        "return_path_bound",
        Class::Link,
        None,
        Some("path"),
        format!(
            "the return path toward the sender holds ACKs: {} ({}{queue}) was busy {busy_words}, carrying {:.0} packets/s of {per_packet} B, each acknowledging {} on average{drops}; \
             the sender sends no faster than its ACKs come back",
            Rate(back.bits_per_second as f64),
            back.name,
            back.sent_packets as f64 / data_seconds,
            Bytes(acknowledged),
        ),
    ))
}

/// Below this share of the line rate a shaper's drops do not make the link
/// the limit: something else kept the traffic well below what it carries.
pub const LINK_HELD_PERCENT: f64 = 50.0;

/// Bytes per packet allowed for headers (Ethernet, IP with options, TCP
/// with timestamps and SACK) when an interface's bytes are set against
/// the test's payload: ACKs and tiny messages cost the wire far more than
/// their payload, and must not look like other traffic.
pub const HEADER_BYTES_PER_PACKET: u64 = 100;
/// Payload beyond the test's own that still counts as the test's traffic:
/// the control connection, retransmissions, probes (and 15% of the
/// test's bytes for anything the header allowance misses).
pub const FOREIGN_SLACK_BYTES: u64 = 2 << 20;
pub const FOREIGN_SLACK_SHARE: f64 = 0.15;

/// Whether a side's host-wide counters can be put down to the test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attribution {
    /// The interface carried the test's bytes and not much else.
    Test,
    /// The interface carried more than the test could have: someone else's
    /// traffic shares the host's counters.
    OtherTraffic {
        interface_payload_bytes: u64,
        test_bytes: u64,
    },
    /// No interface counters: nothing to check the host's counters against.
    Unknown,
}

impl Attribution {
    pub fn is_test(self) -> bool {
        self == Attribution::Test
    }
}

/// Sets the bytes `host`'s interface carried during the trial (less a
/// header allowance per packet) against the payload the test's own ends
/// sent and received there. With both ends on one kernel and interface
/// (loopback), that interface carries both ends' bytes.
pub fn attribution(trial: &TrialResult, kind: &dyn VerdictQuestions, host: Party, shared: bool) -> Attribution {
    let Some(side) = counters(trial, host) else {
        return Attribution::Unknown;
    };
    let Some(nic) = side.nic.as_ref() else {
        return Attribution::Unknown;
    };
    let other = counters(trial, host.other());
    let same_interface = shared && other.is_some_and(|o| o.interface.is_some() && o.interface == side.interface);
    let end_bytes = |end: &crate::model::StreamEnd| end.bytes + end.warmup_bytes;
    let test_bytes: u64 = trial
        .streams
        .iter()
        .map(|s| {
            let sent = if same_interface || s.flow.sender() == host { end_bytes(&s.sender) } else { 0 };
            let received = if same_interface || s.flow.receiver() == host { end_bytes(&s.receiver) } else { 0 };
            sent + received
        })
        .sum::<u64>()
        // Sent at one end and received at the other: twice on one interface.
        + kind.unseen_bytes(trial) * if same_interface { 2 } else { 1 };
    let packets = nic.rx_packets + nic.tx_packets;
    let payload = (nic.rx_bytes + nic.tx_bytes).saturating_sub(packets.saturating_mul(HEADER_BYTES_PER_PACKET));
    let allowed = test_bytes as f64 * (1.0 + FOREIGN_SLACK_SHARE) + FOREIGN_SLACK_BYTES as f64;
    if payload as f64 <= allowed {
        Attribution::Test
    } else {
        Attribution::OtherTraffic {
            interface_payload_bytes: payload,
            test_bytes,
        }
    }
}

/// Hosts that received data in this trial.
fn receivers(trial: &TrialResult) -> impl Iterator<Item = Party> + '_ {
    PARTIES
        .into_iter()
        .filter(|&h| trial.streams.iter().any(|s| s.flow.receiver() == h))
}

/// Datagrams beyond the test's own that the host may see arrive and still
/// have its UDP counters count as the test's (DNS, NTP, mDNS).
pub const FOREIGN_DATAGRAMS: u64 = 100;

/// The receiving host's UDP RcvbufErrors, for a UDP test whose own
/// counts gave no loss verdict, when the interface carried only the test
/// and no more datagrams arrived at the host than the test sent (UDP
/// counters are the namespace's: a flood on another interface counts too).
fn socket_buffer_drops(trial: &TrialResult, kind: &dyn VerdictQuestions, shared: bool) -> Vec<Finding> {
    let Some(sent) = kind.datagrams_sent(trial) else {
        return Vec::new();
    };
    receivers(trial)
        .filter_map(|host| {
            let udp = counters(trial, host)?.udp.as_ref()?;
            let arrived = udp.in_datagrams + udp.in_errors.max(udp.receive_buffer_errors);
            if !attribution(trial, kind, host, shared).is_test() || arrived > sent + sent / 20 + FOREIGN_DATAGRAMS {
                return None;
            }
            let share = udp.receive_buffer_errors_percent?;
            (share >= LOSS_PERCENT && udp.receive_buffer_errors >= 10).then(|| {
                let side = role_name(trial, host);
                Finding::new(
                    "socket_buffer_drops",
                    Class::Drops { receiver: host },
                    Some(host),
                    Some(side),
                    format!(
                        "{side} dropping in the socket buffer: {share:.1}% of datagrams ({} dropped, host-wide count)",
                        udp.receive_buffer_errors
                    ),
                )
                .consequence(format!(
                    "its socket buffer overflowed ({share:.1}% of datagrams, host-wide count)"
                ))
                .weak()
            })
        })
        .collect()
}

fn nic_drops(trial: &TrialResult, kind: &dyn VerdictQuestions, shared: bool) -> Vec<Finding> {
    receivers(trial)
        .filter_map(|host| {
            if !attribution(trial, kind, host, shared).is_test() {
                return None;
            }
            let nic = counters(trial, host)?.nic.as_ref()?;
            let dropped = nic.rx_dropped + nic.rx_missed_errors + nic.rx_fifo_errors;
            let arrived = nic.rx_packets + dropped;
            let share = if arrived > 0 {
                dropped as f64 * 100.0 / arrived as f64
            } else {
                0.0
            };
            (share >= LOSS_PERCENT && dropped >= 10).then(|| {
                let side = role_name(trial, host);
                Finding::new(
                    "nic_drops",
                    Class::Drops { receiver: host },
                    Some(host),
                    Some(side),
                    format!("{side} NIC dropping: {share:.1}% of arriving packets ({dropped} dropped)"),
                )
                .consequence(format!("its NIC dropped {share:.1}% of arriving packets"))
                .weak()
            })
        })
        .collect()
}

/// Retransmissions of the test's own TCP sockets that sent from one host,
/// summed over its streams (TCP_INFO at each stream's end).
#[derive(Debug, Clone, PartialEq)]
pub struct SocketRetransmissions {
    pub streams: usize,
    /// `tcpi_total_retrans`.
    pub segments: u64,
    /// `tcpi_data_segs_out`, when every stream's kernel reported it.
    pub data_segments_sent: Option<u64>,
    /// `tcpi_bytes_retrans` and `tcpi_bytes_sent`, when every stream's
    /// kernel reported them.
    pub bytes: Option<u64>,
    pub bytes_sent: Option<u64>,
}

impl SocketRetransmissions {
    /// Share of bytes sent that were retransmissions, else of data segments.
    pub fn percent(&self) -> Option<f64> {
        let share = |part: u64, whole: u64| (whole > 0).then(|| part as f64 * 100.0 / whole as f64);
        match (self.bytes, self.bytes_sent) {
            (Some(b), Some(sent)) => share(b, sent),
            _ => share(self.segments, self.data_segments_sent?),
        }
    }
}

/// The test's own sockets' retransmissions for streams sent by `host`;
/// None when none of them has TCP_INFO (UDP, or an end that did not report).
pub fn socket_retransmissions(trial: &TrialResult, host: Party) -> Option<SocketRetransmissions> {
    let infos: Vec<_> = trial
        .streams
        .iter()
        .filter(|s| s.flow.sender() == host)
        .filter_map(|s| s.sender.tcp_info.as_ref())
        .collect();
    if infos.is_empty() {
        return None;
    }
    let sum = |field: fn(&crate::model::TcpInfo) -> Option<u64>| infos.iter().map(|i| field(i)).sum::<Option<u64>>();
    Some(SocketRetransmissions {
        streams: infos.len(),
        segments: infos.iter().map(|i| i.retransmits).sum(),
        data_segments_sent: sum(|i| i.data_segments_sent),
        bytes: sum(|i| i.bytes_retransmitted),
        bytes_sent: sum(|i| i.bytes_sent),
    })
}

/// The test's own sockets when they tell, else the namespace-wide
/// RetransSegs/OutSegs of the sending side (which other traffic shares).
fn retransmitting(trial: &TrialResult, kind: &dyn VerdictQuestions, shared: bool) -> Vec<Finding> {
    PARTIES
        .iter()
        .filter(|&&h| trial.streams.iter().any(|s| s.flow.sender() == h))
        .filter_map(|&host| match socket_retransmissions(trial, host) {
            // A kernel too old for the byte and segment counts cannot give a
            // share; the namespace's then speaks.
            Some(own) if own.percent().is_some() => own_retransmissions(trial, host, &own),
            _ if attribution(trial, kind, host, shared).is_test() => namespace_retransmissions(trial, host),
            _ => None,
        })
        .collect()
}

fn own_retransmissions(trial: &TrialResult, host: Party, own: &SocketRetransmissions) -> Option<Finding> {
    let share = own.percent()?;
    // A handful of segments is not evidence.
    let enough = match (own.data_segments_sent, own.bytes_sent) {
        (Some(segments), _) => segments >= 100,
        (None, Some(bytes)) => bytes >= 100 * 1448,
        (None, None) => false,
    };
    (share >= LOSS_PERCENT && enough).then(|| {
        let what = match (own.bytes, own.bytes_sent) {
            (Some(b), Some(sent)) => format!(
                "{share:.1}% of bytes ({} of {}, {} segments)",
                Bytes(b),
                Bytes(sent),
                own.segments
            ),
            _ => format!(
                "{share:.1}% of segments ({} of {})",
                own.segments,
                own.data_segments_sent.unwrap_or(0)
            ),
        };
        let plural = if own.streams == 1 { "" } else { "s" };
        let side = role_name(trial, host);
        Finding::new(
            "retransmitting",
            Class::Retransmits { sender: host },
            Some(host),
            Some(side),
            format!(
                "retransmitting: {what} sent by the {side}'s {} test socket{plural}",
                own.streams
            ),
        )
        .consequence(format!("the {side} retransmitted {share:.1}% of what it sent"))
    })
}

fn namespace_retransmissions(trial: &TrialResult, host: Party) -> Option<Finding> {
    let tcp = counters(trial, host)?.tcp.as_ref()?;
    let share = tcp.retransmitted_percent?;
    (share >= LOSS_PERCENT && tcp.out_segments >= 100).then(|| {
        let side = role_name(trial, host);
        Finding::new(
            "retransmitting",
            Class::Retransmits { sender: host },
            Some(host),
            Some(side),
            format!(
                "retransmitting: {share:.1}% of segments ({} of {} sent namespace-wide on the {side}'s host)",
                tcp.retransmitted_segments, tcp.out_segments
            ),
        )
        .consequence(format!(
            "the {side}'s host retransmitted {share:.1}% of its segments (namespace-wide)"
        ))
        .weak()
    })
}

/// How busy a side was: its stream threads' share of their wall time, and
/// its busiest core. Returns (percent, description).
fn cpu_load(trial: &TrialResult, kind: &dyn VerdictQuestions, host: Party, shared: bool) -> Option<(f64, String)> {
    let cpu = cpu(trial, host);
    let threads = trial
        .streams
        .iter()
        .filter(|s| s.flow.sender() == host || s.flow.receiver() == host)
        .count()
        .max(1);
    let own = cpu.process.user_seconds + cpu.process.system_seconds;
    let thread_percent = if cpu.seconds > 0.0 {
        own * 100.0 / (cpu.seconds * threads as f64)
    } else {
        0.0
    };
    let core = &cpu.busiest_core;
    if thread_percent >= CPU_BOUND_PERCENT {
        let plural = if threads == 1 { "" } else { "s" };
        return Some((
            thread_percent,
            format!(
                "its {threads} stream thread{plural} on CPU {thread_percent:.0}% of the time (user {:.2} s, sys {:.2} s)",
                cpu.process.user_seconds, cpu.process.system_seconds
            ),
        ));
    }
    // On one host both sides see the same cores: a busy core cannot be
    // pinned on either side. A busy core is the host's, not the test's:
    // it counts only when the interface carried nothing but the test.
    let own_host = attribution(trial, kind, host, shared).is_test() && core_is_the_tests(cpu, own, shared);
    (!shared && own_host && core.utilization_percent >= CPU_BOUND_PERCENT).then(|| {
        (
            core.utilization_percent,
            format!(
                "core {} at {:.0}% ({:.0}% softirq, {:.0}% sys, {:.0}% user)",
                core.core, core.utilization_percent, core.softirq_percent, core.system_percent, core.user_percent
            ),
        )
    })
}

/// Whether a busy core's time can be the test's: mostly softirq (the
/// kernel's network work, the interface being the test's), or the test's
/// own threads and the machine's softirq were at least half of what all
/// the machine's cores were busy (a core kept busy by someone else's
/// process, a compiler beside the test, is not the test's bottleneck).
/// On a host of its own, the test's threads using half of what the busy
/// core was busy count too. `own_cpu_seconds` is both ends' on a shared host:
/// set against one core it could add up two cores' worth, so there only
/// the machine-wide share speaks.
fn core_is_the_tests(report: &CpuReport, own_cpu_seconds: f64, shared: bool) -> bool {
    let core = &report.busiest_core;
    if core.softirq_percent >= 50.0 {
        return true;
    }
    let cpus = f64::from(report.logical_cpus.max(1));
    let machine_busy = report.utilization_percent / 100.0 * cpus * report.seconds;
    let tests = own_cpu_seconds + report.softirq_percent / 100.0 * cpus * report.seconds;
    if machine_busy > 0.0 && tests >= machine_busy / 2.0 {
        return true;
    }
    let own_percent = if report.seconds > 0.0 {
        own_cpu_seconds * 100.0 / report.seconds
    } else {
        0.0
    };
    // Results stored before the machine-wide figures were kept have none.
    (!shared || machine_busy <= 0.0) && own_percent >= core.utilization_percent / 2.0
}

fn cpu_bound(trial: &TrialResult, kind: &dyn VerdictQuestions, shared: bool) -> Vec<Finding> {
    // A thread that busy-polls (rr --spin) fills its core whatever holds
    // it back: neither its time on a CPU nor its core's says CPU-bound.
    if kind.threads_spin(trial) {
        return Vec::new();
    }
    let loads: Vec<Finding> = PARTIES
        .iter()
        .filter_map(|&h| {
            let (percent, detail) = cpu_load(trial, kind, h, shared)?;
            let side = role_name(trial, h);
            // The test's own threads are strong evidence; a busy core is the host's.
            let own_threads = detail.starts_with("its ");
            Some(
                Finding::new(
                    "cpu_bound",
                    Class::Cpu,
                    Some(h),
                    Some(side),
                    format!("{side} CPU-bound: {detail}"),
                )
                .strong_if(own_threads && percent >= CPU_BOUND_PERCENT),
            )
        })
        .collect();
    if !loads.is_empty() {
        return loads;
    }
    let core = &trial.cpu.client.busiest_core;
    let both = &trial.cpu;
    let own = [&both.client, &both.agent]
        .iter()
        .map(|c| c.process.user_seconds + c.process.system_seconds)
        .sum();
    let own_host =
        attribution(trial, kind, Party::Client, shared).is_test() && core_is_the_tests(&both.client, own, shared);
    (shared && own_host && core.utilization_percent >= CPU_BOUND_PERCENT)
        .then(|| {
            Finding::new(
                "cpu_bound",
                Class::Cpu,
                None,
                Some("both"),
                format!(
                    "host CPU-bound: core {} at {:.0}% ({:.0}% softirq); client and agent share this host, \
                     so the side cannot be named",
                    core.core, core.utilization_percent, core.softirq_percent
                ),
            )
        })
        .into_iter()
        .collect()
}

/// A TCP sender's round trip over the trial: the median of the smoothed
/// round trips read at each measured interval's end, else the one read at
/// the end (one reading on a 30 us lab path ranged 18 to 66 us).
fn round_trip_us(stream: &StreamResult, info: &TcpInfo) -> u32 {
    let mut rtts: Vec<u32> = stream
        .sender
        .intervals
        .iter()
        .filter(|i| !i.omitted)
        .filter_map(|i| i.rtt_us)
        .filter(|&r| r > 0)
        .collect();
    if rtts.is_empty() {
        return info.rtt_us;
    }
    rtts.sort_unstable();
    rtts[rtts.len() / 2]
}

/// Time with data in flight below which the senders' limited shares say
/// little (the kernel counts them in jiffies of 1-10 ms).
const WINDOW_MIN_BUSY_US: u64 = 200_000;

/// Rule 8: the test's own TCP senders spent most of the time they had data
/// in flight held back by the receiver's window or by their own send
/// buffer (TCP_INFO `tcpi_rwnd_limited`, `tcpi_sndbuf_limited`, summed over
/// the streams of one direction).
fn window_limited(trial: &TrialResult) -> Vec<Finding> {
    PARTIES
        .iter()
        .filter_map(|&sender| {
            let streams: Vec<_> = trial
                .streams
                .iter()
                .filter(|s| s.flow.sender() == sender)
                .filter_map(|s| s.sender.tcp_info.as_ref().map(|i| (s, i)))
                .collect();
            let sum = |f: fn(&TcpInfo) -> Option<u64>| streams.iter().filter_map(|(_, i)| f(i)).sum::<u64>();
            let busy = sum(|i| i.busy_us);
            if busy < WINDOW_MIN_BUSY_US {
                return None;
            }
            let share = |us: u64| us as f64 * 100.0 / busy as f64;
            let (rwnd, sndbuf) = (share(sum(|i| i.rwnd_limited_us)), share(sum(|i| i.sndbuf_limited_us)));
            // The largest granted buffer among the direction's streams.
            let largest =
                |bytes: &dyn Fn(&StreamResult) -> u64| Size(streams.iter().map(|(s, _)| bytes(s)).max().unwrap_or(0));
            // The option that sizes a buffer on that side: the client's own, or the agent's.
            let option = |party: Party, own: &'static str, agent: &'static str| match party {
                Party::Client => own,
                Party::Agent => agent,
            };
            // The most the advertised windows let through at the round
            // trips: a small window over a short path holds a sender back
            // without the kernel counting it most of the time (it counts
            // only sends the window refused outright).
            let rate: f64 = streams.iter().map(|(s, _)| s.sender.bits_per_second).sum();
            //
            // The window is read once, at the end. A window of a few
            // segments opens and closes a whole segment at a time (a 4 KiB
            // buffer advertised 2.90 kB and 4.34 kB in runs a second
            // apart), so the reading may be a segment above what the run
            // had on average: the rate is judged against the ceiling one
            // segment lower too (from three segments up: a reading of one or
            // two is no more than the run had), which a window of hundreds
            // of kilobytes barely notices.
            let ceilings = |less_one_segment: bool| -> Option<f64> {
                streams
                    .iter()
                    .map(|(s, i)| {
                        let window = i.peer_window_bytes?;
                        let segment = u64::from(i.send_mss_bytes);
                        let window = if less_one_segment && segment > 0 && window >= 3 * segment {
                            window - segment
                        } else {
                            window
                        };
                        let rtt = round_trip_us(s, i);
                        (rtt > 0).then(|| window as f64 * 8.0 * 1e6 / f64::from(rtt))
                    })
                    .sum()
            };
            let (ceiling, lower) = (ceilings(false), ceilings(true));
            let reaches = |c: f64| c > 0.0 && rate * 100.0 >= WINDOW_CEILING_PERCENT * c;
            let at_ceiling =
                ceiling.filter(|&c| (reaches(c) || lower.is_some_and(reaches)) && rwnd >= WINDOW_SEEN_PERCENT);
            if let (Some(ceiling), false, false) = (
                at_ceiling,
                rwnd >= WINDOW_LIMITED_PERCENT && rwnd >= sndbuf,
                sndbuf >= WINDOW_LIMITED_PERCENT,
            ) {
                let side = role_name(trial, sender);
                // The verdict names the end whose window it is: the remedy is there.
                let receiver = role_name(trial, sender.other());
                let windows = Bytes(streams.iter().filter_map(|(_, i)| i.peer_window_bytes).sum());
                let rtt = streams.iter().map(|(s, i)| round_trip_us(s, i)).max().unwrap_or(0);
                return Some(Finding::new(
                    "receive_window_limited",
                    Class::ReceiveWindow {
                        receiver: sender.other(),
                    },
                    Some(sender),
                    Some(receiver),
                    format!(
                        "receive-window-limited: the receiver's window ({windows} advertised{}) lets at most {} \
                         through at the {rtt} us round trip, and the {side} reached {} {} (held back outright \
                         {rwnd:.0}% of the time it had data in flight; receive buffer {} at the end): a larger one \
                         (-w or {}) lets more be in flight",
                        if streams.len() > 1 { " over the streams" } else { "" },
                        Rate(ceiling),
                        Rate(rate),
                        // The window is read once, at the end; the round trip is a median.
                        match rate * 100.0 / ceiling {
                            p if p > 100.0 =>
                                "= all of it (the window as read at the end, the round trip the intervals' median)"
                                    .to_string(),
                            p if p < WINDOW_CEILING_PERCENT => format!(
                                "= {p:.0}% of it, and more than {WINDOW_CEILING_PERCENT:.0}% of what one segment \
                                 less lets through (a window of a few segments opens and closes a segment at a \
                                 time; this one was read at the end)"
                            ),
                            p => format!("= {p:.0}% of it"),
                        },
                        largest(&|s| s.receiver.socket.receive_buffer_bytes),
                        option(sender.other(), "--rcvbuf", "--remote-rcvbuf"),
                    ),
                ));
            }
            if rwnd >= WINDOW_LIMITED_PERCENT && rwnd >= sndbuf {
                Some(Finding::new(
                    "receive_window_limited",
                    Class::ReceiveWindow {
                        receiver: sender.other(),
                    },
                    Some(sender),
                    Some(role_name(trial, sender.other())),
                    format!(
                        "receive-window-limited: the receiver's window held the {} back {rwnd:.0}% of the time it had \
                     data in flight (receive buffer {} at the end): a larger one (-w or {}) lets more be in flight, \
                     unless the receiver reads too slowly",
                        role_name(trial, sender),
                        largest(&|s| s.receiver.socket.receive_buffer_bytes),
                        option(sender.other(), "--rcvbuf", "--remote-rcvbuf"),
                    ),
                ))
            } else if sndbuf >= WINDOW_LIMITED_PERCENT {
                let side = role_name(trial, sender);
                Some(Finding::new(
                    "send_buffer_limited",
                    Class::SendBuffer,
                    Some(sender),
                    Some(side),
                    format!(
                    "send-buffer-limited: the {}'s own send buffer held it back {sndbuf:.0}% of the time it had data \
                     in flight (send buffer {} at the end): a larger one (-w or {}) lets more be in flight",
                    role_name(trial, sender),
                    largest(&|s| s.sender.socket.send_buffer_bytes),
                    option(sender, "--sndbuf", "--remote-sndbuf"),
                ),
                ))
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
