//! `nicbench import FILE...`: runs of iperf3 (-J), NetPIPE (np.out) and
//! nicbench (--json) into the store, marked with their source. Every file is
//! read before anything is saved: one malformed file imports nothing.

use anyhow::Context;

use super::runs::write_out;
use super::save::database_path;
use crate::cli::store::ImportArgs;
use crate::store::import::{self, Imported};
use crate::store::{tags, RunMeta, RunWriter, Store};

pub fn run(args: ImportArgs) -> anyhow::Result<()> {
    tags::check_unique(&args.tags).map_err(super::UsageError)?;
    let runs: Vec<(String, Imported)> = args
        .files
        .iter()
        .map(|file| import::read(file).map(|run| (file.display().to_string(), run)))
        .collect::<Result<_, _>>()
        .context("no file was imported")?;
    let path = database_path(&args.db.db);
    let mut store = Store::open(&path)?;
    let mut lines = Vec::new();
    for (file, run) in runs {
        let meta = RunMeta {
            command_line: format!("nicbench import {file}"),
            tags: args.tags.clone(),
            trials_planned: None,
            source: Some((run.source.to_string(), file.clone())),
        };
        let mut writer = RunWriter::new(store, meta);
        let id = writer.finish_with_columns(&run.document, &run.columns, None)?;
        lines.push(format!(
            "imported {file} ({} {}) as run {id} in {}",
            run.source,
            run.columns.workload,
            path.display()
        ));
        store = writer.into_store();
    }
    write_out(|out| {
        for line in &lines {
            writeln!(out, "{line}")?;
        }
        Ok(())
    })
}
