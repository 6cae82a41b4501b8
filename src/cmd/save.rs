//! Saving a measured run in the results store as it goes: opened before
//! the first trial, each trial committed as it ends, the final document at
//! the end. A database that fails never loses the result: it is still
//! printed, and kept in the store's spool (`store::spool`), which the next
//! command that opens the store saves there; where the spool cannot be
//! written, or the store would never take the run, it is written to a
//! JSON file. The error names either.

use std::path::PathBuf;

use anyhow::Context;

use crate::cli::store::SaveArgs;
use crate::model::RunResult;
use crate::store::{self, RunMeta, RunWriter, Store, StoreError};

/// The save step of a measuring command.
pub struct Saver {
    path: PathBuf,
    state: State,
}

enum State {
    Off,
    Writing(Box<RunWriter>),
    Failed(Failed),
}

/// A save that failed: why, what the run is saved with, and its row when
/// its first trials were written before the store failed.
struct Failed {
    error: StoreError,
    meta: RunMeta,
    partial_run_id: Option<i64>,
}

impl Failed {
    /// Whether a later attempt may store the run: not a run the store
    /// refuses (an implausible figure, tags given twice).
    fn may_pass_later(&self) -> bool {
        !matches!(self.error, StoreError::Implausible { .. }) && store::tags::check_unique(&self.meta.tags).is_ok()
    }
}

/// The database a `--db` option (or `NICBENCH_DB`) names, else the default.
pub fn database_path(db: &Option<PathBuf>) -> PathBuf {
    db.clone().unwrap_or_else(store::default_path)
}

impl Saver {
    /// Opens the database unless `--no-save`. A failure is kept and
    /// reported at the end, after the result is printed.
    pub fn start(args: &SaveArgs, command_line: String, trials_planned: Option<u32>) -> Saver {
        let path = database_path(&args.db);
        if args.no_save {
            return Saver {
                path,
                state: State::Off,
            };
        }
        let meta = RunMeta {
            command_line,
            tags: args.tags.clone(),
            trials_planned,
            source: None,
        };
        let state = match store::tags::check_unique(&args.tags)
            .map_err(|detail| StoreError::Other {
                path: path.clone(),
                detail,
            })
            .and_then(|_| Store::open(&path))
        {
            Ok(db) => State::Writing(Box::new(RunWriter::new(db, meta))),
            Err(error) => {
                log::warn!("this run will not be saved there: {error}");
                State::Failed(Failed {
                    error,
                    meta,
                    partial_run_id: None,
                })
            }
        };
        Saver { path, state }
    }

    /// Saves the trial just finished; a failure stops saving this run.
    pub fn trial(&mut self, run: &RunResult) {
        if let State::Writing(writer) = &mut self.state {
            if let Err(error) = writer.trial(run) {
                log::warn!("saving trial {} failed: {error}", run.result.trial);
                self.state = State::Failed(Failed {
                    error,
                    meta: writer.meta().clone(),
                    partial_run_id: writer.id(),
                });
            }
        }
    }

    /// Saves the final document and the text as printed. Returns the run's
    /// id and the line that names it and the database (None with
    /// `--no-save`); on a database failure, writes the document to a JSON
    /// file and fails naming it.
    pub fn finish(self, run: &RunResult, text_report: Option<&str>) -> anyhow::Result<Option<Saved>> {
        let failed = match self.state {
            State::Off => return Ok(None),
            State::Writing(mut writer) => match writer.finish(run, text_report) {
                Ok(id) => {
                    return Ok(Some(Saved {
                        line: format!("saved as run {id} in {}", self.path.display()),
                        id,
                    }))
                }
                Err(error) => Failed {
                    error,
                    meta: writer.meta().clone(),
                    partial_run_id: writer.id(),
                },
            },
            State::Failed(failed) => failed,
        };
        let database = self.path.display().to_string();
        if failed.may_pass_later() {
            let kept = serde_json::to_value(run)
                .map_err(std::io::Error::other)
                .and_then(|doc| store::spool::keep(&self.path, &failed.meta, failed.partial_run_id, &doc, text_report));
            match kept {
                Ok(file) => {
                    return Err(anyhow::Error::new(failed.error)).with_context(|| {
                        format!(
                            "the run was not saved in {database}; it is kept in the spool as {}, and the next \
                             nicbench command that opens {database} saves it there",
                            file.display()
                        )
                    })
                }
                Err(e) => log::warn!("the run cannot be kept in the spool: {e}"),
            }
        }
        let file = write_fallback(run).context("the result could not be saved anywhere; it is printed above")?;
        Err(anyhow::Error::new(failed.error)).with_context(|| {
            format!(
                "the run was not saved in {database}; the result was written to {}",
                file.display()
            )
        })
    }
}

/// A run saved in the store: its id, and the line that says so.
pub struct Saved {
    pub id: i64,
    pub line: String,
}

/// Writes the document to `$TMPDIR/nicbench-run-<time>-<pid>.json`.
fn write_fallback(run: &RunResult) -> anyhow::Result<PathBuf> {
    let stamp = store::now_unix_seconds() as u64;
    let file = std::env::temp_dir().join(format!("nicbench-run-{stamp}-{}.json", std::process::id()));
    let json = serde_json::to_vec_pretty(run).context("encoding the result as JSON")?;
    std::fs::write(&file, json).with_context(|| format!("writing {}", file.display()))?;
    Ok(file)
}

/// The command line of this process, as typed (arguments with spaces quoted).
pub fn command_line() -> String {
    crate::shell::join(std::env::args())
}
