//! The state file of a lab: what exists (or is being built), written before
//! anything is created and rewritten after every step, so that `down` can
//! clean up after a crash. One JSON file per lab under [`state_dir`].

use std::io::Write;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::names::{netns_name, validate_name};
use super::{LabError, Topology};

/// Version tag of the state file format.
pub const STATE_SCHEMA: &str = "nicbench.lab/1";

pub use crate::lab_env::state_dir;

/// The state file of lab `name`.
pub fn state_path(name: &str) -> PathBuf {
    state_dir().join(format!("{name}.json"))
}

/// Directory for a lab's agent logs.
pub fn log_dir(name: &str) -> PathBuf {
    state_dir().join(name)
}

/// One lab, as built (or as far as it got).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabState {
    pub schema: String,
    pub name: String,
    pub topology: Topology,
    /// False while `up` is still building (or if it died half-way).
    pub complete: bool,
    /// Process that built the lab.
    pub created_by_pid: u32,
    /// Seconds since the Unix epoch when building started.
    pub created_unix_seconds: u64,
    /// Control port of the agent in every host; None: no agents.
    pub agent_port: Option<u16>,
    pub hosts: Vec<HostState>,
    pub links: Vec<LinkState>,
    /// Who made the lab (labs are global on a machine several people
    /// share); absent in state files written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub made_by: Option<Maker>,
    /// Multipath TCP path management set on every host (`--mptcp`): see
    /// [`LabState::mptcp_endpoints`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mptcp: bool,
}

/// Who made a lab, from the login that ran `lab up`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Maker {
    /// The user: the one who ran sudo when it ran under sudo.
    pub user: String,
    /// The terminal (`/dev/pts/3`), when stdin is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal: Option<String>,
    /// The remote address of an SSH login (SSH_CONNECTION's first field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
}

impl Maker {
    /// This process's login, read from `env` (a variable's value by name).
    pub fn from_env(env: impl Fn(&str) -> Option<String>, uid: u32, terminal: Option<String>) -> Maker {
        let nonempty = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let user = match (nonempty("SUDO_USER"), nonempty("USER").or_else(|| nonempty("LOGNAME"))) {
            (Some(sudoer), Some(user)) if sudoer != user => format!("{sudoer} (sudo as {user})"),
            (Some(sudoer), _) => sudoer,
            (None, Some(user)) => user,
            (None, None) => format!("uid {uid}"),
        };
        let remote = nonempty("SSH_CONNECTION")
            .or_else(|| nonempty("SSH_CLIENT"))
            .and_then(|v| v.split_whitespace().next().map(str::to_string));
        Maker { user, terminal, remote }
    }

    /// The login running this process.
    pub fn here() -> Maker {
        let terminal = std::fs::read_link("/proc/self/fd/0")
            .ok()
            .map(|p| p.display().to_string())
            .filter(|p| p.starts_with("/dev/pts/") || p.starts_with("/dev/tty"));
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        Maker::from_env(|name| std::env::var(name).ok(), uid, terminal)
    }

    /// "alice on /dev/pts/3 from 127.0.0.1".
    pub fn describe(&self) -> String {
        let mut out = self.user.clone();
        if let Some(t) = &self.terminal {
            out += &format!(" on {t}");
        }
        if let Some(r) = &self.remote {
            out += &format!(" from {r}");
        }
        out
    }
}

/// A host: one network namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostState {
    pub name: String,
    pub netns: String,
    pub router: bool,
    /// CPU limit in percent of one core.
    pub cpu_limit_percent: Option<f64>,
    /// The cgroup directory that holds the host's processes, when limited.
    pub cgroup: Option<PathBuf>,
    pub agent_pid: Option<u32>,
    /// The cores the host owns (its cpuset; its interfaces' receive work is
    /// steered there). Empty in labs made before hosts owned cores.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cores: Vec<u32>,
    /// Other hosts of the lab run on the same cores (fewer cores than hosts;
    /// the router always shares).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cores_shared: bool,
    /// The cpuset cgroup that holds the host's processes on its cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuset: Option<PathBuf>,
    /// The process that takes the host's cores away from everything else
    /// for the part of every period its CPU limit does not give
    /// (`nicbench lab thief`); None without a limit below its cores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thief_pid: Option<u32>,
}

/// A veth link between two hosts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkState {
    /// Number from 1, as shown to users.
    pub id: usize,
    pub mtu: u32,
    pub ends: [LinkEnd; 2],
}

