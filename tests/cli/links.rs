//! Several links at once (`--links`, `--scaling`) in the lab: three links
//! shaped to 100 Mbit/s in a router aggregate to three times one; one link
//! shaped to 10 Mbit/s is named; a CPU-starved receiver caps the aggregate
//! and is named; bad `--links` values get errors that say what was wrong.
//! Rates are the router's tbf, so every comparison is of shaped rates.

use std::process::{Output, Stdio};

use nicbench::lab::Lab;
use serde_json::Value;

use super::common::*;
use super::result_schema::{assert_valid, schema};

/// Runs nicbench in `host` of `lab`.
fn run_in(lab: &Lab, host: &str, args: &[&str]) -> Output {
    lab.command(host, BIN).args(args).stdin(Stdio::null()).output().unwrap()
}

/// A `--json` run in `host`, checked against the schema.
fn json_in(lab: &Lab, host: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = run_in(lab, host, &all);
    assert!(out.status.success(), "nicbench {all:?}: {}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON result");
    assert_valid(&schema(), &doc, "a --links run");
    doc
}

fn rate(v: &Value) -> f64 {
    v.as_f64().expect("a number")
}

/// Three links a-r-b, each shaped to 100 Mbit/s in the router.
fn three_links(extra: impl FnOnce(nicbench::lab::LabBuilder) -> nicbench::lab::LabBuilder) -> Lab {
    extra(lab_builder().via_router().links(3).rate(100_000_000))
        .build()
        .unwrap()
}

#[test]
fn three_100mbit_links_give_three_times_one_link() {
    require_lab!();
    let lab = three_links(|b| b);
    let doc = json_in(
        &lab,
        "a",
        &[
            "tcp",
            "b",
            "--links",
            "auto",
            "--scaling",
            "-t",
            "3",
            "--link-speed",
            "100M",
        ],
    );
    let links = &doc["links"];
    let each = links["links"].as_array().unwrap();
    assert_eq!(each.len(), 3, "auto pairs a's three links with b's through the router");
    assert_eq!(links["best_single_link_source"], "alone");
    let alone: Vec<f64> = each
        .iter()
        .map(|l| rate(&l["alone_receiver_bits_per_second"]))
        .collect();
    let best = alone.iter().copied().fold(0.0, f64::max);
    // One link alone carries the shaped rate (95.6 Mbit/s of goodput at
    // MTU 1500 through a 100 Mbit/s tbf), so "one link" is the shaped link.
    assert!(best > 90e6 && best < 100e6, "one link alone: {best}");
    let aggregate = rate(&links["aggregate_receiver_bits_per_second"]);
    assert!(
        aggregate >= 0.95 * 3.0 * best,
        "aggregate {aggregate} is not within 5% of 3 x {best}"
    );
    let efficiency = rate(&links["scaling_efficiency_percent"]);
    assert!(
        (efficiency - aggregate * 100.0 / (3.0 * best)).abs() < 1e-6,
        "efficiency {efficiency}"
    );
    assert!(efficiency >= 95.0, "efficiency {efficiency}");
    // Each link's streams went over its own interfaces, seen on both ends.
    for (i, l) in each.iter().enumerate() {
        assert_eq!(l["client"]["interface"], format!("eth{i}"));
        assert_eq!(l["agent"]["interface"], format!("eth{i}"));
        assert_eq!(l["client"]["address"], lab.link_addr(i + 1, "a").to_string());
        assert_eq!(l["agent"]["address"], lab.link_addr(i + 4, "b").to_string());
        let received = l["agent"]["nic"]["rx_bytes"].as_u64().unwrap();
        let sent = l["client"]["nic"]["tx_bytes"].as_u64().unwrap();
        assert!(received > 10_000_000 && sent >= received / 2, "link {i}: {l}");
    }
}

