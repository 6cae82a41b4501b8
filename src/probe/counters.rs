//! Counters read before and after each trial: the interface's sysfs
//! statistics, the interrupts of its queues (/proc/interrupts), TCP and UDP
//! counters of /proc/net/snmp, and the CPU throttling of this process's
//! cgroup ([`super::cgroup`]). Parsers take text, so tests run them on fixtures; [`CounterProbe`]
//! reads the kernel.

use std::collections::HashMap;
use std::fs;
use std::net::IpAddr;
use std::path::Path;
use std::time::Instant;

use super::cgroup::{self, CgroupStat, CpuCgroup};
use super::nic;
use crate::model::{CgroupCpu, InterruptCounters, NicCounters, SideCounters, TcpCounters, UdpCounters};

/// sysfs statistics files, in the order of [`NicStats`].
const NIC_STAT_FILES: [&str; 10] = [
    "rx_packets",
    "tx_packets",
    "rx_bytes",
    "tx_bytes",
    "rx_dropped",
    "tx_dropped",
    "rx_errors",
    "tx_errors",
    "rx_missed_errors",
    "rx_fifo_errors",
];

/// Raw readings of [`NIC_STAT_FILES`].
pub type NicStats = [u64; 10];

/// The counters of /proc/net/snmp this module uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Snmp {
    pub tcp_out_segments: u64,
    pub tcp_retransmitted_segments: u64,
    pub udp_in_datagrams: u64,
    pub udp_in_errors: u64,
    pub udp_receive_buffer_errors: u64,
    pub udp_send_buffer_errors: u64,
}

/// One reading of every counter.
#[derive(Debug, Clone)]
pub struct CounterSnapshot {
    pub at: Instant,
    pub nic: Option<NicStats>,
    pub interrupts: Option<u64>,
    pub snmp: Option<Snmp>,
    pub cgroup: Option<CgroupStat>,
}

/// What to read: the interface, its IRQs, this process's cgroup.
#[derive(Debug, Clone, Default)]
pub struct CounterProbe {
    pub interface: Option<String>,
    pub irqs: Vec<u32>,
    pub cgroup: Option<CpuCgroup>,
}

/// Parses /proc/net/snmp: pairs of header and value lines per protocol.
pub fn parse_snmp(text: &str) -> Option<Snmp> {
    let mut tables: HashMap<&str, HashMap<&str, u64>> = HashMap::new();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [header, values] = pair else { continue };
        let (Some((proto, names)), Some((proto2, numbers))) = (header.split_once(':'), values.split_once(':')) else {
            continue;
        };
        if proto != proto2 {
            continue;
        }
        let table = names
            .split_whitespace()
            .zip(numbers.split_whitespace())
            .filter_map(|(n, v)| Some((n, v.parse::<i64>().ok()? as u64)))
            .collect();
        tables.insert(proto, table);
    }
    let tcp = tables.get("Tcp")?;
    let udp = tables.get("Udp")?;
    Some(Snmp {
        tcp_out_segments: *tcp.get("OutSegs")?,
        tcp_retransmitted_segments: *tcp.get("RetransSegs")?,
        udp_in_datagrams: *udp.get("InDatagrams")?,
        udp_in_errors: *udp.get("InErrors")?,
        udp_receive_buffer_errors: udp.get("RcvbufErrors").copied().unwrap_or(0),
        udp_send_buffer_errors: udp.get("SndbufErrors").copied().unwrap_or(0),
    })
}

/// Sum over all CPUs of the /proc/interrupts lines whose IRQ number is in
/// `irqs`, or whose description names `interface` (`eth0-TxRx-0`).
/// Returns the IRQ numbers that matched and their total count.
pub fn parse_interrupts(text: &str, irqs: &[u32], interface: Option<&str>) -> (Vec<u32>, u64) {
    let mut lines = text.lines();
    let cpus = lines.next().map(|h| h.split_whitespace().count()).unwrap_or(0);
    let mut matched = Vec::new();
    let mut total = 0;
    for line in lines {
        let Some((label, rest)) = line.split_once(':') else {
            continue;
        };
        let Ok(irq) = label.trim().parse::<u32>() else { continue };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let description = fields.get(cpus..).map(|d| d.join(" ")).unwrap_or_default();
        let names_interface = interface.is_some_and(|name| {
            description
                .split(|c: char| c.is_whitespace() || c == '-' || c == '@')
                .any(|token| token == name)
        });
        if irqs.contains(&irq) || names_interface {
            matched.push(irq);
            total += fields
                .iter()
                .take(cpus)
                .filter_map(|v| v.parse::<u64>().ok())
                .sum::<u64>();
        }
    }
    (matched, total)
}

fn percent(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 * 100.0 / whole as f64)
}

