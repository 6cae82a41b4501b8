//! Whether the path to an agent carries packets of an MTU: checked before
//! a plan's case runs, and by the client when a test stalls (a trial whose
//! peer goes quiet or is lost). An ICMP echo of that size with "don't
//! fragment" set must come back. A hop that stays at a smaller MTU (a router left at
//! 1500 while both ends went to 9000) drops such packets, often without a
//! word; a case run through it black-holes (TCP stalls until its deadline).
//! The largest size that does pass is found by halving, so the case fails
//! with both numbers. A path that answers no echo at all (ICMP filtered)
//! is not judged. Echoes with a hop limit then find where on the way the
//! large packets vanish ([`locate`]): the last hop whose "time exceeded"
//! still comes back for them.
//!
//! The decision is plain code over [`Echo`]; [`IcmpEcho`] sends the
//! probes (a ping socket, or a raw one as root). The probes use
//! `IP_PMTUDISC_PROBE` (`IPV6_PMTUDISC_PROBE` and `IPV6_DONTFRAG`): the
//! "don't fragment" bit without the kernel's cached path MTU, so a stale
//! entry from an earlier case does not decide for the path as it is now.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Sends echo probes of a given packet size (IP header included).
pub trait Echo {
    /// True when an echo of `size` bytes, don't-fragment, came back within
    /// one of `tries` attempts; Err when no probe could be sent.
    fn echo(&mut self, size: u32, tries: u32) -> Result<bool, String>;
    /// The smallest packet every path of this family passes: 68 (IPv4),
    /// 1280 (IPv6).
    fn minimum(&self) -> u32;
    /// An echo of `size` bytes, don't-fragment, with a hop limit of `hops`:
    /// the destination's reply, a hop's "time exceeded", or nothing, in
    /// one of `tries` attempts.
    fn hop(&mut self, size: u32, hops: u32, tries: u32) -> Result<Answer, String>;
}

/// Where packets of a size stop on the way, from echoes with a hop limit
/// (the way traceroute finds the hops).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Where {
    /// Large probes came back from `passing` (the last hop they reached;
    /// None: not even the first) and not from `vanishing`, which small ones
    /// reached (the destination itself when `at_destination`).
    Between {
        passing: Option<(u32, IpAddr)>,
        vanishing: (u32, IpAddr),
        at_destination: bool,
    },
    /// The hops could not be told apart, for the reason given.
    Unknown(String),
}

/// The most hops [`locate`] tries.
pub const MAX_HOPS: u32 = 16;

/// Finds between which hops packets of `large` bytes vanish while packets
/// of `small` bytes pass: hop by hop, a large echo that a hop answers
/// ("time exceeded") reached it; the first hop that answers only the
/// small one lies beyond the drop.
pub fn locate(echo: &mut dyn Echo, destination: IpAddr, large: u32, small: u32) -> Where {
    let mut passing = None;
    for hops in 1..=MAX_HOPS {
        let answer = match echo.hop(large, hops, 2) {
            Ok(a) => a,
            Err(e) => return Where::Unknown(e),
        };
        match answer {
            Answer::Reply => {
                return Where::Unknown(format!(
                    "a {large}-byte echo with a hop limit of {hops} came back from the destination"
                ))
            }
            Answer::HopExpired(hop) => passing = Some((hops, hop)),
            Answer::Nothing => {
                return match echo.hop(small, hops, 2) {
                    Ok(Answer::Reply) => Where::Between {
                        passing,
                        vanishing: (hops, destination),
                        at_destination: true,
                    },
                    Ok(Answer::HopExpired(hop)) => Where::Between {
                        passing,
                        vanishing: (hops, hop),
                        at_destination: false,
                    },
                    Ok(Answer::Nothing) => Where::Unknown(format!(
                        "hop {hops} answers no hop-limited echo, of either size (a router that sends no \
                         'time exceeded', or ICMP filtered)"
                    )),
                    Err(e) => Where::Unknown(e),
                };
            }
        }
    }
    Where::Unknown(format!("no hop within {MAX_HOPS} told"))
}

