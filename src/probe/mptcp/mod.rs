//! Multipath TCP as this host and one connection see it (issue 45's groundwork):
//! whether this kernel and network namespace open MPTCP sockets, and what to enable
//! when they do not; a connection's figures read back from the kernel with
//! getsockopt(SOL_MPTCP) — MPTCP_INFO for the connection, MPTCP_TCPINFO and
//! MPTCP_SUBFLOW_ADDRS for each subflow — or the fact that it fell back to plain
//! TCP; and the path manager's limits, endpoints and `net.mptcp.*` sysctls.
//!
//! The parts: `socket.rs` reads one connection's figures, `joins.rs` times its
//! subflows' joins, `path_manager.rs` the namespace's path manager, and `test_support.rs` holds what their tests share;
//! this file says whether MPTCP can be used at all and opens its sockets.

mod joins;
mod path_manager;
mod socket;
#[cfg(test)]
mod test_support;

use std::io;

use socket2::{Domain, Protocol, Socket, Type};

pub use joins::JoinWatch;
pub use path_manager::{parse_endpoints, parse_limits, path_manager, Endpoint, Limits, PathManager};
pub use socket::{connection, is_fallback, MptcpConnection, Subflow};

/// The protocol number of `socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)`.
pub const IPPROTO_MPTCP: i32 = 262;
/// The getsockopt level of MPTCP's own options.
pub const SOL_MPTCP: i32 = 284;
/// `struct mptcp_info` of the connection.
pub const MPTCP_INFO: i32 = 1;
/// `struct mptcp_subflow_data`, then one `struct tcp_info` per subflow.
pub const MPTCP_TCPINFO: i32 = 2;
/// `struct mptcp_subflow_data`, then one `struct mptcp_subflow_addrs` per subflow.
pub const MPTCP_SUBFLOW_ADDRS: i32 = 3;
/// Where this namespace's MPTCP sysctls live (each network namespace has its own).
const SYSCTL_DIR: &str = "/proc/sys/net/mptcp";

/// Why MPTCP cannot be used here, or a connection's figures cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum MptcpError {
    #[error(
        "this kernel has no MPTCP (CONFIG_MPTCP, Linux 5.6+; for IPv6 also CONFIG_MPTCP_IPV6): \
         socket(IPPROTO_MPTCP) failed with {0}; boot a kernel built with it, or run without MPTCP"
    )]
    NoKernelSupport(io::Error),
    #[error(
        "MPTCP is disabled in this network namespace: sysctl -w net.mptcp.enabled=1 \
         (as root, in the namespace nicbench runs in; a container's namespace has its own)"
    )]
    Disabled,
    #[error(
        "cannot open an MPTCP socket: {0}; a security policy (seccomp, SELinux, a container \
         runtime) may forbid protocol 262, or the process is out of file descriptors"
    )]
    Socket(io::Error),
    #[error(
        "this socket's protocol is {protocol}, neither TCP nor MPTCP: MPTCP figures exist only \
         for a socket opened with IPPROTO_MPTCP or accepted from an MPTCP listener"
    )]
    NotStream { protocol: i32 },
    #[error(
        "this kernel ({release}) cannot report MPTCP figures: getsockopt(SOL_MPTCP) came in \
         Linux 5.16, and before it a fallback cannot be told from MPTCP; run on a newer kernel, \
         or read the connection with `ss -tiM`"
    )]
    KernelTooOld { release: String },
    #[error(
        "getsockopt({option}) failed: {source}; pass a connected MPTCP socket that is still \
         open"
    )]
    Getsockopt { option: &'static str, source: io::Error },
    #[error(
        "subflows joined or closed while they were read ({tries} tries; {detail}); read again \
         once the connection is steady"
    )]
    SubflowsChanged { tries: usize, detail: String },
}

/// Ok when this network namespace can open MPTCP sockets (IPv4); otherwise
/// what to enable.
pub fn availability() -> Result<(), MptcpError> {
    if enabled_sysctl().as_deref() == Some("0") {
        return Err(MptcpError::Disabled);
    }
    open_socket(Domain::IPV4).map(drop)
}

/// An unconnected MPTCP stream socket of `domain`, or why there is none.
pub fn open_socket(domain: Domain) -> Result<Socket, MptcpError> {
    Socket::new(domain, Type::STREAM, Some(Protocol::MPTCP))
        .map_err(|e| explain_socket_error(e, enabled_sysctl().as_deref()))
}

/// `net.mptcp.enabled` of this thread's network namespace; None without MPTCP.
fn enabled_sysctl() -> Option<String> {
    let path = format!("{SYSCTL_DIR}/enabled");
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// What a failed socket(IPPROTO_MPTCP) means. `enabled` is the namespace's
/// `net.mptcp.enabled` (None: the sysctl does not exist).
fn explain_socket_error(e: io::Error, enabled: Option<&str>) -> MptcpError {
    match e.raw_os_error() {
        // mptcp_init_sock refuses a namespace with net.mptcp.enabled=0 so.
        Some(libc::ENOPROTOOPT) => MptcpError::Disabled,
        // No protocol 262 registered (EPROTONOSUPPORT), or a kernel whose
        // IPPROTO_MAX is below it (EINVAL).
        Some(libc::EPROTONOSUPPORT | libc::EINVAL) if enabled == Some("0") => MptcpError::Disabled,
        Some(libc::EPROTONOSUPPORT | libc::EINVAL) => MptcpError::NoKernelSupport(e),
        _ => MptcpError::Socket(e),
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{in_new_namespace, mptcp_here};
    use super::*;

    #[test]
    fn availability_passes_here() {
        if mptcp_here() {
            assert!(availability().is_ok());
        }
    }
    #[test]
    fn disabled_namespace_is_refused_with_what_to_enable() {
        if !mptcp_here() {
            return;
        }
        let refused = in_new_namespace(|| {
            std::fs::write(format!("{SYSCTL_DIR}/enabled"), "0").unwrap();
            let socket = open_socket(Domain::IPV4).map(drop);
            (availability(), socket)
        });
        let Some((availability, socket)) = refused else { return };
        for outcome in [availability, socket] {
            let e = outcome.unwrap_err();
            assert!(matches!(e, MptcpError::Disabled), "{e}");
            assert!(e.to_string().contains("sysctl -w net.mptcp.enabled=1"), "{e}");
        }
    }

    #[test]
    fn socket_errors_name_what_to_enable() {
        let errno = io::Error::from_raw_os_error;
        let no_mptcp = explain_socket_error(errno(libc::EPROTONOSUPPORT), None);
        assert!(no_mptcp
            .to_string()
            .contains("this kernel has no MPTCP (CONFIG_MPTCP, Linux 5.6+"));
        assert!(matches!(
            explain_socket_error(errno(libc::EINVAL), Some("1")),
            MptcpError::NoKernelSupport(_)
        ));
        assert!(matches!(
            explain_socket_error(errno(libc::ENOPROTOOPT), Some("0")),
            MptcpError::Disabled
        ));
        assert!(matches!(
            explain_socket_error(errno(libc::EPROTONOSUPPORT), Some("0")),
            MptcpError::Disabled
        ));
        assert!(matches!(
            explain_socket_error(errno(libc::EACCES), Some("1")),
            MptcpError::Socket(_)
        ));
    }
}
