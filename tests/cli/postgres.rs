//! The store on PostgreSQL (issue 71): the same commands and assertions on
//! a SQLite file and on a throwaway PostgreSQL server each test starts
//! (src/store/pg_cluster.rs: initdb in a temp dir, a unix socket only,
//! removed when the test ends, also on failure); `db push` of the same
//! runs twice storing them once; many pushers at once losing nothing and
//! storing nothing twice; passwords never in a message.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

use super::common::{nicbench, run_at_once, stderr, AgentProcess, BIN};

#[path = "../../src/store/pg_cluster.rs"]
pub(crate) mod pg_cluster;
use pg_cluster::Cluster;

/// A new server, or why there is none.
fn cluster() -> Result<Cluster, String> {
    Cluster::start()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ok(out: Output, what: &str) -> Output {
    assert!(out.status.success(), "{what}: {}", stderr(&out));
    out
}

/// Runs `body` with the `--db` of a new SQLite file, then with the URL of
/// a new PostgreSQL database: one set of assertions for both back ends.
pub(crate) fn on_each_backend(body: impl Fn(&str)) {
    let dir = tempfile::tempdir().unwrap();
    body(dir.path().join("results.db").to_str().unwrap());
    on_postgres(body);
}

/// Runs `body` with the URL of a new PostgreSQL database: the PostgreSQL
/// half of a test whose SQLite half needs its file somewhere of its own.
pub(crate) fn on_postgres(body: impl FnOnce(&str)) {
    if let Some(cluster) = require_cluster() {
        body(&cluster.url("postgres"));
    }
}

/// Runs `body` on a copy of the SQLite file `fixture`, then on a new
/// PostgreSQL database the copy's runs were pushed into (`db push`).
pub(crate) fn on_each_backend_from(fixture: &Path, body: impl Fn(&str)) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy.db");
    std::fs::copy(fixture, &copy).unwrap();
    let copy = copy.to_str().unwrap().to_string();
    body(&copy);
    if let Some(cluster) = require_cluster() {
        // A fresh copy: `body` may have changed the first.
        let again = dir.path().join("again.db");
        std::fs::copy(fixture, &again).unwrap();
        let url = cluster.url("postgres");
        ok(
            nicbench(&["db", "push", &url, "--db", again.to_str().unwrap()]),
            "db push",
        );
        body(&url);
    }
}

/// Whether `db` names a PostgreSQL database rather than a SQLite file.
pub(crate) fn is_postgres(db: &str) -> bool {
    db.starts_with("postgres://") || db.starts_with("postgresql://")
}

/// SQL on the store `db` names (a SQLite file or a PostgreSQL URL), for a
/// test to look inside or to change what it holds behind nicbench's back.
/// The tables are the same on both back ends, so one statement without
/// parameters serves both halves of a test.
pub(crate) enum Inside {
    Sqlite(rusqlite::Connection),
    Postgres(Box<postgres::Client>),
}

impl Inside {
    pub(crate) fn open(db: &str) -> Inside {
        if !is_postgres(db) {
            return Inside::Sqlite(rusqlite::Connection::open(db).unwrap_or_else(|e| panic!("{db}: {e}")));
        }
        let config: postgres::Config = db.parse().unwrap_or_else(|e| panic!("{db}: {e}"));
        let client = config.connect(postgres::NoTls).unwrap_or_else(|e| panic!("{db}: {e}"));
        Inside::Postgres(Box::new(client))
    }

    /// Runs `sql`, one statement; the number of rows it changed.
    pub(crate) fn execute(&mut self, sql: &str) -> u64 {
        match self {
            Inside::Sqlite(c) => c.execute(sql, []).unwrap_or_else(|e| panic!("{sql}: {e}")) as u64,
            Inside::Postgres(c) => c.execute(sql, &[]).unwrap_or_else(|e| panic!("{sql}: {e}")),
        }
    }

    /// The one row `sql` selects, its columns as integers (64-bit on
    /// PostgreSQL: `count(*)` and the store's `BIGINT` columns).
    pub(crate) fn integers(&mut self, sql: &str) -> Vec<i64> {
        match self {
            Inside::Sqlite(c) => {
                let mut statement = c.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
                let columns = statement.column_count();
                statement
                    .query_row([], |r| (0..columns).map(|i| r.get(i)).collect())
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
            }
            Inside::Postgres(c) => {
                let row = c.query_one(sql, &[]).unwrap_or_else(|e| panic!("{sql}: {e}"));
                (0..row.len()).map(|i| row.get(i)).collect()
            }
        }
    }

