//! Line-rate output: `nicbench linerate`'s table, CSV or JSON, and the
//! `Line rate:` lines of a result summary.

use std::io::{self, Write};

use crate::csv_out::Csv;
use crate::linerate::{LineRate, Size};
use crate::model::LineRateShare;
use crate::outside_text::terminal;
use crate::units::Rate;

fn size_cell(size: &Size) -> (&'static str, u64) {
    match *size {
        Size::Frame(b) => ("frame", b),
        Size::Mtu(b) => ("mtu", b),
        Size::Payload(b) => ("payload", b),
    }
}

/// One row per case, with units in the header.
pub fn text(rows: &[LineRate], out: &mut dyn Write) -> io::Result<()> {
    if let Some(first) = rows.first() {
        writeln!(
            out,
            "stack {}{}; wire = frame + 8 B preamble/SFD + 12 B interframe gap",
            first.stack,
            if first.vlan { " + 802.1Q tag" } else { "" }
        )?;
    }
    writeln!(
        out,
        "{:>13} {:>14} {:>10} {:>10} {:>10} {:>16} {:>14} {:>11} {:>14}",
        "link", "given", "frame", "on wire", "payload", "frames/s", "goodput", "efficiency", "frame interval"
    )?;
    for r in rows {
        let (kind, bytes) = size_cell(&r.size);
        writeln!(
            out,
            "{:>13} {:>14} {:>10} {:>10} {:>10} {:>16.2} {:>14} {:>11} {:>14}",
            Rate(r.link_bits_per_second).to_string(),
            format!("{kind} {bytes} B"),
            format!("{} B", r.frame_bytes),
            format!("{} B", r.wire_bytes),
            format!("{} B", r.payload_bytes),
            r.frames_per_second,
            Rate(r.goodput_bits_per_second).to_string(),
            format!("{:.2}%", r.efficiency_percent),
            format!("{:.2} ns", r.frame_interval_ns),
        )?;
    }
    Ok(())
}

/// CSV with units in the column names.
pub fn csv(rows: &[LineRate], out: &mut dyn Write) -> io::Result<()> {
    let mut csv = Csv::new(out);
    csv.row(
        "link_bits_per_second,stack,vlan,given,given_bytes,frame_bytes,wire_bytes,payload_bytes,padding_bytes,\
         frames_per_second,goodput_bits_per_second,efficiency_percent,frame_interval_ns"
            .split(','),
    )?;
    for r in rows {
        let (kind, bytes) = size_cell(&r.size);
        csv.row([
            r.link_bits_per_second.to_string(),
            r.stack.to_string(),
            r.vlan.to_string(),
            kind.to_string(),
            bytes.to_string(),
            r.frame_bytes.to_string(),
            r.wire_bytes.to_string(),
            r.payload_bytes.to_string(),
            r.padding_bytes.to_string(),
            format!("{:.3}", r.frames_per_second),
            format!("{:.1}", r.goodput_bits_per_second),
            format!("{:.4}", r.efficiency_percent),
            format!("{:.3}", r.frame_interval_ns),
        ])?;
    }
    csv.finish()
}

pub fn json(rows: &[LineRate], out: &mut dyn Write) -> io::Result<()> {
    crate::outside_text::write_json_pretty(&mut *out, rows)?;
    writeln!(out)
}

/// Where the link speed came from, in words.
fn speed_source(share: &LineRateShare) -> String {
    source_words(&share.link_speed_source, share.shaper_name.as_deref())
}

/// Where a link's speed came from, in words.
fn source_words(source: &str, shaper_name: Option<&str>) -> String {
    match source {
        "option" => "--link-speed".into(),
        "qdisc" => "the tbf qdisc".into(),
        "lab" => match shaper_name {
            Some(name) => terminal(name).to_string(),
            None => "the lab's router".into(),
        },
        _ => "the NIC".into(),
    }
}

/// The `Line rate:` lines of a stream over several paths (MPTCP): what all
/// carried against the sum of the paths' goodputs, then each path; None
/// when a path's link is unknown (no sum to compare with).
///
/// ```text
/// Line rate: 279.24 Mbit/s = 97.3% of 286.92 Mbit/s theoretical goodput, the sum of 3 paths':
///   10.200.1.2 -> 10.200.4.2: 93.21 Mbit/s = 97.4% of 95.64 Mbit/s (100.00 Mbit/s link from lab router mp3r-r eth3)
/// ```
pub fn paths_text(summary: &crate::model::PathsSummary, out: &mut dyn Write) -> Option<io::Result<()>> {
    let (Some(sum), Some(percent)) = (
        summary.theoretical_goodput_bits_per_second,
        summary.percent_of_theoretical_goodput,
    ) else {
        return None;
    };
    let write = |out: &mut dyn Write| -> io::Result<()> {
        writeln!(
            out,
            "Line rate: {} = {percent:.1}% of {} theoretical goodput, the sum of {} paths':",
            Rate(summary.measured_bits_per_second),
            Rate(sum),
            summary.paths.len()
        )?;
        for p in &summary.paths {
            let (Some(link), Some(goodput), Some(of)) = (
                p.link_bits_per_second,
                p.goodput_bits_per_second,
                p.percent_of_goodput(),
            ) else {
                continue;
            };
            writeln!(
                out,
                "  {} -> {}: {} = {of:.1}% of {} ({} link from {})",
                p.from,
                p.to,
                Rate(p.bits_per_second),
                Rate(goodput),
                Rate(link as f64),
                source_words(
                    p.link_speed_source.as_deref().unwrap_or("nic"),
                    p.shaper_name.as_deref()
                )
            )?;
        }
        Ok(())
    };
    Some(write(out))
}

