//! The Grafana dashboards of contrib/grafana (issue 71 item 5), checked
//! offline, without a Grafana server:
//! - their structure, against what Grafana's dashboard model requires
//!   (checks written from its documentation: uid, title, schemaVersion,
//!   panels with unique ids, a type, a place on the 24-column grid, the
//!   templated data source and queries);
//! - the Prometheus dashboard's queries: every metric and label they name
//!   is one the exporter really renders (`MeshMetrics`, `AgentMetrics` and
//!   the probe, fed the recorded runs of tests/fixtures), and promtool
//!   parses every expression; a renamed metric or label fails here;
//! - the archive dashboard's SQL: every query, its Grafana macros and
//!   variables replaced as Grafana replaces them, runs on a throwaway
//!   PostgreSQL server holding real runs saved by `nicbench import`, and
//!   returns the rows and columns those runs give; a changed schema fails
//!   here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::common::{nicbench, stderr};
use crate::postgres::pg_cluster;

const PROMETHEUS_PLUGIN: &str = "prometheus";
const POSTGRES_PLUGIN: &str = "grafana-postgresql-datasource";

fn dashboard(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/grafana").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()))
}

/// The panels that hold queries (rows only group them).
fn query_panels(d: &Value) -> Vec<&Value> {
    d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] != "row")
        .collect()
}

fn variables(d: &Value) -> &Vec<Value> {
    d["templating"]["list"].as_array().unwrap()
}

// ------------------------------------------------------------ structure

/// Panel types shipped with Grafana that these dashboards may use.
const PANEL_TYPES: &[&str] = &[
    "row",
    "timeseries",
    "table",
    "stat",
    "bargauge",
    "gauge",
    "barchart",
    "piechart",
    "heatmap",
    "text",
];
/// Transformations shipped with Grafana that these dashboards may use,
/// with the options each must carry.
const TRANSFORMATIONS: &[(&str, &[&str])] = &[
    ("groupingToMatrix", &["rowField", "columnField", "valueField"]),
    ("organize", &[]),
];
/// Variables Grafana itself defines in every query.
const BUILT_IN_VARIABLES: &[&str] = &["__interval", "__rate_interval", "__range"];
/// The SQL macros the archive dashboard may use, which the SQL test below
/// knows how to expand.
const SQL_MACROS: &[&str] = &["__unixEpochFilter", "__unixEpochGroupAlias"];

