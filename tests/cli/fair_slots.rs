//! Issue 67, item 3: a few addresses or networks cannot take every slot of
//! a port. Silent sockets from eight loopback addresses (all of 127.0.0.0/8
//! is loopback, so a client socket bound to 127.0.0.N is another address)
//! leave the control port to a ninth address and a ninth network, the
//! iperf3 port to a client after 328 of them, and `/metrics` answering.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::common::{nicbench, stderr};
use super::rawclient::LoggedAgent;

/// A TCP connection to `port` on 127.0.0.1 from the loopback address `from`.
fn connect_from(from: &str, port: u16) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::new(from.parse().unwrap(), 0).into()).unwrap();
    socket
        .connect(&SocketAddr::from(([127, 0, 0, 1], port)).into())
        .unwrap();
    socket.into()
}

/// `per_address` silent connections from each address of `addresses`.
fn silent(addresses: &[String], per_address: usize, port: u16) -> Vec<TcpStream> {
    addresses
        .iter()
        .flat_map(|a| (0..per_address).map(move |_| a))
        .map(|a| connect_from(a, port))
        .collect()
}

/// A short tcp test against the agent's control port from `from`: it must
/// be served (not refused, not busy).
fn honest_test(agent: &LoggedAgent, target: &str, from: &str) {
    let out = nicbench(&["tcp", target, "-p", &agent.port_arg(), "-B", from, "-t", "0.3"]);
    assert!(
        out.status.success(),
        "the client from {from} was not served: {}\nagent log:\n{}",
        stderr(&out),
        agent.logs()
    );
}

#[test]
fn eight_addresses_or_networks_of_silent_sockets_leave_a_control_slot_for_a_ninth() {
    // The default 64 control connections and 8 per address; silent
    // sockets are not cut off while the test runs.
    let mut agent = LoggedAgent::start(&["--handshake-timeout", "60s"]);
    let idle_fds = agent.open_fds();
    // Eight addresses of one /24: they hold its quarter (16) at most.
    let one_network: Vec<String> = (2..=9).map(|n| format!("127.0.0.{n}")).collect();
    let held = silent(&one_network, 8, agent.port);
    agent.wait_for_log("the network 127.0.0.0/24 already holds 16 connections that have not finished their handshake");
    honest_test(&agent, "127.0.0.1", "127.0.0.10");
    agent.wait_for_log("closed for a connection from 127.0.0.10");
    drop(held);
    agent.wait_for_open_fds_at_most(idle_fds);
    // Eight networks, eight sockets each: every one of the 64 places.
    let eight_networks: Vec<String> = (1..=8).map(|n| format!("127.{n}.0.2")).collect();
    let held = silent(&eight_networks, 8, agent.port);
    honest_test(&agent, "127.0.0.1", "127.9.0.2");
    agent.wait_for_log("control port's 64 places were taken and its network held the most");
    drop(held);
    agent.assert_serves_normally();
}

/// The lock of the iperf3 port: 41 addresses x 8 silent sockets
/// were 321 in flight, its limit, and every client after them was denied.
#[test]
fn silent_sockets_from_41_addresses_leave_the_iperf3_port_to_a_client_after_them() {
    let (mut agent, iperf3_port) = super::iperf3::agent_with(&["--handshake-timeout", "60s"]);
    // One address in each of 41 networks: 64 of them hold the port's
    // places, two or more from some network.
    let addresses: Vec<String> = (2..=42).map(|n| format!("127.0.{n}.2")).collect();
    let held = silent(&addresses, 8, iperf3_port);
    assert_eq!(held.len(), 328);
    let target = format!("iperf3://127.0.0.1:{iperf3_port}");
    let out = nicbench(&["tcp", &target, "-B", "127.0.99.2", "-t", "1", "--no-save"]);
    assert!(
        out.status.success(),
        "an iperf3 client after the silent sockets was refused: {}\nagent log:\n{}",
        stderr(&out),
        agent.logs()
    );
    agent.wait_for_log("iperf3 port's 64 places were taken and its network held the most");
    drop(held);
    agent.assert_serves_normally();
}

/// What a silent socket heard from the metrics server when it got an
/// answer ("" while it waits, "closed" once closed without one).
fn heard(socket: &mut TcpStream) -> String {
    socket.set_nonblocking(true).unwrap();
    let mut out = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        match socket.read(&mut chunk) {
            Ok(0) if out.is_empty() => return "closed".into(),
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(_) if out.is_empty() => return "closed".into(),
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// 64 silent sockets on `/metrics` (8 from each of eight networks) held
/// the workers: an honest GET waited behind them until they were cut off
/// at the 5 s request deadline. Now it is answered while every one of
/// them still waits.
#[test]
fn sixty_four_silent_sockets_on_metrics_do_not_hold_an_honest_get() {
    let agent = LoggedAgent::start(&["--metrics-listen", "127.0.0.1:0"]);
    let logs = agent.wait_for_log("serving metrics on http://");
    let metrics: SocketAddr = logs
        .split("serving metrics on http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap()
        .parse()
        .unwrap();
    let networks: Vec<String> = (1..=8).map(|n| format!("127.{n}.0.3")).collect();
    let mut held = silent(&networks, 8, metrics.port());
    let mut get = TcpStream::connect(metrics).unwrap();
    get.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
    get.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut answer = String::new();
    let _ = get.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    // None of the silent ones was cut off at the deadline before that.
    let heard: Vec<String> = held.iter_mut().map(heard).collect();
    assert!(
        !heard.iter().any(|h| h.starts_with("HTTP/1.1 408")),
        "the honest GET was answered only after silent sockets were cut off: {heard:?}"
    );
    assert!(heard.iter().filter(|h| h.is_empty()).count() >= 63, "{heard:?}");
}
