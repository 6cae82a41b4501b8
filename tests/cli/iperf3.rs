//! iperf3 interop, both ways, against the real iperf3 binary (Debian's
//! 3.12, installed by .ci/run): nicbench's client against `iperf3 -s`, and
//! `iperf3 -c` against nicbench's agent; TCP and UDP, forward, reverse and
//! bidir, 1 and 4 streams. Counts are compared, never timings. Plus the
//! hostile-client rules on the agent's iperf3 port.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::{nicbench, stderr, AgentProcess};

/// Ok when Debian's iperf3 is installed, for `require!`.
pub fn installed() -> Result<(), String> {
    crate::common::tool("iperf3", &["--version"], "apt-get install iperf3")
}

/// A port no one listens on right now (TCP; UDP tests use the same number).
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// True when a TCP socket listens on 127.0.0.1:`port` (/proc/net/tcp).
pub(crate) fn listening(port: u16) -> bool {
    listener_inode(port).is_some()
}

/// The inode of the socket listening on 127.0.0.1:`port` (/proc/net/tcp),
/// if one does: a listener closed and opened anew has another.
pub(crate) fn listener_inode(port: u16) -> Option<u64> {
    let wanted = format!("0100007F:{port:04X}");
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 9 && f[1] == wanted && f[3] == "0A").then(|| f[9].parse().ok())?
    })
}