    /// The integer `sql` selects.
    pub(crate) fn integer(&mut self, sql: &str) -> i64 {
        self.integers(sql)[0]
    }
}

/// Whether nothing was written to the store `db` names: no SQLite file,
/// or not one table in the PostgreSQL database.
pub(crate) fn holds_nothing(db: &str) -> bool {
    if !is_postgres(db) {
        return !Path::new(db).exists();
    }
    Inside::open(db).integer("SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()")
        == 0
}

/// The server, or None having skipped (failing under CI).
fn require_cluster() -> Option<Cluster> {
    match cluster() {
        Ok(c) => Some(c),
        Err(why) => {
            super::common::skip_or_fail(&why);
            None
        }
    }
}

/// The number of rows `sql` counts in the cluster's database.
fn count(cluster: &Cluster, sql: &str) -> i64 {
    cluster.client("postgres").query_one(sql, &[]).unwrap().get(0)
}

#[test]
fn measured_runs_read_back_alike_from_sqlite_and_postgres() {
    let agent = AgentProcess::start(&[]);
    on_each_backend(|db| {
        let port = agent.port_arg();
        let measure = |workload: &str, extra: &[&str]| {
            let mut argv = vec![workload, "127.0.0.1", "-p", &port, "--db", db, "--json"];
            argv.extend_from_slice(extra);
            ok(nicbench(&argv), workload)
        };
        for (workload, extra) in [
            ("tcp", &["-t", "0.3", "--repeat", "2", "--tag", "nic=lo"][..]),
            ("rr", &["-t", "0.3", "--tag", "nic=lo2"][..]),
        ] {
            let out = measure(workload, extra);
            let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
            let line = stderr(&out);
            let line = line
                .lines()
                .find(|l| l.starts_with("saved as run "))
                .unwrap()
                .to_string();
            assert!(line.ends_with(&format!(" in {db}")), "{line}");
            let id = line["saved as run ".len()..].split(' ').next().unwrap().to_string();
            let shown = ok(nicbench(&["show", &id, "--db", db, "--json"]), "show");
            let saved: Value = serde_json::from_slice(&shown.stdout).unwrap();
            assert_eq!(
                saved, printed,
                "{workload}: the saved document differs from the printed one"
            );
        }
        let listing = stdout(&ok(nicbench(&["runs", "--db", db]), "runs"));
        assert_eq!(listing.lines().count(), 3, "{listing}");
        assert!(listing.contains("transactions/s"), "{listing}");
        let tagged = stdout(&ok(nicbench(&["runs", "--db", db, "--tag", "nic=lo"]), "runs --tag"));
        assert_eq!(tagged.lines().count(), 2, "{tagged}");
        let csv = stdout(&ok(
            nicbench(&["export", "--format", "csv", "--db", db, "--workload", "tcp"]),
            "export",
        ));
        assert_eq!(csv.lines().count(), 2, "{csv}");
        let compared = ok(
            nicbench(&["compare", "--db", db, "--cols", "tag:nic", "--format", "json"]),
            "compare",
        );
        let table: Value = serde_json::from_slice(&compared.stdout).unwrap();
        // The tcp run's two trials, read from its document (json_each and
        // json_group_array on SQLite, their stand-ins on PostgreSQL).
        assert_eq!(table["cols"], json!([["lo"]]), "{table:#}");
        let throughput = &table["cells"][0]["figures"]["throughput"];
        assert_eq!(throughput["runs"], 1, "{table:#}");
        assert_eq!(throughput["trials"], 2, "{table:#}");
        assert!(throughput["min"].as_f64().unwrap() <= throughput["max"].as_f64().unwrap());
    });
}

