//! Percent of line rate against the kernel's own shaper (issue 11), and the
//! test sockets' own retransmissions.
//!
//! The model is checked against what the shaper itself counted, not
//! against how busy a TCP flow kept it: how close a flow comes to a tbf's
//! rate is the machine's (98% for months, then 93.7% at 1 Gbit/s, MTU 1500
//! in a loaded CI run, the router forwarding in the softirq of a busy
//! 2-core machine). What nicbench controls is checked instead:
//!
//! - the model's frame: the payload the test moved, with what its senders
//!   sent again, over the bytes the tbf sent in that time must be the
//!   model's payload per counted frame (a wrong overhead, 0 instead of
//!   veth's 14 B, is 0.15% off at MTU 9000 and 0.9% at MTU 1500);
//! - the model's figure: the rate given times payload per counted frame;
//! - the measurement: never more than the shaper can pass (100.2%), and not
//!   grossly below it (half: bits for bytes, a wrong rate).
//!
//! Without root or iproute2 every test prints why and returns (skipped).

use std::process::Stdio;

use nicbench::lab::{Lab, LinkSelector};
use serde_json::Value;

use super::common::*;

/// The measured goodput may not pass more than the shaper allows, less
/// interval timing. The shaper's own byte count (below) is the exact check;
/// this one rests on when the measured window closed, which a loaded
/// machine moves: the whole suite beside two `yes` hogs read 100.36% once
/// at 100 Mbit/s and MTU 9000 (7 ms of a 2 s window), its bytes within the
/// model. One percent is 20 ms of that window.
const HIGHEST_PERCENT: f64 = 101.0;
/// A floor against gross errors only (a factor of 8, a wrong rate).
const LOWEST_PERCENT: f64 = 50.0;
/// How far the shaper's payload share may fall below the model's: the odd
/// segment shorter than the MSS (a write's end, the last one) and the
/// control connection's few messages cost frames of their own (0.013% at
/// most in the runs that set it; 14 B of overhead against none is 0.15%
/// at MTU 9000).
const FRAME_SHARE_BELOW: f64 = 0.0006;

fn tcp_json(lab: &Lab, args: &[&str]) -> Value {
    let mut all = vec!["tcp", "b", "--json"];
    all.extend_from_slice(args);
    let out = lab.command("a", BIN).args(&all).stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "tcp {all:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("JSON result")
}

/// A tbf and what it has sent since it was made: bytes as it counts them
/// (the frame without preamble and FCS on veth) and packets.
struct Shaper {
    netns: String,
    ifname: String,
}

impl Shaper {
    /// The tbf on `host`'s end of the link towards `towards`.
    fn on(lab: &Lab, host: &str, towards: &str) -> Shaper {
        let link = lab
            .state()
            .links
            .iter()
            .find(|l| l.end_of(host).is_some() && l.end_of(towards).is_some())
            .unwrap_or_else(|| panic!("no link between {host} and {towards}"));
        Shaper {
            netns: lab.netns(host).to_string(),
            ifname: link.end_of(host).unwrap().ifname.clone(),
        }
    }

    fn sent_bytes(&self) -> u64 {
        let out = std::process::Command::new("tc")
            .args(["-n", &self.netns, "-s", "-j", "qdisc", "show", "dev", &self.ifname])
            .output()
            .unwrap();
        assert!(out.status.success(), "tc -s qdisc show: {}", stderr(&out));
        let all: Value = serde_json::from_slice(&out.stdout).expect("tc's JSON");
        let tbf = all
            .as_array()
            .and_then(|q| q.iter().find(|q| q["kind"] == "tbf"))
            .unwrap_or_else(|| panic!("no tbf on {} in {all}", self.ifname));
        tbf["bytes"]
            .as_u64()
            .unwrap_or_else(|| panic!("no byte count in {tbf}"))
    }
}

