//! The local spool (issue 71, item 3): a run a measuring command could not
//! write to its store (a PostgreSQL server unreachable or gone mid-write,
//! a SQLite file locked, full or read-only) is kept as one JSON file in a
//! directory of that store's own under `$XDG_STATE_HOME/nicbench/spool`
//! (else `~/.local/state/nicbench/spool`), and the next command that opens
//! the store for writing saves it there first and says how many. A spooled
//! run is known by the SHA-256 of its document, recorded in the store's
//! `copied_runs` in the same transaction as the run, so two processes
//! draining one spool, or a drain cut short before it removed the file,
//! store it once. A file that is not a spooled run is named and left in
//! place.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::db::params;
use super::save::{write_final, RunMeta};
use super::{Store, StoreError, Tag};

/// The `schema` of a spool file.
pub const SPOOL_SCHEMA: &str = "nicbench.spool/1";

/// One spooled run, as its file holds it.
#[derive(Debug, Serialize, Deserialize)]
pub struct Spooled {
    pub schema: String,
    /// The store it was meant for, as [`store_name`] gives it.
    pub store: String,
    pub command_line: String,
    /// `key=value` each.
    pub tags: Vec<String>,
    pub trials_planned: Option<u32>,
    /// The run's row when its first trials reached the store before it
    /// failed: completed in place if it is still that run's, unfinished.
    pub partial_run_id: Option<i64>,
    pub text_report: Option<String>,
    /// The run's final document (`nicbench.run/1`).
    pub run: Value,
}

/// What draining a spool did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Drained {
    /// Runs saved now, by their new (or completed) ids.
    pub saved: Vec<i64>,
    /// Runs the store held already (by their document's digest).
    pub present: u64,
    /// Files left in place, each with why.
    pub bad: Vec<(PathBuf, String)>,
}

/// The name a spool knows a store by: a URL as given, a file by its
/// absolute path (so `r.db` and `./r.db` from one directory are one).
pub fn store_name(path: &Path) -> String {
    if super::postgres::is_url(path) {
        return path.display().to_string();
    }
    let absolute = super::absolute(path);
    let mut clean = PathBuf::new();
    for part in absolute.components() {
        match part {
            std::path::Component::CurDir => {}
            other => clean.push(other),
        }
    }
    clean.display().to_string()
}

/// `$XDG_STATE_HOME/nicbench/spool`, else `~/.local/state/nicbench/spool`.
pub fn root() -> Option<PathBuf> {
    std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .map(|state| state.join("nicbench").join("spool"))
}

/// The spool directory of the store at `path`: one per store, named by
/// the first 16 hex digits of the SHA-256 of its name. None for an
/// in-memory store or where no home directory is known.
pub fn dir_of(path: &Path) -> Option<PathBuf> {
    if path == Path::new(":memory:") {
        return None;
    }
    let digest = super::copy::document_sha256(&store_name(path));
    root().map(|r| r.join(&digest[..16]))
}

/// The spool files waiting for the store at `path`, oldest name first.
pub fn waiting(path: &Path) -> Vec<PathBuf> {
    let Some(dir) = dir_of(path) else { return Vec::new() };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "json")
                && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    files
}

/// Keeps a run for the store at `path` in its spool; returns the file.
/// Written under a hidden name and renamed into place, so a drain never
/// reads half a file.
pub fn keep(
    path: &Path,
    meta: &RunMeta,
    partial_run_id: Option<i64>,
    run: &Value,
    text_report: Option<&str>,
) -> std::io::Result<PathBuf> {
    let dir = dir_of(path).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no spool directory: neither XDG_STATE_HOME nor HOME is set",
        )
    })?;
    std::fs::create_dir_all(&dir)?;
    let spooled = Spooled {
        schema: SPOOL_SCHEMA.into(),
        store: store_name(path),
        command_line: meta.command_line.clone(),
        tags: meta.tags.iter().map(|t| format!("{}={}", t.key, t.value)).collect(),
        trials_planned: meta.trials_planned,
        partial_run_id,
        text_report: text_report.map(str::to_string),
        run: run.clone(),
    };
    let bytes = serde_json::to_vec(&spooled).map_err(std::io::Error::other)?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let name = format!(
        "run-{}-{:09}-{}.json",
        stamp.as_secs(),
        stamp.subsec_nanos(),
        std::process::id()
    );
    let hidden = dir.join(format!(".{name}.part"));
    std::fs::write(&hidden, bytes)?;
    let file = dir.join(name);
    std::fs::rename(&hidden, &file)?;
    Ok(file)
}

