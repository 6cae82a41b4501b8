//! CPU throttling of this process's cgroup: periods, throttled periods and
//! throttled time from `cpu.stat`, and the quota, for cgroup v1 (`cpu`
//! controller) and v2 (`cpu.max`). A process started with `ip netns exec`
//! sees a fresh /sys without the cgroup mounts, so the hierarchy is also
//! looked up through /proc/1/root, the initial mount namespace, and, in a
//! lab host, where the lab published the host's cgroup ([`CGROUP_VAR`]).

use std::fs;
use std::path::{Path, PathBuf};

/// Set by the lab for every process it starts in a CPU-limited host: a
/// directory visible inside `ip netns exec` (under /run) where the lab
/// bind-mounted the host's cgroup. `ip netns exec` mounts a fresh /sys
/// without the cgroup hierarchies, and /proc/1/root is often closed to
/// the process, so without it a lab host could not see its own limit.
pub const CGROUP_VAR: &str = "NICBENCH_LAB_CGROUP";

/// Which cgroup interface the cgroup belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// This process's CPU cgroup: its path as /proc/self/cgroup names it, and
/// the directory where its files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuCgroup {
    pub path: String,
    pub dir: PathBuf,
    pub version: Version,
}

/// cpu.stat of a cgroup and its quota.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupStat {
    pub periods: u64,
    pub throttled_periods: u64,
    pub throttled_ns: u64,
    pub quota_us: Option<u64>,
    pub period_us: Option<u64>,
}

/// The cgroup of the cpu controller in /proc/self/cgroup: the v1 line
/// naming `cpu` (`4:cpu,cpuacct:/x`), else the v2 line (`0::/x`).
pub fn parse_cpu_cgroup(text: &str) -> Option<(String, Version)> {
    let mut v2 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if controllers.split(',').any(|c| c == "cpu") {
            return Some((path.to_string(), Version::V1));
        }
        if id == "0" && controllers.is_empty() {
            v2 = Some((path.to_string(), Version::V2));
        }
    }
    v2
}

/// Parses cpu.stat: v1 `nr_periods`, `nr_throttled`, `throttled_time` (ns);
/// v2 the same counts and `throttled_usec`.
pub fn parse_cpu_stat(text: &str) -> CgroupStat {
    let value = |key: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse::<u64>().ok()).flatten()
        })
    };
    CgroupStat {
        periods: value("nr_periods").unwrap_or(0),
        throttled_periods: value("nr_throttled").unwrap_or(0),
        throttled_ns: value("throttled_time")
            .or_else(|| value("throttled_usec").map(|us| us * 1000))
            .unwrap_or(0),
        quota_us: None,
        period_us: None,
    }
}

/// Parses v2 `cpu.max`: `20000 100000`, or `max 100000` (no quota).
pub fn parse_cpu_max(text: &str) -> (Option<u64>, Option<u64>) {
    let mut fields = text.split_whitespace();
    let quota = fields.next().and_then(|q| q.parse().ok());
    let period = fields.next().and_then(|p| p.parse().ok());
    (quota, period)
}

/// Finds this process's CPU cgroup directory, when cpu.stat is readable:
/// first where a lab published it ([`CGROUP_VAR`]), if this process is in
/// it, else under the usual mount points.
pub fn locate() -> Option<CpuCgroup> {
    let (path, version) = parse_cpu_cgroup(&fs::read_to_string("/proc/self/cgroup").ok()?)?;
    if let Some(published) = std::env::var_os(CGROUP_VAR).map(PathBuf::from) {
        if holds_this_process(&published) {
            return Some(CpuCgroup {
                path,
                dir: published,
                version,
            });
        }
    }
    let roots: &[&str] = match version {
        Version::V1 => &["/sys/fs/cgroup/cpu", "/proc/1/root/sys/fs/cgroup/cpu"],
        Version::V2 => &["/sys/fs/cgroup", "/proc/1/root/sys/fs/cgroup"],
    };
    roots.iter().find_map(|root| {
        let dir = Path::new(root).join(path.trim_start_matches('/'));
        dir.join("cpu.stat").is_file().then(|| CpuCgroup {
            path: path.clone(),
            dir,
            version,
        })
    })
}

