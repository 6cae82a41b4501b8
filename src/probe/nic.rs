//! Facts about one network interface: which interface holds an address
//! (getifaddrs), and what sysfs and the ethtool ioctl say about it — driver,
//! firmware, bus, link, MTU, offloads, rings, coalescing, queues, qdisc,
//! PCIe link and NUMA node. Whatever a device does not have stays `None`.

use std::ffi::CStr;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};
use std::path::{Path, PathBuf};

use super::ethtool::{self, Ethtool};
use crate::model::{InterfaceAddress, LinkEnd, NicFacts, PcieLink, QdiscShaping, Queues};

/// Root of the per-interface sysfs directories.
const SYS_CLASS_NET: &str = "/sys/class/net";

/// Every interface name with its addresses, from getifaddrs(3).
pub fn interface_addresses() -> Vec<(String, IpAddr)> {
    interface_addresses_with_prefix()
        .into_iter()
        .map(|a| (a.interface, a.address))
        .collect()
}

/// Whether `peer` is reachable without a router: an address of this host,
/// loopback, or in the subnet of one of this host's addresses.
pub fn on_link(peer: IpAddr) -> bool {
    let peer = peer.to_canonical();
    peer.is_loopback()
        || interface_addresses_with_prefix()
            .iter()
            .any(|a| a.address == peer || (a.address.is_ipv4() == peer.is_ipv4() && a.same_subnet(peer)))
}

/// The prefix length of a netmask (its leading one bits).
fn prefix_of(mask: &[u8]) -> u8 {
    let mut bits = 0;
    for byte in mask {
        bits += byte.leading_ones();
        if *byte != 0xff {
            break;
        }
    }
    bits as u8
}

/// Every address of every interface with its prefix length, from getifaddrs(3).
pub fn interface_addresses_with_prefix() -> Vec<InterfaceAddress> {
    let mut list = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return list;
    }
    let mut cursor = head;
    while !cursor.is_null() {
        // SAFETY: cursor walks the list getifaddrs returned.
        let entry = unsafe { &*cursor };
        cursor = entry.ifa_next;
        if entry.ifa_addr.is_null() || entry.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(entry.ifa_name) }.to_string_lossy().into_owned();
        let netmask = entry.ifa_netmask;
        // SAFETY: ifa_addr (and ifa_netmask when set) point to a sockaddr
        // of the family ifa_addr names.
        let found = unsafe {
            match i32::from((*entry.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let a = &*(entry.ifa_addr as *const libc::sockaddr_in);
                    let prefix = if netmask.is_null() {
                        32
                    } else {
                        let m = &*(netmask as *const libc::sockaddr_in);
                        prefix_of(&m.sin_addr.s_addr.to_ne_bytes())
                    };
                    Some((IpAddr::V4(Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr))), prefix))
                }
                libc::AF_INET6 => {
                    let a = &*(entry.ifa_addr as *const libc::sockaddr_in6);
                    let prefix = if netmask.is_null() {
                        128
                    } else {
                        let m = &*(netmask as *const libc::sockaddr_in6);
                        prefix_of(&m.sin6_addr.s6_addr)
                    };
                    Some((IpAddr::V6(Ipv6Addr::from(a.sin6_addr.s6_addr)), prefix))
                }
                _ => None,
            }
        };
        if let Some((address, prefix_length)) = found {
            list.push(InterfaceAddress {
                interface: name,
                address,
                prefix_length,
            });
        }
    }
    // SAFETY: head came from getifaddrs.
    unsafe { libc::freeifaddrs(head) };
    list
}

/// What a link's end looks like on this host: the interface holding
/// `address`, its MTU, link speed and tbf rate (counters come later).
pub fn link_end(address: IpAddr) -> LinkEnd {
    let facts = facts_for_address(address);
    LinkEnd {
        address: address.to_string(),
        interface: facts.as_ref().map(|f| f.name.clone()),
        mtu_bytes: facts.as_ref().and_then(|f| f.mtu_bytes),
        link_speed_bits_per_second: facts.as_ref().and_then(|f| f.link_speed_bits_per_second),
        link_speed_nominal: facts.as_ref().is_some_and(speed_is_nominal),
        shaping_bits_per_second: facts.as_ref().and_then(|f| f.qdisc_rate_bits_per_second),
        nic: None,
    }
}

/// The interface holding `ip` (an IPv4-mapped IPv6 address counts as IPv4).
pub fn interface_with_address(ip: IpAddr) -> Option<String> {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    };
    interface_addresses()
        .into_iter()
        .find(|(_, a)| *a == ip)
        .map(|(name, _)| name)
}

