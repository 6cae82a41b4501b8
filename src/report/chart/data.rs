//! From saved runs to charts: which runs a chart covers (the store's
//! filters, as for `runs` and `compare`), and the figures each kind reads
//! from their documents. Bars and the CPU chart's throughput come from the
//! comparison table of `compare`, so both agree cell for cell.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::types::Value as Sql;
use serde_json::Value;

use super::cpu::CpuGroup;
use super::latency::LatencyLine;
use super::size_curve::{CurveLine, CurvePoint};
use super::timeline::StreamLine;
use super::{Bars, Chart, ChartError, Cpu, Latency, SizeCurve, Timeline};
use crate::report::compare::{col_label, Stat, Table};
use crate::store::cases::CaseBook;
use crate::store::columns;
use crate::store::compare::{self, Dimension, Metric};
use crate::store::query::Filter;
use crate::store::{Store, StoreError};
use crate::workload::{self, ChartData, ChartKind};

/// What to draw.
#[derive(Debug, Clone)]
pub struct ChartSpec {
    /// A generic kind (`bars`, `cpu`, `timeline`, `heatmap`) or one a
    /// workload declares ([`crate::workload::ChartViews::chart_kinds`]).
    pub kind: String,
    /// The figure of `bars`.
    pub metric: Metric,
    /// What makes a group on the x axis (`bars`, `cpu`).
    pub group: Vec<Dimension>,
    /// What colours the bars of a group (`bars`).
    pub series: Vec<Dimension>,
    pub stat: Stat,
    /// Most lines of a `sweep` or `latency` chart (the newest runs).
    pub max_lines: usize,
    /// Only these runs (all matching runs when empty).
    pub runs: Vec<i64>,
}

impl ChartSpec {
    pub fn new(kind: &str) -> ChartSpec {
        ChartSpec {
            kind: kind.into(),
            metric: Metric::parse("throughput").expect("a known metric"),
            group: vec![Dimension::parse("workload").expect("a known column")],
            series: Vec::new(),
            stat: Stat::Median,
            max_lines: 12,
            runs: Vec::new(),
        }
    }
}

/// Why a chart could not be made from the store.
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Chart(#[from] ChartError),
}

fn stat_name(stat: Stat) -> &'static str {
    match stat {
        Stat::Best => "best",
        Stat::Worst => "worst",
        Stat::Median => "median",
        Stat::Mean => "mean",
    }
}

/// The chart `spec` asks for over the complete runs matching `filter`.
pub fn build(store: &Store, filter: &Filter, spec: &ChartSpec) -> Result<Chart, SelectError> {
    build_in(store, filter, spec, None)
}

/// The complete runs of `filter`: those a chart draws and a [`CaseBook`]
/// for [`build_in`] must hold.
pub fn complete(filter: &Filter) -> Filter {
    Filter {
        complete_only: true,
        limit: None,
        ..filter.clone()
    }
}

