//! [`MeshMetrics`]: the latest figures of every (src, dst, workload,
//! direction) of a mesh, counters of tests run and failed, and the facts of
//! its hosts, rendered as OpenMetrics text. Thread-safe: the coordinator's
//! test threads record while the HTTP server renders.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::figures::RunFigures;
use super::{encode, Labels, MAX_LABEL_VALUES};
use crate::model::{HostFacts, RunResult};

type GaugeF = Gauge<f64, AtomicU64>;

/// Why a test of the mesh failed: a small fixed set, so the label stays bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FailureReason {
    /// The agent could not be reached (connection refused, no route, DNS).
    Unreachable,
    /// The agent was busy with another test.
    Busy,
    /// The agent refused the test (limits, no `--allow-peer-tests`, bad spec).
    Refused,
    /// Authentication failed (pre-shared key).
    Auth,
    /// A deadline passed (handshake, result).
    Timeout,
    /// The test was cut short (shutdown, Ctrl-C).
    Interrupted,
    /// The other end did not speak the protocol or broke it.
    Protocol,
    /// Anything else.
    Other,
}

impl FailureReason {
    pub const ALL: [FailureReason; 8] = [
        FailureReason::Unreachable,
        FailureReason::Busy,
        FailureReason::Refused,
        FailureReason::Auth,
        FailureReason::Timeout,
        FailureReason::Interrupted,
        FailureReason::Protocol,
        FailureReason::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::Unreachable => "unreachable",
            FailureReason::Busy => "busy",
            FailureReason::Refused => "refused",
            FailureReason::Auth => "auth",
            FailureReason::Timeout => "timeout",
            FailureReason::Interrupted => "interrupted",
            FailureReason::Protocol => "protocol",
            FailureReason::Other => "other",
        }
    }
}

/// The gauges of runs, filled from [`RunFigures`] under given base labels
/// (`src`, `dst` for the mesh; none for a probe), plus `workload` and
/// `direction`.
#[derive(Default)]
pub(crate) struct RunSeries {
    receiver: Family<Labels, GaugeF>,
    sender: Family<Labels, GaugeF>,
    loss: Family<Labels, GaugeF>,
    rtt: Family<Labels, GaugeF>,
    demand_byte: Family<Labels, GaugeF>,
    demand_transaction: Family<Labels, GaugeF>,
    utilization: Family<Labels, GaugeF>,
    timestamp: Family<Labels, GaugeF>,
}

fn with(base: &Labels, extra: &[(&str, &str)]) -> Labels {
    let mut l = base.clone();
    l.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    l
}

impl RunSeries {
    pub(crate) fn add(&self, base: &Labels, f: &RunFigures) {
        for d in &f.directions {
            let labels = with(base, &[("workload", &f.workload), ("direction", d.direction)]);
            self.receiver.get_or_create(&labels).set(d.receiver_bytes_per_second);
            self.sender.get_or_create(&labels).set(d.sender_bytes_per_second);
            if let Some(loss) = d.loss_ratio {
                self.loss.get_or_create(&labels).set(loss);
            }
            self.timestamp.get_or_create(&labels).set(f.started_at_unix_seconds);
            for (end, cpu) in [("sender", &d.sender_cpu), ("receiver", &d.receiver_cpu)] {
                let Some(cpu) = cpu else { continue };
                let labels = with(&labels, &[("end", end)]);
                self.utilization.get_or_create(&labels).set(cpu.utilization_ratio);
                if let Some(v) = cpu.service_demand_seconds_per_byte {
                    self.demand_byte.get_or_create(&labels).set(v);
                }
                if let Some(v) = cpu.service_demand_seconds_per_transaction {
                    self.demand_transaction.get_or_create(&labels).set(v);
                }
            }
            if let Some(rtt) = &f.rtt {
                for (p, v) in [
                    ("50", rtt.p50_seconds),
                    ("90", rtt.p90_seconds),
                    ("99", rtt.p99_seconds),
                ] {
                    self.rtt.get_or_create(&with(&labels, &[("percentile", p)])).set(v);
                }
            }
        }
    }

