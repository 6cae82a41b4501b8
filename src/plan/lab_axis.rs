//! `[matrix.lab.AXIS]`: axes whose values change the lab the plan runs in,
//! as `nicbench lab set` would -- a link's rate, a router queue, a link's
//! MTU, a host's CPU limit -- before each case, and put it back after the
//! case (after a failure too, and on drop). One lab host can so stand for
//! several cards in turn: a roundup of three cards needs two hosts, not
//! four, and fits a machine with two cores, where four hosts could not
//! each have a core of their own (`examples/roundup.toml`).
//!
//! ```toml
//! [matrix.lab.card]
//! card-1G = ["--rate", "1gbit"]
//! card-500M-quartercpu = ["--rate", "500mbit", "--cpu-limit", "b=25%"]
//! ```
//!
//! Offloads are not among the settings: the plan's `offloads` axis sets
//! them on both ends, in a lab or not.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use crate::lab::{self, spec, CpuLimit, LabError, LabState, LinkSelector, MtuSetting, QueueSetting, RateSetting};
use crate::lab_env::{LabEnv, LAB_VAR, MOUNTS_FD_VAR, PATHS_VAR};

/// The `lab set` options a value may give.
pub const OPTIONS: &str = "--rate, --queue, --mtu and --cpu-limit";

/// How to run a plan with the axis, for messages.
const HOW: &str = "run the plan inside the lab: `nicbench lab exec LAB HOST nicbench run PLAN`";

/// What one value of a lab axis changes, in `lab set`'s terms.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabChange {
    pub mtu: Vec<MtuSetting>,
    pub rate: Vec<RateSetting>,
    pub queue: Vec<QueueSetting>,
    pub cpu_limit: Vec<CpuLimit>,
}

impl LabChange {
    /// A value's options as `nicbench lab set` takes them: `["--rate",
    /// "2=500mbit", "--cpu-limit", "b=25%"]` (or `--rate=2=500mbit`). An
    /// empty list changes nothing: the lab as it was built.
    pub fn parse(options: &[String]) -> Result<LabChange, String> {
        let mut change = LabChange::default();
        let mut words = options.iter();
        while let Some(word) = words.next() {
            let (name, value) = match word.split_once('=') {
                Some((name, value)) if name.starts_with("--") => (name, value.to_string()),
                _ => {
                    let name = word.as_str();
                    if !name.starts_with("--") {
                        return Err(format!(
                            "'{name}' is not an option: give `lab set` options and their values, e.g. \
                             [\"--rate\", \"2=500mbit\"] ({OPTIONS})"
                        ));
                    }
                    let value = words
                        .next()
                        .ok_or_else(|| format!("{name} needs a value, as `nicbench lab set {name}` does"))?;
                    (name, value.clone())
                }
            };
            let bad = |e: LabError| match e {
                LabError::Invalid { hint, .. } => format!("{name} {value}: {hint}"),
                other => format!("{name} {value}: {other}"),
            };
            match name {
                "--rate" => change.rate.push(spec::parse_rate_setting(&value).map_err(bad)?),
                "--queue" => change.queue.push(spec::parse_queue_setting(&value).map_err(bad)?),
                "--mtu" => change.mtu.push(spec::parse_mtu_setting(&value).map_err(bad)?),
                "--cpu-limit" => change
                    .cpu_limit
                    .push(spec::parse_cpu_limit_or_none(&value).map_err(bad)?),
                "--offloads" => {
                    return Err(
                        "--offloads: the plan's offloads axis sets them on both ends ([matrix] offloads = [...])"
                            .into(),
                    )
                }
                other => {
                    return Err(format!(
                        "'{other}' is not a lab setting a plan changes: expected {OPTIONS}"
                    ))
                }
            }
        }
        Ok(change)
    }

    /// Applies the change to `state` alone (the kernel untouched): what
    /// `lab set` would refuse is refused here.
    fn apply(&self, state: &mut LabState) -> Result<(), LabError> {
        spec::apply_mtu(state, &self.mtu)?;
        spec::apply_rate(state, &self.rate)?;
        spec::apply_queue(state, &self.queue)?;
        spec::apply_cpu_limits(state, &self.cpu_limit)?;
        Ok(())
    }

