//! One MPTCP connection's figures, read back from the kernel with
//! getsockopt(SOL_MPTCP): MPTCP_INFO for the connection, MPTCP_TCPINFO and
//! MPTCP_SUBFLOW_ADDRS for each subflow, or the fact that it fell back to plain
//! TCP (then the one TCP connection's own TCP_INFO).
//!
//! The struct layouts are the kernel's uapi `include/uapi/linux/mptcp.h` (as of
//! Linux 6.18: `struct mptcp_info` of 96 bytes, `struct mptcp_subflow_data`,
//! `struct mptcp_subflow_addrs`), and the size rules those of `net/mptcp/sockopt.c`:
//! the kernel copies the smaller of its struct and ours and says how much, so an
//! older kernel's shorter struct leaves the later fields unset (None here), never
//! read as zeros.

use std::io;
use std::mem::{offset_of, size_of, size_of_val};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use serde::{Deserialize, Serialize};
use socket2::SockRef;

use super::{MptcpError, IPPROTO_MPTCP, MPTCP_INFO, MPTCP_SUBFLOW_ADDRS, MPTCP_TCPINFO, SOL_MPTCP};

const MPTCP_INFO_FLAG_FALLBACK: u32 = 1 << 0;
const MPTCP_INFO_FLAG_REMOTE_KEY_RECEIVED: u32 = 1 << 1;
/// How often the two subflow reads are retried when a subflow joins or closes
/// between them (their lists would not pair up).
const SUBFLOW_READ_TRIES: usize = 3;

/// `struct mptcp_info` (uapi/linux/mptcp.h, Linux 6.18). Fields came in steps:
/// up to `mptcpi_rcv_nxt` (40 bytes) with 5.16's getsockopt, the local address
/// counts and checksum flag next (48), the byte counters in 6.5 (80), the
/// subflow total and the idle times in 6.10 (96). repr(C) leaves the same holes
/// as the C compiler (after `add_addr_accepted_max` and `csum_enabled`).
#[repr(C)]
#[derive(Clone, Copy)]
#[allow(dead_code)] // the kernel's whole layout, of which only some fields are reported
struct RawMptcpInfo {
    mptcpi_subflows: u8,
    mptcpi_add_addr_signal: u8,
    mptcpi_add_addr_accepted: u8,
    mptcpi_subflows_max: u8,
    mptcpi_add_addr_signal_max: u8,
    mptcpi_add_addr_accepted_max: u8,
    mptcpi_flags: u32,
    mptcpi_token: u32,
    mptcpi_write_seq: u64,
    mptcpi_snd_una: u64,
    mptcpi_rcv_nxt: u64,
    mptcpi_local_addr_used: u8,
    mptcpi_local_addr_max: u8,
    mptcpi_csum_enabled: u8,
    mptcpi_retransmits: u32,
    mptcpi_bytes_retrans: u64,
    mptcpi_bytes_sent: u64,
    mptcpi_bytes_received: u64,
    mptcpi_bytes_acked: u64,
    mptcpi_subflows_total: u8,
    mptcpi_endp_laminar_max: u8,
    mptcpi_endp_fullmesh_max: u8,
    reserved: u8,
    mptcpi_last_data_sent: u32,
    mptcpi_last_data_recv: u32,
    mptcpi_last_ack_recv: u32,
}

/// `struct mptcp_subflow_data`, the header of MPTCP_TCPINFO and
/// MPTCP_SUBFLOW_ADDRS: we say how big the header and one element are
/// (`size_subflow_data`, `size_user`); the kernel says how many subflows there
/// are, how big its element is, and rewrites `size_user` to the stride it used.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct RawSubflowData {
    size_subflow_data: u32,
    num_subflows: u32,
    size_kernel: u32,
    size_user: u32,
}

/// `struct mptcp_subflow_addrs`: two unions, each as large as a
/// `__kernel_sockaddr_storage`, holding a `sockaddr_in` or `sockaddr_in6`.
#[repr(C)]
#[derive(Clone, Copy)]
struct RawSubflowAddrs {
    local: libc::sockaddr_storage,
    remote: libc::sockaddr_storage,
}

