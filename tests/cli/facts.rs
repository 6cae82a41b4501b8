//! `nicbench host`, `nicbench linerate`, and the facts, counters, line rate
//! and verdict every throughput result carries, on loopback.

use super::common::*;
use serde_json::Value;

fn interface(facts: &Value) -> &Value {
    let nic = &facts["interface"];
    assert!(nic.is_object(), "no interface in {facts}");
    nic
}

#[test]
fn host_json_lists_facts_and_every_interface() {
    let facts = nicbench_json(&["host", "--json"]);
    assert!(!facts["hostname"].as_str().unwrap().is_empty());
    assert!(!facts["kernel"].as_str().unwrap().is_empty());
    assert!(!facts["os"].as_str().unwrap().is_empty());
    assert!(facts["logical_cpus"].as_u64().unwrap() >= 1);
    assert!(facts["memory_bytes"].as_u64().unwrap() > 1 << 20);
    let interfaces = facts["interfaces"].as_array().unwrap();
    let lo = interfaces.iter().find(|n| n["name"] == "lo").expect("lo is listed");
    // Loopback reports what it has and null for the rest.
    assert_eq!(lo["kind"], "loopback");
    assert!(lo["mtu_bytes"].as_u64().unwrap() > 0);
    assert!(lo["link_speed_bits_per_second"].is_null());
    assert!(lo["pcie"].is_null());
    assert!(lo["offloads"]["gso"].is_boolean());
}

