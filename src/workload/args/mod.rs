//! A measuring command line as far as it shapes the test: the options every
//! workload shares ([`SpecArgs`]), each workload's own (the `args.rs` in its
//! folder, behind [`WorkloadArgs`]), and the one conversion of a parsed
//! command line into a [`TestSpec`]. The CLI embeds these structs; plans,
//! the mesh and the /probe endpoint parse a command line with the CLI's
//! grammar and hand the matches to [`spec_of_matches`], so that every path
//! into a spec is the same code.

pub mod parse;

use std::marker::PhantomData;
use std::time::Duration;

use clap::{ArgMatches, Args, FromArgMatches};

use super::{find, Direction, SideOptions, SpecError, TestSpec, Workload};
use crate::model::{RunResult, TrialResult};

/// How long a test sends when `-t` is not given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// The options of every measuring command that go into its spec: how long,
/// how many streams, which way, socket buffers and pinning.
#[derive(Debug, Clone, Args)]
pub struct SpecArgs {
    /// How long to send, after the warm-up [default: 10s].
    #[arg(short = 't', long = "time", value_name = "DURATION",
          value_parser = parse::test_duration, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// Warm-up at the start that is excluded from the result.
    #[arg(short = 'O', long, value_name = "DURATION", default_value = "0s", value_parser = parse::warmup,
          allow_hyphen_values = true)]
    pub omit: Duration,
    /// Print a line per interval while the test runs (recorded in JSON at
    /// this interval too; 1 s when not given).
    #[arg(short = 'i', long, value_name = "DURATION", value_parser = parse::interval)]
    pub interval: Option<Duration>,
    /// Parallel streams (one thread and one connection each).
    #[arg(short = 'P', long = "parallel", value_name = "N", default_value_t = 1,
          value_parser = parse::between::<u32>(1, crate::model::spec::MAX_STREAMS as u64))]
    pub streams: u32,
    /// Agent sends, client receives.
    #[arg(short = 'R', long, conflicts_with = "bidir")]
    pub reverse: bool,
    /// Both directions at once (N streams each way).
    #[arg(long)]
    pub bidir: bool,
    /// Socket send and receive buffer on both ends (SO_SNDBUF/SO_RCVBUF).
    #[arg(short = 'w', long = "window", value_name = "SIZE", value_parser = parse::buffer_size)]
    pub window: Option<u64>,
    /// Local send buffer (like netperf -s); overrides -w.
    #[arg(long, value_name = "SIZE", value_parser = parse::buffer_size)]
    pub sndbuf: Option<u64>,
    /// Local receive buffer; overrides -w. Unset, a UDP receiver asks for 4 MiB.
    #[arg(long, value_name = "SIZE", value_parser = parse::buffer_size)]
    pub rcvbuf: Option<u64>,
    /// Agent's send buffer (like netperf -S); overrides -w.
    #[arg(long, value_name = "SIZE", value_parser = parse::buffer_size)]
    pub remote_sndbuf: Option<u64>,
    /// Agent's receive buffer; overrides -w. Unset, a UDP receiver asks for 4 MiB.
    #[arg(long, value_name = "SIZE", value_parser = parse::buffer_size)]
    pub remote_rcvbuf: Option<u64>,
    /// Pin local stream threads to these cores, round-robin (e.g. 0 or 0-3).
    #[arg(short = 'A', long = "affinity", value_name = "CORES", value_parser = parse::cpu_list)]
    pub affinity: Option<parse::CpuList>,
    /// Pin the agent's stream threads to these of its cores.
    #[arg(long = "remote-affinity", value_name = "CORES", value_parser = parse::cpu_list)]
    pub remote_affinity: Option<parse::CpuList>,
}

impl SpecArgs {
    /// The part of a spec every workload fills the same way; the workload's
    /// own options complete it ([`WorkloadArgs::complete`]).
    pub fn base_spec(&self, workload: &str) -> TestSpec {
        let side = |send: Option<u64>, receive: Option<u64>, cpus: &Option<parse::CpuList>| SideOptions {
            send_buffer_bytes: send.or(self.window),
            receive_buffer_bytes: receive.or(self.window),
            cpus: cpus.as_ref().map(|c| c.0.clone()).unwrap_or_default(),
        };
        TestSpec {
            workload: workload.to_string(),
            duration_seconds: self.duration.unwrap_or(DEFAULT_DURATION).as_secs_f64(),
            bytes: None,
            omit_seconds: self.omit.as_secs_f64(),
            streams: self.streams,
            direction: if self.bidir {
                Direction::Bidir
            } else if self.reverse {
                Direction::Reverse
            } else {
                Direction::Forward
            },
            message_bytes: 0,
            interval_seconds: self.interval.map(|d| d.as_secs_f64()).unwrap_or(1.0),
            client: side(self.sndbuf, self.rcvbuf, &self.affinity),
            agent: side(self.remote_sndbuf, self.remote_rcvbuf, &self.remote_affinity),
            params: serde_json::Value::Null,
            links: Vec::new(),
        }
    }
}

