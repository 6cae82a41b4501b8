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

pub mod args;
pub mod base;
pub mod bulk;
pub mod case;
pub mod files;
pub mod loaded;
pub mod multicast;
pub mod pace;
mod results;
pub mod rr;
pub mod sweep;
pub mod tcp_stream;
pub mod transport;
pub mod udp;
pub mod wakeup;
pub mod watch;

pub use crate::model::spec::{Direction, SideOptions, SpecError, TestSpec};
pub use base::{address_proof, runner};
pub use base::{
    format_figure, routes_of, Aborter, AgentNet, AgentSide, Better, ClientNet, Figure, Metric, RunControl, Settings,
    Side, SideOutcome, WorkloadError,
};

use crate::protocol::limits::OfferedRate;

/// Every workload this build knows, by name.
pub static REGISTRY: &[&dyn Workload] = &[
    &tcp_stream::TcpStream,
    &udp::UdpStream,
    &rr::RequestResponse,
    &sweep::Sweep,
    &files::Files,
    &loaded::Loaded,
    &multicast::Multicast,
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
/// A workload's own options of `nicbench serve` (`files`: where received
/// files go), and the [`Settings`] they make.
pub trait ServeOptions: Sync {
    /// Adds the options to `serve`'s command.
    fn augment(&self, command: clap::Command) -> clap::Command;
    /// Reads them from `serve`'s matches into `settings`.
    fn read(&self, matches: &clap::ArgMatches, settings: &mut Settings) -> Result<(), clap::Error>;
}
pub use case::CasePart;

/// One agent of a fan-out test as the command hands it to its workload:
/// its name on the command line, its endpoint, and its trial or why it
/// has none.
pub struct FanoutAgent {
    pub name: String,
    pub agent: crate::model::Endpoint,
    pub result: Result<crate::model::TrialResult, String>,
}

/// A fan-out workload's reading of its agents (`multicast`: the receivers).
pub trait FanoutView: Sync {
    /// What the command says before the test: the test in a line.
    fn heading(&self, spec: &TestSpec, agents: usize) -> String;
    /// Each agent's entry of the document, in the order given, and the
    /// index of the one whose trial is the run's top level (the worst of
    /// those with a trial); None when none has one.
    fn read(
        &self,
        spec: &TestSpec,
        agents: Vec<FanoutAgent>,
    ) -> (Vec<crate::model::receivers::ReceiverRun>, Option<usize>);
    /// The document as text.
    fn write_text(&self, run: &crate::model::receivers::GroupRun, out: &mut dyn std::io::Write) -> std::io::Result<()>;
    /// Makes `spec` a test whose sender is the agent named `name`
    /// (`--sender`), not this host; the session gives that agent the test
    /// reversed (it sends, as an agent does on -R).
    fn sent_by_agent(&self, spec: &mut TestSpec, name: &str) -> Result<(), SpecError>;
    /// One agent's figures read back from the run saved for it (its own
    /// trial as the run's top level), for the report's chart of a test's
    /// receivers.
    fn stored_figures(&self, run: &crate::model::RunResult) -> crate::model::receivers::ReceiverFigures;
    /// The multicast group the agents join, whose entries a switch lab's
    /// bridge holds (the document's `switch`); None for a test without one.
    fn group(&self, _spec: &TestSpec) -> Option<std::net::IpAddr> {
        None
    }
    /// Adds what the lab's switch saw to each receiver's words (whether
    /// its port was in the switch's mdb); the default leaves them.
    fn read_switch(
        &self,
        _receivers: &mut [crate::model::receivers::ReceiverRun],
        _switch: &crate::model::switch::SwitchRecord,
    ) {
    }
}
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
    /// Hello features an agent of this build offers for this workload
    /// (`rr_one_way`), added to its hello beside the protocol's own.
    fn agent_features(&self) -> &'static [&'static str] {
        &[]
    }
    /// A hello feature the agent must offer for this spec, and the option
    /// that asked for it (`rr --one-way`); None when any agent will do.
    fn needs_feature(&self, _spec: &TestSpec) -> Option<(&'static str, &'static str)> {
        None
    }
    /// Whether the workload is one of the measuring commands (`nicbench
    /// tcp HOST ...`, built from [`args::CommandLine`]); false for one
    /// that drives several agents at once and has a command of its own
    /// (`nicbench multicast`).
    fn measuring_command(&self) -> bool {
        true
    }
    /// How a fan-out workload reads its agents' trials (`multicast`'s
    /// receivers); None for a measuring command's workload.
    fn fanout(&self) -> Option<&'static dyn FanoutView> {
        None
    }
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
    /// For a workload of bulk streams ([`bulk_streams`]): its settings in
    /// the words other tools share, for iperf3's adapter.
    fn bulk(&self) -> Option<&'static dyn bulk::BulkParams> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::TrialResult;

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
