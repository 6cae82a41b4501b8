//! Reading and setting an interface's MTU: the one host setting a plan
//! changes between cases. Set through the SIOCSIFMTU ioctl (what `ip link
//! set mtu` does through rtnetlink), read back from sysfs.

use std::io;

/// The MTU the kernel reports for `interface` now.
pub fn mtu_of(interface: &str) -> io::Result<u32> {
    check_name(interface)?;
    let text = std::fs::read_to_string(format!("/sys/class/net/{interface}/mtu"))?;
    text.trim()
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("unreadable MTU '{}'", text.trim())))
}

fn check_name(interface: &str) -> io::Result<()> {
    let ok = !interface.is_empty()
        && interface.len() < libc::IFNAMSIZ
        && !interface.contains(['/', '\0'])
        && interface != "."
        && interface != "..";
    if ok {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("'{interface}' is not an interface name"),
        ))
    }
}

/// Sets the MTU of `interface` (needs CAP_NET_ADMIN) and reads it back.
pub fn set_mtu(interface: &str, mtu: u32) -> io::Result<u32> {
    check_name(interface)?;
    let mtu_c = libc::c_int::try_from(mtu).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "MTU too large"))?;
    // SAFETY: a datagram socket only as a handle for the ioctl; closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: ifreq is plain old data; zeroed is a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(interface.bytes()) {
        *slot = byte as libc::c_char;
    }
    request.ifr_ifru.ifru_mtu = mtu_c;
    // SAFETY: fd is open, request is a valid ifreq with a NUL-terminated name.
    let result = unsafe { libc::ioctl(fd, libc::SIOCSIFMTU as _, &mut request) };
    let error = io::Error::last_os_error();
    // SAFETY: closing the socket opened above.
    unsafe { libc::close(fd) };
    if result < 0 {
        return Err(match error.raw_os_error() {
            Some(libc::EPERM) => io::Error::new(
                io::ErrorKind::PermissionDenied,
                "setting an MTU needs root (CAP_NET_ADMIN)",
            ),
            Some(libc::EINVAL) => io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{interface} does not accept MTU {mtu} (outside what its driver allows)"),
            ),
            _ => error,
        });
    }
    mtu_of(interface)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_leave_sysfs_are_refused() {
        for bad in ["", "..", "a/b", "averyveryverylongname"] {
            assert!(mtu_of(bad).is_err(), "{bad}");
            assert!(set_mtu(bad, 1500).is_err(), "{bad}");
        }
    }

    #[test]
    fn loopback_has_an_mtu() {
        assert!(mtu_of("lo").unwrap() >= 1280);
    }
}
