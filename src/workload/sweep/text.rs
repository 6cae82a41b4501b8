//! The sweep's table and CSV: one row per size with latency in
//! microseconds, bandwidth in Mbit/s and percent of the line rate, then
//! the summary (small-message latency, peak, n-1/2, 90% of peak).

use std::io::{self, Write};

use super::result::SweepResult;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::sweep::result::{SweepPoint, SweepSummary};

    fn sweep() -> SweepResult {
        let point = |size: u64, latency_us: f64| SweepPoint {
            size_bytes: size,
            exchanges: 70,
            batches: 7,
            seconds: 0.1,
            best_latency_us: latency_us,
            mean_latency_us: latency_us * 1.5,
            best_bits_per_second: size as f64 * 8.0 / (latency_us * 1e-6),
            mean_bits_per_second: size as f64 * 8.0 / (latency_us * 1.5e-6),
            lost: 0,
        };
        let points = vec![point(1, 4.0), point(65536, 20.0)];
        SweepResult {
            mode: "ping_pong".into(),
            transport: "tcp".into(),
            link_speed_bits_per_second: Some(100e9),
            skipped_sizes_bytes: vec![131072],
            note: Some("the time limit (-t) ended the sweep early".into()),
            summary: crate::workload::sweep::points::summarize(&points, Some(100e9)),
            points,
        }
    }

    #[test]
    fn table_snapshot() {
        let mut out = Vec::new();
        table(&sweep(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let expected = "\
Sweep (ping-pong, TCP): 2 sizes; best of the timed batches, mean of all
    size B   latency us bandwidth Mbit/s      mean us      mean Mbit/s  exchanges % line rate
         1         4.00             2.00         6.00             1.33         70        0.0%
     65536        20.00         26214.40        30.00         17476.27         70       26.2%
Small-message latency: 4.00 us at 1 B
Peak bandwidth: 26.21 Gbit/s at 65536 B (64 KiB) (26.2% of the 100.00 Gbit/s line rate)
Half of the peak (n-1/2) at 65536 B; 90% of the peak at 65536 B
Skipped 1 size(s) (131072 B .. 131072 B): the time limit (-t) ended the sweep early
";
        assert_eq!(text, expected);
    }

    #[test]
    fn csv_has_units_in_the_header_and_one_row_per_size() {
        let mut out = Vec::new();
        csv(&sweep(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("size_bytes,latency_us,bandwidth_mbit_per_second,"));
        assert_eq!(lines[2], "65536,20.000,26214.400,30.000,17476.267,70,0,26.21");
    }

    #[test]
    fn empty_summary_is_not_printed() {
        let mut s = sweep();
        s.points.clear();
        s.summary = SweepSummary::default();
        let mut out = Vec::new();
        table(&s, &mut out).unwrap();
        assert!(!String::from_utf8(out).unwrap().contains("Peak"));
    }
}
