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
    // The column header, then the first live interval line: the test runs.
    let header = lines.next().expect("the interval header").unwrap();
    assert!(header.starts_with("[ ID]"), "{header}");
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

/// Runs the client with `args` and returns (exit code, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let out = nicbench(args);
    let code = out.status.code().expect("exited");
    (code, String::from_utf8_lossy(&out.stdout).into_owned(), stderr(&out))
}

/// A port nothing listens on (bound once, then closed).
fn closed_port(ip: &str) -> String {
    let listener = std::net::TcpListener::bind((ip, 0)).unwrap();
    listener.local_addr().unwrap().port().to_string()
}

#[test]
fn json_failures_print_one_json_error_document() {
    let port = closed_port("127.0.0.1");
    let (code, out, _) = run(&["tcp", "127.0.0.1", "-p", &port, "--json"]);
    assert_eq!(code, 3);
    let doc: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON document on stdout");
    assert_eq!(doc["schema"], "nicbench.error/1");
    assert_eq!(doc["error"]["kind"], "agent_unreachable");
    assert_eq!(doc["error"]["exit_code"], 3);
    assert!(
        doc["error"]["message"].as_str().unwrap().contains("connection refused"),
        "{doc}"
    );
    // Option errors too, and --json-stream.
    let (code, out, _) = run(&["udp", "127.0.0.1", "-P", "0", "--json-stream"]);
    assert_eq!(code, 2);
    let doc: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON document on stdout");
    assert_eq!(doc["error"]["kind"], "invalid_options");
    // --help is no failure.
    let (code, out, _) = run(&["tcp", "--help", "--json"]);
    assert_eq!(code, 0);
    assert!(!out.contains("nicbench.error"));
}

#[test]
fn ranges_are_said_in_words() {
    for args in [
        &["tcp", "127.0.0.1", "-P", "0"][..],
        &["serve", "--max-queue", "2000"][..],
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, 2, "{err}");
        assert!(!err.contains("..="), "{err}");
    }
    let (_, _, err) = run(&["tcp", "127.0.0.1", "-P", "0"]);
    assert!(err.contains("1 to 128"), "{err}");
    let (_, _, err) = run(&["tcp", "127.0.0.1", "-l", "0"]);
    assert!(!err.contains("..="), "{err}");
}

