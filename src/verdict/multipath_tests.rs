//! The multipath verdict on synthetic MPTCP trials: paths on tbf-shaped
//! links, as the lab builds them (figures from lab runs in docs/MPTCP.md).

use serde_json::json;

use super::*;
use crate::model::{BothCounters, BothCpu, Evidence, Flow, Role, SocketBuffers, StreamEnd, StreamResult, Sum, Total};

/// One path: its tbf rate (both ends) and what its subflow carried, Mbit/s.
struct P {
    link_mbit: Option<u64>,
    mbit: f64,
}

fn interface(host: u8, link: usize, rate: Option<u64>) -> serde_json::Value {
    let mut end = json!({
        "address": format!("10.200.{link}.{host}"),
        "interface": format!("eth{}", link - 1),
        "mtu_bytes": 1500,
        "link_speed_bits_per_second": 10_000_000_000u64,
        "link_speed_nominal": true,
    });
    if let Some(r) = rate {
        end["shaping_bits_per_second"] = json!(r * 1_000_000);
    }
    end
}

fn subflow(local: String, remote: String, bytes: u64, sender: bool, iface: serde_json::Value) -> serde_json::Value {
    json!({
        "local": local, "remote": remote, "state": "ESTABLISHED",
        "bytes_sent": if sender { bytes } else { 0 },
        "bytes_retrans": 0,
        "bytes_received": if sender { 0 } else { bytes },
        "total_retrans": 0, "rtt_us": 4000, "rtt_var_us": 300,
        "congestion_window_segments": 50, "send_mss_bytes": 1448,
        "last_data_sent_ms": 0, "last_data_received_ms": 0,
        "interface": iface,
    })
}

fn connection(subflows: Vec<serde_json::Value>, signal: u8, accepted: u8, limit: u8) -> serde_json::Value {
    json!({
        "fallback": false, "remote_key_received": true, "token": 1,
        "subflows": subflows,
        "extra_subflows": subflows_extra(signal, accepted),
        "extra_subflows_max": limit,
        "add_addr_signal": signal, "add_addr_signal_max": signal,
        "add_addr_accepted": accepted, "add_addr_accepted_max": limit,
    })
}

fn subflows_extra(_signal: u8, accepted: u8) -> u8 {
    accepted
}

fn end(role: Role, bits_per_second: f64, mptcp: serde_json::Value) -> StreamEnd {
    let mut end = StreamEnd {
        stream_id: 1,
        role,
        bytes: (bits_per_second / 8.0) as u64,
        seconds: 1.0,
        bits_per_second,
        warmup_bytes: 0,
        socket: SocketBuffers::default(),
        tcp_info: None,
        intervals: vec![],
        error: None,
        extras: Default::default(),
    };
    end.extras.set(mptcp::KEY, &mptcp);
    end
}

/// One client->agent MPTCP stream over `paths` (link i between 10.200.i.1
/// and 10.200.i.2), with `announced` addresses from the agent and the
/// client's path manager limit `limit`.
fn trial_with(paths: &[P], announced: u8, limit: u8) -> TrialResult {
    let total_bits: f64 = paths.iter().map(|p| p.mbit * 1e6).sum();
    let (mut sent, mut received) = (Vec::new(), Vec::new());
    for (i, p) in paths.iter().enumerate() {
        let link = i + 1;
        let bytes = (p.mbit * 1e6 / 8.0) as u64;
        let (a, b) = (
            format!("10.200.{link}.1:{}", 40000 + link),
            format!("10.200.{link}.2:5201"),
        );
        sent.push(subflow(
            a.clone(),
            b.clone(),
            bytes,
            true,
            interface(1, link, p.link_mbit),
        ));
        received.push(subflow(b, a, bytes, false, interface(2, link, p.link_mbit)));
    }
    let joined = (paths.len() - 1) as u8;
    let total = Total {
        bytes: (total_bits / 8.0) as u64,
        seconds: 1.0,
        bits_per_second: total_bits,
    };
    TrialResult {
        trial: 1,
        streams: vec![StreamResult {
            stream_id: 1,
            flow: Flow::ClientToAgent,
            sender: end(Role::Sender, total_bits, connection(sent, announced, joined, limit)),
            receiver: end(Role::Receiver, total_bits, connection(received, announced, 0, limit)),
            extras: Default::default(),
        }],
        sum: Sum {
            sender: total.clone(),
            receiver: total,
            ..Sum::default()
        },
        cpu: BothCpu::default(),
        counters: BothCounters::default(),
        line_rate: None,
        verdict: None,
        overlapped_tests: 0,
        interruption: None,
        links: None,
        path_shaper: None,
        return_shaper: None,
        paths: None,
        clock_offset: None,
    }
}

