//! The pure part of the lab: names (from [`super::names`]), validation of
//! what a user asks for, and the layout (hosts, links, interfaces,
//! addresses, routes, host files) that follows from it. No I/O here, so all
//! of it is unit-tested.

use std::net::Ipv4Addr;

// A lab's names are found here, where its spec is checked (the command
// line checks a lab name through `spec::validate_name`); they live below
// both the spec and the state file, which names its namespaces with them.
pub use super::names::{
    auto_name_pid, netns_name, parse_netns_name, unique_name, validate_name, MAX_NAME_LEN, NETNS_PREFIX,
};
use super::state::{HostState, LabState, LinkEnd, LinkState};
use super::{LabError, Topology};

/// Most hosts in a lab (named `a` to `p`; the router is `r`).
pub const MAX_HOSTS: usize = 16;
/// Most parallel links between two hosts (or between a host and the router).
pub const MAX_LINKS: usize = 8;
/// Smallest and largest MTU a veth link accepts.
pub const MTU_RANGE: std::ops::RangeInclusive<u32> = 68..=65535;
/// Slowest rate limit accepted (tbf needs at least a few packets per second).
pub const MIN_RATE_BITS_PER_SECOND: u64 = 8_000;
/// Shortest and longest router queue (`--queue`), in seconds.
pub const QUEUE_SECONDS_RANGE: std::ops::RangeInclusive<f64> = 0.001..=10.0;
/// Largest tbf queue in bytes (the kernel keeps the limit in 32 bits).
pub const MAX_QUEUE_BYTES: u64 = u32::MAX as u64;
/// Name of the router host in a via-router lab.
pub const ROUTER: &str = "r";
/// Name of the switch host in a switch lab: its bridge joins the hosts.
pub const SWITCH: &str = "sw";
/// The bridge in the switch host.
pub const BRIDGE: &str = "br0";
/// The switch's own address on the hosts' subnet (the bridge's: the
/// source of its IGMP and MLD queries).
pub const SWITCH_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 254);

/// Which links a setting applies to: all of them, or one by number (as
/// `nicbench lab status` lists them, from 1), optionally only the traffic
/// towards one of its two hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSelector {
    pub link: Option<usize>,
    pub towards: Option<String>,
}

/// `--mtu [LINK=]MTU`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MtuSetting {
    pub link: Option<usize>,
    pub mtu: u32,
}

/// `--rate [LINK[:HOST]=]RATE`; `rate` None removes the limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateSetting {
    pub select: LinkSelector,
    pub bits_per_second: Option<u64>,
}

/// `--queue [LINK[:HOST]=]TIME`: how long the router's tbf may hold a
/// packet (tc's `latency`); `seconds` None goes back to the default.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueSetting {
    pub select: LinkSelector,
    pub seconds: Option<f64>,
}

/// `--cpu-limit HOST=PERCENT`: percent of one core (150 = one and a half).
#[derive(Debug, Clone, PartialEq)]
pub struct CpuLimit {
    pub host: String,
    pub percent: f64,
}

/// `--offloads [LINK[:HOST]=]tso=off,gso=off,gro=off`: offloads of the
/// interfaces of every link, of one link, or of one host's end of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffloadSetting {
    /// `towards` names the host whose interface (end) it is.
    pub select: LinkSelector,
    /// Offload name (of [`crate::model::settings::OFFLOADS`]) -> on.
    pub features: std::collections::BTreeMap<String, bool>,
}

/// Everything that decides a lab's layout, validated by [`layout`].
#[derive(Debug, Clone, PartialEq)]
pub struct LabSpec {
    pub name: String,
    pub hosts: usize,
    pub links: usize,
    pub topology: Topology,
    pub mtu: Vec<MtuSetting>,
    pub rate: Vec<RateSetting>,
    /// Router queue lengths, applied after the rates.
    pub queue: Vec<QueueSetting>,
    pub cpu_limits: Vec<CpuLimit>,
    /// Offloads of the links' interfaces, applied in order.
    pub offloads: Vec<OffloadSetting>,
    /// Which cores the hosts run on (`--cores`).
    pub cores: super::cores::CorePolicy,
    /// Multipath TCP path management on every host: limits for a subflow
    /// per extra link, and each extra link's address announced (`ip mptcp
    /// endpoint ... signal`), so a connection opens one subflow per link.
    pub mptcp: bool,
    /// Control port of the agent in each host; None: no agents.
    pub agent_port: Option<u16>,
}

fn invalid(option: &'static str, input: &str, hint: impl Into<String>) -> LabError {
    LabError::Invalid {
        option,
        input: input.to_string(),
        hint: hint.into(),
    }
}

/// The names of the hosts: `a`, `b`, ... (not the router).
pub fn host_names(count: usize) -> Vec<String> {
    (0..count).map(|i| ((b'a' + i as u8) as char).to_string()).collect()
}

/// Parses an MTU in bytes, checked against what a veth accepts.
pub fn parse_mtu(input: &str) -> Result<u32, LabError> {
    let hint = || {
        format!(
            "expected an MTU in bytes from {} to {}, e.g. 1500 or 9000",
            MTU_RANGE.start(),
            MTU_RANGE.end()
        )
    };
    let mtu: u32 = input.trim().parse().map_err(|_| invalid("--mtu", input, hint()))?;
    if MTU_RANGE.contains(&mtu) {
        Ok(mtu)
    } else {
        Err(invalid("--mtu", input, hint()))
    }
}

