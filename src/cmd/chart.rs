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
use crate::report::html::{self, ReportError, ReportSpec};
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

pub fn plot(args: PlotArgs) -> anyhow::Result<()> {
    let format = format_of(&args)?;
    let mut spec = ChartSpec::new(args.kind.name());
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
        ImageFormat::Svg => chart::render_svg(&chart, size)?.into_bytes(),
        ImageFormat::Png => chart::render_png(&chart, size)?,
    };
    std::fs::write(&args.out, bytes).with_context(|| format!("cannot write the chart to {}", args.out.display()))?;
    println!(
        "wrote {} chart ({}) to {}",
        args.kind.name(),
        chart.series_names().join(", "),
        args.out.display()
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
        other => other.into(),
    }
}

pub fn report(args: ReportArgs) -> anyhow::Result<()> {
    let store = open(&args.db)?;
    let spec = ReportSpec {
        title: args.title.clone(),
        source: store.path().display().to_string(),
        filters_text: filters_text(&args.filter),
        rows: dimensions(&args.rows, "--rows")?,
        cols: dimensions(&args.cols, "--cols")?,
        stat: stat(args.stat),
    };
    let written = html::write_file(&store, &filter(&args.filter), &spec, &args.out).map_err(report_error)?;
    println!(
        "wrote the report of {} runs ({} charts, {} tables) to {}",
        written.runs,
        written.charts,
        written.tables,
        args.out.display()
    );
    Ok(())
}