// The sizes and offsets the kernel's header gives; a mistake here would read
// every later field from the wrong bytes.
const _: () = assert!(size_of::<RawMptcpInfo>() == 96);
const _: () = assert!(offset_of!(RawMptcpInfo, mptcpi_flags) == 8);
const _: () = assert!(offset_of!(RawMptcpInfo, mptcpi_write_seq) == 16);
const _: () = assert!(offset_of!(RawMptcpInfo, mptcpi_local_addr_used) == 40);
const _: () = assert!(offset_of!(RawMptcpInfo, mptcpi_retransmits) == 44);
const _: () = assert!(offset_of!(RawMptcpInfo, mptcpi_bytes_acked) == 72);
const _: () = assert!(offset_of!(RawMptcpInfo, mptcpi_subflows_total) == 80);
const _: () = assert!(offset_of!(RawMptcpInfo, mptcpi_last_ack_recv) == 92);
const _: () = assert!(size_of::<RawSubflowData>() == 16);
const _: () = assert!(size_of::<RawSubflowAddrs>() == 256);

/// Types every bit pattern is a valid value of, so bytes the kernel wrote may be
/// copied into one.
///
/// # Safety
/// Implement only for repr(C) structs of integers and arrays of them.
unsafe trait Plain: Copy {}
// SAFETY: integers and byte arrays only.
unsafe impl Plain for RawMptcpInfo {}
unsafe impl Plain for RawSubflowData {}
unsafe impl Plain for RawSubflowAddrs {}
unsafe impl Plain for libc::tcp_info {}

/// A `T` holding the first bytes of `bytes` (as many as both have), zeros after.
fn from_prefix<T: Plain>(bytes: &[u8]) -> T {
    // SAFETY: T is Plain, so all zeros and any copied bytes make a valid value;
    // the copy stays within both.
    unsafe {
        let mut value: T = std::mem::zeroed();
        let n = bytes.len().min(size_of::<T>());
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), &mut value as *mut T as *mut u8, n);
        value
    }
}

/// One MPTCP connection as its end's kernel counts it. On a fallback to plain
/// TCP only `fallback` and `subflows` (the one TCP connection) are filled: the
/// MPTCP-level fields stay zero or None. Fields marked with a Linux release are
/// None on older kernels, whose `struct mptcp_info` is shorter.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MptcpConnection {
    /// The connection runs as plain TCP: the peer (or a middlebox) did not
    /// take MPTCP, or the kernel dropped it (the getsockopt answers EOPNOTSUPP,
    /// or MPTCP_INFO_FLAG_FALLBACK is set).
    pub fallback: bool,
    /// The peer's key arrived (MPTCP_INFO_FLAG_REMOTE_KEY_RECEIVED).
    pub remote_key_received: bool,
    /// The connection's token, as `ss -M` and `ip mptcp monitor` name it.
    pub token: u32,
    /// Every subflow the kernel listed, the initial one included.
    pub subflows: Vec<Subflow>,
    /// Subflows beyond the initial one (`mptcpi_subflows`, the kernel's
    /// `mptcpi_extra_subflows`).
    pub extra_subflows: u8,
    /// The path manager's limit on them (`mptcpi_subflows_max`).
    pub extra_subflows_max: u8,
    /// Subflows in all, the initial one included (`mptcpi_subflows_total`, 6.10+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subflows_total: Option<u8>,
    /// Addresses this end announced to the peer (ADD_ADDR sent).
    pub add_addr_signal: u8,
    /// The endpoints flagged `signal`, the most it could announce.
    pub add_addr_signal_max: u8,
    /// Addresses the peer announced that this end accepted.
    pub add_addr_accepted: u8,
    /// The limit on them (`ip mptcp limits ... add_addr_accepted`).
    pub add_addr_accepted_max: u8,
    /// Local endpoints used to open subflows (5.14+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_addr_used: Option<u8>,
    /// The endpoints flagged `subflow`, the most it could use (5.14+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_addr_max: Option<u8>,
    /// DSS checksums are on (5.14+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_enabled: Option<bool>,
    /// MPTCP-level retransmission timeouts in a row (6.5+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u32>,
    /// Data bytes handed to subflows for the first time, each byte once (6.5+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_sent: Option<u64>,
    /// Data bytes sent again on a subflow after another failed to deliver
    /// them (MPTCP-level reinjections, 6.5+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_retrans: Option<u64>,
    /// Data bytes the peer acknowledged at the MPTCP level (DATA_ACK, 6.5+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_acked: Option<u64>,
    /// Data bytes received in order at the MPTCP level, duplicates dropped (6.5+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_received: Option<u64>,
    /// Milliseconds since the connection last sent data (6.10+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_data_sent_ms: Option<u32>,
    /// Milliseconds since it last received data (6.10+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_data_received_ms: Option<u32>,
    /// Milliseconds since it last received a DATA_ACK (6.10+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_ack_received_ms: Option<u32>,
}

