//! Applying a [`HostSetting`] to an interface of this host: offloads,
//! rings and coalescing through the ethtool ioctl, the root qdisc through
//! rtnetlink (no `ethtool` or `tc` process). Needs CAP_NET_ADMIN. What took
//! is read back by the caller from the interface's facts; an error here
//! says what the kernel or driver refused, naming the driver and the errno.

use std::io;

use super::ethtool::{self, CoalesceChange, Ethtool, FEATURES_UNSUPPORTED};
use crate::model::HostSetting;

/// The kernel features behind an offload name of a plan (what `ethtool -K`
/// switches together); the first is the one the facts report.
pub fn kernel_features(offload: &str) -> &'static [&'static str] {
    match offload {
        "tso" => &[
            "tx-tcp-segmentation",
            "tx-tcp-ecn-segmentation",
            "tx-tcp-mangleid-segmentation",
            "tx-tcp6-segmentation",
        ],
        "gso" => &["tx-generic-segmentation"],
        "gro" => &["rx-gro"],
        "lro" => &["rx-lro"],
        "sg" => &["tx-scatter-gather"],
        "rx-checksum" => &["rx-checksum"],
        "tx-checksum" => &[
            "tx-checksum-ipv4",
            "tx-checksum-ip-generic",
            "tx-checksum-ipv6",
            "tx-checksum-sctp",
        ],
        _ => &[],
    }
}

/// "EOPNOTSUPP", "EPERM", ...: the errno a reader can look up.
pub fn errno_name(error: &io::Error) -> String {
    let name = match error.raw_os_error() {
        Some(libc::EOPNOTSUPP) => "EOPNOTSUPP",
        Some(libc::EPERM) => "EPERM (needs root: CAP_NET_ADMIN)",
        Some(libc::EINVAL) => "EINVAL",
        Some(libc::ENOENT) => "ENOENT",
        Some(libc::ENODEV) => "ENODEV",
        Some(libc::EBUSY) => "EBUSY",
        Some(libc::ERANGE) => "ERANGE",
        _ => return error.to_string(),
    };
    name.to_string()
}

/// Sets `setting` on `interface`.
pub fn apply(interface: &str, setting: &HostSetting) -> Result<(), String> {
    if let HostSetting::Qdisc { kind } = setting {
        let index = std::fs::read_to_string(format!("/sys/class/net/{interface}/ifindex"))
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
            .filter(|_| !interface.contains('/'))
            .ok_or_else(|| format!("no interface {interface}"))?;
        return super::qdisc::replace_root(index, kind).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) => {
                format!("{interface}: this kernel has no qdisc {kind} (not built, or its module is not loaded): ENOENT")
            }
            _ => format!("{interface}: cannot make {kind} the root qdisc: {}", errno_name(&e)),
        });
    }
    let tool = Ethtool::open(interface).ok_or_else(|| format!("'{interface}' is not an interface name"))?;
    let driver = tool
        .driver_info()
        .and_then(|d| d.driver)
        .unwrap_or_else(|| "of this interface".into());
    match setting {
        HostSetting::Offloads { features } => {
            let table = tool
                .feature_table()
                .map_err(|e| format!("the driver {driver} lists no features: {}", errno_name(&e)))?;
            let mut changes = Vec::new();
            for (name, &on) in features {
                let kernel = kernel_features(name);
                let find = |k: &str| table.iter().find(|f| f.name == k);
                let main = kernel
                    .first()
                    .and_then(|k| find(k))
                    .ok_or_else(|| format!("the driver {driver} does not have the offload {name}"))?;
                if !main.changeable && main.active != on {
                    return Err(format!(
                        "the driver {driver} cannot switch {name} {} ({} is fixed {})",
                        if on { "on" } else { "off" },
                        main.name,
                        if main.active { "on" } else { "off" }
                    ));
                }
                changes.extend(
                    kernel
                        .iter()
                        .filter_map(|k| find(k))
                        .filter(|f| f.changeable)
                        .map(|f| (f.index, on)),
                );
            }
            if changes.is_empty() {
                return Ok(());
            }
            let flags = tool
                .set_features(table.len(), &changes)
                .map_err(|e| format!("the driver {driver} refused the offloads: {}", errno_name(&e)))?;
            if flags & FEATURES_UNSUPPORTED != 0 {
                return Err(format!("the driver {driver} cannot change some of these offloads"));
            }
            Ok(())
        }
        HostSetting::Rings { rx, tx } => {
            let not = |e: io::Error| format!("the driver {driver} does not support ring sizes: {}", errno_name(&e));
            let current = tool.ring_words().map_err(not)?;
            let words = ethtool::ring_request(current, *rx, *tx).map_err(|e| format!("the driver {driver}: {e}"))?;
            tool.set_ring_words(words).map_err(|e| {
                format!(
                    "the driver {driver} refused ring sizes {}: {}",
                    setting.text(),
                    errno_name(&e)
                )
            })
        }
        HostSetting::Coalesce {
            rx_usecs,
            tx_usecs,
            rx_frames,
            tx_frames,
            adaptive_rx,
            adaptive_tx,
        } => {
            let not = |e: io::Error| {
                format!(
                    "the driver {driver} does not support interrupt coalescing: {}",
                    errno_name(&e)
                )
            };
            let current = tool.coalesce_words().map_err(not)?;
            let words = ethtool::coalesce_request(
                current,
                &CoalesceChange {
                    rx_usecs: *rx_usecs,
                    rx_frames: *rx_frames,
                    tx_usecs: *tx_usecs,
                    tx_frames: *tx_frames,
                    adaptive_rx: *adaptive_rx,
                    adaptive_tx: *adaptive_tx,
                },
            );
            tool.set_coalesce_words(words).map_err(|e| {
                format!(
                    "the driver {driver} refused coalescing {}: {}",
                    setting.text(),
                    errno_name(&e)
                )
            })
        }
        HostSetting::Qdisc { .. } => unreachable!("handled above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_offload_of_a_plan_has_kernel_features() {
        for name in crate::model::settings::OFFLOADS {
            assert!(!kernel_features(name).is_empty(), "{name}");
        }
        assert!(kernel_features("tsoo").is_empty());
    }

    #[test]
    fn errno_names_are_the_ones_a_reader_can_look_up() {
        assert_eq!(
            errno_name(&io::Error::from_raw_os_error(libc::EOPNOTSUPP)),
            "EOPNOTSUPP"
        );
        assert!(errno_name(&io::Error::from_raw_os_error(libc::EPERM)).starts_with("EPERM"));
    }

    #[test]
    fn loopback_has_no_rings_and_says_so_with_the_errno() {
        // Loopback exists in every namespace and has no ring parameters:
        // the error path of a driver without them, without changing anything.
        let e = apply("lo", &HostSetting::parse("rings", "rx=256").unwrap()).unwrap_err();
        assert!(e.contains("does not support ring sizes: EOPNOTSUPP"), "{e}");
        let e = apply("lo", &HostSetting::parse("coalesce", "rx-usecs=0").unwrap()).unwrap_err();
        assert!(e.contains("does not support interrupt coalescing: EOPNOTSUPP"), "{e}");
        let e = apply("no/such", &HostSetting::parse("qdisc", "pfifo").unwrap()).unwrap_err();
        assert!(e.contains("no interface"), "{e}");
    }
}
