//! Reading the store: runs matching filters, one run, tags, removal.

use std::collections::BTreeMap;

use rusqlite::types::Value as Sql;

use super::db::{params, DbError, Row};

use super::{Store, StoreError, Tag};

/// Which runs a listing, comparison, export or removal covers.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Every tag must match.
    pub tags: Vec<Tag>,
    pub workload: Option<String>,
    /// Matches the client's or the agent's host name, or the agent address.
    pub host: Option<String>,
    /// Only runs started at or after this time.
    pub since_unix_seconds: Option<f64>,
    /// Only complete runs (every planned trial saved and the final document).
    pub complete_only: bool,
    pub limit: Option<u64>,
}

/// How many runs of a tag [`Store::clause`] counts, at most, to find the
/// tag with the fewest runs.
const TAG_COUNT_CAP: i64 = 20_000;

impl Filter {
    /// The WHERE clause and its parameters. The runs of the first tag
    /// come from the tag index (key, value, run_id) alone, each checked
    /// there for the other tags by its own tags' key (run_id, key), so that
    /// only the runs of every tag are read. (A check of every run's tags
    /// walked every run of the store, 1-2 s a call at 1M runs; the runs of
    /// every tag from the index built a list of each, 250,000 runs for
    /// `mtu=9000`.) [`Store::clause`] puts the tag with the fewest runs first.
    fn clause(&self) -> (String, Vec<Sql>) {
        let mut conditions = vec!["1 = 1".to_string()];
        let mut values = Vec::new();
        let mut tag_conditions = Vec::new();
        for (i, tag) in self.tags.iter().enumerate() {
            values.push(Sql::Text(tag.key.clone()));
            values.push(Sql::Text(tag.value.clone()));
            let (k, v) = (values.len() - 1, values.len());
            tag_conditions.push(match i {
                0 => format!("t.key = ?{k} AND t.value = ?{v}"),
                _ => format!(
                    "EXISTS (SELECT 1 FROM tags u WHERE u.run_id = t.run_id AND u.key = ?{k} AND u.value = ?{v})"
                ),
            });
        }
        if !tag_conditions.is_empty() {
            conditions.push(format!(
                "id IN (SELECT t.run_id FROM tags t WHERE {})",
                tag_conditions.join(" AND ")
            ));
        }
        if let Some(w) = &self.workload {
            values.push(Sql::Text(w.clone()));
            conditions.push(format!("workload = ?{}", values.len()));
        }
        if let Some(h) = &self.host {
            values.push(Sql::Text(h.clone()));
            let n = values.len();
            conditions.push(format!(
                "(client_host = ?{n} OR agent_host = ?{n} OR agent_address = ?{n} OR agent_address LIKE ?{n} || ':%' \
                 OR agent_address LIKE '[' || ?{n} || ']:%')"
            ));
        }
        if let Some(since) = self.since_unix_seconds {
            values.push(Sql::Real(since));
            conditions.push(format!("started_at_unix_seconds >= ?{}", values.len()));
        }
        if self.complete_only {
            conditions.push("complete = 1".into());
        }
        (conditions.join(" AND "), values)
    }
}

/// One line of `nicbench runs`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    pub id: i64,
    pub started_at_unix_seconds: f64,
    pub workload: String,
    pub client_host: Option<String>,
    pub agent_host: Option<String>,
    pub agent_address: Option<String>,
    pub headline_unit: Option<String>,
    pub headline_value: Option<f64>,
    pub verdict_kind: Option<String>,
    pub trials_planned: Option<i64>,
    pub trials_saved: i64,
    pub complete: bool,
    /// `nicbench` for a run measured here, else the tool it was imported from.
    pub source: String,
    pub tags: Vec<Tag>,
    /// The figures listed in place of the headline, when the workload
    /// lists its own ([`crate::workload::Figures::listed_figures`]: a
    /// watch's transmitted and received rates, never their sum).
    pub listed: Vec<ListedFigure>,
}

/// One figure of a run as `runs` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedFigure {
    /// Its short name (`transmitted`).
    pub name: &'static str,
    pub unit: &'static str,
    pub value: f64,
}

/// What [`Store::document_parts`] read of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentParts {
    pub id: i64,
    pub command_line: String,
    pub values: Vec<Sql>,
}

