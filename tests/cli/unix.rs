//! `--transport unix`: tcp, rr and sweep over an AF_UNIX stream socket to
//! an agent on this host, and the error for an agent elsewhere.

use serde_json::Value;

use super::common::*;

fn count(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("{v} is no count"))
}

/// Both ends of every stream counted the same bytes, and some.
fn assert_ends_agree(run: &Value) -> u64 {
    let streams = run["streams"].as_array().unwrap();
    assert!(!streams.is_empty(), "{run}");
    for s in streams {
        assert_eq!(count(&s["sender"]["bytes"]), count(&s["receiver"]["bytes"]), "{s}");
    }
    streams.iter().map(|s| count(&s["sender"]["bytes"])).sum()
}

#[test]
fn tcp_rr_and_sweep_run_over_unix_and_count_every_byte() {
    let agent = AgentProcess::start(&[]);

    // A byte count the client asked for arrives whole, over two streams.
    let tcp = agent.run_json("tcp", &["--transport", "unix", "-n", "10000001", "-P", "2"]);
    assert_eq!(tcp["spec"]["params"]["transport"], "unix", "{}", tcp["spec"]);
    assert_eq!(assert_ends_agree(&tcp), 10_000_001);
    assert_eq!(count(&tcp["sum"]["receiver"]["bytes"]), 10_000_001);
    // No TCP_INFO: the socket is not TCP's.
    assert!(
        tcp["streams"][0]["sender"]["tcp_info"].is_null(),
        "{}",
        tcp["streams"][0]
    );

    // Every request answered once; each transaction moved a request and a response.
    let rr = agent.run_json("rr", &["--transport", "unix", "-r", "100,300", "-t", "0.5"]);
    assert_eq!(rr["spec"]["params"]["proto"], "unix");
    let stream = &rr["streams"][0];
    let transactions = count(&stream["sender"]["rr"]["transactions"]);
    assert!(transactions > 0, "{stream}");
    assert_eq!(
        stream["receiver"]["rr"]["transactions"],
        stream["sender"]["rr"]["transactions"]
    );
    assert_eq!(assert_ends_agree(&rr), transactions * 400, "{stream}");

    // Every size of the sweep was measured, and both ends agree on the bytes.
    let sweep = agent.run_json(
        "sweep",
        &["--transport", "unix", "--max", "64K", "--point-time", "10ms"],
    );
    let curve = &sweep["streams"][0]["sender"]["sweep"];
    assert_eq!(curve["transport"], "unix", "{curve}");
    let points = curve["points"].as_array().unwrap();
    assert!(points.iter().any(|p| p["size_bytes"] == 65536), "{curve}");
    assert!(assert_ends_agree(&sweep) > 0);
}

#[test]
fn tcp_options_over_unix_are_refused_before_the_test() {
    let agent = AgentProcess::start(&[]);
    let port = agent.port_arg();
    for option in [&["--mss", "1400"][..], &["-N"], &["-C", "reno"], &["-b", "100M"]] {
        let mut args = vec!["tcp", "127.0.0.1", "-p", &port, "--transport", "unix", "-t", "0.3"];
        args.extend_from_slice(option);
        let out = nicbench(&args);
        assert!(!out.status.success(), "{option:?} was accepted");
        assert!(
            stderr(&out).contains("with --transport unix: its sockets have no TCP options"),
            "{}",
            stderr(&out)
        );
    }
}

/// An agent in another network namespace (a lab host) is beyond an
/// AF_UNIX socket: the client says so and what to do instead.
#[test]
fn unix_to_an_agent_on_another_host_is_refused_with_what_to_do() {
    require_lab!();
    let lab = lab_builder().build().unwrap();
    let port = lab.agent_port().to_string();
    for (workload, time) in [("tcp", "-t"), ("rr", "-t"), ("sweep", "--point-time")] {
        let out = lab
            .command("a", BIN)
            .args([workload, "b", "-p", &port, "--transport", "unix", time, "0.3"])
            // The agent holds the test it set up until its setup deadline.
            .args(["--wait", "60s"])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{workload}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("--transport unix: the agent at") && err.contains("is not on this host"),
            "{workload}: {err}"
        );
        assert!(err.contains("--transport tcp"), "{workload}: {err}");
    }
}

/// `rr --crr` over a transport: every transaction on a connection of its
/// own, every one answered (the agent's threads share the connections, so
/// the sums agree, not each stream).
pub fn assert_a_connection_per_transaction(run: &Value) {
    let streams = run["streams"].as_array().unwrap();
    let total = |end: &str, what: &str| -> u64 { streams.iter().map(|s| count(&s[end]["rr"][what])).sum() };
    for s in streams {
        let sender = &s["sender"]["rr"];
        assert!(count(&sender["transactions"]) > 0, "{s}");
        assert_eq!(sender["connections"], sender["transactions"], "{s}");
    }
    assert_eq!(
        total("receiver", "transactions"),
        total("sender", "transactions"),
        "{run}"
    );
    assert_eq!(
        total("receiver", "connections"),
        total("sender", "connections"),
        "{run}"
    );
    assert_eq!(
        count(&run["sum"]["rr"]["transactions"]),
        total("sender", "transactions")
    );
}

#[test]
fn crr_opens_an_af_unix_connection_per_transaction() {
    // Before the transport opened --crr's connections, rr dialled the
    // AF_UNIX name's number as a TCP port: "connect: Connection refused".
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("rr", &["--transport", "unix", "--crr", "-P", "2", "-t", "0.5"]);
    assert_eq!(run["spec"]["params"]["proto"], "unix");
    assert_a_connection_per_transaction(&run);
    // The header names the transport's connections, not TCP's.
    let port = agent.port_arg();
    let out = nicbench(&[
        "rr",
        "127.0.0.1",
        "-p",
        &port,
        "--transport",
        "unix",
        "--crr",
        "-t",
        "0.2",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("a new AF_UNIX connection per transaction"), "{text}");
}
