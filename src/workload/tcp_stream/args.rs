//! Options of `nicbench tcp`, and how they complete its spec.

use clap::Args;

use super::{TcpParams, TcpStream, ZeroCopyMethod};
use crate::workload::args::{parse, Context, WorkloadArgs};
use crate::workload::transport::tls::params::normalize_pin;
use crate::workload::transport::tls::{Cipher, TlsParams};
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
    /// suite and handshake time, and each host's cipher speed on one core).
    #[arg(long, value_name = "NAME")]
    pub transport: Option<Proto>,
    /// Multipath TCP: `--transport mptcp`.
    #[arg(long, conflicts_with = "transport")]
    pub mptcp: bool,
    /// The TLS 1.3 cipher suite the client offers (with --transport tls).
    #[arg(long, value_name = "CIPHER", value_enum, help_heading = "TLS (--transport tls)")]
    pub cipher: Option<Cipher>,
    /// Trust only an agent certificate with this SHA-256 (64 hex digits,
    /// colons allowed), as `nicbench serve` prints it. Default: the
    /// fingerprint the agent announces, recorded as `trust: announced`.
    #[arg(long, value_name = "SHA256", help_heading = "TLS (--transport tls)")]
    pub tls_pin: Option<String>,
    /// Trust an agent certificate signed by a CA in this PEM file; it must
    /// name the agent's address.
    #[arg(
        long,
        value_name = "FILE",
        help_heading = "TLS (--transport tls)",
        conflicts_with = "tls_pin"
    )]
    pub tls_ca: Option<String>,
    /// Seal records in the kernel (kTLS) instead of rustls. Refused where
    /// the kernel has no kernel TLS (CONFIG_TLS), with the reason.
    #[arg(long, help_heading = "TLS (--transport tls)")]
    pub ktls: bool,
}

impl TcpOptions {
    /// The TLS options: TLS's defaults with `--transport tls`, what was
    /// given otherwise (validation refuses them without TLS).
    fn tls(&self) -> Option<TlsParams> {
        let given = self.cipher.is_some() || self.tls_pin.is_some() || self.tls_ca.is_some() || self.ktls;
        (given || self.transport == Some(Proto::TLS)).then(|| TlsParams {
            cipher: self.cipher.unwrap_or_default(),
            ktls: self.ktls,
            pin_sha256: self
                .tls_pin
                .as_deref()
                .map(|p| normalize_pin(p).unwrap_or_else(|_| p.to_string())),
            ca_file: self.tls_ca.clone(),
        })
    }
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
            transport: match self.mptcp {
                true => Proto::MPTCP,
                false => self.transport.unwrap_or_default(),
            },
            tls: self.tls(),
        })
    }
}
