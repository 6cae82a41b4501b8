//! Upgrading databases written by older nicbench versions: the fixture
//! `tests/fixtures/store-v2.db` was made by the schema-2 binary (a tcp run
//! measured on loopback, imported tcp and udp documents, an imported NetPIPE
//! file); opening it with this one adds the CPU split columns of schema 3,
//! fills them from each run's document, and changes nothing else.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::types::Value as Sql;
use rusqlite::Connection;
use serde_json::Value;

use super::common::{nicbench, stderr};
use nicbench::store::columns::{self, CPU_PARTS, CPU_PART_COLUMNS};

fn fixture_copy(dir: &Path, name: &str) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    let db = dir.join(name);
    std::fs::copy(fixture, &db).unwrap();
    db
}

/// Every row of `table` (ordered by `order`), as column name to value.
fn rows(conn: &Connection, table: &str, order: &str) -> Vec<BTreeMap<String, Sql>> {
    let mut statement = conn
        .prepare(&format!("SELECT * FROM {table} ORDER BY {order}"))
        .unwrap();
    let names: Vec<String> = statement.column_names().iter().map(|n| n.to_string()).collect();
    statement
        .query_map([], |row| {
            names
                .iter()
                .enumerate()
                .map(|(i, n)| Ok((n.clone(), row.get::<_, Sql>(i)?)))
                .collect::<Result<BTreeMap<_, _>, _>>()
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn version(conn: &Connection) -> i64 {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap()
}

/// What the split columns of a run must hold: the document's own figures,
/// read here by plain JSON indexing, NULL where it has none.
fn split_of(document: &Sql) -> Vec<Sql> {
    let Sql::Text(text) = document else {
        panic!("a document that is not text: {document:?}")
    };
    let doc: Value = serde_json::from_str(text).unwrap();
    ["client", "agent"]
        .iter()
        .flat_map(|end| CPU_PARTS.map(|part| doc["cpu"][end][format!("{part}_percent")].as_f64()))
        .map(|v| v.map(Sql::Real).unwrap_or(Sql::Null))
        .collect()
}

/// Opens `db` with this nicbench (`runs` lists it) and checks the upgrade:
/// the split columns are added and hold each document's figures (as a new
/// save would write them), every other column, trial and tag is unchanged.
/// `also_added`: columns of the migrations between `from` and 2. Returns
/// how many runs carry the split.
fn upgrade_and_check(db: &Path, from: i64, also_added: &[&str]) -> usize {
    let conn = Connection::open(db).unwrap();
    assert_eq!(version(&conn), from);
    let (runs, trials, tags) = (
        rows(&conn, "runs", "id"),
        rows(&conn, "trials", "run_id, trial"),
        rows(&conn, "tags", "run_id, key"),
    );
    drop(conn);
    assert!(!runs.is_empty());
    assert!(runs[0].keys().all(|k| !CPU_PART_COLUMNS.contains(&k.as_str())));

    let listing = nicbench(&["runs", "--db", &db.display().to_string()]);
    assert!(listing.status.success(), "{}", stderr(&listing));

    let conn = Connection::open(db).unwrap();
    assert_eq!(version(&conn), nicbench::store::schema::CURRENT_VERSION);
    let upgraded = rows(&conn, "runs", "id");
    assert_eq!(rows(&conn, "trials", "run_id, trial"), trials, "trials changed");
    assert_eq!(rows(&conn, "tags", "run_id, key"), tags, "tags changed");
    assert_eq!(upgraded.len(), runs.len());
    let mut with_split = 0;
    for (old, new) in runs.iter().zip(&upgraded) {
        let added: Vec<&String> = new.keys().filter(|k| !old.contains_key(*k)).collect();
        let mut expected: Vec<&str> = CPU_PART_COLUMNS.iter().chain(also_added).copied().collect();
        expected.sort();
        assert_eq!(added, expected, "the upgrade adds exactly these columns");
        for (name, value) in old {
            assert_eq!(&new[name], value, "run {:?}: column {name} changed", old["id"]);
        }
        let got: Vec<Sql> = CPU_PART_COLUMNS.iter().map(|c| new[*c].clone()).collect();
        assert_eq!(got, split_of(&old["document"]), "run {:?}", old["id"]);
        // The same figures a run saved by this version gets.
        if let Sql::Text(text) = &old["document"] {
            let c = columns::of_document(&serde_json::from_str(text).unwrap());
            let saved: Vec<Sql> = c
                .client_cpu_parts
                .values()
                .into_iter()
                .chain(c.agent_cpu_parts.values())
                .map(|v| v.map(Sql::Real).unwrap_or(Sql::Null))
                .collect();
            assert_eq!(got, saved, "run {:?}", old["id"]);
        }
        if got.iter().all(|v| matches!(v, Sql::Real(_))) {
            with_split += 1;
        }
    }
    with_split
}

// SQLite only: an old SQLite file migrated in place; no PostgreSQL archive was ever at
// this version (postgres::POSTGRES_DATA_MIGRATIONS_FROM: their data updates do not run there).
#[test]
fn a_schema_2_database_gains_the_cpu_split_of_its_runs_and_nothing_else_changes() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture_copy(dir.path(), "store-v2.db");
    // The measured tcp run and the imported tcp and udp documents carry the
    // split; the NetPIPE file has no CPU figures and stays NULL.
    assert_eq!(upgrade_and_check(&db, 2, &[]), 3);
    let conn = Connection::open(&db).unwrap();
    let netpipe: Vec<Option<f64>> = conn
        .query_row(
            &format!(
                "SELECT {} FROM runs WHERE source = 'netpipe'",
                CPU_PART_COLUMNS.join(", ")
            ),
            [],
            |r| (0..8).map(|i| r.get(i)).collect(),
        )
        .unwrap();
    assert_eq!(netpipe, vec![None; 8]);
    // Known figures of the imported tcp document (tests/fixtures/run-tcp.json).
    let softirq: f64 = conn
        .query_row(
            "SELECT client_cpu_softirq_percent FROM runs r JOIN tags t ON t.run_id = r.id \
             WHERE t.key = 'test' AND t.value = 'tcp'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!((softirq - 19.2488262910798).abs() < 1e-9, "{softirq}");
    drop(conn);

    // The CPU chart draws the upgraded runs from the columns.
    let svg = dir.path().join("cpu.svg");
    let out = nicbench(&[
        "plot",
        "--kind",
        "cpu",
        "--group",
        "tag:test",
        "-o",
        &svg.display().to_string(),
        "--db",
        &db.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&svg).unwrap();
    for group in ["measured", "tcp", "udp-bidir"] {
        assert!(text.contains(group), "group {group} missing from the chart");
    }
    assert!(!text.contains("netpipe"), "a run without the split was drawn");
}

// SQLite only: an old SQLite file migrated in place; no PostgreSQL archive was ever at
// this version (postgres::POSTGRES_DATA_MIGRATIONS_FROM: their data updates do not run there).
#[test]
fn a_schema_1_database_is_upgraded_through_both_migrations_with_the_split() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture_copy(dir.path(), "store-v1.db");
    // tcp, udp, rr and sweep, all measured: all four carry the split.
    assert_eq!(upgrade_and_check(&db, 1, &["source", "source_file"]), 4);
}

/// `tests/fixtures/store-v3.db` was made by the schema-3 binary: a files
/// run (`files --generate 20x256K`), stored headed by the receiver's rate
/// as that version did, and a tcp run of two trials. Opening it heads the
/// files run and its trial by the payload rate the command reports, as a
/// run saved now is; nothing else changes.
// SQLite only: an old SQLite file migrated in place; no PostgreSQL archive was ever at
// this version (postgres::POSTGRES_DATA_MIGRATIONS_FROM: their data updates do not run there).
#[test]
fn a_schema_3_database_heads_its_files_run_by_the_payload_rate_and_nothing_else_changes() {
    let dir = tempfile::tempdir().unwrap();
    let db = fixture_copy(dir.path(), "store-v3.db");
    let conn = Connection::open(&db).unwrap();
    assert_eq!(version(&conn), 3);
    let (runs, trials) = (rows(&conn, "runs", "id"), rows(&conn, "trials", "run_id, trial"));
    drop(conn);
    let files_id = runs
        .iter()
        .find(|r| r["workload"] == Sql::Text("files".into()))
        .map(|r| r["id"].clone())
        .expect("the fixture has a files run");
    assert_eq!(
        runs.iter().find(|r| r["id"] == files_id).unwrap()["headline_metric"],
        Sql::Text("receiver_bits_per_second".into()),
        "the fixture is what schema 3 stored"
    );

    let listing = nicbench(&["runs", "--db", &db.display().to_string()]);
    assert!(listing.status.success(), "{}", stderr(&listing));

    let conn = Connection::open(&db).unwrap();
    assert_eq!(version(&conn), nicbench::store::schema::CURRENT_VERSION);
    let (upgraded, upgraded_trials) = (rows(&conn, "runs", "id"), rows(&conn, "trials", "run_id, trial"));
    assert_eq!(upgraded.len(), runs.len());
    let headline = ["headline_metric", "headline_unit", "headline_value"];
    for (old, new) in runs.iter().zip(&upgraded) {
        for (name, value) in old {
            if old["id"] != files_id || !headline.contains(&name.as_str()) {
                assert_eq!(&new[name], value, "run {:?}: column {name} changed", old["id"]);
            }
        }
    }
    let files = upgraded.iter().find(|r| r["id"] == files_id).unwrap();
    let Sql::Text(text) = &files["document"] else {
        panic!("no document")
    };
    let doc: Value = serde_json::from_str(text).unwrap();
    let payload = doc["sum"]["files"]["payload_bits_per_second"].as_f64().unwrap();
    let receiver = doc["sum"]["receiver"]["bits_per_second"].as_f64().unwrap();
    assert_ne!(payload, receiver);
    assert_eq!(files["headline_metric"], Sql::Text("payload_bits_per_second".into()));
    assert_eq!(files["headline_unit"], Sql::Text("bit/s".into()));
    assert_eq!(files["headline_value"], Sql::Real(payload));
    // The same headline a run saved by this version gets.
    let saved = columns::of_document(&doc).headline.unwrap();
    assert_eq!(
        (saved.metric.as_str(), saved.value),
        ("payload_bits_per_second", payload)
    );
    for (old, new) in trials.iter().zip(&upgraded_trials) {
        for (name, value) in old {
            if old["run_id"] != files_id || name != "headline_value" {
                assert_eq!(
                    &new[name],
                    value,
                    "trial {:?}: column {name} changed",
                    (&old["run_id"], &old["trial"])
                );
            }
        }
        if old["run_id"] == files_id {
            assert_eq!(new["headline_value"], Sql::Real(payload));
        }
    }
}
