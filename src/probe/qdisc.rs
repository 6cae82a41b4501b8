//! The root qdisc of an interface, and when it is a shaper (tbf) its rate,
//! its accounting (`overhead`, `mpu`, `linklayer`) and its bucket size.
//! sysfs does not name the qdisc, so this asks the kernel over a raw
//! rtnetlink socket (RTM_GETQDISC dump, parsed here; no crate and no `tc`
//! process). Any failure reads as "unknown" (None).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const RTM_NEWQDISC: u16 = 36;
const RTM_GETQDISC: u16 = 38;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_STATS2: u16 = 7;
/// In TCA_STATS2: `struct gnet_stats_basic` (bytes u64, packets u32).
const TCA_STATS_BASIC: u16 = 1;
/// In TCA_STATS2: `struct gnet_stats_queue`.
const TCA_STATS_QUEUE: u16 = 3;
const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RATE64: u16 = 4;
/// Offsets in `struct tc_tbf_qopt`: its first member is the rate's `struct
/// tc_ratespec` (cell_log u8, linklayer u8, overhead u16, cell_align s16,
/// mpu u16, rate u32 in bytes/s), then the peak rate's, limit, buffer (the
/// bucket, in scheduler ticks of 64 ns), mtu.
const TBF_LINKLAYER_OFFSET: usize = 1;
const TBF_OVERHEAD_OFFSET: usize = 2;
const TBF_MPU_OFFSET: usize = 6;
const TBF_RATE_OFFSET: usize = 8;
const TBF_BUFFER_OFFSET: usize = 28;
/// `TC_LINKLAYER_ATM` in the ratespec's link layer (low 4 bits).
const LINKLAYER_ATM: u8 = 2;
/// Nanoseconds per scheduler tick (PSCHED_SHIFT 6).
const NS_PER_PSCHED_TICK: u64 = 64;
const TC_H_ROOT: u32 = 0xFFFF_FFFF;
const NLMSG_HEADER: usize = 16;
const TCMSG: usize = 20;

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// The root qdisc of an interface.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Qdisc {
    pub kind: String,
    /// Shaping rate of a tbf qdisc.
    pub rate_bits_per_second: Option<u64>,
    /// tbf: bytes it adds to every packet it counts (`tc ... overhead N`).
    pub overhead_bytes: u16,
    /// tbf: smallest size it counts a packet as (`mpu N`).
    pub mpu_bytes: u16,
    /// tbf: counts 53-byte ATM cells of 48 bytes (`linklayer atm`).
    pub atm: bool,
    /// tbf: size of its bucket, the burst it lets through at once after
    /// an idle moment, in the bytes it counts.
    pub burst_bytes: Option<u64>,
}

/// The root qdisc of interface `ifindex`.
pub fn root_qdisc(ifindex: i32) -> Option<Qdisc> {
    dump_root(ifindex, parse_qdisc)
}

/// What a qdisc holds at one moment (`tc -s qdisc`'s "backlog 12000b 8p").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    pub bytes: u64,
    pub packets: u64,
}

/// The backlog of the root qdisc of interface `ifindex` in the calling
/// thread's network namespace (a multiqueue root, mq, holds the sum of its
/// children's); None when the kernel does not say.
pub fn root_backlog(ifindex: i32) -> Option<Backlog> {
    dump_root(ifindex, parse_backlog).flatten()
}

/// What a qdisc has done since it was created (`tc -s qdisc`'s "Sent
/// 1514000 bytes 1000 pkt (dropped 3, overlimits 40 requeues 0)").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub sent_bytes: u64,
    pub sent_packets: u64,
    /// Packets it threw away: for a tbf, arrivals that found its queue full.
    pub dropped_packets: u64,
    /// Times it held a packet back: for a tbf, a dequeue that found too few
    /// tokens in its bucket.
    pub overlimits: u64,
}

impl Counters {
    /// What happened between `earlier` and this reading; None when a
    /// counter went backwards (the qdisc was replaced meanwhile, which
    /// starts its counters again).
    pub fn since(&self, earlier: &Counters) -> Option<Counters> {
        Some(Counters {
            sent_bytes: self.sent_bytes.checked_sub(earlier.sent_bytes)?,
            sent_packets: self.sent_packets.checked_sub(earlier.sent_packets)?,
            dropped_packets: self.dropped_packets.checked_sub(earlier.dropped_packets)?,
            overlimits: self.overlimits.checked_sub(earlier.overlimits)?,
        })
    }
}

