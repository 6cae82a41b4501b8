//! The blackbox-style probe: `/probe?target=HOST[:PORT]&workload=tcp`
//! makes the agent run one test toward another agent and answers with that
//! run's figures, the way blackbox_exporter answers with one probe's. This
//! file holds the query (parsed and validated here, run by a handler the
//! caller plugs in) and the rendering of one run as probe metrics.

use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::encode;
use super::figures::RunFigures;
use super::mesh::RunSeries;
use crate::model::RunResult;

/// Longest probe test; a Prometheus `scrape_timeout` must exceed it.
pub const MAX_PROBE_SECONDS: f64 = 60.0;
/// Length of a probe test when the query names none.
pub const DEFAULT_PROBE_SECONDS: f64 = 5.0;

/// A validated probe request.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeQuery {
    /// `HOST` or `HOST:PORT` (`[v6]:PORT` for an IPv6 address with a port).
    pub target: String,
    /// `tcp`, `udp` or `rr`.
    pub workload: String,
    /// Test length; None for the default ([`DEFAULT_PROBE_SECONDS`]).
    pub duration: Option<Duration>,
}

/// Why a probe gave no metrics. A test that ran and failed is not one of
/// these: the handler answers it with [`probe_failure_exposition`] (HTTP
/// 200, `probe_success 0`), so Prometheus records the failure.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProbeError {
    /// The query is wrong: HTTP 400 with this text.
    #[error("{0}")]
    BadRequest(String),
    /// Another probe or test is running: HTTP 503.
    #[error("{0}")]
    Busy(String),
    /// The probe could not be run at all: HTTP 500.
    #[error("{0}")]
    Internal(String),
}

const USAGE: &str = "use /probe?target=HOST[:PORT]&workload=tcp|udp|rr[&duration=SECONDS]";

impl ProbeQuery {
    /// Parses the query string of a `/probe` request (without the `?`).
    pub fn parse(query: &str) -> Result<ProbeQuery, ProbeError> {
        let bad = |why: String| ProbeError::BadRequest(format!("{why}; {USAGE}"));
        let (mut target, mut workload, mut duration) = (None, None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode(value)
                .ok_or_else(|| bad(format!("the value of '{key}' is not valid percent-encoded UTF-8")))?;
            let slot = match key {
                "target" => &mut target,
                "workload" => &mut workload,
                "duration" => &mut duration,
                other => return Err(bad(format!("unknown parameter '{}'", truncate(other)))),
            };
            if slot.replace(value).is_some() {
                return Err(bad(format!("'{key}' is given twice")));
            }
        }
        let target = target.ok_or_else(|| bad("the 'target' parameter is missing".into()))?;
        check_target(&target).map_err(|why| bad(format!("target '{}' {why}", truncate(&target))))?;
        let workload = workload.ok_or_else(|| bad("the 'workload' parameter is missing".into()))?;
        if !crate::workload::find(&workload).is_ok_and(|w| w.peer_tests()) {
            return Err(bad(format!(
                "unknown workload '{}': a probe runs {}",
                truncate(&workload),
                crate::workload::peer_test_names().collect::<Vec<_>>().join(", ")
            )));
        }
        let duration = match duration {
            None => None,
            Some(d) => {
                let seconds: f64 = d
                    .trim_end_matches('s')
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0 && *s <= MAX_PROBE_SECONDS)
                    .ok_or_else(|| {
                        bad(format!(
                            "duration '{}' must be seconds above 0 and at most {MAX_PROBE_SECONDS}",
                            truncate(&d)
                        ))
                    })?;
                Some(Duration::from_secs_f64(seconds))
            }
        };
        Ok(ProbeQuery {
            target,
            workload,
            duration,
        })
    }

    /// The host part of the target (without brackets).
    pub fn host(&self) -> &str {
        split_target(&self.target).0
    }

    /// The port of the target, when it names one.
    pub fn port(&self) -> Option<u16> {
        split_target(&self.target).1.and_then(|p| p.parse().ok())
    }

    /// The test length, the default when the query names none.
    pub fn duration_or_default(&self) -> Duration {
        self.duration.unwrap_or(Duration::from_secs_f64(DEFAULT_PROBE_SECONDS))
    }
}

