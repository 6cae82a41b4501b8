//! Building, changing and removing a lab in the kernel, driven by its
//! [`LabState`]. `up` saves the state before creating anything; `down`
//! finds what exists by name as well as from the state, so it also cleans a
//! half-built lab or one whose builder was killed.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::cgroup::{self, CpuController};
use super::spec::{
    self, CpuLimit, LabSpec, MtuSetting, OffloadSetting, QueueSetting, RateSetting, BRIDGE, PREFIX_LEN, ROUTER, SWITCH,
    SWITCH_ADDRESS,
};
use super::state::{self, LabState};
use super::{steer, sys, thief, LabError, Topology};

/// Directory `ip netns exec` bind-mounts files from (e.g. `hosts`).
const ETC_NETNS: &str = "/etc/netns";

/// How to start the agents.
#[derive(Debug, Clone)]
pub struct AgentLaunch {
    /// The nicbench binary.
    pub program: PathBuf,
    /// Start them in their own session so they outlive the building process.
    pub detach: bool,
}

/// The hostname processes in a lab host see: `LAB-HOST`, e.g. `demo-a`.
pub fn uts_hostname(lab: &str, host: &str) -> String {
    format!("{lab}-{host}")
}

/// A command that runs `program` inside `host` (in its cgroup if limited),
/// in a UTS namespace of its own named [`uts_hostname`], so that what runs
/// there (agents, `lab exec`) reports the lab host, as a container would,
/// with the lab's paths in its environment ([`crate::lab_env`]).
pub fn host_command(state: &LabState, host: &str, program: impl AsRef<std::ffi::OsStr>) -> Result<Command, LabError> {
    let h = state.host(host).ok_or_else(|| unknown_host(state, host))?;
    let mut command = Command::new(sys::ip_program());
    command.args(["netns", "exec", &h.netns]).arg(program);
    let name = uts_hostname(&state.name, host).into_bytes();
    // SAFETY: between fork and exec the closure only calls the
    // async-signal-safe unshare and sethostname, and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if libc::unshare(libc::CLONE_NEWUTS) != 0 || libc::sethostname(name.as_ptr().cast(), name.len()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    if let Some(dir) = &h.cpuset {
        // The host's cores.
        cgroup::join_on_spawn(&mut command, dir);
    }
    if let Some(dir) = &h.cgroup {
        cgroup::join_on_spawn(&mut command, dir);
        // Where the host's processes read their own cgroup (probe::cgroup).
        command.env(
            crate::probe::cgroup::CGROUP_VAR,
            cgroup::published_dir(&state.name, host),
        );
    }
    // Where the lab is shaped, for clients that judge a line rate or
    // sample the router's queue (crate::lab_env reads it).
    command.envs(super::env::client_vars(state, host));
    Ok(command)
}

pub fn unknown_host(state: &LabState, host: &str) -> LabError {
    let hosts: Vec<&str> = state.hosts.iter().map(|h| h.name.as_str()).collect();
    LabError::Invalid {
        option: "HOST",
        input: host.to_string(),
        hint: format!("unknown host; lab '{}' has {}", state.name, hosts.join(", ")),
    }
}

/// Builds the lab `spec` describes. On any failure everything created so far
/// is removed again. Returns the state and the agent processes.
pub fn up(spec: &LabSpec, agents: Option<&AgentLaunch>) -> Result<(LabState, Vec<Child>), LabError> {
    let mut state = spec::layout(spec)?;
    if cgroup::cpuset_root().is_some() {
        super::cores::assign_cores(&mut state, &cgroup::online_cpus(), spec.cores);
    } else {
        log::warn!(
            "no cgroup cpuset controller: the lab's hosts own no cores, so their CPU figures are the machine's \
             (mount cgroup v1's cpuset at /sys/fs/cgroup/cpuset, or use cgroup v2 with cpuset)"
        );
    }
    let needs_tc = state
        .links
        .iter()
        .any(|l| l.ends.iter().any(|e| e.rate_bits_per_second.is_some()));
    sys::preflight(needs_tc)?;
    if state.mptcp {
        crate::probe::mptcp::availability().map_err(|e| LabError::Missing {
            what: "Multipath TCP for --mptcp".into(),
            how: e.to_string(),
        })?;
    }
    let controller = match state.hosts.iter().any(|h| h.cpu_limit_percent.is_some()) {
        true => Some(CpuController::detect()?),
        false => None,
    };
    if let Some(netns) = existing_netns(&spec.name)?.first() {
        return Err(LabError::Exists {
            name: spec.name.clone(),
            detail: format!("namespace {netns} exists"),
        });
    }
    state.create()?;
    let mut children = Vec::new();
    match build(&mut state, controller.as_ref(), agents, &mut children) {
        Ok(()) => Ok((state, children)),
        Err(error) => {
            for child in &mut children {
                let _ = child.kill();
                let _ = child.wait();
            }
            if let Err(cleanup) = down(&spec.name) {
                log::warn!("cleaning up the half-built lab '{}': {cleanup}", spec.name);
            }
            Err(error)
        }
    }
}

