//! Writing a run: the run row opens with its first trial, each trial is
//! committed in its own transaction the moment it ends (so `kill -9` loses
//! at most the trial in flight), and the final document marks it complete.

use rusqlite::types::Value as Sql;

use super::db::{params, Db, DbError, Tx};
use serde_json::Value;

use super::columns::{self, Columns};
use super::{now_unix_seconds, Store, StoreError, Tag};
use crate::model::RunResult;

/// What is saved with a run besides its document.
#[derive(Debug, Clone, Default)]
pub struct RunMeta {
    /// The command line as typed (or the demo's generated one).
    pub command_line: String,
    pub tags: Vec<Tag>,
    /// Trials the repetition policy asks for at most (None: unknown).
    pub trials_planned: Option<u32>,
    /// Where an imported run came from (`iperf3`, `netpipe`,
    /// `nicbench-json`) and its file; None for a run measured here.
    pub source: Option<(String, String)>,
}

/// Saves one run, trial by trial.
pub struct RunWriter {
    store: Store,
    meta: RunMeta,
    id: Option<i64>,
    trials: Vec<Value>,
}

impl RunWriter {
    pub fn new(store: Store, meta: RunMeta) -> RunWriter {
        RunWriter {
            store,
            meta,
            id: None,
            trials: Vec::new(),
        }
    }

    /// The run's id, once its row exists.
    pub fn id(&self) -> Option<i64> {
        self.id
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// What the run is saved with besides its document.
    pub fn meta(&self) -> &RunMeta {
        &self.meta
    }

    pub fn into_store(self) -> Store {
        self.store
    }

    /// Saves the trial just finished (`run.result`, with the run's header).
    pub fn trial(&mut self, run: &RunResult) -> Result<i64, StoreError> {
        let doc = serde_json::to_value(run).map_err(|e| self.encoding(e))?;
        self.trial_document(doc)
    }

    /// [`RunWriter::trial`] on a serialized document.
    pub fn trial_document(&mut self, mut doc: Value) -> Result<i64, StoreError> {
        let trial = serde_json::to_value(TrialOnly(&doc)).map_err(|e| self.encoding(e))?;
        self.trials.push(trial);
        doc["trials"] = Value::Array(self.trials.clone());
        let number = self.trials.len() as i64;
        let store = &mut self.store;
        let path = store.path.clone();
        let fail = |e| StoreError::from_db(&path, e);
        let tx = store.db.transaction(false).map_err(fail)?;
        let columns = columns::of_document(&doc);
        plausible(&path, &columns)?;
        let id = upsert_run(&tx, self.id, &self.meta, &doc, &columns, false).map_err(fail)?;
        super::digest::save(&tx, id, &doc).map_err(fail)?;
        let trial = self.trials.last().expect("pushed above");
        insert_trial(&tx, id, &columns.workload, number, trial).map_err(fail)?;
        tx.execute("UPDATE runs SET trials_saved = ?1 WHERE id = ?2", params![number, id])
            .map_err(fail)?;
        tx.commit().map_err(fail)?;
        self.id = Some(id);
        Ok(id)
    }

    /// Saves the final document (with the repetition summary) and the text
    /// report as printed, and marks the run complete.
    pub fn finish(&mut self, run: &RunResult, text_report: Option<&str>) -> Result<i64, StoreError> {
        let doc = serde_json::to_value(run).map_err(|e| self.encoding(e))?;
        self.finish_document(&doc, text_report)
    }

    /// [`RunWriter::finish`] on a serialized document.
    pub fn finish_document(&mut self, doc: &Value, text_report: Option<&str>) -> Result<i64, StoreError> {
        self.finish_with_columns(doc, &columns::of_document(doc), text_report)
    }

    /// Saves a document whose columns the caller read (an imported run of
    /// another tool, whose document is not `nicbench.run/1`).
    pub fn finish_with_columns(
        &mut self,
        doc: &Value,
        columns: &Columns,
        text_report: Option<&str>,
    ) -> Result<i64, StoreError> {
        let path = self.store.path.clone();
        plausible(&path, columns)?;
        let fail = |e| StoreError::from_db(&path, e);
        let tx = self.store.db.transaction(false).map_err(fail)?;
        let id = write_final(&tx, self.id, &self.meta, doc, columns, self.trials.len(), text_report).map_err(fail)?;
        tx.commit().map_err(fail)?;
        self.id = Some(id);
        Ok(id)
    }

    fn encoding(&self, e: serde_json::Error) -> StoreError {
        StoreError::Other {
            path: self.store.path.clone(),
            detail: format!("cannot encode the result as JSON: {e}"),
        }
    }
}

/// Runs saved together, in one transaction: all of them or none
/// (`nicbench import FILE...`). Dropped without [`Batch::commit`], nothing
/// it saved stays.
///
/// The rows are written many to a statement ([`BATCH_RUNS`] runs at a
/// time, and at the commit), each run under an id reserved beforehand:
/// row by row, a run took nine round trips to a PostgreSQL server (62
/// runs/s), which made loading an archive of a million runs a matter of
/// hours. The rows are those a single save writes.
pub struct Batch<'s> {
    tx: Tx<'s>,
    path: std::path::PathBuf,
    ids: Vec<i64>,
    /// Ids reserved for the runs still to be saved, in order.
    reserved: std::collections::VecDeque<i64>,
    pending: Pending,
}