/// Parses a rate (`100mbit`, `1G`) or `none`/`off`/`0` for no limit.
pub fn parse_rate(input: &str) -> Result<Option<u64>, LabError> {
    let trimmed = input.trim();
    if matches!(trimmed.to_ascii_lowercase().as_str(), "none" | "off" | "0") {
        return Ok(None);
    }
    let bits = crate::units::parse_rate(trimmed).map_err(|e| invalid("--rate", input, e.hint))?;
    if bits < MIN_RATE_BITS_PER_SECOND {
        return Err(invalid(
            "--rate",
            input,
            "the slowest rate limit is 8kbit (use 'none' to remove a limit)",
        ));
    }
    Ok(Some(bits))
}

fn parse_link_number(option: &'static str, input: &str, text: &str) -> Result<usize, LabError> {
    match text.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(invalid(
            option,
            input,
            "links are numbered from 1, as `nicbench lab status` lists them",
        )),
    }
}

/// Parses `--mtu MTU` or `--mtu LINK=MTU`.
pub fn parse_mtu_setting(input: &str) -> Result<MtuSetting, LabError> {
    match input.split_once('=') {
        None => Ok(MtuSetting {
            link: None,
            mtu: parse_mtu(input)?,
        }),
        Some((link, mtu)) => Ok(MtuSetting {
            link: Some(parse_link_number("--mtu", input, link)?),
            mtu: parse_mtu(mtu).map_err(|_| invalid("--mtu", input, "expected MTU, or LINK=MTU such as 2=9000"))?,
        }),
    }
}

/// Parses `--rate RATE`, `--rate LINK=RATE` or `--rate LINK:HOST=RATE`.
pub fn parse_rate_setting(input: &str) -> Result<RateSetting, LabError> {
    let Some((select, rate)) = input.split_once('=') else {
        return Ok(RateSetting {
            select: LinkSelector {
                link: None,
                towards: None,
            },
            bits_per_second: parse_rate(input)?,
        });
    };
    let (link, towards) = match select.split_once(':') {
        Some((link, host)) => (link, Some(host.trim().to_string())),
        None => (select, None),
    };
    if towards.as_deref() == Some("") {
        return Err(invalid(
            "--rate",
            input,
            "expected LINK:HOST=RATE, e.g. 1:b=100mbit (traffic towards b)",
        ));
    }
    Ok(RateSetting {
        select: LinkSelector {
            link: Some(parse_link_number("--rate", input, link)?),
            towards,
        },
        bits_per_second: parse_rate(rate)?,
    })
}

/// Parses a queue length with its unit (`200ms`, `0.2s`, `5000us`), 1 ms
/// to 10 s, or `default`/`none` for the default sizing.
pub fn parse_queue(input: &str) -> Result<Option<f64>, LabError> {
    const HINT: &str = "expected a time with its unit from 1ms to 10s, e.g. 200ms or 0.5s ('default' for the \
                        default queue)";
    let trimmed = input.trim();
    if matches!(trimmed.to_ascii_lowercase().as_str(), "default" | "none") {
        return Ok(None);
    }
    // A bare number is ambiguous between seconds and milliseconds.
    if !trimmed.ends_with(|c: char| c.is_ascii_alphabetic()) {
        return Err(invalid("--queue", input, HINT));
    }
    let seconds = crate::units::parse_duration(trimmed)
        .map_err(|_| invalid("--queue", input, HINT))?
        .as_secs_f64();
    if !QUEUE_SECONDS_RANGE.contains(&seconds) {
        return Err(invalid("--queue", input, HINT));
    }
    Ok(Some(seconds))
}

/// Parses `--queue TIME`, `--queue LINK=TIME` or `--queue LINK:HOST=TIME`.
pub fn parse_queue_setting(input: &str) -> Result<QueueSetting, LabError> {
    // The same selector grammar as --rate.
    let Some((select, time)) = input.split_once('=') else {
        return Ok(QueueSetting {
            select: LinkSelector {
                link: None,
                towards: None,
            },
            seconds: parse_queue(input)?,
        });
    };
    let (link, towards) = match select.split_once(':') {
        Some((link, host)) => (link, Some(host.trim().to_string())),
        None => (select, None),
    };
    if towards.as_deref() == Some("") {
        return Err(invalid(
            "--queue",
            input,
            "expected LINK:HOST=TIME, e.g. 1:b=200ms (the router's queue toward b)",
        ));
    }
    Ok(QueueSetting {
        select: LinkSelector {
            link: Some(parse_link_number("--queue", input, link)?),
            towards,
        },
        seconds: parse_queue(time)?,
    })
}

/// Parses `--offloads LIST`, `--offloads LINK=LIST` or `--offloads
/// LINK:HOST=LIST`, LIST being `tso=off,gso=off,gro=off` (the names and
/// values of a plan's offloads axis).
pub fn parse_offload_setting(input: &str) -> Result<OffloadSetting, LabError> {
    const HINT: &str = "expected [LINK[:HOST]=]NAME=on|off,..., e.g. tso=off,gso=off,gro=off or 1:b=gro=off";
    let (select, list) = match input.split_once('=') {
        // A selector is a link number, or LINK:HOST, before the list.
        Some((head, rest)) if head.trim().starts_with(|c: char| c.is_ascii_digit()) => {
            let (link, towards) = match head.split_once(':') {
                Some((link, host)) => (link, Some(host.trim().to_string())),
                None => (head, None),
            };
            if towards.as_deref() == Some("") {
                return Err(invalid("--offloads", input, HINT));
            }
            let link = parse_link_number("--offloads", input, link)?;
            (
                LinkSelector {
                    link: Some(link),
                    towards,
                },
                rest,
            )
        }
        _ => (
            LinkSelector {
                link: None,
                towards: None,
            },
            input,
        ),
    };
    match crate::model::HostSetting::parse("offloads", list) {
        Ok(crate::model::HostSetting::Offloads { features }) => Ok(OffloadSetting { select, features }),
        Ok(_) => Err(invalid("--offloads", input, HINT)),
        Err(e) => Err(invalid("--offloads", input, format!("{e}; {HINT}"))),
    }
}