/// The overhead the model counted, in words.
fn overhead_words(share: &LineRateShare) -> String {
    let (Some(overhead), Some(counted)) = (share.overhead_bytes_per_frame, share.counted_bytes_per_frame) else {
        return String::new();
    };
    let how = match share.overhead_model.as_deref() {
        Some("ethernet_wire") => "on the wire (Ethernet header + FCS + preamble/SFD + interframe gap)",
        Some("qdisc") => {
            "as the qdisc counts (the frame it dequeues, its configured overhead; no preamble, gap or FCS)"
        }
        _ => "as --link-overhead says",
    };
    format!(
        "{overhead} B per packet {how}: {counted} B per {} B of payload",
        share.payload_bytes
    )
}

/// How the shaper's initial burst was handled, in words.
fn burst_words(share: &LineRateShare) -> Option<String> {
    let bucket = share
        .burst_bytes
        .map(|b| format!("the tbf's {b} B bucket"))
        .unwrap_or_else(|| "a shaper's initial burst".into());
    Some(match share.burst_handling.as_deref()? {
        "included" => format!(
            "{bucket} passes at once at the start: {} over the measured time included",
            Rate(share.burst_allowance_bits_per_second.unwrap_or(0.0))
        ),
        "warmup_excluded" => format!("{bucket} emptied during the -O warm-up, which is excluded"),
        _ => format!("{bucket}, if any, is not known to the model (exclude it with -O/--omit)"),
    })
}

/// The `Line rate:` lines of a result summary: the share, the model it was
/// measured against, and why it reads above 100% when it does.
/// What the path's shaper did over the trial, under the line rate:
/// "  lab router t-r eth2 (100.00 Mbit/s) over the trial: sent 32.00 MB in
/// 21000 packets, dropped 57 at its full queue, held packets back 9000 times".
pub fn shaper_text(shaper: &crate::model::PathShaperCounters, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "  {} ({}) over the trial: sent {} in {} packets, dropped {} at its full queue, held packets back {} times",
        terminal(&shaper.name),
        Rate(shaper.bits_per_second as f64),
        crate::units::Bytes(shaper.sent_bytes),
        shaper.sent_packets,
        shaper.dropped_packets,
        shaper.overlimits
    )
}

/// The shaper on the way back to the sender, under the line rate: "  the
/// return path toward the sender: lab router t-r eth1 (1.00 Mbit/s, queue
/// 16 ms) over the trial: sent 1.20 MB in 15000 packets (its ACKs), dropped
/// 57 at its full queue, held packets back 9000 times".
pub fn return_text(shaper: &crate::model::PathShaperCounters, out: &mut dyn Write) -> io::Result<()> {
    let queue = shaper
        .queue_seconds
        .map(|q| format!(", queue {:.0} ms", q * 1000.0))
        .unwrap_or_default();
    writeln!(
        out,
        "  the return path toward the sender: {} ({}{queue}) over the trial: sent {} in {} packets (its ACKs), \
         dropped {} at its full queue, held packets back {} times",
        terminal(&shaper.name),
        Rate(shaper.bits_per_second as f64),
        crate::units::Bytes(shaper.sent_bytes),
        shaper.sent_packets,
        shaper.dropped_packets,
        shaper.overlimits
    )
}

pub fn share_text(share: Option<&LineRateShare>, out: &mut dyn Write) -> io::Result<()> {
    let Some(l) = share else {
        return writeln!(out, "Line rate: n/a (link speed unknown; give --link-speed)");
    };
    writeln!(
        out,
        "Line rate: {} = {:.1}% of {} theoretical goodput ({} link from {}, {} B frames, {} B payload each)",
        Rate(l.measured_bits_per_second),
        l.percent_of_theoretical_goodput,
        Rate(l.theoretical_goodput_bits_per_second),
        Rate(l.link_bits_per_second as f64),
        speed_source(l),
        l.frame_bytes,
        l.payload_bytes
    )?;
    let model = [Some(overhead_words(l)).filter(|w| !w.is_empty()), burst_words(l)]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>();
    if !model.is_empty() {
        writeln!(out, "  model: {}", model.join("; "))?;
    }
    if let Some(why) = &l.above_model {
        writeln!(
            out,
            "  above 100% of the model ({:.1}%): {why}",
            l.percent_of_theoretical_goodput
        )?;
    }
    Ok(())
}