/// One subflow: its addresses, from MPTCP_SUBFLOW_ADDRS, and its own TCP_INFO,
/// from MPTCP_TCPINFO. Its byte counts are TCP's, so they include the
/// subflow's own retransmissions; fields marked with a release are None when
/// the kernel's `struct tcp_info` is older.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subflow {
    /// 0.0.0.0:0 only when the kernel gave no address (a family it did not fill).
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// The TCP state, `ESTABLISHED` while it carries data.
    pub state: String,
    /// Payload bytes sent, retransmissions included (`tcpi_bytes_sent`, 4.19+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_sent: Option<u64>,
    /// Of those, bytes retransmitted (`tcpi_bytes_retrans`, 4.19+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_retrans: Option<u64>,
    /// Bytes the peer acknowledged; the SYN counts as one (`tcpi_bytes_acked`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_acked: Option<u64>,
    /// Payload bytes received in order (`tcpi_bytes_received`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_received: Option<u64>,
    /// Segments retransmitted over the subflow's life (`tcpi_total_retrans`).
    pub total_retrans: u32,
    pub rtt_us: u32,
    pub rtt_var_us: u32,
    /// The smallest RTT seen (`tcpi_min_rtt`, 4.6+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_rtt_us: Option<u32>,
    pub congestion_window_segments: u32,
    pub send_mss_bytes: u32,
    /// The delivery rate of the last acknowledged data (`tcpi_delivery_rate`, 4.9+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_rate_bits_per_second: Option<f64>,
    /// The kernel's pacing rate; None when unlimited (`tcpi_pacing_rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_rate_bits_per_second: Option<f64>,
    /// Time with data outstanding (`tcpi_busy_time`, 4.10+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_us: Option<u64>,
    /// Milliseconds since the subflow last sent data: a large value on a busy
    /// connection is a subflow the scheduler left idle.
    pub last_data_sent_ms: u32,
    pub last_data_received_ms: u32,
    /// This end's interface of the subflow (the one holding `local`): its
    /// name, MTU, link speed and tbf rate, so the verdict can weigh each
    /// path against its own line rate. Filled by the transport, not read
    /// from the socket; None where the address is no local interface's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<crate::model::LinkEnd>,
    /// Seconds after this end's stream began that the subflow was first
    /// seen ([`super::JoinWatch`], polled every millisecond for the first
    /// 200 ms, then every 10 ms); 0 for one up already then. Filled by the
    /// transport; None where nothing watched the connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joined_after_seconds: Option<f64>,
}

/// Whether the connection on `socket` fell back to plain TCP, as the kernel
/// tells it: SOL_MPTCP options refused (EOPNOTSUPP, or ENOPROTOOPT on IPv6)
/// because they pass to the one TCP subflow, or MPTCP_INFO_FLAG_FALLBACK set.
/// A plain TCP socket reads as a fallback: that is what an MPTCP listener
/// accepts for a client without MPTCP (the kernel hands out the TCP
/// connection itself), so ask only about sockets meant to be MPTCP.
pub fn is_fallback(socket: &impl AsFd) -> Result<bool, MptcpError> {
    Ok(read_mptcp_info(socket.as_fd())?.is_none())
}

/// Each subflow's local and remote address alone (one getsockopt): what
/// [`super::JoinWatch`] polls. None on a fallback.
pub fn subflow_addresses(socket: &impl AsFd) -> Result<Option<Vec<(SocketAddr, SocketAddr)>>, MptcpError> {
    let read = subflow_array::<RawSubflowAddrs>(socket.as_fd(), MPTCP_SUBFLOW_ADDRS, "SOL_MPTCP, MPTCP_SUBFLOW_ADDRS")?;
    Ok(read.map(|(addrs, _)| {
        addrs
            .iter()
            .map(|a| (socket_addr(&a.local), socket_addr(&a.remote)))
            .collect()
    }))
}