fn truncate(s: &str) -> String {
    let cut: String = s.chars().take(64).collect();
    let cut: String = cut.chars().map(|c| if c.is_control() { '?' } else { c }).collect();
    if s.chars().count() > 64 {
        format!("{cut}...")
    } else {
        cut
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`; a bare IPv6 address has no port.
fn split_target(target: &str) -> (&str, Option<&str>) {
    if let Some(rest) = target.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((host, tail)) => (host, tail.strip_prefix(':')),
            None => (rest, None),
        };
    }
    match target.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host, Some(port)),
        _ => (target, None),
    }
}

fn check_target(target: &str) -> Result<(), String> {
    if target.is_empty() || target.len() > 255 {
        return Err("must be 1 to 255 characters".into());
    }
    let (host, port) = split_target(target);
    if let Some(port) = port {
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => return Err(format!("has port '{port}'; a port is 1 to 65535")),
        }
    }
    if host.parse::<std::net::IpAddr>().is_ok() {
        return Ok(());
    }
    let name_ok = !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                && !label.starts_with('-')
        });
    if name_ok {
        Ok(())
    } else {
        Err("is not a host name or IP address (HOST, HOST:PORT or [IPv6]:PORT)".into())
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

fn head(registry: &mut Registry, success: bool, elapsed: Duration) {
    let ok: Gauge = Gauge::default();
    ok.set(i64::from(success));
    registry.register(
        "probe_success",
        "Whether the probe's test ran and gave a result (1) or not (0)",
        ok,
    );
    let seconds: Gauge<f64, std::sync::atomic::AtomicU64> = Gauge::default();
    seconds.set(elapsed.as_secs_f64());
    registry.register(
        "probe_duration_seconds",
        "How long the probe took, connecting and collecting the result included",
        seconds,
    );
}

/// One run as probe metrics: `probe_success 1`, `probe_duration_seconds`
/// (from the run's start to now), and the run's gauges with `workload` and
/// `direction` labels but no `src`/`dst` (Prometheus adds the target as
/// its `instance`). `target` is what the probe asked for; it is not
/// repeated as a label.
pub fn probe_exposition(target: &str, run: &RunResult) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let elapsed = Duration::from_secs_f64((now - run.started_at_unix_seconds).clamp(0.0, 86400.0));
    probe_exposition_with(target, run, elapsed)
}

/// [`probe_exposition`] with the probe's duration given.
pub fn probe_exposition_with(_target: &str, run: &RunResult, elapsed: Duration) -> String {
    let mut registry = Registry::default();
    head(&mut registry, true, elapsed);
    let series = RunSeries::default();
    series.add(&Vec::new(), &RunFigures::of(run));
    series.register(&mut registry);
    encode(&registry)
}

/// A probe whose test failed: `probe_success 0` and how long it took.
/// The reason goes to the agent's log, not into a label.
pub fn probe_failure_exposition(_target: &str, elapsed: Duration) -> String {
    let mut registry = Registry::default();
    head(&mut registry, false, elapsed);
    encode(&registry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::figures::tests::fixture;

    #[test]
    fn a_good_query_parses_with_percent_encoding() {
        let q = ProbeQuery::parse("target=%5B%3A%3A1%5D%3A5310&workload=rr&duration=2.5").unwrap();
        assert_eq!(q.target, "[::1]:5310");
        assert_eq!((q.host(), q.port()), ("::1", Some(5310)));
        assert_eq!(q.workload, "rr");
        assert_eq!(q.duration, Some(Duration::from_millis(2500)));
        let q = ProbeQuery::parse("target=node-1.example&workload=tcp").unwrap();
        assert_eq!((q.host(), q.port(), q.duration), ("node-1.example", None, None));
        assert_eq!(q.duration_or_default(), Duration::from_secs(5));
        assert_eq!(ProbeQuery::parse("target=fe80::1&workload=udp").unwrap().port(), None);
    }

    #[test]
    fn bad_queries_say_what_is_wrong_and_what_is_allowed() {
        for (query, words) in [
            ("workload=tcp", "'target' parameter is missing"),
            ("target=a", "'workload' parameter is missing"),
            ("target=a&workload=sweep", "unknown workload 'sweep'"),
            ("target=a&workload=tcp&duration=0", "duration '0'"),
            ("target=a&workload=tcp&duration=3600", "at most 60"),
            ("target=a:0&workload=tcp", "a port is 1 to 65535"),
            ("target=a:99999&workload=tcp", "a port is 1 to 65535"),
            ("target=a%20b&workload=tcp", "not a host name"),
            ("target=a&target=b&workload=tcp", "given twice"),
            ("target=a&workload=tcp&module=x", "unknown parameter 'module'"),
            ("target=%ZZ&workload=tcp", "percent-encoded"),
        ] {
            let ProbeError::BadRequest(text) = ProbeQuery::parse(query).unwrap_err() else {
                panic!("{query}: not a bad request")
            };
            assert!(text.contains(words), "{query}: {text}");
            assert!(text.contains("/probe?target=HOST"), "{text}");
        }
    }

    #[test]
    fn a_run_renders_as_probe_metrics_without_pair_labels() {
        let text = probe_exposition_with("b:5310", &fixture("run-udp.json"), Duration::from_millis(1500));
        assert!(
            text.contains("\nprobe_success 1\n") || text.starts_with("# HELP probe_success"),
            "{text}"
        );
        assert!(text.contains("probe_success 1\n"), "{text}");
        assert!(text.contains("probe_duration_seconds 1.5\n"), "{text}");
        assert!(
            text.contains(
                "nicbench_receiver_throughput_bytes_per_second{workload=\"udp\",direction=\"forward\"} 12499137.63"
            ),
            "{text}"
        );
        assert!(
            text.contains("nicbench_loss_ratio{workload=\"udp\",direction=\"forward\"} 0.0"),
            "{text}"
        );
        assert!(!text.contains("src="));
        let failed = probe_failure_exposition("b:5310", Duration::from_secs(2));
        assert!(failed.contains("probe_success 0\n"));
        assert!(failed.contains("probe_duration_seconds 2.0\n"));
        assert!(!failed.contains("nicbench_"));
    }
}
