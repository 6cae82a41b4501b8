//! Options of `nicbench udp`, and how they complete its spec.

use clap::Args;

use super::{UdpParams, UdpStream};
use crate::workload::args::{parse, Context, WorkloadArgs};
use crate::workload::transport::datagram::{HEADER_LEN, MAX_DATAGRAM_BYTES};
use crate::workload::{SpecError, TestSpec, Workload};

pub use crate::workload::args::parse::{bitrate, Bitrate};

/// The options of `nicbench udp` besides the shared ones.
#[derive(Debug, Clone, Args)]
pub struct UdpOptions {
    /// Offered rate per stream in bits per second (SI: 500M, 2G), or `max`
    /// to send as fast as the sender can.
    #[arg(short = 'b', long, value_name = "RATE", default_value = "1G", value_parser = bitrate)]
    pub bitrate: Bitrate,
    /// UDP payload bytes per datagram (28..=65507).
    #[arg(short = 'l', long = "length", value_name = "SIZE", default_value = "1400",
          value_parser = parse::size_in(HEADER_LEN as u64, MAX_DATAGRAM_BYTES))]
    pub length: u64,
    /// Send with UDP GSO (UDP_SEGMENT): the kernel cuts large buffers into datagrams.
    #[arg(long)]
    pub gso: bool,
    /// Receive with UDP GRO: the kernel hands over several datagrams at once.
    #[arg(long)]
    pub gro: bool,
    /// Send this many bytes per direction instead of running for a time:
    /// ceil(BYTES / -l) datagrams, shared out among the streams (iperf3's -n).
    #[arg(short = 'n', long, value_name = "SIZE", value_parser = parse::positive_size,
          conflicts_with_all = ["duration", "blocks"])]
    pub bytes: Option<u64>,
    /// Send this many datagrams per direction instead of running for a
    /// time, shared out among the streams (iperf3's -k: a block is a datagram).
    #[arg(short = 'k', long, value_name = "DATAGRAMS", value_parser = parse::between::<u64>(1, u64::MAX),
          conflicts_with = "duration")]
    pub blocks: Option<u64>,
}

impl WorkloadArgs for UdpOptions {
    const WORKLOAD: &'static dyn Workload = &UdpStream;
    const ABOUT: &'static str =
        "UDP streams at an offered rate: what the sender pushed, what the receiver got, loss and jitter";

    fn complete(&self, spec: &mut TestSpec, _: &Context) -> Result<(), SpecError> {
        spec.message_bytes = self.length;
        spec.bytes = match (self.bytes, self.blocks) {
            (Some(bytes), _) => Some(bytes),
            (None, Some(datagrams)) => Some(datagrams.checked_mul(self.length).ok_or_else(|| {
                crate::model::spec::out_of_range("-k/--blocks", "fewer datagrams (their bytes overflow)", datagrams)
            })?),
            (None, None) => None,
        };
        spec.set_params(&UdpParams {
            rate_bits_per_second: match self.bitrate {
                Bitrate::Max => None,
                Bitrate::BitsPerSecond(r) => Some(r),
            },
            gso: self.gso,
            gro: self.gro,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitrates() {
        assert_eq!(bitrate("max").unwrap(), Bitrate::Max);
        assert_eq!(bitrate("500M").unwrap(), Bitrate::BitsPerSecond(500_000_000));
        assert!(bitrate("0").unwrap_err().contains("at least 1 bit/s"));
        assert!(bitrate("0M").is_err());
        assert!(bitrate("fast").unwrap_err().contains("max"));
    }
}
