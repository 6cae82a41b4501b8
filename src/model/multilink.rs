//! Several links at once (`--links`): which client address pairs with which
//! agent address ([`LinkPair`], part of the spec), what each side saw on a
//! link's interface ([`LinkEnd`], part of a side's report), and the
//! per-link figures, aggregate and scaling efficiency of a trial
//! ([`MultilinkSummary`]), plus the bond or team facts of either end
//! ([`BondFacts`]).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::counters::NicCounters;
use super::verdict::Verdict;

/// One link of a multi-link test: the client's address and the agent's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LinkPair {
    pub client: IpAddr,
    pub agent: IpAddr,
}

impl std::fmt::Display for LinkPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.client, self.agent)
    }
}

/// An address of an interface, as an agent lists its own for `--links`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceAddress {
    pub interface: String,
    pub address: IpAddr,
    pub prefix_length: u8,
}

impl InterfaceAddress {
    /// True when `other` lies in this address's subnet.
    pub fn same_subnet(&self, other: IpAddr) -> bool {
        same_subnet(self.address, other, self.prefix_length)
    }
}

/// True when `a` and `b` agree in their first `prefix` bits (and family).
pub fn same_subnet(a: IpAddr, b: IpAddr, prefix: u8) -> bool {
    match (a.to_canonical(), b.to_canonical()) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let mask = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(prefix.min(32)))
            };
            u32::from(a) & mask == u32::from(b) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let mask = if prefix == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(prefix.min(128)))
            };
            u128::from(a) & mask == u128::from(b) & mask
        }
        _ => false,
    }
}

/// What one side saw on the interface of one link over a trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkEnd {
    /// This side's address of the link.
    pub address: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu_bytes: Option<u32>,
    /// The interface's link speed (ethtool), when it reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_speed_bits_per_second: Option<u64>,
    /// True when that speed is a number the driver made up (veth's 10G).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub link_speed_nominal: bool,
    /// Rate of a tbf root qdisc on the interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shaping_bits_per_second: Option<u64>,
    /// The interface's counters over the trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<NicCounters>,
}

/// One link's figures in a trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkResult {
    /// 1-based, in the order of `spec.links`.
    pub link: u32,
    /// Streams of this link (ids as in `streams`).
    pub stream_ids: Vec<u32>,
    pub client: LinkEnd,
    pub agent: LinkEnd,
    /// Sum over the link's streams of what the senders sent and the
    /// receivers got, in bit/s.
    pub sender_bits_per_second: f64,
    pub receiver_bits_per_second: f64,
    /// The slower of both ends' shaping rates and real link speeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_bits_per_second: Option<u64>,
    /// Receiver rate as a share of `link_bits_per_second`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent_of_link: Option<f64>,
    /// With `--scaling`: this link's receiver rate when it ran alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alone_receiver_bits_per_second: Option<f64>,
}

/// The links of a trial: each link, the aggregate, and how it scales.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MultilinkSummary {
    pub links: Vec<LinkResult>,
    /// All links' receivers together, in bit/s.
    pub aggregate_receiver_bits_per_second: f64,
    pub aggregate_sender_bits_per_second: f64,
    /// The best single link: alone (`--scaling`) or in this trial.
    pub best_single_link_bits_per_second: f64,
    /// `alone` (each link measured alone in the same run, `--scaling`) or
    /// `together` (the best link of this trial).
    pub best_single_link_source: String,
    /// aggregate / (links x best single link), in percent.
    pub scaling_efficiency_percent: f64,
    /// What limited the aggregate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Bond or team devices on either end whose slaves carry a link.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bonds: Vec<BondFacts>,
}

/// A bonding or team device, from /proc/net/bonding and sysfs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BondFacts {
    /// `client` or `agent`.
    pub host: String,
    pub name: String,
    /// e.g. `IEEE 802.3ad Dynamic link aggregation`, `load balancing (round-robin)`.
    pub mode: String,
    /// e.g. `layer2 (0)`, `layer3+4 (1)`; absent for modes without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transmit_hash_policy: Option<String>,
    pub slaves: Vec<BondSlave>,
}

/// One slave of a bond.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BondSlave {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mii_status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_bits_per_second: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets_compare_by_prefix() {
        let a: IpAddr = "10.200.1.1".parse().unwrap();
        assert!(same_subnet(a, "10.200.1.2".parse().unwrap(), 24));
        assert!(!same_subnet(a, "10.200.2.2".parse().unwrap(), 24));
        assert!(same_subnet(a, "10.200.2.2".parse().unwrap(), 16));
        assert!(same_subnet(a, "::ffff:10.200.1.9".parse().unwrap(), 24));
        assert!(!same_subnet(a, "fd00::1".parse().unwrap(), 0));
        assert!(same_subnet(
            "fd00:1::1".parse().unwrap(),
            "fd00:1::2".parse().unwrap(),
            64
        ));
    }
}
