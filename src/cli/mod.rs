//! The command line, clap-derived. No logic here: every subcommand's
//! arguments are turned into a validated configuration in `cmd/`. The doc
//! comments are the help text.

pub mod chart;
pub mod fanout;
pub mod host;
pub mod lab;
pub mod linerate;
pub mod measure;
pub mod mesh;
pub use crate::workload::args::parse;
pub mod run;
pub mod store;
pub mod watch;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use host::HostArgs;
pub use linerate::LinerateArgs;
pub use measure::{MeasureArgs, Measurement};

/// nicbench: what a network path really delivers — adapter, driver, host,
/// link and stack — with CPU cost on both ends.
///
/// Start an agent on each host (`nicbench serve`), then drive it from a
/// client (`nicbench tcp HOST`). `nicbench demo` runs a short standard set
/// against an agent on loopback.
#[derive(Debug, Parser)]
#[command(name = "nicbench", version, propagate_version = true, max_term_width = 100)]
pub struct Cli {
    #[command(flatten)]
    pub log: LogArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the agent: serve tests to clients on this host.
    Serve(ServeArgs),
    /// The measuring commands, one per registered workload (`tcp`,
    /// `sweep`, ...), each built from the workload's declaration.
    #[command(flatten)]
    Measure(Box<Measurement>),
    /// Run any command (scp, rsync, curl, a backup job) and measure around it: interface counters, CPU of every core and of its process tree, verdict.
    Watch(Box<watch::WatchArgs>),
    /// Start an agent on loopback in this process and run a short standard set.
    Demo(DemoArgs),
    /// Host and NIC facts: this machine's, or an agent's with --remote.
    Host(HostArgs),
    /// Line-rate model: frames/s, goodput and efficiency of Ethernet links.
    Linerate(LinerateArgs),
    /// Emulated testbed: hosts (network namespaces) joined by veth links.
    Lab(lab::LabArgs),
    /// Run a roundup plan (TOML): a test matrix, unattended and resumable,
    /// with its comparison tables at the end.
    Run(run::RunArgs),
    /// Every ordered pair of many agents, measured by the agents themselves:
    /// the N x N matrix, its outliers, optionally every --every.
    Mesh(Box<mesh::MeshArgs>),
    /// The fan-out commands, one per registered workload that drives
    /// several agents at once (`multicast`), built as the measuring ones.
    #[command(flatten)]
    Fanout(Box<fanout::Fanout>),
    /// Saved runs, one line each, newest first.
    Runs(store::RunsArgs),
    /// One saved run: its text report as printed, or its document.
    Show(store::ShowArgs),
    /// A comparison table of saved runs: rows and columns by tags or columns.
    #[command(mut_arg("metric", |a| a.help(metric_help())))]
    Compare(store::CompareArgs),
    /// Two saved runs side by side: figures, and the spec and facts that differ.
    Diff(store::DiffArgs),
    /// Saved runs as JSON or CSV.
    Export(store::ExportArgs),
    /// Remove saved runs.
    Rm(store::RmArgs),
    /// Bring in results of iperf3 (-J), NetPIPE (np.out) or nicbench (--json).
    Import(store::ImportArgs),
    /// The results database itself: `db backup FILE` copies it while others may save into it;
    /// `db push postgres://...` copies its runs into a team's archive, each run once.
    Db(store::DbCommandArgs),
    /// One chart of saved runs (or of result files) as SVG or PNG.
    #[command(mut_arg("metric", |a| a.help(plot_metric_help())))]
    Plot(Box<chart::PlotArgs>),
    /// One self-contained HTML file: charts, comparison tables, facts, verdicts, reproduce commands.
    Report(chart::ReportArgs),
    /// Manual page (roff) from the same definitions as --help: to stdout, or
    /// one page per subcommand into a directory.
    Man(ManArgs),
    /// Shell completion script for bash, zsh or fish, to stdout.
    Completions(CompletionsArgs),
}

/// `compare --metric`'s help: every metric `compare` takes, from the same
/// list it parses them by, so that the help cannot leave one out (it left
/// out rpm, added, added-p99 and idle-rtt once).
fn metric_help() -> String {
    let names: Vec<&str> = crate::store::compare::all_metrics().iter().map(|m| m.name).collect();
    format!(
        "The figure in each cell, shown for the runs that have it: {}",
        names.join(", ")
    )
}

/// `plot --metric`'s help, from the same list (plot parses its metric as
/// compare does; its help once listed 17 of 34).
fn plot_metric_help() -> String {
    let names: Vec<&str> = crate::store::compare::all_metrics().iter().map(|m| m.name).collect();
    format!(
        "The figure of the bars, drawn for the runs that have it: {}",
        names.join(", ")
    )
}

/// `--workload`'s help: every registered workload.
pub(crate) fn workload_filter_help() -> String {
    let names: Vec<&str> = crate::workload::names().collect();
    format!("Only runs of this workload ({})", names.join(", "))
}

