//! Options of `nicbench rr`, and how they complete its spec.

use std::time::Duration;

use clap::Args;

use super::{
    RequestResponse, RrParams, MAX_BURST, MAX_INTERVAL_SECONDS, MAX_TIMEOUT_SECONDS, MIN_UDP_MESSAGE, STAMP_BYTES,
};
use crate::workload::args::{parse, Context, WorkloadArgs};
use crate::workload::transport::encryption::EncryptionOptions;
use crate::workload::transport::{Delivery, Proto};
use crate::workload::{SpecError, TestSpec, Workload};

/// Parses `-r REQ,RESP` (`1,1`, `64,1K`); one size means both, each a
/// message size (1 B to 64 MiB; over UDP the workload holds them to a
/// datagram).
pub fn sizes(s: &str) -> Result<(u64, u64), String> {
    let (req, resp) = s.split_once(',').unwrap_or((s, s));
    let one = |v: &str, which: &str| parse::message_size(v.trim()).map_err(|e| format!("the {which} size {e}"));
    Ok((one(req, "request")?, one(resp, "response")?))
}

/// The options of `nicbench rr` besides the shared ones.
#[derive(Debug, Clone, Args)]
pub struct RrOptions {
    /// Transport of the transactions (`--transport` as tcp and sweep spell
    /// it, so a plan's axis can give one option to all three).
    #[arg(long, visible_alias = "transport", value_enum, default_value_t = Proto::default())]
    pub proto: Proto,
    /// Request and response sizes, REQ,RESP (e.g. 1,1 or 64,1K). UDP needs
    /// at least 8 bytes each (the sequence number); default 1,1 for TCP, 8,8 for UDP.
    #[arg(short = 'r', long = "sizes", value_name = "REQ,RESP", value_parser = sizes)]
    pub sizes: Option<(u64, u64)>,
    /// A new connection per transaction (connect, request, response, close; netperf TCP_CRR); over TLS and QUIC a handshake each.
    #[arg(long)]
    pub crr: bool,
    /// Transactions each flow keeps in flight.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = parse::between::<u32>(1, MAX_BURST as u64))]
    pub burst: u32,
    /// UDP: a request without a response within this time counts as lost (the test goes on).
    #[arg(long, value_name = "DURATION", default_value = "50ms", value_parser = parse::duration_in(1e-6, MAX_TIMEOUT_SECONDS))]
    pub timeout: Duration,
    /// Busy-poll the receive queue this many microseconds (SO_BUSY_POLL) on both ends.
    #[arg(long, value_name = "US", value_parser = parse::between::<u32>(0, i32::MAX as u64))]
    pub busy_poll: Option<u32>,
    /// Acknowledge at once after every receive (TCP_QUICKACK) on both ends.
    #[arg(long)]
    pub quickack: bool,
    /// Wait for data by polling without sleeping (no wake-up latency; each
    /// flow keeps one core busy on both ends). TCP and UDP. Recorded in the result.
    #[arg(long)]
    pub spin: bool,
    /// Pace each flow: start a transaction every DURATION (e.g. 10ms) instead of
    /// back to back, so each round trip pays the wake-up of an idle host, like sparse
    /// RPCs (and `nicbench loaded`'s probes). Not with --burst. Recorded in the result.
    #[arg(long, value_name = "DURATION", value_parser = parse::duration_in(1e-6, MAX_INTERVAL_SECONDS))]
    pub every: Option<Duration>,
    /// Time each leg of a transaction, request and response, not just the
    /// round trip: the agent stamps its clock into each response, and the
    /// clocks' offset is taken out (estimated with its bound, or 0 on one
    /// kernel; docs/CLOCKS.md). The response then needs 8 bytes (16 over
    /// UDP): the default sizes become 1,8 (8,16 over UDP). Not with --crr.
    #[arg(long)]
    pub one_way: bool,
    /// The TLS options (with --proto tls).
    #[command(flatten)]
    pub tls: EncryptionOptions,
}

/// `-r SIZE,SIZE`: the message axis of a plan sets both sizes.
pub fn message_option(size: &str) -> Option<Vec<String>> {
    Some(vec!["-r".into(), format!("{size},{size}")])
}

impl WorkloadArgs for RrOptions {
    const WORKLOAD: &'static dyn Workload = &RequestResponse;
    const ABOUT: &'static str =
        "Request/response latency and transactions per second (TCP, UDP, or a TCP connection per transaction)";

    fn around(&self) -> Box<dyn crate::workload::args::Around> {
        Box::new(super::command::RrAround)
    }

    fn complete(&self, spec: &mut TestSpec, _: &Context) -> Result<(), SpecError> {
        let proto = self.proto;
        let stamp = if self.one_way { STAMP_BYTES } else { 0 };
        let (request_bytes, response_bytes) = self.sizes.unwrap_or(match proto.delivery() {
            Delivery::Stream => (1, 1.max(stamp)),
            Delivery::Datagram => (MIN_UDP_MESSAGE, MIN_UDP_MESSAGE + stamp),
        });
        spec.message_bytes = request_bytes;
        spec.set_params(&RrParams {
            proto,
            request_bytes,
            response_bytes,
            crr: self.crr,
            burst: self.burst,
            timeout_us: self.timeout.as_micros().min(u64::MAX as u128) as u64,
            busy_poll_us: self.busy_poll,
            quickack: self.quickack,
            spin: self.spin,
            interval_us: self.every.map(|d| (d.as_micros().min(u64::MAX as u128) as u64).max(1)),
            tls: self.tls.params(proto.tls_handshake())?,
            one_way: self.one_way,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_and_response_sizes() {
        assert_eq!(sizes("1,1").unwrap(), (1, 1));
        assert_eq!(sizes("64,1K").unwrap(), (64, 1024));
        assert_eq!(sizes("100").unwrap(), (100, 100));
        assert!(sizes("0,1").unwrap_err().contains("request"));
        assert!(sizes("1,x").unwrap_err().contains("response"));
        assert_eq!(
            sizes("65M,1").unwrap_err(),
            "the request size must be from 1 B to 64 MiB (got 65 MiB)"
        );
    }
}
