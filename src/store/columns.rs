//! The query-able columns of a run, read from its serialized document
//! (`nicbench.run/1`) by JSON path, so that `compare` and `runs` never parse
//! JSON per row and the store never depends on the result types' fields.

use serde_json::Value;

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
    pub loss_percent: Option<f64>,
    pub p50_latency_us: Option<f64>,
    pub p99_latency_us: Option<f64>,
    pub transactions_per_second: Option<f64>,
    pub sweep_peak_bits_per_second: Option<f64>,
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
    /// The split of the CPU report at `path` (`cpu.client`).
    fn of(doc: &Value, path: &str) -> CpuParts {
        let part = |kind: &str| number(doc, &format!("{path}.{kind}_percent"));
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

/// The value at a dotted path (`sum.rr.latency.p99_us`; `streams.0.x` for
/// an array element).
pub fn at<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(doc, |v, key| match key.parse::<usize>() {
        Ok(i) => v.get(i),
        Err(_) => v.get(key),
    })
}

fn number(doc: &Value, path: &str) -> Option<f64> {
    at(doc, path).and_then(Value::as_f64)
}

fn integer(doc: &Value, path: &str) -> Option<i64> {
    at(doc, path).and_then(Value::as_i64)
}

fn text(doc: &Value, path: &str) -> Option<String> {
    at(doc, path).and_then(Value::as_str).map(str::to_string)
}

/// The columns of a `nicbench.run/1` document (the reported trial's figures).
pub fn of_document(doc: &Value) -> Columns {
    let mut c = Columns {
        started_at_unix_seconds: number(doc, "started_at_unix_seconds").unwrap_or(0.0),
        nicbench_version: text(doc, "client.facts.nicbench_version"),
        agent_address: text(doc, "agent.address"),
        client_host: text(doc, "client.facts.hostname"),
        agent_host: text(doc, "agent.facts.hostname"),
        workload: text(doc, "workload").unwrap_or_default(),
        direction: text(doc, "spec.direction"),
        streams: integer(doc, "spec.streams"),
        message_bytes: integer(doc, "spec.message_bytes"),
        client_mtu_bytes: integer(doc, "client.facts.interface.mtu_bytes"),
        agent_mtu_bytes: integer(doc, "agent.facts.interface.mtu_bytes"),
        link_speed_bits_per_second: number(doc, "line_rate.link_bits_per_second"),
        receiver_bits_per_second: number(doc, "sum.receiver.bits_per_second"),
        sender_bits_per_second: number(doc, "sum.sender.bits_per_second"),
        loss_percent: number(doc, "sum.udp.loss_percent"),
        p50_latency_us: number(doc, "sum.rr.latency.p50_us"),
        p99_latency_us: number(doc, "sum.rr.latency.p99_us"),
        transactions_per_second: number(doc, "sum.rr.transactions_per_second"),
        sweep_peak_bits_per_second: number(doc, "streams.0.sender.sweep.summary.peak_bits_per_second"),
        client_cpu_percent: number(doc, "cpu.client.utilization_percent"),
        agent_cpu_percent: number(doc, "cpu.agent.utilization_percent"),
        client_service_demand_us_per_kb: number(doc, "cpu.client.service_demand_us_per_kb"),
        agent_service_demand_us_per_kb: number(doc, "cpu.agent.service_demand_us_per_kb"),
        client_cpu_parts: CpuParts::of(doc, "cpu.client"),
        agent_cpu_parts: CpuParts::of(doc, "cpu.agent"),
        verdict_kind: text(doc, "verdict.kind"),
        headline: None,
    };
    if c.link_speed_bits_per_second.is_none() {
        // Without a verdict's line-rate share, the slower NIC's speed.
        let speeds =
            ["client", "agent"].map(|end| number(doc, &format!("{end}.facts.interface.link_speed_bits_per_second")));
        c.link_speed_bits_per_second = speeds.into_iter().flatten().reduce(f64::min);
    }
    c.headline = headline(&c);
    c
}

/// The run's figure of merit, judged by what the document holds (the same
/// order as the plan runner's): transactions, a sweep's peak, the receiver.
pub fn headline(c: &Columns) -> Option<Headline> {
    let pick = |metric: &str, unit: &str, value: Option<f64>| {
        value.map(|value| Headline {
            metric: metric.into(),
            unit: unit.into(),
            value,
        })
    };
    pick("transactions_per_second", "transactions/s", c.transactions_per_second)
        .or_else(|| pick("sweep_peak_bits_per_second", "bit/s", c.sweep_peak_bits_per_second))
        .or_else(|| pick("receiver_bits_per_second", "bit/s", c.receiver_bits_per_second))
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
        assert_eq!(c.p99_latency_us, Some(90.0));
        assert_eq!((c.client_mtu_bytes, c.agent_mtu_bytes), (Some(65536), Some(9000)));
        assert_eq!(c.link_speed_bits_per_second, Some(1e8));
        assert_eq!(c.loss_percent, None);
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
    fn paths_index_into_arrays() {
        let doc = json!({"streams": [{"sender": {"sweep": {"summary": {"peak_bits_per_second": 3.0}}}}]});
        assert_eq!(of_document(&doc).sweep_peak_bits_per_second, Some(3.0));
        assert_eq!(of_document(&doc).headline.unwrap().metric, "sweep_peak_bits_per_second");
    }
}
