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
pub(crate) fn unique_group() -> String {
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
pub(crate) fn memberships(dev: &str) -> String {
    let out = Command::new("ip")
        .args(["maddr", "show", "dev", dev])
        .output()
        .expect("run ip");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What a receiver's trial says of the sender and of itself: every
/// receiver's counts add up against the one sender's, and its join took
/// a time it measured.
pub(crate) fn assert_consistent(doc: &Value, sent: u64) {
    for r in doc["receivers"].as_array().unwrap() {
        let udp = &r["result"]["sum"]["udp"];
        assert_eq!(udp["sent_datagrams"], sent, "one sender for all: {r}");
        let (received, lost) = (
            udp["received_datagrams"].as_u64().unwrap(),
            udp["lost_datagrams"].as_u64().unwrap(),
        );
        assert_eq!(received + lost, sent, "{}", r["name"]);
        // Nothing measured, no rate: not the warm-up's (a flooded port).
        if received == 0 {
            assert_eq!(udp["receiver_bits_per_second"], 0.0, "{r}");
        }
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
        (vec!["--with-iperf2", "receivers", "-l", "51"], "-l/--length"),
        (vec!["--with-iperf2", "both"], "possible values: receivers, sender"),
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
pub(crate) fn run_in(lab: &nicbench::lab::Lab, host: &str, program: &str, args: &[&str]) -> String {
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
    // The host's filter is an nftables rule.
    require!(crate::common::tool("nft", &["--version"], "apt-get install nftables"));
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

/// Ok when Debian's iperf 2 (`iperf`, 2.0.10 or later) is installed, for
/// `require!`.
fn iperf2_installed() -> Result<(), String> {
    match Command::new("iperf").arg("-v").output() {
        // iperf 2 prints its version on stderr and exits 1.
        Ok(out) if stderr(&out).contains("iperf version 2.") => Ok(()),
        Ok(out) => Err(format!("`iperf -v` is not iperf 2: {}", stderr(&out).trim())),
        Err(e) => Err(format!("iperf is not runnable here ({e}): apt-get install iperf")),
    }
}

/// A child process killed and reaped when dropped (also when a test fails).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Reaped {
    /// Its stdout once it has exited (within `limit`), or None.
    fn output_within(mut self, limit: Duration) -> Option<String> {
        let end = std::time::Instant::now() + limit;
        while std::time::Instant::now() < end {
            if self.0.try_wait().ok().flatten().is_some() {
                let mut text = String::new();
                std::io::Read::read_to_string(self.0.stdout.as_mut()?, &mut text).ok()?;
                return Some(text);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// Its stdout lines as they come (it runs on), read on a thread.
    fn lines(&mut self) -> std::sync::mpsc::Receiver<String> {
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = self.0.stdout.take().expect("stdout piped");
        std::thread::spawn(move || {
            for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        rx
    }
}

/// iperf 2's server report of one sender (`-y C`), which it writes when
/// the sender's first closing datagram arrives: its total (that datagram's
/// number: the datagrams numbered, plus one) and its loss: fields 12 and
/// 11 of `time,src,sport,dst,dport,id,interval,bytes,bps,jitter,lost,total,...`.
fn iperf2_server_counts(lines: &std::sync::mpsc::Receiver<String>) -> (u64, u64) {
    let line = lines
        .recv_timeout(crate::common::LOG_LIMIT)
        .expect("iperf -s reported on the closing datagram");
    let f: Vec<&str> = line.split(',').collect();
    assert!(f.len() >= 13, "not a CSV report: {line}");
    (f[11].parse().unwrap(), f[10].parse().unwrap())
}

/// Starts `command` (nicbench) as the client of `receivers` waiting for an
/// iperf 2 sender on `group` for 4 s, with a join wait long enough for the
/// test to start iperf 2; its JSON comes on its stdout.
fn listening_for_iperf2(mut command: Command, receivers: &[&str], group: &str) -> Reaped {
    Reaped(
        command
            .arg("multicast")
            .args(receivers)
            .args([
                "-g",
                group,
                "--with-iperf2",
                "sender",
                "-t",
                "4",
                "-O",
                "0",
                "--join-wait",
                "10s",
                "--json",
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start nicbench multicast"),
    )
}

/// What iperf 2's client says it sent ("Sent N datagrams"): its data
/// datagrams, numbered 1 to N - 2, and two more.
fn iperf2_sent(said: &str) -> u64 {
    said.split("Sent ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no 'Sent N datagrams' in: {said}"))
}

/// Waits until lab host `host`'s eth0 holds `group`.
fn wait_for_member_in(lab: &nicbench::lab::Lab, host: &str, group: &str) {
    let end = std::time::Instant::now() + crate::common::LOG_LIMIT;
    while !run_in(lab, host, "ip", &["maddr", "show", "dev", "eth0"]).contains(group) {
        assert!(std::time::Instant::now() < end, "{host} never joined {group}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `dev` holds `group` for `sockets` sockets (`ip maddr`:
/// "users N" from two on).
fn wait_for_members(dev: &str, group: &str, sockets: usize) {
    let end = std::time::Instant::now() + crate::common::LOG_LIMIT;
    loop {
        let held = memberships(dev)
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(group))
            .map(|l| match l.split("users ").nth(1) {
                Some(n) => n.trim().parse().unwrap_or(0),
                None => 1,
            });
        if held.unwrap_or(0) >= sockets {
            return;
        }
        assert!(
            std::time::Instant::now() < end,
            "{sockets} joins of {group} never showed: {}",
            memberships(dev)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// nicbench's sender into an iperf 2 receiver and an agent at once: iperf
/// 2 reads our numbering (its total is every datagram the client sent,
/// warm-up included, plus its closing datagram) and our agent is not put
/// off by iperf 2's header in front of ours.
#[test]
fn an_iperf_2_receiver_counts_the_datagrams_nicbench_sends() {
    require!(iperf2_installed());
    let agent = AgentProcess::start(&[]);
    let group = unique_group();
    let (address, port) = group.split_once(':').unwrap();
    // Line-buffered, so that its report comes out while it runs on.
    let mut server = Reaped(
        Command::new("stdbuf")
            .args([
                "-oL",
                "iperf",
                "-s",
                "-u",
                "-B",
                &format!("{address}%lo"),
                "-p",
                port,
                "-y",
                "C",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start iperf -s"),
    );
    let reports = server.lines();
    wait_for_members("lo", address, 1);
    let receiver = format!("127.0.0.1:{}", agent.port);
    let doc = nicbench_json(&[
        "multicast",
        &receiver,
        "-g",
        &group,
        "--with-iperf2",
        "receivers",
        "-t",
        "1",
        "-b",
        "10M",
        "-l",
        "1000",
        "--join-wait",
        "300ms",
        "--json",
    ]);
    assert_eq!(doc["spec"]["params"]["with_iperf2"], "receivers");
    let sender = &doc["streams"][0]["sender"]["udp"];
    let sent = sender["datagrams"].as_u64().unwrap() + sender["warmup_datagrams"].as_u64().unwrap();
    assert!(sent > 0, "{sender}");
    let (total, lost) = iperf2_server_counts(&reports);
    // The first closing datagram carries -(sent + 1); each repeat one less,
    // and iperf 2 takes the first that arrives.
    assert!(
        (sent + 1..=sent + 10).contains(&total),
        "iperf 2 total {total}, we sent {sent}"
    );
    assert!(lost <= total, "iperf 2 lost {lost} of {total}");
    let r = &doc["receivers"][0];
    let udp = &r["result"]["sum"]["udp"];
    assert_eq!(
        udp["malformed_datagrams"], 0,
        "iperf 2's header in front is ours to skip: {r}"
    );
    assert_consistent(&doc, doc["sum"]["udp"]["sent_datagrams"].as_u64().unwrap());
}

/// iperf 2's sender into two agents: each takes iperf 2's count from its
/// numbering and closing datagram, and it agrees with what iperf 2 says it
/// sent ("Sent N datagrams": its data datagrams plus two).
#[test]
fn agents_count_what_an_iperf_2_sender_sends() {
    require!(iperf2_installed());
    let (a, b) = (AgentProcess::start(&[]), AgentProcess::start(&[]));
    let group = unique_group();
    let (address, port) = group.split_once(':').unwrap();
    let (ra, rb) = (format!("127.0.0.1:{}", a.port), format!("127.0.0.1:{}", b.port));
    let mut command = Command::new(crate::common::BIN);
    crate::common::clean_env(&mut command);
    let client = listening_for_iperf2(command, &[&ra, &rb], &group);
    // Both agents joined before iperf 2 sends its first datagram.
    wait_for_members("lo", address, 2);
    // 1500 datagrams of 1000 B at 10 Mbit/s: 1.2 s. -B keeps it on loopback.
    let out = Command::new("iperf")
        .args([
            "-c",
            address,
            "-B",
            "127.0.0.1",
            "-p",
            port,
            "-u",
            "-T",
            "1",
            "-b",
            "10M",
            "-l",
            "1000",
            "-n",
            "1500000",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    let iperf_sent = iperf2_sent(&said);
    let doc: Value = serde_json::from_str(
        &client
            .output_within(crate::common::COMMAND_LIMIT)
            .expect("nicbench ended"),
    )
    .expect("JSON");
    assert_eq!(doc["spec"]["params"]["with_iperf2"], "sender");
    assert_eq!(
        doc["spec"]["params"]["rate_bits_per_second"], 100_000_000,
        "-b (by default 100M) declares iperf 2's rate to the agents"
    );
    for r in doc["receivers"].as_array().unwrap() {
        let udp = &r["result"]["sum"]["udp"];
        let received = &r["result"]["streams"][0]["receiver"]["udp"]["received"];
        // Joined before the first datagram: iperf 2's whole numbering.
        assert_eq!(received["numbered_datagrams"], iperf_sent - 2, "{r}");
        assert_eq!(udp["sent_datagrams"], iperf_sent - 2, "{r}");
        let (got, lost) = (
            udp["received_datagrams"].as_u64().unwrap(),
            udp["lost_datagrams"].as_u64().unwrap(),
        );
        assert_eq!(got + lost, iperf_sent - 2, "{r}");
        assert!(
            received["lost_at_end_datagrams"].is_u64(),
            "the closing datagram arrived: {r}"
        );
        assert_eq!(udp["malformed_datagrams"], 0, "{r}");
        assert!(udp.get("one_way").is_none(), "iperf 2's clock is not the client's: {r}");
        assert!(r["join_latency_seconds"].as_f64().is_some(), "{r}");
    }
    let schema = crate::result_schema::schema();
    crate::result_schema::assert_valid(&schema, &doc, "a multicast document from iperf 2's sender");
    assert!(!memberships("lo").contains(address), "{}", memberships("lo"));
}

/// On a switch, both ways: host c's iperf 2 receiver counts what a's
/// client sends beside agent b; then c's iperf 2 sender feeds agent b, and
/// b's count of iperf 2's numbering agrees with what iperf 2 says it sent.
#[test]
fn on_a_switch_iperf_2_receives_from_and_sends_to_nicbench() {
    require_lab!();
    require!(iperf2_installed());
    let lab = crate::common::lab_builder().switch().hosts(3).build().unwrap();
    let group = unique_group();
    let (address, port) = group.split_once(':').unwrap();
    let mut server = Reaped(
        lab.command("c", "stdbuf")
            .args([
                "-oL",
                "iperf",
                "-s",
                "-u",
                "-B",
                &format!("{address}%eth0"),
                "-p",
                port,
                "-y",
                "C",
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start iperf -s in c"),
    );
    let reports = server.lines();
    wait_for_member_in(&lab, "c", address);
    let text = run_in(
        &lab,
        "a",
        crate::common::BIN,
        &[
            "multicast",
            "b",
            "-g",
            &group,
            "--with-iperf2",
            "receivers",
            "-t",
            "1",
            "-b",
            "20M",
            "--join-wait",
            "300ms",
            "--json",
        ],
    );
    let doc: Value = serde_json::from_str(&text).expect("JSON");
    let sender = &doc["streams"][0]["sender"]["udp"];
    let sent = sender["datagrams"].as_u64().unwrap() + sender["warmup_datagrams"].as_u64().unwrap();
    let (total, _) = iperf2_server_counts(&reports);
    assert!(
        (sent + 1..=sent + 10).contains(&total),
        "iperf 2 in c: total {total}, a sent {sent}"
    );
    assert_consistent(&doc, doc["sum"]["udp"]["sent_datagrams"].as_u64().unwrap());
    drop(server);

    // The other way: c sends with iperf 2, b receives with nicbench.
    let group = unique_group();
    let (address, port) = group.split_once(':').unwrap();
    let client = listening_for_iperf2(lab.command("a", crate::common::BIN), &["b"], &group);
    wait_for_member_in(&lab, "b", address);
    let c = lab.addr("c").to_string();
    let said = run_in(
        &lab,
        "c",
        "iperf",
        &[
            "-c", address, "-B", &c, "-p", port, "-u", "-T", "1", "-b", "20M", "-l", "1400", "-n", "2800000",
        ],
    );
    let iperf_sent = iperf2_sent(&said);
    let doc: Value = serde_json::from_str(
        &client
            .output_within(crate::common::COMMAND_LIMIT)
            .expect("a's client ended"),
    )
    .expect("JSON");
    let b = &doc["receivers"][0];
    let udp = &b["result"]["sum"]["udp"];
    assert_eq!(udp["sent_datagrams"], iperf_sent - 2, "iperf 2's data datagrams: {b}");
    assert_eq!(
        udp["received_datagrams"].as_u64().unwrap() + udp["lost_datagrams"].as_u64().unwrap(),
        iperf_sent - 2,
        "{b}"
    );
}

/// Two namespaces of this test joined by a veth pair, IPv6 only: the
/// host's loopback does not carry IPv6 multicast and the lab is IPv4.
/// Both go (with the pair) when dropped, also when the test fails.
struct V6Pair {
    a: String,
    b: String,
}

impl V6Pair {
    const A: &'static str = "fd00:77::1";
    const B: &'static str = "fd00:77::2";

    fn new() -> V6Pair {
        let id = std::process::id();
        let pair = V6Pair {
            a: format!("nbm6a-{id}"),
            b: format!("nbm6b-{id}"),
        };
        for ns in [&pair.a, &pair.b] {
            let added = Command::new("ip").args(["netns", "add", ns]).status().unwrap();
            assert!(added.success(), "ip netns add {ns}");
        }
        let (va, vb) = (format!("m6a{}", id % 100_000), format!("m6b{}", id % 100_000));
        let veth = Command::new("ip")
            .args([
                "link", "add", &va, "netns", &pair.a, "type", "veth", "peer", "name", &vb, "netns", &pair.b,
            ])
            .status()
            .unwrap();
        assert!(veth.success(), "ip link add {va} type veth");
        for (ns, dev, address) in [(&pair.a, &va, V6Pair::A), (&pair.b, &vb, V6Pair::B)] {
            for args in [
                vec!["link", "set", "lo", "up"],
                vec!["link", "set", dev, "up"],
                vec!["-6", "addr", "add", &format!("{address}/64"), "dev", dev, "nodad"],
            ] {
                let out = pair.exec(ns, "ip").args(&args).output().unwrap();
                assert!(out.status.success(), "ip {args:?} in {ns}: {}", stderr(&out));
            }
        }
        pair
    }

    fn exec(&self, ns: &str, program: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", ns, program]);
        command
    }
}

impl Drop for V6Pair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// IPv6 over a veth pair: an any-source group and a source-specific one
/// (MLDv2, MCAST_JOIN_SOURCE_GROUP) reach the receiver and add up; a
/// source-specific join that names another source takes nothing.
#[test]
fn ipv6_groups_any_source_and_source_specific_reach_their_receiver() {
    require_lab!();
    let pair = V6Pair::new();
    let agent = AgentProcess::start_with(pair.exec(&pair.b, crate::common::BIN), V6Pair::B, &[]);
    let receiver = format!("[{}]:{}", V6Pair::B, agent.port);
    let n = std::process::id() % 0xffff;
    let run = |group: &str, source: Option<&str>| -> Value {
        let mut args = vec![
            "multicast",
            &receiver,
            "-g",
            group,
            "-t",
            "0.5",
            "-b",
            "10M",
            "--join-wait",
            "300ms",
        ];
        if let Some(source) = source {
            args.extend(["--source", source]);
        }
        args.push("--json");
        let out = pair.exec(&pair.a, crate::common::BIN).args(&args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        serde_json::from_slice(&out.stdout).expect("JSON")
    };
    for (group, source) in [
        (format!("[ff15::77:{n:x}]:6000"), None),
        (format!("[ff3e::77:{n:x}]:6001"), Some(V6Pair::A)),
    ] {
        let doc = run(&group, source);
        let r = &doc["receivers"][0];
        assert!(r["join_latency_seconds"].as_f64().is_some(), "{group}: {r}");
        let sent = doc["sum"]["udp"]["sent_datagrams"].as_u64().unwrap();
        assert!(sent > 0, "{group}");
        assert_consistent(&doc, sent);
    }
    let doc = run(&format!("[ff3e::77:{n:x}]:6002"), Some("fd00:77::9"));
    let r = &doc["receivers"][0];
    assert_eq!(
        r["standing"], "never_joined",
        "another source's datagrams are filtered: {r}"
    );
    assert!(
        r["verdict"].as_str().unwrap().contains("from fd00:77::9 only"),
        "the words name the source it took: {r}"
    );
    assert!(doc["sum"]["udp"]["sent_datagrams"].as_u64().unwrap() > 0);
}

/// The section of a report that `id` opens, up to its end.
fn section<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html
        .find(&format!("<section id=\"{id}\">"))
        .unwrap_or_else(|| panic!("no section {id}"));
    let end = start + html[start..].find("</section>").unwrap();
    &html[start..end]
}

/// Issue 69: a group test's receivers in the report. Three agents on
/// loopback receive one group; `report` over the database draws one
/// chart of them with a bar per receiver, named by its agent, each
/// bar's loss as its run stored it, the slowest marked, and a table row
/// per receiver with its stored counts; and the page draws in Chromium.
#[test]
fn the_report_draws_a_bar_per_receiver_of_a_group_test_with_its_stored_loss() {
    let agents = [
        AgentProcess::start(&[]),
        AgentProcess::start(&[]),
        AgentProcess::start(&[]),
    ];
    let names: Vec<String> = agents.iter().map(|a| format!("127.0.0.1:{}", a.port)).collect();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db").display().to_string();
    let mut args = vec!["multicast"];
    args.extend(names.iter().map(String::as_str));
    let group = unique_group();
    args.extend([
        "--db",
        &db,
        "-g",
        &group,
        "-t",
        "0.5",
        "-b",
        "10M",
        "-l",
        "1000",
        "--join-wait",
        "200ms",
    ]);
    let out = nicbench(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = dir.path().join("report.html");
    let out = nicbench(&["report", "--db", &db, "-o", page.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    let part = section(&html, "receivers");
    assert_eq!(part.matches("<svg").count(), 1, "one test, one chart");
    assert!(
        part.contains("<title id=") && part.contains(&format!("multicast to {group}, ")),
        "titled by its group: {part}"
    );
    assert_eq!(part.matches("data-tip=").count(), 3, "a bar per receiver");
    assert!(part.contains("sender sent "), "the sender's line in the legend");

    // Each receiver as its run was stored: its name, its loss over its
    // bar, its counts in its row; the one tagged slowest marked.
    let store = nicbench::store::Store::open_read_only(std::path::Path::new(&db)).unwrap();
    let runs = store.runs(&Default::default()).unwrap();
    assert_eq!(runs.len(), 3);
    let mut slowest = 0;
    for name in &names {
        let run = runs
            .iter()
            .find(|r| r.tags.iter().any(|t| t.key == "agent" && &t.value == name))
            .unwrap_or_else(|| panic!("no run of {name}"));
        let doc = store.run(run.id).unwrap().document;
        let udp = &doc["sum"]["udp"];
        let tagged_slowest = run.tags.iter().any(|t| t.key == "slowest" && t.value == "true");
        let loss = format!("{:.2}% lost", udp["loss_percent"].as_f64().unwrap());
        let label = match tagged_slowest {
            true => format!("slowest, {loss}"),
            false => loss,
        };
        assert!(part.contains(&format!(">{label}</text>")), "{name}: {label}");
        let row = &part[part
            .find(&format!("<th scope=\"row\">{name}</th>"))
            .expect("a row per receiver")..];
        let row = &row[..row.find("</tr>").unwrap()];
        for count in ["received_datagrams", "lost_datagrams"] {
            let value = udp[count].as_u64().unwrap();
            assert!(
                row.contains(&format!("data-v=\"{value}\">{value}<")),
                "{name} {count}: {row}"
            );
        }
        if tagged_slowest {
            slowest += 1;
            assert!(row.contains("slowest"), "{row}");
        }
    }
    assert_eq!(slowest, 1);

    let browser = require!(crate::chart::chromium());
    let r = crate::chart::inspect_on_a_phone(
        &browser,
        &dir.path().join("profile"),
        &dir.path().join("inspected.html"),
        &html,
    );
    let charts = r["charts"].as_array().unwrap();
    let drawn = charts
        .iter()
        .find(|c| c["title"].as_str().unwrap().contains("received rate per receiver"))
        .expect("the receivers' chart drawn");
    assert!(drawn["marks"].as_u64().unwrap() >= 3, "{drawn}");
}
