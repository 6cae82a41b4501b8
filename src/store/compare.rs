//! What `nicbench compare` can group by and show: the metrics (a column of
//! `runs`, its unit, and which way is better) and the dimensions (a column
//! or a tag), and the records of matching runs, one per run, for the table.

use std::collections::BTreeMap;

use rusqlite::types::Value as Sql;

use super::cases::{Case, CaseBook};
use super::columns;
use super::query::Filter;
use super::{Store, StoreError};
use crate::workload::{Better, Metric as WorkloadMetric};

/// A figure a comparison cell can show: one of a workload's figures
/// ([`crate::workload::Figures::figures`]), shown only for runs whose
/// workload has it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metric {
    pub name: &'static str,
    /// Its name in JSON, and its column of `runs` when it has one.
    pub column: &'static str,
    pub unit: &'static str,
    pub higher_is_better: bool,
    pub label: &'static str,
    /// Where a run's document holds it (JSON pointer), for a figure that
    /// is not a column.
    pub pointer: &'static str,
    /// Whether it is a column of `runs` (else read from the document).
    pub stored: bool,
    /// What the number at `pointer` is divided by to be in `unit`.
    pub divisor: f64,
}

impl Metric {
    /// The comparison metric of a workload's figure.
    pub fn of(m: &WorkloadMetric) -> Metric {
        Metric {
            name: m.option,
            column: m.name,
            unit: m.unit,
            higher_is_better: m.better == Better::Higher,
            label: m.label,
            pointer: m.pointer,
            stored: columns::DOCUMENT_COLUMNS.contains(&m.name),
            divisor: m.divisor,
        }
    }

    /// Whether runs of `workload` have this figure (a name this build does
    /// not know reads as bulk throughput).
    pub fn applies_to(&self, workload: &str) -> bool {
        // Each end's own threads' figures go where its host-wide ones do.
        const HOST_WIDE: [(WorkloadMetric, WorkloadMetric); 8] = [
            (WorkloadMetric::CLIENT_HOST_WORK_CPU, WorkloadMetric::CLIENT_CPU),
            (WorkloadMetric::AGENT_HOST_WORK_CPU, WorkloadMetric::AGENT_CPU),
            (
                WorkloadMetric::CLIENT_HOST_WORK_SERVICE_DEMAND,
                WorkloadMetric::CLIENT_SERVICE_DEMAND,
            ),
            (
                WorkloadMetric::AGENT_HOST_WORK_SERVICE_DEMAND,
                WorkloadMetric::AGENT_SERVICE_DEMAND,
            ),
            (WorkloadMetric::CLIENT_THREADS_CPU, WorkloadMetric::CLIENT_CPU),
            (WorkloadMetric::AGENT_THREADS_CPU, WorkloadMetric::AGENT_CPU),
            (
                WorkloadMetric::CLIENT_THREADS_SERVICE_DEMAND,
                WorkloadMetric::CLIENT_SERVICE_DEMAND,
            ),
            (
                WorkloadMetric::AGENT_THREADS_SERVICE_DEMAND,
                WorkloadMetric::AGENT_SERVICE_DEMAND,
            ),
        ];
        let column = HOST_WIDE
            .iter()
            .find(|(own, _)| own.name == self.column)
            .map_or(self.column, |(_, wide)| wide.name);
        crate::workload::results_of(workload)
            .figures()
            .iter()
            .any(|f| f.name == column)
    }

    /// The SQL expression of the figure over `runs`: its column, or the
    /// document's number at its pointer for the workloads that have it.
    fn expression(&self) -> String {
        if self.stored {
            return self.column.to_string();
        }
        let mut names: Vec<&str> = crate::workload::names().filter(|w| self.applies_to(w)).collect();
        if self.applies_to(crate::workload::watch::NAME) {
            names.push(crate::workload::watch::NAME);
        }
        let path = WorkloadMetric {
            pointer: self.pointer,
            ..WorkloadMetric::RECEIVER_RATE
        }
        .json_path();
        let list: Vec<String> = names.iter().map(|n| format!("'{}'", n.replace('\'', ""))).collect();
        format!(
            "CASE WHEN workload IN ({}) THEN json_extract({}, '{}') END",
            list.join(", "),
            super::digest::source_of(&[&path]),
            path.replace('\'', "")
        )
    }
}

