//! Each receiver of a group test read from its trial: whether it joined,
//! how long its join took, what it lost and where ([`Reading`]); which
//! receiver fared worst ([`slowest`]); and the table that shows them with
//! the sender ([`write_table`]).
//!
//! Where a receiver's loss went is told by its own host's kernel: drops
//! at its socket (its receive buffer was full: a slow or busy receiver)
//! are counted per datagram (SO_RXQ_OVFL); loss beyond them happened
//! before the socket (the wire, a switch port's queue, the NIC).

use std::io::{self, Write};

use serde::{Deserialize, Serialize};

use super::{MulticastParams, WithIperf2};
use crate::model::receivers::{GroupRun, ReceiverCounts, ReceiverFigures, ReceiverRun};
use crate::model::TrialResult;
use crate::units::Rate;
use crate::workload::udp::result::{UdpEnd, UdpResult, KEY};
use crate::workload::{FanoutAgent, FanoutView, SpecError, TestSpec, Workload};

/// The verdict's findings that put loss on the receiving host itself.
const HOST_FINDINGS: [&str; 5] = [
    "cpu_starved",
    "cgroup_throttled",
    "cpu_bound",
    "socket_buffer_drops",
    "nic_drops",
];

/// How a receiver fared, from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// Every datagram sent after the warm-up arrived.
    Complete,
    /// Some were lost.
    Losing,
    /// Nothing arrived within the join wait.
    NeverJoined,
    /// Its side failed (the join was refused, the agent was lost).
    Failed,
}

impl Standing {
    pub fn as_str(self) -> &'static str {
        match self {
            Standing::Complete => "complete",
            Standing::Losing => "losing",
            Standing::NeverJoined => "never joined",
            Standing::Failed => "failed",
        }
    }
}

/// One receiver as the table and the document show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    pub standing: Standing,
    /// Seconds from its join to its first datagram.
    pub join_latency_seconds: Option<f64>,
    /// What it lost and why, or what failed, in words.
    pub words: String,
}

/// A receiver's counts: the sum of its trial (sender's count against its own).
pub fn counts(trial: &TrialResult) -> Option<UdpResult> {
    trial.sum.extras.get(KEY)
}

/// The sender's counts as a receiver's trial holds them (its own end of
/// the stream), whatever the receiver got.
pub fn sender(trial: &TrialResult) -> UdpResult {
    let Some(end) = trial.streams.first().map(|s| &s.sender) else {
        return UdpResult::default();
    };
    let own: UdpEnd = end.extras.get(KEY).unwrap_or_default();
    UdpResult {
        sent_datagrams: own.datagrams,
        sender_bits_per_second: end.bits_per_second,
        offered_bits_per_second: own.offered_bits_per_second,
        ..UdpResult::default()
    }
}

/// Why nothing arrived, in words: for a receiver behind a router (`routed`),
/// the TTL or the router; on the sender's segment, the join itself.
pub fn never_joined(p: &MulticastParams, routed: bool) -> String {
    let wait = crate::workload::args::parse::duration_in_words(p.join_wait_seconds);
    let group = p.group_text();
    if !p.nicbench_sends() {
        return match routed {
            true => format!(
                "never joined: nothing arrived within {wait} of joining {group}; it is behind a router: iperf 2's \
                 TTL (its -T, 1 unless set) must count one per router on the way plus one, and the routers must \
                 route the group"
            ),
            false => format!(
                "never joined: nothing arrived within {wait} of joining {group}: was the iperf 2 sender running \
                 (iperf -c GROUP -u -p PORT) and sending on this segment? Else IGMP/MLD snooping that did not take \
                 the join, or a filter on the host or its switch port"
            ),
        };
    }
    match (routed, p.ttl) {
        (true, 0..=1) => format!(
            "never joined: nothing arrived within {wait} of joining {group}; it is behind a router and the \
             group's TTL {} ends at the first one: raise --ttl (one per router on the way, plus one), and the \
             routers must route the group",
            p.ttl
        ),
        (true, _) => format!(
            "never joined: nothing arrived within {wait} of joining {group}; it is behind a router, and the \
             router(s) on the way do not forward the group (no multicast routing for it: smcroute, pimd), or \
             its join did not reach them"
        ),
        (false, _) => match p.source {
            // A source-specific join takes nothing from any other address.
            Some(source) => format!(
                "never joined: nothing arrived within {wait} of joining {group} on the sender's segment: it takes \
                 the group from {source} only, so the sender must send from that address (--source names this \
                 host's address toward the receivers); else IGMPv3/MLDv2 snooping that did not take the join, or \
                 a filter on the host or its switch port"
            ),
            None => format!(
                "never joined: nothing arrived within {wait} of joining {group} on the sender's segment (IGMP/MLD \
                 snooping that did not take the join, or a filter on the host or its switch port)"
            ),
        },
    }
}

