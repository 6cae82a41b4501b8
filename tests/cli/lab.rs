//! The lab: namespaces, veth links, router, rate limits, CPU limits, agents,
//! through the Rust API and the `nicbench lab` command. Each test uses its
//! own unique lab name and checks that nothing of it is left afterwards.
//! Without root or iproute2 every test prints why and returns (skipped).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nicbench::lab::{self, Lab, LinkSelector};
use serde_json::Value;

use super::common::*;

use super::common::lab_builder as builder;

/// Asserts that nothing of lab `name` exists any more.
fn assert_gone(name: &str) {
    let netns = lab::existing_netns(name).unwrap();
    assert!(netns.is_empty(), "namespaces left: {netns:?}");
    let etc: Vec<_> = std::fs::read_dir("/etc/netns")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let prefix = format!("nicbench-{name}-");
    assert!(!etc.iter().any(|e| e.starts_with(&prefix)), "host files left: {etc:?}");
    assert!(!lab::state::state_path(name).exists(), "state file left");
    assert!(
        !Path::new("/sys/fs/cgroup/cpu/nicbench").join(name).exists(),
        "cgroup left"
    );
    assert!(!Path::new("/sys/fs/cgroup/nicbench").join(name).exists(), "cgroup left");
}

#[test]
fn the_labs_of_a_killed_test_process_are_removed_by_the_next_lab() {
    require_lab!();
    // A test process killed with SIGKILL cannot run its labs' Drop: here,
    // the lab of a process that is gone is a real namespace named with its
    // pid, as the killed process left it.
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let orphan = format!("t{pid}-0");
    let netns = format!("nicbench-{orphan}-a");
    let created = Command::new("ip").args(["netns", "add", &netns]).status().unwrap();
    assert!(created.success(), "ip netns add {netns}");
    // Removed whatever the assertions say, so no run leaves it behind.
    struct Sweep(String);
    impl Drop for Sweep {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
    let _sweep = Sweep(netns.clone());
    // Another test's lab, of a process still alive (this one), is kept.
    let alive = builder().no_agents().build().unwrap();
    assert_gone(&orphan);
    let next = builder().no_agents().build().unwrap();
    assert!(
        !lab::existing_netns(alive.name()).unwrap().is_empty(),
        "a live process's lab was removed"
    );
    drop(next);
    drop(alive);
}

/// Runs `program args` in `host` and returns stdout, failing with stderr.
fn run_in(lab: &Lab, host: &str, program: &str, args: &[&str]) -> String {
    let out = lab
        .command(host, program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{program} {args:?} in {host}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn tcp_json(lab: &Lab, from: &str, args: &[&str]) -> Value {
    let mut all = vec!["tcp"];
    all.extend_from_slice(args);
    all.push("--json");
    serde_json::from_str(&run_in(lab, from, BIN, &all)).expect("JSON result")
}

#[test]
fn api_direct_lab_resolves_names_and_tears_down_on_drop() {
    require_lab!();
    let lab = builder().no_agents().build().unwrap();
    let name = lab.name().to_string();
    assert_eq!(lab.addr("b").to_string(), "10.200.1.2");
    assert_eq!(lab::existing_netns(&name).unwrap().len(), 2);
    let resolved = run_in(&lab, "a", "getent", &["hosts", "b"]);
    assert!(resolved.starts_with("10.200.1.2"), "{resolved}");
    // The addresses exist inside the lab only.
    let root_addrs = Command::new("ip").args(["-o", "addr"]).output().unwrap();
    assert!(!String::from_utf8_lossy(&root_addrs.stdout).contains("10.200.1."));
    drop(lab);
    assert_gone(&name);
}

#[test]
fn api_teardown_also_happens_when_a_test_panics() {
    require_lab!();
    let name = std::sync::Mutex::new(String::new());
    let result = std::panic::catch_unwind(|| {
        let lab = builder().build().unwrap();
        *name.lock().unwrap() = lab.name().to_string();
        panic!("deliberate panic: the lab must still be torn down");
    });
    assert!(result.is_err());
    assert_gone(&name.lock().unwrap());
}

fn cli_up_status_exec_down(extra: &[&str], hosts: &[&str]) {
    let name = lab::spec::unique_name();
    let guard = CliLab(name.clone());
    let mut up = vec!["lab", "up", &name];
    up.extend_from_slice(extra);
    let shown = ok(&up);
    assert!(shown.contains(&format!("lab {name}:")), "{shown}");
    let again = nicbench(&up);
    assert!(!again.status.success());
    assert!(stderr(&again).contains("already exists"), "{}", stderr(&again));
    let status = ok(&["lab", "status", &name]);
    for host in hosts {
        assert!(
            status.contains(&format!("netns nicbench-{name}-{host}, agent pid")),
            "{status}"
        );
    }
    assert!(!status.contains("NOT RUNNING"), "{status}");
    let listed = ok(&["lab", "status"]);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with(&format!("{name}\t")) && l.split('\t').any(|c| c == "up") && l.contains("made by")),
        "{listed}"
    );
    // `nicbench` inside exec is this executable; `b` resolves in the lab.
    let run = ok(&[
        "lab", "exec", &name, "a", "--", "nicbench", "tcp", "b", "-n", "1M", "--json",
    ]);
    let run: Value = serde_json::from_str(&run).unwrap();
    assert_eq!(run["sum"]["receiver"]["bytes"], 1024 * 1024);
    let bad_host = nicbench(&["lab", "exec", &name, "z", "--", "true"]);
    assert!(stderr(&bad_host).contains("unknown host"), "{}", stderr(&bad_host));
    let down = ok(&["lab", "down", &name]);
    assert!(down.contains(&format!("lab '{name}' removed")), "{down}");
    assert_gone(&name);
    assert!(ok(&["lab", "down", &name]).contains("nothing to remove"));
    drop(guard);
}

#[test]
fn cli_up_status_exec_down_direct() {
    require_lab!();
    cli_up_status_exec_down(&["--mtu", "9000"], &["a", "b"]);
}

#[test]
fn cli_up_status_exec_down_via_router_with_parallel_links() {
    require_lab!();
    cli_up_status_exec_down(&["--via-router", "--links", "2", "--rate", "1G"], &["a", "b", "r"]);
}

#[test]
fn cli_refuses_bad_values_naming_the_option() {
    for (args, needle) in [
        (vec!["lab", "up", "x", "--mtu", "20"], "68 to 65535"),
        (vec!["lab", "up", "x", "--rate", "fast"], "100mbit"),
        (vec!["lab", "up", "Bad_Name"], "a-z, 0-9"),
        (vec!["lab", "up", "x", "--cpu-limit", "a"], "HOST=PERCENT"),
        (vec!["lab", "up", "x", "--hosts", "1"], "--hosts"),
        (
            vec!["lab", "up", "x", "--via-router", "--rate", "1G", "--queue", "200"],
            "1ms to 10s",
        ),
        (
            vec!["lab", "up", "x", "--via-router", "--rate", "1G", "--queue", "20s"],
            "1ms to 10s",
        ),
        (
            vec!["lab", "up", "x", "--rate", "1G", "--queue", "200ms"],
            "--via-router",
        ),
        (vec!["lab", "up", "x", "--via-router", "--queue", "200ms"], "--rate"),
    ] {
        let out = nicbench(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
    let both = nicbench(&["lab", "up", "x", "--switch", "--via-router"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(stderr(&both).contains("cannot be used with"), "{}", stderr(&both));
    require_lab!();
    let name = lab::spec::unique_name();
    for (args, needle) in [
        (&["--switch", "--links", "2"][..], "one port"),
        (&["--switch", "--mptcp"][..], "--via-router --links 2"),
    ] {
        let mut up = vec!["lab", "up", &name];
        up.extend_from_slice(args);
        let out = nicbench(&up);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
        assert_gone(&name);
    }
    let out = nicbench(&["lab", "up", &name, "--cpu-limit", "q=10%"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unknown host; this lab has a, b"),
        "{}",
        stderr(&out)
    );
    assert_gone(&name);
}

#[test]
fn without_iproute2_or_root_the_cli_says_what_is_missing() {
    let out = Command::new(BIN)
        .args(["lab", "up", "x"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(!out.status.success());
    // As root the missing piece is `ip`; otherwise it is root itself.
    assert!(
        err.contains("apt-get install iproute2") || err.contains("run as root"),
        "{err}"
    );
    if nicbench::lab::unavailable().is_none() {
        assert!(err.contains("missing the `ip` command (iproute2)"), "{err}");
        // Nobody runs a copy every user may reach, wherever the checkout is.
        let shared = crate::common::SharedDir::new();
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(shared.binary())
            .args(["lab", "down", "x"])
            .output();
        match out {
            Ok(out) => assert!(stderr(&out).contains("missing root privileges"), "{}", stderr(&out)),
            Err(e) => skip_or_fail(&format!("setpriv (util-linux) cannot run: {e}")),
        }
    }
}

#[test]
fn mtu_and_rate_are_applied_in_the_kernel_and_changed_while_running() {
    require_lab!();
    let mut lab = builder()
        .no_agents()
        .links(3)
        .mtu(9000)
        .link_mtu(2, 1500)
        .rate(100_000_000)
        .link_rate(3, "b", 50_000_000)
        .build()
        .unwrap();
    let k = |lab: &Lab, link, host| lab.kernel_link(link, host).unwrap();
    assert_eq!((k(&lab, 1, "a").mtu, k(&lab, 1, "b").mtu), (9000, 9000));
    assert_eq!((k(&lab, 2, "a").mtu, k(&lab, 2, "b").mtu), (1500, 1500));
    assert_eq!(k(&lab, 1, "a").tbf_bits_per_second, Some(100_000_000));
    assert_eq!(
        k(&lab, 3, "a").tbf_bits_per_second,
        Some(50_000_000),
        "traffic towards b leaves a"
    );
    assert_eq!(k(&lab, 3, "b").tbf_bits_per_second, Some(100_000_000));
    // Independent read-back with tc itself.
    let tc = Command::new("tc")
        .args(["-n", lab.netns("a"), "qdisc", "show", "dev", "eth2"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&tc.stdout).contains("rate 50Mbit"), "{tc:?}");

    lab.set_mtu(None, 1500).unwrap();
    lab.set_rate(
        LinkSelector {
            link: Some(1),
            towards: None,
        },
        None,
    )
    .unwrap();
    lab.set_rate(
        LinkSelector {
            link: Some(2),
            towards: Some("a".into()),
        },
        Some(20_000_000),
    )
    .unwrap();
    assert_eq!(k(&lab, 1, "a").mtu, 1500);
    assert_eq!(k(&lab, 3, "b").mtu, 1500);
    assert_eq!(k(&lab, 1, "a").tbf_bits_per_second, None);
    assert_eq!(k(&lab, 1, "b").tbf_bits_per_second, None);
    assert_eq!(k(&lab, 2, "b").tbf_bits_per_second, Some(20_000_000));
    assert_eq!(k(&lab, 3, "a").tbf_bits_per_second, Some(50_000_000), "untouched");
    // The state file follows, so the CLI sees the same.
    let name = lab.name().to_string();
    let status: Value = serde_json::from_str(&ok(&["lab", "status", &name, "--json"])).unwrap();
    assert_eq!(status["lab"]["links"][0]["mtu"], 1500);
    let cli = ok(&["lab", "set", &name, "--mtu", "2=4000", "--rate", "2:a=none"]);
    assert!(cli.contains("MTU 4000 bytes, b -> a: unlimited"), "{cli}");
    assert_eq!(k(&lab, 2, "a").mtu, 4000);
    let bad = nicbench(&["lab", "set", &name, "--mtu", "9=1500"]);
    assert!(stderr(&bad).contains("links 1 to 3"), "{}", stderr(&bad));
    drop(lab);
    assert_gone(&name);
}

#[test]
fn down_cleans_up_after_a_killed_up() {
    require_lab!();
    let name = lab::spec::unique_name();
    let _guard = CliLab(name.clone());
    let mut up = Command::new(BIN)
        .args([
            "lab",
            "up",
            &name,
            "--hosts",
            "4",
            "--links",
            "2",
            "--via-router",
            "--rate",
            "10mbit",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it as soon as it has created something.
    let deadline = Instant::now() + Duration::from_secs(20);
    while lab::existing_netns(&name).unwrap().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    up.kill().unwrap();
    up.wait().unwrap();
    assert!(
        !lab::existing_netns(&name).unwrap().is_empty(),
        "the killed up created nothing"
    );
    let listed = ok(&["lab", "status"]);
    assert!(listed.lines().any(|l| l.starts_with(&format!("{name}\t"))), "{listed}");
    let again = nicbench(&["lab", "up", &name]);
    assert!(stderr(&again).contains("already exists"), "{}", stderr(&again));
    ok(&["lab", "down", &name]);
    assert_gone(&name);
}

#[test]
fn two_labs_built_in_parallel_do_not_collide() {
    require_lab!();
    let build = || std::thread::spawn(|| builder().via_router().build().unwrap());
    let (x, y) = (build(), build());
    let (x, y) = (x.join().unwrap(), y.join().unwrap());
    assert_ne!(x.name(), y.name());
    for lab in [&x, &y] {
        let run = tcp_json(lab, "a", &["b", "-n", "1M"]);
        assert_eq!(run["sum"]["receiver"]["bytes"], 1024 * 1024);
    }
    let names = [x.name().to_string(), y.name().to_string()];
    drop(x);
    assert_gone(&names[0]);
    // The other lab is untouched by the first one's teardown.
    assert_eq!(lab::existing_netns(&names[1]).unwrap().len(), 3);
    drop(y);
    assert_gone(&names[1]);
}

#[test]
fn tcp_through_a_100mbit_router_bottleneck_never_gets_more() {
    require_lab!();
    let lab = builder().via_router().rate(100_000_000).build().unwrap();
    let run = tcp_json(&lab, "a", &["b", "-t", "3", "-O", "1"]);
    let goodput = run["sum"]["receiver"]["bits_per_second"].as_f64().unwrap();
    eprintln!("goodput through the 100 Mbit/s bottleneck: {:.1} Mbit/s", goodput / 1e6);
    // The shaper's cap holds however loaded the machine is (a loaded
    // machine only gets less); how near 100 Mbit/s TCP gets is a figure
    // for bench/timing-figures.sh, not an assertion.
    assert!(goodput > 0.0 && goodput <= 105e6, "{:.1} Mbit/s", goodput / 1e6);
}

#[test]
fn a_client_behind_the_router_gets_its_line_rate_from_the_router_without_link_speed() {
    require_lab!();
    // Link 1 joins a and r, link 2 b and r: the router sends 50 Mbit/s
    // toward a and 100 Mbit/s toward b.
    let lab = builder()
        .via_router()
        .link_rate(1, "a", 50_000_000)
        .link_rate(2, "b", 100_000_000)
        .build()
        .unwrap();
    let router = format!("lab router {}-r", lab.name());
    for (args, rate, iface) in [
        (vec!["b", "-t", "1"], 100_000_000, "eth1"),
        (vec!["b", "-t", "1", "-R"], 50_000_000, "eth0"),
    ] {
        let run = tcp_json(&lab, "a", &args);
        let share = &run["line_rate"];
        assert_eq!(share["link_speed_source"], "lab", "{args:?}: {share}");
        assert_eq!(share["link_bits_per_second"], rate, "{args:?}: {share}");
        assert_eq!(share["shaper_name"], format!("{router} {iface}"), "{args:?}: {share}");
        assert_eq!(share["overhead_model"], "qdisc", "{args:?}: {share}");
    }
    // The text is fitted to the terminal: compare it with its line breaks as spaces.
    let text = run_in(&lab, "a", BIN, &["tcp", "b", "-t", "1"]);
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        text.contains(&format!("100.00 Mbit/s link from {router} eth1")),
        "{text}"
    );
    // --link-speed still wins.
    let run = tcp_json(&lab, "a", &["b", "-t", "1", "--link-speed", "1G"]);
    assert_eq!(run["line_rate"]["link_speed_source"], "option");
}

/// The router's tbf latency on `iface`, in microseconds, as tc reads it back.
fn router_queue_us(lab: &str, iface: &str) -> u64 {
    let out = Command::new("tc")
        .args(["-n", &format!("nicbench-{lab}-r"), "-j", "qdisc", "show", "dev", iface])
        .output()
        .unwrap();
    let qdiscs: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tbf = qdiscs
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["kind"] == "tbf")
        .unwrap_or_else(|| panic!("{qdiscs}"));
    tbf["options"]["lat"].as_u64().unwrap_or_else(|| panic!("{tbf}"))
}

#[test]
fn the_router_queue_is_set_as_asked_shown_and_changed() {
    require_lab!();
    let name = lab::spec::unique_name();
    let _guard = CliLab(name.clone());
    // Link 1 joins a and r (the router's eth0), link 2 b and r (eth1).
    let shown = ok(&[
        "lab",
        "up",
        &name,
        "--via-router",
        "--rate",
        "100mbit",
        "--queue",
        "200ms",
        "--queue",
        "1:a=5ms",
        "--no-agents",
    ]);
    assert_eq!(router_queue_us(&name, "eth1"), 200_000);
    assert_eq!(router_queue_us(&name, "eth0"), 5_000);
    assert!(shown.contains("r -> b: 100.00 Mbit/s, queue 200 ms"), "{shown}");
    assert!(shown.contains("r -> a: 100.00 Mbit/s, queue 5 ms"), "{shown}");
    let status: Value = serde_json::from_str(&ok(&["lab", "status", &name, "--json"])).unwrap();
    let toward_b = status["lab"]["links"][1]["ends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["host"] == "r")
        .unwrap()
        .clone();
    assert_eq!(toward_b["queue_seconds"], 0.2, "{toward_b}");
    ok(&["lab", "set", &name, "--queue", "2:b=50ms"]);
    assert_eq!(router_queue_us(&name, "eth1"), 50_000);
    // A changed rate keeps the queue's time.
    ok(&["lab", "set", &name, "--rate", "2:b=50mbit"]);
    assert_eq!(router_queue_us(&name, "eth1"), 50_000);
    let refused = nicbench(&["lab", "set", &name, "--queue", "1:r=5ms"]);
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("no rate limit"), "{}", stderr(&refused));
    assert_eq!(
        router_queue_us(&name, "eth0"),
        5_000,
        "a refused change changed nothing"
    );
}

/// CPU seconds (user + system) a process has used, from /proc/PID/stat.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after the command.
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// A field of a cgroup's cpu.stat (v1 and v2 both have these counters).
fn cpu_stat_field(cpu_stat: &str, name: &str) -> u64 {
    cpu_stat
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in cpu.stat: {cpu_stat}"))
}

/// The cap holds by the kernel's own clocks, not wall time: the host's
/// cgroup carries a 10% quota, and a busy loop in the host used at most that
/// quota in each enforcement period the kernel counted. Whether the kernel
/// also had to throttle it depends on the machine: the host's thief holds
/// its core for the other 90% of every 10 ms, so on a busy machine (two
/// `yes` hogs) the loop may never get as far as its quota; the test does
/// not ask for a throttle.
#[test]
fn cpu_limited_host_really_gets_less_cpu() {
    require_lab!();
    let _turn = limited_lab_turn();
    let lab = builder().no_agents().cpu_limit("a", 10.0).build().unwrap();
    let mut limited = lab
        .command("a", "sh")
        .args(["-c", "while :; do :; done"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let cgroup = lab.state().host("a").unwrap().cgroup.clone().unwrap();
    let in_cgroup = std::fs::read_to_string(cgroup.join("cgroup.procs")).unwrap();
    assert!(
        in_cgroup.split_whitespace().any(|p| p == limited.id().to_string()),
        "{in_cgroup}"
    );
    // The quota the kernel enforces: 10 ms of every 100 ms (v1's
    // cpu.cfs_quota_us and cpu.cfs_period_us, v2's cpu.max).
    let quota = match std::fs::read_to_string(cgroup.join("cpu.cfs_quota_us")) {
        Ok(quota) => format!(
            "{} {}",
            quota.trim(),
            std::fs::read_to_string(cgroup.join("cpu.cfs_period_us"))
                .unwrap()
                .trim()
        ),
        Err(_) => std::fs::read_to_string(cgroup.join("cpu.max"))
            .unwrap()
            .trim()
            .to_string(),
    };
    assert_eq!(quota, "10000 100000", "the 10% host's quota in {}", cgroup.display());
    // Wait on the kernel's state: enough periods counted.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (used, cpu_stat) = loop {
        // The process's time first: periods only grow after it.
        let used = cpu_seconds(limited.id());
        let cpu_stat = std::fs::read_to_string(cgroup.join("cpu.stat")).unwrap();
        if cpu_stat_field(&cpu_stat, "nr_periods") >= 20 {
            break (used, cpu_stat);
        }
        assert!(Instant::now() < deadline, "20 periods not counted in 60 s: {cpu_stat}");
        std::thread::sleep(Duration::from_millis(50));
    };
    limited.kill().unwrap();
    limited.wait().unwrap();
    let periods = cpu_stat_field(&cpu_stat, "nr_periods") as f64;
    // cpu_limit's quota: 10% of each 100 ms period (src/lab/cgroup.rs).
    let quota_seconds = 0.010;
    eprintln!("busy loop in the 10% host: {used:.2} s of CPU over {periods} periods ({cpu_stat:?})");
    assert!(used > 0.0, "the limited loop never ran");
    // Two periods' quota of slack: the one running when read, and the
    // kernel's per-CPU runtime slices paid back in the next period.
    assert!(
        used <= (periods + 2.0) * quota_seconds,
        "{used:.3} s of CPU in {periods} periods of a 10 ms quota"
    );
}

/// Issue 2: the MSS TCP_INFO reports follows the link MTU (with timestamps,
/// MTU - 20 IP - 20 TCP - 12 options).
#[test]
fn mss_reported_by_tcp_info_follows_the_mtu() {
    require_lab!();
    let mut lab = builder().mtu(1500).build().unwrap();
    let run = tcp_json(&lab, "a", &["b", "-t", "1"]);
    assert_eq!(run["streams"][0]["sender"]["tcp_info"]["send_mss_bytes"], 1448);
    lab.set_mtu(None, 9000).unwrap();
    let run = tcp_json(&lab, "a", &["b", "-t", "1"]);
    assert_eq!(run["streams"][0]["sender"]["tcp_info"]["send_mss_bytes"], 8948);
}

/// Issue 43: a machine several people share. `lab status` says who made a
/// lab and when, and names an agent someone started by hand in a host (it
/// said "no agent"); `lab down --all` lists what it would remove and,
/// without `--yes` and without a terminal to ask on, removes nothing.
#[test]
fn status_names_the_maker_and_agents_started_by_hand_and_down_all_asks_first() {
    require_lab!();
    let lab = builder().no_agents().build().unwrap();
    let agent = AgentProcess::start_with(lab.command("a", BIN), &lab.addr("a").to_string(), &[]);
    let status = ok(&["lab", "status", lab.name()]);
    assert!(status.contains("\nmade by "), "{status}");
    assert!(status.contains(" UTC\n"), "{status}");
    let by_hand = format!(
        "no agent; started by hand: pid {} (nicbench serve -p 0",
        agent.child.id()
    );
    assert!(status.contains(&by_hand), "{status}");
    let list = ok(&["lab", "status"]);
    let line = list
        .lines()
        .find(|l| l.starts_with(&format!("{}\t", lab.name())))
        .unwrap();
    assert!(line.contains("\t2 hosts\t") && line.contains("\tmade by "), "{line}");

    let out = Command::new(BIN)
        .args(["lab", "down", "--all"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (text, err) = (String::from_utf8_lossy(&out.stdout), stderr(&out));
    assert_eq!(out.status.code(), Some(2), "{text}{err}");
    assert!(text.starts_with("lab down --all would remove "), "{text}");
    assert!(text.contains(&format!("\n  {}\t", lab.name())), "{text}");
    assert!(err.contains("add --yes to remove them all"), "{err}");
    // Nothing was removed: the lab is still there.
    assert!(ok(&["lab", "status", lab.name()]).contains("made by "));
    drop(agent);
}

/// Runs a host tool (ip, tc, bridge) and returns what it printed.
fn tool(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(out.status.success(), "{program} {args:?}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Joins a group on the host's address, says so, and prints the first
/// datagram and its sender (exits with an error after 10 s without one).
const MEMBER: &str = "
import socket, struct, sys
group, local = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('', 5555))
s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, struct.pack('4s4s', socket.inet_aton(group), socket.inet_aton(local)))
s.settimeout(10)
print('joined', flush=True)
data, sender = s.recvfrom(100)
print(data.decode(), sender[0], flush=True)
";

/// Sends a datagram to a group every 100 ms for 3 s, out of the host's address.
const SENDER: &str = "
import socket, sys, time
group, local = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(local))
for _ in range(30):
    s.sendto(b'hello', (group, 5555))
    time.sleep(0.1)
";

#[test]
fn a_switch_joins_every_host_on_one_bridge_and_carries_a_group_to_its_member() {
    require_lab!();
    let lab = builder().switch().hosts(3).rate(200_000_000).build().unwrap();
    let sw = format!("nicbench-{}-sw", lab.name());
    // The bridge as the kernel has it: snooping and a querier on, every
    // host's port on it.
    let bridge = tool("ip", &["-d", "-n", &sw, "link", "show", "br0"]);
    for flag in ["mcast_snooping 1", "mcast_querier 1", "mcast_stats_enabled 1"] {
        assert!(bridge.contains(flag), "{flag}: {bridge}");
    }
    let ports = tool("ip", &["-o", "-n", &sw, "link", "show", "master", "br0"]);
    assert_eq!(ports.lines().count(), 3, "{ports}");
    // One subnet: c reaches a without a gateway.
    assert!(!tool("ip", &["-n", &format!("nicbench-{}-c", lab.name()), "route"]).contains(" via "));
    // Any two hosts, through the switch; the port toward c is shaped.
    let run = tcp_json(&lab, "a", &["c", "-n", "2M"]);
    assert_eq!(run["sum"]["receiver"]["bytes"], 2 * 1024 * 1024, "{}", run["sum"]);
    let shaper = tool("tc", &["-n", &sw, "qdisc", "show", "dev", "eth2"]);
    assert!(shaper.contains("tbf") && shaper.contains("rate 200Mbit"), "{shaper}");
    // A group: b joins, the switch snoops b's report, a sends and b hears a.
    let mut member = lab
        .command("b", "python3")
        .args(["-c", MEMBER, "239.1.2.3", "10.200.0.2"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut said = std::io::BufReader::new(member.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut said, &mut line).unwrap();
    assert_eq!(line.trim(), "joined", "{line}");
    let until = Instant::now() + Duration::from_secs(10);
    let mut mdb = String::new();
    while Instant::now() < until && !mdb.contains("port eth1 grp 239.1.2.3") {
        std::thread::sleep(Duration::from_millis(50));
        mdb = tool("bridge", &["-n", &sw, "mdb", "show"]);
    }
    assert!(
        mdb.contains("port eth1 grp 239.1.2.3"),
        "b's port is the group's: {mdb}"
    );
    run_in(&lab, "a", "python3", &["-c", SENDER, "239.1.2.3", "10.200.0.1"]);
    let mut heard = String::new();
    std::io::Read::read_to_string(&mut said, &mut heard).unwrap();
    let status = member.wait().unwrap();
    assert!(status.success(), "the member heard nothing: {heard}");
    assert_eq!(heard.trim(), "hello 10.200.0.1");
    let status = ok(&["lab", "status", lab.name()]);
    assert!(
        status.contains("3 hosts and a switch") && status.contains("sw eth2 (port of br0 10.200.0.254/24)"),
        "{status}"
    );
}
