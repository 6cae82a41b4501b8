//! Options of `nicbench watch`.

use clap::Args;

/// `nicbench watch`
#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    /// Interface whose counters to sample [default: the default route's].
    #[arg(long, value_name = "IF")]
    pub iface: Option<String>,
    /// Link speed for the percent of theoretical goodput and the verdict
    /// (e.g. 1G); default: the interface's link speed.
    #[arg(long, value_name = "RATE", value_parser = super::linerate::link_rate)]
    pub link_speed: Option<u64>,
    /// An agent (`nicbench serve`) on the far end, HOST or HOST:PORT: its
    /// CPU (every core, softirq and irq) and the counters of its interface
    /// toward this host are sampled over the same interval. Checked before
    /// the command runs: when the agent cannot be used, nothing is run.
    #[arg(long, value_name = "HOST[:PORT]")]
    pub peer: Option<String>,
    /// Pre-shared key file, for a --peer agent started with --psk-file.
    #[arg(long, value_name = "FILE", env = "NICBENCH_PSK_FILE")]
    pub psk_file: Option<std::path::PathBuf>,
    /// How long to wait for the --peer agent to accept the control connection.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = super::parse::positive_duration)]
    pub connect_timeout: std::time::Duration,
    /// Print the result as one JSON document (schema in docs/SCHEMA.md).
    #[arg(long)]
    pub json: bool,
    /// Save the run even when the command exits non-zero. By default a
    /// failed command's run is not saved: its figures measure a failure
    /// (a copy that never started), and would sit among the real ones.
    #[arg(long)]
    pub keep_failed: bool,
    #[command(flatten)]
    pub save: super::store::SaveArgs,
    /// The command to run and watch, after `--`; its exit code is passed through.
    #[arg(required = true, trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}