/// The counters of the root qdisc of interface `ifindex` in the calling
/// thread's network namespace; None when the kernel does not say. The
/// kernel's packet, drop and overlimit counters are 32 bits wide.
pub fn root_counters(ifindex: i32) -> Option<Counters> {
    dump_root(ifindex, parse_counters).flatten()
}

/// Dumps the qdiscs and reads the root one of `ifindex` with `parse`.
fn dump_root<T>(ifindex: i32, parse: fn(&[u8]) -> T) -> Option<T> {
    let mut request = [0u8; NLMSG_HEADER + TCMSG];
    request[0..4].copy_from_slice(&((NLMSG_HEADER + TCMSG) as u32).to_ne_bytes());
    request[4..6].copy_from_slice(&RTM_GETQDISC.to_ne_bytes());
    request[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    request[8..12].copy_from_slice(&1u32.to_ne_bytes());
    request[NLMSG_HEADER + 4..NLMSG_HEADER + 8].copy_from_slice(&ifindex.to_ne_bytes());
    let fd = ask_kernel(&request).ok()?;
    let mut buffer = vec![0u8; 64 * 1024];
    let mut found = None;
    for _ in 0..1000 {
        // SAFETY: receiving into our buffer.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len(), 0) };
        if n <= 0 {
            return found;
        }
        match parse_dump_with(&buffer[..n as usize], ifindex, parse) {
            Dump::More(kind) => found = found.or(kind),
            Dump::Done(kind) => return found.or(kind),
        }
    }
    found
}

const NLM_F_ACK: u16 = 4;
const NLM_F_REPLACE: u16 = 0x100;
const NLM_F_CREATE: u16 = 0x400;

/// The RTM_NEWQDISC request that makes `kind` (without parameters) the
/// root qdisc of `ifindex`, replacing the one there (`tc qdisc replace dev
/// X root KIND`); handle 0 lets the kernel choose one.
fn replace_request(ifindex: i32, kind: &str, sequence: u32) -> Vec<u8> {
    let kind_attr_len = 4 + kind.len() + 1;
    let length = NLMSG_HEADER + TCMSG + align4(kind_attr_len);
    let mut m = vec![0u8; length];
    m[0..4].copy_from_slice(&(length as u32).to_ne_bytes());
    m[4..6].copy_from_slice(&RTM_NEWQDISC.to_ne_bytes());
    m[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE).to_ne_bytes());
    m[8..12].copy_from_slice(&sequence.to_ne_bytes());
    // struct tcmsg: family (AF_UNSPEC), pads, ifindex, handle, parent, info.
    let tc = NLMSG_HEADER;
    m[tc + 4..tc + 8].copy_from_slice(&ifindex.to_ne_bytes());
    m[tc + 12..tc + 16].copy_from_slice(&TC_H_ROOT.to_ne_bytes());
    let a = NLMSG_HEADER + TCMSG;
    m[a..a + 2].copy_from_slice(&(kind_attr_len as u16).to_ne_bytes());
    m[a + 2..a + 4].copy_from_slice(&TCA_KIND.to_ne_bytes());
    m[a + 4..a + 4 + kind.len()].copy_from_slice(kind.as_bytes());
    m
}

/// The kernel's answer to a request with NLM_F_ACK: an NLMSG_ERROR whose
/// first word is 0 (done) or minus the errno. None when `data` holds none.
fn ack_of(data: &[u8]) -> Option<std::io::Result<()>> {
    let mut data = data;
    while data.len() >= NLMSG_HEADER {
        let length = u32::from_ne_bytes([data[0], data[1], data[2], data[3]]) as usize;
        if length < NLMSG_HEADER || length > data.len() {
            return None;
        }
        if u16::from_ne_bytes([data[4], data[5]]) == NLMSG_ERROR && length >= NLMSG_HEADER + 4 {
            let b = &data[NLMSG_HEADER..NLMSG_HEADER + 4];
            let code = i32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
            return Some(if code == 0 {
                Ok(())
            } else {
                Err(std::io::Error::from_raw_os_error(-code))
            });
        }
        data = &data[align4(length).min(data.len())..];
    }
    None
}

