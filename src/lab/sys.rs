//! The edge to the system: runs `ip` and `tc` (iproute2), lists and kills
//! the processes inside a namespace, reads back what the kernel applied.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::LabError;

/// Finds `program` in `PATH`.
pub fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// Checks what the lab needs: root, `ip`, and `tc` when `need_tc`. The
/// error says exactly what is missing and how to get it.
pub fn preflight(need_tc: bool) -> Result<(), LabError> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(LabError::Missing {
            what: "root privileges".into(),
            how: "network namespaces and veth links need CAP_SYS_ADMIN and CAP_NET_ADMIN: run as root \
                  (e.g. `sudo nicbench lab ...`)"
                .into(),
        });
    }
    let mut tools = vec!["ip"];
    if need_tc {
        tools.push("tc");
    }
    for tool in tools {
        if find_program(tool).is_none() {
            return Err(LabError::Missing {
                what: format!("the `{tool}` command (iproute2)"),
                how: "install it with `apt-get install iproute2` (Debian/Ubuntu) or `dnf install iproute` (Fedora)"
                    .into(),
            });
        }
    }
    Ok(())
}

fn program(name: &str) -> PathBuf {
    find_program(name).unwrap_or_else(|| PathBuf::from(name))
}

/// The path of `ip`.
pub fn ip_program() -> PathBuf {
    program("ip")
}

