//! The sweep's table and CSV: one row per size with latency in
//! microseconds, bandwidth in Mbit/s and percent of the line rate, then
//! the summary (small-message latency, peak, n-1/2, 90% of peak).

use std::io::{self, Write};

use super::result::{SweepPoint, SweepResult};
use crate::csv_out::Csv;
use crate::units::{Rate, Size};

fn line_rate_percent(sweep: &SweepResult, bits_per_second: f64) -> Option<f64> {
    sweep.link_speed_bits_per_second.map(|l| 100.0 * bits_per_second / l)
}

/// The points faster than the line rate: marked `^` in the table.
fn above_line_rate(sweep: &SweepResult) -> Vec<&SweepPoint> {
    sweep
        .points
        .iter()
        .filter(|p| line_rate_percent(sweep, p.best_bits_per_second).is_some_and(|pct| pct > 100.0))
        .collect()
}

/// Where the line rate came from, in words: `, lab router x-r eth1`.
fn line_rate_source(sweep: &SweepResult) -> String {
    match (sweep.link_speed_source.as_deref(), &sweep.shaper_name) {
        (_, Some(name)) => format!(", {name}"),
        (Some("option"), _) => ", --link-speed".into(),
        (Some("nic"), _) => ", the slower NIC".into(),
        (Some("qdisc"), _) => ", a shaper on an end".into(),
        _ => String::new(),
    }
}

/// The text table and summary of a sweep.
pub fn table(sweep: &SweepResult, out: &mut dyn Write) -> io::Result<()> {
    write_heading(sweep, out)?;
    for p in &sweep.points {
        write_row(sweep, p, out)?;
    }
    write_summary(sweep, out)?;
    write_notes(sweep, out)
}

/// What the table shows, and its column heads.
fn write_heading(sweep: &SweepResult, out: &mut dyn Write) -> io::Result<()> {
    let passes = sweep.passes.unwrap_or(1);
    writeln!(
        out,
        "Sweep ({}, {}): {} sizes{}; fastest batch, median and slowest batch, spread = (max - min) / median, \
         mean of all",
        sweep.mode.replace('_', "-"),
        sweep.transport.to_uppercase(),
        sweep.points.len(),
        if passes > 1 {
            format!(", best of {passes} passes")
        } else {
            String::new()
        }
    )?;
    let latency = if sweep.mode == "stream" {
        "us/message"
    } else {
        "latency us"
    };
    write!(
        out,
        "{:>9} {:>10} {:>16} {:>9} {:>9} {:>7} {:>9} {:>9}",
        "size B", latency, "bandwidth Mbit/s", "median us", "max us", "spread", "mean us", "exchanges"
    )?;
    writeln!(
        out,
        "{}",
        if sweep.link_speed_bits_per_second.is_some() {
            format!(" {:>11}", "% line rate")
        } else {
            String::new()
        }
    )
}

/// One size's row.
fn write_row(sweep: &SweepResult, p: &SweepPoint, out: &mut dyn Write) -> io::Result<()> {
    let or_blank = |v: Option<f64>, width: usize, digits: usize| match v {
        Some(v) => format!("{v:>width$.digits$}"),
        None => format!("{:>width$}", "-"),
    };
    write!(
        out,
        "{:>9} {:>10.2} {:>16.2} {} {} {} {:>9.2} {:>9}",
        p.size_bytes,
        p.best_latency_us,
        p.best_bits_per_second / 1e6,
        or_blank(p.median_latency_us, 9, 2),
        or_blank(p.max_latency_us, 9, 2),
        match p.spread_percent {
            Some(v) => format!("{:>7}", format!("{v:.0}%{}", if p.wide { "*" } else { " " })),
            None => format!("{:>7}", "- "),
        },
        p.mean_latency_us,
        p.exchanges
    )?;
    if let Some(percent) = line_rate_percent(sweep, p.best_bits_per_second) {
        write!(out, " {percent:>10.1}%{}", if percent > 100.0 { "^" } else { "" })?;
    }
    if p.lost > 0 {
        write!(out, "  ({} lost)", p.lost)?;
    }
    writeln!(out)
}

