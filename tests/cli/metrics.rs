//! `nicbench serve --metrics-listen`: the agent's counters scraped over
//! HTTP after real tests, hostile HTTP clients, and the `/probe` endpoint
//! running a test toward a second agent.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use crate::common::AgentProcess;

/// Starts an agent with a metrics server on a kernel-chosen loopback port
/// and returns it with that port's address (from its log line).
fn agent_with_metrics(extra: &[&str]) -> (AgentProcess, SocketAddr) {
    let mut args = vec!["--metrics-listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let agent = AgentProcess::start(&args);
    let logs = agent.wait_for_log("serving metrics on http://");
    let addr = logs
        .split("serving metrics on http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap()
        .parse()
        .unwrap();
    (agent, addr)
}

/// Sends `request` as is and returns everything the server answered.
fn http(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn scrape(addr: SocketAddr) -> String {
    let answer = http(addr, b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    answer.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// The value of a sample line `name{labels} value` (labels as printed).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn serve_counts_a_served_test_and_its_scrape_passes_promtool() {
    let (agent, metrics) = agent_with_metrics(&[]);
    let before = scrape(metrics);
    assert_eq!(
        value(&before, "nicbench_agent_tests_served_total{workload=\"tcp\"}"),
        None
    );
    assert!(
        value(&before, "process_resident_memory_bytes").unwrap() > 0.0,
        "{before}"
    );
    agent.run_json("tcp", &["-t", "0.3", "--no-save"]);
    let after = scrape(metrics);
    assert_eq!(
        value(&after, "nicbench_agent_tests_served_total{workload=\"tcp\"}"),
        Some(1.0),
        "{after}"
    );
    assert_eq!(value(&after, "nicbench_agent_connections_total"), Some(1.0));
    assert!(value(&after, "process_threads").unwrap() >= 2.0);
    assert!(value(&after, "process_open_fds").unwrap() >= 3.0);
    assert!(after.contains("nicbench_run_info{version=\""), "{after}");
    let om = http(
        metrics,
        b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text;version=1.0.0\r\n\r\n",
    );
    assert!(
        om.contains("Content-Type: application/openmetrics-text") && om.ends_with("# EOF\n"),
        "{om}"
    );
    // promtool lints the real scrape: last, as require! ends the test.
    require!(crate::common::tool(
        "promtool",
        &["--version"],
        "apt-get install prometheus"
    ));
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(after.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool: {said}\n{after}"
    );
}

#[test]
fn hostile_http_clients_are_closed_and_the_agent_still_serves() {
    let (mut agent, metrics) = agent_with_metrics(&[]);
    // A header far past the 8 KiB limit: refused (or cut) without reading it all.
    let mut huge = b"GET /metrics HTTP/1.1\r\nX-Pad: ".to_vec();
    huge.extend(std::iter::repeat(b'a').take(1 << 20));
    let answer = http(metrics, &huge);
    assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 431"), "{answer}");
    // Garbage and binary noise.
    let noise = http(metrics, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n");
    assert!(noise.starts_with("HTTP/1.1 400"), "{noise:?}");
    let brew = http(metrics, b"BREW /pot HTCPCP/1.0\r\n\r\n");
    assert!(brew.starts_with("HTTP/1.1 400"), "{brew:?}");
    let delete = http(metrics, b"DELETE /metrics HTTP/1.1\r\n\r\n");
    assert!(delete.starts_with("HTTP/1.1 405"), "{delete:?}");
    // A slowloris: a few bytes, then silence; the server cuts it off at its
    // deadline and says so, while another client is served meanwhile.
    let mut slow = TcpStream::connect(metrics).unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nX-A: ").unwrap();
    assert!(value(&scrape(metrics), "nicbench_agent_connections_total").is_some());
    let mut cut = String::new();
    let _ = slow.read_to_string(&mut cut);
    assert!(cut.starts_with("HTTP/1.1 408"), "{cut}");
    // The same agent still runs tests and counts them.
    agent.run_json("tcp", &["-t", "0.2", "--no-save"]);
    let text = scrape(metrics);
    assert_eq!(
        value(&text, "nicbench_agent_tests_served_total{workload=\"tcp\"}"),
        Some(1.0),
        "{text}"
    );
    assert!(agent.child.try_wait().unwrap().is_none(), "the agent is still running");
}

#[test]
fn a_client_that_breaks_the_control_protocol_is_counted_as_closed() {
    let (agent, metrics) = agent_with_metrics(&[]);
    let mark = agent.log_mark();
    let mut s = TcpStream::connect(("127.0.0.1", agent.port)).unwrap();
    // A frame length far past the agent's limit.
    s.write_all(&[0x7f, 0xff, 0xff, 0xff, b'x']).unwrap();
    let mut sink = Vec::new();
    let _ = s.read_to_end(&mut sink);
    agent.wait_for_log_after(mark, "refused");
    let text = scrape(metrics);
    assert_eq!(
        value(&text, "nicbench_agent_connections_closed_total{reason=\"oversized\"}"),
        Some(1.0),
        "{text}"
    );
}

#[test]
fn the_probe_runs_a_test_toward_another_agent_and_needs_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "probe-token-1\n").unwrap();
    let token_arg = token.display().to_string();
    let psk = dir.path().join("psk");
    std::fs::write(&psk, "the probe test's key, sixteen bytes or more\n").unwrap();
    let psk = psk.display().to_string();
    let (prober, metrics) = agent_with_metrics(&[
        "--psk-file",
        &psk,
        "--allow-peer-tests",
        "--metrics-probe",
        "--metrics-token-file",
        &token_arg,
    ]);
    let target = AgentProcess::start(&["--psk-file", &psk]);
    let query = format!(
        "GET /probe?target=127.0.0.1:{}&workload=tcp&duration=0.3 HTTP/1.1\r\n",
        target.port
    );
    let denied = http(metrics, format!("{query}\r\n").as_bytes());
    assert!(denied.starts_with("HTTP/1.1 401"), "{denied}");
    let answer = http(
        metrics,
        format!("{query}Authorization: Bearer probe-token-1\r\n\r\n").as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(value(&answer, "probe_success"), Some(1.0), "{answer}");
    let received = value(
        &answer,
        "nicbench_receiver_throughput_bytes_per_second{workload=\"tcp\",direction=\"forward\"}",
    )
    .unwrap();
    assert!(received > 0.0, "{answer}");
    target.wait_for_log("test done");
    // Toward a port where no agent listens: a failed probe, not an error.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let failed = http(
        metrics,
        format!(
            "GET /probe?target=127.0.0.1:{port}&workload=udp&duration=1 HTTP/1.1\r\nAuthorization: Bearer probe-token-1\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_eq!(value(&failed, "probe_success"), Some(0.0), "{failed}");
    // Toward an agent that does not prove the key: a peer test refuses it,
    // so the probe fails without sending it any test.
    let keyless = AgentProcess::start(&[]);
    let refused = http(
        metrics,
        format!(
            "GET /probe?target=127.0.0.1:{}&workload=tcp&duration=0.3 HTTP/1.1\r\nAuthorization: Bearer probe-token-1\r\n\r\n",
            keyless.port
        )
        .as_bytes(),
    );
    assert_eq!(value(&refused, "probe_success"), Some(0.0), "{refused}");
    prober.wait_for_log("does not ask for a pre-shared key");
    assert!(!keyless.logs().contains("running tcp test"), "{}", keyless.logs());
    let bad = http(
        metrics,
        b"GET /probe?target=127.0.0.1&workload=sweep HTTP/1.1\r\nAuthorization: Bearer probe-token-1\r\n\r\n",
    );
    assert!(
        bad.starts_with("HTTP/1.1 400") && bad.contains("unknown workload 'sweep'"),
        "{bad}"
    );
}

/// Issue 67, item 8: `/probe` without a token on an address others reach
/// let anyone make the agent connect anywhere and tell open ports from
/// closed ones by timing. Such an agent does not start; on loopback it
/// does (only this host reaches it).
#[test]
fn a_probe_without_a_token_is_served_on_loopback_only() {
    let dir = tempfile::tempdir().unwrap();
    let psk = dir.path().join("psk");
    std::fs::write(&psk, "the probe test's key, sixteen bytes or more\n").unwrap();
    let psk = psk.display().to_string();
    let out = crate::common::nicbench(&[
        "serve",
        "-B",
        "127.0.0.1",
        "-p",
        "0",
        "--psk-file",
        &psk,
        "--allow-peer-tests",
        "--metrics-listen",
        "0.0.0.0:0",
        "--metrics-probe",
    ]);
    assert!(!out.status.success());
    let said = crate::common::stderr(&out);
    assert!(
        said.contains("--metrics-probe on 0.0.0.0:0 without --metrics-token-file") && said.contains("loopback"),
        "{said}"
    );
    let (_agent, _metrics) = agent_with_metrics(&["--psk-file", &psk, "--allow-peer-tests", "--metrics-probe"]);
}
