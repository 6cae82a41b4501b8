//! `nicbench demo`: an agent on loopback in this process and a short
//! standard set, each test written as the command line a user would type,
//! then one comparison table.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};

use anyhow::Context;

use super::save::Saver;
use super::signals;
use crate::agent::{Agent, AgentConfig};
use crate::cli::DemoArgs;
use crate::model::RunResult;
use crate::report::text::Text;
use crate::report::Reporter;
use crate::session::{self, RunOptions};
use crate::units::Rate;

/// The standard set: a label and the arguments after `nicbench`.
const STANDARD_SET: &[(&str, &str)] = &[
    ("TCP, 1 stream", "tcp HOST"),
    ("TCP, 4 streams", "tcp HOST -P 4"),
    ("TCP, reverse", "tcp HOST --reverse"),
    ("TCP, both ways", "tcp HOST --bidir"),
    ("TCP, 8 KiB writes, nodelay", "tcp HOST -l 8K --nodelay"),
    ("Sweep 1 B-1 MiB, ping-pong", "sweep HOST --max 1M --point-time 10ms"),
    ("UDP, 1 Gbit/s offered", "udp HOST -b 1G"),
    ("TCP request/response, 1,1 B", "rr HOST"),
];

pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    signals::install();
    let agent = Agent::bind(AgentConfig::new(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))))
        .context("starting the demo agent on loopback")?
        .spawn();
    let seconds = args.duration.as_secs_f64();
    eprintln!(
        "nicbench demo: agent on {}, {} tests of {seconds:.1} s each",
        agent.addr,
        STANDARD_SET.len()
    );
    let mut runs: Vec<(&str, RunResult)> = Vec::new();
    let mut saved: Vec<(String, String)> = Vec::new();
    for (i, (label, line)) in STANDARD_SET.iter().enumerate() {
        if signals::interrupted() {
            break;
        }
        let argv = format!("nicbench {line} -p {} -t {seconds}", agent.addr.port()).replace("HOST", "127.0.0.1");
        eprintln!("[{}/{}] {label}: {argv}", i + 1, STANDARD_SET.len());
        let (measure, spec) =
            super::measurement(argv.split_whitespace()).with_context(|| format!("demo command '{argv}'"))?;
        let run = session::run(
            &super::measure::target(&measure)?,
            &spec,
            RunOptions {
                interrupted: &signals::client_stop_reason,
                settings: Default::default(),
                on_interval: None,
                on_progress: None,
                trial: 1,
            },
        )
        .with_context(|| format!("demo test '{label}'"))?;
        let mut saver = Saver::start(&args.save, argv.clone(), Some(1));
        saver.trial(&run);
        let mut text = Vec::new();
        Text.render(&run, &mut text)?;
        if !args.json {
            super::stdout::out().write_all(&text)?;
        }
        super::measure::save(saver, &run, Some(&String::from_utf8_lossy(&text)), !args.json)?;
        saved.push((argv.clone(), String::from_utf8_lossy(&text).into_owned()));
        if !args.json {
            println!();
        }
        runs.push((label, run));
    }
    let mut out = super::stdout::out();
    if args.json {
        let all: Vec<&RunResult> = runs.iter().map(|(_, r)| r).collect();
        crate::outside_text::write_json_pretty(&mut out, &all)?;
        writeln!(out)?;
    } else {
        summary_table(&runs, &mut out)?;
    }
    if !args.no_report && !runs.is_empty() {
        let written = report(&runs, &saved, &args)?;
        // With --json, stdout holds only the document.
        let line = format!(
            "report: {} ({} charts; open it in a browser)",
            args.report.display(),
            written.charts
        );
        if args.json {
            eprintln!("{line}");
        } else {
            writeln!(out, "\n{line}")?;
        }
    }
    match runs.iter().find(|(_, run)| run.interrupted) {
        Some((_, run)) => Err(super::measure::CutShort::of(run).into()),
        None => Ok(()),
    }
}

