//! The human summary: one line per stream when there are several, a SUM
//! line per direction, sender and receiver side by side, TCP_INFO, and CPU
//! cost with service demand for both ends. Every number has its unit.

use std::io::{self, Write};

use super::Reporter;
use crate::model::{CpuReport, FlowTotal, RrResult, RunResult, StreamEnd, StreamResult, Total, UdpResult};
use crate::units::{Bytes, Rate, Size};
use crate::workload::runner::IntervalTick;
use crate::workload::Direction;

/// The default human-readable summary.
pub struct Text;

fn total_cell(t: &Total) -> String {
    format!(
        "{:>10} {:>14}",
        Bytes(t.bytes).to_string(),
        Rate(t.bits_per_second).to_string()
    )
}

fn end_cell(e: &StreamEnd) -> String {
    format!(
        "{:>10} {:>14}",
        Bytes(e.bytes).to_string(),
        Rate(e.bits_per_second).to_string()
    )
}

fn tcp_cells(s: &StreamResult) -> String {
    match &s.sender.tcp_info {
        Some(i) => format!(
            "{:>6} {:>9} {:>10} {:>7}",
            i.retransmits,
            format!("{} us", i.rtt_us),
            Size(u64::from(i.congestion_window_segments) * u64::from(i.send_mss_bytes)).to_string(),
            format!("{} B", i.send_mss_bytes),
        ),
        None => String::new(),
    }
}

/// Service demand with its unit: per transaction where transactions were
/// counted (per KB says little about 1-byte requests), else per KB moved.
pub fn service_demand(c: &CpuReport) -> String {
    match (c.service_demand_us_per_transaction, c.service_demand_us_per_kb) {
        (Some(t), _) => format!("{t:.2} us/transaction"),
        (None, Some(d)) => format!("{d:.3} us/KB"),
        (None, None) => "n/a".into(),
    }
}

fn cpu_line(name: &str, c: &CpuReport) -> String {
    let demand = service_demand(c);
    format!(
        "CPU {name:<6} {:5.1}% of {} cores (user {:.1}%, sys {:.1}%, softirq {:.1}%, irq {:.1}%), \
         busiest core {} at {:.1}%; own threads {:.2} s; service demand {demand}",
        c.utilization_percent,
        c.logical_cpus,
        c.user_percent,
        c.system_percent,
        c.softirq_percent,
        c.irq_percent,
        c.busiest_core.core,
        c.busiest_core.utilization_percent,
        c.process.user_seconds + c.process.system_seconds,
    )
}