/// What a measuring command's options outside [`SpecArgs`] mean to the
/// spec, when they matter to it (`--link-speed` gives a sweep its % of line
/// rate). The CLI fills it from its own options.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Context {
    pub link_speed_bits_per_second: Option<u64>,
}

impl Context {
    /// The id of the option [`Context::link_speed_bits_per_second`] is read
    /// from when a command line is converted from its matches.
    pub const LINK_SPEED: &'static str = "link_speed";

    fn of_matches(matches: &ArgMatches) -> Context {
        let link = matches.try_get_one::<u64>(Context::LINK_SPEED).ok().flatten().copied();
        Context {
            link_speed_bits_per_second: link,
        }
    }
}

/// A workload's own command-line options (the `args.rs` in its folder).
pub trait WorkloadArgs: Args + FromArgMatches {
    /// The workload these options are for.
    const WORKLOAD: &'static dyn Workload;

    /// Why the workload takes no `-t` (a test that ends when its work is
    /// done), when it takes none: a `-t` on its command line is refused
    /// with this reason rather than ignored. Plans leave their default
    /// duration out of its command lines ([`CommandLine::takes_time`]).
    const NO_TIME: Option<&'static str> = None;

    /// True when `-t` limits the whole run rather than setting a test's
    /// length (a sweep ends when its sizes are done): the header says
    /// "time limit", and plans hand it only the workload's own duration.
    const TIME_IS_LIMIT: bool = false;

    /// The subcommand's one-line description (its `--help` opens with it).
    const ABOUT: &'static str;

    /// Completes `spec` (filled from [`SpecArgs`]): message size, byte
    /// count, streams, parameters.
    fn complete(&self, spec: &mut TestSpec, context: &Context) -> Result<(), SpecError>;

    /// What the measuring command does around the run besides measuring
    /// and printing it ([`Around`]), for these options.
    fn around(&self) -> Box<dyn Around> {
        Box::new(NothingAround)
    }
}

/// A workload's part of its measuring command beyond the spec: what the
/// command does before, around and after the run, where a workload does
/// more than measure and print (a sweep's CSV, a files test's raw TCP
/// trial). `cmd` calls these on every measuring command; each defaults to
/// doing nothing.
pub trait Around {
    /// Refuses a shared option that does not apply to this workload, with
    /// why and what to do instead.
    fn refuse(&self, _shared: &SpecArgs) -> Result<(), String> {
        Ok(())
    }

    /// Prepares this host for the run, once the spec is checked (a files
    /// test's page cache), and says in `settings` what the workload's side
    /// of the test needs beyond the spec (where a files test writes).
    fn prepare(&mut self, _spec: &TestSpec, _settings: &mut super::Settings) -> Result<(), SpecError> {
        Ok(())
    }

    /// What one step of the run's progress counts (a sweep: "sizes x
    /// passes"), when the workload reports its progress: the command shows
    /// a bar on a terminal, else a line per pass.
    fn progress_unit(&self) -> Option<&'static str> {
        None
    }

    /// A trial to run on the same path right after the first trial, that
    /// every trial is read against (a files test's raw TCP trial).
    fn companion(&self, _spec: &TestSpec) -> Option<Companion> {
        None
    }

    /// The line the command prints on stderr once the companion ran.
    fn companion_ran(&self, _companion: &RunResult) -> String {
        String::new()
    }

    /// Reads one trial (and the run's result) against the companion, when
    /// it ran; called as each trial ends. True when it changed the trial,
    /// whose verdict is then judged again.
    fn adjust(&self, _trial: &mut TrialResult, _companion: Option<&RunResult>) -> bool {
        false
    }

    /// Warnings about how the run was measured, printed after it (rr's
    /// `--spin` on a host with no core left).
    fn cautions(&self, _run: &RunResult) -> Vec<String> {
        Vec::new()
    }

    /// Writes the run in the workload's own CSV, when its options asked
    /// for that instead of the text report (a sweep's `--csv`).
    fn csv(&self, _run: &RunResult, _out: &mut dyn std::io::Write) -> Option<std::io::Result<()>> {
        None
    }
}

/// [`Around`] for a workload that only measures and prints.
pub struct NothingAround;

impl Around for NothingAround {}

/// A trial [`Around::companion`] asks for: its spec, and how its failure
/// reads ("the raw TCP trial after the files failed (...): the files result
/// is not read against it").
pub struct Companion {
    pub spec: TestSpec,
    /// "the raw TCP trial after the files"
    pub what: &'static str,
    /// "the files result is not read against it"
    pub unread: &'static str,
}

