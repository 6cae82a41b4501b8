//! `nicbench plot`: one chart of saved runs (or of result files) as SVG or
//! PNG; `nicbench report`: the one-file HTML report.

use std::path::Path;

use anyhow::Context;

use super::compare::{dimensions, stat};
use super::runs::{filter, open};
use super::UsageError;
use crate::cli::chart::{ImageFormat, PlotArgs, ReportArgs};
use crate::cli::store::FilterArgs;
use crate::report::chart::data::{self, ChartSpec, SelectError};
use crate::report::chart::{self, ChartError};
use crate::report::html::{self, PlanCell, ReportError, ReportSpec};
use crate::store::compare::Metric;
use crate::store::import;
use crate::store::{RunMeta, RunWriter, Store, StoreError};

/// A selection that drew nothing is "no run matched" (exit code 7).
fn selection_error(e: SelectError) -> anyhow::Error {
    match e {
        SelectError::Store(e) => e.into(),
        SelectError::Chart(ChartError::Empty(message)) => StoreError::NothingMatched(message).into(),
        SelectError::Chart(e) => e.into(),
    }
}

/// The files, read into a private in-memory store as `import` would.
fn memory_store(files: &[std::path::PathBuf]) -> anyhow::Result<Store> {
    let mut store = Store::open(Path::new(":memory:"))?;
    for file in files {
        let run = import::read(file).context("nothing was drawn")?;
        let meta = RunMeta {
            command_line: format!("nicbench import {}", file.display()),
            tags: Vec::new(),
            trials_planned: None,
            source: Some((run.source.to_string(), file.display().to_string())),
        };
        let mut writer = RunWriter::new(store, meta);
        writer.finish_with_columns(&run.document, &run.columns, None)?;
        store = writer.into_store();
    }
    Ok(store)
}

fn format_of(args: &PlotArgs) -> anyhow::Result<ImageFormat> {
    if let Some(f) = args.format {
        return Ok(f);
    }
    match args
        .out
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("svg") => Ok(ImageFormat::Svg),
        Some("png") => Ok(ImageFormat::Png),
        _ => Err(UsageError(format!(
            "--out {}: cannot tell the image format from the name: end it in .svg or .png, or give --format",
            args.out.display()
        ))
        .into()),
    }
}

/// How many times larger than its layout the image is drawn: --scale, or
/// 2 for a PNG (slide-ready) and 1 for an SVG; at most 8000 pixels a side.
fn scale_of(args: &PlotArgs, format: ImageFormat) -> anyhow::Result<u32> {
    let scale = args.scale.unwrap_or(match format {
        ImageFormat::Png => 2,
        ImageFormat::Svg => 1,
    });
    let (w, h) = (args.width * scale, args.height * scale);
    if w > 8000 || h > 8000 {
        return Err(UsageError(format!(
            "--scale {scale}: the image would be {w}x{h} pixels, more than 8000 a side: \
             give a smaller --scale, --width or --height"
        ))
        .into());
    }
    Ok(scale)
}

pub fn plot(args: PlotArgs) -> anyhow::Result<()> {
    let format = format_of(&args)?;
    let scale = scale_of(&args, format)?;
    let mut spec = ChartSpec::new(&args.kind);
    spec.metric = Metric::parse(&args.metric).map_err(|e| UsageError(format!("--metric: {e}")))?;
    spec.group = dimensions(&args.group, "--group")?;
    if spec.group.is_empty() {
        return Err(UsageError("--group: give at least one column or tag:KEY".into()).into());
    }
    spec.series = dimensions(&args.series, "--series")?;
    spec.stat = stat(args.stat);
    spec.max_lines = args.max_lines;
    spec.runs = args.ids.clone();
    let store = if args.files.is_empty() {
        open(&args.db)?
    } else {
        memory_store(&args.files)?
    };
    let chart = data::build(&store, &filter(&args.filter), &spec).map_err(selection_error)?;
    let size = (args.width, args.height);
    let bytes = match format {
        ImageFormat::Svg => chart::render_svg_scaled(&chart, size, scale)?.into_bytes(),
        ImageFormat::Png => chart::render_png_scaled(&chart, size, scale)?,
    };
    std::fs::write(&args.out, bytes).with_context(|| format!("cannot write the chart to {}", args.out.display()))?;
    // Series names come from stored facts and tags: outside text.
    println!(
        "wrote {} chart ({}) to {}",
        args.kind,
        crate::outside_text::terminal(&chart.series_names().join(", ")),
        crate::outside_text::terminal(&args.out.display().to_string())
    );
    Ok(())
}

/// The filters as typed, for the report's header.
pub fn filters_text(f: &FilterArgs) -> String {
    let mut given: Vec<String> = f.tags.iter().map(|t| format!("--tag {t}")).collect();
    given.extend(f.workload.iter().map(|w| format!("--workload {w}")));
    given.extend(f.host.iter().map(|h| format!("--host {h}")));
    given.extend(f.since.iter().map(|s| format!("--since {}s", *s as u64)));
    given.join(" ")
}

fn report_error(e: ReportError) -> anyhow::Error {
    match e {
        ReportError::Select(e) => selection_error(e),
        ReportError::Baseline(message) => UsageError(message).into(),
        other => other.into(),
    }
}

