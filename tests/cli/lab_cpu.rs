//! The lab's hosts own cores (issue 66): a cpuset per host, receive work
//! steered to its cores, CPU figures of a lab host scoped to them, offloads
//! per interface, and a CPU limit that a real-time thief keeps for all of a
//! host's work. Each test reads back from the kernel what nicbench set; no
//! rate is asserted. Every lab is removed also when a test fails.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nicbench::lab::{self, CpuLimit};
use serde_json::Value;

use super::common::*;

use super::common::lab_builder as builder;

fn status_json(name: &str) -> Value {
    serde_json::from_str(&ok(&["lab", "status", name, "--json"])).unwrap()
}

/// The kernel's view of `host`'s end of link `link` in `lab status --json`.
fn kernel_end<'a>(status: &'a Value, link: u64, host: &str) -> &'a Value {
    status["kernel"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["link"] == link && k["host"] == host)
        .unwrap_or_else(|| panic!("no end of link {link} in {host}: {status}"))
}

/// A `Cpus_allowed_list` or `Policy`-like line of /proc/PID/status.
fn proc_status(pid: u64, field: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':').map(|v| v.trim().to_string()))
        .unwrap_or_default()
}

/// The scheduling policy of every thread of `pid` (field 41 of stat).
fn thread_policies(pid: u64) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| t.ok())
        .filter_map(|t| std::fs::read_to_string(t.path().join("stat")).ok())
        .filter_map(|stat| {
            let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
            fields.get(38)?.parse().ok()
        })
        .collect()
}

/// How many thief processes of any lab have a real-time thread pinned to
/// exactly `cores` (thread names `thief-N`, SCHED_FIFO).
fn thieves_on(cores: &[u32]) -> usize {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0;
    };
    procs
        .filter_map(|p| p.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .filter(|&pid| {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                return false;
            };
            tasks.filter_map(|t| t.ok()).any(|t| {
                let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
                let tid: u64 = t.file_name().to_str().and_then(|n| n.parse().ok()).unwrap_or(0);
                comm.starts_with("thief-")
                    && thread_policies_of_task(pid, tid) == Some(1)
                    && lab::cores::parse_cpu_list(&proc_status_task(pid, tid, "Cpus_allowed_list")) == cores
            })
        })
        .count()
}

/// The scheduling policy of thread `tid` of `pid`.
fn thread_policies_of_task(pid: u64, tid: u64) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    fields.get(38)?.parse().ok()
}

/// A line of /proc/PID/task/TID/status.
fn proc_status_task(pid: u64, tid: u64, field: &str) -> String {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':').map(|v| v.trim().to_string()))
        .unwrap_or_default()
}

fn alive(pid: u64) -> bool {
    nicbench::lab::sys::alive(pid as i32)
}