/// The HTML report of the demo's runs, from a private in-memory store (the
/// runs are also in the results database unless --no-save).
fn report(
    runs: &[(&str, RunResult)],
    saved: &[(String, String)],
    args: &DemoArgs,
) -> anyhow::Result<crate::report::html::Written> {
    use crate::store::{RunMeta, RunWriter, Store};
    let mut store = Store::open(std::path::Path::new(":memory:"))?;
    for ((label, run), (command_line, text)) in runs.iter().zip(saved) {
        // The report's own copy names each run by its test: one bar and one
        // table row per test, not per workload.
        let mut tags = args.save.tags.clone();
        tags.retain(|t| t.key != "test");
        tags.push(crate::store::Tag {
            key: "test".into(),
            value: label.to_string(),
        });
        let meta = RunMeta {
            command_line: command_line.clone(),
            tags,
            trials_planned: Some(1),
            source: None,
        };
        let mut writer = RunWriter::new(store, meta);
        writer.trial(run)?;
        writer.finish(run, Some(text))?;
        store = writer.into_store();
    }
    let spec = crate::report::html::ReportSpec {
        title: "nicbench demo".into(),
        source: "the demo's runs on loopback".into(),
        filters_text: String::new(),
        rows: vec![crate::store::compare::Dimension::parse("tag:test").expect("a tag key")],
        cols: Vec::new(),
        stat: crate::report::compare::Stat::Median,
        baseline: None,
        plan_cells: Vec::new(),
        roundups: Vec::new(),
        lead: Some(crate::report::html::LeadTable {
            caption: SUMMARY_TITLE.into(),
            header: SUMMARY_HEADER.iter().map(|h| h.to_string()).collect(),
            rows: summary_rows(runs),
        }),
    };
    crate::report::html::write_file(&store, &Default::default(), &spec, &args.report)
        .with_context(|| format!("writing the demo report {}", args.report.display()))
}

const SUMMARY_TITLE: &str = "Summary (loopback; client and agent share the CPU)";
const SUMMARY_HEADER: [&str; 5] = ["test", "result", "sender", "CPU busy", "service demand"];

/// The summary's rows, one per test: its label, its own figure, the
/// sender's rate, the client's CPU and service demand. The text summary
/// and the report's table are both these rows.
fn summary_rows(runs: &[(&str, RunResult)]) -> Vec<Vec<String>> {
    runs.iter()
        .map(|(label, run)| {
            let r = &run.result;
            // Each test's own figure: transactions/s, a sweep's peak, or the
            // receiver's rate (the same figure repetitions compare by).
            let figure = crate::repeat::figure_of_merit(&run.spec, r);
            // The sender's average rate says something only for bulk transfer.
            let sender = if crate::workload::results_of(&run.workload).line_rate_applies() {
                Rate(r.sum.sender.bits_per_second).to_string()
            } else {
                "-".to_string()
            };
            let c = &r.cpu.client;
            vec![
                label.to_string(),
                figure.to_string(),
                sender,
                format!("{:.1}%", c.utilization_percent),
                crate::report::text::service_demand(c),
            ]
        })
        .collect()
}

fn summary_table(runs: &[(&str, RunResult)], out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "{SUMMARY_TITLE}")?;
    write_aligned(&summary_rows(runs), out)
}

/// The header and `rows` in columns as wide as their widest cell: the
/// first left-aligned, the figures right-aligned. Fixed widths let a long
/// cell (a sweep's peak with its size) push the rest of its row out of
/// line (issue 72, item 9).
fn write_aligned(rows: &[Vec<String>], out: &mut dyn Write) -> std::io::Result<()> {
    let header: Vec<String> = SUMMARY_HEADER.iter().map(|h| h.to_string()).collect();
    let lines: Vec<&Vec<String>> = std::iter::once(&header).chain(rows).collect();
    let width = |column: usize| {
        lines
            .iter()
            .map(|cells| cells.get(column).map_or(0, |c| c.chars().count()))
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    for cells in lines {
        let mut line = String::new();
        for (column, cell) in cells.iter().enumerate() {
            let w = widths[column];
            if column == 0 {
                line.push_str(&format!("{cell:<w$}"));
            } else {
                line.push_str(&format!("  {cell:>w$}"));
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
    fn every_summary_row_lines_up_with_the_header_whatever_its_cells() {
        // A sweep's result is wider than the fixed 26 columns were.
        let rows: Vec<Vec<String>> = [
            ["TCP 1 stream", "31.20 Gbit/s", "31.21 Gbit/s", "99.0%", "0.248 us/KB"],
            [
                "Sweep 1 B-1 MiB, ping-pong",
                "peak 12.34 Gbit/s at 1 MiB, half at 64 KiB (ping-pong)",
                "-",
                "98.0%",
                "1.234 us/KB",
            ],
        ]
        .iter()
        .map(|r| r.iter().map(|c| c.to_string()).collect())
        .collect();
        let mut out = Vec::new();
        write_aligned(&rows, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        // Right-aligned columns end where the header's do: every line has
        // the same length, and each row's CPU cell ends where "CPU busy" does.
        let end_of = |line: &str, cell: &str| line.find(cell).map(|at| at + cell.len());
        let cpu_end = end_of(lines[0], "CPU busy").unwrap();
        assert_eq!(end_of(lines[1], "99.0%"), Some(cpu_end), "{text}");
        assert_eq!(end_of(lines[2], "98.0%"), Some(cpu_end), "{text}");
        assert!(lines.iter().all(|l| l.len() == lines[0].len()), "{text}");
    }
}
