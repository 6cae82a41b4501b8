//! The query-able columns of a run, read from its serialized document
//! (`nicbench.run/1`) by JSON pointer, so that `compare` and `runs` never
//! parse JSON per row and the store never depends on the result types'
//! fields. The generic columns are listed here once ([`DOCUMENT_COLUMNS`]);
//! a workload's own figures and its headline are what the workload
//! declares ([`crate::workload::Stored::stored_columns`],
//! [`crate::workload::Figures::headline`]).

use std::collections::BTreeMap;

use rusqlite::types::Value as Sql;
use serde_json::Value;

use crate::workload;

/// What people filter and compare runs by, one value per column of `runs`.
/// `None` is SQL NULL: the document did not carry the figure.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Columns {
    pub started_at_unix_seconds: f64,
    pub nicbench_version: Option<String>,
    pub agent_address: Option<String>,
    pub client_host: Option<String>,
    pub agent_host: Option<String>,
    pub workload: String,
    pub direction: Option<String>,
    pub streams: Option<i64>,
    pub message_bytes: Option<i64>,
    pub client_mtu_bytes: Option<i64>,
    pub agent_mtu_bytes: Option<i64>,
    pub link_speed_bits_per_second: Option<f64>,
    pub receiver_bits_per_second: Option<f64>,
    pub sender_bits_per_second: Option<f64>,
    /// The workload's own figures, by column ([`WORKLOAD_COLUMNS`]).
    pub workload_figures: BTreeMap<&'static str, f64>,
    pub client_cpu_percent: Option<f64>,
    pub agent_cpu_percent: Option<f64>,
    pub client_service_demand_us_per_kb: Option<f64>,
    pub agent_service_demand_us_per_kb: Option<f64>,
    /// The client's CPU split (`cpu.client.user_percent`, ...; schema 3).
    pub client_cpu_parts: CpuParts,
    /// The agent's CPU split (`cpu.agent.user_percent`, ...; schema 3).
    pub agent_cpu_parts: CpuParts,
    pub verdict_kind: Option<String>,
    pub headline: Option<Headline>,
}

/// The columns of `runs` a run's document fills, in the order `export`
/// lists them; the headline and the CPU split follow in [`HEADLINE_COLUMNS`]
/// and [`CPU_PART_COLUMNS`].
pub const DOCUMENT_COLUMNS: [&str; 24] = [
    "started_at_unix_seconds",
    "nicbench_version",
    "workload",
    "client_host",
    "agent_host",
    "agent_address",
    "direction",
    "streams",
    "message_bytes",
    "client_mtu_bytes",
    "agent_mtu_bytes",
    "link_speed_bits_per_second",
    "receiver_bits_per_second",
    "sender_bits_per_second",
    "loss_percent",
    "p50_latency_us",
    "p99_latency_us",
    "transactions_per_second",
    "sweep_peak_bits_per_second",
    "client_cpu_percent",
    "agent_cpu_percent",
    "client_service_demand_us_per_kb",
    "agent_service_demand_us_per_kb",
    "verdict_kind",
];

/// The columns `export` lists after a run's id and tags: those of its
/// document, the command line after the start, and what the store keeps
/// about the run (trials, completeness, where it came from) at the end.
pub const LISTED_COLUMNS: [&str; 30] = {
    const BOOKKEEPING: [&str; 5] = ["trials_planned", "trials_saved", "complete", "source", "source_file"];
    let mut listed = [""; 30];
    listed[0] = DOCUMENT_COLUMNS[0];
    listed[1] = "command_line";
    let mut i = 1;
    while i < DOCUMENT_COLUMNS.len() {
        listed[i + 1] = DOCUMENT_COLUMNS[i];
        i += 1;
    }
    let mut j = 0;
    while j < BOOKKEEPING.len() {
        listed[DOCUMENT_COLUMNS.len() + 1 + j] = BOOKKEEPING[j];
        j += 1;
    }
    listed
};

/// The columns of [`DOCUMENT_COLUMNS`] that hold a workload's own figures:
/// every workload's [`crate::workload::Stored::stored_columns`] names
/// one of these.
pub const WORKLOAD_COLUMNS: [&str; 5] = [
    "loss_percent",
    "p50_latency_us",
    "p99_latency_us",
    "transactions_per_second",
    "sweep_peak_bits_per_second",
];

/// The run's figure of merit: its name, unit and value.
pub const HEADLINE_COLUMNS: [&str; 3] = ["headline_metric", "headline_unit", "headline_value"];

