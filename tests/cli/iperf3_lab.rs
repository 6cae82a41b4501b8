//! iperf3 interop on a shaped lab link: two hosts joined through a router
//! namespace whose tbf holds every direction to 1 Gbit/s. Each pairing
//! (nicbench client -> `iperf3 -s`, `iperf3 -c` -> `nicbench serve
//! --iperf3-port`, both directions) is checked for consistency, not speed:
//! both tools count the same bytes of the same connection (what one side
//! reports to the other is what that side printed itself; TCP's receiver
//! never counts more than its sender sent), and no figure exceeds what the
//! tbf lets through (a loaded machine only gets less). How near the two
//! tools' rates are on an idle machine is a figure for
//! bench/iperf3-lab-agreement.sh, not an assertion here.

use std::net::Ipv4Addr;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

/// The tbf's rate: no goodput figure may exceed it.
const RATE: f64 = 1e9;
const IPERF3_PORT: u16 = 5201;
const AGENT_IPERF3_PORT: u16 = 5202;
const SECONDS: &str = "2";

/// A process inside a lab host, killed when dropped unless waited for.
struct Guard(Option<Child>);

impl Guard {
    /// Waits for the process to end by itself (within COMMAND_LIMIT).
    fn output(mut self, what: &str) -> std::process::Output {
        wait_output(self.0.take().expect("a process"), COMMAND_LIMIT, what)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// True when `host` has a TCP socket listening on `addr:port` (its own /proc/net/tcp).
fn listening_in(lab: &nicbench::lab::Lab, host: &str, addr: Ipv4Addr, port: u16) -> bool {
    let wanted = format!("{:08X}:{port:04X}", u32::from_le_bytes(addr.octets()));
    let out = lab.command(host, "cat").arg("/proc/net/tcp").output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3 && f[1] == wanted && f[3] == "0A"
    })
}

