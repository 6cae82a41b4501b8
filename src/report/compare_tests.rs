//! The comparison table from fixture runs saved in an in-memory store,
//! checked cell by cell in every format.

use std::path::Path;

use serde_json::{json, Value};

use super::*;
use crate::store::compare::{self, Dimension};
use crate::store::query::Filter;
use crate::store::{RunMeta, RunWriter, Store};

/// A tcp or udp document as the store sees it.
fn fixture(workload: &str, mtu: u32, receiver: f64) -> Value {
    json!({"schema": "nicbench.run/1", "workload": workload, "started_at_unix_seconds": 1.0,
           "client": {"address": "10.0.0.1:1", "facts": {"hostname": "a", "interface": {"mtu_bytes": mtu}}},
           "agent": {"address": "10.0.0.2:5201", "facts": {"hostname": "b"}},
           "spec": {"streams": 1, "direction": "forward"}, "trial": 1,
           "sum": {"receiver": {"bits_per_second": receiver}, "sender": {"bits_per_second": receiver}},
           "trials": [{"trial": 1}]})
}

/// The Gigabit roundup in small: two cards, two workloads, two MTUs;
/// e1000 has three tcp/1500 runs, one of them without the nic tag's peer.
fn roundup() -> Store {
    let runs: &[(&str, &str, u32, f64)] = &[
        ("e1000", "tcp", 1500, 900e6),
        ("e1000", "tcp", 1500, 940e6),
        ("e1000", "tcp", 1500, 920e6),
        ("e1000", "tcp", 9000, 990e6),
        ("igb", "tcp", 1500, 460e6),
        ("igb", "tcp", 9000, 495e6),
        ("igb", "udp", 1500, 300e6),
    ];
    let mut store = Store::open(Path::new(":memory:")).unwrap();
    for (nic, workload, mtu, value) in runs {
        let meta = RunMeta {
            command_line: format!("nicbench {workload} b"),
            tags: vec![format!("nic={nic}").parse().unwrap()],
            trials_planned: Some(1),
            source: None,
        };
        let mut writer = RunWriter::new(store, meta);
        writer.finish_document(&fixture(workload, *mtu, *value), None).unwrap();
        store = writer.into_store();
    }
    store
}

fn table(stat: Stat, baseline: Option<&str>) -> Table {
    let store = roundup();
    let rows = vec![Dimension::parse("workload").unwrap(), Dimension::parse("mtu").unwrap()];
    let cols = vec![Dimension::parse("tag:nic").unwrap()];
    let metric = compare::Metric::parse("throughput").unwrap();
    let found = compare::records(&store, &Filter::default(), &rows, &cols, &metric).unwrap();
    assert_eq!(found.records.len(), 7);
    let keys = |d: &[Dimension]| d.iter().map(Dimension::label).collect();
    Table::build(&found.records, &metric, stat, keys(&rows), keys(&cols), baseline).unwrap()
}

fn render(t: &Table, f: fn(&Table, &mut dyn Write) -> io::Result<()>) -> String {
    let mut out = Vec::new();
    f(t, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn text_has_one_line_per_row_and_every_cell_with_runs_and_range() {
    let text = render(&table(Stat::Median, None), Table::text);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        vec![
            "receiver throughput (throughput), Mbit/s: median of the runs in each cell (n = runs, min-max)",
            "workload  mtu                         e1000           igb",
            "tcp       1500  920.00 (n=3, 900.00-940.00)  460.00 (n=1)",
            "tcp       9000                 990.00 (n=1)  495.00 (n=1)",
            "udp       1500                            -  300.00 (n=1)",
        ]
    );
}

#[test]
fn best_and_mean_pick_their_own_figure() {
    let best = table(Stat::Best, None);
    let mean = table(Stat::Mean, None);
    let cell = |t: &Table| t.cell(&["tcp".into(), "1500".into()], &["e1000".into()]).unwrap().value;
    assert_eq!(cell(&best), 940e6);
    assert_eq!(cell(&mean), 920e6);
}

#[test]
fn markdown_has_a_header_alignment_row_and_the_same_cells() {
    let md = render(&table(Stat::Median, Some("e1000")), Table::markdown);
    let lines: Vec<&str> = md.lines().collect();
    assert!(lines[0].ends_with("; xR = ratio to e1000"), "{}", lines[0]);
    assert_eq!(lines[2], "| workload | mtu | e1000 | igb |");
    assert_eq!(lines[3], "| --- | --- | ---: | ---: |");
    assert_eq!(
        lines[4],
        "| tcp | 1500 | 920.00 (n=3, 900.00-940.00) x1.00 | 460.00 (n=1) x0.50 |"
    );
    assert_eq!(lines[5], "| tcp | 9000 | 990.00 (n=1) x1.00 | 495.00 (n=1) x0.50 |");
    assert_eq!(lines[6], "| udp | 1500 | - | 300.00 (n=1) |");
    assert_eq!(lines.len(), 7);
}

#[test]
fn csv_has_one_line_per_cell_in_bits_per_second() {
    let csv = render(&table(Stat::Median, Some("e1000")), Table::csv);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines,
        vec![
            "workload,mtu,tag:nic,metric,unit,stat,value,runs,min,max,ratio,cases",
            "tcp,1500,e1000,throughput,bit/s,median,920000000,3,900000000,940000000,1,\"tcp, MTU 1500\"",
            "tcp,1500,igb,throughput,bit/s,median,460000000,1,460000000,460000000,0.5,\"tcp, MTU 1500\"",
            "tcp,9000,e1000,throughput,bit/s,median,990000000,1,990000000,990000000,1,\"tcp, MTU 9000\"",
            "tcp,9000,igb,throughput,bit/s,median,495000000,1,495000000,495000000,0.5,\"tcp, MTU 9000\"",
            "udp,1500,igb,throughput,bit/s,median,300000000,1,300000000,300000000,,\"udp, MTU 1500\"",
        ]
    );
}

