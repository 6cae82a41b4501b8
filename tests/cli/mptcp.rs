//! Multipath TCP as a transport: the workloads that run over a byte stream
//! run over it by name (`tcp --mptcp`, `rr --proto mptcp`, `sweep
//! --transport mptcp`, `files --mptcp`), `tcp` and `files` with each end's
//! subflows in their results,
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
    // `--transport`, as tcp and sweep spell it, is the same option.
    let same = agent.run_json("rr", &["-t", "0.2", "--transport", "mptcp"]);
    assert_eq!(same["spec"]["params"]["proto"], "mptcp", "{}", same["spec"]);
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
fn crr_over_mptcp_ends_on_time_with_a_connection_per_transaction() {
    // An MPTCP listener's accept does not heed SO_RCVTIMEO: the agent's
    // responders, waiting in accept for connections that no longer came,
    // outwaited the test, and the agent aborted it ("did not finish 5 s
    // after its expected end").
    require_mptcp!();
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("rr", &["--proto", "mptcp", "--crr", "-P", "2", "-t", "0.5"]);
    assert_eq!(run["spec"]["params"]["proto"], "mptcp");
    super::unix::assert_a_connection_per_transaction(&run);
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
    assert!(text.contains("  1 stream client->agent over MPTCP, 1.0 s"), "{text}");
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
fn files_refuse_a_datagram_transport_and_two_ways_of_naming_one() {
    let out = nicbench(&[
        "files",
        "127.0.0.1",
        "-p",
        "9",
        "--generate",
        "2x1K",
        "--transport",
        "udp",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("--transport udp: files runs byte streams; for UDP datagrams use the 'udp' workload"),
        "{err}"
    );
    let out = nicbench(&[
        "files",
        "127.0.0.1",
        "--generate",
        "2x1K",
        "--mptcp",
        "--transport",
        "tcp",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot be used with"), "{}", stderr(&out));
}

/// A file set over MPTCP on two links: every file arrives and checks out,
/// each data connection's subflows (one per link) are in the result at
/// both ends, and the raw trial it is read against ran over MPTCP too.
#[test]
fn files_over_mptcp_on_two_links_arrive_verified_with_each_connections_subflows() {
    require_lab!();
    require_mptcp!();
    let lab = lab_builder().links(2).rate(100_000_000).mptcp().build().unwrap();
    let b = lab.addr("b").to_string();
    let port = lab.agent_port().to_string();
    let out = run_in(
        &lab,
        "a",
        &[
            "files",
            &b,
            "-p",
            &port,
            "--generate",
            "40x1M",
            "--parallel-files",
            "2",
            "--raw-time",
            "1s",
            "--mptcp",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    super::result_schema::assert_valid(&super::result_schema::schema(), &run, "files --mptcp over 2 links");
    assert_eq!(run["spec"]["params"]["transport"], "mptcp", "{}", run["spec"]);
    let files = &run["sum"]["files"];
    assert_eq!(files["files"], 40, "{files}");
    assert_eq!(files["verified"], true, "{files}");
    assert_eq!(files["raw_tcp"]["transport"], "mptcp", "{files}");
    let streams = run["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 2, "{}", run["streams"]);
    for stream in streams {
        for end in [&stream["sender"], &stream["receiver"]] {
            let c = &end["mptcp"];
            assert_eq!(c["fallback"], false, "{c}");
            // Both links carry each connection: b announced its second
            // address and a joined it.
            assert_eq!(c["subflows"].as_array().map(Vec::len), Some(2), "{c}");
        }
        // The subflows carried at least what the connection delivered.
        let receiver = &stream["receiver"]["mptcp"];
        if receiver["bytes_received"].is_u64() {
            let carried: u64 = receiver["subflows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| num(&s["bytes_received"]))
                .sum();
            assert!(carried >= num(&receiver["bytes_received"]), "{receiver}");
        }
    }
    assert_eq!(run["agent"]["facts"]["mptcp"]["sysctls"]["enabled"], "1");
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
    // The sender's TCP figures are the connection's, not its first
    // subflow's (what TCP_INFO on an MPTCP socket answers).
    let subflows = sender["mptcp"]["subflows"].as_array().unwrap();
    let sum = |key: &str| subflows.iter().map(|s| num(&s[key])).sum::<u64>();
    let info = &sender["tcp_info"];
    assert_eq!(num(&info["retransmits"]), sum("total_retrans"), "{info}");
    assert_eq!(num(&info["bytes_sent"]), sum("bytes_sent"), "{info}");
    assert_eq!(
        num(&info["congestion_window_segments"]),
        sum("congestion_window_segments"),
        "{info}"
    );
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
    command.args([
        "tcp",
        &b,
        "-p",
        &port,
        "-t",
        "3",
        "-i",
        "0.2",
        "--mptcp",
        "--json-stream",
        "--no-save",
    ]);
    let mut client = spawn_captured(&mut command, "tcp --mptcp in host a");
    // The stream runs once its first interval is out: announce the second
    // address only then, so its subflow joins while the stream runs.
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(client.stdout.take().unwrap()));
    let first_interval_end = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("the client ended before its first interval"))
            .unwrap();
        let event: Value = serde_json::from_str(&line).unwrap();
        if event["event"] == "interval" {
            break event["end_seconds"]
                .as_f64()
                .unwrap_or_else(|| panic!("no end_seconds: {line}"));
        }
    };
    ip(&["mptcp", "endpoint", "add", &address, "dev", ifname, "signal"]);
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let out = wait_output(client, COMMAND_LIMIT, "tcp --mptcp in host a");
    assert!(out.status.success(), "{}", stderr(&out));
    let last = rest
        .last()
        .unwrap_or_else(|| panic!("no result line; stderr: {}", stderr(&out)));
    let event: Value = serde_json::from_str(last).unwrap();
    let run = &event["result"];
    let second = lab.link_addr(2, "a").to_string();
    for end in [&run["streams"][0]["sender"], &run["streams"][0]["receiver"]] {
        let c = &end["mptcp"];
        assert_eq!(c["extra_subflows"], 1, "the late subflow joined: {c}");
        let subflows = c["subflows"].as_array().unwrap();
        assert_eq!(subflows.len(), 2, "{c}");
        // The first subflow was up when the stream began; the second
        // joined after the first interval, and each end saw when.
        let side = if end == &run["streams"][0]["sender"] {
            "local"
        } else {
            "remote"
        };
        for s in subflows {
            let joined = s["joined_after_seconds"]
                .as_f64()
                .unwrap_or_else(|| panic!("no join time: {s}"));
            let addr: std::net::SocketAddr = s[side].as_str().unwrap().parse().unwrap();
            if addr.ip().to_canonical().to_string() == second {
                assert!(joined > 0.0 && joined < 3.5, "{s}");
                if side == "local" {
                    assert!(
                        joined >= first_interval_end - 0.001,
                        "after {first_interval_end} s: {s}"
                    );
                }
            } else {
                assert_eq!(joined, 0.0, "{s}");
            }
        }
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

/// Behind a router the hosts' own interfaces are unshaped: each path's
/// line rate is the router's tbf toward its receiver, named where it sits,
/// and their sum is the stream's line rate, in the JSON and in the text.
#[test]
fn behind_a_router_each_path_is_weighed_against_the_routers_link_toward_its_receiver() {
    require_lab!();
    require_mptcp!();
    let lab = lab_builder()
        .links(2)
        .via_router()
        .rate(100_000_000)
        .mptcp()
        .build()
        .unwrap();
    let b = lab.addr("b").to_string();
    let port = lab.agent_port().to_string();
    let out = run_in(&lab, "a", &["tcp", &b, "-p", &port, "-t", "2", "--mptcp", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    super::result_schema::assert_valid(&super::result_schema::schema(), &run, "tcp --mptcp via a router");
    assert!(run.get("line_rate").is_none(), "one link's rate is no line rate here");
    let summary = &run["paths"];
    let paths = summary["paths"].as_array().unwrap_or_else(|| panic!("no paths: {run}"));
    assert_eq!(paths.len(), 2, "{summary}");
    let to: std::collections::BTreeSet<String> = paths.iter().map(|p| p["to"].as_str().unwrap().to_string()).collect();
    let b_addresses: std::collections::BTreeSet<String> = [lab.link_addr(3, "b"), lab.link_addr(4, "b")]
        .iter()
        .map(|a| a.to_string())
        .collect();
    assert_eq!(to, b_addresses, "{summary}");
    let mut goodput = 0.0;
    let mut carried = 0.0;
    for p in paths {
        assert_eq!(p["link_bits_per_second"], 100_000_000, "{p}");
        assert_eq!(p["link_speed_source"], "lab", "{p}");
        let name = p["shaper_name"].as_str().unwrap();
        assert!(name.starts_with("lab router ") && name.contains("-r eth"), "{p}");
        goodput += p["goodput_bits_per_second"].as_f64().unwrap();
        carried += p["bits_per_second"].as_f64().unwrap();
    }
    let f = |key: &str| summary[key].as_f64().unwrap_or_else(|| panic!("{key}: {summary}"));
    assert!(
        (f("theoretical_goodput_bits_per_second") - goodput).abs() < 1.0,
        "{summary}"
    );
    let receiver = run["sum"]["receiver"]["bits_per_second"].as_f64().unwrap();
    assert!((f("measured_bits_per_second") - receiver).abs() < 1.0, "{summary}");
    assert!(
        (carried - receiver).abs() < 1.0,
        "the paths carry the stream: {summary}"
    );
    assert!(
        (f("percent_of_theoretical_goodput") - receiver * 100.0 / goodput).abs() < 1e-6,
        "{summary}"
    );
    // The text gives the same sum, and each path with its router link.
    let out = run_in(&lab, "a", &["tcp", &b, "-p", &port, "-t", "1", "--mptcp"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = one_line(&out);
    assert!(text.contains("theoretical goodput, the sum of 2 paths':"), "{text}");
    assert!(text.contains("(100.00 Mbit/s link from lab router "), "{text}");
}

/// A middlebox that strips MPTCP's option from the handshake (an nft rule
/// on the lab's router) makes both ends fall back to plain TCP: the test
/// still runs, each end's figures say so, the text and the verdict name it.
#[test]
fn a_router_that_strips_mptcps_option_makes_a_fallback_that_is_named() {
    require_lab!();
    require_mptcp!();
    if let Err(why) = tool("nft", &["--version"], "apt-get install nftables") {
        skip_or_fail(&why);
        return;
    }
    // One link: MPTCP needs no endpoints to open a connection.
    let lab = lab_builder().via_router().build().unwrap();
    let router = lab.netns("r").to_string();
    for rule in [
        "add table inet strip",
        "add chain inet strip forward { type filter hook forward priority 0; }",
        "add rule inet strip forward tcp option mptcp exists reset tcp option mptcp",
    ] {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &router, "nft"])
            .args(rule.split(' '))
            .output()
            .unwrap();
        assert!(out.status.success(), "nft {rule}: {}", stderr(&out));
    }
    let b = lab.addr("b").to_string();
    let port = lab.agent_port().to_string();
    let out = run_in(&lab, "a", &["tcp", &b, "-p", &port, "-t", "1", "--mptcp", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    super::result_schema::assert_valid(&super::result_schema::schema(), &run, "an MPTCP fallback");
    let stream = &run["streams"][0];
    for end in [&stream["sender"], &stream["receiver"]] {
        let c = &end["mptcp"];
        assert_eq!(c["fallback"], true, "{c}");
        assert_eq!(
            c["subflows"].as_array().map(Vec::len),
            Some(1),
            "one TCP connection: {c}"
        );
    }
    assert!(num(&stream["receiver"]["bytes"]) > 0, "the test ran as TCP");
    let v = &run["verdict"];
    assert_eq!(
        (v["kind"].as_str(), v["side"].as_str()),
        (Some("mptcp_fallback"), Some("path")),
        "{v}"
    );
    let out = run_in(&lab, "a", &["tcp", &b, "-p", &port, "-t", "1", "--mptcp"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = one_line(&out);
    assert!(text.contains("MPTCP stream 1: fell back to plain TCP"), "{text}");
    assert!(
        text.contains("Verdict: MPTCP fell back to plain TCP on the stream"),
        "{text}"
    );
}

/// A command's text output with its wrapped lines joined: the assertions
/// read sentences, whatever width the lines were fitted to.
fn one_line(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}
