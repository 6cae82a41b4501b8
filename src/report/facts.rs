//! Host and NIC facts, trial counters, line rate and verdict as text: the
//! `nicbench host` blocks and the tail of every throughput summary. What a
//! device does not report reads "n/a". Every name here may come from a
//! peer (host name, kernel, interface, driver): it is shown through
//! [`terminal`], controls and bidi overrides escaped.

use std::fmt::Display;
use std::io::{self, Write};

use crate::model::{HostFacts, NicFacts, Party, RunResult, SideCounters, TrialResult};
use crate::outside_text::terminal;
use crate::units::{Bytes, Rate};
use crate::verdict::{attribution, socket_retransmissions, Attribution};

fn or_na<T: Display>(value: Option<T>) -> String {
    value.map(|v| v.to_string()).unwrap_or_else(|| "n/a".into())
}

/// A name from outside, or "n/a".
fn name_or_na(value: Option<&String>) -> String {
    or_na(value.map(|v| terminal(v)))
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
    writeln!(out, "host          {}", terminal(&facts.hostname))?;
    writeln!(out, "os            {}", terminal(&facts.os))?;
    writeln!(out, "kernel        {}", terminal(&facts.kernel))?;
    writeln!(
        out,
        "cpu           {}, {} cores / {} threads, {} MHz now, {} MHz max",
        terminal(&facts.cpu_model),
        or_na(facts.cpu_cores),
        facts.logical_cpus,
        or_na(facts.cpu_mhz.map(|m| format!("{m:.0}"))),
        or_na(facts.cpu_max_mhz.map(|m| format!("{m:.0}"))),
    )?;
    if let Some(limit) = &facts.cpu_limit {
        writeln!(
            out,
            "cpu limit     {}",
            cpu_limit_words(limit).trim_start_matches("CPU limit ")
        )?;
    }
    writeln!(out, "memory        {}", memory(facts.memory_bytes))?;
    writeln!(out, "numa nodes    {}", or_na(facts.numa_nodes))?;
    if let Some(clock) = &facts.clock {
        writeln!(out, "clock         {}", clock_words(clock))?;
    }
    writeln!(out, "nicbench      {}", terminal(&facts.nicbench_version))
}

/// The multi-line block of one interface.
pub fn write_nic(nic: &NicFacts, out: &mut dyn Write) -> io::Result<()> {
    let address = nic
        .address
        .as_ref()
        .map(|a| format!(", address {}", terminal(a)))
        .unwrap_or_default();
    writeln!(
        out,
        "interface     {} ({}{address})",
        terminal(&nic.name),
        terminal(&nic.kind)
    )?;
    writeln!(
        out,
        "  driver      {}{}, firmware {}, bus {}",
        name_or_na(nic.driver.as_ref()),
        nic.driver_version
            .as_ref()
            .map(|v| format!(" {}", terminal(v)))
            .unwrap_or_default(),
        name_or_na(nic.firmware_version.as_ref()),
        name_or_na(nic.bus_info.as_ref())
    )?;
    writeln!(
        out,
        "  link        {}, duplex {}, autoneg {}, state {}",
        link_speed(nic),
        name_or_na(nic.duplex.as_ref()),
        on_off(nic.autonegotiation),
        name_or_na(nic.operstate.as_ref())
    )?;
    writeln!(
        out,
        "  mtu         {}, tx queue length {} packets, qdisc {}{}",
        or_na(nic.mtu_bytes.map(|m| format!("{m} B"))),
        or_na(nic.tx_queue_length),
        name_or_na(nic.qdisc.as_ref()),
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
            terminal(&q.source)
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
            terminal(&n.name),
            terminal(&n.kind),
            name_or_na(n.driver.as_ref()),
            link_speed(n),
            or_na(n.mtu_bytes.map(|m| format!("{m} B"))),
            name_or_na(n.qdisc.as_ref()),
            n.qdisc_rate_bits_per_second
                .map(|r| format!(" at {}", Rate(r as f64)))
                .unwrap_or_default()
        ),
        None => "interface n/a".into(),
    };
    let limit = facts
        .cpu_limit
        .as_ref()
        .map(|l| format!(", {}", cpu_limit_words(l)))
        .unwrap_or_default();
    let mptcp = facts
        .mptcp
        .as_ref()
        .map(|pm| format!("; {}", path_manager_words(pm)))
        .unwrap_or_default();
    format!(
        "Facts {name:<6} {}: {}, kernel {}, {} ({} threads{limit}), {}; {nic}{mptcp}",
        terminal(&facts.hostname),
        terminal(&facts.os),
        terminal(&facts.kernel),
        terminal(&facts.cpu_model),
        facts.logical_cpus,
        memory(facts.memory_bytes)
    )
}

