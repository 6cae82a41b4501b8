//! Host and NIC facts, trial counters, line rate and verdict as text: the
//! `nicbench host` blocks and the tail of every throughput summary. What a
//! device does not report reads "n/a".

use std::fmt::Display;
use std::io::{self, Write};

use crate::model::{HostFacts, NicFacts, RunResult, SideCounters};
use crate::units::Rate;

fn or_na<T: Display>(value: Option<T>) -> String {
    value.map(|v| v.to_string()).unwrap_or_else(|| "n/a".into())
}

fn on_off(value: Option<bool>) -> &'static str {
    match value {
        Some(true) => "on",
        Some(false) => "off",
        None => "n/a",
    }
}

fn link_speed(nic: &NicFacts) -> String {
    or_na(nic.link_speed_bits_per_second.map(|s| Rate(s as f64)))
}

fn memory(bytes: Option<u64>) -> String {
    or_na(bytes.map(|b| format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)))
}

/// The multi-line host block of `nicbench host`.
pub fn write_host(facts: &HostFacts, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "host          {}", facts.hostname)?;
    writeln!(out, "os            {}", facts.os)?;
    writeln!(out, "kernel        {}", facts.kernel)?;
    writeln!(
        out,
        "cpu           {}, {} cores / {} threads, {} MHz now, {} MHz max",
        facts.cpu_model,
        or_na(facts.cpu_cores),
        facts.logical_cpus,
        or_na(facts.cpu_mhz.map(|m| format!("{m:.0}"))),
        or_na(facts.cpu_max_mhz.map(|m| format!("{m:.0}"))),
    )?;
    writeln!(out, "memory        {}", memory(facts.memory_bytes))?;
    writeln!(out, "numa nodes    {}", or_na(facts.numa_nodes))?;
    writeln!(out, "nicbench      {}", facts.nicbench_version)
}

/// The multi-line block of one interface.
pub fn write_nic(nic: &NicFacts, out: &mut dyn Write) -> io::Result<()> {
    let address = nic
        .address
        .as_ref()
        .map(|a| format!(", address {a}"))
        .unwrap_or_default();
    writeln!(out, "interface     {} ({}{address})", nic.name, nic.kind)?;
    writeln!(
        out,
        "  driver      {}{}, firmware {}, bus {}",
        or_na(nic.driver.as_ref()),
        nic.driver_version.as_ref().map(|v| format!(" {v}")).unwrap_or_default(),
        or_na(nic.firmware_version.as_ref()),
        or_na(nic.bus_info.as_ref())
    )?;
    writeln!(
        out,
        "  link        {}, duplex {}, autoneg {}, state {}",
        link_speed(nic),
        or_na(nic.duplex.as_ref()),
        on_off(nic.autonegotiation),
        or_na(nic.operstate.as_ref())
    )?;
    writeln!(
        out,
        "  mtu         {}, tx queue length {} packets, qdisc {}{}",
        or_na(nic.mtu_bytes.map(|m| format!("{m} B"))),
        or_na(nic.tx_queue_length),
        or_na(nic.qdisc.as_ref()),
        nic.qdisc_rate_bits_per_second
            .map(|r| format!(" at {}", Rate(r as f64)))
            .unwrap_or_default()
    )?;
    match &nic.offloads {
        Some(o) => writeln!(
            out,
            "  offloads    tso {}, gso {}, gro {}, lro {}, rx-checksum {}, tx-checksum {}, scatter-gather {}",
            on_off(o.tso),
            on_off(o.gso),
            on_off(o.gro),
            on_off(o.lro),
            on_off(o.rx_checksum),
            on_off(o.tx_checksum),
            on_off(o.scatter_gather)
        )?,
        None => writeln!(out, "  offloads    n/a")?,
    }
    write_nic_queues(nic, out)
}

/// Rings, coalescing, queues, PCIe link and NUMA node of an interface.
fn write_nic_queues(nic: &NicFacts, out: &mut dyn Write) -> io::Result<()> {
    match &nic.rings {
        Some(r) => writeln!(
            out,
            "  rings       rx {} of {} descriptors, tx {} of {}",
            r.rx_descriptors, r.rx_max_descriptors, r.tx_descriptors, r.tx_max_descriptors
        )?,
        None => writeln!(out, "  rings       n/a")?,
    }
    match &nic.coalescing {
        Some(c) => writeln!(
            out,
            "  coalescing  rx {} us / {} frames, tx {} us / {} frames, adaptive rx {} tx {}",
            c.rx_usecs,
            c.rx_max_frames,
            c.tx_usecs,
            c.tx_max_frames,
            on_off(Some(c.adaptive_rx)),
            on_off(Some(c.adaptive_tx))
        )?,
        None => writeln!(out, "  coalescing  n/a")?,
    }
    match &nic.queues {
        Some(q) => writeln!(
            out,
            "  queues      rx {}, tx {}, combined {} of {} ({})",
            q.rx,
            q.tx,
            or_na(q.combined),
            or_na(q.max_combined),
            q.source
        )?,
        None => writeln!(out, "  queues      n/a")?,
    }
    match &nic.pcie {
        Some(p) => writeln!(
            out,
            "  pcie        {} GT/s x{} (max {} GT/s x{})",
            or_na(p.current_gigatransfers_per_second),
            or_na(p.current_width_lanes),
            or_na(p.max_gigatransfers_per_second),
            or_na(p.max_width_lanes)
        )?,
        None => writeln!(out, "  pcie        n/a")?,
    }
    writeln!(out, "  numa node   {}", or_na(nic.numa_node))
}

