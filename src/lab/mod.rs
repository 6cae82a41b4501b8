//! The lab: an emulated testbed of hosts and links on one machine. Hosts are
//! network namespaces joined by veth links (MTU per link, optional tbf rate
//! limit per link and direction), directly or through a router namespace
//! that carries the limits on its egress, with a queue length of choice; optionally a CPU limit per host;
//! an agent (`nicbench serve`) in every host; host names resolve inside the
//! lab. Used by `nicbench lab` and by the integration tests.
//!
//! Addresses are private (10.200.x.y/24) and exist only inside the lab's
//! namespaces; nothing is routed to or from the machine's own network.
//!
//! # Example (a test)
//!
//! ```no_run
//! use nicbench::lab::Lab;
//!
//! // In an integration test: env!("CARGO_BIN_EXE_nicbench").
//! let bin = "/usr/local/bin/nicbench";
//! if let Some(why) = nicbench::lab::unavailable() {
//!     eprintln!("SKIPPED: {why}");
//!     return;
//! }
//! // a -> r -> b with a 100 Mbit/s bottleneck in r, MTU 9000, agents in a, b and r.
//! let lab = Lab::builder()
//!     .via_router()
//!     .mtu(9000)
//!     .rate(100_000_000)
//!     .agent_program(bin)
//!     .build()
//!     .expect("build the lab");
//! let out = lab
//!     .command("a", bin)
//!     .args(["tcp", "b", "-t", "2", "--json"]) // `b` resolves inside the lab
//!     .output()
//!     .unwrap();
//! assert!(out.status.success());
//! println!("b is {} and its agent listens on port {}", lab.addr("b"), lab.agent_port());
//! // Dropping `lab` (also in a panic) removes namespaces, links, agents and cgroups.
//! ```

mod build;
pub mod cgroup;
pub mod cores;
pub mod env;
pub mod follow;
pub mod names;
pub mod spec;
pub mod state;
pub mod steer;
pub mod sys;
pub mod thief;
mod xdp;

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, Command};

use serde::{Deserialize, Serialize};

pub use build::{
    all_lab_names, down, existing_netns, host_command, load_complete, set, set_host_work, up, uts_hostname, AgentLaunch,
};
pub use spec::{CpuLimit, LabSpec, LinkSelector, MtuSetting, OffloadSetting, QueueSetting, RateSetting};
pub use state::{HostState, LabState, LinkEnd, LinkState};
pub use sys::KernelLink;

/// How the hosts are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Topology {
    /// Every pair of hosts joined by its own veth links.
    Direct,
    /// Every host joined to a router namespace `r`, which carries the rate
    /// limits on its egress so a bottleneck drops packets like a switch.
    ViaRouter,
    /// Every host on one Linux bridge in a switch namespace `sw`, all on
    /// one subnet: a shared segment, with IGMP/MLD snooping and a querier
    /// on, where a multicast group reaches every member; the rate limits
    /// sit on the switch ports' egress.
    Switch,
}

/// What can go wrong with a lab.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("invalid {option} '{input}': {hint}")]
    Invalid {
        option: &'static str,
        input: String,
        hint: String,
    },
    #[error("missing {what}: {how}")]
    Missing { what: String, how: String },
    #[error("lab '{name}' already exists ({detail}); see it with `nicbench lab status {name}` or remove it with `nicbench lab down {name}`")]
    Exists { name: String, detail: String },
    #[error("no lab named '{name}' (`nicbench lab status` lists the labs)")]
    NotFound { name: String },
    #[error("lab '{name}' was not completely built (its builder failed or was killed); remove it with `nicbench lab down {name}`")]
    Incomplete { name: String },
    #[error("`{command}` failed: {stderr}")]
    Command { command: String, stderr: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("lab state file {path} is unreadable: {reason}; remove the lab with `nicbench lab down`")]
    State { path: PathBuf, reason: String },
    #[error("the agent in host {host} did not start: {reason}")]
    Agent { host: String, reason: String },
}

/// Why labs cannot be built here (not root, no `ip` or `tc`), or None.
/// Tests print this and return early (counted as skipped).
pub fn unavailable() -> Option<String> {
    sys::preflight(true).err().map(|e| e.to_string())
}

/// The nicbench executable this process runs, for the lab's own processes
/// (agents, CPU thieves, `lab set` in another mount namespace, `lab exec
/// nicbench`): `what` says what it is for, in the error.
pub fn nicbench_program(what: &str) -> Result<PathBuf, LabError> {
    std::env::current_exe().map_err(|e| LabError::Io {
        what: format!("finding the nicbench executable for {what}"),
        source: e,
    })
}

/// Builds a [`Lab`]. Defaults: a unique name, 2 hosts (`a`, `b`) joined
/// directly by 1 link, MTU 1500, no rate limit, an agent in every host on
/// the default control port using the running executable.
#[derive(Debug, Clone)]
pub struct LabBuilder {
    spec: LabSpec,
    agent_program: Option<PathBuf>,
    auto_name: bool,
}

