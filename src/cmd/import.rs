//! `nicbench import FILE...`: runs of iperf3 (-J), NetPIPE (np.out) and
//! nicbench (--json) into the store, marked with their source. Every file
//! is checked before the database is opened, then all are saved in one
//! transaction: one malformed file, a value out of range or a full disk
//! imports nothing, and a rerun after fixing it duplicates nothing. Files
//! are streamed, and memory holds one file's run at a time (each is read
//! twice: checked, then saved).

use anyhow::Context;

use super::save::database_path;
use super::stdout::write_out;
use crate::cli::store::ImportArgs;
use crate::store::import;
use crate::store::{tags, RunMeta, Store};

pub fn run(args: ImportArgs) -> anyhow::Result<()> {
    tags::check_unique(&args.tags).map_err(super::UsageError)?;
    let path = database_path(&args.db.db);
    let unchanged = || format!("no file was imported: {} is unchanged", path.display());
    for file in &args.files {
        import::read(file).with_context(unchanged)?;
    }
    let mut store = Store::open(&path).with_context(unchanged)?;
    let mut batch = store.batch().with_context(unchanged)?;
    let mut lines = Vec::new();
    for file in &args.files {
        let run = import::read(file).with_context(unchanged)?;
        let name = file.display().to_string();
        let meta = RunMeta {
            command_line: format!("nicbench import {name}"),
            tags: args.tags.clone(),
            trials_planned: None,
            source: Some((run.source.to_string(), name.clone())),
        };
        let id = batch.save(&meta, &run.document, &run.columns).with_context(unchanged)?;
        lines.push(format!(
            "imported {name} ({} {}) as run {id}",
            run.source, run.columns.workload
        ));
    }
    let ids = batch.commit().with_context(unchanged)?;
    drop(store);
    let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
    write_out(|out| {
        for line in &lines {
            writeln!(out, "{line}")?;
        }
        writeln!(
            out,
            "saved {} run(s) in {}: {}",
            ids.len(),
            path.display(),
            ids.join(", ")
        )
    })
}