/// Reads a receiver's trial of a test with parameters `p`; `routed` says
/// whether a router stands between the sender and the receiver.
pub fn read(trial: &TrialResult, p: &MulticastParams, routed: bool) -> Reading {
    let receiver = trial.streams.first().map(|s| &s.receiver);
    if let Some(error) = receiver.and_then(|r| r.error.clone()) {
        return Reading {
            standing: Standing::Failed,
            join_latency_seconds: None,
            words: error,
        };
    }
    let own: Option<UdpEnd> = receiver.and_then(|r| r.extras.get(KEY));
    let join_latency_seconds = own
        .and_then(|end| end.received)
        .and_then(|received| received.first_datagram_after_seconds);
    let Some(udp) = counts(trial) else {
        return Reading {
            standing: Standing::Failed,
            join_latency_seconds,
            words: "its report holds no datagram counts".into(),
        };
    };
    if join_latency_seconds.is_none() && udp.received_datagrams == 0 {
        return Reading {
            standing: Standing::NeverJoined,
            join_latency_seconds,
            words: never_joined(p, routed),
        };
    }
    // A finding of this receiver's trial that names its own host (CPU
    // starved or throttled, its socket buffer, its NIC), as the cause or
    // beside another: that host lost them, whatever the stage its kernel
    // dropped them at (a starved napi thread leaves them in the switch
    // port's ring, which reads as loss before the socket).
    let own_host = trial
        .verdict
        .iter()
        .flat_map(|v| v.evidence.iter())
        .find(|e| e.side.as_deref() == Some("receiver") && HOST_FINDINGS.contains(&e.kind.as_str()));
    if udp.lost_datagrams == 0 {
        let all = format!("all {} datagrams arrived", udp.received_datagrams);
        return Reading {
            standing: Standing::Complete,
            join_latency_seconds,
            words: match own_host {
                Some(finding) => format!("{all}, but its host held them up: {}", finding.summary),
                None => all,
            },
        };
    }
    let at_socket = udp.receiver_socket_drops_measured.unwrap_or(udp.receiver_socket_drops);
    let lost = format!("lost {} ({:.2}%)", udp.lost_datagrams, udp.loss_percent);
    let words = match own_host {
        Some(finding) => format!("{lost}: its host is the cause: {}", finding.summary),
        // No CPU figure here: in a lab whose hosts share the machine's
        // cores it would be the machine's, not this receiver's host's.
        None if at_socket > 0 && at_socket * 2 >= udp.lost_datagrams => format!(
            "{lost}, {at_socket} of them dropped at its socket: its receive buffer overflowed, the receiver did \
             not keep up; give it CPU or a larger --remote-rcvbuf"
        ),
        None => format!(
            "{lost} before its socket ({at_socket} at the socket): on the wire, a switch port's queue or its NIC"
        ),
    };
    Reading {
        standing: Standing::Losing,
        join_latency_seconds,
        words,
    }
}

/// The index of the receiver that fared worst: the worst standing, then
/// the most loss, then the lowest rate; None without receivers.
pub fn slowest(readings: &[(Reading, Option<UdpResult>)]) -> Option<usize> {
    let key = |(reading, udp): &(Reading, Option<UdpResult>)| {
        let loss = udp.as_ref().map_or(100.0, |u| u.loss_percent);
        let rate = udp.as_ref().map_or(0.0, |u| u.receiver_bits_per_second);
        (reading.standing, loss, -rate)
    };
    (0..readings.len()).max_by(|&a, &b| {
        key(&readings[a])
            .partial_cmp(&key(&readings[b]))
            .unwrap_or(std::cmp::Ordering::Equal)
            // The first of equals is named.
            .then(b.cmp(&a))
    })
}

