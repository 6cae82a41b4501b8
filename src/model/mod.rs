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
pub mod receivers;
pub mod run;
pub mod settings;
pub mod side;
pub mod spec;
pub mod switch;
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

/// Reads a model type from JSON text; None when the text is not JSON or not
/// of that shape.
///
/// Model types outside the control protocol are read from a
/// `&serde_json::Value` wherever they are read (the store hands out parsed
/// documents): every deserializer a type is read through is another copy of
/// its whole `Deserialize` in the binary, and those copies were a tenth of
/// the crate's code and of its build time (issue 72). Text goes through a
/// `Value` first for the same reason.
pub fn from_text<T: serde::de::DeserializeOwned>(text: &str) -> Option<T> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    T::deserialize(&value).ok()
}