/// `nicbench man`
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write nicbench.1 and one page per subcommand (nicbench-tcp.1, ...)
    /// into this directory instead of printing nicbench.1.
    #[arg(long, value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
}

/// `nicbench completions`
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: CompletionShell,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

/// Logging options, shared by every command.
#[derive(Debug, Args)]
pub struct LogArgs {
    /// More log output on stderr (-v: info, -vv: debug).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Only errors on stderr.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Format of log lines.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The registered workloads' options of `nicbench serve`
/// ([`crate::workload::Workload::serve_options`]) and the settings they
/// make.
#[derive(Debug, Clone, Default)]
pub struct WorkloadServeArgs {
    pub settings: crate::workload::Settings,
}

impl clap::FromArgMatches for WorkloadServeArgs {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut settings = crate::workload::Settings::default();
        for options in crate::workload::REGISTRY.iter().filter_map(|w| w.serve_options()) {
            options.read(matches, &mut settings)?;
        }
        Ok(WorkloadServeArgs { settings })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = WorkloadServeArgs::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for WorkloadServeArgs {
    fn augment_args(command: clap::Command) -> clap::Command {
        crate::workload::REGISTRY
            .iter()
            .filter_map(|w| w.serve_options())
            .fold(command, |command, options| options.augment(command))
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        WorkloadServeArgs::augment_args(command)
    }
}

/// `nicbench serve`
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Control port to listen on.
    #[arg(short, long, default_value_t = crate::protocol::DEFAULT_PORT)]
    pub port: u16,
    /// Address to listen on (default: all IPv6 and IPv4 addresses, or all
    /// IPv4 addresses where IPv6 is off).
    #[arg(short = 'B', long, value_name = "ADDR")]
    pub bind: Option<std::net::IpAddr>,
    /// Serve one test, then exit (for scripts).
    #[arg(long)]
    pub once: bool,
    /// Longest test accepted, warm-up included.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = max_duration)]
    pub max_duration: std::time::Duration,
    /// Most streams per direction accepted.
    #[arg(long, value_name = "N", default_value_t = crate::model::spec::MAX_STREAMS,
          value_parser = parse::between::<u32>(1, crate::model::spec::MAX_STREAMS as u64))]
    pub max_streams: u32,
    /// Largest message (write, read, datagram: the client's -l) accepted.
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = parse::message_size)]
    pub max_message: u64,
    /// Largest socket buffer (SO_SNDBUF/SO_RCVBUF) a client may ask for on either end.
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse::buffer_size)]
    pub max_buffer: u64,
    /// Most memory one test's buffers may hold on this agent (streams x
    /// message size, as the workload counts them), checked before anything
    /// is allocated.
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse::size_in(1 << 20, 1 << 40))]
    pub max_test_memory: u64,
    /// Highest rate a test may offer, per direction over all streams, e.g.
    /// 1G; a test that sets no rate (tcp, rr, sweep, files, udp -b max) is
    /// unlimited and then refused. Default: no limit.
    #[arg(long, value_name = "RATE", value_parser = parse::rate_in(1, u64::MAX))]
    pub max_rate: Option<u64>,
    /// Tests run at once; every result then records how many others overlapped it.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = parse::between::<u32>(1, 64))]
    pub max_concurrent: u32,
    /// Clients that may wait in line for their turn (client --wait).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = parse::between::<u32>(0, 1024))]
    pub max_queue: u32,
    /// Control connections handled at once; more are refused at once.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = parse::between::<u32>(1, 4096))]
    pub max_connections: u32,
    /// Control connections accepted per client address per minute (0: no limit).
    #[arg(long, value_name = "N", default_value_t = 600)]
    pub max_connections_per_minute: u32,
    /// Connections one client address may hold open at once, control port
    /// and metrics together; a silent one is closed at the handshake
    /// deadline (0: no limit).
    #[arg(long, value_name = "N", default_value_t = crate::protocol::gate::DEFAULT_PER_ADDRESS as u32,
          value_parser = parse::between::<u32>(0, 4096))]
    pub max_connections_per_address: u32,
    /// IPv6 clients are counted by network of this many bits for the two
    /// per-address limits above (a host is usually given a whole /64 and
    /// may use any address in it); 128 counts each address.
    #[arg(long, value_name = "BITS", default_value_t = crate::protocol::gate::DEFAULT_IPV6_PREFIX,
          value_parser = parse::between::<u8>(1, 128))]
    pub ipv6_prefix_per_address: u8,
    /// Require clients to prove they know the pre-shared key in this file
    /// (HMAC-SHA256 challenge-response; the key never crosses the network).
    #[arg(long, value_name = "FILE", env = "NICBENCH_PSK_FILE")]
    pub psk_file: Option<std::path::PathBuf>,
    /// The certificate chain (PEM) this agent presents to `--transport tls`
    /// clients. Default: a self-signed ECDSA certificate made at start;
    /// either way its SHA-256 is printed, for clients' --tls-pin.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Let clients that proved the key (--psk-file) set the MTU of the
    /// interface toward them between tests (`nicbench run` plans with an
    /// mtu axis). Off by default; needs root.
    #[arg(long, requires = "psk_file")]
    pub allow_host_changes: bool,
    /// Let a coordinator that proved the key (`nicbench mesh`) make this
    /// agent run tcp/udp/rr tests itself toward other agents that prove
    /// the same key, within the --max-* limits. Off by default.
    #[arg(long, requires = "psk_file")]
    pub allow_peer_tests: bool,
    /// How long a client may take for its whole handshake, from connecting
    /// to its request (hello, key proof, request); it is cut off then.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse::positive_duration)]
    pub handshake_timeout: std::time::Duration,
    /// Also accept unmodified iperf3 3.x clients on this port (`iperf3 -c
    /// HOST -p PORT`; iperf3's default is 5201). Every limit above applies.
    #[arg(long, value_name = "PORT")]
    pub iperf3_port: Option<u16>,
    /// How long an iperf3 client waits in line when a test runs, before it
    /// is told "the server is busy" (0: at once, like iperf3 itself).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse::duration)]
    pub iperf3_wait: std::time::Duration,
    /// Require iperf3's RSA authentication on --iperf3-port (`iperf3 -c
    /// --username USER --rsa-public-key-path PUBLIC`): this private key in
    /// PEM, the file iperf3 -s takes as --rsa-private-key-path. Required
    /// with --psk-file and --iperf3-port, with --iperf3-authorized-users.
    #[arg(long, value_name = "FILE", requires_all = ["iperf3_port", "iperf3_authorized_users"])]
    pub iperf3_rsa_private_key: Option<std::path::PathBuf>,
    /// The users iperf3 clients may authenticate as (iperf3 -s
    /// --authorized-users-path): lines USER,SHA256 with SHA256 the hex
    /// SHA-256 of "{USER}PASSWORD"; # starts a comment.
    #[arg(long, value_name = "FILE", requires_all = ["iperf3_port", "iperf3_rsa_private_key"])]
    pub iperf3_authorized_users: Option<std::path::PathBuf>,
    /// Save each test an iperf3 client ran on --iperf3-port in this results
    /// database (nicbench clients save their own runs; nothing is saved
    /// without this option).
    #[arg(long, value_name = "PATH", requires = "iperf3_port")]
    pub db: Option<std::path::PathBuf>,
    /// Tag the saved iperf3 tests, KEY=VALUE (repeatable).
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = store::tag, requires = "db")]
    pub tags: Vec<crate::store::Tag>,
    /// The workloads' own options (`files`: `--scratch`, `--keep`,
    /// `--max-files-bytes`), from the registry.
    #[command(flatten)]
    pub workloads: WorkloadServeArgs,
    /// Serve Prometheus metrics over HTTP on this address, e.g.
    /// 127.0.0.1:9310 (GET /metrics): tests served and refused, hostile
    /// connections closed, the agent's CPU, memory, fds and threads.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Also serve GET /probe?target=HOST[:PORT]&workload=tcp|udp|rr: this
    /// agent runs one peer test toward that agent (which must prove the same
    /// key; within the --max-* limits) and answers with its figures,
    /// blackbox-exporter style. Needs --allow-peer-tests.
    #[arg(long, requires_all = ["metrics_listen", "allow_peer_tests"])]
    pub metrics_probe: bool,
    /// Require 'Authorization: Bearer TOKEN' on /probe, TOKEN being the first
    /// line of this file (a probe makes this agent send traffic).
    #[arg(long, value_name = "FILE", requires = "metrics_probe")]
    pub metrics_token_file: Option<std::path::PathBuf>,
}

/// `serve --max-duration`: a test's shortest duration up to its longest
/// with its warm-up (a day each); more would be no limit.
fn max_duration(s: &str) -> Result<std::time::Duration, String> {
    use crate::model::spec::{MAX_DURATION_SECONDS, MIN_DURATION_SECONDS};
    parse::duration_in(MIN_DURATION_SECONDS, 2.0 * MAX_DURATION_SECONDS)(s)
}

/// `nicbench demo`
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Length of each test in the set.
    #[arg(short = 't', long = "time", value_name = "DURATION", default_value = "3s", value_parser = parse::test_duration)]
    pub duration: std::time::Duration,
    /// Print every result as one JSON array instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub save: store::SaveArgs,
    /// Write the HTML report of the demo's runs to this file.
    #[arg(long, value_name = "PATH", default_value = "nicbench-demo.html")]
    pub report: std::path::PathBuf,
    /// Do not write the HTML report.
    #[arg(long, conflicts_with = "report")]
    pub no_report: bool,
}