/// Whether the cgroup directory `dir` lists this process: the variable
/// comes from outside, so a directory that is not this process's cgroup
/// (a copied environment) is not used.
fn holds_this_process(dir: &Path) -> bool {
    let me = std::process::id().to_string();
    dir.join("cpu.stat").is_file()
        && fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|procs| procs.split_whitespace().any(|p| p == me))
}

/// The quota as a share of one core: 3.0 for 3000 us per 100000 us.
pub fn percent_of_one_core(quota_us: u64, period_us: u64) -> Option<f64> {
    (period_us > 0).then(|| quota_us as f64 * 100.0 / period_us as f64)
}

impl CpuCgroup {
    /// Reads cpu.stat and the quota.
    pub fn read(&self) -> Option<CgroupStat> {
        let mut stat = parse_cpu_stat(&fs::read_to_string(self.dir.join("cpu.stat")).ok()?);
        let number = |file: &str| fs::read_to_string(self.dir.join(file)).ok()?.trim().parse::<i64>().ok();
        let (quota, period) = match self.version {
            Version::V1 => (
                number("cpu.cfs_quota_us").filter(|&q| q > 0).map(|q| q as u64),
                number("cpu.cfs_period_us").filter(|&p| p > 0).map(|p| p as u64),
            ),
            Version::V2 => parse_cpu_max(&fs::read_to_string(self.dir.join("cpu.max")).unwrap_or_default()),
        };
        stat.quota_us = quota;
        stat.period_us = period;
        Some(stat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_cpu_controller_line_wins_over_the_unified_line() {
        let text = "5:devices:/\n3:cpu,cpuacct:/nicbench/lab/a\n0::/\n";
        assert_eq!(parse_cpu_cgroup(text), Some(("/nicbench/lab/a".into(), Version::V1)));
        assert_eq!(
            parse_cpu_cgroup("0::/user.slice\n"),
            Some(("/user.slice".into(), Version::V2))
        );
        assert_eq!(parse_cpu_cgroup("2:cpuacct:/\n"), None);
    }

    #[test]
    fn cpu_stat_in_both_versions() {
        let v1 = parse_cpu_stat("nr_periods 100\nnr_throttled 95\nthrottled_time 4000000000\n");
        assert_eq!(
            (v1.periods, v1.throttled_periods, v1.throttled_ns),
            (100, 95, 4_000_000_000)
        );
        let v2 = parse_cpu_stat("usage_usec 10\nnr_periods 50\nnr_throttled 20\nthrottled_usec 300\n");
        assert_eq!((v2.periods, v2.throttled_periods, v2.throttled_ns), (50, 20, 300_000));
    }

    #[test]
    fn a_published_directory_that_does_not_list_this_process_is_not_its_cgroup() {
        let dir = std::env::temp_dir().join(format!("nicbench-cgroup-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("cpu.stat"), "nr_periods 1\n").unwrap();
        fs::write(dir.join("cgroup.procs"), "1\n2\n").unwrap();
        assert!(!holds_this_process(&dir));
        fs::write(dir.join("cgroup.procs"), format!("1\n{}\n", std::process::id())).unwrap();
        assert!(holds_this_process(&dir));
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(percent_of_one_core(3000, 100_000), Some(3.0));
        assert_eq!(percent_of_one_core(3000, 0), None);
    }

    #[test]
    fn cpu_max_with_and_without_a_quota() {
        assert_eq!(parse_cpu_max("20000 100000\n"), (Some(20000), Some(100000)));
        assert_eq!(parse_cpu_max("max 100000\n"), (None, Some(100000)));
    }
}