/// The connection's MPTCP_INFO and each subflow's addresses and TCP_INFO.
pub fn connection(socket: &impl AsFd) -> Result<MptcpConnection, MptcpError> {
    let fd = socket.as_fd();
    let Some((raw, filled)) = read_mptcp_info(fd)? else {
        return fallback_connection(fd);
    };
    let mut conn = connection_of(&raw, filled);
    match read_subflows(fd)? {
        Some(subflows) => conn.subflows = subflows,
        // It fell back between the two reads.
        None => return fallback_connection(fd),
    }
    Ok(conn)
}

/// MPTCP_INFO and how many bytes of it the kernel filled; None on a fallback.
fn read_mptcp_info(fd: BorrowedFd) -> Result<Option<(RawMptcpInfo, usize)>, MptcpError> {
    match socket_protocol(fd) {
        Ok(libc::IPPROTO_TCP) => return Ok(None),
        Ok(IPPROTO_MPTCP) => {}
        Ok(protocol) => return Err(MptcpError::NotStream { protocol }),
        Err(source) => {
            return Err(MptcpError::Getsockopt {
                option: "SOL_SOCKET, SO_PROTOCOL",
                source,
            })
        }
    }
    let mut bytes = [0u8; size_of::<RawMptcpInfo>()];
    match getsockopt(fd, SOL_MPTCP, MPTCP_INFO, &mut bytes) {
        Ok(filled) => {
            let raw: RawMptcpInfo = from_prefix(&bytes[..filled]);
            let fell_back = raw.mptcpi_flags & MPTCP_INFO_FLAG_FALLBACK != 0;
            Ok((!fell_back).then_some((raw, filled)))
        }
        Err(e) => refused_as_fallback(e, "SOL_MPTCP, MPTCP_INFO").map(|()| None),
    }
}

/// Ok when a refused SOL_MPTCP option means the connection fell back: the
/// kernel passes the option to the TCP subflow, which knows no SOL_MPTCP.
fn refused_as_fallback(e: io::Error, option: &'static str) -> Result<(), MptcpError> {
    if !matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::ENOPROTOOPT)) {
        return Err(MptcpError::Getsockopt { option, source: e });
    }
    // Before 5.16 every MPTCP connection refuses SOL_MPTCP; distributions
    // that backported the options answer above and never get here.
    let release = kernel_release();
    match release_at_least(&release, 5, 16) {
        true => Ok(()),
        false => Err(MptcpError::KernelTooOld { release }),
    }
}

/// The MPTCP-level figures of a raw MPTCP_INFO of which `filled` bytes came
/// from the kernel.
fn connection_of(raw: &RawMptcpInfo, filled: usize) -> MptcpConnection {
    // A field counts only when the kernel wrote all of it.
    macro_rules! filled {
        ($field:ident) => {{
            let end = offset_of!(RawMptcpInfo, $field) + size_of_val(&raw.$field);
            (end <= filled).then_some(raw.$field)
        }};
    }
    MptcpConnection {
        fallback: false,
        remote_key_received: raw.mptcpi_flags & MPTCP_INFO_FLAG_REMOTE_KEY_RECEIVED != 0,
        token: raw.mptcpi_token,
        subflows: Vec::new(),
        extra_subflows: raw.mptcpi_subflows,
        extra_subflows_max: raw.mptcpi_subflows_max,
        subflows_total: filled!(mptcpi_subflows_total),
        add_addr_signal: raw.mptcpi_add_addr_signal,
        add_addr_signal_max: raw.mptcpi_add_addr_signal_max,
        add_addr_accepted: raw.mptcpi_add_addr_accepted,
        add_addr_accepted_max: raw.mptcpi_add_addr_accepted_max,
        local_addr_used: filled!(mptcpi_local_addr_used),
        local_addr_max: filled!(mptcpi_local_addr_max),
        checksum_enabled: filled!(mptcpi_csum_enabled).map(|c| c != 0),
        retransmits: filled!(mptcpi_retransmits),
        bytes_sent: filled!(mptcpi_bytes_sent),
        bytes_retrans: filled!(mptcpi_bytes_retrans),
        bytes_acked: filled!(mptcpi_bytes_acked),
        bytes_received: filled!(mptcpi_bytes_received),
        last_data_sent_ms: filled!(mptcpi_last_data_sent),
        last_data_received_ms: filled!(mptcpi_last_data_recv),
        last_ack_received_ms: filled!(mptcpi_last_ack_recv),
    }
}

