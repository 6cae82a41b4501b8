//! CPU accounting: /proc/stat per core (user, nice, system, idle, iowait,
//! irq, softirq, steal) sampled before and after a trial, the benchmark's own
//! threads from `getrusage(RUSAGE_THREAD)`, and netperf's service demand.

use std::fs;

use crate::model::{CoreUtilization, CpuReport, CpuScope, CpuScopeKind, ProcessCpu};

/// Cumulative ticks of one CPU line of /proc/stat.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoreTicks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CoreTicks {
    fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq + self.steal
    }
    fn total(&self) -> u64 {
        self.busy() + self.idle + self.iowait
    }
    fn delta(&self, earlier: &CoreTicks) -> CoreTicks {
        CoreTicks {
            user: self.user.saturating_sub(earlier.user),
            nice: self.nice.saturating_sub(earlier.nice),
            system: self.system.saturating_sub(earlier.system),
            idle: self.idle.saturating_sub(earlier.idle),
            iowait: self.iowait.saturating_sub(earlier.iowait),
            irq: self.irq.saturating_sub(earlier.irq),
            softirq: self.softirq.saturating_sub(earlier.softirq),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }
}

/// One reading of /proc/stat: per core, indexed by the core number.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuSnapshot {
    pub cores: Vec<(u32, CoreTicks)>,
    /// Which cores these are (the machine's, or a lab host's own).
    pub scope: Option<CpuScope>,
}

/// Keeps only the cores of `lab_host` (its name and cores) when given and
/// any of them is there, and says which cores the snapshot holds.
pub fn scoped(mut snapshot: CpuSnapshot, lab_host: Option<(&str, &[u32], bool)>) -> CpuSnapshot {
    if let Some((host, cores, shared)) = lab_host {
        let kept: Vec<(u32, CoreTicks)> = snapshot
            .cores
            .iter()
            .filter(|(c, _)| cores.contains(c))
            .copied()
            .collect();
        if !kept.is_empty() {
            snapshot.scope = Some(CpuScope {
                kind: CpuScopeKind::LabHostCores,
                cores: kept.iter().map(|(c, _)| *c).collect(),
                lab_host: Some(host.to_string()),
                shared,
            });
            snapshot.cores = kept;
            return snapshot;
        }
    }
    snapshot.scope = Some(CpuScope {
        kind: CpuScopeKind::Machine,
        cores: snapshot.cores.iter().map(|(c, _)| *c).collect(),
        lab_host: None,
        shared: false,
    });
    snapshot
}

/// The lab host this process runs in and its cores, read once.
fn lab_host_here() -> Option<&'static (String, crate::lab_env::EnvCores)> {
    static HERE: std::sync::OnceLock<Option<(String, crate::lab_env::EnvCores)>> = std::sync::OnceLock::new();
    HERE.get_or_init(crate::lab_env::host_cores_here).as_ref()
}

/// Where CPU snapshots come from (the kernel, or a fixture in tests).
pub trait CpuSampler: Send + Sync {
    fn sample(&self) -> std::io::Result<CpuSnapshot>;
    /// Clock ticks per second of the counters (USER_HZ).
    fn ticks_per_second(&self) -> f64;
}

/// Reads /proc/stat.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProcStat;

impl CpuSampler for ProcStat {
    /// Inside a lab host (`lab exec`, its agent), only the host's own cores.
    fn sample(&self) -> std::io::Result<CpuSnapshot> {
        let all = parse_proc_stat(&fs::read_to_string("/proc/stat")?).map_err(std::io::Error::other)?;
        let here = lab_host_here().map(|(host, c)| (host.as_str(), c.cores.as_slice(), c.shared));
        Ok(scoped(all, here))
    }
    fn ticks_per_second(&self) -> f64 {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if hz > 0 {
            hz as f64
        } else {
            100.0
        }
    }
}

/// Parses the `cpuN` lines of /proc/stat.
pub fn parse_proc_stat(text: &str) -> Result<CpuSnapshot, String> {
    let mut cores = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(name) = fields.next() else { continue };
        let Some(number) = name.strip_prefix("cpu").filter(|n| !n.is_empty()) else {
            continue;
        };
        let core: u32 = number
            .parse()
            .map_err(|_| format!("/proc/stat: bad cpu line '{line}'"))?;
        let values: Vec<u64> = fields
            .map(|f| f.parse().map_err(|_| format!("/proc/stat: bad number in '{line}'")))
            .collect::<Result<_, _>>()?;
        if values.len() < 4 {
            return Err(format!("/proc/stat: too few fields in '{line}'"));
        }
        let at = |i: usize| values.get(i).copied().unwrap_or(0);
        cores.push((
            core,
            CoreTicks {
                user: at(0),
                nice: at(1),
                system: at(2),
                idle: at(3),
                iowait: at(4),
                irq: at(5),
                softirq: at(6),
                steal: at(7),
            },
        ));
    }
    if cores.is_empty() {
        return Err("/proc/stat: no per-cpu lines".into());
    }
    Ok(CpuSnapshot { cores, scope: None })
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn utilization(core: u32, d: &CoreTicks) -> CoreUtilization {
    let total = d.total();
    CoreUtilization {
        core,
        utilization_percent: percent(d.busy(), total),
        user_percent: percent(d.user + d.nice, total),
        system_percent: percent(d.system, total),
        softirq_percent: percent(d.softirq, total),
        irq_percent: percent(d.irq, total),
    }
}

