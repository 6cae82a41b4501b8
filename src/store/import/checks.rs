//! The ranges an imported figure must lie in to be a measurement at all:
//! rates are finite, not negative and under 1 Pbit/s; CPU is between 0 and
//! 100 % of every core (at most 10,000 %, 100 cores, where the format does
//! not say how many); loss is a percentage; a run started between 1990 and
//! a day from now; its workload is one nicbench knows. Each format names
//! its own fields (`end.sum_received.bits_per_second`).

use serde_json::Value;

use crate::model::bounds::{within, OutOfRange};
use crate::store::columns::{Columns, CPU_PARTS};

/// The fastest rate any import may claim: 1 Pbit/s (`model::bounds`).
pub const MAX_BITS_PER_SECOND: f64 = crate::model::bounds::MAX_BITS_PER_SECOND;
/// CPU percent where the cores are not known: 100 cores.
pub const MAX_CPU_PERCENT: f64 = 1e4;
/// 1990-01-01T00:00:00Z.
pub const EARLIEST_START_UNIX_SECONDS: f64 = 631_152_000.0;
/// How far after now a start may lie (clocks drift, zones confuse).
pub const LATEST_START_AFTER_NOW_SECONDS: f64 = 86_400.0;

/// A figure out of its range: the field as the format names it, its value
/// when it is a number (to find its line), and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Bad {
    pub field: String,
    pub value: Option<f64>,
    pub what: String,
}

/// Where a format keeps each stored column, as its own field name.
pub type FieldOf<'a> = &'a dyn Fn(&str) -> String;

impl From<OutOfRange> for Bad {
    fn from(e: OutOfRange) -> Bad {
        Bad {
            field: e.field,
            value: Some(e.value),
            what: e.why,
        }
    }
}

/// A run's start: 1990 to a day from now.
pub fn started_at(field: &str, seconds: f64) -> Result<(), Bad> {
    let latest = crate::store::now_unix_seconds() + LATEST_START_AFTER_NOW_SECONDS;
    if seconds.is_finite() && (EARLIEST_START_UNIX_SECONDS..=latest).contains(&seconds) {
        return Ok(());
    }
    Err(Bad {
        field: field.to_string(),
        value: Some(seconds),
        what: format!(
            "{seconds} s since 1970 is not when a run started: expected 1990-01-01 to a day from now \
             ({EARLIEST_START_UNIX_SECONDS:.0} to {latest:.0})"
        ),
    })
}

/// A rate in bit/s.
pub fn rate(field: &str, bits_per_second: f64) -> Result<(), Bad> {
    Ok(within(field, bits_per_second, 0.0, MAX_BITS_PER_SECOND, "bit/s")?)
}

/// A workload nicbench knows.
pub fn workload(field: &str, name: &str) -> Result<(), Bad> {
    crate::workload::find(name).map(drop).map_err(|_| Bad {
        field: field.to_string(),
        value: None,
        what: format!(
            "{name:?} is not a workload nicbench knows (expected one of {})",
            crate::workload::names().collect::<Vec<_>>().join(", ")
        ),
    })
}

/// Every stored figure of `c` in its range; `cores` bounds the CPU columns
/// (100 % each) where the document says how many there are.
pub fn columns(c: &Columns, field_of: FieldOf, cores: [Option<u32>; 2]) -> Result<(), Bad> {
    let check = |column: &str, lo: f64, hi: f64, unit: &str| match figure(c, column) {
        Some(v) => Ok(within(&field_of(column), v, lo, hi, unit)?),
        None => Ok(()),
    };
    for column in [
        "receiver_bits_per_second",
        "sender_bits_per_second",
        "link_speed_bits_per_second",
        "sweep_peak_bits_per_second",
    ] {
        if let Some(v) = figure(c, column) {
            rate(&field_of(column), v)?;
        }
    }
    for (end, cores) in ["client", "agent"].into_iter().zip(cores) {
        let most = cores.map_or(MAX_CPU_PERCENT, |n| (100.0 * n as f64).min(MAX_CPU_PERCENT));
        check(&format!("{end}_cpu_percent"), 0.0, most, "%")?;
        for part in CPU_PARTS {
            check(&format!("{end}_cpu_{part}_percent"), 0.0, most, "%")?;
        }
        check(&format!("{end}_service_demand_us_per_kb"), 0.0, 1e9, "us/KB")?;
        check(&format!("{end}_mtu_bytes"), 68.0, 65536.0, "bytes")?;
    }
    check("loss_percent", 0.0, 100.0, "%")?;
    check("p50_latency_us", 0.0, 3.6e9, "us")?;
    check("p99_latency_us", 0.0, 3.6e9, "us")?;
    check("transactions_per_second", 0.0, 1e10, "/s")?;
    check("streams", 1.0, 10_000.0, "streams")?;
    check("message_bytes", 1.0, (1u64 << 30) as f64, "bytes")
}

