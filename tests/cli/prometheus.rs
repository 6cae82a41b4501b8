//! A real Prometheus server (Debian's `prometheus`) scrapes a mesh
//! coordinator that measures lab hosts; the series it stored must equal the
//! runs in the results database.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::{clean_env, AgentProcess, BIN};

/// Kills a child (Prometheus, the coordinator) when the test ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// GET `url` from inside the lab host `host` (Prometheus listens there).
fn get(lab: &nicbench::lab::Lab, host: &str, url: &str) -> Option<serde_json::Value> {
    let out = lab
        .command(host, "python3")
        .args([
            "-c",
            "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())",
            url,
        ])
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

#[test]
fn prometheus_scrapes_the_mesh_and_its_series_equal_the_stored_runs() {
    require_lab!();
    require!(crate::common::tool(
        "prometheus",
        &["--version"],
        "apt-get install prometheus"
    ));
    require!(crate::common::tool("python3", &["-V"], "apt-get install python3"));
    let lab = crate::common::lab_builder()
        .hosts(2)
        .via_router()
        .rate(500_000_000)
        .no_agents()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let psk = dir.path().join("psk");
    std::fs::write(&psk, "a prometheus test key, sixteen bytes or more\n").unwrap();
    let psk = psk.display().to_string();
    let agents: Vec<(&str, AgentProcess)> = ["a", "b"]
        .into_iter()
        .map(|h| {
            let agent = AgentProcess::start_with(
                lab.command(h, BIN),
                &lab.addr(h).to_string(),
                &["--psk-file", &psk, "--allow-peer-tests"],
            );
            (h, agent)
        })
        .collect();
    let members: Vec<String> = agents
        .iter()
        .map(|(h, a)| format!("{h}={}:{}", lab.addr(h), a.port))
        .collect();
    let db = dir.path().join("mesh.db").display().to_string();
    // The coordinator and Prometheus share the router's namespace (their
    // own loopback); the mesh runs again every 20 s, so its first results
    // stay on /metrics while Prometheus scrapes every second.
    let mut mesh = lab.command("r", BIN);
    mesh.arg("mesh").args(&members).args([
        "-t",
        "1s",
        "--psk-file",
        &psk,
        "--db",
        &db,
        "--every",
        "20s",
        "--metrics-listen",
        "127.0.0.1:9310",
        "--format",
        "csv",
    ]);
    let _coordinator = Killed(
        clean_env(&mut mesh)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
         scrape_configs:\n  - job_name: nicbench-mesh\n    static_configs:\n      - targets: ['127.0.0.1:9310']\n",
    )
    .unwrap();
    let _prometheus = Killed(
        lab.command("r", "prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("tsdb").display()))
            .arg("--web.listen-address=127.0.0.1:9090")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Wait (on Prometheus's own answer, at most 90 s) for both directions.
    let query = "http://127.0.0.1:9090/api/v1/query?query=nicbench_receiver_throughput_bytes_per_second";
    let deadline = Instant::now() + Duration::from_secs(90);
    let series = loop {
        let found = get(&lab, "r", query)
            .and_then(|v| v["data"]["result"].as_array().cloned())
            .unwrap_or_default();
        if found.len() >= 2 {
            break found;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never stored both pairs: {found:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    for s in &series {
        let labels = &s["metric"];
        assert_eq!(labels["job"], "nicbench-mesh");
        assert_eq!(labels["workload"], "tcp");
        assert_eq!(labels["direction"], "forward");
        let (src, dst) = (labels["src"].as_str().unwrap(), labels["dst"].as_str().unwrap());
        let value: f64 = s["value"][1].as_str().unwrap().parse().unwrap();
        // The same figure as a run in the store (the newest mesh run may
        // have landed since the scrape: any stored run of the pair).
        let ids = crate::common::nicbench(&[
            "runs",
            "--db",
            &db,
            "--tag",
            &format!("src={src}"),
            "--tag",
            &format!("dst={dst}"),
        ]);
        let stored: Vec<f64> = String::from_utf8_lossy(&ids.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().next()?.parse::<i64>().ok())
            .map(|id| {
                let doc = crate::common::nicbench_json(&["show", "--db", &db, &id.to_string(), "--json"]);
                doc["sum"]["receiver"]["bits_per_second"].as_f64().unwrap() / 8.0
            })
            .collect();
        assert!(!stored.is_empty(), "no stored run of {src}->{dst}");
        assert!(
            stored.iter().any(|b| (b - value).abs() <= b * 1e-9),
            "{src}->{dst}: Prometheus has {value} B/s, the store {stored:?}"
        );
        assert!(value > 1e6, "{src}->{dst}: {value} B/s");
    }
    let tests = get(
        &lab,
        "r",
        "http://127.0.0.1:9090/api/v1/query?query=nicbench_tests_total",
    )
    .unwrap();
    let total: f64 = tests["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["value"][1].as_str().unwrap().parse::<f64>().unwrap())
        .sum();
    assert!(total >= 2.0, "{tests}");
    drop(agents);
}
