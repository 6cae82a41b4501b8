//! `nicbench udp`

use crate::cli::udp::{Bitrate, UdpArgs};
use crate::workload::udp::UdpParams;

pub fn run(args: UdpArgs) -> anyhow::Result<()> {
    let spec = spec(&args)?;
    super::measure::execute(&args.measure, &spec)
}

/// The test spec a `udp` command line asks for.
pub fn spec(args: &UdpArgs) -> anyhow::Result<crate::model::TestSpec> {
    let params = UdpParams {
        rate_bits_per_second: match args.bitrate {
            Bitrate::Max => None,
            Bitrate::BitsPerSecond(r) => Some(r),
        },
        gso: args.gso,
        gro: args.gro,
    };
    let mut spec = super::measure::base_spec("udp", &args.measure, args.length);
    spec.set_params(&params)?;
    Ok(spec)
}