/// "MPTCP path manager: 2 extra subflows and 2 accepted addresses allowed;
/// endpoints 10.0.2.1 (eth1) signal, 10.0.3.1 (eth2) signal".
fn path_manager_words(pm: &crate::probe::mptcp::PathManager) -> String {
    let limits = pm.limits.map_or("limits n/a".to_string(), |l| {
        format!(
            "{} extra subflow(s) and {} accepted address(es) allowed",
            l.subflows, l.add_addr_accepted
        )
    });
    let endpoints = match &pm.endpoints {
        None => "endpoints n/a".to_string(),
        Some(e) if e.is_empty() => "no endpoints".to_string(),
        Some(e) => {
            let each: Vec<String> = e
                .iter()
                .map(|ep| {
                    let device = ep
                        .device
                        .as_ref()
                        .map_or(String::new(), |d| format!(" ({})", terminal(d)));
                    let flags: Vec<&str> = [
                        (ep.signal, "signal"),
                        (ep.subflow, "subflow"),
                        (ep.backup, "backup"),
                        (ep.fullmesh, "fullmesh"),
                    ]
                    .into_iter()
                    .filter_map(|(on, name)| on.then_some(name))
                    .collect();
                    format!("{}{device} {}", terminal(&ep.address), flags.join(" "))
                        .trim_end()
                        .to_string()
                })
                .collect();
            format!("endpoints {}", each.join(", "))
        }
    };
    let unread = pm
        .unread
        .as_ref()
        .map_or(String::new(), |why| format!(" ({})", terminal(why)));
    format!("MPTCP path manager: {limits}; {endpoints}{unread}")
}

/// "CPU limit 3% of one core, set by the lab (cgroup /nicbench/x/b)".
/// The kernel clock's discipline in a line: whether it is synchronized, by
/// which daemon, and the error the kernel was told.
fn clock_words(clock: &crate::model::ClockSync) -> String {
    let daemons = if clock.daemons.is_empty() {
        "no time daemon found".to_string()
    } else {
        clock.daemons.iter().map(|d| terminal(d)).collect::<Vec<_>>().join(", ")
    };
    if clock.synchronized {
        format!(
            "synchronized ({daemons}), estimated error {:.3} ms, maximum {:.3} ms",
            clock.estimated_error_us as f64 / 1e3,
            clock.maximum_error_us as f64 / 1e3
        )
    } else {
        format!("not synchronized ({daemons}): the kernel holds no bound on this clock's error")
    }
}

/// The agent's clock against the client's over the trial, and how each
/// host's kernel says its clock is kept: what bounds a one-way figure.
fn clocks_line(offset: &crate::model::ClockOffset, client: &HostFacts, agent: &HostFacts) -> String {
    let estimate = match (offset.agent_minus_client_us, offset.bound_us) {
        (Some(us), Some(bound)) => {
            let mut words = format!(
                "agent minus client {:+.3} ms +/- {:.3} ms at the test's middle ({} exchanges",
                us / 1e3,
                bound / 1e3,
                offset.exchanges
            );
            if let (Some(drift), Some(drift_bound)) = (offset.drift_ppm, offset.drift_bound_ppm) {
                words.push_str(&format!(", drift {drift:+.1} +/- {drift_bound:.1} ppm"));
            }
            words.push(')');
            words
        }
        _ => format!(
            "no offset: {}",
            terminal(offset.problem.as_deref().unwrap_or("the exchanges gave none"))
        ),
    };
    let kept = |name: &str, facts: &HostFacts| match &facts.clock {
        Some(clock) if clock.synchronized => format!(
            "{name} synchronized ({}, estimated error {:.3} ms)",
            if clock.daemons.is_empty() {
                "no time daemon found".to_string()
            } else {
                clock.daemons.iter().map(|d| terminal(d)).collect::<Vec<_>>().join(", ")
            },
            clock.estimated_error_us as f64 / 1e3
        ),
        Some(_) => format!("{name} not synchronized"),
        None => format!("{name}'s clock discipline not known"),
    };
    format!(
        "Clocks {estimate}; {}; {}",
        kept("client", client),
        kept("agent", agent)
    )
}