#[test]
fn one_link_at_10mbit_among_three_is_named() {
    require_lab!();
    // Link 5 is b's second link: the router shapes it to 10 Mbit/s toward b.
    let lab = three_links(|b| b.link_rate(5, "b", 10_000_000));
    let doc = json_in(&lab, "a", &["tcp", "b", "--links", "auto", "-t", "3"]);
    let verdict = &doc["links"]["verdict"];
    assert_eq!(verdict["kind"], "link_slow", "{verdict}");
    let summary = verdict["summary"].as_str().unwrap();
    let named = format!(
        "link 2 (eth1 {} -> {}) is the slow one",
        lab.link_addr(2, "a"),
        lab.link_addr(5, "b")
    );
    assert!(summary.starts_with(&named), "{summary}");
    assert_eq!(doc["verdict"], *verdict, "the run's verdict is the links'");
    let slow = rate(&doc["links"]["links"][1]["receiver_bits_per_second"]);
    assert!(slow < 10e6, "the slow link got {slow}");
}

#[test]
fn a_cpu_starved_receiver_caps_the_aggregate_and_is_named() {
    require_lab!();
    let lab = three_links(|b| b.cpu_limit("b", 1.0));
    let doc = json_in(&lab, "a", &["tcp", "b", "--links", "auto", "-t", "3"]);
    let aggregate = rate(&doc["links"]["aggregate_receiver_bits_per_second"]);
    // Three links' goodput through a 100 Mbit/s tbf would be 3 x 95.6 Mbit/s.
    assert!(
        aggregate < 0.9 * 3.0 * 95.6e6,
        "the aggregate did not fall short: {aggregate}"
    );
    let verdict = &doc["links"]["verdict"];
    let kind = verdict["kind"].as_str().unwrap();
    assert!(kind == "cpu_starved" || kind == "cgroup_throttled", "{verdict}");
    let summary = verdict["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("aggregate limited by the receiver's CPU (agent)"),
        "{summary}"
    );
    assert!(summary.contains("softirq"), "names the core's softirq share: {summary}");
}

#[test]
fn bad_links_values_get_clear_errors_and_lab_exec_runs_auto() {
    require_lab!();
    let lab = lab_builder().links(2).build().unwrap();
    let (a1, b1, b2) = (lab.link_addr(1, "a"), lab.link_addr(1, "b"), lab.link_addr(2, "b"));
    let cases: Vec<(String, String)> = vec![
        (
            format!("eth9={b1}"),
            "'eth9' is neither an address nor an interface of this host".into(),
        ),
        (
            format!("10.9.9.9={b1}"),
            "10.9.9.9 is not an address of this host".into(),
        ),
        ("eth0=10.200.9.9".into(), "the agent has no address 10.200.9.9".into()),
        (format!("eth0={b1},{a1}={b1}"), "is given twice".into()),
        (
            format!("eth0={b1},eth1={b1}"),
            format!("the agent address {b1} is in links 1 and 2"),
        ),
        ("eth0".into(), "is not LOCAL=REMOTE".into()),
    ];
    for (value, expected) in cases {
        let out = run_in(&lab, "a", &["tcp", "b", "--links", &value, "-t", "1"]);
        assert_eq!(out.status.code(), Some(2), "--links {value}: {}", stderr(&out));
        assert!(stderr(&out).contains(&expected), "--links {value}: {}", stderr(&out));
    }
    let out = run_in(&lab, "a", &["sweep", "b", "--links", "auto"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("does not run over several links"),
        "{}",
        stderr(&out)
    );

    // The command line's `lab exec` resolves `auto` inside host a.
    let out = std::process::Command::new(BIN)
        .args([
            "lab",
            "exec",
            lab.name(),
            "a",
            "--",
            "nicbench",
            "udp",
            "b",
            "--links",
            "auto",
        ])
        .args(["-b", "5M", "-t", "1", "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pairs: Vec<(String, String)> = doc["spec"]["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["client"].as_str().unwrap().into(),
                p["agent"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        pairs,
        vec![
            (a1.to_string(), b1.to_string()),
            (lab.link_addr(2, "a").to_string(), b2.to_string())
        ]
    );
    assert_eq!(doc["links"]["links"].as_array().unwrap().len(), 2);
}
