//! `nicbench db backup FILE`: a consistent copy of the database, taken with
//! SQLite's online backup API while other processes may be saving into it.
//! The copy is one self-contained file (rollback journal, no `-wal`) written
//! under a temporary name beside FILE and linked into place at the end, so
//! a failed backup never leaves a half copy under FILE, and an existing
//! FILE is never overwritten.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rusqlite::backup::{Backup, StepResult};
use rusqlite::Connection;

use super::{Store, StoreError, BUSY_TIMEOUT};

/// What a backup wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Copied {
    /// Runs in the copy.
    pub runs: i64,
    /// Size of the copy.
    pub bytes: u64,
}

impl Store {
    /// Copies the whole database to `dest`, which must not exist.
    pub fn backup_to(&self, dest: &Path) -> Result<Copied, StoreError> {
        let fail = |detail: String| StoreError::Backup {
            path: dest.to_path_buf(),
            detail,
        };
        if dest.symlink_metadata().is_ok() {
            return Err(fail("it exists already: remove it, or name a new file".into()));
        }
        let name = dest
            .file_name()
            .ok_or_else(|| fail("not a file name".into()))?
            .to_string_lossy()
            .into_owned();
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let partial = dir.join(format!(".{name}.partial-{}", std::process::id()));
        let copied = self.copy_into(&partial).and_then(|runs| {
            // link(2) refuses an existing name: a FILE made meanwhile stays.
            std::fs::hard_link(&partial, dest).map_err(|e| format!("cannot create it: {e}"))?;
            let bytes = std::fs::metadata(dest).map(|m| m.len()).unwrap_or(0);
            Ok(Copied { runs, bytes })
        });
        for leftover in [partial.clone(), journal_of(&partial)] {
            let _ = std::fs::remove_file(leftover);
        }
        copied.map_err(fail)
    }

    /// The online backup into a new database at `to`; returns its runs.
    fn copy_into(&self, to: &Path) -> Result<i64, String> {
        let Some(source) = self.db.sqlite() else {
            return Err("a PostgreSQL archive is backed up with its server's tools (pg_dump)".into());
        };
        let mut copy = Connection::open(to).map_err(|e| format!("cannot create {}: {e}", to.display()))?;
        {
            let backup = Backup::new(source, &mut copy).map_err(|e| e.to_string())?;
            // All pages in one step: one read transaction of the source, so
            // the copy is one consistent state; in WAL mode writers go on.
            let deadline = Instant::now() + BUSY_TIMEOUT;
            loop {
                match backup.step(-1).map_err(|e| e.to_string())? {
                    StepResult::Done => break,
                    _ if Instant::now() >= deadline => {
                        return Err(format!(
                            "the database stayed locked for more than {} s: try again",
                            BUSY_TIMEOUT.as_secs()
                        ))
                    }
                    _ => std::thread::sleep(std::time::Duration::from_millis(20)),
                }
            }
        }
        // One file that needs nothing beside it, readable from read-only media.
        copy.pragma_update(None, "journal_mode", "DELETE")
            .map_err(|e| e.to_string())?;
        let runs = copy
            .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
            .map_err(|e| e.to_string())?;
        copy.close().map_err(|(_, e)| e.to_string())?;
        Ok(runs)
    }
}

fn journal_of(path: &Path) -> PathBuf {
    let mut journal = path.as_os_str().to_owned();
    journal.push("-journal");
    PathBuf::from(journal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{RunMeta, RunWriter};

    fn store_with_runs(path: &Path, runs: usize) -> Store {
        let mut store = Store::open(path).unwrap();
        for i in 0..runs {
            let doc = serde_json::json!({"format": "test", "i": i});
            let columns = crate::store::columns::Columns {
                workload: "tcp".into(),
                started_at_unix_seconds: 1.7e9,
                receiver_bits_per_second: Some(1e9),
                ..Default::default()
            };
            let mut writer = RunWriter::new(store, RunMeta::default());
            writer.finish_with_columns(&doc, &columns, None).unwrap();
            store = writer.into_store();
        }
        store
    }

    // SQLite only: SQLite's online backup of a file; an archive is backed up with pg_dump, and `db backup` says so.
    #[test]
    fn a_backup_holds_every_run_in_one_file_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_runs(&dir.path().join("r.db"), 3);
        let dest = dir.path().join("copy.db");
        let copied = store.backup_to(&dest).unwrap();
        assert_eq!(copied.runs, 3);
        assert!(copied.bytes > 0);
        let mut wal = dest.as_os_str().to_owned();
        wal.push("-wal");
        assert!(!Path::new(&wal).exists());
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.contains("partial")), "{names:?}");
        let copy = Store::open_read_only(&dest).unwrap();
        assert_eq!(copy.run_ids(&Default::default()).unwrap().len(), 3);
        drop(copy);
        let again = store.backup_to(&dest).unwrap_err().to_string();
        assert!(again.contains("exists already"), "{again}");
    }
}