/// Parses `--cpu-limit HOST=PERCENT` (`a=25%`, `a=25`, `a=150%`).
pub fn parse_cpu_limit(input: &str) -> Result<CpuLimit, LabError> {
    const HINT: &str = "expected HOST=PERCENT of one core, e.g. a=25% (1% to 6400%)";
    let (host, percent) = input
        .split_once('=')
        .ok_or_else(|| invalid("--cpu-limit", input, HINT))?;
    let percent: f64 = percent
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| invalid("--cpu-limit", input, HINT))?;
    if !(1.0..=6400.0).contains(&percent) || host.trim().is_empty() {
        return Err(invalid("--cpu-limit", input, HINT));
    }
    Ok(CpuLimit {
        host: host.trim().to_string(),
        percent,
    })
}

/// Parses `lab set --cpu-limit`: `HOST=PERCENT` as [`parse_cpu_limit`], or
/// `HOST=none`, which lifts the limit (percent 0).
pub fn parse_cpu_limit_or_none(input: &str) -> Result<CpuLimit, LabError> {
    match input.split_once('=') {
        Some((host, "none")) if !host.trim().is_empty() => Ok(CpuLimit {
            host: host.trim().to_string(),
            percent: 0.0,
        }),
        _ => parse_cpu_limit(input),
    }
}

/// The address of end `end` (0 or 1) of link `id`: 10.(200 + id/256).(id%256).E/24,
/// with E = 1 and 2 on a direct link, and 2 (host) and 1 (router) via the router.
/// On a switch every host is on 10.200.0.0/24: the host of link `id` at
/// 10.200.0.`id`, the switch's end at its bridge's [`SWITCH_ADDRESS`].
pub fn link_address(id: usize, end: usize, topology: Topology) -> Ipv4Addr {
    if topology == Topology::Switch {
        return match end {
            0 => Ipv4Addr::new(10, 200, 0, id as u8),
            _ => SWITCH_ADDRESS,
        };
    }
    let last = match (topology, end) {
        (Topology::Direct, 0) | (Topology::ViaRouter, 1) => 1,
        _ => 2,
    };
    Ipv4Addr::new(10, 200 + (id / 256) as u8, (id % 256) as u8, last)
}

/// Prefix length of every link's subnet.
pub const PREFIX_LEN: u8 = 24;

/// Whether `host` is the lab's own forwarding host (the router or the
/// switch), whose end of a link carries the shaper toward the test host.
fn forwards(host: &str) -> bool {
    host == ROUTER || host == SWITCH
}

/// Works out hosts, links, interfaces and addresses, and applies the MTU,
/// rate and CPU settings; rejects anything out of range or unknown.
pub fn layout(spec: &LabSpec) -> Result<LabState, LabError> {
    validate_name(&spec.name)?;
    if !(2..=MAX_HOSTS).contains(&spec.hosts) {
        return Err(invalid(
            "--hosts",
            &spec.hosts.to_string(),
            format!("a lab has 2 to {MAX_HOSTS} hosts"),
        ));
    }
    if !(1..=MAX_LINKS).contains(&spec.links) {
        return Err(invalid(
            "--links",
            &spec.links.to_string(),
            format!("1 to {MAX_LINKS} parallel links"),
        ));
    }
    let names = host_names(spec.hosts);
    let mut hosts: Vec<HostState> = names.iter().map(|h| HostState::new(&spec.name, h, false)).collect();
    let mut pairs = Vec::new();
    match spec.topology {
        Topology::Direct => {
            for i in 0..names.len() {
                for j in i + 1..names.len() {
                    pairs.extend((0..spec.links).map(|_| (names[i].clone(), names[j].clone())));
                }
            }
        }
        Topology::ViaRouter => {
            hosts.push(HostState::new(&spec.name, ROUTER, true));
            for h in &names {
                pairs.extend((0..spec.links).map(|_| (h.clone(), ROUTER.to_string())));
            }
        }
        Topology::Switch => {
            if spec.links != 1 {
                return Err(invalid(
                    "--links",
                    &spec.links.to_string(),
                    "a switch gives each host one port: leave out --links with --switch (or use --via-router)",
                ));
            }
            // The switch is the lab's own forwarding host, as a router is:
            // not one of the hosts asked for.
            hosts.push(HostState::new(&spec.name, SWITCH, true));
            pairs.extend(names.iter().map(|h| (h.clone(), SWITCH.to_string())));
        }
    }
    let mut next_if = std::collections::HashMap::<String, usize>::new();
    let mut ifname = |host: &str| {
        let n = next_if.entry(host.to_string()).or_insert(0);
        *n += 1;
        format!("eth{}", *n - 1)
    };
    let links = pairs
        .iter()
        .enumerate()
        .map(|(index, (x, y))| {
            let id = index + 1;
            let mut end = |host: &String, e| LinkEnd {
                host: host.clone(),
                ifname: ifname(host),
                address: link_address(id, e, spec.topology),
                rate_bits_per_second: None,
                queue_seconds: None,
                offloads: Default::default(),
                napi_threads: Vec::new(),
            };
            let ends = [end(x, 0), end(y, 1)];
            LinkState { id, mtu: 1500, ends }
        })
        .collect();
    if spec.mptcp && spec.topology == Topology::Switch {
        return Err(invalid(
            "--mptcp",
            "--switch",
            "Multipath TCP needs two paths or more, and a switch gives each host one port: use --via-router --links 2",
        ));
    }
    if spec.mptcp && spec.links < 2 {
        return Err(invalid(
            "--mptcp",
            "--links 1",
            "Multipath TCP needs two paths or more: add --links 2 (or 3, 4)",
        ));
    }
    let mut state = LabState::new(&spec.name, spec.topology, hosts, links, spec.agent_port);
    state.mptcp = spec.mptcp;
    apply_mtu(&mut state, &spec.mtu)?;
    apply_rate(&mut state, &spec.rate)?;
    apply_queue(&mut state, &spec.queue)?;
    apply_cpu_limits(&mut state, &spec.cpu_limits)?;
    apply_offloads(&mut state, &spec.offloads)?;
    Ok(state)
}

