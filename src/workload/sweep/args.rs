//! Options of `nicbench sweep`, the message-size sweep, and how they
//! complete its spec.

use std::time::Duration;

use clap::Args;

use super::{Mode, Sweep, SweepParams};
use crate::workload::args::{parse, Context, WorkloadArgs};
use crate::workload::transport::encryption::EncryptionOptions;
use crate::workload::transport::shorthand::{DatagramShorthands, Shorthand};
use crate::workload::transport::Proto;
use crate::workload::{SpecError, TestSpec, Workload};

/// The options of `nicbench sweep` besides the shared ones; `-t` is the
/// limit of the whole sweep.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("duration", |a| a
    .default_value("10m")
    .help("Time limit of the whole sweep; sizes not reached by then are skipped and listed")))]
pub struct SweepOptions {
    /// Smallest message size.
    #[arg(long, value_name = "SIZE", default_value = "1", value_parser = parse::message_size)]
    pub min: u64,
    /// Largest message size.
    #[arg(long, value_name = "SIZE", default_value = "8M", value_parser = parse::message_size)]
    pub max: u64,
    /// Also run the sizes this many bytes below and above each power of two (NetPIPE's -p).
    #[arg(long, value_name = "BYTES", default_value_t = 3,
          value_parser = parse::between::<u64>(0, crate::model::spec::MAX_MESSAGE_BYTES))]
    pub perturbation: u64,
    /// Run exactly these sizes instead (comma-separated, e.g. 1,64,1K,64K).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse::message_size,
          conflicts_with_all = ["min", "max", "perturbation"])]
    pub sizes: Option<Vec<u64>>,
    /// Ping-pong (round trips; latency = RTT/2) or stream (one way, back to back).
    #[arg(long, value_enum, default_value_t = Mode::PingPong)]
    pub mode: Mode,
    /// `-u/--udp`.
    #[command(flatten)]
    pub shorthands: DatagramShorthands,
    /// What the messages travel over: tcp; udp (as -u); mptcp (one
    /// Multipath TCP connection); tls (TLS 1.3 from rustls over TCP: every
    /// message sealed, the handshake and the cipher in the result); quic
    /// (one stream of a QUIC connection from quinn).
    #[arg(long, value_enum, value_name = "NAME")]
    pub transport: Option<Proto>,
    /// About how long each size is timed, over all passes; the number of exchanges adapts (at least 7).
    #[arg(long, value_name = "DURATION", default_value = "130ms", value_parser = parse::duration_in(0.001, 60.0))]
    pub point_time: Duration,
    /// Go through the sizes this many times, seconds apart; each size's figure is its best batch of all.
    #[arg(long, value_name = "N", default_value_t = super::DEFAULT_PASSES,
          value_parser = parse::between::<u32>(1, super::MAX_PASSES as u64))]
    pub passes: u32,
    /// Print the points as CSV instead of the text report.
    #[arg(long, conflicts_with_all = ["json", "json_stream"])]
    pub csv: bool,
    /// The TLS options (with --transport tls or quic).
    #[command(flatten)]
    pub tls: EncryptionOptions,
}

impl WorkloadArgs for SweepOptions {
    const WORKLOAD: &'static dyn Workload = &Sweep;
    const TIME_IS_LIMIT: bool = true;
    const ABOUT: &'static str = "Message-size sweep (NetPIPE-style): latency and bandwidth from 1 byte to megabytes";

    fn around(&self) -> Box<dyn crate::workload::args::Around> {
        Box::new(super::command::SweepAround { csv: self.csv })
    }

    fn complete(&self, spec: &mut TestSpec, context: &Context) -> Result<(), SpecError> {
        let params = SweepParams {
            min_bytes: self.min,
            max_bytes: self.max,
            perturbation_bytes: self.perturbation,
            sizes_bytes: self.sizes.clone().unwrap_or_default(),
            mode: self.mode,
            transport: self.shorthands.transport(self.transport),
            point_seconds: self.point_time.as_secs_f64(),
            passes: Some(self.passes),
            link_speed_bits_per_second: context.link_speed_bits_per_second.map(|s| s as f64),
            tls: None,
        };
        let params = SweepParams {
            tls: self.tls.params(params.encrypted())?,
            ..params
        };
        spec.message_bytes = params.largest();
        spec.set_params(&params)
    }
}
