//! `nicbench tcp`

use crate::cli::TcpArgs;
use crate::workload::tcp_stream::TcpParams;

pub fn run(args: TcpArgs) -> anyhow::Result<()> {
    let spec = spec(&args)?;
    super::measure::execute(&args.measure, &spec)
}

/// The test spec a `tcp` command line asks for.
pub fn spec(args: &TcpArgs) -> anyhow::Result<crate::model::TestSpec> {
    let params = TcpParams {
        mss: args.mss,
        nodelay: args.nodelay,
        congestion: args.congestion.clone(),
        zerocopy: args.zerocopy,
        discard: args.discard,
    };
    let mut spec = super::measure::base_spec("tcp", &args.measure, args.length);
    spec.bytes = args.bytes;
    spec.set_params(&params)?;
    Ok(spec)
}
