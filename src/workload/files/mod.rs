//! `files`: what an application that copies files gets from the path. A
//! set of files — generated (`--generate 13x1.9G`, `200000x8K`, `mixed`)
//! or a real directory tree (`--from DIR`) — moves from the client to the
//! agent (or back with `--reverse`) over `--parallel-files` data
//! connections, each carrying one file at a time: its path and size, its
//! contents in chunks (optionally zstd-compressed), its xxh3-128 checksum
//! (the wire format is in [`wire`]). The receiver checks every path, writes
//! into a scratch directory it owns and never leaves it ([`scratch`]),
//! verifies every file, and both ends compare a digest of the whole set.
//! Each end records where its time went ([`result::FilesEnd`]); the
//! command runs a short raw TCP trial on the same path before, so the
//! result says how far the files are from raw TCP and why.

pub mod args;
pub mod command;
pub mod harness;
#[cfg(test)]
mod properties;
pub mod result;
pub mod scratch;
pub mod set;
pub mod transfer;
pub mod wire;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use socket2::Socket;

use super::runner::{run_streams, tcp_probe, StreamBody, StreamContext, StreamTask, TaskEnd};
use super::transport::admission::{self, JoinListener};
use super::transport::{ConnectionFigures, Proto};
use super::{
    Aborter, AgentNet, AgentSide, Better, ChartViews, ClientNet, Direction, Figure, Figures, Metric, ResultKind,
    RunControl, Side, SideOutcome, SpecError, Stored, TestSpec, TextView, VerdictQuestions, Workload, WorkloadError,
};
use crate::model::spec::out_of_range;
use crate::model::{Flow, Party, Role, TrialResult, Verdict};
use crate::probe::tcpinfo;
use crate::protocol::limits::OfferedRate;
use crate::units::Bytes;
use scratch::{Scratch, Storage};
use set::Source;
use transfer::{FileList, ReceivePlan, SendPlan};

/// zstd levels accepted by `--compress zstd:LEVEL`.
pub const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = 1..=22;

/// Parameters of the `files` workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesParams {
    pub source: Source,
    /// Files and payload bytes of the set (the agent refuses a set larger
    /// than its `--max-files-bytes` before anything moves).
    pub files: u64,
    pub total_bytes: u64,
    /// Share of generated contents a compressor can remove, 0 to 1.
    #[serde(default)]
    pub compressibility: f64,
    /// zstd level of on-the-fly compression; None: none.
    #[serde(default)]
    pub compress_level: Option<i32>,
    /// fsync every received file before closing it.
    #[serde(default)]
    pub fsync: bool,
    /// What the data connections run over; left out for plain TCP (specs
    /// before it ran over TCP alone).
    #[serde(default, skip_serializing_if = "Proto::is_tcp")]
    pub transport: Proto,
}

impl Default for FilesParams {
    fn default() -> Self {
        FilesParams {
            source: Source::Mixed,
            files: 0,
            total_bytes: 0,
            compressibility: 0.0,
            compress_level: None,
            fsync: false,
            transport: Proto::default(),
        }
    }
}

/// The `files` workload.
pub struct Files;

/// The raw TCP trial a files run is read against: as many connections, the
/// same direction, buffers and transport, for `seconds`.
pub fn raw_tcp_spec(files_spec: &TestSpec, seconds: f64) -> TestSpec {
    let mut spec = files_spec.clone();
    spec.workload = super::tcp_stream::TcpStream.name().into();
    spec.bytes = None;
    spec.duration_seconds = seconds;
    spec.omit_seconds = 0.0;
    let params: FilesParams = files_spec.params().unwrap_or_default();
    spec.params = serde_json::Value::Null;
    if !params.transport.is_tcp() {
        // Over the same transport: the raw trial is the path the files took.
        let tcp = super::tcp_stream::TcpParams {
            transport: params.transport,
            ..Default::default()
        };
        spec.set_params(&tcp).expect("tcp parameters serialize");
    }
    spec
}

/// How files results read.
pub struct FilesResults;

impl Figures for FilesResults {
    /// What the files' contents went at: the figure of merit.
    fn headline(&self) -> Metric {
        Metric {
            name: "payload_bits_per_second",
            option: "payload",
            label: "file payload throughput",
            unit: "bit/s",
            pointer: "/sum/files/payload_bits_per_second",
            divisor: 1.0,
            better: Better::Higher,
        }
    }

    fn summarize(&self, trial: &mut TrialResult) {
        result::summarize(trial)
    }

    fn figure_of_merit(&self, trial: &TrialResult) -> Figure {
        let r: result::FilesResult = trial.sum.extras.get(result::KEY).unwrap_or_default();
        Figure {
            metric: "payload_bits_per_second",
            unit: "bit/s",
            value: r.payload_bits_per_second,
            qualifier: "payload",
        }
    }
}