/// A tcp document like a measured one, numbered `i` (its own start time
/// and figure, so each document, and so each digest, is its own).
fn document(i: u64, set: u64) -> Value {
    json!({"schema": "nicbench.run/1", "workload": "tcp", "started_at_unix_seconds": 1.7e9 + i as f64,
           "client": {"address": "127.0.0.1:1", "facts": {"hostname": format!("host-{set}")}},
           "agent": {"address": "127.0.0.1:5201", "facts": {"hostname": "b"}},
           "spec": {"streams": 1}, "trial": 1,
           "sum": {"receiver": {"bits_per_second": 1e9 + i as f64}}, "trials": [{"trial": 1}]})
}

/// A SQLite store at `path` with `n` runs of set `set`, tagged set=SET.
fn sqlite_with_runs(path: &Path, n: u64, set: u64) {
    let mut store = nicbench::store::Store::open(path).unwrap();
    let meta = nicbench::store::RunMeta {
        command_line: "nicbench tcp b".into(),
        tags: vec![format!("set={set}").parse().unwrap()],
        ..Default::default()
    };
    let mut batch = store.batch().unwrap();
    for i in 0..n {
        let doc = document(set * 1_000_000 + i, set);
        batch
            .save(&meta, &doc, &nicbench::store::columns::of_document(&doc))
            .unwrap();
    }
    batch.commit().unwrap();
}

#[test]
fn a_push_of_5000_runs_twice_stores_5000() {
    let Some(cluster) = require_cluster() else { return };
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("laptop.db");
    sqlite_with_runs(&local, 5000, 1);
    let url = cluster.url("postgres");
    let local_arg = local.to_str().unwrap();
    let first = stdout(&ok(nicbench(&["db", "push", &url, "--db", local_arg]), "first push"));
    assert!(
        first.contains("pushed 5000 runs") && first.contains("(0 already there)"),
        "{first}"
    );
    let second = stdout(&ok(nicbench(&["db", "push", &url, "--db", local_arg]), "second push"));
    assert!(
        second.contains("pushed 0 runs") && second.contains("(5000 already there)"),
        "{second}"
    );
    assert_eq!(count(&cluster, "SELECT count(*) FROM runs"), 5000);
    assert_eq!(count(&cluster, "SELECT count(DISTINCT document) FROM runs"), 5000);
    assert_eq!(
        count(&cluster, "SELECT count(*) FROM tags WHERE key = 'set' AND value = '1'"),
        5000
    );
    assert_eq!(count(&cluster, "SELECT count(*) FROM trials"), 5000);
    // The archive reads like the local store.
    let listing = stdout(&ok(nicbench(&["runs", "--db", &url, "--limit", "3"]), "runs"));
    assert_eq!(listing.lines().count(), 4, "{listing}");
    let pulled = dir.path().join("pulled.db");
    let out = stdout(&ok(
        nicbench(&["db", "pull", &url, "--db", pulled.to_str().unwrap(), "--tag", "set=1"]),
        "pull",
    ));
    assert!(out.contains("pulled 5000 runs"), "{out}");
}