/// Every metric: the receiver's and sender's throughput, the workloads'
/// own figures (loss, latency, transactions, a sweep's peak, CPU per
/// transaction, a watch's two directions), then CPU load and CPU per KB.
pub fn all_metrics() -> Vec<Metric> {
    let generic_last = &WorkloadMetric::BULK[2..];
    let mut all: Vec<Metric> = WorkloadMetric::BULK[..2].iter().map(Metric::of).collect();
    // The stored figures first, where compare always listed them.
    let own = crate::workload::all_results()
        .flat_map(|r| r.stored_columns())
        .chain(crate::workload::all_results().flat_map(|r| r.figures()))
        .filter(|m| !generic_last.iter().any(|g| g.name == m.name));
    for m in own {
        if !all.iter().any(|a| a.column == m.name) {
            all.push(Metric::of(m));
        }
    }
    all.extend(generic_last.iter().map(Metric::of));
    all.extend(WorkloadMetric::THREADS.iter().map(Metric::of));
    all
}

/// Dimensions that are columns: `--rows` name and column of `runs`.
pub const COLUMNS: &[(&str, &str)] = &[
    ("workload", "workload"),
    ("client", "client_host"),
    ("agent", "agent_host"),
    ("address", "agent_address"),
    ("direction", "direction"),
    ("streams", "streams"),
    ("message", "message_bytes"),
    ("mtu", "client_mtu_bytes"),
    ("agent-mtu", "agent_mtu_bytes"),
    ("link-speed", "link_speed_bits_per_second"),
    ("verdict", "verdict_kind"),
    ("version", "nicbench_version"),
    ("source", "source"),
    ("id", "id"),
];

/// One way of grouping runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dimension {
    Column {
        name: String,
        column: &'static str,
    },
    Tag(String),
    /// The run's case ([`super::cases`]), shown by its label.
    Case,
}

impl Dimension {
    /// `case`, `tag:KEY`, a name from [`COLUMNS`], or a column's own name.
    pub fn parse(s: &str) -> Result<Dimension, String> {
        if s == "case" {
            return Ok(Dimension::Case);
        }
        if let Some(key) = s.strip_prefix("tag:") {
            return match super::Tag::from_key(key) {
                Ok(()) => Ok(Dimension::Tag(key.to_string())),
                Err(e) => Err(e),
            };
        }
        COLUMNS
            .iter()
            .find(|(name, column)| *name == s || *column == s)
            .map(|(name, column)| Dimension::Column {
                name: name.to_string(),
                column,
            })
            .ok_or_else(|| {
                let names: Vec<&str> = COLUMNS.iter().map(|(n, _)| *n).collect();
                format!("unknown column '{s}': use case, tag:KEY or one of {}", names.join(", "))
            })
    }

    pub fn label(&self) -> String {
        match self {
            Dimension::Column { name, .. } => name.clone(),
            Dimension::Tag(key) => format!("tag:{key}"),
            Dimension::Case => "case".into(),
        }
    }

    /// How a reader names it in a report or chart: the axis and its unit
    /// (`MTU (B)`), not the key (`tag:mtu`). Machine-read forms keep
    /// [`Dimension::label`].
    pub fn title(&self) -> String {
        let name = match self {
            Dimension::Column { name, .. } => name.as_str(),
            Dimension::Tag(key) => key.as_str(),
            Dimension::Case => "case",
        };
        match name {
            "mtu" => "MTU (B)".into(),
            "agent-mtu" => "agent MTU (B)".into(),
            "message" => "message (B)".into(),
            "link-speed" => "link speed (bit/s)".into(),
            "verdict" => "verdict".into(),
            other => other.replace(['_', '-'], " "),
        }
    }
}