/// How many runs a batch holds before it writes them.
pub const BATCH_RUNS: usize = 500;

/// The rows of the runs a batch has not written yet.
#[derive(Default)]
struct Pending {
    /// The columns of `runs` each run row gives, in order.
    run_columns: Vec<&'static str>,
    runs: Vec<Vec<Sql>>,
    tags: Vec<Vec<Sql>>,
    digests: Vec<Vec<Sql>>,
    trials: Vec<Vec<Sql>>,
}

/// The most parameters one statement carries (SQLite allows 32,766,
/// PostgreSQL 65,535).
const MAX_PARAMETERS: usize = 30_000;

/// Inserts `rows` (each a value per column of `columns`) into `table`,
/// as many rows to a statement as [`MAX_PARAMETERS`] allows.
fn insert_rows(tx: &Db, table: &str, columns: &[&str], rows: &[Vec<Sql>]) -> Result<(), DbError> {
    let per_statement = (MAX_PARAMETERS / columns.len().max(1)).max(1);
    for chunk in rows.chunks(per_statement) {
        let mut marks = Vec::with_capacity(chunk.len());
        let mut values = Vec::with_capacity(chunk.len() * columns.len());
        for row in chunk {
            debug_assert_eq!(row.len(), columns.len());
            let first = values.len();
            values.extend(row.iter().cloned());
            let row_marks: Vec<String> = (first + 1..=values.len()).map(|i| format!("?{i}")).collect();
            marks.push(format!("({})", row_marks.join(", ")));
        }
        tx.execute(
            &format!(
                "INSERT INTO {table} ({}) VALUES {}",
                columns.join(", "),
                marks.join(", ")
            ),
            &values,
        )?;
    }
    Ok(())
}

impl Store {
    /// Starts a batch of runs saved in one transaction.
    pub fn batch(&mut self) -> Result<Batch<'_>, StoreError> {
        let path = self.path.clone();
        // SQLite's write lock from the start: the batch's ids follow the
        // largest one, which no other writer may take meanwhile.
        let tx = self.db.transaction(true).map_err(|e| StoreError::from_db(&path, e))?;
        Ok(Batch {
            tx,
            path,
            ids: Vec::new(),
            reserved: Default::default(),
            pending: Pending::default(),
        })
    }
}

