//! `nicbench compare` over real runs against a loopback agent: several
//! figures per cell, each checked against the trials of the runs it holds
//! in text, CSV and JSON; `n` counts trials.

use serde_json::Value;

use super::common::*;

/// The figure at `pointer` of each trial of `doc`.
fn trial_values(doc: &Value, pointer: &str) -> Vec<f64> {
    doc["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.pointer(pointer).and_then(Value::as_f64))
        .collect()
}

#[test]
fn three_figures_per_cell_agree_with_the_runs_trials_in_text_csv_and_json() {
    let agent = AgentProcess::start(&[]);
    let port = agent.port_arg();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db").display().to_string();
    // Card "one": one run of 3 trials; card "two": two runs of 2 trials.
    for (card, repeat) in [("one", "3"), ("two", "2"), ("two", "2")] {
        let out = nicbench(&[
            "tcp",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "0.3",
            "--repeat",
            repeat,
            "--db",
            &db,
            "--tag",
            &format!("card={card}"),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let metrics = [
        ("throughput", "/sum/receiver/bits_per_second"),
        ("cpu", "/cpu/client/utilization_percent"),
        ("agent-cpu", "/cpu/agent/utilization_percent"),
        // Each end's own threads: what a lab's shared kernel cannot split.
        ("threads-cpu", "/cpu/client/threads_percent_of_core"),
        (
            "agent-threads-service-demand",
            "/cpu/agent/threads_service_demand_us_per_kb",
        ),
    ];
    let list = "throughput,cpu,agent-cpu,threads-cpu,agent-threads-service-demand";
    let compare = |format: &str| {
        let out = nicbench(&[
            "compare", "--db", &db, "--rows", "tag:card", "--metric", list, "--format", format,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let json: Value = serde_json::from_str(&compare("json")).unwrap();
    assert_eq!(json["schema"], "nicbench.compare/3");
    let csv = compare("csv");
    let csv: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    let at = |name: &str| csv[0].iter().position(|h| *h == name).unwrap();
    let text = compare("text");
    // The runs, by card, from the store's own documents.
    let export = nicbench_json(&["export", "--db", &db, "--format", "json"]);
    let mut checked = 0;
    for card in ["one", "two"] {
        let docs: Vec<Value> = export
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["tags"]["card"] == card)
            .map(|r| nicbench_json(&["show", &r["id"].to_string(), "--db", &db, "--json"]))
            .collect();
        let runs = docs.len();
        // The threads' figures are their CPU time over the trial's time and bytes.
        for trial in docs.iter().flat_map(|d| d["trials"].as_array().unwrap()) {
            for side in ["client", "agent"] {
                let cpu = &trial["cpu"][side];
                let busy = cpu["process"]["user_seconds"].as_f64().unwrap()
                    + cpu["process"]["system_seconds"].as_f64().unwrap();
                let percent = busy / cpu["seconds"].as_f64().unwrap() * 100.0;
                assert!(
                    same(cpu["threads_percent_of_core"].as_f64().unwrap(), percent),
                    "{side}: {cpu}"
                );
                let per_kb = busy * 1e6 / (cpu["bytes_moved"].as_f64().unwrap() / 1024.0);
                assert!(
                    same(cpu["threads_service_demand_us_per_kb"].as_f64().unwrap(), per_kb),
                    "{side}: {cpu}"
                );
            }
        }
        for (metric, pointer) in metrics {
            let mut trials: Vec<f64> = docs.iter().flat_map(|d| trial_values(d, pointer)).collect();
            if trials.is_empty() {
                // The agent's CPU is measured where the agent reports it.
                continue;
            }
            trials.sort_by(f64::total_cmp);
            let mut reported: Vec<f64> = docs
                .iter()
                .map(|d| d.pointer(pointer).unwrap().as_f64().unwrap())
                .collect();
            reported.sort_by(f64::total_cmp);
            let median = match reported.len() {
                1 => reported[0],
                _ => (reported[0] + reported[1]) / 2.0,
            };
            let (min, max) = (trials[0], trials[trials.len() - 1]);
            // JSON
            let cell = json["cells"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["row"][0] == card)
                .unwrap();
            let f = &cell["figures"][metric];
            assert_eq!(f["trials"].as_u64().unwrap() as usize, trials.len(), "{card} {metric}");
            assert_eq!(f["runs"].as_u64().unwrap() as usize, runs, "{card} {metric}");
            // The store recomputes a trial's figure from its parts: equal
            // to the document's within rounding, not always to the bit.
            assert!(
                same(f["min"].as_f64().unwrap(), min),
                "{card} {metric}: {} vs {min}",
                f["min"]
            );
            assert!(
                same(f["max"].as_f64().unwrap(), max),
                "{card} {metric}: {} vs {max}",
                f["max"]
            );
            assert!(same(f["value"].as_f64().unwrap(), median), "{card} {metric}");
            // CSV
            let line = csv
                .iter()
                .find(|l| l[0] == card && l[at("metric")] == metric)
                .unwrap_or_else(|| panic!("{card} {metric}: {csv:?}"));
            assert_eq!(line[at("trials")].parse::<usize>().unwrap(), trials.len());
            assert_eq!(line[at("runs")].parse::<usize>().unwrap(), runs);
            assert!(same(line[at("min")].parse::<f64>().unwrap(), min), "{card} {metric}");
            assert!(same(line[at("max")].parse::<f64>().unwrap(), max), "{card} {metric}");
            assert_eq!(line[at("value")].parse::<f64>().unwrap(), f["value"].as_f64().unwrap());
            checked += 1;
        }
        // Text: n counts the trials, runs in brackets when several.
        let n = match card {
            "one" => "(n=3, ".to_string(),
            _ => "(n=4 [2 runs], ".to_string(),
        };
        let line = text.lines().find(|l| l.starts_with(card)).unwrap();
        assert!(line.contains(&n), "{card}: {text}");
    }
    // Throughput, the client's CPU and its threads' for both cards at least.
    assert!(checked >= 6, "{checked} figures checked:\n{text}");
    assert!(
        text.lines().any(|l| l.contains("client threads CPU, % of a core")),
        "{text}"
    );
    assert!(text.lines().any(|l| l.contains("client CPU busy, %")), "{text}");
}

/// The one-way figures (issue 70) compare like any other: udp's median and
/// rr --one-way's two legs, each cell the run's own figure.
#[test]
fn one_way_delays_compare_by_name() {
    let agent = AgentProcess::start(&[]);
    let port = agent.port_arg();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db").display().to_string();
    for args in [&["udp", "-b", "20M"][..], &["rr", "--one-way"][..]] {
        let mut argv = vec![args[0], "127.0.0.1", "-p", &port, "-t", "0.5", "--db", &db];
        argv.extend_from_slice(&args[1..]);
        let out = nicbench(&argv);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    let export = nicbench_json(&["export", "--db", &db, "--format", "json"]);
    let doc_of = |workload: &str| {
        export
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["document"]["workload"] == workload)
            .unwrap_or_else(|| panic!("no {workload} run in {export}"))["document"]
            .clone()
    };
    for (workload, metric, pointer) in [
        ("udp", "one-way", "/sum/udp/one_way/p50_seconds"),
        ("rr", "one-way-request", "/sum/rr/one_way_request/p50_seconds"),
        ("rr", "one-way-response", "/sum/rr/one_way_response/p50_seconds"),
    ] {
        let want = doc_of(workload).pointer(pointer).and_then(Value::as_f64);
        let want = want.unwrap_or_else(|| panic!("{workload}: no {pointer}"));
        let json = nicbench_json(&[
            "compare", "--db", &db, "--rows", "workload", "--metric", metric, "--format", "json",
        ]);
        let cell = json["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["row"][0] == workload)
            .unwrap_or_else(|| panic!("{metric}: no {workload} row in {json}"));
        let got = cell["figures"][metric]["value"].as_f64().unwrap();
        // Figures are rounded to a billionth of their unit (here seconds).
        assert!((got - want).abs() <= 1e-9, "{metric}: {got} against the run's {want}");
        assert_eq!(cell["figures"][metric]["runs"], 1, "{metric}: {cell}");
    }
}

#[test]
fn a_metric_list_with_an_unknown_or_repeated_name_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db").display().to_string();
    let out = nicbench(&["compare", "--db", &db, "--metric", "throughput,speed"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--metric: unknown metric 'speed'"),
        "{}",
        stderr(&out)
    );
    let out = nicbench(&["compare", "--db", &db, "--metric", "cpu,cpu"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--metric: cpu is given twice"),
        "{}",
        stderr(&out)
    );
}

/// Equal within rounding (a relative 1e-12).
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= b.abs() * 1e-12
}