fn build(
    state: &mut LabState,
    controller: Option<&CpuController>,
    agents: Option<&AgentLaunch>,
    children: &mut Vec<Child>,
) -> Result<(), LabError> {
    let lab = state.name.clone();
    for i in 0..state.hosts.len() {
        let (name, netns) = (state.hosts[i].name.clone(), state.hosts[i].netns.clone());
        sys::ip(&["netns", "add", &netns])?;
        sys::ip_in(&netns, &["link", "set", "dev", "lo", "up"])?;
        write_hosts_file(&netns, &spec::hosts_file(state, &name))?;
        if !state.hosts[i].cores.is_empty() {
            let dir = cgroup::create_cpuset(&lab, &name, &state.hosts[i].cores)?;
            state.hosts[i].cpuset = Some(dir);
            state.save()?;
        }
        if let (Some(percent), Some(controller)) = (state.hosts[i].cpu_limit_percent, controller) {
            let dir = controller.create(&lab, &name, percent)?;
            state.hosts[i].cgroup = Some(dir.clone());
            state.save()?;
            cgroup::publish(&dir, &lab, &name)?;
        }
        state.save()?;
    }
    if state.topology == Topology::Switch {
        add_bridge(&spec::netns_name(&lab, SWITCH))?;
    }
    for link in state.links.clone() {
        let [x, y] = &link.ends;
        let ns = |host: &str| spec::netns_name(&lab, host);
        let (nx, ny) = (ns(&x.host), ns(&y.host));
        sys::ip(&[
            "link", "add", &x.ifname, "netns", &nx, "type", "veth", "peer", "name", &y.ifname, "netns", &ny,
        ])?;
        for end in &link.ends {
            let netns = ns(&end.host);
            let mtu = link.mtu.to_string();
            let addr = format!("{}/{PREFIX_LEN}", end.address);
            sys::ip_in(&netns, &["link", "set", "dev", &end.ifname, "mtu", &mtu])?;
            match end.host == SWITCH {
                // A switch port: a bridge port has no address of its own.
                true => sys::ip_in(&netns, &["link", "set", "dev", &end.ifname, "master", BRIDGE])?,
                false => sys::ip_in(&netns, &["addr", "add", &addr, "dev", &end.ifname])?,
            };
            sys::ip_in(&netns, &["link", "set", "dev", &end.ifname, "up"])?;
            if end.rate_bits_per_second.is_some() {
                sys::set_tbf(
                    &netns,
                    &end.ifname,
                    end.rate_bits_per_second,
                    link.mtu,
                    end.queue_seconds,
                )?;
            }
        }
    }
    if state.topology == Topology::ViaRouter {
        sys::sysctl_in(&spec::netns_name(&lab, ROUTER), "net/ipv4/ip_forward", "1")?;
        for host in state.hosts.iter().filter(|h| !h.router) {
            for (subnet, gateway) in spec::routes(state, &host.name) {
                let (dest, via) = (format!("{subnet}/{PREFIX_LEN}"), gateway.to_string());
                sys::ip_in(&host.netns, &["route", "add", &dest, "via", &via])?;
            }
        }
    }
    for host in state.hosts.iter().filter(|h| !h.router) {
        set_mptcp(state, &host.name, &host.netns)?;
    }
    let program = match agents {
        Some(launch) => launch.program.clone(),
        None => super::nicbench_program("the CPU thieves")?,
    };
    for i in 0..state.hosts.len() {
        if let Some(child) = thief::start(&state.hosts[i], &program)? {
            state.hosts[i].thief_pid = Some(child.id());
            children.push(child);
            state.save()?;
        }
    }
    steer_links(state, None)?;
    if let (Some(launch), Some(port)) = (agents, state.agent_port) {
        for i in 0..state.hosts.len() {
            let child = start_agent(state, &state.hosts[i].name.clone(), launch, port)?;
            state.hosts[i].agent_pid = Some(child.id());
            children.push(child);
            state.save()?;
        }
    }
    state.complete = true;
    state.save()
}