impl Batch<'_> {
    /// Saves a whole run (its document, columns and trials); it stays only
    /// if the batch is committed. Returns its id.
    pub fn save(&mut self, meta: &RunMeta, doc: &Value, columns: &Columns) -> Result<i64, StoreError> {
        plausible(&self.path, columns)?;
        let path = self.path.clone();
        let fail = |e| StoreError::from_db(&path, e);
        let id = match self.reserved.pop_front() {
            Some(id) => id,
            None => {
                self.reserve().map_err(fail)?;
                self.reserved.pop_front().expect("ids reserved above")
            }
        };
        let cut_short = doc.get("interrupted") == Some(&Value::Bool(true))
            || doc.pointer("/repetition/interrupted") == Some(&Value::Bool(true));
        let (mut names, mut values) = new_run_row(meta, doc, columns, !cut_short);
        let trials = doc.get("trials").and_then(Value::as_array);
        names.extend(["trials_saved", "id"]);
        values.extend([Sql::Integer(trials.map_or(0, Vec::len) as i64), Sql::Integer(id)]);
        let pending = &mut self.pending;
        if pending.runs.is_empty() {
            pending.run_columns = names;
        } else {
            debug_assert_eq!(pending.run_columns, names, "every run row has the same columns");
        }
        pending.runs.push(values);
        for tag in &meta.tags {
            pending.tags.push(params![id, &tag.key, &tag.value].to_vec());
        }
        pending
            .digests
            .push(vec![Sql::Integer(id), Sql::Text(super::digest::of(doc))]);
        for (i, trial) in trials.into_iter().flatten().enumerate() {
            pending
                .trials
                .push(trial_row(id, &columns.workload, i as i64 + 1, trial));
        }
        self.ids.push(id);
        if self.pending.runs.len() >= BATCH_RUNS {
            self.write().map_err(fail)?;
        }
        Ok(id)
    }

    /// Reserves the ids of the next [`BATCH_RUNS`] runs: PostgreSQL's from
    /// the `runs` id sequence (other writers take theirs alongside), SQLite's
    /// after the largest (the batch holds the write lock).
    fn reserve(&mut self) -> Result<(), DbError> {
        let mut ids: Vec<i64> = match self.tx.backend() {
            super::db::Backend::Postgres => self
                .tx
                .query(
                    &format!(
                        "SELECT nextval(pg_get_serial_sequence('runs', 'id')) FROM generate_series(1, {BATCH_RUNS})"
                    ),
                    &[],
                )?
                .iter()
                .map(|r| r.get(0))
                .collect::<Result<_, _>>()?,
            super::db::Backend::Sqlite => {
                let after: i64 = match self.ids.last() {
                    Some(last) => *last,
                    None => self
                        .tx
                        .query_row("SELECT coalesce(max(id), 0) FROM runs", &[])?
                        .map_or(Ok(0), |r| r.get(0))?,
                };
                (after + 1..=after + BATCH_RUNS as i64).collect()
            }
        };
        ids.sort_unstable();
        self.reserved.extend(ids);
        Ok(())
    }

    /// Writes the pending rows: the runs first (the others refer to them).
    fn write(&mut self) -> Result<(), DbError> {
        let pending = std::mem::take(&mut self.pending);
        insert_rows(&self.tx, "runs", &pending.run_columns, &pending.runs)?;
        insert_rows(&self.tx, "tags", &["run_id", "key", "value"], &pending.tags)?;
        insert_rows(&self.tx, "digests", &["run_id", "digest"], &pending.digests)?;
        insert_rows(&self.tx, "trials", &TRIAL_COLUMNS, &pending.trials)?;
        Ok(())
    }

    /// Commits every run saved; returns their ids in the order saved.
    pub fn commit(mut self) -> Result<Vec<i64>, StoreError> {
        let path = self.path.clone();
        self.write().map_err(|e| StoreError::from_db(&path, e))?;
        self.tx.commit().map_err(|e| StoreError::from_db(&path, e))?;
        Ok(self.ids)
    }
}

/// Every figure the store keeps as a column within the physical bounds
/// imports are held to (`import::checks`): whatever measured it, a run
/// with a rate over 1 Pbit/s or a negative CPU is not saved, so no
/// report or chart ever meets one.
pub(super) fn plausible(path: &std::path::Path, columns: &Columns) -> Result<(), StoreError> {
    super::import::checks::columns(columns, &|column| format!("its {column}"), [None, None]).map_err(|bad| {
        StoreError::Implausible {
            path: path.to_path_buf(),
            field: bad.field,
            what: bad.what,
        }
    })
}

