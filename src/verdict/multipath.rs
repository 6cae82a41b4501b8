//! The verdict of a stream over several paths (MPTCP): what each path could
//! carry (its links' goodput, the slower end's tbf rate or real speed),
//! summed, against what its subflows carried, and what held the stream
//! back. In order:
//!
//! 1. a subflow never created: the agent announced more addresses than
//!    the client joined (its path manager's limits, or a join that failed);
//! 2. every path at its line rate (the links carried what they can);
//! 3. one path at its line rate and the others below theirs: the slow
//!    path held them back (MPTCP's scheduler and the connection's one
//!    receive window wait for its data);
//! 4. a path the scheduler left nearly idle;
//! 5. else the single-path reasoning (a CPU, a window), with the share of
//!    the paths' sum beside it.

use std::net::IpAddr;

use super::PathShaper;
use crate::linerate::{self, Framing};
use crate::model::{LinkEnd, Party, PathFigures, PathsSummary, TrialResult, Verdict};
use crate::probe::mptcp::{MptcpConnection, Subflow};
use crate::units::Rate;
use crate::workload::transport::mptcp;

/// A path counts as at its line rate from this share of its goodput.
pub const AT_LINE_RATE_PERCENT: f64 = 90.0;
/// A path carrying less than this share of the stream's data, while it
/// could carry at least [`IDLE_PATH_CAPACITY_PERCENT`] of the sum, was
/// left idle by the scheduler.
pub const IDLE_SHARE_PERCENT: f64 = 5.0;
pub const IDLE_PATH_CAPACITY_PERCENT: f64 = 20.0;

/// How a path is named in the verdict: its addresses and its link.
fn path_name(p: &PathFigures) -> String {
    let link = p
        .link_bits_per_second
        .map_or(String::new(), |l| format!(" ({} link)", Rate(l as f64)));
    format!("{} -> {}{link}", p.from, p.to)
}

/// A rate a path's packets meet: how it counts a packet, where it came
/// from (`nic`, `qdisc`, `lab`) and, for a lab router's, where it sits.
struct Limit {
    bits_per_second: u64,
    framing: Framing,
    source: &'static str,
    shaper_name: Option<String>,
}

const TBF: Framing = Framing::Qdisc {
    overhead_bytes: 0,
    mpu_bytes: 0,
    atm: false,
};

/// The rates of an interface: its tbf and its real (not nominal) speed.
fn end_limits(end: &LinkEnd) -> impl Iterator<Item = Limit> {
    let shaper = end.shaping_bits_per_second.map(|r| Limit {
        bits_per_second: r,
        framing: TBF,
        source: "qdisc",
        shaper_name: None,
    });
    let wire = end
        .link_speed_bits_per_second
        .filter(|_| !end.link_speed_nominal)
        .map(|r| Limit {
            bits_per_second: r,
            framing: Framing::EthernetWire,
            source: "nic",
            shaper_name: None,
        });
    [shaper, wire].into_iter().flatten()
}

/// The slowest rate on a subflow's path, from both ends' interfaces of it
/// and a shaper between them toward the receiver, and what it carries of
/// TCP payload at the subflow's MSS.
fn path_limit(sent: &Subflow, received: Option<&Subflow>, between: Option<PathShaper>) -> Option<(Limit, Option<f64>)> {
    let ends: Vec<&LinkEnd> = [sent.interface.as_ref(), received.and_then(|r| r.interface.as_ref())]
        .into_iter()
        .flatten()
        .collect();
    let router = between.map(|s| Limit {
        bits_per_second: s.bits_per_second,
        framing: TBF,
        source: "lab",
        shaper_name: Some(s.name),
    });
    let limit = ends
        .iter()
        .flat_map(|e| end_limits(e))
        .chain(router)
        .min_by_key(|l| l.bits_per_second)?;
    let mtu = ends.iter().filter_map(|e| e.mtu_bytes).min().unwrap_or(1500);
    let goodput = linerate::goodput(
        limit.bits_per_second as f64,
        u64::from(mtu),
        u64::from(sent.send_mss_bytes),
        limit.framing,
    )
    .map(|g| g.goodput_bits_per_second);
    Some((limit, goodput))
}

fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

