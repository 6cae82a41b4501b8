//! `nicbench sweep`: options of the message-size sweep.

use std::time::Duration;

use clap::Args;

use super::parse;
use super::MeasureArgs;
use crate::workload::sweep::Mode;

/// `nicbench sweep`
#[derive(Debug, Clone, Args)]
#[command(mut_arg("duration", |a| a
    .default_value("10m")
    .help("Time limit of the whole sweep; sizes not reached by then are skipped and listed")))]
pub struct SweepArgs {
    #[command(flatten)]
    pub measure: MeasureArgs,
    /// Smallest message size.
    #[arg(long, value_name = "SIZE", default_value = "1", value_parser = parse::positive_size)]
    pub min: u64,
    /// Largest message size.
    #[arg(long, value_name = "SIZE", default_value = "8M", value_parser = parse::positive_size)]
    pub max: u64,
    /// Also run the sizes this many bytes below and above each power of two (NetPIPE's -p).
    #[arg(long, value_name = "BYTES", default_value_t = 3)]
    pub perturbation: u64,
    /// Run exactly these sizes instead (comma-separated, e.g. 1,64,1K,64K).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse::positive_size,
          conflicts_with_all = ["min", "max", "perturbation"])]
    pub sizes: Option<Vec<u64>>,
    /// Ping-pong (round trips; latency = RTT/2) or stream (one way, back to back).
    #[arg(long, value_enum, default_value_t = Mode::PingPong)]
    pub mode: Mode,
    /// Ping-pong over UDP, for the sizes that fit a datagram (at most 65507 B).
    #[arg(short = 'u', long)]
    pub udp: bool,
    /// About how long each size is timed, over all passes; the number of exchanges adapts (at least 7).
    #[arg(long, value_name = "DURATION", default_value = "130ms", value_parser = parse::positive_duration)]
    pub point_time: Duration,
    /// Go through the sizes this many times, seconds apart; each size's figure is its best batch of all.
    #[arg(long, value_name = "N", default_value_t = crate::workload::sweep::DEFAULT_PASSES,
          value_parser = clap::value_parser!(u32).range(1..=crate::workload::sweep::MAX_PASSES as i64))]
    pub passes: u32,
    /// Print the points as CSV instead of the text report.
    #[arg(long, conflicts_with_all = ["json", "json_stream"])]
    pub csv: bool,
}
