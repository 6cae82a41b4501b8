//! `nicbench export` (saved runs as JSON or CSV) and `nicbench rm`.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::Context;
use rusqlite::types::Value as Sql;

use super::runs::{filter, nothing_matched, open, open_writable};
use super::stdout::{print_out, write_out};
use crate::cli::store::{ExportArgs, ExportFormat, FilterArgs, RmArgs};
use crate::csv_out::Csv;
use crate::store::Tag;

/// The columns `export --format csv` writes, after id and tags.
const CSV_COLUMNS: &[&str] = &crate::store::columns::LISTED_COLUMNS;

pub fn export(args: ExportArgs) -> anyhow::Result<()> {
    let store = open(&args.db)?;
    let f = filter(&args.filter);
    let ids = store.run_ids(&f)?;
    if ids.is_empty() {
        return Err(nothing_matched(&store, &args.filter));
    }
    match args.format {
        ExportFormat::Json => write_out(|out| {
            writeln!(out, "[")?;
            let mut first = true;
            for id in &ids {
                // A run whose document cannot be read is left out, named.
                let Some(run) = store.run_or_skip(*id).map_err(std::io::Error::other)? else {
                    continue;
                };
                let tags: serde_json::Map<String, serde_json::Value> = run
                    .summary
                    .tags
                    .iter()
                    .map(|t| (t.key.clone(), t.value.clone().into()))
                    .collect();
                let entry = serde_json::json!({
                    "id": id,
                    "command_line": run.command_line,
                    "nicbench_version": run.nicbench_version,
                    "complete": run.summary.complete,
                    "tags": tags,
                    "document": run.document,
                });
                if !first {
                    writeln!(out, ",")?;
                }
                first = false;
                crate::outside_text::write_json(&mut *out, &entry)?;
            }
            if !first {
                writeln!(out)?;
            }
            writeln!(out, "]")
        }),
        ExportFormat::Csv => {
            let rows = store.column_rows(&f, CSV_COLUMNS)?;
            let tags = store.tags_of(rows.iter().map(|(id, _)| *id))?;
            let mut keys: Vec<&str> = tags.values().flatten().map(|t| t.key.as_str()).collect();
            keys.sort_unstable();
            keys.dedup();
            write_out(|out| {
                let mut csv = Csv::new(out);
                let mut header = vec!["id".to_string()];
                header.extend(keys.iter().map(|k| format!("tag:{k}")));
                header.extend(CSV_COLUMNS.iter().map(|c| c.to_string()));
                csv.row(&header)?;
                for (id, values) in &rows {
                    let mut line = vec![id.to_string()];
                    let run_tags = tags.get(id).map(Vec::as_slice).unwrap_or(&[]);
                    for key in &keys {
                        let value = run_tags.iter().find(|t| t.key == *key).map(|t| t.value.as_str());
                        line.push(value.unwrap_or("").to_string());
                    }
                    line.extend(values.iter().map(sql_text));
                    csv.row(&line)?;
                }
                csv.finish()
            })
        }
    }
}

/// A SQL value as plain text (NULL is empty).
pub fn sql_text(value: &Sql) -> String {
    match value {
        Sql::Null => String::new(),
        Sql::Integer(i) => i.to_string(),
        Sql::Real(r) => r.to_string(),
        Sql::Text(t) => t.clone(),
        Sql::Blob(b) => format!("<{} bytes>", b.len()),
    }
}

pub fn rm(args: RmArgs) -> anyhow::Result<()> {
    let mut store = open_writable(&args.db)?;
    let ids = if args.tags.is_empty() {
        for id in &args.ids {
            // A run whose document cannot be read can be removed.
            match store.run(*id) {
                Ok(_) | Err(crate::store::StoreError::BadDocument { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        args.ids.clone()
    } else {
        let by_tag = FilterArgs {
            tags: args.tags.clone(),
            ..FilterArgs::default()
        };
        let ids = store.run_ids(&filter(&by_tag))?;
        if ids.is_empty() {
            return Err(nothing_matched(&store, &by_tag));
        }
        ids
    };
    if !args.yes && !confirm(&ids, &args.tags, &store.path().display().to_string())? {
        eprintln!("nothing removed");
        return Ok(());
    }
    let removed = store.remove(&ids)?;
    print_out(&format!("removed {removed} run(s) from {}\n", store.path().display()))
}

/// Asks on the terminal; without one, refuses and names `--yes`.
fn confirm(ids: &[i64], tags: &[Tag], db: &str) -> anyhow::Result<bool> {
    let what = if tags.is_empty() {
        format!(
            "run(s) {}",
            ids.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
        )
    } else {
        let tags: Vec<String> = tags.iter().map(Tag::to_string).collect();
        format!("{} run(s) tagged {}", ids.len(), tags.join(" "))
    };
    if !std::io::stdin().is_terminal() {
        return Err(super::UsageError(format!(
            "not removing {what} from {db} without confirmation: stdin is not a terminal; add --yes"
        ))
        .into());
    }
    eprint!("remove {what} from {db}? [y/N] ");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .context("reading the answer")?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}