impl DocumentParts {
    /// The number at path `i`.
    pub fn number(&self, i: usize) -> Option<f64> {
        match self.values.get(i)? {
            Sql::Real(r) => Some(*r),
            Sql::Integer(n) => Some(*n as f64),
            _ => None,
        }
    }

    /// The text at path `i` (a string, or an object's JSON).
    pub fn text(&self, i: usize) -> Option<&str> {
        match self.values.get(i)? {
            Sql::Text(t) => Some(t),
            _ => None,
        }
    }
}

/// The `n` values of a JSON array as json_extract gives one value: a
/// string as text, a number as a number, true and false as 1 and 0, an
/// object or array as its JSON text, null (or anything unreadable) as NULL.
fn json_values(array: &str, n: usize) -> Vec<Sql> {
    let parsed: Vec<serde_json::Value> = serde_json::from_str(array).unwrap_or_default();
    let mut values: Vec<Sql> = parsed.into_iter().map(super::db::json_value).collect();
    values.resize(n, Sql::Null);
    values
}

/// `ids` as the list of an SQL `IN (...)`: integers this program holds,
/// never input text; `NULL` for none (which matches nothing).
pub(crate) fn id_list(ids: &[i64]) -> String {
    match ids.is_empty() {
        true => "NULL".into(),
        false => ids.iter().map(i64::to_string).collect::<Vec<_>>().join(", "),
    }
}

/// A whole saved run.
#[derive(Debug, Clone)]
pub struct SavedRun {
    pub summary: RunSummary,
    pub command_line: String,
    pub nicbench_version: String,
    pub document: serde_json::Value,
    pub text_report: Option<String>,
}

const SUMMARY_COLUMNS: &str = "id, started_at_unix_seconds, workload, client_host, agent_host, agent_address, \
     headline_unit, headline_value, verdict_kind, trials_planned, trials_saved, complete, source";

fn summary(row: &Row) -> Result<RunSummary, DbError> {
    Ok(RunSummary {
        id: row.get(0)?,
        started_at_unix_seconds: row.get(1)?,
        workload: row.get(2)?,
        client_host: row.get(3)?,
        agent_host: row.get(4)?,
        agent_address: row.get(5)?,
        headline_unit: row.get(6)?,
        headline_value: row.get(7)?,
        verdict_kind: row.get(8)?,
        trials_planned: row.get(9)?,
        trials_saved: row.get(10)?,
        complete: row.get(11)?,
        source: row.get(12)?,
        tags: Vec::new(),
        listed: Vec::new(),
    })
}

impl Store {
    /// [`Filter::clause`] with the tag of the fewest runs first (counted
    /// up to [`TAG_COUNT_CAP`] each, from the tag index): the runs read
    /// are those of the rarest tag, whatever order the tags were given in.
    fn clause(&self, filter: &Filter) -> Result<(String, Vec<Sql>), StoreError> {
        if filter.tags.len() < 2 {
            return Ok(filter.clause());
        }
        let mut counted = Vec::with_capacity(filter.tags.len());
        for tag in &filter.tags {
            let runs: i64 = self
                .db
                .query_row(
                    &format!(
                        "SELECT count(*) FROM (SELECT 1 FROM tags WHERE key = ?1 AND value = ?2 \
                         LIMIT {TAG_COUNT_CAP}) AS capped"
                    ),
                    params![&tag.key, &tag.value],
                )
                .map_err(|e| self.err(e))?
                .map_or(Ok(0), |r| r.get(0))
                .map_err(|e| self.err(e))?;
            counted.push((runs, tag.clone()));
        }
        // Stable: tags of equal counts keep their order.
        counted.sort_by_key(|(runs, _)| *runs);
        let ordered = Filter {
            tags: counted.into_iter().map(|(_, tag)| tag).collect(),
            ..filter.clone()
        };
        Ok(ordered.clause())
    }

    /// Runs matching `filter`, newest first.
    pub fn runs(&self, filter: &Filter) -> Result<Vec<RunSummary>, StoreError> {
        let (clause, values) = self.clause(filter)?;
        let limit = filter.limit.map(|n| format!(" LIMIT {n}")).unwrap_or_default();
        let sql = format!("SELECT {SUMMARY_COLUMNS} FROM runs WHERE {clause} ORDER BY id DESC{limit}");
        let mut runs = self
            .db
            .query(&sql, &values)
            .and_then(|rows| rows.iter().map(summary).collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.err(e))?;
        let mut tags = self.tags_of(runs.iter().map(|r| r.id))?;
        for run in &mut runs {
            run.tags = tags.remove(&run.id).unwrap_or_default();
        }
        self.fill_listed(&mut runs)?;
        Ok(runs)
    }

