//! Hardening round three, item E: one absurd number cannot hang a report.
//! The store now refuses to save a figure out of physical bounds, whoever
//! measured it; a database written before that (or by hand) may still
//! hold one. Filled with the extremes a double can hold, every chart kind,
//! the report, compare, runs and show still finish (a hang fails at the
//! command deadline of tests/cli/common.rs), and none panics: on the
//! SQLite file and on a PostgreSQL database the file's runs were pushed
//! into (`db push` copies the stored values as they are).

use std::path::Path;

use serde_json::Value;

use super::common::*;

/// One run of every kind.
const FIXTURES: &[&str] = &[
    "run-tcp-linerate-repeat.json",
    "run-udp.json",
    "run-udp-bidir.json",
    "run-sweep.json",
    "run-rr.json",
    "loaded-loopback.json",
];

/// Every number of `doc` whose key names a rate, a time or a share set to
/// `value`.
fn poison(doc: &mut Value, value: f64) {
    match doc {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                let figure = key.ends_with("bits_per_second")
                    || key.ends_with("_percent")
                    || key.ends_with("_us")
                    || key.ends_with("seconds");
                if figure && v.is_number() && key != "started_at_unix_seconds" {
                    *v = serde_json::json!(value);
                } else {
                    poison(v, value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| poison(v, value)),
        _ => {}
    }
}

/// A database of the fixtures whose every stored figure is `value`.
fn poisoned_database(dir: &Path, value: f64) -> String {
    poisoned_database_of(dir, value, &|_| {})
}

/// [`poisoned_database`] of the fixtures as `edit` changes them before
/// they are imported (the strings of a hostile peer, say).
pub fn poisoned_database_of(dir: &Path, value: f64, edit: &dyn Fn(&mut Value)) -> String {
    let db = dir
        .join(format!("extreme-{:016x}.db", value.to_bits()))
        .display()
        .to_string();
    let mut args = vec!["import".to_string(), "--db".into(), db.clone()];
    for name in FIXTURES {
        let text = std::fs::read_to_string(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let mut doc: Value = serde_json::from_str(&text).unwrap();
        edit(&mut doc);
        let file = dir.join(format!("edited-{:016x}-{name}", value.to_bits()));
        std::fs::write(&file, doc.to_string()).unwrap();
        args.push(file.display().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = nicbench(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let conn = rusqlite::Connection::open(&db).unwrap();
    let columns: Vec<String> = conn
        .prepare("SELECT name, type FROM pragma_table_info('runs')")
        .unwrap()
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .filter(|(name, kind)| kind == "REAL" && name != "started_at_unix_seconds" && name != "saved_at_unix_seconds")
        .map(|(name, _)| name)
        .collect();
    assert!(columns.iter().any(|c| c == "receiver_bits_per_second"), "{columns:?}");
    for column in &columns {
        conn.execute(&format!("UPDATE runs SET {column} = ?1"), [value])
            .unwrap();
    }
    conn.execute("UPDATE trials SET headline_value = ?1", [value]).unwrap();
    for table in ["runs", "trials"] {
        let rows: Vec<(i64, String)> = conn
            .prepare(&format!("SELECT rowid, document FROM {table}"))
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        for (rowid, text) in rows {
            let mut doc: Value = serde_json::from_str(&text).unwrap();
            poison(&mut doc, value);
            conn.execute(
                &format!("UPDATE {table} SET document = ?1 WHERE rowid = ?2"),
                rusqlite::params![doc.to_string(), rowid],
            )
            .unwrap();
        }
    }
    db
}

#[test]
fn every_chart_and_the_report_finish_over_a_database_of_extreme_values() {
    let dir = tempfile::tempdir().unwrap();
    for value in [1.7e308, -1.7e308, f64::MIN_POSITIVE, 0.0] {
        let poisoned = poisoned_database(dir.path(), value);
        super::postgres::on_each_backend_from(Path::new(&poisoned), |db| {
            let db = db.to_string();
            let out_file = |name: &str| dir.path().join(name).display().to_string();
            let mut commands: Vec<Vec<String>> = ["bars", "sweep", "cpu", "latency", "loaded", "loaded-cdf"]
                .iter()
                .map(|kind| {
                    vec![
                        "plot".into(),
                        "--db".into(),
                        db.clone(),
                        "--kind".into(),
                        kind.to_string(),
                        "-o".into(),
                        out_file(&format!("{kind}.svg")),
                    ]
                })
                .collect();
            commands.push(vec![
                "plot".into(),
                "--db".into(),
                db.clone(),
                "--kind".into(),
                "timeline".into(),
                "--id".into(),
                "1".into(),
                "-o".into(),
                out_file("timeline.svg"),
            ]);
            commands.push(vec![
                "report".into(),
                "--db".into(),
                db.clone(),
                "-o".into(),
                out_file("r.html"),
            ]);
            for args in ["compare", "runs", "show"] {
                let mut command = vec![args.to_string(), "--db".into(), db.clone()];
                if args == "show" {
                    command.push("1".into());
                }
                commands.push(command);
            }
            for command in commands {
                let args: Vec<&str> = command.iter().map(String::as_str).collect();
                // A hang fails inside nicbench() at its deadline.
                let out = nicbench(&args);
                let code = out.status.code();
                assert!(
                    code.is_some() && code != Some(101),
                    "nicbench {args:?} over {value}: {code:?} {}",
                    stderr(&out)
                );
                assert!(!stderr(&out).contains("panicked"), "{args:?}: {}", stderr(&out));
            }
        });
    }
}

#[test]
fn a_run_with_a_figure_no_network_gives_is_not_saved() {
    let dir = tempfile::tempdir().unwrap();
    let mut doc: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{}/tests/fixtures/run-tcp.json", env!("CARGO_MANIFEST_DIR"))).unwrap(),
    )
    .unwrap();
    poison(&mut doc, 1.7e308);
    let file = dir.path().join("absurd.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    super::postgres::on_each_backend(|db| {
        let out = nicbench(&["import", "--db", db, file.to_str().unwrap()]);
        assert_ne!(out.status.code(), Some(0));
        let err = stderr(&out);
        assert!(
            err.contains("bits_per_second") && err.contains("not a measurement"),
            "{err}"
        );
        assert!(super::postgres::holds_nothing(db), "{db} was written");
    });
}