/// Runs `tool args...`, returning stdout; a failure carries the command and its stderr.
pub fn run(tool: &str, args: &[&str]) -> Result<String, LabError> {
    let out = Command::new(program(tool))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| LabError::Io {
            what: format!("running {tool}"),
            source: e,
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(LabError::Command {
            command: format!("{tool} {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// `ip args...`
pub fn ip(args: &[&str]) -> Result<String, LabError> {
    run("ip", args)
}

/// `ip -n NETNS args...`
pub fn ip_in(netns: &str, args: &[&str]) -> Result<String, LabError> {
    let mut all = vec!["-n", netns];
    all.extend_from_slice(args);
    run("ip", &all)
}

/// Names of all network namespaces (`ip netns list`).
pub fn netns_list() -> Result<Vec<String>, LabError> {
    Ok(ip(&["netns", "list"])?
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// Pids of the processes inside `netns`.
pub fn netns_pids(netns: &str) -> Vec<i32> {
    ip(&["netns", "pids", netns])
        .map(|out| out.split_whitespace().filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default()
}

/// True if process `pid` exists and is not a zombie.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the parenthesised command.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Sends SIGTERM to `pids`, waits up to `grace` for them to go, then SIGKILL.
pub fn terminate(pids: &[i32], grace: Duration) {
    let signal = |sig| {
        for &pid in pids.iter().filter(|&&p| p > 1) {
            // SAFETY: kill has no memory preconditions.
            unsafe { libc::kill(pid, sig) };
        }
    };
    signal(libc::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && pids.iter().any(|&p| alive(p)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if pids.iter().any(|&p| alive(p)) {
        signal(libc::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline && pids.iter().any(|&p| alive(p)) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// What the kernel reports for an interface: MTU, tbf rate and queue (if any).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelLink {
    pub mtu: u32,
    pub up: bool,
    pub tbf_bits_per_second: Option<u64>,
    /// How long the tbf may hold a packet (tc's `lat`).
    pub tbf_queue_seconds: Option<f64>,
    /// The cores its receive queue steers packets to (`rps_cpus`, a mask).
    pub rps_cpus: Option<String>,
    /// Its NAPI polls in a thread of its own (`threaded`).
    pub threaded_napi: Option<bool>,
    /// An XDP program is attached (the lab's pass-through one).
    pub xdp: bool,
    /// Its offloads, as the ethtool ioctl reads them.
    pub offloads: Option<crate::model::Offloads>,
}

/// Reads back an interface's MTU, state and root tbf rate from the kernel.
pub fn kernel_link(netns: &str, ifname: &str) -> Result<KernelLink, LabError> {
    let parse = |what: &str, text: &str| -> Result<serde_json::Value, LabError> {
        serde_json::from_str(text).map_err(|e| LabError::Command {
            command: what.to_string(),
            stderr: format!("unexpected output ({e}): {text}"),
        })
    };
    let link = parse(
        "ip -j link show",
        &ip_in(netns, &["-j", "link", "show", "dev", ifname])?,
    )?;
    let link = &link[0];
    let qdisc = parse(
        "tc -j qdisc show",
        &run("tc", &["-n", netns, "-j", "qdisc", "show", "dev", ifname])?,
    )?;
    let tbf = qdisc
        .as_array()
        .into_iter()
        .flatten()
        .find(|q| q["kind"] == "tbf" && q["root"] == true);
    let sysfs = read_sysfs_in(
        netns,
        &[
            format!("/sys/class/net/{ifname}/queues/rx-0/rps_cpus"),
            format!("/sys/class/net/{ifname}/threaded"),
        ],
    );
    let name = ifname.to_string();
    let offloads = crate::probe::netns::read_in(netns, move || {
        crate::probe::ethtool::Ethtool::open(&name)
            .and_then(|t| t.features())
            .map(|f| crate::probe::ethtool::offloads(&f))
    })
    .ok()
    .flatten();
    Ok(KernelLink {
        rps_cpus: sysfs[0].clone(),
        threaded_napi: sysfs[1].as_deref().map(|t| t.trim() != "0"),
        xdp: link.get("xdp").is_some(),
        offloads,
        mtu: link["mtu"].as_u64().unwrap_or(0) as u32,
        up: link["flags"].as_array().is_some_and(|f| f.iter().any(|x| x == "UP")),
        // tc's JSON gives the rate in bytes per second, the latency in microseconds.
        tbf_bits_per_second: tbf.and_then(|q| q["options"]["rate"].as_u64()).map(|bytes| bytes * 8),
        tbf_queue_seconds: tbf.and_then(|q| q["options"]["lat"].as_f64()).map(|us| us / 1e6),
    })
}

/// Sets (or with `None` removes) the root tbf of an interface, sized by
/// [`super::spec::tbf_sizes`] (`queue`: how long it may hold a packet).
pub fn set_tbf(netns: &str, ifname: &str, rate: Option<u64>, mtu: u32, queue: Option<f64>) -> Result<(), LabError> {
    let Some(bits) = rate else {
        // Deleting a qdisc that is not there fails; only delete an existing tbf.
        if kernel_link(netns, ifname)?.tbf_bits_per_second.is_some() {
            run("tc", &["-n", netns, "qdisc", "del", "dev", ifname, "root"])?;
        }
        return Ok(());
    };
    let sizes = super::spec::tbf_sizes(bits, mtu, queue);
    let (rate, burst, limit) = (
        format!("{bits}bit"),
        sizes.burst_bytes.to_string(),
        sizes.limit_bytes.to_string(),
    );
    run(
        "tc",
        &[
            "-n", netns, "qdisc", "replace", "dev", ifname, "root", "tbf", "rate", &rate, "burst", &burst, "limit",
            &limit,
        ],
    )?;
    Ok(())
}

/// Writes a sysctl inside a namespace (e.g. `net/ipv4/ip_forward`).
pub fn sysctl_in(netns: &str, key: &str, value: &str) -> Result<(), LabError> {
    let script = format!("echo {value} > /proc/sys/{key}");
    run("ip", &["netns", "exec", netns, "sh", "-c", &script]).map(|_| ())
}

/// Writes sysfs files inside a namespace (whose `/sys` shows the
/// namespace's interfaces only under `ip netns exec`): `(path, value)`,
/// paths under `/sys/class/net/` with a glob allowed, in one shell.
pub fn write_sysfs_in(netns: &str, writes: &[(String, String)]) -> Result<(), LabError> {
    let script: Vec<String> = writes
        .iter()
        .map(|(path, value)| format!("for f in {path}; do printf '%s' '{value}' > \"$f\" || exit 1; done"))
        .collect();
    run("ip", &["netns", "exec", netns, "sh", "-c", &script.join("\n")]).map(|_| ())
}

/// Reads sysfs files inside a namespace: one value per path, None where
/// one cannot be read.
pub fn read_sysfs_in(netns: &str, paths: &[String]) -> Vec<Option<String>> {
    let script: Vec<String> = paths
        .iter()
        .map(|p| format!("v=$(cat {p} 2>/dev/null) && echo \"=$v\" || echo '!'"))
        .collect();
    let out = run("ip", &["netns", "exec", netns, "sh", "-c", &script.join("\n")]).unwrap_or_default();
    let mut lines = out.lines();
    paths
        .iter()
        .map(|_| lines.next().and_then(|l| l.strip_prefix('=')).map(str::to_string))
        .collect()
}
