//! Hardening round three, item A: the agent sends traffic only to an
//! address that proved itself over TCP. A client may name any address as a
//! link's client (`--links`); a UDP registration from that address proves
//! nothing, since a datagram's source can be forged. In the lab a third
//! host, the victim, must receive nothing however the test is asked for;
//! an honest test over links proves each link address and runs.
//!
//! The forged registration is sent from the victim's own namespace: to the
//! agent it is byte for byte what a forger elsewhere would send (the source
//! address is the victim's), and the victim's socket is where the agent
//! would stream.

use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::Stdio;
use std::time::Duration;

use nicbench::lab::Lab;
use nicbench::model::{LinkPair, SideOptions, TestSpec};
use nicbench::protocol::channel::Channel;
use nicbench::protocol::{token_from_hex, Hello, Message, MAX_AGENT_FRAME};
use nicbench::workload::transport::udp::wire::register_datagram;
use nicbench::workload::Direction;
use serde_json::{json, Value};

use super::common::*;

/// Runs `make` on a thread inside the network namespace `netns` and returns
/// what it made: a socket keeps the namespace it was created in.
fn in_netns<T: Send + 'static>(netns: &str, make: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{netns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("opening {path}: {e}"));
        // SAFETY: setns on an open namespace file; affects this thread only.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns into {path}: {}", std::io::Error::last_os_error());
        make()
    })
    .join()
    .unwrap()
}

fn spec(workload: &str, direction: Direction, message_bytes: u64, params: Value, link: LinkPair) -> TestSpec {
    TestSpec {
        workload: workload.into(),
        duration_seconds: 3.0,
        bytes: None,
        omit_seconds: 0.0,
        streams: 1,
        direction,
        message_bytes,
        interval_seconds: 1.0,
        client: SideOptions::default(),
        agent: SideOptions::default(),
        params,
        links: vec![link],
    }
}

/// Datagrams that reach `socket` until it has been quiet for `quiet`.
fn datagrams_arriving(socket: &UdpSocket, quiet: Duration) -> u64 {
    socket.set_read_timeout(Some(quiet)).unwrap();
    let mut buf = [0u8; 65_536];
    let mut got = 0;
    while socket.recv_from(&mut buf).is_ok() {
        got += 1;
    }
    got
}

/// The attacker on lab host `a` asks `b`'s agent for `spec` (whose link
/// names the victim `c` as its client), forges the
/// victim's registration 100 times, and returns the agent's answer and
/// what the victim received.
fn forge(lab: &Lab, victim: &UdpSocket, spec: &TestSpec) -> (Message, u64) {
    let agent: SocketAddr = (IpAddr::V4(lab.addr("b")), lab.agent_port()).into();
    let stream = in_netns(lab.netns("a"), move || {
        TcpStream::connect_timeout(&agent, Duration::from_secs(5))
    });
    let mut channel = Channel::new(stream.expect("the attacker reaches b's agent"), MAX_AGENT_FRAME);
    let wait = Duration::from_secs(5);
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
    let Message::Accepted {
        token,
        data_ports,
        address_proof,
        ..
    } = channel.recv(wait, "accepted").unwrap()
    else {
        panic!("the agent did not accept the {} request", spec.workload)
    };
    let proof = address_proof.expect("the agent asks the link's client address to prove itself");
    assert_eq!(
        proof.from,
        vec![IpAddr::V4(lab.addr("c"))],
        "the victim's address, and only it"
    );
    let token = token_from_hex(&token).unwrap();
    let stream_id = spec.flows()[0].0;
    let to = (IpAddr::V4(lab.addr("b")), data_ports[0]);
    for attempt in 0..100 {
        victim
            .send_to(&register_datagram(stream_id, attempt, &token), to)
            .unwrap();
    }
    let mut received = datagrams_arriving(victim, Duration::from_millis(500));
    // The agent waits for the proof until its setup deadline, then refuses.
    let answer = channel.recv(Duration::from_secs(20), "the agent's refusal").unwrap();
    received += datagrams_arriving(victim, Duration::from_millis(500));
    (answer, received)
}

#[test]
fn a_forged_udp_registration_over_links_sends_nothing_to_a_third_party() {
    require_lab!();
    let lab = lab_builder().via_router().hosts(3).build().unwrap();
    let victim = in_netns(lab.netns("c"), || UdpSocket::bind("0.0.0.0:0")).unwrap();
    let link = LinkPair {
        client: IpAddr::V4(lab.addr("c")),
        agent: IpAddr::V4(lab.addr("b")),
    };
    let udp_reverse = spec("udp", Direction::Reverse, 1400, json!({}), link);
    let rr_udp = spec(
        "rr",
        Direction::Forward,
        8,
        json!({"proto": "udp", "request_bytes": 8, "response_bytes": 65000, "burst": 1, "timeout_us": 1_000_000}),
        link,
    );
    for asked in [udp_reverse, rr_udp] {
        let (answer, received) = forge(&lab, &victim, &asked);
        assert_eq!(
            received, 0,
            "the victim received {received} datagrams from a {} test",
            asked.workload
        );
        let Message::Error { message } = answer else {
            panic!(
                "the agent answered {answer:?} to a {} test whose link never proved itself",
                asked.workload
            )
        };
        assert!(
            message.contains(&format!("{} did not prove themselves over TCP", lab.addr("c"))),
            "{message}"
        );
    }
    // The agent goes on serving an honest client.
    let out = lab
        .command("a", BIN)
        .args(["udp", "b", "-t", "1", "-b", "10M"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "a normal test after the attack: {}", stderr(&out));
}

#[test]
fn a_udp_test_over_links_proves_each_link_address_and_both_ends_count_alike() {
    require_lab!();
    let lab = lab_builder().via_router().links(2).build().unwrap();
    for direction in ["-R", "--bidir"] {
        let out = lab
            .command("a", BIN)
            .args([
                "udp", "b", "--links", "auto", direction, "-t", "1", "-b", "20M", "--json",
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "udp {direction} over 2 links: {}", stderr(&out));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        let links = doc["spec"]["links"].as_array().unwrap();
        assert_eq!(links.len(), 2);
        assert_ne!(
            links[0]["client"], links[1]["client"],
            "the second link's client address is not the control peer's: it had to prove itself"
        );
        for trial in doc["trials"].as_array().unwrap() {
            for stream in trial["streams"].as_array().unwrap() {
                assert!(
                    stream["receiver"]["bytes"].as_u64().unwrap_or(0) > 0,
                    "every stream over every link delivered: {stream}"
                );
            }
        }
    }
}