impl Metric {
    pub fn parse(s: &str) -> Result<Metric, String> {
        let all = all_metrics();
        all.iter().copied().find(|m| m.name == s).ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|m| m.name).collect();
            format!("unknown metric '{s}': use one of {}", names.join(", "))
        })
    }
}

/// One run's place in the table and its figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub run_id: i64,
    pub row: Vec<String>,
    pub col: Vec<String>,
    pub value: f64,
    /// The run's case, labelled among the runs of the filter.
    pub case: Case,
    /// The figure of each of the run's trials, in order (the run's own
    /// figure alone when its document lists no trial carrying it).
    pub trials: Vec<f64>,
    /// The run's stopping rule on this figure: its interval and whether it
    /// met the asked width. None when the run's trials were compared by
    /// another figure, or it ran once.
    pub rule: Option<Rule>,
    /// How the run chose its reported trial (`--pick`), when its trials
    /// were compared by this figure and it ran `--repeat`.
    pub pick: Option<crate::stats::Pick>,
}

/// What a run's stopping rule gave on the figure it compared trials by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule {
    /// The confidence interval of the mean, and its level in percent.
    pub low: f64,
    pub high: f64,
    pub level_percent: f64,
    /// `--confidence`: whether the interval met the asked width; None for
    /// `--repeat` (no width was asked).
    pub met: Option<bool>,
}

/// A run's trial figures, its stopping rule and its pick, by run id.
type TrialsByRun = BTreeMap<i64, (Vec<f64>, Option<Rule>, Option<crate::stats::Pick>)>;

/// The trials of `ids` for `metric`, and the stopping rule of the runs
/// whose trials were compared by it: read from the documents of these runs
/// only (a table's, not the whole store's). A run that planned one trial
/// and saved at most one has neither a list to read nor a rule: its
/// document is not parsed (most of a large store, and most of the time
/// `compare` took over one: it parsed every matching run's whole document).
fn trials_of(store: &Store, ids: &[i64], metric: &Metric) -> Result<TrialsByRun, StoreError> {
    let mut out = BTreeMap::new();
    if ids.is_empty() {
        return Ok(out);
    }
    let trial_path = WorkloadMetric {
        pointer: metric.pointer,
        ..WorkloadMetric::RECEIVER_RATE
    }
    .json_path()
    .replace('\'', "");
    let sql = format!(
        "SELECT id, (SELECT json_group_array(json_extract(t.value, '{trial_path}')) \
                     FROM json_each({doc}, '$.trials') AS t), \
                json_extract({doc}, '$.repetition.metric'), \
                json_extract({doc}, '$.repetition.interval.low'), \
                json_extract({doc}, '$.repetition.interval.high'), \
                json_extract({doc}, '$.repetition.interval.level_percent'), \
                json_extract({doc}, '$.repetition.width_met'), \
                json_extract({doc}, '$.repetition.policy.pick') \
         FROM runs WHERE id IN ({}) \
           AND (trials_saved > 1 OR trials_planned IS NULL OR trials_planned > 1)",
        super::query::id_list(ids),
        doc = super::DOCUMENT_SQL
    );
    let read = |row: &super::db::Row| -> Result<_, super::db::DbError> {
        Ok((
            row.get::<i64>(0)?,
            row.get::<Option<String>>(1)?,
            row.get::<Option<String>>(2)?,
            row.get::<Option<f64>>(3)?,
            row.get::<Option<f64>>(4)?,
            row.get::<Option<f64>>(5)?,
            row.get::<Option<bool>>(6)?,
            row.get::<Option<String>>(7)?,
        ))
    };
    let rows = store
        .db
        .query(&sql, &[])
        .and_then(|rows| rows.iter().map(read).collect::<Result<Vec<_>, _>>())
        .map_err(|e| store.err(e))?;
    let unit = WorkloadMetric {
        pointer: metric.pointer,
        divisor: metric.divisor,
        ..WorkloadMetric::RECEIVER_RATE
    };
    for (id, values, compared_by, low, high, level, met, pick) in rows {
        let values: Vec<f64> = values
            .and_then(|v| serde_json::from_str::<Vec<Option<f64>>>(&v).ok())
            .unwrap_or_default()
            .into_iter()
            .flatten()
            .filter_map(|v| unit.of_number(v))
            .collect();
        let compared = compared_by.as_deref() == Some(metric.column);
        let pick = pick
            .filter(|_| compared)
            .and_then(|p| serde::Deserialize::deserialize(&serde_json::Value::String(p)).ok());
        let rule = match (compared, low, high, level) {
            (true, Some(low), Some(high), Some(level_percent)) => Some(Rule {
                low,
                high,
                level_percent,
                met,
            }),
            _ => None,
        };
        out.insert(id, (values, rule, pick));
    }
    Ok(out)
}