impl LabBuilder {
    /// Names the lab (default: unique per process and call, `t<pid>-<n>`).
    pub fn name(mut self, name: &str) -> Self {
        self.spec.name = name.to_string();
        self.auto_name = false;
        self
    }
    /// Number of hosts, 2 to 16, named `a`, `b`, ...
    pub fn hosts(mut self, hosts: usize) -> Self {
        self.spec.hosts = hosts;
        self
    }
    /// Parallel links between each pair of hosts (or each host and the router).
    pub fn links(mut self, links: usize) -> Self {
        self.spec.links = links;
        self
    }
    /// Joins the hosts through a router host `r` instead of directly.
    pub fn via_router(mut self) -> Self {
        self.spec.topology = Topology::ViaRouter;
        self
    }
    /// Joins the hosts on one switch (a Linux bridge in host `sw`).
    pub fn switch(mut self) -> Self {
        self.spec.topology = Topology::Switch;
        self
    }
    /// MTU of every link.
    pub fn mtu(mut self, mtu: u32) -> Self {
        self.spec.mtu.push(MtuSetting { link: None, mtu });
        self
    }
    /// MTU of link `link` (numbered from 1).
    pub fn link_mtu(mut self, link: usize, mtu: u32) -> Self {
        self.spec.mtu.push(MtuSetting { link: Some(link), mtu });
        self
    }
    /// Rate limit on every link: both directions of a direct link, the
    /// router's egress via the router.
    pub fn rate(mut self, bits_per_second: u64) -> Self {
        self.spec.rate.push(RateSetting {
            select: LinkSelector {
                link: None,
                towards: None,
            },
            bits_per_second: Some(bits_per_second),
        });
        self
    }
    /// Rate limit on link `link` for the traffic towards host `towards`.
    pub fn link_rate(mut self, link: usize, towards: &str, bits_per_second: u64) -> Self {
        self.spec.rate.push(RateSetting {
            select: LinkSelector {
                link: Some(link),
                towards: Some(towards.to_string()),
            },
            bits_per_second: Some(bits_per_second),
        });
        self
    }
    /// Router queue length on every link (how long the router's tbf may
    /// hold a packet); needs [`Self::via_router`] and a rate.
    pub fn queue(mut self, seconds: f64) -> Self {
        self.spec.queue.push(QueueSetting {
            select: LinkSelector {
                link: None,
                towards: None,
            },
            seconds: Some(seconds),
        });
        self
    }
    /// Offloads of the links' interfaces (`--offloads`; see
    /// [`spec::parse_offload_setting`]).
    pub fn offloads(mut self, setting: OffloadSetting) -> Self {
        self.spec.offloads.push(setting);
        self
    }
    /// Which cores the hosts run on (`--cores`; default `auto`).
    pub fn cores(mut self, policy: cores::CorePolicy) -> Self {
        self.spec.cores = policy;
        self
    }
    /// Limits `host` to `percent` of one core: its processes (a cgroup
    /// quota) and, below what its cores give, all its work (a thief takes
    /// its cores the rest of every period; see [`thief`]).
    pub fn cpu_limit(mut self, host: &str, percent: f64) -> Self {
        self.spec.cpu_limits.push(CpuLimit {
            host: host.to_string(),
            percent,
        });
        self
    }
    /// No agents.
    /// Multipath TCP endpoints and limits on every host (`lab up --mptcp`).
    pub fn mptcp(mut self) -> Self {
        self.spec.mptcp = true;
        self
    }

    pub fn no_agents(mut self) -> Self {
        self.spec.agent_port = None;
        self
    }
    /// Control port of the agents (each host has its own port space).
    pub fn agent_port(mut self, port: u16) -> Self {
        self.spec.agent_port = Some(port);
        self
    }
    /// The nicbench binary for the agents; tests pass `env!("CARGO_BIN_EXE_nicbench")`.
    pub fn agent_program(mut self, program: impl Into<PathBuf>) -> Self {
        self.agent_program = Some(program.into());
        self
    }
    /// Builds the lab; on failure nothing is left behind.
    pub fn build(self) -> Result<Lab, LabError> {
        let program = match self.agent_program {
            Some(p) => p,
            None => nicbench_program("the agents")?,
        };
        if self.auto_name {
            // Labs of test processes that were killed before their Drop ran.
            build::reclaim_orphans();
        }
        if self.auto_name
            && (LabState::load(&self.spec.name).is_ok_and(|s| s.is_some())
                || existing_netns(&self.spec.name).is_ok_and(|ns| !ns.is_empty()))
        {
            // The name holds this process's pid, so whatever carries it was
            // left by an earlier process with the same pid that died.
            down(&self.spec.name)?;
        }
        let launch = AgentLaunch {
            program: program.clone(),
            detach: false,
        };
        let (state, agents) = up(&self.spec, Some(&launch))?;
        Ok(Lab { state, agents, program })
    }
}

