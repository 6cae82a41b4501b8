//! The results store end to end: every measuring command saves its run,
//! `runs`/`show` read it back, and a failing database never loses a result.
//! Every command here names its own `--db` in a fresh temp dir.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use super::common::{nicbench, run_at_once, stderr, AgentProcess, SharedDir, BIN};

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The run id from the line `saved as run N in PATH`.
fn saved_id(text: &str, db: impl AsRef<Path>) -> i64 {
    let db = db.as_ref();
    let line = text
        .lines()
        .find(|l| l.starts_with("saved as run "))
        .unwrap_or_else(|| panic!("no 'saved as run' line in:\n{text}"));
    assert!(line.ends_with(&format!(" in {}", db.display())), "{line}");
    line["saved as run ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn db_arg(db: &Path) -> String {
    db.display().to_string()
}

/// Runs a measuring command against `agent` with `--db`, asserting success.
fn measure(agent: &AgentProcess, db: impl AsRef<Path>, workload: &str, extra: &[&str]) -> Output {
    let port = agent.port_arg();
    let db = db_arg(db.as_ref());
    let mut argv = vec![workload, "127.0.0.1", "-p", &port, "--db", &db];
    argv.extend_from_slice(extra);
    let out = nicbench(&argv);
    assert!(out.status.success(), "nicbench {argv:?}: {}", stderr(&out));
    out
}

#[test]
fn every_workload_round_trips_through_the_store() {
    let agent = AgentProcess::start(&[]);
    super::postgres::on_each_backend(|db| {
        let cases: &[(&str, &[&str])] = &[
            (
                "tcp",
                &["-t", "0.3", "--repeat", "2", "--tag", "nic=lo", "--tag", "test=tcp"],
            ),
            ("udp", &["-t", "0.3", "-b", "50M", "--tag", "test=udp"]),
            ("rr", &["-t", "0.3", "--tag", "test=rr"]),
            ("sweep", &["--max", "4K", "--point-time", "5ms", "--tag", "test=sweep"]),
        ];
        for (workload, extra) in cases {
            let mut args = extra.to_vec();
            args.push("--json");
            let out = measure(&agent, db, workload, &args);
            let printed: Value = serde_json::from_slice(&out.stdout).expect("stdout is only the document");
            let id = saved_id(&stderr(&out), db);
            let shown = nicbench(&["show", &id.to_string(), "--db", db, "--json"]);
            assert!(shown.status.success(), "{}", stderr(&shown));
            let saved: Value = serde_json::from_slice(&shown.stdout).unwrap();
            assert_eq!(
                saved, printed,
                "{workload}: the saved document differs from the printed one"
            );
        }
        let runs = nicbench(&["runs", "--db", db]);
        let listing = stdout(&runs);
        assert_eq!(listing.lines().count(), 5, "{listing}");
        assert!(listing.contains("nic=lo test=tcp"), "{listing}");
        assert!(listing.contains("transactions/s"), "{listing}");
        let only_rr = stdout(&nicbench(&["runs", "--db", db, "--workload", "rr"]));
        assert_eq!(only_rr.lines().count(), 2, "{only_rr}");
        let tagged = stdout(&nicbench(&["runs", "--db", db, "--tag", "nic=lo"]));
        assert_eq!(tagged.lines().count(), 2, "{tagged}");
        assert!(tagged.contains(" tcp "), "{tagged}");
    });
}

#[test]
fn the_text_report_is_saved_as_printed_and_ends_with_the_run_line() {
    let agent = AgentProcess::start(&[]);
    super::postgres::on_each_backend(|db| {
        let out = measure(&agent, db, "tcp", &["-t", "0.3"]);
        let text = stdout(&out);
        let (report, last) = text.trim_end().rsplit_once('\n').unwrap();
        let id = saved_id(last, db);
        let shown = nicbench(&["show", &id.to_string(), "--db", db]);
        assert!(shown.status.success(), "{}", stderr(&shown));
        assert_eq!(stdout(&shown).trim_end(), report.trim_end());
    });
}

#[test]
fn no_save_writes_no_database() {
    let agent = AgentProcess::start(&[]);
    super::postgres::on_each_backend(|db| {
        let out = measure(&agent, db, "tcp", &["-t", "0.2", "--no-save"]);
        assert!(!stdout(&out).contains("saved as run"));
        assert!(super::postgres::holds_nothing(db), "--no-save wrote to {db}");
    });
}

// SQLite only: the default file path.
#[test]
fn without_db_runs_go_to_the_xdg_data_directory() {
    let agent = AgentProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["tcp", "127.0.0.1", "-p", &agent.port_arg(), "-t", "0.2"])
        .env_remove("NICBENCH_DB")
        .env("XDG_DATA_HOME", dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let db = dir.path().join("nicbench/results.db");
    assert_eq!(saved_id(&stdout(&out), &db), 1);
}

/// A client killed (SIGKILL) between trials: the trials it saved stay,
/// as the unfinished run, whole (SQLite's file passes its integrity check;
/// PostgreSQL's server rolls back only the cut connection's open work).
#[test]
fn a_run_killed_mid_repetition_keeps_its_finished_trials() {
    let agent = AgentProcess::start(&[]);
    super::postgres::on_each_backend(|db| {
        let mut client = Command::new(BIN)
            .args([
                "tcp",
                "127.0.0.1",
                "-p",
                &agent.port_arg(),
                "-t",
                "0.3",
                "--repeat",
                "50",
            ])
            .args(["--db", db, "--tag", "killed=yes"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The progress line of a trial comes after that trial is committed.
        let mut lines = BufReader::new(client.stderr.take().unwrap()).lines();
        loop {
            let line = lines.next().expect("client exited before trial 2").unwrap();
            if line.starts_with("trial 2/50") {
                break;
            }
        }
        client.kill().unwrap(); // SIGKILL
        client.wait().unwrap();
        let mut inside = super::postgres::Inside::open(db);
        if let super::postgres::Inside::Sqlite(conn) = &inside {
            let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
            assert_eq!(check, "ok");
        }
        let row = inside
            .integers("SELECT complete, trials_saved, (SELECT count(*) FROM trials WHERE run_id = runs.id) FROM runs");
        let (complete, saved, trials) = (row[0], row[1], row[2]);
        assert_eq!(complete, 0);
        assert!(saved >= 2 && saved == trials, "saved {saved}, trial rows {trials}");
        let listing = stdout(&nicbench(&["runs", "--db", db]));
        assert!(
            listing.contains(&format!("INCOMPLETE ({saved} of 50 trials saved)")),
            "{listing}"
        );
        let shown = nicbench(&["show", "1", "--db", db, "--json"]);
        let doc: Value = serde_json::from_slice(&shown.stdout).unwrap();
        assert_eq!(doc["trials"].as_array().unwrap().len() as i64, saved);
    });
}

// SQLite only: SQLite's file locking; many writers to PostgreSQL: postgres.rs (eight pushers).
#[test]
fn two_processes_saving_at_once_both_succeed() {
    let agent = AgentProcess::start(&["--max-concurrent", "2"]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let start = || {
        Command::new(BIN)
            .args([
                "tcp",
                "127.0.0.1",
                "-p",
                &agent.port_arg(),
                "-t",
                "0.2",
                "--repeat",
                "4",
            ])
            .args(["--db", &db_arg(&db)])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (first, second) = (start(), start());
    for child in [first, second] {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        saved_id(&stdout(&out), &db);
    }
    let conn = rusqlite::Connection::open(&db).unwrap();
    let trials: Vec<i64> = conn
        .prepare("SELECT trials_saved FROM runs WHERE complete = 1 ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(trials, vec![4, 4]);
}

/// Many processes creating the same new database at once: each must see
/// either no schema or the whole marked one, never tables without the mark
/// (found by 12 parallel imports: 1 of 60 was refused as "corrupt").
// SQLite only: creating one file at once; PostgreSQL's migration lock: postgres.rs (eight pushers).
#[test]
fn many_processes_creating_one_database_all_succeed() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run-tcp.json");
    for round in 0..4 {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("results.db");
        let imports = (0..10).map(|_| {
            let mut import = Command::new(BIN);
            import.args(["import", fixture.to_str().unwrap(), "--db", &db_arg(&db)]);
            import
        });
        for out in run_at_once(imports, "a concurrent import") {
            assert!(out.status.success(), "round {round}: {}", stderr(&out));
        }
        let conn = rusqlite::Connection::open(&db).unwrap();
        let runs: i64 = conn.query_row("SELECT count(*) FROM runs", [], |r| r.get(0)).unwrap();
        assert_eq!(runs, 10, "round {round}");
    }
}

/// Asserts a failed save: exit code 8, the database and the reason named,
/// the result printed anyway and kept in the file the error names.
fn assert_result_kept(out: &Output, db: &Path, reason: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(8), "{err}");
    assert!(err.contains(&db.display().to_string()) && err.contains(reason), "{err}");
    assert!(
        stdout(out).contains("Verdict"),
        "the result was not printed: {}",
        stdout(out)
    );
    let named = |marker: &str| -> Option<PathBuf> {
        let rest = err.split(marker).nth(1)?;
        Some(rest.split([',', '\n']).next()?.trim().into())
    };
    // Kept in the store's spool, or (where this user cannot write the
    // spool, e.g. nobody under the target directory) in a JSON file.
    let (file, doc) = match named("it is kept in the spool as ") {
        Some(file) => {
            let spooled: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
            assert_eq!(spooled["schema"], "nicbench.spool/1", "{spooled}");
            (file, spooled["run"].clone())
        }
        None => {
            let file = named("the result was written to ").unwrap_or_else(|| panic!("no file named in: {err}"));
            let doc = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
            (file, doc)
        }
    };
    assert_eq!(doc["schema"], "nicbench.run/1");
    std::fs::remove_file(file).unwrap();
}

// SQLite only: a corrupt file.
#[test]
fn a_corrupt_database_is_named_and_the_result_kept() {
    let agent = AgentProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    std::fs::write(&db, vec![0x42; 16384]).unwrap();
    let out = nicbench(&[
        "tcp",
        "127.0.0.1",
        "-p",
        &agent.port_arg(),
        "-t",
        "0.2",
        "--db",
        &db_arg(&db),
    ]);
    assert_result_kept(&out, &db, "corrupt");
    let runs = nicbench(&["runs", "--db", &db_arg(&db)]);
    assert_eq!(runs.status.code(), Some(8), "{}", stderr(&runs));
}

// SQLite only: file permissions.
#[test]
fn a_read_only_database_is_named_and_the_result_kept() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let agent = AgentProcess::start(&[]);
    // Nobody must reach the binary and the database wherever the checkout is.
    let dir = SharedDir::new();
    let db = dir.path().join("results.db");
    measure(&agent, &db, "tcp", &["-t", "0.2"]);
    // Root writes anything it can open: run the client as nobody then,
    // with the database readable by all and writable only by its owner.
    let root = unsafe { libc::geteuid() } == 0;
    let (file_mode, dir_mode) = if root { (0o644, 0o755) } else { (0o444, 0o555) };
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(file_mode)).unwrap();
    let binary = if root { dir.binary() } else { PathBuf::from(BIN) };
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(dir_mode)).unwrap();
    let mut command = Command::new(binary);
    command.args([
        "tcp",
        "127.0.0.1",
        "-p",
        &agent.port_arg(),
        "-t",
        "0.2",
        "--db",
        &db_arg(&db),
    ]);
    if root {
        command.uid(65534).gid(65534).env("TMPDIR", "/tmp");
    }
    let out = command.stdin(Stdio::null()).output().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_result_kept(&out, &db, "read-only");
}

/// A copy of the database the first schema version wrote (tcp with two
/// trials, udp, rr, sweep; tags nic and test), made by that version.
/// The SQLite file of the first schema kept as a fixture (four runs).
fn first_schema_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store-v1.db")
}

