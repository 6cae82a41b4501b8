//! The base layer under every workload and transport: what a test's
//! sockets need whatever travels over them. Transports stand on it and on
//! nothing else of `workload/` (`tests/cli/layers.rs` checks that); the
//! workloads and their registry stand on both.
//!
//! - [`error`]: [`WorkloadError`], what goes wrong setting up or running;
//! - [`net`]: the network context of both ends ([`AgentNet`], [`ClientNet`],
//!   [`Settings`]);
//! - [`address_proof`]: the agent's one rule for where traffic may go;
//! - [`sockets`]: accepting, reading and writing against a whole deadline,
//!   and comparing tokens;
//! - [`runner`]: one thread per stream end, its counters, intervals and
//!   window;
//! - [`figure`]: figures and metrics, and how they read;
//! - [`one_way`]: transit times on two hosts' clocks, and the one-way
//!   delays they give once the clocks' offset is taken out;
//! - here, what one end of a test is ([`Side`], [`AgentSide`]) and what
//!   stops it from another thread ([`Aborter`]).

pub mod address_proof;
pub mod error;
pub mod figure;
pub mod net;
pub mod one_way;
pub mod runner;
pub mod sockets;

use std::sync::Arc;
use std::time::Instant;

pub use error::WorkloadError;
pub use figure::{format_figure, Better, Figure, Metric, OFFER_REACHED_PERCENT};
pub use net::{routes_of, AgentNet, ClientNet, Settings};
pub use runner::{RunControl, SideOutcome};

/// Closes a side's sockets from another thread so that blocked calls
/// return; used when the peer vanishes or a deadline passes.
pub type Aborter = Arc<dyn Fn() + Send + Sync>;

/// The agent's half before the client has connected.
pub trait AgentSide: Send {
    /// Ports the client must connect its data sockets to.
    fn data_ports(&self) -> Vec<u16>;
    /// Waits for every data connection; refuses strangers.
    fn accept(self: Box<Self>, deadline: Instant) -> Result<Box<dyn Side>, WorkloadError>;
}

/// One end of a test, connected and ready to run.
pub trait Side: Send {
    /// Runs until every local stream end is done.
    fn run(self: Box<Self>, control: &RunControl) -> SideOutcome;
    /// Something that unblocks `run` from another thread.
    fn aborter(&self) -> Aborter;
}