    /// Reads the figures of the runs whose workload lists its own in
    /// place of the headline (one query per such workload).
    fn fill_listed(&self, runs: &mut [RunSummary]) -> Result<(), StoreError> {
        let mut by_workload: BTreeMap<String, Vec<i64>> = BTreeMap::new();
        for run in runs.iter() {
            if !crate::workload::results_of(&run.workload).listed_figures().is_empty() {
                by_workload.entry(run.workload.clone()).or_default().push(run.id);
            }
        }
        for (workload, ids) in by_workload {
            let figures = crate::workload::results_of(&workload).listed_figures();
            let paths: Vec<String> = figures.iter().map(|m| m.json_path()).collect();
            let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
            for parts in self.document_parts(&ids, &paths)? {
                let Some(run) = runs.iter_mut().find(|r| r.id == parts.id) else {
                    continue;
                };
                run.listed = figures
                    .iter()
                    .enumerate()
                    .filter_map(|(i, m)| {
                        Some(ListedFigure {
                            name: m.option,
                            unit: m.unit,
                            value: m.of_number(parts.number(i)?)?,
                        })
                    })
                    .collect();
            }
        }
        Ok(())
    }

    /// The ids of the runs matching `filter`, oldest first.
    pub fn run_ids(&self, filter: &Filter) -> Result<Vec<i64>, StoreError> {
        let (clause, values) = self.clause(filter)?;
        let sql = format!("SELECT id FROM runs WHERE {clause} ORDER BY id");
        let ids = self
            .db
            .query(&sql, &values)
            .and_then(|rows| rows.iter().map(|r| r.get(0)).collect::<Result<Vec<i64>, _>>())
            .map_err(|e| self.err(e))?;
        Ok(ids)
    }

    /// Rows of arbitrary `runs` columns for the runs matching `filter`
    /// (`columns` come from a fixed list in the caller, never from input).
    pub fn column_rows(&self, filter: &Filter, columns: &[&str]) -> Result<Vec<(i64, Vec<Sql>)>, StoreError> {
        self.rows_of(filter, columns, None)
    }

    /// [`Store::column_rows`] of the runs of these workloads only.
    pub fn column_rows_of(
        &self,
        filter: &Filter,
        columns: &[&str],
        workloads: &[&str],
    ) -> Result<Vec<(i64, Vec<Sql>)>, StoreError> {
        self.rows_of(filter, columns, Some(workloads))
    }

    fn rows_of(
        &self,
        filter: &Filter,
        columns: &[&str],
        workloads: Option<&[&str]>,
    ) -> Result<Vec<(i64, Vec<Sql>)>, StoreError> {
        let (mut clause, mut values) = self.clause(filter)?;
        if let Some(workloads) = workloads {
            let mut marks = vec!["NULL".to_string()];
            for workload in workloads {
                values.push(Sql::Text(workload.to_string()));
                marks.push(format!("?{}", values.len()));
            }
            clause += &format!(" AND workload IN ({})", marks.join(", "));
        }
        let sql = format!("SELECT id, {} FROM runs WHERE {clause} ORDER BY id", columns.join(", "));
        let rows = self
            .db
            .query(&sql, &values)
            .and_then(|rows| {
                rows.into_iter()
                    .map(|row| Ok((row.get(0)?, row.0[1..].to_vec())))
                    .collect::<Result<Vec<_>, DbError>>()
            })
            .map_err(|e| self.err(e))?;
        Ok(rows)
    }