/// Reads a spool file meant for the store named `store`.
fn read(file: &Path, store: &str) -> Result<(Spooled, RunMeta), String> {
    let bytes = std::fs::read(file).map_err(|e| format!("cannot read it ({e})"))?;
    let spooled: Spooled =
        serde_json::from_slice(&bytes).map_err(|e| format!("it is not a spooled run of nicbench ({e})"))?;
    if spooled.schema != SPOOL_SCHEMA {
        return Err(format!("its schema is {:?}, not {SPOOL_SCHEMA:?}", spooled.schema));
    }
    if spooled.store != store {
        return Err(format!("it was spooled for {}, not this database", spooled.store));
    }
    if !spooled.run.is_object() {
        return Err("its run is not a JSON object".into());
    }
    let tags = spooled
        .tags
        .iter()
        .map(|t| t.parse::<Tag>())
        .collect::<Result<Vec<_>, _>>()?;
    super::tags::check_unique(&tags)?;
    let meta = RunMeta {
        command_line: spooled.command_line.clone(),
        tags,
        trials_planned: spooled.trials_planned,
        source: None,
    };
    Ok((spooled, meta))
}

impl Store {
    /// Saves the runs waiting in this store's spool, each in its own
    /// transaction with its digest, and removes each file once its run is
    /// stored (or found stored). A file that is not a spooled run, or
    /// whose run the store refuses, stays where it is and is named.
    /// Fails only when the store itself fails (the files stay).
    pub fn save_spooled(&self) -> Result<Drained, StoreError> {
        let store = store_name(&self.path);
        let mut drained = Drained::default();
        for file in waiting(&self.path) {
            let (spooled, meta) = match read(&file, &store) {
                Ok(read) => read,
                Err(why) => {
                    drained.bad.push((file, why));
                    continue;
                }
            };
            match self.save_one(&spooled, &meta) {
                Ok(Some(id)) => drained.saved.push(id),
                Ok(None) => drained.present += 1,
                Err(StoreError::Implausible { field, what, .. }) => {
                    drained
                        .bad
                        .push((file, format!("the store refuses its run: {field}: {what}")));
                    continue;
                }
                Err(e) => return Err(e),
            }
            // Stored: another process draining at once may have removed it.
            let _ = std::fs::remove_file(&file);
        }
        Ok(drained)
    }

    /// One spooled run in one transaction; None when the store holds it.
    fn save_one(&self, spooled: &Spooled, meta: &RunMeta) -> Result<Option<i64>, StoreError> {
        let document = spooled.run.to_string();
        let digest = super::copy::document_sha256(&document);
        let held = self
            .db
            .query_row(
                "SELECT run_id FROM copied_runs WHERE document_sha256 = ?1",
                params![&digest],
            )
            .map_err(|e| self.err(e))?;
        if held.is_some() {
            return Ok(None);
        }
        let columns = super::columns::of_document(&spooled.run);
        super::save::plausible(&self.path, &columns)?;
        let partial = match spooled.partial_run_id {
            Some(id) => self
                .unfinished_run_of(id, meta, &spooled.run)
                .map_err(|e| self.err(e))?,
            None => None,
        };
        let tx = self.db.transaction(false).map_err(|e| self.err(e))?;
        let id = write_final(
            &tx,
            partial,
            meta,
            &spooled.run,
            &columns,
            0,
            spooled.text_report.as_deref(),
        )
        .map_err(|e| self.err(e))?;
        let recorded = tx
            .execute(
                "INSERT INTO copied_runs (document_sha256, run_id) VALUES (?1, ?2) \
                 ON CONFLICT (document_sha256) DO NOTHING",
                params![&digest, id],
            )
            .map_err(|e| self.err(e))?;
        if recorded == 0 {
            // Another process stored it first: this transaction rolls back.
            return Ok(None);
        }
        tx.commit().map_err(|e| self.err(e))?;
        Ok(Some(id))
    }