/// Sets the hosts' CPU limits; `percent` 0 or less removes one (`lab set
/// --cpu-limit a=none`). Returns the hosts that changed.
pub fn apply_cpu_limits(state: &mut LabState, limits: &[CpuLimit]) -> Result<Vec<String>, LabError> {
    let names: Vec<String> = state.hosts.iter().map(|h| h.name.clone()).collect();
    let mut changed = Vec::new();
    for limit in limits {
        let host = state
            .host_mut(&limit.host)
            .filter(|h| !h.router)
            .ok_or_else(|| unknown_host("--cpu-limit", &limit.host, &names))?;
        host.cpu_limit_percent = (limit.percent > 0.0).then_some(limit.percent);
        changed.push(limit.host.clone());
    }
    changed.dedup();
    Ok(changed)
}

/// Applies offload settings to a layout, in order: every interface of the
/// selected links, or only `towards`'s end. Returns the `(link, end)`
/// pairs that changed.
pub fn apply_offloads(state: &mut LabState, settings: &[OffloadSetting]) -> Result<Vec<(usize, usize)>, LabError> {
    let mut changed = Vec::new();
    for setting in settings {
        if let Some(link) = setting.select.link {
            check_link(state, "--offloads", link)?;
        }
        for link in state
            .links
            .iter_mut()
            .filter(|l| setting.select.link.is_none() || setting.select.link == Some(l.id))
        {
            let ends: Vec<usize> = match &setting.select.towards {
                Some(host) => match link.ends.iter().position(|e| &e.host == host) {
                    Some(i) => vec![i],
                    None => {
                        let hosts = format!("{} and {}", link.ends[0].host, link.ends[1].host);
                        return Err(invalid(
                            "--offloads",
                            host,
                            format!("unknown host for link {}; it joins {hosts}", link.id),
                        ));
                    }
                },
                None => vec![0, 1],
            };
            for i in ends {
                link.ends[i].offloads.extend(setting.features.clone());
                changed.push((link.id, i));
            }
        }
    }
    changed.sort();
    changed.dedup();
    Ok(changed)
}

fn unknown_host(option: &'static str, host: &str, names: &[String]) -> LabError {
    invalid(option, host, format!("unknown host; this lab has {}", names.join(", ")))
}

fn check_link(state: &LabState, option: &'static str, link: usize) -> Result<(), LabError> {
    if (1..=state.links.len()).contains(&link) {
        Ok(())
    } else {
        Err(invalid(
            option,
            &link.to_string(),
            format!("no such link; this lab has links 1 to {}", state.links.len()),
        ))
    }
}

/// Applies MTU settings to a layout, in order (later ones win).
pub fn apply_mtu(state: &mut LabState, settings: &[MtuSetting]) -> Result<Vec<usize>, LabError> {
    let mut changed = Vec::new();
    for setting in settings {
        if let Some(link) = setting.link {
            check_link(state, "--mtu", link)?;
        }
        for link in state
            .links
            .iter_mut()
            .filter(|l| setting.link.is_none() || setting.link == Some(l.id))
        {
            link.mtu = setting.mtu;
            changed.push(link.id);
        }
    }
    Ok(changed)
}

/// Applies rate settings to a layout, in order. Without a direction the
/// limit goes on both ends of a direct link, and on the router's end of a
/// link to the router. Returns the `(link, end)` pairs that changed.
pub fn apply_rate(state: &mut LabState, settings: &[RateSetting]) -> Result<Vec<(usize, usize)>, LabError> {
    let mut changed = Vec::new();
    for setting in settings {
        if let Some(link) = setting.select.link {
            check_link(state, "--rate", link)?;
        }
        for link in state
            .links
            .iter_mut()
            .filter(|l| setting.select.link.is_none() || setting.select.link == Some(l.id))
        {
            let ends: Vec<usize> = match &setting.select.towards {
                // The limit sits on the egress of the end that is not `towards`.
                Some(host) => match link.ends.iter().position(|e| &e.host == host) {
                    Some(i) => vec![1 - i],
                    None => {
                        let hosts = format!("{} and {}", link.ends[0].host, link.ends[1].host);
                        return Err(invalid(
                            "--rate",
                            host,
                            format!("unknown host for link {}; it joins {hosts}", link.id),
                        ));
                    }
                },
                None => (0..2)
                    .filter(|&i| forwards(&link.ends[i].host) || !forwards(&link.ends[1 - i].host))
                    .collect(),
            };
            for i in ends {
                link.ends[i].rate_bits_per_second = setting.bits_per_second;
                // A queue length belongs to the shaper it sizes.
                if setting.bits_per_second.is_none() {
                    link.ends[i].queue_seconds = None;
                }
                changed.push((link.id, i));
            }
        }
    }
    Ok(changed)
}

