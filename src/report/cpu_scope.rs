//! Whose cores a run's CPU figures cover, for the notes under CPU tables
//! and on CPU charts. A host-wide CPU figure (`cpu`, `agent-cpu`, CPU per
//! KB or per transaction) is read from the kernel's /proc/stat: where the
//! two ends share one kernel (a lab's hosts are network namespaces of one
//! machine; a loopback test is one host) it is the whole machine's, busy
//! with both ends and anything else, never one host's or one card's. A lab
//! that gives each host cores of its own records which cores a figure
//! covers (`cpu.client.scope`, `cpu.agent.scope`: `kind` `machine` or
//! `lab_host_cores`, `cores`, `lab_host`, `shared`); a run without it
//! covers the machine. Each end's own stream threads (`threads-cpu`, % of a
//! core) are its own wherever it runs, without the kernel's packet work
//! outside them.
//!
//! Both ends share a kernel when their boot ids are equal; a document from
//! before boot ids (2026-11-27) shares one when both ends have the same
//! host name and the agent was reached over loopback.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::store::compare::Metric;
use crate::store::{Store, StoreError};

/// The cores one end's CPU figures cover, as its run recorded them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EndScope {
    /// A lab host's own cores (its cpuset), not the machine's.
    pub own_cores: bool,
    /// Those cores are shared with other lab hosts.
    pub shared: bool,
}

impl EndScope {
    /// From the document's `cpu.<end>.scope` (JSON text); None where the
    /// run records none (the machine's cores).
    fn of(json: Option<&str>) -> Option<EndScope> {
        let v: Value = serde_json::from_str(json?).ok()?;
        Some(EndScope {
            own_cores: v["kind"] == "lab_host_cores",
            shared: v["shared"] == true,
        })
    }
}

/// One run: whether its ends shared a kernel, and each end's recorded scope.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunScope {
    pub shared_kernel: bool,
    pub client: Option<EndScope>,
    pub agent: Option<EndScope>,
}

/// The scopes of a set of runs, by run id.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScopeBook(pub BTreeMap<i64, RunScope>);

/// What a CPU figure is of: which end, and whether it is host-wide.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    HostWide {
        agent: bool,
    },
    OwnThreads,
    /// A lab host's own work (its threads and the napi threads carrying
    /// its packets, timed by the scheduler).
    HostWork {
        agent: bool,
    },
}

fn kind(metric: &Metric) -> Option<Kind> {
    let rest = metric.pointer.strip_prefix("/cpu/")?;
    let agent = rest.starts_with("agent/");
    if rest.contains("threads_") {
        return Some(Kind::OwnThreads);
    }
    if rest.contains("/host_work_") {
        return Some(Kind::HostWork { agent });
    }
    Some(Kind::HostWide { agent })
}

/// Whether a figure is of CPU (its pointer under `/cpu/`).
pub fn is_cpu(metric: &Metric) -> bool {
    kind(metric).is_some()
}

const FACTS: [&str; 4] = [
    "$.client.facts.boot_id",
    "$.agent.facts.boot_id",
    "$.client.facts.hostname",
    "$.agent.facts.hostname",
];

const SCOPES: [&str; 3] = ["$.agent.address", "$.cpu.client.scope", "$.cpu.agent.scope"];

impl ScopeBook {
    /// Reads the runs `ids`: their ends' boot ids and host names (from the
    /// digests), and, for the runs that may share a kernel, the agent's
    /// address and the recorded scopes (from their documents).
    pub fn read(store: &Store, ids: &[i64]) -> Result<ScopeBook, StoreError> {
        let mut book = BTreeMap::new();
        let mut maybe = Vec::new();
        let mut same_name = Vec::new();
        for p in store.document_parts(ids, &FACTS)? {
            let text = |i: usize| p.text(i).unwrap_or("");
            let (client_boot, agent_boot) = (text(0), text(1));
            let shared = !client_boot.is_empty() && client_boot == agent_boot;
            let named_alike = client_boot.is_empty() && !text(2).is_empty() && text(2) == text(3);
            if shared || named_alike {
                maybe.push(p.id);
            }
            if named_alike {
                same_name.push(p.id);
            }
            book.insert(
                p.id,
                RunScope {
                    shared_kernel: shared,
                    ..RunScope::default()
                },
            );
        }
        for p in store.document_parts(&maybe, &SCOPES)? {
            let Some(run) = book.get_mut(&p.id) else { continue };
            if same_name.contains(&p.id) {
                let ip = p
                    .text(0)
                    .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
                    .map(|a| a.ip());
                run.shared_kernel = ip.is_some_and(|ip| ip.is_loopback());
            }
            run.client = EndScope::of(p.text(1));
            run.agent = EndScope::of(p.text(2));
        }
        Ok(ScopeBook(book))
    }

