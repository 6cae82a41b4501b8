//! A run's *case*: what distinguishes its configuration, so that tables
//! and charts pool only runs that measured the same thing. Its parts come
//! from the run's spec through its workload
//! ([`crate::workload::Stored::case`]: mode, direction, streams, sizes,
//! options that change what is measured), the client's MTU, the plan's
//! axes (the `case` tag a plan run carries) and, for an import, the tool
//! it came from. A case has a canonical key (every part) and a label that
//! names only what differs among the runs shown ([`labels`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rusqlite::types::Value as Sql;
use serde::Serialize;

use super::query::Filter;
use super::{Store, StoreError, Tag};
use crate::model::TestSpec;
use crate::workload;

/// The parts of one run's case, in the order a label names them: (name,
/// value in words). Names are stable (`streams`, `mtu`, `axis:qdisc`).
pub type Parts = Vec<(String, String)>;

/// A run's case: its canonical key and its label among the runs shown.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Case {
    /// Every part, `name=value` joined by `; `: equal keys, same case.
    pub key: String,
    /// The parts that differ among the runs shown, joined by `, `
    /// (`TCP, 4 streams, reverse`); unique per key among them.
    pub label: String,
    /// The parts themselves.
    #[serde(skip)]
    pub parts: Parts,
}

/// The axes of a plan's `case` tag that the spec or a column already
/// carries (`agent` is a host pair: a column, not a case).
const COVERED_AXES: [&str; 5] = ["agent", "direction", "streams", "message", "mtu"];

/// What a run's case is read from: its row in `runs` and its tags.
#[derive(Debug, Clone, Default)]
pub struct RunFacts<'a> {
    pub workload: &'a str,
    /// `nicbench`, or the tool an import came from.
    pub source: &'a str,
    /// The document's `spec` (None for an import without one).
    pub spec: Option<&'a str>,
    pub client_mtu_bytes: Option<i64>,
    /// The columns an import without a spec still has.
    pub direction: Option<&'a str>,
    pub streams: Option<i64>,
    pub message_bytes: Option<i64>,
    pub tags: &'a [Tag],
}

/// The parts of a run's case.
pub fn parts(run: &RunFacts) -> Parts {
    let spec: Option<TestSpec> = run.spec.and_then(crate::model::from_text);
    let mut parts: Parts = match &spec {
        Some(spec) => workload::results_of(run.workload)
            .case(spec)
            .into_iter()
            .map(|(n, v)| (n.to_string(), v))
            .collect(),
        None => column_parts(run),
    };
    if run.source != "nicbench" {
        match parts.iter_mut().find(|(n, _)| n == "workload") {
            Some((_, words)) => *words = format!("{words} (imported from {})", run.source),
            None => parts.insert(0, ("workload".into(), format!("imported from {}", run.source))),
        }
    }
    if let Some(mtu) = run.client_mtu_bytes {
        parts.push(("mtu".into(), format!("MTU {mtu}")));
    }
    parts.extend(axis_parts(run.tags));
    parts
}

/// An import without a spec: its workload and what its columns say.
fn column_parts(run: &RunFacts) -> Parts {
    let mut parts = vec![("workload".to_string(), run.workload.to_string())];
    if let Some(d) = run.direction {
        let words = serde::Deserialize::deserialize(&serde_json::Value::String(d.into()))
            .map(workload::case::direction)
            .unwrap_or(d);
        parts.push(("direction".into(), words.to_string()));
    }
    if let Some(n) = run.streams.and_then(|n| u32::try_from(n).ok()) {
        parts.push(("streams".into(), workload::case::streams(n)));
    }
    if let Some(b) = run.message_bytes.and_then(|b| u64::try_from(b).ok()) {
        parts.push(("message".into(), format!("{} messages", workload::case::size(b))));
    }
    parts
}

/// The plan's axes a run was measured under, from its `case` tag
/// ("tcp agent=b direction=reverse nodelay=on"), less those the spec or a
/// column already carries.
fn axis_parts(tags: &[Tag]) -> Parts {
    let Some(case) = tags.iter().find(|t| t.key == "case") else {
        return Vec::new();
    };
    let mut axes: Vec<(String, String)> = Vec::new();
    for word in case.value.split(' ').skip(1) {
        match word.split_once('=') {
            Some((axis, value)) => axes.push((axis.to_string(), value.to_string())),
            // A value with a space in it.
            None => {
                if let Some(last) = axes.last_mut() {
                    last.1 = format!("{} {word}", last.1);
                }
            }
        }
    }
    axes.into_iter()
        .filter(|(axis, _)| !COVERED_AXES.contains(&axis.as_str()))
        .map(|(axis, value)| (format!("axis:{axis}"), format!("{axis}={value}")))
        .collect()
}