/// Makes `kind` the root qdisc of interface `ifindex` (needs
/// CAP_NET_ADMIN); the kernel's refusal as its errno (ENOENT: no such
/// qdisc in this kernel).
pub fn replace_root(ifindex: i32, kind: &str) -> std::io::Result<()> {
    if kind.is_empty() || kind.len() > 15 || !kind.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("'{kind}' is not a qdisc kind"),
        ));
    }
    let fd = ask_kernel(&replace_request(ifindex, kind, 1))?;
    let mut buffer = vec![0u8; 16 * 1024];
    for _ in 0..16 {
        // SAFETY: receiving into our buffer.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len(), 0) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if let Some(answer) = ack_of(&buffer[..n as usize]) {
            return answer;
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "the kernel did not acknowledge the qdisc change",
    ))
}

/// Sends `request` to the kernel on a new NETLINK_ROUTE socket, which it
/// returns for the answer (with a receive deadline of a second).
fn ask_kernel(request: &[u8]) -> std::io::Result<OwnedFd> {
    // SAFETY: plain socket(2); owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let timeout = libc::timeval { tv_sec: 1, tv_usec: 0 };
    // SAFETY: valid option struct and size.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as u32,
        );
    }
    // SAFETY: sending our buffer to the kernel (a zeroed sockaddr_nl is the kernel).
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as u16;
    let sent = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            request.as_ptr().cast(),
            request.len(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if sent < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

/// What one datagram of the dump held.
#[derive(Debug, PartialEq)]
enum Dump<T> {
    More(Option<T>),
    Done(Option<T>),
}

/// Finds the root qdisc of `ifindex` among the messages of one datagram.
#[cfg(test)]
fn parse_dump(data: &[u8], ifindex: i32) -> Dump<Qdisc> {
    parse_dump_with(data, ifindex, parse_qdisc)
}

/// Reads the root qdisc of `ifindex` with `parse` from the messages of one
/// datagram.
fn parse_dump_with<T>(mut data: &[u8], ifindex: i32, parse: fn(&[u8]) -> T) -> Dump<T> {
    let u16_at = |d: &[u8], i: usize| u16::from_ne_bytes([d[i], d[i + 1]]);
    let u32_at = |d: &[u8], i: usize| u32::from_ne_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]]);
    let mut kind = None;
    while data.len() >= NLMSG_HEADER {
        let length = u32_at(data, 0) as usize;
        if length < NLMSG_HEADER || length > data.len() {
            return Dump::Done(kind);
        }
        let message_type = u16_at(data, 4);
        if message_type == NLMSG_DONE || message_type == NLMSG_ERROR {
            return Dump::Done(kind);
        }
        let body = &data[NLMSG_HEADER..length];
        if message_type == RTM_NEWQDISC && body.len() >= TCMSG {
            let index = u32_at(body, 4) as i32;
            let parent = u32_at(body, 12);
            if index == ifindex && parent == TC_H_ROOT {
                kind = Some(parse(&body[TCMSG..]));
            }
        }
        data = &data[align4(length).min(data.len())..];
    }
    Dump::More(kind)
}

/// Netlink attributes: (type, value) pairs, 4-byte aligned.
fn attributes(mut data: &[u8]) -> Vec<(u16, &[u8])> {
    let mut list = Vec::new();
    while data.len() >= 4 {
        let length = u16::from_ne_bytes([data[0], data[1]]) as usize;
        if length < 4 || length > data.len() {
            break;
        }
        // The top bit marks nested attributes; the type is below it.
        let kind = u16::from_ne_bytes([data[2], data[3]]) & 0x3fff;
        list.push((kind, &data[4..length]));
        data = &data[align4(length).min(data.len())..];
    }
    list
}

fn parse_qdisc(attrs: &[u8]) -> Qdisc {
    let mut qdisc = Qdisc::default();
    let mut options: &[u8] = &[];
    for (kind, value) in attributes(attrs) {
        match kind {
            TCA_KIND => {
                let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
                qdisc.kind = String::from_utf8_lossy(&value[..end]).into_owned();
            }
            TCA_OPTIONS => options = value,
            _ => {}
        }
    }
    if qdisc.kind == "tbf" {
        parse_tbf(options, &mut qdisc);
    }
    qdisc
}

