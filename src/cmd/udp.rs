//! `nicbench udp`

use crate::cli::UdpArgs;

pub fn run(args: UdpArgs) -> anyhow::Result<()> {
    let spec = args.measure.spec_with(&args.options)?;
    super::measure::execute(&args.measure, &spec)
}
