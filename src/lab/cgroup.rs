//! CPU limits for a host: one cgroup per limited host holding every process
//! started in it (agent included). Uses cgroup v2 `cpu.max` where the
//! unified hierarchy with the cpu controller is mounted at /sys/fs/cgroup,
//! else the cgroup v1 cpu controller (`cpu.cfs_quota_us`/`cpu.cfs_period_us`)
//! at /sys/fs/cgroup/cpu. Layout: `<root>/nicbench/<lab>/<host>`.

use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::LabError;

/// Scheduler period for the quota (100 ms, the kernel's default).
const PERIOD_US: u64 = 100_000;

/// Which cgroup interface this machine offers for CPU limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuController {
    V2(PathBuf),
    V1(PathBuf),
}

impl CpuController {
    /// Finds the CPU controller, or says what is missing.
    pub fn detect() -> Result<CpuController, LabError> {
        let v2 = Path::new("/sys/fs/cgroup");
        if let Ok(controllers) = std::fs::read_to_string(v2.join("cgroup.controllers")) {
            if controllers.split_whitespace().any(|c| c == "cpu") {
                return Ok(CpuController::V2(v2.to_path_buf()));
            }
        }
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        if v1.join("cpu.cfs_quota_us").is_file() {
            return Ok(CpuController::V1(v1.to_path_buf()));
        }
        Err(LabError::Missing {
            what: "a cgroup CPU controller (needed for --cpu-limit)".into(),
            how: "mount cgroup v2 with the cpu controller at /sys/fs/cgroup, or cgroup v1 with \
                  `mount -t cgroup -o cpu cgroup /sys/fs/cgroup/cpu`"
                .into(),
        })
    }

    fn root(&self) -> &Path {
        match self {
            CpuController::V2(p) | CpuController::V1(p) => p,
        }
    }

    /// The directory of lab `lab` (parent of its hosts' cgroups).
    pub fn lab_dir(&self, lab: &str) -> PathBuf {
        self.root().join("nicbench").join(lab)
    }

    /// Creates host `host`'s cgroup limited to `percent` of one core.
    pub fn create(&self, lab: &str, host: &str, percent: f64) -> Result<PathBuf, LabError> {
        let dir = self.lab_dir(lab).join(host);
        let io = |what: String| move |e: std::io::Error| LabError::Io { what, source: e };
        if let CpuController::V2(root) = self {
            // Each level must hand the cpu controller down to its children.
            for parent in [root.clone(), root.join("nicbench"), self.lab_dir(lab)] {
                std::fs::create_dir_all(&parent).map_err(io(format!("creating {}", parent.display())))?;
                let control = parent.join("cgroup.subtree_control");
                std::fs::write(&control, "+cpu").map_err(io(format!("enabling cpu in {}", control.display())))?;
            }
        }
        std::fs::create_dir_all(&dir).map_err(io(format!("creating the cgroup {}", dir.display())))?;
        let quota = ((percent / 100.0) * PERIOD_US as f64).round().max(1000.0) as u64;
        let files: Vec<(&str, String)> = match self {
            CpuController::V2(_) => vec![("cpu.max", format!("{quota} {PERIOD_US}"))],
            CpuController::V1(_) => vec![
                ("cpu.cfs_period_us", PERIOD_US.to_string()),
                ("cpu.cfs_quota_us", quota.to_string()),
            ],
        };
        for (file, value) in files {
            let path = dir.join(file);
            std::fs::write(&path, &value).map_err(io(format!("writing {value} to {}", path.display())))?;
        }
        Ok(dir)
    }
}

/// The cgroup v1 cpuset hierarchy, where each host's cores are kept.
pub const CPUSET_V1: &str = "/sys/fs/cgroup/cpuset";

/// The machine's online cores (`/sys/devices/system/cpu/online`).
pub fn online_cpus() -> Vec<u32> {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|t| super::cores::parse_cpu_list(&t))
        .unwrap_or_default()
}

/// The root of the cpuset controller: cgroup v1's hierarchy, or the
/// unified one when it offers `cpuset`; None when neither does.
pub fn cpuset_root() -> Option<(PathBuf, bool)> {
    let v2 = Path::new("/sys/fs/cgroup");
    if std::fs::read_to_string(v2.join("cgroup.controllers")).is_ok_and(|c| c.split_whitespace().any(|c| c == "cpuset"))
    {
        return Some((v2.to_path_buf(), true));
    }
    let v1 = Path::new(CPUSET_V1);
    v1.join("cpuset.cpus").is_file().then(|| (v1.to_path_buf(), false))
}