    /// Makes the change in the lab (its tc, cgroups, thieves) and its state.
    fn make(&self, state: &mut LabState, program: &Path) -> Result<(), String> {
        if !(self.mtu.is_empty() && self.rate.is_empty() && self.queue.is_empty()) {
            lab::set(state, &self.mtu, &self.rate, &self.queue).map_err(|e| e.to_string())?;
        }
        if self.cpu_limit.is_empty() {
            return Ok(());
        }
        if lab::cgroup::CpuController::detect().is_ok() {
            return lab::set_host_work(state, &self.cpu_limit, &[], program).map_err(|e| e.to_string());
        }
        // Under `ip netns exec` (as `lab exec` runs the plan) /sys/fs/cgroup
        // is not mounted: the limits are set from the mount namespace
        // `lab exec` ran in.
        set_cpu_limits_outside(&state.name, &self.cpu_limit, program)?;
        *state = lab::load_complete(&state.name).map_err(|e| e.to_string())?;
        Ok(())
    }

    /// What puts `now` back to `before`: every link MTU, shaper rate,
    /// router queue and CPU limit that differs.
    fn undo(before: &LabState, now: &LabState) -> LabChange {
        let mut back = LabChange::default();
        for (old, new) in before.links.iter().zip(&now.links) {
            if old.mtu != new.mtu {
                back.mtu.push(MtuSetting {
                    link: Some(old.id),
                    mtu: old.mtu,
                });
            }
            for i in 0..2 {
                let (was, is) = (&old.ends[i], &new.ends[i]);
                // A rate or queue sits on the egress toward the other end.
                let select = LinkSelector {
                    link: Some(old.id),
                    towards: Some(old.ends[1 - i].host.clone()),
                };
                if was.rate_bits_per_second != is.rate_bits_per_second {
                    back.rate.push(RateSetting {
                        select: select.clone(),
                        bits_per_second: was.rate_bits_per_second,
                    });
                }
                let queue_after_rate = match was.rate_bits_per_second == is.rate_bits_per_second {
                    true => is.queue_seconds,
                    // A rate set anew keeps the queue it had; a removed one has none.
                    false => is.queue_seconds.filter(|_| was.rate_bits_per_second.is_some()),
                };
                if was.rate_bits_per_second.is_some() && was.queue_seconds != queue_after_rate {
                    back.queue.push(QueueSetting {
                        select,
                        seconds: was.queue_seconds,
                    });
                }
            }
        }
        for (old, new) in before.hosts.iter().zip(&now.hosts) {
            if !old.router && old.cpu_limit_percent != new.cpu_limit_percent {
                back.cpu_limit.push(CpuLimit {
                    host: old.name.clone(),
                    percent: old.cpu_limit_percent.unwrap_or(0.0),
                });
            }
        }
        back
    }
}

