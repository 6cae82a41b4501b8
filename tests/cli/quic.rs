//! QUIC as a transport of the `tcp` workload (`--transport quic`): every
//! stream of a test on one quinn connection; each cipher suite offered is
//! the one its packets are protected with and both ends count the same
//! bytes; the congestion controller `-C` names is quinn's; the client
//! refuses a certificate that is not the pinned one before any data, and
//! the agent serves on; what cannot run over QUIC says so.

use serde_json::Value;

use super::common::*;

fn count(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn each_cipher_protects_the_streams_and_both_ends_count_every_byte() {
    let agent = AgentProcess::start(&[]);
    for (cipher, suite, congestion) in [
        ("aes128-gcm", "TLS13_AES_128_GCM_SHA256", None),
        ("aes256-gcm", "TLS13_AES_256_GCM_SHA384", Some("bbr")),
        ("chacha20-poly1305", "TLS13_CHACHA20_POLY1305_SHA256", Some("newreno")),
    ] {
        // A byte count, both directions, two streams each way, all on one
        // connection: every stream's receiver has exactly its sender's bytes.
        let mut args = vec![
            "--transport",
            "quic",
            "--cipher",
            cipher,
            "-n",
            "6M",
            "-P",
            "2",
            "--bidir",
            "-l",
            "100K",
        ];
        if let Some(cc) = congestion {
            args.extend(["-C", cc]);
        }
        let run = agent.run_json("tcp", &args);
        assert_eq!(run["spec"]["params"]["transport"], "quic", "{}", run["spec"]);
        assert_eq!(run["spec"]["params"]["tls"]["cipher"], cipher, "{}", run["spec"]);
        super::result_schema::assert_valid(&super::result_schema::schema(), &run, "tcp --transport quic");
        let streams = run["streams"].as_array().unwrap();
        assert_eq!(streams.len(), 4, "{cipher}");
        let mut per_direction = std::collections::BTreeMap::new();
        for s in streams {
            let (sender, receiver) = (&s["sender"], &s["receiver"]);
            assert!(sender["error"].is_null() && receiver["error"].is_null(), "{s}");
            let sent = count(&sender["bytes"]) + count(&sender["omitted_bytes"]);
            let received = count(&receiver["bytes"]) + count(&receiver["omitted_bytes"]);
            assert_eq!(sent, received, "{cipher}: stream {}", s["stream_id"]);
            *per_direction
                .entry(s["flow"].as_str().unwrap().to_string())
                .or_insert(0) += sent;
            for end in [sender, receiver] {
                let tls = &end["tls"];
                assert_eq!(tls["cipher_suite"], suite, "{cipher}: {tls}");
                assert_eq!(tls["record_layer"], "quinn", "{tls}");
                assert!(tls["handshake_seconds"].as_f64().unwrap() > 0.0, "{tls}");
                let quic = &end["quic"];
                assert_eq!(quic["version"], "QUICv1", "{quic}");
                assert_eq!(quic["congestion"], congestion.unwrap_or("cubic"), "{quic}");
                assert!(count(&quic["gso_segments"]) >= 1, "{quic}");
                assert!(count(&quic["path_mtu_bytes"]) >= 1200, "{quic}");
                assert!(
                    count(&quic["udp_tx_datagrams"]) >= count(&quic["udp_tx_calls"]),
                    "{quic}"
                );
                // No TCP connection carried it.
                assert!(end["tcp_info"].is_null(), "{end}");
            }
        }
        for (flow, bytes) in &per_direction {
            assert_eq!(*bytes, 6 << 20, "{cipher}: {flow}");
        }
        // Both ends agree on the agent's certificate, and the client's
        // handshake trusted it as the agent announced it.
        let agent_sha = run["agent"]["facts"]["tls"]["certificate_sha256"].as_str().unwrap();
        let client_end = &streams[0]["sender"];
        assert_eq!(client_end["tls"]["certificate_sha256"], agent_sha, "{client_end}");
        assert_eq!(client_end["tls"]["trust"], "announced", "{client_end}");
    }
}

#[test]
fn a_certificate_that_is_not_the_pinned_one_is_refused_before_any_data() {
    let agent = AgentProcess::start(&[]);
    let port = agent.port_arg();
    let wrong = "00".repeat(32);
    let out = nicbench(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "--transport",
        "quic",
        "--tls-pin",
        &wrong,
        "-t",
        "2",
    ]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("QUIC handshake with 127.0.0.1:"), "{err}");
    assert!(err.contains(&format!("not sha256:{wrong}")), "{err}");
    assert!(
        err.contains("refused before any data") && !err.contains("unexpected error"),
        "{err}"
    );
    assert!(
        out.stdout.is_empty(),
        "no result: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The agent serves on: the pin it announced is taken.
    let run = agent.run_json("tcp", &["--transport", "quic", "-n", "1M"]);
    let sha = run["agent"]["facts"]["tls"]["certificate_sha256"]
        .as_str()
        .unwrap()
        .to_string();
    let pinned = agent.run_json("tcp", &["--transport", "quic", "--tls-pin", &sha, "-n", "1M", "-R"]);
    let end = &pinned["streams"][0]["receiver"];
    assert_eq!(end["tls"]["trust"], "pinned", "{end}");
    assert_eq!(count(&end["bytes"]) + count(&end["omitted_bytes"]), 1 << 20, "{end}");
}

#[test]
fn what_cannot_run_over_quic_is_refused_with_the_reason() {
    // Nothing listens here: every refusal comes before a connection.
    let closed = "127.0.0.1";
    let cases: [(&[&str], &str); 12] = [
        (&["tcp", closed, "--transport", "quic", "-M", "1000"], "drop -M/--mss"),
        (&["tcp", closed, "--transport", "quic", "-N"], "drop -N/--nodelay"),
        (&["tcp", closed, "--transport", "quic", "-Z"], "drop -Z/--zerocopy"),
        (&["tcp", closed, "--transport", "quic", "--discard"], "drop --discard"),
        (
            &["tcp", closed, "--transport", "quic", "-b", "100M"],
            "drop -b/--bitrate",
        ),
        (&["tcp", closed, "--transport", "quic", "--ktls"], "drop --ktls"),
        (
            &["tcp", closed, "--transport", "quic", "-C", "reno"],
            "quinn has cubic, newreno, bbr",
        ),
        (&["rr", closed, "--proto", "quic", "--spin"], "--spin with --proto quic"),
        (&["rr", closed, "--proto", "quic", "--quickack"], "drop --quickack"),
        // Refused before the agent is asked for its addresses.
        (
            &["tcp", closed, "--transport", "quic", "--links", "auto"],
            "one connection over one UDP socket, so they cannot be spread over links; drop --links",
        ),
        (
            &["tcp", closed, "--cipher", "chacha20-poly1305"],
            "apply to --transport tls or quic, not tcp",
        ),
        (
            &["files", closed, "--generate", "1x1K", "--transport", "quic"],
            "runs the kernel's stream loops",
        ),
    ];
    for (args, expected) in cases {
        let mut argv = args.to_vec();
        argv.extend(["-p", "1"]);
        let out = nicbench(&argv);
        let err = stderr(&out);
        assert!(!out.status.success(), "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

/// Each party's handshake time in `sum.tls`: the mean over its ends.
fn client_and_agent_handshakes(run: &Value) -> (f64, f64) {
    let (mut client, mut agent) = (Vec::new(), Vec::new());
    for s in run["streams"].as_array().unwrap() {
        let (c, a) = match s["flow"].as_str().unwrap() {
            "client_to_agent" => (&s["sender"], &s["receiver"]),
            _ => (&s["receiver"], &s["sender"]),
        };
        client.push(c["tls"]["handshake_seconds"].as_f64().unwrap());
        agent.push(a["tls"]["handshake_seconds"].as_f64().unwrap());
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    (mean(&client), mean(&agent))
}

#[test]
fn tcp_tls_and_quic_side_by_side_in_compare_with_each_ends_handshake() {
    let agent = AgentProcess::start(&[]);
    let port = agent.port_arg();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db").display().to_string();
    let mut runs = Vec::new();
    for transport in ["tcp", "tls", "quic"] {
        let run = nicbench_json(&[
            "tcp",
            "127.0.0.1",
            "-p",
            &port,
            "--transport",
            transport,
            "-n",
            "2M",
            "-P",
            "2",
            "-R",
            "--db",
            &db,
            "--json",
        ]);
        runs.push((transport, run));
    }
    // The sum holds each party's mean handshake, over TLS and QUIC only.
    assert!(runs[0].1["sum"].get("tls").is_none(), "{}", runs[0].1["sum"]);
    for (transport, run) in &runs[1..] {
        let (client, agent_side) = client_and_agent_handshakes(run);
        let sum = &run["sum"]["tls"];
        assert!(client > 0.0 && agent_side > 0.0, "{transport}: {sum}");
        assert!(
            (sum["client_handshake_seconds"].as_f64().unwrap() - client).abs() < 1e-12,
            "{transport}: {sum}"
        );
        assert!(
            (sum["agent_handshake_seconds"].as_f64().unwrap() - agent_side).abs() < 1e-12,
            "{transport}: {sum}"
        );
    }
    // compare: one row per transport (the case label names it and the
    // cipher), the handshake in ms beside throughput and CPU per byte.
    let out = nicbench(&[
        "compare",
        "--db",
        &db,
        "--rows",
        "case",
        "--metric",
        "throughput,service-demand,agent-service-demand,handshake,agent-handshake",
        "--format",
        "json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cells = table["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3, "{table}");
    for (transport, run) in &runs {
        // Labelled by what tells the cases apart: the transport.
        let label = transport.to_uppercase();
        let cell = cells
            .iter()
            .find(|c| c["row"][0] == label.as_str())
            .unwrap_or_else(|| panic!("no row {label}: {table}"));
        let figures = &cell["figures"];
        let rate = run["sum"]["receiver"]["bits_per_second"].as_f64().unwrap();
        assert!(
            (figures["throughput"]["value"].as_f64().unwrap() / rate - 1.0).abs() < 1e-6,
            "{cell}"
        );
        for (metric, pointer) in [
            ("service-demand", "/cpu/client/service_demand_us_per_kb"),
            ("agent-service-demand", "/cpu/agent/service_demand_us_per_kb"),
        ] {
            let per_kb = run.pointer(pointer).and_then(Value::as_f64).unwrap();
            assert!(
                (figures[metric]["value"].as_f64().unwrap() - per_kb).abs() < 1e-9,
                "{label} {metric}: {cell}"
            );
        }
        for (metric, pointer) in [
            ("handshake", "/sum/tls/client_handshake_seconds"),
            ("agent-handshake", "/sum/tls/agent_handshake_seconds"),
        ] {
            match run.pointer(pointer).and_then(Value::as_f64) {
                None => assert!(figures.get(metric).is_none_or(Value::is_null), "{label}: {cell}"),
                Some(seconds) => {
                    // The run's figure and its trial's, both in ms.
                    for key in ["value", "min", "max"] {
                        let ms = figures[metric][key].as_f64().unwrap();
                        assert!(
                            (ms - seconds * 1e3).abs() < 1e-6,
                            "{label} {metric} {key}: {ms} ms vs {seconds} s"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn rr_over_quic_counts_its_transactions_and_crr_a_handshake_for_each() {
    let agent = AgentProcess::start(&[]);
    // A stream per flow on one connection: each transaction a request and
    // a response on it.
    let run = agent.run_json(
        "rr",
        &["--proto", "quic", "-t", "1", "-r", "64,1K", "-P", "2", "--burst", "2"],
    );
    assert_eq!(run["spec"]["params"]["proto"], "quic", "{}", run["spec"]);
    super::result_schema::assert_valid(&super::result_schema::schema(), &run, "rr --proto quic");
    let transactions = count(&run["sum"]["rr"]["transactions"]);
    assert!(transactions > 0, "{}", run["sum"]);
    assert_eq!(count(&run["sum"]["rr"]["latency"]["samples"]), transactions);
    let streams = run["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 2);
    for s in streams {
        let (sender, receiver) = (&s["sender"], &s["receiver"]);
        // Every request the requester sent was answered and counted by both.
        let both = |end: &Value| count(&end["rr"]["transactions"]) + count(&end["rr"]["warmup_transactions"]);
        assert_eq!(both(sender), both(receiver), "{s}");
        for end in [sender, receiver] {
            assert_eq!(end["tls"]["cipher_suite"], "TLS13_AES_128_GCM_SHA256", "{end}");
            assert_eq!(end["tls"]["record_layer"], "quinn", "{end}");
            assert_eq!(end["quic"]["version"], "QUICv1", "{end}");
            assert!(end.get("tcp_info").is_none_or(Value::is_null), "{end}");
        }
        assert_eq!(sender["tls"]["trust"], "announced", "{sender}");
    }

    // A connection per transaction: each pays a QUIC handshake, on both ends.
    let crr = agent.run_json(
        "rr",
        &[
            "--proto",
            "quic",
            "--crr",
            "-t",
            "1",
            "--cipher",
            "aes256-gcm",
            "-P",
            "2",
        ],
    );
    super::result_schema::assert_valid(&super::result_schema::schema(), &crr, "rr --proto quic --crr");
    for s in crr["streams"].as_array().unwrap() {
        let (sender, receiver) = (&s["sender"], &s["receiver"]);
        let connections = count(&sender["rr"]["connections"]);
        assert!(connections > 0, "{sender}");
        assert_eq!(count(&sender["tls"]["handshakes"]), connections, "{sender}");
        assert_eq!(sender["tls"]["cipher_suite"], "TLS13_AES_256_GCM_SHA384", "{sender}");
        assert!(sender["tls"]["handshake_seconds"].as_f64().unwrap() > 0.0, "{sender}");
        assert_eq!(
            count(&receiver["tls"]["handshakes"]),
            count(&receiver["rr"]["connections"]),
            "{receiver}"
        );
    }
    // The agent's flows share one endpoint: together they answered every
    // connection the client's flows made.
    let total = |end: &str| -> u64 {
        crr["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| count(&s[end]["rr"]["connections"]))
            .sum()
    };
    assert_eq!(total("sender"), total("receiver"), "{}", crr["streams"]);
    let sum = &crr["sum"]["tls"];
    for party in ["client_handshake_seconds", "agent_handshake_seconds"] {
        assert!(sum[party].as_f64().unwrap() > 0.0, "{sum}");
    }
    // The agent still serves a plain test after.
    let plain = agent.run_json("rr", &["-t", "0.3"]);
    assert!(count(&plain["sum"]["rr"]["transactions"]) > 0);
}