/// A path-MTU black hole found toward an address: packets above `largest`
/// bytes (IP packets) vanish, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlackHole {
    /// The largest IP packet that passed.
    pub largest: u32,
    /// The size that did not.
    pub tried: u32,
    pub at: Where,
}

impl BlackHole {
    /// Where they vanish, in words: "after hop 1 (10.200.0.1), before hop 2 (10.200.1.2, the destination)".
    pub fn place(&self) -> String {
        match &self.at {
            Where::Between {
                passing,
                vanishing: (hops, hop),
                at_destination,
            } => {
                let after = match passing {
                    Some((n, ip)) => format!("after hop {n} ({ip}, which they reach)"),
                    None => "before the first hop (this host's own link, or the first hop's way in)".into(),
                };
                let end = if *at_destination { ", the destination" } else { "" };
                format!("{after}, before hop {hops} ({hop}{end})")
            }
            Where::Unknown(why) => format!("which hop drops them cannot be told: {why}"),
        }
    }
}

/// Probes the path toward `destination` for a black hole above `mtu`
/// bytes (a ping socket, else a raw one): Ok(None) when packets of `mtu`
/// bytes pass, Err when the path cannot be judged (no ICMP socket, no
/// echo reply at all).
pub fn black_hole_toward(destination: IpAddr, mtu: u32) -> Result<Option<BlackHole>, String> {
    let mtu = mtu.min(largest_packet(destination));
    let mut echo = IcmpEcho::new(destination)?;
    match check(&mut echo, mtu) {
        PathMtu::Passes => Ok(None),
        PathMtu::Unknown(why) => Err(why),
        PathMtu::BlackHole { largest } => {
            let at = locate(&mut echo, destination, mtu, largest);
            Ok(Some(BlackHole {
                largest,
                tried: mtu,
                at,
            }))
        }
    }
}

/// The largest packet `destination`'s IP family can carry: an IPv4 packet
/// counts its whole length in 16 bits (65,535 B), an IPv6 one its payload
/// only (65,535 B after a 40 B header; larger needs a jumbogram). Loopback's
/// MTU is 65,536: no packet of that size exists to vanish.
fn largest_packet(destination: IpAddr) -> u32 {
    match destination {
        IpAddr::V4(_) => 65_535,
        IpAddr::V6(_) => 65_535 + 40,
    }
}

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathMtu {
    /// Packets of the MTU came back.
    Passes,
    /// They did not; packets of `largest` bytes did.
    BlackHole { largest: u32 },
    /// Not even the smallest echo came back (or none could be sent): the
    /// path is not judged, for the reason given.
    Unknown(String),
}

/// Checks that `echo`'s path passes `mtu`-byte packets, and if not, finds
/// the largest that does.
pub fn check(echo: &mut dyn Echo, mtu: u32) -> PathMtu {
    match echo.echo(mtu, 3) {
        Ok(true) => return PathMtu::Passes,
        Ok(false) => {}
        Err(e) => return PathMtu::Unknown(e),
    }
    let mut passed = echo.minimum().min(mtu);
    match echo.echo(passed, 2) {
        Ok(true) => {}
        Ok(false) => {
            return PathMtu::Unknown(format!(
                "no echo reply even at {passed} bytes (ICMP filtered, or the host is down)"
            ))
        }
        Err(e) => return PathMtu::Unknown(e),
    }
    let mut failed = mtu;
    while failed - passed > 1 {
        let middle = passed + (failed - passed) / 2;
        // Twice: a reply lost on a busy host must not shrink the answer.
        match echo.echo(middle, 2) {
            Ok(true) => passed = middle,
            Ok(false) => failed = middle,
            Err(e) => return PathMtu::Unknown(e),
        }
    }
    PathMtu::BlackHole { largest: passed }
}