/// The sender's line: what it sent, and whether it held the offered rate.
pub fn sender_words(udp: &UdpResult) -> String {
    match udp.percent_of_offer() {
        Some(p) if p < crate::workload::base::OFFER_REACHED_PERCENT => format!(
            "the sender gave out: {} of the {} offered ({p:.0}%)",
            Rate(udp.sender_bits_per_second),
            Rate(udp.offered_bits_per_second.unwrap_or_default())
        ),
        _ => format!(
            "sent {} datagrams at {}",
            udp.sent_datagrams,
            Rate(udp.sender_bits_per_second)
        ),
    }
}

/// One row of the table: a receiver's name and its reading and counts.
pub struct Row<'a> {
    pub name: &'a str,
    pub reading: &'a Reading,
    pub udp: Option<&'a UdpResult>,
}

fn optional<T>(value: Option<T>, show: impl Fn(T) -> String) -> String {
    value.map_or_else(|| "-".to_string(), show)
}

/// The table: the sender (its counts when they are ours), then one row
/// per receiver.
pub fn write_table(out: &mut dyn Write, sender: Option<&UdpResult>, sender_name: &str, rows: &[Row]) -> io::Result<()> {
    let width = rows
        .iter()
        .map(|r| r.name.len())
        .chain([sender_name.len(), 8])
        .max()
        .unwrap_or(8);
    let line = |cells: [&str; 10]| {
        format!(
            "{:<width$}  {:>10}  {:>14}  {:>10}  {:>9}  {:>5}  {:>9}  {:>9}  {:>11}  {}",
            cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6], cells[7], cells[8], cells[9]
        )
    };
    writeln!(
        out,
        "{}",
        line([
            "host",
            "joined in",
            "rate",
            "datagrams",
            "lost",
            "dup",
            "reordered",
            "jitter",
            "one-way p50",
            "standing"
        ])
    )?;
    let rate = optional(sender, |s| Rate(s.sender_bits_per_second).to_string());
    let sent = optional(sender, |s| s.sent_datagrams.to_string());
    writeln!(
        out,
        "{}",
        line([sender_name, "-", &rate, &sent, "-", "-", "-", "-", "-", "sender"])
    )?;
    for row in rows {
        let u = row.udp;
        let cells = [
            row.name.to_string(),
            optional(
                row.reading.join_latency_seconds,
                crate::workload::base::one_way::delay_text,
            ),
            optional(u, |u| Rate(u.receiver_bits_per_second).to_string()),
            optional(u, |u| u.received_datagrams.to_string()),
            optional(u, |u| format!("{:.2}%", u.loss_percent)),
            optional(u, |u| u.duplicate_datagrams.to_string()),
            optional(u, |u| u.out_of_order_datagrams.to_string()),
            optional(u, |u| format!("{:.1} us", u.jitter_us)),
            optional(u.and_then(|u| u.one_way.as_ref()), |d| match d.telling() {
                true => crate::workload::base::one_way::delay_text(d.p50_seconds),
                false => "unknown".into(),
            }),
            row.reading.standing.as_str().to_string(),
        ];
        writeln!(out, "{}", line(cells.each_ref().map(String::as_str)))?;
    }
    Ok(())
}

/// An agent as named, with its address when the name is not that.
fn named(name: &str, address: &str) -> String {
    match name == address {
        true => name.to_string(),
        false => format!("{name} ({address})"),
    }
}

/// Whether a router stands between this host (the sender) and `agent`.
fn routed(agent: &crate::model::Endpoint) -> bool {
    agent
        .address
        .parse::<std::net::SocketAddr>()
        .is_ok_and(|a| !crate::probe::nic::on_link(a.ip()))
}

/// How `nicbench multicast` reads its receivers.
pub struct Receivers;

impl Receivers {
    fn params(spec: &TestSpec) -> MulticastParams {
        spec.params().unwrap_or_default()
    }
}

impl FanoutView for Receivers {
    fn group(&self, spec: &TestSpec) -> Option<std::net::IpAddr> {
        Some(Receivers::params(spec).group)
    }

    fn read_switch(&self, receivers: &mut [ReceiverRun], switch: &crate::model::switch::SwitchRecord) {
        super::switch::read_switch(receivers, switch)
    }