/// A fallen-back connection: its one TCP connection, named by the socket's
/// own addresses and TCP_INFO (which the kernel passes to that subflow).
fn fallback_connection(fd: BorrowedFd) -> Result<MptcpConnection, MptcpError> {
    let socket = SockRef::from(&fd);
    let address = |a: io::Result<socket2::SockAddr>| a.ok().and_then(|a| a.as_socket()).unwrap_or(UNSPECIFIED);
    let mut bytes = [0u8; size_of::<libc::tcp_info>()];
    let filled =
        getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, &mut bytes).map_err(|source| MptcpError::Getsockopt {
            option: "SOL_TCP, TCP_INFO",
            source,
        })?;
    let info: libc::tcp_info = from_prefix(&bytes[..filled]);
    let subflow = subflow_of(&info, filled, address(socket.local_addr()), address(socket.peer_addr()));
    Ok(MptcpConnection {
        fallback: true,
        subflows: vec![subflow],
        ..MptcpConnection::default()
    })
}

const UNSPECIFIED: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));

/// Each subflow's addresses and TCP_INFO, paired in the kernel's list order;
/// None when the connection fell back meanwhile. The two options are two
/// walks of the subflow list, so a subflow that joins or closes between them
/// makes the counts differ: read both again.
fn read_subflows(fd: BorrowedFd) -> Result<Option<Vec<Subflow>>, MptcpError> {
    let mut detail = String::new();
    for _ in 0..SUBFLOW_READ_TRIES {
        let Some((infos, info_bytes)) = subflow_array::<libc::tcp_info>(fd, MPTCP_TCPINFO, "SOL_MPTCP, MPTCP_TCPINFO")?
        else {
            return Ok(None);
        };
        let Some((addrs, _)) =
            subflow_array::<RawSubflowAddrs>(fd, MPTCP_SUBFLOW_ADDRS, "SOL_MPTCP, MPTCP_SUBFLOW_ADDRS")?
        else {
            return Ok(None);
        };
        if infos.len() == addrs.len() {
            let subflows = infos
                .iter()
                .zip(&addrs)
                .map(|(info, a)| subflow_of(info, info_bytes, socket_addr(&a.local), socket_addr(&a.remote)))
                .collect();
            return Ok(Some(subflows));
        }
        detail = format!(
            "the last read listed {} addresses and {} TCP_INFOs",
            addrs.len(),
            infos.len()
        );
    }
    Err(MptcpError::SubflowsChanged {
        tries: SUBFLOW_READ_TRIES,
        detail,
    })
}

/// One of the array options: every subflow's element, each copied into a
/// zeroed `T`, and how many bytes of each the kernel filled (its stride,
/// smaller than `T` on a kernel with a shorter struct). Asks again with room
/// for all when more subflows exist than the first buffer held. None on a
/// fallback.
fn subflow_array<T: Plain>(
    fd: BorrowedFd,
    option: i32,
    name: &'static str,
) -> Result<Option<(Vec<T>, usize)>, MptcpError> {
    const HEADER: usize = size_of::<RawSubflowData>();
    let mut room = 4;
    for _ in 0..SUBFLOW_READ_TRIES {
        let mut buffer = vec![0u8; HEADER + room * size_of::<T>()];
        let header = RawSubflowData {
            size_subflow_data: HEADER as u32,
            num_subflows: 0,
            size_kernel: 0,
            size_user: size_of::<T>() as u32,
        };
        // SAFETY: the buffer holds at least HEADER bytes; unaligned write.
        unsafe { std::ptr::write_unaligned(buffer.as_mut_ptr() as *mut RawSubflowData, header) };
        let written = match getsockopt(fd, SOL_MPTCP, option, &mut buffer) {
            Ok(n) => n,
            Err(e) => return refused_as_fallback(e, name).map(|()| None),
        };
        match parse_subflow_array(&buffer[..written]) {
            SubflowArray::NeedsRoom(count) => room = count + 2,
            SubflowArray::Read(elements, filled) => return Ok(Some((elements, filled))),
        }
    }
    Err(MptcpError::SubflowsChanged {
        tries: SUBFLOW_READ_TRIES,
        detail: format!("{name} kept listing more subflows than it had room for"),
    })
}