#[test]
fn host_port_and_bracketed_ipv6_are_understood() {
    require!(crate::common::ipv6_loopback());
    let agent = AgentProcess::start(&[]);
    let at = format!("127.0.0.1:{}", agent.port);
    let out = nicbench(&["tcp", &at, "-t", "0.2", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v6 = AgentProcess::start_with(Command::new(BIN), "::1", &[]);
    let at = format!("[::1]:{}", v6.port);
    let out = nicbench(&["tcp", &at, "-t", "0.2", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["agent"]["address"], at.as_str());
    // Two different ports is an option error.
    let (code, _, err) = self::run(&["tcp", &at, "-p", "1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("give the port once"), "{err}");
}

#[test]
fn ipv6_addresses_in_errors_have_brackets() {
    require!(crate::common::ipv6_loopback());
    let port = closed_port("::1");
    let (code, _, err) = run(&["tcp", "::1", "-p", &port]);
    assert_eq!(code, 3, "{err}");
    let first = err.lines().next().unwrap();
    assert!(first.contains(&format!("[::1]:{port}")), "{first}");
    assert!(!err.contains(&format!(" ::1:{port}")), "{err}");
}

#[test]
fn a_family_option_against_the_address_is_an_option_error() {
    let (code, _, err) = run(&["tcp", "-6", "127.0.0.1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("-6/--ipv6") && !err.contains("cannot resolve"), "{err}");
}

#[test]
fn a_service_that_is_no_agent_is_named_so() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let _ = std::io::Write::write_all(&mut conn, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        // Hold the connection until the client closes it.
        let _ = std::io::Read::read_to_end(&mut conn, &mut Vec::new());
    });
    let (code, _, err) = run(&["tcp", "127.0.0.1", "-p", &port]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("that port is not a nicbench agent (it speaks something else") && err.contains("\"HTTP\""),
        "{err}"
    );
    server.join().unwrap();
}

#[test]
fn each_cause_is_printed_once() {
    require!(crate::common::ipv6_loopback());
    // Address in use: the agent tries the dual-stack address and says so.
    let taken = std::net::TcpListener::bind("[::]:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let (code, _, err) = run(&["serve", "-p", &port]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(err.matches("Address already in use").count(), 1, "{err}");
    assert!(
        err.contains(&format!("[::]:{port}")) && !err.contains("0.0.0.0"),
        "{err}"
    );
    // The agent lost mid-test.
    let mut agent = AgentProcess::start(&[]);
    let (child, lines) = start_streaming_client(agent.port);
    agent.child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    drop(lines);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert_eq!(err.matches("lost the agent mid-test").count(), 1, "{err}");
}

#[test]
fn the_busy_message_mentions_wait() {
    let agent = AgentProcess::start(&[]);
    let (mut child, lines) = start_streaming_client(agent.port);
    let (code, _, err) = run(&["tcp", "127.0.0.1", "-p", &agent.port_arg(), "-t", "1"]);
    signal(child.id(), libc::SIGINT);
    drop(lines);
    let _ = child.wait();
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("busy") && err.contains("--wait"), "{err}");
}

#[test]
fn mistyped_subcommands_get_a_suggestion() {
    for (args, meant) in [
        (&["tpc", "127.0.0.1"][..], "'tcp'"),
        (&["serv"][..], "'serve'"),
        (&["lab", "upp", "x"][..], "'up'"),
    ] {
        let (code, _, err) = run(args);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("tip: a similar subcommand exists") && err.contains(meant),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn pick_needs_repeat_and_the_median_is_the_default() {
    let (code, _, err) = run(&["tcp", "127.0.0.1", "--pick", "best"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--repeat"), "{err}");
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("tcp", &["-t", "0.2", "--repeat", "2"]);
    assert_eq!(run["repetition"]["policy"]["pick"], "median", "{}", run["repetition"]);
    let (_, help, _) = self::run(&["tcp", "--help"]);
    assert!(help.contains("biases A/B comparisons"), "{help}");
}

#[test]
fn a_lab_mtu_below_1280_is_not_taken_silently() {
    require_lab!();
    let name = format!("nu{}", std::process::id() % 100000);
    let (code, _, err) = run(&["lab", "up", &name, "--mtu", "100", "--no-agents"]);
    let (down, _, _) = run(&["lab", "down", &name]);
    assert_eq!((code, down), (0, 0), "{err}");
    assert!(err.contains("--mtu 100: below 1280 B"), "{err}");
}

#[test]
fn lab_exec_clients_default_to_the_labs_agent_port() {
    require_lab!();
    let name = format!("np{}", std::process::id() % 100000);
    let (code, _, err) = run(&["lab", "up", &name, "--agent-port", "46010"]);
    let result = (code == 0).then(|| {
        let out = nicbench(&[
            "lab", "exec", &name, "a", "--", "nicbench", "tcp", "b", "-t", "0.2", "--json",
        ]);
        let err = stderr(&out);
        (
            out.status.code(),
            serde_json::from_slice::<serde_json::Value>(&out.stdout).ok(),
            err,
        )
    });
    let (down, _, _) = run(&["lab", "down", &name]);
    assert_eq!((code, down), (0, 0), "{err}");
    let (status, run, err) = result.unwrap();
    assert_eq!(status, Some(0), "{err}");
    let address = run.unwrap()["agent"]["address"].as_str().unwrap().to_string();
    assert!(address.ends_with(":46010"), "{address}");
}

#[test]
fn an_unshaped_lab_link_makes_no_line_rate_claim_and_names_its_hosts() {
    require_lab!();
    let name = format!("nv{}", std::process::id() % 100000);
    let (code, _, err) = run(&["lab", "up", &name]);
    let outputs = (code == 0).then(|| {
        let json = nicbench(&[
            "lab", "exec", &name, "a", "--", "nicbench", "tcp", "b", "-t", "0.5", "--json",
        ]);
        let text = nicbench(&["lab", "exec", &name, "a", "--", "nicbench", "tcp", "b", "-t", "0.5"]);
        (json, text)
    });
    let (down, _, _) = run(&["lab", "down", &name]);
    assert_eq!((code, down), (0, 0), "{err}");
    let (json, text) = outputs.unwrap();
    assert!(json.status.success(), "{}", stderr(&json));
    let run: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(run["agent"]["facts"]["interface"]["driver"], "veth");
    assert!(run.get("line_rate").is_none(), "{}", run["line_rate"]);
    let verdict = run["verdict"]["summary"].as_str().unwrap();
    assert!(
        !verdict.contains("line-rate model") && !verdict.contains("line rate"),
        "{verdict}"
    );
    assert_eq!(run["client"]["facts"]["hostname"], format!("{name}-a"));
    assert_eq!(run["agent"]["facts"]["hostname"], format!("{name}-b"));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("virtual veth link") && text.contains("nominal"), "{text}");
    assert!(text.contains("share one kernel"), "{text}");
    assert!(text.starts_with(&format!("nicbench tcp: client {name}-a ")), "{text}");
}

/// Regression: `lab down NAME` as a user without root printed its error
/// twice (once by the command, once by main).
#[test]
fn lab_down_without_root_says_its_error_once() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        crate::common::skip_or_fail("needs root, to run the command as another user");
        return;
    }
    require!(crate::common::tool(
        "setpriv",
        &["--version"],
        "apt-get install util-linux"
    ));
    // Nobody runs a copy every user may reach, wherever the checkout is.
    let shared = crate::common::SharedDir::new();
    let binary = shared.binary();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&binary)
        .args(["lab", "down", "nb-no-such-lab"])
        .output()
        .unwrap();
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert_eq!(text.matches("nicbench: error").count(), 1, "{text}");
    assert_eq!(text.matches("missing root privileges").count(), 1, "{text}");
}

/// Runs nicbench with its stdout a pipe whose reading end is already
/// closed, as `nicbench ... | head` leaves it once head has its lines.
fn run_into_a_closed_pipe(args: &[&str], db: &std::path::Path) -> std::process::Output {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    // SAFETY: pipe writes two fds into the array; each is owned below.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe(2)");
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Command::new(BIN)
        .args(args)
        .env("NICBENCH_DB", db)
        .stdin(Stdio::null())
        .stdout(Stdio::from(write))
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

/// `nicbench runs | head` and the like: the reader leaving early ends the
/// output quietly, with status 0, never a panic or an error message.
#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    let out = Command::new(BIN)
        .args([
            "import",
            &format!("{fixtures}/run-tcp.json"),
            &format!("{fixtures}/netpipe-3.7.2-loopback.np.out"),
        ])
        .env("NICBENCH_DB", &db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let commands: &[&[&str]] = &[
        &["runs"],
        &["show", "1"],
        &["export"],
        &["export", "--format", "csv"],
        &["compare"],
        &["diff", "1", "2"],
        &["linerate", "--speed", "10G"],
        &["lab", "status"],
        &["man"],
    ];
    for args in commands {
        let out = run_into_a_closed_pipe(args, &db);
        let text = stderr(&out);
        assert!(!text.contains("panicked"), "nicbench {}: {text}", args.join(" "));
        assert!(!text.contains("error"), "nicbench {}: {text}", args.join(" "));
        assert_eq!(out.status.code(), Some(0), "nicbench {}: {text}", args.join(" "));
    }
}

/// Regression (issue 72, item 9): `-p 0` was taken, a connect to port 0
/// attempted, and the error suggested `nicbench serve --port 0`. A client's
/// port 0 is an option error now, before anything connects.
#[test]
fn a_client_port_of_zero_is_refused_as_an_option_error() {
    for args in [
        &["tcp", "127.0.0.1", "-p", "0", "-t", "0.2"][..],
        &["rr", "127.0.0.1", "--port", "0", "-t", "0.2"],
        &["host", "--remote", "127.0.0.1", "-p", "0"],
    ] {
        let out = crate::common::nicbench(args);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains("0 is not a port to connect to"), "{args:?}: {text}");
        assert!(!text.contains("serve --port 0"), "{args:?}: {text}");
    }
}