    /// `id` when it is still the unfinished row of this run (same command
    /// line, no more trials than the spooled document holds), so the
    /// spooled document completes it. (The row's start is its first
    /// trial's, which need not be the final document's.)
    fn unfinished_run_of(&self, id: i64, meta: &RunMeta, run: &Value) -> Result<Option<i64>, super::db::DbError> {
        let row = self.db.query_row(
            "SELECT complete, command_line, trials_saved FROM runs WHERE id = ?1",
            params![id],
        )?;
        let Some(row) = row else { return Ok(None) };
        let (complete, command_line, saved): (bool, String, i64) = (row.get(0)?, row.get(1)?, row.get(2)?);
        let trials = run.get("trials").and_then(Value::as_array).map_or(0, Vec::len) as i64;
        Ok((!complete && command_line == meta.command_line && saved <= trials).then_some(id))
    }

    /// Drains the spool if it holds anything, saying what it did; a store
    /// failure leaves the files for the next command.
    pub(crate) fn drain_spool_and_say(&self) {
        if waiting(&self.path).is_empty() {
            return;
        }
        match self.save_spooled() {
            Ok(drained) => say(&self.path, &drained),
            Err(e) => log::warn!(
                "the runs waiting in the spool {} were not saved ({e}); they stay there for the next command",
                dir_of(&self.path).unwrap_or_default().display()
            ),
        }
    }
}

/// Before a command that only reads opens the store at `path`: the runs
/// waiting in its spool are saved first when this user may write it (as
/// an older schema is upgraded then), so the listing holds them; else it
/// says they wait.
pub fn save_before_reading(path: &Path) {
    let waiting = waiting(path);
    if waiting.is_empty() || !super::exists(path) {
        return;
    }
    if let Err(e) = Store::open(path) {
        log::warn!(
            "{} run(s) wait in the spool {} for {}, not saved now ({e}); a later command that may write it \
             saves them",
            waiting.len(),
            dir_of(path).unwrap_or_default().display(),
            path.display()
        );
    }
}

/// The lines a drain prints (at the default verbosity: the user learns
/// that runs measured earlier arrived, and of any file left behind).
fn say(path: &Path, drained: &Drained) {
    if !drained.saved.is_empty() || drained.present > 0 {
        let ids: Vec<String> = drained.saved.iter().map(i64::to_string).collect();
        log::warn!(
            "saved {} spooled run(s) in {} (kept in the spool when it could not be written): {}{}",
            drained.saved.len(),
            path.display(),
            if ids.is_empty() {
                "none new".into()
            } else {
                format!("run(s) {}", ids.join(", "))
            },
            match drained.present {
                0 => String::new(),
                n => format!("; {n} were there already"),
            }
        );
    }
    for (file, why) in &drained.bad {
        log::warn!(
            "spool file {} was not saved: {why}; it is left in place: read it, then remove it (its `run` is a \
             nicbench.run/1 document `nicbench import` takes)",
            file.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_is_named_by_its_absolute_path_or_its_url() {
        let here = std::env::current_dir().unwrap();
        assert_eq!(store_name(Path::new("./r.db")), here.join("r.db").display().to_string());
        assert_eq!(store_name(Path::new("r.db")), store_name(Path::new("./r.db")));
        assert_eq!(
            store_name(Path::new("postgres://team@db/archive")),
            "postgres://team@db/archive"
        );
        assert_ne!(dir_of(Path::new("a.db")), dir_of(Path::new("b.db")));
        assert_eq!(dir_of(Path::new(":memory:")), None);
    }
}
