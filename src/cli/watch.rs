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
    /// Print the result as one JSON document (schema in docs/SCHEMA.md).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub save: super::store::SaveArgs,
    /// The command to run and watch, after `--`; its exit code is passed through.
    #[arg(required = true, trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}
