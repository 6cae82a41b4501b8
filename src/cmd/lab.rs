//! `nicbench lab up|status|exec|set|down`

use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::os::unix::process::CommandExt;

use anyhow::Context;
use serde::Serialize;

use super::stdout::{print_out, write_out};
use crate::cli::lab::{LabArgs, LabCommand, LabDownArgs, LabExecArgs, LabSetArgs, LabStatusArgs, LabUpArgs};
use crate::lab::{self, spec, state::LabState, sys, AgentLaunch, LabSpec, Topology};
use crate::outside_text::{terminal, terminal_text};
use crate::units::Rate;

pub fn run(args: LabArgs) -> anyhow::Result<()> {
    match args.command {
        LabCommand::Up(args) => up(args),
        LabCommand::Status(args) => status(args),
        LabCommand::Exec(args) => exec(args),
        LabCommand::Set(args) => set(args),
        LabCommand::Down(args) => down(args),
        LabCommand::Thief(args) => {
            let cores = lab::cores::parse_cpu_list(&args.cores);
            lab::thief::run(&args.netns, &cores, args.busy_percent / 100.0)
        }
    }
}

/// An MTU the kernel takes but few mean: say what it does to the lab.
pub fn small_mtu_warning(mtu: u32) -> Option<String> {
    (mtu < 1280).then(|| {
        format!(
            "--mtu {mtu}: below 1280 B the kernel turns IPv6 off on the link (the lab still works over \
             IPv4), and TCP segments shrink to {} B of payload at most: the figures then show per-packet \
             cost, not a usual path; common MTUs are 1500 and 9000",
            mtu.saturating_sub(52).max(48)
        )
    })
}

fn warn_small_mtus(settings: &[spec::MtuSetting]) {
    for warning in settings.iter().filter_map(|s| small_mtu_warning(s.mtu)) {
        log::warn!("{warning}");
    }
}

fn up(args: LabUpArgs) -> anyhow::Result<()> {
    warn_small_mtus(&args.mtu);
    let spec = LabSpec {
        name: args.name.clone(),
        hosts: args.hosts as usize,
        links: args.links as usize,
        topology: match (args.via_router, args.switch) {
            (true, _) => Topology::ViaRouter,
            (false, true) => Topology::Switch,
            (false, false) => Topology::Direct,
        },
        mtu: args.mtu,
        rate: args.rate,
        queue: args.queue,
        cpu_limits: args.cpu_limit,
        offloads: args.offloads,
        cores: args.cores,
        mptcp: args.mptcp,
        agent_port: (!args.no_agents).then_some(args.agent_port),
    };
    let program = lab::nicbench_program("the agents")?;
    let launch = AgentLaunch { program, detach: true };
    // The agents run in their own sessions and outlive this process.
    let (state, _agents) = lab::up(&spec, Some(&launch)).with_context(|| format!("building lab '{}'", args.name))?;
    print_out(&render_status(&state))
}

fn status(args: LabStatusArgs) -> anyhow::Result<()> {
    let Some(name) = args.name else {
        let names = lab::all_lab_names()?;
        if names.is_empty() {
            return print_out("no labs\n");
        }
        return write_out(|out| {
            names
                .iter()
                .try_for_each(|name| writeln!(out, "{}", terminal_text(&summary_line(name))))
        });
    };
    let Some(state) = LabState::load(&name)? else {
        let leftovers = lab::existing_netns(&name)?;
        if leftovers.is_empty() {
            return Err(lab::LabError::NotFound { name }.into());
        }
        return print_out(&format!(
            "lab {name}: no state file, but namespaces {} exist; remove them with `nicbench lab down {name}`\n",
            terminal(&leftovers.join(", "))
        ));
    };
    if args.json {
        print_out(&format!(
            "{}\n",
            crate::outside_text::json_pretty(&status_json(&state))?
        ))
    } else {
        print_out(&render_status(&state))
    }
}