/// A figure as the importer read it, before the columns drop what is not
/// finite (so that 1e308 * 2^20 is refused, not stored as NULL).
fn figure(c: &Columns, column: &str) -> Option<f64> {
    let part = |parts: &crate::store::columns::CpuParts, column: &str| {
        let kind = column.split('_').nth(2)?;
        parts.values()[CPU_PARTS.iter().position(|p| *p == kind)?]
    };
    match column {
        "receiver_bits_per_second" => c.receiver_bits_per_second,
        "sender_bits_per_second" => c.sender_bits_per_second,
        "link_speed_bits_per_second" => c.link_speed_bits_per_second,
        "client_cpu_percent" => c.client_cpu_percent,
        "agent_cpu_percent" => c.agent_cpu_percent,
        "client_service_demand_us_per_kb" => c.client_service_demand_us_per_kb,
        "agent_service_demand_us_per_kb" => c.agent_service_demand_us_per_kb,
        "client_mtu_bytes" => c.client_mtu_bytes.map(|v| v as f64),
        "agent_mtu_bytes" => c.agent_mtu_bytes.map(|v| v as f64),
        "streams" => c.streams.map(|v| v as f64),
        "message_bytes" => c.message_bytes.map(|v| v as f64),
        other if other.starts_with("client_cpu_") => part(&c.client_cpu_parts, other),
        other if other.starts_with("agent_cpu_") => part(&c.agent_cpu_parts, other),
        other => c.workload_figures.get(other).copied(),
    }
}

/// The counts, durations and rates of a document, wherever they are (every
/// stream, every interval): a number, finite, not negative, and a rate under
/// 1 Pbit/s. `exact` names such keys; a key ending in `_bytes` or
/// `_bits_per_second` is one too. Absent or null passes; `"fast"` does not.
/// The field is named by its path (`intervals.3.sum.bits_per_second`).
pub fn document_figures(doc: &Value, exact: &[&str]) -> Result<(), Bad> {
    fn walk(v: &Value, path: &mut Vec<String>, exact: &[&str]) -> Result<(), Bad> {
        match v {
            Value::Object(map) => {
                for (key, value) in map {
                    path.push(key.clone());
                    let figure =
                        exact.contains(&key.as_str()) || key.ends_with("_bytes") || key.ends_with("_bits_per_second");
                    if figure {
                        one(value, key, &path.join("."))?;
                    }
                    walk(value, path, exact)?;
                    path.pop();
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    path.push(i.to_string());
                    walk(item, path, exact)?;
                    path.pop();
                }
            }
            _ => {}
        }
        Ok(())
    }
    fn one(value: &Value, key: &str, field: &str) -> Result<(), Bad> {
        let rate = key.ends_with("bits_per_second");
        match value {
            Value::Null | Value::Object(_) | Value::Array(_) => Ok(()),
            Value::Number(n) => {
                let v = n.as_f64().unwrap_or(f64::NAN);
                if rate {
                    Ok(within(field, v, 0.0, MAX_BITS_PER_SECOND, "bit/s")?)
                } else {
                    within(field, v, 0.0, f64::MAX, "").map_err(|e| Bad {
                        what: format!("{v} is not a measurement: a count or a duration is not negative"),
                        ..Bad::from(e)
                    })
                }
            }
            other => Err(Bad {
                field: field.to_string(),
                value: None,
                what: format!(
                    "{other} is not a measurement: expected a number{}",
                    if rate { " (bit/s)" } else { "" }
                ),
            }),
        }
    }
    walk(doc, &mut Vec::new(), exact)
}

/// The checks of a nicbench document: its start, workload and columns,
/// named by their place in the document.
pub fn nicbench_document(doc: &Value, c: &Columns) -> Result<(), Bad> {
    started_at("started_at_unix_seconds", c.started_at_unix_seconds)?;
    workload("workload", &c.workload)?;
    let results = crate::workload::results_of(&c.workload);
    let field_of = |column: &str| -> String {
        let pointer = match column {
            "receiver_bits_per_second" => "/sum/receiver/bits_per_second".to_string(),
            "sender_bits_per_second" => "/sum/sender/bits_per_second".to_string(),
            "link_speed_bits_per_second" => "/line_rate/link_bits_per_second".to_string(),
            "client_cpu_percent" | "agent_cpu_percent" => {
                format!("/cpu/{}/utilization_percent", &column[..column.find('_').unwrap_or(0)])
            }
            "client_mtu_bytes" | "agent_mtu_bytes" => {
                format!(
                    "/{}/facts/interface/mtu_bytes",
                    &column[..column.find('_').unwrap_or(0)]
                )
            }
            "streams" | "message_bytes" => format!("/spec/{column}"),
            other => match results.stored_columns().iter().find(|m| m.name == other) {
                Some(m) => m.pointer.to_string(),
                // client_cpu_user_percent -> /cpu/client/user_percent, ...
                None => match other.split_once("_cpu_") {
                    Some((end, part)) => format!("/cpu/{end}/{part}"),
                    None => match other.split_once("_service_demand") {
                        Some((end, _)) => format!("/cpu/{end}/service_demand_us_per_kb"),
                        None => format!("/{other}"),
                    },
                },
            },
        };
        pointer.trim_start_matches('/').replace('/', ".")
    };
    let cores = ["client", "agent"].map(|end| {
        doc.pointer(&format!("/{end}/facts/logical_cpus"))
            .and_then(Value::as_u64)
            .filter(|n| *n > 0)
            .map(|n| n.min(u32::MAX as u64) as u32)
    });
    columns(c, &field_of, cores)?;
    document_figures(doc, NICBENCH_FIGURES)
}

