//! `nicbench lab`: build, inspect, use and remove emulated testbeds.

use std::ffi::OsString;

use clap::{Args, Subcommand};

use crate::lab::cores::CorePolicy;
use crate::lab::spec::{self, CpuLimit, MtuSetting, OffloadSetting, QueueSetting, RateSetting};
use crate::lab::LabError;

/// `nicbench lab`
#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    pub command: LabCommand,
}

/// Hosts are network namespaces joined by veth links; addresses
/// (10.200.x.y/24) exist only inside the lab. Needs root and iproute2.
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Build a lab and start an agent (`nicbench serve`) in every host.
    ///
    /// Examples: `lab up demo --mtu 9000`; `lab up slow --via-router --rate 100mbit`;
    /// `lab up deep --via-router --rate 100mbit --queue 200ms`;
    /// `lab up trio --links 3 --rate 100mbit`; `lab up weak --cpu-limit a=25%`.
    Up(LabUpArgs),
    /// Show a lab: hosts, links, addresses, MTUs, rates (as the kernel has
    /// them) and agents. Without a name, list every lab.
    Status(LabStatusArgs),
    /// Run a command inside a host, e.g. `lab exec demo a -- nicbench tcp b`.
    /// Host names resolve inside the lab; `nicbench` means this executable;
    /// NICBENCH_PORT is set to the lab's agent port, the clients' default port;
    /// NICBENCH_LAB and NICBENCH_LAB_PATHS say where the lab is shaped.
    Exec(LabExecArgs),
    /// Change the MTU or rate limits of a running lab.
    Set(LabSetArgs),
    /// Remove a lab and everything in it, also a half-built one.
    Down(LabDownArgs),
    /// The CPU thief of a host with a CPU limit (the lab starts it).
    #[command(hide = true)]
    Thief(LabThiefArgs),
}

/// `nicbench lab thief` (started by the lab, not by hand).
#[derive(Debug, Args)]
pub struct LabThiefArgs {
    /// The host's network namespace: the thief leaves when it is gone.
    #[arg(long)]
    pub netns: String,
    /// The host's cores (`0-1,3`).
    #[arg(long)]
    pub cores: String,
    /// Percent of every 10 ms period to take from each core.
    #[arg(long)]
    pub busy_percent: f64,
}

fn lab_name(s: &str) -> Result<String, String> {
    spec::validate_name(s).map(|_| s.to_string()).map_err(hint)
}

fn hint(e: LabError) -> String {
    match e {
        LabError::Invalid { hint, .. } => hint,
        other => other.to_string(),
    }
}

fn mtu_setting(s: &str) -> Result<MtuSetting, String> {
    spec::parse_mtu_setting(s).map_err(hint)
}

fn rate_setting(s: &str) -> Result<RateSetting, String> {
    spec::parse_rate_setting(s).map_err(hint)
}

fn queue_setting(s: &str) -> Result<QueueSetting, String> {
    spec::parse_queue_setting(s).map_err(hint)
}

fn core_policy(s: &str) -> Result<CorePolicy, String> {
    s.parse().map_err(hint)
}

fn cpu_limit(s: &str) -> Result<CpuLimit, String> {
    spec::parse_cpu_limit(s).map_err(hint)
}

fn cpu_limit_or_none(s: &str) -> Result<CpuLimit, String> {
    spec::parse_cpu_limit_or_none(s).map_err(hint)
}

fn offload_setting(s: &str) -> Result<OffloadSetting, String> {
    spec::parse_offload_setting(s).map_err(hint)
}

