//! What a lab's switch saw of a group test, in words: the ports its
//! bridge forwards the group to (by the lab hosts behind them) and the
//! IGMP/MLD messages it counted ([`write_block`]); and, for a receiver
//! that never joined, whether its join reached the switch at all
//! ([`read_switch`]).

use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};

use crate::model::receivers::ReceiverRun;
use crate::model::switch::{PortCounters, SwitchRecord};

/// A port as the text names it: its lab host, with the port in brackets.
fn port_name(port: &str, host: Option<&str>) -> String {
    match host {
        Some(host) => format!("{host} ({port})"),
        None => port.to_string(),
    }
}

/// `IGMP` for an IPv4 group, `MLD` for an IPv6 one.
fn protocol(group: IpAddr) -> &'static str {
    match group {
        IpAddr::V4(_) => "IGMP",
        IpAddr::V6(_) => "MLD",
    }
}

/// The "switch:" block: where the bridge forwards the group, the group
/// protocol's messages over the test, and each receiver that got the
/// group with no mdb entry for its port (the bridge flooded it there).
pub fn write_block(out: &mut dyn Write, switch: &SwitchRecord, receivers: &[ReceiverRun]) -> io::Result<()> {
    let mut members: Vec<String> = switch
        .mdb
        .iter()
        .map(|m| port_name(&m.port, m.host.as_deref()))
        .collect();
    members.dedup();
    let to = match members.is_empty() {
        true => "no port (its mdb has no entry for it)".to_string(),
        false => members.join(", "),
    };
    writeln!(
        out,
        "switch: bridge {} in {} forwards {} to {to}",
        switch.bridge, switch.namespace, switch.group
    )?;
    let ports = &switch.counters.ports;
    let reports: Vec<String> = ports
        .iter()
        .map(|p| {
            format!(
                "{} {}",
                p.host.as_deref().unwrap_or(&p.port),
                p.counters.of_family(switch.group).1.received
            )
        })
        .collect();
    let queries: u64 = ports.iter().map(|p| p.counters.of_family(switch.group).0.sent).sum();
    let leaves: u64 = ports
        .iter()
        .map(|p| p.counters.of_family(switch.group).2.received)
        .sum();
    writeln!(
        out,
        "switch: {} over the test: reports in from {}; queries out {queries}, leaves in {leaves}",
        protocol(switch.group),
        reports.join(", ")
    )?;
    for receiver in receivers
        .iter()
        .filter(|r| r.standing == "complete" || r.standing == "losing")
    {
        let Some(port) = port_of(switch, receiver) else {
            continue;
        };
        if switch.member(&port.port).is_none() {
            writeln!(
                out,
                "switch: {} got the group though the mdb has no entry for its port {}: the bridge flooded it there \
                 ({} {} reports came in from it; a bridge sends a group no member has reported yet to every port, \
                 a new bridge floods groups until its querier is established, and an IGMPv2/MLDv1 host keeps its \
                 report when it hears another member's)",
                receiver.name,
                port.port,
                port.counters.of_family(switch.group).1.received,
                protocol(switch.group)
            )?;
        }
    }
    Ok(())
}

/// The switch port toward the receiver's host (by its address).
fn port_of<'a>(switch: &'a SwitchRecord, receiver: &ReceiverRun) -> Option<&'a PortCounters> {
    let address = receiver.agent.address.parse::<SocketAddr>().ok()?;
    switch.port_toward(address.ip())
}