/// Everything wrong with the structure of dashboard `d`, whose queries go
/// to data sources of `plugin`.
fn structure_problems(d: &Value, plugin: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut problem = |s: String| problems.push(s);
    let uid = d["uid"].as_str().unwrap_or("");
    if uid.is_empty() || uid.len() > 40 || !uid.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        problem(format!("uid {:?}: 1 to 40 letters, digits, - or _", d["uid"]));
    }
    if !d["title"].as_str().is_some_and(|t| !t.trim().is_empty()) {
        problem("no title".into());
    }
    if !d["schemaVersion"].as_u64().is_some_and(|v| v >= 36) {
        problem(format!(
            "schemaVersion {:?}: a number, 36 (Grafana 9) or later",
            d["schemaVersion"]
        ));
    }
    if !d["id"].is_null() {
        problem(
            "id must be null: the server numbers an imported dashboard, and a fixed id would overwrite another".into(),
        );
    }
    for key in ["from", "to"] {
        if !d["time"][key].is_string() {
            problem(format!("time.{key} is not a string"));
        }
    }
    if !d["tags"].as_array().is_some_and(|t| t.iter().all(Value::is_string)) {
        problem("tags: a list of strings".into());
    }
    if !d["templating"]["list"].is_array() || !d["panels"].as_array().is_some_and(|p| !p.is_empty()) {
        problem("templating.list and a non-empty panels list are required".into());
        return problems;
    }

    // The data source is a variable of type datasource, so the file imports
    // into any Grafana whatever its data sources are called.
    let data_sources: Vec<&Value> = variables(d).iter().filter(|v| v["type"] == "datasource").collect();
    let ds_name = match data_sources.as_slice() {
        [v] if v["query"] == plugin => v["name"].as_str().unwrap_or("").to_string(),
        _ => {
            problem(format!(
                "exactly one variable of type datasource with query {plugin:?} is required"
            ));
            String::new()
        }
    };
    let wanted_ds = serde_json::json!({"type": plugin, "uid": format!("${{{ds_name}}}")});
    let mut names = BTreeSet::new();
    for v in variables(d) {
        let name = v["name"].as_str().unwrap_or("");
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            problem(format!("variable name {:?}: letters, digits and _", v["name"]));
        }
        if !names.insert(name.to_string()) {
            problem(format!("variable {name} is declared twice"));
        }
        let kind = v["type"].as_str().unwrap_or("");
        if !["query", "custom", "constant", "interval", "textbox", "datasource"].contains(&kind) {
            problem(format!("variable {name}: unknown type {kind:?}"));
        }
        if kind == "query" {
            if v["datasource"] != wanted_ds {
                problem(format!("variable {name}: its datasource must be {wanted_ds}"));
            }
            if !v["query"].as_str().is_some_and(|q| !q.trim().is_empty()) {
                problem(format!("variable {name}: no query"));
            }
        }
    }

    let mut ids = BTreeSet::new();
    let mut boxes: Vec<(u64, [u64; 4])> = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        let id = p["id"].as_u64().unwrap_or(0);
        let title = p["title"].as_str().unwrap_or("");
        let at = format!("panel {id} {title:?}");
        if id == 0 || !ids.insert(id) {
            problem(format!("{at}: ids must be positive and unique"));
        }
        if title.trim().is_empty() {
            problem(format!("{at}: no title"));
        }
        let kind = p["type"].as_str().unwrap_or("");
        if !PANEL_TYPES.contains(&kind) {
            problem(format!("{at}: unknown panel type {kind:?}"));
        }
        let g = &p["gridPos"];
        let grid = ["x", "y", "w", "h"].map(|k| g[k].as_u64());
        match grid {
            [Some(x), Some(y), Some(w), Some(h)] if w >= 1 && x + w <= 24 && h >= 1 => {
                for (other, [ox, oy, ow, oh]) in &boxes {
                    if x < ox + ow && *ox < x + w && y < oy + oh && *oy < y + h {
                        problem(format!("{at}: overlaps panel {other} on the grid"));
                    }
                }
                boxes.push((id, [x, y, w, h]));
            }
            _ => problem(format!(
                "{at}: gridPos needs whole x, y, w, h within 24 columns, got {g}"
            )),
        }
        if kind == "row" {
            continue;
        }
        if p["datasource"] != wanted_ds {
            problem(format!("{at}: datasource must be {wanted_ds}, got {}", p["datasource"]));
        }
        if !p["fieldConfig"]["defaults"].is_object() || !p["fieldConfig"]["overrides"].is_array() {
            problem(format!("{at}: fieldConfig needs defaults and overrides"));
        }
        let targets = p["targets"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if targets.is_empty() {
            problem(format!("{at}: no targets"));
        }
        let mut refs = BTreeSet::new();
        for t in targets {
            let r = t["refId"].as_str().unwrap_or("");
            if r.is_empty() || !refs.insert(r) {
                problem(format!("{at}: refIds must be present and unique"));
            }
            if !t["datasource"].is_null() && t["datasource"] != wanted_ds {
                problem(format!("{at} target {r}: datasource must be {wanted_ds}"));
            }
            let (field, query) = if plugin == PROMETHEUS_PLUGIN {
                ("expr", t["expr"].as_str())
            } else {
                if !["table", "time_series"].contains(&t["format"].as_str().unwrap_or("")) || t["rawQuery"] != true {
                    problem(format!("{at} target {r}: a raw SQL query, format table or time_series"));
                }
                ("rawSql", t["rawSql"].as_str())
            };
            match query {
                Some(q) if !q.trim().is_empty() => {
                    for name in referenced_variables(q) {
                        let known = names.contains(&name)
                            || BUILT_IN_VARIABLES.contains(&name.as_str())
                            || SQL_MACROS.contains(&name.as_str());
                        if !known {
                            problem(format!("{at} target {r}: ${name} is not a variable of the dashboard"));
                        }
                    }
                }
                _ => problem(format!("{at} target {r}: no {field}")),
            }
        }
        for t in p["transformations"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
            let id = t["id"].as_str().unwrap_or("");
            match TRANSFORMATIONS.iter().find(|(name, _)| *name == id) {
                Some((_, options)) => {
                    for o in *options {
                        if !t["options"][o].is_string() {
                            problem(format!("{at}: transformation {id} needs options.{o}"));
                        }
                    }
                }
                None => problem(format!("{at}: unknown transformation {id:?}")),
            }
        }
    }
    problems
}