fn first_schema_copy(dir: &Path) -> PathBuf {
    let db = dir.join("old.db");
    std::fs::copy(first_schema_fixture(), &db).unwrap();
    db
}

// SQLite only: an old SQLite file migrated in place.
#[test]
fn a_database_of_the_first_schema_is_upgraded_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let db = first_schema_copy(dir.path());
    let listing = nicbench(&["runs", "--db", &db_arg(&db)]);
    assert!(listing.status.success(), "{}", stderr(&listing));
    let text = stdout(&listing);
    for workload in ["tcp", "udp", "rr", "sweep"] {
        assert!(text.contains(&format!("test={workload}")), "{text}");
    }
    let conn = rusqlite::Connection::open(&db).unwrap();
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, nicbench::store::schema::CURRENT_VERSION);
    let shown = nicbench(&["show", "1", "--db", &db_arg(&db), "--json"]);
    let doc: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(doc["trials"].as_array().unwrap().len(), 2);
}

// SQLite only: a file with a forged PRAGMA user_version.
#[test]
fn a_newer_database_is_refused_naming_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let db = first_schema_copy(dir.path());
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let out = nicbench(&["runs", "--db", &db_arg(&db)]);
    assert_eq!(out.status.code(), Some(8));
    let err = stderr(&out);
    let known = nicbench::store::schema::CURRENT_VERSION;
    assert!(
        err.contains("schema version 99") && err.contains(&format!("knows ({known})")),
        "{err}"
    );
}