/// What one answer to an array option holds.
#[derive(Debug)]
enum SubflowArray<T> {
    /// More subflows exist than the buffer had room for: this many.
    NeedsRoom(usize),
    /// Every subflow's element, and how many bytes of each the kernel filled.
    Read(Vec<T>, usize),
}

/// The header and elements the kernel wrote (`written`, the length it
/// returned): its `size_user` is the stride it used, smaller than `T` when its
/// struct is older than ours; each element is copied into a zeroed `T`.
fn parse_subflow_array<T: Plain>(written: &[u8]) -> SubflowArray<T> {
    const HEADER: usize = size_of::<RawSubflowData>();
    let header: RawSubflowData = from_prefix(written);
    let count = header.num_subflows as usize;
    let stride = header.size_user as usize;
    // The kernel copies an element only when a whole stride fits.
    let copied = match stride {
        0 => 0,
        _ => written.len().saturating_sub(HEADER) / stride,
    };
    if count > copied && stride > 0 {
        return SubflowArray::NeedsRoom(count);
    }
    let elements = (0..count.min(copied))
        .map(|i| from_prefix::<T>(&written[HEADER + i * stride..HEADER + (i + 1) * stride]))
        .collect();
    SubflowArray::Read(elements, stride.min(size_of::<T>()))
}

/// A subflow from its TCP_INFO, of which the kernel filled `filled` bytes.
fn subflow_of(info: &libc::tcp_info, filled: usize, local: SocketAddr, remote: SocketAddr) -> Subflow {
    macro_rules! filled {
        ($field:ident) => {{
            let end = offset_of!(libc::tcp_info, $field) + size_of_val(&info.$field);
            (end <= filled).then_some(info.$field)
        }};
    }
    // Rates: bytes/s in the struct, bits/s here; all ones means unlimited.
    let bits = |bytes_per_second: Option<u64>| bytes_per_second.map(|r| r as f64 * 8.0);
    Subflow {
        local,
        remote,
        state: tcp_state_name(info.tcpi_state).to_string(),
        bytes_sent: filled!(tcpi_bytes_sent),
        bytes_retrans: filled!(tcpi_bytes_retrans),
        bytes_acked: filled!(tcpi_bytes_acked),
        bytes_received: filled!(tcpi_bytes_received),
        total_retrans: info.tcpi_total_retrans,
        rtt_us: info.tcpi_rtt,
        rtt_var_us: info.tcpi_rttvar,
        min_rtt_us: filled!(tcpi_min_rtt),
        congestion_window_segments: info.tcpi_snd_cwnd,
        send_mss_bytes: info.tcpi_snd_mss,
        delivery_rate_bits_per_second: bits(filled!(tcpi_delivery_rate)),
        pacing_rate_bits_per_second: bits(filled!(tcpi_pacing_rate).filter(|&r| r != u64::MAX)),
        busy_us: filled!(tcpi_busy_time),
        last_data_sent_ms: info.tcpi_last_data_sent,
        last_data_received_ms: info.tcpi_last_data_recv,
        interface: None,
        joined_after_seconds: None,
    }
}

/// The kernel's TCP states (include/net/tcp_states.h), as `ss` names them.
fn tcp_state_name(state: u8) -> &'static str {
    const NAMES: [&str; 13] = [
        "UNKNOWN",
        "ESTABLISHED",
        "SYN_SENT",
        "SYN_RECV",
        "FIN_WAIT1",
        "FIN_WAIT2",
        "TIME_WAIT",
        "CLOSE",
        "CLOSE_WAIT",
        "LAST_ACK",
        "LISTEN",
        "CLOSING",
        "NEW_SYN_RECV",
    ];
    NAMES.get(usize::from(state)).copied().unwrap_or("UNKNOWN")
}

/// The address in one half of `struct mptcp_subflow_addrs`.
fn socket_addr(storage: &libc::sockaddr_storage) -> SocketAddr {
    let len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: a whole sockaddr_storage, which SockAddr reads by its family.
    let address = unsafe { socket2::SockAddr::new(*storage, len) };
    address.as_socket().unwrap_or(UNSPECIFIED)
}