/// Applies router queue settings to a layout, in order, after the rates:
/// the same selection as a rate without direction (the router's end) or
/// toward a host. Refused in a lab without a router, and on an end without
/// a rate (a queue sizes a shaper). Returns the `(link, end)` pairs that changed.
pub fn apply_queue(state: &mut LabState, settings: &[QueueSetting]) -> Result<Vec<(usize, usize)>, LabError> {
    let mut changed = Vec::new();
    for setting in settings {
        let text = || {
            setting
                .seconds
                .map_or("default".to_string(), |s| format!("{}ms", s * 1e3))
        };
        if state.topology == Topology::Direct {
            return Err(invalid(
                "--queue",
                &text(),
                "the queue is the router's or the switch's: build the lab with --via-router (or --switch) and --rate",
            ));
        }
        if let Some(link) = setting.select.link {
            check_link(state, "--queue", link)?;
        }
        for link in state
            .links
            .iter_mut()
            .filter(|l| setting.select.link.is_none() || setting.select.link == Some(l.id))
        {
            let end = match &setting.select.towards {
                Some(host) => match link.ends.iter().position(|e| &e.host == host) {
                    Some(i) => 1 - i,
                    None => {
                        let hosts = format!("{} and {}", link.ends[0].host, link.ends[1].host);
                        return Err(invalid(
                            "--queue",
                            host,
                            format!("unknown host for link {}; it joins {hosts}", link.id),
                        ));
                    }
                },
                None => link
                    .ends
                    .iter()
                    .position(|e| forwards(&e.host))
                    .expect("a link to the router or the switch"),
            };
            let (mtu, id, toward) = (link.mtu, link.id, link.ends[1 - end].host.clone());
            let e = &mut link.ends[end];
            let Some(bits) = e.rate_bits_per_second else {
                if setting.seconds.is_none() {
                    continue;
                }
                return Err(invalid(
                    "--queue",
                    &text(),
                    format!("link {id} toward {toward} has no rate limit, so no queue to size: give it a --rate"),
                ));
            };
            if let Some(seconds) = setting.seconds {
                let bytes = tbf_sizes(bits, mtu, Some(seconds)).limit_bytes;
                if bytes > MAX_QUEUE_BYTES {
                    return Err(invalid(
                        "--queue",
                        &text(),
                        format!(
                            "at {} that is {bytes} B, more than a tbf holds ({MAX_QUEUE_BYTES} B): give a shorter queue",
                            crate::units::Rate(bits as f64)
                        ),
                    ));
                }
            }
            e.queue_seconds = setting.seconds;
            changed.push((id, end));
        }
    }
    Ok(changed)
}

/// The sizes of a link's tbf: its bucket and its queue, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TbfSizes {
    pub burst_bytes: u64,
    pub limit_bytes: u64,
}

impl TbfSizes {
    /// How long a packet may wait in the tbf at `bits_per_second`: the
    /// queue beyond the bucket, over the rate (what tc calls its latency).
    pub fn queue_seconds(&self, bits_per_second: u64) -> f64 {
        self.limit_bytes.saturating_sub(self.burst_bytes) as f64 * 8.0 / bits_per_second.max(1) as f64
    }
}

/// The tbf of a link shaped to `bits_per_second` with MTU `mtu`: the bucket
/// holds 4 ms at the rate but at least 4 frames; the queue holds `queue`
/// seconds beyond the bucket (tc's `latency`), by default 20 ms of the rate
/// in all (at least 64 KB and twice the bucket), beyond which packets are dropped.
pub fn tbf_sizes(bits_per_second: u64, mtu: u32, queue: Option<f64>) -> TbfSizes {
    let bytes_per_second = bits_per_second / 8;
    let burst_bytes = (bytes_per_second / 250).max(4 * (mtu as u64 + 14)).max(3000);
    let limit_bytes = match queue {
        Some(seconds) => burst_bytes + (bytes_per_second as f64 * seconds).round() as u64,
        None => (bytes_per_second / 50).max(65536).max(2 * burst_bytes),
    };
    TbfSizes {
        burst_bytes,
        limit_bytes,
    }
}

/// Routes a host needs beyond its connected subnets: `(destination subnet, gateway)`.
/// Via the router, link i of a host reaches link i of every other host.
pub fn routes(state: &LabState, host: &str) -> Vec<(Ipv4Addr, Ipv4Addr)> {
    if state.topology != Topology::ViaRouter || host == ROUTER {
        return Vec::new();
    }
    let mine = state.links_of(host);
    let mut routes = Vec::new();
    for other in state.hosts.iter().filter(|h| !h.router && h.name != host) {
        for (i, theirs) in state.links_of(&other.name).iter().enumerate() {
            let Some(link) = mine.get(i) else { continue };
            let subnet = theirs.end_of(&other.name).expect("link of that host").address;
            let gateway = link.end_of(ROUTER).expect("link to the router").address;
            let [a, b, c, _] = subnet.octets();
            routes.push((Ipv4Addr::new(a, b, c, 0), gateway));
        }
    }
    routes
}

