//! A multicast group as a test names it, and the socket calls around it:
//! which addresses may be a test's group (and which source an SSM group
//! needs), joining and leaving on one interface, and the sender's socket
//! (TTL or hop limit, the interface it leaves by, its own copy looped back
//! so receivers on the sending host get it too).
//!
//! Every receiving socket turns off IP_MULTICAST_ALL: without it, Linux
//! hands a socket bound to a group's port every group some other socket of
//! the host joined, so two tests on one host would count each other's
//! datagrams.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use socket2::{Domain, InterfaceIndexOrAddress, Protocol, Socket, Type};

use crate::workload::base::WorkloadError;

/// Where a group test sends: a group address and port, and for
/// source-specific multicast the one source receivers take it from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group {
    pub address: IpAddr,
    pub port: u16,
    pub source: Option<IpAddr>,
}

/// The port a group test uses when none is given: iperf 2's, so that its
/// receivers (`iperf -s -u -B GROUP`) and senders meet ours unasked.
pub const DEFAULT_PORT: u16 = 5001;

/// Whether `address` is a source-specific group (232.0.0.0/8, ff3x::/32):
/// receivers must name the source they take it from.
pub fn is_ssm(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => v4.octets()[0] == 232,
        IpAddr::V6(v6) => v6.segments()[0] & 0xfff0 == 0xff30,
    }
}

/// Checks that `address` may be a test's group, and that `source` is there
/// exactly when the group is source-specific; the error says what to pass.
/// Refused: anything not multicast, IPv4's local network control block
/// (224.0.0.0/24: routing protocols, IGMP, mDNS) and IPv6's reserved and
/// all-nodes/all-routers groups, which a test must never flood.
pub fn check(address: IpAddr, source: Option<IpAddr>) -> Result<(), String> {
    if !address.is_multicast() {
        return Err(format!(
            "{address} is not a multicast group; pick one of 239.0.0.0/8 (IPv4, organization-local), \
             232.0.0.0/8 with --source (IPv4 SSM) or ff3e::/16-style IPv6 groups"
        ));
    }
    match address {
        IpAddr::V4(v4) if v4.octets()[..3] == [224, 0, 0] => {
            return Err(format!(
                "{address} is in 224.0.0.0/24, the local network control block (routing protocols, IGMP, \
                 mDNS); a test must not flood it: use a group in 239.0.0.0/8"
            ))
        }
        IpAddr::V6(v6) if v6.segments()[0] & 0x000f == 0 || reserved_v6(v6) => {
            return Err(format!(
                "{address} is a reserved or all-nodes/all-routers IPv6 group; use e.g. ff3e::1234 (SSM) \
                 or ff15::1234 (site-local)"
            ))
        }
        _ => {}
    }
    match (is_ssm(address), source) {
        (true, None) => Err(format!(
            "{address} is a source-specific group (232.0.0.0/8, ff3x::): receivers take it from one \
             source only; pass --source with the sender's address, or use a group in 239.0.0.0/8"
        )),
        (false, Some(s)) => Err(format!(
            "--source {s} applies to source-specific groups only (232.0.0.0/8, ff3x::); {address} is an \
             any-source group: drop --source, or use a group in 232.0.0.0/8"
        )),
        (true, Some(s)) if s.is_ipv4() != address.is_ipv4() || s.is_multicast() || s.is_unspecified() => Err(format!(
            "--source {s} must be a unicast address of the group's family ({address})"
        )),
        _ => Ok(()),
    }
}

/// ff0x::1 and ff0x::2 (all nodes, all routers) in any scope.
fn reserved_v6(v6: Ipv6Addr) -> bool {
    let s = v6.segments();
    s[0] & 0xfff0 == 0xff00 && s[1..7].iter().all(|&x| x == 0) && matches!(s[7], 1 | 2)
}

fn domain_of(ip: IpAddr) -> Domain {
    if ip.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    }
}

/// The index of the interface holding `local` (loopback's for a loopback
/// address), for IPv6 joins and the IPv6 sending interface.
fn interface_index(local: IpAddr) -> Result<u32, WorkloadError> {
    let local = local.to_canonical();
    let name = crate::probe::nic::interface_with_address(local).ok_or_else(|| {
        WorkloadError::Setup(format!(
            "no interface of this host holds {local}, the test's local address"
        ))
    })?;
    crate::probe::netns::ifindex_of(&name)
        .map(|i| i as u32)
        .ok_or_else(|| WorkloadError::Setup(format!("interface {name} has no index")))
}

