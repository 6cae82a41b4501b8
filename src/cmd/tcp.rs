//! `nicbench tcp`

use crate::cli::TcpArgs;

pub fn run(args: TcpArgs) -> anyhow::Result<()> {
    let spec = args.measure.spec_with(&args.options)?;
    super::measure::execute(&args.measure, &spec)
}
