//! Prometheus/OpenMetrics exposition: the agent's own counters
//! ([`agent`]), the latest figures of every pair of a mesh ([`mesh`]), one
//! run rendered as a blackbox-style probe ([`blackbox`]), and the small HTTP
//! server that serves them ([`http`]). The text is encoded by the
//! `prometheus-client` crate; see docs/METRICS.md for every metric.
//!
//! Layering: this module reads the result model and nothing above it. The
//! `/probe` endpoint runs a test through a handler the caller plugs in, so
//! sessions and the mesh stay above it.

pub mod agent;
pub mod blackbox;
pub mod figures;
pub mod http;
pub mod mesh;

pub use agent::{AgentMetrics, CloseReason, PeerTestOutcome, RefusalReason};
pub use blackbox::{probe_exposition, probe_failure_exposition, ProbeError, ProbeQuery};
pub use http::{BearerToken, MetricsServer, ProbeHandler, Routes};
pub use mesh::{FailureReason, MeshMetrics};

use prometheus_client::registry::Registry;

/// Content type of the OpenMetrics text format.
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// Content type of the Prometheus text format (0.0.4).
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A set of labels, in the order they are printed.
pub(crate) type Labels = Vec<(String, String)>;

/// Most distinct values a free-text label (a workload name handed in by a
/// caller) takes; later ones are counted under `other`, so no caller can
/// grow the number of series without bound.
pub(crate) const MAX_LABEL_VALUES: usize = 32;

/// Encodes a registry as OpenMetrics text (ending in `# EOF`).
pub(crate) fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail; an encoder error would be a bug
    // in a label value, and then the partial text is still served.
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

/// The same exposition in the Prometheus text format 0.0.4, for scrapers
/// (and `promtool check metrics`) that do not ask for OpenMetrics: counter
/// families are named with their `_total` suffix, and the OpenMetrics-only
/// `# UNIT` and `# EOF` lines are left out.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (*p, rest)));
        match meta {
            Some((prefix, rest)) => {
                let name = rest.split(' ').next().unwrap_or("");
                if counters.contains(name) {
                    out.push_str(prefix);
                    out.push_str(name);
                    out.push_str("_total");
                    out.push_str(&rest[name.len()..]);
                } else {
                    out.push_str(line);
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Which text format a scraper asked for in its Accept header: OpenMetrics
/// when it names it (Prometheus does), the classic text format otherwise.
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a.contains("application/openmetrics-text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prometheus_text_names_counters_with_total_and_drops_openmetrics_lines() {
        let om = "# HELP a_tests Tests.\n# TYPE a_tests counter\na_tests_total{x=\"1\"} 2\n\
                  # HELP b_seconds B.\n# TYPE b_seconds gauge\n# UNIT b_seconds seconds\nb_seconds 1.5\n# EOF\n";
        assert_eq!(
            to_prometheus_text(om),
            "# HELP a_tests_total Tests.\n# TYPE a_tests_total counter\na_tests_total{x=\"1\"} 2\n\
             # HELP b_seconds B.\n# TYPE b_seconds gauge\nb_seconds 1.5\n"
        );
    }

    #[test]
    fn openmetrics_only_when_asked() {
        assert!(wants_openmetrics(Some(
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
        )));
        assert!(!wants_openmetrics(Some("*/*")));
        assert!(!wants_openmetrics(None));
    }

    /// Runs `promtool check metrics` on `text`; None when promtool is
    /// missing outside CI (the test then says it skipped).
    fn promtool(text: &str) -> Option<(bool, String)> {
        use std::io::Write;
        let child = std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(_) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "promtool is missing in CI: .ci/run must install Debian's prometheus package"
                );
                eprintln!("SKIPPED (promtool not installed): apt-get install prometheus");
                return None;
            }
        };
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Some((out.status.success(), said))
    }

    #[test]
    fn promtool_accepts_the_mesh_and_agent_and_probe_expositions() {
        use crate::metrics::figures::tests::fixture;
        let mesh = MeshMetrics::new();
        mesh.record_run("a", "b", &fixture("run-tcp.json"));
        mesh.record_run("b", "a", &fixture("run-udp-bidir.json"));
        mesh.record_run("a", "c", &fixture("run-rr.json"));
        mesh.record_failure("c", "a", "tcp", FailureReason::Timeout);
        let agent = AgentMetrics::default();
        agent.test_served("tcp");
        agent.refused(RefusalReason::Busy);
        agent.peer_test("tcp", PeerTestOutcome::Failed);
        agent.set_host_facts(&fixture("run-tcp.json").agent.facts);
        let probe = probe_exposition("b", &fixture("run-rr.json"));
        let failed = probe_failure_exposition("b", std::time::Duration::from_secs(1));
        for (name, text) in [
            ("mesh", mesh.render()),
            ("agent", agent.render()),
            ("probe", probe),
            ("failed probe", failed),
        ] {
            let Some((ok, said)) = promtool(&to_prometheus_text(&text)) else {
                return;
            };
            assert!(
                ok && said.trim().is_empty(),
                "promtool on the {name} exposition: {said}\n{text}"
            );
        }
    }
}
