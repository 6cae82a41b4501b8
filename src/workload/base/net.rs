//! The network a test's data sockets live in: what the agent knows when it
//! binds and admits them ([`AgentNet`]: the control peer, the token, the
//! links, the addresses that proved themselves), what the client knows when
//! it connects them ([`ClientNet`]), and what a process was told for each
//! workload beyond its specs ([`Settings`]).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use super::address_proof;
use crate::model::{LinkPair, TestSpec};
use crate::protocol::TOKEN_LEN;

/// What a process was told for each workload beyond its specs, by workload
/// name: a serving agent's options of one workload (`files`' storage). Each
/// workload reads its own ([`Settings::of`]); nothing else looks inside.
#[derive(Clone, Default)]
pub struct Settings(BTreeMap<&'static str, Arc<dyn std::any::Any + Send + Sync>>);

impl Settings {
    /// Sets `workload`'s settings.
    pub fn set<T: std::any::Any + Send + Sync>(&mut self, workload: &'static str, value: T) {
        self.0.insert(workload, Arc::new(value));
    }

    /// `workload`'s settings, when they were set and are a `T`.
    pub fn of<T: std::any::Any>(&self, workload: &str) -> Option<&T> {
        self.0.get(workload).and_then(|v| v.downcast_ref())
    }
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// What the agent knows about the network when it prepares a test.
#[derive(Debug, Clone)]
pub struct AgentNet {
    /// Address the control connection arrived on; data sockets bind here.
    pub local_ip: IpAddr,
    /// The client; data connections from anywhere else are refused.
    pub peer_ip: IpAddr,
    pub token: [u8; TOKEN_LEN],
    /// What `serve` was told for each workload beyond its specs (the
    /// `files` workload's storage: `--scratch`, `--keep`,
    /// `--max-files-bytes`).
    pub settings: Settings,
    /// With `--links`: each stream's link, by stream id. Data sockets then
    /// listen on every address (TCP) or bind to the link's agent address
    /// (UDP), and a stream is admitted only from its link's client address
    /// to its link's agent address.
    pub routes: BTreeMap<u32, LinkPair>,
    /// Where this test may send and whom it admits: the peer, and the
    /// link client addresses once they proved themselves over TCP.
    pub proven: address_proof::ProvenAddresses,
}

impl AgentNet {
    /// A test's net before any link address proved itself: only `peer_ip`
    /// is admitted.
    pub fn new(
        local_ip: IpAddr,
        peer_ip: IpAddr,
        token: [u8; TOKEN_LEN],
        settings: Settings,
        routes: BTreeMap<u32, LinkPair>,
    ) -> AgentNet {
        AgentNet {
            local_ip,
            peer_ip,
            token,
            settings,
            routes,
            proven: address_proof::ProvenAddresses::peer_only(peer_ip),
        }
    }

    /// The address data sockets of stream `id` bind to.
    pub fn local_ip_for(&self, id: u32) -> IpAddr {
        self.routes.get(&id).map_or(self.local_ip, |l| l.agent)
    }

    /// True when `ip` may open data connections and be sent to: the
    /// control connection's peer, or a link client address that proved
    /// itself over TCP ([`address_proof`]).
    pub fn peer_allowed(&self, ip: IpAddr) -> bool {
        self.proven.admits(ip)
    }

    /// Checks that stream `id` arrived over its own link: from the link's
    /// client address to the link's agent address. Without links, only the
    /// peer is checked.
    pub fn check_stream(&self, id: u32, peer: IpAddr, local: Option<IpAddr>) -> Result<(), String> {
        let Some(link) = self.routes.get(&id) else {
            return match self.routes.is_empty() && peer.to_canonical() == self.peer_ip.to_canonical() {
                true => Ok(()),
                false if self.routes.is_empty() => Err(format!(
                    "only the control connection's peer {} may connect",
                    self.peer_ip
                )),
                false => Err(format!("stream id {id} belongs to no link")),
            };
        };
        if peer.to_canonical() != link.client.to_canonical() {
            return Err(format!(
                "stream {id} belongs to link {link} and must come from {}",
                link.client
            ));
        }
        if !self.proven.admits(peer) {
            return Err(format!(
                "stream {id}'s client address {peer} has not proved itself over TCP with the test's token"
            ));
        }
        if let Some(local) = local {
            if local.to_canonical() != link.agent.to_canonical() {
                return Err(format!(
                    "stream {id} belongs to link {link} and must connect to {}",
                    link.agent
                ));
            }
        }
        Ok(())
    }
}

/// What the client knows when it connects its data sockets.
#[derive(Debug, Clone)]
pub struct ClientNet {
    pub agent_ip: IpAddr,
    pub data_ports: Vec<u16>,
    pub token: [u8; TOKEN_LEN],
    /// Local address to bind data sockets to (`-B`).
    pub bind: Option<IpAddr>,
    /// With `--links`: each stream's link, by stream id.
    pub routes: BTreeMap<u32, LinkPair>,
    /// The agent runs on this kernel (its boot id is ours): loopback, or
    /// another network namespace of this host, such as a lab host.
    pub same_kernel: bool,
    /// What the command was told for each workload beyond the spec.
    pub settings: Settings,
    /// What the agent announced of TLS in its facts (the certificate it
    /// presents), for a test over TLS.
    pub agent_tls: Option<crate::model::TlsHostFacts>,
}

impl ClientNet {
    /// A client's view of an agent at `agent_ip` on this kernel, its data
    /// ports and the session token, with no links, no `-B` and nothing
    /// announced: what the transports' unit tests dial.
    #[cfg(test)]
    pub fn on_this_kernel(agent_ip: IpAddr, data_ports: Vec<u16>, token: [u8; TOKEN_LEN]) -> ClientNet {
        ClientNet {
            agent_ip,
            data_ports,
            token,
            bind: None,
            routes: BTreeMap::new(),
            same_kernel: true,
            settings: Default::default(),
            agent_tls: None,
        }
    }

    /// Where stream `id` binds (its link's client address, else `-B`) and
    /// which agent address it goes to.
    pub fn route(&self, id: u32) -> (Option<IpAddr>, IpAddr) {
        match self.routes.get(&id) {
            Some(link) => (Some(link.client), link.agent),
            None => (self.bind, self.agent_ip),
        }
    }
}

/// Each stream's link of `spec`, by stream id (empty without links).
pub fn routes_of(spec: &TestSpec) -> BTreeMap<u32, LinkPair> {
    spec.flows()
        .iter()
        .filter_map(|(id, _)| spec.link_of(*id).map(|l| (*id, spec.links[l])))
        .collect()
}
