//! [`AgentMetrics`]: what `nicbench serve --metrics-listen` exposes: tests
//! served by workload, refused by reason, control connections closed for
//! breaking the protocol, data connections refused, peer tests, and the
//! agent process's own CPU time, memory, file descriptors and threads
//! (from /proc/self). The counters are process-wide, like the Prometheus
//! clients' default registry: one agent process, one set of counters.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;

use super::{encode, Labels, MAX_LABEL_VALUES};

/// Why the agent refused a test or a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RefusalReason {
    /// A test was running; the client was told `busy`.
    Busy,
    /// The waiting line was full (`--max-queue`).
    QueueFull,
    /// The client did not prove the pre-shared key.
    Auth,
    /// The spec asked for more than the agent's limits allow.
    Limits,
    /// The request itself was invalid (unknown workload, bad spec, a
    /// request the agent does not grant).
    InvalidRequest,
    /// Too many control connections open (`--max-connections`), or from
    /// one address (`--max-connections-per-address`).
    ConnectionLimit,
    /// Too many connections from one address (`--max-connections-per-minute`).
    RateLimit,
    /// The agent was shutting down.
    ShuttingDown,
}

impl RefusalReason {
    pub const ALL: [RefusalReason; 8] = [
        RefusalReason::Busy,
        RefusalReason::QueueFull,
        RefusalReason::Auth,
        RefusalReason::Limits,
        RefusalReason::InvalidRequest,
        RefusalReason::ConnectionLimit,
        RefusalReason::RateLimit,
        RefusalReason::ShuttingDown,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalReason::Busy => "busy",
            RefusalReason::QueueFull => "queue_full",
            RefusalReason::Auth => "auth",
            RefusalReason::Limits => "limits",
            RefusalReason::InvalidRequest => "invalid_request",
            RefusalReason::ConnectionLimit => "connection_limit",
            RefusalReason::RateLimit => "rate_limit",
            RefusalReason::ShuttingDown => "shutting_down",
        }
    }
}

/// Why the agent closed a control connection that broke the protocol: the
/// hostile or broken clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CloseReason {
    /// Not our protocol: garbage, wrong magic or version, malformed or
    /// unexpected messages.
    Protocol,
    /// A frame longer than the agent accepts.
    Oversized,
    /// Silent past the handshake deadline (a slowloris).
    Timeout,
    /// A frame of a keyed session whose MAC did not verify: changed,
    /// injected, replayed or reordered on the way (a relay).
    Forged,
}

impl CloseReason {
    pub const ALL: [CloseReason; 4] = [
        CloseReason::Protocol,
        CloseReason::Oversized,
        CloseReason::Timeout,
        CloseReason::Forged,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::Protocol => "protocol",
            CloseReason::Oversized => "oversized",
            CloseReason::Timeout => "timeout",
            CloseReason::Forged => "forged_frame",
        }
    }
}

/// How a third-party (peer) test the agent was asked to run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PeerTestOutcome {
    /// It ran and gave a result.
    Done,
    /// The agent refused to run it (not allowed, target not an agent, limits).
    Refused,
    /// It started but failed.
    Failed,
}

impl PeerTestOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            PeerTestOutcome::Done => "done",
            PeerTestOutcome::Refused => "refused",
            PeerTestOutcome::Failed => "failed",
        }
    }
}

