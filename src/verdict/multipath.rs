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

use crate::linerate::{self, Framing};
use crate::model::{LinkEnd, Party, TrialResult, Verdict};
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

/// One path of the trial's MPTCP streams: a sender address and a receiver
/// address, every subflow between them.
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    pub from: IpAddr,
    pub to: IpAddr,
    pub bits_per_second: f64,
    /// Part of all the streams' data it carried.
    pub share_percent: f64,
    /// The slower end's link rate (tbf or real speed), when both ends
    /// named their interface.
    pub link_bits_per_second: Option<u64>,
    /// What that link carries of TCP payload at the subflow's MSS.
    pub goodput_bits_per_second: Option<f64>,
}

impl Path {
    pub fn percent_of_goodput(&self) -> Option<f64> {
        self.goodput_bits_per_second
            .filter(|g| *g > 0.0)
            .map(|g| self.bits_per_second * 100.0 / g)
    }

    fn name(&self) -> String {
        let link = self
            .link_bits_per_second
            .map_or(String::new(), |l| format!(" ({} link)", Rate(l as f64)));
        format!("{} -> {}{link}", self.from, self.to)
    }
}

/// The slower of an interface's tbf rate and real (not nominal) speed, and
/// how that rate counts a packet.
fn end_rate(end: &LinkEnd) -> Option<(u64, Framing)> {
    let shaper = end.shaping_bits_per_second.map(|r| {
        (
            r,
            Framing::Qdisc {
                overhead_bytes: 0,
                mpu_bytes: 0,
                atm: false,
            },
        )
    });
    let wire = end
        .link_speed_bits_per_second
        .filter(|_| !end.link_speed_nominal)
        .map(|r| (r, Framing::EthernetWire));
    [shaper, wire].into_iter().flatten().min_by_key(|(r, _)| *r)
}

/// The goodput of a subflow's path, from both ends' interfaces of it.
fn path_goodput(sent: &Subflow, received: Option<&Subflow>) -> (Option<u64>, Option<f64>) {
    let ends: Vec<&LinkEnd> = [sent.interface.as_ref(), received.and_then(|r| r.interface.as_ref())]
        .into_iter()
        .flatten()
        .collect();
    let Some((rate, framing)) = ends.iter().filter_map(|e| end_rate(e)).min_by_key(|(r, _)| *r) else {
        return (None, None);
    };
    let mtu = ends.iter().filter_map(|e| e.mtu_bytes).min().unwrap_or(1500);
    let goodput = linerate::goodput(rate as f64, u64::from(mtu), u64::from(sent.send_mss_bytes), framing)
        .map(|g| g.goodput_bits_per_second);
    (Some(rate), goodput)
}

fn canonical(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

/// The trial's paths, each with what it carried and could carry.
pub fn paths(trial: &TrialResult) -> Vec<Path> {
    let mut paths: Vec<Path> = Vec::new();
    let total: f64 = trial.streams.iter().map(|s| s.receiver.bits_per_second).sum();
    for stream in &trial.streams {
        let (sender, receiver) = mptcp::ends(stream);
        for share in mptcp::shares(stream) {
            let (from, to) = (canonical(share.from.ip()), canonical(share.to.ip()));
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
            let (link, goodput) = sent.map_or((None, None), |s| path_goodput(s, received));
            match paths.iter_mut().find(|p| p.from == from && p.to == to) {
                Some(p) => p.bits_per_second += share.bits_per_second,
                None => paths.push(Path {
                    from,
                    to,
                    bits_per_second: share.bits_per_second,
                    share_percent: 0.0,
                    link_bits_per_second: link,
                    goodput_bits_per_second: goodput,
                }),
            }
        }
    }
    for p in &mut paths {
        p.share_percent = if total > 0.0 {
            p.bits_per_second * 100.0 / total
        } else {
            0.0
        };
    }
    paths
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

/// A subflow the agent offered and the client never made, as the cause,
/// `generic` after it: asked of every MPTCP trial, also of one that ran
/// over a single path because of it.
pub fn missing(trial: &TrialResult, generic: &Verdict) -> Option<Verdict> {
    connections(trial)
        .iter()
        .find_map(|(client, agent)| missing_subflow(client, agent))
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

/// The verdict of a trial whose streams ran over several paths; `generic`
/// is the single-path reasoning's (a CPU, a window).
pub fn judge(trial: &TrialResult, generic: &Verdict) -> Verdict {
    let paths = paths(trial);
    let carried: f64 = paths.iter().map(|p| p.bits_per_second).sum();
    let sum: Option<f64> = paths.iter().map(|p| p.goodput_bits_per_second).sum();
    let of_sum = sum.filter(|s| *s > 0.0).map(|s| {
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
    let percents: Option<Vec<f64>> = paths.iter().map(Path::percent_of_goodput).collect();
    if let (Some(percents), Some(of_sum)) = (&percents, &of_sum) {
        if percents.iter().all(|p| *p >= AT_LINE_RATE_PERCENT) {
            return Verdict::on_side(
                "links_at_line_rate",
                "path",
                format!("every path at its line rate: {of_sum}"),
            )
            .caused_first(generic);
        }
        if let Some(v) = slow_path(&paths, of_sum) {
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
                    idle.name(),
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
fn slow_path(paths: &[Path], of_sum: &str) -> Option<Verdict> {
    let slowest = paths
        .iter()
        .filter(|p| p.link_bits_per_second.is_some())
        .min_by_key(|p| p.link_bits_per_second)?;
    let others: Vec<f64> = paths
        .iter()
        .filter(|p| p.from != slowest.from || p.to != slowest.to)
        .filter_map(Path::percent_of_goodput)
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
                slowest.name(),
                range_of(&others)
            ),
        ));
    }
    None
}

#[cfg(test)]
#[path = "multipath_tests.rs"]
mod tests;