#[test]
fn bad_ids_filters_and_tags_say_so_with_their_exit_codes() {
    super::postgres::on_each_backend_from(&first_schema_fixture(), |db| {
        let out = nicbench(&["show", "999", "--db", db]);
        assert_eq!(out.status.code(), Some(7));
        assert!(stderr(&out).contains("no run with id 999"), "{}", stderr(&out));
        // Each hint names the database the command used (issue 72, item 5).
        let runs = nicbench::shell::join(["nicbench", "runs", "--db", db]);
        assert!(
            stderr(&out).contains(&format!("`{runs}` lists the ids")),
            "{}",
            stderr(&out)
        );
        let out = nicbench(&["runs", "--db", db, "--tag", "nic=none"]);
        assert_eq!(out.status.code(), Some(7));
        assert!(stderr(&out).contains("matches --tag nic=none"), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("`{runs}` without filters")),
            "{}",
            stderr(&out)
        );
        let out = nicbench(&["runs", "--db", db, "--tag", "nic"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains("expected KEY=VALUE"), "{}", stderr(&out));
    });
    // A file that does not exist (SQLite's matter: a PostgreSQL database
    // that does not exist is the server's "unreachable" error).
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.db");
    let out = nicbench(&["runs", "--db", &db_arg(&missing)]);
    assert_eq!(out.status.code(), Some(7));
    assert!(!missing.exists());
}