    fn heading(&self, spec: &TestSpec, agents: usize) -> String {
        let p = Receivers::params(spec);
        let words = crate::workload::args::parse::duration_in_words;
        let sent = match p.with_iperf2 {
            Some(WithIperf2::Sender) => "from an iperf 2 sender".to_string(),
            with => format!(
                "{}(TTL {}), {} datagrams {}{}",
                p.sender_agent
                    .as_ref()
                    .map_or(String::new(), |a| format!("sent by {a} ")),
                p.ttl,
                crate::units::Size(spec.message_bytes),
                p.rate_bits_per_second
                    .map_or("as fast as possible".to_string(), |r| format!("at {}", Rate(r as f64))),
                if with.is_some() { " with iperf 2's header" } else { "" }
            ),
        };
        format!(
            "nicbench multicast: {} {sent}, {agents} receiver{}, {} after a {} warm-up",
            p.group_text(),
            if agents == 1 { "" } else { "s" },
            words(spec.duration_seconds),
            words(spec.omit_seconds),
        )
    }

    fn read(&self, spec: &TestSpec, agents: Vec<FanoutAgent>) -> (Vec<ReceiverRun>, Option<usize>) {
        let p = Receivers::params(spec);
        let readings: Vec<(Reading, Option<UdpResult>)> = agents
            .iter()
            .map(|agent| match &agent.result {
                Ok(trial) => (read(trial, &p, routed(&agent.agent)), counts(trial)),
                Err(why) => (
                    Reading {
                        standing: Standing::Failed,
                        join_latency_seconds: None,
                        words: why.clone(),
                    },
                    None,
                ),
            })
            .collect();
        // Only a receiver with a trial can be the run's top level.
        let with_trial: Vec<usize> = (0..agents.len()).filter(|&i| agents[i].result.is_ok()).collect();
        let ranked: Vec<(Reading, Option<UdpResult>)> = with_trial.iter().map(|&i| readings[i].clone()).collect();
        let worst = slowest(&ranked).map(|k| with_trial[k]);
        let runs = agents
            .into_iter()
            .zip(readings)
            .enumerate()
            .map(|(i, (agent, (reading, _)))| ReceiverRun {
                name: agent.name,
                agent: agent.agent,
                standing: match reading.standing {
                    Standing::NeverJoined => "never_joined".into(),
                    other => other.as_str().into(),
                },
                slowest: Some(i) == worst,
                join_latency_seconds: reading.join_latency_seconds,
                verdict: reading.words,
                result: agent.result.ok(),
            })
            .collect();
        (runs, worst)
    }

    fn sent_by_agent(&self, spec: &mut TestSpec, name: &str) -> Result<(), SpecError> {
        let mut p: MulticastParams = spec.params()?;
        p.sender_agent = Some(name.to_string());
        spec.set_params(&p)?;
        super::Multicast.validate(spec)
    }

    /// Read as the command read it, but for the words: whether a router
    /// stood between is this host's view, not the test's, and the figures
    /// need no words.
    fn stored_figures(&self, run: &crate::model::RunResult) -> ReceiverFigures {
        let p = Receivers::params(&run.spec);
        let trial = &run.result;
        let reading = read(trial, &p, false);
        let sent = sender(trial);
        ReceiverFigures {
            counts: counts(trial).map(|u| ReceiverCounts {
                received_bits_per_second: u.receiver_bits_per_second,
                received_datagrams: u.received_datagrams,
                lost_datagrams: u.lost_datagrams,
                loss_percent: u.loss_percent,
            }),
            join_latency_seconds: reading.join_latency_seconds,
            standing: reading.standing.as_str().into(),
            sent_bits_per_second: (p.nicbench_sends() && sent.sent_datagrams > 0)
                .then_some(sent.sender_bits_per_second),
            offered_bits_per_second: sent
                .offered_bits_per_second
                .or(p.rate_bits_per_second.map(|r| r as f64))
                .filter(|r| *r > 0.0),
        }
    }