    pub(crate) fn register(self, r: &mut Registry) {
        r.register(
            "nicbench_receiver_throughput_bytes_per_second",
            "Payload bytes per second the receiver got in the latest run",
            self.receiver,
        );
        r.register(
            "nicbench_sender_throughput_bytes_per_second",
            "Payload bytes per second the sender wrote in the latest run",
            self.sender,
        );
        r.register(
            "nicbench_loss_ratio",
            "Share of datagrams (udp) or transactions (rr) lost in the latest run, 0 to 1",
            self.loss,
        );
        r.register(
            "nicbench_rtt_seconds",
            "Round-trip time percentile (50, 90, 99) of the latest request/response run",
            self.rtt,
        );
        r.register(
            "nicbench_cpu_service_demand_seconds_per_byte",
            "CPU time of all cores of one end per byte it sent or received in the latest run",
            self.demand_byte,
        );
        r.register(
            "nicbench_cpu_service_demand_seconds_per_transaction",
            "CPU time of all cores of one end per transaction in the latest request/response run",
            self.demand_transaction,
        );
        r.register(
            "nicbench_cpu_utilization_ratio",
            "Busy share of all cores of one end during the latest run, 0 to 1",
            self.utilization,
        );
        r.register(
            "nicbench_last_run_timestamp_seconds",
            "Start of the latest run, Unix time",
            self.timestamp,
        );
    }
}

/// The labels of `nicbench_run_info` for a host's facts.
fn info_labels(host: &str, facts: &HostFacts) -> Labels {
    let nic = facts.interface.as_ref();
    let opt = |v: Option<&String>| v.cloned().unwrap_or_default();
    vec![
        ("host".into(), host.to_string()),
        ("version".into(), facts.nicbench_version.clone()),
        ("kernel".into(), facts.kernel.clone()),
        ("os".into(), facts.os.clone()),
        ("cpu_model".into(), facts.cpu_model.clone()),
        ("interface".into(), nic.map(|n| n.name.clone()).unwrap_or_default()),
        ("driver".into(), opt(nic.and_then(|n| n.driver.as_ref()))),
        (
            "driver_version".into(),
            opt(nic.and_then(|n| n.driver_version.as_ref())),
        ),
        (
            "firmware_version".into(),
            opt(nic.and_then(|n| n.firmware_version.as_ref())),
        ),
    ]
}

#[derive(Default)]
struct State {
    /// Latest figures per (src, dst, workload): a new run replaces the old
    /// one whole, so a direction it no longer has disappears with it.
    latest: BTreeMap<(String, String, String), RunFigures>,
    tests: BTreeMap<(String, String, String), u64>,
    failed: BTreeMap<(String, String, String, FailureReason), u64>,
    /// Latest facts per host name.
    info: BTreeMap<String, Labels>,
}

/// Metrics of a mesh coordinator. Host names are the mesh's labels (its
/// hosts list), so the number of series is bounded by hosts² × workloads.
#[derive(Default)]
pub struct MeshMetrics {
    state: Mutex<State>,
}