/// Waits until a socket listens on 127.0.0.1:`port` and is not the
/// listener `previous` (its inode): `iperf3 -s` closes its listening
/// socket after every test, also a refused one, and opens a new one for
/// the next, so a client that connects before that lands in the old
/// socket's queue and is reset when it closes. Returns the new inode.
pub(crate) fn wait_for_new_listener(port: u16, previous: Option<u64>) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match listener_inode(port) {
            Some(inode) if Some(inode) != previous => return inode,
            _ => assert!(
                std::time::Instant::now() < deadline,
                "iperf3 -s did not listen anew on {port} (listener before: {previous:?})"
            ),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An iperf3 process, killed when dropped (also when a test fails).
pub(crate) struct Iperf3(pub(crate) Option<Child>);

impl Iperf3 {
    /// `iperf3 -s -1 -J -p PORT` on loopback; waits until it listens.
    fn server(port: u16) -> Iperf3 {
        let child = Command::new("iperf3")
            .args(["-s", "-1", "-J", "-B", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start iperf3 -s");
        let guard = Iperf3(Some(child));
        // Not a probe connection: `iperf3 -s -1` would take it for its one test.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !listening(port) {
            assert!(
                std::time::Instant::now() < deadline,
                "iperf3 -s did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        guard
    }

    /// The server's -J document once it has served its one test.
    fn output(mut self) -> Value {
        let child = self.0.take().unwrap();
        let out = child.wait_with_output().unwrap();
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "iperf3 -s -J output is not JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }
}

impl Drop for Iperf3 {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `iperf3 -c 127.0.0.1 -p PORT -J ARGS`, with a hard timeout.
pub(crate) fn iperf3_client(port: u16, args: &[&str]) -> Value {
    let mut child = Command::new("timeout")
        .args(["60", "iperf3", "-c", "127.0.0.1", "-p", &port.to_string(), "-J"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start iperf3 -c");
    let mut stdout = String::new();
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    let _ = child.wait();
    let doc: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("iperf3 -J: {e}: {stdout}"));
    assert!(
        doc.get("error").is_none(),
        "iperf3 -c {args:?} failed: {}",
        doc["error"]
    );
    doc
}

fn run_against_iperf3(workload: &str, args: &[&str]) -> (Value, Value) {
    let port = free_port();
    let server = Iperf3::server(port);
    let target = format!("iperf3://127.0.0.1:{port}");
    let mut argv = vec![workload, target.as_str(), "-t", "1", "--json"];
    argv.extend_from_slice(args);
    let out: Output = nicbench(&argv);
    assert!(out.status.success(), "nicbench {argv:?}: {}", stderr(&out));
    let ours: Value = serde_json::from_slice(&out.stdout).unwrap();
    (ours, server.output())
}

pub(crate) fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn nicbench_client_against_iperf3_server_tcp() {
    require!(installed());
    let validator = crate::result_schema::schema();
    for (args, streams) in [
        (vec![], 1usize),
        (vec!["-P", "4"], 4),
        (vec!["-R"], 1),
        (vec!["-R", "-P", "4"], 4),
        (vec!["--bidir"], 2),
        (vec!["--bidir", "-P", "4"], 8),
    ] {
        let (ours, server) = run_against_iperf3("tcp", &args);
        crate::result_schema::assert_valid(&validator, &ours, &format!("tcp iperf3:// {args:?}"));
        assert_eq!(ours["peer_protocol"]["protocol"], "iperf3");
        assert_eq!(ours["peer_protocol"]["peer_role"], "server");
        assert_eq!(ours["streams"].as_array().unwrap().len(), streams, "{args:?}");
        assert!(n(&ours["sum"]["receiver"]["bytes"]) > 0, "{args:?}");
        // What the server reported to us is what it printed itself.
        let end = &server["end"];
        let peer_bytes: u64 = ours["peer_protocol"]["peer_streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| n(&s["bytes"]))
            .sum();
        if args.contains(&"--bidir") {
            // The server's -J splits bidir sums by its own roles; both flows moved data.
            for flow in ["client_to_agent", "agent_to_client"] {
                assert!(n(&ours["sum"][flow]["receiver"]["bytes"]) > 0, "{args:?} {flow}");
            }
        } else {
            let server_bytes = if args.contains(&"-R") {
                n(&end["sum_sent"]["bytes"])
            } else {
                n(&end["sum_received"]["bytes"])
            };
            assert_eq!(peer_bytes, server_bytes, "{args:?}");
        }
        // TCP delivers what was sent: the receiver never counts more.
        for s in ours["streams"].as_array().unwrap() {
            assert!(n(&s["receiver"]["bytes"]) <= n(&s["sender"]["bytes"]) + n(&s["sender"]["omitted_bytes"]));
        }
    }
}

#[test]
fn nicbench_client_against_iperf3_server_udp() {
    require!(installed());
    for (args, streams) in [
        (vec!["-b", "20M"], 1usize),
        (vec!["-b", "10M", "-P", "4"], 4),
        (vec!["-b", "20M", "-R"], 1),
        (vec!["-b", "10M", "-R", "-P", "4"], 4),
        (vec!["-b", "20M", "--bidir"], 2),
    ] {
        let (ours, server) = run_against_iperf3("udp", &args);
        assert_eq!(ours["streams"].as_array().unwrap().len(), streams, "{args:?}");
        let udp = &ours["sum"]["udp"];
        assert!(n(&udp["received_datagrams"]) > 0, "{args:?}: {udp}");
        assert!(
            n(&udp["received_datagrams"]) <= n(&udp["sent_datagrams"]),
            "{args:?}: {udp}"
        );
        assert!(server["end"].is_object(), "{args:?}");
        // The server's loss count for our datagrams is the loss we report.
        if args.len() == 2 {
            assert_eq!(
                n(&server["end"]["sum"]["lost_packets"]),
                n(&ours["peer_protocol"]["peer_streams"][0]["lost_datagrams"]),
            );
        }
    }
}

/// `--discard` against an iperf3 server: with -R our receiver discards
/// (MSG_TRUNC, not one byte copied into its buffer) and the spec says so;
/// forward, where only the server could discard and would not say whether
/// it did, and -Z are refused with what to do.
#[test]
fn a_discarding_receive_against_an_iperf3_server_runs_on_our_end_only() {
    require!(installed());
    let (ours, server) = run_against_iperf3("tcp", &["-R", "--discard"]);
    assert_eq!(ours["spec"]["params"]["discard"], true);
    let receiver = &ours["streams"][0]["receiver"];
    assert_eq!(receiver["tcp"]["receive_buffer_untouched"], true, "{receiver}");
    assert!(n(&receiver["bytes"]) > 0);
    assert_eq!(
        n(&server["end"]["sum_sent"]["bytes"]),
        n(&ours["peer_protocol"]["peer_streams"][0]["bytes"])
    );
    let port = free_port();
    let _server = Iperf3::server(port);
    let target = format!("iperf3://127.0.0.1:{port}");
    for (args, says) in [
        (&["--discard"][..], "only with -R"),
        (&["-Z", "-R"][..], "-Z/--zerocopy"),
    ] {
        let mut argv = vec!["tcp", target.as_str(), "-t", "1"];
        argv.extend_from_slice(args);
        let out = nicbench(&argv);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

/// iperf3 runs plain TCP and UDP: a test over another transport is
/// refused before anything is sent (it ran plain TCP and was saved as the
/// transport asked), and so is UDP with GSO/GRO. Nothing listens on the
/// port: the refusal comes before the connection.
#[test]
fn a_test_iperf3_cannot_run_is_refused_before_it_connects() {
    let target = format!("iperf3://127.0.0.1:{}", free_port());
    for (argv, says) in [
        (&["tcp", "--transport", "tls"][..], "runs over TLS, and iperf3"),
        (&["tcp", "--mptcp"][..], "runs over MPTCP, and iperf3"),
        (&["tcp", "--transport", "quic"][..], "runs over QUIC, and iperf3"),
        (&["udp", "--gso"][..], "--gso/--gro"),
        (&["rr"][..], "no iperf3 equivalent"),
    ] {
        let mut args = vec![argv[0], target.as_str(), "-t", "1"];
        args.extend_from_slice(&argv[1..]);
        let out = nicbench(&args);
        assert_eq!(out.status.code(), Some(2), "{argv:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{argv:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("refused"), "{argv:?}: {}", stderr(&out));
    }
}

#[test]
fn a_busy_or_absent_iperf3_server_is_a_clear_error() {
    require!(installed());
    let port = free_port();
    let out = nicbench(&["tcp", &format!("iperf3://127.0.0.1:{port}"), "-t", "1"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("iperf3 -s"), "{}", stderr(&out));
    let out = nicbench(&["tcp", "iperf3://127.0.0.1:x"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

fn agent() -> (AgentProcess, u16) {
    agent_with(&[])
}

pub(crate) fn agent_with(extra: &[&str]) -> (AgentProcess, u16) {
    let port = free_port();
    let p = port.to_string();
    let mut args = vec!["--iperf3-port", p.as_str()];
    args.extend_from_slice(extra);
    let agent = AgentProcess::start(&args);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(std::time::Instant::now() < deadline, "the iperf3 port did not open");
        std::thread::sleep(Duration::from_millis(20));
    }
    (agent, port)
}

#[test]
fn iperf3_clients_against_the_agent_tcp() {
    require!(installed());
    let (_agent, port) = agent();
    for (args, streams) in [
        (vec![], 1usize),
        (vec!["-P", "4"], 4),
        (vec!["-R"], 1),
        (vec!["-R", "-P", "4"], 4),
        (vec!["--bidir"], 2),
        (vec!["--bidir", "-P", "4"], 8),
    ] {
        let mut argv = vec!["-t", "1", "--get-server-output"];
        argv.extend_from_slice(&args);
        let doc = iperf3_client(port, &argv);
        let end = &doc["end"];
        assert_eq!(end["streams"].as_array().unwrap().len(), streams, "{args:?}");
        let sent = n(&end["sum_sent"]["bytes"]);
        let received = n(&end["sum_received"]["bytes"]);
        assert!(
            received > 0 && received <= sent,
            "{args:?}: sent {sent}, received {received}"
        );
        let text = doc["server_output_text"].as_str().unwrap_or_default();
        assert!(text.contains("peer: iperf3 client version 3."), "{args:?}: {text}");
    }
}

/// iperf3's `-b` on TCP paces each stream. The agent honoured it only for
/// UDP: its TCP senders (`-R`) ran unpaced, and an agent with --max-rate
/// refused every TCP client. Now its senders are paced by the kernel and
/// the rate is the test's offer.
#[test]
fn an_iperf3_clients_tcp_rate_paces_the_agents_senders() {
    require!(installed());
    let (_agent, port) = agent_with(&["--max-rate", "400M"]);
    let doc = iperf3_client(port, &["-t", "1", "-R", "-P", "2", "-b", "100M", "--get-server-output"]);
    let end = &doc["end"];
    let received = n(&end["sum_received"]["bytes"]);
    let seconds = end["sum_received"]["seconds"].as_f64().unwrap();
    let rate = received as f64 * 8.0 / seconds;
    // A ceiling, whatever the machine's load: 2 streams x 100 Mbit/s.
    assert!(received > 0 && rate < 250e6, "{rate} bit/s");
    let text = doc["server_output_text"].as_str().unwrap_or_default();
    assert!(text.contains("paced 100.00 Mbit/s per stream"), "{text}");
}

/// Regression: a refused iperf3 client read only iperf3's own text for
/// the error number; with `--get-server-output` it now reads our reason
/// as the server's output, and still fails.
#[test]
fn a_refused_iperf3_client_that_asks_for_the_servers_output_reads_why() {
    require!(installed());
    let (_agent, port) = agent_with(&["--max-duration", "5s"]);
    let out = Command::new("timeout")
        .args([
            "60",
            "iperf3",
            "-c",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "30",
            "--get-server-output",
        ])
        .output()
        .expect("start iperf3 -c");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("Server output:"), "{text}");
    assert!(text.contains("nicbench agent: the test was refused: "), "{text}");
    assert!(text.contains("--max-duration"), "{text}");
    // Without --get-server-output: iperf3's own text for the error number.
    let out = Command::new("timeout")
        .args(["60", "iperf3", "-c", "127.0.0.1", "-p", &port.to_string(), "-t", "30"])
        .output()
        .expect("start iperf3 -c");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success() && text.contains("error"), "{text}");
}

/// `serve --iperf3-port P --db FILE` saves each iperf3 client's test with
/// its peer part; `--db` without `--iperf3-port` is an option error.
#[test]
fn iperf3_tests_the_agent_served_are_saved_with_db() {
    require!(installed());
    crate::postgres::on_each_backend(|db_arg| {
        let (_agent, port) = agent_with(&["--db", db_arg, "--tag", "nic=lo"]);
        iperf3_client(port, &["-n", "4M"]);
        // Saved when the agent has finished the test, just after the client hears
        // its results: wait on the database, not on time.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let doc = loop {
            let out = nicbench(&["show", "1", "--db", db_arg, "--json"]);
            if out.status.success() {
                break serde_json::from_slice::<Value>(&out.stdout).unwrap();
            }
            assert!(std::time::Instant::now() < deadline, "no saved run: {}", stderr(&out));
            std::thread::sleep(Duration::from_millis(50));
        };
        crate::result_schema::assert_valid(&crate::result_schema::schema(), &doc, "an iperf3 client's saved test");
        assert_eq!(doc["peer_protocol"]["peer_role"], "client", "{doc}");
        assert_eq!(doc["workload"], "tcp");
        let received: u64 = doc["streams"][0]["receiver"]["bytes"].as_u64().unwrap();
        assert!(received >= 4 << 20, "received {received}");
        let runs = nicbench(&["runs", "--db", db_arg, "--tag", "nic=lo"]);
        assert!(
            String::from_utf8_lossy(&runs.stdout).contains("tcp"),
            "{}",
            stderr(&runs)
        );

        let refused = nicbench(&["serve", "--db", db_arg]);
        assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    });
}

#[test]
fn iperf3_clients_against_the_agent_udp() {
    require!(installed());
    let (_agent, port) = agent();
    for (args, streams) in [
        (vec!["-b", "20M"], 1usize),
        (vec!["-b", "10M", "-P", "4"], 4),
        (vec!["-b", "20M", "-R"], 1),
        (vec!["-b", "10M", "-R", "-P", "4"], 4),
        (vec!["-b", "20M", "--bidir"], 2),
    ] {
        let mut argv = vec!["-u", "-t", "1", "-l", "1400"];
        argv.extend_from_slice(&args);
        let doc = iperf3_client(port, &argv);
        let end = &doc["end"];
        assert_eq!(end["streams"].as_array().unwrap().len(), streams, "{args:?}");
        let sum = if args.contains(&"--bidir") {
            &end["sum_received"]
        } else {
            &end["sum"]
        };
        let packets = n(&sum["packets"]);
        assert!(packets > 0, "{args:?}: {sum}");
        assert!(n(&sum["lost_packets"]) <= packets, "{args:?}: {sum}");
        assert!(n(&sum["bytes"]) > 0, "{args:?}: {sum}");
    }
}

/// iperf3's `-n` and `-k` with UDP (issue 42; refused before with
/// "unable to receive parameters"): the client ends the test once it sent
/// or got the count. As a receiver the agent counts every datagram the
/// client sent; as a paced sender it goes on until the client's end, as
/// iperf3's own server does, so a client that lost some still gets its
/// count.
#[test]
fn iperf3_clients_count_udp_against_the_agent() {
    require!(installed());
    let (_agent, port) = agent();
    for args in [
        &["-n", "1400000"][..], // 1000 datagrams of 1400 B
        &["-k", "1000"][..],
    ] {
        let mut argv = vec!["-u", "-b", "20M", "-l", "1400"];
        argv.extend_from_slice(args);
        let doc = iperf3_client(port, &argv);
        let (sent, got) = (&doc["end"]["sum_sent"], &doc["end"]["sum_received"]);
        // Debian's 3.12 stops at the count exactly; later ones at the
        // interval's end after it.
        assert!(n(&sent["packets"]) >= 1000, "{args:?}: {sent}");
        assert_eq!(
            n(&got["packets"]),
            n(&sent["packets"]),
            "{args:?}: the agent's highest sequence number is the client's last"
        );
        assert!(n(&got["lost_packets"]) <= n(&got["packets"]), "{args:?}: {got}");
        // Reverse: the agent sends until the client has its count.
        argv.push("-R");
        let doc = iperf3_client(port, &argv);
        let got = &doc["end"]["sum_received"];
        assert!(n(&got["bytes"]) >= 1_400_000, "{args:?} -R: {got}");
    }
}

/// A raw iperf3 control connection to the agent's port.
pub(crate) fn raw(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

fn cookie(c: u8) -> Vec<u8> {
    let mut v = vec![c; 36];
    v.push(0);
    v
}

fn read_byte(s: &mut TcpStream) -> Option<i8> {
    let mut b = [0u8];
    match s.read(&mut b) {
        Ok(1) => Some(b[0] as i8),
        _ => None,
    }
}

/// Sends a cookie and waits for PARAM_EXCHANGE (9).
fn admitted(port: u16, c: u8) -> TcpStream {
    let mut s = raw(port);
    s.write_all(&cookie(c)).unwrap();
    assert_eq!(read_byte(&mut s), Some(9), "PARAM_EXCHANGE");
    s
}

#[test]
fn a_second_iperf3_client_is_told_busy_or_waits_its_turn() {
    let (_agent, port) = agent_with(&["--iperf3-wait", "0s"]);
    let first = admitted(port, b'a');
    let mut second = raw(port);
    second.write_all(&cookie(b'b')).unwrap();
    assert_eq!(read_byte(&mut second), Some(-1), "ACCESS_DENIED: the server is busy");
    drop(first);

    let (_agent, port) = agent_with(&["--iperf3-wait", "30s"]);
    let first = admitted(port, b'c');
    let mut second = raw(port);
    second.write_all(&cookie(b'd')).unwrap();
    // Nothing yet: it waits in line. Then the first leaves, and it is its turn.
    second.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut b = [0u8];
    assert!(second.read(&mut b).is_err(), "the second client must wait, got {b:?}");
    drop(first);
    second.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    assert_eq!(read_byte(&mut second), Some(9), "PARAM_EXCHANGE once the first left");
}

/// `--max-connections-per-minute` counts every connection to the iperf3
/// port, before a cookie is read: silent connections used to be free
/// (the limit applied only after a valid cookie), so one address could
/// hold every connection the port takes. The one over the limit gets
/// ACCESS_DENIED at once, not the close at the handshake deadline.
#[test]
fn every_iperf3_connection_counts_against_the_per_minute_limit() {
    let (agent, port) = agent_with(&["--max-connections-per-minute", "3", "--handshake-timeout", "2s"]);
    // agent_with's own check of the port was the first; two more stay silent.
    let silent: Vec<TcpStream> = (0..2).map(|_| raw(port)).collect();
    let mut over = raw(port);
    assert_eq!(
        reply(&mut over),
        Reply::State(-1),
        "ACCESS_DENIED for the 4th connection"
    );
    // The agent's one gate, shared with the control port, said why.
    agent.wait_for_log(
        "iperf3 connection refused: too many connections from 127.0.0.1: this agent allows 3 per minute per \
         address (its --max-connections-per-minute)",
    );
    drop(silent);
}

/// What the agent answered a hostile client, read with a 20 s limit far
/// above the agent's 2 s deadlines (a hang fails the test, it never passes it).
#[derive(Debug, PartialEq)]
pub(crate) enum Reply {
    /// SERVER_ERROR and iperf3's error number.
    ServerError(i32),
    State(i8),
    Closed,
    Silent,
}

pub(crate) fn reply(s: &mut TcpStream) -> Reply {
    let mut b = [0u8];
    match s.read(&mut b) {
        Ok(0) => Reply::Closed,
        Ok(_) if b[0] as i8 == -2 => {
            // i_errno and errno, both: iperf3 3.21's client reads the two
            // words and prints garbage when the second is missing.
            let mut n = [0u8; 8];
            match s.read_exact(&mut n) {
                Ok(()) => Reply::ServerError(i32::from_be_bytes([n[0], n[1], n[2], n[3]])),
                Err(_) => Reply::ServerError(-1),
            }
        }
        Ok(_) => Reply::State(b[0] as i8),
        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => Reply::Silent,
        Err(_) => Reply::Closed,
    }
}

/// A distinct, well-formed cookie for the `i`-th hostile client.
pub(crate) fn cookie_n(i: usize) -> Vec<u8> {
    let alphabet = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut v: Vec<u8> = (0..36).map(|k| alphabet[(i >> (5 * k.min(6))) % 32]).collect();
    v.push(0);
    v
}

pub(crate) fn send_frame(s: &mut TcpStream, body: &[u8]) {
    s.write_all(&(body.len() as u32).to_be_bytes()).unwrap();
    s.write_all(body).unwrap();
}

/// Parameters accepted, then CREATE_STREAMS; returns the control connection.
fn at_create_streams(port: u16, i: usize, params: &str) -> TcpStream {
    let mut s = raw(port);
    s.write_all(&cookie_n(i)).unwrap();
    assert_eq!(reply(&mut s), Reply::State(9), "PARAM_EXCHANGE");
    send_frame(&mut s, params.as_bytes());
    assert_eq!(reply(&mut s), Reply::State(10), "CREATE_STREAMS for {params}");
    s
}

/// A test under way: one TCP data stream opened with the cookie, TEST_START
/// and TEST_RUNNING received. Returns the control and the data connection.
fn running(port: u16, i: usize, seconds: u32) -> (TcpStream, TcpStream) {
    let mut control = at_create_streams(port, i, &format!(r#"{{"tcp":true,"time":{seconds},"parallel":1}}"#));
    let mut data = TcpStream::connect(("127.0.0.1", port)).unwrap();
    data.write_all(&cookie_n(i)).unwrap();
    assert_eq!(reply(&mut control), Reply::State(1), "TEST_START");
    assert_eq!(reply(&mut control), Reply::State(2), "TEST_RUNNING");
    (control, data)
}

/// A real iperf3 client still gets its test after every hostile one.
fn still_serves(port: u16, after: &str) {
    let doc = iperf3_client(port, &["-n", "1M"]);
    assert!(
        n(&doc["end"]["sum_received"]["bytes"]) >= 1 << 20,
        "after {after}: {}",
        doc["end"]
    );
}

/// iperf3's CVE checklist against the agent's iperf3 port (length wrap,
/// short reads, wrong-typed JSON, out-of-range values, states out of
/// order, stalls at every step): each is refused the way iperf3 refuses,
/// with SERVER_ERROR and its error number where iperf3 sends one, at the
/// deadline at the latest; and after each, a real iperf3 client is served.
#[test]
fn hostile_iperf3_clients_are_refused_and_the_agent_keeps_serving() {
    require!(installed());
    let (agent, port) = agent_with(&[
        "--handshake-timeout",
        "2s",
        "--max-streams",
        "8",
        "--max-message",
        "512K",
        "--max-duration",
        "60s",
    ]);
    let mut case = 0usize;
    let mut next = || {
        case += 1;
        case
    };

    // Bad cookie: binary, not NUL-terminated.
    let mut s = raw(port);
    s.write_all(&[0xff; 37]).unwrap();
    assert_eq!(reply(&mut s), Reply::State(-1), "ACCESS_DENIED for a bad cookie");
    still_serves(port, "a bad cookie");

    // Stalled in the cookie: cut off at the handshake deadline.
    let mut s = raw(port);
    s.write_all(&cookie_n(next())[..10]).unwrap();
    assert_eq!(reply(&mut s), Reply::Closed, "a cookie stalled after 10 bytes");
    still_serves(port, "a stalled cookie");

    // Length prefixes: wrap (0xffffffff + 1 is 0 in C), huge, one past
    // iperf3's 8 KiB, and zero. Refused from the 4 bytes alone.
    for length in [u32::MAX, 0x8000_0000, 0x7fff_ffff, 8 * 1024 + 1, 0] {
        let mut s = raw(port);
        s.write_all(&cookie_n(next())).unwrap();
        assert_eq!(reply(&mut s), Reply::State(9));
        s.write_all(&length.to_be_bytes()).unwrap();
        assert_eq!(reply(&mut s), Reply::ServerError(114), "length {length:#x}");
        still_serves(port, &format!("length {length:#x}"));
    }

    // Short reads: announces 100 bytes, sends 10, then goes away; or stays
    // silent (the handshake deadline fires).
    let mut s = raw(port);
    s.write_all(&cookie_n(next())).unwrap();
    assert_eq!(reply(&mut s), Reply::State(9));
    s.write_all(&100u32.to_be_bytes()).unwrap();
    s.write_all(b"{\"tcp\":tru").unwrap();
    drop(s);
    still_serves(port, "a short read and a close");
    let mut s = raw(port);
    s.write_all(&cookie_n(next())).unwrap();
    assert_eq!(reply(&mut s), Reply::State(9));
    s.write_all(&100u32.to_be_bytes()).unwrap();
    s.write_all(b"{\"tcp\":tru").unwrap();
    assert_eq!(reply(&mut s), Reply::ServerError(114), "a short read, then silence");
    still_serves(port, "a stalled short read");
    // Silent after the cookie.
    let mut s = raw(port);
    s.write_all(&cookie_n(next())).unwrap();
    assert_eq!(reply(&mut s), Reply::State(9));
    assert_eq!(reply(&mut s), Reply::ServerError(114), "silent after the cookie");
    still_serves(port, "a silent client");

    // Wrong-typed JSON, malformed JSON, and values out of range: refused
    // with iperf3's error number (114: unreadable parameters; 5, 6, 7:
    // the limits iperf3 names "duration", "streams", "block size").
    let deep_arrays = format!("{}{}", "[".repeat(4000), "]".repeat(4000));
    let deep_objects = format!("{}1{}", r#"{"a":"#.repeat(1300), "}".repeat(1300));
    let cases: Vec<(&[u8], i32)> = vec![
        (br#"{"tcp":true,"time":"ten"}"#, 114),
        (br#"{"tcp":true,"time":null}"#, 114),
        (br#"{"tcp":true,"parallel":-3}"#, 114),
        (br#"{"tcp":true,"parallel":[1]}"#, 114),
        (br#"{"tcp":true,"parallel":2.5}"#, 114),
        (br#"{"tcp":true,"omit":{"a":1}}"#, 114),
        (br#"{"tcp":true,"len":"big"}"#, 114),
        (br#"{"tcp":true,"congestion":7}"#, 114),
        (br#"{"tcp":true,"client_version":["3.12"]}"#, 114),
        (br#"[1,2,3]"#, 114),
        (br#""tcp""#, 114),
        (br#"{"tcp":"#, 114),
        (b"\xff\xfe\x00", 114),
        (deep_arrays.as_bytes(), 114),
        (deep_objects.as_bytes(), 114),
        (br#"{"tcp":true,"time":-1}"#, 114),
        (br#"{"tcp":true,"time":1e300}"#, 114),
        (br#"{"tcp":true,"time":86401}"#, 114),
        (br#"{"tcp":true,"len":4294967297}"#, 114),
        (br#"{"tcp":true,"bandwidth":-5}"#, 114),
        (br#"{"tcp":true,"MSS":-1}"#, 114),
        (br#"{"tcp":true,"num":-1}"#, 114),
        (br#"{"sctp":true}"#, 18),
        (br#"{"tcp":true,"time":61}"#, 5),
        (br#"{"tcp":true,"time":10,"omit":55}"#, 5),
        (br#"{"tcp":true,"parallel":100000}"#, 6),
        (br#"{"tcp":true,"parallel":0}"#, 6),
        (br#"{"tcp":true,"len":2000000000}"#, 7),
        (br#"{"udp":true,"len":2000000000}"#, 20),
        (br#"{"tcp":true,"window":1000000000000}"#, 114),
        (br#"{"tcp":true,"window":2147483648}"#, 8),
    ];
    for (body, i_errno) in cases {
        let shown = String::from_utf8_lossy(&body[..body.len().min(60)]).into_owned();
        let mut s = raw(port);
        s.write_all(&cookie_n(next())).unwrap();
        assert_eq!(reply(&mut s), Reply::State(9));
        send_frame(&mut s, body);
        assert_eq!(reply(&mut s), Reply::ServerError(i_errno), "{shown}");
        still_serves(port, &shown);
    }
    // The same limits through a real iperf3 client, which prints its own text.
    for (args, text) in [
        (&["-t", "61"][..], "duration"),
        (&["-P", "9"][..], "parallel streams"),
        (&["-l", "1M"][..], "block size"),
    ] {
        let out = Command::new("timeout")
            .args(["60", "iperf3", "-c", "127.0.0.1", "-p", &port.to_string(), "-J"])
            .args(args)
            .output()
            .unwrap();
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let error = doc["error"].as_str().unwrap_or_default();
        assert!(error.contains(text), "iperf3 -c {args:?}: {error}");
    }
    still_serves(port, "limits");

    // States out of order. A state byte where the parameters belong:
    // read as the first byte of a length, so the deadline fires.
    let mut s = raw(port);
    s.write_all(&cookie_n(next())).unwrap();
    assert_eq!(reply(&mut s), Reply::State(9));
    s.write_all(&[16]).unwrap();
    assert_eq!(
        reply(&mut s),
        Reply::ServerError(114),
        "IPERF_DONE instead of the parameters"
    );
    still_serves(port, "a state instead of the parameters");
    // TEST_START from the client while its streams should open: IEMESSAGE.
    let mut s = at_create_streams(port, next(), r#"{"tcp":true,"time":1,"parallel":2}"#);
    s.write_all(&[1]).unwrap();
    assert_eq!(reply(&mut s), Reply::ServerError(110), "TEST_START from the client");
    still_serves(port, "TEST_START from the client");
    // TEST_END and a close before any stream: the wait ends at once.
    let mut s = at_create_streams(port, next(), r#"{"tcp":true,"time":1,"parallel":1}"#);
    s.write_all(&[4]).unwrap();
    drop(s);
    still_serves(port, "TEST_END before the streams");
    // No streams at all: IESTREAMACCEPT at the handshake deadline.
    let mut s = at_create_streams(port, next(), r#"{"tcp":true,"time":1,"parallel":4}"#);
    assert_eq!(reply(&mut s), Reply::ServerError(204), "no data streams");
    still_serves(port, "a client that opened no streams");
    // During the test: EXCHANGE_RESULTS instead of TEST_END, and a byte
    // that is no state at all. IEMESSAGE at once, not at the end of -t.
    for byte in [13u8, 0x55] {
        let (mut control, _data) = running(port, next(), 30);
        control.write_all(&[byte]).unwrap();
        assert_eq!(
            reply(&mut control),
            Reply::ServerError(110),
            "state byte {byte} during the test"
        );
        still_serves(port, &format!("state byte {byte} during the test"));
    }
    // After TEST_END, results that wrap the length, or have the wrong type.
    for results in [
        None,
        Some(&br#"{"streams":"many"}"#[..]),
        Some(br#"{"cpu_util_total":[]}"#),
    ] {
        let (mut control, data) = running(port, next(), 1);
        control.write_all(&[4]).unwrap();
        drop(data);
        assert_eq!(reply(&mut control), Reply::State(13), "EXCHANGE_RESULTS");
        match results {
            None => control.write_all(&u32::MAX.to_be_bytes()).unwrap(),
            Some(body) => send_frame(&mut control, body),
        }
        assert_eq!(reply(&mut control), Reply::ServerError(117), "results {results:?}");
        still_serves(port, "bad results");
    }
    assert!(!agent.logs().contains("panicked"), "{}", agent.logs());
}
