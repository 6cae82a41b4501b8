//! Workloads: what traffic a test generates, behind one trait.
//!
//! A [`Workload`] turns a [`TestSpec`] into data sockets on both ends: on
//! the agent it binds listeners ([`AgentSide`]) and accepts the client's
//! data connections; on the client it connects them. Both ends then run a
//! [`Side`] that measures its own stream ends. Each workload also says what
//! its results hold and how they read ([`ResultKind`]): its figure of merit,
//! its totals, whether the line rate applies, its own verdict rule and text.
//! Session, agent, plan runner, verdict and reports only see the traits:
//! adding a workload means adding a folder and a line to [`REGISTRY`].

pub mod address_proof;
pub mod args;
pub mod case;
pub mod files;
pub mod loaded;
pub mod pace;
mod results;
pub mod rr;
pub mod runner;
pub mod sweep;
pub mod tcp_stream;
pub mod transport;
pub mod udp;
pub mod wakeup;
pub mod watch;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

pub use crate::model::spec::{Direction, SideOptions, SpecError, TestSpec};
pub use runner::{RunControl, SideOutcome};

use crate::model::{LinkPair, TrialResult};
use crate::protocol::limits::OfferedRate;
use crate::protocol::TOKEN_LEN;
use crate::units::Rate;

/// Every workload this build knows, by name.
pub static REGISTRY: &[&dyn Workload] = &[
    &tcp_stream::TcpStream,
    &udp::UdpStream,
    &rr::RequestResponse,
    &sweep::Sweep,
    &files::Files,
    &loaded::Loaded,
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

/// The workload of bulk streams over `proto`, for what other tools call
/// a plain throughput test (iperf3's tests and its `-J` documents, a
/// mesh's default): byte streams over a stream transport, datagrams at an
/// offered rate over a datagram one.
pub fn bulk_streams(proto: transport::Proto) -> &'static dyn Workload {
    if proto.is_datagram() {
        &udp::UdpStream
    } else {
        &tcp_stream::TcpStream
    }
}

/// The transport whose bulk streams the workload `name` is
/// ([`bulk_streams`]): TCP or UDP; None for any other workload.
pub fn bulk_transport(name: &str) -> Option<transport::Proto> {
    [transport::Proto::TCP, transport::Proto::UDP]
        .into_iter()
        .find(|p| bulk_streams(*p).name() == name)
}

/// The message-size sweep, for other tools' size sweeps (a NetPIPE
/// `np.out` file imports as one).
pub fn size_sweep() -> &'static dyn Workload {
    &sweep::Sweep
}

/// The transport a test of `spec` runs over, for a workload that runs
/// over one ([`Workload::transport`]).
pub fn transport_of(spec: &TestSpec) -> Option<transport::Proto> {
    find(&spec.workload).ok().and_then(|w| w.transport(spec))
}

/// The facts of this host for a test of `spec` (the interface holding
/// `local`), with what the test's transport depends on (MPTCP: the path
/// manager).
pub fn host_facts_for(spec: &TestSpec, local: std::net::IpAddr) -> crate::model::HostFacts {
    let mut facts = crate::probe::host::facts_toward(local);
    if let Some(proto) = transport_of(spec) {
        proto.host_facts(&mut facts);
    }
    facts
}

/// How results of the workload `name` read; a name this build does not
/// know (a document from another version or tool) reads as plain bulk
/// throughput. A `watch` run (an interface's traffic around a command,
/// not a workload one can run) reads as [`watch::WatchResults`].
pub fn results_of(name: &str) -> &'static dyn ResultKind {
    match find(name) {
        Ok(w) => w.results(),
        Err(_) if name == watch::NAME => &watch::WatchResults,
        Err(_) => &Throughput,
    }
}

/// Every kind of result this build reads: the registered workloads' and
/// a watch's.
pub fn all_results() -> impl Iterator<Item = &'static dyn ResultKind> {
    REGISTRY
        .iter()
        .map(|w| w.results())
        .chain(std::iter::once(&watch::WatchResults as &'static dyn ResultKind))
}

/// Names of every registered workload.
pub fn names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().map(|w| w.name())
}