/// What the matching runs give: records, how many runs matched, and how
/// many of them are of a workload without the metric (an rr run has no
/// throughput); the rest of those without a record lacked the figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Records {
    pub records: Vec<Record>,
    pub matched_runs: usize,
    pub not_applicable: usize,
}

/// The records of the complete runs matching `filter`.
pub fn records(
    store: &Store,
    filter: &Filter,
    rows: &[Dimension],
    cols: &[Dimension],
    metric: &Metric,
) -> Result<Records, StoreError> {
    let filter = Filter {
        complete_only: true,
        ..filter.clone()
    };
    let book = CaseBook::read(store, &filter)?;
    records_in(store, &filter, rows, cols, metric, &book)
}

/// [`records`] with the runs' cases read once beforehand (a report reads
/// them once for all its tables): `book` must hold the runs of `filter`.
pub fn records_in(
    store: &Store,
    filter: &Filter,
    rows: &[Dimension],
    cols: &[Dimension],
    metric: &Metric,
    book: &CaseBook,
) -> Result<Records, StoreError> {
    let expression = metric.expression();
    let mut wanted: Vec<&str> = vec![expression.as_str(), "workload"];
    for d in rows.iter().chain(cols) {
        if let Dimension::Column { column, .. } = d {
            wanted.push(column);
        }
    }
    let filter = Filter {
        complete_only: true,
        ..filter.clone()
    };
    // The runs of workloads the metric does not apply to are counted (the
    // book holds the runs), not read: a report asks for every metric.
    let counts = book.workload_counts();
    let matched_runs = counts.iter().map(|(_, n)| n).sum();
    let applicable: Vec<&str> = counts
        .iter()
        .filter(|(w, _)| metric.applies_to(w))
        .map(|(w, _)| w.as_str())
        .collect();
    let not_applicable = counts
        .iter()
        .filter(|(w, _)| !metric.applies_to(w))
        .map(|(_, n)| n)
        .sum();
    let found = store.column_rows_of(&filter, &wanted, &applicable)?;
    let in_unit = WorkloadMetric {
        pointer: metric.pointer,
        divisor: metric.divisor,
        ..WorkloadMetric::RECEIVER_RATE
    };
    let with_value: Vec<(i64, &Vec<Sql>, f64)> = found
        .iter()
        .filter_map(|(id, values)| {
            let raw = match values[0] {
                Sql::Real(r) => r,
                Sql::Integer(i) => i as f64,
                _ => return None,
            };
            // A column holds the figure in its unit; the document's number
            // is in its own (seconds for a handshake shown in ms).
            let value = match metric.stored {
                true => raw,
                false => in_unit.of_number(raw)?,
            };
            value.is_finite().then_some((*id, values, value))
        })
        .collect();
    let needs_tags = rows.iter().chain(cols).any(|d| matches!(d, Dimension::Tag(_)));
    let tags = if needs_tags {
        store.tags_of(with_value.iter().map(|(id, _, _)| *id))?
    } else {
        BTreeMap::new()
    };
    let key = |id: i64, values: &[Sql], dims: &[Dimension], case: &Case| -> Vec<String> {
        dims.iter()
            .map(|d| match d {
                Dimension::Case => case.label.clone(),
                Dimension::Tag(k) => tags
                    .get(&id)
                    .and_then(|t| t.iter().find(|t| &t.key == k))
                    .map(|t| t.value.clone())
                    .unwrap_or_else(|| "-".into()),
                Dimension::Column { column, .. } => {
                    let at = wanted.iter().position(|w| w == column).expect("wanted above");
                    match &values[at] {
                        Sql::Null => "-".into(),
                        Sql::Integer(i) => i.to_string(),
                        Sql::Real(r) => format!("{r}"),
                        Sql::Text(t) => t.clone(),
                        Sql::Blob(_) => "?".into(),
                    }
                }
            })
            .collect()
    };
    let ids: Vec<i64> = with_value.iter().map(|(id, _, _)| *id).collect();
    let mut trials = trials_of(store, &ids, metric)?;
    let records = with_value
        .into_iter()
        .map(|(id, values, value)| {
            let case = book.case(id).cloned().unwrap_or_else(|| Case {
                key: String::new(),
                label: "-".into(),
                parts: Vec::new(),
            });
            let (mut trial_values, rule, pick) = trials.remove(&id).unwrap_or_default();
            if trial_values.is_empty() {
                trial_values.push(value);
            }
            Record {
                run_id: id,
                row: key(id, values, rows, &case),
                col: key(id, values, cols, &case),
                value,
                case,
                trials: trial_values,
                rule,
                pick,
            }
        })
        .collect();
    Ok(Records {
        records,
        matched_runs,
        not_applicable,
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_dimension_is_titled_for_a_reader_and_keyed_for_a_script() {
        let mtu = Dimension::parse("tag:mtu").unwrap();
        assert_eq!(
            (mtu.label(), mtu.title()),
            ("tag:mtu".to_string(), "MTU (B)".to_string())
        );
        let card = Dimension::parse("tag:nic_model").unwrap();
        assert_eq!(card.title(), "nic model");
        assert_eq!(Dimension::parse("mtu").unwrap().title(), "MTU (B)");
        assert_eq!(Dimension::parse("workload").unwrap().title(), "workload");
    }
    use super::*;

    /// The workloads' own metrics sit where `compare` and `diff` always
    /// listed them, with their columns' units and direction.
    #[test]
    fn the_workloads_metrics_join_the_generic_ones_in_their_place() {
        let all = all_metrics();
        let names: Vec<&str> = all.iter().map(|m| m.name).collect();
        assert_eq!(
            names,
            [
                "throughput",
                "sender",
                "loss",
                "p50",
                "p99",
                "tps",
                "peak",
                "handshake",
                "agent-handshake",
                "one-way",
                "one-way-request",
                "one-way-response",
                "cpu-per-transaction",
                "agent-cpu-per-transaction",
                "half-peak-size",
                "small-latency",
                "rpm",
                "added",
                "added-p99",
                "idle-rtt",
                "transmitted",
                "received",
                "cpu",
                "agent-cpu",
                "service-demand",
                "agent-service-demand",
                // Each end's own threads, asked for by name.
                "threads-cpu",
                "agent-threads-cpu",
                "threads-service-demand",
                "agent-threads-service-demand",
                // A lab host's own work, asked for by name.
                "host-work-cpu",
                "agent-host-work-cpu",
                "host-work-service-demand",
                "agent-host-work-service-demand",
            ]
        );
        let p99 = Metric::parse("p99").unwrap();
        assert_eq!(
            (p99.column, p99.unit, p99.higher_is_better),
            ("p99_latency_us", "us", false)
        );
        assert!(Metric::parse("tps").unwrap().higher_is_better);
        assert!(Metric::parse("nope").unwrap_err().contains("throughput, sender, loss"));
    }
}