/// Checks the path to the agent at `address` (`host:port`) for `mtu`:
/// Err names a black hole ("path to b does not pass 9000-byte packets:
/// largest that passed 1500"); Ok(Some) says why the path was not judged.
pub fn check_agent(label: &str, address: &str, mtu: u32) -> Result<Option<String>, String> {
    let (host, port) = crate::address::agent_address(address, None, None).map_err(|e| e.to_string())?;
    let ip = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} has no address"))?
        .ip();
    let mut echo = match IcmpEcho::new(ip) {
        Ok(e) => e,
        Err(e) => return Ok(Some(format!("the path MTU to {label} is not checked: {e}"))),
    };
    match check(&mut echo, mtu) {
        PathMtu::Passes => Ok(None),
        PathMtu::BlackHole { largest } => Err(format!(
            "path to {label} does not pass {mtu}-byte packets: largest that passed {largest} \
             (a hop between the ends has a smaller MTU; set it too, or leave MTU {mtu} out)"
        )),
        PathMtu::Unknown(why) => Ok(Some(format!("the path MTU to {label} is not checked: {why}"))),
    }
}

/// ICMP echo toward one address, don't-fragment.
pub struct IcmpEcho {
    socket: OwnedFd,
    destination: IpAddr,
    /// A raw socket sees every ICMP packet (and IPv4's IP header); a ping
    /// socket only its own replies.
    raw: bool,
    identifier: u16,
    sequence: u16,
    /// How long a probe waits for its answer: [`REPLY_WAIT`], less once
    /// replies came back quickly.
    wait: Duration,
    /// Whether a smallest echo measured the round trip yet.
    calibrated: bool,
}

const ECHO_REQUEST_V4: u8 = 8;
const ECHO_REPLY_V4: u8 = 0;
const ECHO_REQUEST_V6: u8 = 128;
const ECHO_REPLY_V6: u8 = 129;
const TIME_EXCEEDED_V4: u8 = 11;
const TIME_EXCEEDED_V6: u8 = 3;
/// How long one probe waits for its reply.
const REPLY_WAIT: Duration = Duration::from_millis(400);
/// The shortest wait, however fast replies came: a busy host may answer
/// late (the halving takes a dozen probes, most of them unanswered).
const SHORTEST_WAIT: Duration = Duration::from_millis(100);

