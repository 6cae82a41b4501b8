//! What a new user trips over (issue 20): runs cut short, `--json`
//! failures, defaults, and the words of error messages.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{nicbench, stderr, AgentProcess, BIN};

/// Starts `nicbench tcp` against `port` with `--json-stream -i 0.1` for a
/// long test, and returns it once its first interval line is out (the test
/// is running then).
#[allow(clippy::zombie_processes)] // the caller waits for it in `finish`
fn start_streaming_client(port: u16) -> (Child, std::io::Lines<BufReader<std::process::ChildStdout>>) {
    let mut child = Command::new(BIN)
        .args(["tcp", "127.0.0.1", "-p", &port.to_string(), "-t", "30", "-i", "0.1"])
        .arg("--json-stream")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the client");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "no interval line from the client");
        let line = lines
            .next()
            .expect("the client exited before its first interval")
            .unwrap();
        if line.contains("\"event\":\"interval\"") {
            return (child, lines);
        }
    }
}

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill has no memory preconditions; pid is our own child.
    assert_eq!(
        unsafe { libc::kill(pid as libc::pid_t, signal) },
        0,
        "kill({pid}, {signal})"
    );
}

/// Reads the rest of the client's output: the result document and the
/// exit status with stderr.
fn finish(
    mut child: Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
) -> (serde_json::Value, i32, String) {
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    let status = child.wait().unwrap();
    let last = rest.last().unwrap_or_else(|| panic!("no result line; stderr: {err}"));
    let event: serde_json::Value = serde_json::from_str(last).unwrap();
    assert_eq!(event["event"], "result", "{last}");
    (event["result"].clone(), status.code().expect("exited, not killed"), err)
}

fn assert_cut_short(run: &serde_json::Value, by: &str, reason: &str) {
    assert_eq!(run["interrupted"], true, "run not marked: {run}");
    let i = &run["trials"][0]["interruption"];
    assert_eq!(i["by"], by, "{i}");
    assert!(i["reason"].as_str().unwrap().contains(reason), "{i}");
    let elapsed = i["elapsed_seconds"].as_f64().unwrap();
    assert!(elapsed > 0.0 && elapsed < 30.0, "{i}");
    assert_eq!(i["planned_seconds"], 30.0, "{i}");
    // The reported trial at the top is the cut-short one.
    assert_eq!(run["interruption"], *i);
}

#[test]
fn a_client_sigint_marks_the_run_interrupted_and_exits_6() {
    let agent = AgentProcess::start(&[]);
    let (child, lines) = start_streaming_client(agent.port);
    signal(child.id(), libc::SIGINT);
    let (run, code, err) = finish(child, lines);
    assert_cut_short(&run, "client", "SIGINT");
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("cut short by the client"), "{err}");
}

#[test]
fn an_agent_sigterm_marks_the_run_interrupted_and_exits_6() {
    let agent = AgentProcess::start(&[]);
    let (child, lines) = start_streaming_client(agent.port);
    signal(agent.child.id(), libc::SIGTERM);
    let (run, code, err) = finish(child, lines);
    assert_cut_short(&run, "agent", "SIGTERM");
    assert_eq!(code, 6, "{err}");
    assert!(err.contains("cut short by the agent"), "{err}");
}

#[test]
fn a_cut_short_run_says_so_in_one_text_line() {
    let agent = AgentProcess::start(&[]);
    let mut child = Command::new(BIN)
        .args(["tcp", "127.0.0.1", "-p", &agent.port_arg(), "-t", "30", "-i", "0.1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The first live interval line: the test runs.
    let first = lines.next().expect("an interval line").unwrap();
    assert!(first.contains("bit/s"), "{first}");
    signal(child.id(), libc::SIGINT);
    let text: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(6));
    let marked: Vec<&String> = text.iter().filter(|l| l.starts_with("INTERRUPTED:")).collect();
    assert_eq!(marked.len(), 1, "{text:#?}");
    assert!(
        marked[0].contains("of 30.00 s") && marked[0].contains("SIGINT"),
        "{}",
        marked[0]
    );
}

#[test]
fn a_complete_run_is_not_marked() {
    let agent = AgentProcess::start(&[]);
    let out = nicbench(&["tcp", "127.0.0.1", "-p", &agent.port_arg(), "-t", "0.3", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(run.get("interrupted").is_none() && run.get("interruption").is_none());
}
