//! The `Links:` lines of a multi-link result (`--links`): the aggregate and
//! scaling efficiency, then one line per link with both ends' interface,
//! MTU and link rate, its sender and receiver figures, its figure alone
//! (`--scaling`), and the NIC counters of both ends; then any bond.

use std::io::{self, Write};

use crate::model::{LinkEnd, MultilinkSummary, NicCounters};
use crate::units::Rate;

/// Writes the links section of a trial.
pub fn write_links(summary: &MultilinkSummary, out: &mut dyn Write) -> io::Result<()> {
    let n = summary.links.len();
    writeln!(
        out,
        "Links: {n}, aggregate {} received ({} sent); scaling efficiency {:.1}% = aggregate / ({n} x {} best single link, {})",
        Rate(summary.aggregate_receiver_bits_per_second),
        Rate(summary.aggregate_sender_bits_per_second),
        summary.scaling_efficiency_percent,
        Rate(summary.best_single_link_bits_per_second),
        match summary.best_single_link_source.as_str() {
            "alone" => "measured alone in this run",
            _ => "in this trial",
        }
    )?;
    for l in &summary.links {
        let rate = match (l.link_bits_per_second, l.percent_of_link) {
            (Some(r), Some(p)) => format!("link {} ({p:.1}% of it)", Rate(r as f64)),
            _ => "link rate unknown".into(),
        };
        let alone = l
            .alone_receiver_bits_per_second
            .map_or(String::new(), |a| format!(", alone {}", Rate(a)));
        writeln!(
            out,
            "  link {} {} -> {}, MTU {}: sender {}, receiver {}{alone}; {rate}; counters {}; {}",
            l.link,
            end_name(&l.client),
            end_name(&l.agent),
            mtu(&l.client, &l.agent),
            Rate(l.sender_bits_per_second),
            Rate(l.receiver_bits_per_second),
            counters("client", &l.client),
            counters("agent", &l.agent),
        )?;
    }
    for b in &summary.bonds {
        let slaves: Vec<String> = b
            .slaves
            .iter()
            .map(|s| match s.speed_bits_per_second {
                Some(speed) => format!("{} {}", s.name, Rate(speed as f64)),
                None => s.name.clone(),
            })
            .collect();
        writeln!(
            out,
            "  bond {} on the {}: {}, hash policy {}, slaves {}",
            b.name,
            b.host,
            b.mode,
            b.transmit_hash_policy.as_deref().unwrap_or("n/a"),
            slaves.join(", ")
        )?;
    }
    Ok(())
}

fn end_name(end: &LinkEnd) -> String {
    match &end.interface {
        Some(i) => format!("{i} {}", end.address),
        None => end.address.clone(),
    }
}

fn mtu(client: &LinkEnd, agent: &LinkEnd) -> String {
    match (client.mtu_bytes, agent.mtu_bytes) {
        (Some(a), Some(b)) if a == b => format!("{a} B"),
        (Some(a), Some(b)) => format!("{a} B / {b} B"),
        (Some(a), None) | (None, Some(a)) => format!("{a} B"),
        (None, None) => "n/a".into(),
    }
}

fn counters(host: &str, end: &LinkEnd) -> String {
    let name = end.interface.as_deref().unwrap_or("?");
    match &end.nic {
        Some(NicCounters {
            rx_packets,
            tx_packets,
            rx_dropped,
            tx_dropped,
            rx_errors,
            tx_errors,
            ..
        }) => format!(
            "{host} {name} rx {rx_packets} / tx {tx_packets} packets, {} dropped, {} errors",
            rx_dropped + tx_dropped,
            rx_errors + tx_errors
        ),
        None => format!("{host} {name} n/a"),
    }
}