fn exec(args: LabExecArgs) -> anyhow::Result<()> {
    let state = lab::load_complete(&args.name)?;
    let (program, rest) = args.command.split_first().expect("clap requires a command");
    let program = if program == "nicbench" {
        lab::nicbench_program("the command")?.into_os_string()
    } else {
        program.clone()
    };
    let mut command = lab::host_command(&state, &args.host, &program)?;
    command.args(rest);
    // The lab's agents listen on its port: make it the clients' default
    // inside (an explicit -p or HOST:PORT still wins).
    if let Some(port) = state.agent_port {
        command.env("NICBENCH_PORT", port.to_string());
    }
    if let Some(fd) = mounts_fd() {
        command.env(crate::lab_env::MOUNTS_FD_VAR, fd.to_string());
    }
    // exec only returns on failure.
    let error = command.exec();
    Err(error).with_context(|| format!("running {:?} in host {} of lab '{}'", program, args.host, args.name))
}

/// A descriptor of this process's mount namespace that stays open across
/// exec ([`crate::lab_env::MOUNTS_FD_VAR`]); None if it cannot be opened
/// (the command then runs without it, and says so only if it needs it).
fn mounts_fd() -> Option<i32> {
    // SAFETY: a valid NUL-terminated path; the descriptor is meant to
    // outlive this process image (no O_CLOEXEC).
    let fd = unsafe { libc::open(c"/proc/self/ns/mnt".as_ptr(), libc::O_RDONLY) };
    (fd >= 0).then_some(fd)
}

/// The router link that carries the busier direction of `run` on `path`:
/// its egress toward that direction's receiver.
fn busier_link<'p>(path: &'p crate::lab_env::LabPath, run: &crate::model::RunResult) -> &'p crate::lab_env::RouterLink {
    let rate = |f: &Option<crate::model::FlowTotal>| f.as_ref().map_or(0.0, |f| f.receiver.bits_per_second);
    let sum = &run.result.sum;
    if rate(&sum.agent_to_client) > rate(&sum.client_to_agent) {
        &path.toward_me
    } else {
        &path.toward_peer
    }
}

/// How a router link is named in results: `lab router demo-r eth1` (a
/// switch's port: `lab switch demo-sw eth2`).
fn shaper_name(path: &crate::lab_env::LabPath, link: &crate::lab_env::RouterLink) -> String {
    shaper_name_in(&path.router_netns, link)
}

fn shaper_name_in(router_netns: &str, link: &crate::lab_env::RouterLink) -> String {
    let (kind, router) = match spec::parse_netns_name(router_netns) {
        Some((lab, host)) => (
            if host == spec::SWITCH { "switch" } else { "router" },
            lab::uts_hostname(lab, host),
        ),
        None => ("router", router_netns.to_string()),
    };
    format!("lab {kind} {router} {}", link.iface)
}

/// The lab router's shaper on the way to `address`, whichever host sends
/// toward it: each path of a multipath stream has its own. None outside a
/// lab, without a router, or when that egress is not shaped.
pub fn router_shaper_toward(address: std::net::IpAddr) -> Option<crate::verdict::PathShaper> {
    let (netns, link) = crate::lab_env::egress_toward(address)?;
    let bits_per_second = link.rate_bits_per_second?;
    Some(crate::verdict::PathShaper {
        name: shaper_name_in(&netns, &link),
        bits_per_second,
        burst_bytes: Some(spec::tbf_sizes(bits_per_second, link.mtu, None).burst_bytes),
    })
}

/// The lab router's shaper on the path to the agent of `run`, from what
/// `lab exec` put in this process's environment: its egress toward the
/// receiver of the busier direction. None outside a lab, without a router
/// between the ends, or when that egress is not shaped.
pub fn router_shaper(run: &crate::model::RunResult) -> Option<crate::verdict::PathShaper> {
    let agent: std::net::SocketAddr = run.agent.address.parse().ok()?;
    let path = crate::lab_env::path_from_here(agent.ip())?;
    let link = busier_link(&path, run);
    let bits_per_second = link.rate_bits_per_second?;
    Some(crate::verdict::PathShaper {
        name: shaper_name(&path, link),
        bits_per_second,
        burst_bytes: Some(spec::tbf_sizes(bits_per_second, link.mtu, None).burst_bytes),
    })
}