    fn write_text(&self, run: &GroupRun, out: &mut dyn Write) -> io::Result<()> {
        let p = Receivers::params(&run.run.spec);
        let sender_counts = sender(&run.run.result);
        let readings: Vec<(Reading, Option<UdpResult>)> = run
            .receivers
            .iter()
            .map(|r| match &r.result {
                Some(trial) => (read(trial, &p, routed(&r.agent)), counts(trial)),
                None => (
                    Reading {
                        standing: Standing::Failed,
                        join_latency_seconds: None,
                        words: r.verdict.clone(),
                    },
                    None,
                ),
            })
            .collect();
        let rows: Vec<Row> = run
            .receivers
            .iter()
            .zip(&readings)
            .map(|(r, (reading, udp))| Row {
                name: &r.name,
                reading,
                udp: udp.as_ref(),
            })
            .collect();
        let nicbench_sends = p.nicbench_sends();
        let sender_name = match (&p.sender_agent, nicbench_sends) {
            (Some(agent), _) => agent.clone(),
            (None, true) => "sender (this host)".into(),
            (None, false) => "sender (iperf 2)".into(),
        };
        let sender_row = nicbench_sends.then_some(&sender_counts);
        write_table(out, sender_row, &sender_name, &rows)?;
        writeln!(out)?;
        for r in &run.receivers {
            writeln!(out, "{}: {}", r.name, r.verdict)?;
        }
        match run.receivers.iter().find(|r| r.slowest) {
            Some(worst) if run.receivers.iter().all(|r| r.standing == "complete") => writeln!(
                out,
                "every receiver got every datagram; the slowest by rate: {}",
                named(&worst.name, &worst.agent.address)
            )?,
            Some(worst) => writeln!(
                out,
                "slowest receiver: {}: {}",
                named(&worst.name, &worst.agent.address),
                worst.verdict
            )?,
            None => {}
        }
        if let Some(d) = counts(&run.run.result).and_then(|u| u.one_way) {
            writeln!(out, "one-way delay (slowest receiver): {}", d.text())?;
        }
        if let Some(switch) = &run.switch {
            super::switch::write_block(out, switch, &run.receivers)?;
        }
        match nicbench_sends {
            true => writeln!(
                out,
                "sender{}: {}",
                p.sender_agent
                    .as_ref()
                    .map_or(String::new(), |a| format!(" {}", named(a, &run.run.client.address))),
                sender_words(&sender_counts)
            ),
            false => writeln!(
                out,
                "sender: iperf 2, not measured here; each receiver's loss is against iperf 2's numbering from its \
                 first datagram to iperf 2's closing datagram (or its last arrival without one)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_joined_says_the_ttl_the_router_or_the_join() {
        let mut p = MulticastParams::default();
        assert!(never_joined(&p, true).contains("TTL 1 ends at the first one: raise --ttl"));
        p.ttl = 4;
        assert!(never_joined(&p, true).contains("do not forward the group"));
        let local = never_joined(&p, false);
        assert!(
            local.starts_with("never joined: nothing arrived within 1 s") && local.contains("snooping"),
            "{local}"
        );
        p.group = "232.1.1.1".parse().unwrap();
        p.source = Some("10.0.0.9".parse().unwrap());
        let ssm = never_joined(&p, false);
        assert!(
            ssm.contains("from 10.0.0.9 only, so the sender must send from that address"),
            "{ssm}"
        );
    }

    /// A receiver's trial: the sender sent `sent`, it got `got` (its first
    /// after `join` s), and the verdict found `findings` (kind, side).
    fn trial(sent: u64, got: u64, join: Option<f64>, findings: &[(&str, &str)]) -> TrialResult {
        let mut trial = TrialResult::default();
        let mut stream = crate::model::StreamResult {
            stream_id: 1,
            flow: crate::model::Flow::ClientToAgent,
            sender: Default::default(),
            receiver: Default::default(),
            extras: Default::default(),
        };
        let own = UdpEnd {
            datagrams: got,
            received: Some(crate::workload::udp::result::UdpReceived {
                first_datagram_after_seconds: join,
                ..Default::default()
            }),
            ..UdpEnd::default()
        };
        stream.receiver.extras.set(KEY, &own);
        trial.streams.push(stream);
        let udp = UdpResult {
            sent_datagrams: sent,
            received_datagrams: got,
            lost_datagrams: sent - got,
            loss_percent: (sent - got) as f64 * 100.0 / sent as f64,
            ..UdpResult::default()
        };
        trial.sum.extras.set(KEY, &udp);
        let mut verdict = crate::model::Verdict::new("none", "no bottleneck".into());
        for (kind, side) in findings {
            verdict.evidence.push(crate::model::Evidence {
                kind: kind.to_string(),
                side: Some(side.to_string()),
                strength: "strong".into(),
                role: "also".into(),
                explained_by: None,
                summary: format!("{side} {kind}"),
            });
        }
        trial.verdict = Some(verdict);
        trial
    }

    #[test]
    fn a_receiver_reads_complete_losing_or_never_joined_and_names_its_host_when_the_verdict_does() {
        let p = MulticastParams::default();
        let all = read(&trial(100, 100, Some(0.002), &[]), &p, false);
        assert_eq!(
            (all.standing, all.words.as_str()),
            (Standing::Complete, "all 100 datagrams arrived")
        );
        assert_eq!(all.join_latency_seconds, Some(0.002));
        let late = read(&trial(100, 100, Some(0.002), &[("cpu_starved", "receiver")]), &p, false);
        assert!(
            late.words.ends_with("but its host held them up: receiver cpu_starved"),
            "{}",
            late.words
        );
        let starved = read(
            &trial(
                100,
                90,
                Some(0.002),
                &[("path_loss", "path"), ("cpu_starved", "receiver")],
            ),
            &p,
            false,
        );
        assert_eq!(starved.standing, Standing::Losing);
        assert!(
            starved
                .words
                .starts_with("lost 10 (10.00%): its host is the cause: receiver cpu_starved"),
            "{}",
            starved.words
        );
        let sender_side = read(&trial(100, 90, Some(0.002), &[("cpu_starved", "sender")]), &p, false);
        assert!(
            sender_side.words.contains("before its socket"),
            "the sender's host is not this receiver's: {}",
            sender_side.words
        );
        let silent = read(&trial(100, 0, None, &[]), &p, true);
        assert_eq!(silent.standing, Standing::NeverJoined);
        assert!(silent.words.contains("behind a router"), "{}", silent.words);
    }

    /// A receiver's saved run reads back as the command read its trial:
    /// its counts, join and standing; the sender's rates as its own end
    /// counted them, and no sent rate when iperf 2 sent.
    #[test]
    fn a_saved_receiver_run_reads_back_its_counts_join_standing_and_the_senders_rates() {
        let mut trial = trial(1000, 970, Some(0.004), &[]);
        let end = &mut trial.streams[0].sender;
        end.bits_per_second = 8e6;
        end.extras.set(
            KEY,
            &UdpEnd {
                datagrams: 1000,
                offered_bits_per_second: Some(1e7),
                ..UdpEnd::default()
            },
        );
        let mut spec = crate::model::spec::tests::spec(super::super::NAME);
        spec.params = serde_json::to_value(MulticastParams::default()).unwrap();
        let mut run = crate::model::RunResult {
            schema: "nicbench.run/1".into(),
            workload: super::super::NAME.into(),
            started_at_unix_seconds: 1.8e9,
            client: Default::default(),
            agent: Default::default(),
            spec,
            result: trial,
            trials: Vec::new(),
            interrupted: false,
            repetition: None,
            peer_protocol: None,
        };
        let figures = Receivers.stored_figures(&run);
        let counts = figures.counts.unwrap();
        assert_eq!((counts.received_datagrams, counts.lost_datagrams), (970, 30));
        assert_eq!(counts.loss_percent, 3.0);
        assert_eq!(figures.join_latency_seconds, Some(0.004));
        assert_eq!(figures.standing, "losing");
        assert_eq!(figures.sent_bits_per_second, Some(8e6));
        assert_eq!(figures.offered_bits_per_second, Some(1e7));
        run.spec.params["with_iperf2"] = "sender".into();
        let from_iperf2 = Receivers.stored_figures(&run);
        assert_eq!(from_iperf2.sent_bits_per_second, None, "this host sent nothing");
    }

    fn reading(standing: Standing) -> Reading {
        Reading {
            standing,
            join_latency_seconds: Some(0.001),
            words: String::new(),
        }
    }

    fn udp(loss_percent: f64, rate: f64) -> Option<UdpResult> {
        Some(UdpResult {
            loss_percent,
            receiver_bits_per_second: rate,
            ..UdpResult::default()
        })
    }

    #[test]
    fn the_slowest_is_the_worst_standing_then_the_most_loss_then_the_lowest_rate() {
        let rows = vec![
            (reading(Standing::Complete), udp(0.0, 100.0)),
            (reading(Standing::Losing), udp(3.0, 97.0)),
            (reading(Standing::Losing), udp(1.0, 99.0)),
        ];
        assert_eq!(slowest(&rows), Some(1));
        let mut with_silent = rows.clone();
        with_silent.push((reading(Standing::NeverJoined), udp(100.0, 0.0)));
        assert_eq!(slowest(&with_silent), Some(3));
        let ties = vec![
            (reading(Standing::Complete), udp(0.0, 100.0)),
            (reading(Standing::Complete), udp(0.0, 100.0)),
        ];
        assert_eq!(slowest(&ties), Some(0), "the first of equals");
        assert_eq!(slowest(&[]), None);
    }
}
