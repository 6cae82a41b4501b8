//! What a process started by `nicbench lab exec` learns about the lab it
//! runs in, from its environment: the lab's name in [`LAB_VAR`] and, as
//! JSON in [`PATHS_VAR`], each host's addresses and, behind a router, the
//! router interface whose egress carries the traffic toward that address
//! (its tbf rate, queue length and MTU). `lab exec` writes both
//! ([`LabEnv::to_json`]); a client reads them with [`path_from_here`] to
//! know where its path is shaped without asking the user.
//!
//! The content comes from outside the process (anyone can set the
//! variables), so every field is validated: bad content gives `None` and a
//! warning, never a panic.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// The lab's name, set by `lab exec` in the command's environment.
pub const LAB_VAR: &str = "NICBENCH_LAB";
/// The lab's hosts, addresses and router links as JSON ([`LabEnv`]).
pub const PATHS_VAR: &str = "NICBENCH_LAB_PATHS";
/// Set by `nicbench lab exec`: the number of a descriptor, left open
/// across the exec, of the mount namespace `lab exec` ran in. `ip netns
/// exec` gives the command a mount namespace of its own with a fresh /sys
/// and no cgroup hierarchies; a plan that changes a lab host's CPU limit
/// makes the change through a `nicbench lab set` that enters this one.
pub const MOUNTS_FD_VAR: &str = "NICBENCH_LAB_MOUNTS_FD";
/// Version tag of [`PATHS_VAR`]'s JSON.
pub const SCHEMA: &str = "nicbench.lab-env/1";

/// Smallest and largest MTU a lab link takes (as `lab up --mtu` checks).
const MTU_RANGE: std::ops::RangeInclusive<u32> = 68..=65535;
/// Longest interface and namespace names accepted (interface names are at
/// most 15 bytes in Linux; namespace names are file names).
const MAX_IFACE_LEN: usize = 15;
const MAX_NETNS_LEN: usize = 255;
/// Core numbers accepted (the kernel's NR_CPUS is at most 8192).
const MAX_CORES: u32 = 8192;

/// The path from this host to a peer in the same lab, through its router.
#[derive(Debug, Clone, PartialEq)]
pub struct LabPath {
    /// The lab's name.
    pub lab: String,
    /// The router's network namespace (where its qdiscs can be read).
    pub router_netns: String,
    /// The router interface whose egress carries traffic to this host.
    pub toward_me: RouterLink,
    /// The router interface whose egress carries traffic to the peer.
    pub toward_peer: RouterLink,
}

/// One router interface, as the lab configured it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouterLink {
    /// The interface's name inside the router's namespace.
    pub iface: String,
    /// The tbf rate on its egress; None: not shaped.
    pub rate_bits_per_second: Option<u64>,
    /// How long the tbf's queue holds at its rate (its byte limit over the
    /// rate); None when not shaped.
    pub queue_seconds: Option<f64>,
    /// The link's MTU in bytes.
    pub mtu: u32,
}

/// [`PATHS_VAR`]'s content: the lab as a client inside it needs to see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabEnv {
    pub schema: String,
    pub lab: String,
    /// The host this environment was made for (the one `lab exec` ran in,
    /// a host or the router).
    pub host: String,
    /// The router; None in a lab without one.
    pub router: Option<EnvRouter>,
    pub hosts: Vec<EnvHost>,
    /// The cores this environment's host owns (its cpuset, where its packet
    /// work runs); None in a lab whose hosts own no cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores: Option<EnvCores>,
}

/// The cores a lab host owns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvCores {
    pub cores: Vec<u32>,
    /// Other lab hosts run on them too.
    pub shared: bool,
}

/// The lab's router: its host name and network namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvRouter {
    pub name: String,
    pub netns: String,
    /// The bridge that joins the hosts when the forwarding host is a
    /// switch (`lab up --switch`); None for a router. Each host's
    /// `router_link` is then its port on this bridge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<String>,
}

/// A switch lab's switch, as a command inside the lab finds it.
#[derive(Debug, Clone, PartialEq)]
pub struct LabSwitch {
    /// The lab's name.
    pub lab: String,
    /// The switch's network namespace.
    pub netns: String,
    pub bridge: String,
    /// Each bridge port toward a lab host.
    pub ports: Vec<SwitchPort>,
}

/// A switch port and the lab host behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct SwitchPort {
    pub port: String,
    pub host: String,
    /// The host's address on the link to this port.
    pub address: IpAddr,
}

