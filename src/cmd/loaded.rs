//! `nicbench loaded`

use crate::cli::LoadedArgs;

pub fn run(args: LoadedArgs) -> anyhow::Result<()> {
    let spec = args.measure.spec_with(&args.options)?;
    super::measure::execute(&args.measure, &spec)
}
