//! What `nicbench compare` can group by and show: the metrics (a column of
//! `runs`, its unit, and which way is better) and the dimensions (a column
//! or a tag), and the records of matching runs, one per run, for the table.

use std::collections::BTreeMap;

use rusqlite::types::Value as Sql;

use super::query::Filter;
use super::{Store, StoreError};

/// A figure a comparison cell can show.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metric {
    pub name: &'static str,
    pub column: &'static str,
    pub unit: &'static str,
    pub higher_is_better: bool,
    pub label: &'static str,
}

/// The metrics every run has, by their `--metric` name; [`all_metrics`]
/// adds the workloads' own.
pub const METRICS: &[Metric] = &[
    Metric {
        name: "throughput",
        column: "receiver_bits_per_second",
        unit: "bit/s",
        higher_is_better: true,
        label: "receiver throughput",
    },
    Metric {
        name: "sender",
        column: "sender_bits_per_second",
        unit: "bit/s",
        higher_is_better: true,
        label: "sender throughput",
    },
    Metric {
        name: "cpu",
        column: "client_cpu_percent",
        unit: "%",
        higher_is_better: false,
        label: "client CPU busy",
    },
    Metric {
        name: "agent-cpu",
        column: "agent_cpu_percent",
        unit: "%",
        higher_is_better: false,
        label: "agent CPU busy",
    },
    Metric {
        name: "service-demand",
        column: "client_service_demand_us_per_kb",
        unit: "us/KB",
        higher_is_better: false,
        label: "client service demand",
    },
    Metric {
        name: "agent-service-demand",
        column: "agent_service_demand_us_per_kb",
        unit: "us/KB",
        higher_is_better: false,
        label: "agent service demand",
    },
];

/// Every metric: the receiver's and sender's throughput, the workloads'
/// own stored figures ([`crate::workload::ResultKind::stored_columns`]:
/// loss, latency, transactions, a sweep's peak), then CPU.
pub fn all_metrics() -> Vec<Metric> {
    let own = crate::workload::REGISTRY
        .iter()
        .flat_map(|w| w.results().stored_columns())
        .map(|m| Metric {
            name: m.option,
            column: m.name,
            unit: m.unit,
            higher_is_better: m.better == crate::workload::Better::Higher,
            label: m.label,
        });
    let mut all: Vec<Metric> = METRICS[..2].to_vec();
    for m in own {
        if !all.iter().any(|a| a.column == m.column) {
            all.push(m);
        }
    }
    all.extend_from_slice(&METRICS[2..]);
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
    Column { name: String, column: &'static str },
    Tag(String),
}

impl Dimension {
    /// `tag:KEY`, a name from [`COLUMNS`], or a column's own name.
    pub fn parse(s: &str) -> Result<Dimension, String> {
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
                format!("unknown column '{s}': use tag:KEY or one of {}", names.join(", "))
            })
    }

    pub fn label(&self) -> String {
        match self {
            Dimension::Column { name, .. } => name.clone(),
            Dimension::Tag(key) => format!("tag:{key}"),
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
}

/// What the matching runs give: records, and how many runs lacked the metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Records {
    pub records: Vec<Record>,
    pub matched_runs: usize,
}

/// The records of the complete runs matching `filter`.
pub fn records(
    store: &Store,
    filter: &Filter,
    rows: &[Dimension],
    cols: &[Dimension],
    metric: &Metric,
) -> Result<Records, StoreError> {
    let mut wanted: Vec<&str> = vec![metric.column];
    for d in rows.iter().chain(cols) {
        if let Dimension::Column { column, .. } = d {
            wanted.push(column);
        }
    }
    let filter = Filter {
        complete_only: true,
        ..filter.clone()
    };
    let found = store.column_rows(&filter, &wanted)?;
    let needs_tags = rows.iter().chain(cols).any(|d| matches!(d, Dimension::Tag(_)));
    let tags = if needs_tags {
        store.tags_of(found.iter().map(|(id, _)| *id))?
    } else {
        BTreeMap::new()
    };
    let key = |id: i64, values: &[Sql], dims: &[Dimension]| -> Vec<String> {
        dims.iter()
            .map(|d| match d {
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
    let matched_runs = found.len();
    let records = found
        .iter()
        .filter_map(|(id, values)| {
            let value = match values[0] {
                Sql::Real(r) => r,
                Sql::Integer(i) => i as f64,
                _ => return None,
            };
            Some(Record {
                run_id: *id,
                row: key(*id, values, rows),
                col: key(*id, values, cols),
                value,
            })
        })
        .collect();
    Ok(Records { records, matched_runs })
}

#[cfg(test)]
mod tests {
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
                "cpu",
                "agent-cpu",
                "service-demand",
                "agent-service-demand"
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
