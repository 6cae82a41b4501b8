//! The result model, the bottom layer: the test spec ([`TestSpec`]), what
//! one side measures ([`SideReport`]), what a trial yields once both sides
//! are merged ([`TrialResult`]), and the run document ([`RunResult`]) that
//! `--json` prints. Field names carry their units. It imports nothing from
//! the layers above it (workloads, sessions, the agent, commands); the
//! schema is described in `docs/SCHEMA.md`; bump [`SCHEMA`] on any
//! incompatible change.

pub mod bounds;
pub mod counters;
pub mod extras;
pub mod facts;
pub mod latency;
pub mod multilink;
pub mod paths;
pub mod peer;
pub mod run;
pub mod settings;
pub mod side;
pub mod spec;
pub mod trial;
pub mod verdict;

pub use counters::*;
pub use extras::Extras;
pub use facts::*;
pub use latency::{LatencyBucket, LatencyStats};
pub use multilink::{BondFacts, BondSlave, InterfaceAddress, LinkEnd, LinkPair, LinkResult, MultilinkSummary};
pub use paths::{PathFigures, PathsSummary};
pub use peer::{PeerProtocol, PeerStream};
pub use run::*;
pub use settings::HostSetting;
pub use side::*;
pub use spec::{Direction, SideOptions, SpecError, TestSpec};
pub use trial::*;
pub use verdict::{Evidence, Verdict};

/// Identifies the JSON document format.
pub const SCHEMA: &str = "nicbench.run/1";