impl Stored for FilesResults {
    fn case(&self, spec: &TestSpec) -> Vec<super::CasePart> {
        let p: FilesParams = spec.params().unwrap_or_default();
        let set = match &p.source {
            set::Source::Mixed => "mixed set".to_string(),
            set::Source::Generated { count, file_bytes } => {
                format!("{count} x {}", super::case::size(*file_bytes))
            }
            set::Source::Directory { path } => format!("from {path}"),
        };
        let mut parts = vec![
            ("workload", "files".to_string()),
            ("direction", super::case::direction(spec.direction).to_string()),
            ("streams", super::case::streams(spec.streams)),
            ("set", set),
        ];
        if let Some(level) = p.compress_level {
            parts.push(("compress", format!("zstd {level}")));
        }
        if p.compressibility > 0.0 {
            parts.push((
                "compressibility",
                format!("{:.0}% compressible", p.compressibility * 100.0),
            ));
        }
        if p.fsync {
            parts.push(("fsync", "fsync".into()));
        }
        parts.extend(super::case::window(spec));
        parts
    }
}

impl VerdictQuestions for FilesResults {
    fn findings(&self, trial: &TrialResult) -> Vec<Verdict> {
        result::verdict(trial).into_iter().collect()
    }

    fn own_verdict_before_the_link(&self) -> bool {
        true
    }

    fn several_paths(&self, trial: &TrialResult) -> Option<String> {
        super::transport::several_paths(trial)
    }
}

impl TextView for FilesResults {
    fn write_details(&self, trial: &TrialResult, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        super::transport::write_details(trial, super::transport::Details::Connection, out)
    }

    fn write_summary(&self, trial: &TrialResult, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        result::write_summary(trial, out)
    }
}

impl ChartViews for FilesResults {}

impl Workload for Files {
    fn name(&self) -> &'static str {
        "files"
    }

    fn transport(&self, spec: &TestSpec) -> Option<Proto> {
        spec.params::<FilesParams>().ok().map(|p| p.transport)
    }

    fn offered_rate(&self, _spec: &TestSpec) -> OfferedRate {
        // The set is sent as fast as it can be read and written.
        OfferedRate::Unlimited
    }

    fn serve_options(&self) -> Option<&'static dyn super::ServeOptions> {
        Some(&args::ServeFiles)
    }

    fn command_line(&self) -> &'static dyn super::args::CommandLine {
        static LINE: super::args::ArgsOf<args::FilesOptions> = super::args::ArgsOf::new(super::args::length_option);
        &LINE
    }

    fn results(&self) -> &'static dyn ResultKind {
        &FilesResults
    }

    fn validate(&self, spec: &TestSpec) -> Result<(), SpecError> {
        spec.validate_common()?;
        let p: FilesParams = spec.params()?;
        if spec.direction == Direction::Bidir {
            return Err(SpecError::Invalid(
                "files moves a set one way: client to agent, or agent to client with --reverse; --bidir does not apply"
                    .into(),
            ));
        }
        p.transport.check_stream_for(self.name()).map_err(SpecError::Invalid)?;
        p.transport
            .check_kernel_stream("--transport", self.name())
            .map_err(SpecError::Invalid)?;
        if !(0.0..=1.0).contains(&p.compressibility) {
            return Err(out_of_range("--compressibility", "0 to 1", p.compressibility));
        }
        if let Some(level) = p.compress_level {
            if !ZSTD_LEVELS.contains(&level) {
                return Err(out_of_range("--compress zstd:LEVEL", "1..=22", level));
            }
        }
        if p.files == 0 || p.files > set::MAX_FILES {
            return Err(out_of_range(
                "the number of files",
                format!("1..={}", set::MAX_FILES),
                p.files,
            ));
        }
        match (&p.source, spec.direction) {
            (Source::Directory { .. }, Direction::Reverse) => {
                return Err(SpecError::Invalid(
                    "--from reads a directory on the client, so the client sends it; --reverse goes with --generate \
                     (the agent sends a generated set)"
                        .into(),
                ))
            }
            (Source::Directory { .. }, _) => {}
            (source, _) => {
                if let Source::Generated { count, file_bytes } = source {
                    if count.checked_mul(*file_bytes).is_none() {
                        return Err(SpecError::Invalid(format!(
                            "--generate {count}x{file_bytes}: more bytes than the largest size, {} B",
                            u64::MAX
                        )));
                    }
                }
                let (files, bytes) = source.generated_totals().expect("a generated set");
                if (files, bytes) != (p.files, p.total_bytes) {
                    return Err(SpecError::Invalid(format!(
                        "the set's totals ({} files, {} bytes) do not match its description ({files} files, {bytes} bytes)",
                        p.files, p.total_bytes
                    )));
                }
            }
        }
        Ok(())
    }

    fn agent_side(&self, spec: &TestSpec, net: &AgentNet) -> Result<Box<dyn AgentSide>, WorkloadError> {
        let params: FilesParams = spec.params()?;
        let receive = match spec.direction {
            Direction::Forward => {
                let storage = net.settings.of::<Storage>(self.name()).cloned().unwrap_or_default();
                Some(receive_plan(&params, &storage)?)
            }
            _ => None,
        };
        let listener = params
            .transport
            .listen(net.local_ip, (spec.streams as i32).max(16), &|s| {
                admission::apply_buffers(s, &spec.agent)
            })?;
        Ok(Box::new(FilesAgent {
            listener,
            spec: spec.clone(),
            params,
            net: net.clone(),
            receive,
        }))
    }

    fn client_side(&self, spec: &TestSpec, net: &ClientNet) -> Result<Box<dyn Side>, WorkloadError> {
        let params: FilesParams = spec.params()?;
        let port = *net
            .data_ports
            .first()
            .ok_or_else(|| WorkloadError::Setup("the agent named no data port".into()))?;
        let work = match spec.direction {
            Direction::Reverse => {
                // Where the command said (`--scratch`, `--keep`), as the
                // agent's comes from `serve`.
                let storage = net.settings.of::<Storage>(self.name()).cloned().unwrap_or_default();
                Work::Receive(receive_plan(&params, &storage)?)
            }
            _ => Work::Send(send_plan(spec, &params)?),
        };
        let mut sockets = Vec::new();
        for (id, _) in spec.flows() {
            sockets.push((
                id,
                admission::connect_stream(params.transport, net, port, id, &|s| {
                    admission::apply_buffers(s, &spec.client)
                })?,
            ));
        }
        Ok(Box::new(FilesSide {
            party: Party::Client,
            spec: spec.clone(),
            transport: params.transport,
            sockets,
            work,
            _joins: JoinListener::none(),
        }))
    }

    fn known_duration_seconds(&self, _spec: &TestSpec) -> Option<f64> {
        None
    }
}

