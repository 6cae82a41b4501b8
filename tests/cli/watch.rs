//! `nicbench watch -- COMMAND`: the command's exit code passes through, its
//! process tree's CPU is counted, the run is saved as workload `watch`, and
//! in the lab the bytes it reports for a plain socket copy agree with the
//! bytes the receiver counted.

use std::process::Stdio;

use serde_json::Value;

use super::common::*;

#[test]
fn the_exit_code_passes_through_and_the_run_is_saved_with_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let db = db.to_str().unwrap();
    let out = nicbench(&[
        "watch",
        "--iface",
        "lo",
        "--db",
        db,
        "--json",
        "--keep-failed",
        "--",
        "sh",
        "-c",
        "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; exit 7",
    ]);
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    let run: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(run["workload"], "watch");
    assert_eq!(run["spec"]["params"]["exit_code"], 7);
    let tree = run["spec"]["params"]["process_tree_cpu_seconds"].as_f64().unwrap();
    assert!(tree > 0.0, "the shell's loop used CPU: {tree}");
    let runs = nicbench(&["runs", "--db", db, "--workload", "watch"]);
    assert!(runs.status.success(), "{}", stderr(&runs));
    let listed = String::from_utf8_lossy(&runs.stdout);
    assert!(listed.contains("watch"), "{listed}");
    // Without --keep-failed a failed command's run is not saved, and the
    // words say why; the exit status and the printed result stay.
    let failed = nicbench(&[
        "watch", "--iface", "lo", "--db", db, "--json", "--", "sh", "-c", "exit 1",
    ]);
    assert_eq!(failed.status.code(), Some(1), "{}", stderr(&failed));
    assert_eq!(
        serde_json::from_slice::<Value>(&failed.stdout).expect("JSON")["spec"]["params"]["exit_code"],
        1
    );
    let words = stderr(&failed);
    assert!(
        words.contains("the run was not saved") && words.contains("(exit status 1)") && words.contains("--keep-failed"),
        "{words}"
    );
    let exported = nicbench(&["export", "--db", db, "--workload", "watch", "--format", "json"]);
    assert!(exported.status.success(), "{}", stderr(&exported));
    let exported: Value = serde_json::from_slice(&exported.stdout).expect("export JSON");
    let codes: Vec<&Value> = exported
        .as_array()
        .expect("a list of runs")
        .iter()
        .map(|r| r.pointer("/document/spec/params/exit_code").unwrap_or(&Value::Null))
        .collect();
    assert_eq!(codes, [&Value::from(7)], "only the kept run: {exported}");
    let missing = nicbench(&["watch", "--iface", "nicbench-no-such-if", "--no-save", "--", "true"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("no such interface"), "{}", stderr(&missing));
}

