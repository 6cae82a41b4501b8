//! The sweep's table and CSV: one row per size with latency in
//! microseconds, bandwidth in Mbit/s and percent of the line rate, then
//! the summary (small-message latency, peak, n-1/2, 90% of peak).

use std::io::{self, Write};

use crate::model::SweepResult;
use crate::units::{Rate, Size};

fn line_rate_percent(sweep: &SweepResult, bits_per_second: f64) -> Option<f64> {
    sweep.link_speed_bits_per_second.map(|l| 100.0 * bits_per_second / l)
}

/// The text table and summary of a sweep.
pub fn table(sweep: &SweepResult, out: &mut dyn Write) -> io::Result<()> {
    let with_rate = sweep.link_speed_bits_per_second.is_some();
    writeln!(
        out,
        "Sweep ({}, {}): {} sizes; best of the timed batches, mean of all",
        sweep.mode.replace('_', "-"),
        sweep.transport.to_uppercase(),
        sweep.points.len()
    )?;
    let latency = if sweep.mode == "stream" {
        "us/message"
    } else {
        "latency us"
    };
    write!(
        out,
        "{:>10} {:>12} {:>16} {:>12} {:>16} {:>10}",
        "size B", latency, "bandwidth Mbit/s", "mean us", "mean Mbit/s", "exchanges"
    )?;
    writeln!(
        out,
        "{}",
        if with_rate {
            format!(" {:>11}", "% line rate")
        } else {
            String::new()
        }
    )?;
    for p in &sweep.points {
        write!(
            out,
            "{:>10} {:>12.2} {:>16.2} {:>12.2} {:>16.2} {:>10}",
            p.size_bytes,
            p.best_latency_us,
            p.best_bits_per_second / 1e6,
            p.mean_latency_us,
            p.mean_bits_per_second / 1e6,
            p.exchanges
        )?;
        if let Some(percent) = line_rate_percent(sweep, p.best_bits_per_second) {
            write!(out, " {percent:>10.1}%")?;
        }
        if p.lost > 0 {
            write!(out, "  ({} lost)", p.lost)?;
        }
        writeln!(out)?;
    }
    let s = &sweep.summary;
    if !sweep.points.is_empty() {
        writeln!(
            out,
            "Small-message latency: {:.2} us at {} B",
            s.small_message_latency_us, s.small_message_size_bytes
        )?;
        write!(
            out,
            "Peak bandwidth: {} at {} B{}",
            Rate(s.peak_bits_per_second),
            s.peak_size_bytes,
            if s.peak_size_bytes >= 1024 {
                format!(" ({})", Size(s.peak_size_bytes))
            } else {
                String::new()
            }
        )?;
        match s.peak_line_rate_percent {
            Some(percent) => writeln!(
                out,
                " ({percent:.1}% of the {} line rate)",
                Rate(sweep.link_speed_bits_per_second.unwrap_or(0.0))
            )?,
            None => writeln!(out)?,
        }
        writeln!(
            out,
            "Half of the peak (n-1/2) at {} B; 90% of the peak at {} B",
            s.half_peak_size_bytes, s.ninety_percent_peak_size_bytes
        )?;
    }
    if !sweep.skipped_sizes_bytes.is_empty() {
        writeln!(
            out,
            "Skipped {} size(s) ({} B .. {} B): {}",
            sweep.skipped_sizes_bytes.len(),
            sweep.skipped_sizes_bytes.iter().min().expect("not empty"),
            sweep.skipped_sizes_bytes.iter().max().expect("not empty"),
            sweep.note.as_deref().unwrap_or("not run")
        )?;
    }
    Ok(())
}

/// The points as CSV, one header line with units.
pub fn csv(sweep: &SweepResult, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "size_bytes,latency_us,bandwidth_mbit_per_second,mean_latency_us,mean_bandwidth_mbit_per_second,\
         exchanges,lost,line_rate_percent"
    )?;
    for p in &sweep.points {
        writeln!(
            out,
            "{},{:.3},{:.3},{:.3},{:.3},{},{},{}",
            p.size_bytes,
            p.best_latency_us,
            p.best_bits_per_second / 1e6,
            p.mean_latency_us,
            p.mean_bits_per_second / 1e6,
            p.exchanges,
            p.lost,
            line_rate_percent(sweep, p.best_bits_per_second)
                .map(|v| format!("{v:.2}"))
                .unwrap_or_default()
        )?;
    }
    Ok(())
}