/// A host of the lab (not the router) and its links, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvHost {
    pub name: String,
    pub links: Vec<EnvLink>,
}

/// One of a host's links: its address there and, behind a router, the
/// router's interface toward that address.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvLink {
    pub address: IpAddr,
    pub router_link: Option<RouterLink>,
}

impl LabEnv {
    /// Serializes to one line of JSON, for the environment.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a lab environment serializes")
    }

    /// Parses and validates [`PATHS_VAR`]'s content for lab `lab` (the
    /// value of [`LAB_VAR`]); the error says what is wrong.
    pub fn parse(lab: &str, json: &str) -> Result<LabEnv, String> {
        let env: LabEnv = serde_json::from_str(json).map_err(|e| format!("not the expected JSON: {e}"))?;
        env.validate(lab)?;
        Ok(env)
    }

    fn validate(&self, lab: &str) -> Result<(), String> {
        if self.schema != SCHEMA {
            return Err(format!("schema '{}', this nicbench reads '{SCHEMA}'", self.schema));
        }
        if self.lab != lab {
            return Err(format!("it describes lab '{}' but {LAB_VAR} is '{lab}'", self.lab));
        }
        if !plain_name(&self.lab, MAX_NETNS_LEN) {
            return Err(format!("lab name '{}' is not a lab name", self.lab));
        }
        let mut names = std::collections::BTreeSet::new();
        if let Some(router) = &self.router {
            if !plain_name(&router.netns, MAX_NETNS_LEN) {
                return Err(format!("router namespace '{}' is not a namespace name", router.netns));
            }
            if !plain_name(&router.name, MAX_NETNS_LEN) {
                return Err(format!("router name '{}' is invalid", router.name));
            }
            if let Some(bridge) = &router.bridge {
                if !plain_name(bridge, MAX_IFACE_LEN) {
                    return Err(format!("bridge '{bridge}' is not an interface name"));
                }
            }
            names.insert(router.name.as_str());
        }
        let mut addresses = std::collections::BTreeSet::new();
        for host in &self.hosts {
            if !plain_name(&host.name, MAX_NETNS_LEN) || !names.insert(host.name.as_str()) {
                return Err(format!("host name '{}' is invalid or repeated", host.name));
            }
            for link in &host.links {
                if !addresses.insert(link.address) {
                    return Err(format!("address {} appears twice", link.address));
                }
                if let Some(r) = &link.router_link {
                    r.validate().map_err(|e| format!("host {}: {e}", host.name))?;
                    if self.router.is_none() {
                        return Err(format!(
                            "host {} has a router link but the lab has no router",
                            host.name
                        ));
                    }
                }
            }
        }
        if !names.contains(self.host.as_str()) {
            return Err(format!("this host '{}' is not among the lab's hosts", self.host));
        }
        if let Some(c) = &self.cores {
            let unique: std::collections::BTreeSet<&u32> = c.cores.iter().collect();
            if c.cores.is_empty() || unique.len() != c.cores.len() || c.cores.iter().any(|&n| n >= MAX_CORES) {
                return Err(format!(
                    "cores {:?} are not distinct core numbers below {MAX_CORES}",
                    c.cores
                ));
            }
        }
        Ok(())
    }

    /// The router's namespace and its interface toward `address` (a lab
    /// host's address on a link behind the router).
    pub fn egress_toward(&self, address: IpAddr) -> Option<(String, RouterLink)> {
        let address = canonical(address);
        let router = self.router.as_ref()?;
        let link = self
            .hosts
            .iter()
            .flat_map(|h| &h.links)
            .find(|l| l.address == address)?;
        Some((router.netns.clone(), link.router_link.clone()?))
    }

    /// The lab's switch: its namespace, its bridge and the port toward
    /// each host; the error says why there is none.
    pub fn switch(&self) -> Result<LabSwitch, String> {
        let Some(router) = &self.router else {
            return Err(format!(
                "lab '{}' has no switch (its hosts are linked directly)",
                self.lab
            ));
        };
        let Some(bridge) = &router.bridge else {
            return Err(format!("lab '{}' has a router, not a switch", self.lab));
        };
        let ports = self
            .hosts
            .iter()
            .flat_map(|h| h.links.iter().map(move |l| (h, l)))
            .filter_map(|(h, l)| {
                Some(SwitchPort {
                    port: l.router_link.as_ref()?.iface.clone(),
                    host: h.name.clone(),
                    address: l.address,
                })
            })
            .collect();
        Ok(LabSwitch {
            lab: self.lab.clone(),
            netns: router.netns.clone(),
            bridge: bridge.clone(),
            ports,
        })
    }

    /// The path from this environment's host to `peer` through the router;
    /// None when the peer is not a lab host's address, is this host, or
    /// there is no router between them.
    pub fn path_to(&self, peer: IpAddr) -> Option<LabPath> {
        let peer = canonical(peer);
        let router_netns = self.router.as_ref()?.netns.clone();
        let (peer_host, index) = self.hosts.iter().find_map(|h| {
            let i = h.links.iter().position(|l| l.address == peer)?;
            Some((h, i))
        })?;
        if peer_host.name == self.host {
            return None;
        }
        let me = self.hosts.iter().find(|h| h.name == self.host)?;
        // Via the router, link i of one host reaches link i of the others.
        let toward_me = me.links.get(index)?.router_link.clone()?;
        let toward_peer = peer_host.links[index].router_link.clone()?;
        Some(LabPath {
            lab: self.lab.clone(),
            router_netns,
            toward_me,
            toward_peer,
        })
    }
}

