//! What a lab's switch saw of a group test (`GroupRun::switch`): the
//! bridge's multicast database (mdb) for the test's group, read while the
//! test ran, and the change of the bridge's IGMP/MLD counters over the
//! test, the bridge's own and each port's. A port is named as the kernel
//! names it and by the lab host behind it.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

/// The lab's switch during a group test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwitchRecord {
    /// The lab the test ran in.
    pub lab: String,
    /// The switch's network namespace.
    pub namespace: String,
    /// The bridge joining the lab's hosts.
    pub bridge: String,
    /// The group whose mdb entries `mdb` lists (the test's).
    pub group: IpAddr,
    /// The bridge's mdb entries for the group, read after the warm-up
    /// (the receivers had joined): one per member port, the ports the
    /// bridge forwards the group to.
    pub mdb: Vec<MdbMember>,
    /// How the bridge's IGMP/MLD counters changed from before the test to
    /// after it (the receivers' leaves included).
    pub counters: SwitchCounters,
}

/// A port the bridge forwards the group to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MdbMember {
    /// The bridge port (`eth1`), or the bridge itself when the switch's
    /// own host joined.
    pub port: String,
    /// The lab host behind the port; null for a port no lab host is on.
    pub host: Option<String>,
    /// `temp` (learned from a report, forgotten without one) or `permanent`
    /// (added by hand).
    pub state: String,
    /// The one source taken, for a source-specific entry (IGMPv3/MLDv2
    /// snooping); null for any source.
    pub source: Option<IpAddr>,
}

/// The change of the bridge's multicast counters over the test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwitchCounters {
    /// The bridge's own: what it, as a host, received and sent (its
    /// queries as the querier are counted on each port they leave by).
    pub bridge: McastCounters,
    /// One per bridge port, by port name.
    pub ports: Vec<PortCounters>,
}

/// One bridge port's counters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortCounters {
    pub port: String,
    /// The lab host behind the port and its address on the switch's
    /// subnet; null for a port no lab host is on.
    pub host: Option<String>,
    pub address: Option<IpAddr>,
    #[serde(flatten)]
    pub counters: McastCounters,
}

/// IGMP and MLD messages as the kernel's bridge counts them with
/// `mcast_stats_enabled 1`, every protocol version added up. On a port,
/// `received` came in from the host behind it, `sent` went out toward it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct McastCounters {
    pub igmp_queries: Both,
    pub igmp_reports: Both,
    pub igmp_leaves: Both,
    pub igmp_parse_errors: u64,
    pub mld_queries: Both,
    pub mld_reports: Both,
    pub mld_leaves: Both,
    pub mld_parse_errors: u64,
}

/// A count of messages both ways.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Both {
    pub received: u64,
    pub sent: u64,
}

impl Both {
    fn since(self, earlier: Both) -> Option<Both> {
        Some(Both {
            received: self.received.checked_sub(earlier.received)?,
            sent: self.sent.checked_sub(earlier.sent)?,
        })
    }
}

impl McastCounters {
    /// The change from `earlier` to these; None when a counter went back
    /// (the bridge or the port was made anew in between).
    pub fn since(&self, earlier: &McastCounters) -> Option<McastCounters> {
        Some(McastCounters {
            igmp_queries: self.igmp_queries.since(earlier.igmp_queries)?,
            igmp_reports: self.igmp_reports.since(earlier.igmp_reports)?,
            igmp_leaves: self.igmp_leaves.since(earlier.igmp_leaves)?,
            igmp_parse_errors: self.igmp_parse_errors.checked_sub(earlier.igmp_parse_errors)?,
            mld_queries: self.mld_queries.since(earlier.mld_queries)?,
            mld_reports: self.mld_reports.since(earlier.mld_reports)?,
            mld_leaves: self.mld_leaves.since(earlier.mld_leaves)?,
            mld_parse_errors: self.mld_parse_errors.checked_sub(earlier.mld_parse_errors)?,
        })
    }

    /// Queries, reports and leaves of the group's protocol: IGMP for an
    /// IPv4 group, MLD for an IPv6 one.
    pub fn of_family(&self, group: IpAddr) -> (Both, Both, Both) {
        match group {
            IpAddr::V4(_) => (self.igmp_queries, self.igmp_reports, self.igmp_leaves),
            IpAddr::V6(_) => (self.mld_queries, self.mld_reports, self.mld_leaves),
        }
    }
}

impl SwitchRecord {
    /// The mdb's entry for `port`, if the bridge forwards the group there.
    pub fn member(&self, port: &str) -> Option<&MdbMember> {
        self.mdb.iter().find(|m| m.port == port)
    }

    /// The port whose lab host has the address `address`.
    pub fn port_toward(&self, address: IpAddr) -> Option<&PortCounters> {
        let address = match address {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
            v4 => v4,
        };
        self.counters.ports.iter().find(|p| p.address == Some(address))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(reports_received: u64, leaves_sent: u64) -> McastCounters {
        McastCounters {
            igmp_reports: Both {
                received: reports_received,
                sent: 1,
            },
            mld_leaves: Both {
                received: 0,
                sent: leaves_sent,
            },
            ..McastCounters::default()
        }
    }

    #[test]
    fn the_change_is_each_counter_less_its_earlier_value_and_none_when_one_went_back() {
        let change = counters(7, 3).since(&counters(2, 1)).unwrap();
        assert_eq!(change.igmp_reports, Both { received: 5, sent: 0 });
        assert_eq!(change.mld_leaves, Both { received: 0, sent: 2 });
        assert_eq!(
            counters(1, 3).since(&counters(2, 1)),
            None,
            "a report counter went back"
        );
        assert_eq!(counters(2, 0).since(&counters(2, 1)), None, "a leave counter went back");
    }

    #[test]
    fn an_ipv4_group_reads_igmp_and_an_ipv6_group_mld() {
        let c = counters(7, 3);
        assert_eq!(c.of_family("239.1.2.3".parse().unwrap()).1.received, 7);
        assert_eq!(c.of_family("ff0e::1".parse().unwrap()).2.sent, 3);
    }
}