/// A receiving socket bound to the group's port (to the group address, so
/// nothing else sent to that port lands in it), not yet joined; it gets
/// only the groups it joins itself.
pub fn receiver(group: &Group) -> Result<Socket, WorkloadError> {
    let socket = Socket::new(domain_of(group.address), Type::DGRAM, Some(Protocol::UDP))
        .map_err(WorkloadError::io("creating a UDP socket for the group"))?;
    // Several receivers of one host (agents on loopback, iperf 2 beside
    // us) may take the same group and port, each its own copy.
    socket
        .set_reuse_address(true)
        .map_err(WorkloadError::io("setting SO_REUSEADDR on the group's socket"))?;
    match group.address {
        IpAddr::V4(_) => socket.set_multicast_all_v4(false),
        IpAddr::V6(_) => {
            socket.set_only_v6(true).ok();
            socket.set_multicast_all_v6(false)
        }
    }
    .map_err(WorkloadError::io("turning off IP_MULTICAST_ALL on the group's socket"))?;
    socket
        .bind(&SocketAddr::new(group.address, group.port).into())
        .map_err(WorkloadError::io(format!(
            "binding the group's socket to {}",
            SocketAddr::new(group.address, group.port)
        )))?;
    Ok(socket)
}

/// Joins (`MCAST_JOIN_SOURCE_GROUP`) or leaves (`MCAST_LEAVE_SOURCE_GROUP`)
/// IPv6 group `group` from `source` on interface `index`: the protocol-
/// independent call, which socket2 has for IPv4 only.
fn source_group_v6(
    socket: &Socket,
    option: libc::c_int,
    group: Ipv6Addr,
    source: Ipv6Addr,
    index: u32,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let storage = |ip: Ipv6Addr| socket2::SockAddr::from(SocketAddr::new(IpAddr::V6(ip), 0)).as_storage();
    // SAFETY: an all-zero group_source_req is valid (plain integers and
    // byte arrays); socket2's sockaddr_storage holds a valid sockaddr_in6.
    let mut request: libc::group_source_req = unsafe { std::mem::zeroed() };
    request.gsr_interface = index;
    request.gsr_group = storage(group);
    request.gsr_source = storage(source);
    // SAFETY: the pointer and length describe `request`, alive for the call.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IPV6,
            option,
            std::ptr::addr_of!(request).cast(),
            std::mem::size_of::<libc::group_source_req>() as libc::socklen_t,
        )
    };
    match rc {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// A membership that ends when dropped (the kernel would end it with the
/// socket; leaving first makes the leave report go out now).
pub struct Membership<'a> {
    socket: &'a Socket,
    group: Group,
    local: IpAddr,
}

/// Joins `group` on the interface holding `local`: ASM or, with a source,
/// SSM (IGMPv3 for IPv4, MLDv2 for IPv6).
pub fn join<'a>(socket: &'a Socket, group: &Group, local: IpAddr) -> Result<Membership<'a>, WorkloadError> {
    // A dual-stack listener sees an IPv4 client as ::ffff:a.b.c.d.
    let local = local.to_canonical();
    let joined = match (group.address, group.source, local) {
        (IpAddr::V4(g), None, _) => {
            socket.join_multicast_v4_n(&g, &InterfaceIndexOrAddress::Index(interface_index(local)?))
        }
        (IpAddr::V4(g), Some(IpAddr::V4(s)), IpAddr::V4(l)) => socket.join_ssm_v4(&s, &g, &l),
        (IpAddr::V6(g), None, _) => socket.join_multicast_v6(&g, interface_index(local)?),
        (IpAddr::V6(g), Some(IpAddr::V6(s)), _) => {
            source_group_v6(socket, libc::MCAST_JOIN_SOURCE_GROUP, g, s, interface_index(local)?)
        }
        _ => {
            return Err(WorkloadError::Setup(format!(
                "cannot join {} from {local}: a source-specific group, its source and the local address must be \
                 of one family",
                group.address
            )))
        }
    };
    joined.map_err(WorkloadError::io(format!(
        "joining {} on the interface holding {local}",
        group.address
    )))?;
    Ok(Membership {
        socket,
        group: *group,
        local,
    })
}

impl Drop for Membership<'_> {
    fn drop(&mut self) {
        let index = interface_index(self.local);
        let _ = match (self.group.address, self.group.source, self.local, index) {
            (IpAddr::V4(g), None, _, Ok(index)) => self
                .socket
                .leave_multicast_v4_n(&g, &InterfaceIndexOrAddress::Index(index)),
            (IpAddr::V4(g), Some(IpAddr::V4(s)), IpAddr::V4(l), _) => self.socket.leave_ssm_v4(&s, &g, &l),
            (IpAddr::V6(g), None, _, Ok(index)) => self.socket.leave_multicast_v6(&g, index),
            (IpAddr::V6(g), Some(IpAddr::V6(s)), _, Ok(index)) => {
                source_group_v6(self.socket, libc::MCAST_LEAVE_SOURCE_GROUP, g, s, index)
            }
            _ => Ok(()),
        };
    }
}

