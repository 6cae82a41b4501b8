//! `nicbench compare`: the comparison table from the store.

use super::runs::{filter, nothing_matched, open};
use super::stdout::write_out;
use super::UsageError;
use crate::cli::store::{CompareArgs, Stat as CliStat, TableFormat};
use crate::report::compare::{Stat, Table};
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
        CliStat::Median => Stat::Median,
        CliStat::Mean => Stat::Mean,
    }
}

pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    let rows = dimensions(&args.rows, "--rows")?;
    let cols = dimensions(&args.cols, "--cols")?;
    let metric = Metric::parse(&args.metric).map_err(|e| UsageError(format!("--metric: {e}")))?;
    let stat = stat(args.stat);
    let store = open(&args.db)?;
    let found = compare::records(&store, &filter(&args.filter), &rows, &cols, &metric)?;
    if found.matched_runs == 0 {
        return Err(nothing_matched(&store, &args.filter));
    }
    if found.records.is_empty() {
        return Err(StoreError::NothingMatched(format!(
            "{} complete run(s) match, but none has a {} figure ({}): choose another --metric or filter",
            found.matched_runs, metric.name, metric.label
        ))
        .into());
    }
    let keys = |d: &[Dimension]| d.iter().map(Dimension::label).collect();
    let table = Table::build(
        &found.records,
        &metric,
        stat,
        keys(&rows),
        keys(&cols),
        args.baseline.as_deref(),
    )
    .map_err(UsageError)?;
    write_out(|out| match args.format {
        TableFormat::Text => table.text(out),
        TableFormat::Markdown => table.markdown(out),
        TableFormat::Csv => table.csv(out),
        TableFormat::Json => table.json(out),
    })
}