#[test]
fn rm_asks_unless_yes_and_removes_by_tag() {
    super::postgres::on_each_backend_from(&first_schema_fixture(), |db| {
        let out = nicbench(&["rm", "1", "--db", db]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("--yes"));
        let out = nicbench(&["rm", "--tag", "test=udp", "--yes", "--db", db]);
        assert!(out.status.success(), "{}", stderr(&out));
        let listing = stdout(&nicbench(&["runs", "--db", db]));
        assert!(
            !listing.contains("test=udp") && listing.contains("test=rr"),
            "{listing}"
        );
    });
}

#[test]
fn export_csv_has_one_line_per_run_with_tags_and_columns() {
    super::postgres::on_each_backend_from(&first_schema_fixture(), |db| {
        let out = nicbench(&["export", "--format", "csv", "--db", db, "--workload", "tcp"]);
        let text = stdout(&out);
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let row: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert!(lines.next().is_none(), "{text}");
        let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
        assert_eq!(col("tag:test"), "tcp");
        assert_eq!(col("workload"), "tcp");
        assert!(col("receiver_bits_per_second").parse::<f64>().unwrap() > 0.0);
        let json = nicbench(&["export", "--db", db]);
        let all: Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(all.as_array().unwrap().len(), 4);
        assert_eq!(all[0]["document"]["schema"], "nicbench.run/1");
    });
}

/// The NetPIPE output file kept as a fixture: a run to import, no agent needed.
fn netpipe_fixture() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/netpipe-3.7.2-loopback.np.out")
        .display()
        .to_string()
}

/// `path` with `suffix` appended (`results.db` + `-wal`).
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

// SQLite only: the -wal file folded into the file.
#[test]
fn the_database_file_alone_holds_every_run_after_a_save() {
    let agent = AgentProcess::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let first = saved_id(&stdout(&measure(&agent, &db, "tcp", &["-t", "0.2"])), &db);
    let second = saved_id(&stdout(&measure(&agent, &db, "rr", &["-t", "0.2"])), &db);
    // `cp results.db` without its -wal, the backup anyone tries first.
    let copy = dir.path().join("copy.db");
    std::fs::copy(&db, &copy).unwrap();
    let listed = nicbench(&["runs", "--db", &db_arg(&copy)]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let text = stdout(&listed);
    for id in [first, second] {
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().next() == Some(&id.to_string())),
            "run {id} missing from the copy:\n{text}"
        );
    }
}

