//! Fair slots: the connections one listening port holds (the control port,
//! `/metrics`, the iperf3 port), shared so that no handful of addresses or
//! networks can take them all. Each port has a table of `capacity` places;
//! a connection holds one from its accept until it closes. Besides the
//! per-address share of [`super::gate`] (one client address), two rules:
//!
//! - **per network**: the connections that have not finished their
//!   handshake (a control connection before its request, an HTTP request
//!   before its head, an iperf3 connection before its cookie) from one
//!   IPv4 /24 or IPv6 /56 hold at most a quarter of the places
//!   ([`per_prefix_of`]); a settled connection (a test running or waiting
//!   in line) counts only against the total;
//! - **an idle connection makes room**: when the table (or a network's
//!   quarter) is full and a connection arrives from a network (or an
//!   address) that holds at least two fewer, the oldest idle connection of
//!   the most represented network (then of its most represented address)
//!   is closed to make room for it. A client that holds one connection is
//!   never the one closed, and a settled connection never is.
//!
//! No I/O and no clock: callers pass the address and how to close the
//! connection; the table calls that when it drops it.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use super::gate::ClientKey;

/// The IPv4 network one operator usually holds: connections from one /24
/// share a quarter of a port's places before their handshake.
pub const IPV4_PREFIX: u8 = 24;
/// The IPv6 network of one site (RFC 6177's /56).
pub const IPV6_PREFIX: u8 = 56;

/// The places one network may hold with connections before their
/// handshake: a quarter of the port's `capacity` (at least one).
pub fn per_prefix_of(capacity: usize) -> usize {
    (capacity / 4).max(1)
}

/// The network an address is counted in: its /24 (IPv4, an IPv4 address
/// mapped into IPv6 included) or /56 (IPv6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Prefix {
    network: IpAddr,
    bits: u8,
}

impl Prefix {
    pub fn of(ip: IpAddr) -> Prefix {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Prefix {
                network: IpAddr::V4((u32::from(v4) & (u32::MAX << (32 - IPV4_PREFIX))).into()),
                bits: IPV4_PREFIX,
            },
            IpAddr::V6(v6) => Prefix {
                network: IpAddr::V6((u128::from(v6) & (u128::MAX << (128 - IPV6_PREFIX))).into()),
                bits: IPV6_PREFIX,
            },
        }
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.bits)
    }
}

/// Closes a connection the table dropped to make room (from the admitting
/// thread: it must not block).
pub type Close = Box<dyn FnOnce() + Send>;

/// A port's table of places.
pub struct SlotTable {
    /// The port, in messages: "control port", "metrics server".
    port: &'static str,
    /// The option that sets `capacity`, in messages.
    capacity_option: &'static str,
    capacity: usize,
    per_prefix: usize,
    /// Connections one address may hold here (0: none beyond the gate's).
    per_address: usize,
    ipv6_address_bits: u8,
    state: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    next_id: u64,
    /// By id: the oldest first.
    entries: BTreeMap<u64, Entry>,
    dropped: u64,
}

struct Entry {
    address: ClientKey,
    prefix: Prefix,
    settled: bool,
    close: Option<Close>,
}

/// Why a connection found no place, naming the cap it hit.
#[derive(Debug, Clone, PartialEq)]
pub enum SlotRefusal {
    /// The address holds `per_address` places on this port.
    Address {
        port: &'static str,
        address: String,
        per_address: usize,
    },
    /// The network holds its quarter with connections before their
    /// handshake, none of them from an address with two more than this one.
    Prefix {
        port: &'static str,
        prefix: Prefix,
        per_prefix: usize,
        capacity: usize,
        option: &'static str,
    },
    /// Every place is taken and no idle connection of a network with two
    /// more than this one's can make room.
    Full {
        port: &'static str,
        capacity: usize,
        option: &'static str,
    },
}