/// The names after `$` (or in `${...}`) in a query.
fn referenced_variables(query: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = query;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        let braced = rest.starts_with('{');
        let body = if braced { &rest[1..] } else { rest };
        let name: String = body
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        names.push(name);
    }
    names
}

#[test]
fn both_dashboards_have_the_structure_grafana_requires() {
    for (file, plugin) in [
        ("nicbench-prometheus.json", PROMETHEUS_PLUGIN),
        ("nicbench-archive.json", POSTGRES_PLUGIN),
    ] {
        let d = dashboard(file);
        let problems = structure_problems(&d, plugin);
        assert!(problems.is_empty(), "contrib/grafana/{file}:\n{}", problems.join("\n"));
    }
    let uids = ["nicbench-prometheus.json", "nicbench-archive.json"].map(|f| dashboard(f)["uid"].clone());
    assert_ne!(
        uids[0], uids[1],
        "two dashboards with one uid: importing one replaces the other"
    );
}

#[test]
fn the_structure_check_catches_what_grafana_would_refuse() {
    let good = dashboard("nicbench-archive.json");
    assert!(structure_problems(&good, POSTGRES_PLUGIN).is_empty());
    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut d = good.clone();
        edit(&mut d);
        structure_problems(&d, POSTGRES_PLUGIN)
    };
    assert!(!broken(&|d| d["panels"][1]["id"] = d["panels"][0]["id"].clone()).is_empty());
    assert!(!broken(&|d| d["panels"][0]["gridPos"]["w"] = 30.into()).is_empty());
    assert!(!broken(&|d| d["panels"][1]["gridPos"] = d["panels"][0]["gridPos"].clone()).is_empty());
    assert!(!broken(&|d| d["panels"][0]["datasource"]["uid"] = "P1809F7CD0C75ACF3".into()).is_empty());
    assert!(!broken(&|d| d["panels"][0]["targets"][0]["rawSql"] = "SELECT $nosuchvariable".into()).is_empty());
    assert!(!broken(&|d| d["schemaVersion"] = Value::Null).is_empty());
    assert!(!broken(&|d| d["uid"] = "a uid with spaces".into()).is_empty());
    assert!(structure_problems(&good, PROMETHEUS_PLUGIN).len() > 1);
}

// ------------------------------------------------------------ Prometheus

fn fixture(name: &str) -> nicbench::model::RunResult {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every sample name the exporter renders, with the label names it carries:
/// a mesh that recorded a tcp, a bidirectional udp and an rr run and a
/// failure of every reason; an agent that served, refused and closed; a
/// probe that gave a result and one that failed.
fn exported_series() -> BTreeMap<String, BTreeSet<String>> {
    use nicbench::metrics::*;
    let mesh = MeshMetrics::new();
    mesh.record_run("node-a", "node-b", &fixture("run-tcp.json"));
    mesh.record_run("node-b", "node-a", &fixture("run-udp-bidir.json"));
    mesh.record_run("node-a", "node-c", &fixture("run-rr.json"));
    for reason in FailureReason::ALL {
        mesh.record_failure("node-c", "node-a", "tcp", reason);
    }
    let agent = AgentMetrics::default();
    agent.connection_accepted();
    agent.test_served("tcp");
    agent.refused(RefusalReason::Busy);
    agent.closed(CloseReason::Oversized);
    agent.peer_test("tcp", PeerTestOutcome::Done);
    agent.set_host_facts(&fixture("run-tcp.json").agent.facts);
    let texts = [
        mesh.render(),
        agent.render(),
        probe_exposition("node-b", &fixture("run-rr.json")),
        probe_failure_exposition("node-b", std::time::Duration::from_secs(1)),
    ];
    let mut series: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in texts.iter().flat_map(|t| t.lines()) {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let end = line.find(['{', ' ']).unwrap_or(line.len());
        let labels = series.entry(line[..end].to_string()).or_default();
        if let Some(inside) = line[end..].strip_prefix('{').and_then(|r| r.split_once('}')) {
            for pair in split_outside_quotes(inside.0, ',') {
                if let Some((k, _)) = pair.split_once('=') {
                    labels.insert(k.trim().to_string());
                }
            }
        }
    }
    series
}

fn split_outside_quotes(s: &str, sep: char) -> Vec<String> {
    let (mut parts, mut cur, mut quoted, mut escaped) = (Vec::new(), String::new(), false, false);
    for c in s.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            c if c == sep && !quoted => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        parts.push(cur);
    }
    parts
}

