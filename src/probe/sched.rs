//! How long the threads of one trial ran and how long they waited for a
//! CPU while ready to run (`/proc/self/task/<tid>/schedstat`: run time and
//! run delay in ns). A thread that is ready but waits most of the time is
//! CPU-starved — by a cgroup quota, or by other work on its cores — and
//! this sees it even where the cgroup files are out of reach (a process
//! started by `ip netns exec` gets a fresh /sys without them).
//!
//! Threads that exist when tracking starts are left out; the others are
//! sampled while the trial runs, since they are gone by its end.

use std::collections::{HashMap, HashSet};
use std::fs;

use crate::model::ThreadScheduling;

/// Run time and run delay (waiting while runnable), in ns.
pub fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split_whitespace();
    let run = fields.next()?.parse().ok()?;
    let delay = fields.next()?.parse().ok()?;
    Some((run, delay))
}

fn thread_ids() -> Vec<u32> {
    fs::read_dir("/proc/self/task")
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// Follows the threads started after [`ThreadTracker::start`].
#[derive(Debug, Default)]
pub struct ThreadTracker {
    existing: HashSet<u32>,
    latest: HashMap<u32, (u64, u64)>,
}

impl ThreadTracker {
    pub fn start() -> ThreadTracker {
        ThreadTracker {
            existing: thread_ids().into_iter().collect(),
            latest: HashMap::new(),
        }
    }

    /// Reads the counters of every new thread still alive.
    pub fn sample(&mut self) {
        for tid in thread_ids() {
            if self.existing.contains(&tid) {
                continue;
            }
            let path = format!("/proc/self/task/{tid}/schedstat");
            if let Some(values) = fs::read_to_string(path).ok().as_deref().and_then(parse_schedstat) {
                self.record(tid, values);
            }
        }
    }

    fn record(&mut self, tid: u32, values: (u64, u64)) {
        self.latest.insert(tid, values);
    }

    /// The sums over the new threads; None when none was seen.
    pub fn report(&self) -> Option<ThreadScheduling> {
        if self.latest.is_empty() {
            return None;
        }
        let run_ns: u64 = self.latest.values().map(|v| v.0).sum();
        let wait_ns: u64 = self.latest.values().map(|v| v.1).sum();
        Some(delta_report(self.latest.len() as u32, run_ns, wait_ns))
    }
}

/// `SO_INCOMING_NAPI_ID` (asm-generic/socket.h, x86 and arm alike).
const SO_INCOMING_NAPI_ID: libc::c_int = 56;

/// The NAPI instance that last delivered to socket `fd`; None when its
/// packets came through no NAPI poll (a veth without GRO or XDP, loopback).
pub fn incoming_napi_id(fd: std::os::fd::RawFd) -> Option<u32> {
    let mut id: libc::c_uint = 0;
    let mut len = std::mem::size_of::<libc::c_uint>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `id`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_INCOMING_NAPI_ID,
            (&mut id as *mut libc::c_uint).cast(),
            &mut len,
        )
    };
    (rc == 0 && id != 0).then_some(id)
}

/// The kernel thread that polls NAPI instance `napi_id` (threaded NAPI
/// names it `napi/<ifname>-<id>`); None when that NAPI is not threaded.
pub fn napi_thread(napi_id: u32) -> Option<u32> {
    let suffix = format!("-{napi_id}");
    fs::read_dir("/proc")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim_end().starts_with("napi/") && c.trim_end().ends_with(&suffix))
        })
}

/// Threads that existed before the trial (napi threads), followed as the
/// change of their counters over the trial.
#[derive(Debug)]
pub struct KernelThreads {
    /// Each thread and its run time and delay when first read.
    threads: Vec<(u32, (u64, u64))>,
}

impl KernelThreads {
    fn read(pid: u32) -> Option<(u64, u64)> {
        parse_schedstat(&fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?)
    }

    /// The thread carrying socket `fd`'s receive work, when one does.
    pub fn receiving_for(fd: std::os::fd::RawFd) -> Option<KernelThreads> {
        KernelThreads::of(&[napi_thread(incoming_napi_id(fd)?)?])
    }

    /// Threads `pids`, those that can be read now; None when none can.
    pub fn of(pids: &[u32]) -> Option<KernelThreads> {
        let threads: Vec<(u32, (u64, u64))> = pids.iter().filter_map(|&p| Some((p, Self::read(p)?))).collect();
        (!threads.is_empty()).then_some(KernelThreads { threads })
    }

    /// Their run time and wait since they were first read, summed over
    /// those still there; None when all are gone.
    pub fn report(&self) -> Option<ThreadScheduling> {
        let (mut count, mut run, mut wait) = (0, 0, 0);
        for (pid, before) in &self.threads {
            if let Some(now) = Self::read(*pid) {
                count += 1;
                run += now.0.saturating_sub(before.0);
                wait += now.1.saturating_sub(before.1);
            }
        }
        (count > 0).then(|| delta_report(count, run, wait))
    }
}

fn delta_report(threads: u32, run_ns: u64, wait_ns: u64) -> ThreadScheduling {
    ThreadScheduling {
        threads,
        run_seconds: run_ns as f64 / 1e9,
        wait_seconds: wait_ns as f64 / 1e9,
        wait_percent: (run_ns + wait_ns > 0).then(|| wait_ns as f64 * 100.0 / (run_ns + wait_ns) as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_gives_run_time_and_delay() {
        assert_eq!(
            parse_schedstat("82378963 1436203171 36\n"),
            Some((82_378_963, 1_436_203_171))
        );
        assert_eq!(parse_schedstat("x y z"), None);
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn report_sums_threads_and_gives_the_waiting_share() {
        let mut t = ThreadTracker::default();
        assert_eq!(t.report(), None);
        t.record(10, (100_000_000, 900_000_000));
        t.record(11, (100_000_000, 900_000_000));
        t.record(10, (200_000_000, 1_800_000_000));
        let r = t.report().unwrap();
        assert_eq!(r.threads, 2);
        assert!((r.run_seconds - 0.3).abs() < 1e-9);
        assert!((r.wait_seconds - 2.7).abs() < 1e-9);
        assert!((r.wait_percent.unwrap() - 90.0).abs() < 1e-9);
    }

    #[test]
    fn only_threads_started_after_the_start_are_followed() {
        // Other tests start threads concurrently, so this checks by id.
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() } as u32;
        let mut t = ThreadTracker::start();
        let (sender, receiver) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        // The thread lives until it has been sampled: it waits for the
        // release, not for a time.
        let handle = std::thread::spawn(move || {
            // SAFETY: as above.
            sender.send(unsafe { libc::gettid() } as u32).unwrap();
            released.recv().unwrap();
        });
        let tid = receiver.recv().unwrap();
        t.sample();
        release.send(()).unwrap();
        handle.join().unwrap();
        assert!(t.latest.contains_key(&tid), "the new thread is followed");
        assert!(!t.latest.contains_key(&me), "the thread that started tracking is not");
        assert!(t.report().is_some_and(|r| r.threads >= 1));
    }
}