/// The longest a receiver waits, before its test, for earlier tests'
/// directories to be removed and again for the filesystem's write-back.
const SETTLE_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The receiver's scratch directory for one test, after the quota check:
/// what the declared set takes at least on disk (its payload and an entry
/// per file) must fit `--max-files-bytes`, and the test may then write the
/// declared files and payload, and on disk what they can take or the
/// operator's limit ([`scratch::Budget`]).
fn receive_plan(params: &FilesParams, storage: &Storage) -> Result<Arc<ReceivePlan>, WorkloadError> {
    if let Some(max) = storage.max_files_bytes {
        let least = scratch::Budget::least_disk_bytes(params.files, params.total_bytes);
        if least > max {
            return Err(WorkloadError::Setup(format!(
                "the set holds {} in {} files ({} on disk with {} per file's entry); this agent accepts at most {} \
                 per test (its --max-files-bytes): send a smaller set",
                Bytes(params.total_bytes),
                params.files,
                Bytes(least),
                crate::units::Size(scratch::ENTRY_BYTES),
                Bytes(max)
            )));
        }
    }
    let budget = scratch::Budget::of_set(params.files, params.total_bytes, storage.max_files_bytes);
    let parent = storage.scratch.clone().unwrap_or_else(scratch::default_scratch);
    // An earlier test's directory, removed in the background, and its
    // writes not yet on disk would otherwise be paid inside this test.
    if parent.is_dir() {
        let settled = scratch::settle(&parent, SETTLE_LIMIT);
        match settled.note(&parent) {
            Some(note) => log::info!("{note}"),
            None => log::debug!("{settled:?}"),
        }
    }
    let scratch = Scratch::create(&parent, &scratch::unique_name(), storage.keep, budget)
        .map_err(|e| {
            WorkloadError::Setup(format!(
                "cannot create a scratch directory under {}: {e} (choose another with --scratch)",
                parent.display()
            ))
        })?
        .removed_in_background(storage.remove_in_background);
    // Whatever the operator allows, never more than the filesystem can
    // spare: checked before a single entry is made.
    let free = scratch::free_space(scratch.path()).map_err(WorkloadError::io(format!(
        "reading the free space of {}",
        parent.display()
    )))?;
    let least = scratch::Budget::least_disk_bytes(params.files, params.total_bytes);
    scratch::check_room(params.files, least, free, &parent).map_err(WorkloadError::Setup)?;
    log::info!("receiving files into {}", scratch.path().display());
    Ok(Arc::new(ReceivePlan {
        scratch: Arc::new(scratch),
        fsync: params.fsync,
    }))
}

