//! Facts about the host, recorded with every result: name, kernel, OS, CPU
//! model, cores and threads, frequency, memory, NUMA nodes, and the
//! interface toward the peer (see [`super::nic`]).

use std::collections::BTreeSet;
use std::fs;
use std::net::IpAddr;

use super::nic;
use crate::model::HostFacts;

/// Facts about the machine this process runs on, without an interface.
pub fn local_facts() -> HostFacts {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    HostFacts {
        hostname: hostname(),
        kernel: kernel_release(),
        cpu_model: cpu_model(&cpuinfo),
        logical_cpus: crate::model::spec::usable_cpus(),
        nicbench_version: env!("CARGO_PKG_VERSION").to_string(),
        boot_id: boot_id(),
        os: os_name(&fs::read_to_string("/etc/os-release").unwrap_or_default()),
        cpu_cores: physical_cores(&cpuinfo),
        cpu_mhz: cpu_mhz(&cpuinfo),
        cpu_max_mhz: fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .map(|khz| khz / 1000.0),
        memory_bytes: memory_bytes(&fs::read_to_string("/proc/meminfo").unwrap_or_default()),
        numa_nodes: numa_nodes(),
        interface: None,
        cpu_limit: cpu_limit(),
        mptcp: None,
        tls: None,
        clock: super::clock::sync_state(),
    }
}

/// The quota of this process's CPU cgroup, when one is set and visible
/// (a lab host's through the directory the lab published).
fn cpu_limit() -> Option<crate::model::CpuLimit> {
    let cgroup = super::cgroup::locate()?;
    let stat = cgroup.read()?;
    let (quota_us, period_us) = (stat.quota_us?, stat.period_us?);
    Some(crate::model::CpuLimit {
        percent_of_one_core: super::cgroup::percent_of_one_core(quota_us, period_us)?,
        quota_us,
        period_us,
        set_by:
            if std::env::var_os(super::cgroup::CGROUP_VAR).is_some_and(|d| cgroup.dir == std::path::Path::new(&d)) {
                "lab"
            } else {
                "cgroup"
            }
            .into(),
        cgroup: cgroup.path,
    })
}

/// Host facts with the interface holding `local` (the local address of
/// the control connection, which is the interface toward the peer).
pub fn facts_toward(local: IpAddr) -> HostFacts {
    HostFacts {
        interface: nic::facts_for_address(local),
        ..local_facts()
    }
}

/// This kernel's boot id (/proc/sys/kernel/random/boot_id): the same in
/// every network namespace of one host; empty when unreadable.
pub fn boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

pub fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

pub fn kernel_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The first `model name` of /proc/cpuinfo.
pub fn cpu_model(cpuinfo: &str) -> String {
    cpuinfo_values(cpuinfo, "model name")
        .next()
        .map(str::to_string)
        .unwrap_or_else(|| "unknown".into())
}

fn cpuinfo_values<'a>(cpuinfo: &'a str, wanted: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    cpuinfo.lines().filter_map(move |l| {
        let (key, value) = l.split_once(':')?;
        (key.trim() == wanted).then(|| value.trim())
    })
}

/// Distinct (physical id, core id) pairs; None when cpuinfo lacks them.
pub fn physical_cores(cpuinfo: &str) -> Option<u32> {
    let mut cores = BTreeSet::new();
    for block in cpuinfo.split("\n\n") {
        let package = cpuinfo_values(block, "physical id").next();
        let core = cpuinfo_values(block, "core id").next();
        if let (Some(p), Some(c)) = (package, core) {
            cores.insert((p.to_string(), c.to_string()));
        }
    }
    (!cores.is_empty()).then_some(cores.len() as u32)
}

/// `cpu MHz` of the first processor.
pub fn cpu_mhz(cpuinfo: &str) -> Option<f64> {
    cpuinfo_values(cpuinfo, "cpu MHz").next()?.parse().ok()
}

/// MemTotal of /proc/meminfo in bytes.
pub fn memory_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut fields = line.split_whitespace().skip(1);
    let value: u64 = fields.next()?.parse().ok()?;
    match fields.next() {
        Some("kB") => Some(value * 1024),
        None => Some(value),
        Some(_) => None,
    }
}

/// `PRETTY_NAME` of os-release, unquoted; "unknown" without one.
pub fn os_name(os_release: &str) -> String {
    os_release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim().trim_matches('"').trim_matches('\'').to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

fn numa_nodes() -> Option<u32> {
    let count = fs::read_dir("/sys/devices/system/node")
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.strip_prefix("node").is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .count();
    (count > 0).then_some(count as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPUINFO: &str = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\ncpu MHz\t\t: 2450.000\n\
        physical id\t: 0\ncore id\t\t: 0\n\n\
        processor\t: 1\nmodel name\t: other\ncpu MHz\t\t: 1800.000\nphysical id\t: 0\ncore id\t\t: 0\n\n\
        processor\t: 2\nmodel name\t: other\nphysical id\t: 0\ncore id\t\t: 1\n\n\
        processor\t: 3\nmodel name\t: other\nphysical id\t: 1\ncore id\t\t: 0\n";

    #[test]
    fn cpu_model_comes_from_the_first_model_name() {
        let text = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t: x\n\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(cpu_model(text), "AMD EPYC 7B13");
        assert_eq!(cpu_model(""), "unknown");
    }

    #[test]
    fn physical_cores_count_distinct_core_ids_per_package() {
        // Two hyperthreads share core 0 of package 0.
        assert_eq!(physical_cores(CPUINFO), Some(3));
        assert_eq!(physical_cores("processor\t: 0\n"), None);
    }

    #[test]
    fn frequency_is_the_first_processors() {
        assert_eq!(cpu_mhz(CPUINFO), Some(2450.0));
        assert_eq!(cpu_mhz(""), None);
    }

    #[test]
    fn memtotal_is_in_kibibytes() {
        let meminfo = "MemTotal:       24684084 kB\nMemFree:        21443808 kB\n";
        assert_eq!(memory_bytes(meminfo), Some(24684084 * 1024));
        assert_eq!(memory_bytes("MemFree: 1 kB\n"), None);
        assert_eq!(memory_bytes("MemTotal: x kB\n"), None);
    }

    #[test]
    fn os_name_is_the_unquoted_pretty_name() {
        let text = "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\n";
        assert_eq!(os_name(text), "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(os_name("ID=x\n"), "unknown");
        assert_eq!(os_name("PRETTY_NAME=Alpine\n"), "Alpine");
    }

    #[test]
    fn facts_toward_loopback_name_the_loopback_interface() {
        let facts = facts_toward("127.0.0.1".parse().unwrap());
        let nic = facts.interface.expect("loopback found");
        assert_eq!(nic.kind, "loopback");
        assert_eq!(nic.address.as_deref(), Some("127.0.0.1"));
    }
}
