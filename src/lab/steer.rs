//! Where each host's packet work runs, and what its interfaces offload.
//!
//! A host that owns its cores receives on every interface (and the router
//! receives on its interface toward that host) through NAPI in a thread of
//! its own, pinned to the host's cores (threaded NAPI): so the host's
//! protocol work runs on its own cores, in threads whose CPU time the
//! kernel counts exactly ([`crate::lab_env::packet_work_threads`]), and it
//! is taken in batches as a NIC's interrupt moderation would hand it over,
//! not one softirq per packet. What a veth does not hand to NAPI (a TCP
//! segment from a sender with TSO on) is steered to the same cores by RPS
//! (`rps_cpus` of the receive queue). A host with a CPU limit below its
//! cores (a thief takes them away part of every period) gets no RPS: RPS
//! work runs in softirq, ahead of any thread, and would escape the limit;
//! its napi threads the thief's real-time priority holds back like any
//! other thread. A veth polls with NAPI only with GRO on or an XDP program
//! attached: with GRO off the lab attaches a pass-through program
//! ([`super::xdp`]), which keeps GRO off. A host that shares its cores with
//! other hosts keeps the kernel's defaults (its receive work runs on the
//! sender's core, as on one machine).

use std::collections::BTreeSet;
use std::os::fd::AsRawFd;

use super::cores::{self, cpu_mask};
use super::spec;
use super::state::{LabState, LinkState};
use super::{sys, xdp, LabError};

/// Whether `host` has a CPU limit below what its cores give, so that a
/// thief takes them away part of the time.
pub fn thief_limited(state: &LabState, host: &str) -> bool {
    state.host(host).is_some_and(|h| host_thief_busy(h).is_some())
}

/// Whether `host` has cores of its own (not shared with other hosts; never
/// the router), so that its receive work is steered to them.
pub fn owns_cores(state: &LabState, host: &str) -> bool {
    state
        .host(host)
        .is_some_and(|h| !h.router && !h.cores_shared && !h.cores.is_empty())
}

/// How much of every period `h`'s thief keeps each of its cores; None
/// without one: no limit below its cores, the router, or cores it shares
/// with other hosts (a thief there would slow them too; the limit is then
/// its processes' cgroup quota alone).
pub fn host_thief_busy(h: &super::state::HostState) -> Option<f64> {
    match h.router || h.cores_shared || h.cores.is_empty() {
        true => None,
        false => thief_busy(h.cpu_limit_percent, h.cores.len()),
    }
}

/// How much of every period the thief of a host limited to `percent` of
/// one core keeps each of its `cores` cores: the rest is the limit. None
/// when the limit is not below what the cores give. At most what real-time
/// throttling leaves a real-time thread (`/proc/sys/kernel/sched_rt_*`,
/// 95% by default), less one point.
pub fn thief_busy(percent: Option<f64>, cores: usize) -> Option<f64> {
    let free = percent? / 100.0 / cores.max(1) as f64;
    (free < 1.0).then(|| (1.0 - free).min(max_thief_busy()))
}

/// The most of a core a real-time thread may take here.
pub fn max_thief_busy() -> f64 {
    let read = |f: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{f}"))
            .ok()
            .and_then(|t| t.trim().parse::<f64>().ok())
    };
    match (read("sched_rt_runtime_us"), read("sched_rt_period_us")) {
        (Some(runtime), Some(period)) if runtime >= 0.0 && period > 0.0 => (runtime / period - 0.01).clamp(0.0, 0.97),
        _ => 0.97,
    }
}

fn command_error(what: String, e: impl std::fmt::Display) -> LabError {
    LabError::Command {
        command: what,
        stderr: e.to_string(),
    }
}

/// Sets the offloads `link`'s end `end` asks for, with the ethtool ioctl
/// inside its host's namespace.
pub fn apply_offloads(state: &LabState, link: &LinkState, end: usize) -> Result<(), LabError> {
    let e = &link.ends[end];
    if e.offloads.is_empty() {
        return Ok(());
    }
    let setting = crate::model::HostSetting::Offloads {
        features: e.offloads.clone(),
    };
    let netns = spec::netns_name(&state.name, &e.host);
    let ifname = e.ifname.clone();
    let what = format!("--offloads {} on {} {}", setting.text(), e.host, e.ifname);
    crate::probe::netns::read_in(&netns, move || crate::probe::settings::apply(&ifname, &setting))
        .map_err(|err| command_error(what.clone(), err))?
        .map_err(|err| command_error(what, err))
}

/// The napi kthreads of the machine (`napi/IFNAME-ID`).
fn napi_threads() -> BTreeSet<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return BTreeSet::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.starts_with("napi/")))
        .collect()
}