/// Runs `tcp` from a to b with `args` and checks the line-rate share
/// against the model and against `shaper`'s own count of what it sent.
/// Returns the run.
fn within_the_model(lab: &Lab, shaper: &Shaper, args: &[&str], rate: u64, what: &str) -> Value {
    let before = shaper.sent_bytes();
    let run = tcp_json(lab, args);
    let wire = shaper.sent_bytes() - before;
    let share = &run["line_rate"];
    let measured = share["measured_bits_per_second"].as_f64().unwrap();
    let theory = share["theoretical_goodput_bits_per_second"].as_f64().unwrap();
    let sustained = share["sustained_goodput_bits_per_second"].as_f64().unwrap();
    let percent = share["percent_of_theoretical_goodput"].as_f64().unwrap();
    let payload = share["payload_bytes"].as_f64().unwrap();
    let frame = share["counted_bytes_per_frame"].as_f64().unwrap();
    assert_eq!(share["link_bits_per_second"], rate, "{share}");
    // The model's figure is the rate times the payload per counted frame.
    assert!(
        (sustained - rate as f64 * payload / frame).abs() < 1.0,
        "{what}: sustained {sustained} for {rate} bit/s and {payload} of {frame} B: {share}"
    );
    assert!((percent - measured * 100.0 / theory).abs() < 1e-9);

    // What the shaper carried: every payload byte the receivers counted,
    // the warm-up's included. A segment the router's queue dropped never
    // left the tbf; only the copy sent again did, once.
    // A copy sent again when the first was not lost (a spurious timeout
    // on a stalled machine) left the tbf too: the senders' own count of
    // what they sent again bounds it.
    let (mut carried, mut again) = (0.0, 0.0);
    for stream in run["streams"].as_array().unwrap() {
        let receiver = &stream["receiver"];
        carried += receiver["bytes"].as_f64().unwrap() + receiver["omitted_bytes"].as_f64().unwrap();
        again += stream["sender"]["tcp_info"]["bytes_retransmitted"]
            .as_f64()
            .unwrap_or(0.0);
    }
    let model_share = payload / frame;
    let shaper_share = carried / wire as f64;
    eprintln!(
        "{what}: {:.2} of {:.2} Mbit/s = {percent:.2}%; payload per byte the tbf sent {shaper_share:.5}, \
         model {model_share:.5} ({payload} of {frame} B; {wire} B sent)",
        measured / 1e6,
        theory / 1e6,
    );
    let with_copies = (carried + again) / wire as f64;
    assert!(
        shaper_share <= model_share + 1e-5 && with_copies >= model_share - FRAME_SHARE_BELOW,
        "{what}: the tbf sent {wire} B for {carried} B of payload ({again} B sent again), \
         {shaper_share:.5} per byte; the model's frame says {model_share:.5}: {share}"
    );
    assert!(
        (LOWEST_PERCENT..=HIGHEST_PERCENT).contains(&percent),
        "{what}: {percent:.2}% of the model: {share}"
    );
    assert!(share.get("above_model").is_none() || percent > 100.0, "{share}");
    run
}

/// TCP through a tbf in a router namespace at 100 Mbit/s and 1 Gbit/s, MTU
/// 1500 and 9000. The ends cannot see the router's shaper, so the run says
/// what it is: `--link-speed` and the 14 B per packet tbf counts on veth;
/// the bucket's burst is excluded with a 1 s warm-up (and said so).
#[test]
fn tcp_through_a_router_tbf_is_within_the_model() {
    require_lab!();
    let mut lab = lab_builder().via_router().rate(100_000_000).build().unwrap();
    let shaper = Shaper::on(&lab, "r", "b");
    for (rate, speed) in [(100_000_000, "100M"), (1_000_000_000, "1G")] {
        let everywhere = LinkSelector {
            link: None,
            towards: None,
        };
        lab.set_rate(everywhere, Some(rate)).unwrap();
        for mtu in [1500, 9000] {
            lab.set_mtu(None, mtu).unwrap();
            let run = within_the_model(
                &lab,
                &shaper,
                &["-t", "3", "-O", "1", "--link-speed", speed, "--link-overhead", "14"],
                rate,
                &format!("router tbf {speed}bit/s, MTU {mtu}"),
            );
            let share = &run["line_rate"];
            assert_eq!(share["link_speed_source"], "option");
            assert_eq!(share["overhead_model"], "option");
            assert_eq!(share["overhead_bytes_per_frame"], 14);
            assert_eq!(share["counted_bytes_per_frame"], mtu + 14);
            assert_eq!(share["burst_handling"], "warmup_excluded");
        }
    }
}

