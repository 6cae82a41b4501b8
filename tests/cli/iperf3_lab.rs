//! iperf3 interop on a shaped lab link: two hosts joined through a router
//! namespace whose tbf holds every direction to 1 Gbit/s. Each pairing
//! (nicbench client -> `iperf3 -s`, `iperf3 -c` -> `nicbench serve
//! --iperf3-port`, both directions) must measure what iperf3 measures
//! against itself on the same link, within 1%.
//!
//! This compares two measurements of a rate-limited link, not a timing
//! of our code: the tbf sets the rate, so the figure is a property of the
//! link, and a tool that counted bytes or seconds differently (the omit
//! period, the interval's end, a stream's start) would be off by more.
//! -O 1 excludes the tbf bucket's burst and TCP's ramp. A round that
//! disagrees is measured again (at most 3 rounds): on this 2-core machine
//! a test running beside it can starve one run; a tool that counts
//! differently disagrees in every round. Skipped, saying why, without
//! root and iproute2 or without iperf3 (failing under CI).

use std::net::Ipv4Addr;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

/// The link's rate, and how far apart two tools' figures may be.
const RATE: u64 = 1_000_000_000;
const AGREEMENT_PERCENT: f64 = 1.0;
const IPERF3_PORT: u16 = 5201;
const AGENT_IPERF3_PORT: u16 = 5202;
const SECONDS: &str = "3";
/// A round whose figures disagree is measured again, up to this many
/// times: another test saturating this machine's cores can starve one run
/// (it then reads low, whichever tool ran). A tool that counts differently
/// disagrees in every round.
const ROUNDS: usize = 3;
const OMIT: &str = "1";

/// A process inside a lab host, killed when dropped.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
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

/// `iperf3 -c` in host a; the receiver's rate (sum_received), bit/s.
fn iperf3_client(lab: &nicbench::lab::Lab, server: Ipv4Addr, port: u16, reverse: bool) -> f64 {
    let mut command = lab.command("a", "iperf3");
    command
        .args([
            "-c",
            &server.to_string(),
            "-p",
            &port.to_string(),
            "-t",
            SECONDS,
            "-O",
            OMIT,
            "-J",
        ])
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
    doc["end"]["sum_received"]["bits_per_second"].as_f64().unwrap()
}

/// `nicbench tcp iperf3://SERVER` in host a; the receiver's rate, bit/s.
fn nicbench_client(lab: &nicbench::lab::Lab, server: Ipv4Addr, reverse: bool) -> f64 {
    let target = format!("iperf3://{server}:{IPERF3_PORT}");
    let mut command = lab.command("a", BIN);
    clean_env(&mut command)
        .args(["tcp", &target, "-t", SECONDS, "-O", OMIT, "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if reverse {
        command.arg("-R");
    }
    let out = wait_output(command.spawn().unwrap(), COMMAND_LIMIT, "nicbench tcp iperf3://");
    assert!(out.status.success(), "nicbench tcp {target}: {}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["sum"]["receiver"]["bits_per_second"].as_f64().unwrap()
}

fn percent_apart(a: f64, b: f64) -> f64 {
    (a - b).abs() * 100.0 / b
}

/// Not in the default suite: under the full `cargo test` on this 2-core
/// machine, the tests running beside it starve every round (3.6-9.3% apart
/// in all 3 rounds, while the linerate tbf test failed too). Run alone by
/// bench/iperf3-lab-agreement.sh, where it agrees within 0.1-0.7%.
#[test]
#[ignore = "needs the machine to itself: bench/iperf3-lab-agreement.sh"]
fn every_iperf3_pairing_agrees_with_iperf3_itself_on_a_shaped_link() {
    require_lab!();
    require!(crate::iperf3::installed());
    // Jumbo frames: 1 Gbit/s at a sixth of the packets, so the CPU the
    // shaped link needs is small next to what other tests take.
    let lab = lab_builder()
        .via_router()
        .rate(RATE)
        .mtu(9000)
        .no_agents()
        .build()
        .unwrap();
    let b = lab.addr("b");
    let iperf3_server = lab
        .command("b", "iperf3")
        .args(["-s", "-B", &b.to_string(), "-p", &IPERF3_PORT.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _iperf3_server = Guard(iperf3_server);
    wait_listening(&lab, "b", b, IPERF3_PORT, "iperf3 -s");
    let agent = AgentProcess::start_with(
        lab.command("b", BIN),
        &b.to_string(),
        &["--iperf3-port", &AGENT_IPERF3_PORT.to_string()],
    );
    agent.wait_for_log("listening for iperf3 clients");

    let mut rounds = Vec::new();
    for round in 1..=ROUNDS {
        let outcome = measure_round(&lab, b);
        eprintln!("round {round}:\n{}", outcome.figures.join("\n"));
        if outcome.problems.is_empty() {
            return;
        }
        rounds.push(format!("round {round}: {}", outcome.problems.join("; ")));
    }
    panic!(
        "no round of {ROUNDS} agreed within {AGREEMENT_PERCENT}%:\n{}",
        rounds.join("\n")
    );
}

/// The figures of one round, and what disagreed.
struct Round {
    figures: Vec<String>,
    problems: Vec<String>,
}

/// iperf3 against itself before and after, each pairing in between.
fn measure_round(lab: &nicbench::lab::Lab, b: Ipv4Addr) -> Round {
    let baseline_before = iperf3_client(lab, b, IPERF3_PORT, false);
    let pairings = [
        ("nicbench -> iperf3 -s", nicbench_client(lab, b, false)),
        ("nicbench -R <- iperf3 -s", nicbench_client(lab, b, true)),
        (
            "iperf3 -c -> nicbench serve",
            iperf3_client(lab, b, AGENT_IPERF3_PORT, false),
        ),
        (
            "iperf3 -c -R <- nicbench serve",
            iperf3_client(lab, b, AGENT_IPERF3_PORT, true),
        ),
    ];
    let baseline_after = iperf3_client(lab, b, IPERF3_PORT, false);
    let baseline = (baseline_before + baseline_after) / 2.0;
    let mut figures = vec![format!(
        "  iperf3 -> iperf3: {:.2} and {:.2} Mbit/s",
        baseline_before / 1e6,
        baseline_after / 1e6
    )];
    let mut problems = vec![];
    // The link sets the rate: iperf3 agrees with itself, near the tbf's rate.
    if percent_apart(baseline_before, baseline_after) > AGREEMENT_PERCENT {
        problems.push(format!(
            "iperf3 against itself moved from {baseline_before:.0} to {baseline_after:.0} bit/s (the link was not steady)"
        ));
    }
    if !(baseline > 0.9 * RATE as f64 && baseline <= RATE as f64) {
        problems.push(format!(
            "iperf3 -> iperf3 {baseline:.0} bit/s: the 1 Gbit/s tbf was not the bottleneck"
        ));
    }
    for (pairing, rate) in pairings {
        let apart = percent_apart(rate, baseline);
        figures.push(format!(
            "  {pairing}: {:.2} Mbit/s ({apart:.2}% from iperf3 -> iperf3)",
            rate / 1e6
        ));
        if apart > AGREEMENT_PERCENT {
            problems.push(format!(
                "{pairing}: {rate:.0} bit/s, {apart:.2}% from iperf3's own {baseline:.0} bit/s"
            ));
        }
    }
    Round { figures, problems }
}