/// The lab router's shapers on the path to an agent, read around one trial:
/// what the shaper on the busier direction did is how the verdict tells a
/// link that held the traffic back from one that merely was not reached.
pub struct ShaperWatch {
    path: crate::lab_env::LabPath,
    /// The counters of the egress toward this host and toward the agent.
    before: [Option<crate::probe::qdisc::Counters>; 2],
}

impl ShaperWatch {
    /// Reads the router's shapers before a trial against `agent`; None
    /// outside a lab, without a router on the path, or when neither egress
    /// is shaped. A router that cannot be read is a warning, not a failure.
    pub fn start(agent: &crate::session::Target) -> Option<ShaperWatch> {
        std::env::var_os(crate::lab_env::LAB_VAR)?;
        let addresses = std::net::ToSocketAddrs::to_socket_addrs(&(agent.host.as_str(), agent.port)).ok()?;
        let path = addresses
            .into_iter()
            .find_map(|a| crate::lab_env::path_from_here(a.ip()))?;
        if path.toward_me.rate_bits_per_second.is_none() && path.toward_peer.rate_bits_per_second.is_none() {
            return None;
        }
        let before = Self::read(&path)?;
        Some(ShaperWatch { path, before })
    }

    fn read(path: &crate::lab_env::LabPath) -> Option<[Option<crate::probe::qdisc::Counters>; 2]> {
        let ifaces = [path.toward_me.iface.clone(), path.toward_peer.iface.clone()];
        let read = || ifaces.map(|i| crate::probe::netns::ifindex_of(&i).and_then(crate::probe::qdisc::root_counters));
        match crate::probe::netns::read_in(&path.router_netns, read) {
            Ok(counters) => Some(counters),
            Err(e) => {
                log::warn!(
                    "cannot read the shapers of lab router {} (network namespace {}): {e}; \
                     the verdict judges the link from the rate alone",
                    shaper_name(path, &path.toward_peer),
                    path.router_netns
                );
                None
            }
        }
    }

    /// Reads the shapers again after the trial `run` and records what the
    /// one on its busier direction did (`path_shaper`), and the one on the
    /// way back to that direction's sender (`return_shaper`), each when shaped.
    pub fn finish(self, run: &mut crate::model::RunResult) {
        let forward = busier_link(&self.path, run);
        let back = if std::ptr::eq(forward, &self.path.toward_peer) {
            &self.path.toward_me
        } else {
            &self.path.toward_peer
        };
        let (Some(after), true) = (
            Self::read(&self.path),
            forward.rate_bits_per_second.is_some() || back.rate_bits_per_second.is_some(),
        ) else {
            return;
        };
        let counters = |link: &crate::lab_env::RouterLink| -> Option<crate::model::PathShaperCounters> {
            let bits_per_second = link.rate_bits_per_second?;
            let which = usize::from(std::ptr::eq(link, &self.path.toward_peer));
            let (Some(before), Some(after)) = (self.before[which], after[which]) else {
                return None;
            };
            let Some(delta) = after.since(&before) else {
                log::warn!(
                    "the lab router's shaper was replaced during the trial (lab set?): its counters are not the trial's"
                );
                return None;
            };
            Some(crate::model::PathShaperCounters {
                name: shaper_name(&self.path, link),
                bits_per_second,
                sent_bytes: delta.sent_bytes,
                sent_packets: delta.sent_packets,
                dropped_packets: delta.dropped_packets,
                overlimits: delta.overlimits,
                queue_seconds: link.queue_seconds,
            })
        };
        run.result.path_shaper = counters(forward);
        run.result.return_shaper = counters(back);
    }
}

fn set(args: LabSetArgs) -> anyhow::Result<()> {
    warn_small_mtus(&args.mtu);
    let mut state = lab::load_complete(&args.name)?;
    lab::set(&mut state, &args.mtu, &args.rate, &args.queue)
        .with_context(|| format!("changing lab '{}'", args.name))?;
    if !args.cpu_limit.is_empty() || !args.offloads.is_empty() {
        let program = lab::nicbench_program("the CPU thieves")?;
        lab::set_host_work(&mut state, &args.cpu_limit, &args.offloads, &program)
            .with_context(|| format!("changing lab '{}'", args.name))?;
    }
    print_out(&render_status(&state))
}