    /// The tags of these runs, by run id (one query for all of them).
    pub fn tags_of(&self, ids: impl Iterator<Item = i64>) -> Result<BTreeMap<i64, Vec<Tag>>, StoreError> {
        let ids: Vec<i64> = ids.collect();
        let mut by_run: BTreeMap<i64, Vec<Tag>> = BTreeMap::new();
        if ids.is_empty() {
            return Ok(by_run);
        }
        let (low, high) = (ids.iter().min().copied(), ids.iter().max().copied());
        // Runs close together (a listing of the newest, a whole store):
        // the tags of the range, one pass of the key. Runs spread thinly
        // over a large store (those of one tag among 1M): by their ids,
        // not the tags of every run between the first and the last.
        let span = high.zip(low).map_or(0, |(h, l)| h.saturating_sub(l)).saturating_add(1);
        let rows = match span > 4 * ids.len() as i64 {
            false => self.db.query(
                "SELECT run_id, key, value FROM tags WHERE run_id BETWEEN ?1 AND ?2 ORDER BY run_id, key",
                params![low, high],
            ),
            true => self.db.query(
                &format!(
                    "SELECT run_id, key, value FROM tags WHERE run_id IN ({}) ORDER BY run_id, key",
                    id_list(&ids)
                ),
                &[],
            ),
        }
        .map_err(|e| self.err(e))?;
        let wanted: std::collections::HashSet<i64> = ids.into_iter().collect();
        for row in rows {
            let read = || -> Result<(i64, Tag), DbError> {
                Ok((
                    row.get(0)?,
                    Tag {
                        key: row.get(1)?,
                        value: row.get(2)?,
                    },
                ))
            };
            let (id, tag) = read().map_err(|e| self.err(e))?;
            if wanted.contains(&id) {
                by_run.entry(id).or_default().push(tag);
            }
        }
        Ok(by_run)
    }

    /// Parts of the documents of these runs, by JSON path (`$.cpu.client`),
    /// read by SQLite without handing whole documents over: a number, a
    /// string, or the JSON text of an object; NULL where a path is absent.
    /// Also each run's command line. Oldest first. (`paths` come from fixed
    /// lists in the caller, never from input.)
    pub fn document_parts(&self, ids: &[i64], paths: &[&str]) -> Result<Vec<DocumentParts>, StoreError> {
        // One json_extract of every path: SQLite parses each document once
        // (a call per path parsed it once per path: most of a report's time
        // over thousands of runs), and answers with a JSON array of them.
        // From the runs' digests when they hold every path: a few kB each,
        // one json_extract per path (SQLite keeps the parsed digest for the
        // row), no array of them to parse again.
        let quoted: Vec<String> = paths.iter().map(|p| format!("'{}'", p.replace('\'', ""))).collect();
        let from_digest = !paths.is_empty() && super::digest::holds(paths);
        let extract = match quoted.len() {
            0 => String::new(),
            _ if from_digest => {
                let source = super::digest::source_of(paths);
                let each: Vec<String> = quoted
                    .iter()
                    .map(|q| format!(", json_extract({source}, {q})"))
                    .collect();
                each.concat()
            }
            _ => format!(", json_extract({}, {})", super::DOCUMENT_SQL, quoted.join(", ")),
        };
        // Whether the document is JSON, where it is read (SQLite parses it
        // once for both): a malformed one is named and left out.
        let valid = match from_digest || quoted.is_empty() {
            true => ", 1",
            false => ", json_valid(runs.document)",
        };
        let sql = format!(
            "SELECT id, command_line{valid}{extract} FROM runs WHERE id IN ({}) ORDER BY id",
            id_list(ids)
        );
        let read = |row: Row| -> Result<(bool, DocumentParts), DbError> {
            let values = match paths.len() {
                0 => Vec::new(),
                n if from_digest => (3..3 + n).map(|i| row.value(i)).collect(),
                1 => vec![row.value(3)],
                n => match row.value(3) {
                    Sql::Text(array) => json_values(&array, n),
                    _ => vec![Sql::Null; n],
                },
            };
            let valid: bool = row.get(2)?;
            Ok((
                valid,
                DocumentParts {
                    id: row.get(0)?,
                    command_line: row.get(1)?,
                    values,
                },
            ))
        };
        let rows = self
            .db
            .query(&sql, &[])
            .and_then(|rows| rows.into_iter().map(read).collect::<Result<Vec<_>, _>>())
            .map_err(|e| self.err(e))?;
        Ok(rows
            .into_iter()
            .filter_map(|(valid, parts)| {
                if !valid {
                    self.leave_out(&self.bad_document(parts.id, "its document is not valid JSON"));
                }
                valid.then_some(parts)
            })
            .collect())
    }

    /// The error (or warning) of run `id`'s unreadable document.
    pub fn bad_document(&self, id: i64, why: &str) -> StoreError {
        StoreError::BadDocument {
            path: self.path.clone(),
            id,
            why: why.to_string(),
        }
    }

