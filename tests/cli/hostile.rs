//! Hostile and broken clients against a real agent process: each case gets
//! a clear log line and a closed connection, and afterwards the same agent
//! still runs a normal `tcp` test. The cases follow the server bugs iperf3
//! shipped (a 0xFFFFFFFF length, truncated frames, wrong JSON types, junk
//! connections) and every stage at which a client can vanish.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use nicbench::protocol::{Hello, Message, PROTOCOL_VERSION};
use serde_json::json;

use super::common::*;
use super::rawclient::{LoggedAgent, Raw};

/// A test request as raw JSON, so tests can break any field.
fn request_json(spec: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&json!({ "type": "test_request", "spec": spec })).unwrap()
}

fn good_spec(seconds: f64) -> serde_json::Value {
    json!({
        "workload": "tcp", "duration_seconds": seconds, "streams": 1, "direction": "forward",
        "message_bytes": 131072, "interval_seconds": 1.0
    })
}

#[test]
fn malformed_frames_are_refused_and_the_agent_keeps_serving() {
    let mut agent = LoggedAgent::start(&["--handshake-timeout", "1s"]);
    let port = agent.port;
    // iperf3 CVE-2016-4303-style: a length that would wrap an allocation.
    Raw::connect(port)
        .bytes(&0xFFFF_FFFFu32.to_be_bytes())
        .expect_error_and_close("exceeds the limit");
    // Invalid JSON, an unknown type, an empty body, not even an object.
    Raw::connect(port)
        .frame(b"{not json")
        .expect_error_and_close("malformed");
    Raw::connect(port)
        .frame(br#"{"type":"launch_missiles"}"#)
        .expect_error_and_close("malformed");
    Raw::connect(port).frame(b"").expect_error_and_close("malformed");
    Raw::connect(port).frame(b"[1,2,3]").expect_error_and_close("malformed");
    // An HTTP client on the wrong port: its first 4 bytes are a huge length.
    Raw::connect(port)
        .bytes(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect_error_and_close("exceeds the limit");
    // A truncated frame, then silence: cut off at the handshake deadline.
    Raw::connect(port)
        .bytes(&100u32.to_be_bytes())
        .bytes(b"{\"type\":")
        .expect_error_and_close("timed out");
    agent.wait_for_log("refused: malformed message");
    agent.wait_for_log("refused: frame of 4294967295 bytes exceeds the limit");
    agent.assert_serves_normally();
}

#[test]
fn wrong_types_order_and_versions_are_refused_by_name() {
    let mut agent = LoggedAgent::start(&["--handshake-timeout", "1s"]);
    let port = agent.port;
    // A string where a number belongs (crashed iperf3's server).
    let mut spec = good_spec(1.0);
    spec["streams"] = json!("many");
    Raw::connect(port)
        .hello()
        .frame(&request_json(spec))
        .expect_error_and_close("invalid type");
    let mut spec = good_spec(1.0);
    spec["duration_seconds"] = json!(-5);
    Raw::connect(port)
        .hello()
        .frame(&request_json(spec))
        .expect_error_and_close("-t/--time");
    let mut spec = good_spec(1.0);
    spec["params"] = json!({ "mss": "big" });
    Raw::connect(port)
        .hello()
        .frame(&request_json(spec))
        .expect_error_and_close("bad parameters");
    let mut spec = good_spec(1.0);
    spec["workload"] = json!("nonexistent");
    Raw::connect(port)
        .hello()
        .frame(&request_json(spec))
        .expect_error_and_close("unknown workload");
    // Out of order: start before hello, start instead of a request.
    Raw::connect(port)
        .send(&Message::Start)
        .expect_error_and_close("expected hello, got 'start'");
    Raw::connect(port)
        .hello()
        .send(&Message::Start)
        .expect_error_and_close("expected test_request, got 'start'");
    // Another protocol version, and something that is not nicbench at all.
    let mut hello = Hello::ours(nicbench::workload::names());
    hello.protocol_version = 99;
    Raw::connect(port)
        .send(&Message::Hello(hello))
        .expect_error_and_close(&format!(
            "version 99 (nicbench 0.1.0), this program speaks version {PROTOCOL_VERSION}"
        ));
    let mut hello = Hello::ours(nicbench::workload::names());
    hello.magic = "iperf3".into();
    Raw::connect(port)
        .send(&Message::Hello(hello))
        .expect_error_and_close("not a nicbench endpoint");
    agent.wait_for_log("refused: expected hello, got 'start'");
    agent.assert_serves_normally();
}

#[test]
fn slowloris_clients_are_cut_off_at_the_deadline() {
    let mut agent = LoggedAgent::start(&["--handshake-timeout", "1s"]);
    // Connects and says nothing.
    let mut silent = Raw::connect(agent.port);
    // Sends a valid frame one byte every 300 ms: the deadline is per
    // message, not per byte, so it cannot stretch the wait.
    let frame = nicbench::protocol::framing::encode(&Message::Hello(Hello::ours(nicbench::workload::names())));
    // It dribbles until the agent cuts it off (a write fails): with a
    // per-byte deadline it would never be, and the test fails at the end
    // of the frame instead.
    let mut dribble = TcpStream::connect(("127.0.0.1", agent.port)).unwrap();
    let mut cut_off = false;
    for byte in &frame[..frame.len() - 1] {
        if dribble.write_all(&[*byte]).is_err() {
            cut_off = true;
            break;
        }
        // The client's pace (less than the deadline), not a wait.
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(cut_off, "a client sending one byte every 300 ms was never cut off");
    silent.expect_error_and_close("timed out after 1.0 s waiting for hello");
    agent.wait_for_log("timed out after 1.0 s waiting for hello");
    agent.assert_serves_normally();
}

#[test]
fn thousands_of_connections_at_once_leave_the_agent_serving() {
    let mut agent = LoggedAgent::start(&[
        "--handshake-timeout",
        "2s",
        "--max-connections",
        "32",
        "--max-connections-per-minute",
        "0",
    ]);
    let idle_fds = agent.open_fds();
    let mut open = Vec::new();
    for _ in 0..1000 {
        match TcpStream::connect(("127.0.0.1", agent.port)) {
            Ok(s) => open.push(s),
            Err(e) => panic!("connect {} failed: {e}", open.len()),
        }
    }
    // The ones past the limit are told why and closed at once.
    agent.wait_for_log("its --max-connections");
    agent.assert_alive();
    drop(open);
    // Junk on fresh connections, five at a time (made iperf3 exit).
    for _ in 0..5 {
        Raw::connect(agent.port).bytes(b"\x00\x00\x00\x05hello").expect_closed();
    }
    // Every connection released before the next client comes.
    agent.wait_for_open_fds_at_most(idle_fds);
    agent.assert_serves_normally();
}

#[test]
fn a_client_vanishing_at_every_stage_frees_the_agent() {
    let mut agent = LoggedAgent::start(&["--handshake-timeout", "2s"]);
    let port = agent.port;
    // Right after connecting, after the hello, after the request.
    drop(Raw::connect(port));
    let mut r = Raw::connect(port);
    r.hello();
    drop(r);
    let mut r = Raw::connect(port);
    r.hello().frame(&request_json(good_spec(1.0)));
    assert!(matches!(r.recv(), Some(Message::Accepted { .. })));
    drop(r);
    agent.wait_for_log("left before opening its data connections");
    // After its data connections are up (`ready`), before `start`.
    let (mut r, data) = accepted_with_data(port);
    assert_eq!(r.recv(), Some(Message::Ready));
    drop((r, data));
    agent.wait_for_log("waiting for start");
    // Mid-test: start, then vanish with the data connection.
    let (mut r, data) = accepted_with_data(port);
    assert_eq!(r.recv(), Some(Message::Ready));
    let mark = agent.log_mark();
    r.send(&Message::Start);
    agent.wait_for_log_after(mark, "running tcp test");
    drop((r, data));
    agent.wait_for_log_after(mark, "test aborted");
    let mark = agent.log_mark();
    // A real client killed mid-test.
    let mut client = std::process::Command::new(BIN)
        .args(["tcp", "127.0.0.1", "-p", &agent.port_arg(), "-t", "30"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    agent.wait_for_log_after(mark, "running tcp test");
    client.kill().unwrap();
    client.wait().unwrap();
    // The slot is free again once the agent saw it go: no `busy` for the
    // next client.
    agent.wait_for_log_after(mark, "test aborted");
    agent.assert_serves_normally();
}

#[test]
fn data_connections_without_the_token_are_refused_and_counted() {
    let mut agent = LoggedAgent::start(&[]);
    let (mut r, data, port) = accepted(agent.port);
    // A stranger on the data port: wrong token, then junk.
    let mut wrong = TcpStream::connect(("127.0.0.1", port)).unwrap();
    wrong.write_all(&[0u8; 20]).unwrap();
    let mut junk = TcpStream::connect(("127.0.0.1", port)).unwrap();
    junk.write_all(b"GET / HTTP/1.0\r\n\r\n....").unwrap();
    agent.wait_for_log("wrong session token");
    agent.wait_for_log("2 refused since start");
    // The real data connection still gets in.
    let data = data(&mut r);
    assert_eq!(r.recv(), Some(Message::Ready));
    drop((r, data, wrong, junk));
    agent.assert_serves_normally();
}

/// Requests a 1-stream test and returns the connection, a function that
/// opens the data connection with the right token, and the data port.
#[allow(clippy::type_complexity)]
fn accepted(port: u16) -> (Raw, Box<dyn FnOnce(&mut Raw) -> TcpStream>, u16) {
    let mut r = Raw::connect(port);
    r.hello().frame(&request_json(good_spec(1.0)));
    let (token, data_port) = match r.recv() {
        Some(Message::Accepted { token, data_ports, .. }) => (token, data_ports[0]),
        other => panic!("expected accepted, got {other:?}"),
    };
    let token = nicbench::protocol::token_from_hex(&token).unwrap();
    let open = Box::new(move |_: &mut Raw| {
        let mut s = TcpStream::connect(("127.0.0.1", data_port)).unwrap();
        s.write_all(&token).unwrap();
        s.write_all(&1u32.to_be_bytes()).unwrap();
        s
    });
    (r, open, data_port)
}

fn accepted_with_data(port: u16) -> (Raw, TcpStream) {
    let (mut r, open, _) = accepted(port);
    let data = open(&mut r);
    (r, data)
}

/// A fake agent on loopback that answers the client's hello with `reply`
/// (raw bytes) and then keeps the connection open for a while.
fn fake_agent(reply: Vec<u8>) -> (u16, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let thread = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut raw = Raw::from_stream(stream.try_clone().unwrap());
        assert!(matches!(raw.recv(), Some(Message::Hello(_))));
        let _ = stream.write_all(&reply);
        // Keeps the connection open until the client has read the reply
        // and closed it.
        let _ = stream.set_read_timeout(Some(super::common::COMMAND_LIMIT));
        let _ = std::io::Read::read_to_end(&mut stream, &mut Vec::new());
    });
    (port, thread)
}

#[test]
fn the_client_refuses_a_hostile_agent_clearly() {
    let encode = nicbench::protocol::framing::encode;
    let mut bad_hello = Hello::ours(nicbench::workload::names());
    bad_hello.protocol_version = 42;
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (0xFFFF_FFFFu32.to_be_bytes().to_vec(), "exceeds the limit"),
        (b"\x00\x00\x00\x03{{{".to_vec(), "malformed"),
        (encode(&Message::Hello(bad_hello)), "version 42"),
        (encode(&Message::Start), "expected hello, got 'start'"),
        (
            [
                encode(&Message::Hello(Hello::ours(nicbench::workload::names()))),
                encode(&Message::Ready),
            ]
            .concat(),
            "expected accepted, got 'ready'",
        ),
    ];
    for (reply, needle) in cases {
        let (port, fake) = fake_agent(reply);
        let out = nicbench(&["tcp", "127.0.0.1", "-p", &port.to_string(), "-t", "0.3"]);
        assert!(!out.status.success());
        assert!(stderr(&out).contains(needle), "{needle}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
        fake.join().unwrap();
    }
}