/// A running lab, torn down when dropped (also when a test panics).
#[derive(Debug)]
pub struct Lab {
    state: LabState,
    /// Agents and CPU thieves.
    agents: Vec<Child>,
    /// The nicbench executable (agents, thieves).
    program: PathBuf,
}

impl Lab {
    /// Starts describing a lab; see [`LabBuilder`].
    pub fn builder() -> LabBuilder {
        LabBuilder {
            spec: LabSpec {
                name: spec::unique_name(),
                hosts: 2,
                links: 1,
                topology: Topology::Direct,
                mtu: Vec::new(),
                rate: Vec::new(),
                queue: Vec::new(),
                cpu_limits: Vec::new(),
                offloads: vec![],
                cores: Default::default(),
                mptcp: false,
                agent_port: Some(crate::protocol::DEFAULT_PORT),
            },
            agent_program: None,
            auto_name: true,
        }
    }

    pub fn name(&self) -> &str {
        &self.state.name
    }

    /// Everything about the lab: hosts, links, interfaces, addresses, limits.
    pub fn state(&self) -> &LabState {
        &self.state
    }

    fn host(&self, host: &str) -> &HostState {
        self.state
            .host(host)
            .unwrap_or_else(|| panic!("{}", build::unknown_host(&self.state, host)))
    }

    /// The network namespace of `host`. Panics on an unknown host.
    pub fn netns(&self, host: &str) -> &str {
        &self.host(host).netns
    }

    /// The address of `host` on its first link (what its name resolves to
    /// from its peers when every pair shares link 1). Panics on an unknown host.
    pub fn addr(&self, host: &str) -> Ipv4Addr {
        self.host(host);
        let link = self.state.links_of(host)[0];
        link.end_of(host).expect("own link").address
    }

    /// The address of `host` on link `link`. Panics if `host` is not on it.
    pub fn link_addr(&self, link: usize, host: &str) -> Ipv4Addr {
        let end = self.state.links.get(link.wrapping_sub(1)).and_then(|l| l.end_of(host));
        end.unwrap_or_else(|| panic!("host {host} is not on link {link}"))
            .address
    }

    /// A command that runs `program` inside `host`, in its CPU cgroup if it
    /// has a limit. Host names resolve inside. Panics on an unknown host.
    pub fn command(&self, host: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        build::host_command(&self.state, host, program).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Control port of the agents. Panics when built with `no_agents`.
    pub fn agent_port(&self) -> u16 {
        self.state.agent_port.expect("the lab was built without agents")
    }

    /// Sets the MTU of every link (`link` None) or of one link.
    pub fn set_mtu(&mut self, link: Option<usize>, mtu: u32) -> Result<(), LabError> {
        set(&mut self.state, &[MtuSetting { link, mtu }], &[], &[])
    }

    /// Sets (or with None removes) a rate limit, as [`LabBuilder::rate`] or
    /// [`LabBuilder::link_rate`] would.
    pub fn set_rate(&mut self, select: LinkSelector, bits_per_second: Option<u64>) -> Result<(), LabError> {
        set(
            &mut self.state,
            &[],
            &[RateSetting {
                select,
                bits_per_second,
            }],
            &[],
        )
    }

    /// Sets (or with None puts back to the default) a router queue length,
    /// as [`LabBuilder::queue`] would, or for one link and direction.
    pub fn set_queue(&mut self, select: LinkSelector, seconds: Option<f64>) -> Result<(), LabError> {
        set(&mut self.state, &[], &[], &[QueueSetting { select, seconds }])
    }

    /// Changes CPU limits (`percent` 0 lifts one) and offloads, as `lab set
    /// --cpu-limit --offloads` does.
    pub fn set_host_work(&mut self, limits: &[CpuLimit], offloads: &[OffloadSetting]) -> Result<(), LabError> {
        let program = self.program.clone();
        set_host_work(&mut self.state, limits, offloads, &program)
    }

    /// What the kernel reports for `host`'s end of link `link`.
    pub fn kernel_link(&self, link: usize, host: &str) -> Result<KernelLink, LabError> {
        let end = self.state.links.get(link.wrapping_sub(1)).and_then(|l| l.end_of(host));
        let end = end.unwrap_or_else(|| panic!("host {host} is not on link {link}"));
        sys::kernel_link(self.netns(host), &end.ifname)
    }

    /// Tears the lab down now and reports any failure (dropping does the
    /// same but can only print failures).
    pub fn down(mut self) -> Result<(), LabError> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), LabError> {
        for child in &mut self.agents {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.agents.clear();
        if self.state.name.is_empty() {
            return Ok(());
        }
        let name = std::mem::take(&mut self.state.name);
        down(&name).map(|_| ())
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let name = self.state.name.clone();
        if let Err(e) = self.teardown() {
            eprintln!("nicbench lab: tearing down lab '{name}': {e}");
        }
    }
}