/// `nicbench lab up`
#[derive(Debug, Args)]
pub struct LabUpArgs {
    /// Name of the lab (1 to 15 of a-z, 0-9, '-'). A name t<pid>-<n> belongs
    /// to process <pid> (the tests name their labs so): once that process is
    /// gone, the next test lab removes it.
    #[arg(value_parser = lab_name)]
    pub name: String,
    /// Number of hosts, named a, b, c, ...
    #[arg(long, value_name = "N", default_value_t = 2,
          value_parser = super::parse::between::<u16>(2, spec::MAX_HOSTS as u64))]
    pub hosts: u16,
    /// Parallel links between every pair of hosts (or each host and the router).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = super::parse::between::<u16>(1, spec::MAX_LINKS as u64))]
    pub links: u16,
    /// Join the hosts through a router host `r`, which carries the rate
    /// limits on its egress (a bottleneck then drops packets, like a switch).
    #[arg(long, conflicts_with = "switch")]
    pub via_router: bool,
    /// Join the hosts on one switch: a Linux bridge in host `sw`, every host
    /// on 10.200.0.0/24 with one port each, IGMP/MLD snooping and a querier
    /// on (a shared segment, where a multicast group reaches every member).
    /// Rates and queues sit on the switch ports' egress, toward each host.
    #[arg(long)]
    pub switch: bool,
    /// MTU in bytes of every link, or of one link: `9000`, `2=1500`. Repeatable.
    #[arg(long, value_name = "[LINK=]MTU", value_parser = mtu_setting)]
    pub mtu: Vec<MtuSetting>,
    /// tbf rate limit: `100mbit` on every link (both directions of a direct
    /// link; the router's egress via the router), `2=1G` on link 2, `1:b=50M`
    /// on link 1 towards host b. `none` removes. Repeatable.
    #[arg(long, value_name = "[LINK[:HOST]=]RATE", value_parser = rate_setting)]
    pub rate: Vec<RateSetting>,
    /// How long the router's (or switch's) tbf may hold a packet (its queue; tc's
    /// `latency`), 1ms to 10s: `200ms` on every router link, `1:a=5ms`
    /// toward host a on link 1. Needs --via-router or --switch, and --rate; default: 20 ms
    /// of the rate in all, less the bucket. Repeatable.
    #[arg(long, value_name = "[LINK[:HOST]=]TIME", value_parser = queue_setting, requires = "rate")]
    pub queue: Vec<QueueSetting>,
    /// Limit a host's CPU, in percent of one core: `a=25%`. Its processes
    /// get that much (a cgroup quota), and its cores are free that share of
    /// every 10 ms to all its work, its packet processing included (a
    /// real-time thief takes the rest; `lab status` says what it slows).
    /// Repeatable.
    #[arg(long, value_name = "HOST=PERCENT", value_parser = cpu_limit)]
    pub cpu_limit: Vec<CpuLimit>,
    /// Offloads of the links' interfaces, as a plan names them: `tso=off,gso=off,gro=off`
    /// on every interface, `2=gro=off` on both ends of link 2, `1:b=tso=off`
    /// on b's end of link 1 (a NIC of another era: per-packet cost is
    /// real). Set with the ethtool ioctl. Repeatable.
    #[arg(long, value_name = "[LINK[:HOST]=]NAME=on|off,...", value_parser = offload_setting)]
    pub offloads: Vec<OffloadSetting>,
    /// Which cores the hosts run on: `own` gives each host an equal share of
    /// the machine's cores (its cpuset; its receive work steered there), so
    /// its CPU figures are its own; `shared` puts every host on every core;
    /// `auto` owns where the machine has more cores than the lab has hosts.
    /// A host limited below one core always gets a core of its own.
    #[arg(long, value_name = "auto|own|shared", default_value = "auto", value_parser = core_policy)]
    pub cores: CorePolicy,
    /// Multipath TCP on every host: a subflow per extra link allowed, and
    /// each extra link's address announced (`ip mptcp endpoint ... signal`),
    /// so `tcp --mptcp` opens one subflow per link. Needs --links 2 or more.
    #[arg(long)]
    pub mptcp: bool,
    /// Do not start agents.
    #[arg(long)]
    pub no_agents: bool,
    /// Control port of the agents (every host has its own port space).
    #[arg(long, value_name = "PORT", default_value_t = crate::protocol::DEFAULT_PORT)]
    pub agent_port: u16,
}

/// `nicbench lab status`
#[derive(Debug, Args)]
pub struct LabStatusArgs {
    /// The lab; all labs when left out.
    #[arg(value_parser = lab_name)]
    pub name: Option<String>,
    /// Print the lab's state and the kernel's view as JSON.
    #[arg(long, requires = "name")]
    pub json: bool,
}

/// `nicbench lab exec`
#[derive(Debug, Args)]
pub struct LabExecArgs {
    #[arg(value_parser = lab_name)]
    pub name: String,
    /// Host to run in (a, b, ..., r for the router).
    pub host: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// `nicbench lab set`
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("change").required(true).multiple(true).args(["mtu", "rate", "queue", "cpu_limit", "offloads"]))]
pub struct LabSetArgs {
    #[arg(value_parser = lab_name)]
    pub name: String,
    /// New MTU of every link or of one link: `1500`, `2=9000`.
    #[arg(long, value_name = "[LINK=]MTU", value_parser = mtu_setting)]
    pub mtu: Vec<MtuSetting>,
    /// New rate limit, as for `lab up`; `none` removes it (and its queue).
    #[arg(long, value_name = "[LINK[:HOST]=]RATE", value_parser = rate_setting)]
    pub rate: Vec<RateSetting>,
    /// New router queue length, as for `lab up`; `default` puts the default back.
    #[arg(long, value_name = "[LINK[:HOST]=]TIME", value_parser = queue_setting)]
    pub queue: Vec<QueueSetting>,
    /// New CPU limit of a host, as for `lab up`; `a=none` lifts it.
    #[arg(long, value_name = "HOST=PERCENT", value_parser = cpu_limit_or_none)]
    pub cpu_limit: Vec<CpuLimit>,
    /// Offloads to switch, as for `lab up`.
    #[arg(long, value_name = "[LINK[:HOST]=]NAME=on|off,...", value_parser = offload_setting)]
    pub offloads: Vec<OffloadSetting>,
}

/// `nicbench lab down`
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("which").required(true).args(["name", "all"]))]
pub struct LabDownArgs {
    #[arg(value_parser = lab_name)]
    pub name: Option<String>,
    /// Remove every lab nicbench made (found by name, with or without state),
    /// also other people's: lists them and asks on a terminal, else needs --yes.
    #[arg(long)]
    pub all: bool,
    /// With --all: remove without asking.
    #[arg(long, short = 'y', requires = "all")]
    pub yes: bool,
}
