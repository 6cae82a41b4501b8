//! Who may open a connection to the agent now: the one gate its control
//! port and its metrics server pass every new connection through before a
//! thread is spent on it (the iperf3 port may use it too). Per client
//! address it bounds the connections opened in the last minute
//! (`serve --max-connections-per-minute`) and those open at once
//! (`--max-connections-per-address`), so no single address can hold every
//! connection slot or keep them held by reconnecting. What one test may
//! ask for is [`super::limits`].
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

/// Connections per client address in the last minute.
#[derive(Debug)]
pub struct ConnectionRate {
    per_minute: u32,
    seen: HashMap<IpAddr, VecDeque<Instant>>,
}

impl ConnectionRate {
    /// `per_minute` 0 means no limit.
    pub fn new(per_minute: u32) -> ConnectionRate {
        ConnectionRate {
            per_minute,
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
        let times = self.seen.entry(ip.to_canonical()).or_default();
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
    state: Mutex<GateState>,
}

#[derive(Debug)]
struct GateState {
    rate: ConnectionRate,
    open: HashMap<IpAddr, usize>,
}

/// Why a connection is refused at the gate, in words that name the option
/// to raise.
#[derive(Debug, Clone, PartialEq)]
pub enum GateRefusal {
    /// The address opened `per_minute` connections in the last minute.
    Rate {
        ip: IpAddr,
        per_minute: u32,
        wait_seconds: f64,
    },
    /// The address holds `per_address` connections open already.
    Open { ip: IpAddr, per_address: usize },
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
    ip: IpAddr,
}

impl ConnectionGate {
    /// `per_minute` and `per_address` 0 mean no limit.
    pub fn new(per_minute: u32, per_address: usize) -> Arc<ConnectionGate> {
        Arc::new(ConnectionGate {
            per_address,
            state: Mutex::new(GateState {
                rate: ConnectionRate::new(per_minute),
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
        let ip = ip.to_canonical();
        let mut state = self.lock();
        let open = state.open.get(&ip).copied().unwrap_or(0);
        if self.per_address > 0 && open >= self.per_address {
            return Err(GateRefusal::Open {
                ip,
                per_address: self.per_address,
            });
        }
        if let Err(wait_seconds) = state.rate.admit(ip, now) {
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
        self.lock().open.get(&ip.to_canonical()).copied().unwrap_or(0)
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
                ip: noisy,
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
