//! `nicbench linerate` output: a text table, CSV, or JSON.

use std::io::{self, Write};

use crate::linerate::{LineRate, Size};
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
    writeln!(
        out,
        "link_bits_per_second,stack,vlan,given,given_bytes,frame_bytes,wire_bytes,payload_bytes,padding_bytes,\
         frames_per_second,goodput_bits_per_second,efficiency_percent,frame_interval_ns"
    )?;
    for r in rows {
        let (kind, bytes) = size_cell(&r.size);
        writeln!(
            out,
            "{},{},{},{kind},{bytes},{},{},{},{},{:.3},{:.1},{:.4},{:.3}",
            r.link_bits_per_second,
            r.stack,
            r.vlan,
            r.frame_bytes,
            r.wire_bytes,
            r.payload_bytes,
            r.padding_bytes,
            r.frames_per_second,
            r.goodput_bits_per_second,
            r.efficiency_percent,
            r.frame_interval_ns
        )?;
    }
    Ok(())
}

pub fn json(rows: &[LineRate], out: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, rows)?;
    writeln!(out)
}
