//! The root qdisc of an interface. sysfs does not name it, so this asks the
//! kernel over a raw rtnetlink socket (RTM_GETQDISC dump, parsed here; no
//! crate and no `tc` process). Any failure reads as "unknown" (None).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const RTM_NEWQDISC: u16 = 36;
const RTM_GETQDISC: u16 = 38;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const TCA_KIND: u16 = 1;
const TC_H_ROOT: u32 = 0xFFFF_FFFF;
const NLMSG_HEADER: usize = 16;
const TCMSG: usize = 20;

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// The kind of the root qdisc of interface `ifindex`.
pub fn root_qdisc(ifindex: i32) -> Option<String> {
    // SAFETY: plain socket(2); owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return None;
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
    let mut request = [0u8; NLMSG_HEADER + TCMSG];
    request[0..4].copy_from_slice(&((NLMSG_HEADER + TCMSG) as u32).to_ne_bytes());
    request[4..6].copy_from_slice(&RTM_GETQDISC.to_ne_bytes());
    request[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    request[8..12].copy_from_slice(&1u32.to_ne_bytes());
    request[NLMSG_HEADER + 4..NLMSG_HEADER + 8].copy_from_slice(&ifindex.to_ne_bytes());
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
        return None;
    }
    let mut buffer = vec![0u8; 64 * 1024];
    let mut found = None;
    for _ in 0..1000 {
        // SAFETY: receiving into our buffer.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len(), 0) };
        if n <= 0 {
            return found;
        }
        match parse_dump(&buffer[..n as usize], ifindex) {
            Dump::More(kind) => found = found.or(kind),
            Dump::Done(kind) => return found.or(kind),
        }
    }
    found
}

/// What one datagram of the dump held.
#[derive(Debug, PartialEq)]
enum Dump {
    More(Option<String>),
    Done(Option<String>),
}

/// Finds the root qdisc of `ifindex` among the messages of one datagram.
fn parse_dump(mut data: &[u8], ifindex: i32) -> Dump {
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
                let mut attrs = &body[TCMSG..];
                while attrs.len() >= 4 {
                    let attr_length = u16_at(attrs, 0) as usize;
                    if attr_length < 4 || attr_length > attrs.len() {
                        break;
                    }
                    if u16_at(attrs, 2) == TCA_KIND {
                        let value = &attrs[4..attr_length];
                        let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
                        kind = Some(String::from_utf8_lossy(&value[..end]).into_owned());
                    }
                    attrs = &attrs[align4(attr_length).min(attrs.len())..];
                }
            }
        }
        data = &data[align4(length).min(data.len())..];
    }
    Dump::More(kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(ifindex: i32, parent: u32, kind: &str) -> Vec<u8> {
        let mut attr = Vec::new();
        let value_len = kind.len() + 1;
        attr.extend_from_slice(&((4 + value_len) as u16).to_ne_bytes());
        attr.extend_from_slice(&TCA_KIND.to_ne_bytes());
        attr.extend_from_slice(kind.as_bytes());
        attr.push(0);
        attr.resize(align4(attr.len()), 0);
        let mut tc = vec![0u8; TCMSG];
        tc[4..8].copy_from_slice(&ifindex.to_ne_bytes());
        tc[12..16].copy_from_slice(&parent.to_ne_bytes());
        let length = NLMSG_HEADER + tc.len() + attr.len();
        let mut m = Vec::new();
        m.extend_from_slice(&(length as u32).to_ne_bytes());
        m.extend_from_slice(&RTM_NEWQDISC.to_ne_bytes());
        m.extend_from_slice(&[0u8; 10]);
        m.extend(tc);
        m.extend(attr);
        m
    }

    #[test]
    fn finds_the_root_qdisc_of_the_interface() {
        let mut data = message(3, 0x0001_0001, "pfifo");
        data.extend(message(2, TC_H_ROOT, "fq_codel"));
        data.extend(message(3, TC_H_ROOT, "tbf"));
        assert_eq!(parse_dump(&data, 3), Dump::More(Some("tbf".into())));
        assert_eq!(parse_dump(&data, 9), Dump::More(None));
    }

    #[test]
    fn truncated_messages_end_the_parse() {
        let data = message(3, TC_H_ROOT, "tbf");
        assert_eq!(parse_dump(&data[..30], 3), Dump::Done(None));
        assert_eq!(parse_dump(&[], 3), Dump::More(None));
    }
}