/// Builds the CPU report of a trial from two snapshots, the wall time
/// between them, the benchmark threads' own CPU time, and the bytes moved.
///
/// Service demand follows netperf: CPU time of all cores during the trial,
/// in microseconds, divided by the kilobytes (1024 bytes) moved.
pub fn cpu_report(
    before: &CpuSnapshot,
    after: &CpuSnapshot,
    ticks_per_second: f64,
    seconds: f64,
    process: ProcessCpu,
    bytes_moved: u64,
) -> CpuReport {
    let mut sum = CoreTicks::default();
    let mut per_core = Vec::new();
    for (core, now) in &after.cores {
        // Cores that went offline or came online between the two readings
        // are left out rather than compared with nothing.
        let Some((_, then)) = before.cores.iter().find(|(c, _)| c == core) else {
            continue;
        };
        let d = now.delta(then);
        sum.user += d.user;
        sum.nice += d.nice;
        sum.system += d.system;
        sum.idle += d.idle;
        sum.iowait += d.iowait;
        sum.irq += d.irq;
        sum.softirq += d.softirq;
        sum.steal += d.steal;
        per_core.push(utilization(*core, &d));
    }
    let total = sum.total();
    let busiest_core = per_core
        .iter()
        .max_by(|a, b| a.utilization_percent.total_cmp(&b.utilization_percent))
        .cloned()
        .unwrap_or_default();
    let busy_us = sum.busy() as f64 / ticks_per_second * 1e6;
    let service_demand_us_per_kb = (bytes_moved > 0).then(|| busy_us / (bytes_moved as f64 / 1024.0));
    let threads_us = (process.user_seconds + process.system_seconds) * 1e6;
    let threads_percent_of_core = (seconds > 0.0).then(|| threads_us / 1e6 / seconds * 100.0);
    let threads_service_demand_us_per_kb = (bytes_moved > 0).then(|| threads_us / (bytes_moved as f64 / 1024.0));
    CpuReport {
        seconds,
        logical_cpus: per_core.len() as u32,
        utilization_percent: percent(sum.busy(), total),
        user_percent: percent(sum.user, total),
        nice_percent: percent(sum.nice, total),
        system_percent: percent(sum.system, total),
        softirq_percent: percent(sum.softirq, total),
        irq_percent: percent(sum.irq, total),
        iowait_percent: percent(sum.iowait, total),
        steal_percent: percent(sum.steal, total),
        busiest_core,
        per_core,
        process,
        bytes_moved,
        service_demand_us_per_kb,
        service_demand_us_per_transaction: None,
        threads_percent_of_core,
        threads_service_demand_us_per_kb,
        host_work_percent_of_core: None,
        host_work_service_demand_us_per_kb: None,
        scope: after.scope.clone(),
    }
}

impl CpuReport {
    /// Adds a lab host's own work: the stream threads plus
    /// `packet_work_seconds` of the napi threads carrying its packets, those
    /// followed over `followed_seconds` (from before the streams start to
    /// after they end, so the percent is over that time: threads pinned to
    /// the host's cores never exceed them).
    pub fn add_host_work(&mut self, packet_work_seconds: f64, followed_seconds: f64) {
        let seconds = self.process.user_seconds + self.process.system_seconds + packet_work_seconds;
        let over = followed_seconds.max(self.seconds);
        self.host_work_percent_of_core = (over > 0.0).then(|| seconds / over * 100.0);
        self.host_work_service_demand_us_per_kb =
            (self.bytes_moved > 0).then(|| seconds * 1e6 / (self.bytes_moved as f64 / 1024.0));
    }
}

/// CPU time of all cores between two snapshots, in seconds.
pub fn busy_seconds(before: &CpuSnapshot, after: &CpuSnapshot, ticks_per_second: f64) -> f64 {
    let mut busy = 0;
    for (core, now) in &after.cores {
        if let Some((_, then)) = before.cores.iter().find(|(c, _)| c == core) {
            busy += now.delta(then).busy();
        }
    }
    busy as f64 / ticks_per_second
}

