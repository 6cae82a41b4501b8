//! Issue 29's first "Done when": a database with the demo's runs, rr runs
//! of four kinds and an imported NetPIPE file. No table cell pools unlike
//! cases, rr rows carry no throughput nor per-KB figure, the header's time
//! range leaves the untimed import out, and the host count is right; the
//! report's bars hold one case each and its header says the same.

use std::path::Path;

use nicbench::report::chart::data::{self, ChartSpec};
use nicbench::report::chart::Chart;
use nicbench::report::runs::{host_count, TimeRange};
use nicbench::store::cases::CaseBook;
use nicbench::store::compare::{Dimension, Metric};
use nicbench::store::query::Filter;
use nicbench::store::Store;
use serde_json::Value;

use super::common::*;

fn compare(db: &str, args: &[&str]) -> Value {
    let mut argv = vec!["compare", "--db", db, "--format", "json"];
    argv.extend_from_slice(args);
    nicbench_json(&argv)
}

fn labels(table: &Value) -> Vec<String> {
    table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[0].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_roundup_of_the_demo_rr_kinds_and_netpipe_pools_no_unlike_cases() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db").display().to_string();
    let out = nicbench(&["demo", "-t", "0.3", "--no-report", "--db", &db]);
    assert!(out.status.success(), "{}", stderr(&out));
    let agent = AgentProcess::start(&[]);
    let port = agent.port_arg();
    for kind in [&[][..], &["--proto", "udp", "-r", "64,1024"], &["--crr"], &["--spin"]] {
        let mut argv = vec!["rr", "127.0.0.1", "-p", &port, "-t", "0.3", "--db", &db];
        argv.extend_from_slice(kind);
        let out = nicbench(&argv);
        assert!(out.status.success(), "rr {kind:?}: {}", stderr(&out));
    }
    let netpipe = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/netpipe-3.7.2-loopback.np.out");
    let out = nicbench(&["import", netpipe.to_str().unwrap(), "--db", &db]);
    assert!(out.status.success(), "{}", stderr(&out));

    // By case (the default): every cell holds one case, for every figure.
    for metric in [
        "throughput",
        "tps",
        "p99",
        "service-demand",
        "cpu-per-transaction",
        "peak",
        "cpu",
    ] {
        let table = compare(&db, &["--metric", metric]);
        for cell in table["cells"].as_array().unwrap() {
            assert_eq!(cell["cases"].as_array().unwrap().len(), 1, "{metric}: {cell}");
        }
        assert!(table.get("separate_by").is_none(), "{metric}: {table}");
        let rows = labels(&table);
        let rr_rows = rows.iter().filter(|l| l.starts_with("rr ")).count();
        match metric {
            // rr has no throughput and no CPU per KB.
            "throughput" | "service-demand" => assert_eq!(rr_rows, 0, "{metric}: {rows:?}"),
            "tps" | "p99" | "cpu-per-transaction" => assert_eq!(rr_rows, 4, "{metric}: {rows:?}"),
            _ => {}
        }
        if metric == "tps" {
            assert_eq!(rows.len(), 4, "{rows:?}");
            for kind in ["rr TCP", "rr UDP, 64/1024 B", "rr TCP CRR", "rr TCP spin"] {
                assert!(rows.iter().any(|r| r.starts_with(kind)), "{kind}: {rows:?}");
            }
        }
        if metric == "throughput" {
            for case in ["1 stream", "4 streams", "reverse", "both ways", "8 KiB writes"] {
                assert!(rows.iter().any(|r| r.contains(case)), "{case}: {rows:?}");
            }
        }
        if metric == "peak" {
            assert!(rows.iter().any(|r| r.contains("imported from netpipe")), "{rows:?}");
        }
    }
    // Grouped by workload, the demo's tcp runs pool: the cell says how
    // many cases it holds and the table which key separates them.
    let pooled = compare(&db, &["--rows", "workload"]);
    let tcp = pooled["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["row"][0] == "tcp")
        .expect("a tcp cell");
    assert!(tcp["cases"].as_array().unwrap().len() >= 4, "{tcp}");
    assert_eq!(pooled["separate_by"], serde_json::json!(["case"]), "{pooled}");
    let text = nicbench(&["compare", "--db", &db, "--rows", "workload"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(" cases]") && text.contains("add case to --rows or --cols"),
        "{text}"
    );

    // The header's facts: the untimed import is unknown, one host.
    let store = Store::open_read_only(Path::new(&db)).unwrap();
    let runs = store.runs(&Filter::default()).unwrap();
    let range = TimeRange::of(&runs);
    assert_eq!(range.unknown, 1, "{}", range.words());
    assert!(range.first_unix_seconds.unwrap() > 1.6e9, "{}", range.words());
    assert!(range.words().ends_with("(1 run: unknown)"), "{}", range.words());
    assert_eq!(host_count(&runs), 1);

    // The report's bars, grouped by case as the report draws them: each
    // bar's runs are of one case.
    let book = CaseBook::read(&store, &data::complete(&Filter::default())).unwrap();
    for metric in ["throughput", "tps"] {
        let mut spec = ChartSpec::new("bars");
        spec.metric = Metric::parse(metric).unwrap();
        spec.group = vec![Dimension::parse("case").unwrap()];
        let Chart::Bars(bars) = data::build(&store, &Filter::default(), &spec).unwrap() else {
            panic!("{metric}: not bars")
        };
        assert!(!bars.bars.is_empty(), "{metric}");
        for bar in &bars.bars {
            let cases: std::collections::BTreeSet<&str> = bar
                .run_ids
                .iter()
                .map(|id| book.case(*id).expect("a complete run").key.as_str())
                .collect();
            assert_eq!(
                cases.len(),
                1,
                "{metric}: bar {:?} pools {cases:?}",
                bars.groups[bar.group]
            );
            assert!(!bar.run_ids.is_empty(), "{metric}: {bar:?}");
        }
        if metric == "throughput" {
            assert!(bars.groups.iter().all(|g| !g.starts_with("rr ")), "{:?}", bars.groups);
        }
    }
    // The report's header: one host, the untimed import apart from the range.
    let page = dir.path().join("report.html");
    let out = nicbench(&["report", "--db", &db, "-o", page.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    let start = html.find("<section aria-label=\"Summary\">").expect("the summary");
    let end = start + html[start..].find("</section>").unwrap();
    let mut header = String::new();
    let mut in_tag = false;
    for c in html[start..end].chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => header.push(c),
            _ => {}
        }
    }
    assert!(header.contains("hosts1"), "{header}");
    assert!(header.contains("1 run(s) without a start time"), "{header}");
    assert!(!header.contains("1970"), "{header}");
}
