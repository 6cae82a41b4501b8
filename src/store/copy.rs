//! Copying runs between stores: `nicbench db push URL` (a local SQLite
//! store's runs into a team's PostgreSQL archive) and `db pull` (the
//! reverse). A run is known by the SHA-256 of its document: each copied
//! run is recorded in the target's `copied_runs` with it, and a run
//! whose digest is there already is skipped, so a push twice copies
//! nothing the second time, and a push cut short (a lost connection, a
//! killed process) copies the rest when run again. Each run is one
//! transaction in the target: its row, tags, trials, digest and record
//! together or not at all; two pushers of the same run store it once.

use rusqlite::types::Value as Sql;
use sha2::{Digest, Sha256};

use super::db::{params, Db, DbError};
use super::query::{id_list, Filter};
use super::{Store, StoreError};

/// Runs read from the source at a time.
const CHUNK: usize = 200;

/// What a copy did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Copied {
    /// Runs the target did not hold, now copied.
    pub copied: u64,
    /// Runs the target held already (by their document's digest).
    pub present: u64,
}

/// The SHA-256 of a run's document as stored, in hex: the run's identity
/// across stores.
pub fn document_sha256(document: &str) -> String {
    Sha256::digest(document.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The columns of `runs` but `id`, in the table's order.
fn run_columns(db: &Db) -> Result<Vec<String>, DbError> {
    let sql = match db.backend() {
        super::db::Backend::Sqlite => "SELECT name FROM pragma_table_info('runs') ORDER BY cid",
        super::db::Backend::Postgres => {
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = 'runs' ORDER BY ordinal_position"
        }
    };
    db.query(sql, &[])?
        .iter()
        .map(|r| r.get::<String>(0))
        .filter(|c| !matches!(c.as_deref(), Ok("id")))
        .collect()
}

impl Store {
    /// Copies the runs matching `filter` into `target`, skipping those it
    /// holds; `progress(done, total)` after each run. Plan-run records
    /// come along (a plan resumes from the target too).
    pub fn copy_runs_into(
        &self,
        target: &Store,
        filter: &Filter,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Copied, StoreError> {
        let source_err = |e| self.err(e);
        let target_err = |e| target.err(e);
        let ids = self.run_ids(filter)?;
        let total = ids.len() as u64;
        let columns = run_columns(&self.db).map_err(source_err)?;
        let document_at = columns
            .iter()
            .position(|c| c == "document")
            .expect("runs has a document column");
        self.copy_plan_runs(target)?;
        let mut done = Copied::default();
        for chunk in ids.chunks(CHUNK) {
            let sql = format!(
                "SELECT id, {} FROM runs WHERE id IN ({}) ORDER BY id",
                columns.join(", "),
                id_list(chunk)
            );
            let rows = self.db.query(&sql, &[]).map_err(source_err)?;
            let tags = self.tags_of(chunk.iter().copied())?;
            let trials = self
                .db
                .query(
                    &format!(
                        "SELECT run_id, trial, saved_at_unix_seconds, headline_value, document FROM trials \
                         WHERE run_id IN ({}) ORDER BY run_id, trial",
                        id_list(chunk)
                    ),
                    &[],
                )
                .map_err(source_err)?;
            let digests: Vec<String> = rows
                .iter()
                .map(|r| match &r.0[1 + document_at] {
                    Sql::Text(t) => document_sha256(t),
                    other => document_sha256(&format!("{other:?}")),
                })
                .collect();
            let present = present_in(&target.db, &digests).map_err(target_err)?;
            for (row, digest) in rows.iter().zip(&digests) {
                let id: i64 = row.get(0).map_err(source_err)?;
                let copied = !present.contains(digest)
                    && copy_one(
                        &target.db,
                        &columns,
                        &row.0[1..],
                        digest,
                        &tags,
                        &trials,
                        id,
                        document_at,
                    )
                    .map_err(target_err)?;
                match copied {
                    true => done.copied += 1,
                    false => done.present += 1,
                }
                progress(done.copied + done.present, total);
            }
        }
        Ok(done)
    }

    /// The plan-run records `target` lacks.
    fn copy_plan_runs(&self, target: &Store) -> Result<(), StoreError> {
        let rows = self
            .db
            .query(
                "SELECT plan_run, plan, started_at_unix_seconds, seed, fingerprint, identity FROM plan_runs",
                &[],
            )
            .map_err(|e| self.err(e))?;
        for row in rows {
            target
                .db
                .execute(
                    "INSERT INTO plan_runs (plan_run, plan, started_at_unix_seconds, seed, fingerprint, identity) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (plan_run) DO NOTHING",
                    &row.0,
                )
                .map_err(|e| target.err(e))?;
        }
        Ok(())
    }
}

/// Which of `digests` the target holds.
fn present_in(db: &Db, digests: &[String]) -> Result<std::collections::HashSet<String>, DbError> {
    if digests.is_empty() {
        return Ok(Default::default());
    }
    let marks: Vec<String> = (1..=digests.len()).map(|i| format!("?{i}")).collect();
    let values: Vec<Sql> = digests.iter().map(|d| Sql::Text(d.clone())).collect();
    db.query(
        &format!(
            "SELECT document_sha256 FROM copied_runs WHERE document_sha256 IN ({})",
            marks.join(", ")
        ),
        &values,
    )?
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// One run into the target in one transaction; false when another writer
/// stored the same run first (its record's key is taken).
#[allow(clippy::too_many_arguments)]
fn copy_one(
    db: &Db,
    columns: &[String],
    values: &[Sql],
    digest: &str,
    tags: &std::collections::BTreeMap<i64, Vec<super::Tag>>,
    trials: &[super::db::Row],
    source_id: i64,
    document_at: usize,
) -> Result<bool, DbError> {
    let tx = db.transaction(false)?;
    let marks: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
    let id: i64 = tx
        .query_row(
            &format!(
                "INSERT INTO runs ({}) VALUES ({}) RETURNING id",
                columns.join(", "),
                marks.join(", ")
            ),
            values,
        )?
        .ok_or_else(|| DbError::Decode {
            column: 0,
            detail: "INSERT ... RETURNING id gave no row".into(),
        })?
        .get(0)?;
    let recorded = tx.execute(
        "INSERT INTO copied_runs (document_sha256, run_id) VALUES (?1, ?2) ON CONFLICT (document_sha256) DO NOTHING",
        params![digest, id],
    )?;
    if recorded == 0 {
        return Ok(false);
    }
    for tag in tags.get(&source_id).into_iter().flatten() {
        tx.execute(
            "INSERT INTO tags (run_id, key, value) VALUES (?1, ?2, ?3)",
            params![id, &tag.key, &tag.value],
        )?;
    }
    for trial in trials.iter().filter(|t| t.0[0] == Sql::Integer(source_id)) {
        tx.execute(
            "INSERT INTO trials (run_id, trial, saved_at_unix_seconds, headline_value, document) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
            &[
                Sql::Integer(id),
                trial.value(1),
                trial.value(2),
                trial.value(3),
                trial.value(4),
            ],
        )?;
    }
    if let Sql::Text(document) = &values[document_at] {
        if let Ok(doc) = serde_json::from_str::<serde_json::Value>(document) {
            super::digest::save(&tx, id, &doc)?;
        }
    }
    tx.commit()?;
    Ok(true)
}