/// CPU time the calling thread has used so far.
pub fn thread_cpu() -> ProcessCpu {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    if rc != 0 {
        return ProcessCpu::default();
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    ProcessCpu {
        user_seconds: secs(usage.ru_utime),
        system_seconds: secs(usage.ru_stime),
    }
}

impl std::ops::Add for ProcessCpu {
    type Output = ProcessCpu;
    fn add(self, other: ProcessCpu) -> ProcessCpu {
        ProcessCpu {
            user_seconds: self.user_seconds + other.user_seconds,
            system_seconds: self.system_seconds + other.system_seconds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "cpu  100 0 100 800 0 0 0 0 0 0\n\
        cpu0 50 0 50 400 0 0 0 0 0 0\n\
        cpu1 50 0 50 400 0 0 0 0 0 0\n\
        intr 12345\nctxt 99\n";
    // Over the trial: core 0 fully busy (60 user, 30 system, 10 softirq),
    // core 1 idle for 100 ticks.
    const AFTER: &str = "cpu  160 0 130 900 0 0 10 0 0 0\n\
        cpu0 110 0 80 400 0 0 10 0 0 0\n\
        cpu1 50 0 50 500 0 0 0 0 0 0\n";

    #[test]
    fn parses_per_core_lines_only() {
        let s = parse_proc_stat(BEFORE).unwrap();
        assert_eq!(s.cores.len(), 2);
        assert_eq!(s.cores[1].0, 1);
        assert_eq!(s.cores[1].1.idle, 400);
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_proc_stat("cpu0 a b c d\n").is_err());
        assert!(parse_proc_stat("nothing here\n").is_err());
        assert!(parse_proc_stat("cpu0 1 2\n").is_err());
    }

    #[test]
    fn utilization_and_service_demand_follow_netperf() {
        let before = parse_proc_stat(BEFORE).unwrap();
        let after = parse_proc_stat(AFTER).unwrap();
        // 100 busy ticks at 100 Hz = 1 s of CPU = 1e6 us; 1024 KB moved.
        let r = cpu_report(&before, &after, 100.0, 1.0, ProcessCpu::default(), 1024 * 1024);
        assert_eq!(r.logical_cpus, 2);
        assert!((r.utilization_percent - 50.0).abs() < 1e-9);
        assert!((r.user_percent - 30.0).abs() < 1e-9);
        assert!((r.system_percent - 15.0).abs() < 1e-9);
        assert!((r.softirq_percent - 5.0).abs() < 1e-9);
        assert_eq!(r.busiest_core.core, 0);
        assert!((r.busiest_core.utilization_percent - 100.0).abs() < 1e-9);
        assert!((r.busiest_core.softirq_percent - 10.0).abs() < 1e-9);
        let sd = r.service_demand_us_per_kb.unwrap();
        assert!((sd - 1e6 / 1024.0).abs() < 1e-6, "{sd}");
    }

    #[test]
    fn a_lab_hosts_snapshot_keeps_its_own_cores_and_says_so() {
        let all = parse_proc_stat(BEFORE).unwrap();
        let machine = scoped(all.clone(), None);
        assert_eq!(machine.cores.len(), 2);
        let scope = machine.scope.clone().unwrap();
        assert_eq!((scope.kind, scope.cores), (CpuScopeKind::Machine, vec![0, 1]));
        let host = scoped(all.clone(), Some(("demo-b", &[1], false)));
        assert_eq!(host.cores.iter().map(|(c, _)| *c).collect::<Vec<_>>(), [1]);
        let scope = host.scope.clone().unwrap();
        assert_eq!(scope.kind, CpuScopeKind::LabHostCores);
        assert_eq!(scope.lab_host.as_deref(), Some("demo-b"));
        assert_eq!(scope.describe(), "lab host demo-b's core 1");
        // Core 0 fully busy, core 1 idle: b's report is its idle core alone.
        let after = scoped(parse_proc_stat(AFTER).unwrap(), Some(("demo-b", &[1], false)));
        let r = cpu_report(&host, &after, 100.0, 1.0, ProcessCpu::default(), 1024);
        assert_eq!((r.logical_cpus, r.utilization_percent), (1, 0.0));
        assert_eq!(r.scope.unwrap().cores, vec![1]);
        // Cores the host owns but the kernel does not list: the machine's.
        let none = scoped(all, Some(("demo-b", &[7], false)));
        assert_eq!(none.scope.unwrap().kind, CpuScopeKind::Machine);
    }

    #[test]
    fn nothing_moved_means_no_service_demand() {
        let s = parse_proc_stat(BEFORE).unwrap();
        let r = cpu_report(&s, &s, 100.0, 1.0, ProcessCpu::default(), 0);
        assert_eq!(r.service_demand_us_per_kb, None);
        assert_eq!(r.utilization_percent, 0.0);
    }

    #[test]
    fn thread_cpu_grows_with_work() {
        let before = thread_cpu();
        let mut x = 0u64;
        for i in 0..50_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let after = thread_cpu();
        assert!(after.user_seconds + after.system_seconds > before.user_seconds + before.system_seconds);
    }
}