/// Creates host `host`'s cpuset cgroup holding `cores` (every level above
/// it gets the root's cores and memory nodes, as cgroup v1 requires).
pub fn create_cpuset(lab: &str, host: &str, cores: &[u32]) -> Result<PathBuf, LabError> {
    let (root, v2) = cpuset_root().ok_or_else(|| LabError::Missing {
        what: "a cgroup cpuset controller (each lab host owns cores)".into(),
        how: "mount cgroup v1's cpuset at /sys/fs/cgroup/cpuset (`mount -t cgroup -o cpuset cgroup \
              /sys/fs/cgroup/cpuset`), or cgroup v2 with the cpuset controller"
            .into(),
    })?;
    let io = |what: String| move |e: std::io::Error| LabError::Io { what, source: e };
    let read = |file: &Path| std::fs::read_to_string(file).unwrap_or_default().trim().to_string();
    let lab_dir = root.join("nicbench").join(lab);
    let dir = lab_dir.join(host);
    let (all_cpus, all_mems) = match v2 {
        true => (
            read(&root.join("cpuset.cpus.effective")),
            read(&root.join("cpuset.mems.effective")),
        ),
        false => (read(&root.join("cpuset.cpus")), read(&root.join("cpuset.mems"))),
    };
    for (level, parent) in [
        (root.join("nicbench"), root.clone()),
        (lab_dir.clone(), root.join("nicbench")),
    ] {
        if v2 {
            let control = parent.join("cgroup.subtree_control");
            std::fs::write(&control, "+cpuset").map_err(io(format!("enabling cpuset in {}", control.display())))?;
        }
        std::fs::create_dir_all(&level).map_err(io(format!("creating {}", level.display())))?;
        if !v2 {
            for (file, value) in [("cpuset.cpus", &all_cpus), ("cpuset.mems", &all_mems)] {
                let path = level.join(file);
                if read(&path).is_empty() {
                    std::fs::write(&path, value).map_err(io(format!("writing {value} to {}", path.display())))?;
                }
            }
        }
    }
    if v2 {
        let control = lab_dir.join("cgroup.subtree_control");
        std::fs::write(&control, "+cpuset").map_err(io(format!("enabling cpuset in {}", control.display())))?;
    }
    std::fs::create_dir_all(&dir).map_err(io(format!("creating the cgroup {}", dir.display())))?;
    let cpus = super::cores::cpu_list(cores);
    for (file, value) in [("cpuset.mems", all_mems.as_str()), ("cpuset.cpus", cpus.as_str())] {
        let path = dir.join(file);
        std::fs::write(&path, value).map_err(io(format!("writing {value} to {}", path.display())))?;
    }
    Ok(dir)
}

/// Lifts the quota of a host's cgroup (`lab set --cpu-limit a=none`).
pub fn lift_quota(dir: &Path) -> Result<(), LabError> {
    let (file, value) = match dir.join("cpu.max").exists() {
        true => ("cpu.max", format!("max {PERIOD_US}")),
        false => ("cpu.cfs_quota_us", "-1".to_string()),
    };
    let path = dir.join(file);
    std::fs::write(&path, &value).map_err(|e| LabError::Io {
        what: format!("writing {value} to {}", path.display()),
        source: e,
    })
}

/// Where the lab publishes its hosts' cgroups for the processes in them
/// (`/run` stays visible inside `ip netns exec`, /sys/fs/cgroup does not).
pub const PUBLISHED_ROOT: &str = "/run/nicbench/cgroups";

/// The directory where host `host` of lab `lab` finds its cgroup.
pub fn published_dir(lab: &str, host: &str) -> PathBuf {
    Path::new(PUBLISHED_ROOT).join(lab).join(host)
}

/// Bind-mounts the host's cgroup directory `dir` at [`published_dir`], so
/// that nicbench running in the host reads its own quota and throttling
/// ([`crate::probe::cgroup::CGROUP_VAR`] names it). Returns that directory.
pub fn publish(dir: &Path, lab: &str, host: &str) -> Result<PathBuf, LabError> {
    let target = published_dir(lab, host);
    std::fs::create_dir_all(&target).map_err(|e| LabError::Io {
        what: format!("creating {}", target.display()),
        source: e,
    })?;
    let c = |p: &Path| CString::new(p.as_os_str().as_encoded_bytes()).expect("a path has no NUL byte");
    let (source, at) = (c(dir), c(&target));
    // SAFETY: both are valid NUL-terminated paths; a bind mount takes no
    // file system type or data.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            at.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(LabError::Io {
            what: format!("bind-mounting the cgroup {} at {}", dir.display(), target.display()),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(target)
}