/// IRQ numbers of the device behind an interface (MSI/MSI-X vectors, or
/// its legacy line).
fn device_irqs(interface: &str) -> Vec<u32> {
    let dir = Path::new("/sys/class/net").join(interface);
    let Some(pci) = nic::pci_device(&dir) else {
        return Vec::new();
    };
    let mut irqs: Vec<u32> = fs::read_dir(pci.join("msi_irqs"))
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    if irqs.is_empty() {
        if let Some(irq) = fs::read_to_string(pci.join("irq"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            irqs.push(irq);
        }
    }
    irqs.sort_unstable();
    irqs
}

impl CounterProbe {
    /// Counters of the interface holding `local`, and of this process's cgroup.
    pub fn for_local_address(local: Option<IpAddr>) -> CounterProbe {
        let interface = local.and_then(nic::interface_with_address);
        let irqs = interface.as_deref().map(device_irqs).unwrap_or_default();
        let cgroup = cgroup::locate();
        CounterProbe {
            interface,
            irqs,
            cgroup,
        }
    }

    pub fn snapshot(&self) -> CounterSnapshot {
        let nic = self.interface.as_ref().and_then(|name| {
            let dir = Path::new("/sys/class/net").join(name).join("statistics");
            let mut stats = [0u64; 10];
            for (slot, file) in stats.iter_mut().zip(NIC_STAT_FILES) {
                *slot = fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok()?;
            }
            Some(stats)
        });
        let interrupts = fs::read_to_string("/proc/interrupts").ok().and_then(|text| {
            let (matched, total) = parse_interrupts(&text, &self.irqs, self.interface.as_deref());
            (!matched.is_empty()).then_some(total)
        });
        let cgroup = self.cgroup.as_ref().and_then(CpuCgroup::read);
        CounterSnapshot {
            at: Instant::now(),
            nic,
            interrupts,
            snmp: fs::read_to_string("/proc/net/snmp").ok().and_then(|t| parse_snmp(&t)),
            cgroup,
        }
    }

    /// The changes between two snapshots.
    pub fn delta(&self, before: &CounterSnapshot, after: &CounterSnapshot) -> SideCounters {
        let seconds = after.at.saturating_duration_since(before.at).as_secs_f64();
        let nic = before.nic.zip(after.nic).map(|(b, a)| {
            let d: Vec<u64> = a.iter().zip(b.iter()).map(|(a, b)| a.saturating_sub(*b)).collect();
            NicCounters {
                rx_packets: d[0],
                tx_packets: d[1],
                rx_bytes: d[2],
                tx_bytes: d[3],
                rx_dropped: d[4],
                tx_dropped: d[5],
                rx_errors: d[6],
                tx_errors: d[7],
                rx_missed_errors: d[8],
                rx_fifo_errors: d[9],
            }
        });
        let interrupts = before.interrupts.zip(after.interrupts).map(|(b, a)| {
            let count = a.saturating_sub(b);
            let packets = nic.as_ref().map(|n| n.rx_packets + n.tx_packets);
            InterruptCounters {
                irqs: self.irqs.clone(),
                interrupts: count,
                interrupts_per_second: if seconds > 0.0 { count as f64 / seconds } else { 0.0 },
                packets_per_interrupt: packets.filter(|_| count > 0).map(|p| p as f64 / count as f64),
            }
        });
        let snmp = before.snmp.zip(after.snmp);
        let tcp = snmp.map(|(b, a)| {
            let out = a.tcp_out_segments.saturating_sub(b.tcp_out_segments);
            let retransmitted = a
                .tcp_retransmitted_segments
                .saturating_sub(b.tcp_retransmitted_segments);
            TcpCounters {
                out_segments: out,
                retransmitted_segments: retransmitted,
                retransmitted_percent: percent(retransmitted, out),
            }
        });
        let udp = snmp.map(|(b, a)| {
            let delivered = a.udp_in_datagrams.saturating_sub(b.udp_in_datagrams);
            let errors = a.udp_in_errors.saturating_sub(b.udp_in_errors);
            let buffer = a.udp_receive_buffer_errors.saturating_sub(b.udp_receive_buffer_errors);
            UdpCounters {
                in_datagrams: delivered,
                in_errors: errors,
                receive_buffer_errors: buffer,
                send_buffer_errors: a.udp_send_buffer_errors.saturating_sub(b.udp_send_buffer_errors),
                receive_buffer_errors_percent: percent(buffer, delivered + errors.max(buffer)),
            }
        });
        let cgroup_cpu = before
            .cgroup
            .as_ref()
            .zip(after.cgroup.as_ref())
            .filter(|(_, a)| a.quota_us.is_some())
            .map(|(b, a)| {
                let periods = a.periods.saturating_sub(b.periods);
                let throttled = a.throttled_periods.saturating_sub(b.throttled_periods);
                CgroupCpu {
                    cgroup: self.cgroup.as_ref().map(|c| c.path.clone()).unwrap_or_default(),
                    periods,
                    throttled_periods: throttled,
                    throttled_seconds: a.throttled_ns.saturating_sub(b.throttled_ns) as f64 / 1e9,
                    throttled_percent_of_periods: percent(throttled, periods),
                    quota_us: a.quota_us,
                    period_us: a.period_us,
                }
            });
        SideCounters {
            interface: self.interface.clone(),
            seconds,
            nic,
            interrupts,
            tcp,
            udp,
            cgroup_cpu,
            scheduling: None,
            packet_work: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::time::Duration;

    const SNMP: &str = "Ip: Forwarding DefaultTTL\nIp: 2 64\n\
        Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n\
        Tcp: 1 200 120000 -1 88 67 1 14 2 3280615 3785952 416 0 15 0\n\
        Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
        Udp: 43 0 5 44 4 1 0 0 0\n";

    const INTERRUPTS: &str = "           CPU0       CPU1       \n\
         26:          0          7  IO-APIC   4-edge      ttyS0\n\
         38:          0       3663  PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n\
         39:       3006          0  PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0\n\
         52:        100        200  PCI-MSI 524288-edge      eth1-TxRx-0\n\
        NMI:          0          0   Non-maskable interrupts\n";

    #[test]
    fn snmp_gives_tcp_and_udp_counters() {
        let s = parse_snmp(SNMP).unwrap();
        assert_eq!(s.tcp_out_segments, 3785952);
        assert_eq!(s.tcp_retransmitted_segments, 416);
        assert_eq!(s.udp_in_datagrams, 43);
        assert_eq!(s.udp_in_errors, 5);
        assert_eq!(s.udp_receive_buffer_errors, 4);
        assert_eq!(parse_snmp("Ip: a\nIp: 1\n"), None);
    }

    #[test]
    fn interrupts_match_by_number_or_by_interface_name() {
        let (irqs, total) = parse_interrupts(INTERRUPTS, &[38, 39], None);
        assert_eq!(irqs, vec![38, 39]);
        assert_eq!(total, 3663 + 3006);
        let (irqs, total) = parse_interrupts(INTERRUPTS, &[], Some("eth1"));
        assert_eq!((irqs, total), (vec![52], 300));
        // "eth" alone is not "eth1": names match whole tokens.
        assert_eq!(parse_interrupts(INTERRUPTS, &[], Some("eth")).1, 0);
        assert_eq!(parse_interrupts("", &[1], None), (vec![], 0));
    }

    fn snapshot(at: Instant, packets: u64, irq: u64, snmp: Snmp) -> CounterSnapshot {
        let mut nic = [0u64; 10];
        nic[0] = packets;
        nic[1] = packets;
        nic[4] = packets / 100;
        CounterSnapshot {
            at,
            nic: Some(nic),
            interrupts: Some(irq),
            snmp: Some(snmp),
            cgroup: Some(CgroupStat {
                periods: packets,
                throttled_periods: packets / 2,
                throttled_ns: 0,
                quota_us: Some(20_000),
                period_us: Some(100_000),
            }),
        }
    }

    #[test]
    fn deltas_give_rates_and_shares() {
        let probe = CounterProbe {
            interface: Some("eth1".into()),
            irqs: vec![52],
            cgroup: Some(CpuCgroup {
                path: "/x".into(),
                dir: PathBuf::from("/nonexistent"),
                version: cgroup::Version::V1,
            }),
        };
        let t0 = Instant::now();
        let before = snapshot(t0, 1000, 10, Snmp::default());
        let after = snapshot(
            t0 + Duration::from_secs(2),
            21000,
            1010,
            Snmp {
                tcp_out_segments: 1000,
                tcp_retransmitted_segments: 21,
                udp_in_datagrams: 52,
                udp_in_errors: 48,
                udp_receive_buffer_errors: 48,
                udp_send_buffer_errors: 0,
            },
        );
        let d = probe.delta(&before, &after);
        let nic = d.nic.unwrap();
        assert_eq!(nic.rx_packets, 20000);
        assert_eq!(nic.rx_dropped, 200);
        let irq = d.interrupts.unwrap();
        assert_eq!(irq.interrupts, 1000);
        assert!((irq.interrupts_per_second - 500.0).abs() < 1e-9);
        assert!((irq.packets_per_interrupt.unwrap() - 40.0).abs() < 1e-9);
        assert!((d.tcp.unwrap().retransmitted_percent.unwrap() - 2.1).abs() < 1e-9);
        assert!((d.udp.unwrap().receive_buffer_errors_percent.unwrap() - 48.0).abs() < 1e-9);
        let cg = d.cgroup_cpu.unwrap();
        assert_eq!((cg.periods, cg.throttled_periods), (20000, 10000));
        assert_eq!(cg.throttled_percent_of_periods, Some(50.0));
    }

    #[test]
    fn missing_readings_give_missing_deltas() {
        let probe = CounterProbe::default();
        let empty = CounterSnapshot {
            at: Instant::now(),
            nic: None,
            interrupts: None,
            snmp: None,
            cgroup: None,
        };
        let d = probe.delta(&empty, &empty);
        assert_eq!((d.nic, d.interrupts, d.tcp, d.cgroup_cpu), (None, None, None, None));
    }
}