/// The sender's socket: bound to `local` (its address decides the
/// interface the group leaves by), TTL or hop limit `ttl`, loopback on so
/// that receivers on this host get their copy, connected to the group.
pub fn sender(group: &Group, local: IpAddr, ttl: u32) -> Result<Socket, WorkloadError> {
    let socket = Socket::new(domain_of(group.address), Type::DGRAM, Some(Protocol::UDP))
        .map_err(WorkloadError::io("creating the sender's UDP socket"))?;
    socket
        .bind(&SocketAddr::new(local, 0).into())
        .map_err(WorkloadError::io(format!("binding the sender's socket to {local}")))?;
    let set = match local {
        IpAddr::V4(l) => socket
            .set_multicast_if_v4(&l)
            .and_then(|()| socket.set_multicast_ttl_v4(ttl))
            .and_then(|()| socket.set_multicast_loop_v4(true)),
        IpAddr::V6(_) => socket
            .set_multicast_if_v6(interface_index(local)?)
            .and_then(|()| socket.set_multicast_hops_v6(ttl))
            .and_then(|()| socket.set_multicast_loop_v6(true)),
    };
    set.map_err(WorkloadError::io(format!(
        "setting the sender's interface ({local}), TTL {ttl} and loopback"
    )))?;
    socket
        .connect(&SocketAddr::new(group.address, group.port).into())
        .map_err(WorkloadError::io(format!(
            "aiming the sender at {}",
            SocketAddr::new(group.address, group.port)
        )))?;
    Ok(socket)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn only_groups_a_test_may_flood_are_taken_and_ssm_needs_its_source() {
        assert!(check(ip("239.1.2.3"), None).is_ok());
        assert!(check(ip("232.1.2.3"), Some(ip("10.0.0.1"))).is_ok());
        assert!(check(ip("ff15::1234"), None).is_ok());
        let words = |a: &str, s: Option<&str>| check(ip(a), s.map(ip)).unwrap_err();
        assert!(words("10.1.2.3", None).contains("not a multicast group"));
        assert!(words("224.0.0.251", None).contains("local network control block"));
        assert!(words("ff02::1", None).contains("reserved or all-nodes"));
        assert!(words("ff10::5", None).contains("reserved"), "scope 0");
        assert!(words("232.1.2.3", None).contains("pass --source"));
        assert!(words("239.1.2.3", Some("10.0.0.1")).contains("drop --source"));
        assert!(words("232.1.2.3", Some("::1")).contains("unicast address of the group's family"));
        assert!(words("232.1.2.3", Some("239.0.0.1")).contains("unicast"));
        assert!(check(ip("ff3e::1"), Some(ip("::1"))).is_ok(), "IPv6 SSM");
        assert!(words("ff3e::1", None).contains("pass --source"));
        assert!(words("ff3e::1", Some("127.0.0.1")).contains("unicast address of the group's family"));
        assert!(is_ssm(ip("ff3e::1")) && !is_ssm(ip("ff15::1")) && is_ssm(ip("232.0.0.9")));
    }

    /// IPv6 source-specific: the join puts the group and its one source in
    /// the interface's filter (/proc/net/mcfilter6), the leave takes them
    /// out. (Loopback does not carry IPv6 multicast, so the datagrams
    /// themselves are tested over a veth pair: tests/cli/multicast.rs.)
    #[test]
    fn an_ipv6_source_specific_join_filters_on_its_source_and_the_leave_ends_it() {
        let suffix = std::process::id() % 0xffff;
        let (address, source) = (ip(&format!("ff3e::77:{suffix:x}")), ip("fd00:77::1"));
        let group = Group {
            address,
            port: 0,
            source: Some(source),
        };
        let socket = receiver(&group).unwrap();
        let filters = || std::fs::read_to_string("/proc/net/mcfilter6").unwrap();
        // /proc shows addresses as 32 hex digits.
        let hex = |ip: IpAddr| match ip {
            IpAddr::V6(v6) => v6.octets().iter().map(|b| format!("{b:02x}")).collect::<String>(),
            IpAddr::V4(_) => unreachable!(),
        };
        let filtered = |text: &str| {
            text.lines()
                .any(|l| l.contains(&hex(address)) && l.contains(&hex(source)))
        };
        let joined = join(&socket, &group, ip("::1")).unwrap();
        assert!(filtered(&filters()), "{}", filters());
        drop(joined);
        assert!(!filtered(&filters()), "left: {}", filters());
    }

    /// Two receivers of one group on one host each get every datagram,
    /// and a socket that did not join gets none, although it is bound to
    /// the same group and port (IP_MULTICAST_ALL is off).
    #[test]
    fn each_joined_socket_gets_its_own_copy_and_an_unjoined_one_none() {
        let group = Group {
            address: ip(&format!("239.77.{}.{}", std::process::id() % 250, 9)),
            port: 0,
            source: None,
        };
        let first = receiver(&group).unwrap();
        let port = first.local_addr().unwrap().as_socket().unwrap().port();
        let group = Group { port, ..group };
        let second = receiver(&group).unwrap();
        let bystander = receiver(&group).unwrap();
        let local = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let _a = join(&first, &group, local).unwrap();
        let _b = join(&second, &group, local).unwrap();
        let out = sender(&group, local, 0).unwrap();
        out.send(b"one").unwrap();
        for socket in [&first, &second] {
            socket
                .set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            let mut buf = [std::mem::MaybeUninit::new(0u8); 16];
            assert_eq!(socket.recv(&mut buf).unwrap(), 3);
        }
        bystander.set_nonblocking(true).unwrap();
        let mut buf = [std::mem::MaybeUninit::new(0u8); 16];
        assert!(
            bystander.recv(&mut buf).is_err(),
            "a socket that did not join got the group"
        );
    }
}
