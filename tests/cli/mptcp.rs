//! Multipath TCP as a transport: the workloads that run over a byte stream
//! run over it by name (`rr --proto mptcp`, `sweep --transport mptcp`),
//! and a host whose network namespace has it disabled refuses with what to
//! enable, on the client before anything connects and on the agent before
//! it opens a socket.

use std::process::Stdio;

use serde_json::Value;

use super::common::*;

/// Whether this kernel lets this namespace open MPTCP sockets.
fn mptcp_here() -> Result<(), String> {
    nicbench::probe::mptcp::availability().map_err(|e| e.to_string())
}

macro_rules! require_mptcp {
    () => {
        if let Err(why) = mptcp_here() {
            skip_or_fail(&why);
            return;
        }
    };
}

#[test]
fn rr_and_the_sweep_run_over_mptcp_by_name() {
    require_mptcp!();
    let agent = AgentProcess::start(&[]);
    let rr = agent.run_json("rr", &["-t", "1", "--proto", "mptcp", "-r", "64,64"]);
    assert_eq!(rr["spec"]["params"]["proto"], "mptcp", "{}", rr["spec"]);
    let sum = &rr["sum"]["rr"];
    let transactions = sum["transactions"].as_u64().unwrap();
    assert!(transactions > 0, "{sum}");
    assert_eq!(sum["latency"]["samples"].as_u64(), Some(transactions), "{sum}");

    let sweep = agent.run_json(
        "sweep",
        &[
            "--transport",
            "mptcp",
            "--sizes",
            "1,1K,64K",
            "--passes",
            "1",
            "--point-time",
            "10ms",
        ],
    );
    assert_eq!(sweep["spec"]["params"]["transport"], "mptcp");
    let result = &sweep["streams"][0]["sender"]["sweep"];
    assert_eq!(result["transport"], "mptcp", "{result}");
    let points: Vec<u64> = result["points"]
        .as_array()
        .unwrap_or_else(|| panic!("no points: {result}"))
        .iter()
        .map(|p| p["size_bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(points, [1, 1024, 65536]);
}

#[test]
fn a_transport_the_command_line_does_not_know_is_refused_with_the_known_ones() {
    let out = nicbench(&["rr", "127.0.0.1", "--proto", "sctp"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("possible values: tcp, udp, mptcp"), "{err}");
    let out = nicbench(&["sweep", "127.0.0.1", "--udp", "--transport", "mptcp"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("cannot be used with"), "{}", stderr(&out));
}

/// Runs `nicbench ARGS` in host `host` of the lab.
fn run_in(lab: &nicbench::lab::Lab, host: &str, args: &[&str]) -> std::process::Output {
    lab.command(host, BIN)
        .args(args)
        .args(["--no-save"])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Turns MPTCP off in one host's network namespace.
fn disable_mptcp(lab: &nicbench::lab::Lab, host: &str) {
    let out = lab
        .command(host, "sysctl")
        .args(["-q", "-w", "net.mptcp.enabled=0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "sysctl: {}", stderr(&out));
}

#[test]
fn a_namespace_with_mptcp_disabled_refuses_on_either_end_and_says_what_to_enable() {
    require_lab!();
    require_mptcp!();
    let lab = lab_builder().build().unwrap();
    let b = lab.addr("b").to_string();
    let port = lab.agent_port().to_string();

    // The agent's end is off: the client's own check passes, the agent refuses the spec.
    disable_mptcp(&lab, "b");
    let out = run_in(&lab, "a", &["rr", &b, "-p", &port, "-t", "1", "--proto", "mptcp"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("net.mptcp.enabled=1"), "{err}");
    // Plain TCP still runs between the same hosts: only the transport was refused.
    let out = run_in(&lab, "a", &["rr", &b, "-p", &port, "-t", "1", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(run["sum"]["rr"]["transactions"].as_u64().unwrap() > 0);

    // The client's end is off: refused before it connects anywhere.
    disable_mptcp(&lab, "a");
    let out = run_in(
        &lab,
        "a",
        &["sweep", &b, "-p", &port, "--transport", "mptcp", "--sizes", "1"],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("--transport mptcp") && err.contains("net.mptcp.enabled=1"),
        "{err}"
    );
}
