//! Several links at once (`--links`): which local address pairs with which
//! agent address ([`resolve`]), each link's figures in a trial, the
//! aggregate and the scaling efficiency ([`summarize`]), and what limited
//! the aggregate ([`judge`]): a CPU, one slower link, every link at its
//! line rate, or nothing visible. A bond whose hash policy puts every flow
//! of the test on one slave is warned about.
//!
//! Scaling efficiency = aggregate / (links x best single link). The best
//! single link is the best link measured alone in the same run
//! (`--scaling`), else the best link of the trial itself.

use std::net::IpAddr;

use crate::model::{
    BondFacts, InterfaceAddress, LinkEnd, LinkPair, LinkResult, MultilinkSummary, Party, TestSpec, TrialResult, Verdict,
};
use crate::probe::bonding;
use crate::units::Rate;

/// Share of its link rate from which a link counts as at its line rate.
pub const AT_LINE_RATE_PERCENT: f64 = 90.0;
/// A link slower than this share of the mean of the others is named.
pub const SLOW_LINK_PERCENT: f64 = 80.0;
/// The same, when a side's CPU limited the aggregate: a starved side
/// shares unevenly (seen in the lab with a receiver at 1% of a core: 62
/// against 82 Mbit/s, and 28 against 66), so only a link far slower than
/// the others, or one at its own line rate, is its own answer.
pub const SLOW_LINK_UNDER_CPU_PERCENT: f64 = 25.0;

/// One `--links` item as typed: a local address or interface name, and the
/// agent's address or host name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkArg {
    pub local: String,
    pub remote: String,
}

/// `--links` as typed: `auto`, or `LOCAL=REMOTE,...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinksArg {
    Auto,
    Pairs(Vec<LinkArg>),
}

/// Parses `--links`; the names are resolved later, against the hosts.
pub fn parse_links(text: &str) -> Result<LinksArg, String> {
    let text = text.trim();
    if text == "auto" {
        return Ok(LinksArg::Auto);
    }
    let mut pairs = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        let Some((local, remote)) = item.split_once('=') else {
            return Err(format!(
                "'{item}' is not LOCAL=REMOTE; write e.g. eth1=10.0.1.2,eth2=10.0.2.2 \
                 (a local address or interface, '=', the agent's address), or 'auto'"
            ));
        };
        let (local, remote) = (local.trim(), remote.trim());
        if local.is_empty() || remote.is_empty() {
            return Err(format!(
                "'{item}' lacks the local or the remote side; write LOCAL=REMOTE"
            ));
        }
        pairs.push(LinkArg {
            local: local.to_string(),
            remote: remote.to_string(),
        });
    }
    if pairs.len() > crate::model::spec::MAX_LINKS {
        return Err(format!(
            "{} links given, at most {} are supported",
            pairs.len(),
            crate::model::spec::MAX_LINKS
        ));
    }
    Ok(LinksArg::Pairs(pairs))
}

/// Whether an address is worth pairing: not loopback, not link-local IPv6
/// (it would need a scope id).
fn usable(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => !v4.is_loopback() && !v4.is_unspecified(),
        IpAddr::V6(v6) => !v6.is_loopback() && (v6.segments()[0] & 0xffc0) != 0xfe80 && !v6.is_unspecified(),
    }
}

/// Turns `--links` into address pairs. `local` and `agent` list the
/// addresses of both hosts; `resolve_host` resolves an agent host name;
/// `route` gives the local address the kernel would use toward an agent
/// address (for `auto` across routers).
pub fn resolve(
    arg: &LinksArg,
    local: &[InterfaceAddress],
    agent: &[InterfaceAddress],
    resolve_host: &dyn Fn(&str) -> Vec<IpAddr>,
    route: &dyn Fn(IpAddr) -> Option<IpAddr>,
) -> Result<Vec<LinkPair>, String> {
    let pairs = match arg {
        LinksArg::Auto => auto_pairs(local, agent, route)?,
        LinksArg::Pairs(items) => {
            let mut pairs = Vec::new();
            for item in items {
                pairs.push(resolve_pair(item, local, agent, resolve_host)?);
            }
            pairs
        }
    };
    crate::model::spec::validate_link_pairs(&pairs).map_err(|e| e.to_string())?;
    Ok(pairs)
}