/// getsockopt into `buffer`; how many bytes the kernel wrote.
fn getsockopt(fd: BorrowedFd, level: i32, option: i32, buffer: &mut [u8]) -> io::Result<usize> {
    let mut len = buffer.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `buffer`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            option,
            buffer.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    match rc {
        0 => Ok((len as usize).min(buffer.len())),
        _ => Err(io::Error::last_os_error()),
    }
}

/// SO_PROTOCOL: IPPROTO_MPTCP for an MPTCP socket, IPPROTO_TCP for plain TCP.
fn socket_protocol(fd: BorrowedFd) -> io::Result<i32> {
    let mut bytes = [0u8; size_of::<i32>()];
    getsockopt(fd, libc::SOL_SOCKET, libc::SO_PROTOCOL, &mut bytes)?;
    Ok(i32::from_ne_bytes(bytes))
}

/// The running kernel's release (`uname -r`).
fn kernel_release() -> String {
    // SAFETY: uname fills the zeroed struct with NUL-terminated strings.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut name) } != 0 {
        return String::new();
    }
    let bytes: Vec<u8> = name.release.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Whether a release such as `6.18.44-fc` is at least `major.minor`; an
/// unreadable one counts as new (it answered nothing worse than a refusal).
fn release_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().ok());
    match (numbers.next().flatten(), numbers.next().flatten()) {
        (Some(ma), Some(mi)) => (ma, mi) >= (major, minor),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::mptcp::open_socket;
    use crate::probe::mptcp::path_manager;
    use crate::probe::mptcp::test_support::{
        assert_sums, mptcp_connect, mptcp_here, mptcp_listener, print_figures, skip_or_fail, transfer,
    };
    use socket2::Domain;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn loopback_transfer_subflow_bytes_sum_to_the_connections() {
        if !mptcp_here() {
            return;
        }
        let t = transfer(1);
        print_figures("host namespace", &t);
        assert_sums(&t);
        // The initial subflow is the connection's own address pair, on both ends.
        let initial = (t.client_local, t.server);
        assert!(t.client_end.subflows.iter().any(|s| (s.local, s.remote) == initial));
        assert!(t.server_end.subflows.iter().any(|s| (s.remote, s.local) == initial));
        // Extra subflows come only from this host's endpoints, which may name
        // other addresses than loopback.
        if path_manager().endpoints.is_some_and(|e| e.is_empty()) {
            for s in t.client_end.subflows.iter().chain(&t.server_end.subflows) {
                assert!(s.local.ip().is_loopback() && s.remote.ip().is_loopback(), "{s:?}");
            }
        }
    }

    #[test]
    fn plain_tcp_client_of_an_mptcp_listener_is_a_fallback() {
        if !mptcp_here() {
            return;
        }
        let listener = mptcp_listener();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut accepted, _) = listener.accept().unwrap();
        client.write_all(&[7u8; 100_000]).unwrap();
        let mut buffer = vec![0u8; 100_000];
        accepted.read_exact(&mut buffer).unwrap();
        assert!(is_fallback(&accepted).unwrap());
        let end = connection(&accepted).unwrap();
        assert!(end.fallback);
        assert_eq!(end.bytes_received, None, "no MPTCP-level figures on a fallback");
        let [only] = end.subflows.as_slice() else {
            panic!("a fallback is one TCP connection: {end:?}")
        };
        assert_eq!(
            (only.local, only.remote),
            (listener.local_addr().unwrap(), client.local_addr().unwrap())
        );
        assert_eq!(only.bytes_received, Some(100_000));
    }

    #[test]
    fn mptcp_client_of_a_plain_tcp_listener_is_a_fallback() {
        if !mptcp_here() {
            return;
        }
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = mptcp_connect(listener.local_addr().unwrap());
        let _accepted = listener.accept().unwrap();
        assert!(is_fallback(&client).unwrap(), "the SYN-ACK carried no MP_CAPABLE");
        assert!(connection(&client).unwrap().fallback);
        // While an MPTCP connection of both ends is none.
        let mptcp = mptcp_listener();
        let client = mptcp_connect(mptcp.local_addr().unwrap());
        let (accepted, _) = mptcp.accept().unwrap();
        assert!(!is_fallback(&client).unwrap());
        assert!(!is_fallback(&accepted).unwrap());
    }

    #[test]
    fn an_ipv6_fallback_refused_with_enoprotoopt_is_a_fallback() {
        if !mptcp_here() {
            return;
        }
        // IPv6's getsockopt answers an unknown level with ENOPROTOOPT, not
        // IPv4's EOPNOTSUPP.
        let Ok(listener) = TcpListener::bind("[::1]:0") else {
            return skip_or_fail("no IPv6 loopback here (net.ipv6.conf.lo.disable_ipv6=1?)");
        };
        let socket = open_socket(Domain::IPV6).unwrap();
        socket.connect(&listener.local_addr().unwrap().into()).unwrap();
        let _accepted = listener.accept().unwrap();
        let end = connection(&socket).unwrap();
        assert!(end.fallback && is_fallback(&socket).unwrap());
        assert_eq!(end.subflows[0].remote, listener.local_addr().unwrap());
    }

    #[test]
    fn a_udp_socket_is_refused_by_name() {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = connection(&udp).unwrap_err();
        assert!(
            matches!(
                e,
                MptcpError::NotStream {
                    protocol: libc::IPPROTO_UDP
                }
            ),
            "{e}"
        );
    }
    #[test]
    fn an_older_kernels_shorter_mptcp_info_leaves_later_fields_unset() {
        let mut raw: RawMptcpInfo = from_prefix(&[]);
        raw.mptcpi_subflows = 1;
        raw.mptcpi_local_addr_used = 1;
        raw.mptcpi_bytes_sent = 999;
        // 5.16 to 6.4: the struct ends after the checksum flag, padded to 48.
        let older = connection_of(&raw, 48);
        assert_eq!((older.extra_subflows, older.local_addr_used), (1, Some(1)));
        assert_eq!(
            (older.bytes_sent, older.subflows_total, older.last_ack_received_ms),
            (None, None, None)
        );
        // Its first form: up to the sequence numbers (40 bytes).
        assert_eq!(connection_of(&raw, 40).local_addr_used, None);
        assert_eq!(connection_of(&raw, 96).bytes_sent, Some(999));
    }

    #[test]
    fn subflow_elements_are_read_at_the_kernels_stride() {
        // A kernel whose tcp_info ends after tcpi_bytes_received (Linux 4.1):
        // it writes that much of each element and says so in size_user.
        let stride = offset_of!(libc::tcp_info, tcpi_segs_out);
        let header = RawSubflowData {
            size_subflow_data: 16,
            num_subflows: 2,
            size_kernel: stride as u32,
            size_user: stride as u32,
        };
        let mut written = vec![0u8; 16 + 2 * stride];
        // SAFETY: the buffer holds the header; unaligned write.
        unsafe { std::ptr::write_unaligned(written.as_mut_ptr() as *mut RawSubflowData, header) };
        for (i, rtt) in [(0usize, 111u32), (1, 222)] {
            let at = 16 + i * stride + offset_of!(libc::tcp_info, tcpi_rtt);
            written[at..at + 4].copy_from_slice(&rtt.to_ne_bytes());
        }
        let SubflowArray::Read(infos, filled) = parse_subflow_array::<libc::tcp_info>(&written) else {
            panic!("both elements were written")
        };
        assert_eq!(infos.iter().map(|i| i.tcpi_rtt).collect::<Vec<_>>(), [111, 222]);
        assert_eq!(filled, stride);
        let subflow = subflow_of(&infos[1], filled, UNSPECIFIED, UNSPECIFIED);
        assert_eq!((subflow.rtt_us, subflow.bytes_received), (222, Some(0)));
        assert_eq!(
            (subflow.bytes_sent, subflow.delivery_rate_bits_per_second),
            (None, None)
        );
        // Room for one only: ask again for two.
        let short = &written[..16 + stride];
        assert!(matches!(
            parse_subflow_array::<libc::tcp_info>(short),
            SubflowArray::NeedsRoom(2)
        ));
    }
    #[test]
    fn kernel_releases_compare_by_major_and_minor() {
        assert!(release_at_least("6.18.44-fc-v657", 5, 16));
        assert!(release_at_least("5.16.0", 5, 16));
        assert!(!release_at_least("5.15.0-91-generic", 5, 16));
        assert!(!release_at_least("4.18.0-513.el8.x86_64", 5, 16));
        assert!(release_at_least("", 5, 16));
    }
}
