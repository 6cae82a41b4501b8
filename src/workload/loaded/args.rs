//! Options of `nicbench loaded`, and how they complete its spec. The
//! shared `-t` is each load phase's length here (`--phase-time`), and `-P`
//! the load streams per direction, 4 unless told (the CLI's subcommand
//! renames and re-defaults them).

use std::time::Duration;

use clap::Args;

use super::{Loaded, LoadedParams, PhaseName, MAX_PHASE_SECONDS, PROBE_INTERVAL_RANGE};
use crate::workload::args::{parse, Context, WorkloadArgs};
use crate::workload::tcp_stream::TcpParams;
use crate::workload::{Direction, SpecError, TestSpec, Workload};

/// The id of the shared `-t` option, which `loaded` calls `--phase-time`.
pub const PHASE_TIME_ID: &str = "duration";
/// The id of the shared `-P` option.
pub const STREAMS_ID: &str = "streams";
/// Load streams per direction unless `-P` says.
pub const DEFAULT_STREAMS: &str = "4";
/// How often the runner samples the receivers' bytes: the stability rule
/// judges these intervals.
pub const RATE_INTERVAL_SECONDS: f64 = 0.25;

/// The options of `nicbench loaded` besides the shared ones; the shared
/// `-t` is the length of each phase and `-P` defaults to 4.
#[derive(Debug, Clone, Args)]
#[command(
    mut_arg(PHASE_TIME_ID, |a| a
        .long("phase-time")
        .visible_alias("time")
        .help("Length of each load phase")),
    mut_arg(STREAMS_ID, |a| a
        .default_value(DEFAULT_STREAMS)
        .help("Load streams per direction (one thread and one connection each)"))
)]
pub struct LoadedOptions {
    /// The load phases, in order, after the idle one.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "PHASE,...",
        default_value = "download,upload,bidirectional"
    )]
    pub phases: Vec<PhaseName>,
    /// The idle phase at the start: probes only, the baseline (and the
    /// clocks' offset) the load phases are set against.
    #[arg(long, value_name = "DURATION", default_value = "3s",
          value_parser = parse::duration_in(super::MIN_IDLE_SECONDS, MAX_PHASE_SECONDS))]
    pub idle: Duration,
    /// Time between probes of each kind (UDP, TCP request/response, the
    /// load streams' TCP_INFO).
    #[arg(long, value_name = "DURATION", default_value = "10ms",
          value_parser = parse::duration_in(*PROBE_INTERVAL_RANGE.start(), *PROBE_INTERVAL_RANGE.end()))]
    pub probe_interval: Duration,
    /// Bytes per write and read of the load streams.
    #[arg(short = 'l', long = "length", value_name = "SIZE", default_value = "128K", value_parser = parse::message_size)]
    pub length: u64,
    /// TCP maximum segment size of the load streams (TCP_MAXSEG).
    #[arg(short = 'M', long, value_name = "BYTES",
          value_parser = parse::between::<u32>(
              *crate::workload::tcp_stream::MSS_RANGE.start() as u64,
              *crate::workload::tcp_stream::MSS_RANGE.end() as u64))]
    pub mss: Option<u32>,
    /// Disable Nagle's algorithm on the load streams (TCP_NODELAY).
    #[arg(short = 'N', long)]
    pub nodelay: bool,
    /// Congestion control of the load streams.
    #[arg(short = 'C', long, value_name = "ALGO")]
    pub congestion: Option<String>,
    /// Zero-copy send for the load streams: sendfile(2) from a file in the page cache.
    #[arg(short = 'Z', long)]
    pub zerocopy: bool,
    /// Keep at most this many unsent bytes in a load stream's socket
    /// (TCP_NOTSENT_LOWAT), e.g. 16K.
    #[arg(long, value_name = "SIZE", value_parser = parse::size_in(1, super::MAX_NOTSENT_LOWAT))]
    pub notsent_lowat: Option<u64>,
}

impl WorkloadArgs for LoadedOptions {
    const WORKLOAD: &'static dyn Workload = &Loaded;
    const ABOUT: &'static str =
        "Latency under load: probes while idle, then during download, upload and both, with the delay the load adds, RPM, and the queue that holds it";

    fn complete(&self, spec: &mut TestSpec, _: &Context) -> Result<(), SpecError> {
        if spec.direction != Direction::Forward {
            return Err(SpecError::Invalid(
                "loaded chooses the directions by its phases: leave out -R/--bidir and use --phases".into(),
            ));
        }
        let params = LoadedParams {
            phases: self.phases.clone(),
            idle_seconds: self.idle.as_secs_f64(),
            phase_seconds: spec.duration_seconds,
            probe_interval_seconds: self.probe_interval.as_secs_f64(),
            tcp: TcpParams {
                mss: self.mss,
                nodelay: self.nodelay,
                congestion: self.congestion.clone(),
                zerocopy: self.zerocopy,
                zerocopy_method: None,
                discard: false,
                rate_bits_per_second: None,
                transport: crate::workload::transport::Proto::default(),
                tls: None,
            },
            notsent_lowat_bytes: self.notsent_lowat,
        };
        params.check()?;
        spec.message_bytes = self.length;
        spec.direction = Direction::Bidir;
        spec.duration_seconds = params.total_seconds();
        spec.interval_seconds = spec.interval_seconds.min(RATE_INTERVAL_SECONDS);
        spec.set_params(&params)
    }
}