/// Names of the workloads an agent may run toward another agent (a mesh,
/// a /probe): [`Workload::peer_tests`].
pub fn peer_test_names() -> impl Iterator<Item = &'static str> {
    REGISTRY.iter().filter(|w| w.peer_tests()).map(|w| w.name())
}

/// Every workload's own chart kinds, with the workload they draw.
pub fn chart_kinds() -> impl Iterator<Item = (&'static str, &'static ChartKind)> {
    REGISTRY
        .iter()
        .flat_map(|w| w.results().chart_kinds().iter().map(move |k| (w.name(), k)))
}

/// What a process was told for each workload beyond its specs, by workload
/// name: a serving agent's options of one workload (`files`' storage). Each
/// workload reads its own ([`Settings::of`]); nothing else looks inside.
#[derive(Clone, Default)]
pub struct Settings(BTreeMap<&'static str, Arc<dyn std::any::Any + Send + Sync>>);

impl Settings {
    /// Sets `workload`'s settings.
    pub fn set<T: std::any::Any + Send + Sync>(&mut self, workload: &'static str, value: T) {
        self.0.insert(workload, Arc::new(value));
    }

    /// `workload`'s settings, when they were set and are a `T`.
    pub fn of<T: std::any::Any>(&self, workload: &str) -> Option<&T> {
        self.0.get(workload).and_then(|v| v.downcast_ref())
    }
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// A workload's own options of `nicbench serve` (`files`: where received
/// files go), and the [`Settings`] they make.
pub trait ServeOptions: Sync {
    /// Adds the options to `serve`'s command.
    fn augment(&self, command: clap::Command) -> clap::Command;
    /// Reads them from `serve`'s matches into `settings`.
    fn read(&self, matches: &clap::ArgMatches, settings: &mut Settings) -> Result<(), clap::Error>;
}

/// What the agent knows about the network when it prepares a test.
#[derive(Debug, Clone)]
pub struct AgentNet {
    /// Address the control connection arrived on; data sockets bind here.
    pub local_ip: IpAddr,
    /// The client; data connections from anywhere else are refused.
    pub peer_ip: IpAddr,
    pub token: [u8; TOKEN_LEN],
    /// What `serve` was told for each workload beyond its specs (the
    /// `files` workload's storage: `--scratch`, `--keep`,
    /// `--max-files-bytes`).
    pub settings: Settings,
    /// With `--links`: each stream's link, by stream id. Data sockets then
    /// listen on every address (TCP) or bind to the link's agent address
    /// (UDP), and a stream is admitted only from its link's client address
    /// to its link's agent address.
    pub routes: BTreeMap<u32, LinkPair>,
    /// Where this test may send and whom it admits: the peer, and the
    /// link client addresses once they proved themselves over TCP.
    pub proven: address_proof::ProvenAddresses,
}

impl AgentNet {
    /// A test's net before any link address proved itself: only `peer_ip`
    /// is admitted.
    pub fn new(
        local_ip: IpAddr,
        peer_ip: IpAddr,
        token: [u8; TOKEN_LEN],
        settings: Settings,
        routes: BTreeMap<u32, LinkPair>,
    ) -> AgentNet {
        AgentNet {
            local_ip,
            peer_ip,
            token,
            settings,
            routes,
            proven: address_proof::ProvenAddresses::peer_only(peer_ip),
        }
    }

    /// The address data sockets of stream `id` bind to.
    pub fn local_ip_for(&self, id: u32) -> IpAddr {
        self.routes.get(&id).map_or(self.local_ip, |l| l.agent)
    }

    /// True when `ip` may open data connections and be sent to: the
    /// control connection's peer, or a link client address that proved
    /// itself over TCP ([`address_proof`]).
    pub fn peer_allowed(&self, ip: IpAddr) -> bool {
        self.proven.admits(ip)
    }

    /// Checks that stream `id` arrived over its own link: from the link's
    /// client address to the link's agent address. Without links, only the
    /// peer is checked.
    pub fn check_stream(&self, id: u32, peer: IpAddr, local: Option<IpAddr>) -> Result<(), String> {
        let Some(link) = self.routes.get(&id) else {
            return match self.routes.is_empty() && peer.to_canonical() == self.peer_ip.to_canonical() {
                true => Ok(()),
                false if self.routes.is_empty() => Err(format!(
                    "only the control connection's peer {} may connect",
                    self.peer_ip
                )),
                false => Err(format!("stream id {id} belongs to no link")),
            };
        };
        if peer.to_canonical() != link.client.to_canonical() {
            return Err(format!(
                "stream {id} belongs to link {link} and must come from {}",
                link.client
            ));
        }
        if !self.proven.admits(peer) {
            return Err(format!(
                "stream {id}'s client address {peer} has not proved itself over TCP with the test's token"
            ));
        }
        if let Some(local) = local {
            if local.to_canonical() != link.agent.to_canonical() {
                return Err(format!(
                    "stream {id} belongs to link {link} and must connect to {}",
                    link.agent
                ));
            }
        }
        Ok(())
    }
}

/// What the client knows when it connects its data sockets.
#[derive(Debug, Clone)]
pub struct ClientNet {
    pub agent_ip: IpAddr,
    pub data_ports: Vec<u16>,
    pub token: [u8; TOKEN_LEN],
    /// Local address to bind data sockets to (`-B`).
    pub bind: Option<IpAddr>,
    /// With `--links`: each stream's link, by stream id.
    pub routes: BTreeMap<u32, LinkPair>,
    /// The agent runs on this kernel (its boot id is ours): loopback, or
    /// another network namespace of this host, such as a lab host.
    pub same_kernel: bool,
    /// What the command was told for each workload beyond the spec.
    pub settings: Settings,
    /// What the agent announced of TLS in its facts (the certificate it
    /// presents), for a test over TLS.
    pub agent_tls: Option<crate::model::TlsHostFacts>,
}

impl ClientNet {
    /// Where stream `id` binds (its link's client address, else `-B`) and
    /// which agent address it goes to.
    pub fn route(&self, id: u32) -> (Option<IpAddr>, IpAddr) {
        match self.routes.get(&id) {
            Some(link) => (Some(link.client), link.agent),
            None => (self.bind, self.agent_ip),
        }
    }
}

/// Each stream's link of `spec`, by stream id (empty without links).
pub fn routes_of(spec: &TestSpec) -> BTreeMap<u32, LinkPair> {
    spec.flows()
        .iter()
        .filter_map(|(id, _)| spec.link_of(*id).map(|l| (*id, spec.links[l])))
        .collect()
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

/// The figure trials of a case are compared by.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Name as in JSON, e.g. `receiver_bits_per_second`.
    pub metric: &'static str,
    /// Unit of the value, e.g. `bit/s`.
    pub unit: &'static str,
    pub value: f64,
    /// What the value is, where the unit does not say it (`peak`).
    pub qualifier: &'static str,
}

impl Figure {
    /// The receiver's throughput: the figure of bulk-transfer workloads.
    pub fn receiver_rate(trial: &TrialResult) -> Figure {
        Figure {
            metric: "receiver_bits_per_second",
            unit: "bit/s",
            value: trial.sum.receiver.bits_per_second,
            qualifier: "",
        }
    }
}

impl std::fmt::Display for Figure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = format_figure(self.value, self.unit);
        match self.qualifier {
            "" => write!(f, "{value}"),
            q => write!(f, "{value} {q}"),
        }
    }
}

