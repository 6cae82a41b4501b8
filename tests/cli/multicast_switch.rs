//! `nicbench multicast` in a switch lab records what the switch saw: the
//! bridge's mdb for the group (the ports of the receivers whose reports
//! reached it, by their lab hosts) and the change of its IGMP counters; a
//! receiver whose joins never left its host is told so. Outside a lab the
//! text says why there is no switch view.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::common::{nicbench, stderr, AgentProcess, BIN};
use crate::multicast::run_in;

/// The switch's port toward lab host `host`.
fn port_of(lab: &nicbench::lab::Lab, host: &str) -> String {
    let link = lab.state().links_of(host)[0];
    link.end_of("sw").expect("a link to the switch").ifname.clone()
}

/// Four hosts on a switch: a sends, b and c join, d's host drops every
/// IGMP message it would send (its joins never reach the switch). What
/// the switch records agrees with itself and with the receivers, however
/// far the new lab's bridge is from filtering by its mdb.
#[test]
fn on_a_switch_the_document_records_the_mdb_of_the_group_and_the_igmp_counters() {
    require_lab!();
    // The host's filter is an nftables rule.
    require!(crate::common::tool("nft", &["--version"], "apt-get install nftables"));
    let lab = crate::common::lab_builder().switch().hosts(4).build().unwrap();
    for rule in [
        vec!["add", "table", "inet", "nicbench_test"],
        vec![
            "add",
            "chain",
            "inet",
            "nicbench_test",
            "out",
            "{ type filter hook output priority 0; }",
        ],
        vec![
            "add",
            "rule",
            "inet",
            "nicbench_test",
            "out",
            "ip",
            "protocol",
            "igmp",
            "drop",
        ],
    ] {
        run_in(&lab, "d", "nft", &rule);
    }
    let group = "239.77.0.1";
    let args = [
        "multicast",
        "b",
        "c",
        "d",
        "-g",
        group,
        "-t",
        "1",
        "-b",
        "10M",
        "--join-wait",
        "500ms",
        "--no-save",
    ];
    let text = run_in(&lab, "a", BIN, &[&args[..], &["--json"]].concat());
    let doc: Value = serde_json::from_str(&text).expect("JSON");
    let schema = crate::result_schema::schema();
    crate::result_schema::assert_valid(&schema, &doc, "a multicast document of a switch lab");
    let switch = &doc["switch"];
    assert_eq!(switch["lab"], lab.name(), "{switch}");
    assert_eq!(switch["namespace"], lab.netns("sw"));
    assert_eq!(switch["bridge"], "br0");
    assert_eq!(switch["group"], group);
    // The counters: every lab host's port, by its host and address.
    let ports = switch["counters"]["ports"].as_array().unwrap();
    let hosts: BTreeSet<&str> = ports.iter().map(|p| p["host"].as_str().unwrap()).collect();
    assert_eq!(hosts, BTreeSet::from(["a", "b", "c", "d"]));
    let port = |host: &str| ports.iter().find(|p| p["host"] == host).unwrap();
    for host in ["a", "b", "c", "d"] {
        assert_eq!(port(host)["port"], port_of(&lab, host).as_str());
        assert_eq!(port(host)["address"], lab.addr(host).to_string());
        assert_eq!(port(host)["igmp_parse_errors"], 0, "{switch}");
    }
    let reports = |host: &str| port(host)["igmp_reports"]["received"].as_u64().unwrap();
    assert!(switch["counters"]["bridge"]["igmp_reports"]["received"].is_u64());
    // The mdb: the ports of the receivers whose reports reached the switch
    // during the test (the group is this test's own), and no other. In a
    // new lab a receiver may keep its IGMPv2 report on hearing another's
    // and get the group by the bridge's flooding: then its port is in
    // neither, and the text says so.
    let mdb = switch["mdb"].as_array().unwrap();
    let members: Vec<(String, String)> = mdb
        .iter()
        .map(|m| {
            assert_eq!(m["state"], "temp", "learned from a report: {m}");
            assert!(m["source"].is_null(), "{m}");
            (m["port"].as_str().unwrap().into(), m["host"].as_str().unwrap().into())
        })
        .collect();
    let reported: Vec<(String, String)> = ["a", "b", "c", "d"]
        .into_iter()
        .filter(|h| reports(h) > 0)
        .map(|h| (port_of(&lab, h), h.to_string()))
        .collect();
    assert_eq!(members, reported, "in the ports' order, one entry each: {switch}");
    assert!(
        !members.is_empty(),
        "the first member's report is never held back: {switch}"
    );
    assert!(
        members.iter().all(|(_, h)| h == "b" || h == "c"),
        "only receivers that joined: {switch}"
    );
    assert_eq!(reports("d"), 0, "d's host drops its IGMP: {switch}");
    let all: u64 = ["a", "b", "c", "d"].into_iter().map(reports).sum();
    assert!(all >= members.len() as u64, "{switch}");
    // b and c joined. d's joins never left its host: once the bridge
    // filters, d gets nothing and its words say the switch never had its
    // join; in a new lab's first seconds the bridge still floods the
    // group to every port (the kernel holds strict filtering back for its
    // query response interval after it becomes the querier), and d gets
    // it all the same.
    let receivers = doc["receivers"].as_array().unwrap();
    let sent = doc["sum"]["udp"]["sent_datagrams"].as_u64().unwrap();
    crate::multicast::assert_consistent(&doc, sent);
    let standings: Vec<&str> = receivers.iter().map(|r| r["standing"].as_str().unwrap()).collect();
    assert!(standings[..2].iter().all(|s| *s != "never_joined"), "{standings:?}");
    let d_words = receivers[2]["verdict"].as_str().unwrap();
    let never_reached = format!(
        "the switch's mdb has no entry for the group on its port {}: its join never reached the switch (0 IGMP \
         reports came in on that port during the test)",
        port_of(&lab, "d")
    );
    assert_eq!(
        standings[2] == "never_joined",
        d_words.starts_with("never joined") && d_words.contains(&never_reached),
        "{d_words}"
    );
    // The text's switch block names the member ports by their hosts.
    let text = run_in(&lab, "a", BIN, &args);
    let forwards = format!("switch: bridge br0 in {} forwards {group} to ", lab.netns("sw"));
    let forwards = text
        .lines()
        .find(|l| l.starts_with(&forwards))
        .unwrap_or_else(|| panic!("{text}"));
    // Each receiver is a member, or is named as flooded, or never joined;
    // the last two's words say the switch never had its join; d is no member.
    for host in ["b", "c", "d"] {
        let member = forwards.contains(&format!("{host} ({})", port_of(&lab, host)));
        let flooded = text.contains(&format!("switch: {host} got the group though the mdb has no entry"));
        let never = text.contains(&format!("\n{host}: never joined"));
        assert_eq!(
            [member, flooded, never].iter().filter(|&&b| b).count(),
            1,
            "{host}: {text}"
        );
        assert_eq!(
            never || flooded,
            text.contains(&format!("its port {}: its join never reached", port_of(&lab, host))),
            "{host}: {text}"
        );
    }
    assert!(!forwards.contains("d ("), "{text}");
    assert!(
        text.contains("switch: IGMP over the test: reports in from a "),
        "{text}"
    );
    assert!(!text.contains("the switch's mdb: "), "{text}");
}

/// Outside a lab the text says there is no switch to read, and the
/// document has no `switch`.
#[test]
fn outside_a_lab_the_text_says_there_is_no_switch_view() {
    let agent = AgentProcess::start(&[]);
    let receiver = format!("127.0.0.1:{}", agent.port);
    let group = format!(
        "239.77.{}.{}:{}",
        std::process::id() % 250,
        1,
        21000 + std::process::id() % 1000
    );
    let out = nicbench(&[
        "multicast",
        &receiver,
        "-g",
        &group,
        "-t",
        "0.3",
        "-b",
        "5M",
        "--join-wait",
        "200ms",
        "--no-save",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.ends_with("the switch's mdb: not in a lab\n"), "{text}");
    assert!(!text.contains("switch: bridge"), "{text}");
}
