//! `nicbench tcp` against a real agent on loopback.

use super::common::*;
use serde_json::Value;

fn bytes(v: &Value, path: &[&str]) -> u64 {
    let mut v = v;
    for p in path {
        v = &v[*p];
    }
    v.as_u64().unwrap_or_else(|| panic!("{path:?} is not a number"))
}

/// Every stream's sender and receiver byte counts agree exactly (omit off).
fn assert_ends_agree(run: &Value) {
    for s in run["streams"].as_array().unwrap() {
        assert_eq!(
            s["sender"]["bytes"], s["receiver"]["bytes"],
            "stream {}",
            s["stream_id"]
        );
        assert!(s["sender"]["bytes"].as_u64().unwrap() > 0);
    }
    assert_eq!(
        bytes(run, &["sum", "sender", "bytes"]),
        bytes(run, &["sum", "receiver", "bytes"])
    );
}

#[test]
fn forward_single_stream_counts_agree_and_cpu_is_reported() {
    let agent = AgentProcess::start(&[]);
    let started = std::time::Instant::now();
    let run = agent.run_json("tcp", &["-t", "1"]);
    let client_lifetime = started.elapsed();
    assert_eq!(run["schema"], "nicbench.run/1");
    assert_eq!(run["workload"], "tcp");
    assert_eq!(run["streams"].as_array().unwrap().len(), 1);
    assert_eq!(run["streams"][0]["flow"], "client_to_agent");
    assert_ends_agree(&run);
    assert!(run["sum"]["receiver"]["bits_per_second"].as_f64().unwrap() > 1e6);
    for host in ["client", "agent"] {
        let cpu = &run["cpu"][host];
        assert!(cpu["logical_cpus"].as_u64().unwrap() >= 1);
        assert!(cpu["service_demand_us_per_kb"].as_f64().unwrap() > 0.0, "{host}");
        assert!(
            cpu["process"]["system_seconds"].as_f64().unwrap() + cpu["process"]["user_seconds"].as_f64().unwrap() > 0.0
        );
    }
    let info = &run["streams"][0]["sender"]["tcp_info"];
    assert!(info["send_mss_bytes"].as_u64().unwrap() > 0);
    // What held the sender back (Linux 4.10+): parts of the time with data
    // in flight, which the socket cannot have had for longer than the client
    // that owned it lived (plus a jiffy, the kernel's unit); a delivery rate
    // once anything was acknowledged.
    let us = |k: &str| info[k].as_u64().unwrap_or_else(|| panic!("tcp_info.{k}: {info}"));
    let busy = us("busy_us");
    let lived_us = client_lifetime.as_micros() as u64 + 10_000;
    assert!(busy > 0 && busy <= lived_us, "{info}, client lived {client_lifetime:?}");
    assert!(us("rwnd_limited_us") + us("sndbuf_limited_us") <= busy, "{info}");
    assert!(info["delivery_rate_bits_per_second"].as_f64().unwrap() > 0.0, "{info}");
    assert!(!run["streams"][0]["sender"]["intervals"].as_array().unwrap().is_empty());
    assert_eq!(run["trials"].as_array().unwrap().len(), 1);
}

