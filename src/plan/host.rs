//! Host settings a plan changes between cases (the MTU, offloads, rings,
//! coalescing and the root qdisc, on both ends), and
//! putting them back. The first value seen of every setting is recorded —
//! in memory and in a restore file beside the plan run's summary — before
//! it is changed; [`HostChanges::restore`] puts every one back at the end,
//! after Ctrl-C or an error too (also on drop). A crash leaves the restore
//! file, which the next `nicbench run` names and `--restore` applies.

use std::collections::BTreeMap;
use std::net::{IpAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::file::Agent;
use crate::model::HostSetting;
use crate::session::Target;

/// The settings to put back: the file's contents.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Originals {
    /// Local interface -> its MTU before the plan changed it.
    pub local: BTreeMap<String, u32>,
    /// "HOST interface" -> the agent to ask and the interface's MTU before
    /// the change (two agents on one host share their interface's entry).
    pub remote: BTreeMap<String, RemoteOriginal>,
    /// Other host settings (offloads, rings, coalescing, qdisc), one entry
    /// per end, interface and setting, holding the first value seen of
    /// every field changed. Absent from files of older versions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<SettingOriginal>,
}

/// The original of one host setting on one end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingOriginal {
    /// The agent to ask; None: this host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentRef>,
    pub interface: String,
    pub setting: HostSetting,
}

/// How to reach an agent again to restore its settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentRef {
    pub label: String,
    pub address: String,
    pub psk_file: Option<String>,
}

impl SettingOriginal {
    fn describe(&self) -> String {
        match &self.agent {
            Some(a) => format!(
                "agent {} ({}) {}: {}",
                a.label,
                a.address,
                self.interface,
                self.setting.describe()
            ),
            None => format!("local {}: {}", self.interface, self.setting.describe()),
        }
    }