impl Reporter for Text {
    fn render(&self, run: &RunResult, out: &mut dyn Write) -> io::Result<()> {
        let spec = &run.spec;
        let r = &run.result;
        writeln!(
            out,
            "nicbench {}: client {} ({}) -> agent {} ({})",
            run.workload, run.client.facts.hostname, run.client.address, run.agent.facts.hostname, run.agent.address
        )?;
        let direction = match spec.direction {
            Direction::Forward => "client->agent",
            Direction::Reverse => "agent->client (reverse)",
            Direction::Bidir => "each way (bidir)",
        };
        // A sweep ends when its sizes are done; its duration is a limit.
        let sweep = r.streams.iter().any(|s| s.sender.sweep.is_some());
        let length = match spec.bytes {
            Some(b) => format!("{} per direction", Bytes(b)),
            None if sweep => format!("time limit {:.1} s", spec.duration_seconds),
            None => format!("{:.1} s", spec.duration_seconds),
        };
        writeln!(
            out,
            "  {} stream{} {direction}, {length}{}, {}{} messages",
            spec.streams,
            if spec.streams == 1 { "" } else { "s" },
            if spec.omit_seconds > 0.0 {
                format!(" after {:.1} s warm-up", spec.omit_seconds)
            } else {
                String::new()
            },
            if sweep { "up to " } else { "" },
            Size(spec.message_bytes),
        )?;
        if let Some(line) = super::interruption::line(run) {
            writeln!(out, "{line}")?;
        }
        if let Some(s) = r.streams.first() {
            let asked = [&spec.client, &spec.agent]
                .iter()
                .any(|side| side.send_buffer_bytes.is_some() || side.receive_buffer_bytes.is_some());
            writeln!(
                out,
                "  socket buffers at the end: sender {} send / receiver {} receive ({})",
                Size(s.sender.socket.send_buffer_bytes),
                Size(s.receiver.socket.receive_buffer_bytes),
                if asked {
                    "as granted by the kernel for the sizes asked".to_string()
                } else if s.sender.tcp_info.is_some() {
                    "kernel autotuning".to_string()
                } else if s.receiver.udp.is_some() {
                    format!(
                        "kernel default send buffer; the receiver asked for {}, which Linux doubles for bookkeeping and caps at net.core.rmem_max",
                        Size(crate::workload::udp_stream::DEFAULT_RECEIVE_BUFFER as u64)
                    )
                } else {
                    // Only TCP autotunes its buffers; datagram sockets keep the defaults.
                    "kernel defaults".to_string()
                }
            )?;
        }
        // TCP_INFO columns only where a stream has TCP_INFO (not for UDP).
        let tcp_header = if r.streams.iter().any(|s| s.sender.tcp_info.is_some()) {
            format!("  {:>6} {:>9} {:>10} {:>7}", "retr", "rtt", "cwnd", "mss")
        } else {
            String::new()
        };
        writeln!(
            out,
            "[ ID] {:<14} {:>25}  {:>25}{tcp_header}",
            "flow", "sender", "receiver"
        )?;
        if r.streams.len() > 1 {
            for s in &r.streams {
                let line = format!(
                    "[{:>3}] {:<14} {}  {}  {}",
                    s.stream_id,
                    s.flow.arrow(),
                    end_cell(&s.sender),
                    end_cell(&s.receiver),
                    tcp_cells(s)
                );
                // No TCP columns (UDP, rr over UDP): no trailing blanks either.
                writeln!(out, "{}", line.trim_end())?;
            }
        }
        let flows: [(&str, &Option<FlowTotal>); 2] = [
            ("client->agent", &r.sum.client_to_agent),
            ("agent->client", &r.sum.agent_to_client),
        ];
        for (name, flow) in flows {
            let Some(flow) = flow else { continue };
            let tcp = if r.streams.len() == 1 {
                tcp_cells(&r.streams[0])
            } else {
                String::new()
            };
            let line = format!(
                "[SUM] {name:<14} {}  {}  {tcp}",
                total_cell(&flow.sender),
                total_cell(&flow.receiver)
            );
            writeln!(out, "{}", line.trim_end())?;
        }
        for (name, flow) in flows {
            if let Some(udp) = flow.as_ref().and_then(|f| f.udp.as_ref()) {
                udp_lines(name, udp, flow.as_ref().map_or(0.0, |f| f.receiver.seconds), out)?;
            }
        }
        if let Some(rr) = &r.sum.rr {
            rr_lines(rr, out)?;
            // With several flows, each one's rate and tail: an unfair split shows here.
            if r.streams.len() > 1 {
                for s in &r.streams {
                    if let Some(e) = &s.sender.rr {
                        flow_rr_line(s.stream_id, e, out)?;
                    }
                }
            }
        }
        writeln!(out, "{}", cpu_line("client", &r.cpu.client))?;
        writeln!(out, "{}", cpu_line("agent", &r.cpu.agent))?;
        // One kernel (equal boot id: loopback, or namespaces of a lab).
        if crate::verdict::shared_host(run) {
            writeln!(
                out,
                "  (client and agent share one host: both CPU lines cover the same cores)"
            )?;
        }
        if r.overlapped_tests > 0 {
            writeln!(
                out,
                "  (the agent ran {} other test(s) during part of this one: it was shared, see --max-concurrent)",
                r.overlapped_tests
            )?;
        }
        for sweep in r.streams.iter().filter_map(|s| s.sender.sweep.as_ref()) {
            super::sweep::table(sweep, out)?;
        }
        super::facts::write_run_tail(run, out)?;
        if let Some(r) = &run.repetition {
            repetition_lines(r, out)?;
        }
        Ok(())
    }
}

/// The repetition summary: policy, reported figure, spread, interval.
fn repetition_lines(r: &crate::model::RepetitionSummary, out: &mut dyn Write) -> io::Result<()> {
    use crate::plan::format_figure;
    use crate::stats::Policy;
    let f = |v: f64| format_figure(v, &r.unit);
    let n = r.values.len();
    let how = match r.policy {
        Policy::Repeat { pick, .. } => format!("{pick:?}").to_lowercase(),
        Policy::Confidence { .. } => "mean".into(),
    };
    writeln!(
        out,
        "Repetitions: {n} trial{}, reported {how} by {}: {} (full detail above: trial {})",
        if n == 1 { "" } else { "s" },
        r.metric,
        f(r.reported_value),
        r.picked_trial
    )?;
    writeln!(
        out,
        "  min {}, median {}, max {}, mean {}, stddev {}",
        f(r.min),
        f(r.median),
        f(r.max),
        f(r.mean),
        f(r.stddev)
    )?;
    if let Some(i) = &r.interval {
        writeln!(
            out,
            "  {}% confidence interval of the mean: {} +- {} (width {:.1}% of the mean)",
            i.level_percent,
            f(i.mean),
            f((i.high - i.low) / 2.0),
            i.width_percent
        )?;
    }
    if let Policy::Confidence {
        level_percent,
        width_percent,
        max_trials,
        ..
    } = r.policy
    {
        match (r.width_met, &r.interval) {
            (Some(true), _) => writeln!(
                out,
                "  confidence met: the {level_percent}% interval is within the asked {width_percent}% after {n} trials"
            )?,
            (_, interval) => writeln!(
                out,
                "  CONFIDENCE NOT MET: after {n} of at most {max_trials} trials the {level_percent}% interval is \
                 still {} wide (asked: at most {width_percent}%)",
                interval
                    .map(|i| format!("{:.1}% of the mean", i.width_percent))
                    .unwrap_or_else(|| "undefined".into())
            )?,
        }
    }
    if r.interrupted {
        writeln!(out, "  (interrupted: fewer trials than the policy asked for)")?;
    }
    Ok(())
}

