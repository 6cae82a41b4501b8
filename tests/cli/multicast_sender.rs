//! `nicbench multicast --sender AGENT`: an agent sends the group in the
//! client's place. Its count is every receiver's reference, its address
//! the run's sending end; it sends only what a client it admitted asked
//! for, at a rate its `--max-rate` allows; a bad `--sender` is refused
//! before anything connects.

use serde_json::Value;

use crate::common::{nicbench, nicbench_json, stderr, AgentProcess};
use crate::multicast::{assert_consistent, memberships, run_in, unique_group};

#[test]
fn an_agent_sends_the_group_and_every_receiver_counts_its_datagrams() {
    let (sender, a, b) = (
        AgentProcess::start(&[]),
        AgentProcess::start(&[]),
        AgentProcess::start(&[]),
    );
    let group = unique_group();
    let address = group.split(':').next().unwrap().to_string();
    let named = |agent: &AgentProcess| format!("127.0.0.1:{}", agent.port);
    let doc = nicbench_json(&[
        "multicast",
        "--sender",
        &named(&sender),
        &named(&a),
        &named(&b),
        "-g",
        &group,
        "-t",
        "1",
        "-b",
        "20M",
        "-l",
        "1000",
        "--join-wait",
        "300ms",
        "--json",
    ]);
    // The sending agent stands where the client does, and is named.
    assert_eq!(doc["client"]["address"], named(&sender));
    assert_eq!(doc["spec"]["params"]["sender_agent"], named(&sender));
    assert_eq!(
        doc["spec"]["direction"], "forward",
        "the document's test is the receivers'"
    );
    let receivers = doc["receivers"].as_array().unwrap();
    let names: Vec<&str> = receivers.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, [named(&a), named(&b)], "the sender is no receiver");
    let sent = doc["sum"]["udp"]["sent_datagrams"].as_u64().unwrap();
    assert!(sent > 0, "{}", doc["sum"]);
    assert_consistent(&doc, sent);
    for r in receivers {
        assert_eq!(
            r["result"]["streams"][0]["sender"]["udp"]["datagram_bytes"], 1000,
            "{r}"
        );
        // Both agents read this host's clock: the offset between them is exact.
        assert_eq!(r["result"]["clock_offset"]["one_clock"], true, "{r}");
    }
    crate::result_schema::assert_valid(&crate::result_schema::schema(), &doc, "a document an agent sent");
    sender.wait_for_log("running multicast test");
    assert!(!memberships("lo").contains(&address), "{}", memberships("lo"));

    // The text names the sender in the heading, its row and its line.
    let out = nicbench(&[
        "multicast",
        "--sender",
        &named(&sender),
        &named(&a),
        "-g",
        &group,
        "-t",
        "1",
        "-b",
        "5M",
        "--join-wait",
        "300ms",
        "--no-save",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        stderr(&out).contains(&format!("sent by {} (TTL 1)", named(&sender))),
        "{}",
        stderr(&out)
    );
    let row = text.lines().nth(1).unwrap_or_default();
    assert!(row.starts_with(&named(&sender)) && row.ends_with("sender"), "{text}");
    assert!(text.contains(&format!("sender {}: sent ", named(&sender))), "{text}");
}

#[test]
fn a_sender_that_is_a_receiver_too_or_beside_iperf_2_or_reversed_is_refused_before_anything_connects() {
    // Nothing listens on port 1: each refusal comes before a connection.
    let refusals: [(&[&str], &str); 4] = [
        (
            &["--sender", "127.0.0.1:1", "127.0.0.1:1"],
            "127.0.0.1:1 is named twice; name each agent once (the sender is not a receiver)",
        ),
        (
            &["--sender", "127.0.0.1:1", "--with-iperf2", "sender", "127.0.0.1:2"],
            "--sender and --with-iperf2 sender both name the group's sender",
        ),
        (
            &["-R", "127.0.0.1:1"],
            "to have an agent send, name it with --sender AGENT",
        ),
        (
            &["--sender", "", "127.0.0.1:1"],
            "the sending agent's name \"\" is not 1 to 300 printable characters",
        ),
    ];
    for (args, words) in refusals {
        let mut all = vec!["multicast", "-t", "1", "--no-save"];
        all.extend(args);
        let out = nicbench(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(words), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn a_sending_agent_holds_to_its_key_and_its_rate_limit_and_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let psk = dir.path().join("psk");
    std::fs::write(&psk, "a multicast key of sixteen bytes or more\n").unwrap();
    let psk = psk.display().to_string();
    let keyed = AgentProcess::start(&["--psk-file", &psk, "--max-rate", "10M"]);
    let receiver = AgentProcess::start(&[]);
    let (sender, to) = (
        format!("127.0.0.1:{}", keyed.port),
        format!("127.0.0.1:{}", receiver.port),
    );
    let group = unique_group();
    let attempt = |extra: &[&str]| {
        let mut args = vec![
            "multicast",
            "--sender",
            &sender,
            &to,
            "-g",
            &group,
            "-t",
            "1",
            "--join-wait",
            "300ms",
            "--no-save",
        ];
        args.extend(extra);
        nicbench(&args)
    };
    // No key: the agent sends nothing (the receiver, keyless, was ready),
    // and the error names the sender.
    let out = attempt(&["-b", "5M"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(&format!("{sender} (the sender)")),
        "{}",
        stderr(&out)
    );
    // With the key, more than its --max-rate: refused, and says the limit.
    let out = attempt(&["-b", "max", "--psk-file", &psk]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--max-rate"), "{}", stderr(&out));
    // With the key and within the limit it sends (the receiver, which
    // holds no key, only warns that the key went unused), and it kept
    // serving through both refusals.
    let out = attempt(&["-b", "5M", "--psk-file", &psk]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("sender {sender}: sent ")),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    keyed.wait_for_log("running multicast test");
}

/// In a lab on a switch, an agent on one host sends to two others while a
/// fourth host drives the test: each receiver's count adds up against
/// the sending agent's, and the sending end is that host's address.
#[test]
fn on_a_switch_an_agent_sends_the_group_to_the_others() {
    require_lab!();
    let lab = crate::common::lab_builder().switch().hosts(4).build().unwrap();
    let group = unique_group();
    let text = run_in(
        &lab,
        "a",
        crate::common::BIN,
        &[
            "multicast",
            "--sender",
            "b",
            "c",
            "d",
            "-g",
            &group,
            "-t",
            "1",
            "-b",
            "20M",
            "--join-wait",
            "500ms",
            "--json",
        ],
    );
    let doc: Value = serde_json::from_str(&text).expect("JSON");
    let host_of = |endpoint: &Value| {
        endpoint["address"]
            .as_str()
            .unwrap()
            .split(':')
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(host_of(&doc["client"]), lab.addr("b").to_string());
    let receivers = doc["receivers"].as_array().unwrap();
    let names: Vec<&str> = receivers.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["c", "d"]);
    let sent = doc["sum"]["udp"]["sent_datagrams"].as_u64().unwrap();
    assert!(sent > 0);
    assert_consistent(&doc, sent);
    for r in receivers {
        // Joined and counted (complete or losing: a busy machine may drop
        // some at a socket; the counts add up either way, above).
        assert!(r["join_latency_seconds"].as_f64().is_some(), "{r}");
        assert_eq!(host_of(&r["agent"]), lab.addr(r["name"].as_str().unwrap()).to_string());
    }
}
