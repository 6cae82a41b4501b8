//! `nicbench rr`

use crate::cli::rr::{Proto, RrArgs};
use crate::workload::rr::{RrParams, RrProto, MIN_UDP_MESSAGE};

pub fn run(args: RrArgs) -> anyhow::Result<()> {
    let spec = spec(&args)?;
    super::measure::execute(&args.measure, &spec)
}

/// The test spec an `rr` command line asks for.
pub fn spec(args: &RrArgs) -> anyhow::Result<crate::model::TestSpec> {
    let proto = match args.proto {
        Proto::Tcp => RrProto::Tcp,
        Proto::Udp => RrProto::Udp,
    };
    let (request_bytes, response_bytes) = args.sizes.unwrap_or(match proto {
        RrProto::Tcp => (1, 1),
        RrProto::Udp => (MIN_UDP_MESSAGE, MIN_UDP_MESSAGE),
    });
    let params = RrParams {
        proto,
        request_bytes,
        response_bytes,
        crr: args.crr,
        burst: args.burst,
        timeout_us: args.timeout.as_micros().min(u64::MAX as u128) as u64,
        busy_poll_us: args.busy_poll,
        quickack: args.quickack,
        spin: args.spin,
    };
    let mut spec = super::measure::base_spec("rr", &args.measure, request_bytes);
    spec.set_params(&params)?;
    Ok(spec)
}
