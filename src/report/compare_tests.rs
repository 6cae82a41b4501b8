//! The comparison table from fixture runs saved in an in-memory store,
//! checked cell by cell in every format.

use serde_json::{json, Value};

use super::*;
use crate::store::compare::{self, Dimension};
use crate::store::query::Filter;
use crate::store::testing::store_test;
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
fn roundup(mut store: Store) -> Store {
    let runs: &[(&str, &str, u32, f64)] = &[
        ("e1000", "tcp", 1500, 900e6),
        ("e1000", "tcp", 1500, 940e6),
        ("e1000", "tcp", 1500, 920e6),
        ("e1000", "tcp", 9000, 990e6),
        ("igb", "tcp", 1500, 460e6),
        ("igb", "tcp", 9000, 495e6),
        ("igb", "udp", 1500, 300e6),
    ];
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

/// The roundup's table of `stat` (over the roundup saved into `store`).
fn table(store: Store, stat: Stat, baseline: Option<&str>) -> Table {
    table_of(&roundup(store), stat, baseline)
}

fn table_of(store: &Store, stat: Stat, baseline: Option<&str>) -> Table {
    let rows = vec![Dimension::parse("workload").unwrap(), Dimension::parse("mtu").unwrap()];
    let cols = vec![Dimension::parse("tag:nic").unwrap()];
    let metric = compare::Metric::parse("throughput").unwrap();
    let found = compare::records(store, &Filter::default(), &rows, &cols, &metric).unwrap();
    assert_eq!(found.records.len(), 7);
    let keys = |d: &[Dimension]| d.iter().map(Dimension::label).collect();
    Table::build(&found.records, &metric, stat, keys(&rows), keys(&cols), baseline).unwrap()
}

fn render(t: &Table, f: fn(&Table, &mut dyn Write) -> io::Result<()>) -> String {
    let mut out = Vec::new();
    f(t, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

store_test!(
fn text_has_one_line_per_row_and_every_cell_with_runs_and_range(store) {
    let text = render(&table(store, Stat::Median, None), Table::text);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        vec![
            "receiver throughput (throughput), Mbit/s: median of the runs in each cell (n = trials; low-high: \
             the stopping rule's interval, else the trials' min-max)",
            "workload  mtu                                  e1000           igb",
            "tcp       1500  920.00 (n=3 [3 runs], 900.00-940.00)  460.00 (n=1)",
            "tcp       9000                          990.00 (n=1)  495.00 (n=1)",
            "udp       1500                                     -  300.00 (n=1)",
        ]
    );
});

store_test!(
fn best_and_mean_pick_their_own_figure(store) {
    let store = roundup(store);
    let best = table_of(&store, Stat::Best, None);
    let mean = table_of(&store, Stat::Mean, None);
    let cell = |t: &Table| t.cell(&["tcp".into(), "1500".into()], &["e1000".into()]).unwrap().value;
    assert_eq!(cell(&best), 940e6);
    assert_eq!(cell(&mean), 920e6);
});

store_test!(
fn markdown_has_a_header_alignment_row_and_the_same_cells(store) {
    let md = render(&table(store, Stat::Median, Some("e1000")), Table::markdown);
    let lines: Vec<&str> = md.lines().collect();
    assert!(lines[0].ends_with("; xR = ratio to e1000"), "{}", lines[0]);
    assert_eq!(lines[2], "| workload | mtu | e1000 | igb |");
    assert_eq!(lines[3], "| --- | --- | ---: | ---: |");
    assert_eq!(
        lines[4],
        "| tcp | 1500 | 920.00 (n=3 [3 runs], 900.00-940.00) x1.00 | 460.00 (n=1) x0.50 |"
    );
    assert_eq!(lines[5], "| tcp | 9000 | 990.00 (n=1) x1.00 | 495.00 (n=1) x0.50 |");
    assert_eq!(lines[6], "| udp | 1500 | - | 300.00 (n=1) |");
    assert_eq!(lines.len(), 7);
});

store_test!(
fn csv_has_one_line_per_cell_in_bits_per_second(store) {
    let csv = render(&table(store, Stat::Median, Some("e1000")), Table::csv);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines,
        vec![
            "workload,mtu,tag:nic,metric,unit,stat,value,runs,trials,min,max,low,high,spread,level_percent,met,\
             unsettled,ratio,cases",
            "tcp,1500,e1000,throughput,bit/s,median,920000000,3,3,900000000,940000000,900000000,940000000,range,,,\
             false,1,\"tcp, MTU 1500\"",
            "tcp,1500,igb,throughput,bit/s,median,460000000,1,1,460000000,460000000,460000000,460000000,range,,,\
             false,0.5,\"tcp, MTU 1500\"",
            "tcp,9000,e1000,throughput,bit/s,median,990000000,1,1,990000000,990000000,990000000,990000000,range,,,\
             false,1,\"tcp, MTU 9000\"",
            "tcp,9000,igb,throughput,bit/s,median,495000000,1,1,495000000,495000000,495000000,495000000,range,,,\
             false,0.5,\"tcp, MTU 9000\"",
            "udp,1500,igb,throughput,bit/s,median,300000000,1,1,300000000,300000000,300000000,300000000,range,,,\
             false,,\"udp, MTU 1500\"",
        ]
    );
});

store_test!(
fn json_holds_every_cell(store) {
    // `compare --format json` of one figure: the roundup of one table.
    let one = crate::report::roundup::Roundup::new(vec![table(store, Stat::Median, None)]);
    let json: Value = serde_json::from_str(&render_roundup(&one, crate::report::roundup::Roundup::json)).unwrap();
    assert_eq!(json["schema"], "nicbench.compare/3");
    assert_eq!(
        json["metrics"],
        json!([{"metric": "throughput", "unit": "bit/s", "label": "receiver throughput"}])
    );
    assert_eq!(json["stat"], "median");
    assert_eq!(json["row_keys"], json!(["workload", "mtu"]));
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 5);
    assert_eq!(
        cells[0],
        json!({"row": ["tcp", "1500"], "col": ["e1000"], "cases": ["tcp, MTU 1500"],
               "figures": {"throughput": {"value": 920e6, "runs": 3, "trials": 3, "min": 900e6, "max": 940e6,
                                          "low": 900e6, "high": 940e6, "spread": "range", "unsettled": false}}})
    );
    assert_eq!(cells[4]["row"], json!(["udp", "1500"]));
});

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
fn hostile_table(mut store: Store) -> Table {
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

store_test!(
fn a_peer_host_name_is_escaped_in_text_markdown_and_csv(store) {
    let table = hostile_table(store);
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
});

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

fn save_all(mut store: Store, runs: &[Value]) -> Store {
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

store_test!(
/// Issue 29: the demo's "tcp" row pooled 1 and 4 streams into one median.
/// Grouped by workload, the cell says it holds two cases and the table
/// names the key that separates them; grouped by case (the default),
/// each case has its row. An rr run has no throughput to pool.
fn a_cell_that_pools_unlike_cases_says_so_and_names_the_key_that_separates_them(store) {
    let store = save_all(store, &[
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
    assert!(text.contains("20.00 (n=3 [3 runs], 10.00-22.00) [2 cases]"), "{text}");
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
});

store_test!(
/// A delay in seconds reads in milliseconds: the added delay of a loaded
/// run behind a 200 ms queue is "192.93" ms, not "0.19" s (nor a loopback
/// run's "0.00").
fn delays_in_seconds_are_shown_in_milliseconds(store) {
    let mut doc: Value = serde_json::from_str(include_str!("../../tests/fixtures/loaded-loopback.json")).unwrap();
    doc["sum"]["loaded"]["added_p50_seconds"] = json!(0.19293);
    let meta = RunMeta {
        command_line: "nicbench loaded b".into(),
        tags: vec![],
        trials_planned: Some(1),
        source: None,
    };
    let mut writer = RunWriter::new(store, meta);
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
});

/// A tcp run of `card` at `mtu` whose trials measured `trials` (receiver
/// rate, client CPU, agent CPU, client service demand), the first reported;
/// `rule`: its stopping rule's 99% interval of the rate and whether it met
/// the asked width.
fn card_run(card: &str, mtu: u32, trials: &[(f64, f64, f64, f64)], rule: Option<(f64, f64, bool)>) -> (String, Value) {
    let trial = |(rate, cpu, agent, demand): (f64, f64, f64, f64)| {
        json!({"sum": {"receiver": {"bits_per_second": rate}, "sender": {"bits_per_second": rate}},
               "cpu": {"client": {"utilization_percent": cpu, "service_demand_us_per_kb": demand},
                       "agent": {"utilization_percent": agent}}})
    };
    let mut doc = fixture("tcp", mtu, trials[0].0);
    doc["cpu"] = trial(trials[0])["cpu"].clone();
    doc["trials"] = Value::Array(trials.iter().map(|t| trial(*t)).collect());
    if let Some((low, high, met)) = rule {
        doc["repetition"] = json!({"metric": "receiver_bits_per_second", "unit": "bit/s", "picked_trial": 1,
            "interval": {"mean": (low + high) / 2.0, "level_percent": 99.0, "low": low, "high": high,
                         "width_percent": 1.0},
            "width_met": met});
    }
    (card.to_string(), doc)
}

fn save_cards(mut store: Store, runs: &[(String, Value)]) -> Store {
    for (card, doc) in runs {
        let meta = RunMeta {
            command_line: "nicbench tcp b".into(),
            tags: vec![format!("card={card}").parse().unwrap()],
            trials_planned: Some(1),
            source: None,
        };
        let mut writer = RunWriter::new(store, meta);
        writer.finish_document(doc, None).unwrap();
        store = writer.into_store();
    }
    store
}

/// The tables of `metrics` over `store`, MTU in rows and cards in columns.
fn roundup_of(store: &Store, metrics: &[&str], stat: Stat) -> crate::report::roundup::Roundup {
    let rows = vec![Dimension::parse("mtu").unwrap()];
    let cols = vec![Dimension::parse("tag:card").unwrap()];
    let tables = metrics
        .iter()
        .map(|m| {
            let metric = compare::Metric::parse(m).unwrap();
            let found = compare::records(store, &Filter::default(), &rows, &cols, &metric).unwrap();
            Table::build(
                &found.records,
                &metric,
                stat,
                vec!["mtu".into()],
                vec!["tag:card".into()],
                None,
            )
            .unwrap()
        })
        .collect();
    crate::report::roundup::Roundup::new(tables)
}

fn render_roundup(
    r: &crate::report::roundup::Roundup,
    f: fn(&crate::report::roundup::Roundup, &mut dyn Write) -> io::Result<()>,
) -> String {
    let mut out = Vec::new();
    f(r, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

store_test!(
/// Three figures per cell, each cell checked against the trials of its
/// runs in text, CSV and JSON; `n` counts trials (runs in brackets).
fn three_figures_per_cell_carry_their_trials_in_text_csv_and_json(store) {
    let store = save_cards(store, &[
        card_run(
            "fast",
            1500,
            &[
                (940e6, 20.0, 30.0, 0.5),
                (930e6, 22.0, 31.0, 0.6),
                (935e6, 21.0, 29.0, 0.55),
            ],
            None,
        ),
        card_run(
            "fast",
            9000,
            &[(990e6, 12.0, 18.0, 0.3), (985e6, 13.0, 17.0, 0.31)],
            None,
        ),
        card_run("slow", 1500, &[(460e6, 80.0, 60.0, 2.0)], None),
        card_run("slow", 1500, &[(480e6, 84.0, 62.0, 2.2)], None),
    ]);
    let r = roundup_of(&store, &["throughput", "cpu", "agent-cpu"], Stat::Median);
    let text = render_roundup(&r, crate::report::roundup::Roundup::text);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "receiver throughput, client CPU busy, agent CPU busy: median of the runs in each cell (of an even \
         number of runs, the mean of the middle two) (n = trials; low-high: the stopping rule's interval, else \
         the trials' min-max)"
    );
    // The cells of each line, as the columns separate them.
    let cells: Vec<Vec<&str>> = lines[1..]
        .iter()
        .map(|l| l.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect())
        .collect();
    assert_eq!(
        cells,
        [
            vec!["mtu", "figure", "fast", "slow"],
            vec![
                "1500",
                "receiver throughput, Mbit/s",
                "940.00 (n=3, 930.00-940.00)",
                "470.00 (n=2 [2 runs], 460.00-480.00)"
            ],
            vec![
                "client CPU busy, % of all cores",
                "20.0 (n=3, 20.0-22.0)",
                "82.0 (n=2 [2 runs], 80.0-84.0)"
            ],
            vec![
                "agent CPU busy, % of all cores",
                "30.0 (n=3, 29.0-31.0)",
                "61.0 (n=2 [2 runs], 60.0-62.0)"
            ],
            vec![
                "9000",
                "receiver throughput, Mbit/s",
                "990.00 (n=2, 985.00-990.00)",
                "-"
            ],
            vec!["client CPU busy, % of all cores", "12.0 (n=2, 12.0-13.0)", "-"],
            vec!["agent CPU busy, % of all cores", "18.0 (n=2, 17.0-18.0)", "-"],
        ],
        "{text}"
    );
    let csv = render_roundup(&r, crate::report::roundup::Roundup::csv);
    let csv: Vec<Vec<String>> = csv.lines().map(|l| l.split(',').map(String::from).collect()).collect();
    assert_eq!(csv.len(), 1 + 3 * 3);
    let field = |line: &[String], name: &str| -> String {
        let at = csv[0].iter().position(|h| h == name).unwrap();
        line[at].clone()
    };
    // (mtu, card, metric) -> (value, runs, trials, min, max)
    let expected = [
        (
            "1500",
            "fast",
            "throughput",
            "940000000",
            "1",
            "3",
            "930000000",
            "940000000",
        ),
        (
            "1500",
            "slow",
            "throughput",
            "470000000",
            "2",
            "2",
            "460000000",
            "480000000",
        ),
        (
            "9000",
            "fast",
            "throughput",
            "990000000",
            "1",
            "2",
            "985000000",
            "990000000",
        ),
        ("1500", "fast", "cpu", "20", "1", "3", "20", "22"),
        ("1500", "slow", "cpu", "82", "2", "2", "80", "84"),
        ("9000", "fast", "cpu", "12", "1", "2", "12", "13"),
        ("1500", "fast", "agent-cpu", "30", "1", "3", "29", "31"),
        ("1500", "slow", "agent-cpu", "61", "2", "2", "60", "62"),
        ("9000", "fast", "agent-cpu", "18", "1", "2", "17", "18"),
    ];
    for (line, want) in csv[1..].iter().zip(expected) {
        let got = (
            field(line, "mtu"),
            field(line, "tag:card"),
            field(line, "metric"),
            field(line, "value"),
            field(line, "runs"),
            field(line, "trials"),
            field(line, "min"),
            field(line, "max"),
        );
        let want = (want.0, want.1, want.2, want.3, want.4, want.5, want.6, want.7);
        assert_eq!(
            (&*got.0, &*got.1, &*got.2, &*got.3, &*got.4, &*got.5, &*got.6, &*got.7),
            want
        );
    }
    let json: Value = serde_json::from_str(&render_roundup(&r, crate::report::roundup::Roundup::json)).unwrap();
    let names: Vec<&str> = json["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["metric"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["throughput", "cpu", "agent-cpu"]);
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3);
    for (mtu, card, metric, value, runs, trials, min, max) in expected {
        let cell = cells
            .iter()
            .find(|c| c["row"] == json!([mtu]) && c["col"] == json!([card]))
            .unwrap();
        let f = &cell["figures"][metric];
        assert_eq!(
            f["value"].as_f64().unwrap(),
            value.parse::<f64>().unwrap(),
            "{mtu} {card} {metric}"
        );
        assert_eq!(f["runs"].to_string(), runs, "{mtu} {card} {metric}");
        assert_eq!(f["trials"].to_string(), trials, "{mtu} {card} {metric}");
        assert_eq!(
            f["min"].as_f64().unwrap(),
            min.parse::<f64>().unwrap(),
            "{mtu} {card} {metric}"
        );
        assert_eq!(
            f["max"].as_f64().unwrap(),
            max.parse::<f64>().unwrap(),
            "{mtu} {card} {metric}"
        );
    }
});

store_test!(
/// A figure that does not apply to a cell's runs stays empty: an rr run
/// has CPU but no throughput.
fn a_figure_that_does_not_apply_stays_empty(store) {
    let mut rr = spec_run("rr", 1, 0.0);
    rr["cpu"] = json!({"client": {"utilization_percent": 7.0}});
    let mut tcp = spec_run("tcp", 1, 5e9);
    tcp["cpu"] = json!({"client": {"utilization_percent": 9.0}});
    let store = save_all(store, &[tcp, rr]);
    let tables: Vec<Table> = ["throughput", "cpu"]
        .iter()
        .map(|m| {
            let metric = compare::Metric::parse(m).unwrap();
            let rows = vec![Dimension::parse("workload").unwrap()];
            let found = compare::records(&store, &Filter::default(), &rows, &[], &metric).unwrap();
            Table::build(
                &found.records,
                &metric,
                Stat::Median,
                vec!["workload".into()],
                vec![],
                None,
            )
            .unwrap()
        })
        .collect();
    let r = crate::report::roundup::Roundup::new(tables);
    let (_, body) = r.grid();
    let lines: Vec<Vec<&str>> = body.iter().map(|l| l.iter().map(String::as_str).collect()).collect();
    assert_eq!(
        lines,
        [
            vec!["rr", "client CPU busy, % of all cores", "7.0 (n=1)"],
            vec!["tcp", "receiver throughput, Gbit/s", "5.00 (n=1)"],
            vec!["", "client CPU busy, % of all cores", "9.0 (n=1)"],
        ]
    );
    let json: Value = serde_json::from_str(&render_roundup(&r, crate::report::roundup::Roundup::json)).unwrap();
    let rr_cell = &json["cells"][0];
    assert_eq!(rr_cell["row"], json!(["rr"]));
    assert!(rr_cell["figures"].get("throughput").is_none(), "{rr_cell}");
});

store_test!(
/// Issue 48: "rr 1500 40899 (n=1)" against "9000 16960 (n=1)" hid trials
/// from 20023 to 41391. The cells show their trials and interval; two
/// whose intervals overlap are marked `~` and named under the table.
fn a_cell_whose_interval_is_wider_than_the_difference_is_marked_and_named(store) {
    let store = save_cards(store, &[
        card_run(
            "a",
            1500,
            &[
                (40899.0, 1.0, 1.0, 1.0),
                (20023.0, 1.0, 1.0, 1.0),
                (41391.0, 1.0, 1.0, 1.0),
            ],
            Some((2000.0, 70000.0, false)),
        ),
        card_run(
            "a",
            9000,
            &[
                (16960.0, 1.0, 1.0, 1.0),
                (17100.0, 1.0, 1.0, 1.0),
                (16900.0, 1.0, 1.0, 1.0),
            ],
            Some((16500.0, 17400.0, true)),
        ),
        card_run(
            "b",
            1500,
            &[(90000.0, 1.0, 1.0, 1.0), (91000.0, 1.0, 1.0, 1.0)],
            Some((89000.0, 92000.0, true)),
        ),
    ]);
    let r = roundup_of(&store, &["throughput"], Stat::Median);
    let t = &r.tables[0];
    let text = render_roundup(&r, crate::report::roundup::Roundup::text);
    assert!(text.contains("~40.90 (n=3, 99% ci 2.00-70.00, not met)"), "{text}");
    assert!(text.contains("~16.96 (n=3, 99% ci 16.50-17.40)"), "{text}");
    // b ran two trials: no interval (issue 72: two trials' interval says
    // how few they were), their min-max, clear of a's at 1500: no mark.
    assert!(text.contains(" 90.00 (n=2, min-max 90.00-91.00)"), "{text}");
    assert!(
        text.contains("min-max: 1 cell(s) of 2 trial(s) or fewer show their trials' range"),
        "{text}"
    );
    assert!(!text.contains("~90.00"), "{text}");
    assert!(
        text.contains("~: mtu 1500 vs 9000 (a): their spreads overlap; more trials or a longer -t would separate them"),
        "{text}"
    );
    let cell = |mtu: &str, card: &str| t.cells.iter().find(|c| c.row == [mtu] && c.col == [card]).unwrap();
    assert!(cell("1500", "a").unsettled && cell("9000", "a").unsettled && !cell("1500", "b").unsettled);
    assert_eq!(cell("1500", "a").met, Some(false));
    assert_eq!(cell("1500", "a").spread, Spread::Interval);
    let json: Value = serde_json::from_str(&render_roundup(&r, crate::report::roundup::Roundup::json)).unwrap();
    assert_eq!(
        json["unsettled"],
        json!([{"metric": "throughput", "row": ["1500"], "col": ["a"], "other_row": ["9000"], "other_col": ["a"]}])
    );
    assert_eq!(json["cells"][0]["figures"]["throughput"]["level_percent"], 99.0);
});

store_test!(
/// Issue 48: compare's `best` picked the best run, not the best trial
/// (a "best of 3" table equalled the median one). Best and worst take the
/// trials; the median and mean take the runs' reported figures.
fn best_and_worst_take_the_trials(store) {
    let store = save_cards(store, &[card_run(
        "a",
        1500,
        &[
            (500e6, 30.0, 1.0, 1.0),
            (900e6, 10.0, 1.0, 1.0),
            (100e6, 50.0, 1.0, 1.0),
        ],
        None,
    )]);
    let value = |metric: &str, stat: Stat| roundup_of(&store, &[metric], stat).tables[0].cells[0].value;
    assert_eq!(value("throughput", Stat::Median), 500e6);
    assert_eq!(value("throughput", Stat::Best), 900e6);
    assert_eq!(value("throughput", Stat::Worst), 100e6);
    // CPU: lower is better.
    assert_eq!(value("cpu", Stat::Best), 10.0);
    assert_eq!(value("cpu", Stat::Worst), 50.0);
});