/// The switch's bridge: IGMP and MLD snooping on (a group's traffic
/// goes only to the ports that joined it) with the bridge as the querier
/// (a segment without a multicast router needs one, or snooping forgets
/// the members), multicast statistics kept, and the switch's address on
/// the hosts' subnet as the queries' source.
///
/// The querier asks IGMPv3 and MLDv2, so hosts answer in those versions:
/// a source-specific join reaches the mdb with its source, and no host
/// holds back its report because it heard another's (v2's suppression,
/// which leaves a member's port out of the mdb). Its response interval is
/// 1 s, not 10: a bridge that has just become the querier floods every
/// group to every port for that long, as it cannot yet know the members
/// (seen: a host whose IGMP was dropped got the group in a lab seconds old).
fn add_bridge(netns: &str) -> Result<(), LabError> {
    sys::ip_in(
        netns,
        &[
            "link",
            "add",
            BRIDGE,
            "type",
            "bridge",
            "mcast_snooping",
            "1",
            "mcast_stats_enabled",
            "1",
            "mcast_igmp_version",
            "3",
            "mcast_mld_version",
            "2",
            // Centiseconds.
            "mcast_query_response_interval",
            "100",
        ],
    )?;
    // The querier after the interval: the kernel takes the flooding time
    // from the interval as it is when the querier is turned on, and in
    // one command it turns the querier on first.
    sys::ip_in(
        netns,
        &["link", "set", "dev", BRIDGE, "type", "bridge", "mcast_querier", "1"],
    )?;
    let address = format!("{SWITCH_ADDRESS}/{PREFIX_LEN}");
    sys::ip_in(netns, &["addr", "add", &address, "dev", BRIDGE])?;
    sys::ip_in(netns, &["link", "set", "dev", BRIDGE, "up"])?;
    Ok(())
}

/// Sets the offloads of every link end (or of `only` those) and steers
/// its receive work ([`steer::steer_end`]), recording the napi threads.
fn steer_links(state: &mut LabState, only: Option<&[(usize, usize)]>) -> Result<(), LabError> {
    for l in 0..state.links.len() {
        for end in 0..2 {
            if only.is_some_and(|o| !o.contains(&(state.links[l].id, end))) {
                continue;
            }
            let link = state.links[l].clone();
            steer::apply_offloads(state, &link, end)?;
            let pinned = steer::steer_end(state, &link, end)?;
            state.links[l].ends[end].napi_threads = pinned;
            state.save()?;
        }
    }
    Ok(())
}

/// Changes the CPU limits and offloads of a running lab: a host's cgroup
/// quota and its thief (restarted for the new limit), the offloads of the
/// selected interfaces, and where their receive work runs. `program` is
/// the nicbench executable a thief runs.
pub fn set_host_work(
    state: &mut LabState,
    limits: &[CpuLimit],
    offloads: &[OffloadSetting],
    program: &Path,
) -> Result<(), LabError> {
    let mut next = state.clone();
    let hosts = spec::apply_cpu_limits(&mut next, limits)?;
    let mut ends = spec::apply_offloads(&mut next, offloads)?;
    let controller = match hosts
        .iter()
        .any(|h| next.host(h).is_some_and(|h| h.cpu_limit_percent.is_some()))
    {
        true => Some(CpuController::detect()?),
        false => None,
    };
    sys::preflight(false)?;
    *state = next;
    for host in &hosts {
        let i = state
            .hosts
            .iter()
            .position(|h| &h.name == host)
            .expect("a checked host");
        set_quota(state, i, controller.as_ref())?;
        thief::stop(state, host);
        if let Some(child) = thief::start(&state.hosts[i], program)? {
            state.hosts[i].thief_pid = Some(child.id());
        }
        state.save()?;
        // Every interface whose receive work is this host's.
        for link in &state.links {
            for end in 0..2 {
                if super::cores::receive_owner(state, link, end) == host.as_str() {
                    ends.push((link.id, end));
                }
            }
        }
    }
    ends.sort();
    ends.dedup();
    steer_links(state, Some(&ends))?;
    state.save()
}

