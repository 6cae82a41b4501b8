//! How a `loaded` result reads: one line per phase (throughput, round
//! trip percentiles, added delay, RPM, when it was stable), then per phase
//! the verdict and the queues behind it.
//!
//! The verdict's rule: of the queues probes wait in (qdiscs, NIC queues,
//! a lab router's), the largest ones as time at their direction's
//! measured rate (as many as hold 90% of the added delay: a bidirectional
//! phase fills one each way) explain the added delay when they hold at
//! least half of it; when none does, the delay builds beyond this host's queues. A
//! sender's socket holds only its own stream's data, which probes do not
//! wait behind; when it holds more time than the added delay, the verdict
//! says so and points at `--notsent-lowat`.

use std::io::{self, Write};

use super::result::{BothEnds, CpuShare, LoadedResult, PhaseFigures, QueueFigure};
use crate::units::Rate;

/// Below this the load added no delay worth attributing.
pub const NOTHING_ADDED_SECONDS: f64 = 0.001;

fn ms(seconds: Option<f64>) -> String {
    match seconds {
        Some(s) => format!("{:.2} ms", s * 1e3),
        None => "-".into(),
    }
}

fn signed_ms(seconds: Option<f64>) -> String {
    match seconds {
        Some(s) => format!("{:+.2} ms", s * 1e3),
        None => "-".into(),
    }
}

fn rpm(value: Option<f64>) -> String {
    value.map_or("-".into(), |r| format!("{r:.0}"))
}

fn percent(value: Option<f64>) -> String {
    value.map_or("-".into(), |l| format!("{l:.1}%"))
}

/// Bytes as people read a queue: B, KB, MB (powers of 1000).
pub fn bytes(b: f64) -> String {
    match b {
        b if b >= 1e6 => format!("{:.1} MB", b / 1e6),
        b if b >= 1e3 => format!("{:.0} KB", b / 1e3),
        b => format!("{b:.0} B"),
    }
}

/// The text lines of a result.
pub fn write(total: &LoadedResult, out: &mut dyn Write) -> io::Result<()> {
    let idle = &total.idle;
    writeln!(
        out,
        "LOADED {:<13} {:>15}  rtt p50 {:>9}  p99 {:>9}  {:>19}  RPM {:>6}  loss {}",
        "idle",
        "",
        ms(idle.rtt_p50_seconds),
        ms(idle.rtt_p99_seconds),
        "",
        rpm(idle.rpm),
        percent(idle.probe_loss_percent)
    )?;
    for p in &total.phases {
        writeln!(
            out,
            "LOADED {:<13} {:>15}  rtt p50 {:>9}  p99 {:>9}  added {:>10} {:>10}  RPM {:>6}  loss {}  stable {}{}",
            p.name.as_str(),
            Rate(p.receiver_bits_per_second).to_string(),
            ms(p.rtt_p50_seconds),
            ms(p.rtt_p99_seconds),
            signed_ms(p.added_p50_seconds),
            signed_ms(p.added_p99_seconds),
            rpm(p.rpm),
            percent(p.probe_loss_percent),
            match p.stable_after_seconds {
                Some(s) if s <= p.seconds / 2.0 => format!("after {s:.2} s"),
                Some(s) => format!("after {s:.2} s (second half used)"),
                None => "never (second half used)".into(),
            },
            cpu_text(&p.cpu),
        )?;
    }
    if let Some(offset) = idle.clock_offset_seconds {
        writeln!(
            out,
            "LOADED one-way delays stand on the clocks' offset estimated while idle: {}",
            signed_ms(Some(offset))
        )?;
    }
    for p in &total.phases {
        // The verdict's clauses one to a line, so no terminal cuts them.
        let mut clauses = p.verdict.split("; ");
        writeln!(out, "{}: {}", p.name.as_str(), clauses.next().unwrap_or_default())?;
        for clause in clauses {
            writeln!(out, "  {clause}")?;
        }
        for q in p.queues.iter().filter(|q| q.bytes >= 1.0) {
            match q.seconds {
                Some(s) => writeln!(out, "  queue: {} {} ({})", q.name, bytes(q.bytes), ms(Some(s)))?,
                None => writeln!(out, "  queue: {} {}", q.name, bytes(q.bytes))?,
            }
        }
        if let (Some(up), Some(down)) = (p.up_delay_p50_seconds, p.down_delay_p50_seconds) {
            writeln!(
                out,
                "  one-way p50: client->agent {}, agent->client {}; download {}, upload {}",
                ms(Some(up)),
                ms(Some(down)),
                Rate(p.download_bits_per_second),
                Rate(p.upload_bits_per_second)
            )?;
        }
    }
    Ok(())
}

