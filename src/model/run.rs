//! The run document `--json` prints: endpoints, spec, the reported trial,
//! every trial, and the repetition summary.

use serde::{Deserialize, Serialize};

use super::facts::HostFacts;
use super::spec::TestSpec;
use super::trial::TrialResult;

/// An endpoint of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Endpoint {
    pub address: String,
    pub facts: HostFacts,
}

/// The document `--json` prints: the reported trial's fields at the top
/// (`sum.receiver.bits_per_second`), every trial in `trials`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub schema: String,
    pub workload: String,
    pub started_at_unix_seconds: f64,
    pub client: Endpoint,
    pub agent: Endpoint,
    pub spec: TestSpec,
    #[serde(flatten)]
    pub result: TrialResult,
    pub trials: Vec<TrialResult>,
    /// True when the run was cut short: a trial was interrupted (see its
    /// `interruption`) or fewer trials ran than the policy asked for. The
    /// client then exits with code 6.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// How the trials were repeated and which one is reported; absent for
    /// a single trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetition: Option<RepetitionSummary>,
    /// Set when the other end was not nicbench (an iperf3 server or
    /// client): who it was and what it reported itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_protocol: Option<super::peer::PeerProtocol>,
}

impl RunResult {
    /// True when client and agent ran on one kernel (same boot id: one
    /// host, or namespaces of one host), so their CPU figures cover the
    /// same cores.
    pub fn shared_host(&self) -> bool {
        let (client, agent) = (&self.client.facts, &self.agent.facts);
        if !client.boot_id.is_empty() && client.boot_id == agent.boot_id {
            return true;
        }
        let ip = |a: &str| a.parse::<std::net::SocketAddr>().ok().map(|s| s.ip());
        client.hostname == agent.hostname
            && matches!((ip(&self.client.address), ip(&self.agent.address)), (Some(a), Some(b)) if a == b || a.is_loopback())
    }
}

/// The repetition policy of a case and what its trials gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepetitionSummary {
    pub policy: crate::stats::Policy,
    /// The figure trials are compared by, e.g. `receiver_bits_per_second`.
    pub metric: String,
    /// Unit of the figures, e.g. `bit/s`.
    pub unit: String,
    /// Number of the reported trial (the one at the top of the document).
    pub picked_trial: u32,
    /// The reported figure: the picked trial's, or the mean for `mean` and
    /// `confidence`.
    pub reported_value: f64,
    /// The figure of every trial, in order.
    pub values: Vec<f64>,
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub mean: f64,
    pub stddev: f64,
    /// Confidence interval of the mean (two trials or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<crate::stats::MeanInterval>,
    /// For `--confidence`: whether the interval met the asked width.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width_met: Option<bool>,
    /// True when Ctrl-C ended the case before its policy was satisfied.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}
