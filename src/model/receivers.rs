//! A run with many receivers (`nicbench multicast`): the run document of
//! its slowest receiver, and every receiver's own trial beside it.

use serde::{Deserialize, Serialize};

use super::run::{Endpoint, RunResult};
use super::switch::SwitchRecord;
use super::trial::TrialResult;

/// The document of a group test: the slowest receiver's trial as a run
/// (so every reader of `nicbench.run/1` reads the figure that limits the
/// group), and `receivers`, one per agent in the order given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupRun {
    #[serde(flatten)]
    pub run: RunResult,
    pub receivers: Vec<ReceiverRun>,
    /// What the lab's switch saw of the group (its mdb and its IGMP/MLD
    /// counters), for a test run in a switch lab; absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch: Option<SwitchRecord>,
}

/// One receiver of a group test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReceiverRun {
    /// The agent as the command line named it.
    pub name: String,
    pub agent: Endpoint,
    /// `complete`, `losing`, `never_joined` or `failed`.
    pub standing: String,
    /// True for the one receiver the run's top level reports.
    pub slowest: bool,
    /// Seconds from its join to its first datagram; null when none came.
    pub join_latency_seconds: Option<f64>,
    /// What it lost and where, or what failed, in words.
    pub verdict: String,
    /// Its trial (the sender's end and its own); null when it has none
    /// (it failed before reporting).
    pub result: Option<TrialResult>,
}

/// One receiver of a saved group test read back from its own run (the
/// report's chart of a test's receivers): its counts, its join and
/// standing, and the sender's rates as its trial holds them. A figure the
/// run does not hold is None, never guessed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReceiverFigures {
    /// What it got and lost; None when its trial holds no datagram counts.
    pub counts: Option<ReceiverCounts>,
    /// Seconds from its join to its first datagram.
    pub join_latency_seconds: Option<f64>,
    /// In words: `complete`, `losing`, `never joined` or `failed`.
    pub standing: String,
    /// The rate the sender sent at, by its own count; None when the
    /// client did not send (iperf 2 did) or counted nothing.
    pub sent_bits_per_second: Option<f64>,
    /// The rate the sender was asked to offer; None for "as fast as it can".
    pub offered_bits_per_second: Option<f64>,
}

/// A receiver's datagram counts after the warm-up.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ReceiverCounts {
    pub received_bits_per_second: f64,
    pub received_datagrams: u64,
    /// The sender's count minus its own.
    pub lost_datagrams: u64,
    pub loss_percent: f64,
}
