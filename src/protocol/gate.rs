//! Who may open a connection to the agent now: the one gate its control
//! port and its metrics server pass every new connection through before a
//! thread is spent on it (the iperf3 port may use it too). Per client
//! address it bounds the connections opened in the last minute
//! (`serve --max-connections-per-minute`) and those open at once
//! (`--max-connections-per-address`), so no single address can hold every
//! connection slot or keep them held by reconnecting. What one test may
//! ask for is [`super::limits`].
//!
//! "One address" is one IPv4 address, or one IPv6 network of
//! `--ipv6-prefix-per-address` bits (64 by default): a single host is handed
//! a whole /64 and may pick any address in it, so counting IPv6 addresses
//! one by one would let it take every slot.
//!
//! No I/O and no clock of its own: callers pass the address and the time.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Addresses tracked at most; past that, the oldest are forgotten (the
/// limit is against one noisy client, not a distributed flood).
const MAX_TRACKED_ADDRESSES: usize = 16_384;
const WINDOW: Duration = Duration::from_secs(60);

/// The default of `serve --max-connections-per-address`: a few clients
/// behind one address (a plan, a mesh coordinator, a queued client) fit;
/// one address cannot take the default 64 control connections.
pub const DEFAULT_PER_ADDRESS: usize = 8;

/// The default of `serve --ipv6-prefix-per-address`: the network one
/// IPv6 host is usually given.
pub const DEFAULT_IPV6_PREFIX: u8 = 64;

/// What the per-address limits count by: an IPv4 address, or the IPv6
/// network of `prefix` bits holding the client's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientKey {
    network: IpAddr,
    /// Some for an IPv6 network shorter than 128 bits.
    prefix: Option<u8>,
}

impl ClientKey {
    /// The key of `ip` when IPv6 clients are grouped by `ipv6_prefix` bits
    /// (1-128; an IPv4 address mapped into IPv6 is the IPv4 address).
    pub fn of(ip: IpAddr, ipv6_prefix: u8) -> ClientKey {
        match ip.to_canonical() {
            IpAddr::V6(v6) if ipv6_prefix < 128 => {
                let bits = u128::from(v6);
                let mask = u128::MAX.checked_shl(128 - u32::from(ipv6_prefix.max(1))).unwrap_or(0);
                ClientKey {
                    network: IpAddr::V6((bits & mask).into()),
                    prefix: Some(ipv6_prefix.max(1)),
                }
            }
            other => ClientKey {
                network: other,
                prefix: None,
            },
        }
    }
}

impl std::fmt::Display for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.prefix {
            Some(bits) => write!(f, "{}/{bits}", self.network),
            None => write!(f, "{}", self.network),
        }
    }
}

/// Connections per client address in the last minute.
#[derive(Debug)]
pub struct ConnectionRate {
    per_minute: u32,
    ipv6_prefix: u8,
    seen: HashMap<ClientKey, VecDeque<Instant>>,
}

impl ConnectionRate {
    /// `per_minute` 0 means no limit.
    pub fn new(per_minute: u32) -> ConnectionRate {
        ConnectionRate::grouped(per_minute, DEFAULT_IPV6_PREFIX)
    }

    /// [`Self::new`] with IPv6 clients grouped by `ipv6_prefix` bits.
    pub fn grouped(per_minute: u32, ipv6_prefix: u8) -> ConnectionRate {
        ConnectionRate {
            per_minute,
            ipv6_prefix,
            seen: HashMap::new(),
        }
    }

    /// Records a connection from `ip` at `now`; Err(seconds until the
    /// address may connect again) when it is over the limit.
    pub fn admit(&mut self, ip: IpAddr, now: Instant) -> Result<(), f64> {
        if self.per_minute == 0 {
            return Ok(());
        }
        if self.seen.len() >= MAX_TRACKED_ADDRESSES {
            self.seen
                .retain(|_, times| times.back().is_some_and(|t| now.duration_since(*t) < WINDOW));
            if self.seen.len() >= MAX_TRACKED_ADDRESSES {
                self.seen.clear();
            }
        }
        let times = self.seen.entry(ClientKey::of(ip, self.ipv6_prefix)).or_default();
        while times.front().is_some_and(|t| now.duration_since(*t) >= WINDOW) {
            times.pop_front();
        }
        if times.len() >= self.per_minute as usize {
            let oldest = *times.front().expect("over a non-zero limit");
            return Err((WINDOW - now.duration_since(oldest)).as_secs_f64());
        }
        times.push_back(now);
        Ok(())
    }

    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }
}

/// The gate: the rate per address and the connections each address holds.
#[derive(Debug)]
pub struct ConnectionGate {
    /// Connections one address may hold at once (0: no limit).
    per_address: usize,
    ipv6_prefix: u8,
    state: Mutex<GateState>,
}

