//! The lab's router following an MTU change made inside the lab: when an
//! agent in a lab host sets the MTU of its interface toward a client (a
//! plan's `mtu` axis), the router's links on the path between the two go
//! to the same MTU, so the path carries what both ends now send instead of
//! dropping it. The path comes from the environment `lab exec` and the
//! lab's agents get ([`crate::lab_env`]); a process without it (an agent
//! outside any nicbench lab, or started without the lab's variables)
//! changes no router.
//!
//! A shaped router link's tbf is sized by the MTU (its bucket holds at
//! least four frames, and a frame larger than the bucket is dropped), so
//! it is set again for the new MTU with the same queue time beyond the
//! bucket. Restoring is the same call with the original MTU.

use crate::lab_env::{LabPath, RouterLink};

use super::state::LabState;
use super::sys;
use super::LabError;

/// One router interface to set: what [`follow_mtu`] does, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct RouterChange {
    pub router_netns: String,
    pub iface: String,
    pub mtu: u32,
    /// The tbf to set again for `mtu`: its rate and its queue time beyond
    /// the bucket; None when the link is not shaped.
    pub tbf: Option<(u64, Option<f64>)>,
}

impl RouterChange {
    /// "router nicbench-demo-r eth1: MTU 9000" (and its tbf when shaped).
    pub fn describe(&self) -> String {
        let tbf = match self.tbf {
            Some((bits, _)) => format!(", its tbf at {bits} bit/s resized for it"),
            None => String::new(),
        };
        format!("router {} {}: MTU {}{tbf}", self.router_netns, self.iface, self.mtu)
    }
}

/// The router interfaces on `path`: the one toward this host, then the one
/// toward the peer (each set even if it seems at `mtu` already: the
/// environment is a snapshot from when the process started).
pub fn router_changes(path: &LabPath, mtu: u32) -> Vec<RouterChange> {
    let change = |link: &RouterLink| RouterChange {
        router_netns: path.router_netns.clone(),
        iface: link.iface.clone(),
        mtu,
        tbf: link.rate_bits_per_second.map(|bits| (bits, link.queue_seconds)),
    };
    let mut changes = vec![change(&path.toward_me)];
    if path.toward_peer.iface != path.toward_me.iface {
        changes.push(change(&path.toward_peer));
    }
    changes
}

/// `changes` with each router link's shaping as the lab's state file has it
/// now. The environment is a snapshot from when the process started: a
/// `lab set --rate/--queue` (or a plan's `queue` axis) since then changed
/// the router, and setting the tbf again from the snapshot would undo it.
/// A link the state does not know keeps the snapshot's shaping.
pub fn with_current_shaping(mut changes: Vec<RouterChange>, state: &LabState) -> Vec<RouterChange> {
    let Some(router) = state.hosts.iter().find(|h| h.router) else {
        return changes;
    };
    for change in changes.iter_mut().filter(|c| c.router_netns == router.netns) {
        let end = state
            .links
            .iter()
            .flat_map(|l| l.ends.iter())
            .find(|e| e.host == router.name && e.ifname == change.iface);
        if let Some(end) = end {
            change.tbf = end.rate_bits_per_second.map(|bits| (bits, end.queue_seconds));
        }
    }
    changes
}