/// The canonical key of a case's parts.
pub fn key(parts: &Parts) -> String {
    parts
        .iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A label for each of these runs' cases, naming the workload and the
/// parts whose values differ among the runs that have them; where two
/// cases would still read alike (one has a part the other lacks), the
/// parts that tell them apart are added. Equal parts, equal labels.
pub fn labels(all: &[Parts]) -> Vec<String> {
    let distinct: BTreeSet<&Parts> = all.iter().collect();
    let mut values: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for parts in &distinct {
        for (n, v) in parts.iter() {
            values.entry(n.as_str()).or_default().insert(v.as_str());
        }
    }
    let shown = |name: &str| name == "workload" || values.get(name).is_some_and(|v| v.len() > 1);
    let first: HashMap<&Parts, String> = distinct
        .iter()
        .map(|p| {
            let words: Vec<&str> = p.iter().filter(|(n, _)| shown(n)).map(|(_, v)| v.as_str()).collect();
            (*p, words.join(", "))
        })
        .collect();
    // Cases that still read alike: add what tells them apart.
    let mut alike: HashMap<&str, Vec<&Parts>> = HashMap::new();
    for (p, label) in &first {
        alike.entry(label.as_str()).or_default().push(p);
    }
    let mut label_of: HashMap<&Parts, String> = HashMap::new();
    for group in alike.values() {
        if group.len() == 1 {
            label_of.insert(group[0], first[group[0]].clone());
            continue;
        }
        let names: BTreeSet<&str> = group.iter().flat_map(|p| p.iter().map(|(n, _)| n.as_str())).collect();
        let value = |p: &Parts, n: &str| p.iter().find(|(m, _)| m == n).map(|(_, v)| v.clone());
        let differs: BTreeSet<&str> = names
            .into_iter()
            .filter(|n| group.iter().map(|p| value(p, n)).collect::<BTreeSet<_>>().len() > 1)
            .collect();
        for p in group {
            let words: Vec<&str> = p
                .iter()
                .filter(|(n, _)| shown(n) || differs.contains(n.as_str()))
                .map(|(_, v)| v.as_str())
                .collect();
            label_of.insert(p, words.join(", "));
        }
    }
    all.iter().map(|p| label_of[p].clone()).collect()
}

/// The cases of these runs' parts, labelled among them.
pub fn cases(all: &[Parts]) -> Vec<Case> {
    labels(all)
        .into_iter()
        .zip(all)
        .map(|(label, parts)| Case {
            key: key(parts),
            label,
            parts: parts.clone(),
        })
        .collect()
}

/// The `--rows`/`--cols` key that separates runs whose cases differ in the
/// part `name`: a column where one holds it, the tag of a plan axis, else
/// `case`.
pub fn separating_key(name: &str) -> String {
    match name {
        "direction" | "streams" | "message" | "mtu" => name.to_string(),
        other => match other.strip_prefix("axis:") {
            Some(axis) => format!("tag:{axis}"),
            None => "case".to_string(),
        },
    }
}

/// The cases of runs, read once for every table and chart of a report
/// and labelled among all of them, so that a case reads the same in every
/// table (the CPU chart sets its throughput beside it by label).
#[derive(Debug, Clone, Default)]
pub struct CaseBook {
    cases: HashMap<i64, Case>,
    /// How many of its runs each workload has.
    workloads: Vec<(String, usize)>,
}

fn text(v: &Sql) -> Option<&str> {
    match v {
        Sql::Text(t) => Some(t.as_str()),
        _ => None,
    }
}

fn integer(v: &Sql) -> Option<i64> {
    match v {
        Sql::Integer(i) => Some(*i),
        _ => None,
    }
}

/// The columns a case is read from, and the document's spec.
fn case_columns() -> [String; 7] {
    [
        "workload".into(),
        "source".into(),
        "client_mtu_bytes".into(),
        "direction".into(),
        "streams".into(),
        "message_bytes".into(),
        format!("json_extract({}, '$.spec')", super::digest::source_of(&["$.spec"])),
    ]
}

impl CaseBook {
    /// The case parts of every run matching `filter`.
    pub fn read(store: &Store, filter: &Filter) -> Result<CaseBook, StoreError> {
        let columns = case_columns();
        let rows = store.column_rows(filter, &columns.each_ref().map(String::as_str))?;
        let tags = store.tags_of(rows.iter().map(|(id, _)| *id))?;
        let parts: Vec<(i64, Parts)> = rows
            .iter()
            .map(|(id, v)| {
                let facts = RunFacts {
                    workload: text(&v[0]).unwrap_or(""),
                    source: text(&v[1]).unwrap_or("nicbench"),
                    client_mtu_bytes: integer(&v[2]),
                    direction: text(&v[3]),
                    streams: integer(&v[4]),
                    message_bytes: integer(&v[5]),
                    spec: text(&v[6]),
                    tags: tags.get(id).map_or(&[], |t| t.as_slice()),
                };
                (*id, parts(&facts))
            })
            .collect();
        let all: Vec<Parts> = parts.iter().map(|(_, p)| p.clone()).collect();
        let cases = parts.iter().map(|(id, _)| *id).zip(cases(&all)).collect();
        let mut workloads: Vec<(String, usize)> = Vec::new();
        for (_, v) in &rows {
            let workload = text(&v[0]).unwrap_or("");
            match workloads.iter_mut().find(|(w, _)| w == workload) {
                Some((_, n)) => *n += 1,
                None => workloads.push((workload.to_string(), 1)),
            }
        }
        Ok(CaseBook { cases, workloads })
    }

    /// How many of the book's runs each workload has.
    pub fn workload_counts(&self) -> &[(String, usize)] {
        &self.workloads
    }

    /// Run `id`'s case, labelled among the book's runs.
    pub fn case(&self, id: i64) -> Option<&Case> {
        self.cases.get(&id)
    }

    /// The parts of run `id`'s case (empty when the book does not hold it).
    pub fn parts(&self, id: i64) -> Parts {
        self.case(id).map(|c| c.parts.clone()).unwrap_or_default()
    }

    /// The cases of these runs, labelled among them only.
    pub fn cases(&self, ids: &[i64]) -> HashMap<i64, Case> {
        let parts: Vec<Parts> = ids.iter().map(|id| self.parts(*id)).collect();
        ids.iter().copied().zip(cases(&parts)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(parts: &[(&str, &str)]) -> Parts {
        parts.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_label_names_the_workload_and_what_differs() {
        let one = p(&[
            ("workload", "TCP"),
            ("direction", "forward"),
            ("streams", "1 stream"),
            ("mtu", "MTU 1500"),
        ]);
        let four = p(&[
            ("workload", "TCP"),
            ("direction", "reverse"),
            ("streams", "4 streams"),
            ("mtu", "MTU 1500"),
        ]);
        assert_eq!(
            labels(&[one.clone(), four.clone(), one.clone()]),
            [
                "TCP, forward, 1 stream",
                "TCP, reverse, 4 streams",
                "TCP, forward, 1 stream"
            ]
        );
        assert_eq!(labels(std::slice::from_ref(&one)), ["TCP"]);
    }

    /// A part one case has and another lacks is named only where it is
    /// needed to tell them apart.
    #[test]
    fn cases_that_would_read_alike_are_told_apart() {
        let plain = p(&[("workload", "TCP"), ("streams", "1 stream")]);
        let zc = p(&[("workload", "TCP"), ("streams", "1 stream"), ("zerocopy", "zero-copy")]);
        let rr = p(&[("workload", "rr UDP"), ("sizes", "64/1 KiB")]);
        assert_eq!(labels(&[plain, zc, rr]), ["TCP", "TCP, zero-copy", "rr UDP"]);
    }

    #[test]
    fn a_plan_case_tag_gives_its_axes_but_not_what_columns_hold() {
        let tags = vec![Tag {
            key: "case".into(),
            value: "tcp agent=b direction=reverse streams=4 qdisc=fq nodelay=on".into(),
        }];
        assert_eq!(
            axis_parts(&tags),
            p(&[("axis:qdisc", "qdisc=fq"), ("axis:nodelay", "nodelay=on")])
        );
        assert_eq!(separating_key("axis:qdisc"), "tag:qdisc");
        assert_eq!(separating_key("streams"), "streams");
        assert_eq!(separating_key("workload"), "case");
    }

    #[test]
    fn an_import_says_where_it_came_from_and_a_spec_reads_through_its_workload() {
        let netpipe = parts(&RunFacts {
            workload: "sweep",
            source: "netpipe",
            ..RunFacts::default()
        });
        assert_eq!(netpipe, p(&[("workload", "sweep (imported from netpipe)")]));
        let spec = serde_json::json!({"workload": "rr", "duration_seconds": 1.0, "streams": 1,
            "direction": "forward", "message_bytes": 64, "interval_seconds": 1.0,
            "params": {"proto": "udp", "request_bytes": 64, "response_bytes": 1024, "burst": 1, "timeout_us": 50000}})
        .to_string();
        let rr = parts(&RunFacts {
            workload: "rr",
            source: "nicbench",
            spec: Some(&spec),
            client_mtu_bytes: Some(65536),
            ..RunFacts::default()
        });
        assert_eq!(
            rr,
            p(&[
                ("workload", "rr UDP"),
                ("sizes", "64/1024 B"),
                ("streams", "1 stream"),
                ("mtu", "MTU 65536")
            ])
        );
    }
}