/// One end of a link: the interface inside a host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkEnd {
    pub host: String,
    pub ifname: String,
    pub address: Ipv4Addr,
    /// tbf limit on this interface's egress (traffic leaving this end).
    pub rate_bits_per_second: Option<u64>,
    /// How long that tbf may hold a packet (`--queue`); None: the default sizing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_seconds: Option<f64>,
    /// Offloads switched on this interface (`--offloads`), by the names a
    /// plan uses (`tso`, `gso`, `gro`, ...); the rest are the veth's own.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub offloads: std::collections::BTreeMap<String, bool>,
    /// The napi threads that receive on this interface, pinned to the cores
    /// of the host whose work it is (for a host whose CPU limit a thief keeps).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub napi_threads: Vec<u32>,
}

impl HostState {
    pub fn new(lab: &str, name: &str, router: bool) -> HostState {
        HostState {
            name: name.to_string(),
            netns: netns_name(lab, name),
            router,
            cpu_limit_percent: None,
            cgroup: None,
            agent_pid: None,
            cores: Vec::new(),
            cores_shared: false,
            cpuset: None,
            thief_pid: None,
        }
    }
}

impl LinkState {
    /// The end of this link inside `host`.
    pub fn end_of(&self, host: &str) -> Option<&LinkEnd> {
        self.ends.iter().find(|e| e.host == host)
    }
}

/// Endpoints and subflows the kernel's path manager keeps at most
/// (MPTCP_PM_ADDR_MAX).
pub const MPTCP_MAX_ENDPOINTS: usize = 8;

impl LabState {
    pub fn new(
        name: &str,
        topology: Topology,
        hosts: Vec<HostState>,
        links: Vec<LinkState>,
        agent_port: Option<u16>,
    ) -> LabState {
        LabState {
            schema: STATE_SCHEMA.to_string(),
            name: name.to_string(),
            topology,
            complete: false,
            created_by_pid: std::process::id(),
            created_unix_seconds: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            agent_port,
            hosts,
            links,
            made_by: Some(Maker::here()),
            mptcp: false,
        }
    }

    /// With `--mptcp`, what `host` announces to its peers: the address and
    /// interface of each of its links but the first (the kernel keeps at
    /// most [`MPTCP_MAX_ENDPOINTS`]); its limits are [`LabState::mptcp_limits`].
    /// Empty without `--mptcp` and for the router.
    pub fn mptcp_endpoints(&self, host: &str) -> Vec<(Ipv4Addr, String)> {
        if !self.mptcp || self.hosts.iter().any(|h| h.name == host && h.router) {
            return Vec::new();
        }
        self.links_of(host)
            .into_iter()
            .skip(1)
            .filter_map(|l| l.end_of(host))
            .map(|e| (e.address, e.ifname.clone()))
            .take(MPTCP_MAX_ENDPOINTS)
            .collect()
    }

    /// The path manager limits of `host` with `--mptcp`: as many accepted
    /// addresses as it announces, and twice as many extra subflows. Every
    /// lab host announces (each may be the agent), so a client announces
    /// its addresses to the agent too, and the agent's kernel may try a
    /// join back toward one of them; that attempt cannot succeed (nothing
    /// listens at the client's port) but holds a subflow slot while it
    /// lasts, and a client's join arriving then was rejected when the
    /// limit was the announced count (seen in a 3-link lab: MPTcpExtMPJoinRejected
    /// on the agent, one subflow missing). None without endpoints.
    pub fn mptcp_limits(&self, host: &str) -> Option<(usize, usize)> {
        let announced = self.mptcp_endpoints(host).len();
        (announced > 0).then_some(((2 * announced).min(MPTCP_MAX_ENDPOINTS), announced))
    }

    pub fn host(&self, name: &str) -> Option<&HostState> {
        self.hosts.iter().find(|h| h.name == name)
    }

    pub fn host_mut(&mut self, name: &str) -> Option<&mut HostState> {
        self.hosts.iter_mut().find(|h| h.name == name)
    }

    /// The links of `host`, in order.
    pub fn links_of(&self, host: &str) -> Vec<&LinkState> {
        self.links.iter().filter(|l| l.end_of(host).is_some()).collect()
    }