/// Writes a run's final document: its row (new, or `id`'s), the trials
/// past the `saved` already written, the text report; marks it complete
/// unless it was cut short.
pub(super) fn write_final(
    tx: &Db,
    id: Option<i64>,
    meta: &RunMeta,
    doc: &Value,
    columns: &Columns,
    saved: usize,
    text_report: Option<&str>,
) -> Result<i64, DbError> {
    // A run cut short (Ctrl-C, SIGTERM) keeps what it measured but is
    // not a complete run: compare leaves it out, runs says INCOMPLETE.
    let cut_short = doc.get("interrupted") == Some(&Value::Bool(true))
        || doc.pointer("/repetition/interrupted") == Some(&Value::Bool(true));
    let id = upsert_run(tx, id, meta, doc, columns, !cut_short)?;
    super::digest::save(tx, id, doc)?;
    let trials = doc.get("trials").and_then(Value::as_array);
    let count = trials.map_or(0, Vec::len);
    for (i, trial) in trials.into_iter().flatten().enumerate().skip(saved) {
        insert_trial(tx, id, &columns.workload, i as i64 + 1, trial)?;
    }
    tx.execute(
        "UPDATE runs SET text_report = ?1, \
         trials_saved = CASE WHEN trials_saved > ?2 THEN trials_saved ELSE ?2 END WHERE id = ?3",
        params![text_report, count as i64, id],
    )?;
    Ok(id)
}

/// A trial's own fields of a run document: everything but the header.
struct TrialOnly<'a>(&'a Value);

impl serde::Serialize for TrialOnly<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        const HEADER: &[&str] = &[
            "schema",
            "workload",
            "started_at_unix_seconds",
            "client",
            "agent",
            "spec",
            "trials",
            "repetition",
        ];
        let mut map = serde_json::Map::new();
        if let Some(fields) = self.0.as_object() {
            for (k, v) in fields.iter().filter(|(k, _)| !HEADER.contains(&k.as_str())) {
                map.insert(k.clone(), v.clone());
            }
        }
        map.serialize(s)
    }
}

/// The columns of `runs` a document fills, with their values: every one
/// of [`columns::DOCUMENT_COLUMNS`] but the version (which only a new row
/// takes), then the headline and the CPU split.
fn column_values(c: &Columns) -> (Vec<&'static str>, Vec<Sql>) {
    let names: Vec<&'static str> = columns::DOCUMENT_COLUMNS
        .iter()
        .filter(|n| **n != "nicbench_version")
        .chain(&columns::HEADLINE_COLUMNS)
        .chain(&columns::CPU_PART_COLUMNS)
        .copied()
        .collect();
    let values = names
        .iter()
        .map(|n| c.value(n).expect("a column of the document"))
        .collect();
    (names, values)
}

/// Inserts the run row (with its tags) or updates its columns and document.
fn upsert_run(
    tx: &Db,
    id: Option<i64>,
    meta: &RunMeta,
    doc: &Value,
    c: &Columns,
    complete: bool,
) -> Result<i64, DbError> {
    if let Some(id) = id {
        let (mut names, mut values) = column_values(c);
        values.push(Sql::Text(doc.to_string()));
        values.push(Sql::Integer(complete as i64));
        names.extend(["document", "complete"]);
        let set: Vec<String> = names
            .iter()
            .enumerate()
            .map(|(i, n)| format!("{n} = ?{}", i + 1))
            .collect();
        let sql = format!("UPDATE runs SET {} WHERE id = {id}", set.join(", "));
        tx.execute(&sql, &values)?;
        return Ok(id);
    }
    let (names, values) = new_run_row(meta, doc, c, complete);
    let marks: Vec<String> = (1..=names.len()).map(|i| format!("?{i}")).collect();
    let sql = format!(
        "INSERT INTO runs ({}) VALUES ({}) RETURNING id",
        names.join(", "),
        marks.join(", ")
    );
    let id: i64 = tx
        .query_row(&sql, &values)?
        .ok_or_else(|| DbError::Decode {
            column: 0,
            detail: "INSERT ... RETURNING id gave no row".into(),
        })?
        .get(0)?;
    for tag in &meta.tags {
        tx.execute(
            "INSERT INTO tags (run_id, key, value) VALUES (?1, ?2, ?3)",
            params![id, &tag.key, &tag.value],
        )?;
    }
    Ok(id)
}

