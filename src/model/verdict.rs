//! The bottleneck verdict and the evidence it rests on, with the
//! thresholds and kinds the verdict and the multi-link verdict both judge
//! by. A trial holds one, and so does a multi-link summary (what limited
//! the aggregate). In the trial's file it made a ring: the trial names the
//! side reports, a side report names its links' ends, and the multi-link
//! file named the trial's verdict.

use serde::{Deserialize, Serialize};

/// The bottleneck verdict: a kind for programs, a line for people, and
/// the evidence it rests on, ordered by what explains what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// `cpu_bound`, `cpu_starved`, `cgroup_throttled`, `link_bound`,
    /// `model_exceeded`, `udp_loss`, `path_loss`, `socket_buffer_drops`, `nic_drops`,
    /// `retransmitting`, `receive_window_limited`, `send_buffer_limited`,
    /// `offered_rate_not_reached`, `cipher_bound` (TLS: the cipher took most
    /// of the CPU of an end short of it), `not_sure` (the evidence conflicts or is
    /// weak: `evidence[]` holds the candidates) or `none`; several links or
    /// paths add `link_slow`, `links_at_line_rate`, `mptcp_fallback`,
    /// `mptcp_subflow_missing` and `mptcp_subflow_idle`; workloads add their own (`files_*`, ...).
    pub kind: String,
    pub summary: String,
    /// The end or part of the path the verdict names: `sender`, `receiver`,
    /// `client`, `agent` (an end that did both), `both`, `path`. Absent
    /// when it names none (`none`, `not_sure`) or in runs before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side: Option<String>,
    /// Every finding that held, cause first, each with what explains it.
    /// Absent in runs before it (2026-11-27) and when nothing held.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Evidence>,
}

/// One finding behind a verdict: a rule that held, on which side, how
/// strong its evidence is, and its place in the explanation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// The rule that held (the same words as [`Verdict::kind`]).
    pub kind: String,
    /// As [`Verdict::side`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side: Option<String>,
    /// `strong` (the test's own counters, well past the threshold) or
    /// `weak` (host-wide counters, or near the threshold).
    pub strength: String,
    /// `cause` (what the verdict names), `consequence` (explained by the
    /// finding at `explained_by`), `also` (held, but did not limit the
    /// figure the test exists for), `candidate` (one of several causes
    /// nothing orders: the verdict is `not_sure`).
    pub role: String,
    /// Index in `evidence[]` of the finding that explains this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explained_by: Option<usize>,
    /// The finding and its figures, in words.
    pub summary: String,
}

impl Verdict {
    /// This finding as the one cause, and what `single_path` (the
    /// single-path reasoning of the same trial) found after it as `also`:
    /// those held, but this rule (several links', several paths') explains
    /// the figure.
    pub fn caused_first(self, single_path: &Verdict) -> Verdict {
        let mut evidence = vec![Evidence {
            kind: self.kind.clone(),
            side: self.side.clone(),
            strength: "strong".into(),
            role: "cause".into(),
            explained_by: None,
            summary: self.summary.clone(),
        }];
        evidence.extend(
            single_path
                .evidence
                .iter()
                .filter(|e| e.kind != self.kind)
                .map(|e| Evidence {
                    role: "also".into(),
                    explained_by: None,
                    ..e.clone()
                }),
        );
        Verdict { evidence, ..self }
    }

    /// Share of datagrams, drops or retransmitted segments worth a verdict.
    pub const LOSS_PERCENT: f64 = 1.0;
    /// Share of their ready time that threads waited for a CPU, and share of
    /// the trial the waiting must cover, to count as CPU-bound (here, below
    /// the verdict and the multi-link verdict, which both judge by them).
    pub const WAIT_PERCENT: f64 = 50.0;
    pub const WAIT_SHARE_OF_TRIAL_PERCENT: f64 = 25.0;
    /// Share of throttled cgroup periods that counts as CPU-bound.
    pub const THROTTLED_PERCENT: f64 = 50.0;

    /// The kinds that name an end short of CPU (the verdict's CPU class):
    /// here, below the verdict and the multi-link verdict, which both ask.
    /// The last ones are a workload's own and name the work the CPU did
    /// ([`Verdict::CPU_WORK_KINDS`]).
    pub const CPU_KINDS: [&'static str; 4] = ["cgroup_throttled", "cpu_starved", "cpu_bound", "cipher_bound"];

    /// The kinds a workload gives for the work that took most of an end's
    /// CPU (`cipher_bound`: TLS's cipher): they name an end short of CPU
    /// when one of the other CPU kinds found it so, and nothing otherwise.
    pub const CPU_WORK_KINDS: [&'static str; 1] = ["cipher_bound"];

    /// Whether a verdict's or a finding's `kind` names an end short of CPU.
    pub fn is_cpu_kind(kind: &str) -> bool {
        Verdict::CPU_KINDS.contains(&kind)
    }

    pub fn new(kind: &str, summary: String) -> Verdict {
        Verdict {
            kind: kind.to_string(),
            summary,
            side: None,
            evidence: Vec::new(),
        }
    }

    /// A verdict that names an end or the path (`sender`, `receiver`,
    /// `client`, `agent`, `both`, `path`).
    pub fn on_side(kind: &str, side: &str, summary: String) -> Verdict {
        Verdict {
            side: Some(side.to_string()),
            ..Verdict::new(kind, summary)
        }
    }
}