impl std::fmt::Display for SlotRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SlotRefusal::Address {
                port,
                address,
                per_address,
            } => write!(
                f,
                "{address} already holds {per_address} connections on this agent's {port}, the most one address \
                 may hold there; close one or try again later"
            ),
            SlotRefusal::Prefix {
                port,
                prefix,
                per_prefix,
                capacity,
                option,
            } => write!(
                f,
                "the network {prefix} already holds {per_prefix} connections that have not finished their \
                 handshake on this agent's {port} (the per-network cap: a quarter of its {capacity}, its {option}); \
                 finish or close one, or try again later"
            ),
            SlotRefusal::Full { port, capacity, option } => write!(
                f,
                "this agent already has {capacity} connections open on its {port} (its {option}) and none idle \
                 from a network holding more than yours; try again later"
            ),
        }
    }
}

/// A connection's place; given back when dropped. [`Slot::settle`] marks
/// the handshake done: the place is then never taken to make room.
pub struct Slot {
    table: Arc<SlotTable>,
    id: u64,
}

/// A connection closed to make room, for the log.
#[derive(Debug, Clone, PartialEq)]
pub struct Dropped {
    pub address: String,
    /// Why it was chosen, in words.
    pub why: String,
}

impl SlotTable {
    /// A table of `capacity` places (at least one) for `port`, whose size
    /// the operator sets with `capacity_option`; `per_address` 0 leaves the
    /// per-address share to the gate; IPv6 clients are one address per
    /// network of `ipv6_address_bits`.
    pub fn new(
        port: &'static str,
        capacity_option: &'static str,
        capacity: usize,
        per_address: usize,
        ipv6_address_bits: u8,
    ) -> Arc<SlotTable> {
        let capacity = capacity.max(1);
        Arc::new(SlotTable {
            port,
            capacity_option,
            capacity,
            per_prefix: per_prefix_of(capacity),
            per_address,
            ipv6_address_bits,
            state: Mutex::new(Table::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // A panic elsewhere must not close the port for good.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for a connection from `ip`, closed by `close` if it is ever
    /// dropped to make room; with the connection it closed for it, if any.
    pub fn admit(self: &Arc<Self>, ip: IpAddr, close: Close) -> Result<(Slot, Option<Dropped>), SlotRefusal> {
        let address = ClientKey::of(ip, self.ipv6_address_bits);
        let prefix = Prefix::of(ip);
        let mut table = self.lock();
        let from_address = table.entries.values().filter(|e| e.address == address).count();
        if self.per_address > 0 && from_address >= self.per_address {
            return Err(SlotRefusal::Address {
                port: self.port,
                address: address.to_string(),
                per_address: self.per_address,
            });
        }
        let mut dropped = None;
        let idle_in_prefix = table
            .entries
            .values()
            .filter(|e| e.prefix == prefix && !e.settled)
            .count();
        if idle_in_prefix >= self.per_prefix {
            // Room inside the network: an address with two more than this one's.
            let victim = table.victim_in(prefix, from_address).ok_or(SlotRefusal::Prefix {
                port: self.port,
                prefix,
                per_prefix: self.per_prefix,
                capacity: self.capacity,
                option: self.capacity_option,
            })?;
            dropped = Some(table.drop_entry(
                victim,
                format!(
                    "idle before its handshake, closed for a connection from {address}: its network {prefix} \
                     holds its quarter of the {port}'s places and its address held the most",
                    port = self.port
                ),
            ));
        }
        if table.entries.len() >= self.capacity {
            let from_prefix = table.entries.values().filter(|e| e.prefix == prefix).count();
            let victim = table.victim_anywhere(from_prefix).ok_or(SlotRefusal::Full {
                port: self.port,
                capacity: self.capacity,
                option: self.capacity_option,
            })?;
            dropped = Some(table.drop_entry(
                victim,
                format!(
                    "idle before its handshake, closed for a connection from {address}: the {port}'s {capacity} \
                     places were taken and its network held the most",
                    port = self.port,
                    capacity = self.capacity
                ),
            ));
        }
        table.next_id += 1;
        let id = table.next_id;
        table.entries.insert(
            id,
            Entry {
                address,
                prefix,
                settled: false,
                close: Some(close),
            },
        );
        Ok((
            Slot {
                table: Arc::clone(self),
                id,
            },
            dropped,
        ))
    }

    /// Connections holding a place now.
    pub fn held(&self) -> usize {
        self.lock().entries.len()
    }

    /// Connections closed to make room since the table was made.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Places one network may hold before the handshake.
    pub fn per_prefix(&self) -> usize {
        self.per_prefix
    }
}

impl Table {
    /// Places held per key, counted over every entry.
    fn counts<K: std::hash::Hash + Eq>(&self, key: impl Fn(&Entry) -> K) -> HashMap<K, usize> {
        let mut counts = HashMap::new();
        for entry in self.entries.values() {
            *counts.entry(key(entry)).or_insert(0) += 1;
        }
        counts
    }

    /// The oldest idle entry of `prefix` whose address holds the most
    /// places there, when that is at least `newcomer + 2`.
    fn victim_in(&self, prefix: Prefix, newcomer: usize) -> Option<u64> {
        let per_address = self.counts(|e| e.address);
        self.entries
            .iter()
            .filter(|(_, e)| e.prefix == prefix && !e.settled)
            .map(|(id, e)| (per_address[&e.address], std::cmp::Reverse(*id)))
            .filter(|(held, _)| *held >= newcomer + 2)
            .max()
            .map(|(_, std::cmp::Reverse(id))| id)
    }

    /// The oldest idle entry of the network holding the most places (then
    /// of its address holding the most), when that network holds at least
    /// `newcomer + 2`.
    fn victim_anywhere(&self, newcomer: usize) -> Option<u64> {
        let per_prefix = self.counts(|e| e.prefix);
        let per_address = self.counts(|e| e.address);
        self.entries
            .iter()
            .filter(|(_, e)| !e.settled)
            .map(|(id, e)| (per_prefix[&e.prefix], per_address[&e.address], std::cmp::Reverse(*id)))
            .filter(|(held, _, _)| *held >= newcomer + 2)
            .max()
            .map(|(_, _, std::cmp::Reverse(id))| id)
    }

    /// Removes entry `id` and closes its connection.
    fn drop_entry(&mut self, id: u64, why: String) -> Dropped {
        let mut entry = self.entries.remove(&id).expect("a victim is an entry");
        self.dropped += 1;
        if let Some(close) = entry.close.take() {
            close();
        }
        Dropped {
            address: entry.address.to_string(),
            why,
        }
    }
}

impl Slot {
    /// The connection finished its handshake: it counts only against the
    /// total from now on, and is never closed to make room.
    pub fn settle(&self) {
        if let Some(entry) = self.table.lock().entries.get_mut(&self.id) {
            entry.settled = true;
            entry.close = None;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.table.lock().entries.remove(&self.id);
    }
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Slot({} on the {})", self.id, self.table.port)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// A close that counts into `closed`.
    fn counting(closed: &Arc<AtomicUsize>) -> Close {
        let closed = Arc::clone(closed);
        Box::new(move || {
            closed.fetch_add(1, Ordering::Relaxed);
        })
    }

    fn table(capacity: usize) -> Arc<SlotTable> {
        SlotTable::new("control port", "--max-connections", capacity, 0, 64)
    }

    #[test]
    fn prefixes_are_a_24_and_a_56() {
        assert_eq!(Prefix::of(ip("127.0.0.9")).to_string(), "127.0.0.0/24");
        assert_eq!(Prefix::of(ip("::ffff:10.1.2.3")).to_string(), "10.1.2.0/24");
        assert_eq!(Prefix::of(ip("fd00:1:2:3:4::1")).to_string(), "fd00:1:2::/56");
        assert_eq!(Prefix::of(ip("fd00:1:2:ff:4::1")), Prefix::of(ip("fd00:1:2::1")));
        assert_eq!(per_prefix_of(64), 16);
        assert_eq!(per_prefix_of(2), 1);
    }

    /// Issue 67, item 3: 8 silent sockets from each of eight addresses of
    /// one /24 hold its quarter, not every place; a ninth address of the
    /// same /24 gets in by closing an idle one of an address holding more.
    #[test]
    fn eight_addresses_of_one_network_hold_a_quarter_and_a_ninth_gets_in() {
        let table = table(64);
        let closed = Arc::new(AtomicUsize::new(0));
        let mut held = Vec::new();
        let mut refused = 0;
        for host in 2..=9 {
            for _ in 0..8 {
                match table.admit(ip(&format!("127.0.0.{host}")), counting(&closed)) {
                    Ok((slot, _)) => held.push(slot),
                    Err(refusal) => {
                        refused += 1;
                        assert!(
                            matches!(refusal, SlotRefusal::Prefix { per_prefix: 16, .. }),
                            "{refusal:?}"
                        );
                    }
                }
            }
        }
        assert!(refused > 0);
        assert_eq!(table.held(), 16, "the network's quarter, no more");
        let (honest, dropped) = table
            .admit(ip("127.0.0.10"), counting(&closed))
            .expect("a ninth address");
        let dropped = dropped.expect("an idle connection made room");
        assert!(
            dropped.why.contains("127.0.0.0/24 holds its quarter"),
            "{}",
            dropped.why
        );
        honest.settle();
        assert_eq!(table.held(), 16);
        assert_eq!(closed.load(Ordering::Relaxed) as u64, table.dropped());
        // A settled connection no longer counts against the network's quarter.
        assert!(table.admit(ip("127.0.0.10"), counting(&closed)).is_ok());
    }

    /// The "eight prefixes": eight networks fill every place; a
    /// ninth network gets one, taken from an idle connection of the most
    /// represented network.
    #[test]
    fn eight_networks_fill_the_table_and_a_ninth_gets_in() {
        let table = table(64);
        let closed = Arc::new(AtomicUsize::new(0));
        let held: Vec<Slot> = (1..=8)
            .flat_map(|net| (0..8).map(move |_| net))
            .map(|net| table.admit(ip(&format!("127.{net}.0.2")), counting(&closed)).unwrap().0)
            .collect();
        assert_eq!(table.held(), 64);
        let (_ninth, dropped) = table.admit(ip("127.9.0.2"), counting(&closed)).unwrap();
        assert_eq!(
            dropped.unwrap().address,
            "127.1.0.2",
            "the oldest idle of a most represented network"
        );
        assert_eq!(closed.load(Ordering::Relaxed), 1);
        drop(held);
        assert_eq!(table.held(), 1);
    }

    #[test]
    fn nobody_holding_one_connection_and_nothing_settled_is_closed() {
        let table = table(4);
        let closed = Arc::new(AtomicUsize::new(0));
        let alone: Vec<Slot> = (1..=4)
            .map(|net| table.admit(ip(&format!("10.{net}.0.1")), counting(&closed)).unwrap().0)
            .collect();
        let refused = table.admit(ip("10.9.0.1"), counting(&closed)).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("already has 4 connections open on its control port (its --max-connections)"),
            "{refused}"
        );
        drop(alone);
        // A network holding all four, settled: nothing to take.
        let settled: Vec<Slot> = (0..4)
            .map(|_| {
                let (slot, _) = table.admit(ip("10.1.0.1"), counting(&closed)).unwrap();
                slot.settle();
                slot
            })
            .collect();
        assert!(matches!(
            table.admit(ip("10.2.0.1"), counting(&closed)),
            Err(SlotRefusal::Full { .. })
        ));
        assert_eq!(closed.load(Ordering::Relaxed), 0);
        drop(settled);
    }

    #[test]
    fn the_per_address_cap_names_the_address() {
        let table = SlotTable::new("metrics server", "--max-connections", 64, 2, 64);
        let closed = Arc::new(AtomicUsize::new(0));
        let _a = table.admit(ip("fd00::1"), counting(&closed)).unwrap();
        let _b = table.admit(ip("fd00::2"), counting(&closed)).unwrap();
        let refused = table.admit(ip("fd00::3"), counting(&closed)).unwrap_err();
        assert!(
            refused
                .to_string()
                .starts_with("fd00::/64 already holds 2 connections on this agent's metrics server"),
            "{refused}"
        );
    }
}