impl MeshMetrics {
    pub fn new() -> MeshMetrics {
        MeshMetrics::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a finished run of `src` (the client end) toward `dst` (the
    /// agent): its figures replace the pair's previous ones, the test is
    /// counted, and both hosts' facts are kept for `nicbench_run_info`.
    pub fn record_run(&self, src: &str, dst: &str, run: &RunResult) {
        let figures = RunFigures::of(run);
        let mut s = self.state();
        let workload = bounded_workload(&s, &figures.workload);
        *s.tests.entry((src.into(), dst.into(), workload.clone())).or_default() += 1;
        s.latest.insert((src.into(), dst.into(), workload), figures);
        s.info.insert(src.into(), info_labels(src, &run.client.facts));
        s.info.insert(dst.into(), info_labels(dst, &run.agent.facts));
    }

    /// Records a test of `src` toward `dst` that gave no result; the pair's
    /// latest figures stay (their timestamp tells their age).
    pub fn record_failure(&self, src: &str, dst: &str, workload: &str, reason: FailureReason) {
        let mut s = self.state();
        let workload = bounded_workload(&s, workload);
        *s.tests.entry((src.into(), dst.into(), workload.clone())).or_default() += 1;
        *s.failed.entry((src.into(), dst.into(), workload, reason)).or_default() += 1;
    }

    /// OpenMetrics text of everything recorded so far.
    pub fn render(&self) -> String {
        let s = self.state();
        let mut registry = Registry::default();
        let series = RunSeries::default();
        for ((src, dst, _), figures) in &s.latest {
            series.add(&vec![("src".into(), src.clone()), ("dst".into(), dst.clone())], figures);
        }
        series.register(&mut registry);
        let tests: Family<Labels, Counter> = Family::default();
        for ((src, dst, workload), n) in &s.tests {
            tests.get_or_create(&pair(src, dst, workload)).inc_by(*n);
        }
        registry.register(
            "nicbench_tests",
            "Tests run per pair and workload, failed ones included",
            tests,
        );
        let failed: Family<Labels, Counter> = Family::default();
        for ((src, dst, workload, reason), n) in &s.failed {
            let mut labels = pair(src, dst, workload);
            labels.push(("reason".into(), reason.as_str().into()));
            failed.get_or_create(&labels).inc_by(*n);
        }
        registry.register(
            "nicbench_tests_failed",
            "Tests that gave no result, per pair, workload and reason",
            failed,
        );
        let info: Family<Labels, Gauge> = Family::default();
        for labels in s.info.values() {
            info.get_or_create(labels).set(1);
        }
        registry.register(
            "nicbench_run_info",
            "Facts of a mesh host as its latest run recorded them (value 1)",
            info,
        );
        encode(&registry)
    }
}

fn pair(src: &str, dst: &str, workload: &str) -> Labels {
    vec![
        ("src".into(), src.into()),
        ("dst".into(), dst.into()),
        ("workload".into(), workload.into()),
    ]
}

/// The workload name as a label value: names already seen, or new ones up
/// to [`MAX_LABEL_VALUES`], else `other`.
fn bounded_workload(s: &State, workload: &str) -> String {
    let mut seen: Vec<&str> = s.tests.keys().map(|(_, _, w)| w.as_str()).collect();
    seen.sort_unstable();
    seen.dedup();
    if seen.contains(&workload) || seen.len() < MAX_LABEL_VALUES {
        workload.to_string()
    } else {
        "other".to_string()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::metrics::figures::tests::fixture;

    /// The value of the sample with exactly these labels, in OpenMetrics text.
    pub(crate) fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        text.lines().find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, "}"));
            if n != name {
                return None;
            }
            let mut got: Vec<(String, String)> = rest
                .trim_end_matches('}')
                .split("\",")
                .filter(|kv| !kv.is_empty())
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
                .collect();
            let mut want: Vec<(String, String)> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            got.sort();
            want.sort();
            (got == want).then(|| value.parse().unwrap())
        })
    }

    /// The labels of the pair figures of a tcp run from a to b, client to agent.
    const TCP_A_TO_B_FORWARD: [(&str, &str); 4] = [
        ("src", "a"),
        ("dst", "b"),
        ("workload", "tcp"),
        ("direction", "forward"),
    ];

    #[test]
    fn a_tcp_run_gives_its_pair_figures_in_base_units() {
        let m = MeshMetrics::new();
        let run = fixture("run-tcp.json");
        m.record_run("a", "b", &run);
        let text = m.render();
        let l = TCP_A_TO_B_FORWARD;
        assert_eq!(
            sample(&text, "nicbench_receiver_throughput_bytes_per_second", &l),
            Some(38008844786.30838 / 8.0)
        );
        assert_eq!(
            sample(&text, "nicbench_sender_throughput_bytes_per_second", &l),
            Some(38019382777.47795 / 8.0)
        );
        assert_eq!(
            sample(&text, "nicbench_last_run_timestamp_seconds", &l),
            Some(run.started_at_unix_seconds)
        );
        let sender = [l.as_slice(), &[("end", "sender")]].concat();
        assert_eq!(sample(&text, "nicbench_cpu_utilization_ratio", &sender), Some(1.0));
        let demand = sample(&text, "nicbench_cpu_service_demand_seconds_per_byte", &sender).unwrap();
        assert!((demand - 0.45879859387923905e-6 / 1024.0).abs() < 1e-20, "{demand}");
        assert_eq!(
            sample(
                &text,
                "nicbench_tests_total",
                &[("src", "a"), ("dst", "b"), ("workload", "tcp")]
            ),
            Some(1.0)
        );
        assert!(!text.contains("nicbench_loss_ratio{"), "tcp has no loss ratio:\n{text}");
        assert!(!text.contains("nicbench_rtt_seconds{"));
        // Only the bounded labels: no run id, no time, no address.
        for line in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with("nicbench_run_info"))
        {
            let labels = line.split_once('{').map_or("", |(_, r)| r);
            for kv in labels.split("\",") {
                let key = kv.split('=').next().unwrap_or("");
                assert!(
                    ["src", "dst", "workload", "direction", "end", "percentile", "reason", ""].contains(&key),
                    "unexpected label {key} in {line}"
                );
            }
        }
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn the_latest_run_replaces_the_pairs_figures_and_failures_are_counted_by_reason() {
        let m = MeshMetrics::new();
        let mut run = fixture("run-tcp.json");
        m.record_run("a", "b", &run);
        run.result
            .sum
            .client_to_agent
            .as_mut()
            .unwrap()
            .receiver
            .bits_per_second = 8e9;
        m.record_run("a", "b", &run);
        m.record_failure("a", "b", "tcp", FailureReason::Busy);
        m.record_failure("b", "a", "tcp", FailureReason::Unreachable);
        let text = m.render();
        let l = TCP_A_TO_B_FORWARD;
        assert_eq!(
            sample(&text, "nicbench_receiver_throughput_bytes_per_second", &l),
            Some(1e9)
        );
        let ab = [("src", "a"), ("dst", "b"), ("workload", "tcp")];
        assert_eq!(sample(&text, "nicbench_tests_total", &ab), Some(3.0));
        assert_eq!(
            sample(
                &text,
                "nicbench_tests_failed_total",
                &[ab.as_slice(), &[("reason", "busy")]].concat()
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &text,
                "nicbench_tests_failed_total",
                &[
                    ("src", "b"),
                    ("dst", "a"),
                    ("workload", "tcp"),
                    ("reason", "unreachable")
                ]
            ),
            Some(1.0)
        );
        assert_eq!(
            text.matches("nicbench_receiver_throughput_bytes_per_second{").count(),
            1
        );
    }

    #[test]
    fn rr_and_udp_give_rtt_percentiles_and_loss() {
        let m = MeshMetrics::new();
        m.record_run("a", "b", &fixture("run-rr.json"));
        m.record_run("b", "a", &fixture("run-udp-bidir.json"));
        let text = m.render();
        let rr = [("src", "a"), ("dst", "b"), ("workload", "rr"), ("direction", "forward")];
        assert_eq!(
            sample(
                &text,
                "nicbench_rtt_seconds",
                &[rr.as_slice(), &[("percentile", "99")]].concat()
            ),
            Some(49.023e-6)
        );
        let demand = sample(
            &text,
            "nicbench_cpu_service_demand_seconds_per_transaction",
            &[rr.as_slice(), &[("end", "sender")]].concat(),
        )
        .unwrap();
        assert!((demand - 90.43408360128618e-6).abs() < 1e-15);
        let udp = [
            ("src", "b"),
            ("dst", "a"),
            ("workload", "udp"),
            ("direction", "reverse"),
        ];
        assert_eq!(sample(&text, "nicbench_loss_ratio", &udp), Some(0.0));
        assert_eq!(
            sample(&text, "nicbench_receiver_throughput_bytes_per_second", &udp),
            Some(49987703.22745992 / 8.0)
        );
    }

    #[test]
    fn run_info_holds_each_hosts_latest_facts() {
        let m = MeshMetrics::new();
        let mut run = fixture("run-tcp.json");
        run.client.facts.kernel = "6.1.0".into();
        m.record_run("a", "b", &run);
        run.client.facts.kernel = "6.12.0".into();
        m.record_run("a", "b", &run);
        let text = m.render();
        let info: Vec<&str> = text.lines().filter(|l| l.starts_with("nicbench_run_info{")).collect();
        assert_eq!(info.len(), 2, "{info:?}");
        assert!(info
            .iter()
            .any(|l| l.contains("host=\"a\"") && l.contains("kernel=\"6.12.0\"")));
        assert!(!text.contains("6.1.0\""));
    }

    #[test]
    fn workload_label_values_are_bounded() {
        let m = MeshMetrics::new();
        for i in 0..100 {
            m.record_failure("a", "b", &format!("w{i}"), FailureReason::Other);
        }
        let text = m.render();
        assert_eq!(
            text.lines().filter(|l| l.starts_with("nicbench_tests_total{")).count(),
            MAX_LABEL_VALUES + 1
        );
        assert!(text.contains("workload=\"other\""));
    }
}