impl RouterLink {
    fn validate(&self) -> Result<(), String> {
        if !plain_name(&self.iface, MAX_IFACE_LEN) {
            return Err(format!("router interface '{}' is not an interface name", self.iface));
        }
        if !MTU_RANGE.contains(&self.mtu) {
            return Err(format!(
                "MTU {} is outside {} to {}",
                self.mtu,
                MTU_RANGE.start(),
                MTU_RANGE.end()
            ));
        }
        if self.rate_bits_per_second == Some(0) {
            return Err("a rate of 0 bit/s".into());
        }
        if let Some(q) = self.queue_seconds {
            if !(q.is_finite() && q > 0.0 && q <= 3600.0) {
                return Err(format!("queue of {q} s is not a positive time up to an hour"));
            }
            if self.rate_bits_per_second.is_none() {
                return Err("a queue length without a rate".into());
            }
        }
        Ok(())
    }
}

/// 1 to `max` of ASCII letters, digits, `-`, `_` and `.`, not `.`/`..`,
/// not starting with `-`: a name that may go on a command line (`ip -n
/// NS`, `tc ... dev IFACE`) as one plain argument, never an option.
pub(crate) fn plain_name(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.len() <= max
        && name != "."
        && name != ".."
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// An IPv4-mapped IPv6 address as the IPv4 address it carries.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// [`PATHS_VAR`]'s content as it reads now, when this process changed the
/// lab since it started (a plan's queue axis sets the router's queue
/// between its cases): see [`describe_here`].
static PATHS_NOW: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Makes `paths` ([`LabEnv::to_json`]) what this process reads in place of
/// [`PATHS_VAR`] from now on; None goes back to the environment's.
pub fn describe_here(paths: Option<String>) {
    *PATHS_NOW.lock().unwrap_or_else(|e| e.into_inner()) = paths;
}

/// The lab this process runs in, from the environment `nicbench lab exec`
/// set. None outside a lab; a warning when the environment is there but
/// malformed.
fn env_here() -> Option<LabEnv> {
    read_env().unwrap_or_else(|why| {
        log::warn!("{why}: the lab's router is not known here");
        None
    })
}

/// The lab this process runs in: None outside a lab, the error when the
/// environment is there but malformed.
fn read_env() -> Result<Option<LabEnv>, String> {
    let Some(lab) = std::env::var_os(LAB_VAR) else {
        return Ok(None);
    };
    let lab = lab.to_str().ok_or_else(|| format!("${LAB_VAR} is not UTF-8"))?;
    let now = PATHS_NOW.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let Some(json) = now.map(Into::into).or_else(|| std::env::var_os(PATHS_VAR)) else {
        return Err(format!("${LAB_VAR} is set but ${PATHS_VAR} is not"));
    };
    json.to_str()
        .ok_or_else(|| "not UTF-8".to_string())
        .and_then(|json| LabEnv::parse(lab, json))
        .map(Some)
        .map_err(|e| format!("${PATHS_VAR} is unusable ({e})"))
}

/// The switch of the lab this process runs in; the error says why there
/// is none (not in a lab, a lab without a switch, an unusable environment).
pub fn switch_here() -> Result<LabSwitch, String> {
    read_env()?.ok_or_else(|| "not in a lab".to_string())?.switch()
}

/// The lab host this process runs in (`demo-a`, as its hostname reads)
/// and the cores it owns. None outside a lab or in a lab whose hosts own
/// no cores.
pub fn host_cores_here() -> Option<(String, EnvCores)> {
    let env = env_here()?;
    let cores = env.cores?;
    Some((format!("{}-{}", env.lab, env.host), cores))
}

/// Where lab state files live: `$NICBENCH_LAB_DIR` or `/run/nicbench/labs`
/// (`/run` is a tmpfs, so a reboot, which also removes every namespace,
/// clears it too).
pub fn state_dir() -> std::path::PathBuf {
    std::env::var_os("NICBENCH_LAB_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from("/run/nicbench/labs"))
}

/// The parts of a lab's state file that say which napi threads carry
/// which host's receive work (the lab writes the whole file; unknown
/// fields are skipped).
#[derive(Debug, Deserialize)]
struct StateThreads {
    hosts: Vec<StateHost>,
    links: Vec<StateLink>,
}

#[derive(Debug, Deserialize)]
struct StateHost {
    name: String,
    #[serde(default)]
    router: bool,
}

#[derive(Debug, Deserialize)]
struct StateLink {
    ends: [StateEnd; 2],
}

#[derive(Debug, Deserialize)]
struct StateEnd {
    host: String,
    #[serde(default)]
    napi_threads: Vec<u32>,
}

/// The napi threads carrying lab host `host`'s receive work, read from the
/// lab's state file text `json`: those of its own interfaces and, at the
/// router, of the interfaces toward it (what it sends is carried through
/// the router on its cores). Empty where none is threaded.
pub fn packet_work_threads_in(json: &str, host: &str) -> Result<Vec<u32>, String> {
    let state: StateThreads = serde_json::from_str(json).map_err(|e| format!("not a lab state file: {e}"))?;
    let router = |name: &str| state.hosts.iter().any(|h| h.name == name && h.router);
    let mut threads = Vec::new();
    for link in &state.links {
        for end in 0..2 {
            let here = &link.ends[end].host;
            let owner = if router(here) { &link.ends[1 - end].host } else { here };
            if owner == host {
                threads.extend(&link.ends[end].napi_threads);
            }
        }
    }
    threads.sort_unstable();
    threads.dedup();
    Ok(threads)
}

/// The napi threads carrying this process's lab host's receive work (see
/// [`packet_work_threads_in`]), read now from the lab's state file (a
/// `lab set` makes new ones). None outside a lab, or when the state file
/// cannot be read (a warning says why).
pub fn packet_work_threads() -> Option<Vec<u32>> {
    let env = env_here()?;
    let path = state_dir().join(format!("{}.json", env.lab));
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            log::warn!("cannot read lab state {}: {e}; host work not counted", path.display());
            return None;
        }
    };
    match packet_work_threads_in(&text, &env.host) {
        Ok(threads) => Some(threads),
        Err(e) => {
            log::warn!("lab state {}: {e}; host work not counted", path.display());
            None
        }
    }
}

