//! Options of `nicbench tcp`, and how they complete its spec.

use clap::Args;

use super::{TcpParams, TcpStream, ZeroCopyMethod};
use crate::workload::args::{parse, Context, WorkloadArgs};
use crate::workload::transport::encryption::EncryptionOptions;
use crate::workload::transport::shorthand::{Shorthand, StreamShorthands};
use crate::workload::transport::Proto;
use crate::workload::{SpecError, TestSpec, Workload};

/// The options of `nicbench tcp` besides the shared ones.
#[derive(Debug, Clone, Args)]
pub struct TcpOptions {
    /// Bytes per write and read (the default, 256K, measured faster than
    /// 64K, 128K, 512K and 1M on loopback: docs/BENCHMARKS.md).
    #[arg(short = 'l', long = "length", value_name = "SIZE", default_value = "256K", value_parser = parse::message_size)]
    pub length: u64,
    /// Send this many bytes per direction instead of running for a time.
    #[arg(short = 'n', long, value_name = "SIZE", value_parser = parse::positive_size, conflicts_with = "duration")]
    pub bytes: Option<u64>,
    /// TCP maximum segment size to request (TCP_MAXSEG).
    #[arg(short = 'M', long, value_name = "BYTES",
          value_parser = parse::between::<u32>(*super::MSS_RANGE.start() as u64, *super::MSS_RANGE.end() as u64))]
    pub mss: Option<u32>,
    /// Disable Nagle's algorithm (TCP_NODELAY).
    #[arg(short = 'N', long)]
    pub nodelay: bool,
    /// Congestion control algorithm (see /proc/sys/net/ipv4/tcp_available_congestion_control).
    #[arg(short = 'C', long, value_name = "ALGO")]
    pub congestion: Option<String>,
    /// Zero-copy send: `sendfile` (the default for -Z alone: sendfile(2)
    /// from a file in the page cache) or `msg` (send(2) with MSG_ZEROCOPY;
    /// on loopback and veth the kernel copies anyway).
    #[arg(short = 'Z', long, value_name = "METHOD", num_args = 0..=1, require_equals = true,
          default_missing_value = "sendfile", value_enum)]
    pub zerocopy: Option<ZeroCopyMethod>,
    /// Discarding receive: recv with MSG_TRUNC, the kernel drops the data uncopied.
    #[arg(long)]
    pub discard: bool,
    /// Pace each stream's sender to RATE bits per second (SI: 500M, 2G),
    /// as iperf3's -b does for TCP. The kernel's own TCP pacing
    /// (SO_MAX_PACING_RATE) spaces the packets; default: unpaced, as fast
    /// as congestion control allows.
    #[arg(short = 'b', long, value_name = "RATE", value_parser = parse::rate_in(1, u64::MAX))]
    pub bitrate: Option<u64>,
    /// What the streams run over: `tcp` (the default), `mptcp` (Multipath
    /// TCP on both ends: the result has each stream's subflows) or `tls`
    /// (TLS 1.3 from rustls over TCP: the result has each stream's cipher
    /// suite and handshake time, and each host's cipher speed on one core)
    /// or `quic` (QUIC from quinn: every stream on one connection; -C picks
    /// quinn's controller: cubic, newreno, bbr).
    #[arg(long, value_name = "NAME")]
    pub transport: Option<Proto>,
    /// `--mptcp`.
    #[command(flatten)]
    pub shorthands: StreamShorthands,
    /// The TLS options (with --transport tls).
    #[command(flatten)]
    pub tls: EncryptionOptions,
}

impl WorkloadArgs for TcpOptions {
    const WORKLOAD: &'static dyn Workload = &TcpStream;
    const ABOUT: &'static str = "TCP throughput: bulk streams in one or both directions";

    fn complete(&self, spec: &mut TestSpec, _: &Context) -> Result<(), SpecError> {
        spec.message_bytes = self.length;
        spec.bytes = self.bytes;
        spec.set_params(&TcpParams {
            mss: self.mss,
            nodelay: self.nodelay,
            congestion: self.congestion.clone(),
            zerocopy: self.zerocopy.is_some(),
            zerocopy_method: self.zerocopy,
            discard: self.discard,
            rate_bits_per_second: self.bitrate,
            transport: self.shorthands.transport(self.transport),
            tls: self.tls.params(self.transport.is_some_and(|t| t.tls_handshake()))?,
        })
    }
}
