//! The CPU limit of a lab host, for all its work: a process
//! (`nicbench lab thief`, hidden) with one real-time (SCHED_FIFO) thread
//! per core of the host, pinned there, that busy-waits the part of every
//! 10 ms period the limit does not give and sleeps the rest (absolute
//! deadlines on the monotonic clock). Whatever else runs on those cores —
//! the host's processes, its napi threads, ksoftirqd — gets only the rest.
//! Softirq work run on the way out of an interrupt is not held back (the
//! lab moves the host's receive work into napi threads for that, see
//! [`super::steer`]). Real-time throttling (`sched_rt_runtime_us`, 95% by
//! default) bounds what the thief can take.
//!
//! The thief sits in the host's cpuset cgroup (so `lab down` finds and
//! ends it with the host's processes) and leaves by itself when the host's
//! namespace is gone.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::state::{HostState, LabState};
use super::{cgroup, LabError};

/// The thief's period.
pub const PERIOD: Duration = Duration::from_millis(10);
/// Its threads' real-time priority: above every ordinary thread, below
/// the kernel's own real-time threads.
const PRIORITY: i32 = 1;

fn now_ns() -> i64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into t.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

fn sleep_until(ns: i64) {
    let t = libc::timespec {
        tv_sec: ns / 1_000_000_000,
        tv_nsec: ns % 1_000_000_000,
    };
    // SAFETY: an absolute sleep on a valid timespec; EINTR just ends it early.
    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &t, std::ptr::null_mut()) };
}

/// One thief thread: on `core`, busy `busy` of every period, forever.
fn steal(core: u32, busy: f64) -> std::io::Result<()> {
    super::steer::pin(0, &[core])?;
    let param = libc::sched_param {
        sched_priority: PRIORITY,
    };
    // SAFETY: sets this thread's policy; param is valid.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let period = PERIOD.as_nanos() as i64;
    let busy_ns = (busy * period as f64) as i64;
    let mut start = now_ns();
    loop {
        while now_ns() < start + busy_ns {
            std::hint::spin_loop();
        }
        start += period;
        let now = now_ns();
        if start < now - period {
            // Held off for more than a period (real-time throttling):
            // start again from now rather than catch up.
            start = now;
        }
        sleep_until(start);
    }
}

/// `nicbench lab thief`: takes `busy` of every period of each of `cores`
/// until the namespace `netns` is gone. Prints `ready` on stdout once every
/// thread runs at real-time priority; an error otherwise.
pub fn run(netns: &str, cores: &[u32], busy: f64) -> anyhow::Result<()> {
    anyhow::ensure!(!cores.is_empty(), "no cores to take");
    anyhow::ensure!((0.0..1.0).contains(&busy), "busy share {busy} is not below 1");
    // With real-time group scheduling a cgroup below the root may hold no
    // real-time time at all: the thief runs in the root's cpu cgroup.
    for procs in [
        "/sys/fs/cgroup/cpu/cgroup.procs",
        "/sys/fs/cgroup/cpu,cpuacct/cgroup.procs",
    ] {
        if std::path::Path::new(procs).exists() {
            let _ = std::fs::write(procs, "0");
        }
    }
    let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
    for &core in cores {
        let tx = tx.clone();
        std::thread::Builder::new()
            .name(format!("thief-{core}"))
            .spawn(move || {
                if let Err(e) = steal(core, busy) {
                    let _ = tx.send(Err(format!("core {core}: {e}")));
                }
            })?;
    }
    drop(tx);
    // A thread that fails does so at once; one that runs never reports.
    match rx.recv_timeout(Duration::from_millis(200)) {
        Ok(Err(e)) => anyhow::bail!("cannot take the host's cores at real-time priority: {e}"),
        _ => println!("ready"),
    }
    let netns = std::path::Path::new("/run/netns").join(netns);
    loop {
        std::thread::sleep(Duration::from_millis(200));
        if !netns.exists() {
            return Ok(());
        }
    }
}

/// Starts the thief of host `h` (with `program`, the nicbench executable) in
/// its own session, inside the host's cpuset, and waits for its `ready`.
/// None when the host's limit needs none.
pub fn start(h: &HostState, program: &std::path::Path) -> Result<Option<Child>, LabError> {
    let host = &h.name;
    let Some(busy) = super::steer::host_thief_busy(h) else {
        return Ok(None);
    };
    let mut command = Command::new(program);
    command
        .args([
            "lab",
            "thief",
            "--netns",
            &h.netns,
            "--cores",
            &super::cores::cpu_list(&h.cores),
        ])
        .arg("--busy-percent")
        .arg(format!("{:.3}", busy * 100.0))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = &h.cpuset {
        cgroup::join_on_spawn(&mut command, dir);
    }
    // SAFETY: setsid is async-signal-safe and touches no memory.
    unsafe {
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let io = |e| LabError::Io {
        what: format!("starting the CPU thief of host {host}"),
        source: e,
    };
    let mut child = command.spawn().map_err(io)?;
    let mut line = String::new();
    let stdout = child.stdout.take().expect("piped");
    let _ = BufReader::new(stdout).read_line(&mut line);
    if line.trim() == "ready" {
        return Ok(Some(child));
    }
    let _ = child.kill();
    let output = child.wait_with_output().map_err(io)?;
    Err(LabError::Agent {
        host: host.to_string(),
        reason: format!(
            "its CPU thief did not start: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ),
    })
}

/// Ends `host`'s thief, if it has one.
pub fn stop(state: &mut LabState, host: &str) {
    if let Some(h) = state.host_mut(host) {
        if let Some(pid) = h.thief_pid.take() {
            super::sys::terminate(&[pid as i32], Duration::from_secs(2));
        }
    }
}
