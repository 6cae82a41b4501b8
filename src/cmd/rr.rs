//! `nicbench rr`

use crate::cli::RrArgs;

pub fn run(args: RrArgs) -> anyhow::Result<()> {
    let spec = args.measure.spec_with(&args.options)?;
    super::measure::execute(&args.measure, &spec)
}