/// The spec a measuring command's parsed options ask for.
pub fn spec_of<A: WorkloadArgs>(shared: &SpecArgs, own: &A, context: &Context) -> Result<TestSpec, SpecError> {
    if let (Some(why), Some(_)) = (A::NO_TIME, shared.duration) {
        return Err(SpecError::Invalid(format!(
            "{} takes no -t/--time: {why}",
            A::WORKLOAD.name()
        )));
    }
    let mut spec = shared.base_spec(A::WORKLOAD.name());
    own.complete(&mut spec, context)?;
    Ok(spec)
}

/// A workload's measuring command: its subcommand, and how its parsed
/// command line becomes its spec and its [`Around`].
pub trait CommandLine: Sync {
    /// The workload's subcommand: `command` (named after the workload, the
    /// shared options on it) with the workload's description and options.
    fn command(&self, command: clap::Command) -> clap::Command;
    /// The command's part around the run, from the subcommand's matches.
    fn around(&self, matches: &ArgMatches) -> Result<Box<dyn Around>, SpecError>;
    /// The spec of a measuring command's matches (its subcommand's).
    fn spec(&self, matches: &ArgMatches) -> Result<TestSpec, SpecError>;
    /// The options that set the message size to `size` (as written, e.g.
    /// `64K`), or None when the workload picks its sizes itself (a sweep).
    fn message_option(&self, size: &str) -> Option<Vec<String>>;
    /// False when the workload refuses `-t` ([`WorkloadArgs::NO_TIME`]).
    fn takes_time(&self) -> bool;
    /// Whether the command takes `--transport NAME` (its own option, or
    /// another's alias: rr's `--proto`): a plan's transport axis applies.
    fn takes_transport(&self) -> bool;
    /// True when `-t` is a limit of the whole run ([`WorkloadArgs::TIME_IS_LIMIT`]).
    fn time_is_limit(&self) -> bool;
}

/// The [`CommandLine`] of the options `A`: `ArgsOf::<A>::new(message)`,
/// where `message` turns a message size into options.
pub struct ArgsOf<A> {
    message: fn(&str) -> Option<Vec<String>>,
    options: PhantomData<fn() -> A>,
}

impl<A> ArgsOf<A> {
    pub const fn new(message: fn(&str) -> Option<Vec<String>>) -> ArgsOf<A> {
        ArgsOf {
            message,
            options: PhantomData,
        }
    }
}

/// `-l SIZE`: the message size of most workloads.
pub fn length_option(size: &str) -> Option<Vec<String>> {
    Some(vec!["-l".into(), size.into()])
}

impl<A: WorkloadArgs> CommandLine for ArgsOf<A> {
    fn command(&self, command: clap::Command) -> clap::Command {
        // After the options: their struct's doc comment would set its own.
        A::augment_args(command).about(A::ABOUT).long_about(None)
    }

    fn around(&self, matches: &ArgMatches) -> Result<Box<dyn Around>, SpecError> {
        let own = A::from_arg_matches(matches).map_err(|e| SpecError::Invalid(first_line(&e.to_string())))?;
        Ok(own.around())
    }

    fn spec(&self, matches: &ArgMatches) -> Result<TestSpec, SpecError> {
        let invalid = |e: clap::Error| SpecError::Invalid(first_line(&e.to_string()));
        let shared = SpecArgs::from_arg_matches(matches).map_err(invalid)?;
        let own = A::from_arg_matches(matches).map_err(invalid)?;
        spec_of(&shared, &own, &Context::of_matches(matches))
    }

    fn message_option(&self, size: &str) -> Option<Vec<String>> {
        (self.message)(size)
    }

    fn takes_time(&self) -> bool {
        A::NO_TIME.is_none()
    }

    fn takes_transport(&self) -> bool {
        // The options on the shared ones, as the CLI builds the command.
        let command = A::augment_args(SpecArgs::augment_args(clap::Command::new("options")));
        let takes = command.get_arguments().any(|a| {
            a.get_long() == Some("transport")
                || a.get_visible_aliases()
                    .is_some_and(|aliases| aliases.contains(&"transport"))
        });
        takes
    }

    fn time_is_limit(&self) -> bool {
        A::TIME_IS_LIMIT
    }
}

/// The spec of a measuring command line: the workload its subcommand names
/// (`name`) and that subcommand's matches. The one conversion every caller
/// outside the typed CLI goes through.
pub fn spec_of_matches(name: &str, matches: &ArgMatches) -> Result<TestSpec, SpecError> {
    find(name)?.command_line().spec(matches)
}

/// Checks a spec before anything is sent: the rules of every spec, then the
/// workload's own.
pub fn check(spec: &TestSpec) -> Result<(), SpecError> {
    spec.validate_common()?;
    find(&spec.workload)?.validate(spec)
}

/// The first line of a clap error, without its `error: ` prefix.
pub fn first_line(s: &str) -> String {
    s.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or(s)
        .trim_start_matches("error: ")
        .to_string()
}
