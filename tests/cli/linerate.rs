//! Percent of line rate against the kernel's own shaper (issue 11), and the
//! test sockets' own retransmissions. TCP through a tbf bottleneck must
//! read between 98% and 100.2% of the model
//! when the model counts what the shaper counts. These are properties of
//! the model against tbf, not timings: a shaper cannot pass more than its
//! rate and bucket, and a saturating TCP flow keeps it busy.
//! Without root or iproute2 every test prints why and returns (skipped).

use std::process::Stdio;

use nicbench::lab::{Lab, LinkSelector};
use serde_json::Value;

use super::common::*;

/// The lower and upper bound of measured / theoretical goodput, percent.
const LOWEST_PERCENT: f64 = 98.0;
const HIGHEST_PERCENT: f64 = 100.2;

fn tcp_json(lab: &Lab, args: &[&str]) -> Value {
    let mut all = vec!["tcp", "b", "--json"];
    all.extend_from_slice(args);
    let out = lab.command("a", BIN).args(&all).stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "tcp {all:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("JSON result")
}

/// Checks the share and returns (measured, theoretical) in Mbit/s.
///
/// The whole run may not pass more than the model allows (a shaper cannot),
/// and its best interval after the warm-up must reach the model's lower
/// bound: a saturating flow keeps the shaper busy, but on a loaded machine
/// (a fresh clone's suite) its sender may miss moments of it, and the whole
/// run read 97.29% once. A model wrong by a header's worth (1%) or more
/// still fails: no interval can beat a model set too high.
fn within_the_model(run: &Value, what: &str) -> (f64, f64) {
    let share = &run["line_rate"];
    let measured = share["measured_bits_per_second"].as_f64().unwrap();
    let theory = share["theoretical_goodput_bits_per_second"].as_f64().unwrap();
    let percent = share["percent_of_theoretical_goodput"].as_f64().unwrap();
    eprintln!(
        "{what}: {:.2} of {:.2} Mbit/s = {percent:.2}% (overhead {} B per packet, {} B counted, burst {})",
        measured / 1e6,
        theory / 1e6,
        share["overhead_bytes_per_frame"],
        share["counted_bytes_per_frame"],
        share["burst_handling"]
    );
    assert!((percent - measured * 100.0 / theory).abs() < 1e-9);
    assert!(
        percent <= HIGHEST_PERCENT,
        "{what}: {percent:.2}% of the model: {share}"
    );
    let best_interval = run["streams"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["receiver"]["intervals"].as_array().cloned().unwrap_or_default())
        .filter(|i| i["omitted"] != true)
        // A short last interval's rate is a few packets over a few ms.
        .filter(|i| i["end_seconds"].as_f64().unwrap_or(0.0) - i["start_seconds"].as_f64().unwrap_or(0.0) >= 0.5)
        .filter_map(|i| i["bits_per_second"].as_f64())
        .fold(0.0, f64::max);
    let best_percent = best_interval * 100.0 / theory;
    assert!(
        (LOWEST_PERCENT..=HIGHEST_PERCENT + 1.0).contains(&best_percent),
        "{what}: best interval {best_percent:.2}% of the model (the run {percent:.2}%): {share}"
    );
    assert!(share.get("above_model").is_none() || percent > 100.0, "{share}");
    (measured / 1e6, theory / 1e6)
}

/// TCP through a tbf in a router namespace at 100 Mbit/s and 1 Gbit/s, MTU
/// 1500 and 9000. The ends cannot see the router's shaper, so the run says
/// what it is: `--link-speed` and the 14 B per packet tbf counts on veth;
/// the bucket's burst is excluded with a 1 s warm-up (and said so).
#[test]
fn tcp_through_a_router_tbf_is_within_the_model() {
    require_lab!();
    let mut lab = lab_builder().via_router().rate(100_000_000).build().unwrap();
    for (rate, speed) in [(100_000_000, "100M"), (1_000_000_000, "1G")] {
        let everywhere = LinkSelector {
            link: None,
            towards: None,
        };
        lab.set_rate(everywhere, Some(rate)).unwrap();
        for mtu in [1500, 9000] {
            lab.set_mtu(None, mtu).unwrap();
            let run = tcp_json(
                &lab,
                &["-t", "3", "-O", "1", "--link-speed", speed, "--link-overhead", "14"],
            );
            let share = &run["line_rate"];
            assert_eq!(share["link_speed_source"], "option");
            assert_eq!(share["overhead_model"], "option");
            assert_eq!(share["overhead_bytes_per_frame"], 14);
            assert_eq!(share["counted_bytes_per_frame"], mtu + 14);
            assert_eq!(share["burst_handling"], "warmup_excluded");
            within_the_model(&run, &format!("router tbf {speed}bit/s, MTU {mtu}"));
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
    let run = tcp_json(&lab, &["-t", "3"]);
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
    within_the_model(&run, "tbf on the interface 100Mbit/s, MTU 9000, bucket included");
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