/// The lab path from this process's host to `peer`. None outside a lab,
/// without a router between the two, or for a peer that is no lab host.
pub fn path_from_here(peer: IpAddr) -> Option<LabPath> {
    env_here()?.path_to(peer)
}

/// The lab router's network namespace and its interface whose egress
/// carries traffic toward `address`, whichever host sends it: how each
/// path of a multipath stream is shaped. None outside a lab, without a
/// router, or for an address no lab host has.
pub fn egress_toward(address: IpAddr) -> Option<(String, RouterLink)> {
    env_here()?.egress_toward(address)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosts_packet_work_is_its_interfaces_threads_and_the_routers_toward_it() {
        let state = r#"{"schema": "nicbench.lab/1", "name": "x", "extra": 1,
            "hosts": [{"name": "a"}, {"name": "b", "router": false}, {"name": "r", "router": true}],
            "links": [
              {"id": 1, "ends": [{"host": "a", "napi_threads": [10]}, {"host": "r", "napi_threads": [11]}]},
              {"id": 2, "ends": [{"host": "b", "napi_threads": [20]}, {"host": "r", "napi_threads": [21, 11]}]},
              {"id": 3, "ends": [{"host": "a"}, {"host": "b", "napi_threads": [30]}]}
            ]}"#;
        assert_eq!(packet_work_threads_in(state, "a").unwrap(), vec![10, 11]);
        assert_eq!(packet_work_threads_in(state, "b").unwrap(), vec![11, 20, 21, 30]);
        assert_eq!(packet_work_threads_in(state, "r").unwrap(), Vec::<u32>::new());
        assert_eq!(packet_work_threads_in(state, "nobody").unwrap(), Vec::<u32>::new());
        let bad = packet_work_threads_in(r#"{"hosts": 3}"#, "a").unwrap_err();
        assert!(bad.starts_with("not a lab state file"), "{bad}");
        assert!(packet_work_threads_in("", "a").is_err());
    }

    fn shaped(iface: &str) -> RouterLink {
        RouterLink {
            iface: iface.into(),
            rate_bits_per_second: Some(100_000_000),
            queue_seconds: Some(0.02),
            mtu: 1500,
        }
    }

    fn link(address: &str, router: Option<RouterLink>) -> EnvLink {
        EnvLink {
            address: address.parse().unwrap(),
            router_link: router,
        }
    }

    /// a and b behind router r, two links each: a on 10.200.1/2, b on 10.200.3/4.
    fn two_links() -> LabEnv {
        LabEnv {
            schema: SCHEMA.into(),
            lab: "demo".into(),
            host: "a".into(),
            router: Some(EnvRouter {
                name: "r".into(),
                netns: "nicbench-demo-r".into(),
                bridge: None,
            }),
            hosts: vec![
                EnvHost {
                    name: "a".into(),
                    links: vec![
                        link("10.200.1.2", Some(shaped("eth0"))),
                        link("10.200.2.2", Some(shaped("eth1"))),
                    ],
                },
                EnvHost {
                    name: "b".into(),
                    links: vec![
                        link("10.200.3.2", Some(shaped("eth2"))),
                        link("10.200.4.2", Some(shaped("eth3"))),
                    ],
                },
            ],
            cores: None,
        }
    }

    #[test]
    fn the_path_to_a_peer_names_the_router_links_of_the_same_link_index() {
        let env = LabEnv::parse("demo", &two_links().to_json()).unwrap();
        let path = env.path_to("10.200.4.2".parse().unwrap()).unwrap();
        assert_eq!(path.lab, "demo");
        assert_eq!(path.router_netns, "nicbench-demo-r");
        assert_eq!(path.toward_me.iface, "eth1");
        assert_eq!(path.toward_peer.iface, "eth3");
        assert_eq!(path.toward_peer.rate_bits_per_second, Some(100_000_000));
        let first = env.path_to("10.200.3.2".parse().unwrap()).unwrap();
        assert_eq!(
            (first.toward_me.iface.as_str(), first.toward_peer.iface.as_str()),
            ("eth0", "eth2")
        );
        // An IPv4-mapped IPv6 peer is the same peer.
        let mapped: IpAddr = "::ffff:10.200.3.2".parse().unwrap();
        assert_eq!(env.path_to(mapped), Some(first));
    }

    /// Each address's own router egress, whichever host asks: my own
    /// addresses too (the download direction of a multipath stream).
    #[test]
    fn the_egress_toward_an_address_is_its_own_links_router_interface() {
        let env = two_links();
        for (address, iface) in [
            ("10.200.1.2", "eth0"),
            ("10.200.2.2", "eth1"),
            ("10.200.4.2", "eth3"),
            ("::ffff:10.200.3.2", "eth2"),
        ] {
            let (netns, link) = env.egress_toward(address.parse().unwrap()).unwrap();
            assert_eq!(
                (netns.as_str(), link.iface.as_str()),
                ("nicbench-demo-r", iface),
                "{address}"
            );
        }
        assert_eq!(env.egress_toward("10.200.9.2".parse().unwrap()), None);
        let mut direct = two_links();
        direct.router = None;
        assert_eq!(direct.egress_toward("10.200.1.2".parse().unwrap()), None);
    }

    #[test]
    fn a_switch_is_the_forwarding_host_with_a_bridge_and_its_ports_name_the_hosts() {
        let mut on_switch = two_links();
        on_switch.router.as_mut().unwrap().bridge = Some("br0".into());
        let env = LabEnv::parse("demo", &on_switch.to_json()).unwrap();
        let switch = env.switch().unwrap();
        assert_eq!(
            (switch.lab.as_str(), switch.netns.as_str(), switch.bridge.as_str()),
            ("demo", "nicbench-demo-r", "br0")
        );
        let ports: Vec<(&str, &str, String)> = switch
            .ports
            .iter()
            .map(|p| (p.port.as_str(), p.host.as_str(), p.address.to_string()))
            .collect();
        assert_eq!(ports[0], ("eth0", "a", "10.200.1.2".to_string()));
        assert_eq!(ports[3], ("eth3", "b", "10.200.4.2".to_string()));
        assert_eq!(ports.len(), 4);
        let routed = two_links().switch().unwrap_err();
        assert!(routed.contains("a router, not a switch"), "{routed}");
        let mut direct = two_links();
        direct.router = None;
        assert!(direct.switch().unwrap_err().contains("no switch"));
        // A router's environment reads as before: no bridge field at all.
        assert!(!two_links().to_json().contains("bridge"));
    }

    #[test]
    fn no_path_to_myself_to_strangers_or_without_a_router() {
        let env = two_links();
        for peer in ["10.200.1.2", "10.200.2.2", "10.200.3.1", "127.0.0.1", "::1"] {
            assert_eq!(env.path_to(peer.parse().unwrap()), None, "{peer}");
        }
        let mut direct = two_links();
        direct.router = None;
        for h in &mut direct.hosts {
            for l in &mut h.links {
                l.router_link = None;
            }
        }
        let direct = LabEnv::parse("demo", &direct.to_json()).unwrap();
        assert_eq!(direct.path_to("10.200.3.2".parse().unwrap()), None);
        // The router itself is no host behind the router.
        let mut in_router = two_links();
        in_router.host = "r".into();
        let in_router = LabEnv::parse("demo", &in_router.to_json()).unwrap();
        assert_eq!(in_router.path_to("10.200.3.2".parse().unwrap()), None);
    }

    #[test]
    fn malformed_content_is_refused_with_the_reason() {
        type Breakage = Box<dyn Fn(&mut LabEnv)>;
        let cases: Vec<(&str, Breakage)> = vec![
            ("schema", Box::new(|e| e.schema = "nicbench.lab-env/9".into())),
            ("lab 'other'", Box::new(|e| e.lab = "other".into())),
            (
                "namespace",
                Box::new(|e| e.router.as_mut().unwrap().netns = "../etc".into()),
            ),
            ("repeated", Box::new(|e| e.hosts[1].name = "a".into())),
            (
                "twice",
                Box::new(|e| e.hosts[1].links[0].address = "10.200.1.2".parse().unwrap()),
            ),
            (
                "interface",
                Box::new(|e| e.hosts[0].links[0].router_link.as_mut().unwrap().iface = "eth0; rm".into()),
            ),
            (
                "MTU 0",
                Box::new(|e| e.hosts[0].links[0].router_link.as_mut().unwrap().mtu = 0),
            ),
            (
                "0 bit/s",
                Box::new(|e| e.hosts[0].links[0].router_link.as_mut().unwrap().rate_bits_per_second = Some(0)),
            ),
            (
                "queue",
                Box::new(|e| e.hosts[0].links[0].router_link.as_mut().unwrap().queue_seconds = Some(-1.0)),
            ),
            (
                "without a rate",
                Box::new(|e| e.hosts[0].links[0].router_link.as_mut().unwrap().rate_bits_per_second = None),
            ),
            ("no router", Box::new(|e| e.router = None)),
            ("repeated", Box::new(|e| e.router.as_mut().unwrap().name = "b".into())),
            (
                "bridge",
                Box::new(|e| e.router.as_mut().unwrap().bridge = Some("br0 up".into())),
            ),
            ("this host", Box::new(|e| e.host = "z".into())),
            (
                "cores",
                Box::new(|e| {
                    e.cores = Some(EnvCores {
                        cores: vec![1, 1],
                        shared: false,
                    })
                }),
            ),
            (
                "cores",
                Box::new(|e| {
                    e.cores = Some(EnvCores {
                        cores: vec![],
                        shared: false,
                    })
                }),
            ),
        ];
        for (expected, break_it) in cases {
            let mut env = two_links();
            break_it(&mut env);
            let e = LabEnv::parse("demo", &env.to_json()).unwrap_err();
            assert!(e.contains(expected), "{expected}: {e}");
        }
        for junk in ["", "{", "[]", "{\"schema\":1}", "null"] {
            assert!(LabEnv::parse("demo", junk).is_err(), "{junk}");
        }
        let mut extra: serde_json::Value = serde_json::from_str(&two_links().to_json()).unwrap();
        extra["surprise"] = 1.into();
        assert!(LabEnv::parse("demo", &extra.to_string()).is_err());
        let nan = two_links().to_json().replace("0.02", "1e999");
        assert!(LabEnv::parse("demo", &nan).is_err(), "{nan}");
    }
}
