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
    let db = dir.path().join("results.db").display().to_string();
    let out = nicbench(&[
        "import",
        &tcp_file.display().to_string(),
        &udp_file.display().to_string(),
        "--tag",
        "tool=iperf3",
        "--db",
        &db,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (header, rows) = export_csv(&db);
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
    let shown = nicbench(&["show", "1", "--json", "--db", &db]);
    assert_eq!(serde_json::from_slice::<Value>(&shown.stdout).unwrap(), tcp);
    let listing = String::from_utf8(nicbench(&["runs", "--db", &db]).stdout).unwrap();
    assert!(
        listing.contains("tcp (iperf3)") && listing.contains("udp (iperf3)"),
        "{listing}"
    );
}

fn netpipe_fixture() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/netpipe-3.7.2-loopback.np.out")
        .display()
        .to_string()
}

#[test]
fn a_netpipe_file_imports_as_a_sweep_headed_by_its_peak() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db").display().to_string();
    let out = nicbench(&["import", &netpipe_fixture(), "--db", &db]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(netpipe_fixture()).unwrap();
    let peak_mbps = text
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap().parse::<f64>().unwrap())
        .fold(0.0, f64::max);
    let (header, rows) = export_csv(&db);
    let col = |name: &str| rows[0][header.iter().position(|h| h == name).unwrap()].clone();
    assert_eq!((col("workload"), col("source")), ("sweep".into(), "netpipe".into()));
    assert_eq!(
        col("sweep_peak_bits_per_second").parse::<f64>().unwrap(),
        peak_mbps * 1_048_576.0
    );
    assert_eq!(col("client_cpu_percent"), "");
    let shown = nicbench(&["show", "1", "--json", "--db", &db]);
    let doc: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(doc["points"].as_array().unwrap().len(), text.lines().count());
}

#[test]
fn a_malformed_file_is_named_with_its_line_and_nothing_is_imported() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("broken.out");
    std::fs::write(&bad, "       1 1.08   0.00000704\n       2 oops   0.00001086\n").unwrap();
    let json = dir.path().join("cut.json");
    std::fs::write(&json, "{\"start\": {\"test_start\": ").unwrap();
    let db = dir.path().join("results.db").display().to_string();
    let out = nicbench(&["import", &netpipe_fixture(), &bad.display().to_string(), "--db", &db]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains(&format!("{}: line 2, byte 34", bad.display())), "{err}");
    assert!(
        err.contains("not a number") && err.contains("no file was imported"),
        "{err}"
    );
    assert!(
        !Path::new(&db).exists(),
        "a database was written although nothing was imported"
    );
    let out = nicbench(&["import", &json.display().to_string(), "--db", &db]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cut.json: line 1, byte "), "{}", stderr(&out));
}