    /// The note under a table of `metric` over the runs `ids`: whose cores
    /// the figure covers where that is not simply one host's. None for a
    /// figure that is not CPU, or runs on hosts of their own.
    pub fn note(&self, metric: &Metric, ids: &[i64]) -> Option<String> {
        let kind = kind(metric)?;
        let runs: Vec<&RunScope> = ids.iter().filter_map(|id| self.0.get(id)).collect();
        let total = runs.len();
        let shared = runs.iter().filter(|r| r.shared_kernel).count();
        match kind {
            Kind::OwnThreads if shared > 0 => Some(format!(
                "whose CPU: each end's own stream threads, in % of one core: its own even where the ends share a \
                 kernel ({} of {total} runs here); the kernel's packet work outside them (softirq on any core) is \
                 not in it",
                shared
            )),
            Kind::OwnThreads => None,
            Kind::HostWork { agent } => {
                let end = |r: &RunScope| if agent { r.agent.clone() } else { r.client.clone() };
                let own = runs.iter().filter(|r| end(r).is_some_and(|s| s.own_cores)).count();
                (own > 0).then(|| {
                    format!(
                        "whose CPU: the lab host's own work in {}: its threads and the napi threads carrying its \
                         packets, timed by the scheduler: not what else ran on its cores",
                        match own == total {
                            true => format!("all {total} runs"),
                            false => format!("{own} of {total} runs"),
                        }
                    )
                })
            }
            Kind::HostWide { agent } => {
                let end = |r: &RunScope| if agent { r.agent.clone() } else { r.client.clone() };
                let own = runs
                    .iter()
                    .filter(|r| end(r).is_some_and(|s| s.own_cores && !s.shared))
                    .count();
                let own_shared = runs
                    .iter()
                    .filter(|r| end(r).is_some_and(|s| s.own_cores && s.shared))
                    .count();
                let machine = runs
                    .iter()
                    .filter(|r| r.shared_kernel && !end(r).is_some_and(|s| s.own_cores))
                    .count();
                let of = |n: usize| match n == total {
                    true => format!("all {total} runs"),
                    false => format!("{n} of {total} runs"),
                };
                let mut parts = Vec::new();
                if machine > 0 {
                    parts.push(format!(
                        "the whole machine's cores in {}: client and agent shared one kernel (a lab's hosts, or one \
                         host), so the figure is the machine's, busy with both ends and anything else, not the {}'s \
                         or a card's",
                        of(machine),
                        if agent { "agent" } else { "client" }
                    ));
                }
                if own > 0 {
                    parts.push(format!(
                        "the lab host's own cores in {}, busy with its work and whatever else ran on them (its \
                         work alone: {}host-work-{})",
                        of(own),
                        if agent { "agent-" } else { "" },
                        if metric.pointer.contains("service_demand") {
                            "service-demand"
                        } else {
                            "cpu"
                        }
                    ));
                }
                if own_shared > 0 {
                    parts.push(format!(
                        "a lab host's cores, shared with other lab hosts, in {}",
                        of(own_shared)
                    ));
                }
                (!parts.is_empty()).then(|| format!("whose CPU: {}", parts.join("; ")))
            }
        }
    }