#[test]
fn reverse_multi_stream_is_sent_by_the_agent() {
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("tcp", &["-t", "1", "-P", "3", "-R"]);
    let streams = run["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 3);
    assert!(streams.iter().all(|s| s["flow"] == "agent_to_client"));
    assert_ends_agree(&run);
    assert!(run["sum"]["agent_to_client"].is_object());
    assert!(run["sum"].get("client_to_agent").is_none());
}

#[test]
fn bidir_runs_both_directions_at_once() {
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("tcp", &["-t", "1", "-P", "2", "--bidir"]);
    assert_eq!(run["streams"].as_array().unwrap().len(), 4);
    assert_ends_agree(&run);
    assert!(bytes(&run, &["sum", "client_to_agent", "receiver", "bytes"]) > 0);
    assert!(bytes(&run, &["sum", "agent_to_client", "receiver", "bytes"]) > 0);
}

#[test]
fn byte_count_mode_moves_exactly_that_many_bytes() {
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("tcp", &["-n", "10000001", "-P", "3"]);
    assert_eq!(bytes(&run, &["sum", "receiver", "bytes"]), 10_000_001);
    assert_ends_agree(&run);
}

#[test]
fn socket_options_are_applied_and_granted_sizes_reported() {
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json(
        "tcp",
        &[
            "-t",
            "1",
            "-l",
            "8K",
            "-w",
            "256K",
            "--mss",
            "1400",
            "--nodelay",
            "--congestion",
            "reno",
        ],
    );
    let sender = &run["streams"][0]["sender"];
    // Linux doubles the requested size for its bookkeeping.
    assert_eq!(sender["socket"]["send_buffer_bytes"], 2 * 256 * 1024);
    assert_eq!(
        run["streams"][0]["receiver"]["socket"]["receive_buffer_bytes"],
        2 * 256 * 1024
    );
    assert_eq!(sender["tcp_info"]["congestion_control"], "reno");
    assert!(sender["tcp_info"]["send_mss_bytes"].as_u64().unwrap() <= 1400);
    assert_eq!(run["spec"]["message_bytes"], 8192);
    assert_eq!(run["spec"]["params"]["nodelay"], true);
}

#[test]
fn zerocopy_and_discard_move_the_same_bytes_and_are_recorded() {
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("tcp", &["-t", "1", "--zerocopy", "--discard"]);
    assert_ends_agree(&run);
    // What the fast paths did, as the stream ends recorded it: bytes went
    // out through sendfile(2), and not one byte was copied into the
    // receiver's buffer (MSG_TRUNC discarded them in the kernel).
    let (sender, receiver) = (&run["streams"][0]["sender"], &run["streams"][0]["receiver"]);
    assert!(sender["tcp"]["sendfile_calls"].as_u64().unwrap() > 0, "{sender}");
    assert_eq!(receiver["tcp"]["receive_buffer_untouched"], true, "{receiver}");
    assert!(receiver["bytes"].as_u64().unwrap() > 0);
    // Without the options the plain paths ran: no such record.
    let plain = agent.run_json("tcp", &["-t", "0.3"]);
    assert!(plain["streams"][0]["sender"].get("tcp").is_none(), "{plain}");
    assert!(plain["streams"][0]["receiver"].get("tcp").is_none(), "{plain}");
}

#[test]
fn each_send_and_receive_mode_is_recorded_in_the_spec_and_the_store() {
    let agent = AgentProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let db = db.to_str().unwrap();
    let schema = crate::result_schema::schema();
    let cases: &[(&[&str], bool, Option<&str>, bool)] = &[
        (&[], false, None, false),
        (&["-Z"], true, Some("sendfile"), false),
        (&["--zerocopy=sendfile"], true, Some("sendfile"), false),
        (&["--zerocopy=msg"], true, Some("msg"), false),
        (&["--discard"], false, None, true),
        (&["--zerocopy=msg", "--discard", "-R"], true, Some("msg"), true),
    ];
    let port = agent.port_arg();
    for (args, zerocopy, method, discard) in cases {
        let mut argv = vec!["tcp", "127.0.0.1", "-p", &port, "-t", "0.3", "--db", db, "--json"];
        argv.extend_from_slice(args);
        let out = nicbench(&argv);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let run: Value = serde_json::from_slice(&out.stdout).unwrap();
        crate::result_schema::assert_valid(&schema, &run, &format!("tcp {args:?}"));
        let params = &run["spec"]["params"];
        assert_eq!(params["zerocopy"], *zerocopy, "{args:?}: {params}");
        assert_eq!(params["zerocopy_method"].as_str(), *method, "{args:?}: {params}");
        assert_eq!(params["discard"], *discard, "{args:?}: {params}");
        // The store gives back the document as printed, spec included.
        let err = stderr(&out);
        let id = err
            .lines()
            .find_map(|l| l.strip_prefix("saved as run "))
            .and_then(|l| l.split(' ').next())
            .unwrap_or_else(|| panic!("no 'saved as run' line: {err}"));
        let shown = nicbench_json(&["show", id, "--db", db, "--json"]);
        assert_eq!(shown["spec"], run["spec"], "{args:?}");
    }
}

#[test]
fn msg_zerocopy_collects_every_completion_and_says_loopback_copies() {
    let agent = AgentProcess::start(&[]);
    for direction in [&[][..], &["-R"][..]] {
        let mut argv = vec!["-t", "0.5", "--zerocopy=msg"];
        argv.extend_from_slice(direction);
        let run = agent.run_json("tcp", &argv);
        assert_ends_agree(&run);
        let z = &run["streams"][0]["sender"]["tcp"]["msg_zerocopy"];
        let sends = z["sends"].as_u64().unwrap();
        assert!(sends > 0, "{z}");
        // Every send's completion was read off the error queue: no page
        // left pinned when the stream ended.
        assert_eq!(z["completions"].as_u64(), Some(sends), "{z}");
        assert!(run["streams"][0]["sender"]["error"].is_null(), "{run}");
        // On loopback the kernel copies on delivery, and the result says so.
        assert_eq!(z["copied"].as_u64(), Some(sends), "{z}");
        assert!(z["note"].as_str().unwrap().contains("saved no copy"), "{z}");
    }
    let port = agent.port_arg();
    let text = nicbench(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "0.3",
        "--zerocopy=msg",
        "--no-save",
    ]);
    assert!(text.status.success(), "{}", stderr(&text));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("MSG_ZEROCOPY stream 1:") && l.contains("saved no copy")),
        "{text}"
    );
}