/// Adds the switch's word to each receiver that never joined (whether
/// the bridge's mdb held its port: its join reached the switch, or not),
/// and to each that got datagrams though its port is not in the mdb
/// (what it got, the bridge flooded to it).
pub fn read_switch(receivers: &mut [ReceiverRun], switch: &SwitchRecord) {
    for receiver in receivers.iter_mut() {
        let Some(port) = port_of(switch, receiver) else {
            continue;
        };
        let protocol = protocol(switch.group);
        let never_joined = receiver.standing == "never_joined";
        let got_some = receiver.standing == "complete" || receiver.standing == "losing";
        let words = match switch.member(&port.port) {
            None if got_some => format!(
                "; the switch's mdb has no entry for the group on its port {}: its join never reached the switch \
                 ({} {protocol} reports came in on that port during the test), and what it got the bridge flooded \
                 to it",
                port.port,
                port.counters.of_family(switch.group).1.received
            ),
            _ if !never_joined => continue,
            Some(_) => format!(
                "; the switch's mdb lists its port {} for the group: its join reached the switch, which forwards \
                 the group to it, so the datagrams were lost past the switch (on its link or in its host)",
                port.port
            ),
            None => format!(
                "; the switch's mdb has no entry for the group on its port {}: its join never reached the switch \
                 ({} {protocol} reports came in on that port during the test)",
                port.port,
                port.counters.of_family(switch.group).1.received
            ),
        };
        receiver.verdict.push_str(&words);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::switch::{Both, McastCounters, MdbMember, SwitchCounters};
    use crate::model::Endpoint;

    fn port(name: &str, host: &str, address: &str, reports: u64) -> PortCounters {
        PortCounters {
            port: name.into(),
            host: Some(host.into()),
            address: Some(address.parse().unwrap()),
            counters: McastCounters {
                igmp_reports: Both {
                    received: reports,
                    sent: 0,
                },
                igmp_queries: Both { received: 0, sent: 2 },
                igmp_leaves: Both {
                    received: reports.min(1),
                    sent: 0,
                },
                ..McastCounters::default()
            },
        }
    }

    /// a sends; b joined (its port eth1 in the mdb), c's join never came.
    fn record() -> SwitchRecord {
        SwitchRecord {
            lab: "demo".into(),
            namespace: "nicbench-demo-sw".into(),
            bridge: "br0".into(),
            group: "239.1.2.3".parse().unwrap(),
            mdb: vec![MdbMember {
                port: "eth1".into(),
                host: Some("b".into()),
                state: "temp".into(),
                source: None,
            }],
            counters: SwitchCounters {
                bridge: McastCounters::default(),
                ports: vec![
                    port("eth0", "a", "10.200.0.1", 0),
                    port("eth1", "b", "10.200.0.2", 3),
                    port("eth2", "c", "10.200.0.3", 0),
                ],
            },
        }
    }

    #[test]
    fn the_block_names_the_member_ports_hosts_and_the_messages_counted() {
        let mut out = Vec::new();
        write_block(&mut out, &record(), &[receiver("b", "10.200.0.2:5310", "complete")]).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "switch: bridge br0 in nicbench-demo-sw forwards 239.1.2.3 to b (eth1)\n\
             switch: IGMP over the test: reports in from a 0, b 3, c 0; queries out 6, leaves in 1\n"
        );
        let mut empty = record();
        empty.mdb.clear();
        let mut out = Vec::new();
        write_block(&mut out, &empty, &[]).unwrap();
        assert!(String::from_utf8(out)
            .unwrap()
            .contains("to no port (its mdb has no entry for it)"));
    }

    #[test]
    fn a_receiver_that_got_the_group_without_an_mdb_entry_is_named() {
        let mut out = Vec::new();
        let receivers = [
            receiver("c", "10.200.0.3:5310", "complete"),
            receiver("c-silent", "10.200.0.3:5311", "never_joined"),
        ];
        write_block(&mut out, &record(), &receivers).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.ends_with(
                "switch: c got the group though the mdb has no entry for its port eth2: the bridge flooded it there \
                 (0 IGMP reports came in from it; a bridge sends a group no member has reported yet to every port, \
                 a new bridge floods groups until its querier is established, and an IGMPv2/MLDv1 host keeps its \
                 report when it hears another member's)\n"
            ),
            "{text}"
        );
        assert_eq!(text.matches("got the group").count(), 1, "{text}");
    }

    fn receiver(name: &str, address: &str, standing: &str) -> ReceiverRun {
        ReceiverRun {
            name: name.into(),
            agent: Endpoint {
                address: address.into(),
                ..Endpoint::default()
            },
            standing: standing.into(),
            slowest: false,
            join_latency_seconds: None,
            verdict: "never joined: nothing arrived".into(),
            result: None,
        }
    }

    #[test]
    fn a_receiver_that_never_joined_is_told_whether_its_join_reached_the_switch() {
        let mut receivers = vec![
            receiver("b", "10.200.0.2:5310", "never_joined"),
            receiver("c", "10.200.0.3:5310", "never_joined"),
            receiver("x", "10.9.9.9:5310", "never_joined"),
            receiver("c-again", "10.200.0.3:5311", "complete"),
        ];
        read_switch(&mut receivers, &record());
        assert!(
            receivers[0].verdict.ends_with("lists its port eth1 for the group: its join reached the switch, which forwards the group to it, so the datagrams were lost past the switch (on its link or in its host)"),
            "{}",
            receivers[0].verdict
        );
        assert!(
            receivers[1].verdict.ends_with(
                "no entry for the group on its port eth2: its join never reached the switch (0 IGMP reports came in \
                 on that port during the test)"
            ),
            "{}",
            receivers[1].verdict
        );
        assert_eq!(receivers[2].verdict, "never joined: nothing arrived", "no lab host");
        // Datagrams came to a port the mdb does not hold: flooded there.
        assert!(
            receivers[3].verdict.ends_with(
                "no entry for the group on its port eth2: its join never reached the switch (0 IGMP reports came in \
                 on that port during the test), and what it got the bridge flooded to it"
            ),
            "{}",
            receivers[3].verdict
        );
        let mut member = vec![receiver("b-again", "10.200.0.2:5311", "losing")];
        read_switch(&mut member, &record());
        assert_eq!(
            member[0].verdict, "never joined: nothing arrived",
            "its port is a member"
        );
    }
}