/// Puts host `i`'s cgroup quota in line with its limit: made (with the
/// host's processes moved in) when it gets its first limit, rewritten when
/// it changes, lifted when it goes.
fn set_quota(state: &mut LabState, i: usize, controller: Option<&CpuController>) -> Result<(), LabError> {
    let (lab, name) = (state.name.clone(), state.hosts[i].name.clone());
    match (state.hosts[i].cpu_limit_percent, &state.hosts[i].cgroup, controller) {
        (Some(percent), _, Some(controller)) => {
            let fresh = state.hosts[i].cgroup.is_none();
            let dir = controller.create(&lab, &name, percent)?;
            if fresh {
                let mut pids = sys::netns_pids(&state.hosts[i].netns);
                if let Some(cpuset) = &state.hosts[i].cpuset {
                    pids.extend(cgroup::procs(cpuset));
                }
                pids.retain(|&p| Some(p as u32) != state.hosts[i].thief_pid);
                for pid in pids {
                    let _ = std::fs::write(dir.join("cgroup.procs"), pid.to_string());
                }
                state.hosts[i].cgroup = Some(dir.clone());
                state.save()?;
                cgroup::publish(&dir, &lab, &name)?;
            }
        }
        (None, Some(dir), _) => cgroup::lift_quota(dir)?,
        _ => {}
    }
    Ok(())
}

/// `--mptcp`: the path manager of `host` allows a subflow and an accepted
/// address per extra link, and announces each extra link's address, so a
/// connection between two hosts opens one subflow per link (the client
/// joins each address the agent announces, from its own address on that
/// link, as the routes choose).
fn set_mptcp(state: &LabState, host: &str, netns: &str) -> Result<(), LabError> {
    if !state.mptcp {
        return Ok(());
    }
    let endpoints = state.mptcp_endpoints(host);
    let (subflows, accepted) = state.mptcp_limits(host).unwrap_or_default();
    sys::ip_in(
        netns,
        &[
            "mptcp",
            "limits",
            "set",
            "subflows",
            &subflows.to_string(),
            "add_addr_accepted",
            &accepted.to_string(),
        ],
    )?;
    for (address, ifname) in &endpoints {
        let address = address.to_string();
        sys::ip_in(netns, &["mptcp", "endpoint", "add", &address, "dev", ifname, "signal"])?;
    }
    Ok(())
}

fn write_hosts_file(netns: &str, contents: &str) -> Result<(), LabError> {
    let dir = Path::new(ETC_NETNS).join(netns);
    std::fs::create_dir_all(&dir)
        .and_then(|_| std::fs::write(dir.join("hosts"), contents))
        .map_err(|e| LabError::Io {
            what: format!("writing {}/hosts", dir.display()),
            source: e,
        })
}