/// A phase's CPU on both hosts, as the run's CPU lines say it:
/// "  CPU client 41.0% (user 3.1%, sys 30.2%, softirq 7.7%), agent ...".
fn cpu_text(cpu: &BothEnds) -> String {
    let one = |name: &str, c: &Option<CpuShare>| {
        c.map(|c| {
            format!(
                "{name} {:.1}% (user {:.1}%, sys {:.1}%, softirq {:.1}%)",
                c.utilization_percent, c.user_percent, c.system_percent, c.softirq_percent
            )
        })
    };
    let ends: Vec<String> = [one("client", &cpu.client), one("agent", &cpu.agent)]
        .into_iter()
        .flatten()
        .collect();
    match ends.is_empty() {
        true => String::new(),
        false => format!("  CPU {}", ends.join(", ")),
    }
}

/// Which queue explains a phase's added delay, in one line.
pub fn verdict(p: &PhaseFigures, congestion: Option<&str>) -> String {
    let Some(added) = p.added_p50_seconds else {
        return "no idle and loaded round trips to compare".into();
    };
    // The load's congestion control decides how deep the queues grow (bbr
    // keeps them short, cubic fills them): the verdict says which it was.
    let added_text = match congestion {
        Some(cc) => format!("{} with {cc}", ms(Some(added))),
        None => ms(Some(added)),
    };
    let socket = p
        .queues
        .iter()
        .filter(|q| q.kind == "socket_unsent" && q.seconds.is_some())
        .max_by(|a, b| a.seconds.partial_cmp(&b.seconds).unwrap_or(std::cmp::Ordering::Equal));
    let socket_note = socket
        .filter(|q| q.seconds.unwrap_or(0.0) > added.max(0.01))
        .map(|q| {
            format!(
                "; the load's own data waits longer in the senders' sockets: {} unsent, {} at the rate: set --notsent-lowat",
                bytes(q.bytes),
                ms(q.seconds)
            )
        })
        .unwrap_or_default();
    if added < NOTHING_ADDED_SECONDS {
        return format!("added {}: the load adds no delay to speak of{socket_note}", added_text);
    }
    let held = |q: &QueueFigure| {
        format!(
            "{} holds {}, {} at {}",
            q.name,
            bytes(q.bytes),
            ms(q.seconds),
            rate_of(q)
        )
    };
    let mut waits: Vec<&QueueFigure> = p
        .queues
        .iter()
        .filter(|q| q.delays_probes && q.seconds.unwrap_or(0.0) > 0.0)
        .collect();
    waits.sort_by(|a, b| b.seconds.partial_cmp(&a.seconds).unwrap_or(std::cmp::Ordering::Equal));
    // The largest queues, as many as it takes to hold 90% of the added
    // delay (a bidirectional phase fills a queue each way).
    let mut named = Vec::new();
    let mut held_seconds = 0.0;
    for q in &waits {
        if held_seconds >= 0.9 * added || q.seconds.unwrap_or(0.0) < 0.1 * added {
            break;
        }
        held_seconds += q.seconds.unwrap_or(0.0);
        named.push(held(q));
    }
    match waits.first() {
        Some(_) if held_seconds >= 0.5 * added => {
            format!("added {}: {}{socket_note}", added_text, named.join(", and "))
        }
        Some(q) => format!(
            "added {}: the path beyond this host: no local queue explains it (the largest, {}), \
             a router or switch buffer on the path does{socket_note}",
            added_text,
            held(q)
        ),
        None => format!(
            "added {}: the path beyond this host: no local queue explains it, a router or switch buffer on the path does{socket_note}",
            added_text
        ),
    }
}

/// The rate a queue's time was reckoned at.
fn rate_of(q: &QueueFigure) -> String {
    match q.seconds {
        Some(s) if s > 0.0 => Rate(q.bytes * 8.0 / s).to_string(),
        _ => "-".into(),
    }
}