#[test]
fn host_text_says_n_a_for_what_loopback_lacks() {
    let out = nicbench(&["host", "--interface", "lo"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("interface     lo (loopback)"), "{text}");
    assert!(text.contains("  pcie        n/a"), "{text}");
    assert!(text.contains("kernel"), "{text}");
}

#[test]
fn host_peer_selects_the_interface_of_the_route() {
    let facts = nicbench_json(&["host", "--peer", "127.0.0.1", "--json"]);
    let nic = interface(&facts);
    assert_eq!(nic["kind"], "loopback");
    assert_eq!(nic["address"], "127.0.0.1");
    assert!(facts.get("interfaces").is_none());
}

#[test]
fn host_rejects_an_unknown_interface_by_name() {
    let out = nicbench(&["host", "--interface", "nicbench-none0"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("--interface nicbench-none0") && err.contains("lo"),
        "{err}"
    );
}

#[test]
fn host_remote_asks_the_agent_and_the_agent_keeps_serving() {
    let agent = AgentProcess::start(&["--once"]);
    let facts = nicbench_json(&["host", "--remote", "127.0.0.1", "-p", &agent.port_arg(), "--json"]);
    assert!(!facts["hostname"].as_str().unwrap().is_empty());
    let nic = interface(&facts);
    assert_eq!(nic["name"], "lo");
    assert_eq!(nic["address"], "127.0.0.1");
    // A facts request is not a test: a --once agent still serves one.
    let run = agent.run_json("tcp", &["-t", "0.5"]);
    assert_eq!(run["workload"], "tcp");
}

#[test]
fn host_remote_without_an_agent_says_so() {
    let agent = AgentProcess::start(&[]);
    let port = agent.port_arg();
    drop(agent);
    let out = nicbench(&["host", "--remote", "127.0.0.1", "-p", &port]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no nicbench agent listens there"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn tcp_result_carries_both_ends_facts_counters_and_a_verdict() {
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("tcp", &["-t", "1"]);
    for end in ["client", "agent"] {
        let nic = interface(&run[end]["facts"]);
        assert_eq!(nic["name"], "lo", "{end}");
        let counters = &run["counters"][end];
        assert_eq!(counters["interface"], "lo", "{end}");
        // Loopback counts every packet it carries.
        assert!(counters["nic"]["rx_packets"].as_u64().unwrap() > 0, "{end}");
        assert!(counters["tcp"]["out_segments"].as_u64().unwrap() > 0, "{end}");
        assert!(counters["interrupts"].is_null(), "loopback has no interrupts");
    }
    // Loopback has no link speed: no line rate, but a verdict.
    assert!(run.get("line_rate").is_none());
    let verdict = &run["verdict"];
    assert!(!verdict["summary"].as_str().unwrap().is_empty());
    assert!(verdict["kind"].is_string());
    assert_eq!(run["trials"][0]["verdict"], *verdict);
}

/// A `clock_offset` from exchanges on one kernel: 8 before and 8 after the
/// trial, and the true offset (0: one clock) within the bound.
fn holds_zero(clock: &Value) {
    assert_eq!(clock["exchanges"], 16, "{clock}");
    assert!(clock.get("problem").is_none(), "{clock}");
    let offset = clock["agent_minus_client_us"].as_f64().unwrap();
    let bound = clock["bound_us"].as_f64().unwrap();
    assert!(offset.abs() <= bound, "0 outside {offset} +/- {bound} us: {clock}");
}

#[test]
fn every_trial_bounds_the_agents_clock_and_one_kernels_bound_holds_zero() {
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("tcp", &["-t", "0.5"]);
    holds_zero(&run["clock_offset"]);
    assert_eq!(run["trials"][0]["clock_offset"], run["clock_offset"]);
    // The agent keeps serving after the exchanges that follow a test.
    let again = agent.run_json("rr", &["-t", "0.5"]);
    holds_zero(&again["clock_offset"]);
}

#[test]
fn link_speed_option_gives_percent_of_theoretical_goodput() {
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("tcp", &["-t", "1", "--link-speed", "100G"]);
    let share = &run["line_rate"];
    assert_eq!(share["link_bits_per_second"], 100_000_000_000u64);
    assert_eq!(share["link_speed_source"], "option");
    let measured = run["sum"]["client_to_agent"]["receiver"]["bits_per_second"]
        .as_f64()
        .unwrap();
    let theory = share["theoretical_goodput_bits_per_second"].as_f64().unwrap();
    let percent = share["percent_of_theoretical_goodput"].as_f64().unwrap();
    assert!(theory > 90e9 && theory < 100e9, "{theory}");
    assert!((percent - measured * 100.0 / theory).abs() < 1e-6);
}

#[test]
fn text_summary_ends_with_facts_line_rate_and_verdict() {
    let agent = AgentProcess::start(&[]);
    let out = nicbench(&["tcp", "127.0.0.1", "-p", &agent.port_arg(), "-t", "0.5"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Facts client"), "{text}");
    assert!(text.contains("Facts agent"), "{text}");
    assert!(text.contains("Counters client lo:"), "{text}");
    // One kernel, one clock: no offset to state.
    assert!(!text.contains("Clocks "), "{text}");
    assert!(
        text.contains("Line rate: n/a (link speed unknown; give --link-speed)"),
        "{text}"
    );
    // The report ends with the verdict; the line naming the saved run follows.
    let mut last = text.lines().rev();
    assert!(last.next().unwrap().starts_with("saved as run "), "{text}");
    assert!(last.next().unwrap().starts_with("Verdict: "), "{text}");
}

#[test]
fn bad_link_speed_is_refused_with_the_option_name() {
    let out = nicbench(&["tcp", "127.0.0.1", "--link-speed", "fast"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--link-speed"), "{}", stderr(&out));
}

#[test]
fn linerate_default_table_has_the_textbook_figures() {
    let out = nicbench(&["linerate"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    // 10 Mbit/s minimum frames, 1 Gbit/s full frames.
    assert!(text.contains("14880.95"), "{text}");
    assert!(text.contains("81274.38"), "{text}");
    // Five speeds times two frame sizes, plus two header lines.
    assert_eq!(text.lines().count(), 12, "{text}");
}

#[test]
fn linerate_csv_and_json_agree() {
    let args = ["linerate", "-s", "1G,10G", "--mtu", "1500,9000", "--stack", "tcp4-ts"];
    let out = nicbench(&[&args[..], &["--csv"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let csv = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 5, "{csv}");
    assert!(lines[0].starts_with("link_bits_per_second,stack,"));
    assert!(
        lines[1].starts_with("1000000000,tcp4-ts,false,mtu,1500,1518,1538,1448,"),
        "{csv}"
    );
    let json = nicbench_json(&[&args[..], &["--json"]].concat());
    let rows = json.as_array().unwrap();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[3]["link_bits_per_second"], 10e9);
    assert_eq!(rows[3]["payload_bytes"], 8948);
    assert_eq!(rows[3]["size"]["given"], "mtu");
}

#[test]
fn linerate_bad_inputs_name_the_option() {
    let cases: [(&[&str], &str); 4] = [
        (&["linerate", "-f", "60"], "--frame 60"),
        (&["linerate", "--mtu", "20", "--stack", "tcp4"], "--mtu 20"),
        (&["linerate", "-s", "0"], "--speed"),
        (&["linerate", "-f", "64", "--mtu", "1500"], "--mtu"),
    ];
    for (args, needle) in cases {
        let out = nicbench(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
}

/// Labs: real veth links between network namespaces (skipped, saying why,
/// where labs cannot be built).
mod lab {
    use std::process::Stdio;

    use nicbench::lab::Lab;
    use serde_json::Value;

    use super::super::common::*;

    fn tcp_json(lab: &Lab, from: &str, args: &[&str]) -> Value {
        let out = lab
            .command(from, BIN)
            .arg("tcp")
            .args(args)
            .arg("--json")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "tcp {args:?} in {from}: {}", stderr(&out));
        serde_json::from_slice(&out.stdout).expect("JSON result")
    }

    #[test]
    fn cpu_limited_sender_is_named_by_the_verdict() {
        require_lab!();
        let _turn = limited_lab_turn();
        // Host a (client and sender) gets 5% of one core; b is free.
        let lab = lab_builder().cpu_limit("a", 5.0).build().unwrap();
        let run = tcp_json(&lab, "a", &["b", "-t", "3"]);
        let verdict = &run["verdict"];
        eprintln!("verdict: {verdict}");
        assert!(
            ["cpu_starved", "cgroup_throttled"].contains(&verdict["kind"].as_str().unwrap()),
            "{verdict}"
        );
        // The limited sender is always named as a cause.
        let evidence = verdict["evidence"].as_array().unwrap();
        assert!(
            evidence.iter().any(|e| e["side"] == "sender"
                && e["role"] == "cause"
                && ["cpu_starved", "cgroup_throttled"].contains(&e["kind"].as_str().unwrap())),
            "{verdict}"
        );
        let scheduling = &run["counters"]["client"]["scheduling"];
        assert!(scheduling["wait_percent"].as_f64().unwrap() >= 50.0, "{scheduling}");
        // The free receiver is named too only when its own threads really
        // waited for a CPU most of the time (a machine busier than its
        // cores: the verdict follows what was measured on that side).
        match verdict["side"].as_str().unwrap() {
            "sender" => assert!(
                verdict["summary"].as_str().unwrap().starts_with("sender CPU-starved"),
                "{verdict}"
            ),
            "both" => {
                let theirs = &run["counters"]["agent"];
                let waited = ["scheduling", "packet_work"]
                    .iter()
                    .filter_map(|part| theirs[part]["wait_percent"].as_f64())
                    .fold(0.0, f64::max);
                assert!(waited >= 50.0, "{verdict}\n{theirs}");
            }
            other => panic!("the verdict's side is {other}: {verdict}"),
        }
    }

    #[test]
    fn tbf_limited_link_is_named_by_the_verdict() {
        require_lab!();
        let lab = lab_builder().rate(100_000_000).build().unwrap();
        let run = tcp_json(&lab, "a", &["b", "-t", "3", "-O", "1"]);
        let verdict = &run["verdict"];
        eprintln!("verdict: {verdict}");
        assert_eq!(verdict["kind"], "link_bound", "{verdict}");
        assert!(verdict["summary"].as_str().unwrap().starts_with("link-bound: "));
        // The link speed came from the tbf qdisc the lab put on the veth.
        let nic = &run["client"]["facts"]["interface"];
        assert_eq!(nic["driver"], "veth", "{nic}");
        assert_eq!(nic["qdisc"], "tbf", "{nic}");
        assert_eq!(nic["qdisc_rate_bits_per_second"], 100_000_000u64, "{nic}");
        let share = &run["line_rate"];
        assert_eq!(share["link_speed_source"], "qdisc");
        assert_eq!(share["link_bits_per_second"], 100_000_000u64);
        // Counters of the veth saw the traffic on both ends.
        for end in ["client", "agent"] {
            let nic = &run["counters"][end]["nic"];
            assert!(nic["rx_packets"].as_u64().unwrap() > 1000, "{end}: {nic}");
        }
        // The lab's hosts share one clock: the estimate through the veths
        // and the router must hold an offset of 0.
        super::holds_zero(&run["clock_offset"]);
    }

    /// A UDP flood into a socket that never reads, on b's loopback, for
    /// `seconds`: b's namespace-wide UDP RcvbufErrors climb while a test
    /// runs between a and b. Killed when dropped.
    struct Flood(std::process::Child);

    impl Flood {
        fn start(lab: &Lab, host: &str, seconds: f64) -> Flood {
            const SCRIPT: &str = "import socket, sys, time\n\
                r = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
                r.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)\n\
                r.bind(('127.0.0.1', 0))\n\
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
                end, payload, to = time.time() + float(sys.argv[1]), b'x' * 1000, r.getsockname()\n\
                print('flooding', flush=True)\n\
                while time.time() < end:\n\
                \x20   for _ in range(50):\n\
                \x20       s.sendto(payload, to)\n\
                \x20   time.sleep(0.001)\n";
            let mut child = lab
                .command(host, "python3")
                .args(["-c", SCRIPT, &seconds.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("python3 in the lab (installed by .ci/run)");
            let mut line = String::new();
            std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.as_mut().unwrap()), &mut line)
                .unwrap();
            assert_eq!(line.trim(), "flooding");
            Flood(child)
        }
    }

    impl Drop for Flood {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn someone_elses_udp_drops_are_not_the_verdict_of_a_test() {
        require_lab!();
        if let Err(why) = tool("python3", &["-c", "pass"], "apt-get install python3") {
            skip_or_fail(&why);
            return;
        }
        let lab = lab_builder().build().unwrap();
        let _flood = Flood::start(&lab, "b", 30.0);
        // A TCP test from a to b while b's namespace drops someone else's
        // datagrams: the host's UDP counters moved, and are shown, but a
        // TCP test is never given a UDP cause.
        let run = tcp_json(&lab, "a", &["b", "-t", "2"]);
        let udp = &run["counters"]["agent"]["udp"];
        assert!(udp["receive_buffer_errors"].as_u64().unwrap() >= 1000, "{udp}");
        let verdict = &run["verdict"];
        eprintln!("tcp: verdict {verdict}, agent's UDP counters {udp}");
        assert_ne!(verdict["kind"], "socket_buffer_drops", "{verdict}");
        // A slow UDP test meanwhile: its own counts say what it lost; the
        // namespace's drops were not its datagrams (more arrived than it
        // sent), so they are not its verdict either.
        let out = lab
            .command("a", BIN)
            .args(["udp", "b", "-t", "2", "-b", "20M", "--json"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "udp: {}", stderr(&out));
        let run: Value = serde_json::from_slice(&out.stdout).unwrap();
        let udp = &run["counters"]["agent"]["udp"];
        assert!(udp["receive_buffer_errors"].as_u64().unwrap() >= 1000, "{udp}");
        let lost = run["sum"]["udp"]["loss_percent"].as_f64().unwrap();
        let verdict = &run["verdict"];
        eprintln!("udp: verdict {verdict}, {lost}% lost, agent's UDP counters {udp}");
        if lost < 1.0 {
            assert!(
                !["socket_buffer_drops", "udp_loss", "path_loss"].contains(&verdict["kind"].as_str().unwrap()),
                "{verdict} with {lost}% lost by the test's own count"
            );
        }
    }
}
