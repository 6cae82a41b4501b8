//! `nicbench compare`: the comparison table from the store.

use super::runs::{filter, nothing_matched, open};
use super::stdout::write_out;
use super::UsageError;
use crate::cli::store::{CompareArgs, Stat as CliStat, TableFormat};
use crate::report::compare::{Stat, Table};
use crate::report::roundup::Roundup;
use crate::store::compare::{self, Dimension, Metric};
use crate::store::StoreError;

pub fn dimensions(names: &[String], option: &str) -> anyhow::Result<Vec<Dimension>> {
    names
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .map(|n| Dimension::parse(n).map_err(|e| UsageError(format!("{option}: {e}")).into()))
        .collect()
}

/// The table's statistic for the option's.
pub fn stat(stat: CliStat) -> Stat {
    match stat {
        CliStat::Best => Stat::Best,
        CliStat::Worst => Stat::Worst,
        CliStat::Median => Stat::Median,
        CliStat::Mean => Stat::Mean,
    }
}

/// The metrics of `--metric` (a comma-separated list), each once.
pub fn metrics(names: &[String]) -> anyhow::Result<Vec<Metric>> {
    let mut metrics: Vec<Metric> = Vec::new();
    for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        let metric = Metric::parse(name).map_err(|e| UsageError(format!("--metric: {e}")))?;
        if metrics.iter().any(|m| m.name == metric.name) {
            return Err(UsageError(format!("--metric: {name} is given twice")).into());
        }
        metrics.push(metric);
    }
    if metrics.is_empty() {
        return Err(UsageError("--metric: name at least one figure, e.g. throughput".into()).into());
    }
    Ok(metrics)
}

pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    let rows = dimensions(&args.rows, "--rows")?;
    let cols = dimensions(&args.cols, "--cols")?;
    let metrics = metrics(&args.metric)?;
    let stat = stat(args.stat);
    let store = open(&args.db)?;
    let filter = filter(&args.filter);
    let keys = |d: &[Dimension]| d.iter().map(Dimension::label).collect::<Vec<_>>();
    let mut tables = Vec::new();
    let mut matched_runs = 0;
    for metric in &metrics {
        let found = compare::records(&store, &filter, &rows, &cols, metric)?;
        matched_runs = found.matched_runs;
        if found.matched_runs == 0 {
            return Err(nothing_matched(&store, &args.filter));
        }
        if found.records.is_empty() {
            continue;
        }
        let mut table = Table::build(
            &found.records,
            metric,
            stat,
            keys(&rows),
            keys(&cols),
            args.baseline.as_deref(),
        )
        .map_err(UsageError)?;
        if crate::report::cpu_scope::is_cpu(metric) {
            let ids: Vec<i64> = found.records.iter().map(|r| r.run_id).collect();
            let scopes = crate::report::cpu_scope::ScopeBook::read(&store, &ids)?;
            table.scope_note = scopes.note(metric, &ids);
        }
        tables.push(table);
    }
    if tables.is_empty() {
        let names: Vec<String> = metrics.iter().map(|m| format!("{} ({})", m.name, m.label)).collect();
        return Err(StoreError::NothingMatched(format!(
            "{matched_runs} complete run(s) match, but none has a {} figure: choose another --metric or filter",
            names.join(" or ")
        ))
        .into());
    }
    let table = Roundup::new(tables);
    write_out(|out| match args.format {
        TableFormat::Text => table.text(out),
        TableFormat::Markdown => table.markdown(out),
        TableFormat::Csv => table.csv(out),
        TableFormat::Json => table.json(out),
    })
}