/// Saves trial `number` of a run of `workload` (the trial's document has
/// no header: its workload is the run's).
/// The columns of a row of `trials`, as [`trial_row`] gives them.
const TRIAL_COLUMNS: [&str; 5] = ["run_id", "trial", "saved_at_unix_seconds", "headline_value", "document"];

/// Trial `number` of run `run_id`: a row of `trials`.
fn trial_row(run_id: i64, workload: &str, number: i64, trial: &Value) -> Vec<Sql> {
    let headline = columns::trial_headline(workload, trial).map(|h| h.value);
    params![run_id, number, now_unix_seconds(), headline, trial.to_string()].to_vec()
}

fn insert_trial(tx: &Db, run_id: i64, workload: &str, number: i64, trial: &Value) -> Result<(), DbError> {
    tx.execute(
        "INSERT INTO trials (run_id, trial, saved_at_unix_seconds, headline_value, document) \
         VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (run_id, trial) DO UPDATE SET \
         saved_at_unix_seconds = excluded.saved_at_unix_seconds, headline_value = excluded.headline_value, \
         document = excluded.document",
        &trial_row(run_id, workload, number, trial),
    )?;
    Ok(())
}

/// The columns and values of a new run's row of `runs`, but its id,
/// `text_report` and `trials_saved`.
fn new_run_row(meta: &RunMeta, doc: &Value, c: &Columns, complete: bool) -> (Vec<&'static str>, Vec<Sql>) {
    let (mut names, mut values) = column_values(c);
    values.push(Sql::Text(doc.to_string()));
    values.push(Sql::Integer(complete as i64));
    names.extend(["document", "complete"]);
    names.extend([
        "saved_at_unix_seconds",
        "command_line",
        "nicbench_version",
        "trials_planned",
        "source",
        "source_file",
    ]);
    values.push(Sql::Real(now_unix_seconds()));
    values.push(Sql::Text(meta.command_line.clone()));
    values.push(Sql::Text(
        c.nicbench_version
            .clone()
            .unwrap_or_else(|| env!("CARGO_PKG_VERSION").into()),
    ));
    values.push(meta.trials_planned.map(|n| Sql::Integer(n.into())).unwrap_or(Sql::Null));
    let (source, file) = meta
        .source
        .clone()
        .unwrap_or_else(|| ("nicbench".into(), String::new()));
    values.push(Sql::Text(source));
    values.push(if file.is_empty() { Sql::Null } else { Sql::Text(file) });
    (names, values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imported(i: i64) -> (Value, Columns) {
        let columns = Columns {
            workload: "tcp".into(),
            started_at_unix_seconds: 1.7e9,
            receiver_bits_per_second: Some(1e9 * i as f64),
            ..Columns::default()
        };
        (serde_json::json!({"format": "test", "i": i}), columns)
    }

    /// Every row of `table` that belongs to run `id`, but the columns that
    /// differ between two saves of one run (its id, when it was saved).
    fn rows_of(store: &Store, table: &str, key: &str, id: i64) -> Vec<Vec<Sql>> {
        let rows = store
            .db
            .query(
                &format!("SELECT * FROM {table} WHERE {key} = ?1 ORDER BY 1, 2"),
                params![id],
            )
            .unwrap();
        let names: Vec<String> = match store.backend() {
            // Column names, in the order `SELECT *` gives them.
            super::super::db::Backend::Sqlite => store
                .db
                .query(
                    &format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid"),
                    &[],
                )
                .unwrap()
                .iter()
                .map(|r| r.get(0).unwrap())
                .collect(),
            super::super::db::Backend::Postgres => store
                .db
                .query(
                    "SELECT column_name::text FROM information_schema.columns \
                     WHERE table_schema = current_schema() AND table_name = ?1 ORDER BY ordinal_position",
                    params![table],
                )
                .unwrap()
                .iter()
                .map(|r| r.get(0).unwrap())
                .collect(),
        };
        assert_eq!(
            names.len(),
            rows.first().map_or(names.len(), |r| r.0.len()),
            "{names:?}"
        );
        rows.into_iter()
            .map(|row| {
                row.0
                    .into_iter()
                    .zip(&names)
                    .filter(|(_, n)| !matches!(n.as_str(), "id" | "run_id" | "saved_at_unix_seconds"))
                    .map(|(v, _)| v)
                    .collect()
            })
            .collect()
    }

    crate::store::testing::store_test!(
    /// A batch writes many runs to a statement (past [`BATCH_RUNS`] it
    /// writes before the commit): each run's rows are those a run saved
    /// alone gets, in `runs`, `tags`, `digests` and `trials`.
    fn a_batch_writes_the_rows_a_single_save_writes(store) {
        let doc = serde_json::json!({"schema": "nicbench.run/1", "workload": "tcp",
            "started_at_unix_seconds": 1.7e9,
            "client": {"address": "127.0.0.1:1", "facts": {"hostname": "a"}},
            "agent": {"address": "127.0.0.1:5201", "facts": {"hostname": "b"}},
            "spec": {"streams": 2}, "trial": 2,
            "sum": {"receiver": {"bits_per_second": 2e9}},
            "trials": [{"trial": 1, "sum": {"receiver": {"bits_per_second": 1e9}}},
                       {"trial": 2, "sum": {"receiver": {"bits_per_second": 2e9}}}]});
        let meta = RunMeta {
            command_line: "nicbench tcp b --repeat 2".into(),
            tags: vec!["nic=igb".parse().unwrap(), "mtu=9000".parse().unwrap()],
            trials_planned: Some(2),
            source: None,
        };
        let mut writer = RunWriter::new(store, meta.clone());
        let alone = writer.finish_document(&doc, None).unwrap();
        let mut store = writer.into_store();
        let mut batch = store.batch().unwrap();
        let count = BATCH_RUNS + 2;
        let columns = columns::of_document(&doc);
        let saved: Vec<i64> = (0..count).map(|_| batch.save(&meta, &doc, &columns).unwrap()).collect();
        assert_eq!(batch.commit().unwrap(), saved);
        let mut sorted = saved.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), count, "an id given twice");
        assert!(saved[0] > alone);
        assert_eq!(store.run_ids(&Default::default()).unwrap().len(), count + 1);
        for (table, key) in [("runs", "id"), ("tags", "run_id"), ("digests", "run_id"), ("trials", "run_id")] {
            let expected = rows_of(&store, table, key, alone);
            assert!(!expected.is_empty(), "{table}");
            for id in [saved[0], saved[BATCH_RUNS], saved[count - 1]] {
                assert_eq!(rows_of(&store, table, key, id), expected, "{table} of run {id}");
            }
        }
        // A run saved after the batch takes the next id.
        let mut writer = RunWriter::new(store, meta);
        let after = writer.finish_document(&doc, None).unwrap();
        assert!(after > *saved.iter().max().unwrap());
    });

    crate::store::testing::store_test!(
    fn a_batch_saves_all_its_runs_on_commit_and_none_without_it(mut store) {
        let meta = RunMeta::default();
        {
            let mut batch = store.batch().unwrap();
            for i in 1..=2 {
                let (doc, columns) = imported(i);
                batch.save(&meta, &doc, &columns).unwrap();
            }
            // Dropped: a later file failed.
        }
        assert!(store.run_ids(&Default::default()).unwrap().is_empty());
        let mut batch = store.batch().unwrap();
        for i in 1..=3 {
            let (doc, columns) = imported(i);
            batch.save(&meta, &doc, &columns).unwrap();
        }
        let ids = batch.commit().unwrap();
        assert_eq!(ids.len(), 3);
        assert_eq!(store.run_ids(&Default::default()).unwrap().len(), 3);
    });
}
