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
    let missing = nicbench(&["watch", "--iface", "nicbench-no-such-if", "--no-save", "--", "true"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("no such interface"), "{}", stderr(&missing));
}

#[test]
fn lab_watch_around_a_plain_socket_copy_agrees_with_the_bytes_moved() {
    require_lab!();
    if std::process::Command::new("python3").arg("-V").output().is_err() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI needs python3 for the receiver"
        );
        eprintln!("SKIPPED: python3 is needed for the receiving end");
        return;
    }
    let lab = lab_builder().mtu(9000).no_agents().build().unwrap();
    let b = lab.addr("b").to_string();
    let receiver = "import socket\n\
s = socket.socket(); s.bind(('0.0.0.0', 9000)); s.listen(1)\n\
print('listening', flush=True)\n\
c, _ = s.accept(); n = 0\n\
while True:\n    d = c.recv(1 << 20)\n    if not d: break\n    n += len(d)\n\
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
    let copy = format!("head -c 200000000 /dev/zero > /dev/tcp/{b}/9000");
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