#[test]
fn json_holds_every_cell() {
    let json: Value = serde_json::from_str(&render(&table(Stat::Median, None), Table::json)).unwrap();
    assert_eq!(json["schema"], "nicbench.compare/2");
    assert_eq!(json["metric"], "throughput");
    assert_eq!(json["unit"], "bit/s");
    assert_eq!(json["stat"], "median");
    assert_eq!(json["row_keys"], json!(["workload", "mtu"]));
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 5);
    assert_eq!(
        cells[0],
        json!({"row": ["tcp", "1500"], "col": ["e1000"], "value": 920e6, "runs": 3, "min": 900e6, "max": 940e6,
               "cases": ["tcp, MTU 1500"]})
    );
    assert_eq!(cells[4]["row"], json!(["udp", "1500"]));
}

#[test]
fn unknown_names_are_refused_with_the_choices() {
    assert!(Dimension::parse("nic")
        .unwrap_err()
        .contains("use case, tag:KEY or one of workload"));
    assert!(compare::Metric::parse("speed")
        .unwrap_err()
        .contains("throughput, sender, loss"));
    let t = Table::build(
        &[],
        &compare::Metric::parse("throughput").unwrap(),
        Stat::Median,
        vec![],
        vec![],
        Some("x"),
    );
    assert!(t.unwrap_err().contains("--baseline x: no such column"));
}

/// A table by agent whose one agent named itself with a terminal title
/// sequence, a bell, a right-to-left override, a pipe and a line break.
fn hostile_table() -> Table {
    let mut store = Store::open(Path::new(":memory:")).unwrap();
    let mut doc = fixture("tcp", 1500, 940e6);
    doc["agent"]["facts"]["hostname"] = json!("evil\u{1b}]0;x\u{7}\u{202e}|b\nc");
    let meta = RunMeta {
        command_line: "nicbench tcp b".into(),
        tags: vec![],
        trials_planned: Some(1),
        source: None,
    };
    let mut writer = RunWriter::new(store, meta);
    writer.finish_document(&doc, None).unwrap();
    store = writer.into_store();
    let rows = vec![Dimension::parse("agent").unwrap()];
    let metric = compare::Metric::parse("throughput").unwrap();
    let found = compare::records(&store, &Filter::default(), &rows, &[], &metric).unwrap();
    let keys = |d: &[Dimension]| d.iter().map(Dimension::label).collect();
    Table::build(&found.records, &metric, Stat::Median, keys(&rows), vec![], None).unwrap()
}

#[test]
fn a_peer_host_name_is_escaped_in_text_markdown_and_csv() {
    let table = hostile_table();
    let raw = ['\u{1b}', '\u{7}', '\u{202e}'];
    let text = render(&table, Table::text);
    assert!(!text.contains(raw), "{text:?}");
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.contains(r"evil\x1b]0;x\x07\u{202e}|b\nc"), "{text}");
    let md = render(&table, Table::markdown);
    assert!(!md.contains(raw), "{md:?}");
    assert_eq!(
        md.lines().nth(4),
        Some(r"| evil\x1b]0;x\x07\u{202e}\|b\nc | 940.00 (n=1) |")
    );
    let csv = render(&table, Table::csv);
    assert!(!csv.contains(raw), "{csv:?}");
    assert!(csv.contains("\"evil\\x1b]0;x\\x07\\u{202e}|b\nc\""), "{csv:?}");
}