    /// Serializes to pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("lab state serializes")
    }

    /// Parses a state file's contents.
    pub fn from_json(text: &str, path: &Path) -> Result<LabState, LabError> {
        let state: LabState = serde_json::from_str(text).map_err(|e| LabError::State {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        if state.schema != STATE_SCHEMA {
            return Err(LabError::State {
                path: path.to_path_buf(),
                reason: format!("schema '{}', this nicbench reads '{STATE_SCHEMA}'", state.schema),
            });
        }
        Ok(state)
    }

    /// Checks that the file names only what a lab of its name owns, before
    /// anything acts on it: `lab exec` enters a host's namespace and joins
    /// its cgroup, `lab set` changes its interfaces. A file changed by hand
    /// (or by anyone who can write the state directory) cannot send
    /// nicbench into another namespace or cgroup. `lab status` shows a file
    /// without this check (escaped), so that a tampered one can be seen.
    pub fn check_owned(&self, file_name: &str) -> Result<(), String> {
        use crate::outside_text::terminal;
        validate_name(&self.name).map_err(|e| e.to_string())?;
        if self.name != file_name {
            return Err(format!("it names lab '{}', not '{file_name}'", terminal(&self.name)));
        }
        for h in &self.hosts {
            let lab_made = !h.name.is_empty() && h.name.len() <= 2 && h.name.chars().all(|c| c.is_ascii_lowercase());
            if !lab_made {
                return Err(format!(
                    "host '{}' is no name a lab gives (a, b, ..., r)",
                    terminal(&h.name)
                ));
            }
            let own = netns_name(&self.name, &h.name);
            if h.netns != own {
                return Err(format!(
                    "host {} names the namespace '{}', not its own '{own}'",
                    h.name,
                    terminal(&h.netns)
                ));
            }
            for dir in h.cgroup.iter().chain(&h.cpuset) {
                let tail = Path::new("nicbench").join(&self.name).join(&h.name);
                let plain = dir
                    .components()
                    .all(|c| matches!(c, std::path::Component::RootDir | std::path::Component::Normal(_)));
                if !(plain && dir.starts_with("/sys/fs/cgroup") && dir.ends_with(&tail)) {
                    return Err(format!(
                        "host {} names the cgroup '{}', not one under /sys/fs/cgroup ending in {}",
                        h.name,
                        terminal(&dir.display().to_string()),
                        tail.display()
                    ));
                }
            }
        }
        for link in &self.links {
            for end in &link.ends {
                if self.host(&end.host).is_none() {
                    return Err(format!(
                        "link {} ends in host '{}', which the lab has not",
                        link.id,
                        terminal(&end.host)
                    ));
                }
                let ifname_ok = (1..=15).contains(&end.ifname.len())
                    && end.ifname != "."
                    && end.ifname != ".."
                    && end
                        .ifname
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
                if !ifname_ok {
                    return Err(format!(
                        "link {} names the interface '{}' in host {}, not an interface name",
                        link.id,
                        terminal(&end.ifname),
                        end.host
                    ));
                }
            }
        }
        Ok(())
    }

    /// Reserves the lab's name by creating its state file; fails with
    /// [`LabError::Exists`] if the file is already there.
    pub fn create(&self) -> Result<(), LabError> {
        let path = state_path(&self.name);
        let io = |e: std::io::Error| LabError::Io {
            what: format!("creating the state file {}", path.display()),
            source: e,
        };
        std::fs::create_dir_all(state_dir()).map_err(io)?;
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(mut f) => f.write_all(self.to_json().as_bytes()).map_err(io),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(LabError::Exists {
                name: self.name.clone(),
                detail: format!("state file {}", path.display()),
            }),
            Err(e) => Err(io(e)),
        }
    }

    /// Rewrites the state file atomically (write then rename).
    pub fn save(&self) -> Result<(), LabError> {
        let path = state_path(&self.name);
        let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
        std::fs::write(&tmp, self.to_json())
            .and_then(|_| std::fs::rename(&tmp, &path))
            .map_err(|e| LabError::Io {
                what: format!("writing the state file {}", path.display()),
                source: e,
            })
    }

    /// Reads lab `name`'s state file; `Ok(None)` when there is none.
    pub fn load(name: &str) -> Result<Option<LabState>, LabError> {
        let path = state_path(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => LabState::from_json(&text, &path).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(LabError::Io {
                what: format!("reading the state file {}", path.display()),
                source: e,
            }),
        }
    }
}