/// The cases of the plan runs among the selected runs (or named by a
/// `plan_run=` filter) that have no complete run, with the reason their
/// summary file gives. A plan run's summary is where `nicbench run` wrote
/// it, beside the database; one that cannot be read is left out.
fn plan_cells(store: &Store, filter: &crate::store::query::Filter) -> anyhow::Result<Vec<PlanCell>> {
    // Only whether each run is complete and its tags: the report reads
    // the runs' summaries itself.
    let runs = store.column_rows(
        &crate::store::query::Filter {
            limit: None,
            ..filter.clone()
        },
        &["complete"],
    )?;
    let mut tags = store.tags_of(runs.iter().map(|(id, _)| *id))?;
    let mut plan_runs: std::collections::BTreeSet<String> = filter
        .tags
        .iter()
        .filter(|t| t.key == "plan_run")
        .map(|t| t.value.clone())
        .collect();
    let tag = |tags: &[crate::store::Tag], key: &str| tags.iter().find(|t| t.key == key).map(|t| t.value.clone());
    let mut complete = std::collections::BTreeSet::new();
    for (id, values) in &runs {
        let tags = tags.remove(id).unwrap_or_default();
        let Some(plan_run) = tag(&tags, "plan_run") else {
            continue;
        };
        if values[0] == rusqlite::types::Value::Integer(1) {
            if let Some(case) = tag(&tags, "case") {
                complete.insert((plan_run.clone(), case));
            }
        }
        plan_runs.insert(plan_run);
    }
    let dir = crate::plan::plans_dir(store.path());
    let mut cells = Vec::new();
    for plan_run in plan_runs {
        let Ok(entries) = std::fs::read_dir(&dir) else { break };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(&format!("-{plan_run}")) {
                continue;
            }
            let Ok(text) = std::fs::read(entry.path().join("summary.json")) else {
                continue;
            };
            let Ok(summary) = serde_json::from_slice::<serde_json::Value>(&text) else {
                continue;
            };
            for case in summary["cases"].as_array().into_iter().flatten() {
                let key = case["case"].as_str().unwrap_or("?").to_string();
                if complete.contains(&(plan_run.clone(), key.clone())) {
                    continue;
                }
                let seconds = case["seconds"].as_f64().unwrap_or(0.0);
                let (status, reason) = match case["status"].as_str().unwrap_or("") {
                    "failed" => (
                        "failed",
                        case["reason"].as_str().unwrap_or("no reason recorded").to_string(),
                    ),
                    "interrupted" => ("interrupted", format!("stopped by a signal after {seconds:.1} s")),
                    "measured" => match case["run_id"].as_i64() {
                        Some(id) => ("incomplete", format!("run {id} was saved incomplete")),
                        None => ("not saved", "measured, but no run was saved".to_string()),
                    },
                    // Skipped: measured earlier, in a run this selection leaves out.
                    _ => continue,
                };
                cells.push(PlanCell {
                    plan_run: plan_run.clone(),
                    case: key,
                    status: status.into(),
                    reason,
                });
            }
        }
    }
    Ok(cells)
}

/// The `[[report.tables]]` of the plan at `path`, as tables of the report.
fn roundups_of_plan(path: &Path) -> anyhow::Result<Vec<html::RoundupSpec>> {
    let plan = crate::plan::Plan::load(path)?;
    plan.report
        .tables
        .iter()
        .map(|t| {
            let list = |s: &str| s.split(',').map(String::from).collect::<Vec<_>>();
            let stat = match t.stat.as_deref() {
                Some("best") => crate::report::compare::Stat::Best,
                Some("worst") => crate::report::compare::Stat::Worst,
                Some("mean") => crate::report::compare::Stat::Mean,
                _ => crate::report::compare::Stat::Median,
            };
            Ok(html::RoundupSpec {
                title: t.title.clone(),
                rows: dimensions(&list(&t.rows), "[[report.tables]] rows")?,
                cols: dimensions(&list(&t.cols), "[[report.tables]] cols")?,
                metrics: super::compare::metrics(&list(&t.metric))?,
                stat,
                baseline: t.baseline.clone(),
                workload: t.workload.clone(),
            })
        })
        .collect()
}

pub fn report(args: ReportArgs) -> anyhow::Result<()> {
    let store = open(&args.db)?;
    let filter = filter(&args.filter);
    let spec = ReportSpec {
        plan_cells: plan_cells(&store, &filter)?,
        lead: None,
        roundups: match &args.plan {
            Some(path) => roundups_of_plan(path)?,
            None => Vec::new(),
        },
        title: args.title.clone(),
        source: store.path().display().to_string(),
        filters_text: filters_text(&args.filter),
        rows: dimensions(&args.rows, "--rows")?,
        cols: dimensions(&args.cols, "--cols")?,
        stat: stat(args.stat),
        baseline: args.baseline.clone(),
    };
    let written = html::write_file(&store, &filter, &spec, &args.out).map_err(report_error)?;
    println!(
        "wrote the report of {} runs ({} charts, {} tables) to {}",
        written.runs,
        written.charts,
        written.tables,
        args.out.display()
    );
    Ok(())
}
