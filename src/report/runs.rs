//! The run listing of `nicbench runs`, and the small formatting helpers the
//! store's commands share (UTC time, a figure with its unit). Every cell
//! of the listing is shown through `outside_text::terminal`: host names,
//! workloads and sources of imported runs come from outside.

use std::io::{self, Write};

use crate::outside_text::terminal;
use crate::store::query::RunSummary;
use crate::units::Rate;

/// A figure with its unit: rates in Mbit/s or Gbit/s, others with two decimals.
pub fn figure(value: f64, unit: &str) -> String {
    match unit {
        "bit/s" => Rate(value).to_string(),
        "" => format!("{value:.2}"),
        other => format!("{value:.2} {other}"),
    }
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS` UTC.
pub fn utc(unix_seconds: f64) -> String {
    let secs = unix_seconds.max(0.0) as i64;
    let (days, rest) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// `client -> agent`, or the agent's address when the names are unknown.
pub fn hosts(run: &RunSummary) -> String {
    match (&run.client_host, &run.agent_host) {
        (Some(c), Some(a)) if !c.is_empty() && !a.is_empty() => format!("{c} -> {a}"),
        _ => run.agent_address.clone().unwrap_or_else(|| "-".into()),
    }
}

/// What the run's state and verdict say, in a few words.
pub fn state(run: &RunSummary) -> String {
    let verdict = run.verdict_kind.clone().unwrap_or_else(|| "-".into());
    if run.complete {
        return verdict;
    }
    let planned = run.trials_planned.map(|n| format!(" of {n}")).unwrap_or_default();
    format!("INCOMPLETE ({}{planned} trials saved)", run.trials_saved)
}

/// One line per run, under a header, columns aligned.
pub fn render(runs: &[RunSummary], out: &mut dyn Write) -> io::Result<()> {
    let mut rows = vec![[
        "id".to_string(),
        "started (UTC)".into(),
        "workload".into(),
        "hosts".into(),
        "tags".into(),
        "result".into(),
        "verdict".into(),
    ]];
    for run in runs {
        let tags: Vec<String> = run.tags.iter().map(|t| t.to_string()).collect();
        let result = match (run.headline_value, run.headline_unit.as_deref()) {
            (Some(v), unit) => figure(v, unit.unwrap_or("")),
            (None, _) => "-".into(),
        };
        rows.push(
            [
                run.id.to_string(),
                // Imports whose format records no time (NetPIPE) hold 0.
                if run.started_at_unix_seconds > 0.0 {
                    utc(run.started_at_unix_seconds)
                } else {
                    "-".into()
                },
                if run.source == "nicbench" {
                    run.workload.clone()
                } else {
                    format!("{} ({})", run.workload, run.source)
                },
                hosts(run),
                if tags.is_empty() { "-".into() } else { tags.join(" ") },
                result,
                state(run),
            ]
            .map(|cell| terminal(&cell).into_owned()),
        );
    }
    let mut widths = [0usize; 7];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in &rows {
        let mut line = format!("{:>w$}", row[0], w = widths[0]);
        for (i, cell) in row.iter().enumerate().skip(1) {
            // The result column is right-aligned so the figures line up.
            if i == 5 {
                line += &format!("  {cell:>w$}", w = widths[i]);
            } else {
                line += &format!("  {cell:<w$}", w = widths[i]);
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates_are_civil() {
        assert_eq!(utc(0.0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400.0), "2000-02-29 00:00:00");
        assert_eq!(utc(1_700_000_000.0), "2023-11-14 22:13:20");
    }

    #[test]
    fn host_names_from_a_peer_are_listed_escaped() {
        let run = RunSummary {
            id: 1,
            started_at_unix_seconds: 0.0,
            workload: "tcp".into(),
            client_host: Some("a".into()),
            agent_host: Some("evil\u{1b}]0;x\u{7}\u{202e}\nb".into()),
            agent_address: None,
            headline_unit: Some("bit/s".into()),
            headline_value: Some(9.41e9),
            verdict_kind: None,
            trials_planned: None,
            trials_saved: 1,
            complete: true,
            source: "nicbench".into(),
            tags: vec![],
        };
        let mut out = Vec::new();
        render(&[run], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.contains(r"a -> evil\x1b]0;x\x07\u{202e}\nb"), "{text}");
    }

    #[test]
    fn an_incomplete_run_says_how_far_it_got() {
        let run = RunSummary {
            id: 3,
            started_at_unix_seconds: 0.0,
            workload: "tcp".into(),
            client_host: Some("a".into()),
            agent_host: Some("b".into()),
            agent_address: None,
            headline_unit: Some("bit/s".into()),
            headline_value: Some(9.41e9),
            verdict_kind: None,
            trials_planned: Some(5),
            trials_saved: 2,
            complete: false,
            source: "nicbench".into(),
            tags: vec!["nic=igb".parse().unwrap()],
        };
        let mut out = Vec::new();
        render(&[run], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("a -> b  nic=igb  9.41 Gbit/s  INCOMPLETE (2 of 5 trials saved)"),
            "{text}"
        );
    }
}