/// The keys of a nicbench document that hold a count, a duration or a rate
/// (besides every `*_bytes` and `*_bits_per_second`). Other `*_seconds`
/// keys may be negative (an added delay, a clock offset).
const NICBENCH_FIGURES: &[&str] = &["bytes", "seconds", "start_seconds", "end_seconds", "bits_per_second"];

/// The same for an iperf3 document (its intervals' `start` and `end` are
/// seconds from the test's start).
pub const IPERF3_FIGURES: &[&str] = &[
    "bytes",
    "seconds",
    "start",
    "end",
    "bits_per_second",
    "retransmits",
    "packets",
    "lost_packets",
    "lost_percent",
    "jitter_ms",
    "snd_cwnd",
    "rtt",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp(receiver: f64) -> Columns {
        Columns {
            workload: "tcp".into(),
            started_at_unix_seconds: 1.7e9,
            receiver_bits_per_second: Some(receiver),
            ..Columns::default()
        }
    }

    #[test]
    fn rates_must_be_finite_positive_and_under_a_petabit() {
        let name = |c: &str| c.to_string();
        assert!(columns(&tcp(9.4e9), &name, [None, None]).is_ok());
        for bad in [-1.0, f64::INFINITY, f64::NAN, 2e15] {
            let e = columns(&tcp(bad), &name, [None, None]).unwrap_err();
            assert_eq!(e.field, "receiver_bits_per_second");
            assert!(e.what.contains("expected 0 to 1000000000000000 bit/s"), "{}", e.what);
        }
    }

    #[test]
    fn cpu_is_bounded_by_the_cores_when_known() {
        let name = |c: &str| c.to_string();
        let mut c = tcp(1e9);
        c.client_cpu_percent = Some(350.0);
        assert!(columns(&c, &name, [None, None]).is_ok());
        let e = columns(&c, &name, [Some(2), None]).unwrap_err();
        assert!(e.what.contains("expected 0 to 200 %"), "{}", e.what);
        c.client_cpu_percent = Some(1e308);
        assert!(columns(&c, &name, [None, None]).is_err());
    }

    /// Issue 41: imports accepted `bytes` -100, `seconds` -10, negative
    /// per-interval rates and a rate of "fast".
    #[test]
    fn counts_durations_and_rates_anywhere_in_a_document_are_numbers_not_below_zero() {
        let keys = ["bytes", "seconds", "bits_per_second"];
        let ok = serde_json::json!({"intervals": [{"sum": {"bytes": 10, "seconds": 1.0, "bits_per_second": 80.0,
                                    "clock_offset_seconds": -0.5}}], "x": null, "sender_bytes": null});
        assert_eq!(document_figures(&ok, &keys), Ok(()));
        for (doc, field, words) in [
            (serde_json::json!({"end": {"bytes": -100}}), "end.bytes", "not negative"),
            (
                serde_json::json!({"end": {"seconds": -10.0}}),
                "end.seconds",
                "not negative",
            ),
            (
                serde_json::json!({"intervals": [{"streams": [{"bits_per_second": -1.0}]}]}),
                "intervals.0.streams.0.bits_per_second",
                "expected 0 to",
            ),
            (
                serde_json::json!({"end": {"sum_received": {"bits_per_second": "fast"}}}),
                "end.sum_received.bits_per_second",
                "expected a number (bit/s)",
            ),
            (
                serde_json::json!({"streams": [{"omitted_bytes": true}]}),
                "streams.0.omitted_bytes",
                "expected a number",
            ),
        ] {
            let bad = document_figures(&doc, &keys).unwrap_err();
            assert_eq!(bad.field, field);
            assert!(bad.what.contains(words), "{}", bad.what);
        }
    }

    #[test]
    fn a_start_before_1990_or_after_tomorrow_is_refused() {
        assert!(started_at("t", 1.7e9).is_ok());
        assert!(started_at("t", 0.0).is_err());
        assert!(started_at("t", 9.2e18).unwrap_err().what.contains("1990-01-01"));
        assert!(workload("workload", "<script>")
            .unwrap_err()
            .what
            .contains("not a workload"));
    }
}
