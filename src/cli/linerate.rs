//! Options of `nicbench linerate`, and the link-rate parser shared with
//! `--link-speed`.

use clap::Args;

use super::parse;
use crate::linerate::Stack;

/// A link speed: `1G`, `10G`, `100M`, `2.5gbit` (SI, bits per second).
pub fn link_rate(s: &str) -> Result<u64, String> {
    crate::workload::args::parse::rate_in(1, u64::MAX)(s)
}

/// `nicbench linerate`
#[derive(Debug, Clone, Args)]
pub struct LinerateArgs {
    /// Link speeds, comma-separated (SI bits per second: 10M, 1G, 2.5G, 100G).
    #[arg(short = 's', long = "speed", value_name = "RATES", value_delimiter = ',',
          default_value = "10M,100M,1G,10G,100G", value_parser = link_rate)]
    pub speeds: Vec<u64>,
    /// Ethernet frame sizes, header to FCS (64 to 1518 at MTU 1500). The
    /// default when no size is given: 64,1518.
    #[arg(short = 'f', long = "frame", value_name = "BYTES", value_delimiter = ',',
          value_parser = parse::positive_size, conflicts_with_all = ["mtus", "payloads"])]
    pub frames: Vec<u64>,
    /// MTUs (largest IP packet), comma-separated, e.g. 1500,9000.
    #[arg(short = 'm', long = "mtu", value_name = "BYTES", value_delimiter = ',',
          value_parser = parse::positive_size, conflicts_with = "payloads")]
    pub mtus: Vec<u64>,
    /// Application payload per frame, comma-separated (padded to the minimum frame).
    #[arg(long = "payload", value_name = "BYTES", value_delimiter = ',', value_parser = parse::positive_size)]
    pub payloads: Vec<u64>,
    /// Protocols above Ethernet: the payload is what the top one carries.
    #[arg(long, value_enum, default_value_t = Stack::Eth)]
    pub stack: Stack,
    /// Add an 802.1Q VLAN tag (4 bytes) to every frame.
    #[arg(long)]
    pub vlan: bool,
    /// Print CSV (one header line, one row per case).
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    /// Print a JSON array, one object per case.
    #[arg(long)]
    pub json: bool,
}