/// A server that goes away mid-push: the push fails naming it, and the
/// next push, once the server is back, leaves every run stored once.
#[test]
fn a_server_killed_mid_push_loses_nothing_after_the_next_push() {
    let Some(mut cluster) = require_cluster() else { return };
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("laptop.db");
    sqlite_with_runs(&local, 5000, 2);
    let url = cluster.url("postgres");
    let push = Command::new(BIN)
        .args(["db", "push", &url, "--db"])
        .arg(&local)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (with a deadline) until part of the runs are in, then crash the server.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let copied = "SELECT CASE WHEN to_regclass('copied_runs') IS NULL THEN 0 \
                  ELSE (SELECT count(*) FROM copied_runs) END";
    loop {
        // Before the push made its tables, the query fails: none stored yet.
        let stored: i64 = cluster
            .client("postgres")
            .query_one(copied, &[])
            .map_or(0, |r| r.get(0));
        if stored >= 200 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the push stored {stored} runs in 120 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    cluster.crash_and_restart().unwrap();
    let cut = push.wait_with_output().unwrap();
    assert!(!cut.status.success(), "the push outlived the server: {}", stdout(&cut));
    assert!(stderr(&cut).contains(&url), "{}", stderr(&cut));
    let stored_before = count(&cluster, "SELECT count(*) FROM runs");
    assert!(stored_before < 5000, "{stored_before}");
    let again = stdout(&ok(
        nicbench(&["db", "push", &url, "--db", local.to_str().unwrap()]),
        "the next push",
    ));
    assert!(again.contains(&format!("({stored_before} already there)")), "{again}");
    assert_eq!(count(&cluster, "SELECT count(*) FROM runs"), 5000);
    assert_eq!(count(&cluster, "SELECT count(DISTINCT document) FROM runs"), 5000);
    assert_eq!(count(&cluster, "SELECT count(*) FROM trials"), 5000);
}

#[test]
fn eight_pushers_at_once_of_200_runs_each_store_1600_none_twice() {
    let Some(cluster) = require_cluster() else { return };
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<_> = (0..8u64)
        .map(|set| {
            let path = dir.path().join(format!("writer-{set}.db"));
            sqlite_with_runs(&path, 200, set);
            path
        })
        .collect();
    let url = cluster.url("postgres");
    // Round 1: each writer its own runs; round 2: each writer another's,
    // all at once, so every run is pushed by two processes.
    for round in 0..2 {
        let pushes = (0..8).map(|i| {
            let mut push = Command::new(BIN);
            push.args(["db", "push", &url, "--db"]).arg(&files[(i + round) % 8]);
            push
        });
        for out in run_at_once(pushes, "a concurrent push") {
            ok(out, "a concurrent push");
        }
        assert_eq!(count(&cluster, "SELECT count(*) FROM runs"), 1600, "round {round}");
        assert_eq!(
            count(&cluster, "SELECT count(DISTINCT document) FROM runs"),
            1600,
            "round {round}"
        );
        assert_eq!(
            count(&cluster, "SELECT count(*) FROM copied_runs"),
            1600,
            "round {round}"
        );
    }
}

#[test]
fn a_password_in_the_url_is_refused_and_never_printed() {
    let out = nicbench(&["runs", "--db", "postgres://team:s3cret-pw@127.0.0.1:1/archive"]);
    assert!(!out.status.success());
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!said.contains("s3cret-pw"), "{said}");
    assert!(said.contains("postgres://team:***@127.0.0.1:1/archive"), "{said}");
    assert!(said.contains("PGPASSWORD") && said.contains(".pgpass"), "{said}");
}

#[test]
fn a_server_that_is_not_there_is_named_with_what_to_check() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("postgres://nicbench@/archive?host={}", dir.path().display());
    let out = nicbench(&["runs", "--db", &url]);
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(
        said.contains(&format!("cannot use the PostgreSQL database {url}")),
        "{said}"
    );
    assert!(said.contains("check that the server runs"), "{said}");
}

/// `nicbench ARGS` with its spool under `state` (`XDG_STATE_HOME`).
fn with_state(state: &Path, args: &[&str]) -> Output {
    let child = super::common::clean_env(&mut Command::new(BIN))
        .args(args)
        .env("XDG_STATE_HOME", state)
        .env("COLUMNS", "1000")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    super::common::wait_output(child, super::common::COMMAND_LIMIT, &format!("nicbench {args:?}"))
}

/// The spool file a failed save names ("it is kept in the spool as FILE,").
fn spool_file_named(out: &Output) -> std::path::PathBuf {
    let err = stderr(out);
    let rest = err
        .split("it is kept in the spool as ")
        .nth(1)
        .unwrap_or_else(|| panic!("no spool file named: {err}"));
    rest.split([',', '\n']).next().unwrap().trim().into()
}