#[test]
fn a_bad_zero_copy_method_is_refused_with_the_choices() {
    for (bad, says) in [
        ("--zerocopy=foo", "invalid value 'foo'"),
        ("--zerocopy=", "a value is required"),
    ] {
        let out = nicbench(&["tcp", "127.0.0.1", "-t", "1", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = stderr(&out);
        assert!(
            err.contains(says) && err.contains("possible values: sendfile, msg"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn omit_excludes_the_warm_up() {
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("tcp", &["-t", "1", "-O", "0.5"]);
    let receiver = &run["streams"][0]["receiver"];
    let omitted = receiver["omitted_bytes"].as_u64().unwrap();
    assert!(omitted > 0);
    // The warm-up's bytes are in the samples marked `omitted`, not in the
    // measured bytes: every byte is counted once, in one of the two.
    let bytes = receiver["bytes"].as_u64().unwrap();
    let sampled: u64 = receiver["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(sampled, bytes + omitted, "{receiver}");
    let seconds = receiver["seconds"].as_f64().unwrap();
    assert_eq!(
        receiver["bits_per_second"].as_f64().unwrap(),
        bytes as f64 * 8.0 / seconds,
        "the rate is the measured bytes over the measured time"
    );
}

#[test]
fn json_stream_prints_intervals_then_the_result() {
    let agent = AgentProcess::start(&[]);
    let out = nicbench(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &agent.port_arg(),
        "-t",
        "1",
        "-i",
        "0.25",
        "--json-stream",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert!(lines.iter().filter(|l| l["event"] == "interval").count() >= 3);
    assert_eq!(lines.last().unwrap()["event"], "result");
    assert!(
        lines.last().unwrap()["result"]["sum"]["receiver"]["bits_per_second"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[test]
fn text_summary_has_units_on_every_figure() {
    let agent = AgentProcess::start(&[]);
    let out = nicbench(&["tcp", "127.0.0.1", "-p", &agent.port_arg(), "-t", "1", "-P", "2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("[  1]") && text.contains("[  2]") && text.contains("[SUM]"),
        "{text}"
    );
    assert!(text.contains("bit/s"), "{text}");
    assert!(text.contains("us/KB"), "{text}");
    assert!(text.contains("CPU client") && text.contains("CPU agent"), "{text}");
}

#[test]
fn connection_refused_says_how_to_start_an_agent() {
    // Bind and drop a listener to find a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = nicbench(&["tcp", "127.0.0.1", "-p", &port.to_string(), "-t", "1"]);
    assert_eq!(out.status.code(), Some(3));
    let err = stderr(&out);
    assert!(
        err.contains("connection refused") && err.contains("nicbench serve"),
        "{err}"
    );
}

#[test]
fn bad_option_values_are_refused_before_connecting() {
    for (args, needle) in [
        (vec!["-P", "0"], "parallel"),
        (vec!["-l", "0"], "from 1 B to 64 MiB"),
        (vec!["-t", "-3"], "duration"),
        (vec!["-t", "0"], "from 50 ms to 24 h"),
        (vec!["-w", "lots"], "size"),
        (vec!["--mss", "20"], "--mss"),
        (vec!["--congestion", "warp-drive"], "available"),
    ] {
        let mut argv = vec!["tcp", "127.0.0.1", "-p", "1"];
        argv.extend(&args);
        let out = nicbench(&argv);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn busy_agent_says_for_how_long_and_serves_again_afterwards() {
    let agent = AgentProcess::start(&[]);
    let port = agent.port_arg();
    // A test that runs until it is stopped, so the second client cannot
    // come after its end however slow the machine is.
    let long = std::process::Command::new(BIN)
        .args(["tcp", "127.0.0.1", "-p", &port, "-t", "60", "-l", "1K", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    agent.wait_for_log("running tcp test");
    let out = nicbench(&["tcp", "127.0.0.1", "-p", &port, "-t", "1"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("busy"), "{}", stderr(&out));
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(long.id() as i32, libc::SIGINT) };
    let long = wait_output(long, COMMAND_LIMIT, "the long test");
    assert_eq!(long.status.code(), Some(6), "{}", stderr(&long));
    let again = nicbench(&["tcp", "127.0.0.1", "-p", &port, "-t", "0.5"]);
    assert!(again.status.success(), "{}", stderr(&again));
}

/// Regression (seen in `demo` under load): the agent freed a test's slot
/// only after telling the client it was done, so a client that started its
/// next test at once could be told "busy" by its own finished test.
#[test]
fn back_to_back_tests_are_never_told_busy() {
    let agent = AgentProcess::start(&[]);
    let port = agent.port_arg();
    for round in 0..10 {
        let out = nicbench(&["tcp", "127.0.0.1", "-p", &port, "-n", "64K", "-l", "8K"]);
        assert!(out.status.success(), "round {round}: {}", stderr(&out));
    }
}

#[test]
fn client_that_vanishes_mid_test_leaves_the_agent_ready() {
    let agent = AgentProcess::start(&[]);
    let port = agent.port_arg();
    for direction in [None, Some("-R")] {
        let mark = agent.log_mark();
        let mut args = vec!["tcp", "127.0.0.1", "-p", port.as_str(), "-t", "30"];
        args.extend(direction);
        let mut client = std::process::Command::new(BIN)
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        agent.wait_for_log_after(mark, "running tcp test");
        client.kill().unwrap();
        client.wait().unwrap();
        // The agent notices and serves the next client.
        agent.wait_for_log_after(mark, "test aborted");
        let out = nicbench(&["tcp", "127.0.0.1", "-p", &port, "-t", "0.5"]);
        assert!(
            out.status.success(),
            "after a vanished {direction:?} client: {}",
            stderr(&out)
        );
    }
}

#[test]
fn agent_that_dies_mid_test_gives_one_clear_error() {
    let mut agent = AgentProcess::start(&[]);
    let port = agent.port_arg();
    let client = std::thread::spawn(move || nicbench(&["tcp", "127.0.0.1", "-p", &port, "-t", "30", "-R"]));
    agent.wait_for_log("running tcp test");
    agent.child.kill().unwrap();
    let out = client.join().unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("agent"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn affinity_pins_threads_and_impossible_cores_are_refused() {
    let agent = AgentProcess::start(&[]);
    let port = agent.port_arg();
    // The client's thread on the first core, the agent's on the last: each
    // stream thread reads its CPU set back after pinning and reports it.
    let last = std::thread::available_parallelism().unwrap().get() - 1;
    let last_arg = last.to_string();
    let run = nicbench_json(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "0.5",
        "-A",
        "0",
        "--remote-affinity",
        &last_arg,
        "--json",
    ]);
    let stream = &run["streams"][0];
    for (end, core) in [("sender", 0), ("receiver", last)] {
        let affinity = &stream[end]["affinity"];
        assert_eq!(affinity["asked_core"], core, "{end}: {affinity}");
        assert_eq!(affinity["cpus"], serde_json::json!([core]), "{end}: {affinity}");
        assert!(affinity.get("error").is_none(), "{end}: {affinity}");
    }
    // Unpinned threads record nothing.
    let plain = agent.run_json("tcp", &["-t", "0.3"]);
    assert!(plain["streams"][0]["sender"].get("affinity").is_none(), "{plain}");
    let out = nicbench(&["tcp", "127.0.0.1", "-p", &port, "-t", "0.5", "-A", "4096"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("-A/--affinity"), "{}", stderr(&out));
    let out = nicbench(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "0.5",
        "--remote-affinity",
        "4096",
    ]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("--remote-affinity"), "{}", stderr(&out));
}

#[test]
fn ipv6_loopback_and_bind_address_work() {
    require!(crate::common::ipv6_loopback());
    let agent = AgentProcess::start_with(std::process::Command::new(BIN), "::1", &[]);
    let run = nicbench_json(&[
        "tcp",
        "::1",
        "-6",
        "-p",
        &agent.port_arg(),
        "-t",
        "0.5",
        "-B",
        "::1",
        "--json",
    ]);
    assert!(
        run["agent"]["address"].as_str().unwrap().starts_with("[::1]"),
        "{}",
        run["agent"]["address"]
    );
    assert!(run["client"]["address"].as_str().unwrap().starts_with("[::1]"));
    assert!(run["sum"]["receiver"]["bytes"].as_u64().unwrap() > 0);
    // -4 against an IPv6 literal is an option error.
    let out = nicbench(&["tcp", "::1", "-4", "-p", &agent.port_arg(), "-t", "0.5"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("-4/--ipv4"), "{}", stderr(&out));
}

#[test]
fn bind_accepts_an_interface_name() {
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("tcp", &["-t", "0.3", "-B", "lo", "-4"]);
    assert!(run["client"]["address"].as_str().unwrap().starts_with("127.0.0.1:"));
    let out = nicbench(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &agent.port_arg(),
        "-t",
        "0.3",
        "-B",
        "nosuchif0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no interface"), "{}", stderr(&out));
}

#[test]
fn another_service_on_the_port_is_named_as_such() {
    // A server that accepts and answers garbage, like an HTTP server would.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            use std::io::Read;
            use std::io::Write;
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
            // Keeps the connection open until the client closes it.
            let _ = s.set_read_timeout(Some(COMMAND_LIMIT));
            let _ = s.read_to_end(&mut Vec::new());
        }
    });
    let out = nicbench(&["tcp", "127.0.0.1", "-p", &port.to_string(), "-t", "1"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("that port is not a nicbench agent"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_silent_port_is_named_at_the_hello_deadline_not_the_test_deadline() {
    // A listener that accepts and never says a word (a service waiting for
    // its own protocol's request): the client gives up at the hello
    // deadline and says so, with the port's words, not a test timeout.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            use std::io::Read;
            let _ = s.set_read_timeout(Some(COMMAND_LIMIT));
            let _ = s.read_to_end(&mut Vec::new());
        }
    });
    let out = nicbench(&["tcp", "127.0.0.1", "-p", &port.to_string(), "-t", "1"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let deadline = nicbench::session::HELLO_TIMEOUT.as_secs();
    let words = format!("that port is not a nicbench agent (it stayed silent: no nicbench hello within {deadline} s");
    assert!(stderr(&out).contains(&words), "{}", stderr(&out));
}

#[test]
fn ctrl_c_stops_the_test_and_still_reports_both_ends() {
    let agent = AgentProcess::start(&[]);
    let port = agent.port_arg();
    for direction in [None, Some("-R")] {
        let mark = agent.log_mark();
        let mut args = vec!["tcp", "127.0.0.1", "-p", &port, "-t", "30", "--json"];
        args.extend(direction);
        let child = std::process::Command::new(BIN)
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The client handles SIGINT from before it connects; the agent
        // says when the streams run.
        agent.wait_for_log_after(mark, "running tcp test");
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let out = wait_output(child, COMMAND_LIMIT, "the interrupted client");
        // Cut short: the result is printed, marked, and the exit code says so.
        assert_eq!(out.status.code(), Some(6), "{direction:?}: {}", stderr(&out));
        let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(run["interrupted"], true);
        let seconds = run["sum"]["receiver"]["seconds"].as_f64().unwrap();
        let elapsed = run["interruption"]["elapsed_seconds"].as_f64().unwrap();
        let planned = run["interruption"]["planned_seconds"].as_f64().unwrap();
        assert!(elapsed < planned, "ran its full {planned} s: {elapsed} s");
        assert!(seconds <= elapsed, "{seconds} s measured in {elapsed} s");
        assert!(run["interruption"]["by"] == "client", "{}", run["interruption"]);
        assert_eq!(run["sum"]["sender"]["bytes"], run["sum"]["receiver"]["bytes"]);
    }
}

/// Issue 43: `tcp -b 1G` was refused with no hint. `-b` paces each
/// stream's sender (SO_MAX_PACING_RATE), in both directions; the rate the
/// socket held is recorded as the offer, an agent's --max-rate admits the
/// paced test, and the verdict judges it against its offer.
#[test]
fn a_paced_tcp_test_holds_each_sender_to_its_rate_in_both_directions() {
    let agent = AgentProcess::start(&["--max-rate", "400M"]);
    for direction in [&[][..], &["-R"][..]] {
        let mut args = vec!["-t", "2", "-P", "2", "-b", "100M"];
        args.extend_from_slice(direction);
        let run = agent.run_json("tcp", &args);
        assert_eq!(
            run["spec"]["params"]["rate_bits_per_second"], 100_000_000,
            "{}",
            run["spec"]
        );
        let mut received = 0.0;
        for s in run["streams"].as_array().unwrap() {
            let sender = &s["sender"];
            assert_eq!(sender["tcp"]["paced_bits_per_second"], 100_000_000, "{sender}");
            received += s["receiver"]["bits_per_second"].as_f64().unwrap();
        }
        // Pacing is a ceiling on what crosses (the first window leaves
        // unpaced): whatever the machine's load, the receivers cannot get
        // far above 2 x 100M. (A sender's own count also holds what still
        // sat in its send buffer at the end, so it may read higher.)
        assert!(received > 0.0 && received < 250e6, "{direction:?}: {received} bit/s");
        let summary = run["verdict"]["summary"].as_str().unwrap();
        assert_ne!(run["verdict"]["kind"], "cpu_bound", "{summary}");
    }
    // Unpaced, the agent's --max-rate refuses it, and says why.
    let port = agent.port_arg();
    let out = nicbench(&["tcp", "127.0.0.1", "-p", &port, "-t", "0.3"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--max-rate"), "{}", stderr(&out));
    // Zero is no rate.
    let out = nicbench(&["tcp", "127.0.0.1", "-p", &port, "-b", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// Issue 43: with `-i 1` the interval lines carried no retransmits or
/// congestion window (iperf3's do). A TCP sender's intervals carry them,
/// and the retransmits of its intervals add up to its TCP_INFO total.
#[test]
fn a_tcp_senders_intervals_carry_retransmits_cwnd_and_rtt() {
    let agent = AgentProcess::start(&[]);
    for direction in [&[][..], &["-R"][..]] {
        let mut args = vec!["-t", "1", "-i", "0.25"];
        args.extend_from_slice(direction);
        let run = agent.run_json("tcp", &args);
        let stream = &run["streams"][0];
        let intervals = stream["sender"]["intervals"].as_array().unwrap();
        assert!(intervals.len() >= 4, "{intervals:?}");
        let mut retransmits = 0;
        for i in intervals {
            retransmits += i["retransmits"].as_u64().unwrap_or_else(|| panic!("{i}"));
            assert!(i["congestion_window_bytes"].as_u64().unwrap() > 0, "{i}");
            assert!(i["rtt_us"].as_u64().is_some(), "{i}");
        }
        // Each counted once: the last interval closes on the stream's own
        // TCP_INFO (a final one is left out only when no byte followed).
        let total = stream["sender"]["tcp_info"]["retransmits"].as_u64().unwrap();
        assert!(
            retransmits <= total,
            "{direction:?}: {retransmits} in intervals, {total} in all"
        );
        // The receiver has no window of its own to show.
        for i in stream["receiver"]["intervals"].as_array().unwrap() {
            assert!(i.get("congestion_window_bytes").is_none(), "{i}");
        }
    }
    // The live lines under their header, the client sending.
    let port = agent.port_arg();
    let out = nicbench(&["tcp", "127.0.0.1", "-p", &port, "-t", "1", "-i", "0.5"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let header = text.lines().next().unwrap();
    assert!(
        header.contains("retr") && header.contains("cwnd") && header.contains("rtt"),
        "{text}"
    );
    let line = text.lines().nth(1).unwrap();
    assert!(line.ends_with("client sent") && line.contains(" us "), "{text}");
}