// SQLite only: SQLite's online backup (an archive: pg_dump).
#[test]
fn db_backup_copies_every_run_into_one_new_file_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let fixture = netpipe_fixture();
    let out = nicbench(&["import", &fixture, &fixture, "--db", &db_arg(&db)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let copy = dir.path().join("backup.db");
    let out = nicbench(&["db", "backup", &db_arg(&copy), "--db", &db_arg(&db)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with(&format!("copied {} (2 runs, ", db.display())),
        "{}",
        stdout(&out)
    );
    assert!(!beside(&copy, "-wal").exists() && !beside(&copy, "-journal").exists());
    let listed = nicbench(&["runs", "--db", &db_arg(&copy)]);
    assert_eq!(stdout(&listed).lines().filter(|l| l.contains("(netpipe)")).count(), 2);
    let again = nicbench(&["db", "backup", &db_arg(&copy), "--db", &db_arg(&db)]);
    assert_eq!(again.status.code(), Some(8));
    assert!(stderr(&again).contains("exists already"), "{}", stderr(&again));
}

/// Runs `nicbench ARGS` as a user who may not write `dir` or anything in
/// it: nobody when the tests run as root (root writes anything), else
/// this user with the directory and its files made read-only.
/// `binary` is this build's, where that user may run it.
fn as_reader(binary: &Path, args: &[&str]) -> Output {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(binary);
    command.args(args).env("COLUMNS", "1000").stdin(Stdio::null());
    if unsafe { libc::geteuid() } == 0 {
        command.uid(65534).gid(65534).env("TMPDIR", "/tmp");
    }
    command.output().unwrap()
}

/// A directory for a database that nobody reads (`shared/db`, 0755):
/// the binary beside it, outside it, so making it read-only leaves the
/// binary alone.
fn database_dir(shared: &SharedDir) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = shared.path().join("db");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Makes `dir` and every file in it read-only for everyone (0555, 0444).
fn make_read_only(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
}

/// The reading commands on the database in the read-only `dir` (in
/// `shared`): each succeeds, and nothing in `dir` changes.
fn reading_commands_work_read_only(shared: &SharedDir, dir: &Path, db: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let listing = |d: &Path| {
        let mut names: Vec<(String, u64)> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata().unwrap().len(),
                )
            })
            .collect();
        names.sort();
        names
    };
    let before = listing(dir);
    let binary = shared.binary();
    let out_dir = shared.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    std::fs::set_permissions(&out_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let db = db_arg(db);
    let report = out_dir.join("r.html").display().to_string();
    let backup = out_dir.join("b.db").display().to_string();
    for args in [
        vec!["runs", "--db", &db],
        vec!["show", "1", "--db", &db],
        vec!["export", "--format", "csv", "--db", &db],
        vec!["compare", "--metric", "peak", "--db", &db],
        vec!["report", "-o", &report, "--db", &db],
        vec!["db", "backup", &backup, "--db", &db],
    ] {
        let out = as_reader(&binary, &args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert!(!stdout(&out).is_empty(), "{args:?}");
    }
    let listed = stdout(&as_reader(&binary, &["runs", "--db", &db]));
    assert!(listed.contains(" sweep "), "{listed}");
    assert_eq!(listing(dir), before, "a reading command changed the database directory");
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
}

// SQLite only: a read-only file.
#[test]
fn reading_commands_work_on_a_read_only_database_folded_into_its_file() {
    let shared = SharedDir::new();
    let dir = database_dir(&shared);
    let db = dir.join("results.db");
    let out = nicbench(&["import", &netpipe_fixture(), "--db", &db_arg(&db)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!beside(&db, "-wal").exists(), "the import left a -wal");
    make_read_only(&dir);
    reading_commands_work_read_only(&shared, &dir, &db);
}

// SQLite only: a read-only file and its -wal.
#[test]
fn reading_commands_work_on_a_read_only_database_whose_log_holds_the_runs() {
    use nicbench::store::{import, RunMeta, RunWriter, Store};
    let scratch = tempfile::tempdir().unwrap();
    let live = scratch.path().join("live.db");
    // As a writer still running (or killed) leaves it: the run only in -wal.
    let run = import::read(Path::new(&netpipe_fixture())).unwrap();
    let mut writer = RunWriter::new(Store::open(&live).unwrap(), RunMeta::default());
    writer.finish_with_columns(&run.document, &run.columns, None).unwrap();
    let shared = SharedDir::new();
    let dir = database_dir(&shared);
    let db = dir.join("results.db");
    for suffix in ["", "-wal", "-shm"] {
        std::fs::copy(beside(&live, suffix), beside(&db, suffix)).unwrap();
    }
    drop(writer);
    assert!(std::fs::metadata(beside(&db, "-wal")).unwrap().len() > 0);
    make_read_only(&dir);
    reading_commands_work_read_only(&shared, &dir, &db);
}
