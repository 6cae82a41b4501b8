//! Figures and how they read: the figure trials of a case are compared by
//! ([`Figure`]), and where a run document holds each figure, in what unit,
//! which way is better ([`Metric`]).

use crate::model::TrialResult;
use crate::units::Rate;

/// Share of the offered rate below which a sender did not reach its offer
/// (UDP's `-b`, TCP's pacing).
pub const OFFER_REACHED_PERCENT: f64 = 90.0;

/// The figure trials of a case are compared by.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Name as in JSON, e.g. `receiver_bits_per_second`.
    pub metric: &'static str,
    /// Unit of the value, e.g. `bit/s`.
    pub unit: &'static str,
    pub value: f64,
    /// What the value is, where the unit does not say it (`peak`).
    pub qualifier: &'static str,
}

impl Figure {
    /// The receiver's throughput: the figure of bulk-transfer workloads.
    pub fn receiver_rate(trial: &TrialResult) -> Figure {
        Figure {
            metric: "receiver_bits_per_second",
            unit: "bit/s",
            value: trial.sum.receiver.bits_per_second,
            qualifier: "",
        }
    }
}

impl std::fmt::Display for Figure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = format_figure(self.value, self.unit);
        match self.qualifier {
            "" => write!(f, "{value}"),
            q => write!(f, "{value} {q}"),
        }
    }
}

/// Whether a bigger figure is better (throughput) or worse (latency).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
}

/// A figure as a trial's part of a run document holds it: what compare,
/// plot, the store and metrics read, and which way is better.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metric {
    /// Its name as in JSON, the store and reports, e.g. `transactions_per_second`.
    pub name: &'static str,
    /// Its short name where people choose a figure (`compare --metric tps`).
    pub option: &'static str,
    /// In words, e.g. `transactions per second`.
    pub label: &'static str,
    /// Unit of the value once scaled, e.g. `bit/s`.
    pub unit: &'static str,
    /// Where a trial's document (the run document, or a trial of it) holds
    /// the figure, as a JSON pointer: `/sum/rr/transactions_per_second`.
    pub pointer: &'static str,
    /// What the number at `pointer` is divided by to be in `unit` (1e6 for
    /// a latency in µs read as seconds); the quotient is rounded to a
    /// billionth of the unit, so that a figure of a few significant digits
    /// prints as it was measured.
    pub divisor: f64,
    pub better: Better,
}

impl Metric {
    /// The receiver's throughput: the figure of bulk-transfer workloads.
    pub const RECEIVER_RATE: Metric = Metric {
        name: "receiver_bits_per_second",
        option: "throughput",
        label: "receiver throughput",
        unit: "bit/s",
        pointer: "/sum/receiver/bits_per_second",
        divisor: 1.0,
        better: Better::Higher,
    };

    /// The sender's throughput.
    pub const SENDER_RATE: Metric = Metric {
        name: "sender_bits_per_second",
        option: "sender",
        label: "sender throughput",
        unit: "bit/s",
        pointer: "/sum/sender/bits_per_second",
        divisor: 1.0,
        better: Better::Higher,
    };