impl IcmpEcho {
    /// A ping socket (unprivileged where net.ipv4.ping_group_range allows),
    /// else a raw one (root).
    pub fn new(destination: IpAddr) -> Result<IcmpEcho, String> {
        let (domain, protocol) = match destination {
            IpAddr::V4(_) => (libc::AF_INET, libc::IPPROTO_ICMP),
            IpAddr::V6(_) => (libc::AF_INET6, libc::IPPROTO_ICMPV6),
        };
        let open = |kind: libc::c_int| {
            // SAFETY: socket(2) with constant arguments; the fd is owned below.
            let fd = unsafe { libc::socket(domain, kind | libc::SOCK_CLOEXEC, protocol) };
            if fd < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                // SAFETY: a new descriptor nobody else owns.
                Ok(unsafe { OwnedFd::from_raw_fd(fd) })
            }
        };
        let (socket, raw) = match open(libc::SOCK_DGRAM) {
            Ok(s) => (s, false),
            Err(ping) => match open(libc::SOCK_RAW) {
                Ok(s) => (s, true),
                Err(raw) => {
                    return Err(format!(
                        "cannot send ICMP echo: a ping socket: {ping}; a raw socket: {raw} \
                         (run as root, or allow ping sockets in net.ipv4.ping_group_range)"
                    ))
                }
            },
        };
        let set = |level, name, value| set_option(&socket, level, name, value);
        match destination {
            IpAddr::V4(_) => set(libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_PROBE)?,
            IpAddr::V6(_) => {
                set(libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER, libc::IPV6_PMTUDISC_PROBE)?;
                set(libc::IPPROTO_IPV6, libc::IPV6_DONTFRAG, 1)?;
            }
        }
        // A ping socket learns of a hop's "time exceeded" on its error queue.
        if !raw {
            match destination {
                IpAddr::V4(_) => set(libc::IPPROTO_IP, libc::IP_RECVERR, 1)?,
                IpAddr::V6(_) => set(libc::IPPROTO_IPV6, libc::IPV6_RECVERR, 1)?,
            }
        }
        let mut random = [0u8; 2];
        getrandom::getrandom(&mut random).map_err(|e| format!("no random numbers: {e}"))?;
        Ok(IcmpEcho {
            socket,
            destination,
            raw,
            identifier: u16::from_le_bytes(random),
            sequence: 0,
            wait: REPLY_WAIT,
            calibrated: false,
        })
    }

    fn header_bytes(&self) -> u32 {
        match self.destination {
            IpAddr::V4(_) => 20 + 8,
            IpAddr::V6(_) => 40 + 8,
        }
    }

    /// Sets the hop limit of the probes that follow (None: the system's default).
    fn set_hop_limit(&mut self, hops: Option<u32>) -> Result<(), String> {
        let (level, name) = match self.destination {
            IpAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_TTL),
            IpAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS),
        };
        // -1 puts IPv6's default back; IPv4's default is 64.
        let value: libc::c_int = match (hops, self.destination) {
            (Some(h), _) => h.min(255) as libc::c_int,
            (None, IpAddr::V4(_)) => 64,
            (None, IpAddr::V6(_)) => -1,
        };
        set_option(&self.socket, level, name, value)
    }

    /// One probe: what came back within `wait`.
    fn probe(&mut self, size: u32, wait: Duration) -> Result<Answer, String> {
        self.sequence = self.sequence.wrapping_add(1);
        let payload = size.saturating_sub(self.header_bytes()) as usize;
        let mut packet = vec![0u8; 8 + payload];
        packet[0] = match self.destination {
            IpAddr::V4(_) => ECHO_REQUEST_V4,
            IpAddr::V6(_) => ECHO_REQUEST_V6,
        };
        packet[4..6].copy_from_slice(&self.identifier.to_be_bytes());
        packet[6..8].copy_from_slice(&self.sequence.to_be_bytes());
        for (i, b) in packet[8..].iter_mut().enumerate() {
            *b = i as u8;
        }
        if self.destination.is_ipv4() {
            // ICMPv6's checksum covers a pseudo-header: the kernel fills it.
            let sum = checksum(&packet);
            packet[2..4].copy_from_slice(&sum.to_be_bytes());
        }
        let to = socket2_address(SocketAddr::new(self.destination, 0));
        // SAFETY: sendto(2) from a buffer we own to an address we built.
        let sent = unsafe {
            libc::sendto(
                self.socket.as_raw_fd(),
                packet.as_ptr().cast(),
                packet.len(),
                0,
                (&to.0 as *const libc::sockaddr_storage).cast(),
                to.1,
            )
        };
        if sent < 0 {
            let e = std::io::Error::last_os_error();
            // Larger than this host's own interface: it does not pass.
            if e.raw_os_error() == Some(libc::EMSGSIZE) {
                return Ok(Answer::Nothing);
            }
            return Err(format!("sending an echo of {size} bytes to {}: {e}", self.destination));
        }
        let deadline = Instant::now() + wait;
        let mut buffer = vec![0u8; 70_000];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Answer::Nothing);
            }
            let mut poll = libc::pollfd {
                fd: self.socket.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: poll(2) on one descriptor we own.
            let ready = unsafe { libc::poll(&mut poll, 1, left.as_millis().max(1) as libc::c_int) };
            if ready <= 0 {
                continue;
            }
            // A ping socket hands an ICMP error to its error queue.
            if poll.revents & libc::POLLERR != 0 {
                if let Some(hop) = self.queued_error() {
                    return Ok(Answer::HopExpired(hop));
                }
                continue;
            }
            let mut from: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            let mut from_len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            // SAFETY: recvfrom(2) into buffers we own, their sizes given.
            let got = unsafe {
                libc::recvfrom(
                    self.socket.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                    libc::MSG_DONTWAIT,
                    (&mut from as *mut libc::sockaddr_storage).cast(),
                    &mut from_len,
                )
            };
            if got <= 0 {
                continue;
            }
            match self.answer_in(&buffer[..got as usize], from_ip(&from)) {
                Answer::Nothing => {}
                answer => return Ok(answer),
            }
        }
    }

    /// The ICMP part of a packet a raw or ping socket received (a raw IPv4
    /// socket hands over the IP header too).
    fn icmp_of<'p>(&self, packet: &'p [u8]) -> &'p [u8] {
        if self.raw && self.destination.is_ipv4() {
            let header = usize::from(packet.first().map_or(0, |b| b & 0x0f)) * 4;
            packet.get(header..).unwrap_or(&[])
        } else {
            packet
        }
    }

    /// Whether an echo header (type, code, checksum, identifier, sequence)
    /// is this probe's: a ping socket's identifier is the kernel's, which
    /// filters by it.
    fn is_ours(&self, echo: &[u8], kind: u8) -> bool {
        echo.len() >= 8
            && echo[0] == kind
            && (!self.raw || echo[4..6] == self.identifier.to_be_bytes())
            && echo[6..8] == self.sequence.to_be_bytes()
    }

    fn answer_in(&self, packet: &[u8], from: Option<IpAddr>) -> Answer {
        let icmp = self.icmp_of(packet);
        let (reply, expired, request) = match self.destination {
            IpAddr::V4(_) => (ECHO_REPLY_V4, TIME_EXCEEDED_V4, ECHO_REQUEST_V4),
            IpAddr::V6(_) => (ECHO_REPLY_V6, TIME_EXCEEDED_V6, ECHO_REQUEST_V6),
        };
        if from == Some(self.destination) && self.is_ours(icmp, reply) {
            return Answer::Reply;
        }
        // A hop's "time exceeded" quotes the probe: its IP header, then
        // the echo header. Only a raw socket sees it here.
        if !self.raw || icmp.len() < 8 || icmp[0] != expired {
            return Answer::Nothing;
        }
        let quoted = &icmp[8..];
        let inner_header = match self.destination {
            IpAddr::V4(_) => usize::from(quoted.first().map_or(0, |b| b & 0x0f)) * 4,
            IpAddr::V6(_) => 40,
        };
        match (quoted.get(inner_header..), from) {
            (Some(echo), Some(hop)) if self.is_ours(echo, request) => Answer::HopExpired(hop),
            _ => Answer::Nothing,
        }
    }

    /// A "time exceeded" a ping socket queued (IP_RECVERR): the hop that
    /// sent it, when it was for this probe.
    fn queued_error(&self) -> Option<IpAddr> {
        let mut data = [0u8; 2048];
        let mut control = [0u8; 512];
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        };
        // SAFETY: an all-zero msghdr is valid; its buffers are set below.
        let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = control.as_mut_ptr().cast();
        message.msg_controllen = control.len() as _;
        // SAFETY: recvmsg(2) into buffers we own, their sizes given.
        let got = unsafe {
            libc::recvmsg(
                self.socket.as_raw_fd(),
                &mut message,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
        if got < 0 {
            return None;
        }
        let echo = &data[..got as usize];
        if !self.is_ours(
            echo,
            if self.destination.is_ipv4() {
                ECHO_REQUEST_V4
            } else {
                ECHO_REQUEST_V6
            },
        ) {
            return None;
        }
        // SAFETY: walking the control messages recvmsg filled, within msg_controllen.
        let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&message) };
        while !cmsg.is_null() {
            // SAFETY: cmsg points into `control`, as CMSG_FIRSTHDR/NXTHDR returned it.
            let header = unsafe { &*cmsg };
            let is_error = matches!(
                (header.cmsg_level, header.cmsg_type),
                (libc::IPPROTO_IP, libc::IP_RECVERR) | (libc::IPPROTO_IPV6, libc::IPV6_RECVERR)
            );
            if is_error {
                // SAFETY: an IP_RECVERR message holds a sock_extended_err and,
                // after it, the offender's address (SO_EE_OFFENDER).
                let (error, offender) = unsafe {
                    let error = libc::CMSG_DATA(cmsg) as *const libc::sock_extended_err;
                    let offender = error.add(1) as *const libc::sockaddr_storage;
                    (std::ptr::read_unaligned(error), std::ptr::read_unaligned(offender))
                };
                let expired = match self.destination {
                    IpAddr::V4(_) => error.ee_origin == libc::SO_EE_ORIGIN_ICMP && error.ee_type == TIME_EXCEEDED_V4,
                    IpAddr::V6(_) => error.ee_origin == libc::SO_EE_ORIGIN_ICMP6 && error.ee_type == TIME_EXCEEDED_V6,
                };
                return if expired { from_ip(&offender) } else { None };
            }
            // SAFETY: as above.
            cmsg = unsafe { libc::CMSG_NXTHDR(&message, cmsg) };
        }
        None
    }
}

