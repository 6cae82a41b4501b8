//! Multipath TCP as a transport: the workloads that run over a byte stream
//! run over it by name (`tcp --mptcp`, `rr --proto mptcp`, `sweep
//! --transport mptcp`), `tcp` with each end's subflows in its result,
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

fn num(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// The receiver's kernel counted every byte the stream did: the measured
/// bytes, the warm-up's, and the 20-byte preamble that admits the
/// connection, each once at the MPTCP level; its subflows carried all of
/// it, and again what the sender reinjected. (Kernels before 6.5 have no
/// MPTCP-level byte counts.)
fn assert_the_connection_adds_up(receiver: &Value) {
    let connection = &receiver["mptcp"];
    if !connection["bytes_received"].is_u64() {
        return;
    }
    assert_eq!(
        num(&connection["bytes_received"]),
        num(&receiver["bytes"]) + num(&receiver["omitted_bytes"]) + 20,
        "{connection}"
    );
    let carried: u64 = connection["subflows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| num(&s["bytes_received"]))
        .sum();
    assert!(carried >= num(&connection["bytes_received"]), "{connection}");
}

#[test]
fn tcp_over_mptcp_has_each_ends_connection_and_its_subflows_adding_up() {
    require_mptcp!();
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("tcp", &["-t", "2", "-O", "0.5", "--mptcp"]);
    assert_eq!(run["spec"]["params"]["transport"], "mptcp", "{}", run["spec"]);
    super::result_schema::assert_valid(&super::result_schema::schema(), &run, "tcp --mptcp");
    // Each end's facts hold its path manager for a test over MPTCP, and
    // only then.
    for end in ["client", "agent"] {
        let pm = &run[end]["facts"]["mptcp"];
        assert_eq!(pm["sysctls"]["enabled"], "1", "{end}: {pm}");
    }
    let plain = agent.run_json("tcp", &["-t", "1"]);
    for end in ["client", "agent"] {
        assert!(plain[end]["facts"].get("mptcp").is_none(), "{}", plain[end]["facts"]);
    }
    let stream = &run["streams"][0];
    let (sender, receiver) = (&stream["sender"], &stream["receiver"]);
    for end in [sender, receiver] {
        let c = &end["mptcp"];
        assert_eq!(c["fallback"], false, "{c}");
        assert!(!c["subflows"].as_array().unwrap().is_empty(), "{c}");
    }
    assert_the_connection_adds_up(receiver);
    // The subflow lines read what the result holds.
    let port = agent.port_arg();
    let out = nicbench(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "1",
        "--transport",
        "mptcp",
        "--no-save",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("MPTCP stream 1: 1 subflow (path manager: 0 extra, at most"),
        "{text}"
    );
    assert!(
        text.contains("127.0.0.1:") && text.contains("100.0% of the data"),
        "{text}"
    );

    // Plain TCP: no transport in the spec (agents from before transports
    // read it) and no MPTCP figures.
    let run = agent.run_json("tcp", &["-t", "1"]);
    assert!(run["spec"]["params"].get("transport").is_none(), "{}", run["spec"]);
    assert!(run["streams"][0]["sender"].get("mptcp").is_none());
}

#[test]
fn tcp_refuses_a_datagram_transport_and_two_ways_of_naming_one() {
    let out = nicbench(&["tcp", "127.0.0.1", "-p", "9", "--transport", "udp"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("--transport udp: tcp runs byte streams; for UDP datagrams use the 'udp' workload"),
        "{err}"
    );
    let out = nicbench(&["tcp", "127.0.0.1", "--mptcp", "--transport", "tcp"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("cannot be used with"), "{}", stderr(&out));
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

/// Refused by the client's own check: the option and what to enable.
fn assert_refused_naming_the_sysctl(out: &std::process::Output) {
    assert!(!out.status.success());
    let err = stderr(out);
    assert!(
        err.contains("--transport mptcp") && err.contains("net.mptcp.enabled=1"),
        "{err}"
    );
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
    let out = run_in(&lab, "a", &["tcp", &b, "-p", &port, "-t", "1", "--mptcp"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("net.mptcp.enabled=1"), "{}", stderr(&out));
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
    assert_refused_naming_the_sysctl(&out);
    let out = run_in(&lab, "a", &["tcp", &b, "-p", &port, "-t", "1", "--mptcp"]);
    assert_refused_naming_the_sysctl(&out);
}

#[test]
fn a_lab_with_two_links_and_mptcp_carries_one_stream_over_a_subflow_per_link() {
    require_lab!();
    require_mptcp!();
    let lab = lab_builder().links(2).rate(100_000_000).mptcp().build().unwrap();
    let b = lab.addr("b").to_string();
    let port = lab.agent_port().to_string();
    let out = run_in(&lab, "a", &["tcp", &b, "-p", &port, "-t", "3", "--mptcp", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    super::result_schema::assert_valid(&super::result_schema::schema(), &run, "tcp --mptcp over 2 links");
    let stream = &run["streams"][0];
    let (sender, receiver) = (&stream["sender"], &stream["receiver"]);
    // b announced its second link's address; a joined it from its own
    // address on that link: one subflow per link, seen from both ends.
    let expected_from: std::collections::BTreeSet<String> = [lab.link_addr(1, "a"), lab.link_addr(2, "a")]
        .iter()
        .map(|a| a.to_string())
        .collect();
    for end in [sender, receiver] {
        let c = &end["mptcp"];
        eprintln!("{}: {c}", end["role"]);
        assert_eq!(c["fallback"], false, "{c}");
        assert_eq!(c["extra_subflows"], 1, "{c}");
        let subflows = c["subflows"].as_array().unwrap();
        assert_eq!(subflows.len(), 2, "{c}");
        let side = if end == sender { "local" } else { "remote" };
        let from: std::collections::BTreeSet<String> = subflows
            .iter()
            .map(|s| {
                let addr: std::net::SocketAddr = s[side].as_str().unwrap().parse().unwrap();
                addr.ip().to_canonical().to_string()
            })
            .collect();
        assert_eq!(from, expected_from, "{c}");
    }
    assert_eq!(
        receiver["mptcp"]["add_addr_signal"], 1,
        "the agent announced its second address"
    );
    assert_eq!(sender["mptcp"]["add_addr_accepted"], 1, "the client joined it");
    // Both links carried data, and all of it adds up.
    let subflows = receiver["mptcp"]["subflows"].as_array().unwrap();
    assert!(
        subflows.iter().all(|s| num(&s["bytes_received"]) > 0),
        "{}",
        receiver["mptcp"]
    );
    assert_the_connection_adds_up(receiver);
    // Each path is weighed against its own link: both ends named the
    // interface of each subflow, and the verdict gives the paths' sum.
    for end in [sender, receiver] {
        for s in end["mptcp"]["subflows"].as_array().unwrap() {
            assert_eq!(s["interface"]["shaping_bits_per_second"], 100_000_000, "{s}");
        }
    }
    let summary = run["verdict"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("over 2 paths") && summary.contains("of their links'"),
        "{summary}"
    );
    // Both ends recorded the path manager that made the subflows.
    for (end, announces) in [("client", lab.link_addr(2, "a")), ("agent", lab.link_addr(2, "b"))] {
        let pm = &run[end]["facts"]["mptcp"];
        assert_eq!(pm["limits"]["subflows"], 2, "{end}: {pm}");
        assert_eq!(pm["limits"]["add_addr_accepted"], 1, "{end}: {pm}");
        assert_eq!(pm["sysctls"]["enabled"], "1", "{end}: {pm}");
        let endpoints = pm["endpoints"].as_array().unwrap();
        assert_eq!(endpoints.len(), 1, "{end}: {pm}");
        assert_eq!(endpoints[0]["address"], announces.to_string(), "{end}: {pm}");
        assert_eq!(endpoints[0]["signal"], true, "{end}: {pm}");
    }
    // The lab says what it set up.
    let out = std::process::Command::new(BIN)
        .args(["lab", "status", lab.name()])
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&out.stdout);
    let b2 = lab.link_addr(2, "b").to_string();
    assert!(status.contains(&format!("MPTCP: announces {b2} (")), "{status}");
}

/// A subflow can join at any time while the connection lives, not only in
/// the first round trips: the agent keeps the data listener it came in by
/// (an MP_JOIN SYN that finds no listener is reset). Here the agent's host
/// announces its second address only once the connection is established,
/// so the client's join comes after the agent has accepted its streams.
#[test]
fn a_subflow_announced_after_the_connection_is_up_still_joins() {
    require_lab!();
    require_mptcp!();
    let lab = lab_builder().links(2).rate(100_000_000).mptcp().build().unwrap();
    let agent_ns = lab.netns("b").to_string();
    let ip = |args: &[&str]| {
        let out = std::process::Command::new("ip")
            .args(["-n", &agent_ns])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "ip {args:?}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let endpoints = lab.state().mptcp_endpoints("b");
    let (address, ifname) = endpoints.first().expect("b announces link 2");
    let address = address.to_string();
    ip(&["mptcp", "endpoint", "flush"]);
    let b = lab.addr("b").to_string();
    let port = lab.agent_port().to_string();
    let mut command = lab.command("a", BIN);
    command.args(["tcp", &b, "-p", &port, "-t", "3", "--mptcp", "--json", "--no-save"]);
    let client = spawn_captured(&mut command, "tcp --mptcp in host a");
    // Wait for the data connection (the control connection is plain TCP).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &agent_ns, "ss", "-HMn", "state", "established"])
            .output()
            .unwrap();
        if !String::from_utf8_lossy(&out.stdout).trim().is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no MPTCP connection on the agent within 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    ip(&["mptcp", "endpoint", "add", &address, "dev", ifname, "signal"]);
    let out = wait_output(client, COMMAND_LIMIT, "tcp --mptcp in host a");
    assert!(out.status.success(), "{}", stderr(&out));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    for end in [&run["streams"][0]["sender"], &run["streams"][0]["receiver"]] {
        let c = &end["mptcp"];
        assert_eq!(c["extra_subflows"], 1, "the late subflow joined: {c}");
        assert_eq!(c["subflows"].as_array().map(Vec::len), Some(2), "{c}");
    }
    assert_the_connection_adds_up(&run["streams"][0]["receiver"]);
}

/// A client whose path manager accepts no announced address stays on one
/// path: the verdict names the missing subflow and the limit to raise, not
/// the one link it filled.
#[test]
fn a_client_that_accepts_no_announcement_is_told_which_limit_to_raise() {
    require_lab!();
    require_mptcp!();
    let lab = lab_builder().links(2).rate(100_000_000).mptcp().build().unwrap();
    let out = std::process::Command::new("ip")
        .args([
            "-n",
            lab.netns("a"),
            "mptcp",
            "limits",
            "set",
            "subflows",
            "0",
            "add_addr_accepted",
            "0",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let b = lab.addr("b").to_string();
    let port = lab.agent_port().to_string();
    let out = run_in(&lab, "a", &["tcp", &b, "-p", &port, "-t", "1", "--mptcp", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &run["streams"][0]["sender"]["mptcp"];
    assert_eq!(
        (c["extra_subflows"].as_u64(), c["add_addr_accepted_max"].as_u64()),
        (Some(0), Some(0)),
        "{c}"
    );
    let v = &run["verdict"];
    assert_eq!(
        (v["kind"].as_str(), v["side"].as_str()),
        (Some("mptcp_subflow_missing"), Some("client")),
        "{v}"
    );
    let summary = v["summary"].as_str().unwrap();
    assert!(
        summary.contains("the agent announced 1 other address, the client joined 0")
            && summary.contains("ip mptcp limits set subflows 1 add_addr_accepted 1"),
        "{summary}"
    );
}