/// The sender's list of files.
fn send_plan(spec: &TestSpec, params: &FilesParams) -> Result<Arc<SendPlan>, WorkloadError> {
    let files = match &params.source {
        Source::Directory { path } => {
            let root = std::path::PathBuf::from(path);
            let walked = set::walk(&root).map_err(WorkloadError::io(format!("reading the directory {path}")))?;
            let total: u64 = walked.entries.iter().map(|e| e.size).sum();
            if (walked.entries.len() as u64, total) != (params.files, params.total_bytes) {
                return Err(WorkloadError::Setup(format!(
                    "{path} changed since the test was set up ({} files of {} then, {} files of {} now)",
                    params.files,
                    Bytes(params.total_bytes),
                    walked.entries.len(),
                    Bytes(total)
                )));
            }
            FileList::Directory {
                root,
                entries: walked.entries,
            }
        }
        source => FileList::Generated {
            source: source.clone(),
            count: params.files,
        },
    };
    Ok(Arc::new(SendPlan {
        files,
        next: AtomicU64::new(0),
        compress_level: params.compress_level,
        compressibility: params.compressibility,
        chunk: (spec.message_bytes as usize).min(wire::MAX_CHUNK),
    }))
}

/// What a side does with its connections.
enum Work {
    Send(Arc<SendPlan>),
    Receive(Arc<ReceivePlan>),
}

struct FilesAgent {
    listener: Socket,
    spec: TestSpec,
    params: FilesParams,
    net: AgentNet,
    receive: Option<Arc<ReceivePlan>>,
}

impl AgentSide for FilesAgent {
    fn data_ports(&self) -> Vec<u16> {
        vec![admission::local_port(&self.listener)]
    }

    fn accept(self: Box<Self>, deadline: Instant) -> Result<Box<dyn Side>, WorkloadError> {
        let ids: Vec<u32> = self.spec.flows().iter().map(|(id, _)| *id).collect();
        let accepted = admission::accept_streams(&self.listener, &self.net, &ids, deadline)?;
        let work = match self.receive {
            Some(plan) => Work::Receive(plan),
            None => Work::Send(send_plan(&self.spec, &self.params)?),
        };
        Ok(Box::new(FilesSide {
            party: Party::Agent,
            spec: self.spec,
            transport: self.params.transport,
            sockets: accepted.into_iter().collect(),
            work,
            _joins: JoinListener::keep(self.params.transport, self.listener),
        }))
    }
}

/// One end's connections.
struct FilesSide {
    party: Party,
    spec: TestSpec,
    transport: Proto,
    sockets: Vec<(u32, Socket)>,
    work: Work,
    /// The agent's listener, kept while the files move where the transport
    /// joins paths to the agent's other addresses (MPTCP).
    _joins: JoinListener,
}

impl Side for FilesSide {
    fn aborter(&self) -> Aborter {
        admission::aborter(&self.sockets.iter().map(|(_, s)| s).collect::<Vec<_>>())
    }

    fn run(self: Box<Self>, control: &RunControl) -> SideOutcome {
        let flows = self.spec.flows();
        let mut tasks = Vec::new();
        for (id, socket) in self.sockets {
            let flow = flows
                .iter()
                .find(|(f, _)| *f == id)
                .map_or(Flow::ClientToAgent, |(_, f)| *f);
            let role = if flow.sender() == self.party {
                Role::Sender
            } else {
                Role::Receiver
            };
            let buffers = tcpinfo::socket_buffers(&socket);
            let probe = (role == Role::Sender).then(|| tcp_probe(&socket)).flatten();
            let figures = ConnectionFigures::start(self.transport, &socket);
            let body: StreamBody = match &self.work {
                Work::Send(plan) => {
                    let plan = Arc::clone(plan);
                    Box::new(move |ctx: &StreamContext| {
                        let ended = transfer::send_files(&socket, &plan, ctx.bytes, ctx.stop);
                        let _ = socket.shutdown(std::net::Shutdown::Write);
                        task_end(&socket, ended, figures)
                    })
                }
                Work::Receive(plan) => {
                    let plan = Arc::clone(plan);
                    Box::new(move |ctx: &StreamContext| {
                        let ended = transfer::receive_files(&socket, &plan, ctx.bytes);
                        task_end(&socket, ended, figures)
                    })
                }
            };
            tasks.push(StreamTask::new(id, role, buffers, body).with_probe(probe));
        }
        run_streams(tasks, control)
    }
}

fn task_end(socket: &Socket, ended: transfer::Ended, figures: ConnectionFigures) -> TaskEnd {
    let mut end = TaskEnd {
        last_activity: Some(Instant::now()),
        ..TaskEnd::of_socket(socket, ended.error)
    };
    end.extras.set(result::KEY, &ended.part);
    figures.add_to(&mut end);
    end
}