/// Issue 71, item 3: a run measured while the archive's server is down is
/// kept in the local spool (exit code 8, the file named); the next command
/// once the server is back stores it, once, and says so; the same file
/// spooled again is found stored (by its document's digest) and not
/// stored twice; a spool file that is not a run is named and left.
#[test]
fn a_run_the_stopped_server_missed_waits_in_the_spool_and_is_stored_once() {
    let Some(mut cluster) = require_cluster() else { return };
    let agent = AgentProcess::start(&[]);
    let state = tempfile::tempdir().unwrap();
    let url = cluster.url("postgres");
    let port = agent.port_arg();
    let tcp = [
        "tcp",
        "127.0.0.1",
        "-p",
        &port,
        "-t",
        "0.3",
        "--tag",
        "site=field",
        "--db",
        &url,
    ];
    ok(with_state(state.path(), &tcp), "a first run");
    cluster.stop().unwrap();
    let out = with_state(state.path(), &tcp);
    assert_eq!(out.status.code(), Some(8), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Verdict"),
        "the result was printed: {}",
        stdout(&out)
    );
    let file = spool_file_named(&out);
    assert!(file.starts_with(state.path()), "{}", file.display());
    let spooled = std::fs::read(&file).unwrap();
    let envelope: Value = serde_json::from_slice(&spooled).unwrap();
    assert_eq!(envelope["run"]["schema"], "nicbench.run/1");
    cluster.start_again().unwrap();

    let listing = ok(with_state(state.path(), &["runs", "--db", &url]), "runs");
    assert!(
        stderr(&listing).contains(&format!("saved 1 spooled run(s) in {url}")),
        "{}",
        stderr(&listing)
    );
    assert!(!file.exists(), "the stored run's spool file is removed");
    assert_eq!(stdout(&listing).lines().count(), 3, "{}", stdout(&listing));
    assert_eq!(count(&cluster, "SELECT count(*) FROM runs WHERE complete = 1"), 2);
    assert_eq!(
        count(
            &cluster,
            "SELECT count(*) FROM tags WHERE key = 'site' AND value = 'field'"
        ),
        2
    );
    let again = ok(with_state(state.path(), &["runs", "--db", &url]), "runs again");
    assert!(!stderr(&again).contains("spool"), "{}", stderr(&again));

    // A drain cut short after storing, before removing the file: found stored.
    std::fs::write(&file, &spooled).unwrap();
    let bad = file.with_file_name("run-0-0-0.json");
    std::fs::write(&bad, b"{\"schema\": \"nicbench.spool/1\", \"store\": ").unwrap();
    let out = ok(with_state(state.path(), &tcp), "a run with the server back");
    let said = stderr(&out);
    assert!(said.contains("none new; 1 were there already"), "{said}");
    assert!(
        said.contains(&format!("spool file {} was not saved", bad.display())) && said.contains("left in place"),
        "{said}"
    );
    assert!(bad.exists(), "a file that is not a run stays");
    assert!(!file.exists());
    assert_eq!(count(&cluster, "SELECT count(*) FROM runs"), 3);
    assert_eq!(count(&cluster, "SELECT count(DISTINCT document) FROM runs"), 3);
}

/// A server that goes away between a run's trials: the trials saved before
/// stay as the unfinished run, the whole run waits in the spool, and the
/// drain completes that same row (one run, every trial), not a second one.
#[test]
fn a_run_cut_off_mid_write_is_completed_in_place_from_the_spool() {
    let Some(mut cluster) = require_cluster() else { return };
    let agent = AgentProcess::start(&[]);
    let state = tempfile::tempdir().unwrap();
    let url = cluster.url("postgres");
    let port = agent.port_arg();
    let child = super::common::clean_env(&mut Command::new(BIN))
        .args([
            "tcp",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "2",
            "--repeat",
            "2",
            "--db",
            &url,
        ])
        .env("XDG_STATE_HOME", state.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let trials = "SELECT CASE WHEN to_regclass('trials') IS NULL THEN 0 ELSE (SELECT count(*) FROM trials) END";
    while cluster
        .client("postgres")
        .query_one(trials, &[])
        .map_or(0, |r| r.get::<_, i64>(0))
        < 1
    {
        assert!(std::time::Instant::now() < deadline, "no trial saved in 60 s");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    cluster.stop().unwrap();
    let out = super::common::wait_output(child, super::common::COMMAND_LIMIT, "the cut-off run");
    assert_eq!(out.status.code(), Some(8), "{}", stderr(&out));
    let file = spool_file_named(&out);
    cluster.start_again().unwrap();
    assert_eq!(count(&cluster, "SELECT count(*) FROM runs WHERE complete = 0"), 1);
    let shown = ok(with_state(state.path(), &["runs", "--db", &url]), "runs");
    assert!(stderr(&shown).contains("saved 1 spooled run(s)"), "{}", stderr(&shown));
    assert!(!file.exists());
    assert_eq!(count(&cluster, "SELECT count(*) FROM runs"), 1);
    assert_eq!(count(&cluster, "SELECT count(*) FROM runs WHERE complete = 1"), 1);
    assert_eq!(count(&cluster, "SELECT count(*) FROM trials"), 2);
}