/// Sets `limits` in lab `lab` by running `nicbench lab set LAB --cpu-limit
/// ...` in the mount namespace `nicbench lab exec` ran in (the descriptor
/// [`MOUNTS_FD_VAR`] names), where the cgroup hierarchies are mounted.
fn set_cpu_limits_outside(lab: &str, limits: &[CpuLimit], program: &Path) -> Result<(), String> {
    let fd: i32 = std::env::var(MOUNTS_FD_VAR)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&fd| fd >= 0)
        .ok_or_else(|| {
            format!(
                "a CPU limit is set through the cgroup hierarchy, which this process does not see (/sys/fs/cgroup is \
                 not mounted here, as under `ip netns exec`) and ${MOUNTS_FD_VAR} does not name the mount namespace \
                 that sees it: run the plan with `nicbench lab exec {lab} HOST nicbench run PLAN`"
            )
        })?;
    let mut command = std::process::Command::new(program);
    command.args(["lab", "set", lab, "--quiet"]);
    for limit in limits {
        let value = match limit.percent > 0.0 {
            true => format!("{}={}%", limit.host, limit.percent),
            false => format!("{}=none", limit.host),
        };
        command.args(["--cpu-limit", &value]);
    }
    command.stdin(std::process::Stdio::null());
    // SAFETY: setns is async-signal-safe and touches no memory of this
    // process; a forked child has one thread, as entering a mount
    // namespace requires.
    unsafe {
        command.pre_exec(move || match libc::setns(fd, libc::CLONE_NEWNS) {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        });
    }
    let output = command.output().map_err(|e| {
        format!("running `nicbench lab set {lab} --cpu-limit ...` in the mount namespace of `lab exec` (descriptor {fd}): {e}")
    })?;
    match output.status.success() {
        true => Ok(()),
        false => Err(format!(
            "`nicbench lab set {lab} --cpu-limit ...` failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )),
    }
}

/// The lab this process runs in, changed per case by the plan's lab axes.
pub struct LabChanges {
    lab: String,
    /// The lab host this process runs in (its environment is handed to
    /// each case).
    host: String,
    /// The nicbench executable (a CPU limit's thief runs it).
    program: PathBuf,
    /// The lab before the case's first change (None: nothing changed
    /// since the last restore).
    before: Option<LabState>,
}

impl LabChanges {
    /// The lab this process runs in, checked for every value of every lab
    /// axis (`axes`, as `[matrix.lab]` gives them): refused outside a lab
    /// (without [`LAB_VAR`]) and for a value `lab set` would refuse in this
    /// lab. Changes nothing.
    pub fn here(axes: &BTreeMap<String, BTreeMap<String, Vec<String>>>) -> Result<LabChanges, String> {
        let first = axes.keys().next().map_or("lab", String::as_str);
        let lab = std::env::var(LAB_VAR).map_err(|_| {
            format!("[matrix.lab.{first}] changes the lab the plan runs in, and this is not a lab: {HOW}")
        })?;
        let paths = std::env::var(PATHS_VAR)
            .map_err(|_| format!("[matrix.lab.{first}]: ${LAB_VAR} is '{lab}' but ${PATHS_VAR} is not set: {HOW}"))?;
        let env = LabEnv::parse(&lab, &paths).map_err(|e| format!("[matrix.lab.{first}]: ${PATHS_VAR}: {e}"))?;
        let state = lab::load_complete(&lab).map_err(|e| format!("[matrix.lab.{first}]: {e}"))?;
        for (axis, values) in axes {
            for (value, options) in values {
                let change = LabChange::parse(options).map_err(|e| format!("[matrix.lab.{axis}] {value}: {e}"))?;
                change
                    .apply(&mut state.clone())
                    .map_err(|e| format!("[matrix.lab.{axis}] {value}, in lab '{lab}': {e}"))?;
            }
        }
        LabChanges::for_lab(lab, env.host).map_err(|e| format!("[matrix.lab.{first}]: {e}"))
    }

    /// Changes to lab `lab`, made from its host `host`; nothing changed yet.
    pub fn for_lab(lab: String, host: String) -> Result<LabChanges, String> {
        let program = lab::nicbench_program("a CPU limit").map_err(|e| e.to_string())?;
        Ok(LabChanges {
            lab,
            host,
            program,
            before: None,
        })
    }

    /// Makes the change of value `value` of lab axis `axis` (its `lab set`
    /// options) for the case.
    pub fn set(&mut self, axis: &str, value: &str, options: &[String]) -> Result<(), String> {
        let change = LabChange::parse(options).map_err(|e| format!("{axis} = \"{value}\": {e}"))?;
        self.make(&change, &format!("{axis} = \"{value}\""))
    }

    /// Makes `change` (for `what`, in messages) in the lab, the lab as it was
    /// before the first change since the last restore kept to put back, and
    /// the lab's description this process reads
    /// ([`crate::lab_env::describe_here`]) says so, for the case.
    pub fn make(&mut self, change: &LabChange, what: &str) -> Result<(), String> {
        let mut state = lab::load_complete(&self.lab).map_err(|e| e.to_string())?;
        if self.before.is_none() {
            self.before = Some(state.clone());
        }
        change
            .make(&mut state, &self.program)
            .map_err(|e| format!("changing lab '{}' for {what}: {e}", self.lab))?;
        let [_, (_, paths)] = lab::env::client_vars(&state, &self.host);
        crate::lab_env::describe_here(Some(paths));
        Ok(())
    }

    /// The lab's name.
    pub fn lab(&self) -> &str {
        &self.lab
    }

    /// Puts back what [`LabChanges::make`] changed since the last restore.
    pub fn restore(&mut self) -> Result<(), String> {
        crate::lab_env::describe_here(None);
        let Some(before) = self.before.take() else {
            return Ok(());
        };
        let mut state = lab::load_complete(&self.lab).map_err(|e| e.to_string())?;
        let back = LabChange::undo(&before, &state);
        back.make(&mut state, &self.program).map_err(|e| {
            self.before = Some(before);
            format!("putting lab '{}' back as it was before the case: {e}", self.lab)
        })
    }
}

impl Drop for LabChanges {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!(
                "nicbench run: {e}; put it back with `nicbench lab set {} ...` (`nicbench lab status {}` shows it now)",
                self.lab, self.lab
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_value_is_lab_set_options_with_their_values() {
        let change = LabChange::parse(&words(&[
            "--rate",
            "2=500mbit",
            "--cpu-limit=b=25%",
            "--queue",
            "5ms",
            "--mtu",
            "9000",
        ]))
        .unwrap();
        assert_eq!(change.rate.len(), 1);
        assert_eq!(change.rate[0].bits_per_second, Some(500_000_000));
        assert_eq!(change.rate[0].select.link, Some(2));
        assert_eq!(
            change.cpu_limit,
            [CpuLimit {
                host: "b".into(),
                percent: 25.0
            }]
        );
        assert_eq!(change.queue[0].seconds, Some(0.005));
        assert_eq!(change.mtu[0].mtu, 9000);
        // A lifted limit and no change at all are values too.
        assert_eq!(
            LabChange::parse(&words(&["--cpu-limit", "b=none"])).unwrap().cpu_limit[0].percent,
            0.0
        );
        assert_eq!(LabChange::parse(&[]).unwrap(), LabChange::default());
    }

    #[test]
    fn a_bad_value_says_what_is_wrong_and_what_is_allowed() {
        for (options, expected) in [
            (&["--rate"][..], "--rate needs a value"),
            (&["--rate", "fast"], "--rate fast:"),
            (&["--cpu-limit", "b"], "HOST=PERCENT"),
            (&["--offloads", "tso=off"], "the plan's offloads axis"),
            (&["--hosts", "3"], "expected --rate, --queue, --mtu and --cpu-limit"),
            (&["500mbit"], "is not an option"),
        ] {
            let e = LabChange::parse(&words(options)).unwrap_err();
            assert!(e.contains(expected), "{options:?}: {e}");
        }
    }

    fn two_hosts_via_router() -> LabState {
        let hosts = [("a", false), ("b", false), (spec::ROUTER, true)]
            .into_iter()
            .map(|(name, router)| lab::HostState::new("t", name, router))
            .collect();
        let end = |id: usize, host: &str, rate: Option<u64>| lab::LinkEnd {
            host: host.into(),
            ifname: format!("veth{id}"),
            address: std::net::Ipv4Addr::new(10, 200, id as u8, 1),
            rate_bits_per_second: rate,
            queue_seconds: None,
            offloads: Default::default(),
            napi_threads: Vec::new(),
        };
        let links = [(1, "a"), (2, "b")]
            .into_iter()
            .map(|(id, host)| lab::LinkState {
                id,
                mtu: 1500,
                ends: [end(id, host, None), end(id, spec::ROUTER, Some(1_000_000_000))],
            })
            .collect();
        LabState::new("t", lab::Topology::ViaRouter, hosts, links, None)
    }

    #[test]
    fn the_undo_of_a_change_puts_every_setting_back() {
        let before = two_hosts_via_router();
        let change = LabChange::parse(&words(&[
            "--rate",
            "2=500mbit",
            "--queue",
            "2=200ms",
            "--rate",
            "1:r=1gbit",
            "--cpu-limit",
            "b=25%",
            "--mtu",
            "2=9000",
        ]))
        .unwrap();
        let mut now = before.clone();
        change.apply(&mut now).unwrap();
        assert_ne!(now.links, before.links);
        let back = LabChange::undo(&before, &now);
        back.apply(&mut now).unwrap();
        assert_eq!(now.links, before.links);
        assert_eq!(now.hosts[1].cpu_limit_percent, None);
        // Nothing changed: nothing to put back.
        assert_eq!(LabChange::undo(&before, &before), LabChange::default());
    }
}