    /// Same end, interface and setting (the entry to merge into): two
    /// agents on one host share their interface's entry.
    fn same_place(&self, other: &SettingOriginal) -> bool {
        let host = |o: &SettingOriginal| {
            o.agent.as_ref().map(|a| {
                target(&a.address, None)
                    .map(|t| t.host)
                    .unwrap_or_else(|_| a.address.clone())
            })
        };
        self.interface == other.interface && self.setting.axis() == other.setting.axis() && host(self) == host(other)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteOriginal {
    pub label: String,
    pub address: String,
    pub psk_file: Option<String>,
    pub interface: String,
    pub mtu: u32,
}

impl Originals {
    pub fn is_empty(&self) -> bool {
        self.local.is_empty() && self.remote.is_empty() && self.settings.is_empty()
    }

    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self.local.iter().map(|(i, m)| format!("local {i}: MTU {m}")).collect();
        parts.extend(
            self.remote
                .values()
                .map(|r| format!("agent {} ({}) {}: MTU {}", r.label, r.address, r.interface, r.mtu)),
        );
        parts.extend(self.settings.iter().map(SettingOriginal::describe));
        parts.join(", ")
    }
}

/// The changes made so far, and where they are written down.
pub struct HostChanges {
    originals: Originals,
    file: PathBuf,
    /// The plan's `allow_host_changes`: may this process change this host?
    allow_local: bool,
}

fn target(address: &str, psk_file: Option<&str>) -> Result<Target, String> {
    let (host, port) = crate::address::agent_address(address, None, None).map_err(|e| format!("{e:#}"))?;
    Ok(Target {
        host,
        port,
        family: None,
        bind: None,
        connect_timeout: Duration::from_secs(5),
        wait: Duration::from_secs(60),
        psk_file: psk_file.map(PathBuf::from),
    })
}

/// This host's interface that traffic to `address` leaves through.
fn local_interface(address: &str) -> Result<String, String> {
    let t = target(address, None)?;
    let ip: IpAddr = (t.host.as_str(), t.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {}: {e}", t.host))?
        .next()
        .ok_or_else(|| format!("{} has no address", t.host))?
        .ip();
    let local = crate::probe::nic::local_address_toward(ip).ok_or_else(|| format!("no route to {ip}"))?;
    crate::probe::nic::interface_with_address(local).ok_or_else(|| format!("no interface holds {local}"))
}

impl HostChanges {
    pub fn new(file: PathBuf, allow_local: bool) -> HostChanges {
        HostChanges {
            originals: Originals::default(),
            file,
            allow_local,
        }
    }

    /// Sets the MTU on this host's interface toward `agent` and on the
    /// agent's interface toward this host; both read back. Err says why the
    /// case cannot run.
    ///
    /// The agent is asked even when its interface reads `mtu` already: in a
    /// lab, its answer sets the router's links toward this host and toward
    /// it (see [`crate::lab::follow`]), and a case before this one, toward
    /// another agent behind the same router, may have left the link toward
    /// this host at another MTU. So each case sets its whole path, whatever
    /// order the cases run in.
    pub fn set_mtu(&mut self, agent: &Agent, mtu: u32) -> Result<(), String> {
        if !self.allow_local {
            return Err(format!(
                "the case asks for MTU {mtu}, but the plan does not allow host changes: \
                 set allow_host_changes = true in [defaults] (and run as root)"
            ));
        }
        let interface = local_interface(&agent.address)?;
        if interface == "lo" {
            return Err(format!(
                "the path to agent {} is the loopback interface; its MTU is not changed by a plan",
                agent.label
            ));
        }
        let before =
            crate::probe::mtu::mtu_of(&interface).map_err(|e| format!("reading the MTU of {interface}: {e}"))?;
        let target = target(&agent.address, agent.psk_file.as_deref())?;
        // The agent first: a refusal there leaves this host untouched.
        let remote_before = crate::session::remote_facts(&target).map_err(|e| format!("agent {}: {e}", agent.label))?;
        let remote_nic = remote_before
            .interface
            .ok_or_else(|| format!("agent {} does not know its interface toward this host", agent.label))?;
        let remote_mtu = remote_nic
            .mtu_bytes
            .ok_or_else(|| format!("agent {}: the MTU of {} is unknown", agent.label, remote_nic.name))?;
        // An original is recorded when the agent is first asked (written
        // down before the change): its restore puts the agent, and in a lab
        // the router's links that followed it, back at the agent's MTU.
        let key = format!("{} {}", target.host, remote_nic.name);
        let recorded_now = !self.originals.remote.contains_key(&key);
        if recorded_now {
            self.originals.remote.insert(
                key.clone(),
                RemoteOriginal {
                    label: agent.label.clone(),
                    address: agent.address.clone(),
                    psk_file: agent.psk_file.clone(),
                    interface: remote_nic.name.clone(),
                    mtu: remote_mtu,
                },
            );
            self.write()?;
        }
        let after = match crate::session::set_remote_mtu(&target, mtu) {
            Ok(after) => Some(after),
            // An agent that does not change its host, already at the MTU:
            // the case can run; the path check that follows finds a hop it
            // left at another MTU. What it refused is not "restored" later.
            Err(crate::session::SessionError::AgentRefused(words)) if remote_mtu == mtu => {
                log::info!(
                    "agent {} is at MTU {mtu} already and refused to set it: {words}",
                    agent.label
                );
                if recorded_now {
                    self.originals.remote.remove(&key);
                    self.write()?;
                }
                None
            }
            Err(e) => return Err(format!("agent {}: cannot set MTU {mtu}: {}", agent.label, refusal(e))),
        };
        let now = after.map_or(Some(remote_mtu), |a| a.interface.and_then(|n| n.mtu_bytes));
        if now != Some(mtu) {
            return Err(format!(
                "agent {}: MTU {mtu} did not take on {} (reads {})",
                agent.label,
                remote_nic.name,
                now.map_or("nothing".into(), |m| m.to_string())
            ));
        }
        if before != mtu {
            if let std::collections::btree_map::Entry::Vacant(slot) = self.originals.local.entry(interface.clone()) {
                slot.insert(before);
                self.write()?;
            }
            let now = crate::probe::mtu::set_mtu(&interface, mtu).map_err(|e| format!("local {interface}: {e}"))?;
            if now != mtu {
                return Err(format!("local {interface}: MTU {mtu} did not take (reads {now})"));
            }
        }
        Ok(())
    }

    /// Applies `setting` to this host's interface toward `agent` and to the
    /// agent's interface toward this host; both read back from the facts.
    /// Err says why the case cannot run (not allowed, the driver refused,
    /// the value read back differs).
    pub fn set_host(&mut self, agent: &Agent, setting: &HostSetting) -> Result<(), String> {
        let what = setting.describe();
        if !self.allow_local {
            return Err(format!(
                "the case asks for {what}, but the plan does not allow host changes: \
                 set allow_host_changes = true in [defaults] (and run as root)"
            ));
        }
        let interface = local_interface(&agent.address)?;
        if interface == "lo" {
            return Err(format!(
                "the path to agent {} is the loopback interface; its settings are not changed by a plan",
                agent.label
            ));
        }
        let local_before = crate::probe::nic::nic_facts(&interface, None);
        let local_now = setting.current(&local_before).map_err(|e| format!("local {e}"))?;
        restorable(&local_now).map_err(|e| format!("local {interface}: {e}"))?;
        let target = target(&agent.address, agent.psk_file.as_deref())?;
        // The agent first: a refusal there leaves this host untouched.
        let remote_before = crate::session::remote_facts(&target).map_err(|e| format!("agent {}: {e}", agent.label))?;
        let remote_nic = remote_before
            .interface
            .ok_or_else(|| format!("agent {} does not know its interface toward this host", agent.label))?;
        let remote_now = setting
            .current(&remote_nic)
            .map_err(|e| format!("agent {}: {e}", agent.label))?;
        restorable(&remote_now).map_err(|e| format!("agent {} {}: {e}", agent.label, remote_nic.name))?;
        if &remote_now != setting {
            let original = SettingOriginal {
                agent: Some(AgentRef {
                    label: agent.label.clone(),
                    address: agent.address.clone(),
                    psk_file: agent.psk_file.clone(),
                }),
                interface: remote_nic.name.clone(),
                setting: remote_now,
            };
            let saved = self.originals.clone();
            self.record(original)?;
            let after = crate::session::set_remote_host(&target, setting).map_err(|e| {
                // An agent that refused changed nothing: what was written
                // down for it alone is not "restored" through it later.
                if matches!(e, crate::session::SessionError::AgentRefused(_)) && saved != self.originals {
                    self.originals = saved;
                    let _ = self.write();
                }
                format!("agent {}: cannot set {what}: {}", agent.label, refusal(e))
            })?;
            let nic = after
                .interface
                .ok_or_else(|| format!("agent {}: its facts name no interface", agent.label))?;
            setting.took(&nic).map_err(|e| format!("agent {}: {e}", agent.label))?;
        }
        if &local_now != setting {
            self.record(SettingOriginal {
                agent: None,
                interface: interface.clone(),
                setting: local_now,
            })?;
            crate::probe::settings::apply(&interface, setting).map_err(|e| format!("local {interface}: {e}"))?;
            let nic = crate::probe::nic::nic_facts(&interface, None);
            setting.took(&nic).map_err(|e| format!("local {e}"))?;
        }
        Ok(())
    }

    /// Writes an original down before its setting is changed; a field
    /// already recorded keeps its first value.
    fn record(&mut self, original: SettingOriginal) -> Result<(), String> {
        match self.originals.settings.iter_mut().find(|o| o.same_place(&original)) {
            Some(o) => {
                let before = o.setting.clone();
                o.setting.merge_original(&original.setting);
                if o.setting == before {
                    return Ok(());
                }
            }
            None => self.originals.settings.push(original),
        }
        self.write()
    }

    fn write(&self) -> Result<(), String> {
        let json = serde_json::to_vec_pretty(&self.originals).expect("plain data");
        std::fs::write(&self.file, json).map_err(|e| format!("writing the restore file {}: {e}", self.file.display()))
    }

    /// Puts every changed setting back; returns what could not be restored.
    pub fn restore(&mut self) -> Vec<String> {
        let failures = apply(&self.originals);
        if failures.is_empty() {
            self.originals = Originals::default();
            let _ = std::fs::remove_file(&self.file);
        }
        failures
    }

    pub fn changed(&self) -> bool {
        !self.originals.is_empty()
    }
}

impl Drop for HostChanges {
    fn drop(&mut self) {
        if self.changed() {
            for failure in self.restore() {
                log::warn!("{failure}");
            }
        }
    }
}

/// An agent's refusal in its own words (not "refused the test": no test
/// was asked for).
fn refusal(e: crate::session::SessionError) -> String {
    match e {
        crate::session::SessionError::AgentRefused(words) => format!("the agent refused: {words}"),
        other => other.to_string(),
    }
}

/// Refuses to change a setting whose original could not be put back: a
/// root qdisc with parameters (a tbf shaper, htb) is not rebuilt from its kind.
fn restorable(original: &HostSetting) -> Result<(), String> {
    match original {
        HostSetting::Qdisc { kind } if !crate::model::settings::QDISCS.contains(&kind.as_str()) => Err(format!(
            "the root qdisc is {kind}, which has parameters a plan cannot put back; \
             it is not replaced (remove it first, or leave the qdisc axis out)"
        )),
        _ => Ok(()),
    }
}

/// Sets every recorded original again; returns the failures.
pub fn apply(originals: &Originals) -> Vec<String> {
    let mut failures = Vec::new();
    for o in &originals.settings {
        let result = match &o.agent {
            Some(a) => target(&a.address, a.psk_file.as_deref()).and_then(|t| {
                crate::session::set_remote_host(&t, &o.setting)
                    .map(|_| ())
                    .map_err(refusal)
            }),
            None => crate::probe::settings::apply(&o.interface, &o.setting),
        };
        if let Err(e) = result {
            failures.push(format!("could not restore {}: {e}", o.describe()));
        }
    }
    for r in originals.remote.values() {
        let result = target(&r.address, r.psk_file.as_deref())
            .and_then(|t| crate::session::set_remote_mtu(&t, r.mtu).map_err(refusal));
        if let Err(e) = result {
            failures.push(format!(
                "could not restore MTU {} on {} of agent {} ({}): {e}",
                r.mtu, r.interface, r.label, r.address
            ));
        }
    }
    for (interface, mtu) in &originals.local {
        if let Err(e) = crate::probe::mtu::set_mtu(interface, *mtu) {
            failures.push(format!("could not restore MTU {mtu} on {interface}: {e}"));
        }
    }
    failures
}

/// Restore files left by plan runs that did not finish restoring.
pub fn leftovers(plans_dir: &Path) -> Vec<(PathBuf, Originals)> {
    let Ok(entries) = std::fs::read_dir(plans_dir) else {
        return Vec::new();
    };
    let mut found: Vec<(PathBuf, Originals)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path().join(RESTORE_FILE))
        .filter_map(|f| {
            let text = std::fs::read(&f).ok()?;
            let originals: Originals = serde_json::from_slice(&text).ok()?;
            (!originals.is_empty()).then_some((f, originals))
        })
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

/// The restore file's name in a plan run's directory.
pub const RESTORE_FILE: &str = "restore.json";