/// A run of `workload` with a whole spec, as the store sees it.
fn spec_run(workload: &str, streams: u32, receiver: f64) -> Value {
    json!({"schema": "nicbench.run/1", "workload": workload, "started_at_unix_seconds": 1.0,
           "client": {"address": "127.0.0.1:1", "facts": {"hostname": "a", "interface": {"mtu_bytes": 65536}}},
           "agent": {"address": "127.0.0.1:5201", "facts": {"hostname": "a"}},
           "spec": {"workload": workload, "duration_seconds": 1.0, "streams": streams, "direction": "forward",
                    "message_bytes": 131072, "interval_seconds": 1.0},
           "trial": 1,
           "sum": {"receiver": {"bits_per_second": receiver}, "sender": {"bits_per_second": receiver},
                   "rr": {"transactions_per_second": 5e4}},
           "trials": [{"trial": 1}]})
}

fn save_all(runs: &[Value]) -> Store {
    let mut store = Store::open(Path::new(":memory:")).unwrap();
    for doc in runs {
        let meta = RunMeta {
            command_line: "nicbench".into(),
            tags: vec![],
            trials_planned: Some(1),
            source: None,
        };
        let mut writer = RunWriter::new(store, meta);
        writer.finish_document(doc, None).unwrap();
        store = writer.into_store();
    }
    store
}

/// Issue 29: the demo's "tcp" row pooled 1 and 4 streams into one median.
/// Grouped by workload, the cell says it holds two cases and the table
/// names the key that separates them; grouped by case (the default),
/// each case has its row. An rr run has no throughput to pool.
#[test]
fn a_cell_that_pools_unlike_cases_says_so_and_names_the_key_that_separates_them() {
    let store = save_all(&[
        spec_run("tcp", 1, 10e9),
        spec_run("tcp", 4, 20e9),
        spec_run("tcp", 4, 22e9),
        spec_run("rr", 1, 1e5),
    ]);
    let metric = compare::Metric::parse("throughput").unwrap();
    let build = |rows: &str| {
        let rows = vec![Dimension::parse(rows).unwrap()];
        let found = compare::records(&store, &Filter::default(), &rows, &[], &metric).unwrap();
        assert_eq!((found.matched_runs, found.not_applicable), (4, 1));
        let keys = rows.iter().map(Dimension::label).collect();
        Table::build(&found.records, &metric, Stat::Median, keys, vec![], None).unwrap()
    };
    let pooled = build("workload");
    assert_eq!(pooled.separate_by, ["streams"]);
    let text = render(&pooled, Table::text);
    assert!(text.contains("20.00 (n=3, 10.00-22.00) [2 cases]"), "{text}");
    assert!(
        text.contains("[N cases]: 1 cell(s) pool runs of unlike cases; add streams to --rows or --cols"),
        "{text}"
    );
    let by_case = build("case");
    assert!(by_case.separate_by.is_empty());
    assert_eq!(
        by_case.rows,
        [vec!["TCP, 1 stream".to_string()], vec!["TCP, 4 streams".to_string()]]
    );
    assert!(by_case.cells.iter().all(|c| c.cases.len() == 1));
    let tps = compare::Metric::parse("tps").unwrap();
    let found = compare::records(&store, &Filter::default(), &[Dimension::Case], &[], &tps).unwrap();
    assert_eq!(found.records.len(), 1);
    // Labelled among every run matched: the same words in every table.
    assert_eq!(found.records[0].case.label, "rr TCP, 1 stream");
}

/// A delay in seconds reads in milliseconds: the added delay of a loaded
/// run behind a 200 ms queue is "192.93" ms, not "0.19" s (nor a loopback
/// run's "0.00").
#[test]
fn delays_in_seconds_are_shown_in_milliseconds() {
    let mut doc: Value = serde_json::from_str(include_str!("../../tests/fixtures/loaded-loopback.json")).unwrap();
    doc["sum"]["loaded"]["added_p50_seconds"] = json!(0.19293);
    let meta = RunMeta {
        command_line: "nicbench loaded b".into(),
        tags: vec![],
        trials_planned: Some(1),
        source: None,
    };
    let mut writer = RunWriter::new(Store::open(Path::new(":memory:")).unwrap(), meta);
    writer.finish_document(&doc, None).unwrap();
    let store = writer.into_store();
    let rows = vec![Dimension::parse("workload").unwrap()];
    let metric = compare::Metric::parse("added").unwrap();
    let found = compare::records(&store, &Filter::default(), &rows, &[], &metric).unwrap();
    let t = Table::build(
        &found.records,
        &metric,
        Stat::Median,
        vec!["workload".into()],
        vec![],
        None,
    )
    .unwrap();
    assert!(t.title().contains("(added), ms:"), "{}", t.title());
    let (_, body) = t.grid();
    assert_eq!(body[0][1], "192.93 (n=1)");
    // JSON keeps the stored unit and value.
    assert_eq!((t.unit.as_str(), t.cells[0].value), ("s", 0.19293));
}