fn resolve_pair(
    item: &LinkArg,
    local: &[InterfaceAddress],
    agent: &[InterfaceAddress],
    resolve_host: &dyn Fn(&str) -> Vec<IpAddr>,
) -> Result<LinkPair, String> {
    let remote = match item
        .remote
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        Ok(ip) => vec![ip],
        Err(_) => {
            let found = resolve_host(&item.remote);
            if found.is_empty() {
                return Err(format!(
                    "{}={}: '{}' is neither an address nor a host name that resolves",
                    item.local, item.remote, item.remote
                ));
            }
            found
        }
    };
    let Some(remote) = remote
        .iter()
        .copied()
        .find(|ip| agent.iter().any(|a| a.address == ip.to_canonical()))
    else {
        let theirs: Vec<String> = agent
            .iter()
            .filter(|a| usable(a.address))
            .map(|a| format!("{} ({})", a.address, a.interface))
            .collect();
        return Err(format!(
            "{}={}: the agent has no address {}; its addresses are {}",
            item.local,
            item.remote,
            remote.iter().map(|ip| ip.to_string()).collect::<Vec<_>>().join(" or "),
            if theirs.is_empty() {
                "none usable".into()
            } else {
                theirs.join(", ")
            }
        ));
    };
    let remote = remote.to_canonical();
    let client = match item
        .local
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        Ok(ip) => {
            if !local.iter().any(|a| a.address == ip.to_canonical()) {
                return Err(format!(
                    "{}={}: {} is not an address of this host; pick one of {}",
                    item.local,
                    item.remote,
                    ip,
                    list_local(local)
                ));
            }
            ip.to_canonical()
        }
        Err(_) => {
            let of_interface: Vec<&InterfaceAddress> = local.iter().filter(|a| a.interface == item.local).collect();
            if of_interface.is_empty() {
                return Err(format!(
                    "{}={}: '{}' is neither an address nor an interface of this host; interfaces with addresses: {}",
                    item.local,
                    item.remote,
                    item.local,
                    list_local(local)
                ));
            }
            of_interface
                .iter()
                .filter(|a| a.address.is_ipv4() == remote.is_ipv4() && usable(a.address))
                .max_by_key(|a| a.same_subnet(remote))
                .map(|a| a.address)
                .ok_or_else(|| {
                    format!(
                        "{}={}: interface {} has no usable {} address",
                        item.local,
                        item.remote,
                        item.local,
                        if remote.is_ipv4() { "IPv4" } else { "IPv6" }
                    )
                })?
        }
    };
    Ok(LinkPair { client, agent: remote })
}

fn list_local(local: &[InterfaceAddress]) -> String {
    let list: Vec<String> = local
        .iter()
        .filter(|a| usable(a.address))
        .map(|a| format!("{} ({})", a.address, a.interface))
        .collect();
    if list.is_empty() {
        "(none)".into()
    } else {
        list.join(", ")
    }
}