#[derive(Debug)]
struct GateState {
    rate: ConnectionRate,
    open: HashMap<ClientKey, usize>,
}

/// Why a connection is refused at the gate, in words that name the option
/// to raise.
#[derive(Debug, Clone, PartialEq)]
pub enum GateRefusal {
    /// The address opened `per_minute` connections in the last minute.
    Rate {
        ip: ClientKey,
        per_minute: u32,
        wait_seconds: f64,
    },
    /// The address holds `per_address` connections open already.
    Open { ip: ClientKey, per_address: usize },
}

impl std::fmt::Display for GateRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GateRefusal::Rate {
                ip,
                per_minute,
                wait_seconds,
            } => write!(
                f,
                "too many connections from {ip}: this agent allows {per_minute} per minute per address \
                 (its --max-connections-per-minute); try again in {wait_seconds:.0} s"
            ),
            GateRefusal::Open { ip, per_address } => write!(
                f,
                "{ip} already holds {per_address} connections open: this agent allows {per_address} at once \
                 per address (its --max-connections-per-address); close one or try again later"
            ),
        }
    }
}

/// An admitted connection's place at the gate; given back when dropped,
/// however the connection ends.
#[derive(Debug)]
pub struct Pass {
    gate: Arc<ConnectionGate>,
    ip: ClientKey,
}

impl ConnectionGate {
    /// `per_minute` and `per_address` 0 mean no limit.
    pub fn new(per_minute: u32, per_address: usize) -> Arc<ConnectionGate> {
        ConnectionGate::grouped(per_minute, per_address, DEFAULT_IPV6_PREFIX)
    }