/// One end's CPU time by kind, percent of all cores (the `user_percent`,
/// `system_percent`, `softirq_percent`, `irq_percent` of its CPU report).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuParts {
    pub user_percent: Option<f64>,
    pub system_percent: Option<f64>,
    pub softirq_percent: Option<f64>,
    pub irq_percent: Option<f64>,
}

/// The kinds of CPU time kept as columns, as named in a CPU report.
pub const CPU_PARTS: [&str; 4] = ["user", "system", "softirq", "irq"];

/// The columns of the CPU split, client's then agent's, each in the order
/// of [`CPU_PARTS`] (`client_cpu_user_percent`, ..., `agent_cpu_irq_percent`).
pub const CPU_PART_COLUMNS: [&str; 8] = [
    "client_cpu_user_percent",
    "client_cpu_system_percent",
    "client_cpu_softirq_percent",
    "client_cpu_irq_percent",
    "agent_cpu_user_percent",
    "agent_cpu_system_percent",
    "agent_cpu_softirq_percent",
    "agent_cpu_irq_percent",
];

impl CpuParts {
    /// The split of the CPU report at `path` (`/cpu/client`).
    fn of(doc: &Value, path: &str) -> CpuParts {
        let part = |kind: &str| number(doc, &format!("{path}/{kind}_percent"));
        CpuParts {
            user_percent: part("user"),
            system_percent: part("system"),
            softirq_percent: part("softirq"),
            irq_percent: part("irq"),
        }
    }

    /// In the order of [`CPU_PARTS`].
    pub fn values(&self) -> [Option<f64>; 4] {
        [
            self.user_percent,
            self.system_percent,
            self.softirq_percent,
            self.irq_percent,
        ]
    }
}

/// The one figure a run is listed by, with its unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    pub metric: String,
    pub unit: String,
    pub value: f64,
}

fn number(doc: &Value, pointer: &str) -> Option<f64> {
    doc.pointer(pointer).and_then(Value::as_f64)
}

fn integer(doc: &Value, pointer: &str) -> Option<i64> {
    doc.pointer(pointer).and_then(Value::as_i64)
}

fn text(doc: &Value, pointer: &str) -> Option<String> {
    doc.pointer(pointer).and_then(Value::as_str).map(str::to_string)
}

/// The columns of a `nicbench.run/1` document (the reported trial's figures).
pub fn of_document(doc: &Value) -> Columns {
    let workload = text(doc, "/workload").unwrap_or_default();
    let results = workload::results_of(&workload);
    let mut c = Columns {
        started_at_unix_seconds: number(doc, "/started_at_unix_seconds").unwrap_or(0.0),
        nicbench_version: text(doc, "/client/facts/nicbench_version"),
        agent_address: text(doc, "/agent/address"),
        client_host: text(doc, "/client/facts/hostname"),
        agent_host: text(doc, "/agent/facts/hostname"),
        workload,
        direction: text(doc, "/spec/direction"),
        streams: integer(doc, "/spec/streams"),
        message_bytes: integer(doc, "/spec/message_bytes"),
        client_mtu_bytes: integer(doc, "/client/facts/interface/mtu_bytes"),
        agent_mtu_bytes: integer(doc, "/agent/facts/interface/mtu_bytes"),
        link_speed_bits_per_second: number(doc, "/line_rate/link_bits_per_second"),
        receiver_bits_per_second: number(doc, "/sum/receiver/bits_per_second"),
        sender_bits_per_second: number(doc, "/sum/sender/bits_per_second"),
        workload_figures: results
            .stored_columns()
            .iter()
            .filter_map(|m| Some((m.name, m.read(doc)?)))
            .collect(),
        client_cpu_percent: number(doc, "/cpu/client/utilization_percent"),
        agent_cpu_percent: number(doc, "/cpu/agent/utilization_percent"),
        client_service_demand_us_per_kb: number(doc, "/cpu/client/service_demand_us_per_kb"),
        agent_service_demand_us_per_kb: number(doc, "/cpu/agent/service_demand_us_per_kb"),
        client_cpu_parts: CpuParts::of(doc, "/cpu/client"),
        agent_cpu_parts: CpuParts::of(doc, "/cpu/agent"),
        verdict_kind: text(doc, "/verdict/kind"),
        headline: None,
    };
    if c.link_speed_bits_per_second.is_none() {
        // Without a verdict's line-rate share, the slower NIC's speed.
        let speeds =
            ["client", "agent"].map(|end| number(doc, &format!("/{end}/facts/interface/link_speed_bits_per_second")));
        c.link_speed_bits_per_second = speeds.into_iter().flatten().reduce(f64::min);
    }
    c.headline = trial_headline(&c.workload, doc);
    c
}

