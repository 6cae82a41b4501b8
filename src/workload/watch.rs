//! How a saved `nicbench watch` run reads: an interface's traffic around a
//! command, not a workload one can run (it is in no registry). Its two
//! directions are two figures, transmitted and received, never summed:
//! an 11.57 Gbit/s copy is not a 23.14 Gbit/s run because the interface
//! also counted its acknowledgements.

use super::{Better, CasePart, ChartViews, Figures, Metric, Stored, TestSpec, TextView, VerdictQuestions};

/// The workload name a watch run is saved under.
pub const NAME: &str = "watch";

/// What this host's interface sent during the command.
pub const TRANSMITTED: Metric = Metric {
    name: "transmitted_bits_per_second",
    option: "transmitted",
    label: "transmitted (watch)",
    unit: "bit/s",
    pointer: "/sum/client_to_agent/sender/bits_per_second",
    divisor: 1.0,
    better: Better::Higher,
};

/// What this host's interface received during the command.
pub const RECEIVED: Metric = Metric {
    name: "received_bits_per_second",
    option: "received",
    label: "received (watch)",
    unit: "bit/s",
    pointer: "/sum/agent_to_client/receiver/bits_per_second",
    divisor: 1.0,
    better: Better::Higher,
};

/// A watch run's results.
pub struct WatchResults;

impl Figures for WatchResults {
    fn figures(&self) -> &'static [Metric] {
        &[TRANSMITTED, RECEIVED, Metric::CLIENT_CPU, Metric::AGENT_CPU]
    }

    fn listed_figures(&self) -> &'static [Metric] {
        &[TRANSMITTED, RECEIVED]
    }
}

impl Stored for WatchResults {
    fn case(&self, spec: &TestSpec) -> Vec<CasePart> {
        let mut parts = vec![("workload", NAME.to_string())];
        let command = spec.params.get("command").and_then(|c| c.as_array());
        if let Some(words) = command {
            let words: Vec<&str> = words.iter().filter_map(|w| w.as_str()).collect();
            parts.push(("command", crate::shell::join(&words)));
        }
        parts
    }
}

impl VerdictQuestions for WatchResults {}

impl TextView for WatchResults {}

impl ChartViews for WatchResults {}