#[test]
fn lab_watch_around_a_plain_socket_copy_agrees_with_the_bytes_moved() {
    require_lab!();
    require!(tool("python3", &["-V"], "apt-get install python3 (the receiving end)"));
    let lab = lab_builder().mtu(9000).no_agents().build().unwrap();
    let b = lab.addr("b").to_string();
    // The receiver answers once it has every byte, and the copy waits for
    // that answer: the command ends only after the last segment crossed
    // eth0 (bytes still in a's send buffer when it ended would not be
    // counted, and a loaded machine leaves some there).
    let receiver = "import socket\n\
s = socket.socket(); s.bind(('0.0.0.0', 9000)); s.listen(1)\n\
print('listening', flush=True)\n\
c, _ = s.accept(); n = 0; told = False\n\
while True:\n    d = c.recv(1 << 20)\n    if not d: break\n    n += len(d)\n    \
if n >= 200000000 and not told:\n        c.sendall(b'done\\n'); told = True\n\
print('received', n, flush=True)\n";
    let mut server = lab
        .command("b", "python3")
        .args(["-c", receiver])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = Lines::collect(server.stdout.take().unwrap());
    lines.wait_for(0, "listening", LOG_LIMIT).unwrap();
    let copy = format!(
        "exec 3<>/dev/tcp/{b}/9000; head -c 200000000 /dev/zero >&3; read -r answer <&3; [ \"$answer\" = done ]"
    );
    let mut command = lab.command("a", BIN);
    clean_env(&mut command)
        .args([
            "watch",
            "--iface",
            "eth0",
            "--no-save",
            "--json",
            "--",
            "bash",
            "-c",
            &copy,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = wait_output(command.spawn().unwrap(), COMMAND_LIMIT, "nicbench watch");
    assert!(out.status.success(), "{}", stderr(&out));
    let line = lines.wait_for(0, "received", LOG_LIMIT).unwrap();
    let _ = server.wait();
    let moved: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sent = run["sum"]["client_to_agent"]["sender"]["bytes"].as_f64().unwrap();
    eprintln!("watch counted {sent} B sent on eth0, the receiver got {moved} B");
    assert_eq!(moved, 200_000_000.0);
    // The interface counts frames: headers add 0.7% at MTU 9000.
    let ratio = sent / moved;
    assert!((1.0..=1.02).contains(&ratio), "{ratio}");
    let seconds = run["sum"]["client_to_agent"]["sender"]["seconds"].as_f64().unwrap();
    let rate = run["sum"]["client_to_agent"]["sender"]["bits_per_second"]
        .as_f64()
        .unwrap();
    assert!((rate - sent * 8.0 / seconds).abs() < 1.0);
}

/// `watch --peer`: the agent on the receiving lab host samples its side
/// over the same interval; its interface's received bytes agree with what
/// this host's interface transmitted, and its CPU (every core, softirq) and
/// counters are in the report, named as the peer.
#[test]
fn lab_watch_with_a_peer_has_the_peers_cpu_and_counters_agreeing_with_ours() {
    require_lab!();
    require!(tool("python3", &["-V"], "apt-get install python3 (the receiving end)"));
    let lab = lab_builder().mtu(9000).build().unwrap();
    let b = lab.addr("b").to_string();
    let peer = format!("{b}:{}", lab.agent_port());
    // Each copy waits for the receiver's answer that every byte arrived
    // (see the test above).
    let receiver = "import socket\n\
s = socket.socket(); s.bind(('0.0.0.0', 9000)); s.listen(1)\n\
print('listening', flush=True)\n\
while True:\n    c, _ = s.accept(); n = 0; told = False\n    while True:\n        d = c.recv(1 << 20)\n        \
if not d: break\n        n += len(d)\n        if n >= 200000000 and not told:\n            \
c.sendall(b'done\\n'); told = True\n    c.close(); print('received', flush=True)\n";
    let mut server = lab
        .command("b", "python3")
        .args(["-c", receiver])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = Lines::collect(server.stdout.take().unwrap());
    lines.wait_for(0, "listening", LOG_LIMIT).unwrap();
    let copy = format!(
        "exec 3<>/dev/tcp/{b}/9000; head -c 200000000 /dev/zero >&3; read -r answer <&3; [ \"$answer\" = done ]"
    );
    let watch = |json: bool| {
        let mut command = lab.command("a", BIN);
        clean_env(&mut command)
            .args(["watch", "--peer", &peer, "--no-save"])
            .args(if json { &["--json"][..] } else { &[][..] })
            .args(["--", "bash", "-c", &copy])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let out = wait_output(command.spawn().unwrap(), COMMAND_LIMIT, "nicbench watch --peer");
        assert!(out.status.success(), "{}", stderr(&out));
        out
    };
    let out = watch(true);
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Without --iface, the interface toward the peer.
    assert_eq!(run["spec"]["params"]["interface"], "eth0");
    assert_eq!(run["spec"]["params"]["peer_sampled"], true);
    let sent = run["sum"]["client_to_agent"]["sender"]["bytes"].as_f64().unwrap();
    let peer_received = run["counters"]["agent"]["nic"]["rx_bytes"].as_f64().unwrap();
    eprintln!("this host transmitted {sent} B on eth0, the peer's interface received {peer_received} B");
    // The command may end with the last bytes still in its socket's send
    // buffer: the interface then counted a little less than the payload.
    assert!(sent >= 190_000_000.0, "{sent}");
    let ratio = peer_received / sent;
    assert!((0.98..=1.02).contains(&ratio), "{ratio}");
    assert_eq!(
        run["sum"]["client_to_agent"]["receiver"]["bytes"].as_f64(),
        Some(peer_received)
    );
    let cpu = &run["cpu"]["agent"];
    assert!(cpu["logical_cpus"].as_u64().unwrap() > 0, "{cpu}");
    assert_eq!(
        cpu["per_core"].as_array().unwrap().len() as u64,
        cpu["logical_cpus"].as_u64().unwrap()
    );
    assert!(cpu["softirq_percent"].is_number() && cpu["utilization_percent"].as_f64().unwrap() > 0.0);
    let peer_name = run["agent"]["facts"]["hostname"].as_str().unwrap().to_string();
    assert!(!peer_name.is_empty());
    assert_eq!(run["counters"]["agent"]["interface"], "eth0");

    // The words: this host and the peer by name, directions by the interface.
    let out = watch(false);
    let _ = server.kill();
    let _ = server.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("client->agent") && !text.contains("agent->client"),
        "{text}"
    );
    assert!(text.contains(&format!("<-> peer {peer_name}")), "{text}");
    assert!(text.contains(&format!("CPU peer {peer_name}: ")), "{text}");
    assert!(text.contains("[SUM] transmitted"), "{text}");
    assert!(text.contains(&format!("peer {peer}: eth0 received")), "{text}");
}

/// A `watch --peer` that cannot sample the peer fails before the command
/// runs: nothing is run unmeasured. Each error says what to do.
#[test]
fn watch_with_a_peer_that_cannot_sample_runs_nothing_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let marker = marker.to_str().unwrap();
    let watch = |peer: &str, extra: &[&str]| {
        let mut argv = vec!["watch", "--iface", "lo", "--no-save", "--peer", peer];
        argv.extend_from_slice(extra);
        argv.extend_from_slice(&["--", "touch", marker]);
        nicbench(&argv)
    };
    // Down: nothing listens.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let out = watch(&format!("127.0.0.1:{port}"), &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no nicbench agent listens there"),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("the command was not run"), "{}", stderr(&out));
    // Not an agent: something else answers.
    let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = http.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        use std::io::Write;
        let (mut s, _) = http.accept().unwrap();
        let _ = s.write_all(b"HTTP/1.0 400 Bad Request\r\n\r\n");
    });
    let out = watch(&format!("127.0.0.1:{port}"), &[]);
    server.join().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("not a nicbench agent"), "{}", stderr(&out));
    // An agent that wants a key the client does not give.
    let key = dir.path().join("key");
    std::fs::write(&key, "a sufficiently long pre-shared key for the watch test\n").unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let key = key.to_str().unwrap();
    let agent = AgentProcess::start(&["--psk-file", key]);
    let out = watch(&format!("127.0.0.1:{}", agent.port), &[]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("--psk-file"), "{}", stderr(&out));
    assert!(
        !std::path::Path::new(marker).exists(),
        "the command ran without its peer"
    );
    // With the key it runs, and the peer's side is in the result.
    let out = watch(&format!("127.0.0.1:{}", agent.port), &["--psk-file", key, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::path::Path::new(marker).exists());
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(run["cpu"]["agent"]["logical_cpus"].as_u64().unwrap() > 0);
    assert_eq!(run["counters"]["agent"]["interface"], "lo");
}