/// Whether a bigger figure is better (throughput) or worse (latency).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
}

/// A figure as a trial's part of a run document holds it: what compare,
/// plot, the store and metrics read, and which way is better.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Metric {
    /// Its name as in JSON, the store and reports, e.g. `transactions_per_second`.
    pub name: &'static str,
    /// Its short name where people choose a figure (`compare --metric tps`).
    pub option: &'static str,
    /// In words, e.g. `transactions per second`.
    pub label: &'static str,
    /// Unit of the value once scaled, e.g. `bit/s`.
    pub unit: &'static str,
    /// Where a trial's document (the run document, or a trial of it) holds
    /// the figure, as a JSON pointer: `/sum/rr/transactions_per_second`.
    pub pointer: &'static str,
    /// What the number at `pointer` is divided by to be in `unit` (1e6 for
    /// a latency in µs read as seconds); the quotient is rounded to a
    /// billionth of the unit, so that a figure of a few significant digits
    /// prints as it was measured.
    pub divisor: f64,
    pub better: Better,
}

impl Metric {
    /// The receiver's throughput: the figure of bulk-transfer workloads.
    pub const RECEIVER_RATE: Metric = Metric {
        name: "receiver_bits_per_second",
        option: "throughput",
        label: "receiver throughput",
        unit: "bit/s",
        pointer: "/sum/receiver/bits_per_second",
        divisor: 1.0,
        better: Better::Higher,
    };

