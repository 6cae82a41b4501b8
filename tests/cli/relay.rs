//! A relay in the middle without the key (issue 67, item 1): it forwards
//! the keyed handshake untouched and then tries to ride the session. The
//! agent must answer nothing but an error to any frame the relay made,
//! changed or replayed, and a transparent relay must still work (so the
//! refusals are the seal's doing, not the relay's).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use nicbench::model::{SideOptions, TestSpec};
use nicbench::protocol::auth::TAG_LEN;
use nicbench::protocol::framing::{encode, HEADER_LEN};
use nicbench::protocol::Message;
use nicbench::workload::Direction;

use super::common::*;
use super::rawclient::LoggedAgent;

const KEY: &str = "the-relay-does-not-have-this-key-42";

/// One whole frame as it came off the wire, length prefix included.
fn read_frame(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut header = [0u8; HEADER_LEN];
    stream.read_exact(&mut header).ok()?;
    let length = u32::from_be_bytes(header) as usize;
    assert!(length <= 16 << 20, "a frame of {length} bytes");
    let mut frame = header.to_vec();
    frame.resize(HEADER_LEN + length, 0);
    stream.read_exact(&mut frame[HEADER_LEN..]).ok()?;
    Some(frame)
}

/// The message of a frame, sealed (a tag after the body) or not: the
/// relay can read every frame, it just cannot make one.
fn message_of(frame: &[u8]) -> Message {
    let body = &frame[HEADER_LEN..];
    serde_json::from_slice(body)
        .or_else(|_| serde_json::from_slice(&body[..body.len() - TAG_LEN]))
        .unwrap_or_else(|e| panic!("an unreadable frame: {e}"))
}

/// What the relay does with the client's first frame after `auth_ok`.
#[derive(Clone)]
enum Ride {
    /// Forward everything untouched, both ways, to the end.
    Transparent,
    /// Send this plain frame instead of the client's.
    Replace(Box<Message>),
    /// Flip one bit in the body of the client's sealed frame.
    Flip,
    /// Send this sealed frame, recorded from an earlier session, instead.
    Replay(Vec<u8>),
}

/// Relays one client connection to the agent at `agent_port`, riding it
/// as `ride` says; returns every message the agent sent after `auth_ok`,
/// and the client's own (sealed) request.
fn relay(listener: TcpListener, agent_port: u16, ride: Ride) -> thread::JoinHandle<(Vec<Message>, Vec<u8>)> {
    thread::spawn(move || {
        let (mut client, _) = listener.accept().unwrap();
        let mut agent = TcpStream::connect(("127.0.0.1", agent_port)).unwrap();
        for stream in [&client, &agent] {
            stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        }
        // hello ->, <- hello, <- auth_challenge, auth_response ->, <- auth_ok
        let pass = |from: &mut TcpStream, to: &mut TcpStream| {
            let frame = read_frame(from).expect("the handshake was cut short");
            to.write_all(&frame).unwrap();
            message_of(&frame)
        };
        pass(&mut client, &mut agent);
        pass(&mut agent, &mut client);
        assert!(matches!(pass(&mut agent, &mut client), Message::AuthChallenge { .. }));
        pass(&mut client, &mut agent);
        assert!(matches!(pass(&mut agent, &mut client), Message::AuthOk { .. }));
        let request = read_frame(&mut client).expect("the client's request");
        match &ride {
            Ride::Transparent => agent.write_all(&request).unwrap(),
            Ride::Replace(forged) => agent.write_all(&encode(forged)).unwrap(),
            Ride::Flip => {
                let mut changed = request.clone();
                changed[HEADER_LEN + 2] ^= 0x01;
                agent.write_all(&changed).unwrap();
            }
            Ride::Replay(recorded) => agent.write_all(recorded).unwrap(),
        }
        // Everything the agent says now goes to the client too (a facts
        // request is the client's last frame).
        let mut answers = Vec::new();
        while let Some(frame) = read_frame(&mut agent) {
            let _ = client.write_all(&frame);
            answers.push(message_of(&frame));
        }
        (answers, request)
    })
}

/// `nicbench host --remote` through a relay riding the session as `ride`
/// says; returns the client's output and what the agent sent after the proof.
fn through_relay(agent: &LoggedAgent, key: &str, ride: Ride) -> (std::process::Output, Vec<Message>, Vec<u8>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let relayed = relay(listener, agent.port, ride);
    let out = nicbench(&[
        "host",
        "--remote",
        "127.0.0.1",
        "-p",
        &port,
        "--psk-file",
        key,
        "--json",
    ]);
    let (answers, request) = relayed.join().unwrap();
    (out, answers, request)
}

/// A peer test toward `target`, as a coordinator would ask for one.
fn peer_test_request(target: String) -> Message {
    Message::PeerTestRequest {
        target,
        spec: TestSpec {
            workload: "tcp".into(),
            duration_seconds: 1.0,
            bytes: None,
            omit_seconds: 0.0,
            streams: 1,
            direction: Direction::Forward,
            message_bytes: 131072,
            interval_seconds: 1.0,
            client: SideOptions::default(),
            agent: SideOptions::default(),
            params: serde_json::json!({}),
            links: vec![],
        },
        wait_seconds: 0.0,
    }
}

#[test]
fn a_keyless_relay_gets_no_facts_and_no_peer_test() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, KEY).unwrap();
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let key = key.to_str().unwrap();
    let mut agent = LoggedAgent::start(&["--psk-file", key, "--allow-peer-tests"]);

    // The relay is transparent: the keyed session goes through it whole.
    let (out, answers, recorded) = through_relay(&agent, key, Ride::Transparent);
    assert!(out.status.success(), "through a transparent relay: {}", stderr(&out));
    assert!(matches!(answers.as_slice(), [Message::Facts { .. }]), "{answers:?}");

    // A third party that a peer test would be sent to: it must hear nothing.
    let bystander = TcpListener::bind("127.0.0.1:0").unwrap();
    bystander.set_nonblocking(true).unwrap();
    let target = bystander.local_addr().unwrap().to_string();
    let rides = [
        ("its own facts_request", Ride::Replace(Box::new(Message::FactsRequest))),
        (
            "its own peer_test_request",
            Ride::Replace(Box::new(peer_test_request(target))),
        ),
        ("the client's request with one bit flipped", Ride::Flip),
        ("a request recorded from an earlier session", Ride::Replay(recorded)),
    ];
    for (what, ride) in rides {
        let mark = agent.log_mark();
        let (out, answers, _) = through_relay(&agent, key, ride);
        assert!(
            answers.iter().all(|m| matches!(m, Message::Error { .. })),
            "{what}: the agent answered {answers:?}"
        );
        assert!(!out.status.success(), "{what}: the client believed it");
        assert!(
            stderr(&out).contains("failed its MAC check"),
            "{what}: the client was not told why: {}",
            stderr(&out)
        );
        let logs = agent.wait_for_log_after(mark, "failed its MAC check");
        assert!(logs.contains("from the client"), "{what}: {logs}");
        assert!(
            bystander.accept().is_err(),
            "{what}: the agent connected to the peer test's target"
        );
    }
    agent.assert_alive();
    let port = agent.port_arg();
    let out = nicbench(&["tcp", "127.0.0.1", "-p", &port, "-t", "0.3", "--psk-file", key]);
    assert!(out.status.success(), "a keyed test after the relays: {}", stderr(&out));
}