/// Pins thread `pid` to `cores`.
pub fn pin(pid: i32, cores: &[u32]) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes within it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cores {
        // SAFETY: see above; cores beyond the set's size are ignored by the kernel's check below.
        unsafe { libc::CPU_SET(c as usize, &mut set) };
    }
    // SAFETY: set is a valid cpu_set_t of the size passed.
    match unsafe { libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// A lock every lab builder holds while it tells a new napi thread from
/// the others (labs are built in parallel by tests).
struct NapiLock {
    _file: std::fs::File,
}

impl NapiLock {
    fn take() -> Result<NapiLock, LabError> {
        let path = super::state::state_dir().join(".napi.lock");
        let io = |e| LabError::Io {
            what: format!("locking {}", path.display()),
            source: e,
        };
        std::fs::create_dir_all(super::state::state_dir()).map_err(io)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io)?;
        // SAFETY: flock on a descriptor we own; released when it closes.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io(std::io::Error::last_os_error()));
        }
        Ok(NapiLock { _file: file })
    }
}

/// Steers `link`'s end `end`: for an owner with cores of its own, NAPI in
/// a thread pinned to those cores, and RPS toward them unless a thief
/// limits the owner (else NAPI back to how the veth had it, no RPS).
/// Returns the napi threads pinned.
pub fn steer_end(state: &LabState, link: &LinkState, end: usize) -> Result<Vec<u32>, LabError> {
    let e = &link.ends[end];
    let netns = spec::netns_name(&state.name, &e.host);
    let cores = cores::receive_cores(state, link, end);
    let class = format!("/sys/class/net/{}", e.ifname);
    let owner = cores::receive_owner(state, link, end);
    let limited = thief_limited(state, owner);
    let threaded = owns_cores(state, owner);
    let gro_on = e.offloads.get("gro") == Some(&true);
    let ifname = e.ifname.clone();
    let set_xdp = |on: bool| {
        let name = ifname.clone();
        let what = format!(
            "{} the pass-through XDP program on {} {}",
            if on { "attaching" } else { "detaching" },
            e.host,
            e.ifname
        );
        crate::probe::netns::read_in(&netns, move || xdp::set(&name, on))
            .map_err(|err| command_error(what.clone(), err))?
            .map_err(|err| command_error(what, err))
    };
    // NAPI off (or as GRO leaves it); what had a thread loses it.
    let _ = sys::write_sysfs_in(&netns, &[(format!("{class}/threaded"), "0".into())]);
    if e.napi_threads.is_empty() && !threaded {
        // Nothing was threaded: leave the veth as it was.
    } else {
        set_xdp(false)?;
    }
    let mut pinned = Vec::new();
    if threaded && !cores.is_empty() {
        let _lock = NapiLock::take()?;
        let before = napi_threads();
        if gro_on {
            // GRO gives NAPI: switch it off and on so a new thread is made.
            let mut off = e.clone();
            off.offloads.insert("gro".into(), false);
            let mut link_off = link.clone();
            link_off.ends[end] = off;
            apply_offloads(state, &link_off, end)?;
            apply_offloads(state, link, end)?;
        } else {
            set_xdp(true)?;
        }
        sys::write_sysfs_in(&netns, &[(format!("{class}/threaded"), "1".into())])?;
        let made: Vec<i32> = napi_threads().difference(&before).copied().collect();
        if made.is_empty() {
            return Err(command_error(
                format!("threaded NAPI on {} {}", e.host, e.ifname),
                "the kernel made no napi thread to pin to the host's cores",
            ));
        }
        for pid in made {
            pin(pid, &cores).map_err(|err| {
                command_error(
                    format!("pinning napi thread {pid} to cores {}", cores::cpu_list(&cores)),
                    err,
                )
            })?;
            pinned.push(pid as u32);
        }
    }
    if !cores.is_empty() {
        sys::write_sysfs_in(
            &netns,
            &[(
                format!("{class}/queues/rx-*/rps_cpus"),
                if limited || !threaded {
                    "0".into()
                } else {
                    cpu_mask(&cores)
                },
            )],
        )?;
    }
    Ok(pinned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thief_takes_what_the_limit_leaves_of_the_hosts_cores() {
        let cap = max_thief_busy();
        let busy = thief_busy(Some(25.0), 1).unwrap();
        assert!((busy - 0.75_f64.min(cap)).abs() < 1e-9, "{busy}");
        // 50% of one core on two cores: each core free a quarter.
        assert!((thief_busy(Some(50.0), 2).unwrap() - 0.75_f64.min(cap)).abs() < 1e-9);
        assert_eq!(thief_busy(Some(100.0), 1), None);
        assert_eq!(thief_busy(Some(150.0), 1), None);
        assert_eq!(thief_busy(None, 1), None);
        // Never more than real-time throttling leaves a real-time thread.
        assert!(thief_busy(Some(1.0), 1).unwrap() <= cap);
    }
}