/// The trial's paths, each with what it carried and could carry, and
/// their sum. `toward` names a shaper between the ends on the way to an
/// address (a lab router's tbf), where the ends' interfaces do not show it.
pub fn summary(trial: &TrialResult, toward: &dyn Fn(IpAddr) -> Option<PathShaper>) -> PathsSummary {
    let mut paths: Vec<PathFigures> = Vec::new();
    let total: f64 = trial.streams.iter().map(|s| s.receiver.bits_per_second).sum();
    for stream in &trial.streams {
        let (sender, receiver) = mptcp::ends(stream);
        for share in mptcp::shares(stream) {
            let (from, to) = (canonical(share.from.ip()), canonical(share.to.ip()));
            if let Some(p) = paths.iter_mut().find(|p| p.from == from && p.to == to) {
                p.bits_per_second += share.bits_per_second;
                continue;
            }
            let received = receiver.as_ref().and_then(|c| {
                c.subflows
                    .iter()
                    .find(|s| canonical(s.remote.ip()) == from && s.remote.port() == share.from.port())
            });
            let sent = share.sender.as_ref().or_else(|| {
                sender
                    .as_ref()
                    .and_then(|c| c.subflows.iter().find(|s| canonical(s.local.ip()) == from))
            });
            let limit = sent.and_then(|s| path_limit(s, received, toward(to)));
            let (limit, goodput) = match limit {
                Some((l, g)) => (Some(l), g),
                None => (None, None),
            };
            paths.push(PathFigures {
                from,
                to,
                bits_per_second: share.bits_per_second,
                share_percent: 0.0,
                link_bits_per_second: limit.as_ref().map(|l| l.bits_per_second),
                link_speed_source: limit.as_ref().map(|l| l.source.to_string()),
                shaper_name: limit.and_then(|l| l.shaper_name),
                goodput_bits_per_second: goodput,
            });
        }
    }
    for p in &mut paths {
        p.share_percent = if total > 0.0 {
            p.bits_per_second * 100.0 / total
        } else {
            0.0
        };
    }
    let sum: Option<f64> = paths.iter().map(|p| p.goodput_bits_per_second).sum();
    let sum = sum.filter(|s| *s > 0.0);
    PathsSummary {
        measured_bits_per_second: total,
        theoretical_goodput_bits_per_second: sum,
        percent_of_theoretical_goodput: sum.map(|s| total * 100.0 / s),
        paths,
    }
}

/// Why the client has fewer subflows than the agent offered paths, from
/// both ends' connection figures; None when every announced address was
/// joined.
fn missing_subflow(client: &MptcpConnection, agent: &MptcpConnection) -> Option<Verdict> {
    let announced = agent.add_addr_signal;
    if client.fallback || announced == 0 || client.extra_subflows >= announced {
        return None;
    }
    let joined = client.extra_subflows;
    let want = announced.to_string();
    let (side, why) = if client.add_addr_accepted_max < announced {
        (
            "client",
            format!(
                "the client's path manager accepts {} announced address(es): raise it \
                 (`ip mptcp limits set subflows {want} add_addr_accepted {want}` on the client)",
                client.add_addr_accepted_max
            ),
        )
    } else if client.extra_subflows_max < announced {
        (
            "client",
            format!(
                "the client's path manager allows {} extra subflow(s): raise it \
                 (`ip mptcp limits set subflows {want} add_addr_accepted {want}` on the client)",
                client.extra_subflows_max
            ),
        )
    } else if agent.extra_subflows_max < announced {
        (
            "agent",
            format!(
                "the agent's path manager admits {} extra subflow(s): raise it \
                 (`ip mptcp limits set subflows {want} ...` on the agent)",
                agent.extra_subflows_max
            ),
        )
    } else {
        (
            "path",
            format!(
                "the client accepted {} and {} join(s) did not come up: check that the announced \
                 address is reachable from the client and that nothing drops MP_JOIN",
                client.add_addr_accepted,
                client.add_addr_accepted.saturating_sub(joined)
            ),
        )
    };
    let addresses = match announced {
        1 => "1 other address".to_string(),
        n => format!("{n} other addresses"),
    };
    Some(Verdict::on_side(
        "mptcp_subflow_missing",
        side,
        format!("a subflow is missing: the agent announced {addresses}, the client joined {joined}; {why}"),
    ))
}

/// The connections of the trial's MPTCP streams as (client end, agent end).
fn connections(trial: &TrialResult) -> Vec<(MptcpConnection, MptcpConnection)> {
    trial
        .streams
        .iter()
        .filter_map(|stream| {
            let (sender, receiver) = mptcp::ends(stream);
            let (sender, receiver) = (sender?, receiver?);
            Some(match stream.flow.sender() {
                Party::Client => (sender, receiver),
                Party::Agent => (receiver, sender),
            })
        })
        .collect()
}

fn range_of(percents: &[f64]) -> String {
    let lo = percents.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = percents.iter().copied().fold(0.0, f64::max);
    if (hi - lo).abs() < 0.5 {
        format!("{lo:.0}%")
    } else {
        format!("{lo:.0}-{hi:.0}%")
    }
}

/// An MPTCP connection that fell back to plain TCP: both ends opened MPTCP
/// sockets (each has MPTCP figures), yet the handshake carried no
/// MP_CAPABLE through, so something between them stripped the option (a
/// firewall, a NAT, a TCP proxy). One path, no subflows.
fn fell_back(trial: &TrialResult) -> Option<Verdict> {
    let all = connections(trial);
    let fallen = all
        .iter()
        .filter(|(client, agent)| client.fallback || agent.fallback)
        .count();
    if fallen == 0 {
        return None;
    }
    let streams = match all.len() {
        1 => "the stream".to_string(),
        n => format!("{fallen} of {n} streams"),
    };
    Some(Verdict::on_side(
        "mptcp_fallback",
        "path",
        format!(
            "MPTCP fell back to plain TCP on {streams}: both hosts opened MPTCP sockets but the handshake \
             arrived without MPTCP's option (MP_CAPABLE), so something between them strips it (a firewall, \
             NAT or proxy); one path, no subflows"
        ),
    ))
}