fn trial(paths: &[P]) -> TrialResult {
    let n = (paths.len() - 1) as u8;
    trial_with(paths, n, n)
}

/// The trial's paths with no shaper between the ends.
fn paths(t: &TrialResult) -> Vec<PathFigures> {
    summary(t, &|_| None).paths
}

/// The multipath verdict of `t` with no shaper between the ends.
fn judged(t: &TrialResult, generic: &Verdict) -> Verdict {
    judge(t, &summary(t, &|_| None), generic)
}

fn none() -> Verdict {
    Verdict::new("none", "no bottleneck stands out".into())
}

#[test]
fn three_links_one_shaped_to_20_mbit_name_the_slow_path_and_the_sum() {
    // The lab: 100/20/100 Mbit/s, one stream 174.38 Mbit/s.
    let t = trial(&[
        P {
            link_mbit: Some(100),
            mbit: 77.48,
        },
        P {
            link_mbit: Some(20),
            mbit: 17.90,
        },
        P {
            link_mbit: Some(100),
            mbit: 79.00,
        },
    ]);
    let ps = paths(&t);
    assert_eq!(ps.len(), 3);
    let sum: f64 = ps.iter().map(|p| p.goodput_bits_per_second.unwrap()).sum();
    // tbf counts the 1514-byte frame: 1448/1514 of each rate.
    assert!((sum - 220e6 * 1448.0 / 1514.0).abs() < 1.0, "{sum}");
    let v = judged(&t, &none());
    assert_eq!(
        (v.kind.as_str(), v.side.as_deref()),
        ("link_slow", Some("path")),
        "{}",
        v.summary
    );
    assert!(
        v.summary.contains("10.200.2.1 -> 10.200.2.2 (20.00 Mbit/s link)"),
        "{}",
        v.summary
    );
    assert!(v.summary.contains("81-83% of theirs"), "{}", v.summary);
    assert!(v.summary.contains("over 3 paths, 83% of their links'"), "{}", v.summary);
    assert_eq!(v.evidence[0].role, "cause");
}

