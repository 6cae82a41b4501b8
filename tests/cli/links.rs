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

/// The links' figures hold together and their verdict agrees with them,
/// whatever the machine's speed: the aggregate is the links' sum, the
/// scaling efficiency is the aggregate over links x best single link, and
/// the verdict's cause is in the breakdown by the rules of src/multilink.rs
/// (`judge`: a slow link first, then a side's CPU or the trial's CPU-bound
/// verdict, then every link at its line rate).
fn assert_links_verdict_agrees(doc: &Value) {
    use nicbench::multilink::{AT_LINE_RATE_PERCENT, SLOW_LINK_PERCENT, SLOW_LINK_UNDER_CPU_PERCENT};
    let links = &doc["links"];
    let each = links["links"].as_array().unwrap();
    let near = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.abs().max(1.0);
    let received: Vec<f64> = each.iter().map(|l| rate(&l["receiver_bits_per_second"])).collect();
    let aggregate = rate(&links["aggregate_receiver_bits_per_second"]);
    assert!(
        near(aggregate, received.iter().sum()),
        "aggregate {aggregate} of {received:?}"
    );
    let best = rate(&links["best_single_link_bits_per_second"]);
    let efficiency = rate(&links["scaling_efficiency_percent"]);
    assert!(
        near(efficiency, aggregate * 100.0 / (each.len() as f64 * best)),
        "efficiency {efficiency}"
    );
    // The slowest link against the mean of the others, in percent.
    let slowest = (0..each.len())
        .min_by(|&a, &b| received[a].total_cmp(&received[b]))
        .unwrap();
    let others: Vec<f64> = (0..each.len()).filter(|&i| i != slowest).map(|i| received[i]).collect();
    let slow_share = received[slowest] * 100.0 / (others.iter().sum::<f64>() / others.len() as f64);
    let at_line_rate = each
        .iter()
        .all(|l| l["percent_of_link"].as_f64().is_some_and(|p| p >= AT_LINE_RATE_PERCENT));
    let verdict = &links["verdict"];
    let summary = verdict["summary"].as_str().unwrap();
    match verdict["kind"].as_str().unwrap() {
        "link_slow" => {
            assert!(slow_share < SLOW_LINK_PERCENT, "{slow_share}% of the others: {verdict}");
            assert!(
                summary.starts_with(&format!("link {} ", each[slowest]["link"])),
                "not the slowest: {verdict}"
            );
        }
        kind => {
            assert!(
                slow_share >= SLOW_LINK_UNDER_CPU_PERCENT,
                "{slow_share}%, yet {verdict}"
            );
            match kind {
                "cpu_starved" | "cgroup_throttled" | "cpu_bound" => {
                    assert!(summary.starts_with("aggregate limited by the"), "{verdict}")
                }
                "links_at_line_rate" => assert!(at_line_rate, "{links}"),
                _ => assert!(
                    !at_line_rate && slow_share >= SLOW_LINK_PERCENT,
                    "every link at its line rate or one slow, yet {verdict}"
                ),
            }
        }
    }
}

/// Three links a-r-b, each shaped to 100 Mbit/s in the router.
fn three_links(extra: impl FnOnce(nicbench::lab::LabBuilder) -> nicbench::lab::LabBuilder) -> Lab {
    extra(lab_builder().via_router().links(3).rate(100_000_000))
        .build()
        .unwrap()
}

#[test]
fn three_100mbit_links_scale_as_their_verdict_says() {
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
    // The best single link is the best link measured alone; no link
    // carries more than its 100 Mbit/s tbf lets through (a loaded machine
    // only carries less). How near 3 x one link the aggregate gets is a
    // figure for bench/, not an assertion: the verdict must say why.
    assert_eq!(rate(&links["best_single_link_bits_per_second"]), best);
    assert!(best > 0.0 && best < 100e6, "one link alone: {best}");
    assert_links_verdict_agrees(&doc);
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
    assert_eq!(verdict["side"], "path", "{verdict}");
    assert_eq!(verdict["evidence"][0]["kind"], "link_slow", "{verdict}");
    assert_eq!(verdict["evidence"][0]["role"], "cause", "{verdict}");
    let summary = verdict["summary"].as_str().unwrap();
    let named = format!(
        "link 2 (eth1 {} -> {}) is the slow one",
        lab.link_addr(2, "a"),
        lab.link_addr(5, "b")
    );
    assert!(summary.starts_with(&named), "{summary}");
    assert_eq!(doc["verdict"], *verdict, "the run's verdict is the links'");
    assert_links_verdict_agrees(&doc);
    // The 10 Mbit/s tbf's ceiling, which a loaded machine cannot raise.
    let slow = rate(&doc["links"]["links"][1]["receiver_bits_per_second"]);
    assert!(slow < 10e6, "the slow link got {slow}");
}

#[test]
fn a_cpu_starved_receiver_caps_the_aggregate_and_is_named() {
    require_lab!();
    let _turn = limited_lab_turn();
    let lab = three_links(|b| b.cpu_limit("b", 1.0));
    let doc = json_in(&lab, "a", &["tcp", "b", "--links", "auto", "-t", "3"]);
    assert_links_verdict_agrees(&doc);
    let verdict = &doc["links"]["verdict"];
    let kind = verdict["kind"].as_str().unwrap();
    assert!(kind == "cpu_starved" || kind == "cgroup_throttled", "{verdict}");
    assert_eq!(verdict["side"], "receiver", "{verdict}");
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