/// [`build`] with the runs' cases read beforehand (a report draws many
/// charts and tables over the same runs: it reads them once); `book`, when
/// given, must hold the runs of [`complete`]`(filter)`. Without it the
/// kinds that label by case read it themselves.
pub fn build_in(
    store: &Store,
    filter: &Filter,
    spec: &ChartSpec,
    book: Option<&CaseBook>,
) -> Result<Chart, SelectError> {
    let filter = complete(filter);
    match spec.kind.as_str() {
        "timeline" => return timeline(store, &filter, spec).map(Chart::Timeline),
        "heatmap" => return heatmap(store, &filter).map(Chart::Heatmap),
        _ => {}
    }
    let declared: Vec<(&str, &ChartKind)> = workload::chart_kinds().filter(|(_, k)| k.name == spec.kind).collect();
    let generic = matches!(spec.kind.as_str(), "bars" | "cpu");
    if !generic && declared.is_empty() {
        let kinds: Vec<&str> = kinds().into_iter().map(|(name, _)| name).collect();
        return Err(ChartError::Empty(format!(
            "unknown chart kind '{}': use one of {}",
            spec.kind,
            kinds.join(", ")
        ))
        .into());
    }
    let read;
    let book = match book {
        Some(b) => b,
        None => {
            read = CaseBook::read(store, &filter)?;
            &read
        }
    };
    match spec.kind.as_str() {
        "bars" => return bars(store, &filter, spec, book).map(Chart::Bars),
        "cpu" => return cpu(store, &filter, spec, book).map(Chart::Cpu),
        _ => {}
    }
    // A kind a workload declares: the runs of every workload that does.
    let (_, kind) = declared[0];
    let workloads: Vec<&str> = declared.iter().map(|(w, _)| *w).collect();
    let drawn = Drawn {
        workloads: &workloads,
        none_found: kind.none_found,
    };
    let series_traits = |id: i64, doc: &Value| series_traits(store, book, id, doc);
    Ok(match kind.data {
        ChartData::SizeCurve { key } => Chart::SizeCurve(SizeCurve {
            title: "Bandwidth and latency against message size (best of each size)".into(),
            lines: merge_sweeps(drawn.lines(store, &filter, spec, |id, doc| {
                Ok(sweep_line(String::new(), doc, key).map(|mut l| {
                    l.runs = vec![id];
                    (series_traits(id, doc), l)
                }))
            })?),
        }),
        ChartData::LatencyHistogram { pointer } => Chart::Latency(Latency {
            title: "Request/response latency percentiles".into(),
            lines: name_lines(drawn.lines(store, &filter, spec, |id, doc| {
                Ok(latency_line(String::new(), doc, pointer).map(|l| (series_traits(id, doc), l)))
            })?)
            .into_iter()
            .map(|(name, mut l)| {
                l.name = name;
                l
            })
            .collect(),
        }),
        ChartData::PerRun { draw, .. } => {
            Chart::OfRun(drawn.one(store, &filter, spec, |id, doc| Ok(draw(doc, &run_label(store, id)?)))?)
        }
    })
}

/// The chart kinds every run can be drawn as, with what each shows;
/// workloads add their own ([`kinds`]).
const GENERIC_KINDS: [(&str, &str); 4] = [
    (
        "bars",
        "A metric per configuration: grouped by --group, coloured by --series, min-max error bars",
    ),
    (
        "cpu",
        "CPU of both ends split into user/system/softirq/irq per --group, throughput beside it",
    ),
    (
        "timeline",
        "Per-interval throughput of each stream of one run (the newest, or --id)",
    ),
    (
        "heatmap",
        "The matrix of the newest `nicbench mesh` run among the selected runs (--tag mesh_run=ID)",
    ),
];

/// Every chart kind `plot --kind` draws, with what it shows: the generic
/// ones, then each workload's own in the registry's order (a name two
/// workloads declare once).
pub fn kinds() -> Vec<(&'static str, &'static str)> {
    let mut kinds = GENERIC_KINDS.to_vec();
    for (_, kind) in workload::chart_kinds() {
        if !kinds.iter().any(|(name, _)| *name == kind.name) {
            kinds.push((kind.name, kind.help));
        }
    }
    kinds
}

/// The runs a workload's chart kind draws, and what to say when none can be.
struct Drawn<'a> {
    workloads: &'a [&'a str],
    none_found: &'static str,
}

impl Drawn<'_> {
    /// The line `line_of` reads from each of the newest selected runs (its
    /// id and document) that has one; an error saying why when none has.
    fn lines<T>(
        &self,
        store: &Store,
        filter: &Filter,
        spec: &ChartSpec,
        line_of: impl Fn(i64, &Value) -> Result<Option<T>, StoreError>,
    ) -> Result<Vec<T>, SelectError> {
        let (lines, matched) = newest(store, filter, spec.max_lines, &spec.runs, self.workloads, line_of)?;
        if lines.is_empty() {
            return Err(empty(format!(
                "{matched} complete run(s) match, but {}",
                self.none_found
            )));
        }
        Ok(lines)
    }

    /// The newest selected run (or the one `--id` names) that `read` can draw.
    fn one<T>(
        &self,
        store: &Store,
        filter: &Filter,
        spec: &ChartSpec,
        read: impl Fn(i64, &Value) -> Result<Option<T>, StoreError>,
    ) -> Result<T, SelectError> {
        let newest = ChartSpec {
            max_lines: 1,
            ..spec.clone()
        };
        let mut found = self.lines(store, filter, &newest, read)?;
        Ok(found.remove(0))
    }
}