/// Removes what [`publish`] made for lab `lab`: unmounts every host's
/// directory and removes them. Returns the directories removed.
pub fn unpublish_lab(lab: &str) -> Result<Vec<PathBuf>, LabError> {
    let dir = Path::new(PUBLISHED_ROOT).join(lab);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut removed = Vec::new();
    for entry in entries.filter_map(|e| e.ok()) {
        let path = entry.path();
        let at = CString::new(path.as_os_str().as_encoded_bytes()).expect("a path has no NUL byte");
        // SAFETY: a valid NUL-terminated path. EINVAL: not mounted (a
        // half-built lab), which is fine.
        if unsafe { libc::umount2(at.as_ptr(), libc::MNT_DETACH) } != 0 {
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() != Some(libc::EINVAL) {
                return Err(LabError::Io {
                    what: format!("unmounting {}", path.display()),
                    source: error,
                });
            }
        }
        std::fs::remove_dir(&path).map_err(|e| LabError::Io {
            what: format!("removing {}", path.display()),
            source: e,
        })?;
        removed.push(path);
    }
    let _ = std::fs::remove_dir(&dir);
    let _ = std::fs::remove_dir(PUBLISHED_ROOT);
    Ok(removed)
}

/// Every cgroup directory nicbench may have made for lab `lab`, on either version.
pub fn lab_dirs(lab: &str) -> Vec<PathBuf> {
    [
        "/sys/fs/cgroup/nicbench",
        "/sys/fs/cgroup/cpu/nicbench",
        "/sys/fs/cgroup/cpuset/nicbench",
    ]
    .iter()
    .map(|root| Path::new(root).join(lab))
    .filter(|p| p.is_dir())
    .collect()
}

/// Names of labs that have a cgroup directory (or a published one).
pub fn lab_names() -> Vec<String> {
    [
        "/sys/fs/cgroup/nicbench",
        "/sys/fs/cgroup/cpu/nicbench",
        "/sys/fs/cgroup/cpuset/nicbench",
        PUBLISHED_ROOT,
    ]
    .iter()
    .filter_map(|root| std::fs::read_dir(root).ok())
    .flatten()
    .filter_map(|e| e.ok())
    .filter(|e| e.path().is_dir())
    .filter_map(|e| e.file_name().to_str().map(str::to_string))
    .collect()
}

/// Pids of the processes in a cgroup directory.
pub fn procs(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|s| s.split_whitespace().filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default()
}

/// Removes a lab's cgroup tree (hosts first; they must be empty by now).
pub fn remove_lab_dir(dir: &Path) -> Result<(), LabError> {
    let io = |what: String| move |e: std::io::Error| LabError::Io { what, source: e };
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.filter_map(|e| e.ok()).filter(|e| e.path().is_dir()) {
            let path = entry.path();
            std::fs::remove_dir(&path).map_err(io(format!("removing the cgroup {}", path.display())))?;
        }
    }
    std::fs::remove_dir(dir).map_err(io(format!("removing the cgroup {}", dir.display())))?;
    // The shared parent goes when the last lab leaves it.
    if let Some(parent) = dir.parent() {
        let _ = std::fs::remove_dir(parent);
    }
    Ok(())
}

/// Makes `command`'s process join the cgroup at `dir` before it execs, so
/// everything it starts is limited too.
pub fn join_on_spawn(command: &mut Command, dir: &Path) {
    let procs = CString::new(dir.join("cgroup.procs").into_os_string().into_encoded_bytes())
        .expect("cgroup path has no NUL byte");
    // SAFETY: between fork and exec the closure only calls the
    // async-signal-safe open, write and close, and allocates nothing.
    unsafe {
        command.pre_exec(move || {
            let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // "0" means the writing process itself.
            let written = libc::write(fd, b"0".as_ptr().cast(), 1);
            let error = std::io::Error::last_os_error();
            libc::close(fd);
            if written != 1 {
                return Err(error);
            }
            Ok(())
        });
    }
}