/// The agent's counters. Get the process's one with [`AgentMetrics::global`].
#[derive(Default)]
pub struct AgentMetrics {
    connections: AtomicU64,
    served: Mutex<BTreeMap<String, u64>>,
    refused: Mutex<BTreeMap<RefusalReason, u64>>,
    closed: Mutex<BTreeMap<CloseReason, u64>>,
    peer_tests: Mutex<BTreeMap<(String, PeerTestOutcome), u64>>,
    /// `nicbench_run_info` labels of this host, set by `serve`.
    info: Mutex<Option<Labels>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One counter per reason, labelled `reason`: every reason of `all`, at
/// zero until it first happens, so that a rate over it starts at once.
fn by_reason<R: Copy + Ord>(
    counts: &Mutex<BTreeMap<R, u64>>,
    all: &[R],
    name: fn(R) -> &'static str,
) -> Family<Labels, Counter> {
    let counts = lock(counts).clone();
    let family: Family<Labels, Counter> = Family::default();
    for &reason in all {
        let n = counts.get(&reason).copied().unwrap_or(0);
        family
            .get_or_create(&vec![("reason".into(), name(reason).into())])
            .inc_by(n);
    }
    family
}

/// Adds one under `key`, or under `other` once [`MAX_LABEL_VALUES`] keys exist.
fn count_bounded(map: &mut BTreeMap<String, u64>, key: &str) {
    let key = if map.contains_key(key) || map.len() < MAX_LABEL_VALUES {
        key
    } else {
        "other"
    };
    *map.entry(key.to_string()).or_default() += 1;
}

impl AgentMetrics {
    /// The counters of this process.
    pub fn global() -> &'static AgentMetrics {
        static GLOBAL: OnceLock<AgentMetrics> = OnceLock::new();
        GLOBAL.get_or_init(AgentMetrics::default)
    }

    /// A control connection was accepted.
    pub fn connection_accepted(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    /// A test of `workload` ran to its end.
    pub fn test_served(&self, workload: &str) {
        count_bounded(&mut lock(&self.served), workload);
    }

    pub fn refused(&self, reason: RefusalReason) {
        *lock(&self.refused).entry(reason).or_default() += 1;
    }

    pub fn closed(&self, reason: CloseReason) {
        *lock(&self.closed).entry(reason).or_default() += 1;
    }

    /// A control connection ended on this protocol error: counted as
    /// closed when the client broke the protocol (not when it just left).
    pub fn protocol_error(&self, e: &crate::protocol::ProtocolError) {
        use crate::protocol::ProtocolError as P;
        let reason = match e {
            P::FrameTooLarge { .. } => CloseReason::Oversized,
            P::Timeout { .. } => CloseReason::Timeout,
            P::Forged { .. } => CloseReason::Forged,
            P::Malformed(_) | P::NotNicbench | P::VersionMismatch { .. } | P::Unexpected { .. } => {
                CloseReason::Protocol
            }
            P::Closed(_) | P::Io(_) => return,
        };
        self.closed(reason);
    }

    /// A third-party test this agent was asked to run ended so.
    pub fn peer_test(&self, workload: &str, outcome: PeerTestOutcome) {
        let mut map = lock(&self.peer_tests);
        let distinct = map
            .keys()
            .map(|(w, _)| w)
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let known = map.keys().any(|(w, _)| w == workload);
        let workload = if known || distinct < MAX_LABEL_VALUES {
            workload
        } else {
            "other"
        };
        *map.entry((workload.to_string(), outcome)).or_default() += 1;
    }

    /// Sets the host facts `nicbench_run_info` shows.
    pub fn set_host_facts(&self, facts: &crate::model::HostFacts) {
        *lock(&self.info) = Some(vec![
            ("version".into(), facts.nicbench_version.clone()),
            ("kernel".into(), facts.kernel.clone()),
            ("os".into(), facts.os.clone()),
            ("cpu_model".into(), facts.cpu_model.clone()),
            ("hostname".into(), facts.hostname.clone()),
        ]);
    }

    /// Tests served so far of `workload`.
    pub fn served(&self, workload: &str) -> u64 {
        lock(&self.served).get(workload).copied().unwrap_or(0)
    }

    /// OpenMetrics text of the counters and of the process's resource use.
    pub fn render(&self) -> String {
        let mut r = Registry::default();
        r.register(
            "nicbench_agent_connections",
            "Control connections accepted",
            ConstCounter::new(self.connections.load(Ordering::Relaxed)),
        );
        let served: Family<Labels, Counter> = Family::default();
        for (w, n) in lock(&self.served).iter() {
            served.get_or_create(&vec![("workload".into(), w.clone())]).inc_by(*n);
        }
        r.register(
            "nicbench_agent_tests_served",
            "Tests served to their end, by workload",
            served,
        );
        r.register(
            "nicbench_agent_tests_refused",
            "Tests and connections refused, by reason",
            by_reason(&self.refused, &RefusalReason::ALL, RefusalReason::as_str),
        );
        r.register(
            "nicbench_agent_connections_closed",
            "Control connections closed for breaking the protocol, by reason",
            by_reason(&self.closed, &CloseReason::ALL, CloseReason::as_str),
        );
        r.register(
            "nicbench_agent_data_connections_refused",
            "Data connections refused (wrong peer, wrong or missing token)",
            ConstCounter::new(crate::workload::transport::admission::refused_data_connections()),
        );
        let peer: Family<Labels, Counter> = Family::default();
        for ((w, outcome), n) in lock(&self.peer_tests).iter() {
            peer.get_or_create(&vec![
                ("workload".into(), w.clone()),
                ("outcome".into(), outcome.as_str().into()),
            ])
            .inc_by(*n);
        }
        r.register(
            "nicbench_agent_peer_tests",
            "Third-party tests run for a mesh coordinator, by outcome",
            peer,
        );
        let build: Family<Labels, Gauge> = Family::default();
        build
            .get_or_create(&vec![("version".into(), env!("CARGO_PKG_VERSION").into())])
            .set(1);
        r.register("nicbench_build_info", "The nicbench build (value 1)", build);
        if let Some(labels) = lock(&self.info).clone() {
            let info: Family<Labels, Gauge> = Family::default();
            info.get_or_create(&labels).set(1);
            r.register("nicbench_run_info", "Facts of this agent's host (value 1)", info);
        }
        register_process(&mut r, &ProcessStats::read());
        encode(&r)
    }
}

/// Resource use of this process, from /proc/self.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: Option<f64>,
    pub resident_memory_bytes: Option<u64>,
    pub virtual_memory_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    pub threads: Option<u64>,
    pub start_time_seconds: Option<f64>,
}