    /// [`Store::run`] for commands over many runs: a run whose document
    /// cannot be read is left out with a warning naming it (None).
    pub fn run_or_skip(&self, id: i64) -> Result<Option<SavedRun>, StoreError> {
        match self.run(id) {
            Ok(run) => Ok(Some(run)),
            Err(e @ StoreError::BadDocument { .. }) => {
                self.leave_out(&e);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Says once per run that it is left out, and why.
    fn leave_out(&self, error: &StoreError) {
        if let StoreError::BadDocument { id, .. } = error {
            if self.warned.borrow_mut().insert(*id) {
                log::warn!("{error}; left out");
            }
        }
    }

    /// One run, whole. A document that is not JSON, or larger than
    /// [`super::MAX_DOCUMENT_BYTES`] (not read at all), is
    /// [`StoreError::BadDocument`], naming the run.
    pub fn run(&self, id: i64) -> Result<SavedRun, StoreError> {
        let cap = super::MAX_DOCUMENT_BYTES;
        let sql = format!(
            "SELECT {SUMMARY_COLUMNS}, command_line, nicbench_version, \
             iif(octet_length(document) <= {cap}, document, NULL), text_report, octet_length(document) \
             FROM runs WHERE id = ?1"
        );
        let read = |row: &Row| -> Result<_, DbError> {
            Ok((
                summary(row)?,
                row.get::<String>(13)?,
                row.get::<String>(14)?,
                row.get::<Option<String>>(15)?,
                row.get::<Option<String>>(16)?,
                row.get::<i64>(17)?,
            ))
        };
        let found = self
            .db
            .query_row(&sql, params![id])
            .and_then(|row| row.as_ref().map(read).transpose())
            .map_err(|e| self.err(e))?;
        let Some((mut summary, command_line, nicbench_version, document, text_report, bytes)) = found else {
            return Err(StoreError::NoSuchRun {
                path: self.path().to_path_buf(),
                id,
            });
        };
        let Some(document) = document else {
            return Err(self.bad_document(
                id,
                &format!(
                    "its document is {:.1} MiB, more than the {} MiB this nicbench reads of one run",
                    bytes as f64 / (1u64 << 20) as f64,
                    cap >> 20
                ),
            ));
        };
        summary.tags = self.tags_of(std::iter::once(id))?.remove(&id).unwrap_or_default();
        let document = serde_json::from_str(&document)
            .map_err(|e| self.bad_document(id, &format!("its document is not valid JSON ({e})")))?;
        Ok(SavedRun {
            summary,
            command_line,
            nicbench_version,
            document,
            text_report,
        })
    }

    /// Removes runs (their trials and tags go with them); returns how many.
    pub fn remove(&mut self, ids: &[i64]) -> Result<usize, StoreError> {
        let path = self.path.clone();
        let fail = |e| StoreError::from_db(&path, e);
        let tx = self.db.transaction(false).map_err(fail)?;
        let mut removed = 0;
        for id in ids {
            removed += tx
                .execute("DELETE FROM runs WHERE id = ?1", params![id])
                .map_err(fail)?;
        }
        tx.commit().map_err(fail)?;
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{RunMeta, RunWriter};
    use serde_json::json;

    fn doc(workload: &str, receiver: f64, started: f64) -> serde_json::Value {
        json!({"schema": "nicbench.run/1", "workload": workload, "started_at_unix_seconds": started,
               "client": {"address": "127.0.0.1:1", "facts": {"hostname": "a"}},
               "agent": {"address": "127.0.0.1:5201", "facts": {"hostname": "b"}},
               "spec": {"streams": 1}, "trial": 1,
               "sum": {"receiver": {"bits_per_second": receiver}}, "trials": []})
    }

    fn save(store: Store, d: serde_json::Value, tags: &[&str]) -> (Store, i64) {
        let meta = RunMeta {
            command_line: "nicbench tcp b".into(),
            tags: tags.iter().map(|t| t.parse().unwrap()).collect(),
            trials_planned: Some(1),
            source: None,
        };
        let mut w = RunWriter::new(store, meta);
        w.trial_document(d.clone()).unwrap();
        let mut done = d;
        done["trials"] = json!([{"trial": 1}]);
        let id = w.finish_document(&done, Some("report")).unwrap();
        (w.into_store(), id)
    }

    crate::store::testing::store_test!(
    fn filters_select_by_tag_workload_host_and_time(store) {
        let (store, one) = save(store, doc("tcp", 1e9, 100.0), &["nic=e1000"]);
        let (store, two) = save(store, doc("udp", 2e9, 200.0), &["nic=igb", "mtu=9000"]);
        let ids = |f: Filter| store.runs(&f).unwrap().iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(ids(Filter::default()), vec![two, one]);
        let tag = |s: &str| vec![s.parse::<Tag>().unwrap()];
        assert_eq!(
            ids(Filter {
                tags: tag("nic=igb"),
                ..Filter::default()
            }),
            vec![two]
        );
        assert_eq!(
            ids(Filter {
                workload: Some("tcp".into()),
                ..Filter::default()
            }),
            vec![one]
        );
        assert_eq!(
            ids(Filter {
                host: Some("127.0.0.1".into()),
                ..Filter::default()
            })
            .len(),
            2
        );
        assert_eq!(
            ids(Filter {
                host: Some("b".into()),
                ..Filter::default()
            })
            .len(),
            2
        );
        assert_eq!(
            ids(Filter {
                since_unix_seconds: Some(150.0),
                ..Filter::default()
            }),
            vec![two]
        );
        assert_eq!(
            ids(Filter {
                limit: Some(1),
                ..Filter::default()
            }),
            vec![two]
        );
        let runs = store.runs(&Filter::default()).unwrap();
        assert_eq!(runs[0].tags.len(), 2);
        assert!(runs[0].complete);
    });

    crate::store::testing::store_test!(
    /// Several paths read in one pass give what one json_extract per path
    /// gave: strings as text, numbers, objects as JSON, absent as NULL.
    fn document_parts_read_every_path_as_one_extract_would(store) {
        let (store, id) = save(store, doc("tcp", 1.5e9, 100.0), &[]);
        let paths = [
            "$.workload",
            "$.sum.receiver.bits_per_second",
            "$.spec.streams",
            "$.client.facts",
            "$.nothing",
        ];
        let parts = store.document_parts(&[id], &paths).unwrap();
        assert_eq!(parts.len(), 1);
        let p = &parts[0];
        assert_eq!(p.command_line, "nicbench tcp b");
        assert_eq!(p.text(0), Some("tcp"));
        assert_eq!(p.number(1), Some(1.5e9));
        assert_eq!(p.values[2], Sql::Integer(1));
        assert_eq!(p.text(3), Some(r#"{"hostname":"a"}"#));
        assert_eq!(p.values[4], Sql::Null);
        for (i, path) in paths.iter().enumerate() {
            let one = store.document_parts(&[id], &[path]).unwrap();
            assert_eq!(one[0].values, vec![p.values[i].clone()], "{path}");
        }
    });

    crate::store::testing::store_test!(
    /// Kept paths are read from the digest, and only from one of this
    /// build's: a digest of another key (or none) sends them to the document.
    fn document_parts_read_kept_paths_from_the_digest_of_this_build_only(store) {
        let (store, id) = save(store, doc("tcp", 1.5e9, 100.0), &[]);
        let paths = ["$.client.facts.hostname", "$.spec.streams"];
        // The document emptied: what is read comes from the digest.
        store
            .db
            .execute("UPDATE runs SET document = '{}' WHERE id = ?1", params![id])
            .unwrap();
        let parts = store.document_parts(&[id], &paths).unwrap();
        assert_eq!(parts[0].text(0), Some("a"));
        assert_eq!(parts[0].values[1], Sql::Integer(1));
        // A path no digest keeps is read from the document.
        assert_eq!(
            store.document_parts(&[id], &["$.trial"]).unwrap()[0].values,
            vec![Sql::Null]
        );
        store
            .db
            .execute(
                "UPDATE digests SET digest = '{\"nicbench_digest\": \"another\"}' WHERE run_id = ?1",
                params![id],
            )
            .unwrap();
        let parts = store.document_parts(&[id], &paths).unwrap();
        assert_eq!(parts[0].values, vec![Sql::Null, Sql::Null], "read from the document");
    });

    /// A tag filter reads the runs of one tag from the tag index alone,
    /// then those runs by their ids, each checked for the other tag by its
    /// own tags' key: no pass over every run, no list of every run of the
    /// other tag (SQLite's plan, whose estimates assume a large table).
    // SQLite only: reads SQLite's EXPLAIN QUERY PLAN; PostgreSQL's plans depend on its statistics (bench/store.sh measures both).
    #[test]
    fn a_tag_filter_reads_the_runs_of_one_tag_not_every_run() {
        let store = crate::store::testing::sqlite();
        let filter = Filter {
            tags: vec!["src=host-17".parse().unwrap(), "mtu=9000".parse().unwrap()],
            complete_only: true,
            ..Filter::default()
        };
        let (clause, values) = store.clause(&filter).unwrap();
        for sql in [
            format!("SELECT id FROM runs WHERE {clause} ORDER BY id"),
            format!("SELECT {SUMMARY_COLUMNS} FROM runs WHERE {clause} ORDER BY id DESC LIMIT 50"),
        ] {
            let plan: Vec<String> = store
                .db
                .query(&format!("EXPLAIN QUERY PLAN {sql}"), &values)
                .unwrap()
                .iter()
                .map(|r| r.get::<String>(3).unwrap())
                .collect();
            let plan = plan.join("\n");
            assert!(!plan.contains("SCAN runs"), "{plan}");
            assert!(plan.contains("SEARCH runs USING INTEGER PRIMARY KEY"), "{plan}");
            assert_eq!(
                plan.matches("COVERING INDEX tags_key_value_run (key=? AND value=?)")
                    .count(),
                1,
                "{plan}"
            );
            assert!(plan.contains("(run_id=? AND key=?)"), "{plan}");
        }
    }

    crate::store::testing::store_test!(
    /// The tag with the fewest runs is read first, in whichever order the
    /// tags were given; the runs found are the same.
    fn the_rarest_tag_leads_the_filter(store) {
        let (store, _) = save(store, doc("tcp", 1e9, 100.0), &["mtu=9000"]);
        let (store, _) = save(store, doc("tcp", 1e9, 100.0), &["mtu=9000", "src=host-1"]);
        let (store, both) = save(store, doc("tcp", 1e9, 100.0), &["mtu=9000", "src=host-17"]);
        let (store, _) = save(store, doc("tcp", 1e9, 100.0), &["src=host-17"]);
        let (store, _) = save(store, doc("tcp", 1e9, 100.0), &["mtu=1500", "src=host-17"]);
        let tags = |t: &[&str]| t.iter().map(|t| t.parse::<Tag>().unwrap()).collect::<Vec<_>>();
        for (given, first) in [
            (tags(&["mtu=9000", "src=host-17"]), "mtu"),
            (tags(&["src=host-17", "mtu=9000"]), "src"),
        ] {
            let filter = Filter {
                tags: given,
                ..Filter::default()
            };
            let (_, values) = store.clause(&filter).unwrap();
            // mtu=9000: 3 runs, src=host-17: 3 runs; equal counts keep the order given.
            assert_eq!(values[0], Sql::Text(first.into()));
            assert_eq!(store.run_ids(&filter).unwrap(), vec![both]);
        }
        let (store, _) = save(store, doc("tcp", 1e9, 100.0), &["mtu=9000"]);
        let filter = Filter {
            tags: tags(&["mtu=9000", "src=host-17"]),
            ..Filter::default()
        };
        let (_, values) = store.clause(&filter).unwrap();
        assert_eq!(values[0], Sql::Text("src".into()), "src=host-17 has fewer runs now");
        assert_eq!(store.run_ids(&filter).unwrap(), vec![both]);
    });

    crate::store::testing::store_test!(
    fn a_run_cut_short_is_saved_but_not_complete(store) {
        let mut cut = doc("tcp", 1e9, 100.0);
        cut["repetition"] = json!({"interrupted": true});
        let (store, id) = save(store, cut, &[]);
        let run = store.run(id).unwrap();
        assert!(!run.summary.complete);
        assert_eq!(run.summary.trials_saved, 1);
    });

    crate::store::testing::store_test!(
    fn a_run_round_trips_and_removal_takes_its_trials(store) {
        let (mut store, id) = save(store, doc("tcp", 1e9, 100.0), &["nic=e1000"]);
        let run = store.run(id).unwrap();
        assert_eq!(run.document["sum"]["receiver"]["bits_per_second"], 1e9);
        assert_eq!(run.text_report.as_deref(), Some("report"));
        assert_eq!(run.summary.headline_value, Some(1e9));
        assert!(matches!(store.run(id + 1), Err(StoreError::NoSuchRun { .. })));
        assert_eq!(store.remove(&[id]).unwrap(), 1);
        let trials: i64 = store
            .db
            .query_row("SELECT count(*) FROM trials", &[])
            .unwrap()
            .unwrap()
            .get(0)
            .unwrap();
        assert_eq!(trials, 0);
    });
}