    /// [`Self::new`] with IPv6 clients grouped by `ipv6_prefix` bits (1-128).
    pub fn grouped(per_minute: u32, per_address: usize, ipv6_prefix: u8) -> Arc<ConnectionGate> {
        Arc::new(ConnectionGate {
            per_address,
            ipv6_prefix,
            state: Mutex::new(GateState {
                rate: ConnectionRate::grouped(per_minute, ipv6_prefix),
                open: HashMap::new(),
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        // A panic elsewhere must not close the gate for good.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits a new connection from `ip` at `now`, or says why not. A
    /// refused connection does not count against the address's rate.
    pub fn admit(self: &Arc<Self>, ip: IpAddr, now: Instant) -> Result<Pass, GateRefusal> {
        let ip = ClientKey::of(ip, self.ipv6_prefix);
        let mut state = self.lock();
        let open = state.open.get(&ip).copied().unwrap_or(0);
        if self.per_address > 0 && open >= self.per_address {
            return Err(GateRefusal::Open {
                ip,
                per_address: self.per_address,
            });
        }
        if let Err(wait_seconds) = state.rate.admit(ip.network, now) {
            return Err(GateRefusal::Rate {
                ip,
                per_minute: state.rate.per_minute(),
                wait_seconds,
            });
        }
        *state.open.entry(ip).or_insert(0) += 1;
        Ok(Pass {
            gate: Arc::clone(self),
            ip,
        })
    }

    /// Connections `ip` holds open now.
    pub fn open_from(&self, ip: IpAddr) -> usize {
        self.lock()
            .open
            .get(&ClientKey::of(ip, self.ipv6_prefix))
            .copied()
            .unwrap_or(0)
    }

    /// Connections one address may hold at once (0: no limit).
    pub fn per_address(&self) -> usize {
        self.per_address
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        let mut state = self.gate.lock();
        if let Some(open) = state.open.get_mut(&self.ip) {
            *open -= 1;
            if *open == 0 {
                state.open.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_per_minute_are_counted_per_address() {
        let mut rate = ConnectionRate::new(2);
        let now = Instant::now();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        assert!(rate.admit(a, now).is_ok());
        assert!(rate.admit(a, now + Duration::from_secs(1)).is_ok());
        let wait = rate.admit(a, now + Duration::from_secs(2)).unwrap_err();
        assert!((57.0..=58.0).contains(&wait), "{wait}");
        assert!(rate.admit(b, now + Duration::from_secs(2)).is_ok());
        assert!(rate.admit(a, now + Duration::from_secs(61)).is_ok());
        assert!(ConnectionRate::new(0).admit(a, now).is_ok());
    }

    #[test]
    fn one_address_holds_at_most_its_share_and_gets_it_back_on_close() {
        let gate = ConnectionGate::new(0, 2);
        let now = Instant::now();
        let noisy: IpAddr = "192.0.2.1".parse().unwrap();
        let honest: IpAddr = "192.0.2.2".parse().unwrap();
        let first = gate.admit(noisy, now).unwrap();
        let _second = gate.admit(noisy, now).unwrap();
        let refused = gate.admit(noisy, now).unwrap_err();
        assert_eq!(
            refused,
            GateRefusal::Open {
                ip: ClientKey::of(noisy, DEFAULT_IPV6_PREFIX),
                per_address: 2
            }
        );
        assert!(
            refused.to_string().contains("its --max-connections-per-address"),
            "{refused}"
        );
        assert!(gate.admit(honest, now).is_ok(), "the limit is per address");
        drop(first);
        assert_eq!(gate.open_from(noisy), 1);
        assert!(
            gate.admit(noisy, now).is_ok(),
            "a closed connection gives its place back"
        );
    }

    #[test]
    fn an_ipv4_client_on_a_dual_stack_port_is_one_address() {
        let gate = ConnectionGate::new(0, 1);
        let now = Instant::now();
        let _held = gate.admit("192.0.2.1".parse().unwrap(), now).unwrap();
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        assert!(matches!(gate.admit(mapped, now), Err(GateRefusal::Open { .. })));
    }

    #[test]
    fn ipv6_addresses_of_one_64_share_one_budget() {
        let gate = ConnectionGate::new(0, 8);
        let now = Instant::now();
        let mut held = Vec::new();
        for host in 1..=8 {
            let ip: IpAddr = format!("fd00:1:2:3::{host:x}").parse().unwrap();
            held.push(gate.admit(ip, now).unwrap());
        }
        let ninth: IpAddr = "fd00:1:2:3:ffff::9".parse().unwrap();
        let refused = gate.admit(ninth, now).unwrap_err();
        assert!(
            refused
                .to_string()
                .starts_with("fd00:1:2:3::/64 already holds 8 connections"),
            "{refused}"
        );
        let next_network: IpAddr = "fd00:1:2:4::1".parse().unwrap();
        assert!(gate.admit(next_network, now).is_ok(), "another /64 is another client");
        assert_eq!(gate.open_from("fd00:1:2:3::1234".parse().unwrap()), 8);
        // Counted one by one when asked (--ipv6-prefix-per-address 128).
        let each = ConnectionGate::grouped(0, 1, 128);
        let _one = each.admit("fd00::1".parse().unwrap(), now).unwrap();
        assert!(each.admit("fd00::2".parse().unwrap(), now).is_ok());
        let refused = each.admit("fd00::1".parse().unwrap(), now).unwrap_err();
        assert!(refused.to_string().starts_with("fd00::1 already holds 1"), "{refused}");
    }

    #[test]
    fn the_rate_per_minute_counts_a_64_as_one_address() {
        let mut rate = ConnectionRate::new(2);
        let now = Instant::now();
        assert!(rate.admit("fd00:9::1".parse().unwrap(), now).is_ok());
        assert!(rate.admit("fd00:9::2".parse().unwrap(), now).is_ok());
        assert!(rate.admit("fd00:9::3".parse().unwrap(), now).is_err());
        assert!(rate.admit("::ffff:127.0.0.1".parse().unwrap(), now).is_ok());
    }

    #[test]
    fn a_client_key_masks_ipv6_only() {
        let key = |ip: &str, bits| ClientKey::of(ip.parse().unwrap(), bits).to_string();
        assert_eq!(key("fd00:1:2:3:4:5:6:7", 64), "fd00:1:2:3::/64");
        assert_eq!(key("fd00:1:2:3:4:5:6:7", 48), "fd00:1:2::/48");
        assert_eq!(key("fd00:1:2:3:4:5:6:7", 128), "fd00:1:2:3:4:5:6:7");
        assert_eq!(key("fd00:1:2:3:4:5:6:7", 0), "8000::/1", "0 is taken as 1");
        assert_eq!(key("127.0.0.9", 64), "127.0.0.9");
        assert_eq!(key("::ffff:127.0.0.9", 64), "127.0.0.9");
    }

    #[test]
    fn the_rate_is_charged_only_for_admitted_connections() {
        let gate = ConnectionGate::new(2, 1);
        let now = Instant::now();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let held = gate.admit(ip, now).unwrap();
        // Refused for holding one: not counted as a connection of the minute.
        assert!(matches!(gate.admit(ip, now), Err(GateRefusal::Open { .. })));
        drop(held);
        assert!(gate.admit(ip, now).is_ok(), "the second of two per minute");
        let refused = gate.admit(ip, now).unwrap_err();
        assert!(
            matches!(refused, GateRefusal::Rate { per_minute: 2, .. }),
            "{refused:?}"
        );
        assert!(
            refused.to_string().contains("its --max-connections-per-minute"),
            "{refused}"
        );
    }
}