fn down(args: LabDownArgs) -> anyhow::Result<()> {
    let names = match args.name {
        Some(name) => vec![name],
        None => {
            sys::preflight(false)?;
            lab::all_lab_names()?
        }
    };
    if args.all && names.is_empty() {
        super::stdout::line("no labs to remove");
    }
    if args.all && !names.is_empty() && !args.yes && !confirmed(&names)? {
        return Ok(());
    }
    // Every lab is tried; the failures make one error, which main prints once.
    let mut failed = Vec::new();
    for name in names {
        match lab::down(&name) {
            Ok(removed) if removed.is_empty() => super::stdout::line(format_args!("lab '{name}': nothing to remove")),
            Ok(removed) => super::stdout::line(format_args!("lab '{name}' removed: {}", removed.join(", "))),
            Err(e) => failed.push((name, e)),
        }
    }
    let mut failed = failed.into_iter();
    match (failed.next(), failed.len()) {
        (None, _) => Ok(()),
        (Some((name, e)), 0) => Err(anyhow::Error::new(e).context(format!("removing lab '{name}'"))),
        (Some(first), more) => {
            let each: Vec<String> = std::iter::once(first)
                .chain(failed)
                .map(|(name, e)| format!("'{name}': {e}"))
                .collect();
            anyhow::bail!("{} labs could not be removed: {}", more + 1, each.join("; "))
        }
    }
}

/// `lab down --all` without `--yes`: every lab is listed with who made it
/// (labs are global: on a shared machine some are other people's); on a
/// terminal the answer `y` removes them, elsewhere the command fails and
/// says to add `--yes`.
fn confirmed(names: &[String]) -> anyhow::Result<bool> {
    super::stdout::line(format_args!("lab down --all would remove {} lab(s):", names.len()));
    for name in names {
        super::stdout::line(format_args!("  {}", terminal_text(&summary_line(name))));
    }
    if !std::io::stdin().is_terminal() {
        return Err(crate::workload::SpecError::Invalid(format!(
            "lab down --all removes every lab on this machine, also other people's ({} listed above): \
             add --yes to remove them all, or name one: `nicbench lab down NAME`",
            names.len()
        ))
        .into());
    }
    let mut out = super::stdout::out();
    let _ = write!(out, "remove them all? [y/N] ").and_then(|_| out.flush());
    drop(out);
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer).context("reading the answer")?;
    let yes = matches!(answer.trim(), "y" | "Y" | "yes");
    if !yes {
        super::stdout::line("nothing removed");
    }
    Ok(yes)
}

/// One line per lab for `lab status` without a name: its fields are tab
/// separated, each read from the state file shown escaped (a tampered file
/// cannot break the line or send the terminal a control sequence).
fn summary_line(name: &str) -> String {
    match LabState::load(name) {
        Ok(Some(s)) => format!(
            "{name}\t{}\t{}\t{}\t{}\t{}",
            topology_name(s.topology),
            hosts_text(&s),
            links_text(s.links.len()),
            if s.complete {
                "up"
            } else {
                "incomplete (remove with `nicbench lab down`)"
            },
            made_text(&s)
        ),
        Ok(None) => format!("{name}\tleftovers without a state file (remove with `nicbench lab down {name}`)"),
        Err(e) => format!("{name}\t{}", terminal(&e.to_string())),
    }
}

/// "2 hosts and a router" for `--hosts 2 --via-router`: the router is not
/// one of the hosts the user asked for (it read "3 hosts").
fn hosts_text(state: &LabState) -> String {
    let hosts = state.hosts.iter().filter(|h| !h.router).count();
    match (state.hosts.len() - hosts, state.topology) {
        (0, _) => format!("{hosts} hosts"),
        (1, Topology::Switch) => format!("{hosts} hosts and a switch"),
        (1, _) => format!("{hosts} hosts and a router"),
        (routers, _) => format!("{hosts} hosts and {routers} routers"),
    }
}

fn links_text(n: usize) -> String {
    format!("{n} link{}", if n == 1 { "" } else { "s" })
}