/// The report's pictures drawn one run at a time (the workloads'
/// [`ChartData::PerRun`]): each of the newest `max` complete runs that can
/// be drawn so, oldest first, in each such kind of its workload; and, when
/// runs were left out, a sentence per workload saying which are shown.
pub fn per_run_charts(
    store: &Store,
    filter: &Filter,
    book: &CaseBook,
    max: usize,
) -> Result<(Vec<Chart>, Vec<String>), SelectError> {
    let filter = complete(filter);
    let workloads = store.column_rows(&filter, &["workload"])?;
    let mut charts = Vec::new();
    let mut notes = Vec::new();
    for (workload, kinds) in per_run_kinds() {
        let ids: Vec<i64> = workloads
            .iter()
            .filter(|(_, v)| matches!(&v[0], Sql::Text(w) if w == workload))
            .map(|(id, _)| *id)
            .collect();
        let shown = &ids[ids.len().saturating_sub(max)..];
        for id in shown {
            for kind in &kinds {
                let spec = ChartSpec {
                    runs: vec![*id],
                    ..ChartSpec::new(kind.name)
                };
                match build_in(store, &filter, &spec, Some(book)) {
                    Ok(chart) => charts.push(chart),
                    // A run without what the chart reads (an import) is left out.
                    Err(SelectError::Chart(ChartError::Empty(_))) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        if ids.len() > shown.len() {
            let listed: Vec<String> = shown.iter().map(|id| id.to_string()).collect();
            let subject = match kinds[0].data {
                ChartData::PerRun { subject, .. } => subject,
                _ => kinds[0].name,
            };
            notes.push(format!(
                "{subject} is drawn for the newest {} of {} runs (run {}); \
                 `{}` draws any other.",
                shown.len(),
                ids.len(),
                listed.join(", "),
                crate::store::given(store.path()).command(&["plot", "--kind", kinds[0].name, "--id", "ID"])
            ));
        }
    }
    Ok((charts, notes))
}

/// The chart kinds of one run at a time, per workload that declares any,
/// in the registry's order.
fn per_run_kinds() -> Vec<(&'static str, Vec<&'static ChartKind>)> {
    let mut found: Vec<(&'static str, Vec<&'static ChartKind>)> = Vec::new();
    for (workload, kind) in workload::chart_kinds().filter(|(_, k)| k.data.is_per_run()) {
        match found.iter_mut().find(|(w, _)| *w == workload) {
            Some((_, kinds)) => kinds.push(kind),
            None => found.push((workload, vec![kind])),
        }
    }
    found
}

/// The newest mesh run among the selected runs, as a heat map.
fn heatmap(store: &Store, filter: &Filter) -> Result<super::Heatmap, SelectError> {
    let meshes = crate::mesh::stored::meshes(store, filter)?;
    let newest = meshes.first().ok_or_else(|| {
        ChartError::Empty(
            "no mesh run among the selected runs (runs of `nicbench mesh` carry the tags mesh, mesh_run, src, dst); \
             select one with --tag mesh_run=ID"
                .into(),
        )
    })?;
    Ok(super::Heatmap::of(newest))
}

/// The records of `compare`, restricted to `only` when it names runs.
fn records(
    store: &Store,
    filter: &Filter,
    rows: &[Dimension],
    cols: &[Dimension],
    metric: &Metric,
    only: &[i64],
    book: &CaseBook,
) -> Result<compare::Records, StoreError> {
    let mut found = compare::records_in(store, filter, rows, cols, metric, book)?;
    if !only.is_empty() {
        found.records.retain(|r| only.contains(&r.run_id));
        found.matched_runs = store.run_ids(filter)?.iter().filter(|id| only.contains(id)).count();
    }
    Ok(found)
}

fn empty(message: String) -> SelectError {
    ChartError::Empty(message).into()
}

fn nothing_complete(store: &Store) -> SelectError {
    empty(format!(
        "no complete run matches the filters: `{}` lists them (unfinished runs are not drawn)",
        crate::store::given(store.path()).command(&["runs"])
    ))
}

/// The comparison table of `metric` over `found`, grouped by `rows` and `cols`.
fn table(
    store: &Store,
    found: &compare::Records,
    rows: &[Dimension],
    cols: &[Dimension],
    metric: &Metric,
    stat: Stat,
) -> Result<Table, SelectError> {
    if found.matched_runs == 0 {
        return Err(nothing_complete(store));
    }
    if found.records.is_empty() {
        return Err(empty(format!(
            "{} complete run(s) match, but none has a {} figure ({}): choose another --metric or filter",
            found.matched_runs, metric.name, metric.label
        )));
    }
    let keys = |d: &[Dimension]| d.iter().map(Dimension::title).collect();
    Table::build(&found.records, metric, stat, keys(rows), keys(cols), None).map_err(empty)
}

fn bars(store: &Store, filter: &Filter, spec: &ChartSpec, book: &CaseBook) -> Result<Bars, SelectError> {
    let found = records(store, filter, &spec.group, &spec.series, &spec.metric, &spec.runs, book)?;
    let t = table(store, &found, &spec.group, &spec.series, &spec.metric, spec.stat)?;
    let mut bars = bars_of_table(&t, &found.records, spec.metric.label, spec.stat);
    if !spec.metric.higher_is_better {
        // A taller bar is worse: a delay, a loss, a latency.
        bars.title += "; lower is better";
    }
    Ok(bars)
}

/// The bars of a comparison table (a group per row, a bar per column,
/// whiskers from min to max), each with the runs of its cell from
/// `records` (those the table was built from) for its hover tip.
pub fn bars_of_table(t: &Table, records: &[compare::Record], axis: &str, stat: Stat) -> Bars {
    let mut bars = Bars::from_table(t, axis, stat_name(stat));
    for r in records {
        let at = |keys: &[Vec<String>], key: &Vec<String>| keys.iter().position(|k| k == key);
        let (Some(group), Some(series)) = (at(&t.rows, &r.row), at(&t.cols, &r.col)) else {
            continue;
        };
        if let Some(bar) = bars.bars.iter_mut().find(|b| b.group == group && b.series == series) {
            bar.run_ids.push(r.run_id);
        }
    }
    bars
}

fn number(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

/// user, system, softirq, irq percent of one end from its columns (in the
/// order of [`columns::CPU_PARTS`]); irq may be absent (0), the others not.
fn cpu_parts(values: &[Sql]) -> Option<[f64; 4]> {
    let part = |i: usize| match values[i] {
        Sql::Real(r) if r.is_finite() => Some(r),
        Sql::Integer(n) => Some(n as f64),
        _ => None,
    };
    Some([part(0)?, part(1)?, part(2)?, part(3).unwrap_or(0.0)])
}

fn cpu(store: &Store, filter: &Filter, spec: &ChartSpec, book: &CaseBook) -> Result<Cpu, SelectError> {
    let busy = Metric::parse("cpu").expect("a known metric");
    let found = records(store, filter, &spec.group, &[], &busy, &spec.runs, book)?;
    if found.matched_runs == 0 {
        return Err(nothing_complete(store));
    }
    let mut groups: BTreeMap<Vec<String>, (usize, [f64; 4], [f64; 4])> = BTreeMap::new();
    // The split is kept as columns (schema 3): no document is read.
    let row_of: BTreeMap<i64, &Vec<String>> = found.records.iter().map(|r| (r.run_id, &r.row)).collect();
    for (id, values) in store.column_rows(filter, &columns::CPU_PART_COLUMNS)? {
        let Some(row) = row_of.get(&id) else {
            continue;
        };
        let (Some(client), Some(agent)) = (cpu_parts(&values[..4]), cpu_parts(&values[4..])) else {
            continue;
        };
        let entry = groups.entry((*row).clone()).or_insert((0, [0.0; 4], [0.0; 4]));
        entry.0 += 1;
        for i in 0..4 {
            entry.1[i] += client[i];
            entry.2[i] += agent[i];
        }
    }
    if groups.is_empty() {
        return Err(empty(format!(
            "{} complete run(s) match, but none carries the CPU split of both ends (imported runs do not): choose other filters",
            found.matched_runs
        )));
    }
    let throughput = Metric::parse("throughput").expect("a known metric");
    let rates: BTreeMap<Vec<String>, f64> =
        match records(store, filter, &spec.group, &[], &throughput, &spec.runs, book)
            .map_err(SelectError::from)
            .and_then(|found| table(store, &found, &spec.group, &[], &throughput, Stat::Median))
        {
            Ok(t) => t.cells.iter().map(|c| (c.row.clone(), c.value)).collect(),
            Err(_) => BTreeMap::new(),
        };
    let mut keys: Vec<Vec<String>> = groups.keys().cloned().collect();
    keys.sort_by(|a, b| crate::report::compare::natural(a, b));
    let group_key = spec.group.iter().map(Dimension::title).collect::<Vec<_>>().join(" / ");
    Ok(Cpu {
        title: format!("CPU load of both ends by {group_key} (mean of the runs), receiver throughput (median)"),
        group_key,
        groups: keys
            .into_iter()
            .map(|k| {
                let (n, c, a) = groups[&k];
                let mean = |s: [f64; 4]| s.map(|v| v / n as f64);
                CpuGroup {
                    name: col_label(&k),
                    runs: n,
                    client: mean(c),
                    agent: mean(a),
                    throughput_bits_per_second: rates.get(&k).copied(),
                }
            })
            .collect(),
    })
}

/// What tells a run's series apart, as (what, value) pairs: the mode of
/// its workload, its transport, the hosts, its tags. A legend names a
/// series by the values that differ among the series shown
/// ([`name_lines`]), never by a run id alone.
pub type Traits = Vec<(String, String)>;

/// The traits of the run `id` with document `doc`: the parts of its case
/// (mode, direction, streams, sizes, options, plan axes), the hosts, and
/// its other tags (the column values: `nic=igb`).
fn series_traits(store: &Store, book: &crate::store::cases::CaseBook, id: i64, doc: &Value) -> Traits {
    let mut traits = book.parts(id);
    if traits.is_empty() && doc["format"] == "netpipe-3" {
        traits.push(("workload".into(), "NetPIPE".into()));
    }
    let host = |side: &str| doc[side]["facts"]["hostname"].as_str().map(String::from);
    if let (Some(c), Some(a)) = (host("client"), host("agent")) {
        traits.push(("hosts".into(), format!("{c} -> {a}")));
    }
    if let Ok(tags) = store.tags_of(std::iter::once(id)) {
        for t in tags.get(&id).into_iter().flatten() {
            let name = format!("tag:{}", t.key);
            if t.key != "case"
                && !traits.iter().any(|(n, v)| {
                    // A plan's `mtu=1500` beside the case's `MTU 1500`
                    // says it twice; a tag that disagrees still names.
                    let same_part = *n == t.key && v.split(' ').any(|w| w == t.value);
                    *n == name || same_part || n.ends_with(&format!(":{}", t.key))
                })
            {
                traits.push((name, format!("{}={}", t.key, t.value)));
            }
        }
    }
    traits
}

/// Names for series from their traits: the values that differ among
/// them, joined by ", "; when none differ, what they have in common.
/// Series of equal names are the same configuration.
pub fn name_lines<T>(lines: Vec<(Traits, T)>) -> Vec<(String, T)> {
    let value = |traits: &Traits, key: &str| traits.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let mut keys: Vec<String> = Vec::new();
    for (traits, _) in &lines {
        for (k, _) in traits {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    let differing: Vec<&String> = keys
        .iter()
        .filter(|k| {
            // Two series with different values; a part one series lacks
            // (an import has no sizes) does not name the others.
            let values: BTreeSet<String> = lines.iter().filter_map(|(t, _)| value(t, k)).collect();
            values.len() > 1
        })
        .collect();
    lines
        .into_iter()
        .map(|(traits, line)| {
            let shown: Vec<String> = if differing.is_empty() {
                traits
                    .iter()
                    .filter(|(k, _)| k != "hosts")
                    .map(|(_, v)| v.clone())
                    .collect()
            } else {
                differing.iter().filter_map(|k| value(&traits, k)).collect()
            };
            let name = if shown.is_empty() {
                "all runs".to_string()
            } else {
                shown.join(", ")
            };
            (name, line)
        })
        .collect()
}

/// One sweep line per series: the runs of one name merged, best per size.
fn merge_sweeps(lines: Vec<(Traits, CurveLine)>) -> Vec<CurveLine> {
    let mut merged: Vec<CurveLine> = Vec::new();
    for (name, line) in name_lines(lines) {
        match merged.iter_mut().find(|m| m.name == name) {
            Some(m) => {
                m.runs.extend(line.runs);
                let points = std::mem::take(&mut m.points);
                m.points = super::size_curve::best_per_size(points.into_iter().chain(line.points));
                if line.peak.map(|p| p.1) > m.peak.map(|p| p.1) {
                    m.peak = line.peak;
                    m.half_peak_size_bytes = line.half_peak_size_bytes;
                }
                // Runs measured against different line rates have none in common.
                if m.line_rate_bits_per_second != line.line_rate_bits_per_second {
                    m.line_rate_bits_per_second = None;
                }
            }
            None => merged.push(CurveLine { name, ..line }),
        }
    }
    for line in &mut merged {
        line.carried_peak();
    }
    // In the order of their names' numbers (MTU 1500 before 9000 before 16128).
    merged.sort_by(|a, b| crate::report::compare::natural_text(&a.name, &b.name));
    merged
}

/// A run's name in a legend: its id and tags.
pub fn run_label(store: &Store, id: i64) -> Result<String, StoreError> {
    let tags = store.tags_of(std::iter::once(id))?;
    let mut name = format!("run {id}");
    for t in tags.get(&id).into_iter().flatten() {
        name += &format!(" {}={}", t.key, t.value);
    }
    Ok(name)
}

/// The newest matching runs (at most `max`) whose documents `read` can
/// draw, oldest first; and how many matched at all.
fn newest<T>(
    store: &Store,
    filter: &Filter,
    max: usize,
    only: &[i64],
    workloads: &[&str],
    read: impl Fn(i64, &Value) -> Result<Option<T>, StoreError>,
) -> Result<(Vec<T>, usize), SelectError> {
    let mut ids = store.run_ids(filter)?;
    if !only.is_empty() {
        ids.retain(|id| only.contains(id));
    }
    if ids.is_empty() {
        return Err(nothing_complete(store));
    }
    let matched = ids.len();
    if !workloads.is_empty() {
        // Only these documents can hold the figures: skip reading the others.
        let of_kind: std::collections::HashSet<i64> = store
            .column_rows(filter, &["workload"])?
            .into_iter()
            .filter(|(_, v)| matches!(&v[0], Sql::Text(w) if workloads.contains(&w.as_str())))
            .map(|(id, _)| id)
            .collect();
        ids.retain(|id| of_kind.contains(id));
    }
    let mut found = Vec::new();
    for id in ids.iter().rev() {
        if found.len() >= max {
            break;
        }
        let Some(run) = store.run_or_skip(*id)? else {
            continue;
        };
        if let Some(t) = read(*id, &run.document)? {
            found.push(t);
        }
    }
    found.reverse();
    Ok((found, matched))
}

/// The size curve of a document: the points and summary of the first
/// stream end whose part at `key` has points; or, for an imported NetPIPE
/// run, its own points.
pub fn sweep_line(name: String, doc: &Value, key: &str) -> Option<CurveLine> {
    if doc["format"] == "netpipe-3" {
        return netpipe_line(name, doc);
    }
    let streams = doc["streams"].as_array()?;
    let sweep = streams
        .iter()
        .flat_map(|s| [&s["sender"][key], &s["receiver"][key]])
        .find(|s| s["points"].is_array())?;
    // One point per size: a perturbed size counts as its power of two.
    let perturbation = number(&doc["spec"]["params"]["perturbation_bytes"]).unwrap_or(0.0);
    let nominal = |size: f64| super::size_curve::nominal_size(size, perturbation);
    let points: Vec<CurvePoint> = sweep["points"]
        .as_array()?
        .iter()
        .filter_map(|p| {
            Some(CurvePoint {
                size_bytes: nominal(number(&p["size_bytes"])?),
                bits_per_second: number(&p["best_bits_per_second"])?,
                latency_us: number(&p["best_latency_us"])?,
            })
        })
        .collect();
    if points.is_empty() {
        return None;
    }
    let summary = &sweep["summary"];
    let mut line = CurveLine {
        name,
        runs: Vec::new(),
        points: super::size_curve::best_per_size(points),
        peak: number(&summary["peak_size_bytes"])
            .map(nominal)
            .zip(number(&summary["peak_bits_per_second"])),
        half_peak_size_bytes: number(&summary["half_peak_size_bytes"]).map(nominal),
        line_rate_bits_per_second: number(&sweep["link_speed_bits_per_second"]),
    };
    line.carried_peak();
    Some(line)
}

/// The curve of an imported NetPIPE run (`{"format": "netpipe-3",
/// "points": [{size_bytes, bits_per_second, one_way_seconds}]}`): NetPIPE
/// keeps one (best) figure per size, its time already one way, as a
/// sweep's best latency is; the peak is its highest rate, n½ the smallest
/// size reaching half of it.
fn netpipe_line(name: String, doc: &Value) -> Option<CurveLine> {
    let points: Vec<CurvePoint> = doc["points"]
        .as_array()?
        .iter()
        .filter_map(|p| {
            Some(CurvePoint {
                size_bytes: number(&p["size_bytes"])?,
                bits_per_second: number(&p["bits_per_second"])?,
                latency_us: number(&p["one_way_seconds"])? * 1e6,
            })
        })
        .collect();
    let peak = points
        .iter()
        .max_by(|a, b| a.bits_per_second.total_cmp(&b.bits_per_second))
        .map(|p| (p.size_bytes, p.bits_per_second))?;
    let half_peak_size_bytes = points
        .iter()
        .filter(|p| p.bits_per_second >= peak.1 / 2.0)
        .map(|p| p.size_bytes)
        .reduce(f64::min);
    Some(CurveLine {
        name,
        runs: Vec::new(),
        points: super::size_curve::best_per_size(points),
        peak: Some(peak),
        half_peak_size_bytes,
        line_rate_bits_per_second: None,
    })
}

/// The latency curve of a document, from the histogram at `pointer`.
pub fn latency_line(name: String, doc: &Value, pointer: &str) -> Option<LatencyLine> {
    let buckets: Vec<(f64, u64)> = doc
        .pointer(pointer)?
        .as_array()?
        .iter()
        .filter_map(|b| Some((number(&b["value_us"])?, b["count"].as_u64()?)))
        .collect();
    if buckets.is_empty() {
        return None;
    }
    LatencyLine::from_histogram(name, &buckets)
}

/// The per-interval receiver throughput of each stream of a document.
pub fn stream_lines(doc: &Value) -> Vec<StreamLine> {
    let Some(streams) = doc["streams"].as_array() else {
        return Vec::new();
    };
    streams
        .iter()
        .filter_map(|s| {
            let end = if s["receiver"]["intervals"].is_array() {
                &s["receiver"]
            } else {
                &s["sender"]
            };
            let intervals: Vec<(f64, f64, f64)> = end["intervals"]
                .as_array()?
                .iter()
                .filter_map(|i| {
                    Some((
                        number(&i["start_seconds"])?,
                        number(&i["end_seconds"])?,
                        number(&i["bits_per_second"])?,
                    ))
                })
                .collect();
            if intervals.is_empty() {
                return None;
            }
            let flow = s["flow"].as_str().unwrap_or("").replace("_to_", "->");
            Some(StreamLine {
                name: format!("stream {} {flow}", s["stream_id"]).trim().to_string(),
                intervals,
            })
        })
        .collect()
}

fn timeline(store: &Store, filter: &Filter, spec: &ChartSpec) -> Result<Timeline, SelectError> {
    let (mut runs, matched) = newest(store, filter, 1, &spec.runs, &[], |id, doc| {
        let lines = stream_lines(doc);
        Ok((!lines.is_empty()).then_some((id, lines)))
    })?;
    let Some((id, streams)) = runs.pop() else {
        return Err(empty(format!(
            "{matched} complete run(s) match, but none has per-interval stream figures: choose a tcp or udp run (--id)"
        )));
    };
    Ok(Timeline {
        title: format!("Per-interval throughput of each stream, {}", run_label(store, id)?),
        streams,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traits(pairs: &[(&str, &str)]) -> Traits {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn series_are_named_by_what_differs_among_them_not_by_run_id() {
        let lines = vec![
            (traits(&[("mode", "sweep stream"), ("tag:nic", "nic=e1000")]), 1),
            (traits(&[("mode", "sweep stream"), ("tag:nic", "nic=igb")]), 2),
            (traits(&[("mode", "sweep ping-pong"), ("tag:nic", "nic=igb")]), 3),
        ];
        let names: Vec<String> = name_lines(lines).into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            [
                "sweep stream, nic=e1000",
                "sweep stream, nic=igb",
                "sweep ping-pong, nic=igb"
            ]
        );
        // Alike runs share a name (and so one line): what they have in common.
        let alike = vec![
            (traits(&[("mode", "sweep stream"), ("hosts", "a -> b")]), 1),
            (traits(&[("mode", "sweep stream"), ("hosts", "a -> b")]), 2),
        ];
        let names: Vec<String> = name_lines(alike).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["sweep stream", "sweep stream"]);
    }

    #[test]
    fn runs_of_one_series_merge_into_one_line_best_per_size() {
        let line = |id: i64, bits_per_second: f64| CurveLine {
            name: String::new(),
            runs: vec![id],
            points: vec![CurvePoint {
                size_bytes: 64.0,
                bits_per_second,
                latency_us: 5.0,
            }],
            peak: Some((64.0, bits_per_second)),
            half_peak_size_bytes: None,
            line_rate_bits_per_second: None,
        };
        let same = traits(&[("mode", "sweep stream")]);
        let merged = merge_sweeps(vec![(same.clone(), line(1, 1e9)), (same, line(2, 2e9))]);
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].runs, [1, 2]);
        assert_eq!(merged[0].points.len(), 1);
        assert_eq!(merged[0].peak, Some((64.0, 2e9)));
    }

    /// Issue 66: the legend computed peak and n½ from the points it drew
    /// hollow above the line rate. A stored sweep whose summary counted
    /// them is drawn with the peak of the sizes its line rate carries.
    #[test]
    fn a_stored_sweep_peaks_within_its_line_rate_on_the_chart() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run-sweep.json");
        let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let stored = sweep_line("a".into(), &doc, "sweep").unwrap();
        assert!(stored.peak.unwrap().1 > 4e9, "no line rate: the summary's peak");
        doc["streams"][0]["sender"]["sweep"]["link_speed_bits_per_second"] = 1.2e9.into();
        let line = sweep_line("a".into(), &doc, "sweep").unwrap();
        let within = line
            .points
            .iter()
            .map(|p| p.bits_per_second)
            .filter(|v| *v <= 1.2e9)
            .fold(0.0, f64::max);
        let (size, peak) = line.peak.unwrap();
        assert_eq!(peak, within);
        assert_eq!(size, 1024.0);
        let half = line
            .points
            .iter()
            .filter(|p| p.bits_per_second <= 1.2e9 && p.bits_per_second >= peak / 2.0)
            .map(|p| p.size_bytes)
            .fold(f64::INFINITY, f64::min);
        assert_eq!(line.half_peak_size_bytes, Some(half));
        assert!(line.points_above_line_rate() > 0);
        assert!(
            line.legend_text().contains("hollow, not in the peak"),
            "{}",
            line.legend_text()
        );
    }
}