fn cpu_limit_words(l: &crate::model::CpuLimit) -> String {
    let by = if l.set_by == "lab" {
        "set by the lab"
    } else {
        "cgroup quota"
    };
    format!(
        "CPU limit {}% of one core, {by} ({} us per {} us, cgroup {})",
        format!("{:.3}", l.percent_of_one_core)
            .trim_end_matches('0')
            .trim_end_matches('.'),
        l.quota_us,
        l.period_us,
        terminal(&l.cgroup)
    )
}

fn counters_line(name: &str, c: &SideCounters) -> String {
    let nic = match &c.nic {
        Some(n) => format!(
            "{}: rx {} / tx {} packets, {} dropped, {} errors",
            terminal(c.interface.as_deref().unwrap_or("?")),
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
            "TCP namespace-wide {} of {} segments retransmitted ({}%)",
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

/// TCP retransmissions of the test's own sockets (TCP_INFO), per sending
/// host: the figure the verdict uses, apart from the namespace-wide one.
fn retransmissions_line(trial: &TrialResult) -> Option<String> {
    let parts: Vec<String> = [Party::Client, Party::Agent]
        .into_iter()
        .filter_map(|host| {
            let own = socket_retransmissions(trial, host)?;
            let role = if trial.streams.iter().any(|s| s.flow.receiver() == host) {
                host.as_str()
            } else {
                "sender"
            };
            let bytes = match (own.bytes, own.bytes_sent) {
                (Some(b), Some(sent)) => format!(", {} of {} sent", Bytes(b), Bytes(sent)),
                _ => String::new(),
            };
            let percent = own.percent().map(|p| format!(" ({p:.2}%)")).unwrap_or_default();
            let plural = |n: u64| if n == 1 { "" } else { "s" };
            Some(format!(
                "{role} {} segment{}{bytes}{percent} over {} stream{}",
                own.segments,
                plural(own.segments),
                own.streams,
                plural(own.streams as u64)
            ))
        })
        .collect();
    (!parts.is_empty()).then(|| format!("Retransmitted by the test's sockets: {}", parts.join("; ")))
}

/// Facts, counters, line rate and verdict at the end of a summary.
pub fn write_run_tail(run: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "{}", facts_line("client", &run.client.facts))?;
    writeln!(out, "{}", facts_line("agent", &run.agent.facts))?;
    let r = &run.result;
    let shared = run.shared_host();
    // On one kernel the two clocks are one: the offset is 0 by construction.
    if let (Some(offset), false) = (&r.clock_offset, shared) {
        writeln!(out, "{}", clocks_line(offset, &run.client.facts, &run.agent.facts))?;
    }
    let kind = crate::workload::results_of(&run.workload);
    for (name, party, counters) in [
        ("client", Party::Client, &r.counters.client),
        ("agent", Party::Agent, &r.counters.agent),
    ] {
        if let Some(c) = counters {
            let mut line = counters_line(name, c);
            if let Attribution::OtherTraffic { .. } = attribution(r, kind, party, shared) {
                line.push_str("; other traffic on this interface during the test: host counters not attributed");
            }
            writeln!(out, "{line}")?;
        }
    }
    if let Some(line) = retransmissions_line(r) {
        writeln!(out, "{line}")?;
    }
    line_rate_lines(run, out)?;
    if let Some(v) = &r.verdict {
        writeln!(out, "Verdict: {}", v.summary)?;
    }
    Ok(())
}

/// The `Line rate:` lines, or why there is no share, and under them the
/// shaper on the way back to the sender when one was read (a lab's).
fn line_rate_lines(run: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    forward_line_rate_lines(run, out)?;
    match &run.result.return_shaper {
        Some(back) => super::linerate::return_text(back, out),
        None => Ok(()),
    }
}

/// The `Line rate:` lines, or why there is no share: the workload's figure
/// is no bulk throughput, or the only speed known is a virtual link's.
fn forward_line_rate_lines(run: &RunResult, out: &mut dyn Write) -> io::Result<()> {
    if let Some(links) = &run.result.links {
        return super::multilink::write_links(links, out);
    }
    if run.result.line_rate.is_some() {
        super::linerate::share_text(run.result.line_rate.as_ref(), out)?;
        return match &run.result.path_shaper {
            Some(shaper) => super::linerate::shaper_text(shaper, out),
            None => Ok(()),
        };
    }
    if let Some(written) = run
        .result
        .paths
        .as_ref()
        .and_then(|paths| super::linerate::paths_text(paths, out))
    {
        return written;
    }
    if let Some(why) = crate::workload::results_of(&run.workload).several_paths(&run.result) {
        return writeln!(out, "Line rate: n/a ({why})");
    }
    if !crate::workload::results_of(&run.workload).line_rate_applies() {
        return writeln!(
            out,
            "Line rate: n/a ({} measures no bulk throughput to compare with the link)",
            run.workload
        );
    }
    let nominal = [&run.client.facts.interface, &run.agent.facts.interface]
        .into_iter()
        .flatten()
        .find(|nic| crate::probe::nic::speed_is_nominal(nic));
    // A lab that shapes only the way back has no line rate this way.
    let remedy = match run.result.return_shaper {
        Some(_) => "the lab shapes only the return path, below",
        None => "shape it (lab --rate) or give --link-speed",
    };
    match nominal {
        Some(nic) => writeln!(
            out,
            "Line rate: n/a ({} is a virtual {} link: its {} is nominal, no line rate; {remedy})",
            terminal(&nic.name),
            terminal(nic.driver.as_deref().unwrap_or("?")),
            nic.link_speed_bits_per_second
                .map_or("speed".into(), |s| format!("{} speed", Rate(s as f64)))
        ),
        None => super::linerate::share_text(None, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ClockSync;

    #[test]
    fn the_clock_line_says_whether_one_way_figures_have_a_disciplined_clock_behind_them() {
        let chrony = ClockSync {
            synchronized: true,
            estimated_error_us: 12,
            maximum_error_us: 480,
            daemons: vec!["chronyd".into()],
        };
        assert_eq!(
            clock_words(&chrony),
            "synchronized (chronyd), estimated error 0.012 ms, maximum 0.480 ms"
        );
        let free = ClockSync {
            synchronized: false,
            estimated_error_us: 16_000_000,
            maximum_error_us: 16_000_000,
            daemons: vec![],
        };
        let facts = HostFacts {
            clock: Some(free),
            ..HostFacts::default()
        };
        let mut out = Vec::new();
        write_host(&facts, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("clock         not synchronized (no time daemon found)"),
            "{text}"
        );
        // No line where adjtimex could not be read.
        let mut out = Vec::new();
        write_host(&HostFacts::default(), &mut out).unwrap();
        assert!(!String::from_utf8(out).unwrap().contains("clock"));
    }

    #[test]
    fn the_clocks_line_states_the_offset_with_its_bound_or_why_there_is_none() {
        let chrony = HostFacts {
            clock: Some(ClockSync {
                synchronized: true,
                estimated_error_us: 12,
                maximum_error_us: 480,
                daemons: vec!["chronyd".into()],
            }),
            ..HostFacts::default()
        };
        let free = HostFacts {
            clock: Some(ClockSync::default()),
            ..HostFacts::default()
        };
        let measured = crate::model::ClockOffset {
            agent_minus_client_us: Some(-1234.4),
            bound_us: Some(40.25),
            drift_ppm: Some(3.07),
            drift_bound_ppm: Some(0.52),
            exchanges: 16,
            ..Default::default()
        };
        assert_eq!(
            clocks_line(&measured, &free, &chrony),
            "Clocks agent minus client -1.234 ms +/- 0.040 ms at the test's middle (16 exchanges, drift +3.1 +/- \
             0.5 ppm); client not synchronized; agent synchronized (chronyd, estimated error 0.012 ms)"
        );
        let stepped = crate::model::ClockOffset {
            exchanges: 16,
            problem: Some("the 16 clock exchanges fit no single offset".into()),
            ..Default::default()
        };
        assert_eq!(
            clocks_line(&stepped, &chrony, &HostFacts::default()),
            "Clocks no offset: the 16 clock exchanges fit no single offset; client synchronized (chronyd, \
             estimated error 0.012 ms); agent's clock discipline not known"
        );
    }
}
