//! `nicbench udp` against a real agent on loopback.

use std::net::{TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use nicbench::model::Party;
use nicbench::probe::cpu::ProcStat;
use nicbench::protocol::channel::Channel;
use nicbench::protocol::{token_from_hex, Hello, Message, MAX_AGENT_FRAME};
use nicbench::side_runner::{run_side, TrialPlan};
use nicbench::workload::udp::result::{self as udp_result, UdpEnd};
use nicbench::workload::{self, ClientNet, Direction, SideOptions, TestSpec};
use serde_json::Value;

use super::common::*;

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is not a number"))
}

/// Per stream and in the sum: received + lost = sent, by the sender's own
/// count, and each end's rate is its bytes over its own seconds (the clock
/// the pacer keeps to); returns the summed UDP result.
fn assert_udp_accounts(run: &Value) -> &Value {
    for s in run["streams"].as_array().unwrap() {
        for end in [&s["sender"], &s["receiver"]] {
            let by_own_clock = num(&end["bytes"]) * 8.0 / num(&end["seconds"]);
            let rate = num(&end["bits_per_second"]);
            assert!((rate - by_own_clock).abs() <= 1e-6 * by_own_clock.max(1.0), "{end}");
        }
        let u = &s["udp"];
        assert_eq!(
            u["sent_datagrams"], s["sender"]["udp"]["datagrams"],
            "stream {}: the sent count is the sender's own",
            s["stream_id"]
        );
        assert_eq!(u["received_datagrams"], s["receiver"]["udp"]["datagrams"]);
        assert_eq!(
            num(&u["received_datagrams"]) + num(&u["lost_datagrams"]),
            num(&u["sent_datagrams"]),
            "stream {}",
            s["stream_id"]
        );
        assert!(num(&u["sent_datagrams"]) > 0.0);
        assert!(s["receiver"]["udp"]["received"]["jitter_us"].is_number());
        assert_one_way(s);
    }
    let sum = &run["sum"]["udp"];
    assert_eq!(
        num(&sum["received_datagrams"]) + num(&sum["lost_datagrams"]),
        num(&sum["sent_datagrams"])
    );
    sum
}

/// A stream's one-way delay: every datagram counted was timed, the
/// quantiles are in order, and on one kernel (every test here) the
/// clocks are one: the offset is 0 exactly, its bound 0, and no delay
/// reads below zero.
fn assert_one_way(s: &Value) {
    let received = &s["udp"]["received_datagrams"];
    let transit = &s["receiver"]["udp"]["received"]["transit"];
    let delay = &s["udp"]["one_way"];
    if received == 0 {
        return;
    }
    assert_eq!(&transit["datagrams"], received, "stream {}: {transit}", s["stream_id"]);
    assert_one_clock_delay(delay, received, &format!("stream {}", s["stream_id"]));
}

#[test]
fn offered_100_mbit_is_never_exceeded_and_counts_agree_across_ends() {
    // How close the pacer gets to the offered rate is a figure for
    // bench/timing-figures.sh; here only what a slow or loaded machine
    // cannot change: by the sender's own clock (its bytes over its own
    // seconds, checked in assert_udp_accounts) the pacer never sends more
    // than 2% faster than offered (a loaded machine only sends slower), and
    // every datagram is accounted for.
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("udp", &["-t", "2", "-b", "100M", "-w", "4M"]);
    assert_eq!(run["workload"], "udp");
    let sum = assert_udp_accounts(&run);
    let sender = num(&sum["sender_bits_per_second"]);
    assert!(sender > 0.0 && sender <= 100e6 * 1.02, "sender pushed {sender} bit/s");
    let end = &run["streams"][0]["sender"];
    let wire_bytes = num(&end["udp"]["datagrams"]) * num(&end["udp"]["datagram_bytes"]);
    assert_eq!(wire_bytes, num(&end["bytes"]), "bytes are whole datagrams: {end}");
    assert_eq!(run["streams"][0]["sender"]["udp"]["offered_bits_per_second"], 100e6);
    assert!(run["streams"][0]["receiver"]["udp"]["received"]["socket_drops"].is_u64());
}