/// Sets the router's links on `path` to `mtu` (and their tbf for it, at
/// the shaping the lab's state file records now). Returns what was
/// changed, for the log.
pub fn follow_mtu(path: &LabPath, mtu: u32) -> Result<Vec<RouterChange>, LabError> {
    let mut changes = router_changes(path, mtu);
    match LabState::load(&path.lab) {
        Ok(Some(state)) => changes = with_current_shaping(changes, &state),
        Ok(None) => log::warn!(
            "lab '{}' has no state file: its router's shaping is taken from this process's environment",
            path.lab
        ),
        Err(e) => log::warn!(
            "lab '{}': {e}; its router's shaping is taken from this process's environment",
            path.lab
        ),
    }
    for c in &changes {
        sys::ip_in(
            &c.router_netns,
            &["link", "set", "dev", &c.iface, "mtu", &c.mtu.to_string()],
        )?;
        if let Some((bits, queue)) = c.tbf {
            sys::set_tbf(&c.router_netns, &c.iface, Some(bits), c.mtu, queue)?;
        }
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(iface: &str, rate: Option<u64>) -> RouterLink {
        RouterLink {
            iface: iface.into(),
            rate_bits_per_second: rate,
            queue_seconds: rate.map(|_| 0.016),
            mtu: 1500,
        }
    }

    #[test]
    fn both_router_links_of_the_path_follow_and_a_shaped_one_keeps_its_rate_and_queue() {
        let path = LabPath {
            lab: "demo".into(),
            router_netns: "nicbench-demo-r".into(),
            toward_me: link("eth1", None),
            toward_peer: link("eth0", Some(50_000_000)),
        };
        let changes = router_changes(&path, 9000);
        assert_eq!(
            changes,
            vec![
                RouterChange {
                    router_netns: "nicbench-demo-r".into(),
                    iface: "eth1".into(),
                    mtu: 9000,
                    tbf: None,
                },
                RouterChange {
                    router_netns: "nicbench-demo-r".into(),
                    iface: "eth0".into(),
                    mtu: 9000,
                    tbf: Some((50_000_000, Some(0.016))),
                },
            ]
        );
        assert_eq!(
            changes[1].describe(),
            "router nicbench-demo-r eth0: MTU 9000, its tbf at 50000000 bit/s resized for it"
        );
    }

    /// A router lab's state after `lab set --rate 20mbit --queue 200ms` on
    /// the router's end toward b, with `a` unshaped.
    fn state_after_a_set() -> LabState {
        use super::super::state::{HostState, LinkEnd, LinkState};
        let end = |host: &str, ifname: &str, rate: Option<u64>, queue: Option<f64>| LinkEnd {
            host: host.into(),
            ifname: ifname.into(),
            address: std::net::Ipv4Addr::LOCALHOST,
            rate_bits_per_second: rate,
            queue_seconds: queue,
            offloads: Default::default(),
            napi_threads: Vec::new(),
        };
        let link = |id, ends| LinkState { id, mtu: 1500, ends };
        LabState::new(
            "demo",
            super::super::Topology::ViaRouter,
            vec![
                HostState::new("demo", "a", false),
                HostState::new("demo", "b", false),
                HostState::new("demo", "r", true),
            ],
            vec![
                link(1, [end("a", "eth0", None, None), end("r", "eth1", None, None)]),
                link(
                    2,
                    [
                        end("b", "eth0", None, None),
                        end("r", "eth0", Some(20_000_000), Some(0.2)),
                    ],
                ),
            ],
            None,
        )
    }

    #[test]
    fn the_router_keeps_the_shaping_the_lab_has_now_not_the_snapshot() {
        // The agent's environment says 50 Mbit/s with a 16 ms queue toward
        // b; since then `lab set` made it 20 Mbit/s with 200 ms.
        let path = LabPath {
            lab: "demo".into(),
            router_netns: super::super::spec::netns_name("demo", "r"),
            toward_me: link("eth1", None),
            toward_peer: link("eth0", Some(50_000_000)),
        };
        let changes = with_current_shaping(router_changes(&path, 9000), &state_after_a_set());
        assert_eq!(changes[0].tbf, None);
        assert_eq!(changes[1].tbf, Some((20_000_000, Some(0.2))));
        // A router interface the state does not know keeps the snapshot.
        let unknown = LabPath {
            toward_peer: link("eth7", Some(50_000_000)),
            ..path
        };
        let changes = with_current_shaping(router_changes(&unknown, 9000), &state_after_a_set());
        assert_eq!(changes[1].tbf, Some((50_000_000, Some(0.016))));
    }

    #[test]
    fn a_tbf_set_again_for_a_larger_mtu_holds_a_frame_and_keeps_its_queue_time() {
        // What set_tbf is given for the change above: the bucket grows to
        // four 9000-byte frames, the queue beyond it stays 16 ms of the rate.
        let sizes = super::super::spec::tbf_sizes(50_000_000, 9000, Some(0.016));
        assert!(sizes.burst_bytes >= 4 * 9014, "{sizes:?}");
        assert_eq!(sizes.limit_bytes - sizes.burst_bytes, 100_000);
    }
}
