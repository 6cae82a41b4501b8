//! Facts about the host, recorded with every result.

use std::fs;

use crate::model::HostFacts;

/// Facts about the machine this process runs on.
pub fn local_facts() -> HostFacts {
    HostFacts {
        hostname: hostname(),
        kernel: kernel_release(),
        cpu_model: cpu_model(&fs::read_to_string("/proc/cpuinfo").unwrap_or_default()),
        logical_cpus: std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1),
        nicbench_version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

pub fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn kernel_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// Addresses of the interface called `name` (getifaddrs); an error when no
/// interface has that name.
pub fn interface_addresses(name: &str) -> std::io::Result<Vec<std::net::IpAddr>> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we free below; we only read it.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut found = false;
    let mut addresses = Vec::new();
    let mut cursor = head;
    while !cursor.is_null() {
        // SAFETY: cursor walks the list getifaddrs returned.
        let entry = unsafe { &*cursor };
        cursor = entry.ifa_next;
        let entry_name = unsafe { std::ffi::CStr::from_ptr(entry.ifa_name) };
        if entry_name.to_bytes() != name.as_bytes() {
            continue;
        }
        found = true;
        if entry.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: the family says which sockaddr type the pointer holds.
        unsafe {
            match i32::from((*entry.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sin = &*(entry.ifa_addr as *const libc::sockaddr_in);
                    addresses.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))));
                }
                libc::AF_INET6 => {
                    let sin6 = &*(entry.ifa_addr as *const libc::sockaddr_in6);
                    addresses.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
                }
                _ => {}
            }
        }
    }
    // SAFETY: head came from getifaddrs.
    unsafe { libc::freeifaddrs(head) };
    if found {
        Ok(addresses)
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("no interface '{name}'"),
        ))
    }
}

/// The first `model name` of /proc/cpuinfo.
pub fn cpu_model(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .find_map(|l| {
            let (key, value) = l.split_once(':')?;
            (key.trim() == "model name").then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_interface_has_its_address() {
        let addresses = interface_addresses("lo").unwrap();
        assert!(addresses.contains(&"127.0.0.1".parse().unwrap()), "{addresses:?}");
        assert!(interface_addresses("no-such-if0").is_err());
    }

    #[test]
    fn cpu_model_comes_from_the_first_model_name() {
        let text = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t: x\n\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(cpu_model(text), "AMD EPYC 7B13");
        assert_eq!(cpu_model(""), "unknown");
    }
}