    /// The sender's throughput.
    pub const SENDER_RATE: Metric = Metric {
        name: "sender_bits_per_second",
        option: "sender",
        label: "sender throughput",
        unit: "bit/s",
        pointer: "/sum/sender/bits_per_second",
        divisor: 1.0,
        better: Better::Higher,
    };

    /// The client's CPU busy, percent of all its cores.
    pub const CLIENT_CPU: Metric = Metric {
        name: "client_cpu_percent",
        option: "cpu",
        label: "client CPU busy",
        unit: "% of all cores",
        pointer: "/cpu/client/utilization_percent",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The agent's CPU busy, percent of all its cores.
    pub const AGENT_CPU: Metric = Metric {
        name: "agent_cpu_percent",
        option: "agent-cpu",
        label: "agent CPU busy",
        unit: "% of all cores",
        pointer: "/cpu/agent/utilization_percent",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The client's CPU time per KB moved: the cost of bulk transfer.
    pub const CLIENT_SERVICE_DEMAND: Metric = Metric {
        name: "client_service_demand_us_per_kb",
        option: "service-demand",
        label: "client service demand",
        unit: "us/KB",
        pointer: "/cpu/client/service_demand_us_per_kb",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The agent's CPU time per KB moved.
    pub const AGENT_SERVICE_DEMAND: Metric = Metric {
        name: "agent_service_demand_us_per_kb",
        option: "agent-service-demand",
        label: "agent service demand",
        unit: "us/KB",
        pointer: "/cpu/agent/service_demand_us_per_kb",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The client's CPU time per transaction: the cost of request/response.
    pub const CLIENT_CPU_PER_TRANSACTION: Metric = Metric {
        name: "client_service_demand_us_per_transaction",
        option: "cpu-per-transaction",
        label: "client CPU per transaction",
        unit: "us/transaction",
        pointer: "/cpu/client/service_demand_us_per_transaction",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The agent's CPU time per transaction.
    pub const AGENT_CPU_PER_TRANSACTION: Metric = Metric {
        name: "agent_service_demand_us_per_transaction",
        option: "agent-cpu-per-transaction",
        label: "agent CPU per transaction",
        unit: "us/transaction",
        pointer: "/cpu/agent/service_demand_us_per_transaction",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The client's stream threads busy, percent of one core: the
    /// client's own CPU even where both ends share a kernel (a lab).
    pub const CLIENT_THREADS_CPU: Metric = Metric {
        name: "client_threads_percent_of_core",
        option: "threads-cpu",
        label: "client threads CPU",
        unit: "% of a core",
        pointer: "/cpu/client/threads_percent_of_core",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The agent's stream threads busy, percent of one core.
    pub const AGENT_THREADS_CPU: Metric = Metric {
        name: "agent_threads_percent_of_core",
        option: "agent-threads-cpu",
        label: "agent threads CPU",
        unit: "% of a core",
        pointer: "/cpu/agent/threads_percent_of_core",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The client's stream threads' CPU time per KB moved.
    pub const CLIENT_THREADS_SERVICE_DEMAND: Metric = Metric {
        name: "client_threads_service_demand_us_per_kb",
        option: "threads-service-demand",
        label: "client threads CPU per KB",
        unit: "us/KB",
        pointer: "/cpu/client/threads_service_demand_us_per_kb",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The agent's stream threads' CPU time per KB moved.
    pub const AGENT_THREADS_SERVICE_DEMAND: Metric = Metric {
        name: "agent_threads_service_demand_us_per_kb",
        option: "agent-threads-service-demand",
        label: "agent threads CPU per KB",
        unit: "us/KB",
        pointer: "/cpu/agent/threads_service_demand_us_per_kb",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// The client's TLS handshake (TLS and QUIC), mean over its handshakes.
    pub const HANDSHAKE: Metric = Metric {
        name: "client_handshake_seconds",
        option: "handshake",
        label: "client handshake time",
        unit: "ms",
        pointer: "/sum/tls/client_handshake_seconds",
        divisor: 1e-3,
        better: Better::Lower,
    };

    /// The agent's TLS handshake.
    pub const AGENT_HANDSHAKE: Metric = Metric {
        name: "agent_handshake_seconds",
        option: "agent-handshake",
        label: "agent handshake time",
        unit: "ms",
        pointer: "/sum/tls/agent_handshake_seconds",
        divisor: 1e-3,
        better: Better::Lower,
    };

    /// A lab client host's own work (its stream threads and the napi
    /// threads carrying its packets), percent of one core.
    pub const CLIENT_HOST_WORK_CPU: Metric = Metric {
        name: "client_host_work_percent_of_core",
        option: "host-work-cpu",
        label: "client host work CPU",
        unit: "% of a core",
        pointer: "/cpu/client/host_work_percent_of_core",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// A lab agent host's own work, percent of one core.
    pub const AGENT_HOST_WORK_CPU: Metric = Metric {
        name: "agent_host_work_percent_of_core",
        option: "agent-host-work-cpu",
        label: "agent host work CPU",
        unit: "% of a core",
        pointer: "/cpu/agent/host_work_percent_of_core",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// A lab client host's own work per KB moved.
    pub const CLIENT_HOST_WORK_SERVICE_DEMAND: Metric = Metric {
        name: "client_host_work_service_demand_us_per_kb",
        option: "host-work-service-demand",
        label: "client host work CPU per KB",
        unit: "us/KB",
        pointer: "/cpu/client/host_work_service_demand_us_per_kb",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// A lab agent host's own work per KB moved.
    pub const AGENT_HOST_WORK_SERVICE_DEMAND: Metric = Metric {
        name: "agent_host_work_service_demand_us_per_kb",
        option: "agent-host-work-service-demand",
        label: "agent host work CPU per KB",
        unit: "us/KB",
        pointer: "/cpu/agent/host_work_service_demand_us_per_kb",
        divisor: 1.0,
        better: Better::Lower,
    };

    /// Each end's own CPU, from its stream threads and, in a lab, its
    /// host's own work: asked for by name (`compare --metric threads-cpu`,
    /// `--metric host-work-service-demand`, a plan's tables), not tabled
    /// by default.
    pub const THREADS: [Metric; 8] = [
        Metric::CLIENT_THREADS_CPU,
        Metric::AGENT_THREADS_CPU,
        Metric::CLIENT_THREADS_SERVICE_DEMAND,
        Metric::AGENT_THREADS_SERVICE_DEMAND,
        Metric::CLIENT_HOST_WORK_CPU,
        Metric::AGENT_HOST_WORK_CPU,
        Metric::CLIENT_HOST_WORK_SERVICE_DEMAND,
        Metric::AGENT_HOST_WORK_SERVICE_DEMAND,
    ];

    /// The figures of bulk throughput, in the order tables list them:
    /// both ends' rates, then CPU load and CPU per byte.
    pub const BULK: [Metric; 6] = [
        Metric::RECEIVER_RATE,
        Metric::SENDER_RATE,
        Metric::CLIENT_CPU,
        Metric::AGENT_CPU,
        Metric::CLIENT_SERVICE_DEMAND,
        Metric::AGENT_SERVICE_DEMAND,
    ];

    /// The figure in a run or trial document, in its unit; None when the
    /// document does not carry it as a number.
    pub fn read(&self, doc: &serde_json::Value) -> Option<f64> {
        self.of_number(doc.pointer(self.pointer)?.as_f64()?)
    }

    /// The figure of the number found at [`Metric::pointer`], in its unit.
    pub fn of_number(&self, raw: f64) -> Option<f64> {
        let value = match self.divisor {
            1.0 => raw,
            divisor => (raw * (1e9 / divisor)).round() / 1e9,
        };
        value.is_finite().then_some(value)
    }

    /// The pointer as a SQLite JSON path (`$.sum.rr.transactions_per_second`,
    /// `$.streams[0].sender`).
    pub fn json_path(&self) -> String {
        let path: String = self
            .pointer
            .split('/')
            .skip(1)
            .map(|s| match s.parse::<u64>() {
                Ok(i) => format!("[{i}]"),
                Err(_) => format!(".{s}"),
            })
            .collect();
        format!("${path}")
    }
}

/// Shows a figure with its unit.
pub fn format_figure(value: f64, unit: &str) -> String {
    match unit {
        "bit/s" => Rate(value).to_string(),
        other => format!("{value:.2} {other}"),
    }
}

pub use case::CasePart;
pub use results::*;

/// One kind of test.
pub trait Workload: Sync {
    /// The name used on the command line, in JSON and in the database.
    fn name(&self) -> &'static str;
    /// Checks the workload's own parameters; both ends run it.
    fn validate(&self, spec: &TestSpec) -> Result<(), SpecError>;
    /// What a test of `spec` offers to send per stream, as the workload
    /// reads its own parameters: what the agent holds to `--max-rate`. No
    /// default: a workload that sets no rate says it is unlimited.
    fn offered_rate(&self, spec: &TestSpec) -> OfferedRate;
    /// Agent: binds data sockets and returns what waits for the client.
    fn agent_side(&self, spec: &TestSpec, net: &AgentNet) -> Result<Box<dyn AgentSide>, WorkloadError>;
    /// Client: opens data connections to the agent.
    fn client_side(&self, spec: &TestSpec, net: &ClientNet) -> Result<Box<dyn Side>, WorkloadError>;
    /// How this workload's results read.
    fn results(&self) -> &'static dyn ResultKind;
    /// How its command line becomes its spec (its `args.rs`).
    fn command_line(&self) -> &'static dyn args::CommandLine;
    /// Whether the workload can spread its streams over several links
    /// (`--links`); a sweep cannot.
    fn supports_links(&self) -> bool {
        true
    }
    /// The transport a test of `spec` runs over, for a workload that runs
    /// over one: its host facts then say what the transport depends on.
    fn transport(&self, _spec: &TestSpec) -> Option<transport::Proto> {
        None
    }
    /// How long a test runs when all goes well, when the spec says: None for
    /// a byte count (`-n`) or a workload whose length follows from its work
    /// (a sweep), so the agent's "busy" answer does not promise an end.
    fn known_duration_seconds(&self, spec: &TestSpec) -> Option<f64> {
        spec.bytes.is_none().then(|| spec.expected_seconds())
    }
    /// About how long one test of `spec` takes, for a plan's estimate: the
    /// known duration, else the spec's time (warm-up included).
    fn estimated_seconds(&self, spec: &TestSpec) -> f64 {
        self.known_duration_seconds(spec)
            .unwrap_or(spec.duration_seconds + spec.omit_seconds)
    }
    /// The memory the agent's buffers hold for a test of `spec`, which the
    /// agent checks against `--max-test-memory` before it allocates
    /// anything: one message per stream end, unless the workload says more.
    fn agent_memory_bytes(&self, spec: &TestSpec) -> u64 {
        crate::protocol::limits::message_buffers(spec)
    }
    /// Whether an agent may run it toward another agent (a mesh's peer
    /// test, a /probe): its length is known and it needs nothing of the
    /// client's host (no files, no progress display).
    /// Its own options of `nicbench serve`, if it has any.
    fn serve_options(&self) -> Option<&'static dyn ServeOptions> {
        None
    }

    fn peer_tests(&self) -> bool {
        false
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> crate::model::RunResult {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    /// The headline a run is stored and listed by is the figure of merit
    /// the workload compares trials by, read where the document holds it;
    /// and every figure it declares is a number in a real run of it.
    #[test]
    fn the_declared_figures_are_the_figure_of_merit_and_are_in_real_runs() {
        for name in [
            "run-tcp.json",
            "run-udp.json",
            "run-udp-bidir.json",
            "run-rr.json",
            "run-sweep.json",
        ] {
            let run = fixture(name);
            let results = results_of(&run.workload);
            let doc = serde_json::to_value(&run.result).unwrap();
            let figure = results.figure_of_merit(&run.result);
            let headline = results.headline();
            assert_eq!(figure.metric, headline.name, "{name}");
            assert_eq!(figure.unit, headline.unit, "{name}");
            assert_eq!(headline.read(&doc), Some(figure.value), "{name}");
            for m in results.stored_columns().iter().chain([&results.mesh_figure()]) {
                assert!(m.read(&doc).is_some(), "{name}: {} at {}", m.name, m.pointer);
            }
        }
    }

    /// What every registered workload declares besides its engine; the
    /// command line's conversion is checked with the CLI (`cmd` tests).
    #[test]
    fn every_registered_workload_declares_its_figures_estimate_and_charts() {
        let mut chart_names = Vec::new();
        for w in REGISTRY {
            let results = w.results();
            let headline = results.headline();
            assert!(
                !headline.name.is_empty() && headline.pointer.starts_with('/'),
                "{}",
                w.name()
            );
            assert_eq!(
                results.figure_of_merit(&TrialResult::default()).metric,
                headline.name,
                "{}",
                w.name()
            );
            for m in results
                .stored_columns()
                .iter()
                .chain([&headline, &results.mesh_figure()])
            {
                assert!(
                    m.pointer.starts_with('/') && m.divisor > 0.0,
                    "{}: {}",
                    w.name(),
                    m.name
                );
            }
            let spec = crate::model::spec::tests::spec(w.name());
            let seconds = w.estimated_seconds(&spec);
            assert!(seconds.is_finite() && seconds > 0.0, "{}: {seconds}", w.name());
            for kind in results.chart_kinds() {
                assert!(
                    !chart_names.contains(&kind.name),
                    "chart kind {} declared twice",
                    kind.name
                );
                chart_names.push(kind.name);
            }
        }
        assert_eq!(peer_test_names().collect::<Vec<_>>(), ["tcp", "udp", "rr", "loaded"]);
    }

    /// Issue 31: a test that leaves its rate out is not thereby within
    /// `--max-rate`: every workload's own reading of a spec without one is
    /// "unlimited".
    #[test]
    fn a_spec_without_a_rate_offers_an_unlimited_rate_for_every_workload() {
        for w in REGISTRY {
            let mut spec = crate::model::spec::tests::spec(w.name());
            spec.params = serde_json::json!({});
            assert_eq!(w.offered_rate(&spec), OfferedRate::Unlimited, "{}", w.name());
        }
        let mut paced = crate::model::spec::tests::spec("udp");
        paced.params = serde_json::json!({ "rate_bits_per_second": 1_000_000 });
        assert_eq!(find("udp").unwrap().offered_rate(&paced), OfferedRate::PerStream(1e6));
    }

    #[test]
    fn a_scaled_figure_prints_as_it_was_measured() {
        let rtt = results_of("rr").mesh_figure();
        assert_eq!(rtt.of_number(40.1), Some(4.01e-5));
        assert_eq!(rtt.of_number(13.335), Some(13.335 / 1e6));
        assert_eq!(Metric::RECEIVER_RATE.of_number(f64::NAN), None);
    }
}