/// Labels Prometheus adds to every series it scrapes.
const TARGET_LABELS: &[&str] = &["instance", "job"];
const AGGREGATIONS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
];
const LABEL_LIST_KEYWORDS: &[&str] = &["by", "without", "on", "ignoring", "group_left", "group_right"];
const OPERATOR_KEYWORDS: &[&str] = &["and", "or", "unless", "bool", "offset"];

/// What a PromQL expression names: metrics with the labels matched on
/// each, and the labels of `by`, `on`, ... lists.
#[derive(Debug, Default)]
struct Names {
    metrics: Vec<(String, Vec<String>)>,
    grouping: Vec<String>,
}

/// A small reader of the PromQL these dashboards write: strings and range
/// brackets skipped, `name{label="v", ...}` selectors, functions,
/// aggregations and label lists told apart. promtool checks the syntax.
fn promql_names(expr: &str) -> Result<Names, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = Names::default();
    let mut i = 0;
    let skip_ws = |mut j: usize| {
        while j < chars.len() && chars[j].is_whitespace() {
            j += 1;
        }
        j
    };
    let close = |from: usize, open: char, shut: char| -> Result<usize, String> {
        let mut j = from;
        let mut quoted = false;
        while j < chars.len() {
            match chars[j] {
                '\\' if quoted => j += 1,
                '"' => quoted = !quoted,
                c if c == shut && !quoted => return Ok(j),
                _ => {}
            }
            j += 1;
        }
        Err(format!("{open} at {from} is not closed in {expr:?}"))
    };
    let matcher_labels = |inside: String| -> Vec<String> {
        split_outside_quotes(&inside, ',')
            .iter()
            .filter_map(|m| {
                let name: String = m
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                (!name.is_empty()).then_some(name)
            })
            .collect()
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            i = close(i + 1, '"', '"')? + 1;
        } else if c == '[' {
            i = close(i + 1, '[', ']')? + 1;
        } else if c == '{' {
            let end = close(i + 1, '{', '}')?;
            let labels = matcher_labels(chars[i + 1..end].iter().collect());
            names.metrics.push((String::new(), labels));
            i = end + 1;
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = skip_ws(i);
            let followed_by = chars.get(next).copied();
            if LABEL_LIST_KEYWORDS.contains(&word.as_str()) {
                if followed_by == Some('(') {
                    let end = close(next + 1, '(', ')')?;
                    let list: String = chars[next + 1..end].iter().collect();
                    names
                        .grouping
                        .extend(list.split(',').map(|l| l.trim().to_string()).filter(|l| !l.is_empty()));
                    i = end + 1;
                }
            } else if AGGREGATIONS.contains(&word.as_str())
                || OPERATOR_KEYWORDS.contains(&word.as_str())
                || followed_by == Some('(')
            {
                // an aggregation, an operator or a function (time(), rate(...)): no series
            } else if followed_by == Some('{') {
                let end = close(next + 1, '{', '}')?;
                let labels = matcher_labels(chars[next + 1..end].iter().collect());
                names.metrics.push((word, labels));
                i = end + 1;
            } else {
                names.metrics.push((word, Vec::new()));
            }
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c == '$' {
            // a Grafana variable outside a string: its name is not a metric
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    Ok(names)
}

/// What is wrong with `expr` (legend `legend`) against the exported series.
fn promql_problems(expr: &str, legend: &str, exported: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let names = match promql_names(expr) {
        Ok(n) => n,
        Err(e) => return vec![e],
    };
    let mut problems = Vec::new();
    let mut available: BTreeSet<String> = TARGET_LABELS.iter().map(|s| s.to_string()).collect();
    if names.metrics.is_empty() {
        problems.push(format!("{expr:?} names no metric"));
    }
    for (metric, labels) in &names.metrics {
        let Some(has) = exported.get(metric) else {
            problems.push(format!("{expr:?}: {metric:?} is not a series nicbench exports"));
            continue;
        };
        available.extend(has.iter().cloned());
        for l in labels {
            if !has.contains(l) && !TARGET_LABELS.contains(&l.as_str()) {
                problems.push(format!("{expr:?}: {metric} has no label {l:?} (it has {has:?})"));
            }
        }
    }
    let legend_labels = legend
        .split("{{")
        .skip(1)
        .filter_map(|p| p.split_once("}}"))
        .map(|(l, _)| l.trim().to_string());
    for l in names.grouping.iter().cloned().chain(legend_labels) {
        if !available.contains(&l) {
            problems.push(format!("{expr:?}: label {l:?} is on none of its series"));
        }
    }
    problems
}

/// `label_values(metric, label)` of a Prometheus query variable.
fn label_values_problems(query: &str, exported: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let Some(args) = query.strip_prefix("label_values(").and_then(|q| q.strip_suffix(')')) else {
        return vec![format!(
            "variable query {query:?}: expected label_values(METRIC, LABEL)"
        )];
    };
    let Some((metric, label)) = args.split_once(',') else {
        return vec![format!(
            "variable query {query:?}: expected label_values(METRIC, LABEL)"
        )];
    };
    match exported.get(metric.trim()) {
        Some(labels) if labels.contains(label.trim()) => Vec::new(),
        Some(labels) => vec![format!("{query:?}: {metric} has no label {label} ({labels:?})")],
        None => vec![format!("{query:?}: {metric} is not a series nicbench exports")],
    }
}

#[test]
fn every_prometheus_query_names_series_and_labels_nicbench_exports() {
    let exported = exported_series();
    // the families the dashboard is about must be among them
    for name in [
        "nicbench_receiver_throughput_bytes_per_second",
        "nicbench_rtt_seconds",
        "nicbench_tests_failed_total",
        "nicbench_agent_tests_refused_total",
    ] {
        assert!(exported.contains_key(name), "{name} not rendered: {exported:?}");
    }
    let d = dashboard("nicbench-prometheus.json");
    let mut problems = Vec::new();
    for p in query_panels(&d) {
        for t in p["targets"].as_array().unwrap() {
            let legend = t["legendFormat"].as_str().unwrap_or("");
            for e in promql_problems(t["expr"].as_str().unwrap(), legend, &exported) {
                problems.push(format!("panel {:?}: {e}", p["title"]));
            }
        }
    }
    for v in variables(&d).iter().filter(|v| v["type"] == "query") {
        problems.extend(label_values_problems(v["query"].as_str().unwrap(), &exported));
    }
    assert!(
        problems.is_empty(),
        "contrib/grafana/nicbench-prometheus.json:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_renamed_metric_or_label_fails_the_prometheus_check() {
    let exported = exported_series();
    let good = r#"sum by (src, reason) (increase(nicbench_tests_failed_total{dst=~"$dst"}[1h]))"#;
    assert!(promql_problems(good, "{{src}} {{reason}}", &exported).is_empty());
    for (expr, legend) in [
        (
            r#"sum by (src) (increase(nicbench_tests_failures_total{dst=~"$dst"}[1h]))"#,
            "",
        ),
        (r#"sum by (source) (increase(nicbench_tests_failed_total[1h]))"#, ""),
        (r#"nicbench_rtt_seconds{quantile="99"}"#, ""),
        (r#"nicbench_rtt_seconds"#, "{{cause}}"),
        (
            r#"process_cpu_seconds_total and on (instance) nicbench_version_info"#,
            "",
        ),
    ] {
        assert!(
            !promql_problems(expr, legend, &exported).is_empty(),
            "{expr:?} {legend:?} passed the check"
        );
    }
}

/// The expression with the dashboard's variables given values, as a
/// Prometheus rule may hold it.
fn concrete_promql(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$__interval", "1m")
        .replace("$__range", "6h")
        .replace("$workload", "tcp")
        .replace("$src", ".+")
        .replace("$dst", ".+")
}

#[test]
fn promtool_parses_every_prometheus_query() {
    require!(crate::common::tool(
        "promtool",
        &["--version"],
        "apt-get install prometheus"
    ));
    let d = dashboard("nicbench-prometheus.json");
    let mut rules = String::from("groups:\n  - name: nicbench-grafana\n    rules:\n");
    for p in query_panels(&d) {
        for t in p["targets"].as_array().unwrap() {
            let expr = concrete_promql(t["expr"].as_str().unwrap());
            assert!(!expr.contains('$'), "a variable left in {expr:?}");
            rules.push_str(&format!(
                "      - record: nicbench:grafana_panel_{}_{}\n        expr: {}\n",
                p["id"],
                t["refId"].as_str().unwrap(),
                serde_json::to_string(&expr).unwrap()
            ));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.yml");
    std::fs::write(&file, &rules).unwrap();
    let out = std::process::Command::new("promtool")
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool check rules: {}{}\n{rules}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

// ------------------------------------------------------------ archive (SQL)

/// The time range the SQL runs over, Unix seconds.
#[derive(Clone, Copy)]
struct Range {
    from: i64,
    to: i64,
}

/// Grafana's PostgreSQL macros as its documentation gives them:
/// `$__unixEpochFilter(c)` is `c >= FROM AND c <= TO`;
/// `$__unixEpochGroupAlias(c, '1d')` is `floor(c/86400)*86400 AS "time"`.
fn expand_macros(sql: &str, range: Range) -> String {
    let mut out = String::new();
    let mut rest = sql;
    while let Some(at) = rest.find("$__") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 3..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let args_at = &after[name.len()..];
        let close = args_at
            .find(')')
            .unwrap_or_else(|| panic!("macro {name} without arguments in {sql}"));
        let args: Vec<&str> = args_at[1..close].split(',').map(str::trim).collect();
        let expanded = match (name.as_str(), args.as_slice()) {
            ("unixEpochFilter", [column]) => format!("{column} >= {} AND {column} <= {}", range.from, range.to),
            ("unixEpochGroupAlias", [column, interval]) => {
                let interval = interval.trim_matches('\'');
                let (n, unit) = interval.split_at(interval.len() - 1);
                let seconds = n.parse::<i64>().unwrap()
                    * match unit {
                        "s" => 1,
                        "m" => 60,
                        "h" => 3600,
                        "d" => 86400,
                        _ => panic!("interval {interval}"),
                    };
                format!("floor({column}/{seconds})*{seconds} AS \"time\"")
            }
            _ => panic!("the test does not know Grafana's macro ${name}({args:?}): add it here"),
        };
        out.push_str(&expanded);
        rest = &args_at[close + 1..];
    }
    out.push_str(rest);
    out
}

/// Variables as Grafana's SQL data sources put them in a query: a value of
/// a single-valued variable as it is (quotes doubled), those of a
/// multi-valued or All variable quoted and joined by commas.
fn expand_variables(sql: &str, values: &BTreeMap<String, (bool, Vec<String>)>) -> String {
    let mut out = sql.to_string();
    // longest names first, so $client never eats part of $client_x
    let mut names: Vec<&String> = values.keys().collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    for name in names {
        let (quoted, vals) = &values[name];
        let text = if *quoted {
            vals.iter()
                .map(|v| format!("'{}'", v.replace('\'', "''")))
                .collect::<Vec<_>>()
                .join(",")
        } else {
            vals[0].replace('\'', "''")
        };
        out = out
            .replace(&format!("${{{name}}}"), &text)
            .replace(&format!("${name}"), &text);
    }
    out
}

/// A query's result: column names and rows of text values (NULL = None).
struct Answer {
    columns: Vec<String>,
    rows: Vec<Vec<Option<String>>>,
}

fn run_sql(client: &mut postgres::Client, sql: &str) -> Answer {
    let statement = client.prepare(sql).unwrap_or_else(|e| panic!("{e:?}\n{sql}"));
    let columns = statement.columns().iter().map(|c| c.name().to_string()).collect();
    let rows = client
        .simple_query(sql)
        .unwrap_or_else(|e| panic!("{e:?}\n{sql}"))
        .into_iter()
        .filter_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => Some((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect()),
            _ => None,
        })
        .collect();
    Answer { columns, rows }
}

impl Answer {
    fn column(&self, name: &str) -> Vec<Option<String>> {
        let i = self
            .columns
            .iter()
            .position(|c| c == name)
            .unwrap_or_else(|| panic!("no column {name} in {:?}", self.columns));
        self.rows.iter().map(|r| r[i].clone()).collect()
    }

    fn numbers(&self, name: &str) -> Vec<f64> {
        self.column(name)
            .into_iter()
            .map(|v| v.expect("a number, not NULL").parse().unwrap())
            .collect()
    }

    fn texts(&self, name: &str) -> Vec<String> {
        self.column(name).into_iter().map(|v| v.unwrap_or_default()).collect()
    }
}

/// A recorded run document of tests/fixtures with its hosts renamed, so
/// the archive holds several pairs.
fn renamed(name: &str, client: &str, agent: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["client"]["facts"]["hostname"] = client.into();
    doc["agent"]["facts"]["hostname"] = agent.into();
    doc
}

fn panel<'a>(d: &'a Value, title_starts: &str) -> &'a Value {
    query_panels(d)
        .into_iter()
        .find(|p| p["title"].as_str().unwrap().starts_with(title_starts))
        .unwrap_or_else(|| panic!("no panel titled {title_starts}..."))
}

fn close_to(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn every_archive_query_runs_on_postgresql_and_returns_the_stored_runs() {
    let cluster = require!(pg_cluster::Cluster::start());
    let url = cluster.url("postgres");
    let dir = tempfile::tempdir().unwrap();
    let runs = [
        ("run-tcp.json", "node-a", "node-b"),
        ("run-tcp-repeat.json", "node-a", "node-b"),
        ("run-rr.json", "node-a", "node-c"),
        ("run-udp-bidir.json", "node-b", "node-a"),
    ];
    let mut files = Vec::new();
    let mut docs = BTreeMap::new();
    for (name, client, agent) in runs {
        let doc = renamed(name, client, agent);
        let file = dir.path().join(name);
        std::fs::write(&file, serde_json::to_vec(&doc).unwrap()).unwrap();
        files.push(file.display().to_string());
        docs.insert(name, doc);
    }
    let mut argv = vec!["import"];
    argv.extend(files.iter().map(String::as_str));
    argv.extend(["--db", &url]);
    let out = nicbench(&argv);
    assert!(out.status.success(), "import: {}", stderr(&out));

    let d = dashboard("nicbench-archive.json");
    let mut client = cluster.client("postgres");
    let starts: Vec<f64> = docs
        .values()
        .map(|d| d["started_at_unix_seconds"].as_f64().unwrap())
        .collect();
    let range = Range {
        from: starts.iter().copied().fold(f64::MAX, f64::min) as i64 - 86400,
        to: starts.iter().copied().fold(f64::MIN, f64::max) as i64 + 86400,
    };

    // The variables' own queries, and their values as the panels get them.
    let mut values = BTreeMap::new();
    for v in variables(&d).iter().filter(|v| v["type"] == "query") {
        let answer = run_sql(&mut client, v["query"].as_str().unwrap());
        assert_eq!(answer.columns.len(), 1, "variable {}: one column", v["name"]);
        let found: Vec<String> = answer.rows.into_iter().map(|r| r[0].clone().unwrap()).collect();
        let quoted = v["multi"] == true || v["includeAll"] == true;
        values.insert(v["name"].as_str().unwrap().to_string(), (quoted, found));
    }
    let of = |name: &str| values[name].1.clone();
    assert_eq!(of("workload"), ["rr", "tcp", "udp"]);
    assert_eq!(of("client"), ["node-a", "node-b"]);
    assert_eq!(of("agent"), ["node-a", "node-b", "node-c"]);
    values.get_mut("workload").unwrap().1 = vec!["tcp".into()];

    let query = |p: &Value, range: Range, values: &BTreeMap<String, (bool, Vec<String>)>| -> String {
        let sql = expand_variables(
            &expand_macros(p["targets"][0]["rawSql"].as_str().unwrap(), range),
            values,
        );
        assert!(!sql.contains('$'), "something left unexpanded in {sql}");
        sql
    };
    let mut answers = BTreeMap::new();
    for p in query_panels(&d) {
        let answer = run_sql(&mut client, &query(p, range, &values));
        if p["targets"][0]["format"] == "time_series" {
            assert_eq!(
                answer.columns[0], "time",
                "panel {:?}: a time series starts with time",
                p["title"]
            );
            for t in answer.numbers("time") {
                assert!(t >= range.from as f64 && t <= range.to as f64);
            }
        }
        for t in p["transformations"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
            for field in ["rowField", "columnField", "valueField"] {
                let f = t["options"][field].as_str().unwrap();
                assert!(
                    answer.columns.iter().any(|c| c == f),
                    "panel {:?}: no column {f}",
                    p["title"]
                );
            }
        }
        answers.insert(p["title"].as_str().unwrap().to_string(), answer);
    }
    let answer = |title: &str| &answers[panel(&d, title)["title"].as_str().unwrap()];
    let figure = |name: &str, pointer: &str| docs[name].pointer(pointer).unwrap().as_f64().unwrap();

    let throughput = answer("Receiver throughput per pair");
    assert_eq!(throughput.texts("metric"), ["node-a → node-b forward"; 2]);
    let expected = [
        figure("run-tcp.json", "/sum/receiver/bits_per_second"),
        figure("run-tcp-repeat.json", "/sum/receiver/bits_per_second"),
    ];
    let got = throughput.numbers("receiver throughput");
    assert!(
        got.iter().zip(expected).all(|(g, e)| close_to(*g, e)),
        "{got:?} vs {expected:?}"
    );
    let times = throughput.numbers("time");
    assert!(close_to(times[0], figure("run-tcp.json", "/started_at_unix_seconds")));

    let latency = answer("Request/response latency per pair");
    assert_eq!(latency.texts("metric"), ["node-a → node-c rr"]);
    assert!(close_to(
        latency.numbers("p50")[0],
        figure("run-rr.json", "/sum/rr/latency/p50_us")
    ));
    assert!(close_to(
        latency.numbers("p99")[0],
        figure("run-rr.json", "/sum/rr/latency/p99_us")
    ));

    // the latest tcp run of the pair, not the first
    let heat = answer("Heat map");
    assert_eq!(heat.texts("client"), ["node-a"]);
    assert_eq!(heat.texts("agent"), ["node-b"]);
    assert!(close_to(heat.numbers("throughput")[0], expected[1]));

    let per_day = answer("Runs per day");
    let mut counted: BTreeMap<String, f64> = BTreeMap::new();
    for (w, n) in per_day.texts("metric").into_iter().zip(per_day.numbers("runs")) {
        *counted.entry(w).or_default() += n;
    }
    assert_eq!(
        counted,
        BTreeMap::from([("rr".into(), 1.0), ("tcp".into(), 2.0), ("udp".into(), 1.0)])
    );
    for t in per_day.numbers("time") {
        assert_eq!(t % 86400.0, 0.0, "a day starts at midnight UTC");
    }

    let verdicts = answer("Runs by verdict");
    let by_kind: BTreeMap<String, f64> = verdicts
        .texts("verdict")
        .into_iter()
        .zip(verdicts.numbers("runs"))
        .collect();
    assert_eq!(
        by_kind,
        BTreeMap::from([
            ("cpu_bound".into(), 1.0),
            ("cpu_starved".into(), 2.0),
            ("none".into(), 1.0)
        ])
    );

    let unfinished = answer("Runs that did not finish");
    assert!(unfinished.rows.is_empty(), "every imported run is complete");
    assert_eq!(
        unfinished.columns,
        [
            "id",
            "started",
            "workload",
            "pair",
            "trials_saved",
            "trials_planned",
            "command_line"
        ]
    );

    // The filters hold: another client, or a time range before the runs,
    // leaves nothing.
    let p = panel(&d, "Receiver throughput per pair");
    let mut other = values.clone();
    other.get_mut("client").unwrap().1 = vec!["node-b".into()];
    assert!(run_sql(&mut client, &query(p, range, &other)).rows.is_empty());
    let before = Range {
        from: range.from - 10 * 86400,
        to: range.from,
    };
    for p in query_panels(&d) {
        let answer = run_sql(&mut client, &query(p, before, &values));
        assert!(answer.rows.is_empty(), "panel {:?} ignores the time range", p["title"]);
    }
}