    /// The client's CPU busy, percent of all its cores.
    pub const CLIENT_CPU: Metric = Metric {
        name: "client_cpu_percent",
        option: "cpu",
        label: "client CPU busy",
        unit: "% of all cores",
        pointer: "/cpu/client/utilization_percent",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The agent's CPU busy, percent of all its cores.
    pub const AGENT_CPU: Metric = Metric {
        name: "agent_cpu_percent",
        option: "agent-cpu",
        label: "agent CPU busy",
        unit: "% of all cores",
        pointer: "/cpu/agent/utilization_percent",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The client's CPU time per KB moved: the cost of bulk transfer.
    pub const CLIENT_SERVICE_DEMAND: Metric = Metric {
        name: "client_service_demand_us_per_kb",
        option: "service-demand",
        label: "client service demand",
        unit: "us/KB",
        pointer: "/cpu/client/service_demand_us_per_kb",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The agent's CPU time per KB moved.
    pub const AGENT_SERVICE_DEMAND: Metric = Metric {
        name: "agent_service_demand_us_per_kb",
        option: "agent-service-demand",
        label: "agent service demand",
        unit: "us/KB",
        pointer: "/cpu/agent/service_demand_us_per_kb",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The client's CPU time per transaction: the cost of request/response.
    pub const CLIENT_CPU_PER_TRANSACTION: Metric = Metric {
        name: "client_service_demand_us_per_transaction",
        option: "cpu-per-transaction",
        label: "client CPU per transaction",
        unit: "us/transaction",
        pointer: "/cpu/client/service_demand_us_per_transaction",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The agent's CPU time per transaction.
    pub const AGENT_CPU_PER_TRANSACTION: Metric = Metric {
        name: "agent_service_demand_us_per_transaction",
        option: "agent-cpu-per-transaction",
        label: "agent CPU per transaction",
        unit: "us/transaction",
        pointer: "/cpu/agent/service_demand_us_per_transaction",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The client's stream threads busy, percent of one core: the
    /// client's own CPU even where both ends share a kernel (a lab).
    pub const CLIENT_THREADS_CPU: Metric = Metric {
        name: "client_threads_percent_of_core",
        option: "threads-cpu",
        label: "client threads CPU",
        unit: "% of a core",
        pointer: "/cpu/client/threads_percent_of_core",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The agent's stream threads busy, percent of one core.
    pub const AGENT_THREADS_CPU: Metric = Metric {
        name: "agent_threads_percent_of_core",
        option: "agent-threads-cpu",
        label: "agent threads CPU",
        unit: "% of a core",
        pointer: "/cpu/agent/threads_percent_of_core",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The client's stream threads' CPU time per KB moved.
    pub const CLIENT_THREADS_SERVICE_DEMAND: Metric = Metric {
        name: "client_threads_service_demand_us_per_kb",
        option: "threads-service-demand",
        label: "client threads CPU per KB",
        unit: "us/KB",
        pointer: "/cpu/client/threads_service_demand_us_per_kb",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The agent's stream threads' CPU time per KB moved.
    pub const AGENT_THREADS_SERVICE_DEMAND: Metric = Metric {
        name: "agent_threads_service_demand_us_per_kb",
        option: "agent-threads-service-demand",
        label: "agent threads CPU per KB",
        unit: "us/KB",
        pointer: "/cpu/agent/threads_service_demand_us_per_kb",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The client's TLS handshake (TLS and QUIC), mean over its handshakes.
    pub const HANDSHAKE: Metric = Metric {
        name: "client_handshake_seconds",
        option: "handshake",
        label: "client handshake time",
        unit: "ms",
        pointer: "/sum/tls/client_handshake_seconds",
        divisor: 1e-3,
        better: Better::Lower,
    };

    /// The agent's TLS handshake.
    pub const AGENT_HANDSHAKE: Metric = Metric {
        name: "agent_handshake_seconds",
        option: "agent-handshake",
        label: "agent handshake time",
        unit: "ms",
        pointer: "/sum/tls/agent_handshake_seconds",
        divisor: 1e-3,
        better: Better::Lower,
    };

    /// A lab client host's own work (its stream threads and the napi
    /// threads carrying its packets), percent of one core.
    pub const CLIENT_HOST_WORK_CPU: Metric = Metric {
        name: "client_host_work_percent_of_core",
        option: "host-work-cpu",
        label: "client host work CPU",
        unit: "% of a core",
        pointer: "/cpu/client/host_work_percent_of_core",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// A lab agent host's own work, percent of one core.
    pub const AGENT_HOST_WORK_CPU: Metric = Metric {
        name: "agent_host_work_percent_of_core",
        option: "agent-host-work-cpu",
        label: "agent host work CPU",
        unit: "% of a core",
        pointer: "/cpu/agent/host_work_percent_of_core",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// A lab client host's own work per KB moved.
    pub const CLIENT_HOST_WORK_SERVICE_DEMAND: Metric = Metric {
        name: "client_host_work_service_demand_us_per_kb",
        option: "host-work-service-demand",
        label: "client host work CPU per KB",
        unit: "us/KB",
        pointer: "/cpu/client/host_work_service_demand_us_per_kb",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// A lab agent host's own work per KB moved.
    pub const AGENT_HOST_WORK_SERVICE_DEMAND: Metric = Metric {
        name: "agent_host_work_service_demand_us_per_kb",
        option: "agent-host-work-service-demand",
        label: "agent host work CPU per KB",
        unit: "us/KB",
        pointer: "/cpu/agent/host_work_service_demand_us_per_kb",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// Each end's own CPU, from its stream threads and, in a lab, its
    /// host's own work: asked for by name (`compare --metric threads-cpu`,
    /// `--metric host-work-service-demand`, a plan's tables), not tabled
    /// by default.
    pub const THREADS: [Metric; 8] = [
        Metric::CLIENT_THREADS_CPU,
        Metric::AGENT_THREADS_CPU,
        Metric::CLIENT_THREADS_SERVICE_DEMAND,
        Metric::AGENT_THREADS_SERVICE_DEMAND,
        Metric::CLIENT_HOST_WORK_CPU,
        Metric::AGENT_HOST_WORK_CPU,
        Metric::CLIENT_HOST_WORK_SERVICE_DEMAND,
        Metric::AGENT_HOST_WORK_SERVICE_DEMAND,
    ];

    /// The figures of bulk throughput, in the order tables list them:
    /// both ends' rates, then CPU load and CPU per byte.
    pub const BULK: [Metric; 6] = [
        Metric::RECEIVER_RATE,
        Metric::SENDER_RATE,
        Metric::CLIENT_CPU,
        Metric::AGENT_CPU,
        Metric::CLIENT_SERVICE_DEMAND,
        Metric::AGENT_SERVICE_DEMAND,
    ];

    /// The figure in a run or trial document, in its unit; None when the
    /// document does not carry it as a number.
    pub fn read(&self, doc: &serde_json::Value) -> Option<f64> {
        self.of_number(doc.pointer(self.pointer)?.as_f64()?)
    }

    /// The figure of the number found at [`Metric::pointer`], in its unit.
    pub fn of_number(&self, raw: f64) -> Option<f64> {
        let value = match self.divisor {
            1.0 => raw,
            divisor => (raw * (1e9 / divisor)).round() / 1e9,
        };
        value.is_finite().then_some(value)
    }

    /// The pointer as a SQLite JSON path (`$.sum.rr.transactions_per_second`,
    /// `$.streams[0].sender`).
    pub fn json_path(&self) -> String {
        let path: String = self
            .pointer
            .split('/')
            .skip(1)
            .map(|s| match s.parse::<u64>() {
                Ok(i) => format!("[{i}]"),
                Err(_) => format!(".{s}"),
            })
            .collect();
        format!("${path}")
    }
}

/// Shows a figure with its unit.
pub fn format_figure(value: f64, unit: &str) -> String {
    match unit {
        "bit/s" => Rate(value).to_string(),
        other => format!("{value:.2} {other}"),
    }
}