/// A connection that fell back to plain TCP, or a subflow the agent
/// offered and the client never made, as the cause, `generic` after it:
/// asked of every MPTCP trial, also of one that ran over a single path
/// because of it.
pub fn missing(trial: &TrialResult, generic: &Verdict) -> Option<Verdict> {
    fell_back(trial)
        .or_else(|| {
            connections(trial)
                .iter()
                .find_map(|(client, agent)| missing_subflow(client, agent))
        })
        .map(|v| {
            let also = match generic.kind.as_str() {
                "none" => String::new(),
                _ => format!("; also: {}", generic.summary),
            };
            let v = Verdict {
                summary: format!("{}{also}", v.summary),
                ..v
            };
            v.caused_first(generic)
        })
}

/// The verdict of a trial whose streams ran over several paths, from its
/// [`summary`]; `generic` is the single-path reasoning's (a CPU, a window).
pub fn judge(trial: &TrialResult, summary: &PathsSummary, generic: &Verdict) -> Verdict {
    let paths = &summary.paths;
    let carried: f64 = paths.iter().map(|p| p.bits_per_second).sum();
    let sum = summary.theoretical_goodput_bits_per_second;
    let of_sum = sum.map(|s| {
        format!(
            "{} over {} paths, {:.0}% of their links' {} goodput",
            Rate(carried),
            paths.len(),
            carried * 100.0 / s,
            Rate(s)
        )
    });
    if let Some(v) = missing(trial, generic) {
        return v;
    }
    let percents: Option<Vec<f64>> = paths.iter().map(PathFigures::percent_of_goodput).collect();
    if let (Some(percents), Some(of_sum)) = (&percents, &of_sum) {
        if percents.iter().all(|p| *p >= AT_LINE_RATE_PERCENT) {
            return Verdict::on_side(
                "links_at_line_rate",
                "path",
                format!("every path at its line rate: {of_sum}"),
            )
            .caused_first(generic);
        }
        if let Some(v) = slow_path(paths, of_sum) {
            return v.caused_first(generic);
        }
        let capacity: f64 = sum.unwrap_or(0.0);
        let idle = paths.iter().find(|p| {
            p.share_percent < IDLE_SHARE_PERCENT
                && p.goodput_bits_per_second
                    .is_some_and(|g| g * 100.0 >= IDLE_PATH_CAPACITY_PERCENT * capacity)
        });
        if let Some(idle) = idle {
            return Verdict::on_side(
                "mptcp_subflow_idle",
                "path",
                format!(
                    "the scheduler left a path nearly idle: {} carried {:.1}% of the data; {of_sum}",
                    path_name(idle),
                    idle.share_percent
                ),
            )
            .caused_first(generic);
        }
    }
    match (generic.kind.as_str(), of_sum) {
        // One link's reasoning has no link to be at here.
        ("none" | "link_bound" | "model_exceeded", Some(of_sum)) => {
            Verdict::new("none", format!("nothing visible limited the stream ({of_sum})"))
        }
        (_, Some(of_sum)) => Verdict {
            summary: format!("{}; {of_sum}", generic.summary),
            ..generic.clone()
        },
        (_, None) => generic.clone(),
    }
}

/// One path at its line rate, on the slowest link, while a faster path
/// stayed below its own: the slow path held the others back.
fn slow_path(paths: &[PathFigures], of_sum: &str) -> Option<Verdict> {
    let slowest = paths
        .iter()
        .filter(|p| p.link_bits_per_second.is_some())
        .min_by_key(|p| p.link_bits_per_second)?;
    let others: Vec<f64> = paths
        .iter()
        .filter(|p| p.from != slowest.from || p.to != slowest.to)
        .filter_map(PathFigures::percent_of_goodput)
        .collect();
    let slowest_percent = slowest.percent_of_goodput().unwrap_or(0.0);
    let faster_link = paths
        .iter()
        .any(|p| p.link_bits_per_second > slowest.link_bits_per_second);
    if faster_link && slowest_percent >= AT_LINE_RATE_PERCENT && others.iter().any(|p| *p < AT_LINE_RATE_PERCENT) {
        return Some(Verdict::on_side(
            "link_slow",
            "path",
            format!(
                "the slow path held the others back: {} at its line rate ({slowest_percent:.0}%), \
                         the faster paths at {} of theirs (MPTCP's scheduler and the connection's one \
                         receive window wait for the slow path's data); {of_sum}",
                path_name(slowest),
                range_of(&others)
            ),
        ));
    }
    None
}

#[cfg(test)]
#[path = "multipath_tests.rs"]
mod tests;