/// The local address the kernel would use toward `peer`: a connected UDP
/// socket does the route lookup and sends nothing.
pub fn local_address_toward(peer: IpAddr) -> Option<IpAddr> {
    let bind: IpAddr = match peer {
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let socket = UdpSocket::bind((bind, 0)).ok()?;
    socket.connect((peer, 9)).ok()?;
    socket.local_addr().ok().map(|a| a.ip())
}

/// Names of every interface in this namespace, sorted.
pub fn interface_names() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(SYS_CLASS_NET)
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn read_trimmed(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

fn read_number<T: std::str::FromStr>(path: &Path) -> Option<T> {
    read_trimmed(path)?.parse().ok()
}

/// `8.0 GT/s PCIe` (or the older `8 GT/s`) to 8.0; `Unknown` to None.
pub fn parse_pcie_speed(text: &str) -> Option<f64> {
    let number = text.split_whitespace().next()?;
    text.contains("GT/s").then(|| number.parse().ok()).flatten()
}

fn pcie_link(device: &Path) -> Option<PcieLink> {
    let speed = |file: &str| read_trimmed(&device.join(file)).as_deref().and_then(parse_pcie_speed);
    let width = |file: &str| read_number::<u32>(&device.join(file)).filter(|&w| w > 0);
    let link = PcieLink {
        current_gigatransfers_per_second: speed("current_link_speed"),
        current_width_lanes: width("current_link_width"),
        max_gigatransfers_per_second: speed("max_link_speed"),
        max_width_lanes: width("max_link_width"),
    };
    (link != PcieLink::default()).then_some(link)
}

/// The PCI device behind an interface: its `device` link, or the parent
/// of it for virtio (device -> virtioN -> PCI function).
pub fn pci_device(interface_dir: &Path) -> Option<PathBuf> {
    let device = fs::canonicalize(interface_dir.join("device")).ok()?;
    if device.join("vendor").exists() && device.join("config").exists() {
        return Some(device);
    }
    let parent = device.parent()?.to_path_buf();
    parent.join("config").exists().then_some(parent)
}

/// Counts `rx-*` and `tx-*` under the queues/ directory.
fn sysfs_queues(interface_dir: &Path) -> Option<Queues> {
    let entries: Vec<String> = fs::read_dir(interface_dir.join("queues"))
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let count = |prefix: &str| entries.iter().filter(|n| n.starts_with(prefix)).count() as u32;
    Some(Queues {
        rx: count("rx-"),
        tx: count("tx-"),
        combined: None,
        max_combined: None,
        source: "sysfs".into(),
    })
}

/// Drivers whose link speed is a made-up constant, not a line rate: veth
/// says 10 Gbit/s and carries whatever the CPUs manage (4x that on one
/// host), tun says 10 Mbit/s. A rate limit (tbf) on them is real, though.
pub const NOMINAL_SPEED_DRIVERS: &[&str] = &["veth", "tun", "dummy"];

/// True when `nic`'s link speed is nominal (a virtual link): no line rate
/// can be derived from it.
pub fn speed_is_nominal(nic: &NicFacts) -> bool {
    nic.kind == "virtual"
        && nic
            .driver
            .as_deref()
            .is_some_and(|d| NOMINAL_SPEED_DRIVERS.contains(&d))
}

/// Everything known about `name`; `address` is the local address that
/// selected it, when one did.
pub fn nic_facts(name: &str, address: Option<IpAddr>) -> NicFacts {
    let dir = Path::new(SYS_CLASS_NET).join(name);
    let device = dir.join("device");
    let has_device = device.exists();
    let link_type: Option<u32> = read_number(&dir.join("type"));
    let kind = if link_type == Some(772) {
        "loopback"
    } else if has_device {
        "device"
    } else {
        "virtual"
    };
    let tool = Ethtool::open(name);
    let driver = tool.as_ref().and_then(|t| t.driver_info()).unwrap_or_default();
    let link = tool.as_ref().and_then(|t| t.link_settings()).unwrap_or_default();
    // sysfs answers speed/duplex for devices whose link is up; ethtool
    // covers the rest. -1 and "unknown" mean the same as no answer.
    let sysfs_speed = read_number::<i64>(&dir.join("speed")).filter(|&s| s > 0);
    let speed_mbit = link.speed_mbit.map(i64::from).or(sysfs_speed);
    let sysfs_duplex = read_trimmed(&dir.join("duplex")).filter(|d| d == "full" || d == "half");
    let pci = pci_device(&dir);
    let queues = tool
        .as_ref()
        .and_then(|t| t.channels())
        .filter(|q| q.rx + q.tx + q.combined.unwrap_or(0) > 0)
        .or_else(|| sysfs_queues(&dir));
    let qdisc = read_number::<i32>(&dir.join("ifindex")).and_then(super::qdisc::root_qdisc);
    NicFacts {
        name: name.to_string(),
        address: address.map(|a| a.to_string()),
        kind: kind.into(),
        driver: driver.driver,
        driver_version: driver.version,
        firmware_version: driver.firmware,
        bus_info: driver.bus_info,
        link_speed_bits_per_second: speed_mbit.map(|m| m as u64 * 1_000_000),
        duplex: link.duplex.or(sysfs_duplex),
        autonegotiation: if kind == "loopback" { None } else { link.autoneg },
        operstate: read_trimmed(&dir.join("operstate")),
        mtu_bytes: read_number(&dir.join("mtu")),
        offloads: tool.as_ref().and_then(|t| t.features()).map(|f| ethtool::offloads(&f)),
        rings: tool.as_ref().and_then(|t| t.rings()),
        coalescing: tool.as_ref().and_then(|t| t.coalescing()),
        queues,
        qdisc_rate_bits_per_second: qdisc.as_ref().and_then(|q| q.rate_bits_per_second),
        qdisc_shaping: qdisc
            .as_ref()
            .filter(|q| q.rate_bits_per_second.is_some())
            .map(|q| QdiscShaping {
                overhead_bytes: u32::from(q.overhead_bytes),
                mpu_bytes: u32::from(q.mpu_bytes),
                linklayer: if q.atm { "atm" } else { "ethernet" }.into(),
                burst_bytes: q.burst_bytes,
            }),
        qdisc: qdisc.map(|q| q.kind),
        tx_queue_length: read_number(&dir.join("tx_queue_len")),
        pcie: pci.as_deref().and_then(pcie_link),
        numa_node: pci
            .as_deref()
            .and_then(|p| read_number::<i64>(&p.join("numa_node")))
            .filter(|&n| n >= 0)
            .map(|n| n as u32),
    }
}

/// Facts of the interface holding `local`, None when no interface does
/// (an unspecified or foreign address).
pub fn facts_for_address(local: IpAddr) -> Option<NicFacts> {
    interface_with_address(local).map(|name| nic_facts(&name, Some(local)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netmasks_give_prefix_lengths() {
        assert_eq!(prefix_of(&[255, 255, 255, 0]), 24);
        assert_eq!(prefix_of(&[255, 255, 240, 0]), 20);
        assert_eq!(prefix_of(&[0, 0, 0, 0]), 0);
        assert_eq!(prefix_of(&[255; 16]), 128);
        let mut v6 = [0u8; 16];
        v6[..8].copy_from_slice(&[255; 8]);
        assert_eq!(prefix_of(&v6), 64);
    }

    #[test]
    fn a_veth_speed_is_nominal_a_device_speed_is_not() {
        let mut nic = NicFacts {
            kind: "virtual".into(),
            driver: Some("veth".into()),
            link_speed_bits_per_second: Some(10_000_000_000),
            ..NicFacts::default()
        };
        assert!(speed_is_nominal(&nic));
        nic.driver = Some("bonding".into());
        assert!(!speed_is_nominal(&nic), "a bond's speed is its members'");
        nic.kind = "device".into();
        nic.driver = Some("veth".into());
        assert!(!speed_is_nominal(&nic));
    }

    #[test]
    fn pcie_speeds_parse_with_and_without_the_suffix() {
        assert_eq!(parse_pcie_speed("8.0 GT/s PCIe"), Some(8.0));
        assert_eq!(parse_pcie_speed("2.5 GT/s"), Some(2.5));
        assert_eq!(parse_pcie_speed("Unknown"), None);
        assert_eq!(parse_pcie_speed(""), None);
    }

    #[test]
    fn loopback_is_found_by_its_address_and_reports_what_it_has() {
        let name = interface_with_address("127.0.0.1".parse().unwrap()).expect("lo holds 127.0.0.1");
        let facts = nic_facts(&name, Some("127.0.0.1".parse().unwrap()));
        assert_eq!(facts.kind, "loopback");
        assert_eq!(facts.link_speed_bits_per_second, None);
        assert!(facts.mtu_bytes.is_some_and(|m| m > 0));
        assert!(facts.offloads.is_some());
        assert_eq!(facts.pcie, None);
        // A mapped address finds the same interface.
        assert_eq!(
            interface_with_address("::ffff:127.0.0.1".parse().unwrap()),
            Some(name.clone())
        );
        assert_eq!(interface_with_address("192.0.2.254".parse().unwrap()), None);
    }

    #[test]
    fn the_route_to_loopback_leaves_from_loopback() {
        let local = local_address_toward("127.0.0.1".parse().unwrap()).unwrap();
        assert!(local.is_loopback());
    }

    #[test]
    fn an_unknown_interface_is_not_an_error() {
        let facts = nic_facts("nicbench-none0", None);
        assert_eq!(facts.kind, "virtual");
        assert_eq!(facts.driver, None);
        assert_eq!(facts.mtu_bytes, None);
    }
}