#[test]
fn reverse_and_bidir_streams_each_account_for_every_datagram() {
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("udp", &["-t", "1", "-b", "50M", "-P", "2", "-R"]);
    assert!(run["streams"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["flow"] == "agent_to_client"));
    assert_udp_accounts(&run);
    let run = agent.run_json("udp", &["-t", "1", "-b", "50M", "--bidir"]);
    assert_eq!(run["streams"].as_array().unwrap().len(), 2);
    assert_udp_accounts(&run);
    assert!(run["sum"]["client_to_agent"]["udp"].is_object());
    assert!(run["sum"]["agent_to_client"]["udp"].is_object());
}

/// `-n` and `-k` (issue 42): each direction sends exactly its count,
/// shared out among its streams, and the receivers end on their own once
/// everything is in or the socket went quiet, naming the tail they lost.
#[test]
fn a_count_run_sends_exactly_its_datagrams_and_both_ends_agree() {
    let agent = AgentProcess::start(&[]);
    // 1001 datagrams per direction over 2 streams each way: 501 + 500.
    let run = agent.run_json("udp", &["-k", "1001", "-b", "200M", "-P", "2", "--bidir"]);
    assert_eq!(run["spec"]["bytes"], 1001 * 1400);
    assert_udp_accounts(&run);
    for direction in ["client_to_agent", "agent_to_client"] {
        let u = &run["sum"][direction]["udp"];
        assert_eq!(u["sent_datagrams"], 1001, "{direction}: {u}");
        assert!(num(&u["lost_at_end_datagrams"]) <= num(&u["lost_datagrams"]), "{u}");
    }
    let mut quotas: Vec<u64> = run["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["udp"]["sent_datagrams"].as_u64().unwrap())
        .collect();
    quotas.sort_unstable();
    assert_eq!(quotas, [500, 500, 501, 501]);
    // -n rounds up to whole datagrams: 1 MiB of 1400 B is 749 of them;
    // unpaced, and in reverse.
    let run = agent.run_json("udp", &["-n", "1M", "-b", "max", "-R"]);
    let u = assert_udp_accounts(&run);
    assert_eq!(u["sent_datagrams"], 749, "{u}");
    assert!(u["lost_at_end_datagrams"].is_u64(), "{u}");
    // A timed run knows no tail.
    let run = agent.run_json("udp", &["-t", "0.5", "-b", "10M"]);
    assert!(run["sum"]["udp"].get("lost_at_end_datagrams").is_none());
    // The header says what the count is.
    let out = nicbench(&[
        "udp",
        "127.0.0.1",
        "-p",
        &agent.port.to_string(),
        "-k",
        "10",
        "--no-save",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("1 stream client->agent, 14.00 kB per direction, 10 datagrams of 1400 B per direction"),
        "{text}"
    );
}

#[test]
fn gso_gro_and_max_rate_are_recorded() {
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("udp", &["-t", "1", "-b", "max", "--gso", "--gro"]);
    assert_udp_accounts(&run);
    let s = &run["streams"][0];
    assert_eq!(s["sender"]["udp"]["segmentation_offload"], true);
    assert_eq!(s["receiver"]["udp"]["segmentation_offload"], true);
    assert!(s["sender"]["udp"].get("offered_bits_per_second").is_none());
    assert!(num(&s["sender"]["udp"]["datagrams_per_syscall"]) > 1.0);
    assert_eq!(run["spec"]["params"]["gso"], true);
}

fn sysctl(name: &str) -> u64 {
    let path = format!("/proc/sys/net/core/{name}");
    std::fs::read_to_string(&path).unwrap().trim().parse().unwrap()
}

#[test]
fn receivers_ask_for_4_mib_unless_the_user_sets_a_buffer() {
    let agent = AgentProcess::start(&[]);
    let granted = |run: &Value| run["streams"][0]["receiver"]["socket"]["receive_buffer_bytes"].as_u64();
    // Linux caps SO_RCVBUF at net.core.rmem_max and reports twice the size set.
    let default = 2 * sysctl("rmem_max").min(4 << 20);
    let run = agent.run_json("udp", &["-t", "1", "-b", "10M"]);
    assert_eq!(granted(&run), Some(default), "agent receiving");
    let run = agent.run_json("udp", &["-t", "1", "-b", "10M", "-R"]);
    assert_eq!(granted(&run), Some(default), "client receiving");
    // The user's size wins, on either end.
    let asked = 2 * sysctl("rmem_max").min(64 << 10);
    let run = agent.run_json("udp", &["-t", "1", "-b", "10M", "--remote-rcvbuf", "64K"]);
    assert_eq!(granted(&run), Some(asked));
    let run = agent.run_json("udp", &["-t", "1", "-b", "10M", "-R", "--rcvbuf", "64K"]);
    assert_eq!(granted(&run), Some(asked));
    assert_udp_accounts(&run);
}

#[test]
fn the_text_summary_shows_both_rates_and_the_loss() {
    let agent = AgentProcess::start(&[]);
    let out = nicbench(&["udp", "127.0.0.1", "-p", &agent.port_arg(), "-t", "1", "-b", "20M"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with("UDP client->agent")).expect(&text);
    // What was offered beside what the sender reached.
    assert!(
        line.contains("offered 20.00 Mbit/s, sender reached") && line.contains("receiver got"),
        "{line}"
    );
    // LOST in capitals only when something was lost.
    let lost_something = !line.contains(" 0.00% (0 of ");
    assert!(
        line.contains("Mbit/s") && line.contains(if lost_something { "LOST" } else { "lost" }) && line.contains('%'),
        "{line}"
    );
    // Datagram sockets are not autotuned; the receiver's buffer is nicbench's.
    assert!(
        text.contains("receive: 4 MiB asked") && !text.contains("autotuning"),
        "{text}"
    );
    let header = text.lines().find(|l| l.starts_with("[ ID]")).expect(&text);
    assert!(!header.contains("retr") && !header.contains("cwnd"), "{header}");
    // A 1400-byte datagram reads in bytes, not as a fraction of a KiB.
    assert!(text.contains("1400 B datagrams"), "{text}");
    // The one-way delay, on one kernel's one clock.
    let one_way = text.lines().find(|l| l.starts_with("    one-way delay ")).expect(&text);
    assert!(
        one_way.starts_with("    one-way delay p50 ") && one_way.ends_with("; one clock)"),
        "{one_way}"
    );
    // Without TCP columns the table rows end with the receiver's rate.
    for line in text.lines() {
        assert_eq!(line, line.trim_end(), "trailing blanks");
    }
}

#[test]
fn bad_udp_options_are_refused_with_exit_code_2() {
    for (args, expect) in [
        (&["-b", "0"][..], "bitrate"),
        (&["-b", "lots"][..], "bitrate"),
        (&["-l", "65508"][..], "65507"),
        (&["-l", "27"][..], "28"),
        (&["-n", "1M", "-t", "2"][..], "cannot be used with '--time"),
        (&["-k", "0"][..], "--blocks"),
        (&["-k", "3", "-n", "1M"][..], "cannot be used with"),
        (
            &["-k", "1", "-P", "2"][..],
            "at least one datagram for each of the 2 streams",
        ),
        (
            &["-k", "18446744073709551615"][..],
            "-k/--blocks must be fewer datagrams",
        ),
    ] {
        let mut argv = vec!["udp", "127.0.0.1", "-p", "1"];
        argv.extend_from_slice(args);
        let out = nicbench(&argv);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(expect), "{args:?}: {}", stderr(&out));
    }
}

/// UDP ports the process `pid` has open (from its fds and /proc/net/udp).
fn udp_ports_of(pid: u32) -> Vec<u16> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|l| {
                    l.to_str()?
                        .strip_prefix("socket:[")?
                        .strip_suffix(']')
                        .map(String::from)
                })
                .collect()
        })
        .unwrap_or_default();
    let table = std::fs::read_to_string("/proc/net/udp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.len() > 9 && inodes.iter().any(|i| i == f[9]))
                .then(|| u16::from_str_radix(f[1].rsplit(':').next()?, 16).ok())
                .flatten()
        })
        .collect()
}