impl ProcessStats {
    pub fn read() -> ProcessStats {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let mut s = parse_stat(&stat, ticks_per_second(), page_size(), boot_time());
        s.open_fds = std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as u64);
        s.max_fds = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|l| max_open_files(&l));
        s
    }
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

fn boot_time() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines().find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())
}

/// Fields of /proc/self/stat after the command name (which may hold spaces).
fn parse_stat(stat: &str, ticks: f64, page: u64, btime: Option<f64>) -> ProcessStats {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return ProcessStats::default();
    };
    // rest starts with " state": field 3 of proc(5) is index 0 here.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |field: usize| f.get(field - 3).and_then(|v| v.parse::<u64>().ok());
    ProcessStats {
        cpu_seconds: num(14).zip(num(15)).map(|(u, s)| (u + s) as f64 / ticks),
        threads: num(20),
        start_time_seconds: num(22).zip(btime).map(|(t, b)| b + t as f64 / ticks),
        virtual_memory_bytes: num(23),
        resident_memory_bytes: num(24).map(|pages| pages * page),
        open_fds: None,
        max_fds: None,
    }
}

fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..].split_whitespace().next()?.parse().ok()
}

fn register_process(r: &mut Registry, s: &ProcessStats) {
    if let Some(v) = s.cpu_seconds {
        r.register(
            "process_cpu_seconds",
            "User and system CPU time of the agent process",
            ConstCounter::new(v),
        );
    }
    let gauges: [(&str, &str, Option<f64>); 6] = [
        (
            "process_resident_memory_bytes",
            "Resident memory of the agent process",
            s.resident_memory_bytes.map(|v| v as f64),
        ),
        (
            "process_virtual_memory_bytes",
            "Virtual memory of the agent process",
            s.virtual_memory_bytes.map(|v| v as f64),
        ),
        (
            "process_open_fds",
            "Open file descriptors of the agent process",
            s.open_fds.map(|v| v as f64),
        ),
        (
            "process_max_fds",
            "Most file descriptors the agent process may open",
            s.max_fds.map(|v| v as f64),
        ),
        (
            "process_threads",
            "Threads of the agent process",
            s.threads.map(|v| v as f64),
        ),
        (
            "process_start_time_seconds",
            "Start of the agent process, Unix time",
            s.start_time_seconds,
        ),
    ];
    for (name, help, value) in gauges {
        if let Some(v) = value {
            r.register(name, help, ConstGauge::new(v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::mesh::tests::sample;

    #[test]
    fn proc_self_stat_fields_map_to_process_figures() {
        let stat = "4242 (nic bench) S 1 4242 4242 0 -1 4194560 500 0 0 0 250 50 0 0 20 0 7 0 1000 \
                    123456789 3000 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let s = parse_stat(stat, 100.0, 4096, Some(1_700_000_000.0));
        assert_eq!(s.cpu_seconds, Some(3.0));
        assert_eq!(s.threads, Some(7));
        assert_eq!(s.start_time_seconds, Some(1_700_000_010.0));
        assert_eq!(s.virtual_memory_bytes, Some(123456789));
        assert_eq!(s.resident_memory_bytes, Some(3000 * 4096));
        assert_eq!(parse_stat("garbage", 100.0, 4096, None), ProcessStats::default());
        assert_eq!(
            max_open_files(
                "Limit Soft Hard Units\nMax open files            1024                 524288               files\n"
            ),
            Some(1024)
        );
    }

    #[test]
    fn this_process_has_figures() {
        let s = ProcessStats::read();
        assert!(s.resident_memory_bytes.unwrap() > 0);
        assert!(s.threads.unwrap() >= 1);
        assert!(s.open_fds.unwrap() >= 3);
    }

    #[test]
    fn counters_render_by_reason_with_every_reason_present() {
        let m = AgentMetrics::default();
        m.connection_accepted();
        m.test_served("tcp");
        m.test_served("tcp");
        m.test_served("rr");
        m.refused(RefusalReason::Busy);
        m.protocol_error(&crate::protocol::ProtocolError::NotNicbench);
        m.protocol_error(&crate::protocol::ProtocolError::Closed("hello".into()));
        m.peer_test("tcp", PeerTestOutcome::Done);
        let text = m.render();
        assert_eq!(
            sample(&text, "nicbench_agent_tests_served_total", &[("workload", "tcp")]),
            Some(2.0)
        );
        assert_eq!(
            sample(&text, "nicbench_agent_tests_served_total", &[("workload", "rr")]),
            Some(1.0)
        );
        assert_eq!(
            sample(&text, "nicbench_agent_tests_refused_total", &[("reason", "busy")]),
            Some(1.0)
        );
        assert_eq!(
            sample(&text, "nicbench_agent_tests_refused_total", &[("reason", "auth")]),
            Some(0.0)
        );
        assert_eq!(
            sample(
                &text,
                "nicbench_agent_connections_closed_total",
                &[("reason", "protocol")]
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &text,
                "nicbench_agent_connections_closed_total",
                &[("reason", "timeout")]
            ),
            Some(0.0)
        );
        assert_eq!(sample(&text, "nicbench_agent_connections_total", &[]), Some(1.0));
        assert_eq!(
            sample(
                &text,
                "nicbench_agent_peer_tests_total",
                &[("workload", "tcp"), ("outcome", "done")]
            ),
            Some(1.0)
        );
        assert!(sample(&text, "process_resident_memory_bytes", &[]).unwrap() > 0.0);
        assert!(sample(&text, "process_cpu_seconds_total", &[]).is_some());
        assert!(text.ends_with("# EOF\n"));
    }
}