/// What came back for one probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The destination's echo reply.
    Reply,
    /// A hop on the way said its hop limit ran out ("time exceeded").
    HopExpired(IpAddr),
    /// Nothing within the wait.
    Nothing,
}

fn set_option(socket: &OwnedFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> Result<(), String> {
    // SAFETY: setsockopt(2) with a c_int option on our socket.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(format!("setsockopt: {}", std::io::Error::last_os_error()))
    } else {
        Ok(())
    }
}

impl Echo for IcmpEcho {
    fn echo(&mut self, size: u32, tries: u32) -> Result<bool, String> {
        // The first echo of the smallest size measures the round trip, so
        // that unanswered probes wait for ten of them, not REPLY_WAIT.
        if !self.calibrated {
            self.calibrated = true;
            let smallest = self.minimum();
            if size > smallest {
                self.echo(smallest, 1)?;
            }
        }
        for _ in 0..tries.max(1) {
            let sent = Instant::now();
            if self.probe(size, self.wait)? == Answer::Reply {
                // Ten round trips of the slowest reply seen, within bounds.
                let enough = (sent.elapsed() * 10).clamp(SHORTEST_WAIT, REPLY_WAIT);
                self.wait = if self.wait == REPLY_WAIT {
                    enough
                } else {
                    self.wait.max(enough)
                };
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn hop(&mut self, size: u32, hops: u32, tries: u32) -> Result<Answer, String> {
        self.set_hop_limit(Some(hops))?;
        let mut answer = Ok(Answer::Nothing);
        for _ in 0..tries.max(1) {
            answer = self.probe(size, self.wait);
            if !matches!(answer, Ok(Answer::Nothing)) {
                break;
            }
        }
        self.set_hop_limit(None)?;
        answer
    }

    fn minimum(&self) -> u32 {
        match self.destination {
            IpAddr::V4(_) => 68,
            IpAddr::V6(_) => 1280,
        }
    }
}

/// The Internet checksum (RFC 1071).
fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn socket2_address(address: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: an all-zero sockaddr_storage is valid; the variant written
    // below fits in it.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match address {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: 0,
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_in fits in sockaddr_storage.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: 0,
                sin6_flowinfo: 0,
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_in6 fits in sockaddr_storage.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

fn from_ip(storage: &libc::sockaddr_storage) -> Option<IpAddr> {
    match i32::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says it is a sockaddr_in.
            let sin: &libc::sockaddr_in = unsafe { &*(storage as *const libc::sockaddr_storage).cast() };
            Some(IpAddr::from(sin.sin_addr.s_addr.to_ne_bytes()))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says it is a sockaddr_in6.
            let sin6: &libc::sockaddr_in6 = unsafe { &*(storage as *const libc::sockaddr_storage).cast() };
            Some(IpAddr::from(sin6.sin6_addr.s6_addr))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path that passes packets up to `limit` bytes (None: answers none).
    struct Path {
        limit: Option<u32>,
        probes: Vec<u32>,
    }

    impl Echo for Path {
        fn echo(&mut self, size: u32, _tries: u32) -> Result<bool, String> {
            self.probes.push(size);
            Ok(self.limit.is_some_and(|l| size <= l))
        }
        fn minimum(&self) -> u32 {
            68
        }
        fn hop(&mut self, size: u32, hops: u32, _tries: u32) -> Result<Answer, String> {
            // One router (hop 1) whose next link carries `limit` bytes, then
            // the destination (hop 2).
            let router: IpAddr = "10.0.0.1".parse().unwrap();
            Ok(match (hops, self.limit) {
                (1, Some(_)) => Answer::HopExpired(router),
                (_, Some(l)) if size <= l => Answer::Reply,
                _ => Answer::Nothing,
            })
        }
    }

    #[test]
    fn a_path_that_passes_the_mtu_takes_one_probe() {
        let mut path = Path {
            limit: Some(9000),
            probes: Vec::new(),
        };
        assert_eq!(check(&mut path, 9000), PathMtu::Passes);
        assert_eq!(path.probes, [9000]);
    }

    #[test]
    fn a_black_hole_is_named_with_the_largest_size_that_passed() {
        let mut path = Path {
            limit: Some(1500),
            probes: Vec::new(),
        };
        assert_eq!(check(&mut path, 9000), PathMtu::BlackHole { largest: 1500 });
        assert!(path.probes.len() < 20, "{:?}", path.probes);
    }

    #[test]
    fn a_path_that_answers_no_echo_is_not_judged() {
        let mut path = Path {
            limit: None,
            probes: Vec::new(),
        };
        match check(&mut path, 9000) {
            PathMtu::Unknown(why) => assert!(why.contains("no echo reply even at 68 bytes"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_black_hole_is_placed_after_the_last_hop_the_large_packets_reach() {
        let mut path = Path {
            limit: Some(1500),
            probes: Vec::new(),
        };
        let destination: IpAddr = "10.0.1.2".parse().unwrap();
        let at = locate(&mut path, destination, 9000, 1500);
        assert_eq!(
            at,
            Where::Between {
                passing: Some((1, "10.0.0.1".parse().unwrap())),
                vanishing: (2, destination),
                at_destination: true
            }
        );
        let hole = BlackHole {
            largest: 1500,
            tried: 9000,
            at,
        };
        assert_eq!(
            hole.place(),
            "after hop 1 (10.0.0.1, which they reach), before hop 2 (10.0.1.2, the destination)"
        );
    }

    #[test]
    fn a_path_whose_hops_say_nothing_is_not_placed() {
        let mut path = Path {
            limit: None,
            probes: Vec::new(),
        };
        match locate(&mut path, "10.0.1.2".parse().unwrap(), 9000, 1500) {
            Where::Unknown(why) => assert!(why.contains("hop 1 answers no hop-limited echo"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_checksum_is_rfc_1071s() {
        // An echo request, identifier 1, sequence 1, no payload.
        assert_eq!(checksum(&[8, 0, 0, 0, 0, 1, 0, 1]), 0xf7fd);
    }

    #[test]
    fn loopback_passes_a_9000_byte_echo() {
        let mut echo = match IcmpEcho::new("127.0.0.1".parse().unwrap()) {
            Ok(e) => e,
            // Neither a ping socket nor root here: nothing to send with.
            Err(e) => return crate::probe::skip_or_fail(&format!("no ICMP echo socket here: {e}")),
        };
        assert_eq!(check(&mut echo, 9000), PathMtu::Passes);
    }

    /// Loopback's MTU is 65,536 B, one more than any IPv4 packet can be: a
    /// stalled test on loopback was told "packets over 65535 B vanish ... a
    /// path-MTU black hole" (a files test the agent refused for its disk).
    #[test]
    fn loopbacks_mtu_is_no_black_hole_though_no_packet_that_large_exists() {
        assert_eq!(largest_packet("127.0.0.1".parse().unwrap()), 65_535);
        assert_eq!(largest_packet("::1".parse().unwrap()), 65_575);
        let loopback_mtu = crate::probe::mtu::mtu_of("lo").expect("lo has an MTU");
        match black_hole_toward("127.0.0.1".parse().unwrap(), loopback_mtu) {
            Ok(hole) => assert_eq!(hole.map(|h| (h.largest, h.tried)), None, "lo's MTU is {loopback_mtu}"),
            Err(e) => crate::probe::skip_or_fail(&format!("no ICMP echo socket here: {e}")),
        }
    }
}
