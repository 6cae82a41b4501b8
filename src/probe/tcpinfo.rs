//! TCP_INFO and the socket options we read back (granted buffer sizes,
//! congestion control).

use std::os::fd::AsRawFd;

use crate::model::{SocketBuffers, TcpInfo};

/// The kernel's TCP_INFO of a socket as the kernel lays it out, and how
/// many bytes of it the kernel filled (an older kernel fills less of the
/// struct; the rest stays zero). None when the kernel refuses.
pub fn raw_tcp_info(socket: &impl AsRawFd) -> Option<(libc::tcp_info, usize)> {
    // SAFETY: getsockopt writes at most `len` bytes into the zeroed struct.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some((info, len as usize))
}

/// Reads TCP_INFO of a connected socket; None when the kernel refuses.
pub fn tcp_info(socket: &impl AsRawFd) -> Option<TcpInfo> {
    // A field counts only when the kernel wrote all of it.
    let (info, filled) = raw_tcp_info(socket)?;
    // A field of the struct, widened to u64, when the kernel filled it.
    macro_rules! filled {
        ($field:ident) => {{
            let offset = std::mem::offset_of!(libc::tcp_info, $field);
            (offset + std::mem::size_of_val(&info.$field) <= filled).then_some(u64::from(info.$field))
        }};
    }
    // Rates: bytes/s in the struct, bits/s here; all ones means unlimited.
    let bits = |bytes_per_second: Option<u64>| bytes_per_second.map(|r| r as f64 * 8.0);
    Some(TcpInfo {
        retransmits: u64::from(info.tcpi_total_retrans),
        bytes_retransmitted: filled!(tcpi_bytes_retrans),
        bytes_sent: filled!(tcpi_bytes_sent),
        data_segments_sent: filled!(tcpi_data_segs_out),
        rtt_us: info.tcpi_rtt,
        rtt_var_us: info.tcpi_rttvar,
        congestion_window_segments: info.tcpi_snd_cwnd,
        send_mss_bytes: info.tcpi_snd_mss,
        receive_mss_bytes: info.tcpi_rcv_mss,
        path_mtu_bytes: info.tcpi_pmtu,
        advertised_mss_bytes: Some(info.tcpi_advmss),
        timestamps: Some(info.tcpi_options & TCPI_OPT_TIMESTAMPS != 0),
        congestion_control: congestion_control(socket).unwrap_or_default(),
        busy_us: filled!(tcpi_busy_time),
        rwnd_limited_us: filled!(tcpi_rwnd_limited),
        sndbuf_limited_us: filled!(tcpi_sndbuf_limited),
        pacing_rate_bits_per_second: bits(filled!(tcpi_pacing_rate).filter(|&r| r != u64::MAX)),
        delivery_rate_bits_per_second: bits(filled!(tcpi_delivery_rate)),
        peer_window_bytes: filled!(tcpi_snd_wnd).filter(|&w| w > 0),
    })
}

/// `tcpi_options`: the connection carries timestamps (linux/tcp.h).
const TCPI_OPT_TIMESTAMPS: u8 = 1;

/// Paces a socket's sending to `bits_per_second` (SO_MAX_PACING_RATE).
/// TCP paces itself to it since Linux 4.13 whatever the qdisc (an `fq`
/// qdisc paces in its place where there is one). The rate is given as a
/// 64-bit count of bytes per second; a kernel that takes only 32 bits
/// (before 5.1?) gets it capped at 4 GB/s, and says so in the log.
pub fn set_max_pacing_rate(socket: &impl AsRawFd, bits_per_second: u64) -> std::io::Result<()> {
    let bytes_per_second: u64 = (bits_per_second / 8).max(1);
    let set = |value: *const libc::c_void, len: usize| {
        // SAFETY: `value` points to `len` readable bytes for the call.
        let rc = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_MAX_PACING_RATE,
                value,
                len as libc::socklen_t,
            )
        };
        match rc {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    };
    match set(&bytes_per_second as *const u64 as *const libc::c_void, 8) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let narrow = bytes_per_second.min(u64::from(u32::MAX - 1)) as u32;
            if u64::from(narrow) < bytes_per_second {
                log::warn!(
                    "this kernel takes a 32-bit pacing rate: capped at {} instead of {}",
                    crate::units::Rate(f64::from(narrow) * 8.0),
                    crate::units::Rate(bits_per_second as f64)
                );
            }
            set(&narrow as *const u32 as *const libc::c_void, 4)
        }
        other => other,
    }
}

/// The socket's SO_MAX_PACING_RATE in bits per second; None when unset
/// (all ones) or unreadable.
pub fn max_pacing_rate(socket: &impl AsRawFd) -> Option<u64> {
    let mut value: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `value`.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            &mut value as *mut u64 as *mut libc::c_void,
            &mut len,
        )
    };
    let value = match (rc, len) {
        (0, 8) => value,
        (0, 4) => u64::from(value as u32),
        _ => return None,
    };
    // Unset reads as all ones; a rate whose bits overflow 64 bits is no
    // cap either (a kernel may hand back a large value that is not ~0).
    if value == u64::MAX || value == u64::from(u32::MAX) {
        return None;
    }
    value.checked_mul(8)
}

/// The congestion control algorithm in use on a TCP socket.
pub fn congestion_control(socket: &impl AsRawFd) -> Option<String> {
    let mut name = [0u8; 32];
    let mut len = name.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `name`.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if rc != 0 {
        return None;
    }
    let used = &name[..len as usize];
    let end = used.iter().position(|&b| b == 0).unwrap_or(used.len());
    Some(String::from_utf8_lossy(&used[..end]).into_owned())
}

/// The buffer sizes the kernel granted on a socket.
pub fn socket_buffers(socket: &socket2::Socket) -> SocketBuffers {
    SocketBuffers {
        send_buffer_bytes: socket.send_buffer_size().unwrap_or(0) as u64,
        receive_buffer_bytes: socket.recv_buffer_size().unwrap_or(0) as u64,
    }
}

/// Congestion control algorithms this kernel offers.
pub fn available_congestion_controls() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}