/// The backlog in a qdisc's TCA_STATS2 → TCA_STATS_QUEUE (`struct
/// gnet_stats_queue`: qlen, backlog, drops, requeues, overlimits).
fn parse_backlog(attrs: &[u8]) -> Option<Backlog> {
    let u32_at = |d: &[u8], i: usize| u32::from_ne_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]]);
    let stats = attributes(attrs).into_iter().find(|(kind, _)| *kind == TCA_STATS2)?.1;
    let queue = attributes(stats)
        .into_iter()
        .find(|(kind, value)| *kind == TCA_STATS_QUEUE && value.len() >= 8)?
        .1;
    Some(Backlog {
        packets: u64::from(u32_at(queue, 0)),
        bytes: u64::from(u32_at(queue, 4)),
    })
}

/// The counters in a qdisc's TCA_STATS2: TCA_STATS_BASIC (bytes u64,
/// packets u32) and TCA_STATS_QUEUE (drops at offset 8, overlimits at 16).
fn parse_counters(attrs: &[u8]) -> Option<Counters> {
    let u32_at = |d: &[u8], i: usize| u64::from(u32::from_ne_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]]));
    let stats = attributes(attrs).into_iter().find(|(kind, _)| *kind == TCA_STATS2)?.1;
    let parts = attributes(stats);
    let basic = parts
        .iter()
        .find(|(kind, value)| *kind == TCA_STATS_BASIC && value.len() >= 12)?
        .1;
    let queue = parts
        .iter()
        .find(|(kind, value)| *kind == TCA_STATS_QUEUE && value.len() >= 20)?
        .1;
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&basic[..8]);
    Some(Counters {
        sent_bytes: u64::from_ne_bytes(bytes),
        sent_packets: u32_at(basic, 8),
        dropped_packets: u32_at(queue, 8),
        overlimits: u32_at(queue, 16),
    })
}