fn topology_name(t: Topology) -> &'static str {
    match t {
        Topology::Direct => "direct",
        Topology::ViaRouter => "via-router",
        Topology::Switch => "switch",
    }
}

fn rate_text(rate: Option<u64>) -> String {
    rate.map_or_else(|| "unlimited".to_string(), |r| Rate(r as f64).to_string())
}

/// The tbf's queue as the kernel has it: ", queue 200 ms".
fn queue_text(kernel: &sys::KernelLink) -> String {
    match (kernel.tbf_bits_per_second, kernel.tbf_queue_seconds) {
        (Some(_), Some(seconds)) => format!(", queue {} ms", (seconds * 1e4).round() / 10.0),
        _ => String::new(),
    }
}

/// "made by alice on /dev/pts/3 at 2026-11-27 04:30:00 UTC".
fn made_text(state: &LabState) -> String {
    let when = format!("{} UTC", crate::report::runs::utc(state.created_unix_seconds as f64));
    match &state.made_by {
        Some(maker) => format!("made by {} at {when}", terminal(&maker.describe())),
        None => format!("made at {when} (by pid {}; who, not recorded)", state.created_by_pid),
    }
}

fn agent_text(state: &LabState, host: &crate::lab::state::HostState) -> String {
    let recorded = match (state.agent_port, host.agent_pid) {
        (None, _) => "no agent".to_string(),
        (Some(_), None) => "agent not started".into(),
        (Some(port), Some(pid)) if sys::alive(pid as i32) => return format!("agent pid {pid} port {port}"),
        (Some(_), Some(pid)) => format!("agent pid {pid} NOT RUNNING"),
    };
    match agents_by_hand(&host.netns, host.agent_pid) {
        by_hand if by_hand.is_empty() => recorded,
        by_hand => format!("{recorded}; started by hand: {}", by_hand.join(", ")),
    }
}

/// Agents (`nicbench serve`) running in a host's namespace that the lab
/// did not start: "pid 4242 (nicbench serve -p 5999)".
fn agents_by_hand(netns: &str, recorded: Option<u32>) -> Vec<String> {
    sys::netns_pids(netns)
        .into_iter()
        .filter(|&pid| Some(pid as u32) != recorded)
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let argv: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            is_agent_command(&argv).then(|| {
                let mut shown = argv.clone();
                shown[0] = "nicbench".into();
                format!("pid {pid} ({})", crate::shell::join(&shown))
            })
        })
        .collect()
}

/// Whether a command line is a nicbench agent's: `nicbench [OPTIONS] serve ...`.
fn is_agent_command(argv: &[String]) -> bool {
    let program = argv.first().map(|p| p.rsplit('/').next().unwrap_or(p));
    program.is_some_and(|p| p.starts_with("nicbench"))
        && argv
            .iter()
            .skip(1)
            .find(|a| !a.starts_with('-'))
            .is_some_and(|a| a == "serve")
}

/// A host's cores and CPU limit, and what the limit does and does not slow:
/// ", cores 1 (its own); CPU limit 25% of one core: ...".
fn cores_text(h: &crate::lab::state::HostState) -> String {
    let mut out = String::new();
    if !h.cores.is_empty() {
        let list = lab::cores::cpu_list(&h.cores);
        let noun = if h.cores.len() == 1 { "core" } else { "cores" };
        out += &match (h.router, h.cores_shared) {
            (true, _) => {
                format!(", {noun} {list} (shared: what it forwards runs on the cores of the host that sent it)")
            }
            (false, true) => format!(", {noun} {list} (shared with the other hosts; `--cores own` gives each its own)"),
            (false, false) => format!(", {noun} {list} (its own)"),
        };
    }
    let Some(percent) = h.cpu_limit_percent else {
        return out;
    };
    out += &format!(", CPU limit {percent}% of one core");
    match lab::steer::host_thief_busy(h) {
        Some(busy) => {
            let thief = match h.thief_pid {
                Some(pid) if sys::alive(pid as i32) => format!("thief pid {pid}"),
                Some(pid) => format!("thief pid {pid} NOT RUNNING"),
                None => "no thief".into(),
            };
            let free = 100.0 * (1.0 - busy);
            let _ = write!(
                out,
                ": its cores are free {free:.1}% of every {} ms (a real-time {thief} takes the rest{}); \
                 slows its processes (also a cgroup quota), its receive work (napi threads on its cores) \
                 and the router's work on what it sends; does not slow the router's shaping, softirq work \
                 run on the way out of an interrupt, or other processes of the machine on its cores",
                lab::thief::PERIOD.as_millis(),
                if free > percent / h.cores.len() as f64 + 0.05 {
                    format!(", at most {:.0}%: real-time throttling", 100.0 * busy)
                } else {
                    String::new()
                }
            );
        }
        None if h.cores_shared && percent < 100.0 * h.cores.len() as f64 => {
            out += " (a cgroup quota on its processes: its packet work is not limited, since the cores it \
                    shares with other hosts cannot be taken from it alone; give it a core with more cores \
                    than limited hosts)"
        }
        None => out += " (a cgroup quota on its processes: its packet work is not limited)",
    }
    out
}