/// Starts `nicbench serve` in `host` and waits until it listens.
fn start_agent(state: &LabState, host: &str, launch: &AgentLaunch, port: u16) -> Result<Child, LabError> {
    let log_dir = state::log_dir(&state.name);
    let log_path = log_dir.join(format!("{host}-agent.log"));
    let io = |what: String| move |e: std::io::Error| LabError::Io { what, source: e };
    std::fs::create_dir_all(&log_dir).map_err(io(format!("creating {}", log_dir.display())))?;
    let log = std::fs::File::create(&log_path).map_err(io(format!("creating {}", log_path.display())))?;
    let mut command = host_command(state, host, &launch.program)?;
    command
        .args(["serve", "-p", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    if launch.detach {
        // SAFETY: setsid is async-signal-safe and touches no memory.
        unsafe {
            command.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
    }
    let mut child = command
        .spawn()
        .map_err(io(format!("starting the agent in host {host}")))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let file = std::fs::File::open(&log_path).map_err(io(format!("reading {}", log_path.display())))?;
        if BufReader::new(file)
            .lines()
            .map_while(Result::ok)
            .any(|l| l.contains("listening on"))
        {
            return Ok(child);
        }
        let exited = child.try_wait().ok().flatten();
        if exited.is_some() || Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let why = match exited {
                Some(status) => format!("it exited ({status})"),
                None => "it did not start listening within 10 s".to_string(),
            };
            return Err(LabError::Agent {
                host: host.to_string(),
                reason: format!("{why}; its log {}: {}", log_path.display(), log.trim()),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The namespaces of lab `name` that exist now.
pub fn existing_netns(name: &str) -> Result<Vec<String>, LabError> {
    Ok(sys::netns_list()?
        .into_iter()
        .filter(|ns| spec::parse_netns_name(ns).is_some_and(|(lab, _)| lab == name))
        .collect())
}

fn etc_netns_dirs(name: Option<&str>) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(ETC_NETNS) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(spec::parse_netns_name)
                .is_some_and(|(lab, _)| name.is_none() || name == Some(lab))
        })
        .map(|e| e.path())
        .collect()
}

/// Every lab nicbench left anything of: state files, namespaces, host files, cgroups.
pub fn all_lab_names() -> Result<Vec<String>, LabError> {
    let mut names = state::saved_lab_names();
    names.extend(
        sys::netns_list()?
            .iter()
            .filter_map(|ns| spec::parse_netns_name(ns).map(|(l, _)| l.to_string())),
    );
    names.extend(
        etc_netns_dirs(None)
            .iter()
            .filter_map(|p| spec::parse_netns_name(p.file_name()?.to_str()?).map(|(l, _)| l.to_string())),
    );
    names.extend(cgroup::lab_names());
    names.sort();
    names.dedup();
    Ok(names)
}

/// Removes the labs of test processes that died without tearing them
/// down (a test run killed with SIGKILL leaves its namespaces, links,
/// cgroups and state): every automatic lab `t<pid>-<n>` whose process is
/// gone. Labs of live processes, and labs with any other name, are left.
/// Returns the labs removed; a lab that cannot be removed is logged and
/// left for `nicbench lab down`.
pub fn reclaim_orphans() -> Vec<String> {
    let Ok(names) = all_lab_names() else {
        return Vec::new();
    };
    let mut reclaimed = Vec::new();
    for name in names {
        let Some(pid) = spec::auto_name_pid(&name) else {
            continue;
        };
        let Ok(pid) = i32::try_from(pid) else {
            continue;
        };
        if pid as u32 == std::process::id() || sys::alive(pid) {
            continue;
        }
        match down(&name) {
            Ok(removed) if !removed.is_empty() => {
                log::info!(
                    "removed lab {name}, left by process {pid} that is gone: {}",
                    removed.join(", ")
                );
                reclaimed.push(name);
            }
            Ok(_) => {}
            Err(e) => log::warn!("lab {name} was left by process {pid} that is gone, and could not be removed: {e}"),
        }
    }
    reclaimed
}

/// Removes everything of lab `name`: processes, namespaces (and so their
/// links), host files, cgroups, state. Works from what exists, so a
/// half-built lab or one whose builder crashed goes too. Returns what was
/// removed (empty if nothing was there).
pub fn down(name: &str) -> Result<Vec<String>, LabError> {
    spec::validate_name(name)?;
    sys::preflight(false)?;
    let mut removed = Vec::new();
    let namespaces = existing_netns(name)?;
    let cgroups = cgroup::lab_dirs(name);
    let mut pids: Vec<i32> = namespaces.iter().flat_map(|ns| sys::netns_pids(ns)).collect();
    for dir in &cgroups {
        if let Ok(hosts) = std::fs::read_dir(dir) {
            pids.extend(hosts.filter_map(|e| e.ok()).flat_map(|e| cgroup::procs(&e.path())));
        }
    }
    pids.sort();
    pids.dedup();
    pids.retain(|&p| p as u32 != std::process::id());
    if !pids.is_empty() {
        sys::terminate(&pids, Duration::from_secs(2));
        removed.push(format!("{} process(es)", pids.len()));
    }
    let mut first_error = None;
    let mut note = |result: Result<(), LabError>, what: String| match result {
        Ok(()) => removed.push(what),
        Err(e) => {
            first_error.get_or_insert(e);
        }
    };
    for ns in &namespaces {
        note(sys::ip(&["netns", "del", ns]).map(|_| ()), format!("namespace {ns}"));
    }
    for dir in etc_netns_dirs(Some(name)) {
        let result = std::fs::remove_dir_all(&dir).map_err(|e| LabError::Io {
            what: format!("removing {}", dir.display()),
            source: e,
        });
        note(result, format!("{}", dir.display()));
    }
    // The published cgroups go first: a mounted cgroup directory is busy.
    match cgroup::unpublish_lab(name) {
        Ok(dirs) => {
            for dir in dirs {
                note(Ok(()), format!("published cgroup {}", dir.display()));
            }
        }
        Err(e) => note(Err(e), "published cgroups".into()),
    }
    for dir in cgroups {
        note(cgroup::remove_lab_dir(&dir), format!("cgroup {}", dir.display()));
    }
    let _ = std::fs::remove_dir_all(state::log_dir(name));
    let path = state::state_path(name);
    if path.exists() {
        let result = std::fs::remove_file(&path).map_err(|e| LabError::Io {
            what: format!("removing {}", path.display()),
            source: e,
        });
        note(result, format!("state {}", path.display()));
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(removed),
    }
}

/// Loads a complete lab's state, or says why it cannot be used.
pub fn load_complete(name: &str) -> Result<LabState, LabError> {
    spec::validate_name(name)?;
    match LabState::load(name)? {
        Some(state) if state.complete => {
            state.check_owned(name).map_err(|reason| LabError::State {
                path: state::state_path(name),
                reason: format!(
                    "{reason} (the file changed since `lab up` wrote it, so nothing acts on it; `lab down` \
                     works from the namespaces and cgroups that exist, not from the file)"
                ),
            })?;
            Ok(state)
        }
        Some(_) => Err(LabError::Incomplete { name: name.to_string() }),
        None => Err(LabError::NotFound { name: name.to_string() }),
    }
}

/// Changes MTUs, rate limits and router queues of a running lab (in the
/// kernel and in its state file). MTU changes re-apply the tbf of the
/// link, whose bucket depends on the MTU.
pub fn set(
    state: &mut LabState,
    mtu: &[MtuSetting],
    rate: &[RateSetting],
    queue: &[QueueSetting],
) -> Result<(), LabError> {
    // Checked on a copy first: a refused setting changes nothing.
    let mut next = state.clone();
    let mut changed_mtu = spec::apply_mtu(&mut next, mtu)?;
    let mut changed_rate = spec::apply_rate(&mut next, rate)?;
    changed_rate.extend(spec::apply_queue(&mut next, queue)?);
    *state = next;
    let needs_tc = !changed_rate.is_empty()
        || changed_mtu.iter().any(|&id| {
            state.links[id - 1]
                .ends
                .iter()
                .any(|e| e.rate_bits_per_second.is_some())
        });
    sys::preflight(needs_tc)?;
    changed_mtu.dedup();
    for &id in &changed_mtu {
        let link = &state.links[id - 1];
        for (i, end) in link.ends.iter().enumerate() {
            let netns = spec::netns_name(&state.name, &end.host);
            sys::ip_in(
                &netns,
                &["link", "set", "dev", &end.ifname, "mtu", &link.mtu.to_string()],
            )?;
            if end.rate_bits_per_second.is_some() {
                changed_rate.push((id, i));
            }
        }
    }
    changed_rate.sort();
    changed_rate.dedup();
    for (id, i) in changed_rate {
        let link = &state.links[id - 1];
        let end = &link.ends[i];
        sys::set_tbf(
            &spec::netns_name(&state.name, &end.host),
            &end.ifname,
            end.rate_bits_per_second,
            link.mtu,
            end.queue_seconds,
        )?;
    }
    state.save()
}