/// Names of the labs that have a state file.
pub fn saved_lab_names() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(state_dir()) else {
        return Vec::new();
    };
    let mut names: Vec<String> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".json").map(str::to_string))
        .filter(|n| validate_name(n).is_ok())
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::super::spec::{layout, parse_cpu_limit, parse_queue_setting, parse_rate_setting, LabSpec};
    use super::*;

    #[test]
    fn the_maker_is_the_login_behind_sudo_with_its_terminal_and_remote_address() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        let m = Maker::from_env(
            env(&[
                ("SUDO_USER", "alice"),
                ("USER", "root"),
                ("SSH_CONNECTION", "127.0.0.9 50122 127.0.0.1 22"),
            ]),
            0,
            Some("/dev/pts/3".into()),
        );
        assert_eq!(m.describe(), "alice (sudo as root) on /dev/pts/3 from 127.0.0.9");
        let m = Maker::from_env(env(&[("USER", "bob")]), 1000, None);
        assert_eq!(m.describe(), "bob");
        let m = Maker::from_env(env(&[("USER", "")]), 1000, None);
        assert_eq!(m.describe(), "uid 1000");
    }

    #[test]
    fn a_state_file_without_its_maker_still_reads() {
        let mut state = LabState::new("old", Topology::Direct, Vec::new(), Vec::new(), None);
        state.made_by = None;
        let text = serde_json::to_string(&state).unwrap();
        assert!(!text.contains("made_by"), "{text}");
        let back: LabState = serde_json::from_str(&text).unwrap();
        assert_eq!(back, state);
    }

    #[test]
    fn state_round_trips_through_json() {
        let spec = LabSpec {
            name: "rt".into(),
            hosts: 2,
            links: 2,
            topology: Topology::ViaRouter,
            mtu: vec![],
            rate: vec![parse_rate_setting("100mbit").unwrap()],
            queue: vec![parse_queue_setting("200ms").unwrap()],
            cpu_limits: vec![parse_cpu_limit("a=25%").unwrap()],
            offloads: vec![],
            cores: Default::default(),
            mptcp: false,
            agent_port: None,
        };
        let mut state = layout(&spec).unwrap();
        state.hosts[0].agent_pid = Some(1234);
        state.hosts[0].cgroup = Some(PathBuf::from("/sys/fs/cgroup/cpu/nicbench/rt/a"));
        let text = state.to_json();
        assert!(text.contains("\"rate_bits_per_second\": 100000000"), "{text}");
        assert!(text.contains("\"topology\": \"via_router\""), "{text}");
        assert!(text.contains("\"queue_seconds\": 0.2"), "{text}");
        let back = LabState::from_json(&text, Path::new("x.json")).unwrap();
        assert_eq!(back, state);
    }

    /// Issue 41: a tampered state file was shown escaped, yet acted on:
    /// `lab exec` entered the namespace it named and joined its cgroup.
    #[test]
    fn only_what_a_lab_of_its_name_owns_passes_before_anything_acts_on_it() {
        let spec = LabSpec {
            name: "own".into(),
            hosts: 2,
            links: 1,
            topology: Topology::ViaRouter,
            mtu: vec![],
            rate: vec![],
            queue: vec![],
            cpu_limits: vec![],
            offloads: vec![],
            cores: Default::default(),
            mptcp: false,
            agent_port: None,
        };
        let mut good = layout(&spec).unwrap();
        good.hosts[0].cgroup = Some(PathBuf::from("/sys/fs/cgroup/nicbench/own/a"));
        good.check_owned("own").unwrap();
        let mut v1 = good.clone();
        v1.hosts[0].cgroup = Some(PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/nicbench/own/a"));
        v1.check_owned("own").unwrap();
        let refused = |change: &dyn Fn(&mut LabState), words: &str| {
            let mut s = good.clone();
            change(&mut s);
            let e = s.check_owned("own").unwrap_err();
            assert!(e.contains(words), "{words:?} in {e}");
            assert!(!e.contains('\u{1b}'), "{e:?}");
        };
        refused(
            &|s| s.hosts[0].netns = "nicbench-other-a".into(),
            "names the namespace 'nicbench-other-a'",
        );
        refused(&|s| s.hosts[0].netns = "\u{1b}[2J".into(), "names the namespace");
        refused(
            &|s| s.hosts[0].cgroup = Some("/sys/fs/cgroup/user.slice".into()),
            "names the cgroup",
        );
        refused(
            &|s| s.hosts[0].cgroup = Some("/sys/fs/cgroup/nicbench/own/a/../../../x/nicbench/own/a".into()),
            "names the cgroup",
        );
        refused(
            &|s| s.hosts[0].cgroup = Some("/tmp/nicbench/own/a".into()),
            "names the cgroup",
        );
        refused(
            &|s| s.links[0].ends[0].ifname = "eth0; reboot".into(),
            "not an interface name",
        );
        refused(&|s| s.links[0].ends[0].host = "z".into(), "which the lab has not");
        refused(&|s| s.hosts[0].name = "evil\u{1b}]0;x".into(), "no name a lab gives");
        refused(&|s| s.name = "other".into(), "names lab 'other', not 'own'");
    }

    #[test]
    fn corrupt_or_foreign_state_is_an_error_naming_the_file() {
        let e = LabState::from_json("{", Path::new("/run/x.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/run/x.json"), "{e}");
        let spec = LabSpec {
            name: "v".into(),
            hosts: 2,
            links: 1,
            topology: Topology::Direct,
            mtu: vec![],
            rate: vec![],
            queue: vec![],
            cpu_limits: vec![],
            offloads: vec![],
            cores: Default::default(),
            mptcp: false,
            agent_port: None,
        };
        let mut state = layout(&spec).unwrap();
        state.schema = "nicbench.lab/99".into();
        let e = LabState::from_json(&state.to_json(), Path::new("v.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("nicbench.lab/99") && e.contains(STATE_SCHEMA), "{e}");
    }
}