/// Behind a lab router the ends' interfaces are unshaped: each path's rate
/// is the router's tbf toward its receiver, named where it sits, and the
/// sum is the paths' line rate.
#[test]
fn behind_a_router_each_path_is_judged_by_the_routers_shaper_toward_its_receiver() {
    let t = trial(&[
        P {
            link_mbit: None,
            mbit: 77.48,
        },
        P {
            link_mbit: None,
            mbit: 17.90,
        },
        P {
            link_mbit: None,
            mbit: 79.00,
        },
    ]);
    let router = |to: IpAddr| -> Option<PathShaper> {
        let link = match to.to_string().as_str() {
            "10.200.1.2" => 1,
            "10.200.2.2" => 2,
            "10.200.3.2" => 3,
            _ => return None,
        };
        Some(PathShaper {
            name: format!("lab router demo-r eth{}", link + 2),
            bits_per_second: if link == 2 { 20_000_000 } else { 100_000_000 },
            burst_bytes: Some(50_000),
        })
    };
    let s = summary(&t, &router);
    let slow = &s.paths[1];
    assert_eq!(slow.link_bits_per_second, Some(20_000_000));
    assert_eq!(slow.link_speed_source.as_deref(), Some("lab"));
    assert_eq!(slow.shaper_name.as_deref(), Some("lab router demo-r eth4"));
    let sum = s.theoretical_goodput_bits_per_second.unwrap();
    assert!((sum - 220e6 * 1448.0 / 1514.0).abs() < 1.0, "{sum}");
    let measured: f64 = 77.48e6 + 17.90e6 + 79.00e6;
    assert!((s.measured_bits_per_second - measured).abs() < 1.0);
    assert!((s.percent_of_theoretical_goodput.unwrap() - measured * 100.0 / sum).abs() < 1e-9);
    let v = judge(&t, &s, &none());
    assert_eq!(v.kind, "link_slow", "{}", v.summary);
    assert!(
        v.summary.contains("10.200.2.1 -> 10.200.2.2 (20.00 Mbit/s link)"),
        "{}",
        v.summary
    );
    // Without the router's figures the same trial has no known link.
    assert!(paths(&t).iter().all(|p| p.link_bits_per_second.is_none()));
}

#[test]
fn every_path_at_its_line_rate_is_the_links() {
    let t = trial(&[
        P {
            link_mbit: Some(100),
            mbit: 92.5,
        },
        P {
            link_mbit: Some(100),
            mbit: 92.9,
        },
    ]);
    let v = judged(&t, &none());
    assert_eq!(v.kind, "links_at_line_rate", "{}", v.summary);
    assert!(v.summary.contains("over 2 paths, 97% of their links'"), "{}", v.summary);
}

#[test]
fn an_announced_address_the_client_could_not_accept_is_a_missing_subflow_with_the_fix() {
    // The agent announced 2 addresses; the client accepts 1.
    let t = trial_with(
        &[
            P {
                link_mbit: Some(100),
                mbit: 94.0,
            },
            P {
                link_mbit: Some(100),
                mbit: 94.0,
            },
        ],
        2,
        1,
    );
    let v = judged(&t, &none());
    assert_eq!(
        (v.kind.as_str(), v.side.as_deref()),
        ("mptcp_subflow_missing", Some("client"))
    );
    assert!(
        v.summary.contains("announced 2 other addresses, the client joined 1")
            && v.summary.contains("ip mptcp limits set subflows 2 add_addr_accepted 2"),
        "{}",
        v.summary
    );
}

#[test]
fn a_join_that_did_not_come_up_within_the_limits_is_the_path() {
    let mut t = trial(&[P {
        link_mbit: Some(100),
        mbit: 94.0,
    }]);
    // The agent announced one address, the client accepted it, no join.
    let mut c: MptcpConnection = t.streams[0].sender.extras.get(mptcp::KEY).unwrap();
    c.add_addr_accepted = 1;
    c.extra_subflows_max = 1;
    c.add_addr_accepted_max = 1;
    t.streams[0].sender.extras.set(mptcp::KEY, &c);
    let mut a: MptcpConnection = t.streams[0].receiver.extras.get(mptcp::KEY).unwrap();
    a.add_addr_signal = 1;
    a.extra_subflows_max = 1;
    t.streams[0].receiver.extras.set(mptcp::KEY, &a);
    let v = judged(&t, &none());
    assert_eq!(
        (v.kind.as_str(), v.side.as_deref()),
        ("mptcp_subflow_missing", Some("path"))
    );
    assert!(v.summary.contains("1 join(s) did not come up"), "{}", v.summary);
}

#[test]
fn a_path_the_scheduler_left_idle_is_named() {
    let t = trial(&[
        P {
            link_mbit: Some(100),
            mbit: 93.0,
        },
        P {
            link_mbit: Some(100),
            mbit: 1.5,
        },
    ]);
    let v = judged(&t, &none());
    assert_eq!(v.kind, "mptcp_subflow_idle", "{}", v.summary);
    assert!(v.summary.contains("10.200.2.1 -> 10.200.2.2"), "{}", v.summary);
}