/// The `/etc/hosts` a host sees: every other host by name (its first address
/// reachable from here) and `NAME-LINK` for each address on a reachable link.
pub fn hosts_file(state: &LabState, host: &str) -> String {
    let mut out = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
    let mine = state.links_of(host);
    for other in &state.hosts {
        let mut reachable: Vec<(usize, Ipv4Addr)> = Vec::new();
        for link in state.links_of(&other.name) {
            let addr = link.end_of(&other.name).expect("own link").address;
            let direct = link.end_of(host).is_some();
            let routed = state.topology == Topology::ViaRouter
                && !other.router
                && (host == ROUTER
                    || state.links_of(&other.name).iter().position(|l| l.id == link.id) < Some(mine.len()));
            // On a switch every host is on the one subnet.
            let switched = state.topology == Topology::Switch && !other.router;
            if other.name == host || direct || routed || switched {
                reachable.push((link.id, addr));
            }
        }
        if let Some((_, first)) = reachable.first() {
            out.push_str(&format!("{first}\t{}\n", other.name));
        }
        for (id, addr) in reachable {
            out.push_str(&format!("{addr}\t{}-{id}\n", other.name));
        }
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(crate) fn spec(hosts: usize, links: usize, topology: Topology) -> LabSpec {
        LabSpec {
            name: "demo".into(),
            hosts,
            links,
            topology,
            mtu: vec![],
            rate: vec![],
            queue: vec![],
            cpu_limits: vec![],
            offloads: vec![],
            cores: Default::default(),
            mptcp: false,
            agent_port: Some(5310),
        }
    }
    #[test]
    fn mptcp_announces_every_link_of_a_host_but_its_first_and_needs_two() {
        let mut s = spec(2, 3, Topology::ViaRouter);
        s.mptcp = true;
        let state = layout(&s).unwrap();
        let announced = |host: &str| -> Vec<String> {
            state
                .mptcp_endpoints(host)
                .iter()
                .map(|(a, i)| format!("{a} {i}"))
                .collect()
        };
        let a: Vec<String> = state.links_of("a")[1..]
            .iter()
            .map(|l| {
                let e = l.end_of("a").unwrap();
                format!("{} {}", e.address, e.ifname)
            })
            .collect();
        assert_eq!(announced("a"), a);
        assert_eq!(announced("a").len(), 2);
        // Room for the agent's own join attempts beside the client's joins.
        assert_eq!(state.mptcp_limits("a"), Some((4, 2)));
        assert_eq!(state.mptcp_limits(ROUTER), None);
        assert!(
            announced(ROUTER).is_empty(),
            "the router forwards, it ends no connection"
        );
        s.mptcp = false;
        assert!(layout(&s).unwrap().mptcp_endpoints("a").is_empty());

        let mut one = spec(2, 1, Topology::Direct);
        one.mptcp = true;
        let e = layout(&one).unwrap_err().to_string();
        assert!(e.contains("--mptcp") && e.contains("--links 2"), "{e}");
    }

    #[test]
    fn a_switch_puts_every_host_on_one_subnet_behind_its_own_port() {
        let mut s = spec(3, 1, Topology::Switch);
        s.rate = vec![parse_rate_setting("200mbit").unwrap()];
        s.queue = vec![parse_queue_setting("3:c=50ms").unwrap()];
        let state = layout(&s).unwrap();
        let names: Vec<(&str, bool)> = state.hosts.iter().map(|h| (h.name.as_str(), h.router)).collect();
        assert_eq!(names, [("a", false), ("b", false), ("c", false), (SWITCH, true)]);
        // One port each, numbered as the hosts; the hosts on 10.200.0.0/24,
        // the switch's ends at its bridge's address.
        let ends: Vec<String> = state
            .links
            .iter()
            .map(|l| {
                let [h, sw] = &l.ends;
                format!(
                    "{} {} {} | {} {} {}",
                    h.host, h.ifname, h.address, sw.host, sw.ifname, sw.address
                )
            })
            .collect();
        assert_eq!(
            ends,
            [
                "a eth0 10.200.0.1 | sw eth0 10.200.0.254",
                "b eth0 10.200.0.2 | sw eth1 10.200.0.254",
                "c eth0 10.200.0.3 | sw eth2 10.200.0.254",
            ]
        );
        // The shapers sit on the switch's ports, toward each host; the
        // queue toward c is the one asked for.
        for link in &state.links {
            assert_eq!(link.end_of(SWITCH).unwrap().rate_bits_per_second, Some(200_000_000));
            assert_eq!(link.ends[0].rate_bits_per_second, None);
        }
        assert_eq!(state.links[2].end_of(SWITCH).unwrap().queue_seconds, Some(0.05));
        // One subnet: no routes, and every host knows every other by name.
        assert!(routes(&state, "a").is_empty());
        let hosts = hosts_file(&state, "a");
        for line in [
            "10.200.0.2\tb\n",
            "10.200.0.3\tc\n",
            "10.200.0.3\tc-3\n",
            "10.200.0.1\ta\n",
        ] {
            assert!(hosts.contains(line), "{line:?} in {hosts}");
        }
        // The switch by its bridge's address, as a router lab names its router.
        assert!(hosts.contains("10.200.0.254\tsw\n"), "{hosts}");

        let mut two = spec(3, 2, Topology::Switch);
        let e = layout(&two).unwrap_err().to_string();
        assert!(e.contains("--links") && e.contains("one port"), "{e}");
        two.links = 1;
        two.mptcp = true;
        let e = layout(&two).unwrap_err().to_string();
        assert!(e.contains("--mptcp") && e.contains("--via-router --links 2"), "{e}");
    }

    #[test]
    fn queue_lengths_need_a_unit_a_range_a_router_and_a_rate() {
        assert_eq!(parse_queue("200ms").unwrap(), Some(0.2));
        assert_eq!(parse_queue("0.5s").unwrap(), Some(0.5));
        assert_eq!(parse_queue("default").unwrap(), None);
        for bad in ["200", "0.2", "0ms", "500us", "11s", "fast", "-5ms", ""] {
            let e = parse_queue(bad).unwrap_err().to_string();
            assert!(e.contains("--queue") && e.contains("1ms to 10s"), "{bad}: {e}");
        }
        let q = parse_queue_setting("2:b=5ms").unwrap();
        assert_eq!(
            (q.select.link, q.select.towards.as_deref(), q.seconds),
            (Some(2), Some("b"), Some(0.005))
        );
        assert!(parse_queue_setting("0=5ms").is_err());
        assert!(parse_queue_setting("1:=5ms").is_err());

        let mut routed = spec(2, 1, Topology::ViaRouter);
        routed.rate = vec![parse_rate_setting("100mbit").unwrap()];
        routed.queue = vec![
            parse_queue_setting("200ms").unwrap(),
            parse_queue_setting("1:a=5ms").unwrap(),
        ];
        let state = layout(&routed).unwrap();
        // Link 1 joins a and r: the router's end (toward a) got 5 ms; link 2's router end 200 ms.
        assert_eq!(state.links[0].end_of(ROUTER).unwrap().queue_seconds, Some(0.005));
        assert_eq!(state.links[1].end_of(ROUTER).unwrap().queue_seconds, Some(0.2));
        assert_eq!(state.links[1].end_of("b").unwrap().queue_seconds, None);

        let mut direct = spec(2, 1, Topology::Direct);
        direct.rate = routed.rate.clone();
        direct.queue = vec![parse_queue_setting("200ms").unwrap()];
        let e = layout(&direct).unwrap_err().to_string();
        assert!(e.contains("--via-router"), "{e}");
        let mut unshaped = spec(2, 1, Topology::ViaRouter);
        unshaped.queue = vec![parse_queue_setting("200ms").unwrap()];
        let e = layout(&unshaped).unwrap_err().to_string();
        assert!(e.contains("no rate limit") && e.contains("--rate"), "{e}");
        let mut huge = routed.clone();
        huge.rate = vec![parse_rate_setting("100G").unwrap()];
        huge.queue = vec![parse_queue_setting("10s").unwrap()];
        let e = layout(&huge).unwrap_err().to_string();
        assert!(e.contains("more than a tbf holds"), "{e}");
        // Removing the rate removes its queue.
        let mut state = layout(&routed).unwrap();
        apply_rate(&mut state, &[parse_rate_setting("none").unwrap()]).unwrap();
        assert!(state
            .links
            .iter()
            .all(|l| l.ends.iter().all(|e| e.queue_seconds.is_none())));
    }

    #[test]
    fn offloads_take_a_link_and_a_host_end_like_rates() {
        let all = parse_offload_setting("tso=off,gso=off,gro=off").unwrap();
        assert_eq!(all.select.link, None);
        assert_eq!(all.features.get("gro"), Some(&false));
        let one = parse_offload_setting("2:b=gro=on").unwrap();
        assert_eq!((one.select.link, one.select.towards.as_deref()), (Some(2), Some("b")));
        assert_eq!(one.features.get("gro"), Some(&true));
        for bad in ["tso=maybe", "0=tso=off", "1:=tso=off", "speed=off", "tso"] {
            let e = parse_offload_setting(bad).unwrap_err().to_string();
            assert!(e.contains("--offloads"), "{bad}: {e}");
        }
        let mut s = spec(2, 1, Topology::ViaRouter);
        s.offloads = vec![all, parse_offload_setting("1:a=tso=on").unwrap()];
        let state = layout(&s).unwrap();
        assert_eq!(state.links[0].end_of("a").unwrap().offloads.get("tso"), Some(&true));
        assert_eq!(state.links[0].end_of(ROUTER).unwrap().offloads.get("tso"), Some(&false));
        assert_eq!(state.links[1].end_of("b").unwrap().offloads.get("gso"), Some(&false));
        s.offloads = vec![parse_offload_setting("1:b=tso=on").unwrap()];
        assert!(layout(&s).unwrap_err().to_string().contains("joins a and r"));
    }

    #[test]
    fn a_cpu_limit_can_be_lifted_but_not_put_on_the_router() {
        let mut state = layout(&spec(2, 1, Topology::ViaRouter)).unwrap();
        let changed = apply_cpu_limits(&mut state, &[parse_cpu_limit("b=25%").unwrap()]).unwrap();
        assert_eq!(changed, ["b"]);
        assert_eq!(state.host("b").unwrap().cpu_limit_percent, Some(25.0));
        apply_cpu_limits(
            &mut state,
            &[CpuLimit {
                host: "b".into(),
                percent: 0.0,
            }],
        )
        .unwrap();
        assert_eq!(state.host("b").unwrap().cpu_limit_percent, None);
        assert!(apply_cpu_limits(&mut state, &[parse_cpu_limit("r=25%").unwrap()]).is_err());
    }

    #[test]
    fn the_tbf_queue_is_the_time_beyond_the_bucket() {
        let default = tbf_sizes(100_000_000, 1500, None);
        assert_eq!((default.burst_bytes, default.limit_bytes), (50_000, 250_000));
        assert!((default.queue_seconds(100_000_000) - 0.016).abs() < 1e-12);
        let deep = tbf_sizes(100_000_000, 1500, Some(0.2));
        assert_eq!((deep.burst_bytes, deep.limit_bytes), (50_000, 2_550_000));
        assert!((deep.queue_seconds(100_000_000) - 0.2).abs() < 1e-12);
    }

    #[test]
    fn bad_mtu_and_rate_are_refused_with_the_option_named() {
        for bad in ["0", "67", "65536", "jumbo", "-1", "1500.5"] {
            let e = parse_mtu(bad).unwrap_err().to_string();
            assert!(e.contains("--mtu") && e.contains("68 to 65535"), "{e}");
        }
        assert_eq!(parse_mtu("9000").unwrap(), 9000);
        for bad in ["fast", "10x", "1kbit", "-5M"] {
            let e = parse_rate(bad).unwrap_err().to_string();
            assert!(e.contains("--rate"), "{e}");
        }
        assert_eq!(parse_rate("100mbit").unwrap(), Some(100_000_000));
        assert_eq!(parse_rate("none").unwrap(), None);
        assert!(parse_mtu_setting("0=9000").is_err());
        assert_eq!(
            parse_mtu_setting("2=9000").unwrap(),
            MtuSetting {
                link: Some(2),
                mtu: 9000
            }
        );
        let r = parse_rate_setting("1:b=10M").unwrap();
        assert_eq!(r.select.link, Some(1));
        assert_eq!(r.select.towards.as_deref(), Some("b"));
        assert!(parse_rate_setting("1:=10M").is_err());
        assert!(parse_cpu_limit("a").is_err());
        assert!(parse_cpu_limit("a=0%").is_err());
        assert_eq!(parse_cpu_limit("a=25%").unwrap().percent, 25.0);
    }

    #[test]
    fn unknown_hosts_and_links_are_refused() {
        let mut s = spec(2, 1, Topology::Direct);
        s.cpu_limits = vec![parse_cpu_limit("z=25%").unwrap()];
        let e = layout(&s).unwrap_err().to_string();
        assert!(e.contains("--cpu-limit") && e.contains("a, b"), "{e}");
        let mut s = spec(2, 1, Topology::Direct);
        s.rate = vec![parse_rate_setting("1:r=10M").unwrap()];
        assert!(layout(&s).unwrap_err().to_string().contains("joins a and b"));
        let mut s = spec(2, 1, Topology::Direct);
        s.mtu = vec![parse_mtu_setting("3=9000").unwrap()];
        assert!(layout(&s).unwrap_err().to_string().contains("links 1 to 1"));
        assert!(layout(&spec(1, 1, Topology::Direct)).is_err());
        assert!(layout(&spec(2, 9, Topology::Direct)).is_err());
    }

    #[test]
    fn direct_lab_with_parallel_links() {
        let mut s = spec(2, 3, Topology::Direct);
        s.mtu = vec![parse_mtu_setting("9000").unwrap(), parse_mtu_setting("2=1500").unwrap()];
        s.rate = vec![parse_rate_setting("100mbit").unwrap()];
        let lab = layout(&s).unwrap();
        assert_eq!(lab.hosts.len(), 2);
        assert_eq!(lab.links.len(), 3);
        let mtus: Vec<u32> = lab.links.iter().map(|l| l.mtu).collect();
        assert_eq!(mtus, vec![9000, 1500, 9000]);
        let l2 = &lab.links[1];
        assert_eq!(
            (l2.ends[0].ifname.as_str(), l2.ends[1].ifname.as_str()),
            ("eth1", "eth1")
        );
        assert_eq!(l2.ends[0].address, Ipv4Addr::new(10, 200, 2, 1));
        assert_eq!(l2.ends[1].address, Ipv4Addr::new(10, 200, 2, 2));
        assert!(lab
            .links
            .iter()
            .all(|l| l.ends.iter().all(|e| e.rate_bits_per_second == Some(100_000_000))));
        assert!(routes(&lab, "a").is_empty());
        let hosts = hosts_file(&lab, "a");
        assert!(hosts.contains("10.200.1.2\tb\n"), "{hosts}");
        assert!(hosts.contains("10.200.3.2\tb-3\n"), "{hosts}");
        assert!(hosts.contains("10.200.1.1\ta\n"), "{hosts}");
    }

    #[test]
    fn router_lab_routes_link_i_to_link_i_and_limits_on_the_router() {
        let mut s = spec(2, 2, Topology::ViaRouter);
        s.rate = vec![
            parse_rate_setting("100mbit").unwrap(),
            parse_rate_setting("3:r=50mbit").unwrap(),
        ];
        let lab = layout(&s).unwrap();
        assert_eq!(
            lab.hosts.iter().map(|h| h.name.as_str()).collect::<Vec<_>>(),
            ["a", "b", "r"]
        );
        // a: links 1, 2; b: links 3, 4; router is end 1 everywhere.
        let r_ifs: Vec<&str> = lab.links.iter().map(|l| l.ends[1].ifname.as_str()).collect();
        assert_eq!(r_ifs, ["eth0", "eth1", "eth2", "eth3"]);
        for l in &lab.links {
            assert_eq!(
                l.ends[1].rate_bits_per_second,
                Some(100_000_000),
                "router egress, link {}",
                l.id
            );
        }
        assert_eq!(
            lab.links[2].ends[0].rate_bits_per_second,
            Some(50_000_000),
            "b's egress on link 3"
        );
        assert_eq!(lab.links[0].ends[0].rate_bits_per_second, None);
        let a_routes = routes(&lab, "a");
        assert_eq!(
            a_routes,
            vec![
                (Ipv4Addr::new(10, 200, 3, 0), Ipv4Addr::new(10, 200, 1, 1)),
                (Ipv4Addr::new(10, 200, 4, 0), Ipv4Addr::new(10, 200, 2, 1))
            ]
        );
        let hosts = hosts_file(&lab, "a");
        assert!(hosts.contains("10.200.3.2\tb\n"), "{hosts}");
        assert!(hosts.contains("10.200.4.2\tb-4\n"), "{hosts}");
        assert!(hosts.contains("10.200.1.1\tr\n"), "{hosts}");
        assert!(
            !hosts.contains("r-3"),
            "a cannot reach the router's address on b's link: {hosts}"
        );
    }

    #[test]
    fn direct_mesh_of_three_hosts_resolves_each_peer_on_the_shared_link() {
        let lab = layout(&spec(3, 1, Topology::Direct)).unwrap();
        // Links: 1 a-b, 2 a-c, 3 b-c.
        let hosts = hosts_file(&lab, "b");
        assert!(hosts.contains("10.200.3.2\tc\n"), "{hosts}");
        assert!(hosts.contains("10.200.1.1\ta\n"), "{hosts}");
        assert!(!hosts.contains("a-2"), "{hosts}");
    }
}