/// `--links auto`: every agent address that shares a subnet with a local
/// address pairs with it; where none does, the local address the kernel
/// routes through toward it, when that address is not taken yet. Each
/// address is used once.
fn auto_pairs(
    local: &[InterfaceAddress],
    agent: &[InterfaceAddress],
    route: &dyn Fn(IpAddr) -> Option<IpAddr>,
) -> Result<Vec<LinkPair>, String> {
    let mut pairs: Vec<LinkPair> = Vec::new();
    let theirs: Vec<&InterfaceAddress> = agent.iter().filter(|a| usable(a.address)).collect();
    let ours: Vec<&InterfaceAddress> = local.iter().filter(|a| usable(a.address)).collect();
    let taken = |pairs: &[LinkPair], ip: IpAddr| pairs.iter().any(|p| p.client == ip || p.agent == ip);
    for a in &theirs {
        if let Some(l) = ours
            .iter()
            .find(|l| l.same_subnet(a.address) && a.same_subnet(l.address) && !taken(&pairs, l.address))
        {
            if !taken(&pairs, a.address) {
                pairs.push(LinkPair {
                    client: l.address,
                    agent: a.address,
                });
            }
        }
    }
    if pairs.is_empty() {
        for a in &theirs {
            let Some(via) = route(a.address) else { continue };
            if ours.iter().any(|l| l.address == via) && !taken(&pairs, via) && !taken(&pairs, a.address) {
                pairs.push(LinkPair {
                    client: via,
                    agent: a.address,
                });
            }
        }
    }
    match pairs.len() {
        0 => Err(format!(
            "--links auto found no pair: no agent address ({}) shares a subnet with, or is routed through its own \
             one of, this host's ({}); give the pairs as LOCAL=REMOTE",
            theirs
                .iter()
                .map(|a| a.address.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            ours.iter()
                .map(|a| a.address.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        _ => Ok(pairs),
    }
}

/// Fills in `trial.links` from the streams and both sides' link ends.
pub fn summarize(trial: &mut TrialResult, spec: &TestSpec, client: &[LinkEnd], agent: &[LinkEnd]) {
    if spec.links.is_empty() {
        return;
    }
    let mut links = Vec::with_capacity(spec.links.len());
    for (i, pair) in spec.links.iter().enumerate() {
        let streams: Vec<_> = trial
            .streams
            .iter()
            .filter(|s| spec.link_of(s.stream_id) == Some(i))
            .collect();
        let end = |ends: &[LinkEnd], ip: IpAddr| {
            ends.get(i).cloned().unwrap_or_else(|| LinkEnd {
                address: ip.to_string(),
                ..LinkEnd::default()
            })
        };
        let (client_end, agent_end) = (end(client, pair.client), end(agent, pair.agent));
        let link_bits_per_second = link_rate(&client_end, &agent_end);
        let receiver: f64 = streams.iter().map(|s| s.receiver.bits_per_second).sum();
        links.push(LinkResult {
            link: i as u32 + 1,
            stream_ids: streams.iter().map(|s| s.stream_id).collect(),
            client: client_end,
            agent: agent_end,
            sender_bits_per_second: streams.iter().map(|s| s.sender.bits_per_second).sum(),
            receiver_bits_per_second: receiver,
            link_bits_per_second,
            percent_of_link: link_bits_per_second.map(|l| receiver * 100.0 / l as f64),
            alone_receiver_bits_per_second: None,
        });
    }
    let bonds = links
        .iter()
        .flat_map(|l| [(Party::Client, &l.client), (Party::Agent, &l.agent)])
        .filter_map(|(party, end)| {
            let name = end.interface.as_deref()?;
            let mut bond = bonding::bonds(party.as_str())
                .into_iter()
                .find(|b| b.name == name || b.slaves.iter().any(|s| s.name == name))?;
            bond.host = party.as_str().to_string();
            Some(bond)
        })
        .fold(Vec::<BondFacts>::new(), |mut all, b| {
            if !all.iter().any(|x| x.name == b.name && x.host == b.host) {
                all.push(b);
            }
            all
        });
    let mut summary = MultilinkSummary {
        links,
        bonds,
        ..MultilinkSummary::default()
    };
    rescale(&mut summary);
    trial.links = Some(summary);
}

/// The slower of both ends' shaping rates and real (not nominal) speeds.
fn link_rate(client: &LinkEnd, agent: &LinkEnd) -> Option<u64> {
    [client, agent]
        .iter()
        .flat_map(|e| {
            [
                e.shaping_bits_per_second,
                e.link_speed_bits_per_second.filter(|_| !e.link_speed_nominal),
            ]
        })
        .flatten()
        .min()
}

/// Recomputes the aggregate, the best single link and the efficiency.
pub fn rescale(summary: &mut MultilinkSummary) {
    let links = &summary.links;
    summary.aggregate_receiver_bits_per_second = links.iter().map(|l| l.receiver_bits_per_second).sum();
    summary.aggregate_sender_bits_per_second = links.iter().map(|l| l.sender_bits_per_second).sum();
    let alone: Vec<f64> = links.iter().filter_map(|l| l.alone_receiver_bits_per_second).collect();
    let (best, source) = if !alone.is_empty() && alone.len() == links.len() {
        (alone.iter().copied().fold(0.0, f64::max), "alone")
    } else {
        (
            links.iter().map(|l| l.receiver_bits_per_second).fold(0.0, f64::max),
            "together",
        )
    };
    summary.best_single_link_bits_per_second = best;
    summary.best_single_link_source = source.into();
    summary.scaling_efficiency_percent = if best > 0.0 {
        summary.aggregate_receiver_bits_per_second * 100.0 / (links.len() as f64 * best)
    } else {
        0.0
    };
}

/// Applies a link speed the user gave (`--link-speed`) to every link.
pub fn set_link_speed(summary: &mut MultilinkSummary, bits_per_second: u64) {
    for l in &mut summary.links {
        l.link_bits_per_second = Some(bits_per_second);
        l.percent_of_link = Some(l.receiver_bits_per_second * 100.0 / bits_per_second as f64);
    }
}

/// A link in words: `link 2 (eth1 10.200.2.1 -> 10.200.2.2)`.
pub fn link_name(l: &LinkResult) -> String {
    match &l.client.interface {
        Some(iface) => format!("link {} ({iface} {} -> {})", l.link, l.client.address, l.agent.address),
        None => format!("link {} ({} -> {})", l.link, l.client.address, l.agent.address),
    }
}

/// What limited the aggregate, first rule that holds: one link much slower
/// than the others (named); a side's CPU (cgroup throttling or threads
/// waiting for a CPU, the side with the stronger evidence, with its busiest
/// core and softirq share); every link at its line rate; else `generic`,
/// the trial's verdict by the single-path rules, or nothing visible.
pub fn judge(trial: &TrialResult, summary: &MultilinkSummary, generic: &Verdict) -> Verdict {
    // A side short of CPU shares it unevenly between the links' streams
    // (seen in the lab: 62 against 82 Mbit/s with a starved receiver): then
    // only a link far slower than the others is its own answer.
    // The single-path reasoning weighed the CPU evidence already: when it
    // found causes and no end's CPU among them (a paced test that got what
    // it offered), a waiting thread did not limit the aggregate either.
    let cpu_weighed_out = !generic.evidence.is_empty()
        && !generic
            .evidence
            .iter()
            .any(|e| Verdict::is_cpu_kind(&e.kind) && matches!(e.role.as_str(), "cause" | "candidate"));
    let cpu = if cpu_weighed_out {
        None
    } else {
        cpu_limit(trial, generic)
    };
    let slow_share = match cpu {
        Some(_) => SLOW_LINK_UNDER_CPU_PERCENT,
        None => SLOW_LINK_PERCENT,
    };
    // Every link at its line rate is the answer whatever a CPU waited: the
    // links carried what they can.
    let verdict = slow_link(summary, slow_share)
        .or_else(|| at_line_rate(summary))
        .or(cpu)
        .map(|own| own.caused_first(generic))
        .unwrap_or_else(|| match generic.kind.as_str() {
            "none" | "link_bound" | "model_exceeded" => Verdict::new(
                "none",
                format!(
                    "nothing visible limited the aggregate ({} over {} links, {:.0}% scaling efficiency)",
                    Rate(summary.aggregate_receiver_bits_per_second),
                    summary.links.len(),
                    summary.scaling_efficiency_percent
                ),
            ),
            _ => generic.clone(),
        });
    match bond_warning(trial, summary) {
        Some(warning) => Verdict {
            summary: format!("{}; {warning}", verdict.summary),
            ..verdict
        },
        None => verdict,
    }
}

/// The side whose CPU held the test back most: its cgroup throttled it in
/// most periods, or its trial threads waited for a CPU most of the time
/// they were ready to run; else a CPU-bound generic verdict.
fn cpu_limit(trial: &TrialResult, generic: &Verdict) -> Option<Verdict> {
    let evidence = |party: Party| -> Option<(f64, &'static str, String)> {
        let counters = match party {
            Party::Client => trial.counters.client.as_ref(),
            Party::Agent => trial.counters.agent.as_ref(),
        }?;
        if let Some(cg) = &counters.cgroup_cpu {
            let share = cg.throttled_percent_of_periods.unwrap_or(0.0);
            if share >= Verdict::THROTTLED_PERCENT && cg.periods >= 10 {
                return Some((
                    100.0 + share,
                    "cgroup_throttled",
                    format!("its cgroup {} throttled it in {share:.0}% of CPU periods", cg.cgroup),
                ));
            }
        }
        let s = counters.scheduling.as_ref()?;
        let share = s.wait_percent?;
        let long_enough = s.wait_seconds * 100.0 >= Verdict::WAIT_SHARE_OF_TRIAL_PERCENT * counters.seconds;
        (share >= Verdict::WAIT_PERCENT && long_enough).then(|| {
            (
                share,
                "cpu_starved",
                format!(
                    "its threads waited for a CPU {share:.0}% of the time they were ready to run \
                     (ran {:.2} s, waited {:.2} s)",
                    s.run_seconds, s.wait_seconds
                ),
            )
        })
    };
    let found = [Party::Client, Party::Agent]
        .into_iter()
        .filter_map(|p| evidence(p).map(|e| (p, e)))
        .max_by(|a, b| a.1 .0.total_cmp(&b.1 .0));
    let Some((party, (_, kind, detail))) = found else {
        return (generic.kind == "cpu_bound").then(|| Verdict {
            kind: generic.kind.clone(),
            summary: format!("aggregate limited by the {}", generic.summary),
            side: generic.side.clone(),
            evidence: Vec::new(),
        });
    };
    let core = match party {
        Party::Client => &trial.cpu.client.busiest_core,
        Party::Agent => &trial.cpu.agent.busiest_core,
    };
    let core = match core.utilization_percent > 0.0 {
        true => format!(
            "; its busiest core {} at {:.0}% ({:.0}% softirq)",
            core.core, core.utilization_percent, core.softirq_percent
        ),
        false => String::new(),
    };
    Some(Verdict::on_side(
        kind,
        role_of(trial, party),
        format!(
            "aggregate limited by the {}'s CPU ({}): {detail}{core}",
            role_of(trial, party),
            party.as_str()
        ),
    ))
}

/// "sender", "receiver", or the party's name when it did both.
fn role_of(trial: &TrialResult, party: Party) -> &'static str {
    let sends = trial.streams.iter().any(|s| s.flow.sender() == party);
    let receives = trial.streams.iter().any(|s| s.flow.receiver() == party);
    match (sends, receives) {
        (true, false) => "sender",
        (false, true) => "receiver",
        _ => party.as_str(),
    }
}

fn slow_link(summary: &MultilinkSummary, below_percent: f64) -> Option<Verdict> {
    if summary.links.len() < 2 {
        return None;
    }
    let slowest = summary
        .links
        .iter()
        .min_by(|a, b| a.receiver_bits_per_second.total_cmp(&b.receiver_bits_per_second))?;
    let others: Vec<f64> = summary
        .links
        .iter()
        .filter(|l| l.link != slowest.link)
        .map(|l| l.receiver_bits_per_second)
        .collect();
    let mean = others.iter().sum::<f64>() / others.len() as f64;
    // A link that carried what it can is slow whatever a CPU did.
    let at_own_line_rate = slowest.percent_of_link.is_some_and(|p| p >= AT_LINE_RATE_PERCENT);
    let below_percent = match at_own_line_rate {
        true => below_percent.max(SLOW_LINK_PERCENT),
        false => below_percent,
    };
    if mean <= 0.0 || slowest.receiver_bits_per_second * 100.0 >= below_percent * mean {
        return None;
    }
    // A link whose interfaces took in as much as the others' did carry its
    // share: what its receivers missed was lost above the interface (a
    // receiving socket that overflowed), which is the receiver's, not the
    // link's (seen in the lab: every link's interface 53.5k packets, the
    // receivers 73 to 94 Mbit/s).
    if let Some(arrived) = summary.links.iter().map(arrived_bytes).collect::<Option<Vec<u64>>>() {
        let own = arrived_bytes(slowest).unwrap_or(0) as f64;
        let others: Vec<f64> = summary
            .links
            .iter()
            .zip(&arrived)
            .filter(|(l, _)| l.link != slowest.link)
            .map(|(_, &a)| a as f64)
            .collect();
        let others_mean = others.iter().sum::<f64>() / others.len() as f64;
        if others_mean > 0.0 && own * 100.0 >= below_percent * others_mean {
            return None;
        }
    }
    let own = match (slowest.link_bits_per_second, slowest.percent_of_link) {
        (Some(rate), Some(p)) if p >= AT_LINE_RATE_PERCENT => {
            format!(", at its own line rate ({p:.0}% of {})", Rate(rate as f64))
        }
        (Some(rate), Some(p)) => format!(", {p:.0}% of its {} link", Rate(rate as f64)),
        _ => String::new(),
    };
    Some(Verdict::on_side(
        "link_slow",
        "path",
        format!(
            "{} is the slow one: {} against {} on average on the other {} link{}{own}",
            link_name(slowest),
            Rate(slowest.receiver_bits_per_second),
            Rate(mean),
            others.len(),
            if others.len() == 1 { "" } else { "s" }
        ),
    ))
}

/// Bytes that arrived at both ends' interfaces of a link over the trial,
/// when both ends counted them.
fn arrived_bytes(l: &LinkResult) -> Option<u64> {
    Some(l.client.nic.as_ref()?.rx_bytes + l.agent.nic.as_ref()?.rx_bytes)
}

fn at_line_rate(summary: &MultilinkSummary) -> Option<Verdict> {
    let shares: Vec<f64> = summary.links.iter().filter_map(|l| l.percent_of_link).collect();
    if shares.len() != summary.links.len() || shares.iter().any(|p| *p < AT_LINE_RATE_PERCENT) {
        return None;
    }
    let min = shares.iter().copied().fold(f64::INFINITY, f64::min);
    Some(Verdict::on_side(
        "links_at_line_rate",
        "path",
        format!(
            "every link at its line rate (each at {min:.0}% or more of its link rate): \
             {} over {} links is what the links carry",
            Rate(summary.aggregate_receiver_bits_per_second),
            summary.links.len()
        ),
    ))
}

/// A bond that hashes by layer 2 (or 2+3) carries every flow between one
/// pair of addresses on one slave: the test cannot use more than one.
pub fn bond_warning(trial: &TrialResult, summary: &MultilinkSummary) -> Option<String> {
    let _ = trial;
    summary.bonds.iter().find_map(|b| {
        let policy = b.transmit_hash_policy.as_deref()?;
        let pairs_per_bond = summary
            .links
            .iter()
            .filter(|l| {
                let end = if b.host == "client" { &l.client } else { &l.agent };
                end.interface.as_deref() == Some(b.name.as_str())
            })
            .count();
        (bonding::mode_uses_hash(&b.mode) && bonding::hash_puts_host_pair_on_one_slave(policy) && pairs_per_bond <= 1)
            .then(|| {
                format!(
                    "warning: the {}'s bond {} ({}) hashes by {policy}: all flows of this test take one of its {} \
                     slaves; set xmit_hash_policy layer3+4 or test over several address pairs",
                    b.host,
                    b.name,
                    b.mode,
                    b.slaves.len()
                )
            })
    })
}

#[cfg(test)]
#[path = "multilink_tests.rs"]
mod tests;