#[test]
fn a_cpu_verdict_stays_with_the_share_of_the_sum_beside_it() {
    let t = trial(&[
        P {
            link_mbit: Some(100),
            mbit: 40.0,
        },
        P {
            link_mbit: Some(100),
            mbit: 41.0,
        },
    ]);
    let cpu = Verdict::on_side("cpu_starved", "receiver", "receiver starved of CPU".into());
    let v = judged(&t, &cpu);
    assert_eq!((v.kind.as_str(), v.side.as_deref()), ("cpu_starved", Some("receiver")));
    assert!(
        v.summary
            .starts_with("receiver starved of CPU; 81.00 Mbit/s over 2 paths"),
        "{}",
        v.summary
    );
}

#[test]
fn paths_without_a_known_rate_keep_the_single_path_verdict() {
    let t = trial(&[
        P {
            link_mbit: None,
            mbit: 900.0,
        },
        P {
            link_mbit: None,
            mbit: 100.0,
        },
    ]);
    assert!(paths(&t).iter().all(|p| p.goodput_bits_per_second.is_none()));
    assert_eq!(judged(&t, &none()), none());
}

#[test]
fn a_stream_left_on_one_path_by_the_limits_is_missing_a_subflow_not_link_bound() {
    // The client allows no extra subflow: one path, at its line rate.
    let t = trial_with(
        &[P {
            link_mbit: Some(100),
            mbit: 94.1,
        }],
        1,
        0,
    );
    let mut link = Verdict::on_side("link_bound", "path", "link-bound: 98.2% of line rate".into());
    link.evidence = vec![Evidence {
        kind: "link_bound".into(),
        side: Some("path".into()),
        strength: "strong".into(),
        role: "cause".into(),
        explained_by: None,
        summary: link.summary.clone(),
    }];
    let v = missing(&t, &link).expect("the missing subflow");
    assert_eq!(
        (v.kind.as_str(), v.side.as_deref()),
        ("mptcp_subflow_missing", Some("client"))
    );
    assert!(v.summary.contains("accepts 0 announced address(es)"), "{}", v.summary);
    assert!(
        v.summary.ends_with("; also: link-bound: 98.2% of line rate"),
        "{}",
        v.summary
    );
    assert_eq!(v.evidence[1].kind, "link_bound");
    assert_eq!(v.evidence[1].role, "also");
}

/// A connection whose handshake lost MP_CAPABLE on the way runs as plain
/// TCP on one path: that is the answer, with what the one path did after
/// it; a stream that kept MPTCP gets no such finding.
#[test]
fn a_connection_that_fell_back_to_tcp_is_the_cause_whatever_its_one_path_did() {
    let mut t = trial_with(
        &[P {
            link_mbit: Some(100),
            mbit: 94.1,
        }],
        0,
        2,
    );
    let link = Verdict::on_side("link_bound", "path", "link-bound: 98.2% of line rate".into());
    assert_eq!(missing(&t, &link), None);
    let stream = &mut t.streams[0];
    for end in [&mut stream.sender, &mut stream.receiver] {
        let mut c: MptcpConnection = end.extras.get(mptcp::KEY).unwrap();
        c.fallback = true;
        end.extras.set(mptcp::KEY, &c);
    }
    let v = missing(&t, &link).unwrap();
    assert_eq!((v.kind.as_str(), v.side.as_deref()), ("mptcp_fallback", Some("path")));
    assert!(
        v.summary.starts_with("MPTCP fell back to plain TCP on the stream: ")
            && v.summary.contains("strips it")
            && v.summary.ends_with("; also: link-bound: 98.2% of line rate"),
        "{}",
        v.summary
    );
}