/// The headline of a run or trial document of `workload`: the figure the
/// workload declares as its figure of merit, where the document holds it.
pub fn trial_headline(workload: &str, doc: &Value) -> Option<Headline> {
    let metric = workload::results_of(workload).headline();
    metric.read(doc).map(|value| Headline {
        metric: metric.name.into(),
        unit: metric.unit.into(),
        value,
    })
}

/// The run's figure of merit: the one its columns were read with, or, for
/// columns an importer filled, the workload's headline among them.
pub fn headline(c: &Columns) -> Option<Headline> {
    if c.headline.is_some() {
        return c.headline.clone();
    }
    let metric = workload::results_of(&c.workload).headline();
    c.number(metric.name).map(|value| Headline {
        metric: metric.name.into(),
        unit: metric.unit.into(),
        value,
    })
}

impl Columns {
    /// A figure column by name (`receiver_bits_per_second`,
    /// `loss_percent`); None for a column that is not a number or that the
    /// run does not have.
    pub fn number(&self, column: &str) -> Option<f64> {
        match self.value(column)? {
            Sql::Real(v) => Some(v),
            Sql::Integer(v) => Some(v as f64),
            _ => None,
        }
    }

    /// The value of a column of [`DOCUMENT_COLUMNS`], [`HEADLINE_COLUMNS`]
    /// or [`CPU_PART_COLUMNS`]; None for any other name.
    pub fn value(&self, column: &str) -> Option<Sql> {
        let text = |v: &Option<String>| v.clone().map(Sql::Text).unwrap_or(Sql::Null);
        let int = |v: Option<i64>| v.map(Sql::Integer).unwrap_or(Sql::Null);
        let real = |v: Option<f64>| v.filter(|x| x.is_finite()).map(Sql::Real).unwrap_or(Sql::Null);
        let h = self.headline.as_ref();
        if WORKLOAD_COLUMNS.contains(&column) {
            return Some(real(self.workload_figures.get(column).copied()));
        }
        if let Some(i) = CPU_PART_COLUMNS.iter().position(|c| *c == column) {
            let parts = if i < 4 {
                &self.client_cpu_parts
            } else {
                &self.agent_cpu_parts
            };
            return Some(real(parts.values()[i % 4]));
        }
        Some(match column {
            "started_at_unix_seconds" => Sql::Real(self.started_at_unix_seconds),
            "nicbench_version" => text(&self.nicbench_version),
            "workload" => Sql::Text(self.workload.clone()),
            "client_host" => text(&self.client_host),
            "agent_host" => text(&self.agent_host),
            "agent_address" => text(&self.agent_address),
            "direction" => text(&self.direction),
            "streams" => int(self.streams),
            "message_bytes" => int(self.message_bytes),
            "client_mtu_bytes" => int(self.client_mtu_bytes),
            "agent_mtu_bytes" => int(self.agent_mtu_bytes),
            "link_speed_bits_per_second" => real(self.link_speed_bits_per_second),
            "receiver_bits_per_second" => real(self.receiver_bits_per_second),
            "sender_bits_per_second" => real(self.sender_bits_per_second),
            "client_cpu_percent" => real(self.client_cpu_percent),
            "agent_cpu_percent" => real(self.agent_cpu_percent),
            "client_service_demand_us_per_kb" => real(self.client_service_demand_us_per_kb),
            "agent_service_demand_us_per_kb" => real(self.agent_service_demand_us_per_kb),
            "verdict_kind" => text(&self.verdict_kind),
            "headline_metric" => text(&h.map(|h| h.metric.clone())),
            "headline_unit" => text(&h.map(|h| h.unit.clone())),
            "headline_value" => real(h.map(|h| h.value)),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_rr_document_is_headed_by_its_transactions() {
        let doc = json!({
            "workload": "rr", "started_at_unix_seconds": 5.0,
            "spec": {"direction": "forward", "streams": 1, "message_bytes": 1},
            "sum": {"receiver": {"bits_per_second": 10.0},
                    "rr": {"transactions_per_second": 2e4, "latency": {"p50_us": 40.0, "p99_us": 90.0}}},
            "client": {"facts": {"interface": {"mtu_bytes": 65536, "link_speed_bits_per_second": 1e9}}},
            "agent": {"facts": {"interface": {"mtu_bytes": 9000, "link_speed_bits_per_second": 1e8}}},
        });
        let c = of_document(&doc);
        assert_eq!(c.number("p99_latency_us"), Some(90.0));
        assert_eq!((c.client_mtu_bytes, c.agent_mtu_bytes), (Some(65536), Some(9000)));
        assert_eq!(c.link_speed_bits_per_second, Some(1e8));
        assert_eq!(c.number("loss_percent"), None);
        assert_eq!(c.client_cpu_parts, CpuParts::default());
        let h = c.headline.unwrap();
        assert_eq!((h.metric.as_str(), h.value), ("transactions_per_second", 2e4));
    }

    #[test]
    fn the_cpu_split_of_both_ends_is_read_and_a_missing_part_is_null() {
        let doc = json!({"cpu": {
            "client": {"user_percent": 1.5, "system_percent": 20.0, "softirq_percent": 7.25, "irq_percent": 0.5},
            "agent": {"user_percent": 2.0, "system_percent": 30, "softirq_percent": 9.0},
        }});
        let c = of_document(&doc);
        assert_eq!(
            c.client_cpu_parts.values(),
            [Some(1.5), Some(20.0), Some(7.25), Some(0.5)]
        );
        assert_eq!(c.agent_cpu_parts.values(), [Some(2.0), Some(30.0), Some(9.0), None]);
        for (i, name) in CPU_PART_COLUMNS.iter().enumerate() {
            let end = if i < 4 { "client" } else { "agent" };
            assert_eq!(*name, format!("{end}_cpu_{}_percent", CPU_PARTS[i % 4]));
        }
    }

    #[test]
    fn pointers_index_into_arrays() {
        let doc = json!({"workload": "sweep",
                         "streams": [{"sender": {"sweep": {"summary": {"peak_bits_per_second": 3.0}}}}]});
        assert_eq!(of_document(&doc).number("sweep_peak_bits_per_second"), Some(3.0));
        assert_eq!(of_document(&doc).headline.unwrap().metric, "sweep_peak_bits_per_second");
    }

    /// Regression: a files run was stored with the receiver's rate as its
    /// headline while the command reports the payload's.
    #[test]
    fn a_files_run_is_headed_by_its_payload_rate_as_the_command_reports_it() {
        use crate::workload::files::result::{FilesResult, KEY};
        let mut trial = crate::model::TrialResult::default();
        trial.sum.receiver.bits_per_second = 9e9;
        let files = FilesResult {
            payload_bits_per_second: 7e9,
            ..FilesResult::default()
        };
        trial.sum.extras.set(KEY, &files);
        let mut doc = serde_json::to_value(&trial).unwrap();
        doc["workload"] = json!("files");
        let h = of_document(&doc).headline.unwrap();
        assert_eq!(
            (h.metric.as_str(), h.unit.as_str(), h.value),
            ("payload_bits_per_second", "bit/s", 7e9)
        );
        let figure = crate::workload::results_of("files").figure_of_merit(&trial);
        assert_eq!((figure.metric, figure.value), (h.metric.as_str(), h.value));
    }

    #[test]
    fn a_workload_this_build_does_not_know_is_headed_by_the_receiver() {
        let doc = json!({"workload": "toy", "sum": {"receiver": {"bits_per_second": 5.0},
                                                     "rr": {"transactions_per_second": 2e4}}});
        let c = of_document(&doc);
        assert_eq!(c.headline.unwrap().metric, "receiver_bits_per_second");
        assert!(c.workload_figures.is_empty());
    }

    /// Every column the store writes has a value, and every workload's own
    /// columns are columns of the schema.
    #[test]
    fn every_listed_column_has_a_value_and_every_workload_column_is_listed() {
        let c = Columns::default();
        for column in DOCUMENT_COLUMNS
            .iter()
            .chain(&HEADLINE_COLUMNS)
            .chain(&CPU_PART_COLUMNS)
        {
            assert!(c.value(column).is_some(), "{column}");
        }
        assert_eq!(c.value("document"), None);
        for w in crate::workload::REGISTRY {
            for m in w.results().stored_columns() {
                assert!(
                    WORKLOAD_COLUMNS.contains(&m.name),
                    "{}: {} is no column",
                    w.name(),
                    m.name
                );
            }
        }
        assert!(WORKLOAD_COLUMNS.iter().all(|c| DOCUMENT_COLUMNS.contains(c)));
    }
}