    /// What a chart of both ends' host-wide CPU says of the runs `ids`, in
    /// a few words for its title: `the machine's cores in 4 of 6 runs (one
    /// kernel)`; None when every run's figures are its hosts' own.
    pub fn chart_note(&self, ids: &[i64]) -> Option<String> {
        let runs: Vec<&RunScope> = ids.iter().filter_map(|id| self.0.get(id)).collect();
        let own = |s: &Option<EndScope>| s.as_ref().is_some_and(|s| s.own_cores);
        let machine = runs
            .iter()
            .filter(|r| r.shared_kernel && !(own(&r.client) && own(&r.agent)))
            .count();
        let lab = runs.iter().filter(|r| own(&r.client) || own(&r.agent)).count();
        match (machine, lab) {
            (0, 0) => None,
            (0, _) => Some("each end: its lab host's own cores".into()),
            (m, _) if m == runs.len() => {
                Some("both ends share one kernel: each is the whole machine's CPU, not a host's".into())
            }
            (m, _) => Some(format!(
                "in {m} of {} runs both ends share one kernel: the whole machine's CPU, not a host's",
                runs.len()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book(runs: &[(i64, RunScope)]) -> ScopeBook {
        ScopeBook(runs.iter().cloned().collect())
    }

    fn lab(shared_kernel: bool) -> RunScope {
        RunScope {
            shared_kernel,
            ..RunScope::default()
        }
    }

    /// Issue 66: the roundup's "agent CPU busy" read 100.0 in every cell,
    /// the machine's; nothing said so.
    #[test]
    fn a_host_wide_figure_of_a_shared_kernel_is_said_to_be_the_machines() {
        let b = book(&[(1, lab(true)), (2, lab(true)), (3, lab(false))]);
        let agent = Metric::parse("agent-cpu").unwrap();
        let note = b.note(&agent, &[1, 2, 3]).unwrap();
        assert!(note.contains("the whole machine's cores in 2 of 3 runs"), "{note}");
        assert!(note.contains("not the agent's or a card's"), "{note}");
        let all = b.note(&Metric::parse("service-demand").unwrap(), &[1, 2]).unwrap();
        assert!(
            all.contains("in all 2 runs") && all.contains("not the client's"),
            "{all}"
        );
        // Hosts of their own: nothing to say.
        assert_eq!(b.note(&agent, &[3]), None);
        // Not CPU: no note.
        assert_eq!(b.note(&Metric::parse("throughput").unwrap(), &[1]), None);
        let threads = b.note(&Metric::parse("agent-threads-cpu").unwrap(), &[1, 3]).unwrap();
        assert!(threads.contains("own stream threads, in % of one core"), "{threads}");
        assert!(b.chart_note(&[1, 3]).unwrap().contains("in 1 of 2 runs"));
    }

    /// Where the lab records a host's own cores, the note says so; a run
    /// without the record (older, or a machine-wide sample) stays the
    /// machine's.
    #[test]
    fn a_lab_hosts_own_cores_are_named_as_such() {
        let own = |shared| {
            Some(EndScope {
                own_cores: true,
                shared,
            })
        };
        let b = book(&[
            (
                1,
                RunScope {
                    shared_kernel: true,
                    client: own(false),
                    agent: own(false),
                },
            ),
            (
                2,
                RunScope {
                    shared_kernel: true,
                    client: own(true),
                    agent: None,
                },
            ),
        ]);
        let client = b.note(&Metric::parse("cpu").unwrap(), &[1, 2]).unwrap();
        assert!(client.contains("the lab host's own cores in 1 of 2 runs"), "{client}");
        assert!(
            client.contains("shared with other lab hosts, in 1 of 2 runs"),
            "{client}"
        );
        assert!(!client.contains("machine"), "{client}");
        // The cores' load points to the host's own work, in the figure's kind.
        assert!(client.contains("(its work alone: host-work-cpu)"), "{client}");
        let demand = b.note(&Metric::parse("agent-service-demand").unwrap(), &[1]).unwrap();
        assert!(
            demand.contains("(its work alone: agent-host-work-service-demand)"),
            "{demand}"
        );
        // The host's own work is said to be that, not its cores'.
        let work = b.note(&Metric::parse("host-work-cpu").unwrap(), &[1, 2]).unwrap();
        assert!(
            work.starts_with("whose CPU: the lab host's own work in all 2 runs")
                && work.contains("not what else ran on its cores"),
            "{work}"
        );
        let agent = b.note(&Metric::parse("agent-cpu").unwrap(), &[1, 2]).unwrap();
        assert!(agent.contains("the whole machine's cores in 1 of 2 runs"), "{agent}");
        assert_eq!(b.chart_note(&[1]).unwrap(), "each end: its lab host's own cores");
        assert_eq!(
            EndScope::of(Some(
                r#"{"kind": "lab_host_cores", "cores": [2, 3], "lab_host": "seeds-b"}"#
            )),
            own(false)
        );
        assert_eq!(
            EndScope::of(Some(r#"{"kind": "machine", "cores": [0, 1]}"#)),
            Some(EndScope::default())
        );
    }

    crate::store::testing::store_test!(
    /// Read from a store: a loopback run (one boot id on both ends), the
    /// same run with its ends on two kernels, and one from before boot
    /// ids (same host name, agent on loopback); a lab host's recorded cores.
    fn the_store_tells_a_shared_kernel_and_a_recorded_scope(store) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run-tcp.json");
        let loopback: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut apart = loopback.clone();
        apart["agent"]["facts"]["boot_id"] = "another-kernel".into();
        let mut old = loopback.clone();
        old["client"]["facts"]["boot_id"] = "".into();
        old["agent"]["facts"]["boot_id"] = "".into();
        let mut own = loopback.clone();
        own["cpu"]["client"]["scope"] =
            serde_json::json!({"kind": "lab_host_cores", "cores": [1], "lab_host": "seeds-a"});
        let mut store = store;
        for doc in [&loopback, &apart, &old, &own] {
            let meta = crate::store::RunMeta {
                command_line: "nicbench tcp b".into(),
                tags: Vec::new(),
                trials_planned: Some(1),
                source: None,
            };
            let mut writer = crate::store::RunWriter::new(store, meta);
            writer.finish_document(doc, None).unwrap();
            store = writer.into_store();
        }
        let ids: Vec<i64> = store
            .runs(&crate::store::query::Filter::default())
            .unwrap()
            .iter()
            .map(|r| r.id)
            .rev()
            .collect();
        let b = ScopeBook::read(&store, &ids).unwrap();
        let shared: Vec<bool> = ids.iter().map(|id| b.0[id].shared_kernel).collect();
        assert_eq!(shared, [true, false, true, true]);
        assert_eq!(
            b.0[&ids[3]].client,
            Some(EndScope {
                own_cores: true,
                shared: false
            })
        );
        assert_eq!(b.0[&ids[3]].agent, None);
        let note = b.note(&Metric::parse("cpu").unwrap(), &ids).unwrap();
        assert!(note.contains("the whole machine's cores in 2 of 4 runs"), "{note}");
        assert!(note.contains("the lab host's own cores in 1 of 4 runs"), "{note}");
    });
}