/// Where an interface's receive work runs and what it offloads:
/// ", receive work on core 1 (RPS); offloads tso off, gso off, gro off".
fn work_text(state: &LabState, link: &crate::lab::state::LinkState, end: usize, k: &sys::KernelLink) -> String {
    let mut out = String::new();
    let cores = lab::cores::receive_cores(state, link, end);
    let owner = lab::cores::receive_owner(state, link, end);
    let threads = &link.ends[end].napi_threads;
    if !threads.is_empty() && k.threaded_napi == Some(true) {
        let pids: Vec<String> = threads.iter().map(u32::to_string).collect();
        let _ = write!(
            out,
            "; {} receives in napi thread {} on {owner}'s core {}{}",
            terminal(&link.ends[end].ifname),
            pids.join(", "),
            lab::cores::cpu_list(&cores),
            if k.xdp {
                " (NAPI by a pass-through XDP program)"
            } else {
                ""
            }
        );
    } else if let Some(mask) = k
        .rps_cpus
        .as_deref()
        .filter(|m| !m.trim_start_matches(['0', ',']).is_empty())
    {
        let _ = write!(
            out,
            "; receive work on {owner}'s core {} (RPS mask {mask})",
            lab::cores::cpu_list(&cores)
        );
    }
    if let Some(o) = &k.offloads {
        let named: Vec<String> = [("tso", o.tso), ("gso", o.gso), ("gro", o.gro)]
            .iter()
            .filter_map(|(n, v)| v.map(|on| format!("{n} {}", if on { "on" } else { "off" })))
            .collect();
        if !named.is_empty() {
            let _ = write!(out, "; offloads {}", named.join(", "));
        }
    }
    out
}