fn parse_tbf(options: &[u8], qdisc: &mut Qdisc) {
    let u16_at = |d: &[u8], i: usize| u16::from_ne_bytes([d[i], d[i + 1]]);
    let u32_at = |d: &[u8], i: usize| u32::from_ne_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]]);
    let mut rate = None;
    let mut buffer_ticks = None;
    for (kind, value) in attributes(options) {
        match kind {
            TCA_TBF_PARMS if value.len() >= TBF_RATE_OFFSET + 4 => {
                rate = rate.or(Some(u64::from(u32_at(value, TBF_RATE_OFFSET))));
                qdisc.atm = value[TBF_LINKLAYER_OFFSET] & 0x0f == LINKLAYER_ATM;
                qdisc.overhead_bytes = u16_at(value, TBF_OVERHEAD_OFFSET);
                qdisc.mpu_bytes = u16_at(value, TBF_MPU_OFFSET);
                if value.len() >= TBF_BUFFER_OFFSET + 4 {
                    buffer_ticks = Some(u64::from(u32_at(value, TBF_BUFFER_OFFSET)));
                }
            }
            // Rates of 4 GB/s and more do not fit the 32-bit field.
            TCA_TBF_RATE64 if value.len() >= 8 => {
                let bytes: [u8; 8] = value[..8].try_into().unwrap_or_default();
                rate = Some(u64::from_ne_bytes(bytes));
            }
            _ => {}
        }
    }
    let rate = rate.filter(|&r| r > 0);
    qdisc.rate_bits_per_second = rate.map(|r| r * 8);
    // The bucket holds `buffer` worth of time at the rate.
    qdisc.burst_bytes = match (rate, buffer_ticks) {
        (Some(r), Some(t)) if t > 0 => {
            Some((t as u128 * NS_PER_PSCHED_TICK as u128 * r as u128 / 1_000_000_000) as u64)
        }
        _ => None,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
        a.extend_from_slice(&kind.to_ne_bytes());
        a.extend_from_slice(value);
        a.resize(align4(a.len()), 0);
        a
    }

    fn message(ifindex: i32, parent: u32, kind: &str) -> Vec<u8> {
        message_with(ifindex, parent, kind, &[])
    }

    fn message_with(ifindex: i32, parent: u32, kind: &str, options: &[u8]) -> Vec<u8> {
        let mut attrs = attr(TCA_KIND, format!("{kind}\0").as_bytes());
        if !options.is_empty() {
            attrs.extend(attr(TCA_OPTIONS | 0x8000, options));
        }
        let mut tc = vec![0u8; TCMSG];
        tc[4..8].copy_from_slice(&ifindex.to_ne_bytes());
        tc[12..16].copy_from_slice(&parent.to_ne_bytes());
        let length = NLMSG_HEADER + tc.len() + attrs.len();
        let mut m = Vec::new();
        m.extend_from_slice(&(length as u32).to_ne_bytes());
        m.extend_from_slice(&RTM_NEWQDISC.to_ne_bytes());
        m.extend_from_slice(&[0u8; 10]);
        m.extend(tc);
        m.extend(attrs);
        m
    }

    /// A root tbf's stats as the kernel dumps them: the backlog is read
    /// from TCA_STATS2's queue part, another interface's is not taken.
    #[test]
    fn the_backlog_is_read_from_the_root_qdiscs_queue_stats() {
        let mut queue = Vec::new();
        for word in [8u32, 12_000, 3, 0, 40] {
            queue.extend_from_slice(&word.to_ne_bytes());
        }
        let stats = attr(TCA_STATS2 | 0x8000, &attr(TCA_STATS_QUEUE, &queue));
        let with_stats = |ifindex: i32| {
            let mut m = message(ifindex, TC_H_ROOT, "tbf");
            m.extend(&stats);
            let length = m.len() as u32;
            m[0..4].copy_from_slice(&length.to_ne_bytes());
            m
        };
        let mut data = with_stats(7);
        data.extend(with_stats(3));
        assert_eq!(
            parse_dump_with(&data, 3, parse_backlog),
            Dump::More(Some(Some(Backlog {
                bytes: 12_000,
                packets: 8
            })))
        );
        assert_eq!(
            parse_dump_with(&message(3, TC_H_ROOT, "tbf"), 3, parse_backlog),
            Dump::More(Some(None))
        );
    }

    /// `tc -s`'s Sent/dropped/overlimits come from the basic and queue
    /// parts of TCA_STATS2; a dump without both parts says nothing.
    #[test]
    fn the_counters_are_read_from_the_basic_and_queue_stats() {
        let mut basic = 3_028_000u64.to_ne_bytes().to_vec();
        basic.extend_from_slice(&2000u32.to_ne_bytes());
        basic.extend_from_slice(&[0u8; 4]);
        let mut queue = Vec::new();
        for word in [8u32, 12_000, 17, 0, 4_321] {
            queue.extend_from_slice(&word.to_ne_bytes());
        }
        let both = [attr(TCA_STATS_BASIC, &basic), attr(TCA_STATS_QUEUE, &queue)].concat();
        let with = |stats: &[u8]| {
            let mut m = message(3, TC_H_ROOT, "tbf");
            m.extend(attr(TCA_STATS2 | 0x8000, stats));
            let length = m.len() as u32;
            m[0..4].copy_from_slice(&length.to_ne_bytes());
            m
        };
        let read = Counters {
            sent_bytes: 3_028_000,
            sent_packets: 2000,
            dropped_packets: 17,
            overlimits: 4_321,
        };
        assert_eq!(
            parse_dump_with(&with(&both), 3, parse_counters),
            Dump::More(Some(Some(read)))
        );
        let queue_only = attr(TCA_STATS_QUEUE, &queue);
        assert_eq!(
            parse_dump_with(&with(&queue_only), 3, parse_counters),
            Dump::More(Some(None))
        );
        let earlier = Counters {
            sent_bytes: 28_000,
            sent_packets: 1000,
            dropped_packets: 7,
            overlimits: 321,
        };
        assert_eq!(
            read.since(&earlier),
            Some(Counters {
                sent_bytes: 3_000_000,
                sent_packets: 1000,
                dropped_packets: 10,
                overlimits: 4_000,
            })
        );
        assert_eq!(earlier.since(&read), None, "a replaced qdisc starts again");
    }

    #[test]
    fn finds_the_root_qdisc_of_the_interface() {
        let mut data = message(3, 0x0001_0001, "pfifo");
        data.extend(message(2, TC_H_ROOT, "fq_codel"));
        data.extend(message(3, TC_H_ROOT, "tbf"));
        let found = |kind: &str| {
            Dump::More(Some(Qdisc {
                kind: kind.into(),
                ..Qdisc::default()
            }))
        };
        assert_eq!(parse_dump(&data, 3), found("tbf"));
        assert_eq!(parse_dump(&data, 2), found("fq_codel"));
        assert_eq!(parse_dump(&data, 9), Dump::More(None));
    }

    #[test]
    fn tbf_rate_comes_from_its_parameters_or_the_64_bit_rate() {
        // tc_tbf_qopt: rate spec (rate at byte 8), peak rate spec, limit, buffer, mtu.
        let mut parms = vec![0u8; 36];
        parms[8..12].copy_from_slice(&12_500_000u32.to_ne_bytes());
        let data = message_with(4, TC_H_ROOT, "tbf", &attr(TCA_TBF_PARMS, &parms));
        let Dump::More(Some(q)) = parse_dump(&data, 4) else {
            panic!("no qdisc")
        };
        assert_eq!(q.rate_bits_per_second, Some(100_000_000));
        let mut options = attr(TCA_TBF_PARMS, &parms);
        options.extend(attr(TCA_TBF_RATE64, &50_000_000_000u64.to_ne_bytes()));
        let data = message_with(4, TC_H_ROOT, "tbf", &options);
        let Dump::More(Some(q)) = parse_dump(&data, 4) else {
            panic!("no qdisc")
        };
        assert_eq!(q.rate_bits_per_second, Some(400_000_000_000));
    }

    #[test]
    fn tbf_accounting_and_bucket_come_from_its_ratespec() {
        // 1 Gbit/s, overhead 24, mpu 64, linklayer ethernet, a 500000-byte
        // bucket: 4 ms = 62500 ticks of 64 ns.
        let mut parms = vec![0u8; 36];
        parms[1] = 1;
        parms[2..4].copy_from_slice(&24u16.to_ne_bytes());
        parms[6..8].copy_from_slice(&64u16.to_ne_bytes());
        parms[8..12].copy_from_slice(&125_000_000u32.to_ne_bytes());
        parms[28..32].copy_from_slice(&62_500u32.to_ne_bytes());
        let data = message_with(4, TC_H_ROOT, "tbf", &attr(TCA_TBF_PARMS, &parms));
        let Dump::More(Some(q)) = parse_dump(&data, 4) else {
            panic!("no qdisc")
        };
        assert_eq!(q.rate_bits_per_second, Some(1_000_000_000));
        assert_eq!((q.overhead_bytes, q.mpu_bytes, q.atm), (24, 64, false));
        assert_eq!(q.burst_bytes, Some(500_000));
        parms[1] = 2;
        let data = message_with(4, TC_H_ROOT, "tbf", &attr(TCA_TBF_PARMS, &parms));
        let Dump::More(Some(q)) = parse_dump(&data, 4) else {
            panic!("no qdisc")
        };
        assert!(q.atm);
    }

    #[test]
    fn the_replace_request_is_a_root_newqdisc_with_its_kind() {
        let m = replace_request(7, "pfifo", 9);
        assert_eq!(m.len() % 4, 0);
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()) as usize, m.len());
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), RTM_NEWQDISC);
        assert_eq!(u16::from_ne_bytes([m[6], m[7]]), 0x505);
        assert_eq!(u32::from_ne_bytes(m[8..12].try_into().unwrap()), 9);
        let tc = &m[NLMSG_HEADER..NLMSG_HEADER + TCMSG];
        assert_eq!(i32::from_ne_bytes(tc[4..8].try_into().unwrap()), 7);
        assert_eq!(
            u32::from_ne_bytes(tc[8..12].try_into().unwrap()),
            0,
            "handle: the kernel's choice"
        );
        assert_eq!(u32::from_ne_bytes(tc[12..16].try_into().unwrap()), TC_H_ROOT);
        let attrs = attributes(&m[NLMSG_HEADER + TCMSG..]);
        assert_eq!(attrs, vec![(TCA_KIND, &b"pfifo\0"[..])]);
    }

    #[test]
    fn the_ack_is_zero_or_minus_the_errno() {
        let ack = |code: i32| {
            let mut m = vec![0u8; NLMSG_HEADER + 20];
            let len = m.len() as u32;
            m[0..4].copy_from_slice(&len.to_ne_bytes());
            m[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
            m[NLMSG_HEADER..NLMSG_HEADER + 4].copy_from_slice(&code.to_ne_bytes());
            m
        };
        assert!(ack_of(&ack(0)).unwrap().is_ok());
        let e = ack_of(&ack(-libc::ENOENT)).unwrap().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        assert!(ack_of(&message(3, TC_H_ROOT, "tbf")).is_none());
        assert!(ack_of(&[0u8; 5]).is_none());
        assert!(replace_root(1, "x; rm").is_err());
    }

    #[test]
    fn truncated_messages_end_the_parse() {
        let data = message(3, TC_H_ROOT, "tbf");
        assert_eq!(parse_dump(&data[..30], 3), Dump::Done(None));
        assert_eq!(parse_dump(&[], 3), Dump::More(None));
    }
}
