//! `nicbench import`: real iperf3 3.x JSON produced here on loopback, a
//! NetPIPE 3.7.2 output file (made on loopback, kept as a fixture), and
//! malformed files that import nothing.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::common::{nicbench, stderr};

/// `iperf3 -s -1` on 127.0.0.1 and a free port, killed when dropped.
struct Iperf3Server {
    child: Child,
    port: u16,
}

impl Iperf3Server {
    fn start() -> Iperf3Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("iperf3")
            // --forceflush: the "listening" line arrives at once through the pipe.
            .args(["-s", "-1", "--forceflush", "-B", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Built first, so that a failure below still kills the server.
        let mut server = Iperf3Server { child, port };
        let stdout = server.child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        loop {
            let line = lines.next().expect("iperf3 -s exited before listening").unwrap();
            if line.contains("Server listening on") {
                break;
            }
        }
        std::thread::spawn(move || for _ in lines.by_ref() {});
        server
    }

    /// Runs `iperf3 -c` against this server and writes its -J document to `file`.
    fn run_client(&self, extra: &[&str], file: &Path) -> Value {
        let out = Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &self.port.to_string(), "-t", "1", "-J"])
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "iperf3 -c: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        std::fs::write(file, &out.stdout).unwrap();
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Iperf3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `export --format csv` as (header, rows).
fn export_csv(db: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let out = nicbench(&["export", "--format", "csv", "--db", db]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines().map(|l| l.split(',').map(String::from).collect::<Vec<_>>());
    (lines.next().unwrap(), lines.collect())
}

#[test]
fn real_iperf3_tcp_and_udp_documents_import_with_their_figures() {
    require!(crate::iperf3::installed());
    let dir = tempfile::tempdir().unwrap();
    let (tcp_file, udp_file) = (dir.path().join("tcp.json"), dir.path().join("udp.json"));
    let tcp = Iperf3Server::start().run_client(&[], &tcp_file);
    let udp = Iperf3Server::start().run_client(&["-u", "-b", "50M"], &udp_file);
    super::postgres::on_each_backend(|db| {
        let out = nicbench(&[
            "import",
            &tcp_file.display().to_string(),
            &udp_file.display().to_string(),
            "--tag",
            "tool=iperf3",
            "--db",
            db,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let (header, rows) = export_csv(db);
        let col = |row: &[String], name: &str| row[header.iter().position(|h| h == name).unwrap()].clone();
        let number = |s: String| s.parse::<f64>().unwrap();
        assert_eq!(rows.len(), 2);
        let (t, u) = (&rows[0], &rows[1]);
        assert_eq!((col(t, "workload"), col(t, "source")), ("tcp".into(), "iperf3".into()));
        assert_eq!(
            number(col(t, "receiver_bits_per_second")),
            tcp["end"]["sum_received"]["bits_per_second"].as_f64().unwrap()
        );
        assert_eq!(
            number(col(t, "sender_bits_per_second")),
            tcp["end"]["sum_sent"]["bits_per_second"].as_f64().unwrap()
        );
        assert_eq!(col(t, "tag:tool"), "iperf3");
        assert_eq!(col(u, "workload"), "udp");
        assert_eq!(
            number(col(u, "receiver_bits_per_second")),
            udp["end"]["sum_received"]["bits_per_second"].as_f64().unwrap()
        );
        assert_eq!(
            number(col(u, "loss_percent")),
            udp["end"]["sum_received"]["lost_percent"].as_f64().unwrap()
        );
        // iperf3 carries neither MTU nor latency percentiles: left empty.
        for empty in ["client_mtu_bytes", "p99_latency_us", "agent_host", "verdict_kind"] {
            assert_eq!(col(t, empty), "", "{empty}");
        }
        let shown = nicbench(&["show", "1", "--json", "--db", db]);
        assert_eq!(serde_json::from_slice::<Value>(&shown.stdout).unwrap(), tcp);
        let listing = String::from_utf8(nicbench(&["runs", "--db", db]).stdout).unwrap();
        assert!(
            listing.contains("tcp (iperf3)") && listing.contains("udp (iperf3)"),
            "{listing}"
        );
    });
}

fn netpipe_fixture() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/netpipe-3.7.2-loopback.np.out")
        .display()
        .to_string()
}

#[test]
fn a_netpipe_file_imports_as_a_sweep_headed_by_its_peak() {
    super::postgres::on_each_backend(|db| {
        let out = nicbench(&["import", &netpipe_fixture(), "--db", db]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = std::fs::read_to_string(netpipe_fixture()).unwrap();
        let peak_mbps = text
            .lines()
            .map(|l| l.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap())
            .fold(0.0, f64::max);
        let (header, rows) = export_csv(db);
        let col = |name: &str| rows[0][header.iter().position(|h| h == name).unwrap()].clone();
        assert_eq!((col("workload"), col("source")), ("sweep".into(), "netpipe".into()));
        assert_eq!(
            col("sweep_peak_bits_per_second").parse::<f64>().unwrap(),
            peak_mbps * 1_048_576.0
        );
        assert_eq!(col("client_cpu_percent"), "");
        let shown = nicbench(&["show", "1", "--json", "--db", db]);
        let doc: Value = serde_json::from_slice(&shown.stdout).unwrap();
        assert_eq!(doc["points"].as_array().unwrap().len(), text.lines().count());
    });
}

#[test]
fn a_malformed_file_is_named_with_its_line_and_nothing_is_imported() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("broken.out");
    std::fs::write(&bad, "       1 1.08   0.00000704\n       2 oops   0.00001086\n").unwrap();
    let json = dir.path().join("cut.json");
    std::fs::write(&json, "{\"start\": {\"test_start\": ").unwrap();
    super::postgres::on_each_backend(|db| {
        let out = nicbench(&["import", &netpipe_fixture(), &bad.display().to_string(), "--db", db]);
        assert_eq!(out.status.code(), Some(2));
        let err = stderr(&out);
        assert!(err.contains(&format!("{}: line 2, byte 34", bad.display())), "{err}");
        assert!(
            err.contains("not a number") && err.contains("no file was imported"),
            "{err}"
        );
        assert!(
            super::postgres::holds_nothing(db),
            "a database was written although nothing was imported"
        );
        let out = nicbench(&["import", &json.display().to_string(), "--db", db]);
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains("cut.json: line 1, byte "), "{}", stderr(&out));
        assert!(super::postgres::holds_nothing(db));
    });
}

/// Run ids listed by `runs` (first column).
fn run_count(db: &str) -> usize {
    let out = nicbench(&["runs", "--db", db]);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.split_whitespace().next().is_some_and(|w| w.parse::<i64>().is_ok()))
        .count()
}

/// An iperf3 -J document as iperf3 prints it (one field a line), with
/// `end` and the start time given.
fn iperf3_document(timesecs: &str, end: &str) -> String {
    format!(
        "{{\n\t\"start\":\t{{\n\t\t\"timestamp\":\t{{\n\t\t\t\"timesecs\":\t{timesecs}\n\t\t}},\n\t\t\"test_start\":\t{{\n\
         \t\t\t\"protocol\":\t\"TCP\",\n\t\t\t\"num_streams\":\t1\n\t\t}}\n\t}},\n\t\"end\":\t{end}\n}}\n"
    )
}

#[test]
fn impossible_figures_are_refused_naming_file_line_and_field_and_nothing_is_imported() {
    super::postgres::on_each_backend(|db| {
        let dir = tempfile::tempdir().unwrap();
        let out = nicbench(&["import", &netpipe_fixture(), "--db", db]);
        assert!(out.status.success(), "{}", stderr(&out));
        let sum = |bits: &str| {
            format!(
                "{{\n\t\t\"sum_sent\":\t{{\n\t\t\t\"bits_per_second\":\t1e9\n\t\t}},\n\t\t\"sum_received\":\t{{\n\
             \t\t\t\"bits_per_second\":\t{bits}\n\t\t}}\n\t}}"
            )
        };
        let cpu = "{\n\t\t\"sum_received\":\t{\n\t\t\t\"bits_per_second\":\t1e9\n\t\t},\n\
               \t\t\"cpu_utilization_percent\":\t{\n\t\t\t\"host_total\":\t1e308,\n\t\t\t\"remote_total\":\t3\n\t\t}\n\t}";
        let mut nicbench_doc: Value = serde_json::from_str(
            &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run-tcp.json"))
                .unwrap(),
        )
        .unwrap();
        nicbench_doc["workload"] = Value::from("<script>alert(1)</script>");
        // Issue 41: a count, a duration or an interval's rate anywhere in the
        // document, also a rate given as a word.
        let mut negative_interval = nicbench_doc.clone();
        negative_interval["workload"] = Value::from("tcp");
        negative_interval["streams"][0]["receiver"]["intervals"][0]["bits_per_second"] = Value::from(-1.0);
        let mut words = serde_json::from_str::<Value>(&iperf3_document("1700000000", &sum("9.4e9"))).unwrap();
        words["intervals"] =
            serde_json::json!([{"sum": {"start": 0, "end": 1, "seconds": 1, "bytes": 100, "bits_per_second": "fast"}}]);
        let mut seconds = words.clone();
        seconds["intervals"][0]["sum"]["bits_per_second"] = Value::from(800);
        seconds["intervals"][0]["sum"]["seconds"] = Value::from(-10);
        let cases = [
        (
            "negative.json",
            iperf3_document("1700000000", &sum("-9.4e9")),
            "line 16: field end.sum_received.bits_per_second: -9400000000",
        ),
        (
            "year.json",
            iperf3_document("9223372036854775807", &sum("9.4e9")),
            "line 4: field start.timestamp.timesecs",
        ),
        (
            "cpu.json",
            iperf3_document("1700000000", cpu),
            "line 16: field end.cpu_utilization_percent.host_total",
        ),
        (
            "np.out",
            "1 0.06 0.0001\n2 1e308 0.0002\n".to_string(),
            "line 2, byte 14: field 2 (Mbit/s) 1e308",
        ),
        (
            "script.json",
            nicbench_doc.to_string(),
            "field workload: \"<script>alert(1)</script>\" is not a workload",
        ),
        (
            "interval.json",
            negative_interval.to_string(),
            "line 1: field streams.0.receiver.intervals.0.bits_per_second: -1 bit/s is not a measurement",
        ),
        (
            "fast.json",
            words.to_string(),
            "field intervals.0.sum.bits_per_second: \"fast\" is not a measurement: expected a number (bit/s)",
        ),
        (
            "seconds.json",
            seconds.to_string(),
            "line 1: field intervals.0.sum.seconds: -10 is not a measurement: a count or a duration is not negative",
        ),
    ];
        for (name, text, expected) in cases {
            let file = dir.path().join(name);
            std::fs::write(&file, text).unwrap();
            let out = nicbench(&["import", &netpipe_fixture(), &file.display().to_string(), "--db", db]);
            assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
            let e = stderr(&out);
            assert!(e.contains(&format!("{}: {expected}", file.display())), "{name}: {e}");
            assert!(e.contains("no file was imported"), "{e}");
            assert_eq!(
                run_count(db),
                1,
                "{name}: a file was imported although another was refused"
            );
        }
    });
}

#[test]
fn an_import_saves_every_file_in_one_transaction_and_lists_the_runs_saved() {
    let dir = tempfile::tempdir().unwrap();
    super::postgres::on_each_backend(|db| {
        let good = dir.path().join("good.json");
        let end = "{\n\t\t\"sum_received\":\t{\n\t\t\t\"bits_per_second\":\t9.4e9\n\t\t}\n\t}";
        std::fs::write(&good, iperf3_document("1700000000", end)).unwrap();
        let (fixture, good) = (netpipe_fixture(), good.display().to_string());
        let out = nicbench(&["import", &fixture, &good, "--db", db]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            text.contains(&format!("imported {good} (iperf3 tcp) as run 2")),
            "{text}"
        );
        assert!(text.ends_with(&format!("saved 2 run(s) in {db}: 1, 2\n")), "{text}");
        // A database that cannot take the write saves none of them: a
        // read-only file (root writes any file, so not under root), or a
        // PostgreSQL database whose transactions are read-only.
        use std::os::unix::fs::PermissionsExt;
        let read_only = if super::postgres::is_postgres(db) {
            super::postgres::Inside::open(db).execute("ALTER DATABASE postgres SET default_transaction_read_only = on");
            true
        } else if unsafe { libc::geteuid() } != 0 {
            std::fs::set_permissions(db, std::fs::Permissions::from_mode(0o444)).unwrap();
            true
        } else {
            false
        };
        if read_only {
            let out = nicbench(&["import", &fixture, &good, "--db", db]);
            assert_eq!(out.status.code(), Some(8), "{}", stderr(&out));
            assert!(stderr(&out).contains("is unchanged"), "{}", stderr(&out));
            assert_eq!(run_count(db), 2);
        }
    });
}

#[test]
fn an_imported_netpipe_run_draws_as_a_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("np.svg");
    let out = nicbench(&[
        "plot",
        "--kind",
        "sweep",
        &netpipe_fixture(),
        "-o",
        &svg.display().to_string(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let drawn = std::fs::read_to_string(&svg).unwrap();
    roxmltree::Document::parse(&drawn).expect("a valid SVG");
    super::postgres::on_each_backend(|db| {
        assert!(nicbench(&["import", &netpipe_fixture(), "--db", db]).status.success());
        let from_db = dir.path().join("db.svg");
        let out = nicbench(&[
            "plot",
            "--kind",
            "sweep",
            "--db",
            db,
            "-o",
            &from_db.display().to_string(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let from_db = std::fs::read_to_string(&from_db).unwrap();
        roxmltree::Document::parse(&from_db).expect("a valid SVG");
    });
}

fn run_tcp_fixture() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/run-tcp.json")
        .display()
        .to_string()
}

/// Issue 67: a trigger planted in a database ran on `import` (one rewrote
/// every rate to 1.7e308 and deleted all tags) and stayed to run again.
/// nicbench opens every database with triggers and views off: the import
/// saves its run and nothing else changes.
// SQLite only: a trigger planted in a file anyone may hand over; a
// PostgreSQL archive's triggers are its owner's (turning them off,
// session_replication_role, takes a superuser).
#[test]
fn a_trigger_planted_in_the_database_does_not_fire_on_import() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("r.db").display().to_string();
    let out = nicbench(&[
        "import",
        &netpipe_fixture(),
        &run_tcp_fixture(),
        "--db",
        &db,
        "--tag",
        "nic=a",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let before = export_csv(&db);
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TRIGGER rewrite AFTER INSERT ON runs BEGIN \
             UPDATE runs SET receiver_bits_per_second = 1.7e308, headline_value = 1.7e308; \
             DELETE FROM tags; \
         END; \
         CREATE TRIGGER planted_tag AFTER INSERT ON tags BEGIN \
             INSERT OR REPLACE INTO tags (run_id, key, value) VALUES (NEW.run_id, 'planted', 'yes'); \
         END; \
         CREATE VIEW planted_view AS SELECT id FROM runs;",
    )
    .unwrap();
    drop(conn);
    let out = nicbench(&["import", &run_tcp_fixture(), "--db", &db, "--tag", "nic=b"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (header, rows) = export_csv(&db);
    assert_eq!(header, before.0, "no tag key came or went");
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[..2], before.1[..], "the runs saved before are as they were");
    let text = rows.iter().flatten().cloned().collect::<Vec<_>>().join(",");
    assert!(!text.contains("1.7e308") && !text.contains("planted"), "{text}");
    let nic = header.iter().position(|h| h == "tag:nic").unwrap();
    assert_eq!(rows[2][nic], "b", "the new run has its own tag: {rows:?}");
    // The triggers are still in the file (nicbench does not edit what it
    // did not make) and still do not fire on the next save.
    let out = nicbench(&["import", &netpipe_fixture(), "--db", &db]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(export_csv(&db).1[..3], rows[..]);
}

/// Issue 67: one document that is not JSON failed `report` and `compare`
/// for the whole database (exit 8). It is now left out with a message
/// naming its run, and every other run is read; `show` of it says why.
#[test]
fn a_malformed_document_is_left_out_naming_its_run_and_the_others_are_read() {
    let dir = tempfile::tempdir().unwrap();
    super::postgres::on_each_backend(|db| {
        let out = nicbench(&[
            "import",
            &run_tcp_fixture(),
            &run_tcp_fixture(),
            &netpipe_fixture(),
            "--db",
            db,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let mut inside = super::postgres::Inside::open(db);
        assert_eq!(inside.execute("UPDATE runs SET document = '{not json' WHERE id = 2"), 1);
        inside.execute("DELETE FROM digests WHERE run_id = 2");
        drop(inside);
        let named = "run 2 in ";
        let html = dir.path().join("r.html").display().to_string();
        // compare reads the stored columns, and the document's parts as absent.
        let out = nicbench(&["compare", "--db", db]);
        assert!(out.status.success(), "compare: {}", stderr(&out));
        for args in [
            vec!["report", "--db", db, "-o", &html],
            vec!["export", "--db", db, "--format", "json"],
        ] {
            let out = nicbench(&args);
            let err = stderr(&out);
            assert!(out.status.success(), "{args:?}: {err}");
            assert!(
                err.contains(named) && err.contains("its document is not valid JSON") && err.contains("left out"),
                "{args:?}: {err}"
            );
            assert_eq!(err.matches(named).count(), 1, "one message: {err}");
        }
        let exported: Value =
            serde_json::from_slice(&nicbench(&["export", "--db", db, "--format", "json"]).stdout).unwrap();
        let ids: Vec<i64> = exported
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect();
        assert_eq!(ids, [1, 3]);
        let out = nicbench(&["show", "1", "--db", db]);
        assert!(out.status.success(), "{}", stderr(&out));
        let out = nicbench(&["show", "2", "--db", db]);
        assert_eq!(out.status.code(), Some(8));
        // The hint quotes the URL for the shell (its `?`), as it does a path that needs it.
        let rm = nicbench::shell::join(["nicbench", "rm", "2", "--db", db]);
        assert!(
            stderr(&out).contains("run 2 in ") && stderr(&out).contains(&format!("`{rm}` removes the run")),
            "{}",
            stderr(&out)
        );
        let out = nicbench(&["rm", "2", "--db", db, "--yes"]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(run_count(db), 2);
    });
}

/// Issue 67: a 200 MB document was imported, and then every report read it
/// (11 s and 836 MB). A file over the cap is refused at import, saying the
/// cap, and nothing is imported.
#[test]
fn a_document_over_the_size_cap_is_refused_at_import() {
    let dir = tempfile::tempdir().unwrap();
    let sum = "{\n\t\t\"sum_sent\":\t{\n\t\t\t\"bits_per_second\":\t1e9\n\t\t},\n\t\t\"sum_received\":\t{\n\
               \t\t\t\"bits_per_second\":\t1e9\n\t\t}\n\t}";
    // A valid document, padded past 64 MiB with whitespace JSON allows.
    let mut text = iperf3_document("1700000000", sum);
    text.push_str(&" ".repeat((64 << 20) + 1));
    let file = dir.path().join("big.json");
    std::fs::write(&file, text).unwrap();
    super::postgres::on_each_backend(|db| {
        let out = nicbench(&["import", &netpipe_fixture(), &file.display().to_string(), "--db", db]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("big.json is 64.0 MiB, more than the 64 MiB a document may be"),
            "{err}"
        );
        assert!(err.contains("no file was imported"), "{err}");
        assert!(super::postgres::holds_nothing(db), "{db} was written");
    });
}
