//! `nicbench multicast`: one sender to a group, receivers on agents; on
//! loopback (two agents of this host, each its own copy) and in a lab on
//! a switch (a receiver whose host filters the group never joins); every
//! refusal, on the command line and at the agent.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nicbench::model::{Direction, SideOptions, TestSpec};
use nicbench::protocol::Message;
use serde_json::Value;

use crate::common::{nicbench, nicbench_json, stderr, AgentProcess};
use crate::rawclient::Raw;

/// A group no other test of this run uses: tests run in parallel on one
/// loopback, and each receiving socket gets only the groups it joined.
fn unique_group() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!(
        "239.{}.{}.{}:{}",
        100 + std::process::id() % 100,
        (std::process::id() / 100) % 250,
        n,
        20000 + n
    )
}

/// The groups interface `dev` holds, as `ip maddr` shows them.
fn memberships(dev: &str) -> String {
    let out = Command::new("ip")
        .args(["maddr", "show", "dev", dev])
        .output()
        .expect("run ip");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What a receiver's trial says of the sender and of itself: every
/// receiver's counts add up against the one sender's, and its join took
/// a time it measured.
fn assert_consistent(doc: &Value, sent: u64) {
    for r in doc["receivers"].as_array().unwrap() {
        let udp = &r["result"]["sum"]["udp"];
        assert_eq!(udp["sent_datagrams"], sent, "one sender for all: {r}");
        let (received, lost) = (
            udp["received_datagrams"].as_u64().unwrap(),
            udp["lost_datagrams"].as_u64().unwrap(),
        );
        assert_eq!(received + lost, sent, "{}", r["name"]);
        let standing = r["standing"].as_str().unwrap();
        assert_eq!(standing == "complete", lost == 0, "{r}");
    }
}

#[test]
fn a_group_on_loopback_reaches_every_receiver_and_each_counts_the_senders_datagrams() {
    let (a, b) = (AgentProcess::start(&[]), AgentProcess::start(&[]));
    let group = unique_group();
    let address = group.split(':').next().unwrap().to_string();
    let (ra, rb) = (format!("127.0.0.1:{}", a.port), format!("127.0.0.1:{}", b.port));
    let doc = nicbench_json(&[
        "multicast",
        &ra,
        &rb,
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
    assert_eq!(doc["schema"], "nicbench.run/1");
    assert_eq!(doc["workload"], "multicast");
    assert_eq!(doc["spec"]["omit_seconds"], 0.3, "the warm-up covers the join wait");
    let receivers = doc["receivers"].as_array().unwrap();
    assert_eq!(receivers.len(), 2);
    assert_eq!(
        (receivers[0]["name"].as_str(), receivers[1]["name"].as_str()),
        (Some(&*ra), Some(&*rb))
    );
    assert_eq!(receivers.iter().filter(|r| r["slowest"] == true).count(), 1);
    let sent = doc["sum"]["udp"]["sent_datagrams"].as_u64().unwrap();
    assert!(sent > 0, "{}", doc["sum"]);
    assert_consistent(&doc, sent);
    for r in receivers {
        let join = r["join_latency_seconds"].as_f64().expect("a join time");
        assert!(join > 0.0 && join < 0.3, "{r}");
        let end = &r["result"]["streams"][0]["receiver"];
        assert_eq!(end["udp"]["datagram_bytes"], 1000);
        assert_eq!(
            end["udp"]["received"]["first_datagram_after_seconds"],
            r["join_latency_seconds"]
        );
    }
    // The slowest receiver's trial is the run's top level.
    let slowest = receivers.iter().find(|r| r["slowest"] == true).unwrap();
    assert_eq!(doc["agent"]["address"], slowest["agent"]["address"]);
    let schema = crate::result_schema::schema();
    crate::result_schema::assert_valid(&schema, &doc, "a multicast document");
    // Every membership ended with the test.
    assert!(!memberships("lo").contains(&address), "{}", memberships("lo"));
    a.wait_for_log("running multicast test");
}

#[test]
fn the_text_names_each_receiver_the_sender_and_the_slowest_and_each_receivers_run_is_saved() {
    let agent = AgentProcess::start(&[]);
    let receiver = format!("127.0.0.1:{}", agent.port);
    let dir = std::env::temp_dir().join(format!("nicbench-multicast-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("runs.db").display().to_string();
    let out = nicbench(&[
        "multicast",
        &receiver,
        "--db",
        &db,
        "--tag",
        "nic=lo",
        "-g",
        &unique_group(),
        "-t",
        "0.5",
        "-b",
        "10M",
        "--join-wait",
        "200ms",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let head = text.lines().next().unwrap();
    for column in [
        "host",
        "joined in",
        "rate",
        "datagrams",
        "lost",
        "dup",
        "reordered",
        "jitter",
        "one-way p50",
        "standing",
    ] {
        assert!(head.contains(column), "{head}");
    }
    assert!(text.lines().nth(1).unwrap().starts_with("sender (this host)"), "{text}");
    assert!(text.contains(&format!("\n{receiver} ")), "{text}");
    assert!(text.contains("sender: "), "{text}");
    assert!(
        text.contains("every receiver got every datagram; the slowest by rate: ")
            || text.contains("slowest receiver: "),
        "{text}"
    );
    assert!(stderr(&out).contains("nicbench multicast: "), "{}", stderr(&out));
    // The receiver's trial is a run of its own in the store, tagged.
    assert!(stderr(&out).contains("saved as runs 1 ("), "{}", stderr(&out));
    let listed = nicbench(&[
        "runs",
        "--db",
        &db,
        "--tag",
        &format!("agent={receiver}"),
        "--tag",
        "nic=lo",
    ]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert_eq!(
        listed.lines().filter(|l| l.contains(" multicast ")).count(),
        1,
        "{listed}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_groups_and_options_are_refused_before_anything_connects() {
    // A closed port: nothing is reached when the options are wrong.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let receiver = format!("127.0.0.1:{closed}");
    for (args, needle) in [
        (vec!["-g", "10.1.2.3"], "not a multicast group"),
        (vec!["-g", "224.0.0.251"], "local network control block"),
        (vec!["-g", "232.1.2.3"], "pass --source"),
        (vec!["-g", "239.1.2.3", "--source", "127.0.0.1"], "drop --source"),
        (vec!["-g", "239.1.2.3:0"], "not a port"),
        (vec!["-P", "2"], "drop -P"),
        (vec!["-R"], "one sender"),
        (vec!["--ttl", "256"], "--ttl"),
        (vec!["--join-wait", "0s"], "--join-wait"),
        (vec!["-b", "0"], "at least 1 bit/s"),
    ] {
        let mut argv = vec!["multicast", &receiver];
        argv.extend(&args);
        let out = nicbench(&argv);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
    let out = nicbench(&["multicast", &receiver, &receiver]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("named twice"), "{}", stderr(&out));
    let out = nicbench(&["multicast"]);
    assert_eq!(out.status.code(), Some(2), "a receiver is required");
    let out = nicbench(&["multicast", &receiver, "-t", "1"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&receiver) && stderr(&out).contains("refused"),
        "{}",
        stderr(&out)
    );
}

/// A group test's spec, as a client would send it.
fn spec_for(group: &str) -> TestSpec {
    let mut spec = TestSpec {
        workload: "multicast".into(),
        duration_seconds: 0.5,
        bytes: None,
        omit_seconds: 1.0,
        streams: 1,
        direction: Direction::Forward,
        message_bytes: 1000,
        interval_seconds: 1.0,
        client: SideOptions::default(),
        agent: SideOptions::default(),
        params: Value::Null,
        links: Vec::new(),
    };
    spec.params = serde_json::json!({
        "group": group, "port": 5001, "ttl": 1, "rate_bits_per_second": 1_000_000, "join_wait_seconds": 1.0
    });
    spec
}

/// The agent's own checks: a client that skips the command line's (a
/// hostile or broken one) cannot make it join a control group, a unicast
/// address or more than one group, and the agent goes on serving.
#[test]
fn the_agent_joins_only_a_group_a_test_may_use_and_keeps_serving() {
    let mut agent = AgentProcess::start(&[]);
    for (group, needle) in [
        ("224.0.0.5", "local network control block"),
        ("10.9.9.9", "not a multicast group"),
        ("ff02::1", "reserved or all-nodes"),
    ] {
        let mut raw = Raw::connect(agent.port);
        raw.hello().send(&Message::TestRequest {
            spec: spec_for(group),
            wait_seconds: 0.0,
        });
        let words = raw.expect_error_and_close(needle);
        assert!(words.contains(needle), "{group}: {words}");
    }
    let mut two = spec_for("239.1.1.1");
    two.streams = 2;
    let mut raw = Raw::connect(agent.port);
    raw.hello().send(&Message::TestRequest {
        spec: two,
        wait_seconds: 0.0,
    });
    raw.expect_error_and_close("one stream");
    let mut extra = spec_for("239.1.1.1");
    extra.params["also"] = "239.1.1.2".into();
    let mut raw = Raw::connect(agent.port);
    raw.hello().send(&Message::TestRequest {
        spec: extra,
        wait_seconds: 0.0,
    });
    raw.expect_error_and_close("also");
    agent.assert_serves_normally();
}

/// A client that goes away mid-test leaves no membership behind.
#[test]
fn a_receiver_whose_client_vanishes_leaves_the_group() {
    let mut agent = AgentProcess::start(&[]);
    let mut raw = Raw::connect(agent.port);
    raw.hello().send(&Message::TestRequest {
        spec: spec_for("239.199.7.7"),
        wait_seconds: 0.0,
    });
    assert!(matches!(raw.recv(), Some(Message::Accepted { .. })));
    assert!(matches!(raw.recv(), Some(Message::Ready)));
    raw.send(&Message::Start);
    let joined = std::time::Instant::now() + Duration::from_secs(10);
    while !memberships("lo").contains("239.199.7.7") {
        assert!(
            std::time::Instant::now() < joined,
            "never joined: {}",
            memberships("lo")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(raw);
    let left = std::time::Instant::now() + Duration::from_secs(10);
    while memberships("lo").contains("239.199.7.7") {
        assert!(
            std::time::Instant::now() < left,
            "still a member: {}",
            memberships("lo")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    agent.assert_serves_normally();
}

/// Runs `program args` in lab host `host`; its stdout, failing with stderr.
fn run_in(lab: &nicbench::lab::Lab, host: &str, program: &str, args: &[&str]) -> String {
    let out = lab
        .command(host, program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{program} {args:?} in {host}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Four hosts on a switch: a sends, b and c take the group, d's host
/// drops it (a filter, as a firewall would): d reads "never joined", is
/// named the slowest, and b's and c's counts add up against a's.
#[test]
fn on_a_switch_a_receiver_whose_host_filters_the_group_never_joins_and_is_named() {
    require_lab!();
    let lab = crate::common::lab_builder().switch().hosts(4).build().unwrap();
    let group = unique_group();
    let port = group.rsplit(':').next().unwrap().to_string();
    run_in(&lab, "d", "nft", &["add", "table", "inet", "nicbench_test"]);
    run_in(
        &lab,
        "d",
        "nft",
        &[
            "add",
            "chain",
            "inet",
            "nicbench_test",
            "in",
            "{ type filter hook input priority 0; }",
        ],
    );
    run_in(
        &lab,
        "d",
        "nft",
        &[
            "add",
            "rule",
            "inet",
            "nicbench_test",
            "in",
            "udp",
            "dport",
            &port,
            "drop",
        ],
    );
    let text = run_in(
        &lab,
        "a",
        crate::common::BIN,
        &[
            "multicast",
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
    let receivers = doc["receivers"].as_array().unwrap();
    let names: Vec<&str> = receivers.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["b", "c", "d"]);
    let d = &receivers[2];
    assert_eq!(d["standing"], "never_joined", "{d}");
    assert!(d["join_latency_seconds"].is_null(), "{d}");
    assert!(d["verdict"].as_str().unwrap().starts_with("never joined"), "{d}");
    assert_eq!(d["slowest"], true, "the silent receiver is the slowest");
    assert_eq!(d["result"]["sum"]["udp"]["received_datagrams"], 0);
    let sent = doc["sum"]["udp"]["sent_datagrams"].as_u64().unwrap();
    assert!(sent > 0);
    assert_consistent(&doc, sent);
    for r in &receivers[..2] {
        assert!(r["join_latency_seconds"].as_f64().is_some(), "{r}");
        assert_eq!(
            r["agent"]["address"].as_str().unwrap().split(':').next(),
            Some(lab.addr(r["name"].as_str().unwrap()).to_string().as_str())
        );
    }
}

/// Behind a router without multicast routing nothing arrives, and the
/// receiver's words say whether the TTL or the router stopped the group.
#[test]
fn a_group_does_not_cross_a_router_without_multicast_routing_and_the_words_say_why() {
    require_lab!();
    let lab = crate::common::lab_builder().via_router().hosts(2).build().unwrap();
    for (ttl, needle) in [
        ("1", "group's TTL 1 ends at the first one"),
        ("4", "do not forward the group"),
    ] {
        let text = run_in(
            &lab,
            "a",
            crate::common::BIN,
            &[
                "multicast",
                "b",
                "-g",
                &unique_group(),
                "-t",
                "0.5",
                "-b",
                "5M",
                "--join-wait",
                "300ms",
                "--ttl",
                ttl,
                "--json",
            ],
        );
        let doc: Value = serde_json::from_str(&text).expect("JSON");
        let b = &doc["receivers"][0];
        assert_eq!(b["standing"], "never_joined", "{b}");
        let verdict = b["verdict"].as_str().unwrap();
        assert!(
            verdict.contains("behind a router") && verdict.contains(needle),
            "TTL {ttl}: {verdict}"
        );
        assert!(doc["sum"]["udp"]["sent_datagrams"].as_u64().unwrap() > 0);
    }
}