#[test]
fn junk_sprayed_at_the_agent_port_during_a_test_changes_nothing() {
    let agent = AgentProcess::start(&[]);
    let pid = agent.child.id();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = std::sync::Arc::clone(&stop);
    let sprayer = std::thread::spawn(move || {
        let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut sent = 0u64;
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            for port in udp_ports_of(pid) {
                let _ = junk.send_to(
                    b"NBUD\x01\x00\x00\x00 not really a datagram of ours",
                    ("127.0.0.1", port),
                );
                let _ = junk.send_to(&[0u8; 3], ("127.0.0.1", port));
                sent += 2;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        sent
    });
    let run = agent.run_json("udp", &["-t", "2", "-b", "20M"]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sprayed = sprayer.join().unwrap();
    assert!(sprayed > 0, "the test never saw the agent's UDP port");
    let sum = assert_udp_accounts(&run);
    assert!(num(&sum["received_datagrams"]) <= num(&sum["sent_datagrams"]));
}

/// Drives the control protocol by hand so that junk reaches the agent's
/// port before the client registers: every piece must be counted and ignored.
#[test]
fn foreign_and_malformed_datagrams_before_registration_are_counted_and_ignored() {
    let agent = AgentProcess::start(&[]);
    let spec = TestSpec {
        workload: "udp".into(),
        duration_seconds: 1.0,
        bytes: None,
        omit_seconds: 0.0,
        streams: 1,
        direction: Direction::Forward,
        message_bytes: 1000,
        interval_seconds: 1.0,
        client: SideOptions::default(),
        agent: SideOptions::default(),
        params: serde_json::json!({"rate_bits_per_second": 10_000_000u64}),
        links: Vec::new(),
    };
    let stream = TcpStream::connect(("127.0.0.1", agent.port)).unwrap();
    let mut channel = Channel::new(stream, MAX_AGENT_FRAME);
    let wait = Duration::from_secs(10);
    channel
        .send(&Message::Hello(Hello::ours(nicbench::workload::names())))
        .unwrap();
    assert!(matches!(channel.recv(wait, "hello").unwrap(), Message::Hello(_)));
    channel
        .send(&Message::TestRequest {
            spec: spec.clone(),
            wait_seconds: 0.0,
        })
        .unwrap();
    let Message::Accepted { token, data_ports, .. } = channel.recv(wait, "accepted").unwrap() else {
        panic!("not accepted")
    };
    let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
    let wrong_token = nicbench::workload::transport::udp::wire::register_datagram(1, 0, &[7u8; 16]);
    for junk in [&b"hello"[..], &[0u8; 2000][..], &wrong_token[..]] {
        stranger.send_to(junk, ("127.0.0.1", data_ports[0])).unwrap();
    }
    let net = ClientNet {
        agent_ip: "127.0.0.1".parse().unwrap(),
        data_ports: data_ports.clone(),
        token: token_from_hex(&token).unwrap(),
        bind: None,
        routes: Default::default(),
        same_kernel: true,
        settings: Default::default(),
        agent_tls: None,
    };
    let side = workload::find("udp").unwrap().client_side(&spec, &net).unwrap();
    assert!(matches!(channel.recv(wait, "ready").unwrap(), Message::Ready));
    // Once registered, the kernel filters strangers before they reach us.
    stranger.send_to(b"late junk", ("127.0.0.1", data_ports[0])).unwrap();
    channel.send(&Message::Start).unwrap();
    let plan = TrialPlan {
        host: Party::Client,
        spec: &spec,
        hard_deadline: nicbench::side_runner::hard_deadline(&spec, Instant::now(), None),
        wait_for_peer_report: true,
        interrupted: &|| None,
        on_interval: None,
        on_progress: None,
        stall_check: None,
    };
    let outcome = run_side(side, plan, &mut channel, &ProcStat).unwrap();
    let agent_report = outcome.peer.unwrap();
    let receiver: UdpEnd = agent_report.streams[0].extras.get(udp_result::KEY).unwrap();
    let received = receiver.received.unwrap();
    assert_eq!(received.refused_datagrams, 3);
    assert_eq!(received.malformed_datagrams, 0);
    let sent = outcome.local.streams[0]
        .extras
        .get::<UdpEnd>(udp_result::KEY)
        .unwrap()
        .datagrams;
    assert!(receiver.datagrams <= sent && receiver.datagrams > 0);
}

/// Three namespaces, a -> r -> b, the router's egress towards b limited to
/// 100 Mbit/s by tbf. Offered 200 Mbit/s: the sender pushes ~200, the
/// receiver gets ~100 (less the Ethernet/IP/UDP headers tbf also counts),
/// about half is lost, and it is lost in the router, not at the receiver.
#[test]
fn lab_bottleneck_shows_sender_rate_receiver_rate_and_the_loss() {
    require_lab!();
    let lab = lab_builder()
        .via_router()
        .rate(100_000_000)
        .build()
        .expect("build the lab");
    let port = lab.agent_port().to_string();
    let out = lab
        .command("a", BIN)
        .args(["udp", "b", "-p", &port, "-t", "3", "-b", "200M", "-l", "1400", "--json"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sum = assert_udp_accounts(&run);
    let sender = num(&sum["sender_bits_per_second"]) / 1e6;
    let receiver = num(&sum["receiver_bits_per_second"]) / 1e6;
    eprintln!("through the 100 Mbit/s bottleneck: sent {sender:.1}, received {receiver:.1} Mbit/s");
    // Bounds a loaded machine cannot break (it only sends slower): the
    // sender keeps under its offer, the shaper lets at most its rate
    // through. The figures themselves are in bench/timing-figures.sh.
    assert!(sender <= 200.0 * 1.02, "sender pushed {sender} Mbit/s");
    assert!(
        receiver <= 102.0,
        "receiver got {receiver} Mbit/s through a 100 Mbit/s shaper"
    );
    let lost_before_receiver = num(&sum["lost_datagrams"]) - num(&sum["receiver_socket_drops"]);
    assert!(
        lost_before_receiver > 0.0,
        "the router dropped most of it, not the receiving socket: {sum}"
    );
    // The router's shaper, read over the trial, dropped what it could not
    // carry, and carried (with headers) every byte the receiver got.
    let shaper = &run["path_shaper"];
    assert_eq!(shaper["name"], run["line_rate"]["shaper_name"], "{shaper}");
    assert!(num(&shaper["dropped_packets"]) > 0.0, "{shaper}");
    let received = num(&run["sum"]["receiver"]["bytes"]);
    assert!(
        num(&shaper["sent_bytes"]) >= received,
        "{shaper} against {received} B received"
    );
    // A tbf drops only when its queue is full, and the datagram admitted
    // last before a drop waits out the whole queue (less the burst it may
    // send at once): the slowest datagram's one-way delay shows the queue.
    // Only delay can be added to it (a starved host, a late stamp), so
    // half the queue's time is a floor any machine keeps.
    let one_way = &sum["one_way"];
    let queue = num(&shaper["queue_seconds"]);
    assert!(
        num(&one_way["max_seconds"]) + num(&one_way["clock_bound_seconds"]) >= queue / 2.0,
        "a full {queue} s queue, yet the slowest datagram's one-way delay: {one_way}"
    );
    // The verdict names the path, not the hosts: the shaped link is the
    // cause, the loss before the receiving socket its consequence.
    let verdict = &run["verdict"];
    assert_eq!(verdict["kind"], "link_bound", "{verdict}");
    assert_eq!(verdict["side"], "path", "{verdict}");
    let evidence = verdict["evidence"].as_array().unwrap();
    assert!(
        evidence
            .iter()
            .any(|e| e["kind"] == "path_loss" && e["role"] == "consequence" && e["explained_by"] == 0),
        "{verdict}"
    );
}