/// One line of facts per end, for a result summary.
fn facts_line(name: &str, facts: &HostFacts) -> String {
    if facts.hostname.is_empty() && facts.kernel.is_empty() {
        return format!("Facts {name:<6} not known (the peer does not report them)");
    }
    let nic = match &facts.interface {
        Some(n) => format!(
            "interface {} ({}, driver {}, link {}, MTU {}, qdisc {}{})",
            n.name,
            n.kind,
            or_na(n.driver.as_ref()),
            link_speed(n),
            or_na(n.mtu_bytes.map(|m| format!("{m} B"))),
            or_na(n.qdisc.as_ref()),
            n.qdisc_rate_bits_per_second
                .map(|r| format!(" at {}", Rate(r as f64)))
                .unwrap_or_default()
        ),
        None => "interface n/a".into(),
    };
    format!(
        "Facts {name:<6} {}: {}, kernel {}, {} ({} threads), {}; {nic}",
        facts.hostname,
        facts.os,
        facts.kernel,
        facts.cpu_model,
        facts.logical_cpus,
        memory(facts.memory_bytes)
    )
}

fn counters_line(name: &str, c: &SideCounters) -> String {
    let nic = match &c.nic {
        Some(n) => format!(
            "{}: rx {} / tx {} packets, {} dropped, {} errors",
            c.interface.as_deref().unwrap_or("?"),
            n.rx_packets,
            n.tx_packets,
            n.rx_dropped + n.tx_dropped + n.rx_missed_errors,
            n.rx_errors + n.tx_errors
        ),
        None => "NIC n/a".into(),
    };
    let irq = match &c.interrupts {
        Some(i) => format!(
            "{:.0} interrupts/s, {} packets/interrupt",
            i.interrupts_per_second,
            or_na(i.packets_per_interrupt.map(|p| format!("{p:.1}")))
        ),
        None => "interrupts n/a".into(),
    };
    let tcp = match &c.tcp {
        Some(t) => format!(
            "TCP {} of {} segments retransmitted ({}%)",
            t.retransmitted_segments,
            t.out_segments,
            or_na(t.retransmitted_percent.map(|p| format!("{p:.2}")))
        ),
        None => "TCP n/a".into(),
    };
    let udp = c
        .udp
        .as_ref()
        .filter(|u| u.receive_buffer_errors + u.in_errors > 0)
        .map(|u| format!("; UDP {} receive-buffer errors", u.receive_buffer_errors))
        .unwrap_or_default();
    let threads = c
        .scheduling
        .as_ref()
        .map(|s| {
            format!(
                "; trial threads ran {:.2} s, waited for a CPU {:.2} s",
                s.run_seconds, s.wait_seconds
            )
        })
        .unwrap_or_default();
    let cgroup = c
        .cgroup_cpu
        .as_ref()
        .and_then(|g| {
            g.throttled_percent_of_periods
                .map(|p| format!("; cgroup throttled {p:.0}% of periods"))
        })
        .unwrap_or_default();
    format!("Counters {name:<6} {nic}; {irq}; {tcp}{udp}{threads}{cgroup}")
}

/// Facts, counters, line rate and verdict at the end of a summary.
pub fn write_run_tail(run: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{}", facts_line("client", &run.client.facts))?;
    writeln!(out, "{}", facts_line("agent", &run.agent.facts))?;
    let r = &run.result;
    for (name, counters) in [("client", &r.counters.client), ("agent", &r.counters.agent)] {
        if let Some(c) = counters {
            writeln!(out, "{}", counters_line(name, c))?;
        }
    }
    match &r.line_rate {
        Some(l) => writeln!(
            out,
            "Line rate: {} = {:.1}% of {} theoretical goodput ({} link from {}, {} B frames, {} B payload each)",
            Rate(l.measured_bits_per_second),
            l.percent_of_theoretical_goodput,
            Rate(l.theoretical_goodput_bits_per_second),
            Rate(l.link_bits_per_second as f64),
            match l.link_speed_source.as_str() {
                "option" => "--link-speed",
                "qdisc" => "the tbf qdisc",
                _ => "the NIC",
            },
            l.frame_bytes,
            l.payload_bytes
        )?,
        None => writeln!(out, "Line rate: n/a (link speed unknown; give --link-speed)")?,
    }
    if let Some(v) = &r.verdict {
        writeln!(out, "Verdict: {}", v.summary)?;
    }
    Ok(())
}