/// A client that starts a watch and vanishes frees the agent at once; one
/// that holds a watch makes others hear `busy` (and their command is not
/// run); the agent keeps serving.
#[test]
fn the_agent_keeps_serving_after_a_watch_client_disappears() {
    use nicbench::protocol::Message;
    let mut agent = super::rawclient::LoggedAgent::start(&[]);
    let mut raw = super::rawclient::Raw::connect(agent.port);
    raw.hello().send(&Message::WatchStart);
    match raw.recv() {
        Some(Message::WatchStarted {
            agent: facts,
            max_seconds,
        }) => {
            assert!(max_seconds > 0.0);
            assert_eq!(facts.interface.map(|i| i.name), Some("lo".to_string()));
        }
        other => panic!("expected watch_started, got {other:?}"),
    }
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let out = nicbench(&[
        "watch",
        "--iface",
        "lo",
        "--no-save",
        "--peer",
        &format!("127.0.0.1:{}", agent.port),
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("busy"), "{}", stderr(&out));
    assert!(!marker.exists());
    let mark = agent.log_mark();
    drop(raw);
    agent.wait_for_log_after(mark, "left during its watch");
    agent.assert_serves_normally();
    // Bad input in the middle of a watch: refused, never a panic.
    let mut raw = super::rawclient::Raw::connect(agent.port);
    raw.hello().send(&Message::WatchStart);
    assert!(matches!(raw.recv(), Some(Message::WatchStarted { .. })));
    raw.frame(b"{\"type\": \"watch_stop\", \"extra\": [1,2");
    raw.expect_error_and_close("malformed");
    agent.assert_serves_normally();
}