fn wait_listening(lab: &nicbench::lab::Lab, host: &str, addr: Ipv4Addr, port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !listening_in(lab, host, addr, port) {
        assert!(Instant::now() < deadline, "{what} did not listen on {addr}:{port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `iperf3 -c ... -J` in host a against `server:port`; its JSON document.
fn iperf3_client(lab: &nicbench::lab::Lab, server: Ipv4Addr, port: u16, reverse: bool) -> Value {
    let mut command = lab.command("a", "iperf3");
    command
        .args(["-c", &server.to_string(), "-p", &port.to_string(), "-t", SECONDS, "-J"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if reverse {
        command.arg("-R");
    }
    let out = wait_output(command.spawn().unwrap(), COMMAND_LIMIT, "iperf3 -c");
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("iperf3 -J: {e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert!(doc.get("error").is_none(), "iperf3 -c: {}", doc["error"]);
    doc
}

/// `nicbench tcp iperf3://SERVER` in host a against a one-off `iperf3 -s
/// -1 -J` in host b; nicbench's document and the server's.
fn nicbench_client(lab: &nicbench::lab::Lab, server: Ipv4Addr, reverse: bool) -> (Value, Value) {
    let mut iperf3 = lab.command("b", "iperf3");
    iperf3
        .args([
            "-s",
            "-1",
            "-J",
            "-B",
            &server.to_string(),
            "-p",
            &IPERF3_PORT.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let iperf3 = Guard(Some(iperf3.spawn().unwrap()));
    wait_listening(lab, "b", server, IPERF3_PORT, "iperf3 -s");
    let target = format!("iperf3://{server}:{IPERF3_PORT}");
    let mut command = lab.command("a", BIN);
    clean_env(&mut command)
        .args(["tcp", &target, "-t", SECONDS, "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if reverse {
        command.arg("-R");
    }
    let out = wait_output(command.spawn().unwrap(), COMMAND_LIMIT, "nicbench tcp iperf3://");
    assert!(out.status.success(), "nicbench tcp {target}: {}", stderr(&out));
    let ours: Value = serde_json::from_slice(&out.stdout).unwrap();
    let server_out = iperf3.output("iperf3 -s -1");
    let theirs: Value = serde_json::from_slice(&server_out.stdout)
        .unwrap_or_else(|e| panic!("iperf3 -s -J: {e}: {}", String::from_utf8_lossy(&server_out.stdout)));
    (ours, theirs)
}

fn n(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// TCP's receiver counted no more than its sender sent, and something.
fn assert_delivered(pairing: &str, sent: f64, received: f64) {
    assert!(
        received > 0.0 && received <= sent,
        "{pairing}: sent {sent} B, received {received} B"
    );
}

/// No goodput above the tbf's rate (1% for the bucket's burst).
fn assert_under_the_shaper(pairing: &str, bits_per_second: f64) {
    assert!(
        bits_per_second > 0.0 && bits_per_second <= RATE * 1.01,
        "{pairing}: {bits_per_second} bit/s through a {RATE} bit/s tbf"
    );
}

#[test]
fn every_iperf3_pairing_counts_the_same_bytes_on_a_shaped_link() {
    require_lab!();
    require!(crate::iperf3::installed());
    // Jumbo frames: 1 Gbit/s at a sixth of the packets.
    let lab = lab_builder()
        .via_router()
        .rate(RATE as u64)
        .mtu(9000)
        .no_agents()
        .build()
        .unwrap();
    let b = lab.addr("b");
    let agent = AgentProcess::start_with(
        lab.command("b", BIN),
        &b.to_string(),
        &["--iperf3-port", &AGENT_IPERF3_PORT.to_string()],
    );
    agent.wait_for_log("listening for iperf3 clients");

    // nicbench's client against iperf3's server: what the server reported
    // to nicbench is what it printed itself.
    for reverse in [false, true] {
        let pairing = if reverse {
            "nicbench -R <- iperf3 -s"
        } else {
            "nicbench -> iperf3 -s"
        };
        let (ours, theirs) = nicbench_client(&lab, b, reverse);
        let peer_bytes: f64 = ours["peer_protocol"]["peer_streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| n(&s["bytes"]))
            .sum();
        let (server_own, server_role) = if reverse {
            (n(&theirs["end"]["sum_sent"]["bytes"]), "sent")
        } else {
            (n(&theirs["end"]["sum_received"]["bytes"]), "received")
        };
        assert_eq!(
            peer_bytes, server_own,
            "{pairing}: iperf3 reported {peer_bytes} B, printed {server_own} B {server_role}"
        );
        for s in ours["streams"].as_array().unwrap() {
            let sent = n(&s["sender"]["bytes"]) + n(&s["sender"]["omitted_bytes"]);
            assert_delivered(pairing, sent, n(&s["receiver"]["bytes"]));
        }
        assert_under_the_shaper(pairing, n(&ours["sum"]["receiver"]["bits_per_second"]));
        eprintln!(
            "{pairing}: {:.1} Mbit/s",
            n(&ours["sum"]["receiver"]["bits_per_second"]) / 1e6
        );
    }

    // iperf3's client against nicbench's iperf3 server: the server's side
    // of iperf3's sums (reported by nicbench) agrees with the client's.
    for reverse in [false, true] {
        let pairing = if reverse {
            "iperf3 -c -R <- nicbench serve"
        } else {
            "iperf3 -c -> nicbench serve"
        };
        let doc = iperf3_client(&lab, b, AGENT_IPERF3_PORT, reverse);
        let (sent, received) = (
            n(&doc["end"]["sum_sent"]["bytes"]),
            n(&doc["end"]["sum_received"]["bytes"]),
        );
        assert_delivered(pairing, sent, received);
        assert_under_the_shaper(pairing, n(&doc["end"]["sum_received"]["bits_per_second"]));
        eprintln!(
            "{pairing}: {:.1} Mbit/s",
            n(&doc["end"]["sum_received"]["bits_per_second"]) / 1e6
        );
    }
}