/// User plus system seconds of a process.
fn cpu_seconds(pid: u64) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// With `--cores own` every host owns cores: a cpuset the kernel reads
/// back, its interfaces' receive queues (and the router's toward it)
/// steered there, and a test run inside reports the CPU of those cores,
/// saying so. Where the machine has no more cores than the lab has hosts,
/// `auto` shares them all: every core in each cpuset, no steering.
#[test]
fn hosts_own_cores_their_receive_work_goes_there_and_their_cpu_figures_say_so() {
    require_lab!();
    let cpus = lab::cgroup::online_cpus();
    if cpus.len() <= 2 {
        let shared = builder().via_router().no_agents().build().unwrap();
        for host in ["a", "b"] {
            let h = shared.state().host(host).unwrap();
            assert_eq!((h.cores.clone(), h.cores_shared), (cpus.clone(), true), "{host}");
            let cpuset = h.cpuset.clone().expect("a cpuset");
            let kernel = std::fs::read_to_string(cpuset.join("cpuset.cpus")).unwrap();
            assert_eq!(lab::cores::parse_cpu_list(&kernel), cpus, "{host} cpuset.cpus");
            for link in shared.state().links_of(host) {
                let k = shared.kernel_link(link.id, host).unwrap();
                let rps = k.rps_cpus.expect("rps_cpus read back");
                assert!(rps.trim_start_matches(['0', ',']).is_empty(), "{host}: RPS {rps}");
            }
        }
        let status = ok(&["lab", "status", shared.name()]);
        assert!(
            status.contains("(shared with the other hosts; `--cores own` gives each its own)"),
            "{status}"
        );
    }
    let lab = builder()
        .via_router()
        .cores(lab::cores::CorePolicy::Own)
        .build()
        .unwrap();
    let state = lab.state().clone();
    let (a, b) = (state.host("a").unwrap(), state.host("b").unwrap());
    assert!(!a.cores.is_empty() && !b.cores.is_empty(), "{state:?}");
    if cpus.len() >= 2 {
        assert!(
            a.cores.iter().all(|c| !b.cores.contains(c)),
            "a and b share cores on {cpus:?}"
        );
        assert!(!a.cores_shared && !b.cores_shared);
    }
    for host in [a, b] {
        let cpuset = host.cpuset.clone().expect("a cpuset");
        let kernel = std::fs::read_to_string(cpuset.join("cpuset.cpus")).unwrap();
        assert_eq!(
            lab::cores::parse_cpu_list(&kernel),
            host.cores,
            "{} cpuset.cpus",
            host.name
        );
        let mask = lab::cores::cpu_mask(&host.cores);
        for link in state.links_of(&host.name) {
            for end in [&host.name, "r"] {
                let k = lab.kernel_link(link.id, end).unwrap();
                let rps = k.rps_cpus.expect("rps_cpus read back");
                assert_eq!(
                    rps.trim_start_matches(['0', ',']),
                    mask.trim_start_matches(['0', ',']),
                    "link {} end {end}: receive work of {} steered to its cores",
                    link.id,
                    host.name
                );
                // And taken in by napi threads pinned there.
                assert_eq!(k.threaded_napi, Some(true), "link {} end {end}", link.id);
                let threads = &link.end_of(end).unwrap().napi_threads;
                assert!(!threads.is_empty(), "link {} end {end}: {link:?}", link.id);
                for &t in threads {
                    assert_eq!(
                        lab::cores::parse_cpu_list(&proc_status(t as u64, "Cpus_allowed_list")),
                        host.cores,
                        "napi thread {t} at link {} end {end}",
                        link.id
                    );
                }
            }
        }
    }
    // The agent in b runs on b's cores.
    let agent = b.agent_pid.expect("agent") as u64;
    assert_eq!(
        lab::cores::parse_cpu_list(&proc_status(agent, "Cpus_allowed_list")),
        b.cores,
        "the agent's cores"
    );
    let out = lab
        .command("a", BIN)
        .args(["tcp", "b", "-t", "1", "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cpu = &run["cpu"];
    for (side, host) in [("client", a), ("agent", b)] {
        let scope = &cpu[side]["scope"];
        assert_eq!(scope["kind"], "lab_host_cores", "{side}: {scope}");
        assert_eq!(scope["lab_host"], format!("{}-{}", lab.name(), host.name), "{side}");
        let cores: Vec<u32> = serde_json::from_value(scope["cores"].clone()).unwrap();
        assert_eq!(cores, host.cores, "{side} scope");
        assert_eq!(cpu[side]["logical_cpus"], host.cores.len(), "{side}: {}", cpu[side]);
        let per_core: Vec<u64> = cpu[side]["per_core"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["core"].as_u64().unwrap())
            .collect();
        assert_eq!(
            per_core,
            host.cores.iter().map(|&c| c as u64).collect::<Vec<_>>(),
            "{side}"
        );
        // The host's own work: its test threads plus the napi threads
        // carrying its packets (its own interface's and the router's
        // toward it), the sum of the two figures the run reports.
        let work = &run["counters"][side]["packet_work"];
        assert_eq!(work["threads"], 2, "{side}: {work}");
        let c = &cpu[side];
        let threads = c["process"]["user_seconds"].as_f64().unwrap() + c["process"]["system_seconds"].as_f64().unwrap();
        let sum = threads + work["run_seconds"].as_f64().unwrap();
        // In percent of one core over the time the napi threads were
        // followed, at least the test's: never more than the host's cores.
        let percent = c["host_work_percent_of_core"].as_f64().expect("host work figure");
        let seconds = c["seconds"].as_f64().unwrap();
        assert!(
            percent <= sum / seconds * 100.0 + 1e-6,
            "{side}: {percent}% for {sum} s in {seconds} s"
        );
        assert!(
            percent > 0.0 && percent <= 100.0 * host.cores.len() as f64,
            "{side}: {percent}% of a core"
        );
        let per_kb = c["host_work_service_demand_us_per_kb"].as_f64().unwrap();
        let kb = c["bytes_moved"].as_f64().unwrap() / 1024.0;
        assert!(
            (per_kb * kb / 1e6 - sum).abs() < 1e-6,
            "{side}: {per_kb} us/KB over {kb} KB"
        );
    }
    let name = lab.name().to_string();
    drop(lab);
    assert!(
        !Path::new("/sys/fs/cgroup/cpuset/nicbench").join(&name).exists(),
        "cpuset left"
    );
}

/// `--offloads` per interface: set with the ethtool ioctl, read back from
/// the kernel, shown by `lab status`, changed by `lab set` on one end only.
#[test]
fn offloads_are_set_per_interface_read_back_and_changed_while_running() {
    require_lab!();
    let name = lab::spec::unique_name();
    let _guard = CliLab(name.clone());
    let shown = ok(&[
        "lab",
        "up",
        &name,
        "--via-router",
        "--no-agents",
        "--offloads",
        "tso=off,gso=off,gro=off",
    ]);
    assert!(shown.contains("offloads tso off, gso off, gro off"), "{shown}");
    let status = status_json(&name);
    for (link, host) in [(1, "a"), (1, "r"), (2, "b"), (2, "r")] {
        let o = &kernel_end(&status, link, host)["offloads"];
        assert_eq!(
            (&o["tso"], &o["gso"], &o["gro"]),
            (&false.into(), &false.into(), &false.into()),
            "{link} {host}: {o}"
        );
    }
    ok(&["lab", "set", &name, "--offloads", "1:a=tso=on,gso=on"]);
    let status = status_json(&name);
    let a = &kernel_end(&status, 1, "a")["offloads"];
    assert_eq!((&a["tso"], &a["gso"]), (&true.into(), &true.into()), "{a}");
    let r = &kernel_end(&status, 1, "r")["offloads"];
    assert_eq!(r["tso"], false, "the router's end stays as it was: {r}");
    let bad = nicbench(&["lab", "set", &name, "--offloads", "1:z=tso=off"]);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("--offloads") && stderr(&bad).contains("joins a and r"),
        "{}",
        stderr(&bad)
    );
    let bad = nicbench(&["lab", "up", "x", "--offloads", "tso=maybe"]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("on or off"), "{}", stderr(&bad));
}

/// A limit below the host's cores: a thief process with a real-time thread
/// pinned to each of the host's cores takes the rest of every period (its
/// CPU time shows it), the host's receive work moves into napi threads
/// pinned to its cores, `lab set` changes and lifts the limit, and nothing
/// of it outlives the lab.
#[test]
fn a_cpu_limit_has_a_real_time_thief_and_pinned_napi_threads_until_the_lab_goes() {
    require_lab!();
    let mut lab = builder().via_router().no_agents().cpu_limit("b", 25.0).build().unwrap();
    let b = lab.state().host("b").unwrap().clone();
    let thief = b.thief_pid.expect("a thief for b at 25%") as u64;
    assert!(alive(thief));
    let policies = thread_policies(thief);
    // SCHED_FIFO is 1: one real-time thread per core of b (and the main one).
    assert_eq!(
        policies.iter().filter(|&&p| p == 1).count(),
        b.cores.len(),
        "thief threads' policies {policies:?}"
    );
    // It takes about 75% of b's core: over a second and more of wall time,
    // well over half (it preempts any ordinary thread, a `yes` hog included).
    // Other labs' thieves on the same core (tests run in parallel, and each
    // lab gives its limited host a core of its own) share its real-time time
    // with it: seen under the suite with two `yes` hogs, 35%. So: over half
    // of an equal share among the thieves there, counted before and after.
    let (start, used) = (Instant::now(), cpu_seconds(thief));
    let mut thieves = thieves_on(&b.cores);
    let deadline = start + Duration::from_secs(20);
    while start.elapsed() < Duration::from_secs(1) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let share = (cpu_seconds(thief) - used) / start.elapsed().as_secs_f64() / b.cores.len() as f64;
    thieves = thieves.max(thieves_on(&b.cores)).max(1);
    assert!(
        share > 0.5 / thieves as f64,
        "the thief took {:.0}% of b's cores, beside {} thieves there",
        share * 100.0,
        thieves - 1
    );
    // b's receive work: in napi threads on b's cores, RPS off there.
    let link = lab.state().links_of("b")[0].clone();
    for end in ["b", "r"] {
        let k = lab.kernel_link(link.id, end).unwrap();
        assert_eq!(k.threaded_napi, Some(true), "{end}");
        let threads = &link.end_of(end).unwrap().napi_threads;
        assert!(!threads.is_empty(), "{end}: {link:?}");
        for &t in threads {
            assert_eq!(
                lab::cores::parse_cpu_list(&proc_status(t as u64, "Cpus_allowed_list")),
                b.cores,
                "napi thread {t} at {end}"
            );
        }
    }
    // b's receive queues are not steered by RPS (softirq would escape the thief).
    let rps = lab
        .kernel_link(link.id, "b")
        .unwrap()
        .rps_cpus
        .expect("rps_cpus read back");
    assert!(rps.trim_start_matches(['0', ',']).is_empty(), "b: RPS {rps}");
    // a has no limit: napi threads where it owns its cores, the kernel's
    // defaults where it shares them.
    let a = lab.state().host("a").unwrap().clone();
    let a_link = lab.state().links_of("a")[0].id;
    assert_eq!(
        lab.kernel_link(a_link, "a").unwrap().threaded_napi == Some(true),
        !a.cores_shared,
        "a on cores {:?}, shared: {}",
        a.cores,
        a.cores_shared
    );
    // Lifting the limit ends the thief; b keeps its core, its napi
    // threads, and gets RPS back.
    lab.set_host_work(
        &[CpuLimit {
            host: "b".into(),
            percent: 0.0,
        }],
        &[],
    )
    .unwrap();
    assert_eq!(lab.state().host("b").unwrap().thief_pid, None);
    let gone = Instant::now() + Duration::from_secs(10);
    while alive(thief) && Instant::now() < gone {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(thief), "the thief outlived its limit");
    let k = lab.kernel_link(link.id, "b").unwrap();
    assert_eq!(k.threaded_napi, Some(true));
    let rps = k.rps_cpus.expect("rps_cpus read back");
    assert_eq!(
        rps.trim_start_matches(['0', ',']),
        lab::cores::cpu_mask(&b.cores).trim_start_matches(['0', ',']),
        "b's RPS after the limit went"
    );
    // A new limit, a new thief; `down` ends it.
    lab.set_host_work(
        &[CpuLimit {
            host: "b".into(),
            percent: 50.0,
        }],
        &[],
    )
    .unwrap();
    let second = lab.state().host("b").unwrap().thief_pid.expect("a thief at 50%") as u64;
    assert!(alive(second));
    let name = lab.name().to_string();
    lab.down().unwrap();
    assert!(!alive(second), "the thief outlived the lab");
    assert!(lab::existing_netns(&name).unwrap().is_empty());
    assert!(!Path::new("/sys/fs/cgroup/cpuset/nicbench").join(&name).exists());
}

/// A limit at or above what the host's cores give needs no thief; the CLI
/// status says what a limit does and does not slow.
#[test]
fn lab_status_says_what_a_cpu_limit_slows() {
    require_lab!();
    let name = lab::spec::unique_name();
    let _guard = CliLab(name.clone());
    let shown = ok(&[
        "lab",
        "up",
        &name,
        "--no-agents",
        "--cpu-limit",
        "a=30%",
        "--cpu-limit",
        "b=400%",
    ]);
    let line = |host: &str| {
        shown
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{host} ")))
            .unwrap_or_else(|| panic!("no line for {host}: {shown}"))
            .to_string()
    };
    let a = line("a");
    assert!(
        a.contains("free 30.0% of every 10 ms") && a.contains("thief pid"),
        "{a}"
    );
    assert!(a.contains("does not slow"), "{a}");
    let b = line("b");
    assert!(
        b.contains("its packet work is not limited") && !b.contains("thief"),
        "{b}"
    );
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(lab::state::state_path(&name)).unwrap()).unwrap();
    let b_state = saved["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "b")
        .unwrap();
    assert!(b_state.get("thief_pid").is_none(), "{b_state}");
}