/// The human view of a lab, with MTU and rates as the kernel reports them.
pub fn render_status(state: &LabState) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "lab {}: {}, {}, {}{}",
        terminal(&state.name),
        topology_name(state.topology),
        hosts_text(state),
        links_text(state.links.len()),
        if state.complete {
            ""
        } else {
            " (INCOMPLETE: remove with `nicbench lab down`)"
        }
    );
    let _ = writeln!(
        out,
        "state {}, agent logs in {}/",
        terminal(&crate::lab::state::state_path(&state.name).display().to_string()),
        terminal(&crate::lab::state::log_dir(&state.name).display().to_string())
    );
    let _ = writeln!(out, "{}", made_text(state));
    let _ = writeln!(out, "hosts:");
    for h in &state.hosts {
        let cpu = cores_text(h);
        let endpoints = state.mptcp_endpoints(&h.name);
        let mptcp = match (state.mptcp && !h.router, endpoints.is_empty()) {
            (false, _) => String::new(),
            (true, true) => ", MPTCP: no extra link to announce".into(),
            (true, false) => {
                let announced: Vec<String> = endpoints
                    .iter()
                    .map(|(a, i)| format!("{a} ({})", terminal(i)))
                    .collect();
                let (subflows, accepted) = state.mptcp_limits(&h.name).unwrap_or_default();
                format!(
                    ", MPTCP: announces {}; accepts {accepted} announced address(es), {subflows} extra subflow(s)",
                    announced.join(", "),
                )
            }
        };
        let _ = writeln!(
            out,
            "  {:<2} netns {}, {}{cpu}{mptcp}",
            terminal(&h.name),
            terminal(&h.netns),
            terminal(&agent_text(state, h))
        );
    }
    let _ = writeln!(out, "links:");
    for link in &state.links {
        let ends: Vec<String> = link
            .ends
            .iter()
            .map(|e| match state.topology == Topology::Switch && e.host == spec::SWITCH {
                // A switch port has no address: its bridge has the switch's.
                true => format!(
                    "{} {} (port of {} {}/{})",
                    terminal(&e.host),
                    terminal(&e.ifname),
                    spec::BRIDGE,
                    e.address,
                    spec::PREFIX_LEN
                ),
                false => format!(
                    "{} {} {}/{}",
                    terminal(&e.host),
                    terminal(&e.ifname),
                    e.address,
                    spec::PREFIX_LEN
                ),
            })
            .collect();
        let _ = writeln!(out, "  {:<2} {}  <->  {}", link.id, ends[0], ends[1]);
        for (i, end) in link.ends.iter().enumerate() {
            let peer = terminal(&link.ends[1 - i].host);
            let line = match sys::kernel_link(&spec::netns_name(&state.name, &end.host), &end.ifname) {
                Ok(k) => format!(
                    "MTU {} bytes, {} -> {peer}: {}{}{}{}",
                    k.mtu,
                    terminal(&end.host),
                    rate_text(k.tbf_bits_per_second),
                    queue_text(&k),
                    if k.up { "" } else { ", DOWN" },
                    work_text(state, link, i, &k)
                ),
                Err(e) => format!(
                    "{} {}: not in the kernel ({})",
                    terminal(&end.host),
                    terminal(&end.ifname),
                    terminal(&e.to_string())
                ),
            };
            let _ = writeln!(out, "     {line}");
        }
    }
    // The last guard: whatever a field above missed (a kernel's answer)
    // reaches the terminal escaped too.
    terminal_text(&out).into_owned()
}

#[derive(Serialize)]
struct StatusJson<'a> {
    lab: &'a LabState,
    kernel: Vec<KernelEndJson>,
    agents_running: std::collections::BTreeMap<String, bool>,
}

#[derive(Serialize)]
struct KernelEndJson {
    link: usize,
    host: String,
    ifname: String,
    mtu_bytes: Option<u32>,
    tbf_bits_per_second: Option<u64>,
    tbf_queue_seconds: Option<f64>,
    up: Option<bool>,
    /// The receive queue's RPS mask, as sysfs has it.
    rps_cpus: Option<String>,
    threaded_napi: Option<bool>,
    xdp: Option<bool>,
    offloads: Option<crate::model::Offloads>,
    error: Option<String>,
}

fn status_json(state: &LabState) -> StatusJson<'_> {
    let mut kernel = Vec::new();
    for link in &state.links {
        for end in &link.ends {
            let k = sys::kernel_link(&spec::netns_name(&state.name, &end.host), &end.ifname);
            kernel.push(KernelEndJson {
                link: link.id,
                host: end.host.clone(),
                ifname: end.ifname.clone(),
                mtu_bytes: k.as_ref().ok().map(|k| k.mtu),
                tbf_bits_per_second: k.as_ref().ok().and_then(|k| k.tbf_bits_per_second),
                tbf_queue_seconds: k.as_ref().ok().and_then(|k| k.tbf_queue_seconds),
                up: k.as_ref().ok().map(|k| k.up),
                rps_cpus: k.as_ref().ok().and_then(|k| k.rps_cpus.clone()),
                threaded_napi: k.as_ref().ok().and_then(|k| k.threaded_napi),
                xdp: k.as_ref().ok().map(|k| k.xdp),
                offloads: k.as_ref().ok().and_then(|k| k.offloads.clone()),
                error: k.err().map(|e| e.to_string()),
            });
        }
    }
    let agents_running = state
        .hosts
        .iter()
        .map(|h| (h.name.clone(), h.agent_pid.is_some_and(|p| sys::alive(p as i32))))
        .collect();
    StatusJson {
        lab: state,
        kernel,
        agents_running,
    }
}
