//! Options of `nicbench multicast` that shape its spec: the group, its
//! source, TTL, rate, datagram size and the join wait.

use std::net::IpAddr;
use std::time::Duration;

use clap::Args;

use super::group::{self, DEFAULT_PORT};
use super::{Multicast, MulticastParams, JOIN_WAIT_RANGE, MAX_TTL};
use crate::workload::args::parse::{self, bitrate, Bitrate};
use crate::workload::args::{Context, WorkloadArgs};
use crate::workload::transport::datagram::{HEADER_LEN, MAX_DATAGRAM_BYTES};
use crate::workload::{SpecError, TestSpec, Workload};

/// The group a test sends to when `--group` is not given.
pub const DEFAULT_GROUP: &str = "239.255.77.1";

/// Parses `--group`: `GROUP` or `GROUP:PORT` (`[GROUP]:PORT` for IPv6),
/// a multicast address a test may use ([`group::check`] without a source;
/// the source is checked with the spec).
pub fn group_and_port(s: &str) -> Result<(IpAddr, u16), String> {
    let (host, port) = crate::address::split_host_port(s).map_err(|e| e.to_string())?;
    let address: IpAddr = host
        .parse()
        .map_err(|_| format!("'{host}' is not an IP address; give the group as e.g. 239.1.2.3 or 239.1.2.3:5001"))?;
    if !address.is_multicast() {
        return Err(format!(
            "{address} is not a multicast group; use one in 239.0.0.0/8, or 232.0.0.0/8 with --source"
        ));
    }
    // split_host_port refuses port 0.
    Ok((address, port.unwrap_or(DEFAULT_PORT)))
}

/// The options of `nicbench multicast` besides the shared ones.
#[derive(Debug, Clone, Args)]
pub struct MulticastOptions {
    /// The group and port to send to: GROUP or GROUP:PORT ([GROUP]:PORT for
    /// IPv6). 239.0.0.0/8 and ff15::/16-style groups are any-source;
    /// 232.0.0.0/8 and ff3x:: are source-specific and need --source. The
    /// port defaults to iperf 2's, 5001.
    #[arg(short = 'g', long, value_name = "GROUP[:PORT]", default_value = DEFAULT_GROUP,
          value_parser = group_and_port)]
    pub group: (IpAddr, u16),
    /// The one source receivers take a source-specific group from (SSM:
    /// IGMPv3, MLDv2): this host's address toward them.
    #[arg(long, value_name = "ADDR")]
    pub source: Option<IpAddr>,
    /// TTL (IPv4) or hop limit (IPv6) of the datagrams: 1 stays on the
    /// sender's segment; each router on the way takes one.
    #[arg(long, value_name = "HOPS", default_value_t = 1,
          value_parser = parse::between::<u32>(0, MAX_TTL as u64))]
    pub ttl: u32,
    /// Offered rate in bits per second (SI: 200M, 1G), or `max` to send
    /// as fast as the sender can.
    #[arg(short = 'b', long, value_name = "RATE", default_value = "100M", value_parser = bitrate)]
    pub bitrate: Bitrate,
    /// UDP payload bytes per datagram (28..=65507).
    #[arg(short = 'l', long = "length", value_name = "SIZE", default_value = "1400",
          value_parser = parse::size_in(HEADER_LEN as u64, MAX_DATAGRAM_BYTES))]
    pub length: u64,
    /// How long a receiver waits for its first datagram after joining;
    /// one that gets nothing by then leaves and reads "never joined". The
    /// warm-up (-O) is raised to it, so that the joins are not counted.
    #[arg(long, value_name = "DURATION", default_value = "1s",
          value_parser = parse::duration_in(JOIN_WAIT_RANGE.0, JOIN_WAIT_RANGE.1))]
    pub join_wait: Duration,
    /// iperf 2 on the group too. `receivers`: iperf 2 receivers (`iperf -s
    /// -u -B GROUP`) count the client's datagrams beside the agents (iperf
    /// 2's header goes in front of ours: -l at least 52). `sender`: iperf 2
    /// sends (`iperf -c GROUP -u -T TTL`) and the client sends nothing; the
    /// agents count iperf 2's datagrams for -t after -O (then the join wait
    /// need not fit in the warm-up, and -b says the rate iperf 2 sends at,
    /// which agents with --max-rate check).
    #[arg(long, value_name = "ROLE")]
    pub with_iperf2: Option<super::WithIperf2>,
}

impl WorkloadArgs for MulticastOptions {
    const WORKLOAD: &'static dyn Workload = &Multicast;
    const ABOUT: &'static str =
        "One sender to a multicast group, many receivers: each receiver's loss, order, delay and join time";

    fn complete(&self, spec: &mut TestSpec, _: &Context) -> Result<(), SpecError> {
        let (address, port) = self.group;
        group::check(address, self.source).map_err(SpecError::Invalid)?;
        spec.message_bytes = self.length;
        let join_wait = self.join_wait.as_secs_f64();
        let iperf2_sends = self.with_iperf2 == Some(super::WithIperf2::Sender);
        if !iperf2_sends {
            spec.omit_seconds = spec.omit_seconds.max(join_wait);
        }
        spec.set_params(&MulticastParams {
            group: address,
            port,
            source: self.source,
            ttl: self.ttl,
            rate_bits_per_second: match self.bitrate {
                Bitrate::Max => None,
                Bitrate::BitsPerSecond(r) => Some(r),
            },
            join_wait_seconds: join_wait,
            with_iperf2: self.with_iperf2,
            sender_agent: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_an_address_with_an_optional_port() {
        assert_eq!(
            group_and_port("239.1.2.3").unwrap(),
            ("239.1.2.3".parse().unwrap(), 5001)
        );
        assert_eq!(group_and_port("239.1.2.3:6000").unwrap().1, 6000);
        assert_eq!(
            group_and_port("[ff15::9]:6000").unwrap(),
            ("ff15::9".parse().unwrap(), 6000)
        );
        assert!(group_and_port("10.1.1.1")
            .unwrap_err()
            .contains("not a multicast group"));
        assert!(group_and_port("239.1.2.3:0").unwrap_err().contains("not a port"));
        assert!(group_and_port("group.example")
            .unwrap_err()
            .contains("not an IP address"));
    }
}