/// A tbf on the ends' own interfaces is read from the kernel: its rate, its
/// accounting (14 B per packet on veth, no overhead configured) and its
/// bucket, which is included in the model because nothing is omitted.
#[test]
fn a_tbf_on_the_interface_is_counted_as_it_counts_with_its_bucket() {
    require_lab!();
    let lab = lab_builder().rate(100_000_000).mtu(9000).build().unwrap();
    let shaper = Shaper::on(&lab, "a", "b");
    let run = within_the_model(
        &lab,
        &shaper,
        &["-t", "3"],
        100_000_000,
        "tbf on the interface 100Mbit/s, MTU 9000, bucket included",
    );
    let shaping = &run["client"]["facts"]["interface"]["qdisc_shaping"];
    assert_eq!(shaping["overhead_bytes"], 0, "{shaping}");
    assert_eq!(shaping["linklayer"], "ethernet", "{shaping}");
    let burst = shaping["burst_bytes"].as_u64().unwrap();
    // The lab asks tc for a bucket of 4 ms at the rate (50000 B here).
    assert!((49_000..=51_000).contains(&burst), "{shaping}");
    let share = &run["line_rate"];
    assert_eq!(share["link_speed_source"], "qdisc");
    assert_eq!(share["overhead_model"], "qdisc");
    assert_eq!(share["counted_bytes_per_frame"], 9014);
    assert_eq!(share["burst_handling"], "included");
    assert_eq!(share["burst_bytes"], burst);
    let allowance = share["burst_allowance_bits_per_second"].as_f64().unwrap();
    let sustained = share["sustained_goodput_bits_per_second"].as_f64().unwrap();
    let theory = share["theoretical_goodput_bits_per_second"].as_f64().unwrap();
    assert!(
        allowance > 0.0 && (theory - sustained - allowance).abs() < 1e-3,
        "{share}"
    );
    // The text shows the overhead used and the bucket.
    let out = lab
        .command("a", BIN)
        .args(["tcp", "b", "-t", "1", "-O", "1"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("14 B per packet as the qdisc counts"), "{text}");
    assert!(text.contains("emptied during the -O warm-up"), "{text}");
}

/// Retransmissions come from the test's own sockets (TCP_INFO), summed over
/// the streams; the namespace's counters stay, labelled as namespace-wide.
#[test]
fn retransmissions_of_the_test_sockets_are_shown_apart_from_the_namespace() {
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("tcp", &["-t", "1", "-P", "2"]);
    for stream in run["streams"].as_array().unwrap() {
        let info = &stream["sender"]["tcp_info"];
        let sent = info["bytes_sent"].as_u64().expect("tcpi_bytes_sent");
        // Bytes still in the send buffer when TCP_INFO is read are written
        // but not yet sent, so only a lower bound holds.
        assert!(sent > 0, "{info}");
        assert!(info["bytes_retransmitted"].as_u64().unwrap() <= sent, "{info}");
        assert!(info["data_segments_sent"].as_u64().unwrap() > 0, "{info}");
    }
    let port = agent.port.to_string();
    let out = nicbench(&["tcp", "127.0.0.1", "-p", &port, "-t", "1", "-P", "2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.lines()
            .any(|l| l.starts_with("Retransmitted by the test's sockets: sender ") && l.ends_with("over 2 streams")),
        "{text}"
    );
    assert!(text.contains("TCP namespace-wide "), "{text}");
}
