//! Workloads: what traffic a test generates, behind one trait.
//!
//! A [`Workload`] turns a [`TestSpec`] into data sockets on both ends: on
//! the agent it binds listeners ([`AgentSide`]) and accepts the client's
//! data connections; on the client it connects them. Both ends then run a
//! [`Side`] that measures its own stream ends. Session, agent and reports
//! only see the trait: adding a workload means adding a file and a line to
//! [`REGISTRY`].

pub mod data;
pub mod rr;
pub mod rr_loops;
pub mod runner;
pub mod sweep;
pub mod tcp_stream;
pub mod udp_io;
pub mod udp_stream;
pub mod udp_wire;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

pub use crate::model::spec::{Direction, SideOptions, SpecError, TestSpec};
pub use runner::{RunControl, SideOutcome};

use crate::protocol::TOKEN_LEN;

/// Every workload this build knows, by name.
pub static REGISTRY: &[&dyn Workload] = &[
    &tcp_stream::TcpStream,
    &udp_stream::UdpStream,
    &rr::RequestResponse,
    &sweep::Sweep,
];

/// Looks a workload up by its name (the same string on the command line,
/// in JSON and in the database).
pub fn find(name: &str) -> Result<&'static dyn Workload, SpecError> {
    REGISTRY
        .iter()
        .copied()
        .find(|w| w.name() == name)
        .ok_or_else(|| SpecError::UnknownWorkload {
            name: name.to_string(),
            known: names().collect::<Vec<_>>().join(", "),
        })
}

/// Names of every registered workload.
pub fn names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|w| w.name())
}

/// What the agent knows about the network when it prepares a test.
#[derive(Debug, Clone)]
pub struct AgentNet {
    /// Address the control connection arrived on; data sockets bind here.
    pub local_ip: IpAddr,
    /// The client; data connections from anywhere else are refused.
    pub peer_ip: IpAddr,
    pub token: [u8; TOKEN_LEN],
}

/// What the client knows when it connects its data sockets.
#[derive(Debug, Clone)]
pub struct ClientNet {
    pub agent_ip: IpAddr,
    pub data_ports: Vec<u16>,
    pub token: [u8; TOKEN_LEN],
    /// Local address to bind data sockets to (`-B`).
    pub bind: Option<IpAddr>,
}

/// Failures while setting up or running a workload.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Setup(String),
}

impl WorkloadError {
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> WorkloadError {
        let context = context.into();
        move |source| WorkloadError::Io { context, source }
    }
}

/// Closes a side's sockets from another thread so that blocked calls
/// return; used when the peer vanishes or a deadline passes.
pub type Aborter = Arc<dyn Fn() + Send + Sync>;

/// One kind of test.
pub trait Workload: Sync {
    /// The name used on the command line, in JSON and in the database.
    fn name(&self) -> &'static str;
    /// Checks the workload's own parameters; both ends run it.
    fn validate(&self, spec: &TestSpec) -> Result<(), SpecError>;
    /// Agent: binds data sockets and returns what waits for the client.
    fn agent_side(&self, spec: &TestSpec, net: &AgentNet) -> Result<Box<dyn AgentSide>, WorkloadError>;
    /// Client: opens data connections to the agent.
    fn client_side(&self, spec: &TestSpec, net: &ClientNet) -> Result<Box<dyn Side>, WorkloadError>;
    /// How long a test runs when all goes well, when the spec says: None for
    /// a byte count (`-n`) or a workload whose length follows from its work
    /// (a sweep), so the agent's "busy" answer does not promise an end.
    fn known_duration_seconds(&self, spec: &TestSpec) -> Option<f64> {
        spec.bytes.is_none().then(|| spec.expected_seconds())
    }
}

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