/// The figures of the whole sweep: small-message latency, peak, n-1/2,
/// 90% of the peak, and the steps of the bandwidth curve.
fn write_summary(sweep: &SweepResult, out: &mut dyn Write) -> io::Result<()> {
    let s = &sweep.summary;
    if !sweep.points.is_empty() {
        // Half a round trip, as NetPIPE's; rr's percentiles are whole ones.
        let sizes = match s.small_message_largest_size_bytes {
            Some(largest) if largest > s.small_message_size_bytes => {
                format!(
                    ", the median of the fastest batches at {}..{largest} B",
                    s.small_message_size_bytes
                )
            }
            _ => format!(" at {} B", s.small_message_size_bytes),
        };
        writeln!(
            out,
            "Small-message latency: {:.2} us{sizes} (half a round trip, as NetPIPE's; rr's p50 is a whole one)",
            s.small_message_latency_us
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
        let above = above_line_rate(sweep);
        let fastest = above
            .iter()
            .max_by(|a, b| a.best_bits_per_second.total_cmp(&b.best_bits_per_second));
        match (s.peak_line_rate_percent, fastest) {
            (Some(percent), _) if percent > 100.0 => writeln!(
                out,
                " ({percent:.1}% of the {} line rate{}; above it, see ^)",
                Rate(sweep.link_speed_bits_per_second.unwrap_or(0.0)),
                line_rate_source(sweep),
            )?,
            (Some(percent), Some(fastest)) => writeln!(
                out,
                " ({percent:.1}% of the {} line rate{}; of the sizes a wire of that rate carries: {} size{} read \
                 above it, up to {} at {} B, count in no peak or n-1/2, see ^)",
                Rate(sweep.link_speed_bits_per_second.unwrap_or(0.0)),
                line_rate_source(sweep),
                above.len(),
                if above.len() == 1 { "" } else { "s" },
                Rate(fastest.best_bits_per_second),
                fastest.size_bytes
            )?,
            (Some(percent), None) => writeln!(
                out,
                " ({percent:.1}% of the {} line rate{})",
                Rate(sweep.link_speed_bits_per_second.unwrap_or(0.0)),
                line_rate_source(sweep),
            )?,
            (None, _) => writeln!(out)?,
        }
        writeln!(
            out,
            "Half of the peak (n-1/2) at {} B; 90% of the peak at {} B",
            s.half_peak_size_bytes, s.ninety_percent_peak_size_bytes
        )?;
    }
    for step in &s.steps {
        writeln!(
            out,
            "Step: the bandwidth falls {:.0}% from {} at {} B to at most {} at {}..{} B (every size of that group): \
             a step that repeats there is the path's",
            step.fall_percent,
            Rate(step.from_bits_per_second),
            step.from_size_bytes,
            Rate(step.to_bits_per_second),
            step.to_min_size_bytes,
            step.to_max_size_bytes
        )?;
    }
    Ok(())
}

/// Where each placement of a sweep by turns was the faster: how many
/// sizes, from which to which. None when the sweep did not take turns.
fn turns_line(points: &[SweepPoint]) -> Option<String> {
    let mut won: Vec<(&str, usize, u64, u64)> = Vec::new();
    for p in points {
        let Some(name) = p.placement.as_deref() else {
            continue;
        };
        match won.iter_mut().find(|w| w.0 == name) {
            Some(w) => {
                w.1 += 1;
                w.2 = w.2.min(p.size_bytes);
                w.3 = w.3.max(p.size_bytes);
            }
            None => won.push((name, 1, p.size_bytes, p.size_bytes)),
        }
    }
    if won.is_empty() {
        return None;
    }
    won.sort_by_key(|w| w.2);
    let parts: Vec<String> = won
        .iter()
        .map(|&(name, n, from, to)| {
            let range = if from == to {
                format!("{}", Size(from))
            } else {
                format!("{} to {}", Size(from), Size(to))
            };
            format!("{name} at {n} size{} ({range})", if n == 1 { "" } else { "s" })
        })
        .collect();
    Some(format!(
        "Faster placement: {} (JSON: points[].placement, together_latency_us, scheduler_latency_us)",
        parts.join(", ")
    ))
}

/// What to read with care: the wide points, the placement of the ends,
/// the sizes skipped and why.
fn write_notes(sweep: &SweepResult, out: &mut dyn Write) -> io::Result<()> {
    let wide: Vec<String> = sweep
        .points
        .iter()
        .filter(|p| p.wide)
        .map(|p| p.size_bytes.to_string())
        .collect();
    if !wide.is_empty() {
        writeln!(
            out,
            "* wide: spread over {}% after extra rounds within its share of the budget at {} B; do not read those points alone",
            crate::workload::sweep::points::WIDE_SPREAD_PERCENT,
            wide.join(", ")
        )?;
    }
    write_above_line_rate(sweep, out)?;
    if let Some(placement) = &sweep.placement {
        writeln!(out, "Placement: {placement}")?;
    }
    if let Some(line) = turns_line(&sweep.points) {
        writeln!(out, "{line}")?;
    }
    if let Some(w) = &sweep.cross_core_wakeup {
        writeln!(
            out,
            "Host: {}: pinned apart, every half round trip above reads about that much more",
            w.describe()
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
    } else if let Some(note) = &sweep.note {
        writeln!(out, "Note: {note}")?;
    }
    Ok(())
}

/// Why points read above the line rate, when any do: a shaper's bucket
/// passes a message that fits at the hosts' speed (the sweep's fastest
/// batch starts with it full); else the link speed is not the path's.
fn write_above_line_rate(sweep: &SweepResult, out: &mut dyn Write) -> io::Result<()> {
    let above = above_line_rate(sweep);
    let (Some(first), Some(last), Some(link)) = (above.first(), above.last(), sweep.link_speed_bits_per_second) else {
        return Ok(());
    };
    let sizes = if above.len() == 1 {
        format!("at {} B", first.size_bytes)
    } else {
        format!(
            "at {} sizes, {} B to {} B",
            above.len(),
            first.size_bytes,
            last.size_bytes
        )
    };
    let why = match (sweep.link_speed_source.as_deref(), sweep.shaper_burst_bytes) {
        (Some("lab" | "qdisc"), Some(burst)) => format!(
            "the shaper's token bucket ({}) refills whenever its link idles, and in a ping-pong each \
             direction idles half the time; a message crosses at up to twice the line rate, one that fits the \
             bucket at the hosts' speed; the link's sustained rate is what the sizes far above the bucket approach",
            crate::units::Bytes(burst)
        ),
        (Some("lab" | "qdisc"), None) => "a shaper's token bucket refills whenever its link idles and passes \
             what it holds at the hosts' speed; the link's sustained rate is what the largest sizes approach"
            .into(),
        _ => "faster than that link carries; the path may not cross it (loopback, another interface), or \
             --link-speed is below the path's speed"
            .into(),
    };
    writeln!(
        out,
        "^ above the line rate ({}{}) {sizes}; {why}",
        Rate(link),
        line_rate_source(sweep)
    )
}

/// The points as CSV, one header line with units.
pub fn csv(sweep: &SweepResult, out: &mut dyn Write) -> io::Result<()> {
    let mut csv = Csv::new(out);
    csv.row(
        "size_bytes,latency_us,bandwidth_mbit_per_second,mean_latency_us,mean_bandwidth_mbit_per_second,\
         exchanges,lost,line_rate_percent,median_latency_us,max_latency_us,spread_percent,rounds,wide,\
         pass_latency_us,placement,together_latency_us,scheduler_latency_us"
            .split(','),
    )?;
    let opt = |v: Option<f64>, digits: usize| v.map(|v| format!("{v:.digits$}")).unwrap_or_default();
    for p in &sweep.points {
        csv.row([
            p.size_bytes.to_string(),
            format!("{:.3}", p.best_latency_us),
            format!("{:.3}", p.best_bits_per_second / 1e6),
            format!("{:.3}", p.mean_latency_us),
            format!("{:.3}", p.mean_bits_per_second / 1e6),
            p.exchanges.to_string(),
            p.lost.to_string(),
            opt(line_rate_percent(sweep, p.best_bits_per_second), 2),
            opt(p.median_latency_us, 3),
            opt(p.max_latency_us, 3),
            opt(p.spread_percent, 1),
            p.rounds.map(|r| r.to_string()).unwrap_or_default(),
            u8::from(p.wide).to_string(),
            p.pass_latency_us
                .iter()
                .map(|us| format!("{us:.3}"))
                .collect::<Vec<_>>()
                .join(";"),
            p.placement.clone().unwrap_or_default(),
            opt(p.together_latency_us, 3),
            opt(p.scheduler_latency_us, 3),
        ])?;
    }
    csv.finish()
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
            median_latency_us: Some(latency_us * 1.1),
            max_latency_us: Some(latency_us * 1.2),
            spread_percent: Some(20.0 / 1.1),
            rounds: Some(1),
            wide: false,
            pass_latency_us: vec![latency_us * 1.05, latency_us],
            placement: None,
            together_latency_us: None,
            scheduler_latency_us: None,
        };
        let mut points = vec![point(1, 4.0), point(65536, 20.0)];
        points[1].max_latency_us = Some(20.0 * 1.54);
        points[1].spread_percent = Some(40.0);
        points[1].rounds = Some(3);
        points[1].wide = true;
        SweepResult {
            mode: "ping_pong".into(),
            transport: "tcp".into(),
            link_speed_bits_per_second: Some(100e9),
            link_speed_source: Some("option".into()),
            shaper_burst_bytes: None,
            shaper_name: None,
            skipped_sizes_bytes: vec![131072],
            note: Some("the time limit (-t) ended the sweep early".into()),
            summary: crate::workload::sweep::points::summarize(&points, Some(100e9)),
            points,
            placement: None,
            cross_core_wakeup: None,
            passes: Some(2),
        }
    }

    #[test]
    fn table_snapshot() {
        let mut out = Vec::new();
        table(&sweep(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let expected = "\
Sweep (ping-pong, TCP): 2 sizes, best of 2 passes; fastest batch, median and slowest batch, spread = (max - min) / median, mean of all
   size B latency us bandwidth Mbit/s median us    max us  spread   mean us exchanges % line rate
        1       4.00             2.00      4.40      4.80    18%       6.00        70        0.0%
    65536      20.00         26214.40     22.00     30.80    40%*     30.00        70       26.2%
Small-message latency: 4.00 us at 1 B (half a round trip, as NetPIPE's; rr's p50 is a whole one)
Peak bandwidth: 26.21 Gbit/s at 65536 B (64 KiB) (26.2% of the 100.00 Gbit/s line rate, --link-speed)
Half of the peak (n-1/2) at 65536 B; 90% of the peak at 65536 B
* wide: spread over 25% after extra rounds within its share of the budget at 65536 B; do not read those points alone
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
        assert_eq!(
            lines[0],
            "size_bytes,latency_us,bandwidth_mbit_per_second,mean_latency_us,mean_bandwidth_mbit_per_second,\
             exchanges,lost,line_rate_percent,median_latency_us,max_latency_us,spread_percent,rounds,wide,\
             pass_latency_us,placement,together_latency_us,scheduler_latency_us"
        );
        assert_eq!(
            lines[1],
            "1,4.000,2.000,6.000,1.333,70,0,0.00,4.400,4.800,18.2,1,0,4.200;4.000,,,"
        );
        assert_eq!(
            lines[2],
            "65536,20.000,26214.400,30.000,17476.267,70,0,26.21,22.000,30.800,40.0,3,1,21.000;20.000,,,"
        );
    }

    #[test]
    fn a_note_without_skipped_sizes_is_printed() {
        let mut s = sweep();
        s.skipped_sizes_bytes.clear();
        s.note = Some("the time limit (-t) ended the sweep early (in pass 2 of 2: ...)".into());
        let mut out = Vec::new();
        table(&s, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.ends_with("Note: the time limit (-t) ended the sweep early (in pass 2 of 2: ...)\n"),
            "{text}"
        );
    }

    /// A lab router's 1 Gbit/s tbf passed 64 KiB messages at the hosts'
    /// speed (its 500 kB bucket starts each batch full): the peak read
    /// 2.17 Gbit/s "of the line rate" without a word.
    #[test]
    fn points_above_a_shapers_line_rate_are_marked_and_explained() {
        let mut s = sweep();
        s.link_speed_bits_per_second = Some(10e9);
        s.link_speed_source = Some("lab".into());
        s.shaper_burst_bytes = Some(500_000);
        s.shaper_name = Some("lab router x-r eth1".into());
        s.summary = crate::workload::sweep::points::summarize(&s.points, s.link_speed_bits_per_second);
        let mut out = Vec::new();
        table(&s, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("       70        0.0%\n"), "{text}");
        assert!(text.contains("       70      262.1%^\n"), "{text}");
        // The peak is of the sizes the wire carries; the faster one is named.
        assert!(
            text.contains(
                "; of the sizes a wire of that rate carries: 1 size read above it, up to 26.21 Gbit/s at 65536 B, \
                 count in no peak or n-1/2, see ^)"
            ),
            "{text}"
        );
        // A summary saved before that counted it, and says so.
        s.summary.peak_line_rate_percent = Some(262.1);
        let mut out = Vec::new();
        table(&s, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("(262.1% of the 10.00 Gbit/s line rate, lab router x-r eth1; above it, see ^)"),
            "{text}"
        );
        s.summary = crate::workload::sweep::points::summarize(&s.points, s.link_speed_bits_per_second);
        assert!(
            text.contains(
                "^ above the line rate (10.00 Gbit/s, lab router x-r eth1) at 65536 B; the shaper's token \
                 bucket (500.00 kB) refills whenever its link idles"
            ),
            "{text}"
        );
        // A NIC's speed exceeded is no burst: the link is not the path's.
        s.link_speed_source = Some("nic".into());
        s.shaper_name = None;
        let mut out = Vec::new();
        table(&s, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("(10.00 Gbit/s, the slower NIC) at 65536 B; faster than that link carries"),
            "{text}"
        );
        // Below the line rate nothing is marked.
        let mut out = Vec::new();
        table(&sweep(), &mut out).unwrap();
        assert!(!String::from_utf8(out).unwrap().contains('^'));
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