/// The UDP summary of one direction: what the sender pushed against what
/// the receiver got, the loss, and where it was lost.
fn udp_lines(name: &str, u: &UdpResult, receiver_seconds: f64, out: &mut dyn Write) -> io::Result<()> {
    let per_second = |n: u64| {
        if receiver_seconds > 0.0 {
            format!("{:.0} datagrams/s", n as f64 / receiver_seconds)
        } else {
            "n/a".into()
        }
    };
    writeln!(
        out,
        "UDP {name}: sender pushed {}, receiver got {} ({}); LOST {:.2}% ({} of {} datagrams)",
        Rate(u.sender_bits_per_second),
        Rate(u.receiver_bits_per_second),
        per_second(u.received_datagrams),
        u.loss_percent,
        u.lost_datagrams,
        u.sent_datagrams
    )?;
    let elsewhere = u.lost_datagrams.saturating_sub(u.receiver_socket_drops);
    let drops = if u.receiver_gro {
        format!(
            "{} coalesced GRO buffers dropped at the receiving socket (buffer full; each holds several \
             datagrams, so the split of the loss is unknown)",
            u.receiver_socket_drops
        )
    } else {
        format!(
            "{} dropped at the receiving socket (buffer full, in the receiving host), {elsewhere} lost \
             before it (wire, NIC, router, host backlog)",
            u.receiver_socket_drops
        )
    };
    writeln!(
        out,
        "    {drops}; out of order {}, duplicates {}, foreign {}, jitter {:.1} us",
        u.out_of_order_datagrams, u.duplicate_datagrams, u.malformed_datagrams, u.jitter_us
    )
}

/// Transactions and the latency distribution of a request/response test.
fn rr_lines(rr: &RrResult, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "RR  {} transactions, {:.1} transactions/s; lost {}",
        rr.transactions, rr.transactions_per_second, rr.lost_transactions
    )?;
    if let Some(l) = &rr.latency {
        writeln!(
            out,
            "    round trip: mean {:.1} us, min {:.1} us, p50 {:.1} us, p90 {:.1} us, p99 {:.1} us, \
             p99.9 {:.1} us, max {:.1} us ({} samples)",
            l.mean_us, l.min_us, l.p50_us, l.p90_us, l.p99_us, l.p99_9_us, l.max_us, l.samples
        )?;
    }
    Ok(())
}

/// One flow of a request/response test, from its requester's end.
fn flow_rr_line(id: u32, e: &crate::model::RrEnd, out: &mut dyn Write) -> io::Result<()> {
    let latency = e.latency.as_ref().map_or(String::new(), |l| {
        format!(
            ", p50 {:.1} us, p99 {:.1} us, max {:.1} us",
            l.p50_us, l.p99_us, l.max_us
        )
    });
    writeln!(
        out,
        "    flow {id}: {} transactions, {:.1} transactions/s{latency}; lost {}",
        e.transactions, e.transactions_per_second, e.lost_transactions
    )
}

/// One live interval line per stream, and a SUM line with several streams.
pub fn interval_lines(host: &str, tick: &IntervalTick, out: &mut dyn Write) -> io::Result<()> {
    let seconds = tick.end_seconds - tick.start_seconds;
    let mark = if tick.omitted { " (omitted)" } else { "" };
    let mut sum = 0;
    for &(id, role, bytes) in &tick.streams {
        sum += bytes;
        writeln!(
            out,
            "[{id:>3}] {:6.2}-{:<6.2} s {:>10} {:>14}  {host} {}{mark}",
            tick.start_seconds,
            tick.end_seconds,
            Bytes(bytes).to_string(),
            Rate(crate::units::bits_per_second(bytes, seconds)).to_string(),
            match role {
                crate::model::Role::Sender => "sent",
                crate::model::Role::Receiver => "received",
            }
        )?;
    }
    if tick.streams.len() > 1 {
        writeln!(
            out,
            "[SUM] {:6.2}-{:<6.2} s {:>10} {:>14}  {host}{mark}",
            tick.start_seconds,
            tick.end_seconds,
            Bytes(sum).to_string(),
            Rate(crate::units::bits_per_second(sum, seconds)).to_string()
        )?;
    }
    Ok(())
}
