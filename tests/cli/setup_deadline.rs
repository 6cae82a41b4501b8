//! Issue 67, item 2: every step of a test's setup on the data ports (the
//! token preamble, the TLS handshake) has one whole deadline counted from
//! the test's acceptance, `--handshake-timeout` but at least 10 s (a
//! preamble also within 5 s of its accept), not a timeout per read: a
//! client that sends one byte at a time is cut off there, and the test's
//! slot, threads and sockets all come back.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use nicbench::protocol::Message;
use serde_json::json;

use super::common::LOG_LIMIT;
use super::rawclient::{LoggedAgent, Raw};

/// The client's pace: one byte a second, under the agent's old timeout per
/// read (5 s for a preamble, 10 s for a handshake), so only a whole
/// deadline cuts the drip off.
const DRIP_PACE: Duration = Duration::from_secs(1);

/// Asks for a 1 s tcp test of `streams` streams with `params`; returns the
/// control connection, the token and the data port.
fn accepted(port: u16, streams: u32, params: serde_json::Value) -> (Raw, [u8; 16], u16) {
    let spec = json!({
        "workload": "tcp", "duration_seconds": 1.0, "streams": streams, "direction": "forward",
        "message_bytes": 131072, "interval_seconds": 1.0, "params": params
    });
    let mut control = Raw::connect(port);
    control
        .hello()
        .frame(&serde_json::to_vec(&json!({ "type": "test_request", "spec": spec })).unwrap());
    match control.recv() {
        Some(Message::Accepted { token, data_ports, .. }) => {
            let token = nicbench::protocol::token_from_hex(&token).unwrap();
            (control, token, data_ports[0])
        }
        other => panic!("expected accepted, got {other:?}"),
    }
}

/// True once the agent has closed `stream` (an end of stream or a reset
/// waiting to be read); reads nothing the agent sent otherwise.
fn closed_by_agent(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let closed = match stream.peek(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    stream.set_nonblocking(false).unwrap();
    closed
}

/// Sends `bytes` to every stream one byte at a time, one round per
/// [`DRIP_PACE`], until the agent has closed them all; returns how many
/// rounds that took (`bytes.len()` when it never did).
fn drip(streams: &mut [TcpStream], bytes: &[u8]) -> usize {
    for (round, byte) in bytes.iter().enumerate() {
        if streams.iter().all(closed_by_agent) {
            return round;
        }
        for s in streams.iter_mut() {
            let _ = s.write_all(&[*byte]);
        }
        // The client's pace, not a wait for a state.
        std::thread::sleep(DRIP_PACE);
    }
    bytes.len()
}

/// The agent's threads and open descriptors from /proc.
fn threads_and_fds(agent: &LoggedAgent) -> (usize, usize) {
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.child.id())).unwrap();
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    (threads, agent.open_fds())
}

/// Waits until the agent holds no more threads and descriptors than
/// `idle`, failing after the log limit with what it holds.
fn wait_back_to(agent: &LoggedAgent, idle: (usize, usize)) {
    let deadline = Instant::now() + LOG_LIMIT;
    loop {
        let now = threads_and_fds(agent);
        if now.0 <= idle.0 && now.1 <= idle.1 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the agent holds {now:?} threads and fds, {idle:?} when idle:\n{}",
            agent.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Expects the agent's error on the control connection, naming the setup.
fn expect_setup_refused(control: &mut Raw, needle: &str) {
    match control.recv() {
        Some(Message::Error { message }) => assert!(message.contains(needle), "{message}"),
        other => panic!("expected an error naming the setup, got {other:?}"),
    }
}

#[test]
fn a_preamble_dripped_a_byte_a_second_is_cut_at_the_setup_deadline() {
    let mut agent = LoggedAgent::start(&["--handshake-timeout", "2s"]);
    let idle = threads_and_fds(&agent);
    let (mut control, token, data_port) = accepted(agent.port, 1, json!(null));
    let mut preamble = token.to_vec();
    preamble.extend_from_slice(&1u32.to_be_bytes());
    let mut data = [TcpStream::connect(("127.0.0.1", data_port)).unwrap()];
    let rounds = drip(&mut data, &preamble);
    assert!(
        rounds < preamble.len(),
        "the whole 20-byte preamble went in one byte a second: no whole deadline\n{}",
        agent.logs()
    );
    expect_setup_refused(&mut control, "in time");
    agent.wait_for_log("no whole preamble");
    // The slot is free (no `busy`), and every thread and socket is back.
    agent.assert_serves_normally();
    drop((control, data));
    wait_back_to(&agent, idle);
}

/// The issue's `-P 128` over TLS, smaller: eight streams present their
/// token, then drip a ClientHello's record header a byte a second. Every
/// handshake ends at the setup deadline; its threads and sockets go.
#[test]
fn tls_handshakes_dripped_a_byte_a_second_end_at_the_setup_deadline() {
    let mut agent = LoggedAgent::start(&["--handshake-timeout", "2s"]);
    let idle = threads_and_fds(&agent);
    let (mut control, token, data_port) = accepted(agent.port, 8, json!({ "transport": "tls" }));
    let mut data: Vec<TcpStream> = (1..=8u32)
        .map(|id| {
            let mut s = TcpStream::connect(("127.0.0.1", data_port)).unwrap();
            s.write_all(&token).unwrap();
            s.write_all(&id.to_be_bytes()).unwrap();
            s
        })
        .collect();
    // A handshake record of 512 bytes, announced and then trickled.
    let mut hello = vec![0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03];
    hello.resize(40, 0x2a);
    let rounds = drip(&mut data, &hello);
    assert!(
        rounds < hello.len(),
        "eight TLS handshakes went on a byte a second for {rounds} s: no whole deadline\n{}",
        agent.logs()
    );
    expect_setup_refused(&mut control, "TLS handshake");
    agent.assert_serves_normally();
    drop((control, data));
    wait_back_to(&agent, idle);
}
